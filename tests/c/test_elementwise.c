/*
 * The element-wise kernels of plugins/cpu_ref/kernels/reference/kernels.c against scalar
 * references, compiled as the shipped library is (-O2 with GCC's dynamic
 * vector cost model; tests/c/test_c_kernels.py adds the sanitizers), so that
 * the vectorised loops are the ones tested: every operation over lengths
 * that hit the vector body, its remainder and neither (0, 1, 15, 16, 17,
 * 33, 100), unaligned, in place, with signed zeros, subnormals, infinities
 * and NaNs among the values.
 *
 * The operations that kernels.c computes bit-identically to a scalar
 * expression (+ - * / maximum minimum, relu, softsign, leaky, the simple
 * unary operations, LayerNorm's sums) are compared bit for bit (any NaN matching any NaN); softmax, whose
 * row sums are reordered, within a tolerance of the general (strided)
 * path. The fast kernels (cr_fast_*, kernels/fast/elementwise.c: the same
 * loops built once per ISA) are compared with these reference kernels bit
 * for bit on every operation. Prints "N passed, N failed" and exits
 * non-zero if anything failed.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

static int passed, failed;

static void report(int ok, const char *what, int64_t length) {
  if (ok) {
    ++passed;
  } else {
    ++failed;
    printf("FAILED: %s (length %lld)\n", what, (long long)length);
  }
}

/* Equal bits, or both NaN. */
static int same_float(float a, float b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  uint32_t ua, ub;
  memcpy(&ua, &a, sizeof ua);
  memcpy(&ub, &b, sizeof ub);
  return ua == ub;
}

static int same_floats(const float *a, const float *b, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (!same_float(a[i], b[i])) {
      printf("  at %lld: %.9g, want %.9g\n", (long long)i, (double)a[i], (double)b[i]);
      return 0;
    }
  }
  return 1;
}

enum { kMax = 128 };
static const int64_t kLengths[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100};
#define NUM_LENGTHS ((int)(sizeof kLengths / sizeof kLengths[0]))

/* Values that exercise the select and rounding edge cases, spread over the
 * vector lanes differently for each seed, between pseudo-random ones. */
static void fill_values(float *x, int64_t count, unsigned seed, int specials) {
  static const float kSpecial[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-40f, -1e-40f, FLT_MAX,
                                   -FLT_MAX, INFINITY, -INFINITY, NAN, 3.0f, -2.5f, 0.1f};
  const int num_special = (int)(sizeof kSpecial / sizeof kSpecial[0]);
  unsigned state = seed * 2654435761u + 1u;
  for (int64_t i = 0; i < count; ++i) {
    state = state * 1103515245u + 12345u;
    const unsigned pick = (state >> 16) & 0xff;
    if (specials && pick % 3 == 0) {
      x[i] = kSpecial[(pick / 3) % (unsigned)num_special];
    } else {
      x[i] = (float)((int)((state >> 8) & 0xffff) - 32768) / 4096.0f;
    }
  }
}

/* ---- binary operations ------------------------------------------------ */

static const char *const kBinaryNames[] = {
    "add",     "sub",       "mul",     "div",           "power",      "maximum",
    "minimum", "mod",       "hypot",   "equal",         "not_equal",  "greater",
    "greater_equal", "lesser", "lesser_equal", "logical_and", "logical_or", "logical_xor"};

static double reference_mod(double a, double b) {
  if (b == 0.0) return 0.0;
  double r = fmod(a, b);
  if (r != 0.0 && (r < 0.0) != (b < 0.0)) r += b;
  return r;
}

/* One element of op, as kernels.h defines it (a switch per element, so
 * this never vectorises). */
__attribute__((noinline)) static float reference_binary(cr_binary_op op, float a, float b) {
  switch (op) {
    case CR_BINARY_ADD: return a + b;
    case CR_BINARY_SUB: return a - b;
    case CR_BINARY_MUL: return a * b;
    case CR_BINARY_DIV: return a / b;
    case CR_BINARY_POWER: return (float)pow(a, b);
    case CR_BINARY_MAXIMUM: return a > b ? a : b;
    case CR_BINARY_MINIMUM: return a < b ? a : b;
    case CR_BINARY_MOD: return (float)reference_mod(a, b);
    case CR_BINARY_HYPOT: return (float)hypot(a, b);
    case CR_BINARY_EQUAL: return a == b ? 1.0f : 0.0f;
    case CR_BINARY_NOT_EQUAL: return a != b ? 1.0f : 0.0f;
    case CR_BINARY_GREATER: return a > b ? 1.0f : 0.0f;
    case CR_BINARY_GREATER_EQUAL: return a >= b ? 1.0f : 0.0f;
    case CR_BINARY_LESSER: return a < b ? 1.0f : 0.0f;
    case CR_BINARY_LESSER_EQUAL: return a <= b ? 1.0f : 0.0f;
    case CR_BINARY_LOGICAL_AND: return a != 0 && b != 0 ? 1.0f : 0.0f;
    case CR_BINARY_LOGICAL_OR: return a != 0 || b != 0 ? 1.0f : 0.0f;
    case CR_BINARY_LOGICAL_XOR: return (a != 0) != (b != 0) ? 1.0f : 0.0f;
  }
  return 0.0f;
}

static void test_binary(cr_binary_op op) {
  char what[96];
  /* +1: operands and results not at a vector boundary. */
  static float a_buf[kMax + 1], b_buf[kMax + 1], y_buf[kMax + 1], want[kMax], copy[kMax];
  float *a = a_buf + 1, *b = b_buf + 1, *y = y_buf + 1;
  for (int l = 0; l < NUM_LENGTHS; ++l) {
    const int64_t n = kLengths[l];
    fill_values(a, n, (unsigned)(op * 31 + l), 1);
    fill_values(b, n, (unsigned)(op * 37 + l + 1000), 1);
    for (int64_t i = 0; i < n; ++i) want[i] = reference_binary(op, a[i], b[i]);
    cr_binary(op, n, a, b, y);
    snprintf(what, sizeof what, "binary %s", kBinaryNames[op]);
    report(same_floats(y, want, n), what, n);

    memcpy(copy, a, (size_t)n * sizeof *a);
    cr_binary(op, n, copy, b, copy);
    snprintf(what, sizeof what, "binary %s in place of a", kBinaryNames[op]);
    report(same_floats(copy, want, n), what, n);
    memcpy(copy, b, (size_t)n * sizeof *b);
    cr_binary(op, n, a, copy, copy);
    snprintf(what, sizeof what, "binary %s in place of b", kBinaryNames[op]);
    report(same_floats(copy, want, n), what, n);

    /* Scalar forms, with a few scalars including the special ones. */
    static const float kScalars[] = {0.5f, -3.0f, 0.0f, -0.0f, INFINITY, NAN, 1e-40f};
    for (int s = 0; s < (int)(sizeof kScalars / sizeof kScalars[0]); ++s) {
      const float scalar = kScalars[s];
      for (int reverse = 0; reverse <= 1; ++reverse) {
        for (int64_t i = 0; i < n; ++i) {
          want[i] = reverse ? reference_binary(op, scalar, a[i]) : reference_binary(op, a[i], scalar);
        }
        cr_scalar_binary(op, reverse, n, a, scalar, y);
        snprintf(what, sizeof what, "scalar %s%s %g", reverse ? "reversed " : "",
                 kBinaryNames[op], (double)scalar);
        report(same_floats(y, want, n), what, n);
        memcpy(copy, a, (size_t)n * sizeof *a);
        cr_scalar_binary(op, reverse, n, copy, scalar, copy);
        report(same_floats(copy, want, n), "scalar in place", n);
      }
    }
  }
}

/* cr_broadcast_binary over (3, n): the contiguous row cases (both
 * operands, a row repeated, one value per row on either side) and a
 * strided one. */
static void test_broadcast(cr_binary_op op) {
  char what[96];
  static float a[3 * kMax + 1], b[3 * kMax + 1], y[3 * kMax], want[3 * kMax];
  for (int l = 0; l < NUM_LENGTHS; ++l) {
    const int64_t n = kLengths[l];
    if (n == 0) continue;
    const int64_t dims[2] = {3, n};
    const int64_t contiguous[2] = {n, 1}, row[2] = {0, 1}, column[2] = {1, 0},
                  transposed[2] = {1, 3};
    const struct {
      const char *name;
      const int64_t *a_strides, *b_strides;
    } cases[] = {{"both contiguous", contiguous, contiguous},
                 {"b a repeated row", contiguous, row},
                 {"a a repeated row", row, contiguous},
                 {"b one per row", contiguous, column},
                 {"a one per row", column, contiguous},
                 {"a transposed", transposed, row}};
    fill_values(a, 3 * n, (unsigned)(op * 41 + l), 1);
    fill_values(b, 3 * n, (unsigned)(op * 43 + l + 500), 1);
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); ++c) {
      for (int64_t r = 0; r < 3; ++r) {
        for (int64_t i = 0; i < n; ++i) {
          const float av = a[r * cases[c].a_strides[0] + i * cases[c].a_strides[1]];
          const float bv = b[r * cases[c].b_strides[0] + i * cases[c].b_strides[1]];
          want[r * n + i] = reference_binary(op, av, bv);
        }
      }
      cr_broadcast_binary(op, 2, dims, cases[c].a_strides, cases[c].b_strides, a, b, y);
      snprintf(what, sizeof what, "broadcast %s %s", kBinaryNames[op], cases[c].name);
      report(same_floats(y, want, 3 * n), what, n);
    }
  }
}

/* ---- activations -------------------------------------------------------- */

static void test_activations(void) {
  static float x_buf[kMax + 1], y[kMax], want[kMax], copy[kMax];
  float *x = x_buf + 1;
  for (int l = 0; l < NUM_LENGTHS; ++l) {
    const int64_t n = kLengths[l];
    fill_values(x, n, (unsigned)(l + 77), 1);

    for (int64_t i = 0; i < n; ++i) want[i] = x[i] < 0.0f ? 0.0f : x[i];
    cr_activation(CR_ACT_RELU, n, x, y);
    report(same_floats(y, want, n), "relu", n);
    for (int64_t i = 0; i < n; ++i) {
      if (isnan(x[i]) && !isnan(y[i])) report(0, "relu keeps NaN", n);
    }
    memcpy(copy, x, (size_t)n * sizeof *x);
    cr_activation(CR_ACT_RELU, n, copy, copy);
    report(same_floats(copy, want, n), "relu in place", n);

    for (int64_t i = 0; i < n; ++i) want[i] = x[i] / (1.0f + fabsf(x[i]));
    cr_activation(CR_ACT_SOFTSIGN, n, x, y);
    report(same_floats(y, want, n), "softsign", n);

    for (int64_t i = 0; i < n; ++i) want[i] = tanhf(x[i]);
    cr_activation(CR_ACT_TANH, n, x, y);
    report(same_floats(y, want, n), "tanh", n);

    /* sigmoid and softrelu in double, within float rounding. */
    int close = 1;
    cr_activation(CR_ACT_SIGMOID, n, x, y);
    for (int64_t i = 0; i < n; ++i) {
      const double s = 1.0 / (1.0 + exp(-(double)x[i]));
      if (isnan(s) ? !isnan(y[i]) : fabs(y[i] - s) > 1e-6 * fabs(s) + 1e-30) close = 0;
    }
    report(close, "sigmoid", n);

    static const double kSlopes[] = {0.25, -1.5, 0.0, -0.0, 3.0, INFINITY, NAN};
    for (int s = 0; s < (int)(sizeof kSlopes / sizeof kSlopes[0]); ++s) {
      for (int64_t i = 0; i < n; ++i) {
        const double v = x[i];
        want[i] = (float)(v > 0.0 ? v : v * kSlopes[s]);
      }
      cr_leaky_relu(CR_LEAKY_LEAKY, kSlopes[s], n, x, y);
      report(same_floats(y, want, n), "leaky", n);
      memcpy(copy, x, (size_t)n * sizeof *x);
      cr_leaky_relu(CR_LEAKY_LEAKY, kSlopes[s], n, copy, copy);
      report(same_floats(copy, want, n), "leaky in place", n);
    }
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i];
      want[i] = (float)(v > 0.0 ? v : 0.5 * expm1(v));
    }
    cr_leaky_relu(CR_LEAKY_ELU, 0.5, n, x, y);
    report(same_floats(y, want, n), "elu", n);

    /* GELU against 0.5 v erfc(-v / sqrt 2) in double, within the
     * kernel's stated error (3e-6 relative for |v| <= 5, 2e-5 beyond, where
     * values below 1e-37 stand for the ones the float exp cannot reach);
     * the special values bit for bit, as the formula gives them: NaN stays
     * NaN, zeros keep their sign, +inf stays +inf and -inf gives NaN (-inf
     * times 0). */
    int gelu_ok = 1;
    cr_leaky_relu(CR_LEAKY_GELU, 0.0, n, x, y);
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i], g = 0.5 * v * erfc(-v / sqrt(2.0));
      int ok;
      if (isnan(v) || isinf(v) || v == 0.0) {
        ok = same_float(y[i], (float)g);
      } else {
        ok = fabs(y[i] - g) <= (fabs(v) <= 5.0 ? 3e-6 : 2e-5) * fabs(g) + 1e-37;
      }
      if (!ok) printf("  gelu(%.9g) = %.9g, want %.9g\n", v, (double)y[i], g);
      gelu_ok &= ok;
    }
    report(gelu_ok, "gelu", n);
  }
}

/* ---- unary operations ---------------------------------------------------- */

/* The unary operations kernels.c runs as plain loops, as kernels.h defines
 * them (in double, rounded to float once). */
__attribute__((noinline)) static float reference_unary(cr_unary_op op, float x) {
  const double v = x, pi = 3.141592653589793238462643383279502884;
  switch (op) {
    case CR_UNARY_ABS: return (float)fabs(v);
    case CR_UNARY_NEGATIVE: return (float)-v;
    case CR_UNARY_SQUARE: return (float)(v * v);
    case CR_UNARY_RECIPROCAL: return (float)(1.0 / v);
    case CR_UNARY_RELU: return (float)(v < 0.0 ? 0.0 : v);
    case CR_UNARY_SIGN: return (float)(v > 0.0 ? 1.0 : v < 0.0 ? -1.0 : v);
    case CR_UNARY_DEGREES: return (float)(v * (180.0 / pi));
    case CR_UNARY_RADIANS: return (float)(v * (pi / 180.0));
    case CR_UNARY_LOGICAL_NOT: return v == 0.0 ? 1.0f : 0.0f;
    case CR_UNARY_EXP: return (float)exp(v);
    default: return NAN;
  }
}

static void test_unary(void) {
  static const struct {
    cr_unary_op op;
    const char *name;
  } kOps[] = {{CR_UNARY_ABS, "abs"},           {CR_UNARY_NEGATIVE, "negative"},
              {CR_UNARY_SQUARE, "square"},     {CR_UNARY_RECIPROCAL, "reciprocal"},
              {CR_UNARY_RELU, "relu"},         {CR_UNARY_SIGN, "sign"},
              {CR_UNARY_DEGREES, "degrees"},   {CR_UNARY_RADIANS, "radians"},
              {CR_UNARY_LOGICAL_NOT, "logical_not"}, {CR_UNARY_EXP, "exp"}};
  static float x_buf[kMax + 1], y[kMax], want[kMax], copy[kMax];
  float *x = x_buf + 1;
  char what[64];
  for (int k = 0; k < (int)(sizeof kOps / sizeof kOps[0]); ++k) {
    for (int l = 0; l < NUM_LENGTHS; ++l) {
      const int64_t n = kLengths[l];
      fill_values(x, n, (unsigned)(k * 13 + l), 1);
      for (int64_t i = 0; i < n; ++i) want[i] = reference_unary(kOps[k].op, x[i]);
      cr_unary(kOps[k].op, n, x, y);
      snprintf(what, sizeof what, "unary %s", kOps[k].name);
      report(same_floats(y, want, n), what, n);
      memcpy(copy, x, (size_t)n * sizeof *x);
      cr_unary(kOps[k].op, n, copy, copy);
      snprintf(what, sizeof what, "unary %s in place", kOps[k].name);
      report(same_floats(copy, want, n), what, n);
    }
  }
}

/* ---- LayerNorm ---------------------------------------------------------- */

/* Sum in the order kernels.c documents: element i into partial sum i % 8,
 * the partials added as ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)). */
static double sum_in_order(const float *x, int64_t count, double shift, int squares) {
  double partial[8] = {0};
  for (int64_t i = 0; i < count; ++i) {
    const double d = x[i] - shift;
    partial[i % 8] += squares ? d * d : d;
  }
  return ((partial[0] + partial[4]) + (partial[2] + partial[6])) +
         ((partial[1] + partial[5]) + (partial[3] + partial[7]));
}

/* 11 rows: a block of 8 (kernels.c takes rows 8 at a time) and 3 more. */
enum { kNormRows = 11 };

static void test_layer_norm(void) {
  static float x[kNormRows * kMax], y[kNormRows * kMax], want[kNormRows * kMax], gamma[kMax],
      beta[kMax];
  float mean[kNormRows], std[kNormRows], want_mean[kNormRows], want_std[kNormRows];
  for (int l = 0; l < NUM_LENGTHS; ++l) {
    const int64_t n = kLengths[l];
    if (n == 0) continue;
    fill_values(x, kNormRows * n, (unsigned)(l + 5), 0);
    for (int64_t i = 0; i < n; ++i) x[i] += 1000.0f; /* a large mean in row 0 */
    fill_values(gamma, n, (unsigned)(l + 6), 0);
    fill_values(beta, n, (unsigned)(l + 7), 0);
    for (int64_t r = 0; r < kNormRows; ++r) {
      const float *xr = x + r * n;
      const double mu = sum_in_order(xr, n, 0.0, 0) / (double)n;
      const double var = sum_in_order(xr, n, mu, 1) / (double)n;
      const double s = sqrt(var + 1e-5), inverse = 1.0 / s;
      for (int64_t c = 0; c < n; ++c) {
        want[r * n + c] = (float)((xr[c] - mu) * inverse * gamma[c] + beta[c]);
      }
      want_mean[r] = (float)mu;
      want_std[r] = (float)s;
    }
    cr_layer_norm(1, n, 1, x, gamma, beta, 1e-5, y, mean, std);
    report(same_floats(y, want, n) && same_floats(mean, want_mean, 1) &&
               same_floats(std, want_std, 1),
           "layer norm one row", n);
    cr_layer_norm(kNormRows, n, 1, x, gamma, beta, 1e-5, y, mean, std);
    report(same_floats(y, want, kNormRows * n), "layer norm rows", n);
    report(same_floats(mean, want_mean, kNormRows) && same_floats(std, want_std, kNormRows),
           "layer norm mean and std", n);
    cr_layer_norm(kNormRows, n, 1, x, gamma, beta, 1e-5, y, NULL, NULL);
    report(same_floats(y, want, kNormRows * n), "layer norm rows, no statistics", n);
  }
}

/* ---- softmax ------------------------------------------------------------ */

/* rows x length values; the reference is the general path (the rows as
 * the middle axis of (1, length, rows), a left-to-right double sum). */
static void check_softmax(const float *x, int64_t rows, int64_t length, const char *what) {
  static float xt[40 * kMax], yt[40 * kMax], y[40 * kMax], copy[40 * kMax];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < length; ++i) xt[i * rows + r] = x[r * length + i];
  }
  cr_softmax(1, length, rows, 1.0, 0, xt, yt);
  cr_softmax(rows, length, 1, 1.0, 0, x, y);
  memcpy(copy, x, (size_t)(rows * length) * sizeof *x);
  cr_softmax(rows, length, 1, 1.0, 0, copy, copy);
  int ok = 1;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < length; ++i) {
      const float want = yt[i * rows + r], got = y[r * length + i];
      const int close = isnan(want) ? isnan(got) : fabsf(got - want) <= 1e-6f * want + 1e-37f;
      if (!close || !same_float(copy[r * length + i], got)) {
        if (ok) printf("  row %lld at %lld: %.9g, want %.9g\n", (long long)r, (long long)i,
                       (double)got, (double)want);
        ok = 0;
      }
    }
  }
  report(ok, what, length);
}

static void test_softmax(void) {
  static float x[40 * kMax];
  static const int64_t kRows[] = {1, 15, 16, 17, 37};
  for (int l = 0; l < NUM_LENGTHS; ++l) {
    const int64_t n = kLengths[l];
    if (n == 0) continue;
    for (int k = 0; k < 5; ++k) {
      const int64_t rows = kRows[k];
      fill_values(x, rows * n, (unsigned)(l * 7 + k), 0);
      check_softmax(x, rows, n, "softmax rows");
      if (rows < 17) continue;
      /* Rows the fast path hands over: a NaN, an infinity, all -inf, all
       * equal, signed zeros; and large values (exp clamped). */
      x[2 * n + n / 2] = NAN;
      x[3 * n] = INFINITY;
      x[4 * n + n - 1] = INFINITY; /* past the vector body for n % 16 != 0 */
      for (int64_t i = 0; i < n; ++i) x[5 * n + i] = -INFINITY;
      x[6 * n + n - 1] = -INFINITY;
      for (int64_t i = 0; i < n; ++i) x[7 * n + i] = 2.0f;
      for (int64_t i = 0; i < n; ++i) x[8 * n + i] = i % 2 ? 0.0f : -0.0f;
      for (int64_t i = 0; i < n; ++i) x[9 * n + i] = 80.0f + (float)i;
      x[16 * n + n - 1] = NAN; /* the first row of the second block */
      check_softmax(x, rows, n, "softmax rows with special values");
    }
  }
}

/* Rows long enough that kernels.c takes them one at a time. */
static void test_long_rows(void) {
  enum { kRows = 3, kLong = 1100 };
  static float x[kRows * kLong], y[kRows * kLong], want[kRows * kLong], gamma[kLong],
      beta[kLong];
  fill_values(x, kRows * kLong, 99, 0);
  fill_values(gamma, kLong, 98, 0);
  fill_values(beta, kLong, 97, 0);
  for (int64_t r = 0; r < kRows; ++r) {
    const float *xr = x + r * kLong;
    const double mu = sum_in_order(xr, kLong, 0.0, 0) / (double)kLong;
    const double var = sum_in_order(xr, kLong, mu, 1) / (double)kLong;
    const double inverse = 1.0 / sqrt(var + 1e-5);
    for (int64_t c = 0; c < kLong; ++c) {
      want[r * kLong + c] = (float)((xr[c] - mu) * inverse * gamma[c] + beta[c]);
    }
  }
  cr_layer_norm(kRows, kLong, 1, x, gamma, beta, 1e-5, y, NULL, NULL);
  report(same_floats(y, want, kRows * kLong), "layer norm long rows", kLong);
  /* Softmax: the general path as the reference, within its tolerance. */
  static float xt[kRows * kLong], yt[kRows * kLong];
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t i = 0; i < kLong; ++i) xt[i * kRows + r] = x[r * kLong + i];
  }
  cr_softmax(1, kLong, kRows, 1.0, 0, xt, yt);
  cr_softmax(kRows, kLong, 1, 1.0, 0, x, y);
  int ok = 1;
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t i = 0; i < kLong; ++i) {
      const float w = yt[i * kRows + r];
      if (!(fabsf(y[r * kLong + i] - w) <= 1e-6f * w + 1e-37f)) ok = 0;
    }
  }
  report(ok, "softmax long rows", kLong);
}

/* ---- the fast kernels against the reference kernels ------------------- */

/* Runs reference and fast on the same inputs into y_ref and y_fast (each
 * first filled with a NaN pattern) and reports whether they agree bit for
 * bit. */
#define COMPARE_FAST(what, length, count, reference_call, fast_call)      \
  do {                                                                   \
    for (int64_t i_ = 0; i_ < (count); ++i_) y_ref[i_] = y_fast[i_] = NAN; \
    reference_call;                                                      \
    fast_call;                                                           \
    report(same_floats(y_fast, y_ref, (count)), (what), (length));       \
  } while (0)

static void test_fast_matches_reference(void) {
  enum { kRows = 3 };
  static float a[kRows * kMax], b[kRows * kMax], c[kRows * kMax], gamma[kRows * kMax],
      beta[kMax], y_ref[kRows * kMax], y_fast[kRows * kMax], stats_ref[2 * kRows],
      stats_fast[2 * kRows];
  char what[96];
  for (int l = 0; l < NUM_LENGTHS; ++l) {
    const int64_t n = kLengths[l], all = kRows * n;
    fill_values(a, all, (unsigned)l + 11u, 1);
    fill_values(b, all, (unsigned)l + 23u, 1);
    fill_values(c, all, (unsigned)l + 37u, 1);
    fill_values(gamma, all, (unsigned)l + 41u, 0);
    fill_values(beta, n, (unsigned)l + 43u, 0);
    for (int op = CR_BINARY_ADD; op <= CR_BINARY_LOGICAL_XOR; ++op) {
      const cr_binary_op o = (cr_binary_op)op;
      snprintf(what, sizeof what, "fast binary %s", kBinaryNames[op]);
      COMPARE_FAST(what, n, n, cr_binary(o, n, a, b, y_ref), cr_fast_binary(o, n, a, b, y_fast));
      for (int reverse = 0; reverse < 2; ++reverse) {
        snprintf(what, sizeof what, "fast scalar %s%s", kBinaryNames[op], reverse ? " reversed" : "");
        COMPARE_FAST(what, n, n, cr_scalar_binary(o, reverse, n, a, b[0], y_ref),
                     cr_fast_scalar_binary(o, reverse, n, a, b[0], y_fast));
      }
      /* (3, n): both rows contiguous, one repeated, one a column, strided. */
      const int64_t dims[2] = {kRows, n};
      const int64_t strides[][2][2] = {{{n, 1}, {n, 1}}, {{n, 1}, {0, 1}}, {{1, 0}, {n, 1}},
                                       {{n, 1}, {1, 0}}, {{1, kRows}, {n, 1}}};
      for (int k = 0; k < (int)(sizeof strides / sizeof strides[0]); ++k) {
        snprintf(what, sizeof what, "fast broadcast %s case %d", kBinaryNames[op], k);
        COMPARE_FAST(what, n, all,
                     cr_broadcast_binary(o, 2, dims, strides[k][0], strides[k][1], a, b, y_ref),
                     cr_fast_broadcast_binary(o, 2, dims, strides[k][0], strides[k][1], a, b,
                                              y_fast));
      }
    }
    const float *const inputs[3] = {a, b, c};
    COMPARE_FAST("fast add_n", n, n, cr_add_n(3, n, inputs, y_ref),
                 cr_fast_add_n(3, n, inputs, y_fast));
    for (int op = CR_UNARY_ABS; op <= CR_UNARY_LOGICAL_NOT; ++op) {
      snprintf(what, sizeof what, "fast unary %d", op);
      COMPARE_FAST(what, n, n, cr_unary((cr_unary_op)op, n, a, y_ref),
                   cr_fast_unary((cr_unary_op)op, n, a, y_fast));
    }
    for (int type = CR_ACT_RELU; type <= CR_ACT_MISH; ++type) {
      snprintf(what, sizeof what, "fast activation %d", type);
      COMPARE_FAST(what, n, n, cr_activation((cr_activation_type)type, n, a, y_ref),
                   cr_fast_activation((cr_activation_type)type, n, a, y_fast));
    }
    for (int type = CR_LEAKY_LEAKY; type <= CR_LEAKY_GELU; ++type) {
      snprintf(what, sizeof what, "fast leaky %d", type);
      COMPARE_FAST(what, n, n, cr_leaky_relu((cr_leaky_type)type, 0.25, n, a, y_ref),
                   cr_fast_leaky_relu((cr_leaky_type)type, 0.25, n, a, y_fast));
    }
    COMPARE_FAST("fast prelu", n, all, cr_prelu(1, kRows, n, a, gamma, 0, 1, y_ref),
                 cr_fast_prelu(1, kRows, n, a, gamma, 0, 1, y_fast));
    /* LayerNorm and softmax of finite values, rows and strided (inner 3). */
    fill_values(a, all, (unsigned)l + 53u, 0);
    COMPARE_FAST("fast layer norm rows", n, all,
                 cr_layer_norm(kRows, n, 1, a, gamma, beta, 1e-5, y_ref, stats_ref,
                               stats_ref + kRows),
                 cr_fast_layer_norm(kRows, n, 1, a, gamma, beta, 1e-5, y_fast, stats_fast,
                                    stats_fast + kRows));
    report(n == 0 || same_floats(stats_fast, stats_ref, 2 * kRows), "fast layer norm stats", n);
    COMPARE_FAST("fast layer norm strided", n, all,
                 cr_layer_norm(1, n, kRows, a, gamma, beta, 1e-5, y_ref, NULL, NULL),
                 cr_fast_layer_norm(1, n, kRows, a, gamma, beta, 1e-5, y_fast, NULL, NULL));
    COMPARE_FAST("fast softmax rows", n, all, cr_softmax(kRows, n, 1, 1.0, 0, a, y_ref),
                 cr_fast_softmax(kRows, n, 1, 1.0, 0, a, y_fast));
    COMPARE_FAST("fast log softmax strided", n, all, cr_softmax(1, n, kRows, 2.0, 1, a, y_ref),
                 cr_fast_softmax(1, n, kRows, 2.0, 1, a, y_fast));
    /* Softmax rows holding infinities and NaN take the general path. */
    fill_values(a, all, (unsigned)l + 59u, 1);
    COMPARE_FAST("fast softmax rows, specials", n, all, cr_softmax(kRows, n, 1, 1.0, 0, a, y_ref),
                 cr_fast_softmax(kRows, n, 1, 1.0, 0, a, y_fast));
  }
}

int main(void) {
  for (int op = CR_BINARY_ADD; op <= CR_BINARY_LOGICAL_XOR; ++op) {
    test_binary((cr_binary_op)op);
    test_broadcast((cr_binary_op)op);
  }
  test_activations();
  test_unary();
  test_layer_norm();
  test_softmax();
  test_long_rows();
  test_fast_matches_reference();
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
