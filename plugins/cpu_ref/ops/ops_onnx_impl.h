/*
 * What the files of the ONNX importer's host operators (ops_onnx*.c) share,
 * internal to them: their attribute record (P, cr_onnx_params of ops.h), the
 * per-operator attribute tables that parse_with reads, small inline helpers
 * and the helpers defined in ops_onnx.c. The operators themselves are
 * declared in op_impl.h (cr_impl_onnx_*).
 */
#ifndef CPU_REF_OPS_ONNX_IMPL_H_
#define CPU_REF_OPS_ONNX_IMPL_H_

#include <stddef.h>
#include <stdint.h>

#include "op_impl.h"

typedef cr_onnx_params onnx_p;

#define P(params) (&(params)->u.onnx)

/* ---- attribute parsing from a per-operator table ------------------------------ */

typedef enum attr_kind {
  A_INT,       /* i[slot] */
  A_AXIS,      /* axis (slot 0) or axis2 (slot 1) */
  A_BOOL,      /* flag[slot] */
  A_FLOAT,     /* f[slot] */
  A_OPT_FLOAT, /* f[slot], has_f[slot] (None: 0) */
  A_TUPLE,     /* tup[slot] */
  A_OPT_TUPLE, /* tup[slot], tup_given[slot] (None: 0) */
  A_FTUPLE,    /* ftup[slot] */
  A_CHOICE,    /* fn (slot 0) or i[slot - 1]: the index of the value in choices */
  A_DTYPE,     /* dtype, "None" allowed when slot is 1 */
  A_COUNT,     /* num_args */
  A_TEXT       /* text */
} attr_kind;

typedef struct attr_spec {
  const char *key;
  attr_kind kind;
  int slot;
  const char *const *choices; /* NULL-ended, for A_CHOICE */
} attr_spec;

/* Parses the count attributes keys[i]=vals[i] into p as specs (ended by a
 * NULL key) says; a key that specs lacks is unsupported. */
int parse_with(const attr_spec *specs, const char *const *keys, const char *const *vals,
               size_t count, onnx_p *p);

/* Tables several operators share: an integer axis (i[0]), an axes tuple
 * (tup[0]). */
extern const attr_spec kAxisSpec[];
extern const attr_spec kAxesSpec[];

/* ---- dtypes and integer arithmetic --------------------------------------------- */

static inline int is_int(int32_t dtype) { return cr_dtype_is_integer((cr_dtype)dtype); }

static inline int64_t count_of(const acc_shape *s) { return cr_element_count(s); }

/* value wrapped to the width (and signedness) of integer dtype. */
static inline int64_t wrap_int(cr_dtype dtype, int64_t value) {
  switch (dtype) {
    case CR_UINT8:
      return (int64_t)(uint8_t)(uint64_t)value;
    case CR_INT8:
      return (int64_t)(int8_t)(uint8_t)(uint64_t)value;
    case CR_INT32:
      return (int64_t)(int32_t)(uint32_t)(uint64_t)value;
    default:
      return value;
  }
}

static inline int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* A double value as stored in dtype and read back: the rounding (or
 * conversion) numpy applies when it stores an intermediate of that dtype. */
static inline double as_dtype(cr_dtype dtype, double value) {
  unsigned char element[8];
  cr_store_double(dtype, element, 0, value);
  return cr_load_double(dtype, element, 0);
}

/* Python's a % b for b > 0. */
static inline int64_t py_mod_int(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}

/* numpy's normalisation of an axis that may be negative: [-ndim, ndim). */
static inline int np_axis(int64_t axis, int ndim, int *out) {
  return cr_resolve_axis(axis, ndim, out);
}

/* ---- shared helpers (ops_onnx.c) ------------------------------------------------- */

/* MX_ACC_ERR_OUT_OF_MEMORY for the scratch memory of what. */
int out_of_memory(const char *what);

/* x's compact strides right aligned in ndim axes, 0 along broadcast axes. */
void bstrides(const acc_shape *x, int ndim, int64_t strides[CR_MAX_NDIM]);

/* numpy's broadcast of n shapes into *out. */
int broadcast_shapes(const acc_shape *in, int n, acc_shape *out);

/* The offset in x (broadcast to out) of out's element index. */
int64_t offset_in(const acc_shape *x, const acc_shape *out, int64_t index);

/* Inputs first_in..last_in have input first_in's dtype. */
int same_dtypes(const cr_params *params, int first_in, int last_in);

/* Output k has dtype. */
int out_dtype_is(const cr_params *params, int k, int32_t dtype);

/* check_dtypes: output 0 is int64. */
int int64_out(const cr_params *params);

/* MX_ACC_ERR_UNSUPPORTED when input index has an integer dtype (see
 * ops_onnx.c). */
int decline_int(const cr_params *params, int index, const char *what);

/* num_inputs: the num_args attribute. */
int num_args_inputs(const cr_params *params);

/* MX_ACC_ERR_INVALID_ARG: what has an index out of range. */
int index_error(const char *what);

/* A line view of x along one axis: outer x n x inner. */
typedef struct line_view {
  int64_t outer, n, inner;
} line_view;

line_view lines_along(const acc_shape *x, int axis);

/* The count elements of data as doubles (malloc'ed; NULL when out of
 * memory). */
double *load_all(cr_dtype dtype, const void *data, int64_t count);

/* Python's slice(start, stop, step).indices(n) and the slice's length. */
void py_slice(int64_t start, int64_t stop, int64_t step, int64_t n, int64_t *first,
              int64_t *length);

/* Writes the per-axis index tables of a table gather for output shape out
 * (-1 where the output takes the fill element) and x's strides. */
typedef void (*table_fn)(const cr_params *params, const acc_shape *x, const acc_shape *out,
                         int64_t *const *tables, int64_t *x_strides);

/* Runs a table gather of in[0] whose tables fill_tables writes for the
 * output. */
int table_run(const cr_params *params, const cr_tensor *in, const cr_tensor *out,
              table_fn fill_tables, const void *fill);

#endif /* CPU_REF_OPS_ONNX_IMPL_H_ */
