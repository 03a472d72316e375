/*
 * plugins/mlu_sim/team.c under stress: runs of 1 to 16 parts, each adding
 * its run's number to a fixed share of an array, over claims of 1 to 3
 * helpers (helpers beyond a claim's must take no part), then a second team
 * driven from another thread at the same time (cards share nothing). Every
 * element must end with the sum of the run numbers: a part taken twice or
 * never shows. A worker index must lie within the claim.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "team.h"

#define ELEMENTS 1000
#define CLAIMS 1000
#define RUNS 100

typedef struct job {
  long *out;
  long value;
  int workers;
  _Atomic int bad_worker;
} job;

static void add_share(void *arg, int part, int parts, int worker) {
  job *j = arg;
  if (worker < 0 || worker >= j->workers) atomic_store(&j->bad_worker, 1);
  int lo = (int)((long)ELEMENTS * part / parts), hi = (int)((long)ELEMENTS * (part + 1) / parts);
  for (int i = lo; i < hi; ++i) j->out[i] += j->value;
}

typedef struct stress {
  mlu_team team;
  long out[ELEMENTS];
  long expected;
  int claim_failed, bad_worker;
} stress;

static void *drive(void *arg) {
  stress *s = arg;
  for (int claim = 0; claim < CLAIMS; ++claim) {
    int helpers = mlu_team_claim(&s->team, 1 + claim % 3);
    if (helpers < 1) {
      s->claim_failed = 1;
      return NULL;
    }
    for (int run = 0; run < RUNS; ++run) {
      job j = {s->out, run + 1, 1 + helpers, 0};
      mlu_team_run(&s->team, 1 + run % 16, add_share, &j);
      s->expected += run + 1;
      if (atomic_load(&j.bad_worker)) s->bad_worker = 1;
    }
    mlu_team_release(&s->team);
  }
  return NULL;
}

static int exact(const stress *s) {
  for (int i = 0; i < ELEMENTS; ++i) {
    if (s->out[i] != s->expected) return 0;
  }
  return 1;
}

int main(void) {
  stress *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  CHECK(a != NULL && b != NULL);
  if (a == NULL || b == NULL) return 1;
  CHECK(mlu_team_init(&a->team) == MX_ACC_OK);
  CHECK(mlu_team_init(&b->team) == MX_ACC_OK);
  drive(a);
  CHECK(!a->claim_failed && !a->bad_worker && exact(a));
  /* A claimed team is busy: a second claim gets no helper. */
  CHECK(mlu_team_claim(&a->team, 1) >= 1);
  CHECK(mlu_team_claim(&a->team, 1) == 0);
  mlu_team_release(&a->team);
  /* Two teams from two threads at once. */
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, drive, b) == 0);
  drive(a);
  pthread_join(thread, NULL);
  CHECK(!a->claim_failed && !a->bad_worker && exact(a));
  CHECK(!b->claim_failed && !b->bad_worker && exact(b));
  mlu_team_destroy(&a->team);
  mlu_team_destroy(&b->team);
  free(a);
  free(b);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
