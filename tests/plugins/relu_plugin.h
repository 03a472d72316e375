/*
 * The parts the test plugins share that run graphs of
 * Activation(act_type="relu") nodes on float32 tensors: symbolic_relu.c,
 * misbehaving_acc.c, crashing_acc.c and conformance_acc.c. Each of them
 * keeps only what makes it special (its failure modes, its crash points,
 * its broken builds); what they all do the same way lives here.
 *
 * Header-only: every function is static inline, so each plugin that
 * includes it (by "relu_plugin.h", found next to the including source)
 * compiles its own copy, and the header holds no state of its own. The
 * plugins are compiled with the sources of plugins/common (graph.h,
 * status.h, tensor.h) and with nothing else.
 *
 * Ownership: the plugin owns every table and buffer these functions work
 * on (models, blocks, answers) and the lock that guards them; a function
 * that takes the lock says so, the others expect the caller to hold it
 * where the plugin's threads share the table.
 *
 * Messages: the functions under "quiet" report nothing, they return what
 * happened. Those under "reporting" record a message with acc_fail()
 * (status.h), which is what symbolic_relu.c, misbehaving_acc.c and
 * crashing_acc.c answer from accGetLastError(). conformance_acc.c keeps its
 * own message buffer (its broken builds drop or share it), so it uses the
 * quiet functions only. A prefix argument starts the messages a reporting
 * function words: "" in the plugins whose messages name no call,
 * "<call>: " in misbehaving_acc.c.
 */
#ifndef TESTS_PLUGINS_RELU_PLUGIN_H_
#define TESTS_PLUGINS_RELU_PLUGIN_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "mxnet_acc.h"
#include "status.h"
#include "tensor.h"

#define RELU_ID_MAX 128   /* model ids are shorter than this */
#define RELU_NAME_MAX 256 /* room for an output's name (relu_head_output()) */

/* ==== quiet ================================================================ */

/* ---- identification ------------------------------------------------------- */

/* getAccName()'s copy of value (NUL-terminated) into name[size]: 1 when it
 * was copied, 0 when name is NULL or has no room for value. */
static inline int relu_copy_name(char *name, size_t size, const char *value) {
  size_t length = strlen(value) + 1;
  if (name == NULL || size < length) return 0;
  memcpy(name, value, length);
  return 1;
}

/* ---- tensors and names ---------------------------------------------------- */

/* The number of elements of an annotated shape. */
static inline uint64_t relu_shape_count(const acc_shape *shape) {
  uint64_t count = 1;
  for (int d = 0; d < shape->ndim; ++d) count *= shape->dims[d];
  return count;
}

/* The number of elements of a descriptor's shape (not checked). */
static inline uint64_t relu_tensor_count(const MXTensor *tensor) {
  uint64_t count = 1;
  for (uint64_t d = 0; d < tensor->shape_len; ++d) count *= tensor->shape[d];
  return count;
}

/* Bytes of a dense tensor; 0 with *ok == 0 when the descriptor is invalid
 * (unknown dtype, sparse, too many dimensions, no shape, too many bytes). */
static inline size_t relu_tensor_bytes(const MXTensor *tensor, int *ok) {
  size_t bytes = acc_dtype_size(tensor->dtype);
  *ok = bytes > 0 && !tensor->isSparse && tensor->shape_len <= MX_ACC_MAX_NDIM &&
        (tensor->shape_len == 0 || tensor->shape != NULL);
  for (uint64_t d = 0; *ok && d < tensor->shape_len; ++d) {
    uint64_t extent = tensor->shape[d];
    if (extent > SIZE_MAX || (extent != 0 && bytes > SIZE_MAX / extent)) {
      *ok = 0;
    } else {
      bytes *= (size_t)extent;
    }
  }
  return *ok ? bytes : 0;
}

/* The index of name among names[0, count), or -1 (also when names is NULL). */
static inline int relu_find_name(const char *const *names, int count, const char *name) {
  for (int i = 0; names != NULL && i < count; ++i) {
    if (names[i] != NULL && strcmp(names[i], name) == 0) return i;
  }
  return -1;
}

/* ---- graphs --------------------------------------------------------------- */

/* 1 when node is an Activation relu of operator version 1 (or none given)
 * with one float32 input and one float32 output; 0 for variables. */
static inline int relu_node_supported(const acc_graph *graph, const acc_node *node) {
  if (node->op == NULL) return 0;
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

/* supportedOps()'s answer: the ids of graph's nodes that supported accepts,
 * in order, at most capacity of them; returns how many. */
static inline int relu_supported_ids(const acc_graph *graph,
                                     int (*supported)(const acc_graph *, const acc_node *),
                                     int *ids, int capacity) {
  int count = 0;
  for (size_t i = 0; i < graph->num_nodes && count < capacity; ++i) {
    if (supported(graph, &graph->nodes[i])) ids[count++] = (int)i;
  }
  return count;
}

/* ---- models --------------------------------------------------------------- */

typedef struct relu_model {
  char id[RELU_ID_MAX];
  int dev_id;
  acc_graph *graph; /* owned; NULL: the slot is free */
  /* Owned, per node: the plugin's copy of a weight variable's values, or
   * NULL. Only conformance_acc.c keeps weights (and frees them); the table's
   * reporting functions leave this NULL. */
  float **weights;
} relu_model;

/* The loads, unloads and successful infers of one device. */
typedef struct relu_counts {
  long loads, unloads, infers;
} relu_counts;

/* A plugin's loaded models: capacity slots, guarded by *lock (the plugin's
 * lock, which may guard more of its state). counts, when not NULL, has an
 * entry per device that relu_table_store() and relu_table_unload() count
 * in under the lock. */
typedef struct relu_table {
  pthread_mutex_t *lock;
  relu_model *models;
  int capacity;
  relu_counts *counts;
} relu_table;

/* The loaded model called id, or NULL; the caller holds the lock. */
static inline relu_model *relu_table_find(const relu_table *table, const char *id) {
  for (int i = 0; i < table->capacity; ++i) {
    relu_model *slot = &table->models[i];
    if (slot->graph != NULL && strcmp(slot->id, id) == 0) return slot;
  }
  return NULL;
}

/* A free slot, or NULL; the caller holds the lock. */
static inline relu_model *relu_table_free_slot(const relu_table *table) {
  for (int i = 0; i < table->capacity; ++i) {
    if (table->models[i].graph == NULL) return &table->models[i];
  }
  return NULL;
}

/* How many models are loaded on dev_id (on any device for dev_id < 0); the
 * caller holds the lock. */
static inline long relu_table_count(const relu_table *table, int dev_id) {
  long count = 0;
  for (int i = 0; i < table->capacity; ++i) {
    const relu_model *slot = &table->models[i];
    count += slot->graph != NULL && (dev_id < 0 || slot->dev_id == dev_id);
  }
  return count;
}

/* ---- device memory -------------------------------------------------------- */

/* One allocation of mx_alloc(), in a plugin's table of its blocks on one
 * device (blocks[0, *count), capacity entries). The plugin owns the memory
 * a block points to. */
typedef struct relu_block {
  void *ptr;
  size_t size;
} relu_block;

enum { RELU_ALLOC_OK, RELU_ALLOC_NO_MEMORY, RELU_ALLOC_FULL };

/* The index of the block at ptr, or -1; the caller holds the table's lock. */
static inline long relu_find_block(const relu_block *blocks, size_t count, const void *ptr) {
  for (size_t i = 0; i < count; ++i) {
    if (blocks[i].ptr == ptr) return (long)i;
  }
  return -1;
}

/* mx_alloc()'s bookkeeping: mallocs size bytes (1 for 0) and, under lock,
 * records them unless all capacity entries are in use. Returns RELU_ALLOC_OK
 * with the block in *ptr, RELU_ALLOC_NO_MEMORY (malloc failed) or
 * RELU_ALLOC_FULL (nothing is kept). */
static inline int relu_alloc_block(pthread_mutex_t *lock, relu_block *blocks, size_t *count,
                                   size_t capacity, size_t size, void **ptr) {
  void *data = malloc(size > 0 ? size : 1);
  if (data == NULL) return RELU_ALLOC_NO_MEMORY;
  pthread_mutex_lock(lock);
  int full = *count == capacity;
  if (!full) blocks[(*count)++] = (relu_block){data, size};
  pthread_mutex_unlock(lock);
  if (full) {
    free(data);
    return RELU_ALLOC_FULL;
  }
  *ptr = data;
  return RELU_ALLOC_OK;
}

/* mx_free()'s bookkeeping: under lock, drops the block at ptr from the
 * table. 1 when it was one (the caller frees it), 0 when it was not. */
static inline int relu_forget_block(pthread_mutex_t *lock, relu_block *blocks, size_t *count,
                                    const void *ptr) {
  pthread_mutex_lock(lock);
  long index = relu_find_block(blocks, *count, ptr);
  if (index >= 0) blocks[index] = blocks[--*count];
  pthread_mutex_unlock(lock);
  return index >= 0;
}

/* mx_releaseAll()'s: under lock, frees every block and empties the table. */
static inline void relu_release_blocks(pthread_mutex_t *lock, relu_block *blocks,
                                       size_t *count) {
  pthread_mutex_lock(lock);
  for (size_t i = 0; i < *count; ++i) free(blocks[i].ptr);
  *count = 0;
  pthread_mutex_unlock(lock);
}

/* ---- configure()'s answers ------------------------------------------------ */

/* The key/value pairs configure() returns; they stay valid until the
 * plugin resets the answer (configure's next call). */
typedef struct relu_answer {
  char text[512]; /* the values, one after the other */
  const char *keys[8];
  const char *vals[8];
  int count;
  size_t used; /* of text */
} relu_answer;

static inline void relu_answer_reset(relu_answer *answer) {
  answer->count = 0;
  answer->used = 0;
}

/* Appends key (a string that outlives the answer) with a copy of value; 0
 * when it does not fit (the answer is unchanged), 1 otherwise. */
static inline int relu_answer_add(relu_answer *answer, const char *key, const char *value) {
  size_t room = sizeof answer->text - answer->used;
  int written = snprintf(answer->text + answer->used, room, "%s", value);
  if (written < 0 || (size_t)written >= room ||
      answer->count >= (int)(sizeof answer->keys / sizeof answer->keys[0])) {
    return 0;
  }
  answer->keys[answer->count] = key;
  answer->vals[answer->count] = answer->text + answer->used;
  answer->used += (size_t)written + 1;
  ++answer->count;
  return 1;
}

/* relu_answer_add() of a number, written in decimal. */
static inline int relu_answer_number(relu_answer *answer, const char *key, long value) {
  char text[32];
  snprintf(text, sizeof text, "%ld", value);
  return relu_answer_add(answer, key, text);
}

/* The answer reset to the one pair key=value; returns its count, 1. */
static inline int relu_answer_one(relu_answer *answer, const char *key, const char *value) {
  relu_answer_reset(answer);
  relu_answer_add(answer, key, value); /* the plugins' literals fit an empty answer */
  return answer->count;
}

/* ==== reporting (acc_fail) ================================================= */

/* initialize()'s check of the host's ABI version; name is the plugin's. */
static inline int relu_check_version(const char *name, int version) {
  return version / 100 == MX_ACC_API_VERSION_MAJOR
             ? MX_ACC_OK
             : acc_fail(MX_ACC_ERR_VERSION, "%s needs ABI major %d", name,
                        MX_ACC_API_VERSION_MAJOR);
}

/* MX_ACC_OK for a device of the plugin's num_devices. */
static inline int relu_check_device(int dev_id, int num_devices) {
  return dev_id >= 0 && dev_id < num_devices
             ? MX_ACC_OK
             : acc_fail(MX_ACC_ERR_DEVICE, "device %d does not exist", dev_id);
}

/* loadModel()'s check of its model id. */
static inline int relu_check_model_id(const char *prefix, const char *model_id) {
  return model_id != NULL && strlen(model_id) < RELU_ID_MAX
             ? MX_ACC_OK
             : acc_fail(MX_ACC_ERR_INVALID_ARG, "%smodel id is NULL or too long", prefix);
}

/* Parses an annotated graph into *graph (the caller frees it). */
static inline int relu_parse(const char *prefix, const char *json, acc_graph **graph) {
  char message[256];
  if (json == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%sjson is NULL", prefix);
  int status = acc_graph_parse(json, 1, graph, message, sizeof message);
  return status == MX_ACC_OK ? MX_ACC_OK : acc_fail(status, "%s%s", prefix, message);
}

/* MX_ACC_ERR_UNSUPPORTED unless every operator node of graph is a
 * relu_node_supported() relu. */
static inline int relu_check_graph(const acc_graph *graph) {
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->op != NULL && !relu_node_supported(graph, node)) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "node %s (%s) is not a float32 relu", node->name,
                      node->op);
    }
  }
  return MX_ACC_OK;
}

/* supportedOps()'s work after its argument checks: parses json and answers
 * the ids of the nodes supported accepts (relu_supported_ids()). */
static inline int relu_supported_ops(const char *prefix, const char *json,
                                     int (*supported)(const acc_graph *, const acc_node *),
                                     int *ids, int capacity, int *num_ids) {
  acc_graph *graph = NULL;
  int status = relu_parse(prefix, json, &graph);
  if (status != MX_ACC_OK) return status;
  *num_ids = relu_supported_ids(graph, supported, ids, capacity);
  acc_graph_free(graph);
  return MX_ACC_OK;
}

/* loadModel()'s last step: under the table's lock, keeps graph (owned from
 * now on, freed on failure too) as model_id on dev_id, unless model_id is
 * loaded already or no slot is free. */
static inline int relu_table_store(relu_table *table, const char *model_id, int dev_id,
                                   acc_graph *graph) {
  pthread_mutex_lock(table->lock);
  relu_model *slot =
      relu_table_find(table, model_id) != NULL ? NULL : relu_table_free_slot(table);
  if (slot != NULL) {
    snprintf(slot->id, sizeof slot->id, "%s", model_id);
    slot->dev_id = dev_id;
    slot->graph = graph;
    slot->weights = NULL;
    if (table->counts != NULL) ++table->counts[dev_id].loads;
  }
  pthread_mutex_unlock(table->lock);
  if (slot == NULL) {
    acc_graph_free(graph);
    return acc_fail(MX_ACC_ERR_STATE, "model %s is loaded already, or no slot is free",
                    model_id);
  }
  return MX_ACC_OK;
}

/* loadModel()'s work after its argument checks: parses json, checks with
 * relu_check_graph() that it is made of relus when relus_only is set, and
 * relu_table_store()s it. */
static inline int relu_table_load(relu_table *table, const char *prefix, const char *json,
                                  int relus_only, const char *model_id, int dev_id) {
  acc_graph *graph = NULL;
  int status = relu_parse(prefix, json, &graph);
  if (status != MX_ACC_OK) return status;
  if (relus_only) status = relu_check_graph(graph);
  if (status != MX_ACC_OK) {
    acc_graph_free(graph);
    return status;
  }
  return relu_table_store(table, model_id, dev_id, graph);
}

/* unloadModel(), whole: frees the graph of model_id. */
static inline int relu_table_unload(relu_table *table, const char *model_id) {
  acc_clear_error();
  if (model_id == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "model id is NULL");
  pthread_mutex_lock(table->lock);
  relu_model *found = relu_table_find(table, model_id);
  acc_graph *graph = found != NULL ? found->graph : NULL;
  if (found != NULL) {
    found->graph = NULL;
    if (table->counts != NULL) ++table->counts[found->dev_id].unloads;
  }
  pthread_mutex_unlock(table->lock);
  if (graph == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "model %s is not loaded", model_id);
  acc_graph_free(graph);
  return MX_ACC_OK;
}

/* infer()'s check of its arguments (the names are looked at later). */
static inline int relu_check_infer_args(const char *prefix, const char *model_id,
                                        const MXTensor *in_data, const MXTensor *out_data,
                                        int num_in, int num_out) {
  if (model_id == NULL || num_in < 0 || num_out < 0 || (num_in > 0 && in_data == NULL) ||
      (num_out > 0 && out_data == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%sinvalid arguments", prefix);
  }
  return MX_ACC_OK;
}

/* ---- running a graph of relus ---------------------------------------------- */

enum { RELU_WRITE_ALL, RELU_WRITE_HALF, RELU_WRITE_NONE };

/* How relu_run() treats a plugin's tensors. */
typedef struct relu_run_options {
  /* Checks an input or output tensor against node's output 0 (dtype, shape,
   * memory), reporting its failure; dev_id is the options' dev_id. */
  int (*check_tensor)(const MXTensor *tensor, const acc_node *node, int dev_id);
  int dev_id;      /* the model's device */
  int keep_nan;    /* 1: relu(NaN) is NaN; 0: it is 0 (x > 0 ? x : 0) */
  int write;       /* RELU_WRITE_ALL; RELU_WRITE_HALF: the first half of each output;
                      RELU_WRITE_NONE: no output */
  const char *prefix; /* of the message when the table of values cannot be allocated */
} relu_run_options;

/* values[i]: node i's output; operator nodes own theirs (malloc). */
static inline int relu_run_nodes(const acc_graph *graph, const char *const *in_names,
                                 const MXTensor *in_data, int num_in,
                                 const relu_run_options *options, float **values) {
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->op == NULL) {
      int index = relu_find_name(in_names, num_in, node->name);
      if (index < 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "input %s is missing", node->name);
      int status = options->check_tensor(&in_data[index], node, options->dev_id);
      if (status != MX_ACC_OK) return status;
      values[i] = in_data[index].data;
      continue;
    }
    uint64_t count = relu_shape_count(&node->out_shapes[0]);
    if (count > SIZE_MAX / sizeof(float)) {
      return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "%s: too many elements", node->name);
    }
    values[i] = malloc((count > 0 ? (size_t)count : 1) * sizeof(float));
    if (values[i] == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "%s", node->name);
    const float *source = values[node->inputs[0].node];
    for (uint64_t k = 0; k < count; ++k) {
      float x = source[k];
      values[i][k] = x > 0.0f || (options->keep_nan && x != x) ? x : 0.0f;
    }
  }
  return MX_ACC_OK;
}

/* The output named after graph's head h: its index among out_names into
 * *index, its name into name[RELU_NAME_MAX]. */
static inline int relu_head_output(const acc_graph *graph, size_t h,
                                   const char *const *out_names, int num_out, char *name,
                                   int *index) {
  if (acc_graph_output_name(graph, graph->heads[h], name, RELU_NAME_MAX) != 0) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "head %zu has no name", h);
  }
  *index = relu_find_name(out_names, num_out, name);
  return *index >= 0 ? MX_ACC_OK
                     : acc_fail(MX_ACC_ERR_INVALID_ARG, "output %s is missing", name);
}

/* Writes the values of graph's heads into the outputs named after them. */
static inline int relu_write_heads(const acc_graph *graph, const char *const *out_names,
                                   const MXTensor *out_data, int num_out,
                                   const relu_run_options *options, float *const *values) {
  for (size_t h = 0; h < graph->num_heads; ++h) {
    char name[RELU_NAME_MAX];
    int index = 0;
    int status = relu_head_output(graph, h, out_names, num_out, name, &index);
    if (status != MX_ACC_OK) return status;
    acc_entry head = graph->heads[h];
    const acc_node *node = &graph->nodes[head.node];
    status = options->check_tensor(&out_data[index], node, options->dev_id);
    if (status != MX_ACC_OK) return status;
    uint64_t count = relu_shape_count(&node->out_shapes[0]);
    if (options->write == RELU_WRITE_HALF) count /= 2;
    if (count > 0) memcpy(out_data[index].data, values[head.node], (size_t)count * sizeof(float));
  }
  return MX_ACC_OK;
}

/* infer()'s work on a graph that passed relu_check_graph(): runs it on the
 * named inputs and writes its heads into the named outputs. */
static inline int relu_run(const acc_graph *graph, const char *const *in_names,
                           const MXTensor *in_data, int num_in, const char *const *out_names,
                           const MXTensor *out_data, int num_out,
                           const relu_run_options *options) {
  float **values = calloc(graph->num_nodes + 1, sizeof *values);
  if (values == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "%svalues", options->prefix);
  int status = relu_run_nodes(graph, in_names, in_data, num_in, options, values);
  if (status == MX_ACC_OK && options->write != RELU_WRITE_NONE) {
    status = relu_write_heads(graph, out_names, out_data, num_out, options, values);
  }
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    if (graph->nodes[i].op != NULL) free(values[i]);
  }
  free(values);
  return status;
}

#endif /* TESTS_PLUGINS_RELU_PLUGIN_H_ */
