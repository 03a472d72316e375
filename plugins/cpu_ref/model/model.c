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

#include "kernels.h"
#include "library.h"
#include "memory.h"
#include "op_impl.h"
#include "parallel.h"
#include "status.h"
#include "tensor.h"

/* A Convolution or FullyConnected step as model.c runs it: with its
 * filters pre-packed for the GEMM when they are weights (re-packed when
 * infer() is given new values), and with the element-wise steps that follow
 * it folded in (see fuse_steps). */
typedef struct cr_dense_plan {
  int is_conv;
  int weights_constant;  /* filters (and folded BatchNorm parameters) are weights */
  int has_bn;            /* a BatchNorm folded into the filters and the bias */
  size_t bn[4];          /* its gamma, beta, moving mean and moving var entries */
  double bn_eps;
  int bn_fix_gamma;
  int has_residual;      /* an elemwise_add of this entry, fused */
  size_t residual;
  cr_epilogue_act act;   /* a fused relu or clip */
  float clip_low, clip_high;
  size_t output;         /* the entry the fused chain writes */
  /* Elements from one image of the output to the next when it is written
   * into a slice of a Concat's output (plan_concat_views); 0: dense. */
  int64_t out_image_stride;
  float *folded_w;       /* the filters and bias with the BatchNorm folded in */
  float *folded_b;
  float *packed;         /* the filters packed for the GEMM, or NULL */
  cr_isa packed_isa;
} cr_dense_plan;

struct cr_step {
  const cr_op *op;
  cr_params params;
  int num_inputs;
  size_t inputs[CR_MAX_INPUTS]; /* entry indices */
  int num_outputs;
  size_t outputs; /* entry index of the first output; the others follow it */
  int fused_away;        /* folded into an earlier step's dense plan */
  int elided;            /* a Concat whose inputs are written in place into its output */
  cr_dense_plan *dense;  /* Convolution / FullyConnected run by model.c, or NULL */
};

enum { kErrorSize = 512, kNameSize = 1024 };

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
  int32_t in_dtypes[CR_MAX_INPUTS];
  for (size_t i = 0; i < node->num_inputs; ++i) {
    const acc_entry input = node->inputs[i];
    in_shapes[i] = graph->nodes[input.node].out_shapes[input.index];
    in_dtypes[i] = graph->nodes[input.node].out_dtypes[input.index];
  }
  return cr_resolve_op(what, node->op, node->attr_keys, node->attr_vals, node->num_attrs,
                       in_shapes, in_dtypes, (int)node->num_inputs, node->out_shapes,
                       node->out_dtypes, node->num_outputs, op, params);
}

int cr_model_supported(const char *json, int *ids, int capacity, int *count) {
  acc_graph *graph;
  int status = parse_graph(json, &graph);
  if (status != MX_ACC_OK) return status;
  int found = 0;
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK; ++i) {
    const cr_op *op;
    cr_params params;
    if (graph->nodes[i].op == NULL || resolve_node(graph, i, &op, &params) != MX_ACC_OK) {
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
    cr_dense_plan *plan = model->steps[s].dense;
    if (plan == NULL) continue;
    free(plan->folded_w);
    free(plan->folded_b);
    free(plan->packed);
    free(plan);
  }
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
static size_t entry_bytes(const cr_model *model, size_t node, uint32_t index) {
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
static int match_variable(const cr_model *model, const char *name, const MXTensor *tensor,
                          const char *call, int need_data, size_t *node_index) {
  char what[kNameSize];
  if (name == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a tensor name is NULL", call);
  snprintf(what, sizeof what, "%s: input \"%s\"", call, name);
  long index = acc_graph_find_variable(model->graph, name);
  if (index < 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s is not a graph input", what);
  const acc_node *node = &model->graph->nodes[index];
  int status = need_data
                   ? acc_tensor_expect(tensor, what, node->out_dtypes[0], &node->out_shapes[0])
                   : acc_tensor_expect_spec(tensor, what, node->out_dtypes[0],
                                            &node->out_shapes[0]);
  if (status != MX_ACC_OK) return status;
  *node_index = (size_t)index;
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
    status = cr_check_data(model->dev_id, &data[i], bytes, names[i]);
    if (status == MX_ACC_OK && bytes > 0) memcpy(model->entries[entry].data, data[i].data, bytes);
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

/* ---- Dense steps: pre-packed filters and fused epilogues --------------- */

static int step_is(const cr_step *step, const char *name) {
  return strcmp(step->op->name, name) == 0;
}

static int step_all_float32(const cr_step *step) {
  for (int k = 0; k < step->num_inputs; ++k) {
    if (step->params.in_dtypes[k] != kFloat32) return 0;
  }
  for (int k = 0; k < step->num_outputs; ++k) {
    if (step->params.out_dtypes[k] != kFloat32) return 0;
  }
  return 1;
}

/* Per-entry facts the fusion pass needs. */
typedef struct cr_entry_facts {
  unsigned char *is_weight; /* the value of a weight variable */
  unsigned char *is_head;   /* a graph output */
  size_t *uses;             /* how many step inputs read it */
  size_t *producer;         /* the step writing it; SIZE_MAX for variables */
} cr_entry_facts;

static void free_facts(cr_entry_facts *f) {
  free(f->is_weight);
  free(f->is_head);
  free(f->uses);
  free(f->producer);
}

static int gather_facts(const cr_model *model, cr_entry_facts *f) {
  const size_t n = model->num_entries ? model->num_entries : 1;
  f->is_weight = calloc(n, 1);
  f->is_head = calloc(n, 1);
  f->uses = calloc(n, sizeof(size_t));
  f->producer = malloc(n * sizeof(size_t));
  if (!f->is_weight || !f->is_head || !f->uses || !f->producer) {
    free_facts(f);
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  }
  const acc_graph *graph = model->graph;
  for (size_t i = 0; i < n; ++i) f->producer[i] = SIZE_MAX;
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    if (graph->nodes[i].op == NULL && graph->nodes[i].kind == ACC_VAR_WEIGHT) {
      f->is_weight[model->entry_of_node[i]] = 1;
    }
  }
  for (size_t i = 0; i < graph->num_heads; ++i) {
    f->is_head[model->entry_of_node[graph->heads[i].node] + graph->heads[i].index] = 1;
  }
  for (size_t s = 0; s < model->num_steps; ++s) {
    const cr_step *step = &model->steps[s];
    for (int k = 0; k < step->num_inputs; ++k) f->uses[step->inputs[k]] += 1;
    for (int k = 0; k < step->num_outputs; ++k) f->producer[step->outputs + (size_t)k] = s;
  }
  return MX_ACC_OK;
}

/* The one step after `after` that reads entry, or SIZE_MAX. */
static size_t consumer_of(const cr_model *model, size_t after, size_t entry) {
  for (size_t s = after + 1; s < model->num_steps; ++s) {
    const cr_step *step = &model->steps[s];
    for (int k = 0; k < step->num_inputs; ++k) {
      if (step->inputs[k] == entry) return s;
    }
  }
  return SIZE_MAX;
}

/* Folds into dense step s the chain of single-use element-wise steps that
 * follows it: at most one BatchNorm (of a convolution, with weight
 * parameters: folded into the filters), then at most one elemwise_add of an
 * entry computed before s (the residual), then at most one relu or clip. */
static void fuse_chain(cr_model *model, const cr_entry_facts *f, size_t s) {
  cr_step *step = &model->steps[s];
  cr_dense_plan *plan = step->dense;
  size_t current = step->outputs, last = s;
  int stage = 0; /* 0: BatchNorm may follow, 1: the add, 2: the activation */
  while (stage < 3 && !f->is_head[current] && f->uses[current] == 1) {
    const size_t t = consumer_of(model, last, current);
    if (t == SIZE_MAX) break;
    cr_step *next = &model->steps[t];
    if (!step_all_float32(next) || next->num_outputs != 1) break;
    if (stage == 0 && plan->is_conv && plan->weights_constant && step_is(next, "BatchNorm") &&
        next->num_inputs == 5 && next->inputs[0] == current &&
        next->params.u.batch_norm.axis == 1 && !next->params.u.batch_norm.output_mean_var &&
        f->is_weight[next->inputs[1]] && f->is_weight[next->inputs[2]] &&
        f->is_weight[next->inputs[3]] && f->is_weight[next->inputs[4]]) {
      plan->has_bn = 1;
      for (int k = 0; k < 4; ++k) plan->bn[k] = next->inputs[k + 1];
      plan->bn_eps = next->params.u.batch_norm.eps;
      plan->bn_fix_gamma = next->params.u.batch_norm.fix_gamma;
      stage = 1;
    } else if (stage <= 1 && step_is(next, "elemwise_add") && next->num_inputs == 2 &&
               next->inputs[0] != next->inputs[1]) {
      const size_t other = next->inputs[0] == current ? next->inputs[1] : next->inputs[0];
      if (f->producer[other] != SIZE_MAX && f->producer[other] >= s) break;
      plan->has_residual = 1;
      plan->residual = other;
      stage = 2;
    } else if (step_is(next, "Activation") && next->params.u.activation == CR_ACT_RELU) {
      plan->act = CR_EPI_RELU;
      stage = 3;
    } else if (step_is(next, "clip")) {
      plan->act = CR_EPI_CLIP;
      plan->clip_low = next->params.u.clip.low;
      plan->clip_high = next->params.u.clip.high;
      stage = 3;
    } else {
      break;
    }
    next->fused_away = 1;
    current = next->outputs;
    last = t;
  }
  plan->output = current;
}

/* Gives every float32 Convolution and FullyConnected step a dense plan,
 * and folds what follows it in. */
static int plan_dense_steps(cr_model *model) {
  cr_entry_facts facts;
  int status = gather_facts(model, &facts);
  if (status != MX_ACC_OK) return status;
  for (size_t s = 0; s < model->num_steps && status == MX_ACC_OK; ++s) {
    cr_step *step = &model->steps[s];
    const int is_conv = step_is(step, "Convolution");
    if (step->fused_away || !(is_conv || step_is(step, "FullyConnected")) ||
        !step_all_float32(step) || step->num_outputs != 1) {
      continue;
    }
    step->dense = calloc(1, sizeof *step->dense);
    if (step->dense == NULL) {
      status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model steps");
      break;
    }
    step->dense->is_conv = is_conv;
    step->dense->weights_constant =
        facts.is_weight[step->inputs[1]] &&
        (step->num_inputs < 3 || facts.is_weight[step->inputs[2]]);
    fuse_chain(model, &facts, s);
  }
  free_facts(&facts);
  return status;
}

static int64_t entry_elements(const cr_tensor *t) {
  int64_t count = 1;
  for (int i = 0; i < t->shape.ndim; ++i) count *= (int64_t)t->shape.dims[i];
  return count;
}

/* Folds the BatchNorm into the filters and packs them: at loadModel, and
 * again when infer() is given new weights. */
static int prepare_dense(cr_model *model, cr_step *step) {
  cr_dense_plan *plan = step->dense;
  if (!plan->weights_constant) return MX_ACC_OK;
  const cr_tensor *weight = &model->entries[step->inputs[1]];
  const float *w = weight->data;
  const int64_t outputs = (int64_t)weight->shape.dims[0];
  const int64_t w_count = entry_elements(weight);
  const int64_t per_output = outputs > 0 ? w_count / outputs : 0;
  if (plan->has_bn) {
    if (plan->folded_w == NULL) plan->folded_w = malloc((size_t)(w_count ? w_count : 1) * 4);
    if (plan->folded_b == NULL) plan->folded_b = malloc((size_t)(outputs ? outputs : 1) * 4);
    if (plan->folded_w == NULL || plan->folded_b == NULL) {
      return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "folding BatchNorm into \"%s\"",
                      step->op->name);
    }
    const float *bias = step->num_inputs == 3 ? model->entries[step->inputs[2]].data : NULL;
    const float *gamma = model->entries[plan->bn[0]].data;
    const float *beta = model->entries[plan->bn[1]].data;
    const float *mean = model->entries[plan->bn[2]].data;
    const float *var = model->entries[plan->bn[3]].data;
    for (int64_t o = 0; o < outputs; ++o) {
      const double scale =
          (plan->bn_fix_gamma ? 1.0 : (double)gamma[o]) / sqrt((double)var[o] + plan->bn_eps);
      for (int64_t i = 0; i < per_output; ++i) {
        plan->folded_w[o * per_output + i] = (float)(w[o * per_output + i] * scale);
      }
      const double b = bias != NULL ? (double)bias[o] : 0.0;
      plan->folded_b[o] = (float)((b - mean[o]) * scale + beta[o]);
    }
    w = plan->folded_w;
  }
  free(plan->packed);
  plan->packed = NULL;
  size_t floats;
  if (plan->is_conv) {
    const cr_conv_params *conv = &step->params.u.convolution.conv;
    const int64_t group_channels = (int64_t)model->entries[step->inputs[0]].shape.dims[1] /
                                   conv->num_group;
    floats = cr_conv_packed_floats(conv, outputs, group_channels);
    if (floats == 0) return MX_ACC_OK; /* a direct convolution */
    plan->packed = malloc(floats * sizeof(float));
    if (plan->packed == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "packing filters");
    plan->packed_isa = cr_conv_pack(conv, outputs, group_channels, w, plan->packed);
  } else {
    floats = cr_fc_packed_floats(per_output, outputs);
    if (floats == 0) return MX_ACC_OK;
    plan->packed = malloc(floats * sizeof(float));
    if (plan->packed == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "packing weights");
    plan->packed_isa = cr_fc_pack(per_output, outputs, w, plan->packed);
  }
  return MX_ACC_OK;
}

static int prepare_dense_steps(cr_model *model) {
  for (size_t s = 0; s < model->num_steps; ++s) {
    if (model->steps[s].dense == NULL) continue;
    int status = prepare_dense(model, &model->steps[s]);
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* The 5-D (N, C, D, H, W) view of a 3- to 5-D shape. */
static void view_5d(const acc_shape *shape, int64_t out[5]) {
  const int spatial = shape->ndim - 2;
  out[0] = (int64_t)shape->dims[0];
  out[1] = (int64_t)shape->dims[1];
  for (int i = 0; i < 3; ++i) {
    const int source = 2 + i - (3 - spatial);
    out[2 + i] = source >= 2 ? (int64_t)shape->dims[source] : 1;
  }
}

static int run_dense(const cr_tensor *entries, const cr_step *step, int num_threads) {
  const cr_dense_plan *plan = step->dense;
  const cr_tensor *x = &entries[step->inputs[0]];
  const cr_tensor *weight = &entries[step->inputs[1]];
  const float *w = plan->folded_w != NULL ? plan->folded_w : weight->data;
  const float *bias = plan->has_bn ? plan->folded_b
                      : step->num_inputs == 3 ? entries[step->inputs[2]].data
                                              : NULL;
  cr_fusion fusion = {plan->has_residual ? entries[plan->residual].data : NULL,
                      plan->act, plan->clip_low, plan->clip_high};
  float *y = entries[plan->output].data;
  const cr_tensor *own_output = &entries[step->outputs];
  int failed;
  if (plan->is_conv) {
    int64_t x_shape[5], y_shape[5];
    view_5d(&x->shape, x_shape);
    view_5d(&own_output->shape, y_shape);
    failed = cr_convolution_into(&step->params.u.convolution.conv, x_shape, x->data, w,
                                 plan->packed, plan->packed_isa, bias, &fusion, y_shape, y,
                                 plan->out_image_stride, num_threads);
  } else {
    const int64_t hidden = step->params.u.fully_connected.num_hidden;
    const int64_t in_dim = (int64_t)weight->shape.dims[1];
    const int64_t rows = hidden > 0 ? entry_elements(own_output) / hidden : 0;
    failed = cr_fully_connected_fused(rows, in_dim, hidden, x->data, w, plan->packed,
                                      plan->packed_isa, bias, &fusion, y, num_threads);
  }
  return failed ? acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "%s: out of scratch memory",
                           step->op->name)
                : MX_ACC_OK;
}

/* Where image by image stops (split_end; "Image by image" below): the
 * steps before it run once per image, the rest once on the whole batch.
 * Split, a step reads its weights once per image, from beyond the core's
 * cache when the model's weights do not fit there: mobilenetv2's 7 x 7
 * layers (0.6-5 MB of filters each) took twice as long per image as on
 * the batch. On the batch, a step keeps its activations in cache only when
 * the batch's fit. So a step's cost, in bytes moved from beyond the cache,
 * is split: (batch - 1) x its weights (none when the model's weights all
 * fit in kBatchCacheBytes, half of a 2 MiB L2), plus its activations when
 * even one image's overflow kBatchCacheBytes; on the batch: its
 * activations when they overflow it. The model ignores compute, which
 * hides some of the weights' reads, so a suffix runs on the batch only
 * when that moves at most kBatchShare of the bytes its steps would move
 * split; of those, the one that saves the most bytes. squeezenet's last
 * convolution (2 MB of filters, 1.5 MB of activations per image) is near
 * even on these counts, and measured so: 1.8 ms faster on the batch, its
 * pooling 0.7 ms slower, the forward no faster; it stays split. */
enum { kBatchCacheBytes = 1 << 20 };
static const double kBatchShare = 0.5;

/* Each entry's bytes, in a new array (NULL when out of memory). */
static size_t *entry_sizes(const cr_model *model) {
  const acc_graph *graph = model->graph;
  size_t *sizes = calloc(model->num_entries ? model->num_entries : 1, sizeof *sizes);
  for (size_t i = 0; i < graph->num_nodes && sizes != NULL; ++i) {
    for (int k = 0; k < graph->nodes[i].num_outputs; ++k) {
      sizes[model->entry_of_node[i] + (size_t)k] = entry_bytes(model, i, (uint32_t)k);
    }
  }
  return sizes;
}

/* The bytes of step's weight inputs and of its data inputs and output (0
 * for steps run inside another's or elided). */
static void step_bytes(const cr_step *step, const cr_entry_facts *facts, const size_t *sizes,
                       double *weights, double *activations) {
  *weights = *activations = 0.0;
  if (step->fused_away || step->elided) return;
  for (int k = 0; k < step->num_inputs; ++k) {
    *(facts->is_weight[step->inputs[k]] ? weights : activations) += (double)sizes[step->inputs[k]];
  }
  *activations += (double)sizes[step->dense != NULL ? step->dense->output : step->outputs];
}

/* Sets the split_end of a model plan_image_split accepted (see
 * kBatchCacheBytes), once its Concats are elided or not: num_steps when
 * no suffix qualifies. */
static int plan_split_end(cr_model *model) {
  cr_entry_facts facts;
  int status = gather_facts(model, &facts);
  if (status != MX_ACC_OK) return status;
  const size_t n = model->num_steps;
  size_t *sizes = entry_sizes(model);
  double *split = calloc(n + 1, sizeof *split);     /* steps ..k-1 split */
  double *batched = calloc(n + 1, sizeof *batched); /* steps k.. on the batch */
  if (sizes == NULL || split == NULL || batched == NULL) {
    status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  }
  const double batch = (double)model->split_batch;
  double weights, activations, all_weights = 0.0;
  for (size_t s = 0; s < n && status == MX_ACC_OK; ++s) {
    step_bytes(&model->steps[s], &facts, sizes, &weights, &activations);
    all_weights += weights;
  }
  /* Weights that fit in the cache together are read again from there. */
  const double rereads = all_weights > kBatchCacheBytes ? batch - 1.0 : 0.0;
  for (size_t s = 0; s < n && status == MX_ACC_OK; ++s) {
    step_bytes(&model->steps[s], &facts, sizes, &weights, &activations);
    split[s + 1] = split[s] + rereads * weights +
                   (activations / batch > kBatchCacheBytes ? activations : 0.0);
    batched[s] = activations > kBatchCacheBytes ? activations : 0.0;
  }
  for (size_t s = n; s-- > 0 && status == MX_ACC_OK;) batched[s] += batched[s + 1];
  model->split_end = n;
  double most = 0.0; /* bytes saved by the best end so far */
  for (size_t end = n; end-- > 0 && status == MX_ACC_OK;) {
    const double suffix_split = split[n] - split[end];
    if (batched[end] <= kBatchShare * suffix_split && suffix_split - batched[end] > most) {
      most = suffix_split - batched[end];
      model->split_end = end;
    }
  }
  free(sizes);
  free(split);
  free(batched);
  free_facts(&facts);
  return status;
}

/* ---- Memory planning ----------------------------------------------------- */

/* Operator outputs share one arena: each gets a range that no other entry
 * holds from the step that writes it to the last step that reads it (the
 * end of infer() for outputs of the graph), placed first-fit. Activations
 * then stay in cache between steps, as they would not with one buffer per
 * entry. A step's outputs never share memory with its inputs, since the
 * inputs are released only after the outputs are placed. Entries inside a
 * fused chain are never written and get no memory. */
typedef struct cr_block {
  size_t begin, end;
} cr_block;

/* The convolution plan writing entry e, or NULL. */
static cr_dense_plan *conv_writing(const cr_model *model, size_t e) {
  for (size_t s = 0; s < model->num_steps; ++s) {
    cr_dense_plan *plan = model->steps[s].dense;
    if (!model->steps[s].fused_away && plan != NULL && plan->is_conv && plan->output == e) {
      return plan;
    }
  }
  return NULL;
}

/* Concat along an axis with nothing but extent-1 axes before it (channels
 * of one image): each input is one contiguous run of the output, so the
 * steps computing the inputs can write them there and the concatenation
 * itself copies nothing (squeezenet's fire modules). The same along the
 * channels of a batch (axis 1) when every input is written by a
 * convolution, which then writes each image into its slice (the plan's
 * out_image_stride). Taken when every input is a distinct operator output
 * that only the Concat reads and no graph output: its memory is then the
 * output's from the first producer on (first[] moves there; the inputs get
 * no block of their own), and view[input] / view_offset[input] say where
 * its first image lies. */
static int plan_concat_views(cr_model *model, size_t *first, size_t *view, size_t *view_offset) {
  cr_entry_facts facts;
  int status = gather_facts(model, &facts);
  if (status != MX_ACC_OK) return status;
  for (size_t s = 0; s < model->num_steps; ++s) {
    cr_step *step = &model->steps[s];
    if (step->fused_away || step->num_outputs != 1 || step->num_inputs < 1 ||
        !(step_is(step, "Concat") || step_is(step, "concat"))) {
      continue;
    }
    const cr_tensor *out = &model->entries[step->outputs];
    int axis = 0;
    if (cr_resolve_axis(step->params.u.concat.axis, out->shape.ndim, &axis) != MX_ACC_OK) {
      continue;
    }
    const int64_t images = cr_product(&out->shape, 0, axis);
    if (images == 0 || (images != 1 && axis != 1)) continue;
    int ok = first[step->outputs] != SIZE_MAX;
    size_t earliest = s;
    cr_dense_plan *writers[CR_MAX_INPUTS] = {NULL}; /* for a batch: the convolutions */
    for (int k = 0; k < step->num_inputs && ok; ++k) {
      const size_t e = step->inputs[k];
      ok = facts.uses[e] == 1 && !facts.is_head[e] && first[e] != SIZE_MAX && view[e] == SIZE_MAX;
      if (ok && images != 1) {
        writers[k] = conv_writing(model, e);
        ok = writers[k] != NULL && writers[k]->out_image_stride == 0;
      }
      if (ok && first[e] < earliest) earliest = first[e];
    }
    if (!ok) continue;
    const size_t element = acc_dtype_size(step->params.out_dtypes[0]);
    const int64_t out_image = cr_product(&out->shape, 0, out->shape.ndim) / images;
    size_t offset = 0;
    for (int k = 0; k < step->num_inputs; ++k) {
      const size_t e = step->inputs[k];
      view[e] = step->outputs;
      view_offset[e] = offset;
      first[e] = SIZE_MAX;
      const acc_shape *shape = &model->entries[e].shape;
      if (writers[k] != NULL) writers[k]->out_image_stride = out_image;
      offset += (size_t)(cr_product(shape, 0, shape->ndim) / images) * element;
    }
    first[step->outputs] = earliest;
    step->elided = 1;
  }
  free_facts(&facts);
  return MX_ACC_OK;
}

enum { kArenaAlign = 64 };

/* Places each entry e with first[e] != SIZE_MAX: sizes[e] bytes (rounded
 * up to kArenaAlign) from step first[e] to step last[e], first-fit, at no
 * range another entry holds at the same time; sets offset[e] and the
 * bytes the placement spans. */
static int place_entries(const cr_model *model, const size_t *first, const size_t *last,
                         const size_t *sizes, size_t *offset, size_t *arena_bytes) {
  const size_t n = model->num_entries;
  cr_block *live = malloc((n ? n : 1) * sizeof *live);
  size_t *live_entry = malloc((n ? n : 1) * sizeof *live_entry);
  int status = live && live_entry ? MX_ACC_OK : acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  size_t num_live = 0;
  *arena_bytes = 0;
  for (size_t s = 0; s < model->num_steps && status == MX_ACC_OK; ++s) {
    for (size_t e = 0; e < n; ++e) {
      if (first[e] != s) continue;
      size_t size = sizes[e];
      if (size > SIZE_MAX - kArenaAlign) {
        status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model buffers");
        break;
      }
      size = (size + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
      if (size == 0) size = kArenaAlign;
      /* First fit: the lowest start, 0 or a live block's end, that
       * overlaps no live block. */
      size_t best = SIZE_MAX;
      for (size_t c = 0; c <= num_live; ++c) {
        const size_t start = c == num_live ? 0 : live[c].end;
        if (start >= best || start > SIZE_MAX - size) continue;
        int fits = 1;
        for (size_t b = 0; b < num_live && fits; ++b) {
          fits = start + size <= live[b].begin || live[b].end <= start;
        }
        if (fits) best = start;
      }
      if (best == SIZE_MAX) {
        status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model buffers");
        break;
      }
      offset[e] = best;
      live[num_live] = (cr_block){best, best + size};
      live_entry[num_live++] = e;
      if (best + size > *arena_bytes) *arena_bytes = best + size;
    }
    for (size_t b = 0; b < num_live;) {
      if (last[live_entry[b]] == s) {
        live[b] = live[num_live - 1];
        live_entry[b] = live_entry[num_live - 1];
        num_live -= 1;
      } else {
        b += 1;
      }
    }
  }
  free(live);
  free(live_entry);
  return status;
}

/* The memory of the lanes that run a split batch on several threads
 * (run_lanes): each lane computes its images one by one in an arena of its
 * own, laid out for one image (the same lifetimes as the model's arena, at
 * one image's sizes), holding the entries that do not move from image to
 * image (image_moves); the moving ones stay in the model's arena, at each
 * image's slice. Sets lane_offset (SIZE_MAX: not in a lane's arena) and
 * lane_bytes. */
static int plan_lanes(cr_model *model, const size_t *first, const size_t *last,
                      const size_t *sizes, const size_t *view, const size_t *view_offset) {
  const size_t n = model->num_entries;
  size_t *lane_first = calloc(n ? n : 1, sizeof *lane_first);
  size_t *image_sizes = calloc(n ? n : 1, sizeof *image_sizes);
  model->lane_offset = malloc((n ? n : 1) * sizeof *model->lane_offset);
  int status = lane_first && image_sizes && model->lane_offset
                   ? MX_ACC_OK
                   : acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  for (size_t e = 0; e < n && status == MX_ACC_OK; ++e) {
    /* Every step may run per image (ACC_CPU_REF_IMAGE_SPLIT=1), the ones
     * from split_end on too. */
    const int placed = first[e] != SIZE_MAX && !model->image_moves[e];
    lane_first[e] = placed ? first[e] : SIZE_MAX;
    image_sizes[e] = sizes[e] / (size_t)model->split_batch;
    model->lane_offset[e] = SIZE_MAX;
  }
  size_t bytes = 0;
  if (status == MX_ACC_OK) {
    status = place_entries(model, lane_first, last, image_sizes, model->lane_offset, &bytes);
  }
  for (size_t e = 0; e < n && status == MX_ACC_OK; ++e) {
    if (lane_first[e] == SIZE_MAX) model->lane_offset[e] = SIZE_MAX;
  }
  for (size_t e = 0; e < n && status == MX_ACC_OK; ++e) {
    if (view[e] != SIZE_MAX && model->lane_offset[view[e]] != SIZE_MAX) {
      model->lane_offset[e] = model->lane_offset[view[e]] + view_offset[e];
    }
  }
  model->lane_bytes = (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  free(lane_first);
  free(image_sizes);
  return status;
}

static int plan_memory(cr_model *model) {
  const size_t n = model->num_entries;
  const acc_graph *graph = model->graph;
  size_t *first = malloc((n ? n : 1) * sizeof *first);
  size_t *last = calloc(n ? n : 1, sizeof *last);
  size_t *offset = calloc(n ? n : 1, sizeof *offset);
  size_t *sizes = entry_sizes(model);
  size_t *view = malloc((n ? n : 1) * sizeof *view);
  size_t *view_offset = calloc(n ? n : 1, sizeof *view_offset);
  int status = first && last && offset && sizes && view && view_offset
                   ? MX_ACC_OK
                   : acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  for (size_t e = 0; e < n && status == MX_ACC_OK; ++e) first[e] = SIZE_MAX;
  for (size_t s = 0; s < model->num_steps && status == MX_ACC_OK; ++s) {
    const cr_step *step = &model->steps[s];
    if (step->fused_away) continue;
    if (step->dense != NULL) {
      first[step->dense->output] = s;
      last[step->dense->output] = s;
      if (step->dense->has_residual) last[step->dense->residual] = s;
    } else {
      for (int k = 0; k < step->num_outputs; ++k) {
        first[step->outputs + (size_t)k] = s;
        last[step->outputs + (size_t)k] = s;
      }
    }
    for (int k = 0; k < step->num_inputs; ++k) last[step->inputs[k]] = s;
  }
  for (size_t i = 0; i < graph->num_heads && status == MX_ACC_OK; ++i) {
    last[model->entry_of_node[graph->heads[i].node] + graph->heads[i].index] = SIZE_MAX;
  }
  for (size_t e = 0; e < n && status == MX_ACC_OK; ++e) view[e] = SIZE_MAX;
  if (status == MX_ACC_OK) status = plan_concat_views(model, first, view, view_offset);
  if (status == MX_ACC_OK && model->split_batch) status = plan_split_end(model);
  /* Run image by image, the graph's outputs hold the images done while the
   * next are computed: they share memory with nothing, not even entries
   * whose lifetimes end before theirs begin. */
  if (status == MX_ACC_OK && model->split_batch) {
    model->image_moves = calloc(n ? n : 1, 1);
    if (model->image_moves == NULL) status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  }
  for (size_t i = 0; i < graph->num_heads && status == MX_ACC_OK && model->split_batch; ++i) {
    const size_t e = model->entry_of_node[graph->heads[i].node] + graph->heads[i].index;
    if (first[e] != SIZE_MAX) first[e] = 0;
    model->image_moves[e] = 1;
  }
  /* So do the entries that the steps run per image leave to those run on
   * the batch. Every other entry a pass writes is dead by the next pass,
   * which writes it again at the same place (see run_model). */
  for (size_t e = 0; e < n && status == MX_ACC_OK && model->split_batch; ++e) {
    if (first[e] < model->split_end && last[e] >= model->split_end) {
      first[e] = 0;
      model->image_moves[e] = 1;
    }
  }
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK && model->split_batch; ++i) {
    if (graph->nodes[i].op == NULL && graph->nodes[i].kind == ACC_VAR_DATA) {
      model->image_moves[model->entry_of_node[i]] = 1; /* the caller's images */
    }
  }
  for (size_t e = 0; e < n && status == MX_ACC_OK && model->split_batch; ++e) {
    if (view[e] != SIZE_MAX) model->image_moves[e] = model->image_moves[view[e]];
  }
  size_t arena_bytes = 0;
  if (status == MX_ACC_OK) status = place_entries(model, first, last, sizes, offset, &arena_bytes);
  if (status == MX_ACC_OK && model->split_batch) {
    status = plan_lanes(model, first, last, sizes, view, view_offset);
  }
  if (status == MX_ACC_OK) {
    model->arena = cr_buffer_alloc(arena_bytes);
    if (model->arena == NULL) {
      status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of buffers",
                        arena_bytes);
    }
  }
  for (size_t e = 0; e < n && status == MX_ACC_OK; ++e) {
    if (first[e] == SIZE_MAX) continue;
    model->entries[e].data = (char *)model->arena + offset[e];
    model->owned[e] = 2; /* in the arena: kept bound, freed with it */
  }
  for (size_t e = 0; e < n && status == MX_ACC_OK; ++e) {
    if (view[e] == SIZE_MAX) continue;
    model->entries[e].data = (char *)model->arena + offset[view[e]] + view_offset[e];
    model->owned[e] = 2;
  }
  free(view);
  free(view_offset);
  free(first);
  free(last);
  free(offset);
  free(sizes);
  return status;
}

/* ---- Image by image ------------------------------------------------------ */

/* A batch of images run layer by layer reads each layer's input long after
 * it was written: at batch 8 a layer's activations (squeezenet's 128 x 55
 * x 55 fire outputs: 12 MB) no longer fit in the caches that hold one
 * image's. On one thread, a model whose every step treats axis 0 as
 * independent images instead runs all of its steps on image 0, then on
 * image 1, and so on, each entry with a batch of 1 (shape[0] = 1): the
 * activations of one image stay in cache from step to step. An entry that
 * lives from one pass to the next (the data inputs, the graph's outputs,
 * what a batched tail reads: image_moves) points at its image's slice;
 * every other entry stays at the first image's, so that each pass writes
 * the memory the pass before wrote, still in cache, rather than a new
 * image's slice (squeezenet1_1 at batch 8, alternated with onnxruntime:
 * 1.20 -> 1.04 when entries stopped moving; docs/cpu_ref_performance.md).
 * A tail of steps with large weights and small activations may run on the
 * whole batch after the per-image passes (split_end, plan_split_end).
 *
 * Two entries share memory only when their lifetimes, in step order, do not
 * overlap, and each pass runs the steps in that order: what a pass leaves
 * behind is dead for the next, except the graph's outputs and the entries
 * the batched tail reads, which the memory plan then keeps apart from
 * every other entry (plan_memory). */

/* Splitting pays where a layer's activations for the whole batch overflow
 * the caches; below this size for the largest, the cost of running every
 * step once per image wins (dwsep_small at batch 8, 128 KB: 6% slower
 * split, 6.5% still with the entries in place; resnet_small, 2 MB: 2%
 * faster then, too little to move the line; squeezenet1_1, 25 MB: 10-18%
 * faster, before the entries stayed in place). */
enum { kSplitMinBytes = 8 << 20 };

/* Whether step computes each image of its batch from that image alone,
 * given that every entry it reads other than weights, and every entry it
 * writes, has the batch as axis 0. */
static int step_is_per_image(const cr_model *model, const cr_step *step,
                             const cr_entry_facts *facts) {
  static const char *const kWeighted[] = {"Convolution", "FullyConnected", "BatchNorm",
                                          "LeakyReLU"};
  static const char *const kPlain[] = {"Pooling", "Dropout",      "Flatten", "Activation",
                                       "relu",    "clip",         "elemwise_add"};
  for (size_t i = 0; i < sizeof kWeighted / sizeof kWeighted[0]; ++i) {
    /* the data is input 0; the others are weights */
    if (step_is(step, kWeighted[i])) {
      for (int k = 1; k < step->num_inputs; ++k) {
        if (!facts->is_weight[step->inputs[k]]) return 0;
      }
      return step->num_inputs > 0 && !facts->is_weight[step->inputs[0]];
    }
  }
  int axis = -1;
  const int ndim = model->entries[step->outputs].shape.ndim;
  int plain = 0;
  for (size_t i = 0; i < sizeof kPlain / sizeof kPlain[0]; ++i) plain |= step_is(step, kPlain[i]);
  if (step_is(step, "Concat")) {
    plain = cr_resolve_axis(step->params.u.concat.axis, ndim, &axis) == MX_ACC_OK && axis != 0;
  } else if (step_is(step, "softmax")) {
    plain = cr_resolve_axis(step->params.u.softmax.axis, ndim, &axis) == MX_ACC_OK && axis != 0;
  }
  for (int k = 0; k < step->num_inputs && plain; ++k) plain = !facts->is_weight[step->inputs[k]];
  return plain;
}

/* Sets split_batch (and split_by_default) when the model can run image by
 * image: a batch of at least 2 as axis 0 of every data input and every
 * operator output, only steps step_is_per_image accepts, and no weight
 * added as a fused residual. Before plan_memory, which then keeps the
 * graph's outputs apart. */
static int plan_image_split(cr_model *model) {
  const acc_graph *graph = model->graph;
  int64_t batch = 0;
  int ok = 1;
  for (size_t i = 0; i < graph->num_nodes && ok; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->op == NULL && node->kind != ACC_VAR_DATA) continue; /* weights */
    for (int k = 0; k < node->num_outputs && ok; ++k) {
      const acc_shape *shape = &model->entries[model->entry_of_node[i] + (size_t)k].shape;
      ok = shape->ndim >= 1 && shape->dims[0] >= 2 &&
           (batch == 0 || (int64_t)shape->dims[0] == batch);
      if (ok) batch = (int64_t)shape->dims[0];
    }
  }
  if (!ok || batch < 2) return MX_ACC_OK;
  cr_entry_facts facts;
  int status = gather_facts(model, &facts);
  if (status != MX_ACC_OK) return status;
  for (size_t s = 0; s < model->num_steps && ok; ++s) {
    const cr_step *step = &model->steps[s];
    if (step->fused_away) continue; /* run inside its convolution's plan */
    ok = step_is_per_image(model, step, &facts) &&
         !(step->dense != NULL && step->dense->has_residual &&
           facts.is_weight[step->dense->residual]);
  }
  if (ok) {
    model->split_batch = batch;
    size_t largest = 0;
    for (size_t i = 0; i < graph->num_nodes; ++i) {
      for (int k = 0; graph->nodes[i].op != NULL && k < graph->nodes[i].num_outputs; ++k) {
        const size_t bytes = entry_bytes(model, i, (uint32_t)k);
        if (bytes > largest) largest = bytes;
      }
    }
    model->split_by_default = largest >= kSplitMinBytes;
  }
  free_facts(&facts);
  return MX_ACC_OK;
}

/* image_bytes and batch_data of a model plan_image_split accepted, once its
 * memory is planned. */
static int plan_image_bytes(cr_model *model) {
  const acc_graph *graph = model->graph;
  if (model->split_batch < 2) return MX_ACC_OK;
  model->image_bytes = calloc(model->num_entries ? model->num_entries : 1, sizeof(size_t));
  model->batch_data = calloc(model->num_entries ? model->num_entries : 1, sizeof(void *));
  if (model->image_bytes == NULL || model->batch_data == NULL) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model tables");
  }
  const size_t batch = (size_t)model->split_batch;
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->op == NULL && node->kind != ACC_VAR_DATA) continue;
    for (int k = 0; k < node->num_outputs; ++k) {
      const size_t e = model->entry_of_node[i] + (size_t)k;
      model->image_bytes[e] = entry_bytes(model, i, (uint32_t)k) / batch;
    }
  }
  /* The inputs of a Concat written in place lie in its output's images. */
  for (size_t s = 0; s < model->num_steps; ++s) {
    const cr_step *step = &model->steps[s];
    if (!step->elided) continue;
    for (int k = 0; k < step->num_inputs; ++k) {
      model->image_bytes[step->inputs[k]] = model->image_bytes[step->outputs];
    }
  }
  return MX_ACC_OK;
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
static int run_steps(const cr_model *model, cr_tensor *entries, size_t begin, size_t end,
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

/* At most this many lanes (their statuses and messages live on the stack);
 * more threads run the lanes' steps on one thread each all the same. */
enum { kMaxLanes = 8 };

/* The lanes of a split batch (run_lanes): each lane takes the next image
 * not yet taken until none is left, and computes it over its own copy of
 * the entries; so a lane whose thread is held up (a busy core) leaves the
 * images it has not started to the others. */
typedef struct cr_lanes {
  const cr_model *model;
  cr_tensor *tables;   /* lanes x num_entries */
  size_t end;          /* the steps run per image */
  atomic_llong next;   /* the next image to take */
  int *status;         /* per lane */
  char *messages;      /* per lane, kErrorSize each: a failure's message */
} cr_lanes;

static void run_lane_range(void *context, int64_t begin, int64_t end) {
  cr_lanes *job = context;
  const cr_model *model = job->model;
  for (int64_t lane = begin; lane < end; ++lane) {
    cr_tensor *table = job->tables + (size_t)lane * model->num_entries;
    int status = MX_ACC_OK;
    for (int64_t n = atomic_fetch_add(&job->next, 1); n < model->split_batch && status == MX_ACC_OK;
         n = atomic_fetch_add(&job->next, 1)) {
      for (size_t e = 0; e < model->num_entries; ++e) {
        if (model->image_bytes[e] == 0 || !model->image_moves[e]) continue;
        if (model->batch_data[e] == NULL) continue; /* no memory (inside a fused chain) */
        table[e].data = (char *)model->batch_data[e] + (size_t)n * model->image_bytes[e];
      }
      status = run_steps(model, table, 0, job->end, 1);
    }
    job->status[lane] = status;
    if (status != MX_ACC_OK) {
      snprintf(job->messages + (size_t)lane * kErrorSize, kErrorSize, "%s", acc_last_error());
    }
  }
}

/* Runs steps 0..end-1 on every image of the batch, on `lanes` threads:
 * lane 0 in the model's arena at the first image's place (what stays
 * there from image to image is dead by the next image), every other lane
 * in an arena of its own (plan_lanes); the moving entries at each image's
 * slice. The caller has set batch_data. */
static int run_lanes(cr_model *model, size_t end, int lanes) {
  const size_t n = model->num_entries;
  if (model->lane_count < lanes) {
    free(model->lane_arena);
    free(model->lane_tables);
    model->lane_count = 0;
    const size_t arenas = (size_t)(lanes - 1) * model->lane_bytes;
    model->lane_arena = cr_buffer_alloc(arenas);
    model->lane_tables = malloc((size_t)lanes * (n ? n : 1) * sizeof *model->lane_tables);
    if (model->lane_arena == NULL || model->lane_tables == NULL) {
      return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes for %d lanes", arenas,
                      lanes);
    }
    model->lane_count = lanes;
  }
  int status_of[kMaxLanes];
  char messages[kMaxLanes * kErrorSize];
  cr_lanes job = {.model = model, .tables = model->lane_tables, .end = end,
                  .status = status_of, .messages = messages};
  atomic_init(&job.next, 0);
  for (int lane = 0; lane < lanes; ++lane) {
    cr_tensor *table = job.tables + (size_t)lane * n;
    memcpy(table, model->entries, n * sizeof *table);
    for (size_t e = 0; e < n; ++e) {
      if (model->image_bytes[e] == 0) continue; /* not split (weights) */
      table[e].shape.dims[0] = 1;
      if (lane > 0 && model->lane_offset[e] != SIZE_MAX) {
        table[e].data = (char *)model->lane_arena + (size_t)(lane - 1) * model->lane_bytes +
                        model->lane_offset[e];
      }
    }
  }
  cr_parallel_for(lanes, lanes, run_lane_range, &job);
  for (int lane = 0; lane < lanes; ++lane) {
    if (status_of[lane] != MX_ACC_OK) {
      return acc_fail(status_of[lane], "%s", messages + (size_t)lane * kErrorSize);
    }
  }
  return MX_ACC_OK;
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

int cr_model_create(const char *model_id, const char *json, const char *const *names,
                    const MXTensor *data, int num_data, int dev_id, cr_model **result) {
  cr_model *model = calloc(1, sizeof *model);
  if (model == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model");
  model->dev_id = dev_id;
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
  if (status == MX_ACC_OK) status = plan_dense_steps(model);
  if (status == MX_ACC_OK) status = plan_image_split(model);
  if (status == MX_ACC_OK) status = plan_memory(model);
  if (status == MX_ACC_OK) status = plan_image_bytes(model);
  if (status == MX_ACC_OK) status = prepare_dense_steps(model);
  if (status != MX_ACC_OK) {
    cr_model_free(model);
    return status;
  }
  *result = model;
  return MX_ACC_OK;
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
    status = cr_check_data(model->dev_id, &in_data[i], bytes, in_names[i]);
    if (status != MX_ACC_OK) return status;
    if (graph->nodes[node].kind == ACC_VAR_WEIGHT) {
      if (bytes > 0) memcpy(model->entries[entry].data, in_data[i].data, bytes);
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
    char what[kNameSize];
    snprintf(what, sizeof what, "infer: output \"%s\"", out_names[i]);
    status = cr_check_data(model->dev_id, &out_data[i], entry_bytes(model, entry.node,
                                                                    entry.index), what);
  }
  return status;
}

int cr_model_infer(cr_model *model, const char *const *in_names, const char *const *out_names,
                   const MXTensor *in_data, const MXTensor *out_data, int num_in, int num_out,
                   int num_threads) {
  size_t *head_of_output = calloc(num_out > 0 ? (size_t)num_out : 1, sizeof(size_t));
  if (head_of_output == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "infer");
  int status = match_outputs(model, out_names, out_data, num_out, head_of_output);
  int weights_given = 0;
  if (status == MX_ACC_OK) status = bind_inputs(model, in_names, in_data, num_in, &weights_given);
  if (status == MX_ACC_OK && weights_given) status = prepare_dense_steps(model);
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
  free(head_of_output);
  return status;
}
