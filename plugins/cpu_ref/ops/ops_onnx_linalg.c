/*
 * The ONNX importer's products and linear algebra in cpu_ref (see
 * ops_onnx.c): _onnx_matmul, _onnx_gemm, _onnx_det and _onnx_einsum.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "ops_onnx_impl.h"
#include "parallel.h"
#include "reference.h"
#include "status.h"

/* ======================================================================= */
/* Products and linear algebra                                              */
/* ======================================================================= */

/* ---- _onnx_matmul, _onnx_gemm ------------------------------------------------------------ */

static int same_in_out_dtypes(const cr_params *params) { return cr_dtypes_any(params); }

/* float32 products go through cr_gemm (gemm.h): each product of the batch
 * (numpy's broadcast of the operands' leading axes) is one GEMM reading the
 * operands in place; several products are shared out among the threads, one
 * product per thread at a time, and a single one uses all of them. The sums
 * are float32 (the generic path's are float64): the difference is the
 * rounding of the float32 GEMM of FullyConnected and batch_dot. */

/* Below this many multiply-adds in all, the products run on one thread:
 * waking the pool would cost more than it saves. */
#define MATMUL_PARALLEL_MIN_WORK ((int64_t)1 << 16)

/* Whether a * b * c multiply-adds reach the parallel threshold (in double:
 * the product may not fit in int64_t). */
static int enough_work(int64_t a, int64_t b, int64_t c) {
  const double work = (double)a * (double)b * (double)c;
  return work >= (double)MATMUL_PARALLEL_MIN_WORK;
}

typedef struct matmul_f32_task {
  const float *a;
  const float *b;
  float *y;
  const acc_shape *a_batch, *b_batch, *outer;
  int64_t m, n, k;
  int threads_per_product;
  int failed; /* set (atomically) when a GEMM found no scratch memory */
} matmul_f32_task;

static int matmul_f32_product(const matmul_f32_task *t, int64_t index) {
  const int64_t a_off = offset_in(t->a_batch, t->outer, index) * t->m * t->k;
  const int64_t b_off = offset_in(t->b_batch, t->outer, index) * t->k * t->n;
  const cr_gemm_operand a = {t->a + a_off, t->k, 1, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
  const cr_gemm_operand b = {t->b + b_off, t->n, 1, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
  return cr_gemm(t->m, t->n, t->k, &a, &b, t->y + index * t->m * t->n, t->n, NULL,
                 t->threads_per_product);
}

static void matmul_f32_products(void *context, int64_t begin, int64_t end) {
  matmul_f32_task *t = context;
  for (int64_t index = begin; index < end; ++index) {
    if (matmul_f32_product(t, index) != 0) __atomic_store_n(&t->failed, 1, __ATOMIC_RELAXED);
  }
}

static int matmul_f32(const float *a, const float *b, float *y, const acc_shape *a_batch,
                      const acc_shape *b_batch, const acc_shape *outer, int64_t batches,
                      int64_t m, int64_t n, int64_t k, int num_threads) {
  if (batches == 0 || m == 0 || n == 0) return MX_ACC_OK;
  const int threads = enough_work(batches * m, n, k > 0 ? k : 1) && num_threads > 1
                          ? num_threads : 1;
  matmul_f32_task task = {a, b, y, a_batch, b_batch, outer, m, n, k, 1, 0};
  if (batches == 1 || threads == 1) {
    task.threads_per_product = threads;
    matmul_f32_products(&task, 0, batches);
  } else {
    cr_parallel_for(threads, batches, matmul_f32_products, &task);
  }
  return __atomic_load_n(&task.failed, __ATOMIC_RELAXED) ? out_of_memory("matmul")
                                                         : MX_ACC_OK;
}

static int matmul_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out) {
  (void)params;
  (void)num_in;
  acc_shape a = in[0], b = in[1];
  if (a.ndim == 0 || b.ndim == 0) return cr_shape_error("matmul of a scalar %s", a.ndim ? &b : &a);
  const int a_vec = a.ndim == 1, b_vec = b.ndim == 1;
  if (a_vec) {
    a.ndim = 2;
    a.dims[1] = a.dims[0];
    a.dims[0] = 1;
  }
  if (b_vec) {
    b.ndim = 2;
    b.dims[1] = 1;
  }
  if (a.dims[a.ndim - 1] != b.dims[b.ndim - 2]) return cr_shape_error("matmul: %s does not fit", &in[1]);
  acc_shape batch[2] = {a, b};
  batch[0].ndim -= 2;
  batch[1].ndim -= 2;
  int status = broadcast_shapes(batch, 2, out);
  if (status != MX_ACC_OK) return status;
  if (!a_vec) out->dims[out->ndim++] = a.dims[a.ndim - 2];
  if (!b_vec) out->dims[out->ndim++] = b.dims[b.ndim - 1];
  return MX_ACC_OK;
}

static int matmul_run(const cr_params *params, const cr_tensor *in, int num_in,
                      const cr_tensor *out, int num_threads) {
  (void)num_in;
  acc_shape a = in[0].shape, b = in[1].shape;
  if (a.ndim == 1) {
    a.ndim = 2;
    a.dims[1] = a.dims[0];
    a.dims[0] = 1;
  }
  if (b.ndim == 1) {
    b.ndim = 2;
    b.dims[1] = 1;
  }
  const int64_t m = (int64_t)a.dims[a.ndim - 2], k = (int64_t)a.dims[a.ndim - 1];
  const int64_t n = (int64_t)b.dims[b.ndim - 1];
  acc_shape batch[2] = {a, b}, outer;
  batch[0].ndim -= 2;
  batch[1].ndim -= 2;
  broadcast_shapes(batch, 2, &outer);
  const int64_t batches = count_of(&outer);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  /* Other dtypes, and every dtype under reference kernels: the reference
   * product (float64 sums), one per product of the batch. */
  if (dtype == CR_FLOAT32 && params->kernels == CR_KERNELS_FAST) {
    return matmul_f32(in[0].data, in[1].data, out->data, &batch[0], &batch[1], &outer, batches,
                      m, n, k, num_threads);
  }
  for (int64_t t = 0; t < batches; ++t) {
    const int64_t a_off = offset_in(&batch[0], &outer, t) * m * k;
    const int64_t b_off = offset_in(&batch[1], &outer, t) * k * n;
    cr_ref_matmul_any(dtype, m, n, k, in[0].data, a_off, k, 1, in[1].data, b_off, n, 1, out->data,
                      t * m * n);
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_matmul = {cr_no_attrs_parse, cr_two_inputs, cr_one_output,
                                        same_in_out_dtypes, matmul_infer, matmul_run};

static int gemm_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  static const attr_spec kSpecs[] = {{"alpha", A_FLOAT, 0, NULL}, {"beta", A_FLOAT, 1, NULL},
                                     {"trans_a", A_BOOL, 0, NULL}, {"trans_b", A_BOOL, 1, NULL},
                                     {"has_c", A_BOOL, 2, NULL}, {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->f[0] = 1.0;
  p->f[1] = 1.0;
  p->flag[2] = 1;
  return parse_with(kSpecs, keys, vals, count, p);
}

static int gemm_inputs(const cr_params *params) { return P(params)->flag[2] ? 3 : 2; }

static int gemm_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  const onnx_p *p = P(params);
  if (in[0].ndim != 2 || in[1].ndim != 2) return cr_shape_error("gemm needs matrices, got %s", &in[0]);
  const uint64_t m = in[0].dims[p->flag[0] ? 1 : 0], k = in[0].dims[p->flag[0] ? 0 : 1];
  const uint64_t kb = in[1].dims[p->flag[1] ? 1 : 0], n = in[1].dims[p->flag[1] ? 0 : 1];
  if (k != kb) return cr_shape_error("gemm: b of shape %s does not fit", &in[1]);
  out->ndim = 2;
  out->dims[0] = m;
  out->dims[1] = n;
  if (num_in > 2) {
    acc_shape both[2] = {*out, in[2]}, result;
    int status = broadcast_shapes(both, 2, &result);
    if (status != MX_ACC_OK) return status;
    *out = result;
  }
  return MX_ACC_OK;
}

/* The float32 Gemm when the result is m x n (C, if any, broadcasts to it):
 * one cr_gemm, C added by its epilogue (a row or column bias, or a
 * residual) when alpha and beta are 1, otherwise by a pass over the result. */
static int gemm_f32(const onnx_p *p, const cr_tensor *in, int num_in, const cr_tensor *out,
                    int64_t m, int64_t n, int64_t k, int64_t a_rs, int64_t a_cs, int64_t b_rs,
                    int64_t b_cs, int num_threads) {
  const float *c = num_in > 2 ? (const float *)in[2].data : NULL;
  const acc_shape *c_shape = num_in > 2 ? &in[2].shape : NULL;
  float *y = out->data;
  if (m == 0 || n == 0) return MX_ACC_OK;
  const float alpha = (float)p->f[0], beta = (float)p->f[1];
  cr_epilogue epilogue = {NULL, NULL, NULL, 0, CR_EPI_NONE, 0.0f, 0.0f};
  int c_done = c == NULL;
  if (c != NULL && p->f[0] == 1.0 && p->f[1] == 1.0) {
    /* C right-aligned against (m, n): its last extent (n or 1) and the one
     * before it (m or 1, or none) */
    const int64_t c_cols = c_shape->ndim >= 1 ? (int64_t)c_shape->dims[c_shape->ndim - 1] : 1;
    const int64_t c_rows = c_shape->ndim >= 2 ? (int64_t)c_shape->dims[c_shape->ndim - 2] : 1;
    if (c_rows == m && c_cols == n) {
      epilogue.residual = c;
      epilogue.ld_residual = n;
      c_done = 1;
    } else if (c_rows == 1 && c_cols == n) {
      epilogue.col_bias = c;
      c_done = 1;
    } else if (c_rows == m && c_cols == 1) {
      epilogue.row_bias = c;
      c_done = 1;
    }
  }
  const cr_gemm_operand a = {in[0].data, a_rs, a_cs, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
  const cr_gemm_operand b = {in[1].data, b_rs, b_cs, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
  const int threads = enough_work(m, n, k > 0 ? k : 1) ? num_threads : 1;
  if (cr_gemm(m, n, k, &a, &b, y, n, &epilogue, threads) != 0) return out_of_memory("gemm");
  if (!c_done || alpha != 1.0f) {
    for (int64_t e = 0; e < m * n; ++e) {
      float value = alpha * y[e];
      if (!c_done) value += beta * c[offset_in(c_shape, &out->shape, e)];
      y[e] = value;
    }
  }
  return MX_ACC_OK;
}

static int gemm_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  const onnx_p *p = P(params);
  const acc_shape *a = &in[0].shape, *b = &in[1].shape;
  const int64_t m = (int64_t)a->dims[p->flag[0] ? 1 : 0], k = (int64_t)a->dims[p->flag[0] ? 0 : 1];
  const int64_t n = (int64_t)b->dims[p->flag[1] ? 0 : 1];
  const int64_t a_rs = p->flag[0] ? 1 : k, a_cs = p->flag[0] ? m : 1;
  const int64_t b_rs = p->flag[1] ? 1 : n, b_cs = p->flag[1] ? k : 1;
  const cr_dtype dtype = cr_in_dtype(params, 0);
  if (dtype == CR_FLOAT32 && params->kernels == CR_KERNELS_FAST && out->shape.ndim == 2 && (int64_t)out->shape.dims[0] == m &&
      (int64_t)out->shape.dims[1] == n) {
    return gemm_f32(p, in, num_in, out, m, n, k, a_rs, a_cs, b_rs, b_cs, num_threads);
  }
  /* Other dtypes, and every dtype under reference kernels: the reference
   * product into an m x n scratch of the dtype (rounded to it, as numpy's
   * intermediate), then alpha * it + beta * C broadcast to the output. */
  const size_t elem = cr_dtype_size(dtype);
  void *product = malloc((size_t)(m * n > 0 ? m * n : 1) * elem);
  if (product == NULL) return out_of_memory("gemm");
  cr_ref_matmul_any(dtype, m, n, k, in[0].data, 0, a_rs, a_cs, in[1].data, 0, b_rs, b_cs, product,
                    0);
  const acc_shape mn = {2, {(uint64_t)m, (uint64_t)n}};
  int64_t dims[CR_MAX_NDIM], p_strides[CR_MAX_NDIM], c_strides[CR_MAX_NDIM] = {0};
  const int ndim = out->shape.ndim;
  for (int d = 0; d < ndim; ++d) dims[d] = (int64_t)out->shape.dims[d];
  bstrides(&mn, ndim, p_strides);
  if (num_in > 2) bstrides(&in[2].shape, ndim, c_strides);
  cr_ref_scale_add(dtype, ndim, dims, p_strides, c_strides, p->f[0], p->f[1], product,
                   num_in > 2 ? in[2].data : NULL, out->data);
  free(product);
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_gemm = {gemm_parse, gemm_inputs, cr_one_output,
                                      same_in_out_dtypes, gemm_infer, gemm_run};

/* ---- _onnx_det ---------------------------------------------------------------------------- */

static int det_dtypes(const cr_params *params) {
  int status = out_dtype_is(params, 0, params->in_dtypes[0]);
  /* numpy.linalg refuses float16; integer results would be LAPACK's float64
   * determinant truncated, which an exact-looking value one ulp below an
   * integer turns into the integer below: left to the host. */
  const int32_t dtype = params->in_dtypes[0];
  if (status == MX_ACC_OK && dtype != CR_FLOAT32 && dtype != CR_FLOAT64) {
    status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "det runs only float32 and float64");
  }
  return status;
}

static int det_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)params;
  (void)num_in;
  const acc_shape *x = &in[0];
  if (x->ndim < 2 || x->dims[x->ndim - 1] != x->dims[x->ndim - 2]) {
    return cr_shape_error("det needs square matrices, got %s", x);
  }
  *out = *x;
  out->ndim -= 2;
  return MX_ACC_OK;
}

static int det_run(const cr_params *params, const cr_tensor *in, int num_in,
                   const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const acc_shape *x = &in[0].shape;
  const int64_t m = (int64_t)x->dims[x->ndim - 1], batches = count_of(&out->shape);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  double *a = malloc((size_t)(m * m > 0 ? m * m : 1) * sizeof(double));
  if (a == NULL) return out_of_memory("det");
  for (int64_t t = 0; t < batches; ++t) {
    for (int64_t e = 0; e < m * m; ++e) a[e] = cr_load_double(dtype, in[0].data, t * m * m + e);
    double det = 1.0;
    for (int64_t c = 0; c < m && det != 0.0; ++c) {
      int64_t pivot = c;
      for (int64_t r = c + 1; r < m; ++r) {
        if (fabs(a[r * m + c]) > fabs(a[pivot * m + c])) pivot = r;
      }
      if (a[pivot * m + c] == 0.0) {
        det = 0.0;
        break;
      }
      if (pivot != c) {
        for (int64_t j = 0; j < m; ++j) {
          const double s = a[c * m + j];
          a[c * m + j] = a[pivot * m + j];
          a[pivot * m + j] = s;
        }
        det = -det;
      }
      det *= a[c * m + c];
      for (int64_t r = c + 1; r < m; ++r) {
        const double f = a[r * m + c] / a[c * m + c];
        for (int64_t j = c; j < m; ++j) a[r * m + j] -= f * a[c * m + j];
      }
    }
    cr_store_double(dtype, out->data, t, det);
  }
  free(a);
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_det = {cr_no_attrs_parse, cr_one_input, cr_one_output, det_dtypes,
                                     det_infer, det_run};

/* ---- _onnx_einsum ------------------------------------------------------------------------- */

enum { kEinsumLabels = 52 + CR_MAX_NDIM };

typedef struct einsum_plan {
  int num_inputs;
  int in_ndim[CR_MAX_INPUTS];
  int in_labels[CR_MAX_INPUTS][CR_MAX_NDIM];
  int out_ndim;
  int out_labels[CR_MAX_NDIM];
  int64_t extent[kEinsumLabels];
  int used[kEinsumLabels];
  int ellipsis_ndim;
} einsum_plan;

static int letter_label(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

/* Labels of one operand term (letters and at most one "..."). */
static int einsum_term(const char *term, size_t length, int ndim, int *labels, int *count,
                       int *ellipsis_ndim) {
  int letters = 0, has_ellipsis = 0;
  for (size_t i = 0; i < length; ++i) {
    if (term[i] == '.') {
      if (has_ellipsis || i + 2 >= length || term[i + 1] != '.' || term[i + 2] != '.') return -1;
      has_ellipsis = 1;
      i += 2;
    } else if (letter_label(term[i]) >= 0) {
      ++letters;
    } else {
      return -1;
    }
  }
  const int dots = has_ellipsis ? ndim - letters : 0;
  if (dots < 0 || (!has_ellipsis && letters != ndim)) return -1;
  if (ndim >= 0 && dots > *ellipsis_ndim) *ellipsis_ndim = dots;
  *count = 0;
  for (size_t i = 0; i < length; ++i) {
    if (term[i] == '.') {
      if (*count + dots > CR_MAX_NDIM) return -1;
      for (int k = 0; k < dots; ++k) labels[(*count)++] = 52 + CR_MAX_NDIM - dots + k;
      i += 2;
    } else {
      if (*count == CR_MAX_NDIM) return -1;
      labels[(*count)++] = letter_label(term[i]);
    }
  }
  return 0;
}

static int einsum_plan_of(const cr_params *params, const acc_shape *in, int num_in,
                          einsum_plan *plan) {
  char text[sizeof P(params)->text];
  size_t length = 0;
  for (const char *c = P(params)->text; *c != '\0'; ++c) {
    if (*c != ' ') text[length++] = *c;
  }
  text[length] = '\0';
  memset(plan, 0, sizeof *plan);
  plan->num_inputs = num_in;
  const char *arrow = strstr(text, "->");
  const size_t lhs_length = arrow ? (size_t)(arrow - text) : length;
  const char *term = text;
  for (int k = 0; k < num_in; ++k) {
    const char *end = memchr(term, ',', lhs_length - (size_t)(term - text));
    const size_t term_length = end ? (size_t)(end - term) : lhs_length - (size_t)(term - text);
    if ((k < num_in - 1) != (end != NULL) ||
        einsum_term(term, term_length, in[k].ndim, plan->in_labels[k], &plan->in_ndim[k],
                    &plan->ellipsis_ndim) != 0) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "einsum equation \"%s\" does not fit the inputs",
                      P(params)->text);
    }
    for (int d = 0; d < in[k].ndim; ++d) {
      const int label = plan->in_labels[k][d];
      const int64_t e = (int64_t)in[k].dims[d];
      const int ellipsis = label >= 52;
      if (!plan->used[label] || (ellipsis && plan->extent[label] == 1)) {
        plan->extent[label] = e;
      } else if (plan->extent[label] != e && !(ellipsis && e == 1)) {
        return acc_fail(MX_ACC_ERR_INVALID_ARG, "einsum: extents of one label differ");
      }
      plan->used[label] = 1;
    }
    term = end ? end + 1 : term;
  }
  if (arrow != NULL) {
    int dummy = plan->ellipsis_ndim;
    const char *rhs = arrow + 2;
    size_t rhs_length = strlen(rhs);
    int has_ellipsis = strstr(rhs, "...") != NULL;
    int letters = 0;
    for (size_t i = 0; i < rhs_length; ++i) letters += letter_label(rhs[i]) >= 0;
    if (einsum_term(rhs, rhs_length, letters + (has_ellipsis ? plan->ellipsis_ndim : 0),
                    plan->out_labels, &plan->out_ndim, &dummy) != 0) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "einsum output \"%s\" is malformed", rhs);
    }
    for (int d = 0; d < plan->out_ndim; ++d) {
      const int label = plan->out_labels[d];
      for (int e = 0; e < d; ++e) {
        if (plan->out_labels[e] == label) return acc_fail(MX_ACC_ERR_INVALID_ARG, "einsum: repeated output label");
      }
      if (!plan->used[label]) return acc_fail(MX_ACC_ERR_INVALID_ARG, "einsum: unknown output label");
    }
  } else {
    for (int k = 0; k < plan->ellipsis_ndim; ++k) {
      plan->out_labels[plan->out_ndim++] = 52 + CR_MAX_NDIM - plan->ellipsis_ndim + k;
    }
    for (int label = 0; label < 52; ++label) {
      int times = 0;
      for (int k = 0; k < num_in; ++k) {
        for (int d = 0; d < plan->in_ndim[k]; ++d) times += plan->in_labels[k][d] == label;
      }
      if (times == 1) {
        if (plan->out_ndim == CR_MAX_NDIM) return acc_fail(MX_ACC_ERR_UNSUPPORTED, "einsum: too many dimensions");
        plan->out_labels[plan->out_ndim++] = label;
      }
    }
  }
  return MX_ACC_OK;
}

static int einsum_parse(const char *const *keys, const char *const *vals, size_t count,
                        cr_params *params) {
  static const attr_spec kSpecs[] = {{"equation", A_TEXT, 0, NULL}, {"num_args", A_COUNT, 0, NULL},
                                     {NULL, A_INT, 0, NULL}};
  P(params)->num_args = 1;
  return parse_with(kSpecs, keys, vals, count, P(params));
}

static int einsum_dtypes(const cr_params *params) {
  int status = same_dtypes(params, 0, params->num_inputs - 1);
  return status == MX_ACC_OK ? out_dtype_is(params, 0, params->in_dtypes[0]) : status;
}

static int einsum_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out) {
  einsum_plan plan;
  int status = einsum_plan_of(params, in, num_in, &plan);
  if (status != MX_ACC_OK) return status;
  out->ndim = plan.out_ndim;
  for (int d = 0; d < plan.out_ndim; ++d) out->dims[d] = (uint64_t)plan.extent[plan.out_labels[d]];
  return MX_ACC_OK;
}

/* numpy's label order for the summed labels of its iterator: the
 * broadcast (ellipsis) dimensions, then 'A'..'Z', then 'a'..'z'. */
static int numpy_label_rank(int label) {
  if (label >= 52) return label - 52;
  if (label >= 26) return CR_MAX_NDIM + (label - 26);
  return CR_MAX_NDIM + 26 + label;
}

/* The order in which numpy's einsum (c_einsum, an nditer over the output
 * labels then the summed ones) visits the summed labels, and whether its
 * inner loop reduces into a fixed output element ("outstride0": products
 * summed in the computation type, then added to the output once) or adds
 * every product to the output (stored, and so rounded, each time). This
 * decides float16 and float32 results. nditer orders the axes by strides
 * (npyiter_find_best_axis_ordering) and coalesces the innermost ones
 * (npyiter_coalesce_axes); both are reproduced here.
 * summed[0..*num_summed) receives the summed labels outermost first;
 * *num_inner the count of them (at the end) inside an outstride0 loop. */
static void einsum_numpy_order(const einsum_plan *plan, int num_in,
                               int64_t strides[][kEinsumLabels], const int64_t *out_strides,
                               int *summed, int *num_summed, int *num_inner) {
  int axes[kEinsumLabels], ndim = 0, is_out[kEinsumLabels] = {0};
  for (int d = 0; d < plan->out_ndim; ++d) {
    axes[ndim++] = plan->out_labels[d];
    is_out[plan->out_labels[d]] = 1;
  }
  const int first_summed = ndim;
  for (int label = 0; label < kEinsumLabels; ++label) {
    if (plan->used[label] && !is_out[label]) axes[ndim++] = label;
  }
  for (int i = first_summed + 1; i < ndim; ++i) { /* by numpy's label order */
    for (int j = i; j > first_summed && numpy_label_rank(axes[j]) < numpy_label_rank(axes[j - 1]); --j) {
      const int t = axes[j];
      axes[j] = axes[j - 1];
      axes[j - 1] = t;
    }
  }
  /* Per iteration axis and operand (inputs, then the output): the stride,
   * 0 for axes of extent 1 as nditer has it. */
  const int nop = num_in + 1;
  int64_t st[kEinsumLabels][CR_MAX_INPUTS + 1];
  for (int a = 0; a < ndim; ++a) {
    const int label = axes[a];
    for (int k = 0; k < nop; ++k) {
      const int64_t v = k < num_in ? strides[k][label] : out_strides[label];
      st[a][k] = plan->extent[label] == 1 ? 0 : (v < 0 ? -v : v);
    }
  }
  /* perm[0] is the innermost axis (nditer's reversed axis data) */
  int perm[kEinsumLabels];
  for (int i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  for (int i0 = 1; i0 < ndim; ++i0) {
    const int j0 = perm[i0];
    int ipos = i0;
    for (int i1 = i0 - 1; i1 >= 0; --i1) {
      const int j1 = perm[i1];
      int ambiguous = 1, swap = 0;
      for (int k = 0; k < nop; ++k) {
        if (st[j0][k] != 0 && st[j1][k] != 0) {
          if (st[j1][k] <= st[j0][k]) swap = 0;
          else if (ambiguous) swap = 1;
          ambiguous = 0;
        }
      }
      if (!ambiguous) {
        if (swap) ipos = i1;
        else break;
      }
    }
    if (ipos != i0) {
      for (int i = i0; i > ipos; --i) perm[i] = perm[i - 1];
      perm[ipos] = j0;
    }
  }
  *num_summed = 0;
  *num_inner = 0;
  if (ndim == 0) return; /* scalars only: one product */
  /* the innermost axis and the ones coalesced with it */
  int group = 1;
  int64_t shape0 = plan->extent[axes[perm[0]]], s0[CR_MAX_INPUTS + 1];
  for (int k = 0; k < nop; ++k) s0[k] = st[perm[0]][k];
  while (group < ndim) {
    const int a1 = perm[group];
    const int64_t shape1 = plan->extent[axes[a1]];
    int can = 1;
    for (int k = 0; k < nop && can; ++k) {
      const int64_t s1 = st[a1][k];
      can = (shape0 == 1 && s0[k] == 0) || (shape1 == 1 && s1 == 0) || s0[k] * shape0 == s1;
    }
    if (!can) break;
    for (int k = 0; k < nop; ++k) s0[k] = shape0 == 1 ? st[a1][k] : s0[k];
    shape0 *= shape1;
    ++group;
  }
  const int outstride0 = s0[num_in] == 0;
  for (int i = ndim - 1; i >= 0; --i) {
    const int label = axes[perm[i]];
    if (is_out[label]) continue;
    summed[(*num_summed)++] = label;
    if (outstride0 && i < group) ++*num_inner;
  }
}

static int einsum_run(const cr_params *params, const cr_tensor *in, int num_in,
                      const cr_tensor *out, int num_threads) {
  (void)num_threads;
  acc_shape shapes[CR_MAX_INPUTS];
  memset(shapes, 0, sizeof shapes);
  for (int k = 0; k < num_in && k < CR_MAX_INPUTS; ++k) shapes[k] = in[k].shape;
  einsum_plan plan;
  int status = einsum_plan_of(params, shapes, num_in, &plan);
  if (status != MX_ACC_OK) return status;
  int64_t strides[CR_MAX_INPUTS][kEinsumLabels], out_strides[kEinsumLabels] = {0};
  memset(strides, 0, sizeof strides);
  for (int k = 0; k < num_in; ++k) {
    int64_t own[CR_MAX_NDIM];
    cr_compact_strides(&shapes[k], own);
    for (int d = 0; d < shapes[k].ndim; ++d) {
      if (shapes[k].dims[d] != 1 || plan.extent[plan.in_labels[k][d]] == 1) {
        strides[k][plan.in_labels[k][d]] += own[d];
      }
    }
  }
  int64_t own_out[CR_MAX_NDIM];
  cr_compact_strides(&out->shape, own_out);
  for (int d = 0; d < plan.out_ndim; ++d) out_strides[plan.out_labels[d]] = own_out[d];
  int summed[kEinsumLabels], num_summed, num_inner;
  einsum_numpy_order(&plan, num_in, strides, out_strides, summed, &num_summed, &num_inner);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  /* numpy computes float16 products and inner sums in float32 */
  const cr_dtype work = dtype == CR_FLOAT16 ? CR_FLOAT32 : dtype;
  int64_t outer_n = 1, inner_n = 1;
  for (int j = 0; j < num_summed; ++j) {
    if (j < num_summed - num_inner) outer_n *= plan.extent[summed[j]];
    else inner_n *= plan.extent[summed[j]];
  }
  const int64_t out_count = count_of(&out->shape);
  int64_t idx[kEinsumLabels] = {0};
  for (int64_t o = 0; o < out_count; ++o) {
    int64_t rest = o;
    for (int j = plan.out_ndim - 1; j >= 0; --j) {
      idx[plan.out_labels[j]] = rest % plan.extent[plan.out_labels[j]];
      rest /= plan.extent[plan.out_labels[j]];
    }
    int64_t iacc = 0;
    double value = 0;     /* the output element, stored in dtype */
    double inner_acc = 0; /* an outstride0 inner loop's sum, in work */
    for (int64_t so = 0; so < outer_n * inner_n; ++so) {
      int64_t r = so;
      for (int j = num_summed - 1; j >= 0; --j) {
        idx[summed[j]] = r % plan.extent[summed[j]];
        r /= plan.extent[summed[j]];
      }
      int64_t iprod = 1;
      double prod = 1;
      for (int k = 0; k < num_in; ++k) {
        int64_t offset = 0;
        for (int label = 0; label < kEinsumLabels; ++label) {
          if (strides[k][label] != 0) offset += idx[label] * strides[k][label];
        }
        if (is_int(dtype)) iprod = wmul(iprod, cr_load_int(dtype, in[k].data, offset));
        else if (k == 0) prod = cr_load_double(dtype, in[k].data, offset);
        else prod = as_dtype(work, prod * cr_load_double(dtype, in[k].data, offset));
      }
      iacc = wadd(iacc, iprod);
      if (is_int(dtype)) continue;
      if (num_inner == 0) {
        value = as_dtype(dtype, as_dtype(work, value + prod));
      } else {
        if (so % inner_n == 0) inner_acc = 0;
        inner_acc = as_dtype(work, inner_acc + prod);
        if (so % inner_n == inner_n - 1) value = as_dtype(dtype, as_dtype(work, value + inner_acc));
      }
    }
    if (is_int(dtype)) cr_store_int(dtype, out->data, o, wrap_int(dtype, iacc));
    else cr_store_double(dtype, out->data, o, value);
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_einsum = {einsum_parse, num_args_inputs, cr_one_output,
                                        einsum_dtypes, einsum_infer, einsum_run};
