/*
 * The ONNX importer's gathers and scatters with index tensors, in cpu_ref
 * (see ops_onnx.c): _onnx_gather, _onnx_gather_elements, _onnx_gather_nd,
 * _onnx_scatter_elements and _onnx_scatter_nd: the operators that move
 * elements (ops_onnx_movement.c) by index tensors.
 */
#include <math.h>
#include <string.h>

#include "ops_onnx_impl.h"
#include "tensor.h"

/* ======================================================================= */
/* Moving elements                                                          */
/* ======================================================================= */

/* ---- gathers and scatters with index tensors ----------------------------------- */

static int index_dtypes(const cr_params *params) {
  /* data (and updates) share the output's dtype; indices may have any */
  int status = out_dtype_is(params, 0, params->in_dtypes[0]);
  if (status == MX_ACC_OK && params->num_inputs > 2) {
    status = cr_dtype_expect("input", 2, params->in_dtypes[2], params->in_dtypes[0]);
  }
  return status;
}

/* Index i of an index tensor as numpy's astype(int64), made non-negative
 * by adding size when negative; -1 when it is still outside [0, size). */
static int64_t index_at(cr_dtype dtype, const void *indices, int64_t i, int64_t size) {
  int64_t v = cr_load_as_int64(dtype, indices, i);
  if (v < 0) v += size;
  return v >= 0 && v < size ? v : -1;
}

static int gather_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out) {
  (void)num_in;
  const acc_shape *x = &in[0], *idx = &in[1];
  if (x->ndim == 0) return cr_shape_error("cannot gather from a scalar %s", x);
  const int axis = (int)py_mod_int(P(params)->i[0], x->ndim);
  if (x->ndim - 1 + idx->ndim > CR_MAX_NDIM) return cr_shape_error("too many dimensions %s", idx);
  if (x->dims[axis] == 0 && count_of(idx) > 0) {
    return cr_shape_error("cannot gather from an empty axis of %s", x);
  }
  out->ndim = 0;
  for (int d = 0; d < axis; ++d) out->dims[out->ndim++] = x->dims[d];
  for (int d = 0; d < idx->ndim; ++d) out->dims[out->ndim++] = idx->dims[d];
  for (int d = axis + 1; d < x->ndim; ++d) out->dims[out->ndim++] = x->dims[d];
  return MX_ACC_OK;
}

static int gather_parse(const char *const *keys, const char *const *vals, size_t count,
                        cr_params *params) {
  return parse_with(kAxisSpec, keys, vals, count, P(params));
}

static int gather_run(const cr_params *params, const cr_tensor *in, int num_in,
                      const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const int axis = (int)py_mod_int(P(params)->i[0], x->ndim);
  const int64_t outer = cr_product(x, 0, axis), n = (int64_t)x->dims[axis];
  const int64_t inner = cr_product(x, axis + 1, x->ndim), count = count_of(&in[1].shape);
  const size_t elem = cr_in_size(params, 0);
  const cr_dtype idx_type = cr_in_dtype(params, 1);
  for (int64_t j = 0; j < count; ++j) {
    if (index_at(idx_type, in[1].data, j, n) < 0) return index_error("gather");
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      const int64_t at = index_at(idx_type, in[1].data, j, n);
      if (inner > 0) {
        memcpy((unsigned char *)out->data + (size_t)((o * count + j) * inner) * elem,
               (const unsigned char *)in[0].data + (size_t)((o * n + at) * inner) * elem,
               (size_t)inner * elem);
      }
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_gather = {gather_parse, cr_two_inputs, cr_one_output,
                                        index_dtypes, gather_infer, gather_run};

/* take_along_axis: indices and data broadcast on the other axes. */
static int gather_elements_infer(const cr_params *params, const acc_shape *in, int num_in,
                                 acc_shape *out) {
  (void)num_in;
  const acc_shape *x = &in[0], *idx = &in[1];
  if (x->ndim == 0 || idx->ndim != x->ndim) {
    return cr_shape_error("indices shape %s must have the data's rank", idx);
  }
  const int axis = (int)py_mod_int(P(params)->i[0], x->ndim);
  out->ndim = x->ndim;
  for (int d = 0; d < x->ndim; ++d) {
    if (d == axis) {
      out->dims[d] = idx->dims[d];
      if (x->dims[d] == 0 && idx->dims[d] > 0) return cr_shape_error("empty axis in %s", x);
    } else if (x->dims[d] == idx->dims[d] || idx->dims[d] == 1 || x->dims[d] == 1) {
      out->dims[d] = idx->dims[d] == 1 ? x->dims[d] : idx->dims[d];
    } else {
      return cr_shape_error("indices shape %s does not broadcast with the data's", idx);
    }
  }
  return MX_ACC_OK;
}

static int gather_elements_run(const cr_params *params, const cr_tensor *in, int num_in,
                               const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape, *idx = &in[1].shape, *y = &out->shape;
  const int axis = (int)py_mod_int(P(params)->i[0], x->ndim);
  const int64_t count = count_of(y);
  const size_t elem = cr_in_size(params, 0);
  int64_t xs[CR_MAX_NDIM], is[CR_MAX_NDIM], pos[CR_MAX_NDIM] = {0};
  cr_compact_strides(x, xs);
  cr_compact_strides(idx, is);
  for (int64_t i = 0; i < count; ++i) {
    int64_t xo = 0, io = 0;
    for (int d = 0; d < y->ndim; ++d) {
      io += (idx->dims[d] == 1 ? 0 : pos[d]) * is[d];
      if (d != axis) xo += (x->dims[d] == 1 ? 0 : pos[d]) * xs[d];
    }
    const int64_t at = index_at(cr_in_dtype(params, 1), in[1].data, io, (int64_t)x->dims[axis]);
    if (at < 0) return index_error("gather_elements");
    memcpy((unsigned char *)out->data + (size_t)i * elem,
           (const unsigned char *)in[0].data + (size_t)(xo + at * xs[axis]) * elem, elem);
    for (int d = y->ndim - 1; d >= 0; --d) {
      if (++pos[d] < (int64_t)y->dims[d]) break;
      pos[d] = 0;
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_gather_elements = {gather_parse, cr_two_inputs, cr_one_output,
                                                 index_dtypes, gather_elements_infer,
                                                 gather_elements_run};

static int gather_nd_parse(const char *const *keys, const char *const *vals, size_t count,
                           cr_params *params) {
  static const attr_spec kSpecs[] = {{"batch_dims", A_INT, 0, NULL}, {NULL, A_INT, 0, NULL}};
  return parse_with(kSpecs, keys, vals, count, P(params));
}

static int gather_nd_infer(const cr_params *params, const acc_shape *in, int num_in,
                           acc_shape *out) {
  (void)num_in;
  const acc_shape *x = &in[0], *idx = &in[1];
  const int64_t b = P(params)->i[0];
  if (idx->ndim < 1 || b < 0 || b >= idx->ndim || b > x->ndim) {
    return cr_shape_error("indices shape %s does not fit batch_dims", idx);
  }
  const int64_t k = (int64_t)idx->dims[idx->ndim - 1];
  if (k < 1 || b + k > x->ndim) return cr_shape_error("indices shape %s indexes too many axes", idx);
  for (int d = 0; d < b; ++d) {
    if (idx->dims[d] != x->dims[d]) return cr_shape_error("batch axes of %s differ", idx);
  }
  out->ndim = 0;
  for (int d = 0; d < idx->ndim - 1; ++d) out->dims[out->ndim++] = idx->dims[d];
  for (int d = (int)(b + k); d < x->ndim; ++d) {
    if (out->ndim == CR_MAX_NDIM) return cr_shape_error("too many dimensions %s", idx);
    out->dims[out->ndim++] = x->dims[d];
  }
  return MX_ACC_OK;
}

/* The element offset in x of index row r (batch batch): -1 when out of
 * range. */
static int64_t nd_offset(const cr_params *params, const acc_shape *x, const void *indices,
                         int64_t row, int64_t k, int64_t b, int64_t batch) {
  int64_t xs[CR_MAX_NDIM];
  cr_compact_strides(x, xs);
  int64_t offset = b > 0 ? batch * xs[b - 1] : 0;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t at = index_at(cr_in_dtype(params, 1), indices, row * k + j,
                                (int64_t)x->dims[b + j]);
    if (at < 0) return -1;
    offset += at * xs[b + j];
  }
  return offset;
}

static int gather_nd_run(const cr_params *params, const cr_tensor *in, int num_in,
                         const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape, *idx = &in[1].shape;
  const int64_t b = P(params)->i[0], k = (int64_t)idx->dims[idx->ndim - 1];
  const int64_t rows = cr_product(idx, 0, idx->ndim - 1);
  const int64_t per_batch = cr_product(idx, (int)b, idx->ndim - 1);
  const int64_t slab = cr_product(x, (int)(b + k), x->ndim);
  const size_t elem = cr_in_size(params, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t offset = nd_offset(params, x, in[1].data, r, k, b, per_batch ? r / per_batch : 0);
    if (offset < 0) return index_error("gather_nd");
    if (slab > 0) {
      memcpy((unsigned char *)out->data + (size_t)(r * slab) * elem,
             (const unsigned char *)in[0].data + (size_t)offset * elem, (size_t)slab * elem);
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_gather_nd = {gather_nd_parse, cr_two_inputs, cr_one_output,
                                           index_dtypes, gather_nd_infer, gather_nd_run};

enum { R_NONE, R_ADD, R_MUL, R_MAX, R_MIN };
static const char *const kReductions[] = {"none", "add", "mul", "max", "min", NULL};

/* One scatter update of element at of y (dtype) by element from of u. */
static void scatter_one(int reduction, cr_dtype dtype, void *y, int64_t at, const void *u,
                        int64_t from) {
  if (reduction == R_NONE) {
    const size_t elem = cr_dtype_size(dtype);
    memcpy((unsigned char *)y + (size_t)at * elem, (const unsigned char *)u + (size_t)from * elem,
           elem);
    return;
  }
  if (is_int(dtype)) {
    const int64_t a = cr_load_int(dtype, y, at), b = cr_load_int(dtype, u, from);
    int64_t r = reduction == R_ADD ? wadd(a, b) : reduction == R_MUL ? wmul(a, b)
              : reduction == R_MAX ? (b > a ? b : a) : (b < a ? b : a);
    cr_store_int(dtype, y, at, wrap_int(dtype, r));
  } else {
    const double a = cr_load_double(dtype, y, at), b = cr_load_double(dtype, u, from);
    double r;
    if (reduction == R_ADD) r = a + b;
    else if (reduction == R_MUL) r = a * b;
    else if (isnan(a) || isnan(b)) r = NAN;
    else r = reduction == R_MAX ? (b > a ? b : a) : (b < a ? b : a);
    cr_store_double(dtype, y, at, r);
  }
}

static int scatter_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  static const attr_spec kSpecs[] = {{"axis", A_INT, 0, NULL},
                                     {"reduction", A_CHOICE, 0, kReductions},
                                     {NULL, A_INT, 0, NULL}};
  return parse_with(kSpecs, keys, vals, count, P(params));
}

static int scatter_elements_infer(const cr_params *params, const acc_shape *in, int num_in,
                                  acc_shape *out) {
  (void)num_in;
  const acc_shape *x = &in[0], *idx = &in[1];
  if (x->ndim == 0 || idx->ndim != x->ndim || !acc_shape_equal(idx, &in[2])) {
    return cr_shape_error("indices and updates of shape %s do not fit the data", idx);
  }
  (void)params;
  *out = *x;
  return MX_ACC_OK;
}

static int scatter_elements_run(const cr_params *params, const cr_tensor *in, int num_in,
                                const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape, *idx = &in[1].shape;
  const int axis = (int)py_mod_int(P(params)->i[0], x->ndim);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  cr_copy_run(params, in, 1, out, 0);
  int64_t xs[CR_MAX_NDIM], pos[CR_MAX_NDIM] = {0};
  cr_compact_strides(x, xs);
  const int64_t count = count_of(idx);
  for (int64_t i = 0; i < count; ++i) {
    int64_t offset = 0;
    for (int d = 0; d < x->ndim; ++d) {
      if (d == axis) continue;
      if (pos[d] >= (int64_t)x->dims[d]) return index_error("scatter_elements");
      offset += pos[d] * xs[d];
    }
    const int64_t at = index_at(cr_in_dtype(params, 1), in[1].data, i, (int64_t)x->dims[axis]);
    if (at < 0) return index_error("scatter_elements");
    scatter_one(P(params)->fn, dtype, out->data, offset + at * xs[axis], in[2].data, i);
    for (int d = idx->ndim - 1; d >= 0; --d) {
      if (++pos[d] < (int64_t)idx->dims[d]) break;
      pos[d] = 0;
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_scatter_elements = {scatter_parse, cr_three_inputs, cr_one_output,
                                                  index_dtypes, scatter_elements_infer,
                                                  scatter_elements_run};

static int scatter_nd_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  (void)num_in;
  (void)params;
  const acc_shape *x = &in[0], *idx = &in[1], *u = &in[2];
  if (idx->ndim < 1) return cr_shape_error("indices shape %s has no last axis", idx);
  const int64_t k = (int64_t)idx->dims[idx->ndim - 1];
  if (k > x->ndim || u->ndim != idx->ndim - 1 + x->ndim - k) {
    return cr_shape_error("updates shape %s does not fit", u);
  }
  for (int d = 0; d < idx->ndim - 1; ++d) {
    if (u->dims[d] != idx->dims[d]) return cr_shape_error("updates shape %s does not fit", u);
  }
  for (int d = 0; d < x->ndim - k; ++d) {
    if (u->dims[idx->ndim - 1 + d] != x->dims[k + d]) {
      return cr_shape_error("updates shape %s does not fit", u);
    }
  }
  *out = *x;
  return MX_ACC_OK;
}

static int scatter_nd_run(const cr_params *params, const cr_tensor *in, int num_in,
                          const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape, *idx = &in[1].shape;
  const int64_t k = (int64_t)idx->dims[idx->ndim - 1];
  const int64_t rows = cr_product(idx, 0, idx->ndim - 1), slab = cr_product(x, (int)k, x->ndim);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  cr_copy_run(params, in, 1, out, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t offset = nd_offset(params, x, in[1].data, r, k, 0, 0);
    if (offset < 0) return index_error("scatter_nd");
    for (int64_t e = 0; e < slab; ++e) {
      scatter_one(P(params)->fn, dtype, out->data, offset + e, in[2].data, r * slab + e);
    }
  }
  return MX_ACC_OK;
}

static int scatter_nd_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  static const attr_spec kSpecs[] = {{"reduction", A_CHOICE, 0, kReductions},
                                     {NULL, A_INT, 0, NULL}};
  return parse_with(kSpecs, keys, vals, count, P(params));
}

const cr_op_impl cr_impl_onnx_scatter_nd = {scatter_nd_parse, cr_three_inputs, cr_one_output,
                                            index_dtypes, scatter_nd_infer, scatter_nd_run};
