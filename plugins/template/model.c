/*
 * Symbolic mode: a model is a graph of operators tp_op_prepare() accepts,
 * run node by node in the graph's (topological) order. loadModel() parses
 * and checks the graph once, copies the weights (everything the host passes
 * is borrowed) and allocates every node's value; infer() copies the data in
 * (as a real device uploads it), runs the nodes and copies the heads out.
 *
 * Loaded models are kept in one list, shared by both devices, so it has a
 * lock. A model itself needs none: the host serializes the calls for the
 * model's device, unloadModel() included.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "template.h"
#include "tensor.h"

typedef struct tp_model {
  struct tp_model *next;
  char *id;          /* owned copy */
  int dev_id;
  acc_graph *graph;  /* owned */
  char **head_names; /* owned: the heads' output names, for acc_match_outputs() */
  tp_op *ops;        /* per node: the checked operator (operator nodes) */
  float **values;    /* per node, owned: a variable's value (weights copied at
                      * loadModel, data at each infer) or an operator's output */
} tp_model;

static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;
static tp_model *models; /* guarded by models_lock */

/* Checks operator node n of graph (float32 in and out, one output) into *op. */
static int node_op(const acc_graph *graph, size_t n, tp_op *op) {
  const acc_node *node = &graph->nodes[n];
  acc_shape inputs[TP_MAX_INPUTS];
  if (node->num_outputs != 1 || node->out_dtypes[0] != kFloat32 ||
      node->num_inputs > TP_MAX_INPUTS) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "node %s: not one float32 output", node->name);
  }
  for (size_t i = 0; i < node->num_inputs; ++i) { /* entries are valid: graph.h checked them */
    const acc_node *from = &graph->nodes[node->inputs[i].node];
    if (from->out_dtypes[node->inputs[i].index] != kFloat32) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "node %s: input %zu is not float32", node->name, i);
    }
    inputs[i] = from->out_shapes[node->inputs[i].index];
  }
  return tp_op_prepare(node->op, node->attr_keys, node->attr_vals, node->num_attrs,
                       (int)node->num_inputs, inputs, &node->out_shapes[0], op);
}

static int parse(const char *call, const char *json, acc_graph **graph) {
  char error[256];
  int status = acc_graph_parse(json, 1, graph, error, sizeof error);
  return status == MX_ACC_OK ? status : acc_fail(status, "%s: %s", call, error);
}

int tp_model_supported(const char *json, int *ids, int capacity, int *num_ids) {
  acc_graph *graph;
  int status = parse("supportedOps", json, &graph), count = 0;
  for (size_t n = 0; status == MX_ACC_OK && n < graph->num_nodes; ++n) {
    tp_op op;
    if (graph->nodes[n].op == NULL || node_op(graph, n, &op) != MX_ACC_OK) continue;
    if (count == capacity) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "supportedOps: ids holds only %d ids", capacity);
    } else {
      ids[count++] = (int)n;
    }
  }
  if (status == MX_ACC_OK) {
    acc_clear_error(); /* the messages of nodes left out are not failures */
    *num_ids = count;
  }
  acc_graph_free(graph);
  return status;
}

static void model_free(tp_model *model) {
  if (model == NULL) return;
  for (size_t n = 0; model->values != NULL && n < model->graph->num_nodes; ++n) {
    free(model->values[n]);
  }
  if (model->head_names != NULL) acc_free_head_names(model->graph, model->head_names);
  free(model->values);
  free(model->ops);
  acc_graph_free(model->graph);
  free(model->id);
  free(model);
}

/* The loaded model called id, or NULL; the caller holds models_lock. */
static tp_model **find(const char *id) {
  tp_model **link = &models;
  while (*link != NULL && strcmp((*link)->id, id) != 0) link = &(*link)->next;
  return *link != NULL ? link : NULL;
}

/* Runs the operator nodes in order, each reading its inputs' values. */
static void run(const tp_model *model) {
  const acc_graph *graph = model->graph;
  for (size_t n = 0; n < graph->num_nodes; ++n) {
    const acc_node *node = &graph->nodes[n];
    const float *in[TP_MAX_INPUTS];
    if (node->op == NULL) continue;
    for (size_t i = 0; i < node->num_inputs; ++i) in[i] = model->values[node->inputs[i].node];
    tp_op_run(&model->ops[n], in, model->values[n]);
  }
}

/* Copies the tensor of variable n into the model, as a real device's
 * infer uploads its inputs. */
static int upload(tp_model *model, long n, const MXTensor *tensor, const char *name) {
  const acc_shape *shape = &model->graph->nodes[n].out_shapes[0];
  float *given;
  size_t bytes;
  int status = tp_tensor_data(tensor, name, shape, model->dev_id, 1, &given);
  if (status == MX_ACC_OK) status = acc_shape_bytes(shape, sizeof(float), name, &bytes);
  if (status == MX_ACC_OK && bytes > 0) memcpy(model->values[n], given, bytes);
  return status;
}

/* Compiles the graph into model: checks every operator, allocates every
 * node's value and copies in the weights, given in names/data. */
static int compile(tp_model *model, const char *const *names, const MXTensor *data,
                   int num_data) {
  const acc_graph *graph = model->graph;
  model->ops = calloc(graph->num_nodes ? graph->num_nodes : 1, sizeof *model->ops);
  model->values = calloc(graph->num_nodes ? graph->num_nodes : 1, sizeof *model->values);
  if (model->ops == NULL || model->values == NULL) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel: model tables");
  }
  int status = acc_graph_head_names(graph, &model->head_names);
  for (size_t n = 0; status == MX_ACC_OK && n < graph->num_nodes; ++n) {
    const acc_node *node = &graph->nodes[n];
    size_t bytes;
    if (node->out_dtypes[0] != kFloat32) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "loadModel: %s is not float32", node->name);
    }
    if (node->op != NULL) status = node_op(graph, n, &model->ops[n]);
    if (status != MX_ACC_OK) break;
    status = acc_shape_bytes(&node->out_shapes[0], sizeof(float), node->name, &bytes);
    if (status != MX_ACC_OK) break;
    model->values[n] = malloc(bytes ? bytes : 1);
    if (model->values[n] == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel");
    if (node->kind == ACC_VAR_WEIGHT) {
      int i = num_data - 1; /* the weight's values, given under its name */
      while (i >= 0 && strcmp(names[i], node->name) != 0) --i;
      status = i < 0 ? acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: no value for %s", node->name)
                     : upload(model, (long)n, &data[i], node->name);
    }
  }
  return status;
}

int tp_model_load(const char *model_id, const char *json, const char *const *names,
                  const MXTensor *data, int num_data, int dev_id) {
  tp_model *model = calloc(1, sizeof *model);
  if (model == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel");
  model->dev_id = dev_id;
  model->id = malloc(strlen(model_id) + 1);
  int status = model->id == NULL ? acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel")
                                 : parse("loadModel", json, &model->graph);
  if (status == MX_ACC_OK) {
    strcpy(model->id, model_id);
    status = compile(model, names, data, num_data);
  }
  if (status == MX_ACC_OK) {
    pthread_mutex_lock(&models_lock);
    if (find(model_id) != NULL) {
      status = acc_fail(MX_ACC_ERR_STATE, "loadModel: model %s is already loaded", model_id);
    } else {
      model->next = models;
      models = model;
    }
    pthread_mutex_unlock(&models_lock);
  }
  if (status != MX_ACC_OK) model_free(model);
  return status;
}

int tp_model_unload(const char *model_id) {
  pthread_mutex_lock(&models_lock);
  tp_model **link = find(model_id), *model = link != NULL ? *link : NULL;
  if (link != NULL) *link = model->next;
  pthread_mutex_unlock(&models_lock);
  if (model == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "unloadModel: no model %s", model_id);
  model_free(model);
  return MX_ACC_OK;
}

int tp_model_infer(const char *model_id, const char *const *in_names,
                   const char *const *out_names, const MXTensor *in_data,
                   const MXTensor *out_data, int num_in, int num_out) {
  pthread_mutex_lock(&models_lock);
  tp_model **link = find(model_id), *model = link != NULL ? *link : NULL;
  pthread_mutex_unlock(&models_lock);
  if (model == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "infer: no model %s", model_id);
  const acc_graph *graph = model->graph;
  unsigned char *given = calloc(graph->num_nodes ? graph->num_nodes : 1, 1); /* per node */
  size_t *head_of = calloc(num_out ? (size_t)num_out : 1, sizeof *head_of);
  int status = given == NULL || head_of == NULL
                   ? acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "infer")
                   : acc_match_outputs(graph, (const char *const *)model->head_names, out_names,
                                       out_data, num_out, head_of);
  for (int i = 0; status == MX_ACC_OK && i < num_in; ++i) {
    long n = acc_graph_find_variable(graph, in_names[i]);
    status = n < 0 ? acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: no variable %s", in_names[i])
                   : upload(model, n, &in_data[i], in_names[i]); /* weights: from now on */
    if (status == MX_ACC_OK) given[n] = 1;
  }
  for (size_t n = 0; status == MX_ACC_OK && n < graph->num_nodes; ++n) {
    if (graph->nodes[n].kind == ACC_VAR_DATA && !given[n]) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: no value for %s", graph->nodes[n].name);
    }
  }
  float *out;
  for (int i = 0; status == MX_ACC_OK && i < num_out; ++i) { /* where each output goes */
    const acc_node *head = &graph->nodes[graph->heads[head_of[i]].node];
    status = tp_tensor_data(&out_data[i], out_names[i], &head->out_shapes[0], model->dev_id, 1,
                            &out);
  }
  if (status == MX_ACC_OK) run(model);
  for (int i = 0; status == MX_ACC_OK && i < num_out; ++i) { /* download the heads */
    size_t node = graph->heads[head_of[i]].node, bytes;
    acc_shape_bytes(&graph->nodes[node].out_shapes[0], sizeof(float), out_names[i], &bytes);
    if (bytes > 0) memcpy(out_data[i].data, model->values[node], bytes);
  }
  free(given);
  free(head_of);
  return status;
}
