/*
 * Symbolic mode's memory plan (model_impl.h): one arena for the operator
 * outputs, Concat inputs written in place into their output and reshapes'
 * outputs sharing their input's memory (views), the lanes' arenas, and each entry's bytes per image.
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

/* Points every view at its root, the entry that is no view and so owns
 * the memory, with the offsets along the chain summed. A Concat's output
 * taken as a view by a later Concat (Inception's E blocks concatenate the
 * 1x3 and 3x1 branches, then that with the other branches) leaves its own
 * inputs viewing an entry that gets no block of its own: every consumer of
 * view[] (the arena and lane places, image_moves) reads the root's. */
static void resolve_views(size_t n, size_t *view, size_t *view_offset) {
  for (size_t e = 0; e < n; ++e) {
    /* Each entry views at most one other, a later step's output, so a
     * chain ends within n links. */
    for (size_t links = 0; view[e] != SIZE_MAX && view[view[e]] != SIZE_MAX && links < n;
         ++links) {
      view_offset[e] += view_offset[view[e]];
      view[e] = view[view[e]];
    }
  }
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
 * its first image lies. An input may be an earlier Concat elided so (a
 * run of a run is a run): its own inputs then view this output, at their
 * offsets plus its own (resolve_views), and the root's lifetime begins at
 * the earliest producer of the whole tree. Not for a batch: an elided
 * Concat is no convolution, whose image stride could be widened. */
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
  resolve_views(model->num_entries, view, view_offset);
  return MX_ACC_OK;
}

/* Whether step only renames its input 0's bytes: a reshape, squeeze,
 * unsqueeze or flatten, or a transpose that moves nothing but extent-1
 * axes (the axes of extent above 1 keep their order), of one dtype and
 * one size. */
static int renames_input(const cr_model *model, const cr_step *step, const size_t *sizes) {
  static const char *const kReshapes[] = {"Reshape",         "_onnx_reshape", "Flatten",
                                          "_onnx_flatten",   "squeeze",       "_onnx_squeeze",
                                          "expand_dims",     "_onnx_unsqueeze"};
  if (step->fused_away || step->elided || step->dense != NULL || step->swish ||
      step->rnn_packed != NULL || step->num_outputs != 1 || step->num_inputs < 1 ||
      step->params.in_dtypes[0] != step->params.out_dtypes[0] ||
      sizes[step->inputs[0]] != sizes[step->outputs]) {
    return 0;
  }
  for (size_t i = 0; i < sizeof kReshapes / sizeof kReshapes[0]; ++i) {
    if (step_is(step, kReshapes[i])) return 1;
  }
  if (!step_is(step, "transpose") || step->params.variant != 0 || step->num_inputs != 1) {
    return 0;
  }
  const acc_shape *in = &model->entries[step->inputs[0]].shape;
  const cr_axes *axes = &step->params.u.axes;
  if (axes->count != 0 && axes->count != in->ndim) return 0;
  int previous = -1; /* the last input axis of extent above 1 read so far */
  for (int d = 0; d < in->ndim; ++d) {
    const int64_t from = axes->count == 0 ? in->ndim - 1 - d : axes->values[d];
    if (from < 0 || from >= in->ndim) return 0;
    if (in->dims[from] == 1) continue;
    if (from < previous) return 0;
    previous = (int)from;
  }
  return 1;
}

/* A step that only renames its input's bytes (renames_input) gives its
 * output its input's memory and is not run (elided). The input must be an
 * operator output in the arena, its own or a view's (so its bytes are
 * written by a step of this model at one place: graph inputs and weights
 * keep their copies), and the output no graph output (the caller gets
 * memory of its own). The output becomes a view of the input's root, whose
 * lifetime runs to the output's last reader, so that nothing is placed
 * over the bytes while either is live. No step writes into an input's
 * memory (Concat's views excepted, whose inputs only the Concat reads), so
 * the two never clobber each other. */
static void plan_rename_views(cr_model *model, const size_t *sizes, size_t *first, size_t *last,
                              size_t *view, size_t *view_offset, const unsigned char *is_head) {
  for (size_t s = 0; s < model->num_steps; ++s) {
    cr_step *step = &model->steps[s];
    if (!renames_input(model, step, sizes)) continue;
    const size_t in = step->inputs[0], out = step->outputs;
    if (is_head[out] || first[out] != s || view[out] != SIZE_MAX) continue;
    const size_t root = view[in] != SIZE_MAX ? view[in] : in;
    if (first[root] == SIZE_MAX || view[root] != SIZE_MAX) continue;
    view[out] = root;
    view_offset[out] = view[in] != SIZE_MAX ? view_offset[in] : 0;
    if (last[out] > last[root]) last[root] = last[out];
    first[out] = SIZE_MAX;
    step->elided = 1;
  }
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
int plan_lanes(cr_model *model, const size_t *first, const size_t *last,
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

int plan_memory(cr_model *model) {
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
    if (step->matmul != NULL && step->matmul->output != step->outputs) {
      first[step->outputs] = SIZE_MAX; /* written into its transpose's output */
      first[step->matmul->output] = s;
      last[step->matmul->output] = s;
    }
    for (int k = 0; k < step->num_inputs; ++k) last[step->inputs[k]] = s;
  }
  for (size_t i = 0; i < graph->num_heads && status == MX_ACC_OK; ++i) {
    last[model->entry_of_node[graph->heads[i].node] + graph->heads[i].index] = SIZE_MAX;
  }
  for (size_t e = 0; e < n && status == MX_ACC_OK; ++e) view[e] = SIZE_MAX;
  if (status == MX_ACC_OK) status = plan_concat_views(model, first, view, view_offset);
  if (status == MX_ACC_OK) {
    cr_entry_facts facts;
    status = gather_facts(model, &facts);
    if (status == MX_ACC_OK) {
      plan_rename_views(model, sizes, first, last, view, view_offset, facts.is_head);
      free_facts(&facts);
    }
  }
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

/* image_bytes and batch_data of a model plan_image_split accepted, once its
 * memory is planned. */
int plan_image_bytes(cr_model *model) {
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
  /* The inputs of a Concat written in place lie in its output's images;
   * an outer Concat comes later, so its output has its root's image bytes
   * before they pass on to the inner Concat's inputs. */
  for (size_t s = model->num_steps; s-- > 0;) {
    const cr_step *step = &model->steps[s];
    if (!step->elided || !(step_is(step, "Concat") || step_is(step, "concat"))) continue;
    for (int k = 0; k < step->num_inputs; ++k) {
      model->image_bytes[step->inputs[k]] = model->image_bytes[step->outputs];
    }
  }
  return MX_ACC_OK;
}
