#include "executor.h"

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
  acc_shape in_shapes[CR_MAX_INPUTS];
  acc_shape out_shape;
} cr_executor;

/* Checks one tensor of a forward() call and views it for the kernels. */
static int accept_tensor(const cr_executor *executor, const MXTensor *tensor,
                         const acc_shape *shape, const char *what, cr_tensor *view) {
  int status = acc_tensor_expect(tensor, what, kFloat32, shape);
  if (status != MX_ACC_OK) return status;
  if (tensor->dev_id != executor->dev_id) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: tensor is on device %d, executor on %d", what,
                    (int)tensor->dev_id, executor->dev_id);
  }
  size_t bytes;
  status = acc_shape_bytes(shape, sizeof(float), what, &bytes);
  if (status == MX_ACC_OK) status = cr_check_data(executor->dev_id, tensor, bytes, what);
  view->data = tensor->data;
  view->shape = *shape;
  return status;
}

static int executor_forward(MXAccExecutor *self, const MXTensor *inputs, int num_in,
                            const MXTensor *outputs, int num_out) {
  acc_clear_error();
  if (self == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward: executor is NULL");
  cr_executor *executor = (cr_executor *)self;
  if (num_in != executor->num_inputs || num_out != 1) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward %s: %d inputs and %d outputs, expected %d "
                    "and 1", executor->op->name, num_in, num_out, executor->num_inputs);
  }
  if (inputs == NULL || outputs == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward %s: tensor array is NULL",
                    executor->op->name);
  }
  cr_device *device = cr_device_get(executor->dev_id);
  if (device == NULL) return MX_ACC_ERR_STATE;
  cr_tensor in_views[CR_MAX_INPUTS], out_view;
  char what[128];
  int status = MX_ACC_OK;
  for (int i = 0; i < num_in && status == MX_ACC_OK; ++i) {
    snprintf(what, sizeof what, "forward %s: input %d", executor->op->name, i);
    status = accept_tensor(executor, &inputs[i], &executor->in_shapes[i], what, &in_views[i]);
  }
  if (status == MX_ACC_OK) {
    snprintf(what, sizeof what, "forward %s: output 0", executor->op->name);
    status = accept_tensor(executor, &outputs[0], &executor->out_shape, what, &out_view);
  }
  if (status != MX_ACC_OK) return status;
  executor->op->run(&executor->params, in_views, num_in, &out_view,
                    atomic_load(&device->num_threads));
  return MX_ACC_OK;
}

static void executor_release(MXAccExecutor *self) { free(self); }

int cr_executor_create(const char *op_name, const MXTensor *inputs, const MXTensor *outputs,
                       int num_in, int num_out, const char *const *attr_keys,
                       const char *const *attr_vals, int num_attrs, int dev_id,
                       MXAccExecutor **result) {
  if (num_in < 0 || num_in > CR_MAX_INPUTS || num_out != 1) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: %d inputs and %d outputs are not supported",
                    op_name, num_in, num_out);
  }
  if ((num_in > 0 && inputs == NULL) || outputs == NULL ||
      (num_attrs > 0 && (attr_keys == NULL || attr_vals == NULL))) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a required array is NULL", op_name);
  }
  cr_executor *executor = calloc(1, sizeof *executor);
  if (executor == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "executor");
  int32_t in_dtypes[CR_MAX_INPUTS];
  int status = MX_ACC_OK;
  char what[128];
  for (int i = 0; i < num_in && status == MX_ACC_OK; ++i) {
    snprintf(what, sizeof what, "%s: input %d", op_name, i);
    status = acc_tensor_shape(&inputs[i], what, &executor->in_shapes[i]);
    in_dtypes[i] = inputs[i].dtype;
  }
  if (status == MX_ACC_OK) {
    snprintf(what, sizeof what, "%s: output 0", op_name);
    status = acc_tensor_shape(&outputs[0], what, &executor->out_shape);
  }
  if (status == MX_ACC_OK) {
    status = cr_resolve_op("accGetExecutor", op_name, attr_keys, attr_vals, (size_t)num_attrs,
                           executor->in_shapes, in_dtypes, num_in, &executor->out_shape,
                           outputs[0].dtype, &executor->op, &executor->params);
  }
  if (status != MX_ACC_OK) {
    free(executor);
    return status;
  }
  executor->dev_id = dev_id;
  executor->num_inputs = num_in;
  executor->base.forward = executor_forward;
  executor->base.release = executor_release;
  executor->base.state = executor;
  *result = &executor->base;
  return MX_ACC_OK;
}
