/*
 * Operator semantics of cpu_ref: attributes with MXNet 1.x defaults, shape
 * inference, and dispatch to the kernels. All operators are float32.
 *
 * Unknown attributes are rejected as unsupported rather than ignored: an
 * attribute this plugin does not understand may change the result.
 */
#include "ops.h"

#include <stdio.h>
#include <string.h>

#include "attrs.h"
#include "status.h"
#include "tensor.h"

/* ---- attribute helpers ------------------------------------------------- */

/* Attributes that only tune MXNet's own implementations (memory, cuDNN,
 * quantization calibration) and never change the result. */
static int is_tuning_attr(const char *key) {
  static const char *const kTuning[] = {"workspace", "cudnn_tune", "cudnn_off",
                                        "min_calib_range", "max_calib_range"};
  for (size_t i = 0; i < sizeof kTuning / sizeof kTuning[0]; ++i) {
    if (strcmp(key, kTuning[i]) == 0) return 1;
  }
  return 0;
}

static int bad_attr(const char *key, const char *value, const char *expected) {
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute %s=\"%s\": expected %s", key, value,
                  expected);
}

static int unknown_attr(const char *key) {
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "attribute \"%s\" is not supported", key);
}

static int parse_bool(const char *key, const char *value, int *out) {
  return acc_attr_bool(value, out) == 0 ? MX_ACC_OK : bad_attr(key, value, "a boolean");
}

static int parse_positive_int(const char *key, const char *value, int64_t *out) {
  if (acc_attr_int(value, out) != 0 || *out <= 0) {
    return bad_attr(key, value, "a positive integer");
  }
  return MX_ACC_OK;
}

/* A spatial tuple of 1 to 3 values, each >= minimum, stored right-aligned in
 * a (D, H, W) array whose unused leading slots keep their defaults. */
static int parse_spatial(const char *key, const char *value, int64_t minimum,
                         int64_t out[3], int *ndim) {
  int64_t values[3];
  int count;
  if (acc_attr_int_tuple(value, values, 3, &count) != 0 || count < 1) {
    return bad_attr(key, value, "a tuple of 1 to 3 integers");
  }
  for (int i = 0; i < count; ++i) {
    if (values[i] < minimum) {
      return bad_attr(key, value, minimum > 0 ? "positive values" : "non-negative values");
    }
    out[3 - count + i] = values[i];
  }
  *ndim = count;
  return MX_ACC_OK;
}

/* Parses a spatial tuple that must match the kernel's dimensionality (when
 * known) and tolerates MXNet's empty "()" default. */
static int parse_spatial_like_kernel(const char *key, const char *value, int64_t minimum,
                                     int64_t out[3], int *ndim) {
  int64_t values[3];
  int count;
  if (acc_attr_int_tuple(value, values, 3, &count) == 0 && count == 0) return MX_ACC_OK;
  return parse_spatial(key, value, minimum, out, ndim);
}

static int check_same_ndim(int kernel_ndim, int other_ndim, const char *key) {
  if (other_ndim != 0 && kernel_ndim != 0 && other_ndim != kernel_ndim) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute %s has %d values but kernel has %d",
                    key, other_ndim, kernel_ndim);
  }
  return MX_ACC_OK;
}

static int check_layout(const char *key, const char *value) {
  if (acc_attr_is_none(value) || acc_attr_equals(value, "NCW") ||
      acc_attr_equals(value, "NCHW") || acc_attr_equals(value, "NCDHW")) {
    return MX_ACC_OK;
  }
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "attribute %s=\"%s\": only channel-first layouts",
                  key, value);
}

/* Views an (N, C, spatial...) shape as (N, C, D, H, W). */
static void view_5d(const acc_shape *shape, int64_t out[5]) {
  int spatial = shape->ndim - 2;
  out[0] = (int64_t)shape->dims[0];
  out[1] = (int64_t)shape->dims[1];
  for (int i = 0; i < 3; ++i) {
    int source = 2 + i - (3 - spatial);
    out[2 + i] = source >= 2 ? (int64_t)shape->dims[source] : 1;
  }
}

static int64_t product(const acc_shape *shape, int begin, int end) {
  int64_t result = 1;
  for (int i = begin; i < end; ++i) result *= (int64_t)shape->dims[i];
  return result;
}

static int shape_error(const char *fmt, const acc_shape *shape) {
  char text[256];
  acc_shape_format(shape, text, sizeof text);
  return acc_fail(MX_ACC_ERR_INVALID_ARG, fmt, text);
}

/* ---- Convolution ------------------------------------------------------- */

static int convolution_parse(const char *const *keys, const char *const *vals,
                             size_t count, cr_params *params) {
  cr_conv_params *conv = &params->u.convolution.conv;
  int kernel_ndim = 0, stride_ndim = 0, dilate_ndim = 0, pad_ndim = 0;
  for (int i = 0; i < 3; ++i) {
    conv->kernel[i] = conv->stride[i] = conv->dilate[i] = 1;
    conv->pad[i] = 0;
  }
  conv->num_group = 1;
  params->u.convolution.num_filter = 0;
  params->u.convolution.no_bias = 0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK;
    if (strcmp(key, "kernel") == 0) {
      status = parse_spatial(key, value, 1, conv->kernel, &kernel_ndim);
    } else if (strcmp(key, "stride") == 0) {
      status = parse_spatial_like_kernel(key, value, 1, conv->stride, &stride_ndim);
    } else if (strcmp(key, "dilate") == 0) {
      status = parse_spatial_like_kernel(key, value, 1, conv->dilate, &dilate_ndim);
    } else if (strcmp(key, "pad") == 0) {
      status = parse_spatial_like_kernel(key, value, 0, conv->pad, &pad_ndim);
    } else if (strcmp(key, "num_filter") == 0) {
      status = parse_positive_int(key, value, &params->u.convolution.num_filter);
    } else if (strcmp(key, "num_group") == 0) {
      status = parse_positive_int(key, value, &conv->num_group);
    } else if (strcmp(key, "no_bias") == 0) {
      status = parse_bool(key, value, &params->u.convolution.no_bias);
    } else if (strcmp(key, "layout") == 0) {
      status = check_layout(key, value);
    } else if (!is_tuning_attr(key)) {
      status = unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  if (kernel_ndim == 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute kernel is required");
  }
  if (params->u.convolution.num_filter == 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute num_filter is required");
  }
  int status = check_same_ndim(kernel_ndim, stride_ndim, "stride");
  if (status == MX_ACC_OK) status = check_same_ndim(kernel_ndim, dilate_ndim, "dilate");
  if (status == MX_ACC_OK) status = check_same_ndim(kernel_ndim, pad_ndim, "pad");
  params->u.convolution.spatial_ndim = kernel_ndim;
  return status;
}

static int convolution_num_inputs(const cr_params *params) {
  return params->u.convolution.no_bias ? 2 : 3;
}

static int convolution_infer(const cr_params *params, const acc_shape *in, int num_in,
                             acc_shape *out) {
  const cr_conv_params *conv = &params->u.convolution.conv;
  int spatial = params->u.convolution.spatial_ndim;
  int64_t filters = params->u.convolution.num_filter, groups = conv->num_group;
  const acc_shape *data = &in[0], *weight = &in[1];
  if (data->ndim != spatial + 2) {
    return shape_error("data shape %s does not match the kernel's dimensions", data);
  }
  int64_t channels = (int64_t)data->dims[1];
  if (channels % groups != 0 || filters % groups != 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG,
                    "num_group %lld does not divide channels %lld and num_filter %lld",
                    (long long)groups, (long long)channels, (long long)filters);
  }
  int weight_ok = weight->ndim == spatial + 2 && (int64_t)weight->dims[0] == filters &&
                  (int64_t)weight->dims[1] == channels / groups;
  for (int i = 0; weight_ok && i < spatial; ++i) {
    weight_ok = (int64_t)weight->dims[2 + i] == conv->kernel[3 - spatial + i];
  }
  if (!weight_ok) return shape_error("weight shape %s does not match the attributes", weight);
  if (num_in == 3 && !(in[2].ndim == 1 && (int64_t)in[2].dims[0] == filters)) {
    return shape_error("bias shape %s does not match num_filter", &in[2]);
  }
  out->ndim = data->ndim;
  out->dims[0] = data->dims[0];
  out->dims[1] = (uint64_t)filters;
  for (int i = 0; i < spatial; ++i) {
    int slot = 3 - spatial + i;
    int64_t extent = (int64_t)data->dims[2 + i] + 2 * conv->pad[slot];
    int64_t window = conv->dilate[slot] * (conv->kernel[slot] - 1) + 1;
    if (extent < window) {
      return shape_error("data shape %s is smaller than the dilated kernel", data);
    }
    out->dims[2 + i] = (uint64_t)((extent - window) / conv->stride[slot] + 1);
  }
  return MX_ACC_OK;
}

static void convolution_run(const cr_params *params, const cr_tensor *in, int num_in,
                            const cr_tensor *out, int num_threads) {
  int64_t x_shape[5], y_shape[5];
  view_5d(&in[0].shape, x_shape);
  view_5d(&out->shape, y_shape);
  cr_convolution(&params->u.convolution.conv, x_shape, in[0].data, in[1].data,
                 num_in == 3 ? in[2].data : NULL, y_shape, out->data, num_threads);
}

/* ---- Pooling ----------------------------------------------------------- */

static int pooling_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  cr_pool_params *pool = &params->u.pooling.pool;
  int kernel_ndim = 0, stride_ndim = 0, pad_ndim = 0;
  for (int i = 0; i < 3; ++i) {
    pool->kernel[i] = pool->stride[i] = 1;
    pool->pad[i] = 0;
  }
  pool->type = CR_POOL_MAX;
  pool->count_include_pad = 1;
  params->u.pooling.global_pool = 0;
  params->u.pooling.full_convention = 0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK;
    if (strcmp(key, "kernel") == 0) {
      status = parse_spatial_like_kernel(key, value, 1, pool->kernel, &kernel_ndim);
    } else if (strcmp(key, "stride") == 0) {
      status = parse_spatial_like_kernel(key, value, 1, pool->stride, &stride_ndim);
    } else if (strcmp(key, "pad") == 0) {
      status = parse_spatial_like_kernel(key, value, 0, pool->pad, &pad_ndim);
    } else if (strcmp(key, "pool_type") == 0) {
      if (acc_attr_equals(value, "max")) pool->type = CR_POOL_MAX;
      else if (acc_attr_equals(value, "avg")) pool->type = CR_POOL_AVG;
      else if (acc_attr_equals(value, "sum")) pool->type = CR_POOL_SUM;
      else status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "pool_type \"%s\" is not supported", value);
    } else if (strcmp(key, "pooling_convention") == 0) {
      if (acc_attr_equals(value, "full")) params->u.pooling.full_convention = 1;
      else if (!acc_attr_equals(value, "valid")) {
        status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "pooling_convention \"%s\" is not supported",
                          value);
      }
    } else if (strcmp(key, "global_pool") == 0) {
      status = parse_bool(key, value, &params->u.pooling.global_pool);
    } else if (strcmp(key, "count_include_pad") == 0) {
      if (!acc_attr_is_none(value)) status = parse_bool(key, value, &pool->count_include_pad);
    } else if (strcmp(key, "layout") == 0) {
      status = check_layout(key, value);
    } else if (!is_tuning_attr(key)) {
      status = unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  if (!params->u.pooling.global_pool && kernel_ndim == 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute kernel is required without global_pool");
  }
  int status = check_same_ndim(kernel_ndim, stride_ndim, "stride");
  if (status == MX_ACC_OK) status = check_same_ndim(kernel_ndim, pad_ndim, "pad");
  params->u.pooling.spatial_ndim = kernel_ndim;
  return status;
}

static int pooling_num_inputs(const cr_params *params) {
  (void)params;
  return 1;
}

static int pooling_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)num_in;
  const cr_pool_params *pool = &params->u.pooling.pool;
  const acc_shape *data = &in[0];
  int spatial = data->ndim - 2;
  if (spatial < 1 || spatial > 3 ||
      (!params->u.pooling.global_pool && spatial != params->u.pooling.spatial_ndim)) {
    return shape_error("data shape %s does not match the kernel's dimensions", data);
  }
  *out = *data;
  if (params->u.pooling.global_pool) {
    for (int i = 0; i < spatial; ++i) out->dims[2 + i] = 1;
    return MX_ACC_OK;
  }
  for (int i = 0; i < spatial; ++i) {
    int slot = 3 - spatial + i;
    int64_t extent = (int64_t)data->dims[2 + i] + 2 * pool->pad[slot];
    if (extent < pool->kernel[slot]) {
      return shape_error("data shape %s is smaller than the pooling kernel", data);
    }
    int64_t span = extent - pool->kernel[slot], stride = pool->stride[slot];
    int64_t steps = params->u.pooling.full_convention ? (span + stride - 1) / stride
                                                      : span / stride;
    out->dims[2 + i] = (uint64_t)(steps + 1);
  }
  return MX_ACC_OK;
}

static void pooling_run(const cr_params *params, const cr_tensor *in, int num_in,
                        const cr_tensor *out, int num_threads) {
  (void)num_in;
  int64_t x_shape[5], y_shape[5];
  view_5d(&in[0].shape, x_shape);
  view_5d(&out->shape, y_shape);
  cr_pool_params pool = params->u.pooling.pool;
  if (params->u.pooling.global_pool) {
    for (int i = 0; i < 3; ++i) {
      pool.kernel[i] = x_shape[2 + i];
      pool.stride[i] = 1;
      pool.pad[i] = 0;
    }
  }
  cr_pooling(&pool, x_shape, in[0].data, y_shape, out->data, num_threads);
}

/* ---- FullyConnected ---------------------------------------------------- */

static int fully_connected_parse(const char *const *keys, const char *const *vals,
                                 size_t count, cr_params *params) {
  params->u.fully_connected.num_hidden = 0;
  params->u.fully_connected.no_bias = 0;
  params->u.fully_connected.flatten = 1;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK;
    if (strcmp(key, "num_hidden") == 0) {
      status = parse_positive_int(key, value, &params->u.fully_connected.num_hidden);
    } else if (strcmp(key, "no_bias") == 0) {
      status = parse_bool(key, value, &params->u.fully_connected.no_bias);
    } else if (strcmp(key, "flatten") == 0) {
      status = parse_bool(key, value, &params->u.fully_connected.flatten);
    } else if (!is_tuning_attr(key)) {
      status = unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  if (params->u.fully_connected.num_hidden == 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute num_hidden is required");
  }
  return MX_ACC_OK;
}

static int fully_connected_num_inputs(const cr_params *params) {
  return params->u.fully_connected.no_bias ? 2 : 3;
}

static int fully_connected_infer(const cr_params *params, const acc_shape *in, int num_in,
                                 acc_shape *out) {
  const acc_shape *data = &in[0], *weight = &in[1];
  int64_t hidden = params->u.fully_connected.num_hidden;
  if (data->ndim < 1 || (params->u.fully_connected.flatten && data->ndim < 2)) {
    return shape_error("data shape %s has too few dimensions", data);
  }
  int flatten = params->u.fully_connected.flatten;
  int64_t in_dim = flatten ? product(data, 1, data->ndim) : (int64_t)data->dims[data->ndim - 1];
  if (!(weight->ndim == 2 && (int64_t)weight->dims[0] == hidden &&
        (int64_t)weight->dims[1] == in_dim)) {
    return shape_error("weight shape %s does not match num_hidden and the data", weight);
  }
  if (num_in == 3 && !(in[2].ndim == 1 && (int64_t)in[2].dims[0] == hidden)) {
    return shape_error("bias shape %s does not match num_hidden", &in[2]);
  }
  if (flatten) {
    out->ndim = 2;
    out->dims[0] = data->dims[0];
  } else {
    *out = *data;
  }
  out->dims[out->ndim - 1] = (uint64_t)hidden;
  return MX_ACC_OK;
}

static void fully_connected_run(const cr_params *params, const cr_tensor *in, int num_in,
                                const cr_tensor *out, int num_threads) {
  int64_t hidden = params->u.fully_connected.num_hidden;
  int64_t in_dim = (int64_t)in[1].shape.dims[1];
  int64_t rows = product(&out->shape, 0, out->shape.ndim) / hidden;
  cr_fully_connected(rows, in_dim, hidden, in[0].data, in[1].data,
                     num_in == 3 ? in[2].data : NULL, out->data, num_threads);
}

/* ---- Activation -------------------------------------------------------- */

static int activation_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  int have_type = 0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    if (strcmp(key, "act_type") != 0) return unknown_attr(key);
    static const struct { const char *name; cr_activation_type type; } kTypes[] = {
        {"relu", CR_ACT_RELU},         {"sigmoid", CR_ACT_SIGMOID},
        {"tanh", CR_ACT_TANH},         {"softrelu", CR_ACT_SOFTRELU},
        {"softsign", CR_ACT_SOFTSIGN}};
    have_type = 0;
    for (size_t t = 0; t < sizeof kTypes / sizeof kTypes[0]; ++t) {
      if (acc_attr_equals(value, kTypes[t].name)) {
        params->u.activation = kTypes[t].type;
        have_type = 1;
      }
    }
    if (!have_type) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "act_type \"%s\" is not supported", value);
    }
  }
  if (!have_type) return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute act_type is required");
  return MX_ACC_OK;
}

static int one_input(const cr_params *params) {
  (void)params;
  return 1;
}

static int same_shape_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  (void)params;
  (void)num_in;
  *out = in[0];
  return MX_ACC_OK;
}

static size_t element_count(const acc_shape *shape) {
  return (size_t)product(shape, 0, shape->ndim);
}

static void activation_run(const cr_params *params, const cr_tensor *in, int num_in,
                           const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  cr_activation(params->u.activation, (int64_t)element_count(&out->shape), in[0].data,
                out->data);
}

/* ---- BatchNorm (inference) --------------------------------------------- */

static int batch_norm_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  params->u.batch_norm.eps = 1e-3;
  params->u.batch_norm.fix_gamma = 1;
  params->u.batch_norm.axis = 1;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK, flag;
    int64_t axis;
    if (strcmp(key, "eps") == 0) {
      if (acc_attr_float(value, &params->u.batch_norm.eps) != 0 ||
          !(params->u.batch_norm.eps >= 0)) {
        status = bad_attr(key, value, "a non-negative number");
      }
    } else if (strcmp(key, "fix_gamma") == 0) {
      status = parse_bool(key, value, &params->u.batch_norm.fix_gamma);
    } else if (strcmp(key, "axis") == 0) {
      if (acc_attr_int(value, &axis) != 0 || axis < -MX_ACC_MAX_NDIM || axis >= MX_ACC_MAX_NDIM) {
        status = bad_attr(key, value, "an axis");
      } else {
        params->u.batch_norm.axis = (int)axis;
      }
    } else if (strcmp(key, "output_mean_var") == 0) {
      status = parse_bool(key, value, &flag);
      if (status == MX_ACC_OK && flag) {
        status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "output_mean_var=True is not supported");
      }
    } else if (strcmp(key, "use_global_stats") == 0 || strcmp(key, "momentum") == 0) {
      /* Inference always normalises with the moving statistics. */
    } else if (!is_tuning_attr(key)) {
      status = unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int batch_norm_num_inputs(const cr_params *params) {
  (void)params;
  return 5;
}

static int resolve_axis(int axis, int ndim, int *resolved) {
  int value = axis < 0 ? axis + ndim : axis;
  if (value < 0 || value >= ndim) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "axis %d is out of range for %d dimensions", axis,
                    ndim);
  }
  *resolved = value;
  return MX_ACC_OK;
}

static int batch_norm_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  int axis = 0;
  int status = resolve_axis(params->u.batch_norm.axis, in[0].ndim, &axis);
  if (status != MX_ACC_OK) return status;
  for (int i = 1; i < num_in; ++i) {
    if (!(in[i].ndim == 1 && in[i].dims[0] == in[0].dims[axis])) {
      return shape_error("parameter shape %s does not match the channel axis", &in[i]);
    }
  }
  *out = in[0];
  return MX_ACC_OK;
}

static void batch_norm_run(const cr_params *params, const cr_tensor *in, int num_in,
                           const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int axis = 0;
  resolve_axis(params->u.batch_norm.axis, in[0].shape.ndim, &axis); /* checked at infer */
  const acc_shape *shape = &in[0].shape;
  cr_batch_norm(product(shape, 0, axis), (int64_t)shape->dims[axis],
                product(shape, axis + 1, shape->ndim), in[0].data, in[1].data, in[2].data,
                in[3].data, in[4].data, params->u.batch_norm.eps, params->u.batch_norm.fix_gamma,
                out->data);
}

/* ---- elemwise_add ------------------------------------------------------ */

static int no_attrs_parse(const char *const *keys, const char *const *vals, size_t count,
                          cr_params *params) {
  (void)vals;
  (void)params;
  return count == 0 ? MX_ACC_OK : unknown_attr(keys[0]);
}

static int two_inputs(const cr_params *params) {
  (void)params;
  return 2;
}

static int elemwise_infer(const cr_params *params, const acc_shape *in, int num_in,
                          acc_shape *out) {
  (void)params;
  (void)num_in;
  if (!acc_shape_equal(&in[0], &in[1])) {
    return shape_error("operand shapes differ; second operand is %s", &in[1]);
  }
  *out = in[0];
  return MX_ACC_OK;
}

static void elemwise_add_run(const cr_params *params, const cr_tensor *in, int num_in,
                             const cr_tensor *out, int num_threads) {
  (void)params;
  (void)num_in;
  (void)num_threads;
  cr_add((int64_t)element_count(&out->shape), in[0].data, in[1].data, out->data);
}

/* ---- Flatten ----------------------------------------------------------- */

static int flatten_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)params;
  (void)num_in;
  if (in[0].ndim < 1) return shape_error("cannot flatten a scalar of shape %s", &in[0]);
  out->ndim = 2;
  out->dims[0] = in[0].dims[0];
  out->dims[1] = (uint64_t)product(&in[0], 1, in[0].ndim);
  return MX_ACC_OK;
}

static void copy_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)params;
  (void)num_in;
  (void)num_threads;
  if (out->data != in[0].data) {
    memcpy(out->data, in[0].data, element_count(&out->shape) * sizeof(float));
  }
}

/* ---- softmax ----------------------------------------------------------- */

static int softmax_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  params->u.softmax.axis = -1;
  params->u.softmax.temperature = 1.0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK, flag;
    int64_t axis;
    if (strcmp(key, "axis") == 0) {
      if (acc_attr_int(value, &axis) != 0 || axis < -MX_ACC_MAX_NDIM || axis >= MX_ACC_MAX_NDIM) {
        status = bad_attr(key, value, "an axis");
      } else {
        params->u.softmax.axis = (int)axis;
      }
    } else if (strcmp(key, "temperature") == 0) {
      if (!acc_attr_is_none(value) &&
          (acc_attr_float(value, &params->u.softmax.temperature) != 0 ||
           !(params->u.softmax.temperature > 0))) {
        status = bad_attr(key, value, "a positive number");
      }
    } else if (strcmp(key, "dtype") == 0) {
      if (!acc_attr_is_none(value) && !acc_attr_equals(value, "float32")) {
        status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "softmax dtype \"%s\" is not supported", value);
      }
    } else if (strcmp(key, "use_length") == 0) {
      status = parse_bool(key, value, &flag);
      if (status == MX_ACC_OK && flag) {
        status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "use_length=True is not supported");
      }
    } else {
      status = unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int softmax_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)num_in;
  int axis = 0;
  int status = resolve_axis(params->u.softmax.axis, in[0].ndim, &axis);
  if (status != MX_ACC_OK) return status;
  *out = in[0];
  return MX_ACC_OK;
}

static void softmax_run(const cr_params *params, const cr_tensor *in, int num_in,
                        const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int axis = 0;
  resolve_axis(params->u.softmax.axis, in[0].shape.ndim, &axis); /* checked at infer */
  const acc_shape *shape = &in[0].shape;
  cr_softmax(product(shape, 0, axis), (int64_t)shape->dims[axis],
             product(shape, axis + 1, shape->ndim), params->u.softmax.temperature,
             in[0].data, out->data);
}

/* ---- the table --------------------------------------------------------- */

static const cr_op kOps[] = {
    {"Activation", 1, activation_parse, one_input, same_shape_infer, activation_run},
    {"BatchNorm", 1, batch_norm_parse, batch_norm_num_inputs, batch_norm_infer,
     batch_norm_run},
    {"Convolution", 1, convolution_parse, convolution_num_inputs, convolution_infer,
     convolution_run},
    {"Flatten", 1, no_attrs_parse, one_input, flatten_infer, copy_run},
    {"FullyConnected", 1, fully_connected_parse, fully_connected_num_inputs,
     fully_connected_infer, fully_connected_run},
    {"Pooling", 1, pooling_parse, pooling_num_inputs, pooling_infer, pooling_run},
    {"elemwise_add", 1, no_attrs_parse, two_inputs, elemwise_infer, elemwise_add_run},
    {"softmax", 1, softmax_parse, one_input, softmax_infer, softmax_run},
};

size_t cr_num_ops(void) { return sizeof kOps / sizeof kOps[0]; }

const cr_op *cr_op_at(size_t index) { return index < cr_num_ops() ? &kOps[index] : NULL; }

const cr_op *cr_find_op(const char *name) {
  for (size_t i = 0; i < cr_num_ops(); ++i) {
    if (strcmp(kOps[i].name, name) == 0) return &kOps[i];
  }
  return NULL;
}

/* Splits attributes into the operator's own and the host's "__*__"
 * annotations, and checks "__op_version__" on the way. */
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

int cr_resolve_op(const char *what, const char *op_name, const char *const *keys,
                  const char *const *vals, size_t num_attrs, const acc_shape *in_shapes,
                  const int32_t *in_dtypes, int num_inputs, const acc_shape *out_shape,
                  int32_t out_dtype, const cr_op **op, cr_params *params) {
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
  status = found->parse(own_keys, own_vals, own_count, params);
  if (status != MX_ACC_OK) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s", acc_last_error());
    return acc_fail(status, "%s (%s): %s", what, op_name, detail);
  }
  int expected_inputs = found->num_inputs(params);
  if (num_inputs != expected_inputs) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s (%s): %d inputs, expected %d", what, op_name,
                    num_inputs, expected_inputs);
  }
  for (int i = 0; i < num_inputs; ++i) {
    if (in_dtypes[i] != kFloat32) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s (%s): input %d has dtype %s; only float32",
                      what, op_name, i, acc_dtype_name(in_dtypes[i]));
    }
  }
  if (out_dtype != kFloat32) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s (%s): output dtype %s; only float32", what,
                    op_name, acc_dtype_name(out_dtype));
  }
  acc_shape inferred;
  status = found->infer_shape(params, in_shapes, num_inputs, &inferred);
  if (status != MX_ACC_OK) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s", acc_last_error());
    return acc_fail(status, "%s (%s): %s", what, op_name, detail);
  }
  if (!acc_shape_equal(&inferred, out_shape)) {
    char got[256], want[256];
    acc_shape_format(out_shape, got, sizeof got);
    acc_shape_format(&inferred, want, sizeof want);
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s (%s): output shape %s, expected %s", what,
                    op_name, got, want);
  }
  *op = found;
  return MX_ACC_OK;
}
