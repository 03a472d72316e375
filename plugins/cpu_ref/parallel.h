/*
 * The fork-join loop of the cpu_ref kernels, on a persistent pool of
 * worker threads that poll briefly for the next job and then sleep on a
 * condition variable (never spin unbounded), see parallel.c.
 */
#ifndef CPU_REF_PARALLEL_H_
#define CPU_REF_PARALLEL_H_

#include <stdint.h>

/* Calls body(context, begin, end) on contiguous chunks that together cover
 * [0, count) exactly once, using at most num_threads threads including the
 * calling one, which takes chunks too (each thread starts on its own range
 * of chunks, the same for every job of the same count and thread count,
 * and may take over others'; which thread runs which chunk is not fixed).
 * Everything runs inline, as one chunk, when num_threads <= 1, count < 2
 * or the pool is running another caller's job. Returns once
 * every chunk has finished. body must be safe to run concurrently on
 * disjoint ranges. */
void cr_parallel_for(int num_threads, int64_t count,
                     void (*body)(void *context, int64_t begin, int64_t end),
                     void *context);

/* The number of threads, at most num_threads, worth using for a job of
 * about `work` multiply-adds (or comparable element operations): each
 * thread must get enough to pay for handing it the job, which is about a
 * microsecond for a polling worker and tens of microseconds for a sleeping
 * one (see parallel.c). `scale` multiplies the per-thread minimum (the
 * GEMM passes 2: its threads also pack). Returns 1 for small jobs. */
int cr_threads_for_work(int num_threads, double work, int scale);

#endif /* CPU_REF_PARALLEL_H_ */
