/*
 * The ONNX importer's host operators (_onnx_*, acc_host/ops/onnx_ops.py) in
 * cpu_ref, with the semantics of their numpy definitions.
 *
 * Values are computed the way numpy computes them where the result depends
 * on it: integers in exact (wrapping) integer arithmetic, conversions from
 * float to integer as numpy's astype (cr_store_double), floats in double
 * and rounded once to the output dtype (numpy may round float16 and
 * float32 intermediates; the results agree within one rounding of the
 * output dtype). Operators that only move elements run every dtype by
 * element size.
 *
 * What the ABI cannot describe never reaches a plugin: bool, int16 and the
 * 16/32/64-bit unsigned dtypes have no TensorDType. Functions whose result
 * is bool (comparisons, Not, IsNaN, IsInf, the logical operators) and casts
 * to those dtypes are therefore refused as unsupported when parsed.
 *
 * Integer inputs are declined (MX_ACC_ERR_UNSUPPORTED, so the host runs them
 * on its CPU path) where numpy would compute through float16 or another
 * intermediate dtype whose rounding decides the integer result: the
 * transcendental element-wise functions, softmax and the normalisations.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "op_impl.h"
#include "status.h"
#include "tensor.h"

typedef cr_onnx_params onnx_p;

#define P(params) (&(params)->u.onnx)

/* ======================================================================= */
/* Attribute parsing from a per-operator table                              */
/* ======================================================================= */

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

static int parse_with(const attr_spec *specs, const char *const *keys, const char *const *vals,
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

/* ======================================================================= */
/* Shared helpers                                                           */
/* ======================================================================= */

static int is_int(int32_t dtype) { return cr_dtype_is_integer((cr_dtype)dtype); }

static int64_t count_of(const acc_shape *s) { return cr_element_count(s); }

/* value wrapped to the width (and signedness) of integer dtype. */
static int64_t wrap_int(cr_dtype dtype, int64_t value) {
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

static int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* A double value as stored in dtype and read back: the rounding (or
 * conversion) numpy applies when it stores an intermediate of that dtype. */
static double as_dtype(cr_dtype dtype, double value) {
  unsigned char element[8];
  cr_store_double(dtype, element, 0, value);
  return cr_load_double(dtype, element, 0);
}

static int out_of_memory(const char *what) {
  return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "cannot allocate scratch memory for %s", what);
}

/* A compact shape's row-major strides, 0 along its broadcast axes, right
 * aligned in ndim axes of the output (numpy broadcasting). */
static void bstrides(const acc_shape *x, int ndim, int64_t strides[CR_MAX_NDIM]) {
  int64_t own[CR_MAX_NDIM];
  cr_compact_strides(x, own);
  for (int d = 0; d < ndim; ++d) {
    const int dx = d - (ndim - x->ndim);
    strides[d] = dx >= 0 && x->dims[dx] != 1 ? own[dx] : 0;
  }
}

/* numpy's broadcast of n shapes into *out. */
static int broadcast_shapes(const acc_shape *in, int n, acc_shape *out) {
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

static int broadcast_infer(const cr_params *params, const acc_shape *in, int num_in,
                           acc_shape *out) {
  (void)params;
  return broadcast_shapes(in, num_in, out);
}

/* Offsets of output element index (row-major over dims) in each of n
 * operands with strides[k]. */
typedef struct bwalk {
  int ndim;
  int n;
  int64_t dims[CR_MAX_NDIM];
  int64_t idx[CR_MAX_NDIM];
  int64_t strides[4][CR_MAX_NDIM];
  int64_t off[4];
} bwalk;

static void bwalk_init(bwalk *w, const acc_shape *out, const acc_shape *in, int n) {
  memset(w, 0, sizeof *w);
  w->ndim = out->ndim;
  w->n = n;
  for (int d = 0; d < out->ndim; ++d) w->dims[d] = (int64_t)out->dims[d];
  for (int k = 0; k < n; ++k) bstrides(&in[k], out->ndim, w->strides[k]);
}

static void bwalk_next(bwalk *w) {
  for (int d = w->ndim - 1; d >= 0; --d) {
    for (int k = 0; k < w->n; ++k) w->off[k] += w->strides[k][d];
    if (++w->idx[d] < w->dims[d]) return;
    for (int k = 0; k < w->n; ++k) w->off[k] -= w->strides[k][d] * w->dims[d];
    w->idx[d] = 0;
  }
}

static int same_dtypes(const cr_params *params, int first_in, int last_in) {
  int status = MX_ACC_OK;
  for (int i = first_in; i <= last_in && status == MX_ACC_OK; ++i) {
    status = cr_dtype_expect("input", i, params->in_dtypes[i], params->in_dtypes[first_in]);
  }
  return status;
}

static int out_dtype_is(const cr_params *params, int k, int32_t dtype) {
  return cr_dtype_expect("output", k, params->out_dtypes[k], dtype);
}

static int decline_int(const cr_params *params, int index, const char *what) {
  if (!is_int(params->in_dtypes[index])) return MX_ACC_OK;
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "input %d has dtype %s; %s runs only float32, "
                  "float64 and float16 (numpy computes integers through an intermediate "
                  "float dtype)", index, acc_dtype_name(params->in_dtypes[index]), what);
}

static int num_args_inputs(const cr_params *params) { return P(params)->num_args; }

/* ======================================================================= */
/* Element-wise: _onnx_unary                                                */
/* ======================================================================= */

enum {
  U_SOFTSIGN, U_SOFTPLUS, U_SELU, U_ELU, U_CELU, U_LEAKY_RELU, U_THRESHOLDED_RELU,
  U_HARD_SIGMOID, U_HARD_SWISH, U_MISH, U_SWISH, U_GELU, U_SHRINK, U_RELU, U_ABS, U_NEG,
  U_SIGN, U_ROUND, U_SIGMOID, U_FLOOR, U_CEIL, U_RECIPROCAL, U_SQRT, U_EXP, U_LOG, U_ERF,
  U_BITWISE_NOT, U_IDENTITY, U_NOT, U_ISNAN, U_ISINF
};
static const char *const kUnaryFns[] = {
    "softsign", "softplus", "selu", "elu", "celu", "leaky_relu", "thresholded_relu",
    "hard_sigmoid", "hard_swish", "mish", "swish", "gelu", "shrink", "relu", "abs", "neg",
    "sign", "round", "sigmoid", "floor", "ceil", "reciprocal", "sqrt", "exp", "log", "erf",
    "bitwise_not", "identity", "not", "isnan", "isinf", NULL};

static int unary_parse(const char *const *keys, const char *const *vals, size_t count,
                       cr_params *params) {
  static const attr_spec kSpecs[] = {
      {"fn", A_CHOICE, 0, kUnaryFns}, {"alpha", A_FLOAT, 0, NULL},
      {"beta", A_FLOAT, 1, NULL},     {"gamma", A_FLOAT, 2, NULL},
      {"approximate", A_TEXT, 0, NULL}, {"detect_positive", A_BOOL, 0, NULL},
      {"detect_negative", A_BOOL, 1, NULL}, {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->fn = -1;
  p->f[0] = 1.0;
  p->f[1] = 0.0;
  p->f[2] = 1.0;
  snprintf(p->text, sizeof p->text, "none");
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status != MX_ACC_OK) return status;
  if (p->fn < 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute fn is required");
  if (p->fn >= U_NOT) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "fn=%s returns bool, which mxnet_acc.h has no "
                    "dtype for", kUnaryFns[p->fn]);
  }
  return MX_ACC_OK;
}

/* The functions whose integer results numpy computes exactly in the
 * integer dtype. */
static int unary_exact_on_integers(int fn) {
  return fn == U_RELU || fn == U_ABS || fn == U_NEG || fn == U_SIGN || fn == U_ROUND ||
         fn == U_FLOOR || fn == U_CEIL || fn == U_BITWISE_NOT || fn == U_IDENTITY;
}

static int unary_dtypes(const cr_params *params) {
  const onnx_p *p = P(params);
  const int32_t dtype = params->in_dtypes[0];
  int status = out_dtype_is(params, 0, dtype);
  if (status != MX_ACC_OK) return status;
  if (is_int(dtype) && !unary_exact_on_integers(p->fn)) {
    return decline_int(params, 0, kUnaryFns[p->fn]);
  }
  if (!is_int(dtype) && p->fn == U_BITWISE_NOT) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "bitwise_not needs an integer dtype");
  }
  return MX_ACC_OK;
}

static double logaddexp0(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static double unary_float(const onnx_p *p, double x) {
  const double alpha = p->f[0], beta = p->f[1], gamma = p->f[2];
  switch (p->fn) {
    case U_SOFTSIGN: return x / (1 + fabs(x));
    case U_SOFTPLUS: return isnan(x) ? x : logaddexp0(x);
    case U_SELU: return gamma * (x > 0 ? x : alpha * (exp(x) - 1));
    case U_ELU: return x > 0 ? x : alpha * (exp(x) - 1);
    case U_CELU: return fmax(0.0, x) + fmin(0.0, alpha * (exp(x / alpha) - 1));
    case U_LEAKY_RELU: return x >= 0 ? x : alpha * x;
    case U_THRESHOLDED_RELU: return x > alpha ? x : 0.0;
    case U_HARD_SIGMOID: {
      const double v = alpha * x + beta;
      return isnan(v) ? v : v < 0 ? 0.0 : v > 1 ? 1.0 : v;
    }
    case U_HARD_SWISH: {
      const double v = x / 6 + 0.5;
      return x * (isnan(v) ? v : v < 0 ? 0.0 : v > 1 ? 1.0 : v);
    }
    case U_MISH: return x * tanh(isnan(x) ? x : logaddexp0(x));
    case U_SWISH: return x / (1 + exp(-alpha * x));
    case U_GELU:
      if (strcmp(p->text, "tanh") == 0) {
        return 0.5 * x * (1 + tanh(sqrt(2 / 3.141592653589793) * (x + 0.044715 * x * x * x)));
      }
      return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case U_SHRINK: return x < -alpha ? x + beta : x > alpha ? x - beta : 0.0;
    case U_RELU: return isnan(x) ? x : x > 0 ? x : 0.0;
    case U_ABS: return fabs(x);
    case U_NEG: return -x;
    case U_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
    case U_ROUND: return nearbyint(x);
    case U_SIGMOID: return 1 / (1 + exp(-x));
    case U_FLOOR: return floor(x);
    case U_CEIL: return ceil(x);
    case U_RECIPROCAL: return 1 / x;
    case U_SQRT: return sqrt(x);
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_ERF: return erf(x);
    default: return x; /* identity */
  }
}

static int64_t unary_int(cr_dtype dtype, int fn, int64_t x) {
  switch (fn) {
    case U_RELU: return x > 0 ? x : 0;
    case U_ABS: return wrap_int(dtype, x < 0 ? wsub(0, x) : x);
    case U_NEG: return wrap_int(dtype, wsub(0, x));
    case U_SIGN: return x > 0 ? 1 : x < 0 ? wrap_int(dtype, -1) : 0;
    case U_BITWISE_NOT: return wrap_int(dtype, (int64_t)~(uint64_t)x);
    default: return x; /* round, floor, ceil, identity */
  }
}

static int unary_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const onnx_p *p = P(params);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const int64_t count = count_of(&out->shape);
  if (p->fn == U_IDENTITY) return cr_copy_run(params, in, 1, out, 0);
  for (int64_t i = 0; i < count; ++i) {
    if (is_int(dtype)) {
      cr_store_int(dtype, out->data, i, unary_int(dtype, p->fn, cr_load_int(dtype, in[0].data, i)));
    } else {
      cr_store_double(dtype, out->data, i, unary_float(p, cr_load_double(dtype, in[0].data, i)));
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_unary = {unary_parse, cr_one_input, cr_one_output, unary_dtypes,
                                       cr_same_shape_infer, unary_run};

/* ======================================================================= */
/* Element-wise: _onnx_binary                                               */
/* ======================================================================= */

enum {
  B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MOD, B_SHL, B_SHR, B_AND, B_OR, B_XOR, B_PRELU,
  B_FIRST_BOOL /* equal ... xor: bool results */
};
static const char *const kBinaryFns[] = {
    "add", "sub", "mul", "div", "pow", "mod", "bitshift_left", "bitshift_right",
    "bitwise_and", "bitwise_or", "bitwise_xor", "prelu", "equal", "greater", "less",
    "greater_equal", "less_equal", "and", "or", "xor", NULL};

static int binary_parse(const char *const *keys, const char *const *vals, size_t count,
                        cr_params *params) {
  static const attr_spec kSpecs[] = {{"fn", A_CHOICE, 0, kBinaryFns},
                                     {"fmod", A_BOOL, 0, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->fn = -1;
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status != MX_ACC_OK) return status;
  if (p->fn < 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute fn is required");
  if (p->fn >= B_FIRST_BOOL) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "fn=%s returns bool, which mxnet_acc.h has no "
                    "dtype for", kBinaryFns[p->fn]);
  }
  return MX_ACC_OK;
}

static int binary_dtypes(const cr_params *params) {
  const int fn = P(params)->fn;
  const int32_t a = params->in_dtypes[0], b = params->in_dtypes[1];
  int status = out_dtype_is(params, 0, a);
  if (status != MX_ACC_OK) return status;
  const int bitwise = fn == B_SHL || fn == B_SHR || fn == B_AND || fn == B_OR || fn == B_XOR;
  if (bitwise && !is_int(a)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s needs integer operands", kBinaryFns[fn]);
  }
  /* Pow converts a float base's exponent to the base's dtype; for the rest
   * numpy would promote mixed operands before converting back, which
   * cpu_ref leaves to the host. */
  const int mixed_ok = fn == B_POW && !is_int(a);
  if (a != b && !mixed_ok) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "operands of dtypes %s and %s: cpu_ref runs %s "
                    "on operands of one dtype", acc_dtype_name(a), acc_dtype_name(b),
                    kBinaryFns[fn]);
  }
  return MX_ACC_OK;
}

/* numpy's float remainder: the sign of the divisor, NaN for a zero one. */
static double py_mod(double a, double b) {
  if (b == 0.0) return NAN;
  double r = fmod(a, b);
  if (r != 0.0) {
    if ((r < 0.0) != (b < 0.0)) r += b;
  } else {
    r = copysign(0.0, b);
  }
  return r;
}

static double binary_float(const onnx_p *p, double a, double b) {
  switch (p->fn) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_POW: return pow(a, b);
    case B_MOD: return p->flag[0] ? fmod(a, b) : py_mod(a, b);
    default: return a < 0 ? a * b : a; /* prelu */
  }
}

/* Integer power by squaring, wrapping; a negative exponent is refused
 * (numpy raises "Integers to negative integer powers are not allowed"). */
static int int_pow(int64_t base, int64_t exponent, int64_t *out) {
  if (exponent < 0) return -1;
  uint64_t result = 1, b = (uint64_t)base;
  uint64_t e = (uint64_t)exponent;
  while (e > 0) {
    if (e & 1u) result *= b;
    b *= b;
    e >>= 1;
  }
  *out = (int64_t)result;
  return 0;
}

static int bits_of(cr_dtype dtype) { return (int)cr_dtype_size(dtype) * 8; }

/* Returns 0, or -1 for a refused operation (integer division or power that
 * numpy refuses). */
static int binary_int(const onnx_p *p, cr_dtype dtype, int64_t a, int64_t b, int64_t *y,
                      double *as_float, int *is_float) {
  *is_float = 0;
  switch (p->fn) {
    case B_ADD: *y = wadd(a, b); break;
    case B_SUB: *y = wsub(a, b); break;
    case B_MUL: *y = wmul(a, b); break;
    case B_DIV:
      /* np.trunc(a.astype(float64) / b).astype(dtype) */
      *as_float = trunc((double)a / (double)b);
      *is_float = 1;
      return 0;
    case B_POW:
      if (int_pow(a, b, y) != 0) return -1;
      break;
    case B_MOD:
      if (b == 0) {
        *y = 0;
      } else if (b == -1) {
        *y = 0;
      } else {
        int64_t r = a % b;
        if (!p->flag[0] && r != 0 && ((r < 0) != (b < 0))) r += b;
        *y = r;
      }
      break;
    case B_SHL:
      *y = (uint64_t)b < (uint64_t)bits_of(dtype) ? (int64_t)((uint64_t)a << b) : 0;
      break;
    case B_SHR:
      if ((uint64_t)b < (uint64_t)bits_of(dtype)) {
        *y = a >= 0 ? (int64_t)((uint64_t)a >> b) : ~(int64_t)(~(uint64_t)a >> b);
      } else {
        *y = a < 0 ? -1 : 0;
      }
      break;
    case B_AND: *y = a & b; break;
    case B_OR: *y = a | b; break;
    case B_XOR: *y = a ^ b; break;
    default: *y = a < 0 ? wmul(a, b) : a; break; /* prelu */
  }
  *y = wrap_int(dtype, *y);
  return 0;
}

static int binary_run(const cr_params *params, const cr_tensor *in, int num_in,
                      const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const onnx_p *p = P(params);
  const cr_dtype a_type = cr_in_dtype(params, 0), b_type = cr_in_dtype(params, 1);
  const int64_t count = count_of(&out->shape);
  if (count == 0) return MX_ACC_OK;
  bwalk w;
  const acc_shape shapes[2] = {in[0].shape, in[1].shape};
  bwalk_init(&w, &out->shape, shapes, 2);
  for (int64_t i = 0; i < count; ++i, bwalk_next(&w)) {
    if (is_int(a_type)) {
      int64_t y = 0;
      double f = 0;
      int is_float;
      if (binary_int(p, a_type, cr_load_int(a_type, in[0].data, w.off[0]),
                     cr_load_int(b_type, in[1].data, w.off[1]), &y, &f, &is_float) != 0) {
        return acc_fail(MX_ACC_ERR_INVALID_ARG, "integers to negative integer powers are not "
                        "allowed");
      }
      if (is_float) cr_store_double(a_type, out->data, i, f);
      else cr_store_int(a_type, out->data, i, y);
    } else {
      double b = cr_load_double(b_type, in[1].data, w.off[1]);
      if (b_type != a_type) b = as_dtype(a_type, b); /* b.astype(a.dtype) */
      cr_store_double(a_type, out->data, i,
                      binary_float(p, cr_load_double(a_type, in[0].data, w.off[0]), b));
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_binary = {binary_parse, cr_two_inputs, cr_one_output,
                                        binary_dtypes, broadcast_infer, binary_run};

/* ======================================================================= */
/* _onnx_nary: Sum / Max / Min / Mean                                       */
/* ======================================================================= */

enum { N_SUM, N_MAX, N_MIN, N_MEAN };
static const char *const kNaryFns[] = {"sum", "max", "min", "mean", NULL};

static int nary_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  static const attr_spec kSpecs[] = {{"fn", A_CHOICE, 0, kNaryFns},
                                     {"num_args", A_COUNT, 0, NULL},
                                     {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->fn = -1;
  p->num_args = 1;
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && p->fn < 0) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute fn is required");
  }
  return status;
}

static int nary_dtypes(const cr_params *params) {
  int status = same_dtypes(params, 0, params->num_inputs - 1);
  if (status == MX_ACC_OK) status = out_dtype_is(params, 0, params->in_dtypes[0]);
  return status;
}

/* Walks up to CR_MAX_INPUTS operands: offsets recomputed per element. */
static int64_t offset_in(const acc_shape *x, const acc_shape *out, int64_t index) {
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

static int nary_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_threads;
  const int fn = P(params)->fn;
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const int64_t count = count_of(&out->shape);
  for (int64_t i = 0; i < count; ++i) {
    if (is_int(dtype)) {
      int64_t acc = cr_load_int(dtype, in[0].data, offset_in(&in[0].shape, &out->shape, i));
      for (int k = 1; k < num_in; ++k) {
        const int64_t v = cr_load_int(dtype, in[k].data, offset_in(&in[k].shape, &out->shape, i));
        acc = fn == N_MAX ? (v > acc ? v : acc) : fn == N_MIN ? (v < acc ? v : acc)
                                                              : wrap_int(dtype, wadd(acc, v));
      }
      if (fn == N_MEAN) cr_store_double(dtype, out->data, i, (double)acc / num_in);
      else cr_store_int(dtype, out->data, i, acc);
    } else {
      double acc = cr_load_double(dtype, in[0].data, offset_in(&in[0].shape, &out->shape, i));
      for (int k = 1; k < num_in; ++k) {
        const double v =
            cr_load_double(dtype, in[k].data, offset_in(&in[k].shape, &out->shape, i));
        if (fn == N_MAX) acc = (isnan(acc) || isnan(v)) ? NAN : (v > acc ? v : acc);
        else if (fn == N_MIN) acc = (isnan(acc) || isnan(v)) ? NAN : (v < acc ? v : acc);
        else acc = as_dtype(dtype, acc + v);
      }
      cr_store_double(dtype, out->data, i, fn == N_MEAN ? acc / num_in : acc);
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_nary = {nary_parse, num_args_inputs, cr_one_output, nary_dtypes,
                                      broadcast_infer, nary_run};

/* ======================================================================= */
/* _onnx_where, _onnx_clip, _onnx_cast, _onnx_cast_like                      */
/* ======================================================================= */

static int where_dtypes(const cr_params *params) {
  int status = same_dtypes(params, 1, 2);
  if (status == MX_ACC_OK) status = out_dtype_is(params, 0, params->in_dtypes[1]);
  return status;
}

static int where_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const int64_t count = count_of(&out->shape);
  const size_t size = cr_out_size(params, 0);
  if (count == 0) return MX_ACC_OK;
  bwalk w;
  acc_shape shapes[3] = {in[0].shape, in[1].shape, in[2].shape};
  bwalk_init(&w, &out->shape, shapes, 3);
  for (int64_t i = 0; i < count; ++i, bwalk_next(&w)) {
    const int pick = cr_is_nonzero(cr_in_dtype(params, 0), in[0].data, w.off[0]) ? 1 : 2;
    memcpy((unsigned char *)out->data + (size_t)i * size,
           (const unsigned char *)in[pick].data + (size_t)w.off[pick] * size, size);
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_where = {cr_no_attrs_parse, cr_three_inputs, cr_one_output,
                                       where_dtypes, broadcast_infer, where_run};

static int clip_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  static const attr_spec kSpecs[] = {{"a_min", A_OPT_FLOAT, 0, NULL},
                                     {"a_max", A_OPT_FLOAT, 1, NULL},
                                     {NULL, A_INT, 0, NULL}};
  return parse_with(kSpecs, keys, vals, count, P(params));
}

static int clip_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  const onnx_p *p = P(params);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const int64_t count = count_of(&out->shape);
  /* The bounds as np.array(bound).astype(dtype). */
  unsigned char low[8], high[8];
  cr_store_double(dtype, low, 0, p->f[0]);
  cr_store_double(dtype, high, 0, p->f[1]);
  for (int64_t i = 0; i < count; ++i) {
    if (is_int(dtype)) {
      int64_t v = cr_load_int(dtype, in[0].data, i);
      if (p->has_f[0] && v < cr_load_int(dtype, low, 0)) v = cr_load_int(dtype, low, 0);
      if (p->has_f[1] && v > cr_load_int(dtype, high, 0)) v = cr_load_int(dtype, high, 0);
      cr_store_int(dtype, out->data, i, v);
    } else {
      double v = cr_load_double(dtype, in[0].data, i);
      const double lo = cr_load_double(dtype, low, 0), hi = cr_load_double(dtype, high, 0);
      if (p->has_f[0] && !isnan(v)) v = isnan(lo) ? lo : (v < lo ? lo : v);
      if (p->has_f[1] && !isnan(v)) v = isnan(hi) ? hi : (v > hi ? hi : v);
      cr_store_double(dtype, out->data, i, v);
    }
  }
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_clip = {clip_parse, cr_one_input, cr_one_output, cr_dtypes_any,
                                      cr_same_shape_infer, clip_run};

static int cast_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params) {
  static const attr_spec kSpecs[] = {{"dtype", A_DTYPE, 0, NULL}, {NULL, A_INT, 0, NULL}};
  onnx_p *p = P(params);
  p->dtype = -1;
  int status = parse_with(kSpecs, keys, vals, count, p);
  if (status == MX_ACC_OK && p->dtype < 0) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute dtype is required");
  }
  return status;
}

static int cast_dtypes(const cr_params *params) {
  return out_dtype_is(params, 0, P(params)->dtype);
}

static int cast_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
  cr_cast(count_of(&out->shape), cr_in_dtype(params, 0), in[0].data, cr_out_dtype(params, 0),
          out->data);
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_cast = {cast_parse, cr_one_input, cr_one_output, cast_dtypes,
                                      cr_same_shape_infer, cast_run};

static int cast_like_dtypes(const cr_params *params) {
  return out_dtype_is(params, 0, params->in_dtypes[1]);
}

const cr_op_impl cr_impl_onnx_cast_like = {cr_no_attrs_parse, cr_two_inputs, cr_one_output,
                                           cast_like_dtypes, cr_same_shape_infer, cast_run};

/* ======================================================================= */
/* Moving elements                                                          */
/* ======================================================================= */

/* Python's a % b for b > 0. */
static int64_t py_mod_int(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}

/* numpy's normalisation of an axis that may be negative: [-ndim, ndim). */
static int np_axis(int64_t axis, int ndim, int *out) { return cr_resolve_axis(axis, ndim, out); }

/* Python's slice(start, stop, step).indices(n) and the slice's length. */
static void py_slice(int64_t start, int64_t stop, int64_t step, int64_t n, int64_t *first,
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

static int int64_out(const cr_params *params) { return out_dtype_is(params, 0, CR_INT64); }

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

static const attr_spec kAxisSpec[] = {{"axis", A_INT, 0, NULL}, {NULL, A_INT, 0, NULL}};

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

static const attr_spec kAxesSpec[] = {{"axes", A_TUPLE, 0, NULL}, {NULL, A_INT, 0, NULL}};
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
  (void)num_threads;
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
  cr_copy_strided(x->ndim, dims, strides, cr_in_size(params, 0), in[0].data, out->data);
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_transpose = {transpose_parse, cr_one_input, cr_one_output,
                                           cr_dtypes_any, transpose_infer, transpose_run};

/* ---- gathers by per-axis tables: expand, slice, tile, pad ------------------------- */

/* Runs a table gather whose tables fill_tables writes for the output. */
typedef void (*table_fn)(const cr_params *params, const acc_shape *x, const acc_shape *out,
                         int64_t *const *tables, int64_t *x_strides);

static int table_run(const cr_params *params, const cr_tensor *in, const cr_tensor *out,
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

static int slice_run(const cr_params *params, const cr_tensor *in, int num_in,
                     const cr_tensor *out, int num_threads) {
  (void)num_in;
  (void)num_threads;
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
  *axis = (int)py_mod_int(p->i[0], x->ndim);
  const int64_t n = (int64_t)x->dims[*axis];
  const int parts = split_outputs(params);
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

static int index_error(const char *what) {
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: an index is out of range", what);
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

/* ======================================================================= */
/* Reductions, searches, scans                                               */
/* ======================================================================= */

/* A line view of x along one axis: outer x n x inner. */
typedef struct line_view {
  int64_t outer, n, inner;
} line_view;

static line_view lines_along(const acc_shape *x, int axis) {
  line_view v = {cr_product(x, 0, axis), (int64_t)x->dims[axis], cr_product(x, axis + 1, x->ndim)};
  return v;
}

static double *load_all(cr_dtype dtype, const void *data, int64_t count) {
  double *values = malloc((size_t)(count > 0 ? count : 1) * sizeof(double));
  if (values == NULL) return NULL;
  for (int64_t i = 0; i < count; ++i) values[i] = cr_load_double(dtype, data, i);
  return values;
}

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

/* ---- _onnx_matmul, _onnx_gemm ------------------------------------------------------------ */

/* y = a @ b for matrices given by element offsets and strides; integers
 * wrap in the dtype (numpy's integer matmul), floats sum in double. */
static void matmul_block(cr_dtype dtype, const void *a, int64_t a_off, int64_t a_rs,
                         int64_t a_cs, const void *b, int64_t b_off, int64_t b_rs, int64_t b_cs,
                         int64_t m, int64_t n, int64_t k, double *y_f, int64_t *y_i) {
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      if (is_int(dtype)) {
        int64_t acc = 0;
        for (int64_t t = 0; t < k; ++t) {
          acc = wadd(acc, wmul(cr_load_int(dtype, a, a_off + r * a_rs + t * a_cs),
                               cr_load_int(dtype, b, b_off + t * b_rs + c * b_cs)));
        }
        y_i[r * n + c] = wrap_int(dtype, acc);
      } else {
        double acc = 0;
        for (int64_t t = 0; t < k; ++t) {
          acc += cr_load_double(dtype, a, a_off + r * a_rs + t * a_cs) *
                 cr_load_double(dtype, b, b_off + t * b_rs + c * b_cs);
        }
        y_f[r * n + c] = acc;
      }
    }
  }
}

static int same_in_out_dtypes(const cr_params *params) { return cr_dtypes_any(params); }

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
  (void)num_threads;
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
  double *yf = malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof(double));
  int64_t *yi = malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof(int64_t));
  if (yf == NULL || yi == NULL) {
    free(yf);
    free(yi);
    return out_of_memory("matmul");
  }
  for (int64_t t = 0; t < batches; ++t) {
    const int64_t a_off = offset_in(&batch[0], &outer, t) * m * k;
    const int64_t b_off = offset_in(&batch[1], &outer, t) * k * n;
    matmul_block(dtype, in[0].data, a_off, k, 1, in[1].data, b_off, n, 1, m, n, k, yf, yi);
    for (int64_t e = 0; e < m * n; ++e) {
      if (is_int(dtype)) cr_store_int(dtype, out->data, t * m * n + e, yi[e]);
      else cr_store_double(dtype, out->data, t * m * n + e, yf[e]);
    }
  }
  free(yf);
  free(yi);
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

static int gemm_run(const cr_params *params, const cr_tensor *in, int num_in,
                    const cr_tensor *out, int num_threads) {
  (void)num_threads;
  const onnx_p *p = P(params);
  const acc_shape *a = &in[0].shape, *b = &in[1].shape;
  const int64_t m = (int64_t)a->dims[p->flag[0] ? 1 : 0], k = (int64_t)a->dims[p->flag[0] ? 0 : 1];
  const int64_t n = (int64_t)b->dims[p->flag[1] ? 0 : 1];
  const int64_t a_rs = p->flag[0] ? 1 : k, a_cs = p->flag[0] ? m : 1;
  const int64_t b_rs = p->flag[1] ? 1 : n, b_cs = p->flag[1] ? k : 1;
  const cr_dtype dtype = cr_in_dtype(params, 0);
  double *yf = malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof(double));
  int64_t *yi = malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof(int64_t));
  if (yf == NULL || yi == NULL) {
    free(yf);
    free(yi);
    return out_of_memory("gemm");
  }
  matmul_block(dtype, in[0].data, 0, a_rs, a_cs, in[1].data, 0, b_rs, b_cs, m, n, k, yf, yi);
  acc_shape mn = {2, {(uint64_t)m, (uint64_t)n}};
  const int64_t count = count_of(&out->shape);
  for (int64_t e = 0; e < count; ++e) {
    const int64_t ab = offset_in(&mn, &out->shape, e);
    double value = p->f[0] * (is_int(dtype) ? (double)yi[ab] : as_dtype(dtype, yf[ab]));
    if (num_in > 2) value += p->f[1] * cr_load_double(dtype, in[2].data, offset_in(&in[2].shape, &out->shape, e));
    cr_store_double(dtype, out->data, e, value);
  }
  free(yf);
  free(yi);
  return MX_ACC_OK;
}

const cr_op_impl cr_impl_onnx_gemm = {gemm_parse, gemm_inputs, cr_one_output,
                                      same_in_out_dtypes, gemm_infer, gemm_run};

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
