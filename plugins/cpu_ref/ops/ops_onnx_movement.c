/*
 * The ONNX importer's host operators that move elements, in cpu_ref (see
 * ops_onnx.c): shape and size, the reshaping copies, transpose, expand,
 * slice, tile, pad, split, concat, depth_to_space, space_to_depth, trilu,
 * eye_like, reverse_sequence and one_hot; the gathers and scatters with
 * index tensors are in ops_onnx_gather.c.
 *
 * Operators that only move elements run every dtype by element size.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_onnx_impl.h"
#include "status.h"

/* ======================================================================= */
/* Moving elements                                                          */
/* ======================================================================= */

/* ---- _onnx_shape, _onnx_size ---------------------------------------------------- */

static int shape_parse(const char *const *keys, const char *const *vals, size_t count,
                       cr_params *params) {
  static const attr_spec kSpecs[] = {{"start", A_INT, 0, NULL},
                                     {"end", A_OPT_FLOAT, 0, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status != MX_ACC_OK) return status;
  if (p->has_f[0] && (p->f[0] != floor(p->f[0]) || fabs(p->f[0]) > 1e15)) {
    return cr_bad_attr("end", "?", "None or an integer");
  }
  return MX_ACC_OK;
}

static void shape_range(const cr_params *params, const acc_shape *x, int64_t *first,
                        int64_t *length) {
  const onnx_p *p = P(params);
  py_slice(p->i[0], p->has_f[0] ? (int64_t)p->f[0] : x->ndim, 1, x->ndim, first, length);
}

static int shape_infer(const cr_params *params, const acc_shape *in, int num_in,
                       acc_shape *out) {
  (void)num_in;
  int64_t first, length;
  shape_range(params, &in[0], &first, &length);
  out->ndim = 1;
  out->dims[0] = (uint64_t)length;
  return MX_ACC_OK;
}

static int shape_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int64_t first, length;
  shape_range(params, &in[0].shape, &first, &length);
  for (int64_t i = 0; i < length; ++i) {
    cr_store_int(CR_INT64, out->data, i, (int64_t)in[0].shape.dims[first + i]);
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_shape = {shape_parse, cr_one_input, cr_one_output, int64_out,
                                       shape_infer, shape_run};

static int size_infer(const cr_params *params, const acc_shape *in, int num_in,
                      acc_shape *out) {
  (void)params;
  (void)in;
  (void)num_in;
  out->ndim = 0;
  return MX_ACC_OK;
}

static int size_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)params;
  (void)num_in;
  (void)num_threads;
  cr_store_int(CR_INT64, out->data, 0, count_of(&in[0].shape));
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_size = {cr_no_attrs_parse, cr_one_input, cr_one_output, int64_out,
                                      size_infer, size_run};

/* ---- reshaping copies: flatten, reshape, unsqueeze, squeeze ------------------------ */

static int flatten_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  P(params)->i[0] = 1;
  return parse_with(kAxisSpec, keys, vals, count, P(params));
}

static int flatten_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)num_in;
  const acc_shape *x = &in[0];
  const int64_t given = P(params)->i[0];
  int64_t axis = x->ndim ? py_mod_int(given, x->ndim) : 0;
  if (given == x->ndim) axis = x->ndim;
  out->ndim = 2;
  out->dims[0] = (uint64_t)cr_product(x, 0, (int)axis);
  out->dims[1] = (uint64_t)cr_product(x, (int)axis, x->ndim);
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_flatten = {flatten_parse, cr_one_input, cr_one_output,
                                         cr_dtypes_any, flatten_infer, cr_copy_run};

static int reshape_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  static const attr_spec kSpecs[] = {{"shape", A_TUPLE, 0, NULL},
                                     {"allowzero", A_BOOL, 0, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && !p->tup_given[0]) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute shape is required");
  }
  if (status == MX_ACC_OK && p->tup_len[0] > CR_MAX_NDIM) {
    status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "more than 16 dimensions");
  }
  return status;
}

static int reshape_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)num_in;
  const onnx_p *p = P(params);
  const acc_shape *x = &in[0];
  const int64_t total = count_of(x);
  int64_t known = 1;
  int unknown = -1;
  out->ndim = p->tup_len[0];
  for (int d = 0; d < out->ndim; ++d) {
    int64_t v = p->tup[0][d];
    if (v == 0 && !p->flag[0]) {
      if (d >= x->ndim) return cr_shape_error("shape 0 copies an extent that data %s lacks", x);
      v = (int64_t)x->dims[d];
    }
    if (v == -1) {
      if (unknown >= 0) return cr_shape_error("two -1 extents reshaping %s", x);
      unknown = d;
      continue;
    }
    if (v < 0) return cr_shape_error("a negative extent reshaping %s", x);
    uint64_t product;
    int status = cr_checked_mul((uint64_t)known, (uint64_t)v, "shape", &product);
    if (status != MX_ACC_OK) return status;
    known = (int64_t)product;
    out->dims[d] = (uint64_t)v;
  }
  if (unknown >= 0) {
    if (known == 0 || total % known != 0) {
      return cr_shape_error("cannot reshape data of shape %s with -1", x);
    }
    out->dims[unknown] = (uint64_t)(total / known);
  } else if (known != total) {
    return cr_shape_error("cannot reshape data of shape %s into the given shape", x);
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_reshape = {reshape_parse, cr_one_input, cr_one_output,
                                         cr_dtypes_any, reshape_infer, cr_copy_run};

static const attr_spec kOptAxesSpec[] = {{"axes", A_OPT_TUPLE, 0, NULL},
                                         {NULL, A_INT, 0, NULL}};

static int unsqueeze_parse(const char *const *keys, const char *const *vals, size_t count,
                           cr_params *params) {
  return parse_with(kAxesSpec, keys, vals, count, P(params));
}

static int cmp_int64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int unsqueeze_infer(const cr_params *params, const acc_shape *in, int num_in,
                           acc_shape *out) {
  (void)num_in;
  const onnx_p *p = P(params);
  const int ndim = in[0].ndim + p->tup_len[0];
  if (ndim > CR_MAX_NDIM) return cr_shape_error("unsqueezing %s makes too many dimensions", &in[0]);
  int64_t axes[CR_ONNX_TUPLE_MAX];
  for (int i = 0; i < p->tup_len[0]; ++i) axes[i] = py_mod_int(p->tup[0][i], ndim);
  qsort(axes, (size_t)p->tup_len[0], sizeof axes[0], cmp_int64);
  *out = in[0];
  for (int i = 0; i < p->tup_len[0]; ++i) {
    const int axis = (int)axes[i];
    if (axis > out->ndim) return cr_shape_error("an axis is out of range for %s", &in[0]);
    for (int d = out->ndim; d > axis; --d) out->dims[d] = out->dims[d - 1];
    out->dims[axis] = 1;
    out->ndim += 1;
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_unsqueeze = {unsqueeze_parse, cr_one_input, cr_one_output,
                                           cr_dtypes_any, unsqueeze_infer, cr_copy_run};

static int squeeze_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  return parse_with(kOptAxesSpec, keys, vals, count, P(params));
}

static int squeeze_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)num_in;
  const onnx_p *p = P(params);
  const acc_shape *x = &in[0];
  int drop[CR_MAX_NDIM] = {0};
  if (!p->tup_given[0]) {
    for (int d = 0; d < x->ndim; ++d) drop[d] = x->dims[d] == 1;
  } else {
    for (int i = 0; i < p->tup_len[0]; ++i) {
      if (x->ndim == 0) return cr_shape_error("cannot squeeze axes of a scalar %s", x);
      const int axis = (int)py_mod_int(p->tup[0][i], x->ndim);
      if (drop[axis] || x->dims[axis] != 1) {
        return cr_shape_error("cannot squeeze the given axes of %s", x);
      }
      drop[axis] = 1;
    }
  }
  out->ndim = 0;
  for (int d = 0; d < x->ndim; ++d) {
    if (!drop[d]) out->dims[out->ndim++] = x->dims[d];
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_squeeze = {squeeze_parse, cr_one_input, cr_one_output,
                                         cr_dtypes_any, squeeze_infer, cr_copy_run};

/* ---- _onnx_transpose ------------------------------------------------------------- */

static int transpose_parse(const char *const *keys, const char *const *vals, size_t count,
                           cr_params *params) {
  static const attr_spec kSpecs[] = {{"perm", A_TUPLE, 0, NULL}, {NULL, A_INT, 0, NULL}};
  return parse_with(kSpecs, keys, vals, count, P(params));
}

static int transpose_perm(const cr_params *params, const acc_shape *x, int perm[CR_MAX_NDIM]) {
  const onnx_p *p = P(params);
  if (p->tup_len[0] == 0) {
    for (int d = 0; d < x->ndim; ++d) perm[d] = x->ndim - 1 - d;
    return MX_ACC_OK;
  }
  if (p->tup_len[0] != x->ndim) return cr_shape_error("perm does not match data shape %s", x);
  int seen[CR_MAX_NDIM] = {0};
  for (int d = 0; d < x->ndim; ++d) {
    int axis;
    if (np_axis(p->tup[0][d], x->ndim, &axis) != MX_ACC_OK || seen[axis]) {
      return cr_shape_error("perm is not a permutation of the axes of %s", x);
    }
    seen[axis] = 1;
    perm[d] = axis;
  }
  return MX_ACC_OK;
}

static int transpose_infer(const cr_params *params, const acc_shape *in, int num_in,
                           acc_shape *out) {
  (void)num_in;
  int perm[CR_MAX_NDIM];
  int status = transpose_perm(params, &in[0], perm);
  if (status != MX_ACC_OK) return status;
  out->ndim = in[0].ndim;
  for (int d = 0; d < out->ndim; ++d) out->dims[d] = in[0].dims[perm[d]];
  return MX_ACC_OK;
}

static int transpose_run(const cr_params *params, const cr_tensor *in, int num_in,
                         const cr_tensor *out, int num_threads) {
  (void)num_in;
  const acc_shape *x = &in[0].shape;
  if (x->ndim == 0) return cr_copy_run(params, in, 1, out, 0);
  int perm[CR_MAX_NDIM];
  transpose_perm(params, x, perm);
  int64_t own[CR_MAX_NDIM], strides[CR_MAX_NDIM], dims[CR_MAX_NDIM];
  cr_compact_strides(x, own);
  for (int d = 0; d < x->ndim; ++d) {
    strides[d] = own[perm[d]];
    dims[d] = (int64_t)out->shape.dims[d];
  }
  if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_copy_strided(x->ndim, dims, strides, cr_in_size(params, 0), in[0].data, out->data);
  } else {
    cr_copy_strided_shared(x->ndim, dims, strides, cr_in_size(params, 0), in[0].data,
                           out->data, num_threads);
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_transpose = {transpose_parse, cr_one_input, cr_one_output,
                                           cr_dtypes_any, transpose_infer, transpose_run};

/* ---- gathers by per-axis tables: expand, slice, tile, pad ------------------------- */

static int expand_parse(const char *const *keys, const char *const *vals, size_t count,
                        cr_params *params) {
  static const attr_spec kSpecs[] = {{"shape", A_TUPLE, 0, NULL}, {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && p->tup_len[0] > CR_MAX_NDIM) {
    status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "more than 16 dimensions");
  }
  return status;
}

static int expand_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out) {
  (void)num_in;
  const onnx_p *p = P(params);
  acc_shape shapes[2] = {in[0], {0, {0}}};
  shapes[1].ndim = p->tup_len[0];
  for (int d = 0; d < p->tup_len[0]; ++d) {
    if (p->tup[0][d] < 0) return cr_shape_error("a negative extent expanding %s", &in[0]);
    shapes[1].dims[d] = (uint64_t)p->tup[0][d];
  }
  return broadcast_shapes(shapes, 2, out);
}

static void expand_tables(const cr_params *params, const acc_shape *x, const acc_shape *out,
                          int64_t *const *tables, int64_t *x_strides) {
  (void)params;
  bstrides(x, out->ndim, x_strides);
  for (int d = 0; d < out->ndim; ++d) {
    for (uint64_t o = 0; o < out->dims[d]; ++o) tables[d][o] = x_strides[d] ? (int64_t)o : 0;
  }
}

static int expand_run(const cr_params *params, const cr_tensor *in, int num_in,
                      const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  return table_run(params, in, out, expand_tables, NULL);
}

const cr_op_impl cr_impl_onnx_expand = {expand_parse, cr_one_input, cr_one_output,
                                        cr_dtypes_any, expand_infer, expand_run};

static int slice_parse(const char *const *keys, const char *const *vals, size_t count,
                       cr_params *params) {
  static const attr_spec kSpecs[] = {
      {"starts", A_TUPLE, 0, NULL}, {"ends", A_TUPLE, 1, NULL}, {"axes", A_TUPLE, 2, NULL},
      {"steps", A_TUPLE, 3, NULL},  {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && (!p->tup_given[0] || !p->tup_given[1])) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "attributes starts and ends are required");
  }
  return status;
}

/* Per axis of x: first index, step and length of the slice. */
static int slice_plan(const cr_params *params, const acc_shape *x, int64_t *first,
                      int64_t *step, int64_t *length) {
  const onnx_p *p = P(params);
  for (int d = 0; d < x->ndim; ++d) {
    first[d] = 0;
    step[d] = 1;
    length[d] = (int64_t)x->dims[d];
  }
  int n = p->tup_len[0] < p->tup_len[1] ? p->tup_len[0] : p->tup_len[1];
  if (p->tup_len[2] > 0 && p->tup_len[2] < n) n = p->tup_len[2];
  if (p->tup_len[3] > 0 && p->tup_len[3] < n) n = p->tup_len[3];
  for (int i = 0; i < n; ++i) {
    if (x->ndim == 0) return cr_shape_error("cannot slice a scalar %s", x);
    const int64_t axis_given = p->tup_len[2] > 0 ? p->tup[2][i] : i;
    const int axis = (int)py_mod_int(axis_given, x->ndim);
    const int64_t s = p->tup_len[3] > 0 ? p->tup[3][i] : 1;
    if (s == 0) return cr_shape_error("a step of 0 slicing %s", x);
    py_slice(p->tup[0][i], p->tup[1][i], s, (int64_t)x->dims[axis], &first[axis], &length[axis]);
    step[axis] = s;
  }
  return MX_ACC_OK;
}

static int slice_infer(const cr_params *params, const acc_shape *in, int num_in,
                       acc_shape *out) {
  (void)num_in;
  int64_t first[CR_MAX_NDIM], step[CR_MAX_NDIM], length[CR_MAX_NDIM];
  int status = slice_plan(params, &in[0], first, step, length);
  if (status != MX_ACC_OK) return status;
  out->ndim = in[0].ndim;
  for (int d = 0; d < out->ndim; ++d) out->dims[d] = (uint64_t)length[d];
  return MX_ACC_OK;
}

static void slice_tables(const cr_params *params, const acc_shape *x, const acc_shape *out,
                         int64_t *const *tables, int64_t *x_strides) {
  int64_t first[CR_MAX_NDIM], step[CR_MAX_NDIM], length[CR_MAX_NDIM];
  slice_plan(params, x, first, step, length);
  cr_compact_strides(x, x_strides);
  for (int d = 0; d < out->ndim; ++d) {
    for (uint64_t o = 0; o < out->dims[d]; ++o) tables[d][o] = first[d] + (int64_t)o * step[d];
  }
}

/* A slice of unit steps is runs of contiguous elements: the trailing axes
 * it keeps whole, times the extent kept of the axis before them. Each run
 * is one memcpy (the generic path gathers element by element). Returns 0
 * when a step is not 1 (the caller gathers). */
static int slice_runs(const cr_params *params, const cr_tensor *in, const cr_tensor *out) {
  const acc_shape *x = &in[0].shape;
  int64_t first[CR_MAX_NDIM], step[CR_MAX_NDIM], length[CR_MAX_NDIM], strides[CR_MAX_NDIM];
  if (slice_plan(params, x, first, step, length) != MX_ACC_OK) return 0;
  for (int d = 0; d < x->ndim; ++d) {
    if (step[d] != 1) return 0;
  }
  if (x->ndim == 0 || count_of(&out->shape) == 0) return x->ndim != 0;
  cr_compact_strides(x, strides);
  int inner = x->ndim - 1; /* the axis whose kept part starts each run */
  while (inner > 0 && length[inner] == (int64_t)x->dims[inner]) --inner;
  const size_t size = cr_in_size(params, 0);
  const size_t run = (size_t)(length[inner] * strides[inner]) * size;
  int64_t index[CR_MAX_NDIM] = {0};
  const char *source = in[0].data;
  char *target = out->data;
  for (;;) {
    int64_t offset = first[inner] * strides[inner];
    for (int d = 0; d < inner; ++d) offset += (first[d] + index[d]) * strides[d];
    memcpy(target, source + (size_t)offset * size, run);
    target += run;
    int d = inner - 1;
    while (d >= 0 && ++index[d] == length[d]) index[d--] = 0;
    if (d < 0) return 1;
  }
}

static int slice_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  if (slice_runs(params, in, out)) return MX_ACC_OK;
  return table_run(params, in, out, slice_tables, NULL);
}

const cr_op_impl cr_impl_onnx_slice = {slice_parse, cr_one_input, cr_one_output, cr_dtypes_any,
                                       slice_infer, slice_run};

static int tile_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  static const attr_spec kSpecs[] = {{"reps", A_TUPLE, 0, NULL}, {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && p->tup_len[0] > CR_MAX_NDIM) {
    status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "more than 16 dimensions");
  }
  return status;
}

static int tile_infer(const cr_params *params, const acc_shape *in, int num_in,
                      acc_shape *out) {
  (void)num_in;
  const onnx_p *p = P(params);
  const acc_shape *x = &in[0];
  const int ndim = x->ndim > p->tup_len[0] ? x->ndim : p->tup_len[0];
  out->ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    const int dx = d - (ndim - x->ndim), dr = d - (ndim - p->tup_len[0]);
    const uint64_t e = dx >= 0 ? x->dims[dx] : 1;
    const int64_t r = dr >= 0 ? p->tup[0][dr] : 1;
    if (r < 0) return cr_shape_error("negative reps tiling %s", x);
    int status = cr_checked_mul(e, (uint64_t)r, "tiled shape", &out->dims[d]);
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static void tile_tables(const cr_params *params, const acc_shape *x, const acc_shape *out,
                        int64_t *const *tables, int64_t *x_strides) {
  (void)params;
  int64_t own[CR_MAX_NDIM];
  cr_compact_strides(x, own);
  for (int d = 0; d < out->ndim; ++d) {
    const int dx = d - (out->ndim - x->ndim);
    const int64_t e = dx >= 0 ? (int64_t)x->dims[dx] : 1;
    x_strides[d] = dx >= 0 ? own[dx] : 0;
    for (uint64_t o = 0; o < out->dims[d]; ++o) tables[d][o] = (int64_t)o % e;
  }
}

static int tile_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  return table_run(params, in, out, tile_tables, NULL);
}

const cr_op_impl cr_impl_onnx_tile = {tile_parse, cr_one_input, cr_one_output, cr_dtypes_any,
                                      tile_infer, tile_run};

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };
static const char *const kPadModes[] = {"constant", "reflect", "edge", "wrap", NULL};

static int pad_parse(const char *const *keys, const char *const *vals, size_t count,
                     cr_params *params) {
  static const attr_spec kSpecs[] = {{"pads", A_TUPLE, 0, NULL}, {"mode", A_CHOICE, 0, kPadModes},
                                     {"value", A_FLOAT, 0, NULL}, {"axes", A_TUPLE, 1, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->fn = PAD_CONSTANT;
  return parse_with(kSpecs, keys, vals, count, p);
}

/* Per axis: the crop (first kept index, kept length) and the padding
 * before and after. */
static int pad_plan(const cr_params *params, const acc_shape *x, int64_t *keep_first,
                    int64_t *keep_len, int64_t *before, int64_t *after) {
  const onnx_p *p = P(params);
  const int n = x->ndim;
  const int num_axes = p->tup_len[1] > 0 ? p->tup_len[1] : n;
  if (p->tup_len[0] != 2 * num_axes) return cr_shape_error("pads do not match data shape %s", x);
  int64_t b[CR_MAX_NDIM] = {0}, e[CR_MAX_NDIM] = {0};
  for (int i = 0; i < num_axes; ++i) {
    if (n == 0) return cr_shape_error("cannot pad a scalar %s", x);
    const int axis = (int)py_mod_int(p->tup_len[1] > 0 ? p->tup[1][i] : i, n);
    b[axis] = p->tup[0][i];
    e[axis] = p->tup[0][i + num_axes];
  }
  for (int d = 0; d < n; ++d) {
    const int64_t size = (int64_t)x->dims[d];
    const int64_t start = b[d] < 0 ? -b[d] : 0, stop = size - (e[d] < 0 ? -e[d] : 0);
    py_slice(start, stop, 1, size, &keep_first[d], &keep_len[d]);
    before[d] = b[d] > 0 ? b[d] : 0;
    after[d] = e[d] > 0 ? e[d] : 0;
    if (p->fn != PAD_CONSTANT && keep_len[d] == 0 && before[d] + after[d] > 0) {
      return cr_shape_error("cannot extend an empty axis of %s", x);
    }
  }
  return MX_ACC_OK;
}

static int pad_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)num_in;
  int64_t first[CR_MAX_NDIM], len[CR_MAX_NDIM], before[CR_MAX_NDIM], after[CR_MAX_NDIM];
  int status = pad_plan(params, &in[0], first, len, before, after);
  if (status != MX_ACC_OK) return status;
  out->ndim = in[0].ndim;
  for (int d = 0; d < out->ndim; ++d) {
    if (before[d] > (int64_t)cr_max_elements() || after[d] > (int64_t)cr_max_elements()) {
      return cr_shape_error("padding of %s is too large", &in[0]);
    }
    out->dims[d] = (uint64_t)(len[d] + before[d] + after[d]);
  }
  return MX_ACC_OK;
}

static void pad_tables(const cr_params *params, const acc_shape *x, const acc_shape *out,
                       int64_t *const *tables, int64_t *x_strides) {
  int64_t first[CR_MAX_NDIM], len[CR_MAX_NDIM], before[CR_MAX_NDIM], after[CR_MAX_NDIM];
  pad_plan(params, x, first, len, before, after);
  cr_compact_strides(x, x_strides);
  const int mode = P(params)->fn;
  for (int d = 0; d < out->ndim; ++d) {
    const int64_t n = len[d];
    for (uint64_t o = 0; o < out->dims[d]; ++o) {
      int64_t i = (int64_t)o - before[d];
      if (i < 0 || i >= n) {
        if (mode == PAD_CONSTANT) {
          tables[d][o] = -1;
          continue;
        }
        if (mode == PAD_EDGE) {
          i = i < 0 ? 0 : n - 1;
        } else if (mode == PAD_WRAP) {
          i = py_mod_int(i, n);
        } else if (n == 1) {
          i = 0;
        } else {
          const int64_t period = 2 * (n - 1);
          i = py_mod_int(i, period);
          if (i >= n) i = period - i;
        }
      }
      tables[d][o] = first[d] + i;
    }
  }
}

static int pad_run(const cr_params *params, const cr_tensor *in, int num_in,
                   const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  unsigned char fill[8];
  cr_store_double(cr_in_dtype(params, 0), fill, 0, P(params)->f[0]);
  if (out->shape.ndim == 0) return cr_copy_run(params, in, 1, out, 0);
  return table_run(params, in, out, pad_tables, fill);
}

const cr_op_impl cr_impl_onnx_pad = {pad_parse, cr_one_input, cr_one_output, cr_dtypes_any,
                                     pad_infer, pad_run};

/* ---- _onnx_split, _onnx_concat ------------------------------------------------ */

static int split_parse(const char *const *keys, const char *const *vals, size_t count,
                       cr_params *params) {
  static const attr_spec kSpecs[] = {{"axis", A_INT, 0, NULL}, {"split", A_TUPLE, 0, NULL},
                                     {"num_outputs", A_INT, 1, NULL}, {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->i[1] = 1;
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status != MX_ACC_OK) return status;
  if (p->tup_len[0] == 0 && (p->i[1] < 1 || p->i[1] > CR_MAX_OUTPUTS)) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "num_outputs must be 1 to %d", CR_MAX_OUTPUTS);
  }
  return MX_ACC_OK;
}

static int split_outputs(const cr_params *params) {
  const onnx_p *p = P(params);
  return p->tup_len[0] > 0 ? p->tup_len[0] : (int)p->i[1];
}

/* Part k of the split: [start, start + length) along the axis. */
static int split_plan(const cr_params *params, const acc_shape *x, int *axis, int64_t *start,
                      int64_t *length) {
  const onnx_p *p = P(params);
  if (x->ndim == 0) return cr_shape_error("cannot split a scalar %s", x);
  if (p->i[0] < -(int64_t)x->ndim || p->i[0] >= (int64_t)x->ndim) {
    return cr_shape_error("the split axis lies outside shape %s", x);
  }
  *axis = (int)py_mod_int(p->i[0], x->ndim);
  const int64_t n = (int64_t)x->dims[*axis];
  const int parts = split_outputs(params);
  if (p->tup_len[0] > 0) { /* ONNX: the sizes add up to the extent */
    int64_t total = 0;
    for (int k = 0; k < p->tup_len[0]; ++k) {
      if (p->tup[0][k] < 0 || p->tup[0][k] > ((int64_t)1 << 56)) {
        return cr_shape_error("a negative or too large split of %s", x);
      }
      total += p->tup[0][k];
    }
    if (total != n) return cr_shape_error("split sizes that do not add up to the axis of %s", x);
  }
  int64_t point = 0, previous = 0;
  for (int k = 0; k < parts; ++k) {
    int64_t next;
    if (k == parts - 1) {
      next = n;
    } else if (p->tup_len[0] > 0) {
      if (p->tup[0][k] < 0 || p->tup[0][k] > ((int64_t)1 << 56)) {
        return cr_shape_error("a negative or too large split of %s", x);
      }
      point += p->tup[0][k];
      next = point;
    } else {
      const int64_t size = (n + parts - 1) / parts;
      next = size * (k + 1);
    }
    /* np.split slices x[previous:next]: clamped, never negative. */
    const int64_t lo = previous < n ? previous : n, hi = next < n ? next : n;
    start[k] = lo;
    length[k] = hi > lo ? hi - lo : 0;
    previous = next;
  }
  return MX_ACC_OK;
}

static int split_infer(const cr_params *params, const acc_shape *in, int num_in,
                       acc_shape *out) {
  (void)num_in;
  int axis;
  int64_t start[CR_MAX_OUTPUTS], length[CR_MAX_OUTPUTS];
  int status = split_plan(params, &in[0], &axis, start, length);
  if (status != MX_ACC_OK) return status;
  for (int k = 0; k < split_outputs(params); ++k) {
    out[k] = in[0];
    out[k].dims[axis] = (uint64_t)length[k];
  }
  return MX_ACC_OK;
}

static int split_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int axis;
  int64_t start[CR_MAX_OUTPUTS], length[CR_MAX_OUTPUTS];
  split_plan(params, &in[0].shape, &axis, start, length);
  const acc_shape *x = &in[0].shape;
  const int64_t outer = cr_product(x, 0, axis), inner = cr_product(x, axis + 1, x->ndim);
  const int64_t n = (int64_t)x->dims[axis];
  const size_t elem = cr_in_size(params, 0);
  for (int k = 0; k < split_outputs(params); ++k) {
    if (length[k] == 0 || outer == 0 || inner == 0) continue;
    cr_copy_rows(outer, length[k] * inner, elem,
                 (const unsigned char *)in[0].data + (size_t)(start[k] * inner) * elem, n * inner,
                 out[k].data, length[k] * inner);
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_split = {split_parse, cr_one_input, split_outputs, cr_dtypes_any,
                                       split_infer, split_run};

static int concat_parse(const char *const *keys, const char *const *vals, size_t count,
                        cr_params *params) {
  static const attr_spec kSpecs[] = {{"axis", A_INT, 0, NULL}, {"num_args", A_COUNT, 0, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->num_args = 1;
  return parse_with(kSpecs, keys, vals, count, p);
}

static int concat_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out) {
  int axis;
  if (in[0].ndim == 0) return cr_shape_error("cannot concatenate scalars %s", &in[0]);
  int status = np_axis(P(params)->i[0], in[0].ndim, &axis);
  if (status != MX_ACC_OK) return status;
  *out = in[0];
  for (int k = 1; k < num_in; ++k) {
    if (in[k].ndim != in[0].ndim) return cr_shape_error("input shape %s has another rank", &in[k]);
    for (int d = 0; d < in[0].ndim; ++d) {
      if (d != axis && in[k].dims[d] != in[0].dims[d]) {
        return cr_shape_error("input shape %s does not match the first input's", &in[k]);
      }
    }
    out->dims[axis] += in[k].dims[axis];
  }
  return MX_ACC_OK;
}

static int concat_run(const cr_params *params, const cr_tensor *in, int num_in,
                      const cr_tensor *out, int num_threads) {
  (void)num_threads;
  int axis;
  np_axis(P(params)->i[0], in[0].shape.ndim, &axis);
  const acc_shape *y = &out->shape;
  const int64_t outer = cr_product(y, 0, axis), inner = cr_product(y, axis + 1, y->ndim);
  const int64_t total = (int64_t)y->dims[axis] * inner;
  const size_t elem = cr_out_size(params, 0);
  int64_t at = 0;
  for (int k = 0; k < num_in; ++k) {
    const int64_t width = (int64_t)in[k].shape.dims[axis] * inner;
    if (width > 0 && outer > 0) {
      cr_copy_rows(outer, width, elem, in[k].data, width,
                   (unsigned char *)out->data + (size_t)at * elem, total);
    }
    at += width;
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_concat = {concat_parse, num_args_inputs, cr_one_output,
                                        cr_dtypes_any, concat_infer, concat_run};

/* ---- depth_to_space, space_to_depth, trilu, eye_like, reverse_sequence, one_hot ---- */

static int block_parse(const char *const *keys, const char *const *vals, size_t count,
                       cr_params *params) {
  static const char *const kModes[] = {"DCR", "CRD", NULL};
  static const attr_spec kSpecs[] = {{"blocksize", A_INT, 0, NULL},
                                     {"mode", A_CHOICE, 0, kModes},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->i[0] = 0;
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && p->i[0] <= 0) status = cr_bad_attr("blocksize", "?", "positive");
  return status;
}

static int depth_to_space_infer(const cr_params *params, const acc_shape *in, int num_in,
                                acc_shape *out) {
  (void)num_in;
  const acc_shape *x = &in[0];
  const uint64_t b = (uint64_t)P(params)->i[0];
  if (x->ndim != 4 || b > (1u << 20) || x->dims[1] % (b * b) != 0) {
    return cr_shape_error("depth_to_space needs 4-d data whose channels divide by blocksize^2, "
                          "got %s", x);
  }
  *out = *x;
  out->dims[1] = x->dims[1] / (b * b);
  int status = cr_checked_mul(x->dims[2], b, "shape", &out->dims[2]);
  if (status == MX_ACC_OK) status = cr_checked_mul(x->dims[3], b, "shape", &out->dims[3]);
  return status;
}

static int depth_to_space_run(const cr_params *params, const cr_tensor *in, int num_in,
                              const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const int64_t b = P(params)->i[0], n = (int64_t)x->dims[0], h = (int64_t)x->dims[2];
  const int64_t w = (int64_t)x->dims[3], c = (int64_t)x->dims[1] / (b * b);
  const size_t elem = cr_in_size(params, 0);
  const int crd = P(params)->fn == 1;
  int64_t o = 0;
  for (int64_t in_ = 0; in_ < n; ++in_) {
    for (int64_t ic = 0; ic < c; ++ic) {
      for (int64_t y = 0; y < h * b; ++y) {
        for (int64_t xx = 0; xx < w * b; ++xx, ++o) {
          const int64_t i = y % b, j = xx % b;
          const int64_t channel = crd ? ic * b * b + i * b + j : (i * b + j) * c + ic;
          const int64_t from = ((in_ * c * b * b + channel) * h + y / b) * w + xx / b;
          memcpy((unsigned char *)out->data + (size_t)o * elem,
                 (const unsigned char *)in[0].data + (size_t)from * elem, elem);
        }
      }
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_depth_to_space = {block_parse, cr_one_input, cr_one_output,
                                                cr_dtypes_any, depth_to_space_infer,
                                                depth_to_space_run};

static int space_to_depth_parse(const char *const *keys, const char *const *vals, size_t count,
                                cr_params *params) {
  static const attr_spec kSpecs[] = {{"blocksize", A_INT, 0, NULL}, {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && p->i[0] <= 0) status = cr_bad_attr("blocksize", "?", "positive");
  return status;
}

static int space_to_depth_infer(const cr_params *params, const acc_shape *in, int num_in,
                                acc_shape *out) {
  (void)num_in;
  const acc_shape *x = &in[0];
  const uint64_t b = (uint64_t)P(params)->i[0];
  if (x->ndim != 4 || b > (1u << 20) || x->dims[2] % b != 0 || x->dims[3] % b != 0) {
    return cr_shape_error("space_to_depth needs 4-d data whose height and width divide by "
                          "blocksize, got %s", x);
  }
  *out = *x;
  out->dims[2] = x->dims[2] / b;
  out->dims[3] = x->dims[3] / b;
  return cr_checked_mul(x->dims[1], b * b, "shape", &out->dims[1]);
}

static int space_to_depth_run(const cr_params *params, const cr_tensor *in, int num_in,
                              const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const int64_t b = P(params)->i[0], n = (int64_t)x->dims[0], c = (int64_t)x->dims[1];
  const int64_t h = (int64_t)x->dims[2] / b, w = (int64_t)x->dims[3] / b;
  const size_t elem = cr_in_size(params, 0);
  int64_t o = 0;
  for (int64_t in_ = 0; in_ < n; ++in_) {
    for (int64_t oc = 0; oc < c * b * b; ++oc) {
      const int64_t i = oc / (b * c), j = (oc / c) % b, ic = oc % c;
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t xx = 0; xx < w; ++xx, ++o) {
          const int64_t from = ((in_ * c + ic) * h * b + y * b + i) * w * b + xx * b + j;
          memcpy((unsigned char *)out->data + (size_t)o * elem,
                 (const unsigned char *)in[0].data + (size_t)from * elem, elem);
        }
      }
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_space_to_depth = {space_to_depth_parse, cr_one_input,
                                                cr_one_output, cr_dtypes_any,
                                                space_to_depth_infer, space_to_depth_run};

static int trilu_parse(const char *const *keys, const char *const *vals, size_t count,
                       cr_params *params) {
  static const attr_spec kSpecs[] = {{"upper", A_BOOL, 0, NULL}, {"k", A_INT, 0, NULL},
                                     {NULL, A_INT, 0, NULL}};
  P(params)->flag[0] = 1;
  return parse_with(kSpecs, keys, vals, count, P(params));
}

static int trilu_infer(const cr_params *params, const acc_shape *in, int num_in,
                       acc_shape *out) {
  (void)params;
  (void)num_in;
  if (in[0].ndim < 2) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "trilu of fewer than 2 dimensions (numpy makes "
                    "a square matrix of a vector) is not supported");
  }
  *out = in[0];
  return MX_ACC_OK;
}

static int trilu_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const int64_t rows = (int64_t)x->dims[x->ndim - 2], cols = (int64_t)x->dims[x->ndim - 1];
  const int64_t count = count_of(x), k = P(params)->i[0];
  const size_t elem = cr_in_size(params, 0);
  const unsigned char zero[8] = {0};
  for (int64_t e = 0; e < count; ++e) {
    const int64_t j = e % cols, i = (e / cols) % rows;
    const int keep = P(params)->flag[0] ? j - i >= k : j - i <= k;
    memcpy((unsigned char *)out->data + (size_t)e * elem,
           keep ? (const unsigned char *)in[0].data + (size_t)e * elem : zero, elem);
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_trilu = {trilu_parse, cr_one_input, cr_one_output, cr_dtypes_any,
                                       trilu_infer, trilu_run};

static int eye_like_parse(const char *const *keys, const char *const *vals, size_t count,
                          cr_params *params) {
  static const attr_spec kSpecs[] = {{"k", A_INT, 0, NULL}, {"dtype", A_DTYPE, 1, NULL},
                                     {NULL, A_INT, 0, NULL}};
  P(params)->dtype = -1;
  return parse_with(kSpecs, keys, vals, count, P(params));
}

static int eye_like_dtypes(const cr_params *params) {
  const int dtype = P(params)->dtype;
  return out_dtype_is(params, 0, dtype >= 0 ? dtype : params->in_dtypes[0]);
}

static int eye_like_infer(const cr_params *params, const acc_shape *in, int num_in,
                          acc_shape *out) {
  (void)params;
  (void)num_in;
  if (in[0].ndim != 2) return cr_shape_error("eye_like needs 2-d data, got %s", &in[0]);
  *out = in[0];
  return MX_ACC_OK;
}

static int eye_like_run(const cr_params *params, const cr_tensor *in, int num_in,
                        const cr_tensor *out, int num_threads) {
  (void)in;
  (void)num_in;
  (void)num_threads;
  const int64_t rows = (int64_t)out->shape.dims[0], cols = (int64_t)out->shape.dims[1];
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      cr_store_int(cr_out_dtype(params, 0), out->data, i * cols + j, j - i == P(params)->i[0]);
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_eye_like = {eye_like_parse, cr_one_input, cr_one_output,
                                          eye_like_dtypes, eye_like_infer, eye_like_run};

static int reverse_sequence_parse(const char *const *keys, const char *const *vals,
                                  size_t count, cr_params *params) {
  static const attr_spec kSpecs[] = {{"batch_axis", A_INT, 0, NULL},
                                     {"time_axis", A_INT, 1, NULL},
                                     {NULL, A_INT, 0, NULL}};
  P(params)->i[0] = 1;
  P(params)->i[1] = 0;
  return parse_with(kSpecs, keys, vals, count, P(params));
}

static int reverse_sequence_infer(const cr_params *params, const acc_shape *in, int num_in,
                                  acc_shape *out) {
  (void)num_in;
  const acc_shape *x = &in[0], *lengths = &in[1];
  const int64_t b = P(params)->i[0], t = P(params)->i[1];
  if (b < 0 || t < 0 || b >= x->ndim || t >= x->ndim || b == t || lengths->ndim != 1 ||
      lengths->dims[0] > x->dims[b]) {
    return cr_shape_error("reverse_sequence: lengths of shape %s do not fit the data", lengths);
  }
  *out = *x;
  return MX_ACC_OK;
}

static int reverse_sequence_run(const cr_params *params, const cr_tensor *in, int num_in,
                                const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const int b = (int)P(params)->i[0], t = (int)P(params)->i[1];
  const int64_t steps = (int64_t)x->dims[t];
  const size_t elem = cr_in_size(params, 0);
  int64_t xs[CR_MAX_NDIM];
  cr_compact_strides(x, xs);
  cr_copy_run(params, in, 1, out, 0);
  const int64_t batches = (int64_t)in[1].shape.dims[0];
  const int64_t count = count_of(x);
  for (int64_t bi = 0; bi < batches; ++bi) {
    const int64_t length = cr_load_as_int64(cr_in_dtype(params, 1), in[1].data, bi);
    int64_t src_first, src_len, dst_first, dst_len;
    py_slice(0, length, 1, steps, &src_first, &src_len);
    if (length != 0) {
      py_slice(length - 1, INT64_MIN / 2, -1, steps, &dst_first, &dst_len);
    } else {
      dst_first = 0;
      dst_len = 0;
    }
    if (src_len != dst_len) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "reverse_sequence: length %lld does not fit",
                      (long long)length);
    }
    /* every element whose batch index is bi and time index < src_len */
    for (int64_t e = 0; e < count; ++e) {
      const int64_t bidx = (e / xs[b]) % (int64_t)x->dims[b];
      const int64_t tidx = (e / xs[t]) % steps;
      if (bidx != bi || tidx >= src_len) continue;
      const int64_t from = e + (dst_first - tidx - tidx) * xs[t];
      memcpy((unsigned char *)out->data + (size_t)e * elem,
             (const unsigned char *)in[0].data + (size_t)from * elem, elem);
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_reverse_sequence = {reverse_sequence_parse, cr_two_inputs,
                                                  cr_one_output, cr_dtypes_first_any,
                                                  reverse_sequence_infer, reverse_sequence_run};

static int one_hot_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  static const attr_spec kSpecs[] = {{"depth", A_INT, 0, NULL}, {"axis", A_INT, 1, NULL},
                                     {NULL, A_INT, 0, NULL}};
  P(params)->i[0] = -1;
  P(params)->i[1] = -1;
  int status = parse_with(kSpecs, keys, vals, count, P(params));
  if (status == MX_ACC_OK && P(params)->i[0] < 0) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute depth must be given, not negative");
  }
  return status;
}

static int one_hot_dtypes(const cr_params *params) {
  return out_dtype_is(params, 0, params->in_dtypes[1]);
}

static int one_hot_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)num_in;
  const acc_shape *idx = &in[0];
  if (idx->ndim + 1 > CR_MAX_NDIM || count_of(&in[1]) < 2) {
    return cr_shape_error("one_hot: indices %s make too many dimensions, or values has fewer "
                          "than 2 elements", idx);
  }
  const int axis = (int)py_mod_int(P(params)->i[1], idx->ndim + 1);
  out->ndim = idx->ndim + 1;
  for (int d = 0, s = 0; d < out->ndim; ++d) {
    out->dims[d] = d == axis ? (uint64_t)P(params)->i[0] : idx->dims[s++];
  }
  return MX_ACC_OK;
}

static int one_hot_run(const cr_params *params, const cr_tensor *in, int num_in,
                       const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const int64_t depth = P(params)->i[0];
  const int axis = (int)py_mod_int(P(params)->i[1], in[0].shape.ndim + 1);
  const int64_t outer = cr_product(&out->shape, 0, axis);
  const int64_t inner = cr_product(&out->shape, axis + 1, out->shape.ndim);
  const size_t elem = cr_out_size(params, 0);
  const unsigned char *values = in[1].data;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t d = 0; d < depth; ++d) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t v = cr_load_as_int64(cr_in_dtype(params, 0), in[0].data, o * inner + i);
        if (v < 0) v += depth;
        memcpy((unsigned char *)out->data + (size_t)((o * depth + d) * inner + i) * elem,
               values + (v == d ? elem : 0), elem);
      }
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_one_hot = {one_hot_parse, cr_two_inputs, cr_one_output,
                                         one_hot_dtypes, one_hot_infer, one_hot_run};
