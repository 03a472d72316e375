/*
 * cpu_ref compute kernels: plain fp32 loops with MXNet 1.x semantics.
 *
 * Kernels know nothing about the ABI, JSON or attributes: ops.c parses
 * attributes, checks shapes and calls them with valid arguments. Every
 * spatial operator works on 5-D views (N, C, D, H, W): a 1-D input is viewed
 * with D = H = 1 and a 2-D input with D = 1, and the kernel/stride/pad
 * arrays are ordered (D, H, W) with 1/1/0 in the unused leading slots.
 * num_threads >= 1 is the most threads a kernel may use.
 */
#ifndef CPU_REF_KERNELS_H_
#define CPU_REF_KERNELS_H_

#include <stdint.h>

/* Most dimensions a kernel handles: MX_ACC_MAX_NDIM, restated so that the
 * kernels need nothing from the ABI header (ops.c checks the two agree). */
#define CR_MAX_NDIM 16

typedef struct cr_conv_params {
  int64_t kernel[3];
  int64_t stride[3];
  int64_t dilate[3];
  int64_t pad[3];   /* symmetric padding before and after */
  int64_t num_group;
} cr_conv_params;

/* y[n, o, :, :, :] = bias[o] + sum over the group's input channels and the
 * kernel window of x * w, with zero padding.
 * x: (N, C, D, H, W); w: (O, C / num_group, KD, KH, KW); bias: O values or
 * NULL; y: (N, O, OD, OH, OW), sizes already computed by the caller. */
void cr_convolution(const cr_conv_params *params, const int64_t x_shape[5],
                    const float *x, const float *w, const float *bias,
                    const int64_t y_shape[5], float *y, int num_threads);

typedef enum cr_pool_type { CR_POOL_MAX, CR_POOL_AVG, CR_POOL_SUM } cr_pool_type;

typedef struct cr_pool_params {
  int64_t kernel[3];
  int64_t stride[3];
  int64_t pad[3];
  cr_pool_type type;
  int count_include_pad;
} cr_pool_params;

/* MXNet's pooling over (N, C, D, H, W) into (N, C, OD, OH, OW). For output
 * position o along one axis: start = o * stride - pad, end = min(start +
 * kernel, size + pad); the divisor for AVG is the product over axes of
 * (end - start) when count_include_pad, and of the window clipped to
 * [0, size) otherwise; values are read from the clipped window. An empty
 * clipped window yields 0 for AVG/SUM and -FLT_MAX for MAX. */
void cr_pooling(const cr_pool_params *params, const int64_t x_shape[5],
                const float *x, const int64_t y_shape[5], float *y,
                int num_threads);

/* y (batch x out_dim) = x (batch x in_dim) . w^T (w: out_dim x in_dim)
 * + bias (out_dim values, or NULL). */
void cr_fully_connected(int64_t batch, int64_t in_dim, int64_t out_dim,
                        const float *x, const float *w, const float *bias,
                        float *y, int num_threads);

typedef enum cr_activation_type {
  CR_ACT_RELU,
  CR_ACT_SIGMOID,
  CR_ACT_TANH,
  CR_ACT_SOFTRELU, /* log(1 + exp(x)), computed without overflow */
  CR_ACT_SOFTSIGN  /* x / (1 + |x|) */
} cr_activation_type;

/* y[i] = act(x[i]) for i < count; y may equal x. */
void cr_activation(cr_activation_type type, int64_t count, const float *x,
                   float *y);

/* Inference batch norm over x viewed as (outer, channels, inner):
 * y = (x - mean[c]) / sqrt(var[c] + eps) * g + beta[c], with g = 1 when
 * fix_gamma and gamma[c] otherwise. y may equal x. */
void cr_batch_norm(int64_t outer, int64_t channels, int64_t inner,
                   const float *x, const float *gamma, const float *beta,
                   const float *mean, const float *var, double eps,
                   int fix_gamma, float *y);

/* Softmax of x / temperature along the middle axis of x viewed as
 * (outer, length, inner), computed stably (max subtracted); with log set,
 * its logarithm (log_softmax), computed without taking log of a rounded
 * probability. y may equal x. */
void cr_softmax(int64_t outer, int64_t length, int64_t inner,
                double temperature, int log, const float *x, float *y);

/* ---- Element-wise arithmetic ------------------------------------------- */

/* The binary operations shared by the same-shape (elemwise_*), broadcasting
 * (broadcast_*) and scalar (_*_scalar) operators. + - * / are computed in
 * float, which rounds exactly as computing in double and rounding once
 * would; power in double. MAXIMUM is a > b ? a : b and MINIMUM a < b ? a : b,
 * MXNet's definitions (a NaN in a yields b). */
typedef enum cr_binary_op {
  CR_BINARY_ADD,
  CR_BINARY_SUB,
  CR_BINARY_MUL,
  CR_BINARY_DIV,
  CR_BINARY_POWER,
  CR_BINARY_MAXIMUM,
  CR_BINARY_MINIMUM
} cr_binary_op;

/* y[i] = a[i] op b[i] for i < count; y may equal a or b. */
void cr_binary(cr_binary_op op, int64_t count, const float *a,
               const float *b, float *y);

/* y = a op b with broadcasting: y is compact with ndim (1 .. CR_MAX_NDIM)
 * extents dims, and element (i0, ..., ik) of y combines a[sum i_d *
 * a_strides[d]] with b[sum i_d * b_strides[d]]; a stride of 0 repeats an
 * operand along that axis. y must not overlap a or b. */
void cr_broadcast_binary(cr_binary_op op, int ndim, const int64_t *dims,
                         const int64_t *a_strides, const int64_t *b_strides,
                         const float *a, const float *b, float *y);

/* y[i] = x[i] op scalar, or scalar op x[i] when reverse is set; y may equal
 * x. */
void cr_scalar_binary(cr_binary_op op, int reverse, int64_t count,
                      const float *x, float scalar, float *y);

/* y = x[0] + x[1] + ... + x[num - 1] (num >= 1 arrays of count elements),
 * added in float from left to right, as MXNet's add_n does. y may equal
 * x[0] but no other input. */
void cr_add_n(int num, int64_t count, const float *const *x, float *y);

/* One-input math functions, each computed in double and rounded to float
 * once (the host computes them the same way). */
typedef enum cr_unary_op {
  CR_UNARY_ABS,
  CR_UNARY_NEGATIVE,
  CR_UNARY_SQUARE,
  CR_UNARY_RECIPROCAL,
  CR_UNARY_SQRT,
  CR_UNARY_RSQRT,
  CR_UNARY_CBRT,
  CR_UNARY_EXP,
  CR_UNARY_EXPM1,
  CR_UNARY_LOG,
  CR_UNARY_LOG1P,
  CR_UNARY_LOG2,
  CR_UNARY_LOG10,
  CR_UNARY_SIN,
  CR_UNARY_COS,
  CR_UNARY_TANH,
  CR_UNARY_SIGMOID,
  CR_UNARY_RELU, /* NaN stays NaN, as numpy's maximum(x, 0) */
  CR_UNARY_ERF,
  CR_UNARY_SIGN,
  CR_UNARY_FLOOR,
  CR_UNARY_CEIL,
  CR_UNARY_TRUNC, /* also MXNet's fix: toward zero */
  CR_UNARY_ROUND, /* halves away from zero, C's round() */
  CR_UNARY_RINT   /* halves to even */
} cr_unary_op;

/* y[i] = f(x[i]) for i < count; y may equal x. */
void cr_unary(cr_unary_op op, int64_t count, const float *x, float *y);

/* y[i] = x[i] > high ? high : (x[i] < low ? low : x[i]), MXNet's order of
 * tests (so NaN passes through, and high wins when low > high). y may equal
 * x. */
void cr_clip(int64_t count, float low, float high, const float *x, float *y);

/* y[i] = value for i < count. */
void cr_fill(int64_t count, float value, float *y);

/* ---- Moving data -------------------------------------------------------- */

/* Copies rows blocks of width floats: block r from x + r * x_stride to
 * y + r * y_stride. Concatenation, splitting and slicing along an axis are
 * all this copy, with x and y viewed as (rows, extent along the axis *
 * elements after it). The blocks of x and y must not overlap. */
void cr_copy_rows(int64_t rows, int64_t width, const float *x,
                  int64_t x_stride, float *y, int64_t y_stride);

/* y (compact, ndim 1 .. CR_MAX_NDIM extents dims) = x read with per-axis
 * element strides x_strides: a transpose when the strides are x's own
 * permuted. y must not overlap x. */
void cr_copy_strided(int ndim, const int64_t *dims, const int64_t *x_strides,
                     const float *x, float *y);

/* ---- Reductions ---------------------------------------------------------- */

/* SUM and MEAN accumulate in double; MAX and MIN return NaN when the
 * reduced values hold one, as numpy's max and min do. */
typedef enum cr_reduce_op {
  CR_REDUCE_SUM,
  CR_REDUCE_MEAN,
  CR_REDUCE_MAX,
  CR_REDUCE_MIN
} cr_reduce_op;

/* Reduces x (compact, ndim 1 .. CR_MAX_NDIM extents dims) over the axes d
 * where reduced[d] is nonzero. y holds the kept axes in their order. An
 * empty reduction gives 0 for SUM and MEAN (MEAN divides by at least 1);
 * MAX and MIN must not be asked for one. y must not overlap x. */
void cr_reduce(cr_reduce_op op, int ndim, const int64_t *dims,
               const unsigned char *reduced, const float *x, float *y);

/* ---- Matrix products ----------------------------------------------------- */

/* For each of batch pairs: y (m x n) = A . B, where A is m x k (stored
 * k x m, i.e. transposed, when transpose_a) and B is k x n (stored n x k
 * when transpose_b); pair i starts at a + i*m*k, b + i*k*n, y + i*m*n.
 * Sums are accumulated in double, as the host's definition does. y must not
 * overlap a or b. */
void cr_matmul(int64_t batch, int64_t m, int64_t n, int64_t k,
               int transpose_a, int transpose_b, const float *a,
               const float *b, float *y, int num_threads);

/* ---- Normalisation and activations ------------------------------------- */

/* Layer normalisation of x viewed as (outer, channels, inner) along the
 * middle axis, in double: y = (x - mean) / sqrt(var + eps) * gamma[c] +
 * beta[c], with the biased variance. mean and std (outer x inner values
 * each, std = sqrt(var + eps)) are written when not NULL. y must not overlap
 * x. */
void cr_layer_norm(int64_t outer, int64_t channels, int64_t inner,
                   const float *x, const float *gamma, const float *beta,
                   double eps, float *y, float *mean, float *std);

typedef enum cr_leaky_type {
  CR_LEAKY_LEAKY, /* x > 0 ? x : slope * x (also rrelu at inference) */
  CR_LEAKY_ELU,   /* x > 0 ? x : slope * (exp(x) - 1) */
  CR_LEAKY_SELU,  /* SELU's fixed scale times elu with SELU's alpha */
  CR_LEAKY_GELU   /* 0.5 x (1 + erf(x / sqrt 2)), the exact form */
} cr_leaky_type;

/* y[i] = f(x[i]) in double for i < count; slope is used by LEAKY and ELU.
 * y may equal x. */
void cr_leaky_relu(cr_leaky_type type, double slope, int64_t count,
                   const float *x, float *y);

/* PReLU of x viewed as (outer, channels, inner): the element at (o, c, i)
 * gets slope gamma[o * outer_step + c * channel_step] (steps of 0 share a
 * slope along that axis). y may equal x. */
void cr_prelu(int64_t outer, int64_t channels, int64_t inner, const float *x,
              const float *gamma, int64_t outer_step, int64_t channel_step,
              float *y);

/* y[i, :] = weight[row(indices[i]), :] for i < count, where weight is
 * input_dim x output_dim and row(v) is v truncated toward zero and clipped
 * to [0, input_dim - 1] (NaN reads row 0). y must not overlap weight. */
void cr_embedding(int64_t count, const float *indices, int64_t input_dim,
                  int64_t output_dim, const float *weight, float *y);

#endif /* CPU_REF_KERNELS_H_ */
