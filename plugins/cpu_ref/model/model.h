/*
 * Symbolic mode of cpu_ref: a graph compiled into a list of steps over
 * preallocated buffers, kept under its model id.
 */
#ifndef CPU_REF_MODEL_H_
#define CPU_REF_MODEL_H_

#include <stddef.h>

#include "graph.h"
#include "mxnet_acc.h"
#include "ops.h"

/* retainsWeights(): 1, cpu_ref reads the host's weight buffers in place
 * (mxnet_acc.h section 11) instead of copying them at loadModel() and at
 * every update; 0 (-DCR_RETAIN_WEIGHTS=0), it copies them. */
#ifndef CR_RETAIN_WEIGHTS
#define CR_RETAIN_WEIGHTS 1
#endif

typedef struct cr_step cr_step;
typedef struct cr_model cr_model;

struct cr_model {
  char *id;
  int dev_id;
  /* The device's kernels at loadModel, for the model's whole life: with
   * reference kernels every step runs its operator's reference kernel
   * (no pre-packing, BatchNorm folding, fusion or image-by-image lanes);
   * memory planning is the same. */
  cr_kernels kernels;
  int retains_weights;    /* weights read in place from the host's buffers */
  int sparse_weights;     /* a weight is sparse (a copy of its arrays, see take_sparse_weight):
                           * not exported */
  char *json;             /* the graph JSON as loadModel received it (for export) */
  acc_graph *graph;
  size_t num_entries;
  size_t *entry_of_node;  /* first entry of each node */
  cr_tensor *entries;     /* one per node output; variables hold their value */
  unsigned char *owned;   /* 1: entries[i].data is the model's own allocation;
                           * 2: it lies in arena (operator outputs);
                           * 3: a weight the host retains for the model;
                           * 4: a weight in file_bytes (an imported model's) */
  /* An imported model's file (cr_model_adopt_file), which it owns: its
   * weight entries and the filters its dense steps were given from the
   * file point into it (file_size bytes); NULL otherwise. */
  unsigned char *file_bytes;
  size_t file_size;
  void *arena;            /* the operator outputs' memory (see plan_memory) */
  size_t num_steps;
  cr_step *steps;
  /* Image by image (see plan_image_split): the batch, 0 when the model
   * runs layer by layer only; each entry's bytes from one image to the
   * next (0: not split, e.g. weights), and its whole-batch data pointer
   * during an infer(). */
  int64_t split_batch;
  int split_by_default;   /* large activations: split on one thread unless told not to */
  size_t split_end;       /* by default the steps from here on run on the batch */
  size_t *image_bytes;
  unsigned char *image_moves; /* 1: each image at its own place (inputs, outputs,
                               * what the batched steps read); 0: every
                               * image's pass at the first image's */
  void **batch_data;
  /* Lanes (run_lanes): each entry's place in a lane's arena (SIZE_MAX:
   * none), the bytes of one lane's arena, and the arenas and entry tables
   * of lane_count lanes, allocated on first use. */
  size_t *lane_offset;
  size_t lane_bytes;
  void *lane_arena;       /* lanes 1.. (lane 0 runs in arena) */
  cr_tensor *lane_tables; /* lane_count x num_entries */
  int lane_count;
  char **head_names;      /* num_heads names of the outputs */
  cr_model *next;
};

/* Ids of the operator nodes of json that cpu_ref can run (see
 * supportedOps()); when reasons is not NULL, the reason for each declined
 * node in its slot (see supportedOpsReasons()). */
int cr_model_supported(const char *json, int *ids, int capacity, int *count, char *reasons,
                       size_t reason_size);

/* Builds a model from json and the weights in data (see loadModel()); keeps a
 * copy of json. On success *model is owned by the caller; free it with
 * cr_model_free. */
int cr_model_create(const char *model_id, const char *json, const char *const *names,
                    const MXTensor *data, int num_data, int dev_id, cr_model **model);

/* cr_model_create() for loadModel(): the weights' buffers are retained
 * (read in place until unloadModel) when CR_RETAIN_WEIGHTS is 1. */
int cr_model_load(const char *model_id, const char *json, const char *const *names,
                  const MXTensor *data, int num_data, int dev_id, cr_model **model);

/* cr_model_create() for import_model: data points into file_bytes (size
 * bytes, from aligned_alloc, each weight's values aligned for its dtype),
 * which the model uses in place (no copy) and owns from a successful call
 * on; the dense steps' filters are not folded or packed yet: the caller
 * gives them from the file or calls cr_model_prepare(). */
int cr_model_adopt_file(const char *model_id, const char *json, const char *const *names,
                        const MXTensor *data, int num_data, int dev_id,
                        unsigned char *file_bytes, size_t size, cr_model **model);

/* Folds and packs the dense steps' filters from the weights (what
 * cr_model_create() does). */
int cr_model_prepare(cr_model *model);

/* Whether pointer lies in model's file_bytes. */
int cr_model_in_file(const cr_model *model, const void *pointer);

void cr_model_free(cr_model *model);

/* The storage kind of visible output k of node ("__out_stypes__", ABI 1.2;
 * absent: MX_ACC_STORAGE_DENSE), or -1 when the annotation is malformed. */
int32_t cr_node_stype(const acc_node *node, int k);

/* Runs model once (see infer()). num_threads bounds the kernels' threads. */
int cr_model_infer(cr_model *model, const char *const *in_names, const char *const *out_names,
                   const MXTensor *in_data, const MXTensor *out_data, int num_in, int num_out,
                   int num_threads);

#endif /* CPU_REF_MODEL_H_ */
