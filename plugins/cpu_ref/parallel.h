/*
 * The fork-join loop of the cpu_ref kernels, on a persistent pool of
 * worker threads that sleep on a condition variable between jobs (no
 * spinning), see parallel.c.
 */
#ifndef CPU_REF_PARALLEL_H_
#define CPU_REF_PARALLEL_H_

#include <stdint.h>

/* Calls body(context, begin, end) on contiguous chunks that together cover
 * [0, count) exactly once, using at most num_threads threads including the
 * calling one, which takes chunks too (which thread runs which chunk is not
 * fixed). Everything runs inline, as one chunk, when num_threads <= 1,
 * count < 2 or the pool is running another caller's job. Returns once
 * every chunk has finished. body must be safe to run concurrently on
 * disjoint ranges. */
void cr_parallel_for(int num_threads, int64_t count,
                     void (*body)(void *context, int64_t begin, int64_t end),
                     void *context);

#endif /* CPU_REF_PARALLEL_H_ */
