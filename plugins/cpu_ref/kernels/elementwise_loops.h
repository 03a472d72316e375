/*
 * The element-wise loops that cpu_ref's reference kernels
 * (reference/kernels.c) and fast kernels (fast/elementwise.c) share: one
 * plain C body each, with no intrinsics and no ISA attributes. The
 * reference kernels call them as they are, compiled for the baseline of
 * the build; fast/elementwise.c wraps each in a function that it compiles
 * once per ISA, into which the body is inlined. They are written
 * so that the compiler vectorises them (selects by mask, a float exp,
 * partial sums in a fixed order); C11 without -ffast-math contracts and
 * reassociates nothing, so the two kernel sets compute the same values bit
 * for bit.
 *
 * Internal to the kernels: everything here is static, so each file that
 * includes it gets its own copy.
 */
#ifndef CPU_REF_ELEMENTWISE_LOOPS_H_
#define CPU_REF_ELEMENTWISE_LOOPS_H_

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* A loop body: always inlined, so that fast/elementwise.c's per-ISA
 * wrappers compile it for their ISA rather than call one baseline copy. */
#if defined(__GNUC__)
#define CR_LOOP_BODY static inline __attribute__((always_inline))
#else
#define CR_LOOP_BODY static inline
#endif

/* cond ? a : b for floats and doubles, as a select of bits by a mask: a
 * loop using it vectorises for AVX2 too. GCC does not if-convert a ?:
 * between floating-point values without masked vector instructions
 * (AVX-512): it keeps a branch (the compare may trap under
 * -ftrapping-math) and the loop stays scalar. */
static inline double select_double(int cond, double a, double b) {
  uint64_t a_bits, b_bits;
  memcpy(&a_bits, &a, sizeof a_bits);
  memcpy(&b_bits, &b, sizeof b_bits);
  const uint64_t mask = (uint64_t)0 - (uint64_t)(cond != 0); /* all ones or 0 */
  const uint64_t bits = (a_bits & mask) | (b_bits & ~mask);
  double result;
  memcpy(&result, &bits, sizeof result);
  return result;
}

static inline float select_float(int cond, float a, float b) {
  uint32_t a_bits, b_bits;
  memcpy(&a_bits, &a, sizeof a_bits);
  memcpy(&b_bits, &b, sizeof b_bits);
  const uint32_t mask = (uint32_t)0 - (uint32_t)(cond != 0); /* all ones or 0 */
  const uint32_t bits = (a_bits & mask) | (b_bits & ~mask);
  float result;
  memcpy(&result, &bits, sizeof result);
  return result;
}

/* exp(x) in float to about 1 ulp, branch-free so that the loops calling it
 * vectorise (libm's exp is a call per element, the slowest part of softmax).
 * x is clamped to [-87, 88], where exp stays a normal float: below, it
 * gives exp(-87) ~ 1.6e-38 instead of a subnormal or 0. NaN stays NaN.
 * x = n ln2 + r with |r| <= ln2 / 2; exp(r) by its Taylor series to r^7
 * (truncation below 2.1e-8); 2^n put together in the exponent bits. Adding
 * 1.5 * 2^23 rounds x / ln2 to the integer n held in the low bits, with no
 * float-to-int conversion (undefined for NaN). */
static inline float exp_float(float x) {
  const float kShifter = 12582912.0f; /* 1.5 * 2^23, bits 0x4B400000 */
  x = select_float(x > 88.0f, 88.0f, x);
  x = select_float(x < -87.0f, -87.0f, x);
  const float t = x * 1.44269504f + kShifter;
  const float n = t - kShifter;
  float r = x - n * 0.693145751953125f; /* ln2's high bits: n * them is exact */
  r = r - n * 1.428606765330187e-06f;   /* ln2's low bits */
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  union { float f; uint32_t u; } bits = {t}, scale;
  scale.u = (bits.u - 0x4B400000u + 127u) << 23;
  return p * scale.f;
}

/* exp(x) in float for sigmoid, SiLU, softmax and GELU, within 1.5e-7 relative for
 * |x| <= 87, with half the operations of exp_float: the same reduction
 * (x = n ln2 + r, clamp to [-87, 88], NaN kept) by fused multiply-adds
 * (fmaf, one rounding each, the same value on every ISA: an instruction
 * where the CPU has FMA, glibc's correctly rounded fmaf elsewhere) and
 * exp(r) by a degree-6 polynomial fitted for the least relative error on
 * |r| <= ln2 / 2 (1.9e-9 in exact arithmetic; Taylor's needs degree 7).
 * The swish loop over 240 x 28 x 28 values on AVX-512: 97 -> 56 us;
 * softmax's exp pass over 12 x 197 rows of 197: 222 -> 143 us. The loops
 * calling it run in clones with FMA (fast/elementwise.c). */
static inline float exp_sigmoid_float(float x) {
  const float kShifter = 12582912.0f; /* 1.5 * 2^23, bits 0x4B400000 */
  x = select_float(x > 88.0f, 88.0f, x);
  x = select_float(x < -87.0f, -87.0f, x);
  const float t = fmaf(x, 1.44269504f, kShifter);
  const float n = t - kShifter;
  float r = fmaf(n, -0.693145751953125f, x); /* ln2's high bits: exact */
  r = fmaf(n, -1.428606765330187e-06f, r);   /* ln2's low bits */
  float p = 1.3836845755577087e-03f;
  p = fmaf(p, r, 8.374815806746483e-03f);
  p = fmaf(p, r, 4.166822507977486e-02f);
  p = fmaf(p, r, 1.6666419804096222e-01f);
  p = fmaf(p, r, 4.9999991059303284e-01f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  union { float f; uint32_t u; } bits = {t}, scale;
  scale.u = (bits.u - 0x4B400000u + 127u) << 23;
  return p * scale.f;
}

/* 1 / (1 + exp(-x)) in float with exp_sigmoid_float, so that the loops
 * calling it vectorise (libm's exp per element made sigmoid the largest
 * step of EfficientNet-B0: 33 of 60 ms at batch 1). Within 2 ulp of the
 * double formula for |x| <= 87; below x = -88 the result stays near 6e-39
 * (the clamp) where the exact value is smaller; NaN stays NaN. The fast
 * kernels run the loops calling it in clones with FMA (fast/elementwise.c). */
static inline float sigmoid_float(float x) { return 1.0f / (1.0f + exp_sigmoid_float(-x)); }

/* erfc(z) for z >= 0 in float: the Chebyshev fit of Numerical Recipes
 * (erfcc, relative error below 1.2e-7 in exact arithmetic), by fused
 * multiply-adds (fmaf: one rounding each, the same value on every ISA)
 * with exp_sigmoid_float; float rounding of the exponent adds a relative
 * error of about z^2 * 6e-8. 26 operations where separate multiplies and
 * adds with exp_float were 46 (within 1.2e-6 relative of that form): GELU
 * over 197 x 1536 values on AVX-512, 313 -> 163 us. */
static inline float erfc_nonnegative_float(float z) {
  const float t = 1.0f / fmaf(0.5f, z, 1.0f);
  float p = 0.17087277f;
  p = fmaf(p, t, -0.82215223f);
  p = fmaf(p, t, 1.48851587f);
  p = fmaf(p, t, -1.13520398f);
  p = fmaf(p, t, 0.27886807f);
  p = fmaf(p, t, -0.18628806f);
  p = fmaf(p, t, 0.09678418f);
  p = fmaf(p, t, 0.37409196f);
  p = fmaf(p, t, 1.00002368f);
  p = fmaf(p, t, -1.26551223f);
  return t * exp_sigmoid_float(fmaf(-z, z, p));
}

/* GELU, 0.5 x (1 + erf(x / sqrt 2)), in float: 1 + erf(v) is erfc(-v)
 * for v < 0 and 2 - erfc(v) otherwise, so negative inputs keep their
 * relative precision. Measured against 0.5 x erfc(-x / sqrt 2) in double:
 * within 1.9e-6 relative for |x| <= 5, growing with x^2 beyond (1.4e-5
 * at x = -11.6), and at most 3.9e-7 absolute; below about x = -13 the result stays near 1e-38
 * (the exponential's clamp) where the exact value is smaller. Made of
 * fmaf: the fast kernels run it in clones with FMA. */
CR_LOOP_BODY void gelu_float(int64_t count, const float *x, float *y) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = x[i] * 0.70710678118654752f;
    /* fabsf(v) is v < 0 ? -v : v but for -0, whose erfc is that of +0. */
    const float e = erfc_nonnegative_float(fabsf(v));
    const float one_plus_erf = select_float(v < 0.0f, e, 2.0f - e);
    y[i] = 0.5f * x[i] * one_plus_erf;
  }
}

/* sum_double and sum_squares_double keep this many interleaved partial
 * sums (one AVX-512 vector of doubles), added pairwise at the end: a fixed
 * order, whatever the ISA. (16, two chains of vector adds, made LayerNorm
 * rows of 128 about 8% faster and softmax rows of 16 slower.) */
enum { kPartialSums = 8 };

static inline double add_partials(const double partial[kPartialSums]) {
  return ((partial[0] + partial[4]) + (partial[2] + partial[6])) +
         ((partial[1] + partial[5]) + (partial[3] + partial[7]));
}

/* Sum of x[0..count) in double, element i going to partial sum
 * i % kPartialSums; vectorised. */
static inline double sum_double(const float *x, int64_t count) {
  double partial[kPartialSums] = {0};
  int64_t i = 0;
  for (; i + kPartialSums <= count; i += kPartialSums) {
#pragma GCC unroll 8
    for (int j = 0; j < kPartialSums; ++j) partial[j] += x[i + j];
  }
  /* The last count % 8 values, at constant indices (adding 0.0 to a
   * partial sum changes nothing: a sum started at +0 is never -0), so that
   * the partial sums stay in registers: a loop storing to partial[j] and
   * add_partials reading the array back stalled on store forwarding. */
  const int64_t rest = count - i;
  if (rest > 0) {
#pragma GCC unroll 8
    for (int j = 0; j < kPartialSums - 1; ++j) partial[j] += j < rest ? x[i + j] : 0.0f;
  }
  return add_partials(partial);
}

/* Sum of (x[i] - shift)^2 over x[0..count), in the order of sum_double.
 * (One function for both sums, with a flag tested per element, did not
 * vectorise.) */
static inline double sum_squares_double(const float *x, int64_t count, double shift) {
  double partial[kPartialSums] = {0};
  int64_t i = 0;
  for (; i + kPartialSums <= count; i += kPartialSums) {
#pragma GCC unroll 8
    for (int j = 0; j < kPartialSums; ++j) {
      const double d = x[i + j] - shift;
      partial[j] += d * d;
    }
  }
  const int64_t rest = count - i; /* as in sum_double */
  if (rest > 0) {
#pragma GCC unroll 8
    for (int j = 0; j < kPartialSums - 1; ++j) {
      const double d = j < rest ? x[i + j] - shift : 0.0;
      partial[j] += d * d;
    }
  }
  return add_partials(partial);
}

static inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The activations that are a compare and select (relu) or a few float
 * operations (softsign), one loop each, so that they vectorise: the same
 * expressions as activate(), so the same results. Returns 0, having done
 * nothing, for the others. */
CR_LOOP_BODY int activation_simple(cr_activation_type type, int64_t count,
                                   const float *x, float *y) {
  switch (type) {
    case CR_ACT_RELU:
      for (int64_t i = 0; i < count; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i]; /* NaN stays NaN */
      return 1;
    case CR_ACT_SOFTSIGN:
      for (int64_t i = 0; i < count; ++i) y[i] = x[i] / (1.0f + fabsf(x[i]));
      return 1;
    default:
      return 0;
  }
}

/* Softmax (or with log set, log-softmax) of the `length` values x[0],
 * x[stride], ... Subtracting the largest scaled value keeps exp from
 * overflowing; taking that maximum after dividing by the temperature keeps
 * this right for negative temperatures too. The sum is in double so long
 * rows do not lose the small terms. Each y[i] is written only after x[i] is
 * last read, so y may equal x. */
static inline void softmax_strided(int64_t length, int64_t stride,
                            double temperature, int log_output,
                            const float *x, float *y) {
  const int scaled = temperature != 1.0;
  double max_scaled = -INFINITY;
  for (int64_t i = 0; i < length; ++i) {
    const double v = scaled ? x[i * stride] / temperature : x[i * stride];
    max_scaled = fmax(max_scaled, v);
  }
  if (log_output) {
    double sum = 0.0;
    for (int64_t i = 0; i < length; ++i) {
      const double v = scaled ? x[i * stride] / temperature : x[i * stride];
      sum += exp(v - max_scaled);
    }
    /* log_softmax = shifted - log(sum): exact for the largest entries,
     * where log(softmax) of a rounded probability would not be. */
    const double log_sum = log(sum);
    for (int64_t i = 0; i < length; ++i) {
      const double v = scaled ? x[i * stride] / temperature : x[i * stride];
      y[i * stride] = (float)(v - max_scaled - log_sum);
    }
    return;
  }
  /* exp once per element, kept in y (as float) until the sum is known. x
   * is read before y is written, so y may equal x. */
  double sum = 0.0;
  for (int64_t i = 0; i < length; ++i) {
    const double v = scaled ? x[i * stride] / temperature : x[i * stride];
    const double e = exp(v - max_scaled);
    sum += e;
    y[i * stride] = (float)e;
  }
  const double inverse_sum = 1.0 / sum;
  for (int64_t i = 0; i < length; ++i) {
    y[i * stride] = (float)(y[i * stride] * inverse_sum);
  }
}

/* The largest of x[0..count) (-infinity for none), skipping NaNs as
 * `x > max ? x : max` does, in 16 interleaved partial maxima so that it
 * vectorises: that compare-and-select of floats is what the vector max
 * instructions compute (maxps returns its second operand when either is
 * NaN), so GCC turns it into them for AVX2 and AVX-512 alike (6 us against
 * 30 us for a select by bit masks, over 512 rows of 128). The last count %
 * 16 values go through the same 16-wide loop from a copy padded with
 * -infinity (a scalar remainder loop was a third of a row of 197). The
 * maximum of the non-NaN values does not depend on the order, except that
 * between 0 and -0 whichever comes first wins, which softmax_rows does not
 * notice (x - 0 and x - -0 are equal for x != 0, and exp of either zero is
 * 1). */
CR_LOOP_BODY float max_float(const float *x, int64_t count) {
  float partial[16];
  for (int j = 0; j < 16; ++j) partial[j] = -INFINITY;
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    for (int j = 0; j < 16; ++j) {
      const float v = x[i + j];
      partial[j] = v > partial[j] ? v : partial[j];
    }
  }
  if (i < count) {
    float rest[16];
    for (int j = 0; j < 16; ++j) rest[j] = -INFINITY;
    memcpy(rest, x + i, (size_t)(count - i) * sizeof *rest);
    for (int j = 0; j < 16; ++j) partial[j] = rest[j] > partial[j] ? rest[j] : partial[j];
  }
  /* Halves folded onto halves: four dependent steps, where one running
   * maximum over the 16 was sixteen (a tenth of softmax's time over rows of
   * 197). */
  for (int half = 8; half >= 1; half /= 2) {
    for (int j = 0; j < half; ++j) {
      partial[j] = partial[j + half] > partial[j] ? partial[j + half] : partial[j];
    }
  }
  return partial[0];
}

/* y[i] = exp(x[i] - max) (exp_sigmoid_float), 0 where x[i] - max < -87
 * (the exponential's clamp),
 * for i < count: whole vectors of 16 in one loop, the last count % 16
 * values through the same expression from a copy padded with -infinity (a
 * scalar remainder loop, 5 of a row of 197, was a third of the time). x
 * may equal y. */
CR_LOOP_BODY void exp_shifted(const float *x, int64_t count, float max, float *y) {
  const int64_t whole = count / 16 * 16;
  for (int64_t i = 0; i < whole; ++i) {
    const float shifted = x[i] - max;
    y[i] = select_float(shifted < -87.0f, 0.0f, exp_sigmoid_float(shifted));
  }
  if (whole < count) {
    float rest[16], e[16];
    for (int j = 0; j < 16; ++j) rest[j] = -INFINITY;
    memcpy(rest, x + whole, (size_t)(count - whole) * sizeof *rest);
    for (int j = 0; j < 16; ++j) {
      const float shifted = rest[j] - max;
      e[j] = select_float(shifted < -87.0f, 0.0f, exp_sigmoid_float(shifted));
    }
    memcpy(y + whole, e, (size_t)(count - whole) * sizeof *e);
  }
}

/* Rows handled together by softmax_rows, when they are no longer than
 * kSoftmaxBlockedMax values (longer rows are not latency-bound, and a
 * block of them would not stay in cache between the passes). */
enum { kSoftmaxBlock = 16, kSoftmaxBlockedMax = 512 };

/* Softmax of `rows` contiguous rows of `length` at temperature 1, in three
 * passes over a row: its largest value; exp in float (exp_sigmoid_float) stored
 * and summed in double in sum_double's 8 partial sums (so in a different
 * order than softmax_strided's left-to-right sum: the results can differ
 * from it in the last bit); the division. Each pass vectorises, the last
 * values of a row included, and each is taken for a block of rows before
 * the next: the rows of a model's attention are short (16 to 200 values),
 * and one row's max, exp, sum and division are a chain of dependent
 * latencies that rows side by side overlap. (Four passes, the sum apart
 * and the remainders scalar, took 230 us for ViT-S/16's 1182 rows of 197.)
 * Probabilities below FLT_MIN are flushed to 0, and
 * so are the scores more than 87 below the row's largest, where the exp
 * clamps (their exact values are below 1.6e-38): otherwise each masked or
 * far-off score gave about 1.6e-38 divided by the sum, a subnormal or a
 * value far above the exact one, and a product reading subnormals runs
 * through the CPU's microcode assists (an attention's probabilities times
 * values, 8 x 12 x 128 x 128 by 128 x 64: 2.9 ms on normals, 310 ms with
 * every other probability subnormal). Row r of x is read before row r of y
 * is written, and no later, so y may equal x. */
CR_LOOP_BODY void softmax_rows(int64_t rows, int64_t length, const float *x,
                               float *y) {
  const int64_t block = length <= kSoftmaxBlockedMax ? kSoftmaxBlock : 1;
  for (int64_t first = 0; first < rows; first += block) {
    const int n = (int)min_i64(block, rows - first);
    const float *xs = x + first * length;
    float *ys = y + first * length;
    float max[kSoftmaxBlock], scale[kSoftmaxBlock];
    for (int r = 0; r < n; ++r) max[r] = max_float(xs + r * length, length);
    for (int r = 0; r < n; ++r) {
      const float *xr = xs + r * length;
      float *yr = ys + r * length;
      if (!(max[r] > -INFINITY && max[r] < INFINITY)) {
        /* NaN, infinities or an empty row: the general path. */
        softmax_strided(length, 1, 1.0, 0, xr, yr);
        continue;
      }
      exp_shifted(xr, length, max[r], yr);
    }
    for (int r = 0; r < n; ++r) {
      scale[r] = max[r] > -INFINITY && max[r] < INFINITY
                     ? (float)(1.0 / sum_double(ys + r * length, length))
                     : 1.0f;
    }
    for (int r = 0; r < n; ++r) {
      float *yr = ys + r * length;
      const float s = scale[r];
      for (int64_t i = 0; i < length; ++i) {
        const float v = yr[i] * s;
        yr[i] = select_float(v < FLT_MIN, 0.0f, v);
      }
    }
  }
}

/* The operations that are one float operation, or a compare and select,
 * per element: + - * / maximum minimum. binary_simple and
 * scalar_binary_simple run them as one plain loop per operation (the switch
 * on op outside it), which GCC vectorises; each element is the expression
 * apply_binary computes, so results are bit-identical to it (a vector
 * divide rounds as the scalar one; no reciprocal is taken). The others
 * (power, mod, hypot in double, the predicates) stay scalar loops over
 * apply_binary. */
static inline int is_simple_binary(cr_binary_op op) {
  return op == CR_BINARY_ADD || op == CR_BINARY_SUB || op == CR_BINARY_MUL ||
         op == CR_BINARY_DIV || op == CR_BINARY_MAXIMUM || op == CR_BINARY_MINIMUM;
}

/* y[i] = (expr) for i < count, expr reading element i. */
#define ELEMENTS(count, y, expr) \
  for (int64_t i = 0; i < (count); ++i) (y)[i] = (expr)

/* y[i] = a[i] op b[i] for a simple op (is_simple_binary). */
CR_LOOP_BODY void binary_simple(cr_binary_op op, int64_t count, const float *a,
                                const float *b, float *y) {
  switch (op) {
    case CR_BINARY_ADD:
      ELEMENTS(count, y, a[i] + b[i]);
      return;
    case CR_BINARY_SUB:
      ELEMENTS(count, y, a[i] - b[i]);
      return;
    case CR_BINARY_MUL:
      ELEMENTS(count, y, a[i] * b[i]);
      return;
    case CR_BINARY_DIV:
      ELEMENTS(count, y, a[i] / b[i]);
      return;
    case CR_BINARY_MAXIMUM:
      ELEMENTS(count, y, a[i] > b[i] ? a[i] : b[i]);
      return;
    case CR_BINARY_MINIMUM:
      ELEMENTS(count, y, a[i] < b[i] ? a[i] : b[i]);
      return;
    default:
      return; /* not a simple op: callers never pass one */
  }
}

/* y[i] = x[i] op s, or s op x[i] when reverse, for a simple op. */
/* Whether s is +-2^e with 2^-e a normal float: dividing by s is then
 * exactly multiplying by 1 / s. */
static inline int is_power_of_two_divisor(float s) {
  int exponent = 0;
  return isnormal(s) && fabsf(frexpf(s, &exponent)) == 0.5f && isnormal(1.0f / s);
}

CR_LOOP_BODY void scalar_binary_simple(cr_binary_op op, int reverse, int64_t count,
                                       const float *x, float s, float *y) {
  if (!reverse) {
    switch (op) {
      case CR_BINARY_ADD:
        ELEMENTS(count, y, x[i] + s);
        return;
      case CR_BINARY_SUB:
        ELEMENTS(count, y, x[i] - s);
        return;
      case CR_BINARY_MUL:
        ELEMENTS(count, y, x[i] * s);
        return;
      case CR_BINARY_DIV:
        if (is_power_of_two_divisor(s)) {
          /* x / 2^e and x * 2^-e are the same real number, both rounded
           * once: the same float, for every x. A multiply is several times
           * the throughput of a divide (attention's scores / sqrt(16)). */
          const float inverse = 1.0f / s;
          ELEMENTS(count, y, x[i] * inverse);
        } else {
          ELEMENTS(count, y, x[i] / s);
        }
        return;
      case CR_BINARY_MAXIMUM:
        ELEMENTS(count, y, x[i] > s ? x[i] : s);
        return;
      case CR_BINARY_MINIMUM:
        ELEMENTS(count, y, x[i] < s ? x[i] : s);
        return;
      default:
        return;
    }
  }
  switch (op) {
    case CR_BINARY_ADD:
      ELEMENTS(count, y, s + x[i]);
      return;
    case CR_BINARY_SUB:
      ELEMENTS(count, y, s - x[i]);
      return;
    case CR_BINARY_MUL:
      ELEMENTS(count, y, s * x[i]);
      return;
    case CR_BINARY_DIV:
      ELEMENTS(count, y, s / x[i]);
      return;
    case CR_BINARY_MAXIMUM:
      ELEMENTS(count, y, s > x[i] ? s : x[i]);
      return;
    case CR_BINARY_MINIMUM:
      ELEMENTS(count, y, s < x[i] ? s : x[i]);
      return;
    default:
      return;
  }
}

/* Walks the leading ndim axes of an index space in row-major order, keeping
 * the element offsets of two strided operands; the kernels below run their
 * innermost axis as a plain loop and use this for the axes around it. */
typedef struct cr_walker {
  int ndim;
  int64_t dims[CR_MAX_NDIM];
  int64_t strides[2][CR_MAX_NDIM];
  int64_t index[CR_MAX_NDIM];
  int64_t offset[2];
} cr_walker;

static inline void walker_init(cr_walker *w, int ndim, const int64_t *dims,
                        const int64_t *strides0, const int64_t *strides1) {
  w->ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    w->dims[d] = dims[d];
    w->strides[0][d] = strides0[d];
    w->strides[1][d] = strides1 != NULL ? strides1[d] : 0;
    w->index[d] = 0;
  }
  w->offset[0] = w->offset[1] = 0;
}

/* Advances to the next position (an odometer: the last axis turns fastest).
 * Past the last position the offsets return to 0, which callers never use:
 * they count positions instead. */
static inline void walker_next(cr_walker *w) {
  for (int d = w->ndim - 1; d >= 0; --d) {
    w->offset[0] += w->strides[0][d];
    w->offset[1] += w->strides[1][d];
    if (++w->index[d] < w->dims[d]) return;
    w->offset[0] -= w->strides[0][d] * w->dims[d];
    w->offset[1] -= w->strides[1][d] * w->dims[d];
    w->index[d] = 0;
  }
}

static inline int64_t count_of(int ndim, const int64_t *dims) {
  int64_t count = 1;
  for (int d = 0; d < ndim; ++d) count *= dims[d];
  return count;
}

/* pi to double precision, the constant numpy's degrees and radians use. */
static const double kPi = 3.141592653589793238462643383279502884;

/* y[i] = (float)(expr) for i < count, expr reading the double v = x[i]. */
#define UNARY_ELEMENTS(expr)                  \
  for (int64_t i = 0; i < count; ++i) {       \
    const double v = x[i];                    \
    y[i] = (float)(expr);                     \
  }

/* The unary operations that are a few double operations or selects per
 * element, one loop each (the switch outside) so that they vectorise: the
 * expressions of apply_unary, so the same results. Returns 0, having done
 * nothing, for the others (libm calls per element). */
CR_LOOP_BODY int unary_simple(cr_unary_op op, int64_t count, const float *x,
                              float *y) {
  switch (op) {
    case CR_UNARY_ABS:
      UNARY_ELEMENTS(fabs(v));
      return 1;
    case CR_UNARY_NEGATIVE:
      UNARY_ELEMENTS(-v);
      return 1;
    case CR_UNARY_SQUARE:
      UNARY_ELEMENTS(v * v);
      return 1;
    case CR_UNARY_RECIPROCAL:
      UNARY_ELEMENTS(1.0 / v);
      return 1;
    case CR_UNARY_RELU:
      UNARY_ELEMENTS(v < 0.0 ? 0.0 : v);
      return 1;
    case CR_UNARY_SIGN:
      UNARY_ELEMENTS(v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : v));
      return 1;
    case CR_UNARY_DEGREES:
      UNARY_ELEMENTS(v * (180.0 / kPi));
      return 1;
    case CR_UNARY_RADIANS:
      UNARY_ELEMENTS(v * (kPi / 180.0));
      return 1;
    case CR_UNARY_LOGICAL_NOT:
      UNARY_ELEMENTS(v == 0.0 ? 1.0 : 0.0);
      return 1;
    case CR_UNARY_SIGMOID:
      for (int64_t i = 0; i < count; ++i) y[i] = sigmoid_float(x[i]);
      return 1;
    default:
      return 0;
  }
}

/* ONNX HardSigmoid, clamp(alpha x + beta, 0, 1) (swish 0), and HardSwish,
 * x clamp(x / 6 + 0.5, 0, 1) (swish 1), in float (the operator's scalar
 * code, ops_onnx_elementwise.c, computes in double: within 2 ulp of it),
 * x / 6 as x times 1/6 and the clamp by selects, so that the loop
 * vectorises without divisions (in double with x / 6, MobileNetV3's
 * HardSwish steps took 1.27 ms per forward; in float 0.20). NaN is kept. */
CR_LOOP_BODY void hard_sigmoid_loop(int swish, float alpha, float beta, int64_t count,
                                    const float *x, float *y) {
  if (swish) {
    for (int64_t i = 0; i < count; ++i) {
      const float v = x[i] * (1.0f / 6.0f) + 0.5f;
      float c = select_float(v < 0.0f, 0.0f, v);
      c = select_float(c > 1.0f, 1.0f, c);
      y[i] = x[i] * c;
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    const float v = alpha * x[i] + beta;
    float c = select_float(v < 0.0f, 0.0f, v);
    y[i] = select_float(c > 1.0f, 1.0f, c);
  }
}

/* x * sigmoid(x) (SiLU) as x / (1 + exp(-x)), exp as sigmoid_float's: one
 * rounding less than the sigmoid step followed by the multiply, in one
 * pass. Large negative x gives -0 or a tiny negative value, NaN stays NaN,
 * +inf gives +inf. */
CR_LOOP_BODY void swish_loop(int64_t count, const float *x, float *y) {
  for (int64_t i = 0; i < count; ++i) y[i] = x[i] / (1.0f + exp_sigmoid_float(-x[i]));
}

/* Rows handled together by layer_norm_rows, when they are no longer than
 * kLayerNormBlockedMax values (longer rows are not latency-bound, and a
 * block of them would not stay in cache between the passes). */
enum { kLayerNormBlock = 8, kLayerNormBlockedMax = 1024 };

/* LayerNorm of `rows` contiguous rows of `channels` values: moments() with
 * the sums vectorised (sum_double's order). Each step is taken for a block
 * of rows before the next: one row's sums are a chain of dependent vector
 * adds, and the next rows' chains overlap it. Each row's arithmetic is the
 * same as taken one row at a time. mean and sigma get the rows' values. */
CR_LOOP_BODY void layer_norm_rows(int64_t rows, int64_t channels, const float *x,
                                  const float *gamma, const float *beta, double eps,
                                  float *y, float *mean, float *sigma) {
  const int64_t block = channels <= kLayerNormBlockedMax ? kLayerNormBlock : 1;
  for (int64_t first = 0; first < rows; first += block) {
    const int n = (int)min_i64(block, rows - first);
    const float *xs = x + first * channels;
    float *ys = y + first * channels;
    double mu[kLayerNormBlock], s[kLayerNormBlock];
    for (int r = 0; r < n; ++r) mu[r] = sum_double(xs + r * channels, channels) / (double)channels;
    for (int r = 0; r < n; ++r) {
      const double variance =
          sum_squares_double(xs + r * channels, channels, mu[r]) / (double)channels;
      s[r] = sqrt(variance + eps);
    }
    for (int r = 0; r < n; ++r) {
      const float *xr = xs + r * channels;
      float *yr = ys + r * channels;
      const double m = mu[r], inverse = 1.0 / s[r];
      for (int64_t c = 0; c < channels; ++c) {
        yr[c] = (float)((xr[c] - m) * inverse * gamma[c] + beta[c]);
      }
      if (mean != NULL) mean[first + r] = (float)m;
      if (sigma != NULL) sigma[first + r] = (float)s[r];
    }
  }
}

/* LeakyReLU's leaky case as one loop that vectorises: leaky_value's
 * v > 0 ? v : v * slope in double, written as v times a factor, 1 or
 * slope (v * 1 is v exactly, NaN included), so the same results. The
 * factor is picked by select_double: GCC turns a ?: between the two back
 * into a branch around the multiply, which it then does not if-convert
 * (-ftrapping-math), and the loop stays scalar. */
CR_LOOP_BODY void leaky_loop(double slope, int64_t count, const float *x, float *y) {
  for (int64_t i = 0; i < count; ++i) {
    const double v = x[i];
    y[i] = (float)(v * select_double(v > 0.0, 1.0, slope));
  }
}

#endif /* CPU_REF_ELEMENTWISE_LOOPS_H_ */
