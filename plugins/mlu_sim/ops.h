/*
 * The MXNet operators the MLU runs, and how each becomes a CNML BaseOp:
 * for each operator MXNet's name and aliases, the version of its semantics
 * implemented (mxnet_acc.h section 1), attribute parsing with MXNet's
 * defaults, the checks that decide support (fp32 and fp16 only, 2-D
 * convolution and pooling, NCHW, ...), and the builder that creates the
 * BaseOp with its FILTER/CONST parameter tensors.
 *
 * Supported: Convolution (groups, stride, pad, dilate), Pooling (max/avg,
 * valid/full, count_include_pad, global), FullyConnected (flatten or not),
 * Activation (relu, sigmoid, tanh), clip, BatchNorm (inference, fix_gamma,
 * axis 1), elemwise_add, elemwise_mul, softmax, Concat, Reshape, Flatten.
 * Everything else is unsupported and runs on the host's CPU.
 */
#ifndef MLU_SIM_OPS_H_
#define MLU_SIM_OPS_H_

#include <stddef.h>
#include <stdint.h>

#include "cnml.h"
#include "graph.h"

/* Most inputs of one operator node (Concat's num_args). */
#define MLU_NODE_MAX_INPUTS MLU_MAX_OP_INPUTS
/* Most FILTER/CONST inputs of one operator (BatchNorm's four). */
#define MLU_NODE_MAX_PARAMS 4

typedef enum mlu_mx_kind {
  MLU_MX_CONV,
  MLU_MX_POOL,
  MLU_MX_FC,
  MLU_MX_ACT,
  MLU_MX_CLIP,
  MLU_MX_BATCHNORM,
  MLU_MX_ADD,
  MLU_MX_MUL,
  MLU_MX_SOFTMAX,
  MLU_MX_CONCAT,
  MLU_MX_RESHAPE
} mlu_mx_kind;

typedef struct mlu_mx_op {
  const char *name;
  const char *aliases[4]; /* NULL-ended */
  int version;
  int kind;               /* mlu_mx_kind */
} mlu_mx_op;

/* One operator node resolved: its attributes parsed and its shapes and
 * dtypes checked. */
typedef struct mlu_node_spec {
  const mlu_mx_op *op;
  int num_inputs;
  acc_shape in_shapes[MLU_NODE_MAX_INPUTS];
  int32_t in_dtypes[MLU_NODE_MAX_INPUTS];
  acc_shape out_shape;
  int32_t out_dtype;
  union {
    struct {
      int64_t kernel[2], stride[2], pad[2], dilate[2], num_filter, groups;
      int no_bias;
    } conv;
    struct {
      int64_t kernel[2], stride[2], pad[2];
      int mode, full, count_include_pad;
    } pool;
    struct {
      int no_bias;
    } fc;
    int act;  /* cnmlActiveFunction_t */
    struct {
      double lo, hi;
    } clip;
    struct {
      double eps;
      int fix_gamma;
    } bn;
    struct {
      int axis;
      double temperature;
    } softmax;
    int concat_axis;
  } u;
} mlu_node_spec;

size_t mlu_num_ops(void);
const mlu_mx_op *mlu_op_at(size_t index);

/* Resolves an operator node: the operator and its "__op_version__" must be
 * known, every dtype supported, the attributes valid, and out_shapes what
 * MXNet infers. MX_ACC_ERR_UNSUPPORTED for anything the MLU does not run,
 * MX_ACC_ERR_INVALID_ARG for inconsistent shapes or malformed attributes;
 * what names the node in messages. */
int mlu_resolve_node(const char *what, const char *op_name, const char *const *keys,
                     const char *const *vals, size_t num_attrs, const acc_shape *in_shapes,
                     const int32_t *in_dtypes, int num_inputs, const acc_shape *out_shapes,
                     const int32_t *out_dtypes, int num_outputs, mlu_node_spec *spec);

/* 1 if input index of an operator of kind (mlu_mx_kind) is a parameter (a
 * CNML_FILTER or CNML_CONST whose value compilation folds in), 0 if it is
 * data (a CNML_TENSOR). */
int mlu_is_param_input(int kind, int index);

/* A node turned into a BaseOp: the op, its parameter tensors (with the node
 * input each comes from) and the parameter objects it was created with. */
typedef struct mlu_built_node {
  cnmlBaseOp_t op;
  int num_params;
  cnmlTensor_t params[MLU_NODE_MAX_PARAMS];
  int param_input[MLU_NODE_MAX_PARAMS];
  cnmlConvOpParam_t conv_param;
  cnmlPoolOpParam_t pool_param;
} mlu_built_node;

/* Creates the BaseOp of spec. data[i] is the CNML_TENSOR of data input i
 * (NULL for parameter inputs), output the output's. param_data[i], when
 * not NULL, is host data (in_dtypes[i]) bound to parameter input i.
 * On failure nothing is left allocated. */
int mlu_build_node(const mlu_node_spec *spec, const cnmlTensor_t *data, cnmlTensor_t output,
                   const void *const *param_data, mlu_built_node *built);

/* Binds new host data (dtype, shape: the node input's) to parameter k of a
 * built node; compiling again picks it up. */
int mlu_bind_param(mlu_built_node *built, int k, const void *data, int32_t dtype,
                   const acc_shape *shape);

void mlu_free_node(mlu_built_node *built);

/* The CNML data type of an ABI dtype (kFloat32 / kFloat16), or -1. */
int mlu_cnml_dtype(int32_t dtype);

#endif /* MLU_SIM_OPS_H_ */
