/*
 * Shape operators of cpu_ref: shape changes, copies and conversions (Cast),
 * transposition, joining (Concat, stack), splitting and slicing
 * (slice_axis, slice, slice_like). Replication and padding are in
 * ops_replicate.c.
 *
 * Each section parses its operator's attributes with the registry's
 * defaults, checks the input shapes and infers the outputs', and calls the
 * kernel; the table in ops.c lists them. Operators that only change the
 * shape (Reshape, Flatten, expand_dims, squeeze, identity) all copy the data
 * unchanged, since tensors are compact and row-major. All of them move
 * elements by their size, so they run every dtype; Cast converts.
 */
#include <string.h>

#include "attrs.h"
#include "op_impl.h"
#include "status.h"
#include "tensor.h"

/* ---- Flatten ----------------------------------------------------------- */

static int flatten_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)params;
  (void)num_in;
  if (in[0].ndim < 1) return cr_shape_error("cannot flatten a scalar of shape %s", &in[0]);
  out->ndim = 2;
  out->dims[0] = in[0].dims[0];
  out->dims[1] = (uint64_t)cr_product(&in[0], 1, in[0].ndim);
  return MX_ACC_OK;
}

/* ---- Reshape ----------------------------------------------------------- */

/*
 * The shape is worked out from the attributes exactly as MXNet does (and
 * the registry, which the tests compare against), not taken from the
 * annotated output: the annotation is checked against it, like every
 * operator's. The codes of "shape":
 *    n > 0  the extent n (consuming one input dimension)
 *    0      copy one input dimension
 *   -1      the one extent inferred from the element count
 *   -2      copy all remaining input dimensions
 *   -3      the product of the next two input dimensions
 *   -4 a b  split one input dimension into a and b (one of them may be -1)
 * With reverse, both the input shape and the codes are read from the right.
 * The legacy "target_shape" (0 marking the inferred extent, keep_highest
 * keeping the first input dimension) is used when "shape" is empty.
 */

static int reshape_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK;
    if (strcmp(key, "shape") == 0 || strcmp(key, "target_shape") == 0) {
      int legacy = key[0] == 't';
      int64_t *codes = legacy ? params->u.reshape.target_shape : params->u.reshape.shape;
      int *length = legacy ? &params->u.reshape.target_shape_len : &params->u.reshape.shape_len;
      if (acc_attr_int_tuple(value, codes, CR_MAX_SHAPE_CODES, length) != 0) {
        status = cr_bad_attr(key, value, "a tuple of at most 32 integers");
      }
    } else if (strcmp(key, "reverse") == 0) {
      status = cr_parse_bool(key, value, &params->u.reshape.reverse);
    } else if (strcmp(key, "keep_highest") == 0) {
      status = cr_parse_bool(key, value, &params->u.reshape.keep_highest);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* A shape being built, with room for every extent the codes can produce
 * before the count is checked against MX_ACC_MAX_NDIM. */
typedef struct reshape_out {
  uint64_t dims[CR_MAX_SHAPE_CODES + MX_ACC_MAX_NDIM];
  int ndim;
} reshape_out;

static int code_error(const char *message, int64_t code) {
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "shape code %lld: %s", (long long)code, message);
}

/* -4's two values a and b for input extent whole. */
static int split_extent(uint64_t whole, int64_t a, int64_t b, reshape_out *out) {
  if (a == -1 && b == -1) return code_error("the two values after it cannot both be -1", -4);
  if (a == -1 && b > 0) a = (int64_t)(whole / (uint64_t)b);
  if (b == -1 && a > 0) b = (int64_t)(whole / (uint64_t)a);
  uint64_t product;
  if (a <= 0 || b <= 0 ||
      cr_checked_mul((uint64_t)a, (uint64_t)b, "split", &product) != MX_ACC_OK ||
      product != whole) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "shape code -4: (%lld, %lld) does not split %llu",
                    (long long)a, (long long)b, (unsigned long long)whole);
  }
  out->dims[out->ndim++] = (uint64_t)a;
  out->dims[out->ndim++] = (uint64_t)b;
  return MX_ACC_OK;
}

static int apply_shape_codes(const int64_t *codes, int num_codes, const uint64_t *source,
                             int num_source, uint64_t size, reshape_out *out) {
  int src = 0, infer_at = -1;
  out->ndim = 0;
  for (int i = 0; i < num_codes; ++i) {
    int64_t code = codes[i];
    /* -1 and positive extents consume an input dimension without reading
     * it, so src may pass num_source; codes that read check it first. */
    int needs = code == 0 ? 1 : code == -3 ? 2 : code == -4 ? 1 : 0;
    if (needs > 0 && src + needs > num_source) {
      return code_error("no input dimension is left for it", code);
    }
    if (code == 0) {
      out->dims[out->ndim++] = source[src++];
    } else if (code == -1) {
      if (infer_at >= 0) return code_error("appears more than once", code);
      infer_at = out->ndim;
      out->dims[out->ndim++] = 1;
      ++src;
    } else if (code == -2) {
      while (src < num_source) out->dims[out->ndim++] = source[src++];
      src = num_source;
    } else if (code == -3) {
      int status = cr_checked_mul(source[src], source[src + 1], "-3 product",
                                  &out->dims[out->ndim]);
      if (status != MX_ACC_OK) return status;
      out->ndim += 1;
      src += 2;
    } else if (code == -4) {
      if (i + 2 >= num_codes) return code_error("needs two values after it", code);
      int status = split_extent(source[src++], codes[i + 1], codes[i + 2], out);
      if (status != MX_ACC_OK) return status;
      i += 2;
    } else if (code > 0) {
      out->dims[out->ndim++] = (uint64_t)code;
      ++src;
    } else {
      return code_error("is not a valid code", code);
    }
  }
  if (infer_at >= 0) {
    uint64_t rest = 1;
    for (int d = 0; d < out->ndim; ++d) {
      int status = cr_checked_mul(rest, out->dims[d], "shape", &rest);
      if (status != MX_ACC_OK) return status;
    }
    if (rest == 0) return code_error("cannot be inferred next to a 0 extent", -1);
    out->dims[infer_at] = size / rest;
  }
  return MX_ACC_OK;
}

static int legacy_target_shape(const cr_params *params, const acc_shape *in, uint64_t size,
                               reshape_out *out) {
  const int64_t *target = params->u.reshape.target_shape;
  int length = params->u.reshape.target_shape_len, keep = params->u.reshape.keep_highest;
  if (keep && in->ndim == 0) {
    return cr_shape_error("keep_highest needs a dimension; data is %s", in);
  }
  out->ndim = length;
  int zeros = 0, zero_at = -1;
  for (int d = 0; d < length; ++d) {
    int kept = d == 0 && keep; /* keep_highest overrides whatever target_shape[0] is */
    if (!kept && target[d] < 0) return code_error("is not valid in target_shape", target[d]);
    out->dims[d] = kept ? in->dims[0] : (uint64_t)target[d];
    if (d >= keep && out->dims[d] == 0) {
      ++zeros;
      zero_at = d;
    }
  }
  if (zeros == 1) {
    uint64_t rest = 1;
    out->dims[zero_at] = 1;
    for (int d = 0; d < length; ++d) {
      int status = cr_checked_mul(rest, out->dims[d], "target_shape", &rest);
      if (status != MX_ACC_OK) return status;
    }
    out->dims[zero_at] = size / (rest > 0 ? rest : 1); /* a kept 0 extent: as MXNet */
  }
  return MX_ACC_OK;
}

static int reshape_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *result) {
  (void)num_in;
  const uint64_t size = (uint64_t)cr_element_count(&in[0]);
  /* reverse applies to the codes of "shape" only, not to target_shape. */
  const int reverse = params->u.reshape.reverse && params->u.reshape.shape_len > 0;
  reshape_out out;
  int status;
  if (params->u.reshape.shape_len > 0) {
    int64_t codes[CR_MAX_SHAPE_CODES];
    uint64_t source[MX_ACC_MAX_NDIM];
    int num_codes = params->u.reshape.shape_len, n = in[0].ndim;
    for (int i = 0; i < num_codes; ++i) {
      codes[i] = params->u.reshape.shape[reverse ? num_codes - 1 - i : i];
    }
    for (int i = 0; i < n; ++i) source[i] = in[0].dims[reverse ? n - 1 - i : i];
    status = apply_shape_codes(codes, num_codes, source, n, size, &out);
  } else if (params->u.reshape.target_shape_len > 0) {
    status = legacy_target_shape(params, &in[0], size, &out);
  } else {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "the target shape is empty (give shape)");
  }
  if (status != MX_ACC_OK) return status;
  if (out.ndim > MX_ACC_MAX_NDIM) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "the result would have %d dimensions", out.ndim);
  }
  uint64_t count = 1;
  int too_large = 0;
  for (int d = 0; d < out.ndim && !too_large; ++d) {
    too_large = cr_checked_mul(count, out.dims[d], "shape", &count) != MX_ACC_OK;
  }
  result->ndim = out.ndim;
  for (int d = 0; d < out.ndim; ++d) {
    result->dims[d] = out.dims[reverse ? out.ndim - 1 - d : d];
  }
  if (too_large || count != size) {
    return cr_shape_error("the attributes give shape %s, whose element count differs from the "
                          "input's", result);
  }
  return MX_ACC_OK;
}

/* ---- expand_dims, squeeze ---------------------------------------------- */

static int expand_dims_parse(const char *const *keys, const char *const *vals, size_t count,
                             cr_params *params) {
  int given = 0;
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(keys[i], "axis") != 0) return cr_unknown_attr(keys[i]);
    int status = cr_parse_axis(keys[i], vals[i], &params->u.axis);
    if (status != MX_ACC_OK) return status;
    given = 1;
  }
  return given ? MX_ACC_OK : acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute axis is required");
}

static int expand_dims_infer(const cr_params *params, const acc_shape *in, int num_in,
                             acc_shape *out) {
  (void)num_in;
  int ndim = in[0].ndim, axis = params->u.axis;
  if (ndim >= MX_ACC_MAX_NDIM) return cr_shape_error("data shape %s has no room for an axis", in);
  if (axis < -ndim - 1 || axis > ndim) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "axis %d is out of range [%d, %d]", axis, -ndim - 1,
                    ndim);
  }
  int at = axis < 0 ? axis + ndim + 1 : axis;
  out->ndim = ndim + 1;
  for (int d = 0, from = 0; d < out->ndim; ++d) out->dims[d] = d == at ? 1 : in[0].dims[from++];
  return MX_ACC_OK;
}

static int squeeze_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(keys[i], "axis") != 0) return cr_unknown_attr(keys[i]);
    int status = cr_parse_axes(keys[i], vals[i], &params->u.axes);
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int squeeze_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)num_in;
  const cr_axes *axes = &params->u.axes;
  unsigned char drop[CR_MAX_NDIM] = {0};
  for (int d = 0; d < in[0].ndim; ++d) drop[d] = !axes->given && in[0].dims[d] == 1;
  for (int i = 0; axes->given && i < axes->count; ++i) {
    int d;
    int status = cr_resolve_axis(axes->values[i], in[0].ndim, &d);
    if (status != MX_ACC_OK) return status;
    if (in[0].dims[d] != 1) return cr_shape_error("an axis to squeeze is not 1 in %s", in);
    if (drop[d]) return acc_fail(MX_ACC_ERR_INVALID_ARG, "axis %d is given twice", d);
    drop[d] = 1;
  }
  out->ndim = 0;
  for (int d = 0; d < in[0].ndim; ++d) {
    if (!drop[d]) out->dims[out->ndim++] = in[0].dims[d];
  }
  if (out->ndim == 0) { /* MXNet never makes 0-d arrays */
    out->ndim = 1;
    out->dims[0] = 1;
  }
  return MX_ACC_OK;
}

/* ---- transpose --------------------------------------------------------- */

/* Variant 1 is SwapAxis: attributes dim1 and dim2 (default 0), kept as
 * the two entries of u.axes; the permutation swaps them. */
static int swap_axis_parse(const char *const *keys, const char *const *vals, size_t count,
                           cr_params *params) {
  params->u.axes.given = 1;
  params->u.axes.count = 2;
  params->u.axes.values[0] = params->u.axes.values[1] = 0;
  for (size_t i = 0; i < count; ++i) {
    int which = strcmp(keys[i], "dim1") == 0 ? 0 : strcmp(keys[i], "dim2") == 0 ? 1 : -1;
    if (which < 0) return cr_unknown_attr(keys[i]);
    int axis = 0;
    int status = cr_parse_axis(keys[i], vals[i], &axis);
    if (status != MX_ACC_OK) return status;
    params->u.axes.values[which] = axis;
  }
  return MX_ACC_OK;
}

static int transpose_parse(const char *const *keys, const char *const *vals, size_t count,
                           cr_params *params) {
  if (params->variant == 1) return swap_axis_parse(keys, vals, count, params);
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(keys[i], "axes") != 0) return cr_unknown_attr(keys[i]);
    int status = cr_parse_axes(keys[i], vals[i], &params->u.axes);
    if (status == MX_ACC_OK && !params->u.axes.given) {
      status = cr_bad_attr(keys[i], vals[i], "a tuple of axes");
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* Output axis d reads input axis from[d]: axes, or the reversed axes when
 * axes is empty. */
static int transpose_axes(const cr_params *params, const acc_shape *in, int from[CR_MAX_NDIM]) {
  const cr_axes *axes = &params->u.axes;
  int ndim = in->ndim;
  if (ndim > 6) return cr_shape_error("transpose supports at most 6 dimensions, not %s", in);
  if (params->variant == 1) {
    int first = 0, second = 0;
    if (cr_resolve_axis(axes->values[0], ndim, &first) != MX_ACC_OK ||
        cr_resolve_axis(axes->values[1], ndim, &second) != MX_ACC_OK) {
      return cr_shape_error("SwapAxis: dim1 or dim2 is not an axis of %s", in);
    }
    for (int d = 0; d < ndim; ++d) from[d] = d;
    from[first] = second;
    from[second] = first;
    return MX_ACC_OK;
  }
  if (axes->count == 0) {
    for (int d = 0; d < ndim; ++d) from[d] = ndim - 1 - d;
    return MX_ACC_OK;
  }
  unsigned char seen[CR_MAX_NDIM] = {0};
  int ok = axes->count == ndim;
  for (int d = 0; ok && d < ndim; ++d) {
    int64_t axis = axes->values[d];
    ok = axis >= 0 && axis < ndim && !seen[axis];
    if (ok) {
      seen[axis] = 1;
      from[d] = (int)axis;
    }
  }
  return ok ? MX_ACC_OK : cr_shape_error("axes is not a permutation of the axes of %s", in);
}

static int transpose_infer(const cr_params *params, const acc_shape *in, int num_in,
                           acc_shape *out) {
  (void)num_in;
  int from[CR_MAX_NDIM];
  int status = transpose_axes(params, &in[0], from);
  if (status != MX_ACC_OK) return status;
  out->ndim = in[0].ndim;
  for (int d = 0; d < out->ndim; ++d) out->dims[d] = in[0].dims[from[d]];
  return MX_ACC_OK;
}

static int transpose_run(const cr_params *params, const cr_tensor *in, int num_in,
                         const cr_tensor *out, int num_threads) {
  (void)num_in;
  int from[CR_MAX_NDIM];
  int64_t dims[CR_MAX_NDIM], in_strides[CR_MAX_NDIM], strides[CR_MAX_NDIM];
  transpose_axes(params, &in[0].shape, from); /* checked at infer */
  cr_compact_strides(&in[0].shape, in_strides);
  int ndim = cr_view_dims(&out->shape, dims);
  for (int d = 0; d < ndim; ++d) strides[d] = out->shape.ndim > 0 ? in_strides[from[d]] : 1;
  if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_copy_strided(ndim, dims, strides, cr_in_size(params, 0), in[0].data, out->data);
  } else {
    cr_copy_strided_shared(ndim, dims, strides, cr_in_size(params, 0), in[0].data, out->data,
                           num_threads);
  }
  return MX_ACC_OK;
}

/* ---- Concat, stack, SliceChannel, slice_axis ---------------------------- */

/* All four copy blocks between tensors viewed as (outer, extent along the
 * axis * inner), inner being the elements after the axis (stack's new axis
 * has extent 1 in each input). */

static int concat_parse(const char *const *keys, const char *const *vals, size_t count,
                        cr_params *params) {
  params->u.concat.axis = 1;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status;
    if (strcmp(key, "num_args") == 0) {
      status = cr_parse_count(key, value, CR_MAX_INPUTS, &params->u.concat.num_args);
    } else if (strcmp(key, "dim") == 0) {
      status = cr_parse_axis(key, value, &params->u.concat.axis);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return cr_require_count("num_args", params->u.concat.num_args);
}

static int concat_inputs(const cr_params *params) { return params->u.concat.num_args; }

static int concat_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out) {
  int axis = 0;
  if (in[0].ndim == 0) return cr_shape_error("cannot concatenate 0-d arrays like %s", &in[0]);
  int status = cr_resolve_axis(params->u.concat.axis, in[0].ndim, &axis);
  if (status != MX_ACC_OK) return status;
  *out = in[0];
  for (int i = 1; i < num_in; ++i) {
    int same = in[i].ndim == in[0].ndim;
    for (int d = 0; same && d < in[0].ndim; ++d) same = d == axis || in[i].dims[d] == in[0].dims[d];
    if (!same) return cr_shape_error("input shape %s differs from the first outside dim", &in[i]);
    if (in[i].dims[axis] > cr_max_elements() - out->dims[axis]) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "the concatenation is too large");
    }
    out->dims[axis] += in[i].dims[axis];
  }
  return MX_ACC_OK;
}

/* Joins the inputs along axis of the output: input i supplies extent(i)
 * consecutive entries of the axis. */
static void join_along(const cr_params *params, int axis, const cr_tensor *in, int num_in,
                       const cr_tensor *out, int64_t (*extent)(const cr_tensor *, int)) {
  const size_t size = cr_out_size(params, 0);
  const int64_t outer = cr_product(&out->shape, 0, axis);
  const int64_t inner = cr_product(&out->shape, axis + 1, out->shape.ndim);
  const int64_t out_width = (int64_t)out->shape.dims[axis] * inner;
  int64_t offset = 0;
  unsigned char *y = out->data;
  for (int i = 0; i < num_in; ++i) {
    const int64_t width = extent(&in[i], axis) * inner;
    cr_copy_rows(outer, width, size, in[i].data, width, y + (size_t)offset * size, out_width);
    offset += width;
  }
}

static int64_t extent_along(const cr_tensor *tensor, int axis) {
  return (int64_t)tensor->shape.dims[axis];
}

static int concat_run(const cr_params *params, const cr_tensor *in, int num_in,
                      const cr_tensor *out, int num_threads) {
  (void)num_threads;
  int axis = 0;
  cr_resolve_axis(params->u.concat.axis, out->shape.ndim, &axis); /* checked at infer */
  join_along(params, axis, in, num_in, out, extent_along);
  return MX_ACC_OK;
}

/* stack: num_args arrays of one shape joined along a new axis (default 0). */
static int stack_parse(const char *const *keys, const char *const *vals, size_t count,
                       cr_params *params) {
  params->u.concat.axis = 0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status;
    if (strcmp(key, "num_args") == 0) {
      status = cr_parse_count(key, value, CR_MAX_INPUTS, &params->u.concat.num_args);
    } else if (strcmp(key, "axis") == 0) {
      status = cr_parse_axis(key, value, &params->u.concat.axis);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return cr_require_count("num_args", params->u.concat.num_args);
}

static int stack_infer(const cr_params *params, const acc_shape *in, int num_in,
                       acc_shape *out) {
  for (int i = 1; i < num_in; ++i) {
    if (!acc_shape_equal(&in[0], &in[i])) {
      return cr_shape_error("input shape %s differs from the first", &in[i]);
    }
  }
  if (in[0].ndim >= MX_ACC_MAX_NDIM) {
    return cr_shape_error("input shape %s leaves no room for the new axis", &in[0]);
  }
  int axis = 0;
  int status = cr_resolve_axis(params->u.concat.axis, in[0].ndim + 1, &axis);
  if (status != MX_ACC_OK) return status;
  out->ndim = in[0].ndim + 1;
  for (int d = 0, from = 0; d < out->ndim; ++d) {
    out->dims[d] = d == axis ? (uint64_t)num_in : in[0].dims[from++];
  }
  return MX_ACC_OK;
}

static int64_t extent_one(const cr_tensor *tensor, int axis) {
  (void)tensor;
  (void)axis;
  return 1;
}

static int stack_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)num_threads;
  int axis = 0;
  cr_resolve_axis(params->u.concat.axis, out->shape.ndim, &axis); /* checked at infer */
  join_along(params, axis, in, num_in, out, extent_one);
  return MX_ACC_OK;
}

static int split_parse(const char *const *keys, const char *const *vals, size_t count,
                       cr_params *params) {
  params->u.split.axis = 1;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status;
    if (strcmp(key, "num_outputs") == 0) {
      status = cr_parse_count(key, value, CR_MAX_OUTPUTS, &params->u.split.num_outputs);
    } else if (strcmp(key, "axis") == 0) {
      status = cr_parse_axis(key, value, &params->u.split.axis);
    } else if (strcmp(key, "squeeze_axis") == 0) {
      status = cr_parse_bool(key, value, &params->u.split.squeeze_axis);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return cr_require_count("num_outputs", params->u.split.num_outputs);
}

static int split_outputs(const cr_params *params) { return params->u.split.num_outputs; }

static int split_infer(const cr_params *params, const acc_shape *in, int num_in,
                       acc_shape *out) {
  (void)num_in;
  int axis = 0, parts = params->u.split.num_outputs;
  int status = cr_resolve_axis(params->u.split.axis, in[0].ndim, &axis);
  if (status != MX_ACC_OK) return status;
  uint64_t extent = in[0].dims[axis];
  if (extent % (uint64_t)parts != 0) {
    return cr_shape_error("the split axis of %s does not divide into num_outputs parts", in);
  }
  acc_shape part = in[0];
  if (params->u.split.squeeze_axis) {
    if (extent != (uint64_t)parts) {
      return cr_shape_error("squeeze_axis needs the split axis of %s to equal num_outputs", in);
    }
    part.ndim -= 1;
    for (int d = axis; d < part.ndim; ++d) part.dims[d] = in[0].dims[d + 1];
    if (part.ndim == 0) { /* MXNet never makes 0-d arrays */
      part.ndim = 1;
      part.dims[0] = 1;
    }
  } else {
    part.dims[axis] = extent / (uint64_t)parts;
  }
  for (int k = 0; k < parts; ++k) out[k] = part;
  return MX_ACC_OK;
}

static int split_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int axis = 0, parts = params->u.split.num_outputs;
  const acc_shape *shape = &in[0].shape;
  cr_resolve_axis(params->u.split.axis, shape->ndim, &axis); /* checked at infer */
  const int64_t outer = cr_product(shape, 0, axis);
  const int64_t in_width = cr_product(shape, axis, shape->ndim);
  const int64_t width = in_width / parts;
  const size_t size = cr_in_size(params, 0);
  const unsigned char *x = in[0].data;
  for (int k = 0; k < parts; ++k) {
    cr_copy_rows(outer, width, size, x + (size_t)(k * width) * size, in_width, out[k].data,
                 width);
  }
  return MX_ACC_OK;
}

static int slice_axis_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  int given = 0; /* bits: axis, begin, end */
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status;
    if (strcmp(key, "axis") == 0) {
      status = cr_parse_axis(key, value, &params->u.slice_axis.axis);
      given |= 1;
    } else if (strcmp(key, "begin") == 0) {
      status = cr_parse_int(key, value, &params->u.slice_axis.begin);
      given |= 2;
    } else if (strcmp(key, "end") == 0) {
      /* Required, but may be None: through the end of the axis. */
      params->u.slice_axis.has_end = !acc_attr_is_none(value);
      status = params->u.slice_axis.has_end
                   ? cr_parse_int(key, value, &params->u.slice_axis.end)
                   : MX_ACC_OK;
      given |= 4;
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  if (given != 7) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "attributes axis, begin and end are required");
  }
  return MX_ACC_OK;
}

/* The axis and the range [begin, end) it keeps, after MXNet's checks. */
static int slice_axis_range(const cr_params *params, const acc_shape *in, int *axis,
                            int64_t *begin, int64_t *end) {
  int status = cr_resolve_axis(params->u.slice_axis.axis, in->ndim, axis);
  if (status != MX_ACC_OK) return status;
  const int64_t size = (int64_t)in->dims[*axis];
  *begin = *end = 0;
  if (size == 0) return MX_ACC_OK;
  *begin = params->u.slice_axis.begin;
  if (*begin < 0) *begin += size;
  *end = params->u.slice_axis.has_end ? params->u.slice_axis.end : size;
  if (*end < 0) *end += size;
  if (*end > size || *begin < 0 || !(*begin < *end)) {
    return cr_shape_error("begin and end are not a non-empty range of the axis of %s", in);
  }
  return MX_ACC_OK;
}

static int slice_axis_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  (void)num_in;
  int axis;
  int64_t begin, end;
  int status = slice_axis_range(params, &in[0], &axis, &begin, &end);
  if (status != MX_ACC_OK) return status;
  *out = in[0];
  out->dims[axis] = (uint64_t)(end - begin);
  return MX_ACC_OK;
}

static int slice_axis_run(const cr_params *params, const cr_tensor *in, int num_in,
                          const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int axis = 0;
  int64_t begin = 0, end = 0;
  const acc_shape *shape = &in[0].shape;
  slice_axis_range(params, shape, &axis, &begin, &end); /* checked at infer */
  const int64_t outer = cr_product(shape, 0, axis);
  const int64_t inner = cr_product(shape, axis + 1, shape->ndim);
  const int64_t in_width = (int64_t)shape->dims[axis] * inner, width = (end - begin) * inner;
  const size_t size = cr_in_size(params, 0);
  const unsigned char *x = in[0].data;
  cr_copy_rows(outer, width, size, x + (size_t)(begin * inner) * size, in_width, out->data, width);
  return MX_ACC_OK;
}

/* ---- slice, slice_like -------------------------------------------------- */

/* Both gather a box of the input: along axis d, output index o reads input
 * index start[d] + o * step[d]. */
static int gather_box(const cr_params *params, const cr_tensor *in, const cr_tensor *out,
                      const int64_t *start, const int64_t *step) {
  int64_t dims[CR_MAX_NDIM], x_strides[CR_MAX_NDIM], y_strides[CR_MAX_NDIM];
  cr_axis_map maps[CR_MAX_NDIM];
  const int ndim = cr_view_dims(&out->shape, dims);
  cr_compact_strides(&in[0].shape, x_strides);
  cr_compact_strides(&out->shape, y_strides);
  if (out->shape.ndim == 0) x_strides[0] = y_strides[0] = 1;
  for (int d = 0; d < ndim; ++d) {
    const cr_axis_map map = {CR_MAP_STEP, start[d], step[d], 0};
    maps[d] = map;
  }
  cr_gather(ndim, dims, maps, x_strides, y_strides, cr_in_size(params, 0), in[0].data, NULL,
            out->data);
  return MX_ACC_OK;
}

static int slice_parse(const char *const *keys, const char *const *vals, size_t count,
                       cr_params *params) {
  int begin_count = -1, end_count = -1;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status;
    if (strcmp(key, "begin") == 0) {
      status = cr_parse_optional_tuple(key, value, params->u.slice.begin,
                                       params->u.slice.has_begin, CR_MAX_NDIM, &begin_count);
    } else if (strcmp(key, "end") == 0) {
      status = cr_parse_optional_tuple(key, value, params->u.slice.end, params->u.slice.has_end,
                                       CR_MAX_NDIM, &end_count);
    } else if (strcmp(key, "step") == 0) {
      status = cr_parse_optional_tuple(key, value, params->u.slice.step, params->u.slice.has_step,
                                       CR_MAX_NDIM, &params->u.slice.step_count);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  if (begin_count < 0 || end_count < 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "attributes begin and end are required");
  }
  if (begin_count != end_count) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "begin and end differ in length");
  }
  if (params->u.slice.step_count != 0 && params->u.slice.step_count != begin_count) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "step and begin differ in length");
  }
  for (int k = 0; k < params->u.slice.step_count; ++k) {
    if (params->u.slice.has_step[k] && params->u.slice.step[k] == 0) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "step[%d] cannot be 0", k);
    }
  }
  params->u.slice.count = begin_count;
  return MX_ACC_OK;
}

/* The start, step and extent of sliced axis k of length `length`, after
 * MXNet's checks: None begins at the first index (the last for a negative
 * step) and ends past the last (before the first); negative entries count
 * from the end; an empty or backwards range is refused. */
static int slice_range(const cr_params *params, int k, int64_t length, int64_t *start,
                       int64_t *step, int64_t *extent) {
  const int has_step = k < params->u.slice.step_count && params->u.slice.has_step[k];
  const int64_t s = has_step ? params->u.slice.step[k] : 1;
  *step = s;
  *start = 0;
  *extent = 0;
  if (length == 0) return MX_ACC_OK;
  int64_t b = params->u.slice.has_begin[k] ? params->u.slice.begin[k] : (s < 0 ? length - 1 : 0);
  int64_t e = params->u.slice.has_end[k] ? params->u.slice.end[k] : (s < 0 ? -1 : length);
  /* Attribute values are any int64_t: bring them near the axis before
   * adding the length, so that nothing overflows. */
  if (b < -length || b >= length) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "begin[%d] is out of range for an axis of %lld", k,
                    (long long)length);
  }
  if (b < 0) b += length;
  if (params->u.slice.has_end[k] && e < 0) {
    if (e < -length) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "end[%d] is out of range for an axis of %lld", k,
                      (long long)length);
    }
    e += length;
  }
  if (e > length) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "end[%d] is out of range for an axis of %lld", k,
                    (long long)length);
  }
  if (b == e) return acc_fail(MX_ACC_ERR_INVALID_ARG, "slice %d is empty", k);
  if ((s > 0 && b > e) || (s < 0 && b < e)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "begin, end and step of slice %d select nothing", k);
  }
  /* |step| may be huge: the extent is at least 1 and at most the length. */
  const uint64_t distance = s > 0 ? (uint64_t)(e - b) : (uint64_t)(b - e);
  const uint64_t magnitude = s > 0 ? (uint64_t)s : (uint64_t)0 - (uint64_t)s;
  *start = b;
  *extent = (int64_t)((distance - 1) / magnitude + 1);
  return MX_ACC_OK;
}

static int slice_infer(const cr_params *params, const acc_shape *in, int num_in,
                       acc_shape *out) {
  (void)num_in;
  if (params->u.slice.count > in[0].ndim) {
    return cr_shape_error("begin has more entries than data shape %s has axes", &in[0]);
  }
  *out = in[0];
  for (int k = 0; k < params->u.slice.count; ++k) {
    int64_t start, step, extent;
    int status = slice_range(params, k, (int64_t)in[0].dims[k], &start, &step, &extent);
    if (status != MX_ACC_OK) return status;
    out->dims[k] = (uint64_t)extent;
  }
  return MX_ACC_OK;
}

static int slice_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int64_t start[CR_MAX_NDIM], step[CR_MAX_NDIM], extent;
  for (int d = 0; d < CR_MAX_NDIM; ++d) {
    start[d] = 0;
    step[d] = 1;
  }
  for (int k = 0; k < params->u.slice.count; ++k) {
    /* checked at infer */
    slice_range(params, k, (int64_t)in[0].shape.dims[k], &start[k], &step[k], &extent);
  }
  return gather_box(params, in, out, start, step);
}

static int slice_like_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(keys[i], "axes") != 0) return cr_unknown_attr(keys[i]);
    int status = cr_parse_axes(keys[i], vals[i], &params->u.axes);
    if (status == MX_ACC_OK && !params->u.axes.given) {
      status = cr_bad_attr(keys[i], vals[i], "a tuple of axes");
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* data cut to shape_like's extents on the axes listed (all of them when
 * axes is empty, which needs shapes of one rank). */
static int slice_like_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  (void)num_in;
  const acc_shape *data = &in[0], *like = &in[1];
  const cr_axes *axes = &params->u.axes;
  unsigned char cut[CR_MAX_NDIM] = {0};
  if (axes->count == 0) {
    if (data->ndim != like->ndim) {
      return cr_shape_error("without axes, shape_like %s needs the data's rank", like);
    }
    for (int d = 0; d < data->ndim; ++d) cut[d] = 1;
  }
  for (int i = 0; i < axes->count; ++i) {
    int d;
    int status = cr_resolve_axis(axes->values[i], data->ndim, &d);
    if (status != MX_ACC_OK) return status;
    cut[d] = 1;
  }
  *out = *data;
  for (int d = 0; d < data->ndim; ++d) {
    if (!cut[d]) continue;
    if (d >= like->ndim) return cr_shape_error("shape_like %s lacks an axis to slice", like);
    if (like->dims[d] > data->dims[d]) {
      return cr_shape_error("shape_like %s exceeds the data along an axis", like);
    }
    out->dims[d] = like->dims[d];
  }
  return MX_ACC_OK;
}

static int slice_like_run(const cr_params *params, const cr_tensor *in, int num_in,
                          const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const int64_t start[CR_MAX_NDIM] = {0};
  int64_t step[CR_MAX_NDIM];
  for (int d = 0; d < CR_MAX_NDIM; ++d) step[d] = 1;
  return gather_box(params, in, out, start, step);
}

/* ---- Cast --------------------------------------------------------------- */

static int cast_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  int given = 0;
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(keys[i], "dtype") != 0) return cr_unknown_attr(keys[i]);
    int status = cr_parse_dtype(keys[i], vals[i], 0, &params->u.cast_dtype);
    if (status != MX_ACC_OK) return status;
    given = 1;
  }
  return given ? MX_ACC_OK : acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute dtype is required");
}

/* Any dtype to the dtype attribute's. */
static int cast_dtypes(const cr_params *params) {
  return cr_dtype_expect("output", 0, params->out_dtypes[0], params->u.cast_dtype);
}

static int cast_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  cr_cast(cr_element_count(&out->shape), cr_in_dtype(params, 0), in[0].data,
          cr_out_dtype(params, 0), out->data);
  return MX_ACC_OK;
}

/* ---- the families ------------------------------------------------------ */

/* Every family here only moves elements (Cast converts them): one input and
 * one output unless stated, and every dtype. */
#define ONE_TO_ONE .num_inputs = cr_one_input, .num_outputs = cr_one_output

const cr_op_impl cr_impl_copy = {.parse = cr_no_attrs_parse, ONE_TO_ONE,
                                 .check_dtypes = cr_dtypes_any,
                                 .infer_shape = cr_same_shape_infer, .run = cr_copy_run};
const cr_op_impl cr_impl_cast = {.parse = cast_parse, ONE_TO_ONE, .check_dtypes = cast_dtypes,
                                 .infer_shape = cr_same_shape_infer, .run = cast_run};
const cr_op_impl cr_impl_flatten = {.parse = cr_no_attrs_parse, ONE_TO_ONE,
                                    .check_dtypes = cr_dtypes_any, .infer_shape = flatten_infer,
                                    .run = cr_copy_run};
const cr_op_impl cr_impl_reshape = {.parse = reshape_parse, ONE_TO_ONE,
                                    .check_dtypes = cr_dtypes_any, .infer_shape = reshape_infer,
                                    .run = cr_copy_run};
const cr_op_impl cr_impl_expand_dims = {.parse = expand_dims_parse, ONE_TO_ONE,
                                        .check_dtypes = cr_dtypes_any,
                                        .infer_shape = expand_dims_infer, .run = cr_copy_run};
const cr_op_impl cr_impl_squeeze = {.parse = squeeze_parse, ONE_TO_ONE,
                                    .check_dtypes = cr_dtypes_any, .infer_shape = squeeze_infer,
                                    .run = cr_copy_run};
const cr_op_impl cr_impl_transpose = {.parse = transpose_parse, ONE_TO_ONE,
                                      .check_dtypes = cr_dtypes_any,
                                      .infer_shape = transpose_infer, .run = transpose_run};
const cr_op_impl cr_impl_concat = {.parse = concat_parse, .num_inputs = concat_inputs,
                                   .num_outputs = cr_one_output, .check_dtypes = cr_dtypes_any,
                                   .infer_shape = concat_infer, .run = concat_run};
const cr_op_impl cr_impl_stack = {.parse = stack_parse, .num_inputs = concat_inputs,
                                  .num_outputs = cr_one_output, .check_dtypes = cr_dtypes_any,
                                  .infer_shape = stack_infer, .run = stack_run};
const cr_op_impl cr_impl_split = {.parse = split_parse, .num_inputs = cr_one_input,
                                  .num_outputs = split_outputs, .check_dtypes = cr_dtypes_any,
                                  .infer_shape = split_infer, .run = split_run};
const cr_op_impl cr_impl_slice_axis = {.parse = slice_axis_parse, ONE_TO_ONE,
                                       .check_dtypes = cr_dtypes_any,
                                       .infer_shape = slice_axis_infer, .run = slice_axis_run};
const cr_op_impl cr_impl_slice = {.parse = slice_parse, ONE_TO_ONE, .check_dtypes = cr_dtypes_any,
                                  .infer_shape = slice_infer, .run = slice_run};
/* shape_like only lends its shape: any dtype. */
const cr_op_impl cr_impl_slice_like = {.parse = slice_like_parse, .num_inputs = cr_two_inputs,
                                       .num_outputs = cr_one_output,
                                       .check_dtypes = cr_dtypes_first_any,
                                       .infer_shape = slice_like_infer, .run = slice_like_run};
