/*
 * cpu_ref's Concat views of views (plugins/cpu_ref/model/memory_plan.c,
 * plan_concat_views and resolve_views): an inner Concat of two 1x1
 * convolutions, written in place into its output, is itself an input of
 * an outer Concat, along the channels (one run of one image at batch 1)
 * and along the images (axis 0: the inner one's strided convolutions lie
 * in one run of the outer output at any batch). Linked directly so that
 * AddressSanitizer checks every write into the nested views
 * (tests/c/test_c_cpu_ref.py). Batch 1 and 4, 1 and 2 threads, image split
 * forced off, on and left to cpu_ref; the outputs must match the
 * convolutions and concatenations computed here. Prints "N passed, N
 * failed".
 */
#define _POSIX_C_SOURCE 200112L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mxnet_acc.h"

enum { kMaxBatch = 4, kIn = 2, kPixels = 9, kA = 2, kB = 1, kC = 3, kInner = kA + kB };
enum { kOut = kMaxBatch * (kC + kInner) * kPixels, kGraphSize = 4096 };

static float data[kMaxBatch * kIn * kPixels];
static float a_w[kA * kIn], a_b[kA], b_w[kB * kIn], b_b[kB], c_w[kC * kIn], c_b[kC];

/* data -> convolutions a, b, c (1x1); inner = Concat(a, b) on the
 * channels; outer = Concat(c, inner) along dim; relu(outer) the output. */
static int graph_json(char *json, size_t size, int batch, int dim) {
  char shape[8][32];
  snprintf(shape[0], sizeof shape[0], "%d,%d,3,3", batch, kIn);
  snprintf(shape[1], sizeof shape[1], "%d,%d,3,3", batch, kA);
  snprintf(shape[2], sizeof shape[2], "%d,%d,3,3", batch, kB);
  snprintf(shape[3], sizeof shape[3], "%d,%d,3,3", batch, kC);
  snprintf(shape[4], sizeof shape[4], "%d,%d,3,3", batch, kInner);
  snprintf(shape[5], sizeof shape[5], "%d,%d,3,3", dim == 0 ? 2 * batch : batch,
           dim == 0 ? kC : kC + kInner);
  const int written = snprintf(
      json, size,
      "{\"nodes\":["
      NODE("null", "data", "\"__out_shapes__\":\"[[%s]]\",\"__out_dtypes__\":\"[0]\","
           "\"__kind__\":\"data\"", "") ","
      VAR("a_w", "[2,2,1,1]", "weight") "," VAR("a_b", "[2]", "weight") ","
      NODE("Convolution", "a", "\"__out_shapes__\":\"[[%s]]\",\"__out_dtypes__\":\"[0]\","
           "\"kernel\":\"(1, 1)\",\"num_filter\":\"2\"", "[0,0,0],[1,0,0],[2,0,0]") ","
      VAR("b_w", "[1,2,1,1]", "weight") "," VAR("b_b", "[1]", "weight") ","
      NODE("Convolution", "b", "\"__out_shapes__\":\"[[%s]]\",\"__out_dtypes__\":\"[0]\","
           "\"kernel\":\"(1, 1)\",\"num_filter\":\"1\"", "[0,0,0],[4,0,0],[5,0,0]") ","
      VAR("c_w", "[3,2,1,1]", "weight") "," VAR("c_b", "[3]", "weight") ","
      NODE("Convolution", "c", "\"__out_shapes__\":\"[[%s]]\",\"__out_dtypes__\":\"[0]\","
           "\"kernel\":\"(1, 1)\",\"num_filter\":\"3\"", "[0,0,0],[7,0,0],[8,0,0]") ","
      NODE("Concat", "inner", "\"__out_shapes__\":\"[[%s]]\",\"__out_dtypes__\":\"[0]\","
           "\"dim\":\"1\",\"num_args\":\"2\"", "[3,0,0],[6,0,0]") ","
      NODE("Concat", "outer", "\"__out_shapes__\":\"[[%s]]\",\"__out_dtypes__\":\"[0]\","
           "\"dim\":\"%d\",\"num_args\":\"2\"", "[9,0,0],[10,0,0]") ","
      NODE("Activation", "relu", "\"__out_shapes__\":\"[[%s]]\",\"__out_dtypes__\":\"[0]\","
           "\"act_type\":\"relu\"", "[11,0,0]")
      "],\"arg_nodes\":[0,1,2,4,5,7,8],\"heads\":[[12,0,0]]}",
      shape[0], shape[1], shape[2], shape[3], shape[4], shape[5], dim, shape[5]);
  return written > 0 && (size_t)written < size;
}

/* out[n][o][p] = bias[o] + sum_c w[o][c] x[n][c][p] for image n. */
static void conv1x1(int n, const float *w, const float *bias, int outputs, float *out) {
  for (int o = 0; o < outputs; ++o) {
    for (int p = 0; p < kPixels; ++p) {
      double sum = bias[o];
      for (int c = 0; c < kIn; ++c) sum += (double)w[o * kIn + c] * data[(n * kIn + c) * kPixels + p];
      out[o * kPixels + p] = (float)sum;
    }
  }
}

/* What the graph computes, into expected (its size in floats). */
static size_t reference(int batch, int dim, float *expected) {
  float a[kA * kPixels], b[kB * kPixels], c[kC * kPixels];
  size_t used = 0;
  for (int part = 0; part < (dim == 0 ? 2 : 1); ++part) {
    for (int n = 0; n < batch; ++n) {
      conv1x1(n, a_w, a_b, kA, a);
      conv1x1(n, b_w, b_b, kB, b);
      conv1x1(n, c_w, c_b, kC, c);
      /* along the channels: c, a, b of image n; along the images: every
       * image's c, then every image's inner (a, b) */
      if (dim == 1 || part == 0) {
        memcpy(expected + used, c, sizeof c);
        used += kC * kPixels;
      }
      if (dim == 1 || part == 1) {
        memcpy(expected + used, a, sizeof a);
        used += kA * kPixels;
        memcpy(expected + used, b, sizeof b);
        used += kB * kPixels;
      }
    }
  }
  for (size_t i = 0; i < used; ++i) expected[i] = expected[i] > 0.0f ? expected[i] : 0.0f;
  return used;
}

static int set_threads(int threads) {
  char text[8];
  snprintf(text, sizeof text, "%d", threads);
  const char *keys[] = {"num_threads"}, *vals[] = {text};
  const char *const *out_keys, *const *out_vals;
  int count = 0;
  return configure(keys, vals, 1, 0, &out_keys, &out_vals, &count);
}

/* Loads the graph, runs it twice on `threads` threads into out, unloads. */
static int run(int batch, int dim, int threads, float *out) {
  char json[kGraphSize];
  if (!graph_json(json, sizeof json, batch, dim)) return MX_ACC_ERR_INVALID_ARG;
  const uint64_t data_shape[] = {(uint64_t)batch, kIn, 3, 3};
  const uint64_t out_shape[] = {(uint64_t)(dim == 0 ? 2 * batch : batch),
                                (uint64_t)(dim == 0 ? kC : kC + kInner), 3, 3};
  static const uint64_t a_w_shape[] = {kA, kIn, 1, 1}, a_b_shape[] = {kA},
                        b_w_shape[] = {kB, kIn, 1, 1}, b_b_shape[] = {kB},
                        c_w_shape[] = {kC, kIn, 1, 1}, c_b_shape[] = {kC};
  const char *names[] = {"a_w", "a_b", "b_w", "b_b", "c_w", "c_b"};
  MXTensor weights[] = {host_tensor(a_w, a_w_shape, 4), host_tensor(a_b, a_b_shape, 1),
                        host_tensor(b_w, b_w_shape, 4), host_tensor(b_b, b_b_shape, 1),
                        host_tensor(c_w, c_w_shape, 4), host_tensor(c_b, c_b_shape, 1)};
  const char *in_names[] = {"data"}, *out_names[] = {"relu_output"};
  MXTensor in = host_tensor(data, data_shape, 4), result = host_tensor(out, out_shape, 4);
  int status = set_threads(threads);
  if (status == MX_ACC_OK) status = loadModel("views", json, names, weights, 6, 0);
  for (int k = 0; k < 2 && status == MX_ACC_OK; ++k) {
    memset(out, 0, kOut * sizeof *out);
    status = infer("views", in_names, out_names, &in, &result, 1, 1);
  }
  if (status == MX_ACC_OK) status = unloadModel("views");
  set_threads(1);
  return status;
}

static int close_to(const float *a, const float *b, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (!(fabsf(a[i] - b[i]) <= 1e-5f + 1e-4f * fabsf(b[i]))) return 0;
  }
  return 1;
}

int main(void) {
  fill_pattern(data, kMaxBatch * kIn * kPixels, 1.0f, 0);
  fill_pattern(a_w, kA * kIn, 0.5f, 1);
  fill_pattern(a_b, kA, 0.3f, 2);
  fill_pattern(b_w, kB * kIn, 0.5f, 3);
  fill_pattern(b_b, kB, 0.3f, 4);
  fill_pattern(c_w, kC * kIn, 0.5f, 5);
  fill_pattern(c_b, kC, 0.3f, 6);
  CHECK(initialize(MX_ACC_API_VERSION) == MX_ACC_OK);
  static float out[kOut], expected[kOut];
  const char *const settings[] = {NULL, "0", "1"};
  for (int batch = 1; batch <= kMaxBatch; batch += kMaxBatch - 1) {
    for (int dim = 0; dim <= 1; ++dim) {
      const size_t count = reference(batch, dim, expected);
      for (int s = 0; s < 3; ++s) {
        if (settings[s] == NULL) {
          CHECK(unsetenv("ACC_CPU_REF_IMAGE_SPLIT") == 0);
        } else {
          CHECK(setenv("ACC_CPU_REF_IMAGE_SPLIT", settings[s], 1) == 0);
        }
        for (int threads = 1; threads <= 2; ++threads) {
          CHECK(run(batch, dim, threads, out) == MX_ACC_OK);
          const int ok = close_to(out, expected, count);
          if (!ok) fprintf(stderr, "batch %d, dim %d, split %s, %d threads\n", batch, dim,
                           settings[s] ? settings[s] : "default", threads);
          CHECK(ok);
        }
      }
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
