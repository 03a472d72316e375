/*
 * The state of the cpu_ref library (library.h): the one static object per
 * loaded copy of the library, its devices and its registry of loaded models,
 * with the checks every entry point makes on them.
 */
#include "library.h"

#include <stdlib.h>
#include <string.h>

#include "model_file.h"
#include "status.h"

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

int cr_device_error(int dev_id) {
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
  if (device == NULL) return cr_device_error(dev_id);
  pthread_mutex_lock(&device->lock);
  int status = cr_memory_check(&device->memory, tensor->data, bytes, what);
  pthread_mutex_unlock(&device->lock);
  return status;
}

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

int cr_parse_kernels(const char *what, const char *value, cr_kernels *kernels) {
  if (strcmp(value, "fast") == 0) {
    *kernels = CR_KERNELS_FAST;
  } else if (strcmp(value, "reference") == 0) {
    *kernels = CR_KERNELS_REFERENCE;
  } else {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s=\"%s\": expected fast or reference", what,
                    value);
  }
  return MX_ACC_OK;
}

const char *cr_kernels_name(cr_kernels kernels) {
  return kernels == CR_KERNELS_REFERENCE ? "reference" : "fast";
}

/* ACC_CPU_REF_KERNELS: the kernels every device starts with (fast when
 * unset or empty). */
static int read_kernels(cr_kernels *kernels) {
  const char *text = getenv("ACC_CPU_REF_KERNELS");
  *kernels = CR_KERNELS_FAST;
  if (text == NULL || text[0] == '\0') return MX_ACC_OK;
  return cr_parse_kernels("ACC_CPU_REF_KERNELS", text, kernels);
}

int cr_library_initialize(void) {
  if (atomic_load(&library.initialized)) return MX_ACC_OK;
  cr_kernels kernels;
  int status = read_num_devices(&library.num_devices);
  if (status == MX_ACC_OK) status = read_kernels(&kernels);
  if (status != MX_ACC_OK) return status;
  for (int i = 0; i < library.num_devices; ++i) {
    pthread_mutex_init(&library.devices[i].lock, NULL);
    atomic_store(&library.devices[i].num_threads, 1);
    atomic_store(&library.devices[i].kernels, (int)kernels);
  }
  atomic_store(&library.initialized, 1);
  return MX_ACC_OK;
}

int cr_library_num_devices(void) { return library.num_devices; }

/* ---- loaded models ----------------------------------------------------- */

/* The loaded model called id, or NULL; the caller holds models_lock. */
static cr_model **find_model(const char *id) {
  for (cr_model **link = &library.models; *link != NULL; link = &(*link)->next) {
    if (strcmp((*link)->id, id) == 0) return link;
  }
  return NULL;
}

int cr_library_model_loaded(const char *id) {
  pthread_mutex_lock(&library.models_lock);
  int loaded = find_model(id) != NULL;
  pthread_mutex_unlock(&library.models_lock);
  return loaded;
}

int cr_library_already_loaded(const char *id) {
  return acc_fail(MX_ACC_ERR_STATE, "model \"%s\" is already loaded", id);
}

int cr_library_add_model(cr_model *model) {
  pthread_mutex_lock(&library.models_lock);
  int exists = find_model(model->id) != NULL;
  if (!exists) {
    model->next = library.models;
    library.models = model;
  }
  pthread_mutex_unlock(&library.models_lock);
  if (!exists) return MX_ACC_OK;
  int status = cr_library_already_loaded(model->id);
  cr_model_free(model);
  return status;
}

int cr_library_unload_model(const char *model_id) {
  pthread_mutex_lock(&library.models_lock);
  cr_model **link = find_model(model_id);
  cr_model *model = link ? *link : NULL;
  if (link != NULL) *link = model->next;
  pthread_mutex_unlock(&library.models_lock);
  if (model == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "model \"%s\" is not loaded", model_id);
  cr_model_free(model);
  return MX_ACC_OK;
}

cr_model *cr_library_find_model(const char *model_id) {
  pthread_mutex_lock(&library.models_lock);
  cr_model **link = find_model(model_id);
  cr_model *model = link ? *link : NULL;
  pthread_mutex_unlock(&library.models_lock);
  if (model == NULL) acc_fail(MX_ACC_ERR_NOT_FOUND, "model \"%s\" is not loaded", model_id);
  return model;
}

int cr_library_export_model(const char *model_id, const char *path, int dev_id,
                            uint64_t *bytes) {
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
    status = cr_model_export(*link, path, bytes);
  }
  pthread_mutex_unlock(&library.models_lock);
  return status;
}
