/* mmap and madvise are POSIX/BSD, hidden by -std=c11 without this. */
#define _DEFAULT_SOURCE

#include "card.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "mxnet_acc.h"
#include "status.h"

enum { kAlignment = 64 };

/* Freed blocks at least this large give their pages back to the OS. */
#define MLU_RETURN_PAGES_BYTES ((uint64_t)1 << 20)

static int reserve_arena(mlu_card *card, uint64_t bytes) {
  if (bytes > SIZE_MAX) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "dram_bytes is too large");
  void *arena = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (arena == MAP_FAILED) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "card %d: cannot reserve %llu bytes of simulated "
                    "DRAM (lower dram_bytes or MLU_SIM_DRAM_BYTES)", card->ordinal,
                    (unsigned long long)bytes);
  }
  card->dram = arena;
  card->dram_capacity = bytes;
  return MX_ACC_OK;
}

static void unmap_arena(mlu_card *card) {
  if (card->dram != NULL) munmap(card->dram, (size_t)card->dram_capacity);
  card->dram = NULL;
  card->dram_capacity = 0;
}

int mlu_card_create(int ordinal, const mlu_params *params, mlu_card **result) {
  mlu_card *card = calloc(1, sizeof *card);
  if (card == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "card %d", ordinal);
  card->ordinal = ordinal;
  card->params = *params;
  int status = reserve_arena(card, params->dram_bytes);
  if (status != MX_ACC_OK) {
    free(card);
    return status;
  }
  status = mlu_team_init(&card->team);
  if (status != MX_ACC_OK) {
    unmap_arena(card);
    free(card);
    return status;
  }
  pthread_mutex_init(&card->lock, NULL);
  *result = card;
  return MX_ACC_OK;
}

int mlu_card_destroy(mlu_card *card) {
  if (card == NULL) return MX_ACC_OK;
  pthread_mutex_lock(&card->lock);
  size_t live = card->num_blocks;
  pthread_mutex_unlock(&card->lock);
  if (live > 0) {
    return acc_fail(MX_ACC_ERR_STATE, "card %d still has %zu allocations", card->ordinal, live);
  }
  mlu_team_destroy(&card->team);
  unmap_arena(card);
  free(card->blocks);
  pthread_mutex_destroy(&card->lock);
  free(card);
  return MX_ACC_OK;
}

/* ---- the block table (callers hold the lock) ------------------------------ */

/* Index of the first block whose offset is >= offset. */
static size_t lower_bound(const mlu_card *card, uint64_t offset) {
  size_t lo = 0, hi = card->num_blocks;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (card->blocks[mid].offset < offset) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Index of the block containing offset, or num_blocks. */
static size_t block_containing(const mlu_card *card, uint64_t offset) {
  size_t index = lower_bound(card, offset + 1);
  if (index == 0) return card->num_blocks;
  const mlu_block *block = &card->blocks[index - 1];
  return offset - block->offset < block->size ? index - 1 : card->num_blocks;
}

static int grow_table(mlu_card *card) {
  if (card->num_blocks < card->block_capacity) return MX_ACC_OK;
  size_t capacity = card->block_capacity ? card->block_capacity * 2 : 64;
  mlu_block *blocks = realloc(card->blocks, capacity * sizeof *blocks);
  if (blocks == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "allocation table");
  card->blocks = blocks;
  card->block_capacity = capacity;
  return MX_ACC_OK;
}

/* First fit: the lowest gap between live blocks that holds size bytes. */
static int find_gap(const mlu_card *card, uint64_t size, uint64_t *offset, size_t *index) {
  uint64_t start = 0;
  for (size_t i = 0; i <= card->num_blocks; ++i) {
    uint64_t end = i < card->num_blocks ? card->blocks[i].offset : card->dram_capacity;
    if (end - start >= size) {
      *offset = start;
      *index = i;
      return 1;
    }
    if (i < card->num_blocks) start = card->blocks[i].offset + card->blocks[i].size;
  }
  return 0;
}

int mlu_card_alloc(mlu_card *card, uint64_t bytes, int tag, void **ptr) {
  if (bytes > UINT64_MAX - kAlignment) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "cannot allocate %llu bytes",
                    (unsigned long long)bytes);
  }
  uint64_t size = bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  pthread_mutex_lock(&card->lock);
  uint64_t offset = 0;
  size_t index = 0;
  int status = grow_table(card);
  if (status == MX_ACC_OK && !find_gap(card, size, &offset, &index)) {
    status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "card %d is out of device memory: %llu bytes "
                      "requested, %llu of %llu in use", card->ordinal, (unsigned long long)bytes,
                      (unsigned long long)card->bytes_in_use,
                      (unsigned long long)card->dram_capacity);
  }
  if (status == MX_ACC_OK) {
    memmove(&card->blocks[index + 1], &card->blocks[index],
            (card->num_blocks - index) * sizeof *card->blocks);
    card->blocks[index] = (mlu_block){offset, size, bytes, tag};
    card->num_blocks += 1;
    card->bytes_in_use += bytes;
    *ptr = card->dram + offset;
  }
  pthread_mutex_unlock(&card->lock);
  return status;
}

/* Offset of ptr in the arena, or -1 when ptr is not inside it (compared as
 * integers: pointers into different objects may not be compared in C). */
static int64_t arena_offset(const mlu_card *card, const void *ptr) {
  uintptr_t address = (uintptr_t)ptr, base = (uintptr_t)card->dram;
  if (ptr == NULL || address < base || address - base >= card->dram_capacity) return -1;
  return (int64_t)(address - base);
}

static void return_pages(mlu_card *card, const mlu_block *block) {
  if (block->size < MLU_RETURN_PAGES_BYTES) return;
  const uint64_t page = 4096;
  uint64_t begin = (block->offset + page - 1) / page * page;
  uint64_t end = (block->offset + block->size) / page * page;
  if (end > begin) madvise(card->dram + begin, (size_t)(end - begin), MADV_DONTNEED);
}

static void remove_block(mlu_card *card, size_t index) {
  card->bytes_in_use -= card->blocks[index].requested;
  return_pages(card, &card->blocks[index]);
  memmove(&card->blocks[index], &card->blocks[index + 1],
          (card->num_blocks - index - 1) * sizeof *card->blocks);
  card->num_blocks -= 1;
}

int mlu_card_free(mlu_card *card, void *ptr, int required_tag) {
  if (ptr == NULL) return MX_ACC_OK;
  pthread_mutex_lock(&card->lock);
  int64_t offset = arena_offset(card, ptr);
  size_t index = offset < 0 ? card->num_blocks : block_containing(card, (uint64_t)offset);
  int found = index < card->num_blocks && card->blocks[index].offset == (uint64_t)offset &&
              (required_tag < 0 || card->blocks[index].tag == required_tag);
  if (found) remove_block(card, index);
  pthread_mutex_unlock(&card->lock);
  if (!found) {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "pointer %p was not allocated on card %d or was "
                    "already freed", ptr, card->ordinal);
  }
  return MX_ACC_OK;
}

size_t mlu_card_release_tag(mlu_card *card, int tag) {
  size_t released = 0;
  pthread_mutex_lock(&card->lock);
  for (size_t i = card->num_blocks; i-- > 0;) {
    if (card->blocks[i].tag == tag) {
      remove_block(card, i);
      released += 1;
    }
  }
  pthread_mutex_unlock(&card->lock);
  return released;
}

int mlu_card_check_locked(const mlu_card *card, const void *ptr, uint64_t bytes,
                          const char *what) {
  int64_t offset = arena_offset(card, ptr);
  size_t index = offset < 0 ? card->num_blocks : block_containing(card, (uint64_t)offset);
  if (index == card->num_blocks) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %p is not live device memory of card %d", what,
                    ptr, card->ordinal);
  }
  const mlu_block *block = &card->blocks[index];
  /* Only the requested bytes are usable, not the alignment padding. */
  uint64_t end = block->offset + block->requested, at = (uint64_t)offset;
  uint64_t available = at <= end ? end - at : 0;
  if (bytes > available) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: needs %llu bytes at %p, the allocation holds "
                    "%llu from there", what, (unsigned long long)bytes, ptr,
                    (unsigned long long)available);
  }
  return MX_ACC_OK;
}

int mlu_card_check(mlu_card *card, const void *ptr, uint64_t bytes, const char *what) {
  pthread_mutex_lock(&card->lock);
  int status = mlu_card_check_locked(card, ptr, bytes, what);
  pthread_mutex_unlock(&card->lock);
  return status;
}

void mlu_card_memory(mlu_card *card, int tag, size_t *count, uint64_t *bytes) {
  size_t n = 0;
  uint64_t total = 0;
  pthread_mutex_lock(&card->lock);
  for (size_t i = 0; i < card->num_blocks; ++i) {
    if (tag < 0 || card->blocks[i].tag == tag) {
      n += 1;
      total += card->blocks[i].requested;
    }
  }
  pthread_mutex_unlock(&card->lock);
  *count = n;
  *bytes = total;
}

/* ---- parameters and statistics -------------------------------------------- */

mlu_params mlu_card_params(mlu_card *card) {
  pthread_mutex_lock(&card->lock);
  mlu_params params = card->params;
  pthread_mutex_unlock(&card->lock);
  return params;
}

int mlu_card_set_params(mlu_card *card, const mlu_params *params) {
  int status = MX_ACC_OK;
  pthread_mutex_lock(&card->lock);
  if (params->dram_bytes != card->dram_capacity) {
    if (card->num_blocks > 0) {
      status = acc_fail(MX_ACC_ERR_STATE, "card %d: dram_bytes can change only while nothing is "
                        "allocated (%zu allocations live)", card->ordinal, card->num_blocks);
    } else {
      unsigned char *old = card->dram;
      uint64_t old_capacity = card->dram_capacity;
      status = reserve_arena(card, params->dram_bytes);
      if (status == MX_ACC_OK) {
        munmap(old, (size_t)old_capacity);
      } else {
        card->dram = old; /* keep the card usable as it was */
        card->dram_capacity = old_capacity;
      }
    }
  }
  if (status == MX_ACC_OK) card->params = *params;
  pthread_mutex_unlock(&card->lock);
  return status;
}

mlu_stats mlu_card_stats(mlu_card *card) {
  pthread_mutex_lock(&card->lock);
  mlu_stats stats = card->stats;
  pthread_mutex_unlock(&card->lock);
  return stats;
}

void mlu_card_reset_stats(mlu_card *card) {
  pthread_mutex_lock(&card->lock);
  memset(&card->stats, 0, sizeof card->stats);
  pthread_mutex_unlock(&card->lock);
}

void mlu_card_count_copy(mlu_card *card, uint64_t bytes) {
  pthread_mutex_lock(&card->lock);
  card->stats.host_device_bytes += bytes;
  card->stats.host_device_copies += 1;
  card->stats.host_device_time_ns += mlu_cost_copy_ns(&card->params, bytes);
  pthread_mutex_unlock(&card->lock);
}

void mlu_card_count_compile(mlu_card *card, double wall_ns) {
  pthread_mutex_lock(&card->lock);
  card->stats.compiles += 1;
  card->stats.compile_time_ns += wall_ns;
  pthread_mutex_unlock(&card->lock);
}

double mlu_now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec * 1e9 + (double)now.tv_nsec;
}
