/*
 * template: the smallest complete acc-host plugin, to copy and rename
 * (README.md). Five float32 operators in plain loops, on two simulated
 * devices whose memory is host memory, in both modes of mxnet_acc.h. Each
 * source exports the entry points of its concern:
 *
 *   template.c  identification, errors, configure(), executors (imperative)
 *   memory.c    mx_alloc .. copyFromAcc: one allocation table per device
 *   model.c     supportedOps .. infer: graphs of the operators (symbolic)
 *   ops.c       the operators: attribute and shape checks, loops
 *
 * Every entry point clears the calling thread's error message, checks what
 * it is given, and fails through acc_fail() (plugins/common/status.h),
 * which keeps the message behind accGetLastError() per thread. Also from
 * plugins/common (the SDK, compiled in): graph.h parses the graph JSON,
 * tensor.h checks MXTensors, attrs.h reads MXNet's attribute strings.
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
/* MX_ACC_OK if [ptr, ptr + bytes) lies in one live allocation of dev_id. */
int tp_mem_check(int dev_id, const void *ptr, size_t bytes, const char *what);
/* Checks a float32 tensor of shape from the host, in host memory (if
 * allow_host) or memory of dev_id; *data (out) is its first element. */
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

extern const char tp_op_list[]; /* "Activation:1,...": query=ops */

/* Checks op_name with its attributes (MXNet's strings) on float32 tensors
 * of the given shapes into *op: MX_ACC_ERR_UNSUPPORTED for what the
 * template does not run, MX_ACC_ERR_INVALID_ARG for what is inconsistent. */
int tp_op_prepare(const char *op_name, const char *const *keys, const char *const *vals,
                  size_t num_attrs, int num_inputs, const acc_shape *inputs,
                  const acc_shape *output, tp_op *op);
/* Runs op; output must not overlap the inputs. */
void tp_op_run(const tp_op *op, const float *const *inputs, float *output);

#endif /* TEMPLATE_TEMPLATE_H_ */
