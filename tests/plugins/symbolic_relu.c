/*
 * A symbolic-only test plugin (supportsImperative() == 0) that runs graphs
 * made of Activation(act_type="relu") nodes on float32 host memory through
 * loadModel()/infer(). It is compiled with the sources of plugins/common;
 * the model table, the graph checks and the relu run are relu_plugin.h's.
 *
 * Build options:
 *   SYMRELU_REFUSE_LOAD   supportedOps() accepts relu, but loadModel() fails
 *                         with MX_ACC_ERR_UNSUPPORTED.
 *
 * configure(query=stats) answers the counters "loads", "unloads", "infers",
 * "supported_ops" (calls) and "models" (currently loaded), so that tests can
 * see how often the host compiles.
 */
#include <pthread.h>
#include <string.h>

#include "graph.h"
#include "mxnet_acc.h"
#include "relu_plugin.h"
#include "status.h"

#define SYMRELU_MAX_MODELS 512

#ifdef SYMRELU_REFUSE_LOAD
static const int kRefuseLoad = 1;
#else
static const int kRefuseLoad = 0;
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static relu_model models[SYMRELU_MAX_MODELS];
static relu_counts counts; /* of device 0 */
static relu_table table = {&lock, models, SYMRELU_MAX_MODELS, &counts};
static long supported_calls;

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) { return relu_check_version("symrelu", version); }

MX_ACC_EXPORT int getAccName(char *name, size_t size) {
  return relu_copy_name(name, size, "symrelu") ? MX_ACC_OK
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
  status = relu_supported_ops("", json, relu_node_supported, ids, ids_capacity, num_ids);
  if (status != MX_ACC_OK) return status;
  pthread_mutex_lock(&lock);
  ++supported_calls;
  pthread_mutex_unlock(&lock);
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
  if (kRefuseLoad) return acc_fail(MX_ACC_ERR_UNSUPPORTED, "this build compiles nothing");
  return relu_table_load(&table, "", json, 1, model_id, dev_id);
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  return relu_table_unload(&table, model_id);
}

/* ---- inference --------------------------------------------------------- */

/* A dense float32 host tensor of node's output shape. */
static int check_tensor(const MXTensor *tensor, const acc_node *node, int dev_id) {
  (void)dev_id;
  const acc_shape *shape = &node->out_shapes[0];
  if (tensor->dev_id != MX_ACC_HOST_DEVICE || tensor->isSparse || tensor->dtype != kFloat32 ||
      tensor->data == NULL || tensor->shape_len != (uint64_t)shape->ndim) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: expected a dense float32 host tensor",
                    node->name);
  }
  for (int d = 0; d < shape->ndim; ++d) {
    if (tensor->shape[d] != shape->dims[d]) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: shape mismatch in dimension %d",
                      node->name, d);
    }
  }
  return MX_ACC_OK;
}

/* relu(NaN) is 0 here (x > 0 ? x : 0). */
static const relu_run_options kRun = {
    .check_tensor = check_tensor, .dev_id = 0, .keep_nan = 0, .write = RELU_WRITE_ALL,
    .prefix = ""};

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  acc_clear_error();
  int status = relu_check_infer_args("", model_id, in_data, out_data, num_in, num_out);
  if (status != MX_ACC_OK) return status;
  pthread_mutex_lock(&lock);
  relu_model *found = relu_table_find(&table, model_id);
  status = found == NULL ? acc_fail(MX_ACC_ERR_NOT_FOUND, "model %s is not loaded", model_id)
                         : relu_run(found->graph, in_names, in_data, num_in, out_names,
                                    out_data, num_out, &kRun);
  if (status == MX_ACC_OK) ++counts.infers;
  pthread_mutex_unlock(&lock);
  return status;
}

/* ---- configure ---------------------------------------------------------- */

static relu_answer answer;

static int answer_stats(void) {
  relu_answer_reset(&answer);
  pthread_mutex_lock(&lock);
  long numbers[] = {counts.loads, counts.unloads, counts.infers, supported_calls,
                    relu_table_count(&table, -1)};
  pthread_mutex_unlock(&lock);
  const char *names[] = {"loads", "unloads", "infers", "supported_ops", "models"};
  for (int i = 0; i < 5; ++i) relu_answer_number(&answer, names[i], numbers[i]);
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
  if (num_in == 0) return MX_ACC_OK;
  if (num_in != 1 || strcmp(in_keys[0], "query") != 0) {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "symrelu accepts only the key query");
  }
  const char *query = in_vals[0];
  if (strcmp(query, "keys") == 0) {
    *num_out = relu_answer_one(&answer, "keys", "query");
  } else if (strcmp(query, "ops") == 0) {
    *num_out = relu_answer_one(&answer, "ops", "Activation:1");
  } else if (strcmp(query, "version") == 0) {
    *num_out = relu_answer_one(&answer, "version", "1.0");
  } else if (strcmp(query, "stats") == 0) {
    *num_out = answer_stats();
  } else {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "unknown query %s", query);
  }
  return MX_ACC_OK;
}
