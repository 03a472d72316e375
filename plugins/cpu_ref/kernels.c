/*
 * Straightforward fp32 implementations of the kernels in kernels.h.
 *
 * These loops are the reference other accelerators are checked against, so
 * they aim to be obviously correct first and reasonably fast second. Results
 * never depend on num_threads: each output value is computed by one thread,
 * always in the same order.
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
#include <string.h>

#include "parallel.h"

/* Creating a thread costs tens of microseconds, about as much as this many
 * multiply-adds, so smaller jobs are not worth splitting that finely. */
enum { kMinWorkPerThread = 1 << 16 };

static int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

static int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The number of threads worth using for about `work` multiply-adds. */
static int threads_for_work(int num_threads, int64_t work) {
  const int64_t useful = work / kMinWorkPerThread;
  if (useful <= 1) return 1;
  return useful < num_threads ? (int)useful : num_threads;
}

static void fill(float *y, int64_t count, float value) {
  for (int64_t i = 0; i < count; ++i) y[i] = value;
}

/* ------------------------------------------------------------------------ */
/* Convolution                                                               */
/* ------------------------------------------------------------------------ */

/* A half-open range of output positions along one axis. */
typedef struct cr_span {
  int64_t begin;
  int64_t end;
} cr_span;

/* How one kernel tap maps outputs to inputs along one axis: output o reads
 * input o * stride + offset, which lies inside the input exactly for the
 * outputs in `inside`; the others read zero padding. */
typedef struct cr_tap_axis {
  int64_t stride;
  int64_t offset;
  cr_span inside;
} cr_tap_axis;

static cr_tap_axis make_tap_axis(const cr_conv_params *params, int axis,
                                 int64_t tap, int64_t in_size,
                                 int64_t out_size) {
  cr_tap_axis t;
  t.stride = params->stride[axis];
  t.offset = tap * params->dilate[axis] - params->pad[axis];
  /* Smallest o with o * stride + offset >= 0. */
  t.inside.begin = t.offset >= 0 ? 0 : (-t.offset + t.stride - 1) / t.stride;
  /* One past the largest o with o * stride + offset <= in_size - 1. */
  const int64_t last_reach = in_size - 1 - t.offset;
  t.inside.end =
      last_reach >= 0 ? min_i64(out_size, last_reach / t.stride + 1) : 0;
  if (t.inside.end < t.inside.begin) t.inside.end = t.inside.begin;
  return t;
}

/* y += weight * (the input seen through one kernel tap). Only outputs whose
 * input lies inside the image are visited, since padding adds nothing; this
 * keeps bounds checks out of the innermost loop, which runs along an output
 * row. */
static void accumulate_tap(float weight, const cr_tap_axis tap[3],
                           const float *x, const int64_t in[3], float *y,
                           const int64_t out[3]) {
  for (int64_t od = tap[0].inside.begin; od < tap[0].inside.end; ++od) {
    const int64_t id = od * tap[0].stride + tap[0].offset;
    for (int64_t oh = tap[1].inside.begin; oh < tap[1].inside.end; ++oh) {
      const int64_t ih = oh * tap[1].stride + tap[1].offset;
      const float *x_row = x + (id * in[1] + ih) * in[2];
      float *y_row = y + (od * out[1] + oh) * out[2];
      for (int64_t ow = tap[2].inside.begin; ow < tap[2].inside.end; ++ow) {
        y_row[ow] += weight * x_row[ow * tap[2].stride + tap[2].offset];
      }
    }
  }
}

/* y (one output plane) += one input channel convolved with its kernel
 * slice w (KD x KH x KW). Taps are the outer loops so that each tap's
 * in-bounds output range is worked out once, not per output. */
static void accumulate_channel(const cr_conv_params *params, const float *x,
                               const int64_t in[3], const float *w, float *y,
                               const int64_t out[3]) {
  const int64_t *k = params->kernel;
  for (int64_t kd = 0; kd < k[0]; ++kd) {
    for (int64_t kh = 0; kh < k[1]; ++kh) {
      for (int64_t kw = 0; kw < k[2]; ++kw) {
        const cr_tap_axis tap[3] = {
            make_tap_axis(params, 0, kd, in[0], out[0]),
            make_tap_axis(params, 1, kh, in[1], out[1]),
            make_tap_axis(params, 2, kw, in[2], out[2]),
        };
        accumulate_tap(w[(kd * k[1] + kh) * k[2] + kw], tap, x, in, y, out);
      }
    }
  }
}

typedef struct cr_conv_task {
  const cr_conv_params *params;
  const int64_t *x_shape;
  const float *x;
  const float *w;
  const float *bias;
  const int64_t *y_shape;
  float *y;
} cr_conv_task;

static void convolve_plane(const cr_conv_task *task, int64_t n, int64_t o) {
  const cr_conv_params *params = task->params;
  const int64_t channels = task->x_shape[1];
  const int64_t *in = task->x_shape + 2;
  const int64_t outputs = task->y_shape[1];
  const int64_t *out = task->y_shape + 2;
  const int64_t in_plane = in[0] * in[1] * in[2];
  const int64_t out_plane = out[0] * out[1] * out[2];
  const int64_t kernel_size =
      params->kernel[0] * params->kernel[1] * params->kernel[2];

  /* Output o belongs to group o / (outputs per group) and sees only that
   * group's slice of the input channels. */
  const int64_t group_channels = channels / params->num_group;
  const int64_t group = o / (outputs / params->num_group);
  const float *x = task->x + (n * channels + group * group_channels) * in_plane;
  const float *w = task->w + o * group_channels * kernel_size;
  float *y = task->y + (n * outputs + o) * out_plane;

  fill(y, out_plane, task->bias != NULL ? task->bias[o] : 0.0f);
  for (int64_t c = 0; c < group_channels; ++c) {
    accumulate_channel(params, x + c * in_plane, in, w + c * kernel_size, y,
                       out);
  }
}

static void convolve_planes(void *context, int64_t begin, int64_t end) {
  const cr_conv_task *task = context;
  const int64_t outputs = task->y_shape[1];
  for (int64_t plane = begin; plane < end; ++plane) {
    convolve_plane(task, plane / outputs, plane % outputs);
  }
}

void cr_convolution(const cr_conv_params *params, const int64_t x_shape[5],
                    const float *x, const float *w, const float *bias,
                    const int64_t y_shape[5], float *y, int num_threads) {
  cr_conv_task task = {params, x_shape, x, w, bias, y_shape, y};
  const int64_t planes = y_shape[0] * y_shape[1];
  const int64_t work = planes * y_shape[2] * y_shape[3] * y_shape[4] *
                       (x_shape[1] / params->num_group) * params->kernel[0] *
                       params->kernel[1] * params->kernel[2];
  cr_parallel_for(threads_for_work(num_threads, work), planes, convolve_planes,
                  &task);
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
  }
  return 0.0f; /* unreachable for a valid cr_pool_type */
}

typedef struct cr_pool_task {
  const cr_pool_params *params;
  const int64_t *x_shape;
  const float *x;
  const int64_t *y_shape;
  float *y;
} cr_pool_task;

static void pool_plane(const cr_pool_params *params, const float *x,
                       const int64_t in[3], float *y, const int64_t out[3]) {
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

static void pool_planes(void *context, int64_t begin, int64_t end) {
  const cr_pool_task *task = context;
  const int64_t *in = task->x_shape + 2;
  const int64_t *out = task->y_shape + 2;
  const int64_t in_plane = in[0] * in[1] * in[2];
  const int64_t out_plane = out[0] * out[1] * out[2];
  for (int64_t plane = begin; plane < end; ++plane) {
    pool_plane(task->params, task->x + plane * in_plane, in,
               task->y + plane * out_plane, out);
  }
}

void cr_pooling(const cr_pool_params *params, const int64_t x_shape[5],
                const float *x, const int64_t y_shape[5], float *y,
                int num_threads) {
  cr_pool_task task = {params, x_shape, x, y_shape, y};
  const int64_t planes = x_shape[0] * x_shape[1];
  const int64_t work = planes * y_shape[2] * y_shape[3] * y_shape[4] *
                       params->kernel[0] * params->kernel[1] *
                       params->kernel[2];
  cr_parallel_for(threads_for_work(num_threads, work), planes, pool_planes,
                  &task);
}

/* ------------------------------------------------------------------------ */
/* FullyConnected                                                            */
/* ------------------------------------------------------------------------ */

typedef struct cr_fc_task {
  int64_t in_dim;
  int64_t out_dim;
  const float *x;
  const float *w;
  const float *bias;
  float *y;
} cr_fc_task;

static float dot(const float *a, const float *b, int64_t count) {
  float sum = 0.0f;
  for (int64_t i = 0; i < count; ++i) sum += a[i] * b[i];
  return sum;
}

/* y[row, column]: the input row against the weight row of that column; both
 * are contiguous because w is stored out_dim x in_dim. */
static void fc_output(const cr_fc_task *task, int64_t row, int64_t column) {
  const float *x_row = task->x + row * task->in_dim;
  const float *w_row = task->w + column * task->in_dim;
  const float bias = task->bias != NULL ? task->bias[column] : 0.0f;
  task->y[row * task->out_dim + column] =
      bias + dot(x_row, w_row, task->in_dim);
}

static void fc_rows(void *context, int64_t begin, int64_t end) {
  const cr_fc_task *task = context;
  for (int64_t row = begin; row < end; ++row) {
    for (int64_t column = 0; column < task->out_dim; ++column) {
      fc_output(task, row, column);
    }
  }
}

static void fc_columns_of_row0(void *context, int64_t begin, int64_t end) {
  const cr_fc_task *task = context;
  for (int64_t column = begin; column < end; ++column) {
    fc_output(task, 0, column);
  }
}

void cr_fully_connected(int64_t batch, int64_t in_dim, int64_t out_dim,
                        const float *x, const float *w, const float *bias,
                        float *y, int num_threads) {
  cr_fc_task task = {in_dim, out_dim, x, w, bias, y};
  const int threads = threads_for_work(num_threads, batch * in_dim * out_dim);
  /* A single input row (typical for inference) gives nothing to split by
   * rows, so its output columns are shared out instead. */
  if (batch == 1) {
    cr_parallel_for(threads, out_dim, fc_columns_of_row0, &task);
  } else {
    cr_parallel_for(threads, batch, fc_rows, &task);
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
    case CR_ACT_RELU:
      return x > 0.0f ? x : 0.0f;
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
  for (int64_t i = 0; i < count; ++i) y[i] = activate(type, x[i]);
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

/* Softmax (or with log set, log-softmax) of the `length` values x[0],
 * x[stride], ... Subtracting the largest scaled value keeps exp from
 * overflowing; taking that maximum after dividing by the temperature keeps
 * this right for negative temperatures too. The sum is in double so long
 * rows do not lose the small terms. Each y[i] is written only after x[i] is
 * last read, so y may equal x. */
static void softmax_strided(int64_t length, int64_t stride,
                            double temperature, int log_output,
                            const float *x, float *y) {
  double max_scaled = -INFINITY;
  for (int64_t i = 0; i < length; ++i) {
    max_scaled = fmax(max_scaled, x[i * stride] / temperature);
  }
  double sum = 0.0;
  for (int64_t i = 0; i < length; ++i) {
    sum += exp(x[i * stride] / temperature - max_scaled);
  }
  /* log_softmax = shifted - log(sum): exact for the largest entries, where
   * log(softmax) of a rounded probability would not be. */
  const double log_sum = log(sum);
  for (int64_t i = 0; i < length; ++i) {
    const double shifted = x[i * stride] / temperature - max_scaled;
    y[i * stride] =
        (float)(log_output ? shifted - log_sum : exp(shifted) / sum);
  }
}

void cr_softmax(int64_t outer, int64_t length, int64_t inner,
                double temperature, int log, const float *x, float *y) {
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
  }
  return a; /* unreachable for a valid cr_binary_op */
}

void cr_binary(cr_binary_op op, int64_t count, const float *a,
               const float *b, float *y) {
  for (int64_t i = 0; i < count; ++i) y[i] = apply_binary(op, a[i], b[i]);
}

void cr_scalar_binary(cr_binary_op op, int reverse, int64_t count,
                      const float *x, float scalar, float *y) {
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

/* Walks the leading ndim axes of an index space in row-major order, keeping
 * the element offsets of two strided operands; the kernels below run their
 * innermost axis as a plain loop and use this for the axes around it. */
typedef struct cr_walker {
  int ndim;
  int64_t dims[CR_MAX_NDIM];
  int64_t strides[2][CR_MAX_NDIM];
  int64_t index[CR_MAX_NDIM];
  int64_t offset[2];
} cr_walker;

static void walker_init(cr_walker *w, int ndim, const int64_t *dims,
                        const int64_t *strides0, const int64_t *strides1) {
  w->ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    w->dims[d] = dims[d];
    w->strides[0][d] = strides0[d];
    w->strides[1][d] = strides1 != NULL ? strides1[d] : 0;
    w->index[d] = 0;
  }
  w->offset[0] = w->offset[1] = 0;
}

/* Advances to the next position (an odometer: the last axis turns fastest).
 * Past the last position the offsets return to 0, which callers never use:
 * they count positions instead. */
static void walker_next(cr_walker *w) {
  for (int d = w->ndim - 1; d >= 0; --d) {
    w->offset[0] += w->strides[0][d];
    w->offset[1] += w->strides[1][d];
    if (++w->index[d] < w->dims[d]) return;
    w->offset[0] -= w->strides[0][d] * w->dims[d];
    w->offset[1] -= w->strides[1][d] * w->dims[d];
    w->index[d] = 0;
  }
}

static int64_t count_of(int ndim, const int64_t *dims) {
  int64_t count = 1;
  for (int d = 0; d < ndim; ++d) count *= dims[d];
  return count;
}

void cr_broadcast_binary(cr_binary_op op, int ndim, const int64_t *dims,
                         const int64_t *a_strides, const int64_t *b_strides,
                         const float *a, const float *b, float *y) {
  const int last = ndim - 1;
  const int64_t row = dims[last];
  const int64_t rows = count_of(last, dims);
  const int64_t a_step = a_strides[last], b_step = b_strides[last];
  if (row == 0) return;
  cr_walker w;
  walker_init(&w, last, dims, a_strides, b_strides);
  for (int64_t r = 0; r < rows; ++r, walker_next(&w)) {
    const float *a_row = a + w.offset[0];
    const float *b_row = b + w.offset[1];
    float *y_row = y + r * row;
    for (int64_t i = 0; i < row; ++i) {
      y_row[i] = apply_binary(op, a_row[i * a_step], b_row[i * b_step]);
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
  }
  return x; /* unreachable for a valid cr_unary_op */
}

void cr_unary(cr_unary_op op, int64_t count, const float *x, float *y) {
  for (int64_t i = 0; i < count; ++i) y[i] = (float)apply_unary(op, x[i]);
}

void cr_clip(int64_t count, float low, float high, const float *x, float *y) {
  for (int64_t i = 0; i < count; ++i) {
    y[i] = x[i] > high ? high : (x[i] < low ? low : x[i]);
  }
}

void cr_fill(int64_t count, float value, float *y) { fill(y, count, value); }

/* ------------------------------------------------------------------------ */
/* Moving data                                                               */
/* ------------------------------------------------------------------------ */

void cr_copy_rows(int64_t rows, int64_t width, const float *x,
                  int64_t x_stride, float *y, int64_t y_stride) {
  if (width == 0) return;
  for (int64_t r = 0; r < rows; ++r) {
    memcpy(y + r * y_stride, x + r * x_stride, (size_t)width * sizeof *y);
  }
}

void cr_copy_strided(int ndim, const int64_t *dims, const int64_t *x_strides,
                     const float *x, float *y) {
  const int last = ndim - 1;
  const int64_t row = dims[last], step = x_strides[last];
  const int64_t rows = count_of(last, dims);
  if (row == 0) return;
  cr_walker w;
  walker_init(&w, last, dims, x_strides, NULL);
  for (int64_t r = 0; r < rows; ++r, walker_next(&w)) {
    const float *x_row = x + w.offset[0];
    float *y_row = y + r * row;
    for (int64_t i = 0; i < row; ++i) y_row[i] = x_row[i * step];
  }
}

/* ------------------------------------------------------------------------ */
/* Reductions                                                                */
/* ------------------------------------------------------------------------ */

/* Reduces the `count` values that walker w (over the reduced axes) visits
 * from base. */
static float reduce_values(cr_reduce_op op, const float *base, cr_walker *w,
                           int64_t count) {
  if (op == CR_REDUCE_SUM || op == CR_REDUCE_MEAN) {
    double sum = 0.0;
    for (int64_t i = 0; i < count; ++i, walker_next(w)) {
      sum += base[w->offset[0]];
    }
    if (op == CR_REDUCE_MEAN && count > 0) sum /= (double)count;
    return (float)sum;
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
/* Matrix products                                                           */
/* ------------------------------------------------------------------------ */

typedef struct cr_matmul_task {
  int64_t m, n, k;
  int transpose_a, transpose_b;
  const float *a;
  const float *b;
  float *y;
} cr_matmul_task;

/* Rows [begin, end) of all the stacked products, row r being row r % m of
 * product r / m. */
static void matmul_rows(void *context, int64_t begin, int64_t end) {
  const cr_matmul_task *t = context;
  /* Element (i, p) of A and (p, j) of B, for either storage order. */
  const int64_t a_row_step = t->transpose_a ? 1 : t->k;
  const int64_t a_inner_step = t->transpose_a ? t->m : 1;
  const int64_t b_inner_step = t->transpose_b ? 1 : t->n;
  const int64_t b_column_step = t->transpose_b ? t->k : 1;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t pair = r / t->m, i = r % t->m;
    const float *a = t->a + pair * t->m * t->k + i * a_row_step;
    const float *b = t->b + pair * t->k * t->n;
    float *y_row = t->y + r * t->n;
    for (int64_t j = 0; j < t->n; ++j) {
      const float *b_column = b + j * b_column_step;
      double sum = 0.0;
      for (int64_t p = 0; p < t->k; ++p) {
        sum += (double)a[p * a_inner_step] * b_column[p * b_inner_step];
      }
      y_row[j] = (float)sum;
    }
  }
}

void cr_matmul(int64_t batch, int64_t m, int64_t n, int64_t k,
               int transpose_a, int transpose_b, const float *a,
               const float *b, float *y, int num_threads) {
  cr_matmul_task task = {m, n, k, transpose_a, transpose_b, a, b, y};
  const int64_t rows = batch * m;
  if (rows == 0 || n == 0) return;
  /* rows * n is the output's size, which exists in memory; times k it
   * might not fit in 64 bits for absurd shapes, so saturate. */
  const int64_t outputs = rows * n;
  const int64_t work =
      k > 0 && outputs > INT64_MAX / k ? INT64_MAX : outputs * k;
  cr_parallel_for(threads_for_work(num_threads, work), rows, matmul_rows,
                  &task);
}

/* ------------------------------------------------------------------------ */
/* Normalisation and activations                                             */
/* ------------------------------------------------------------------------ */

void cr_layer_norm(int64_t outer, int64_t channels, int64_t inner,
                   const float *x, const float *gamma, const float *beta,
                   double eps, float *y, float *mean, float *std) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const float *xs = x + o * channels * inner + i;
      float *ys = y + o * channels * inner + i;
      /* Two passes (mean, then the mean squared deviation) rather than
       * E[x^2] - E[x]^2, which cancels badly when the mean is large. */
      double sum = 0.0;
      for (int64_t c = 0; c < channels; ++c) sum += xs[c * inner];
      const double mu = channels > 0 ? sum / (double)channels : 0.0;
      double squares = 0.0;
      for (int64_t c = 0; c < channels; ++c) {
        const double d = xs[c * inner] - mu;
        squares += d * d;
      }
      const double sigma =
          sqrt((channels > 0 ? squares / (double)channels : 0.0) + eps);
      for (int64_t c = 0; c < channels; ++c) {
        ys[c * inner] =
            (float)((xs[c * inner] - mu) / sigma * gamma[c] + beta[c]);
      }
      if (mean != NULL) mean[o * inner + i] = (float)mu;
      if (std != NULL) std[o * inner + i] = (float)sigma;
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

/* The weight row an index selects: truncated toward zero and clipped, the
 * comparisons done in double before any conversion, since converting a
 * float outside int64_t's range (or NaN) to an integer is undefined. */
static int64_t embedding_row(float index, int64_t input_dim) {
  const double value = trunc((double)index);
  if (!(value > 0.0)) return 0; /* negative, zero or NaN */
  if (value >= (double)(input_dim - 1)) return input_dim - 1;
  return (int64_t)value;
}

void cr_embedding(int64_t count, const float *indices, int64_t input_dim,
                  int64_t output_dim, const float *weight, float *y) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = embedding_row(indices[i], input_dim);
    memcpy(y + i * output_dim, weight + row * output_dim,
           (size_t)output_dim * sizeof *y);
  }
}
