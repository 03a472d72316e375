/*
 * A symbolic-only test plugin (supportsImperative() == 0) that runs graphs
 * made of Activation(act_type="relu") nodes on float32 host memory through
 * loadModel()/infer(). It is compiled with the sources of plugins/common.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "mxnet_acc.h"
#include "status.h"

#define SYMRELU_MAX_MODELS 512
#define SYMRELU_ID_MAX 128

typedef struct model {
  char id[SYMRELU_ID_MAX];
  acc_graph *graph;
} model;

#ifdef SYMRELU_REFUSE_LOAD
static const int kRefuseLoad = 1;
#else
static const int kRefuseLoad = 0;
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static model models[SYMRELU_MAX_MODELS];
static long loads, unloads, infers, supported_calls;

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) {
  return version / 100 == MX_ACC_API_VERSION_MAJOR
             ? MX_ACC_OK
             : acc_fail(MX_ACC_ERR_VERSION, "symrelu needs ABI major %d",
                        MX_ACC_API_VERSION_MAJOR);
}

MX_ACC_EXPORT int getAccName(char *name, size_t size) {
  static const char kName[] = "symrelu";
  if (name == NULL || size < sizeof kName) return acc_fail(MX_ACC_ERR_INVALID_ARG, "buffer");
  memcpy(name, kName, sizeof kName);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int getNumAcc(void) { return 1; }

MX_ACC_EXPORT int supportsImperative(void) { return 0; }

MX_ACC_EXPORT const char *accGetLastError(void) { return acc_last_error(); }

/* ---- graphs ------------------------------------------------------------ */

static uint64_t num_elements(const acc_shape *shape) {
  uint64_t count = 1;
  for (int d = 0; d < shape->ndim; ++d) count *= shape->dims[d];
  return count;
}

/* A relu Activation of version 1 on one float32 input, with a float32
 * output. */
static int node_supported(const acc_graph *graph, const acc_node *node) {
  const char *act_type = acc_node_attr(node, "act_type");
  const char *version = acc_node_attr(node, "__op_version__");
  if (strcmp(node->op, "Activation") != 0 || act_type == NULL ||
      strcmp(act_type, "relu") != 0 || (version != NULL && strcmp(version, "1") != 0) ||
      node->num_inputs != 1 || node->num_outputs != 1 || node->out_dtypes[0] != kFloat32) {
    return 0;
  }
  const acc_entry input = node->inputs[0];
  return graph->nodes[input.node].out_dtypes[input.index] == kFloat32;
}

static int parse(const char *json, acc_graph **graph) {
  char message[256];
  if (json == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "json is NULL");
  int status = acc_graph_parse(json, 1, graph, message, sizeof message);
  return status == MX_ACC_OK ? MX_ACC_OK : acc_fail(status, "%s", message);
}

MX_ACC_EXPORT int supportedOps(const char *json, const char *const *data_names,
                               const MXTensor *data, int num_data, int dev_id, int *ids,
                               int ids_capacity, int *num_ids) {
  (void)data_names, (void)data, (void)num_data;
  acc_clear_error();
  if (dev_id != 0) return acc_fail(MX_ACC_ERR_DEVICE, "device %d does not exist", dev_id);
  if (ids == NULL || num_ids == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "NULL output");
  acc_graph *graph = NULL;
  int status = parse(json, &graph);
  if (status != MX_ACC_OK) return status;
  int count = 0;
  for (size_t i = 0; i < graph->num_nodes && count < ids_capacity; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->op != NULL && node_supported(graph, node)) ids[count++] = (int)i;
  }
  acc_graph_free(graph);
  *num_ids = count;
  pthread_mutex_lock(&lock);
  ++supported_calls;
  pthread_mutex_unlock(&lock);
  return MX_ACC_OK;
}

/* ---- models (callers hold lock) ---------------------------------------- */

static model *find_model(const char *id) {
  for (int i = 0; i < SYMRELU_MAX_MODELS; ++i) {
    if (models[i].graph != NULL && strcmp(models[i].id, id) == 0) return &models[i];
  }
  return NULL;
}

static model *free_slot(void) {
  for (int i = 0; i < SYMRELU_MAX_MODELS; ++i) {
    if (models[i].graph == NULL) return &models[i];
  }
  return NULL;
}

static long count_models(void) {
  long count = 0;
  for (int i = 0; i < SYMRELU_MAX_MODELS; ++i) count += models[i].graph != NULL;
  return count;
}

static int check_graph(const acc_graph *graph) {
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->op != NULL && !node_supported(graph, node)) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "node %s (%s) is not a float32 relu", node->name,
                      node->op);
    }
  }
  return MX_ACC_OK;
}

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  (void)data_names, (void)data, (void)num_data;
  acc_clear_error();
  if (dev_id != 0) return acc_fail(MX_ACC_ERR_DEVICE, "device %d does not exist", dev_id);
  if (model_id == NULL || strlen(model_id) >= SYMRELU_ID_MAX) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "model id is NULL or too long");
  }
  if (kRefuseLoad) return acc_fail(MX_ACC_ERR_UNSUPPORTED, "this build compiles nothing");
  acc_graph *graph = NULL;
  int status = parse(json, &graph);
  if (status != MX_ACC_OK) return status;
  status = check_graph(graph);
  if (status != MX_ACC_OK) {
    acc_graph_free(graph);
    return status;
  }
  pthread_mutex_lock(&lock);
  model *slot = find_model(model_id) != NULL ? NULL : free_slot();
  if (slot != NULL) {
    snprintf(slot->id, sizeof slot->id, "%s", model_id);
    slot->graph = graph;
    ++loads;
  }
  pthread_mutex_unlock(&lock);
  if (slot == NULL) {
    acc_graph_free(graph);
    return acc_fail(MX_ACC_ERR_STATE, "model %s is loaded already, or no slot is free",
                    model_id);
  }
  return MX_ACC_OK;
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  acc_clear_error();
  if (model_id == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "model id is NULL");
  pthread_mutex_lock(&lock);
  model *found = find_model(model_id);
  acc_graph *graph = found != NULL ? found->graph : NULL;
  if (found != NULL) {
    found->graph = NULL;
    ++unloads;
  }
  pthread_mutex_unlock(&lock);
  if (graph == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "model %s is not loaded", model_id);
  acc_graph_free(graph);
  return MX_ACC_OK;
}

/* ---- inference --------------------------------------------------------- */

static int find_name(const char *const *names, int count, const char *name) {
  for (int i = 0; i < count; ++i) {
    if (names[i] != NULL && strcmp(names[i], name) == 0) return i;
  }
  return -1;
}

static int check_tensor(const MXTensor *tensor, const acc_node *node, int output) {
  const acc_shape *shape = &node->out_shapes[output];
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

/* values[i]: the output of node i (operator nodes own theirs). */
static int run_graph(const acc_graph *graph, const char *const *in_names,
                     const MXTensor *in_data, int num_in, float **values) {
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->op == NULL) {
      int index = find_name(in_names, num_in, node->name);
      if (index < 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "input %s is missing", node->name);
      int status = check_tensor(&in_data[index], node, 0);
      if (status != MX_ACC_OK) return status;
      values[i] = in_data[index].data;
      continue;
    }
    uint64_t count = num_elements(&node->out_shapes[0]);
    values[i] = malloc((count > 0 ? count : 1) * sizeof(float));
    if (values[i] == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "%s", node->name);
    const float *source = values[node->inputs[0].node];
    for (uint64_t k = 0; k < count; ++k) values[i][k] = source[k] > 0.0f ? source[k] : 0.0f;
  }
  return MX_ACC_OK;
}

static int write_heads(const acc_graph *graph, const char *const *out_names,
                       const MXTensor *out_data, int num_out, float *const *values) {
  for (size_t h = 0; h < graph->num_heads; ++h) {
    char name[256];
    acc_entry head = graph->heads[h];
    if (acc_graph_output_name(graph, head, name, sizeof name) != 0) {
      return acc_fail(MX_ACC_ERR_INTERNAL, "head %zu has no name", h);
    }
    int index = find_name(out_names, num_out, name);
    if (index < 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "output %s is missing", name);
    const acc_node *node = &graph->nodes[head.node];
    int status = check_tensor(&out_data[index], node, 0);
    if (status != MX_ACC_OK) return status;
    memcpy(out_data[index].data, values[head.node],
           num_elements(&node->out_shapes[0]) * sizeof(float));
  }
  return MX_ACC_OK;
}

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  acc_clear_error();
  if (model_id == NULL || num_in < 0 || num_out < 0 || (num_in > 0 && in_data == NULL) ||
      (num_out > 0 && out_data == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "invalid arguments");
  }
  pthread_mutex_lock(&lock);
  model *found = find_model(model_id);
  int status = found == NULL ? acc_fail(MX_ACC_ERR_NOT_FOUND, "model %s is not loaded",
                                        model_id)
                             : MX_ACC_OK;
  float **values = NULL;
  if (status == MX_ACC_OK) {
    values = calloc(found->graph->num_nodes + 1, sizeof *values);
    if (values == NULL) status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "values");
  }
  if (status == MX_ACC_OK) status = run_graph(found->graph, in_names, in_data, num_in, values);
  if (status == MX_ACC_OK) status = write_heads(found->graph, out_names, out_data, num_out,
                                                values);
  if (values != NULL) {
    for (size_t i = 0; i < found->graph->num_nodes; ++i) {
      if (found->graph->nodes[i].op != NULL) free(values[i]);
    }
    free(values);
  }
  if (status == MX_ACC_OK) ++infers;
  pthread_mutex_unlock(&lock);
  return status;
}

/* ---- configure ---------------------------------------------------------- */

static char answer_text[512];
static const char *answer_keys[8];
static const char *answer_vals[8];

static int answer_stats(int *count) {
  const char *names[] = {"loads", "unloads", "infers", "supported_ops", "models"};
  pthread_mutex_lock(&lock);
  long numbers[] = {loads, unloads, infers, supported_calls, count_models()};
  pthread_mutex_unlock(&lock);
  size_t used = 0;
  for (int i = 0; i < 5; ++i) {
    answer_keys[i] = names[i];
    int n = snprintf(answer_text + used, sizeof answer_text - used, "%ld", numbers[i]);
    answer_vals[i] = answer_text + used;
    used += (size_t)n + 1;
  }
  *count = 5;
  return MX_ACC_OK;
}

static int answer_one(const char *key, const char *value, int *count) {
  answer_keys[0] = key;
  answer_vals[0] = value;
  *count = 1;
  return MX_ACC_OK;
}

MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  acc_clear_error();
  if (dev_id != 0) return acc_fail(MX_ACC_ERR_DEVICE, "device %d does not exist", dev_id);
  if (out_keys == NULL || out_vals == NULL || num_out == NULL ||
      (num_in > 0 && (in_keys == NULL || in_vals == NULL))) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "NULL argument");
  }
  *out_keys = answer_keys;
  *out_vals = answer_vals;
  *num_out = 0;
  if (num_in == 0) return MX_ACC_OK;
  if (num_in != 1 || strcmp(in_keys[0], "query") != 0) {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "symrelu accepts only the key query");
  }
  const char *query = in_vals[0];
  if (strcmp(query, "keys") == 0) return answer_one("keys", "query", num_out);
  if (strcmp(query, "ops") == 0) return answer_one("ops", "Activation:1", num_out);
  if (strcmp(query, "version") == 0) return answer_one("version", "1.0", num_out);
  if (strcmp(query, "stats") == 0) return answer_stats(num_out);
  return acc_fail(MX_ACC_ERR_NOT_FOUND, "unknown query %s", query);
}
