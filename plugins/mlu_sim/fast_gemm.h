/*
 * The host-speed arithmetic under the simulator's CONV and MATMUL
 * instructions: a register-blocked single-precision GEMM,
 *
 *   c[i][j] = bias[i] + sum_k a[i][k] * b[k][j]   (i < m, j < n)
 *
 * with row strides lda, ldb, ldc (bias NULL: 0). Each c[i][j] is summed in
 * one order, k = 0, 1, ..., whatever the ISA; the AVX-512 and AVX2 kernels
 * fuse each multiply-add (FMA), the portable one does not, so results may
 * differ between CPUs in the last bits (within the operators' 1e-4).
 *
 * The kernel is picked per call from the CPU (GCC or Clang on x86-64:
 * AVX-512F, else AVX2 with FMA, else portable C); MLU_SIM_GEMM_PORTABLE,
 * defined at build time, forces the portable one. It has no state.
 */
#ifndef MLU_SIM_FAST_GEMM_H_
#define MLU_SIM_FAST_GEMM_H_

#include <stdint.h>

void mlu_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
              int64_t ldb, float *c, int64_t ldc, const float *bias);

#endif /* MLU_SIM_FAST_GEMM_H_ */
