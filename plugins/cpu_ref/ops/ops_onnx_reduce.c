/*
 * The ONNX importer's reductions, searches and scans in cpu_ref (see
 * ops_onnx.c): _onnx_reduce, _onnx_arg, _onnx_cumsum and _onnx_cumprod
 * (_onnx_scan's variants 0 and 1), and _onnx_topk.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_onnx_impl.h"
#include "status.h"

/* ======================================================================= */
/* Reductions, searches, scans                                               */
/* ======================================================================= */

enum {
  RD_SUM, RD_MEAN, RD_MAX, RD_MIN, RD_PROD, RD_L1, RD_L2, RD_LOG_SUM, RD_LOG_SUM_EXP,
  RD_SUM_SQUARE
};
static const char *const kReduceFns[] = {"sum", "mean", "max", "min", "prod", "l1", "l2",
                                         "log_sum", "log_sum_exp", "sum_square", NULL};

static int reduce_parse(const char *const *keys, const char *const *vals, size_t count,
                        cr_params *params) {
  static const attr_spec kSpecs[] = {{"fn", A_CHOICE, 0, kReduceFns}, {"axes", A_TUPLE, 0, NULL},
                                     {"keepdims", A_BOOL, 0, NULL},
                                     {"noop_with_empty_axes", A_BOOL, 1, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->fn = -1;
  p->flag[0] = 1;
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && p->fn < 0) status = acc_fail(MX_ACC_ERR_INVALID_ARG, "fn is required");
  return status;
}

static int reduce_dtypes(const cr_params *params) {
  int status = out_dtype_is(params, 0, params->in_dtypes[0]);
  const int32_t dtype = params->in_dtypes[0];
  if (status == MX_ACC_OK && P(params)->fn == RD_LOG_SUM_EXP &&
      (dtype == CR_INT8 || dtype == CR_UINT8)) {
    status = decline_int(params, 0, "log_sum_exp");
  }
  return status;
}

/* The reduced axes of x as flags; 0 when nothing is reduced (noop). */
static int reduce_axes(const cr_params *params, const acc_shape *x, int reduced[CR_MAX_NDIM]) {
  const onnx_p *p = P(params);
  memset(reduced, 0, sizeof(int) * CR_MAX_NDIM);
  if (p->tup_len[0] == 0) {
    if (p->flag[1]) return 0;
    for (int d = 0; d < x->ndim; ++d) reduced[d] = 1;
    return 1;
  }
  for (int i = 0; i < p->tup_len[0]; ++i) {
    if (x->ndim == 0) return -1;
    const int axis = (int)py_mod_int(p->tup[0][i], x->ndim);
    if (reduced[axis]) return -1;
    reduced[axis] = 1;
  }
  return 1;
}

static int reduce_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out) {
  (void)num_in;
  int reduced[CR_MAX_NDIM];
  const int any = reduce_axes(params, &in[0], reduced);
  if (any < 0) return cr_shape_error("reduce: axes do not name distinct axes of %s", &in[0]);
  if (any == 0) {
    *out = in[0];
    return MX_ACC_OK;
  }
  const int fn = P(params)->fn;
  for (int d = 0; d < in[0].ndim; ++d) {
    if (reduced[d] && in[0].dims[d] == 0 && count_of(&in[0]) == 0 && fn != RD_MAX &&
        fn != RD_MIN) {
      break; /* numpy reduces empty axes for sums and products */
    }
  }
  out->ndim = 0;
  for (int d = 0; d < in[0].ndim; ++d) {
    if (!reduced[d]) out->dims[out->ndim++] = in[0].dims[d];
    else if (P(params)->flag[0]) out->dims[out->ndim++] = 1;
  }
  return MX_ACC_OK;
}

static int reduce_run(const cr_params *params, const cr_tensor *in, int num_in,
                      const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  int reduced[CR_MAX_NDIM];
  if (reduce_axes(params, x, reduced) == 0) return cr_copy_run(params, in, 1, out, 0);
  const int fn = P(params)->fn;
  const cr_dtype dtype = cr_in_dtype(params, 0);
  /* Output position of every input element, then one pass. */
  const int64_t count = count_of(x), out_count = count_of(&out->shape);
  double *acc = calloc((size_t)(out_count > 0 ? out_count : 1), sizeof(double));
  int64_t *iacc = calloc((size_t)(out_count > 0 ? out_count : 1), sizeof(int64_t));
  int64_t *seen = calloc((size_t)(out_count > 0 ? out_count : 1), sizeof(int64_t));
  if (acc == NULL || iacc == NULL || seen == NULL) {
    free(acc);
    free(iacc);
    free(seen);
    return out_of_memory("reduce");
  }
  int64_t kept_strides[CR_MAX_NDIM], stride = 1;
  for (int d = x->ndim - 1; d >= 0; --d) {
    kept_strides[d] = reduced[d] ? 0 : stride;
    if (!reduced[d]) stride *= (int64_t)x->dims[d];
  }
  int64_t pos[CR_MAX_NDIM] = {0};
  const int integer = is_int(dtype);
  for (int64_t e = 0; e < count; ++e) {
    int64_t o = 0;
    for (int d = 0; d < x->ndim; ++d) o += pos[d] * kept_strides[d];
    if (integer) {
      int64_t v = cr_load_int(dtype, in[0].data, e);
      if (fn == RD_L1) v = wrap_int(dtype, v < 0 ? wsub(0, v) : v);
      if (fn == RD_L2 || fn == RD_SUM_SQUARE) v = wrap_int(dtype, wmul(v, v));
      if (fn == RD_LOG_SUM_EXP) {
        acc[o] += exp((double)v);
      } else if (fn == RD_MEAN) {
        acc[o] += (double)v;
      } else if (fn == RD_MAX || fn == RD_MIN) {
        if (!seen[o] || (fn == RD_MAX ? v > iacc[o] : v < iacc[o])) iacc[o] = v;
      } else if (fn == RD_PROD) {
        iacc[o] = seen[o] ? wmul(iacc[o], v) : v;
      } else {
        iacc[o] = wadd(iacc[o], v);
      }
    } else {
      const double v = cr_load_double(dtype, in[0].data, e);
      switch (fn) {
        case RD_MAX:
          if (!seen[o] || isnan(v) || (!isnan(acc[o]) && v > acc[o])) acc[o] = v;
          break;
        case RD_MIN:
          if (!seen[o] || isnan(v) || (!isnan(acc[o]) && v < acc[o])) acc[o] = v;
          break;
        case RD_PROD: acc[o] = seen[o] ? acc[o] * v : v; break;
        case RD_L1: acc[o] += fabs(v); break;
        case RD_L2:
        case RD_SUM_SQUARE: acc[o] += v * v; break;
        case RD_LOG_SUM_EXP: acc[o] += exp(v); break;
        default: acc[o] += v; break;
      }
    }
    seen[o] += 1;
    for (int d = x->ndim - 1; d >= 0; --d) {
      if (++pos[d] < (int64_t)x->dims[d]) break;
      pos[d] = 0;
    }
  }
  const int64_t per_output = out_count > 0 ? count / out_count : 0;
  for (int64_t o = 0; o < out_count; ++o) {
    if (seen[o] == 0 && (fn == RD_MAX || fn == RD_MIN)) {
      /* numpy's identity-less reduction of nothing: the registry fills */
      if (integer) {
        static const int64_t kMin[] = {0, 0, 0, 0, INT32_MIN, INT8_MIN, INT64_MIN};
        static const int64_t kMax[] = {0, 0, 0, UINT8_MAX, INT32_MAX, INT8_MAX, INT64_MAX};
        cr_store_int(dtype, out->data, o, fn == RD_MAX ? kMin[dtype] : kMax[dtype]);
      } else {
        cr_store_double(dtype, out->data, o, fn == RD_MAX ? -INFINITY : INFINITY);
      }
      continue;
    }
    if (integer) {
      switch (fn) {
        case RD_MEAN: cr_store_double(dtype, out->data, o, acc[o] / (double)per_output); break;
        case RD_L2: cr_store_double(dtype, out->data, o, sqrt((double)iacc[o])); break;
        case RD_LOG_SUM: cr_store_double(dtype, out->data, o, log((double)iacc[o])); break;
        case RD_LOG_SUM_EXP: cr_store_double(dtype, out->data, o, log(acc[o])); break;
        case RD_PROD:
          cr_store_int(dtype, out->data, o, seen[o] ? iacc[o] : 1);
          break;
        default: cr_store_int(dtype, out->data, o, wrap_int(dtype, iacc[o])); break;
      }
    } else {
      double v = acc[o];
      if (fn == RD_MEAN) v = v / (double)per_output;
      else if (fn == RD_L2) v = sqrt(v);
      else if (fn == RD_LOG_SUM || fn == RD_LOG_SUM_EXP) v = log(v);
      else if (fn == RD_PROD && seen[o] == 0) v = 1.0;
      cr_store_double(dtype, out->data, o, v);
    }
  }
  free(acc);
  free(iacc);
  free(seen);
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_reduce = {reduce_parse, cr_one_input, cr_one_output,
                                        reduce_dtypes, reduce_infer, reduce_run};

/* ---- _onnx_arg -------------------------------------------------------------------- */

static int arg_parse(const char *const *keys, const char *const *vals, size_t count,
                     cr_params *params) {
  static const char *const kFns[] = {"max", "min", NULL};
  static const attr_spec kSpecs[] = {{"fn", A_CHOICE, 0, kFns}, {"axis", A_INT, 0, NULL},
                                     {"keepdims", A_BOOL, 0, NULL},
                                     {"select_last_index", A_BOOL, 1, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->fn = -1;
  p->flag[0] = 1;
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && p->fn < 0) status = acc_fail(MX_ACC_ERR_INVALID_ARG, "fn is required");
  return status;
}

static int arg_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)num_in;
  const acc_shape *x = &in[0];
  if (x->ndim == 0) return cr_shape_error("arg of a scalar %s", x);
  const int axis = (int)py_mod_int(P(params)->i[0], x->ndim);
  if (x->dims[axis] == 0) return cr_shape_error("arg over an empty axis of %s", x);
  *out = *x;
  if (P(params)->flag[0]) {
    out->dims[axis] = 1;
  } else {
    for (int d = axis; d < x->ndim - 1; ++d) out->dims[d] = x->dims[d + 1];
    out->ndim -= 1;
  }
  return MX_ACC_OK;
}

static int arg_run(const cr_params *params, const cr_tensor *in, int num_in,
                   const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const onnx_p *p = P(params);
  const int axis = (int)py_mod_int(p->i[0], x->ndim);
  const line_view v = lines_along(x, axis);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const int is_max = p->fn == 0, last = p->flag[1];
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      int64_t best = -1;
      for (int64_t s = 0; s < v.n; ++s) {
        const int64_t j = last ? v.n - 1 - s : s;
        const int64_t e = (o * v.n + j) * v.inner + i;
        if (best < 0) {
          best = j;
          continue;
        }
        const int64_t b = (o * v.n + best) * v.inner + i;
        int better;
        if (is_int(dtype)) {
          const int64_t a = cr_load_int(dtype, in[0].data, e), c = cr_load_int(dtype, in[0].data, b);
          better = is_max ? a > c : a < c;
        } else {
          const double a = cr_load_double(dtype, in[0].data, e);
          const double c = cr_load_double(dtype, in[0].data, b);
          better = !isnan(c) && (isnan(a) || (is_max ? a > c : a < c));
        }
        if (better) best = j;
      }
      cr_store_int(CR_INT64, out->data, o * v.inner + i, best);
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_arg = {arg_parse, cr_one_input, cr_one_output, int64_out,
                                     arg_infer, arg_run};

/* ---- _onnx_cumsum, _onnx_cumprod (variant 1) ----------------------------------------- */

static int scan_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  static const attr_spec kSpecs[] = {{"axis", A_INT, 0, NULL}, {"exclusive", A_BOOL, 0, NULL},
                                     {"reverse", A_BOOL, 1, NULL}, {NULL, A_INT, 0, NULL}};
  return parse_with(kSpecs, keys, vals, count, P(params));
}

static int scan_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)params;
  (void)num_in;
  if (in[0].ndim == 0) return cr_shape_error("cannot scan a scalar %s", &in[0]);
  *out = in[0];
  return MX_ACC_OK;
}

static int scan_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const onnx_p *p = P(params);
  const int product = params->variant == 1;
  const int axis = (int)py_mod_int(p->i[0], x->ndim);
  const line_view v = lines_along(x, axis);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      int64_t iacc = product ? 1 : 0;
      double acc = product ? 1.0 : 0.0;
      for (int64_t s = 0; s < v.n; ++s) {
        const int64_t j = p->flag[1] ? v.n - 1 - s : s;
        const int64_t e = (o * v.n + j) * v.inner + i;
        if (is_int(dtype)) {
          const int64_t value = cr_load_int(dtype, in[0].data, e);
          const int64_t next = wrap_int(dtype, product ? wmul(iacc, value) : wadd(iacc, value));
          cr_store_int(dtype, out->data, e, p->flag[0] ? iacc : next);
          iacc = next;
        } else {
          const double value = cr_load_double(dtype, in[0].data, e);
          /* numpy accumulates in the dtype: each partial result rounded */
          const double next = s == 0 ? as_dtype(dtype, value)
                                     : as_dtype(dtype, product ? acc * value : acc + value);
          cr_store_double(dtype, out->data, e, p->flag[0] ? acc : next);
          acc = next;
        }
      }
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_scan = {scan_parse, cr_one_input, cr_one_output, cr_dtypes_any,
                                      scan_infer, scan_run};

/* ---- _onnx_topk ------------------------------------------------------------------------ */

static int topk_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  static const attr_spec kSpecs[] = {{"k", A_INT, 0, NULL}, {"axis", A_INT, 1, NULL},
                                     {"largest", A_BOOL, 0, NULL}, {"sorted", A_BOOL, 1, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->i[0] = -1;
  p->i[1] = -1;
  p->flag[0] = 1;
  p->flag[1] = 1;
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && p->i[0] < 0) status = acc_fail(MX_ACC_ERR_INVALID_ARG, "k is required");
  return status;
}

static int topk_outputs(const cr_params *params) {
  (void)params;
  return 2;
}

static int topk_dtypes(const cr_params *params) {
  int status = out_dtype_is(params, 0, params->in_dtypes[0]);
  return status == MX_ACC_OK ? out_dtype_is(params, 1, CR_INT64) : status;
}

static int topk_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)num_in;
  const acc_shape *x = &in[0];
  if (x->ndim == 0) return cr_shape_error("topk of a scalar %s", x);
  const int axis = (int)py_mod_int(P(params)->i[1], x->ndim);
  if ((uint64_t)P(params)->i[0] > x->dims[axis]) return cr_shape_error("k exceeds the axis of %s", x);
  out[0] = *x;
  out[0].dims[axis] = (uint64_t)P(params)->i[0];
  out[1] = out[0];
  return MX_ACC_OK;
}

/* Sort keys: numpy's argsort order (NaN last), ties by position. */
typedef struct sort_key {
  double f;
  int64_t i;
  int64_t position;
  int nan;
} sort_key;

static int key_before(const sort_key *a, const sort_key *b, int integer) {
  if (integer) {
    if (a->i != b->i) return a->i < b->i;
  } else if (a->nan != b->nan) {
    return b->nan;
  } else if (!a->nan && a->f != b->f) {
    return a->f < b->f;
  }
  return a->position < b->position;
}

static void merge_sort(sort_key *keys, sort_key *scratch, int64_t n, int integer) {
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      const int64_t mid = lo + width < n ? lo + width : n;
      const int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
      int64_t a = lo, b = mid, o = lo;
      while (a < mid && b < hi) scratch[o++] = key_before(&keys[b], &keys[a], integer) ? keys[b++] : keys[a++];
      while (a < mid) scratch[o++] = keys[a++];
      while (b < hi) scratch[o++] = keys[b++];
    }
    memcpy(keys, scratch, (size_t)n * sizeof *keys);
  }
}

static int topk_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const onnx_p *p = P(params);
  const int axis = (int)py_mod_int(p->i[1], x->ndim);
  const line_view v = lines_along(x, axis);
  const int64_t k = p->i[0];
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const size_t elem = cr_in_size(params, 0);
  sort_key *keys = malloc((size_t)(v.n > 0 ? v.n : 1) * 2 * sizeof *keys);
  if (keys == NULL) return out_of_memory("topk");
  const int integer = is_int(dtype);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      for (int64_t j = 0; j < v.n; ++j) {
        const int64_t e = (o * v.n + j) * v.inner + i;
        sort_key *key = &keys[j];
        key->position = j;
        if (integer) {
          const int64_t value = cr_load_int(dtype, in[0].data, e);
          /* largest: -x wrapped in the dtype, or iinfo.max - x for uint8 */
          key->i = !p->flag[0] ? value : dtype == CR_UINT8 ? 255 - value
                                                            : wrap_int(dtype, wsub(0, value));
        } else {
          const double value = cr_load_double(dtype, in[0].data, e);
          key->f = p->flag[0] ? -value : value;
          key->nan = isnan(value);
        }
      }
      merge_sort(keys, keys + v.n, v.n, integer);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t from = (o * v.n + keys[j].position) * v.inner + i;
        const int64_t to = (o * k + j) * v.inner + i;
        memcpy((unsigned char *)out[0].data + (size_t)to * elem,
               (const unsigned char *)in[0].data + (size_t)from * elem, elem);
        cr_store_int(CR_INT64, out[1].data, to, keys[j].position);
      }
    }
  }
  free(keys);
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_topk = {topk_parse, cr_one_input, topk_outputs, topk_dtypes,
                                      topk_infer, topk_run};
