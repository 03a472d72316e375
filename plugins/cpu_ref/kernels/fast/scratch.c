/*
 * Per-thread scratch buffers of the kernels (scratch.h).
 *
 * A convolution's padded planes and wide output, and the GEMM's packed
 * blocks, were allocated and freed on every call. glibc returns the top
 * of its heap to the system once more than 128 KiB of it is free, so a
 * layer freeing 150 KiB there gave it back and the next layer took it
 * again with brk and page faults: a 2-thread chain of 16-channel 32 x 32
 * layers ran at 31 or at 62 us per layer depending on the process (3 brk
 * calls and a page fault per layer in the slow ones, half of the caller's
 * time in the kernel). Freed blocks also came back for other uses, so a
 * thread could write lines the other core had last used. Kept per thread
 * and per use, a buffer has the same address every call.
 *
 * Each thread's buffers hang off a pthread key, whose destructor frees
 * them when the thread exits; every thread's set is also on a list, freed
 * when the library is unloaded (the key deleted first, so that no exiting
 * thread frees a set twice).
 */
#define _POSIX_C_SOURCE 200809L

#include "scratch.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { kAlign = 64 };

typedef struct cr_scratch_set {
  void *buffers[CR_SCRATCH_SLOTS];
  size_t sizes[CR_SCRATCH_SLOTS];
  struct cr_scratch_set *prev, *next; /* on g_sets */
} cr_scratch_set;

/* Process-wide (README.md, "State"): each thread's scratch set is its own
 * (thread-specific data); the list of all sets, for freeing them, is
 * guarded by g_lock. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* guards g_sets */
static cr_scratch_set *g_sets;
static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_key_made;

static void free_set(cr_scratch_set *set) {
  for (int slot = 0; slot < CR_SCRATCH_SLOTS; ++slot) free(set->buffers[slot]);
  free(set);
}

/* The key's destructor: the exiting thread's set. */
static void release_thread(void *value) {
  cr_scratch_set *set = value;
  pthread_mutex_lock(&g_lock);
  if (set->prev != NULL) set->prev->next = set->next;
  if (set->next != NULL) set->next->prev = set->prev;
  if (g_sets == set) g_sets = set->next;
  pthread_mutex_unlock(&g_lock);
  free_set(set);
}

/* A child of fork() has one thread; the lock may have been held by another. */
static void reset_lock_in_child(void) { pthread_mutex_init(&g_lock, NULL); }

static void make_key(void) {
  g_key_made = pthread_key_create(&g_key, release_thread) == 0;
  if (g_key_made) pthread_atfork(NULL, NULL, reset_lock_in_child);
}

static cr_scratch_set *thread_set(void) {
  pthread_once(&g_once, make_key);
  if (!g_key_made) return NULL;
  cr_scratch_set *set = pthread_getspecific(g_key);
  if (set != NULL) return set;
  set = calloc(1, sizeof *set);
  if (set == NULL) return NULL;
  if (pthread_setspecific(g_key, set) != 0) {
    free(set);
    return NULL;
  }
  pthread_mutex_lock(&g_lock);
  set->next = g_sets;
  if (g_sets != NULL) g_sets->prev = set;
  g_sets = set;
  pthread_mutex_unlock(&g_lock);
  return set;
}

/* Built with CR_SCRATCH_POISON (the sanitized builds of the tests and
 * plugins), every buffer handed out is first filled with all-ones bytes
 * (NaN floats, -1 integers), so that a kernel reading scratch it did not
 * write in the same call gets wrong results rather than the right values
 * an earlier call left there. */
static void *handed_out(void *buffer, size_t bytes) {
#ifdef CR_SCRATCH_POISON
  memset(buffer, 0xff, bytes);
#else
  (void)bytes;
#endif
  return buffer;
}

void *cr_scratch(cr_scratch_slot slot, size_t bytes) {
  if (bytes == 0 || (int)slot < 0 || slot >= CR_SCRATCH_SLOTS) return NULL;
  if (bytes > SIZE_MAX - kAlign) return NULL;
  cr_scratch_set *set = thread_set();
  if (set == NULL) return NULL;
  if (set->sizes[slot] >= bytes) return handed_out(set->buffers[slot], bytes);
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void *fresh = aligned_alloc(kAlign, rounded);
  if (fresh == NULL) return NULL;
  free(set->buffers[slot]);
  set->buffers[slot] = fresh;
  set->sizes[slot] = rounded;
  return handed_out(fresh, bytes);
}

__attribute__((destructor)) static void release_all(void) {
  if (!g_key_made) return;
  pthread_key_delete(g_key);
  pthread_mutex_lock(&g_lock);
  while (g_sets != NULL) {
    cr_scratch_set *set = g_sets;
    g_sets = set->next;
    free_set(set);
  }
  pthread_mutex_unlock(&g_lock);
}
