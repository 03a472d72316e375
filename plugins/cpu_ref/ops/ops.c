/*
 * The operator table of cpu_ref, operator lookup and resolution, and the
 * attribute, shape and dtype helpers the operator families share
 * (op_impl.h). The families themselves are in ops_nn.c and ops_norm.c
 * (layers), ops_math.c (arithmetic, math, reductions, products),
 * ops_shape.c and ops_replicate.c (shapes, copies, conversions, replication),
 * ops_index.c (indexing and searching) and ops_onnx*.c (the ONNX importer's
 * _onnx_* operators, with the semantics of their numpy definitions).
 *
 * Every family states the dtypes it runs in its check_dtypes function: the
 * ones that compute (layers, arithmetic, math) run float32, and float16
 * widened to float32 (cr_run_float32); the ones that only move elements run
 * every dtype by element size; comparisons, where, take and Cast also take
 * integers.
 *
 * Unknown attributes are rejected as unsupported rather than ignored: an
 * attribute this plugin does not understand may change the result.
 */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "op_impl.h"
#include "reference.h"
#include "status.h"
#include "tensor.h"

_Static_assert(CR_MAX_NDIM == MX_ACC_MAX_NDIM, "kernels.h and mxnet_acc.h disagree");
_Static_assert((int)CR_FLOAT32 == (int)kFloat32 && (int)CR_FLOAT64 == (int)kFloat64 &&
                   (int)CR_FLOAT16 == (int)kFloat16 && (int)CR_UINT8 == (int)kUint8 &&
                   (int)CR_INT32 == (int)kInt32 && (int)CR_INT8 == (int)kInt8 &&
                   (int)CR_INT64 == (int)kInt64,
               "kernels.h and mxnet_acc.h disagree on dtypes");

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

int cr_parse_dtype(const char *key, const char *value, int none_ok, int *dtype) {
  static const struct {
    const char *name;
    int dtype;
  } kNames[] = {{"float32", kFloat32}, {"float64", kFloat64}, {"float16", kFloat16},
                {"uint8", kUint8},     {"int32", kInt32},     {"int8", kInt8},
                {"int64", kInt64}};
  if (none_ok && acc_attr_is_none(value)) {
    *dtype = -1;
    return MX_ACC_OK;
  }
  for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; ++i) {
    if (acc_attr_equals(value, kNames[i].name)) {
      *dtype = kNames[i].dtype;
      return MX_ACC_OK;
    }
  }
  if (acc_attr_equals(value, "bool")) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "attribute %s=\"%s\": mxnet_acc.h has no bool dtype",
                    key, value);
  }
  return cr_bad_attr(key, value, none_ok ? "None or a dtype name" : "a dtype name");
}

/* Splits the text of a tuple into its entries, each checked as an integer
 * or "None". The brackets are optional (a bare "3" is a tuple of one), and
 * a trailing comma is allowed ("(2,)"). */
int cr_parse_optional_tuple(const char *key, const char *value, int64_t *values,
                            unsigned char *present, int capacity, int *count) {
  char text[512];
  const int length = snprintf(text, sizeof text, "%s", value);
  if (length < 0 || (size_t)length >= sizeof text) {
    return cr_bad_attr(key, value, "a shorter tuple");
  }
  char *begin = text, *end = text + length;
  while (begin < end && (*begin == ' ' || *begin == '\t')) ++begin;
  while (end > begin && (end[-1] == ' ' || end[-1] == '\t')) --end;
  if (end > begin && ((*begin == '(' && end[-1] == ')') || (*begin == '[' && end[-1] == ']'))) {
    ++begin;
    --end;
  }
  *end = '\0';
  *count = 0;
  char *entry = begin;
  while (1) {
    char *comma = strchr(entry, ',');
    if (comma != NULL) *comma = '\0';
    int64_t number;
    int blank = 1;
    for (const char *c = entry; *c != '\0'; ++c) blank = blank && (*c == ' ' || *c == '\t');
    if (blank) {
      /* Only "()" or a trailing comma may leave an entry empty. */
      if (comma != NULL || (*count == 0 && entry != begin)) {
        return cr_bad_attr(key, value, "a tuple of integers or None");
      }
      break;
    }
    if (*count == capacity) return cr_bad_attr(key, value, "fewer entries");
    if (acc_attr_is_none(entry)) {
      present[*count] = 0;
      values[*count] = 0;
    } else if (acc_attr_int(entry, &number) == 0) {
      present[*count] = 1;
      values[*count] = number;
    } else {
      return cr_bad_attr(key, value, "a tuple of integers or None");
    }
    ++*count;
    if (comma == NULL) break;
    entry = comma + 1;
  }
  return MX_ACC_OK;
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
  return limit / sizeof(int64_t); /* the widest dtype's element */
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

int cr_three_inputs(const cr_params *params) {
  (void)params;
  return 3;
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

int cr_copy_run(const cr_params *params, const cr_tensor *in, int num_in, const cr_tensor *out,
                int num_threads) {
  (void)num_in;
  const size_t count = (size_t)cr_element_count(&out->shape);
  if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_ref_copy_bytes(count * cr_in_size(params, 0), in[0].data, out->data);
  } else {
    cr_copy_bytes(count * cr_in_size(params, 0), in[0].data, out->data, num_threads);
  }
  return MX_ACC_OK;
}

/* ---- dtype helpers ---------------------------------------------------- */

int cr_dtype_allowed(const char *role, int index, int32_t dtype, unsigned allowed,
                     const char *family, const char *allowed_text) {
  if (dtype >= 0 && dtype < 32 && (allowed & CR_DTYPE_BIT(dtype)) != 0) return MX_ACC_OK;
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s %d has dtype %s; %s runs only %s", role, index,
                  acc_dtype_name(dtype), family, allowed_text);
}

int cr_dtype_expect(const char *role, int index, int32_t dtype, int32_t expected) {
  if (dtype == expected) return MX_ACC_OK;
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s %d has dtype %s, expected %s", role, index,
                  acc_dtype_name(dtype), acc_dtype_name(expected));
}

/* Every input from first on and every output has dtype expected. */
static int all_dtypes_are(const cr_params *params, int first, int32_t expected) {
  int status = MX_ACC_OK;
  for (int i = first; i < params->num_inputs && status == MX_ACC_OK; ++i) {
    status = cr_dtype_expect("input", i, params->in_dtypes[i], expected);
  }
  for (int k = 0; k < params->num_outputs && status == MX_ACC_OK; ++k) {
    status = cr_dtype_expect("output", k, params->out_dtypes[k], expected);
  }
  return status;
}

int cr_dtypes_float(const cr_params *params) {
  int status = cr_dtype_allowed("input", 0, params->in_dtypes[0], CR_DTYPES_FLOAT,
                                "this operator", "float32 and float16");
  return status == MX_ACC_OK ? all_dtypes_are(params, 1, params->in_dtypes[0]) : status;
}

int cr_dtypes_any(const cr_params *params) {
  return all_dtypes_are(params, 1, params->in_dtypes[0]);
}

int cr_dtypes_first_any(const cr_params *params) {
  return all_dtypes_are(params, params->num_inputs, params->in_dtypes[0]);
}

size_t cr_in_size(const cr_params *params, int index) {
  return cr_dtype_size(cr_in_dtype(params, index));
}

size_t cr_out_size(const cr_params *params, int index) {
  return cr_dtype_size(cr_out_dtype(params, index));
}

/* 1 if any input or output is float16. */
static int has_float16(const cr_params *params) {
  for (int i = 0; i < params->num_inputs; ++i) {
    if (params->in_dtypes[i] == kFloat16) return 1;
  }
  for (int k = 0; k < params->num_outputs; ++k) {
    if (params->out_dtypes[k] == kFloat16) return 1;
  }
  return 0;
}

int cr_run_float32(const cr_params *params, const cr_tensor *in, int num_in,
                   const cr_tensor *out, int num_threads, cr_run_fn compute) {
  if (!has_float16(params)) return compute(params, in, num_in, out, num_threads);
  cr_tensor wide_in[CR_MAX_INPUTS], wide_out[CR_MAX_OUTPUTS];
  float *owned[CR_MAX_INPUTS + CR_MAX_OUTPUTS];
  int num_owned = 0, status = MX_ACC_OK;
  const int num_out = params->num_outputs;
  /* Unused entries are cleared too: compilers cannot tell how many compute
   * reads. */
  memset(wide_in, 0, sizeof wide_in);
  memset(wide_out, 0, sizeof wide_out);
  for (int i = 0; i < num_in; ++i) wide_in[i] = in[i];
  for (int k = 0; k < num_out; ++k) wide_out[k] = out[k];
  /* The tensors of one call: inputs 0 .. num_in - 1, then the outputs. */
  for (int t = 0; t < num_in + num_out; ++t) {
    const int is_input = t < num_in, index = is_input ? t : t - num_in;
    const cr_tensor *tensor = is_input ? &in[index] : &out[index];
    cr_tensor *wide = is_input ? &wide_in[index] : &wide_out[index];
    const int32_t dtype = is_input ? params->in_dtypes[index] : params->out_dtypes[index];
    if (dtype != kFloat16) continue;
    const size_t count = (size_t)cr_element_count(&tensor->shape);
    float *buffer = malloc(count > 0 ? count * sizeof(float) : 1);
    if (buffer == NULL) {
      status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "cannot allocate %zu float32 values to widen "
                        "float16 data", count);
      break;
    }
    owned[num_owned++] = buffer;
    if (is_input) cr_widen_half((int64_t)count, tensor->data, buffer);
    wide->data = buffer;
  }
  if (status == MX_ACC_OK) status = compute(params, wide_in, num_in, wide_out, num_threads);
  for (int k = 0; k < num_out && status == MX_ACC_OK; ++k) {
    if (params->out_dtypes[k] == kFloat16) {
      cr_narrow_to_half(cr_element_count(&out[k].shape), wide_out[k].data, out[k].data);
    }
  }
  for (int i = 0; i < num_owned; ++i) free(owned[i]);
  return status;
}

/* ---- the table --------------------------------------------------------- */

/* One row per operator: name, aliases, version, variant, family. The
 * names, attributes and semantics are those of the host's registry
 * (acc_host.ops), which tests/plugins/cpu_ref/test_cpu_ref_ops.py checks every row against. */
static const cr_op kOps[] = {
    /* neural-network layers (ops_nn.c; activations, normalisations and
     * softmaxes in ops_norm.c) */
    {"Activation", {NULL}, 1, 0, &cr_impl_activation},
    {"BatchNorm", {NULL}, 1, 0, &cr_impl_batch_norm},
    {"Convolution", {NULL}, 1, 0, &cr_impl_convolution},
    {"Deconvolution", {NULL}, 1, 1, &cr_impl_deconvolution},
    {"Dropout", {NULL}, 1, 0, &cr_impl_dropout},
    {"Embedding", {NULL}, 1, 0, &cr_impl_embedding},
    {"FullyConnected", {NULL}, 1, 0, &cr_impl_fully_connected},
    {"InstanceNorm", {NULL}, 1, 0, &cr_impl_instance_norm},
    {"LayerNorm", {NULL}, 1, 0, &cr_impl_layer_norm},
    {"RNN", {NULL}, 1, 0, &cr_impl_rnn},
    {"LeakyReLU", {NULL}, 1, 0, &cr_impl_leaky_relu},
    {"Pooling", {NULL}, 1, 0, &cr_impl_pooling},
    {"softmax", {NULL}, 1, 0, &cr_impl_softmax},
    {"log_softmax", {NULL}, 1, 1, &cr_impl_softmax},
    {"SoftmaxOutput", {"Softmax"}, 1, 0, &cr_impl_softmax_output},
    {"SoftmaxActivation", {NULL}, 1, 0, &cr_impl_softmax_activation},
    {"UpSampling", {NULL}, 1, 0, &cr_impl_upsampling},

    /* element-wise arithmetic and comparisons (ops_math.c) */
    {"elemwise_add", {"_add", "_plus", "_Plus"}, 1, CR_BINARY_ADD, &cr_impl_elemwise},
    {"elemwise_sub", {"_sub", "_minus", "_Minus"}, 1, CR_BINARY_SUB, &cr_impl_elemwise},
    {"elemwise_mul", {"_mul", "_Mul"}, 1, CR_BINARY_MUL, &cr_impl_elemwise},
    {"elemwise_div", {"_div", "_Div"}, 1, CR_BINARY_DIV, &cr_impl_elemwise},
    {"_mod", {"_Mod"}, 1, CR_BINARY_MOD, &cr_impl_elemwise},
    {"_power", {"_Power"}, 1, CR_BINARY_POWER, &cr_impl_elemwise},
    {"_maximum", {"_Maximum"}, 1, CR_BINARY_MAXIMUM, &cr_impl_elemwise},
    {"_minimum", {"_Minimum"}, 1, CR_BINARY_MINIMUM, &cr_impl_elemwise},
    {"_hypot", {"_Hypot"}, 1, CR_BINARY_HYPOT, &cr_impl_elemwise},
    {"_equal", {"_Equal"}, 1, CR_BINARY_EQUAL, &cr_impl_elemwise},
    {"_not_equal", {"_Not_Equal"}, 1, CR_BINARY_NOT_EQUAL, &cr_impl_elemwise},
    {"_greater", {"_Greater"}, 1, CR_BINARY_GREATER, &cr_impl_elemwise},
    {"_greater_equal", {"_Greater_Equal"}, 1, CR_BINARY_GREATER_EQUAL, &cr_impl_elemwise},
    {"_lesser", {"_Lesser"}, 1, CR_BINARY_LESSER, &cr_impl_elemwise},
    {"_lesser_equal", {"_Lesser_Equal"}, 1, CR_BINARY_LESSER_EQUAL, &cr_impl_elemwise},
    {"_logical_and", {"_Logical_And"}, 1, CR_BINARY_LOGICAL_AND, &cr_impl_elemwise},
    {"_logical_or", {"_Logical_Or"}, 1, CR_BINARY_LOGICAL_OR, &cr_impl_elemwise},
    {"_logical_xor", {"_Logical_Xor"}, 1, CR_BINARY_LOGICAL_XOR, &cr_impl_elemwise},
    {"broadcast_add", {"broadcast_plus"}, 1, CR_BINARY_ADD, &cr_impl_broadcast},
    {"broadcast_sub", {"broadcast_minus"}, 1, CR_BINARY_SUB, &cr_impl_broadcast},
    {"broadcast_mul", {NULL}, 1, CR_BINARY_MUL, &cr_impl_broadcast},
    {"broadcast_div", {NULL}, 1, CR_BINARY_DIV, &cr_impl_broadcast},
    {"broadcast_mod", {NULL}, 1, CR_BINARY_MOD, &cr_impl_broadcast},
    {"broadcast_power", {NULL}, 1, CR_BINARY_POWER, &cr_impl_broadcast},
    {"broadcast_maximum", {NULL}, 1, CR_BINARY_MAXIMUM, &cr_impl_broadcast},
    {"broadcast_minimum", {NULL}, 1, CR_BINARY_MINIMUM, &cr_impl_broadcast},
    {"broadcast_hypot", {NULL}, 1, CR_BINARY_HYPOT, &cr_impl_broadcast},
    {"broadcast_equal", {NULL}, 1, CR_BINARY_EQUAL, &cr_impl_broadcast},
    {"broadcast_not_equal", {NULL}, 1, CR_BINARY_NOT_EQUAL, &cr_impl_broadcast},
    {"broadcast_greater", {NULL}, 1, CR_BINARY_GREATER, &cr_impl_broadcast},
    {"broadcast_greater_equal", {NULL}, 1, CR_BINARY_GREATER_EQUAL, &cr_impl_broadcast},
    {"broadcast_lesser", {NULL}, 1, CR_BINARY_LESSER, &cr_impl_broadcast},
    {"broadcast_lesser_equal", {NULL}, 1, CR_BINARY_LESSER_EQUAL, &cr_impl_broadcast},
    {"broadcast_logical_and", {NULL}, 1, CR_BINARY_LOGICAL_AND, &cr_impl_broadcast},
    {"broadcast_logical_or", {NULL}, 1, CR_BINARY_LOGICAL_OR, &cr_impl_broadcast},
    {"broadcast_logical_xor", {NULL}, 1, CR_BINARY_LOGICAL_XOR, &cr_impl_broadcast},
    {"_plus_scalar", {"_PlusScalar"}, 1, CR_BINARY_ADD, &cr_impl_scalar},
    {"_minus_scalar", {"_MinusScalar"}, 1, CR_BINARY_SUB, &cr_impl_scalar},
    {"_rminus_scalar", {"_RMinusScalar"}, 1, CR_BINARY_SUB | CR_SCALAR_ON_LEFT, &cr_impl_scalar},
    {"_mul_scalar", {"_MulScalar"}, 1, CR_BINARY_MUL, &cr_impl_scalar},
    {"_div_scalar", {"_DivScalar"}, 1, CR_BINARY_DIV, &cr_impl_scalar},
    {"_rdiv_scalar", {"_RDivScalar"}, 1, CR_BINARY_DIV | CR_SCALAR_ON_LEFT, &cr_impl_scalar},
    {"_mod_scalar", {"_ModScalar"}, 1, CR_BINARY_MOD, &cr_impl_scalar},
    {"_rmod_scalar", {"_RModScalar"}, 1, CR_BINARY_MOD | CR_SCALAR_ON_LEFT, &cr_impl_scalar},
    {"_power_scalar", {"_PowerScalar"}, 1, CR_BINARY_POWER, &cr_impl_scalar},
    {"_rpower_scalar", {"_RPowerScalar"}, 1, CR_BINARY_POWER | CR_SCALAR_ON_LEFT,
     &cr_impl_scalar},
    {"_maximum_scalar", {"_MaximumScalar"}, 1, CR_BINARY_MAXIMUM, &cr_impl_scalar},
    {"_minimum_scalar", {"_MinimumScalar"}, 1, CR_BINARY_MINIMUM, &cr_impl_scalar},
    {"_hypot_scalar", {"_HypotScalar"}, 1, CR_BINARY_HYPOT, &cr_impl_scalar},
    {"_equal_scalar", {"_EqualScalar"}, 1, CR_BINARY_EQUAL, &cr_impl_scalar},
    {"_not_equal_scalar", {"_NotEqualScalar"}, 1, CR_BINARY_NOT_EQUAL, &cr_impl_scalar},
    {"_greater_scalar", {"_GreaterScalar"}, 1, CR_BINARY_GREATER, &cr_impl_scalar},
    {"_greater_equal_scalar", {"_GreaterEqualScalar"}, 1, CR_BINARY_GREATER_EQUAL,
     &cr_impl_scalar},
    {"_lesser_scalar", {"_LesserScalar"}, 1, CR_BINARY_LESSER, &cr_impl_scalar},
    {"_lesser_equal_scalar", {"_LesserEqualScalar"}, 1, CR_BINARY_LESSER_EQUAL,
     &cr_impl_scalar},
    {"_logical_and_scalar", {"_LogicalAndScalar"}, 1, CR_BINARY_LOGICAL_AND, &cr_impl_scalar},
    {"_logical_or_scalar", {"_LogicalOrScalar"}, 1, CR_BINARY_LOGICAL_OR, &cr_impl_scalar},
    {"_logical_xor_scalar", {"_LogicalXorScalar"}, 1, CR_BINARY_LOGICAL_XOR, &cr_impl_scalar},
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
    {"rcbrt", {NULL}, 1, CR_UNARY_RCBRT, &cr_impl_unary},
    {"exp", {NULL}, 1, CR_UNARY_EXP, &cr_impl_unary},
    {"expm1", {NULL}, 1, CR_UNARY_EXPM1, &cr_impl_unary},
    {"log", {NULL}, 1, CR_UNARY_LOG, &cr_impl_unary},
    {"log1p", {NULL}, 1, CR_UNARY_LOG1P, &cr_impl_unary},
    {"log2", {NULL}, 1, CR_UNARY_LOG2, &cr_impl_unary},
    {"log10", {NULL}, 1, CR_UNARY_LOG10, &cr_impl_unary},
    {"sin", {NULL}, 1, CR_UNARY_SIN, &cr_impl_unary},
    {"cos", {NULL}, 1, CR_UNARY_COS, &cr_impl_unary},
    {"tan", {NULL}, 1, CR_UNARY_TAN, &cr_impl_unary},
    {"arcsin", {NULL}, 1, CR_UNARY_ARCSIN, &cr_impl_unary},
    {"arccos", {NULL}, 1, CR_UNARY_ARCCOS, &cr_impl_unary},
    {"arctan", {NULL}, 1, CR_UNARY_ARCTAN, &cr_impl_unary},
    {"sinh", {NULL}, 1, CR_UNARY_SINH, &cr_impl_unary},
    {"cosh", {NULL}, 1, CR_UNARY_COSH, &cr_impl_unary},
    {"tanh", {NULL}, 1, CR_UNARY_TANH, &cr_impl_unary},
    {"arcsinh", {NULL}, 1, CR_UNARY_ARCSINH, &cr_impl_unary},
    {"arccosh", {NULL}, 1, CR_UNARY_ARCCOSH, &cr_impl_unary},
    {"arctanh", {NULL}, 1, CR_UNARY_ARCTANH, &cr_impl_unary},
    {"degrees", {NULL}, 1, CR_UNARY_DEGREES, &cr_impl_unary},
    {"radians", {NULL}, 1, CR_UNARY_RADIANS, &cr_impl_unary},
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
    {"logical_not", {NULL}, 1, CR_UNARY_LOGICAL_NOT, &cr_impl_unary},

    /* shapes, copies and conversions (ops_shape.c; tile, repeat, the
     * broadcasts and Pad in ops_replicate.c) */
    {"_copy", {"identity"}, 1, 0, &cr_impl_copy},
    {"BlockGrad", {"stop_gradient"}, 1, 0, &cr_impl_copy},
    {"Cast", {"cast"}, 1, 0, &cr_impl_cast},
    {"Flatten", {"flatten"}, 1, 0, &cr_impl_flatten},
    {"Reshape", {"reshape"}, 1, 0, &cr_impl_reshape},
    {"expand_dims", {NULL}, 1, 0, &cr_impl_expand_dims},
    {"squeeze", {NULL}, 1, 0, &cr_impl_squeeze},
    {"transpose", {NULL}, 1, 0, &cr_impl_transpose},
    {"SwapAxis", {"swapaxes"}, 1, 1, &cr_impl_transpose},
    {"Concat", {"concat", "_rnn_param_concat"}, 1, 0, &cr_impl_concat},
    {"stack", {NULL}, 1, 0, &cr_impl_stack},
    {"SliceChannel", {"split"}, 1, 0, &cr_impl_split},
    {"slice_axis", {NULL}, 1, 0, &cr_impl_slice_axis},
    {"slice", {"crop"}, 1, 0, &cr_impl_slice},
    {"slice_like", {NULL}, 1, 0, &cr_impl_slice_like},
    {"tile", {NULL}, 1, 0, &cr_impl_tile},
    {"repeat", {NULL}, 1, 0, &cr_impl_repeat},
    {"broadcast_to", {NULL}, 1, 0, &cr_impl_broadcast_to},
    {"broadcast_axis", {"broadcast_axes"}, 1, 0, &cr_impl_broadcast_axis},
    {"broadcast_like", {NULL}, 1, 0, &cr_impl_broadcast_like},
    {"Pad", {"pad"}, 1, 0, &cr_impl_pad},

    /* indexing and searching (ops_index.c) */
    {"take", {NULL}, 1, 0, &cr_impl_take},
    {"where", {NULL}, 1, 0, &cr_impl_where},
    {"argmax", {NULL}, 1, 1, &cr_impl_arg_search},
    {"argmin", {NULL}, 1, 0, &cr_impl_arg_search},
    {"topk", {NULL}, 1, 0, &cr_impl_topk},

    /* reductions and products (ops_math.c) */
    {"sum", {"sum_axis"}, 1, CR_REDUCE_SUM, &cr_impl_reduce},
    {"mean", {NULL}, 1, CR_REDUCE_MEAN, &cr_impl_reduce},
    {"prod", {NULL}, 1, CR_REDUCE_PROD, &cr_impl_reduce},
    {"nansum", {NULL}, 1, CR_REDUCE_NANSUM, &cr_impl_reduce},
    {"nanprod", {NULL}, 1, CR_REDUCE_NANPROD, &cr_impl_reduce},
    {"max", {"max_axis"}, 1, CR_REDUCE_MAX, &cr_impl_reduce},
    {"min", {"min_axis"}, 1, CR_REDUCE_MIN, &cr_impl_reduce},
    {"dot", {NULL}, 1, 0, &cr_impl_dot},
    {"batch_dot", {NULL}, 1, 0, &cr_impl_batch_dot},

    /* the ONNX importer's host operators (ops_onnx*.c) */
    {"_onnx_unary", {NULL}, 1, 0, &cr_impl_onnx_unary},
    {"_onnx_binary", {NULL}, 1, 0, &cr_impl_onnx_binary},
    {"_onnx_nary", {NULL}, 1, 0, &cr_impl_onnx_nary},
    {"_onnx_where", {NULL}, 1, 0, &cr_impl_onnx_where},
    {"_onnx_clip", {NULL}, 1, 0, &cr_impl_onnx_clip},
    {"_onnx_cast", {NULL}, 1, 0, &cr_impl_onnx_cast},
    {"_onnx_cast_like", {NULL}, 1, 0, &cr_impl_onnx_cast_like},
    {"_onnx_shape", {NULL}, 1, 0, &cr_impl_onnx_shape},
    {"_onnx_size", {NULL}, 1, 0, &cr_impl_onnx_size},
    {"_onnx_flatten", {NULL}, 1, 0, &cr_impl_onnx_flatten},
    {"_onnx_reshape", {NULL}, 1, 0, &cr_impl_onnx_reshape},
    {"_onnx_unsqueeze", {NULL}, 1, 0, &cr_impl_onnx_unsqueeze},
    {"_onnx_squeeze", {NULL}, 1, 0, &cr_impl_onnx_squeeze},
    {"_onnx_transpose", {NULL}, 1, 0, &cr_impl_onnx_transpose},
    {"_onnx_expand", {NULL}, 1, 0, &cr_impl_onnx_expand},
    {"_onnx_slice", {NULL}, 1, 0, &cr_impl_onnx_slice},
    {"_onnx_tile", {NULL}, 1, 0, &cr_impl_onnx_tile},
    {"_onnx_pad", {NULL}, 1, 0, &cr_impl_onnx_pad},
    {"_onnx_split", {NULL}, 1, 0, &cr_impl_onnx_split},
    {"_onnx_concat", {NULL}, 1, 0, &cr_impl_onnx_concat},
    {"_onnx_gather", {NULL}, 1, 0, &cr_impl_onnx_gather},
    {"_onnx_gather_elements", {NULL}, 1, 0, &cr_impl_onnx_gather_elements},
    {"_onnx_gather_nd", {NULL}, 1, 0, &cr_impl_onnx_gather_nd},
    {"_onnx_scatter_elements", {NULL}, 1, 0, &cr_impl_onnx_scatter_elements},
    {"_onnx_scatter_nd", {NULL}, 1, 0, &cr_impl_onnx_scatter_nd},
    {"_onnx_depth_to_space", {NULL}, 1, 0, &cr_impl_onnx_depth_to_space},
    {"_onnx_space_to_depth", {NULL}, 1, 0, &cr_impl_onnx_space_to_depth},
    {"_onnx_trilu", {NULL}, 1, 0, &cr_impl_onnx_trilu},
    {"_onnx_eye_like", {NULL}, 1, 0, &cr_impl_onnx_eye_like},
    {"_onnx_reverse_sequence", {NULL}, 1, 0, &cr_impl_onnx_reverse_sequence},
    {"_onnx_one_hot", {NULL}, 1, 0, &cr_impl_onnx_one_hot},
    {"_onnx_reduce", {NULL}, 1, 0, &cr_impl_onnx_reduce},
    {"_onnx_arg", {NULL}, 1, 0, &cr_impl_onnx_arg},
    {"_onnx_cumsum", {NULL}, 1, 0, &cr_impl_onnx_scan},
    {"_onnx_cumprod", {NULL}, 1, 1, &cr_impl_onnx_scan},
    {"_onnx_topk", {NULL}, 1, 0, &cr_impl_onnx_topk},
    {"_onnx_softmax", {NULL}, 1, 0, &cr_impl_onnx_softmax},
    {"_onnx_matmul", {NULL}, 1, 0, &cr_impl_onnx_matmul},
    {"_onnx_gemm", {NULL}, 1, 0, &cr_impl_onnx_gemm},
    {"_onnx_lrn", {NULL}, 1, 0, &cr_impl_onnx_lrn},
    {"_onnx_mvn", {NULL}, 1, 0, &cr_impl_onnx_mvn},
    {"_onnx_norm", {NULL}, 1, 0, &cr_impl_onnx_norm},
    {"_onnx_lp_norm", {NULL}, 1, 0, &cr_impl_onnx_lp_norm},
    {"_onnx_group_norm", {NULL}, 1, 0, &cr_impl_onnx_group_norm},
    {"_onnx_det", {NULL}, 1, 0, &cr_impl_onnx_det},
    {"_onnx_einsum", {NULL}, 1, 0, &cr_impl_onnx_einsum},
    {"_onnx_nll_loss", {NULL}, 1, 0, &cr_impl_onnx_nll_loss},
    {"_onnx_softmax_cross_entropy", {NULL}, 1, 0, &cr_impl_onnx_softmax_cross_entropy},
    {"_onnx_pool", {NULL}, 1, 0, &cr_impl_onnx_pool},
    {"_onnx_resize", {NULL}, 1, 0, &cr_impl_onnx_resize},
    {"_onnx_upsample_nearest", {NULL}, 1, 0, &cr_impl_onnx_upsample_nearest},
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

/* Test builds of cpu_ref can keep only some operators, to exercise the
 * host's partitioning with a plugin that supports little: compile with
 * -DCPU_REF_ONLY_OPS='"Convolution,Activation"' (canonical names, comma
 * separated) and every other operator is unsupported. */
int cr_op_enabled(const cr_op *op) {
#ifdef CPU_REF_ONLY_OPS
  const char *list = CPU_REF_ONLY_OPS;
  size_t length = strlen(op->name);
  for (const char *at = strstr(list, op->name); at != NULL; at = strstr(at + 1, op->name)) {
    int starts = at == list || at[-1] == ',';
    int ends = at[length] == '\0' || at[length] == ',';
    if (starts && ends) return 1;
  }
  return 0;
#else
  (void)op;
  return 1;
#endif
}

const cr_op *cr_find_op(const char *name) {
  for (size_t i = 0; i < cr_num_ops(); ++i) {
    if (op_has_name(&kOps[i], name) && cr_op_enabled(&kOps[i])) return &kOps[i];
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

/* Every dtype must be one mxnet_acc.h defines; which of them the family
 * runs is its own check_dtypes' answer. */
static int check_known_dtypes(const cr_params *params) {
  for (int i = 0; i < params->num_inputs; ++i) {
    if (acc_dtype_size(params->in_dtypes[i]) == 0) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "input %d has the unknown dtype %d", i,
                      (int)params->in_dtypes[i]);
    }
  }
  for (int k = 0; k < params->num_outputs; ++k) {
    if (acc_dtype_size(params->out_dtypes[k]) == 0) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "output %d has the unknown dtype %d", k,
                      (int)params->out_dtypes[k]);
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

static int resolve_found(const cr_op *found, const char *what, const char *op_name,
                         const char *const *keys, const char *const *vals, size_t num_attrs,
                         const acc_shape *in_shapes, const int32_t *in_dtypes, int num_inputs,
                         const acc_shape *out_shapes, const int32_t *out_dtypes, int num_outputs,
                         const cr_op **op, cr_params *params);

int cr_resolve_op(const char *what, const char *op_name, const char *const *keys,
                  const char *const *vals, size_t num_attrs, const acc_shape *in_shapes,
                  const int32_t *in_dtypes, int num_inputs, const acc_shape *out_shapes,
                  const int32_t *out_dtypes, int num_outputs, const cr_op **op,
                  cr_params *params) {
  return cr_resolve_sparse_op(what, op_name, keys, vals, num_attrs, in_shapes, in_dtypes, NULL,
                              num_inputs, out_shapes, out_dtypes, num_outputs, op, params);
}

int cr_resolve_sparse_op(const char *what, const char *op_name, const char *const *keys,
                         const char *const *vals, size_t num_attrs, const acc_shape *in_shapes,
                         const int32_t *in_dtypes, const int32_t *in_stypes, int num_inputs,
                         const acc_shape *out_shapes, const int32_t *out_dtypes, int num_outputs,
                         const cr_op **op, cr_params *params) {
  const cr_op *found = cr_find_op(op_name);
  if (found == NULL) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: operator %s is not supported", what, op_name);
  }
  int sparse = 0;
  for (int i = 0; in_stypes != NULL && i < num_inputs && i < CR_MAX_INPUTS; ++i) {
    sparse |= in_stypes[i] != MX_ACC_STORAGE_DENSE;
  }
  if (sparse) {
    const cr_op *dense = found;
    int status = cr_find_sparse_op(what, dense, in_stypes, num_inputs, &found);
    if (status != MX_ACC_OK) return status;
  }
  return resolve_found(found, what, op_name, keys, vals, num_attrs, in_shapes, in_dtypes,
                       num_inputs, out_shapes, out_dtypes, num_outputs, op, params);
}

static int resolve_found(const cr_op *found, const char *what, const char *op_name,
                         const char *const *keys, const char *const *vals, size_t num_attrs,
                         const acc_shape *in_shapes, const int32_t *in_dtypes, int num_inputs,
                         const acc_shape *out_shapes, const int32_t *out_dtypes, int num_outputs,
                         const cr_op **op, cr_params *params) {
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
  params->num_inputs = num_inputs;
  params->num_outputs = num_outputs;
  memcpy(params->in_dtypes, in_dtypes, (size_t)num_inputs * sizeof *in_dtypes);
  memcpy(params->out_dtypes, out_dtypes, (size_t)num_outputs * sizeof *out_dtypes);
  status = check_known_dtypes(params);
  if (status == MX_ACC_OK) status = found->impl->check_dtypes(params);
  if (status != MX_ACC_OK) return fail_in(status, what, op_name);
  status = check_all_extents(what, in_shapes, num_inputs, out_shapes, num_outputs);
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
