/*
 * The ONNX importer's host operators (_onnx_*, acc_host/ops/onnx_ops.py) in
 * cpu_ref, with the semantics of their numpy definitions: this file parses
 * their attributes from a per-operator table and holds the helpers they
 * share (declared in ops_onnx_impl.h); the operators are in
 * ops_onnx_elementwise.c (unary, binary, n-ary, where, clip, cast),
 * ops_onnx_movement.c (shapes, reshaping copies, transpose, expand, slice,
 * tile, pad, split, concat, depth_to_space ... one_hot), ops_onnx_gather.c
 * (gathers and scatters with index tensors), ops_onnx_reduce.c (reductions,
 * arg, cumsum/cumprod, topk), ops_onnx_linalg.c (matmul, gemm, det, einsum)
 * and ops_onnx_nn.c (softmax, normalisations, losses, pooling, resizing);
 * ops.c lists them in its table.
 *
 * Values are computed the way numpy computes them where the result depends
 * on it: integers in exact (wrapping) integer arithmetic, conversions from
 * float to integer as numpy's astype (cr_store_double), floats in double
 * and rounded once to the output dtype (numpy may round float16 and
 * float32 intermediates; the results agree within one rounding of the
 * output dtype).
 *
 * Integer inputs are declined (MX_ACC_ERR_UNSUPPORTED, so the host runs them
 * on its CPU path) where numpy would compute through float16 or another
 * intermediate dtype whose rounding decides the integer result: the
 * transcendental element-wise functions, softmax and the normalisations
 * (decline_int).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "ops_onnx_impl.h"
#include "status.h"
#include "tensor.h"

/* ======================================================================= */
/* Attribute parsing from a per-operator table                              */
/* ======================================================================= */

/* Splits "(a, b, c)" / "[a, b]" / "a" into at most capacity trimmed entries
 * in buffer; returns the count or -1. */
static int split_tuple(const char *value, char *buffer, size_t size, char **entries,
                       int capacity) {
  const int length = snprintf(buffer, size, "%s", value);
  if (length < 0 || (size_t)length >= size) return -1;
  char *begin = buffer, *end = buffer + length;
  while (begin < end && (*begin == ' ' || *begin == '\t')) ++begin;
  while (end > begin && (end[-1] == ' ' || end[-1] == '\t')) --end;
  if (end > begin && ((*begin == '(' && end[-1] == ')') || (*begin == '[' && end[-1] == ']'))) {
    ++begin;
    --end;
  }
  *end = '\0';
  int count = 0;
  char *entry = begin;
  while (1) {
    char *comma = strchr(entry, ',');
    if (comma != NULL) *comma = '\0';
    int blank = 1;
    for (const char *c = entry; *c != '\0'; ++c) blank = blank && (*c == ' ' || *c == '\t');
    if (blank) {
      if (comma != NULL || (count == 0 && entry != begin)) return -1;
      break;
    }
    if (count == capacity) return -1;
    entries[count++] = entry;
    if (comma == NULL) break;
    entry = comma + 1;
  }
  return count;
}

static int parse_float_tuple(const char *key, const char *value, double *out, int *count) {
  char buffer[1024];
  char *entries[CR_ONNX_TUPLE_MAX];
  int n = split_tuple(value, buffer, sizeof buffer, entries, CR_ONNX_TUPLE_MAX);
  if (n < 0) return cr_bad_attr(key, value, "a tuple of at most 32 numbers");
  for (int i = 0; i < n; ++i) {
    if (acc_attr_float(entries[i], &out[i]) != 0) return cr_bad_attr(key, value, "numbers");
  }
  *count = n;
  return MX_ACC_OK;
}

static int parse_int_tuple(const char *key, const char *value, int64_t *out, int *count) {
  if (acc_attr_int_tuple(value, out, CR_ONNX_TUPLE_MAX, count) != 0) {
    return cr_bad_attr(key, value, "a tuple of at most 32 integers");
  }
  return MX_ACC_OK;
}

/* The ONNX dtype names the registry knows; those without a TensorDType are
 * unsupported. */
static int parse_onnx_dtype(const char *key, const char *value, int none_ok, int *dtype) {
  static const char *const kNoAbi[] = {"bool", "int16", "uint16", "uint32", "uint64"};
  for (size_t i = 0; i < sizeof kNoAbi / sizeof kNoAbi[0]; ++i) {
    if (acc_attr_equals(value, kNoAbi[i])) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "attribute %s=\"%s\": mxnet_acc.h has no such "
                      "dtype", key, value);
    }
  }
  return cr_parse_dtype(key, value, none_ok, dtype);
}

int parse_with(const attr_spec *specs, const char *const *keys, const char *const *vals,
               size_t count, onnx_p *p) {
  for (size_t i = 0; i < count; ++i) {
    const attr_spec *spec = NULL;
    for (const attr_spec *s = specs; s != NULL && s->key != NULL; ++s) {
      if (strcmp(s->key, keys[i]) == 0) spec = s;
    }
    if (spec == NULL) return cr_unknown_attr(keys[i]);
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK, slot = spec->slot;
    switch (spec->kind) {
      case A_INT:
        status = cr_parse_int(key, value, &p->i[slot]);
        break;
      case A_AXIS:
        status = cr_parse_axis(key, value, slot == 0 ? &p->axis : &p->axis2);
        break;
      case A_BOOL:
        status = cr_parse_bool(key, value, &p->flag[slot]);
        break;
      case A_FLOAT:
        status = cr_parse_float(key, value, &p->f[slot]);
        break;
      case A_OPT_FLOAT:
        p->has_f[slot] = !acc_attr_is_none(value);
        if (p->has_f[slot]) status = cr_parse_float(key, value, &p->f[slot]);
        break;
      case A_OPT_TUPLE:
        p->tup_given[slot] = !acc_attr_is_none(value);
        p->tup_len[slot] = 0;
        if (p->tup_given[slot]) status = parse_int_tuple(key, value, p->tup[slot], &p->tup_len[slot]);
        break;
      case A_TUPLE:
        p->tup_given[slot] = 1;
        status = parse_int_tuple(key, value, p->tup[slot], &p->tup_len[slot]);
        break;
      case A_FTUPLE:
        status = parse_float_tuple(key, value, p->ftup[slot], &p->ftup_len[slot]);
        break;
      case A_CHOICE: {
        int found = -1;
        for (int c = 0; spec->choices[c] != NULL; ++c) {
          if (acc_attr_equals(value, spec->choices[c])) found = c;
        }
        if (found < 0) {
          status = cr_bad_attr(key, value, "one of the operator's choices");
        } else if (slot == 0) {
          p->fn = found;
        } else {
          p->i[slot - 1] = found;
        }
        break;
      }
      case A_DTYPE:
        status = parse_onnx_dtype(key, value, slot, &p->dtype);
        break;
      case A_COUNT:
        status = cr_parse_count(key, value, CR_MAX_INPUTS, &p->num_args);
        break;
      case A_TEXT: {
        const int n = snprintf(p->text, sizeof p->text, "%s", value);
        if (n < 0 || (size_t)n >= sizeof p->text) {
          status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "attribute %s is too long", key);
        }
        break;
      }
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* Attribute tables several operators share. */
const attr_spec kAxisSpec[] = {{"axis", A_INT, 0, NULL}, {NULL, A_INT, 0, NULL}};
const attr_spec kAxesSpec[] = {{"axes", A_TUPLE, 0, NULL}, {NULL, A_INT, 0, NULL}};

/* ======================================================================= */
/* Shared helpers                                                           */
/* ======================================================================= */

int out_of_memory(const char *what) {
  return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "cannot allocate scratch memory for %s", what);
}

/* A compact shape's row-major strides, 0 along its broadcast axes, right
 * aligned in ndim axes of the output (numpy broadcasting). */
void bstrides(const acc_shape *x, int ndim, int64_t strides[CR_MAX_NDIM]) {
  int64_t own[CR_MAX_NDIM];
  cr_compact_strides(x, own);
  for (int d = 0; d < ndim; ++d) {
    const int dx = d - (ndim - x->ndim);
    strides[d] = dx >= 0 && x->dims[dx] != 1 ? own[dx] : 0;
  }
}

/* numpy's broadcast of n shapes into *out. */
int broadcast_shapes(const acc_shape *in, int n, acc_shape *out) {
  int ndim = 0;
  for (int k = 0; k < n; ++k) ndim = in[k].ndim > ndim ? in[k].ndim : ndim;
  out->ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    uint64_t extent = 1;
    for (int k = 0; k < n; ++k) {
      const int dk = d - (ndim - in[k].ndim);
      const uint64_t e = dk >= 0 ? in[k].dims[dk] : 1;
      if (e == 1) continue;
      if (extent != 1 && extent != e) {
        return cr_shape_error("input shape %s cannot be broadcast with the others", &in[k]);
      }
      extent = e;
    }
    out->dims[d] = extent;
  }
  return MX_ACC_OK;
}

/* The offset in x, broadcast to out, of out's element index: for walks over
 * up to CR_MAX_INPUTS operands, which recompute offsets per element. */
int64_t offset_in(const acc_shape *x, const acc_shape *out, int64_t index) {
  int64_t offset = 0, stride = 1;
  for (int d = out->ndim - 1; d >= 0; --d) {
    const int64_t extent = (int64_t)out->dims[d];
    const int64_t o = index % extent;
    index /= extent;
    const int dx = d - (out->ndim - x->ndim);
    if (dx >= 0) {
      if (x->dims[dx] != 1) offset += o * stride;
      stride *= (int64_t)x->dims[dx];
    }
  }
  return offset;
}

int same_dtypes(const cr_params *params, int first_in, int last_in) {
  int status = MX_ACC_OK;
  for (int i = first_in; i <= last_in && status == MX_ACC_OK; ++i) {
    status = cr_dtype_expect("input", i, params->in_dtypes[i], params->in_dtypes[first_in]);
  }
  return status;
}

int out_dtype_is(const cr_params *params, int k, int32_t dtype) {
  return cr_dtype_expect("output", k, params->out_dtypes[k], dtype);
}

int decline_int(const cr_params *params, int index, const char *what) {
  if (!is_int(params->in_dtypes[index])) return MX_ACC_OK;
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "input %d has dtype %s; %s runs only float32, "
                  "float64 and float16 (numpy computes integers through an intermediate "
                  "float dtype)", index, acc_dtype_name(params->in_dtypes[index]), what);
}

int num_args_inputs(const cr_params *params) { return P(params)->num_args; }

int int64_out(const cr_params *params) { return out_dtype_is(params, 0, CR_INT64); }

int index_error(const char *what) {
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: an index is out of range", what);
}

/* ---- lines along an axis ---------------------------------------------------- */

line_view lines_along(const acc_shape *x, int axis) {
  line_view v = {cr_product(x, 0, axis), (int64_t)x->dims[axis], cr_product(x, axis + 1, x->ndim)};
  return v;
}

double *load_all(cr_dtype dtype, const void *data, int64_t count) {
  double *values = malloc((size_t)(count > 0 ? count : 1) * sizeof(double));
  if (values == NULL) return NULL;
  for (int64_t i = 0; i < count; ++i) values[i] = cr_load_double(dtype, data, i);
  return values;
}

/* ---- slices and gathers by per-axis tables ------------------------------------ */

/* Python's slice(start, stop, step).indices(n) and the slice's length. */
void py_slice(int64_t start, int64_t stop, int64_t step, int64_t n, int64_t *first,
              int64_t *length) {
  const int64_t big = (int64_t)1 << 62;
  start = start > big ? big : start < -big ? -big : start;
  stop = stop > big ? big : stop < -big ? -big : stop;
  if (step > 0) {
    if (start < 0) start = start + n < 0 ? 0 : start + n;
    else if (start > n) start = n;
    if (stop < 0) stop = stop + n < 0 ? 0 : stop + n;
    else if (stop > n) stop = n;
    *length = stop > start ? (stop - start + step - 1) / step : 0;
  } else {
    if (start < 0) start = start + n < 0 ? -1 : start + n;
    else if (start > n - 1) start = n - 1;
    if (stop < 0) stop = stop + n < 0 ? -1 : stop + n;
    else if (stop > n - 1) stop = n - 1;
    *length = start > stop ? (start - stop + (-step) - 1) / (-step) : 0;
  }
  *first = start;
}

/* y[o] = x[sum_d tables[d][o_d] * x_strides[d]] over the ndim extents
 * dims, or the element at fill where an entry is -1. ndim 0 copies one
 * element. */
static void gather_tables(int ndim, const int64_t *dims, int64_t *const *tables,
                          const int64_t *x_strides, size_t elem, const void *x,
                          const void *fill, void *y) {
  int64_t count = 1;
  for (int d = 0; d < ndim; ++d) count *= dims[d];
  if (count == 0) return;
  int64_t idx[CR_MAX_NDIM] = {0};
  const unsigned char *src = x;
  unsigned char *dst = y;
  for (int64_t i = 0; i < count; ++i) {
    int64_t offset = 0;
    int filled = 0;
    for (int d = 0; d < ndim; ++d) {
      const int64_t t = tables[d][idx[d]];
      if (t < 0) filled = 1;
      else offset += t * x_strides[d];
    }
    memcpy(dst + (size_t)i * elem, filled ? fill : src + (size_t)offset * elem, elem);
    for (int d = ndim - 1; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
}

/* Allocates one table per output axis (extent entries each). */
static int64_t **alloc_tables(const acc_shape *out) {
  size_t total = 0;
  for (int d = 0; d < out->ndim; ++d) total += (size_t)out->dims[d];
  int64_t **tables = malloc(sizeof(int64_t *) * CR_MAX_NDIM + (total + 1) * sizeof(int64_t));
  if (tables == NULL) return NULL;
  int64_t *at = (int64_t *)(tables + CR_MAX_NDIM);
  for (int d = 0; d < out->ndim; ++d) {
    tables[d] = at;
    at += out->dims[d];
  }
  return tables;
}

/* Runs a table gather whose tables fill_tables writes for the output. */
int table_run(const cr_params *params, const cr_tensor *in, const cr_tensor *out,
              table_fn fill_tables, const void *fill) {
  int64_t **tables = alloc_tables(&out->shape);
  if (tables == NULL) return out_of_memory("index tables");
  int64_t strides[CR_MAX_NDIM];
  fill_tables(params, &in[0].shape, &out->shape, tables, strides);
  int64_t dims[CR_MAX_NDIM];
  for (int d = 0; d < out->shape.ndim; ++d) dims[d] = (int64_t)out->shape.dims[d];
  gather_tables(out->shape.ndim, dims, tables, strides, cr_in_size(params, 0), in[0].data, fill,
                out->data);
  free(tables);
  return MX_ACC_OK;
}
