/*
 * Symbolic mode's Convolution and FullyConnected steps (model_impl.h):
 * filters pre-packed for the GEMM at loadModel, a following BatchNorm
 * folded into the filters and bias, and element-wise steps fused into the
 * GEMM's epilogue.
 */
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
#include "model_impl.h"
#include "op_impl.h"
#include "parallel.h"
#include "status.h"
#include "tensor.h"

/* ---- Dense steps: pre-packed filters and fused epilogues --------------- */

int step_is(const cr_step *step, const char *name) {
  return strcmp(step->op->name, name) == 0;
}

int step_all_float32(const cr_step *step) {
  for (int k = 0; k < step->num_inputs; ++k) {
    if (step->params.in_dtypes[k] != kFloat32) return 0;
  }
  for (int k = 0; k < step->num_outputs; ++k) {
    if (step->params.out_dtypes[k] != kFloat32) return 0;
  }
  return 1;
}


void free_facts(cr_entry_facts *f) {
  free(f->is_weight);
  free(f->is_head);
  free(f->uses);
  free(f->producer);
}

int gather_facts(const cr_model *model, cr_entry_facts *f) {
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

/* An addition of two distinct entries of one shape: elemwise_add, or a
 * broadcast_add that broadcasts nothing (ONNX's Add: ResNet's residuals as
 * PyTorch exports them, 16 of ResNet-50's steps and the relu after each
 * left unfused, 4.6 of 105 ms at batch 1). */
static int is_residual_add(const cr_model *model, const cr_step *step) {
  if (step->num_inputs != 2 || step->inputs[0] == step->inputs[1]) return 0;
  if (step_is(step, "elemwise_add")) return 1;
  if (!step_is(step, "broadcast_add")) return 0;
  const acc_shape *out = &model->entries[step->outputs].shape;
  for (int k = 0; k < 2; ++k) {
    const acc_shape *in = &model->entries[step->inputs[k]].shape;
    if (in->ndim != out->ndim) return 0;
    for (int d = 0; d < out->ndim; ++d) {
      if (in->dims[d] != out->dims[d]) return 0;
    }
  }
  return 1;
}

/* Folds into dense step s the chain of single-use element-wise steps that
 * follows it: at most one BatchNorm (of a convolution, with weight
 * parameters: folded into the filters), then at most one elemwise_add (or
 * broadcast_add of one shape: is_residual_add) of an
 * entry computed before s (the residual), then at most one relu, clip,
 * or ONNX HardSigmoid or HardSwish (_onnx_unary). */
static void fuse_chain(cr_model *model, const cr_entry_facts *f, size_t s) {
  cr_step *step = &model->steps[s];
  cr_dense_plan *plan = step->dense;
  size_t current = step->outputs, last = s;
  int stage = 0; /* 0: BatchNorm may follow, 1: the add, 2: the activation */
  int swish = 0;
  float alpha = 0.0f, beta = 0.0f;
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
    } else if (stage <= 1 && is_residual_add(model, next)) {
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
    } else if (step_is(next, "_onnx_unary") && next->num_inputs == 1 &&
               cr_onnx_unary_hard_sigmoid(&next->params, &swish, &alpha, &beta)) {
      /* MobileNetV3's HardSwish after 20 of its convolutions (1 x 16 x
       * 112 x 112 alone 30 us at batch 1, a pass over the output). */
      plan->act = swish ? CR_EPI_HARD_SWISH : CR_EPI_HARD_SIGMOID;
      plan->clip_low = alpha;
      plan->clip_high = beta;
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

static int64_t entry_elements(const cr_tensor *t) {
  int64_t count = 1;
  for (int i = 0; i < t->shape.ndim; ++i) count *= (int64_t)t->shape.dims[i];
  return count;
}

static int same_shape(const acc_shape *a, const acc_shape *b) {
  if (a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; ++d) {
    if (a->dims[d] != b->dims[d]) return 0;
  }
  return 1;
}

/* Folds a sigmoid step whose only reader multiplies its input by it, x *
 * sigmoid(x) (SiLU, as PyTorch exports it: EfficientNet's 49 activations),
 * into that multiply, which then reads x alone and computes both in one
 * pass (cr_fast_swish, x / (1 + exp(-x)): within 3.2e-7 relative of the two
 * steps, one rounding less): the sigmoid's output is never
 * written. The multiply's inputs become (x, x), so that the memory plan
 * gives the sigmoid's output no memory. */
static void fuse_swish(cr_model *model, const cr_entry_facts *f) {
  for (size_t s = 0; s < model->num_steps; ++s) {
    cr_step *sig = &model->steps[s];
    if (sig->fused_away || sig->elided || !step_is(sig, "sigmoid") || sig->num_inputs != 1 ||
        sig->num_outputs != 1 || !step_all_float32(sig)) {
      continue;
    }
    const size_t out = sig->outputs, x = sig->inputs[0];
    if (f->is_head[out] || f->uses[out] != 1) continue;
    const size_t t = consumer_of(model, s, out);
    if (t == SIZE_MAX) continue;
    cr_step *mul = &model->steps[t];
    if (!(step_is(mul, "broadcast_mul") || step_is(mul, "elemwise_mul")) ||
        mul->num_inputs != 2 || mul->num_outputs != 1 || !step_all_float32(mul) ||
        mul->dense != NULL || mul->params.kernels != CR_KERNELS_FAST) {
      continue;
    }
    const int other = mul->inputs[0] == out ? 1 : 0;
    if (mul->inputs[other] != x || mul->inputs[1 - other] != out ||
        !same_shape(&model->entries[x].shape, &model->entries[mul->outputs].shape)) {
      continue;
    }
    sig->fused_away = 1;
    mul->swish = 1;
    mul->inputs[0] = mul->inputs[1] = x;
  }
}

int run_swish(const cr_tensor *entries, const cr_step *step, int num_threads) {
  const cr_tensor *x = &entries[step->inputs[0]], *y = &entries[step->outputs];
  cr_fast_swish(entry_elements(y), x->data, y->data, num_threads);
  return MX_ACC_OK;
}

/* Gives every float32 Convolution and FullyConnected step a dense plan,
 * and folds what follows it in; then folds SiLU's sigmoids into their
 * multiplies. */
int plan_dense_steps(cr_model *model) {
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
  if (status == MX_ACC_OK) fuse_swish(model, &facts);
  free_facts(&facts);
  return status;
}

/* The floats of step's packed filters (0: none, a direct convolution). */
static size_t dense_packed_floats(const cr_model *model, const cr_step *step) {
  const acc_shape *w_shape = &model->entries[step->inputs[1]].shape;
  const int64_t outputs = w_shape->ndim > 0 ? (int64_t)w_shape->dims[0] : 0;
  const int64_t w_count = entry_elements(&model->entries[step->inputs[1]]);
  if (step->dense->is_conv) {
    const cr_conv_params *conv = &step->params.u.convolution.conv;
    const int64_t group_channels = (int64_t)model->entries[step->inputs[0]].shape.dims[1] /
                                   conv->num_group;
    return cr_conv_packed_floats(conv, outputs, group_channels);
  }
  return cr_fc_packed_floats(outputs > 0 ? w_count / outputs : 0, outputs);
}

/* The product of a 3- to 5-D shape's spatial extents. */
static int64_t spatial_size(const acc_shape *shape) {
  int64_t size = 1;
  for (int d = 2; d < shape->ndim; ++d) size *= (int64_t)shape->dims[d];
  return size;
}

int dense_keeps_folded(const cr_model *model, const cr_step *step) {
  const cr_dense_plan *plan = step->dense;
  if (plan == NULL || !plan->weights_constant || !plan->has_bn) return 0;
  /* run_dense hands the kernels the filters unpacked too; they read them
   * when nothing is packed (a direct convolution), and in the
   * matrix-vector product of a FullyConnected or of a convolution of 1 x 1
   * images at batch 1 (cr_convolution_fused). Everywhere else the packed
   * filters alone are read. */
  if (!plan->is_conv || dense_packed_floats(model, step) == 0) return 1;
  return spatial_size(&model->entries[step->inputs[0]].shape) == 1 ||
         spatial_size(&model->entries[step->outputs].shape) == 1;
}

/* Writes step's filters with its BatchNorm folded in into folded_w and its
 * bias into folded_b (per output o: scale = gamma / sqrt(var + eps) in
 * double, w' = w * (float)scale, b' = (b - mean) * scale + beta in double). */
static void fold_batch_norm(const cr_model *model, const cr_step *step, float *folded_w,
                            float *folded_b) {
  const cr_dense_plan *plan = step->dense;
  const cr_tensor *weight = &model->entries[step->inputs[1]];
  const float *w = weight->data;
  const int64_t outputs = (int64_t)weight->shape.dims[0];
  const int64_t per_output = outputs > 0 ? entry_elements(weight) / outputs : 0;
  const float *bias = step->num_inputs == 3 ? model->entries[step->inputs[2]].data : NULL;
  const float *gamma = model->entries[plan->bn[0]].data;
  const float *beta = model->entries[plan->bn[1]].data;
  const float *mean = model->entries[plan->bn[2]].data;
  const float *var = model->entries[plan->bn[3]].data;
  for (int64_t o = 0; o < outputs; ++o) {
    const double scale =
        (plan->bn_fix_gamma ? 1.0 : (double)gamma[o]) / sqrt((double)var[o] + plan->bn_eps);
    /* The scale rounded to float once: a float product per filter value
     * (within an ulp of the double one), half the work of converting each
     * value to double and back. */
    const float scale_f = (float)scale;
    const float *row = w + o * per_output;
    float *folded = folded_w + o * per_output;
    for (int64_t i = 0; i < per_output; ++i) folded[i] = row[i] * scale_f;
    const double b = bias != NULL ? (double)bias[o] : 0.0;
    folded_b[o] = (float)((b - mean[o]) * scale + beta[o]);
  }
}

/* Folds the BatchNorm into the filters and packs them: at loadModel, and
 * again when infer() is given new weights. The folded filters are kept in
 * plan->folded_w only where the kernels read them (dense_keeps_folded);
 * elsewhere they are written into scratch (at least the step's filter
 * count, shared by the model's steps one at a time) and only packed. */
static int prepare_dense(cr_model *model, cr_step *step, float *scratch) {
  cr_dense_plan *plan = step->dense;
  if (!plan->weights_constant) return MX_ACC_OK;
  const cr_tensor *weight = &model->entries[step->inputs[1]];
  const float *w = weight->data;
  const int64_t outputs = (int64_t)weight->shape.dims[0];
  const int64_t w_count = entry_elements(weight);
  const int64_t per_output = outputs > 0 ? w_count / outputs : 0;
  if (plan->has_bn) {
    const int keep = dense_keeps_folded(model, step);
    if (!keep) {
      free(plan->folded_w);
      plan->folded_w = NULL;
    } else if (plan->folded_w == NULL) {
      plan->folded_w = malloc((size_t)(w_count ? w_count : 1) * 4);
    }
    if (plan->folded_b == NULL) plan->folded_b = malloc((size_t)(outputs ? outputs : 1) * 4);
    if ((keep && plan->folded_w == NULL) || plan->folded_b == NULL) {
      return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "folding BatchNorm into \"%s\"",
                      step->op->name);
    }
    float *folded = keep ? plan->folded_w : scratch;
    fold_batch_norm(model, step, folded, plan->folded_b);
    w = folded;
  }
  free(plan->packed);
  plan->packed = NULL;
  const size_t floats = dense_packed_floats(model, step);
  if (floats == 0) return MX_ACC_OK; /* a direct convolution */
  plan->packed = malloc(floats * sizeof(float));
  if (plan->packed == NULL) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, plan->is_conv ? "packing filters"
                                                            : "packing weights");
  }
  if (plan->is_conv) {
    const cr_conv_params *conv = &step->params.u.convolution.conv;
    const int64_t group_channels = (int64_t)model->entries[step->inputs[0]].shape.dims[1] /
                                   conv->num_group;
    plan->packed_isa = cr_conv_pack(conv, outputs, group_channels, w, plan->packed);
  } else {
    plan->packed_isa = cr_fc_pack(per_output, outputs, w, plan->packed);
  }
  return MX_ACC_OK;
}

int prepare_dense_steps(cr_model *model) {
  /* One scratch for the folded filters that are only packed: the largest
   * such step's. */
  size_t scratch_floats = 0;
  for (size_t s = 0; s < model->num_steps; ++s) {
    const cr_step *step = &model->steps[s];
    if (step->dense == NULL || !step->dense->weights_constant || !step->dense->has_bn ||
        dense_keeps_folded(model, step)) {
      continue;
    }
    const size_t count = (size_t)entry_elements(&model->entries[step->inputs[1]]);
    if (count > scratch_floats) scratch_floats = count;
  }
  float *scratch = NULL;
  if (scratch_floats > 0) {
    scratch = malloc(scratch_floats * sizeof *scratch);
    if (scratch == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "folding BatchNorm");
  }
  int status = MX_ACC_OK;
  for (size_t s = 0; s < model->num_steps && status == MX_ACC_OK; ++s) {
    if (model->steps[s].dense == NULL) continue;
    status = prepare_dense(model, &model->steps[s], scratch);
  }
  free(scratch);
  return status;
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

int run_dense(const cr_tensor *entries, const cr_step *step, int num_threads) {
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
