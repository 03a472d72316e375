/*
 * The ONNX importer's element-wise host operators in cpu_ref (see
 * ops_onnx.c): _onnx_unary, _onnx_binary, _onnx_nary, _onnx_where,
 * _onnx_clip, _onnx_cast and _onnx_cast_like.
 *
 * What the ABI cannot describe never reaches a plugin: bool, int16 and the
 * 16/32/64-bit unsigned dtypes have no TensorDType. Functions whose result
 * is bool (comparisons, Not, IsNaN, IsInf, the logical operators) and casts
 * to those dtypes are therefore refused as unsupported when parsed.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops_onnx_impl.h"
#include "status.h"
#include "tensor.h"

/* ---- broadcasting ------------------------------------------------------------- */

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

/* ======================================================================= */
/* Element-wise: _onnx_unary                                                */
/* ======================================================================= */

/* parse_with() for an operator whose "fn" (p->fn, an index of names) is
 * required and below first_bool: the fns from first_bool on return bool. */
static int parse_fn(const attr_spec *specs, const char *const *keys, const char *const *vals,
                    size_t count, onnx_p *p, int first_bool, const char *const *names) {
  int status = parse_with(specs, keys, vals, count, p);
  if (status != MX_ACC_OK) return status;
  if (p->fn < 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute fn is required");
  if (p->fn >= first_bool) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "fn=%s returns bool, which mxnet_acc.h has no "
                    "dtype for", names[p->fn]);
  }
  return MX_ACC_OK;
}

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
  return parse_fn(kSpecs, keys, vals, count, p, U_NOT, kUnaryFns);
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
  const onnx_p *p = P(params);
  const cr_dtype dtype = cr_in_dtype(params, 0);
  const int64_t count = count_of(&out->shape);
  if (p->fn == U_IDENTITY) return cr_copy_run(params, in, 1, out, 0);
  if (dtype == CR_FLOAT32 && (p->fn == U_HARD_SIGMOID || p->fn == U_HARD_SWISH)) {
    /* MobileNetV3's activations, in float by one loop that vectorises (its
     * 29 HardSwish steps took 6.9 of 16.5 ms per forward, element by
     * element in double); both kernel sets, the same values. */
    if (params->kernels == CR_KERNELS_FAST) {
      cr_fast_hard_sigmoid(p->fn == U_HARD_SWISH, p->f[0], p->f[1], count, in[0].data,
                           out->data, num_threads);
    } else {
      cr_hard_sigmoid(p->fn == U_HARD_SWISH, p->f[0], p->f[1], count, in[0].data, out->data);
    }
    return MX_ACC_OK;
  }
  for (int64_t i = 0; i < count; ++i) {
    if (is_int(dtype)) {
      cr_store_int(dtype, out->data, i, unary_int(dtype, p->fn, cr_load_int(dtype, in[0].data, i)));
    } else {
      cr_store_double(dtype, out->data, i, unary_float(p, cr_load_double(dtype, in[0].data, i)));
    }
  }
  return MX_ACC_OK;
}

int cr_onnx_unary_hard_sigmoid(const cr_params *params, int *swish, float *alpha, float *beta) {
  const onnx_p *p = P(params);
  if (p->fn != U_HARD_SIGMOID && p->fn != U_HARD_SWISH) return 0;
  *swish = p->fn == U_HARD_SWISH;
  /* As unary_run's kernels compute them: HardSwish x / 6 + 0.5 as x times
   * 1/6 rounded to float (its alpha and beta attributes unused). */
  *alpha = *swish ? 1.0f / 6.0f : (float)p->f[0];
  *beta = *swish ? 0.5f : (float)p->f[1];
  return 1;
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
  return parse_fn(kSpecs, keys, vals, count, p, B_FIRST_BOOL, kBinaryFns);
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
