/*
 * The on-chip memory (SRAM) allocator of the mlu_sim compiler: a first-fit
 * allocator of words (4 bytes each) for the values the memory planner keeps
 * resident on chip (compiler.c, stage 3), and the largest free gap left for
 * a kernel's tiles (emit.c, stage 4, tiles into it).
 *
 * Blocks are rounded up to MLU_SRAM_ALIGN words, so every resident tensor
 * starts on a 64-byte line. The space also records its peak: the highest
 * word used, + 1, by a resident value or by tiles (mlu_sram_note_use), which
 * becomes the program's sram_words.
 *
 * It depends on nothing of the compiler: the compiler owns one space per
 * compilation and frees it with mlu_sram_release.
 */
#ifndef MLU_SIM_SRAM_H_
#define MLU_SIM_SRAM_H_

#include <stddef.h>
#include <stdint.h>

enum { MLU_SRAM_ALIGN = 16 }; /* words: keeps resident tensors on 64-byte lines */

typedef struct mlu_sram_block {
  uint64_t addr, words;
} mlu_sram_block;

typedef struct mlu_sram_space {
  uint64_t total;         /* words of on-chip memory */
  mlu_sram_block *blocks; /* live, sorted by address (owned) */
  size_t count, capacity;
  uint64_t peak;          /* highest word used by anything, + 1 */
} mlu_sram_space;

/* An empty space of total words (nothing allocated yet). */
void mlu_sram_init(mlu_sram_space *space, uint64_t total);

/* Forgets every block and the peak, keeping total and the block storage. */
void mlu_sram_reset(mlu_sram_space *space);

/* Frees the block storage; the space is empty (total 0) afterwards. */
void mlu_sram_release(mlu_sram_space *space);

/* Allocates words (> 0) at the lowest address where they fit: 1 and the
 * address in *addr, or 0 when they do not fit (or the block list cannot
 * grow: the value is then simply not resident). */
int mlu_sram_alloc(mlu_sram_space *space, uint64_t words, uint64_t *addr);

/* Frees the block starting at addr; an unknown addr is ignored. */
void mlu_sram_free(mlu_sram_space *space, uint64_t addr);

/* The largest free gap: its first word in *addr and its size in *words
 * (0 when everything is allocated). */
void mlu_sram_largest_gap(const mlu_sram_space *space, uint64_t *addr, uint64_t *words);

/* Records that [addr, addr + words) is in use (a kernel's tiles in a gap)
 * for the peak. */
void mlu_sram_note_use(mlu_sram_space *space, uint64_t addr, uint64_t words);

#endif /* MLU_SIM_SRAM_H_ */
