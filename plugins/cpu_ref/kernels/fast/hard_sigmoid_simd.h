/*
 * The fused epilogues' ONNX HardSigmoid and HardSwish in AVX2 and AVX-512
 * vectors: cr_epilogue_hard_sigmoid (kernel_types.h) lane by lane, the
 * same operations in the same order, so bit for bit the values of the
 * standalone kernel (cr_fast_hard_sigmoid). The clamp is max(0, v) then
 * min(1, c): vmaxps and vminps return their second operand when either is
 * NaN or both are zeros, which is v < 0 ? 0 : v and c > 1 ? 1 : c exactly
 * (NaN kept, -0 kept). x86-64 with GCC or Clang only; the callers run
 * them only where the CPU has the instruction set.
 */
#ifndef CPU_REF_HARD_SIGMOID_SIMD_H_
#define CPU_REF_HARD_SIGMOID_SIMD_H_

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* min(1, max(0, alpha x + beta)), times x when swish. */
__attribute__((target("avx2"), always_inline)) static inline __m256 cr_hard_sigmoid8(
    __m256 x, __m256 alpha, __m256 beta, int swish) {
  const __m256 v = _mm256_add_ps(_mm256_mul_ps(alpha, x), beta);
  const __m256 c = _mm256_min_ps(_mm256_set1_ps(1.0f), _mm256_max_ps(_mm256_setzero_ps(), v));
  return swish ? _mm256_mul_ps(x, c) : c;
}

__attribute__((target("avx512f"), always_inline)) static inline __m512 cr_hard_sigmoid16(
    __m512 x, __m512 alpha, __m512 beta, int swish) {
  const __m512 v = _mm512_add_ps(_mm512_mul_ps(alpha, x), beta);
  const __m512 c = _mm512_min_ps(_mm512_set1_ps(1.0f), _mm512_max_ps(_mm512_setzero_ps(), v));
  return swish ? _mm512_mul_ps(x, c) : c;
}
#endif

#endif /* CPU_REF_HARD_SIGMOID_SIMD_H_ */
