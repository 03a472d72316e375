/*
 * The host-speed arithmetic under the simulator's depthwise 3 x 3 CONV
 * (kernels.c, the direct path) and max POOL. First, the columns of one output row whose nine
 * taps all lie inside the input,
 *
 *   out[ox] = act(bias + sum_{ky, kx} w[ky * 3 + kx] * rows[ky][ox + off[kx]])
 *
 * for ox in [lo, hi), the taps summed in the filter's order (ky, then kx),
 * each a fused multiply-add, then act: MLU_ACT_NONE, MLU_ACT_RELU or
 * MLU_ACT_CLIP (act_lo, act_hi). Rows are read only at the columns those
 * outputs reach (masked loads for the last vector).
 *
 * Returns 1 when computed (GCC or Clang on x86-64 with AVX-512F, or AVX2
 * with FMA), 0 when the CPU has neither: the caller computes those columns
 * itself. MLU_SIM_GEMM_PORTABLE, defined at build time, makes it always 0.
 * It has no state.
 */
#ifndef MLU_SIM_FAST_DIRECT_H_
#define MLU_SIM_FAST_DIRECT_H_

#include <stdint.h>

int mlu_direct3x3_row(float *out, const float *const rows[3], const int64_t off[3],
                      const float w[9], float bias, int64_t lo, int64_t hi, int act,
                      float act_lo, float act_hi);

/* best[i] = max(best[i], src[i]) for i < n as max pooling takes it (the
 * first NaN wins: src[i] replaces best[i] when greater, or when it is NaN
 * and best[i] is not). Returns 1 when computed (AVX-512F or AVX2), 0 when
 * the CPU has neither; the same values either way. */
int mlu_max_run(float *best, const float *src, int64_t n);

#endif /* MLU_SIM_FAST_DIRECT_H_ */
