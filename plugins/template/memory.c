/*
 * Device memory. A real plugin calls its driver here; the template takes
 * host memory from malloc and keeps a list of it per device, so that it
 * refuses a pointer it did not hand out (mx_free, a tensor naming a device)
 * instead of dereferencing it. No lock: the host serializes the calls naming
 * one dev_id.
 */
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "template.h"
#include "tensor.h"

typedef struct tp_block { /* one allocation: this header, then the bytes handed out */
  struct tp_block *next;
  size_t size;
  max_align_t data[]; /* aligned for any type, as malloc's memory is */
} tp_block;

static struct tp_device {
  tp_block *blocks;      /* live allocations, owned, newest first */
  uint64_t bytes, limit; /* in use; configure(memory_limit), 0: none */
} devices[TP_NUM_DEVICES];

int tp_check_device(const char *call, int dev_id) {
  if (dev_id >= 0 && dev_id < TP_NUM_DEVICES) return MX_ACC_OK;
  return acc_fail(MX_ACC_ERR_DEVICE, "%s: no device %d", call, dev_id);
}

void tp_mem_set_limit(int dev_id, uint64_t limit) { devices[dev_id].limit = limit; }

MX_ACC_EXPORT int mx_alloc(int dev_id, size_t size, void **ptr) {
  acc_clear_error();
  int status = tp_check_device("mx_alloc", dev_id);
  if (status != MX_ACC_OK) return status;
  struct tp_device *d = &devices[dev_id];
  if (ptr == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "mx_alloc: ptr is NULL");
  if (d->limit != 0 && (d->bytes > d->limit || size > d->limit - d->bytes)) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "mx_alloc: past memory_limit");
  }
  tp_block *block = size <= SIZE_MAX - sizeof *block ? malloc(sizeof *block + size) : NULL;
  if (block == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "mx_alloc: %zu bytes", size);
  block->next = d->blocks;
  block->size = size;
  d->blocks = block;
  d->bytes += size;
  *ptr = block->data;
  return MX_ACC_OK;
}

MX_ACC_EXPORT int mx_free(int dev_id, void *ptr) {
  acc_clear_error();
  int status = tp_check_device("mx_free", dev_id);
  if (status != MX_ACC_OK || ptr == NULL) return status;
  struct tp_device *d = &devices[dev_id];
  for (tp_block **link = &d->blocks; *link != NULL; link = &(*link)->next) {
    tp_block *block = *link;
    if ((void *)block->data == ptr) {
      *link = block->next;
      d->bytes -= block->size;
      free(block);
      return MX_ACC_OK;
    }
  }
  return acc_fail(MX_ACC_ERR_NOT_FOUND, "mx_free: %p is not memory of device %d", ptr, dev_id);
}

MX_ACC_EXPORT int mx_releaseAll(int dev_id) {
  acc_clear_error();
  int status = tp_check_device("mx_releaseAll", dev_id);
  if (status != MX_ACC_OK) return status;
  struct tp_device *d = &devices[dev_id];
  for (tp_block *block = d->blocks, *next; block != NULL; block = next) {
    next = block->next;
    free(block);
  }
  d->blocks = NULL;
  d->bytes = 0;
  return MX_ACC_OK;
}

/* MX_ACC_OK if [ptr, ptr + bytes) lies in one live allocation of dev_id. */
static int check_memory(int dev_id, const void *ptr, size_t bytes, const char *what) {
  const struct tp_device *d = &devices[dev_id];
  uintptr_t start = (uintptr_t)ptr; /* as integers: comparing pointers into
                                     * different objects is undefined in C */
  for (const tp_block *b = d->blocks; b != NULL; b = b->next) {
    uintptr_t block = (uintptr_t)b->data;
    if (start >= block && start - block <= b->size && bytes <= b->size - (start - block)) {
      return MX_ACC_OK;
    }
  }
  if (bytes == 0) return MX_ACC_OK;
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
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: on device %d, not %d", what, tensor->dev_id,
                    dev_id);
  }
  return check_memory(dev_id, tensor->data, bytes, what);
}

/* acc_check_copy checks the two descriptors against each other; the device
 * side must then be memory of its device. Any dtype: bytes are bytes. */
static int copy(const MXTensor *device, const MXTensor *host, int to_device, const char *call) {
  size_t bytes;
  acc_clear_error();
  int status = acc_check_copy(device, host, call, &bytes);
  if (status == MX_ACC_OK) status = tp_check_device(call, device->dev_id);
  if (status == MX_ACC_OK) status = check_memory(device->dev_id, device->data, bytes, call);
  if (status == MX_ACC_OK && bytes > 0) {
    memcpy(to_device ? device->data : host->data, to_device ? host->data : device->data, bytes);
  }
  return status;
}

MX_ACC_EXPORT int copyToAcc(const MXTensor *dst, const MXTensor *src) {
  return copy(dst, src, 1, "copyToAcc");
}

MX_ACC_EXPORT int copyFromAcc(const MXTensor *dst, const MXTensor *src) {
  return copy(src, dst, 0, "copyFromAcc");
}
