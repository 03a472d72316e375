#include "queue.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mxnet_acc.h"
#include "status.h"

enum { kMessageSize = 1024 };

typedef struct mlu_task {
  mlu_task_fn run;
  mlu_task_release release;
  void *arg;
  struct mlu_task *next;
} mlu_task;

struct mlu_queue {
  mlu_card *card;
  pthread_mutex_t lock; /* guards every field below but cluster */
  pthread_cond_t changed;
  mlu_task *head, *tail;
  uint64_t pushed, finished;
  int stopping;
  int error; /* first failure since the last sync */
  char message[kMessageSize];
  pthread_t worker;
  mlu_cluster cluster; /* used by the worker only */
};

static mlu_task *pop_task(mlu_queue *queue) {
  mlu_task *task = queue->head;
  queue->head = task->next;
  if (queue->head == NULL) queue->tail = NULL;
  return task;
}

/* Runs one task unless an earlier failure is pending; returns its status
 * and copies its message into message. */
static int run_task(mlu_queue *queue, mlu_task *task, int discard, char *message) {
  if (discard) return MX_ACC_OK;
  acc_clear_error(); /* the message must belong to this task */
  int status = task->run(task->arg, &queue->cluster);
  if (status != MX_ACC_OK) {
    const char *text = acc_last_error();
    snprintf(message, kMessageSize, "%s", text[0] ? text : "a queued task failed");
  }
  return status;
}

static void *worker_main(void *arg) {
  mlu_queue *queue = arg;
  char message[kMessageSize];
  pthread_mutex_lock(&queue->lock);
  for (;;) {
    while (queue->head == NULL && !queue->stopping) {
      pthread_cond_wait(&queue->changed, &queue->lock);
    }
    if (queue->head == NULL) break; /* stopping, and drained */
    mlu_task *task = pop_task(queue);
    int discard = queue->error != MX_ACC_OK;
    pthread_mutex_unlock(&queue->lock);
    int status = run_task(queue, task, discard, message);
    if (task->release != NULL) task->release(task->arg);
    free(task);
    pthread_mutex_lock(&queue->lock);
    if (status != MX_ACC_OK && queue->error == MX_ACC_OK) {
      queue->error = status;
      memcpy(queue->message, message, sizeof message);
    }
    queue->finished += 1;
    pthread_cond_broadcast(&queue->changed);
  }
  pthread_mutex_unlock(&queue->lock);
  return NULL;
}

int mlu_queue_create(mlu_card *card, mlu_queue **result) {
  mlu_queue *queue = calloc(1, sizeof *queue);
  if (queue == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "queue");
  queue->card = card;
  pthread_mutex_init(&queue->lock, NULL);
  pthread_cond_init(&queue->changed, NULL);
  if (pthread_create(&queue->worker, NULL, worker_main, queue) != 0) {
    pthread_cond_destroy(&queue->changed);
    pthread_mutex_destroy(&queue->lock);
    free(queue);
    return acc_fail(MX_ACC_ERR_INTERNAL, "cannot start a queue's worker thread");
  }
  *result = queue;
  return MX_ACC_OK;
}

void mlu_queue_destroy(mlu_queue *queue) {
  if (queue == NULL) return;
  pthread_mutex_lock(&queue->lock);
  queue->stopping = 1;
  pthread_cond_broadcast(&queue->changed);
  pthread_mutex_unlock(&queue->lock);
  pthread_join(queue->worker, NULL);
  mlu_cluster_release(&queue->cluster);
  pthread_cond_destroy(&queue->changed);
  pthread_mutex_destroy(&queue->lock);
  free(queue);
}

mlu_card *mlu_queue_card(const mlu_queue *queue) { return queue->card; }

int mlu_queue_push(mlu_queue *queue, mlu_task_fn run, mlu_task_release release, void *arg) {
  mlu_task *task = malloc(sizeof *task);
  if (task == NULL) {
    if (release != NULL) release(arg);
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "queue task");
  }
  *task = (mlu_task){run, release, arg, NULL};
  pthread_mutex_lock(&queue->lock);
  if (queue->tail != NULL) queue->tail->next = task;
  else queue->head = task;
  queue->tail = task;
  queue->pushed += 1;
  pthread_cond_broadcast(&queue->changed);
  pthread_mutex_unlock(&queue->lock);
  return MX_ACC_OK;
}

int mlu_queue_sync(mlu_queue *queue) {
  char message[kMessageSize];
  pthread_mutex_lock(&queue->lock);
  uint64_t target = queue->pushed;
  while (queue->finished < target) pthread_cond_wait(&queue->changed, &queue->lock);
  int status = queue->error;
  memcpy(message, queue->message, sizeof message);
  queue->error = MX_ACC_OK;
  queue->message[0] = '\0';
  pthread_mutex_unlock(&queue->lock);
  return status == MX_ACC_OK ? MX_ACC_OK : acc_fail(status, "%s", message);
}
