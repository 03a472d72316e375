/*
 * MLU_TARGET_CLONES: the attribute of the simulator's vectorised kernel
 * loops (kernels.c), compiled once for AVX-512, once for AVX2 and once for
 * the baseline, the variant picked when the library is loaded (GCC's
 * function multi-versioning; x86-64 Linux with glibc only, since it
 * resolves through IFUNC relocations, which musl's loader lacks; not under
 * ThreadSanitizer, whose runtime is not up yet when the resolvers run).
 * Without -ffast-math and with ISO C's default of no contraction, every
 * variant computes exactly the same results.
 */
#ifndef MLU_SIM_CLONES_H_
#define MLU_SIM_CLONES_H_

#include <stdint.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    defined(__GLIBC__) && !defined(__SANITIZE_THREAD__)
#define MLU_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MLU_TARGET_CLONES
#endif

#endif /* MLU_SIM_CLONES_H_ */
