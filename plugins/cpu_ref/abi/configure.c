/*
 * configure() of cpu_ref: the keys a device takes (num_threads, kernels),
 * the queries it answers, and the export and import of loaded models.
 */
#include "configure.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binfile.h"
#include "library.h"
#include "model.h"
#include "model_file.h"
#include "ops.h"
#include "status.h"

#define CR_VERSION "0.1.0"
#define CR_MAX_THREADS 256

/* Appends one output pair, copying the strings into the library's buffer. */
static int emit(int *count, size_t *used, const char *key, const char *value) {
  cr_library *library = cr_library_instance();
  size_t key_size = strlen(key) + 1, value_size = strlen(value) + 1;
  size_t capacity = sizeof library->configure_text;
  if (*count == (int)(sizeof library->configure_keys / sizeof library->configure_keys[0]) ||
      *used + key_size + value_size > capacity) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "configure: too many outputs");
  }
  char *text = library->configure_text + *used;
  memcpy(text, key, key_size);
  memcpy(text + key_size, value, value_size);
  library->configure_keys[*count] = text;
  library->configure_vals[*count] = text + key_size;
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
    return emit(count, used, "keys", "num_threads,kernels,query,export_model,import_model,path");
  }
  if (strcmp(what, "version") == 0) return emit(count, used, "version", CR_VERSION);
  if (strcmp(what, "kernels") == 0) {
    return emit(count, used, "kernels", cr_kernels_name((cr_kernels)atomic_load(&device->kernels)));
  }
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
                  "kernels, memory)", what);
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

/* kernels=fast|reference: the kernels that executors created and models
 * loaded on the device from now on run with (ops.h's cr_params.kernels). */
static int set_kernels(const char *value, cr_device *device, int *count, size_t *used) {
  cr_kernels kernels;
  int status = cr_parse_kernels("configure: kernels", value, &kernels);
  if (status != MX_ACC_OK) return status;
  atomic_store(&device->kernels, (int)kernels);
  return emit(count, used, "kernels", cr_kernels_name(kernels));
}

static int export_model(const char *model_id, const char *path, int dev_id, int *count,
                        size_t *used) {
  uint64_t bytes = 0;
  int status = cr_library_export_model(model_id, path, dev_id, &bytes);
  if (status != MX_ACC_OK) return status;
  char text[24];
  snprintf(text, sizeof text, "%" PRIu64, bytes);
  return emit(count, used, "exported", text);
}

static int import_model(const char *model_id, const char *path, int dev_id, int *count,
                        size_t *used) {
  if (model_id[0] == '\0') return acc_fail(MX_ACC_ERR_INVALID_ARG, "import_model: empty id");
  if (cr_library_model_loaded(model_id)) return cr_library_already_loaded(model_id);
  /* The answer first: once the model is added, nothing may fail. */
  int status = emit(count, used, "imported", model_id);
  cr_model *model;
  if (status == MX_ACC_OK) status = cr_model_import(model_id, path, dev_id, &model);
  return status == MX_ACC_OK ? cr_library_add_model(model) : status;
}

int cr_configure(const char *const *in_keys, const char *const *in_vals, int num_in, int dev_id,
                 const char *const **out_keys, const char *const **out_vals, int *num_out) {
  cr_library *library = cr_library_instance();
  cr_device *device = cr_device_get(dev_id);
  if (device == NULL) return cr_device_error(dev_id);
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
    } else if (strcmp(in_keys[i], "kernels") == 0) {
      status = set_kernels(in_vals[i], device, &count, &used);
    } else if (strcmp(in_keys[i], "query") == 0) {
      status = answer_query(in_vals[i], device, &count, &used);
    } else if (strcmp(in_keys[i], "export_model") == 0) {
      status = export_model(in_vals[i], path, dev_id, &count, &used);
    } else if (strcmp(in_keys[i], "import_model") == 0) {
      status = import_model(in_vals[i], path, dev_id, &count, &used);
    } else if (strcmp(in_keys[i], "path") != 0) { /* path: read by acc_bin_configure_path() */
      status = acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown key \"%s\" (num_threads, "
                        "kernels, query, export_model, import_model, path)", in_keys[i]);
    }
  }
  if (status != MX_ACC_OK) return status;
  *out_keys = library->configure_keys;
  *out_vals = library->configure_vals;
  *num_out = count;
  return MX_ACC_OK;
}
