/*
 * A symbolic-only test plugin (ABI 1.1) that runs float32 relu graphs in
 * host memory, says why it declines every other node (supportedOpsReasons),
 * and fails on purpose, so that tests can see what the host makes of it. It
 * is compiled with the sources of plugins/common; the model table, the
 * graph checks and the relu run are relu_plugin.h's.
 *
 * Build options:
 *   FAILRELU_INFER_FAILS     infer() fails with MX_ACC_ERR_INTERNAL and a
 *                            message of about 1,500 characters (longer than
 *                            the 1,024 bytes the common status helpers keep).
 *   FAILRELU_CRASH           infer() dereferences NULL (for a child process).
 *   FAILRELU_OVERRUN_REASONS supportedOpsReasons() writes one byte past the
 *                            last reason slot.
 *   FAILRELU_NO_NUL          supportedOpsReasons() fills a declined node's
 *                            slot to the end without a NUL.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "graph.h"
#include "mxnet_acc.h"
#include "relu_plugin.h"
#include "status.h"

#define FAILRELU_MAX_MODELS 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static relu_model models[FAILRELU_MAX_MODELS];
static relu_table table = {&lock, models, FAILRELU_MAX_MODELS, NULL};

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) { return relu_check_version("failrelu", version); }

MX_ACC_EXPORT int getAccName(char *name, size_t size) {
  return relu_copy_name(name, size, "failrelu") ? MX_ACC_OK
                                                  : acc_fail(MX_ACC_ERR_INVALID_ARG, "buffer");
}

MX_ACC_EXPORT int getNumAcc(void) { return 1; }

MX_ACC_EXPORT int supportsImperative(void) { return 0; }

MX_ACC_EXPORT const char *accGetLastError(void) { return acc_last_error(); }

/* ---- graphs ------------------------------------------------------------ */

MX_ACC_EXPORT int supportedOps(const char *json, const char *const *data_names,
                               const MXTensor *data, int num_data, int dev_id, int *ids,
                               int ids_capacity, int *num_ids) {
  (void)data_names, (void)data, (void)num_data;
  acc_clear_error();
  int status = relu_check_device(dev_id, 1);
  if (status != MX_ACC_OK) return status;
  if (ids == NULL || num_ids == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "NULL output");
  return relu_supported_ops("", json, relu_node_supported, ids, ids_capacity, num_ids);
}

/* Why node (declined) is not run here: the check of relu_node_supported()
 * that it fails. */
static void explain_node(const acc_node *node, size_t index, char *reasons, size_t size,
                         int capacity) {
  const char *act_type = acc_node_attr(node, "act_type");
  if (strcmp(node->op, "Activation") != 0) {
    acc_reason(reasons, size, capacity, index, "only Activation runs here, not %s", node->op);
  } else if (act_type == NULL || strcmp(act_type, "relu") != 0) {
    acc_reason(reasons, size, capacity, index, "act_type=%s not implemented (relu only)",
               act_type == NULL ? "(none)" : act_type);
  } else {
    acc_reason(reasons, size, capacity, index, "dtype %d unsupported (float32 only)",
               (int)node->out_dtypes[0]);
  }
}

MX_ACC_EXPORT int supportedOpsReasons(const char *json, const char *const *data_names,
                                      const MXTensor *data, int num_data, int dev_id, int *ids,
                                      int ids_capacity, int *num_ids, char *reasons,
                                      size_t reason_size) {
  (void)data_names, (void)data, (void)num_data;
  acc_clear_error();
  int status = relu_check_device(dev_id, 1);
  if (status != MX_ACC_OK) return status;
  if (ids == NULL || num_ids == NULL || reasons == NULL || reason_size == 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "NULL output");
  }
  acc_graph *graph = NULL;
  status = relu_parse("", json, &graph);
  if (status != MX_ACC_OK) return status;
  *num_ids = relu_supported_ids(graph, relu_node_supported, ids, ids_capacity);
  for (size_t i = 0; i < graph->num_nodes && i < (size_t)ids_capacity; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->op == NULL || relu_node_supported(graph, node)) continue;
    explain_node(node, i, reasons, reason_size, ids_capacity);
#if defined(FAILRELU_NO_NUL)
    memset(reasons + i * reason_size, 'x', reason_size);
#endif
  }
#if defined(FAILRELU_OVERRUN_REASONS)
  reasons[(size_t)ids_capacity * reason_size] = 'x';
#endif
  acc_graph_free(graph);
  return MX_ACC_OK;
}

/* ---- models ------------------------------------------------------------- */

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  (void)data_names, (void)data, (void)num_data;
  acc_clear_error();
  int status = relu_check_device(dev_id, 1);
  if (status == MX_ACC_OK) status = relu_check_model_id("", model_id);
  if (status != MX_ACC_OK) return status;
  return relu_table_load(&table, "", json, 1, model_id, dev_id);
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  return relu_table_unload(&table, model_id);
}

/* ---- inference --------------------------------------------------------- */

static int check_tensor(const MXTensor *tensor, const acc_node *node, int dev_id) {
  (void)dev_id;
  if (tensor->dev_id != MX_ACC_HOST_DEVICE || tensor->dtype != kFloat32 || tensor->data == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: expected a float32 host tensor", node->name);
  }
  return MX_ACC_OK;
}

static const relu_run_options kRun = {
    .check_tensor = check_tensor, .dev_id = 0, .keep_nan = 1, .write = RELU_WRITE_ALL,
    .prefix = ""};

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  acc_clear_error();
  int status = relu_check_infer_args("", model_id, in_data, out_data, num_in, num_out);
  if (status != MX_ACC_OK) return status;
#if defined(FAILRELU_CRASH)
  volatile int *nowhere = NULL;
  *nowhere = 1;
#endif
#if defined(FAILRELU_INFER_FAILS)
  /* 60 sentences of 25 characters: 1,500 characters, each word whole. */
  char words[1600] = "";
  for (int i = 0; i < 60; ++i) strcat(words, "the device lost its work ");
  return acc_fail(MX_ACC_ERR_INTERNAL, "model %s is not loaded on the card: %s", model_id,
                  words);
#endif
  pthread_mutex_lock(&lock);
  relu_model *found = relu_table_find(&table, model_id);
  status = found == NULL ? acc_fail(MX_ACC_ERR_NOT_FOUND, "model %s is not loaded", model_id)
                         : relu_run(found->graph, in_names, in_data, num_in, out_names,
                                    out_data, num_out, &kRun);
  pthread_mutex_unlock(&lock);
  return status;
}

/* ---- configure ---------------------------------------------------------- */

static relu_answer answer;

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
  relu_answer_reset(&answer);
  *out_keys = answer.keys;
  *out_vals = answer.vals;
  *num_out = 0;
  if (num_in == 0) return MX_ACC_OK;
  if (num_in != 1 || strcmp(in_keys[0], "query") != 0) {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "failrelu accepts only the key query");
  }
  const char *query = in_vals[0];
  if (strcmp(query, "keys") == 0) {
    *num_out = relu_answer_one(&answer, "keys", "query");
  } else if (strcmp(query, "ops") == 0) {
    *num_out = relu_answer_one(&answer, "ops", "Activation:1");
  } else if (strcmp(query, "version") == 0) {
    *num_out = relu_answer_one(&answer, "version", "1.0");
  } else {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "unknown query %s", query);
  }
  return MX_ACC_OK;
}
