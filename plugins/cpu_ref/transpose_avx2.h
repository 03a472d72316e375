/*
 * 8 x 8 transposes of floats in AVX2 registers, for the kernels that move
 * between planes (NCHW) and blocks of 8 channels or 6 to 8 GEMM rows
 * interleaved: kernels_dense.c's blocked depthwise planes, gemm.c's packing
 * of A. x86-64 with GCC or Clang only (CR_TRANSPOSE_AVX2 says whether);
 * the callers run them only where the CPU has AVX2.
 */
#ifndef CPU_REF_TRANSPOSE_AVX2_H_
#define CPU_REF_TRANSPOSE_AVX2_H_

#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define CR_TRANSPOSE_AVX2 1
#include <immintrin.h>

/* r[i] lane j becomes r[j] lane i. */
__attribute__((target("avx2"), always_inline)) static inline void cr_transpose8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* The first `count` (0..8) lanes, for vmaskmovps. */
__attribute__((target("avx2"), always_inline)) static inline __m256i cr_lanes_mask(
    int64_t count) {
  static const int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256((const __m256i *)(kLanes + 8 - count));
}
#else
#define CR_TRANSPOSE_AVX2 0
#endif

#endif /* CPU_REF_TRANSPOSE_AVX2_H_ */
