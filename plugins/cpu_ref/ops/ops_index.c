/*
 * Indexing and searching operators of cpu_ref: take, where, argmax and
 * argmin, topk.
 *
 * take and where only move elements and run every dtype, with indices and
 * conditions of any dtype; argmax, argmin and topk compare values in
 * float32 (float16 data widened, see cr_run_float32).
 *
 * Each section parses its operator's attributes with the registry's
 * defaults, checks the input shapes and infers the outputs', and calls the
 * kernel; the table in ops.c lists them.
 */
#include <string.h>

#include "attrs.h"
#include "op_impl.h"
#include "status.h"
#include "tensor.h"

/* An optional axis attribute: "None" leaves *has_axis 0. */
static int parse_optional_axis(const char *key, const char *value, int *axis, int *has_axis) {
  *has_axis = !acc_attr_is_none(value);
  return *has_axis ? cr_parse_axis(key, value, axis) : MX_ACC_OK;
}

/* ---- take ------------------------------------------------------------------ */

static int take_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  params->u.take.axis = 0;
  params->u.take.mode = CR_TAKE_CLIP;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK;
    if (strcmp(key, "axis") == 0) {
      status = cr_parse_axis(key, value, &params->u.take.axis);
    } else if (strcmp(key, "mode") == 0) {
      if (acc_attr_equals(value, "clip")) params->u.take.mode = CR_TAKE_CLIP;
      else if (acc_attr_equals(value, "wrap")) params->u.take.mode = CR_TAKE_WRAP;
      else if (acc_attr_equals(value, "raise")) params->u.take.mode = CR_TAKE_RAISE;
      else status = cr_bad_attr(key, value, "raise, wrap or clip");
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* The output is the data's shape with the axis replaced by the indices'
 * shape. Nothing can be taken from an empty axis (except no indices at all
 * with mode "clip", as numpy has it). */
static int take_infer(const cr_params *params, const acc_shape *in, int num_in,
                      acc_shape *out) {
  (void)num_in;
  const acc_shape *data = &in[0], *indices = &in[1];
  int axis = 0;
  int status = cr_resolve_axis(params->u.take.axis, data->ndim, &axis);
  if (status != MX_ACC_OK) return status;
  if (data->dims[axis] == 0 &&
      (params->u.take.mode != CR_TAKE_CLIP || cr_element_count(indices) > 0)) {
    return cr_shape_error("cannot take from an empty axis of data shape %s", data);
  }
  if (data->ndim - 1 + indices->ndim > MX_ACC_MAX_NDIM) {
    return cr_shape_error("taking with indices of shape %s makes too many dimensions", indices);
  }
  out->ndim = 0;
  for (int d = 0; d < axis; ++d) out->dims[out->ndim++] = data->dims[d];
  for (int d = 0; d < indices->ndim; ++d) out->dims[out->ndim++] = indices->dims[d];
  for (int d = axis + 1; d < data->ndim; ++d) out->dims[out->ndim++] = data->dims[d];
  return MX_ACC_OK;
}

static int take_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *data = &in[0].shape;
  int axis = 0;
  cr_resolve_axis(params->u.take.axis, data->ndim, &axis); /* checked at infer */
  const size_t size = cr_in_size(params, 0);
  if (cr_take(params->u.take.mode, cr_product(data, 0, axis), (int64_t)data->dims[axis],
              cr_product(data, axis + 1, data->ndim), size, in[0].data,
              cr_element_count(&in[1].shape), cr_in_dtype(params, 1), in[1].data,
              out->data) != 0) {
    /* The output is left all zeros rather than unwritten. */
    const unsigned char zero[8] = {0};
    cr_fill_elements(cr_element_count(&out->shape), size, zero, out->data);
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "take: an index is out of range [-%lld, %lld) with "
                    "mode \"raise\"", (long long)data->dims[axis], (long long)data->dims[axis]);
  }
  return MX_ACC_OK;
}

/* ---- where ----------------------------------------------------------------- */

/* x, y and the output share a dtype, any; the condition may have any. */
static int where_dtypes(const cr_params *params) {
  int status = cr_dtype_expect("input", 2, params->in_dtypes[2], params->in_dtypes[1]);
  if (status == MX_ACC_OK) {
    status = cr_dtype_expect("output", 0, params->out_dtypes[0], params->in_dtypes[1]);
  }
  return status;
}

/* 1 when the condition is a vector selecting whole rows of x (rather than
 * x's own shape). */
static int where_by_rows(const acc_shape *condition, const acc_shape *x) {
  return !acc_shape_equal(condition, x);
}

static int where_infer(const cr_params *params, const acc_shape *in, int num_in,
                       acc_shape *out) {
  (void)params;
  (void)num_in;
  const acc_shape *condition = &in[0], *x = &in[1];
  if (!acc_shape_equal(x, &in[2])) return cr_shape_error("y shape %s differs from x's", &in[2]);
  if (where_by_rows(condition, x) &&
      !(condition->ndim == 1 && x->ndim >= 1 && condition->dims[0] == x->dims[0])) {
    return cr_shape_error("condition shape %s is neither x's nor a vector over its rows",
                          condition);
  }
  *out = *x;
  return MX_ACC_OK;
}

static int where_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[1].shape;
  const int64_t count = cr_element_count(x);
  const int by_rows = where_by_rows(&in[0].shape, x);
  /* One row of every element, or x's rows each with one condition. */
  const int64_t rows = by_rows ? (int64_t)x->dims[0] : 1;
  const int64_t inner = by_rows ? cr_product(x, 1, x->ndim) : count;
  cr_where(rows, inner, cr_in_dtype(params, 0), in[0].data, by_rows ? 1 : 0, by_rows ? 0 : 1,
           cr_in_size(params, 1), in[1].data, in[2].data, out->data);
  return MX_ACC_OK;
}

/* ---- argmax, argmin ------------------------------------------------------------ */

static int arg_search_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status;
    if (strcmp(key, "axis") == 0) {
      status = parse_optional_axis(key, value, &params->u.search.axis, &params->u.search.has_axis);
    } else if (strcmp(key, "keepdims") == 0) {
      status = cr_parse_bool(key, value, &params->u.search.keepdims);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* 1 when the search runs over the flattened input: without axis, and for
 * data of at most one dimension (whose one axis is the whole). */
static int searches_flattened(const cr_params *params, const acc_shape *data) {
  return !params->u.search.has_axis || data->ndim <= 1;
}

/* MXNet's rule: over the flattened input the result is (1,), or all 1s of
 * the input's rank with keepdims; along an axis the axis is removed (kept
 * as 1 with keepdims). */
static int arg_search_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  (void)num_in;
  const acc_shape *data = &in[0];
  const int keep = params->u.search.keepdims;
  int axis = 0;
  if (params->u.search.has_axis) {
    int status = cr_resolve_axis(params->u.search.axis, data->ndim > 1 ? data->ndim : 1, &axis);
    if (status != MX_ACC_OK) return status;
  }
  if (cr_element_count(data) == 0) return cr_shape_error("cannot search the empty shape %s", data);
  if (searches_flattened(params, data) && !(params->u.search.has_axis && data->ndim == 0)) {
    out->ndim = keep ? data->ndim : 1;
    for (int d = 0; d < out->ndim; ++d) out->dims[d] = 1;
    return MX_ACC_OK;
  }
  /* Along an axis (also the single axis of a 0-d input). */
  out->ndim = 0;
  for (int d = 0; d < data->ndim; ++d) {
    if (d != axis) out->dims[out->ndim++] = data->dims[d];
    else if (keep) out->dims[out->ndim++] = 1;
  }
  if (data->ndim == 0 && keep) {
    out->ndim = 1;
    out->dims[0] = 1;
  }
  return MX_ACC_OK;
}

/* The position comes out as a value of the data's dtype. */
static int arg_search_compute(const cr_params *params, const cr_tensor *in, int num_in,
                              const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *data = &in[0].shape;
  int axis = 0;
  int64_t outer = 1, length = cr_element_count(data), inner = 1;
  if (!searches_flattened(params, data)) {
    cr_resolve_axis(params->u.search.axis, data->ndim, &axis); /* checked at infer */
    outer = cr_product(data, 0, axis);
    length = (int64_t)data->dims[axis];
    inner = cr_product(data, axis + 1, data->ndim);
  }
  cr_arg_search(params->variant, outer, length, inner, in[0].data, out->data);
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(arg_search_run, arg_search_compute)

/* ---- topk -------------------------------------------------------------------- */

static int topk_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  params->u.topk.axis = -1;
  params->u.topk.has_axis = 1;
  params->u.topk.k = 1;
  params->u.topk.ret_typ = CR_TOPK_INDICES;
  params->u.topk.dtype = kFloat32;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK;
    if (strcmp(key, "axis") == 0) {
      status = parse_optional_axis(key, value, &params->u.topk.axis, &params->u.topk.has_axis);
    } else if (strcmp(key, "k") == 0) {
      status = cr_parse_int(key, value, &params->u.topk.k);
    } else if (strcmp(key, "ret_typ") == 0) {
      if (acc_attr_equals(value, "indices")) params->u.topk.ret_typ = CR_TOPK_INDICES;
      else if (acc_attr_equals(value, "value")) params->u.topk.ret_typ = CR_TOPK_VALUE;
      else if (acc_attr_equals(value, "mask")) params->u.topk.ret_typ = CR_TOPK_MASK;
      else if (acc_attr_equals(value, "both")) params->u.topk.ret_typ = CR_TOPK_BOTH;
      else status = cr_bad_attr(key, value, "value, indices, mask or both");
    } else if (strcmp(key, "is_ascend") == 0) {
      status = cr_parse_bool(key, value, &params->u.topk.ascending);
    } else if (strcmp(key, "dtype") == 0) {
      status = cr_parse_dtype(key, value, 0, &params->u.topk.dtype);
      if (status == MX_ACC_OK && (params->u.topk.dtype == kInt8)) {
        status = cr_bad_attr(key, value, "uint8, int32, int64, float16, float32 or float64");
      }
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* "both" shows the values and the indices; "value" keeps the indices as a
 * hidden output. */
static int topk_outputs(const cr_params *params) {
  return params->u.topk.ret_typ == CR_TOPK_BOTH ? 2 : 1;
}

/* The dtype of output k: the indices' for "indices" (and the second of
 * "both"), the data's otherwise. */
static int32_t topk_output_dtype(const cr_params *params, int k) {
  const int indices = params->u.topk.ret_typ == CR_TOPK_INDICES ||
                      (params->u.topk.ret_typ == CR_TOPK_BOTH && k == 1);
  return indices ? params->u.topk.dtype : params->in_dtypes[0];
}

static int topk_dtypes(const cr_params *params) {
  int status = cr_dtype_allowed("input", 0, params->in_dtypes[0], CR_DTYPES_FLOAT, "topk",
                                "float32 and float16");
  for (int k = 0; k < params->num_outputs && status == MX_ACC_OK; ++k) {
    status = cr_dtype_expect("output", k, params->out_dtypes[k], topk_output_dtype(params, k));
  }
  return status;
}

/* The searched axis as (outer, length, inner): the flattened input without
 * axis. */
static int topk_layout(const cr_params *params, const acc_shape *data, int *axis, int64_t *outer,
                       int64_t *length, int64_t *inner) {
  *axis = -1;
  *outer = *inner = 1;
  *length = cr_element_count(data);
  if (!params->u.topk.has_axis) return MX_ACC_OK;
  int status = cr_resolve_axis(params->u.topk.axis, data->ndim, axis);
  if (status != MX_ACC_OK) return status;
  *outer = cr_product(data, 0, *axis);
  *length = (int64_t)data->dims[*axis];
  *inner = cr_product(data, *axis + 1, data->ndim);
  return MX_ACC_OK;
}

/* k < 1 asks for the whole axis. */
static int64_t topk_count(const cr_params *params, int64_t length) {
  return params->u.topk.k >= 1 ? params->u.topk.k : length;
}

/* The largest integer each index dtype holds exactly. */
static int64_t index_limit(int32_t dtype) {
  switch (dtype) {
    case kUint8:
      return 255;
    case kInt32:
      return INT32_MAX;
    case kFloat16:
      return 2048;
    case kFloat32:
      return 16777216;
    case kFloat64:
      return INT64_C(9007199254740992);
    default:
      return INT64_MAX;
  }
}

static int topk_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)num_in;
  const acc_shape *data = &in[0];
  int axis;
  int64_t outer, length, inner;
  int status = topk_layout(params, data, &axis, &outer, &length, &inner);
  if (status != MX_ACC_OK) return status;
  const int64_t k = topk_count(params, length);
  if (k < 1 || k > length) return cr_shape_error("k is out of range for data shape %s", data);
  const int ret = params->u.topk.ret_typ;
  const int with_indices = ret == CR_TOPK_INDICES || ret == CR_TOPK_BOTH;
  if (with_indices && length > index_limit(params->u.topk.dtype)) {
    return cr_shape_error("the index dtype cannot hold the positions of data shape %s", data);
  }
  if (ret == CR_TOPK_MASK) {
    out[0] = *data;
    return MX_ACC_OK;
  }
  acc_shape part = *data;
  if (axis < 0) {
    part.ndim = 1;
    part.dims[0] = (uint64_t)k;
  } else {
    part.dims[axis] = (uint64_t)k;
  }
  for (int i = 0; i < topk_outputs(params); ++i) out[i] = part;
  return MX_ACC_OK;
}

static int topk_compute(const cr_params *params, const cr_tensor *in, int num_in,
                        const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int axis;
  int64_t outer, length, inner;
  topk_layout(params, &in[0].shape, &axis, &outer, &length, &inner); /* checked at infer */
  const int ret = params->u.topk.ret_typ;
  float *values = ret == CR_TOPK_VALUE || ret == CR_TOPK_BOTH ? out[0].data : NULL;
  float *mask = ret == CR_TOPK_MASK ? out[0].data : NULL;
  void *indices = ret == CR_TOPK_INDICES ? out[0].data : ret == CR_TOPK_BOTH ? out[1].data : NULL;
  /* float16 indices arrive as a widened float32 buffer. */
  const cr_dtype index_dtype =
      params->u.topk.dtype == kFloat16 ? CR_FLOAT32 : (cr_dtype)params->u.topk.dtype;
  if (cr_topk(outer, length, inner, topk_count(params, length), params->u.topk.ascending,
              in[0].data, values, index_dtype, indices, mask) != 0) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "topk: cannot allocate scratch for %lld positions",
                    (long long)length);
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(topk_run, topk_compute)

/* ---- the families ------------------------------------------------------------ */

const cr_op_impl cr_impl_take = {.parse = take_parse, .num_inputs = cr_two_inputs,
                                 .num_outputs = cr_one_output,
                                 .check_dtypes = cr_dtypes_first_any, .infer_shape = take_infer,
                                 .run = take_run};
const cr_op_impl cr_impl_where = {.parse = cr_no_attrs_parse, .num_inputs = cr_three_inputs,
                                  .num_outputs = cr_one_output, .check_dtypes = where_dtypes,
                                  .infer_shape = where_infer, .run = where_run};
const cr_op_impl cr_impl_arg_search = {.parse = arg_search_parse, .num_inputs = cr_one_input,
                                       .num_outputs = cr_one_output,
                                       .check_dtypes = cr_dtypes_float,
                                       .infer_shape = arg_search_infer, .run = arg_search_run};
const cr_op_impl cr_impl_topk = {.parse = topk_parse, .num_inputs = cr_one_input,
                                 .num_outputs = topk_outputs, .check_dtypes = topk_dtypes,
                                 .infer_shape = topk_infer, .run = topk_run};
