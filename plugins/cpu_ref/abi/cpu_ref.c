/*
 * cpu_ref: the reference CPU accelerator of acc-host.
 *
 * This file holds the exported entry points of mxnet_acc.h and nothing else:
 * each one clears the thread's error message, checks its arguments, and
 * delegates to the module of its concern (memory.c, executor.c, model.c,
 * ops.c). Copy this layout for a new plugin.
 *
 * Devices: CPU_REF_NUM_DEVICES (1 .. 16, default 1) "devices" that all run
 * on the host CPU; each keeps its own allocations and thread count.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binfile.h"
#include "executor.h"
#include "kernels.h"
#include "library.h"
#include "model.h"
#include "model_file.h"
#include "mxnet_acc.h"
#include "ops.h"
#include "status.h"
#include "tensor.h"

#ifndef CR_NAME /* test builds rename the library with -DCR_NAME='"..."' */
#define CR_NAME "cpu_ref"
#endif
#define CR_VERSION "0.1.0"
#define CR_MAX_THREADS 256

static cr_library library = {.models_lock = PTHREAD_MUTEX_INITIALIZER};

cr_library *cr_library_instance(void) { return &library; }

cr_device *cr_device_get(int dev_id) {
  if (!atomic_load(&library.initialized)) {
    acc_fail(MX_ACC_ERR_STATE, "cpu_ref is not initialized");
    return NULL;
  }
  if (dev_id < 0 || dev_id >= library.num_devices) {
    acc_fail(MX_ACC_ERR_DEVICE, "device %d does not exist (cpu_ref has %d)", dev_id,
             library.num_devices);
    return NULL;
  }
  return &library.devices[dev_id];
}

/* The status cr_device_get() recorded for the failure it just reported. */
static int device_error(int dev_id) {
  return atomic_load(&library.initialized) && (dev_id < 0 || dev_id >= library.num_devices)
             ? MX_ACC_ERR_DEVICE
             : MX_ACC_ERR_STATE;
}

int cr_check_data(int dev_id, const MXTensor *tensor, size_t bytes, const char *what) {
  if (tensor->dev_id == MX_ACC_HOST_DEVICE) return MX_ACC_OK;
  if (tensor->dev_id != dev_id) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: data is on device %d, expected %d or the host",
                    what, (int)tensor->dev_id, dev_id);
  }
  cr_device *device = cr_device_get(dev_id);
  if (device == NULL) return device_error(dev_id);
  pthread_mutex_lock(&device->lock);
  int status = cr_memory_check(&device->memory, tensor->data, bytes, what);
  pthread_mutex_unlock(&device->lock);
  return status;
}

/* ---- identification ---------------------------------------------------- */

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

static int read_num_devices(int *count) {
  const char *text = getenv("CPU_REF_NUM_DEVICES");
  if (text == NULL || text[0] == '\0') {
    *count = 1;
    return MX_ACC_OK;
  }
  char *end;
  long value = strtol(text, &end, 10);
  if (*end != '\0' || value < 1 || value > CR_MAX_DEVICES) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "CPU_REF_NUM_DEVICES=\"%s\": expected 1 to %d", text,
                    CR_MAX_DEVICES);
  }
  *count = (int)value;
  return MX_ACC_OK;
}

MX_ACC_EXPORT int initialize(int version) {
  acc_clear_error();
  if (version / 100 != MX_ACC_API_VERSION_MAJOR) {
    return acc_fail(MX_ACC_ERR_VERSION, "cpu_ref implements ABI %d.%d and cannot work with a "
                    "host of ABI %d.%d", MX_ACC_API_VERSION_MAJOR, MX_ACC_API_VERSION_MINOR,
                    version / 100, version % 100);
  }
  if (atomic_load(&library.initialized)) return MX_ACC_OK;
  int status = read_num_devices(&library.num_devices);
  if (status != MX_ACC_OK) return status;
  for (int i = 0; i < library.num_devices; ++i) {
    pthread_mutex_init(&library.devices[i].lock, NULL);
    atomic_store(&library.devices[i].num_threads, 1);
  }
  atomic_store(&library.initialized, 1);
  return MX_ACC_OK;
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

MX_ACC_EXPORT int getNumAcc(void) { return library.num_devices; }

MX_ACC_EXPORT int supportsImperative(void) { return 1; }

/* ---- memory ------------------------------------------------------------ */

MX_ACC_EXPORT int mx_alloc(int dev_id, size_t size, void **ptr) {
  acc_clear_error();
  cr_device *device = cr_device_get(dev_id);
  if (device == NULL) return device_error(dev_id);
  if (ptr == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "mx_alloc: ptr is NULL");
  pthread_mutex_lock(&device->lock);
  int status = cr_memory_alloc(&device->memory, size, ptr);
  pthread_mutex_unlock(&device->lock);
  return status;
}

MX_ACC_EXPORT int mx_free(int dev_id, void *ptr) {
  acc_clear_error();
  cr_device *device = cr_device_get(dev_id);
  if (device == NULL) return device_error(dev_id);
  pthread_mutex_lock(&device->lock);
  int status = cr_memory_free(&device->memory, ptr);
  pthread_mutex_unlock(&device->lock);
  return status;
}

MX_ACC_EXPORT int mx_releaseAll(int dev_id) {
  acc_clear_error();
  cr_device *device = cr_device_get(dev_id);
  if (device == NULL) return device_error(dev_id);
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
  if (device == NULL) return device_error(device_side->dev_id);
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
  if (cr_device_get(dev_id) == NULL) return device_error(dev_id);
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
  if (cr_device_get(dev_id) == NULL) return device_error(dev_id);
  if (json == NULL || num_ids == NULL || ids_capacity < 0 || (ids_capacity > 0 && ids == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "supportedOps: json, ids or num_ids is invalid");
  }
  int status = acc_check_named_tensors("supportedOps", data_names, data, num_data);
  if (status != MX_ACC_OK) return status;
  return cr_model_supported(json, ids, ids_capacity, num_ids);
}

/* The loaded model called id, or NULL; the caller holds models_lock. */
static cr_model **find_model(const char *id) {
  for (cr_model **link = &library.models; *link != NULL; link = &(*link)->next) {
    if (strcmp((*link)->id, id) == 0) return link;
  }
  return NULL;
}

static int model_loaded(const char *id) {
  pthread_mutex_lock(&library.models_lock);
  int loaded = find_model(id) != NULL;
  pthread_mutex_unlock(&library.models_lock);
  return loaded;
}

static int already_loaded(const char *id) {
  return acc_fail(MX_ACC_ERR_STATE, "model \"%s\" is already loaded", id);
}

/* Adds a model built by loadModel() or import_model to the library, or
 * frees it if another thread loaded its id meanwhile. */
static int add_model(cr_model *model) {
  pthread_mutex_lock(&library.models_lock);
  int exists = find_model(model->id) != NULL;
  if (!exists) {
    model->next = library.models;
    library.models = model;
  }
  pthread_mutex_unlock(&library.models_lock);
  if (!exists) return MX_ACC_OK;
  int status = already_loaded(model->id);
  cr_model_free(model);
  return status;
}

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  acc_clear_error();
  if (cr_device_get(dev_id) == NULL) return device_error(dev_id);
  if (model_id == NULL || model_id[0] == '\0' || json == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: model_id or json is NULL or empty");
  }
  int status = acc_check_named_tensors("loadModel", data_names, data, num_data);
  if (status != MX_ACC_OK) return status;
  if (model_loaded(model_id)) return already_loaded(model_id);
  cr_model *model;
  status = cr_model_create(model_id, json, data_names, data, num_data, dev_id, &model);
  return status == MX_ACC_OK ? add_model(model) : status;
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  acc_clear_error();
  if (model_id == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "unloadModel: model_id is NULL");
  pthread_mutex_lock(&library.models_lock);
  cr_model **link = find_model(model_id);
  cr_model *model = link ? *link : NULL;
  if (link != NULL) *link = model->next;
  pthread_mutex_unlock(&library.models_lock);
  if (model == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "model \"%s\" is not loaded", model_id);
  cr_model_free(model);
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
  pthread_mutex_lock(&library.models_lock);
  cr_model **link = find_model(model_id);
  cr_model *model = link ? *link : NULL;
  pthread_mutex_unlock(&library.models_lock);
  if (model == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "model \"%s\" is not loaded", model_id);
  cr_device *device = cr_device_get(model->dev_id);
  if (device == NULL) return device_error(model->dev_id);
  return cr_model_infer(model, in_names, out_names, in_data, out_data, num_in, num_out,
                        atomic_load(&device->num_threads));
}

/* ---- configuration ----------------------------------------------------- */

/* Appends one output pair, copying the strings into the library's buffer. */
static int emit(int *count, size_t *used, const char *key, const char *value) {
  size_t key_size = strlen(key) + 1, value_size = strlen(value) + 1;
  size_t capacity = sizeof library.configure_text;
  if (*count == (int)(sizeof library.configure_keys / sizeof library.configure_keys[0]) ||
      *used + key_size + value_size > capacity) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "configure: too many outputs");
  }
  char *text = library.configure_text + *used;
  memcpy(text, key, key_size);
  memcpy(text + key_size, value, value_size);
  library.configure_keys[*count] = text;
  library.configure_vals[*count] = text + key_size;
  *used += key_size + value_size;
  *count += 1;
  return MX_ACC_OK;
}

/* Appends "name:version" to the list in text (size bytes, length used so
 * far); fails cleanly, rather than truncating, when it does not fit. */
static int append_op(char *text, size_t size, size_t *length, const char *name, int version) {
  int n = snprintf(text + *length, size - *length, "%s%s:%d", *length ? "," : "", name, version);
  if (n < 0 || (size_t)n >= size - *length) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "configure: the operator list outgrew its buffer");
  }
  *length += (size_t)n;
  return MX_ACC_OK;
}

/* Every name accGetExecutor() and graphs may use, aliases included. */
static int list_ops(char *text, size_t size) {
  size_t length = 0;
  text[0] = '\0';
  for (size_t i = 0; i < cr_num_ops(); ++i) {
    const cr_op *op = cr_op_at(i);
    if (!cr_op_enabled(op)) continue;
    int status = append_op(text, size, &length, op->name, op->version);
    for (int a = 0; status == MX_ACC_OK && a < CR_MAX_ALIASES && op->aliases[a] != NULL; ++a) {
      status = append_op(text, size, &length, op->aliases[a], op->version);
    }
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int answer_query(const char *what, cr_device *device, int *count, size_t *used) {
  /* The operator list is about 1.3 KB; the room left keeps adding
   * operators safe for a long while, and list_ops fails cleanly beyond. */
  char text[CR_CONFIGURE_TEXT_SIZE / 2];
  if (strcmp(what, "keys") == 0) {
    return emit(count, used, "keys", "num_threads,query,export_model,import_model,path");
  }
  if (strcmp(what, "version") == 0) return emit(count, used, "version", CR_VERSION);
  if (strcmp(what, "ops") == 0) {
    int status = list_ops(text, sizeof text);
    return status == MX_ACC_OK ? emit(count, used, "ops", text) : status;
  }
  if (strcmp(what, "memory") == 0) {
    pthread_mutex_lock(&device->lock);
    size_t allocations = device->memory.count, bytes = device->memory.bytes_in_use;
    pthread_mutex_unlock(&device->lock);
    snprintf(text, sizeof text, "%zu", allocations);
    int status = emit(count, used, "allocations", text);
    snprintf(text, sizeof text, "%zu", bytes);
    return status == MX_ACC_OK ? emit(count, used, "bytes_in_use", text) : status;
  }
  return acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown query \"%s\" (keys, ops, version, "
                  "memory)", what);
}

static int set_threads(const char *value, cr_device *device, int *count, size_t *used) {
  char *end;
  long threads = strtol(value, &end, 10);
  if (value[0] == '\0' || *end != '\0' || threads < 1 || threads > CR_MAX_THREADS) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: num_threads=\"%s\": expected 1 to %d",
                    value, CR_MAX_THREADS);
  }
  atomic_store(&device->num_threads, (int)threads);
  char text[16];
  snprintf(text, sizeof text, "%ld", threads);
  return emit(count, used, "num_threads", text);
}

static int export_model(const char *model_id, const char *path, int dev_id, int *count,
                        size_t *used) {
  uint64_t bytes = 0;
  int status;
  /* The model must be on dev_id: the host serializes calls that name one
   * device, so no infer() changes its weights while they are written. The
   * lock is held while writing, so that not even a misbehaving host's
   * unloadModel() can free the model meanwhile. */
  pthread_mutex_lock(&library.models_lock);
  cr_model **link = find_model(model_id);
  if (link == NULL) {
    status = acc_fail(MX_ACC_ERR_NOT_FOUND, "export_model: model \"%s\" is not loaded",
                      model_id);
  } else if ((*link)->dev_id != dev_id) {
    status = acc_fail(MX_ACC_ERR_INVALID_ARG, "export_model: model \"%s\" is on device %d, "
                      "not %d", model_id, (*link)->dev_id, dev_id);
  } else {
    status = cr_model_export(*link, path, &bytes);
  }
  pthread_mutex_unlock(&library.models_lock);
  if (status != MX_ACC_OK) return status;
  char text[24];
  snprintf(text, sizeof text, "%" PRIu64, bytes);
  return emit(count, used, "exported", text);
}

static int import_model(const char *model_id, const char *path, int dev_id, int *count,
                        size_t *used) {
  if (model_id[0] == '\0') return acc_fail(MX_ACC_ERR_INVALID_ARG, "import_model: empty id");
  if (model_loaded(model_id)) return already_loaded(model_id);
  /* The answer first: once the model is added, nothing may fail. */
  int status = emit(count, used, "imported", model_id);
  cr_model *model;
  if (status == MX_ACC_OK) status = cr_model_import(model_id, path, dev_id, &model);
  return status == MX_ACC_OK ? add_model(model) : status;
}

MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  acc_clear_error();
  cr_device *device = cr_device_get(dev_id);
  if (device == NULL) return device_error(dev_id);
  if (num_in < 0 || (num_in > 0 && (in_keys == NULL || in_vals == NULL)) || out_keys == NULL ||
      out_vals == NULL || num_out == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: NULL array or negative count");
  }
  const char *path;
  int count = 0, status = acc_bin_configure_path(in_keys, in_vals, num_in, &path);
  size_t used = 0;
  for (int i = 0; i < num_in && status == MX_ACC_OK; ++i) {
    if (in_keys[i] == NULL || in_vals[i] == NULL) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: key or value %d is NULL", i);
    } else if (strcmp(in_keys[i], "num_threads") == 0) {
      status = set_threads(in_vals[i], device, &count, &used);
    } else if (strcmp(in_keys[i], "query") == 0) {
      status = answer_query(in_vals[i], device, &count, &used);
    } else if (strcmp(in_keys[i], "export_model") == 0) {
      status = export_model(in_vals[i], path, dev_id, &count, &used);
    } else if (strcmp(in_keys[i], "import_model") == 0) {
      status = import_model(in_vals[i], path, dev_id, &count, &used);
    } else if (strcmp(in_keys[i], "path") != 0) { /* path: read by acc_bin_configure_path() */
      status = acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown key \"%s\" (num_threads, "
                        "query, export_model, import_model, path)", in_keys[i]);
    }
  }
  if (status != MX_ACC_OK) return status;
  *out_keys = library.configure_keys;
  *out_vals = library.configure_vals;
  *num_out = count;
  return MX_ACC_OK;
}

/* ---- errors ------------------------------------------------------------ */

MX_ACC_EXPORT const char *accGetLastError(void) { return acc_last_error(); }
