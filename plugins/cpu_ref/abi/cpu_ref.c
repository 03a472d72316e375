/*
 * cpu_ref: the reference CPU accelerator of acc-host.
 *
 * This file holds the exported entry points of mxnet_acc.h and nothing else:
 * each one clears the thread's error message, checks its arguments, and
 * delegates to the module of its concern (library.c, memory.c,
 * configure.c, executor.c, model/, ops/). Copy this layout for a new
 * plugin; README.md maps each file to its concern.
 *
 * Devices: CPU_REF_NUM_DEVICES (1 .. 16, default 1) "devices" that all run
 * on the host CPU; each keeps its own allocations and thread count.
 */
#include <string.h>

#include "configure.h"
#include "executor.h"
#include "kernels.h"
#include "library.h"
#include "model.h"
#include "mxnet_acc.h"
#include "status.h"
#include "tensor.h"

#ifndef CR_NAME /* test builds rename the library with -DCR_NAME='"..."' */
#define CR_NAME "cpu_ref"
#endif

/* ---- identification ---------------------------------------------------- */

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) {
  acc_clear_error();
  if (version / 100 != MX_ACC_API_VERSION_MAJOR) {
    return acc_fail(MX_ACC_ERR_VERSION, "cpu_ref implements ABI %d.%d and cannot work with a "
                    "host of ABI %d.%d", MX_ACC_API_VERSION_MAJOR, MX_ACC_API_VERSION_MINOR,
                    version / 100, version % 100);
  }
  return cr_library_initialize();
}

MX_ACC_EXPORT int getAccName(char *name, size_t name_size) {
  acc_clear_error();
  if (name == NULL || name_size < sizeof CR_NAME) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "getAccName needs a buffer of %zu bytes",
                    sizeof CR_NAME);
  }
  memcpy(name, CR_NAME, sizeof CR_NAME);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int getNumAcc(void) { return cr_library_num_devices(); }

MX_ACC_EXPORT int supportsImperative(void) { return 1; }

/* ---- memory ------------------------------------------------------------ */

MX_ACC_EXPORT int mx_alloc(int dev_id, size_t size, void **ptr) {
  acc_clear_error();
  cr_device *device = cr_device_get(dev_id);
  if (device == NULL) return cr_device_error(dev_id);
  if (ptr == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "mx_alloc: ptr is NULL");
  pthread_mutex_lock(&device->lock);
  int status = cr_memory_alloc(&device->memory, size, ptr);
  pthread_mutex_unlock(&device->lock);
  return status;
}

MX_ACC_EXPORT int mx_free(int dev_id, void *ptr) {
  acc_clear_error();
  cr_device *device = cr_device_get(dev_id);
  if (device == NULL) return cr_device_error(dev_id);
  pthread_mutex_lock(&device->lock);
  int status = cr_memory_free(&device->memory, ptr);
  pthread_mutex_unlock(&device->lock);
  return status;
}

MX_ACC_EXPORT int mx_releaseAll(int dev_id) {
  acc_clear_error();
  cr_device *device = cr_device_get(dev_id);
  if (device == NULL) return cr_device_error(dev_id);
  pthread_mutex_lock(&device->lock);
  cr_memory_release_all(&device->memory);
  pthread_mutex_unlock(&device->lock);
  return MX_ACC_OK;
}

/* Checks a copy between host and device memory (acc_check_copy) on one
 * of this plugin's devices and returns its size and the device's threads. */
static int check_copy(const MXTensor *device_side, const MXTensor *host_side, const char *call,
                      size_t *bytes, int *num_threads) {
  int status = acc_check_copy(device_side, host_side, call, bytes);
  if (status != MX_ACC_OK) return status;
  cr_device *device = cr_device_get(device_side->dev_id);
  if (device == NULL) return cr_device_error(device_side->dev_id);
  *num_threads = atomic_load(&device->num_threads);
  return cr_check_data(device_side->dev_id, device_side, *bytes, call);
}

/* A large copy (a batch of images) is shared between the device's
 * threads (cr_copy_bytes): squeezenet's 8 x 3 x 224 x 224 input, 4.8 MB,
 * is a memcpy of about 0.4 ms on one core. */
MX_ACC_EXPORT int copyToAcc(const MXTensor *dst, const MXTensor *src) {
  acc_clear_error();
  size_t bytes;
  int num_threads = 1;
  int status = check_copy(dst, src, "copyToAcc", &bytes, &num_threads);
  if (status == MX_ACC_OK && bytes > 0) cr_copy_bytes(bytes, src->data, dst->data, num_threads);
  return status;
}

MX_ACC_EXPORT int copyFromAcc(const MXTensor *dst, const MXTensor *src) {
  acc_clear_error();
  size_t bytes;
  int num_threads = 1;
  int status = check_copy(src, dst, "copyFromAcc", &bytes, &num_threads);
  if (status == MX_ACC_OK && bytes > 0) cr_copy_bytes(bytes, src->data, dst->data, num_threads);
  return status;
}

/* ---- imperative execution ---------------------------------------------- */

MX_ACC_EXPORT int accGetExecutor(const char *op_name, const MXTensor *inputs,
                                 const MXTensor *outputs, int num_in, int num_out,
                                 const char *const *attr_keys, const char *const *attr_vals,
                                 int num_attrs, int dev_id, MXAccExecutor **executor) {
  acc_clear_error();
  if (cr_device_get(dev_id) == NULL) return cr_device_error(dev_id);
  if (op_name == NULL || executor == NULL || num_attrs < 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "accGetExecutor: op_name or executor is NULL, or "
                    "num_attrs is negative");
  }
  return cr_executor_create(op_name, inputs, outputs, num_in, num_out, attr_keys, attr_vals,
                            num_attrs, dev_id, executor);
}

/* ---- symbolic execution ------------------------------------------------ */

MX_ACC_EXPORT int supportedOps(const char *json, const char *const *data_names,
                               const MXTensor *data, int num_data, int dev_id, int *ids,
                               int ids_capacity, int *num_ids) {
  acc_clear_error();
  if (cr_device_get(dev_id) == NULL) return cr_device_error(dev_id);
  if (json == NULL || num_ids == NULL || ids_capacity < 0 || (ids_capacity > 0 && ids == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "supportedOps: json, ids or num_ids is invalid");
  }
  int status = acc_check_named_tensors("supportedOps", data_names, data, num_data);
  if (status != MX_ACC_OK) return status;
  return cr_model_supported(json, ids, ids_capacity, num_ids, NULL, 0);
}

MX_ACC_EXPORT int retainsWeights(void) { return CR_RETAIN_WEIGHTS; }

/* dot and FullyConnected with CSR data, Embedding and take with row-sparse
 * tables (ops/ops_sparse.c). */
MX_ACC_EXPORT int supportsSparse(void) { return 1; }

MX_ACC_EXPORT int supportedOpsReasons(const char *json, const char *const *data_names,
                                      const MXTensor *data, int num_data, int dev_id, int *ids,
                                      int ids_capacity, int *num_ids, char *reasons,
                                      size_t reason_size) {
  acc_clear_error();
  if (reasons == NULL || reason_size == 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "supportedOpsReasons: reasons is NULL or empty");
  }
  if (cr_device_get(dev_id) == NULL) return cr_device_error(dev_id);
  if (json == NULL || num_ids == NULL || ids_capacity < 0 || (ids_capacity > 0 && ids == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG,
                    "supportedOpsReasons: json, ids or num_ids is invalid");
  }
  int status = acc_check_named_tensors("supportedOpsReasons", data_names, data, num_data);
  if (status != MX_ACC_OK) return status;
  return cr_model_supported(json, ids, ids_capacity, num_ids, reasons, reason_size);
}

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  acc_clear_error();
  if (cr_device_get(dev_id) == NULL) return cr_device_error(dev_id);
  if (model_id == NULL || model_id[0] == '\0' || json == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: model_id or json is NULL or empty");
  }
  int status = acc_check_named_tensors("loadModel", data_names, data, num_data);
  if (status != MX_ACC_OK) return status;
  if (cr_library_model_loaded(model_id)) return cr_library_already_loaded(model_id);
  cr_model *model;
  status = cr_model_load(model_id, json, data_names, data, num_data, dev_id, &model);
  return status == MX_ACC_OK ? cr_library_add_model(model) : status;
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  acc_clear_error();
  if (model_id == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "unloadModel: model_id is NULL");
  return cr_library_unload_model(model_id);
}

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  acc_clear_error();
  if (model_id == NULL || num_in < 0 || num_out < 0 ||
      (num_in > 0 && (in_names == NULL || in_data == NULL)) ||
      (num_out > 0 && (out_names == NULL || out_data == NULL))) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: NULL array or negative count");
  }
  cr_model *model = cr_library_find_model(model_id);
  if (model == NULL) return MX_ACC_ERR_NOT_FOUND;
  cr_device *device = cr_device_get(model->dev_id);
  if (device == NULL) return cr_device_error(model->dev_id);
  return cr_model_infer(model, in_names, out_names, in_data, out_data, num_in, num_out,
                        atomic_load(&device->num_threads));
}

/* ---- configuration ----------------------------------------------------- */

MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  acc_clear_error();
  return cr_configure(in_keys, in_vals, num_in, dev_id, out_keys, out_vals, num_out);
}

/* ---- errors ------------------------------------------------------------ */

MX_ACC_EXPORT const char *accGetLastError(void) { return acc_last_error(); }
