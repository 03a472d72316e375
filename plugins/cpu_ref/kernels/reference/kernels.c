/*
 * Plain fp32 loops for the compute kernels of kernels.h that are not in
 * dense.c (activations, normalisations, softmax, element-wise arithmetic,
 * reductions, ...), and the window loop of pooling (cr_ref_pool_plane).
 * The data kernels are in data.c, the reference convolution, pooling,
 * FullyConnected and products in dense.c; the fast kernels in
 * kernels/fast/.
 *
 * These loops are the reference other accelerators are checked against, so
 * they aim to be obviously correct first and reasonably fast second: one
 * thread, no intrinsics, no ISA attributes. The element-wise loops that are
 * written to vectorise (selects by mask, a float exp, partial sums) are in
 * ../elementwise_loops.h, which fast/elementwise.c builds once per ISA for
 * the fast kernels of the same operators; both compute the same values.
 *
 * Values computed in double are narrowed to float by a cast. Under IEC 60559
 * arithmetic (C11 Annex F, which gcc and clang follow on the platforms
 * cpu_ref builds for) that rounds to nearest and gives +-infinity beyond
 * float's range, as numpy's astype does. Floats are never converted to
 * integers without a range check: that conversion is undefined when the
 * value does not fit.
 */
#include "kernels.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "elementwise_loops.h"
#include "reference.h"

static int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

static void fill(float *y, int64_t count, float value) {
  for (int64_t i = 0; i < count; ++i) y[i] = value;
}

/* ------------------------------------------------------------------------ */
/* Pooling                                                                   */
/* ------------------------------------------------------------------------ */

/* One pooling window along one axis: the input range [begin, end) it reads
 * and its extent before clipping to the input, which the AVG divisor uses
 * when padding counts. */
typedef struct cr_pool_window {
  int64_t begin;
  int64_t end;
  int64_t padded_extent;
} cr_pool_window;

static cr_pool_window pool_window_at(const cr_pool_params *params, int axis,
                                     int64_t o, int64_t size) {
  const int64_t start = o * params->stride[axis] - params->pad[axis];
  /* MXNet lets the window run past the padding only up to its far edge,
   * which matters for the "full" convention's last window. */
  const int64_t stop = min_i64(start + params->kernel[axis],
                               size + params->pad[axis]);
  cr_pool_window window;
  window.begin = max_i64(start, 0);
  window.end = max_i64(window.begin, min_i64(stop, size));
  window.padded_extent = stop - start;
  return window;
}

static float window_max(const float *x, const int64_t in[3],
                        const cr_pool_window window[3]) {
  float result = -FLT_MAX;
  for (int64_t d = window[0].begin; d < window[0].end; ++d) {
    for (int64_t h = window[1].begin; h < window[1].end; ++h) {
      const float *row = x + (d * in[1] + h) * in[2];
      for (int64_t w = window[2].begin; w < window[2].end; ++w) {
        if (row[w] > result) result = row[w];
      }
    }
  }
  return result;
}

static float window_sum(const float *x, const int64_t in[3],
                        const cr_pool_window window[3]) {
  float result = 0.0f;
  for (int64_t d = window[0].begin; d < window[0].end; ++d) {
    for (int64_t h = window[1].begin; h < window[1].end; ++h) {
      const float *row = x + (d * in[1] + h) * in[2];
      for (int64_t w = window[2].begin; w < window[2].end; ++w) {
        result += row[w];
      }
    }
  }
  return result;
}

static float window_average(const cr_pool_params *params, const float *x,
                            const int64_t in[3],
                            const cr_pool_window window[3]) {
  int64_t clipped_size = 1;
  int64_t padded_size = 1;
  for (int axis = 0; axis < 3; ++axis) {
    clipped_size *= window[axis].end - window[axis].begin;
    padded_size *= window[axis].padded_extent;
  }
  /* A window that sees no input averages nothing; 0 avoids dividing by 0. */
  if (clipped_size == 0) return 0.0f;
  const int64_t divisor = params->count_include_pad ? padded_size : clipped_size;
  return window_sum(x, in, window) / (float)divisor;
}

/* (sum of x^p over the window) ^ (1/p) in double, for p = 1, 2 or 3. x^3
 * keeps its sign and cbrt takes it back, as MXNet's lp pooling does. */
static float window_lp(int p, const float *x, const int64_t in[3],
                       const cr_pool_window window[3]) {
  double sum = 0.0;
  for (int64_t d = window[0].begin; d < window[0].end; ++d) {
    for (int64_t h = window[1].begin; h < window[1].end; ++h) {
      const float *row = x + (d * in[1] + h) * in[2];
      for (int64_t w = window[2].begin; w < window[2].end; ++w) {
        const double v = row[w];
        sum += p == 1 ? v : p == 2 ? v * v : v * v * v;
      }
    }
  }
  return (float)(p == 1 ? sum : p == 2 ? sqrt(sum) : cbrt(sum));
}

static float pool_window_value(const cr_pool_params *params, const float *x,
                               const int64_t in[3],
                               const cr_pool_window window[3]) {
  switch (params->type) {
    case CR_POOL_MAX:
      return window_max(x, in, window);
    case CR_POOL_SUM:
      return window_sum(x, in, window);
    case CR_POOL_AVG:
      return window_average(params, x, in, window);
    case CR_POOL_LP:
      return window_lp(params->p_value, x, in, window);
  }
  return 0.0f; /* unreachable for a valid cr_pool_type */
}

void cr_ref_pool_plane(const cr_pool_params *params, const float *x, const int64_t in[3],
                       float *y, const int64_t out[3]) {
  cr_pool_window window[3];
  for (int64_t od = 0; od < out[0]; ++od) {
    window[0] = pool_window_at(params, 0, od, in[0]);
    for (int64_t oh = 0; oh < out[1]; ++oh) {
      window[1] = pool_window_at(params, 1, oh, in[1]);
      float *y_row = y + (od * out[1] + oh) * out[2];
      for (int64_t ow = 0; ow < out[2]; ++ow) {
        window[2] = pool_window_at(params, 2, ow, in[2]);
        y_row[ow] = pool_window_value(params, x, in, window);
      }
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Elementwise                                                               */
/* ------------------------------------------------------------------------ */

/* Both branches only ever call exp on a non-positive argument, so neither
 * overflows, and for x < 0 the result keeps its precision instead of being
 * 1 - (something close to 1). */
static float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}

/* log(1 + exp(x)) = x + log(1 + exp(-x)): rewriting for x > 0 keeps exp
 * from overflowing for large x. */
static float softrelu(float x) {
  if (x > 0.0f) return x + log1pf(expf(-x));
  return log1pf(expf(x));
}

static float activate(cr_activation_type type, float x) {
  switch (type) {
    case CR_ACT_LOG_SIGMOID:
      return -softrelu(-x);
    case CR_ACT_MISH:
      return x * tanhf(softrelu(x));
    case CR_ACT_RELU:
      return x < 0.0f ? 0.0f : x; /* NaN stays NaN, as in MXNet and the fused epilogue */
    case CR_ACT_SIGMOID:
      return sigmoid(x);
    case CR_ACT_TANH:
      return tanhf(x);
    case CR_ACT_SOFTRELU:
      return softrelu(x);
    case CR_ACT_SOFTSIGN:
      return x / (1.0f + fabsf(x));
  }
  return x; /* unreachable for a valid cr_activation_type */
}

void cr_activation(cr_activation_type type, int64_t count, const float *x,
                   float *y) {
  if (activation_simple(type, count, x, y)) return;
  /* The others call libm per element; the switch is out of the loop. */
  switch (type) {
    case CR_ACT_SIGMOID:
      for (int64_t i = 0; i < count; ++i) y[i] = sigmoid(x[i]);
      return;
    case CR_ACT_TANH:
      for (int64_t i = 0; i < count; ++i) y[i] = tanhf(x[i]);
      return;
    case CR_ACT_SOFTRELU:
      for (int64_t i = 0; i < count; ++i) y[i] = softrelu(x[i]);
      return;
    default:
      for (int64_t i = 0; i < count; ++i) y[i] = activate(type, x[i]);
      return;
  }
}

void cr_batch_norm(int64_t outer, int64_t channels, int64_t inner,
                   const float *x, const float *gamma, const float *beta,
                   const float *mean, const float *var, double eps,
                   int fix_gamma, float *y) {
  for (int64_t c = 0; c < channels; ++c) {
    /* Folding gamma into the per-channel scale leaves one multiply per
     * element; the square root is taken in double since var + eps can be
     * tiny. */
    const float g = fix_gamma ? 1.0f : gamma[c];
    const float scale = (float)(g / sqrt((double)var[c] + eps));
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t base = (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        y[base + i] = (x[base + i] - mean[c]) * scale + beta[c];
      }
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Softmax                                                                   */
/* ------------------------------------------------------------------------ */

void cr_softmax(int64_t outer, int64_t length, int64_t inner,
                double temperature, int log, const float *x, float *y) {
  if (inner == 1 && temperature == 1.0 && !log) {
    softmax_rows(outer, length, x, y);
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t start = o * length * inner + i;
      softmax_strided(length, inner, temperature, log, x + start, y + start);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Element-wise arithmetic                                                   */
/* ------------------------------------------------------------------------ */

int cr_binary_is_predicate(cr_binary_op op) { return op >= CR_BINARY_EQUAL; }

/* The predicates, for any type whose comparisons are exact: floats, and
 * int64_t for the integer dtypes. */
#define PREDICATE(op, a, b)                               \
  ((op) == CR_BINARY_EQUAL           ? (a) == (b)         \
   : (op) == CR_BINARY_NOT_EQUAL     ? (a) != (b)         \
   : (op) == CR_BINARY_GREATER       ? (a) > (b)          \
   : (op) == CR_BINARY_GREATER_EQUAL ? (a) >= (b)         \
   : (op) == CR_BINARY_LESSER        ? (a) < (b)          \
   : (op) == CR_BINARY_LESSER_EQUAL  ? (a) <= (b)         \
   : (op) == CR_BINARY_LOGICAL_AND   ? ((a) != 0 && (b) != 0) \
   : (op) == CR_BINARY_LOGICAL_OR    ? ((a) != 0 || (b) != 0) \
                                     : (((a) != 0) != ((b) != 0)))

static int apply_predicate(cr_binary_op op, float a, float b) {
  return PREDICATE(op, a, b);
}

/* MXNet's mod, in double: fmod's remainder (exact) moved to the divisor's
 * sign, and 0 for a zero divisor. */
static double mxnet_mod(double a, double b) {
  if (b == 0.0) return 0.0;
  double r = fmod(a, b);
  if (r != 0.0 && (r < 0.0) != (b < 0.0)) r += b;
  return r;
}

static float apply_binary(cr_binary_op op, float a, float b) {
  switch (op) {
    case CR_BINARY_ADD:
      return a + b;
    case CR_BINARY_SUB:
      return a - b;
    case CR_BINARY_MUL:
      return a * b;
    case CR_BINARY_DIV:
      return a / b;
    case CR_BINARY_POWER:
      return (float)pow(a, b);
    case CR_BINARY_MAXIMUM:
      return a > b ? a : b;
    case CR_BINARY_MINIMUM:
      return a < b ? a : b;
    case CR_BINARY_MOD:
      return (float)mxnet_mod(a, b);
    case CR_BINARY_HYPOT:
      return (float)hypot(a, b);
    default:
      return apply_predicate(op, a, b) ? 1.0f : 0.0f;
  }
}

void cr_binary(cr_binary_op op, int64_t count, const float *a,
               const float *b, float *y) {
  if (is_simple_binary(op)) {
    binary_simple(op, count, a, b, y);
    return;
  }
  for (int64_t i = 0; i < count; ++i) y[i] = apply_binary(op, a[i], b[i]);
}

void cr_scalar_binary(cr_binary_op op, int reverse, int64_t count,
                      const float *x, float scalar, float *y) {
  if (is_simple_binary(op)) {
    scalar_binary_simple(op, reverse, count, x, scalar, y);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    y[i] = reverse ? apply_binary(op, scalar, x[i])
                   : apply_binary(op, x[i], scalar);
  }
}

void cr_add_n(int num, int64_t count, const float *const *x, float *y) {
  /* y may be x[0]: the first pass reads each x[0][i] before writing y[i],
   * and later passes no longer read x[0]. */
  if (num == 1) {
    if (y != x[0]) memcpy(y, x[0], (size_t)count * sizeof *y);
    return;
  }
  cr_binary(CR_BINARY_ADD, count, x[0], x[1], y);
  for (int k = 2; k < num; ++k) cr_binary(CR_BINARY_ADD, count, y, x[k], y);
}

void cr_broadcast_binary(cr_binary_op op, int ndim, const int64_t *dims,
                         const int64_t *a_strides, const int64_t *b_strides,
                         const float *a, const float *b, float *y) {
  const int last = ndim - 1;
  const int64_t row = dims[last];
  const int64_t rows = count_of(last, dims);
  const int64_t a_step = a_strides[last], b_step = b_strides[last];
  const int simple = is_simple_binary(op);
  if (row == 0) return;
  cr_walker w;
  walker_init(&w, last, dims, a_strides, b_strides);
  /* Each row (the innermost axis) as one contiguous loop where it can be:
   * both operands contiguous, or one of them repeated (a scalar op). */
  for (int64_t r = 0; r < rows; ++r, walker_next(&w)) {
    const float *a_row = a + w.offset[0];
    const float *b_row = b + w.offset[1];
    float *y_row = y + r * row;
    if (simple && a_step == 1 && b_step == 1) {
      binary_simple(op, row, a_row, b_row, y_row);
    } else if (simple && a_step == 1 && b_step == 0) {
      scalar_binary_simple(op, 0, row, a_row, b_row[0], y_row);
    } else if (simple && a_step == 0 && b_step == 1) {
      scalar_binary_simple(op, 1, row, b_row, a_row[0], y_row);
    } else {
      for (int64_t i = 0; i < row; ++i) {
        y_row[i] = apply_binary(op, a_row[i * a_step], b_row[i * b_step]);
      }
    }
  }
}

void cr_broadcast_predicate_int(cr_binary_op op, cr_dtype dtype, int ndim,
                                const int64_t *dims, const int64_t *a_strides,
                                const int64_t *b_strides, const void *a,
                                const void *b, void *y) {
  const int last = ndim - 1;
  const int64_t row = dims[last];
  const int64_t rows = count_of(last, dims);
  const int64_t a_step = a_strides[last], b_step = b_strides[last];
  if (row == 0) return;
  cr_walker w;
  walker_init(&w, last, dims, a_strides, b_strides);
  for (int64_t r = 0; r < rows; ++r, walker_next(&w)) {
    for (int64_t i = 0; i < row; ++i) {
      const int64_t left = cr_load_int(dtype, a, w.offset[0] + i * a_step);
      const int64_t right = cr_load_int(dtype, b, w.offset[1] + i * b_step);
      cr_store_int(dtype, y, r * row + i, PREDICATE(op, left, right) ? 1 : 0);
    }
  }
}

static double sigmoid_double(double x) {
  /* exp(-x) may overflow to infinity for very negative x, which gives the
   * correct limit 0. */
  return 1.0 / (1.0 + exp(-x));
}

static double sign_of(double x) {
  if (x > 0.0) return 1.0;
  if (x < 0.0) return -1.0;
  return x; /* 0, -0 and NaN are their own sign */
}

static double apply_unary(cr_unary_op op, double x) {
  switch (op) {
    case CR_UNARY_ABS:
      return fabs(x);
    case CR_UNARY_NEGATIVE:
      return -x;
    case CR_UNARY_SQUARE:
      return x * x;
    case CR_UNARY_RECIPROCAL:
      return 1.0 / x;
    case CR_UNARY_SQRT:
      return sqrt(x);
    case CR_UNARY_RSQRT:
      return 1.0 / sqrt(x);
    case CR_UNARY_CBRT:
      return cbrt(x);
    case CR_UNARY_EXP:
      return exp(x);
    case CR_UNARY_EXPM1:
      return expm1(x);
    case CR_UNARY_LOG:
      return log(x);
    case CR_UNARY_LOG1P:
      return log1p(x);
    case CR_UNARY_LOG2:
      return log2(x);
    case CR_UNARY_LOG10:
      return log10(x);
    case CR_UNARY_SIN:
      return sin(x);
    case CR_UNARY_COS:
      return cos(x);
    case CR_UNARY_TANH:
      return tanh(x);
    case CR_UNARY_SIGMOID:
      return sigmoid_double(x);
    case CR_UNARY_RELU:
      return x < 0.0 ? 0.0 : x;
    case CR_UNARY_ERF:
      return erf(x);
    case CR_UNARY_SIGN:
      return sign_of(x);
    case CR_UNARY_FLOOR:
      return floor(x);
    case CR_UNARY_CEIL:
      return ceil(x);
    case CR_UNARY_TRUNC:
      return trunc(x);
    case CR_UNARY_ROUND:
      return round(x);
    case CR_UNARY_RINT:
      return rint(x);
    case CR_UNARY_TAN:
      return tan(x);
    case CR_UNARY_ARCSIN:
      return asin(x);
    case CR_UNARY_ARCCOS:
      return acos(x);
    case CR_UNARY_ARCTAN:
      return atan(x);
    case CR_UNARY_SINH:
      return sinh(x);
    case CR_UNARY_COSH:
      return cosh(x);
    case CR_UNARY_ARCSINH:
      return asinh(x);
    case CR_UNARY_ARCCOSH:
      return acosh(x);
    case CR_UNARY_ARCTANH:
      return atanh(x);
    case CR_UNARY_DEGREES:
      return x * (180.0 / kPi);
    case CR_UNARY_RADIANS:
      return x * (kPi / 180.0);
    case CR_UNARY_RCBRT:
      return 1.0 / cbrt(x);
    case CR_UNARY_LOGICAL_NOT:
      return x == 0.0 ? 1.0 : 0.0;
  }
  return x; /* unreachable for a valid cr_unary_op */
}

void cr_unary(cr_unary_op op, int64_t count, const float *x, float *y) {
  if (unary_simple(op, count, x, y)) return;
  for (int64_t i = 0; i < count; ++i) y[i] = (float)apply_unary(op, x[i]);
}

void cr_hard_sigmoid(int swish, double alpha, double beta, int64_t count, const float *x,
                     float *y) {
  hard_sigmoid_loop(swish, (float)alpha, (float)beta, count, x, y);
}

void cr_clip(int64_t count, float low, float high, const float *x, float *y) {
  for (int64_t i = 0; i < count; ++i) {
    y[i] = x[i] > high ? high : (x[i] < low ? low : x[i]);
  }
}

void cr_fill(int64_t count, float value, float *y) { fill(y, count, value); }

/* ------------------------------------------------------------------------ */
/* Reductions                                                                */
/* ------------------------------------------------------------------------ */

/* Reduces the `count` values that walker w (over the reduced axes) visits
 * from base. */
static float reduce_values(cr_reduce_op op, const float *base, cr_walker *w,
                           int64_t count) {
  if (op == CR_REDUCE_SUM || op == CR_REDUCE_MEAN || op == CR_REDUCE_NANSUM) {
    double sum = 0.0;
    for (int64_t i = 0; i < count; ++i, walker_next(w)) {
      const float value = base[w->offset[0]];
      if (op != CR_REDUCE_NANSUM || !isnan(value)) sum += value;
    }
    if (op == CR_REDUCE_MEAN && count > 0) sum /= (double)count;
    return (float)sum;
  }
  if (op == CR_REDUCE_PROD || op == CR_REDUCE_NANPROD) {
    double product = 1.0;
    for (int64_t i = 0; i < count; ++i, walker_next(w)) {
      const float value = base[w->offset[0]];
      if (op != CR_REDUCE_NANPROD || !isnan(value)) product *= value;
    }
    return (float)product;
  }
  /* Every value is visited even after a NaN, so that the walker completes
   * its turn and starts the next output at offset 0. */
  float best = base[w->offset[0]];
  int saw_nan = 0;
  for (int64_t i = 0; i < count; ++i, walker_next(w)) {
    const float value = base[w->offset[0]];
    if (isnan(value)) {
      saw_nan = 1;
    } else if (op == CR_REDUCE_MAX ? value > best : value < best) {
      best = value;
    }
  }
  return saw_nan ? NAN : best;
}

void cr_reduce(cr_reduce_op op, int ndim, const int64_t *dims,
               const unsigned char *reduced, const float *x, float *y) {
  int64_t strides[CR_MAX_NDIM];
  int64_t kept_dims[CR_MAX_NDIM], kept_strides[CR_MAX_NDIM];
  int64_t gone_dims[CR_MAX_NDIM], gone_strides[CR_MAX_NDIM];
  int kept = 0, gone = 0;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= dims[d];
  }
  for (int d = 0; d < ndim; ++d) {
    if (reduced[d]) {
      gone_dims[gone] = dims[d];
      gone_strides[gone++] = strides[d];
    } else {
      kept_dims[kept] = dims[d];
      kept_strides[kept++] = strides[d];
    }
  }
  const int64_t outputs = count_of(kept, kept_dims);
  const int64_t per_output = count_of(gone, gone_dims);
  cr_walker outer, inner;
  walker_init(&outer, kept, kept_dims, kept_strides, NULL);
  walker_init(&inner, gone, gone_dims, gone_strides, NULL);
  for (int64_t o = 0; o < outputs; ++o, walker_next(&outer)) {
    /* A full turn of the inner walker brings it back to offset 0. */
    y[o] = reduce_values(op, x + outer.offset[0], &inner, per_output);
  }
}

/* ------------------------------------------------------------------------ */
/* Searching                                                                 */
/* ------------------------------------------------------------------------ */

void cr_arg_search(int is_max, int64_t outer, int64_t length, int64_t inner,
                   const float *x, float *y) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const float *xs = x + o * length * inner + i;
      int64_t best = 0;
      for (int64_t j = 1; j < length && !isnan(xs[best * inner]); ++j) {
        const float value = xs[j * inner];
        if (isnan(value) || (is_max ? value > xs[best * inner]
                                    : value < xs[best * inner])) {
          best = j;
        }
      }
      y[o * inner + i] = (float)best;
    }
  }
}

/* 1 when value a ranks strictly before value b: NaN ranks above every
 * number (and equal to NaN), so it comes first when descending and last
 * when ascending. */
static int ranks_before(float a, float b, int ascending) {
  const int a_nan = isnan(a), b_nan = isnan(b);
  if (a_nan || b_nan) return ascending ? !a_nan && b_nan : a_nan && !b_nan;
  return ascending ? a < b : a > b;
}

/* Stable merge sort of the positions order[0 .. count) by the values they
 * point at (row[p * stride]), using scratch of count entries: equal values
 * keep their positions' order. */
static void sort_positions(int64_t *order, int64_t *scratch, int64_t count,
                           const float *row, int64_t stride, int ascending) {
  for (int64_t width = 1; width < count; width *= 2) {
    for (int64_t left = 0; left < count; left += 2 * width) {
      const int64_t middle = min_i64(left + width, count);
      const int64_t right = min_i64(left + 2 * width, count);
      int64_t a = left, b = middle, out = left;
      while (a < middle && b < right) {
        /* Take from the right run only when it ranks strictly first. */
        const int take_b = ranks_before(row[order[b] * stride],
                                        row[order[a] * stride], ascending);
        scratch[out++] = take_b ? order[b++] : order[a++];
      }
      while (a < middle) scratch[out++] = order[a++];
      while (b < right) scratch[out++] = order[b++];
    }
    memcpy(order, scratch, (size_t)count * sizeof *order);
  }
}

int cr_topk(int64_t outer, int64_t length, int64_t inner, int64_t k,
            int ascending, const float *x, float *values,
            cr_dtype index_dtype, void *indices, float *mask) {
  const size_t entries = length > 0 ? (size_t)length : 1;
  int64_t *order = malloc(entries * sizeof *order);
  int64_t *scratch = malloc(entries * sizeof *scratch);
  if (order == NULL || scratch == NULL) {
    free(order);
    free(scratch);
    return -1;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const float *row = x + o * length * inner + i;
      for (int64_t p = 0; p < length; ++p) order[p] = p;
      sort_positions(order, scratch, length, row, inner, ascending);
      for (int64_t r = 0; r < k; ++r) {
        const int64_t at = (o * k + r) * inner + i;
        if (values != NULL) values[at] = row[order[r] * inner];
        if (indices != NULL) cr_store_int(index_dtype, indices, at, order[r]);
      }
      if (mask != NULL) {
        float *mask_row = mask + o * length * inner + i;
        for (int64_t p = 0; p < length; ++p) mask_row[p * inner] = 0.0f;
        for (int64_t r = 0; r < k; ++r) mask_row[order[r] * inner] = 1.0f;
      }
    }
  }
  free(order);
  free(scratch);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Upsampling                                                                */
/* ------------------------------------------------------------------------ */

void cr_upsampling_sum(int num, const float *const *x, const int64_t *factors,
                       int64_t batch, int64_t channels, int64_t height,
                       int64_t width, float *y) {
  for (int64_t plane = 0; plane < batch * channels; ++plane) {
    for (int64_t h = 0; h < height; ++h) {
      for (int64_t w = 0; w < width; ++w) {
        double sum = 0.0;
        for (int k = 0; k < num; ++k) {
          const int64_t f = factors[k];
          const int64_t in_height = height / f, in_width = width / f;
          sum += x[k][(plane * in_height + h / f) * in_width + w / f];
        }
        y[(plane * height + h) * width + w] = (float)sum;
      }
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Normalisation and activations                                             */
/* ------------------------------------------------------------------------ */

/* Mean and biased variance of the count values x[0], x[stride], ..., in
 * double: two passes (the mean, then the mean squared deviation) rather
 * than E[x^2] - E[x]^2, which cancels badly when the mean is large. count 0
 * gives 0 and 0. */
static void moments(const float *x, int64_t count, int64_t stride,
                    double *mean, double *variance) {
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += x[i * stride];
  const double mu = count > 0 ? sum / (double)count : 0.0;
  double squares = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    const double d = x[i * stride] - mu;
    squares += d * d;
  }
  *mean = mu;
  *variance = count > 0 ? squares / (double)count : 0.0;
}

void cr_layer_norm(int64_t outer, int64_t channels, int64_t inner,
                   const float *x, const float *gamma, const float *beta,
                   double eps, float *y, float *mean, float *std) {
  if (inner == 1 && channels > 0) {
    layer_norm_rows(outer, channels, x, gamma, beta, eps, y, mean, std);
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const float *xs = x + o * channels * inner + i;
      float *ys = y + o * channels * inner + i;
      double mu, variance;
      moments(xs, channels, inner, &mu, &variance);
      const double sigma = sqrt(variance + eps);
      for (int64_t c = 0; c < channels; ++c) {
        ys[c * inner] =
            (float)((xs[c * inner] - mu) / sigma * gamma[c] + beta[c]);
      }
      if (mean != NULL) mean[o * inner + i] = (float)mu;
      if (std != NULL) std[o * inner + i] = (float)sigma;
    }
  }
}

void cr_instance_norm(int64_t batch, int64_t channels, int64_t spatial,
                      const float *x, const float *gamma, const float *beta,
                      double eps, float *y) {
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t base = (n * channels + c) * spatial;
      double mu, variance;
      moments(x + base, spatial, 1, &mu, &variance);
      const double sigma = sqrt(variance + eps);
      for (int64_t i = 0; i < spatial; ++i) {
        y[base + i] =
            (float)((x[base + i] - mu) / sigma * gamma[c] + beta[c]);
      }
    }
  }
}

/* SELU's constants (Klambauer et al.), as MXNet spells them. */
static const double kSeluScale = 1.0507009873554804934193349852946;
static const double kSeluAlpha = 1.6732632423543772848170429916717;

static double elu(double x, double alpha) {
  return x > 0.0 ? x : alpha * expm1(x);
}

static double leaky_value(cr_leaky_type type, double slope, double x) {
  switch (type) {
    case CR_LEAKY_LEAKY:
      return x > 0.0 ? x : x * slope;
    case CR_LEAKY_ELU:
      return elu(x, slope);
    case CR_LEAKY_SELU:
      return kSeluScale * elu(x, kSeluAlpha);
    case CR_LEAKY_GELU:
      return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  }
  return x; /* unreachable for a valid cr_leaky_type */
}

void cr_leaky_relu(cr_leaky_type type, double slope, int64_t count,
                   const float *x, float *y) {
  if (type == CR_LEAKY_GELU) {
    gelu_float(count, x, y);
    return;
  }
  if (type == CR_LEAKY_LEAKY) {
    leaky_loop(slope, count, x, y);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    y[i] = (float)leaky_value(type, slope, x[i]);
  }
}

void cr_prelu(int64_t outer, int64_t channels, int64_t inner, const float *x,
              const float *gamma, int64_t outer_step, int64_t channel_step,
              float *y) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t base = (o * channels + c) * inner;
      const double slope = gamma[o * outer_step + c * channel_step];
      cr_leaky_relu(CR_LEAKY_LEAKY, slope, inner, x + base, y + base);
    }
  }
}
