#include "kernels.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "cost.h"
#include "clones.h"
#include "fast_direct.h"
#include "fast_gemm.h"

float mlu_activate(float x, int act, float lo, float hi) {
  switch (act) {
    case MLU_ACT_RELU: return x < 0.0f ? 0.0f : x; /* keeps NaN, as np.maximum */
    case MLU_ACT_SIGMOID: return (float)(1.0 / (1.0 + exp(-(double)x)));
    case MLU_ACT_TANH: return (float)tanh((double)x);
    case MLU_ACT_CLIP: return x > hi ? hi : (x < lo ? lo : x); /* MXNet's order of tests */
    default: return x;
  }
}

static int64_t ceil_div(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

/* Where part `part` of `parts` equal shares of n items starts (part ==
 * parts: n), rounded down to a multiple of align. */
static int64_t share(int64_t n, int part, int parts, int64_t align) {
  if (part >= parts) return n;
  int64_t at = (int64_t)((double)n * part / parts);
  at -= at % align;
  return at < n ? at : n;
}

/* Output columns [*lo, *hi) whose input column ox * stride + offset lies in
 * [0, width). */
static void valid_columns(int64_t offset, int64_t stride, int64_t width, int64_t out_width,
                          int64_t *lo, int64_t *hi) {
  *lo = offset >= 0 ? 0 : ceil_div(-offset, stride);
  int64_t end = ceil_div(width - offset, stride);
  *hi = end < out_width ? end : out_width;
  if (*hi < *lo) *hi = *lo;
}

/* Words split_phases writes. */
static int64_t phase_words(int64_t w, int64_t stride) {
  return (w + stride - 1) / stride * stride;
}

/* Splits row (w values) into its stride phases: phase p (at phases + p *
 * ceil(w / stride)) holds row[p], row[p + stride], ... */
MLU_TARGET_CLONES static void split_phases(const float *row, int64_t w, int64_t stride,
                                           float *phases) {
  int64_t len = (w + stride - 1) / stride;
  if (stride == 2) {
    float *even = phases, *odd = phases + len;
    for (int64_t i = 0; i < w / 2; ++i) {
      even[i] = row[2 * i];
      odd[i] = row[2 * i + 1];
    }
    if (w % 2) even[w / 2] = row[w - 1];
    return;
  }
  for (int64_t p = 0; p < stride; ++p) {
    float *phase = phases + p * len;
    for (int64_t i = 0; p + i * stride < w; ++i) phase[i] = row[p + i * stride];
  }
}

/* Applies activation act to n values in place: one loop per activation, so
 * that the compiler vectorises the cheap ones. */
MLU_TARGET_CLONES static void activate_run(float *values, int64_t n, int act, float lo, float hi) {
  switch (act) {
    case MLU_ACT_NONE: break;
    case MLU_ACT_RELU:
      for (int64_t i = 0; i < n; ++i) values[i] = values[i] < 0.0f ? 0.0f : values[i];
      break;
    case MLU_ACT_CLIP:
      for (int64_t i = 0; i < n; ++i) {
        float x = values[i];
        values[i] = x > hi ? hi : (x < lo ? lo : x);
      }
      break;
    default:
      for (int64_t i = 0; i < n; ++i) values[i] = mlu_activate(values[i], act, lo, hi);
      break;
  }
}

/* Applies bias (already in place), residual and activation to an output
 * block of nf channels x count values. */
MLU_TARGET_CLONES static void apply_epilogue(float *sram, const mlu_epilogue *ep, uint64_t out,
                           uint64_t out_stride, int64_t channels, int64_t count) {
  if (ep->residual == MLU_NONE && ep->act == MLU_ACT_NONE) return;
  for (int64_t j = 0; j < channels; ++j) {
    float *values = sram + out + (uint64_t)j * out_stride;
    if (ep->residual != MLU_NONE) {
      const float *residual = sram + ep->residual + (uint64_t)j * ep->residual_stride;
      for (int64_t i = 0; i < count; ++i) values[i] += residual[i];
    }
    activate_run(values, count, ep->act, ep->act_lo, ep->act_hi);
  }
}

/* Applies the epilogue's residual and activation to count values of
 * output channel j starting at offset (a row, or a chunk of rows). */
MLU_TARGET_CLONES static void epilogue_run(float *sram, const mlu_epilogue *ep, uint64_t out, uint64_t out_stride,
                         int64_t j, int64_t offset, int64_t count) {
  if (ep->residual == MLU_NONE && ep->act == MLU_ACT_NONE) return;
  float *values = sram + out + (uint64_t)j * out_stride + (uint64_t)offset;
  if (ep->residual != MLU_NONE) {
    const float *residual = sram + ep->residual + (uint64_t)j * ep->residual_stride +
                            (uint64_t)offset;
    for (int64_t i = 0; i < count; ++i) values[i] += residual[i];
  }
  activate_run(values, count, ep->act, ep->act_lo, ep->act_hi);
}

/* The direct convolution of filters wider than DIRECT_KW_MAX (conv_direct
 * below takes the others), for groups of few filters (depthwise ones above
 * all, where a GEMM would have one row): output row by output row, every
 * tap of the filter added to the row while it is in the L1 cache, then its
 * epilogue. Strided taps read a copy of the input row split into its
 * stride phases (work: phase_words), so that every tap is a contiguous run. */
MLU_TARGET_CLONES static void conv_direct_any(float *sram, const mlu_conv *c, float *work,
                                              int part, int parts) {
  int64_t taps = c->kh * c->kw * c->cg;
  int64_t phase_len = (c->w + c->sw - 1) / c->sw;
  int64_t j_end = share(c->nf, part + 1, parts, 1);
  for (int64_t j = share(c->nf, part, parts, 1); j < j_end; ++j) {
    float *out = sram + c->out + (uint64_t)j * c->out_ch_stride;
    float bias = c->ep.bias == MLU_NONE ? 0.0f : sram[c->ep.bias + (uint64_t)j];
    int64_t group = (c->f0 + j) / c->fg;
    int64_t channel_base = group * c->cg - c->in_c0; /* first input channel of the group */
    const float *weights = sram + c->filter + (uint64_t)(j * taps);
    for (int64_t r = 0; r < c->out_rows; ++r) {
      float *orow = out + r * c->ow;
      for (int64_t ox = 0; ox < c->ow; ++ox) orow[ox] = bias;
      for (int64_t ky = 0; ky < c->kh; ++ky) {
        int64_t iy = (c->oy0 + r) * c->sh - c->ph + ky * c->dh;
        if (iy < 0 || iy >= c->h) continue; /* zero padding */
        for (int64_t ch = 0; ch < c->cg; ++ch) {
          const float *row = sram + c->in + (uint64_t)(channel_base + ch) * c->in_ch_stride +
                             (uint64_t)((iy - c->in_row0) * c->w);
          const float *tap_weights = weights + ky * c->kw * c->cg + ch;
          if (c->sw > 1) split_phases(row, c->w, c->sw, work);
          for (int64_t kx = 0; kx < c->kw; ++kx) {
            int64_t x_offset = kx * c->dw - c->pw, lo, hi;
            valid_columns(x_offset, c->sw, c->w, c->ow, &lo, &hi);
            if (lo >= hi) continue;
            float weight = tap_weights[kx * c->cg];
            int64_t first = lo * c->sw + x_offset; /* input column of output column lo */
            const float *src = c->sw == 1 ? row + first
                                          : work + (first % c->sw) * phase_len + first / c->sw;
            float *dst = orow + lo;
            for (int64_t i = 0; i < hi - lo; ++i) dst[i] += weight * src[i];
          }
        }
      }
      epilogue_run(sram, &c->ep, c->out, c->out_ch_stride, j, r * c->ow, c->ow);
    }
  }
}

/* The columns one filter column kx reaches: output columns [lo, hi) read
 * input value base[off + ox], base being the input row itself (unit stride)
 * or its copy split into stride phases (split_phases). Computed once per
 * instruction, so that no row pays for the divisions. */
typedef struct tap_columns {
  int64_t lo, hi, off;
} tap_columns;

/* Filter widths the direct path handles with precomputed columns. */
#define DIRECT_KW_MAX 16

static void direct_columns(const mlu_conv *c, tap_columns *cols) {
  int64_t phase_len = (c->w + c->sw - 1) / c->sw;
  for (int64_t kx = 0; kx < c->kw; ++kx) {
    int64_t x_offset = kx * c->dw - c->pw;
    valid_columns(x_offset, c->sw, c->w, c->ow, &cols[kx].lo, &cols[kx].hi);
    int64_t first = cols[kx].lo * c->sw + x_offset; /* input column of output column lo */
    cols[kx].off = c->sw == 1 ? x_offset
                              : (first % c->sw) * phase_len + first / c->sw - cols[kx].lo;
  }
}

/* Adds the taps kx of one input row (weights w[kx * cg]) to output row
 * orow, column by column in the order of kx; each output value gets its
 * valid taps only, as many passes of `orow[ox] += w * x` would. */
MLU_TARGET_CLONES static void direct_row(float *orow, const float *base, const float *w,
                                         int64_t cg, const tap_columns *cols, int64_t kw,
                                         int64_t ow) {
  if (kw == 3) {
    int64_t lo = cols[0].lo, hi = cols[0].hi;
    for (int k = 1; k < 3; ++k) {
      if (cols[k].lo > lo) lo = cols[k].lo;
      if (cols[k].hi < hi) hi = cols[k].hi;
    }
    if (lo < hi) {
      const float w0 = w[0], w1 = w[cg], w2 = w[2 * cg];
      const int64_t o0 = cols[0].off, o1 = cols[1].off, o2 = cols[2].off;
      for (int64_t ox = 0; ox < lo; ++ox) {
        for (int64_t kx = 0; kx < 3; ++kx) {
          if (ox >= cols[kx].lo && ox < cols[kx].hi) {
            orow[ox] += w[kx * cg] * base[ox + cols[kx].off];
          }
        }
      }
      for (int64_t ox = lo; ox < hi; ++ox) {
        float v = orow[ox];
        v += w0 * base[ox + o0];
        v += w1 * base[ox + o1];
        v += w2 * base[ox + o2];
        orow[ox] = v;
      }
      for (int64_t ox = hi; ox < ow; ++ox) {
        for (int64_t kx = 0; kx < 3; ++kx) {
          if (ox >= cols[kx].lo && ox < cols[kx].hi) {
            orow[ox] += w[kx * cg] * base[ox + cols[kx].off];
          }
        }
      }
      return;
    }
  }
  for (int64_t kx = 0; kx < kw; ++kx) {
    const float weight = w[kx * cg];
    const int64_t off = cols[kx].off;
    for (int64_t ox = cols[kx].lo; ox < cols[kx].hi; ++ox) orow[ox] += weight * base[ox + off];
  }
}

/* One output row of a 3 x 3 single-channel (depthwise) filter whose three
 * input rows are all inside the input: bias, then the nine taps in the
 * filter's order, then clip or ReLU (act_inline), in one pass. The columns
 * every tap reaches go to mlu_direct3x3_row (fused multiply-adds) where the
 * CPU allows; the others, a padding's width at each end, are summed here. */
MLU_TARGET_CLONES static void direct_row3x3(float *orow, const float *const rows[3],
                                            const float *w, float bias,
                                            const tap_columns *cols, int64_t ow, int act_inline,
                                            float act_lo, float act_hi) {
  int64_t lo = cols[0].lo, hi = cols[0].hi;
  for (int k = 1; k < 3; ++k) {
    if (cols[k].lo > lo) lo = cols[k].lo;
    if (cols[k].hi < hi) hi = cols[k].hi;
  }
  if (hi < lo) hi = lo;
  for (int64_t ox = 0; ox < ow; ++ox) {
    if (ox == lo) ox = hi;
    if (ox >= ow) break;
    float v = bias;
    for (int64_t ky = 0; ky < 3; ++ky) {
      for (int64_t kx = 0; kx < 3; ++kx) {
        if (ox >= cols[kx].lo && ox < cols[kx].hi) {
          v += w[ky * 3 + kx] * rows[ky][ox + cols[kx].off];
        }
      }
    }
    orow[ox] = act_inline == MLU_ACT_NONE ? v : mlu_activate(v, act_inline, act_lo, act_hi);
  }
  const int64_t off[3] = {cols[0].off, cols[1].off, cols[2].off};
  if (mlu_direct3x3_row(orow, rows, off, w, bias, lo, hi, act_inline, act_lo, act_hi)) return;
  const float *a = rows[0], *b = rows[1], *c = rows[2];
  const int64_t o0 = off[0], o1 = off[1], o2 = off[2];
  const float w00 = w[0], w01 = w[1], w02 = w[2], w10 = w[3], w11 = w[4], w12 = w[5];
  const float w20 = w[6], w21 = w[7], w22 = w[8];
  for (int64_t ox = lo; ox < hi; ++ox) {
    float v = bias;
    v += w00 * a[ox + o0];
    v += w01 * a[ox + o1];
    v += w02 * a[ox + o2];
    v += w10 * b[ox + o0];
    v += w11 * b[ox + o1];
    v += w12 * b[ox + o2];
    v += w20 * c[ox + o0];
    v += w21 * c[ox + o1];
    v += w22 * c[ox + o2];
    orow[ox] = v;
  }
  if (act_inline != MLU_ACT_NONE) activate_run(orow + lo, hi - lo, act_inline, act_lo, act_hi);
}

/* The direct convolution, for groups of few filters (depthwise ones above
 * all, where a GEMM would have one row): output row by output row, every
 * tap of the filter added to the row while it is in the L1 cache, then its
 * epilogue. Each output value is its bias plus its valid taps in the
 * filter's order (ky, channel, kx), each `v += w * x` (a fused multiply-add
 * in mlu_direct3x3_row), the same whichever part computes it. Strided taps
 * read a copy of the input row split into its stride phases (work:
 * phase_words per row, three rows for 3 x 3 filters), so that every tap is
 * a contiguous run. */
static void conv_direct(float *sram, const mlu_conv *c, float *work, int part, int parts) {
  if (c->kw > DIRECT_KW_MAX) {
    conv_direct_any(sram, c, work, part, parts);
    return;
  }
  tap_columns cols[DIRECT_KW_MAX];
  direct_columns(c, cols);
  int64_t taps = c->kh * c->kw * c->cg;
  int64_t phase_row = phase_words(c->w, c->sw);
  int dw3x3 = c->kh == 3 && c->kw == 3 && c->cg == 1;
  /* The activations applied in direct_row3x3's pass (no residual). */
  int act_inline = c->ep.residual == MLU_NONE &&
                           (c->ep.act == MLU_ACT_RELU || c->ep.act == MLU_ACT_CLIP)
                       ? c->ep.act
                       : MLU_ACT_NONE;
  int64_t j_end = share(c->nf, part + 1, parts, 1);
  for (int64_t j = share(c->nf, part, parts, 1); j < j_end; ++j) {
    float *out = sram + c->out + (uint64_t)j * c->out_ch_stride;
    float bias = c->ep.bias == MLU_NONE ? 0.0f : sram[c->ep.bias + (uint64_t)j];
    int64_t group = (c->f0 + j) / c->fg;
    int64_t channel_base = group * c->cg - c->in_c0; /* first input channel of the group */
    const float *weights = sram + c->filter + (uint64_t)(j * taps);
    for (int64_t r = 0; r < c->out_rows; ++r) {
      float *orow = out + r * c->ow;
      int64_t iy0 = (c->oy0 + r) * c->sh - c->ph;
      if (dw3x3 && iy0 >= 0 && iy0 + 2 * c->dh < c->h) {
        const float *rows[3];
        for (int64_t ky = 0; ky < 3; ++ky) {
          const float *row = sram + c->in + (uint64_t)channel_base * c->in_ch_stride +
                             (uint64_t)((iy0 + ky * c->dh - c->in_row0) * c->w);
          if (c->sw > 1) {
            split_phases(row, c->w, c->sw, work + ky * phase_row);
            row = work + ky * phase_row;
          }
          rows[ky] = row;
        }
        direct_row3x3(orow, rows, weights, bias, cols, c->ow, act_inline, c->ep.act_lo,
                      c->ep.act_hi);
        if (act_inline == MLU_ACT_NONE) {
          epilogue_run(sram, &c->ep, c->out, c->out_ch_stride, j, r * c->ow, c->ow);
        }
        continue;
      }
      for (int64_t ox = 0; ox < c->ow; ++ox) orow[ox] = bias;
      for (int64_t ky = 0; ky < c->kh; ++ky) {
        int64_t iy = iy0 + ky * c->dh;
        if (iy < 0 || iy >= c->h) continue; /* zero padding */
        for (int64_t ch = 0; ch < c->cg; ++ch) {
          const float *row = sram + c->in + (uint64_t)(channel_base + ch) * c->in_ch_stride +
                             (uint64_t)((iy - c->in_row0) * c->w);
          if (c->sw > 1) {
            split_phases(row, c->w, c->sw, work);
            row = work;
          }
          direct_row(orow, row, weights + ky * c->kw * c->cg + ch, c->cg, cols, c->kw, c->ow);
        }
      }
      epilogue_run(sram, &c->ep, c->out, c->out_ch_stride, j, r * c->ow, c->ow);
    }
  }
}

/* ---- convolution as GEMM ------------------------------------------------------------ */

/* Words of one im2col chunk the GEMM path aims at (512 KiB: an L2 cache's
 * share), and the most one output row's columns may take before the
 * direct path is used instead. */
#define CONV_CHUNK_WORDS 131072
#define CONV_ROW_WORDS_MAX ((int64_t)1 << 24)

/* Whether the GEMM path computes the instruction: at least 4 filters per
 * group (rows of the GEMM), and a bounded im2col row. Only the layer's
 * shape decides, never the tile's, so that tiling changes no result bit
 * (each path sums every output value in its own fixed order). */
static int conv_uses_gemm(const mlu_conv *c) {
  return c->fg >= 4 && c->ow > 0 && c->kh * c->kw * c->cg <= CONV_ROW_WORDS_MAX / c->ow;
}

/* A 1x1 convolution at unit stride without padding: its input block is the
 * GEMM's b as it lies, one row per input channel. */
static int conv_pointwise(const mlu_conv *c) {
  return c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->ph == 0 && c->pw == 0 &&
         c->ow == c->w;
}

static int64_t conv_chunk_rows(const mlu_conv *c) {
  int64_t rows = CONV_CHUNK_WORDS / (c->kh * c->kw * c->cg * c->ow);
  if (rows < 1) rows = 1;
  return rows < c->out_rows ? rows : c->out_rows;
}

uint64_t mlu_conv_work_words(const mlu_conv *c) {
  if (c->nf <= 0 || c->out_rows <= 0 || c->ow <= 0 || c->cg <= 0) return 0;
  if (!conv_uses_gemm(c)) {
    /* stride phases of one input row, three for 3 x 3 filters */
    return c->sw > 1 ? (uint64_t)phase_words(c->w, c->sw) * (c->kh == 3 ? 3u : 1u) : 0;
  }
  if (conv_pointwise(c)) return 0;
  return (uint64_t)(c->kh * c->kw * c->cg) * (uint64_t)(conv_chunk_rows(c) * c->ow);
}

/* im2col of output rows r0 .. r0 + rows - 1 for the group whose first
 * input channel is channel_base: col[(ky * kw + kx) * cg + ch][p] (the
 * filters' own order of taps), p = r * ow + ox, zero where the tap reads
 * padding. */
static void conv_im2col(const float *sram, const mlu_conv *c, int64_t channel_base, int64_t r0,
                        int64_t rows, float *col) {
  int64_t count = rows * c->ow;
  for (int64_t ky = 0; ky < c->kh; ++ky) {
    for (int64_t kx = 0; kx < c->kw; ++kx) {
      int64_t x_offset = kx * c->dw - c->pw, lo, hi;
      valid_columns(x_offset, c->sw, c->w, c->ow, &lo, &hi);
      for (int64_t ch = 0; ch < c->cg; ++ch) {
        float *dst = col + ((ky * c->kw + kx) * c->cg + ch) * count;
        const float *plane = sram + c->in + (uint64_t)(channel_base + ch) * c->in_ch_stride;
        for (int64_t r = 0; r < rows; ++r) {
          float *d = dst + r * c->ow;
          int64_t iy = (c->oy0 + r0 + r) * c->sh - c->ph + ky * c->dh;
          if (iy < 0 || iy >= c->h || lo >= hi) {
            memset(d, 0, (size_t)c->ow * sizeof *d);
            continue;
          }
          const float *src = plane + (uint64_t)((iy - c->in_row0) * c->w + lo * c->sw + x_offset);
          if (lo > 0) memset(d, 0, (size_t)lo * sizeof *d);
          if (c->sw == 1) {
            memcpy(d + lo, src, (size_t)(hi - lo) * sizeof *d);
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) d[ox] = src[(ox - lo) * c->sw];
          }
          if (hi < c->ow) memset(d + hi, 0, (size_t)(c->ow - hi) * sizeof *d);
        }
      }
    }
  }
}

/* Each run of filters of one group is one GEMM: a = the filters (nf x
 * taps, as the compiler laid them out), b = the input itself (pointwise)
 * or its im2col, chunk by chunk of output rows, c = the output block. Part
 * `part` of `parts` computes a share of the output positions: of the
 * columns (pointwise, at multiples of 32) or of the output rows. */
static void conv_gemm(float *sram, const mlu_conv *c, float *work, int part, int parts) {
  int64_t taps = c->kh * c->kw * c->cg, plane = c->out_rows * c->ow;
  int pointwise = conv_pointwise(c);
  int64_t chunk = conv_chunk_rows(c);
  /* A pointwise plane too small to give every part 32 columns is split by
   * filters instead (whole blocks of 6, the GEMM's rows). */
  int by_filters = pointwise && parts > 1 && plane < 32 * (int64_t)parts;
  int64_t lo = 0, hi = pointwise ? plane : c->out_rows, f_lo = 0, f_hi = c->nf;
  if (by_filters) {
    f_lo = share(c->nf, part, parts, 6);
    f_hi = share(c->nf, part + 1, parts, 6);
  } else if (pointwise) {
    lo = share(plane, part, parts, 32);
    hi = share(plane, part + 1, parts, 32);
  } else {
    lo = share(c->out_rows, part, parts, 1);
    hi = share(c->out_rows, part + 1, parts, 1);
  }
  if (lo >= hi || f_lo >= f_hi) return;
  for (int64_t j0 = f_lo; j0 < f_hi;) {
    int64_t group = (c->f0 + j0) / c->fg;
    int64_t j1 = (group + 1) * c->fg - c->f0;
    if (j1 > f_hi) j1 = f_hi;
    int64_t channel_base = group * c->cg - c->in_c0;
    const float *a = sram + c->filter + (uint64_t)(j0 * taps);
    float *out = sram + c->out + (uint64_t)j0 * c->out_ch_stride;
    const float *bias = c->ep.bias == MLU_NONE ? NULL : sram + c->ep.bias + (uint64_t)j0;
    int64_t ldc = (int64_t)c->out_ch_stride;
    if (pointwise) {
      const float *b = sram + c->in + (uint64_t)channel_base * c->in_ch_stride +
                       (uint64_t)((c->oy0 - c->in_row0) * c->w);
      mlu_gemm(j1 - j0, hi - lo, c->cg, a, taps, b + lo, (int64_t)c->in_ch_stride, out + lo, ldc,
               bias);
      for (int64_t j = j0; j < j1; ++j) {
        epilogue_run(sram, &c->ep, c->out, c->out_ch_stride, j, lo, hi - lo);
      }
    } else {
      for (int64_t r0 = lo; r0 < hi; r0 += chunk) {
        int64_t rows = chunk < hi - r0 ? chunk : hi - r0;
        conv_im2col(sram, c, channel_base, r0, rows, work);
        mlu_gemm(j1 - j0, rows * c->ow, taps, a, taps, work, rows * c->ow, out + r0 * c->ow, ldc,
                 bias);
        for (int64_t j = j0; j < j1; ++j) {
          epilogue_run(sram, &c->ep, c->out, c->out_ch_stride, j, r0 * c->ow, rows * c->ow);
        }
      }
    }
    j0 = j1;
  }
}

void mlu_kernel_conv(float *sram, const mlu_conv *c, float *work, int part, int parts) {
  if (conv_uses_gemm(c)) {
    conv_gemm(sram, c, work, part, parts);
  } else {
    conv_direct(sram, c, work, part, parts);
  }
}

/* Columns of b a MATMUL packs at a time (transposed, so that the double
 * sums of 8 columns advance together in one vector), and the largest k
 * packed (work: 8 k words); beyond it, column by column. */
#define MATMUL_PACK 8
#define MATMUL_PACK_K_MAX ((int64_t)1 << 20)

uint64_t mlu_matmul_work_words(const mlu_matmul *m) {
  return m->k > 0 && m->k <= MATMUL_PACK_K_MAX ? (uint64_t)(m->k * MATMUL_PACK) : 0;
}

/* Rows [r0, r1) of out = a b^T (+ bias) through 8 packed columns at a
 * time: each sum still runs over k in order, in double, as the column loop
 * below does, so the results are the same. */
MLU_TARGET_CLONES static void matmul_packed(float *sram, const mlu_matmul *m, float *work,
                                            int64_t r0, int64_t r1, int64_t col_lo,
                                            int64_t col_hi) {
  for (int64_t c0 = col_lo; c0 < col_hi; c0 += MATMUL_PACK) {
    int64_t n = col_hi - c0 < MATMUL_PACK ? col_hi - c0 : MATMUL_PACK;
    for (int64_t c = 0; c < MATMUL_PACK; ++c) {
      const float *b = sram + m->b + (uint64_t)((c0 + (c < n ? c : 0)) * m->k);
      for (int64_t k = 0; k < m->k; ++k) work[k * MATMUL_PACK + c] = b[k];
    }
    for (int64_t r = r0; r < r1; ++r) {
      const float *a = sram + m->a + (uint64_t)r * m->a_stride;
      double sum[MATMUL_PACK] = {0};
      for (int64_t k = 0; k < m->k; ++k) {
        double x = (double)a[k];
        const float *bt = work + k * MATMUL_PACK;
        for (int c = 0; c < MATMUL_PACK; ++c) sum[c] += x * (double)bt[c];
      }
      float *out = sram + m->out + (uint64_t)r * m->out_stride + (uint64_t)c0;
      for (int64_t c = 0; c < n; ++c) {
        double v = sum[c];
        if (m->ep.bias != MLU_NONE) v += (double)sram[m->ep.bias + (uint64_t)(c0 + c)];
        out[c] = (float)v;
      }
    }
  }
}

void mlu_kernel_matmul(float *sram, const mlu_matmul *m, float *work, int part, int parts) {
  /* a share of the rows, or of the columns (multiples of MATMUL_PACK) when
   * there are fewer rows than parts */
  int64_t r0 = 0, r1 = m->rows, c_lo = 0, c_hi = m->cols;
  if (m->rows >= parts) {
    r0 = share(m->rows, part, parts, 1);
    r1 = share(m->rows, part + 1, parts, 1);
  } else {
    c_lo = share(m->cols, part, parts, MATMUL_PACK);
    c_hi = share(m->cols, part + 1, parts, MATMUL_PACK);
  }
  if (r0 >= r1 || c_lo >= c_hi) return;
  if (mlu_matmul_work_words(m) > 0) {
    matmul_packed(sram, m, work, r0, r1, c_lo, c_hi);
  } else {
    for (int64_t r = r0; r < r1; ++r) {
      const float *a = sram + m->a + (uint64_t)r * m->a_stride;
      float *out = sram + m->out + (uint64_t)r * m->out_stride;
      for (int64_t col = c_lo; col < c_hi; ++col) {
        const float *b = sram + m->b + (uint64_t)(col * m->k);
        double sum = 0.0;
        for (int64_t k = 0; k < m->k; ++k) sum += (double)a[k] * (double)b[k];
        if (m->ep.bias != MLU_NONE) sum += (double)sram[m->ep.bias + (uint64_t)col];
        out[col] = (float)sum;
      }
    }
  }
  for (int64_t r = r0; r < r1; ++r) {
    epilogue_run(sram, &m->ep, m->out, m->out_stride, r, c_lo, c_hi - c_lo);
  }
}

/* MXNet's pooling window along one axis for output index o: start and end
 * include padding (end capped at size + pad), lo and hi are clipped to the
 * data. */
typedef struct window {
  int64_t start, end, lo, hi;
} window;

static window pool_window(int64_t o, int64_t kernel, int64_t stride, int64_t pad, int64_t size) {
  window w;
  w.start = o * stride - pad;
  w.end = w.start + kernel < size + pad ? w.start + kernel : size + pad;
  w.lo = w.start > 0 ? w.start : 0;
  w.hi = w.end < size ? w.end : size;
  return w;
}

static float pool_one(const float *sram, const mlu_pool *p, const float *in, window y, window x) {
  if (p->mode == MLU_POOL_MAX) {
    float best = p->empty_value;
    int first = 1;
    for (int64_t iy = y.lo; iy < y.hi; ++iy) {
      const float *row = in + (iy - p->in_row0) * p->w;
      for (int64_t ix = x.lo; ix < x.hi; ++ix) {
        float v = row[ix];
        if (first || v > best || isnan(v)) best = v; /* NaN wins, as in np.max */
        if (isnan(best)) return best;
        first = 0;
      }
    }
    return best;
  }
  (void)sram;
  double sum = 0.0;
  for (int64_t iy = y.lo; iy < y.hi; ++iy) {
    const float *row = in + (iy - p->in_row0) * p->w;
    for (int64_t ix = x.lo; ix < x.hi; ++ix) sum += (double)row[ix];
  }
  /* A window with no data in it (padding only, or wholly past the edge)
   * averages to 0, as in MXNet; every other one has a positive divisor. */
  if (y.hi <= y.lo || x.hi <= x.lo) return 0.0f;
  double divisor = p->count_include_pad ? (double)((y.end - y.start) * (x.end - x.start))
                                        : (double)((y.hi - y.lo) * (x.hi - x.lo));
  return (float)(sum / divisor);
}

/* Rows at most this wide take the row-wise path (its workspace is about 3 words
 * per column); wider ones, which no compiled layer has, and single output
 * columns (global pooling: one contiguous window row each) go window by
 * window. */
#define POOL_ROW_MAX ((int64_t)1 << 20)

static int pool_by_rows(const mlu_pool *p) {
  return p->ow > 1 && p->w <= POOL_ROW_MAX && p->ow <= POOL_ROW_MAX;
}

uint64_t mlu_pool_work_words(const mlu_pool *p) {
  if (!pool_by_rows(p) || p->ow <= 0 || p->w <= 0) return 0;
  /* ow double accumulators (avg), then one input row split into phases */
  return (uint64_t)(2 * p->ow + phase_words(p->w, p->sw));
}

/* One output row of one plane, row-wise: each window row and column offset
 * (iy, kx) updates every output column it reaches in one contiguous run
 * (strided layers read the input row split into its stride phases). Every
 * output value still sees its window in MXNet's order, row by row, column
 * by column, so the results are those of pool_one: the same maximum (the
 * first NaN wins) and the same double sums. */
MLU_TARGET_CLONES static void pool_row(const mlu_pool *p, const float *in, float *out, int64_t oy,
                     double *sums, float *phases, const tap_columns *cols) {
  window y = pool_window(oy, p->kh, p->sh, p->ph, p->h);
  int max = p->mode == MLU_POOL_MAX;
  if (y.lo >= y.hi) { /* a window row of padding only */
    for (int64_t ox = 0; ox < p->ow; ++ox) out[ox] = max ? p->empty_value : 0.0f;
    return;
  }
  if (max) {
    for (int64_t ox = 0; ox < p->ow; ++ox) out[ox] = -INFINITY;
  } else {
    for (int64_t ox = 0; ox < p->ow; ++ox) sums[ox] = 0.0;
  }
  for (int64_t iy = y.lo; iy < y.hi; ++iy) {
    const float *row = in + (iy - p->in_row0) * p->w;
    if (p->sw > 1) split_phases(row, p->w, p->sw, phases);
    for (int64_t kx = 0; kx < p->kw; ++kx) {
      int64_t lo = cols[kx].lo, hi = cols[kx].hi;
      if (lo >= hi) continue;
      const float *src = (p->sw == 1 ? row : phases) + (lo + cols[kx].off);
      int64_t n = hi - lo;
      if (max) {
        float *best = out + lo;
        if (mlu_max_run(best, src, n)) continue;
        for (int64_t i = 0; i < n; ++i) {
          float v = src[i], b = best[i];
          best[i] = (v > b || (v != v && b == b)) ? v : b;
        }
      } else {
        double *sum = sums + lo;
        for (int64_t i = 0; i < n; ++i) sum[i] += (double)src[i];
      }
    }
  }
  /* Max windows are final but those with no input column (only where no
   * column kx reaches: at the ends); average ones are divided. */
  int64_t reach_lo = p->ow, reach_hi = 0;
  for (int64_t kx = 0; kx < p->kw && max; ++kx) {
    if (cols[kx].lo >= cols[kx].hi) continue;
    if (cols[kx].lo < reach_lo) reach_lo = cols[kx].lo;
    if (cols[kx].hi > reach_hi) reach_hi = cols[kx].hi;
  }
  for (int64_t ox = 0; ox < p->ow; ++ox) {
    if (max && ox == reach_lo && reach_lo < reach_hi) ox = reach_hi;
    if (ox >= p->ow) break;
    window x = pool_window(ox, p->kw, p->sw, p->pw, p->w);
    if (x.lo >= x.hi) {
      out[ox] = max ? p->empty_value : 0.0f;
    } else if (!max) {
      double divisor = p->count_include_pad ? (double)((y.end - y.start) * (x.end - x.start))
                                            : (double)((y.hi - y.lo) * (x.hi - x.lo));
      out[ox] = (float)(sums[ox] / divisor);
    }
  }
}

/* tap_columns of a pooling window's columns kx (as a filter's, no dilation). */
static void pool_columns(const mlu_pool *p, tap_columns *cols) {
  int64_t phase_len = (p->w + p->sw - 1) / p->sw;
  for (int64_t kx = 0; kx < p->kw; ++kx) {
    valid_columns(kx - p->pw, p->sw, p->w, p->ow, &cols[kx].lo, &cols[kx].hi);
    int64_t first = cols[kx].lo * p->sw + kx - p->pw; /* input column of output column lo */
    cols[kx].off = p->sw == 1 ? kx - p->pw
                              : (first % p->sw) * phase_len + first / p->sw - cols[kx].lo;
  }
}

void mlu_kernel_pool(float *sram, const mlu_pool *p, float *work, int part, int parts) {
  int rows = pool_by_rows(p) && p->kw <= DIRECT_KW_MAX;
  tap_columns cols[DIRECT_KW_MAX];
  if (rows) pool_columns(p, cols);
  double *sums = (double *)(void *)work;
  float *phases = rows ? work + 2 * p->ow : NULL;
  int64_t end = share(p->planes, part + 1, parts, 1);
  for (int64_t plane = share(p->planes, part, parts, 1); plane < end; ++plane) {
    const float *in = sram + p->in + (uint64_t)plane * p->in_ch_stride;
    float *out = sram + p->out + (uint64_t)plane * p->out_ch_stride;
    for (int64_t r = 0; r < p->out_rows; ++r) {
      if (rows) {
        pool_row(p, in, out + r * p->ow, p->oy0 + r, sums, phases, cols);
        continue;
      }
      window y = pool_window(p->oy0 + r, p->kh, p->sh, p->ph, p->h);
      for (int64_t ox = 0; ox < p->ow; ++ox) {
        window x = pool_window(ox, p->kw, p->sw, p->pw, p->w);
        out[r * p->ow + ox] = pool_one(sram, p, in, y, x);
      }
    }
  }
}

MLU_TARGET_CLONES static void ewise_range(float *sram, const mlu_ewise *e, int64_t lo,
                                          int64_t hi) {
  const float *a = sram + e->a;
  float *out = sram + e->out;
  switch (e->kind) {
    case MLU_EWISE_ADD: {
      const float *b = sram + e->b;
      for (int64_t i = lo; i < hi; ++i) out[i] = a[i] + b[i];
      break;
    }
    case MLU_EWISE_MUL: {
      const float *b = sram + e->b;
      for (int64_t i = lo; i < hi; ++i) out[i] = a[i] * b[i];
      break;
    }
    case MLU_EWISE_AFFINE: {
      /* One run per channel: c = ((first + i) / inner) % channels. */
      const float *scale = sram + e->scale, *shift = sram + e->shift;
      for (int64_t i = lo; i < hi;) {
        int64_t block = (e->first + i) / e->inner;
        int64_t channel = block % e->channels;
        int64_t end = (block + 1) * e->inner - e->first;
        if (end > hi) end = hi;
        float s = scale[channel], t = shift[channel];
        for (int64_t k = i; k < end; ++k) out[k] = a[k] * s + t;
        i = end;
      }
      break;
    }
    default:
      if (out != a) memmove(out + lo, a + lo, (size_t)(hi - lo) * sizeof *out);
      break;
  }
  activate_run(out + lo, hi - lo, e->act, e->act_lo, e->act_hi);
}

void mlu_kernel_ewise(float *sram, const mlu_ewise *e, int part, int parts) {
  int64_t lo = share(e->n, part, parts, 16), hi = share(e->n, part + 1, parts, 16);
  if (lo < hi) ewise_range(sram, e, lo, hi);
}

void mlu_kernel_softmax(float *sram, const mlu_softmax *s) {
  for (int64_t o = 0; o < s->outer; ++o) {
    for (int64_t i = 0; i < s->inner; ++i) {
      const float *in = sram + s->in + (uint64_t)o * s->in_outer_stride + (uint64_t)i;
      float *out = sram + s->out + (uint64_t)o * s->out_outer_stride + (uint64_t)i;
      double top = -INFINITY;
      for (int64_t l = 0; l < s->axis_len; ++l) {
        double v = (double)in[(uint64_t)l * s->in_axis_stride] / s->temperature;
        if (v > top || isnan(v)) top = v;
      }
      double sum = 0.0;
      for (int64_t l = 0; l < s->axis_len; ++l) {
        sum += exp((double)in[(uint64_t)l * s->in_axis_stride] / s->temperature - top);
      }
      for (int64_t l = 0; l < s->axis_len; ++l) {
        double v = exp((double)in[(uint64_t)l * s->in_axis_stride] / s->temperature - top);
        out[(uint64_t)l * s->out_axis_stride] = (float)(v / sum);
      }
    }
  }
}

void mlu_kernel_copy(float *sram, const mlu_copy *c) {
  for (uint64_t r = 0; r < c->rows; ++r) {
    memmove(sram + c->dst + r * c->dst_stride, sram + c->src + r * c->src_stride,
            c->run * sizeof(float));
  }
}

/* ---- int8 ------------------------------------------------------------------------ */

int8_t mlu_quantize(float x, float scale) {
  if (!(scale > 0.0f)) return 0;
  float v = x / scale;
  if (v != v) return 0;
  if (v > 127.0f) v = 127.0f;
  if (v < -127.0f) v = -127.0f;
  return (int8_t)roundf(v);
}

/* An int8 weight held in an fp32 word (an exact integer LOADed from int8
 * constants); anything else reads as 0 rather than converting out of range. */
static int32_t weight_of(float w) {
  return w > -128.0f && w < 128.0f ? (int32_t)w : 0;
}

uint64_t mlu_int8_work_bytes(const mlu_insn *insn) {
  uint64_t bytes = mlu_int8_input_elements(insn);
  if (insn->dtype == MLU_DT_INT8 && insn->opcode == MLU_OP_MATMUL && insn->u.matmul.k > 0) {
    uint64_t k = (uint64_t)insn->u.matmul.k; /* one column of weights */
    bytes = bytes > UINT64_MAX - k ? UINT64_MAX : bytes + k;
  }
  return bytes;
}

uint64_t mlu_int8_acc_words(const mlu_insn *insn) {
  if (insn->dtype != MLU_DT_INT8 || insn->opcode != MLU_OP_CONV) return 0;
  const mlu_conv *c = &insn->u.conv;
  return c->out_rows > 0 && c->ow > 0 ? (uint64_t)c->out_rows * (uint64_t)c->ow : 0;
}

/* Max-abs of rows runs of run words (stride apart) into *amax; 0 if some
 * value is NaN or infinite. */
static int block_absmax(const float *base, int64_t rows, uint64_t stride, int64_t run,
                        float *amax) {
  float top = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = base + (uint64_t)r * stride;
    for (int64_t i = 0; i < run; ++i) {
      if (!isfinite(row[i])) return 0;
      float a = fabsf(row[i]);
      if (a > top) top = a;
    }
  }
  *amax = top;
  return 1;
}

static void quantize_rows(const float *base, int64_t rows, uint64_t stride, int64_t run,
                          float scale, int8_t *q) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = base + (uint64_t)r * stride;
    for (int64_t i = 0; i < run; ++i) q[r * run + i] = mlu_quantize(row[i], scale);
  }
}

void mlu_kernel_conv_int8(float *sram, const mlu_conv *c, int8_t *q, int32_t *acc) {
  int64_t plane = c->out_rows * c->ow, taps = c->kh * c->kw * c->cg;
  /* The input the instruction reads: its filters' groups, the rows its
   * output rows reach (as mlu_int8_input_elements counts them). */
  int64_t g0 = c->f0 / c->fg, g1 = (c->f0 + c->nf - 1) / c->fg + 1;
  int64_t ch_lo = g0 * c->cg, channels = (g1 - g0) * c->cg;
  int64_t lo = c->oy0 * c->sh - c->ph;
  int64_t hi = (c->oy0 + c->out_rows - 1) * c->sh - c->ph + (c->kh - 1) * c->dh + 1;
  if (lo < 0) lo = 0;
  if (hi > c->h) hi = c->h;
  int64_t rows = hi > lo ? hi - lo : 0;
  float amax = 0.0f;
  int finite = 1;
  for (int64_t ch = 0; ch < channels && finite && rows > 0; ++ch) {
    const float *base = sram + c->in + (uint64_t)(ch_lo - c->in_c0 + ch) * c->in_ch_stride +
                        (uint64_t)((lo - c->in_row0) * c->w);
    float a;
    finite = block_absmax(base, rows, (uint64_t)c->w, c->w, &a);
    if (finite && a > amax) amax = a;
  }
  float scale = amax / 127.0f;
  for (int64_t ch = 0; ch < channels && finite && rows > 0; ++ch) {
    const float *base = sram + c->in + (uint64_t)(ch_lo - c->in_c0 + ch) * c->in_ch_stride +
                        (uint64_t)((lo - c->in_row0) * c->w);
    quantize_rows(base, rows, (uint64_t)c->w, c->w, scale, q + ch * rows * c->w);
  }
  const float *wscale = sram + c->wscale;
  for (int64_t j = 0; j < c->nf; ++j) {
    float *out = sram + c->out + (uint64_t)j * c->out_ch_stride;
    float bias = c->ep.bias == MLU_NONE ? 0.0f : sram[c->ep.bias + (uint64_t)j];
    if (!finite) {
      for (int64_t i = 0; i < plane; ++i) out[i] = NAN;
      continue;
    }
    memset(acc, 0, (size_t)plane * sizeof *acc);
    int64_t channel_base = ((c->f0 + j) / c->fg - g0) * c->cg; /* in q */
    const float *weights = sram + c->filter + (uint64_t)(j * taps);
    for (int64_t ky = 0; ky < c->kh; ++ky) {
      for (int64_t kx = 0; kx < c->kw; ++kx) {
        int64_t x_offset = kx * c->dw - c->pw, xlo, xhi;
        valid_columns(x_offset, c->sw, c->w, c->ow, &xlo, &xhi);
        if (xlo >= xhi) continue;
        for (int64_t r = 0; r < c->out_rows; ++r) {
          int64_t iy = (c->oy0 + r) * c->sh - c->ph + ky * c->dh;
          if (iy < 0 || iy >= c->h) continue; /* zero padding */
          int32_t *acc_row = acc + r * c->ow;
          for (int64_t ch = 0; ch < c->cg; ++ch) {
            int32_t weight = weight_of(weights[(ky * c->kw + kx) * c->cg + ch]);
            if (weight == 0) continue;
            const int8_t *in_row = q + ((channel_base + ch) * rows + (iy - lo)) * c->w +
                                   (xlo * c->sw + x_offset);
            for (int64_t ox = xlo; ox < xhi; ++ox) {
              acc_row[ox] += weight * (int32_t)in_row[(ox - xlo) * c->sw];
            }
          }
        }
      }
    }
    float dequant = scale * wscale[j];
    for (int64_t i = 0; i < plane; ++i) out[i] = (float)acc[i] * dequant + bias;
  }
  apply_epilogue(sram, &c->ep, c->out, c->out_ch_stride, c->nf, plane);
}

void mlu_kernel_matmul_int8(float *sram, const mlu_matmul *m, int8_t *q) {
  float amax = 0.0f;
  const float *a = sram + m->a;
  int finite = m->rows > 0 && m->k > 0 ? block_absmax(a, m->rows, m->a_stride, m->k, &amax) : 1;
  float scale = amax / 127.0f;
  if (finite) quantize_rows(a, m->rows, m->a_stride, m->k, scale, q);
  int8_t *column = q + m->rows * m->k;
  const float *wscale = sram + m->wscale;
  for (int64_t col = 0; col < m->cols; ++col) {
    const float *b = sram + m->b + (uint64_t)(col * m->k);
    for (int64_t k = 0; k < m->k; ++k) column[k] = (int8_t)weight_of(b[k]);
    float dequant = scale * wscale[col];
    float bias = m->ep.bias == MLU_NONE ? 0.0f : sram[m->ep.bias + (uint64_t)col];
    for (int64_t r = 0; r < m->rows; ++r) {
      float *out = sram + m->out + (uint64_t)r * m->out_stride + (uint64_t)col;
      if (!finite) {
        *out = NAN;
        continue;
      }
      const int8_t *qa = q + r * m->k;
      int32_t sum = 0;
      for (int64_t k = 0; k < m->k; ++k) sum += (int32_t)qa[k] * (int32_t)column[k];
      *out = (float)sum * dequant + bias;
    }
  }
  apply_epilogue(sram, &m->ep, m->out, m->out_stride, m->rows, m->cols);
}

uint64_t mlu_kernel_work_words(const mlu_insn *insn) {
  if (insn->dtype == MLU_DT_INT8) return 0;
  switch (insn->opcode) {
    case MLU_OP_CONV: return mlu_conv_work_words(&insn->u.conv);
    case MLU_OP_POOL: return mlu_pool_work_words(&insn->u.pool);
    case MLU_OP_MATMUL: return mlu_matmul_work_words(&insn->u.matmul);
    default: return 0;
  }
}

/* Arithmetic of an instruction, roughly, in multiply-adds or elements. */
static double insn_work(const mlu_insn *insn) {
  switch (insn->opcode) {
    case MLU_OP_CONV: {
      const mlu_conv *c = &insn->u.conv;
      return (double)c->nf * (double)c->out_rows * (double)c->ow * (double)c->kh * (double)c->kw *
             (double)c->cg;
    }
    case MLU_OP_MATMUL: {
      const mlu_matmul *m = &insn->u.matmul;
      return (double)m->rows * (double)m->cols * (double)m->k;
    }
    case MLU_OP_POOL: {
      const mlu_pool *p = &insn->u.pool;
      return (double)p->planes * (double)p->out_rows * (double)p->ow * (double)p->kh *
             (double)p->kw;
    }
    case MLU_OP_EWISE: return (double)insn->u.ewise.n;
    default: return 0.0;
  }
}

/* Work (insn_work) below which an instruction runs whole: some 10 us, below
 * which waking a helper costs more than it saves (on a loaded machine a 64K
 * threshold made SqueezeNet's quarter-width variant slower at 2 threads than
 * at 1); and the least work of one part when an instruction is split. */
#define SPLIT_WORK_MIN 131072.0
#define PART_WORK_MIN 32768.0

int mlu_kernel_parts(const mlu_insn *insn, int workers) {
  if (workers <= 1 || insn->dtype == MLU_DT_INT8) return 1;
  double work = insn_work(insn);
  if (work < SPLIT_WORK_MIN) return 1;
  /* MLU_PARTS_PER_WORKER parts per thread, so that a thread the system holds
   * back leaves its untaken parts to the others; never parts so small that
   * taking one costs more than computing it. */
  double most = work / PART_WORK_MIN;
  int parts = workers * MLU_PARTS_PER_WORKER;
  return (double)parts <= most ? parts : (most > (double)workers ? (int)most : workers);
}

void mlu_kernel_part(float *sram, const mlu_insn *insn, float *work, int part, int parts) {
  switch (insn->opcode) {
    case MLU_OP_CONV: mlu_kernel_conv(sram, &insn->u.conv, work, part, parts); break;
    case MLU_OP_MATMUL: mlu_kernel_matmul(sram, &insn->u.matmul, work, part, parts); break;
    case MLU_OP_POOL: mlu_kernel_pool(sram, &insn->u.pool, work, part, parts); break;
    case MLU_OP_EWISE: mlu_kernel_ewise(sram, &insn->u.ewise, part, parts); break;
    default: break;
  }
}
