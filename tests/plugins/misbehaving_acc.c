/*
 * A plugin that misbehaves on request, for tests/hardening/test_misbehaving.py: it runs
 * graphs of Activation(act_type="relu") nodes on float32 tensors through
 * loadModel()/infer() on MISB_NUM_ACC devices (default 2), correctly while
 * its mode is "good", and breaks one rule of mxnet_acc.h in each other mode.
 *
 * The mode is set per device, at run time, with configure(mode=<name>)
 * (configure(delay_ms=<n>) sets the delay of the "slow" mode), so that a
 * test can switch a device to a failure and back again and see the host
 * recover. supportedOps() and loadModel() read the mode of the device they
 * are given; infer() the mode of the model's device. Modes:
 *
 *   good                   runs relu correctly (NaN stays NaN)
 *   ids_out_of_range       supportedOps() adds an id past the last node
 *   ids_negative           supportedOps() adds the id -7
 *   ids_unsorted           supportedOps() lists its ids in descending order
 *   ids_duplicate          supportedOps() lists its first id twice
 *   ids_variable           supportedOps() lists node 0, a variable
 *   ids_count_overflow     supportedOps() reports ids_capacity + 3 ids
 *   ids_count_unset        supportedOps() returns MX_ACC_OK, *num_ids unset
 *   ids_write_past         supportedOps() writes 4 ids past ids_capacity (a
 *                          buffer overrun the host must catch in its guard)
 *   supported_fail         supportedOps() fails, with a message
 *   supported_fail_silent  supportedOps() fails, without a message
 *   load_fail              loadModel() fails (MX_ACC_ERR_INTERNAL), with a message
 *   load_fail_silent       loadModel() fails, without a message
 *   load_oom               loadModel() fails with MX_ACC_ERR_OUT_OF_MEMORY
 *   load_unsupported       loadModel() declines with MX_ACC_ERR_UNSUPPORTED
 *   infer_fail             infer() fails (MX_ACC_ERR_INTERNAL), with a message
 *   infer_fail_silent      infer() fails, without a message
 *   infer_oom              infer() fails with MX_ACC_ERR_OUT_OF_MEMORY
 *   infer_bad_status       infer() returns 42, a status the ABI does not define
 *   infer_unwritten        infer() returns MX_ACC_OK and writes no output
 *   infer_partial          infer() writes only the first half of each output
 *   slow                   infer() sleeps delay_ms (default 500) first
 *   crash                  infer() raises SIGSEGV (the process dies)
 *   exit0                  infer() calls _exit(0) (the process ends, "successfully")
 *   infer_overrun          infer() runs, then writes 16 floats past the end of
 *                          its first output (host memory only: use the
 *                          build without MISB_IMPERATIVE)
 *   infer_overrun_few      infer() runs, then writes 3 bytes past the end of
 *                          its first output, host or device memory (device
 *                          memory only where the host pads its allocations:
 *                          MXNET_ACC_CHECK_OUTPUTS=1, or the heap is corrupted)
 *   copy_overrun_few       (MISB_IMPERATIVE) copyToAcc() and copyFromAcc()
 *                          copy, then write 3 bytes past the end of their
 *                          destination (only under MXNET_ACC_CHECK_OUTPUTS=1,
 *                          where the host guards both)
 *
 * configure(query=stats) answers "loads", "unloads", "infers" and "models"
 * (currently loaded) for the device, and "mode".
 *
 * With MISB_IMPERATIVE the plugin also manages device memory (malloc'd
 * blocks, tracked per device): supportsImperative() is 1, tensors of
 * infer() may be device memory, and accGetExecutor() declines every
 * operator. Compiled with the sources of plugins/common; the model table,
 * the block tables, the graph checks and the relu run are relu_plugin.h's.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep() under -std=c11, without -pthread too */

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "graph.h"
#include "mxnet_acc.h"
#include "relu_plugin.h"
#include "status.h"

#ifndef MISB_NUM_ACC
#define MISB_NUM_ACC 2
#endif
#define MISB_MAX_MODELS 256
#define MISB_MODE_MAX 32
#define MISB_MAX_BLOCKS 1024
#define MISB_DEFAULT_DELAY_MS 500L
#define MISB_MAX_DELAY_MS 600000L

/* ---- state (every field under lock) -------------------------------------- */

typedef struct device_state {
  char mode[MISB_MODE_MAX];
  long delay_ms;
} device_state;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static relu_model models[MISB_MAX_MODELS];
static relu_counts counts[MISB_NUM_ACC];
static relu_table table = {&lock, models, MISB_MAX_MODELS, counts};
static device_state devices[MISB_NUM_ACC];
static int devices_ready;

/* The caller holds lock. */
static void init_devices(void) {
  if (devices_ready) return;
  for (int d = 0; d < MISB_NUM_ACC; ++d) {
    snprintf(devices[d].mode, sizeof devices[d].mode, "good");
    devices[d].delay_ms = MISB_DEFAULT_DELAY_MS;
  }
  devices_ready = 1;
}

/* Copies the mode of a valid device into mode (MISB_MODE_MAX bytes). */
static void read_mode(int dev_id, char *mode, long *delay_ms) {
  pthread_mutex_lock(&lock);
  init_devices();
  memcpy(mode, devices[dev_id].mode, MISB_MODE_MAX);
  if (delay_ms != NULL) *delay_ms = devices[dev_id].delay_ms;
  pthread_mutex_unlock(&lock);
}

static int is_mode(const char *mode, const char *name) { return strcmp(mode, name) == 0; }

/* A failure without a message: accGetLastError() answers "". */
static int fail_silently(int code) {
  acc_clear_error();
  return code;
}

/* ---- identification ----------------------------------------------------- */

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) {
  acc_clear_error();
  if (version / 100 != MX_ACC_API_VERSION_MAJOR) {
    return acc_fail(MX_ACC_ERR_VERSION, "misbehave implements ABI major %d, not %d",
                    MX_ACC_API_VERSION_MAJOR, version / 100);
  }
  pthread_mutex_lock(&lock);
  init_devices();
  pthread_mutex_unlock(&lock);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int getAccName(char *name, size_t size) {
  static const char kName[] = "misbehave";
  acc_clear_error();
  return relu_copy_name(name, size, kName)
             ? MX_ACC_OK
             : acc_fail(MX_ACC_ERR_INVALID_ARG, "getAccName: the name needs %zu bytes",
                        sizeof kName);
}

MX_ACC_EXPORT int getNumAcc(void) { return MISB_NUM_ACC; }

MX_ACC_EXPORT const char *accGetLastError(void) { return acc_last_error(); }

/* ---- memory (MISB_IMPERATIVE) ------------------------------------------- */

#ifdef MISB_IMPERATIVE

static relu_block blocks[MISB_NUM_ACC][MISB_MAX_BLOCKS]; /* under lock */
static size_t num_blocks[MISB_NUM_ACC];

static int valid_device(int dev_id) { return dev_id >= 0 && dev_id < MISB_NUM_ACC; }

MX_ACC_EXPORT int supportsImperative(void) { return 1; }

MX_ACC_EXPORT int mx_alloc(int dev_id, size_t size, void **ptr) {
  acc_clear_error();
  if (!valid_device(dev_id)) return acc_fail(MX_ACC_ERR_DEVICE, "mx_alloc: device %d", dev_id);
  if (ptr == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "mx_alloc: ptr is NULL");
  switch (relu_alloc_block(&lock, blocks[dev_id], &num_blocks[dev_id], MISB_MAX_BLOCKS, size,
                           ptr)) {
    case RELU_ALLOC_NO_MEMORY:
      return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "mx_alloc: %zu bytes", size);
    case RELU_ALLOC_FULL:
      return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "mx_alloc: more than %d blocks",
                      MISB_MAX_BLOCKS);
    default:
      return MX_ACC_OK;
  }
}

MX_ACC_EXPORT int mx_free(int dev_id, void *ptr) {
  acc_clear_error();
  if (!valid_device(dev_id)) return acc_fail(MX_ACC_ERR_DEVICE, "mx_free: device %d", dev_id);
  if (ptr == NULL) return MX_ACC_OK;
  if (!relu_forget_block(&lock, blocks[dev_id], &num_blocks[dev_id], ptr)) {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "mx_free: unknown pointer");
  }
  free(ptr);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int mx_releaseAll(int dev_id) {
  acc_clear_error();
  if (!valid_device(dev_id)) {
    return acc_fail(MX_ACC_ERR_DEVICE, "mx_releaseAll: device %d", dev_id);
  }
  relu_release_blocks(&lock, blocks[dev_id], &num_blocks[dev_id]);
  return MX_ACC_OK;
}

/* Whether [data, data + bytes) lies in one block of dev_id. */
static int owns(int dev_id, const void *data, size_t bytes) {
  int found = 0;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < num_blocks[dev_id] && !found; ++i) {
    const char *start = blocks[dev_id][i].ptr;
    const char *at = data;
    found = at >= start && (size_t)(at - start) <= blocks[dev_id][i].size &&
            bytes <= blocks[dev_id][i].size - (size_t)(at - start);
  }
  pthread_mutex_unlock(&lock);
  return found;
}

static int copy(const char *call, const MXTensor *device, const MXTensor *host, int to_device) {
  acc_clear_error();
  if (device == NULL || host == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: NULL", call);
  if (!valid_device(device->dev_id) || host->dev_id != MX_ACC_HOST_DEVICE) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: wrong devices", call);
  }
  int ok_device, ok_host;
  size_t bytes = relu_tensor_bytes(device, &ok_device);
  size_t host_bytes = relu_tensor_bytes(host, &ok_host);
  if (!ok_device || !ok_host || bytes != host_bytes || device->dtype != host->dtype) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: descriptors differ or are invalid", call);
  }
  if (bytes == 0) return MX_ACC_OK;
  if (device->data == NULL || host->data == NULL || !owns(device->dev_id, device->data, bytes)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: not a block of device %d", call,
                    device->dev_id);
  }
  if (to_device) {
    memcpy(device->data, host->data, bytes);
  } else {
    memcpy(host->data, device->data, bytes);
  }
  char mode[MISB_MODE_MAX];
  read_mode(device->dev_id, mode, NULL);
  if (is_mode(mode, "copy_overrun_few")) {
    memset((char *)(to_device ? device->data : host->data) + bytes, 0x77, 3);
  }
  return MX_ACC_OK;
}

MX_ACC_EXPORT int copyToAcc(const MXTensor *dst, const MXTensor *src) {
  return copy("copyToAcc", dst, src, 1);
}

MX_ACC_EXPORT int copyFromAcc(const MXTensor *dst, const MXTensor *src) {
  return copy("copyFromAcc", src, dst, 0);
}

MX_ACC_EXPORT int accGetExecutor(const char *op_name, const MXTensor *inputs,
                                 const MXTensor *outputs, int num_in, int num_out,
                                 const char *const *attr_keys, const char *const *attr_vals,
                                 int num_attrs, int dev_id, MXAccExecutor **executor) {
  (void)inputs, (void)outputs, (void)num_in, (void)num_out, (void)attr_keys, (void)attr_vals;
  (void)num_attrs, (void)dev_id, (void)executor;
  return acc_fail(MX_ACC_ERR_UNSUPPORTED, "misbehave runs %s in graphs only",
                  op_name != NULL ? op_name : "(null)");
}

#else

MX_ACC_EXPORT int supportsImperative(void) { return 0; }

#endif

/* ---- graphs ------------------------------------------------------------- */

/* Applies a broken supportedOps() mode to a correct answer of count ids
 * (ids has room for capacity + 4 entries in ids_write_past, the host's
 * guard; capacity otherwise). Returns the count to report. */
static int misreport(const char *mode, const acc_graph *graph, int *ids, int count,
                     int capacity) {
  if (is_mode(mode, "ids_out_of_range") && count < capacity) {
    ids[count++] = (int)graph->num_nodes + 5;
  } else if (is_mode(mode, "ids_negative") && count < capacity) {
    ids[count++] = -7;
  } else if (is_mode(mode, "ids_unsorted")) {
    for (int i = 0; i < count / 2; ++i) {
      int swap = ids[i];
      ids[i] = ids[count - 1 - i];
      ids[count - 1 - i] = swap;
    }
  } else if (is_mode(mode, "ids_duplicate") && count > 0 && count < capacity) {
    ids[count] = ids[count - 1];
    ++count;
  } else if (is_mode(mode, "ids_variable") && count > 0) {
    ids[0] = 0;
  } else if (is_mode(mode, "ids_count_overflow")) {
    count = capacity + 3;
  } else if (is_mode(mode, "ids_write_past")) {
    /* An overrun: writes past the capacity the host gave. */
    for (int i = 0; i < 4; ++i) ids[capacity + i] = 1;
  }
  return count;
}

MX_ACC_EXPORT int supportedOps(const char *json, const char *const *data_names,
                               const MXTensor *data, int num_data, int dev_id, int *ids,
                               int ids_capacity, int *num_ids) {
  (void)data_names, (void)data, (void)num_data;
  acc_clear_error();
  int status = relu_check_device(dev_id, MISB_NUM_ACC);
  if (status != MX_ACC_OK) return status;
  if (num_ids == NULL || ids_capacity < 0 || (ids_capacity > 0 && ids == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "supportedOps: invalid ids or num_ids");
  }
  char mode[MISB_MODE_MAX];
  read_mode(dev_id, mode, NULL);
  if (is_mode(mode, "supported_fail")) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "supportedOps: the device is on fire (mode %s)", mode);
  }
  if (is_mode(mode, "supported_fail_silent")) return fail_silently(MX_ACC_ERR_INTERNAL);
  acc_graph *graph = NULL;
  status = relu_parse("supportedOps: ", json, &graph);
  if (status != MX_ACC_OK) return status;
  int count = relu_supported_ids(graph, relu_node_supported, ids, ids_capacity);
  count = misreport(mode, graph, ids, count, ids_capacity);
  acc_graph_free(graph);
  if (!is_mode(mode, "ids_count_unset")) *num_ids = count;
  return MX_ACC_OK;
}

/* ---- models ------------------------------------------------------------- */

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  (void)data_names, (void)data, (void)num_data;
  acc_clear_error();
  int status = relu_check_device(dev_id, MISB_NUM_ACC);
  if (status == MX_ACC_OK) status = relu_check_model_id("loadModel: ", model_id);
  if (status != MX_ACC_OK) return status;
  char mode[MISB_MODE_MAX];
  read_mode(dev_id, mode, NULL);
  if (is_mode(mode, "load_fail")) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "loadModel: the compiler ran out of registers "
                    "(mode %s)", mode);
  }
  if (is_mode(mode, "load_fail_silent")) return fail_silently(MX_ACC_ERR_INTERNAL);
  if (is_mode(mode, "load_oom")) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel: the device memory is full");
  }
  if (is_mode(mode, "load_unsupported")) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "loadModel: this device compiles nothing today");
  }
  return relu_table_load(&table, "loadModel: ", json, 1, model_id, dev_id);
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  return relu_table_unload(&table, model_id);
}

/* ---- inference --------------------------------------------------------- */

/* Checks that tensor is a dense float32 tensor of the node output's shape,
 * in host memory or (MISB_IMPERATIVE) in a block of dev_id. */
static int check_tensor(const MXTensor *tensor, const acc_node *node, int dev_id) {
  const acc_shape *shape = &node->out_shapes[0];
  int ok;
  size_t bytes = relu_tensor_bytes(tensor, &ok);
  if (!ok || tensor->dtype != kFloat32 || tensor->shape_len != (uint64_t)shape->ndim) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: expected a dense float32 tensor of %d "
                    "dimensions", node->name, shape->ndim);
  }
  for (int d = 0; d < shape->ndim; ++d) {
    if (tensor->shape[d] != shape->dims[d]) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: extent %d is %llu, expected %llu",
                      node->name, d, (unsigned long long)tensor->shape[d],
                      (unsigned long long)shape->dims[d]);
    }
  }
  if (bytes > 0 && tensor->data == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: data is NULL", node->name);
  }
#ifdef MISB_IMPERATIVE
  if (tensor->dev_id != MX_ACC_HOST_DEVICE &&
      (tensor->dev_id != dev_id || !owns(dev_id, tensor->data, bytes))) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: memory of device %d is not a block of "
                    "device %d", node->name, tensor->dev_id, dev_id);
  }
#else
  (void)dev_id;
  if (tensor->dev_id != MX_ACC_HOST_DEVICE) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: expected host memory", node->name);
  }
#endif
  return MX_ACC_OK;
}

static void sleep_ms(long milliseconds) {
  struct timespec delay = {milliseconds / 1000, (milliseconds % 1000) * 1000000L};
  while (nanosleep(&delay, &delay) != 0) {
  }
}

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  acc_clear_error();
  int status = relu_check_infer_args("infer: ", model_id, in_data, out_data, num_in, num_out);
  if (status != MX_ACC_OK) return status;
  /* The host serializes the calls for one device and never unloads a model
   * during its infer, so the graph stays valid after the lock is dropped
   * (slow inferences on two devices overlap). */
  pthread_mutex_lock(&lock);
  relu_model *found = relu_table_find(&table, model_id);
  acc_graph *graph = found != NULL ? found->graph : NULL;
  int dev_id = found != NULL ? found->dev_id : -1;
  pthread_mutex_unlock(&lock);
  if (graph == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "model %s is not loaded", model_id);
  char mode[MISB_MODE_MAX];
  long delay_ms = 0;
  read_mode(dev_id, mode, &delay_ms);
  if (is_mode(mode, "infer_fail")) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "infer: the device lost its queue (mode %s)", mode);
  }
  if (is_mode(mode, "infer_fail_silent")) return fail_silently(MX_ACC_ERR_INTERNAL);
  if (is_mode(mode, "infer_oom")) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "infer: no room for the activations");
  }
  if (is_mode(mode, "infer_bad_status")) return fail_silently(42);
  if (is_mode(mode, "crash")) {
    raise(SIGSEGV);
    return acc_fail(MX_ACC_ERR_INTERNAL, "infer: survived SIGSEGV");
  }
  if (is_mode(mode, "exit0")) _exit(0);
  if (is_mode(mode, "slow")) sleep_ms(delay_ms);
  /* relu(NaN) is NaN here. */
  relu_run_options options = {.check_tensor = check_tensor, .dev_id = dev_id, .keep_nan = 1,
                              .write = RELU_WRITE_ALL, .prefix = "infer: "};
  if (is_mode(mode, "infer_unwritten")) options.write = RELU_WRITE_NONE;
  if (is_mode(mode, "infer_partial")) options.write = RELU_WRITE_HALF;
  status = relu_run(graph, in_names, in_data, num_in, out_names, out_data, num_out, &options);
  if (status == MX_ACC_OK && is_mode(mode, "infer_overrun") && num_out > 0 &&
      out_data[0].dev_id == MX_ACC_HOST_DEVICE) {
    float *past = (float *)out_data[0].data + relu_tensor_count(&out_data[0]);
    for (int k = 0; k < 16; ++k) past[k] = 12345.0f;
  }
  if (status == MX_ACC_OK && is_mode(mode, "infer_overrun_few") && num_out > 0) {
    unsigned char *past = (unsigned char *)out_data[0].data +
                          relu_tensor_count(&out_data[0]) * sizeof(float);
    memset(past, 0x77, 3);
  }
  if (status == MX_ACC_OK) {
    pthread_mutex_lock(&lock);
    ++counts[dev_id].infers;
    pthread_mutex_unlock(&lock);
  }
  return status;
}

/* ---- configure ---------------------------------------------------------- */

static const char *const kModes[] = {
    "good", "ids_out_of_range", "ids_negative", "ids_unsorted", "ids_duplicate",
    "ids_variable", "ids_count_overflow", "ids_count_unset", "ids_write_past",
    "supported_fail", "supported_fail_silent", "load_fail", "load_fail_silent", "load_oom",
    "load_unsupported", "infer_fail", "infer_fail_silent", "infer_oom", "infer_bad_status",
    "infer_unwritten", "infer_partial", "slow", "crash", "exit0", "infer_overrun",
    "infer_overrun_few", "copy_overrun_few"};

static relu_answer answers[MISB_NUM_ACC]; /* under lock */

static int known_mode(const char *mode) {
  for (size_t i = 0; i < sizeof kModes / sizeof kModes[0]; ++i) {
    if (strcmp(kModes[i], mode) == 0) return 1;
  }
  return 0;
}

static int answer_fits(int added) {
  return added ? MX_ACC_OK
               : acc_fail(MX_ACC_ERR_INTERNAL, "configure: the answer does not fit");
}

/* Appends key=value to the answer of dev_id; the caller holds lock. */
static int answer(int dev_id, const char *key, const char *value) {
  return answer_fits(relu_answer_add(&answers[dev_id], key, value));
}

static int answer_stats(int dev_id) {
  const relu_counts *count = &counts[dev_id];
  const char *names[] = {"loads", "unloads", "infers", "models"};
  long numbers[] = {count->loads, count->unloads, count->infers,
                    relu_table_count(&table, dev_id)};
  for (int i = 0; i < 4; ++i) {
    int status = answer_fits(relu_answer_number(&answers[dev_id], names[i], numbers[i]));
    if (status != MX_ACC_OK) return status;
  }
  return answer(dev_id, "mode", devices[dev_id].mode);
}

/* Applies one key; the caller holds lock. */
static int apply(int dev_id, const char *key, const char *value) {
  if (key == NULL || value == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "NULL key or value");
  if (strcmp(key, "mode") == 0) {
    if (!known_mode(value)) return acc_fail(MX_ACC_ERR_INVALID_ARG, "unknown mode %s", value);
    snprintf(devices[dev_id].mode, sizeof devices[dev_id].mode, "%s", value);
    return MX_ACC_OK;
  }
  if (strcmp(key, "delay_ms") == 0) {
    char *end = NULL;
    long delay = strtol(value, &end, 10);
    if (end == value || *end != '\0' || delay < 0 || delay > MISB_MAX_DELAY_MS) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "delay_ms=%s: expected 0 to %ld", value,
                      MISB_MAX_DELAY_MS);
    }
    devices[dev_id].delay_ms = delay;
    return MX_ACC_OK;
  }
  if (strcmp(key, "query") != 0) return acc_fail(MX_ACC_ERR_NOT_FOUND, "unknown key %s", key);
  if (strcmp(value, "keys") == 0) return answer(dev_id, "keys", "query,mode,delay_ms");
  if (strcmp(value, "ops") == 0) return answer(dev_id, "ops", "Activation:1");
  if (strcmp(value, "version") == 0) return answer(dev_id, "version", "1.0");
  if (strcmp(value, "stats") == 0) return answer_stats(dev_id);
  return acc_fail(MX_ACC_ERR_NOT_FOUND, "unknown query %s", value);
}

MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  acc_clear_error();
  int status = relu_check_device(dev_id, MISB_NUM_ACC);
  if (status != MX_ACC_OK) return status;
  if (out_keys == NULL || out_vals == NULL || num_out == NULL || num_in < 0 ||
      (num_in > 0 && (in_keys == NULL || in_vals == NULL))) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: NULL argument");
  }
  relu_answer *made = &answers[dev_id];
  pthread_mutex_lock(&lock);
  init_devices();
  relu_answer_reset(made);
  for (int i = 0; i < num_in && status == MX_ACC_OK; ++i) {
    status = apply(dev_id, in_keys[i], in_vals[i]);
  }
  int count = made->count;
  pthread_mutex_unlock(&lock);
  *out_keys = made->keys;
  *out_vals = made->vals;
  *num_out = status == MX_ACC_OK ? count : 0;
  return status;
}
