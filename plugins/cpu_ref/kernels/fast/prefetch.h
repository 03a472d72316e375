/*
 * Data fetched into L2 a part at a time while the kernel works on what
 * came before it: the next block of filters of the channel-blocked 3 x 3
 * convolution (conv_blocked.c), the next plane of a stride-2 depthwise
 * layer (fast/dense.c), a pre-packed A panel two tiles ahead (gemm.c).
 * The hardware prefetchers start afresh at every 4 KiB page and at every
 * jump between blocks or planes; fetching the next one spread over the
 * current one's work keeps its lines arriving before they are read,
 * without more requests in flight at once than the core holds.
 */
#ifndef CPU_REF_PREFETCH_H_
#define CPU_REF_PREFETCH_H_

#include <stdint.h>

/* The 64-byte lines [done, lines) of next are still to fetch, per_part of
 * them per cr_prefetch_part call. */
typedef struct cr_prefetch {
  const char *next;
  int64_t lines, per_part, done;
} cr_prefetch;

/* bytes at next (NULL or 0 bytes: nothing to fetch), in `parts` parts. */
static inline cr_prefetch cr_prefetch_spread(const void *next, int64_t bytes, int64_t parts) {
  cr_prefetch f = {(const char *)next, 0, 0, 0};
  if (next == NULL || bytes <= 0) return f;
  f.lines = (bytes + 63) / 64;
  f.per_part = parts > 0 ? (f.lines + parts - 1) / parts : f.lines;
  return f;
}

/* Fetches the next part (a read, into L2: locality 2). */
static inline void cr_prefetch_part(cr_prefetch *f) {
  const int64_t end = f->done + f->per_part < f->lines ? f->done + f->per_part : f->lines;
  for (; f->done < end; ++f->done) __builtin_prefetch(f->next + f->done * 64, 0, 2);
}

#endif /* CPU_REF_PREFETCH_H_ */
