/*
 * cr_parallel_for on a persistent pool of worker threads.
 *
 * Workers are created on first use (as many as the largest num_threads
 * asked for, less the calling thread, up to kMaxWorkers). A job is cut into
 * more chunks than threads, and every thread, the caller included, claims
 * the next unclaimed chunk until none is left: if a worker is slow to wake
 * (its core busy), the caller simply runs its share. Chunks are claimed
 * and counted with atomic operations; the pool's lock is only taken to
 * start workers and to sleep or wake them (claimed under the lock, the
 * chunks of a 2-thread model cost 5-10 contended futex calls per forward).
 * One job runs at a time; a caller finding the pool busy (another device's
 * thread) runs its job inline rather than wait. The pool is shut down
 * (workers joined) when the library is unloaded, and starts empty in a
 * child of fork().
 *
 * A worker that finishes a job polls for the next one for a while before it
 * sleeps on a condition variable, and a caller polls as long for its job's
 * last chunks (ACC_CPU_REF_POLL_US=N microseconds, read when the pool
 * starts; default 300, 0 turns polling off, at most 10000). A model's steps
 * post jobs a few microseconds apart, and on a virtual machine a sleeping
 * thread can take tens to hundreds of microseconds to wake (the idle
 * virtual CPU is halted and the host gives its core away) and is often
 * woken on the caller's own CPU: polling made a 2-thread batch-8
 * resnet_small 1.7x faster than one thread instead of 1.25x. The polling
 * loop yields the CPU (sched_yield) between short pause loops and always
 * ends after N microseconds, so an idle pool sleeps and a core that
 * another process keeps busy loses little to it: with a busy-looping
 * process beside it, 2 polling threads ran within 5% of one thread, where
 * unbounded spinning collapses (docs/cpu_ref_performance.md, "Threads").
 * A worker that finds a job posted from the CPU it is on moves to another
 * CPU (leave_caller_cpu), and a caller that woke a worker yields once, so
 * that a worker woken onto its CPU gets to move at once.
 * The pool only exists once a model or executor asks for 2 threads or more.
 */
#if defined(__linux__)
#define _GNU_SOURCE /* sched_getcpu, sched_getaffinity, sched_setaffinity */
#else
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sched_yield */
#endif

#include "parallel.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

enum {
  kMaxWorkers = 63,
  kChunksPerThread = 4
};

enum { kDefaultPollUs = 300, kMaxPollUs = 10000 };

/* How long an idle worker, or a caller waiting for its job's last chunks,
 * polls before sleeping (nanoseconds; ACC_CPU_REF_POLL_US, at most 10 ms),
 * set once per process; 0: no polling. */
static atomic_int_fast64_t g_poll_ns = (int_fast64_t)kDefaultPollUs * 1000;

/* One thread's range of the current job's chunks: next << 32 | end, the
 * chunks [next, end) not yet claimed. Its owner claims from the front and
 * others from the back, both by compare-and-swap, each range on a cache
 * line of its own. */
typedef struct cr_range {
  _Alignas(64) atomic_uint_fast64_t bounds;
} cr_range;

typedef struct cr_pool {
  /* Guards the workers' start and their sleeping and waking; the chunks
   * are claimed and counted without it. */
  pthread_mutex_t lock;
  pthread_cond_t work;  /* the generation moved (a job was posted, or shutdown) */
  pthread_cond_t done;  /* the job's last chunk finished */
  pthread_mutex_t busy; /* held by the caller whose job runs */
  pthread_t threads[kMaxWorkers];
  int num_workers; /* under lock */
  atomic_int shutdown;
  atomic_int sleeping;       /* workers waiting on work */
  atomic_int caller_cpu;     /* the CPU the current job was posted from, or -1 */
  atomic_int caller_waiting; /* the caller waits on done */
  /* Bumped when a job is posted or the pool shuts down, after the job's
   * ranges are published. */
  _Alignas(64) atomic_uint_fast64_t generation;
  /* The current job. body, context, count and num_chunks are written by
   * the caller before it publishes the ranges (release) and read by a
   * thread after it claimed a chunk (acquire); they change only once all
   * chunks are finished, so a claimed chunk always reads its own job's. The
   * chunks are dealt in one contiguous range per thread (the caller is
   * thread 0, worker i thread i + 1), so that a thread takes the same part
   * of every job of the same size: the images or columns a model's next
   * step reads are then mostly in its own core's cache. A thread that
   * finishes its range takes chunks from the end of the range with most
   * left, so a slow thread's share is still taken over. */
  void (*body)(void *context, int64_t begin, int64_t end);
  void *context;
  int64_t count;
  int64_t num_chunks;
  atomic_int num_ranges;
  cr_range ranges[kMaxWorkers + 1];
  _Alignas(64) atomic_int_fast64_t finished;
} cr_pool;

/* The process's one pool (README.md, "State"): a pool per device would
 * multiply the threads contending for the same cores. Guarded by its locks
 * and atomics; `busy` lets one job run at a time. */
static cr_pool g_pool = {.caller_cpu = -1,
                         .lock = PTHREAD_MUTEX_INITIALIZER,
                         .work = PTHREAD_COND_INITIALIZER,
                         .done = PTHREAD_COND_INITIALIZER,
                         .busy = PTHREAD_MUTEX_INITIALIZER};

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void cpu_relax(void) {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  __builtin_ia32_pause();
#endif
}

/* Polls until *value differs from seen, or the polling time has passed; returns
 * whether it changed. */
static int poll_u64(atomic_uint_fast64_t *value, uint_fast64_t seen) {
  const int64_t limit = atomic_load_explicit(&g_poll_ns, memory_order_relaxed);
  if (limit <= 0) return 0;
  const int64_t start = now_ns();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (atomic_load_explicit(value, memory_order_relaxed) != seen) return 1;
      cpu_relax();
    }
    if (now_ns() - start > limit) return 0;
    sched_yield();
  }
}

/* Polls until *value reaches target, or the polling time has passed. */
static void poll_until(atomic_int_fast64_t *value, int64_t target) {
  const int64_t limit = atomic_load_explicit(&g_poll_ns, memory_order_relaxed);
  if (limit <= 0) return;
  const int64_t start = now_ns();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (atomic_load_explicit(value, memory_order_relaxed) >= target) return;
      cpu_relax();
    }
    if (now_ns() - start > limit) return;
    sched_yield();
  }
}

/* Chunk i of [0, count) cut into num_chunks ranges differing by at most 1. */
static void chunk_range(int64_t count, int64_t num_chunks, int64_t i, int64_t *begin,
                        int64_t *end) {
  const int64_t base = count / num_chunks, remainder = count % num_chunks;
  *begin = i * base + (i < remainder ? i : remainder);
  *end = *begin + base + (i < remainder ? 1 : 0);
}

static uint_fast64_t pack_range(uint_fast64_t next, uint_fast64_t end) {
  return next << 32 | end;
}

/* The next chunk for thread `me`: the first of its own range, else the
 * last of the range with most left; -1 when none is left. */
static int64_t claim_chunk(cr_pool *pool, int me) {
  const int ranges = atomic_load_explicit(&pool->num_ranges, memory_order_acquire);
  if (me < ranges) {
    atomic_uint_fast64_t *own = &pool->ranges[me].bounds;
    uint_fast64_t seen = atomic_load_explicit(own, memory_order_acquire);
    while ((seen >> 32) < (seen & 0xffffffffu)) {
      if (atomic_compare_exchange_weak_explicit(own, &seen,
                                                pack_range((seen >> 32) + 1, seen & 0xffffffffu),
                                                memory_order_acquire, memory_order_acquire)) {
        return (int64_t)(seen >> 32);
      }
    }
  }
  for (;;) {
    int victim = -1;
    uint_fast64_t most = 0, bounds = 0;
    for (int t = 0; t < ranges; ++t) {
      const uint_fast64_t b = atomic_load_explicit(&pool->ranges[t].bounds, memory_order_relaxed);
      const uint_fast64_t next = b >> 32, end = b & 0xffffffffu;
      if (end > next && end - next > most) most = end - next, victim = t, bounds = b;
    }
    if (victim < 0) return -1;
    const uint_fast64_t end = bounds & 0xffffffffu;
    if (atomic_compare_exchange_strong_explicit(&pool->ranges[victim].bounds, &bounds,
                                                pack_range(bounds >> 32, end - 1),
                                                memory_order_acquire, memory_order_relaxed)) {
      return (int64_t)(end - 1);
    }
  }
}

/* Claims and runs chunks of the current job until none is left. */
static void run_chunks(cr_pool *pool, int me) {
  for (;;) {
    const int64_t chunk = claim_chunk(pool, me);
    if (chunk < 0) break;
    const int64_t num_chunks = pool->num_chunks;
    int64_t begin, end;
    chunk_range(pool->count, num_chunks, chunk, &begin, &end);
    pool->body(pool->context, begin, end);
    /* The last chunk wakes a caller that sleeps on done (the caller sets
     * caller_waiting, then reads finished: one of the two sees the other). */
    if (atomic_fetch_add(&pool->finished, 1) + 1 == num_chunks &&
        atomic_load(&pool->caller_waiting)) {
      pthread_mutex_lock(&pool->lock);
      pthread_cond_signal(&pool->done);
      pthread_mutex_unlock(&pool->lock);
    }
  }
}

/* A worker on the CPU of the caller that posted the job cannot help it:
 * the caller keeps that CPU busy running its own chunk and then the
 * worker's, while another CPU idles. Linux often wakes a sleeping thread
 * on its waker's CPU, and the load balancer moved it within a millisecond
 * or so, or not before the caller paused: after 150 ms idle, in half of
 * 40 bursts of 30 resnet_small forwards on 2 threads the worker took part
 * in no job of the burst (6 ms), and the forwards ran at one thread's
 * speed. So a worker that finds a new job posted from its own CPU moves off
 * that CPU (its allowed set without it for a moment, then its own again).
 * Linux only: elsewhere this does nothing. */
static void leave_caller_cpu(const cr_pool *pool) {
#if defined(__linux__)
  const int caller = atomic_load_explicit(&pool->caller_cpu, memory_order_relaxed);
  if (caller < 0 || caller >= CPU_SETSIZE || sched_getcpu() != caller) return;
  cpu_set_t allowed, others;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  others = allowed;
  CPU_CLR(caller, &others);
  if (CPU_COUNT(&others) == 0) return;
  if (sched_setaffinity(0, sizeof others, &others) == 0) {
    sched_setaffinity(0, sizeof allowed, &allowed);
  }
#else
  (void)pool;
#endif
}

static void *worker_main(void *arg) {
  cr_pool *pool = &g_pool;
  const int me = (int)(intptr_t)arg; /* 1 for the first worker: the caller is 0 */
  uint_fast64_t seen = atomic_load(&pool->generation);
  while (!atomic_load(&pool->shutdown)) {
    run_chunks(pool, me);
    /* Idle: poll for the next generation a while, then sleep until it
     * comes (sleeping is raised before generation is read again, and the
     * caller bumps generation before it reads sleeping: a job posted in
     * between is seen here or wakes this thread). */
    if (!poll_u64(&pool->generation, seen)) {
      pthread_mutex_lock(&pool->lock);
      atomic_fetch_add(&pool->sleeping, 1);
      while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->shutdown)) {
        pthread_cond_wait(&pool->work, &pool->lock);
      }
      atomic_fetch_sub(&pool->sleeping, 1);
      pthread_mutex_unlock(&pool->lock);
    }
    seen = atomic_load(&pool->generation);
    leave_caller_cpu(pool);
  }
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
  atomic_store(&pool->sleeping, 0);
  atomic_store(&pool->caller_waiting, 0);
  atomic_store(&pool->caller_cpu, -1);
  atomic_store(&pool->num_ranges, 0);
  for (int t = 0; t <= kMaxWorkers; ++t) atomic_store(&pool->ranges[t].bounds, 0);
  atomic_store(&pool->finished, 0);
}

static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;


/* ACC_CPU_REF_POLL_US: a decimal count of microseconds (0 or more, capped
 * at 10000); anything else keeps the default. */
static void read_poll_setting(void) {
  const char *text = getenv("ACC_CPU_REF_POLL_US");
  if (text == NULL) return;
  char *end = NULL;
  const long long us = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || us < 0) return;
  atomic_store(&g_poll_ns, (int_fast64_t)(us < kMaxPollUs ? us : kMaxPollUs) * 1000);
}

static void once_per_process(void) {
  pthread_atfork(NULL, NULL, reset_pool_in_child);
  read_poll_setting();
}

/* Starts workers until there are wanted (or thread creation fails);
 * called with the pool locked. */
static void grow_pool(cr_pool *pool, int wanted) {
  if (wanted > kMaxWorkers) wanted = kMaxWorkers;
  if (pool->num_workers < wanted) pthread_once(&g_atfork_once, once_per_process);
  while (pool->num_workers < wanted) {
    void *index = (void *)(intptr_t)(pool->num_workers + 1);
    if (pthread_create(&pool->threads[pool->num_workers], NULL, worker_main, index) != 0) {
      break; /* fewer threads: the caller runs the remaining chunks */
    }
    pool->num_workers += 1;
  }
}

/* Multiply-adds a thread must get to be worth handing a job to: a polling
 * worker picks a job up within about a microsecond, a sleeping one takes
 * tens of microseconds to wake (more when its core is busy). */
enum { kMinWorkPolling = 1 << 17, kMinWorkSleeping = 1 << 20 };

/* Threads for a job of `amount`, each to get at least `polling` of it
 * (`sleeping` when the pool does not poll). */
static int threads_for(int num_threads, double amount, double polling, double sleeping) {
  if (num_threads <= 1 || !(amount > 0)) return 1;
  pthread_once(&g_atfork_once, once_per_process);
  const int64_t poll_ns = atomic_load_explicit(&g_poll_ns, memory_order_relaxed);
  const double useful = amount / (poll_ns > 0 ? polling : sleeping);
  if (useful < 2) return 1;
  return useful < num_threads ? (int)useful : num_threads;
}

int cr_threads_for_work(int num_threads, double work, int scale) {
  const double times = scale > 1 ? scale : 1;
  return threads_for(num_threads, work, (double)kMinWorkPolling * times,
                     (double)kMinWorkSleeping * times);
}

enum { kMinBytesPolling = 64 << 10, kMinBytesSleeping = 512 << 10 };

int cr_threads_for_bytes(int num_threads, double bytes) {
  return threads_for(num_threads, bytes, kMinBytesPolling, kMinBytesSleeping);
}

int cr_threads_for_images(int num_threads, int64_t images, double work) {
  if (images < 2) return cr_threads_for_work(num_threads, work, 1);
  /* A quarter of the per-thread minimum: cr_threads_for_work(..., 4 * work). */
  int threads = cr_threads_for_work(num_threads, 4.0 * work, 1);
  return threads > images ? (int)images : threads;
}

__attribute__((destructor)) static void shutdown_pool(void) {
  cr_pool *pool = &g_pool;
  pthread_mutex_lock(&pool->lock);
  atomic_store(&pool->shutdown, 1);
  atomic_fetch_add(&pool->generation, 1);
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
  if (atomic_load(&pool->shutdown)) {
    pthread_mutex_unlock(&pool->busy);
    body(context, 0, count);
    return;
  }
  pthread_mutex_lock(&pool->lock);
  grow_pool(pool, num_threads - 1);
  const int threads = pool->num_workers + 1 < num_threads ? pool->num_workers + 1 : num_threads;
  pthread_mutex_unlock(&pool->lock);
  int64_t chunks = (int64_t)threads * kChunksPerThread;
  if (chunks > count) chunks = count;
  /* Every chunk of the previous job is finished, and every range empty:
   * nothing reads the job's fields until the ranges below publish them. */
  pool->body = body;
  pool->context = context;
  pool->count = count;
  pool->num_chunks = chunks;
  atomic_store_explicit(&pool->finished, 0, memory_order_relaxed);
  for (int t = 0; t < threads; ++t) {
    int64_t begin, end;
    chunk_range(chunks, threads, t, &begin, &end);
    atomic_store_explicit(&pool->ranges[t].bounds,
                          pack_range((uint_fast64_t)begin, (uint_fast64_t)end),
                          memory_order_release);
  }
#if defined(__linux__)
  atomic_store_explicit(&pool->caller_cpu, sched_getcpu(), memory_order_relaxed);
#endif
  atomic_store_explicit(&pool->num_ranges, threads, memory_order_release);
  atomic_fetch_add(&pool->generation, 1);
  /* Polling workers see the new generation; wake only as many sleeping
   * ones as the job may use. */
  if (atomic_load(&pool->sleeping) > 0) {
    pthread_mutex_lock(&pool->lock);
    const int sleeping = atomic_load(&pool->sleeping);
    const int to_wake = sleeping < threads - 1 ? sleeping : threads - 1;
    for (int i = 0; i < to_wake; ++i) pthread_cond_signal(&pool->work);
    pthread_mutex_unlock(&pool->lock);
    /* A worker woken onto this CPU runs now, and moves off it: waiting
     * for the scheduler to run it took 2-4 ms (a few hundred jobs). */
    if (to_wake > 0) sched_yield();
  }
  run_chunks(pool, 0);
  if (atomic_load(&pool->finished) < chunks) {
    /* Other threads run the last chunks: poll a while, then sleep. */
    poll_until(&pool->finished, chunks);
    if (atomic_load(&pool->finished) < chunks) {
      pthread_mutex_lock(&pool->lock);
      atomic_store(&pool->caller_waiting, 1);
      while (atomic_load(&pool->finished) < chunks) {
        pthread_cond_wait(&pool->done, &pool->lock);
      }
      atomic_store(&pool->caller_waiting, 0);
      pthread_mutex_unlock(&pool->lock);
    }
  }
  atomic_store_explicit(&pool->num_ranges, 0, memory_order_relaxed);
  pthread_mutex_unlock(&pool->busy);
}
