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

/* bytes (at least 1) of 64-byte aligned memory for a model's buffers, to
 * free with free(); NULL when out of memory. From 2 MiB on it is aligned
 * to and rounded up to 2 MiB and, on Linux, the kernel is asked to back it
 * with huge pages (MADV_HUGEPAGE; the default "madvise" policy of
 * transparent huge pages grants them only where asked), so that a large
 * model's activations take few TLB entries. */
void *cr_buffer_alloc(size_t bytes);

/* All functions return an MX_ACC_* status; the caller holds the device lock. */
int cr_memory_alloc(cr_memory *memory, size_t size, void **address);
int cr_memory_free(cr_memory *memory, void *address);
void cr_memory_release_all(cr_memory *memory);

/* MX_ACC_OK if address is the start of a live allocation of at least bytes
 * bytes; MX_ACC_ERR_INVALID_ARG naming what otherwise. */
int cr_memory_check(const cr_memory *memory, const void *address, size_t bytes,
                    const char *what);

#endif /* CPU_REF_MEMORY_H_ */
