#if defined(__linux__)
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#endif

#include "memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "mxnet_acc.h"
#include "status.h"

enum { kAlignment = 64, kInitialCapacity = 64 };

void *cr_buffer_alloc(size_t bytes) {
  const size_t huge = (size_t)2 << 20;
  if (bytes < huge) {
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    return aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  }
  if (bytes > SIZE_MAX - (huge - 1)) return NULL;
  const size_t rounded = (bytes + huge - 1) / huge * huge;
  void *block = aligned_alloc(huge, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (block != NULL) madvise(block, rounded, MADV_HUGEPAGE); /* advice: failure is harmless */
#endif
  return block;
}

static size_t slot_of(const cr_memory *memory, const void *address) {
  uintptr_t key = (uintptr_t)address / kAlignment;
  key ^= key >> 17;
  key *= (uintptr_t)0x9E3779B97F4A7C15ull;
  return (size_t)(key ^ (key >> 29)) & (memory->capacity - 1);
}

static const cr_allocation *find(const cr_memory *memory, const void *address) {
  if (memory->capacity == 0 || address == NULL) return NULL;
  for (size_t i = slot_of(memory, address);; i = (i + 1) & (memory->capacity - 1)) {
    const cr_allocation *slot = &memory->slots[i];
    if (slot->address == address) return slot;
    if (slot->address == NULL) return NULL;
  }
}

static void insert(cr_memory *memory, cr_allocation entry) {
  size_t i = slot_of(memory, entry.address);
  while (memory->slots[i].address != NULL) i = (i + 1) & (memory->capacity - 1);
  memory->slots[i] = entry;
}

/* Keeps the load factor at or below one half. */
static int reserve_slot(cr_memory *memory) {
  if ((memory->count + 1) * 2 <= memory->capacity) return MX_ACC_OK;
  size_t capacity = memory->capacity ? memory->capacity * 2 : kInitialCapacity;
  cr_allocation *slots = calloc(capacity, sizeof *slots);
  if (slots == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "allocation table is full");
  cr_memory grown = {slots, capacity, memory->count, memory->bytes_in_use};
  for (size_t i = 0; i < memory->capacity; ++i) {
    if (memory->slots[i].address != NULL) insert(&grown, memory->slots[i]);
  }
  free(memory->slots);
  *memory = grown;
  return MX_ACC_OK;
}

int cr_memory_alloc(cr_memory *memory, size_t size, void **address) {
  int status = reserve_slot(memory);
  if (status != MX_ACC_OK) return status;
  /* aligned_alloc wants a multiple of the alignment, and size 0 must still
   * give a unique pointer. */
  size_t rounded = size == 0 ? kAlignment : size;
  if (rounded > SIZE_MAX - (kAlignment - 1)) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes", size);
  }
  rounded = (rounded + kAlignment - 1) / kAlignment * kAlignment;
  void *block = aligned_alloc(kAlignment, rounded);
  if (block == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes", size);
  insert(memory, (cr_allocation){block, size});
  memory->count += 1;
  memory->bytes_in_use += size;
  *address = block;
  return MX_ACC_OK;
}

/* Removes slot i, moving later entries of its probe run back so that lookups
 * never stop early at the hole. */
static void erase(cr_memory *memory, size_t hole) {
  size_t mask = memory->capacity - 1;
  memory->slots[hole].address = NULL;
  for (size_t i = (hole + 1) & mask; memory->slots[i].address != NULL; i = (i + 1) & mask) {
    size_t home = slot_of(memory, memory->slots[i].address);
    /* The entry may fill the hole if its home is not in (hole, i]. */
    int between = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
    if (!between) {
      memory->slots[hole] = memory->slots[i];
      memory->slots[i].address = NULL;
      hole = i;
    }
  }
}

int cr_memory_free(cr_memory *memory, void *address) {
  if (address == NULL) return MX_ACC_OK;
  const cr_allocation *slot = find(memory, address);
  if (slot == NULL) {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "pointer %p was not allocated on this device or was "
                    "already freed", address);
  }
  memory->count -= 1;
  memory->bytes_in_use -= slot->size;
  free(address);
  erase(memory, (size_t)(slot - memory->slots));
  return MX_ACC_OK;
}

void cr_memory_release_all(cr_memory *memory) {
  for (size_t i = 0; i < memory->capacity; ++i) free(memory->slots[i].address);
  free(memory->slots);
  memset(memory, 0, sizeof *memory);
}

int cr_memory_check(const cr_memory *memory, const void *address, size_t bytes,
                    const char *what) {
  const cr_allocation *slot = find(memory, address);
  if (slot == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: data %p is not memory allocated on this device",
                    what, address);
  }
  if (slot->size < bytes) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: needs %zu bytes, allocation holds %zu", what,
                    bytes, slot->size);
  }
  return MX_ACC_OK;
}
