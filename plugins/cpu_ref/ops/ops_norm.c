/*
 * Activation, normalisation and softmax operators of cpu_ref: Activation,
 * LeakyReLU, BatchNorm, LayerNorm, InstanceNorm, softmax and log_softmax,
 * SoftmaxOutput and SoftmaxActivation, at inference (BatchNorm normalises
 * with the moving statistics, SoftmaxOutput is its forward softmax).
 *
 * Each section parses its operator's attributes with the registry's
 * defaults, checks the input shapes and infers the outputs', and calls the
 * kernel; the table in ops.c lists them. All compute in float32 (float16
 * data widened, see cr_run_float32).
 */
#include <math.h>
#include <string.h>

#include "attrs.h"
#include "op_impl.h"
#include "parallel.h"
#include "status.h"
#include "tensor.h"

/* ---- rows shared among threads ----------------------------------------- */

/* The fast kernels of softmax, LayerNorm and the element-wise activations
 * compute each row (each element) on its own, so contiguous ranges of rows
 * run on the pool's threads give the same values bit for bit as one call.
 * They are a transformer's steps between its products. */
typedef enum { kRowsSoftmax, kRowsLayerNorm, kRowsLeaky, kRowsActivation } cr_rows_kind;

typedef struct cr_rows_job {
  cr_rows_kind kind;
  const cr_params *params;
  int64_t length; /* values per row; element-wise jobs: values per unit */
  const float *x, *gamma, *beta;
  float *y, *mean, *std;
} cr_rows_job;

static void rows_body(void *context, int64_t begin, int64_t end) {
  const cr_rows_job *job = context;
  const cr_params *params = job->params;
  const int64_t rows = end - begin, offset = begin * job->length;
  switch (job->kind) {
    case kRowsSoftmax:
      cr_fast_softmax(rows, job->length, 1, 1.0, 0, job->x + offset, job->y + offset);
      break;
    case kRowsLayerNorm:
      cr_fast_layer_norm(rows, job->length, 1, job->x + offset, job->gamma, job->beta,
                         params->u.layer_norm.eps, job->y + offset,
                         job->mean != NULL ? job->mean + begin : NULL,
                         job->std != NULL ? job->std + begin : NULL);
      break;
    case kRowsLeaky:
      cr_fast_leaky_relu(params->u.leaky_relu.type, params->u.leaky_relu.slope,
                         rows * job->length, job->x + offset, job->y + offset);
      break;
    case kRowsActivation:
      cr_fast_activation(params->u.activation, rows * job->length, job->x + offset,
                         job->y + offset);
      break;
  }
}

/* Runs job over `rows` rows of job->length values (element-wise jobs: rows
 * values, length 1) on up to num_threads threads; `cost` is a value's work
 * in multiply-add equivalents, for cr_threads_for_work. Element-wise jobs
 * are shared in units of 16 values (whole cache lines), the remainder
 * run by the caller. */
static void run_rows(cr_rows_job *job, int64_t rows, double cost, int num_threads) {
  const double work = (double)rows * (double)job->length * cost;
  const int threads = cr_threads_for_work(num_threads, work, 1);
  enum { kUnit = 16 };
  if (threads > 1 && job->length > 1) {
    cr_parallel_for(threads, rows, rows_body, job);
  } else if (threads > 1 && rows >= 2 * kUnit) {
    cr_rows_job units = *job;
    units.length = kUnit;
    const int64_t whole = rows / kUnit;
    cr_parallel_for(threads, whole, rows_body, &units);
    if (rows > whole * kUnit) rows_body(job, whole * kUnit, rows);
  } else {
    rows_body(job, 0, rows);
  }
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
        {"softsign", CR_ACT_SOFTSIGN}, {"log_sigmoid", CR_ACT_LOG_SIGMOID},
        {"mish", CR_ACT_MISH}};
    have_type = 0;
    for (size_t t = 0; t < sizeof kTypes / sizeof kTypes[0]; ++t) {
      if (acc_attr_equals(value, kTypes[t].name)) {
        params->u.activation = kTypes[t].type;
        have_type = 1;
      }
    }
    if (!have_type) return cr_bad_attr(key, value, "an activation the registry defines");
  }
  if (!have_type) return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute act_type is required");
  return MX_ACC_OK;
}

static int activation_compute(const cr_params *params, const cr_tensor *in, int num_in,
                              const cr_tensor *out, int num_threads) {
  (void)num_in;
  const int64_t count = (int64_t)cr_element_count(&out->shape);
  if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_activation(params->u.activation, count, in[0].data, out->data);
    return MX_ACC_OK;
  }
  cr_rows_job job = {kRowsActivation, params, 1, in[0].data, NULL, NULL, out->data, NULL, NULL};
  run_rows(&job, count, 8.0, num_threads);
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(activation_run, activation_compute)

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
      status = cr_parse_bool(key, value, &params->u.batch_norm.output_mean_var);
    } else if (strcmp(key, "use_global_stats") == 0) {
      /* Inference always normalises with the moving statistics. */
      status = cr_parse_bool(key, value, &flag);
    } else if (strcmp(key, "momentum") == 0) {
      double momentum;
      status = cr_parse_float(key, value, &momentum);
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

/* output_mean_var adds the mean and the inverse standard deviation. */
static int batch_norm_num_outputs(const cr_params *params) {
  return params->u.batch_norm.output_mean_var ? 3 : 1;
}

/* float16 data keeps its parameters, statistics and their outputs in
 * float32; float32 data keeps everything in float32. */
static int batch_norm_dtypes(const cr_params *params) {
  int status = cr_dtype_allowed("input", 0, params->in_dtypes[0], CR_DTYPES_FLOAT, "BatchNorm",
                                "float32 and float16 data");
  if (status == MX_ACC_OK) status = cr_dtype_expect("output", 0, params->out_dtypes[0],
                                                     params->in_dtypes[0]);
  for (int i = 1; i < params->num_inputs && status == MX_ACC_OK; ++i) {
    status = cr_dtype_expect("input", i, params->in_dtypes[i], kFloat32);
  }
  for (int k = 1; k < params->num_outputs && status == MX_ACC_OK; ++k) {
    status = cr_dtype_expect("output", k, params->out_dtypes[k], kFloat32);
  }
  return status;
}

static int batch_norm_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  int axis = 0;
  if (in[0].ndim == 0) return cr_shape_error("data shape %s has no channel axis", &in[0]);
  int status = cr_resolve_axis(params->u.batch_norm.axis, in[0].ndim, &axis);
  if (status != MX_ACC_OK) return status;
  for (int i = 1; i < num_in; ++i) {
    if (!(in[i].ndim == 1 && in[i].dims[0] == in[0].dims[axis])) {
      return cr_shape_error("parameter shape %s does not match the channel axis", &in[i]);
    }
  }
  out[0] = in[0];
  if (params->u.batch_norm.output_mean_var) out[1] = out[2] = in[1];
  return MX_ACC_OK;
}

static int batch_norm_compute(const cr_params *params, const cr_tensor *in, int num_in,
                              const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int axis = 0;
  cr_resolve_axis(params->u.batch_norm.axis, in[0].shape.ndim, &axis); /* checked at infer */
  const acc_shape *shape = &in[0].shape;
  const double eps = params->u.batch_norm.eps;
  cr_batch_norm(cr_product(shape, 0, axis), (int64_t)shape->dims[axis],
                cr_product(shape, axis + 1, shape->ndim), in[0].data, in[1].data, in[2].data,
                in[3].data, in[4].data, eps, params->u.batch_norm.fix_gamma, out[0].data);
  if (params->u.batch_norm.output_mean_var) {
    /* What MXNet's CPU kernels write at inference: the moving mean, and in
     * the "var" output 1 / sqrt(moving_var + eps). */
    const int64_t channels = (int64_t)shape->dims[axis];
    const float *moving_mean = in[3].data, *moving_var = in[4].data;
    float *mean = out[1].data, *inverse_std = out[2].data;
    for (int64_t c = 0; c < channels; ++c) {
      mean[c] = moving_mean[c];
      inverse_std[c] = (float)(1.0 / sqrt((double)moving_var[c] + eps));
    }
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(batch_norm_run, batch_norm_compute)

/* ---- softmax, log_softmax ---------------------------------------------- */

static int softmax_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  params->u.softmax.axis = -1;
  params->u.softmax.temperature = 1.0;
  params->u.softmax.dtype = -1;
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
      int dtype = -1;
      status = cr_parse_dtype(key, value, 1, &dtype);
      if (status == MX_ACC_OK && dtype != -1 && dtype != kFloat16 && dtype != kFloat32 &&
          dtype != kFloat64) {
        status = cr_bad_attr(key, value, "None, float16, float32 or float64");
      }
      params->u.softmax.dtype = dtype;
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

/* The output has the dtype attribute's dtype, or the data's. */
static int softmax_dtypes(const cr_params *params) {
  int status = cr_dtype_allowed("input", 0, params->in_dtypes[0], CR_DTYPES_FLOAT, "softmax",
                                "float32 and float16");
  const int32_t expected =
      params->u.softmax.dtype >= 0 ? params->u.softmax.dtype : params->in_dtypes[0];
  if (status == MX_ACC_OK) status = cr_dtype_expect("output", 0, params->out_dtypes[0], expected);
  if (status == MX_ACC_OK) {
    status = cr_dtype_allowed("output", 0, params->out_dtypes[0], CR_DTYPES_FLOAT, "softmax",
                              "float32 and float16");
  }
  return status;
}

/* Softmax along the middle axis of the data viewed as (outer, length,
 * inner): the registry's softmax family all reduces to this. */
static void softmax_along(const cr_params *params, const acc_shape *shape, int begin, int end,
                          double temperature, int log, const cr_tensor *in,
                          const cr_tensor *out) {
  (params->kernels == CR_KERNELS_REFERENCE ? cr_softmax : cr_fast_softmax)(
      cr_product(shape, 0, begin), cr_product(shape, begin, end),
             cr_product(shape, end, shape->ndim), temperature, log, in[0].data, out->data);
}

static int softmax_compute(const cr_params *params, const cr_tensor *in, int num_in,
                           const cr_tensor *out, int num_threads) {
  (void)num_in;
  int axis = 0;
  cr_resolve_axis(params->u.softmax.axis, in[0].shape.ndim, &axis); /* checked at infer */
  const acc_shape *shape = &in[0].shape;
  if (params->kernels == CR_KERNELS_FAST && params->u.softmax.temperature == 1.0 &&
      !params->variant && axis == shape->ndim - 1 && shape->dims[axis] > 0) {
    cr_rows_job job = {kRowsSoftmax, params, (int64_t)shape->dims[axis], in[0].data, NULL,
                       NULL, out->data, NULL, NULL};
    run_rows(&job, cr_product(shape, 0, axis), 8.0, num_threads);
    return MX_ACC_OK;
  }
  softmax_along(params, &in[0].shape, axis, axis + 1, params->u.softmax.temperature,
                params->variant, in, out);
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(softmax_run, softmax_compute)

/* ---- SoftmaxOutput (its forward softmax) -------------------------------- */

static int softmax_output_parse(const char *const *keys, const char *const *vals, size_t count,
                                cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status, flag;
    double number;
    if (strcmp(key, "multi_output") == 0) {
      status = cr_parse_bool(key, value, &params->u.softmax_output.multi_output);
    } else if (strcmp(key, "preserve_shape") == 0) {
      status = cr_parse_bool(key, value, &params->u.softmax_output.preserve_shape);
    } else if (strcmp(key, "use_ignore") == 0 || strcmp(key, "out_grad") == 0) {
      status = cr_parse_bool(key, value, &flag); /* training only */
    } else if (strcmp(key, "grad_scale") == 0 || strcmp(key, "ignore_label") == 0 ||
               strcmp(key, "smooth_alpha") == 0) {
      status = cr_parse_float(key, value, &number); /* training only */
    } else if (strcmp(key, "normalization") == 0) {
      status = acc_attr_equals(value, "null") || acc_attr_equals(value, "batch") ||
                       acc_attr_equals(value, "valid")
                   ? MX_ACC_OK
                   : cr_bad_attr(key, value, "null, batch or valid");
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* The label (unused at inference) has the data's shape less the last
 * axis, or the data's own shape; with multi_output (N, prod(data[2:])),
 * the data less axis 1, or the data with axis 1 set to 1. */
static int softmax_output_label_ok(const cr_params *params, const acc_shape *data,
                                   const acc_shape *label) {
  if (acc_shape_equal(data, label)) return 1;
  acc_shape expected = *data;
  if (!params->u.softmax_output.multi_output) {
    expected.ndim -= 1;
    return acc_shape_equal(&expected, label);
  }
  acc_shape flat = {2, {data->dims[0], (uint64_t)cr_product(data, 2, data->ndim)}};
  acc_shape squeezed = *data;
  squeezed.ndim -= 1;
  for (int d = 1; d < squeezed.ndim; ++d) squeezed.dims[d] = data->dims[d + 1];
  expected.dims[1] = 1;
  return acc_shape_equal(&flat, label) || acc_shape_equal(&squeezed, label) ||
         acc_shape_equal(&expected, label);
}

static int softmax_output_infer(const cr_params *params, const acc_shape *in, int num_in,
                                acc_shape *out) {
  (void)num_in;
  const acc_shape *data = &in[0];
  if (data->ndim < (params->u.softmax_output.multi_output ? 2 : 1)) {
    return cr_shape_error("data shape %s has too few dimensions", data);
  }
  if (!softmax_output_label_ok(params, data, &in[1])) {
    return cr_shape_error("label shape %s does not match the data", &in[1]);
  }
  *out = *data;
  return MX_ACC_OK;
}

/* Along axis 1 of (N, C, -1) with multi_output, along the last axis with
 * preserve_shape, and otherwise over the data flattened to (N, -1). */
static int softmax_output_compute(const cr_params *params, const cr_tensor *in, int num_in,
                                  const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *shape = &in[0].shape;
  const int n = shape->ndim;
  if (params->u.softmax_output.multi_output) {
    softmax_along(params, shape, 1, 2, 1.0, 0, in, out);
  } else if (params->u.softmax_output.preserve_shape) {
    softmax_along(params, shape, n - 1, n, 1.0, 0, in, out);
  } else {
    softmax_along(params, shape, 1, n, 1.0, 0, in, out);
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(softmax_output_run, softmax_output_compute)

/* ---- SoftmaxActivation --------------------------------------------------- */

static int softmax_activation_parse(const char *const *keys, const char *const *vals,
                                    size_t count, cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(keys[i], "mode") != 0) return cr_unknown_attr(keys[i]);
    if (acc_attr_equals(vals[i], "channel")) {
      params->u.softmax_channel = 1;
    } else if (acc_attr_equals(vals[i], "instance")) {
      params->u.softmax_channel = 0;
    } else {
      return cr_bad_attr(keys[i], vals[i], "instance or channel");
    }
  }
  return MX_ACC_OK;
}

static int softmax_activation_infer(const cr_params *params, const acc_shape *in, int num_in,
                                    acc_shape *out) {
  (void)num_in;
  if (in[0].ndim < (params->u.softmax_channel ? 3 : 1)) {
    return cr_shape_error("data shape %s has too few dimensions for the mode", &in[0]);
  }
  *out = in[0];
  return MX_ACC_OK;
}

/* "channel" runs along axis 1; "instance" along the last axis (MXNet
 * flattens the data to 2-D keeping it). */
static int softmax_activation_compute(const cr_params *params, const cr_tensor *in, int num_in,
                                      const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const int n = in[0].shape.ndim;
  if (params->u.softmax_channel) {
    softmax_along(params, &in[0].shape, 1, 2, 1.0, 0, in, out);
  } else {
    softmax_along(params, &in[0].shape, n - 1, n, 1.0, 0, in, out);
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(softmax_activation_run, softmax_activation_compute)

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

static int layer_norm_compute(const cr_params *params, const cr_tensor *in, int num_in,
                              const cr_tensor *out, int num_threads) {
  (void)num_in;
  int axis = 0;
  cr_resolve_axis(params->u.layer_norm.axis, in[0].shape.ndim, &axis); /* checked at infer */
  const acc_shape *shape = &in[0].shape;
  int with_stats = params->u.layer_norm.output_mean_var;
  if (params->kernels == CR_KERNELS_FAST && axis == shape->ndim - 1 && shape->dims[axis] > 0) {
    cr_rows_job job = {kRowsLayerNorm, params, (int64_t)shape->dims[axis], in[0].data,
                       in[1].data, in[2].data, out[0].data,
                       with_stats ? out[1].data : NULL, with_stats ? out[2].data : NULL};
    run_rows(&job, cr_product(shape, 0, axis), 4.0, num_threads);
    return MX_ACC_OK;
  }
  (params->kernels == CR_KERNELS_REFERENCE ? cr_layer_norm : cr_fast_layer_norm)(
      cr_product(shape, 0, axis), (int64_t)shape->dims[axis],
                cr_product(shape, axis + 1, shape->ndim), in[0].data, in[1].data, in[2].data,
                params->u.layer_norm.eps, out[0].data, with_stats ? out[1].data : NULL,
                with_stats ? out[2].data : NULL);
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(layer_norm_run, layer_norm_compute)

/* ---- InstanceNorm ------------------------------------------------------- */

static int instance_norm_parse(const char *const *keys, const char *const *vals, size_t count,
                               cr_params *params) {
  params->u.instance_norm_eps = 1e-3;
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(keys[i], "eps") != 0) return cr_unknown_attr(keys[i]);
    int status = cr_parse_float(keys[i], vals[i], &params->u.instance_norm_eps);
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int instance_norm_infer(const cr_params *params, const acc_shape *in, int num_in,
                               acc_shape *out) {
  (void)params;
  (void)num_in;
  if (in[0].ndim < 3) return cr_shape_error("data shape %s has fewer than 3 dimensions", &in[0]);
  for (int i = 1; i < 3; ++i) {
    if (!(in[i].ndim == 1 && in[i].dims[0] == in[0].dims[1])) {
      return cr_shape_error("gamma/beta shape %s does not match the channels", &in[i]);
    }
  }
  *out = in[0];
  return MX_ACC_OK;
}

static int instance_norm_compute(const cr_params *params, const cr_tensor *in, int num_in,
                                 const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *shape = &in[0].shape;
  cr_instance_norm((int64_t)shape->dims[0], (int64_t)shape->dims[1],
                   cr_product(shape, 2, shape->ndim), in[0].data, in[1].data, in[2].data,
                   params->u.instance_norm_eps, out->data);
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(instance_norm_run, instance_norm_compute)

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
    return cr_bad_attr("act_type", act_type, "elu, gelu, leaky, prelu, rrelu or selu");
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

static int leaky_relu_compute(const cr_params *params, const cr_tensor *in, int num_in,
                              const cr_tensor *out, int num_threads) {
  (void)num_in;
  const acc_shape *shape = &in[0].shape;
  if (params->u.leaky_relu.prelu) {
    int64_t outer_step = 0, channel_step = 0;
    prelu_gamma_steps(shape, &in[1].shape, &outer_step, &channel_step); /* checked at infer */
    (params->kernels == CR_KERNELS_REFERENCE ? cr_prelu : cr_fast_prelu)(
        (int64_t)shape->dims[0], (int64_t)shape->dims[1], cr_product(shape, 2, shape->ndim),
             in[0].data, in[1].data, outer_step, channel_step, out->data);
    return MX_ACC_OK;
  }
  if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_leaky_relu(params->u.leaky_relu.type, params->u.leaky_relu.slope,
                  cr_element_count(shape), in[0].data, out->data);
    return MX_ACC_OK;
  }
  cr_rows_job job = {kRowsLeaky, params, 1, in[0].data, NULL, NULL, out->data, NULL, NULL};
  run_rows(&job, (int64_t)cr_element_count(shape), 8.0, num_threads);
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(leaky_relu_run, leaky_relu_compute)

/* ---- the families ------------------------------------------------------ */

const cr_op_impl cr_impl_activation = {
    .parse = activation_parse, .num_inputs = cr_one_input, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = cr_same_shape_infer, .run = activation_run};
const cr_op_impl cr_impl_batch_norm = {
    .parse = batch_norm_parse, .num_inputs = batch_norm_num_inputs,
    .num_outputs = batch_norm_num_outputs, .check_dtypes = batch_norm_dtypes,
    .infer_shape = batch_norm_infer, .run = batch_norm_run};
const cr_op_impl cr_impl_layer_norm = {
    .parse = layer_norm_parse, .num_inputs = cr_three_inputs,
    .num_outputs = layer_norm_num_outputs,
    .check_dtypes = cr_dtypes_float, .infer_shape = layer_norm_infer, .run = layer_norm_run};
const cr_op_impl cr_impl_instance_norm = {
    .parse = instance_norm_parse, .num_inputs = cr_three_inputs, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = instance_norm_infer,
    .run = instance_norm_run};
const cr_op_impl cr_impl_leaky_relu = {
    .parse = leaky_relu_parse, .num_inputs = leaky_relu_num_inputs, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = leaky_relu_infer, .run = leaky_relu_run};
const cr_op_impl cr_impl_softmax = {
    .parse = softmax_parse, .num_inputs = cr_one_input, .num_outputs = cr_one_output,
    .check_dtypes = softmax_dtypes, .infer_shape = softmax_infer, .run = softmax_run};
const cr_op_impl cr_impl_softmax_output = {
    .parse = softmax_output_parse, .num_inputs = cr_two_inputs, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = softmax_output_infer,
    .run = softmax_output_run};
const cr_op_impl cr_impl_softmax_activation = {
    .parse = softmax_activation_parse, .num_inputs = cr_one_input, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = softmax_activation_infer,
    .run = softmax_activation_run};
