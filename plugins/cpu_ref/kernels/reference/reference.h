/*
 * The reference kernels of the operators whose fast kernels (kernels/fast/)
 * differ from a plain loop: convolution, deconvolution, pooling,
 * FullyConnected, the matrix products of dot and batch_dot and of the ONNX
 * importer's MatMul and Gemm (of any dtype). Each is one
 * plain C loop on one thread, without intrinsics: the executable definition
 * of the operator's semantics (MXNet 1.x), which configure(kernels=
 * "reference") runs instead of the fast kernel. Arguments are those of the
 * kernels.h function of the same name without cr_ref_ and num_threads, and
 * have been checked by the operator (ops/).
 *
 * Sums of products are accumulated in double and rounded to float once; the
 * fast kernels accumulate in float in a blocked order, so they agree with
 * these to float rounding (see tests/plugins/cpu_ref/test_cpu_ref_reference_kernels.py).
 */
#ifndef CPU_REF_REFERENCE_H_
#define CPU_REF_REFERENCE_H_

#include <stdint.h>

#include "kernels.h"

/* y[n, o, p] = bias[o] + sum over the group's input channels c and the
 * kernel taps k of x[n, c, p * stride - pad + k * dilate] * w[o, c, k],
 * taps outside x reading 0. */
void cr_ref_convolution(const cr_conv_params *params, const int64_t x_shape[5], const float *x,
                        const float *w, const float *bias, const int64_t y_shape[5], float *y);

/* See cr_deconvolution. */
void cr_ref_deconvolution(const cr_conv_params *params, const int64_t x_shape[5],
                          const float *x, const float *w, const float *bias,
                          const int64_t y_shape[5], float *y);
/* Output plane (image n, output channel o) of cr_ref_deconvolution: the
 * fast kernel shares the planes out among threads. */
void cr_ref_deconvolve_plane(const cr_conv_params *params, const int64_t x_shape[5],
                             const float *x, const float *w, const float *bias,
                             const int64_t y_shape[5], float *y, int64_t n, int64_t o);

/* See cr_pooling. */
void cr_ref_pooling(const cr_pool_params *params, const int64_t x_shape[5], const float *x,
                    const int64_t y_shape[5], float *y);
/* One (D, H, W) plane of cr_ref_pooling: in, out are its extents. */
void cr_ref_pool_plane(const cr_pool_params *params, const float *x, const int64_t in[3],
                       float *y, const int64_t out[3]);

/* See cr_fully_connected. */
void cr_ref_fully_connected(int64_t batch, int64_t in_dim, int64_t out_dim, const float *x,
                            const float *w, const float *bias, float *y);

/* See cr_matmul. */
void cr_ref_matmul(int64_t batch, int64_t m, int64_t n, int64_t k, int transpose_a,
                   int transpose_b, const float *a, const float *b, float *y);

/* y = a . b for one m x k by k x n product of dtype (numpy's matmul): a's
 * element (r, t) is element a_off + r * a_rs + t * a_cs of a, b's element
 * (t, c) element b_off + t * b_rs + c * b_cs of b, and y's element (r, c)
 * is stored at y_off + r * n + c. Integers are multiplied and summed
 * wrapping at 64 bits and stored wrapped to the dtype (numpy's integer
 * matmul); floats are summed in double and rounded to the dtype once. y
 * must not overlap a or b. */
void cr_ref_matmul_any(cr_dtype dtype, int64_t m, int64_t n, int64_t k, const void *a,
                       int64_t a_off, int64_t a_rs, int64_t a_cs, const void *b, int64_t b_off,
                       int64_t b_rs, int64_t b_cs, void *y, int64_t y_off);

/* y (compact, ndim 0 .. CR_MAX_NDIM extents dims, of dtype) = alpha * p +
 * beta * c in double, rounded to dtype once; p and c (NULL: none) are read
 * at the per-axis element strides p_strides and c_strides (0 repeats an
 * operand along an axis). ONNX Gemm's alpha * (A . B) + beta * C. y must
 * not overlap p or c. */
void cr_ref_scale_add(cr_dtype dtype, int ndim, const int64_t *dims, const int64_t *p_strides,
                      const int64_t *c_strides, double alpha, double beta, const void *p,
                      const void *c, void *y);

/* See cr_copy_bytes. */
void cr_ref_copy_bytes(size_t bytes, const void *x, void *y);

#endif /* CPU_REF_REFERENCE_H_ */
