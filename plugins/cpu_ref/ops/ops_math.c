/*
 * Arithmetic operators of cpu_ref: element-wise arithmetic and comparisons
 * (same-shape, broadcasting, with a scalar), element-wise math, reductions
 * and matrix products. All compute in float32 (float16 data widened, see
 * cr_run_float32); the comparisons, the logical operations and logical_not
 * also run on integers, exactly.
 *
 * Each section parses its operator's attributes with the registry's
 * defaults, checks the input shapes and infers the outputs', and calls the
 * kernel; the table in ops.c lists them. Operators that share a kernel
 * (all the unary functions, all the scalar operators, ...) share one family
 * and read which member they are from params->variant.
 */
#include <string.h>

#include "attrs.h"
#include "op_impl.h"
#include "reference.h"
#include "status.h"
#include "tensor.h"

/* ---- dtypes of the element-wise families -------------------------------- */

/* The predicates (comparisons, logical operations, logical_not) give 0/1 in
 * the operands' dtype and compare integers exactly; everything else
 * computes in float32. */
static int elementwise_dtypes(const cr_params *params, int predicate) {
  if (predicate && cr_dtype_is_integer(cr_in_dtype(params, 0))) return cr_dtypes_any(params);
  return cr_dtypes_float(params);
}

static int binary_dtypes(const cr_params *params) {
  cr_binary_op op = (cr_binary_op)(params->variant & ~CR_SCALAR_ON_LEFT);
  return elementwise_dtypes(params, cr_binary_is_predicate(op));
}

/* ---- elemwise_* (operands of one shape) -------------------------------- */

static int same_shapes_infer(const cr_params *params, const acc_shape *in, int num_in,
                             acc_shape *out) {
  (void)params;
  for (int i = 1; i < num_in; ++i) {
    if (!acc_shape_equal(&in[0], &in[i])) {
      return cr_shape_error("operand shapes differ; another operand is %s", &in[i]);
    }
  }
  *out = in[0];
  return MX_ACC_OK;
}

static int elemwise_compute(const cr_params *params, const cr_tensor *in, int num_in,
                            const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const int64_t count = cr_element_count(&out->shape), unit = 1;
  if (cr_dtype_is_integer(cr_in_dtype(params, 0))) {
    /* Integers (predicates only): a broadcast of two operands of one shape. */
    cr_broadcast_predicate_int((cr_binary_op)params->variant, cr_in_dtype(params, 0), 1, &count,
                               &unit, &unit, in[0].data, in[1].data, out->data);
  } else {
    (params->kernels == CR_KERNELS_REFERENCE ? cr_binary : cr_fast_binary)(
        (cr_binary_op)params->variant, count, in[0].data, in[1].data, out->data);
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(elemwise_run, elemwise_compute)

/* ---- broadcast_* (numpy broadcasting) ---------------------------------- */

static int broadcast_infer(const cr_params *params, const acc_shape *in, int num_in,
                           acc_shape *out) {
  (void)params;
  (void)num_in;
  const acc_shape *a = &in[0], *b = &in[1];
  int ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
  out->ndim = ndim;
  /* Shapes are aligned at their last axes; missing leading axes are 1. */
  for (int d = 0; d < ndim; ++d) {
    int da = d - (ndim - a->ndim), db = d - (ndim - b->ndim);
    uint64_t ea = da >= 0 ? a->dims[da] : 1, eb = db >= 0 ? b->dims[db] : 1;
    if (ea != eb && ea != 1 && eb != 1) {
      char left[256], right[256];
      acc_shape_format(a, left, sizeof left);
      acc_shape_format(b, right, sizeof right);
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "shapes %s and %s cannot be broadcast together",
                      left, right);
    }
    out->dims[d] = ea == 1 ? eb : ea;
  }
  return MX_ACC_OK;
}

/* The strides that read operand x (right-aligned in ndim axes) at every
 * output position: 0 along the axes it is broadcast over. */
static void broadcast_strides(const acc_shape *x, int ndim, int64_t strides[CR_MAX_NDIM]) {
  int64_t own[CR_MAX_NDIM];
  cr_compact_strides(x, own);
  for (int d = 0; d < ndim; ++d) {
    int dx = d - (ndim - x->ndim);
    strides[d] = dx >= 0 && x->dims[dx] != 1 ? own[dx] : 0;
  }
}

static int broadcast_compute(const cr_params *params, const cr_tensor *in, int num_in,
                             const cr_tensor *out, int num_threads) {
  (void)num_in;
  int64_t dims[CR_MAX_NDIM], a_strides[CR_MAX_NDIM], b_strides[CR_MAX_NDIM];
  int ndim = cr_view_dims(&out->shape, dims);
  broadcast_strides(&in[0].shape, ndim, a_strides);
  broadcast_strides(&in[1].shape, ndim, b_strides);
  if (cr_dtype_is_integer(cr_in_dtype(params, 0))) {
    cr_broadcast_predicate_int((cr_binary_op)params->variant, cr_in_dtype(params, 0), ndim, dims,
                               a_strides, b_strides, in[0].data, in[1].data, out->data);
  } else if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_broadcast_binary((cr_binary_op)params->variant, ndim, dims, a_strides, b_strides,
                        in[0].data, in[1].data, out->data);
  } else {
    cr_fast_broadcast_binary_shared((cr_binary_op)params->variant, ndim, dims, a_strides,
                                    b_strides, in[0].data, in[1].data, out->data, num_threads);
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(broadcast_run, broadcast_compute)

/* ---- _*_scalar --------------------------------------------------------- */

static int scalar_parse(const char *const *keys, const char *const *vals, size_t count,
                        cr_params *params) {
  params->u.scalar = 1.0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status, is_int;
    if (strcmp(key, "scalar") == 0) {
      status = cr_parse_float(key, value, &params->u.scalar);
    } else if (strcmp(key, "is_int") == 0) {
      /* Only says how MXNet 1.9 printed the scalar, which is converted to
       * the data's dtype either way. */
      status = cr_parse_bool(key, value, &is_int);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* A float32 or float16 operand as the float32 value compute sees: float16
 * values arrive widened, so a constant of float16 data is rounded to
 * float16 first (MXNet converts scalars and bounds to the data's dtype). */
static float as_data_float(const cr_params *params, double value) {
  if (cr_in_dtype(params, 0) == CR_FLOAT16) return cr_half_to_float(cr_half_from_double(value));
  return (float)value;
}

/* One element of dtype, zero-filled beyond its size: room for any dtype. */
typedef union element_bytes {
  unsigned char bytes[8];
  int64_t aligned;
} element_bytes;

static int scalar_compute(const cr_params *params, const cr_tensor *in, int num_in,
                          const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const cr_binary_op op = (cr_binary_op)(params->variant & ~CR_SCALAR_ON_LEFT);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const int64_t count = cr_element_count(&out->shape), unit = 1, none = 0;
  if (cr_dtype_is_integer(dtype)) {
    /* Integers (predicates, never reversed): the scalar converted to the
     * data's dtype, broadcast as an operand of one element. */
    element_bytes scalar = {{0}};
    cr_store_double(dtype, scalar.bytes, 0, params->u.scalar);
    cr_broadcast_predicate_int(op, dtype, 1, &count, &unit, &none, in[0].data, scalar.bytes,
                               out->data);
    return MX_ACC_OK;
  }
  (params->kernels == CR_KERNELS_REFERENCE ? cr_scalar_binary : cr_fast_scalar_binary)(
      op, (params->variant & CR_SCALAR_ON_LEFT) != 0, count, in[0].data,
                   as_data_float(params, params->u.scalar), out->data);
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(scalar_run, scalar_compute)

/* ---- unary math, clip, zeros_like / ones_like, add_n ------------------- */

static int unary_dtypes(const cr_params *params) {
  return elementwise_dtypes(params, params->variant == CR_UNARY_LOGICAL_NOT);
}

static int unary_compute(const cr_params *params, const cr_tensor *in, int num_in,
                         const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const int64_t count = cr_element_count(&out->shape), unit = 1, none = 0;
  if (cr_dtype_is_integer(dtype)) {
    /* logical_not of integers: x == 0, against a zero of one element. */
    const element_bytes zero = {{0}};
    cr_broadcast_predicate_int(CR_BINARY_EQUAL, dtype, 1, &count, &unit, &none, in[0].data,
                               zero.bytes, out->data);
    return MX_ACC_OK;
  }
  if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_unary((cr_unary_op)params->variant, count, in[0].data, out->data);
  } else {
    cr_fast_unary_shared((cr_unary_op)params->variant, count, in[0].data, out->data,
                         num_threads);
  }
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(unary_run, unary_compute)

static int clip_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  double bounds[2];
  int given[2] = {0, 0};
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int which = strcmp(key, "a_min") == 0 ? 0 : strcmp(key, "a_max") == 0 ? 1 : -1;
    if (which < 0) return cr_unknown_attr(key);
    int status = cr_parse_float(key, value, &bounds[which]);
    if (status != MX_ACC_OK) return status;
    given[which] = 1;
  }
  if (!given[0] || !given[1]) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "attributes a_min and a_max are required");
  }
  /* MXNet keeps the bounds as float32. */
  params->u.clip.low = (float)bounds[0];
  params->u.clip.high = (float)bounds[1];
  return MX_ACC_OK;
}

static int clip_compute(const cr_params *params, const cr_tensor *in, int num_in,
                        const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  cr_clip(cr_element_count(&out->shape), as_data_float(params, params->u.clip.low),
          as_data_float(params, params->u.clip.high), in[0].data, out->data);
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(clip_run, clip_compute)

/* zeros_like / ones_like fill in the data's dtype, whatever it is. */
static int fill_like_run(const cr_params *params, const cr_tensor *in, int num_in,
                         const cr_tensor *out, int num_threads) {
  (void)in;
  (void)num_in;
  (void)num_threads;
  element_bytes value = {{0}};
  cr_store_int(cr_out_dtype(params, 0), value.bytes, 0, params->variant);
  cr_fill_elements(cr_element_count(&out->shape), cr_out_size(params, 0), value.bytes,
                   out->data);
  return MX_ACC_OK;
}

static int num_args_parse(const char *const *keys, const char *const *vals, size_t count,
                          cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(keys[i], "num_args") != 0) return cr_unknown_attr(keys[i]);
    int status = cr_parse_count(keys[i], vals[i], CR_MAX_INPUTS, &params->u.num_args);
    if (status != MX_ACC_OK) return status;
  }
  return cr_require_count("num_args", params->u.num_args);
}

static int num_args_inputs(const cr_params *params) { return params->u.num_args; }

static int add_n_compute(const cr_params *params, const cr_tensor *in, int num_in,
                         const cr_tensor *out, int num_threads) {
  (void)num_threads;
  const int64_t count = cr_element_count(&out->shape);
  void (*const add_n)(int, int64_t, const float *const *, float *) =
      params->kernels == CR_KERNELS_REFERENCE ? cr_add_n : cr_fast_add_n;
  if (cr_in_dtype(params, 0) == CR_FLOAT16) {
    /* MXNet adds float16 arrays pairwise into a float16 total, rounding
     * after each addition. */
    const float *pair[2] = {in[0].data, NULL};
    if (num_in == 1) add_n(1, count, pair, out->data);
    for (int i = 1; i < num_in; ++i) {
      pair[1] = in[i].data;
      add_n(2, count, pair, out->data);
      cr_round_to_half(count, out->data);
      pair[0] = out->data;
    }
    return MX_ACC_OK;
  }
  const float *inputs[CR_MAX_INPUTS];
  for (int i = 0; i < num_in; ++i) inputs[i] = in[i].data;
  add_n(num_in, count, inputs, out->data);
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(add_n_run, add_n_compute)

/* ---- sum, mean, prod, nansum, nanprod, max, min ------------------------ */

static int reduce_parse(const char *const *keys, const char *const *vals, size_t count,
                        cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status;
    if (strcmp(key, "axis") == 0) {
      status = cr_parse_axes(key, value, &params->u.reduce.axis);
    } else if (strcmp(key, "keepdims") == 0) {
      status = cr_parse_bool(key, value, &params->u.reduce.keepdims);
    } else if (strcmp(key, "exclude") == 0) {
      status = cr_parse_bool(key, value, &params->u.reduce.exclude);
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* Which axes are reduced, by MXNet's rules: all of them when axis is None
 * or empty; otherwise the listed ones, or with exclude all the others. */
static int reduced_axes(const cr_params *params, const acc_shape *in,
                        unsigned char reduced[CR_MAX_NDIM]) {
  const cr_axes *axis = &params->u.reduce.axis;
  int all = !axis->given || axis->count == 0;
  unsigned char listed[CR_MAX_NDIM] = {0};
  for (int i = 0; !all && i < axis->count; ++i) {
    int d;
    int status = cr_resolve_axis(axis->values[i], in->ndim, &d);
    if (status != MX_ACC_OK) return status;
    if (listed[d]) return acc_fail(MX_ACC_ERR_INVALID_ARG, "axis %d is listed twice", d);
    listed[d] = 1;
  }
  for (int d = 0; d < in->ndim; ++d) reduced[d] = all || (listed[d] != params->u.reduce.exclude);
  return MX_ACC_OK;
}

static int reduce_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out) {
  (void)num_in;
  unsigned char reduced[CR_MAX_NDIM];
  int status = reduced_axes(params, &in[0], reduced);
  if (status != MX_ACC_OK) return status;
  cr_reduce_op op = (cr_reduce_op)params->variant;
  if ((op == CR_REDUCE_MAX || op == CR_REDUCE_MIN) && cr_element_count(&in[0]) == 0) {
    return cr_shape_error("cannot take the max or min of the empty shape %s", &in[0]);
  }
  out->ndim = 0;
  for (int d = 0; d < in[0].ndim; ++d) {
    if (params->u.reduce.keepdims) {
      out->dims[out->ndim++] = reduced[d] ? 1 : in[0].dims[d];
    } else if (!reduced[d]) {
      out->dims[out->ndim++] = in[0].dims[d];
    }
  }
  if (out->ndim == 0 && !(params->u.reduce.keepdims && in[0].ndim == 0)) {
    out->ndim = 1; /* MXNet never makes 0-d arrays, except keeping a 0-d input's */
    out->dims[0] = 1;
  }
  return MX_ACC_OK;
}

static int reduce_compute(const cr_params *params, const cr_tensor *in, int num_in,
                          const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  /* A 0-d input is viewed as (1,), its one axis reduced. */
  unsigned char reduced[CR_MAX_NDIM] = {1};
  int64_t dims[CR_MAX_NDIM];
  reduced_axes(params, &in[0].shape, reduced); /* checked at infer */
  int ndim = cr_view_dims(&in[0].shape, dims);
  cr_reduce((cr_reduce_op)params->variant, ndim, dims, reduced, in[0].data, out->data);
  return MX_ACC_OK;
}

CR_DEFINE_FLOAT32_RUN(reduce_run, reduce_compute)

/* ---- dot, batch_dot ---------------------------------------------------- */

static int dot_parse(const char *const *keys, const char *const *vals, size_t count,
                     cr_params *params) {
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK;
    if (strcmp(key, "transpose_a") == 0) {
      status = cr_parse_bool(key, value, &params->u.dot.transpose_a);
    } else if (strcmp(key, "transpose_b") == 0) {
      status = cr_parse_bool(key, value, &params->u.dot.transpose_b);
    } else if (strcmp(key, "forward_stype") == 0) {
      /* Sparse output storage is not something cpu_ref produces. */
      if (!acc_attr_is_none(value) && !acc_attr_equals(value, "default")) {
        status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "forward_stype \"%s\" is not supported", value);
      }
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* A product's dimensions for cr_matmul. */
typedef struct product_dims {
  int64_t batch, m, n, k;
} product_dims;

/* dot contracts lhs's last axis (first when transpose_a) with rhs's first
 * (last when transpose_b); the other axes of both make the output's, in
 * order. So lhs is an m x k matrix (stored k x m when transposed) and rhs a
 * k x n one. Two vectors give their inner product, of shape (1,). */
static int dot_layout(const cr_params *params, const acc_shape *lhs, const acc_shape *rhs,
                      product_dims *dims, acc_shape *out) {
  int ta = params->u.dot.transpose_a, tb = params->u.dot.transpose_b;
  if (lhs->ndim == 0 || rhs->ndim == 0) return cr_shape_error("dot of a 0-d array %s", lhs);
  uint64_t inner_l = ta ? lhs->dims[0] : lhs->dims[lhs->ndim - 1];
  uint64_t inner_r = tb ? rhs->dims[rhs->ndim - 1] : rhs->dims[0];
  if (inner_l != inner_r || (lhs->ndim == 1 && rhs->ndim == 1 && (ta || tb))) {
    return cr_shape_error("the contracted axes differ (or vectors are transposed); rhs is %s",
                          rhs);
  }
  dims->batch = 1;
  dims->k = (int64_t)inner_l;
  if (lhs->ndim == 1 && rhs->ndim == 1) {
    dims->m = dims->n = 1;
    out->ndim = 1;
    out->dims[0] = 1;
    return MX_ACC_OK;
  }
  /* The axes each operand keeps: all but the contracted one (none of a
   * vector's). */
  int l_begin = 0, l_end = 0, r_begin = 0, r_end = 0;
  if (lhs->ndim > 1) {
    l_begin = ta ? 1 : 0;
    l_end = ta ? lhs->ndim : lhs->ndim - 1;
  }
  if (rhs->ndim > 1) {
    r_begin = tb ? 0 : 1;
    r_end = tb ? rhs->ndim - 1 : rhs->ndim;
  }
  if ((l_end - l_begin) + (r_end - r_begin) > MX_ACC_MAX_NDIM) {
    return cr_shape_error("the product would have more than 16 dimensions; rhs is %s", rhs);
  }
  dims->m = cr_product(lhs, l_begin, l_end);
  dims->n = cr_product(rhs, r_begin, r_end);
  out->ndim = 0;
  for (int d = l_begin; d < l_end; ++d) out->dims[out->ndim++] = lhs->dims[d];
  for (int d = r_begin; d < r_end; ++d) out->dims[out->ndim++] = rhs->dims[d];
  return MX_ACC_OK;
}

/* batch_dot: matrix products of the last two axes, batched over the leading
 * ones, which both operands share. */
static int batch_dot_layout(const cr_params *params, const acc_shape *lhs, const acc_shape *rhs,
                            product_dims *dims, acc_shape *out) {
  int ta = params->u.dot.transpose_a, tb = params->u.dot.transpose_b, n = lhs->ndim;
  if (n < 3 || rhs->ndim != n) {
    return cr_shape_error("operands need one number (>= 3) of dimensions; rhs is %s", rhs);
  }
  for (int d = 0; d < n - 2; ++d) {
    if (lhs->dims[d] != rhs->dims[d]) return cr_shape_error("batch axes differ; rhs is %s", rhs);
  }
  uint64_t rows = lhs->dims[n - (ta ? 1 : 2)], inner_l = lhs->dims[n - (ta ? 2 : 1)];
  uint64_t inner_r = rhs->dims[n - (tb ? 1 : 2)], cols = rhs->dims[n - (tb ? 2 : 1)];
  if (inner_l != inner_r) return cr_shape_error("the contracted axes differ; rhs is %s", rhs);
  dims->batch = cr_product(lhs, 0, n - 2);
  dims->m = (int64_t)rows;
  dims->n = (int64_t)cols;
  dims->k = (int64_t)inner_l;
  *out = *lhs;
  out->dims[n - 2] = rows;
  out->dims[n - 1] = cols;
  return MX_ACC_OK;
}

static int dot_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)num_in;
  product_dims dims;
  return dot_layout(params, &in[0], &in[1], &dims, out);
}

static int batch_dot_infer(const cr_params *params, const acc_shape *in, int num_in,
                           acc_shape *out) {
  (void)num_in;
  product_dims dims;
  return batch_dot_layout(params, &in[0], &in[1], &dims, out);
}

static int run_product(const cr_params *params, const product_dims *dims, const cr_tensor *in,
                       const cr_tensor *out, int num_threads) {
  if (params->kernels == CR_KERNELS_REFERENCE) {
    cr_ref_matmul(dims->batch, dims->m, dims->n, dims->k, params->u.dot.transpose_a,
                  params->u.dot.transpose_b, in[0].data, in[1].data, out->data);
    return MX_ACC_OK;
  }
  if (cr_matmul(dims->batch, dims->m, dims->n, dims->k, params->u.dot.transpose_a,
                params->u.dot.transpose_b, in[0].data, in[1].data, out->data,
                num_threads) != 0) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "matrix product: out of scratch memory");
  }
  return MX_ACC_OK;
}

static int dot_compute(const cr_params *params, const cr_tensor *in, int num_in,
                       const cr_tensor *out, int num_threads) {
  (void)num_in;
  product_dims dims = {0, 0, 0, 0};
  acc_shape shape;
  dot_layout(params, &in[0].shape, &in[1].shape, &dims, &shape); /* checked at infer */
  return run_product(params, &dims, in, out, num_threads);
}

static int batch_dot_compute(const cr_params *params, const cr_tensor *in, int num_in,
                             const cr_tensor *out, int num_threads) {
  (void)num_in;
  product_dims dims = {0, 0, 0, 0};
  acc_shape shape;
  batch_dot_layout(params, &in[0].shape, &in[1].shape, &dims, &shape); /* checked at infer */
  return run_product(params, &dims, in, out, num_threads);
}

CR_DEFINE_FLOAT32_RUN(dot_run, dot_compute)
CR_DEFINE_FLOAT32_RUN(batch_dot_run, batch_dot_compute)

/* ---- the families ------------------------------------------------------ */

const cr_op_impl cr_impl_elemwise = {
    .parse = cr_no_attrs_parse, .num_inputs = cr_two_inputs, .num_outputs = cr_one_output,
    .check_dtypes = binary_dtypes, .infer_shape = same_shapes_infer, .run = elemwise_run};
const cr_op_impl cr_impl_broadcast = {
    .parse = cr_no_attrs_parse, .num_inputs = cr_two_inputs, .num_outputs = cr_one_output,
    .check_dtypes = binary_dtypes, .infer_shape = broadcast_infer, .run = broadcast_run};
const cr_op_impl cr_impl_scalar = {
    .parse = scalar_parse, .num_inputs = cr_one_input, .num_outputs = cr_one_output,
    .check_dtypes = binary_dtypes, .infer_shape = cr_same_shape_infer, .run = scalar_run};
const cr_op_impl cr_impl_unary = {
    .parse = cr_no_attrs_parse, .num_inputs = cr_one_input, .num_outputs = cr_one_output,
    .check_dtypes = unary_dtypes, .infer_shape = cr_same_shape_infer, .run = unary_run};
const cr_op_impl cr_impl_clip = {
    .parse = clip_parse, .num_inputs = cr_one_input, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = cr_same_shape_infer, .run = clip_run};
const cr_op_impl cr_impl_fill_like = {
    .parse = cr_no_attrs_parse, .num_inputs = cr_one_input, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_any, .infer_shape = cr_same_shape_infer, .run = fill_like_run};
const cr_op_impl cr_impl_add_n = {
    .parse = num_args_parse, .num_inputs = num_args_inputs, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = same_shapes_infer, .run = add_n_run};
const cr_op_impl cr_impl_reduce = {
    .parse = reduce_parse, .num_inputs = cr_one_input, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = reduce_infer, .run = reduce_run};
const cr_op_impl cr_impl_dot = {
    .parse = dot_parse, .num_inputs = cr_two_inputs, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = dot_infer, .run = dot_run};
const cr_op_impl cr_impl_batch_dot = {
    .parse = dot_parse, .num_inputs = cr_two_inputs, .num_outputs = cr_one_output,
    .check_dtypes = cr_dtypes_float, .infer_shape = batch_dot_infer, .run = batch_dot_run};
