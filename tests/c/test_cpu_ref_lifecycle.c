/*
 * cpu_ref through its ABI entry points, linked directly (no dlopen) so that
 * AddressSanitizer and LeakSanitizer see every allocation: many
 * load/infer/unload, alloc/free and executor create/release cycles, plus the
 * failure paths, must leave nothing behind and touch no invalid memory.
 * Prints "N passed, N failed"; exits non-zero on failure.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mxnet_acc.h"

#include "cpu_ref_fixture.h"
#include "memory.h"


static int load(const char *id) {
  static const uint64_t data_shape[] = {1, 2, 5, 5}, conv_w_shape[] = {3, 2, 3, 3},
                        conv_b_shape[] = {3}, fc_w_shape[] = {4, 12}, fc_b_shape[] = {4};
  const char *names[] = {"conv_w", "conv_b", "fc_w", "fc_b", "data"};
  MXTensor tensors[] = {host_tensor(conv_w, conv_w_shape, 4), host_tensor(conv_b, conv_b_shape, 1),
                        host_tensor(fc_w, fc_w_shape, 2), host_tensor(fc_b, fc_b_shape, 1),
                        host_tensor(NULL, data_shape, 4)};
  return loadModel(id, kGraph, names, tensors, 5, 0);
}

static int run(const char *id, float *probabilities) {
  static const uint64_t data_shape[] = {1, 2, 5, 5}, out_shape[] = {1, 4};
  const char *in_names[] = {"data"}, *out_names[] = {"prob_output"};
  MXTensor in = host_tensor(data, data_shape, 4), out = host_tensor(probabilities, out_shape, 2);
  return infer(id, in_names, out_names, &in, &out, 1, 1);
}

static void test_symbolic_cycles(void) {
  int ids[16], count = -1;
  CHECK(supportedOps(kGraph, NULL, NULL, 0, 0, ids, 16, &count) == MX_ACC_OK);
  CHECK(count == 6 && ids[0] == 3 && ids[5] == 10);
  float first[4] = {0};
  CHECK(load("m") == MX_ACC_OK);
  CHECK(run("m", first) == MX_ACC_OK);
  CHECK(fabsf(first[0] + first[1] + first[2] + first[3] - 1.0f) < 1e-5f);
  CHECK(load("m") == MX_ACC_ERR_STATE);
  CHECK(unloadModel("m") == MX_ACC_OK);
  for (int cycle = 0; cycle < 300; ++cycle) {
    float again[4];
    int ok = load("cycle") == MX_ACC_OK && run("cycle", again) == MX_ACC_OK &&
             memcmp(again, first, sizeof first) == 0 && unloadModel("cycle") == MX_ACC_OK;
    if (!ok) {
      CHECK(ok);
      return;
    }
  }
  ++passed;
  CHECK(run("cycle", first) == MX_ACC_ERR_NOT_FOUND);
  CHECK(unloadModel("cycle") == MX_ACC_ERR_NOT_FOUND);
}

static void test_failed_loads_leave_nothing(void) {
  /* Truncations of the graph at many points: each must fail cleanly. */
  char broken[sizeof kGraph];
  const char *names[] = {"data"};
  static const uint64_t shape[] = {1, 2, 5, 5};
  MXTensor tensor = host_tensor(NULL, shape, 4);
  for (size_t length = 0; length + 1 < sizeof kGraph; length += 7) {
    memcpy(broken, kGraph, length);
    broken[length] = '\0';
    int status = loadModel("broken", broken, names, &tensor, 1, 0);
    if (status == MX_ACC_OK) {
      CHECK(status != MX_ACC_OK);
      unloadModel("broken");
      return;
    }
  }
  ++passed;
  CHECK(load("") == MX_ACC_ERR_INVALID_ARG);
  CHECK(loadModel("x", kGraph, names, &tensor, 1, 5) == MX_ACC_ERR_DEVICE);
  CHECK(loadModel("x", kGraph, names, &tensor, 1, 0) == MX_ACC_ERR_INVALID_ARG); /* no weights */
  CHECK(strstr(accGetLastError(), "weight \"conv_w\" is missing") != NULL);
}

static void test_imperative_cycles(void) {
  static const uint64_t shape[] = {2, 8};
  for (int cycle = 0; cycle < 300; ++cycle) {
    void *in = NULL, *out = NULL;
    MXAccExecutor *executor = NULL;
    float host_in[16], host_out[16];
    fill(host_in, 16, 2.0f);
    MXTensor device_in = {NULL, shape, 2, kFloat32, 0, NULL, 0}, device_out = device_in;
    MXTensor host_a = host_tensor(host_in, shape, 2), host_b = host_tensor(host_out, shape, 2);
    const char *keys[] = {"act_type", "__op_version__"}, *vals[] = {"relu", "1"};
    int ok = mx_alloc(0, sizeof host_in, &in) == MX_ACC_OK &&
             mx_alloc(0, sizeof host_out, &out) == MX_ACC_OK;
    device_in.data = in;
    device_out.data = out;
    ok = ok && copyToAcc(&device_in, &host_a) == MX_ACC_OK &&
         accGetExecutor("Activation", &device_in, &device_out, 1, 1, keys, vals, 2, 0,
                        &executor) == MX_ACC_OK &&
         executor->forward(executor, &device_in, 1, &device_out, 1) == MX_ACC_OK &&
         copyFromAcc(&host_b, &device_out) == MX_ACC_OK;
    for (int i = 0; ok && i < 16; ++i) ok = host_out[i] == (host_in[i] > 0 ? host_in[i] : 0);
    if (executor != NULL) executor->release(executor);
    ok = ok && mx_free(0, in) == MX_ACC_OK && mx_free(0, out) == MX_ACC_OK;
    if (!ok) {
      CHECK(ok);
      return;
    }
  }
  ++passed;
  /* Allocations left behind are reclaimed by mx_releaseAll. */
  void *left = NULL;
  CHECK(mx_alloc(0, 1000, &left) == MX_ACC_OK && left != NULL);
  CHECK(mx_alloc(0, 0, &left) == MX_ACC_OK && left != NULL);
  CHECK(mx_releaseAll(0) == MX_ACC_OK);
  CHECK(mx_free(0, left) == MX_ACC_ERR_NOT_FOUND);
}

/* data (2, 4) -> SliceChannel into two (2, 2) halves, both heads. */
static const char kSplitGraph[] =
    "{\"nodes\":["
    VAR("data", "[2,4]", "data") ","
    "{\"op\":\"SliceChannel\",\"name\":\"split\",\"attrs\":{\"__out_shapes__\":"
    "\"[[2,2],[2,2]]\",\"__out_dtypes__\":\"[0,0]\",\"num_outputs\":\"2\",\"axis\":\"1\"},"
    "\"inputs\":[[0,0,0]]}"
    "],\"arg_nodes\":[0],\"heads\":[[1,0,0],[1,1,0]]}";

static void test_multiple_outputs(void) {
  static const uint64_t in_shape[] = {2, 4}, half[] = {2, 2};
  float values[8], left[4], right[4];
  fill(values, 8, 1.0f);
  const float want_left[4] = {values[0], values[1], values[4], values[5]};
  const float want_right[4] = {values[2], values[3], values[6], values[7]};

  /* Symbolic: heads "split_output0" and "split_output1", in either order. */
  const char *in_names[] = {"data"}, *out_names[] = {"split_output1", "split_output0"};
  MXTensor in = host_tensor(values, in_shape, 2);
  MXTensor outs[] = {host_tensor(right, half, 2), host_tensor(left, half, 2)};
  for (int cycle = 0; cycle < 100; ++cycle) {
    memset(left, 0, sizeof left);
    memset(right, 0, sizeof right);
    int ok = loadModel("split", kSplitGraph, in_names, &in, 1, 0) == MX_ACC_OK &&
             infer("split", in_names, out_names, &in, outs, 1, 2) == MX_ACC_OK &&
             memcmp(left, want_left, sizeof left) == 0 &&
             memcmp(right, want_right, sizeof right) == 0 && unloadModel("split") == MX_ACC_OK;
    if (!ok) {
      CHECK(ok);
      return;
    }
  }
  ++passed;

  /* Imperative: two outputs; an output may not overlap an input. */
  void *device_in = NULL, *device_out[2] = {NULL, NULL};
  CHECK(mx_alloc(0, sizeof values, &device_in) == MX_ACC_OK);
  CHECK(mx_alloc(0, sizeof left, &device_out[0]) == MX_ACC_OK);
  CHECK(mx_alloc(0, sizeof right, &device_out[1]) == MX_ACC_OK);
  MXTensor d_in = {device_in, in_shape, 2, kFloat32, 0, NULL, 0};
  MXTensor d_out[2] = {{device_out[0], half, 2, kFloat32, 0, NULL, 0},
                       {device_out[1], half, 2, kFloat32, 0, NULL, 0}};
  MXTensor h_left = host_tensor(left, half, 2), h_right = host_tensor(right, half, 2);
  const char *keys[] = {"num_outputs", "axis"}, *vals[] = {"2", "-1"};
  MXAccExecutor *executor = NULL;
  CHECK(copyToAcc(&d_in, &in) == MX_ACC_OK);
  CHECK(accGetExecutor("split", &d_in, d_out, 1, 1, keys, vals, 2, 0, &executor) ==
        MX_ACC_ERR_INVALID_ARG); /* one output for a two-way split */
  CHECK(accGetExecutor("split", &d_in, d_out, 1, 2, keys, vals, 2, 0, &executor) == MX_ACC_OK);
  if (executor != NULL) {
    memset(left, 0, sizeof left);
    CHECK(executor->forward(executor, &d_in, 1, d_out, 2) == MX_ACC_OK);
    CHECK(copyFromAcc(&h_left, &d_out[0]) == MX_ACC_OK &&
          memcmp(left, want_left, sizeof left) == 0);
    CHECK(copyFromAcc(&h_right, &d_out[1]) == MX_ACC_OK &&
          memcmp(right, want_right, sizeof right) == 0);
    CHECK(executor->forward(executor, &d_in, 1, d_out, 1) == MX_ACC_ERR_INVALID_ARG);
    MXTensor aliased[2] = {d_out[0], d_out[0]};
    CHECK(executor->forward(executor, &d_in, 1, aliased, 2) == MX_ACC_ERR_INVALID_ARG);
    CHECK(strstr(accGetLastError(), "output 1 overlaps output 0") != NULL);
    executor->release(executor);
  }
  /* An output written over its own input. */
  static const uint64_t flat[] = {8};
  MXTensor d_flat = {device_in, flat, 1, kFloat32, 0, NULL, 0};
  const char *no_keys[] = {"__op_version__"}, *no_vals[] = {"1"};
  executor = NULL;
  CHECK(accGetExecutor("exp", &d_flat, &d_flat, 1, 1, no_keys, no_vals, 1, 0, &executor) ==
        MX_ACC_OK);
  if (executor != NULL) {
    CHECK(executor->forward(executor, &d_flat, 1, &d_flat, 1) == MX_ACC_ERR_INVALID_ARG);
    CHECK(strstr(accGetLastError(), "output 0 overlaps input 0") != NULL);
    executor->release(executor);
  }
  CHECK(mx_free(0, device_in) == MX_ACC_OK && mx_free(0, device_out[0]) == MX_ACC_OK &&
        mx_free(0, device_out[1]) == MX_ACC_OK);
}

static void test_configure(void) {
  const char *keys[] = {"num_threads", "query", "query"}, *vals[] = {"2", "ops", "memory"};
  const char *const *out_keys, *const *out_vals;
  int count = 0;
  CHECK(configure(keys, vals, 3, 0, &out_keys, &out_vals, &count) == MX_ACC_OK);
  CHECK(count == 4 && strcmp(out_keys[0], "num_threads") == 0 && strcmp(out_vals[0], "2") == 0);
  CHECK(strstr(out_vals[1], "Convolution:1") != NULL);
  CHECK(strcmp(out_keys[2], "allocations") == 0 && strcmp(out_vals[2], "0") == 0);
  const char *bad[] = {"num_threads"}, *bad_value[] = {"many"};
  CHECK(configure(bad, bad_value, 1, 0, &out_keys, &out_vals, &count) == MX_ACC_ERR_INVALID_ARG);
  CHECK(configure(keys, vals, 1, 3, &out_keys, &out_vals, &count) == MX_ACC_ERR_DEVICE);
  /* The whole operator list, aliases included, even asked for three times
   * in one call. */
  const char *three[] = {"query", "query", "query"}, *ops[] = {"ops", "ops", "ops"};
  CHECK(configure(three, ops, 3, 0, &out_keys, &out_vals, &count) == MX_ACC_OK && count == 3);
  CHECK(strstr(out_vals[2], "SliceChannel:1,split:1") != NULL);
  CHECK(strstr(out_vals[2], "batch_dot:1") != NULL);
}

/* A model's buffers: 64-byte lines; from 2 MiB on, whole 2 MiB pages. */
static void test_buffer_alloc(void) {
  const size_t huge = (size_t)2 << 20;
  unsigned char *none = cr_buffer_alloc(0), *small = cr_buffer_alloc(100);
  unsigned char *large = cr_buffer_alloc(huge + 1);
  CHECK(none != NULL && (uintptr_t)none % 64 == 0);
  CHECK(small != NULL && (uintptr_t)small % 64 == 0);
  CHECK(large != NULL && (uintptr_t)large % huge == 0);
  if (small != NULL) memset(small, 1, 128);    /* rounded up to a line */
  if (large != NULL) memset(large, 1, 2 * huge); /* rounded up to a page */
  CHECK(cr_buffer_alloc(SIZE_MAX - 10) == NULL);
  free(none);
  free(small);
  free(large);
}

int main(void) {
  test_buffer_alloc();
  CHECK(getAccApiVersion() == MX_ACC_API_VERSION);
  CHECK(getNumAcc() == 0); /* before initialize */
  CHECK(initialize(200) == MX_ACC_ERR_VERSION);
  CHECK(strstr(accGetLastError(), "host of ABI 2.0") != NULL);
  CHECK(initialize(MX_ACC_API_VERSION) == MX_ACC_OK);
  CHECK(getNumAcc() == 1 && supportsImperative() == 1);
  char name[MX_ACC_NAME_MAX];
  CHECK(getAccName(name, sizeof name) == MX_ACC_OK && strcmp(name, "cpu_ref") == 0);
  CHECK(getAccName(name, 3) == MX_ACC_ERR_INVALID_ARG);
  fill(data, 50, 1.0f);
  fill(conv_w, 54, 0.5f);
  fill(conv_b, 3, 0.1f);
  fill(fc_w, 48, 0.3f);
  fill(fc_b, 4, 0.2f);
  test_symbolic_cycles();
  test_failed_loads_leave_nothing();
  test_imperative_cycles();
  test_multiple_outputs();
  test_configure();
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
