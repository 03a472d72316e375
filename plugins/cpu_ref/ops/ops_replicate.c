/*
 * Replicating and padding operators of cpu_ref: tile, repeat,
 * broadcast_to, broadcast_axis (broadcast_axes), broadcast_like and Pad.
 * Each is one cr_gather whose axis maps say which input element every
 * output element copies; they move elements by their size, so they run
 * every dtype.
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

/* ---- tile, repeat, broadcast_to, broadcast_axis, broadcast_like ---------- */

/* Gathers output axis d from input axis d with maps[d], the input being
 * input 0 viewed with leading extents of 1 up to the output's rank (which
 * tile and the broadcasts share). */
static int gather_replicated(const cr_params *params, const cr_tensor *in, const cr_tensor *out,
                             const cr_axis_map *maps) {
  int64_t dims[CR_MAX_NDIM], x_strides[CR_MAX_NDIM], y_strides[CR_MAX_NDIM];
  int64_t own[CR_MAX_NDIM];
  const int ndim = cr_view_dims(&out->shape, dims);
  const int lead = out->shape.ndim - in[0].shape.ndim;
  cr_compact_strides(&in[0].shape, own);
  cr_compact_strides(&out->shape, y_strides);
  for (int d = 0; d < ndim; ++d) {
    /* An axis of extent 1 (or one the input lacks) is read with stride 0,
     * which broadcasts it. */
    const int from = d - lead;
    const int has_axis = from >= 0 && from < in[0].shape.ndim;
    x_strides[d] = has_axis && in[0].shape.dims[from] != 1 ? own[from] : 0;
    if (out->shape.ndim == 0) y_strides[d] = 1;
  }
  cr_gather(ndim, dims, maps, x_strides, y_strides, cr_in_size(params, 0), in[0].data, NULL,
            out->data);
  return MX_ACC_OK;
}

static int tile_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  int given = 0;
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(keys[i], "reps") != 0) return cr_unknown_attr(keys[i]);
    int status = cr_parse_axes(keys[i], vals[i], &params->u.reps);
    if (status == MX_ACC_OK && !params->u.reps.given) {
      status = cr_bad_attr(keys[i], vals[i], "a tuple of repetitions");
    }
    for (int k = 0; status == MX_ACC_OK && k < params->u.reps.count; ++k) {
      if (params->u.reps.values[k] < 1) status = cr_bad_attr(keys[i], vals[i], "positive reps");
    }
    if (status != MX_ACC_OK) return status;
    given = 1;
  }
  return given ? MX_ACC_OK : acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute reps is required");
}

/* Input and reps are aligned at their last axes, the shorter padded with
 * leading 1s; each output extent is the input's times its repetitions. */
static int tile_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)num_in;
  const cr_axes *reps = &params->u.reps;
  const int ndim = reps->count > in[0].ndim ? reps->count : in[0].ndim;
  out->ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    const int from = d - (ndim - in[0].ndim), rep = d - (ndim - reps->count);
    const uint64_t extent = from >= 0 ? in[0].dims[from] : 1;
    const uint64_t times = rep >= 0 ? (uint64_t)reps->values[rep] : 1;
    if (cr_checked_mul(extent, times, "the tiled array", &out->dims[d]) != MX_ACC_OK) {
      return cr_shape_error("tiling data shape %s gives too large an array", &in[0]);
    }
  }
  return MX_ACC_OK;
}

static int tile_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  cr_axis_map maps[CR_MAX_NDIM];
  const int lead = out->shape.ndim - in[0].shape.ndim;
  for (int d = 0; d < CR_MAX_NDIM; ++d) {
    const int from = d - lead;
    const int64_t extent = from >= 0 && from < in[0].shape.ndim ? (int64_t)in[0].shape.dims[from]
                                                                : 1;
    /* An empty input axis makes an empty output, whose maps are never used. */
    const cr_axis_map map = {CR_MAP_TILE, 0, 1, extent > 0 ? extent : 1};
    maps[d] = map;
  }
  return gather_replicated(params, in, out, maps);
}

static int repeat_parse(const char *const *keys, const char *const *vals, size_t count,
                        cr_params *params) {
  int given = 0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK;
    if (strcmp(key, "repeats") == 0) {
      status = cr_parse_int(key, value, &params->u.repeat.repeats);
      if (status == MX_ACC_OK && params->u.repeat.repeats < 0) {
        status = cr_bad_attr(key, value, "a non-negative integer");
      }
      given = 1;
    } else if (strcmp(key, "axis") == 0) {
      params->u.repeat.has_axis = !acc_attr_is_none(value);
      if (params->u.repeat.has_axis) status = cr_parse_axis(key, value, &params->u.repeat.axis);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return given ? MX_ACC_OK : acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute repeats is required");
}

/* MXNet's rule: without axis the flattened input, each element repeated;
 * repeats = 0 makes a (0,) array whatever the axis. */
static int repeat_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out) {
  (void)num_in;
  const uint64_t repeats = (uint64_t)params->u.repeat.repeats;
  int axis = 0;
  if (params->u.repeat.has_axis) {
    int status = cr_resolve_axis(params->u.repeat.axis, in[0].ndim, &axis);
    if (status != MX_ACC_OK) return status;
  }
  if (!params->u.repeat.has_axis || repeats == 0) {
    out->ndim = 1;
    return cr_checked_mul((uint64_t)cr_element_count(&in[0]), repeats, "the repeated array",
                          &out->dims[0]);
  }
  *out = in[0];
  return cr_checked_mul(in[0].dims[axis], repeats, "the repeated array", &out->dims[axis]);
}

static int repeat_run(const cr_params *params, const cr_tensor *in, int num_in,
                      const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  if (cr_element_count(&out->shape) == 0) return MX_ACC_OK;
  cr_axis_map maps[CR_MAX_NDIM];
  int64_t dims[CR_MAX_NDIM], x_strides[CR_MAX_NDIM], y_strides[CR_MAX_NDIM];
  const int64_t repeats = params->u.repeat.repeats;
  int ndim;
  if (!params->u.repeat.has_axis) {
    /* The flattened input, element i repeated into outputs i * repeats ...
     * i * repeats + repeats - 1. */
    ndim = 1;
    dims[0] = (int64_t)out->shape.dims[0];
    x_strides[0] = y_strides[0] = 1;
    const cr_axis_map map = {CR_MAP_REPEAT, 0, repeats, 0};
    maps[0] = map;
  } else {
    int axis = 0;
    cr_resolve_axis(params->u.repeat.axis, in[0].shape.ndim, &axis); /* checked at infer */
    ndim = cr_view_dims(&out->shape, dims);
    cr_compact_strides(&in[0].shape, x_strides);
    cr_compact_strides(&out->shape, y_strides);
    for (int d = 0; d < ndim; ++d) {
      const cr_axis_map map = {d == axis ? CR_MAP_REPEAT : CR_MAP_STEP, 0, d == axis ? repeats : 1,
                               0};
      maps[d] = map;
    }
  }
  cr_gather(ndim, dims, maps, x_strides, y_strides, cr_in_size(params, 0), in[0].data, NULL,
            out->data);
  return MX_ACC_OK;
}

/* The broadcasts read input axes of extent 1 with stride 0 (see
 * gather_replicated), so their maps are all the identity. */
static int broadcast_run(const cr_params *params, const cr_tensor *in, int num_in,
                         const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  cr_axis_map maps[CR_MAX_NDIM];
  for (int d = 0; d < CR_MAX_NDIM; ++d) {
    const cr_axis_map map = {CR_MAP_STEP, 0, 1, 0};
    maps[d] = map;
  }
  return gather_replicated(params, in, out, maps);
}

/* Output extent want (0 keeping the input's) from input extent have, which
 * must be 1 or want. */
static int broadcast_extent(const acc_shape *data, uint64_t have, int64_t want, uint64_t *out) {
  if (want < 0) return cr_shape_error("cannot broadcast data shape %s to a negative extent", data);
  *out = want == 0 ? have : (uint64_t)want;
  if (have != 1 && have != *out) {
    return cr_shape_error("data shape %s cannot be broadcast to the shape asked for", data);
  }
  return MX_ACC_OK;
}

static int broadcast_to_parse(const char *const *keys, const char *const *vals, size_t count,
                              cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(keys[i], "shape") != 0) return cr_unknown_attr(keys[i]);
    int status = cr_parse_axes(keys[i], vals[i], &params->u.target);
    if (status == MX_ACC_OK && !params->u.target.given) {
      status = cr_bad_attr(keys[i], vals[i], "a shape");
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int broadcast_to_infer(const cr_params *params, const acc_shape *in, int num_in,
                              acc_shape *out) {
  (void)num_in;
  const cr_axes *target = &params->u.target;
  if (target->count != in[0].ndim) {
    return cr_shape_error("shape has another rank than data shape %s", &in[0]);
  }
  out->ndim = in[0].ndim;
  for (int d = 0; d < in[0].ndim; ++d) {
    int status = broadcast_extent(&in[0], in[0].dims[d], target->values[d], &out->dims[d]);
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int broadcast_axis_parse(const char *const *keys, const char *const *vals, size_t count,
                                cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    int status;
    if (strcmp(keys[i], "axis") == 0) {
      status = cr_parse_axes(keys[i], vals[i], &params->u.broadcast_axis.axis);
    } else if (strcmp(keys[i], "size") == 0) {
      status = cr_parse_axes(keys[i], vals[i], &params->u.broadcast_axis.size);
    } else {
      status = cr_unknown_attr(keys[i]);
    }
    if (status != MX_ACC_OK) return status;
  }
  if (params->u.broadcast_axis.axis.count != params->u.broadcast_axis.size.count) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "axis and size differ in length");
  }
  return MX_ACC_OK;
}

/* Each listed axis, of extent 1, takes its size (a later listing of the
 * same axis wins, as in the registry). */
static int broadcast_axis_infer(const cr_params *params, const acc_shape *in, int num_in,
                                acc_shape *out) {
  (void)num_in;
  const cr_axes *axes = &params->u.broadcast_axis.axis, *sizes = &params->u.broadcast_axis.size;
  *out = in[0];
  for (int i = 0; i < axes->count; ++i) {
    int d;
    int status = cr_resolve_axis(axes->values[i], in[0].ndim, &d);
    if (status != MX_ACC_OK) return status;
    if (in[0].dims[d] != 1) return cr_shape_error("a broadcast axis of data %s is not 1", &in[0]);
    if (sizes->values[i] < 0) return cr_shape_error("a size for data %s is negative", &in[0]);
    out->dims[d] = (uint64_t)sizes->values[i];
  }
  return MX_ACC_OK;
}

static int broadcast_like_parse(const char *const *keys, const char *const *vals, size_t count,
                                cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    int status;
    if (strcmp(keys[i], "lhs_axes") == 0) {
      status = cr_parse_axes(keys[i], vals[i], &params->u.broadcast_like.lhs_axes);
    } else if (strcmp(keys[i], "rhs_axes") == 0) {
      status = cr_parse_axes(keys[i], vals[i], &params->u.broadcast_like.rhs_axes);
    } else {
      status = cr_unknown_attr(keys[i]);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* lhs broadcast to rhs's shape, or, with both lhs_axes and rhs_axes, lhs
 * axis lhs_axes[i] (of extent 1) to rhs's extent along rhs_axes[i]. */
static int broadcast_like_infer(const cr_params *params, const acc_shape *in, int num_in,
                                acc_shape *out) {
  (void)num_in;
  const acc_shape *lhs = &in[0], *rhs = &in[1];
  const cr_axes *from = &params->u.broadcast_like.lhs_axes;
  const cr_axes *to = &params->u.broadcast_like.rhs_axes;
  *out = *lhs;
  if (!from->given || !to->given) {
    if (lhs->ndim != rhs->ndim) return cr_shape_error("rhs shape %s has another rank", rhs);
    for (int d = 0; d < lhs->ndim; ++d) {
      if (lhs->dims[d] != 1 && lhs->dims[d] != rhs->dims[d]) {
        return cr_shape_error("lhs shape %s cannot be broadcast to rhs", lhs);
      }
    }
    *out = *rhs;
    return MX_ACC_OK;
  }
  if (from->count != to->count || from->count == 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "lhs_axes and rhs_axes must be non-empty and of one "
                    "length");
  }
  for (int i = 0; i < from->count; ++i) {
    int l, r;
    int status = cr_resolve_axis(from->values[i], lhs->ndim, &l);
    if (status == MX_ACC_OK) status = cr_resolve_axis(to->values[i], rhs->ndim, &r);
    if (status != MX_ACC_OK) return status;
    if (lhs->dims[l] != 1) return cr_shape_error("a broadcast axis of lhs %s is not 1", lhs);
    out->dims[l] = rhs->dims[r];
  }
  return MX_ACC_OK;
}

/* ---- Pad ------------------------------------------------------------------ */

static int pad_parse(const char *const *keys, const char *const *vals, size_t count,
                     cr_params *params) {
  int given = 0;
  params->u.pad.mode = CR_MAP_PAD_CONSTANT;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK;
    if (strcmp(key, "mode") == 0) {
      if (acc_attr_equals(value, "constant")) params->u.pad.mode = CR_MAP_PAD_CONSTANT;
      else if (acc_attr_equals(value, "edge")) params->u.pad.mode = CR_MAP_PAD_EDGE;
      else if (acc_attr_equals(value, "reflect")) params->u.pad.mode = CR_MAP_PAD_REFLECT;
      else status = cr_bad_attr(key, value, "constant, edge or reflect");
    } else if (strcmp(key, "pad_width") == 0) {
      if (acc_attr_int_tuple(value, params->u.pad.widths, 2 * CR_MAX_NDIM,
                             &params->u.pad.num_widths) != 0) {
        status = cr_bad_attr(key, value, "a tuple of widths");
      }
      for (int k = 0; status == MX_ACC_OK && k < params->u.pad.num_widths; ++k) {
        const int64_t width = params->u.pad.widths[k];
        if (width < 0 || width > INT32_MAX) {
          status = cr_bad_attr(key, value, "widths in [0, 2^31)");
        } else if (k < 4 && width != 0) {
          status = cr_bad_attr(key, value, "no padding of the first two axes");
        }
      }
      given = 1;
    } else if (strcmp(key, "constant_value") == 0) {
      status = cr_parse_float(key, value, &params->u.pad.value);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return given ? MX_ACC_OK : acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute pad_width is required");
}

/* 4-D or 5-D data, padded by (before, after) = widths[2d], widths[2d + 1]
 * along each axis d (the first two never). reflect padding must be
 * narrower than the axis; edge padding needs something to repeat. */
static int pad_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)num_in;
  const acc_shape *data = &in[0];
  if (data->ndim != 4 && data->ndim != 5) return cr_shape_error("data shape %s is not 4-D or 5-D",
                                                                data);
  if (params->u.pad.num_widths != 2 * data->ndim) {
    return cr_shape_error("pad_width needs two entries per axis of data shape %s", data);
  }
  *out = *data;
  for (int d = 2; d < data->ndim; ++d) {
    const uint64_t before = (uint64_t)params->u.pad.widths[2 * d];
    const uint64_t after = (uint64_t)params->u.pad.widths[2 * d + 1];
    const uint64_t widest = before > after ? before : after;
    if ((params->u.pad.mode == CR_MAP_PAD_REFLECT && widest >= data->dims[d]) ||
        (params->u.pad.mode == CR_MAP_PAD_EDGE && widest > 0 && data->dims[d] == 0)) {
      return cr_shape_error("the padding is too wide for data shape %s in this mode", data);
    }
    out->dims[d] += before + after;
  }
  return MX_ACC_OK;
}

static int pad_run(const cr_params *params, const cr_tensor *in, int num_in,
                   const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int64_t dims[CR_MAX_NDIM], x_strides[CR_MAX_NDIM], y_strides[CR_MAX_NDIM];
  cr_axis_map maps[CR_MAX_NDIM];
  const int ndim = cr_view_dims(&out->shape, dims);
  cr_compact_strides(&in[0].shape, x_strides);
  cr_compact_strides(&out->shape, y_strides);
  for (int d = 0; d < ndim; ++d) {
    const cr_axis_map map = {params->u.pad.mode, params->u.pad.widths[2 * d], 1,
                             (int64_t)in[0].shape.dims[d]};
    maps[d] = map;
  }
  /* The constant, converted to the data's dtype as MXNet does. */
  union {
    unsigned char bytes[8];
    int64_t aligned;
  } fill = {{0}};
  cr_store_double(cr_in_dtype(params, 0), fill.bytes, 0, params->u.pad.value);
  cr_gather(ndim, dims, maps, x_strides, y_strides, cr_in_size(params, 0), in[0].data,
            fill.bytes, out->data);
  return MX_ACC_OK;
}

/* ---- the families ------------------------------------------------------ */

#define ONE_TO_ONE .num_inputs = cr_one_input, .num_outputs = cr_one_output

const cr_op_impl cr_impl_tile = {.parse = tile_parse, ONE_TO_ONE, .check_dtypes = cr_dtypes_any,
                                 .infer_shape = tile_infer, .run = tile_run};
const cr_op_impl cr_impl_repeat = {.parse = repeat_parse, ONE_TO_ONE,
                                   .check_dtypes = cr_dtypes_any, .infer_shape = repeat_infer,
                                   .run = repeat_run};
const cr_op_impl cr_impl_broadcast_to = {.parse = broadcast_to_parse, ONE_TO_ONE,
                                         .check_dtypes = cr_dtypes_any,
                                         .infer_shape = broadcast_to_infer,
                                         .run = broadcast_run};
const cr_op_impl cr_impl_broadcast_axis = {.parse = broadcast_axis_parse, ONE_TO_ONE,
                                           .check_dtypes = cr_dtypes_any,
                                           .infer_shape = broadcast_axis_infer,
                                           .run = broadcast_run};
/* broadcast_like's rhs only lends its shape: any dtype. */
const cr_op_impl cr_impl_broadcast_like = {.parse = broadcast_like_parse,
                                           .num_inputs = cr_two_inputs,
                                           .num_outputs = cr_one_output,
                                           .check_dtypes = cr_dtypes_first_any,
                                           .infer_shape = broadcast_like_infer,
                                           .run = broadcast_run};
const cr_op_impl cr_impl_pad = {.parse = pad_parse, ONE_TO_ONE, .check_dtypes = cr_dtypes_any,
                                .infer_shape = pad_infer, .run = pad_run};
