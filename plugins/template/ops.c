/*
 * The operators, float32 at operator version 1, with MXNet's semantics (the
 * host's CPU operators in src/acc_host/ops define them): Convolution (2-D
 * NCHW: groups, stride, pad, dilation), FullyConnected (flatten=True),
 * Activation(relu), elemwise_add, Flatten.
 *
 * tp_op_prepare() reads the attributes that change the result, refuses the
 * values it does not implement, ignores the others (workspace, cudnn_tune...),
 * and compares the output's shape it computes with the host's. To add an
 * operator: a tp_kind, its row of kOps and entry of tp_op_list, its checks in
 * tp_op_prepare, its loop in tp_op_run.
 */
#include <string.h>

#include "attrs.h"
#include "status.h"
#include "template.h"
#include "tensor.h"

/* Bounds every integer attribute, so that the loops' index arithmetic stays
 * within int64_t. */
#define TP_MAX_ATTR INT32_MAX

const char tp_op_list[] = "Activation:1,Convolution:1,Flatten:1,FullyConnected:1,elemwise_add:1";

static const struct {
  const char *name;
  int inputs, bias; /* inputs without the bias; bias: 1 if no_bias=False adds one */
} kOps[] = {[TP_CONV] = {"Convolution", 2, 1}, [TP_FC] = {"FullyConnected", 2, 1},
            [TP_RELU] = {"Activation", 1, 0},  [TP_ADD] = {"elemwise_add", 2, 0},
            [TP_FLATTEN] = {"Flatten", 1, 0}};

typedef struct attr_list {
  const char *op; /* the operator's name, for messages */
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

static int fail(int status, const attr_list *a, const char *what) {
  return acc_fail(status, "%s: %s", a->op, what);
}

static int fail_attr(const attr_list *a, const char *key, const char *text) {
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %s=%s is not valid", a->op, key,
                  text != NULL ? text : "None");
}

/* Boolean key into *out; fallback when absent. */
static int get_bool(const attr_list *a, const char *key, int fallback, int *out) {
  const char *text = get(a, key);
  *out = fallback;
  return text == NULL || acc_attr_bool(text, out) == 0 ? MX_ACC_OK : fail_attr(a, key, text);
}

/* n integers (a count, or a (y, x) pair) in [min, TP_MAX_ATTR] into out;
 * fallback when absent or "()", a fallback < min making the key required. */
static int get_ints(const attr_list *a, const char *key, int n, int64_t fallback, int64_t min,
                    int64_t *out) {
  const char *text = get(a, key);
  int count = 0;
  if (text != NULL && acc_attr_int_tuple(text, out, n, &count) != 0) count = -1;
  for (int i = 0; count == 0 && i < n; ++i) out[i] = fallback;
  int ok = count == 0 || count == n;
  for (int i = 0; ok && i < n; ++i) ok = out[i] >= min && out[i] <= TP_MAX_ATTR;
  return ok ? MX_ACC_OK : fail_attr(a, key, text);
}

/* Shapes come from the host: the nonzero extents must multiply to at most
 * SIZE_MAX / 2 bytes, so that every extent, count and index of the loops
 * fits in int64_t (a zero extent hides an overflow from a byte count). */
static int check_shape(const attr_list *a, const acc_shape *shape) {
  uint64_t bytes = sizeof(float);
  for (int d = 0; d < shape->ndim; ++d) {
    if (shape->dims[d] != 0 && bytes > SIZE_MAX / 2 / shape->dims[d]) {
      return fail(MX_ACC_ERR_INVALID_ARG, a, "a shape is too large");
    }
    if (shape->dims[d] != 0) bytes *= shape->dims[d];
  }
  return MX_ACC_OK;
}

/* (d0, d1, ...) as the matrix (d0, d1 * ...): Flatten's output and the data
 * of FullyConnected. The product fits: check_shape. */
static acc_shape flat(const acc_shape *x) {
  acc_shape matrix = {2, {x->ndim > 0 ? x->dims[0] : 1, 1}};
  for (int d = 1; d < x->ndim; ++d) matrix.dims[1] *= x->dims[d];
  return matrix;
}

/* Convolution: data (N, C, H, W), weight (F, C / groups, KH, KW). */
static int prepare_conv(const attr_list *a, tp_op *op) {
  const acc_shape *x = &op->in[0], *w = &op->in[1];
  const char *layout = get(a, "layout");
  int64_t filters;
  if (x->ndim != 4 || w->ndim != 4 || (layout != NULL && strcmp(layout, "NCHW") != 0)) {
    return fail(MX_ACC_ERR_UNSUPPORTED, a, "only 2-D NCHW convolutions are run");
  }
  int status = get_ints(a, "kernel", 2, -1, 1, op->kernel);
  if (status == MX_ACC_OK) status = get_ints(a, "stride", 2, 1, 1, op->stride);
  if (status == MX_ACC_OK) status = get_ints(a, "pad", 2, 0, 0, op->pad);
  if (status == MX_ACC_OK) status = get_ints(a, "dilate", 2, 1, 1, op->dilate);
  if (status == MX_ACC_OK) status = get_ints(a, "num_filter", 1, -1, 1, &filters);
  if (status == MX_ACC_OK) status = get_ints(a, "num_group", 1, 1, 1, &op->groups);
  if (status != MX_ACC_OK) return status;
  const int64_t c = (int64_t)x->dims[1], f = (int64_t)w->dims[0];
  if (f != filters || c % op->groups != 0 || f % op->groups != 0 ||
      (int64_t)w->dims[1] != c / op->groups || (int64_t)w->dims[2] != op->kernel[0] ||
      (int64_t)w->dims[3] != op->kernel[1]) {
    return fail(MX_ACC_ERR_INVALID_ARG, a, "the weight does not match num_filter, kernel...");
  }
  op->out = (acc_shape){4, {x->dims[0], (uint64_t)f, 0, 0}};
  for (int d = 0; d < 2; ++d) {
    int64_t padded = (int64_t)x->dims[2 + d] + 2 * op->pad[d];
    int64_t span = op->dilate[d] * (op->kernel[d] - 1) + 1;
    if (padded < span) return fail(MX_ACC_ERR_INVALID_ARG, a, "the kernel exceeds the input");
    op->out.dims[2 + d] = (uint64_t)((padded - span) / op->stride[d] + 1);
  }
  return MX_ACC_OK;
}

/* FullyConnected: data (N, ...) taken as (N, K), weight (num_hidden, K). */
static int prepare_fc(const attr_list *a, tp_op *op) {
  int64_t hidden;
  int flatten, status = get_bool(a, "flatten", 1, &flatten);
  if (status == MX_ACC_OK) status = get_ints(a, "num_hidden", 1, -1, 1, &hidden);
  if (status != MX_ACC_OK) return status;
  if (!flatten) return fail(MX_ACC_ERR_UNSUPPORTED, a, "flatten=False is not run");
  const acc_shape data = flat(&op->in[0]), *w = &op->in[1];
  op->out = (acc_shape){2, {data.dims[0], (uint64_t)hidden}};
  if (w->ndim != 2 || w->dims[0] != (uint64_t)hidden || w->dims[1] != data.dims[1]) {
    return fail(MX_ACC_ERR_INVALID_ARG, a, "the weight does not match num_hidden and the data");
  }
  return MX_ACC_OK;
}

int tp_op_prepare(const char *op_name, const char *const *keys, const char *const *vals,
                  size_t num_attrs, int num_inputs, const acc_shape *inputs,
                  const acc_shape *output, tp_op *op) {
  const attr_list a = {op_name, keys, vals, num_attrs};
  const char *version = get(&a, "__op_version__"); /* absent means 1 */
  int k = 0, no_bias = 1, status = MX_ACC_OK;
  while (k <= TP_FLATTEN && strcmp(kOps[k].name, op_name) != 0) ++k;
  if (k > TP_FLATTEN || (version != NULL && strcmp(version, "1") != 0)) {
    return fail(MX_ACC_ERR_UNSUPPORTED, &a, "the template has no such operator or version");
  }
  if (kOps[k].bias) status = get_bool(&a, "no_bias", 0, &no_bias);
  *op = (tp_op){.kind = (tp_kind)k, .num_inputs = num_inputs, .has_bias = !no_bias};
  if (status == MX_ACC_OK && num_inputs != kOps[k].inputs + op->has_bias) {
    status = fail(MX_ACC_ERR_INVALID_ARG, &a, "wrong number of inputs");
  }
  if (status == MX_ACC_OK) status = check_shape(&a, output);
  for (int i = 0; status == MX_ACC_OK && i < num_inputs; ++i) {
    status = check_shape(&a, &inputs[i]);
    op->in[i] = inputs[i];
  }
  if (status != MX_ACC_OK) return status;
  op->out = inputs[0]; /* Activation, elemwise_add */
  if (op->kind == TP_CONV) status = prepare_conv(&a, op);
  if (op->kind == TP_FC) status = prepare_fc(&a, op);
  if (op->kind == TP_RELU && !acc_attr_equals(get(&a, "act_type"), "relu")) {
    status = fail(MX_ACC_ERR_UNSUPPORTED, &a, "act_type other than relu is not run");
  }
  if (op->kind == TP_ADD && !acc_shape_equal(&inputs[0], &inputs[1])) {
    status = fail(MX_ACC_ERR_INVALID_ARG, &a, "the inputs' shapes differ");
  }
  if (op->kind == TP_FLATTEN) op->out = flat(&inputs[0]);
  const acc_shape *b = &op->in[2]; /* one per output channel (dimension 1) */
  if (status == MX_ACC_OK && op->has_bias && (b->ndim != 1 || b->dims[0] != op->out.dims[1])) {
    status = fail(MX_ACC_ERR_INVALID_ARG, &a, "the bias does not match the output");
  }
  if (status == MX_ACC_OK && !acc_shape_equal(&op->out, output)) {
    status = fail(MX_ACC_ERR_INVALID_ARG, &a, "the output's shape is not the one computed");
  }
  return status;
}

/* ---- the loops ---------------------------------------------------------------- */

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
              for (int64_t kx = 0; iy >= 0 && iy < h && kx < kw; ++kx) {
                int64_t ix = ox * op->stride[1] - op->pad[1] + kx * op->dilate[1];
                if (ix < 0 || ix >= wd) continue; /* padding */
                sum += x[((i * c + o / fg * cg + ch) * h + iy) * wd + ix] *
                       w[((o * cg + ch) * kh + ky) * kw + kx];
              }
            }
          y[((i * f + o) * oh + oy) * ow + ox] = sum;
        }
}

void tp_op_run(const tp_op *op, const float *const *in, float *out) {
  int64_t count = 1;
  for (int d = 0; d < op->out.ndim; ++d) count *= (int64_t)op->out.dims[d];
  const float *bias = op->has_bias ? in[2] : NULL;
  if (op->kind == TP_CONV) run_conv(op, in[0], in[1], bias, out);
  if (op->kind == TP_FC) { /* (rows x hidden) = (rows x k) . (hidden x k)^T + bias */
    const int64_t rows = (int64_t)op->out.dims[0], hidden = (int64_t)op->out.dims[1];
    const int64_t k = (int64_t)op->in[1].dims[1];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < hidden; ++o) {
        float sum = bias != NULL ? bias[o] : 0.0f;
        for (int64_t j = 0; j < k; ++j) sum += in[0][r * k + j] * in[1][o * k + j];
        out[r * hidden + o] = sum;
      }
  }
  for (int64_t i = 0; op->kind == TP_RELU && i < count; ++i) {
    out[i] = in[0][i] < 0.0f ? 0.0f : in[0][i]; /* NaN stays NaN */
  }
  for (int64_t i = 0; op->kind == TP_ADD && i < count; ++i) out[i] = in[0][i] + in[1][i];
  if (op->kind == TP_FLATTEN && count > 0) memcpy(out, in[0], (size_t)count * sizeof(float));
}
