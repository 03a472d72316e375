/*
 * Scratch memory the kernels keep between calls, one buffer per use (slot)
 * per thread, see scratch.c.
 */
#ifndef CPU_REF_SCRATCH_H_
#define CPU_REF_SCRATCH_H_

#include <stddef.h>

/* The uses. A slot's buffer is reused by the next call with the same slot
 * on the same thread, so a kernel takes a slot only for as long as it runs
 * and never while a function it calls on the same thread may take the same
 * slot. */
typedef enum cr_scratch_slot {
  CR_SCRATCH_CONV_PLANES,  /* a convolution's padded or phase planes */
  CR_SCRATCH_CONV_OFFSETS, /* their taps' offsets */
  CR_SCRATCH_CONV_OUTPUT,  /* its output on the wide grid, or a compacted input */
  CR_SCRATCH_GEMM_ROWS,    /* a GEMM's row offsets of B read in place */
  CR_SCRATCH_GEMM_SHARED,  /* a GEMM's B packed once for all its threads, or its P1 */
  CR_SCRATCH_GEMM_PACK_A,  /* one GEMM thread's packed block of A */
  CR_SCRATCH_GEMM_PACK_B,  /* one GEMM thread's packed block of B */
  CR_SCRATCH_SLOTS
} cr_scratch_slot;

/* A buffer of at least `bytes` bytes (64-byte aligned, contents
 * unspecified) owned by the calling thread's cache: the caller must not
 * free it, and it stays valid until the same thread asks for the same slot
 * again. The buffer only grows: each thread keeps the largest each slot
 * needed until the thread exits or the library is unloaded. NULL when
 * memory runs out or bytes is 0. */
void *cr_scratch(cr_scratch_slot slot, size_t bytes);

#endif /* CPU_REF_SCRATCH_H_ */
