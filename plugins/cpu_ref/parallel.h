/*
 * A minimal fork-join loop for the cpu_ref kernels.
 *
 * Threads are created for each call and joined before it returns: the
 * reference plugin favours having no pool, no global state and nothing to
 * shut down over the cost of thread start-up, which kernels avoid paying for
 * small jobs by asking for fewer threads.
 */
#ifndef CPU_REF_PARALLEL_H_
#define CPU_REF_PARALLEL_H_

#include <stdint.h>

/* Calls body(context, begin, end) on contiguous chunks that together cover
 * [0, count) exactly once, using at most num_threads threads including the
 * calling one. Chunk 0 runs on the calling thread; the rest run on threads
 * created for this call, or inline if a thread cannot be created. Everything
 * runs inline when num_threads <= 1 or count < 2. Returns once every chunk
 * has finished. body must be safe to run concurrently on disjoint ranges. */
void cr_parallel_for(int num_threads, int64_t count,
                     void (*body)(void *context, int64_t begin, int64_t end),
                     void *context);

#endif /* CPU_REF_PARALLEL_H_ */
