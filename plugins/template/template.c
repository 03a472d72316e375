/*
 * The exported entry points of the template plugin (include/mxnet_acc.h).
 * Each one clears the calling thread's error message, checks every pointer,
 * count and dev_id it receives, and delegates: memory.c (device memory),
 * ops.c (operators, also for executors), model.c (symbolic mode). The
 * imperative executor and configure() live here, being small.
 *
 * Errors: acc_fail() (plugins/common/status.h) records a message in a
 * thread-local buffer and returns the status, so a failure on one thread
 * never shows in another thread's accGetLastError().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "status.h"
#include "template.h"
#include "tensor.h"

/* ---- identification ------------------------------------------------------------ */

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) {
  acc_clear_error();
  if (version / 100 != MX_ACC_API_VERSION_MAJOR) { /* any MINOR of our MAJOR is fine */
    return acc_fail(MX_ACC_ERR_VERSION, "template implements ABI %d.%d, not the host's %d.%d",
                    MX_ACC_API_VERSION_MAJOR, MX_ACC_API_VERSION_MINOR, version / 100,
                    version % 100);
  }
  return MX_ACC_OK; /* a real plugin opens its driver and counts devices here */
}

MX_ACC_EXPORT int getAccName(char *name, size_t name_size) {
  acc_clear_error();
  if (name == NULL || name_size < sizeof TP_NAME) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "getAccName: the name needs %zu bytes",
                    sizeof TP_NAME);
  }
  memcpy(name, TP_NAME, sizeof TP_NAME); /* with its NUL */
  return MX_ACC_OK;
}

MX_ACC_EXPORT int getNumAcc(void) { return TP_NUM_DEVICES; }

MX_ACC_EXPORT int supportsImperative(void) { return 1; }

MX_ACC_EXPORT const char *accGetLastError(void) { return acc_last_error(); }

/* ---- memory --------------------------------------------------------------------- */

MX_ACC_EXPORT int mx_alloc(int dev_id, size_t size, void **ptr) {
  acc_clear_error();
  int status = tp_check_device("mx_alloc", dev_id);
  if (status != MX_ACC_OK) return status;
  if (ptr == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "mx_alloc: ptr is NULL");
  return tp_mem_alloc(dev_id, size, ptr);
}

MX_ACC_EXPORT int mx_free(int dev_id, void *ptr) {
  acc_clear_error();
  int status = tp_check_device("mx_free", dev_id);
  return status != MX_ACC_OK ? status : tp_mem_free(dev_id, ptr);
}

MX_ACC_EXPORT int mx_releaseAll(int dev_id) {
  acc_clear_error();
  int status = tp_check_device("mx_releaseAll", dev_id);
  if (status == MX_ACC_OK) tp_mem_release_all(dev_id);
  return status;
}

/* One copy between host and device memory: acc_check_copy checks the
 * descriptors against each other, then the device side must be memory of
 * its device. Any dtype: the bytes are copied as they are. */
static int copy(const MXTensor *device_side, const MXTensor *host_side, int to_device,
                const char *call) {
  size_t bytes;
  int status = acc_check_copy(device_side, host_side, call, &bytes);
  if (status == MX_ACC_OK) status = tp_check_device(call, device_side->dev_id);
  if (status == MX_ACC_OK) status = tp_mem_check(device_side->dev_id, device_side->data, bytes, call);
  if (status == MX_ACC_OK && bytes > 0) {
    memcpy(to_device ? device_side->data : host_side->data,
           to_device ? host_side->data : device_side->data, bytes);
  }
  return status;
}

MX_ACC_EXPORT int copyToAcc(const MXTensor *dst, const MXTensor *src) {
  acc_clear_error();
  return copy(dst, src, 1, "copyToAcc");
}

MX_ACC_EXPORT int copyFromAcc(const MXTensor *dst, const MXTensor *src) {
  acc_clear_error();
  return copy(src, dst, 0, "copyFromAcc");
}

/* ---- imperative execution ---------------------------------------------------------- */

typedef struct tp_executor {
  tp_op op;
  int dev_id;
} tp_executor;

/* 1 if [a, a + a_bytes) and [b, b + b_bytes) share a byte. */
static int overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

static int forward(MXAccExecutor *self, const MXTensor *inputs, int num_in,
                   const MXTensor *outputs, int num_out) {
  acc_clear_error();
  if (self == NULL || self->state == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward: no executor");
  const tp_executor *e = self->state;
  if (num_in != e->op.num_inputs || num_out != 1 || inputs == NULL || outputs == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "forward: expected %d inputs and 1 output, got %d "
                    "and %d", e->op.num_inputs, num_in, num_out);
  }
  const float *in[TP_MAX_INPUTS];
  float *out, *data;
  size_t out_bytes, in_bytes;
  int status = tp_tensor_data(&outputs[0], "forward: output", &e->op.out, e->dev_id, 0, &out);
  if (status == MX_ACC_OK) status = acc_shape_bytes(&e->op.out, sizeof(float), "", &out_bytes);
  for (int i = 0; status == MX_ACC_OK && i < num_in; ++i) {
    status = tp_tensor_data(&inputs[i], "forward: input", &e->op.in[i], e->dev_id, 0, &data);
    in[i] = data;
    acc_shape_bytes(&e->op.in[i], sizeof(float), "", &in_bytes); /* checked just above */
    /* The element-wise ops run in place; the others read inputs after writing. */
    if (status == MX_ACC_OK && e->op.kind != TP_RELU && e->op.kind != TP_ADD &&
        e->op.kind != TP_FLATTEN && overlap(out, out_bytes, data, in_bytes)) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "forward: the output overlaps input %d", i);
    }
  }
  if (status == MX_ACC_OK) tp_op_run(&e->op, in, out);
  return status;
}

static void release(MXAccExecutor *self) {
  if (self == NULL) return;
  free(self->state);
  free(self);
}

MX_ACC_EXPORT int accGetExecutor(const char *op_name, const MXTensor *inputs,
                                 const MXTensor *outputs, int num_in, int num_out,
                                 const char *const *attr_keys, const char *const *attr_vals,
                                 int num_attrs, int dev_id, MXAccExecutor **executor) {
  acc_clear_error();
  int status = tp_check_device("accGetExecutor", dev_id);
  if (status != MX_ACC_OK) return status;
  if (op_name == NULL || executor == NULL || num_in < 0 || num_out < 0 ||
      (num_in > 0 && inputs == NULL) || (num_out > 0 && outputs == NULL) || num_attrs < 0 ||
      (num_attrs > 0 && (attr_keys == NULL || attr_vals == NULL))) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "accGetExecutor: a NULL pointer or negative count");
  }
  for (int i = 0; i < num_attrs; ++i) {
    if (attr_keys[i] == NULL || attr_vals[i] == NULL) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "accGetExecutor: attribute %d is NULL", i);
    }
  }
  if (num_in > TP_MAX_INPUTS || num_out != 1) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "accGetExecutor: %s with %d inputs and %d outputs",
                    op_name, num_in, num_out);
  }
  acc_shape in[TP_MAX_INPUTS], out;
  for (int i = 0; i <= num_in; ++i) { /* the inputs, then the output */
    const MXTensor *tensor = i < num_in ? &inputs[i] : &outputs[0];
    if (tensor->dtype != kFloat32) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "accGetExecutor: %s on %s", op_name,
                      acc_dtype_name(tensor->dtype));
    }
    status = acc_tensor_shape(tensor, "accGetExecutor", i < num_in ? &in[i] : &out);
    if (status != MX_ACC_OK) return status;
  }
  tp_executor *state = malloc(sizeof *state);
  MXAccExecutor *made = malloc(sizeof *made);
  status = state == NULL || made == NULL
               ? acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "accGetExecutor")
               : tp_op_prepare(op_name, attr_keys, attr_vals, (size_t)num_attrs, num_in, in, &out,
                               &state->op);
  if (status != MX_ACC_OK) {
    free(state);
    free(made);
    return status;
  }
  state->dev_id = dev_id;
  *made = (MXAccExecutor){forward, release, state};
  *executor = made;
  return MX_ACC_OK;
}

/* ---- symbolic execution -------------------------------------------------------------- */

MX_ACC_EXPORT int supportedOps(const char *json, const char *const *data_names,
                               const MXTensor *data, int num_data, int dev_id, int *ids,
                               int ids_capacity, int *num_ids) {
  acc_clear_error();
  int status = tp_check_device("supportedOps", dev_id);
  if (status != MX_ACC_OK) return status;
  if (json == NULL || num_ids == NULL || ids_capacity < 0 || (ids_capacity > 0 && ids == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "supportedOps: json, ids or num_ids is invalid");
  }
  status = acc_check_named_tensors("supportedOps", data_names, data, num_data);
  return status != MX_ACC_OK ? status : tp_model_supported(json, ids, ids_capacity, num_ids);
}

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  acc_clear_error();
  int status = tp_check_device("loadModel", dev_id);
  if (status != MX_ACC_OK) return status;
  if (model_id == NULL || model_id[0] == '\0' || json == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: model_id or json is NULL or empty");
  }
  status = acc_check_named_tensors("loadModel", data_names, data, num_data);
  return status != MX_ACC_OK ? status
                             : tp_model_load(model_id, json, data_names, data, num_data, dev_id);
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  acc_clear_error();
  if (model_id == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "unloadModel: model_id is NULL");
  return tp_model_unload(model_id);
}

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  acc_clear_error();
  if (model_id == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: model_id is NULL");
  int status = acc_check_named_tensors("infer", in_names, in_data, num_in);
  if (status == MX_ACC_OK) status = acc_check_named_tensors("infer", out_names, out_data, num_out);
  return status != MX_ACC_OK ? status : tp_model_infer(model_id, in_names, out_names, in_data,
                                                       out_data, num_in, num_out);
}

/* ---- configuration --------------------------------------------------------------------- */

/* configure()'s answer, valid until the next configure() call: one static
 * object, since the host serializes configure() calls. */
enum { TP_MAX_ANSWERS = 8 };
static struct {
  const char *keys[TP_MAX_ANSWERS], *vals[TP_MAX_ANSWERS];
  char numbers[TP_MAX_ANSWERS][24]; /* storage for values that are numbers */
  int count;
} answer;

static int add_answer(const char *key, const char *value) {
  if (answer.count == TP_MAX_ANSWERS) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: more than %d answers", TP_MAX_ANSWERS);
  }
  answer.keys[answer.count] = key;
  answer.vals[answer.count++] = value;
  return MX_ACC_OK;
}

static int add_number(const char *key, uint64_t value) {
  if (answer.count < TP_MAX_ANSWERS) {
    snprintf(answer.numbers[answer.count], sizeof answer.numbers[0], "%llu",
             (unsigned long long)value);
  }
  return add_answer(key, answer.numbers[answer.count < TP_MAX_ANSWERS ? answer.count : 0]);
}

/* Keys: "query" (keys, ops, version, and memory: the device's live
 * allocations, bytes in use and limit) and "memory_limit" (bytes the device
 * may hand out, 0 for no limit; a setting, answered by nothing). */
MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  acc_clear_error();
  int status = tp_check_device("configure", dev_id);
  if (status != MX_ACC_OK) return status;
  if (num_in < 0 || (num_in > 0 && (in_keys == NULL || in_vals == NULL)) || out_keys == NULL ||
      out_vals == NULL || num_out == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: a NULL pointer or negative count");
  }
  answer.count = 0;
  int64_t limit = -1; /* applied once the whole call is known to be valid */
  for (int i = 0; status == MX_ACC_OK && i < num_in; ++i) {
    const char *key = in_keys[i], *value = in_vals[i];
    uint64_t allocations, bytes, current_limit;
    if (key == NULL || value == NULL) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: pair %d has a NULL key or value", i);
    } else if (strcmp(key, "memory_limit") == 0) {
      if (acc_attr_int(value, &limit) != 0 || limit < 0) {
        status = acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: memory_limit=%s is not a number "
                          "of bytes", value);
      }
    } else if (strcmp(key, "query") != 0) {
      status = acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown key %s", key);
    } else if (strcmp(value, "keys") == 0) {
      status = add_answer("keys", "query,memory_limit");
    } else if (strcmp(value, "ops") == 0) {
      status = add_answer("ops", tp_op_list);
    } else if (strcmp(value, "version") == 0) {
      status = add_answer("version", TP_VERSION);
    } else if (strcmp(value, "memory") == 0) {
      tp_mem_stats(dev_id, &allocations, &bytes, &current_limit);
      status = add_number("allocations", allocations);
      if (status == MX_ACC_OK) status = add_number("bytes_in_use", bytes);
      if (status == MX_ACC_OK) status = add_number("memory_limit", current_limit);
    } else {
      status = acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown query %s", value);
    }
  }
  if (status != MX_ACC_OK) return status;
  if (limit >= 0) tp_mem_set_limit(dev_id, (uint64_t)limit);
  *out_keys = answer.keys;
  *out_vals = answer.vals;
  *num_out = answer.count;
  return MX_ACC_OK;
}
