/*
 * 8 x 8 transposes of floats in AVX2 registers, for the kernels that move
 * between planes (NCHW) and blocks of 8 channels or 6 to 8 GEMM rows
 * interleaved: fast/dense.c's blocked depthwise planes, conv_blocked.c's
 * convolutions, gemm.c's packing of A; and the epilogue those kernels (and
 * the AVX2 depthwise rows) apply to vectors of 8 outputs. x86-64 with GCC
 * or Clang only (CR_TRANSPOSE_AVX2 says whether); the callers run them
 * only where the CPU has AVX2.
 */
#ifndef CPU_REF_TRANSPOSE_AVX2_H_
#define CPU_REF_TRANSPOSE_AVX2_H_

#include <stdint.h>

#include "gemm.h"
#include "hard_sigmoid_simd.h"
#include "kernels.h"

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

/* v[i] = the first `count` (1 to 8) floats at src + i * stride, i < 8
 * (zeros past them; vmaskmovps reads no masked-out lane), transposed: v[j]
 * then holds float j of the eight rows (position j of eight planes). */
__attribute__((target("avx2"), always_inline)) static inline void cr_load_rows8_transposed(
    const float *src, int64_t stride, int64_t count, __m256 v[8]) {
  const __m256i mask = cr_lanes_mask(count);
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    v[i] = count == 8 ? _mm256_loadu_ps(src + i * stride)
                      : _mm256_maskload_ps(src + i * stride, mask);
  }
  cr_transpose8x8(v);
}

/* v[j] = the 8 floats at src + j * stride for j < count (0 to 8), zeros
 * for the others, transposed: v[i] then holds lane i of those vectors (the
 * way back from cr_load_rows8_transposed). */
__attribute__((target("avx2"), always_inline)) static inline void cr_load_vectors8_transposed(
    const float *src, int64_t stride, int64_t count, __m256 v[8]) {
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    v[j] = j < count ? _mm256_loadu_ps(src + j * stride) : _mm256_setzero_ps();
  }
  cr_transpose8x8(v);
}

/* A fusion's activation as cr_finish8 applies it (fusion NULL: none). */
typedef struct cr_act8 {
  cr_epilogue_act act;
  __m256 low, high; /* act's parameters: clip's bounds, the hard sigmoids' alpha, beta */
} cr_act8;

__attribute__((target("avx2"), always_inline)) static inline cr_act8 cr_act8_of(
    const cr_fusion *fusion) {
  cr_act8 a = {CR_EPI_NONE, _mm256_setzero_ps(), _mm256_setzero_ps()};
  if (fusion != NULL) {
    a.act = fusion->act;
    a.low = _mm256_set1_ps(fusion->clip_low);
    a.high = _mm256_set1_ps(fusion->clip_high);
  }
  return a;
}

/* What follows a vector of 8 sums, whose outputs go to out + at: the
 * residual's values at residual + at (when residual is not NULL), then the
 * activation, NaN kept by both (max(0, NaN) and min(high, NaN) return NaN),
 * as cr_epilogue; only the first count (1 to 8) outputs are read and
 * written, the others are not touched. */
__attribute__((target("avx2"), always_inline)) static inline void cr_finish8(
    __m256 value, const float *residual, float *out, int64_t at, int64_t count,
    const cr_act8 *a) {
  const __m256i mask = cr_lanes_mask(count);
  if (residual != NULL) {
    value = _mm256_add_ps(value, count < 8 ? _mm256_maskload_ps(residual + at, mask)
                                           : _mm256_loadu_ps(residual + at));
  }
  if (a->act == CR_EPI_RELU) {
    value = _mm256_max_ps(_mm256_setzero_ps(), value);
  } else if (a->act == CR_EPI_CLIP) {
    value = _mm256_min_ps(a->high, _mm256_max_ps(a->low, value));
  } else if (a->act == CR_EPI_HARD_SIGMOID || a->act == CR_EPI_HARD_SWISH) {
    value = cr_hard_sigmoid8(value, a->low, a->high, a->act == CR_EPI_HARD_SWISH);
  }
  if (count < 8) {
    _mm256_maskstore_ps(out + at, mask, value);
  } else {
    _mm256_storeu_ps(out + at, value);
  }
}
#else
#define CR_TRANSPOSE_AVX2 0
#endif

#endif /* CPU_REF_TRANSPOSE_AVX2_H_ */
