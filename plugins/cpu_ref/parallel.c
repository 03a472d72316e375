#include "parallel.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct cr_chunk {
  void (*body)(void *context, int64_t begin, int64_t end);
  void *context;
  int64_t begin;
  int64_t end;
  pthread_t thread;
  int on_thread; /* 1 once a thread was created to run this chunk */
} cr_chunk;

static void run_chunk(const cr_chunk *chunk) {
  chunk->body(chunk->context, chunk->begin, chunk->end);
}

static void *chunk_thread_main(void *arg) {
  run_chunk(arg);
  return NULL;
}

/* Splits [0, count) into num_chunks ranges whose sizes differ by at most one,
 * so no thread is left with a noticeably longer tail than the others. */
static void split_range(int64_t count, int64_t num_chunks, cr_chunk *chunks) {
  const int64_t base = count / num_chunks;
  const int64_t remainder = count % num_chunks;
  int64_t begin = 0;
  for (int64_t i = 0; i < num_chunks; ++i) {
    const int64_t size = base + (i < remainder ? 1 : 0);
    chunks[i].begin = begin;
    chunks[i].end = begin + size;
    begin += size;
  }
}

void cr_parallel_for(int num_threads, int64_t count,
                     void (*body)(void *context, int64_t begin, int64_t end),
                     void *context) {
  if (count <= 0) return;
  if (num_threads <= 1 || count < 2) {
    body(context, 0, count);
    return;
  }

  const int64_t num_chunks = num_threads < count ? num_threads : count;
  cr_chunk *chunks = calloc((size_t)num_chunks, sizeof *chunks);
  if (chunks == NULL) {
    /* Running serially is slower but still correct, which beats failing. */
    body(context, 0, count);
    return;
  }
  split_range(count, num_chunks, chunks);
  for (int64_t i = 0; i < num_chunks; ++i) {
    chunks[i].body = body;
    chunks[i].context = context;
  }

  /* Chunk 0 is kept for the calling thread, which would otherwise sit idle
   * in pthread_join. */
  for (int64_t i = 1; i < num_chunks; ++i) {
    chunks[i].on_thread =
        pthread_create(&chunks[i].thread, NULL, chunk_thread_main,
                       &chunks[i]) == 0;
  }
  /* Besides chunk 0, this runs any chunk whose thread could not be created
   * (e.g. a process thread limit), so no work is ever lost. */
  for (int64_t i = 0; i < num_chunks; ++i) {
    if (!chunks[i].on_thread) run_chunk(&chunks[i]);
  }
  for (int64_t i = 1; i < num_chunks; ++i) {
    if (chunks[i].on_thread) pthread_join(chunks[i].thread, NULL);
  }
  free(chunks);
}
