/*
 * template: the smallest complete acc-host plugin, to copy and rename
 * (README.md). Declarations shared by its sources.
 *
 * Every entry point clears the calling thread's error message, checks what
 * it is given, and fails through acc_fail() (plugins/common/status.h), which
 * keeps the message behind accGetLastError() per thread.
 */
#ifndef TEMPLATE_TEMPLATE_H_
#define TEMPLATE_TEMPLATE_H_

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "mxnet_acc.h"

#define TP_NAME "template" /* the context type: mx.template(0) */
#define TP_VERSION "1.0.0"
#define TP_NUM_DEVICES 2

/* ---- memory.c ---- */
int tp_check_device(const char *call, int dev_id); /* MX_ACC_ERR_DEVICE if out of range */
void tp_mem_set_limit(int dev_id, uint64_t limit);  /* bytes; 0: no limit */
/* Checks a float32 tensor of the given shape, in memory of dev_id or (if
 * allow_host) in host memory; *data (out) is its first element. */
int tp_tensor_data(const MXTensor *tensor, const char *what, const acc_shape *shape, int dev_id,
                   int allow_host, float **data);

/* ---- ops.c ---- */
enum { TP_MAX_INPUTS = 3 };
typedef enum tp_kind { TP_CONV, TP_FC, TP_RELU, TP_ADD, TP_FLATTEN } tp_kind;

typedef struct tp_op { /* one operator, checked and ready to run */
  tp_kind kind;
  int num_inputs, has_bias;
  acc_shape in[TP_MAX_INPUTS], out;
  int64_t kernel[2], stride[2], pad[2], dilate[2], groups; /* Convolution: (y, x) */
} tp_op;

extern const char tp_op_list[]; /* "Activation:1,...": configure's query=ops */

/* Checks op_name with its attributes (MXNet's strings) on float32 tensors of
 * the given shapes into *op: MX_ACC_ERR_UNSUPPORTED for what the template
 * does not run, MX_ACC_ERR_INVALID_ARG for what is inconsistent. Both modes
 * ask it, so that supportedOps, loadModel and accGetExecutor agree. */
int tp_op_prepare(const char *op_name, const char *const *keys, const char *const *vals,
                  size_t num_attrs, int num_inputs, const acc_shape *inputs,
                  const acc_shape *output, tp_op *op);
/* Runs op. The output never shares memory with an input: the host gives an
 * executor fresh tensors (mxnet_acc.h), and a model keeps a value per node. */
void tp_op_run(const tp_op *op, const float *const *inputs, float *output);

#endif /* TEMPLATE_TEMPLATE_H_ */
