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

/* Activations an epilogue can apply. Their two parameters travel in the
 * clip_low and clip_high fields of cr_epilogue and cr_fusion: CR_EPI_CLIP's
 * bounds, the hard sigmoids' alpha and beta. */
typedef enum cr_epilogue_act {
  CR_EPI_NONE = 0,
  CR_EPI_RELU,         /* x > 0 ? x : 0, NaN kept (as cr_activation) */
  CR_EPI_CLIP,         /* x > high ? high : (x < low ? low : x), as cr_clip */
  CR_EPI_HARD_SIGMOID, /* ONNX HardSigmoid, cr_epilogue_hard_sigmoid(0, ...) */
  CR_EPI_HARD_SWISH    /* ONNX HardSwish (alpha 1/6, beta 0.5), swish 1 */
} cr_epilogue_act;

/* ONNX HardSigmoid c = min(1, max(0, alpha x + beta)) (swish 0), or
 * HardSwish x c (swish 1), in float with the operations of
 * cr_fast_hard_sigmoid's loop in its order: alpha x, + beta, the clamp
 * below then above (NaN and -0 kept), x c, each rounded (ISO C contracts
 * nothing into fused multiply-adds), so a fused epilogue gives its values
 * bit for bit. The vector forms are in fast/hard_sigmoid_simd.h. */
static inline float cr_epilogue_hard_sigmoid(int swish, float alpha, float beta, float x) {
  const float v = alpha * x + beta;
  const float low = v < 0.0f ? 0.0f : v;
  const float c = low > 1.0f ? 1.0f : low;
  return swish ? x * c : c;
}

/* What happens to each value v of C once its sum is complete:
 * v = act(v + row_bias[i] + col_bias[j] + residual[i * ld_residual + j]),
 * each term only when its pointer is not NULL, added in that order;
 * clip_low and clip_high are act's parameters (cr_epilogue_act). */
typedef struct cr_epilogue {
  const float *row_bias;
  const float *col_bias;
  const float *residual;
  int64_t ld_residual;
  cr_epilogue_act act;
  float clip_low, clip_high;
} cr_epilogue;

#endif /* CPU_REF_KERNEL_TYPES_H_ */
