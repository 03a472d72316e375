/*
 * mlu_sim: a simulated Cambricon MLU behind mxnet_acc.h.
 *
 * This file holds the exported entry points and nothing else: each clears
 * the thread's error message, checks its arguments, and delegates to the
 * module of its concern: library.c (cards, model registry), memory through
 * the CNRT-like API (cnml.c), executor.c (imperative mode), model.c
 * (symbolic mode), ops.c (supported operators), configure.c.
 *
 * Devices: MLU_SIM_NUM_CARDS simulated cards (1 .. 16, default 4), read at
 * initialize(); each has its own device memory, queues, parameters and
 * statistics. Device pointers handed to the host are addresses in a card's
 * simulated DRAM; the host never dereferences them.
 */
#include <string.h>

#include "card.h"
#include "cnml.h"
#include "configure.h"
#include "executor.h"
#include "library.h"
#include "model.h"
#include "mxnet_acc.h"
#include "status.h"
#include "tensor.h"

#define MLU_NAME "mlu"

/* ---- identification ----------------------------------------------------------- */

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) {
  acc_clear_error();
  if (version / 100 != MX_ACC_API_VERSION_MAJOR) {
    return acc_fail(MX_ACC_ERR_VERSION, "mlu_sim implements ABI %d.%d and cannot work with a host "
                    "of ABI %d.%d", MX_ACC_API_VERSION_MAJOR, MX_ACC_API_VERSION_MINOR,
                    version / 100, version % 100);
  }
  return mlu_library_initialize();
}

MX_ACC_EXPORT int getAccName(char *name, size_t name_size) {
  acc_clear_error();
  if (name == NULL || name_size < sizeof MLU_NAME) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "getAccName needs a buffer of %zu bytes",
                    sizeof MLU_NAME);
  }
  memcpy(name, MLU_NAME, sizeof MLU_NAME);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int getNumAcc(void) { return mlu_library_instance()->num_cards; }

MX_ACC_EXPORT int supportsImperative(void) { return 1; }

/* ---- memory --------------------------------------------------------------------- */

MX_ACC_EXPORT int mx_alloc(int dev_id, size_t size, void **ptr) {
  acc_clear_error();
  cnrtDev_t card = mlu_card_for(dev_id);
  if (card == NULL) return mlu_device_status(dev_id);
  if (ptr == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "mx_alloc: ptr is NULL");
  return cnrtMalloc(card, ptr, size);
}

MX_ACC_EXPORT int mx_free(int dev_id, void *ptr) {
  acc_clear_error();
  cnrtDev_t card = mlu_card_for(dev_id);
  if (card == NULL) return mlu_device_status(dev_id);
  return cnrtFree(card, ptr);
}

MX_ACC_EXPORT int mx_releaseAll(int dev_id) {
  acc_clear_error();
  cnrtDev_t card = mlu_card_for(dev_id);
  if (card == NULL) return mlu_device_status(dev_id);
  mlu_card_release_tag(card, MLU_MEM_USER); /* models keep their own memory */
  return MX_ACC_OK;
}

/* Checks a copy between host and device memory (acc_check_copy) on one
 * of this plugin's devices and returns its size. */
static int check_copy(const MXTensor *device_side, const MXTensor *host_side, const char *call,
                      size_t *bytes) {
  int status = acc_check_copy(device_side, host_side, call, bytes);
  if (status != MX_ACC_OK) return status;
  if (mlu_card_for(device_side->dev_id) == NULL) return mlu_device_status(device_side->dev_id);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int copyToAcc(const MXTensor *dst, const MXTensor *src) {
  acc_clear_error();
  size_t bytes;
  int status = check_copy(dst, src, "copyToAcc", &bytes);
  if (status != MX_ACC_OK) return status;
  return cnrtMemcpy(mlu_card_for(dst->dev_id), dst->data, src->data, bytes,
                    CNRT_MEM_TRANS_DIR_HOST2DEV);
}

MX_ACC_EXPORT int copyFromAcc(const MXTensor *dst, const MXTensor *src) {
  acc_clear_error();
  size_t bytes;
  int status = check_copy(src, dst, "copyFromAcc", &bytes);
  if (status != MX_ACC_OK) return status;
  return cnrtMemcpy(mlu_card_for(src->dev_id), dst->data, src->data, bytes,
                    CNRT_MEM_TRANS_DIR_DEV2HOST);
}

/* ---- imperative execution -------------------------------------------------------- */

MX_ACC_EXPORT int accGetExecutor(const char *op_name, const MXTensor *inputs,
                                 const MXTensor *outputs, int num_in, int num_out,
                                 const char *const *attr_keys, const char *const *attr_vals,
                                 int num_attrs, int dev_id, MXAccExecutor **executor) {
  acc_clear_error();
  if (mlu_card_for(dev_id) == NULL) return mlu_device_status(dev_id);
  if (op_name == NULL || executor == NULL || num_attrs < 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "accGetExecutor: op_name or executor is NULL, or "
                    "num_attrs is negative");
  }
  return mlu_executor_create(op_name, inputs, outputs, num_in, num_out, attr_keys, attr_vals,
                             num_attrs, dev_id, executor);
}

/* ---- symbolic execution ------------------------------------------------------------ */

MX_ACC_EXPORT int supportedOps(const char *json, const char *const *data_names,
                               const MXTensor *data, int num_data, int dev_id, int *ids,
                               int ids_capacity, int *num_ids) {
  acc_clear_error();
  if (mlu_card_for(dev_id) == NULL) return mlu_device_status(dev_id);
  if (json == NULL || num_ids == NULL || ids_capacity < 0 || (ids_capacity > 0 && ids == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "supportedOps: json, ids or num_ids is invalid");
  }
  int status = acc_check_named_tensors("supportedOps", data_names, data, num_data);
  if (status != MX_ACC_OK) return status;
  return mlu_model_supported(json, mlu_library_instance()->num_cards, ids, ids_capacity, num_ids,
                             NULL, 0);
}

MX_ACC_EXPORT int supportedOpsReasons(const char *json, const char *const *data_names,
                                      const MXTensor *data, int num_data, int dev_id, int *ids,
                                      int ids_capacity, int *num_ids, char *reasons,
                                      size_t reason_size) {
  acc_clear_error();
  if (mlu_card_for(dev_id) == NULL) return mlu_device_status(dev_id);
  if (json == NULL || num_ids == NULL || ids_capacity < 0 || (ids_capacity > 0 && ids == NULL) ||
      reasons == NULL || reason_size == 0) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG,
                    "supportedOpsReasons: json, ids, num_ids or reasons is invalid");
  }
  int status = acc_check_named_tensors("supportedOpsReasons", data_names, data, num_data);
  if (status != MX_ACC_OK) return status;
  return mlu_model_supported(json, mlu_library_instance()->num_cards, ids, ids_capacity, num_ids,
                             reasons, reason_size);
}

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  acc_clear_error();
  if (mlu_card_for(dev_id) == NULL) return mlu_device_status(dev_id);
  if (model_id == NULL || model_id[0] == '\0' || json == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: model_id or json is NULL or empty");
  }
  int status = acc_check_named_tensors("loadModel", data_names, data, num_data);
  if (status != MX_ACC_OK) return status;
  if (mlu_models_exists(model_id)) {
    return acc_fail(MX_ACC_ERR_STATE, "model \"%s\" is already loaded", model_id);
  }
  mlu_model *model;
  status = mlu_model_create(model_id, json, data_names, data, num_data, dev_id, &model);
  if (status != MX_ACC_OK) return status;
  status = mlu_models_add(model); /* fails if another thread loaded the id meanwhile */
  if (status != MX_ACC_OK) mlu_model_free(model);
  return status;
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  acc_clear_error();
  if (model_id == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "unloadModel: model_id is NULL");
  mlu_model *model = mlu_models_remove(model_id);
  if (model == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "model \"%s\" is not loaded", model_id);
  mlu_model_free(model);
  return MX_ACC_OK;
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
  mlu_model *model = mlu_models_find(model_id);
  if (model == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "model \"%s\" is not loaded", model_id);
  return mlu_model_infer(model, in_names, out_names, in_data, out_data, num_in, num_out);
}

/* ---- configuration and errors ---------------------------------------------------------- */

MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  acc_clear_error();
  if (num_in < 0 || (num_in > 0 && (in_keys == NULL || in_vals == NULL)) || out_keys == NULL ||
      out_vals == NULL || num_out == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: NULL array or negative count");
  }
  return mlu_configure(dev_id, in_keys, in_vals, num_in, out_keys, out_vals, num_out);
}

MX_ACC_EXPORT const char *accGetLastError(void) { return acc_last_error(); }
