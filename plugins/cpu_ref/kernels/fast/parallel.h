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

/* The number of threads for a job shared out by images, `images` of them
 * (planes of a batch taken in image order, or whole images), worth about
 * `work` in all: as cr_threads_for_work with a quarter of its per-thread
 * minimum, and at most one thread per image. The step before most likely
 * left each image in the cache of the core that computed it, and reading
 * half of them from the other core costs more than handing a thread the
 * job: a depthwise layer of dwsep_small at batch 8 (147K multiply-adds)
 * took 7.0 us on one thread after a single-thread step and 12.5 us after a
 * step shared by 2 threads. */
int cr_threads_for_images(int num_threads, int64_t images, double work);

/* The number of threads, at most num_threads, for a job that streams
 * `bytes` bytes of a tensor once (a copy, a reduction of whole planes),
 * shared out in contiguous ranges: a thread per 64 KiB read (512 KiB when
 * the pool sleeps). Such a job costs little to compute, but its input most
 * likely comes from a step shared by the same threads, each of which left
 * its part in its own core's cache, and a core reads the other core's
 * lines at about a quarter of the speed of its own (about 45 ns per KiB
 * against 11 on the 2-core Xeon). Shared out, each thread reads its part
 * from its own cache: squeezenet's global average pooling of 1000 x 13 x
 * 13 took 65 us on one thread after its 2-thread convolution and 22 us on
 * two (41 us with one thread throughout). */
int cr_threads_for_bytes(int num_threads, double bytes);

#endif /* CPU_REF_PARALLEL_H_ */
