/*
 * Symbolic mode's _onnx_matmul steps with their transposes folded in
 * (model_impl.h): a transpose whose only reader is a float32 product, as
 * an operand (attention's heads split off, K^T) or of its output (the
 * heads merged back), runs no step; the product's GEMM reads the
 * operand, or writes its output, through the transpose's strides.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "kernels.h"
#include "model_impl.h"
#include "op_impl.h"
#include "parallel.h"
#include "status.h"

/* Elements from one index of axis d of a contiguous shape to the next. */
static int64_t contiguous_stride(const acc_shape *shape, int d) {
  int64_t stride = 1;
  for (int i = d + 1; i < shape->ndim; ++i) stride *= (int64_t)shape->dims[i];
  return stride;
}

/* A transpose step (MXNet's transpose, the ONNX importer's Transpose)
 * whose output axis d reads input axis from[d]. */
static int transpose_from(const cr_model *model, const cr_step *step, int from[CR_MAX_NDIM]) {
  if (!step_is(step, "transpose") || step->params.variant != 0 || step->num_inputs != 1 ||
      step->num_outputs != 1 || step->fused_away || step->elided || !step_all_float32(step)) {
    return 0;
  }
  const int ndim = model->entries[step->inputs[0]].shape.ndim;
  const cr_axes *axes = &step->params.u.axes;
  if (ndim < 1 || ndim > CR_MAX_NDIM || (axes->count != 0 && axes->count != ndim)) return 0;
  unsigned char seen[CR_MAX_NDIM] = {0};
  for (int d = 0; d < ndim; ++d) {
    const int64_t axis = axes->count == 0 ? ndim - 1 - d : axes->values[d];
    if (axis < 0 || axis >= ndim || seen[axis]) return 0;
    seen[axis] = 1;
    from[d] = (int)axis;
  }
  return 1;
}

/* Whether step only adds or removes extent-1 axes of its input 0 (its
 * other axes in order), so that strides carry over axis for axis. */
static int adds_unit_axes(const cr_model *model, const cr_step *step) {
  static const char *const kReshapes[] = {"Reshape",     "_onnx_reshape",   "squeeze",
                                          "_onnx_squeeze", "expand_dims", "_onnx_unsqueeze"};
  int known = 0;
  for (size_t i = 0; i < sizeof kReshapes / sizeof kReshapes[0]; ++i) {
    known |= step_is(step, kReshapes[i]);
  }
  if (!known || step->num_outputs != 1 || step->num_inputs < 1 || step->fused_away ||
      step->elided || step->params.in_dtypes[0] != kFloat32) {
    return 0;
  }
  const acc_shape *in = &model->entries[step->inputs[0]].shape;
  const acc_shape *out = &model->entries[step->outputs].shape;
  int i = 0, o = 0;
  for (;;) {
    while (i < in->ndim && in->dims[i] == 1) ++i;
    while (o < out->ndim && out->dims[o] == 1) ++o;
    if (i == in->ndim || o == out->ndim) return i == in->ndim && o == out->ndim;
    if (in->dims[i++] != out->dims[o++]) return 0;
  }
}

/* Where operand entry e of a product may be read from: e itself
 * (contiguous), or, when e is the output of a transpose (possibly through
 * a step adding extent-1 axes), each read by nothing else and no graph
 * output, that transpose's input, with the strides of e's axes in it.
 * Sets *source and strides[] (e's rank), and the steps to skip. */
static void operand_view(const cr_model *model, const cr_entry_facts *f, size_t e,
                         size_t *source, int64_t strides[CR_MAX_NDIM], size_t skip[2]) {
  const acc_shape *shape = &model->entries[e].shape;
  *source = e;
  skip[0] = skip[1] = SIZE_MAX;
  for (int d = 0; d < shape->ndim; ++d) strides[d] = contiguous_stride(shape, d);
  size_t entry = e, reshape = SIZE_MAX;
  if (f->is_head[entry] || f->uses[entry] != 1 || f->producer[entry] == SIZE_MAX) return;
  if (adds_unit_axes(model, &model->steps[f->producer[entry]])) {
    reshape = f->producer[entry];
    entry = model->steps[reshape].inputs[0];
    if (f->is_head[entry] || f->uses[entry] != 1 || f->producer[entry] == SIZE_MAX) return;
  }
  const size_t t = f->producer[entry];
  int from[CR_MAX_NDIM];
  if (!transpose_from(model, &model->steps[t], from)) return;
  const size_t x = model->steps[t].inputs[0];
  const acc_shape *in = &model->entries[x].shape;
  const acc_shape *mid = &model->entries[entry].shape; /* the transpose's output */
  int64_t mid_strides[CR_MAX_NDIM];
  for (int d = 0; d < mid->ndim; ++d) mid_strides[d] = contiguous_stride(in, from[d]);
  /* e's axes of extent above 1 are mid's, in order (adds_unit_axes). */
  int m = 0;
  for (int d = 0; d < shape->ndim; ++d) {
    if (shape->dims[d] == 1) {
      strides[d] = 0;
      continue;
    }
    while (m < mid->ndim && mid->dims[m] == 1) ++m;
    if (m == mid->ndim) return;
    strides[d] = mid_strides[m++];
  }
  *source = x;
  skip[0] = t;
  skip[1] = reshape;
}

/* Plans the float32 _onnx_matmul steps of two operands of rank 2 or more
 * whose operands or output a transpose reads or writes (operand_view; the
 * output: its one reader a transpose that keeps the last axis last, whose
 * output the GEMM then writes with the rows ldc apart). */
int plan_matmul_steps(cr_model *model) {
  cr_entry_facts facts;
  int status = gather_facts(model, &facts);
  if (status != MX_ACC_OK) return status;
  for (size_t s = 0; s < model->num_steps && status == MX_ACC_OK; ++s) {
    cr_step *step = &model->steps[s];
    if (!step_is(step, "_onnx_matmul") || step->fused_away || step->elided ||
        step->num_inputs != 2 || step->num_outputs != 1 || !step_all_float32(step) ||
        step->params.kernels != CR_KERNELS_FAST) {
      continue;
    }
    const acc_shape *out = &model->entries[step->outputs].shape;
    const acc_shape *a = &model->entries[step->inputs[0]].shape;
    const acc_shape *b = &model->entries[step->inputs[1]].shape;
    if (a->ndim < 2 || b->ndim < 2 || out->ndim < 2 || out->ndim > CR_MAX_NDIM) continue;
    cr_matmul_plan plan;
    memset(&plan, 0, sizeof plan);
    size_t skip[3][2];
    int64_t strides[2][CR_MAX_NDIM];
    for (int k = 0; k < 2; ++k) {
      operand_view(model, &facts, step->inputs[k], &plan.source[k], strides[k], skip[k]);
    }
    /* The output, through its one reader when that is a transpose. */
    plan.output = step->outputs;
    int64_t y_strides[CR_MAX_NDIM];
    for (int d = 0; d < out->ndim; ++d) y_strides[d] = contiguous_stride(out, d);
    skip[2][0] = skip[2][1] = SIZE_MAX;
    for (size_t t = s + 1; t < model->num_steps && !facts.is_head[step->outputs] &&
                           facts.uses[step->outputs] == 1;
         ++t) {
      const cr_step *next = &model->steps[t];
      if (next->num_inputs < 1 || next->inputs[0] != step->outputs) continue;
      int from[CR_MAX_NDIM];
      if (!transpose_from(model, next, from)) break;
      const acc_shape *moved = &model->entries[next->outputs].shape;
      int64_t moved_strides[CR_MAX_NDIM];
      for (int d = 0; d < out->ndim; ++d) {
        for (int p = 0; p < moved->ndim; ++p) {
          if (from[p] == d) moved_strides[d] = contiguous_stride(moved, p);
        }
      }
      if (moved_strides[out->ndim - 1] != 1) break;
      memcpy(y_strides, moved_strides, sizeof y_strides);
      plan.output = next->outputs;
      skip[2][0] = t;
      break;
    }
    if (plan.source[0] == step->inputs[0] && plan.source[1] == step->inputs[1] &&
        plan.output == step->outputs) {
      continue; /* nothing to fold: the op's own run */
    }
    const int outer = out->ndim - 2;
    plan.outer_rank = outer;
    plan.m = (int64_t)out->dims[outer];
    plan.n = (int64_t)out->dims[outer + 1];
    plan.k = (int64_t)a->dims[a->ndim - 1];
    plan.a_rs = strides[0][a->ndim - 2];
    plan.a_cs = strides[0][a->ndim - 1];
    plan.b_rs = strides[1][b->ndim - 2];
    plan.b_cs = strides[1][b->ndim - 1];
    plan.ldc = y_strides[outer];
    for (int d = 0; d < outer; ++d) {
      plan.outer[d] = (int64_t)out->dims[d];
      plan.y_stride[d] = y_strides[d];
      const acc_shape *shapes[2] = {a, b};
      for (int k = 0; k < 2; ++k) {
        /* operand batch axes align with the output's from the right */
        const int axis = d - (outer - (shapes[k]->ndim - 2));
        plan.stride[k][d] = axis >= 0 && shapes[k]->dims[axis] != 1 ? strides[k][axis] : 0;
      }
    }
    step->matmul = malloc(sizeof *step->matmul);
    if (step->matmul == NULL) {
      status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model steps");
      break;
    }
    *step->matmul = plan;
    for (int k = 0; k < 3; ++k) {
      for (int j = 0; j < 2; ++j) {
        if (skip[k][j] != SIZE_MAX) model->steps[skip[k][j]].fused_away = 1;
      }
    }
    /* The memory plan keeps the sources alive to this step. */
    step->inputs[0] = plan.source[0];
    step->inputs[1] = plan.source[1];
  }
  free_facts(&facts);
  return status;
}

/* Below this many multiply-adds in all, the products run on one thread. */
#define MATMUL_PARALLEL_MIN_WORK ((double)(1 << 16))

typedef struct matmul_task {
  const cr_matmul_plan *plan;
  const float *a, *b;
  float *y;
  int threads_per_product;
  int failed;
} matmul_task;

static void matmul_products(void *context, int64_t begin, int64_t end) {
  matmul_task *t = context;
  const cr_matmul_plan *p = t->plan;
  for (int64_t index = begin; index < end; ++index) {
    int64_t a_off = 0, b_off = 0, y_off = 0, rest = index;
    for (int d = p->outer_rank; d-- > 0;) {
      const int64_t i = rest % p->outer[d];
      rest /= p->outer[d];
      a_off += i * p->stride[0][d];
      b_off += i * p->stride[1][d];
      y_off += i * p->y_stride[d];
    }
    const cr_gemm_operand a = {t->a + a_off, p->a_rs, p->a_cs, NULL, NULL, NULL, CR_ISA_GENERIC,
                               NULL};
    const cr_gemm_operand b = {t->b + b_off, p->b_rs, p->b_cs, NULL, NULL, NULL, CR_ISA_GENERIC,
                               NULL};
    if (cr_gemm(p->m, p->n, p->k, &a, &b, t->y + y_off, p->ldc, NULL, t->threads_per_product)) {
      __atomic_store_n(&t->failed, 1, __ATOMIC_RELAXED);
    }
  }
}

int run_matmul(const cr_tensor *entries, const cr_step *step, int num_threads) {
  const cr_matmul_plan *p = step->matmul;
  int64_t batches = 1;
  for (int d = 0; d < p->outer_rank; ++d) batches *= p->outer[d];
  if (batches == 0 || p->m == 0 || p->n == 0) return MX_ACC_OK;
  const double work = (double)batches * (double)p->m * (double)p->n * (double)(p->k ? p->k : 1);
  const int threads = work >= MATMUL_PARALLEL_MIN_WORK && num_threads > 1 ? num_threads : 1;
  matmul_task task = {p, entries[p->source[0]].data, entries[p->source[1]].data,
                      entries[p->output].data, 1, 0};
  if (batches == 1 || threads == 1) {
    task.threads_per_product = threads;
    matmul_products(&task, 0, batches);
  } else {
    cr_parallel_for(threads, batches, matmul_products, &task);
  }
  return __atomic_load_n(&task.failed, __ATOMIC_RELAXED)
             ? acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "%s: out of scratch memory", step->op->name)
             : MX_ACC_OK;
}
