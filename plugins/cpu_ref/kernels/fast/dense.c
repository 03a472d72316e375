/*
 * The dense kernels on top of gemm.c: convolution as a GEMM of the filters
 * (pre-packed at loadModel in symbolic mode) by an im2col view of the
 * image that is never materialised: 1 x 1 convolutions use the image
 * itself; other 2-D ones use zero-padded phase planes (see below) that the
 * GEMM packs with plain copies or, for deep products, reads in place; 3-D
 * ones pack the im2col view directly into the GEMM's panels. On AVX2
 * machines, 3 x 3 convolutions at stride 1 and 2 whose filters were packed
 * at loadModel run channel-blocked instead (conv_blocked.c). Depthwise
 * convolutions run directly (a GEMM of depth KD*KH*KW would be all
 * overhead). Then FullyConnected and the matrix products of dot and
 * batch_dot. Bias, residual and activation are applied by the GEMM's
 * epilogue (or right after the direct loop), while the output is in cache.
 *
 * Each output value is computed by one thread in an order that does not
 * depend on the thread count (see gemm.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv_blocked.h"
#include "gemm.h"
#include "hard_sigmoid_simd.h"
#include "kernels.h"
#include "parallel.h"
#include "prefetch.h"
#include "scratch.h"
#include "short_rows.h"
#include "transpose_avx2.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define CR_DENSE_X86 1
#include <immintrin.h>
#else
#define CR_DENSE_X86 0
#endif

static int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }


static int64_t kernel_size_of(const cr_conv_params *p) {
  return p->kernel[0] * p->kernel[1] * p->kernel[2];
}

static cr_epilogue make_epilogue(const cr_fusion *fusion) {
  cr_epilogue e;
  memset(&e, 0, sizeof e);
  if (fusion != NULL) {
    e.act = fusion->act;
    e.clip_low = fusion->clip_low;
    e.clip_high = fusion->clip_high;
  }
  return e;
}

/* Whether depthwise_epilogue (and cr_finish8) apply fusion's activation:
 * each of cr_epilogue_act's (-Wswitch names one added without a case). */
static int depthwise_epilogue_applies(const cr_fusion *fusion) {
  if (fusion == NULL) return 1;
  switch (fusion->act) {
    case CR_EPI_NONE:
    case CR_EPI_RELU:
    case CR_EPI_CLIP:
    case CR_EPI_HARD_SIGMOID:
    case CR_EPI_HARD_SWISH:
      return 1;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Convolution                                                               */
/* ------------------------------------------------------------------------ */

int cr_conv_is_direct(const cr_conv_params *params, int64_t group_channels) {
  (void)params;
  return group_channels == 1;
}

size_t cr_conv_packed_floats(const cr_conv_params *params, int64_t outputs,
                             int64_t group_channels) {
  if (cr_conv_is_direct(params, group_channels)) return 0;
  if (cr_conv_blocked_applies(params, outputs, group_channels, cr_gemm_isa())) {
    return cr_conv_blocked_floats(outputs, group_channels);
  }
  const int64_t groups = params->num_group;
  const size_t per_group =
      cr_gemm_packed_a_floats(outputs / groups, group_channels * kernel_size_of(params));
  if (per_group == 0 || (size_t)groups > SIZE_MAX / sizeof(float) / per_group) return 0;
  return per_group * (size_t)groups;
}

cr_isa cr_conv_pack(const cr_conv_params *params, int64_t outputs, int64_t group_channels,
                    const float *w, float *packed) {
  const int64_t groups = params->num_group, group_outputs = outputs / groups;
  const int64_t depth = group_channels * kernel_size_of(params);
  cr_isa isa = cr_gemm_isa();
  if (cr_conv_blocked_applies(params, outputs, group_channels, isa)) {
    cr_conv_blocked_pack(outputs, group_channels, w, isa, packed);
    return isa;
  }
  const size_t per_group = cr_gemm_packed_a_floats(group_outputs, depth);
  for (int64_t g = 0; g < groups; ++g) {
    isa = cr_gemm_pack_a(group_outputs, depth, w + g * group_outputs * depth, depth, 1,
                         packed + (size_t)g * per_group);
  }
  return isa;
}

/* The im2col view of one group of one image: row kk = (c, kd, kh, kw) and
 * column (od, oh, ow) hold x[c, od*s0 - p0 + kd*d0, oh*s1 - p1 + kh*d1,
 * ow*s2 - p2 + kw*d2], or 0 in the padding. */
typedef struct cr_im2col {
  const cr_conv_params *params;
  const float *x;
  int64_t in[3];
  int64_t out[3];
} cr_im2col;

/* Columns [j, j + count) of one im2col row whose outputs lie on one output
 * row: input row x_row (NULL when the kernel row falls in the padding),
 * read at base + t * stride for t < count, zeros outside [0, width). */
static void im2col_segment(const float *x_row, int64_t width, int64_t base, int64_t stride,
                           int64_t count, float *dst) {
  int64_t lo = 0, hi = 0;
  if (x_row != NULL) {
    lo = base >= 0 ? 0 : (-base + stride - 1) / stride;
    hi = width - 1 - base >= 0 ? (width - 1 - base) / stride + 1 : 0;
    if (lo > count) lo = count;
    if (hi > count) hi = count;
    if (hi < lo) hi = lo;
  }
  for (int64_t t = 0; t < lo; ++t) dst[t] = 0.0f;
  if (stride == 1) {
    if (hi > lo) memcpy(dst + lo, x_row + base + lo, (size_t)(hi - lo) * sizeof *dst);
  } else {
    for (int64_t t = lo; t < hi; ++t) dst[t] = x_row[base + t * stride];
  }
  for (int64_t t = hi; t < count; ++t) dst[t] = 0.0f;
}

static void pack_im2col(const void *context, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                        int nr, float *dst) {
  const cr_im2col *v = context;
  const cr_conv_params *p = v->params;
  const int64_t *in = v->in, *out = v->out, *k = p->kernel;
  const int64_t in_plane = in[0] * in[1] * in[2];
  const int64_t ks = k[0] * k[1] * k[2];
  const int64_t panels = (nc + nr - 1) / nr;
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t j0 = n0 + panel * nr;
    const int64_t width = min_i64(nr, n0 + nc - j0);
    const int64_t ow0 = j0 % out[2], oh0 = (j0 / out[2]) % out[1], od0 = j0 / (out[2] * out[1]);
    float *row_out = dst + panel * kc * nr;
    for (int64_t r = 0; r < kc; ++r, row_out += nr) {
      const int64_t kk = k0 + r;
      const int64_t c = kk / ks, tap = kk % ks;
      const int64_t kw = tap % k[2], kh = (tap / k[2]) % k[1], kd = tap / (k[2] * k[1]);
      const float *xc = v->x + c * in_plane;
      int64_t od = od0, oh = oh0, ow = ow0;
      for (int64_t j = 0; j < width;) {
        const int64_t count = min_i64(width - j, out[2] - ow);
        const int64_t id = od * p->stride[0] - p->pad[0] + kd * p->dilate[0];
        const int64_t ih = oh * p->stride[1] - p->pad[1] + kh * p->dilate[1];
        const int inside = id >= 0 && id < in[0] && ih >= 0 && ih < in[1];
        im2col_segment(inside ? xc + (id * in[1] + ih) * in[2] : NULL, in[2],
                       ow * p->stride[2] - p->pad[2] + kw * p->dilate[2], p->stride[2], count,
                       row_out + j);
        j += count;
        ow += count;
        if (ow == out[2]) {
          ow = 0;
          if (++oh == out[1]) {
            oh = 0;
            ++od;
          }
        }
      }
      for (int64_t j = width; j < nr; ++j) row_out[j] = 0.0f;
    }
  }
}

/* ---- 2-D convolution on the padded, wide grid ---------------------------- */

/* The input is zero-padded and split by the stride into phase planes:
 * phase (a, b) of channel c holds padded[c][i * s1 + a][j * s2 + b] at
 * (i, j), hq x wq per plane. Output (oh, ow) through tap (kh, kw) reads
 * padded row oh * s1 + kh * d1, that is phase row oh + (kh * d1) / s1 of
 * phase (kh * d1) % s1 (and likewise for columns). Each output row's part
 * of an im2col row is then one contiguous run of a phase plane, at an
 * offset fixed per im2col row: packing is plain copies (pack_phases). On
 * the "wide" grid q = oh * wq + ow a whole im2col row is one run, which
 * the GEMM reads in place through the row offsets, no packing at all; the
 * columns ow >= the output width are computed too and dropped when the
 * result is compacted. For stride 1 the phase plane is just the padded
 * plane, whose rows overlap by the padding: a row's right padding is the
 * next row's left padding (all zeros either way), so a row is wq = left +
 * w wide and fewer columns are dropped (a 32 x 32 plane: 1,055 wide
 * columns, 22 panels of 48, against 1,086 and 23). */
typedef struct cr_wide_view {
  const float *phases;
  const int64_t *offsets; /* per im2col row */
  int64_t wq;             /* phase plane row length */
  int64_t out_w;          /* output row length */
} cr_wide_view;

/* Packs the im2col matrix in the output's own column order: column j =
 * (oh, ow) of row k is phases[offsets[k] + oh * wq + ow], so each output
 * row's part of a panel row is one contiguous copy. */
CR_TARGET_CLONES static void pack_phases(const void *context, int64_t k0, int64_t kc,
                                         int64_t n0, int64_t nc, int nr, float *dst) {
  const cr_wide_view *v = context;
  const int64_t panels = (nc + nr - 1) / nr;
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t j0 = n0 + panel * nr;
    const int64_t width = min_i64(nr, n0 + nc - j0);
    const int64_t oh0 = j0 / v->out_w, ow0 = j0 % v->out_w;
    float *out = dst + panel * kc * nr;
    for (int64_t r = 0; r < kc; ++r, out += nr) {
      const float *src = v->phases + v->offsets[k0 + r] + oh0 * v->wq + ow0;
      int64_t count = min_i64(width, v->out_w - ow0);
      for (int64_t j = 0; j < width;) {
        for (int64_t t = 0; t < count; ++t) out[j + t] = src[t];
        j += count;
        src += count + (v->wq - v->out_w);
        count = min_i64(width - j, v->out_w);
      }
      for (int64_t j = width; j < nr; ++j) out[j] = 0.0f;
    }
  }
}

/* Row src of width values, padded by pad zero columns on the left, split
 * by column parity: padded column c goes to row_even (c even) or row_odd
 * at c / 2, so input column i to the row of parity (i + pad) % 2 at
 * (i + pad) / 2. Only the input's own columns are written. Constant
 * strides: the compiler turns them into vector shuffles (a variable stride
 * becomes gathers, or scalar code); inlined into each ISA's clone. */
__attribute__((always_inline)) static inline void deinterleave(const float *src, int64_t width,
                                                               int64_t pad, float *row_even,
                                                               float *row_odd) {
  float *first = (pad % 2 == 0 ? row_even : row_odd) + pad / 2;
  float *second = (pad % 2 == 0 ? row_odd : row_even) + (pad + 1) / 2;
  const int64_t pairs = width / 2;
  for (int64_t t = 0; t < pairs; ++t) {
    first[t] = src[2 * t];
    second[t] = src[2 * t + 1];
  }
  if (width % 2 != 0) first[pairs] = src[width - 1];
}

/* One input row of wd values into the phase planes of its padded row:
 * padded column pc = col + pad goes to phase pc % s2 at position pc / s2
 * (dst is the row in phase 0; phase b's row is phase_plane further).
 * Stride 2 deinterleaves in vectors; other strides walk the row once with
 * the phase and position counted, not divided (a strided loop per phase
 * was vectorised into gathers that cost more than the copies: 41% of a
 * vision transformer's 8 x 8 stride-8 patch convolution). */
CR_TARGET_CLONES static void split_columns(const float *src, int64_t wd, int64_t pad,
                                           int64_t s2, int64_t phase_plane, float *dst) {
  if (s2 == 2) { /* the common stride, without the general loop's variable stride */
    deinterleave(src, wd, pad, dst, dst + phase_plane);
    return;
  }
  int64_t phase = pad % s2, position = pad / s2;
  for (int64_t col = 0; col < wd; ++col) {
    dst[phase * phase_plane + position] = src[col];
    if (++phase == s2) phase = 0, ++position;
  }
}

/* A 2-D convolution the wide grid serves: a kernel larger than 1 x 1, or
 * a strided 1 x 1 (plain 1 x 1 convolutions need no im2col at all). */
static int is_wide_case(const cr_conv_params *p, int64_t ks, const int64_t x_shape[5]) {
  return x_shape[2] == 1 && p->kernel[0] == 1 && p->stride[0] == 1 && p->pad[0] == 0 &&
         (ks > 1 || p->stride[1] > 1 || p->stride[2] > 1);
}

/* The phase planes of a strided convolution's input (padded row pr and
 * column pc of channel c at phase (pr % s1, pc % s2), position
 * (pr / s1, pc / s2)), or at stride 1 the padded planes themselves. */
typedef struct cr_pad_task {
  const float *x;
  int64_t planes, h, w, top, left; /* the input and its padding */
  int64_t s1, s2, hq, wq;          /* strides, and each phase plane's rows */
  int64_t plane;                   /* floats per phase plane: hq * wq and a tail */
  float *out;
  int avx512; /* the GEMM's ISA is AVX-512: stride 2 splits rows with split_pairs_avx512 */
} cr_pad_task;

/* Padded rows [r0, r1) of channels [c0, c1) at stride 1: the h x w planes
 * of x in the middle of hq x wq planes, the border zeroed, every element
 * written once; with r1 = hq, the plane's tail too. A row's right padding
 * is the next row's left padding (wq = left + w, see convolve_wide), the
 * last row's is the tail. */
CR_TARGET_CLONES static void pad_plane_rows(const cr_pad_task *t, int64_t c0, int64_t c1,
                                            int64_t r0, int64_t r1) {
  const int64_t h = t->h, w = t->w, top = t->top, left = t->left, wq = t->wq;
  for (int64_t c = c0; c < c1; ++c) {
    const float *src = t->x + c * h * w;
    float *dst = t->out + c * t->plane;
    for (int64_t r = r0; r < r1; ++r) {
      float *row = dst + r * wq;
      if (r < top || r >= top + h) {
        cr_zero_floats(row, wq);
        continue;
      }
      cr_zero_floats(row, left);
      cr_copy_floats(row + left, src + (r - top) * w, w);
      cr_zero_floats(row + left + w, wq - left - w);
    }
    if (r1 == t->hq) cr_zero_floats(dst + t->hq * wq, t->plane - t->hq * wq);
  }
}

#if CR_DENSE_X86
/* deinterleave in vectors of 16 pairs: 32 values loaded (masked past the
 * row), one permutation per parity, masked stores; the same values.
 * bench_kernels, us per layer: 32 x 16 x 16 -> 64 at stride 2, 1 thread
 * 25.0-25.3 -> 23.6-23.8; 16 x 32 x 32 -> 32 at stride 2, 2 threads
 * 15.3-15.5 -> 14.3-14.5 (at 1 thread the same). Built without GCC's
 * dynamic vector cost model, deinterleave took 38% of the latter layer. */
__attribute__((target("avx512f"))) static void split_pairs_avx512(const float *src,
                                                                  int64_t width, int64_t pad,
                                                                  float *row_even,
                                                                  float *row_odd) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  float *first = (pad % 2 == 0 ? row_even : row_odd) + pad / 2;
  float *second = (pad % 2 == 0 ? row_odd : row_even) + (pad + 1) / 2;
  int64_t i = 0;
  for (; i + 32 <= width; i += 32) {
    const __m512 a = _mm512_loadu_ps(src + i), b = _mm512_loadu_ps(src + i + 16);
    _mm512_storeu_ps(first + i / 2, _mm512_permutex2var_ps(a, even, b));
    _mm512_storeu_ps(second + i / 2, _mm512_permutex2var_ps(a, odd, b));
  }
  const int64_t rest = width - i;
  if (rest <= 0) return;
  const int64_t low = rest < 16 ? rest : 16;
  const __m512 a = _mm512_maskz_loadu_ps((__mmask16)((1u << low) - 1u), src + i);
  const __m512 b = _mm512_maskz_loadu_ps((__mmask16)((1u << (rest - low)) - 1u), src + i + 16);
  _mm512_mask_storeu_ps(first + i / 2, (__mmask16)((1u << ((rest + 1) / 2)) - 1u),
                        _mm512_permutex2var_ps(a, even, b));
  _mm512_mask_storeu_ps(second + i / 2, (__mmask16)((1u << (rest / 2)) - 1u),
                        _mm512_permutex2var_ps(a, odd, b));
}
#endif

/* Padded rows [r0, r1) (of [0, hq * s1); rows past the padded height are
 * zeros) of channels [c0, c1), into their phase planes. */
static void pad_phase_rows(const cr_pad_task *t, int64_t c0, int64_t c1, int64_t r0,
                           int64_t r1) {
  const int64_t phase_plane = t->plane, channel_size = t->s1 * t->s2 * phase_plane;
  /* Zeros first, one run per phase plane (rows pr = a, a + s1, ... are
   * consecutive rows of row phase a), then the input rows over them. */
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t a = 0; a < t->s1; ++a) {
      const int64_t i0 = r0 > a ? (r0 - a + t->s1 - 1) / t->s1 : 0;
      const int64_t i1 = r1 > a ? (r1 - a + t->s1 - 1) / t->s1 : 0;
      for (int64_t b = 0; b < t->s2 && i1 > i0; ++b) {
        memset(t->out + c * channel_size + (a * t->s2 + b) * phase_plane + i0 * t->wq, 0,
               (size_t)((i1 - i0) * t->wq) * sizeof(float));
      }
    }
  }
  for (int64_t pr = r0; pr < r1; ++pr) {
    const int64_t r = pr - t->top;
    if (r < 0 || r >= t->h) continue;
    /* Divided once per row, not per row and channel (a 64-bit division
     * costs tens of cycles). */
    const int64_t offset = (pr % t->s1) * t->s2 * phase_plane + (pr / t->s1) * t->wq;
    for (int64_t c = c0; c < c1; ++c) {
      const float *src = t->x + (c * t->h + r) * t->w;
      float *dst = t->out + c * channel_size + offset;
#if CR_DENSE_X86
      if (t->s2 == 2 && t->avx512) {
        split_pairs_avx512(src, t->w, t->left, dst, dst + phase_plane);
        continue;
      }
#endif
      split_columns(src, t->w, t->left, t->s2, phase_plane, dst);
    }
  }
}

/* Phase rows [r0, r1) of every plane (all phases; at stride 1 the padded
 * rows themselves). */
static void pad_rows(const cr_pad_task *t, int64_t r0, int64_t r1) {
  if (t->s1 == 1 && t->s2 == 1) {
    pad_plane_rows(t, 0, t->planes, r0, r1);
  } else {
    pad_phase_rows(t, 0, t->planes, r0 * t->s1, r1 * t->s1);
  }
}

/* Moves a convolution's output off the wide grid (row oh of output o at
 * o * ld + oh * wq, the columns from the output width to wq dropped), one
 * finished block of the product at a time, on the thread that computed it;
 * then + residual and act when a residual is given. */
typedef struct cr_wide_compaction {
  const float *wide;
  int64_t ld, wq, out_h, out_w;
  float *y;              /* the group's first output plane */
  const float *residual; /* the same planes of the residual, or NULL */
  cr_epilogue epilogue;  /* applied with the residual */
} cr_wide_compaction;

/* Where wide column j would go in an output plane: the outputs before it
 * (wide columns past the output width hold no output). */
static int64_t compact_index(const cr_wide_compaction *t, int64_t j) {
  const int64_t row = j / t->wq;
  if (row >= t->out_h) return t->out_h * t->out_w;
  return row * t->out_w + min_i64(j % t->wq, t->out_w);
}

CR_TARGET_CLONES static void compact_wide_block(void *context, int64_t i0, int64_t i1,
                                                int64_t j0, int64_t j1) {
  const cr_wide_compaction *t = context;
  const int64_t plane = t->out_h * t->out_w;
  /* The output rows whose wide segments [oh * wq, oh * wq + out_w) meet [j0, j1). */
  const int64_t first = j0 / t->wq, last = min_i64(t->out_h, (j1 + t->wq - 1) / t->wq);
  /* The block's outputs are one run of each output plane. */
  const int64_t y0 = compact_index(t, j0), y1 = compact_index(t, j1);
  for (int64_t o = i0; o < i1; ++o) {
    float *y = t->y + o * plane;
    for (int64_t oh = first; oh < last; ++oh) {
      const int64_t begin = oh * t->wq > j0 ? 0 : j0 - oh * t->wq;
      const int64_t end = min_i64(t->out_w, j1 - oh * t->wq);
      if (begin >= end) continue;
      cr_copy_floats(y + oh * t->out_w + begin, t->wide + o * t->ld + oh * t->wq + begin,
                     end - begin);
    }
    if (t->residual != NULL && y1 > y0) {
      cr_epilogue e = t->epilogue;
      e.residual = t->residual + o * plane;
      e.ld_residual = plane;
      cr_epilogue_apply(&e, 0, 1, y0, y1 - y0, y, plane);
    }
  }
}

enum { kWideMinDepth = 64 };

/* The shares a product of one image is computed in, one thread each: a
 * thread for a quarter of the usual work, as cr_threads_for_images gives a
 * batch's images, and at most one per panel. The step before most likely
 * left the image's rows split between the cores as the shares split them,
 * and reading the other core's half costs more than handing a thread the
 * job: resnet_small's strided 1 x 1 shortcut (131K multiply-adds) took
 * 10.4 us on one thread after a 2-thread step and 6.2 us in two shares, its
 * 3-channel first layer 13.7 and 9.4 us. */
static int64_t conv_shares(int64_t m, int64_t n, int64_t k, int num_threads) {
  const int threads = cr_threads_for_work(num_threads, 4.0 * (double)m * (double)n * (double)k, 1);
  const int64_t panels = cr_gemm_panels(m, n);
  return threads < panels ? threads : panels;
}

/* What a convolution computed in shares changes from one image and group
 * to the next: the first member of its task, handed to compute. */
typedef struct cr_conv_group {
  int (*compute)(const struct cr_conv_group *group, int64_t share);
  const float *x;        /* the group's input */
  float *y;              /* the group's first output plane */
  const float *residual; /* the same planes of the residual, or NULL */
  const float *bias;     /* the group's */
  cr_gemm_operand a;     /* the group's filters (data and packed set per group) */
  int64_t shares;
  int failed;
} cr_conv_group;

static void group_shares(void *context, int64_t begin, int64_t end) {
  cr_conv_group *group = context;
  for (int64_t share = begin; share < end; ++share) {
    if (group->compute(group, share) != 0) __atomic_store_n(&group->failed, 1, __ATOMIC_RELAXED);
  }
}

/* Every image and group of a convolution, group pointed at each in turn
 * and its shares computed, on as many threads when there are several;
 * depth is the filters' row length. Returns 0, or -1 when a share failed. */
static int convolve_groups(const cr_conv_params *p, const int64_t x_shape[5], const float *x,
                           const float *w, const float *packed_w, const float *bias,
                           const cr_fusion *fusion, const int64_t y_shape[5], float *y,
                           int64_t depth, cr_conv_group *group) {
  const int64_t batch = x_shape[0], channels = x_shape[1], outputs = y_shape[1];
  const int64_t groups = p->num_group;
  const int64_t group_channels = channels / groups, group_outputs = outputs / groups;
  const int64_t in_plane = x_shape[2] * x_shape[3] * x_shape[4];
  const int64_t out_plane = y_shape[2] * y_shape[3] * y_shape[4];
  const size_t per_group = packed_w != NULL ? cr_gemm_packed_a_floats(group_outputs, depth) : 0;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t first_output = n * outputs + g * group_outputs;
      group->x = x + (n * channels + g * group_channels) * in_plane;
      group->y = y + first_output * out_plane;
      group->residual = fusion != NULL && fusion->residual != NULL
                            ? fusion->residual + first_output * out_plane
                            : NULL;
      group->bias = bias != NULL ? bias + g * group_outputs : NULL;
      group->a.data = w + g * group_outputs * depth;
      group->a.packed = packed_w != NULL ? packed_w + (size_t)g * per_group : NULL;
      if (group->shares > 1) {
        cr_parallel_for((int)group->shares, group->shares, group_shares, group);
      } else {
        group_shares(group, 0, 1);
      }
      if (__atomic_load_n(&group->failed, __ATOMIC_RELAXED)) return -1;
    }
  }
  return 0;
}

/* One image and group of a 2-D convolution on the phase planes, computed
 * in shares of its product (cr_gemm_share): each thread pads the rows of
 * the planes its share reads into planes of its own (its scratch) and
 * computes its share right after, with no wait between the two. Shared out
 * by columns (output rows), the threads pad the rows between their shares
 * twice; shared by rows (outputs), each pads all of them. Against padding
 * once, shared out, then computing: no second synchronisation, and no
 * thread reads rows the other core just wrote (at 2 threads, the product's
 * part reading such rows ran 1.4 us slower per 3 panels). */
typedef struct cr_wide_conv {
  cr_conv_group group; /* first */
  cr_pad_task pad;  /* the planes' geometry (x: the group's input, out: per share) */
  int64_t kh, kw, dilate_h, dilate_w;
  int64_t depth;    /* rows of the im2col matrix */
  int64_t tap_rows; /* the phase rows below its output row a tap reaches */
  int64_t outputs;  /* the group's */
  int64_t out_h, out_w;
  int64_t columns;  /* the product's: the wide grid's, or the output plane's */
  int64_t wide_ld;
  float *wide;      /* the wide grid (NULL: the product has the output's columns) */
  const cr_fusion *fusion;
} cr_wide_conv;

static int wide_share(const cr_conv_group *group, int64_t share) {
  const cr_wide_conv *t = (const cr_wide_conv *)group;
  int64_t i0, i1, j0, j1;
  cr_gemm_share_bounds(t->outputs, t->columns, share, group->shares, &i0, &i1, &j0, &j1);
  if (i1 <= i0 || j1 <= j0) return 0;
  cr_pad_task pad = t->pad;
  pad.x = group->x;
  const int64_t phase_plane = pad.plane, channel_size = pad.s1 * pad.s2 * phase_plane;
  /* Every element the share reads is written by pad_rows (no calloc of the
   * whole first). */
  pad.out = cr_scratch(CR_SCRATCH_CONV_PLANES, (size_t)(pad.planes * channel_size) * sizeof(float));
  int64_t *offsets = cr_scratch(CR_SCRATCH_CONV_OFFSETS, (size_t)t->depth * sizeof *offsets);
  if (pad.out == NULL || offsets == NULL) return -1;
  /* The output rows of the share's columns, and the phase rows they read,
   * and one more: at stride 1 a row's right padding is the next row's
   * left, and on the wide grid a dropped column's taps run into the next
   * row (never past the plane and its tail). */
  const int64_t row_length = t->wide != NULL ? pad.wq : t->out_w;
  const int64_t first = j0 / row_length, last = (j1 - 1) / row_length;
  pad_rows(&pad, first, min_i64(pad.hq, last + t->tap_rows + 2));
  /* The taps' offsets in one channel, then the same per channel further. */
  const int64_t taps = t->kh * t->kw;
  for (int64_t tap = 0; tap < taps; ++tap) {
    const int64_t row = (tap / t->kw) * t->dilate_h, col = (tap % t->kw) * t->dilate_w;
    offsets[tap] = ((row % pad.s1) * pad.s2 + col % pad.s2) * phase_plane +
                   (row / pad.s1) * pad.wq + col / pad.s2;
  }
  for (int64_t kk = taps; kk < t->depth; ++kk) offsets[kk] = offsets[kk - taps] + channel_size;

  cr_epilogue e = make_epilogue(t->fusion);
  e.row_bias = group->bias;
  if (t->wide != NULL) {
    /* Deep enough to read B in place on the wide grid; the activation
     * waits for the residual when there is one. */
    cr_gemm_operand b = {pad.out, 0, 0, NULL, NULL, NULL, CR_ISA_GENERIC, offsets};
    if (group->residual != NULL) e.act = CR_EPI_NONE;
    cr_wide_compaction compaction = {t->wide, t->wide_ld, pad.wq, t->out_h, t->out_w,
                                     group->y, group->residual, make_epilogue(t->fusion)};
    const cr_gemm_done done = {compact_wide_block, &compaction};
    return cr_gemm_share(t->outputs, t->columns, t->depth, &group->a, &b, t->wide, t->wide_ld,
                         &e, &done, share, group->shares);
  }
  cr_wide_view view = {pad.out, offsets, pad.wq, t->out_w};
  cr_gemm_operand b = {NULL, 0, 0, pack_phases, &view, NULL, CR_ISA_GENERIC, NULL};
  e.residual = group->residual;
  e.ld_residual = t->out_h * t->out_w;
  return cr_gemm_share(t->outputs, t->columns, t->depth, &group->a, &b, group->y, t->columns,
                       &e, NULL, share, group->shares);
}

static int convolve_wide(const cr_conv_params *p, const int64_t x_shape[5], const float *x,
                         const float *w, const float *packed_w, cr_isa packed_isa,
                         const float *bias, const cr_fusion *fusion, const int64_t y_shape[5],
                         float *y, int num_threads) {
  const int64_t group_channels = x_shape[1] / p->num_group;
  const int64_t group_outputs = y_shape[1] / p->num_group;
  const int64_t h = x_shape[3], wd = x_shape[4], *out = y_shape + 2;
  const int64_t s1 = p->stride[1], s2 = p->stride[2];
  const int64_t hp = h + 2 * p->pad[1], wp = wd + 2 * p->pad[2];
  const int64_t hq = (hp + s1 - 1) / s1;
  /* At stride 1 a padded row is its left padding and the input's row: its
   * right padding is the next row's left padding (both zeros; the last
   * row's is a tail after the plane), which leaves fewer columns past the
   * output width on the wide grid. */
  const int shared_columns = s1 == 1 && s2 == 1;
  const int64_t wq = shared_columns ? wd + p->pad[2] : (wp + s2 - 1) / s2;
  const int64_t plane = hq * wq + (shared_columns ? p->pad[2] : 0);
  const int64_t kh = p->kernel[1], kw = p->kernel[2];
  const int64_t depth = group_channels * kh * kw;
  const int64_t out_plane = out[1] * out[2];
  /* Deep products read the phase planes in place, computing the wide grid
   * q = oh * wq + ow (the columns ow >= the output width dropped by
   * compact_wide_block); shallow ones, whose output would cost more to
   * compact than packing costs, pack the output's own columns
   * (pack_phases). */
  const int64_t wide_count = (out[1] - 1) * wq + out[2];
  const int on_wide_grid = depth >= kWideMinDepth;
  const int64_t columns = on_wide_grid ? wide_count : out_plane;
  cr_wide_conv task = {
      .group = {.compute = wide_share,
                .a = {NULL, depth, 1, NULL, NULL, NULL, packed_isa, NULL},
                .shares = conv_shares(group_outputs, columns, depth, num_threads)},
      .pad = {NULL, group_channels, h, wd, p->pad[1], p->pad[2], s1, s2, hq, wq, plane, NULL,
              cr_gemm_isa() == CR_ISA_AVX512},
      .kh = kh, .kw = kw, .dilate_h = p->dilate[1], .dilate_w = p->dilate[2], .depth = depth,
      .tap_rows = ((kh - 1) * p->dilate[1]) / s1, .outputs = group_outputs,
      .out_h = out[1], .out_w = out[2], .columns = columns,
      /* Rows of whole cache lines, so that threads sharing the product's
       * column panels (48 floats) never write one line: a line written by
       * two cores in turn moves between them every time (measured on
       * row-slab splits of such products: each ran 1.5x slower on 2 threads
       * than alone). */
      .wide_ld = (wide_count + 15) / 16 * 16, .fusion = fusion};
  if (on_wide_grid) {
    task.wide = cr_scratch(CR_SCRATCH_CONV_OUTPUT,
                           (size_t)(group_outputs * task.wide_ld) * sizeof *task.wide);
    if (task.wide == NULL) return -1;
  }
  return convolve_groups(p, x_shape, x, w, packed_w, bias, fusion, y_shape, y, depth,
                         &task.group);
}

/* ---- 1 x 1 convolution of a batch of small images ------------------------ */

/* Stride 1 and no padding (with a 1 x 1 kernel: the image is B itself). */
static int is_pointwise(const cr_conv_params *p) {
  return p->stride[0] == 1 && p->stride[1] == 1 && p->stride[2] == 1 && p->pad[0] == 0 &&
         p->pad[1] == 0 && p->pad[2] == 0;
}

/* A batch of images whose planes are small runs as one product whose
 * columns are every image's positions, image after image: per image, a
 * 7 x 7 plane is 49 columns (one tile of 48 and a column computed alone)
 * and a 14 x 14 one 196 (four tiles and a tile of 4), and each image reads
 * all of the filters again, where the batch's 392 or 1568 columns fill
 * their tiles and read the filters once per block of columns. B is then
 * gathered from the images (pack_batch_columns), and C, computed into
 * scratch, is moved into the images' planes block by block as the product
 * finishes them (scatter_batch_block), with the residual and activation.
 * The product's columns are padded with zeros to whole vectors of 16, so
 * that no column is left to the narrow tiles, which sum in another order:
 * every output is then the same bit for bit whatever the thread count (the
 * threads share the product's panels). A single image keeps its plane as
 * B, read in place. */
enum { kBatchColumnsMaxPlane = 95 }; /* fewer than two tiles of columns per image */

typedef struct cr_batch_columns {
  const float *x;
  int64_t plane;   /* positions per image */
  int64_t image;   /* floats per image */
  int64_t columns; /* the batch's positions (columns past them are zeros) */
} cr_batch_columns;

/* pack_b of the batch's columns: column j is position j % plane of image
 * j / plane. */
static void pack_batch_columns(const void *context, int64_t k0, int64_t kc, int64_t n0,
                               int64_t nc, int nr, float *dst) {
  const cr_batch_columns *v = context;
  const int64_t panels = (nc + nr - 1) / nr;
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t j0 = n0 + panel * nr;
    const int64_t width =
        j0 >= v->columns ? 0 : min_i64(min_i64(nr, n0 + nc - j0), v->columns - j0);
    float *row_out = dst + panel * kc * nr;
    for (int64_t r = 0; r < kc; ++r, row_out += nr) {
      int64_t n = j0 / v->plane, pos = j0 % v->plane;
      for (int64_t j = 0; j < width;) {
        const int64_t count = min_i64(width - j, v->plane - pos);
        cr_copy_floats(row_out + j, v->x + n * v->image + (k0 + r) * v->plane + pos, count);
        j += count;
        ++n;
        pos = 0;
      }
      for (int64_t j = width; j < nr; ++j) row_out[j] = 0.0f;
    }
  }
}

typedef struct cr_batch_scatter {
  const float *c;
  int64_t ldc, plane, outputs, columns;
  float *y;              /* image 0's first plane */
  const float *residual; /* the same for the residual, or NULL */
  cr_epilogue epilogue;  /* applied with the residual */
} cr_batch_scatter;

/* cr_gemm_done: rows [i0, i1) and columns [j0, j1) of C into the planes,
 * then + residual and act when there is a residual. */
static void scatter_batch_block(void *context, int64_t i0, int64_t i1, int64_t j0,
                                int64_t j1) {
  const cr_batch_scatter *t = context;
  const int64_t image = t->outputs * t->plane, end = min_i64(j1, t->columns);
  for (int64_t o = i0; o < i1; ++o) {
    for (int64_t j = j0; j < end;) {
      const int64_t n = j / t->plane, pos = j % t->plane;
      const int64_t count = min_i64(end - j, t->plane - pos);
      float *y = t->y + n * image + o * t->plane;
      cr_copy_floats(y + pos, t->c + o * t->ldc + j, count);
      if (t->residual != NULL) {
        cr_epilogue e = t->epilogue;
        e.residual = t->residual + n * image + o * t->plane;
        e.ld_residual = t->plane;
        cr_epilogue_apply(&e, 0, 1, pos, count, y, t->plane);
      }
      j += count;
    }
  }
}

/* y = the 1 x 1 convolution (stride 1, no padding, one group) of the batch
 * of planes of `plane` positions at x, as one product (see above). */
static int convolve_batch_columns(int64_t batch, int64_t channels, int64_t outputs,
                                  int64_t plane, const float *x, const float *w,
                                  const float *packed_w, cr_isa packed_isa, const float *bias,
                                  const cr_fusion *fusion, float *y, int num_threads);

/* A batch's product shared out by images, each share one product of its
 * images' columns on one thread (see batch_column_groups). */
typedef struct cr_batch_groups {
  int64_t batch, channels, outputs, plane, shares;
  const float *x, *w, *packed_w, *bias;
  cr_isa packed_isa;
  const cr_fusion *fusion;
  float *y;
  int failed;
} cr_batch_groups;

static void batch_group_shares(void *context, int64_t begin, int64_t end) {
  cr_batch_groups *t = context;
  const int64_t in_image = t->channels * t->plane, out_image = t->outputs * t->plane;
  for (int64_t share = begin; share < end; ++share) {
    const int64_t n0 = t->batch * share / t->shares, n1 = t->batch * (share + 1) / t->shares;
    if (n1 <= n0) continue;
    cr_fusion fusion;
    const cr_fusion *f = t->fusion;
    if (f != NULL && f->residual != NULL) {
      fusion = *f;
      fusion.residual = f->residual + n0 * out_image;
      f = &fusion;
    }
    if (convolve_batch_columns(n1 - n0, t->channels, t->outputs, t->plane, t->x + n0 * in_image,
                               t->w, t->packed_w, t->packed_isa, t->bias, f,
                               t->y + n0 * out_image, 1) != 0) {
      __atomic_store_n(&t->failed, 1, __ATOMIC_RELAXED);
    }
  }
}

/* On several threads a product with more columns (the batch's positions)
 * than rows (outputs) shares out its rows, and each thread reads every
 * column: B (the images, channels x columns, larger than the filters) is
 * then packed once by the calling thread before the others start, and
 * half of it comes from the other core, which computed half the images'
 * planes of the layer before. Such a product is shared out by images
 * instead, each thread packing and computing its own images' columns:
 * MobileNetV2, batch 8, 2 threads, least step times, 960 x 7 x 7 -> 160
 * 498 -> 336 us, -> 320 761 -> 620 us, 576 x 7 x 7 -> 160 301 -> 214 us.
 * Each column is computed as in the whole product, the same values bit
 * for bit. Returns -1 when it does not apply (one thread, fewer columns
 * than rows: the filters are then the larger operand, read once). */
static int batch_column_groups(int64_t batch, int64_t channels, int64_t outputs, int64_t plane,
                               const float *x, const float *w, const float *packed_w,
                               cr_isa packed_isa, const float *bias, const cr_fusion *fusion,
                               float *y, int num_threads, int *status) {
  const int64_t columns = batch * plane;
  if (num_threads < 2 || columns <= outputs) return -1;
  int64_t shares = cr_gemm_threads(outputs, columns, channels, num_threads);
  if (shares > batch) shares = batch;
  if (shares < 2) return -1;
  cr_batch_groups t = {batch, channels, outputs, plane, shares, x, w, packed_w, bias,
                       packed_isa, fusion, y, 0};
  cr_parallel_for((int)shares, shares, batch_group_shares, &t);
  *status = __atomic_load_n(&t.failed, __ATOMIC_RELAXED) ? -1 : 0;
  return 0;
}

static int convolve_batch_columns(int64_t batch, int64_t channels, int64_t outputs,
                                  int64_t plane, const float *x, const float *w,
                                  const float *packed_w, cr_isa packed_isa, const float *bias,
                                  const cr_fusion *fusion, float *y, int num_threads) {
  const int64_t columns = batch * plane, ldc = (columns + 15) / 16 * 16;
  float *c = cr_scratch(CR_SCRATCH_CONV_OUTPUT, (size_t)(outputs * ldc) * sizeof *c);
  if (c == NULL) return -1;
  const cr_batch_columns view = {x, plane, channels * plane, columns};
  cr_gemm_operand a = {w, channels, 1, NULL, NULL, packed_w, packed_isa, NULL};
  cr_gemm_operand b = {NULL, 0, 0, pack_batch_columns, &view, NULL, CR_ISA_GENERIC, NULL};
  const int has_residual = fusion != NULL && fusion->residual != NULL;
  cr_epilogue e = make_epilogue(fusion);
  e.row_bias = bias;
  if (has_residual) e.act = CR_EPI_NONE; /* after the residual, in the scatter */
  cr_batch_scatter scatter = {c, ldc, plane, outputs, columns, y,
                              has_residual ? fusion->residual : NULL, make_epilogue(fusion)};
  const cr_gemm_done done = {scatter_batch_block, &scatter};
  return cr_gemm_notify(outputs, ldc, channels, &a, &b, c, ldc, &e, &done, num_threads);
}

/* ---- Strided 1 x 1 convolution ------------------------------------------ */

/* A 1 x 1 convolution with a stride and no padding (a ResNet shortcut)
 * reads one input position in s1 * s2: those are gathered into a compact
 * image first, which is then the GEMM's B as for a plain 1 x 1. Computed
 * in shares as convolve_wide's: each gathers, into its thread's own
 * buffer, the output rows its columns of the product read. */
typedef struct cr_pointwise_conv {
  cr_conv_group group; /* first */
  int64_t channels, h, w, s1, s2, out_h, out_w;
  int64_t outputs; /* the group's */
  const cr_fusion *fusion;
} cr_pointwise_conv;

static int pointwise_share(const cr_conv_group *group, int64_t share) {
  const cr_pointwise_conv *t = (const cr_pointwise_conv *)group;
  const int64_t out_plane = t->out_h * t->out_w, in_plane = t->h * t->w;
  int64_t i0, i1, j0, j1;
  cr_gemm_share_bounds(t->outputs, out_plane, share, group->shares, &i0, &i1, &j0, &j1);
  if (i1 <= i0 || j1 <= j0) return 0;
  float *compact =
      cr_scratch(CR_SCRATCH_CONV_OUTPUT, (size_t)(t->channels * out_plane) * sizeof *compact);
  if (compact == NULL) return -1;
  const int64_t first = j0 / t->out_w, last = (j1 - 1) / t->out_w;
  for (int64_t c = 0; c < t->channels; ++c) {
    for (int64_t r = first; r <= last; ++r) {
      const float *src = group->x + c * in_plane + r * t->s1 * t->w;
      float *dst = compact + c * out_plane + r * t->out_w;
      for (int64_t col = 0; col < t->out_w; ++col) dst[col] = src[col * t->s2];
    }
  }
  cr_gemm_operand b = {compact, out_plane, 1, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
  cr_epilogue e = make_epilogue(t->fusion);
  e.row_bias = group->bias;
  e.residual = group->residual;
  e.ld_residual = out_plane;
  return cr_gemm_share(t->outputs, out_plane, t->channels, &group->a, &b, group->y, out_plane,
                       &e, NULL, share, group->shares);
}

static int convolve_strided_pointwise(const cr_conv_params *p, const int64_t x_shape[5],
                                      const float *x, const float *w, const float *packed_w,
                                      cr_isa packed_isa, const float *bias,
                                      const cr_fusion *fusion, const int64_t y_shape[5],
                                      float *y, int num_threads) {
  const int64_t group_channels = x_shape[1] / p->num_group;
  const int64_t group_outputs = y_shape[1] / p->num_group;
  cr_pointwise_conv task = {
      .group = {.compute = pointwise_share,
                .a = {NULL, group_channels, 1, NULL, NULL, NULL, packed_isa, NULL},
                .shares = conv_shares(group_outputs, y_shape[3] * y_shape[4], group_channels,
                                      num_threads)},
      .channels = group_channels, .h = x_shape[3], .w = x_shape[4],
      .s1 = p->stride[1], .s2 = p->stride[2], .out_h = y_shape[3], .out_w = y_shape[4],
      .outputs = group_outputs, .fusion = fusion};
  return convolve_groups(p, x_shape, x, w, packed_w, bias, fusion, y_shape, y, group_channels,
                         &task.group);
}

/* ---- Direct (depthwise) convolution ------------------------------------ */

typedef struct cr_conv_task {
  const cr_conv_params *params;
  const int64_t *x_shape;
  const float *x;
  const float *w;
  const float *bias;
  const int64_t *y_shape;
  float *y;
  const cr_fusion *fusion;
  cr_isa isa; /* the GEMM's: 3 x 3 planes use depthwise_plane_vector, which may have it */
} cr_conv_task;

/* 3 x 3 taps, dilation 1, stride 1, over a zero-padded plane of row
 * length wp: out[q] = bias + sum over (kh, kw) in order of w[kh * 3 + kw] *
 * xp[q + kh * wp + kw], for q < count. Output q = oh * wp + ow is output
 * (oh, ow): the columns ow >= the output width are computed and dropped,
 * which lets one loop run over a whole plane. */
CR_TARGET_CLONES static void depthwise_3x3(const float *xp, int64_t wp, const float *w,
                                           float bias, int64_t count, float *out) {
  const float *r0 = xp, *r1 = xp + wp, *r2 = xp + 2 * wp;
  const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6],
              w7 = w[7], w8 = w[8];
  for (int64_t q = 0; q < count; ++q) {
    float acc = bias;
    acc = acc + w0 * r0[q];
    acc = acc + w1 * r0[q + 1];
    acc = acc + w2 * r0[q + 2];
    acc = acc + w3 * r1[q];
    acc = acc + w4 * r1[q + 1];
    acc = acc + w5 * r1[q + 2];
    acc = acc + w6 * r2[q];
    acc = acc + w7 * r2[q + 1];
    acc = acc + w8 * r2[q + 2];
    out[q] = acc;
  }
}

/* Stride 2 on the padded plane's columns split by parity (even[j] =
 * padded[2j], odd[j] = padded[2j + 1], per padded row): out[q] = bias +
 * the taps w[kh * 3 + kw] * padded[kh][2q + kw] in the same order as
 * depthwise_3x3, read with unit stride (e* and o* are the even and odd
 * halves of the three input rows). */
CR_TARGET_CLONES static void depthwise_3x3_split(const float *e0, const float *o0,
                                                 const float *e1, const float *o1,
                                                 const float *e2, const float *o2,
                                                 const float *w, float bias, int64_t count,
                                                 float *out) {
  const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6],
              w7 = w[7], w8 = w[8];
  for (int64_t q = 0; q < count; ++q) {
    float acc = bias;
    acc = acc + w0 * e0[q];
    acc = acc + w1 * o0[q];
    acc = acc + w2 * e0[q + 1];
    acc = acc + w3 * e1[q];
    acc = acc + w4 * o1[q];
    acc = acc + w5 * e1[q + 1];
    acc = acc + w6 * e2[q];
    acc = acc + w7 * o2[q];
    acc = acc + w8 * e2[q + 1];
    out[q] = acc;
  }
}

/* One padded row (input row x_row, NULL in the padding; pad zero columns on
 * the left) split into even and odd columns. Only the input's own columns
 * are written: the zeros around them come from the zeroed scratch. */
CR_TARGET_CLONES static void split_row(const float *x_row, int64_t width, int64_t pad,
                                       float *even, float *odd) {
  if (x_row == NULL) return; /* the scratch starts zeroed and padding is never written */
  deinterleave(x_row, width, pad, even, odd);
}

/* split_row for padded rows [0, rows) of a plane of in_h x in_w, row r into
 * dst + r * slot (its odd half at + half): one call per plane, not per row
 * (small planes have many short rows). Padding rows are not written. */
CR_TARGET_CLONES static void split_rows(const float *x, int64_t in_h, int64_t in_w,
                                        int64_t pad_rows, int64_t pad_cols, int64_t rows,
                                        int64_t slot, int64_t half, float *dst) {
  const int64_t begin = pad_rows < rows ? pad_rows : rows;
  const int64_t end = in_h + pad_rows < rows ? in_h + pad_rows : rows;
  for (int64_t r = begin; r < end; ++r) {
    deinterleave(x + (r - pad_rows) * in_w, in_w, pad_cols, dst + r * slot, dst + r * slot + half);
  }
}

/* The general case of one output row: y[ow] += the taps of one kernel row
 * in order, w[kj] * x_row[ow * stride + kj * dilate - pad], reading zeros
 * outside [0, width). */
static void depthwise_row(const float *x_row, int64_t width, const float *w, int64_t taps,
                          int64_t stride, int64_t dilate, int64_t pad, float *y, int64_t out) {
  for (int64_t o = 0; o < out; ++o) {
    float acc = y[o];
    for (int64_t kj = 0; kj < taps; ++kj) {
      const int64_t iw = o * stride + kj * dilate - pad;
      if (iw >= 0 && iw < width) acc += w[kj] * x_row[iw];
    }
    y[o] = acc;
  }
}

#if CR_DENSE_X86
/* The output rows of one 3 x 3 depthwise plane in AVX-512 vectors of 16
 * outputs, the last of each row masked (no scalar tail): row r, output q
 * is bias + the taps t, in order, of w[t] * src[r * ld_src + offsets[t] +
 * q], accumulated with fused multiply-adds (so, like the GEMM, it differs
 * from the portable loops by FMA rounding only); then the fused residual
 * (residual[r * count + q], when not NULL) and activation, in the order of
 * tile_epilogue_apply, in registers (no second pass over the plane). For
 * stride 1 src is the padded plane and the taps read columns +0, +1, +2
 * of three padded rows; for stride 2 it is the rows split into even and
 * odd halves. out: rows x count values. Only the tails use masked loads
 * (they cost an extra uop each). */
__attribute__((target("avx512f"), always_inline)) static inline __m512 depthwise_vector(
    const __m512 wv[9], __m512 bias, const float *x, const int64_t offsets[9], __mmask16 mask,
    int masked) {
  __m512 acc = bias;
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) {
    /* Masked loads cost an extra uop: only the tail uses them. */
    const __m512 value =
        masked ? _mm512_maskz_loadu_ps(mask, x + offsets[t]) : _mm512_loadu_ps(x + offsets[t]);
    acc = _mm512_fmadd_ps(wv[t], value, acc);
  }
  return acc;
}

__attribute__((target("avx512f"), always_inline)) static inline __m512 depthwise_epilogue(
    __m512 value, const float *residual, __mmask16 mask, cr_epilogue_act act, __m512 low,
    __m512 high) {
  if (residual != NULL) value = _mm512_add_ps(value, _mm512_maskz_loadu_ps(mask, residual));
  if (act == CR_EPI_RELU) {
    value = _mm512_max_ps(_mm512_setzero_ps(), value); /* max(0, NaN) is NaN: kept */
  } else if (act == CR_EPI_CLIP) {
    /* (v < low ? low : v), then (t > high ? high : t): vmaxps and vminps
     * return their second operand when either is NaN or both are zeros, so
     * max(low, v) and min(high, t) give exactly that (NaN kept, -0 kept)
     * in two instructions instead of two compares and two blends. */
    value = _mm512_min_ps(high, _mm512_max_ps(low, value));
  } else if (act == CR_EPI_HARD_SIGMOID || act == CR_EPI_HARD_SWISH) {
    value = cr_hard_sigmoid16(value, low, high, act == CR_EPI_HARD_SWISH); /* alpha, beta */
  }
  return value;
}

/* The nine filter values of a 3 x 3 plane in wv, each in every lane;
 * returns the bias in every lane. */
__attribute__((target("avx512f"), always_inline)) static inline __m512 taps9_avx512(
    const float *w, float bias, __m512 wv[9]) {
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  return _mm512_set1_ps(bias);
}

__attribute__((target("avx512f"))) static void depthwise_plane_avx512(
    const float *src, int64_t ld_src, const int64_t offsets[9], int64_t rows, int64_t count,
    const float *w, float bias, const float *residual, const cr_fusion *fusion, float *out) {
  __m512 wv[9];
  const __m512 bias_v = taps9_avx512(w, bias, wv);
  const cr_epilogue_act act = fusion != NULL ? fusion->act : CR_EPI_NONE;
  const __m512 low = _mm512_set1_ps(fusion != NULL ? fusion->clip_low : 0.0f);
  const __m512 high = _mm512_set1_ps(fusion != NULL ? fusion->clip_high : 0.0f);
  const int64_t full = count / 16 * 16, tail = count - full;
  const __mmask16 tail_mask = (__mmask16)((1u << tail) - 1u);
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = src + r * ld_src;
    float *out_row = out + r * count;
    const float *res_row = residual != NULL ? residual + r * count : NULL;
    for (int64_t q = 0; q < full; q += 16) {
      __m512 acc = depthwise_vector(wv, bias_v, row + q, offsets, 0xFFFF, 0);
      acc = depthwise_epilogue(acc, res_row != NULL ? res_row + q : NULL, 0xFFFF, act, low,
                               high);
      _mm512_storeu_ps(out_row + q, acc);
    }
    if (tail > 0) {
      __m512 acc = depthwise_vector(wv, bias_v, row + full, offsets, tail_mask, 1);
      acc = depthwise_epilogue(acc, res_row != NULL ? res_row + full : NULL, tail_mask, act,
                               low, high);
      _mm512_mask_storeu_ps(out_row + full, tail_mask, acc);
    }
  }
}

/* The nine filter values of a 3 x 3 depthwise plane, each in every lane. */
__attribute__((target("avx2"), always_inline)) static inline void broadcast_taps9(
    const float *w, __m256 wv[9]) {
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) wv[t] = _mm256_set1_ps(w[t]);
}

/* depthwise_vector in vectors of 8: acc plus, tap by tap, w[t] times x +
 * offsets[t], the loads masked (vmaskmovps: no masked-out lane is read)
 * when `masked`. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 depthwise_taps8(
    const __m256 wv[9], __m256 acc, const float *x, const int64_t offsets[9], __m256i mask,
    int masked) {
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) {
    const float *at = x + offsets[t];
    acc = _mm256_fmadd_ps(wv[t], masked ? _mm256_maskload_ps(at, mask) : _mm256_loadu_ps(at),
                          acc);
  }
  return acc;
}

/* depthwise_plane_avx512 in AVX2 vectors of 8: the same operations in the
 * same order, so the same values bit for bit. Whole vectors go two at a
 * time (two chains of fused multiply-adds in flight); the tail of a row is
 * read and written with vmaskmovps, which touches no masked-out lane. */
__attribute__((target("avx2,fma"))) static void depthwise_plane_avx2(
    const float *src, int64_t ld_src, const int64_t offsets[9], int64_t rows, int64_t count,
    const float *w, float bias, const float *residual, const cr_fusion *fusion, float *out) {
  __m256 wv[9];
  broadcast_taps9(w, wv);
  const __m256 bias_v = _mm256_set1_ps(bias);
  const cr_act8 act = cr_act8_of(fusion);
  const int64_t full = count / 8 * 8, pairs = count / 16 * 16, tail = count - full;
  const __m256i all = _mm256_set1_epi32(-1);
  const __m256i tail_mask = cr_lanes_mask(tail);
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = src + r * ld_src;
    float *out_row = out + r * count;
    const float *res_row = residual != NULL ? residual + r * count : NULL;
    int64_t q = 0;
    for (; q < pairs; q += 16) {
      const __m256 acc0 = depthwise_taps8(wv, bias_v, row + q, offsets, all, 0);
      const __m256 acc1 = depthwise_taps8(wv, bias_v, row + q + 8, offsets, all, 0);
      cr_finish8(acc0, res_row, out_row, q, 8, &act);
      cr_finish8(acc1, res_row, out_row, q + 8, 8, &act);
    }
    for (; q < full; q += 8) {
      cr_finish8(depthwise_taps8(wv, bias_v, row + q, offsets, all, 0), res_row, out_row, q, 8,
                 &act);
    }
    if (tail > 0) {
      cr_finish8(depthwise_taps8(wv, bias_v, row + q, offsets, tail_mask, 1), res_row, out_row,
                 q, tail, &act);
    }
  }
}
#endif

/* Whether depthwise_plane_vector computes planes under isa (the GEMM's). */
static int has_depthwise_vector(cr_isa isa) {
  return CR_DENSE_X86 && (isa == CR_ISA_AVX512 || isa == CR_ISA_AVX2);
}

/* One 3 x 3 depthwise plane by depthwise_plane_avx512 or depthwise_plane_avx2,
 * whichever isa (the GEMM's) has, with its epilogue; 0 when it has neither
 * (nothing was computed). */
static int depthwise_plane_vector(cr_isa isa, const float *src, int64_t ld_src,
                                  const int64_t offsets[9], int64_t rows, int64_t count,
                                  const float *w, float bias, const float *residual,
                                  const cr_fusion *fusion, float *out) {
#if CR_DENSE_X86
  if (isa == CR_ISA_AVX512) {
    depthwise_plane_avx512(src, ld_src, offsets, rows, count, w, bias, residual, fusion, out);
    return 1;
  }
  if (isa == CR_ISA_AVX2) {
    depthwise_plane_avx2(src, ld_src, offsets, rows, count, w, bias, residual, fusion, out);
    return 1;
  }
#endif
  (void)isa, (void)src, (void)ld_src, (void)offsets, (void)rows, (void)count, (void)w;
  (void)bias, (void)residual, (void)fusion, (void)out;
  return 0;
}

/* The case depthwise_3x3 handles: 2-D, 3 x 3, dilation 1, the same stride
 * (1 or 2) along both axes. */
static int is_plain_3x3(const cr_conv_params *p) {
  return p->kernel[0] == 1 && p->kernel[1] == 3 && p->kernel[2] == 3 && p->pad[0] == 0 &&
         p->stride[0] == 1 && p->dilate[1] == 1 && p->dilate[2] == 1 &&
         p->stride[1] == p->stride[2] && (p->stride[1] == 1 || p->stride[1] == 2);
}

/* Stride-2 3 x 3 planes whose rows have at least kS2MinWidth and at most
 * 16 x kS2MaxVectors outputs run depthwise_s2_avx512 under AVX-512, read
 * straight from the plane (1 thread, bench_kernels: 144 x 56 x 56 85 ->
 * 55 us, 96 x 112 x 112 258 -> 191, 192 x 28 x 28 27 -> 22 where the
 * small-plane kernel split phases). Narrower rows fill less than half of
 * its vectors: 576 x 14 x 14 took 39 us against block16's 18. */
enum { kS2MinWidth = 12, kS2MaxVectors = 64 };

static int s2_straight_fits(const cr_conv_task *task) {
  const cr_conv_params *p = task->params;
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2;
  return CR_DENSE_X86 && task->isa == CR_ISA_AVX512 && is_plain_3x3(p) && p->stride[1] == 2 &&
         in[0] == 1 && out[0] == 1 && p->pad[2] <= 16 && out[2] >= kS2MinWidth &&
         out[2] <= 16 * (int64_t)kS2MaxVectors && depthwise_epilogue_applies(task->fusion);
}

/* Stride-2 depthwise planes whose rows, split by parity, take at most this
 * many floats are split whole (in L1); larger ones through a ring of rows. */
enum { kSmallSplit = 8192 };

/* The padded plane's row length and size, and the wide output's size, for
 * is_plain_3x3 convolutions. Rows and columns are padded at least to what
 * the outputs read, the dropped columns of stride 1 included. At stride 2
 * the padded size is that of three rows split into even and odd halves of
 * wp / 2 + 2 values each (a ring; the wide output goes unused). */
/* A 3 x 3 plane's padded extent along spatial axis `axis` (1: rows, 2:
 * columns): the input with its padding, at least what the outputs read. */
static int64_t padded_3x3_extent(const cr_conv_params *p, const int64_t in[3],
                                 const int64_t out[3], int axis) {
  const int64_t padded = in[axis] + 2 * p->pad[axis], read = (out[axis] - 1) * p->stride[1] + 3;
  return padded < read ? read : padded;
}

static void plain_3x3_sizes(const cr_conv_params *p, const int64_t in[3], const int64_t out[3],
                            int64_t *wp, int64_t *padded, int64_t *wide) {
  const int64_t s = p->stride[1];
  *wp = padded_3x3_extent(p, in, out, 2);
  const int64_t hp = padded_3x3_extent(p, in, out, 1);
  *padded = (hp + 1) * *wp; /* one spare row for the dropped columns' reads */
  if (s == 2) {
    /* every row of a small plane, split by parity, else a ring of three */
    const int64_t slot = 2 * (*wp / 2 + 2), rows = 2 * out[1] + 1;
    *padded = rows * slot <= kSmallSplit ? rows * slot : 3 * slot;
  }
  *wide = out[1] * *wp;
}

/* Output rows at least this long are computed one by one in place. */
enum { kDepthwiseRowMin = 32 };

/* The fused residual of output plane (n, o), or NULL. */
static const float *plane_residual(const cr_conv_task *task, int64_t n, int64_t o) {
  if (task->fusion == NULL || task->fusion->residual == NULL) return NULL;
  const int64_t out_plane = task->y_shape[2] * task->y_shape[3] * task->y_shape[4];
  return task->fusion->residual + (n * task->y_shape[1] + o) * out_plane;
}

/* A stride-2 3 x 3 depthwise plane and its scratch: rows of the padded plane
 * are split by column parity into an even half and an odd half of ``half``
 * floats each (see split_row). */
typedef struct split_plane {
  const float *x;
  const int64_t *in, *out;
  int64_t pad_rows, pad_cols, half;
  float *scratch;
  const float *ahead; /* the next plane this thread computes, or NULL */
} split_plane;

/* Output row oh from the split rows r0, r1, r2 (the padded rows 2 oh ..
 * 2 oh + 2), with the epilogue when a vector kernel runs it. */
static void depthwise_split_row(const split_plane *sp, const float *r0, const float *r1,
                                const float *r2, const float *w, float bias, cr_isa isa,
                                const float *residual, const cr_fusion *fusion, float *y_row) {
  const int64_t half = sp->half, count = sp->out[2];
  const float *base = sp->scratch;
  const int64_t a = r0 - base, b = r1 - base, c = r2 - base;
  const int64_t offsets[9] = {a, a + half, a + 1, b, b + half, b + 1, c, c + half, c + 1};
  if (!depthwise_plane_vector(isa, base, 0, offsets, 1, count, w, bias, residual, fusion,
                              y_row)) {
    depthwise_3x3_split(r0, r0 + half, r1, r1 + half, r2, r2 + half, w, bias, count, y_row);
  }
}

/* A small plane: every padded row split at once (padding rows stay zero:
 * the scratch starts zeroed and they are never written), then the rows. */
static void depthwise_split_whole(const split_plane *sp, const float *w, float bias, cr_isa isa,
                                  const float *residual, const cr_fusion *fusion, float *y) {
  const int64_t slot = 2 * sp->half, *in = sp->in, *out = sp->out;
  split_rows(sp->x, in[1], in[2], sp->pad_rows, sp->pad_cols, 2 * out[1] + 1, slot, sp->half,
             sp->scratch);
  /* One pass over every row, output row oh reading from row 2 oh. */
  const int64_t half = sp->half;
  const int64_t offsets[9] = {0,        half,     1,        slot,    slot + half,
                              slot + 1, 2 * slot, 2 * slot + half, 2 * slot + 1};
  if (depthwise_plane_vector(isa, sp->scratch, 2 * slot, offsets, out[1], out[2], w, bias,
                             residual, fusion, y)) {
    return;
  }
  for (int64_t oh = 0; oh < out[1]; ++oh) {
    const float *r0 = sp->scratch + 2 * oh * slot;
    depthwise_split_row(sp, r0, r0 + slot, r0 + 2 * slot, w, bias, isa,
                        residual != NULL ? residual + oh * out[2] : NULL, fusion,
                        y + oh * out[2]);
  }
}

/* A large plane: a ring of three split rows (padded row r in slot r % 3),
 * each output row computed as soon as its rows are split, so the split
 * stays in L1 instead of going through the plane twice. */
static void depthwise_split_ring(const split_plane *sp, const float *w, float bias, cr_isa isa,
                                 const float *residual, const cr_fusion *fusion, float *y) {
  const int64_t slot = 2 * sp->half, *in = sp->in, *out = sp->out;
  int64_t next = 0; /* the next padded row to split */
  const int64_t plane_bytes = in[1] * in[2] * (int64_t)sizeof *sp->x;
  cr_prefetch ahead = cr_prefetch_spread(sp->ahead, plane_bytes, out[1]); /* a part per row */
  for (int64_t oh = 0; oh < out[1]; ++oh) {
    cr_prefetch_part(&ahead);
    for (; next <= 2 * oh + 2; ++next) {
      float *even = sp->scratch + (next % 3) * slot;
      const int64_t ih = next - sp->pad_rows;
      if (ih >= 0 && ih < in[1]) {
        split_row(sp->x + ih * in[2], in[2], sp->pad_cols, even, even + sp->half);
      } else {
        memset(even, 0, (size_t)slot * sizeof *even); /* a padding row */
      }
    }
    depthwise_split_row(sp, sp->scratch + (2 * oh % 3) * slot,
                        sp->scratch + ((2 * oh + 1) % 3) * slot,
                        sp->scratch + ((2 * oh + 2) % 3) * slot, w, bias, isa,
                        residual != NULL ? residual + oh * out[2] : NULL, fusion,
                        y + oh * out[2]);
  }
}

#if CR_DENSE_X86
/* The 8 floats of row from column start (masked: those past in_w read as
 * zeros, none of them touched; all zeros from start >= in_w). */
__attribute__((target("avx2"), always_inline)) static inline __m256 s2_load(const float *row,
                                                                          int64_t start,
                                                                          int64_t in_w,
                                                                          int masked) {
  if (!masked) return _mm256_loadu_ps(row + start);
  if (start >= in_w) return _mm256_setzero_ps();
  return _mm256_maskload_ps(row + start, cr_lanes_mask(in_w - start < 8 ? in_w - start : 8));
}

/* The three input rows from row ih0 of an in_h x in_w plane that a
 * stride-2 3 x 3 output row reads (NULL: a padding row). */
static void s2_input_rows(const float *x, int64_t in_h, int64_t in_w, int64_t ih0,
                          const float *rows[3]) {
  for (int kh = 0; kh < 3; ++kh) {
    const int64_t ih = ih0 + kh;
    rows[kh] = ih >= 0 && ih < in_h ? x + ih * in_w : NULL;
  }
}

/* One output of depthwise_s2_avx2 whose window starts left of the row
 * (column c0 < 0), in scalar code with the vector path's operations: fused
 * multiply-adds in (kh, kw) order from the bias, padding read as zeros,
 * then cr_finish8's residual and activation. */
__attribute__((target("avx2,fma"))) static float depthwise_s2_edge(
    const float *const rows[3], int64_t c0, int64_t in_w, const float *w, float bias,
    const float *residual, const cr_fusion *fusion) {
  float acc = bias;
  for (int kh = 0; kh < 3; ++kh) {
    for (int kw = 0; kw < 3; ++kw) {
      const int64_t col = c0 + kw;
      const float v = rows[kh] != NULL && col >= 0 && col < in_w ? rows[kh][col] : 0.0f;
      acc = fmaf(w[kh * 3 + kw], v, acc);
    }
  }
  if (residual != NULL) acc += *residual;
  const cr_epilogue_act act = fusion != NULL ? fusion->act : CR_EPI_NONE;
  if (act == CR_EPI_RELU) {
    acc = 0.0f > acc ? 0.0f : acc; /* _mm256_max_ps(zero, acc): NaN kept */
  } else if (act == CR_EPI_CLIP) {
    acc = fusion->clip_low > acc ? fusion->clip_low : acc;
    acc = fusion->clip_high < acc ? fusion->clip_high : acc;
  } else if (act == CR_EPI_HARD_SIGMOID || act == CR_EPI_HARD_SWISH) {
    acc = cr_epilogue_hard_sigmoid(act == CR_EPI_HARD_SWISH, fusion->clip_low, fusion->clip_high,
                                   acc);
  }
  return acc;
}

/* The sums (bias, then the 9 taps by fused multiply-adds in (kh, kw)
 * order) of the 8 outputs whose windows start at column c0 of rows (NULL:
 * a padding row, zeros), in the shuffled lane order of depthwise_s2_avx2;
 * masked: the window reaches past the row's end; c0 < 0 only for padding
 * 1's first vector. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 s2_sums(
    const float *const rows[3], int64_t c0, int64_t in_w, int masked, const __m256 wv[9],
    __m256 acc) {
  const __m256 zero = _mm256_setzero_ps();
#pragma GCC unroll 3
  for (int kh = 0; kh < 3; ++kh) {
    __m256 even = zero, odd = zero, next = zero;
    if (rows[kh] != NULL && c0 < 0) {
      /* The window is column -1 (zero) then columns 0 .. 15: the odd taps
       * are the row's even columns, the third taps its odd columns, and
       * the even taps those one output right, after a zero. */
      const __m256 a = s2_load(rows[kh], 0, in_w, in_w < 16);
      const __m256 b = s2_load(rows[kh], 8, in_w, in_w < 16);
      odd = _mm256_shuffle_ps(a, b, 0x88);
      next = _mm256_shuffle_ps(a, b, 0xDD);
      even = _mm256_blend_ps(
          _mm256_permutevar8x32_ps(next, _mm256_setr_epi32(0, 0, 5, 2, 1, 4, 3, 6)), zero, 0x01);
    } else if (rows[kh] != NULL) {
      const __m256 a = s2_load(rows[kh], c0, in_w, masked);
      const __m256 b = s2_load(rows[kh], c0 + 8, in_w, masked);
      const __m256 a2 = s2_load(rows[kh], c0 + 2, in_w, masked);
      const __m256 b2 = s2_load(rows[kh], c0 + 10, in_w, masked);
      even = _mm256_shuffle_ps(a, b, 0x88); /* columns 0 2 8 10 | 4 6 12 14 */
      odd = _mm256_shuffle_ps(a, b, 0xDD);  /* 1 3 9 11 | 5 7 13 15 */
      next = _mm256_shuffle_ps(a2, b2, 0x88);
    }
    acc = _mm256_fmadd_ps(wv[kh * 3], even, acc);
    acc = _mm256_fmadd_ps(wv[kh * 3 + 1], odd, acc);
    acc = _mm256_fmadd_ps(wv[kh * 3 + 2], next, acc);
  }
  /* back from the shuffled order */
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(acc), 0xD8));
}

/* A stride-2 3 x 3 depthwise plane (one depth slice) on AVX2, read straight
 * from the input plane: 8 outputs at a time from 18 columns of each of the
 * three rows, split into even and odd columns in registers (vshufps)
 * rather than through split rows in scratch. The shuffles leave the lanes
 * in the order 0 2 1 3 of their 64-bit pairs; every tap's vector is in that
 * order and the weights and bias are the same in every lane, so the sums
 * are permuted back once, before the epilogue. Whole vectors go two at a
 * time (two chains of nine fused multiply-adds in flight). Windows reaching
 * past the row's end are read with masked loads (zeros, as padding), those
 * starting left of it in shuffles (padding 1) or scalar code (padding 2 or
 * more); rows outside the plane are zeros (padding adds w * 0, as
 * elsewhere). Then the residual and activation. mobilenetv2's stride-2
 * layers: docs/cpu_ref_performance.md, "Depthwise convolution". */
__attribute__((target("avx2,fma"))) static void depthwise_s2_avx2(
    const float *x, const int64_t in[3], const int64_t out[3], int64_t pad_h, int64_t pad_w,
    const float *w, float bias, const float *residual, const cr_fusion *fusion, float *y) {
  __m256 wv[9];
  broadcast_taps9(w, wv);
  const __m256 bias_v = _mm256_set1_ps(bias);
  const cr_act8 act = cr_act8_of(fusion);
  const int64_t in_h = in[1], in_w = in[2], out_h = out[1], out_w = out[2];
  /* Outputs before `first` have windows starting left of the row and take
   * the scalar code (at padding 1, the first vector's shuffles cover it). */
  const int64_t first = pad_w == 1 ? 0 : (pad_w + 1) / 2 < out_w ? (pad_w + 1) / 2 : out_w;
  for (int64_t oh = 0; oh < out_h; ++oh) {
    const float *rows[3];
    s2_input_rows(x, in_h, in_w, 2 * oh - pad_h, rows);
    const float *res_row = residual != NULL ? residual + oh * out_w : NULL;
    float *y_row = y + oh * out_w;
    for (int64_t ow = 0; ow < first; ++ow) {
      y_row[ow] = depthwise_s2_edge(rows, 2 * ow - pad_w, in_w, w, bias,
                                    res_row != NULL ? res_row + ow : NULL, fusion);
    }
    int64_t ow = first;
    for (; ow + 16 <= out_w && 2 * ow - pad_w + 34 <= in_w; ow += 16) {
      const int64_t c0 = 2 * ow - pad_w;
      const __m256 acc0 = s2_sums(rows, c0, in_w, 0, wv, bias_v);
      const __m256 acc1 = s2_sums(rows, c0 + 16, in_w, 0, wv, bias_v);
      cr_finish8(acc0, res_row, y_row, ow, 8, &act);
      cr_finish8(acc1, res_row, y_row, ow + 8, 8, &act);
    }
    for (; ow < out_w; ow += 8) {
      const int64_t count = out_w - ow < 8 ? out_w - ow : 8, c0 = 2 * ow - pad_w;
      cr_finish8(s2_sums(rows, c0, in_w, c0 + 18 > in_w, wv, bias_v), res_row, y_row, ow, count,
                 &act);
    }
  }
}

/* Where lane 0 of a masked load at offset start of x reads: start may be
 * negative, or the range may pass the plane's end, in lanes the mask turns
 * off (they are never read); the address is formed as an integer, since
 * pointer arithmetic may not leave the array. */
static const float *lane_base(const float *x, int64_t start) {
  return (const float *)((uintptr_t)x + (uintptr_t)start * sizeof *x);
}

/* ---- Stride-2 3 x 3 planes on AVX-512, straight from the plane --------- */

/* 16 outputs of a row read 33 columns of each input row from c0 = 2 ow -
 * pad: two vectors of 16 (a, b) and the 33rd value (c). The even columns
 * (tap kw = 0), the odd ones (kw = 1) and the even ones one further (kw =
 * 2) are each one two-source permutation, so no row is split into scratch
 * first (split_rows took 59% of MobileNetV2's 144 x 56 x 56 layer).
 * Loads are masked to the row's columns (padding reads zeros) where a
 * vector crosses an edge. s2_columns holds that per vector of outputs, the
 * same for every row and plane. */
typedef struct s2_columns {
  int64_t c0;     /* the first column read */
  __mmask16 a, b; /* the columns of a and b inside the row */
  int c;          /* column c0 + 32 inside the row */
  __mmask16 out;  /* the outputs of the vector */
} s2_columns;

/* The lanes of a 16-float load at column start that lie in [0, width). */
static __mmask16 lanes_inside(int64_t start, int64_t width) {
  unsigned mask = 0;
  for (int l = 0; l < 16; ++l) {
    if (start + l >= 0 && start + l < width) mask |= 1u << l;
  }
  return (__mmask16)mask;
}

/* Bias, then the taps (kh, kw) in order by fused multiply-adds, padding
 * read as zeros: the operations of depthwise_plane_avx512. rows: the
 * three input rows (NULL: padding). */
__attribute__((target("avx512f"), always_inline)) static inline __m512 s2_vector(
    const float *const rows[3], const s2_columns *col, const __m512 wv[9], __m512 bias) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512i shift = _mm512_set_epi32(16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
  __m512 acc = bias;
#pragma GCC unroll 3
  for (int kh = 0; kh < 3; ++kh) {
    __m512 e = _mm512_setzero_ps(), o = e, n = e;
    if (rows[kh] != NULL) {
      const float *row = rows[kh];
      const __m512 a = col->a == 0xFFFF ? _mm512_loadu_ps(row + col->c0)
                                        : _mm512_maskz_loadu_ps(col->a, lane_base(row, col->c0));
      const __m512 b = col->b == 0xFFFF
                           ? _mm512_loadu_ps(row + col->c0 + 16)
                           : _mm512_maskz_loadu_ps(col->b, lane_base(row, col->c0 + 16));
      const __m512 c = col->c ? _mm512_set1_ps(row[col->c0 + 32]) : _mm512_setzero_ps();
      e = _mm512_permutex2var_ps(a, even, b);
      o = _mm512_permutex2var_ps(a, odd, b);
      n = _mm512_permutex2var_ps(e, shift, c);
    }
    acc = _mm512_fmadd_ps(wv[3 * kh], e, acc);
    acc = _mm512_fmadd_ps(wv[3 * kh + 1], o, acc);
    acc = _mm512_fmadd_ps(wv[3 * kh + 2], n, acc);
  }
  return acc;
}

/* One plane (in: 1 x in_h x in_w); ahead, the next plane the thread reads
 * (or NULL), is fetched into L2 a part per output row, as the ring of
 * split rows did (MobileNetV2's 96 x 112 x 112 planes come from memory). */
__attribute__((target("avx512f"))) static void depthwise_s2_avx512(
    const float *x, const int64_t in[3], const int64_t out[3], int64_t pad_h, int64_t pad_w,
    const float *w, float bias, const float *residual, const cr_fusion *fusion,
    const float *ahead, float *y) {
  const int64_t in_h = in[1], in_w = in[2], out_h = out[1], out_w = out[2];
  const int64_t vectors = (out_w + 15) / 16;
  s2_columns cols[kS2MaxVectors];
  for (int64_t v = 0; v < vectors; ++v) {
    const int64_t c0 = 32 * v - pad_w, count = out_w - 16 * v < 16 ? out_w - 16 * v : 16;
    /* only the columns the vector's outputs read */
    const int64_t end = c0 + 2 * count + 1 < in_w ? c0 + 2 * count + 1 : in_w;
    cols[v] = (s2_columns){c0, lanes_inside(c0, end), lanes_inside(c0 + 16, end),
                           c0 + 32 >= 0 && c0 + 32 < end,
                           (__mmask16)(count == 16 ? 0xFFFFu : (1u << count) - 1u)};
  }
  __m512 wv[9];
  const __m512 bias_v = taps9_avx512(w, bias, wv);
  const cr_epilogue_act act = fusion != NULL ? fusion->act : CR_EPI_NONE;
  const __m512 low = _mm512_set1_ps(fusion != NULL ? fusion->clip_low : 0.0f);
  const __m512 high = _mm512_set1_ps(fusion != NULL ? fusion->clip_high : 0.0f);
  cr_prefetch next = cr_prefetch_spread(ahead, in_h * in_w * (int64_t)sizeof *x, out_h);
  for (int64_t oh = 0; oh < out_h; ++oh) {
    cr_prefetch_part(&next);
    const float *rows[3];
    s2_input_rows(x, in_h, in_w, 2 * oh - pad_h, rows);
    const float *res_row = residual != NULL ? residual + oh * out_w : NULL;
    float *y_row = y + oh * out_w;
    for (int64_t v = 0; v < vectors; ++v) {
      const s2_columns *col = &cols[v];
      __m512 acc = s2_vector(rows, col, wv, bias_v);
      acc = depthwise_epilogue(acc, res_row != NULL ? res_row + 16 * v : NULL, col->out, act,
                               low, high);
      _mm512_mask_storeu_ps(y_row + 16 * v, col->out, acc);
    }
  }
}
#endif

/* The input plane that output plane (n, o) of a direct convolution reads. */
static const float *plane_input(const cr_conv_task *task, int64_t n, int64_t o) {
  const int64_t outputs = task->y_shape[1];
  const int64_t in_plane = task->x_shape[2] * task->x_shape[3] * task->x_shape[4];
  const int64_t group = o / (outputs / task->params->num_group);
  return task->x + (n * task->x_shape[1] + group) * in_plane;
}

/* One output plane (n, o) of a convolution whose groups see one input
 * channel each: bias, then the taps in (kd, kh, kw) order (padding adds
 * w * 0), then the fused residual and activation. scratch: the floats
 * plain_3x3_sizes gives when is_plain_3x3, else NULL. ahead: the input
 * plane the same thread reads next, or NULL; a large stride-2 plane
 * fetches it into L2 as it goes (mobilenetv2's 96 x 112 x 112 -> 56 x 56
 * layer, in the model: 473 -> 305 us). */
static void direct_plane(const cr_conv_task *task, int64_t n, int64_t o, float *scratch,
                         const float *ahead) {
  const cr_conv_params *p = task->params;
  const int64_t outputs = task->y_shape[1];
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2, *k = p->kernel;
  const int64_t out_plane = out[0] * out[1] * out[2];
  const float *x = plane_input(task, n, o);
  const float *w = task->w + o * kernel_size_of(p);
  float *y = task->y + (n * outputs + o) * out_plane;
  const float bias = task->bias != NULL ? task->bias[o] : 0.0f;
  if (scratch != NULL && p->stride[1] == 2) {
    int64_t wp, padded, wide;
    plain_3x3_sizes(p, in, out, &wp, &padded, &wide);
    const int64_t half = wp / 2 + 2, rows = 2 * out[1] + 1;
    const split_plane plane = {x, in, out, p->pad[1], p->pad[2], half, scratch, ahead};
    const float *residual = plane_residual(task, n, o);
    const int whole = rows * 2 * half <= kSmallSplit;
#if CR_DENSE_X86
    /* Large planes on AVX2: straight from the plane, 1.25x faster than the
     * ring of split rows (mobilenetv2's 112 x 112 -> 56 x 56); smaller
     * ones split whole, which measured faster than the straight read. */
    if (!whole && task->isa == CR_ISA_AVX2 && in[0] == 1) {
      depthwise_s2_avx2(x, in, out, p->pad[1], p->pad[2], w, bias, residual, task->fusion, y);
      return;
    }
#endif
    /* The ring's rows take AVX2's vector kernel one row per call, which
     * measured slower than the portable loop (mobilenetv2's 112 x 112 ->
     * 56 x 56 planes: 0.36 against 0.32 ms): only whole planes do (large
     * planes on AVX2 take depthwise_s2_avx2, above). */
    const cr_isa isa = whole || task->isa == CR_ISA_AVX512 ? task->isa : CR_ISA_GENERIC;
    if (whole) {
      depthwise_split_whole(&plane, w, bias, isa, residual, task->fusion, y);
    } else {
      depthwise_split_ring(&plane, w, bias, isa, residual, task->fusion, y);
    }
    if (has_depthwise_vector(isa)) return; /* the vector kernel applied the epilogue */
  } else if (scratch != NULL) {
    int64_t wp, padded, wide;
    plain_3x3_sizes(p, in, out, &wp, &padded, &wide);
    float *xp = scratch, *wide_out = scratch + padded;
    for (int64_t h = 0; h < in[1]; ++h) {
      memcpy(xp + (h + p->pad[1]) * wp + p->pad[2], x + h * in[2], (size_t)in[2] * sizeof *x);
    }
    const int64_t offsets[9] = {0,      1,          2,          wp,         wp + 1,
                                wp + 2, 2 * wp, 2 * wp + 1, 2 * wp + 2};
    const float *residual = plane_residual(task, n, o);
    /* Row by row, except that AVX2's vectors of 8 fill narrow rows poorly:
     * those take the wide grid below (7 x 7 planes: 2.2x faster). */
    if ((task->isa == CR_ISA_AVX512 || out[2] >= kDepthwiseRowMin) &&
        depthwise_plane_vector(task->isa, xp, wp, offsets, out[1], out[2], w, bias, residual,
                               task->fusion, y)) {
      return;
    }
    if (out[2] >= kDepthwiseRowMin) {
      /* Wide rows: each output row straight into y, and its epilogue while
       * it is in L1 (mobilenet's 112 x 112 planes overflow L1). */
      for (int64_t oh = 0; oh < out[1]; ++oh) {
        float *y_row = y + oh * out[2];
        depthwise_3x3(xp + oh * wp, wp, w, bias, out[2], y_row);
        if (task->fusion != NULL) {
          cr_epilogue e = make_epilogue(task->fusion);
          if (task->fusion->residual != NULL) {
            e.residual = task->fusion->residual + (n * outputs + o) * out_plane + oh * out[2];
            e.ld_residual = out[2];
          }
          cr_epilogue_apply(&e, 0, 1, 0, out[2], y_row, out[2]);
        }
      }
      return;
    }
    /* Narrow rows: one loop over the whole wide grid, then compacted. The
     * vector kernel applies the activation on the grid when there is no
     * residual to add first (it is added after compaction, below). */
    const int64_t count = (out[1] - 1) * wp + out[2];
    const int fused = residual == NULL;
    const int vector = depthwise_plane_vector(task->isa, xp, 0, offsets, 1, count, w, bias,
                                              NULL, fused ? task->fusion : NULL, wide_out);
    if (!vector) depthwise_3x3(xp, wp, w, bias, count, wide_out);
    for (int64_t oh = 0; oh < out[1]; ++oh) {
      memcpy(y + oh * out[2], wide_out + oh * wp, (size_t)out[2] * sizeof *y);
    }
    if (vector && fused) return;
  } else {
    for (int64_t od = 0; od < out[0]; ++od) {
      for (int64_t oh = 0; oh < out[1]; ++oh) {
        float *y_row = y + (od * out[1] + oh) * out[2];
        for (int64_t ow = 0; ow < out[2]; ++ow) y_row[ow] = bias;
        for (int64_t kd = 0; kd < k[0]; ++kd) {
          const int64_t id = od * p->stride[0] + kd * p->dilate[0] - p->pad[0];
          if (id < 0 || id >= in[0]) continue;
          for (int64_t kh = 0; kh < k[1]; ++kh) {
            const int64_t ih = oh * p->stride[1] + kh * p->dilate[1] - p->pad[1];
            if (ih < 0 || ih >= in[1]) continue;
            depthwise_row(x + (id * in[1] + ih) * in[2], in[2], w + (kd * k[1] + kh) * k[2],
                          k[2], p->stride[2], p->dilate[2], p->pad[2], y_row, out[2]);
          }
        }
      }
    }
  }
  if (task->fusion != NULL) {
    cr_epilogue e = make_epilogue(task->fusion);
    if (task->fusion->residual != NULL) {
      e.residual = task->fusion->residual + (n * outputs + o) * out_plane;
      e.ld_residual = out_plane;
    }
    cr_epilogue_apply(&e, 0, 1, 0, out_plane, y, out_plane);
  }
}

#if CR_DENSE_X86
/* ---- Small depthwise planes (AVX-512) ------------------------------------ */

/* A depthwise plane whose outputs fill at most this many vectors of 16 is
 * computed over its flattened outputs: vector v holds outputs 16 v .. 16 v
 * + 15 of the plane in row-major order, whatever the width of its rows, so
 * that narrow planes (8 x 8, 7 x 7, 4 x 4) fill whole vectors instead of
 * part of one vector per row, and nothing is copied into a padded plane. */
#ifndef CR_SMALL_PLANE_VECTORS
#define CR_SMALL_PLANE_VECTORS 16
#endif
enum { kSmallPlaneVectors = CR_SMALL_PLANE_VECTORS, kSmallPlaneTaps = 25 };

/* How the taps of one output vector read their 16 inputs each: the offsets
 * in the input plane (index) and the lanes whose input lies inside it
 * (mask; the others read zero, as padding). Where every tap's offsets are
 * consecutive (start[t] + lane), each tap is one masked load; otherwise a
 * gather. */
typedef struct small_vector {
  int consecutive;
  int64_t start[kSmallPlaneTaps];
  __mmask16 mask[kSmallPlaneTaps];
  int32_t index[kSmallPlaneTaps][16];
} small_vector;

/* At stride 2 the taps read the input plane split into its four phases
 * (even and odd rows times even and odd columns), each phase stored with
 * rows as long as the output's: then output (oh, ow) reads element (oh +
 * a, ow + b) of a phase, for each tap its own phase and small (a, b), so
 * every tap's 16 inputs are consecutive again. */
typedef struct small_plan {
  int64_t vectors, taps;
  __mmask16 last_mask;    /* the lanes of the last vector that are outputs */
  int split;              /* the offsets are in the phases, not in the plane */
  int64_t phase_rows;     /* rows of each phase (the phases follow each other) */
  small_vector vector[];  /* the taps in (kh, kw) order */
} small_plan;

/* Whether the convolution's planes take the small-plane kernel: 2-D, at
 * most kSmallPlaneTaps taps and kSmallPlaneVectors output vectors, and an
 * epilogue depthwise_epilogue applies. */
static int small_plane_fits(const cr_conv_task *task) {
  const cr_conv_params *p = task->params;
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2;
  if (task->isa != CR_ISA_AVX512 || in[0] != 1 || out[0] != 1 || p->kernel[0] != 1) return 0;
  if (p->kernel[1] * p->kernel[2] > kSmallPlaneTaps) return 0;
  for (int axis = 1; axis < 3; ++axis) { /* the plan computes offsets in 32 bits */
    if (p->stride[axis] > 4096 || p->dilate[axis] > 4096 || p->pad[axis] > 4096) return 0;
  }
  if (out[1] * out[2] > 16 * (int64_t)kSmallPlaneVectors || in[1] * in[2] > INT32_MAX) return 0;
  /* Rows of more than half a vector fill the row-by-row kernels well
   * enough, which then win at stride 1 (measured: docs/cpu_ref_performance.md). */
  if (out[2] > 8 && !(p->stride[1] == 2 && p->stride[2] == 2)) return 0;
  return depthwise_epilogue_applies(task->fusion);
}

/* The reads of every tap of every output vector (NULL when out of memory,
 * or when split and a tap would read a column the phases do not hold: the
 * caller then makes the plan without split, or takes the general path).
 * Built per call, in vectors of 16 lanes (no division per lane): a tap's
 * lanes are valid where the input row and column they read lie inside the
 * plane. Freed with free(). */
__attribute__((target("avx512f"))) static small_plan *small_plan_make(
    const cr_conv_params *p, const int64_t in[3], const int64_t out[3], int split) {
  const int64_t outputs = out[1] * out[2], vectors = (outputs + 15) / 16;
  const int64_t taps = p->kernel[1] * p->kernel[2];
  small_plan *plan = calloc(1, sizeof *plan + (size_t)vectors * sizeof(small_vector));
  if (plan == NULL) return NULL;
  plan->vectors = vectors;
  plan->taps = taps;
  plan->split = split;
  plan->phase_rows = (in[1] + 1) / 2;
  const int64_t last = outputs - 16 * (vectors - 1);
  plan->last_mask = (__mmask16)(last >= 16 ? 0xFFFFu : (1u << last) - 1u);
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i rows = _mm512_set1_epi32((int)in[1]), cols = _mm512_set1_epi32((int)in[2]);
  const __m512i out_w = _mm512_set1_epi32((int)out[2]), one = _mm512_set1_epi32(1);
  const __m512i phase = _mm512_set1_epi32((int)(plan->phase_rows * out[2]));
  const __m512i stride_h = _mm512_set1_epi32((int)p->stride[1]);
  const __m512i stride_w = _mm512_set1_epi32((int)p->stride[2]);
  int32_t oh[16], ow[16];
  int64_t row = 0, col = 0; /* of output 16 v */
  for (int64_t v = 0; v < vectors; ++v) {
    small_vector *vector = &plan->vector[v];
    vector->consecutive = 1;
    for (int l = 0, r = (int)row, c = (int)col; l < 16; ++l) {
      oh[l] = r, ow[l] = c;
      if (++c == out[2]) c = 0, ++r;
    }
    col += 16, row += col / out[2], col %= out[2];
    const __mmask16 outs = v + 1 == vectors ? plan->last_mask : (__mmask16)0xFFFF;
    const __m512i base_h = _mm512_mullo_epi32(_mm512_loadu_si512(oh), stride_h);
    const __m512i base_w = _mm512_mullo_epi32(_mm512_loadu_si512(ow), stride_w);
    for (int64_t t = 0; t < taps; ++t) {
      const int64_t kh = t / p->kernel[2], kw = t % p->kernel[2];
      const __m512i ih = _mm512_add_epi32(
          base_h, _mm512_set1_epi32((int)(kh * p->dilate[1] - p->pad[1])));
      const __m512i iw = _mm512_add_epi32(
          base_w, _mm512_set1_epi32((int)(kw * p->dilate[2] - p->pad[2])));
      const __mmask16 valid =
          outs & _mm512_cmpge_epi32_mask(ih, _mm512_setzero_si512()) &
          _mm512_cmplt_epi32_mask(ih, rows) & _mm512_cmpge_epi32_mask(iw, _mm512_setzero_si512()) &
          _mm512_cmplt_epi32_mask(iw, cols);
      __m512i offset;
      if (split) {
        /* element (ih / 2, iw / 2) of phase (ih % 2, iw % 2), which holds
         * the columns below the output's width only */
        const __m512i half_w = _mm512_srai_epi32(iw, 1);
        if (_mm512_mask_cmpge_epi32_mask(valid, half_w, out_w)) {
          free(plan);
          return NULL;
        }
        const __m512i which = _mm512_add_epi32(
            _mm512_slli_epi32(_mm512_and_si512(ih, one), 1), _mm512_and_si512(iw, one));
        offset = _mm512_add_epi32(
            _mm512_add_epi32(_mm512_mullo_epi32(which, phase),
                             _mm512_mullo_epi32(_mm512_srai_epi32(ih, 1), out_w)),
            half_w);
      } else {
        offset = _mm512_add_epi32(_mm512_mullo_epi32(ih, cols), iw);
      }
      offset = _mm512_maskz_mov_epi32(valid, offset);
      _mm512_storeu_si512(vector->index[t], offset);
      vector->mask[t] = valid;
      if (valid != 0) {
        /* consecutive: offset - lane is the same in every valid lane */
        const __m512i start = _mm512_sub_epi32(offset, lane);
        const int first = __builtin_ctz(valid);
        int32_t starts[16];
        _mm512_storeu_si512(starts, start);
        vector->start[t] = starts[first];
        if (_mm512_mask_cmpneq_epi32_mask(valid, start, _mm512_set1_epi32(starts[first]))) {
          vector->consecutive = 0;
        }
      }
    }
  }
  return plan;
}

/* One vector of outputs: bias, then the taps in order with fused
 * multiply-adds (taps: 9 for the unrolled 3 x 3 case). */
__attribute__((target("avx512f"), always_inline)) static inline __m512 small_vector_taps(
    const small_vector *vector, const __m512 *wv, int64_t taps, __m512 bias, const float *x) {
  __m512 acc = bias;
  if (vector->consecutive) {
#pragma GCC unroll 9
    for (int64_t t = 0; t < taps; ++t) {
      acc = _mm512_fmadd_ps(
          wv[t], _mm512_maskz_loadu_ps(vector->mask[t], lane_base(x, vector->start[t])), acc);
    }
  } else {
    const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 9
    for (int64_t t = 0; t < taps; ++t) {
      const __m512i index = _mm512_loadu_si512(vector->index[t]);
      acc = _mm512_fmadd_ps(wv[t], _mm512_mask_i32gather_ps(zero, vector->mask[t], index, x, 4),
                            acc);
    }
  }
  return acc;
}

/* The four phases of a plane (see small_plan) into phases: phase (r % 2,
 * c % 2) holds x[r][c] at (r / 2) * out_w + c / 2, for c / 2 < out_w
 * (what the taps read; the rest of the phases is never read). Rows of at
 * most 32 values: two loads, and one permutation per parity. */
__attribute__((target("avx512f"))) static void split_phases(const float *x, int64_t in_h,
                                                            int64_t in_w, int64_t out_w,
                                                            int64_t phase_rows, float *phases) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const int64_t low = in_w < 16 ? in_w : 16, high = in_w - low;
  const __mmask16 low_mask = (__mmask16)((1u << low) - 1u);
  const __mmask16 high_mask = (__mmask16)((1u << high) - 1u);
  const __mmask16 out_mask = (__mmask16)((1u << out_w) - 1u);
  const int64_t phase = phase_rows * out_w;
  for (int64_t r = 0; r < in_h; ++r) {
    const float *row = x + r * in_w;
    const __m512 a = _mm512_maskz_loadu_ps(low_mask, row);
    const __m512 b = _mm512_maskz_loadu_ps(high_mask, row + low);
    float *target = phases + (r % 2) * 2 * phase + r / 2 * out_w;
    _mm512_mask_storeu_ps(target, out_mask, _mm512_permutex2var_ps(a, even, b));
    _mm512_mask_storeu_ps(target + phase, out_mask, _mm512_permutex2var_ps(a, odd, b));
  }
}

/* One plane: out = bias, then the taps in order with fused multiply-adds,
 * then the residual and activation: the operations (and so the values,
 * bit for bit) of depthwise_plane_avx512, zeros read for padding. */
__attribute__((target("avx512f"))) static void small_plane_avx512(
    const small_plan *plan, const float *x, const float *w, float bias, const float *residual,
    const cr_fusion *fusion, float *y) {
  __m512 wv[kSmallPlaneTaps];
  const int64_t taps = plan->taps;
  for (int64_t t = 0; t < taps; ++t) wv[t] = _mm512_set1_ps(w[t]);
  const cr_epilogue_act act = fusion != NULL ? fusion->act : CR_EPI_NONE;
  const __m512 low = _mm512_set1_ps(fusion != NULL ? fusion->clip_low : 0.0f);
  const __m512 high = _mm512_set1_ps(fusion != NULL ? fusion->clip_high : 0.0f);
  const __m512 bias_v = _mm512_set1_ps(bias);
  for (int64_t v = 0; v < plan->vectors; ++v) {
    const small_vector *vector = &plan->vector[v];
    __m512 acc = taps == 9 ? small_vector_taps(vector, wv, 9, bias_v, x)
                           : small_vector_taps(vector, wv, taps, bias_v, x);
    const __mmask16 mask = v + 1 == plan->vectors ? plan->last_mask : (__mmask16)0xFFFF;
    acc = depthwise_epilogue(acc, residual != NULL ? residual + 16 * v : NULL, mask, act, low,
                             high);
    _mm512_mask_storeu_ps(y + 16 * v, mask, acc);
  }
}

/* ---- Stride-2 planes 16 or 8 wide, in registers -------------------------
 *
 * The downsampling depthwise layers of CIFAR-sized networks (3 x 3, stride
 * 2, padding 1; 16 x 16 -> 8 x 8 and 8 x 8 -> 4 x 4 planes) spent most of
 * their time in split_phases (masked stores the taps then reload). Their
 * rows fit whole vectors, so each tap of an output vector is one two-source
 * permutation of input rows held in registers (vpermt2ps, zero where the
 * tap reads padding) and one fused multiply-add: bias, then the taps in
 * (kh, kw) order, zeros for padding, then depthwise_epilogue, the
 * operations of small_plane_avx512, so the same values bit for bit. */

/* Whether the planes take s2_plane_w16 / s2_plane_w8 (a 2-D depthwise
 * convolution that small_plane_fits accepted). */
static int s2_rows_in_registers(const cr_conv_params *p, const int64_t in[3],
                                const int64_t out[3]) {
  if (p->kernel[1] != 3 || p->kernel[2] != 3 || p->stride[1] != 2 || p->stride[2] != 2 ||
      p->dilate[1] != 1 || p->dilate[2] != 1 || p->pad[1] != 1 || p->pad[2] != 1 ||
      out[1] * 2 != in[1] || out[2] * 2 != in[2]) {
    return 0;
  }
  return (in[2] == 16 && in[1] % 4 == 0) || (in[2] == 8 && in[1] == 8);
}

/* 16-wide rows: output vector v holds output rows 2 v and 2 v + 1 (8
 * each), which tap (kh, kw) reads from input rows 4 v + kh - 1 and 4 v + kh
 * + 1, columns 2 ow + kw - 1: one permutation of those two rows. */
__attribute__((target("avx512f"))) static void s2_plane_w16(
    const float *x, int64_t in_h, const __m512 wv[9], __m512 bias, const float *residual,
    cr_epilogue_act act, __m512 low, __m512 high, float *y) {
  const __m512i idx[3] = {
      _mm512_set_epi32(29, 27, 25, 23, 21, 19, 17, 0, 13, 11, 9, 7, 5, 3, 1, 0),
      _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0),
      _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1)};
  const __mmask16 cols[3] = {0xFEFE, 0xFFFF, 0xFFFF}; /* column -1 is padding */
  const int64_t vectors = in_h / 4;
  for (int64_t v = 0; v < vectors; ++v) {
    __m512 acc = bias;
#pragma GCC unroll 3
    for (int kh = 0; kh < 3; ++kh) {
      const int64_t row = 4 * v + kh - 1;
      const __m512 a = row >= 0 ? _mm512_loadu_ps(x + row * 16) : _mm512_setzero_ps();
      const __m512 b = _mm512_loadu_ps(x + (row + 2) * 16);
#pragma GCC unroll 3
      for (int kw = 0; kw < 3; ++kw) {
        acc = _mm512_fmadd_ps(wv[kh * 3 + kw],
                              _mm512_maskz_permutex2var_ps(cols[kw], a, idx[kw], b), acc);
      }
    }
    acc = depthwise_epilogue(acc, residual != NULL ? residual + 16 * v : NULL, 0xFFFF, act,
                             low, high);
    _mm512_storeu_ps(y + 16 * v, acc);
  }
}

/* An 8 x 8 plane, 4 x 4 outputs in one vector (lane 4 oh + ow): the even
 * rows (0, 2, 4, 6) and the odd rows (1, 3, 5, 7) gathered into two pairs
 * of registers, then each tap is one permutation of the even rows (kh = 1:
 * row 2 oh) or the odd ones (kh = 0: row 2 oh - 1, padding for oh = 0;
 * kh = 2: row 2 oh + 1). */
__attribute__((target("avx512f"))) static void s2_plane_w8(
    const float *x, const __m512 wv[9], __m512 bias, const float *residual, cr_epilogue_act act,
    __m512 low, __m512 high, float *y) {
  const __m512i low_rows = _mm512_set_epi32(23, 22, 21, 20, 19, 18, 17, 16, 7, 6, 5, 4, 3, 2,
                                            1, 0);
  const __m512i high_rows = _mm512_set_epi32(31, 30, 29, 28, 27, 26, 25, 24, 15, 14, 13, 12,
                                             11, 10, 9, 8);
  const __m512 r01 = _mm512_loadu_ps(x), r23 = _mm512_loadu_ps(x + 16);
  const __m512 r45 = _mm512_loadu_ps(x + 32), r67 = _mm512_loadu_ps(x + 48);
  const __m512 even0 = _mm512_permutex2var_ps(r01, low_rows, r23);  /* rows 0, 2 */
  const __m512 even1 = _mm512_permutex2var_ps(r45, low_rows, r67);  /* rows 4, 6 */
  const __m512 odd0 = _mm512_permutex2var_ps(r01, high_rows, r23);  /* rows 1, 3 */
  const __m512 odd1 = _mm512_permutex2var_ps(r45, high_rows, r67);  /* rows 5, 7 */
  /* lane 4 oh + ow reads element 8 oh' + 2 ow + kw - 1 of the 32 floats of
   * the even or odd rows, oh' = oh - 1 for kh = 0 and oh otherwise */
  const __m512i idx[2][3] = {
      {_mm512_set_epi32(21, 19, 17, 0, 13, 11, 9, 0, 5, 3, 1, 0, 0, 0, 0, 0),
       _mm512_set_epi32(22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0, 0, 0, 0, 0),
       _mm512_set_epi32(23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1, 0, 0, 0, 0)},
      {_mm512_set_epi32(29, 27, 25, 0, 21, 19, 17, 0, 13, 11, 9, 0, 5, 3, 1, 0),
       _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0),
       _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1)}};
  /* column -1 (ow = 0, kw = 0) and, for kh = 0, row -1 (oh = 0) are padding */
  const __mmask16 cols[3] = {0xEEEE, 0xFFFF, 0xFFFF};
  __m512 acc = bias;
#pragma GCC unroll 3
  for (int kw = 0; kw < 3; ++kw) {
    acc = _mm512_fmadd_ps(
        wv[kw], _mm512_maskz_permutex2var_ps(cols[kw] & 0xFFF0, odd0, idx[0][kw], odd1), acc);
  }
#pragma GCC unroll 3
  for (int kw = 0; kw < 3; ++kw) {
    acc = _mm512_fmadd_ps(wv[3 + kw],
                          _mm512_maskz_permutex2var_ps(cols[kw], even0, idx[1][kw], even1), acc);
  }
#pragma GCC unroll 3
  for (int kw = 0; kw < 3; ++kw) {
    acc = _mm512_fmadd_ps(wv[6 + kw],
                          _mm512_maskz_permutex2var_ps(cols[kw], odd0, idx[1][kw], odd1), acc);
  }
  acc = depthwise_epilogue(acc, residual, 0xFFFF, act, low, high);
  _mm512_storeu_ps(y, acc);
}

/* Planes [begin, end) through s2_plane_w16 / s2_plane_w8. */
__attribute__((target("avx512f"))) static void s2_planes(const cr_conv_task *task,
                                                         int64_t begin, int64_t end) {
  const int64_t channels = task->x_shape[1], outputs = task->y_shape[1];
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2;
  const int64_t in_plane = in[1] * in[2], out_plane = out[1] * out[2];
  const cr_conv_params *p = task->params;
  const cr_fusion *fusion = task->fusion;
  const cr_epilogue_act act = fusion != NULL ? fusion->act : CR_EPI_NONE;
  const __m512 low = _mm512_set1_ps(fusion != NULL ? fusion->clip_low : 0.0f);
  const __m512 high = _mm512_set1_ps(fusion != NULL ? fusion->clip_high : 0.0f);
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t n = plane / outputs, o = plane % outputs;
    const int64_t group = o / (outputs / p->num_group);
    const float *x = task->x + (n * channels + group) * in_plane;
    const float *w = task->w + o * 9;
    __m512 wv[9];
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
    const __m512 bias = _mm512_set1_ps(task->bias != NULL ? task->bias[o] : 0.0f);
    const float *residual = plane_residual(task, n, o);
    float *y = task->y + plane * out_plane;
    if (in[2] == 16) {
      s2_plane_w16(x, in[1], wv, bias, residual, act, low, high, y);
    } else {
      s2_plane_w8(x, wv, bias, residual, act, low, high, y);
    }
  }
}

/* Planes [begin, end) through small_plane_avx512; 0 when the plan cannot
 * be made (out of memory: the caller computes them the general way). At
 * stride 2 with rows of at most 32 values and outputs of at most 16 the
 * planes are split into phases first; otherwise the taps that do not
 * read consecutive inputs gather them. */
static int small_planes(const cr_conv_task *task, int64_t begin, int64_t end) {
  const cr_conv_params *p = task->params;
  const int64_t channels = task->x_shape[1], outputs = task->y_shape[1];
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2;
  const int64_t in_plane = in[1] * in[2], out_plane = out[1] * out[2];
  if (s2_rows_in_registers(p, in, out)) {
    s2_planes(task, begin, end);
    return 1;
  }
  const int split_phases_fit = p->stride[1] == 2 && p->stride[2] == 2 && in[2] <= 32 &&
                               out[2] <= 16;
  small_plan *plan = split_phases_fit ? small_plan_make(p, in, out, 1) : NULL;
  if (plan == NULL) plan = small_plan_make(p, in, out, 0);
  if (plan == NULL) return 0;
  float *phases = NULL;
  if (plan->split) {
    phases = malloc((size_t)(4 * plan->phase_rows * out[2]) * sizeof *phases);
    if (phases == NULL) {
      free(plan);
      return 0;
    }
  }
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t n = plane / outputs, o = plane % outputs;
    const int64_t group = o / (outputs / p->num_group);
    const float *x = task->x + (n * channels + group) * in_plane;
    if (phases != NULL) {
      split_phases(x, in[1], in[2], out[2], plan->phase_rows, phases);
      x = phases;
    }
    small_plane_avx512(plan, x, task->w + o * kernel_size_of(p),
                       task->bias != NULL ? task->bias[o] : 0.0f, plane_residual(task, n, o),
                       task->fusion, task->y + plane * out_plane);
  }
  free(phases);
  free(plan);
  return 1;
}
#endif

#if CR_DENSE_X86
/* ---- Channel-blocked 3 x 3 depthwise planes (AVX2) ---------------------- */

/* Eight planes at a time with their channels interleaved, position (h, w)
 * of the eight being one vector (the NCHW8c layout onnxruntime's kernels
 * use): an output position of eight channels is then 9 loads and 9 fused
 * multiply-adds whatever the planes' width and stride, where the row
 * kernels fill AVX2's vectors of 8 poorly on narrow rows (7, 14, 28) and
 * stride 2 must split rows by parity. The planes go in and out through
 * 8 x 8 transposes, in L1. Each output is bias, then the taps in (kh, kw)
 * order with fused multiply-adds (padding read as zeros), then residual
 * and activation: the operations of depthwise_plane_avx2, so the same
 * values bit for bit. */

/* Where the blocked path runs on AVX2: stride-2 planes of at most
 * kBlockedMaxS2 input positions, stride-1 planes at most kBlockedMaxS1Width
 * outputs wide. Elsewhere the row kernels measured faster, the transposes
 * costing more than the lanes they fill (docs/cpu_ref_performance.md). */
#ifndef CR_BLOCKED_MAX_S2
#define CR_BLOCKED_MAX_S2 (32 * 32)
#endif
#ifndef CR_BLOCKED_MAX_S1_WIDTH
#define CR_BLOCKED_MAX_S1_WIDTH 8
#endif
enum { kBlockedMaxS2 = CR_BLOCKED_MAX_S2, kBlockedMaxS1Width = CR_BLOCKED_MAX_S1_WIDTH };

/* The block's padded input (hp x wp positions of 8 floats, zero padding)
 * and output (out_h x out_w of 8). */
static void blocked_sizes(const cr_conv_params *p, const int64_t in[3], const int64_t out[3],
                          int64_t *hp, int64_t *wp, int64_t *floats) {
  *hp = padded_3x3_extent(p, in, out, 1);
  *wp = padded_3x3_extent(p, in, out, 2);
  *floats = 8 * (*hp * *wp + out[1] * out[2]);
}

/* Whether the task's planes take blocked_depthwise: AVX2, a plain 3 x 3
 * (stride 1 or 2) with one input channel per output plane, small planes. */
static int blocked_fits(const cr_conv_task *task) {
  const cr_conv_params *p = task->params;
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2;
  if (task->isa != CR_ISA_AVX2 || !is_plain_3x3(p) || in[0] != 1 ||
      task->y_shape[1] != task->x_shape[1] || task->y_shape[1] < 8) {
    return 0;
  }
  return p->stride[1] == 2 ? in[1] * in[2] <= kBlockedMaxS2 : out[2] <= kBlockedMaxS1Width;
}

/* Output planes o0 .. o0 + 7 of image n (their input channels o0 ..
 * o0 + 7). buffer: blocked_sizes' floats, zero where the padding is (it
 * starts zeroed, and only the interior is ever written). */
__attribute__((target("avx2,fma"))) static void blocked_depthwise(const cr_conv_task *task,
                                                                  int64_t n, int64_t o0,
                                                                  float *buffer) {
  const cr_conv_params *p = task->params;
  const int64_t channels = task->x_shape[1];
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2;
  const int64_t in_plane = in[1] * in[2], out_plane = out[1] * out[2], s = p->stride[1];
  int64_t hp, wp, floats;
  blocked_sizes(p, in, out, &hp, &wp, &floats);
  float *padded = buffer, *result = buffer + 8 * hp * wp;
  const float *x = task->x + (n * channels + o0) * in_plane;

  /* In: eight positions of the eight planes per transpose. */
  int64_t h = 0, w = 0; /* of position q */
  for (int64_t q = 0; q < in_plane; q += 8) {
    const int64_t count = in_plane - q < 8 ? in_plane - q : 8;
    __m256 r[8];
    cr_load_rows8_transposed(x + q, in_plane, count, r);
    for (int64_t j = 0; j < count; ++j) {
      _mm256_storeu_ps(padded + 8 * ((h + p->pad[1]) * wp + w + p->pad[2]), r[j]);
      if (++w == in[2]) w = 0, ++h;
    }
  }

  /* The taps of the eight channels, and their biases. */
  __m256 wv[9];
  const float *weights = task->w + o0 * 9;
  for (int t = 0; t < 9; ++t) {
    wv[t] = _mm256_setr_ps(weights[t], weights[9 + t], weights[18 + t], weights[27 + t],
                           weights[36 + t], weights[45 + t], weights[54 + t], weights[63 + t]);
  }
  const __m256 bias = task->bias != NULL ? _mm256_loadu_ps(task->bias + o0) : _mm256_setzero_ps();
  const int64_t offsets[9] = {0,          8,          16,         8 * wp,         8 * wp + 8,
                              8 * wp + 16, 16 * wp, 16 * wp + 8, 16 * wp + 16};
  const __m256i all = _mm256_set1_epi32(-1);
  float *dst = result;
  for (int64_t oh = 0; oh < out[1]; ++oh) {
    const float *row = padded + 8 * oh * s * wp;
    for (int64_t ow = 0; ow < out[2]; ++ow, dst += 8) {
      const __m256 acc = depthwise_taps8(wv, bias, row + 8 * ow * s, offsets, all, 0);
      _mm256_storeu_ps(dst, acc);
    }
  }

  /* Out: back to eight planes, with the epilogue. */
  const cr_act8 act = cr_act8_of(task->fusion);
  const float *residual = plane_residual(task, n, o0);
  float *y = task->y + (n * task->y_shape[1] + o0) * out_plane;
  for (int64_t q = 0; q < out_plane; q += 8) {
    const int64_t count = out_plane - q < 8 ? out_plane - q : 8;
    __m256 r[8];
    cr_load_vectors8_transposed(result + 8 * q, 8, count, r);
    for (int c = 0; c < 8; ++c) cr_finish8(r[c], residual, y, c * out_plane + q, count, &act);
  }
}
#endif

/* ---- Depthwise K x K (5 x 5, 7 x 7) with vectors ------------------------- */

/* The case depthwise_kxk handles: 2-D, a square kernel of 5 or 7 taps a side
 * (3 x 3 has its own kernels above), dilation 1, the same stride (1 or 2)
 * along both axes, one input channel per output plane, under AVX-512 or
 * AVX2 (the GEMM's isa). EfficientNet's and MobileNetV3's 5 x 5 layers took
 * the general loop, a branch per tap: 120 x 28 x 28 at stride 1 1.8 ms
 * where this path takes about 0.1 ms. */
/* kKxkSlack: floats of scratch past the padded plane, which the last
 * row's whole-vector loads of kxk_rows_avx512 may read. */
enum { kKxkMaxTaps = 49, kKxkSlack = 16 };

static int kxk_fits(const cr_conv_task *task) {
  const cr_conv_params *p = task->params;
  const int64_t *in = task->x_shape + 2;
  if (!has_depthwise_vector(task->isa) || in[0] != 1 || p->kernel[0] != 1 || p->pad[0] != 0 ||
      p->stride[0] != 1 || p->kernel[1] != p->kernel[2] ||
      (p->kernel[1] != 5 && p->kernel[1] != 7) || p->dilate[1] != 1 || p->dilate[2] != 1 ||
      p->stride[1] != p->stride[2] || (p->stride[1] != 1 && p->stride[1] != 2)) {
    return 0;
  }
  return depthwise_epilogue_applies(task->fusion);
}

/* The scratch of depthwise_kxk: the padded plane (hp rows of wp columns), at
 * stride 2 each padded row split by column parity into an even and an odd
 * half of `half` floats (row length slot = 2 half). Rows and columns are
 * padded at least to what the outputs read. */
typedef struct kxk_layout {
  int64_t hp, wp, half, slot;
} kxk_layout;

static kxk_layout kxk_layout_of(const cr_conv_params *p, const int64_t in[3],
                                const int64_t out[3]) {
  kxk_layout l;
  const int64_t k = p->kernel[1], s = p->stride[1];
  const int64_t read_h = (out[1] - 1) * s + k, read_w = (out[2] - 1) * s + k;
  l.hp = in[1] + 2 * p->pad[1] > read_h ? in[1] + 2 * p->pad[1] : read_h;
  l.wp = in[2] + 2 * p->pad[2] > read_w ? in[2] + 2 * p->pad[2] : read_w;
  l.half = (l.wp + 1) / 2;
  l.slot = s == 2 ? 2 * l.half : l.wp;
  return l;
}

#if CR_DENSE_X86
/* Vectors of outputs that kxk_rows_avx512 computes side by side: eight
 * chains of FMAs, as many as two FMA units with a latency of four cycles
 * keep busy (two chains left the 672 x 14 x 14 5 x 5 layer latency bound:
 * 25 dependent FMAs per row vector). */
enum { kKxkChains = 8 };

/* Rows of a depthwise plane with `taps` taps in AVX-512 vectors of 16:
 * output (r, q) is bias + the taps t in order of w[t] * src[r * ld_src +
 * offsets[t] + q] by fused multiply-adds, then the epilogue of
 * depthwise_epilogue. The plane's vectors (row by row, each row's last one
 * masked) go kKxkChains at a time, each its own chain of FMAs; the slots
 * of a last group with fewer have an empty mask (they store nothing). The
 * loads are whole vectors (eight masks would not fit the seven mask
 * registers, and reloading them per tap doubled the loads): a row's last
 * vector reads past the row, up to kKxkSlack floats past the plane, whose
 * lanes are computed and never stored. */
__attribute__((target("avx512f"))) static void kxk_rows_avx512(
    const float *src, int64_t ld_src, const int64_t *offsets, int taps, int64_t rows,
    int64_t count, const float *w, float bias, const float *residual, const cr_fusion *fusion,
    float *out) {
  const __m512 bias_v = _mm512_set1_ps(bias);
  const cr_epilogue_act act = fusion != NULL ? fusion->act : CR_EPI_NONE;
  const __m512 low = _mm512_set1_ps(fusion != NULL ? fusion->clip_low : 0.0f);
  const __m512 high = _mm512_set1_ps(fusion != NULL ? fusion->clip_high : 0.0f);
  const int64_t per_row = (count + 15) / 16;
  const int64_t vectors = rows * per_row;
  int64_t r = 0, q = 0; /* the next vector's row and first column */
  for (int64_t first = 0; first < vectors; first += kKxkChains) {
    const float *in[kKxkChains];
    int64_t at[kKxkChains]; /* the vector's first output in the plane */
    __mmask16 mask[kKxkChains];
    __m512 acc[kKxkChains];
    /* The group's vectors in order, counted without dividing (a division
     * per vector cost more than its 25 FMAs). */
#pragma GCC unroll 8
    for (int v = 0; v < kKxkChains; ++v) {
      const int live = first + v < vectors;
      const int64_t left = live ? count - q : 0;
      mask[v] = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
      in[v] = live ? src + r * ld_src + q : src;
      at[v] = live ? r * count + q : 0;
      acc[v] = bias_v;
      if (live) {
        q += 16;
        if (q >= count) q = 0, ++r;
      }
    }
    for (int t = 0; t < taps; ++t) {
      const __m512 wt = _mm512_set1_ps(w[t]);
      const int64_t offset = offsets[t];
#pragma GCC unroll 8
      for (int v = 0; v < kKxkChains; ++v) {
        acc[v] = _mm512_fmadd_ps(wt, _mm512_loadu_ps(in[v] + offset), acc[v]);
      }
    }
#pragma GCC unroll 8
    for (int v = 0; v < kKxkChains; ++v) {
      const float *res = residual != NULL ? residual + at[v] : NULL;
      _mm512_mask_storeu_ps(out + at[v], mask[v],
                            depthwise_epilogue(acc[v], res, mask[v], act, low, high));
    }
  }
}

/* kxk_rows_avx512 in AVX2 vectors of 8: the same operations in the same
 * order, so the same values bit for bit; tails through vmaskmovps. */
__attribute__((target("avx2,fma"))) static void kxk_rows_avx2(
    const float *src, int64_t ld_src, const int64_t *offsets, int taps, int64_t rows,
    int64_t count, const float *w, float bias, const float *residual, const cr_fusion *fusion,
    float *out) {
  const __m256 bias_v = _mm256_set1_ps(bias);
  const cr_act8 act = cr_act8_of(fusion);
  for (int64_t r = 0; r < rows; r += 2) {
    const int two = r + 1 < rows;
    const float *row0 = src + r * ld_src, *row1 = two ? row0 + ld_src : row0;
    for (int64_t q = 0; q < count; q += 8) {
      const int64_t n = count - q < 8 ? count - q : 8;
      const __m256i mask = cr_lanes_mask(n);
      __m256 acc0 = bias_v, acc1 = bias_v;
      for (int t = 0; t < taps; ++t) {
        const __m256 wt = _mm256_set1_ps(w[t]);
        const float *a0 = row0 + offsets[t] + q, *a1 = row1 + offsets[t] + q;
        acc0 = _mm256_fmadd_ps(wt, n < 8 ? _mm256_maskload_ps(a0, mask) : _mm256_loadu_ps(a0),
                               acc0);
        acc1 = _mm256_fmadd_ps(wt, n < 8 ? _mm256_maskload_ps(a1, mask) : _mm256_loadu_ps(a1),
                               acc1);
      }
      cr_finish8(acc0, residual != NULL ? residual + r * count : NULL, out + r * count, q, n,
                 &act);
      if (two) {
        cr_finish8(acc1, residual != NULL ? residual + (r + 1) * count : NULL,
                   out + (r + 1) * count, q, n, &act);
      }
    }
  }
}
#endif

/* Output plane (n, o) of a kxk_fits convolution: the plane copied into the
 * padded scratch (its padding zero: only the interior is ever written),
 * split by column parity at stride 2, then the rows with their epilogue. */
static void depthwise_kxk(const cr_conv_task *task, int64_t n, int64_t o, float *scratch) {
  const cr_conv_params *p = task->params;
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2;
  const kxk_layout l = kxk_layout_of(p, in, out);
  const int64_t k = p->kernel[1], s = p->stride[1];
  const float *x = plane_input(task, n, o);
  if (s == 2) {
    split_rows(x, in[1], in[2], p->pad[1], p->pad[2], l.hp, l.slot, l.half, scratch);
  } else {
    for (int64_t h = 0; h < in[1]; ++h) {
      memcpy(scratch + (h + p->pad[1]) * l.wp + p->pad[2], x + h * in[2],
             (size_t)in[2] * sizeof *x);
    }
  }
  int64_t offsets[kKxkMaxTaps];
  for (int64_t kh = 0; kh < k; ++kh) {
    for (int64_t kw = 0; kw < k; ++kw) {
      offsets[kh * k + kw] = s == 2 ? kh * l.slot + (kw % 2) * l.half + kw / 2 : kh * l.wp + kw;
    }
  }
  const int64_t out_plane = out[1] * out[2];
  const float *w = task->w + o * k * k;
  const float bias = task->bias != NULL ? task->bias[o] : 0.0f;
  float *y = task->y + (n * task->y_shape[1] + o) * out_plane;
  const float *residual = plane_residual(task, n, o);
#if CR_DENSE_X86
  if (task->isa == CR_ISA_AVX512) {
    kxk_rows_avx512(scratch, s * l.slot, offsets, (int)(k * k), out[1], out[2], w, bias,
                    residual, task->fusion, y);
  } else {
    kxk_rows_avx2(scratch, s * l.slot, offsets, (int)(k * k), out[1], out[2], w, bias,
                  residual, task->fusion, y);
  }
#else
  (void)offsets, (void)w, (void)bias, (void)y, (void)residual;
#endif
}

#if CR_DENSE_X86
/* ---- Depthwise planes sixteen at a time (AVX-512) ------------------------ */

/* Sixteen planes of one image with their channels interleaved, position
 * (h, w) of the sixteen being one vector (the NCHW16c layout of
 * onnxruntime's depthwise kernels): an output position of sixteen channels
 * is then one fused multiply-add per tap whatever the plane's width and
 * stride, where the row kernels (kxk_rows_avx512, small_plane_avx512) fill
 * vectors of 16 along a row poorly on narrow planes (7, 14, 28 wide) and
 * copy or split each plane first. The planes go in through 16 x 16
 * transposes into a zero-padded block and come out the same way, each
 * output being bias, then the taps in (kh, kw) order with fused
 * multiply-adds (padding read as zeros), then depthwise_epilogue: the
 * operations of the row kernels, so the same values bit for bit. */

/* Where the block path runs: padded planes of at most kBlock16MaxPadded
 * positions with 5 x 5 and 7 x 7 kernels (MobileNetV3's 72 x 56 x 56 at
 * stride 2 included), and for 3 x 3 kernels at most kBlock16Max3x3S1 at
 * stride 1 (7 x 7 planes) and kBlock16Max3x3S2 at stride 2 (14 x 14):
 * elsewhere the row kernels measured as fast or faster, the transposes
 * costing what the filled lanes save (docs/cpu_ref_performance.md,
 * "Depthwise convolution"). */
#ifndef CR_BLOCK16_MAX_PADDED
#define CR_BLOCK16_MAX_PADDED (64 * 64)
#endif
#ifndef CR_BLOCK16_MAX_3X3_S1
#define CR_BLOCK16_MAX_3X3_S1 (12 * 12)
#endif
#ifndef CR_BLOCK16_MAX_3X3_S2
#define CR_BLOCK16_MAX_3X3_S2 (16 * 16)
#endif
enum {
  kBlock16MaxPadded = CR_BLOCK16_MAX_PADDED,
  kBlock16Max3x3S1 = CR_BLOCK16_MAX_3X3_S1,
  kBlock16Max3x3S2 = CR_BLOCK16_MAX_3X3_S2,
  kBlock16MaxTaps = 49,
  kBlock16Chunk = 8 /* outputs of a row computed side by side: eight chains of FMAs */
};

/* The padded block of one image's sixteen planes: hp x wp positions, as
 * many as the input with its padding and at least what the outputs read. */
typedef struct block16_layout {
  int64_t hp, wp;
} block16_layout;

static block16_layout block16_layout_of(const cr_conv_params *p, const int64_t in[3],
                                        const int64_t out[3]) {
  block16_layout l;
  const int64_t read_h = (out[1] - 1) * p->stride[1] + p->kernel[1];
  const int64_t read_w = (out[2] - 1) * p->stride[2] + p->kernel[2];
  l.hp = in[1] + 2 * p->pad[1] > read_h ? in[1] + 2 * p->pad[1] : read_h;
  l.wp = in[2] + 2 * p->pad[2] > read_w ? in[2] + 2 * p->pad[2] : read_w;
  return l;
}

/* Whether the task's planes take block16_planes: AVX-512, 2-D, a square
 * kernel of 3, 5 or 7 taps a side, dilation 1, the same stride (1 or 2)
 * along both axes, one input channel per output plane (as many outputs as
 * channels, at least 16), a padded plane of the sizes above, an epilogue
 * depthwise_epilogue applies. */
static int block16_fits(const cr_conv_task *task) {
  const cr_conv_params *p = task->params;
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2;
  const int64_t channels = task->x_shape[1];
  if (task->isa != CR_ISA_AVX512 || in[0] != 1 || out[0] != 1 || p->kernel[0] != 1 ||
      p->pad[0] != 0 || p->stride[0] != 1 || p->dilate[1] != 1 || p->dilate[2] != 1 ||
      p->stride[1] != p->stride[2] || (p->stride[1] != 1 && p->stride[1] != 2) ||
      p->kernel[1] != p->kernel[2] ||
      (p->kernel[1] != 3 && p->kernel[1] != 5 && p->kernel[1] != 7) || channels < 16 ||
      task->y_shape[1] != channels || p->num_group != channels || p->pad[1] > 7 ||
      p->pad[2] > 7) {
    return 0;
  }
  const block16_layout l = block16_layout_of(p, in, out);
  const int64_t limit = p->kernel[1] > 3    ? kBlock16MaxPadded
                        : p->stride[1] == 1 ? kBlock16Max3x3S1
                                            : kBlock16Max3x3S2;
  if (l.hp * l.wp > limit) return 0;
  return depthwise_epilogue_applies(task->fusion);
}

/* r[c] = column c of the 16 x 16 matrix whose rows are r[0 .. 15]. */
__attribute__((target("avx512f"), always_inline)) static inline void transpose16x16(
    __m512 r[16]) {
  __m512 t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  /* u[4 g + e]: in 128-bit block k, rows 4 g .. 4 g + 3 of column 4 k + e */
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[e], u[4 + e], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 w0 = _mm512_shuffle_f32x4(u[e], u[4 + e], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512 v1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], _MM_SHUFFLE(3, 1, 3, 1));
    r[e] = _mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(2, 0, 2, 0));
    r[8 + e] = _mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(3, 1, 3, 1));
    r[4 + e] = _mm512_shuffle_f32x4(w0, w1, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + e] = _mm512_shuffle_f32x4(w0, w1, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

/* r[4 k + e] = column 4 k + e of the 16 x 16 matrix whose row i is the 16
 * floats at src + i * ld: each register is assembled from four rows'
 * 128-bit quarters by loads (vinsertf32x4 from memory, off the shuffle
 * port), so only the 4 x 4 transposes inside the 128-bit blocks shuffle:
 * 32 shuffles where transpose16x16 takes 64. */
__attribute__((target("avx512f"), always_inline)) static inline void load_transposed16x16(
    const float *src, int64_t ld, __m512 r[16]) {
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    __m512 x[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      /* block b: row 4 b + i, columns 4 k .. 4 k + 3 */
      const float *at = src + i * ld + 4 * k;
      __m512 v = _mm512_castps128_ps512(_mm_loadu_ps(at));
      v = _mm512_insertf32x4(v, _mm_loadu_ps(at + 4 * ld), 1);
      v = _mm512_insertf32x4(v, _mm_loadu_ps(at + 8 * ld), 2);
      x[i] = _mm512_insertf32x4(v, _mm_loadu_ps(at + 12 * ld), 3);
    }
    const __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(x[0], x[1]));
    const __m512d t1 = _mm512_castps_pd(_mm512_unpackhi_ps(x[0], x[1]));
    const __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(x[2], x[3]));
    const __m512d t3 = _mm512_castps_pd(_mm512_unpackhi_ps(x[2], x[3]));
    r[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
}

/* n outputs of one row (n and the stride s constants once inlined), output
 * j reading the block from at + 16 j s: bias, then tap t's vector of 16
 * weights times the position at + offsets[t], by fused multiply-adds in
 * tap order. Each load is a constant displacement from one pointer per tap
 * (an indexed address would split each FMA in two uops). */
__attribute__((target("avx512f"), always_inline)) static inline void block16_chunk(
    const float *at, const float *wt, const int64_t *offsets, int taps, __m512 bias, float *dst,
    int n, int s) {
  __m512 acc[kBlock16Chunk];
#pragma GCC unroll 8
  for (int j = 0; j < n; ++j) acc[j] = bias;
  for (int t = 0; t < taps; ++t) {
    const __m512 w = _mm512_load_ps(wt + 16 * t);
    const float *x = at + offsets[t];
#pragma GCC unroll 8
    for (int j = 0; j < n; ++j) {
      acc[j] = _mm512_fmadd_ps(w, _mm512_load_ps(x + 16 * j * s), acc[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < n; ++j) _mm512_store_ps(dst + 16 * j, acc[j]);
}

/* block16_chunk with constants n (1 to kBlock16Chunk) and s (1 or 2). */
__attribute__((target("avx512f"))) static void block16_chunk_of(const float *at, const float *wt,
                                                                const int64_t *offsets, int taps,
                                                                __m512 bias, float *dst, int n,
                                                                int s) {
#define CR_BLOCK16_CASE(N)                                   \
  case N:                                                    \
    if (s == 1) {                                            \
      block16_chunk(at, wt, offsets, taps, bias, dst, N, 1); \
    } else {                                                 \
      block16_chunk(at, wt, offsets, taps, bias, dst, N, 2); \
    }                                                        \
    break;
  switch (n) {
    CR_BLOCK16_CASE(8)
    CR_BLOCK16_CASE(7)
    CR_BLOCK16_CASE(6)
    CR_BLOCK16_CASE(5)
    CR_BLOCK16_CASE(4)
    CR_BLOCK16_CASE(3)
    CR_BLOCK16_CASE(2)
    default:
      block16_chunk(at, wt, offsets, taps, bias, dst, 1, 1);
      break;
  }
#undef CR_BLOCK16_CASE
}

/* Output planes o0 .. o0 + 15 of image n (their input channels o0 ..
 * o0 + 15). padded: the layout's positions of 16 floats, zero where the
 * padding is (it starts zeroed, and only the interior is ever written);
 * result: the output positions of 16 floats. */
__attribute__((target("avx512f"))) static void block16_planes(const cr_conv_task *task,
                                                               int64_t n, int64_t o0,
                                                               const block16_layout *l,
                                                               float *padded, float *result) {
  const cr_conv_params *p = task->params;
  const int64_t channels = task->x_shape[1];
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2;
  const int64_t in_plane = in[1] * in[2], out_plane = out[1] * out[2], s = p->stride[1];
  const int64_t kh = p->kernel[1], kw = p->kernel[2];
  const int taps = (int)(kh * kw);
  const float *x = task->x + (n * channels + o0) * in_plane;

  /* In: sixteen positions of the sixteen planes per transpose. */
  int64_t h = 0, w = 0; /* of position q */
  for (int64_t q = 0; q < in_plane; q += 16) {
    const int64_t count = in_plane - q < 16 ? in_plane - q : 16;
    const __mmask16 mask = (__mmask16)(count == 16 ? 0xFFFFu : (1u << count) - 1u);
    __m512 r[16];
    if (count == 16) {
      load_transposed16x16(x + q, in_plane, r);
    } else { /* the last positions: no read past the last plane */
#pragma GCC unroll 16
      for (int c = 0; c < 16; ++c) r[c] = _mm512_maskz_loadu_ps(mask, x + c * in_plane + q);
      transpose16x16(r);
    }
    for (int64_t j = 0; j < count; ++j) {
      _mm512_storeu_ps(padded + 16 * ((h + p->pad[1]) * l->wp + w + p->pad[2]), r[j]);
      if (++w == in[2]) w = 0, ++h;
    }
  }

  /* The taps of the sixteen channels, and their biases. */
  float wt[kBlock16MaxTaps * 16] __attribute__((aligned(64)));
  const float *weights = task->w + o0 * taps;
  for (int t = 0; t < taps; ++t) {
    for (int c = 0; c < 16; ++c) wt[16 * t + c] = weights[c * taps + t];
  }
  const __m512 bias =
      task->bias != NULL ? _mm512_loadu_ps(task->bias + o0) : _mm512_setzero_ps();
  int64_t offsets[kBlock16MaxTaps];
  for (int64_t i = 0; i < kh; ++i) {
    for (int64_t j = 0; j < kw; ++j) offsets[i * kw + j] = 16 * (i * l->wp + j);
  }
  const int64_t step = 16 * s;
  for (int64_t oh = 0; oh < out[1]; ++oh) {
    const float *row = padded + 16 * oh * s * l->wp;
    float *dst = result + 16 * oh * out[2];
    for (int64_t ow = 0; ow < out[2];) {
      const int64_t left = out[2] - ow;
      /* chunks of 8, a last one of 5 to 7 split in two of at least 3 */
      const int64_t size = left <= kBlock16Chunk       ? left
                           : left < 2 * kBlock16Chunk ? (left + 1) / 2
                                                      : kBlock16Chunk;
      block16_chunk_of(row + ow * step, wt, offsets, taps, bias, dst + 16 * ow, (int)size,
                       (int)s);
      ow += size;
    }
  }

  /* Out: back to sixteen planes, with the epilogue. */
  const cr_fusion *fusion = task->fusion;
  const cr_epilogue_act act = fusion != NULL ? fusion->act : CR_EPI_NONE;
  const __m512 low = _mm512_set1_ps(fusion != NULL ? fusion->clip_low : 0.0f);
  const __m512 high = _mm512_set1_ps(fusion != NULL ? fusion->clip_high : 0.0f);
  const float *residual = plane_residual(task, n, o0);
  float *y = task->y + (n * task->y_shape[1] + o0) * out_plane;
  for (int64_t q = 0; q < out_plane; q += 16) {
    const int64_t count = out_plane - q < 16 ? out_plane - q : 16;
    const __mmask16 mask = (__mmask16)(count == 16 ? 0xFFFFu : (1u << count) - 1u);
    __m512 r[16];
    /* past the last output: the spare positions, whose lanes are not stored */
    load_transposed16x16(result + 16 * q, 16, r);
#pragma GCC unroll 16
    for (int c = 0; c < 16; ++c) {
      const float *res = residual != NULL ? residual + c * out_plane + q : NULL;
      _mm512_mask_storeu_ps(y + c * out_plane + q, mask,
                            depthwise_epilogue(r[c], res, mask, act, low, high));
    }
  }
}

/* The floats of block16_planes' padded block and result, and 16 spare
 * positions after the result, which the last transpose out reads: a whole
 * number of cache lines. */
static size_t block16_floats(const block16_layout *l, const int64_t out[3]) {
  return (size_t)(16 * (l->hp * l->wp + out[1] * out[2] + 16));
}
#endif

/* ---- One image's 3 x 3 depthwise layer shared out by rows ---------------- */

/* On several threads one image's plain 3 x 3 stride-1 depthwise layer is
 * shared out by output rows, every plane's rows [r0, r1) to share s,
 * rather than by planes, where its planes have at least as many column
 * panels of the GEMM as its channels have row panels: the 1 x 1 layers
 * around it (as many channels, the same plane) are then shared out by
 * columns, that is by positions, so each thread reads the rows its core
 * just wrote and writes those the next 1 x 1 layer reads on the same core;
 * only the row above and below a share's come from the other core.
 * Shared out by planes, each thread read half of each of its planes from
 * the other core, which reads another core's modified lines at about 17
 * GB/s against 90 from its own L2 (one thread's CPU time, input written
 * by the other core, benchmarks/c/bench_kernels.c BENCH_REMOTE_INPUT: the
 * depthwise 384 x 14 x 14 34 -> 45 us, a 1 x 1 384 x 14 x 14 -> 64 45 ->
 * 63 us). MobileNetV2, batch 1, 2 threads,
 * least step times: 32 x 112 x 112 97 -> 78 us and the 1 x 1 after it 69
 * -> 62, 144 x 56 x 56 93 -> 100 and the 1 x 1 after it 95 -> 71. Smaller
 * planes stay shared by planes: there the 1 x 1 layers share out their
 * outputs, and rows measured 20 -> 35 us (384 x 14 x 14). Each row is
 * computed by direct_plane's kernel: the same values bit for bit. */
typedef struct cr_depthwise_rows {
  const cr_conv_task *task;
  int64_t shares;
  int failed;
} cr_depthwise_rows;

/* Whether direct_plane computes the task's planes with
 * depthwise_plane_avx512 over a plane padded by one on each side at
 * stride 1 (same-size output) and it has at least two rows per share. */
static int depthwise_rows_fit(const cr_conv_task *task, int64_t shares) {
  const cr_conv_params *p = task->params;
  const int64_t *in = task->x_shape + 2, *out = task->y_shape + 2;
  return CR_DENSE_X86 && task->isa == CR_ISA_AVX512 && task->x_shape[0] == 1 &&
         is_plain_3x3(p) && p->stride[1] == 1 && p->pad[1] == 1 && p->pad[2] == 1 &&
         in[0] == 1 && out[0] == 1 && in[1] == out[1] && in[2] == out[2] &&
         task->x_shape[1] == task->y_shape[1] && p->num_group == task->y_shape[1] &&
#if CR_DENSE_X86
         !small_plane_fits(task) &&
#endif
         !kxk_fits(task) && out[1] >= 2 * shares &&
         cr_gemm_panels(1, out[1] * out[2]) >= cr_gemm_panels(task->y_shape[1], 1);
}

/* Share s's rows of planes [planes * q / kRowShareParts, planes * (q + 1) /
 * kRowShareParts) are unit s * kRowShareParts + q: a thread's range of units
 * is its share's rows, and a late thread's last parts can still be taken
 * over by the other. */
enum { kRowShareParts = 4 };

static void depthwise_row_shares(void *context, int64_t begin, int64_t end) {
  cr_depthwise_rows *t = context;
  const cr_conv_task *task = t->task;
  const int64_t planes = task->y_shape[1], h = task->y_shape[3], w = task->y_shape[4];
  const int64_t wp = w + 2, plane = h * w;
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t share = unit / kRowShareParts, part = unit % kRowShareParts;
    const int64_t r0 = h * share / t->shares, r1 = h * (share + 1) / t->shares;
    const int64_t o0 = planes * part / kRowShareParts;
    const int64_t o1 = planes * (part + 1) / kRowShareParts;
    /* Input rows r0 - 1 .. r1 at rows 0 .. r1 - r0 + 1, one column of zeros
     * each side; a row outside the plane stays zero, and a spare row. */
    const int64_t rows = r1 - r0 + 3;
    float *xp = cr_scratch(CR_SCRATCH_CONV_PLANES, (size_t)(rows * wp) * sizeof *xp);
    if (xp == NULL) {
      __atomic_store_n(&t->failed, 1, __ATOMIC_RELAXED);
      continue;
    }
    memset(xp, 0, (size_t)(rows * wp) * sizeof *xp);
    const int64_t first = r0 > 0 ? r0 - 1 : 0, last = r1 < h ? r1 + 1 : h;
    const int64_t offsets[9] = {0,      1,          2,          wp,         wp + 1,
                                wp + 2, 2 * wp, 2 * wp + 1, 2 * wp + 2};
    for (int64_t o = o0; o < o1; ++o) {
      const float *x = plane_input(task, 0, o);
      for (int64_t ih = first; ih < last; ++ih) {
        memcpy(xp + (ih - r0 + 1) * wp + 1, x + ih * w, (size_t)w * sizeof *x);
      }
      const float *residual = plane_residual(task, 0, o);
      depthwise_plane_vector(task->isa, xp, wp, offsets, r1 - r0, w, task->w + o * 9,
                             task->bias != NULL ? task->bias[o] : 0.0f,
                             residual != NULL ? residual + r0 * w : NULL, task->fusion,
                             task->y + o * plane + r0 * w);
    }
  }
}

#if CR_DENSE_X86
/* Planes [begin, end) of an s2_straight_fits convolution, each fetching
 * the next one ahead. */
static void s2_straight_planes(const cr_conv_task *task, int64_t begin, int64_t end) {
  const cr_conv_params *p = task->params;
  const int64_t outputs = task->y_shape[1], *in = task->x_shape + 2, *out = task->y_shape + 2;
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t n = plane / outputs, o = plane % outputs;
    const float *ahead =
        plane + 1 < end ? plane_input(task, (plane + 1) / outputs, (plane + 1) % outputs) : NULL;
    depthwise_s2_avx512(plane_input(task, n, o), in, out, p->pad[1], p->pad[2], task->w + o * 9,
                        task->bias != NULL ? task->bias[o] : 0.0f, plane_residual(task, n, o),
                        task->fusion, ahead, task->y + plane * out[1] * out[2]);
  }
}
#endif

/* Planes [begin, end) one by one (or through small_planes). */
static void direct_planes(void *context, int64_t begin, int64_t end) {
  const cr_conv_task *task = context;
  const int64_t outputs = task->y_shape[1];
  float *scratch = NULL;
#if CR_DENSE_X86
  if (s2_straight_fits(task)) {
    s2_straight_planes(task, begin, end);
    return;
  }
  if (small_plane_fits(task) && small_planes(task, begin, end)) return;
#endif
  if (kxk_fits(task)) {
    const kxk_layout l = kxk_layout_of(task->params, task->x_shape + 2, task->y_shape + 2);
    scratch = calloc((size_t)(l.hp * l.slot + kKxkSlack), sizeof *scratch);
    if (scratch != NULL) {
      for (int64_t plane = begin; plane < end; ++plane) {
        depthwise_kxk(task, plane / outputs, plane % outputs, scratch);
      }
      free(scratch);
      return;
    }
  }
  if (is_plain_3x3(task->params)) {
    int64_t wp, padded, wide;
    plain_3x3_sizes(task->params, task->x_shape + 2, task->y_shape + 2, &wp, &padded, &wide);
    /* Without scratch the general loop computes the same values. */
    /* Zeroed once: every plane writes the same interior positions, so the
     * padding stays zero from plane to plane. */
    scratch = calloc((size_t)(padded + wide), sizeof *scratch);
  }
  float *blocked = NULL;
#if CR_DENSE_X86
  if (blocked_fits(task)) {
    int64_t hp, wp, floats;
    blocked_sizes(task->params, task->x_shape + 2, task->y_shape + 2, &hp, &wp, &floats);
    blocked = calloc((size_t)floats, sizeof *blocked); /* NULL: plane by plane */
  }
#endif
  for (int64_t plane = begin; plane < end;) {
    const int64_t n = plane / outputs, o = plane % outputs;
#if CR_DENSE_X86
    if (blocked != NULL && o % 8 == 0 && o + 8 <= outputs && plane + 8 <= end) {
      blocked_depthwise(task, n, o, blocked);
      plane += 8;
      continue;
    }
#endif
    const float *ahead =
        plane + 1 < end ? plane_input(task, (plane + 1) / outputs, (plane + 1) % outputs) : NULL;
    direct_plane(task, n, o, scratch, ahead);
    ++plane;
  }
  free(blocked);
  free(scratch);
}

#if CR_DENSE_X86
/* Zeroes what block16_planes reads and never writes: the padding around
 * the input's positions in the block, and the spare positions after the
 * result (the thread's scratch holds the previous layer's values, or NaNs
 * in sanitized builds). */
static void block16_zero_border(const cr_conv_params *p, const int64_t in[3],
                                const block16_layout *l, int64_t out_plane, float *buffer) {
  const size_t position = 16 * sizeof(float);
  const int64_t top = p->pad[1], left = p->pad[2];
  const int64_t bottom = top + in[1], right = left + in[2];
  memset(buffer, 0, (size_t)(top * l->wp) * position);
  for (int64_t h = top; h < bottom; ++h) {
    float *row = buffer + 16 * h * l->wp;
    memset(row, 0, (size_t)left * position);
    memset(row + 16 * right, 0, (size_t)(l->wp - right) * position);
  }
  memset(buffer + 16 * bottom * l->wp, 0, (size_t)((l->hp - bottom) * l->wp) * position);
  memset(buffer + 16 * (l->hp * l->wp + out_plane), 0, 16 * position);
}

/* Units [begin, end) of a block16_fits convolution: unit u is group u %
 * groups of image u / groups, its planes 16 g .. 16 g + 15 through
 * block16_planes, or the last group's fewer planes (channels not a
 * multiple of 16) through the row kernels. Threads share out whole groups,
 * so the blocks never straddle two shares. */
static void block16_units(void *context, int64_t begin, int64_t end) {
  const cr_conv_task *task = context;
  const int64_t outputs = task->y_shape[1], groups = (outputs + 15) / 16;
  const int64_t *out = task->y_shape + 2;
  const block16_layout l = block16_layout_of(task->params, task->x_shape + 2, out);
  float *buffer = NULL;
  for (int64_t unit = begin; unit < end; ++unit) {
    const int64_t n = unit / groups, o0 = unit % groups * 16;
    if (o0 + 16 > outputs) {
      direct_planes(context, n * outputs + o0, (n + 1) * outputs);
      continue;
    }
    if (buffer == NULL) {
      buffer = cr_scratch(CR_SCRATCH_CONV_PLANES, block16_floats(&l, out) * sizeof(float));
      if (buffer == NULL) { /* out of memory: the planes one by one */
        direct_planes(context, n * outputs + o0, n * outputs + o0 + 16);
        continue;
      }
      block16_zero_border(task->params, task->x_shape + 2, &l, out[1] * out[2], buffer);
    }
    block16_planes(task, n, o0, &l, buffer, buffer + 16 * l.hp * l.wp);
  }
}
#endif

/* Images [begin, end) of a convolution, one thread each (or all on the
 * calling thread): together when they lie one after the other in y, one
 * by one when y_stride apart. */
typedef struct cr_conv_batch_task {
  const cr_conv_params *params;
  const int64_t *x_shape;
  const float *x;
  const float *w;
  const float *packed_w;
  cr_isa packed_isa;
  const float *bias;
  const cr_fusion *fusion;
  const int64_t *y_shape;
  float *y;
  int64_t y_stride;
  int inner_threads; /* for each call on its images */
  int failed;
} cr_conv_batch_task;

static void conv_images(void *context, int64_t begin, int64_t end) {
  cr_conv_batch_task *t = context;
  const int64_t in_image = t->x_shape[1] * t->x_shape[2] * t->x_shape[3] * t->x_shape[4];
  const int64_t out_image = t->y_shape[1] * t->y_shape[2] * t->y_shape[3] * t->y_shape[4];
  const int64_t together = t->y_stride == out_image ? end - begin : 1;
  int64_t x_shape[5], y_shape[5];
  memcpy(x_shape, t->x_shape, sizeof x_shape);
  memcpy(y_shape, t->y_shape, sizeof y_shape);
  x_shape[0] = y_shape[0] = together;
  for (int64_t n = begin; n < end; n += together) {
    cr_fusion fusion;
    if (t->fusion != NULL) {
      fusion = *t->fusion;
      if (fusion.residual != NULL) fusion.residual += n * out_image;
    }
    if (cr_convolution_fused(t->params, x_shape, t->x + n * in_image, t->w, t->packed_w,
                             t->packed_isa, t->bias, t->fusion != NULL ? &fusion : NULL,
                             y_shape, t->y + n * t->y_stride, t->inner_threads) != 0) {
      __atomic_store_n(&t->failed, 1, __ATOMIC_RELAXED);
    }
  }
}

int cr_convolution_into(const cr_conv_params *params, const int64_t x_shape[5], const float *x,
                        const float *w, const float *packed_w, cr_isa packed_isa,
                        const float *bias, const cr_fusion *fusion, const int64_t y_shape[5],
                        float *y, int64_t y_image_stride, int num_threads) {
  const int64_t batch = x_shape[0];
  const int64_t out_image = y_shape[1] * y_shape[2] * y_shape[3] * y_shape[4];
  if (batch <= 1 || y_image_stride == 0 || y_image_stride == out_image) {
    return cr_convolution_fused(params, x_shape, x, w, packed_w, packed_isa, bias, fusion,
                                y_shape, y, num_threads);
  }
  /* Image by image, shared out as cr_convolution_fused shares a batch. */
  const double work = (double)out_image * (double)batch * (double)x_shape[1] /
                      (double)params->num_group * (double)kernel_size_of(params);
  const int threads = cr_threads_for_images(num_threads, batch, work);
  cr_conv_batch_task task = {params, x_shape, x, w, packed_w, packed_isa, bias, fusion,
                             y_shape, y, y_image_stride, threads > 1 ? 1 : num_threads, 0};
  cr_parallel_for(threads, batch, conv_images, &task);
  return __atomic_load_n(&task.failed, __ATOMIC_RELAXED) ? -1 : 0;
}

/* The fusion's residual (rows x outputs, as y) and activation on y, rows
 * of `outputs` values whose bias is added already (fusion NULL: none). */
static void apply_fusion(const cr_fusion *fusion, int64_t rows, int64_t outputs, float *y) {
  if (fusion == NULL) return;
  cr_epilogue e = make_epilogue(fusion);
  e.residual = fusion->residual;
  e.ld_residual = outputs;
  cr_epilogue_apply(&e, 0, rows, 0, outputs, y, outputs);
}

/* y = W . x + bias for one image (W: outputs x channels, in place), then
 * the residual and activation: one read of the filters at the speed of
 * memory rather than a GEMM tile per 6 filters with 15 of its 16 columns
 * wasted (mobilenetv2's 1280 -> 1000 classifier at batch 1: 384 us where
 * onnxruntime took 189; docs/cpu_ref_performance.md, "GEMM"). */
static int matrix_vector(int64_t outputs, int64_t channels, const float *x, const float *w,
                         const float *bias, const cr_fusion *fusion, float *y, int num_threads) {
  cr_gemv(outputs, channels, w, x, bias, y, num_threads);
  apply_fusion(fusion, 1, outputs, y);
  return 0;
}

/* A 1 x 1 convolution of 1 x 1 images (a classifier written as a
 * convolution, as in mobilenetv2): one product for the whole batch, C
 * (outputs x batch) = W . X^T, so that the filters are read once rather
 * than once per image (mobilenetv2's 1280 -> 1000 at batch 8: 5 MB read
 * once instead of 8 times). C is then transposed into y, and the residual
 * and activation applied there (the bias is added in the product's
 * epilogue, first, as in the fused order). */
static int convolve_single_positions(int64_t batch, int64_t channels, int64_t outputs,
                                     const float *x, const float *w, const float *packed_w,
                                     cr_isa packed_isa, const float *bias,
                                     const cr_fusion *fusion, float *y, int num_threads) {
  float *c = cr_scratch(CR_SCRATCH_CONV_OUTPUT, (size_t)(outputs * batch) * sizeof *c);
  if (c == NULL) return -1;
  const cr_gemm_operand a = {w, channels, 1, NULL, NULL, packed_w, packed_isa, NULL};
  const cr_gemm_operand b = {x, 1, channels, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
  const cr_epilogue bias_only = {.row_bias = bias};
  if (cr_gemm(outputs, batch, channels, &a, &b, c, batch, &bias_only, num_threads) != 0) {
    return -1;
  }
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t o = 0; o < outputs; ++o) y[n * outputs + o] = c[o * batch + n];
  }
  apply_fusion(fusion, batch, outputs, y);
  return 0;
}

int cr_convolution_fused(const cr_conv_params *params, const int64_t x_shape[5], const float *x,
                         const float *w, const float *packed_w, cr_isa packed_isa,
                         const float *bias, const cr_fusion *fusion, const int64_t y_shape[5],
                         float *y, int num_threads) {
  const int64_t batch = x_shape[0], channels = x_shape[1], outputs = y_shape[1];
  const int64_t groups = params->num_group;
  const int64_t group_channels = channels / groups, group_outputs = outputs / groups;
  const int64_t ks = kernel_size_of(params);
  const int64_t in_plane = x_shape[2] * x_shape[3] * x_shape[4];
  const int64_t out_plane = y_shape[2] * y_shape[3] * y_shape[4];
  if (batch == 0 || outputs == 0 || out_plane == 0) return 0;

  if (cr_conv_is_direct(params, group_channels)) {
    cr_conv_task task = {params, x_shape, x, w, bias, y_shape, y, fusion,
                         cr_gemm_isa()};
    const int64_t planes = batch * outputs;
    int threads = cr_threads_for_images(num_threads, batch, (double)(planes * out_plane * ks));
    /* Little work on a large input (mobilenetv2's 576 x 14 x 14 -> 7 x 7):
     * shared by the bytes read, so that each thread reads the planes its
     * core's step just wrote (cr_threads_for_bytes). */
    const int by_bytes =
        cr_threads_for_bytes(num_threads, (double)(batch * channels * in_plane) * sizeof(float));
    if (by_bytes > threads) threads = by_bytes;
    if (threads > 1 && depthwise_rows_fit(&task, threads)) {
      cr_depthwise_rows rows = {&task, threads, 0};
      cr_parallel_for(threads, threads * kRowShareParts, depthwise_row_shares, &rows);
      return __atomic_load_n(&rows.failed, __ATOMIC_RELAXED) ? -1 : 0;
    }
#if CR_DENSE_X86
    /* On several threads, at least four groups per thread: MobileNetV3's
     * 72 x 56 x 56 layer (five groups) took 43-48 us by planes on two
     * threads, 51 by groups. */
    const int64_t units = batch * ((outputs + 15) / 16);
    if (block16_fits(&task) && (threads == 1 || units >= 4 * (int64_t)threads)) {
      cr_parallel_for(threads, units, block16_units, &task);
      return 0;
    }
#endif
    cr_parallel_for(threads, planes, direct_planes, &task);
    return 0;
  }

  if (groups == 1 && ks == 1 && in_plane == 1 && out_plane == 1) {
    return batch == 1 ? matrix_vector(outputs, channels, x, w, bias, fusion, y, num_threads)
                      : convolve_single_positions(batch, channels, outputs, x, w, packed_w,
                                                  packed_isa, bias, fusion, y, num_threads);
  }
  /* A batch of small planes: one product (convolve_batch_columns), its
   * panels shared between the threads. */
  if (batch > 1 && groups == 1 && ks == 1 && in_plane == out_plane &&
      out_plane <= kBatchColumnsMaxPlane && is_pointwise(params)) {
    int status = 0;
    if (batch_column_groups(batch, channels, outputs, out_plane, x, w, packed_w, packed_isa, bias,
                            fusion, y, num_threads, &status) == 0) {
      return status;
    }
    return convolve_batch_columns(batch, channels, outputs, out_plane, x, w, packed_w,
                                  packed_isa, bias, fusion, y, num_threads);
  }
  /* Filters packed for the blocked kernels (where those apply, cr_conv_pack
   * packs them for nothing else), large enough that the kernels run the
   * batch's images together, on their own threads. */
  const int blocked = packed_w != NULL && packed_isa == cr_gemm_isa() &&
                      cr_conv_blocked_applies(params, outputs, group_channels, packed_isa);
  if (blocked && batch > 1 && x_shape[2] == 1 &&
      cr_conv_blocked_batches(outputs, channels, out_plane)) {
    return cr_conv_blocked(params, x_shape, x, packed_w, packed_isa, bias, fusion, y_shape, y,
                           num_threads);
  }
  /* A batch is shared out image by image: one synchronisation per layer
   * rather than one per image's product. */
  const double work = (double)(batch * outputs * out_plane * group_channels * ks);
  const int threads = batch > 1 ? cr_threads_for_images(num_threads, batch, work) : 1;
  if (threads > 1) {
    cr_conv_batch_task task = {params, x_shape, x, w, packed_w, packed_isa, bias,
                               fusion, y_shape, y, outputs * out_plane, 1, 0};
    cr_parallel_for(threads, batch, conv_images, &task);
    return __atomic_load_n(&task.failed, __ATOMIC_RELAXED) ? -1 : 0;
  }

  if (blocked) {
    return cr_conv_blocked(params, x_shape, x, packed_w, packed_isa, bias, fusion, y_shape, y,
                           num_threads);
  }
  if (ks == 1 && x_shape[2] == 1 && params->stride[0] == 1 && params->pad[0] == 0 &&
      params->pad[1] == 0 && params->pad[2] == 0 &&
      (params->stride[1] > 1 || params->stride[2] > 1)) {
    return convolve_strided_pointwise(params, x_shape, x, w, packed_w, packed_isa, bias, fusion,
                                      y_shape, y, num_threads);
  }
  if (is_wide_case(params, ks, x_shape)) {
    return convolve_wide(params, x_shape, x, w, packed_w, packed_isa, bias, fusion, y_shape, y,
                         num_threads);
  }
  const int64_t depth = group_channels * ks;
  const int pointwise = ks == 1 && is_pointwise(params);
  const size_t per_group = packed_w != NULL ? cr_gemm_packed_a_floats(group_outputs, depth) : 0;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const float *x_group = x + (n * channels + g * group_channels) * in_plane;
      const int64_t first_output = n * outputs + g * group_outputs;
      cr_gemm_operand a = {w + g * group_outputs * depth, depth, 1, NULL, NULL,
                           packed_w != NULL ? packed_w + (size_t)g * per_group : NULL,
                           packed_isa, NULL};
      cr_im2col view = {params, x_group, {x_shape[2], x_shape[3], x_shape[4]},
                        {y_shape[2], y_shape[3], y_shape[4]}};
      cr_gemm_operand b = {x_group, in_plane, 1, pointwise ? NULL : pack_im2col,
                           pointwise ? NULL : &view, NULL, CR_ISA_GENERIC, NULL};
      cr_epilogue e = make_epilogue(fusion);
      e.row_bias = bias != NULL ? bias + g * group_outputs : NULL;
      if (fusion != NULL && fusion->residual != NULL) {
        e.residual = fusion->residual + first_output * out_plane;
        e.ld_residual = out_plane;
      }
      if (cr_gemm(group_outputs, out_plane, depth, &a, &b, y + first_output * out_plane,
                  out_plane, &e, num_threads) != 0) {
        return -1;
      }
    }
  }
  return 0;
}

int cr_convolution(const cr_conv_params *params, const int64_t x_shape[5], const float *x,
                   const float *w, const float *bias, const int64_t y_shape[5], float *y,
                   int num_threads) {
  return cr_convolution_fused(params, x_shape, x, w, NULL, CR_ISA_GENERIC, bias, NULL, y_shape,
                              y, num_threads);
}

/* ------------------------------------------------------------------------ */
/* FullyConnected                                                            */
/* ------------------------------------------------------------------------ */

size_t cr_fc_packed_floats(int64_t in_dim, int64_t out_dim) {
  return cr_gemm_packed_b_floats(in_dim, out_dim);
}

cr_isa cr_fc_pack(int64_t in_dim, int64_t out_dim, const float *w, float *packed) {
  /* B = w^T: element (k, j) is w[j * in_dim + k]. */
  return cr_gemm_pack_b(in_dim, out_dim, w, 1, in_dim, packed);
}

int cr_fully_connected_fused(int64_t batch, int64_t in_dim, int64_t out_dim, const float *x,
                             const float *w, const float *packed_w, cr_isa packed_isa,
                             const float *bias, const cr_fusion *fusion, float *y,
                             int num_threads) {
  if (batch == 1) return matrix_vector(out_dim, in_dim, x, w, bias, fusion, y, num_threads);
  cr_gemm_operand a = {x, in_dim, 1, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
  cr_gemm_operand b = {w, 1, in_dim, NULL, NULL, packed_w, packed_isa, NULL};
  cr_epilogue e = make_epilogue(fusion);
  e.col_bias = bias;
  if (fusion != NULL && fusion->residual != NULL) {
    e.residual = fusion->residual;
    e.ld_residual = out_dim;
  }
  return cr_gemm(batch, out_dim, in_dim, &a, &b, y, out_dim, &e, num_threads);
}

int cr_fully_connected(int64_t batch, int64_t in_dim, int64_t out_dim, const float *x,
                       const float *w, const float *bias, float *y, int num_threads) {
  return cr_fully_connected_fused(batch, in_dim, out_dim, x, w, NULL, CR_ISA_GENERIC, bias,
                                  NULL, y, num_threads);
}

/* ------------------------------------------------------------------------ */
/* Matrix products                                                           */
/* ------------------------------------------------------------------------ */

typedef struct cr_matmul_task {
  int64_t m, n, k;
  int transpose_a, transpose_b;
  const float *a;
  const float *b;
  float *y;
  int threads_per_pair;
  int failed;
} cr_matmul_task;

static int matmul_pair(const cr_matmul_task *t, int64_t pair) {
  cr_gemm_operand a = {t->a + pair * t->m * t->k, t->transpose_a ? 1 : t->k,
                       t->transpose_a ? t->m : 1, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
  cr_gemm_operand b = {t->b + pair * t->k * t->n, t->transpose_b ? 1 : t->n,
                       t->transpose_b ? t->k : 1, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
  return cr_gemm(t->m, t->n, t->k, &a, &b, t->y + pair * t->m * t->n, t->n, NULL,
                 t->threads_per_pair);
}

static void matmul_pairs(void *context, int64_t begin, int64_t end) {
  cr_matmul_task *t = context;
  for (int64_t pair = begin; pair < end; ++pair) {
    /* Only ever set to 1, by any thread: a benign flag, but keep it
     * race-free by writing through a per-call result. */
    if (matmul_pair(t, pair) != 0) __atomic_store_n(&t->failed, 1, __ATOMIC_RELAXED);
  }
}

int cr_matmul(int64_t batch, int64_t m, int64_t n, int64_t k, int transpose_a, int transpose_b,
              const float *a, const float *b, float *y, int num_threads) {
  if (batch <= 0 || m == 0 || n == 0) return 0;
  cr_matmul_task task = {m, n, k, transpose_a, transpose_b, a, b, y, 1, 0};
  if (batch == 1) {
    task.threads_per_pair = num_threads;
    return matmul_pair(&task, 0);
  }
  /* Many products: each on one thread, the pairs shared out. */
  const double work = (double)batch * (double)m * (double)n * (double)(k > 0 ? k : 1);
  const int threads = cr_threads_for_work(num_threads, work, 1);
  cr_parallel_for(threads, batch, matmul_pairs, &task);
  return __atomic_load_n(&task.failed, __ATOMIC_RELAXED) ? -1 : 0;
}
