/*
 * The objects behind the handles of cnml.h, shared by cnml.c (the API) and
 * compiler.c (which reads them). Not part of the public API.
 */
#ifndef MLU_SIM_CNML_IMPL_H_
#define MLU_SIM_CNML_IMPL_H_

#include <stdint.h>

#include "card.h"
#include "cnml.h"
#include "isa.h"

/* Largest element count of one tensor: keeps every offset and size the
 * compiler computes far from overflow. */
#define MLU_MAX_TENSOR_ELEMENTS ((int64_t)1 << 40)

struct cnmlTensor {
  cnmlTensorType_t type;
  int dtype; /* cnmlDataType_t */
  int ndim;
  int64_t dims[MLU_MAX_NDIM];
  int64_t count;
  float *data;     /* CNML_FILTER / CNML_CONST: bound values, in fp32 (NULL until bound) */
  mlu_card *card;  /* the card of the last compiled op using it (cnmlMallocBuffer) */
};

struct cnmlCpuTensor {
  cnmlTensorType_t type;
  int dtype;
  int ndim;
  int64_t dims[MLU_MAX_NDIM];
  int64_t count;
};

struct cnmlConvOpParam {
  int64_t sh, sw, dh, dw, ph, pw;
};

struct cnmlPoolOpParam {
  int64_t kh, kw, sh, sw, ph, pw;
  int mode;              /* cnmlPoolMode_t */
  int full;              /* CNML_POOL_KFULL */
  int count_include_pad;
};

typedef enum mlu_op_kind {
  MLU_KIND_CONV,
  MLU_KIND_ACTIVE,
  MLU_KIND_CLIP,
  MLU_KIND_POOL,
  MLU_KIND_MLP,
  MLU_KIND_BATCHNORM,
  MLU_KIND_ADD,
  MLU_KIND_MULT,
  MLU_KIND_SOFTMAX,
  MLU_KIND_CONCAT,
  MLU_KIND_RESHAPE
} mlu_op_kind;

struct cnmlBaseOp {
  mlu_op_kind kind;
  int num_inputs;                        /* data (CNML_TENSOR) inputs */
  cnmlTensor_t inputs[MLU_MAX_OP_INPUTS];
  cnmlTensor_t output;
  cnmlTensor_t filter, bias;             /* CONV, MLP */
  cnmlTensor_t mean, var, gamma, beta;   /* BATCHNORM (gamma may be NULL) */
  union {
    struct {
      struct cnmlConvOpParam geometry;
      int64_t groups;
    } conv;
    int act;                             /* ACTIVE: mlu_act */
    struct {
      float lo, hi;
    } clip;
    struct cnmlPoolOpParam pool;
    double eps;                          /* BATCHNORM */
    struct {
      int axis;                          /* resolved, in [0, ndim) */
      double temperature;
    } softmax;
    int axis;                            /* CONCAT, resolved */
  } p;
  struct cnmlFusionOp *fusion;           /* the FusionOp it was fused into, or NULL */
  mlu_program *program;                  /* after cnmlCompileBaseOp */
};

struct cnmlFusionOp {
  cnmlBaseOp_t *ops;
  size_t num_ops, capacity;
  int io_set;
  int num_inputs, num_outputs;
  cnmlTensor_t inputs[MLU_MAX_FUSION_IO];
  cnmlTensor_t outputs[MLU_MAX_FUSION_IO];
  mlu_program *program;                  /* after cnmlCompileFusionOp */
};

#endif /* MLU_SIM_CNML_IMPL_H_ */
