/*
 * cr_parallel_for on a persistent pool of worker threads.
 *
 * Workers are created on first use (as many as the largest num_threads
 * asked for, less the calling thread, up to kMaxWorkers) and then sleep on
 * a condition variable between jobs: nothing spins, so a core taken by
 * another process costs only what that core would have done. A job is cut
 * into more chunks than threads, and every thread, the caller included,
 * claims the next unclaimed chunk until none is left: if a worker is slow
 * to wake (its core busy), the caller simply runs its share. One job runs
 * at a time; a caller finding the pool busy (another device's thread) runs
 * its job inline rather than wait. The pool is shut down (workers joined)
 * when the library is unloaded, and starts empty in a child of fork().
 */
#include "parallel.h"

#include <pthread.h>
#include <stdlib.h>

enum {
  kMaxWorkers = 63,
  kChunksPerThread = 4
};

typedef struct cr_pool {
  pthread_mutex_t lock;
  pthread_cond_t work;  /* a job was posted, or shutdown */
  pthread_cond_t done;  /* the job's last chunk finished */
  pthread_mutex_t busy; /* held by the caller whose job runs */
  pthread_t threads[kMaxWorkers];
  int num_workers;
  int shutdown;
  /* The current job (valid while next_chunk < num_chunks or finished <
   * num_chunks). */
  void (*body)(void *context, int64_t begin, int64_t end);
  void *context;
  int64_t count;
  int64_t num_chunks;
  int64_t next_chunk;
  int64_t finished;
} cr_pool;

static cr_pool g_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                         PTHREAD_COND_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                         {0}, 0, 0, NULL, NULL, 0, 0, 0, 0};

/* Chunk i of [0, count) cut into num_chunks ranges differing by at most 1. */
static void chunk_range(int64_t count, int64_t num_chunks, int64_t i, int64_t *begin,
                        int64_t *end) {
  const int64_t base = count / num_chunks, remainder = count % num_chunks;
  *begin = i * base + (i < remainder ? i : remainder);
  *end = *begin + base + (i < remainder ? 1 : 0);
}

/* Claims and runs chunks of the current job until none is left; called
 * and returns with the pool locked. */
static void run_chunks(cr_pool *pool) {
  while (pool->next_chunk < pool->num_chunks) {
    const int64_t chunk = pool->next_chunk++;
    void (*body)(void *, int64_t, int64_t) = pool->body;
    void *context = pool->context;
    int64_t begin, end;
    chunk_range(pool->count, pool->num_chunks, chunk, &begin, &end);
    pthread_mutex_unlock(&pool->lock);
    body(context, begin, end);
    pthread_mutex_lock(&pool->lock);
    if (++pool->finished == pool->num_chunks) pthread_cond_broadcast(&pool->done);
  }
}

static void *worker_main(void *arg) {
  cr_pool *pool = arg;
  pthread_mutex_lock(&pool->lock);
  while (!pool->shutdown) {
    if (pool->next_chunk < pool->num_chunks) {
      run_chunks(pool);
    } else {
      pthread_cond_wait(&pool->work, &pool->lock);
    }
  }
  pthread_mutex_unlock(&pool->lock);
  return NULL;
}

/* A child process of fork() has none of the workers, and the pool's locks
 * may have been held by threads that do not exist there: it starts over
 * with an empty pool. */
static void reset_pool_in_child(void) {
  cr_pool *pool = &g_pool;
  pthread_mutex_init(&pool->lock, NULL);
  pthread_mutex_init(&pool->busy, NULL);
  pthread_cond_init(&pool->work, NULL);
  pthread_cond_init(&pool->done, NULL);
  pool->num_workers = 0;
  pool->num_chunks = pool->next_chunk = pool->finished = 0;
}

static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static void register_atfork(void) { pthread_atfork(NULL, NULL, reset_pool_in_child); }

/* Starts workers until there are wanted (or thread creation fails);
 * called with the pool locked. */
static void grow_pool(cr_pool *pool, int wanted) {
  if (wanted > kMaxWorkers) wanted = kMaxWorkers;
  if (pool->num_workers < wanted) pthread_once(&g_atfork_once, register_atfork);
  while (pool->num_workers < wanted) {
    if (pthread_create(&pool->threads[pool->num_workers], NULL, worker_main, pool) != 0) {
      break; /* fewer threads: the caller runs the remaining chunks */
    }
    pool->num_workers += 1;
  }
}

__attribute__((destructor)) static void shutdown_pool(void) {
  cr_pool *pool = &g_pool;
  pthread_mutex_lock(&pool->lock);
  pool->shutdown = 1;
  pthread_cond_broadcast(&pool->work);
  const int workers = pool->num_workers;
  pthread_mutex_unlock(&pool->lock);
  for (int i = 0; i < workers; ++i) pthread_join(pool->threads[i], NULL);
  pthread_mutex_lock(&pool->lock);
  pool->num_workers = 0;
  pthread_mutex_unlock(&pool->lock);
}

void cr_parallel_for(int num_threads, int64_t count,
                     void (*body)(void *context, int64_t begin, int64_t end),
                     void *context) {
  if (count <= 0) return;
  cr_pool *pool = &g_pool;
  if (num_threads <= 1 || count < 2 || pthread_mutex_trylock(&pool->busy) != 0) {
    body(context, 0, count);
    return;
  }
  pthread_mutex_lock(&pool->lock);
  if (pool->shutdown) {
    pthread_mutex_unlock(&pool->lock);
    pthread_mutex_unlock(&pool->busy);
    body(context, 0, count);
    return;
  }
  grow_pool(pool, num_threads - 1);
  const int threads = pool->num_workers + 1 < num_threads ? pool->num_workers + 1 : num_threads;
  int64_t chunks = (int64_t)threads * kChunksPerThread;
  if (chunks > count) chunks = count;
  pool->body = body;
  pool->context = context;
  pool->count = count;
  pool->num_chunks = chunks;
  pool->next_chunk = 0;
  pool->finished = 0;
  /* Wake only as many workers as the job may use. */
  for (int i = 1; i < threads; ++i) pthread_cond_signal(&pool->work);
  run_chunks(pool);
  while (pool->finished < pool->num_chunks) pthread_cond_wait(&pool->done, &pool->lock);
  pool->num_chunks = 0;
  pool->next_chunk = 0;
  pool->finished = 0;
  pthread_mutex_unlock(&pool->lock);
  pthread_mutex_unlock(&pool->busy);
}
