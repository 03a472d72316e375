#include "team.h"

#include <sched.h>
#include <string.h>

#include "mxnet_acc.h"
#include "status.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Polls of the ticket a helper makes before it sleeps: some tens to a few
 * hundred microseconds, longer than the gap between two large instructions
 * of a launch. */
#define SPIN_POLLS 4000
/* Polls the caller makes for the parts in flight before it yields its core
 * to a helper the system may be holding back. */
#define WAIT_POLLS 2000

/* The ticket: the run's number (bits 32..63), its number of parts (16..31)
 * and the next part not yet taken (0..15). */
#define MAX_PARTS 0xFFFFu

static uint64_t run_of(uint_fast64_t ticket) { return (uint64_t)ticket >> 32; }
static uint32_t parts_of(uint_fast64_t ticket) { return (uint32_t)(ticket >> 16) & MAX_PARTS; }
static uint32_t next_of(uint_fast64_t ticket) { return (uint32_t)ticket & MAX_PARTS; }

/* Takes and runs parts of the current run until none is left or another
 * run has begun. fn and arg are read after the ticket showed the run, and a
 * part is taken only by a compare-and-swap of a ticket of that run with
 * parts left (its own count of parts is in the ticket), so they are the
 * run's own: the next run writes its own only after every part of this one
 * was taken. */
static void work(mlu_team *team, int worker) {
  uint_fast64_t ticket = atomic_load(&team->ticket);
  uint64_t run = run_of(ticket);
  mlu_team_fn fn = atomic_load(&team->fn);
  void *arg = atomic_load(&team->arg);
  for (;;) {
    if (run_of(ticket) != run || next_of(ticket) >= parts_of(ticket)) return;
    if (atomic_compare_exchange_weak(&team->ticket, &ticket, ticket + 1)) {
      fn(arg, (int)next_of(ticket), (int)parts_of(ticket), worker);
      atomic_fetch_sub(&team->pending, 1);
      ticket = atomic_load(&team->ticket);
    }
  }
}

static void *helper_main(void *arg) {
  const mlu_team_helper *self = arg;
  mlu_team *team = self->team;
  int worker = self->worker;
  uint64_t seen = run_of(atomic_load(&team->ticket));
  for (;;) {
    /* Spin only while a launch holds the team: between launches the host's
     * own threads need the cores. */
    for (int i = 0; i < SPIN_POLLS && run_of(atomic_load(&team->ticket)) == seen &&
                    worker <= atomic_load(&team->active) && !atomic_load(&team->stop);
         ++i) {
      CPU_RELAX();
    }
    if (run_of(atomic_load(&team->ticket)) == seen && !atomic_load(&team->stop)) {
      pthread_mutex_lock(&team->lock);
      atomic_fetch_add(&team->sleepers, 1);
      while (run_of(atomic_load(&team->ticket)) == seen && !atomic_load(&team->stop)) {
        pthread_cond_wait(&team->wake, &team->lock);
      }
      atomic_fetch_sub(&team->sleepers, 1);
      pthread_mutex_unlock(&team->lock);
    }
    if (atomic_load(&team->stop)) return NULL;
    seen = run_of(atomic_load(&team->ticket));
    if (worker <= atomic_load(&team->active)) work(team, worker);
  }
}

int mlu_team_init(mlu_team *team) {
  memset(team, 0, sizeof *team);
  atomic_init(&team->sleepers, 0);
  atomic_init(&team->stop, 0);
  atomic_init(&team->active, 0);
  atomic_init(&team->ticket, 0);
  atomic_init(&team->fn, NULL);
  atomic_init(&team->arg, NULL);
  atomic_init(&team->pending, 0);
  if (pthread_mutex_init(&team->busy, NULL) != 0) goto fail_busy;
  if (pthread_mutex_init(&team->lock, NULL) != 0) goto fail_lock;
  if (pthread_cond_init(&team->wake, NULL) != 0) goto fail_wake;
  return MX_ACC_OK;
fail_wake:
  pthread_mutex_destroy(&team->lock);
fail_lock:
  pthread_mutex_destroy(&team->busy);
fail_busy:
  return acc_fail(MX_ACC_ERR_INTERNAL, "cannot create a card's thread team");
}

void mlu_team_destroy(mlu_team *team) {
  pthread_mutex_lock(&team->lock);
  atomic_store(&team->stop, 1);
  pthread_cond_broadcast(&team->wake);
  pthread_mutex_unlock(&team->lock);
  for (int i = 0; i < team->num_helpers; ++i) pthread_join(team->helpers[i], NULL);
  pthread_cond_destroy(&team->wake);
  pthread_mutex_destroy(&team->lock);
  pthread_mutex_destroy(&team->busy);
}

int mlu_team_claim(mlu_team *team, int helpers) {
  if (helpers <= 0 || pthread_mutex_trylock(&team->busy) != 0) return 0;
  if (helpers > MLU_TEAM_MAX_HELPERS) helpers = MLU_TEAM_MAX_HELPERS;
  /* Only the claimer starts helpers, so num_helpers needs no other lock. */
  while (team->num_helpers < helpers) {
    mlu_team_helper *self = &team->helper_args[team->num_helpers];
    self->team = team;
    self->worker = team->num_helpers + 1;
    if (pthread_create(&team->helpers[team->num_helpers], NULL, helper_main, self) != 0) break;
    team->num_helpers += 1;
  }
  int usable = team->num_helpers < helpers ? team->num_helpers : helpers;
  atomic_store(&team->active, usable);
  if (usable == 0) pthread_mutex_unlock(&team->busy); /* no thread could start */
  return usable;
}

void mlu_team_release(mlu_team *team) {
  atomic_store(&team->active, 0); /* its helpers stop spinning */
  pthread_mutex_unlock(&team->busy);
}

void mlu_team_run(mlu_team *team, int parts, mlu_team_fn fn, void *arg) {
  if (parts <= 0) return;
  if ((unsigned)parts > MAX_PARTS) { /* more than a ticket counts: alone */
    for (int part = 0; part < parts; ++part) fn(arg, part, parts, 0);
    return;
  }
  atomic_store(&team->fn, fn);
  atomic_store(&team->arg, arg);
  atomic_store(&team->pending, parts);
  uint64_t run = run_of(atomic_load(&team->ticket)) + 1;
  atomic_store(&team->ticket, (uint_fast64_t)(run << 32 | (uint64_t)parts << 16));
  /* A helper that found no new run under the lock is waiting on wake (or
   * about to, the lock held): wake it. Both sides' atomics are sequentially
   * consistent, so either it sees the new ticket or this sees it asleep. */
  if (atomic_load(&team->sleepers) > 0) {
    pthread_mutex_lock(&team->lock);
    pthread_cond_broadcast(&team->wake);
    pthread_mutex_unlock(&team->lock);
  }
  work(team, 0);
  for (int polls = 0; atomic_load(&team->pending) > 0; ++polls) {
    if (polls < WAIT_POLLS) {
      CPU_RELAX();
    } else {
      sched_yield();
    }
  }
}
