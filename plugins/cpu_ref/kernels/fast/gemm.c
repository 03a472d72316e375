/*
 * The packed, register-blocked GEMM of gemm.h.
 *
 * Loop nest (per thread, over its share of C's row or column panels):
 *
 *   for each block of NC columns of B            (B block: KC x NC, in L2)
 *     for each block of KC along k
 *       pack B's block into NR-column panels     (unless pre-packed)
 *       for each block of MC rows of A            (A block: MC x KC)
 *         pack A's block into MR-row panels       (unless pre-packed)
 *         for each B panel, for each A panel: micro-kernel -> MR x NR tile
 *
 * The micro-kernel keeps the MR x NR tile in vector registers, loads one
 * row of the B panel and broadcasts one value of the A panel per row each
 * step along k, and adds the tile to C (or stores it, for the first k
 * block). Tiles cut by the matrix edge run an AVX-512 edge kernel with
 * masked stores, and the last few columns a kernel with its vectors along
 * A's rows (other ISAs: the full kernel into a scratch tile). The
 * epilogue runs on each tile right after its last k block, while the tile
 * is still in cache.
 */
#include "gemm.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hard_sigmoid_simd.h"
#include "parallel.h"
#include "prefetch.h"
#include "scratch.h"
#include "transpose_avx2.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define CR_GEMM_X86 1
#include <immintrin.h>
#else
#define CR_GEMM_X86 0
#endif

enum {
  kKC = 128,        /* k block: a B panel (KC x NR) stays in L1 */
  kKCMax = 160,     /* the deepest block: what is left of k up to this is one (k_block) */
  kNCPanels = 24,   /* B block of up to 24 panels: KC x 1152 floats in L2 */
  kMCPanels = 16,   /* A block of up to 16 panels (128 rows for AVX-512) */
  kMaxMR = 8,
  kMaxNR = 48,
  kRowsFirstK = 64, /* gemm_range's tile order: see there */
  kAlign = 64
};

/* The epilogue of one tile, its pointers moved to the tile's first row and
 * column; NULL pointers are left out. */
typedef struct cr_tile_epilogue {
  const float *row_bias;
  const float *col_bias;
  const float *residual;
  int64_t ld_residual;
  cr_epilogue_act act;
  float clip_low, clip_high; /* act's parameters (cr_epilogue_act) */
} cr_tile_epilogue;

/* Multiplies the A panel a (kc x MR, row r of step p at a[p * MR + r]) by
 * the B panel b (kc x NR, row p at b + b_rows[p]: p * NR for a packed
 * panel, anywhere for B read in place) into rows [0, rows) of the tile at c (row
 * stride ldc): c = acc, or c += acc when accumulate; then applies e (when
 * not NULL) as cr_epilogue_apply would. */
typedef void (*cr_micro_kernel)(int rows, int64_t kc, const float *a, const float *b,
                                const int64_t *b_rows, float *c, int64_t ldc, int accumulate,
                                const cr_tile_epilogue *e);

/* Vectorised per ISA (target clones): the depthwise and pooled paths apply
 * it to whole planes. */
CR_TARGET_CLONES static void tile_epilogue_apply(const cr_tile_epilogue *e, int rows,
                                                 int64_t cols, float *c, int64_t ldc);

typedef struct cr_gemm_arch {
  cr_isa isa;
  int mr, nr;
  cr_micro_kernel kernel;
} cr_gemm_arch;

/* ---- Portable micro-kernel: 4 x 16, plain C ----------------------------- */

static void micro_generic(int rows, int64_t kc, const float *a, const float *b,
                          const int64_t *b_rows,
                          float *c, int64_t ldc, int accumulate, const cr_tile_epilogue *e) {
  enum { MR = 4, NR = 16 };
  float acc[MR][NR];
  memset(acc, 0, sizeof acc);
  for (int64_t p = 0; p < kc; ++p) {
    const float *bp = b + b_rows[p];
    for (int r = 0; r < MR; ++r) {
      const float ar = a[p * MR + r];
      for (int j = 0; j < NR; ++j) acc[r][j] += ar * bp[j];
    }
  }
  for (int r = 0; r < rows; ++r) {
    float *cr = c + r * ldc;
    if (accumulate) {
      for (int j = 0; j < NR; ++j) cr[j] += acc[r][j];
    } else {
      for (int j = 0; j < NR; ++j) cr[j] = acc[r][j];
    }
  }
  if (e != NULL) tile_epilogue_apply(e, rows, NR, c, ldc);
}

#if CR_GEMM_X86

/* ---- AVX2 + FMA micro-kernel: 6 x 16 (12 accumulators) ------------------ */

__attribute__((target("avx2,fma"), always_inline)) static inline __m256 epilogue_avx2(
    __m256 v, const cr_tile_epilogue *e, int r, int j) {
  if (e->row_bias != NULL) v = _mm256_add_ps(v, _mm256_set1_ps(e->row_bias[r]));
  if (e->col_bias != NULL) v = _mm256_add_ps(v, _mm256_loadu_ps(e->col_bias + j));
  if (e->residual != NULL) {
    v = _mm256_add_ps(v, _mm256_loadu_ps(e->residual + r * e->ld_residual + j));
  }
  if (e->act == CR_EPI_RELU) {
    v = _mm256_max_ps(_mm256_setzero_ps(), v); /* max(0, NaN) is NaN: kept */
  } else if (e->act == CR_EPI_CLIP) {
    const __m256 low = _mm256_set1_ps(e->clip_low), high = _mm256_set1_ps(e->clip_high);
    const __m256 t = _mm256_blendv_ps(v, low, _mm256_cmp_ps(v, low, _CMP_LT_OQ));
    v = _mm256_blendv_ps(t, high, _mm256_cmp_ps(v, high, _CMP_GT_OQ));
  } else if (e->act == CR_EPI_HARD_SIGMOID || e->act == CR_EPI_HARD_SWISH) {
    v = cr_hard_sigmoid8(v, _mm256_set1_ps(e->clip_low), _mm256_set1_ps(e->clip_high),
                         e->act == CR_EPI_HARD_SWISH);
  }
  return v;
}

__attribute__((target("avx2,fma"), always_inline)) static inline void micro_avx2_rows(
    const int rows, int64_t kc, const float *a, const float *b, const int64_t *b_rows, float *c,
    int64_t ldc, int accumulate, const cr_tile_epilogue *e) {
  __m256 c0[6], c1[6];
#pragma GCC unroll 6
  for (int r = 0; r < 6; ++r) {
    c0[r] = _mm256_setzero_ps();
    c1[r] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const float *bp = b + b_rows[p];
    const __m256 b0 = _mm256_loadu_ps(bp);
    const __m256 b1 = _mm256_loadu_ps(bp + 8);
#pragma GCC unroll 6
    for (int r = 0; r < 6; ++r) {
      if (r < rows) {
        const __m256 ar = _mm256_broadcast_ss(a + r);
        c0[r] = _mm256_fmadd_ps(ar, b0, c0[r]);
        c1[r] = _mm256_fmadd_ps(ar, b1, c1[r]);
      }
    }
    a += 6;
  }
#pragma GCC unroll 6
  for (int r = 0; r < 6; ++r) {
    if (r < rows) {
      float *cr = c + r * ldc;
      if (accumulate) {
        c0[r] = _mm256_add_ps(_mm256_loadu_ps(cr), c0[r]);
        c1[r] = _mm256_add_ps(_mm256_loadu_ps(cr + 8), c1[r]);
      }
      if (e != NULL) {
        c0[r] = epilogue_avx2(c0[r], e, r, 0);
        c1[r] = epilogue_avx2(c1[r], e, r, 8);
      }
      _mm256_storeu_ps(cr, c0[r]);
      _mm256_storeu_ps(cr + 8, c1[r]);
    }
  }
}

__attribute__((target("avx2,fma"))) static void micro_avx2(int rows, int64_t kc, const float *a,
                                                           const float *b,
                                                           const int64_t *b_rows,
                                                           float *c, int64_t ldc,
                                                           int accumulate,
                                                           const cr_tile_epilogue *e) {
  switch (rows) {
    case 1: micro_avx2_rows(1, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    case 2: micro_avx2_rows(2, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    case 3: micro_avx2_rows(3, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    case 4: micro_avx2_rows(4, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    case 5: micro_avx2_rows(5, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    default: micro_avx2_rows(6, kc, a, b, b_rows, c, ldc, accumulate, e); break;
  }
}

/* ---- AVX-512 micro-kernel: 8 x 48 (24 accumulators) --------------------- */

/* The epilogue's activation, as tile_epilogue_apply's (the full tiles'
 * epilogue_avx512 and the edge tiles' micro_avx512_edge_rows). */
__attribute__((target("avx512f"), always_inline)) static inline __m512 activation_avx512(
    __m512 v, const cr_tile_epilogue *e) {
  if (e->act == CR_EPI_RELU) {
    v = _mm512_max_ps(_mm512_setzero_ps(), v); /* max(0, NaN) is NaN: kept */
  } else if (e->act == CR_EPI_CLIP) {
    const __m512 low = _mm512_set1_ps(e->clip_low), high = _mm512_set1_ps(e->clip_high);
    const __m512 t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, low, _CMP_LT_OQ), v, low);
    v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, high, _CMP_GT_OQ), t, high);
  } else if (e->act == CR_EPI_HARD_SIGMOID || e->act == CR_EPI_HARD_SWISH) {
    v = cr_hard_sigmoid16(v, _mm512_set1_ps(e->clip_low), _mm512_set1_ps(e->clip_high),
                          e->act == CR_EPI_HARD_SWISH);
  }
  return v;
}

__attribute__((target("avx512f"), always_inline)) static inline __m512 epilogue_avx512(
    __m512 v, const cr_tile_epilogue *e, int r, int j) {
  if (e->row_bias != NULL) v = _mm512_add_ps(v, _mm512_set1_ps(e->row_bias[r]));
  if (e->col_bias != NULL) v = _mm512_add_ps(v, _mm512_loadu_ps(e->col_bias + j));
  if (e->residual != NULL) {
    v = _mm512_add_ps(v, _mm512_loadu_ps(e->residual + r * e->ld_residual + j));
  }
  return activation_avx512(v, e);
}

__attribute__((target("avx512f"), always_inline)) static inline void micro_avx512_rows(
    const int rows, int64_t kc, const float *a, const float *b, const int64_t *b_rows, float *c,
    int64_t ldc, int accumulate, const cr_tile_epilogue *e) {
  __m512 c0[8], c1[8], c2[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    c0[r] = _mm512_setzero_ps();
    c1[r] = _mm512_setzero_ps();
    c2[r] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const float *bp = b + b_rows[p];
    const __m512 b0 = _mm512_loadu_ps(bp);
    const __m512 b1 = _mm512_loadu_ps(bp + 16);
    const __m512 b2 = _mm512_loadu_ps(bp + 32);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      if (r < rows) {
        const __m512 ar = _mm512_set1_ps(a[r]);
        c0[r] = _mm512_fmadd_ps(ar, b0, c0[r]);
        c1[r] = _mm512_fmadd_ps(ar, b1, c1[r]);
        c2[r] = _mm512_fmadd_ps(ar, b2, c2[r]);
      }
    }
    a += 8;
  }
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    if (r < rows) {
      float *cr = c + r * ldc;
      if (accumulate) {
        c0[r] = _mm512_add_ps(_mm512_loadu_ps(cr), c0[r]);
        c1[r] = _mm512_add_ps(_mm512_loadu_ps(cr + 16), c1[r]);
        c2[r] = _mm512_add_ps(_mm512_loadu_ps(cr + 32), c2[r]);
      }
      if (e != NULL) {
        c0[r] = epilogue_avx512(c0[r], e, r, 0);
        c1[r] = epilogue_avx512(c1[r], e, r, 16);
        c2[r] = epilogue_avx512(c2[r], e, r, 32);
      }
      _mm512_storeu_ps(cr, c0[r]);
      _mm512_storeu_ps(cr + 16, c1[r]);
      _mm512_storeu_ps(cr + 32, c2[r]);
    }
  }
}

__attribute__((target("avx512f"))) static void micro_avx512(int rows, int64_t kc,
                                                            const float *a, const float *b,
                                                            const int64_t *b_rows, float *c,
                                                            int64_t ldc, int accumulate,
                                                            const cr_tile_epilogue *e) {
  switch (rows) {
    case 1: micro_avx512_rows(1, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    case 2: micro_avx512_rows(2, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    case 3: micro_avx512_rows(3, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    case 4: micro_avx512_rows(4, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    case 5: micro_avx512_rows(5, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    case 6: micro_avx512_rows(6, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    case 7: micro_avx512_rows(7, kc, a, b, b_rows, c, ldc, accumulate, e); break;
    default: micro_avx512_rows(8, kc, a, b, b_rows, c, ldc, accumulate, e); break;
  }
}

/* A tile cut by the matrix edge: columns [0, cols), 1 < cols < 48, in
 * vectors = ceil(cols / 16) vectors, the last one masked for its loads of
 * B and its loads and stores of C. A's element (r, p) is a[r * ars + p *
 * acs] (a packed panel: ars 1, acs 8; constants at the packed call site,
 * so the code is the panel's); row p of B is at b + b_rows[p]. The same
 * operations in the same order as micro_avx512_rows on the columns it
 * keeps, so the same results as the full kernel run into a scratch tile,
 * without computing (or copying) the dropped columns. Small products run
 * it too, on A and B in place (small_avx512). */
__attribute__((target("avx512f"), always_inline)) static inline void micro_avx512_edge_rows(
    const int rows, const int vectors, __mmask16 last_mask, int64_t kc, const float *a,
    int64_t ars, int64_t acs, const float *b, const int64_t *b_rows, float *c, int64_t ldc,
    int accumulate, const cr_tile_epilogue *e) {
  __m512 acc[8][3];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
#pragma GCC unroll 3
    for (int v = 0; v < 3; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const float *bp = b + b_rows[p];
    __m512 bv[3];
#pragma GCC unroll 3
    for (int v = 0; v < 3; ++v) {
      bv[v] = v < vectors ? _mm512_maskz_loadu_ps(v == vectors - 1 ? last_mask : (__mmask16)0xFFFF,
                                                  bp + 16 * v)
                          : _mm512_setzero_ps();
    }
    const float *ap = a + p * acs;
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      if (r < rows) {
        const __m512 ar = _mm512_set1_ps(ap[r * ars]);
#pragma GCC unroll 3
        for (int v = 0; v < 3; ++v) {
          if (v < vectors) acc[r][v] = _mm512_fmadd_ps(ar, bv[v], acc[r][v]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    if (r < rows) {
      float *cr = c + r * ldc;
#pragma GCC unroll 3
      for (int v = 0; v < 3; ++v) {
        if (v >= vectors) continue;
        const __mmask16 mask = v == vectors - 1 ? last_mask : (__mmask16)0xFFFF;
        __m512 value = acc[r][v];
        if (accumulate) {
          value = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, cr + 16 * v), value);
        }
        if (e != NULL) {
          if (e->row_bias != NULL) value = _mm512_add_ps(value, _mm512_set1_ps(e->row_bias[r]));
          if (e->col_bias != NULL) {
            value = _mm512_add_ps(value, _mm512_maskz_loadu_ps(mask, e->col_bias + 16 * v));
          }
          if (e->residual != NULL) {
            value = _mm512_add_ps(
                value, _mm512_maskz_loadu_ps(mask, e->residual + r * e->ld_residual + 16 * v));
          }
          value = activation_avx512(value, e);
        }
        _mm512_mask_storeu_ps(cr + 16 * v, mask, value);
      }
    }
  }
}

/* micro_avx512_edge_rows for rows 1 to 8 and the given (constant) vectors. */
#define CR_EDGE_ROW_CASE(r, vectors, ars, acs) \
  case r:                                      \
    micro_avx512_edge_rows(r, vectors, mask, kc, a, ars, acs, b, b_rows, c, ldc, acc, e); \
    break;
#define CR_EDGE_ROWS(vectors, ars, acs)         \
  switch (rows) {                              \
    CR_EDGE_ROW_CASE(1, vectors, ars, acs)     \
    CR_EDGE_ROW_CASE(2, vectors, ars, acs)     \
    CR_EDGE_ROW_CASE(3, vectors, ars, acs)     \
    CR_EDGE_ROW_CASE(4, vectors, ars, acs)     \
    CR_EDGE_ROW_CASE(5, vectors, ars, acs)     \
    CR_EDGE_ROW_CASE(6, vectors, ars, acs)     \
    CR_EDGE_ROW_CASE(7, vectors, ars, acs)     \
    default:                                   \
      micro_avx512_edge_rows(8, vectors, mask, kc, a, ars, acs, b, b_rows, c, ldc, acc, e); \
      break;                                   \
  }

/* cols (1 to 48) columns of a tile of rows (1 to 8) rows; A as in
 * micro_avx512_edge_rows (packed: ars 1, acs 8). */
#define CR_EDGE_TILE(ars, acs)                                                  \
  const int vectors = (int)((cols + 15) / 16);                                  \
  const int tail = (int)(cols - 16 * (vectors - 1));                            \
  const __mmask16 mask = (__mmask16)((1u << tail) - 1u);                        \
  switch (vectors) {                                                            \
    case 1: CR_EDGE_ROWS(1, ars, acs); break;                                   \
    case 2: CR_EDGE_ROWS(2, ars, acs); break;                                   \
    default: CR_EDGE_ROWS(3, ars, acs); break;                                  \
  }

__attribute__((target("avx512f"))) static void micro_avx512_edge(
    int rows, int64_t cols, int64_t kc, const float *a, const float *b, const int64_t *b_rows,
    float *c, int64_t ldc, int acc, const cr_tile_epilogue *e) {
  CR_EDGE_TILE(1, 8)
}

/* ---- Small products, AVX-512 --------------------------------------------- */

/* C = A . B for a small product (see small_product below), A read in place
 * (element (i, p) at a[i * ars + p * acs]) and B's rows in place (row p at
 * b + p * brs, unit column stride, k <= kKC), in tiles of up to 8 x 48 by
 * the edge kernel: accumulators from zero and one fused multiply-add per
 * step along k, as the blocked path does for a single k block, so the same
 * results. */
__attribute__((target("avx512f"))) static void small_avx512(int64_t m, int64_t n, int64_t kc,
                                                            const float *a_data, int64_t ars,
                                                            int64_t acs, const float *b_data,
                                                            int64_t brs, float *c_data,
                                                            int64_t ldc) {
  int64_t b_rows[kKC];
  for (int64_t p = 0; p < kc; ++p) b_rows[p] = p * brs;
  const int acc = 0;
  const cr_tile_epilogue *e = NULL;
  for (int64_t i0 = 0; i0 < m; i0 += 8) {
    const int rows = (int)(m - i0 < 8 ? m - i0 : 8);
    for (int64_t j0 = 0; j0 < n; j0 += 48) {
      const int64_t cols = n - j0 < 48 ? n - j0 : 48;
      const float *a = a_data + i0 * ars, *b = b_data + j0;
      float *c = c_data + i0 * ldc + j0;
      CR_EDGE_TILE(ars, acs)
    }
  }
}

#undef CR_EDGE_TILE
#undef CR_EDGE_ROWS
#undef CR_EDGE_ROW_CASE

/* ---- AVX-512 column tails: vectors along the rows ----------------------- */

/* The last columns of a product (at most kTailColumns: the 4 of 196 = 4 x
 * 48 + 4 positions of a 14 x 14 plane, the 1 of 49 of a 7 x 7 one) left
 * most of the 48-column tile's lanes idle: the edge kernel runs one 16-lane
 * multiply-add per row and step for cols useful lanes (a single column ran
 * narrow_tile). Here the lanes run along A's rows: a packed panel holds its
 * 8 rows of step p contiguous, so two panels make one vector (panel 2i's
 * rows in the low half, 2i + 1's in the high half), multiplied by B's value
 * of column j broadcast from its row (packed or in place), one accumulator
 * per pair of panels and column: cols multiply-adds per pair of panels and
 * step, up to kTailPairs pairs at once (independent chains). Each element is
 * still the sum over p = 0..kc-1 in order, one fused multiply-add per step
 * from zero, added to C after the first k block, then the epilogue: the
 * edge kernel's operations, so its results bit for bit. Up to 12 columns by
 * bench_kernels (1 thread, CPU time, medians of 5 alternated runs): 256 x 8
 * x 1024 56 -> 33 us, 256 x 12 x 1024 58 -> 47 us, 256 x 16 x 1024 51 -> 52
 * us; within a product, 256 x 201 x 1024 503 -> 494 us (9 columns), 256 x
 * 204 x 1024 519 -> 513 us (12). */
enum { kTailColumns = 12, kTailPairs = 4 };

/* The pairs (1 to kTailPairs) of panels of `panels` (1 to 2 x pairs; a
 * missing last panel repeats the one before, its rows not stored) starting
 * at a (panel i at a + i * a_step, row r of step p at [p * 8 + r]), times
 * columns [0, cols) of B (row p at b + b_rows[p]), into rows [0, rows) of
 * c: c = sum, or c += sum when accumulate. */
__attribute__((target("avx512f"), always_inline)) static inline void tail_avx512_pairs(
    const int cols, const int pairs, int panels, int rows, int64_t kc, const float *a,
    int64_t a_step, const float *b, const int64_t *b_rows, float *c, int64_t ldc,
    int accumulate) {
  const float *lo[kTailPairs], *hi[kTailPairs];
#pragma GCC unroll 4
  for (int i = 0; i < kTailPairs; ++i) {
    const int first = 2 * i < panels ? 2 * i : panels - 1;
    const int second = 2 * i + 1 < panels ? 2 * i + 1 : panels - 1;
    lo[i] = a + first * a_step;
    hi[i] = a + second * a_step;
  }
  __m512 acc[kTailPairs][kTailColumns];
#pragma GCC unroll 4
  for (int i = 0; i < kTailPairs; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kTailColumns; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const float *bp = b + b_rows[p];
    __m512 av[kTailPairs];
#pragma GCC unroll 4
    for (int i = 0; i < kTailPairs; ++i) {
      if (i < pairs) {
        const __m512 low = _mm512_castps256_ps512(_mm256_loadu_ps(lo[i] + p * 8));
        av[i] = _mm512_castpd_ps(_mm512_insertf64x4(
            _mm512_castps_pd(low), _mm256_castps_pd(_mm256_loadu_ps(hi[i] + p * 8)), 1));
      }
    }
#pragma GCC unroll 12
    for (int j = 0; j < kTailColumns; ++j) {
      if (j < cols) {
        const __m512 bj = _mm512_set1_ps(bp[j]);
#pragma GCC unroll 4
        for (int i = 0; i < kTailPairs; ++i) {
          if (i < pairs) acc[i][j] = _mm512_fmadd_ps(av[i], bj, acc[i][j]);
        }
      }
    }
  }
  float sums[kTailPairs][kTailColumns][16];
#pragma GCC unroll 4
  for (int i = 0; i < kTailPairs; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kTailColumns; ++j) {
      if (i < pairs && j < cols) _mm512_storeu_ps(sums[i][j], acc[i][j]);
    }
  }
  for (int r = 0; r < rows; ++r) {
    float *out = c + r * ldc;
    const int i = r / 16, lane = r % 16;
    if (accumulate) {
      for (int j = 0; j < cols; ++j) out[j] += sums[i][j][lane];
    } else {
      for (int j = 0; j < cols; ++j) out[j] = sums[i][j][lane];
    }
  }
}

/* The most pairs of panels run at once for a tail of cols columns: their
 * accumulators and A vectors within the 32 vector registers. */
#define CR_TAIL_PAIRS_MAX(cols) ((cols) <= 3 ? 4 : (cols) <= 8 ? 3 : 2)
static int tail_pairs_max(int64_t cols) { return CR_TAIL_PAIRS_MAX(cols); }

/* tail_avx512_pairs for `pairs` (1 to CR_TAIL_PAIRS_MAX(cols)) and the
 * given (constant) cols; the cases past that maximum are never taken. */
#define CR_TAIL_CASE(cols, n)                                                                  \
  tail_avx512_pairs(cols, (n) < CR_TAIL_PAIRS_MAX(cols) ? (n) : CR_TAIL_PAIRS_MAX(cols), panels, \
                    rows, kc, a, a_step, b, b_rows, c, ldc, acc)
#define CR_TAIL_PAIRS(cols)                    \
  switch (pairs) {                             \
    case 1: CR_TAIL_CASE(cols, 1); break;      \
    case 2: CR_TAIL_CASE(cols, 2); break;      \
    case 3: CR_TAIL_CASE(cols, 3); break;      \
    default: CR_TAIL_CASE(cols, 4); break;     \
  }

/* Rows [0, rows) (at most 16 x tail_pairs_max(cols)) of `panels` packed
 * panels (consecutive, a_step floats apart) by cols (1 to kTailColumns)
 * columns, as tail_avx512_pairs. */
__attribute__((target("avx512f"))) static void tail_avx512(int64_t cols, int panels, int rows,
                                                           int64_t kc, const float *a,
                                                           int64_t a_step, const float *b,
                                                           const int64_t *b_rows, float *c,
                                                           int64_t ldc, int acc) {
  const int pairs = (panels + 1) / 2;
  switch (cols) {
    case 1: CR_TAIL_PAIRS(1); break;
    case 2: CR_TAIL_PAIRS(2); break;
    case 3: CR_TAIL_PAIRS(3); break;
    case 4: CR_TAIL_PAIRS(4); break;
    case 5: CR_TAIL_PAIRS(5); break;
    case 6: CR_TAIL_PAIRS(6); break;
    case 7: CR_TAIL_PAIRS(7); break;
    case 8: CR_TAIL_PAIRS(8); break;
    case 9: CR_TAIL_PAIRS(9); break;
    case 10: CR_TAIL_PAIRS(10); break;
    case 11: CR_TAIL_PAIRS(11); break;
    default: CR_TAIL_PAIRS(12); break;
  }
}

#undef CR_TAIL_PAIRS
#undef CR_TAIL_CASE
#undef CR_TAIL_PAIRS_MAX

/* ---- AVX2 narrow tiles: one column of a 6-row panel -------------------- */

/* The sums of narrow_tile for one column j of an AVX2 panel (mr = 6), into
 * acc[0..5]. Four steps of the panel are 24 consecutive floats, three
 * vectors; each is multiplied by the matching B values spread over its
 * lanes (step p's value on the lanes holding step p's rows), so the lanes
 * keep partial sums of a fixed step phase (p mod 4) per row. Steps
 * 8t..8t+3 and 8t+4..8t+7 go to two sets of three accumulators (six
 * independent chains), the sets and phases are added in a fixed order at
 * the end and the last kc mod 8 steps one by one: the result depends on
 * kc only, never on the thread count or the tile's position. */
__attribute__((target("avx2,fma"))) static void narrow_column_avx2(int64_t kc, const float *a,
                                                                   const float *b,
                                                                   int64_t nr, float *acc) {
  const __m256i spread0 = _mm256_setr_epi32(0, 0, 0, 0, 0, 0, 1, 1);
  const __m256i spread1 = _mm256_setr_epi32(1, 1, 1, 1, 2, 2, 2, 2);
  const __m256i spread2 = _mm256_setr_epi32(2, 2, 3, 3, 3, 3, 3, 3);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, t0 = s0, t1 = s0, t2 = s0;
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    const float *bp = b + p * nr, *ap = a + p * 6;
    const __m256 lo = _mm256_castps128_ps256(
        _mm_setr_ps(bp[0], bp[nr], bp[2 * nr], bp[3 * nr]));
    const __m256 hi = _mm256_castps128_ps256(
        _mm_setr_ps(bp[4 * nr], bp[5 * nr], bp[6 * nr], bp[7 * nr]));
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(ap), _mm256_permutevar8x32_ps(lo, spread0), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + 8), _mm256_permutevar8x32_ps(lo, spread1), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + 16), _mm256_permutevar8x32_ps(lo, spread2), s2);
    t0 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + 24), _mm256_permutevar8x32_ps(hi, spread0), t0);
    t1 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + 32), _mm256_permutevar8x32_ps(hi, spread1), t1);
    t2 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + 40), _mm256_permutevar8x32_ps(hi, spread2), t2);
  }
  float v0[8], v1[8], v2[8];
  _mm256_storeu_ps(v0, _mm256_add_ps(s0, t0));
  _mm256_storeu_ps(v1, _mm256_add_ps(s1, t1));
  _mm256_storeu_ps(v2, _mm256_add_ps(s2, t2));
  /* Row r's phase sums: p = 0 mod 4 in v0[r]; 1 in v0[6 + r] (r < 2) or
   * v1[r - 2]; 2 in v1[4 + r] (r < 4) or v2[r - 4]; 3 in v2[2 + r]. */
  for (int r = 0; r < 6; ++r) {
    const float phase1 = r < 2 ? v0[6 + r] : v1[r - 2];
    const float phase2 = r < 4 ? v1[4 + r] : v2[r - 4];
    acc[r] = (v0[r] + phase1) + (phase2 + v2[2 + r]);
  }
  for (; p < kc; ++p) {
    const float bj = b[p * nr];
    for (int r = 0; r < 6; ++r) acc[r] += a[p * 6 + r] * bj;
  }
}

#endif /* CR_GEMM_X86 */

/* ---- Narrow tiles --------------------------------------------------------- */

/* Tiles of at most kNarrowColumns columns under AVX2 and the portable arch
 * (a GEMM with a tiny n, such as a 1 x 1 convolution of a 1 x 1 image;
 * AVX-512 runs its tails with tail_avx512) would waste most of a
 * micro-kernel's lanes, so they are computed column by column with the
 * lanes along the panel's rows instead: tile[r * ldt + j] = the sum over p
 * of a[p * mr + r] * b[p * nr + j]. */
enum { kNarrowColumns = 4 };

CR_TARGET_CLONES static void narrow_tile(int mr, int64_t nr, int64_t cols, int64_t kc,
                                         const float *a, const float *b, float *tile,
                                         int64_t ldt) {
  for (int64_t j = 0; j < cols; ++j) {
    float acc[kMaxMR] = {0};
#if CR_GEMM_X86
    if (mr == 6) { /* only the AVX2 arch has 6-row panels */
      narrow_column_avx2(kc, a, b + j, nr, acc);
    } else
#endif
    {
      for (int64_t p = 0; p < kc; ++p) {
        const float bj = b[p * nr + j];
        for (int r = 0; r < mr; ++r) acc[r] += a[p * mr + r] * bj;
      }
    }
    for (int r = 0; r < mr; ++r) tile[r * ldt + j] = acc[r];
  }
}

/* ---- Run-time dispatch -------------------------------------------------- */

static const cr_gemm_arch kArchs[] = {
    {CR_ISA_GENERIC, 4, 16, micro_generic},
#if CR_GEMM_X86
    {CR_ISA_AVX2, 6, 16, micro_avx2},
    {CR_ISA_AVX512, 8, 48, micro_avx512},
#endif
};

static cr_isa best_supported(void) {
#if CR_GEMM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return CR_ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CR_ISA_AVX2;
#endif
  return CR_ISA_GENERIC;
}

/* -1 until first use; then the ISA in use. A process-wide cache (the CPU
 * is the process's): atomic, so that any thread may read or set it. */
static atomic_int g_isa = -1;

static cr_isa cap_isa(cr_isa wanted) {
  cr_isa best = best_supported();
  return wanted < best ? wanted : best;
}

cr_isa cr_gemm_isa(void) {
  int isa = atomic_load(&g_isa);
  if (isa >= 0) return (cr_isa)isa;
  cr_isa chosen = CR_ISA_AVX512;
  const char *env = getenv("ACC_CPU_REF_ISA");
  if (env != NULL) {
    if (strcmp(env, "generic") == 0) chosen = CR_ISA_GENERIC;
    if (strcmp(env, "avx2") == 0) chosen = CR_ISA_AVX2;
  }
  chosen = cap_isa(chosen);
  atomic_store(&g_isa, (int)chosen);
  return chosen;
}

cr_isa cr_gemm_set_isa(cr_isa isa) {
  cr_isa chosen = cap_isa(isa);
  atomic_store(&g_isa, (int)chosen);
  return chosen;
}

const char *cr_isa_name(cr_isa isa) {
  switch (isa) {
    case CR_ISA_AVX512: return "avx512";
    case CR_ISA_AVX2: return "avx2";
    default: return "generic";
  }
}

static const cr_gemm_arch *arch_for(cr_isa isa) {
  for (size_t i = 0; i < sizeof kArchs / sizeof kArchs[0]; ++i) {
    if (kArchs[i].isa == isa) return &kArchs[i];
  }
  return &kArchs[0];
}

/* ---- Packing ------------------------------------------------------------ */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The depth of the k block starting at k0: kKC, or all that is left when
 * that is at most kKCMax, so that no block is a short tail (ResNet's stem,
 * k = 147 = 3 x 7 x 7, ran as 128 + 19: every tile of C stored, then read
 * and written again for 19 steps). A B panel of kKCMax x 48 floats (30
 * KiB) still stays in L1. Every packed layout and loop over k cuts k this
 * way: block b starts at its k0 and holds the panels, kc x width floats
 * each. */
static int64_t k_block(int64_t k, int64_t k0) {
  return k - k0 <= kKCMax ? k - k0 : kKC;
}

/* count x per floats, or 0 when it overflows size_t. */
static size_t checked_floats(int64_t count, int64_t per) {
  if (count <= 0 || per <= 0) return 0;
  if ((uint64_t)count > SIZE_MAX / sizeof(float) / (uint64_t)per) return 0;
  return (size_t)count * (size_t)per;
}

#if CR_TRANSPOSE_AVX2
/* A whole panel of AVX2's 6 rows (row r at rows + r * rs, unit column
 * stride) into dst (kc x 6, row-major): 8 columns per 8 x 8 transpose (two
 * zero rows), each packed column written as 8 floats whose last two the
 * next column's overwrites; the last column of each 8 as 4 + 2. The same
 * floats as the element loop (a transformer's 256 x 512 activations: that
 * loop, writing every sixth float, took 12% of its forward). */
__attribute__((target("avx2"))) static void pack_a_panel6(const float *rows, int64_t rs,
                                                          int64_t kc, float *dst) {
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    __m256 v[8];
    cr_load_vectors8_transposed(rows + p, rs, 6, v);
    float *out = dst + p * 6;
    for (int j = 0; j < 7; ++j) _mm256_storeu_ps(out + j * 6, v[j]);
    _mm_storeu_ps(out + 42, _mm256_castps256_ps128(v[7]));
    _mm_storel_pi((__m64 *)(void *)(out + 46), _mm256_extractf128_ps(v[7], 1));
  }
  for (; p < kc; ++p) {
    for (int r = 0; r < 6; ++r) dst[p * 6 + r] = rows[r * rs + p];
  }
}

/* A whole panel of AVX-512's 8 rows the same way: each 8 x 8 transpose
 * gives 8 packed columns, written whole (ViT's 197 x 384 activations: the
 * element loop was 4% of a 128 x 3072 x 768 product). Run only where the
 * AVX-512 arch was picked, so the CPU has AVX2. */
__attribute__((target("avx2"))) static void pack_a_panel8(const float *rows, int64_t rs,
                                                          int64_t kc, float *dst) {
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    __m256 v[8];
    cr_load_vectors8_transposed(rows + p, rs, 8, v);
    float *out = dst + p * 8;
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + j * 8, v[j]);
  }
  for (; p < kc; ++p) {
    for (int r = 0; r < 8; ++r) dst[p * 8 + r] = rows[r * rs + p];
  }
}
#endif

/* Rows [i0, i0 + panels * mr) and columns [k0, k0 + kc) of A into panels of
 * mr rows, zero past row m. */
static void pack_a_block(const float *a, int64_t rs, int64_t cs, int64_t m, int64_t i0,
                         int64_t panels, int mr, int64_t k0, int64_t kc, float *dst) {
  for (int64_t panel = 0; panel < panels; ++panel) {
#if CR_TRANSPOSE_AVX2
    /* mr = 6 is AVX2's arch: the CPU has it */
    if (mr == 6 && cs == 1 && i0 + (panel + 1) * mr <= m) {
      pack_a_panel6(a + (i0 + panel * mr) * rs + k0, rs, kc, dst + panel * kc * mr);
      continue;
    }
    /* mr = 8 is AVX-512's arch */
    if (mr == 8 && cs == 1 && i0 + (panel + 1) * mr <= m) {
      pack_a_panel8(a + (i0 + panel * mr) * rs + k0, rs, kc, dst + panel * kc * mr);
      continue;
    }
#endif
    for (int r = 0; r < mr; ++r) {
      const int64_t row = i0 + panel * mr + r;
      float *out = dst + panel * kc * mr + r;
      if (row >= m) {
        for (int64_t p = 0; p < kc; ++p) out[p * mr] = 0.0f;
      } else {
        const float *in = a + row * rs + k0 * cs;
        for (int64_t p = 0; p < kc; ++p) out[p * mr] = in[p * cs];
      }
    }
  }
}

typedef struct cr_view {
  const float *data;
  int64_t rs, cs, n;
} cr_view;

/* The pack_b of a strided view (context: a cr_view). */
static void pack_b_view(const void *context, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                        int nr, float *dst) {
  const cr_view *v = context;
  const int64_t panels = ceil_div(nc, nr);
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t j0 = n0 + panel * nr;
    const int64_t width = min_i64(nr, n0 + nc - j0);
    float *out = dst + panel * kc * nr;
    for (int64_t p = 0; p < kc; ++p, out += nr) {
      const float *in = v->data + (k0 + p) * v->rs + j0 * v->cs;
      if (v->cs == 1) {
        memcpy(out, in, (size_t)width * sizeof *out);
      } else {
        for (int64_t j = 0; j < width; ++j) out[j] = in[j * v->cs];
      }
      for (int64_t j = width; j < nr; ++j) out[j] = 0.0f;
    }
  }
}

/* One panel of a B given by row offsets: row p, column j at data[row_offsets[p]
 * + j]. */
static void pack_b_rows(const cr_gemm_operand *b, int64_t k0, int64_t kc, int64_t j0,
                        int64_t width, int nr, float *dst) {
  for (int64_t p = 0; p < kc; ++p, dst += nr) {
    const float *src = b->data + b->row_offsets[k0 + p] + j0;
    for (int64_t j = 0; j < width; ++j) dst[j] = src[j];
    for (int64_t j = width; j < nr; ++j) dst[j] = 0.0f;
  }
}

size_t cr_gemm_packed_a_floats(int64_t m, int64_t k) {
  const cr_gemm_arch *arch = arch_for(cr_gemm_isa());
  return checked_floats(ceil_div(m, arch->mr) * arch->mr, k);
}

size_t cr_gemm_packed_b_floats(int64_t k, int64_t n) {
  const cr_gemm_arch *arch = arch_for(cr_gemm_isa());
  return checked_floats(ceil_div(n, arch->nr) * arch->nr, k);
}

/* Whole packed layout: the k block starting at k0 (k_block(k, k0) deep)
 * starts at k0 * panels * width, and holds the panels one after another,
 * kc x width floats each. */
/* The whole of A (m x k, element (i, j) at a[i * rs + j * cs]) packed for
 * arch, in that layout. */
static void pack_a_whole(const cr_gemm_arch *arch, int64_t m, int64_t k, const float *a,
                         int64_t rs, int64_t cs, float *packed) {
  const int64_t panels = ceil_div(m, arch->mr);
  for (int64_t k0 = 0, kc = 0; k0 < k; k0 += kc) {
    kc = k_block(k, k0);
    pack_a_block(a, rs, cs, m, 0, panels, arch->mr, k0, kc, packed + k0 * panels * arch->mr);
  }
}

cr_isa cr_gemm_pack_a(int64_t m, int64_t k, const float *a, int64_t rs, int64_t cs,
                      float *packed) {
  const cr_isa isa = cr_gemm_isa();
  pack_a_whole(arch_for(isa), m, k, a, rs, cs, packed);
  return isa;
}

cr_isa cr_gemm_pack_b(int64_t k, int64_t n, const float *b, int64_t rs, int64_t cs,
                      float *packed) {
  const cr_isa isa = cr_gemm_isa();
  const cr_gemm_arch *arch = arch_for(isa);
  const int64_t panels = ceil_div(n, arch->nr);
  const cr_view view = {b, rs, cs, n};
  for (int64_t k0 = 0, kc = 0; k0 < k; k0 += kc) {
    kc = k_block(k, k0);
    pack_b_view(&view, k0, kc, 0, n, arch->nr, packed + k0 * panels * arch->nr);
  }
  return isa;
}

/* ---- Epilogue ------------------------------------------------------------ */

CR_TARGET_CLONES static void tile_epilogue_apply(const cr_tile_epilogue *e, int rows,
                                                 int64_t cols, float *c, int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i) {
    float *row = c + i * ldc;
    if (e->row_bias != NULL) {
      const float bias = e->row_bias[i];
      for (int64_t j = 0; j < cols; ++j) row[j] += bias;
    }
    if (e->col_bias != NULL) {
      for (int64_t j = 0; j < cols; ++j) row[j] += e->col_bias[j];
    }
    if (e->residual != NULL) {
      const float *res = e->residual + i * e->ld_residual;
      for (int64_t j = 0; j < cols; ++j) row[j] += res[j];
    }
    if (e->act == CR_EPI_RELU) {
      for (int64_t j = 0; j < cols; ++j) row[j] = row[j] < 0.0f ? 0.0f : row[j];
    } else if (e->act == CR_EPI_CLIP) {
      const float low = e->clip_low, high = e->clip_high;
      for (int64_t j = 0; j < cols; ++j) {
        const float v = row[j];
        const float t = v < low ? low : v;
        row[j] = v > high ? high : t;
      }
    } else if (e->act == CR_EPI_HARD_SIGMOID || e->act == CR_EPI_HARD_SWISH) {
      const float alpha = e->clip_low, beta = e->clip_high;
      if (e->act == CR_EPI_HARD_SWISH) {
        for (int64_t j = 0; j < cols; ++j) row[j] = cr_epilogue_hard_sigmoid(1, alpha, beta, row[j]);
      } else {
        for (int64_t j = 0; j < cols; ++j) row[j] = cr_epilogue_hard_sigmoid(0, alpha, beta, row[j]);
      }
    }
  }
}

/* e moved to the tile whose first element is (i0, j0). */
static cr_tile_epilogue tile_epilogue(const cr_epilogue *e, int64_t i0, int64_t j0) {
  cr_tile_epilogue t;
  t.row_bias = e->row_bias != NULL ? e->row_bias + i0 : NULL;
  t.col_bias = e->col_bias != NULL ? e->col_bias + j0 : NULL;
  t.residual = e->residual != NULL ? e->residual + i0 * e->ld_residual + j0 : NULL;
  t.ld_residual = e->ld_residual;
  t.act = e->act;
  t.clip_low = e->clip_low;
  t.clip_high = e->clip_high;
  return t;
}

void cr_epilogue_apply(const cr_epilogue *e, int64_t i0, int64_t rows, int64_t j0,
                       int64_t cols, float *c, int64_t ldc) {
  if (e == NULL) return;
  for (int64_t i = i0; i < i0 + rows; ++i) {
    const cr_tile_epilogue t = tile_epilogue(e, i, j0);
    tile_epilogue_apply(&t, 1, cols, c + i * ldc + j0, ldc);
  }
}

static int epilogue_is_empty(const cr_epilogue *e) {
  return e == NULL || (e->row_bias == NULL && e->col_bias == NULL && e->residual == NULL &&
                       e->act == CR_EPI_NONE);
}

/* ---- The blocked product ------------------------------------------------ */

typedef struct cr_gemm_job {
  const cr_gemm_arch *arch;
  int64_t m, n, k;
  /* The k blocks computed: those in [k_begin, k_end), block boundaries
   * (split_k_point); [0, k) but for the parts of a product cut along k. */
  int64_t k_begin, k_end;
  const cr_gemm_operand *a, *b;
  cr_view b_view;
  float *c;
  int64_t ldc;
  const cr_epilogue *epilogue;
  const cr_gemm_done *done;
  int split_rows; /* threads share row panels (1) or column panels (0) */
  int64_t group;  /* panels per unit of work shared out */
  int64_t shares; /* > 0: unit s is share s of that many (share_panels) */
  /* Several threads read B in place: fetch each column panel's rows
   * ahead (gemm_range). */
  int fetch_b;
  atomic_int failed;
} cr_gemm_job;

/* The calling thread's scratch buffer `slot` of at least count floats. */
static float *scratch_floats(cr_scratch_slot slot, size_t count) {
  return cr_scratch(slot, (count ? count : 1) * sizeof(float));
}

/* Pre-packed A (weights) comes from memory on its first pass: each
 * panel (kc x mr floats, 4 KiB at kc = 128 under AVX-512) is a page of its
 * own, where the hardware prefetchers start afresh, and with few columns
 * (mobilenetv2's 7 x 7 layers: n = 49) a panel's tiles are too short to
 * hide the wait. The panel this many tiles ahead is fetched into L2 when
 * its first pass begins: bench_kernels, packed A, caches flushed, 320 x 49
 * x 960 299-306 -> 285-295 us; mobilenetv2 at batch 1, 1 thread,
 * alternated with onnxruntime, paired 1.214 -> 1.137. */
enum { kPrefetchPanels = 2 };

/* Pre-packed B's next column panel is fetched ahead (gemm_range) when at
 * least this many row panels share the current one: with fewer, B streams
 * from memory panel after panel, which the hardware prefetchers follow, and
 * a whole panel's requests at once only queue in front of the kernel's own
 * (bench_kernels, B packed, caches flushed, 1 thread: 8 x 1000 x 2048 310
 * -> 413 us with the fetch, 16 x 768 x 768 110 -> 125; 32 rows neutral; 64
 * x 1000 x 2048 1,363 -> 1,334, 128 x 768 x 768 705 -> 685). */
enum { kFetchBMinPanels = 4 };

/* The most floats of A that gemm_range packs whole (1 MiB, half an L2). */
enum { kWholeAFloats = 1 << 18 };

/* Whether a tile of cols columns (the last of a product) runs tail_avx512. */
static int tail_columns(const cr_gemm_arch *arch, int64_t cols) {
#if CR_GEMM_X86
  return arch->isa == CR_ISA_AVX512 && cols < arch->nr && cols <= kTailColumns;
#else
  (void)arch;
  (void)cols;
  return 0;
#endif
}

/* B read in place by several threads: half of it (or more) was written
 * by the other core in the step before, and the hardware prefetchers do
 * not follow a panel's strided rows there. Share `part` of `parts` of the
 * rows [k0, k0 + kc) of the full column panel starting at column j is
 * fetched into L2, one share with each tile of the panel before it:
 * ResNet-50, batch 1, 2 threads, each share's CPU time in the model,
 * medians of 10 runs: 256 x 196 x 1024 287 -> 266 us, 512 x 196 x 1024
 * 561 -> 527, 64 x 3136 x 256 76 -> 71 (the least wall time of each
 * step over 30 runs moves less: the 1 x 1 layers 0.98-0.99 of before).
 * On one thread B is the thread's own and comes from L2 anyway. */
static void fetch_rows_ahead(const cr_gemm_operand *b, int64_t k0, int64_t kc, int64_t j,
                             int nr, int64_t part, int64_t parts) {
  const int64_t per = (kc + parts - 1) / parts, end = min_i64(kc, (part + 1) * per);
  const int64_t last = nr * (int64_t)sizeof(float) - 1;
  for (int64_t r = part * per; r < end; ++r) {
    const char *row = (const char *)(b->data + b->row_offsets[k0 + r] + j);
    for (int64_t byte = 0; byte < last; byte += 64) __builtin_prefetch(row + byte, 0, 2);
    __builtin_prefetch(row + last, 0, 2); /* the line of the row's last value */
  }
}

/* C's row panels [p0, p1) by column panels [q0, q1). */
static void gemm_range(cr_gemm_job *job, int64_t p0, int64_t p1, int64_t q0, int64_t q1) {
  const cr_gemm_arch *arch = job->arch;
  const int mr = arch->mr, nr = arch->nr;
  const int64_t m = job->m, n = job->n, k = job->k;
  const int64_t m_panels = ceil_div(m, mr), n_panels = ceil_div(n, nr);
  const int a_packed = job->a->packed != NULL && job->a->packed_isa == arch->isa;
  const int b_packed = job->b->packed != NULL && job->b->packed_isa == arch->isa;
  const int64_t kc_max = min_i64(kKCMax, k);
  float *b_buffer = NULL, *a_buffer = NULL;
  /* B read in place through its row offsets: full panels, and under
   * AVX-512 the edge panel too (the edge kernel masks the loads of its last
   * vector, the tail kernel loads single values); otherwise the edge panel
   * is packed, alone. */
  const int b_indirect = !b_packed && job->b->row_offsets != NULL;
  const int edge_in_place = CR_GEMM_X86 && arch->isa == CR_ISA_AVX512;
  /* Scratch sized to this range's blocks (small products take little),
   * the thread's own, kept from call to call. */
  const int64_t b_panels = b_indirect ? 1 : min_i64(kNCPanels, q1 - q0);
  const int64_t a_panels = min_i64(kMCPanels, p1 - p0);
  if (!b_packed) {
    b_buffer = scratch_floats(CR_SCRATCH_GEMM_PACK_B, (size_t)(kc_max * b_panels * nr));
  }
  /* A packed once for the whole range when B spans several blocks of
   * columns and the packed rows fit in L2 (the transformers' products:
   * 128 x 3072 x 768 packed its A three times, 2.3% of the product);
   * otherwise block by block, again for each block of B. */
  const int64_t range_panels = p1 - p0;
  const int a_whole = !a_packed && q1 - q0 > kNCPanels && job->k_begin == 0 &&
                      job->k_end == k && range_panels * mr * k <= kWholeAFloats;
  if (!a_packed) {
    a_buffer = scratch_floats(CR_SCRATCH_GEMM_PACK_A,
                              (size_t)(a_whole ? range_panels * mr * k : kc_max * a_panels * mr));
  }
  if ((!b_packed && b_buffer == NULL) || (!a_packed && a_buffer == NULL)) {
    atomic_store(&job->failed, 1);
    return;
  }
  float tile[kMaxMR * kMaxNR];
  int64_t packed_rows[kKCMax]; /* row p of a packed panel */
  for (int64_t p = 0; p < kKCMax; ++p) packed_rows[p] = p * nr;
  const cr_pack_b_fn pack_b = job->b->pack_b != NULL ? job->b->pack_b : pack_b_view;
  const void *pack_context = job->b->pack_b != NULL ? job->b->pack_context : &job->b_view;
  /* The order of a block's tiles. Column panel by column panel (each B
   * panel once from L1, the A panels from L2) writes one tile to each of
   * the block's m rows in turn: up to 96 rows of C written a few cache
   * lines at a time. When k is short, writing C is most of the work, and
   * the rows whose lines are being filled outnumber what the CPU's
   * prefetchers follow: row panel by row panel then writes mr rows at a
   * time, front to back, and reads the B block (at most kRowsFirstK x
   * kNCPanels panels) from L2. Either order computes every tile the same
   * way: the results are the same. */
  const int rows_first = k <= kRowsFirstK;
  if (a_whole) {
    for (int64_t k0 = 0, kc = 0; k0 < k; k0 += kc) {
      kc = k_block(k, k0);
      pack_a_block(job->a->data, job->a->rs, job->a->cs, m, p0 * mr, range_panels, mr, k0,
                   kc, a_buffer + k0 * range_panels * mr);
    }
  }

  for (int64_t qc = q0; qc < q1; qc += kNCPanels) {
    const int64_t q_count = min_i64(kNCPanels, q1 - qc);
    const int64_t j_begin = qc * nr, j_end = min_i64(n, (qc + q_count) * nr);
    for (int64_t k0 = job->k_begin, kc = 0; k0 < job->k_end; k0 += kc) {
      kc = k_block(k, k0);
      const int first = k0 == job->k_begin, last = k0 + kc >= job->k_end;
      const float *b_block;
      if (b_packed) {
        b_block = job->b->packed + k0 * n_panels * nr + qc * kc * nr;
      } else if (b_indirect) {
        b_block = b_buffer;
        const int64_t last_panel = (qc + q_count - 1) * nr;
        const int64_t edge_cols = j_end - last_panel;
        if (edge_cols < nr && !edge_in_place) {
          pack_b_rows(job->b, k0, kc, last_panel, edge_cols, nr, b_buffer);
        }
      } else {
        pack_b(pack_context, k0, kc, j_begin, j_end - j_begin, nr, b_buffer);
        b_block = b_buffer;
      }
      for (int64_t pc = p0; pc < p1; pc += kMCPanels) {
        const int64_t p_count = min_i64(kMCPanels, p1 - pc);
        const float *a_block;
        if (a_packed) {
          a_block = job->a->packed + k0 * m_panels * mr + pc * kc * mr;
        } else if (a_whole) {
          a_block = a_buffer + k0 * range_panels * mr + (pc - p0) * kc * mr;
        } else {
          pack_a_block(job->a->data, job->a->rs, job->a->cs, m, pc * mr, p_count, mr, k0, kc,
                       a_buffer);
          a_block = a_buffer;
        }
        cr_prefetch b_ahead = cr_prefetch_spread(NULL, 0, 1);
        const int interleave_tail = !rows_first && q_count >= 2 &&
                                    tail_columns(arch, j_end - (qc + q_count - 1) * nr);
        for (int64_t t = 0; t < p_count * q_count; ++t) {
          int64_t q = rows_first ? t % q_count : t / p_count;
          int64_t p = rows_first ? t / q_count : t % p_count;
          if (interleave_tail && t >= (q_count - 2) * p_count) {
            /* The last full panel's tiles and the tail's alternate, so
             * that the tail reads A's panels from L1. */
            const int64_t u = t - (q_count - 2) * p_count;
            q = q_count - 2 + u % 2;
            p = u / 2;
          }
          const int64_t j0 = (qc + q) * nr;
          const int64_t cols = min_i64(nr, n - j0);
          const float *b_panel = b_block + q * kc * nr;
          const int64_t *b_rows = packed_rows;
          if (b_indirect && (cols == nr || edge_in_place)) {
            b_panel = job->b->data + j0;
            b_rows = job->b->row_offsets + k0;
          } else if (b_indirect) {
            b_panel = b_buffer;
          }
          const int64_t i0 = (pc + p) * mr;
          const int rows = (int)min_i64(mr, m - i0);
          const float *a_panel = a_block + p * kc * mr;
          if (a_packed && q == 0 && p + kPrefetchPanels < p_count) {
            cr_prefetch ahead = cr_prefetch_spread(a_panel + kPrefetchPanels * kc * mr,
                                                   kc * mr * (int64_t)sizeof *a_panel, 1);
            cr_prefetch_part(&ahead);
          }
          if (b_packed && !rows_first && p == 0 && p_count >= kFetchBMinPanels) {
            b_ahead = cr_prefetch_spread(b_panel + kc * nr, kc * nr * (int64_t)sizeof *b_panel,
                                         p_count);
          }
          if (b_packed && !rows_first) cr_prefetch_part(&b_ahead);
          if (b_indirect && job->fetch_b && !rows_first && p_count >= kFetchBMinPanels &&
              q + 1 < q_count && n - (j0 + nr) >= nr) {
            fetch_rows_ahead(job->b, k0, kc, j0 + nr, nr, p, p_count);
          }
          float *c_tile = job->c + i0 * job->ldc + j0;
          cr_tile_epilogue te;
          const cr_tile_epilogue *e = NULL;
          if (last && job->epilogue != NULL) {
            te = tile_epilogue(job->epilogue, i0, j0);
            e = &te;
          }
#if CR_GEMM_X86
          if (tail_columns(arch, cols)) {
            /* The column tail of a group of row panels at once, run at the
             * group's last panel (interleaved, the group's A panels have
             * just been read: from L1). */
            const int64_t group = 2 * tail_pairs_max(cols);
            if (p % group != group - 1 && p != p_count - 1) continue;
            const int64_t g0 = p - p % group; /* the group's first panel */
            const int panels = (int)(p + 1 - g0);
            const int64_t gi0 = (pc + g0) * mr;
            const int tail_rows = (int)min_i64(panels * mr, m - gi0);
            float *c_group = job->c + gi0 * job->ldc + j0;
            if (e != NULL) te = tile_epilogue(job->epilogue, gi0, j0);
            tail_avx512(cols, panels, tail_rows, kc, a_block + g0 * kc * mr, kc * mr, b_panel,
                        b_rows, c_group, job->ldc, !first);
            if (e != NULL) tile_epilogue_apply(e, tail_rows, cols, c_group, job->ldc);
            continue;
          }
#endif
          if (cols == nr) {
            arch->kernel(rows, kc, a_panel, b_panel, b_rows, c_tile, job->ldc, !first, e);
#if CR_GEMM_X86
          } else if (arch->isa == CR_ISA_AVX512 && cols > 1) {
            micro_avx512_edge(rows, cols, kc, a_panel, b_panel, b_rows, c_tile, job->ldc,
                              !first, e);
#endif
          } else {
            if (cols <= kNarrowColumns) {
              narrow_tile(mr, nr, cols, kc, a_panel, b_panel, tile, nr);
            } else {
              arch->kernel(rows, kc, a_panel, b_panel, b_rows, tile, nr, 0, NULL);
            }
            for (int r = 0; r < rows; ++r) {
              float *out = c_tile + r * job->ldc;
              const float *in = tile + r * nr;
              if (first) {
                for (int64_t j = 0; j < cols; ++j) out[j] = in[j];
              } else {
                for (int64_t j = 0; j < cols; ++j) out[j] += in[j];
              }
            }
            if (e != NULL) tile_epilogue_apply(e, rows, cols, c_tile, job->ldc);
          }
        }
      }
    }
    if (job->done != NULL) {
      job->done->block(job->done->context, p0 * mr, min_i64(m, p1 * mr), j_begin, j_end);
    }
  }
}

static void gemm_chunk(void *context, int64_t begin, int64_t end) {
  cr_gemm_job *job = context;
  const int64_t m_panels = ceil_div(job->m, job->arch->mr);
  const int64_t n_panels = ceil_div(job->n, job->arch->nr);
  int64_t p0 = begin * job->group, p1 = end * job->group;
  if (job->shares > 0) {
    const int64_t panels = job->split_rows ? m_panels : n_panels;
    p0 = panels * begin / job->shares;
    p1 = panels * end / job->shares;
  }
  if (job->split_rows) {
    gemm_range(job, p0, min_i64(p1, m_panels), 0, n_panels);
  } else {
    gemm_range(job, 0, m_panels, p0, min_i64(p1, n_panels));
  }
}

/* ---- Small products ------------------------------------------------------ */

/* Products this small (multiply-adds), read in place with k in one block,
 * skip packing: attention's per-head products (16 x 16 x 16 to 32 x 32 x 32)
 * took 0.8-2.5 us each through the blocked path, most of it packing and
 * scratch allocation. */
enum {
  kSmallMaxWork = 1 << 16,
  /* Products of at most 16 columns (one vector) up to this size skip
   * packing too: attention's weights times values (128 x 128 by 128 x 16
   * per head) took 8.8 us a product through the blocked path, packing A's
   * 128 x 128 for 16 columns of output, and 3.3 us in place (one thread,
   * AVX-512). On one thread only: the blocked path shares bigger ones. */
  kSmallNarrowCols = 16,
  kSmallMaxNarrowWork = 1 << 19,
  kSmallMaxB = 4096 /* floats of a transposed B copied to the stack */
};

/* The portable kernel of small products: for each row and 16 columns, the
 * sums of micro_generic in its order (from zero, a product then a sum per
 * step along k): the same results as the blocked path. */
static void small_generic(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars,
                          int64_t acs, const float *b, int64_t brs, float *c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
      const int64_t cols = n - j0 < 16 ? n - j0 : 16;
      float acc[16] = {0};
      for (int64_t p = 0; p < k; ++p) {
        const float ar = a[i * ars + p * acs];
        const float *bp = b + p * brs + j0;
        for (int64_t j = 0; j < cols; ++j) acc[j] += ar * bp[j];
      }
      for (int64_t j = 0; j < cols; ++j) c[i * ldc + j0 + j] = acc[j];
    }
  }
}

/* C = A . B (then the epilogue) without packing, when the product is small
 * enough (the narrow ones only when one_thread: the product would run on
 * one thread anyway), its operands are plain views, k fits one block and
 * the ISA has a small kernel; returns whether it did. A B with a column
 * stride other than 1 (a transposed operand) is copied to the stack
 * first. */
static int small_product(int64_t m, int64_t n, int64_t k, const cr_gemm_operand *a,
                         const cr_gemm_operand *b, float *c, int64_t ldc,
                         const cr_epilogue *epilogue, int one_thread) {
  const cr_isa isa = cr_gemm_isa();
  const double work = (double)m * (double)n * (double)k;
  if (k > kKC || (work > (double)kSmallMaxWork &&
                  !(n <= kSmallNarrowCols && work <= (double)kSmallMaxNarrowWork &&
                    one_thread))) {
    return 0;
  }
  if (a->pack_b != NULL || a->packed != NULL || a->row_offsets != NULL || b->pack_b != NULL ||
      b->packed != NULL || b->row_offsets != NULL) {
    return 0;
  }
  if (isa != CR_ISA_GENERIC && !(CR_GEMM_X86 && isa == CR_ISA_AVX512)) return 0;
  const float *b_rows = b->data;
  int64_t brs = b->rs;
  float copy[kSmallMaxB];
  if (b->cs != 1) {
    if (k * n > kSmallMaxB) return 0;
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) copy[p * n + j] = b->data[p * b->rs + j * b->cs];
    }
    b_rows = copy;
    brs = n;
  }
#if CR_GEMM_X86
  if (isa == CR_ISA_AVX512) {
    small_avx512(m, n, k, a->data, a->rs, a->cs, b_rows, brs, c, ldc);
  } else
#endif
  {
    small_generic(m, n, k, a->data, a->rs, a->cs, b_rows, brs, c, ldc);
  }
  if (!epilogue_is_empty(epilogue)) cr_epilogue_apply(epilogue, 0, m, 0, n, c, ldc);
  return 1;
}

/* Whether threads share an m x n product's row panels (else its column
 * panels): the larger number of panels, so that the shares are even,
 * unless C has fewer rows than columns and its columns make enough panels
 * (kSplitColumnsPanels): sharing rows, every thread reads the whole of B
 * (k x n), sharing columns the whole of A (m x k), so the smaller operand
 * is the one read twice. Batch 1, 2 threads, per step, fastest of 15
 * alternated runs: ResNet-50's 512 x 28 x 28 -> 256 627 -> 547 us, 256 x
 * 56 x 56 -> 512 stride 2 783 -> 670, 128 x 28 x 28 -> 512 306-341 ->
 * 306-318, its convolutions in all 0.988x; ViT-S/16's in all 0.940x (its
 * 197 x 384 -> 1152 products); MobileNetV2 1.005x. */
enum { kSplitColumnsPanels = 16 };

static int split_by_rows(const cr_gemm_arch *arch, int64_t m, int64_t n) {
  const int64_t m_panels = ceil_div(m, arch->mr), n_panels = ceil_div(n, arch->nr);
  if (m < n && n_panels >= kSplitColumnsPanels) return 0;
  return m_panels > n_panels;
}

int64_t cr_gemm_panels(int64_t m, int64_t n) {
  const cr_gemm_arch *arch = arch_for(cr_gemm_isa());
  return split_by_rows(arch, m, n) ? ceil_div(m, arch->mr) : ceil_div(n, arch->nr);
}

int cr_gemm_threads(int64_t m, int64_t n, int64_t k, int num_threads) {
  const int64_t panels = cr_gemm_panels(m, n);
  /* A GEMM thread is worth twice the usual work (its packing is
   * duplicated). */
  int threads = cr_threads_for_work(num_threads, (double)m * (double)n * (double)k, 2);
  if (threads > panels) threads = (int)panels;
  return threads < 1 ? 1 : threads;
}

/* The largest operand (floats) packed once for all threads (16 MiB). */
enum { kMaxSharedFloats = 1 << 22 };

int cr_gemm(int64_t m, int64_t n, int64_t k, const cr_gemm_operand *a, const cr_gemm_operand *b,
            float *c, int64_t ldc, const cr_epilogue *epilogue, int num_threads) {
  return cr_gemm_notify(m, n, k, a, b, c, ldc, epilogue, NULL, num_threads);
}

static void job_init(cr_gemm_job *job, int64_t m, int64_t n, int64_t k, const cr_gemm_operand *a,
                     const cr_gemm_operand *b, float *c, int64_t ldc, const cr_epilogue *epilogue,
                     const cr_gemm_done *done) {
  job->arch = arch_for(cr_gemm_isa());
  job->m = m;
  job->n = n;
  job->k = k;
  job->k_begin = 0;
  job->k_end = k;
  job->a = a;
  job->b = b;
  job->b_view = (cr_view){b->data, b->rs, b->cs, n};
  job->c = c;
  job->ldc = ldc;
  job->epilogue = epilogue_is_empty(epilogue) ? NULL : epilogue;
  job->done = done;
  /* Threads take whole panels of one dimension (split_by_rows), so each
   * tile is computed whole by one thread. */
  job->split_rows = split_by_rows(job->arch, m, n);
  job->group = 1;
  job->shares = 0;
  job->fetch_b = 0;
  atomic_init(&job->failed, 0);
}

/* A plain B (rows of contiguous values) is read in place, through the
 * offsets of its rows (in the calling thread's scratch), rather than
 * packed (the same panels, so the same results): packing B cost more than
 * it saved in the products of convolutions and activations measured,
 * 1.0-1.4x at 1 thread and up to 2.3x at 2 threads (where the threads
 * sharing A's rows waited for one packing of B), except where a thread's
 * rows need more than one block of A and B's rows are a multiple of 128
 * floats apart: those rows fall in few sets of the L1 cache and evict each
 * other while the block is reused (512 x 512 x 512: 1.65 ms packed, 1.80 ms
 * in place; 1.59 ms in place with rows 528 floats apart). Points job->b at
 * *in_place when it does. */
static void read_b_in_place(cr_gemm_job *job, int64_t threads, cr_gemm_operand *in_place) {
  const cr_gemm_operand *b = job->b;
  const int64_t m_panels = ceil_div(job->m, job->arch->mr);
  const int64_t rows_per_thread = job->split_rows ? ceil_div(m_panels, threads) : m_panels;
  if (b->pack_b != NULL || b->row_offsets != NULL || b->cs != 1 ||
      (b->packed != NULL && b->packed_isa == job->arch->isa) ||
      (rows_per_thread > kMCPanels && b->rs % 128 == 0)) {
    return;
  }
  int64_t *rows = cr_scratch(CR_SCRATCH_GEMM_ROWS, (size_t)job->k * sizeof *rows);
  if (rows == NULL) return; /* packed instead */
  for (int64_t p = 0; p < job->k; ++p) rows[p] = p * b->rs;
  *in_place = (cr_gemm_operand){b->data, 0, 0, NULL, NULL, NULL, CR_ISA_GENERIC, rows};
  job->b = in_place;
}

/* C = zeros (k = 0), then the epilogue, over rows [i0, i1) and columns
 * [j0, j1). */
static void zero_product(float *c, int64_t ldc, const cr_epilogue *epilogue,
                         const cr_gemm_done *done, int64_t i0, int64_t i1, int64_t j0,
                         int64_t j1) {
  if (i1 <= i0 || j1 <= j0) return;
  for (int64_t i = i0; i < i1; ++i) memset(c + i * ldc + j0, 0, (size_t)(j1 - j0) * sizeof *c);
  if (!epilogue_is_empty(epilogue)) cr_epilogue_apply(epilogue, i0, i1 - i0, j0, j1 - j0, c, ldc);
  if (done != NULL) done->block(done->context, i0, i1, j0, j1);
}

/* Panels [*p0, *p1) of the larger dimension (of `panels`) for a share. */
static void share_panels(int64_t panels, int64_t share, int64_t shares, int64_t *p0,
                         int64_t *p1) {
  *p0 = panels * share / shares;
  *p1 = panels * (share + 1) / shares;
}

/* ---- Sums cut along k --------------------------------------------------- */

/* A product whose threads would share C's rows reads the whole of B on
 * every thread. When B is deep and C small (the 1 x 1 layers that narrow a
 * batch-1 image: MobileNetV2's 384 x 196 -> 64, ResNet-50's 1024 x 196 ->
 * 256), the step before left B's rows split between the cores by channel,
 * and half of what each thread reads comes from the other core's cache:
 * MobileNetV2's 14 x 14 projections took as long on two threads as on one
 * (45 us). Such a product is computed as two sums instead, C = P0 + P1,
 * P0 over k's blocks before split_k_point and P1 over the rest, then the
 * epilogue: each thread reads only its part of B, the rows its core wrote,
 * and the threads add the two parts row by row. The cut depends on the
 * shape alone, and one thread computes the same two sums in the same
 * order (P1 in scratch), so the values do not depend on the thread count.
 * Where P1 is one k block, P0 + P1 is what the uncut loop computes (each
 * block's sums are added to C as a whole), and one thread runs it uncut.
 * MobileNetV2 at batch 1 on 2 threads, least step times of 40 runs: 384 x
 * 196 -> 64 46 -> 36 us, 576 x 196 -> 96 85 -> 61 us; its forward 2.96 ->
 * 2.82 ms (onnxruntime 2.58); on one thread unchanged (4.70-4.74 ms). */
enum {
  kSplitKMinDepth = 256,        /* at least two blocks of kKC */
  kSplitKMaxOutputs = 1 << 16,  /* C (and P1) at most 256 KiB */
};

/* The k block boundary nearest k / 2 (the later one on a tie) where a
 * product's sums are cut, or 0 where they are not: C's rows shared
 * (split_by_rows), k at least kSplitKMinDepth and twice C's rows, C at most
 * kSplitKMaxOutputs floats. */
static int64_t split_k_point(const cr_gemm_arch *arch, int64_t m, int64_t n, int64_t k) {
  if (k < kSplitKMinDepth || k < 2 * m || n > kSplitKMaxOutputs / m ||
      !split_by_rows(arch, m, n)) {
    return 0;
  }
  int64_t best = 0;
  for (int64_t k0 = 0; k0 < k; k0 += k_block(k, k0)) {
    if (k0 > 0 && (best == 0 || llabs(2 * k0 - k) <= llabs(2 * best - k))) best = k0;
  }
  return best;
}

/* Whether P1 (k's blocks from split on) is a single block. */
static int split_k_single(int64_t k, int64_t split) { return split + k_block(k, split) >= k; }

/* A product cut at k = split: part 0 (k blocks before split) into C, part 1
 * into part[1].c (scratch, row stride n), both without epilogue or done;
 * shared by rows within each part. Then C's rows are summed: C += part 1,
 * the epilogue, done. */
typedef struct cr_split_k {
  cr_gemm_job part[2];
  int64_t row_shares; /* shares of each part's row panels */
  int64_t sum_shares; /* shares of C's rows in the sum */
  const cr_epilogue *epilogue;
  const cr_gemm_done *done;
} cr_split_k;

/* C's rows [i0, i1): C += part 1, then the epilogue and done. */
CR_TARGET_CLONES static void split_k_sum_rows(const cr_split_k *t, int64_t i0, int64_t i1) {
  const cr_gemm_job *job = &t->part[0];
  const int64_t n = job->n;
  for (int64_t i = i0; i < i1; ++i) {
    float *c = job->c + i * job->ldc;
    const float *p = t->part[1].c + i * n;
    for (int64_t j = 0; j < n; ++j) c[j] += p[j];
  }
  if (t->epilogue != NULL) cr_epilogue_apply(t->epilogue, i0, i1 - i0, 0, n, job->c, job->ldc);
  if (t->done != NULL) t->done->block(t->done->context, i0, i1, 0, n);
}

static void split_k_parts(void *context, int64_t begin, int64_t end) {
  cr_split_k *t = context;
  const int64_t m_panels = ceil_div(t->part[0].m, t->part[0].arch->mr);
  const int64_t n_panels = ceil_div(t->part[0].n, t->part[0].arch->nr);
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t share = unit % t->row_shares;
    int64_t p0, p1;
    share_panels(m_panels, share, t->row_shares, &p0, &p1);
    gemm_range(&t->part[unit / t->row_shares], p0, p1, 0, n_panels);
  }
}

static void split_k_sums(void *context, int64_t begin, int64_t end) {
  const cr_split_k *t = context;
  const int64_t m = t->part[0].m;
  split_k_sum_rows(t, m * begin / t->sum_shares, m * end / t->sum_shares);
}

/* The parts of *job (k blocks [0, split) and [split, k)), part 1 into the
 * calling thread's scratch, one share of rows each; -1 when the scratch
 * cannot be had. */
static int split_k_init(cr_split_k *t, const cr_gemm_job *job, int64_t split) {
  float *partial = scratch_floats(CR_SCRATCH_GEMM_SHARED, (size_t)(job->m * job->n));
  if (partial == NULL) return -1;
  t->part[0] = *job;
  t->part[0].k_end = split;
  t->part[0].epilogue = NULL;
  t->part[0].done = NULL;
  t->part[0].fetch_b = 0;
  t->part[1] = t->part[0];
  t->part[1].k_begin = split;
  t->part[1].k_end = job->k;
  t->part[1].c = partial;
  t->part[1].ldc = job->n;
  atomic_init(&t->part[0].failed, 0);
  atomic_init(&t->part[1].failed, 0);
  t->row_shares = 1;
  t->sum_shares = 1;
  t->epilogue = job->epilogue;
  t->done = job->done;
  return 0;
}

static int split_k_failed(cr_split_k *t) {
  return atomic_load(&t->part[0].failed) || atomic_load(&t->part[1].failed);
}

/* The product of *job cut at split on `threads` threads: the two parts side
 * by side, then the sum shared by rows. */
static int gemm_split_k(const cr_gemm_job *job, int64_t split, int threads) {
  cr_split_k t;
  if (split_k_init(&t, job, split) != 0) return -1;
  t.row_shares = min_i64((threads + 1) / 2, ceil_div(job->m, job->arch->mr));
  t.sum_shares = threads;
  cr_parallel_for(threads, 2 * t.row_shares, split_k_parts, &t);
  if (split_k_failed(&t)) return -1;
  cr_parallel_for(threads, threads, split_k_sums, &t);
  return 0;
}

void cr_gemm_share_bounds(int64_t m, int64_t n, int64_t share, int64_t shares, int64_t *i0,
                          int64_t *i1, int64_t *j0, int64_t *j1) {
  const cr_gemm_arch *arch = arch_for(cr_gemm_isa());
  const int64_t m_panels = ceil_div(m, arch->mr), n_panels = ceil_div(n, arch->nr);
  *i0 = 0, *i1 = m, *j0 = 0, *j1 = n;
  if (shares <= 1) return;
  if (share < 0 || share >= shares || m <= 0 || n <= 0) {
    *i1 = 0, *j1 = 0;
    return;
  }
  int64_t p0, p1;
  if (split_by_rows(arch, m, n)) {
    share_panels(m_panels, share, shares, &p0, &p1);
    *i0 = min_i64(m, p0 * arch->mr), *i1 = min_i64(m, p1 * arch->mr);
  } else {
    share_panels(n_panels, share, shares, &p0, &p1);
    *j0 = min_i64(n, p0 * arch->nr), *j1 = min_i64(n, p1 * arch->nr);
  }
}

int cr_gemm_share(int64_t m, int64_t n, int64_t k, const cr_gemm_operand *a,
                  const cr_gemm_operand *b, float *c, int64_t ldc, const cr_epilogue *epilogue,
                  const cr_gemm_done *done, int64_t share, int64_t shares) {
  if (shares <= 1) return cr_gemm_notify(m, n, k, a, b, c, ldc, epilogue, done, 1);
  int64_t i0, i1, j0, j1;
  cr_gemm_share_bounds(m, n, share, shares, &i0, &i1, &j0, &j1);
  if (i1 <= i0 || j1 <= j0) return 0;
  if (k <= 0) {
    zero_product(c, ldc, epilogue, done, i0, i1, j0, j1);
    return 0;
  }
  cr_gemm_job job;
  job_init(&job, m, n, k, a, b, c, ldc, epilogue, done);
  cr_gemm_operand in_place;
  read_b_in_place(&job, shares, &in_place);
  job.fetch_b = job.split_rows;
  const int64_t m_panels = ceil_div(m, job.arch->mr), n_panels = ceil_div(n, job.arch->nr);
  const int64_t split = split_k_point(job.arch, m, n, k);
  if (split > 0 && !split_k_single(k, split)) {
    /* The share's rows (split_by_rows holds) as cr_gemm_notify sums them. */
    cr_split_k t;
    if (split_k_init(&t, &job, split) != 0) return -1;
    for (int part = 0; part < 2; ++part) {
      gemm_range(&t.part[part], i0 / job.arch->mr, ceil_div(i1, job.arch->mr), 0, n_panels);
    }
    if (split_k_failed(&t)) return -1;
    split_k_sum_rows(&t, i0, i1);
    return 0;
  }
  if (job.split_rows) {
    gemm_range(&job, i0 / job.arch->mr, ceil_div(i1, job.arch->mr), 0, n_panels);
  } else {
    gemm_range(&job, 0, m_panels, j0 / job.arch->nr, ceil_div(j1, job.arch->nr));
  }
  return atomic_load(&job.failed) ? -1 : 0;
}

/* The k blocks [begin, end) of B, packed for pack_shared by the pool's
 * threads: each block is its own range of the packed copy. Packed by the
 * calling thread alone, the other waited: ResNet-50 at batch 8, 2 threads,
 * its batched 2048 x 7 x 7 -> 512 layers (B: 2048 x 400 floats gathered
 * from the images), least of 8 runs: 4,926 -> 4,541 us for the two. */
typedef struct shared_b_task {
  const cr_gemm_job *job;
  cr_pack_b_fn pack;
  const void *context;
  float *packed;
  int64_t n_panels;
} shared_b_task;

static void pack_shared_b_blocks(void *context, int64_t begin, int64_t end) {
  const shared_b_task *t = context;
  const int nr = t->job->arch->nr;
  for (int64_t block = begin; block < end; ++block) {
    const int64_t k0 = block * kKC; /* every block but the last is kKC deep */
    t->pack(t->context, k0, k_block(t->job->k, k0), 0, t->job->n, nr,
            t->packed + k0 * t->n_panels * nr);
  }
}

/* Threads sharing A's row panels would each pack the whole of B, once per
 * chunk, and threads sharing B's column panels the whole of A, once per
 * panel they take (a transformer's 32 x 128 x 512 FullyConnected at 2
 * threads: A 8 times, and 2-3x slower than on one thread): that operand is
 * packed once here instead, into *shared, and the threads read it as
 * pre-packed (the same panels, so the same results). Nothing is done when
 * it is packed or read in place already, or too large. */
static void pack_shared(cr_gemm_job *job, cr_gemm_operand *shared, int threads) {
  const cr_gemm_arch *arch = job->arch;
  const int rows = job->split_rows; /* B is the shared operand */
  const cr_gemm_operand *op = rows ? job->b : job->a;
  if ((op->packed != NULL && op->packed_isa == arch->isa) || op->row_offsets != NULL) return;
  const int64_t m_panels = ceil_div(job->m, arch->mr), n_panels = ceil_div(job->n, arch->nr);
  const size_t floats = rows ? checked_floats(n_panels * arch->nr, job->k)
                             : checked_floats(m_panels * arch->mr, job->k);
  float *packed = floats != 0 && floats <= kMaxSharedFloats
                      ? scratch_floats(CR_SCRATCH_GEMM_SHARED, floats)
                      : NULL;
  if (packed == NULL) return;
  if (rows) {
    shared_b_task task = {job, op->pack_b != NULL ? op->pack_b : pack_b_view,
                          op->pack_b != NULL ? op->pack_context : &job->b_view, packed, n_panels};
    int64_t blocks = 0;
    for (int64_t k0 = 0; k0 < job->k; k0 += k_block(job->k, k0)) ++blocks;
    cr_parallel_for(threads, blocks, pack_shared_b_blocks, &task);
  } else {
    pack_a_whole(arch, job->m, job->k, op->data, op->rs, op->cs, packed);
  }
  *shared = *op;
  shared->packed = packed;
  shared->packed_isa = arch->isa;
  if (rows) {
    job->b = shared;
  } else {
    job->a = shared;
  }
}

int cr_gemm_notify(int64_t m, int64_t n, int64_t k, const cr_gemm_operand *a,
                   const cr_gemm_operand *b, float *c, int64_t ldc, const cr_epilogue *epilogue,
                   const cr_gemm_done *done, int num_threads) {
  if (m <= 0 || n <= 0) return 0;
  if (k <= 0) {
    zero_product(c, ldc, epilogue, done, 0, m, 0, n);
    return 0;
  }
  if (small_product(m, n, k, a, b, c, ldc, epilogue,
                    num_threads <= 1 || cr_gemm_threads(m, n, k, num_threads) == 1)) {
    if (done != NULL) done->block(done->context, 0, m, 0, n);
    return 0;
  }
  cr_gemm_job job;
  job_init(&job, m, n, k, a, b, c, ldc, epilogue, done);
  const int64_t m_panels = ceil_div(m, job.arch->mr), n_panels = ceil_div(n, job.arch->nr);
  const int64_t panels = job.split_rows ? m_panels : n_panels;
  const int threads = cr_gemm_threads(m, n, k, num_threads);
  cr_gemm_operand b_in_place, shared;
  read_b_in_place(&job, threads, &b_in_place);
  const int64_t split = split_k_point(job.arch, m, n, k);
  if (split > 0 && (threads > 1 || !split_k_single(k, split))) {
    return gemm_split_k(&job, split, threads);
  }
  if (threads > 1) pack_shared(&job, &shared, threads);
  /* Row panels go out in one group per thread: a thread reads each panel
   * of B once per run of A's panels it computes, so a unit of one panel
   * would stream B from L2 once per row panel (64 x 78 x 576 at 2 threads:
   * 50-65 us in units of one panel, 28-31 us in two groups, 34-41 us on
   * one thread). */
  job.group = threads > 1 && job.split_rows ? ceil_div(panels, threads) : 1;
  /* Those groups as cr_gemm_share cuts them (share s: panels [panels * s /
   * threads, panels * (s + 1) / threads)), so the edge panel goes with the
   * larger share: ViT's 197 rows (25 panels) on 2 threads, 96 and 101 rows
   * where groups of 13 gave 104 and 93. */
  job.shares = job.group > 1 ? threads : 0;
  job.fetch_b = threads > 1 && job.split_rows;
  cr_parallel_for(threads, job.shares > 0 ? job.shares : ceil_div(panels, job.group), gemm_chunk,
                  &job);
  return atomic_load(&job.failed) ? -1 : 0;
}

/* ---- Matrix-vector products --------------------------------------------- */

enum { kGemvRows = 64 }; /* rows per unit of work shared out */

typedef struct gemv_task {
  int64_t n, k;
  const float *a, *x, *bias;
  float *y;
} gemv_task;

/* Rows [i0, i1) of cr_gemv, portably: eight partial sums per row (p mod 8),
 * added pairwise at the end. */
static void gemv_rows_generic(const gemv_task *t, int64_t i0, int64_t i1) {
  const int64_t k = t->k;
  for (int64_t i = i0; i < i1; ++i) {
    const float *row = t->a + i * k;
    float part[8] = {0};
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) {
      for (int l = 0; l < 8; ++l) part[l] += row[p + l] * t->x[p + l];
    }
    for (int l = 0; p + l < k; ++l) part[l] += row[p + l] * t->x[p + l];
    const float sum = ((part[0] + part[1]) + (part[2] + part[3])) +
                      ((part[4] + part[5]) + (part[6] + part[7]));
    t->y[i] = (t->bias != NULL ? t->bias[i] : 0.0f) + sum;
  }
}

#if CR_TRANSPOSE_AVX2
__attribute__((target("avx2"), always_inline)) static inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* `rows` (1 to 4) rows from row i of cr_gemv: per row two partial sums
 * over alternate blocks of 8 floats (eight independent chains for four
 * rows, enough to hide the latency of the fused multiply-adds, one load of
 * x for all), the last k mod 8 values by masked loads. */
__attribute__((target("avx2,fma"), always_inline)) static inline void gemv_block_avx2(
    const gemv_task *t, int rows, int64_t i) {
  const int64_t k = t->k;
  const float *x = t->x;
  const float *r[4];
  __m256 s[4], u[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    r[j] = t->a + (i + (j < rows ? j : 0)) * k;
    s[j] = u[j] = _mm256_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + p), x1 = _mm256_loadu_ps(x + p + 8);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      if (j < rows) {
        s[j] = _mm256_fmadd_ps(_mm256_loadu_ps(r[j] + p), x0, s[j]);
        u[j] = _mm256_fmadd_ps(_mm256_loadu_ps(r[j] + p + 8), x1, u[j]);
      }
    }
  }
  if (p + 8 <= k) {
    const __m256 x0 = _mm256_loadu_ps(x + p);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      if (j < rows) s[j] = _mm256_fmadd_ps(_mm256_loadu_ps(r[j] + p), x0, s[j]);
    }
    p += 8;
  }
  if (p < k) {
    const __m256i mask = cr_lanes_mask(k - p);
    const __m256 x0 = _mm256_maskload_ps(x + p, mask);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      if (j < rows) u[j] = _mm256_fmadd_ps(_mm256_maskload_ps(r[j] + p, mask), x0, u[j]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    if (j < rows) {
      t->y[i + j] = (t->bias != NULL ? t->bias[i + j] : 0.0f) + sum8(_mm256_add_ps(s[j], u[j]));
    }
  }
}

__attribute__((target("avx2,fma"))) static void gemv_rows_avx2(const gemv_task *t, int64_t i0,
                                                               int64_t i1) {
  int64_t i = i0;
  for (; i + 4 <= i1; i += 4) gemv_block_avx2(t, 4, i);
  for (; i < i1; ++i) gemv_block_avx2(t, 1, i);
}
#endif

/* Units [begin, end) of kGemvRows rows. */
static void gemv_units(void *context, int64_t begin, int64_t end) {
  const gemv_task *t = context;
  const int64_t i0 = begin * kGemvRows, i1 = min_i64(t->n, end * kGemvRows);
#if CR_TRANSPOSE_AVX2
  if (cr_gemm_isa() != CR_ISA_GENERIC) {
    gemv_rows_avx2(t, i0, i1);
    return;
  }
#endif
  gemv_rows_generic(t, i0, i1);
}

void cr_gemv(int64_t n, int64_t k, const float *a, const float *x, const float *bias, float *y,
             int num_threads) {
  if (n <= 0) return;
  gemv_task task = {n, k > 0 ? k : 0, a, x, bias, y};
  const int64_t units = ceil_div(n, kGemvRows);
  const int threads = cr_threads_for_work(num_threads, (double)n * (double)task.k, 1);
  cr_parallel_for(threads, units, gemv_units, &task);
}
