/*
 * Device memory of the template's simulated devices. A real plugin calls
 * its driver here; the template takes host memory with malloc and keeps,
 * per device, a table of what it handed out, so that it can refuse a
 * pointer it does not know (mx_free, and every tensor the host passes with
 * a dev_id) instead of crashing on it, and free everything in mx_releaseAll.
 *
 * The state is one static table per device. It needs no lock: the host
 * serializes all calls naming one dev_id (mxnet_acc.h, "Threads").
 */
#include <stdlib.h>

#include "status.h"
#include "template.h"
#include "tensor.h"

typedef struct tp_block {
  unsigned char *ptr;
  size_t size;
} tp_block;

typedef struct tp_device {
  tp_block *blocks; /* live allocations, in no order (owned) */
  size_t count, capacity;
  uint64_t bytes;   /* their sizes, summed */
  uint64_t limit;   /* configure(memory_limit): at most this many bytes; 0: no limit */
} tp_device;

static tp_device devices[TP_NUM_DEVICES];

int tp_check_device(const char *call, int dev_id) {
  if (dev_id >= 0 && dev_id < TP_NUM_DEVICES) return MX_ACC_OK;
  return acc_fail(MX_ACC_ERR_DEVICE, "%s: device %d does not exist (template has devices 0 .. %d)",
                  call, dev_id, TP_NUM_DEVICES - 1);
}

int tp_mem_alloc(int dev_id, size_t size, void **ptr) {
  tp_device *device = &devices[dev_id];
  if (device->limit != 0 &&
      (device->bytes > device->limit || size > device->limit - device->bytes)) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "mx_alloc: %zu bytes do not fit under device %d's "
                    "memory_limit (%llu bytes, %llu in use)", size, dev_id,
                    (unsigned long long)device->limit, (unsigned long long)device->bytes);
  }
  if (device->count == device->capacity) {
    size_t capacity = device->capacity ? device->capacity * 2 : 16;
    tp_block *blocks = realloc(device->blocks, capacity * sizeof *blocks);
    if (blocks == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "mx_alloc: allocation table");
    device->blocks = blocks;
    device->capacity = capacity;
  }
  /* malloc(0) may return NULL or a shared pointer: take one byte, so that
   * every allocation has its own address, as the header requires. */
  unsigned char *memory = malloc(size ? size : 1);
  if (memory == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "mx_alloc: %zu bytes", size);
  device->blocks[device->count++] = (tp_block){memory, size};
  device->bytes += size;
  *ptr = memory;
  return MX_ACC_OK;
}

int tp_mem_free(int dev_id, void *ptr) {
  if (ptr == NULL) return MX_ACC_OK;
  tp_device *device = &devices[dev_id];
  for (size_t i = 0; i < device->count; ++i) {
    if (device->blocks[i].ptr == ptr) {
      device->bytes -= device->blocks[i].size;
      free(device->blocks[i].ptr);
      device->blocks[i] = device->blocks[--device->count];
      return MX_ACC_OK;
    }
  }
  return acc_fail(MX_ACC_ERR_NOT_FOUND, "mx_free: %p is not a live allocation of device %d", ptr,
                  dev_id);
}

void tp_mem_release_all(int dev_id) {
  tp_device *device = &devices[dev_id];
  for (size_t i = 0; i < device->count; ++i) free(device->blocks[i].ptr);
  free(device->blocks); /* nothing left behind once the host is done */
  device->blocks = NULL;
  device->count = device->capacity = 0;
  device->bytes = 0;
}

void tp_mem_stats(int dev_id, uint64_t *allocations, uint64_t *bytes, uint64_t *limit) {
  *allocations = devices[dev_id].count;
  *bytes = devices[dev_id].bytes;
  *limit = devices[dev_id].limit;
}

void tp_mem_set_limit(int dev_id, uint64_t limit) { devices[dev_id].limit = limit; }

int tp_mem_check(int dev_id, const void *ptr, size_t bytes, const char *what) {
  const tp_device *device = &devices[dev_id];
  uintptr_t start = (uintptr_t)ptr; /* integers: comparing pointers into different
                                     * objects is undefined in C */
  for (size_t i = 0; bytes > 0 && i < device->count; ++i) {
    uintptr_t block = (uintptr_t)device->blocks[i].ptr;
    if (start >= block && start - block <= device->blocks[i].size &&
        bytes <= device->blocks[i].size - (start - block)) {
      return MX_ACC_OK;
    }
  }
  if (bytes == 0) return MX_ACC_OK; /* nothing will be read or written */
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %zu bytes at %p are not memory of device %d", what,
                  bytes, ptr, dev_id);
}

int tp_tensor_data(const MXTensor *tensor, const char *what, const acc_shape *shape, int dev_id,
                   int allow_host, float **data) {
  size_t bytes;
  int status = acc_tensor_expect(tensor, what, kFloat32, shape);
  if (status == MX_ACC_OK) status = acc_shape_bytes(shape, sizeof(float), what, &bytes);
  if (status != MX_ACC_OK) return status;
  *data = tensor->data;
  if (tensor->dev_id == MX_ACC_HOST_DEVICE && allow_host) return MX_ACC_OK;
  if (tensor->dev_id != dev_id) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: its data is on device %d, expected %sdevice %d",
                    what, tensor->dev_id, allow_host ? "the host or " : "", dev_id);
  }
  return tp_mem_check(dev_id, tensor->data, bytes, what);
}
