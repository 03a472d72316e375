/*
 * template: the smallest complete acc-host plugin, to copy and rename
 * (plugins/template/README.md). It runs six float32 operators with plain
 * loops on two simulated devices whose "device memory" is host memory, in
 * both modes of include/mxnet_acc.h.
 *
 * Internal declarations shared by its sources:
 *   template.c  the exported entry points: argument checks, then delegation;
 *               configure(); the per-thread error message
 *   memory.c    device memory: one allocation table per device
 *   ops.c       the operators: attribute and shape checks, the loops
 *   model.c     symbolic mode: graphs of those operators as models
 * From plugins/common (acc-host's SDK, compiled in): graph.h (parses and
 * validates the graph JSON), tensor.h (checked MXTensor helpers), attrs.h
 * (MXNet attribute strings), status.h (acc_fail: the thread-local message).
 *
 * Threads (mxnet_acc.h): calls naming one dev_id are serialized by the host,
 * so a device's allocation table needs no lock; the model list is shared by
 * both devices and has one (model.c).
 */
#ifndef TEMPLATE_TEMPLATE_H_
#define TEMPLATE_TEMPLATE_H_

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "mxnet_acc.h"

#define TP_NAME "template"  /* the context type: mx.template(0) */
#define TP_VERSION "1.0.0"  /* answered to query=version */
#define TP_NUM_DEVICES 2

/* ---- memory.c ------------------------------------------------------------- */

/* MX_ACC_OK if 0 <= dev_id < TP_NUM_DEVICES, else MX_ACC_ERR_DEVICE naming call. */
int tp_check_device(const char *call, int dev_id);

int tp_mem_alloc(int dev_id, size_t size, void **ptr);
int tp_mem_free(int dev_id, void *ptr);
void tp_mem_release_all(int dev_id);
/* Live allocations, their bytes, and the limit (0: none) of dev_id. */
void tp_mem_stats(int dev_id, uint64_t *allocations, uint64_t *bytes, uint64_t *limit);
void tp_mem_set_limit(int dev_id, uint64_t limit);
/* MX_ACC_OK if [ptr, ptr + bytes) lies inside one live allocation of dev_id
 * (or bytes is 0), else MX_ACC_ERR_INVALID_ARG naming what. */
int tp_mem_check(int dev_id, const void *ptr, size_t bytes, const char *what);

/* Checks a float32 tensor of the given shape passed by the host and where
 * its bytes are: host memory (only if allow_host) or inside one live
 * allocation of dev_id. On success *data is its first element. what names
 * the tensor in messages. */
int tp_tensor_data(const MXTensor *tensor, const char *what, const acc_shape *shape, int dev_id,
                   int allow_host, float **data);

/* ---- ops.c ---------------------------------------------------------------- */

enum { TP_MAX_INPUTS = 3 };

typedef enum tp_kind { TP_CONV, TP_FC, TP_RELU, TP_ADD, TP_FLATTEN, TP_POOL } tp_kind;

/* One operator, checked and ready to run: kind, shapes, parameters. */
typedef struct tp_op {
  tp_kind kind;
  int num_inputs;
  acc_shape in[TP_MAX_INPUTS], out;
  int64_t kernel[2], stride[2], pad[2], dilate[2]; /* Convolution, Pooling: (y, x) */
  int64_t groups;                                  /* Convolution */
  int has_bias;                                    /* Convolution, FullyConnected */
  int pool_max, include_pad;                       /* Pooling */
} tp_op;

/* The operators and versions run, for query=ops. */
extern const char tp_op_list[];

/* Checks operator op_name with num_attrs attributes (MXNet's strings,
 * "__op_version__" included) on float32 inputs and output of the given
 * shapes, and fills *op. MX_ACC_ERR_UNSUPPORTED for an operator, version or
 * attribute value the template does not run; MX_ACC_ERR_INVALID_ARG for
 * malformed attributes or inconsistent shapes. */
int tp_op_prepare(const char *op_name, const char *const *keys, const char *const *vals,
                  size_t num_attrs, int num_inputs, const acc_shape *inputs,
                  const acc_shape *output, tp_op *op);

/* Runs op: inputs[i] holds op->in[i], output op->out (not aliasing them). */
void tp_op_run(const tp_op *op, const float *const *inputs, float *output);

/* ---- model.c -------------------------------------------------------------- */

int tp_model_supported(const char *json, int *ids, int capacity, int *num_ids);
int tp_model_load(const char *model_id, const char *json, const char *const *names,
                  const MXTensor *data, int num_data, int dev_id);
int tp_model_unload(const char *model_id);
int tp_model_infer(const char *model_id, const char *const *in_names,
                   const char *const *out_names, const MXTensor *in_data,
                   const MXTensor *out_data, int num_in, int num_out);

#endif /* TEMPLATE_TEMPLATE_H_ */
