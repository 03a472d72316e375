/*
 * Neural-network operators of cpu_ref: Convolution, Pooling,
 * FullyConnected, Activation, BatchNorm, LayerNorm, LeakyReLU, softmax and
 * log_softmax, Dropout and Embedding, at inference (BatchNorm normalises
 * with the moving statistics, Dropout is the identity).
 *
 * Each section parses its operator's attributes with the registry's
 * defaults, checks the input shapes and infers the outputs', and calls the
 * kernel; the table in ops.c lists them.
 */
#include <stdio.h>
#include <string.h>

#include "attrs.h"
#include "op_impl.h"
#include "status.h"
#include "tensor.h"

/* ---- spatial attributes (Convolution, Pooling) ------------------------- */

/* Spatial attribute values (kernel, stride, dilate, pad) are at most this,
 * so that sums and products of them with extents stay far inside int64_t. */
static const int64_t kMaxSpatial = INT32_MAX;

/* A spatial tuple of 1 to 3 values, each >= minimum, stored right-aligned in
 * a (D, H, W) array whose unused leading slots keep their defaults. */
static int parse_spatial(const char *key, const char *value, int64_t minimum,
                         int64_t out[3], int *ndim) {
  int64_t values[3];
  int count;
  if (acc_attr_int_tuple(value, values, 3, &count) != 0 || count < 1) {
    return cr_bad_attr(key, value, "a tuple of 1 to 3 integers");
  }
  for (int i = 0; i < count; ++i) {
    if (values[i] < minimum) {
      return cr_bad_attr(key, value, minimum > 0 ? "positive values" : "non-negative values");
    }
    if (values[i] > kMaxSpatial) return cr_bad_attr(key, value, "values below 2^31");
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
      status = cr_parse_positive_int(key, value, &params->u.convolution.num_filter);
    } else if (strcmp(key, "num_group") == 0) {
      status = cr_parse_positive_int(key, value, &conv->num_group);
    } else if (strcmp(key, "no_bias") == 0) {
      status = cr_parse_bool(key, value, &params->u.convolution.no_bias);
    } else if (strcmp(key, "layout") == 0) {
      status = check_layout(key, value);
    } else {
      status = cr_unknown_attr(key);
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
    return cr_shape_error("data shape %s does not match the kernel's dimensions", data);
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
  if (!weight_ok) return cr_shape_error("weight shape %s does not match the attributes", weight);
  if (num_in == 3 && !(in[2].ndim == 1 && (int64_t)in[2].dims[0] == filters)) {
    return cr_shape_error("bias shape %s does not match num_filter", &in[2]);
  }
  out->ndim = data->ndim;
  out->dims[0] = data->dims[0];
  out->dims[1] = (uint64_t)filters;
  for (int i = 0; i < spatial; ++i) {
    int slot = 3 - spatial + i;
    int64_t extent = (int64_t)data->dims[2 + i] + 2 * conv->pad[slot];
    int64_t window = conv->dilate[slot] * (conv->kernel[slot] - 1) + 1;
    if (extent < window) {
      return cr_shape_error("data shape %s is smaller than the dilated kernel", data);
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
      status = cr_parse_bool(key, value, &params->u.pooling.global_pool);
    } else if (strcmp(key, "count_include_pad") == 0) {
      if (!acc_attr_is_none(value)) status = cr_parse_bool(key, value, &pool->count_include_pad);
    } else if (strcmp(key, "layout") == 0) {
      status = check_layout(key, value);
    } else {
      status = cr_unknown_attr(key);
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

static int pooling_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)num_in;
  const cr_pool_params *pool = &params->u.pooling.pool;
  const acc_shape *data = &in[0];
  int spatial = data->ndim - 2;
  if (spatial < 1 || spatial > 3 ||
      (!params->u.pooling.global_pool && spatial != params->u.pooling.spatial_ndim)) {
    return cr_shape_error("data shape %s does not match the kernel's dimensions", data);
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
      return cr_shape_error("data shape %s is smaller than the pooling kernel", data);
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
      status = cr_parse_positive_int(key, value, &params->u.fully_connected.num_hidden);
    } else if (strcmp(key, "no_bias") == 0) {
      status = cr_parse_bool(key, value, &params->u.fully_connected.no_bias);
    } else if (strcmp(key, "flatten") == 0) {
      status = cr_parse_bool(key, value, &params->u.fully_connected.flatten);
    } else {
      status = cr_unknown_attr(key);
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
  if (data->ndim < 1) return cr_shape_error("data shape %s has no dimensions", data);
  int flatten = params->u.fully_connected.flatten;
  int64_t in_dim = flatten ? cr_product(data, 1, data->ndim) : (int64_t)data->dims[data->ndim - 1];
  if (!(weight->ndim == 2 && (int64_t)weight->dims[0] == hidden &&
        (int64_t)weight->dims[1] == in_dim)) {
    return cr_shape_error("weight shape %s does not match num_hidden and the data", weight);
  }
  /* MXNet accepts a bias of shape (num_hidden,) or (num_hidden, 1). */
  int bias_ok = num_in == 2 || ((in[2].ndim == 1 || (in[2].ndim == 2 && in[2].dims[1] == 1)) &&
                                (int64_t)in[2].dims[0] == hidden);
  if (!bias_ok) return cr_shape_error("bias shape %s does not match num_hidden", &in[2]);
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
  int64_t rows = cr_product(&out->shape, 0, out->shape.ndim) / hidden;
  cr_fully_connected(rows, in_dim, hidden, in[0].data, in[1].data,
                     num_in == 3 ? in[2].data : NULL, out->data, num_threads);
}

/* ---- Activation -------------------------------------------------------- */

static int activation_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  int have_type = 0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    if (strcmp(key, "act_type") != 0) return cr_unknown_attr(key);
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

static void activation_run(const cr_params *params, const cr_tensor *in, int num_in,
                           const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  cr_activation(params->u.activation, (int64_t)cr_element_count(&out->shape), in[0].data,
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
    if (strcmp(key, "eps") == 0) {
      if (acc_attr_float(value, &params->u.batch_norm.eps) != 0 ||
          !(params->u.batch_norm.eps >= 0)) {
        status = cr_bad_attr(key, value, "a non-negative number");
      }
    } else if (strcmp(key, "fix_gamma") == 0) {
      status = cr_parse_bool(key, value, &params->u.batch_norm.fix_gamma);
    } else if (strcmp(key, "axis") == 0) {
      status = cr_parse_axis(key, value, &params->u.batch_norm.axis);
    } else if (strcmp(key, "output_mean_var") == 0) {
      status = cr_parse_bool(key, value, &flag);
      if (status == MX_ACC_OK && flag) {
        status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "output_mean_var=True is not supported");
      }
    } else if (strcmp(key, "use_global_stats") == 0 || strcmp(key, "momentum") == 0) {
      /* Inference always normalises with the moving statistics. */
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int batch_norm_num_inputs(const cr_params *params) {
  (void)params;
  return 5;
}

static int batch_norm_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  int axis = 0;
  int status = cr_resolve_axis(params->u.batch_norm.axis, in[0].ndim, &axis);
  if (status != MX_ACC_OK) return status;
  for (int i = 1; i < num_in; ++i) {
    if (!(in[i].ndim == 1 && in[i].dims[0] == in[0].dims[axis])) {
      return cr_shape_error("parameter shape %s does not match the channel axis", &in[i]);
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
  cr_resolve_axis(params->u.batch_norm.axis, in[0].shape.ndim, &axis); /* checked at infer */
  const acc_shape *shape = &in[0].shape;
  cr_batch_norm(cr_product(shape, 0, axis), (int64_t)shape->dims[axis],
                cr_product(shape, axis + 1, shape->ndim), in[0].data, in[1].data, in[2].data,
                in[3].data, in[4].data, params->u.batch_norm.eps, params->u.batch_norm.fix_gamma,
                out->data);
}

/* ---- softmax, log_softmax ---------------------------------------------- */

static int softmax_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  params->u.softmax.axis = -1;
  params->u.softmax.temperature = 1.0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK, flag;
    if (strcmp(key, "axis") == 0) {
      status = cr_parse_axis(key, value, &params->u.softmax.axis);
    } else if (strcmp(key, "temperature") == 0) {
      if (!acc_attr_is_none(value) &&
          (acc_attr_float(value, &params->u.softmax.temperature) != 0 ||
           !(params->u.softmax.temperature > 0))) {
        status = cr_bad_attr(key, value, "a positive number");
      }
    } else if (strcmp(key, "dtype") == 0) {
      status = cr_parse_float32_dtype(key, value);
    } else if (strcmp(key, "use_length") == 0) {
      status = cr_parse_bool(key, value, &flag);
      if (status == MX_ACC_OK && flag) {
        status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "use_length=True is not supported");
      }
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int softmax_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)num_in;
  int axis = 0;
  int status = cr_resolve_axis(params->u.softmax.axis, in[0].ndim, &axis);
  if (status != MX_ACC_OK) return status;
  *out = in[0];
  return MX_ACC_OK;
}

static void softmax_run(const cr_params *params, const cr_tensor *in, int num_in,
                        const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int axis = 0;
  cr_resolve_axis(params->u.softmax.axis, in[0].shape.ndim, &axis); /* checked at infer */
  const acc_shape *shape = &in[0].shape;
  cr_softmax(cr_product(shape, 0, axis), (int64_t)shape->dims[axis],
             cr_product(shape, axis + 1, shape->ndim), params->u.softmax.temperature,
             params->variant, in[0].data, out->data);
}

/* ---- LayerNorm --------------------------------------------------------- */

static int layer_norm_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  params->u.layer_norm.axis = -1;
  params->u.layer_norm.eps = 1e-5;
  params->u.layer_norm.output_mean_var = 0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status;
    if (strcmp(key, "axis") == 0) {
      status = cr_parse_axis(key, value, &params->u.layer_norm.axis);
    } else if (strcmp(key, "eps") == 0) {
      status = cr_parse_float(key, value, &params->u.layer_norm.eps);
    } else if (strcmp(key, "output_mean_var") == 0) {
      status = cr_parse_bool(key, value, &params->u.layer_norm.output_mean_var);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int three_inputs(const cr_params *params) {
  (void)params;
  return 3;
}

/* output_mean_var adds the mean and the standard deviation sqrt(var + eps). */
static int layer_norm_num_outputs(const cr_params *params) {
  return params->u.layer_norm.output_mean_var ? 3 : 1;
}

static int layer_norm_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  (void)num_in;
  int axis = 0;
  int status = cr_resolve_axis(params->u.layer_norm.axis, in[0].ndim, &axis);
  if (status != MX_ACC_OK) return status;
  for (int i = 1; i < 3; ++i) {
    if (!(in[i].ndim == 1 && in[i].dims[0] == in[0].dims[axis])) {
      return cr_shape_error("gamma/beta shape %s does not match the normalised axis", &in[i]);
    }
  }
  out[0] = in[0];
  if (params->u.layer_norm.output_mean_var) {
    out[1] = in[0];
    out[1].dims[axis] = 1;
    out[2] = out[1];
  }
  return MX_ACC_OK;
}

static void layer_norm_run(const cr_params *params, const cr_tensor *in, int num_in,
                           const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int axis = 0;
  cr_resolve_axis(params->u.layer_norm.axis, in[0].shape.ndim, &axis); /* checked at infer */
  const acc_shape *shape = &in[0].shape;
  int with_stats = params->u.layer_norm.output_mean_var;
  cr_layer_norm(cr_product(shape, 0, axis), (int64_t)shape->dims[axis],
                cr_product(shape, axis + 1, shape->ndim), in[0].data, in[1].data, in[2].data,
                params->u.layer_norm.eps, out[0].data, with_stats ? out[1].data : NULL,
                with_stats ? out[2].data : NULL);
}

/* ---- LeakyReLU --------------------------------------------------------- */

static int leaky_relu_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  static const struct {
    const char *name;
    cr_leaky_type type;
  } kTypes[] = {{"leaky", CR_LEAKY_LEAKY}, {"prelu", CR_LEAKY_LEAKY}, {"rrelu", CR_LEAKY_LEAKY},
                {"elu", CR_LEAKY_ELU},     {"selu", CR_LEAKY_SELU},   {"gelu", CR_LEAKY_GELU}};
  const char *act_type = "leaky";
  double slope = 0.25, lower = 0.125, upper = 0.334;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK;
    if (strcmp(key, "act_type") == 0) {
      act_type = value;
    } else if (strcmp(key, "slope") == 0) {
      status = cr_parse_float(key, value, &slope);
    } else if (strcmp(key, "lower_bound") == 0) {
      status = cr_parse_float(key, value, &lower);
    } else if (strcmp(key, "upper_bound") == 0) {
      status = cr_parse_float(key, value, &upper);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  size_t t = 0;
  while (t < sizeof kTypes / sizeof kTypes[0] && !acc_attr_equals(act_type, kTypes[t].name)) ++t;
  if (t == sizeof kTypes / sizeof kTypes[0]) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "act_type \"%s\" is not supported", act_type);
  }
  params->u.leaky_relu.type = kTypes[t].type;
  params->u.leaky_relu.prelu = acc_attr_equals(act_type, "prelu");
  /* At inference rrelu's random slope is fixed to the middle of its range. */
  params->u.leaky_relu.slope = acc_attr_equals(act_type, "rrelu") ? (lower + upper) / 2 : slope;
  return MX_ACC_OK;
}

static int leaky_relu_num_inputs(const cr_params *params) {
  return params->u.leaky_relu.prelu ? 2 : 1;
}

/* How prelu's gamma lines up with the data: the registry matches gamma's
 * trailing axes with data axes 1 and then 0, each gamma extent equal to the
 * data's or 1, and broadcasts over the rest. Sets the gamma strides of data
 * axes 0 and 1 (0 where gamma is broadcast). */
static int prelu_gamma_steps(const acc_shape *data, const acc_shape *gamma, int64_t *outer_step,
                             int64_t *channel_step) {
  uint64_t aligned[2] = {1, 1};
  int position = gamma->ndim - 1;
  for (int axis = 1; axis >= 0; --axis) {
    if (position >= 0 &&
        (gamma->dims[position] == data->dims[axis] || gamma->dims[position] == 1)) {
      aligned[axis] = gamma->dims[position];
      --position;
    }
  }
  if (position != -1) return cr_shape_error("gamma shape %s cannot broadcast to the data", gamma);
  *channel_step = aligned[1] > 1 ? 1 : 0;
  *outer_step = aligned[0] > 1 ? (int64_t)aligned[1] : 0;
  return MX_ACC_OK;
}

static int leaky_relu_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  (void)num_in;
  if (params->u.leaky_relu.prelu) {
    if (in[0].ndim < 2) return cr_shape_error("prelu needs a channel axis; data is %s", &in[0]);
    int64_t outer_step, channel_step;
    int status = prelu_gamma_steps(&in[0], &in[1], &outer_step, &channel_step);
    if (status != MX_ACC_OK) return status;
  }
  *out = in[0];
  return MX_ACC_OK;
}

static void leaky_relu_run(const cr_params *params, const cr_tensor *in, int num_in,
                           const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *shape = &in[0].shape;
  if (params->u.leaky_relu.prelu) {
    int64_t outer_step = 0, channel_step = 0;
    prelu_gamma_steps(shape, &in[1].shape, &outer_step, &channel_step); /* checked at infer */
    cr_prelu((int64_t)shape->dims[0], (int64_t)shape->dims[1], cr_product(shape, 2, shape->ndim),
             in[0].data, in[1].data, outer_step, channel_step, out->data);
    return;
  }
  cr_leaky_relu(params->u.leaky_relu.type, params->u.leaky_relu.slope,
                cr_element_count(shape), in[0].data, out->data);
}

/* ---- Dropout (the identity at inference) ------------------------------- */

static int dropout_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  (void)params;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK, flag;
    if (strcmp(key, "p") == 0) {
      double p;
      status = cr_parse_float(key, value, &p);
      if (status == MX_ACC_OK && !(p >= 0 && p <= 1)) {
        status = cr_bad_attr(key, value, "a probability in [0, 1]");
      }
    } else if (strcmp(key, "mode") == 0) {
      /* "always" would drop at random even at inference; the registry, a
       * deterministic reference, runs it as the identity too. */
      if (!acc_attr_equals(value, "training") && !acc_attr_equals(value, "always")) {
        status = cr_bad_attr(key, value, "training or always");
      }
    } else if (strcmp(key, "axes") == 0) {
      cr_axes axes;
      status = cr_parse_axes(key, value, &axes);
    } else if (strcmp(key, "cudnn_off") == 0) {
      if (!acc_attr_is_none(value)) status = cr_parse_bool(key, value, &flag);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* ---- Embedding --------------------------------------------------------- */

static int embedding_parse(const char *const *keys, const char *const *vals, size_t count,
                           cr_params *params) {
  params->u.embedding.input_dim = 0;
  params->u.embedding.output_dim = 0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status, flag;
    if (strcmp(key, "input_dim") == 0) {
      status = cr_parse_positive_int(key, value, &params->u.embedding.input_dim);
    } else if (strcmp(key, "output_dim") == 0) {
      status = cr_parse_positive_int(key, value, &params->u.embedding.output_dim);
    } else if (strcmp(key, "dtype") == 0) {
      status = cr_parse_float32_dtype(key, value);
    } else if (strcmp(key, "sparse_grad") == 0) {
      status = cr_parse_bool(key, value, &flag); /* training only */
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  if (params->u.embedding.input_dim == 0 || params->u.embedding.output_dim == 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "attributes input_dim and output_dim are required");
  }
  return MX_ACC_OK;
}

static int embedding_infer(const cr_params *params, const acc_shape *in, int num_in,
                           acc_shape *out) {
  (void)num_in;
  const acc_shape *indices = &in[0], *weight = &in[1];
  if (!(weight->ndim == 2 && (int64_t)weight->dims[0] == params->u.embedding.input_dim &&
        (int64_t)weight->dims[1] == params->u.embedding.output_dim)) {
    return cr_shape_error("weight shape %s does not match (input_dim, output_dim)", weight);
  }
  if (indices->ndim >= MX_ACC_MAX_NDIM) {
    return cr_shape_error("data shape %s leaves no room for the embedding axis", indices);
  }
  *out = *indices;
  out->dims[out->ndim++] = (uint64_t)params->u.embedding.output_dim;
  return MX_ACC_OK;
}

static void embedding_run(const cr_params *params, const cr_tensor *in, int num_in,
                          const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  cr_embedding(cr_element_count(&in[0].shape), in[0].data, params->u.embedding.input_dim,
               params->u.embedding.output_dim, in[1].data, out->data);
}

/* ---- the families ------------------------------------------------------ */

const cr_op_impl cr_impl_convolution = {convolution_parse, convolution_num_inputs,
                                        cr_one_output, convolution_infer, convolution_run};
const cr_op_impl cr_impl_pooling = {pooling_parse, cr_one_input, cr_one_output, pooling_infer,
                                    pooling_run};
const cr_op_impl cr_impl_fully_connected = {fully_connected_parse, fully_connected_num_inputs,
                                            cr_one_output, fully_connected_infer,
                                            fully_connected_run};
const cr_op_impl cr_impl_activation = {activation_parse, cr_one_input, cr_one_output,
                                       cr_same_shape_infer, activation_run};
const cr_op_impl cr_impl_batch_norm = {batch_norm_parse, batch_norm_num_inputs, cr_one_output,
                                       batch_norm_infer, batch_norm_run};
const cr_op_impl cr_impl_layer_norm = {layer_norm_parse, three_inputs, layer_norm_num_outputs,
                                       layer_norm_infer, layer_norm_run};
const cr_op_impl cr_impl_leaky_relu = {leaky_relu_parse, leaky_relu_num_inputs, cr_one_output,
                                       leaky_relu_infer, leaky_relu_run};
const cr_op_impl cr_impl_softmax = {softmax_parse, cr_one_input, cr_one_output, softmax_infer,
                                    softmax_run};
const cr_op_impl cr_impl_dropout = {dropout_parse, cr_one_input, cr_one_output,
                                    cr_same_shape_infer, cr_copy_run};
const cr_op_impl cr_impl_embedding = {embedding_parse, cr_two_inputs, cr_one_output,
                                      embedding_infer, embedding_run};
