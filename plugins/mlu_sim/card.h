/*
 * One simulated MLU card: its device DRAM, its cost-model parameters and
 * its statistics, all behind one lock of its own.
 *
 * Device DRAM is a byte arena of params.dram_bytes, reserved with mmap and
 * committed by the OS page by page as it is touched, so a 16 GiB card costs
 * only what is really used. Device pointers are addresses inside the arena:
 * the host never dereferences them (mxnet_acc.h), and the simulator checks
 * every pointer it is given against the card's live allocations before
 * using it, so a stale or foreign pointer is a clean error, never a stray
 * access. Allocation is first-fit over a sorted table of live blocks,
 * 64-byte aligned; running out of arena space is MX_ACC_ERR_OUT_OF_MEMORY.
 */
#ifndef MLU_SIM_CARD_H_
#define MLU_SIM_CARD_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cost.h"
#include "team.h"

/* Who allocated a block: mx_releaseAll() frees only the host's. */
typedef enum mlu_mem_tag {
  MLU_MEM_USER = 0,    /* cnrtMalloc / mx_alloc */
  MLU_MEM_BUFFER = 1,  /* cnmlMallocBuffer */
  MLU_MEM_PROGRAM = 2  /* a compiled program's constants and scratch */
} mlu_mem_tag;

typedef struct mlu_block {
  uint64_t offset;    /* from the arena's start */
  uint64_t size;      /* reserved bytes (rounded up) */
  uint64_t requested; /* bytes asked for */
  int tag;
} mlu_block;

typedef struct mlu_card {
  int ordinal;
  pthread_mutex_t lock; /* guards every field below but team */
  mlu_params params;
  mlu_stats stats;
  unsigned char *dram;  /* the arena */
  uint64_t dram_capacity;
  mlu_block *blocks;    /* live allocations, sorted by offset */
  size_t num_blocks, block_capacity;
  uint64_t bytes_in_use; /* sum of requested sizes */
  mlu_team team; /* host threads of its launches (team.h; its own locks, not the card's) */
} mlu_card;

/* Creates a card with params (DRAM of params->dram_bytes). Returns an
 * MX_ACC status with a message recorded. */
int mlu_card_create(int ordinal, const mlu_params *params, mlu_card **card);

/* Destroys a card; MX_ACC_ERR_STATE (and nothing destroyed) while memory
 * is still allocated on it. */
int mlu_card_destroy(mlu_card *card);

/* Allocates bytes (0 gives a unique pointer) tagged tag. */
int mlu_card_alloc(mlu_card *card, uint64_t bytes, int tag, void **ptr);

/* Frees the allocation starting at ptr. required_tag >= 0 also demands
 * that tag. MX_ACC_ERR_NOT_FOUND for anything else. */
int mlu_card_free(mlu_card *card, void *ptr, int required_tag);

/* Frees every allocation tagged tag; returns how many. */
size_t mlu_card_release_tag(mlu_card *card, int tag);

/* MX_ACC_OK if [ptr, ptr + bytes) lies inside one live allocation;
 * MX_ACC_ERR_INVALID_ARG naming what otherwise. */
int mlu_card_check(mlu_card *card, const void *ptr, uint64_t bytes, const char *what);

/* As mlu_card_check, for a caller that already holds the card's lock. */
int mlu_card_check_locked(const mlu_card *card, const void *ptr, uint64_t bytes,
                          const char *what);

/* Live allocations and their requested bytes, optionally of one tag (-1: all). */
void mlu_card_memory(mlu_card *card, int tag, size_t *count, uint64_t *bytes);

mlu_params mlu_card_params(mlu_card *card);

/* Replaces the parameters. Changing dram_bytes re-creates the arena and is
 * refused with MX_ACC_ERR_STATE while anything is allocated. */
int mlu_card_set_params(mlu_card *card, const mlu_params *params);

mlu_stats mlu_card_stats(mlu_card *card);
void mlu_card_reset_stats(mlu_card *card);

/* Counts a host<->device copy of bytes in the statistics. */
void mlu_card_count_copy(mlu_card *card, uint64_t bytes);

/* Counts a compilation that took wall_ns of real time. */
void mlu_card_count_compile(mlu_card *card, double wall_ns);

/* Nanoseconds on a monotonic clock, for measuring compile time. */
double mlu_now_ns(void);

#endif /* MLU_SIM_CARD_H_ */
