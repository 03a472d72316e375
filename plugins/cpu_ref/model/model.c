/*
 * Symbolic mode: graph JSON -> steps over preallocated buffers.
 *
 * Every node output is an "entry" with a buffer sized from the host's shape
 * annotations. Weights are copied into buffers the model owns when it is
 * loaded (the host may change or free its arrays afterwards); data inputs
 * are used in place for the duration of one infer() call, without a copy.
 */
#include "model.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attrs.h"
#include "kernels.h"
#include "library.h"
#include "memory.h"
#include "model_impl.h"
#include "op_impl.h"
#include "parallel.h"
#include "status.h"
#include "tensor.h"

enum { kNameSize = 1024 };

/* strdup is POSIX, not C11. */
static char *copy_string(const char *text) {
  size_t size = strlen(text) + 1;
  char *copy = malloc(size);
  if (copy != NULL) memcpy(copy, text, size);
  return copy;
}

static int parse_graph(const char *json, acc_graph **graph) {
  char error[kErrorSize];
  if (json == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "graph json is NULL");
  int status = acc_graph_parse(json, 1, graph, error, sizeof error);
  if (status != MX_ACC_OK) return acc_fail(status, "graph json: %s", error);
  return MX_ACC_OK;
}

/* The storage kind (MX_ACC_STORAGE_*) of visible output k of node, from
 * its "__out_stypes__" annotation (ABI 1.2; absent: dense), or -1 when the
 * annotation is malformed. */
int32_t cr_node_stype(const acc_node *node, int k) {
  const char *text = acc_node_attr(node, "__out_stypes__");
  if (text == NULL) return MX_ACC_STORAGE_DENSE;
  int64_t values[CR_MAX_OUTPUTS];
  int count = 0;
  if (acc_attr_int_tuple(text, values, CR_MAX_OUTPUTS, &count) != 0 ||
      count != node->num_outputs || k < 0 || k >= count) {
    return -1;
  }
  return values[k] >= MX_ACC_STORAGE_DENSE && values[k] <= MX_ACC_STORAGE_ROW_SPARSE
             ? (int32_t)values[k]
             : -1;
}

/* Resolves operator node index of graph against the op table, using the
 * annotated shapes and dtypes of its inputs and outputs. The annotations
 * list visible outputs only, so a BatchNorm node has one output here, as
 * the table expects. */
static int resolve_node(const acc_graph *graph, size_t index, const cr_op **op,
                        cr_params *params) {
  const acc_node *node = &graph->nodes[index];
  char what[kNameSize];
  snprintf(what, sizeof what, "node %zu \"%s\"", index, node->name);
  if (node->num_outputs > CR_MAX_OUTPUTS || node->num_inputs > CR_MAX_INPUTS) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: %zu inputs and %d outputs; at most %d and %d",
                    what, node->num_inputs, node->num_outputs, CR_MAX_INPUTS, CR_MAX_OUTPUTS);
  }
  acc_shape in_shapes[CR_MAX_INPUTS];
  int32_t in_dtypes[CR_MAX_INPUTS], in_stypes[CR_MAX_INPUTS];
  for (size_t i = 0; i < node->num_inputs; ++i) {
    const acc_entry input = node->inputs[i];
    in_shapes[i] = graph->nodes[input.node].out_shapes[input.index];
    in_dtypes[i] = graph->nodes[input.node].out_dtypes[input.index];
    in_stypes[i] = cr_node_stype(&graph->nodes[input.node], (int)input.index);
    if (in_stypes[i] < 0) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: input %zu: node \"%s\" has a malformed "
                      "__out_stypes__", what, i, graph->nodes[input.node].name);
    }
  }
  for (int k = 0; k < node->num_outputs; ++k) {
    const int32_t stype = cr_node_stype(node, k);
    if (stype != MX_ACC_STORAGE_DENSE) {
      return acc_fail(stype < 0 ? MX_ACC_ERR_INVALID_ARG : MX_ACC_ERR_UNSUPPORTED,
                      "%s: output %d is %s; operator outputs are dense", what, k,
                      stype < 0 ? "malformed" : cr_stype_name(stype));
    }
  }
  return cr_resolve_sparse_op(what, node->op, node->attr_keys, node->attr_vals, node->num_attrs,
                              in_shapes, in_dtypes, in_stypes, (int)node->num_inputs,
                              node->out_shapes, node->out_dtypes, node->num_outputs, op, params);
}

int cr_model_supported(const char *json, int *ids, int capacity, int *count, char *reasons,
                       size_t reason_size) {
  acc_graph *graph;
  int status = parse_graph(json, &graph);
  if (status != MX_ACC_OK) return status;
  int found = 0;
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK; ++i) {
    const cr_op *op;
    cr_params params;
    if (graph->nodes[i].op == NULL) continue;
    if (resolve_node(graph, i, &op, &params) != MX_ACC_OK) {
      acc_node_reason(reasons, reason_size, capacity, i, graph->nodes[i].name,
                      graph->nodes[i].op);
      continue;
    }
    if (found == capacity) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "ids holds %d entries; more nodes are supported",
                        capacity);
    } else {
      ids[found++] = (int)i;
    }
  }
  acc_graph_free(graph);
  if (status != MX_ACC_OK) return status;
  acc_clear_error(); /* nodes skipped above are not failures of this call */
  *count = found;
  return MX_ACC_OK;
}

void cr_model_free(cr_model *model) {
  if (model == NULL) return;
  for (size_t i = 0; i < model->num_entries; ++i) {
    if (model->owned != NULL && model->owned[i] == 1) free(model->entries[i].data);
  }
  acc_free_head_names(model->graph, model->head_names);
  for (size_t s = 0; model->steps != NULL && s < model->num_steps; ++s) {
    if (model->steps[s].rnn_packed != NULL) {
      cr_rnn_packing_free(model->steps[s].rnn_packed);
      free(model->steps[s].rnn_packed);
    }
    free(model->steps[s].matmul);
    cr_dense_plan *plan = model->steps[s].dense;
    if (plan == NULL) continue;
    if (!cr_model_in_file(model, plan->folded_w)) free(plan->folded_w);
    if (!cr_model_in_file(model, plan->folded_b)) free(plan->folded_b);
    if (!cr_model_in_file(model, plan->packed)) free(plan->packed);
    free(plan);
  }
  free(model->file_bytes);
  free(model->steps);
  free(model->image_bytes);
  free(model->image_moves);
  free(model->lane_offset);
  free(model->lane_arena);
  free(model->lane_tables);
  free(model->batch_data);
  free(model->arena);
  free(model->owned);
  free(model->entries);
  free(model->entry_of_node);
  acc_graph_free(model->graph);
  free(model->json);
  free(model->id);
  free(model);
}

/* Bytes of output index of node; sizes were checked for overflow when the
 * model's buffers were allocated. */
size_t entry_bytes(const cr_model *model, size_t node, uint32_t index) {
  const acc_node *owner = &model->graph->nodes[node];
  size_t bytes = 0;
  acc_shape_bytes(&owner->out_shapes[index], acc_dtype_size(owner->out_dtypes[index]), "entry",
                  &bytes);
  return bytes;
}

/* Lays out one entry per node output and gives every operator output a
 * buffer of its own. */
static int allocate_entries(cr_model *model) {
  const acc_graph *graph = model->graph;
  model->entry_of_node = calloc(graph->num_nodes ? graph->num_nodes : 1, sizeof(size_t));
  if (model->entry_of_node == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  size_t total = 0;
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    model->entry_of_node[i] = total;
    total += (size_t)graph->nodes[i].num_outputs;
  }
  model->num_entries = total;
  model->entries = calloc(total ? total : 1, sizeof *model->entries);
  model->owned = calloc(total ? total : 1, 1);
  if (model->entries == NULL || model->owned == NULL) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  }
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    const acc_node *node = &graph->nodes[i];
    for (int k = 0; k < node->num_outputs; ++k) {
      size_t entry = model->entry_of_node[i] + (size_t)k, bytes;
      model->entries[entry].shape = node->out_shapes[k];
      int status = acc_shape_bytes(&node->out_shapes[k], acc_dtype_size(node->out_dtypes[k]),
                                   node->name, &bytes);
      if (status != MX_ACC_OK) return status;
      if (node->op == NULL && node->kind == ACC_VAR_DATA) continue; /* bound per infer */
      if (node->op != NULL) continue; /* operator outputs: placed by plan_memory */
      const int32_t stype = cr_node_stype(node, k);
      if (stype < 0) {
        return acc_fail(MX_ACC_ERR_INVALID_ARG, "\"%s\": malformed __out_stypes__", node->name);
      }
      if (stype != MX_ACC_STORAGE_DENSE) { /* a copy of its arrays, made by take_sparse_weight */
        model->sparse_weights = 1;
        continue;
      }
      model->entries[entry].data = malloc(bytes ? bytes : 1);
      if (model->entries[entry].data == NULL) {
        return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes for \"%s\"", bytes,
                        node->name);
      }
      model->owned[entry] = 1;
    }
  }
  return MX_ACC_OK;
}

static int build_steps(cr_model *model) {
  const acc_graph *graph = model->graph;
  model->steps = calloc(graph->num_nodes ? graph->num_nodes : 1, sizeof *model->steps);
  if (model->steps == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model steps");
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->op == NULL) continue;
    cr_step *step = &model->steps[model->num_steps];
    int status = resolve_node(graph, i, &step->op, &step->params);
    if (status != MX_ACC_OK) return status;
    step->params.kernels = model->kernels;
    step->num_inputs = (int)node->num_inputs;
    for (size_t k = 0; k < node->num_inputs; ++k) {
      step->inputs[k] = model->entry_of_node[node->inputs[k].node] + node->inputs[k].index;
    }
    step->num_outputs = node->num_outputs;
    step->outputs = model->entry_of_node[i];
    model->num_steps += 1;
  }
  return MX_ACC_OK;
}

/* Finds the variable called name and checks tensor against its annotation
 * and the model's device. */
/* Whether tensor fits node's variable; what names it in a failure. */
static int check_variable(const acc_node *node, const MXTensor *tensor, int need_data,
                          const char *what) {
  const int32_t stype = cr_node_stype(node, 0);
  if (stype < 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: malformed __out_stypes__", what);
  if (stype != MX_ACC_STORAGE_DENSE && need_data) {
    return cr_sparse_check(tensor, stype, &node->out_shapes[0], node->out_dtypes[0], what);
  }
  if (stype != MX_ACC_STORAGE_DENSE) { /* a data input described only, at loadModel */
    return acc_tensor_shape(tensor, what, &(acc_shape){0});
  }
  return need_data ? acc_tensor_expect(tensor, what, node->out_dtypes[0], &node->out_shapes[0])
                   : acc_tensor_expect_spec(tensor, what, node->out_dtypes[0],
                                            &node->out_shapes[0]);
}

static int match_variable(const cr_model *model, const char *name, const MXTensor *tensor,
                          const char *call, int need_data, size_t *node_index) {
  char what[kNameSize];
  if (name == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a tensor name is NULL", call);
  long index = acc_graph_find_variable(model->graph, name);
  if (index < 0) {
    snprintf(what, sizeof what, "%s: input \"%s\"", call, name);
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s is not a graph input", what);
  }
  const acc_node *node = &model->graph->nodes[index];
  int status = check_variable(node, tensor, need_data, call);
  if (status != MX_ACC_OK) {
    /* Checked again with the input's name for the message: formatting it
     * on every call cost a tenth of a 16-float relu's infer(). */
    snprintf(what, sizeof what, "%s: input \"%s\"", call, name);
    status = check_variable(node, tensor, need_data, what);
    return status;
  }
  *node_index = (size_t)index;
  return MX_ACC_OK;
}

int cr_model_in_file(const cr_model *model, const void *pointer) {
  const unsigned char *p = pointer, *start = model->file_bytes;
  /* Compared as integers: relational operators on pointers into different
   * objects are undefined. */
  return start != NULL && p != NULL && (uintptr_t)p >= (uintptr_t)start &&
         (uintptr_t)p - (uintptr_t)start < model->file_size;
}

/* Dense plans whose filters point into the file get allocations of their
 * own before they are folded and packed again (new weights from infer()). */
static void detach_plans(cr_model *model) {
  for (size_t s = 0; model->file_bytes != NULL && s < model->num_steps; ++s) {
    cr_dense_plan *plan = model->steps[s].dense;
    if (plan == NULL) continue;
    if (cr_model_in_file(model, plan->folded_w)) plan->folded_w = NULL;
    if (cr_model_in_file(model, plan->folded_b)) plan->folded_b = NULL;
    if (cr_model_in_file(model, plan->packed)) plan->packed = NULL;
  }
}

/* Gives weight entry its value: with CR_RETAIN_WEIGHTS, the host's buffer
 * itself (retained until unloadModel, or until infer() gives the weight
 * again), else a copy in the entry's own allocation. */
static int take_weight(cr_model *model, size_t entry, const MXTensor *value, size_t bytes) {
  if (model->file_bytes != NULL && model->owned[entry] == 1 && cr_model_in_file(model, value->data)) {
    /* import: the file's values, in place */
    free(model->entries[entry].data);
    model->entries[entry].data = value->data;
    model->owned[entry] = 4;
    return MX_ACC_OK;
  }
  if (model->retains_weights && bytes > 0 && model->owned[entry] != 2) {
    if (model->owned[entry] == 1) free(model->entries[entry].data);
    model->entries[entry].data = value->data;
    model->owned[entry] = 3;
    return MX_ACC_OK;
  }
  if (model->owned[entry] == 3) { /* retained before: an allocation of its own again */
    void *copy = malloc(bytes ? bytes : 1);
    if (copy == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "cannot copy a weight");
    model->entries[entry].data = copy;
    model->owned[entry] = 1;
  }
  if (bytes > 0) memcpy(model->entries[entry].data, value->data, bytes);
  return MX_ACC_OK;
}

/* Gives a sparse weight entry a copy of value's arrays (checked by
 * cr_sparse_check): one allocation holding the RowSparseTensor or
 * SparseTensor, then its index arrays and values, owned by the model. The
 * host's arrays are borrowed (mxnet_acc.h section 12). */
static int take_sparse_weight(cr_model *model, size_t entry, const MXTensor *value) {
  const acc_shape *shape = &model->entries[entry].shape;
  const size_t elem = acc_dtype_size(value->dtype);
  size_t head, index_bytes, value_bytes;
  if (value->isSparse == MX_ACC_STORAGE_ROW_SPARSE) {
    const RowSparseTensor *from = value->data;
    const size_t width = (size_t)cr_product(shape, 1, shape->ndim);
    head = sizeof(RowSparseTensor);
    index_bytes = (size_t)from->num_rows_stored * sizeof(uint64_t);
    value_bytes = (size_t)from->num_rows_stored * width * elem; /* <= the dense bytes */
  } else {
    const SparseTensor *from = value->data;
    head = sizeof(SparseTensor);
    index_bytes = ((size_t)from->num_nonzero + (size_t)from->num_rows + 1) * sizeof(uint64_t);
    value_bytes = (size_t)from->num_nonzero * elem;
  }
  unsigned char *block = malloc(head + index_bytes + value_bytes);
  if (block == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "cannot copy a sparse weight");
  uint64_t *indices = (uint64_t *)(block + head);
  void *values = block + head + index_bytes;
  if (value->isSparse == MX_ACC_STORAGE_ROW_SPARSE) {
    const RowSparseTensor *from = value->data;
    RowSparseTensor *copy = (RowSparseTensor *)block;
    if (index_bytes > 0) memcpy(indices, from->row_ids, index_bytes);
    if (value_bytes > 0) memcpy(values, from->data, value_bytes);
    *copy = (RowSparseTensor){values, indices, from->num_rows_stored};
  } else {
    const SparseTensor *from = value->data;
    SparseTensor *copy = (SparseTensor *)block;
    const size_t nnz = (size_t)from->num_nonzero;
    if (nnz > 0) memcpy(indices, from->indices, nnz * sizeof(uint64_t));
    memcpy(indices + nnz, from->indptr, ((size_t)from->num_rows + 1) * sizeof(uint64_t));
    if (value_bytes > 0) memcpy(values, from->data, value_bytes);
    *copy = (SparseTensor){values, indices, indices + nnz, from->num_nonzero, from->num_rows};
  }
  if (model->owned[entry] == 1) free(model->entries[entry].data);
  model->entries[entry].data = block;
  model->owned[entry] = 1;
  return MX_ACC_OK;
}

static int load_weights(cr_model *model, const char *const *names, const MXTensor *data,
                        int num_data) {
  const acc_graph *graph = model->graph;
  unsigned char *given = calloc(graph->num_nodes ? graph->num_nodes : 1, 1);
  if (given == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  int status = MX_ACC_OK;
  for (int i = 0; i < num_data && status == MX_ACC_OK; ++i) {
    size_t node;
    long index = names[i] ? acc_graph_find_variable(graph, names[i]) : -1;
    int is_weight = index >= 0 && graph->nodes[index].kind == ACC_VAR_WEIGHT;
    status = match_variable(model, names[i], &data[i], "loadModel", is_weight, &node);
    if (status != MX_ACC_OK) break;
    if (given[node]) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: input \"%s\" is given twice",
                        names[i]);
      break;
    }
    given[node] = 1;
    if (graph->nodes[node].kind != ACC_VAR_WEIGHT) continue;
    size_t entry = model->entry_of_node[node], bytes = entry_bytes(model, node, 0);
    if (data[i].isSparse != MX_ACC_STORAGE_DENSE) { /* checked by match_variable */
      status = take_sparse_weight(model, entry, &data[i]);
      continue;
    }
    status = cr_check_data(model->dev_id, &data[i], bytes, names[i]);
    if (status == MX_ACC_OK) status = take_weight(model, entry, &data[i], bytes);
  }
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK; ++i) {
    if (graph->nodes[i].kind == ACC_VAR_WEIGHT && !given[i]) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: weight \"%s\" is missing",
                        graph->nodes[i].name);
    }
  }
  free(given);
  return status;
}

/* Appends " %llu" per dimension of shape to line (size bytes, used of
 * them taken; silently cut at the end). */
static void append_dims(char *line, size_t size, size_t *used, const acc_shape *shape) {
  for (int d = 0; d < shape->ndim && *used < size; ++d) {
    const int written = snprintf(line + *used, size - *used, " %llu",
                                 (unsigned long long)shape->dims[d]);
    if (written < 0) return;
    *used += (size_t)written;
  }
}

/* Prints step s's ACC_CPU_REF_PROFILE line (its time, input 0's and
 * output 0's shapes) in one write, so that lanes on other threads do not
 * cut into it. */
static void print_profile(size_t s, const cr_step *step, const cr_tensor *entries, double us) {
  char line[kNameSize];
  const int head = snprintf(line, sizeof line, "cpu_ref profile: step %zu %s %.1f us in", s,
                            step->op->name, us);
  size_t used = head < 0 ? 0 : (size_t)head;
  if (step->num_inputs > 0) append_dims(line, sizeof line, &used, &entries[step->inputs[0]].shape);
  if (used < sizeof line) used += (size_t)snprintf(line + used, sizeof line - used, " out");
  append_dims(line, sizeof line, &used, &entries[step->outputs].shape);
  fprintf(stderr, "%s\n", line);
}

/* Runs steps begin..end-1 of model once over entries (entries, or
 * a lane's copy of them: run_lanes). */
int run_steps(const cr_model *model, cr_tensor *entries, size_t begin, size_t end,
              int num_threads) {
  const int profile = getenv("ACC_CPU_REF_PROFILE") != NULL;
  int status = MX_ACC_OK;
  for (size_t s = begin; s < end && status == MX_ACC_OK; ++s) {
    const cr_step *step = &model->steps[s];
    if (step->fused_away || step->elided) continue;
    cr_tensor inputs[CR_MAX_INPUTS];
    for (int k = 0; k < step->num_inputs; ++k) inputs[k] = entries[step->inputs[k]];
    struct timespec t0, t1;
    if (profile) timespec_get(&t0, TIME_UTC);
    if (step->dense != NULL) {
      status = run_dense(entries, step, num_threads);
    } else if (step->matmul != NULL) {
      status = run_matmul(entries, step, num_threads);
    } else if (step->swish) {
      status = run_swish(entries, step, num_threads);
    } else if (step->rnn_packed != NULL) {
      status = cr_rnn_run_packed(&step->params, inputs, &entries[step->outputs],
                                 step->rnn_packed, num_threads);
    } else {
      status = step->op->impl->run(&step->params, inputs, step->num_inputs,
                                   &entries[step->outputs], num_threads);
    }
    if (profile) {
      timespec_get(&t1, TIME_UTC);
      print_profile(s, step, entries,
                    (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3);
    }
  }
  return status;
}

/* Runs the model. When plan_image_split allows it and either the
 * activations are large (split_by_default), or there are threads for two
 * lanes or more, or ACC_CPU_REF_IMAGE_SPLIT is 1, the steps before
 * split_end run on each image in turn (on several threads, as lanes that
 * each take a share of the images: run_lanes), then the rest on the whole
 * batch (ACC_CPU_REF_IMAGE_SPLIT=1: every step per image; 0: none); else
 * every step runs on the whole batch, several threads sharing each step's
 * work. Lanes pay where one thread's passes would not: they need no
 * synchronisation per step (alternated, batch 8, 2 threads, lanes against
 * steps shared: resnet_small 0.945, dwsep_small 0.901; on one thread
 * splitting them is 2% faster and 5% slower). */
static int run_model(cr_model *model, int num_threads) {
  const size_t steps = model->num_steps;
  if (model->split_batch < 2) return run_steps(model, model->entries, 0, steps, num_threads);
  int lanes = num_threads < kMaxLanes ? num_threads : kMaxLanes;
  if (lanes > model->split_batch) lanes = (int)model->split_batch;
  if (lanes < 1) lanes = 1;
  size_t end = model->split_by_default || lanes > 1 ? model->split_end : 0;
  const char *setting = getenv("ACC_CPU_REF_IMAGE_SPLIT");
  if (setting != NULL && strcmp(setting, "1") == 0) end = steps;
  if (setting != NULL && strcmp(setting, "0") == 0) end = 0;
  if (end == 0) return run_steps(model, model->entries, 0, steps, num_threads);
  for (size_t e = 0; e < model->num_entries; ++e) {
    model->batch_data[e] = model->image_bytes[e] ? model->entries[e].data : NULL;
  }
  int status = run_lanes(model, end, lanes);
  if (status == MX_ACC_OK) status = run_steps(model, model->entries, end, steps, num_threads);
  return status;
}

static int create_model(const char *model_id, const char *json, const char *const *names,
                        const MXTensor *data, int num_data, int dev_id, int retain,
                        unsigned char *file_bytes, size_t file_size, cr_model **result) {
  cr_model *model = calloc(1, sizeof *model);
  if (model == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model");
  model->dev_id = dev_id;
  model->retains_weights = retain;
  model->file_bytes = file_bytes;
  model->file_size = file_size;
  const cr_device *device = cr_device_get(dev_id);
  if (device == NULL) {
    free(model);
    return cr_device_error(dev_id);
  }
  model->kernels = (cr_kernels)atomic_load(&device->kernels);
  model->id = copy_string(model_id);
  int status = model->id ? MX_ACC_OK : acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model id");
  if (status == MX_ACC_OK) status = parse_graph(json, &model->graph);
  if (status == MX_ACC_OK) {
    model->json = copy_string(json); /* what export_model writes */
    if (model->json == NULL) status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model json");
  }
  if (status == MX_ACC_OK) status = allocate_entries(model);
  if (status == MX_ACC_OK) status = build_steps(model);
  if (status == MX_ACC_OK) status = acc_graph_head_names(model->graph, &model->head_names);
  if (status == MX_ACC_OK) status = load_weights(model, names, data, num_data);
  const int fast = model->kernels == CR_KERNELS_FAST;
  if (status == MX_ACC_OK && fast) status = plan_dense_steps(model);
  if (status == MX_ACC_OK && fast) status = plan_matmul_steps(model);
  if (status == MX_ACC_OK && fast) status = plan_image_split(model);
  if (status == MX_ACC_OK) status = plan_memory(model);
  if (status == MX_ACC_OK) status = plan_image_bytes(model);
  if (status == MX_ACC_OK && file_bytes == NULL) status = prepare_dense_steps(model);
  if (status == MX_ACC_OK) status = prepare_rnn_steps(model);
  if (status != MX_ACC_OK) {
    model->file_bytes = NULL; /* still the caller's */
    for (size_t e = 0; model->owned != NULL && e < model->num_entries; ++e) {
      if (model->owned[e] == 4) model->owned[e] = 0;
    }
    cr_model_free(model);
    return status;
  }
  *result = model;
  return MX_ACC_OK;
}

int cr_model_create(const char *model_id, const char *json, const char *const *names,
                    const MXTensor *data, int num_data, int dev_id, cr_model **result) {
  return create_model(model_id, json, names, data, num_data, dev_id, 0, NULL, 0, result);
}

int cr_model_adopt_file(const char *model_id, const char *json, const char *const *names,
                        const MXTensor *data, int num_data, int dev_id,
                        unsigned char *file_bytes, size_t size, cr_model **result) {
  return create_model(model_id, json, names, data, num_data, dev_id, 0, file_bytes, size,
                      result);
}

int cr_model_prepare(cr_model *model) {
  detach_plans(model);
  return prepare_dense_steps(model);
}

int cr_model_load(const char *model_id, const char *json, const char *const *names,
                  const MXTensor *data, int num_data, int dev_id, cr_model **result) {
  return create_model(model_id, json, names, data, num_data, dev_id, CR_RETAIN_WEIGHTS, NULL, 0,
                      result);
}

/* Points data entries at the caller's tensors and refreshes weights given
 * again; fails unless every data input is bound exactly once. */
static int bind_inputs(cr_model *model, const char *const *in_names, const MXTensor *in_data,
                       int num_in, int *weights_given) {
  const acc_graph *graph = model->graph;
  for (int i = 0; i < num_in; ++i) {
    size_t node;
    int status = match_variable(model, in_names[i], &in_data[i], "infer", 1, &node);
    if (status != MX_ACC_OK) return status;
    size_t entry = model->entry_of_node[node];
    size_t bytes = entry_bytes(model, node, 0);
    const int sparse = in_data[i].isSparse != MX_ACC_STORAGE_DENSE; /* checked by match_variable */
    status = sparse ? MX_ACC_OK : cr_check_data(model->dev_id, &in_data[i], bytes, in_names[i]);
    if (status != MX_ACC_OK) return status;
    if (sparse && graph->nodes[node].kind == ACC_VAR_WEIGHT) {
      status = take_sparse_weight(model, entry, &in_data[i]);
      if (status != MX_ACC_OK) return status;
    } else if (graph->nodes[node].kind == ACC_VAR_WEIGHT) {
      status = take_weight(model, entry, &in_data[i], bytes);
      if (status != MX_ACC_OK) return status;
      *weights_given = 1;
    } else if (model->entries[entry].data != NULL) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: input \"%s\" is given twice", in_names[i]);
    } else {
      model->entries[entry].data = in_data[i].data;
    }
  }
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    if (graph->nodes[i].kind == ACC_VAR_DATA &&
        model->entries[model->entry_of_node[i]].data == NULL) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: data input \"%s\" is missing",
                      graph->nodes[i].name);
    }
  }
  return MX_ACC_OK;
}

static void unbind_inputs(cr_model *model) {
  for (size_t i = 0; i < model->num_entries; ++i) {
    if (!model->owned[i]) model->entries[i].data = NULL;
  }
}

/* Maps each requested output to its head (every head exactly once) and
 * checks where its buffer lives. */
static int match_outputs(const cr_model *model, const char *const *out_names,
                         const MXTensor *out_data, int num_out, size_t *head_of_output) {
  int status = acc_match_outputs(model->graph, (const char *const *)model->head_names, out_names,
                                 out_data, num_out, head_of_output);
  for (int i = 0; i < num_out && status == MX_ACC_OK; ++i) {
    acc_entry entry = model->graph->heads[head_of_output[i]];
    const size_t bytes = entry_bytes(model, entry.node, entry.index);
    status = cr_check_data(model->dev_id, &out_data[i], bytes, "infer: output");
    if (status != MX_ACC_OK) {
      /* Checked again with the output's name for the message: formatting
       * it on every call cost 0.14 us of a 16-float relu's 0.95 us. */
      char what[kNameSize];
      snprintf(what, sizeof what, "infer: output \"%s\"", out_names[i]);
      status = cr_check_data(model->dev_id, &out_data[i], bytes, what);
    }
  }
  return status;
}

int cr_model_infer(cr_model *model, const char *const *in_names, const char *const *out_names,
                   const MXTensor *in_data, const MXTensor *out_data, int num_in, int num_out,
                   int num_threads) {
  /* The heads of a few outputs on the stack, of more on the heap. */
  size_t few[8];
  size_t *head_of_output =
      num_out <= 8 ? few : calloc((size_t)num_out, sizeof(size_t));
  if (head_of_output == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "infer");
  int status = match_outputs(model, out_names, out_data, num_out, head_of_output);
  int weights_given = 0;
  if (status == MX_ACC_OK) status = bind_inputs(model, in_names, in_data, num_in, &weights_given);
  if (status == MX_ACC_OK && weights_given) status = cr_model_prepare(model);
  if (status == MX_ACC_OK && weights_given) status = prepare_rnn_steps(model);
  if (status == MX_ACC_OK) {
    status = run_model(model, num_threads);
    for (int i = 0; i < num_out && status == MX_ACC_OK; ++i) {
      acc_entry head = model->graph->heads[head_of_output[i]];
      size_t entry = model->entry_of_node[head.node] + head.index;
      size_t bytes = entry_bytes(model, head.node, head.index);
      if (bytes > 0) memmove(out_data[i].data, model->entries[entry].data, bytes);
    }
  }
  unbind_inputs(model);
  if (head_of_output != few) free(head_of_output);
  return status;
}
