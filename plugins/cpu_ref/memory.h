/*
 * "Device" memory of cpu_ref: ordinary aligned host memory, tracked per
 * device so that every pointer the host hands back (mx_free, tensors of
 * executors and models) can be checked against what was really allocated.
 */
#ifndef CPU_REF_MEMORY_H_
#define CPU_REF_MEMORY_H_

#include <stddef.h>

/* Open-addressing hash set of live allocations (address -> size). */
typedef struct cr_allocation {
  void *address;
  size_t size;
} cr_allocation;

typedef struct cr_memory {
  cr_allocation *slots; /* capacity entries, a power of two; NULL address = empty */
  size_t capacity;
  size_t count;
  size_t bytes_in_use;
} cr_memory;

/* All functions return an MX_ACC_* status; the caller holds the device lock. */
int cr_memory_alloc(cr_memory *memory, size_t size, void **address);
int cr_memory_free(cr_memory *memory, void *address);
void cr_memory_release_all(cr_memory *memory);

/* MX_ACC_OK if address is the start of a live allocation of at least bytes
 * bytes; MX_ACC_ERR_INVALID_ARG naming what otherwise. */
int cr_memory_check(const cr_memory *memory, const void *address, size_t bytes,
                    const char *what);

#endif /* CPU_REF_MEMORY_H_ */
