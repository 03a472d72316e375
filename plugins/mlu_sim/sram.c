/* The on-chip memory allocator of the compiler (sram.h). */
#include "sram.h"

#include <stdlib.h>
#include <string.h>

void mlu_sram_init(mlu_sram_space *space, uint64_t total) {
  memset(space, 0, sizeof *space);
  space->total = total;
}

void mlu_sram_reset(mlu_sram_space *space) {
  space->count = 0;
  space->peak = 0;
}

void mlu_sram_release(mlu_sram_space *space) {
  free(space->blocks);
  memset(space, 0, sizeof *space);
}

int mlu_sram_alloc(mlu_sram_space *space, uint64_t words, uint64_t *addr) {
  if (words == 0 || words > space->total) return 0;
  uint64_t size = (words + MLU_SRAM_ALIGN - 1) / MLU_SRAM_ALIGN * MLU_SRAM_ALIGN, start = 0;
  for (size_t i = 0; i <= space->count; ++i) {
    uint64_t end = i < space->count ? space->blocks[i].addr : space->total;
    if (end >= start && end - start >= words) {
      if (space->count == space->capacity) {
        size_t capacity = space->capacity ? space->capacity * 2 : 16;
        mlu_sram_block *blocks = realloc(space->blocks, capacity * sizeof *blocks);
        if (blocks == NULL) return 0; /* simply not resident */
        space->blocks = blocks;
        space->capacity = capacity;
      }
      memmove(&space->blocks[i + 1], &space->blocks[i], (space->count - i) * sizeof *space->blocks);
      space->blocks[i] = (mlu_sram_block){start, size < end - start ? size : end - start};
      space->count += 1;
      if (start + words > space->peak) space->peak = start + words;
      *addr = start;
      return 1;
    }
    if (i < space->count) start = space->blocks[i].addr + space->blocks[i].words;
  }
  return 0;
}

void mlu_sram_free(mlu_sram_space *space, uint64_t addr) {
  for (size_t i = 0; i < space->count; ++i) {
    if (space->blocks[i].addr == addr) {
      memmove(&space->blocks[i], &space->blocks[i + 1],
              (space->count - i - 1) * sizeof *space->blocks);
      space->count -= 1;
      return;
    }
  }
}

void mlu_sram_largest_gap(const mlu_sram_space *space, uint64_t *addr, uint64_t *words) {
  uint64_t start = 0, best_addr = 0, best = 0;
  for (size_t i = 0; i <= space->count; ++i) {
    uint64_t end = i < space->count ? space->blocks[i].addr : space->total;
    if (end > start && end - start > best) {
      best = end - start;
      best_addr = start;
    }
    if (i < space->count) start = space->blocks[i].addr + space->blocks[i].words;
  }
  *addr = best_addr;
  *words = best;
}

void mlu_sram_note_use(mlu_sram_space *space, uint64_t addr, uint64_t words) {
  if (addr + words > space->peak) space->peak = addr + words;
}
