/*
 * Leak check of a plugin library through its ABI, for tests/hardening/test_leaks.py:
 * dlopens the library (built with AddressSanitizer), then runs CYCLES times
 * each of
 *   - loadModel / infer / unloadModel of a small real graph (convolution,
 *     ReLU, max pooling, flatten, fully connected, softmax),
 *   - mx_alloc / copyToAcc / an imperative executor (accGetExecutor, forward,
 *     release) / copyFromAcc / mx_free,
 * checking every status and the outputs against the first cycle's. It exits
 * without closing the library, so that LeakSanitizer (ASAN_OPTIONS
 * detect_leaks=1) reports every block a cycle lost. It also prints the
 * process's resident set after a warm-up and after the cycles (for the
 * record only: AddressSanitizer's quarantine holds freed memory, so RSS is
 * measured on release builds by test_leaks.py).
 *
 * Usage: test_leak_cycles LIBRARY CYCLES DEV_ID (ACC_LEAK_CONTROL=1: lose one block
 * on purpose, to show that LeakSanitizer reports it)
 * Prints "N passed, N failed"; exits non-zero on failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_ref_fixture.h" /* kGraph, its weights and data, fill(); check.h */
#include "mxnet_acc.h"

/* The ABI, as pointers into the library. */
static int (*p_initialize)(int);
static int (*p_loadModel)(const char *, const char *, const char *const *, const MXTensor *, int,
                          int);
static int (*p_infer)(const char *, const char *const *, const char *const *, const MXTensor *,
                      MXTensor *, int, int);
static int (*p_unloadModel)(const char *);
static int (*p_mx_alloc)(int, size_t, void **);
static int (*p_mx_free)(int, void *);
static int (*p_copyToAcc)(const MXTensor *, const MXTensor *);
static int (*p_copyFromAcc)(const MXTensor *, const MXTensor *);
static int (*p_accGetExecutor)(const char *, const MXTensor *, const MXTensor *, int, int,
                               const char *const *, const char *const *, int, int,
                               MXAccExecutor **);
static const char *(*p_accGetLastError)(void);

/* check.h's CHECK reports accGetLastError(): the library's. */
const char *accGetLastError(void) { return p_accGetLastError ? p_accGetLastError() : "?"; }

enum { kWeights = 4 };
static const char *const kWeightNames[kWeights] = {"conv_w", "conv_b", "fc_w", "fc_b"};
static const uint64_t kWeightShapes[kWeights][4] = {{3, 2, 3, 3}, {3}, {4, 12}, {4}};
static const uint64_t kWeightNdims[kWeights] = {4, 1, 2, 1};
static const uint64_t kDataShape[] = {1, 2, 5, 5}, kOutShape[] = {1, 4};
static float *const weights[kWeights] = {conv_w, conv_b, fc_w, fc_b};

static long rss_kb(void) {
  FILE *file = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (file != NULL) {
    if (fscanf(file, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(file);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* One load / infer / unload; the probabilities go to out. */
static int model_cycle(int dev_id, int cycle, float *out) {
  char id[64];
  snprintf(id, sizeof id, "leak.model%d", cycle);
  const char *names[kWeights + 1];
  MXTensor tensors[kWeights + 1];
  for (int i = 0; i < kWeights; ++i) {
    names[i] = kWeightNames[i];
    tensors[i] = host_tensor(weights[i], kWeightShapes[i], kWeightNdims[i]);
  }
  names[kWeights] = "data";
  tensors[kWeights] = host_tensor(NULL, kDataShape, 4);
  int status = p_loadModel(id, kGraph, names, tensors, kWeights + 1, dev_id);
  if (status != MX_ACC_OK) return status;
  const char *in_names[] = {"data"}, *out_names[] = {"prob_output"};
  MXTensor in = host_tensor(data, kDataShape, 4), output = host_tensor(out, kOutShape, 2);
  status = p_infer(id, in_names, out_names, &in, &output, 1, 1);
  int unloaded = p_unloadModel(id);
  return status != MX_ACC_OK ? status : unloaded;
}

/* mx_alloc, copies, an imperative ReLU and mx_free; the result goes to out. */
static int memory_cycle(int dev_id, int cycle, float *out) {
  static const uint64_t shape[] = {2, 25};
  /* Sizes vary a little from cycle to cycle. */
  size_t bytes = 50 * sizeof(float) + (size_t)(cycle < 0 ? 0 : cycle % 7) * 64;
  void *x = NULL, *y = NULL;
  int status = p_mx_alloc(dev_id, bytes, &x);
  if (status == MX_ACC_OK) status = p_mx_alloc(dev_id, bytes, &y);
  MXTensor host_in = host_tensor(data, shape, 2), host_out = host_tensor(out, shape, 2);
  MXTensor dev_x = host_tensor(x, shape, 2), dev_y = host_tensor(y, shape, 2);
  dev_x.dev_id = dev_y.dev_id = dev_id;
  if (status == MX_ACC_OK) status = p_copyToAcc(&dev_x, &host_in);
  MXAccExecutor *executor = NULL;
  const char *keys[] = {"act_type", "__op_version__"}, *vals[] = {"relu", "1"};
  if (status == MX_ACC_OK) {
    status = p_accGetExecutor("Activation", &dev_x, &dev_y, 1, 1, keys, vals, 2, dev_id,
                              &executor);
  }
  if (status == MX_ACC_OK) status = executor->forward(executor, &dev_x, 1, &dev_y, 1);
  if (executor != NULL) executor->release(executor);
  if (status == MX_ACC_OK) status = p_copyFromAcc(&host_out, &dev_y);
  if (y != NULL && p_mx_free(dev_id, y) != MX_ACC_OK && status == MX_ACC_OK) status = -1;
  if (x != NULL && p_mx_free(dev_id, x) != MX_ACC_OK && status == MX_ACC_OK) status = -1;
  return status;
}

/* The control run's lost block. */
static void *volatile lost;
__attribute__((noinline)) static void leak_control(void) {
  lost = malloc(32);
  lost = NULL;
}

#define LOOKUP(name)                                                         \
  do {                                                                       \
    *(void **)&p_##name = dlsym(library, #name);                             \
    if (p_##name == NULL) {                                                  \
      fprintf(stderr, "%s: no symbol %s\n", argv[1], #name);                 \
      return 2;                                                              \
    }                                                                        \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s LIBRARY CYCLES DEV_ID\n", argv[0]);
    return 2;
  }
  void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  LOOKUP(initialize);
  LOOKUP(loadModel);
  LOOKUP(infer);
  LOOKUP(unloadModel);
  LOOKUP(mx_alloc);
  LOOKUP(mx_free);
  LOOKUP(copyToAcc);
  LOOKUP(copyFromAcc);
  LOOKUP(accGetExecutor);
  LOOKUP(accGetLastError);
  int cycles = atoi(argv[2]), dev_id = atoi(argv[3]);
  fill(conv_w, 54, 0.3f), fill(conv_b, 3, 0.1f), fill(fc_w, 48, 0.2f), fill(fc_b, 4, 0.1f);
  fill(data, 50, 1.0f);
  CHECK(p_initialize(MX_ACC_API_VERSION) == MX_ACC_OK);
  if (getenv("ACC_LEAK_CONTROL") != NULL) leak_control(); /* LeakSanitizer must report it */

  float first[4], probabilities[4], relu[50], first_relu[50];
  int warmup = cycles < 100 ? cycles : 100;
  long rss_start = rss_kb(), rss_warm = 0;
  int model_failures = 0, memory_failures = 0, mismatches = 0;
  CHECK(model_cycle(dev_id, -1, first) == MX_ACC_OK);
  CHECK(memory_cycle(dev_id, -1, first_relu) == MX_ACC_OK);
  for (int cycle = 0; cycle < cycles; ++cycle) {
    if (cycle == warmup) rss_warm = rss_kb();
    if (model_cycle(dev_id, cycle, probabilities) != MX_ACC_OK) {
      if (model_failures++ == 0) fprintf(stderr, "model cycle %d: %s\n", cycle, accGetLastError());
    } else if (memcmp(probabilities, first, sizeof first) != 0) {
      ++mismatches;
    }
    if (memory_cycle(dev_id, cycle, relu) != MX_ACC_OK) {
      if (memory_failures++ == 0) fprintf(stderr, "memory cycle %d: %s\n", cycle, accGetLastError());
    } else if (memcmp(relu, first_relu, sizeof relu) != 0) {
      ++mismatches;
    }
  }
  long rss_end = rss_kb();
  CHECK(model_failures == 0);
  CHECK(memory_failures == 0);
  CHECK(mismatches == 0);
  float sum = 0.0f;
  for (int i = 0; i < 4; ++i) sum += first[i];
  CHECK(fabsf(sum - 1.0f) < 1e-5f); /* softmax */
  printf("cycles %d: rss_kb start %ld after_warmup %ld end %ld\n", cycles, rss_start, rss_warm,
         rss_end);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
