/*
 * Straightforward fp32 implementations of the kernels in kernels.h.
 *
 * These loops are the reference other accelerators are checked against, so
 * they aim to be obviously correct first and reasonably fast second. Results
 * never depend on num_threads: each output value is computed by one thread,
 * always in the same order.
 */
#include "kernels.h"

#include <float.h>
#include <math.h>
#include <stddef.h>

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

void cr_add(int64_t count, const float *a, const float *b, float *y) {
  for (int64_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
}

/* ------------------------------------------------------------------------ */
/* Softmax                                                                   */
/* ------------------------------------------------------------------------ */

/* Softmax of the `length` values x[0], x[stride], ... Subtracting the
 * largest scaled value keeps exp from overflowing; taking that maximum after
 * dividing by the temperature keeps this right for negative temperatures
 * too. The sum is in double so long rows do not lose the small terms. Each
 * y[i] is written only after x[i] is last read, so y may equal x. */
static void softmax_strided(int64_t length, int64_t stride,
                            double temperature, const float *x, float *y) {
  double max_scaled = -INFINITY;
  for (int64_t i = 0; i < length; ++i) {
    max_scaled = fmax(max_scaled, x[i * stride] / temperature);
  }
  double sum = 0.0;
  for (int64_t i = 0; i < length; ++i) {
    const double e = exp(x[i * stride] / temperature - max_scaled);
    y[i * stride] = (float)e;
    sum += e;
  }
  for (int64_t i = 0; i < length; ++i) {
    y[i * stride] = (float)(y[i * stride] / sum);
  }
}

void cr_softmax(int64_t outer, int64_t length, int64_t inner,
                double temperature, const float *x, float *y) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t start = o * length * inner + i;
      softmax_strided(length, inner, temperature, x + start, y + start);
    }
  }
}
