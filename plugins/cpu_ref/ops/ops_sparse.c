/*
 * Operators with a sparse input (mxnet_acc.h section 12, ABI 1.2): dot and
 * FullyConnected whose data (input 0) is a CSR matrix, Embedding whose
 * weight (input 1) is row-sparse, and take whose table (input 0) is
 * row-sparse. Their attributes, input counts and output shapes are the
 * dense operators' (the logical shapes of sparse inputs are the dense
 * arrays'), so each family forwards those to the dense family and has a
 * run function of its own; only float32 values are run.
 *
 * A sparse input reaches a run function as a cr_tensor whose data points
 * to the SparseTensor or RowSparseTensor itself, after cr_sparse_check()
 * accepted it: every index and length the kernels below use has been
 * checked against the tensor's logical shape, so they read nothing out of
 * bounds whatever the host passed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "op_impl.h"
#include "status.h"
#include "tensor.h"

const char *cr_stype_name(int32_t stype) {
  switch (stype) {
    case MX_ACC_STORAGE_DENSE: return "dense";
    case MX_ACC_STORAGE_CSR: return "csr";
    case MX_ACC_STORAGE_ROW_SPARSE: return "row_sparse";
    default: return "unknown";
  }
}

/* ---- checks of what the host passed --------------------------------------- */

static int check_csr(const SparseTensor *csr, const acc_shape *shape, const char *what) {
  if (shape->ndim != 2) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a CSR tensor has 2 dimensions, not %d", what,
                    shape->ndim);
  }
  const uint64_t rows = shape->dims[0], cols = shape->dims[1];
  if (csr->num_rows != rows) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: num_rows %llu, the shape has %llu rows", what,
                    (unsigned long long)csr->num_rows, (unsigned long long)rows);
  }
  if (csr->indptr == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: indptr is NULL", what);
  uint64_t elements;
  if (cr_checked_mul(rows, cols, what, &elements) != MX_ACC_OK) return MX_ACC_ERR_INVALID_ARG;
  if (csr->num_nonzero > elements) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %llu nonzeros in a %llu x %llu matrix", what,
                    (unsigned long long)csr->num_nonzero, (unsigned long long)rows,
                    (unsigned long long)cols);
  }
  if (csr->num_nonzero > 0 && (csr->data == NULL || csr->indices == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: data or indices is NULL", what);
  }
  if (csr->indptr[0] != 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: indptr[0] is %llu, not 0", what,
                    (unsigned long long)csr->indptr[0]);
  }
  for (uint64_t r = 0; r < rows; ++r) {
    if (csr->indptr[r + 1] < csr->indptr[r] || csr->indptr[r + 1] > csr->num_nonzero) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: indptr[%llu] = %llu after %llu is not "
                      "monotone within [0, %llu]", what, (unsigned long long)(r + 1),
                      (unsigned long long)csr->indptr[r + 1], (unsigned long long)csr->indptr[r],
                      (unsigned long long)csr->num_nonzero);
    }
  }
  if (csr->indptr[rows] != csr->num_nonzero) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: indptr ends at %llu, num_nonzero is %llu", what,
                    (unsigned long long)csr->indptr[rows], (unsigned long long)csr->num_nonzero);
  }
  for (uint64_t j = 0; j < csr->num_nonzero; ++j) {
    if (csr->indices[j] >= cols) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: column index %llu at %llu is not below the "
                      "%llu columns", what, (unsigned long long)csr->indices[j],
                      (unsigned long long)j, (unsigned long long)cols);
    }
  }
  return MX_ACC_OK;
}

static int check_row_sparse(const RowSparseTensor *rsp, const acc_shape *shape,
                            const char *what) {
  if (shape->ndim < 1) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a row-sparse tensor has a dimension", what);
  }
  const uint64_t rows = shape->dims[0];
  if (rsp->num_rows_stored > rows) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %llu stored rows of %llu", what,
                    (unsigned long long)rsp->num_rows_stored, (unsigned long long)rows);
  }
  if (rsp->num_rows_stored > 0 && (rsp->row_ids == NULL ||
                                   (rsp->data == NULL && cr_product(shape, 1, shape->ndim) > 0))) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: data or row_ids is NULL", what);
  }
  for (uint64_t j = 0; j < rsp->num_rows_stored; ++j) {
    if (rsp->row_ids[j] >= rows || (j > 0 && rsp->row_ids[j] <= rsp->row_ids[j - 1])) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: row id %llu at %llu is not below %llu and "
                      "above the one before", what, (unsigned long long)rsp->row_ids[j],
                      (unsigned long long)j, (unsigned long long)rows);
    }
  }
  return MX_ACC_OK;
}

int cr_sparse_check(const MXTensor *tensor, int32_t stype, const acc_shape *shape,
                    int32_t dtype, const char *what) {
  acc_shape actual;
  int status = acc_tensor_shape(tensor, what, &actual);
  if (status != MX_ACC_OK) return status;
  if (tensor->isSparse != stype) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: storage %s, the graph says %s", what,
                    cr_stype_name(tensor->isSparse), cr_stype_name(stype));
  }
  if (tensor->dtype != dtype || !acc_shape_equal(&actual, shape)) {
    char got[256], want[256];
    acc_shape_format(&actual, got, sizeof got);
    acc_shape_format(shape, want, sizeof want);
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %s %s, expected %s %s", what,
                    acc_dtype_name(tensor->dtype), got, acc_dtype_name(dtype), want);
  }
  if (tensor->dev_id != MX_ACC_HOST_DEVICE) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a sparse tensor is host memory, got device %d",
                    what, (int)tensor->dev_id);
  }
  size_t count;
  status = acc_shape_count(shape, acc_dtype_size(dtype), what, &count);
  if (status != MX_ACC_OK) return status;
  if (tensor->data == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: data is NULL", what);
#ifdef CR_SPARSE_TRUST_CALLER
  /* Test builds only (tests/conformance/test_conformance_sparse.py): a
   * plugin that trusts its caller's indices, which the conformance kit's
   * sparse.malformed check must catch. */
  if (stype == MX_ACC_STORAGE_CSR || stype == MX_ACC_STORAGE_ROW_SPARSE) return MX_ACC_OK;
#endif
  if (stype == MX_ACC_STORAGE_CSR) return check_csr(tensor->data, shape, what);
  if (stype == MX_ACC_STORAGE_ROW_SPARSE) return check_row_sparse(tensor->data, shape, what);
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: storage kind %d is unknown", what, (int)stype);
}

/* ---- families ---------------------------------------------------------------- */

static int all_float32(const cr_params *params, const char *family) {
  for (int i = 0; i < params->num_inputs; ++i) {
    if (params->in_dtypes[i] != kFloat32 && !(strcmp(family, "embedding") == 0 && i == 0) &&
        !(strcmp(family, "take") == 0 && i == 1)) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "input %d has dtype %s; sparse %s runs float32 "
                      "only", i, acc_dtype_name(params->in_dtypes[i]), family);
    }
  }
  if (params->out_dtypes[0] != kFloat32) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "output has dtype %s; sparse %s runs float32 only",
                    acc_dtype_name(params->out_dtypes[0]), family);
  }
  return MX_ACC_OK;
}

/* dot(csr, dense): out (M, N) = A (M, K) x B, B being (K, N), or (N, K)
 * with transpose_b. */
static int sparse_dot_parse(const char *const *keys, const char *const *vals, size_t count,
                            cr_params *params) {
  int status = cr_impl_dot.parse(keys, vals, count, params);
  if (status == MX_ACC_OK && params->u.dot.transpose_a) {
    status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "transpose_a=True with a csr lhs is not run");
  }
  return status;
}

static int sparse_dot_dtypes(const cr_params *params) {
  int status = cr_impl_dot.check_dtypes(params);
  return status == MX_ACC_OK ? all_float32(params, "dot") : status;
}

static int sparse_dot_infer(const cr_params *params, const acc_shape *in, int num_in,
                            acc_shape *out) {
  if (in[1].ndim != 2) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "rhs has %d dimensions; dot(csr, dense) runs a 2-D "
                    "rhs", in[1].ndim);
  }
  return cr_impl_dot.infer_shape(params, in, num_in, out);
}

/* row[0 .. n) += v * from[0 .. n); the output never overlaps B (the
 * executor and the model check that outputs overlap no input). */
static void add_scaled(float *restrict row, const float *restrict from, float v, int64_t n) {
  for (int64_t q = 0; q < n; ++q) row[q] += v * from[q];
}

/* y (rows, n) = A (rows, k, CSR) x B, where B is given as b_rows (k, n),
 * row-major, when b_by_rows, else as its transpose (n, k). Row by row, each
 * nonzero adds its value times a row of B to the output row (contiguous)
 * when B is given by rows. Given transposed, B is transposed first into
 * scratch when there are at least k nonzeros (the transposition then costs
 * no more than the gathers it saves, which read B with a stride of k);
 * with fewer, each output element gathers its row's nonzeros from B's row.
 * Returns MX_ACC_ERR_OUT_OF_MEMORY when the scratch cannot be had. */
static int csr_times(const SparseTensor *a, int64_t rows, int64_t k, int64_t n, const float *b,
                     int b_by_rows, const float *bias, float *y) {
  const float *values = a->data;
  float *scratch = NULL;
  if (!b_by_rows && a->num_nonzero >= (uint64_t)k && k > 0 && n > 0) {
    scratch = malloc((size_t)(k * n) * sizeof *scratch);
    if (scratch == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "csr x dense: scratch");
    enum { kBlock = 32 }; /* a tile of B and of its transpose stay in cache */
    for (int64_t q0 = 0; q0 < n; q0 += kBlock) {
      for (int64_t c0 = 0; c0 < k; c0 += kBlock) {
        const int64_t q1 = q0 + kBlock < n ? q0 + kBlock : n;
        const int64_t c1 = c0 + kBlock < k ? c0 + kBlock : k;
        for (int64_t q = q0; q < q1; ++q) {
          for (int64_t c = c0; c < c1; ++c) scratch[c * n + q] = b[q * k + c];
        }
      }
    }
    b = scratch;
    b_by_rows = 1;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t begin = a->indptr[r], end = a->indptr[r + 1];
    float *row = y + r * n;
    if (b_by_rows) {
      for (int64_t q = 0; q < n; ++q) row[q] = bias != NULL ? bias[q] : 0.0f;
      for (uint64_t j = begin; j < end; ++j) {
        add_scaled(row, b + (int64_t)a->indices[j] * n, values[j], n);
      }
    } else {
      for (int64_t q = 0; q < n; ++q) {
        const float *weights = b + q * k;
        float sum = 0.0f;
        for (uint64_t j = begin; j < end; ++j) sum += values[j] * weights[a->indices[j]];
        row[q] = sum + (bias != NULL ? bias[q] : 0.0f);
      }
    }
  }
  free(scratch);
  return MX_ACC_OK;
}

static int sparse_dot_run(const cr_params *params, const cr_tensor *in, int num_in,
                          const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  return csr_times(in[0].data, (int64_t)in[0].shape.dims[0], (int64_t)in[0].shape.dims[1],
                   (int64_t)out->shape.dims[1], in[1].data, !params->u.dot.transpose_b, NULL,
                   out->data);
}

/* FullyConnected(csr data (M, K), weight (N, K), bias (N)): out (M, N). */
static int sparse_fc_dtypes(const cr_params *params) {
  int status = cr_impl_fully_connected.check_dtypes(params);
  return status == MX_ACC_OK ? all_float32(params, "FullyConnected") : status;
}

static int sparse_fc_run(const cr_params *params, const cr_tensor *in, int num_in,
                         const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const float *bias = params->u.fully_connected.no_bias ? NULL : (const float *)in[2].data;
  return csr_times(in[0].data, (int64_t)in[0].shape.dims[0], (int64_t)in[0].shape.dims[1],
                   params->u.fully_connected.num_hidden, in[1].data, 0, bias, out->data);
}

static int sparse_fc_infer(const cr_params *params, const acc_shape *in, int num_in,
                           acc_shape *out) {
  if (in[0].ndim != 2) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "csr data has %d dimensions", in[0].ndim);
  }
  return cr_impl_fully_connected.infer_shape(params, in, num_in, out);
}

/* The stored row of a row-sparse tensor holding dense row `row`, or -1. */
static int64_t stored_row(const RowSparseTensor *rsp, uint64_t row) {
  uint64_t low = 0, high = rsp->num_rows_stored;
  while (low < high) {
    const uint64_t mid = low + (high - low) / 2;
    if (rsp->row_ids[mid] < row) low = mid + 1;
    else high = mid;
  }
  return low < rsp->num_rows_stored && rsp->row_ids[low] == row ? (int64_t)low : -1;
}

/* out[i, :] = dense row `row` of rsp (zeros when it is not stored). */
static void copy_row(const RowSparseTensor *rsp, uint64_t row, int64_t width, float *to) {
  const int64_t stored = stored_row(rsp, row);
  if (stored < 0) {
    memset(to, 0, (size_t)width * sizeof *to);
  } else {
    memcpy(to, (const float *)rsp->data + stored * width, (size_t)width * sizeof *to);
  }
}

/* Embedding(data, row-sparse weight): the rows of MXNet's Embedding, ids
 * truncated toward zero and clipped to [0, input_dim - 1]. */
static int sparse_embedding_dtypes(const cr_params *params) {
  int status = cr_impl_embedding.check_dtypes(params);
  return status == MX_ACC_OK ? all_float32(params, "embedding") : status;
}

static int64_t embedding_row(cr_dtype dtype, const void *ids, int64_t i, int64_t rows) {
  if (cr_dtype_is_integer(dtype)) {
    const int64_t value = cr_load_int(dtype, ids, i);
    return value < 0 ? 0 : value >= rows ? rows - 1 : value;
  }
  const double value = trunc(cr_load_double(dtype, ids, i));
  if (!(value > 0.0)) return 0; /* negative, zero or NaN */
  if (value >= (double)(rows - 1)) return rows - 1;
  return (int64_t)value;
}

static int sparse_embedding_run(const cr_params *params, const cr_tensor *in, int num_in,
                                const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const RowSparseTensor *weight = in[1].data;
  const int64_t width = params->u.embedding.output_dim;
  const int64_t rows = params->u.embedding.input_dim;
  const int64_t count = cr_element_count(&in[0].shape);
  float *y = out->data;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = embedding_row(cr_in_dtype(params, 0), in[0].data, i, rows);
    copy_row(weight, (uint64_t)row, width, y + i * width);
  }
  return MX_ACC_OK;
}

/* take(row-sparse a, indices) along axis 0. */
static int sparse_take_dtypes(const cr_params *params) {
  int status = cr_impl_take.check_dtypes(params);
  return status == MX_ACC_OK ? all_float32(params, "take") : status;
}

static int sparse_take_infer(const cr_params *params, const acc_shape *in, int num_in,
                             acc_shape *out) {
  int axis = 0;
  int status = cr_resolve_axis(params->u.take.axis, in[0].ndim, &axis);
  if (status == MX_ACC_OK && axis != 0) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "take from a row-sparse array runs axis 0 only");
  }
  return status == MX_ACC_OK ? cr_impl_take.infer_shape(params, in, num_in, out) : status;
}

static int sparse_take_run(const cr_params *params, const cr_tensor *in, int num_in,
                           const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const RowSparseTensor *table = in[0].data;
  const int64_t size = (int64_t)in[0].shape.dims[0];
  const int64_t width = cr_product(&in[0].shape, 1, in[0].shape.ndim);
  const int64_t count = cr_element_count(&in[1].shape);
  float *y = out->data;
  for (int64_t j = 0; j < count; ++j) {
    int64_t index = cr_load_as_int64(cr_in_dtype(params, 1), in[1].data, j);
    switch (params->u.take.mode) {
      case CR_TAKE_CLIP:
        index = index < 0 ? 0 : index >= size ? size - 1 : index;
        break;
      case CR_TAKE_WRAP:
        index %= size;
        if (index < 0) index += size;
        break;
      default:
        if (index < -size || index >= size) {
          memset(y, 0, (size_t)(count * width) * sizeof *y);
          return acc_fail(MX_ACC_ERR_INVALID_ARG, "take: index %lld is out of range [-%lld, "
                          "%lld) with mode \"raise\"", (long long)index, (long long)size,
                          (long long)size);
        }
        if (index < 0) index += size;
    }
    copy_row(table, (uint64_t)index, width, y + j * width);
  }
  return MX_ACC_OK;
}

/* The dense families' own parse, counts and shapes, through wrappers (a
 * const struct's members are no constant expressions). */
static int fc_parse(const char *const *keys, const char *const *vals, size_t count,
                    cr_params *params) {
  return cr_impl_fully_connected.parse(keys, vals, count, params);
}
static int fc_num_inputs(const cr_params *params) {
  return cr_impl_fully_connected.num_inputs(params);
}
static int embedding_parse(const char *const *keys, const char *const *vals, size_t count,
                           cr_params *params) {
  return cr_impl_embedding.parse(keys, vals, count, params);
}
static int embedding_infer(const cr_params *params, const acc_shape *in, int num_in,
                           acc_shape *out) {
  return cr_impl_embedding.infer_shape(params, in, num_in, out);
}
static int take_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  return cr_impl_take.parse(keys, vals, count, params);
}

static const cr_op_impl kSparseDot = {
    .parse = sparse_dot_parse, .num_inputs = cr_two_inputs, .num_outputs = cr_one_output,
    .check_dtypes = sparse_dot_dtypes, .infer_shape = sparse_dot_infer, .run = sparse_dot_run};
static const cr_op_impl kSparseFc = {
    .parse = fc_parse, .num_inputs = fc_num_inputs, .num_outputs = cr_one_output,
    .check_dtypes = sparse_fc_dtypes, .infer_shape = sparse_fc_infer, .run = sparse_fc_run};
static const cr_op_impl kSparseEmbedding = {
    .parse = embedding_parse, .num_inputs = cr_two_inputs, .num_outputs = cr_one_output,
    .check_dtypes = sparse_embedding_dtypes, .infer_shape = embedding_infer,
    .run = sparse_embedding_run};
static const cr_op_impl kSparseTake = {
    .parse = take_parse, .num_inputs = cr_two_inputs, .num_outputs = cr_one_output,
    .check_dtypes = sparse_take_dtypes, .infer_shape = sparse_take_infer,
    .run = sparse_take_run};

/* The dense operator each runs, its sparse input and that input's storage.
 * Their names differ from the dense operators' so that the model's fusion
 * and image-splitting passes, which match names, leave them alone. */
typedef struct sparse_entry {
  const char *dense_name;
  int input;
  int32_t stype;
  cr_op op;
} sparse_entry;

static const sparse_entry kSparseOps[] = {
    {"dot", 0, MX_ACC_STORAGE_CSR, {"dot(csr)", {NULL}, 1, 0, &kSparseDot}},
    {"FullyConnected", 0, MX_ACC_STORAGE_CSR,
     {"FullyConnected(csr)", {NULL}, 1, 0, &kSparseFc}},
    {"Embedding", 1, MX_ACC_STORAGE_ROW_SPARSE,
     {"Embedding(row_sparse)", {NULL}, 1, 0, &kSparseEmbedding}},
    {"take", 0, MX_ACC_STORAGE_ROW_SPARSE, {"take(row_sparse)", {NULL}, 1, 0, &kSparseTake}},
};

int cr_find_sparse_op(const char *what, const cr_op *dense, const int32_t *in_stypes,
                      int num_inputs, const cr_op **op) {
  int first = -1;
  for (int i = 0; i < num_inputs; ++i) {
    if (in_stypes[i] != MX_ACC_STORAGE_DENSE) {
      if (first < 0) first = i;
      if (in_stypes[i] != MX_ACC_STORAGE_CSR && in_stypes[i] != MX_ACC_STORAGE_ROW_SPARSE) {
        return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: input %d has the unknown storage %d", what,
                        i, (int)in_stypes[i]);
      }
    }
  }
  for (size_t e = 0; e < sizeof kSparseOps / sizeof kSparseOps[0]; ++e) {
    const sparse_entry *entry = &kSparseOps[e];
    if (strcmp(entry->dense_name, dense->name) != 0 || entry->input >= num_inputs) continue;
    int match = in_stypes[entry->input] == entry->stype;
    for (int i = 0; i < num_inputs && match; ++i) {
      if (i != entry->input && in_stypes[i] != MX_ACC_STORAGE_DENSE) match = 0;
    }
    if (match) {
      *op = &entry->op;
      return MX_ACC_OK;
    }
  }
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: input %d is %s; cpu_ref runs %s on these storage "
                  "kinds only: dense%s", what, first, cr_stype_name(in_stypes[first]),
                  dense->name,
                  strcmp(dense->name, "dot") == 0 || strcmp(dense->name, "FullyConnected") == 0
                      ? ", csr input 0"
                  : strcmp(dense->name, "Embedding") == 0 ? ", row_sparse input 1"
                  : strcmp(dense->name, "take") == 0      ? ", row_sparse input 0"
                                                          : "");
}
