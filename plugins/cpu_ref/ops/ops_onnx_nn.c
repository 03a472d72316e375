/*
 * The ONNX importer's neural-network host operators in cpu_ref (see
 * ops_onnx.c): _onnx_softmax, the normalisations (_onnx_lrn, _onnx_mvn,
 * _onnx_norm, _onnx_lp_norm, _onnx_group_norm), the losses
 * (_onnx_nll_loss, _onnx_softmax_cross_entropy), _onnx_pool, _onnx_resize
 * and _onnx_upsample_nearest; matmul, gemm, det and einsum are in
 * ops_onnx_linalg.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_onnx_impl.h"
#include "status.h"
#include "tensor.h"

/* ======================================================================= */
/* Neural-network operators                                                 */
/* ======================================================================= */

/* ---- _onnx_softmax -------------------------------------------------------------------- */

enum { SM_SOFTMAX, SM_LOG_SOFTMAX, SM_HARDMAX };

static int softmax_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  static const char *const kFns[] = {"softmax", "log_softmax", "hardmax", NULL};
  static const attr_spec kSpecs[] = {{"fn", A_CHOICE, 0, kFns}, {"axis", A_INT, 0, NULL},
                                     {"legacy", A_BOOL, 0, NULL}, {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->fn = -1;
  p->i[0] = -1;
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && p->fn < 0) status = acc_fail(MX_ACC_ERR_INVALID_ARG, "fn is required");
  return status;
}

static int softmax_dtypes(const cr_params *params) {
  int status = out_dtype_is(params, 0, params->in_dtypes[0]);
  if (status == MX_ACC_OK && P(params)->fn != SM_HARDMAX) status = decline_int(params, 0, "softmax");
  return status;
}

static int softmax_view(const cr_params *params, const acc_shape *x, line_view *v) {
  const onnx_p *p = P(params);
  if (p->flag[0]) {
    const int axis = (int)py_mod_int(p->i[0], x->ndim > 1 ? x->ndim : 1);
    const int split = axis < x->ndim ? axis : x->ndim;
    v->outer = cr_product(x, 0, split);
    v->n = cr_product(x, split, x->ndim);
    v->inner = 1;
    if (v->outer == 0 && count_of(x) == 0) v->n = 0;
    return MX_ACC_OK;
  }
  int axis;
  if (x->ndim == 0 || np_axis(p->i[0], x->ndim, &axis) != MX_ACC_OK) {
    return cr_shape_error("softmax axis is out of range for %s", x);
  }
  *v = lines_along(x, axis);
  return MX_ACC_OK;
}

static int softmax_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)num_in;
  line_view v;
  int status = softmax_view(params, &in[0], &v);
  if (status != MX_ACC_OK) return status;
  if (v.n == 0 && v.outer * v.inner > 0) return cr_shape_error("softmax over an empty axis of %s", &in[0]);
  *out = in[0];
  return MX_ACC_OK;
}

static int softmax_run(const cr_params *params, const cr_tensor *in, int num_in,
                       const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  line_view v;
  softmax_view(params, &in[0].shape, &v);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const int fn = P(params)->fn;
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const int64_t base = o * v.n * v.inner + i;
      if (fn == SM_HARDMAX) {
        int64_t best = 0;
        for (int64_t j = 1; j < v.n; ++j) {
          if (is_int(dtype)) {
            if (cr_load_int(dtype, in[0].data, base + j * v.inner) >
                cr_load_int(dtype, in[0].data, base + best * v.inner)) best = j;
          } else {
            const double a = cr_load_double(dtype, in[0].data, base + j * v.inner);
            const double b = cr_load_double(dtype, in[0].data, base + best * v.inner);
            if (!isnan(b) && (isnan(a) || a > b)) best = j;
          }
        }
        for (int64_t j = 0; j < v.n; ++j) cr_store_int(dtype, out->data, base + j * v.inner, j == best);
        continue;
      }
      double top = -INFINITY;
      int nan = 0;
      for (int64_t j = 0; j < v.n; ++j) {
        const double a = cr_load_double(dtype, in[0].data, base + j * v.inner);
        if (isnan(a)) nan = 1;
        else if (a > top) top = a;
      }
      if (nan) top = NAN;
      double sum = 0;
      for (int64_t j = 0; j < v.n; ++j) sum += exp(cr_load_double(dtype, in[0].data, base + j * v.inner) - top);
      for (int64_t j = 0; j < v.n; ++j) {
        const double shifted = cr_load_double(dtype, in[0].data, base + j * v.inner) - top;
        cr_store_double(dtype, out->data, base + j * v.inner,
                        fn == SM_LOG_SOFTMAX ? shifted - log(sum) : exp(shifted) / sum);
      }
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_softmax = {softmax_parse, cr_one_input, cr_one_output,
                                         softmax_dtypes, softmax_infer, softmax_run};

/* ---- normalisations: _onnx_lrn, _onnx_mvn, _onnx_norm, _onnx_lp_norm, _onnx_group_norm ---- */

static int float_only(const cr_params *params) {
  int status = MX_ACC_OK;
  for (int i = 0; i < params->num_inputs && status == MX_ACC_OK; ++i) {
    if (is_int(params->in_dtypes[i])) {
      status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "input %d has dtype %s; this operator runs "
                        "only float32, float64 and float16", i,
                        acc_dtype_name(params->in_dtypes[i]));
    }
  }
  return status;
}

static int float_same(const cr_params *params) {
  int status = float_only(params);
  return status == MX_ACC_OK ? cr_dtypes_any(params) : status;
}

static int lrn_parse(const char *const *keys, const char *const *vals, size_t count,
                     cr_params *params) {
  static const attr_spec kSpecs[] = {{"size", A_INT, 0, NULL}, {"alpha", A_FLOAT, 0, NULL},
                                     {"beta", A_FLOAT, 1, NULL}, {"bias", A_FLOAT, 2, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->i[0] = 0;
  p->f[0] = 1e-4;
  p->f[1] = 0.75;
  p->f[2] = 1.0;
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && p->i[0] <= 0) status = cr_bad_attr("size", "?", "a positive size");
  return status;
}

static int needs_channels(const cr_params *params, const acc_shape *in, int num_in,
                          acc_shape *out) {
  (void)params;
  (void)num_in;
  if (in[0].ndim < 2) return cr_shape_error("data of shape %s has no channel axis", &in[0]);
  *out = in[0];
  return MX_ACC_OK;
}

static int lrn_run(const cr_params *params, const cr_tensor *in, int num_in,
                   const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const onnx_p *p = P(params);
  const line_view v = lines_along(&in[0].shape, 1);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const int64_t lo = (p->i[0] - 1) / 2, hi = p->i[0] - 1 - lo;
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t c = 0; c < v.n; ++c) {
      const int64_t start = c - lo > 0 ? c - lo : 0, end = c + hi < v.n - 1 ? c + hi : v.n - 1;
      for (int64_t i = 0; i < v.inner; ++i) {
        double total = 0;
        for (int64_t j = start; j <= end; ++j) {
          const double x = cr_load_double(dtype, in[0].data, (o * v.n + j) * v.inner + i);
          total += x * x;
        }
        const int64_t e = (o * v.n + c) * v.inner + i;
        const double x = cr_load_double(dtype, in[0].data, e);
        cr_store_double(dtype, out->data, e, x / pow(p->f[2] + p->f[0] / (double)p->i[0] * total, p->f[1]));
      }
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_lrn = {lrn_parse, cr_one_input, cr_one_output, float_same,
                                     needs_channels, lrn_run};

/* Mean and variance of x over the reduced axes, per kept position;
 * index_of[e] is the kept position of element e. */
static int moments(cr_dtype dtype, const void *data, const acc_shape *x, const int *reduced,
                   double **mean_out, double **var_out, double **sq_out, int64_t *groups) {
  const int64_t count = count_of(x);
  int64_t kept = 1;
  for (int d = 0; d < x->ndim; ++d) {
    if (!reduced[d]) kept *= (int64_t)x->dims[d];
  }
  double *mean = calloc((size_t)(kept > 0 ? kept : 1), sizeof(double));
  double *var = calloc((size_t)(kept > 0 ? kept : 1), sizeof(double));
  double *sq = calloc((size_t)(kept > 0 ? kept : 1), sizeof(double));
  if (mean == NULL || var == NULL || sq == NULL) {
    free(mean);
    free(var);
    free(sq);
    return out_of_memory("moments");
  }
  const int64_t per = kept > 0 ? count / kept : 0;
  acc_shape kept_shape = *x;
  for (int d = 0; d < x->ndim; ++d) {
    if (reduced[d]) kept_shape.dims[d] = 1;
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t e = 0; e < count; ++e) {
      const int64_t k = offset_in(&kept_shape, x, e);
      const double v = cr_load_double(dtype, data, e);
      if (pass == 0) {
        mean[k] += v;
        sq[k] += v * v;
      } else {
        var[k] += (v - mean[k]) * (v - mean[k]);
      }
    }
    for (int64_t k = 0; k < kept; ++k) {
      if (pass == 0) {
        mean[k] /= (double)per;
        sq[k] /= (double)per;
      } else {
        var[k] /= (double)per;
      }
    }
  }
  *mean_out = mean;
  *var_out = var;
  *sq_out = sq;
  *groups = kept;
  return MX_ACC_OK;
}

static int mvn_parse(const char *const *keys, const char *const *vals, size_t count,
                     cr_params *params) {
  onnx_p *p = P(params);
  p->tup_len[0] = 3;
  p->tup[0][0] = 0;
  p->tup[0][1] = 2;
  p->tup[0][2] = 3;
  return parse_with(kAxesSpec, keys, vals, count, p);
}

static int mvn_reduced(const cr_params *params, const acc_shape *x, int *reduced) {
  const onnx_p *p = P(params);
  memset(reduced, 0, sizeof(int) * CR_MAX_NDIM);
  for (int i = 0; i < p->tup_len[0]; ++i) {
    int axis;
    if (x->ndim == 0 || np_axis(p->tup[0][i], x->ndim, &axis) != MX_ACC_OK || reduced[axis]) {
      return cr_shape_error("axes do not name distinct axes of %s", x);
    }
    reduced[axis] = 1;
  }
  return MX_ACC_OK;
}

static int mvn_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)num_in;
  int reduced[CR_MAX_NDIM];
  int status = mvn_reduced(params, &in[0], reduced);
  if (status == MX_ACC_OK) *out = in[0];
  return status;
}

static int mvn_run(const cr_params *params, const cr_tensor *in, int num_in,
                   const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int reduced[CR_MAX_NDIM];
  mvn_reduced(params, &in[0].shape, reduced);
  double *mean, *var, *sq;
  int64_t groups;
  const cr_dtype dtype = cr_in_dtype(params, 0);
  int status = moments(dtype, in[0].data, &in[0].shape, reduced, &mean, &var, &sq, &groups);
  if (status != MX_ACC_OK) return status;
  acc_shape kept = in[0].shape;
  for (int d = 0; d < kept.ndim; ++d) {
    if (reduced[d]) kept.dims[d] = 1;
  }
  const int64_t count = count_of(&in[0].shape);
  for (int64_t e = 0; e < count; ++e) {
    const int64_t k = offset_in(&kept, &in[0].shape, e);
    cr_store_double(dtype, out->data, e,
                    (cr_load_double(dtype, in[0].data, e) - mean[k]) / (sqrt(var[k]) + 1e-9));
  }
  free(mean);
  free(var);
  free(sq);
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_mvn = {mvn_parse, cr_one_input, cr_one_output, float_same,
                                     mvn_infer, mvn_run};

static int norm_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  static const attr_spec kSpecs[] = {{"axis", A_INT, 0, NULL}, {"eps", A_FLOAT, 0, NULL},
                                     {"has_bias", A_BOOL, 0, NULL}, {"rms", A_BOOL, 1, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->i[0] = -1;
  p->f[0] = 1e-5;
  p->flag[0] = 1;
  return parse_with(kSpecs, keys, vals, count, p);
}

static int norm_inputs(const cr_params *params) { return P(params)->flag[0] ? 3 : 2; }
static int three_outputs(const cr_params *params) {
  (void)params;
  return 3;
}

static int norm_dtypes(const cr_params *params) {
  int status = float_only(params);
  const int32_t x = params->in_dtypes[0];
  const int32_t stats = x == CR_FLOAT64 ? CR_FLOAT64 : CR_FLOAT32;
  if (status == MX_ACC_OK) status = out_dtype_is(params, 0, x);
  if (status == MX_ACC_OK) status = out_dtype_is(params, 1, stats);
  if (status == MX_ACC_OK) status = out_dtype_is(params, 2, stats);
  return status;
}

static int norm_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  const acc_shape *x = &in[0];
  if (x->ndim == 0) return cr_shape_error("cannot normalise a scalar %s", x);
  const int axis = (int)py_mod_int(P(params)->i[0], x->ndim);
  acc_shape result;
  int status = broadcast_shapes(in, num_in, &result);
  if (status != MX_ACC_OK) return status;
  if (!acc_shape_equal(&result, x)) return cr_shape_error("scale and bias broadcast data %s", x);
  out[0] = *x;
  out[1] = *x;
  for (int d = axis; d < x->ndim; ++d) out[1].dims[d] = 1;
  out[2] = out[1];
  return MX_ACC_OK;
}

static int norm_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_threads;
  const onnx_p *p = P(params);
  const acc_shape *x = &in[0].shape;
  const int axis = (int)py_mod_int(p->i[0], x->ndim);
  int reduced[CR_MAX_NDIM] = {0};
  for (int d = axis; d < x->ndim; ++d) reduced[d] = 1;
  const cr_dtype dtype = cr_in_dtype(params, 0), stats = cr_out_dtype(params, 1);
  double *mean, *var, *sq;
  int64_t groups;
  int status = moments(dtype, in[0].data, x, reduced, &mean, &var, &sq, &groups);
  if (status != MX_ACC_OK) return status;
  const int64_t count = count_of(x), per = groups > 0 ? count / groups : 0;
  for (int64_t g = 0; g < groups; ++g) {
    const double inv = 1.0 / sqrt((p->flag[1] ? sq[g] : var[g]) + p->f[0]);
    cr_store_double(stats, out[1].data, g, mean[g]);
    cr_store_double(stats, out[2].data, g, inv);
    for (int64_t j = 0; j < per; ++j) {
      const int64_t e = g * per + j;
      const double v = cr_load_double(dtype, in[0].data, e);
      double y = (p->flag[1] ? v : v - mean[g]) * inv;
      y *= cr_load_double(cr_in_dtype(params, 1), in[1].data, offset_in(&in[1].shape, x, e));
      if (num_in > 2) y += cr_load_double(cr_in_dtype(params, 2), in[2].data, offset_in(&in[2].shape, x, e));
      cr_store_double(dtype, out[0].data, e, y);
    }
  }
  free(mean);
  free(var);
  free(sq);
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_norm = {norm_parse, norm_inputs, three_outputs, norm_dtypes,
                                      norm_infer, norm_run};

static int lp_norm_parse(const char *const *keys, const char *const *vals, size_t count,
                         cr_params *params) {
  static const attr_spec kSpecs[] = {{"axis", A_INT, 0, NULL}, {"p", A_INT, 1, NULL},
                                     {NULL, A_INT, 0, NULL}};
  P(params)->i[0] = -1;
  P(params)->i[1] = 2;
  return parse_with(kSpecs, keys, vals, count, P(params));
}

static int lp_norm_infer(const cr_params *params, const acc_shape *in, int num_in,
                         acc_shape *out) {
  (void)num_in;
  int axis;
  if (in[0].ndim == 0 || np_axis(P(params)->i[0], in[0].ndim, &axis) != MX_ACC_OK) {
    return cr_shape_error("lp_norm: axis out of range for %s", &in[0]);
  }
  *out = in[0];
  return MX_ACC_OK;
}

static int lp_norm_run(const cr_params *params, const cr_tensor *in, int num_in,
                       const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  int axis;
  np_axis(P(params)->i[0], in[0].shape.ndim, &axis);
  const line_view v = lines_along(&in[0].shape, axis);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      double norm = 0;
      for (int64_t j = 0; j < v.n; ++j) {
        const double x = cr_load_double(dtype, in[0].data, (o * v.n + j) * v.inner + i);
        norm += P(params)->i[1] == 1 ? fabs(x) : x * x;
      }
      if (P(params)->i[1] != 1) norm = sqrt(norm);
      norm = as_dtype(dtype, norm);
      for (int64_t j = 0; j < v.n; ++j) {
        const int64_t e = (o * v.n + j) * v.inner + i;
        cr_store_double(dtype, out->data, e, norm == 0 ? 0.0 : cr_load_double(dtype, in[0].data, e) / norm);
      }
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_lp_norm = {lp_norm_parse, cr_one_input, cr_one_output,
                                         float_same, lp_norm_infer, lp_norm_run};

static int group_norm_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  static const attr_spec kSpecs[] = {{"num_groups", A_INT, 0, NULL}, {"eps", A_FLOAT, 0, NULL},
                                     {NULL, A_INT, 0, NULL}};
  P(params)->i[0] = 0;
  P(params)->f[0] = 1e-5;
  int status = parse_with(kSpecs, keys, vals, count, P(params));
  if (status == MX_ACC_OK && P(params)->i[0] <= 0) status = cr_bad_attr("num_groups", "?", "positive");
  return status;
}

static int group_norm_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  (void)num_in;
  const acc_shape *x = &in[0];
  const uint64_t g = (uint64_t)P(params)->i[0];
  if (x->ndim < 2 || x->dims[1] % g != 0 || in[1].ndim != 1 || in[2].ndim != 1 ||
      in[1].dims[0] != x->dims[1] || in[2].dims[0] != x->dims[1]) {
    return cr_shape_error("group_norm: data %s, scale and bias do not fit num_groups", x);
  }
  *out = *x;
  return MX_ACC_OK;
}

static int group_norm_run(const cr_params *params, const cr_tensor *in, int num_in,
                          const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const int64_t g = P(params)->i[0], n = (int64_t)x->dims[0], c = (int64_t)x->dims[1];
  const int64_t spatial = cr_product(x, 2, x->ndim), per = c / g * spatial;
  const cr_dtype dtype = cr_in_dtype(params, 0);
  for (int64_t b = 0; b < n * g; ++b) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < per; ++j) mean += cr_load_double(dtype, in[0].data, b * per + j);
    mean /= (double)per;
    for (int64_t j = 0; j < per; ++j) {
      const double d = cr_load_double(dtype, in[0].data, b * per + j) - mean;
      var += d * d;
    }
    var /= (double)per;
    const double inv = 1.0 / sqrt(var + P(params)->f[0]);
    for (int64_t j = 0; j < per; ++j) {
      const int64_t e = b * per + j, channel = (e / spatial) % c;
      const double y = (cr_load_double(dtype, in[0].data, e) - mean) * inv;
      cr_store_double(dtype, out->data, e,
                      y * cr_load_double(cr_in_dtype(params, 1), in[1].data, channel) +
                          cr_load_double(cr_in_dtype(params, 2), in[2].data, channel));
    }
  }
  return MX_ACC_OK;
}

static int float_first(const cr_params *params) {
  int status = float_only(params);
  return status == MX_ACC_OK ? out_dtype_is(params, 0, params->in_dtypes[0]) : status;
}

const cr_op_impl cr_impl_onnx_group_norm = {group_norm_parse, cr_three_inputs, cr_one_output,
                                            float_first, group_norm_infer, group_norm_run};

/* ---- _onnx_nll_loss, _onnx_softmax_cross_entropy ------------------------------------------ */

enum { LOSS_NONE, LOSS_SUM, LOSS_MEAN };

static int loss_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  static const char *const kReductions2[] = {"none", "sum", "mean", NULL};
  static const attr_spec kSpecs[] = {{"reduction", A_CHOICE, 0, kReductions2},
                                     {"ignore_index", A_INT, 0, NULL},
                                     {"has_weight", A_BOOL, 0, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->fn = LOSS_MEAN;
  p->i[0] = -((int64_t)1 << 62);
  return parse_with(kSpecs, keys, vals, count, p);
}

static int loss_inputs(const cr_params *params) { return P(params)->flag[0] ? 3 : 2; }

static int loss_dtypes(const cr_params *params) {
  int status = MX_ACC_OK;
  if (is_int(params->in_dtypes[0])) status = decline_int(params, 0, "this loss");
  if (status == MX_ACC_OK && params->num_inputs > 2 && params->in_dtypes[2] != params->in_dtypes[0]) {
    status = cr_dtype_expect("input", 2, params->in_dtypes[2], params->in_dtypes[0]);
  }
  for (int k = 0; k < params->num_outputs && status == MX_ACC_OK; ++k) {
    status = out_dtype_is(params, k, params->in_dtypes[0]);
  }
  return status;
}

static int loss_shapes(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  const acc_shape *x = &in[0], *target = &in[1];
  int ok = x->ndim >= 2 && target->ndim == x->ndim - 1 && target->dims[0] == x->dims[0];
  for (int d = 2; ok && d < x->ndim; ++d) ok = target->dims[d - 1] == x->dims[d];
  if (ok && num_in > 2) ok = in[2].ndim == 1 && in[2].dims[0] == x->dims[1];
  if (!ok) return cr_shape_error("loss: target and weight do not fit data %s", x);
  if (P(params)->fn == LOSS_NONE) *out = *target;
  else out->ndim = 0;
  return MX_ACC_OK;
}

/* Loss of log-probabilities lp (double, x's layout): per-element losses
 * into y (count of target), and the reduction of them into *total with
 * the weight sum in *weight_sum. Returns -1 for an index out of range. */
static int nll_compute(const cr_params *params, const double *lp, const acc_shape *x,
                       const cr_tensor *target, cr_dtype target_type, const cr_tensor *weight,
                       cr_dtype weight_type, double *y, double *weight_sum) {
  const int64_t n = (int64_t)x->dims[0], c = (int64_t)x->dims[1];
  const int64_t inner = cr_product(x, 2, x->ndim);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  *weight_sum = 0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t t = cr_load_as_int64(target_type, target->data, b * inner + i);
      const int ignored = t == P(params)->i[0];
      int64_t safe = ignored ? 0 : t;
      if (safe < -c || safe >= c) return -1;
      if (safe < 0) safe += c;
      double w = weight ? as_dtype(dtype, cr_load_double(weight_type, weight->data, safe)) : 1.0;
      if (ignored) w = 0.0;
      const double picked = -lp[(b * c + safe) * inner + i];
      y[b * inner + i] = as_dtype(dtype, picked * w);
      *weight_sum += w;
    }
  }
  return 0;
}

static int loss_finish(const cr_params *params, const double *y, int64_t count,
                       double weight_sum, const cr_tensor *out) {
  const cr_dtype dtype = cr_in_dtype(params, 0);
  if (P(params)->fn == LOSS_NONE) {
    for (int64_t e = 0; e < count; ++e) cr_store_double(dtype, out->data, e, y[e]);
    return MX_ACC_OK;
  }
  double sum = 0;
  for (int64_t e = 0; e < count; ++e) sum += y[e];
  if (P(params)->fn == LOSS_MEAN) sum = as_dtype(dtype, sum) / as_dtype(dtype, weight_sum);
  cr_store_double(dtype, out->data, 0, sum);
  return MX_ACC_OK;
}

static int nll_run(const cr_params *params, const cr_tensor *in, int num_in,
                   const cr_tensor *out, int num_threads) {
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const int64_t count = count_of(&in[1].shape);
  double *lp = load_all(cr_in_dtype(params, 0), in[0].data, count_of(x));
  double *y = malloc((size_t)(count > 0 ? count : 1) * sizeof(double));
  int status = MX_ACC_OK;
  double weight_sum;
  if (lp == NULL || y == NULL) {
    status = out_of_memory("nll_loss");
  } else if (nll_compute(params, lp, x, &in[1], cr_in_dtype(params, 1), num_in > 2 ? &in[2] : NULL,
                         num_in > 2 ? cr_in_dtype(params, 2) : CR_FLOAT32, y, &weight_sum) != 0) {
    status = index_error("nll_loss");
  } else {
    status = loss_finish(params, y, count, weight_sum, out);
  }
  free(lp);
  free(y);
  return status;
}

const cr_op_impl cr_impl_onnx_nll_loss = {loss_parse, loss_inputs, cr_one_output, loss_dtypes,
                                          loss_shapes, nll_run};

static int two_outputs(const cr_params *params) {
  (void)params;
  return 2;
}

static int sce_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  int status = loss_shapes(params, in, num_in, &out[0]);
  out[1] = in[0];
  return status;
}

static int sce_run(const cr_params *params, const cr_tensor *in, int num_in,
                   const cr_tensor *out, int num_threads) {
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const int64_t count = count_of(&in[1].shape);
  double *lp = load_all(dtype, in[0].data, count_of(x));
  double *y = malloc((size_t)(count > 0 ? count : 1) * sizeof(double));
  int status = MX_ACC_OK;
  if (lp == NULL || y == NULL) {
    free(lp);
    free(y);
    return out_of_memory("softmax_cross_entropy");
  }
  const line_view v = lines_along(x, 1);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      double top = -INFINITY, sum = 0;
      for (int64_t j = 0; j < v.n; ++j) top = fmax(top, lp[(o * v.n + j) * v.inner + i]);
      for (int64_t j = 0; j < v.n; ++j) sum += exp(lp[(o * v.n + j) * v.inner + i] - top);
      for (int64_t j = 0; j < v.n; ++j) {
        const int64_t e = (o * v.n + j) * v.inner + i;
        lp[e] = as_dtype(dtype, lp[e] - top - log(sum));
        cr_store_double(dtype, out[1].data, e, lp[e]);
      }
    }
  }
  double weight_sum;
  if (nll_compute(params, lp, x, &in[1], cr_in_dtype(params, 1), num_in > 2 ? &in[2] : NULL,
                  num_in > 2 ? cr_in_dtype(params, 2) : CR_FLOAT32, y, &weight_sum) != 0) {
    status = index_error("softmax_cross_entropy");
  } else {
    status = loss_finish(params, y, count, weight_sum, &out[0]);
  }
  free(lp);
  free(y);
  return status;
}

const cr_op_impl cr_impl_onnx_softmax_cross_entropy = {loss_parse, loss_inputs, two_outputs,
                                                       loss_dtypes, sce_infer, sce_run};

/* ---- _onnx_pool ------------------------------------------------------------------------------ */

enum { POOL_MAX, POOL_AVG, POOL_LP };

static int pool_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  static const char *const kTypes[] = {"max", "avg", "lp", NULL};
  static const attr_spec kSpecs[] = {
      {"kernel", A_TUPLE, 0, NULL},      {"pool_type", A_CHOICE, 0, kTypes},
      {"stride", A_TUPLE, 1, NULL},      {"dilate", A_TUPLE, 2, NULL},
      {"pads", A_TUPLE, 3, NULL},        {"ceil_mode", A_BOOL, 0, NULL},
      {"count_include_pad", A_BOOL, 1, NULL}, {"p", A_INT, 0, NULL},
      {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->fn = -1;
  p->i[0] = 2;
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status != MX_ACC_OK) return status;
  const int n = p->tup_len[0];
  if (p->fn < 0 || n == 0 || n > CR_MAX_NDIM - 2 || (p->tup_len[1] && p->tup_len[1] != n) ||
      (p->tup_len[2] && p->tup_len[2] != n) || (p->tup_len[3] && p->tup_len[3] != 2 * n)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "pool: kernel, stride, dilate and pads disagree");
  }
  for (int i = 0; i < n; ++i) {
    if (p->tup[0][i] <= 0 || (p->tup_len[1] && p->tup[1][i] <= 0) ||
        (p->tup_len[2] && p->tup[2][i] <= 0) || (p->tup_len[3] && (p->tup[3][i] < 0 || p->tup[3][i + n] < 0))) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "pool: kernel, stride, dilate must be positive");
    }
  }
  return MX_ACC_OK;
}

/* Python's a // b for b > 0. */
static int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

typedef struct pool_geometry {
  int n;
  int64_t in[CR_MAX_NDIM], out[CR_MAX_NDIM], kernel[CR_MAX_NDIM], stride[CR_MAX_NDIM];
  int64_t dilate[CR_MAX_NDIM], pad_begin[CR_MAX_NDIM], pad_end[CR_MAX_NDIM];
} pool_geometry;

static int pool_geometry_of(const cr_params *params, const acc_shape *x, pool_geometry *g) {
  const onnx_p *p = P(params);
  const int n = p->tup_len[0];
  if (x->ndim != n + 2) return cr_shape_error("pool: data %s does not fit the kernel", x);
  g->n = n;
  int64_t window = 1;
  for (int i = 0; i < n; ++i) {
    if (p->tup[0][i] > ((int64_t)1 << 31) || (window *= p->tup[0][i]) > ((int64_t)1 << 40)) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "pool: a window of more than 2^40 elements");
    }
  }
  for (int i = 0; i < n; ++i) {
    g->in[i] = (int64_t)x->dims[2 + i];
    g->kernel[i] = p->tup[0][i];
    g->stride[i] = p->tup_len[1] ? p->tup[1][i] : 1;
    g->dilate[i] = p->tup_len[2] ? p->tup[2][i] : 1;
    g->pad_begin[i] = p->tup_len[3] ? p->tup[3][i] : 0;
    g->pad_end[i] = p->tup_len[3] ? p->tup[3][i + n] : 0;
    if (g->kernel[i] > ((int64_t)1 << 31) || g->dilate[i] > ((int64_t)1 << 31) ||
        g->stride[i] > ((int64_t)1 << 40) ||
        g->pad_begin[i] > ((int64_t)1 << 40) || g->pad_end[i] > ((int64_t)1 << 40)) {
      return cr_shape_error("pool: window too large for %s", x);
    }
    const int64_t span = (g->kernel[i] - 1) * g->dilate[i] + 1;
    const int64_t total = g->in[i] + g->pad_begin[i] + g->pad_end[i] - span;
    int64_t size = p->flag[0] ? -floor_div(-total, g->stride[i]) : floor_div(total, g->stride[i]);
    size += 1;
    if (p->flag[0] && (size - 1) * g->stride[i] >= g->in[i] + g->pad_begin[i]) size -= 1;
    if (size < 0) return cr_shape_error("pool: window larger than data %s", x);
    g->out[i] = size;
  }
  return MX_ACC_OK;
}

static int pool_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)num_in;
  pool_geometry g;
  int status = pool_geometry_of(params, &in[0], &g);
  if (status != MX_ACC_OK) return status;
  *out = in[0];
  for (int i = 0; i < g.n; ++i) out->dims[2 + i] = (uint64_t)g.out[i];
  return MX_ACC_OK;
}

static int pool_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  pool_geometry g;
  pool_geometry_of(params, &in[0].shape, &g);
  const onnx_p *p = P(params);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const int64_t planes = cr_product(&in[0].shape, 0, 2);
  const int64_t in_size = cr_product(&in[0].shape, 2, in[0].shape.ndim);
  const int64_t out_size = cr_product(&out->shape, 2, out->shape.ndim);
  for (int64_t plane = 0; plane < planes; ++plane) {
    for (int64_t o = 0; o < out_size; ++o) {
      int64_t opos[CR_MAX_NDIM], rest = o, windows = 1;
      for (int i = g.n - 1; i >= 0; --i) {
        opos[i] = rest % g.out[i];
        rest /= g.out[i];
      }
      /* per-axis counts of window taps inside the data and inside the padding */
      double valid_count = 1, inside_count = 1;
      for (int i = 0; i < g.n; ++i) {
        int64_t valid = 0, inside = 0;
        for (int64_t k = 0; k < g.kernel[i]; ++k) {
          const int64_t q = opos[i] * g.stride[i] + k * g.dilate[i];
          const int64_t at = q - g.pad_begin[i];
          valid += at >= 0 && at < g.in[i];
          inside += q < g.in[i] + g.pad_begin[i] + g.pad_end[i];
        }
        valid_count *= (double)valid;
        inside_count *= (double)inside;
        windows *= g.kernel[i];
      }
      double acc = p->fn == POOL_MAX ? -INFINITY : 0.0;
      int nan = 0;
      for (int64_t w = 0; w < windows; ++w) {
        int64_t wr = w, offset = 0, inside_data = 1;
        for (int i = g.n - 1; i >= 0; --i) {
          const int64_t k = wr % g.kernel[i];
          wr /= g.kernel[i];
          const int64_t at = opos[i] * g.stride[i] + k * g.dilate[i] - g.pad_begin[i];
          if (at < 0 || at >= g.in[i]) inside_data = 0;
        }
        if (!inside_data) continue;
        int64_t stride = 1;
        wr = w;
        for (int i = g.n - 1; i >= 0; --i) {
          const int64_t k = wr % g.kernel[i];
          wr /= g.kernel[i];
          offset += (opos[i] * g.stride[i] + k * g.dilate[i] - g.pad_begin[i]) * stride;
          stride *= g.in[i];
        }
        const double v = cr_load_double(dtype, in[0].data, plane * in_size + offset);
        if (p->fn == POOL_MAX) {
          if (isnan(v)) nan = 1;
          else if (v > acc) acc = v;
        } else if (p->fn == POOL_LP) {
          acc += pow(fabs(v), (double)p->i[0]);
        } else {
          acc += v;
        }
      }
      if (nan) acc = NAN;
      if (p->fn == POOL_LP) acc = pow(acc, 1.0 / (double)p->i[0]);
      if (p->fn == POOL_AVG) {
        const double count = p->flag[1] ? inside_count : valid_count;
        acc /= count > 1 ? count : 1;
      }
      cr_store_double(dtype, out->data, plane * out_size + o, acc);
    }
  }
  return MX_ACC_OK;
}

/* LpPool of integers truncates a float64 root (x ** (1 / p)) that numpy's
 * vectorised power may round one ulp apart from libm's: left to the host. */
static int pool_dtypes(const cr_params *params) {
  int status = cr_dtypes_any(params);
  if (status == MX_ACC_OK && P(params)->fn == POOL_LP) status = decline_int(params, 0, "lp pooling");
  return status;
}

const cr_op_impl cr_impl_onnx_pool = {pool_parse, cr_one_input, cr_one_output, pool_dtypes,
                                      pool_infer, pool_run};

/* ---- _onnx_resize, _onnx_upsample_nearest ------------------------------------------------- */

enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYMMETRIC, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS,
       CT_ASYMMETRIC, CT_TF_CROP_AND_RESIZE };
enum { NR_PREFER_FLOOR, NR_PREFER_CEIL, NR_FLOOR, NR_CEIL };

static int resize_parse(const char *const *keys, const char *const *vals, size_t count,
                        cr_params *params) {
  static const char *const kModes[] = {"nearest", "linear", "cubic", NULL};
  static const char *const kCoords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                        "align_corners", "asymmetric", "tf_crop_and_resize",
                                        NULL};
  static const char *const kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                         "ceil", NULL};
  static const attr_spec kSpecs[] = {
      {"sizes", A_TUPLE, 0, NULL},
      {"scales", A_FTUPLE, 0, NULL},
      {"mode", A_CHOICE, 0, kModes},
      {"coordinate_transformation_mode", A_CHOICE, 1, kCoords},
      {"nearest_mode", A_CHOICE, 2, kNearest},
      {"cubic_coeff_a", A_FLOAT, 0, NULL},
      {"exclude_outside", A_BOOL, 0, NULL},
      {"extrapolation_value", A_FLOAT, 1, NULL},
      {"roi", A_FTUPLE, 1, NULL},
      {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->fn = RS_NEAREST;
  p->i[0] = CT_HALF_PIXEL;
  p->i[1] = NR_PREFER_FLOOR;
  p->f[0] = -0.75;
  return parse_with(kSpecs, keys, vals, count, p);
}

static int resize_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out) {
  (void)num_in;
  const onnx_p *p = P(params);
  const acc_shape *x = &in[0];
  if (p->tup_len[0] != x->ndim || p->ftup_len[0] != x->ndim ||
      (p->ftup_len[1] != 0 && p->ftup_len[1] != 2 * x->ndim)) {
    return cr_shape_error("resize: sizes, scales and roi do not fit data %s", x);
  }
  *out = *x;
  for (int d = 0; d < x->ndim; ++d) {
    if (p->tup[0][d] < 0 || (p->tup[0][d] > 0 && x->dims[d] == 0)) {
      return cr_shape_error("resize: a size does not fit data %s", x);
    }
    out->dims[d] = (uint64_t)p->tup[0][d];
  }
  return MX_ACC_OK;
}

static double resize_coord(int mode, double x, int64_t out_size, int64_t in_size, double scale,
                           double roi_start, double roi_end) {
  switch (mode) {
    case CT_HALF_PIXEL: return (x + 0.5) / scale - 0.5;
    case CT_HALF_PIXEL_SYMMETRIC: {
      const double adjustment = (double)out_size / (scale * (double)in_size);
      const double center = (double)in_size / 2;
      return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
    }
    case CT_PYTORCH_HALF_PIXEL: return out_size > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case CT_ALIGN_CORNERS: {
      const double length = (double)in_size * scale;
      return length > 1 ? x * (double)(in_size - 1) / (length - 1) : 0.0;
    }
    case CT_ASYMMETRIC: return x / scale;
    default:
      if (out_size > 1) {
        return roi_start * (double)(in_size - 1) +
               x * (roi_end - roi_start) * (double)(in_size - 1) / (double)(out_size - 1);
      }
      return 0.5 * (roi_start + roi_end) * (double)(in_size - 1);
  }
}

static double cubic_kernel(double d, double a) {
  d = fabs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0.0;
}

/* One axis of x (double, shape dims) resized to out_size into y. */
static void resize_axis(const onnx_p *p, const double *x, const int64_t *dims, int ndim, int axis,
                        int64_t out_size, double scale, double roi_start, double roi_end,
                        double *y) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= dims[d];
  for (int d = axis + 1; d < ndim; ++d) inner *= dims[d];
  const int64_t in_size = dims[axis];
  for (int64_t o = 0; o < out_size; ++o) {
    const double c = resize_coord((int)p->i[0], (double)o, out_size, in_size, scale, roi_start, roi_end);
    const int outside = c < 0 || c > (double)(in_size - 1);
    int64_t taps[4];
    double weights[4];
    int num_taps;
    if (p->fn == RS_NEAREST) {
      double r;
      const double frac = c - floor(c); /* Python's c % 1 */
      switch (p->i[1]) {
        case NR_PREFER_FLOOR: r = frac == 0.5 ? floor(c) : nearbyint(c); break;
        case NR_PREFER_CEIL: r = frac == 0.5 ? ceil(c) : nearbyint(c); break;
        case NR_FLOOR: r = floor(c); break;
        default: r = ceil(c); break;
      }
      int64_t index = r < 0 ? 0 : r > (double)(in_size - 1) ? in_size - 1 : (int64_t)r;
      taps[0] = index;
      weights[0] = 1.0;
      num_taps = 1;
    } else {
      const double base = floor(c), t = c - base;
      num_taps = p->fn == RS_LINEAR ? 2 : 4;
      const int first = p->fn == RS_LINEAR ? 0 : -1;
      double total = 0;
      for (int k = 0; k < num_taps; ++k) {
        const double index = base + first + k;
        weights[k] = p->fn == RS_LINEAR ? (k == 0 ? 1 - t : t)
                                        : cubic_kernel(t - (first + k), p->f[0]);
        if (p->flag[0] && (index < 0 || index >= (double)in_size)) weights[k] = 0.0;
        total += weights[k];
        taps[k] = index < 0 ? 0 : index > (double)(in_size - 1) ? in_size - 1 : (int64_t)index;
      }
      if (p->flag[0]) {
        for (int k = 0; k < num_taps; ++k) weights[k] /= total;
      }
    }
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t i = 0; i < inner; ++i) {
        double v = 0;
        for (int k = 0; k < num_taps; ++k) v += x[(a * in_size + taps[k]) * inner + i] * weights[k];
        if (p->i[0] == CT_TF_CROP_AND_RESIZE && outside) v = p->f[1];
        y[(a * out_size + o) * inner + i] = v;
      }
    }
  }
}

static int resize_run(const cr_params *params, const cr_tensor *in, int num_in,
                      const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const onnx_p *p = P(params);
  const acc_shape *xs = &in[0].shape;
  const cr_dtype dtype = cr_in_dtype(params, 0);
  int64_t dims[CR_MAX_NDIM];
  int64_t largest = count_of(xs);
  for (int d = 0; d < xs->ndim; ++d) dims[d] = (int64_t)xs->dims[d];
  /* the largest intermediate: every prefix of axes resized */
  for (int d = 0; d < xs->ndim; ++d) {
    uint64_t size = 1;
    for (int e = 0; e < xs->ndim; ++e) {
      const uint64_t extent = (uint64_t)(e <= d ? p->tup[0][e] : dims[e]);
      if (cr_checked_mul(size, extent, "resize intermediate", &size) != MX_ACC_OK) {
        return MX_ACC_ERR_INVALID_ARG;
      }
    }
    if ((int64_t)size > largest) largest = (int64_t)size;
  }
  double *x = load_all(dtype, in[0].data, count_of(xs));
  double *y = malloc((size_t)(largest > 0 ? largest : 1) * sizeof(double));
  double *x_big = x ? realloc(x, (size_t)(largest > 0 ? largest : 1) * sizeof(double)) : NULL;
  if (x_big == NULL || y == NULL) {
    free(x_big ? x_big : x);
    free(y);
    return out_of_memory("resize");
  }
  x = x_big;
  for (int d = 0; d < xs->ndim; ++d) {
    const int64_t size = p->tup[0][d];
    const double scale = p->ftup[0][d];
    if (size == dims[d] && scale == 1.0 && p->i[0] != CT_TF_CROP_AND_RESIZE) continue;
    const double roi_start = p->ftup_len[1] ? p->ftup[1][d] : 0.0;
    const double roi_end = p->ftup_len[1] ? p->ftup[1][d + xs->ndim] : 1.0;
    resize_axis(p, x, dims, xs->ndim, d, size, scale, roi_start, roi_end, y);
    dims[d] = size;
    double *swap = x;
    x = y;
    y = swap;
  }
  const int64_t count = count_of(&out->shape);
  for (int64_t e = 0; e < count; ++e) {
    double v = x[e];
    if (is_int(dtype)) {
      static const double kLow[] = {0, 0, 0, 0, INT32_MIN, INT8_MIN, -9223372036854775808.0};
      static const double kHigh[] = {0, 0, 0, UINT8_MAX, INT32_MAX, INT8_MAX, 9223372036854775807.0};
      v = nearbyint(v);
      v = v < kLow[dtype] ? kLow[dtype] : v > kHigh[dtype] ? kHigh[dtype] : v;
    }
    cr_store_double(dtype, out->data, e, v);
  }
  free(x);
  free(y);
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_resize = {resize_parse, cr_one_input, cr_one_output,
                                        cr_dtypes_any, resize_infer, resize_run};

static int upsample_parse(const char *const *keys, const char *const *vals, size_t count,
                          cr_params *params) {
  static const attr_spec kSpecs[] = {{"scales", A_FTUPLE, 0, NULL}, {NULL, A_INT, 0, NULL}};
  return parse_with(kSpecs, keys, vals, count, P(params));
}

static int upsample_plan(const cr_params *params, const acc_shape *x, int64_t *sizes) {
  const onnx_p *p = P(params);
  if (p->ftup_len[0] > x->ndim) return cr_shape_error("upsample: more scales than axes of %s", x);
  for (int d = 0; d < x->ndim; ++d) {
    if (d >= p->ftup_len[0]) {
      sizes[d] = (int64_t)x->dims[d];
      continue;
    }
    const double size = floor((double)x->dims[d] * p->ftup[0][d]);
    if (!(p->ftup[0][d] > 0) || !(size >= 0) || size > 1e15 ||
        (size > 0 && x->dims[d] == 0)) {
      return cr_shape_error("upsample: a scale does not fit data %s", x);
    }
    sizes[d] = (int64_t)size;
  }
  return MX_ACC_OK;
}

static int upsample_infer(const cr_params *params, const acc_shape *in, int num_in,
                          acc_shape *out) {
  (void)num_in;
  int64_t sizes[CR_MAX_NDIM];
  int status = upsample_plan(params, &in[0], sizes);
  if (status != MX_ACC_OK) return status;
  *out = in[0];
  for (int d = 0; d < out->ndim; ++d) out->dims[d] = (uint64_t)sizes[d];
  return MX_ACC_OK;
}

static void upsample_tables(const cr_params *params, const acc_shape *x, const acc_shape *out,
                            int64_t *const *tables, int64_t *x_strides) {
  cr_compact_strides(x, x_strides);
  for (int d = 0; d < out->ndim; ++d) {
    const double scale = d < P(params)->ftup_len[0] ? P(params)->ftup[0][d] : 1.0;
    for (uint64_t o = 0; o < out->dims[d]; ++o) {
      const int64_t index = d < P(params)->ftup_len[0] ? (int64_t)floor((double)o / scale) : (int64_t)o;
      tables[d][o] = index < (int64_t)x->dims[d] - 1 ? index : (int64_t)x->dims[d] - 1;
    }
  }
}

static int upsample_run(const cr_params *params, const cr_tensor *in, int num_in,
                        const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  return table_run(params, in, out, upsample_tables, NULL);
}

const cr_op_impl cr_impl_onnx_upsample_nearest = {upsample_parse, cr_one_input, cr_one_output,
                                                  cr_dtypes_any, upsample_infer, upsample_run};
