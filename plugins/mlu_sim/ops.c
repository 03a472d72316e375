#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attrs.h"
#include "mxnet_acc.h"
#include "status.h"
#include "tensor.h"

static const mlu_mx_op kOps[] = {
    {"Convolution", {NULL}, 1, MLU_MX_CONV},
    {"Pooling", {NULL}, 1, MLU_MX_POOL},
    {"FullyConnected", {NULL}, 1, MLU_MX_FC},
    {"Activation", {NULL}, 1, MLU_MX_ACT},
    {"clip", {NULL}, 1, MLU_MX_CLIP},
    {"BatchNorm", {NULL}, 1, MLU_MX_BATCHNORM},
    {"elemwise_add", {"_add", "_plus", "_Plus", NULL}, 1, MLU_MX_ADD},
    {"elemwise_mul", {"_mul", "_Mul", NULL}, 1, MLU_MX_MUL},
    {"softmax", {NULL}, 1, MLU_MX_SOFTMAX},
    {"Concat", {"concat", NULL}, 1, MLU_MX_CONCAT},
    {"Reshape", {"reshape", NULL}, 1, MLU_MX_RESHAPE},
    {"Flatten", {"flatten", NULL}, 1, MLU_MX_RESHAPE},
};

enum { kNumOps = sizeof kOps / sizeof kOps[0] };

size_t mlu_num_ops(void) { return kNumOps; }

const mlu_mx_op *mlu_op_at(size_t index) { return index < kNumOps ? &kOps[index] : NULL; }

static const mlu_mx_op *find_op(const char *name) {
  for (size_t i = 0; i < kNumOps; ++i) {
    if (strcmp(kOps[i].name, name) == 0) return &kOps[i];
    for (int a = 0; kOps[i].aliases[a] != NULL; ++a) {
      if (strcmp(kOps[i].aliases[a], name) == 0) return &kOps[i];
    }
  }
  return NULL;
}

int mlu_cnml_dtype(int32_t dtype) {
  if (dtype == kFloat32) return CNML_DATA_FLOAT32;
  if (dtype == kFloat16) return CNML_DATA_FLOAT16;
  return -1;
}

/* ---- attribute values ------------------------------------------------------------------ */

/* Bounds that keep every size the plugin computes far from overflow: a
 * window, stride, pad or dilation entry; one extent of a tensor; its
 * element count. Real layers stay far below them. */
enum { kMaxWindow = 1 << 20 };
#define MLU_MAX_EXTENT ((uint64_t)INT32_MAX)
#define MLU_MAX_ELEMENTS ((uint64_t)1 << 40)

static int bad_value(const char *key, const char *value, const char *expected) {
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute %s=\"%s\": expected %s", key, value, expected);
}

static int parse_bool(const char *key, const char *value, int *out) {
  return acc_attr_bool(value, out) == 0 ? MX_ACC_OK : bad_value(key, value, "a boolean");
}

static int parse_int(const char *key, const char *value, int64_t minimum, int64_t *out) {
  if (acc_attr_int(value, out) != 0 || *out < minimum) return bad_value(key, value, "an integer");
  return MX_ACC_OK;
}

/* A positive count that fits an int (filters, groups). */
static int parse_count(const char *key, const char *value, int64_t *out) {
  int status = parse_int(key, value, 1, out);
  if (status == MX_ACC_OK && *out > INT32_MAX) status = bad_value(key, value, "a smaller count");
  return status;
}

static int parse_float(const char *key, const char *value, double *out) {
  return acc_attr_float(value, out) == 0 ? MX_ACC_OK : bad_value(key, value, "a number");
}

/* A 2-D spatial tuple; "()" leaves *given 0 (MXNet's defaults apply). */
static int parse_pair(const char *key, const char *value, int64_t minimum, int64_t out[2],
                      int *given) {
  int64_t values[3];
  int count = 0;
  if (acc_attr_int_tuple(value, values, 3, &count) != 0) return bad_value(key, value, "a tuple");
  if (count == 0) {
    *given = 0;
    return MX_ACC_OK;
  }
  if (count != 2) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "attribute %s=\"%s\": only 2-D windows run on the "
                    "MLU", key, value);
  }
  if (values[0] < minimum || values[1] < minimum) return bad_value(key, value, "larger entries");
  if (values[0] > kMaxWindow || values[1] > kMaxWindow) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "attribute %s=\"%s\": entries above %d", key, value,
                    kMaxWindow);
  }
  out[0] = values[0];
  out[1] = values[1];
  *given = 1;
  return MX_ACC_OK;
}

static int expect_word(const char *key, const char *value, const char *const *accepted) {
  for (int i = 0; accepted[i] != NULL; ++i) {
    if (acc_attr_equals(value, accepted[i])) return MX_ACC_OK;
  }
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "attribute %s=\"%s\" is not supported on the MLU", key,
                  value);
}

static int channel_first_layout(const char *key, const char *value) {
  static const char *const accepted[] = {"None", "NCHW", NULL};
  return expect_word(key, value, accepted);
}

/* Attributes that only tune MXNet's own kernels: never a different result. */
static int is_tuning(const char *key) {
  static const char *const tuning[] = {"workspace", "cudnn_tune", "cudnn_off", "min_calib_range",
                                       "max_calib_range", "ctx_group", NULL};
  for (int i = 0; tuning[i] != NULL; ++i) {
    if (strcmp(key, tuning[i]) == 0) return 1;
  }
  return 0;
}

static int is_annotation(const char *key) {
  size_t n = strlen(key);
  return n >= 4 && key[0] == '_' && key[1] == '_' && key[n - 1] == '_' && key[n - 2] == '_';
}

/* ---- per-operator attributes ---------------------------------------------------------- */

/* Each returns MX_ACC_ERR_NOT_FOUND for a key it does not know. */
typedef int (*attr_handler)(mlu_node_spec *spec, const char *key, const char *value, int *seen);

enum { kSeenKernel = 1, kSeenStride = 2, kSeenPad = 4, kSeenDilate = 8, kSeenRequired = 16,
       kSeenRequired2 = 32 };

static int conv_attr(mlu_node_spec *s, const char *key, const char *value, int *seen) {
  int given = 0, status;
  if (strcmp(key, "kernel") == 0) {
    status = parse_pair(key, value, 1, s->u.conv.kernel, &given);
    if (status == MX_ACC_OK && !given) status = bad_value(key, value, "a 2-D kernel");
    *seen |= kSeenKernel;
    return status;
  }
  if (strcmp(key, "stride") == 0) return parse_pair(key, value, 1, s->u.conv.stride, &given);
  if (strcmp(key, "dilate") == 0) return parse_pair(key, value, 1, s->u.conv.dilate, &given);
  if (strcmp(key, "pad") == 0) return parse_pair(key, value, 0, s->u.conv.pad, &given);
  if (strcmp(key, "num_filter") == 0) {
    *seen |= kSeenRequired;
    return parse_count(key, value, &s->u.conv.num_filter);
  }
  if (strcmp(key, "num_group") == 0) {
    return parse_count(key, value, &s->u.conv.groups);
  }
  if (strcmp(key, "no_bias") == 0) return parse_bool(key, value, &s->u.conv.no_bias);
  if (strcmp(key, "layout") == 0) return channel_first_layout(key, value);
  return MX_ACC_ERR_NOT_FOUND;
}

static int pool_attr(mlu_node_spec *s, const char *key, const char *value, int *seen) {
  int given = 0, flag = 0, status;
  if (strcmp(key, "kernel") == 0) {
    status = parse_pair(key, value, 1, s->u.pool.kernel, &given);
    if (given) *seen |= kSeenKernel;
    return status;
  }
  if (strcmp(key, "stride") == 0) return parse_pair(key, value, 1, s->u.pool.stride, &given);
  if (strcmp(key, "pad") == 0) return parse_pair(key, value, 0, s->u.pool.pad, &given);
  if (strcmp(key, "pool_type") == 0) {
    static const char *const types[] = {"max", "avg", NULL};
    status = expect_word(key, value, types);
    s->u.pool.mode = acc_attr_equals(value, "avg") ? CNML_POOL_AVG : CNML_POOL_MAX;
    return status;
  }
  if (strcmp(key, "pooling_convention") == 0) {
    static const char *const conventions[] = {"valid", "full", NULL};
    s->u.pool.full = acc_attr_equals(value, "full");
    return expect_word(key, value, conventions);
  }
  if (strcmp(key, "global_pool") == 0) {
    status = parse_bool(key, value, &flag);
    if (flag) *seen |= kSeenRequired; /* "global" */
    return status;
  }
  if (strcmp(key, "count_include_pad") == 0) {
    if (acc_attr_is_none(value)) return MX_ACC_OK; /* None means True */
    return parse_bool(key, value, &s->u.pool.count_include_pad);
  }
  if (strcmp(key, "p_value") == 0) return MX_ACC_OK; /* lp pooling only, refused above */
  if (strcmp(key, "layout") == 0) return channel_first_layout(key, value);
  return MX_ACC_ERR_NOT_FOUND;
}

static int fc_attr(mlu_node_spec *s, const char *key, const char *value, int *seen) {
  int64_t hidden;
  if (strcmp(key, "num_hidden") == 0) {
    *seen |= kSeenRequired;
    return parse_int(key, value, 1, &hidden); /* checked against the weight's shape */
  }
  if (strcmp(key, "no_bias") == 0) return parse_bool(key, value, &s->u.fc.no_bias);
  if (strcmp(key, "flatten") == 0) {
    int flatten;
    int status = parse_bool(key, value, &flatten);
    if (!flatten) *seen |= kSeenRequired2; /* "not flattened" */
    return status;
  }
  return MX_ACC_ERR_NOT_FOUND;
}

static int act_attr(mlu_node_spec *s, const char *key, const char *value, int *seen) {
  if (strcmp(key, "act_type") != 0) return MX_ACC_ERR_NOT_FOUND;
  *seen |= kSeenRequired;
  if (acc_attr_equals(value, "relu")) s->u.act = CNML_ACTIVE_RELU;
  else if (acc_attr_equals(value, "sigmoid")) s->u.act = CNML_ACTIVE_SIGMOID;
  else if (acc_attr_equals(value, "tanh")) s->u.act = CNML_ACTIVE_TANH;
  else return acc_fail(MX_ACC_ERR_UNSUPPORTED, "act_type=\"%s\" does not run on the MLU", value);
  return MX_ACC_OK;
}

static int clip_attr(mlu_node_spec *s, const char *key, const char *value, int *seen) {
  if (strcmp(key, "a_min") == 0) {
    *seen |= kSeenRequired;
    return parse_float(key, value, &s->u.clip.lo);
  }
  if (strcmp(key, "a_max") == 0) {
    *seen |= kSeenRequired2;
    return parse_float(key, value, &s->u.clip.hi);
  }
  return MX_ACC_ERR_NOT_FOUND;
}

static int bn_attr(mlu_node_spec *s, const char *key, const char *value, int *seen) {
  double ignored;
  int flag = 0, status;
  (void)seen;
  if (strcmp(key, "eps") == 0) return parse_float(key, value, &s->u.bn.eps);
  if (strcmp(key, "fix_gamma") == 0) return parse_bool(key, value, &s->u.bn.fix_gamma);
  if (strcmp(key, "momentum") == 0) return parse_float(key, value, &ignored);
  if (strcmp(key, "use_global_stats") == 0) return parse_bool(key, value, &flag); /* inference */
  if (strcmp(key, "output_mean_var") == 0) {
    status = parse_bool(key, value, &flag);
    if (status == MX_ACC_OK && flag) {
      status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "BatchNorm with output_mean_var");
    }
    return status;
  }
  if (strcmp(key, "axis") == 0) {
    int64_t axis;
    status = acc_attr_int(value, &axis) == 0 ? MX_ACC_OK : bad_value(key, value, "an integer");
    if (status == MX_ACC_OK && axis != 1) {
      status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "BatchNorm along axis %lld (only 1)",
                        (long long)axis);
    }
    return status;
  }
  return MX_ACC_ERR_NOT_FOUND;
}

static int softmax_attr(mlu_node_spec *s, const char *key, const char *value, int *seen) {
  int flag = 0;
  (void)seen;
  if (strcmp(key, "axis") == 0) {
    int64_t axis;
    int status = parse_int(key, value, INT32_MIN, &axis);
    if (status == MX_ACC_OK && (axis < -MX_ACC_MAX_NDIM || axis >= MX_ACC_MAX_NDIM)) {
      status = bad_value(key, value, "an axis");
    }
    s->u.softmax.axis = (int)(status == MX_ACC_OK ? axis : 0);
    return status;
  }
  if (strcmp(key, "temperature") == 0) {
    if (acc_attr_is_none(value)) return MX_ACC_OK;
    double *t = &s->u.softmax.temperature;
    int status = parse_float(key, value, t);
    if (status == MX_ACC_OK && !(*t > 0.0 && isfinite(*t))) {
      status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "softmax temperature %s", value);
    }
    return status;
  }
  if (strcmp(key, "dtype") == 0) {
    if (acc_attr_is_none(value)) return MX_ACC_OK;
    *seen |= kSeenRequired; /* checked against the output dtype below */
    return MX_ACC_OK;
  }
  if (strcmp(key, "use_length") == 0) {
    if (acc_attr_is_none(value)) return MX_ACC_OK;
    int status = parse_bool(key, value, &flag);
    if (status == MX_ACC_OK && flag) {
      status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "softmax use_length");
    }
    return status;
  }
  return MX_ACC_ERR_NOT_FOUND;
}

static int concat_attr(mlu_node_spec *s, const char *key, const char *value, int *seen) {
  int64_t n;
  if (strcmp(key, "num_args") == 0) {
    *seen |= kSeenRequired;
    int status = parse_int(key, value, 1, &n);
    if (status == MX_ACC_OK && n != s->num_inputs) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "Concat: num_args=%lld but %d inputs",
                        (long long)n, s->num_inputs);
    }
    return status;
  }
  if (strcmp(key, "dim") == 0) {
    int status = parse_int(key, value, -MX_ACC_MAX_NDIM, &n);
    if (status == MX_ACC_OK && n >= MX_ACC_MAX_NDIM) status = bad_value(key, value, "an axis");
    s->u.concat_axis = (int)(status == MX_ACC_OK ? n : 0);
    return status;
  }
  return MX_ACC_ERR_NOT_FOUND;
}

static int reshape_attr(mlu_node_spec *s, const char *key, const char *value, int *seen) {
  (void)s;
  (void)value;
  (void)seen;
  /* The result's shape is annotated; the codes that computed it need no
   * second reading. */
  if (strcmp(key, "shape") == 0 || strcmp(key, "reverse") == 0 ||
      strcmp(key, "target_shape") == 0 || strcmp(key, "keep_highest") == 0) {
    return MX_ACC_OK;
  }
  return MX_ACC_ERR_NOT_FOUND;
}

static int no_attr(mlu_node_spec *s, const char *key, const char *value, int *seen) {
  (void)s;
  (void)key;
  (void)value;
  (void)seen;
  return MX_ACC_ERR_NOT_FOUND;
}

static attr_handler handler_of(int kind) {
  switch (kind) {
    case MLU_MX_CONV: return conv_attr;
    case MLU_MX_POOL: return pool_attr;
    case MLU_MX_FC: return fc_attr;
    case MLU_MX_ACT: return act_attr;
    case MLU_MX_CLIP: return clip_attr;
    case MLU_MX_BATCHNORM: return bn_attr;
    case MLU_MX_SOFTMAX: return softmax_attr;
    case MLU_MX_CONCAT: return concat_attr;
    case MLU_MX_RESHAPE: return reshape_attr;
    default: return no_attr;
  }
}

/* MXNet's defaults, before the attributes are read. */
static void set_defaults(mlu_node_spec *s) {
  switch (s->op->kind) {
    case MLU_MX_CONV:
      s->u.conv.stride[0] = s->u.conv.stride[1] = 1;
      s->u.conv.dilate[0] = s->u.conv.dilate[1] = 1;
      s->u.conv.groups = 1;
      break;
    case MLU_MX_POOL:
      s->u.pool.stride[0] = s->u.pool.stride[1] = 1;
      s->u.pool.mode = CNML_POOL_MAX;
      s->u.pool.count_include_pad = 1;
      break;
    case MLU_MX_BATCHNORM:
      s->u.bn.eps = 1e-3;
      s->u.bn.fix_gamma = 1;
      break;
    case MLU_MX_SOFTMAX:
      s->u.softmax.axis = -1;
      s->u.softmax.temperature = 1.0;
      break;
    case MLU_MX_CONCAT: s->u.concat_axis = 1; break;
    default: break;
  }
}

static int parse_attrs(mlu_node_spec *s, const char *const *keys, const char *const *vals,
                       size_t count, int *seen) {
  attr_handler handler = handler_of(s->op->kind);
  set_defaults(s);
  for (size_t i = 0; i < count; ++i) {
    if (keys[i] == NULL || vals[i] == NULL) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute %zu is NULL", i);
    }
    if (is_annotation(keys[i]) || is_tuning(keys[i])) continue;
    int status = handler(s, keys[i], vals[i], seen);
    if (status == MX_ACC_ERR_NOT_FOUND) {
      /* An attribute this plugin does not know might change the result. */
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: unknown attribute \"%s\"", s->op->name, keys[i]);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* ---- shapes ------------------------------------------------------------------------------- */

static acc_shape make_shape(int ndim, const int64_t *dims) {
  acc_shape shape;
  memset(&shape, 0, sizeof shape);
  shape.ndim = ndim;
  for (int d = 0; d < ndim; ++d) shape.dims[d] = (uint64_t)dims[d];
  return shape;
}

static int expect_shape(const char *what, const char *role, const acc_shape *got,
                        const acc_shape *want) {
  if (acc_shape_equal(got, want)) return MX_ACC_OK;
  char a[256], b[256];
  acc_shape_format(got, a, sizeof a);
  acc_shape_format(want, b, sizeof b);
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %s has shape %s, expected %s", what, role, a, b);
}

static int64_t count_of(const acc_shape *shape, int begin, int end) {
  int64_t n = 1;
  for (int d = begin; d < end; ++d) n *= (int64_t)shape->dims[d];
  return n;
}

static int expect_inputs(const char *what, const mlu_node_spec *s, int count) {
  if (s->num_inputs != count) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %d inputs, expected %d", what, s->num_inputs,
                    count);
  }
  return MX_ACC_OK;
}

static int expect_ndim(const char *what, const acc_shape *shape, int ndim) {
  if (shape->ndim != ndim) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: %d-D data (the MLU runs %d-D)", what, shape->ndim,
                    ndim);
  }
  return MX_ACC_OK;
}

/* Convolution output extent, or -1 when the dilated kernel exceeds the
 * padded input. */
static int64_t window_out(int64_t size, int64_t kernel, int64_t stride, int64_t pad,
                          int64_t dilate, int full) {
  int64_t room = size + 2 * pad - (dilate * (kernel - 1) + 1);
  if (room < 0) return -1;
  return (full ? (room + stride - 1) / stride : room / stride) + 1;
}

static int conv_shapes(const char *what, mlu_node_spec *s, acc_shape *out) {
  int status = expect_inputs(what, s, s->u.conv.no_bias ? 2 : 3);
  if (status == MX_ACC_OK) status = expect_ndim(what, &s->in_shapes[0], 4);
  if (status != MX_ACC_OK) return status;
  const acc_shape *data = &s->in_shapes[0];
  int64_t c = (int64_t)data->dims[1], f = s->u.conv.num_filter, g = s->u.conv.groups;
  if (c % g != 0 || f % g != 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %lld channels and %lld filters do not divide into "
                    "%lld groups", what, (long long)c, (long long)f, (long long)g);
  }
  int64_t weight[4] = {f, c / g, s->u.conv.kernel[0], s->u.conv.kernel[1]};
  acc_shape want = make_shape(4, weight);
  status = expect_shape(what, "weight", &s->in_shapes[1], &want);
  if (status == MX_ACC_OK && !s->u.conv.no_bias) {
    want = make_shape(1, &f);
    status = expect_shape(what, "bias", &s->in_shapes[2], &want);
  }
  if (status != MX_ACC_OK) return status;
  int64_t dims[4] = {(int64_t)data->dims[0], f, 0, 0};
  for (int a = 0; a < 2; ++a) {
    dims[2 + a] = window_out((int64_t)data->dims[2 + a], s->u.conv.kernel[a], s->u.conv.stride[a],
                             s->u.conv.pad[a], s->u.conv.dilate[a], 0);
    if (dims[2 + a] < 0) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: the dilated kernel exceeds the padded input",
                      what);
    }
  }
  *out = make_shape(4, dims);
  return MX_ACC_OK;
}

static int pool_shapes(const char *what, mlu_node_spec *s, int seen, acc_shape *out) {
  int status = expect_inputs(what, s, 1);
  if (status == MX_ACC_OK) status = expect_ndim(what, &s->in_shapes[0], 4);
  if (status != MX_ACC_OK) return status;
  const acc_shape *data = &s->in_shapes[0];
  if (seen & kSeenRequired) { /* global: the whole plane, stride 1, no padding */
    s->u.pool.kernel[0] = (int64_t)data->dims[2];
    s->u.pool.kernel[1] = (int64_t)data->dims[3];
    s->u.pool.stride[0] = s->u.pool.stride[1] = 1;
    s->u.pool.pad[0] = s->u.pool.pad[1] = 0;
    s->u.pool.full = 0;
  } else if (!(seen & kSeenKernel)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: kernel is required unless global_pool", what);
  }
  if (s->u.pool.kernel[0] < 1 || s->u.pool.kernel[1] < 1) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: empty pooling window", what);
  }
  int64_t dims[4] = {(int64_t)data->dims[0], (int64_t)data->dims[1], 0, 0};
  for (int a = 0; a < 2; ++a) {
    dims[2 + a] = window_out((int64_t)data->dims[2 + a], s->u.pool.kernel[a], s->u.pool.stride[a],
                             s->u.pool.pad[a], 1, s->u.pool.full);
    if (dims[2 + a] < 0) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: the window exceeds the padded input", what);
    }
  }
  *out = make_shape(4, dims);
  return MX_ACC_OK;
}

static int fc_shapes(const char *what, mlu_node_spec *s, int seen, acc_shape *out) {
  int status = expect_inputs(what, s, s->u.fc.no_bias ? 2 : 3);
  if (status != MX_ACC_OK) return status;
  const acc_shape *data = &s->in_shapes[0], *weight = &s->in_shapes[1];
  int flatten = !(seen & kSeenRequired2);
  if (data->ndim < 1 || weight->ndim != 2) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: data and a 2-D weight are needed", what);
  }
  int64_t in_dim = flatten ? count_of(data, 1, data->ndim) : (int64_t)data->dims[data->ndim - 1];
  int64_t hidden = (int64_t)weight->dims[0];
  if ((int64_t)weight->dims[1] != in_dim || in_dim < 1) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: weight (%lld, %lld) does not take %lld inputs",
                    what, (long long)hidden, (long long)weight->dims[1], (long long)in_dim);
  }
  if (!s->u.fc.no_bias && count_of(&s->in_shapes[2], 0, s->in_shapes[2].ndim) != hidden) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: bias does not hold %lld values", what,
                    (long long)hidden);
  }
  int64_t dims[MX_ACC_MAX_NDIM];
  int ndim;
  if (flatten) {
    dims[0] = (int64_t)data->dims[0];
    dims[1] = hidden;
    ndim = 2;
  } else {
    for (int d = 0; d + 1 < data->ndim; ++d) dims[d] = (int64_t)data->dims[d];
    dims[data->ndim - 1] = hidden;
    ndim = data->ndim;
  }
  *out = make_shape(ndim, dims);
  return MX_ACC_OK;
}

static int bn_shapes(const char *what, mlu_node_spec *s, acc_shape *out) {
  int status = expect_inputs(what, s, 5);
  if (status != MX_ACC_OK) return status;
  const acc_shape *data = &s->in_shapes[0];
  if (data->ndim < 2 || data->dims[0] * data->dims[1] == 0) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: needs data with a channel axis 1", what);
  }
  int64_t channels = (int64_t)data->dims[1];
  acc_shape want = make_shape(1, &channels);
  static const char *const roles[] = {"gamma", "beta", "moving_mean", "moving_var"};
  for (int i = 1; i < 5 && status == MX_ACC_OK; ++i) {
    status = expect_shape(what, roles[i - 1], &s->in_shapes[i], &want);
  }
  *out = *data;
  return status;
}

static int same_shape_inputs(const char *what, mlu_node_spec *s, int count, acc_shape *out) {
  int status = expect_inputs(what, s, count);
  for (int i = 1; i < count && status == MX_ACC_OK; ++i) {
    status = expect_shape(what, "input", &s->in_shapes[i], &s->in_shapes[0]);
  }
  *out = s->in_shapes[0];
  return status;
}

static int softmax_shapes(const char *what, mlu_node_spec *s, acc_shape *out) {
  int status = same_shape_inputs(what, s, 1, out);
  int ndim = s->in_shapes[0].ndim;
  if (status == MX_ACC_OK && (ndim < 1 || s->u.softmax.axis < -ndim || s->u.softmax.axis >= ndim)) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: axis %d of %d-D data", what, s->u.softmax.axis,
                      ndim);
  }
  if (status == MX_ACC_OK && s->u.softmax.axis < 0) s->u.softmax.axis += ndim;
  return status;
}

static int concat_shapes(const char *what, mlu_node_spec *s, acc_shape *out) {
  if (s->num_inputs < 1) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: no inputs", what);
  int ndim = s->in_shapes[0].ndim, axis = s->u.concat_axis;
  if (axis < 0) axis += ndim;
  if (axis < 0 || axis >= ndim) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: dim %d of %d-D inputs", what, s->u.concat_axis,
                    ndim);
  }
  s->u.concat_axis = axis;
  *out = s->in_shapes[0];
  out->dims[axis] = 0;
  for (int i = 0; i < s->num_inputs; ++i) {
    const acc_shape *in = &s->in_shapes[i];
    for (int d = 0; d < ndim; ++d) {
      if (in->ndim != ndim || (d != axis && in->dims[d] != s->in_shapes[0].dims[d])) {
        return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: input %d differs outside dim %d", what, i,
                        axis);
      }
    }
    out->dims[axis] += in->dims[axis];
  }
  return MX_ACC_OK;
}

/* The output shape MXNet infers, into *out; for reshapes the annotated one. */
static int infer_output(const char *what, mlu_node_spec *s, int seen, const acc_shape *given,
                        acc_shape *out) {
  switch (s->op->kind) {
    case MLU_MX_CONV: return conv_shapes(what, s, out);
    case MLU_MX_POOL: return pool_shapes(what, s, seen, out);
    case MLU_MX_FC: return fc_shapes(what, s, seen, out);
    case MLU_MX_BATCHNORM: return bn_shapes(what, s, out);
    case MLU_MX_ADD:
    case MLU_MX_MUL: return same_shape_inputs(what, s, 2, out);
    case MLU_MX_SOFTMAX: return softmax_shapes(what, s, out);
    case MLU_MX_CONCAT: return concat_shapes(what, s, out);
    case MLU_MX_RESHAPE: {
      int status = expect_inputs(what, s, 1);
      if (status == MX_ACC_OK &&
          count_of(given, 0, given->ndim) != count_of(&s->in_shapes[0], 0, s->in_shapes[0].ndim)) {
        status = acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: the element counts differ", what);
      }
      *out = *given;
      return status;
    }
    default: return same_shape_inputs(what, s, 1, out); /* Activation, clip */
  }
}

/* ---- dtypes and required attributes --------------------------------------------------------- */

int mlu_is_param_input(int kind, int index) {
  switch (kind) {
    case MLU_MX_CONV:
    case MLU_MX_FC:
    case MLU_MX_BATCHNORM: return index >= 1;
    default: return 0;
  }
}

static int check_dtypes(const char *what, const mlu_node_spec *s) {
  int32_t data = s->out_dtype;
  if (mlu_cnml_dtype(data) < 0) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: dtype %s (the MLU runs float32 and float16)",
                    what, acc_dtype_name(data));
  }
  for (int i = 0; i < s->num_inputs; ++i) {
    int32_t dtype = s->in_dtypes[i];
    /* BatchNorm keeps float32 statistics for float16 data, as MXNet does. */
    int ok = dtype == data ||
             (s->op->kind == MLU_MX_BATCHNORM && i >= 1 && dtype == kFloat32);
    if (!ok) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: input %d is %s, output %s", what, i,
                      acc_dtype_name(dtype), acc_dtype_name(data));
    }
  }
  return MX_ACC_OK;
}

static int check_required(const char *what, const mlu_node_spec *s, int seen) {
  int kind = s->op->kind;
  int missing = (kind == MLU_MX_CONV && (seen & (kSeenKernel | kSeenRequired)) !=
                                             (kSeenKernel | kSeenRequired)) ||
                ((kind == MLU_MX_FC || kind == MLU_MX_ACT || kind == MLU_MX_CONCAT) &&
                 !(seen & kSeenRequired)) ||
                (kind == MLU_MX_CLIP && (seen & (kSeenRequired | kSeenRequired2)) !=
                                            (kSeenRequired | kSeenRequired2));
  if (missing) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a required attribute is missing", what);
  if (kind == MLU_MX_SOFTMAX && (seen & kSeenRequired) && s->in_dtypes[0] != s->out_dtype) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: softmax changing the dtype", what);
  }
  return MX_ACC_OK;
}

/* Whether the MLU can hold a tensor of shape: see the bounds above. */
static int shape_fits(const acc_shape *shape) {
  if (shape->ndim < 0 || shape->ndim > MLU_MAX_NDIM) return 0;
  uint64_t count = 1;
  for (int d = 0; d < shape->ndim; ++d) {
    uint64_t extent = shape->dims[d];
    if (extent > MLU_MAX_EXTENT) return 0;
    if (extent > 0 && count > MLU_MAX_ELEMENTS / extent) return 0;
    count *= extent;
  }
  return 1;
}

static int check_version(const char *what, const mlu_mx_op *op, const char *const *keys,
                         const char *const *vals, size_t count) {
  int64_t version = 1;
  for (size_t i = 0; i < count; ++i) {
    if (keys[i] != NULL && vals[i] != NULL && strcmp(keys[i], "__op_version__") == 0 &&
        acc_attr_int(vals[i], &version) != 0) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: __op_version__=\"%s\"", what, vals[i]);
    }
  }
  if (version != op->version) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: %s version %lld (the MLU implements %d)", what,
                    op->name, (long long)version, op->version);
  }
  return MX_ACC_OK;
}

int mlu_resolve_node(const char *what, const char *op_name, const char *const *keys,
                     const char *const *vals, size_t num_attrs, const acc_shape *in_shapes,
                     const int32_t *in_dtypes, int num_inputs, const acc_shape *out_shapes,
                     const int32_t *out_dtypes, int num_outputs, mlu_node_spec *spec) {
  memset(spec, 0, sizeof *spec);
  spec->op = op_name != NULL ? find_op(op_name) : NULL;
  if (spec->op == NULL) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: operator %s does not run on the MLU", what,
                    op_name ? op_name : "(null)");
  }
  if (num_attrs > 0 && (keys == NULL || vals == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: attribute arrays are NULL", what);
  }
  if (num_outputs != 1 || num_inputs < 1 || num_inputs > MLU_NODE_MAX_INPUTS) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: %d inputs and %d outputs", what, num_inputs,
                    num_outputs);
  }
  int status = check_version(what, spec->op, keys, vals, num_attrs);
  if (status != MX_ACC_OK) return status;
  spec->num_inputs = num_inputs;
  for (int i = 0; i <= num_inputs; ++i) {
    const acc_shape *shape = i < num_inputs ? &in_shapes[i] : &out_shapes[0];
    if (!shape_fits(shape)) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: a tensor of more than %d dimensions, an "
                      "extent above 2^31 or more than 2^40 elements", what, MLU_MAX_NDIM);
    }
    if (i < num_inputs) {
      spec->in_shapes[i] = in_shapes[i];
      spec->in_dtypes[i] = in_dtypes[i];
    }
  }
  spec->out_dtype = out_dtypes[0];
  int seen = 0;
  acc_shape inferred;
  status = check_dtypes(what, spec);
  if (status == MX_ACC_OK) status = parse_attrs(spec, keys, vals, num_attrs, &seen);
  if (status == MX_ACC_OK) status = check_required(what, spec, seen);
  if (status == MX_ACC_OK) status = infer_output(what, spec, seen, &out_shapes[0], &inferred);
  if (status == MX_ACC_OK) status = expect_shape(what, "output", &out_shapes[0], &inferred);
  spec->out_shape = out_shapes[0];
  return status;
}

/* ---- building BaseOps ----------------------------------------------------------------------- */

static void dims_of(const acc_shape *shape, int64_t *dims) {
  for (int d = 0; d < shape->ndim; ++d) dims[d] = (int64_t)shape->dims[d];
}

/* Creates parameter tensor k of built from node input index, as a tensor
 * of ndim dims (NULL: the input's own shape), bound to data if given. */
static int add_param(mlu_built_node *built, const mlu_node_spec *s, int index,
                     cnmlTensorType_t type, int ndim, const int64_t *dims, const void *data) {
  int64_t own[MLU_MAX_NDIM];
  if (dims == NULL) {
    dims_of(&s->in_shapes[index], own);
    dims = own;
    ndim = s->in_shapes[index].ndim;
  }
  int k = built->num_params;
  cnmlDataType_t dtype = (cnmlDataType_t)mlu_cnml_dtype(s->in_dtypes[index]);
  int status = cnmlCreateTensor(&built->params[k], type, dtype, dims, ndim);
  if (status != MX_ACC_OK) return status;
  built->param_input[k] = index;
  built->num_params += 1;
  if (data == NULL) return MX_ACC_OK;
  acc_shape shape = s->in_shapes[index];
  return mlu_bind_param(built, k, data, s->in_dtypes[index], &shape);
}

int mlu_bind_param(mlu_built_node *built, int k, const void *data, int32_t dtype,
                   const acc_shape *shape) {
  cnmlTensor_t tensor = built->params[k];
  cnmlCpuTensor_t cpu = NULL;
  int64_t count = count_of(shape, 0, shape->ndim);
  cnmlDataType_t type = (cnmlDataType_t)mlu_cnml_dtype(dtype);
  int status = cnmlCreateCpuTensor(&cpu, CNML_TENSOR, type, &count, 1);
  if (status == MX_ACC_OK) status = cnmlBindConstData(tensor, cpu, data);
  cnmlDestroyCpuTensor(&cpu);
  return status;
}

/* The parameter tensor made from node input index, or NULL. */
static cnmlTensor_t param_from(const mlu_built_node *built, int index) {
  for (int k = 0; k < built->num_params; ++k) {
    if (built->param_input[k] == index) return built->params[k];
  }
  return NULL;
}

static int build_conv(const mlu_node_spec *s, const cnmlTensor_t *data, cnmlTensor_t output,
                      const void *const *param_data, mlu_built_node *b) {
  int64_t filters = s->u.conv.num_filter;
  int status = add_param(b, s, 1, CNML_FILTER, 0, NULL, param_data ? param_data[1] : NULL);
  if (status == MX_ACC_OK && !s->u.conv.no_bias) {
    status = add_param(b, s, 2, CNML_CONST, 1, &filters, param_data ? param_data[2] : NULL);
  }
  if (status == MX_ACC_OK) {
    status = cnmlCreateConvOpParam(&b->conv_param, (int)s->u.conv.stride[0],
                                   (int)s->u.conv.stride[1], (int)s->u.conv.dilate[0],
                                   (int)s->u.conv.dilate[1], (int)s->u.conv.pad[0],
                                   (int)s->u.conv.pad[1]);
  }
  if (status != MX_ACC_OK) return status;
  return cnmlCreateConvGroupOp(&b->op, b->conv_param, data[0], output, param_from(b, 1),
                               param_from(b, 2), (int)s->u.conv.groups);
}

static int build_fc(const mlu_node_spec *s, const cnmlTensor_t *data, cnmlTensor_t output,
                    const void *const *param_data, mlu_built_node *b) {
  int64_t hidden = (int64_t)s->in_shapes[1].dims[0];
  int status = add_param(b, s, 1, CNML_FILTER, 0, NULL, param_data ? param_data[1] : NULL);
  if (status == MX_ACC_OK && !s->u.fc.no_bias) { /* (hidden,) or (hidden, 1): one vector */
    status = add_param(b, s, 2, CNML_CONST, 1, &hidden, param_data ? param_data[2] : NULL);
  }
  if (status != MX_ACC_OK) return status;
  return cnmlCreateMlpOp(&b->op, data[0], output, param_from(b, 1), param_from(b, 2));
}

static int build_batchnorm(const mlu_node_spec *s, const cnmlTensor_t *data, cnmlTensor_t output,
                           const void *const *param_data, mlu_built_node *b) {
  int status = MX_ACC_OK;
  /* inputs: data, gamma, beta, moving_mean, moving_var; fix_gamma ignores gamma */
  for (int i = s->u.bn.fix_gamma ? 2 : 1; i < 5 && status == MX_ACC_OK; ++i) {
    status = add_param(b, s, i, CNML_CONST, 0, NULL, param_data ? param_data[i] : NULL);
  }
  if (status != MX_ACC_OK) return status;
  return cnmlCreateBatchNormOp(&b->op, data[0], output, param_from(b, 3), param_from(b, 4),
                               param_from(b, 1), param_from(b, 2), s->u.bn.eps);
}

static int build_pool(const mlu_node_spec *s, const cnmlTensor_t *data, cnmlTensor_t output,
                      mlu_built_node *b) {
  int status = cnmlCreatePoolOpParam(
      &b->pool_param, (int)s->u.pool.kernel[0], (int)s->u.pool.kernel[1], (int)s->u.pool.stride[0],
      (int)s->u.pool.stride[1], (int)s->u.pool.pad[0], (int)s->u.pool.pad[1],
      (cnmlPoolMode_t)s->u.pool.mode, s->u.pool.full ? CNML_POOL_KFULL : CNML_POOL_KVALID,
      s->u.pool.count_include_pad);
  if (status != MX_ACC_OK) return status;
  return cnmlCreatePoolOp(&b->op, b->pool_param, data[0], output);
}

int mlu_build_node(const mlu_node_spec *s, const cnmlTensor_t *data, cnmlTensor_t output,
                   const void *const *param_data, mlu_built_node *b) {
  memset(b, 0, sizeof *b);
  int status;
  switch (s->op->kind) {
    case MLU_MX_CONV: status = build_conv(s, data, output, param_data, b); break;
    case MLU_MX_FC: status = build_fc(s, data, output, param_data, b); break;
    case MLU_MX_BATCHNORM: status = build_batchnorm(s, data, output, param_data, b); break;
    case MLU_MX_POOL: status = build_pool(s, data, output, b); break;
    case MLU_MX_ACT:
      status = cnmlCreateActiveOp(&b->op, (cnmlActiveFunction_t)s->u.act, data[0], output);
      break;
    case MLU_MX_CLIP:
      status = cnmlCreateClipOp(&b->op, data[0], output, s->u.clip.lo, s->u.clip.hi);
      break;
    case MLU_MX_ADD: status = cnmlCreateAddOp(&b->op, data[0], data[1], output); break;
    case MLU_MX_MUL: status = cnmlCreateMultOp(&b->op, data[0], data[1], output); break;
    case MLU_MX_SOFTMAX:
      status = cnmlCreateSoftmaxOp(&b->op, s->u.softmax.axis, s->u.softmax.temperature, data[0],
                                   output);
      break;
    case MLU_MX_CONCAT:
      status = cnmlCreateConcatOp(&b->op, s->u.concat_axis, data, s->num_inputs, output);
      break;
    default: status = cnmlCreateReshapeOp(&b->op, data[0], output); break;
  }
  if (status != MX_ACC_OK) mlu_free_node(b);
  return status;
}

void mlu_free_node(mlu_built_node *b) {
  cnmlDestroyBaseOp(&b->op);
  for (int k = 0; k < b->num_params; ++k) cnmlDestroyTensor(&b->params[k]);
  b->num_params = 0;
  cnmlDestroyConvOpParam(&b->conv_param);
  cnmlDestroyPoolOpParam(&b->pool_param);
}
