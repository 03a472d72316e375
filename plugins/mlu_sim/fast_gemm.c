#include "fast_gemm.h"

#include <stddef.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && \
    !defined(MLU_SIM_GEMM_PORTABLE)
#define MLU_GEMM_X86 1
#include <immintrin.h>
#else
#define MLU_GEMM_X86 0
#endif

/* Register blocks: MR rows of a (filters) by NR columns of b (output
 * positions). The column loop is outermost, so one NR-wide panel of b stays
 * in the L1 cache while every row block of a passes over it. */
#define MR 6
#define NR_PORTABLE 64

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- portable -------------------------------------------------------------------- */

static void block_portable(int rows, int64_t cols, int64_t k, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float *c, int64_t ldc,
                           const float *bias) {
  float acc[MR][NR_PORTABLE];
  for (int r = 0; r < rows; ++r) {
    float start = bias == NULL ? 0.0f : bias[r];
    for (int64_t j = 0; j < cols; ++j) acc[r][j] = start;
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    const float *brow = b + kk * ldb;
    for (int r = 0; r < rows; ++r) {
      float w = a[r * lda + kk];
      float *row = acc[r];
      for (int64_t j = 0; j < cols; ++j) row[j] += w * brow[j];
    }
  }
  for (int r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = acc[r][j];
  }
}

static void gemm_portable(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                          const float *b, int64_t ldb, float *c, int64_t ldc,
                          const float *bias) {
  for (int64_t j0 = 0; j0 < n; j0 += NR_PORTABLE) {
    int64_t cols = min64(NR_PORTABLE, n - j0);
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      block_portable((int)min64(MR, m - i0), cols, k, a + i0 * lda, lda, b + j0, ldb,
                     c + i0 * ldc + j0, ldc, bias == NULL ? NULL : bias + i0);
    }
  }
}

#if MLU_GEMM_X86

/* ---- AVX-512: 12 x 32 (24 accumulators), the last rows by at most 6 ------------------ */

#define MR_AVX512 12
/* Depth of one packed panel of b: KC x 32 floats (32 KiB) stay in the L1
 * cache while every row block of a passes over them. */
#define KC_AVX512 256

/* c[r][0..32) for r < rows over depth k of a packed panel (32 floats a
 * step): starting from bias (first panel) or from c itself (a later one),
 * so that each value still sums its products in the order of k. */
__attribute__((target("avx512f"), always_inline)) static inline void block_avx512(
    const int rows, int64_t k, const float *a, int64_t lda, const float *panel, float *c,
    int64_t ldc, const float *bias, int first, __mmask16 m0, __mmask16 m1) {
  __m512 acc0[MR_AVX512], acc1[MR_AVX512];
#pragma GCC unroll 12
  for (int r = 0; r < MR_AVX512; ++r) {
    if (r < rows) {
      if (first) {
        acc0[r] = _mm512_set1_ps(bias == NULL ? 0.0f : bias[r]);
        acc1[r] = acc0[r];
      } else {
        acc0[r] = _mm512_maskz_loadu_ps(m0, c + r * ldc);
        acc1[r] = _mm512_maskz_loadu_ps(m1, c + r * ldc + 16);
      }
    }
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    __m512 b0 = _mm512_load_ps(panel + kk * 32);
    __m512 b1 = _mm512_load_ps(panel + kk * 32 + 16);
#pragma GCC unroll 12
    for (int r = 0; r < MR_AVX512; ++r) {
      if (r < rows) {
        __m512 w = _mm512_set1_ps(a[r * lda + kk]);
        acc0[r] = _mm512_fmadd_ps(w, b0, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(w, b1, acc1[r]);
      }
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < MR_AVX512; ++r) {
    if (r < rows) {
      _mm512_mask_storeu_ps(c + r * ldc, m0, acc0[r]);
      _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc1[r]);
    }
  }
}

/* Each row of c is computed alone (its own accumulators, k in order, the
 * partial sums of a panel kept exactly in c between panels), so neither
 * how rows are grouped into blocks nor the panels' depth changes a value. */
__attribute__((target("avx512f"))) static void gemm_avx512(int64_t m, int64_t n, int64_t k,
                                                           const float *a, int64_t lda,
                                                           const float *b, int64_t ldb, float *c,
                                                           int64_t ldc, const float *bias) {
  _Alignas(64) float panel[KC_AVX512 * 32];
  for (int64_t j0 = 0; j0 < n; j0 += 32) {
    int64_t cols = min64(32, n - j0);
    __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xffffu : (1u << cols) - 1u);
    __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xffffu : cols <= 16 ? 0u : (1u << (cols - 16)) - 1u);
    for (int64_t k0 = 0; k0 < k || k0 == 0; k0 += KC_AVX512) {
      int64_t depth = min64(KC_AVX512, k - k0);
      for (int64_t kk = 0; kk < depth; ++kk) {
        const float *brow = b + (k0 + kk) * ldb + j0;
        _mm512_store_ps(panel + kk * 32, _mm512_maskz_loadu_ps(m0, brow));
        _mm512_store_ps(panel + kk * 32 + 16, _mm512_maskz_loadu_ps(m1, brow + 16));
      }
      int first = k0 == 0;
      const float *ak = a + k0;
      int64_t i0 = 0;
      for (; i0 + MR_AVX512 <= m; i0 += MR_AVX512) {
        block_avx512(MR_AVX512, depth, ak + i0 * lda, lda, panel, c + i0 * ldc + j0, ldc,
                     bias == NULL ? NULL : bias + i0, first, m0, m1);
      }
      for (; i0 < m; i0 += MR) {
        const float *ai = ak + i0 * lda, *bi = bias == NULL ? NULL : bias + i0;
        float *ci = c + i0 * ldc + j0;
        switch (min64(MR, m - i0)) {
          case 6: block_avx512(6, depth, ai, lda, panel, ci, ldc, bi, first, m0, m1); break;
          case 5: block_avx512(5, depth, ai, lda, panel, ci, ldc, bi, first, m0, m1); break;
          case 4: block_avx512(4, depth, ai, lda, panel, ci, ldc, bi, first, m0, m1); break;
          case 3: block_avx512(3, depth, ai, lda, panel, ci, ldc, bi, first, m0, m1); break;
          case 2: block_avx512(2, depth, ai, lda, panel, ci, ldc, bi, first, m0, m1); break;
          default: block_avx512(1, depth, ai, lda, panel, ci, ldc, bi, first, m0, m1); break;
        }
      }
      if (k <= 0) break;
    }
  }
}

/* ---- AVX2 + FMA: 6 x 16 (12 accumulators) ------------------------------------------ */

/* Lanes [0, n) of a mask for _mm256_maskload_ps / _mm256_maskstore_ps. */
__attribute__((target("avx2"), always_inline)) static inline __m256i lanes_avx2(int64_t n) {
  __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)), index);
}

__attribute__((target("avx2,fma"), always_inline)) static inline void block_avx2(
    const int rows, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
    int64_t ldc, const float *bias, __m256i m0, __m256i m1) {
  __m256 acc0[MR], acc1[MR];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    if (r < rows) {
      acc0[r] = _mm256_set1_ps(bias == NULL ? 0.0f : bias[r]);
      acc1[r] = acc0[r];
    }
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    const float *brow = b + kk * ldb;
    __m256 b0 = _mm256_maskload_ps(brow, m0);
    __m256 b1 = _mm256_maskload_ps(brow + 8, m1);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      if (r < rows) {
        __m256 w = _mm256_broadcast_ss(a + r * lda + kk);
        acc0[r] = _mm256_fmadd_ps(w, b0, acc0[r]);
        acc1[r] = _mm256_fmadd_ps(w, b1, acc1[r]);
      }
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    if (r < rows) {
      _mm256_maskstore_ps(c + r * ldc, m0, acc0[r]);
      _mm256_maskstore_ps(c + r * ldc + 8, m1, acc1[r]);
    }
  }
}

/* The last columns (fewer than 16) use masked loads and stores, so every
 * column is computed with FMA and results do not depend on where a caller
 * splits the columns. */
__attribute__((target("avx2,fma"))) static void gemm_avx2(int64_t m, int64_t n, int64_t k,
                                                         const float *a, int64_t lda,
                                                         const float *b, int64_t ldb, float *c,
                                                         int64_t ldc, const float *bias) {
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    int64_t cols = min64(16, n - j0);
    __m256i m0 = lanes_avx2(cols), m1 = lanes_avx2(cols - 8);
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      const float *ai = a + i0 * lda, *bi = bias == NULL ? NULL : bias + i0;
      float *ci = c + i0 * ldc + j0;
      switch (min64(MR, m - i0)) {
        case 6: block_avx2(6, k, ai, lda, b + j0, ldb, ci, ldc, bi, m0, m1); break;
        case 5: block_avx2(5, k, ai, lda, b + j0, ldb, ci, ldc, bi, m0, m1); break;
        case 4: block_avx2(4, k, ai, lda, b + j0, ldb, ci, ldc, bi, m0, m1); break;
        case 3: block_avx2(3, k, ai, lda, b + j0, ldb, ci, ldc, bi, m0, m1); break;
        case 2: block_avx2(2, k, ai, lda, b + j0, ldb, ci, ldc, bi, m0, m1); break;
        default: block_avx2(1, k, ai, lda, b + j0, ldb, ci, ldc, bi, m0, m1); break;
      }
    }
  }
}

#endif /* MLU_GEMM_X86 */

void mlu_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
              int64_t ldb, float *c, int64_t ldc, const float *bias) {
  if (m <= 0 || n <= 0) return;
#if MLU_GEMM_X86
  if (__builtin_cpu_supports("avx512f")) {
    gemm_avx512(m, n, k, a, lda, b, ldb, c, ldc, bias);
    return;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    gemm_avx2(m, n, k, a, lda, b, ldb, c, ldc, bias);
    return;
  }
#endif
  gemm_portable(m, n, k, a, lda, b, ldb, c, ldc, bias);
}
