/*
 * The CNML/CNRT-like API (cnml.h): argument checks, object lifetimes and
 * delegation to the card (card.c), the compiler (compiler.c), the machine
 * (machine.c) and the queues (queue.c).
 */
#include "cnml.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "card.h"
#include "cnml_impl.h"
#include "compiler.h"
#include "half.h"
#include "machine.h"
#include "mxnet_acc.h"
#include "queue.h"
#include "status.h"

/* The status codes are the ABI's, so failures cross layers unchanged. */
_Static_assert(CNML_STATUS_INVALIDARG == MX_ACC_ERR_INVALID_ARG, "status codes");
_Static_assert(CNML_STATUS_UNSUPPORTED == MX_ACC_ERR_UNSUPPORTED, "status codes");
_Static_assert(CNML_STATUS_NOMEMORY == MX_ACC_ERR_OUT_OF_MEMORY, "status codes");
_Static_assert(CNML_STATUS_NOTFOUND == MX_ACC_ERR_NOT_FOUND, "status codes");
_Static_assert(CNML_STATUS_DEVICE == MX_ACC_ERR_DEVICE, "status codes");
_Static_assert(CNML_STATUS_STATE == MX_ACC_ERR_STATE, "status codes");
_Static_assert(CNML_STATUS_INTERNAL == MX_ACC_ERR_INTERNAL, "status codes");

#define FAIL(code, ...) ((cnmlStatus_t)acc_fail((code), __VA_ARGS__))
#define STATUS(expression) ((cnmlStatus_t)(expression))

const char *cnmlGetLastError(void) { return acc_last_error(); }

/* ---- cards and device memory -------------------------------------------------------- */

cnmlStatus_t cnrtCreateDevice(cnrtDev_t *dev, int ordinal, const mlu_params *params) {
  if (dev == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnrtCreateDevice: dev is NULL");
  mlu_params chosen = params != NULL ? *params : mlu_params_default();
  int status = mlu_params_validate(&chosen);
  if (status != MX_ACC_OK) return STATUS(status);
  return STATUS(mlu_card_create(ordinal, &chosen, dev));
}

cnmlStatus_t cnrtDestroyDevice(cnrtDev_t dev) { return STATUS(mlu_card_destroy(dev)); }

cnmlStatus_t cnrtMalloc(cnrtDev_t dev, void **ptr, size_t bytes) {
  if (dev == NULL || ptr == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnrtMalloc: NULL argument");
  return STATUS(mlu_card_alloc(dev, bytes, MLU_MEM_USER, ptr));
}

cnmlStatus_t cnrtFree(cnrtDev_t dev, void *ptr) {
  if (dev == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnrtFree: dev is NULL");
  return STATUS(mlu_card_free(dev, ptr, MLU_MEM_USER));
}

cnmlStatus_t cnrtMemcpy(cnrtDev_t dev, void *dst, const void *src, size_t bytes,
                        cnrtMemTransDir_t direction) {
  if (dev == NULL || (bytes > 0 && (dst == NULL || src == NULL))) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnrtMemcpy: NULL argument");
  }
  if (direction != CNRT_MEM_TRANS_DIR_HOST2DEV && direction != CNRT_MEM_TRANS_DIR_DEV2HOST &&
      direction != CNRT_MEM_TRANS_DIR_DEV2DEV) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnrtMemcpy: unknown direction %d", (int)direction);
  }
  if (bytes == 0) return CNML_STATUS_SUCCESS;
  int status = MX_ACC_OK;
  if (direction != CNRT_MEM_TRANS_DIR_HOST2DEV) {
    status = mlu_card_check(dev, src, bytes, "cnrtMemcpy source");
  }
  if (status == MX_ACC_OK && direction != CNRT_MEM_TRANS_DIR_DEV2HOST) {
    status = mlu_card_check(dev, dst, bytes, "cnrtMemcpy destination");
  }
  if (status != MX_ACC_OK) return STATUS(status);
  memmove(dst, src, bytes);
  if (direction != CNRT_MEM_TRANS_DIR_DEV2DEV) mlu_card_count_copy(dev, bytes);
  return CNML_STATUS_SUCCESS;
}

/* ---- queues ------------------------------------------------------------------------------ */

cnmlStatus_t cnrtCreateQueue(cnrtQueue_t *queue, cnrtDev_t dev) {
  if (queue == NULL || dev == NULL) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnrtCreateQueue: NULL argument");
  }
  return STATUS(mlu_queue_create(dev, queue));
}

cnmlStatus_t cnrtSyncQueue(cnrtQueue_t queue) {
  if (queue == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnrtSyncQueue: queue is NULL");
  return STATUS(mlu_queue_sync(queue));
}

cnmlStatus_t cnrtDestroyQueue(cnrtQueue_t queue) {
  mlu_queue_destroy(queue);
  return CNML_STATUS_SUCCESS;
}

typedef struct host_call {
  int (*fn)(void *user);
  void *user;
} host_call;

static int run_host_call(void *arg, mlu_cluster *cluster) {
  (void)cluster;
  host_call *call = arg;
  int result = call->fn(call->user);
  if (result != 0) return acc_fail(MX_ACC_ERR_DEVICE, "host function returned %d", result);
  return MX_ACC_OK;
}

cnmlStatus_t cnrtSimInvokeHostFunc(cnrtQueue_t queue, int (*fn)(void *user), void *user) {
  if (queue == NULL || fn == NULL) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnrtSimInvokeHostFunc: NULL argument");
  }
  host_call *call = malloc(sizeof *call);
  if (call == NULL) return FAIL(CNML_STATUS_NOMEMORY, "cnrtSimInvokeHostFunc");
  *call = (host_call){fn, user};
  return STATUS(mlu_queue_push(queue, run_host_call, free, call));
}

/* ---- tensors -------------------------------------------------------------------------------- */

static int check_dtype(int dtype, const char *call) {
  if (dtype == CNML_DATA_FLOAT32 || dtype == CNML_DATA_FLOAT16) return MX_ACC_OK;
  if (dtype == CNML_DATA_INT8) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: int8 tensors are reserved for quantized models",
                    call);
  }
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: unknown data type %d", call, dtype);
}

/* Checks a shape and computes its element count. */
static int check_shape(const int64_t *shape, int ndim, const char *call, int64_t *count) {
  if (ndim < 0 || ndim > MLU_MAX_NDIM || (ndim > 0 && shape == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %d dimensions (0 to %d, shape non-NULL)", call,
                    ndim, MLU_MAX_NDIM);
  }
  int64_t total = 1;
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] < 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: negative extent", call);
    if (shape[d] > 0 && total > MLU_MAX_TENSOR_ELEMENTS / shape[d]) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: more than 2^40 elements", call);
    }
    total *= shape[d];
  }
  *count = total;
  return MX_ACC_OK;
}

/* The fields both kinds of descriptor share. */
static int describe(cnmlTensorType_t type, int dtype, const int64_t *shape, int ndim,
                    const char *call, int *ndim_out, int64_t *dims, int64_t *count) {
  if (type != CNML_TENSOR && type != CNML_FILTER && type != CNML_CONST) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: unknown tensor type %d", call, (int)type);
  }
  int status = check_dtype(dtype, call);
  if (status == MX_ACC_OK) status = check_shape(shape, ndim, call, count);
  if (status != MX_ACC_OK) return status;
  *ndim_out = ndim;
  for (int d = 0; d < ndim; ++d) dims[d] = shape[d];
  return MX_ACC_OK;
}

cnmlStatus_t cnmlCreateTensor(cnmlTensor_t *tensor, cnmlTensorType_t type, cnmlDataType_t dtype,
                              const int64_t *shape, int ndim) {
  if (tensor == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlCreateTensor: tensor is NULL");
  struct cnmlTensor made;
  memset(&made, 0, sizeof made);
  int status = describe(type, dtype, shape, ndim, "cnmlCreateTensor", &made.ndim, made.dims,
                        &made.count);
  if (status != MX_ACC_OK) return STATUS(status);
  made.type = type;
  made.dtype = dtype;
  *tensor = malloc(sizeof made);
  if (*tensor == NULL) return FAIL(CNML_STATUS_NOMEMORY, "cnmlCreateTensor");
  **tensor = made;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlCreateCpuTensor(cnmlCpuTensor_t *tensor, cnmlTensorType_t type,
                                 cnmlDataType_t dtype, const int64_t *shape, int ndim) {
  if (tensor == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlCreateCpuTensor: tensor is NULL");
  struct cnmlCpuTensor made;
  memset(&made, 0, sizeof made);
  int status = describe(type, dtype, shape, ndim, "cnmlCreateCpuTensor", &made.ndim, made.dims,
                        &made.count);
  if (status != MX_ACC_OK) return STATUS(status);
  made.type = type;
  made.dtype = dtype;
  *tensor = malloc(sizeof made);
  if (*tensor == NULL) return FAIL(CNML_STATUS_NOMEMORY, "cnmlCreateCpuTensor");
  **tensor = made;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlDestroyTensor(cnmlTensor_t *tensor) {
  if (tensor == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlDestroyTensor: NULL");
  if (*tensor != NULL) free((*tensor)->data);
  free(*tensor);
  *tensor = NULL;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlDestroyCpuTensor(cnmlCpuTensor_t *tensor) {
  if (tensor == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlDestroyCpuTensor: NULL");
  free(*tensor);
  *tensor = NULL;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlGetTensorSize(cnmlTensor_t tensor, size_t *bytes) {
  if (tensor == NULL || bytes == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlGetTensorSize");
  *bytes = (size_t)tensor->count * mlu_dtype_size(tensor->dtype);
  return CNML_STATUS_SUCCESS;
}

/* count elements of src_dtype at src -> dst_dtype at dst. */
static void convert(void *dst, int dst_dtype, const void *src, int src_dtype, int64_t count) {
  if (dst_dtype == src_dtype) {
    memmove(dst, src, (size_t)count * mlu_dtype_size(dst_dtype));
    return;
  }
  unsigned char *out = dst;
  const unsigned char *in = src;
  for (int64_t i = 0; i < count; ++i) {
    if (src_dtype == MLU_DT_FLOAT32) { /* fp32 -> fp16 */
      float value;
      memcpy(&value, in + i * 4, sizeof value);
      uint16_t half = mlu_float_to_half(value);
      memcpy(out + i * 2, &half, sizeof half);
    } else { /* fp16 -> fp32 */
      uint16_t half;
      memcpy(&half, in + i * 2, sizeof half);
      float value = mlu_half_to_float(half);
      memcpy(out + i * 4, &value, sizeof value);
    }
  }
}

cnmlStatus_t cnmlBindConstData(cnmlTensor_t tensor, cnmlCpuTensor_t cpu_tensor, const void *data) {
  if (tensor == NULL || cpu_tensor == NULL || (data == NULL && cpu_tensor->count > 0)) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnmlBindConstData: NULL argument");
  }
  if (tensor->type == CNML_TENSOR) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnmlBindConstData: only CNML_FILTER and CNML_CONST "
                "tensors hold bound data");
  }
  if (cpu_tensor->count != tensor->count) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnmlBindConstData: %lld elements for a tensor of %lld",
                (long long)cpu_tensor->count, (long long)tensor->count);
  }
  float *values = malloc((size_t)(tensor->count ? tensor->count : 1) * sizeof(float));
  if (values == NULL) return FAIL(CNML_STATUS_NOMEMORY, "cnmlBindConstData");
  if (tensor->count > 0) convert(values, MLU_DT_FLOAT32, data, cpu_tensor->dtype, tensor->count);
  free(tensor->data);
  tensor->data = values;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlMallocBuffer(cnmlTensor_t tensor, void **ptr) {
  if (tensor == NULL || ptr == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlMallocBuffer: NULL");
  if (tensor->type != CNML_TENSOR) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnmlMallocBuffer: filters and constants live in the "
                "compiled op; only CNML_TENSOR tensors get buffers");
  }
  if (tensor->card == NULL) {
    return FAIL(CNML_STATUS_STATE, "cnmlMallocBuffer: no compiled op uses this tensor yet; "
                "device buffers exist only after compilation");
  }
  uint64_t bytes = (uint64_t)tensor->count * mlu_dtype_size(tensor->dtype);
  return STATUS(mlu_card_alloc(tensor->card, bytes, MLU_MEM_BUFFER, ptr));
}

cnmlStatus_t cnmlFreeBuffer(cnmlTensor_t tensor, void *ptr) {
  if (tensor == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlFreeBuffer: tensor is NULL");
  if (tensor->card == NULL) {
    return FAIL(CNML_STATUS_STATE, "cnmlFreeBuffer: the tensor has no device buffers");
  }
  return STATUS(mlu_card_free(tensor->card, ptr, MLU_MEM_BUFFER));
}

/* Checks one tensor copy and returns the card and the device bytes. */
static int check_tensor_copy(cnmlCpuTensor_t cpu, const void *host, cnmlTensor_t tensor,
                             const void *device, const char *call, uint64_t *bytes) {
  if (cpu == NULL || tensor == NULL || (cpu->count > 0 && (host == NULL || device == NULL))) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: NULL argument", call);
  }
  if (tensor->card == NULL) {
    return acc_fail(MX_ACC_ERR_STATE, "%s: no compiled op uses this tensor yet, so it has no "
                    "device memory", call);
  }
  if (cpu->count != tensor->count) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %lld host elements for a tensor of %lld", call,
                    (long long)cpu->count, (long long)tensor->count);
  }
  *bytes = (uint64_t)tensor->count * mlu_dtype_size(tensor->dtype);
  return mlu_card_check(tensor->card, device, *bytes, call);
}

cnmlStatus_t cnmlMemcpyTensorToDevice(cnmlCpuTensor_t cpu_tensor, const void *host,
                                      cnmlTensor_t tensor, void *device) {
  uint64_t bytes = 0;
  int status = check_tensor_copy(cpu_tensor, host, tensor, device, "cnmlMemcpyTensorToDevice",
                                 &bytes);
  if (status != MX_ACC_OK) return STATUS(status);
  if (bytes > 0) convert(device, tensor->dtype, host, cpu_tensor->dtype, tensor->count);
  mlu_card_count_copy(tensor->card, bytes);
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlMemcpyTensorToHost(cnmlTensor_t tensor, const void *device,
                                    cnmlCpuTensor_t cpu_tensor, void *host) {
  uint64_t bytes = 0;
  int status = check_tensor_copy(cpu_tensor, host, tensor, device, "cnmlMemcpyTensorToHost",
                                 &bytes);
  if (status != MX_ACC_OK) return STATUS(status);
  if (bytes > 0) convert(host, cpu_tensor->dtype, device, tensor->dtype, tensor->count);
  mlu_card_count_copy(tensor->card, bytes);
  return CNML_STATUS_SUCCESS;
}

/* ---- BaseOp creation ---------------------------------------------------------------------- */

static int role_check(cnmlTensor_t tensor, cnmlTensorType_t type, int ndim, const char *op,
                      const char *role) {
  static const char *const type_names[] = {"CNML_TENSOR", "CNML_FILTER", "CNML_CONST"};
  if (tensor == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %s is NULL", op, role);
  if (tensor->type != type) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %s must be a %s tensor", op, role,
                    type_names[type]);
  }
  if (ndim >= 0 && tensor->ndim != ndim) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %s has %d dimensions, expected %d", op, role,
                    tensor->ndim, ndim);
  }
  return MX_ACC_OK;
}

static int same_dims(cnmlTensor_t a, cnmlTensor_t b) {
  if (a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; ++d) {
    if (a->dims[d] != b->dims[d]) return 0;
  }
  return 1;
}

/* input and output: CNML_TENSORs of one data type, distinct. */
static int data_pair(cnmlTensor_t input, cnmlTensor_t output, int ndim, const char *op) {
  int status = role_check(input, CNML_TENSOR, ndim, op, "input");
  if (status == MX_ACC_OK) status = role_check(output, CNML_TENSOR, ndim, op, "output");
  if (status != MX_ACC_OK) return status;
  if (input == output) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: output is the input", op);
  if (input->dtype != output->dtype) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: input and output data types differ", op);
  }
  return MX_ACC_OK;
}

static int same_shape_pair(cnmlTensor_t input, cnmlTensor_t output, const char *op) {
  int status = data_pair(input, output, -1, op);
  if (status == MX_ACC_OK && !same_dims(input, output)) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: input and output shapes differ", op);
  }
  return status;
}

static int vector_const(cnmlTensor_t tensor, int64_t length, const char *op, const char *role) {
  int status = role_check(tensor, CNML_CONST, 1, op, role);
  if (status == MX_ACC_OK && tensor->dims[0] != length) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %s has %lld values, expected %lld", op, role,
                      (long long)tensor->dims[0], (long long)length);
  }
  return status;
}

/* A new op with one data input. */
static int new_op(mlu_op_kind kind, cnmlTensor_t input, cnmlTensor_t output, cnmlBaseOp_t *op) {
  cnmlBaseOp_t made = calloc(1, sizeof *made);
  if (made == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "BaseOp");
  made->kind = kind;
  made->num_inputs = input != NULL ? 1 : 0;
  made->inputs[0] = input;
  made->output = output;
  *op = made;
  return MX_ACC_OK;
}

cnmlStatus_t cnmlCreateConvOpParam(cnmlConvOpParam_t *param, int stride_h, int stride_w,
                                   int dilation_h, int dilation_w, int pad_h, int pad_w) {
  if (param == NULL || stride_h < 1 || stride_w < 1 || dilation_h < 1 || dilation_w < 1 ||
      pad_h < 0 || pad_w < 0) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnmlCreateConvOpParam: strides and dilations must be "
                ">= 1 and pads >= 0");
  }
  *param = malloc(sizeof **param);
  if (*param == NULL) return FAIL(CNML_STATUS_NOMEMORY, "cnmlCreateConvOpParam");
  **param = (struct cnmlConvOpParam){stride_h, stride_w, dilation_h, dilation_w, pad_h, pad_w};
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlDestroyConvOpParam(cnmlConvOpParam_t *param) {
  if (param == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlDestroyConvOpParam: NULL");
  free(*param);
  *param = NULL;
  return CNML_STATUS_SUCCESS;
}

/* Output extent of a convolution along one axis, or -1 if the dilated
 * kernel does not fit the padded input. */
static int64_t conv_extent(int64_t size, int64_t kernel, int64_t stride, int64_t pad,
                           int64_t dilate) {
  int64_t span = dilate * (kernel - 1) + 1;
  if (size + 2 * pad < span) return -1;
  return (size + 2 * pad - span) / stride + 1;
}

static int check_conv(cnmlConvOpParam_t param, cnmlTensor_t input, cnmlTensor_t output,
                      cnmlTensor_t filter, cnmlTensor_t bias, int groups) {
  const char *op = "cnmlCreateConvOp";
  if (param == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: param is NULL", op);
  int status = data_pair(input, output, 4, op);
  if (status == MX_ACC_OK) status = role_check(filter, CNML_FILTER, 4, op, "filter");
  if (status != MX_ACC_OK) return status;
  int64_t channels = input->dims[1], filters = filter->dims[0];
  if (groups < 1 || channels % groups != 0 || filters % groups != 0 ||
      filter->dims[1] != channels / groups) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %lld input channels, filter (%lld, %lld, ...) "
                    "and %d groups do not match", op, (long long)channels, (long long)filters,
                    (long long)filter->dims[1], groups);
  }
  if (filter->dtype != input->dtype) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: filter and input data types differ", op);
  }
  if (bias != NULL && (status = vector_const(bias, filters, op, "bias")) != MX_ACC_OK) {
    return status;
  }
  int64_t oh = conv_extent(input->dims[2], filter->dims[2], param->sh, param->ph, param->dh);
  int64_t ow = conv_extent(input->dims[3], filter->dims[3], param->sw, param->pw, param->dw);
  if (oh < 0 || ow < 0 || output->dims[0] != input->dims[0] || output->dims[1] != filters ||
      output->dims[2] != oh || output->dims[3] != ow) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: the output shape does not match the "
                    "convolution (expected %lld x %lld x %lld x %lld)", op,
                    (long long)input->dims[0], (long long)filters, (long long)oh, (long long)ow);
  }
  return MX_ACC_OK;
}

cnmlStatus_t cnmlCreateConvGroupOp(cnmlBaseOp_t *op, cnmlConvOpParam_t param, cnmlTensor_t input,
                                   cnmlTensor_t output, cnmlTensor_t filter, cnmlTensor_t bias,
                                   int groups) {
  if (op == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlCreateConvOp: op is NULL");
  int status = check_conv(param, input, output, filter, bias, groups);
  if (status == MX_ACC_OK) status = new_op(MLU_KIND_CONV, input, output, op);
  if (status != MX_ACC_OK) return STATUS(status);
  (*op)->filter = filter;
  (*op)->bias = bias;
  (*op)->p.conv.geometry = *param;
  (*op)->p.conv.groups = groups;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlCreateConvOp(cnmlBaseOp_t *op, cnmlConvOpParam_t param, cnmlTensor_t input,
                              cnmlTensor_t output, cnmlTensor_t filter, cnmlTensor_t bias) {
  return cnmlCreateConvGroupOp(op, param, input, output, filter, bias, 1);
}

cnmlStatus_t cnmlCreateActiveOp(cnmlBaseOp_t *op, cnmlActiveFunction_t function,
                                cnmlTensor_t input, cnmlTensor_t output) {
  if (op == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlCreateActiveOp: op is NULL");
  if (function != CNML_ACTIVE_RELU && function != CNML_ACTIVE_SIGMOID &&
      function != CNML_ACTIVE_TANH) {
    return FAIL(CNML_STATUS_UNSUPPORTED, "cnmlCreateActiveOp: function %d", (int)function);
  }
  int status = same_shape_pair(input, output, "cnmlCreateActiveOp");
  if (status == MX_ACC_OK) status = new_op(MLU_KIND_ACTIVE, input, output, op);
  if (status != MX_ACC_OK) return STATUS(status);
  (*op)->p.act = (int)function;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlCreateClipOp(cnmlBaseOp_t *op, cnmlTensor_t input, cnmlTensor_t output,
                              double lower, double upper) {
  if (op == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlCreateClipOp: op is NULL");
  int status = same_shape_pair(input, output, "cnmlCreateClipOp");
  if (status == MX_ACC_OK) status = new_op(MLU_KIND_CLIP, input, output, op);
  if (status != MX_ACC_OK) return STATUS(status);
  (*op)->p.clip.lo = (float)lower; /* MXNet keeps clip bounds in fp32 too */
  (*op)->p.clip.hi = (float)upper;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlCreatePoolOpParam(cnmlPoolOpParam_t *param, int window_h, int window_w,
                                   int stride_h, int stride_w, int pad_h, int pad_w,
                                   cnmlPoolMode_t mode, cnmlPoolStrategyMode_t strategy,
                                   int count_include_pad) {
  if (param == NULL || window_h < 1 || window_w < 1 || stride_h < 1 || stride_w < 1 || pad_h < 0 ||
      pad_w < 0 || (mode != CNML_POOL_MAX && mode != CNML_POOL_AVG) ||
      (strategy != CNML_POOL_KVALID && strategy != CNML_POOL_KFULL)) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnmlCreatePoolOpParam: invalid window, stride, pad, mode "
                "or strategy");
  }
  *param = malloc(sizeof **param);
  if (*param == NULL) return FAIL(CNML_STATUS_NOMEMORY, "cnmlCreatePoolOpParam");
  **param = (struct cnmlPoolOpParam){window_h, window_w, stride_h, stride_w, pad_h, pad_w,
                                     (int)mode, strategy == CNML_POOL_KFULL,
                                     count_include_pad != 0};
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlDestroyPoolOpParam(cnmlPoolOpParam_t *param) {
  if (param == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlDestroyPoolOpParam: NULL");
  free(*param);
  *param = NULL;
  return CNML_STATUS_SUCCESS;
}

/* Pooled extent along one axis by the strategy, or -1 if the window does
 * not fit the padded input. */
static int64_t pool_extent(int64_t size, int64_t kernel, int64_t stride, int64_t pad, int full) {
  int64_t room = size + 2 * pad - kernel;
  if (room < 0) return -1;
  return (full ? (room + stride - 1) / stride : room / stride) + 1;
}

cnmlStatus_t cnmlCreatePoolOp(cnmlBaseOp_t *op, cnmlPoolOpParam_t param, cnmlTensor_t input,
                              cnmlTensor_t output) {
  const char *name = "cnmlCreatePoolOp";
  if (op == NULL || param == NULL) return FAIL(CNML_STATUS_INVALIDARG, "%s: NULL argument", name);
  int status = data_pair(input, output, 4, name);
  if (status != MX_ACC_OK) return STATUS(status);
  int64_t oh = pool_extent(input->dims[2], param->kh, param->sh, param->ph, param->full);
  int64_t ow = pool_extent(input->dims[3], param->kw, param->sw, param->pw, param->full);
  if (oh < 0 || ow < 0 || output->dims[0] != input->dims[0] ||
      output->dims[1] != input->dims[1] || output->dims[2] != oh || output->dims[3] != ow) {
    return FAIL(CNML_STATUS_INVALIDARG, "%s: the output shape does not match the pooling", name);
  }
  status = new_op(MLU_KIND_POOL, input, output, op);
  if (status != MX_ACC_OK) return STATUS(status);
  (*op)->p.pool = *param;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlCreateMlpOp(cnmlBaseOp_t *op, cnmlTensor_t input, cnmlTensor_t output,
                             cnmlTensor_t filter, cnmlTensor_t bias) {
  const char *name = "cnmlCreateMlpOp";
  if (op == NULL) return FAIL(CNML_STATUS_INVALIDARG, "%s: op is NULL", name);
  int status = data_pair(input, output, -1, name);
  if (status == MX_ACC_OK) status = role_check(filter, CNML_FILTER, 2, name, "filter");
  if (status != MX_ACC_OK) return STATUS(status);
  int64_t m = filter->dims[0], k = filter->dims[1];
  if (k < 1 || input->count % k != 0 || filter->dtype != input->dtype || output->ndim < 1 ||
      output->dims[output->ndim - 1] != m || output->count != input->count / k * m) {
    return FAIL(CNML_STATUS_INVALIDARG, "%s: input, filter (%lld, %lld) and output do not "
                "match", name, (long long)m, (long long)k);
  }
  if (bias != NULL && (status = vector_const(bias, m, name, "bias")) != MX_ACC_OK) {
    return STATUS(status);
  }
  status = new_op(MLU_KIND_MLP, input, output, op);
  if (status != MX_ACC_OK) return STATUS(status);
  (*op)->filter = filter;
  (*op)->bias = bias;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlCreateBatchNormOp(cnmlBaseOp_t *op, cnmlTensor_t input, cnmlTensor_t output,
                                   cnmlTensor_t mean, cnmlTensor_t var, cnmlTensor_t gamma,
                                   cnmlTensor_t beta, double eps) {
  const char *name = "cnmlCreateBatchNormOp";
  if (op == NULL) return FAIL(CNML_STATUS_INVALIDARG, "%s: op is NULL", name);
  int status = same_shape_pair(input, output, name);
  if (status == MX_ACC_OK && (input->ndim < 2 || input->dims[0] * input->dims[1] == 0)) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: the input needs a non-empty channel axis 1",
                      name);
  }
  if (status != MX_ACC_OK) return STATUS(status);
  int64_t channels = input->dims[1];
  status = vector_const(mean, channels, name, "mean");
  if (status == MX_ACC_OK) status = vector_const(var, channels, name, "var");
  if (status == MX_ACC_OK) status = vector_const(beta, channels, name, "beta");
  if (status == MX_ACC_OK && gamma != NULL) status = vector_const(gamma, channels, name, "gamma");
  if (status == MX_ACC_OK && !(eps >= 0.0)) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: eps must be >= 0", name);
  }
  if (status == MX_ACC_OK) status = new_op(MLU_KIND_BATCHNORM, input, output, op);
  if (status != MX_ACC_OK) return STATUS(status);
  (*op)->mean = mean;
  (*op)->var = var;
  (*op)->gamma = gamma;
  (*op)->beta = beta;
  (*op)->p.eps = eps;
  return CNML_STATUS_SUCCESS;
}

static cnmlStatus_t create_binary(mlu_op_kind kind, const char *name, cnmlBaseOp_t *op,
                                  cnmlTensor_t a, cnmlTensor_t b, cnmlTensor_t output) {
  if (op == NULL) return FAIL(CNML_STATUS_INVALIDARG, "%s: op is NULL", name);
  int status = same_shape_pair(a, output, name);
  if (status == MX_ACC_OK) status = same_shape_pair(b, output, name);
  if (status == MX_ACC_OK) status = new_op(kind, a, output, op);
  if (status != MX_ACC_OK) return STATUS(status);
  (*op)->num_inputs = 2;
  (*op)->inputs[1] = b;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlCreateAddOp(cnmlBaseOp_t *op, cnmlTensor_t input_a, cnmlTensor_t input_b,
                             cnmlTensor_t output) {
  return create_binary(MLU_KIND_ADD, "cnmlCreateAddOp", op, input_a, input_b, output);
}

cnmlStatus_t cnmlCreateMultOp(cnmlBaseOp_t *op, cnmlTensor_t input_a, cnmlTensor_t input_b,
                              cnmlTensor_t output) {
  return create_binary(MLU_KIND_MULT, "cnmlCreateMultOp", op, input_a, input_b, output);
}

cnmlStatus_t cnmlCreateSoftmaxOp(cnmlBaseOp_t *op, int axis, double temperature,
                                 cnmlTensor_t input, cnmlTensor_t output) {
  const char *name = "cnmlCreateSoftmaxOp";
  if (op == NULL) return FAIL(CNML_STATUS_INVALIDARG, "%s: op is NULL", name);
  int status = same_shape_pair(input, output, name);
  if (status != MX_ACC_OK) return STATUS(status);
  int ndim = input->ndim;
  if (ndim < 1 || axis < -ndim || axis >= ndim || !(temperature > 0.0) || isinf(temperature)) {
    return FAIL(CNML_STATUS_INVALIDARG, "%s: axis %d of a %d-D tensor, temperature %g", name, axis,
                ndim, temperature);
  }
  status = new_op(MLU_KIND_SOFTMAX, input, output, op);
  if (status != MX_ACC_OK) return STATUS(status);
  (*op)->p.softmax.axis = axis < 0 ? axis + ndim : axis;
  (*op)->p.softmax.temperature = temperature;
  return CNML_STATUS_SUCCESS;
}

static int check_concat(int axis, const cnmlTensor_t *inputs, int num_inputs,
                        cnmlTensor_t output) {
  const char *name = "cnmlCreateConcatOp";
  if (inputs == NULL || num_inputs < 1 || num_inputs > MLU_MAX_OP_INPUTS) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: 1 to %d inputs", name, MLU_MAX_OP_INPUTS);
  }
  int64_t total = 0;
  for (int i = 0; i < num_inputs; ++i) {
    int status = data_pair(inputs[i], output, output != NULL ? output->ndim : -1, name);
    if (status != MX_ACC_OK) return status;
    if (axis < 0 || axis >= output->ndim) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: axis out of range", name);
    }
    for (int d = 0; d < output->ndim; ++d) {
      if (d != axis && inputs[i]->dims[d] != output->dims[d]) {
        return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: input %d differs from the output outside "
                        "the axis", name, i);
      }
    }
    total += inputs[i]->dims[axis];
  }
  if (total != output->dims[axis]) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: the inputs add up to %lld along the axis, the "
                    "output has %lld", name, (long long)total, (long long)output->dims[axis]);
  }
  return MX_ACC_OK;
}

cnmlStatus_t cnmlCreateConcatOp(cnmlBaseOp_t *op, int axis, const cnmlTensor_t *inputs,
                                int num_inputs, cnmlTensor_t output) {
  if (op == NULL || output == NULL) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnmlCreateConcatOp: NULL argument");
  }
  if (axis < 0) axis += output->ndim;
  int status = check_concat(axis, inputs, num_inputs, output);
  if (status == MX_ACC_OK) status = new_op(MLU_KIND_CONCAT, inputs[0], output, op);
  if (status != MX_ACC_OK) return STATUS(status);
  (*op)->num_inputs = num_inputs;
  for (int i = 0; i < num_inputs; ++i) (*op)->inputs[i] = inputs[i];
  (*op)->p.axis = axis;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlCreateReshapeOp(cnmlBaseOp_t *op, cnmlTensor_t input, cnmlTensor_t output) {
  const char *name = "cnmlCreateReshapeOp";
  if (op == NULL) return FAIL(CNML_STATUS_INVALIDARG, "%s: op is NULL", name);
  int status = data_pair(input, output, -1, name);
  if (status == MX_ACC_OK && input->count != output->count) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %lld elements cannot become %lld", name,
                      (long long)input->count, (long long)output->count);
  }
  if (status == MX_ACC_OK) status = new_op(MLU_KIND_RESHAPE, input, output, op);
  return STATUS(status);
}

cnmlStatus_t cnmlDestroyBaseOp(cnmlBaseOp_t *op) {
  if (op == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlDestroyBaseOp: NULL");
  if (*op == NULL) return CNML_STATUS_SUCCESS;
  if ((*op)->fusion != NULL) {
    return FAIL(CNML_STATUS_STATE, "cnmlDestroyBaseOp: the op belongs to a FusionOp; destroy "
                "that first");
  }
  mlu_program_unref((*op)->program);
  free(*op);
  *op = NULL;
  return CNML_STATUS_SUCCESS;
}

/* ---- compiling ----------------------------------------------------------------------------- */

/* Compiled ops' data tensors may now have device buffers on dev. */
static void bind_tensors(cnmlBaseOp_t op, cnrtDev_t dev) {
  for (int i = 0; i < op->num_inputs; ++i) op->inputs[i]->card = dev;
  op->output->card = dev;
}

cnmlStatus_t cnmlCompileBaseOp(cnmlBaseOp_t op, cnrtDev_t dev) {
  if (op == NULL || dev == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlCompileBaseOp: NULL");
  if (op->fusion != NULL) {
    return FAIL(CNML_STATUS_STATE, "cnmlCompileBaseOp: the op belongs to a FusionOp; compile "
                "that instead");
  }
  double start = mlu_now_ns();
  mlu_program *program;
  int status = mlu_compile(dev, &op, 1, op->inputs, op->num_inputs, &op->output, 1, 0, &program);
  if (status != MX_ACC_OK) return STATUS(status);
  mlu_program_unref(op->program);
  op->program = program;
  bind_tensors(op, dev);
  mlu_card_count_compile(dev, mlu_now_ns() - start);
  return CNML_STATUS_SUCCESS;
}

/* ---- launching ------------------------------------------------------------------------------ */

typedef struct launch_task {
  mlu_program *program;
  int count;
  void *io[]; /* inputs, then outputs */
} launch_task;

static int run_launch(void *arg, mlu_cluster *cluster) {
  launch_task *task = arg;
  return mlu_machine_run(task->program, task->io, cluster, NULL);
}

static void release_launch(void *arg) {
  launch_task *task = arg;
  mlu_program_unref(task->program);
  free(task);
}

/* Checks a launch's pointers now (they are checked again when it runs) and
 * enqueues it. */
static int enqueue(mlu_program *program, const void *const *inputs, int num_inputs,
                   void *const *outputs, int num_outputs, cnrtQueue_t queue, const char *call) {
  if (program == NULL) return acc_fail(MX_ACC_ERR_STATE, "%s: the op is not compiled", call);
  if (queue == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: queue is NULL", call);
  if (mlu_queue_card(queue) != program->card) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: the queue belongs to another card than the one "
                    "the op was compiled for", call);
  }
  if (num_inputs != program->num_inputs || num_outputs != program->num_outputs ||
      (num_inputs > 0 && inputs == NULL) || (num_outputs > 0 && outputs == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %d inputs and %d outputs given, the op has %d "
                    "and %d", call, num_inputs, num_outputs, program->num_inputs,
                    program->num_outputs);
  }
  int slots = num_inputs + num_outputs;
  launch_task *task = malloc(sizeof *task + (size_t)slots * sizeof(void *));
  if (task == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "%s", call);
  for (int i = 0; i < slots; ++i) {
    task->io[i] = i < num_inputs ? (void *)inputs[i] : outputs[i - num_inputs];
    int status = mlu_card_check(program->card, task->io[i], program->io_bytes[i], call);
    if (status != MX_ACC_OK) {
      free(task);
      return status;
    }
  }
  mlu_program_ref(program);
  task->program = program;
  task->count = slots;
  return mlu_queue_push(queue, run_launch, release_launch, task);
}

cnmlStatus_t cnmlComputeBaseOpForward(cnmlBaseOp_t op, const void *const *inputs, int num_inputs,
                                      void *output, cnrtQueue_t queue) {
  if (op == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlComputeBaseOpForward: op is NULL");
  void *outputs[1] = {output};
  return STATUS(enqueue(op->program, inputs, num_inputs, outputs, 1, queue,
                        "cnmlComputeBaseOpForward"));
}

/* A typed Forward: the op must be of kind. */
static cnmlStatus_t typed_forward(cnmlBaseOp_t op, mlu_op_kind kind, const char *call,
                                  const void *const *inputs, int num_inputs, void *output,
                                  cnrtQueue_t queue) {
  if (op == NULL) return FAIL(CNML_STATUS_INVALIDARG, "%s: op is NULL", call);
  if (op->kind != kind) return FAIL(CNML_STATUS_INVALIDARG, "%s: the op is of another kind", call);
  void *outputs[1] = {output};
  return STATUS(enqueue(op->program, inputs, num_inputs, outputs, 1, queue, call));
}

#define UNARY_FORWARD(function, kind)                                                        \
  cnmlStatus_t function(cnmlBaseOp_t op, const void *input, void *output, cnrtQueue_t queue) { \
    const void *inputs[1] = {input};                                                         \
    return typed_forward(op, kind, #function, inputs, 1, output, queue);                     \
  }

UNARY_FORWARD(cnmlComputeConvOpForward, MLU_KIND_CONV)
UNARY_FORWARD(cnmlComputeActiveOpForward, MLU_KIND_ACTIVE)
UNARY_FORWARD(cnmlComputeClipOpForward, MLU_KIND_CLIP)
UNARY_FORWARD(cnmlComputePoolOpForward, MLU_KIND_POOL)
UNARY_FORWARD(cnmlComputeMlpOpForward, MLU_KIND_MLP)
UNARY_FORWARD(cnmlComputeBatchNormOpForward, MLU_KIND_BATCHNORM)
UNARY_FORWARD(cnmlComputeSoftmaxOpForward, MLU_KIND_SOFTMAX)
UNARY_FORWARD(cnmlComputeReshapeOpForward, MLU_KIND_RESHAPE)

cnmlStatus_t cnmlComputeAddOpForward(cnmlBaseOp_t op, const void *input_a, const void *input_b,
                                     void *output, cnrtQueue_t queue) {
  const void *inputs[2] = {input_a, input_b};
  return typed_forward(op, MLU_KIND_ADD, "cnmlComputeAddOpForward", inputs, 2, output, queue);
}

cnmlStatus_t cnmlComputeMultOpForward(cnmlBaseOp_t op, const void *input_a, const void *input_b,
                                      void *output, cnrtQueue_t queue) {
  const void *inputs[2] = {input_a, input_b};
  return typed_forward(op, MLU_KIND_MULT, "cnmlComputeMultOpForward", inputs, 2, output, queue);
}

cnmlStatus_t cnmlComputeConcatOpForward(cnmlBaseOp_t op, const void *const *inputs,
                                        int num_inputs, void *output, cnrtQueue_t queue) {
  return typed_forward(op, MLU_KIND_CONCAT, "cnmlComputeConcatOpForward", inputs, num_inputs,
                       output, queue);
}

/* ---- FusionOps ------------------------------------------------------------------------------- */

cnmlStatus_t cnmlCreateFusionOp(cnmlFusionOp_t *fusion) {
  if (fusion == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlCreateFusionOp: NULL");
  *fusion = calloc(1, sizeof **fusion);
  return *fusion != NULL ? CNML_STATUS_SUCCESS : FAIL(CNML_STATUS_NOMEMORY, "cnmlCreateFusionOp");
}

cnmlStatus_t cnmlFuseOp(cnmlBaseOp_t op, cnmlFusionOp_t fusion) {
  if (op == NULL || fusion == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlFuseOp: NULL");
  if (op->fusion != NULL) return FAIL(CNML_STATUS_STATE, "cnmlFuseOp: the op is already fused");
  if (op->program != NULL) {
    return FAIL(CNML_STATUS_STATE, "cnmlFuseOp: the op was compiled on its own");
  }
  if (fusion->program != NULL) {
    return FAIL(CNML_STATUS_STATE, "cnmlFuseOp: the FusionOp is already compiled");
  }
  if (fusion->num_ops == fusion->capacity) {
    size_t capacity = fusion->capacity ? fusion->capacity * 2 : 16;
    cnmlBaseOp_t *ops = realloc(fusion->ops, capacity * sizeof *ops);
    if (ops == NULL) return FAIL(CNML_STATUS_NOMEMORY, "cnmlFuseOp");
    fusion->ops = ops;
    fusion->capacity = capacity;
  }
  fusion->ops[fusion->num_ops++] = op;
  op->fusion = fusion;
  return CNML_STATUS_SUCCESS;
}

static int check_io_list(const cnmlTensor_t *tensors, int count, int minimum, const char *role) {
  if (count < minimum || count > MLU_MAX_FUSION_IO || (count > 0 && tensors == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "cnmlSetFusionIO: %d %s (%d to %d)", count, role,
                    minimum, MLU_MAX_FUSION_IO);
  }
  for (int i = 0; i < count; ++i) {
    if (tensors[i] == NULL || tensors[i]->type != CNML_TENSOR) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "cnmlSetFusionIO: %s %d is not a CNML_TENSOR",
                      role, i);
    }
  }
  return MX_ACC_OK;
}

cnmlStatus_t cnmlSetFusionIO(cnmlFusionOp_t fusion, const cnmlTensor_t *inputs, int num_inputs,
                             const cnmlTensor_t *outputs, int num_outputs) {
  if (fusion == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlSetFusionIO: fusion is NULL");
  if (fusion->program != NULL) {
    return FAIL(CNML_STATUS_STATE, "cnmlSetFusionIO: the FusionOp is already compiled");
  }
  int status = check_io_list(inputs, num_inputs, 0, "inputs");
  if (status == MX_ACC_OK) status = check_io_list(outputs, num_outputs, 1, "outputs");
  if (status != MX_ACC_OK) return STATUS(status);
  int total = num_inputs + num_outputs;
  for (int i = 0; i < total; ++i) {
    cnmlTensor_t a = i < num_inputs ? inputs[i] : outputs[i - num_inputs];
    for (int j = 0; j < i; ++j) {
      cnmlTensor_t b = j < num_inputs ? inputs[j] : outputs[j - num_inputs];
      if (a == b) return FAIL(CNML_STATUS_INVALIDARG, "cnmlSetFusionIO: a tensor is listed twice");
    }
  }
  fusion->num_inputs = num_inputs;
  fusion->num_outputs = num_outputs;
  for (int i = 0; i < num_inputs; ++i) fusion->inputs[i] = inputs[i];
  for (int i = 0; i < num_outputs; ++i) fusion->outputs[i] = outputs[i];
  fusion->io_set = 1;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlCompileFusionOp(cnmlFusionOp_t fusion, cnrtDev_t dev) {
  if (fusion == NULL || dev == NULL) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnmlCompileFusionOp: NULL");
  }
  if (!fusion->io_set || fusion->num_ops == 0) {
    return FAIL(CNML_STATUS_STATE, "cnmlCompileFusionOp: fuse ops and set the I/O first");
  }
  double start = mlu_now_ns();
  mlu_program *program;
  int status = mlu_compile(dev, fusion->ops, fusion->num_ops, fusion->inputs, fusion->num_inputs,
                           fusion->outputs, fusion->num_outputs, 1, &program);
  if (status != MX_ACC_OK) return STATUS(status);
  mlu_program_unref(fusion->program);
  fusion->program = program;
  for (size_t i = 0; i < fusion->num_ops; ++i) bind_tensors(fusion->ops[i], dev);
  mlu_card_count_compile(dev, mlu_now_ns() - start);
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlComputeFusionOpForward(cnmlFusionOp_t fusion, const void *const *inputs,
                                        int num_inputs, void *const *outputs, int num_outputs,
                                        cnrtQueue_t queue) {
  if (fusion == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlComputeFusionOpForward: NULL");
  return STATUS(enqueue(fusion->program, inputs, num_inputs, outputs, num_outputs, queue,
                        "cnmlComputeFusionOpForward"));
}

cnmlStatus_t cnmlDestroyFusionOp(cnmlFusionOp_t *fusion) {
  if (fusion == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlDestroyFusionOp: NULL");
  if (*fusion == NULL) return CNML_STATUS_SUCCESS;
  for (size_t i = 0; i < (*fusion)->num_ops; ++i) (*fusion)->ops[i]->fusion = NULL;
  mlu_program_unref((*fusion)->program);
  free((*fusion)->ops);
  free(*fusion);
  *fusion = NULL;
  return CNML_STATUS_SUCCESS;
}

/* ---- simulator extensions ------------------------------------------------------------------- */

cnmlStatus_t cnrtSimGetParams(cnrtDev_t dev, mlu_params *params) {
  if (dev == NULL || params == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnrtSimGetParams: NULL");
  *params = mlu_card_params(dev);
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnrtSimSetParams(cnrtDev_t dev, const mlu_params *params) {
  if (dev == NULL || params == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnrtSimSetParams: NULL");
  int status = mlu_params_validate(params);
  if (status == MX_ACC_OK) status = mlu_card_set_params(dev, params);
  return STATUS(status);
}

cnmlStatus_t cnrtSimGetStats(cnrtDev_t dev, mlu_stats *stats) {
  if (dev == NULL || stats == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnrtSimGetStats: NULL");
  *stats = mlu_card_stats(dev);
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnrtSimResetStats(cnrtDev_t dev) {
  if (dev == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnrtSimResetStats: NULL");
  mlu_card_reset_stats(dev);
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnrtSimMemoryInUse(cnrtDev_t dev, size_t *allocations, uint64_t *bytes) {
  if (dev == NULL || allocations == NULL || bytes == NULL) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnrtSimMemoryInUse: NULL");
  }
  mlu_card_memory(dev, -1, allocations, bytes);
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlSimGetBaseOpInfo(cnmlBaseOp_t op, mlu_program_info *info) {
  if (op == NULL || info == NULL) return FAIL(CNML_STATUS_INVALIDARG, "cnmlSimGetBaseOpInfo: NULL");
  if (op->program == NULL) return FAIL(CNML_STATUS_STATE, "cnmlSimGetBaseOpInfo: not compiled");
  *info = op->program->info;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlSimGetFusionOpInfo(cnmlFusionOp_t fusion, mlu_program_info *info) {
  if (fusion == NULL || info == NULL) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnmlSimGetFusionOpInfo: NULL");
  }
  if (fusion->program == NULL) {
    return FAIL(CNML_STATUS_STATE, "cnmlSimGetFusionOpInfo: not compiled");
  }
  *info = fusion->program->info;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlSimGetFusionOpProgram(cnmlFusionOp_t fusion, mlu_program **program) {
  if (fusion == NULL || program == NULL) {
    return FAIL(CNML_STATUS_INVALIDARG, "cnmlSimGetFusionOpProgram: NULL");
  }
  if (fusion->program == NULL) {
    return FAIL(CNML_STATUS_STATE, "cnmlSimGetFusionOpProgram: not compiled");
  }
  mlu_program_ref(fusion->program);
  *program = fusion->program;
  return CNML_STATUS_SUCCESS;
}

cnmlStatus_t cnmlSimSetFusionOpProgram(cnmlFusionOp_t fusion, cnrtDev_t dev,
                                       mlu_program *program) {
  const char *call = "cnmlSimSetFusionOpProgram";
  if (fusion == NULL || dev == NULL || program == NULL) {
    return FAIL(CNML_STATUS_INVALIDARG, "%s: NULL", call);
  }
  if (!fusion->io_set || fusion->num_ops == 0) {
    return FAIL(CNML_STATUS_STATE, "%s: fuse ops and set the I/O first", call);
  }
  if (program->card != dev) {
    return FAIL(CNML_STATUS_INVALIDARG, "%s: the program is for another card", call);
  }
  if (program->num_inputs != fusion->num_inputs || program->num_outputs != fusion->num_outputs) {
    return FAIL(CNML_STATUS_INVALIDARG, "%s: the program has %d inputs and %d outputs, the "
                "FusionOp %d and %d", call, program->num_inputs, program->num_outputs,
                fusion->num_inputs, fusion->num_outputs);
  }
  for (int i = 0; i < fusion->num_inputs + fusion->num_outputs; ++i) {
    cnmlTensor_t t = i < fusion->num_inputs ? fusion->inputs[i]
                                            : fusion->outputs[i - fusion->num_inputs];
    uint64_t bytes = (uint64_t)t->count * mlu_dtype_size(t->dtype);
    if (program->io_bytes[i] != bytes) {
      return FAIL(CNML_STATUS_INVALIDARG, "%s: I/O slot %d holds %llu bytes in the program, "
                  "%llu in the FusionOp", call, i, (unsigned long long)program->io_bytes[i],
                  (unsigned long long)bytes);
    }
  }
  mlu_program_unref(fusion->program);
  fusion->program = program;
  for (size_t i = 0; i < fusion->num_ops; ++i) bind_tensors(fusion->ops[i], dev);
  return CNML_STATUS_SUCCESS;
}
