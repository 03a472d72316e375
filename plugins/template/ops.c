/*
 * The operators, float32 at operator version 1, with the semantics of the
 * host's CPU operators (src/acc_host/ops). tp_op_prepare() reads the
 * attributes that change the result and ignores the others (workspace...).
 */
#include <string.h>

#include "attrs.h"
#include "status.h"
#include "template.h"
#include "tensor.h"

const char tp_op_list[] = "Activation:1,Convolution:1,Flatten:1,elemwise_add:1";

static const struct {
  const char *name;
  int inputs; /* without Convolution's bias */
} kOps[] = {[TP_CONV] = {"Convolution", 2}, [TP_RELU] = {"Activation", 1},
            [TP_ADD] = {"elemwise_add", 2}, [TP_FLATTEN] = {"Flatten", 1}};

/* Attribute key, or NULL when absent or "None". */
static const char *get(const acc_node *node, const char *key) {
  const char *value = acc_node_attr(node, key);
  return value != NULL && !acc_attr_is_none(value) ? value : NULL;
}

static int fail(int status, const acc_node *node, const char *what) {
  return acc_fail(status, "%s: %s", node->op, what);
}

/* n integers in [min, INT32_MAX] (so the loops' indices fit int64_t) into out;
 * fallback when absent or "()", a fallback below min making the key required. */
static int get_ints(const acc_node *node, const char *key, int n, int64_t fallback, int64_t min,
                    int64_t *out) {
  const char *text = get(node, key);
  int count = 0;
  if (text != NULL && acc_attr_int_tuple(text, out, n, &count) != 0) count = -1;
  for (int i = 0; count == 0 && i < n; ++i) out[i] = fallback;
  int ok = count == 0 || count == n;
  for (int i = 0; ok && i < n; ++i) ok = out[i] >= min && out[i] <= INT32_MAX;
  if (ok) return MX_ACC_OK;
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %s=%s is not valid", node->op, key,
                  text != NULL ? text : "None");
}

/* The nonzero extents must multiply to at most SIZE_MAX / 2 bytes, so that the
 * loops' counts and indices fit int64_t (a zero extent would hide an overflow). */
static int check_shape(const acc_node *node, const acc_shape *shape) {
  uint64_t bytes = sizeof(float);
  for (int d = 0; d < shape->ndim; ++d) {
    uint64_t extent = shape->dims[d] != 0 ? shape->dims[d] : 1;
    if (bytes > SIZE_MAX / 2 / extent) return fail(MX_ACC_ERR_INVALID_ARG, node, "too large");
    bytes *= extent;
  }
  return MX_ACC_OK;
}

/* Convolution: data (N, C, H, W), weight (F, C, KH, KW), bias (F) unless no_bias. */
static int prepare_conv(const acc_node *node, tp_op *op) {
  const acc_shape *x = &op->in[0], *w = &op->in[1];
  const char *layout = get(node, "layout");
  int64_t filters, groups, dilate[2];
  int status = get_ints(node, "kernel", 2, -1, 1, op->kernel);
  if (status == MX_ACC_OK) status = get_ints(node, "stride", 2, 1, 1, op->stride);
  if (status == MX_ACC_OK) status = get_ints(node, "pad", 2, 0, 0, op->pad);
  if (status == MX_ACC_OK) status = get_ints(node, "dilate", 2, 1, 1, dilate);
  if (status == MX_ACC_OK) status = get_ints(node, "num_group", 1, 1, 1, &groups);
  if (status == MX_ACC_OK) status = get_ints(node, "num_filter", 1, -1, 1, &filters);
  if (status != MX_ACC_OK) return status;
  if (x->ndim != 4 || (layout != NULL && strcmp(layout, "NCHW") != 0) || dilate[0] != 1 ||
      dilate[1] != 1 || groups != 1) {
    return fail(MX_ACC_ERR_UNSUPPORTED, node, "only 2-D NCHW without dilation or groups is run");
  }
  if (w->ndim != 4 || w->dims[0] != (uint64_t)filters || w->dims[1] != x->dims[1] ||
      w->dims[2] != (uint64_t)op->kernel[0] || w->dims[3] != (uint64_t)op->kernel[1]) {
    return fail(MX_ACC_ERR_INVALID_ARG, node, "the weight does not match num_filter, kernel...");
  }
  const acc_shape *b = &op->in[2];
  if (op->num_inputs == 3 && (b->ndim != 1 || b->dims[0] != w->dims[0])) {
    return fail(MX_ACC_ERR_INVALID_ARG, node, "the bias does not match num_filter");
  }
  op->out = (acc_shape){4, {x->dims[0], w->dims[0], 0, 0}};
  for (int d = 0; d < 2; ++d) {
    int64_t padded = (int64_t)x->dims[2 + d] + 2 * op->pad[d];
    if (padded < op->kernel[d]) return fail(MX_ACC_ERR_INVALID_ARG, node, "kernel > input");
    op->out.dims[2 + d] = (uint64_t)((padded - op->kernel[d]) / op->stride[d] + 1);
  }
  return MX_ACC_OK;
}

int tp_op_prepare(const acc_node *node, int num_inputs, const acc_shape *inputs,
                  const acc_shape *output, tp_op *op) {
  const char *version = get(node, "__op_version__"), *no_bias = get(node, "no_bias");
  int k = 0, without_bias = 0;
  while (k <= TP_FLATTEN && strcmp(kOps[k].name, node->op) != 0) ++k;
  if (k > TP_FLATTEN || (version != NULL && strcmp(version, "1") != 0)) { /* absent means 1 */
    return fail(MX_ACC_ERR_UNSUPPORTED, node, "the template has no such operator or version");
  }
  if (k == TP_CONV && no_bias != NULL && acc_attr_bool(no_bias, &without_bias) != 0) {
    return fail(MX_ACC_ERR_INVALID_ARG, node, "no_bias is not a boolean");
  }
  if (num_inputs != kOps[k].inputs + (k == TP_CONV && !without_bias)) {
    return fail(MX_ACC_ERR_INVALID_ARG, node, "wrong number of inputs");
  }
  *op = (tp_op){.kind = (tp_kind)k, .num_inputs = num_inputs, .out = inputs[0]};
  int status = check_shape(node, output);
  for (int i = 0; status == MX_ACC_OK && i < num_inputs; ++i) {
    status = check_shape(node, &inputs[i]);
    op->in[i] = inputs[i];
  }
  if (status != MX_ACC_OK) return status;
  if (k == TP_CONV) status = prepare_conv(node, op);
  if (k == TP_RELU && !acc_attr_equals(get(node, "act_type"), "relu")) {
    status = fail(MX_ACC_ERR_UNSUPPORTED, node, "act_type other than relu is not run");
  }
  if (k == TP_ADD && !acc_shape_equal(&inputs[0], &inputs[1])) {
    status = fail(MX_ACC_ERR_INVALID_ARG, node, "the inputs' shapes differ");
  }
  if (k == TP_FLATTEN) { /* (d0, d1, ...) as (d0, d1 * ...); the product fits: check_shape */
    op->out = (acc_shape){2, {inputs[0].ndim > 0 ? inputs[0].dims[0] : 1, 1}};
    for (int d = 1; d < inputs[0].ndim; ++d) op->out.dims[1] *= inputs[0].dims[d];
  }
  if (status == MX_ACC_OK && !acc_shape_equal(&op->out, output)) {
    status = fail(MX_ACC_ERR_INVALID_ARG, node, "the output's shape is not the one computed");
  }
  return status;
}

static void run_conv(const tp_op *op, const float *x, const float *w, const float *b, float *y) {
  const int64_t n = (int64_t)op->in[0].dims[0], c = (int64_t)op->in[0].dims[1];
  const int64_t h = (int64_t)op->in[0].dims[2], wd = (int64_t)op->in[0].dims[3];
  const int64_t f = (int64_t)op->out.dims[1], oh = (int64_t)op->out.dims[2];
  const int64_t ow = (int64_t)op->out.dims[3], kh = op->kernel[0], kw = op->kernel[1];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < f; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          float sum = b != NULL ? b[o] : 0.0f;
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t ky = 0; ky < kh; ++ky) {
              int64_t iy = oy * op->stride[0] - op->pad[0] + ky;
              for (int64_t kx = 0; iy >= 0 && iy < h && kx < kw; ++kx) {
                int64_t ix = ox * op->stride[1] - op->pad[1] + kx;
                if (ix < 0 || ix >= wd) continue; /* padding */
                sum += x[((i * c + ch) * h + iy) * wd + ix] * w[((o * c + ch) * kh + ky) * kw + kx];
              }
            }
          y[((i * f + o) * oh + oy) * ow + ox] = sum;
        }
}

void tp_op_run(const tp_op *op, const float *const *in, float *out) {
  int64_t count = 1;
  for (int d = 0; d < op->out.ndim; ++d) count *= (int64_t)op->out.dims[d];
  if (op->kind == TP_CONV) run_conv(op, in[0], in[1], op->num_inputs == 3 ? in[2] : NULL, out);
  for (int64_t i = 0; op->kind == TP_RELU && i < count; ++i) {
    out[i] = in[0][i] < 0.0f ? 0.0f : in[0][i]; /* NaN stays NaN */
  }
  for (int64_t i = 0; op->kind == TP_ADD && i < count; ++i) out[i] = in[0][i] + in[1][i];
  if (op->kind == TP_FLATTEN && count > 0) memcpy(out, in[0], (size_t)count * sizeof(float));
}
