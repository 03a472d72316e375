/*
 * What the mlu_sim C tests that go through the ABI share (test_mlu_cnml.c,
 * test_mlu_model_file.c): an annotated net with a folded batch norm and a
 * weight that flows as data, its variables' values and the helpers that
 * load and run it; besides check.h. Included by one test program each, so
 * the static definitions are private to it.
 */
#ifndef TESTS_C_MLU_FIXTURE_H_
#define TESTS_C_MLU_FIXTURE_H_

#include <stdint.h>

#include "check.h"
#include "mxnet_acc.h"

/* data -> conv -> batch norm (folded) -> + offset (a weight flowing as data)
 * -> relu -> max pool -> flatten -> fully connected -> softmax; its
 * variables, data last, and their values (var_values[i] holds
 * kVarShapes[i]: 75 floats at most). */
static const char kGraph[] =
    "{\"nodes\":["
    VAR("data", "[1,2,5,5]", "data") ","
    VAR("conv_w", "[3,2,3,3]", "weight") ","
    VAR("conv_b", "[3]", "weight") ","
    NODE("Convolution", "conv", OUT("[1,3,5,5]") ",\"kernel\":\"(3, 3)\",\"pad\":\"(1, 1)\","
         "\"num_filter\":\"3\"", "[0,0,0],[1,0,0],[2,0,0]") ","
    VAR("gamma", "[3]", "weight") "," VAR("beta", "[3]", "weight") ","
    VAR("mean", "[3]", "weight") "," VAR("var", "[3]", "weight") ","
    NODE("BatchNorm", "bn", OUT("[1,3,5,5]") ",\"fix_gamma\":\"False\"",
         "[3,0,0],[4,0,0],[5,0,0],[6,0,0],[7,0,0]") ","
    VAR("offset", "[1,3,5,5]", "weight") ","
    NODE("elemwise_add", "add", OUT("[1,3,5,5]"), "[8,0,0],[9,0,0]") ","
    NODE("Activation", "relu", OUT("[1,3,5,5]") ",\"act_type\":\"relu\"", "[10,0,0]") ","
    NODE("Pooling", "pool", OUT("[1,3,2,2]") ",\"kernel\":\"(2, 2)\",\"stride\":\"(2, 2)\"",
         "[11,0,0]") ","
    NODE("Flatten", "flat", OUT("[1,12]"), "[12,0,0]") ","
    VAR("fc_w", "[4,12]", "weight") "," VAR("fc_b", "[4]", "weight") ","
    NODE("FullyConnected", "fc", OUT("[1,4]") ",\"num_hidden\":\"4\"",
         "[13,0,0],[14,0,0],[15,0,0]") ","
    NODE("softmax", "prob", OUT("[1,4]"), "[16,0,0]")
    "],\"arg_nodes\":[0,1,2,4,5,6,7,9,14,15],\"heads\":[[17,0,0]]}";

enum { kNumVars = 10 };
static const char *const kVarNames[kNumVars] = {"conv_w", "conv_b", "gamma", "beta", "mean",
                                                "var", "offset", "fc_w", "fc_b", "data"};
static const uint64_t kVarShapes[kNumVars][4] = {{3, 2, 3, 3}, {3}, {3}, {3}, {3}, {3},
                                                 {1, 3, 5, 5}, {4, 12}, {4}, {1, 2, 5, 5}};
static const uint64_t kVarNdims[kNumVars] = {4, 1, 1, 1, 1, 1, 4, 2, 1, 4};
static float var_values[kNumVars][75];

/* count pseudo-random values in [-1, 1], reproducible from seed. */
static inline void fill(float *values, int64_t count, unsigned seed) {
  for (int64_t i = 0; i < count; ++i) {
    seed = seed * 1103515245u + 12345u;
    values[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
}

/* Loads kGraph with var_values as model id on dev_id. */
static inline int load_model(const char *id, int dev_id) {
  MXTensor tensors[kNumVars];
  for (int i = 0; i < kNumVars; ++i) {
    tensors[i] = host_tensor(i + 1 < kNumVars ? var_values[i] : NULL, kVarShapes[i], kVarNdims[i]);
  }
  return loadModel(id, kGraph, kVarNames, tensors, kNumVars, dev_id);
}

/* Runs the model; weight k (0 .. kNumVars - 2) is passed again if >= 0. */
static inline int run_model(const char *id, float *probabilities, int weight) {
  static const uint64_t out_shape[] = {1, 4};
  const char *in_names[2] = {"data", weight >= 0 ? kVarNames[weight] : NULL};
  const char *out_names[] = {"prob_output"};
  MXTensor in[2] = {host_tensor(var_values[kNumVars - 1], kVarShapes[kNumVars - 1], 4),
                    host_tensor(weight >= 0 ? var_values[weight] : NULL,
                                weight >= 0 ? kVarShapes[weight] : NULL,
                                weight >= 0 ? kVarNdims[weight] : 0)};
  MXTensor out = host_tensor(probabilities, out_shape, 2);
  return infer(id, in_names, out_names, in, &out, weight >= 0 ? 2 : 1, 1);
}

#endif /* TESTS_C_MLU_FIXTURE_H_ */
