/*
 * The template's operators, all float32, NCHW, at operator version 1:
 * Convolution (2-D, groups, stride, pad, dilation), FullyConnected,
 * Activation(relu), elemwise_add, Flatten, Pooling (2-D max/avg, valid or
 * full convention). Semantics are MXNet's, as the host's CPU operators
 * (src/acc_host/ops) define them.
 *
 * tp_op_prepare() is the one place that decides what the template runs:
 * supportedOps(), loadModel() and accGetExecutor() all ask it. It reads the
 * attributes that change the result (and refuses values it does not
 * implement), ignores the others (cudnn_tune, workspace...), and computes
 * the output shape from the inputs' to compare it with the host's
 * (check_shape bounds every shape first). The loops are written to be read,
 * not to be fast.
 */
#include <stdint.h>
#include <string.h>

#include "attrs.h"
#include "status.h"
#include "template.h"
#include "tensor.h"

#define TP_OP_VERSION "1" /* the host's version of each operator, as implemented here */
#define TP_MAX_WINDOW 4096 /* largest kernel, stride, pad or dilation accepted */

const char tp_op_list[] = "Activation:1,Convolution:1,Flatten:1,FullyConnected:1,Pooling:1,"
                          "elemwise_add:1";

static const struct {
  const char *name;
  tp_kind kind;
  int min_inputs, max_inputs;
} kOps[] = {
    {"Convolution", TP_CONV, 2, 3}, {"FullyConnected", TP_FC, 2, 3},
    {"Activation", TP_RELU, 1, 1},  {"elemwise_add", TP_ADD, 2, 2},
    {"Flatten", TP_FLATTEN, 1, 1},  {"Pooling", TP_POOL, 1, 1},
};

/* The attributes of one call. */
typedef struct attr_list {
  const char *const *keys, *const *vals;
  size_t count;
} attr_list;

/* The value of key, or NULL when absent or "None". */
static const char *get(const attr_list *a, const char *key) {
  for (size_t i = 0; i < a->count; ++i) {
    if (strcmp(a->keys[i], key) == 0) return acc_attr_is_none(a->vals[i]) ? NULL : a->vals[i];
  }
  return NULL;
}

static int bad_attr(const char *op, const char *key, const char *value) {
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: attribute %s=\"%s\" is not valid here", op, key,
                  value);
}

/* A boolean attribute, fallback when absent. */
static int get_bool(const char *op, const attr_list *a, const char *key, int fallback, int *out) {
  const char *text = get(a, key);
  *out = fallback;
  if (text != NULL && acc_attr_bool(text, out) != 0) return bad_attr(op, key, text);
  return MX_ACC_OK;
}

/* An integer attribute in [min, max]; required when fallback < 0. */
static int get_int(const char *op, const attr_list *a, const char *key, int64_t fallback,
                   int64_t min, int64_t max, int64_t *out) {
  const char *text = get(a, key);
  *out = fallback;
  if (text == NULL && fallback < 0) return bad_attr(op, key, "(missing)");
  if (text != NULL && (acc_attr_int(text, out) != 0 || *out < min || *out > max)) {
    return bad_attr(op, key, text);
  }
  return MX_ACC_OK;
}

/* A 2-D window attribute such as kernel=(3, 3), each value in [min,
 * TP_MAX_WINDOW]; "()" or absent gives fallback for both (required when
 * fallback < 0). */
static int get_pair(const char *op, const attr_list *a, const char *key, int64_t fallback,
                    int64_t min, int64_t out[2]) {
  const char *text = get(a, key);
  int count = 0;
  out[0] = out[1] = fallback;
  if (text != NULL && acc_attr_int_tuple(text, out, 2, &count) != 0) return bad_attr(op, key, text);
  if (count == 0) out[0] = out[1] = fallback;
  if ((count != 0 && count != 2) || out[0] < min || out[1] < min || out[0] > TP_MAX_WINDOW ||
      out[1] > TP_MAX_WINDOW) {
    return bad_attr(op, key, text != NULL ? text : "(missing)");
  }
  return MX_ACC_OK;
}

/* Shapes come from the host: the template takes those whose nonzero
 * extents multiply to at most SIZE_MAX / 2 bytes, so that every extent,
 * element count and index of the loops fits in int64_t (a zero extent
 * would hide any overflow of the others from a byte count). */
static int check_shape(const char *op, const acc_shape *shape) {
  uint64_t bytes = sizeof(float);
  for (int d = 0; d < shape->ndim; ++d) {
    if (shape->dims[d] == 0) continue;
    if (bytes > SIZE_MAX / 2 / shape->dims[d]) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a shape is too large", op);
    }
    bytes *= shape->dims[d];
  }
  return MX_ACC_OK;
}

static int unsupported(const char *op, const char *what) {
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: the template does not run %s", op, what);
}

static int bad_shape(const char *op, const char *what) {
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %s", op, what);
}

/* Convolution: data (N, C, H, W), weight (F, C/groups, KH, KW), bias (F). */
static int prepare_conv(const char *name, const attr_list *a, tp_op *op) {
  int64_t filters;
  int no_bias, status = get_bool(name, a, "no_bias", 0, &no_bias);
  const char *layout = get(a, "layout");
  if (layout != NULL && strcmp(layout, "NCHW") != 0) return unsupported(name, "this layout");
  if (status == MX_ACC_OK) status = get_pair(name, a, "kernel", -1, 1, op->kernel);
  if (status == MX_ACC_OK) status = get_pair(name, a, "stride", 1, 1, op->stride);
  if (status == MX_ACC_OK) status = get_pair(name, a, "pad", 0, 0, op->pad);
  if (status == MX_ACC_OK) status = get_pair(name, a, "dilate", 1, 1, op->dilate);
  if (status == MX_ACC_OK) status = get_int(name, a, "num_filter", -1, 1, INT64_MAX, &filters);
  if (status == MX_ACC_OK) status = get_int(name, a, "num_group", 1, 1, INT64_MAX, &op->groups);
  if (status != MX_ACC_OK) return status;
  op->has_bias = !no_bias;
  const acc_shape *x = &op->in[0], *w = &op->in[1];
  if (op->num_inputs != 2 + op->has_bias) return bad_shape(name, "wrong number of inputs");
  if (x->ndim != 4 || w->ndim != 4) return unsupported(name, "other than 2-D convolutions");
  const int64_t c = (int64_t)x->dims[1], f = (int64_t)w->dims[0];
  if (f != filters || c % op->groups != 0 || f % op->groups != 0 ||
      (int64_t)w->dims[1] != c / op->groups || (int64_t)w->dims[2] != op->kernel[0] ||
      (int64_t)w->dims[3] != op->kernel[1] ||
      (op->has_bias && (op->in[2].ndim != 1 || (int64_t)op->in[2].dims[0] != f))) {
    return bad_shape(name, "weight or bias does not match num_filter, num_group and kernel");
  }
  op->out = (acc_shape){4, {x->dims[0], (uint64_t)f, 0, 0}};
  for (int d = 0; d < 2; ++d) {
    int64_t padded = (int64_t)x->dims[2 + d] + 2 * op->pad[d];
    int64_t span = op->dilate[d] * (op->kernel[d] - 1) + 1;
    if (padded < span) return bad_shape(name, "the kernel is larger than the padded input");
    op->out.dims[2 + d] = (uint64_t)((padded - span) / op->stride[d] + 1);
  }
  return MX_ACC_OK;
}

/* FullyConnected: data (N, ...) flattened to (N, K), or (..., K) with
 * flatten=False; weight (num_hidden, K); bias (num_hidden). */
static int prepare_fc(const char *name, const attr_list *a, tp_op *op) {
  int64_t hidden;
  int no_bias, flatten, status = get_bool(name, a, "no_bias", 0, &no_bias);
  if (status == MX_ACC_OK) status = get_bool(name, a, "flatten", 1, &flatten);
  if (status == MX_ACC_OK) status = get_int(name, a, "num_hidden", -1, 1, INT64_MAX, &hidden);
  if (status != MX_ACC_OK) return status;
  op->has_bias = !no_bias;
  const acc_shape *x = &op->in[0], *w = &op->in[1];
  if (op->num_inputs != 2 + op->has_bias || x->ndim < 1) return bad_shape(name, "wrong inputs");
  uint64_t k = x->dims[x->ndim - 1];
  op->out = *x;
  if (flatten) {
    if (x->ndim < 2) return unsupported(name, "flattening 1-D data");
    for (int d = 1; d < x->ndim - 1; ++d) k *= x->dims[d]; /* fits: see check_shape */
    op->out.ndim = 2;
    op->out.dims[0] = x->dims[0];
  }
  op->out.dims[op->out.ndim - 1] = (uint64_t)hidden;
  if (w->ndim != 2 || (int64_t)w->dims[0] != hidden || w->dims[1] != k ||
      (op->has_bias && (op->in[2].ndim != 1 || (int64_t)op->in[2].dims[0] != hidden))) {
    return bad_shape(name, "weight or bias does not match num_hidden and the data");
  }
  return MX_ACC_OK;
}

/* Pooling of data (N, C, H, W): max or avg, valid or full convention. */
static int prepare_pool(const char *name, const attr_list *a, tp_op *op) {
  const char *type = get(a, "pool_type"), *convention = get(a, "pooling_convention");
  const char *layout = get(a, "layout");
  int global, status = get_bool(name, a, "global_pool", 0, &global);
  if (status == MX_ACC_OK) status = get_bool(name, a, "count_include_pad", 1, &op->include_pad);
  if (status != MX_ACC_OK) return status;
  op->pool_max = type == NULL || strcmp(type, "max") == 0;
  int full = convention != NULL && strcmp(convention, "full") == 0;
  if ((!op->pool_max && strcmp(type, "avg") != 0) ||
      (convention != NULL && !full && strcmp(convention, "valid") != 0) ||
      (layout != NULL && strcmp(layout, "NCHW") != 0) || op->in[0].ndim != 4) {
    return unsupported(name, "this pool_type, pooling_convention, layout or rank");
  }
  const acc_shape *x = &op->in[0];
  if (global) {
    if (x->dims[2] == 0 || x->dims[3] == 0 || x->dims[2] > TP_MAX_WINDOW ||
        x->dims[3] > TP_MAX_WINDOW) {
      return unsupported(name, "global pooling of this size");
    }
    op->kernel[0] = (int64_t)x->dims[2], op->kernel[1] = (int64_t)x->dims[3];
    op->stride[0] = op->stride[1] = 1;
    op->pad[0] = op->pad[1] = 0;
  } else {
    status = get_pair(name, a, "kernel", -1, 1, op->kernel);
    if (status == MX_ACC_OK) status = get_pair(name, a, "stride", 1, 1, op->stride);
    if (status == MX_ACC_OK) status = get_pair(name, a, "pad", 0, 0, op->pad);
    if (status != MX_ACC_OK) return status;
  }
  op->out = (acc_shape){4, {x->dims[0], x->dims[1], 0, 0}};
  for (int d = 0; d < 2; ++d) {
    int64_t size = (int64_t)x->dims[2 + d], k = op->kernel[d], s = op->stride[d], p = op->pad[d];
    if (size == 0) return unsupported(name, "empty planes");
    if (size + 2 * p < k) return bad_shape(name, "the kernel is larger than the padded input");
    int64_t out = (size + 2 * p - k + (full ? s - 1 : 0)) / s + 1;
    /* Windows with no data in them (pad >= kernel, or past the end in the
     * full convention) have no MXNet-defined maximum: left to the CPU. */
    if (p >= k || (out - 1) * s - p >= size) return unsupported(name, "windows of padding only");
    op->out.dims[2 + d] = (uint64_t)out;
  }
  return MX_ACC_OK;
}

int tp_op_prepare(const char *op_name, const char *const *keys, const char *const *vals,
                  size_t num_attrs, int num_inputs, const acc_shape *inputs,
                  const acc_shape *output, tp_op *op) {
  const attr_list a = {keys, vals, num_attrs};
  size_t found = 0;
  while (found < sizeof kOps / sizeof kOps[0] && strcmp(kOps[found].name, op_name) != 0) ++found;
  if (found == sizeof kOps / sizeof kOps[0]) return unsupported(op_name, "this operator");
  const char *version = get(&a, "__op_version__");
  if (version != NULL && strcmp(version, TP_OP_VERSION) != 0) {
    return unsupported(op_name, "this operator version");
  }
  if (num_inputs < kOps[found].min_inputs || num_inputs > kOps[found].max_inputs) {
    return bad_shape(op_name, "wrong number of inputs");
  }
  memset(op, 0, sizeof *op);
  op->kind = kOps[found].kind;
  op->num_inputs = num_inputs;
  for (int i = 0; i < num_inputs; ++i) {
    int status = check_shape(op_name, &inputs[i]);
    if (status != MX_ACC_OK) return status;
    op->in[i] = inputs[i];
  }
  int status = check_shape(op_name, output);
  if (status != MX_ACC_OK) return status;
  op->out = inputs[0]; /* relu, elemwise_add */
  if (op->kind == TP_CONV) status = prepare_conv(op_name, &a, op);
  if (op->kind == TP_FC) status = prepare_fc(op_name, &a, op);
  if (op->kind == TP_POOL) status = prepare_pool(op_name, &a, op);
  if (op->kind == TP_RELU && !acc_attr_equals(get(&a, "act_type"), "relu")) {
    status = unsupported(op_name, "this act_type");
  }
  if (op->kind == TP_ADD && !acc_shape_equal(&inputs[0], &inputs[1])) {
    status = bad_shape(op_name, "the inputs' shapes differ");
  }
  if (op->kind == TP_FLATTEN) {
    if (inputs[0].ndim < 1) return bad_shape(op_name, "a scalar cannot be flattened");
    op->out = (acc_shape){2, {inputs[0].dims[0], 1}};
    for (int d = 1; d < inputs[0].ndim; ++d) op->out.dims[1] *= inputs[0].dims[d];
  }
  if (status == MX_ACC_OK && !acc_shape_equal(&op->out, output)) {
    char expected[96], given[96];
    acc_shape_format(&op->out, expected, sizeof expected);
    acc_shape_format(output, given, sizeof given);
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: the output's shape is %s, expected %s",
                      op_name, given, expected);
  }
  return status;
}

/* ---- the loops --------------------------------------------------------------------- */

static int64_t count_of(const acc_shape *shape) {
  int64_t count = 1;
  for (int d = 0; d < shape->ndim; ++d) count *= (int64_t)shape->dims[d];
  return count;
}

static void run_conv(const tp_op *op, const float *x, const float *w, const float *b, float *y) {
  const int64_t n = (int64_t)op->in[0].dims[0], c = (int64_t)op->in[0].dims[1];
  const int64_t h = (int64_t)op->in[0].dims[2], wd = (int64_t)op->in[0].dims[3];
  const int64_t f = (int64_t)op->out.dims[1], oh = (int64_t)op->out.dims[2];
  const int64_t ow = (int64_t)op->out.dims[3], kh = op->kernel[0], kw = op->kernel[1];
  const int64_t cg = c / op->groups, fg = f / op->groups; /* channels, filters per group */
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < f; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          float sum = b != NULL ? b[o] : 0.0f;
          for (int64_t ch = 0; ch < cg; ++ch)
            for (int64_t ky = 0; ky < kh; ++ky) {
              int64_t iy = oy * op->stride[0] - op->pad[0] + ky * op->dilate[0];
              if (iy < 0 || iy >= h) continue;
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t ix = ox * op->stride[1] - op->pad[1] + kx * op->dilate[1];
                if (ix < 0 || ix >= wd) continue;
                int64_t channel = o / fg * cg + ch; /* of group o / fg */
                sum += x[((i * c + channel) * h + iy) * wd + ix] *
                       w[((o * cg + ch) * kh + ky) * kw + kx];
              }
            }
          y[((i * f + o) * oh + oy) * ow + ox] = sum;
        }
}

static void run_fc(const tp_op *op, const float *x, const float *w, const float *b, float *y) {
  const int64_t hidden = (int64_t)op->in[1].dims[0], k = (int64_t)op->in[1].dims[1];
  const int64_t rows = count_of(&op->out) / (hidden ? hidden : 1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < hidden; ++o) {
      float sum = b != NULL ? b[o] : 0.0f;
      for (int64_t j = 0; j < k; ++j) sum += x[r * k + j] * w[o * k + j];
      y[r * hidden + o] = sum;
    }
}

static void run_pool(const tp_op *op, const float *x, float *y) {
  const int64_t planes = (int64_t)(op->in[0].dims[0] * op->in[0].dims[1]);
  const int64_t h = (int64_t)op->in[0].dims[2], w = (int64_t)op->in[0].dims[3];
  const int64_t oh = (int64_t)op->out.dims[2], ow = (int64_t)op->out.dims[3];
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        /* The window [y0, y1) x [x0, x1), padding included (capped at the
         * padded edge, as MXNet does), and its part inside the data. */
        int64_t y0 = oy * op->stride[0] - op->pad[0], x0 = ox * op->stride[1] - op->pad[1];
        int64_t y1 = y0 + op->kernel[0], x1 = x0 + op->kernel[1];
        if (y1 > h + op->pad[0]) y1 = h + op->pad[0];
        if (x1 > w + op->pad[1]) x1 = w + op->pad[1];
        int64_t lo_y = y0 < 0 ? 0 : y0, hi_y = y1 < h ? y1 : h;
        int64_t lo_x = x0 < 0 ? 0 : x0, hi_x = x1 < w ? x1 : w;
        float best = x[(p * h + lo_y) * w + lo_x], sum = 0.0f;
        for (int64_t iy = lo_y; iy < hi_y; ++iy)
          for (int64_t ix = lo_x; ix < hi_x; ++ix) {
            float v = x[(p * h + iy) * w + ix];
            best = v > best ? v : best;
            sum += v;
          }
        int64_t divisor = op->include_pad ? (y1 - y0) * (x1 - x0) : (hi_y - lo_y) * (hi_x - lo_x);
        y[(p * oh + oy) * ow + ox] = op->pool_max ? best : sum / (float)divisor;
      }
}

void tp_op_run(const tp_op *op, const float *const *in, float *out) {
  const int64_t count = count_of(&op->out);
  const float *bias = op->has_bias ? in[2] : NULL;
  switch (op->kind) {
    case TP_CONV: run_conv(op, in[0], in[1], bias, out); break;
    case TP_FC: run_fc(op, in[0], in[1], bias, out); break;
    case TP_POOL: run_pool(op, in[0], out); break;
    case TP_RELU:
      for (int64_t i = 0; i < count; ++i) out[i] = in[0][i] < 0.0f ? 0.0f : in[0][i]; /* NaN stays */
      break;
    case TP_ADD:
      for (int64_t i = 0; i < count; ++i) out[i] = in[0][i] + in[1][i];
      break;
    case TP_FLATTEN: /* the same elements in the same order */
      if (count > 0) memcpy(out, in[0], (size_t)count * sizeof(float));
      break;
  }
}
