/*
 * Identification, errors, configure(), and imperative execution: an
 * executor is one operator prepared by ops.c, run on device memory.
 */
#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "status.h"
#include "template.h"
#include "tensor.h"

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) {
  acc_clear_error();
  if (version / 100 != MX_ACC_API_VERSION_MAJOR) { /* any MINOR of our MAJOR will do */
    return acc_fail(MX_ACC_ERR_VERSION, "template implements ABI %d.x, not %d.%d",
                    MX_ACC_API_VERSION_MAJOR, version / 100, version % 100);
  }
  return MX_ACC_OK; /* a real plugin opens its driver and finds its devices here */
}

MX_ACC_EXPORT int getAccName(char *name, size_t name_size) {
  acc_clear_error();
  if (name == NULL || name_size < sizeof TP_NAME) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "getAccName: needs %zu bytes", sizeof TP_NAME);
  }
  memcpy(name, TP_NAME, sizeof TP_NAME); /* with its NUL */
  return MX_ACC_OK;
}

MX_ACC_EXPORT int getNumAcc(void) { return TP_NUM_DEVICES; }

MX_ACC_EXPORT int supportsImperative(void) { return 1; }

MX_ACC_EXPORT const char *accGetLastError(void) { return acc_last_error(); }

/* ---- imperative mode: an executor is one operator that tp_op_prepare() accepted ---- */

typedef struct tp_executor {
  MXAccExecutor base; /* what the host holds; base.state points back to this */
  tp_op op;
  int dev_id;
} tp_executor;

static int forward(MXAccExecutor *self, const MXTensor *inputs, int num_in,
                   const MXTensor *outputs, int num_out) {
  acc_clear_error();
  const tp_executor *e = self->state;
  const float *in[TP_MAX_INPUTS];
  float *out, *data;
  if (num_in != e->op.num_inputs || num_out != 1 || inputs == NULL || outputs == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward: needs %d inputs, 1 output",
                    e->op.num_inputs);
  }
  int status = tp_tensor_data(&outputs[0], "forward: output", &e->op.out, e->dev_id, 0, &out);
  for (int i = 0; status == MX_ACC_OK && i < num_in; ++i) {
    status = tp_tensor_data(&inputs[i], "forward: input", &e->op.in[i], e->dev_id, 0, &data);
    in[i] = data;
  }
  if (status == MX_ACC_OK) tp_op_run(&e->op, in, out);
  return status;
}

static void release(MXAccExecutor *self) { free(self->state); }

MX_ACC_EXPORT int accGetExecutor(const char *op_name, const MXTensor *inputs,
                                 const MXTensor *outputs, int num_in, int num_out,
                                 const char *const *attr_keys, const char *const *attr_vals,
                                 int num_attrs, int dev_id, MXAccExecutor **executor) {
  acc_clear_error();
  int status = tp_check_device("accGetExecutor", dev_id);
  if (status != MX_ACC_OK) return status;
  int valid = op_name != NULL && executor != NULL && num_in >= 0 && num_out >= 0 &&
              (num_in == 0 || inputs != NULL) && (num_out == 0 || outputs != NULL) &&
              num_attrs >= 0 && (num_attrs == 0 || (attr_keys != NULL && attr_vals != NULL));
  for (int i = 0; valid && i < num_attrs; ++i) valid = attr_keys[i] && attr_vals[i];
  if (!valid) return acc_fail(MX_ACC_ERR_INVALID_ARG, "accGetExecutor: NULL or negative");
  if (num_in > TP_MAX_INPUTS || num_out != 1) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: %d inputs, %d outputs", op_name, num_in, num_out);
  }
  acc_shape in[TP_MAX_INPUTS], out;
  tp_op op;
  for (int i = 0; status == MX_ACC_OK && i <= num_in; ++i) { /* the inputs, then the output */
    const MXTensor *tensor = i < num_in ? &inputs[i] : &outputs[0];
    status = tensor->dtype != kFloat32
                 ? acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: on %s", op_name,
                            acc_dtype_name(tensor->dtype))
                 : acc_tensor_shape(tensor, op_name, i < num_in ? &in[i] : &out);
  }
  if (status == MX_ACC_OK) {
    status = tp_op_prepare(op_name, attr_keys, attr_vals, (size_t)num_attrs, num_in, in, &out,
                           &op);
  }
  if (status != MX_ACC_OK) return status;
  tp_executor *e = malloc(sizeof *e);
  if (e == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "accGetExecutor");
  *e = (tp_executor){{forward, release, e}, op, dev_id};
  *executor = &e->base;
  return MX_ACC_OK;
}

/* ---- configuration ----------------------------------------------------------------------- */

/* configure()'s answer, valid until the next call (the host serializes
 * configure() calls). */
enum { TP_MAX_ANSWERS = 8 };
static const char *answer_keys[TP_MAX_ANSWERS], *answer_vals[TP_MAX_ANSWERS];

/* Keys: "query" = keys | ops | version, and "memory_limit" = the bytes the
 * device may hand out (0: no limit), a setting that answers nothing. */
MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  acc_clear_error();
  int status = tp_check_device("configure", dev_id), count = 0;
  if (status == MX_ACC_OK && (num_in < 0 || (num_in > 0 && (!in_keys || !in_vals)) ||
                              !out_keys || !out_vals || !num_out)) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: NULL or negative");
  }
  int64_t limit = -1; /* set once the whole call is known to be valid */
  for (int i = 0; status == MX_ACC_OK && i < num_in; ++i) {
    const char *key = in_keys[i], *value = in_vals[i], *answer = NULL;
    if (key == NULL || value == NULL) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: pair %d holds NULL", i);
    } else if (strcmp(key, "memory_limit") == 0) {
      if (acc_attr_int(value, &limit) != 0 || limit < 0) {
        status = acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: memory_limit=%s", value);
      }
    } else if (strcmp(key, "query") != 0) {
      status = acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown key %s", key);
    } else if (strcmp(value, "keys") == 0) {
      answer = "query,memory_limit";
    } else if (strcmp(value, "ops") == 0) {
      answer = tp_op_list;
    } else if (strcmp(value, "version") == 0) {
      answer = TP_VERSION;
    } else {
      status = acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown query %s", value);
    }
    if (answer != NULL && count == TP_MAX_ANSWERS) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: more than %d queries", count);
    } else if (answer != NULL) {
      answer_keys[count] = value; /* the query's name is the answer's key */
      answer_vals[count++] = answer;
    }
  }
  if (status != MX_ACC_OK) return status;
  if (limit >= 0) tp_mem_set_limit(dev_id, (uint64_t)limit);
  *out_keys = answer_keys;
  *out_vals = answer_vals;
  *num_out = count;
  return MX_ACC_OK;
}
