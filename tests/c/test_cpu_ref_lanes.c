/*
 * cpu_ref's lanes: a batch run image by image on several threads, each
 * thread taking the next image and running it through on one thread, in
 * memory of its own (plugins/cpu_ref/model/lanes.c, run_lanes). Linked directly,
 * so that the same program runs under AddressSanitizer and under
 * ThreadSanitizer (tests/c/test_c_cpu_ref.py). The results on 2 and 3 threads
 * must be those of 1 thread bit for bit, by default (lanes, then the
 * classifier, 1.3 MB of weights, once on the batch) and with
 * ACC_CPU_REF_IMAGE_SPLIT=1 (every step per image, in lanes), and agree
 * with the layer-by-layer run. Prints "N passed, N failed".
 */
#define _POSIX_C_SOURCE 200112L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mxnet_acc.h"

enum { kBatch = 5, kHidden = 640, kFeatures = 512 };

/* data -> Convolution -> relu (a head too) -> max Pooling -> Flatten ->
 * FullyConnected (512 -> 640) -> softmax */
static const char kGraph[] =
    "{\"nodes\":["
    VAR("data", "[5,2,16,16]", "data") ","
    VAR("conv_w", "[8,2,3,3]", "weight") ","
    VAR("conv_b", "[8]", "weight") ","
    NODE("Convolution", "conv", OUT("[5,8,16,16]") ",\"kernel\":\"(3, 3)\",\"pad\":\"(1, 1)\","
         "\"num_filter\":\"8\"", "[0,0,0],[1,0,0],[2,0,0]") ","
    NODE("Activation", "relu", OUT("[5,8,16,16]") ",\"act_type\":\"relu\"", "[3,0,0]") ","
    NODE("Pooling", "pool", OUT("[5,8,8,8]") ",\"kernel\":\"(2, 2)\",\"stride\":\"(2, 2)\","
         "\"pool_type\":\"max\"", "[4,0,0]") ","
    NODE("Flatten", "flat", OUT("[5,512]"), "[5,0,0]") ","
    VAR("fc_w", "[640,512]", "weight") ","
    VAR("fc_b", "[640]", "weight") ","
    NODE("FullyConnected", "fc", OUT("[5,640]") ",\"num_hidden\":\"640\"",
         "[6,0,0],[7,0,0],[8,0,0]") ","
    NODE("softmax", "prob", OUT("[5,640]"), "[9,0,0]")
    "],\"arg_nodes\":[0,1,2,7,8],\"heads\":[[10,0,0],[4,0,0]]}";

static float data[kBatch * 2 * 16 * 16], conv_w[8 * 2 * 9], conv_b[8];
static float fc_w[kHidden * kFeatures], fc_b[kHidden];

/* Outputs of one run: the probabilities and the relu head. */
typedef struct outputs {
  float prob[kBatch * kHidden];
  float relu[kBatch * 8 * 16 * 16];
} outputs;

static int set_threads(int threads) {
  char text[8];
  snprintf(text, sizeof text, "%d", threads);
  const char *keys[] = {"num_threads"}, *vals[] = {text};
  const char *const *out_keys, *const *out_vals;
  int count = 0;
  return configure(keys, vals, 1, 0, &out_keys, &out_vals, &count);
}

/* Loads the model, runs it three times on `threads` threads (the last
 * run's outputs in *out) and unloads it. */
static int run(int threads, outputs *out) {
  static const uint64_t data_shape[] = {kBatch, 2, 16, 16}, conv_w_shape[] = {8, 2, 3, 3},
                        conv_b_shape[] = {8}, fc_w_shape[] = {kHidden, kFeatures},
                        fc_b_shape[] = {kHidden}, prob_shape[] = {kBatch, kHidden},
                        relu_shape[] = {kBatch, 8, 16, 16};
  const char *names[] = {"conv_w", "conv_b", "fc_w", "fc_b", "data"};
  MXTensor tensors[] = {host_tensor(conv_w, conv_w_shape, 4), host_tensor(conv_b, conv_b_shape, 1),
                        host_tensor(fc_w, fc_w_shape, 2), host_tensor(fc_b, fc_b_shape, 1),
                        host_tensor(NULL, data_shape, 4)};
  const char *in_names[] = {"data"}, *out_names[] = {"prob_output", "relu_output"};
  MXTensor in = host_tensor(data, data_shape, 4);
  MXTensor outs[] = {host_tensor(out->prob, prob_shape, 2), host_tensor(out->relu, relu_shape, 4)};
  int status = set_threads(threads);
  if (status == MX_ACC_OK) status = loadModel("lanes", kGraph, names, tensors, 5, 0);
  for (int k = 0; k < 3 && status == MX_ACC_OK; ++k) {
    memset(out, 0, sizeof *out);
    status = infer("lanes", in_names, out_names, &in, outs, 1, 2);
  }
  if (status == MX_ACC_OK) status = unloadModel("lanes");
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
  fill_pattern(data, kBatch * 2 * 16 * 16, 1.0f, 0);
  fill_pattern(conv_w, 8 * 2 * 9, 0.5f, 1);
  fill_pattern(conv_b, 8, 0.1f, 2);
  fill_pattern(fc_w, kHidden * kFeatures, 0.05f, 3);
  fill_pattern(fc_b, kHidden, 0.1f, 4);
  CHECK(initialize(MX_ACC_API_VERSION) == MX_ACC_OK);
  static outputs layered, single, many;
  CHECK(setenv("ACC_CPU_REF_IMAGE_SPLIT", "0", 1) == 0);
  CHECK(run(1, &layered) == MX_ACC_OK);
  const char *const settings[] = {NULL, "1"};
  for (int s = 0; s < 2; ++s) {
    if (settings[s] == NULL) {
      CHECK(unsetenv("ACC_CPU_REF_IMAGE_SPLIT") == 0);
    } else {
      CHECK(setenv("ACC_CPU_REF_IMAGE_SPLIT", settings[s], 1) == 0);
    }
    CHECK(run(1, &single) == MX_ACC_OK);
    CHECK(close_to(single.prob, layered.prob, kBatch * kHidden));
    CHECK(close_to(single.relu, layered.relu, sizeof single.relu / sizeof(float)));
    for (int threads = 2; threads <= 3; ++threads) {
      CHECK(run(threads, &many) == MX_ACC_OK);
      CHECK(memcmp(many.prob, single.prob, sizeof many.prob) == 0);
      CHECK(memcmp(many.relu, single.relu, sizeof many.relu) == 0);
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
