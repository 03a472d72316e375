/*
 * The fast pooling (kernels.h's cr_pooling): max pooling of 2-D planes in
 * two passes over a padded copy, with AVX2 and AVX-512 versions chosen at
 * run time (cr_gemm_isa; AVX-512 reads windows 3 wide at stride 2 in place,
 * masking the padding), global average pooling several planes at a time,
 * and planes (or, for large planes at batch 1, parts of their rows) shared
 * out among threads. Every other window runs the reference loop
 * (cr_ref_pool_plane). Each output is computed in the reference's order,
 * so the results are the reference's bit for bit.
 */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "kernels.h"
#include "parallel.h"
#include "reference.h"

static int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

typedef struct cr_pool_task {
  const cr_pool_params *params;
  const int64_t *x_shape;
  const float *x;
  const int64_t *y_shape;
  float *y;
  /* 1: the job's shares are whole planes; else parts of every plane's
   * output rows, share s part s / planes (see pool_plane_parts). */
  int64_t parts;
} cr_pool_task;

/* Max pooling of a padded plane (rows wp apart) in two passes: each row's
 * maximum over the kw taps of every output column into hmax (rows x out_w),
 * then each output's maximum over its kh rows. A value wins only when
 * greater (NaN never does), starting from -FLT_MAX; taking rows in order and
 * taps in order within each, the first of equal maxima wins, as in the
 * window's row-major order, so the result is cr_ref_pool_plane's. */
static void max_pool_passes_generic(const float *padded, int64_t wp, int64_t kh, int64_t kw,
                                    int64_t sh, int64_t sw, int64_t out_h, int64_t out_w,
                                    float *hmax, float *y) {
  const int64_t rows = (out_h - 1) * sh + kh;
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = padded + r * wp;
    float *h = hmax + r * out_w;
    for (int64_t o = 0; o < out_w; ++o) h[o] = -FLT_MAX;
    for (int64_t j = 0; j < kw; ++j) {
      for (int64_t o = 0; o < out_w; ++o) {
        const float v = row[o * sw + j];
        h[o] = v > h[o] ? v : h[o];
      }
    }
  }
  for (int64_t oh = 0; oh < out_h; ++oh) {
    float *y_row = y + oh * out_w;
    for (int64_t o = 0; o < out_w; ++o) y_row[o] = -FLT_MAX;
    for (int64_t i = 0; i < kh; ++i) {
      const float *h = hmax + (oh * sh + i) * out_w;
      for (int64_t o = 0; o < out_w; ++o) y_row[o] = h[o] > y_row[o] ? h[o] : y_row[o];
    }
  }
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define CR_POOL_AVX512 1

/* max_pool_passes_generic with 16 outputs per vector and masks for the
 * short rows of small planes (which leave the auto-vectorised loops
 * scalar); strided taps are gathered. max_ps(v, acc) is v > acc ? v : acc
 * (acc when v is NaN or equal): the same comparison, so the same results. */
__attribute__((target("avx512f"))) static void max_pool_passes_avx512(
    const float *padded, int64_t wp, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
    int64_t out_h, int64_t out_w, float *hmax, float *y) {
  const int64_t rows = (out_h - 1) * sh + kh;
  const __m512 lowest = _mm512_set1_ps(-FLT_MAX);
  const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i steps = _mm512_mullo_epi32(lanes, _mm512_set1_epi32((int)sw));
  const __m512i evens = _mm512_add_epi32(lanes, lanes);
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = padded + r * wp;
    float *h = hmax + r * out_w;
    int64_t o = 0;
    if (sw == 2) {
      /* Two whole vectors at a time (two independent chains of maxima);
       * each tap reads 31 values, the 32nd lane masked off (it may lie past
       * the plane). */
      for (; o + 32 <= out_w; o += 32) {
        __m512 acc0 = lowest, acc1 = lowest;
        const float *base = row + 2 * o;
        for (int64_t j = 0; j < kw; ++j) {
          const __m512 v0 = _mm512_permutex2var_ps(_mm512_loadu_ps(base + j), evens,
                                                   _mm512_loadu_ps(base + j + 16));
          const __m512 v1 = _mm512_permutex2var_ps(
              _mm512_loadu_ps(base + j + 32), evens,
              _mm512_maskz_loadu_ps((__mmask16)0x7FFF, base + j + 48));
          acc0 = _mm512_max_ps(v0, acc0);
          acc1 = _mm512_max_ps(v1, acc1);
        }
        _mm512_storeu_ps(h + o, acc0);
        _mm512_storeu_ps(h + o + 16, acc1);
      }
    }
    for (; o < out_w; o += 16) {
      const int64_t left = out_w - o;
      const __mmask16 mask = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
      __m512 acc = lowest;
      const float *base = row + o * sw;
      if (sw == 1) {
        for (int64_t j = 0; j < kw; ++j) {
          acc = _mm512_max_ps(_mm512_maskz_loadu_ps(mask, base + j), acc);
        }
      } else if (sw == 2) {
        /* Stride 2 reads 2 * count - 1 consecutive values per tap and
         * keeps the even ones. */
        const int64_t span = 2 * (left >= 16 ? 16 : left) - 1;
        const __mmask16 low = span >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << span) - 1u);
        const __mmask16 high = span > 16 ? (__mmask16)((1u << (span - 16)) - 1u) : 0;
        for (int64_t j = 0; j < kw; ++j) {
          const __m512 v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(low, base + j), evens,
                                                  _mm512_maskz_loadu_ps(high, base + j + 16));
          acc = _mm512_max_ps(v, acc);
        }
      } else {
        for (int64_t j = 0; j < kw; ++j) {
          acc = _mm512_max_ps(_mm512_mask_i32gather_ps(lowest, mask, steps, base + j, 4), acc);
        }
      }
      _mm512_mask_storeu_ps(h + o, mask, acc);
    }
  }
  for (int64_t oh = 0; oh < out_h; ++oh) {
    float *y_row = y + oh * out_w;
    for (int64_t o = 0; o < out_w; o += 16) {
      const int64_t left = out_w - o;
      const __mmask16 mask = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
      __m512 acc = lowest;
      for (int64_t i = 0; i < kh; ++i) {
        acc = _mm512_max_ps(_mm512_maskz_loadu_ps(mask, hmax + (oh * sh + i) * out_w + o), acc);
      }
      _mm512_mask_storeu_ps(y_row + o, mask, acc);
    }
  }
}

/* The loads of a strip of 16 outputs from a row of windows 3 wide at
 * stride 2: floats [0, 16) and [16, 32) of the strip's first column, and
 * float 32 (lanes past the row's floats masked off). */
typedef struct cr_strip_masks {
  __mmask16 lo, hi, last;
} cr_strip_masks;

static cr_strip_masks strip_masks(int64_t avail) {
  const int64_t rest = avail - 16;
  cr_strip_masks m;
  m.lo = avail >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << avail) - 1u);
  m.hi = rest >= 16 ? (__mmask16)0xFFFF : rest > 0 ? (__mmask16)((1u << rest) - 1u) : 0;
  m.last = avail > 32 ? (__mmask16)1 : (__mmask16)0;
  return m;
}

/* Row-major max of the 3 taps at columns 2j, 2j + 1, 2j + 2 of row for
 * the 16 outputs j of a strip, from -FLT_MAX (a lane past the strip's
 * outputs may hold anything). */
__attribute__((target("avx512f"), always_inline)) static inline __m512 max3_stride2_avx512(
    const float *row, cr_strip_masks m, __m512i evens, __m512i odds) {
  const __m512 a = _mm512_maskz_loadu_ps(m.lo, row), b = _mm512_maskz_loadu_ps(m.hi, row + 16);
  const __m512 c = _mm512_maskz_loadu_ps(m.last, row + 32);
  const __m512 t0 = _mm512_permutex2var_ps(a, evens, b);
  const __m512 t1 = _mm512_permutex2var_ps(a, odds, b);
  /* columns 2j + 2: t0 one lane down, column 32 into the last lane */
  const __m512 t2 =
      _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(c), _mm512_castps_si512(t0), 1));
  const __m512 acc = _mm512_max_ps(t0, _mm512_set1_ps(-FLT_MAX));
  return _mm512_max_ps(t2, _mm512_max_ps(t1, acc));
}

/* Bytes of input rows a block of output rows of max_pool_3s2_avx512 may
 * span: the block's strips then read them from L1. */
enum { kPoolBlockBytes = 16 * 1024 };

/* Output rows per such block, for input rows of wp floats at stride sh. */
static int64_t pool_rows_per_block(int64_t wp, int64_t sh) {
  const int64_t row_bytes = wp * (int64_t)sizeof(float) * sh;
  return row_bytes < kPoolBlockBytes ? kPoolBlockBytes / row_bytes : 1;
}

/* Max pooling with windows 3 wide at stride 2 along rows (kh rows at
 * stride sh down), 16 outputs per vector: each row of a window to its
 * maximum (max3_stride2_avx512), then the rows in order, as
 * max_pool_passes_generic takes them (so the same results), without the
 * passes' store and reload of the row maxima. The output rows go in blocks
 * whose input rows fit in L1, each block a strip of 16 output columns at
 * a time; with 3 rows at stride 2 a window's first row is the window
 * above's last, whose maxima are kept. The plane is (out_h - 1) * sh + kh
 * rows of wp >= 2 * out_w + 1 floats. */
__attribute__((target("avx512f"))) static void max_pool_3s2_avx512(const float *padded,
                                                                  int64_t wp, int64_t kh,
                                                                  int64_t sh, int64_t out_h,
                                                                  int64_t out_w, float *y) {
  const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i evens = _mm512_add_epi32(lanes, lanes);
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  const __m512 lowest = _mm512_set1_ps(-FLT_MAX);
  const int64_t block = pool_rows_per_block(wp, sh);
  for (int64_t b0 = 0; b0 < out_h; b0 += block) {
    const int64_t b1 = out_h - b0 < block ? out_h : b0 + block;
    for (int64_t o = 0; o < out_w; o += 16) {
      const int64_t left = out_w - o;
      const cr_strip_masks m = strip_masks(wp - 2 * o);
      const __mmask16 store = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
      const float *column = padded + 2 * o;
      if (kh == 3 && sh == 2) {
        __m512 first = max3_stride2_avx512(column + 2 * b0 * wp, m, evens, odds);
        for (int64_t oh = b0; oh < b1; ++oh) {
          const float *top = column + 2 * oh * wp;
          const __m512 middle = max3_stride2_avx512(top + wp, m, evens, odds);
          const __m512 last = max3_stride2_avx512(top + 2 * wp, m, evens, odds);
          const __m512 acc =
              _mm512_max_ps(last, _mm512_max_ps(middle, _mm512_max_ps(first, lowest)));
          _mm512_mask_storeu_ps(y + oh * out_w + o, store, acc);
          first = last;
        }
        continue;
      }
      for (int64_t oh = b0; oh < b1; ++oh) {
        const float *top = column + oh * sh * wp;
        __m512 acc = lowest;
        for (int64_t i = 0; i < kh; ++i) {
          acc = _mm512_max_ps(max3_stride2_avx512(top + i * wp, m, evens, odds), acc);
        }
        _mm512_mask_storeu_ps(y + oh * out_w + o, store, acc);
      }
    }
  }
}

/* max3_stride2_avx512 of a strip whose first column is column `first`
 * (at least -1) of an input row of w floats, the columns outside the row
 * reading -FLT_MAX as a padded copy's would: padding read in place. */
__attribute__((target("avx512f"), always_inline)) static inline __m512 max3_stride2_padded(
    const float *row, int64_t w, int64_t first, __m512i evens, __m512i odds, __m512 lowest) {
  /* lanes [0, n) of the 16 columns from column c that lie inside the row */
  const int64_t lo_avail = w - (first < 0 ? 0 : first), hi_avail = w - first - 16;
  const __mmask16 lo_mask = lo_avail >= 16 ? (__mmask16)0xFFFF
                            : lo_avail > 0 ? (__mmask16)((1u << lo_avail) - 1u)
                                           : (__mmask16)0;
  const __mmask16 hi_mask = hi_avail >= 16 ? (__mmask16)0xFFFF
                            : hi_avail > 0 ? (__mmask16)((1u << hi_avail) - 1u)
                                           : (__mmask16)0;
  __m512 a;
  if (first < 0) {
    /* columns 0..14 into lanes 1..15, lane 0 the padding */
    const __m512 in = _mm512_mask_loadu_ps(lowest, (__mmask16)(lo_mask & 0x7FFF), row);
    a = _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(in), _mm512_castps_si512(lowest), 15));
  } else {
    a = _mm512_mask_loadu_ps(lowest, lo_mask, row + first);
  }
  const __m512 b = _mm512_mask_loadu_ps(lowest, hi_mask, row + first + 16);
  const __m512 c =
      _mm512_mask_loadu_ps(lowest, first + 32 < w ? (__mmask16)1 : (__mmask16)0, row + first + 32);
  const __m512 t0 = _mm512_permutex2var_ps(a, evens, b);
  const __m512 t1 = _mm512_permutex2var_ps(a, odds, b);
  const __m512 t2 =
      _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(c), _mm512_castps_si512(t0), 1));
  const __m512 acc = _mm512_max_ps(t0, lowest);
  return _mm512_max_ps(t2, _mm512_max_ps(t1, acc));
}

/* max_pool_3s2_avx512 on an unpadded plane (h x w) with the padding read in
 * place (pad_h, pad_w at most 1 before the first row and column, any
 * after), output rows [oh0, oh1) of out_w columns, into y (row oh0 first):
 * the values of the padded copy's path, bit for bit, without writing the
 * copy (ResNet's 64 x 112 x 112 stem pooling, 1 thread: 262 us with the
 * copy). */
__attribute__((target("avx512f"))) static void max_pool_3s2_pad_avx512(
    const float *x, int64_t h, int64_t w, int64_t pad_h, int64_t pad_w, int64_t kh, int64_t sh,
    int64_t oh0, int64_t oh1, int64_t out_w, float *y) {
  const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i evens = _mm512_add_epi32(lanes, lanes);
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  const __m512 lowest = _mm512_set1_ps(-FLT_MAX);
  const int64_t block = pool_rows_per_block(w, sh);
  for (int64_t b0 = oh0; b0 < oh1; b0 += block) {
    const int64_t b1 = oh1 - b0 < block ? oh1 : b0 + block;
    for (int64_t o = 0; o < out_w; o += 16) {
      const int64_t left = out_w - o;
      const __mmask16 store = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
      const int64_t first = 2 * o - pad_w;
#define CR_PADDED_ROW(r)                                                                \
  ((r) >= 0 && (r) < h ? max3_stride2_padded(x + (r) * w, w, first, evens, odds, lowest) \
                       : lowest)
      if (kh == 3 && sh == 2) {
        /* a window's first row is the window above's last */
        __m512 top = CR_PADDED_ROW(2 * b0 - pad_h);
        for (int64_t oh = b0; oh < b1; ++oh) {
          const int64_t r = 2 * oh - pad_h;
          const __m512 middle = CR_PADDED_ROW(r + 1), last = CR_PADDED_ROW(r + 2);
          const __m512 acc = _mm512_max_ps(last, _mm512_max_ps(middle, _mm512_max_ps(top, lowest)));
          _mm512_mask_storeu_ps(y + (oh - oh0) * out_w + o, store, acc);
          top = last;
        }
        continue;
      }
#undef CR_PADDED_ROW
      for (int64_t oh = b0; oh < b1; ++oh) {
        __m512 acc = lowest;
        for (int64_t i = 0; i < kh; ++i) {
          const int64_t r = oh * sh + i - pad_h;
          const __m512 m = r >= 0 && r < h
                               ? max3_stride2_padded(x + r * w, w, first, evens, odds, lowest)
                               : lowest;
          acc = _mm512_max_ps(m, acc);
        }
        _mm512_mask_storeu_ps(y + (oh - oh0) * out_w + o, store, acc);
      }
    }
  }
}

/* The AVX2 passes: 8 outputs per vector, the row maxima in rows of hw =
 * out_w rounded up to 8 (whole vectors, the lanes past out_w unused).
 * Stride 1 loads each tap; stride 2 loads 16 consecutive values per tap
 * and keeps the even ones. A row's last vector may read past the row's
 * windows, into the next row: the lanes past out_w are never used. Where
 * that would pass the plane's end, the vector reads a copy of the row's rest
 * padded with -FLT_MAX instead (taps up to kMaxStagedTaps wide; wider
 * windows and other strides run the generic loop). The row and column
 * passes are inlined with kw or kh a constant for the common 3-wide
 * windows, so the taps need no loop. max_ps(v, acc) is v > acc ? v : acc,
 * the generic passes' comparison, in the same order: the same results. */
enum { kMaxStagedTaps = 16 };

__attribute__((target("avx2"), always_inline)) static inline __m256 max_taps_avx2(
    const float *base, int64_t kw, int64_t sw) {
  __m256 acc = _mm256_set1_ps(-FLT_MAX);
#pragma GCC unroll 4
  for (int64_t j = 0; j < kw; ++j) {
    __m256 v;
    if (sw == 1) {
      v = _mm256_loadu_ps(base + j);
    } else {
      const __m256 lo = _mm256_loadu_ps(base + j), hi = _mm256_loadu_ps(base + j + 8);
      const __m256 even = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
      v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0)));
    }
    acc = _mm256_max_ps(v, acc);
  }
  return acc;
}

__attribute__((target("avx2"), always_inline)) static inline void max_row_avx2(
    const float *row, int64_t avail, int64_t kw, int64_t sw, int64_t out_w, float *h) {
  /* Vector o reads row[o * sw .. o * sw + 8 * sw + kw - 2]; avail floats
   * from row on may be read. */
  const int64_t reach = 8 * sw + kw - 1;
  int64_t o = 0;
  for (; o < out_w && o * sw + reach <= avail; o += 8) {
    _mm256_storeu_ps(h + o, max_taps_avx2(row + o * sw, kw, sw));
  }
  if (o < out_w) {
    float staged[8 * 2 + kMaxStagedTaps - 1]; /* reach at most */
    const int64_t have = avail - o * sw;
    for (int64_t i = 0; i < reach; ++i) staged[i] = i < have ? row[o * sw + i] : -FLT_MAX;
    _mm256_storeu_ps(h + o, max_taps_avx2(staged, kw, sw));
  }
}

__attribute__((target("avx2"), always_inline)) static inline void max_column_avx2(
    const float *h, int64_t hw, int64_t kh, int64_t out_w, float *y_row) {
  for (int64_t o = 0; o < out_w; o += 8) {
    __m256 acc = _mm256_set1_ps(-FLT_MAX);
#pragma GCC unroll 4
    for (int64_t i = 0; i < kh; ++i) acc = _mm256_max_ps(_mm256_loadu_ps(h + i * hw + o), acc);
    if (o + 8 <= out_w) {
      _mm256_storeu_ps(y_row + o, acc);
    } else {
      float last[8];
      _mm256_storeu_ps(last, acc);
      memcpy(y_row + o, last, (size_t)(out_w - o) * sizeof *last);
    }
  }
}

/* max3_stride2_avx512 in AVX2 vectors, 8 outputs: floats [0, 8) and
 * [8, 16) of the strip's first column under lo and hi (lanes past the
 * row's floats masked off), float 16 when last. */
typedef struct cr_strip_masks_avx2 {
  __m256i lo, hi;
  int last;
} cr_strip_masks_avx2;

__attribute__((target("avx2"))) static cr_strip_masks_avx2 strip_masks_avx2(int64_t avail) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int lo = avail >= 8 ? 8 : (int)avail, hi = avail >= 16 ? 8 : avail > 8 ? (int)avail - 8 : 0;
  cr_strip_masks_avx2 m;
  m.lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(lo), lanes);
  m.hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), lanes);
  m.last = avail > 16;
  return m;
}

__attribute__((target("avx2"), always_inline)) static inline __m256 max3_stride2_avx2(
    const float *row, const cr_strip_masks_avx2 *m, __m256i down) {
  const __m256 a = _mm256_maskload_ps(row, m->lo), b = _mm256_maskload_ps(row + 8, m->hi);
  const __m256 c = m->last ? _mm256_broadcast_ss(row + 16) : _mm256_set1_ps(-FLT_MAX);
  const __m256 t0 = _mm256_castpd_ps(_mm256_permute4x64_pd(
      _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))), _MM_SHUFFLE(3, 1, 2, 0)));
  const __m256 t1 = _mm256_castpd_ps(_mm256_permute4x64_pd(
      _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0)));
  /* columns 2j + 2: t0 one lane down, column 16 into the last lane */
  const __m256 t2 = _mm256_blend_ps(_mm256_permutevar8x32_ps(t0, down), c, 0x80);
  const __m256 acc = _mm256_max_ps(t0, _mm256_set1_ps(-FLT_MAX));
  return _mm256_max_ps(t2, _mm256_max_ps(t1, acc));
}

/* max_pool_3s2_avx512 in AVX2 vectors of 8 outputs (the same blocks of
 * rows, strips and kept row maxima; the same results). */
__attribute__((target("avx2"))) static void max_pool_3s2_avx2(const float *padded, int64_t wp,
                                                              int64_t kh, int64_t sh,
                                                              int64_t out_h, int64_t out_w,
                                                              float *y) {
  const __m256i down = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7);
  const __m256 lowest = _mm256_set1_ps(-FLT_MAX);
  const int64_t block = pool_rows_per_block(wp, sh);
  for (int64_t b0 = 0; b0 < out_h; b0 += block) {
    const int64_t b1 = out_h - b0 < block ? out_h : b0 + block;
    for (int64_t o = 0; o < out_w; o += 8) {
      const int64_t left = out_w - o;
      const cr_strip_masks_avx2 m = strip_masks_avx2(wp - 2 * o);
      const __m256i store = _mm256_cmpgt_epi32(_mm256_set1_epi32(left >= 8 ? 8 : (int)left),
                                               _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const float *column = padded + 2 * o;
      if (kh == 3 && sh == 2) {
        __m256 first = max3_stride2_avx2(column + 2 * b0 * wp, &m, down);
        for (int64_t oh = b0; oh < b1; ++oh) {
          const float *top = column + 2 * oh * wp;
          const __m256 middle = max3_stride2_avx2(top + wp, &m, down);
          const __m256 last = max3_stride2_avx2(top + 2 * wp, &m, down);
          const __m256 acc =
              _mm256_max_ps(last, _mm256_max_ps(middle, _mm256_max_ps(first, lowest)));
          _mm256_maskstore_ps(y + oh * out_w + o, store, acc);
          first = last;
        }
        continue;
      }
      for (int64_t oh = b0; oh < b1; ++oh) {
        const float *top = column + oh * sh * wp;
        __m256 acc = lowest;
        for (int64_t i = 0; i < kh; ++i) {
          acc = _mm256_max_ps(max3_stride2_avx2(top + i * wp, &m, down), acc);
        }
        _mm256_maskstore_ps(y + oh * out_w + o, store, acc);
      }
    }
  }
}

/* Whether max_pool_passes_avx2 takes these windows. */
static int max_pool_avx2_fits(int64_t kw, int64_t sw) {
  return (sw == 1 || sw == 2) && kw <= kMaxStagedTaps;
}

/* max_pool_passes_generic in AVX2 vectors (see max_row_avx2); hmax holds
 * rows of out_w rounded up to 8. */
__attribute__((target("avx2"))) static void max_pool_passes_avx2(
    const float *padded, int64_t wp, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
    int64_t out_h, int64_t out_w, float *hmax, float *y) {
  const int64_t rows = (out_h - 1) * sh + kh, hw = (out_w + 7) / 8 * 8;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t avail = (rows - r) * wp; /* the plane has at least rows rows */
    if (kw == 3 && sw == 2) {
      max_row_avx2(padded + r * wp, avail, 3, 2, out_w, hmax + r * hw);
    } else if (kw == 3) {
      max_row_avx2(padded + r * wp, avail, 3, 1, out_w, hmax + r * hw);
    } else {
      max_row_avx2(padded + r * wp, avail, kw, sw, out_w, hmax + r * hw);
    }
  }
  for (int64_t oh = 0; oh < out_h; ++oh) {
    if (kh == 3) {
      max_column_avx2(hmax + oh * sh * hw, hw, 3, out_w, y + oh * out_w);
    } else {
      max_column_avx2(hmax + oh * sh * hw, hw, kh, out_w, y + oh * out_w);
    }
  }
}
#else
#define CR_POOL_AVX512 0
#endif

static void max_pool_passes(const float *padded, int64_t wp, int64_t kh, int64_t kw, int64_t sh,
                            int64_t sw, int64_t out_h, int64_t out_w, float *hmax, float *y) {
#if CR_POOL_AVX512
  /* The gather's indices are 32-bit: strides and widths stay far below. */
  if (cr_gemm_isa() == CR_ISA_AVX512 && kw == 3 && sw == 2) {
    max_pool_3s2_avx512(padded, wp, kh, sh, out_h, out_w, y);
    return;
  }
  if (cr_gemm_isa() == CR_ISA_AVX512 && sw * 16 < INT32_MAX) {
    max_pool_passes_avx512(padded, wp, kh, kw, sh, sw, out_h, out_w, hmax, y);
    return;
  }
  if (cr_gemm_isa() == CR_ISA_AVX2 && kw == 3 && sw == 2) {
    max_pool_3s2_avx2(padded, wp, kh, sh, out_h, out_w, y);
    return;
  }
  if (cr_gemm_isa() == CR_ISA_AVX2 && max_pool_avx2_fits(kw, sw)) {
    max_pool_passes_avx2(padded, wp, kh, kw, sh, sw, out_h, out_w, hmax, y);
    return;
  }
#endif
  max_pool_passes_generic(padded, wp, kh, kw, sh, sw, out_h, out_w, hmax, y);
}

/* The fast case of 2-D max pooling: the plane is copied into one padded
 * with -FLT_MAX (the value of an empty window, which never wins over the
 * window's own values), large enough for every window, so the windows need
 * no clipping. */
static int is_plain_max_pool(const cr_pool_params *params, const int64_t in[3]) {
  return params->type == CR_POOL_MAX && in[0] == 1 && params->kernel[0] == 1 &&
         params->pad[0] == 0 && params->stride[0] == 1;
}

/* The padded plane's extents, and the floats of scratch a thread needs:
 * the padded plane and the row maxima. */
static int64_t plain_max_sizes(const cr_pool_params *p, const int64_t in[3],
                               const int64_t out[3], int64_t *hp, int64_t *wp) {
  *hp = max_i64(in[1] + 2 * p->pad[1], (out[1] - 1) * p->stride[1] + p->kernel[1]);
  *wp = max_i64(in[2] + 2 * p->pad[2], (out[2] - 1) * p->stride[2] + p->kernel[2]);
  /* Rows of row maxima rounded up to whole vectors of 8 (for the AVX2
   * passes). */
  return *hp * *wp + ((out[1] - 1) * p->stride[1] + p->kernel[1]) * ((out[2] + 7) / 8 * 8);
}

/* Input planes at least this large have their rows shared between
 * threads at batch 1 (cr_pooling). */
enum { kRowsSharedPlaneBytes = 8 * 1024 };

/* Whether max pooling reads every plane in place: no padding, every
 * window inside the plane (max_pool_plane's first case). */
static int max_pool_in_place(const cr_pool_params *p, const int64_t in[3],
                             const int64_t out[3]) {
  int64_t hp, wp;
  plain_max_sizes(p, in, out, &hp, &wp);
  return is_plain_max_pool(p, in) && p->pad[1] == 0 && p->pad[2] == 0 && hp == in[1] &&
         wp == in[2];
}

/* Whether max pooling reads every plane in place with its padding
 * (max_pool_3s2_pad_avx512): AVX-512, windows 3 wide at stride 2 along
 * rows, padding of at most 1 before the first row and column. */
static int max_pool_pad_in_place(const cr_pool_params *p, const int64_t in[3]) {
#if CR_POOL_AVX512
  return cr_gemm_isa() == CR_ISA_AVX512 && is_plain_max_pool(p, in) && p->kernel[2] == 3 &&
         p->stride[2] == 2 && p->pad[1] <= 1 && p->pad[2] <= 1 && p->stride[1] > 0 &&
         in[1] > 0 && in[2] > 0;
#else
  (void)p, (void)in;
  return 0;
#endif
}

/* Output rows [oh0, oh1) of one plane (y: row oh0) by
 * max_pool_3s2_pad_avx512, where max_pool_pad_in_place. */
static void max_pool_pad_rows(const cr_pool_params *p, const float *x, const int64_t in[3],
                              int64_t oh0, int64_t oh1, int64_t out_w, float *y) {
#if CR_POOL_AVX512
  max_pool_3s2_pad_avx512(x, in[1], in[2], p->pad[1], p->pad[2], p->kernel[1], p->stride[1], oh0,
                          oh1, out_w, y);
#else
  (void)p, (void)x, (void)in, (void)oh0, (void)oh1, (void)out_w, (void)y;
#endif
}

static void max_pool_plane(const cr_pool_params *p, const float *x, const int64_t in[3],
                           float *y, const int64_t out[3], float *scratch) {
  int64_t hp, wp;
  plain_max_sizes(p, in, out, &hp, &wp);
  float *padded = scratch, *hmax = scratch + hp * wp;
  if (max_pool_in_place(p, in, out)) {
    /* Every window lies inside the plane: no padded copy needed. */
    max_pool_passes(x, in[2], p->kernel[1], p->kernel[2], p->stride[1], p->stride[2], out[1],
                    out[2], hmax, y);
    return;
  }
  for (int64_t i = 0; i < hp * wp; ++i) padded[i] = -FLT_MAX;
  for (int64_t h = 0; h < in[1]; ++h) {
    memcpy(padded + (h + p->pad[1]) * wp + p->pad[2], x + h * in[2],
           (size_t)in[2] * sizeof *x);
  }
  max_pool_passes(padded, wp, p->kernel[1], p->kernel[2], p->stride[1], p->stride[2], out[1],
                  out[2], hmax, y);
}

/* Average pooling whose one window is the whole plane (global pooling):
 * the divisor is the plane's size whether padding counts or not. */
static int is_whole_plane_average(const cr_pool_params *params, const int64_t in[3],
                                  const int64_t out[3]) {
  for (int axis = 0; axis < 3; ++axis) {
    if (out[axis] != 1 || params->pad[axis] != 0 || params->kernel[axis] < in[axis]) return 0;
  }
  return params->type == CR_POOL_AVG && in[0] * in[1] * in[2] > 0;
}

enum { kPlaneBlock = 16, kPlanePartials = 64, kPartialsMinPlane = 128 };

/* The sum of a plane of `size` values in kPlanePartials interleaved partial
 * sums (four AVX-512 vectors, eight AVX2 ones), added pairwise at the end:
 * a fixed order whatever the ISA. */
static inline __attribute__((always_inline)) float plane_sum_partials(const float *x,
                                                                      int64_t size) {
  float acc[kPlanePartials] = {0};
  int64_t i = 0;
  for (; i + kPlanePartials <= size; i += kPlanePartials) {
    for (int j = 0; j < kPlanePartials; ++j) acc[j] += x[i + j];
  }
  for (int j = 0; i + j < size; ++j) acc[j] += x[i + j];
  for (int width = kPlanePartials / 2; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  }
  return acc[0];
}

/* y[p] = the mean of plane p of x (planes of size values, [begin, end)).
 * Planes of kPartialsMinPlane values or more are summed in partial sums
 * (plane_sum_partials: another order than the reference kernel's, which
 * adds the values one after another): 144 x 56 x 56 154 -> 53 us, 32 x
 * 112 x 112 131 -> 43 us. Smaller planes are summed in the reference's
 * order, kPlaneBlock planes at a time: independent sums that run side by
 * side instead of one chain of dependent additions (1152 x 7 x 7: 19 us,
 * 55 us in partial sums). */
CR_TARGET_CLONES static void plane_means(const float *x, int64_t size, int64_t begin,
                                         int64_t end, float *y) {
  int64_t p = begin;
  if (size >= kPartialsMinPlane) {
    for (; p < end; ++p) y[p] = plane_sum_partials(x + p * size, size) / (float)size;
    return;
  }
  for (; p + kPlaneBlock <= end; p += kPlaneBlock) {
    float acc[kPlaneBlock] = {0};
    const float *base = x + p * size;
    for (int64_t i = 0; i < size; ++i) {
      for (int b = 0; b < kPlaneBlock; ++b) acc[b] += base[b * size + i];
    }
    for (int b = 0; b < kPlaneBlock; ++b) y[p + b] = acc[b] / (float)size;
  }
  for (; p < end; ++p) {
    float acc = 0.0f;
    for (int64_t i = 0; i < size; ++i) acc += x[p * size + i];
    y[p] = acc / (float)size;
  }
}

/* Shares [begin, end) of a max pooling read in place, each one part of the
 * output rows of one plane: share s is part s / planes, of plane s % planes
 * for even parts and of the planes in reverse order for odd ones (so that
 * two threads finish the rows either side of a part's edge, which share a
 * cache line, at different times). */
static void pool_plane_parts(void *context, int64_t begin, int64_t end) {
  const cr_pool_task *task = context;
  const cr_pool_params *p = task->params;
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2;
  const int64_t planes = task->x_shape[0] * task->x_shape[1];
  int64_t hp, wp;
  const int padded = max_pool_pad_in_place(p, in);
  float *hmax =
      padded ? NULL : malloc((size_t)plain_max_sizes(p, in, out, &hp, &wp) * sizeof *hmax);
  for (int64_t s = begin; s < end; ++s) {
    const int64_t part = s / planes, i = s % planes;
    const int64_t plane = part % 2 == 0 ? i : planes - 1 - i;
    const int64_t r0 = out[1] * part / task->parts, r1 = out[1] * (part + 1) / task->parts;
    if (padded) {
      if (r1 > r0) {
        max_pool_pad_rows(p, task->x + plane * in[1] * in[2], in, r0, r1, out[2],
                          task->y + plane * out[1] * out[2] + r0 * out[2]);
      }
      continue;
    }
    const float *x = task->x + plane * in[1] * in[2] + r0 * p->stride[1] * in[2];
    float *y = task->y + plane * out[1] * out[2] + r0 * out[2];
    if (r1 <= r0) continue;
    if (hmax != NULL) {
      max_pool_passes(x, in[2], p->kernel[1], p->kernel[2], p->stride[1], p->stride[2], r1 - r0,
                      out[2], hmax, y);
      continue;
    }
    /* Without scratch, the window loop on the part's rows (a plane of
     * their own: every window lies inside them). */
    const int64_t part_in[3] = {1, (r1 - r0 - 1) * p->stride[1] + p->kernel[1], in[2]};
    const int64_t part_out[3] = {1, r1 - r0, out[2]};
    cr_ref_pool_plane(p, x, part_in, y, part_out);
  }
  free(hmax);
}

static void pool_planes(void *context, int64_t begin, int64_t end) {
  const cr_pool_task *task = context;
  const int64_t *in = task->x_shape + 2;
  const int64_t *out = task->y_shape + 2;
  const int64_t in_plane = in[0] * in[1] * in[2];
  const int64_t out_plane = out[0] * out[1] * out[2];
  if (is_whole_plane_average(task->params, in, out)) {
    plane_means(task->x, in_plane, begin, end, task->y);
    return;
  }
  if (max_pool_pad_in_place(task->params, in)) {
    for (int64_t plane = begin; plane < end; ++plane) {
      max_pool_pad_rows(task->params, task->x + plane * in_plane, in, 0, out[1], out[2],
                        task->y + plane * out_plane);
    }
    return;
  }
  float *padded = NULL;
  if (is_plain_max_pool(task->params, in) && out[1] > 0 && out[2] > 0) {
    int64_t hp, wp;
    const int64_t floats = plain_max_sizes(task->params, in, out, &hp, &wp);
    /* Without it the general loop computes the same values. */
    padded = malloc((size_t)floats * sizeof *padded);
  }
  for (int64_t plane = begin; plane < end; ++plane) {
    if (padded != NULL) {
      max_pool_plane(task->params, task->x + plane * in_plane, in,
                     task->y + plane * out_plane, out, padded);
    } else {
      cr_ref_pool_plane(task->params, task->x + plane * in_plane, in,
                 task->y + plane * out_plane, out);
    }
  }
  free(padded);
}

void cr_pooling(const cr_pool_params *params, const int64_t x_shape[5],
                const float *x, const int64_t y_shape[5], float *y,
                int num_threads) {
  cr_pool_task task = {params, x_shape, x, y_shape, y, 1};
  const int64_t planes = x_shape[0] * x_shape[1];
  const int64_t work = planes * y_shape[2] * y_shape[3] * y_shape[4] *
                       params->kernel[0] * params->kernel[1] *
                       params->kernel[2];
  int threads = cr_threads_for_images(num_threads, x_shape[0], (double)work);
  if (is_whole_plane_average(params, x_shape + 2, y_shape + 2)) {
    /* A stream over the planes: shared out by bytes read. */
    const double bytes = (double)(planes * x_shape[2] * x_shape[3] * x_shape[4]) * sizeof(float);
    const int by_bytes = cr_threads_for_bytes(num_threads, bytes);
    if (by_bytes > threads) threads = by_bytes;
  }
  if (threads > 1 && x_shape[0] < threads && y_shape[3] >= threads && planes > 0 &&
      x_shape[3] * x_shape[4] * (int64_t)sizeof(float) >= kRowsSharedPlaneBytes &&
      (max_pool_in_place(params, x_shape + 2, y_shape + 2) ||
       max_pool_pad_in_place(params, x_shape + 2))) {
    /* Fewer images than threads, and large planes: each thread takes its
     * part of the rows of every plane rather than whole planes. The step
     * before shared its output the same way when it shared positions (the
     * convolutions' usual split at batch 1), and a core reads the rows it
     * wrote from its own cache, at some 45 ns per KiB less than the other
     * core's; the line that straddles a part's edge is written by both
     * threads, which costs about as much as reading 2 KiB across, so small
     * planes stay whole (squeezenet at batch 1, 2 threads: 64 x 111 x 111
     * about 95 -> 82 us, 256 x 27 x 27 about 25 -> 36 us had it been
     * split). */
    task.parts = threads;
    cr_parallel_for(threads, planes * threads, pool_plane_parts, &task);
    return;
  }
  cr_parallel_for(threads, planes, pool_planes, &task);
}
