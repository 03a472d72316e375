/*
 * A test plugin that crashes, aborts, exits or hangs when asked to
 * (tests/isolate/test_isolation.py): it runs float32 relu, as graphs of
 * Activation(act_type="relu") nodes through loadModel()/infer() and as an
 * imperative executor, on one device whose memory is ordinary malloc()
 * memory. It is compiled with the sources of plugins/common; the model
 * table, the block table and the parsing are relu_plugin.h's.
 *
 * A failure is armed as "WHERE:HOW", by configure(fail="WHERE:HOW") (and
 * disarmed by fail="none") or, before the first configure(), by the
 * environment variable CRASHACC_FAIL:
 *   WHERE  initialize | supported | load | infer | forward | alloc | copy
 *   HOW    segv (writes through NULL) | abort | exit (_exit(3)) | exit0
 *          (_exit(0)) | hang (sleeps for ever) | error (returns
 *          MX_ACC_ERR_INTERNAL) | claim8g, claim2p40 (writes an 8-byte
 *          length header claiming 8 GiB or 2^40 bytes on every socket of
 *          the process, the framing of isolated mode, then hangs)
 * configure(query="stats") answers "pid" (the process the plugin runs in)
 * and "infers".
 */
#define _POSIX_C_SOURCE 200809L /* S_ISSOCK, fstat under -std=c11 */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph.h"
#include "mxnet_acc.h"
#include "relu_plugin.h"
#include "status.h"

#define CRASH_MAX_MODELS 64
#define CRASH_MAX_BLOCKS 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char armed[64];
static int armed_set;
static long infers;

/* ---- failing on request -------------------------------------------------- */

/* Writes an 8-byte little-endian length on every socket descriptor. */
static void claim_length(uint64_t length) {
  unsigned char header[8];
  for (int b = 0; b < 8; ++b) header[b] = (unsigned char)(length >> (8 * b));
  for (int fd = 3; fd < 1024; ++fd) {
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
      ssize_t written = write(fd, header, sizeof header);
      (void)written;
    }
  }
}

static int maybe_fail(const char *where) {
  char spec[64];
  pthread_mutex_lock(&lock);
  const char *source = armed_set ? armed : getenv("CRASHACC_FAIL");
  snprintf(spec, sizeof spec, "%s", source != NULL ? source : "");
  pthread_mutex_unlock(&lock);
  size_t length = strlen(where);
  if (strncmp(spec, where, length) != 0 || spec[length] != ':') return MX_ACC_OK;
  const char *how = spec + length + 1;
  if (strcmp(how, "segv") == 0) {
    volatile int *nowhere = NULL;
    *nowhere = 1;
  } else if (strcmp(how, "abort") == 0) {
    abort();
  } else if (strcmp(how, "exit") == 0) {
    _exit(3);
  } else if (strcmp(how, "exit0") == 0) {
    _exit(0);
  } else if (strcmp(how, "claim8g") == 0 || strcmp(how, "claim2p40") == 0) {
    claim_length(strcmp(how, "claim8g") == 0 ? (uint64_t)8 << 30 : (uint64_t)1 << 40);
    for (;;) sleep(1);
  } else if (strcmp(how, "hang") == 0) {
    for (;;) sleep(1);
  } else if (strcmp(how, "error") == 0) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "%s failed on request", where);
  }
  return MX_ACC_OK;
}

/* ---- identification ------------------------------------------------------ */

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) {
  acc_clear_error();
  int status = maybe_fail("initialize");
  return status != MX_ACC_OK ? status : relu_check_version("crashacc", version);
}

MX_ACC_EXPORT int getAccName(char *name, size_t size) {
  return relu_copy_name(name, size, "crashacc") ? MX_ACC_OK
                                                  : acc_fail(MX_ACC_ERR_INVALID_ARG, "buffer");
}

MX_ACC_EXPORT int getNumAcc(void) { return 1; }

MX_ACC_EXPORT int supportsImperative(void) { return 1; }

MX_ACC_EXPORT const char *accGetLastError(void) { return acc_last_error(); }

/* ---- memory -------------------------------------------------------------- */

static relu_block blocks[CRASH_MAX_BLOCKS]; /* under lock */
static size_t num_blocks;

MX_ACC_EXPORT int mx_alloc(int dev_id, size_t size, void **ptr) {
  acc_clear_error();
  int status = relu_check_device(dev_id, 1);
  if (status == MX_ACC_OK) status = maybe_fail("alloc");
  if (status != MX_ACC_OK) return status;
  if (ptr == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "ptr is NULL");
  switch (relu_alloc_block(&lock, blocks, &num_blocks, CRASH_MAX_BLOCKS, size, ptr)) {
    case RELU_ALLOC_NO_MEMORY:
      return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "%zu bytes", size);
    case RELU_ALLOC_FULL:
      return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "more than %d blocks", CRASH_MAX_BLOCKS);
    default:
      return MX_ACC_OK;
  }
}

MX_ACC_EXPORT int mx_free(int dev_id, void *ptr) {
  acc_clear_error();
  int status = relu_check_device(dev_id, 1);
  if (status != MX_ACC_OK || ptr == NULL) return status;
  if (!relu_forget_block(&lock, blocks, &num_blocks, ptr)) {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "%p was not allocated", ptr);
  }
  free(ptr);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int mx_releaseAll(int dev_id) {
  acc_clear_error();
  int status = relu_check_device(dev_id, 1);
  if (status == MX_ACC_OK) relu_release_blocks(&lock, blocks, &num_blocks);
  return status;
}

static int copy(const MXTensor *dst, const MXTensor *src) {
  acc_clear_error();
  int status = maybe_fail("copy");
  if (status != MX_ACC_OK) return status;
  if (dst == NULL || src == NULL || dst->dtype != kFloat32 || src->dtype != kFloat32 ||
      relu_tensor_count(dst) != relu_tensor_count(src)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "copies are of float32 tensors of one size");
  }
  memcpy(dst->data, src->data, relu_tensor_count(src) * sizeof(float));
  return MX_ACC_OK;
}

MX_ACC_EXPORT int copyToAcc(const MXTensor *dst, const MXTensor *src) { return copy(dst, src); }

MX_ACC_EXPORT int copyFromAcc(const MXTensor *dst, const MXTensor *src) { return copy(dst, src); }

/* ---- relu ------------------------------------------------------------------ */

static void relu(const MXTensor *in, const MXTensor *out) {
  const float *x = in->data;
  float *y = out->data;
  for (uint64_t k = 0, n = relu_tensor_count(in); k < n; ++k) y[k] = x[k] > 0.0f ? x[k] : 0.0f;
}

static int is_relu(const char *op, const char *act_type) {
  return op != NULL && strcmp(op, "Activation") == 0 && act_type != NULL &&
         strcmp(act_type, "relu") == 0;
}

/* ---- imperative ------------------------------------------------------------ */

static int executor_forward(MXAccExecutor *self, const MXTensor *inputs, int num_in,
                            const MXTensor *outputs, int num_out) {
  (void)self;
  acc_clear_error();
  int status = maybe_fail("forward");
  if (status != MX_ACC_OK) return status;
  if (num_in != 1 || num_out != 1) return acc_fail(MX_ACC_ERR_INVALID_ARG, "relu: 1 in, 1 out");
  relu(&inputs[0], &outputs[0]);
  return MX_ACC_OK;
}

static void executor_release(MXAccExecutor *self) { free(self); }

MX_ACC_EXPORT int accGetExecutor(const char *op_name, const MXTensor *inputs,
                                 const MXTensor *outputs, int num_in, int num_out,
                                 const char *const *attr_keys, const char *const *attr_vals,
                                 int num_attrs, int dev_id, MXAccExecutor **executor) {
  acc_clear_error();
  int status = relu_check_device(dev_id, 1);
  if (status != MX_ACC_OK) return status;
  const char *act_type = NULL;
  for (int i = 0; i < num_attrs; ++i) {
    if (strcmp(attr_keys[i], "act_type") == 0) act_type = attr_vals[i];
  }
  if (!is_relu(op_name, act_type) || num_in != 1 || num_out != 1 ||
      inputs[0].dtype != kFloat32 || outputs[0].dtype != kFloat32) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "crashacc runs float32 relu only");
  }
  MXAccExecutor *made = calloc(1, sizeof *made);
  if (made == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "executor");
  made->forward = executor_forward;
  made->release = executor_release;
  *executor = made;
  return MX_ACC_OK;
}

/* ---- symbolic -------------------------------------------------------------- */

static relu_model models[CRASH_MAX_MODELS];
static relu_table table = {&lock, models, CRASH_MAX_MODELS, NULL};

/* Looser than relu_node_supported(): any operator version, any input dtype. */
static int node_supported(const acc_graph *graph, const acc_node *node) {
  (void)graph;
  return is_relu(node->op, acc_node_attr(node, "act_type")) && node->num_inputs == 1 &&
         node->num_outputs == 1 && node->out_dtypes[0] == kFloat32;
}

MX_ACC_EXPORT int supportedOps(const char *json, const char *const *data_names,
                               const MXTensor *data, int num_data, int dev_id, int *ids,
                               int ids_capacity, int *num_ids) {
  (void)data_names, (void)data, (void)num_data;
  acc_clear_error();
  int status = relu_check_device(dev_id, 1);
  if (status == MX_ACC_OK) status = maybe_fail("supported");
  if (status != MX_ACC_OK) return status;
  return relu_supported_ops("", json, node_supported, ids, ids_capacity, num_ids);
}

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  (void)data_names, (void)data, (void)num_data;
  acc_clear_error();
  int status = relu_check_device(dev_id, 1);
  if (status == MX_ACC_OK) status = maybe_fail("load");
  if (status == MX_ACC_OK) status = relu_check_model_id("", model_id);
  if (status != MX_ACC_OK) return status;
  /* Any graph loads: infer() checks only what it runs. */
  return relu_table_load(&table, "", json, 0, model_id, dev_id);
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  return relu_table_unload(&table, model_id);
}

/* The graph as a chain of relus: every operator node reads one value, so
 * each head is relu of its input variable; values[i] is node i's value. */
static int run(const acc_graph *graph, const char *const *in_names, const MXTensor *in_data,
               int num_in, const char *const *out_names, const MXTensor *out_data,
               int num_out) {
  for (size_t h = 0; h < graph->num_heads; ++h) {
    char name[RELU_NAME_MAX];
    int out = 0;
    int status = relu_head_output(graph, h, out_names, num_out, name, &out);
    if (status != MX_ACC_OK) return status;
    uint32_t node = graph->heads[h].node;
    while (graph->nodes[node].op != NULL) node = graph->nodes[node].inputs[0].node;
    int in = relu_find_name(in_names, num_in, graph->nodes[node].name);
    if (in < 0) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "input %s is missing", graph->nodes[node].name);
    }
    if (relu_tensor_count(&in_data[in]) != relu_tensor_count(&out_data[out])) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: sizes differ", name);
    }
    relu(&in_data[in], &out_data[out]);
  }
  return MX_ACC_OK;
}

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  acc_clear_error();
  int status = maybe_fail("infer");
  if (status != MX_ACC_OK) return status;
  if (model_id == NULL || num_in < 0 || num_out < 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "invalid arguments");
  }
  pthread_mutex_lock(&lock);
  relu_model *found = relu_table_find(&table, model_id);
  status = found == NULL
               ? acc_fail(MX_ACC_ERR_NOT_FOUND, "model %s is not loaded", model_id)
               : run(found->graph, in_names, in_data, num_in, out_names, out_data, num_out);
  if (status == MX_ACC_OK) ++infers;
  pthread_mutex_unlock(&lock);
  return status;
}

/* ---- configure --------------------------------------------------------------- */

static relu_answer answer;

/* The answer to query=stats; returns its count. */
static int answer_stats(void) {
  relu_answer_reset(&answer);
  pthread_mutex_lock(&lock);
  long counted = infers;
  pthread_mutex_unlock(&lock);
  relu_answer_number(&answer, "pid", (long)getpid());
  relu_answer_number(&answer, "infers", counted);
  return answer.count;
}

MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  acc_clear_error();
  int status = relu_check_device(dev_id, 1);
  if (status != MX_ACC_OK) return status;
  if (out_keys == NULL || out_vals == NULL || num_out == NULL ||
      (num_in > 0 && (in_keys == NULL || in_vals == NULL))) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "NULL argument");
  }
  *out_keys = answer.keys;
  *out_vals = answer.vals;
  *num_out = 0;
  for (int i = 0; i < num_in; ++i) {
    const char *key = in_keys[i], *value = in_vals[i];
    if (strcmp(key, "fail") == 0) {
      pthread_mutex_lock(&lock);
      snprintf(armed, sizeof armed, "%s", value);
      armed_set = 1;
      pthread_mutex_unlock(&lock);
    } else if (strcmp(key, "query") == 0 && strcmp(value, "keys") == 0) {
      *num_out = relu_answer_one(&answer, "keys", "query,fail");
    } else if (strcmp(key, "query") == 0 && strcmp(value, "ops") == 0) {
      *num_out = relu_answer_one(&answer, "ops", "Activation:1");
    } else if (strcmp(key, "query") == 0 && strcmp(value, "version") == 0) {
      *num_out = relu_answer_one(&answer, "version", "1.0");
    } else if (strcmp(key, "query") == 0 && strcmp(value, "stats") == 0) {
      *num_out = answer_stats();
    } else {
      return acc_fail(MX_ACC_ERR_NOT_FOUND, "unknown key %s=%s", key, value);
    }
  }
  return MX_ACC_OK;
}
