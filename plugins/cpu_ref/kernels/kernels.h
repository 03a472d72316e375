/*
 * cpu_ref kernels with MXNet 1.x semantics: the interface of both kernel
 * sets. kernels/reference/ holds the plain loops (one thread, no
 * intrinsics): the only kernels of most operators, and in reference.h the
 * reference convolution, pooling, FullyConnected and products that
 * configure(kernels="reference") selects. kernels/fast/ holds the blocked,
 * vectorised and threaded kernels: a packed, register-blocked GEMM with
 * run-time CPU dispatch (gemm.c, dense.c, conv_blocked.c; see
 * docs/cpu_ref_performance.md), pooling, deconvolution, copies and the
 * element-wise loops of elementwise_loops.h built once per ISA
 * (cr_fast_*).
 * The compute kernels work on float32; float16 data reaches them widened to
 * float32 (see cr_run_float32 in op_impl.h). The data kernels
 * (reference/data.c) convert between dtypes and move elements of any dtype by
 * their size.
 *
 * Kernels know nothing about the ABI, JSON or attributes: ops/ parses
 * attributes, checks shapes and calls them with valid arguments. Every
 * spatial operator works on 5-D views (N, C, D, H, W): a 1-D input is viewed
 * with D = H = 1 and a 2-D input with D = 1, and the kernel/stride/pad
 * arrays are ordered (D, H, W) with 1/1/0 in the unused leading slots.
 * num_threads >= 1 is the most threads a kernel may use.
 */
#ifndef CPU_REF_KERNELS_H_
#define CPU_REF_KERNELS_H_

#include <stddef.h>
#include <stdint.h>

#include "kernel_types.h"

/* Most dimensions a kernel handles: MX_ACC_MAX_NDIM, restated so that the
 * kernels need nothing from the ABI header (ops.c checks the two agree). */
#define CR_MAX_NDIM 16

/* Element types: the TensorDType values of mxnet_acc.h, restated for the
 * same reason (ops.c checks that they agree). */
typedef enum cr_dtype {
  CR_FLOAT32 = 0,
  CR_FLOAT64 = 1,
  CR_FLOAT16 = 2,
  CR_UINT8 = 3,
  CR_INT32 = 4,
  CR_INT8 = 5,
  CR_INT64 = 6
} cr_dtype;

/* Which kernels run an operator (configure key kernels, ACC_CPU_REF_KERNELS):
 * the fast ones (kernels/fast/: blocked, vectorised, threaded; the default)
 * or the reference ones (kernels/reference/: one plain loop per operator,
 * the executable definition of its semantics). Operators with one kernel
 * run their reference kernel in both modes. */
typedef enum cr_kernels { CR_KERNELS_FAST = 0, CR_KERNELS_REFERENCE = 1 } cr_kernels;

typedef struct cr_conv_params {
  int64_t kernel[3];
  int64_t stride[3];
  int64_t dilate[3];
  int64_t pad[3];   /* symmetric padding before and after */
  int64_t num_group;
} cr_conv_params;

/* What a producing kernel (convolution, FullyConnected) applies to its
 * outputs after the bias, in symbolic mode's fused steps: the residual
 * (a tensor of the output's shape, or NULL) is added, then act. */
typedef struct cr_fusion {
  const float *residual;
  cr_epilogue_act act;
  float clip_low, clip_high; /* act == CR_EPI_CLIP */
} cr_fusion;

/* y[n, o, :, :, :] = bias[o] + sum over the group's input channels and the
 * kernel window of x * w, with zero padding.
 * x: (N, C, D, H, W); w: (O, C / num_group, KD, KH, KW); bias: O values or
 * NULL; y: (N, O, OD, OH, OW), sizes already computed by the caller.
 * Computed as a GEMM of w by an im2col view of x (fast/dense.c), or
 * directly when each group sees one input channel (depthwise). Returns 0,
 * or -1 when scratch memory cannot be had. */
int cr_convolution(const cr_conv_params *params, const int64_t x_shape[5],
                   const float *x, const float *w, const float *bias,
                   const int64_t y_shape[5], float *y, int num_threads);

/* 1 when the convolution runs directly (no GEMM, no packed weights). */
int cr_conv_is_direct(const cr_conv_params *params, int64_t group_channels);
/* Floats the filters w (outputs x group_channels x taps) take packed for
 * the GEMM, or for the channel-blocked kernels where those apply
 * (conv_blocked.h) (0 for a direct convolution or on overflow), and the
 * packing; cr_convolution_fused tells the two layouts apart by the same
 * rule. */
size_t cr_conv_packed_floats(const cr_conv_params *params, int64_t outputs,
                             int64_t group_channels);
cr_isa cr_conv_pack(const cr_conv_params *params, int64_t outputs,
                    int64_t group_channels, const float *w, float *packed);

/* cr_convolution with the filters also given packed by cr_conv_pack under
 * packed_isa (or NULL), and a fused epilogue (or NULL). */
int cr_convolution_fused(const cr_conv_params *params, const int64_t x_shape[5],
                         const float *x, const float *w, const float *packed_w,
                         cr_isa packed_isa, const float *bias,
                         const cr_fusion *fusion, const int64_t y_shape[5],
                         float *y, int num_threads);
/* cr_convolution_fused writing image n of y at y + n * y_image_stride
 * (the slice of a Concat's output along the channels, say; 0: images one
 * after the other). fusion's residual stays dense. */
int cr_convolution_into(const cr_conv_params *params, const int64_t x_shape[5],
                        const float *x, const float *w, const float *packed_w,
                        cr_isa packed_isa, const float *bias, const cr_fusion *fusion,
                        const int64_t y_shape[5], float *y, int64_t y_image_stride,
                        int num_threads);

/* The transposed convolution (MXNet's Deconvolution) with the same
 * parameters: y[n, o, p] = bias[o] + the sum over the input channels c of
 * o's group and the kernel taps k with p + pad = i * stride + k * dilate
 * (0 <= i < input extent, per axis) of x[n, c, i] * w[c, o % (O / groups),
 * k], accumulated in double and rounded once. x: (N, C, D, H, W); w: (C,
 * O / num_group, KD, KH, KW); bias: O values or NULL; y: (N, O, OD, OH, OW),
 * sizes computed by the caller (output positions past the transposed
 * convolution's extent, made by adj, get the bias alone). */
void cr_deconvolution(const cr_conv_params *params, const int64_t x_shape[5],
                      const float *x, const float *w, const float *bias,
                      const int64_t y_shape[5], float *y, int num_threads);

typedef enum cr_pool_type {
  CR_POOL_MAX,
  CR_POOL_AVG,
  CR_POOL_SUM,
  CR_POOL_LP /* (sum of x^p) ^ (1/p) for p = p_value, 1 to 3, in double */
} cr_pool_type;

typedef struct cr_pool_params {
  int64_t kernel[3];
  int64_t stride[3];
  int64_t pad[3];
  cr_pool_type type;
  int count_include_pad;
  int p_value; /* LP only: 1, 2 or 3 */
} cr_pool_params;

/* MXNet's pooling over (N, C, D, H, W) into (N, C, OD, OH, OW). For output
 * position o along one axis: start = o * stride - pad, end = min(start +
 * kernel, size + pad); the divisor for AVG is the product over axes of
 * (end - start) when count_include_pad, and of the window clipped to
 * [0, size) otherwise; values are read from the clipped window. An empty
 * clipped window yields 0 for AVG/SUM/LP and -FLT_MAX for MAX. LP with p = 1
 * sums x itself (not |x|), as MXNet does. */
void cr_pooling(const cr_pool_params *params, const int64_t x_shape[5],
                const float *x, const int64_t y_shape[5], float *y,
                int num_threads);

/* y (batch x out_dim) = x (batch x in_dim) . w^T (w: out_dim x in_dim)
 * + bias (out_dim values, or NULL). Returns 0, or -1 when scratch memory
 * cannot be had. */
int cr_fully_connected(int64_t batch, int64_t in_dim, int64_t out_dim,
                       const float *x, const float *w, const float *bias,
                       float *y, int num_threads);

/* w packed for the GEMM (as B = w^T), and cr_fully_connected with it (or
 * NULL) and a fused epilogue (or NULL). */
size_t cr_fc_packed_floats(int64_t in_dim, int64_t out_dim);
cr_isa cr_fc_pack(int64_t in_dim, int64_t out_dim, const float *w, float *packed);
int cr_fully_connected_fused(int64_t batch, int64_t in_dim, int64_t out_dim,
                             const float *x, const float *w,
                             const float *packed_w, cr_isa packed_isa,
                             const float *bias, const cr_fusion *fusion,
                             float *y, int num_threads);

typedef enum cr_activation_type {
  CR_ACT_RELU,
  CR_ACT_SIGMOID,
  CR_ACT_TANH,
  CR_ACT_SOFTRELU,    /* log(1 + exp(x)), computed without overflow */
  CR_ACT_SOFTSIGN,    /* x / (1 + |x|) */
  CR_ACT_LOG_SIGMOID, /* log(sigmoid(x)) = -softrelu(-x) */
  CR_ACT_MISH         /* x * tanh(softrelu(x)) */
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

/* Instance normalisation of x viewed as (batch, channels, spatial): each
 * (sample, channel) row of spatial values is normalised with its own mean
 * and biased variance, in double: y = (x - mean) / sqrt(var + eps) *
 * gamma[c] + beta[c]. y must not overlap x. */
void cr_instance_norm(int64_t batch, int64_t channels, int64_t spatial,
                      const float *x, const float *gamma, const float *beta,
                      double eps, float *y);

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
 * would; power, mod and hypot in double. MAXIMUM is a > b ? a : b and
 * MINIMUM a < b ? a : b, MXNet's definitions (a NaN in a yields b). MOD is
 * MXNet's: the remainder takes the divisor's sign, and x mod 0 is 0. The
 * comparisons and logical operations (the predicates, EQUAL and after) give
 * 1 or 0; the logical ones test operands against 0 (NaN is true). */
typedef enum cr_binary_op {
  CR_BINARY_ADD,
  CR_BINARY_SUB,
  CR_BINARY_MUL,
  CR_BINARY_DIV,
  CR_BINARY_POWER,
  CR_BINARY_MAXIMUM,
  CR_BINARY_MINIMUM,
  CR_BINARY_MOD,
  CR_BINARY_HYPOT,
  CR_BINARY_EQUAL,
  CR_BINARY_NOT_EQUAL,
  CR_BINARY_GREATER,
  CR_BINARY_GREATER_EQUAL,
  CR_BINARY_LESSER,
  CR_BINARY_LESSER_EQUAL,
  CR_BINARY_LOGICAL_AND,
  CR_BINARY_LOGICAL_OR,
  CR_BINARY_LOGICAL_XOR
} cr_binary_op;

/* 1 for the predicates (EQUAL .. LOGICAL_XOR), which also run on integers. */
int cr_binary_is_predicate(cr_binary_op op);

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

/* A predicate (cr_binary_is_predicate) of integers of dtype (one of the
 * integer dtypes), with broadcasting as cr_broadcast_binary: compared
 * exactly as int64_t values, the 1 or 0 stored in dtype. */
void cr_broadcast_predicate_int(cr_binary_op op, cr_dtype dtype, int ndim,
                                const int64_t *dims, const int64_t *a_strides,
                                const int64_t *b_strides, const void *a,
                                const void *b, void *y);

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
  CR_UNARY_RINT,  /* halves to even */
  CR_UNARY_TAN,
  CR_UNARY_ARCSIN,
  CR_UNARY_ARCCOS,
  CR_UNARY_ARCTAN,
  CR_UNARY_SINH,
  CR_UNARY_COSH,
  CR_UNARY_ARCSINH,
  CR_UNARY_ARCCOSH,
  CR_UNARY_ARCTANH,
  CR_UNARY_DEGREES, /* x * (180 / pi), numpy's constant */
  CR_UNARY_RADIANS, /* x * (pi / 180) */
  CR_UNARY_RCBRT,   /* 1 / cbrt(x) */
  CR_UNARY_LOGICAL_NOT /* x == 0 ? 1 : 0 */
} cr_unary_op;

/* y[i] = f(x[i]) for i < count; y may equal x. */
void cr_unary(cr_unary_op op, int64_t count, const float *x, float *y);

/* y[i] = x[i] > high ? high : (x[i] < low ? low : x[i]), MXNet's order of
 * tests (so NaN passes through, and high wins when low > high). y may equal
 * x. */
void cr_clip(int64_t count, float low, float high, const float *x, float *y);

/* y[i] = value for i < count. */
void cr_fill(int64_t count, float value, float *y);

/* ---- Reductions ---------------------------------------------------------- */

/* SUM, MEAN and the products accumulate in double; NANSUM and NANPROD skip
 * NaNs (an empty or all-NaN reduction gives 0 and 1). MAX and MIN return
 * NaN when the reduced values hold one, as numpy's max and min do. */
typedef enum cr_reduce_op {
  CR_REDUCE_SUM,
  CR_REDUCE_MEAN,
  CR_REDUCE_MAX,
  CR_REDUCE_MIN,
  CR_REDUCE_PROD,
  CR_REDUCE_NANSUM,
  CR_REDUCE_NANPROD
} cr_reduce_op;

/* Reduces x (compact, ndim 1 .. CR_MAX_NDIM extents dims) over the axes d
 * where reduced[d] is nonzero. y holds the kept axes in their order. An
 * empty reduction gives 0 for SUM and MEAN (MEAN divides by at least 1);
 * MAX and MIN must not be asked for one. y must not overlap x. */
void cr_reduce(cr_reduce_op op, int ndim, const int64_t *dims,
               const unsigned char *reduced, const float *x, float *y);

/* ---- Searching ----------------------------------------------------------- */

/* For x viewed as (outer, length, inner) with length >= 1: y[o, i] = the
 * position along the middle axis of the first largest (is_max) or smallest
 * value, as a float; the first NaN wins over every number, as numpy's
 * argmax and argmin have it. */
void cr_arg_search(int is_max, int64_t outer, int64_t length, int64_t inner,
                   const float *x, float *y);

/* topk along the middle axis of x viewed as (outer, length, inner): the k
 * (1 <= k <= length) largest values (smallest when ascending) in rank
 * order, ties keeping the lower position first and NaN ranking above
 * every number. Each output is optional (NULL): values and indices are
 * (outer, k, inner), the indices stored in index_dtype (which must hold
 * them exactly); mask is (outer, length, inner), 1 at the chosen positions
 * and 0 elsewhere. Returns 0, or -1 when scratch memory cannot be had. */
int cr_topk(int64_t outer, int64_t length, int64_t inner, int64_t k,
            int ascending, const float *x, float *values,
            cr_dtype index_dtype, void *indices, float *mask);

/* ---- Matrix products ----------------------------------------------------- */

/* For each of batch pairs: y (m x n) = A . B, where A is m x k (stored
 * k x m, i.e. transposed, when transpose_a) and B is k x n (stored n x k
 * when transpose_b); pair i starts at a + i*m*k, b + i*k*n, y + i*m*n.
 * Sums are accumulated in float by the GEMM of gemm.h. y must not overlap
 * a or b. Returns 0, or -1 when scratch memory cannot be had. */
int cr_matmul(int64_t batch, int64_t m, int64_t n, int64_t k,
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

/* ---- Upsampling ---------------------------------------------------------- */

/* y (batch, channels, height, width) = the sum, in double, of num inputs
 * upsampled by nearest neighbour: input k is (batch, channels, height /
 * factors[k], width / factors[k]) and y[n, c, h, w] adds x[k][n, c,
 * h / factors[k], w / factors[k]]. */
void cr_upsampling_sum(int num, const float *const *x, const int64_t *factors,
                       int64_t batch, int64_t channels, int64_t height,
                       int64_t width, float *y);

/* ---- Fast element-wise kernels (fast/elementwise.c) ---------------------- */

/* The kernels above of the same name without fast_, as configure(kernels=
 * "fast") runs them: the same loops compiled once per ISA, giving the same
 * values bit for bit (see elementwise_loops.h). Arguments as there. */
void cr_fast_activation(cr_activation_type type, int64_t count, const float *x, float *y);
void cr_fast_softmax(int64_t outer, int64_t length, int64_t inner, double temperature, int log,
                     const float *x, float *y);
void cr_fast_binary(cr_binary_op op, int64_t count, const float *a, const float *b, float *y);
void cr_fast_scalar_binary(cr_binary_op op, int reverse, int64_t count, const float *x,
                           float scalar, float *y);
void cr_fast_broadcast_binary(cr_binary_op op, int ndim, const int64_t *dims,
                              const int64_t *a_strides, const int64_t *b_strides,
                              const float *a, const float *b, float *y);
/* cr_fast_broadcast_binary shared out by rows between up to num_threads
 * threads (the same values). */
void cr_fast_broadcast_binary_shared(cr_binary_op op, int ndim, const int64_t *dims,
                                     const int64_t *a_strides, const int64_t *b_strides,
                                     const float *a, const float *b, float *y,
                                     int num_threads);
void cr_fast_add_n(int num, int64_t count, const float *const *x, float *y);
void cr_fast_unary(cr_unary_op op, int64_t count, const float *x, float *y);
/* cr_fast_unary shared out between up to num_threads threads (the same
 * values: each element is computed alone). */
void cr_fast_unary_shared(cr_unary_op op, int64_t count, const float *x, float *y,
                          int num_threads);
/* The reference kernel of cr_fast_hard_sigmoid: the same loop (the same
 * values bit for bit), on the calling thread. */
void cr_hard_sigmoid(int swish, double alpha, double beta, int64_t count, const float *x,
                     float *y);
/* ONNX HardSigmoid, clamp(alpha x + beta, 0, 1) (swish 0), or HardSwish,
 * x clamp(x / 6 + 0.5, 0, 1) (swish 1; alpha and beta unused), computed in
 * float (within 2 ulp of the double formula), NaN kept; vectorised and
 * shared out between up to num_threads threads. */
/* y = x * sigmoid(x) (SiLU) as x / (1 + exp(-x)), exp as cr_fast_unary's
 * sigmoid's: one rounding less than the sigmoid followed by the multiply,
 * in one pass; shared out between up to num_threads threads. */
void cr_fast_swish(int64_t count, const float *x, float *y, int num_threads);
void cr_fast_hard_sigmoid(int swish, double alpha, double beta, int64_t count, const float *x,
                          float *y, int num_threads);
void cr_fast_layer_norm(int64_t outer, int64_t channels, int64_t inner, const float *x,
                        const float *gamma, const float *beta, double eps, float *y,
                        float *mean, float *std);
void cr_fast_leaky_relu(cr_leaky_type type, double slope, int64_t count, const float *x,
                        float *y);
void cr_fast_prelu(int64_t outer, int64_t channels, int64_t inner, const float *x,
                   const float *gamma, int64_t outer_step, int64_t channel_step, float *y);

/* ======================================================================== */
/* Data kernels (reference/data.c): dtypes and moving elements of any dtype    */
/* ======================================================================== */

/* Bytes per element of dtype. */
size_t cr_dtype_size(cr_dtype dtype);

/* 1 for the integer dtypes (uint8, int8, int32, int64). */
int cr_dtype_is_integer(cr_dtype dtype);

/* ---- float16 ------------------------------------------------------------ */

/* IEEE binary16 bits to float (exact, subnormals included; NaN payloads
 * kept). */
float cr_half_to_float(uint16_t half);

/* value rounded to the nearest binary16, ties to even (one rounding, also
 * from double): subnormals as such, overflow to infinity, NaN to a NaN with
 * the payload's top bits (numpy's conversion). */
uint16_t cr_half_from_double(double value);

void cr_widen_half(int64_t count, const uint16_t *x, float *y);
void cr_narrow_to_half(int64_t count, const float *x, uint16_t *y);

/* y[i] = x[i] rounded to float16 precision and back: what storing a float16
 * intermediate does. */
void cr_round_to_half(int64_t count, float *y);

/* ---- Conversions (numpy's astype, which the host's registry uses) -------- */

/* Stores value as element index of y, of dtype to: rounded to nearest for
 * float dtypes; for integer dtypes truncated toward zero, where a NaN or a
 * value outside the range of int32_t (for the 8-bit and 32-bit dtypes) or
 * int64_t becomes that type's minimum, and the 8-bit dtypes then keep the
 * low 8 bits: numpy's astype on x86-64, the registry's platform. */
void cr_store_double(cr_dtype to, void *y, int64_t index, double value);

/* Stores an integer: exactly (wrapped to the width) for integer dtypes,
 * rounded to nearest for float dtypes (float16 through float, as numpy
 * converts integers to float16). */
void cr_store_int(cr_dtype to, void *y, int64_t index, int64_t value);

/* Element index of x, of dtype from, exactly as a double (int64 values
 * beyond 2^53 round). */
double cr_load_double(cr_dtype from, const void *x, int64_t index);

/* Element index of x, of an integer dtype from, as int64_t. */
int64_t cr_load_int(cr_dtype from, const void *x, int64_t index);

/* Element index of x as int64_t the way numpy's astype(int64) has it:
 * integers exactly, floats as cr_store_double converts them to int64. */
int64_t cr_load_as_int64(cr_dtype from, const void *x, int64_t index);

/* y[i] = x[i] converted from dtype from to dtype to (MXNet's Cast). */
void cr_cast(int64_t count, cr_dtype from, const void *x, cr_dtype to,
             void *y);

/* 1 if element index of x (of dtype) is nonzero; NaN is nonzero, -0 is
 * not. */
int cr_is_nonzero(cr_dtype dtype, const void *x, int64_t index);

/* ---- Moving elements ---------------------------------------------------- */

/* Copies rows blocks of width elements of elem_size bytes: block r from
 * element r * x_stride of x to element r * y_stride of y. Concatenation,
 * stacking, splitting and slicing along an axis are all this copy, with x
 * and y viewed as (rows, extent along the axis * elements after it). The
 * blocks of x and y must not overlap. */
void cr_copy_rows(int64_t rows, int64_t width, size_t elem_size,
                  const void *x, int64_t x_stride, void *y, int64_t y_stride);

/* Copies bytes bytes from x to y (which must not overlap), in contiguous
 * ranges on up to num_threads threads (cr_threads_for_bytes). */
void cr_copy_bytes(size_t bytes, const void *x, void *y, int num_threads);

/* How output index o along one axis picks the input index it copies. */
typedef enum cr_axis_map_kind {
  CR_MAP_STEP,         /* offset + o * factor (factor 0 broadcasts) */
  CR_MAP_TILE,         /* o % size */
  CR_MAP_REPEAT,       /* o / factor */
  CR_MAP_PAD_CONSTANT, /* o - offset inside [0, size), else the fill value */
  CR_MAP_PAD_EDGE,     /* o - offset clamped to [0, size) */
  CR_MAP_PAD_REFLECT   /* o - offset reflected at the ends, without repeating
                          them (numpy's "reflect"); needs offset < size and
                          the far padding < size */
} cr_axis_map_kind;

typedef struct cr_axis_map {
  cr_axis_map_kind kind;
  int64_t offset;
  int64_t factor;
  int64_t size;
} cr_axis_map;

/* For every index (o0, ..., ok) of the ndim (1 .. CR_MAX_NDIM) extents
 * dims: the element at sum o_d * y_strides[d] of y becomes the element at
 * sum map_d(o_d) * x_strides[d] of x, or the elem_size bytes at fill where
 * a CR_MAP_PAD_CONSTANT axis falls outside the input. Slicing, tiling,
 * repeating, broadcasting, padding and transposing (x_strides permuted) are
 * all this gather. y must not overlap x. */
void cr_gather(int ndim, const int64_t *dims, const cr_axis_map *maps,
               const int64_t *x_strides, const int64_t *y_strides,
               size_t elem_size, const void *x, const void *fill, void *y);

/* y (compact, ndim 1 .. CR_MAX_NDIM extents dims) = x read with per-axis
 * element strides x_strides: a transpose when the strides are x's own
 * permuted. y must not overlap x. */
void cr_copy_strided(int ndim, const int64_t *dims, const int64_t *x_strides,
                     size_t elem_size, const void *x, void *y);
/* cr_copy_strided shared among up to num_threads threads (fast/copy.c):
 * ranges of the first axis longer than 1, as cr_threads_for_bytes deals
 * them. The same bytes. */
void cr_copy_strided_shared(int ndim, const int64_t *dims, const int64_t *x_strides,
                            size_t elem_size, const void *x, void *y, int num_threads);

/* y[i] = the elem_size bytes at value, for i < count. */
void cr_fill_elements(int64_t count, size_t elem_size, const void *value,
                      void *y);

/* ---- Indexing ------------------------------------------------------------ */

/* How take treats an index outside [0, size). */
typedef enum cr_take_mode {
  CR_TAKE_CLIP, /* clipped to [0, size - 1] */
  CR_TAKE_WRAP, /* taken modulo size */
  CR_TAKE_RAISE /* refused, except [-size, 0), counted from the end */
} cr_take_mode;

/* y (outer, count, inner) gathers x (outer, size, inner): y[o, j, :] =
 * x[o, position(indices[j]), :], each index first converted to int64_t as
 * cr_load_as_int64 does (floats truncated toward zero), then placed by
 * mode; size >= 1 unless count is 0. Returns 0, or -1 (writing nothing)
 * when mode is CR_TAKE_RAISE and an index is out of range. */
int cr_take(cr_take_mode mode, int64_t outer, int64_t size, int64_t inner,
            size_t elem_size, const void *x, int64_t count,
            cr_dtype index_dtype, const void *indices, void *y);

/* out (rows, inner) = x where the condition is nonzero, else y: the
 * condition of element (r, i) is element r * cond_row_step + i * cond_step
 * of cond (of cond_dtype), so that a vector condition (steps 1 and 0)
 * selects whole rows. out must not overlap the inputs. */
void cr_where(int64_t rows, int64_t inner, cr_dtype cond_dtype,
              const void *cond, int64_t cond_row_step, int64_t cond_step,
              size_t elem_size, const void *x, const void *y, void *out);

/* out[i, :] = weight[row(indices[i]), :] for i < count, where weight is
 * input_dim x output_dim elements of elem_size bytes and row(v) is v
 * truncated toward zero and clipped to [0, input_dim - 1] (NaN reads row
 * 0); indices are of dtype index_dtype. out must not overlap weight. */
void cr_embedding(int64_t count, cr_dtype index_dtype, const void *indices,
                  int64_t input_dim, int64_t output_dim, size_t elem_size,
                  const void *weight, void *out);

#endif /* CPU_REF_KERNELS_H_ */
