/*
 * GFLOP/s of cpu_ref's GEMM and convolution kernels (driven by
 * benchmarks/cpu_ref_kernels.py, which builds this file with the plugins'
 * release flags).
 *
 * Usage: bench_kernels ISA THREADS REPEAT gemm M N K [a|b]
 *        bench_kernels ISA THREADS REPEAT conv N C H W O KH KW STRIDE PAD GROUPS
 *        bench_kernels ISA THREADS REPEAT convpair N C H W O KH KW STRIDE PAD GROUPS
 *        bench_kernels ISA THREADS REPEAT fork COUNT CHUNK_US GAP_US
 * ISA: generic, avx2 or avx512 (capped at what the CPU has). Prints
 * "<isa> <median seconds> <GFLOP/s>". convpair runs the batch of N images
 * as one call and as N calls of one image each, alternately, and prints
 * "<isa> <fastest one-call seconds> <fastest per-image seconds> <ratio>":
 * the fastest of REPEAT, for a shared machine. fork times one
 * cr_parallel_for of COUNT chunks of CHUNK_US microseconds each, GAP_US
 * microseconds of the caller's own work apart, and prints "<isa> <median
 * seconds> <median less COUNT * CHUNK_US / THREADS, in microseconds>":
 * what a layer of that size pays for its fork and join.
 */
#if defined(__linux__)
#define _GNU_SOURCE /* sched_setaffinity, for BENCH_REMOTE_INPUT */
#else
#define _POSIX_C_SOURCE 200809L
#endif
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm.h"
#include "kernels.h"
#include "parallel.h"

/* Wall time; with BENCH_CPU_TIME set, the calling thread's CPU time
 * instead (for one thread on a shared machine: the time other processes
 * hold the core is not counted). */
static double now(void) {
  static int cpu_time = -1;
  if (cpu_time < 0) cpu_time = getenv("BENCH_CPU_TIME") != NULL;
  struct timespec t;
  if (cpu_time) {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  } else {
    timespec_get(&t, TIME_UTC);
  }
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void spin_us(double us) {
  const double until = now() + us * 1e-6;
  while (now() < until) {
  }
}

/* The body of the fork mode: each chunk of its range takes *chunk_us. */
static void fork_body(void *context, int64_t begin, int64_t end) {
  const double *chunk_us = context;
  spin_us(*chunk_us * (double)(end - begin));
}

/* BENCH_PLANES_SPLIT=N: before each timed call the input is rewritten by
 * N threads (THREADS when N < 2) in contiguous ranges of its planes, as a depthwise step
 * shared out by planes leaves it in a model: each core then holds its part
 * of the input, modified, in its own cache. */
typedef struct {
  float *x;
  int64_t plane;
} rewrite_task;

static void rewrite_planes(void *context, int64_t begin, int64_t end) {
  const rewrite_task *t = context;
  for (int64_t i = begin * t->plane; i < end * t->plane; ++i) t->x[i] = t->x[i] * 1.0f + 0.0f;
}

/* BENCH_REMOTE_INPUT=F (Linux): the calling thread is kept on the first CPU
 * it may use, and before each timed call a thread on the second rewrites
 * the last fraction F of the input (0 < F <= 1), which the call then reads
 * from the other core's cache: with BENCH_CPU_TIME, the cost of that
 * reading on one thread, away from the timing of the pool's threads. */
typedef struct {
  float *x;
  size_t count;
  int cpu;
} remote_rewrite;

#if defined(__linux__)
static int nth_allowed_cpu(int nth) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed) && nth-- == 0) return cpu;
  }
  return -1;
}

static void pin_to(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  sched_setaffinity(0, sizeof one, &one);
}

static void *rewrite_remote(void *arg) {
  remote_rewrite *r = arg;
  pin_to(r->cpu);
  for (size_t i = 0; i < r->count; ++i) r->x[i] = r->x[i] * 1.0f + 0.0f;
  return NULL;
}
#endif

static void remote_input(float *x, size_t count) {
  const char *text = getenv("BENCH_REMOTE_INPUT");
  if (text == NULL) return;
#if defined(__linux__)
  static int home = -2, other = -1;
  if (home == -2) {
    home = nth_allowed_cpu(0), other = nth_allowed_cpu(1);
    if (home >= 0) pin_to(home);
  }
  double fraction = atof(text);
  if (other < 0 || !(fraction > 0)) return;
  if (fraction > 1) fraction = 1;
  const size_t part = (size_t)((double)count * fraction);
  remote_rewrite r = {x + (count - part), part, other};
  pthread_t thread;
  if (pthread_create(&thread, NULL, rewrite_remote, &r) == 0) pthread_join(thread, NULL);
#else
  (void)x, (void)count;
#endif
}

static void split_planes(float *x, int64_t planes, int64_t plane, int threads) {
  remote_input(x, (size_t)(planes * plane));
  const char *split = getenv("BENCH_PLANES_SPLIT");
  if (split == NULL) return;
  rewrite_task t = {x, plane};
  cr_parallel_for(atoi(split) > 1 ? atoi(split) : threads, planes, rewrite_planes, &t);
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* With BENCH_COLD set, a 64 MiB buffer is rewritten before each timed call,
 * so that the weights and the image come from memory, as in a model whose
 * layers together overflow the caches. */
static void flush_caches(void) {
  static unsigned char *buffer = NULL;
  enum { kFlushBytes = 64 << 20 };
  if (getenv("BENCH_COLD") == NULL) return;
  if (buffer == NULL) buffer = malloc(kFlushBytes);
  if (buffer == NULL) return;
  for (size_t i = 0; i < kFlushBytes; i += 64) buffer[i] = (unsigned char)(buffer[i] + 1);
}

/* count floats on 64-byte lines, as the plugin's arena and memory hand
 * them out. With malloc's 16-byte alignment, two threads writing the two
 * halves of an output plane shared the cache line between them: a
 * 2-thread 16 x 32 x 32 -> 32 stride-2 convolution took 12.2-12.4 us here
 * against 9.5 on aligned buffers, and a choice made on such figures (a
 * plane's rows or its outputs per thread) did not hold in a model. */
static float *floats(size_t count) {
  const size_t bytes = ((count ? count : 1) * sizeof(float) + 63) / 64 * 64;
  return aligned_alloc(64, bytes);
}

static float *random_floats(size_t count) {
  float *p = floats(count);
  if (p == NULL) return NULL;
  unsigned state = 12345;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1103515245u + 12345u;
    p[i] = (float)((state >> 9) & 0xffff) / 65536.0f - 0.5f;
  }
  return p;
}

/* A convolution case from the command line (N C H W O KH KW S PAD GROUPS),
 * its arrays (random input, filters and bias; the output; the filters packed
 * when the kernel packs them), for the conv and convpair modes. */
typedef struct {
  int64_t n, ch, h, w, o, kh, kw, oh, ow;
  cr_conv_params p;
  float *x, *wt, *bias, *y, *pw;
  cr_isa pisa;
} conv_case;

static conv_case conv_case_make(char **args, cr_isa isa) {
  conv_case c;
  c.n = atoll(args[0]), c.ch = atoll(args[1]), c.h = atoll(args[2]), c.w = atoll(args[3]);
  c.o = atoll(args[4]), c.kh = atoll(args[5]), c.kw = atoll(args[6]);
  const int64_t s = atoll(args[7]), pad = atoll(args[8]), groups = atoll(args[9]);
  c.p = (cr_conv_params){{1, c.kh, c.kw}, {1, s, s}, {1, 1, 1}, {0, pad, pad}, groups};
  c.oh = (c.h + 2 * pad - c.kh) / s + 1, c.ow = (c.w + 2 * pad - c.kw) / s + 1;
  c.x = random_floats((size_t)(c.n * c.ch * c.h * c.w));
  c.wt = random_floats((size_t)(c.o * (c.ch / groups) * c.kh * c.kw));
  c.bias = random_floats((size_t)c.o);
  c.y = floats((size_t)(c.n * c.o * c.oh * c.ow));
  const size_t packed = cr_conv_packed_floats(&c.p, c.o, c.ch / groups);
  c.pw = packed ? floats(packed) : NULL;
  c.pisa = c.pw ? cr_conv_pack(&c.p, c.o, c.ch / groups, c.wt, c.pw) : isa;
  return c;
}

static void conv_case_free(conv_case *c) {
  free(c->x), free(c->wt), free(c->bias), free(c->y), free(c->pw);
}

int main(int argc, char **argv) {
  if (argc < 5) return 2;
  cr_isa isa = strcmp(argv[1], "generic") == 0 ? CR_ISA_GENERIC
               : strcmp(argv[1], "avx2") == 0  ? CR_ISA_AVX2
                                               : CR_ISA_AVX512;
  isa = cr_gemm_set_isa(isa);
  const int threads = atoi(argv[2]), repeat = atoi(argv[3]);
  double *times = calloc((size_t)repeat, sizeof *times);
  double flops = 0.0;
  int status = 0;
  if (strcmp(argv[4], "gemm") == 0 && argc >= 8) {
    const int64_t m = atoll(argv[5]), n = atoll(argv[6]), k = atoll(argv[7]);
    /* "a" or "b": that operand is packed beforehand (as weights are). */
    const char *packed = argc > 8 ? argv[8] : "";
    float *a = random_floats((size_t)(m * k)), *b = random_floats((size_t)(k * n));
    float *c = random_floats((size_t)(m * n));
    float *pa = NULL, *pb = NULL;
    cr_gemm_operand oa = {a, k, 1, NULL, NULL, NULL, isa, NULL};
    cr_gemm_operand ob = {b, n, 1, NULL, NULL, NULL, isa, NULL};
    if (strcmp(packed, "a") == 0) {
      pa = floats(cr_gemm_packed_a_floats(m, k));
      if (pa != NULL) cr_gemm_pack_a(m, k, a, k, 1, pa);
      oa.packed = pa;
    } else if (strcmp(packed, "b") == 0) {
      pb = floats(cr_gemm_packed_b_floats(k, n));
      if (pb != NULL) cr_gemm_pack_b(k, n, b, n, 1, pb);
      ob.packed = pb;
    }
    for (int r = 0; r < repeat; ++r) {
      flush_caches();
      double t0 = now();
      status |= cr_gemm(m, n, k, &oa, &ob, c, n, NULL, threads);
      times[r] = now() - t0;
    }
    flops = 2.0 * (double)m * (double)n * (double)k;
    free(a), free(b), free(c), free(pa), free(pb);
  } else if (strcmp(argv[4], "conv") == 0 && argc >= 15) {
    conv_case c = conv_case_make(argv + 5, isa);
    const int64_t xs[5] = {c.n, c.ch, 1, c.h, c.w}, ys[5] = {c.n, c.o, 1, c.oh, c.ow};
    for (int r = 0; r < repeat; ++r) {
      flush_caches();
      split_planes(c.x, c.n * c.ch, c.h * c.w, threads);
      double t0 = now();
      status |= cr_convolution_fused(&c.p, xs, c.x, c.wt, c.pw, c.pisa, c.bias, NULL, ys, c.y,
                                     threads);
      times[r] = now() - t0;
    }
    flops = 2.0 * (double)(c.n * c.o * c.oh * c.ow) *
            (double)((c.ch / c.p.num_group) * c.kh * c.kw);
    conv_case_free(&c);
  } else if (strcmp(argv[4], "convpair") == 0 && argc >= 15) {
    conv_case c = conv_case_make(argv + 5, isa);
    const int64_t xs[5] = {c.n, c.ch, 1, c.h, c.w}, ys[5] = {c.n, c.o, 1, c.oh, c.ow};
    const int64_t xs1[5] = {1, c.ch, 1, c.h, c.w}, ys1[5] = {1, c.o, 1, c.oh, c.ow};
    double batched = 1e30, split = 1e30;
    for (int r = 0; r < repeat; ++r) {
      flush_caches();
      double t0 = now();
      status |= cr_convolution_fused(&c.p, xs, c.x, c.wt, c.pw, c.pisa, c.bias, NULL, ys, c.y,
                                     threads);
      const double t1 = now() - t0;
      flush_caches();
      t0 = now();
      for (int64_t i = 0; i < c.n; ++i) {
        status |= cr_convolution_fused(&c.p, xs1, c.x + i * c.ch * c.h * c.w, c.wt, c.pw,
                                       c.pisa, c.bias, NULL, ys1,
                                       c.y + i * c.o * c.oh * c.ow, threads);
      }
      const double t2 = now() - t0;
      if (t1 < batched) batched = t1;
      if (t2 < split) split = t2;
    }
    conv_case_free(&c);
    free(times);
    printf("%s %.9f %.9f %.3f\n", cr_isa_name(isa), batched, split, batched / split);
    return status != 0;
  } else if (strcmp(argv[4], "fork") == 0 && argc >= 8) {
    const int64_t count = atoll(argv[5]);
    double chunk_us = atof(argv[6]);
    const double gap_us = atof(argv[7]);
    for (int r = 0; r < repeat; ++r) {
      spin_us(gap_us);
      double t0 = now();
      cr_parallel_for(threads, count, fork_body, &chunk_us);
      times[r] = now() - t0;
    }
    qsort(times, (size_t)repeat, sizeof *times, compare);
    const double median = times[repeat / 2];
    const double ideal = chunk_us * (double)count / (threads > 1 ? threads : 1);
    printf("%s %.9f %.2f\n", cr_isa_name(isa), median, median * 1e6 - ideal);
    free(times);
    return 0;
  } else if (strcmp(argv[4], "maxpool") == 0 && argc >= 11) {
    /* N C H W K S: K x K max pooling, stride S, no padding, "valid" windows */
    const int64_t n = atoll(argv[5]), ch = atoll(argv[6]), h = atoll(argv[7]),
                  w = atoll(argv[8]), k = atoll(argv[9]), s = atoll(argv[10]);
    const cr_pool_params p = {{1, k, k}, {1, s, s}, {0, 0, 0}, CR_POOL_MAX, 1, 0};
    const int64_t oh = (h - k) / s + 1, ow = (w - k) / s + 1;
    const int64_t xs[5] = {n, ch, 1, h, w}, ys[5] = {n, ch, 1, oh, ow};
    float *x = random_floats((size_t)(n * ch * h * w));
    float *y = floats((size_t)(n * ch * oh * ow));
    for (int r = 0; r < repeat && x != NULL && y != NULL; ++r) {
      flush_caches();
      double t0 = now();
      cr_pooling(&p, xs, x, ys, y, threads);
      times[r] = now() - t0;
    }
    flops = (double)(n * ch * oh * ow * k * k); /* comparisons */
    free(x), free(y);
  } else {
    return 2;
  }
  qsort(times, (size_t)repeat, sizeof *times, compare);
  const double median = times[repeat / 2];
  printf("%s %.9f %.2f\n", cr_isa_name(isa), median, flops / median * 1e-9);
  free(times);
  return status != 0;
}
