/*
 * cnrtQueue: an asynchronous, in-order task queue with its own worker
 * thread and its own compute cluster (on-chip memory), as the seed
 * describes: tasks of one queue run in FIFO order, tasks of different
 * queues run in parallel, and a sync blocks until the queue has drained.
 *
 * A task that fails makes the queue discard the tasks queued behind it
 * (their inputs would be garbage) until the next sync, which reports the
 * first failure with its message and clears it: the queue is usable again.
 */
#ifndef MLU_SIM_QUEUE_H_
#define MLU_SIM_QUEUE_H_

#include "card.h"
#include "machine.h"

typedef struct mlu_queue mlu_queue;

/* Runs on the worker thread; returns an MX_ACC status with a message
 * recorded through acc_fail() on failure. */
typedef int (*mlu_task_fn)(void *arg, mlu_cluster *cluster);

/* Frees arg; called on the worker thread after the task ran or was
 * discarded, and by mlu_queue_push() itself when it fails. May be NULL. */
typedef void (*mlu_task_release)(void *arg);

int mlu_queue_create(mlu_card *card, mlu_queue **queue);

/* Waits for every queued task, stops the worker and frees the queue. */
void mlu_queue_destroy(mlu_queue *queue);

mlu_card *mlu_queue_card(const mlu_queue *queue);

/* Appends a task; returns at once. On failure release(arg) has been
 * called. */
int mlu_queue_push(mlu_queue *queue, mlu_task_fn run, mlu_task_release release, void *arg);

/* Blocks until every task pushed before the call has finished; returns
 * the first failure since the previous sync (message re-recorded in the
 * calling thread), or MX_ACC_OK. */
int mlu_queue_sync(mlu_queue *queue);

#endif /* MLU_SIM_QUEUE_H_ */
