/*
 * Symbolic mode image by image (model_impl.h): where the per-image passes
 * stop, which models may run so, and the lanes that run the passes on
 * several threads.
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
size_t *entry_sizes(const cr_model *model) {
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
int plan_split_end(cr_model *model) {
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
  /* _onnx_flatten: its output's axis 0 is the batch (plan_image_split
   * checks), so it flattens each image's axes alone. broadcast_mul (SiLU,
   * squeeze-excitation scales): only where every operand has the output's
   * rank, so that axis 0 is each one's batch. */
  static const char *const kPlain[] = {
      "Pooling",    "Dropout", "Flatten",      "_onnx_flatten", "Activation",   "relu",
      "elemwise_add", "clip",  "sigmoid",      "_onnx_unary",   "broadcast_mul"};
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
  const int any_rank = !step_is(step, "broadcast_mul");
  for (int k = 0; k < step->num_inputs && plain; ++k) {
    plain = !facts->is_weight[step->inputs[k]] &&
            (any_rank || model->entries[step->inputs[k]].shape.ndim == ndim);
  }
  return plain;
}

/* Sets split_batch (and split_by_default) when the model can run image by
 * image: a batch of at least 2 as axis 0 of every data input and every
 * operator output, only steps step_is_per_image accepts, and no weight
 * added as a fused residual. Before plan_memory, which then keeps the
 * graph's outputs apart. */
int plan_image_split(cr_model *model) {
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
int run_lanes(cr_model *model, size_t end, int lanes) {
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
