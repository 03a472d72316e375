/* template: the smallest complete acc-host plugin, to copy and rename (README.md).
 * template.c holds the entry points; ops.c the operators both modes run. */
#ifndef TEMPLATE_TEMPLATE_H_
#define TEMPLATE_TEMPLATE_H_

#include "graph.h" /* acc_node, acc_shape */

#define TP_NAME "template" /* the context type: mx.template(0) */
#define TP_VERSION "1.0.0"
#define TP_NUM_DEVICES 2

enum { TP_MAX_INPUTS = 3 };
typedef enum tp_kind { TP_CONV, TP_RELU, TP_ADD, TP_FLATTEN } tp_kind;

typedef struct tp_op { /* one operator, checked and ready to run */
  tp_kind kind;
  int num_inputs; /* Convolution: 3 with a bias */
  acc_shape in[TP_MAX_INPUTS], out;
  int64_t kernel[2], stride[2], pad[2]; /* Convolution: (y, x) */
} tp_op;

extern const char tp_op_list[]; /* "Activation:1,...": configure's query=ops */

/* Checks node (attributes as MXNet writes them) on float32 tensors of the given
 * shapes into *op: MX_ACC_ERR_UNSUPPORTED for what the template does not run (the
 * host runs it on the CPU), MX_ACC_ERR_INVALID_ARG for what is inconsistent. Both
 * modes ask it, so that supportedOps, loadModel and accGetExecutor agree. */
int tp_op_prepare(const acc_node *node, int num_inputs, const acc_shape *inputs,
                  const acc_shape *output, tp_op *op);
/* Runs op. The output never shares memory with an input: the host gives an
 * executor fresh tensors (mxnet_acc.h), and a model keeps a value per node. */
void tp_op_run(const tp_op *op, const float *const *inputs, float *output);

#endif /* TEMPLATE_TEMPLATE_H_ */
