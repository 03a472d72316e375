/*
 * Neural-network layers of cpu_ref: Convolution, Deconvolution, Pooling,
 * FullyConnected, UpSampling, Dropout and Embedding, at inference (Dropout
 * is the identity). The activations, normalisations and softmaxes are in
 * ops_norm.c.
 *
 * Each section parses its operator's attributes with the registry's
 * defaults, checks the input shapes and infers the outputs', and calls the
 * kernel; the table in ops.c lists them. The layers compute in float32
 * (float16 data widened, see cr_run_float32); Dropout and Embedding only
 * move elements and run every dtype.
 */
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "attrs.h"
#include "op_impl.h"
#include "reference.h"
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

/* ---- Convolution, Deconvolution ---------------------------------------- */

/* Both parse the same attributes (Deconvolution adds adj and target_shape,
 * and leaves out the bias by default); variant 1 is Deconvolution. */
static int convolution_parse(const char *const *keys, const char *const *vals,
                             size_t count, cr_params *params) {
  const int deconvolution = params->variant == 1;
  cr_conv_params *conv = &params->u.convolution.conv;
  int kernel_ndim = 0, stride_ndim = 0, dilate_ndim = 0, pad_ndim = 0, adj_ndim = 0;
  for (int i = 0; i < 3; ++i) {
    conv->kernel[i] = conv->stride[i] = conv->dilate[i] = 1;
    conv->pad[i] = 0;
    params->u.convolution.adj[i] = params->u.convolution.target_shape[i] = 0;
  }
  conv->num_group = 1;
  params->u.convolution.num_filter = 0;
  params->u.convolution.no_bias = deconvolution;
  int64_t target[3] = {0, 0, 0};
  int target_count = 0;
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
    } else if (deconvolution && strcmp(key, "adj") == 0) {
      status = parse_spatial_like_kernel(key, value, 0, params->u.convolution.adj, &adj_ndim);
    } else if (deconvolution && strcmp(key, "target_shape") == 0) {
      if (acc_attr_int_tuple(value, target, 3, &target_count) != 0) {
        status = cr_bad_attr(key, value, "a tuple of at most 3 integers");
      }
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
  if (status == MX_ACC_OK) status = check_same_ndim(kernel_ndim, adj_ndim, "adj");
  if (status != MX_ACC_OK) return status;
  params->u.convolution.spatial_ndim = kernel_ndim;
  if (!deconvolution) return MX_ACC_OK;
  if (params->u.convolution.num_filter % conv->num_group != 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "num_filter is not divisible by num_group");
  }
  if (kernel_ndim == 3 && (conv->dilate[0] != 1 || conv->dilate[1] != 1 || conv->dilate[2] != 1)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "dilate is not supported for 3-D deconvolution");
  }
  /* A target_shape with any nonzero entry overrides pad and adj. */
  int has_target = 0;
  for (int i = 0; i < target_count; ++i) has_target = has_target || target[i] != 0;
  if (has_target && target_count != kernel_ndim) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute target_shape needs %d entries, like kernel",
                    kernel_ndim);
  }
  for (int i = 0; has_target && i < target_count; ++i) {
    params->u.convolution.target_shape[3 - target_count + i] = target[i];
  }
  return MX_ACC_OK;
}

static int convolution_num_inputs(const cr_params *params) {
  return params->u.convolution.no_bias ? 2 : 3;
}

/* Checks data and bias, and the weight (filters x channels x kernel). */
static int check_conv_inputs(const cr_params *params, const acc_shape *in, int num_in,
                             int64_t weight_filters, int64_t weight_channels) {
  const cr_conv_params *conv = &params->u.convolution.conv;
  int spatial = params->u.convolution.spatial_ndim;
  const acc_shape *weight = &in[1];
  int weight_ok = weight->ndim == spatial + 2 && (int64_t)weight->dims[0] == weight_filters &&
                  (int64_t)weight->dims[1] == weight_channels;
  for (int i = 0; weight_ok && i < spatial; ++i) {
    weight_ok = (int64_t)weight->dims[2 + i] == conv->kernel[3 - spatial + i];
  }
  if (!weight_ok) return cr_shape_error("weight shape %s does not match the attributes", weight);
  int64_t filters = params->u.convolution.num_filter;
  if (num_in == 3 && !(in[2].ndim == 1 && (int64_t)in[2].dims[0] == filters)) {
    return cr_shape_error("bias shape %s does not match num_filter", &in[2]);
  }
  return MX_ACC_OK;
}

/* The data has the kernel's dimensions, and channels divisible by groups. */
static int check_conv_data(const cr_params *params, const acc_shape *data) {
  int64_t groups = params->u.convolution.conv.num_group;
  if (data->ndim != params->u.convolution.spatial_ndim + 2) {
    return cr_shape_error("data shape %s does not match the kernel's dimensions", data);
  }
  if ((int64_t)data->dims[1] % groups != 0) {
    return cr_shape_error("the channels of data shape %s are not divisible by num_group", data);
  }
  return MX_ACC_OK;
}

static int convolution_infer(const cr_params *params, const acc_shape *in, int num_in,
                             acc_shape *out) {
  const cr_conv_params *conv = &params->u.convolution.conv;
  int spatial = params->u.convolution.spatial_ndim;
  int64_t filters = params->u.convolution.num_filter, groups = conv->num_group;
  const acc_shape *data = &in[0];
  int status = check_conv_data(params, data);
  if (status != MX_ACC_OK) return status;
  if (filters % groups != 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "num_group %lld does not divide num_filter %lld",
                    (long long)groups, (long long)filters);
  }
  status = check_conv_inputs(params, in, num_in, filters, (int64_t)data->dims[1] / groups);
  if (status != MX_ACC_OK) return status;
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

static int convolution_compute(const cr_params *params, const cr_tensor *in, int num_in,
                               const cr_tensor *out, int num_threads) {
  int64_t x_shape[5], y_shape[5];
  view_5d(&in[0].shape, x_shape);
  view_5d(&out->shape, y_shape);
  if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_ref_convolution(&params->u.convolution.conv, x_shape, in[0].data, in[1].data,
                       num_in == 3 ? in[2].data : NULL, y_shape, out->data);
    return MX_ACC_OK;
  }
  if (cr_convolution(&params->u.convolution.conv, x_shape, in[0].data, in[1].data,
                     num_in == 3 ? in[2].data : NULL, y_shape, out->data, num_threads) != 0) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "Convolution: out of scratch memory");
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(convolution_run, convolution_compute)

/* Deconvolution's padding per spatial slot (D, H, W) and its output
 * extents, by MXNet's rules: the transposed convolution covers
 * full = stride * (size - 1) + dilated kernel positions, of which output
 * o is full position o + pad, and adj adds positions at the end. A
 * target_shape splits the surplus full - target into pad (half, rounded
 * up) and adj (the odd remainder). Every adj must be below its stride. */
static int deconvolution_layout(const cr_params *params, const acc_shape *data, int64_t pad[3],
                                uint64_t *out_dims) {
  const cr_conv_params *conv = &params->u.convolution.conv;
  const int spatial = params->u.convolution.spatial_ndim;
  const int has_target = params->u.convolution.target_shape[0] != 0 ||
                         params->u.convolution.target_shape[1] != 0 ||
                         params->u.convolution.target_shape[2] != 0;
  for (int slot = 0; slot < 3; ++slot) pad[slot] = conv->pad[slot];
  for (int i = 0; i < spatial; ++i) {
    const int slot = 3 - spatial + i;
    const uint64_t size = data->dims[2 + i];
    const int64_t window = conv->dilate[slot] * (conv->kernel[slot] - 1) + 1;
    const int64_t stride = conv->stride[slot];
    /* full = stride * (size - 1) + window, which may be below window (even
     * negative) for an empty axis; a product beyond any real tensor is
     * refused rather than overflowing. */
    uint64_t span = 0;
    if (size > 0 && cr_checked_mul(size - 1, (uint64_t)stride, "the output", &span) != MX_ACC_OK) {
      return cr_shape_error("data shape %s makes too large an output", data);
    }
    const int64_t full = (size > 0 ? (int64_t)span : -stride) + window;
    int64_t adj = params->u.convolution.adj[slot];
    if (has_target) {
      const int64_t target = params->u.convolution.target_shape[slot];
      if (full < target) {
        return cr_shape_error("target_shape is larger than the deconvolution of data %s", data);
      }
      const int64_t surplus = full - target;
      pad[slot] = (surplus + 1) / 2;
      adj = surplus % 2;
    }
    if (adj >= stride) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "adj %lld must be smaller than stride %lld",
                      (long long)adj, (long long)stride);
    }
    const int64_t length = full - 2 * pad[slot] + adj;
    if (length < 1) {
      return cr_shape_error("the deconvolution of data %s would be empty (pad too large)", data);
    }
    out_dims[i] = (uint64_t)length;
  }
  return MX_ACC_OK;
}

static int deconvolution_infer(const cr_params *params, const acc_shape *in, int num_in,
                               acc_shape *out) {
  const acc_shape *data = &in[0];
  const int64_t filters = params->u.convolution.num_filter;
  const int64_t groups = params->u.convolution.conv.num_group;
  int status = check_conv_data(params, data);
  if (status == MX_ACC_OK) {
    status = check_conv_inputs(params, in, num_in, (int64_t)data->dims[1], filters / groups);
  }
  int64_t pad[3];
  if (status == MX_ACC_OK) status = deconvolution_layout(params, data, pad, out->dims + 2);
  if (status != MX_ACC_OK) return status;
  out->ndim = data->ndim;
  out->dims[0] = data->dims[0];
  out->dims[1] = (uint64_t)filters;
  return MX_ACC_OK;
}

static int deconvolution_compute(const cr_params *params, const cr_tensor *in, int num_in,
                                 const cr_tensor *out, int num_threads) {
  cr_conv_params conv = params->u.convolution.conv;
  uint64_t dims[3];
  deconvolution_layout(params, &in[0].shape, conv.pad, dims); /* checked at infer */
  int64_t x_shape[5], y_shape[5];
  view_5d(&in[0].shape, x_shape);
  view_5d(&out->shape, y_shape);
  if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_ref_deconvolution(&conv, x_shape, in[0].data, in[1].data,
                         num_in == 3 ? in[2].data : NULL, y_shape, out->data);
  } else {
    cr_deconvolution(&conv, x_shape, in[0].data, in[1].data, num_in == 3 ? in[2].data : NULL,
                     y_shape, out->data, num_threads);
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(deconvolution_run, deconvolution_compute)

/* ---- Pooling ----------------------------------------------------------- */

static int pooling_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  cr_pool_params *pool = &params->u.pooling.pool;
  int kernel_ndim = 0, stride_ndim = 0, pad_ndim = 0, has_p_value = 0;
  for (int i = 0; i < 3; ++i) {
    pool->kernel[i] = pool->stride[i] = 1;
    pool->pad[i] = 0;
  }
  pool->type = CR_POOL_MAX;
  pool->count_include_pad = 1;
  params->u.pooling.global_pool = 0;
  params->u.pooling.convention = CR_POOL_VALID;
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
      else if (acc_attr_equals(value, "lp")) pool->type = CR_POOL_LP;
      else status = cr_bad_attr(key, value, "max, avg, sum or lp");
    } else if (strcmp(key, "pooling_convention") == 0) {
      if (acc_attr_equals(value, "valid")) params->u.pooling.convention = CR_POOL_VALID;
      else if (acc_attr_equals(value, "full")) params->u.pooling.convention = CR_POOL_FULL;
      else if (acc_attr_equals(value, "same")) params->u.pooling.convention = CR_POOL_SAME;
      else status = cr_bad_attr(key, value, "valid, full or same");
    } else if (strcmp(key, "global_pool") == 0) {
      status = cr_parse_bool(key, value, &params->u.pooling.global_pool);
    } else if (strcmp(key, "count_include_pad") == 0) {
      if (!acc_attr_is_none(value)) status = cr_parse_bool(key, value, &pool->count_include_pad);
    } else if (strcmp(key, "p_value") == 0) {
      int64_t p = 0;
      has_p_value = !acc_attr_is_none(value);
      if (has_p_value) status = cr_parse_int(key, value, &p);
      pool->p_value = p >= 1 && p <= 3 ? (int)p : 0; /* only lp reads it */
    } else if (strcmp(key, "layout") == 0) {
      status = check_layout(key, value);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  if (pool->type == CR_POOL_LP && (!has_p_value || pool->p_value == 0)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "lp pooling needs p_value 1, 2 or 3");
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
  if (spatial < 1 || spatial > 3) {
    return cr_shape_error("data shape %s is not 3-D, 4-D or 5-D", data);
  }
  if (params->u.pooling.convention == CR_POOL_SAME) {
    if (spatial != 1) return cr_shape_error("convention same pools 3-D data only, not %s", data);
    if (pool->pad[0] != 0 || pool->pad[1] != 0 || pool->pad[2] != 0) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "convention same does not allow padding");
    }
  }
  if (!params->u.pooling.global_pool && spatial != params->u.pooling.spatial_ndim) {
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
    int64_t span = extent - pool->kernel[slot], stride = pool->stride[slot], steps;
    switch (params->u.pooling.convention) {
      case CR_POOL_FULL:
        steps = (span + stride - 1) / stride + 1;
        break;
      case CR_POOL_SAME:
        steps = (extent + stride - 1) / stride;
        break;
      default:
        steps = span / stride + 1;
        break;
    }
    out->dims[2 + i] = (uint64_t)steps;
  }
  return MX_ACC_OK;
}

static int pooling_compute(const cr_params *params, const cr_tensor *in, int num_in,
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
  if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_ref_pooling(&pool, x_shape, in[0].data, y_shape, out->data);
  } else {
    cr_pooling(&pool, x_shape, in[0].data, y_shape, out->data, num_threads);
  }
  if (pool.type == CR_POOL_MAX && cr_out_dtype(params, 0) == CR_FLOAT16) {
    /* An empty window yields the lowest value of the data's dtype; float16
     * data cannot hold the kernel's -FLT_MAX, so every -FLT_MAX marks one. */
    float *y = out->data;
    for (int64_t i = 0; i < cr_element_count(&out->shape); ++i) {
      if (y[i] == -FLT_MAX) y[i] = -65504.0f;
    }
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(pooling_run, pooling_compute)

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

static int fully_connected_compute(const cr_params *params, const cr_tensor *in, int num_in,
                                   const cr_tensor *out, int num_threads) {
  int64_t hidden = params->u.fully_connected.num_hidden;
  int64_t in_dim = (int64_t)in[1].shape.dims[1];
  int64_t rows = cr_product(&out->shape, 0, out->shape.ndim) / hidden;
  if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_ref_fully_connected(rows, in_dim, hidden, in[0].data, in[1].data,
                           num_in == 3 ? in[2].data : NULL, out->data);
    return MX_ACC_OK;
  }
  if (cr_fully_connected(rows, in_dim, hidden, in[0].data, in[1].data,
                         num_in == 3 ? in[2].data : NULL, out->data, num_threads) != 0) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "FullyConnected: out of scratch memory");
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(fully_connected_run, fully_connected_compute)

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
  params->u.embedding.dtype = kFloat32;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status, flag;
    if (strcmp(key, "input_dim") == 0) {
      status = cr_parse_positive_int(key, value, &params->u.embedding.input_dim);
    } else if (strcmp(key, "output_dim") == 0) {
      status = cr_parse_positive_int(key, value, &params->u.embedding.output_dim);
    } else if (strcmp(key, "dtype") == 0) {
      status = cr_parse_dtype(key, value, 0, &params->u.embedding.dtype);
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

/* The weight and the output have the dtype attribute's dtype; the indices
 * may have any. */
static int embedding_dtypes(const cr_params *params) {
  int status = cr_dtype_expect("input", 1, params->in_dtypes[1], params->u.embedding.dtype);
  if (status == MX_ACC_OK) {
    status = cr_dtype_expect("output", 0, params->out_dtypes[0], params->u.embedding.dtype);
  }
  return status;
}

static int embedding_run(const cr_params *params, const cr_tensor *in, int num_in,
                         const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  cr_embedding(cr_element_count(&in[0].shape), cr_in_dtype(params, 0), in[0].data,
               params->u.embedding.input_dim, params->u.embedding.output_dim,
               cr_out_size(params, 0), in[1].data, out->data);
  return MX_ACC_OK;
}

/* ---- UpSampling (nearest) ----------------------------------------------- */

static int upsampling_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  int nearest = -1; /* sample_type is required */
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK;
    int64_t number;
    if (strcmp(key, "scale") == 0) {
      status = cr_parse_positive_int(key, value, &params->u.upsampling.scale);
      if (status == MX_ACC_OK && params->u.upsampling.scale > kMaxSpatial) {
        status = cr_bad_attr(key, value, "a scale below 2^31");
      }
    } else if (strcmp(key, "num_args") == 0) {
      status = cr_parse_count(key, value, CR_MAX_INPUTS, &params->u.upsampling.num_args);
    } else if (strcmp(key, "num_filter") == 0) {
      status = cr_parse_int(key, value, &number); /* bilinear only */
    } else if (strcmp(key, "sample_type") == 0) {
      nearest = acc_attr_equals(value, "nearest") ? 1 : acc_attr_equals(value, "bilinear") ? 0 : -2;
      if (nearest == -2) status = cr_bad_attr(key, value, "nearest or bilinear");
    } else if (strcmp(key, "multi_input_mode") == 0) {
      if (acc_attr_equals(value, "sum")) {
        params->u.upsampling.sum = 1;
      } else if (!acc_attr_equals(value, "concat")) {
        status = cr_bad_attr(key, value, "concat or sum");
      }
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  if (nearest == 0) {
    /* The registry does not implement bilinear sampling either. */
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "sample_type \"bilinear\" is not supported");
  }
  if (nearest < 0 || params->u.upsampling.scale == 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "attributes scale and sample_type are required");
  }
  return cr_require_count("num_args", params->u.upsampling.num_args);
}

static int upsampling_inputs(const cr_params *params) { return params->u.upsampling.num_args; }

/* Every input is 4-D; the output is input 0's height and width times
 * scale, and every input is scaled by the one whole factor that reaches it
 * (output height / its height, the same for the width). The channels are
 * concatenated, or must agree for "sum". */
static int upsampling_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  for (int k = 0; k < num_in; ++k) {
    if (in[k].ndim != 4) return cr_shape_error("input shape %s is not 4-D", &in[k]);
  }
  const uint64_t scale = (uint64_t)params->u.upsampling.scale;
  uint64_t height, width;
  if (cr_checked_mul(in[0].dims[2], scale, "the output", &height) != MX_ACC_OK ||
      cr_checked_mul(in[0].dims[3], scale, "the output", &width) != MX_ACC_OK) {
    return cr_shape_error("input shape %s makes too large an output", &in[0]);
  }
  uint64_t channels = in[0].dims[1];
  for (int k = 1; k < num_in; ++k) {
    const acc_shape *shape = &in[k];
    uint64_t reach = 0;
    int whole = shape->dims[0] == in[0].dims[0] && shape->dims[2] != 0 &&
                height % shape->dims[2] == 0 &&
                cr_checked_mul(shape->dims[3], height / shape->dims[2], "the output", &reach) ==
                    MX_ACC_OK &&
                reach == width;
    if (!whole) {
      return cr_shape_error("input shape %s does not scale by a whole factor to the output",
                            shape);
    }
    if (params->u.upsampling.sum) {
      if (shape->dims[1] != channels) {
        return cr_shape_error("input shape %s differs in channels", shape);
      }
    } else if (shape->dims[1] > cr_max_elements() - channels) {
      return cr_shape_error("input shape %s makes too many channels", shape);
    } else {
      channels += shape->dims[1];
    }
  }
  out->ndim = 4;
  out->dims[0] = in[0].dims[0];
  out->dims[1] = channels;
  out->dims[2] = height;
  out->dims[3] = width;
  return MX_ACC_OK;
}

/* One input (the common case): each input row is widened once, pixel by
 * pixel, into the first of its factor output rows, which is then copied to
 * the others (a copy per row instead of a gather per element). x holds
 * planes planes of in_h x in_w, y planes of (in_h * factor) x (in_w * factor). */
static void upsampling_rows(const float *x, int64_t planes, int64_t in_h, int64_t in_w,
                            int64_t factor, float *y) {
  const int64_t out_w = in_w * factor;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t i = 0; i < in_h; ++i) {
      const float *row = x + (p * in_h + i) * in_w;
      float *first = y + (p * in_h + i) * factor * out_w;
      for (int64_t j = 0; j < in_w; ++j) {
        for (int64_t r = 0; r < factor; ++r) first[j * factor + r] = row[j];
      }
      for (int64_t r = 1; r < factor; ++r) {
        memcpy(first + r * out_w, first, (size_t)out_w * sizeof(float));
      }
    }
  }
}

static int upsampling_compute(const cr_params *params, const cr_tensor *in, int num_in,
                              const cr_tensor *out, int num_threads) {
  (void)num_threads;
  const acc_shape *shape = &out->shape;
  const int64_t height = (int64_t)shape->dims[2], width = (int64_t)shape->dims[3];
  int64_t factors[CR_MAX_INPUTS];
  for (int k = 0; k < num_in; ++k) {
    /* An empty input scales by the attribute (its factor reads nothing). */
    factors[k] = in[k].shape.dims[2] > 0 ? height / (int64_t)in[k].shape.dims[2]
                                         : params->u.upsampling.scale;
  }
  if (params->u.upsampling.sum) {
    const float *inputs[CR_MAX_INPUTS];
    for (int k = 0; k < num_in; ++k) inputs[k] = in[k].data;
    cr_upsampling_sum(num_in, inputs, factors, (int64_t)shape->dims[0], (int64_t)shape->dims[1],
                      height, width, out->data);
    return MX_ACC_OK;
  }
  if (num_in == 1) {
    upsampling_rows(in[0].data, (int64_t)shape->dims[0] * (int64_t)shape->dims[1],
                    (int64_t)in[0].shape.dims[2], (int64_t)in[0].shape.dims[3], factors[0],
                    out->data);
    return MX_ACC_OK;
  }
  /* Concatenation: input k repeats each pixel factor times along height
   * and width into its own range of output channels. */
  int64_t y_strides[CR_MAX_NDIM], channel_offset = 0;
  cr_compact_strides(shape, y_strides);
  float *y = out->data;
  for (int k = 0; k < num_in; ++k) {
    int64_t dims[CR_MAX_NDIM], x_strides[CR_MAX_NDIM];
    cr_view_dims(&in[k].shape, dims);
    cr_compact_strides(&in[k].shape, x_strides);
    dims[2] = height;
    dims[3] = width;
    const cr_axis_map maps[4] = {{CR_MAP_STEP, 0, 1, 0},
                                 {CR_MAP_STEP, 0, 1, 0},
                                 {CR_MAP_REPEAT, 0, factors[k], 0},
                                 {CR_MAP_REPEAT, 0, factors[k], 0}};
    cr_gather(4, dims, maps, x_strides, y_strides, sizeof(float), in[k].data, NULL,
              y + channel_offset * y_strides[1]);
    channel_offset += dims[1];
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(upsampling_run, upsampling_compute)

/* ---- the families ------------------------------------------------------ */

const cr_op_impl cr_impl_convolution = {
    .parse = convolution_parse, .num_inputs = convolution_num_inputs,
    .num_outputs = cr_one_output, .check_dtypes = cr_dtypes_float,
    .infer_shape = convolution_infer, .run = convolution_run};
const cr_op_impl cr_impl_deconvolution = {
    .parse = convolution_parse, .num_inputs = convolution_num_inputs,
    .num_outputs = cr_one_output, .check_dtypes = cr_dtypes_float,
    .infer_shape = deconvolution_infer, .run = deconvolution_run};
const cr_op_impl cr_impl_pooling = {
    .parse = pooling_parse, .num_inputs = cr_one_input, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = pooling_infer, .run = pooling_run};
const cr_op_impl cr_impl_fully_connected = {
    .parse = fully_connected_parse, .num_inputs = fully_connected_num_inputs,
    .num_outputs = cr_one_output, .check_dtypes = cr_dtypes_float,
    .infer_shape = fully_connected_infer, .run = fully_connected_run};
const cr_op_impl cr_impl_dropout = {
    .parse = dropout_parse, .num_inputs = cr_one_input, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_any, .infer_shape = cr_same_shape_infer, .run = cr_copy_run};
const cr_op_impl cr_impl_embedding = {
    .parse = embedding_parse, .num_inputs = cr_two_inputs, .num_outputs = cr_one_output,
    .check_dtypes = embedding_dtypes, .infer_shape = embedding_infer, .run = embedding_run};
const cr_op_impl cr_impl_upsampling = {
    .parse = upsampling_parse, .num_inputs = upsampling_inputs, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = upsampling_infer, .run = upsampling_run};
