/*
 * CR_TARGET_CLONES: the attribute of the fast kernels' loops that are
 * compiled once per ISA. Only kernels/fast/ uses it; the reference kernels
 * carry no ISA attributes.
 */
#ifndef CPU_REF_TARGET_CLONES_H_
#define CPU_REF_TARGET_CLONES_H_

#include <stdint.h>

/* Loops that gain from wider vectors are compiled for AVX-512, AVX2 and the
 * baseline, the variant picked at load time by the CPU (GCC's function
 * multi-versioning, on x86-64 Linux with glibc; elsewhere one baseline
 * version). Multi-versioning resolves through IFUNC relocations, which
 * musl's loader does not support (and GCC for musl targets refuses), so
 * __GLIBC__ (defined by <stdint.h>) is required too.
 * Without -ffast-math (and with ISO C's default of no contraction into
 * fused multiply-adds) every variant computes the same results. Not under
 * ThreadSanitizer: it instruments the resolvers, which a program linking
 * the kernels runs while it is relocated, before the sanitizer's runtime
 * has started (a segfault before main). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    defined(__GLIBC__) && !defined(__SANITIZE_THREAD__)
#define CR_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CR_TARGET_CLONES
#endif

#endif /* CPU_REF_TARGET_CLONES_H_ */
