/*
 * 3 x 3 convolutions (stride 1 or 2, padding 1, one group) on AVX2 and
 * AVX-512 machines, channel-blocked: the input is copied into blocks of 8
 * channels interleaved (a position's 8 channels in one vector, "NCHW8c"),
 * zero padded, and each output value is a sum of broadcast inputs times
 * vectors of filters. The GEMM path (convolve_wide) reached 50-56 GFLOP/s
 * on resnet_small's layers where onnxruntime's blocked kernels reach 85-89
 * on the same AVX2 core; on AVX-512 the GEMM's tiles of 48 columns waste
 * most on small planes (an 8 x 8 output: 71 columns on the wide grid, 80
 * computed); see docs/cpu_ref_performance.md.
 *
 * Layout (stride 1; stride 2 in blocked_geometry). A share of output rows
 * [r0, r1) of one plane copies the padded input rows [r0, r1 + 2) it
 * reads: block cb of the copy holds positions q = row * wq + col, wq = w +
 * 1, col 0 the left padding (also the right padding of the row above: a
 * tap one past a row's last column reads the next row's column 0), then 16
 * zero positions after the last row. Output position (oh, ow) reads copy
 * positions (oh - r0 + kh) * wq + ow + kw, so the outputs of a block of
 * rows are a run of positions on the same grid (the "wide grid", one
 * column per row more than the output). AVX2's tiles of 6 consecutive
 * positions cross rows, and the column ow = w of each row is computed and
 * dropped; AVX-512's tiles (up to 12 positions) end with each row.
 *
 * Tile (AVX2). 6 positions x 16 outputs in 12 accumulators: per input
 * channel and tap, 2 filter vectors and 6 broadcasts for 12 FMAs. The
 * input channels are taken kChunk at a time, so that a chunk's filters for
 * 16 outputs (kChunk x 9 x 16 floats, 18 KiB) stay in L1 while the tiles
 * of a block of rows read them; the partial sums wait in a buffer of the
 * block's outputs on the wide grid, which store_planes transposes back
 * into planes, adding the bias and residual and applying the activation.
 * AVX-512: up to 12 positions x 32 outputs in 24 accumulators, 16 channels
 * a chunk (the same 18 KiB of filters).
 *
 * Each output value starts at its bias and is summed over the channels
 * and taps in one order, whatever the thread count.
 */
#include "conv_blocked.h"

#include <string.h>

#include "parallel.h"
#include "prefetch.h"
#include "scratch.h"
#include "transpose_avx2.h"

enum {
  kTile = 6,        /* AVX2: positions per tile */
  kOut = 16,        /* AVX2: outputs per tile, two vectors */
  kChunk = 32,      /* AVX2: input channels per pass over a block of rows */
  kTile512 = 12,    /* AVX-512: positions per tile, at most */
  kOut512 = 32,     /* AVX-512: outputs per tile, two vectors */
  kChunk512 = 16,   /* AVX-512: input channels per pass (their filters: 18 KiB) */
  kMinChannels512 = 32, /* AVX-512, stride 1: fewer channels keep the GEMM path */
  kTail = 16,       /* zero positions after a copy's last row */
  /* The wide grid's positions per block of rows, about: each chunk of
   * filters is read from L2 once per block, so larger blocks pay on large
   * filters (1 thread, least of 30: 256 x 14 x 14 at batch 8 8.81 -> 8.26
   * ms, 256 -> 256 stride 2 on 28 x 28 1.17 -> 1.09 ms with 224 against
   * 96), and 448 gains nothing more. */
  kBlockPositions = 224,
  /* Images of a batch run together (each chunk of filters read once for
   * all of them) when the filters overflow this, and as many as fit in it
   * with their copies and sums; see cr_conv_blocked. */
  kImageGroupBytes = 1 << 20,
  /* ... on output planes of fewer positions (7 x 7: 0.89-0.95 of the
   * time image by image at batch 8; 14 x 14: 0.98-0.99, and slower on 2
   * threads) */
  kImageGroupMaxPositions = 96,
  /* A share's filters up to this stay in L2 from one block of rows to the
   * next (2 MiB per core here): only the first block fetches them ahead. */
  kFiltersInL2 = 1 << 20
};

/* Outputs per block of the packed filters under isa (0: none). */
static int64_t outputs_per_block(cr_isa isa) {
  return isa == CR_ISA_AVX512 ? kOut512 : isa == CR_ISA_AVX2 ? kOut : 0;
}

int cr_conv_blocked_applies(const cr_conv_params *p, int64_t outputs, int64_t channels,
                            cr_isa isa) {
  const int64_t block = outputs_per_block(isa);
  return CR_TRANSPOSE_AVX2 && block > 0 && p->num_group == 1 && p->kernel[0] == 1 &&
         p->kernel[1] == 3 && p->kernel[2] == 3 && p->stride[0] == 1 &&
         (p->stride[1] == 1 || p->stride[1] == 2) && p->stride[2] == p->stride[1] &&
         p->dilate[0] == 1 && p->dilate[1] == 1 && p->dilate[2] == 1 &&
         p->pad[0] == 0 && p->pad[1] == 1 && p->pad[2] == 1 && channels % 8 == 0 &&
         channels > 0 && outputs % block == 0 && outputs > 0 &&
         (isa == CR_ISA_AVX2 || channels >= kMinChannels512 || p->stride[1] == 2);
}

int cr_conv_blocked_batches(int64_t outputs, int64_t channels, int64_t positions) {
  return positions < kImageGroupMaxPositions &&
         9.0 * (double)channels * (double)outputs * sizeof(float) > kImageGroupBytes;
}

size_t cr_conv_blocked_floats(int64_t outputs, int64_t channels) {
  /* 0 unless outputs x channels x 9 floats have a byte size */
  if (outputs <= 0 || channels <= 0 || outputs > INT64_MAX / 36 / channels) return 0;
  return (size_t)(outputs * channels * 9);
}

/* packed[((ob * channels + c) * 9 + t) * B + k] = w[((ob * B + k) * channels
 * + c) * 9 + t], B the outputs per block under isa: per block of B outputs,
 * per channel and tap, the B filters' values side by side. */
void cr_conv_blocked_pack(int64_t outputs, int64_t channels, const float *w, cr_isa isa,
                          float *packed) {
  const int64_t block = outputs_per_block(isa);
  if (block == 0) return;
  for (int64_t o = 0; o < outputs; ++o) {
    const int64_t ob = o / block, k = o % block;
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t t = 0; t < 9; ++t) {
        packed[((ob * channels + c) * 9 + t) * block + k] = w[(o * channels + c) * 9 + t];
      }
    }
  }
}

#if CR_TRANSPOSE_AVX2

static int64_t ceil_to(int64_t value, int64_t step) { return (value + step - 1) / step * step; }

static const float kZeros[kOut512]; /* the sums' start without a bias */

/* n (1..6) positions from xq by the 16 filters at w, over `taps` (channel,
 * tap) pairs: pair i reads position j at xq + offsets[i] + 8 * j and the
 * filters at w + 16 * i. The sums start at start's 16 values (the bias, on
 * the first chunk of channels) or, when start is NULL, at out, and end in
 * out (position j's 16 sums at out + 16 * j). One pair per iteration,
 * as the GEMM's micro-kernel: unrolling a channel's 9 taps made GCC spill
 * accumulators. */
__attribute__((target("avx2,fma"), always_inline)) static inline void tile(
    const int n, int64_t taps, const float *start, const float *xq, const int64_t *offsets,
    const float *w, float *out) {
  __m256 a0[kTile], a1[kTile];
#pragma GCC unroll 6
  for (int j = 0; j < kTile; ++j) {
    if (j < n) {
      a0[j] = _mm256_loadu_ps(start != NULL ? start : out + j * kOut);
      a1[j] = _mm256_loadu_ps(start != NULL ? start + 8 : out + j * kOut + 8);
    }
  }
  for (int64_t i = 0; i < taps; ++i) {
    const float *xp = xq + offsets[i];
    const __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8);
    w += kOut;
#pragma GCC unroll 6
    for (int j = 0; j < kTile; ++j) {
      if (j < n) {
        const __m256 b = _mm256_broadcast_ss(xp + j * 8);
        a0[j] = _mm256_fmadd_ps(w0, b, a0[j]);
        a1[j] = _mm256_fmadd_ps(w1, b, a1[j]);
      }
    }
  }
#pragma GCC unroll 6
  for (int j = 0; j < kTile; ++j) {
    if (j < n) {
      _mm256_storeu_ps(out + j * kOut, a0[j]);
      _mm256_storeu_ps(out + j * kOut + 8, a1[j]);
    }
  }
}

__attribute__((target("avx2,fma"))) static void tile_n(int n, int64_t taps, const float *start,
                                                     const float *xq, const int64_t *offsets,
                                                     const float *w, float *out) {
  switch (n) {
    case 6: tile(6, taps, start, xq, offsets, w, out); break;
    case 5: tile(5, taps, start, xq, offsets, w, out); break;
    case 4: tile(4, taps, start, xq, offsets, w, out); break;
    case 3: tile(3, taps, start, xq, offsets, w, out); break;
    case 2: tile(2, taps, start, xq, offsets, w, out); break;
    default: tile(1, taps, start, xq, offsets, w, out); break;
  }
}

/* tile's operations in AVX-512 vectors: n (1..12) positions from xq by the
 * 32 filters at w (pair i's at w + 32 * i), position j's 32 sums at out +
 * 32 * j; the same order of operations per output. 24 accumulators, 2
 * filter vectors and a broadcast: 27 of the 32 registers. */
__attribute__((target("avx512f"), always_inline)) static inline void tile512(
    const int n, int64_t taps, const float *start, const float *xq, const int64_t *offsets,
    const float *w, float *out) {
  __m512 a0[kTile512], a1[kTile512];
#pragma GCC unroll 12
  for (int j = 0; j < kTile512; ++j) {
    if (j < n) {
      a0[j] = _mm512_loadu_ps(start != NULL ? start : out + j * kOut512);
      a1[j] = _mm512_loadu_ps(start != NULL ? start + 16 : out + j * kOut512 + 16);
    }
  }
  for (int64_t i = 0; i < taps; ++i) {
    const float *xp = xq + offsets[i];
    const __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + 16);
    w += kOut512;
#pragma GCC unroll 12
    for (int j = 0; j < kTile512; ++j) {
      if (j < n) {
        const __m512 b = _mm512_set1_ps(xp[j * 8]);
        a0[j] = _mm512_fmadd_ps(w0, b, a0[j]);
        a1[j] = _mm512_fmadd_ps(w1, b, a1[j]);
      }
    }
  }
#pragma GCC unroll 12
  for (int j = 0; j < kTile512; ++j) {
    if (j < n) {
      _mm512_storeu_ps(out + j * kOut512, a0[j]);
      _mm512_storeu_ps(out + j * kOut512 + 16, a1[j]);
    }
  }
}

#define CR_TILE512_CASE(n) \
  case n: tile512(n, taps, start, xq, offsets, w, out); break;

__attribute__((target("avx512f"))) static void tile512_n(int n, int64_t taps,
                                                        const float *start, const float *xq,
                                                        const int64_t *offsets, const float *w,
                                                        float *out) {
  switch (n) {
    CR_TILE512_CASE(12) CR_TILE512_CASE(11) CR_TILE512_CASE(10) CR_TILE512_CASE(9)
    CR_TILE512_CASE(8) CR_TILE512_CASE(7) CR_TILE512_CASE(6) CR_TILE512_CASE(5)
    CR_TILE512_CASE(4) CR_TILE512_CASE(3) CR_TILE512_CASE(2)
    default: tile512(1, taps, start, xq, offsets, w, out); break;
  }
}

#undef CR_TILE512_CASE

/* The geometry of one convolution: input h x w, output out_h x out_w,
 * and the copy's layout (see the top of the file). At stride 2 the copy of
 * each block of 8 channels is four phase planes, phase (a, b) holding the
 * padded positions (2i + a, 2j + b) on a grid of out_w + 1 columns; tap
 * (kh, kw) of output (oh, ow) is then position (oh + kh / 2, ow + kw / 2)
 * of phase (kh % 2, kw % 2), so that the outputs are again a run of
 * positions on that grid, read at the same offsets by every tile. */
typedef struct blocked_geometry {
  int64_t stride; /* 1 or 2 */
  int64_t channels, outputs, h, w, out_h, out_w;
  int64_t wq;           /* the wide grid's columns */
  int64_t plane_stride; /* floats between the input's channels */
  int64_t out_stride;   /* floats between the output's channels */
  int64_t block;        /* outputs per block of the packed filters: 16 (AVX2) or 32 */
} blocked_geometry;

/* Rows of each (phase) plane of the copy for output rows [r0, r1). */
static int64_t copy_rows(const blocked_geometry *g, int64_t r0, int64_t r1) {
  return g->stride == 1 ? r1 - r0 + 2 : r1 - r0 + 1;
}

/* Floats of the copy per block of 8 channels. */
static int64_t copy_block(const blocked_geometry *g, int64_t r0, int64_t r1) {
  const int64_t planes = g->stride == 1 ? 1 : 4;
  return (planes * copy_rows(g, r0, r1) * g->wq + kTail) * 8;
}

/* The input rows output rows [r0, r1) read, of one plane (x: channel c's
 * plane at x + c * plane_stride), into copy. */
__attribute__((target("avx2"))) static void copy_blocked(const blocked_geometry *g,
                                                         const float *x, int64_t r0, int64_t r1,
                                                         float *copy) {
  const int64_t w = g->w, wq = g->wq, rows = copy_rows(g, r0, r1);
  const int64_t block_floats = copy_block(g, r0, r1);
  for (int64_t cb = 0; cb < g->channels / 8; ++cb) {
    float *block = copy + cb * block_floats;
    const float *src = x + cb * 8 * g->plane_stride;
    if (g->stride == 1) {
      /* padded row r0 + lr is input row r0 + lr - 1 */
      for (int64_t lr = 0; lr < rows; ++lr) {
        const int64_t in = r0 + lr - 1;
        float *dst = block + lr * wq * 8;
        if (in < 0 || in >= g->h) {
          memset(dst, 0, (size_t)(wq * 8) * sizeof *dst);
          continue;
        }
        _mm256_storeu_ps(dst, _mm256_setzero_ps());
        for (int64_t col = 0; col < w; col += 8) {
          const int64_t count = w - col < 8 ? w - col : 8;
          __m256 v[8];
          cr_load_rows8_transposed(src + in * w + col, g->plane_stride, count, v);
          for (int64_t j = 0; j < count; ++j) _mm256_storeu_ps(dst + (1 + col + j) * 8, v[j]);
        }
      }
      memset(block + rows * wq * 8, 0, (size_t)(kTail * 8) * sizeof *block);
      continue;
    }
    /* Stride 2: zeros, then each input row the phase rows hold (padded row
     * pr = input row + 1 at phase row pr / 2 of row phase pr % 2), its
     * column c at padded column c + 1. */
    memset(block, 0, (size_t)block_floats * sizeof *block);
    const int64_t first = 2 * r0 - 1 > 0 ? 2 * r0 - 1 : 0;
    const int64_t last = 2 * (r0 + rows) - 1 < g->h ? 2 * (r0 + rows) - 1 : g->h;
    for (int64_t in = first; in < last; ++in) {
      const int64_t pr = in + 1;
      float *phases = block + ((pr % 2) * 2 * rows + (pr / 2 - r0)) * wq * 8;
      for (int64_t col = 0; col < w; col += 8) {
        const int64_t count = w - col < 8 ? w - col : 8;
        __m256 v[8];
        cr_load_rows8_transposed(src + in * w + col, g->plane_stride, count, v);
        for (int64_t j = 0; j < count; ++j) {
          const int64_t pc = col + j + 1;
          _mm256_storeu_ps(phases + ((pc % 2) * rows * wq + pc / 2) * 8, v[j]);
        }
      }
    }
  }
}

/* The offset of (channel c, tap t) from a tile's first position, for
 * channels of the chunk starting at a block. */
static int64_t tap_offset(const blocked_geometry *g, int64_t block_floats, int64_t rows,
                          int64_t c, int64_t t) {
  const int64_t kh = t / 3, kw = t % 3, base = (c / 8) * block_floats + c % 8;
  if (g->stride == 1) return base + (kh * g->wq + kw) * 8;
  const int64_t phase = (kh % 2) * 2 + kw % 2;
  return base + (phase * rows * g->wq + (kh / 2) * g->wq + kw / 2) * 8;
}

/* Output rows [oh0, oh0 + rows) of the output blocks [ob0, ob1) from a
 * block's sums (buffer: per block of g->block outputs from ob0, `stride`
 * floats of positions on the wide grid, that many sums each, which started
 * at the bias), into the planes at y, with finish's residual (the plane's,
 * or NULL) and activation. */
__attribute__((target("avx2"))) static void store_planes(const blocked_geometry *g,
                                                         const float *buffer, int64_t stride,
                                                         int64_t ob0, int64_t ob1, int64_t oh0,
                                                         int64_t rows, const cr_fusion *finish,
                                                         float *y) {
  const int64_t ow_count = g->out_w, ld = g->out_stride, block = g->block;
  const float *residual = finish->residual;
  const cr_act8 act = cr_act8_of(finish);
  for (int64_t ob = ob0; ob < ob1; ++ob) {
    for (int64_t i = 0; i < rows; ++i) {
      const float *src = buffer + (ob - ob0) * stride + i * g->wq * block;
      const int64_t first = (oh0 + i) * ow_count;
      for (int64_t col = 0; col < ow_count; col += 8) {
        const int64_t count = ow_count - col < 8 ? ow_count - col : 8;
        for (int64_t eighth = 0; eighth < block / 8; ++eighth) {
          __m256 v[8];
          cr_load_vectors8_transposed(src + col * block + eighth * 8, block, count, v);
#pragma GCC unroll 8
          for (int k = 0; k < 8; ++k) {
            cr_finish8(v[k], residual, y, (ob * block + eighth * 8 + k) * ld + first + col,
                       count, &act);
          }
        }
      }
    }
  }
}

typedef struct blocked_task {
  blocked_geometry g;
  const float *x, *packed, *bias;
  const cr_fusion *fusion;
  float *y;
  int64_t depth;  /* planes per image */
  int64_t shares; /* of each plane */
  int64_t images; /* planes per share when a share is whole planes (depth 1) */
  int64_t x_planes; /* batch x depth */
  int by_outputs; /* shares of a plane's output blocks (else of its rows) */
  int failed;
} blocked_task;

/* Rows of a block of output rows (one pass of the filters), at most. */
static int64_t rows_per_block(const blocked_geometry *g) {
  return g->wq >= kBlockPositions ? 1 : kBlockPositions / g->wq;
}

/* Floats of the sums of one block of g->block outputs over a block of rows
 * of output rows [r0, r1): AVX2's tiles run across rows, AVX-512's end
 * with each row. */
static int64_t sums_stride(const blocked_geometry *g, int64_t r0, int64_t r1) {
  const int64_t block_rows = rows_per_block(g);
  const int64_t rows = r1 - r0 < block_rows ? r1 - r0 : block_rows;
  return (g->block == kOut512 ? rows * g->wq : ceil_to(block_rows * g->wq, kTile)) * g->block;
}

/* Output rows [r0, r1) of `images` planes (depth 1 when more than one),
 * the first at x / y; residual: the same planes of the residual, or NULL.
 * Each chunk of filters is read once for all the planes. */
static int blocked_rows(const blocked_task *t, const float *x, float *y, const float *residual,
                        int64_t r0, int64_t r1, int64_t ob0, int64_t ob1, int64_t images) {
  const blocked_geometry *g = &t->g;
  const int64_t wq = g->wq, channels = g->channels, block = g->block;
  const int avx512 = block == kOut512;
  const int64_t chunk = avx512 ? kChunk512 : kChunk;
  const int64_t block_floats = copy_block(g, r0, r1), rows_copied = copy_rows(g, r0, r1);
  const int64_t copy_image = channels / 8 * block_floats;
  const int64_t x_image = channels * g->plane_stride, y_image = g->outputs * g->out_stride;
  float *copy = cr_scratch(CR_SCRATCH_CONV_PLANES, (size_t)(images * copy_image) * sizeof *copy);
  const int64_t block_rows = rows_per_block(g);
  const int64_t stride = sums_stride(g, r0, r1), image_sums = (ob1 - ob0) * stride;
  const int64_t filters_bytes = (ob1 - ob0) * channels * 9 * block * (int64_t)sizeof(float);
  float *buffer = cr_scratch(CR_SCRATCH_CONV_OUTPUT,
                             (size_t)(images * image_sums) * sizeof *buffer);
  if (copy == NULL || buffer == NULL) return -1;
  for (int64_t i = 0; i < images; ++i) {
    copy_blocked(g, x + i * x_image, r0, r1, copy + i * copy_image);
  }
  /* The fusion, on the planes' residual. */
  cr_fusion finish = {NULL, CR_EPI_NONE, 0.0f, 0.0f};
  if (t->fusion != NULL) finish = *t->fusion;
  /* A chunk's (channel, tap) pairs, relative to its first block. */
  int64_t offsets[kChunk * 9];
  for (int64_t c = 0; c < chunk; ++c) {
    for (int64_t tap = 0; tap < 9; ++tap) {
      offsets[c * 9 + tap] = tap_offset(g, block_floats, rows_copied, c, tap);
    }
  }
  /* AVX-512: each output row in tiles of at most 12 positions, as even as
   * can be (no column past the row is computed). */
  const int64_t row_tiles = (g->out_w + kTile512 - 1) / kTile512;
  for (int64_t b0 = r0; b0 < r1; b0 += block_rows) {
    const int64_t rows = r1 - b0 < block_rows ? r1 - b0 : block_rows;
    /* The last row's dropped column is not computed. */
    const int64_t positions = (rows - 1) * wq + g->out_w;
    const float *xq = copy + (b0 - r0) * wq * 8;
    for (int64_t c0 = 0; c0 < channels; c0 += chunk) {
      const int64_t cc = channels - c0 < chunk ? channels - c0 : chunk;
      const float *xc = xq + (c0 / 8) * block_floats;
      for (int64_t ob = ob0; ob < ob1; ++ob) {
        const float *wc = t->packed + (ob * channels + c0) * 9 * block;
        const float *start = c0 > 0 ? NULL : t->bias != NULL ? t->bias + ob * block : kZeros;
        /* The filters of the next (chunk, block), fetched into L2 a part
         * before each tile of this one. */
        const float *next = NULL;
        int64_t next_floats = 0;
        if (ob + 1 < ob1) {
          next = wc + channels * 9 * block;
          next_floats = cc * 9 * block;
        } else if (c0 + chunk < channels) {
          const int64_t nc = channels - c0 - chunk < chunk ? channels - c0 - chunk : chunk;
          next = t->packed + (ob0 * channels + c0 + chunk) * 9 * block;
          next_floats = nc * 9 * block;
        }
        /* After the first block of rows, filters that fit in L2 are there
         * already: fetching them again was 3% of 64 -> 64 on 56 x 56. */
        const int64_t next_bytes =
            b0 == r0 || filters_bytes > kFiltersInL2 ? next_floats * (int64_t)sizeof *next : 0;
        if (avx512) {
          cr_prefetch ahead = cr_prefetch_spread(next, next_bytes, images * rows * row_tiles);
          for (int64_t image = 0; image < images; ++image) {
            const float *xi = xc + image * copy_image;
            float *out = buffer + image * image_sums + (ob - ob0) * stride;
            for (int64_t i = 0; i < rows; ++i) {
              for (int64_t k = 0; k < row_tiles; ++k) {
                cr_prefetch_part(&ahead);
                const int64_t q = i * wq + g->out_w * k / row_tiles;
                const int n = (int)(g->out_w * (k + 1) / row_tiles - g->out_w * k / row_tiles);
                tile512_n(n, cc * 9, start, xi + q * 8, offsets, wc, out + q * block);
              }
            }
          }
          continue;
        }
        cr_prefetch ahead =
            cr_prefetch_spread(next, next_bytes, images * ((positions + kTile - 1) / kTile));
        for (int64_t image = 0; image < images; ++image) {
          const float *xi = xc + image * copy_image;
          float *out = buffer + image * image_sums + (ob - ob0) * stride;
          for (int64_t q = 0; q < positions; q += kTile) {
            cr_prefetch_part(&ahead);
            const int n = positions - q < kTile ? (int)(positions - q) : kTile;
            tile_n(n, cc * 9, start, xi + q * 8, offsets, wc, out + q * kOut);
          }
        }
      }
    }
    for (int64_t image = 0; image < images; ++image) {
      finish.residual = residual != NULL ? residual + image * y_image : NULL;
      store_planes(g, buffer + image * image_sums, stride, ob0, ob1, b0, rows, &finish,
                   y + image * y_image);
    }
  }
  return 0;
}

/* Shares [begin, end) of all planes: share s is plane s / shares, part s %
 * shares of the plane's output rows, or of its blocks of outputs; or, with
 * t->images > 1, planes [s * images, (s + 1) * images) whole. */
static void blocked_shares(void *context, int64_t begin, int64_t end) {
  blocked_task *t = context;
  const blocked_geometry *g = &t->g;
  if (t->images > 1) {
    const int64_t planes = t->x_planes;
    for (int64_t s = begin; s < end; ++s) {
      const int64_t first = s * t->images;
      const int64_t count = planes - first < t->images ? planes - first : t->images;
      const int64_t x_offset = first * g->channels * g->plane_stride;
      const int64_t y_offset = first * g->outputs * g->out_stride;
      const float *residual = t->fusion != NULL && t->fusion->residual != NULL
                                  ? t->fusion->residual + y_offset
                                  : NULL;
      if (count > 0 && blocked_rows(t, t->x + x_offset, t->y + y_offset, residual, 0, g->out_h,
                                    0, g->outputs / g->block, count) != 0) {
        __atomic_store_n(&t->failed, 1, __ATOMIC_RELAXED);
      }
    }
    return;
  }
  for (int64_t s = begin; s < end; ++s) {
    const int64_t plane = s / t->shares, part = s % t->shares;
    const int64_t split = t->by_outputs ? g->outputs / g->block : g->out_h;
    const int64_t first = split * part / t->shares, last = split * (part + 1) / t->shares;
    if (last <= first) continue;
    const int64_t r0 = t->by_outputs ? 0 : first, r1 = t->by_outputs ? g->out_h : last;
    const int64_t ob0 = t->by_outputs ? first : 0;
    const int64_t ob1 = t->by_outputs ? last : g->outputs / g->block;
    /* plane = image * depth + slice */
    const int64_t image = plane / t->depth, slice = plane % t->depth;
    const int64_t x_offset = image * g->channels * g->plane_stride + slice * g->h * g->w;
    const int64_t y_offset =
        image * g->outputs * g->out_stride + slice * g->out_h * g->out_w;
    const float *residual = t->fusion != NULL && t->fusion->residual != NULL
                                ? t->fusion->residual + y_offset
                                : NULL;
    if (blocked_rows(t, t->x + x_offset, t->y + y_offset, residual, r0, r1, ob0, ob1, 1) != 0) {
      __atomic_store_n(&t->failed, 1, __ATOMIC_RELAXED);
    }
  }
}

#endif /* CR_TRANSPOSE_AVX2 */

int cr_conv_blocked(const cr_conv_params *params, const int64_t x_shape[5], const float *x,
                    const float *packed, cr_isa isa, const float *bias, const cr_fusion *fusion,
                    const int64_t y_shape[5], float *y, int num_threads) {
#if CR_TRANSPOSE_AVX2
  const int64_t block = outputs_per_block(isa);
  if (block == 0) return -1;
  const int64_t batch = x_shape[0], depth = x_shape[2];
  const int64_t out_h = y_shape[3], out_w = y_shape[4];
  const blocked_geometry g = {
      .stride = params->stride[1], .channels = x_shape[1], .outputs = y_shape[1],
      .h = x_shape[3], .w = x_shape[4], .out_h = out_h, .out_w = out_w,
      /* stride 1: a row's left padding is the row above's right padding;
       * stride 2: the phase planes' columns, one past the output's */
      .wq = params->stride[1] == 1 ? x_shape[4] + 1 : out_w + 1,
      .plane_stride = depth * x_shape[3] * x_shape[4], .out_stride = depth * out_h * out_w,
      .block = block};
  if (batch == 0 || depth == 0 || out_h == 0 || out_w == 0 || g.outputs == 0) return 0;
  const double work = 9.0 * (double)(batch * depth * out_h * out_w) * (double)g.channels *
                      (double)g.outputs;
  const int threads = cr_threads_for_work(num_threads, work, 1);
  const int64_t planes = batch * depth;
  /* With more planes than threads, whole planes per thread; else the
   * blocks of outputs when they go evenly into the threads and the filters
   * are at least as large as the input (or the rows too few to share):
   * each thread then reads half the filters but copies every input row
   * (squeezenet's 13 x 13 expand layers, 48 -> 192 outputs, 332 KB of
   * filters on a 32 KB input: 168 us shared by rows at 2 threads, 90 by
   * outputs); else rows, each thread copying its rows only (2 threads,
   * fastest of 15: ResNet's 64 -> 64 on 56 x 56, 147 KB of filters on 800
   * KB, 589-598 us by outputs, 558-566 by rows; 128 -> 128 stride 2 on 56
   * x 56, 590 KB on 1.6 MB, 801 -> 655 us; 64 -> 128 stride 2, 370 -> 327
   * us; 128 x 28 x 28, 590 KB on 401 KB, by outputs as fast as by rows). */
  const int64_t blocks = g.outputs / block;
  const double filter_bytes = 9.0 * (double)g.channels * (double)g.outputs * sizeof(float);
  const double input_bytes = (double)g.channels * (double)(g.h * g.w) * sizeof(float);
  const int by_outputs = planes < threads && blocks % threads == 0 &&
                         (filter_bytes >= input_bytes || out_h < 4 * threads);
  const int64_t shares = planes >= threads ? 1
                         : by_outputs      ? threads
                                           : (out_h < threads ? out_h : threads);
  /* Filters beyond kImageGroupBytes on small planes (ResNet's 3 x 3
   * layers on 7 x 7 planes: 9.4 MB) were read once per image; images of
   * one thread's share of the batch now run together, as many as fit in
   * kImageGroupBytes with their copies and sums. */
  int64_t images = 1;
  if (depth == 1 && shares == 1 && planes > threads &&
      cr_conv_blocked_batches(g.outputs, g.channels, out_h * out_w)) {
    const int64_t per_image =
        (g.channels / 8 * copy_block(&g, 0, out_h) + blocks * sums_stride(&g, 0, out_h)) *
        (int64_t)sizeof(float);
    const int64_t fit =
        per_image > 0 && per_image < kImageGroupBytes ? kImageGroupBytes / per_image : 1;
    /* each thread's planes in groups as even as can be */
    const int64_t per_thread = (planes + threads - 1) / threads;
    const int64_t groups = (per_thread + fit - 1) / fit;
    images = (per_thread + groups - 1) / groups;
  }
  const int64_t units = images > 1 ? (planes + images - 1) / images : planes * shares;
  blocked_task task = {g, x, packed, bias, fusion, y, depth, shares, images, planes,
                       by_outputs, 0};
  if (threads > 1) {
    cr_parallel_for(threads, units, blocked_shares, &task);
  } else {
    blocked_shares(&task, 0, units);
  }
  return __atomic_load_n(&task.failed, __ATOMIC_RELAXED) ? -1 : 0;
#else
  (void)params, (void)x_shape, (void)x, (void)packed, (void)isa, (void)bias, (void)fusion,
      (void)y_shape, (void)y, (void)num_threads;
  return -1;
#endif
}
