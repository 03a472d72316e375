/*
 * Symbolic mode (loadModel / infer / unloadModel): an annotated graph made
 * into CNML BaseOps, split into fusion segments by the seed's algorithm,
 * each compiled into one FusionOp (one launch) on its card.
 *
 * Segments: the operator nodes are grouped by the card their "__dev_id__"
 * names; each group, in topological order, is cut into runs such that the
 * largest topological index of a run's input operators (those reading data
 * from outside the run) is at most the smallest of its output operators
 * (those whose results are read outside the run, or are graph outputs),
 * taking as many operators per run as possible. An operator that is both
 * counts on both sides, which is why "at most" and not "below": with
 * strictness no one-operator segment could exist. A segment launches at the
 * position of its last input operator; launches follow that order, which
 * the condition makes a valid order of their data dependencies. Parameters
 * (convolution and fully connected weights, batch-norm statistics) are
 * bound into the BaseOps and are not segment inputs.
 */
#ifndef MLU_SIM_MODEL_H_
#define MLU_SIM_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#include "cnml.h"
#include "graph.h"
#include "isa.h"
#include "mxnet_acc.h"

typedef struct mlu_model mlu_model;

struct mlu_model {
  char *id;
  int dev_id;
  struct mlu_model *next; /* the library's registry */
  struct mlu_model_state *state;
};

/* What loading made of a model, for configure's "model_info". */
typedef struct mlu_model_info {
  size_t operators, segments;
  size_t kernels, instructions, folded_batchnorms, fused_epilogues, resident_values,
      spilled_values, aliased_values, int8_kernels;
  uint64_t sram_words, const_bytes, scratch_bytes;
} mlu_model_info;

/* Ids of the operator nodes of json the MLU runs (see supportedOps()). */
int mlu_model_supported(const char *json, int num_cards, int *ids, int capacity, int *count,
                        char *reasons, size_t reason_size);

/* Builds, segments and compiles json on dev_id (see loadModel()). On
 * success *model is owned by the caller; free it with mlu_model_free. */
int mlu_model_create(const char *model_id, const char *json, const char *const *names,
                     const MXTensor *data, int num_data, int dev_id, mlu_model **model);

void mlu_model_free(mlu_model *model);

/* Runs the model once (see infer()). */
int mlu_model_infer(mlu_model *model, const char *const *in_names, const char *const *out_names,
                    const MXTensor *in_data, const MXTensor *out_data, int num_in, int num_out);

void mlu_model_describe(const mlu_model *model, mlu_model_info *info);

/* ---- offline models (model_file.c) ------------------------------------------------ */

/* One fusion segment as loading made it: the segment's index among count
 * (launch order), its card, the topological index of its last input
 * operator (its launch position), its operator nodes in topological order
 * and its FusionOp's I/O, as graph entries (node outputs numbered in node
 * order). Valid while the model lives. */
typedef struct mlu_segment_view {
  size_t index, count;
  int card, launch;
  size_t num_nodes;
  const uint32_t *nodes;
  size_t num_inputs;
  const size_t *inputs;
  size_t num_outputs;
  const size_t *outputs;
} mlu_segment_view;

/* Supplies the compiled program of a segment in place of compiling it: it
 * must give fusion (its ops fused and I/O set) a program for card, e.g.
 * with mlu_fusion_set_program(), or fail with a message recorded. */
typedef int (*mlu_program_source)(void *context, const mlu_segment_view *segment,
                                  cnmlFusionOp_t fusion, cnrtDev_t card);

/* mlu_model_create, except that each segment's program comes from source
 * (when not NULL) instead of the compiler. */
int mlu_model_create_from(const char *model_id, const char *json, const char *const *names,
                          const MXTensor *data, int num_data, int dev_id,
                          mlu_program_source source, void *context, mlu_model **model);

/* What an export reads. The caller keeps the model from being run or
 * unloaded meanwhile. */
const char *mlu_model_json(const mlu_model *model);
const acc_graph *mlu_model_graph(const mlu_model *model);
/* Host bytes of weight variable node's current values (NULL for another node). */
const void *mlu_model_weight(const mlu_model *model, size_t node);
size_t mlu_model_num_segments(const mlu_model *model);
void mlu_model_segment(const mlu_model *model, size_t k, mlu_segment_view *view);
/* Segment k's program, compiled again first if weights changed since (as
 * the next infer would); one reference for the caller (mlu_program_unref). */
int mlu_model_segment_program(mlu_model *model, size_t k, mlu_program **program);

#endif /* MLU_SIM_MODEL_H_ */
