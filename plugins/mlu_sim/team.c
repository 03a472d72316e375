#include "team.h"

#include <string.h>

#include "mxnet_acc.h"
#include "status.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Polls of the generation a helper makes before it sleeps: some tens to
 * a few hundred microseconds, longer than the gap between two large
 * instructions of a launch. */
#define SPIN_POLLS 4000

/* Takes the next part of the current run, or -1. Caller holds the lock. */
static int take_part(mlu_team *team) {
  return team->next_part < team->parts ? team->next_part++ : -1;
}

static void finish_part(mlu_team *team) {
  pthread_mutex_lock(&team->lock);
  if (--team->pending == 0) pthread_cond_signal(&team->done);
  pthread_mutex_unlock(&team->lock);
}

static void *helper_main(void *arg) {
  const mlu_team_helper *self = arg;
  mlu_team *team = self->team;
  int worker = self->worker;
  uint_fast64_t seen = atomic_load(&team->generation);
  for (;;) {
    for (int i = 0; i < SPIN_POLLS && atomic_load(&team->generation) == seen &&
                    !atomic_load(&team->stop);
         ++i) {
      CPU_RELAX();
    }
    pthread_mutex_lock(&team->lock);
    while (atomic_load(&team->generation) == seen && !atomic_load(&team->stop)) {
      pthread_cond_wait(&team->wake, &team->lock);
    }
    if (atomic_load(&team->stop)) {
      pthread_mutex_unlock(&team->lock);
      return NULL;
    }
    seen = atomic_load(&team->generation);
    while (worker <= team->active) {
      int part = take_part(team);
      if (part < 0) break;
      mlu_team_fn fn = team->fn;
      void *fn_arg = team->arg;
      int parts = team->parts;
      pthread_mutex_unlock(&team->lock);
      fn(fn_arg, part, parts, worker);
      finish_part(team);
      pthread_mutex_lock(&team->lock);
    }
    pthread_mutex_unlock(&team->lock);
  }
}

int mlu_team_init(mlu_team *team) {
  memset(team, 0, sizeof *team);
  atomic_init(&team->generation, 0);
  atomic_init(&team->stop, 0);
  if (pthread_mutex_init(&team->busy, NULL) != 0) goto fail_busy;
  if (pthread_mutex_init(&team->lock, NULL) != 0) goto fail_lock;
  if (pthread_cond_init(&team->wake, NULL) != 0) goto fail_wake;
  if (pthread_cond_init(&team->done, NULL) != 0) goto fail_done;
  return MX_ACC_OK;
fail_done:
  pthread_cond_destroy(&team->wake);
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
  pthread_cond_destroy(&team->done);
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
  pthread_mutex_lock(&team->lock);
  team->active = usable;
  pthread_mutex_unlock(&team->lock);
  if (usable == 0) pthread_mutex_unlock(&team->busy); /* no thread could start */
  return usable;
}

void mlu_team_release(mlu_team *team) { pthread_mutex_unlock(&team->busy); }

void mlu_team_run(mlu_team *team, int parts, mlu_team_fn fn, void *arg) {
  pthread_mutex_lock(&team->lock);
  team->fn = fn;
  team->arg = arg;
  team->parts = parts;
  team->next_part = 0;
  team->pending = parts;
  atomic_fetch_add(&team->generation, 1);
  pthread_cond_broadcast(&team->wake);
  for (;;) {
    int part = take_part(team);
    if (part < 0) break;
    pthread_mutex_unlock(&team->lock);
    fn(arg, part, parts, 0);
    finish_part(team);
    pthread_mutex_lock(&team->lock);
  }
  while (team->pending > 0) pthread_cond_wait(&team->done, &team->lock);
  pthread_mutex_unlock(&team->lock);
}
