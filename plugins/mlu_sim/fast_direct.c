#include "fast_direct.h"

#include <stddef.h>

#include "isa.h"

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && \
    !defined(MLU_SIM_GEMM_PORTABLE)
#define MLU_DIRECT_X86 1
#include <immintrin.h>
#else
#define MLU_DIRECT_X86 0
#endif

#if MLU_DIRECT_X86

/* ---- AVX-512: 16 columns a vector ----------------------------------------------------- */

__attribute__((target("avx512f"), always_inline)) static inline __m512 taps_avx512(
    const float *const rows[3], const int64_t off[3], const __m512 wv[9], __m512 acc,
    int64_t ox, __mmask16 mask) {
#pragma GCC unroll 3
  for (int ky = 0; ky < 3; ++ky) {
#pragma GCC unroll 3
    for (int kx = 0; kx < 3; ++kx) {
      __m512 x = _mm512_maskz_loadu_ps(mask, rows[ky] + (ox + off[kx]));
      acc = _mm512_fmadd_ps(wv[ky * 3 + kx], x, acc);
    }
  }
  return acc;
}

__attribute__((target("avx512f"), always_inline)) static inline __m512 act_avx512(
    __m512 v, int act, __m512 lo, __m512 hi) {
  if (act == MLU_ACT_RELU) {
    /* x < 0 ? 0 : x, keeping NaN */
    return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ),
                              _mm512_setzero_ps());
  }
  if (act == MLU_ACT_CLIP) {
    /* x > hi ? hi : (x < lo ? lo : x) */
    __m512 low = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
    return _mm512_mask_mov_ps(low, _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi);
  }
  return v;
}

__attribute__((target("avx512f"))) static void row_avx512(float *out, const float *const rows[3],
                                                         const int64_t off[3], const float w[9],
                                                         float bias, int64_t lo, int64_t hi,
                                                         int act, float act_lo, float act_hi) {
  __m512 wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  const __m512 b = _mm512_set1_ps(bias), low = _mm512_set1_ps(act_lo),
               high = _mm512_set1_ps(act_hi);
  int64_t ox = lo;
  for (; ox + 16 <= hi; ox += 16) {
    __m512 v = taps_avx512(rows, off, wv, b, ox, 0xFFFF);
    _mm512_storeu_ps(out + ox, act_avx512(v, act, low, high));
  }
  if (ox < hi) {
    __mmask16 mask = (__mmask16)((1u << (hi - ox)) - 1u);
    __m512 v = taps_avx512(rows, off, wv, b, ox, mask);
    _mm512_mask_storeu_ps(out + ox, mask, act_avx512(v, act, low, high));
  }
}

/* ---- AVX2 + FMA: 8 columns a vector ----------------------------------------------------- */

__attribute__((target("avx2"), always_inline)) static inline __m256i lanes_avx2(int64_t n) {
  __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)), index);
}

__attribute__((target("avx2,fma"), always_inline)) static inline __m256 taps_avx2(
    const float *const rows[3], const int64_t off[3], const __m256 wv[9], __m256 acc,
    int64_t ox, __m256i mask, int masked) {
#pragma GCC unroll 3
  for (int ky = 0; ky < 3; ++ky) {
#pragma GCC unroll 3
    for (int kx = 0; kx < 3; ++kx) {
      const float *at = rows[ky] + (ox + off[kx]);
      __m256 x = masked ? _mm256_maskload_ps(at, mask) : _mm256_loadu_ps(at);
      acc = _mm256_fmadd_ps(wv[ky * 3 + kx], x, acc);
    }
  }
  return acc;
}

__attribute__((target("avx2"), always_inline)) static inline __m256 act_avx2(__m256 v, int act,
                                                                           __m256 lo, __m256 hi) {
  if (act == MLU_ACT_RELU) {
    return _mm256_blendv_ps(v, _mm256_setzero_ps(),
                            _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
  }
  if (act == MLU_ACT_CLIP) {
    __m256 low = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(low, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
  }
  return v;
}

__attribute__((target("avx2,fma"))) static void row_avx2(float *out, const float *const rows[3],
                                                        const int64_t off[3], const float w[9],
                                                        float bias, int64_t lo, int64_t hi,
                                                        int act, float act_lo, float act_hi) {
  __m256 wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = _mm256_set1_ps(w[t]);
  const __m256 b = _mm256_set1_ps(bias), low = _mm256_set1_ps(act_lo),
               high = _mm256_set1_ps(act_hi);
  const __m256i all = _mm256_set1_epi32(-1);
  int64_t ox = lo;
  for (; ox + 8 <= hi; ox += 8) {
    __m256 v = taps_avx2(rows, off, wv, b, ox, all, 0);
    _mm256_storeu_ps(out + ox, act_avx2(v, act, low, high));
  }
  if (ox < hi) {
    __m256i mask = lanes_avx2(hi - ox);
    __m256 v = taps_avx2(rows, off, wv, b, ox, mask, 1);
    _mm256_maskstore_ps(out + ox, mask, act_avx2(v, act, low, high));
  }
}

__attribute__((target("avx512f"), always_inline)) static inline __m512 max_avx512(__m512 b,
                                                                                 __m512 v) {
  __mmask16 take = _mm512_cmp_ps_mask(v, b, _CMP_GT_OQ) |
                   (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(b, b, _CMP_ORD_Q));
  return _mm512_mask_mov_ps(b, take, v);
}

__attribute__((target("avx512f"))) static void max_run_avx512(float *best, const float *src,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(best + i, max_avx512(_mm512_loadu_ps(best + i), _mm512_loadu_ps(src + i)));
  }
  if (i < n) {
    __mmask16 mask = (__mmask16)((1u << (n - i)) - 1u);
    __m512 b = _mm512_maskz_loadu_ps(mask, best + i), v = _mm512_maskz_loadu_ps(mask, src + i);
    _mm512_mask_storeu_ps(best + i, mask, max_avx512(b, v));
  }
}

__attribute__((target("avx2"), always_inline)) static inline __m256 max_avx2(__m256 b, __m256 v) {
  __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, b, _CMP_GT_OQ),
                             _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q),
                                           _mm256_cmp_ps(b, b, _CMP_ORD_Q)));
  return _mm256_blendv_ps(b, v, take);
}

__attribute__((target("avx2"))) static void max_run_avx2(float *best, const float *src,
                                                        int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(best + i, max_avx2(_mm256_loadu_ps(best + i), _mm256_loadu_ps(src + i)));
  }
  if (i < n) {
    __m256i mask = lanes_avx2(n - i);
    __m256 b = _mm256_maskload_ps(best + i, mask), v = _mm256_maskload_ps(src + i, mask);
    _mm256_maskstore_ps(best + i, mask, max_avx2(b, v));
  }
}

#endif /* MLU_DIRECT_X86 */

int mlu_max_run(float *best, const float *src, int64_t n) {
#if MLU_DIRECT_X86
  if (__builtin_cpu_supports("avx512f")) {
    if (n > 0) max_run_avx512(best, src, n);
    return 1;
  }
  if (__builtin_cpu_supports("avx2")) {
    if (n > 0) max_run_avx2(best, src, n);
    return 1;
  }
#endif
  (void)best, (void)src, (void)n;
  return 0;
}

int mlu_direct3x3_row(float *out, const float *const rows[3], const int64_t off[3],
                      const float w[9], float bias, int64_t lo, int64_t hi, int act,
                      float act_lo, float act_hi) {
#if MLU_DIRECT_X86
  if (__builtin_cpu_supports("avx512f")) {
    if (lo < hi) row_avx512(out, rows, off, w, bias, lo, hi, act, act_lo, act_hi);
    return 1;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    if (lo < hi) row_avx2(out, rows, off, w, bias, lo, hi, act, act_lo, act_hi);
    return 1;
  }
#endif
  (void)out, (void)rows, (void)off, (void)w, (void)bias, (void)lo, (void)hi, (void)act;
  (void)act_lo, (void)act_hi;
  return 0;
}
