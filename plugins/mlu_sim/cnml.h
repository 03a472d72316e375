/*
 * The CNML/CNRT-like runtime of the simulated MLU, named and shaped after
 * the APIs of Cambricon's MXNet integration proposal
 * (../shared/seeds/cnml-cnrt-mxnet-integration.txt):
 *
 *   1. Create tensor descriptors: cnmlCreateTensor (MLU side: CNML_TENSOR
 *      for data, CNML_FILTER / CNML_CONST for read-only parameters) and
 *      cnmlCreateCpuTensor (host side). Bind parameter data with
 *      cnmlBindConstData.
 *   2. Create BaseOps (cnmlCreateConvOp, cnmlCreateActiveOp, ...).
 *   3. Either compile each BaseOp (cnmlCompileBaseOp: imperative mode) or
 *      put several into a FusionOp (cnmlCreateFusionOp, cnmlFuseOp,
 *      cnmlSetFusionIO) and compile that (cnmlCompileFusionOp: symbolic
 *      mode). Compiling produces an instruction stream for the simulated
 *      machine (isa.h) and transforms FILTER/CONST data (filters are
 *      re-laid out for the MAC arrays; a fusion folds batch norms into the
 *      preceding convolution's weights).
 *   4. Only now can device buffers for the op's CNML_TENSOR tensors exist:
 *      cnmlMallocBuffer fails for a tensor no compiled op uses. Copy data
 *      with cnmlMemcpyTensorToDevice / cnmlMemcpyTensorToHost (converting
 *      between the host and MLU data types, e.g. fp32 -> fp16).
 *   5. cnmlCompute*Forward only enqueues a launch on a cnrtQueue; each queue
 *      runs FIFO on its own worker, queues run in parallel, and
 *      cnrtSyncQueue blocks until the queue drains and reports any failure.
 *
 * Differences from the real libraries, all deliberate:
 *   - There is no implicit "current device": cards are explicit handles
 *     (cnrtCreateDevice) and compile calls name the card, so a process can
 *     drive several cards from several threads with no global state.
 *   - cnmlBindConstData copies the data at once (the caller may free it
 *     right away); binding again and recompiling picks up new values.
 *   - Tensors have up to MLU_MAX_NDIM dimensions in row-major order rather
 *     than the 4-D NCHW/NHWC descriptors of CNML.
 *   - Simulator extensions are prefixed cnrtSim / cnmlSim: parameters and
 *     statistics of the cost model, host functions on a queue (tests use
 *     them to observe ordering and inject failures), program introspection.
 *
 * Status codes share their values with mxnet_acc.h's MX_ACC_* codes, so a
 * failure keeps its meaning through the plugin's layers. Every failing call
 * records a message, read with cnmlGetLastError() (per thread).
 *
 * Threads: a card and a queue may be used from any thread. Tensor, op and
 * fusion-op objects are not synchronized: one thread at a time per object,
 * as with the real CNML. Objects must outlive the ops that use them until
 * those ops are destroyed; a compiled program is self-contained, so queued
 * launches stay valid when their op is destroyed or recompiled.
 */
#ifndef MLU_SIM_CNML_H_
#define MLU_SIM_CNML_H_

#include <stddef.h>
#include <stdint.h>

#include "cost.h"
#include "isa.h"

#define MLU_MAX_NDIM 8
/* Most data inputs of one BaseOp (Concat) and of one FusionOp. */
#define MLU_MAX_OP_INPUTS 64
#define MLU_MAX_FUSION_IO 256

typedef enum cnmlStatus_t {
  CNML_STATUS_SUCCESS = 0,
  CNML_STATUS_INVALIDARG = 1,  /* NULL pointer, shape mismatch, foreign pointer */
  CNML_STATUS_UNSUPPORTED = 2, /* a parameter the MLU cannot run */
  CNML_STATUS_NOMEMORY = 3,    /* host or device memory exhausted */
  CNML_STATUS_NOTFOUND = 5,    /* freeing memory that is not allocated */
  CNML_STATUS_DEVICE = 6,      /* a queued task failed on the device */
  CNML_STATUS_STATE = 7,       /* wrong state: not compiled, already fused, ... */
  CNML_STATUS_INTERNAL = 8
} cnmlStatus_t;

typedef enum cnmlTensorType_t { CNML_TENSOR = 0, CNML_FILTER = 1, CNML_CONST = 2 } cnmlTensorType_t;

/* CNML_DATA_INT8 is reserved for quantized models and refused for now. */
typedef enum cnmlDataType_t {
  CNML_DATA_FLOAT32 = MLU_DT_FLOAT32,
  CNML_DATA_FLOAT16 = MLU_DT_FLOAT16,
  CNML_DATA_INT8 = MLU_DT_INT8
} cnmlDataType_t;

typedef enum cnmlActiveFunction_t {
  CNML_ACTIVE_NONE = MLU_ACT_NONE,
  CNML_ACTIVE_RELU = MLU_ACT_RELU,
  CNML_ACTIVE_SIGMOID = MLU_ACT_SIGMOID,
  CNML_ACTIVE_TANH = MLU_ACT_TANH
} cnmlActiveFunction_t;

typedef enum cnmlPoolMode_t {
  CNML_POOL_MAX = MLU_POOL_MAX,
  CNML_POOL_AVG = MLU_POOL_AVG
} cnmlPoolMode_t;

/* Output size per axis: KVALID floor((x + 2p - k) / s) + 1 (MXNet "valid"),
 * KFULL ceil((x + 2p - k) / s) + 1 (MXNet "full"). */
typedef enum cnmlPoolStrategyMode_t {
  CNML_POOL_KVALID = 0,
  CNML_POOL_KFULL = 1
} cnmlPoolStrategyMode_t;

typedef enum cnrtMemTransDir_t {
  CNRT_MEM_TRANS_DIR_HOST2DEV = 0,
  CNRT_MEM_TRANS_DIR_DEV2HOST = 1,
  CNRT_MEM_TRANS_DIR_DEV2DEV = 2
} cnrtMemTransDir_t;

typedef struct mlu_card *cnrtDev_t;
typedef struct mlu_queue *cnrtQueue_t;
typedef struct cnmlTensor *cnmlTensor_t;
typedef struct cnmlCpuTensor *cnmlCpuTensor_t;
typedef struct cnmlBaseOp *cnmlBaseOp_t;
typedef struct cnmlFusionOp *cnmlFusionOp_t;
typedef struct cnmlConvOpParam *cnmlConvOpParam_t;
typedef struct cnmlPoolOpParam *cnmlPoolOpParam_t;

/* The calling thread's message for its last failed call, "" if none. */
const char *cnmlGetLastError(void);

/* ---- cards and device memory (CNRT) ------------------------------------------ */

/* A simulated card with the given parameters (NULL: mlu_params_default()). */
cnmlStatus_t cnrtCreateDevice(cnrtDev_t *dev, int ordinal, const mlu_params *params);
/* CNML_STATUS_STATE while memory is still allocated on the card. */
cnmlStatus_t cnrtDestroyDevice(cnrtDev_t dev);

cnmlStatus_t cnrtMalloc(cnrtDev_t dev, void **ptr, size_t bytes);
cnmlStatus_t cnrtFree(cnrtDev_t dev, void *ptr);
/* Synchronous copy of bytes; device pointers must lie in live memory of dev. */
cnmlStatus_t cnrtMemcpy(cnrtDev_t dev, void *dst, const void *src, size_t bytes,
                        cnrtMemTransDir_t direction);

/* ---- queues (CNRT) -------------------------------------------------------------- */

cnmlStatus_t cnrtCreateQueue(cnrtQueue_t *queue, cnrtDev_t dev);
/* Blocks until every task enqueued so far has run; returns the first
 * failure among them (CNML_STATUS_DEVICE etc.) with its message. */
cnmlStatus_t cnrtSyncQueue(cnrtQueue_t queue);
/* Drains the queue, then destroys it. */
cnmlStatus_t cnrtDestroyQueue(cnrtQueue_t queue);

/* ---- tensors (CNML) ---------------------------------------------------------------- */

cnmlStatus_t cnmlCreateTensor(cnmlTensor_t *tensor, cnmlTensorType_t type, cnmlDataType_t dtype,
                              const int64_t *shape, int ndim);
cnmlStatus_t cnmlCreateCpuTensor(cnmlCpuTensor_t *tensor, cnmlTensorType_t type,
                                 cnmlDataType_t dtype, const int64_t *shape, int ndim);
cnmlStatus_t cnmlDestroyTensor(cnmlTensor_t *tensor);
cnmlStatus_t cnmlDestroyCpuTensor(cnmlCpuTensor_t *tensor);

/* Bytes of the tensor's data in its MLU data type. */
cnmlStatus_t cnmlGetTensorSize(cnmlTensor_t tensor, size_t *bytes);

/* Copies data (element type and count of cpu_tensor) into a CNML_FILTER or
 * CNML_CONST tensor; compiling an op that uses it transforms it. */
cnmlStatus_t cnmlBindConstData(cnmlTensor_t tensor, cnmlCpuTensor_t cpu_tensor, const void *data);

/* Device memory for a CNML_TENSOR, on the card that compiled an op using
 * it: CNML_STATUS_STATE before that. */
cnmlStatus_t cnmlMallocBuffer(cnmlTensor_t tensor, void **ptr);
cnmlStatus_t cnmlFreeBuffer(cnmlTensor_t tensor, void *ptr);

/* Host <-> device copies of one tensor, converting the element type of
 * cpu_tensor to the tensor's and back. Element counts must match. */
cnmlStatus_t cnmlMemcpyTensorToDevice(cnmlCpuTensor_t cpu_tensor, const void *host,
                                      cnmlTensor_t tensor, void *device);
cnmlStatus_t cnmlMemcpyTensorToHost(cnmlTensor_t tensor, const void *device,
                                    cnmlCpuTensor_t cpu_tensor, void *host);

/* ---- BaseOps (CNML) ------------------------------------------------------------------- */

cnmlStatus_t cnmlCreateConvOpParam(cnmlConvOpParam_t *param, int stride_h, int stride_w,
                                   int dilation_h, int dilation_w, int pad_h, int pad_w);
cnmlStatus_t cnmlDestroyConvOpParam(cnmlConvOpParam_t *param);

/* input (N, C, H, W), filter CNML_FILTER (F, C / groups, kh, kw), bias
 * CNML_CONST (F) or NULL, output (N, F, OH, OW). */
cnmlStatus_t cnmlCreateConvOp(cnmlBaseOp_t *op, cnmlConvOpParam_t param, cnmlTensor_t input,
                              cnmlTensor_t output, cnmlTensor_t filter, cnmlTensor_t bias);
cnmlStatus_t cnmlCreateConvGroupOp(cnmlBaseOp_t *op, cnmlConvOpParam_t param, cnmlTensor_t input,
                                   cnmlTensor_t output, cnmlTensor_t filter, cnmlTensor_t bias,
                                   int groups);

cnmlStatus_t cnmlCreateActiveOp(cnmlBaseOp_t *op, cnmlActiveFunction_t function,
                                cnmlTensor_t input, cnmlTensor_t output);
/* y = x > upper ? upper : (x < lower ? lower : x) (ReLU6 is 0 .. 6). */
cnmlStatus_t cnmlCreateClipOp(cnmlBaseOp_t *op, cnmlTensor_t input, cnmlTensor_t output,
                              double lower, double upper);

cnmlStatus_t cnmlCreatePoolOpParam(cnmlPoolOpParam_t *param, int window_h, int window_w,
                                   int stride_h, int stride_w, int pad_h, int pad_w,
                                   cnmlPoolMode_t mode, cnmlPoolStrategyMode_t strategy,
                                   int count_include_pad);
cnmlStatus_t cnmlDestroyPoolOpParam(cnmlPoolOpParam_t *param);
cnmlStatus_t cnmlCreatePoolOp(cnmlBaseOp_t *op, cnmlPoolOpParam_t param, cnmlTensor_t input,
                              cnmlTensor_t output);

/* Fully connected ("multi-layer perceptron") layer: filter (M, K); the
 * input is read as rows of K elements and the output as rows of M. */
cnmlStatus_t cnmlCreateMlpOp(cnmlBaseOp_t *op, cnmlTensor_t input, cnmlTensor_t output,
                             cnmlTensor_t filter, cnmlTensor_t bias);

/* Inference batch norm along axis 1: (x - mean) / sqrt(var + eps) * gamma +
 * beta, all four CNML_CONST of (C); gamma NULL means 1 (fix_gamma). */
cnmlStatus_t cnmlCreateBatchNormOp(cnmlBaseOp_t *op, cnmlTensor_t input, cnmlTensor_t output,
                                   cnmlTensor_t mean, cnmlTensor_t var, cnmlTensor_t gamma,
                                   cnmlTensor_t beta, double eps);

cnmlStatus_t cnmlCreateAddOp(cnmlBaseOp_t *op, cnmlTensor_t input_a, cnmlTensor_t input_b,
                             cnmlTensor_t output);
cnmlStatus_t cnmlCreateMultOp(cnmlBaseOp_t *op, cnmlTensor_t input_a, cnmlTensor_t input_b,
                              cnmlTensor_t output);

/* Softmax of input / temperature along axis (negative counts from the end). */
cnmlStatus_t cnmlCreateSoftmaxOp(cnmlBaseOp_t *op, int axis, double temperature,
                                 cnmlTensor_t input, cnmlTensor_t output);

cnmlStatus_t cnmlCreateConcatOp(cnmlBaseOp_t *op, int axis, const cnmlTensor_t *inputs,
                                int num_inputs, cnmlTensor_t output);

/* Same elements, another shape (Reshape, Flatten). Free inside a FusionOp. */
cnmlStatus_t cnmlCreateReshapeOp(cnmlBaseOp_t *op, cnmlTensor_t input, cnmlTensor_t output);

cnmlStatus_t cnmlDestroyBaseOp(cnmlBaseOp_t *op);

/* JIT-compiles one BaseOp for dev (again after new cnmlBindConstData). */
cnmlStatus_t cnmlCompileBaseOp(cnmlBaseOp_t op, cnrtDev_t dev);

/* Enqueues one launch of a compiled BaseOp: device pointers of its data
 * inputs in creation order and of its output. */
cnmlStatus_t cnmlComputeBaseOpForward(cnmlBaseOp_t op, const void *const *inputs, int num_inputs,
                                      void *output, cnrtQueue_t queue);

/* The typed forms of cnmlComputeBaseOpForward, checking the op's kind. */
cnmlStatus_t cnmlComputeConvOpForward(cnmlBaseOp_t op, const void *input, void *output,
                                      cnrtQueue_t queue);
cnmlStatus_t cnmlComputeActiveOpForward(cnmlBaseOp_t op, const void *input, void *output,
                                        cnrtQueue_t queue);
cnmlStatus_t cnmlComputeClipOpForward(cnmlBaseOp_t op, const void *input, void *output,
                                      cnrtQueue_t queue);
cnmlStatus_t cnmlComputePoolOpForward(cnmlBaseOp_t op, const void *input, void *output,
                                      cnrtQueue_t queue);
cnmlStatus_t cnmlComputeMlpOpForward(cnmlBaseOp_t op, const void *input, void *output,
                                     cnrtQueue_t queue);
cnmlStatus_t cnmlComputeBatchNormOpForward(cnmlBaseOp_t op, const void *input, void *output,
                                           cnrtQueue_t queue);
cnmlStatus_t cnmlComputeAddOpForward(cnmlBaseOp_t op, const void *input_a, const void *input_b,
                                     void *output, cnrtQueue_t queue);
cnmlStatus_t cnmlComputeMultOpForward(cnmlBaseOp_t op, const void *input_a, const void *input_b,
                                      void *output, cnrtQueue_t queue);
cnmlStatus_t cnmlComputeSoftmaxOpForward(cnmlBaseOp_t op, const void *input, void *output,
                                         cnrtQueue_t queue);
cnmlStatus_t cnmlComputeConcatOpForward(cnmlBaseOp_t op, const void *const *inputs,
                                        int num_inputs, void *output, cnrtQueue_t queue);
cnmlStatus_t cnmlComputeReshapeOpForward(cnmlBaseOp_t op, const void *input, void *output,
                                         cnrtQueue_t queue);

/* ---- FusionOps (CNML) ---------------------------------------------------------------- */

cnmlStatus_t cnmlCreateFusionOp(cnmlFusionOp_t *op);
/* Adds a BaseOp (not compiled on its own, not in another FusionOp). The
 * FusionOp refers to it until the FusionOp is destroyed. */
cnmlStatus_t cnmlFuseOp(cnmlBaseOp_t op, cnmlFusionOp_t fusion);
/* The FusionOp's inputs (tensors no fused op produces) and outputs, in the
 * order Forward takes their pointers. */
cnmlStatus_t cnmlSetFusionIO(cnmlFusionOp_t fusion, const cnmlTensor_t *inputs, int num_inputs,
                             const cnmlTensor_t *outputs, int num_outputs);
/* Compiles the whole subgraph into one launch for dev (again after new
 * cnmlBindConstData on any fused op's parameters). */
cnmlStatus_t cnmlCompileFusionOp(cnmlFusionOp_t fusion, cnrtDev_t dev);
cnmlStatus_t cnmlComputeFusionOpForward(cnmlFusionOp_t fusion, const void *const *inputs,
                                        int num_inputs, void *const *outputs, int num_outputs,
                                        cnrtQueue_t queue);
cnmlStatus_t cnmlDestroyFusionOp(cnmlFusionOp_t *fusion);

/* ---- simulator extensions ------------------------------------------------------------ */

cnmlStatus_t cnrtSimGetParams(cnrtDev_t dev, mlu_params *params);
/* Changing dram_bytes needs a card with nothing allocated (CNML_STATUS_STATE). */
cnmlStatus_t cnrtSimSetParams(cnrtDev_t dev, const mlu_params *params);
cnmlStatus_t cnrtSimGetStats(cnrtDev_t dev, mlu_stats *stats);
cnmlStatus_t cnrtSimResetStats(cnrtDev_t dev);
/* Live allocations on dev and their bytes (all tags). */
cnmlStatus_t cnrtSimMemoryInUse(cnrtDev_t dev, size_t *allocations, uint64_t *bytes);

/* Enqueues fn(user) as a task: its nonzero return value is a failure that
 * cnrtSyncQueue reports (tests use it to observe order and inject errors). */
cnmlStatus_t cnrtSimInvokeHostFunc(cnrtQueue_t queue, int (*fn)(void *user), void *user);

/* What compiling produced (CNML_STATUS_STATE before compiling). */
cnmlStatus_t cnmlSimGetBaseOpInfo(cnmlBaseOp_t op, mlu_program_info *info);
cnmlStatus_t cnmlSimGetFusionOpInfo(cnmlFusionOp_t fusion, mlu_program_info *info);

/* Offline models (model_file.c). Get: the compiled program, with one
 * reference for the caller (CNML_STATUS_STATE before compiling). Set: gives
 * a FusionOp whose ops are fused and I/O set a program made elsewhere
 * instead of compiling it: the program must be for dev, have the FusionOp's
 * I/O count and each slot the bytes of its tensor (CNML_STATUS_INVALIDARG
 * otherwise); on success the FusionOp takes over the caller's reference. */
cnmlStatus_t cnmlSimGetFusionOpProgram(cnmlFusionOp_t fusion, mlu_program **program);
cnmlStatus_t cnmlSimSetFusionOpProgram(cnmlFusionOp_t fusion, cnrtDev_t dev,
                                       mlu_program *program);

#endif /* MLU_SIM_CNML_H_ */
