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

/* y[i] = a[i] + b[i] for i < count; y may equal a or b. */
void cr_add(int64_t count, const float *a, const float *b, float *y);

/* Softmax of x / temperature along the middle axis of x viewed as
 * (outer, length, inner), computed stably (max subtracted). y may equal x. */
void cr_softmax(int64_t outer, int64_t length, int64_t inner,
                double temperature, const float *x, float *y);

#endif /* CPU_REF_KERNELS_H_ */
