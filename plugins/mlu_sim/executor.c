#include "executor.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "card.h"
#include "cnml.h"
#include "library.h"
#include "ops.h"
#include "status.h"
#include "tensor.h"

typedef struct mlu_executor {
  MXAccExecutor base; /* first, so that &base converts back to the executor */
  int dev_id;
  mlu_node_spec *spec;
  cnmlTensor_t tensors[MLU_NODE_MAX_INPUTS]; /* data inputs (NULL for parameters) */
  cnmlTensor_t output;
  mlu_built_node node;
  cnrtQueue_t queue;
  int compiled;
  unsigned char *params;                     /* parameter bytes compiled with */
  size_t param_offset[MLU_NODE_MAX_INPUTS];
  size_t param_bytes;
} mlu_executor;

static uint64_t spec_bytes(const acc_shape *shape, int32_t dtype) {
  size_t bytes = 0;
  acc_shape_bytes(shape, acc_dtype_size(dtype), "tensor", &bytes); /* checked at creation */
  return bytes;
}

static void executor_release(MXAccExecutor *self) {
  if (self == NULL) return;
  mlu_executor *e = (mlu_executor *)self;
  cnrtDestroyQueue(e->queue);
  mlu_free_node(&e->node);
  for (int i = 0; i < MLU_NODE_MAX_INPUTS; ++i) cnmlDestroyTensor(&e->tensors[i]);
  cnmlDestroyTensor(&e->output);
  free(e->params);
  free(e->spec);
  free(e);
}

/* Checks one tensor of a forward call: shape, dtype, device and memory. */
static int accept_tensor(const mlu_executor *e, const MXTensor *tensor, const acc_shape *shape,
                         int32_t dtype, const char *what) {
  int status = acc_tensor_expect(tensor, what, dtype, shape);
  if (status != MX_ACC_OK) return status;
  if (tensor->dev_id != e->dev_id) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: tensor is on device %d, executor on %d", what,
                    (int)tensor->dev_id, e->dev_id);
  }
  return mlu_card_check(mlu_card_for(e->dev_id), tensor->data, spec_bytes(shape, dtype), what);
}

typedef struct byte_range {
  uintptr_t begin, end;
} byte_range;

static int overlap(byte_range a, byte_range b) {
  return a.begin < a.end && b.begin < b.end && a.begin < b.end && b.begin < a.end;
}

static byte_range range_of(const MXTensor *tensor, uint64_t bytes) {
  byte_range r = {(uintptr_t)tensor->data, (uintptr_t)tensor->data + bytes};
  return r;
}

static int check_forward(const mlu_executor *e, const MXTensor *inputs, int num_in,
                         const MXTensor *outputs, int num_out) {
  const mlu_node_spec *s = e->spec;
  if (num_in != s->num_inputs || num_out != 1 || inputs == NULL || outputs == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward %s: %d inputs and %d outputs, expected %d "
                    "and 1", s->op->name, num_in, num_out, s->num_inputs);
  }
  char what[128];
  snprintf(what, sizeof what, "forward %s: output", s->op->name);
  int status = accept_tensor(e, &outputs[0], &s->out_shape, s->out_dtype, what);
  byte_range written = range_of(&outputs[0], spec_bytes(&s->out_shape, s->out_dtype));
  for (int i = 0; i < num_in && status == MX_ACC_OK; ++i) {
    snprintf(what, sizeof what, "forward %s: input %d", s->op->name, i);
    status = accept_tensor(e, &inputs[i], &s->in_shapes[i], s->in_dtypes[i], what);
    /* The launch reads its inputs while it writes its output. */
    if (status == MX_ACC_OK &&
        overlap(written, range_of(&inputs[i], spec_bytes(&s->in_shapes[i], s->in_dtypes[i])))) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "forward %s: the output overlaps input %d",
                        s->op->name, i);
    }
  }
  return status;
}

/* Binds parameters whose bytes differ from those compiled with (all of
 * them the first time) and compiles again if any did. */
static int refresh_params(mlu_executor *e, const MXTensor *inputs) {
  const mlu_node_spec *s = e->spec;
  cnrtDev_t card = mlu_card_for(e->dev_id);
  int changed = !e->compiled, status = MX_ACC_OK;
  for (int k = 0; k < e->node.num_params && status == MX_ACC_OK; ++k) {
    int index = e->node.param_input[k];
    uint64_t bytes = spec_bytes(&s->in_shapes[index], s->in_dtypes[index]);
    unsigned char *copy = e->params + e->param_offset[index];
    /* Device memory of the simulator is readable here; the comparison is
     * the simulator's stand-in for the host's array version numbers. */
    if (e->compiled && memcmp(copy, inputs[index].data, (size_t)bytes) == 0) continue;
    status = cnrtMemcpy(card, copy, inputs[index].data, (size_t)bytes, CNRT_MEM_TRANS_DIR_DEV2HOST);
    if (status == MX_ACC_OK) {
      status = mlu_bind_param(&e->node, k, copy, s->in_dtypes[index], &s->in_shapes[index]);
    }
    changed = 1;
  }
  if (status == MX_ACC_OK && changed) {
    status = cnmlCompileBaseOp(e->node.op, card);
    e->compiled = status == MX_ACC_OK;
  }
  return status;
}

static int executor_forward(MXAccExecutor *self, const MXTensor *inputs, int num_in,
                            const MXTensor *outputs, int num_out) {
  acc_clear_error();
  if (self == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward: executor is NULL");
  mlu_executor *e = (mlu_executor *)self;
  int status = check_forward(e, inputs, num_in, outputs, num_out);
  if (status == MX_ACC_OK) status = refresh_params(e, inputs);
  if (status != MX_ACC_OK) return status;
  const void *data[MLU_NODE_MAX_INPUTS];
  int count = 0;
  for (int i = 0; i < num_in; ++i) {
    if (e->tensors[i] != NULL) data[count++] = inputs[i].data;
  }
  status = cnmlComputeBaseOpForward(e->node.op, data, count, outputs[0].data, e->queue);
  return status == MX_ACC_OK ? (int)cnrtSyncQueue(e->queue) : status;
}

static int make_tensor(const acc_shape *shape, int32_t dtype, cnmlTensor_t *tensor) {
  int64_t dims[MLU_MAX_NDIM];
  for (int d = 0; d < shape->ndim; ++d) dims[d] = (int64_t)shape->dims[d];
  cnmlDataType_t type = (cnmlDataType_t)mlu_cnml_dtype(dtype);
  return cnmlCreateTensor(tensor, CNML_TENSOR, type, dims, shape->ndim);
}

/* Data tensors, the BaseOp (parameters unbound until the first forward),
 * the parameter copy and the queue. */
static int build(mlu_executor *e) {
  const mlu_node_spec *s = e->spec;
  int status = make_tensor(&s->out_shape, s->out_dtype, &e->output);
  for (int i = 0; i < s->num_inputs && status == MX_ACC_OK; ++i) {
    if (mlu_is_param_input(s->op->kind, i)) {
      e->param_offset[i] = e->param_bytes;
      e->param_bytes += (size_t)spec_bytes(&s->in_shapes[i], s->in_dtypes[i]);
    } else {
      status = make_tensor(&s->in_shapes[i], s->in_dtypes[i], &e->tensors[i]);
    }
  }
  if (status == MX_ACC_OK) status = mlu_build_node(s, e->tensors, e->output, NULL, &e->node);
  if (status == MX_ACC_OK) {
    e->params = malloc(e->param_bytes ? e->param_bytes : 1);
    if (e->params == NULL) status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "executor");
  }
  if (status == MX_ACC_OK) status = cnrtCreateQueue(&e->queue, mlu_card_for(e->dev_id));
  return status;
}

static int read_specs(const char *op_name, const char *role, const MXTensor *tensors, int count,
                      acc_shape *shapes, int32_t *dtypes) {
  char what[128];
  for (int i = 0; i < count; ++i) {
    snprintf(what, sizeof what, "%s: %s %d", op_name, role, i);
    int status = acc_tensor_shape(&tensors[i], what, &shapes[i]);
    if (status != MX_ACC_OK) return status;
    if (tensors[i].isSparse) return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: sparse tensor", what);
    dtypes[i] = tensors[i].dtype;
  }
  return MX_ACC_OK;
}

int mlu_executor_create(const char *op_name, const MXTensor *inputs, const MXTensor *outputs,
                        int num_in, int num_out, const char *const *attr_keys,
                        const char *const *attr_vals, int num_attrs, int dev_id,
                        MXAccExecutor **result) {
  if (num_in < 1 || num_in > MLU_NODE_MAX_INPUTS || num_out != 1) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: %d inputs and %d outputs", op_name, num_in,
                    num_out);
  }
  int attrs_missing = num_attrs > 0 && (attr_keys == NULL || attr_vals == NULL);
  if (inputs == NULL || outputs == NULL || attrs_missing) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a required array is NULL", op_name);
  }
  mlu_executor *e = calloc(1, sizeof *e);
  if (e == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "executor");
  e->spec = calloc(1, sizeof *e->spec);
  acc_shape *shapes = malloc((MLU_NODE_MAX_INPUTS + 1) * sizeof *shapes);
  int32_t dtypes[MLU_NODE_MAX_INPUTS + 1];
  int status = shapes && e->spec ? MX_ACC_OK : acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "executor");
  if (status == MX_ACC_OK) status = read_specs(op_name, "input", inputs, num_in, shapes, dtypes);
  if (status == MX_ACC_OK) {
    status = read_specs(op_name, "output", outputs, 1, shapes + num_in, dtypes + num_in);
  }
  if (status == MX_ACC_OK) {
    status = mlu_resolve_node("accGetExecutor", op_name, attr_keys, attr_vals, (size_t)num_attrs,
                              shapes, dtypes, num_in, shapes + num_in, dtypes + num_in, 1, e->spec);
  }
  free(shapes);
  if (status == MX_ACC_OK) {
    e->dev_id = dev_id;
    status = build(e);
  }
  if (status != MX_ACC_OK) {
    executor_release(&e->base);
    return status;
  }
  e->base.forward = executor_forward;
  e->base.release = executor_release;
  e->base.state = e;
  *result = &e->base;
  return MX_ACC_OK;
}
