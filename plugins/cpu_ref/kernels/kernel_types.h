/*
 * Types that kernels.h, the fast kernels (gemm.h) and their callers share,
 * ISA-free: the instruction sets the fast kernels can pack data for, and
 * the epilogue a producing kernel applies to its outputs. The reference
 * kernels include this (through kernels.h), never kernels/fast/.
 */
#ifndef CPU_REF_KERNEL_TYPES_H_
#define CPU_REF_KERNEL_TYPES_H_

#include <stdint.h>

/* The instruction sets of the fast kernels' run-time dispatch (gemm.h): a
 * packed operand records the one it was packed for. */
typedef enum cr_isa { CR_ISA_GENERIC = 0, CR_ISA_AVX2 = 1, CR_ISA_AVX512 = 2 } cr_isa;

/* Activations an epilogue can apply. */
typedef enum cr_epilogue_act {
  CR_EPI_NONE = 0,
  CR_EPI_RELU, /* x > 0 ? x : 0, NaN kept (as cr_activation) */
  CR_EPI_CLIP  /* x > high ? high : (x < low ? low : x), as cr_clip */
} cr_epilogue_act;

/* What happens to each value v of C once its sum is complete:
 * v = act(v + row_bias[i] + col_bias[j] + residual[i * ld_residual + j]),
 * each term only when its pointer is not NULL, added in that order. */
typedef struct cr_epilogue {
  const float *row_bias;
  const float *col_bias;
  const float *residual;
  int64_t ld_residual;
  cr_epilogue_act act;
  float clip_low, clip_high;
} cr_epilogue;

#endif /* CPU_REF_KERNEL_TYPES_H_ */
