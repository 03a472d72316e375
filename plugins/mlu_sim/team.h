/*
 * A card's team of host threads: the helpers that let one launch's large
 * instructions run on several host cores (parameter num_threads, default 1:
 * the queue's worker alone).
 *
 * One launch at a time uses a card's team: a launch claims it with
 * mlu_team_claim(), which never blocks; a launch that finds it busy (a
 * launch of another queue of the same card) runs on its worker alone. The
 * claiming launch then runs instructions in parts with mlu_team_run():
 * part 0 .. parts-1, taken in turn by the caller and the helpers, each part
 * a fixed share of the instruction's output (kernels.h), so results do not
 * depend on the number of threads or on who ran which part. Helpers are
 * started when a claim first asks for them and stop when the card is
 * destroyed; between instructions they spin briefly, then sleep. Parts are
 * taken and finished with atomic operations only; the caller, once no part
 * is left to take, waits for the parts in flight spinning, then yielding
 * its core. Each
 * card has its own team; no state is shared between cards.
 */
#ifndef MLU_SIM_TEAM_H_
#define MLU_SIM_TEAM_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define MLU_TEAM_MAX_HELPERS 15

/* One part of a run; worker is 0 for the claiming thread, 1 + i for helper
 * i, so that a part may use that thread's own workspace. */
typedef void (*mlu_team_fn)(void *arg, int part, int parts, int worker);

struct mlu_team;
typedef struct mlu_team_helper {
  struct mlu_team *team;
  int worker;
} mlu_team_helper;

typedef struct mlu_team {
  pthread_mutex_t busy; /* held by the launch that has claimed the team */
  pthread_mutex_t lock; /* with wake: where helpers sleep */
  pthread_cond_t wake;
  pthread_t helpers[MLU_TEAM_MAX_HELPERS];
  mlu_team_helper helper_args[MLU_TEAM_MAX_HELPERS];
  int num_helpers;      /* changed only by the claiming launch */
  atomic_int sleepers;  /* helpers waiting on wake */
  atomic_int stop;
  atomic_int active;    /* helpers 1 .. active take parts: the current claim's */
  /* The current run: fn and arg, written by mlu_team_run before its ticket:
   * the run's number, its number of parts and the next part not yet taken
   * (team.c; parts are taken by compare-and-swap, so no thread waits for a
   * lock that a thread the system has held back holds). */
  atomic_uint_fast64_t ticket;
  _Atomic(mlu_team_fn) fn;
  _Atomic(void *) arg;
  atomic_int pending;   /* parts of the current run not finished */
} mlu_team;

/* MX_ACC status; starts no thread. */
int mlu_team_init(mlu_team *team);

/* Stops and joins the helpers. */
void mlu_team_destroy(mlu_team *team);

/* Claims the team for one launch that wants `helpers` helper threads
 * (starting those not yet running). Returns how many helpers the launch may
 * use: 0 when the team is busy or helpers is 0 (nothing to release then),
 * else at least 1, and the caller must mlu_team_release() it. */
int mlu_team_claim(mlu_team *team, int helpers);
void mlu_team_release(mlu_team *team);

/* Runs fn(arg, part, parts, worker) for every part in [0, parts) on the
 * caller and the claimed helpers, each taking the next part not yet taken
 * (so parts may outnumber threads: a thread the system holds back leaves
 * its untaken parts to the others); returns when every part has finished. */
void mlu_team_run(mlu_team *team, int parts, mlu_team_fn fn, void *arg);

#endif /* MLU_SIM_TEAM_H_ */
