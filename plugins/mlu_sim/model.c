#include "model.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "card.h"
#include "cnml.h"
#include "graph.h"
#include "library.h"
#include "ops.h"
#include "status.h"
#include "tensor.h"

enum { kErrorSize = 512, kNameSize = 1024 };

typedef struct mlu_segment {
  int card;
  size_t num_nodes;
  uint32_t *nodes;         /* operator nodes, topological order */
  size_t num_inputs, num_outputs;
  size_t *inputs, *outputs; /* entries, in the FusionOp's I/O order */
  cnmlFusionOp_t fusion;
  int launch;              /* topological index of its last input operator */
  int dirty;               /* parameters rebound since it was compiled */
} mlu_segment;

struct mlu_model_state {
  acc_graph *graph;
  size_t num_entries;
  size_t *entry_of_node;   /* first entry (visible output) of each node */
  uint32_t *node_of_entry;
  cnmlTensor_t *tensors;   /* per entry: its CNML_TENSOR, for values that flow as data */
  mlu_built_node *built;   /* per operator node */
  int *kind;               /* per node: mlu_mx_kind, -1 for variables */
  int *card;               /* per operator node: the card it runs on */
  int *segment;            /* per operator node: its segment, -1 for variables */
  unsigned char *used_outside; /* per operator node: read by another segment, or a head */
  size_t num_segments;
  mlu_segment *segments;   /* in launch order */
  void **buffers;          /* [entry * MLU_MAX_CARDS + card]: device buffers */
  cnrtQueue_t queues[MLU_MAX_CARDS];
  char **head_names;
  char *json;              /* the graph as loadModel() received it (export_model) */
  void **weight_values;    /* per node: a weight's current values, host bytes (export_model) */
  /* Per operator node: 1 while its BaseOp's parameter tensors hold no data.
   * An imported model's segments run the file's programs, which hold the
   * transformed constants: its BaseOps' parameters are bound from
   * weight_values only when a segment must compile again (see
   * bind_pending), not at import. */
  unsigned char *unbound;
  /* Guards the segments' compiled programs against configure's
   * "model_info" reading them while infer recompiles one. */
  pthread_mutex_t program_lock;
};

/* strdup is POSIX, not C11. */
static char *copy_string(const char *text) {
  size_t size = strlen(text) + 1;
  char *copy = malloc(size);
  if (copy != NULL) memcpy(copy, text, size);
  return copy;
}

static int parse_graph(const char *json, acc_graph **graph) {
  char error[kErrorSize];
  int status = acc_graph_parse(json, 1, graph, error, sizeof error);
  return status == MX_ACC_OK ? MX_ACC_OK : acc_fail(status, "graph json: %s", error);
}

static size_t entry_of(const struct mlu_model_state *s, acc_entry e) {
  return s->entry_of_node[e.node] + e.index;
}

static uint64_t entry_bytes(const acc_graph *graph, uint32_t node, uint32_t index) {
  const acc_node *owner = &graph->nodes[node];
  size_t bytes = 0;
  acc_shape_bytes(&owner->out_shapes[index], acc_dtype_size(owner->out_dtypes[index]), "entry",
                  &bytes); /* checked when the graph's tensors were made */
  return bytes;
}

/* ---- resolving nodes ---------------------------------------------------------------------- */

/* The card an operator node's "__dev_id__" names (fallback when absent). */
static int node_card(const acc_node *node, int fallback, int num_cards, int *card) {
  const char *text = acc_node_attr(node, "__dev_id__");
  int64_t value = fallback;
  if (text != NULL && acc_attr_int(text, &value) != 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "node \"%s\": __dev_id__=\"%s\"", node->name, text);
  }
  if (value < 0 || value >= num_cards) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "node \"%s\": __dev_id__ %lld is not a card (0 to %d)",
                    node->name, (long long)value, num_cards - 1);
  }
  *card = (int)value;
  return MX_ACC_OK;
}

/* Resolves operator node index against the op table, with the annotated
 * shapes of its inputs; parameters must come straight from weights, since
 * compiling folds their values into the op. */
static int resolve_node(const acc_graph *graph, size_t index, mlu_node_spec *spec) {
  const acc_node *node = &graph->nodes[index];
  char what[kNameSize];
  snprintf(what, sizeof what, "node %zu \"%s\"", index, node->name);
  if (node->num_inputs > MLU_NODE_MAX_INPUTS) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: %zu inputs", what, node->num_inputs);
  }
  acc_shape *shapes = malloc(MLU_NODE_MAX_INPUTS * sizeof *shapes);
  int32_t dtypes[MLU_NODE_MAX_INPUTS];
  if (shapes == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "%s", what);
  for (size_t i = 0; i < node->num_inputs; ++i) {
    const acc_entry input = node->inputs[i];
    shapes[i] = graph->nodes[input.node].out_shapes[input.index];
    dtypes[i] = graph->nodes[input.node].out_dtypes[input.index];
  }
  int status = mlu_resolve_node(what, node->op, node->attr_keys, node->attr_vals, node->num_attrs,
                                shapes, dtypes, (int)node->num_inputs, node->out_shapes,
                                node->out_dtypes, node->num_outputs, spec);
  free(shapes);
  for (size_t i = 0; i < node->num_inputs && status == MX_ACC_OK; ++i) {
    const acc_node *producer = &graph->nodes[node->inputs[i].node];
    if (mlu_is_param_input(spec->op->kind, (int)i) &&
        (producer->op != NULL || producer->kind != ACC_VAR_WEIGHT)) {
      status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: input %zu must be a weight, which compiling "
                        "folds into the op", what, i);
    }
  }
  return status;
}

int mlu_model_supported(const char *json, int num_cards, int *ids, int capacity, int *count,
                        char *reasons, size_t reason_size) {
  acc_graph *graph;
  int status = parse_graph(json, &graph);
  if (status != MX_ACC_OK) return status;
  mlu_node_spec *spec = malloc(sizeof *spec);
  if (spec == NULL) status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "supportedOps");
  int found = 0, card;
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK; ++i) {
    if (graph->nodes[i].op == NULL) continue;
    if (resolve_node(graph, i, spec) != MX_ACC_OK ||
        node_card(&graph->nodes[i], 0, num_cards, &card) != MX_ACC_OK) {
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
  free(spec);
  acc_graph_free(graph);
  if (status != MX_ACC_OK) return status;
  acc_clear_error(); /* the nodes skipped above are no failure of this call */
  *count = found;
  return MX_ACC_OK;
}

/* ---- tables and tensors ------------------------------------------------------------------- */

static int allocate_tables(struct mlu_model_state *s) {
  const acc_graph *graph = s->graph;
  size_t nodes = graph->num_nodes ? graph->num_nodes : 1, total = 0;
  s->entry_of_node = calloc(nodes, sizeof *s->entry_of_node);
  if (s->entry_of_node == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    s->entry_of_node[i] = total;
    total += (size_t)graph->nodes[i].num_outputs;
  }
  s->num_entries = total;
  size_t entries = total ? total : 1;
  s->node_of_entry = calloc(entries, sizeof *s->node_of_entry);
  s->tensors = calloc(entries, sizeof *s->tensors);
  s->built = calloc(nodes, sizeof *s->built);
  s->kind = calloc(nodes, sizeof *s->kind);
  s->card = calloc(nodes, sizeof *s->card);
  s->segment = calloc(nodes, sizeof *s->segment);
  s->used_outside = calloc(nodes, 1);
  s->weight_values = calloc(nodes, sizeof *s->weight_values);
  s->unbound = calloc(nodes, 1);
  s->buffers = calloc(entries * MLU_MAX_CARDS, sizeof *s->buffers);
  if (s->node_of_entry == NULL || s->tensors == NULL || s->built == NULL || s->kind == NULL ||
      s->card == NULL || s->segment == NULL || s->used_outside == NULL || s->buffers == NULL ||
      s->weight_values == NULL || s->unbound == NULL) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  }
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    s->kind[i] = -1;
    s->segment[i] = -1;
    for (int k = 0; k < graph->nodes[i].num_outputs; ++k) {
      s->node_of_entry[s->entry_of_node[i] + (size_t)k] = (uint32_t)i;
    }
  }
  return MX_ACC_OK;
}

/* The CNML_TENSOR of entry (node, index), made on first use. */
static int entry_tensor(struct mlu_model_state *s, acc_entry e, cnmlTensor_t *tensor) {
  size_t entry = entry_of(s, e);
  if (s->tensors[entry] == NULL) {
    const acc_node *node = &s->graph->nodes[e.node];
    const acc_shape *shape = &node->out_shapes[e.index];
    int dtype = mlu_cnml_dtype(node->out_dtypes[e.index]);
    if (dtype < 0 || shape->ndim > MLU_MAX_NDIM) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "\"%s\": %s data of %d dimensions cannot flow on the "
                      "MLU", node->name, acc_dtype_name(node->out_dtypes[e.index]), shape->ndim);
    }
    int64_t dims[MLU_MAX_NDIM];
    for (int d = 0; d < shape->ndim; ++d) dims[d] = (int64_t)shape->dims[d];
    int status = cnmlCreateTensor(&s->tensors[entry], CNML_TENSOR, (cnmlDataType_t)dtype, dims,
                                  shape->ndim);
    if (status != MX_ACC_OK) return status;
  }
  *tensor = s->tensors[entry];
  return MX_ACC_OK;
}

/* ---- the inputs given to loadModel --------------------------------------------------------- */

/* Finds the variable called name and checks tensor against its annotation
 * and the model's device. */
static int match_variable(const mlu_model *model, const char *name, const MXTensor *tensor,
                          const char *call, int need_data, size_t *node_index) {
  const acc_graph *graph = model->state->graph;
  char what[kNameSize];
  if (name == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a tensor name is NULL", call);
  snprintf(what, sizeof what, "%s: input \"%s\"", call, name);
  long index = acc_graph_find_variable(graph, name);
  if (index < 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s is not a graph input", what);
  const acc_node *node = &graph->nodes[index];
  const acc_shape *shape = &node->out_shapes[0];
  int status = need_data ? acc_tensor_expect(tensor, what, node->out_dtypes[0], shape)
                         : acc_tensor_expect_spec(tensor, what, node->out_dtypes[0], shape);
  if (status == MX_ACC_OK && need_data) {
    status = mlu_check_data(model->dev_id, tensor, entry_bytes(graph, (uint32_t)index, 0), what);
  }
  if (status != MX_ACC_OK) return status;
  *node_index = (size_t)index;
  return MX_ACC_OK;
}

/* given[node] = the loadModel tensor of each variable; every weight once. */
static int collect_given(mlu_model *model, const char *const *names, const MXTensor *data,
                         int num_data, const MXTensor **given) {
  const acc_graph *graph = model->state->graph;
  for (int i = 0; i < num_data; ++i) {
    long index = names[i] ? acc_graph_find_variable(graph, names[i]) : -1;
    int weight = index >= 0 && graph->nodes[index].kind == ACC_VAR_WEIGHT;
    size_t node;
    int status = match_variable(model, names[i], &data[i], "loadModel", weight, &node);
    if (status != MX_ACC_OK) return status;
    if (given[node] != NULL) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: input \"%s\" is given twice", names[i]);
    }
    given[node] = &data[i];
  }
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    if (graph->nodes[i].kind == ACC_VAR_WEIGHT && given[i] == NULL) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: weight \"%s\" is missing",
                      graph->nodes[i].name);
    }
  }
  return MX_ACC_OK;
}

/* Host bytes of a weight: the tensor's own memory, or a copy (into *temp,
 * freed by the caller) of device memory of the model's card. */
static int host_view(const mlu_model *model, const MXTensor *tensor, uint64_t bytes,
                     const void **view, void **temp) {
  *temp = NULL;
  *view = NULL;
  if (tensor->dev_id == MX_ACC_HOST_DEVICE) {
    *view = tensor->data;
    return MX_ACC_OK;
  }
  *temp = malloc(bytes ? (size_t)bytes : 1);
  if (*temp == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "weight copy");
  *view = *temp;
  return cnrtMemcpy(mlu_card_for(model->dev_id), *temp, tensor->data, (size_t)bytes,
                    CNRT_MEM_TRANS_DIR_DEV2HOST);
}

/* Keeps host bytes of weight var's current values, for export_model. */
static int keep_weight(struct mlu_model_state *s, size_t var, const void *host) {
  uint64_t bytes = entry_bytes(s->graph, (uint32_t)var, 0);
  if (s->weight_values[var] == NULL) {
    s->weight_values[var] = malloc(bytes ? (size_t)bytes : 1);
    if (s->weight_values[var] == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "weight copy");
  }
  if (bytes > 0) memcpy(s->weight_values[var], host, (size_t)bytes);
  return MX_ACC_OK;
}

static int keep_weights(mlu_model *model, const MXTensor **given) {
  struct mlu_model_state *s = model->state;
  int status = MX_ACC_OK;
  for (size_t i = 0; i < s->graph->num_nodes && status == MX_ACC_OK; ++i) {
    if (s->graph->nodes[i].kind != ACC_VAR_WEIGHT) continue;
    const void *host = NULL;
    void *temp = NULL;
    status = host_view(model, given[i], entry_bytes(s->graph, (uint32_t)i, 0), &host, &temp);
    if (status == MX_ACC_OK) status = keep_weight(s, i, host);
    free(temp);
  }
  return status;
}

/* ---- BaseOps ------------------------------------------------------------------------------- */

/* Builds the BaseOp of operator node index; with bind 0 its parameter
 * tensors are made without data (an imported model: see unbound). */
static int build_node(mlu_model *model, size_t index, mlu_node_spec *spec, const MXTensor **given,
                      int bind) {
  struct mlu_model_state *s = model->state;
  const acc_node *node = &s->graph->nodes[index];
  int status = resolve_node(s->graph, index, spec);
  if (status == MX_ACC_OK) {
    status = node_card(node, model->dev_id, mlu_library_instance()->num_cards, &s->card[index]);
  }
  if (status != MX_ACC_OK) return status;
  s->kind[index] = spec->op->kind;
  cnmlTensor_t data[MLU_NODE_MAX_INPUTS] = {NULL}, output = NULL;
  const void *params[MLU_NODE_MAX_INPUTS] = {NULL};
  void *temps[MLU_NODE_MAX_INPUTS] = {NULL};
  for (size_t j = 0; j < node->num_inputs && status == MX_ACC_OK; ++j) {
    acc_entry input = node->inputs[j];
    if (mlu_is_param_input(spec->op->kind, (int)j)) {
      if (bind) {
        status = host_view(model, given[input.node], entry_bytes(s->graph, input.node, 0),
                           &params[j], &temps[j]);
      }
    } else {
      status = entry_tensor(s, input, &data[j]);
    }
  }
  acc_entry self = {(uint32_t)index, 0};
  if (status == MX_ACC_OK) status = entry_tensor(s, self, &output);
  if (status == MX_ACC_OK) {
    status = mlu_build_node(spec, data, output, bind ? params : NULL, &s->built[index]);
  }
  if (status == MX_ACC_OK) s->unbound[index] = !bind && s->built[index].num_params > 0;
  for (size_t j = 0; j < node->num_inputs; ++j) free(temps[j]);
  return status;
}

/* Binds the parameters of the segment's BaseOps that hold no data yet
 * (unbound) to the weights' current values, before the segment compiles. */
static int bind_pending(struct mlu_model_state *s, const mlu_segment *seg) {
  const acc_graph *graph = s->graph;
  for (size_t i = 0; i < seg->num_nodes; ++i) {
    uint32_t node = seg->nodes[i];
    if (!s->unbound[node]) continue;
    mlu_built_node *built = &s->built[node];
    for (int k = 0; k < built->num_params; ++k) {
      uint32_t var = graph->nodes[node].inputs[built->param_input[k]].node;
      if (s->weight_values[var] == NULL) { /* parameters are weights: collect_given */
        return acc_fail(MX_ACC_ERR_INTERNAL, "\"%s\": parameter %d has no values",
                        graph->nodes[node].name, k);
      }
      int status = mlu_bind_param(built, k, s->weight_values[var], graph->nodes[var].out_dtypes[0],
                                  &graph->nodes[var].out_shapes[0]);
      if (status != MX_ACC_OK) return status;
    }
    s->unbound[node] = 0;
  }
  return MX_ACC_OK;
}

/* Compiles a segment whose weights changed since its program was made. */
static int recompile_segment(struct mlu_model_state *s, mlu_segment *seg) {
  int status = bind_pending(s, seg);
  if (status == MX_ACC_OK) status = cnmlCompileFusionOp(seg->fusion, mlu_card_for(seg->card));
  if (status == MX_ACC_OK) seg->dirty = 0;
  return status;
}

static int build_nodes(mlu_model *model, const MXTensor **given, int bind) {
  const acc_graph *graph = model->state->graph;
  mlu_node_spec *spec = malloc(sizeof *spec);
  if (spec == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel");
  int status = MX_ACC_OK;
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK; ++i) {
    if (graph->nodes[i].op != NULL) status = build_node(model, i, spec, given, bind);
  }
  free(spec);
  for (size_t h = 0; h < graph->num_heads && status == MX_ACC_OK; ++h) {
    if (graph->nodes[graph->heads[h].node].op == NULL) {
      status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "graph output \"%s\" is a variable",
                        graph->nodes[graph->heads[h].node].name);
    }
  }
  return status;
}

/* ---- fusion segments ------------------------------------------------------------------------- */

/* Positions of the operators within their card's group, and for each the
 * last same-group position reading it (INT_MAX when another group reads
 * it or it is a graph output). */
typedef struct grouping {
  int *position;
  int *last_reader;
} grouping;

static int is_data_input(const struct mlu_model_state *s, size_t node, size_t j) {
  return !mlu_is_param_input(s->kind[node], (int)j);
}

static void compute_readers(const struct mlu_model_state *s, grouping *g) {
  const acc_graph *graph = s->graph;
  for (size_t c = 0; c < graph->num_nodes; ++c) {
    if (graph->nodes[c].op == NULL) continue;
    for (size_t j = 0; j < graph->nodes[c].num_inputs; ++j) {
      uint32_t p = graph->nodes[c].inputs[j].node;
      if (graph->nodes[p].op == NULL || !is_data_input(s, c, j)) continue;
      int reader = s->card[p] == s->card[c] ? g->position[c] : INT_MAX;
      if (reader > g->last_reader[p]) g->last_reader[p] = reader;
    }
  }
  for (size_t h = 0; h < graph->num_heads; ++h) g->last_reader[graph->heads[h].node] = INT_MAX;
}

/* Whether operator node reads data from outside the run starting at group
 * position start: a variable, another card's operator, or an earlier one. */
static int is_input_op(const struct mlu_model_state *s, const grouping *g, uint32_t node,
                       int start) {
  const acc_node *n = &s->graph->nodes[node];
  for (size_t j = 0; j < n->num_inputs; ++j) {
    uint32_t p = n->inputs[j].node;
    if (!is_data_input(s, node, j)) continue;
    if (s->graph->nodes[p].op == NULL || s->card[p] != s->card[node] || g->position[p] < start) {
      return 1;
    }
  }
  return 0;
}

/* The last group position the run starting at group[start] may extend to:
 * the largest end whose input operators' largest topological index is at
 * most its output operators' smallest. */
static size_t run_end(const struct mlu_model_state *s, const grouping *g, const uint32_t *group,
                      size_t count, size_t start) {
  size_t best = start;
  long max_in = -1;
  for (size_t end = start; end < count; ++end) {
    if (is_input_op(s, g, group[end], (int)start) && (long)group[end] > max_in) max_in = group[end];
    long min_out = LONG_MAX;
    for (size_t j = start; j <= end; ++j) {
      if (g->last_reader[group[j]] > (int)end && (long)group[j] < min_out) min_out = group[j];
    }
    if (max_in < 0 || min_out == LONG_MAX || max_in <= min_out) best = end;
  }
  return best;
}

static int add_segment(struct mlu_model_state *s, const grouping *g, int card,
                       const uint32_t *nodes, size_t count, size_t *capacity) {
  if (s->num_segments == *capacity) {
    size_t grown = *capacity ? *capacity * 2 : 8;
    mlu_segment *segments = realloc(s->segments, grown * sizeof *segments);
    if (segments == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "segments");
    s->segments = segments;
    *capacity = grown;
  }
  mlu_segment *seg = &s->segments[s->num_segments];
  memset(seg, 0, sizeof *seg);
  seg->nodes = malloc(count * sizeof *seg->nodes);
  if (seg->nodes == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "segments");
  s->num_segments += 1;
  memcpy(seg->nodes, nodes, count * sizeof *nodes);
  seg->num_nodes = count;
  seg->card = card;
  seg->launch = (int)nodes[0];
  for (size_t i = 0; i < count; ++i) {
    if (is_input_op(s, g, nodes[i], g->position[nodes[0]])) seg->launch = (int)nodes[i];
  }
  return MX_ACC_OK;
}

static int cut_group(struct mlu_model_state *s, grouping *g, int card, uint32_t *group,
                     size_t *capacity) {
  const acc_graph *graph = s->graph;
  size_t count = 0;
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    if (graph->nodes[i].op != NULL && s->card[i] == card) {
      g->position[i] = (int)count;
      group[count++] = (uint32_t)i;
    }
  }
  compute_readers(s, g);
  for (size_t start = 0; start < count;) {
    size_t end = run_end(s, g, group, count, start);
    int status = add_segment(s, g, card, group + start, end - start + 1, capacity);
    if (status != MX_ACC_OK) return status;
    start = end + 1;
  }
  return MX_ACC_OK;
}

static int by_launch(const void *a, const void *b) {
  const mlu_segment *x = a, *y = b;
  return (x->launch > y->launch) - (x->launch < y->launch);
}

static int build_segments(struct mlu_model_state *s) {
  size_t nodes = s->graph->num_nodes ? s->graph->num_nodes : 1, capacity = 0;
  grouping g = {calloc(nodes, sizeof(int)), calloc(nodes, sizeof(int))};
  uint32_t *group = malloc(nodes * sizeof *group);
  int status = MX_ACC_OK;
  if (g.position == NULL || g.last_reader == NULL || group == NULL) {
    status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "segments");
  }
  for (int card = 0; card < MLU_MAX_CARDS && status == MX_ACC_OK; ++card) {
    for (size_t i = 0; i < nodes; ++i) g.last_reader[i] = -1;
    status = cut_group(s, &g, card, group, &capacity);
  }
  free(g.position);
  free(g.last_reader);
  free(group);
  if (status != MX_ACC_OK) return status;
  qsort(s->segments, s->num_segments, sizeof *s->segments, by_launch);
  for (size_t k = 0; k < s->num_segments; ++k) {
    const mlu_segment *seg = &s->segments[k];
    for (size_t i = 0; i < seg->num_nodes; ++i) s->segment[seg->nodes[i]] = (int)k;
  }
  return MX_ACC_OK;
}

/* ---- FusionOps ------------------------------------------------------------------------------ */

static int append_entry(size_t **list, size_t *count, size_t entry) {
  for (size_t i = 0; i < *count; ++i) {
    if ((*list)[i] == entry) return MX_ACC_OK;
  }
  size_t *grown = realloc(*list, (*count + 1) * sizeof **list);
  if (grown == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "segment I/O");
  grown[(*count)++] = entry;
  *list = grown;
  return MX_ACC_OK;
}

static void mark_used_outside(struct mlu_model_state *s) {
  const acc_graph *graph = s->graph;
  for (size_t c = 0; c < graph->num_nodes; ++c) {
    if (graph->nodes[c].op == NULL) continue;
    for (size_t j = 0; j < graph->nodes[c].num_inputs; ++j) {
      uint32_t p = graph->nodes[c].inputs[j].node;
      if (graph->nodes[p].op != NULL && s->segment[p] != s->segment[c]) s->used_outside[p] = 1;
    }
  }
  for (size_t h = 0; h < graph->num_heads; ++h) s->used_outside[graph->heads[h].node] = 1;
}

/* Segment inputs: data read from outside it; outputs: results read
 * outside it (at least one, so that the FusionOp has a result). */
static int segment_io(struct mlu_model_state *s, size_t k) {
  mlu_segment *seg = &s->segments[k];
  int status = MX_ACC_OK;
  for (size_t i = 0; i < seg->num_nodes && status == MX_ACC_OK; ++i) {
    uint32_t node = seg->nodes[i];
    const acc_node *n = &s->graph->nodes[node];
    for (size_t j = 0; j < n->num_inputs && status == MX_ACC_OK; ++j) {
      uint32_t p = n->inputs[j].node;
      if (is_data_input(s, node, j) && (s->graph->nodes[p].op == NULL || s->segment[p] != (int)k)) {
        status = append_entry(&seg->inputs, &seg->num_inputs, entry_of(s, n->inputs[j]));
      }
    }
    int last_chance = i + 1 == seg->num_nodes && seg->num_outputs == 0;
    if (status == MX_ACC_OK && (s->used_outside[node] || last_chance)) {
      status = append_entry(&seg->outputs, &seg->num_outputs, s->entry_of_node[node]);
    }
  }
  if (status == MX_ACC_OK &&
      (seg->num_inputs > MLU_MAX_FUSION_IO || seg->num_outputs > MLU_MAX_FUSION_IO)) {
    status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "a fusion segment has more than %d inputs or outputs",
                      MLU_MAX_FUSION_IO);
  }
  return status;
}

static void segment_view(const struct mlu_model_state *s, size_t k, mlu_segment_view *view) {
  const mlu_segment *seg = &s->segments[k];
  *view = (mlu_segment_view){k, s->num_segments, seg->card, seg->launch, seg->num_nodes,
                             seg->nodes, seg->num_inputs, seg->inputs, seg->num_outputs,
                             seg->outputs};
}

/* A device buffer for entry on card, made after the segment using it was
 * compiled (device memory exists only then). */
static int ensure_buffer(struct mlu_model_state *s, size_t entry, int card) {
  void **slot = &s->buffers[entry * MLU_MAX_CARDS + (size_t)card];
  return *slot != NULL ? MX_ACC_OK : cnmlMallocBuffer(s->tensors[entry], slot);
}

static int compile_segment(struct mlu_model_state *s, size_t k, mlu_program_source source,
                           void *context) {
  mlu_segment *seg = &s->segments[k];
  int status = segment_io(s, k);
  if (status == MX_ACC_OK) status = cnmlCreateFusionOp(&seg->fusion);
  for (size_t i = 0; i < seg->num_nodes && status == MX_ACC_OK; ++i) {
    status = cnmlFuseOp(s->built[seg->nodes[i]].op, seg->fusion);
  }
  cnmlTensor_t io[2 * MLU_MAX_FUSION_IO];
  size_t total = seg->num_inputs + seg->num_outputs;
  for (size_t i = 0; i < total && status == MX_ACC_OK; ++i) {
    io[i] = s->tensors[i < seg->num_inputs ? seg->inputs[i] : seg->outputs[i - seg->num_inputs]];
  }
  if (status == MX_ACC_OK) {
    status = cnmlSetFusionIO(seg->fusion, io, (int)seg->num_inputs, io + seg->num_inputs,
                             (int)seg->num_outputs);
  }
  if (status == MX_ACC_OK && source != NULL) { /* an offline model: no compiling */
    mlu_segment_view view;
    segment_view(s, k, &view);
    status = source(context, &view, seg->fusion, mlu_card_for(seg->card));
  } else if (status == MX_ACC_OK) {
    status = cnmlCompileFusionOp(seg->fusion, mlu_card_for(seg->card));
  }
  for (size_t i = 0; i < total && status == MX_ACC_OK; ++i) {
    size_t entry = i < seg->num_inputs ? seg->inputs[i] : seg->outputs[i - seg->num_inputs];
    status = ensure_buffer(s, entry, seg->card);
  }
  return status;
}

static int compile_segments(struct mlu_model_state *s, mlu_program_source source,
                            void *context) {
  mark_used_outside(s);
  int status = MX_ACC_OK;
  for (size_t k = 0; k < s->num_segments && status == MX_ACC_OK; ++k) {
    status = compile_segment(s, k, source, context);
    int card = s->segments[k].card;
    if (status == MX_ACC_OK && s->queues[card] == NULL) {
      status = cnrtCreateQueue(&s->queues[card], mlu_card_for(card));
    }
  }
  return status;
}

/* ---- copies between the caller's tensors and the model's buffers ---------------------------- */

static int copy_in(int model_card, const MXTensor *src, uint64_t bytes, int card, void *dst) {
  cnrtDev_t target = mlu_card_for(card);
  if (src->dev_id == MX_ACC_HOST_DEVICE) {
    return cnrtMemcpy(target, dst, src->data, (size_t)bytes, CNRT_MEM_TRANS_DIR_HOST2DEV);
  }
  if (src->dev_id == card) {
    return cnrtMemcpy(target, dst, src->data, (size_t)bytes, CNRT_MEM_TRANS_DIR_DEV2DEV);
  }
  void *temp = malloc(bytes ? (size_t)bytes : 1); /* between cards: through the host */
  if (temp == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "copy between cards");
  int status = cnrtMemcpy(mlu_card_for(model_card), temp, src->data, (size_t)bytes,
                          CNRT_MEM_TRANS_DIR_DEV2HOST);
  if (status == MX_ACC_OK) {
    status = cnrtMemcpy(target, dst, temp, (size_t)bytes, CNRT_MEM_TRANS_DIR_HOST2DEV);
  }
  free(temp);
  return status;
}

static int copy_out(int card, const void *src, uint64_t bytes, const MXTensor *dst) {
  cnrtDev_t source = mlu_card_for(card);
  if (dst->dev_id == MX_ACC_HOST_DEVICE) {
    return cnrtMemcpy(source, dst->data, src, (size_t)bytes, CNRT_MEM_TRANS_DIR_DEV2HOST);
  }
  if (dst->dev_id == card) {
    return cnrtMemcpy(source, dst->data, src, (size_t)bytes, CNRT_MEM_TRANS_DIR_DEV2DEV);
  }
  void *temp = malloc(bytes ? (size_t)bytes : 1);
  if (temp == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "copy between cards");
  int status = cnrtMemcpy(source, temp, src, (size_t)bytes, CNRT_MEM_TRANS_DIR_DEV2HOST);
  if (status == MX_ACC_OK) {
    status = cnrtMemcpy(mlu_card_for(dst->dev_id), dst->data, temp, (size_t)bytes,
                        CNRT_MEM_TRANS_DIR_HOST2DEV);
  }
  free(temp);
  return status;
}

/* Copies a variable's value into each of its buffers. */
static int fill_variable(mlu_model *model, size_t node, const MXTensor *value) {
  struct mlu_model_state *s = model->state;
  size_t entry = s->entry_of_node[node];
  uint64_t bytes = entry_bytes(s->graph, (uint32_t)node, 0);
  int status = MX_ACC_OK;
  for (int card = 0; card < MLU_MAX_CARDS && status == MX_ACC_OK; ++card) {
    void *buffer = s->buffers[entry * MLU_MAX_CARDS + (size_t)card];
    if (buffer != NULL) status = copy_in(model->dev_id, value, bytes, card, buffer);
  }
  return status;
}

/* New values of a weight: rebound into every op using it as a parameter
 * (their segments recompile before the next launch), copied into its
 * buffers where it flows as data. */
static int refresh_weight(mlu_model *model, size_t var, const MXTensor *value) {
  struct mlu_model_state *s = model->state;
  const acc_graph *graph = s->graph;
  const void *host = NULL;
  void *temp = NULL;
  int status = host_view(model, value, entry_bytes(graph, (uint32_t)var, 0), &host, &temp);
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK; ++i) {
    mlu_built_node *built = &s->built[i];
    for (int k = 0; k < built->num_params && status == MX_ACC_OK; ++k) {
      if (graph->nodes[i].inputs[built->param_input[k]].node != var) continue;
      status = mlu_bind_param(built, k, host, graph->nodes[var].out_dtypes[0],
                              &graph->nodes[var].out_shapes[0]);
      s->segments[s->segment[i]].dirty = 1;
    }
  }
  if (status == MX_ACC_OK) status = keep_weight(s, var, host);
  free(temp);
  return status == MX_ACC_OK ? fill_variable(model, var, value) : status;
}

/* ---- creating and freeing ------------------------------------------------------------------- */

/* Weights that flow as data (e.g. elemwise_add(x, w)) go to their buffers. */
static int upload_weights(mlu_model *model, const MXTensor **given) {
  const acc_graph *graph = model->state->graph;
  int status = MX_ACC_OK;
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK; ++i) {
    if (graph->nodes[i].kind == ACC_VAR_WEIGHT) status = fill_variable(model, i, given[i]);
  }
  return status;
}

int mlu_model_create(const char *model_id, const char *json, const char *const *names,
                     const MXTensor *data, int num_data, int dev_id, mlu_model **result) {
  return mlu_model_create_from(model_id, json, names, data, num_data, dev_id, NULL, NULL, result);
}

int mlu_model_create_from(const char *model_id, const char *json, const char *const *names,
                          const MXTensor *data, int num_data, int dev_id,
                          mlu_program_source source, void *context, mlu_model **result) {
  mlu_model *model = calloc(1, sizeof *model);
  struct mlu_model_state *s = calloc(1, sizeof *s);
  if (model == NULL || s == NULL) {
    free(model);
    free(s);
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model");
  }
  model->state = s;
  pthread_mutex_init(&s->program_lock, NULL);
  model->dev_id = dev_id;
  model->id = copy_string(model_id);
  const MXTensor **given = NULL;
  int status = model->id ? MX_ACC_OK : acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model id");
  if (status == MX_ACC_OK) {
    s->json = copy_string(json);
    if (s->json == NULL) status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model json");
  }
  if (status == MX_ACC_OK) status = parse_graph(json, &s->graph);
  if (status == MX_ACC_OK) status = allocate_tables(s);
  if (status == MX_ACC_OK) {
    given = calloc(s->graph->num_nodes ? s->graph->num_nodes : 1, sizeof *given);
    if (given == NULL) status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model");
  }
  if (status == MX_ACC_OK) status = collect_given(model, names, data, num_data, given);
  if (status == MX_ACC_OK) status = keep_weights(model, given);
  /* An imported model (source) binds its BaseOps' parameters only if it
   * must compile (bind_pending). */
  if (status == MX_ACC_OK) status = build_nodes(model, given, source == NULL);
  if (status == MX_ACC_OK) status = build_segments(s);
  if (status == MX_ACC_OK) status = compile_segments(s, source, context);
  if (status == MX_ACC_OK) status = upload_weights(model, given);
  if (status == MX_ACC_OK) status = acc_graph_head_names(s->graph, &s->head_names);
  free(given);
  if (status != MX_ACC_OK) {
    mlu_model_free(model);
    return status;
  }
  *result = model;
  return MX_ACC_OK;
}

void mlu_model_free(mlu_model *model) {
  if (model == NULL) return;
  struct mlu_model_state *s = model->state;
  for (int card = 0; card < MLU_MAX_CARDS; ++card) cnrtDestroyQueue(s->queues[card]); /* drains */
  for (size_t k = 0; k < s->num_segments; ++k) {
    cnmlDestroyFusionOp(&s->segments[k].fusion);
    free(s->segments[k].nodes);
    free(s->segments[k].inputs);
    free(s->segments[k].outputs);
  }
  free(s->segments);
  for (size_t i = 0; s->buffers != NULL && i < s->num_entries * MLU_MAX_CARDS; ++i) {
    if (s->buffers[i] != NULL) {
      mlu_card_free(mlu_card_for((int)(i % MLU_MAX_CARDS)), s->buffers[i], MLU_MEM_BUFFER);
    }
  }
  for (size_t i = 0; s->built != NULL && i < s->graph->num_nodes; ++i) mlu_free_node(&s->built[i]);
  for (size_t i = 0; s->tensors != NULL && i < s->num_entries; ++i) {
    cnmlDestroyTensor(&s->tensors[i]);
  }
  acc_free_head_names(s->graph, s->head_names);
  for (size_t i = 0; s->weight_values != NULL && i < s->graph->num_nodes; ++i) {
    free(s->weight_values[i]);
  }
  free(s->weight_values);
  free(s->unbound);
  free(s->json);
  free(s->buffers);
  free(s->used_outside);
  free(s->segment);
  free(s->card);
  free(s->kind);
  free(s->built);
  free(s->tensors);
  free(s->node_of_entry);
  free(s->entry_of_node);
  acc_graph_free(s->graph);
  pthread_mutex_destroy(&s->program_lock);
  free(s);
  free(model->id);
  free(model);
}

/* ---- inference ------------------------------------------------------------------------------ */

/* Maps each requested output to its head (every head exactly once) and
 * checks where its buffer lives. */
static int match_outputs(const mlu_model *model, const char *const *out_names,
                         const MXTensor *out_data, int num_out, size_t *head_of_output) {
  const struct mlu_model_state *s = model->state;
  int status = acc_match_outputs(s->graph, (const char *const *)s->head_names, out_names,
                                 out_data, num_out, head_of_output);
  for (int i = 0; i < num_out && status == MX_ACC_OK; ++i) {
    acc_entry entry = s->graph->heads[head_of_output[i]];
    char what[kNameSize];
    snprintf(what, sizeof what, "infer: output \"%s\"", out_names[i]);
    status = mlu_check_data(model->dev_id, &out_data[i],
                            entry_bytes(s->graph, entry.node, entry.index), what);
  }
  return status;
}

/* Copies the data inputs in and refreshes weights given again. */
static int bind_inputs(mlu_model *model, const char *const *in_names, const MXTensor *in_data,
                       int num_in) {
  const acc_graph *graph = model->state->graph;
  unsigned char *seen = calloc(graph->num_nodes ? graph->num_nodes : 1, 1);
  if (seen == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "infer");
  int status = MX_ACC_OK;
  for (int i = 0; i < num_in && status == MX_ACC_OK; ++i) {
    size_t node;
    status = match_variable(model, in_names[i], &in_data[i], "infer", 1, &node);
    if (status == MX_ACC_OK && seen[node]) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: input \"%s\" is given twice", in_names[i]);
    }
    if (status != MX_ACC_OK) break;
    seen[node] = 1;
    status = graph->nodes[node].kind == ACC_VAR_WEIGHT ? refresh_weight(model, node, &in_data[i])
                                                       : fill_variable(model, node, &in_data[i]);
  }
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK; ++i) {
    if (graph->nodes[i].kind == ACC_VAR_DATA && !seen[i]) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: data input \"%s\" is missing",
                        graph->nodes[i].name);
    }
  }
  free(seen);
  return status;
}

/* Brings a segment's inputs made on another card over, through the host. */
static int gather_inputs(mlu_model *model, const mlu_segment *seg) {
  struct mlu_model_state *s = model->state;
  for (size_t i = 0; i < seg->num_inputs; ++i) {
    size_t entry = seg->inputs[i];
    uint32_t producer = s->node_of_entry[entry];
    if (s->graph->nodes[producer].op == NULL || s->card[producer] == seg->card) continue;
    int from = s->card[producer];
    int status = cnrtSyncQueue(s->queues[from]);
    const void *src = s->buffers[entry * MLU_MAX_CARDS + (size_t)from];
    MXTensor staged = {(void *)src, NULL, 0, 0, 0, NULL, from};
    if (status == MX_ACC_OK) {
      status = copy_in(from, &staged, entry_bytes(s->graph, producer, 0), seg->card,
                       s->buffers[entry * MLU_MAX_CARDS + (size_t)seg->card]);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int launch_segment(mlu_model *model, mlu_segment *seg) {
  struct mlu_model_state *s = model->state;
  int status = MX_ACC_OK;
  if (seg->dirty) { /* weights changed: compile again with the new values */
    pthread_mutex_lock(&s->program_lock);
    status = recompile_segment(s, seg);
    pthread_mutex_unlock(&s->program_lock);
  }
  if (status == MX_ACC_OK) status = gather_inputs(model, seg);
  if (status != MX_ACC_OK) return status;
  const void *inputs[MLU_MAX_FUSION_IO];
  void *outputs[MLU_MAX_FUSION_IO];
  for (size_t i = 0; i < seg->num_inputs; ++i) {
    inputs[i] = s->buffers[seg->inputs[i] * MLU_MAX_CARDS + (size_t)seg->card];
  }
  for (size_t i = 0; i < seg->num_outputs; ++i) {
    outputs[i] = s->buffers[seg->outputs[i] * MLU_MAX_CARDS + (size_t)seg->card];
  }
  return cnmlComputeFusionOpForward(seg->fusion, inputs, (int)seg->num_inputs, outputs,
                                    (int)seg->num_outputs, s->queues[seg->card]);
}

/* Waits for every card's queue; the first failure wins, and every queue is
 * drained so that no failure lingers into the next inference. */
static int sync_all(struct mlu_model_state *s, int status) {
  for (int card = 0; card < MLU_MAX_CARDS; ++card) {
    if (s->queues[card] == NULL) continue;
    int synced = cnrtSyncQueue(s->queues[card]);
    if (status == MX_ACC_OK) status = synced;
  }
  return status;
}

static int copy_outputs(mlu_model *model, const MXTensor *out_data, int num_out,
                        const size_t *head_of_output) {
  struct mlu_model_state *s = model->state;
  int status = MX_ACC_OK;
  for (int i = 0; i < num_out && status == MX_ACC_OK; ++i) {
    acc_entry head = s->graph->heads[head_of_output[i]];
    int card = s->card[head.node];
    const void *buffer = s->buffers[entry_of(s, head) * MLU_MAX_CARDS + (size_t)card];
    status = copy_out(card, buffer, entry_bytes(s->graph, head.node, head.index), &out_data[i]);
  }
  return status;
}

int mlu_model_infer(mlu_model *model, const char *const *in_names, const char *const *out_names,
                    const MXTensor *in_data, const MXTensor *out_data, int num_in, int num_out) {
  struct mlu_model_state *s = model->state;
  size_t *head_of_output = calloc(num_out > 0 ? (size_t)num_out : 1, sizeof(size_t));
  if (head_of_output == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "infer");
  int status = match_outputs(model, out_names, out_data, num_out, head_of_output);
  if (status == MX_ACC_OK) status = bind_inputs(model, in_names, in_data, num_in);
  for (size_t k = 0; k < s->num_segments && status == MX_ACC_OK; ++k) {
    status = launch_segment(model, &s->segments[k]);
  }
  status = sync_all(s, status);
  if (status == MX_ACC_OK) status = copy_outputs(model, out_data, num_out, head_of_output);
  free(head_of_output);
  return status;
}

const char *mlu_model_json(const mlu_model *model) { return model->state->json; }

const acc_graph *mlu_model_graph(const mlu_model *model) { return model->state->graph; }

const void *mlu_model_weight(const mlu_model *model, size_t node) {
  const struct mlu_model_state *s = model->state;
  return node < s->graph->num_nodes ? s->weight_values[node] : NULL;
}

size_t mlu_model_num_segments(const mlu_model *model) { return model->state->num_segments; }

void mlu_model_segment(const mlu_model *model, size_t k, mlu_segment_view *view) {
  segment_view(model->state, k, view);
}

int mlu_model_segment_program(mlu_model *model, size_t k, mlu_program **program) {
  struct mlu_model_state *s = model->state;
  mlu_segment *seg = &s->segments[k];
  int status = MX_ACC_OK;
  pthread_mutex_lock(&s->program_lock);
  if (seg->dirty) status = recompile_segment(s, seg);
  if (status == MX_ACC_OK) status = cnmlSimGetFusionOpProgram(seg->fusion, program);
  pthread_mutex_unlock(&s->program_lock);
  return status;
}

void mlu_model_describe(const mlu_model *model, mlu_model_info *info) {
  struct mlu_model_state *s = model->state;
  memset(info, 0, sizeof *info);
  pthread_mutex_lock(&s->program_lock);
  info->segments = s->num_segments;
  for (size_t k = 0; k < s->num_segments; ++k) {
    mlu_program_info p;
    if (cnmlSimGetFusionOpInfo(s->segments[k].fusion, &p) != CNML_STATUS_SUCCESS) continue;
    info->operators += s->segments[k].num_nodes;
    info->kernels += p.kernels;
    info->instructions += p.instructions;
    info->folded_batchnorms += p.folded_batchnorms;
    info->fused_epilogues += p.fused_epilogues;
    info->resident_values += p.resident_values;
    info->spilled_values += p.spilled_values;
    info->aliased_values += p.aliased_values;
    info->int8_kernels += p.int8_kernels;
    info->const_bytes += p.const_bytes;
    info->scratch_bytes += p.scratch_bytes;
    if (p.sram_words > info->sram_words) info->sram_words = p.sram_words;
  }
  pthread_mutex_unlock(&s->program_lock);
}
