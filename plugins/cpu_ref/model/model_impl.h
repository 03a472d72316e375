/*
 * What the files of cpu_ref's symbolic mode share (internal to model/):
 * the step and dense-plan records, and the functions each file offers the
 * others. model.c: loading, steps, weights, infer(); dense_steps.c:
 * pre-packed filters, BatchNorm folding and fused epilogues of
 * Convolution and FullyConnected steps; matmul_steps.c: products with
 * their transposes folded in; memory_plan.c: the arena, Concat
 * views, lane and per-image layouts; lanes.c: image-by-image passes and
 * lanes. Function names are model.c's (they were its static functions).
 */
#ifndef CPU_REF_MODEL_IMPL_H_
#define CPU_REF_MODEL_IMPL_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "model.h"
#include "ops.h"

enum { kErrorSize = 512 };

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
  cr_epilogue_act act;   /* a fused relu, clip or hard sigmoid */
  float clip_low, clip_high; /* act's parameters (cr_epilogue_act) */
  size_t output;         /* the entry the fused chain writes */
  /* Elements from one image of the output to the next when it is written
   * into a slice of a Concat's output (plan_concat_views); 0: dense. */
  int64_t out_image_stride;
  float *folded_w;       /* the filters with the BatchNorm folded in, kept only
                          * where the kernels read them (dense_keeps_folded);
                          * else NULL */
  float *folded_b;       /* the bias with the BatchNorm folded in */
  float *packed;         /* the filters packed for the GEMM, or NULL */
  cr_isa packed_isa;
} cr_dense_plan;

/* An _onnx_matmul step with the transposes around it folded in
 * (matmul_steps.c): operand k is read from entry source[k], element (i, j)
 * of its product p at stride[k] . (p's index on the outer axes) + i * rs +
 * j * cs; the output is written to entry `output` (its own, or that of the
 * transpose reading it) with the rows ldc apart. */
typedef struct cr_matmul_plan {
  size_t source[2];
  size_t output;
  int outer_rank;                   /* the output's axes before the last two */
  int64_t outer[CR_MAX_NDIM];       /* their extents */
  int64_t stride[2][CR_MAX_NDIM];   /* each operand's element stride along them (0: broadcast) */
  int64_t y_stride[CR_MAX_NDIM];    /* the output's */
  int64_t m, n, k;
  int64_t a_rs, a_cs, b_rs, b_cs, ldc;
} cr_matmul_plan;

struct cr_step {
  const cr_op *op;
  cr_params params;
  int num_inputs;
  size_t inputs[CR_MAX_INPUTS]; /* entry indices */
  int num_outputs;
  size_t outputs; /* entry index of the first output; the others follow it */
  int fused_away;        /* folded into an earlier step's dense plan */
  int elided;            /* not run: a Concat whose inputs are written in place into its
                          * output, or a reshape whose output views its input (memory_plan.c) */
  cr_dense_plan *dense;  /* Convolution / FullyConnected run by model.c, or NULL */
  cr_rnn_packing *rnn_packed; /* an RNN step's weights packed at load (rnn_steps.c), or NULL */
  int swish;             /* a multiply run as x * sigmoid(x), its sigmoid fused in (fuse_swish) */
  cr_matmul_plan *matmul; /* an _onnx_matmul with transposes folded in, or NULL */
};

/* Per-entry facts the fusion pass needs. */
typedef struct cr_entry_facts {
  unsigned char *is_weight; /* the value of a weight variable */
  unsigned char *is_head;   /* a graph output */
  size_t *uses;             /* how many step inputs read it */
  size_t *producer;         /* the step writing it; SIZE_MAX for variables */
} cr_entry_facts;

/* At most this many lanes (their statuses and messages live on the stack);
 * more threads run the lanes' steps on one thread each all the same. */
enum { kMaxLanes = 8 };

/* ---- model.c ---- */

size_t entry_bytes(const cr_model *model, size_t node, uint32_t index);
int run_steps(const cr_model *model, cr_tensor *entries, size_t begin, size_t end,
              int num_threads);

/* ---- dense_steps.c ---- */

int step_is(const cr_step *step, const char *name);
void free_facts(cr_entry_facts *f);
int gather_facts(const cr_model *model, cr_entry_facts *f);
int plan_dense_steps(cr_model *model);
int prepare_dense_steps(cr_model *model);
/* Whether step's plan keeps its filters with the BatchNorm folded in
 * (folded_w) after loadModel: where the kernels read them besides the
 * packed filters. */
int dense_keeps_folded(const cr_model *model, const cr_step *step);
int run_dense(const cr_tensor *entries, const cr_step *step, int num_threads);
int run_swish(const cr_tensor *entries, const cr_step *step, int num_threads);
int step_all_float32(const cr_step *step);

/* ---- matmul_steps.c ---- */

int plan_matmul_steps(cr_model *model);
int run_matmul(const cr_tensor *entries, const cr_step *step, int num_threads);

/* ---- rnn_steps.c ---- */

int prepare_rnn_steps(cr_model *model);

/* ---- memory_plan.c ---- */

int plan_lanes(cr_model *model, const size_t *first, const size_t *last,
               const size_t *sizes, const size_t *view, const size_t *view_offset);
int plan_memory(cr_model *model);
int plan_image_bytes(cr_model *model);

/* ---- lanes.c ---- */

size_t *entry_sizes(const cr_model *model);
int plan_split_end(cr_model *model);
int plan_image_split(cr_model *model);
int run_lanes(cr_model *model, size_t end, int lanes);

#endif /* CPU_REF_MODEL_IMPL_H_ */
