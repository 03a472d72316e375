/*
 * Reference kernels (reference.h): convolution, deconvolution, pooling,
 * FullyConnected, the matrix products (float32, and those of any dtype of
 * the ONNX importer's MatMul and Gemm) and the plain copy, each one loop
 * nest on one thread. Products are summed in double in the order of the
 * loops and rounded once.
 */
#include "reference.h"

#include <string.h>

/* ---- Convolution --------------------------------------------------------- */

void cr_ref_convolution(const cr_conv_params *params, const int64_t x_shape[5], const float *x,
                        const float *w, const float *bias, const int64_t y_shape[5], float *y) {
  const int64_t batch = x_shape[0], channels = x_shape[1];
  const int64_t *in = x_shape + 2, *out = y_shape + 2, *k = params->kernel;
  const int64_t outputs = y_shape[1];
  const int64_t group_channels = channels / params->num_group;
  const int64_t group_outputs = outputs / params->num_group;
  const int64_t taps = k[0] * k[1] * k[2];
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t o = 0; o < outputs; ++o) {
      const int64_t group = o / group_outputs;
      const float *x_group = x + (n * channels + group * group_channels) * in[0] * in[1] * in[2];
      const float *w_o = w + o * group_channels * taps;
      float *y_plane = y + (n * outputs + o) * out[0] * out[1] * out[2];
      for (int64_t od = 0; od < out[0]; ++od) {
        for (int64_t oh = 0; oh < out[1]; ++oh) {
          for (int64_t ow = 0; ow < out[2]; ++ow) {
            double sum = bias != NULL ? bias[o] : 0.0;
            for (int64_t c = 0; c < group_channels; ++c) {
              const float *x_c = x_group + c * in[0] * in[1] * in[2];
              for (int64_t kd = 0; kd < k[0]; ++kd) {
                const int64_t id = od * params->stride[0] - params->pad[0] + kd * params->dilate[0];
                if (id < 0 || id >= in[0]) continue;
                for (int64_t kh = 0; kh < k[1]; ++kh) {
                  const int64_t ih =
                      oh * params->stride[1] - params->pad[1] + kh * params->dilate[1];
                  if (ih < 0 || ih >= in[1]) continue;
                  for (int64_t kw = 0; kw < k[2]; ++kw) {
                    const int64_t iw =
                        ow * params->stride[2] - params->pad[2] + kw * params->dilate[2];
                    if (iw < 0 || iw >= in[2]) continue;
                    sum += (double)x_c[(id * in[1] + ih) * in[2] + iw] *
                           (double)w_o[c * taps + (kd * k[1] + kh) * k[2] + kw];
                  }
                }
              }
            }
            y_plane[(od * out[1] + oh) * out[2] + ow] = (float)sum;
          }
        }
      }
    }
  }
}

/* ---- Deconvolution ------------------------------------------------------- */

/* The input index that output p reads through kernel tap k along one axis,
 * or -1 when there is none: p + pad = i * stride + k * dilate must hold
 * for a whole i inside the input. */
static int64_t deconv_source(const cr_conv_params *params, int axis, int64_t p,
                             int64_t k, int64_t in_size) {
  const int64_t reach = p + params->pad[axis] - k * params->dilate[axis];
  if (reach < 0 || reach % params->stride[axis] != 0) return -1;
  const int64_t i = reach / params->stride[axis];
  return i < in_size ? i : -1;
}

/* Each output is gathered from the inputs that scatter onto it (rather
 * than scattering input by input), so that every output is one double sum,
 * written once, whichever thread computes it. */
void cr_ref_deconvolve_plane(const cr_conv_params *params, const int64_t x_shape[5],
                             const float *x_all, const float *w_all, const float *bias_all,
                             const int64_t y_shape[5], float *y_all, int64_t n, int64_t o) {
  const int64_t channels = x_shape[1];
  const int64_t *in = x_shape + 2;
  const int64_t outputs = y_shape[1];
  const int64_t *out = y_shape + 2;
  const int64_t *k = params->kernel;
  const int64_t in_plane = in[0] * in[1] * in[2];
  const int64_t kernel_size = k[0] * k[1] * k[2];
  const int64_t group_outputs = outputs / params->num_group;
  const int64_t group_channels = channels / params->num_group;
  const int64_t group = o / group_outputs;
  const float *x = x_all + (n * channels + group * group_channels) * in_plane;
  /* w is (C, O / groups, taps): the taps of input channel c (of the group)
   * for output o % group_outputs. */
  const float *w =
      w_all +
      (group * group_channels * group_outputs + o % group_outputs) * kernel_size;
  float *y = y_all + (n * outputs + o) * out[0] * out[1] * out[2];
  const double bias = bias_all != NULL ? bias_all[o] : 0.0;
  for (int64_t od = 0; od < out[0]; ++od) {
    for (int64_t oh = 0; oh < out[1]; ++oh) {
      for (int64_t ow = 0; ow < out[2]; ++ow) {
        double sum = bias;
        for (int64_t kd = 0; kd < k[0]; ++kd) {
          const int64_t id = deconv_source(params, 0, od, kd, in[0]);
          if (id < 0) continue;
          for (int64_t kh = 0; kh < k[1]; ++kh) {
            const int64_t ih = deconv_source(params, 1, oh, kh, in[1]);
            if (ih < 0) continue;
            for (int64_t kw = 0; kw < k[2]; ++kw) {
              const int64_t iw = deconv_source(params, 2, ow, kw, in[2]);
              if (iw < 0) continue;
              const int64_t x_at = (id * in[1] + ih) * in[2] + iw;
              const int64_t tap = (kd * k[1] + kh) * k[2] + kw;
              for (int64_t c = 0; c < group_channels; ++c) {
                sum += (double)x[c * in_plane + x_at] *
                       w[c * group_outputs * kernel_size + tap];
              }
            }
          }
        }
        y[(od * out[1] + oh) * out[2] + ow] = (float)sum;
      }
    }
  }
}

void cr_ref_deconvolution(const cr_conv_params *params, const int64_t x_shape[5],
                          const float *x, const float *w, const float *bias,
                          const int64_t y_shape[5], float *y) {
  for (int64_t n = 0; n < y_shape[0]; ++n) {
    for (int64_t o = 0; o < y_shape[1]; ++o) {
      cr_ref_deconvolve_plane(params, x_shape, x, w, bias, y_shape, y, n, o);
    }
  }
}

/* ---- Pooling ------------------------------------------------------------- */

void cr_ref_pooling(const cr_pool_params *params, const int64_t x_shape[5], const float *x,
                    const int64_t y_shape[5], float *y) {
  const int64_t *in = x_shape + 2, *out = y_shape + 2;
  const int64_t in_plane = in[0] * in[1] * in[2], out_plane = out[0] * out[1] * out[2];
  for (int64_t plane = 0; plane < x_shape[0] * x_shape[1]; ++plane) {
    cr_ref_pool_plane(params, x + plane * in_plane, in, y + plane * out_plane, out);
  }
}

/* ---- FullyConnected and the matrix products ------------------------------ */

void cr_ref_fully_connected(int64_t batch, int64_t in_dim, int64_t out_dim, const float *x,
                            const float *w, const float *bias, float *y) {
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t o = 0; o < out_dim; ++o) {
      double sum = bias != NULL ? bias[o] : 0.0;
      for (int64_t i = 0; i < in_dim; ++i) {
        sum += (double)x[r * in_dim + i] * (double)w[o * in_dim + i];
      }
      y[r * out_dim + o] = (float)sum;
    }
  }
}

void cr_ref_matmul(int64_t batch, int64_t m, int64_t n, int64_t k, int transpose_a,
                   int transpose_b, const float *a, const float *b, float *y) {
  for (int64_t p = 0; p < batch; ++p) {
    const float *a_p = a + p * m * k, *b_p = b + p * k * n;
    float *y_p = y + p * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t l = 0; l < k; ++l) {
          const float a_il = transpose_a ? a_p[l * m + i] : a_p[i * k + l];
          const float b_lj = transpose_b ? b_p[j * k + l] : b_p[l * n + j];
          sum += (double)a_il * (double)b_lj;
        }
        y_p[i * n + j] = (float)sum;
      }
    }
  }
}

/* ---- Products of any dtype (the ONNX importer's MatMul and Gemm) -------- */

void cr_ref_matmul_any(cr_dtype dtype, int64_t m, int64_t n, int64_t k, const void *a,
                       int64_t a_off, int64_t a_rs, int64_t a_cs, const void *b, int64_t b_off,
                       int64_t b_rs, int64_t b_cs, void *y, int64_t y_off) {
  const int integer = cr_dtype_is_integer(dtype);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      const int64_t a_row = a_off + r * a_rs, b_col = b_off + c * b_cs;
      if (integer) {
        /* Sums of products wrapped to 64 bits (unsigned arithmetic, no
         * overflow), wrapped to the dtype's width when stored. */
        uint64_t sum = 0;
        for (int64_t t = 0; t < k; ++t) {
          sum += (uint64_t)cr_load_int(dtype, a, a_row + t * a_cs) *
                 (uint64_t)cr_load_int(dtype, b, b_col + t * b_rs);
        }
        cr_store_int(dtype, y, y_off + r * n + c, (int64_t)sum);
      } else {
        double sum = 0.0;
        for (int64_t t = 0; t < k; ++t) {
          sum += cr_load_double(dtype, a, a_row + t * a_cs) *
                 cr_load_double(dtype, b, b_col + t * b_rs);
        }
        cr_store_double(dtype, y, y_off + r * n + c, sum);
      }
    }
  }
}

void cr_ref_scale_add(cr_dtype dtype, int ndim, const int64_t *dims, const int64_t *p_strides,
                      const int64_t *c_strides, double alpha, double beta, const void *p,
                      const void *c, void *y) {
  int64_t count = 1, index[CR_MAX_NDIM] = {0}, p_off = 0, c_off = 0;
  for (int d = 0; d < ndim; ++d) count *= dims[d];
  for (int64_t e = 0; e < count; ++e) {
    double value = alpha * cr_load_double(dtype, p, p_off);
    if (c != NULL) value += beta * cr_load_double(dtype, c, c_off);
    cr_store_double(dtype, y, e, value);
    /* The next position, the last axis turning fastest. */
    for (int d = ndim - 1; d >= 0; --d) {
      p_off += p_strides[d];
      c_off += c != NULL ? c_strides[d] : 0;
      if (++index[d] < dims[d]) break;
      p_off -= p_strides[d] * dims[d];
      c_off -= c != NULL ? c_strides[d] * dims[d] : 0;
      index[d] = 0;
    }
  }
}

/* ---- Copies -------------------------------------------------------------- */

void cr_ref_copy_bytes(size_t bytes, const void *x, void *y) {
  if (bytes > 0) memcpy(y, x, bytes);
}
