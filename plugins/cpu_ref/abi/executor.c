#include "executor.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "library.h"
#include "ops.h"
#include "status.h"
#include "tensor.h"

typedef struct cr_executor {
  MXAccExecutor base; /* first, so that &base converts back to the executor */
  const cr_op *op;
  cr_params params;
  int dev_id;
  int num_inputs;
  int num_outputs;
  acc_shape in_shapes[CR_MAX_INPUTS];
  acc_shape out_shapes[CR_MAX_OUTPUTS];
  int32_t in_dtypes[CR_MAX_INPUTS];
  int32_t out_dtypes[CR_MAX_OUTPUTS];
  int32_t in_stypes[CR_MAX_INPUTS]; /* MX_ACC_STORAGE_* of each input (ABI 1.2) */
} cr_executor;

/* Checks one tensor of a forward() call and views it for the kernels. */
static int accept_tensor(const cr_executor *executor, const MXTensor *tensor,
                         const acc_shape *shape, int32_t dtype, const char *what,
                         cr_tensor *view) {
  int status = acc_tensor_expect(tensor, what, dtype, shape);
  if (status != MX_ACC_OK) return status;
  if (tensor->dev_id != executor->dev_id) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: tensor is on device %d, executor on %d", what,
                    (int)tensor->dev_id, executor->dev_id);
  }
  size_t bytes;
  status = acc_shape_bytes(shape, acc_dtype_size(dtype), what, &bytes);
  if (status == MX_ACC_OK) status = cr_check_data(executor->dev_id, tensor, bytes, what);
  view->data = tensor->data;
  view->shape = *shape;
  return status;
}

/* The bytes a tensor view covers, as addresses (pointers into different
 * allocations may not be compared directly in C). */
typedef struct byte_range {
  uintptr_t begin;
  uintptr_t end;
} byte_range;

static byte_range range_of(const cr_tensor *view, int32_t dtype) {
  size_t bytes = 0;
  /* Checked when the tensor was accepted. */
  acc_shape_bytes(&view->shape, acc_dtype_size(dtype), "tensor", &bytes);
  byte_range range = {(uintptr_t)view->data, (uintptr_t)view->data + bytes};
  return range;
}

static int ranges_overlap(byte_range a, byte_range b) {
  return a.begin < a.end && b.begin < b.end && a.begin < b.end && b.begin < a.end;
}

/* Kernels read their inputs while writing their outputs, and mxnet_acc.h
 * promises that forward() writes only the outputs: so no output may share
 * memory with an input or with another output. */
static int check_no_overlap(const cr_executor *executor, const cr_tensor *in, int num_in,
                            const cr_tensor *out, int num_out) {
  for (int k = 0; k < num_out; ++k) {
    byte_range written = range_of(&out[k], executor->out_dtypes[k]);
    for (int i = 0; i < num_in; ++i) {
      /* A sparse input's arrays are the host's own, never a device output. */
      if (executor->in_stypes[i] != MX_ACC_STORAGE_DENSE) continue;
      if (ranges_overlap(written, range_of(&in[i], executor->in_dtypes[i]))) {
        return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward %s: output %d overlaps input %d",
                        executor->op->name, k, i);
      }
    }
    for (int j = 0; j < k; ++j) {
      if (ranges_overlap(written, range_of(&out[j], executor->out_dtypes[j]))) {
        return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward %s: output %d overlaps output %d",
                        executor->op->name, k, j);
      }
    }
  }
  return MX_ACC_OK;
}

/* Checks and views every tensor of a forward() call; named: each failure
 * message names the tensor ("forward <op>: input <i>"), else only the
 * call ("forward"). */
static int accept_all(const cr_executor *executor, const MXTensor *inputs, int num_in,
                      const MXTensor *outputs, int num_out, int named, cr_tensor *in_views,
                      cr_tensor *out_views) {
  char what[128] = "forward";
  int status = MX_ACC_OK;
  for (int i = 0; i < num_in && status == MX_ACC_OK; ++i) {
    if (named) snprintf(what, sizeof what, "forward %s: input %d", executor->op->name, i);
    if (executor->in_stypes[i] != MX_ACC_STORAGE_DENSE) { /* host memory, checked */
      status = cr_sparse_check(&inputs[i], executor->in_stypes[i], &executor->in_shapes[i],
                               executor->in_dtypes[i], what);
      in_views[i].data = inputs[i].data;
      in_views[i].shape = executor->in_shapes[i];
      continue;
    }
    status = accept_tensor(executor, &inputs[i], &executor->in_shapes[i], executor->in_dtypes[i],
                           what, &in_views[i]);
  }
  for (int k = 0; k < num_out && status == MX_ACC_OK; ++k) {
    if (named) snprintf(what, sizeof what, "forward %s: output %d", executor->op->name, k);
    status = accept_tensor(executor, &outputs[k], &executor->out_shapes[k],
                           executor->out_dtypes[k], what, &out_views[k]);
  }
  return status;
}

static int executor_forward(MXAccExecutor *self, const MXTensor *inputs, int num_in,
                            const MXTensor *outputs, int num_out) {
  acc_clear_error();
  if (self == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward: executor is NULL");
  cr_executor *executor = (cr_executor *)self;
  if (num_in != executor->num_inputs || num_out != executor->num_outputs) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward %s: %d inputs and %d outputs, expected %d "
                    "and %d", executor->op->name, num_in, num_out, executor->num_inputs,
                    executor->num_outputs);
  }
  if ((num_in > 0 && inputs == NULL) || outputs == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward %s: tensor array is NULL",
                    executor->op->name);
  }
  cr_device *device = cr_device_get(executor->dev_id);
  if (device == NULL) return MX_ACC_ERR_STATE;
  cr_tensor in_views[CR_MAX_INPUTS], out_views[CR_MAX_OUTPUTS];
  /* The checks run without naming each tensor (formatting the names cost
   * more than a small operator); a failure runs them again with the names,
   * for the message. */
  int status = accept_all(executor, inputs, num_in, outputs, num_out, 0, in_views, out_views);
  if (status != MX_ACC_OK) {
    status = accept_all(executor, inputs, num_in, outputs, num_out, 1, in_views, out_views);
  }
  if (status == MX_ACC_OK) {
    status = check_no_overlap(executor, in_views, num_in, out_views, num_out);
  }
  if (status != MX_ACC_OK) return status;
  return executor->op->impl->run(&executor->params, in_views, num_in, out_views,
                                 atomic_load(&device->num_threads));
}

static void executor_release(MXAccExecutor *self) { free(self); }

/* Copies the shapes and dtypes of count descriptors. */
static int read_specs(const char *op_name, const char *role, const MXTensor *tensors, int count,
                      acc_shape *shapes, int32_t *dtypes, int32_t *stypes) {
  char what[128];
  for (int i = 0; i < count; ++i) {
    snprintf(what, sizeof what, "%s: %s %d", op_name, role, i);
    int status = acc_tensor_shape(&tensors[i], what, &shapes[i]);
    if (status != MX_ACC_OK) return status;
    dtypes[i] = tensors[i].dtype;
    if (tensors[i].isSparse != MX_ACC_STORAGE_DENSE && stypes == NULL) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: outputs are dense", what);
    }
    if (stypes != NULL) stypes[i] = tensors[i].isSparse;
  }
  return MX_ACC_OK;
}

int cr_executor_create(const char *op_name, const MXTensor *inputs, const MXTensor *outputs,
                       int num_in, int num_out, const char *const *attr_keys,
                       const char *const *attr_vals, int num_attrs, int dev_id,
                       MXAccExecutor **result) {
  if (num_in < 0 || num_in > CR_MAX_INPUTS || num_out < 1 || num_out > CR_MAX_OUTPUTS) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: %d inputs and %d outputs are not supported",
                    op_name, num_in, num_out);
  }
  if ((num_in > 0 && inputs == NULL) || outputs == NULL ||
      (num_attrs > 0 && (attr_keys == NULL || attr_vals == NULL))) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a required array is NULL", op_name);
  }
  cr_executor *executor = calloc(1, sizeof *executor);
  if (executor == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "executor");
  int status = read_specs(op_name, "input", inputs, num_in, executor->in_shapes,
                          executor->in_dtypes, executor->in_stypes);
  if (status == MX_ACC_OK) {
    status = read_specs(op_name, "output", outputs, num_out, executor->out_shapes,
                        executor->out_dtypes, NULL);
  }
  if (status == MX_ACC_OK) {
    status = cr_resolve_sparse_op("accGetExecutor", op_name, attr_keys, attr_vals,
                                  (size_t)num_attrs, executor->in_shapes, executor->in_dtypes,
                                  executor->in_stypes, num_in, executor->out_shapes,
                                  executor->out_dtypes, num_out, &executor->op,
                                  &executor->params);
  }
  cr_device *device = status == MX_ACC_OK ? cr_device_get(dev_id) : NULL;
  if (status == MX_ACC_OK && device == NULL) status = cr_device_error(dev_id);
  if (status != MX_ACC_OK) {
    free(executor);
    return status;
  }
  /* The device's kernels when the executor is made, for its whole life. */
  executor->params.kernels = (cr_kernels)atomic_load(&device->kernels);
  executor->dev_id = dev_id;
  executor->num_inputs = num_in;
  executor->num_outputs = num_out;
  executor->base.forward = executor_forward;
  executor->base.release = executor_release;
  executor->base.state = executor;
  *result = &executor->base;
  return MX_ACC_OK;
}
