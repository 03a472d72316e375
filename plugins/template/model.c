/*
 * Symbolic mode: supportedOps, loadModel, unloadModel, infer. A model is the
 * graph's operator nodes run in the graph's (topological) order, each on a
 * value per node. loadModel checks every node once, allocates the values and
 * copies the weights in (all it is given is borrowed); infer copies the data
 * in, as a device uploads it, runs the nodes, and copies the heads out.
 *
 * The model list is shared by both devices, so it has a lock; a model needs
 * none, since the host serializes the calls for its device.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "template.h"
#include "tensor.h"

typedef struct tp_model { /* everything owned */
  struct tp_model *next;
  char *id;
  int dev_id;
  acc_graph *graph;
  char **head_names; /* for acc_match_outputs() */
  struct tp_node {
    tp_op op;     /* operator nodes: the operator */
    float *value; /* the variable's value, or the operator's output */
  } *nodes;       /* one per node of graph */
} tp_model;

static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;
static tp_model *models; /* guarded by models_lock */

/* Checks the arguments supportedOps and loadModel share and parses json
 * (with the host's annotations) into *graph, which is NULL on failure. */
static int parse(const char *call, int dev_id, const char *json, const char *const *names,
                 const MXTensor *data, int num_data, acc_graph **graph) {
  char error[256];
  *graph = NULL;
  int status = tp_check_device(call, dev_id);
  if (status == MX_ACC_OK && json == NULL) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: json is NULL", call);
  }
  if (status == MX_ACC_OK) status = acc_check_named_tensors(call, names, data, num_data);
  if (status != MX_ACC_OK) return status;
  status = acc_graph_parse(json, 1, graph, error, sizeof error);
  return status == MX_ACC_OK ? status : acc_fail(status, "%s: %s", call, error);
}

/* Checks node n, an operator with float32 inputs and one float32 output. */
static int node_op(const acc_graph *graph, size_t n, tp_op *op) {
  const acc_node *node = &graph->nodes[n];
  acc_shape in[TP_MAX_INPUTS];
  int ok = node->num_outputs == 1 && node->out_dtypes[0] == kFloat32 &&
           node->num_inputs <= TP_MAX_INPUTS;
  for (size_t i = 0; ok && i < node->num_inputs; ++i) { /* graph.h checked the entries */
    const acc_node *from = &graph->nodes[node->inputs[i].node];
    ok = from->out_dtypes[node->inputs[i].index] == kFloat32;
    in[i] = from->out_shapes[node->inputs[i].index];
  }
  if (!ok) return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: not all float32", node->name);
  return tp_op_prepare(node->op, node->attr_keys, node->attr_vals, node->num_attrs,
                       (int)node->num_inputs, in, &node->out_shapes[0], op);
}

MX_ACC_EXPORT int supportedOps(const char *json, const char *const *data_names,
                               const MXTensor *data, int num_data, int dev_id, int *ids,
                               int ids_capacity, int *num_ids) {
  acc_clear_error();
  acc_graph *graph;
  tp_op op;
  int count = 0;
  int status = parse("supportedOps", dev_id, json, data_names, data, num_data, &graph);
  if (status == MX_ACC_OK && (num_ids == NULL || ids_capacity < 0 || (ids_capacity && !ids))) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "supportedOps: ids or num_ids");
  }
  for (size_t n = 0; status == MX_ACC_OK && n < graph->num_nodes; ++n) {
    if (graph->nodes[n].op == NULL || node_op(graph, n, &op) != MX_ACC_OK) continue;
    if (count == ids_capacity) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "supportedOps: more than %d ids", count);
    } else {
      ids[count++] = (int)n;
    }
  }
  if (status == MX_ACC_OK) {
    acc_clear_error(); /* a node left out is no failure */
    *num_ids = count;
  }
  acc_graph_free(graph);
  return status;
}

static void model_free(tp_model *model) {
  for (size_t n = 0; model->nodes != NULL && n < model->graph->num_nodes; ++n) {
    free(model->nodes[n].value);
  }
  if (model->head_names != NULL) acc_free_head_names(model->graph, model->head_names);
  free(model->nodes);
  acc_graph_free(model->graph);
  free(model->id);
  free(model);
}

/* The index of name in names, or -1. */
static int find_name(const char *const *names, int count, const char *name) {
  int i = count - 1;
  while (i >= 0 && strcmp(names[i], name) != 0) --i;
  return i;
}

/* Copies tensor, the value of variable n, into the model. */
static int upload(tp_model *model, size_t n, const MXTensor *tensor, const char *name) {
  const acc_shape *shape = &model->graph->nodes[n].out_shapes[0];
  float *given;
  size_t bytes;
  int status = tp_tensor_data(tensor, name, shape, model->dev_id, 1, &given);
  if (status == MX_ACC_OK) status = acc_shape_bytes(shape, sizeof(float), name, &bytes);
  if (status == MX_ACC_OK && bytes > 0) memcpy(model->nodes[n].value, given, bytes);
  return status;
}

/* Checks every node, allocates its value, copies the weights in. */
static int compile(tp_model *model, const char *const *names, const MXTensor *data, int num) {
  const acc_graph *graph = model->graph;
  size_t bytes;
  model->nodes = calloc(graph->num_nodes + 1, sizeof *model->nodes);
  if (model->nodes == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel");
  int status = acc_graph_head_names(graph, &model->head_names);
  for (size_t n = 0; status == MX_ACC_OK && n < graph->num_nodes; ++n) {
    const acc_node *node = &graph->nodes[n];
    if (node->op != NULL) status = node_op(graph, n, &model->nodes[n].op);
    if (node->op == NULL && node->out_dtypes[0] != kFloat32) {
      status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "loadModel: %s is not float32", node->name);
    }
    if (status == MX_ACC_OK) {
      status = acc_shape_bytes(&node->out_shapes[0], sizeof(float), node->name, &bytes);
    }
    if (status == MX_ACC_OK && (model->nodes[n].value = malloc(bytes ? bytes : 1)) == NULL) {
      status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel");
    }
    if (status == MX_ACC_OK && node->kind == ACC_VAR_WEIGHT) {
      int i = find_name(names, num, node->name);
      status = i < 0 ? acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: no value for %s", node->name)
                     : upload(model, n, &data[i], node->name);
    }
  }
  return status;
}

/* The link to the model called id, or NULL; the caller holds models_lock. */
static tp_model **find(const char *id) {
  tp_model **link = &models;
  while (*link != NULL && strcmp((*link)->id, id) != 0) link = &(*link)->next;
  return *link != NULL ? link : NULL;
}

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  acc_clear_error();
  if (model_id == NULL || model_id[0] == '\0') {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: no model_id");
  }
  tp_model *model = calloc(1, sizeof *model);
  if (model == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel");
  model->dev_id = dev_id;
  int status = parse("loadModel", dev_id, json, data_names, data, num_data, &model->graph);
  if (status == MX_ACC_OK && (model->id = malloc(strlen(model_id) + 1)) == NULL) {
    status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel");
  }
  if (status == MX_ACC_OK) {
    strcpy(model->id, model_id);
    status = compile(model, data_names, data, num_data);
  }
  pthread_mutex_lock(&models_lock);
  if (status == MX_ACC_OK && find(model_id) != NULL) {
    status = acc_fail(MX_ACC_ERR_STATE, "loadModel: %s is loaded already", model_id);
  }
  if (status == MX_ACC_OK) {
    model->next = models;
    models = model;
  }
  pthread_mutex_unlock(&models_lock);
  if (status != MX_ACC_OK) model_free(model);
  return status;
}

/* Takes the model called id out of the list (take) or only finds it. */
static tp_model *lookup(const char *id, int take) {
  pthread_mutex_lock(&models_lock);
  tp_model **link = id != NULL ? find(id) : NULL, *model = link != NULL ? *link : NULL;
  if (link != NULL && take) *link = model->next;
  pthread_mutex_unlock(&models_lock);
  return model;
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  acc_clear_error();
  tp_model *model = lookup(model_id, 1);
  if (model == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "unloadModel: no such model");
  model_free(model);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  acc_clear_error();
  tp_model *model = lookup(model_id, 0);
  int status = model == NULL ? acc_fail(MX_ACC_ERR_NOT_FOUND, "infer: no such model")
                             : acc_check_named_tensors("infer", in_names, in_data, num_in);
  if (status == MX_ACC_OK) status = acc_check_named_tensors("infer", out_names, out_data, num_out);
  if (status != MX_ACC_OK) return status;
  const acc_graph *graph = model->graph;
  size_t *head_of = calloc((size_t)num_out + 1, sizeof *head_of), bytes;
  float *out;
  status = head_of == NULL ? acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "infer")
                           : acc_match_outputs(graph, (const char *const *)model->head_names,
                                               out_names, out_data, num_out, head_of);
  for (int i = 0; status == MX_ACC_OK && i < num_out; ++i) { /* can the outputs be written? */
    const acc_node *head = &graph->nodes[graph->heads[head_of[i]].node];
    status = tp_tensor_data(&out_data[i], out_names[i], &head->out_shapes[0], model->dev_id, 1,
                            &out);
  }
  for (size_t n = 0; status == MX_ACC_OK && n < graph->num_nodes; ++n) {
    const char *name = graph->nodes[n].name;
    if (graph->nodes[n].kind == ACC_VAR_DATA && find_name(in_names, num_in, name) < 0) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: no value for %s", name);
    }
  }
  for (int i = 0; status == MX_ACC_OK && i < num_in; ++i) { /* weights too: from now on */
    long n = acc_graph_find_variable(graph, in_names[i]);
    status = n < 0 ? acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: no variable %s", in_names[i])
                   : upload(model, (size_t)n, &in_data[i], in_names[i]);
  }
  for (size_t n = 0; status == MX_ACC_OK && n < graph->num_nodes; ++n) {
    const acc_node *node = &graph->nodes[n];
    const float *in[TP_MAX_INPUTS];
    for (size_t i = 0; node->op != NULL && i < node->num_inputs; ++i) {
      in[i] = model->nodes[node->inputs[i].node].value;
    }
    if (node->op != NULL) tp_op_run(&model->nodes[n].op, in, model->nodes[n].value);
  }
  for (int i = 0; status == MX_ACC_OK && i < num_out; ++i) { /* the heads, out */
    size_t node = graph->heads[head_of[i]].node;
    acc_shape_bytes(&graph->nodes[node].out_shapes[0], sizeof(float), "", &bytes);
    if (bytes > 0) memcpy(out_data[i].data, model->nodes[node].value, bytes);
  }
  free(head_of);
  return status;
}
