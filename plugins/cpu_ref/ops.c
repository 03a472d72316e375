/*
 * The operator table of cpu_ref, operator lookup and resolution, and the
 * attribute and shape helpers the operator families share (op_impl.h). The
 * families themselves are in ops_nn.c (layers), ops_math.c (arithmetic,
 * math, reductions, products) and ops_shape.c (shapes and copies). All
 * operators are float32.
 *
 * Unknown attributes are rejected as unsupported rather than ignored: an
 * attribute this plugin does not understand may change the result.
 */
#include "ops.h"

#include <stdio.h>
#include <string.h>

#include "attrs.h"
#include "op_impl.h"
#include "status.h"
#include "tensor.h"

_Static_assert(CR_MAX_NDIM == MX_ACC_MAX_NDIM, "kernels.h and mxnet_acc.h disagree");

/* ---- attribute helpers ------------------------------------------------- */

int cr_bad_attr(const char *key, const char *value, const char *expected) {
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute %s=\"%s\": expected %s", key, value,
                  expected);
}

int cr_unknown_attr(const char *key) {
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "attribute \"%s\" is not supported", key);
}

int cr_parse_bool(const char *key, const char *value, int *out) {
  return acc_attr_bool(value, out) == 0 ? MX_ACC_OK : cr_bad_attr(key, value, "a boolean");
}

int cr_parse_int(const char *key, const char *value, int64_t *out) {
  return acc_attr_int(value, out) == 0 ? MX_ACC_OK : cr_bad_attr(key, value, "an integer");
}

int cr_parse_positive_int(const char *key, const char *value, int64_t *out) {
  if (acc_attr_int(value, out) != 0 || *out <= 0) {
    return cr_bad_attr(key, value, "a positive integer");
  }
  return MX_ACC_OK;
}

int cr_parse_float(const char *key, const char *value, double *out) {
  return acc_attr_float(value, out) == 0 ? MX_ACC_OK : cr_bad_attr(key, value, "a number");
}

int cr_parse_axis(const char *key, const char *value, int *out) {
  int64_t axis;
  if (acc_attr_int(value, &axis) != 0 || axis < -(MX_ACC_MAX_NDIM + 1) ||
      axis > MX_ACC_MAX_NDIM) {
    return cr_bad_attr(key, value, "an axis");
  }
  *out = (int)axis;
  return MX_ACC_OK;
}

int cr_parse_axes(const char *key, const char *value, cr_axes *axes) {
  axes->given = 0;
  axes->count = 0;
  if (acc_attr_is_none(value)) return MX_ACC_OK;
  if (acc_attr_int_tuple(value, axes->values, CR_MAX_NDIM, &axes->count) != 0) {
    return cr_bad_attr(key, value, "None or a tuple of at most 16 axes");
  }
  axes->given = 1;
  return MX_ACC_OK;
}

int cr_parse_count(const char *key, const char *value, int maximum, int *out) {
  int64_t count;
  int status = cr_parse_positive_int(key, value, &count);
  if (status != MX_ACC_OK) return status;
  if (count > maximum) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "attribute %s=\"%s\": cpu_ref supports at most %d",
                    key, value, maximum);
  }
  *out = (int)count;
  return MX_ACC_OK;
}

int cr_parse_float32_dtype(const char *key, const char *value) {
  if (acc_attr_is_none(value) || acc_attr_equals(value, "float32")) return MX_ACC_OK;
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "attribute %s=\"%s\": only float32", key, value);
}

int cr_require_count(const char *key, int count) {
  return count > 0 ? MX_ACC_OK
                   : acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute %s is required", key);
}

int cr_no_attrs_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  (void)vals;
  (void)params;
  return count == 0 ? MX_ACC_OK : cr_unknown_attr(keys[0]);
}

/* Attributes that only tune MXNet's own implementations (memory, cuDNN,
 * quantization calibration, device placement) and never change the result:
 * accepted, and ignored, on every operator, as the host's registry does. */
static int is_tuning_attr(const char *key) {
  static const char *const kTuning[] = {"workspace",       "cudnn_tune",      "cudnn_off",
                                        "min_calib_range", "max_calib_range", "ctx_group"};
  for (size_t i = 0; i < sizeof kTuning / sizeof kTuning[0]; ++i) {
    if (strcmp(key, kTuning[i]) == 0) return 1;
  }
  return 0;
}

/* ---- shape helpers ----------------------------------------------------- */

int cr_resolve_axis(int64_t axis, int ndim, int *resolved) {
  int64_t value = axis < 0 ? axis + ndim : axis;
  if (value < 0 || value >= ndim) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "axis %lld is out of range for %d dimensions",
                    (long long)axis, ndim);
  }
  *resolved = (int)value;
  return MX_ACC_OK;
}

int cr_shape_error(const char *fmt, const acc_shape *shape) {
  char text[256];
  acc_shape_format(shape, text, sizeof text);
  return acc_fail(MX_ACC_ERR_INVALID_ARG, fmt, text);
}

int64_t cr_product(const acc_shape *shape, int begin, int end) {
  int64_t result = 1;
  for (int i = begin; i < end; ++i) result *= (int64_t)shape->dims[i];
  return result;
}

int64_t cr_element_count(const acc_shape *shape) { return cr_product(shape, 0, shape->ndim); }

uint64_t cr_max_elements(void) {
  uint64_t limit = (uint64_t)INT64_MAX;
  if ((uint64_t)SIZE_MAX < limit) limit = (uint64_t)SIZE_MAX;
  return limit / sizeof(float);
}

int cr_checked_mul(uint64_t a, uint64_t b, const char *what, uint64_t *out) {
  if (a != 0 && b > cr_max_elements() / a) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s is too large", what);
  }
  *out = a * b;
  return MX_ACC_OK;
}

/* Kernels compute element offsets as int64_t products of extents. Bounding
 * the product of a shape's nonzero extents bounds every such product (an
 * empty tensor may have other huge extents), so none can overflow. */
static int check_extents(const acc_shape *shape, const char *what, const char *role, int index) {
  uint64_t total = 1;
  for (int i = 0; i < shape->ndim; ++i) {
    if (shape->dims[i] == 0) continue;
    if (cr_checked_mul(total, shape->dims[i], "shape", &total) != MX_ACC_OK) {
      char text[256];
      acc_shape_format(shape, text, sizeof text);
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %s %d has shape %s, which is too large",
                      what, role, index, text);
    }
  }
  return MX_ACC_OK;
}

int cr_view_dims(const acc_shape *shape, int64_t dims[CR_MAX_NDIM]) {
  if (shape->ndim == 0) {
    dims[0] = 1;
    return 1;
  }
  for (int d = 0; d < shape->ndim; ++d) dims[d] = (int64_t)shape->dims[d];
  return shape->ndim;
}

void cr_compact_strides(const acc_shape *shape, int64_t strides[CR_MAX_NDIM]) {
  int64_t stride = 1;
  for (int d = shape->ndim - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= (int64_t)shape->dims[d];
  }
}

int cr_one_input(const cr_params *params) {
  (void)params;
  return 1;
}

int cr_two_inputs(const cr_params *params) {
  (void)params;
  return 2;
}

int cr_one_output(const cr_params *params) {
  (void)params;
  return 1;
}

int cr_same_shape_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out) {
  (void)params;
  (void)num_in;
  *out = in[0];
  return MX_ACC_OK;
}

void cr_copy_run(const cr_params *params, const cr_tensor *in, int num_in, const cr_tensor *out,
                 int num_threads) {
  (void)params;
  (void)num_in;
  (void)num_threads;
  size_t count = (size_t)cr_element_count(&out->shape);
  if (count > 0) memcpy(out->data, in[0].data, count * sizeof(float));
}

/* ---- the table --------------------------------------------------------- */

/* One row per operator: name, aliases, version, variant, family. The
 * names, attributes and semantics are those of the host's registry
 * (acc_host.ops), which tests/test_cpu_ref_ops.py checks every row against. */
static const cr_op kOps[] = {
    /* neural-network layers (ops_nn.c) */
    {"Activation", {NULL}, 1, 0, &cr_impl_activation},
    {"BatchNorm", {NULL}, 1, 0, &cr_impl_batch_norm},
    {"Convolution", {NULL}, 1, 0, &cr_impl_convolution},
    {"Dropout", {NULL}, 1, 0, &cr_impl_dropout},
    {"Embedding", {NULL}, 1, 0, &cr_impl_embedding},
    {"FullyConnected", {NULL}, 1, 0, &cr_impl_fully_connected},
    {"LayerNorm", {NULL}, 1, 0, &cr_impl_layer_norm},
    {"LeakyReLU", {NULL}, 1, 0, &cr_impl_leaky_relu},
    {"Pooling", {NULL}, 1, 0, &cr_impl_pooling},
    {"softmax", {NULL}, 1, 0, &cr_impl_softmax},
    {"log_softmax", {NULL}, 1, 1, &cr_impl_softmax},

    /* element-wise arithmetic (ops_math.c) */
    {"elemwise_add", {"_add", "_plus", "_Plus"}, 1, CR_BINARY_ADD, &cr_impl_elemwise},
    {"elemwise_sub", {"_sub", "_minus", "_Minus"}, 1, CR_BINARY_SUB, &cr_impl_elemwise},
    {"elemwise_mul", {"_mul", "_Mul"}, 1, CR_BINARY_MUL, &cr_impl_elemwise},
    {"elemwise_div", {"_div", "_Div"}, 1, CR_BINARY_DIV, &cr_impl_elemwise},
    {"_power", {"_Power"}, 1, CR_BINARY_POWER, &cr_impl_elemwise},
    {"_maximum", {"_Maximum"}, 1, CR_BINARY_MAXIMUM, &cr_impl_elemwise},
    {"_minimum", {"_Minimum"}, 1, CR_BINARY_MINIMUM, &cr_impl_elemwise},
    {"broadcast_add", {"broadcast_plus"}, 1, CR_BINARY_ADD, &cr_impl_broadcast},
    {"broadcast_sub", {"broadcast_minus"}, 1, CR_BINARY_SUB, &cr_impl_broadcast},
    {"broadcast_mul", {NULL}, 1, CR_BINARY_MUL, &cr_impl_broadcast},
    {"broadcast_div", {NULL}, 1, CR_BINARY_DIV, &cr_impl_broadcast},
    {"broadcast_power", {NULL}, 1, CR_BINARY_POWER, &cr_impl_broadcast},
    {"broadcast_maximum", {NULL}, 1, CR_BINARY_MAXIMUM, &cr_impl_broadcast},
    {"broadcast_minimum", {NULL}, 1, CR_BINARY_MINIMUM, &cr_impl_broadcast},
    {"_plus_scalar", {"_PlusScalar"}, 1, CR_BINARY_ADD, &cr_impl_scalar},
    {"_minus_scalar", {"_MinusScalar"}, 1, CR_BINARY_SUB, &cr_impl_scalar},
    {"_rminus_scalar", {"_RMinusScalar"}, 1, CR_BINARY_SUB | CR_SCALAR_ON_LEFT, &cr_impl_scalar},
    {"_mul_scalar", {"_MulScalar"}, 1, CR_BINARY_MUL, &cr_impl_scalar},
    {"_div_scalar", {"_DivScalar"}, 1, CR_BINARY_DIV, &cr_impl_scalar},
    {"_rdiv_scalar", {"_RDivScalar"}, 1, CR_BINARY_DIV | CR_SCALAR_ON_LEFT, &cr_impl_scalar},
    {"_power_scalar", {"_PowerScalar"}, 1, CR_BINARY_POWER, &cr_impl_scalar},
    {"_rpower_scalar", {"_RPowerScalar"}, 1, CR_BINARY_POWER | CR_SCALAR_ON_LEFT,
     &cr_impl_scalar},
    {"_maximum_scalar", {"_MaximumScalar"}, 1, CR_BINARY_MAXIMUM, &cr_impl_scalar},
    {"_minimum_scalar", {"_MinimumScalar"}, 1, CR_BINARY_MINIMUM, &cr_impl_scalar},
    {"add_n", {"ElementWiseSum"}, 1, 0, &cr_impl_add_n},
    {"clip", {NULL}, 1, 0, &cr_impl_clip},
    {"zeros_like", {NULL}, 1, 0, &cr_impl_fill_like},
    {"ones_like", {NULL}, 1, 1, &cr_impl_fill_like},

    /* element-wise math (ops_math.c) */
    {"abs", {NULL}, 1, CR_UNARY_ABS, &cr_impl_unary},
    {"negative", {NULL}, 1, CR_UNARY_NEGATIVE, &cr_impl_unary},
    {"square", {NULL}, 1, CR_UNARY_SQUARE, &cr_impl_unary},
    {"reciprocal", {NULL}, 1, CR_UNARY_RECIPROCAL, &cr_impl_unary},
    {"sqrt", {NULL}, 1, CR_UNARY_SQRT, &cr_impl_unary},
    {"rsqrt", {NULL}, 1, CR_UNARY_RSQRT, &cr_impl_unary},
    {"cbrt", {NULL}, 1, CR_UNARY_CBRT, &cr_impl_unary},
    {"exp", {NULL}, 1, CR_UNARY_EXP, &cr_impl_unary},
    {"expm1", {NULL}, 1, CR_UNARY_EXPM1, &cr_impl_unary},
    {"log", {NULL}, 1, CR_UNARY_LOG, &cr_impl_unary},
    {"log1p", {NULL}, 1, CR_UNARY_LOG1P, &cr_impl_unary},
    {"log2", {NULL}, 1, CR_UNARY_LOG2, &cr_impl_unary},
    {"log10", {NULL}, 1, CR_UNARY_LOG10, &cr_impl_unary},
    {"sin", {NULL}, 1, CR_UNARY_SIN, &cr_impl_unary},
    {"cos", {NULL}, 1, CR_UNARY_COS, &cr_impl_unary},
    {"tanh", {NULL}, 1, CR_UNARY_TANH, &cr_impl_unary},
    {"sigmoid", {NULL}, 1, CR_UNARY_SIGMOID, &cr_impl_unary},
    {"relu", {NULL}, 1, CR_UNARY_RELU, &cr_impl_unary},
    {"erf", {NULL}, 1, CR_UNARY_ERF, &cr_impl_unary},
    {"sign", {NULL}, 1, CR_UNARY_SIGN, &cr_impl_unary},
    {"floor", {NULL}, 1, CR_UNARY_FLOOR, &cr_impl_unary},
    {"ceil", {NULL}, 1, CR_UNARY_CEIL, &cr_impl_unary},
    {"trunc", {NULL}, 1, CR_UNARY_TRUNC, &cr_impl_unary},
    {"fix", {NULL}, 1, CR_UNARY_TRUNC, &cr_impl_unary},
    {"round", {NULL}, 1, CR_UNARY_ROUND, &cr_impl_unary},
    {"rint", {NULL}, 1, CR_UNARY_RINT, &cr_impl_unary},

    /* shapes and copies (ops_shape.c) */
    {"_copy", {"identity"}, 1, 0, &cr_impl_copy},
    {"BlockGrad", {"stop_gradient"}, 1, 0, &cr_impl_copy},
    {"Flatten", {"flatten"}, 1, 0, &cr_impl_flatten},
    {"Reshape", {"reshape"}, 1, 0, &cr_impl_reshape},
    {"expand_dims", {NULL}, 1, 0, &cr_impl_expand_dims},
    {"squeeze", {NULL}, 1, 0, &cr_impl_squeeze},
    {"transpose", {NULL}, 1, 0, &cr_impl_transpose},
    {"Concat", {"concat"}, 1, 0, &cr_impl_concat},
    {"SliceChannel", {"split"}, 1, 0, &cr_impl_split},
    {"slice_axis", {NULL}, 1, 0, &cr_impl_slice_axis},

    /* reductions and products (ops_math.c) */
    {"sum", {"sum_axis"}, 1, CR_REDUCE_SUM, &cr_impl_reduce},
    {"mean", {NULL}, 1, CR_REDUCE_MEAN, &cr_impl_reduce},
    {"max", {"max_axis"}, 1, CR_REDUCE_MAX, &cr_impl_reduce},
    {"min", {"min_axis"}, 1, CR_REDUCE_MIN, &cr_impl_reduce},
    {"dot", {NULL}, 1, 0, &cr_impl_dot},
    {"batch_dot", {NULL}, 1, 0, &cr_impl_batch_dot},
};

size_t cr_num_ops(void) { return sizeof kOps / sizeof kOps[0]; }

const cr_op *cr_op_at(size_t index) { return index < cr_num_ops() ? &kOps[index] : NULL; }

static int op_has_name(const cr_op *op, const char *name) {
  if (strcmp(op->name, name) == 0) return 1;
  for (int i = 0; i < CR_MAX_ALIASES && op->aliases[i] != NULL; ++i) {
    if (strcmp(op->aliases[i], name) == 0) return 1;
  }
  return 0;
}

const cr_op *cr_find_op(const char *name) {
  for (size_t i = 0; i < cr_num_ops(); ++i) {
    if (op_has_name(&kOps[i], name)) return &kOps[i];
  }
  return NULL;
}

/* ---- resolution -------------------------------------------------------- */

/* Splits attributes into the operator's own and the host's "__*__"
 * annotations (checking "__op_version__" on the way), and drops tuning
 * attributes. */
static int collect_op_attrs(const char *what, const cr_op *op, const char *const *keys,
                            const char *const *vals, size_t count, const char **own_keys,
                            const char **own_vals, size_t *own_count) {
  *own_count = 0;
  for (size_t i = 0; i < count; ++i) {
    if (keys[i] == NULL || vals[i] == NULL) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: attribute %zu is NULL", what, i);
    }
    size_t length = strlen(keys[i]);
    int annotation = length >= 4 && strncmp(keys[i], "__", 2) == 0 &&
                     strcmp(keys[i] + length - 2, "__") == 0;
    if (!annotation) {
      if (is_tuning_attr(keys[i])) continue;
      own_keys[*own_count] = keys[i];
      own_vals[*own_count] = vals[i];
      ++*own_count;
    } else if (strcmp(keys[i], "__op_version__") == 0) {
      int64_t version;
      if (acc_attr_int(vals[i], &version) != 0 || version != op->version) {
        return acc_fail(MX_ACC_ERR_UNSUPPORTED,
                        "%s: %s version \"%s\" is not supported (cpu_ref implements %d)", what,
                        op->name, vals[i], op->version);
      }
    }
  }
  return MX_ACC_OK;
}

/* Prefixes the message of the failure just recorded with the node. */
static int fail_in(int status, const char *what, const char *op_name) {
  char detail[512];
  snprintf(detail, sizeof detail, "%s", acc_last_error());
  return acc_fail(status, "%s (%s): %s", what, op_name, detail);
}

static int check_dtypes(const char *what, const char *op_name, const char *role,
                        const int32_t *dtypes, int count) {
  for (int i = 0; i < count; ++i) {
    if (dtypes[i] != kFloat32) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s (%s): %s %d has dtype %s; only float32",
                      what, op_name, role, i, acc_dtype_name(dtypes[i]));
    }
  }
  return MX_ACC_OK;
}

static int check_all_extents(const char *what, const acc_shape *in_shapes, int num_inputs,
                             const acc_shape *out_shapes, int num_outputs) {
  int status = MX_ACC_OK;
  for (int i = 0; i < num_inputs && status == MX_ACC_OK; ++i) {
    status = check_extents(&in_shapes[i], what, "input", i);
  }
  for (int i = 0; i < num_outputs && status == MX_ACC_OK; ++i) {
    status = check_extents(&out_shapes[i], what, "output", i);
  }
  return status;
}

int cr_resolve_op(const char *what, const char *op_name, const char *const *keys,
                  const char *const *vals, size_t num_attrs, const acc_shape *in_shapes,
                  const int32_t *in_dtypes, int num_inputs, const acc_shape *out_shapes,
                  const int32_t *out_dtypes, int num_outputs, const cr_op **op,
                  cr_params *params) {
  const cr_op *found = cr_find_op(op_name);
  if (found == NULL) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: operator %s is not supported", what, op_name);
  }
  enum { kMaxAttrs = 64 };
  const char *own_keys[kMaxAttrs], *own_vals[kMaxAttrs];
  size_t own_count;
  if (num_attrs > kMaxAttrs) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %zu attributes, at most %d allowed", what,
                    num_attrs, kMaxAttrs);
  }
  int status = collect_op_attrs(what, found, keys, vals, num_attrs, own_keys, own_vals,
                                &own_count);
  if (status != MX_ACC_OK) return status;
  memset(params, 0, sizeof *params);
  params->variant = found->variant;
  status = found->impl->parse(own_keys, own_vals, own_count, params);
  if (status != MX_ACC_OK) return fail_in(status, what, op_name);
  int expected_inputs = found->impl->num_inputs(params);
  int expected_outputs = found->impl->num_outputs(params);
  if (num_inputs != expected_inputs || num_outputs != expected_outputs) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s (%s): %d inputs and %d outputs, expected %d "
                    "and %d", what, op_name, num_inputs, num_outputs, expected_inputs,
                    expected_outputs);
  }
  status = check_dtypes(what, op_name, "input", in_dtypes, num_inputs);
  if (status == MX_ACC_OK) status = check_dtypes(what, op_name, "output", out_dtypes, num_outputs);
  if (status == MX_ACC_OK) {
    status = check_all_extents(what, in_shapes, num_inputs, out_shapes, num_outputs);
  }
  if (status != MX_ACC_OK) return status;
  acc_shape inferred[CR_MAX_OUTPUTS];
  status = found->impl->infer_shape(params, in_shapes, num_inputs, inferred);
  if (status != MX_ACC_OK) return fail_in(status, what, op_name);
  for (int k = 0; k < num_outputs; ++k) {
    if (!acc_shape_equal(&inferred[k], &out_shapes[k])) {
      char index[16] = "", got[256], want[256];
      if (num_outputs > 1) snprintf(index, sizeof index, " %d", k);
      acc_shape_format(&out_shapes[k], got, sizeof got);
      acc_shape_format(&inferred[k], want, sizeof want);
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s (%s): output%s shape %s, expected %s", what,
                      op_name, index, got, want);
    }
  }
  *op = found;
  return MX_ACC_OK;
}
