/*
 * Tests for plugins/cpu_ref/kernels/ (reference/kernels.c, reference/data.c, fast/parallel.c, ...).
 *
 * Small cases with expected values worked out by hand (the arithmetic is in
 * the comments), a direct-formula convolution to compare against on random
 * data, and checks that the thread count never changes a result. Prints
 * "N passed, N failed" and exits non-zero if anything failed.
 */
#if defined(__linux__)
#define _GNU_SOURCE /* sched_getcpu and the affinity calls, for the pool's test */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#endif
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_blocked.h"
#include "kernels.h"
#include "parallel.h"

/* tests/c/test_c_kernels.py compiles kernels.c and parallel.c with this file;
 * the data kernels split out of kernels.c come in here, so that the one
 * list of sources keeps building. */

typedef struct test_counts {
  int passed;
  int failed;
} test_counts;

static test_counts counts;

#define COUNT_OF(array) ((int64_t)(sizeof(array) / sizeof((array)[0])))

static void report(int ok, const char *name) {
  if (ok) {
    counts.passed++;
  } else {
    counts.failed++;
    printf("FAILED: %s\n", name);
  }
}

static int close_enough(float got, float want, float tolerance) {
  if (isnan(want)) return isnan(got);
  return fabsf(got - want) <= tolerance * (1.0f + fabsf(want));
}

/* Compares element by element, printing the first few mismatches. */
static void check_close(const char *name, const float *got, const float *want,
                        int64_t count, float tolerance) {
  int mismatches = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (!close_enough(got[i], want[i], tolerance)) {
      if (mismatches < 5) {
        printf("  %s[%lld]: got %.9g, want %.9g\n", name, (long long)i,
               (double)got[i], (double)want[i]);
      }
      mismatches++;
    }
  }
  report(mismatches == 0, name);
}

static void check_identical(const char *name, const float *a, const float *b,
                            int64_t count) {
  report(memcmp(a, b, (size_t)count * sizeof *a) == 0, name);
}

static const float kTolerance = 1e-6f;

/* ------------------------------------------------------------------------ */
/* Random data (a fixed LCG, so failures reproduce)                          */
/* ------------------------------------------------------------------------ */

typedef struct rng {
  uint64_t state;
} rng;

static float rng_uniform(rng *r) { /* in [-1, 1) */
  r->state = r->state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(r->state >> 40) / (double)(1 << 23)) - 1.0f;
}

static float *random_array(rng *r, int64_t count) {
  float *a = malloc((size_t)count * sizeof *a);
  if (a == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  for (int64_t i = 0; i < count; ++i) a[i] = rng_uniform(r);
  return a;
}

static float *zero_array(int64_t count) {
  float *a = calloc((size_t)count, sizeof *a);
  if (a == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return a;
}

static int64_t product5(const int64_t shape[5]) {
  return shape[0] * shape[1] * shape[2] * shape[3] * shape[4];
}

/* ------------------------------------------------------------------------ */
/* cr_parallel_for                                                           */
/* ------------------------------------------------------------------------ */

static void mark_visits(void *context, int64_t begin, int64_t end) {
  int *visits = context;
  for (int64_t i = begin; i < end; ++i) visits[i]++;
}

static void test_parallel_for_covers_each_index_once(void) {
  const int thread_counts[] = {0, 1, 2, 3, 8, 64};
  const int64_t sizes[] = {0, 1, 2, 5, 7, 100};
  int visits[100];
  int ok = 1;
  for (int t = 0; t < 6; ++t) {
    for (int s = 0; s < 6; ++s) {
      memset(visits, 0, sizeof visits);
      cr_parallel_for(thread_counts[t], sizes[s], mark_visits, visits);
      for (int64_t i = 0; i < COUNT_OF(visits); ++i) {
        if (visits[i] != (i < sizes[s] ? 1 : 0)) ok = 0;
      }
    }
  }
  report(ok, "parallel_for covers each index exactly once");
}

#if defined(__linux__)
/* Two chunks: the caller's (0) waits up to 200 ms for the other to start,
 * so that a worker runs it; each records the CPU and thread it ran on. */
typedef struct wake_task {
  pthread_t caller;
  atomic_int second_started;
  int cpu[2];
  int by_worker[2];
} wake_task;

static void record_wake_chunk(void *context, int64_t begin, int64_t end) {
  wake_task *t = context;
  for (int64_t i = begin; i < end; ++i) {
    t->cpu[i] = sched_getcpu();
    t->by_worker[i] = !pthread_equal(pthread_self(), t->caller);
    if (i == 1) atomic_store(&t->second_started, 1);
    const struct timespec tick = {0, 100000};
    for (int wait = 0; i == 0 && wait < 2000 && !atomic_load(&t->second_started); ++wait) {
      nanosleep(&tick, NULL);
    }
  }
}

static void test_parallel_worker_leaves_caller_cpu(void) {
  /* The caller pinned to one CPU, 20 rounds of: idle 2 ms (past the
   * workers' 300 us of polling, so that they sleep), then a job that wakes
   * one. A worker runs its chunks off the caller's CPU: one that the wake
   * put there (or that polled there) moves off it. The scheduler may still
   * put it back now and then (one round in some runs of the suite), so one
   * round is forgiven; without the move, 5 to 8 rounds of 20 fail. */
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) {
    printf("note: fewer than 2 CPUs allowed; the pool's wake test did not run\n");
    return;
  }
  int caller_cpu = 0;
  while (!CPU_ISSET(caller_cpu, &allowed)) ++caller_cpu;
  CPU_ZERO(&one);
  CPU_SET(caller_cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) {
    report(0, "parallel_for: pin the caller for the wake test");
    return;
  }
  int bad_rounds = 0, worker_rounds = 0;
  for (int round = 0; round < 20; ++round) {
    const struct timespec idle = {0, 2000000};
    nanosleep(&idle, NULL);
    wake_task task = {.caller = pthread_self()};
    atomic_init(&task.second_started, 0);
    cr_parallel_for(2, 2, record_wake_chunk, &task);
    int bad = 0;
    for (int i = 0; i < 2; ++i) {
      if (!task.by_worker[i]) continue;
      worker_rounds += 1;
      if (task.cpu[i] == caller_cpu) {
        bad = 1;
        printf("round %d: a worker ran chunk %d on the caller's CPU %d\n", round, i, caller_cpu);
      }
    }
    bad_rounds += bad;
  }
  sched_setaffinity(0, sizeof allowed, &allowed);
  report(bad_rounds <= 1 && worker_rounds > 0,
         "parallel_for: a worker runs off the CPU of the caller that posted the job");
}
#endif

/* ------------------------------------------------------------------------ */
/* Convolution                                                               */
/* ------------------------------------------------------------------------ */

static cr_conv_params conv_params_2d(int64_t k, int64_t stride,
                                     int64_t dilate, int64_t pad,
                                     int64_t groups) {
  cr_conv_params p = {{1, k, k}, {1, stride, stride}, {1, dilate, dilate},
                      {0, pad, pad}, groups};
  return p;
}

static void test_conv_valid_stride1(void) {
  /* x = 1..9 as 3x3, w = [[1,2],[3,4]], no padding: a 2x2 output.
   * y[0][0] = 1*1 + 2*2 + 3*4 + 4*5 = 37, y[0][1] = 2 + 6 + 15 + 24 = 47,
   * y[1][0] = 4 + 10 + 21 + 32 = 67,      y[1][1] = 5 + 12 + 24 + 36 = 77. */
  const cr_conv_params p = conv_params_2d(2, 1, 1, 0, 1);
  const int64_t x_shape[5] = {1, 1, 1, 3, 3};
  const int64_t y_shape[5] = {1, 1, 1, 2, 2};
  const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const float w[4] = {1, 2, 3, 4};
  const float want[4] = {37, 47, 67, 77};
  float y[4];
  cr_convolution(&p, x_shape, x, w, NULL, y_shape, y, 1);
  check_close("conv 3x3 by 2x2, no padding", y, want, 4, kTolerance);
}

static void test_conv_pad_stride(void) {
  /* Same x and w, pad 1, stride 2: padded size 5, output (5 - 2) / 2 + 1 = 2.
   * Output row 0 reads input rows {-1, 0}, row 1 reads {1, 2}; same for
   * columns. With bias 0.5:
   * y[0][0] = 4*x[0][0] = 4;              y[0][1] = 3*2 + 4*3 = 18;
   * y[1][0] = 2*4 + 4*7 = 36;             y[1][1] = 1*5 + 2*6 + 3*8 + 4*9 = 77.
   */
  const cr_conv_params p = conv_params_2d(2, 2, 1, 1, 1);
  const int64_t x_shape[5] = {1, 1, 1, 3, 3};
  const int64_t y_shape[5] = {1, 1, 1, 2, 2};
  const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const float w[4] = {1, 2, 3, 4};
  const float bias[1] = {0.5f};
  const float want[4] = {4.5f, 18.5f, 36.5f, 77.5f};
  float y[4];
  cr_convolution(&p, x_shape, x, w, bias, y_shape, y, 1);
  check_close("conv pad 1 stride 2 with bias", y, want, 4, kTolerance);
}

static void test_conv_groups_dilation(void) {
  /* C = 2 inputs (3x3), O = 4 outputs, 2 groups: outputs 0-1 see channel 0,
   * outputs 2-3 see channel 1. Kernel 2x2, dilation 2 (span 3), pad 1,
   * stride 2: output (5 - 3) / 2 + 1 = 2 per axis. Output row 0 reads input
   * rows {-1, 1}, row 1 reads {1, 3}: only input row 1 is ever inside, via
   * tap 1 for output 0 and tap 0 for output 1 (columns alike). So
   * y[o][i][j] = bias[o] + w[o][1 - i][1 - j] * (centre of o's channel). */
  const cr_conv_params p = conv_params_2d(2, 2, 2, 1, 2);
  const int64_t x_shape[5] = {1, 2, 1, 3, 3};
  const int64_t y_shape[5] = {1, 4, 1, 2, 2};
  const float x[18] = {1,  2,  3,  4,  5,  6,  7,  8,  9, /* centre 5 */
                       10, 20, 30, 40, 50, 60, 70, 80, 90}; /* centre 50 */
  const float w[16] = {1,  2,  3,  4,  5,  6,  7,  8,
                       -1, -2, -3, -4, 0.5f, 0.25f, 2, 3};
  const float bias[4] = {100, 200, 300, 400};
  const float want[16] = {
      100 + 4 * 5,   100 + 3 * 5,     100 + 2 * 5,    100 + 1 * 5,
      200 + 8 * 5,   200 + 7 * 5,     200 + 6 * 5,    200 + 5 * 5,
      300 - 4 * 50,  300 - 3 * 50,    300 - 2 * 50,   300 - 1 * 50,
      400 + 3 * 50,  400 + 2 * 50,    400 + 0.25f * 50, 400 + 0.5f * 50,
  };
  float y[16];
  cr_convolution(&p, x_shape, x, w, bias, y_shape, y, 1);
  check_close("conv groups 2, dilation 2, pad 1, stride 2", y, want, 16,
              kTolerance);
}

static void test_conv_1d(void) {
  /* 1-D view: x = [1, 2, 3, 4, 5], w = [1, 10, 100], pad 1, stride 2:
   * output (7 - 3) / 2 + 1 = 3 windows starting at -1, 1, 3:
   * 0 + 10*1 + 100*2 = 210; 2 + 30 + 400 = 432; 4 + 50 + 0 = 54. */
  const cr_conv_params p = {{1, 1, 3}, {1, 1, 2}, {1, 1, 1}, {0, 0, 1}, 1};
  const int64_t x_shape[5] = {1, 1, 1, 1, 5};
  const int64_t y_shape[5] = {1, 1, 1, 1, 3};
  const float x[5] = {1, 2, 3, 4, 5};
  const float w[3] = {1, 10, 100};
  const float want[3] = {210, 432, 54};
  float y[3];
  cr_convolution(&p, x_shape, x, w, NULL, y_shape, y, 1);
  check_close("conv 1-D pad 1 stride 2", y, want, 3, kTolerance);
}

static int64_t conv_out_size(int64_t in, int64_t k, int64_t stride,
                             int64_t dilate, int64_t pad) {
  return (in + 2 * pad - dilate * (k - 1) - 1) / stride + 1;
}

/* The convolution formula written out directly, one output at a time. */
static void reference_convolution(const cr_conv_params *p,
                                  const int64_t xs[5], const float *x,
                                  const float *w, const float *bias,
                                  const int64_t ys[5], float *y) {
  const int64_t cg = xs[1] / p->num_group;
  const int64_t og = ys[1] / p->num_group;
  for (int64_t n = 0; n < ys[0]; ++n)
  for (int64_t o = 0; o < ys[1]; ++o)
  for (int64_t od = 0; od < ys[2]; ++od)
  for (int64_t oh = 0; oh < ys[3]; ++oh)
  for (int64_t ow = 0; ow < ys[4]; ++ow) {
    double sum = bias != NULL ? bias[o] : 0.0;
    for (int64_t c = 0; c < cg; ++c)
    for (int64_t kd = 0; kd < p->kernel[0]; ++kd)
    for (int64_t kh = 0; kh < p->kernel[1]; ++kh)
    for (int64_t kw = 0; kw < p->kernel[2]; ++kw) {
      const int64_t id = od * p->stride[0] - p->pad[0] + kd * p->dilate[0];
      const int64_t ih = oh * p->stride[1] - p->pad[1] + kh * p->dilate[1];
      const int64_t iw = ow * p->stride[2] - p->pad[2] + kw * p->dilate[2];
      if (id < 0 || id >= xs[2] || ih < 0 || ih >= xs[3] || iw < 0 ||
          iw >= xs[4]) {
        continue;
      }
      const int64_t ci = o / og * cg + c;
      const float xv = x[(((n * xs[1] + ci) * xs[2] + id) * xs[3] + ih) *
                         xs[4] + iw];
      const float wv = w[(((o * cg + c) * p->kernel[0] + kd) *
                          p->kernel[1] + kh) * p->kernel[2] + kw];
      sum += (double)xv * wv;
    }
    y[(((n * ys[1] + o) * ys[2] + od) * ys[3] + oh) * ys[4] + ow] =
        (float)sum;
  }
}

static void test_conv_3d_random(void) {
  /* Every feature at once, with different settings per axis, against the
   * direct formula; then the same with 3 threads must match bit for bit. */
  const cr_conv_params p = {{3, 2, 3}, {1, 2, 1}, {2, 1, 1}, {1, 1, 2}, 3};
  const int64_t x_shape[5] = {2, 12, 5, 10, 11};
  int64_t y_shape[5] = {2, 9, 0, 0, 0};
  for (int axis = 0; axis < 3; ++axis) {
    y_shape[2 + axis] = conv_out_size(x_shape[2 + axis], p.kernel[axis],
                                      p.stride[axis], p.dilate[axis],
                                      p.pad[axis]);
  }
  const int64_t w_count = y_shape[1] * (x_shape[1] / p.num_group) *
                          p.kernel[0] * p.kernel[1] * p.kernel[2];
  const int64_t y_count = product5(y_shape);
  rng r = {42};
  float *x = random_array(&r, product5(x_shape));
  float *w = random_array(&r, w_count);
  float *bias = random_array(&r, 9);
  float *want = zero_array(y_count);
  float *y1 = zero_array(y_count);
  float *y3 = zero_array(y_count);

  reference_convolution(&p, x_shape, x, w, bias, y_shape, want);
  cr_convolution(&p, x_shape, x, w, bias, y_shape, y1, 1);
  cr_convolution(&p, x_shape, x, w, bias, y_shape, y3, 3);
  check_close("conv 3-D random vs direct formula", y1, want, y_count, 1e-5f);
  check_identical("conv 3-D random: 1 and 3 threads identical", y1, y3,
                  y_count);

  free(x);
  free(w);
  free(bias);
  free(want);
  free(y1);
  free(y3);
}

/* ------------------------------------------------------------------------ */
/* Pooling                                                                   */
/* ------------------------------------------------------------------------ */

static cr_pool_params pool_params_1d(int64_t k, int64_t stride, int64_t pad,
                                     cr_pool_type type, int include_pad) {
  cr_pool_params p = {{1, 1, k}, {1, 1, stride}, {0, 0, pad}, type,
                      include_pad, 0};
  return p;
}

static void run_pool_1d(const char *name, cr_pool_params p, const float *x,
                        int64_t in, const float *want, int64_t out) {
  const int64_t x_shape[5] = {1, 1, 1, 1, in};
  const int64_t y_shape[5] = {1, 1, 1, 1, out};
  float y[8];
  cr_pooling(&p, x_shape, x, y_shape, y, 1);
  check_close(name, y, want, out, kTolerance);
}

static void test_pool_full_convention_1d(void) {
  /* x = [1, 2, 3, 4], kernel 3, stride 2, pad 1. "full" gives
   * 1 + ceil((4 + 2 - 3) / 2) = 3 outputs. Windows start at -1, 1, 3 and end
   * at min(start + 3, 4 + 1) = 2, 4, 5, so the last is cut at the padded
   * edge. Clipped to the input they are [0,2) = {1,2}, [1,4) = {2,3,4},
   * [3,4) = {4}; unclipped extents 3, 3, 2, clipped extents 2, 3, 1. */
  const float x[4] = {1, 2, 3, 4};
  const float want_max[3] = {2, 4, 4};
  const float want_sum[3] = {3, 9, 4};
  const float want_avg_pad[3] = {3.0f / 3, 9.0f / 3, 4.0f / 2};
  const float want_avg_nopad[3] = {3.0f / 2, 9.0f / 3, 4.0f / 1};
  run_pool_1d("pool 1-D max", pool_params_1d(3, 2, 1, CR_POOL_MAX, 1), x, 4,
              want_max, 3);
  run_pool_1d("pool 1-D sum", pool_params_1d(3, 2, 1, CR_POOL_SUM, 1), x, 4,
              want_sum, 3);
  run_pool_1d("pool 1-D sum ignores count_include_pad",
              pool_params_1d(3, 2, 1, CR_POOL_SUM, 0), x, 4, want_sum, 3);
  run_pool_1d("pool 1-D avg count_include_pad=1",
              pool_params_1d(3, 2, 1, CR_POOL_AVG, 1), x, 4, want_avg_pad, 3);
  run_pool_1d("pool 1-D avg count_include_pad=0",
              pool_params_1d(3, 2, 1, CR_POOL_AVG, 0), x, 4, want_avg_nopad,
              3);
}

static void test_pool_empty_windows(void) {
  /* x = [7, 8], kernel 1, stride 3, no pad: "full" gives
   * 1 + ceil((2 - 1) / 3) = 2 outputs; the second window starts at 3, past
   * the input, and reads nothing. */
  const float x[2] = {7, 8};
  const float want_max[2] = {7, -FLT_MAX};
  const float want_zero[2] = {7, 0};
  run_pool_1d("pool empty window max is -FLT_MAX",
              pool_params_1d(1, 3, 0, CR_POOL_MAX, 1), x, 2, want_max, 2);
  run_pool_1d("pool empty window sum is 0",
              pool_params_1d(1, 3, 0, CR_POOL_SUM, 1), x, 2, want_zero, 2);
  run_pool_1d("pool empty window avg is 0 (count_include_pad=0)",
              pool_params_1d(1, 3, 0, CR_POOL_AVG, 0), x, 2, want_zero, 2);

  /* x = [5], kernel 1, stride 2, pad 1: 1 + ceil((3 - 1) / 2) = 2 outputs,
   * windows [-1, 0) and [1, 2): both lie wholly in the padding. */
  const float one[1] = {5};
  const float zeros[2] = {0, 0};
  run_pool_1d("pool all-padding window avg is 0 (count_include_pad=1)",
              pool_params_1d(1, 2, 1, CR_POOL_AVG, 1), one, 1, zeros, 2);
}

static void test_pool_2d(void) {
  /* x = [[1, 2], [3, 4]], kernel 2, stride 1, pad 1: 3x3 output. Along each
   * axis the windows are [-1,1) -> {0}, [0,2) -> {0,1}, [1,3) -> {1}, all
   * with unclipped extent 2, so count_include_pad divides by 4 everywhere. */
  const cr_pool_params avg_pad = {{1, 2, 2}, {1, 1, 1}, {0, 1, 1},
                                  CR_POOL_AVG, 1, 0};
  const cr_pool_params avg_nopad = {{1, 2, 2}, {1, 1, 1}, {0, 1, 1},
                                    CR_POOL_AVG, 0, 0};
  const cr_pool_params max = {{1, 2, 2}, {1, 1, 1}, {0, 1, 1}, CR_POOL_MAX,
                              0, 0};
  const int64_t x_shape[5] = {1, 1, 1, 2, 2};
  const int64_t y_shape[5] = {1, 1, 1, 3, 3};
  const float x[4] = {1, 2, 3, 4};
  const float want_avg_pad[9] = {0.25f, 0.75f, 0.5f, 1.0f, 2.5f,
                                 1.5f,  0.75f, 1.75f, 1.0f};
  const float want_avg_nopad[9] = {1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4};
  const float want_max[9] = {1, 2, 2, 3, 4, 4, 3, 4, 4};
  float y[9];
  cr_pooling(&avg_pad, x_shape, x, y_shape, y, 1);
  check_close("pool 2-D avg pad count_include_pad=1", y, want_avg_pad, 9,
              kTolerance);
  cr_pooling(&avg_nopad, x_shape, x, y_shape, y, 1);
  check_close("pool 2-D avg pad count_include_pad=0", y, want_avg_nopad, 9,
              kTolerance);
  cr_pooling(&max, x_shape, x, y_shape, y, 1);
  check_close("pool 2-D max pad", y, want_max, 9, kTolerance);
}

static void test_pool_2d_max_unpadded(void) {
  /* No padding and every window inside the plane: the passes read the
   * input in place. Planes of 7 x 9 and 7 x 10 (the last column unread),
   * kernel 3, stride 2, two planes, against the window maxima by hand. */
  const cr_pool_params max = {{1, 3, 3}, {1, 2, 2}, {0, 0, 0}, CR_POOL_MAX, 1, 0};
  for (int64_t width = 9; width <= 10; ++width) {
    const int64_t x_shape[5] = {1, 2, 1, 7, width};
    const int64_t y_shape[5] = {1, 2, 1, 3, 4};
    float x[2 * 7 * 10], y[2 * 3 * 4], want[2 * 3 * 4];
    for (int64_t i = 0; i < 2 * 7 * width; ++i) x[i] = (float)((i * 37) % 23) - 11.0f;
    for (int64_t c = 0; c < 2; ++c) {
      for (int64_t oh = 0; oh < 3; ++oh) {
        for (int64_t ow = 0; ow < 4; ++ow) {
          float m = -FLT_MAX;
          for (int64_t i = 0; i < 3; ++i) {
            for (int64_t j = 0; j < 3; ++j) {
              const float v = x[(c * 7 + 2 * oh + i) * width + 2 * ow + j];
              m = v > m ? v : m;
            }
          }
          want[(c * 3 + oh) * 4 + ow] = m;
        }
      }
    }
    cr_pooling(&max, x_shape, x, y_shape, y, 2);
    check_close("pool 2-D max without padding, read in place", y, want, 24, 0.0f);
  }
}

static void test_pool_2d_max_wide_rows_nan(void) {
  /* Rows of 40 outputs (two whole vectors at a time, then a tail), stride
   * 2, with NaNs (which never win) and repeated values: against the window
   * maxima taken in row-major order by hand, bit for bit. */
  enum { kH = 5, kW = 81, kOH = 2, kOW = 40 };
  const cr_pool_params max = {{1, 3, 3}, {1, 2, 2}, {0, 0, 0}, CR_POOL_MAX, 1, 0};
  const int64_t x_shape[5] = {1, 1, 1, kH, kW}, y_shape[5] = {1, 1, 1, kOH, kOW};
  static float x[kH * kW], y[kOH * kOW], want[kOH * kOW];
  for (int64_t i = 0; i < kH * kW; ++i) {
    x[i] = i % 7 == 3 ? NAN : (float)((i * 29) % 17) - 8.0f;
  }
  for (int64_t oh = 0; oh < kOH; ++oh) {
    for (int64_t ow = 0; ow < kOW; ++ow) {
      float m = -FLT_MAX;
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t j = 0; j < 3; ++j) {
          const float v = x[(2 * oh + i) * kW + 2 * ow + j];
          m = v > m ? v : m;
        }
      }
      want[oh * kOW + ow] = m;
    }
  }
  cr_pooling(&max, x_shape, x, y_shape, y, 1);
  check_identical("pool 2-D max, wide rows with NaNs", y, want, kOH * kOW);
}

/* The window maxima of planes x (planes x in_h x in_w) in row-major order
 * from -FLT_MAX, as MXNet takes them: the reference of the max pooling
 * tests. */
static void max_pool_reference(const float *x, int64_t planes, int64_t in_h, int64_t in_w,
                               int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pad,
                               int64_t out_h, int64_t out_w, float *want) {
  for (int64_t c = 0; c < planes; ++c) {
    for (int64_t oh = 0; oh < out_h; ++oh) {
      for (int64_t ow = 0; ow < out_w; ++ow) {
        float m = -FLT_MAX;
        for (int64_t i = 0; i < kh; ++i) {
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t h = oh * sh + i - pad, w = ow * sw + j - pad;
            if (h < 0 || h >= in_h || w < 0 || w >= in_w) continue;
            const float v = x[(c * in_h + h) * in_w + w];
            m = v > m ? v : m;
          }
        }
        want[(c * out_h + oh) * out_w + ow] = m;
      }
    }
  }
}

static void test_pool_2d_max_shapes(void) {
  /* Windows 2, 3 and 5 wide, strides 1 to 3, outputs 1 to 19 wide (whole
   * vectors and every tail), some planes padded: the vector passes read
   * whole vectors past a row's windows, and the plane's last row reads a
   * copy instead; the input is allocated to its exact size so that a read
   * past the last plane is caught under AddressSanitizer. NaNs never win.
   * Against the window maxima in row-major order, bit for bit. */
  const int64_t widths[] = {2, 3, 5};
  int ok = 1;
  for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; ++wi) {
    for (int64_t stride = 1; stride <= 3; ++stride) {
      for (int64_t out_w = 1; out_w <= 19; ++out_w) {
        const int64_t k = widths[wi], pad = out_w % 3 == 0 ? 1 : 0, out_h = 3, planes = 2;
        const int64_t in_w = (out_w - 1) * stride + k - 2 * pad;
        const int64_t in_h = (out_h - 1) * stride + k - 2 * pad;
        if (in_w < 1 || in_h < 1) continue;
        const cr_pool_params max = {
            {1, k, k}, {1, stride, stride}, {0, pad, pad}, CR_POOL_MAX, 1, 0};
        const int64_t x_shape[5] = {1, planes, 1, in_h, in_w};
        const int64_t y_shape[5] = {1, planes, 1, out_h, out_w};
        float *x = malloc((size_t)(planes * in_h * in_w) * sizeof *x);
        float *y = malloc((size_t)(planes * out_h * out_w) * sizeof *y);
        float *want = malloc((size_t)(planes * out_h * out_w) * sizeof *want);
        if (x == NULL || y == NULL || want == NULL) {
          ok = 0;
        } else {
          for (int64_t i = 0; i < planes * in_h * in_w; ++i) {
            x[i] = i % 11 == 4 ? NAN : (float)((i * 37 + out_w) % 29) - 14.0f;
          }
          max_pool_reference(x, planes, in_h, in_w, k, k, stride, stride, pad, out_h, out_w,
                             want);
          cr_pooling(&max, x_shape, x, y_shape, y, 1);
          ok &= memcmp(y, want, (size_t)(planes * out_h * out_w) * sizeof *y) == 0;
        }
        free(x);
        free(y);
        free(want);
      }
    }
  }
  report(ok, "pool 2-D max: windows 2 to 5, strides 1 to 3, every row tail, bit for bit");
}

static void test_pool_2d_max_3_wide_stride_2(void) {
  /* Windows 3 wide at stride 2 along rows (AVX-512 takes them one strip of
   * 16 outputs at a time, in blocks of rows, keeping a window's last row
   * for the window below when it has 3 rows at stride 2): 2 to 4 rows at
   * strides 1 to 3 down, outputs 1 to 150 wide (up to 10 strips, every
   * tail), 1 to 21 high (several blocks of rows), with and without
   * padding (read in place under AVX-512), some with windows past it. The input holds NaNs, infinities and zeros of both signs, so
   * the order in which equal maxima win shows; it is allocated to its
   * exact size, so that a read past the plane is caught under
   * AddressSanitizer. Bit for bit against the row-major maxima. */
  const int64_t widths[] = {1, 7, 13, 16, 17, 27, 31, 33, 55, 64, 70, 150};
  const int64_t heights[] = {1, 2, 5, 21};
  int ok = 1;
  for (int64_t kh = 2; kh <= 4; ++kh) {
    for (int64_t sh = 1; sh <= 3; ++sh) {
      for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; ++wi) {
        for (size_t hi = 0; hi < sizeof heights / sizeof heights[0]; ++hi) {
          const int64_t out_w = widths[wi], out_h = heights[hi], planes = 2;
          const int64_t pad = (out_w + out_h) % 2 == 0 ? 1 : 0;
          /* some windows past the padding after the plane (ceil mode) */
          const int64_t past = (out_w + 2 * out_h) % 3 == 0 ? 1 : 0;
          const int64_t in_w = (out_w - 1) * 2 + 3 - 2 * pad - past;
          const int64_t in_h = (out_h - 1) * sh + kh - 2 * pad - past;
          if (in_w < 1 || in_h < 1) continue;
          const cr_pool_params max = {{1, kh, 3}, {1, sh, 2}, {0, pad, pad}, CR_POOL_MAX, 1, 0};
          const int64_t x_shape[5] = {1, planes, 1, in_h, in_w};
          const int64_t y_shape[5] = {1, planes, 1, out_h, out_w};
          const int64_t in_size = planes * in_h * in_w, out_size = planes * out_h * out_w;
          float *x = malloc((size_t)in_size * sizeof *x);
          float *y = malloc((size_t)out_size * sizeof *y);
          float *want = malloc((size_t)out_size * sizeof *want);
          if (x == NULL || y == NULL || want == NULL) {
            ok = 0;
          } else {
            for (int64_t i = 0; i < in_size; ++i) {
              const int64_t r = (i * 37 + out_w * 5 + kh) % 31;
              x[i] = r == 0   ? NAN
                     : r == 1 ? -INFINITY
                     : r == 2 ? INFINITY
                     : r < 9  ? (r % 2 == 0 ? 0.0f : -0.0f)
                              : (float)(r % 13) - 9.0f;
            }
            max_pool_reference(x, planes, in_h, in_w, kh, 3, sh, 2, pad, out_h, out_w, want);
            cr_pooling(&max, x_shape, x, y_shape, y, 1);
            ok &= memcmp(y, want, (size_t)out_size * sizeof *y) == 0;
          }
          free(x);
          free(y);
          free(want);
        }
      }
    }
  }
  report(ok, "pool 2-D max: windows 3 wide at stride 2, 2 to 4 rows, strides 1 to 3 down, "
             "bit for bit");
}

static void test_pool_2d_max_rows_shared(void) {
  /* One image of 24 planes of at least 8 KiB, enough work for 2 and 3
   * threads: the threads share every plane's output rows (41 of them:
   * parts of 20 and 21, or 13, 14 and 14), the odd parts taking the planes
   * in reverse. Windows 3 x 3
   * at stride 2 and 2 x 2 at stride 1, read in place, and 3 x 3 at stride
   * 2 with a padding of 1 (ResNet's stem pooling: the padding read in
   * place under AVX-512); NaNs and zeros of both signs. Bit for bit
   * against the row-major maxima. */
  enum { kPlanes = 24, kOH = 41, kOW = 60 };
  int ok = 1;
  for (int64_t config = 0; config < 3; ++config) {
    const int64_t k = config == 0 ? 2 : 3, pad = config == 2 ? 1 : 0;
    const int64_t stride = k == 3 ? 2 : 1;
    const int64_t in_h = (kOH - 1) * stride + k - 2 * pad;
    const int64_t in_w = (kOW - 1) * stride + k - 2 * pad;
    const cr_pool_params max = {
        {1, k, k}, {1, stride, stride}, {0, pad, pad}, CR_POOL_MAX, 1, 0};
    const int64_t x_shape[5] = {1, kPlanes, 1, in_h, in_w};
    const int64_t y_shape[5] = {1, kPlanes, 1, kOH, kOW};
    const int64_t in_size = kPlanes * in_h * in_w, out_size = kPlanes * kOH * kOW;
    float *x = malloc((size_t)in_size * sizeof *x);
    float *y = malloc((size_t)out_size * sizeof *y);
    float *want = malloc((size_t)out_size * sizeof *want);
    if (x == NULL || y == NULL || want == NULL) {
      ok = 0;
    } else {
      for (int64_t i = 0; i < in_size; ++i) {
        const int64_t r = (i * 53 + k) % 29;
        x[i] = r == 0 ? NAN : r < 5 ? (r % 2 == 0 ? 0.0f : -0.0f) : (float)(r % 11) - 6.0f;
      }
      max_pool_reference(x, kPlanes, in_h, in_w, k, k, stride, stride, pad, kOH, kOW, want);
      for (int threads = 2; threads <= 3; ++threads) {
        memset(y, 0, (size_t)out_size * sizeof *y);
        cr_pooling(&max, x_shape, x, y_shape, y, threads);
        ok &= memcmp(y, want, (size_t)out_size * sizeof *y) == 0;
      }
    }
    free(x);
    free(y);
    free(want);
  }
  report(ok, "pool 2-D max: one image's rows shared by 2 and 3 threads, bit for bit");
}

static void test_pool_global_average(void) {
  /* 19 planes of 3 x 5 averaged whole (blocks of planes summed side by
   * side, then the rest one by one): each plane's sum in row-major order
   * in float, as the window loop takes it, so bit for bit. */
  enum { kPlanes = 19, kSize = 15 };
  const cr_pool_params avg = {{1, 3, 5}, {1, 1, 1}, {0, 0, 0}, CR_POOL_AVG, 1, 0};
  const int64_t x_shape[5] = {1, kPlanes, 1, 3, 5}, y_shape[5] = {1, kPlanes, 1, 1, 1};
  float x[kPlanes * kSize], y[kPlanes], want[kPlanes];
  for (int64_t i = 0; i < kPlanes * kSize; ++i) x[i] = (float)((i * 13) % 11) * 0.1f - 0.37f;
  for (int64_t p = 0; p < kPlanes; ++p) {
    float sum = 0.0f;
    for (int64_t i = 0; i < kSize; ++i) sum += x[p * kSize + i];
    want[p] = sum / (float)kSize;
  }
  cr_pooling(&avg, x_shape, x, y_shape, y, 1);
  check_identical("pool global average", y, want, kPlanes);
}

static void test_pool_3d_channels(void) {
  /* Two planes of a 2x2x2 cube (N = 1, C = 2), one 2x2x2 window each. The
   * second plane is negative so max must not be fooled by zero padding. */
  const cr_pool_params max = {{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, CR_POOL_MAX,
                              1, 0};
  const cr_pool_params avg = {{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, CR_POOL_AVG,
                              1, 0};
  const int64_t x_shape[5] = {1, 2, 2, 2, 2};
  const int64_t y_shape[5] = {1, 2, 1, 1, 1};
  const float x[16] = {1,  2,  3,  4,  5,  6,  7,  8,
                       -8, -7, -6, -5, -4, -3, -2, -1};
  const float want_max[2] = {8, -1};
  const float want_avg[2] = {4.5f, -4.5f};
  float y[2];
  cr_pooling(&max, x_shape, x, y_shape, y, 3);
  check_close("pool 3-D max per channel", y, want_max, 2, kTolerance);
  cr_pooling(&avg, x_shape, x, y_shape, y, 3);
  check_close("pool 3-D avg per channel", y, want_avg, 2, kTolerance);
}

/* ------------------------------------------------------------------------ */
/* FullyConnected                                                            */
/* ------------------------------------------------------------------------ */

static void test_fc_small(void) {
  /* x = [[1, 2, 3], [4, 5, 6]], w = [[1, 0, -1], [2, 1, 0.5]]:
   * x . w^T = [[1 - 3, 2 + 2 + 1.5], [4 - 6, 8 + 5 + 3]] = [[-2, 5.5],
   * [-2, 16]]; bias [10, 20] is added per column. */
  const float x[6] = {1, 2, 3, 4, 5, 6};
  const float w[6] = {1, 0, -1, 2, 1, 0.5f};
  const float bias[2] = {10, 20};
  const float want_plain[4] = {-2, 5.5f, -2, 16};
  const float want_bias[4] = {8, 25.5f, 8, 36};
  float y[4];
  cr_fully_connected(2, 3, 2, x, w, NULL, y, 1);
  check_close("fc without bias", y, want_plain, 4, kTolerance);
  cr_fully_connected(2, 3, 2, x, w, bias, y, 1);
  check_close("fc with bias", y, want_bias, 4, kTolerance);
  cr_fully_connected(1, 3, 2, x + 3, w, bias, y, 4);
  check_close("fc batch 1", y, want_bias + 2, 2, kTolerance);
}

static void check_fc_threads(const char *name, int64_t batch, int64_t in_dim,
                             int64_t out_dim) {
  rng r = {(uint64_t)(batch * 1000 + out_dim)};
  float *x = random_array(&r, batch * in_dim);
  float *w = random_array(&r, out_dim * in_dim);
  float *bias = random_array(&r, out_dim);
  float *y1 = zero_array(batch * out_dim);
  float *y3 = zero_array(batch * out_dim);
  cr_fully_connected(batch, in_dim, out_dim, x, w, bias, y1, 1);
  cr_fully_connected(batch, in_dim, out_dim, x, w, bias, y3, 3);
  check_identical(name, y1, y3, batch * out_dim);

  /* And one spot value against a double-precision dot product. */
  double want = bias[out_dim - 1];
  for (int64_t i = 0; i < in_dim; ++i) {
    want += (double)x[(batch - 1) * in_dim + i] * w[(out_dim - 1) * in_dim + i];
  }
  const float got = y3[batch * out_dim - 1];
  report(close_enough(got, (float)want, 1e-4f), "fc random spot value");

  free(x);
  free(w);
  free(bias);
  free(y1);
  free(y3);
}

static void test_fc_threads(void) {
  check_fc_threads("fc rows: 1 and 3 threads identical", 5, 1024, 64);
  check_fc_threads("fc batch 1 columns: 1 and 3 threads identical", 1, 1024,
                   256);
}

/* cr_gemv (FullyConnected of one row, a 1 x 1 convolution of one 1 x 1
 * image) against a double-precision dot product: rows by fours and the
 * rest, k with and without a 16- and an 8-float remainder, no bias, k = 0;
 * 1 and 2 threads identical. */
static void test_gemv(void) {
  const int64_t shapes[][2] = {{1, 1}, {3, 7}, {5, 8}, {4, 16}, {7, 23}, {9, 31},
                               {130, 37}, {1000, 1280}, {2, 0}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
    const int64_t n = shapes[s][0], k = shapes[s][1];
    rng r = {(uint64_t)(n * 131 + k)};
    float *a = random_array(&r, n * k + 1), *x = random_array(&r, k + 1);
    float *bias = random_array(&r, n);
    float *y1 = zero_array(n), *y2 = zero_array(n), *plain = zero_array(n);
    float *want = zero_array(n), *want_plain = zero_array(n);
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) sum += (double)a[i * k + p] * x[p];
      want_plain[i] = (float)sum;
      want[i] = (float)(sum + bias[i]);
    }
    cr_gemv(n, k, a, x, bias, y1, 1);
    cr_gemv(n, k, a, x, bias, y2, 2);
    cr_gemv(n, k, a, x, NULL, plain, 2);
    char name[96];
    snprintf(name, sizeof name, "gemv %lld x %lld vs double dot products", (long long)n,
             (long long)k);
    check_close(name, y1, want, n, 1e-5f);
    snprintf(name, sizeof name, "gemv %lld x %lld without bias", (long long)n, (long long)k);
    check_close(name, plain, want_plain, n, 1e-5f);
    snprintf(name, sizeof name, "gemv %lld x %lld: 1 and 2 threads identical", (long long)n,
             (long long)k);
    check_identical(name, y1, y2, n);
    free(a), free(x), free(bias), free(y1), free(y2), free(plain), free(want), free(want_plain);
  }

  /* Through FullyConnected at batch 1 and a 1 x 1 convolution of a 1 x 1
   * image, fused with a residual and relu6. */
  const int64_t channels = 45, outputs = 19;
  rng r = {77};
  float *x = random_array(&r, channels), *w = random_array(&r, outputs * channels);
  float *bias = random_array(&r, outputs), *residual = random_array(&r, outputs);
  float *want = zero_array(outputs), *fc = zero_array(outputs), *conv = zero_array(outputs);
  for (int64_t o = 0; o < outputs; ++o) {
    double sum = bias[o];
    for (int64_t c = 0; c < channels; ++c) sum += (double)w[o * channels + c] * x[c];
    const float v = (float)sum + residual[o];
    want[o] = v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v;
  }
  const cr_fusion fusion = {residual, CR_EPI_CLIP, 0.0f, 6.0f};
  int status = cr_fully_connected_fused(1, channels, outputs, x, w, NULL, CR_ISA_GENERIC, bias,
                                        &fusion, fc, 2);
  report(status == 0, "fc batch 1 fused with residual and relu6 runs");
  check_close("fc batch 1 fused with residual and relu6", fc, want, outputs, 1e-5f);
  const cr_conv_params p = conv_params_2d(1, 1, 1, 0, 1);
  const int64_t x_shape[5] = {1, channels, 1, 1, 1}, y_shape[5] = {1, outputs, 1, 1, 1};
  status = cr_convolution_fused(&p, x_shape, x, w, NULL, CR_ISA_GENERIC, bias, &fusion, y_shape,
                                conv, 2);
  report(status == 0, "1 x 1 conv of a 1 x 1 image fused runs");
  check_identical("1 x 1 conv of a 1 x 1 image fused, as FullyConnected", conv, fc, outputs);
  free(x), free(w), free(bias), free(residual), free(want), free(fc), free(conv);
}

/* ------------------------------------------------------------------------ */
/* Activation                                                                */
/* ------------------------------------------------------------------------ */

static void run_activation(const char *name, cr_activation_type type,
                           const float *want) {
  const float x[5] = {0.0f, 100.0f, -100.0f, 1000.0f, -1000.0f};
  float y[5];
  cr_activation(type, 5, x, y);
  check_close(name, y, want, 5, kTolerance);
}

static void test_activation(void) {
  /* At 0, +-100 and +-1000 (where a naive exp overflows). */
  const float relu[5] = {0, 100, 0, 1000, 0};
  const float sigmoid[5] = {0.5f, 1, 0, 1, 0};
  const float tanh_[5] = {0, 1, -1, 1, -1};
  const float softrelu[5] = {(float)log(2.0), 100, 0, 1000, 0};
  const float softsign[5] = {0, 100.0f / 101, -100.0f / 101, 1000.0f / 1001,
                             -1000.0f / 1001};
  run_activation("activation relu", CR_ACT_RELU, relu);
  run_activation("activation sigmoid", CR_ACT_SIGMOID, sigmoid);
  run_activation("activation tanh", CR_ACT_TANH, tanh_);
  run_activation("activation softrelu", CR_ACT_SOFTRELU, softrelu);
  run_activation("activation softsign", CR_ACT_SOFTSIGN, softsign);

  /* Moderate values, against the textbook formulas in double. */
  const float x[3] = {-2.0f, 0.5f, 3.0f};
  float want[3];
  float y[3];
  for (int i = 0; i < 3; ++i) want[i] = (float)(1.0 / (1.0 + exp(-x[i])));
  cr_activation(CR_ACT_SIGMOID, 3, x, y);
  check_close("activation sigmoid moderate", y, want, 3, 1e-6f);
  for (int i = 0; i < 3; ++i) want[i] = (float)log(1.0 + exp(x[i]));
  cr_activation(CR_ACT_SOFTRELU, 3, x, y);
  check_close("activation softrelu moderate", y, want, 3, 1e-6f);

  /* Tiny negative sigmoid keeps its precision: sigmoid(-30) = exp(-30) to
   * about 1e-13 relative. */
  const float neg30 = -30.0f;
  float s;
  cr_activation(CR_ACT_SIGMOID, 1, &neg30, &s);
  report(fabs(s / exp(-30.0) - 1.0) < 1e-5, "activation sigmoid(-30) precise");

  /* In place. */
  float inplace[3] = {-1, 0, 2};
  const float want_relu[3] = {0, 0, 2};
  cr_activation(CR_ACT_RELU, 3, inplace, inplace);
  check_close("activation relu in place", inplace, want_relu, 3, kTolerance);
}

/* ------------------------------------------------------------------------ */
/* BatchNorm                                                                 */
/* ------------------------------------------------------------------------ */

static void test_batch_norm(void) {
  /* x viewed as (outer 2, channels 2, inner 2), eps 0.25. Channel 0: mean 1,
   * var 3.75 -> 1 / sqrt(4) = 0.5; channel 1: mean -2, var 0 ->
   * 1 / sqrt(0.25) = 2. gamma = [2, 3], beta = [10, 20]. */
  const double eps = 0.25;
  const float x[8] = {1, 3, 0, -1, 5, -3, -2, 2};
  const float gamma[2] = {2, 3};
  const float beta[2] = {10, 20};
  const float mean[2] = {1, -2};
  const float var[2] = {3.75f, 0};
  /* fix_gamma: channel 0: (x - 1) * 0.5 + 10; channel 1: (x + 2) * 2 + 20. */
  const float want_fixed[8] = {10, 11, 24, 22, 12, 8, 20, 28};
  /* gamma used: channel 0 scale 1, channel 1 scale 6. */
  const float want_gamma[8] = {10, 12, 32, 26, 14, 6, 20, 44};
  float y[8];
  cr_batch_norm(2, 2, 2, x, gamma, beta, mean, var, eps, 1, y);
  check_close("batch norm fix_gamma=1", y, want_fixed, 8, kTolerance);
  cr_batch_norm(2, 2, 2, x, gamma, beta, mean, var, eps, 0, y);
  check_close("batch norm fix_gamma=0", y, want_gamma, 8, kTolerance);

  float inplace[8];
  memcpy(inplace, x, sizeof x);
  cr_batch_norm(2, 2, 2, inplace, gamma, beta, mean, var, eps, 0, inplace);
  check_close("batch norm in place", inplace, want_gamma, 8, kTolerance);
}

/* ------------------------------------------------------------------------ */
/* Softmax                                                                   */
/* ------------------------------------------------------------------------ */

static void test_softmax(void) {
  /* Rows [1, 2, 3] and [0, 0, 0]: e^k / (e + e^2 + e^3) and 1/3 each. */
  const float x[6] = {1, 2, 3, 0, 0, 0};
  const double z = exp(1.0) + exp(2.0) + exp(3.0);
  const float want[6] = {(float)(exp(1.0) / z), (float)(exp(2.0) / z),
                         (float)(exp(3.0) / z), 1.0f / 3, 1.0f / 3,
                         1.0f / 3};
  float y[6];
  cr_softmax(2, 3, 1, 1.0, 0, x, y);
  check_close("softmax rows", y, want, 6, kTolerance);
  report(fabsf(y[0] + y[1] + y[2] - 1.0f) < 1e-6f, "softmax row sums to 1");

  /* Temperature 2 is the softmax of [0.5, 1, 1.5]. */
  const double z2 = exp(0.5) + exp(1.0) + exp(1.5);
  const float want_t[3] = {(float)(exp(0.5) / z2), (float)(exp(1.0) / z2),
                           (float)(exp(1.5) / z2)};
  cr_softmax(1, 3, 1, 2.0, 0, x, y);
  check_close("softmax temperature 2", y, want_t, 3, kTolerance);

  /* Values whose exp overflows float (and double) unless the max is
   * subtracted: [1000, 1001] -> [1 / (1 + e), e / (1 + e)]. */
  const float big[2] = {1000, 1001};
  const float want_big[2] = {(float)(1.0 / (1.0 + exp(1.0))),
                             (float)(exp(1.0) / (1.0 + exp(1.0)))};
  cr_softmax(1, 2, 1, 1.0, 0, big, y);
  check_close("softmax large values", y, want_big, 2, kTolerance);

  /* Along the middle axis of (1, 2, 3): pairs (x[i], x[3 + i]), in place.
   * Each pair [a, b] gives [1 / (1 + e^(b - a)), 1 / (1 + e^(a - b))]. */
  float strided[6] = {0, 1, 2, 0, 3, 2};
  const float want_strided[6] = {0.5f, (float)(1.0 / (1.0 + exp(2.0))), 0.5f,
                                 0.5f, (float)(1.0 / (1.0 + exp(-2.0))),
                                 0.5f};
  cr_softmax(1, 2, 3, 1.0, 0, strided, strided);
  check_close("softmax middle axis in place", strided, want_strided, 6,
              kTolerance);

  /* log_softmax of [1, 2, 3] is x - log(e + e^2 + e^3); of [1000, 1001]
   * it stays finite: [-log(1 + e), 1 - log(1 + e)]. */
  const float want_log[3] = {(float)(1 - log(z)), (float)(2 - log(z)),
                             (float)(3 - log(z))};
  cr_softmax(1, 3, 1, 1.0, 1, x, y);
  check_close("log_softmax row", y, want_log, 3, kTolerance);
  const float want_log_big[2] = {(float)-log(1 + exp(1.0)),
                                 (float)(1 - log(1 + exp(1.0)))};
  cr_softmax(1, 2, 1, 1.0, 1, big, y);
  check_close("log_softmax large values", y, want_log_big, 2, kTolerance);
}

/* ------------------------------------------------------------------------ */
/* Element-wise arithmetic and math                                          */
/* ------------------------------------------------------------------------ */

static void test_binary(void) {
  const float a[4] = {1, 2, 3, NAN};
  const float b[4] = {10, -20, 0.5f, 1};
  float y[4];
  const float want_add[4] = {11, -18, 3.5f, NAN};
  cr_binary(CR_BINARY_ADD, 4, a, b, y);
  check_close("binary add", y, want_add, 4, kTolerance);
  const float want_sub[4] = {-9, 22, 2.5f, NAN};
  cr_binary(CR_BINARY_SUB, 4, a, b, y);
  check_close("binary sub", y, want_sub, 4, kTolerance);
  const float want_mul[4] = {10, -40, 1.5f, NAN};
  cr_binary(CR_BINARY_MUL, 4, a, b, y);
  check_close("binary mul", y, want_mul, 4, kTolerance);
  const float want_div[4] = {0.1f, -0.1f, 6, NAN};
  cr_binary(CR_BINARY_DIV, 4, a, b, y);
  check_close("binary div", y, want_div, 4, kTolerance);
  /* 1^10, 2^-20, 3^0.5 */
  const float want_pow[4] = {1, (float)ldexp(1.0, -20), (float)sqrt(3.0), NAN};
  cr_binary(CR_BINARY_POWER, 4, a, b, y);
  check_close("binary power", y, want_pow, 4, kTolerance);
  /* MXNet's a > b ? a : b: a NaN on the left yields the right operand. */
  const float want_max[4] = {10, 2, 3, 1};
  cr_binary(CR_BINARY_MAXIMUM, 4, a, b, y);
  check_close("binary maximum", y, want_max, 4, kTolerance);
  const float want_min[4] = {1, -20, 0.5f, 1};
  cr_binary(CR_BINARY_MINIMUM, 4, a, b, y);
  check_close("binary minimum", y, want_min, 4, kTolerance);

  float inplace[3] = {1, 2, 3};
  const float want_inplace[3] = {11, -18, 3.5f};
  cr_binary(CR_BINARY_ADD, 3, inplace, b, inplace);
  check_close("binary add in place", inplace, want_inplace, 3, kTolerance);
}

static void test_broadcast_binary(void) {
  /* a (2, 1, 3) = 0..5 plus b (1, 2, 1) = [10, 20] gives (2, 2, 3):
   * y[i, j, k] = a[i, 0, k] + b[0, j, 0]. */
  const float a[6] = {0, 1, 2, 3, 4, 5};
  const float b[2] = {10, 20};
  const int64_t dims[3] = {2, 2, 3};
  const int64_t a_strides[3] = {3, 0, 1}, b_strides[3] = {0, 1, 0};
  const float want[12] = {10, 11, 12, 20, 21, 22, 13, 14, 15, 23, 24, 25};
  float y[12];
  cr_broadcast_binary(CR_BINARY_ADD, 3, dims, a_strides, b_strides, a, b, y);
  check_close("broadcast add (2,1,3) + (1,2,1)", y, want, 12, kTolerance);

  /* b - a along the last axis only: (2,) minus (3, 2) rows. */
  const int64_t dims2[2] = {3, 2};
  const int64_t row_strides[2] = {2, 1}, vector_strides[2] = {0, 1};
  const float want_sub[6] = {10, 19, 8, 17, 6, 15};
  cr_broadcast_binary(CR_BINARY_SUB, 2, dims2, vector_strides, row_strides, b, a, y);
  check_close("broadcast sub (2,) - (3, 2)", y, want_sub, 6, kTolerance);
}

static void test_scalar_binary(void) {
  const float x[3] = {1, -2, 4};
  float y[3];
  const float want_rsub[3] = {2, 5, -1};
  cr_scalar_binary(CR_BINARY_SUB, 1, 3, x, 3, y);
  check_close("scalar 3 - x", y, want_rsub, 3, kTolerance);
  const float want_sub[3] = {-2, -5, 1};
  cr_scalar_binary(CR_BINARY_SUB, 0, 3, x, 3, y);
  check_close("scalar x - 3", y, want_sub, 3, kTolerance);
  const float want_rdiv[3] = {2, -1, 0.5f};
  cr_scalar_binary(CR_BINARY_DIV, 1, 3, x, 2, y);
  check_close("scalar 2 / x", y, want_rdiv, 3, kTolerance);
  const float want_square[3] = {1, 4, 16};
  cr_scalar_binary(CR_BINARY_POWER, 0, 3, x, 2, y);
  check_close("scalar x ^ 2", y, want_square, 3, kTolerance);
}

static void test_add_n(void) {
  float a[2] = {1, 2};
  const float b[2] = {10, 20}, c[2] = {100, 200};
  const float *three[3] = {a, b, c}, *one[1] = {b};
  const float want[2] = {111, 222};
  float y[2];
  cr_add_n(3, 2, three, y);
  check_close("add_n of three", y, want, 2, kTolerance);
  cr_add_n(1, 2, one, y);
  check_close("add_n of one", y, b, 2, kTolerance);
  cr_add_n(3, 2, three, a);
  check_close("add_n into its first input", a, want, 2, kTolerance);
}

static void test_unary(void) {
  const float x[6] = {-2.5f, -0.5f, 0, 0.5f, 2.5f, NAN};
  float y[6];
  struct {
    cr_unary_op op;
    const char *name;
    float want[6];
  } cases[] = {
      {CR_UNARY_ABS, "abs", {2.5f, 0.5f, 0, 0.5f, 2.5f, NAN}},
      {CR_UNARY_NEGATIVE, "negative", {2.5f, 0.5f, 0, -0.5f, -2.5f, NAN}},
      {CR_UNARY_SQUARE, "square", {6.25f, 0.25f, 0, 0.25f, 6.25f, NAN}},
      {CR_UNARY_RELU, "relu keeps NaN", {0, 0, 0, 0.5f, 2.5f, NAN}},
      {CR_UNARY_SIGN, "sign", {-1, -1, 0, 1, 1, NAN}},
      {CR_UNARY_FLOOR, "floor", {-3, -1, 0, 0, 2, NAN}},
      {CR_UNARY_CEIL, "ceil", {-2, -0.0f, 0, 1, 3, NAN}},
      {CR_UNARY_TRUNC, "trunc", {-2, -0.0f, 0, 0, 2, NAN}},
      /* Halves: away from zero for round, to even for rint. */
      {CR_UNARY_ROUND, "round", {-3, -1, 0, 1, 3, NAN}},
      {CR_UNARY_RINT, "rint", {-2, -0.0f, 0, 0, 2, NAN}},
      {CR_UNARY_ERF, "erf",
       {(float)erf(-2.5), (float)erf(-0.5), 0, (float)erf(0.5), (float)erf(2.5), NAN}},
      {CR_UNARY_EXP, "exp",
       {(float)exp(-2.5), (float)exp(-0.5), 1, (float)exp(0.5), (float)exp(2.5), NAN}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    cr_unary(cases[c].op, 6, x, y);
    check_close(cases[c].name, y, cases[c].want, 6, kTolerance);
  }
  /* Limits computed in double: no overflow on the way. */
  const float extreme[2] = {-1000, 1000};
  const float want_sigmoid[2] = {0, 1};
  cr_unary(CR_UNARY_SIGMOID, 2, extreme, y);
  check_close("sigmoid limits", y, want_sigmoid, 2, kTolerance);
  const float positive[3] = {0.25f, 4, 1};
  const float want_rsqrt[3] = {2, 0.5f, 1};
  cr_unary(CR_UNARY_RSQRT, 3, positive, y);
  check_close("rsqrt", y, want_rsqrt, 3, kTolerance);
  const float want_log2[3] = {-2, 2, 0};
  cr_unary(CR_UNARY_LOG2, 3, positive, y);
  check_close("log2", y, want_log2, 3, kTolerance);
}

static void test_clip_and_fill(void) {
  const float x[5] = {-3, 0.5f, 9, NAN, 6};
  const float want[5] = {0, 0.5f, 6, NAN, 6};
  float y[5];
  cr_clip(5, 0, 6, x, y);
  check_close("clip to [0, 6], NaN passes", y, want, 5, kTolerance);
  /* low 2 > high 1: x > high is tested first, so values above 1 become 1
   * and the others (below 2) become 2. */
  const float want_crossed[5] = {2, 2, 1, NAN, 1};
  cr_clip(5, 2, 1, x, y);
  check_close("clip with low > high", y, want_crossed, 5, kTolerance);
  const float ones[3] = {1, 1, 1};
  cr_fill(3, 1.0f, y);
  check_close("fill", y, ones, 3, kTolerance);
}

/* ------------------------------------------------------------------------ */
/* Moving data, reductions                                                   */
/* ------------------------------------------------------------------------ */

static void test_copy_rows(void) {
  /* Concatenating (2, 1) and (2, 2) along axis 1 into (2, 3), then slicing
   * columns 1..2 back out. */
  const float left[2] = {1, 4}, right[4] = {2, 3, 5, 6};
  const float want[6] = {1, 2, 3, 4, 5, 6};
  float y[6], back[4];
  cr_copy_rows(2, 1, sizeof(float), left, 1, y, 3);
  cr_copy_rows(2, 2, sizeof(float), right, 2, y + 1, 3);
  check_close("copy rows: concat", y, want, 6, kTolerance);
  cr_copy_rows(2, 2, sizeof(float), y + 1, 3, back, 2);
  check_close("copy rows: slice", back, right, 4, kTolerance);
}

static void test_copy_strided(void) {
  /* Transposing (2, 3) [[0, 1, 2], [3, 4, 5]]: y's axes read x's axes
   * (1, 0), whose strides are (1, 3). */
  const float x[6] = {0, 1, 2, 3, 4, 5};
  const int64_t dims[2] = {3, 2}, strides[2] = {1, 3};
  const float want[6] = {0, 3, 1, 4, 2, 5};
  float y[6];
  cr_copy_strided(2, dims, strides, sizeof(float), x, y);
  check_close("copy strided: transpose", y, want, 6, kTolerance);

  /* (2, 1, 2) to (1, 2, 2) through axes (1, 0, 2). */
  const int64_t dims3[3] = {1, 2, 2}, strides3[3] = {2, 2, 1};
  const float want3[4] = {0, 1, 2, 3};
  cr_copy_strided(3, dims3, strides3, sizeof(float), x, y);
  check_close("copy strided: 3-D", y, want3, 4, kTolerance);
}

static void test_reduce(void) {
  /* x (2, 3, 2) = 0..11; reducing axes 0 and 2 leaves axis 1:
   * sum over (i, k) of x[i, j, k] = (2j) + (2j+1) + (6+2j) + (7+2j). */
  float x[12];
  for (int i = 0; i < 12; ++i) x[i] = (float)i;
  const int64_t dims[3] = {2, 3, 2};
  const unsigned char outer[3] = {1, 0, 1}, middle[3] = {0, 1, 0};
  const unsigned char all[3] = {1, 1, 1};
  float y[6];
  const float want_sum[3] = {14, 22, 30};
  cr_reduce(CR_REDUCE_SUM, 3, dims, outer, x, y);
  check_close("reduce sum over axes 0, 2", y, want_sum, 3, kTolerance);
  const float want_mean[3] = {3.5f, 5.5f, 7.5f};
  cr_reduce(CR_REDUCE_MEAN, 3, dims, outer, x, y);
  check_close("reduce mean over axes 0, 2", y, want_mean, 3, kTolerance);
  /* Over axis 1: max of x[i, :, k] is x[i, 2, k]. */
  const float want_max[4] = {4, 5, 10, 11};
  cr_reduce(CR_REDUCE_MAX, 3, dims, middle, x, y);
  check_close("reduce max over axis 1", y, want_max, 4, kTolerance);
  const float want_min[1] = {0};
  cr_reduce(CR_REDUCE_MIN, 3, dims, all, x, y);
  check_close("reduce min over everything", y, want_min, 1, kTolerance);

  /* A NaN makes its own output NaN and leaves the others alone. */
  x[3] = NAN; /* x[0, 1, 1] */
  const float want_nan[4] = {4, NAN, 10, 11};
  cr_reduce(CR_REDUCE_MAX, 3, dims, middle, x, y);
  check_close("reduce max with a NaN", y, want_nan, 4, kTolerance);
}

/* ------------------------------------------------------------------------ */
/* Matrix products                                                           */
/* ------------------------------------------------------------------------ */

static void test_matmul(void) {
  /* A = [[1, 2, 3], [4, 5, 6]], B = [[1, 0], [0, 1], [1, 1]]:
   * A.B = [[4, 5], [10, 11]]. */
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const float a_t[6] = {1, 4, 2, 5, 3, 6}; /* A stored 3 x 2 */
  const float b[6] = {1, 0, 0, 1, 1, 1};
  const float b_t[6] = {1, 0, 1, 0, 1, 1}; /* B stored 2 x 3 */
  const float want[4] = {4, 5, 10, 11};
  float y[8];
  cr_matmul(1, 2, 2, 3, 0, 0, a, b, y, 1);
  check_close("matmul", y, want, 4, kTolerance);
  cr_matmul(1, 2, 2, 3, 1, 0, a_t, b, y, 1);
  check_close("matmul transpose_a", y, want, 4, kTolerance);
  cr_matmul(1, 2, 2, 3, 0, 1, a, b_t, y, 1);
  check_close("matmul transpose_b", y, want, 4, kTolerance);
  cr_matmul(1, 2, 2, 3, 1, 1, a_t, b_t, y, 1);
  check_close("matmul both transposed", y, want, 4, kTolerance);

  /* A batch of two: the second pair is (2A) . B. */
  float a2[12], b2[12];
  for (int i = 0; i < 6; ++i) {
    a2[i] = a[i];
    a2[6 + i] = 2 * a[i];
    b2[i] = b2[6 + i] = b[i];
  }
  const float want2[8] = {4, 5, 10, 11, 8, 10, 20, 22};
  cr_matmul(2, 2, 2, 3, 0, 0, a2, b2, y, 2);
  check_close("matmul batch of two", y, want2, 8, kTolerance);

  /* Larger random products: thread counts give identical results. */
  rng r = {7};
  const int64_t batch = 3, m = 40, n = 30, k = 600;
  float *x = random_array(&r, batch * m * k);
  float *w = random_array(&r, batch * k * n);
  float *y1 = malloc((size_t)(batch * m * n) * sizeof *y1);
  float *y4 = malloc((size_t)(batch * m * n) * sizeof *y4);
  if (x == NULL || w == NULL || y1 == NULL || y4 == NULL) {
    report(0, "matmul threads: allocation");
  } else {
    cr_matmul(batch, m, n, k, 0, 1, x, w, y1, 1);
    cr_matmul(batch, m, n, k, 0, 1, x, w, y4, 4);
    check_identical("matmul: 1 and 4 threads identical", y1, y4, batch * m * n);
  }
  free(x);
  free(w);
  free(y1);
  free(y4);
}

/* ------------------------------------------------------------------------ */
/* LayerNorm, LeakyReLU, Embedding                                           */
/* ------------------------------------------------------------------------ */

static void test_layer_norm(void) {
  /* Rows [1, 2, 3, 4] and [2, 2, 2, 2] along the last axis, eps 0: mean 2.5,
   * variance 1.25; the constant row has variance 0, so eps = 0.25 is used
   * below to keep it finite. */
  const float x[8] = {1, 2, 3, 4, 2, 2, 2, 2};
  const float gamma[4] = {1, 1, 2, 2}, beta[4] = {0, 0, 0, 10};
  const double eps = 0.25;
  const double s = sqrt(1.25 + eps);
  const float want[8] = {(float)(-1.5 / s), (float)(-0.5 / s), (float)(1.0 / s),
                         (float)(3.0 / s + 10), 0, 0, 0, 10};
  const float want_mean[2] = {2.5f, 2}, want_std[2] = {(float)s, 0.5f};
  float y[8], mean[2], std_[2];
  cr_layer_norm(2, 4, 1, x, gamma, beta, eps, y, mean, std_);
  check_close("layer norm", y, want, 8, kTolerance);
  check_close("layer norm mean", mean, want_mean, 2, kTolerance);
  check_close("layer norm std", std_, want_std, 2, kTolerance);

  /* Along the first axis of (4, 2): the same rows, stored as columns. */
  const float cols[8] = {1, 2, 2, 2, 3, 2, 4, 2};
  const float want_cols[8] = {want[0], 0, want[1], 0, want[2], 0, want[3], 10};
  cr_layer_norm(1, 4, 2, cols, gamma, beta, eps, y, NULL, NULL);
  check_close("layer norm along a middle axis", y, want_cols, 8, kTolerance);
}

static void test_leaky_relu(void) {
  const float x[3] = {-1, 0, 2};
  float y[3];
  const float want_leaky[3] = {-0.25f, 0, 2};
  cr_leaky_relu(CR_LEAKY_LEAKY, 0.25, 3, x, y);
  check_close("leaky relu", y, want_leaky, 3, kTolerance);
  const float want_elu[3] = {(float)(0.5 * expm1(-1.0)), 0, 2};
  cr_leaky_relu(CR_LEAKY_ELU, 0.5, 3, x, y);
  check_close("elu", y, want_elu, 3, kTolerance);
  const double scale = 1.0507009873554805, alpha = 1.6732632423543772;
  const float want_selu[3] = {(float)(scale * alpha * expm1(-1.0)), 0, (float)(scale * 2)};
  cr_leaky_relu(CR_LEAKY_SELU, 0, 3, x, y);
  check_close("selu", y, want_selu, 3, kTolerance);
  /* gelu(x) = x * Phi(x): Phi(-1) = 0.158655..., Phi(2) = 0.977249... */
  const float want_gelu[3] = {-0.15865525f, 0, 2 * 0.97724987f};
  cr_leaky_relu(CR_LEAKY_GELU, 0, 3, x, y);
  check_close("gelu", y, want_gelu, 3, kTolerance);

  /* prelu over (outer 2, channels 2, inner 2) with per-channel slopes
   * [0.5, 0.1] (outer step 0), then per-(outer, channel) slopes. */
  const float px[8] = {-2, 2, -2, 2, -4, 4, -4, 4};
  const float slopes[4] = {0.5f, 0.1f, 1, 0};
  const float want_channel[8] = {-1, 2, -0.2f, 2, -2, 4, -0.4f, 4};
  float py[8];
  cr_prelu(2, 2, 2, px, slopes, 0, 1, py);
  check_close("prelu per channel", py, want_channel, 8, kTolerance);
  const float want_each[8] = {-1, 2, -0.2f, 2, -4, 4, 0, 4};
  cr_prelu(2, 2, 2, px, slopes, 2, 1, py);
  check_close("prelu per sample and channel", py, want_each, 8, kTolerance);
}

static void test_embedding(void) {
  /* Rows of a 3 x 2 table; indices truncate toward zero and clip to
   * [0, 2]; NaN and huge values must not reach an integer conversion. */
  const float weight[6] = {0, 1, 10, 11, 20, 21};
  const float indices[7] = {-1.5f, 0.9f, 1.99f, 2.7f, 1e30f, NAN, -INFINITY};
  const float want[14] = {0, 1, 0, 1, 10, 11, 20, 21, 20, 21, 0, 1, 0, 1};
  float y[14];
  cr_embedding(7, CR_FLOAT32, indices, 3, 2, sizeof(float), weight, y);
  check_close("embedding", y, want, 14, kTolerance);

  /* Integer indices clip too; rows of any element size are copied whole. */
  const int64_t int_indices[3] = {-4, 1, 9};
  const int8_t small[6] = {0, 1, 10, 11, 20, 21};
  const int8_t want_small[6] = {0, 1, 10, 11, 20, 21};
  int8_t got_small[6];
  cr_embedding(3, CR_INT64, int_indices, 3, 2, 1, small, got_small);
  report(memcmp(got_small, want_small, sizeof got_small) == 0, "embedding int8 by int64 ids");
}

/* ------------------------------------------------------------------------ */
/* float16 and dtype conversions                                             */
/* ------------------------------------------------------------------------ */

static void test_half_round_trip(void) {
  /* Every binary16 value converts to float exactly and back to itself; a
   * NaN stays a NaN (the hardware may quiet a signalling one on the way). */
  int mismatches = 0;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t half = (uint16_t)bits, back = cr_half_from_double(cr_half_to_float(half));
    const int is_nan = (half & 0x7c00) == 0x7c00 && (half & 0x03ff) != 0;
    const int back_nan = (back & 0x7c00) == 0x7c00 && (back & 0x03ff) != 0;
    if (is_nan ? !back_nan || (back & 0x8000) != (half & 0x8000) : back != half) ++mismatches;
  }
  report(mismatches == 0, "float16 round trip of all 65536 values");
  report(cr_half_to_float(0x3c00) == 1.0f && cr_half_to_float(0xc000) == -2.0f &&
             cr_half_to_float(0x7bff) == 65504.0f && cr_half_to_float(0x0001) == ldexpf(1, -24) &&
             cr_half_to_float(0x03ff) == ldexpf(1023, -24) && isinf(cr_half_to_float(0xfc00)) &&
             isnan(cr_half_to_float(0x7e00)),
         "float16 to float: normals, subnormals, infinity, NaN");
}

static void test_half_rounding(void) {
  /* (value, expected bits): ties go to the even neighbour, in the normal
   * range (spacing 2^-10 above 1), among subnormals (spacing 2^-24) and at
   * the top, where 65520 is the tie between 65504 and 2^16 (infinity). */
  const struct {
    double value;
    uint16_t bits;
  } cases[] = {
      {1.0, 0x3c00},
      {1.0 + ldexp(1, -11), 0x3c00},                 /* tie, to even 1.0 */
      {1.0 + 3 * ldexp(1, -11), 0x3c02},             /* tie, to even 0x3c02 */
      {1.0 + ldexp(1, -11) + ldexp(1, -40), 0x3c01}, /* just above the tie */
      {-0.0, 0x8000},
      {65504.0, 0x7bff},
      {65519.99, 0x7bff},
      {65520.0, 0x7c00},
      {-1e10, 0xfc00},
      {ldexp(1, -24), 0x0001},
      {ldexp(1, -25), 0x0000},          /* tie, to even 0 */
      {ldexp(1, -25) * 1.0000001, 0x0001},
      {3 * ldexp(1, -25), 0x0002},      /* tie between 1 and 2 (x 2^-24), to 2 */
      {ldexp(1023, -24), 0x03ff},
      {ldexp(1, -14) - ldexp(1, -25), 0x0400}, /* tie, to the smallest normal */
      {1e-30, 0x0000},
      {INFINITY, 0x7c00},
  };
  int mismatches = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const uint16_t got = cr_half_from_double(cases[i].value);
    if (got != cases[i].bits) {
      printf("  half(%.17g) = 0x%04x, want 0x%04x\n", cases[i].value, got, cases[i].bits);
      ++mismatches;
    }
  }
  const uint16_t nan_bits = cr_half_from_double(NAN);
  report(mismatches == 0 && (nan_bits & 0x7c00) == 0x7c00 && (nan_bits & 0x03ff) != 0,
         "float16 rounding: ties to even, subnormals, overflow, NaN");
}

static void test_cast(void) {
  /* numpy's astype on x86-64: truncation toward zero; the 8-bit types go
   * through int32 and keep the low byte; NaN and out-of-range values become
   * the minimum of int32 (int64 for int64). */
  const float x[9] = {-1.5f, 2.7f, 300.7f, -300.2f, 1e10f, NAN, 127.9f, 128.0f, 255.5f};
  const int8_t want_i8[9] = {-1, 2, 44, -44, 0, 0, 127, -128, -1};
  const uint8_t want_u8[9] = {255, 2, 44, 212, 0, 0, 127, 128, 255};
  const int32_t want_i32[9] = {-1, 2, 300, -300, INT32_MIN, INT32_MIN, 127, 128, 255};
  const int64_t want_i64[9] = {-1, 2, 300, -300, 10000000000, INT64_MIN, 127, 128, 255};
  int8_t i8[9];
  uint8_t u8[9];
  int32_t i32[9];
  int64_t i64[9];
  cr_cast(9, CR_FLOAT32, x, CR_INT8, i8);
  cr_cast(9, CR_FLOAT32, x, CR_UINT8, u8);
  cr_cast(9, CR_FLOAT32, x, CR_INT32, i32);
  cr_cast(9, CR_FLOAT32, x, CR_INT64, i64);
  report(memcmp(i8, want_i8, sizeof i8) == 0, "cast float32 to int8");
  report(memcmp(u8, want_u8, sizeof u8) == 0, "cast float32 to uint8");
  report(memcmp(i32, want_i32, sizeof i32) == 0, "cast float32 to int32");
  report(memcmp(i64, want_i64, sizeof i64) == 0, "cast float32 to int64");

  /* Integers wrap to narrower integers and round to floats. */
  const int64_t big[4] = {300, -300, (INT64_C(1) << 40) + 1, -5};
  const int8_t want_big_i8[4] = {44, -44, 1, -5};
  const uint8_t want_big_u8[4] = {44, 212, 1, 251};
  cr_cast(4, CR_INT64, big, CR_INT8, i8);
  cr_cast(4, CR_INT64, big, CR_UINT8, u8);
  report(memcmp(i8, want_big_i8, 4) == 0 && memcmp(u8, want_big_u8, 4) == 0,
         "cast int64 to int8 and uint8 wraps");
  const int32_t near_top[2] = {65519, 65520};
  uint16_t halves[2];
  cr_cast(2, CR_INT32, near_top, CR_FLOAT16, halves);
  report(halves[0] == 0x7bff && halves[1] == 0x7c00, "cast int32 to float16 rounds, overflows");
  const uint16_t h[3] = {0x3e00, 0xc100, 0x7c00}; /* 1.5, -2.5, inf */
  const int32_t want_h[3] = {1, -2, INT32_MIN};
  double d[3];
  cr_cast(3, CR_FLOAT16, h, CR_INT32, i32);
  cr_cast(3, CR_FLOAT16, h, CR_FLOAT64, d);
  report(memcmp(i32, want_h, sizeof want_h) == 0 && d[0] == 1.5 && d[1] == -2.5 && isinf(d[2]),
         "cast float16 to int32 and float64");
}

/* ------------------------------------------------------------------------ */
/* Gathering, take, where                                                    */
/* ------------------------------------------------------------------------ */

static void test_gather_maps(void) {
  /* x = [1, 2, 3] padded by 2 on each side, and tiled and repeated. */
  const float x[3] = {1, 2, 3}, nine = 9;
  const int64_t dims[1] = {7}, stride[1] = {1};
  float y[7];
  const cr_axis_map reflect = {CR_MAP_PAD_REFLECT, 2, 1, 3};
  const float want_reflect[7] = {3, 2, 1, 2, 3, 2, 1};
  cr_gather(1, dims, &reflect, stride, stride, sizeof(float), x, NULL, y);
  check_close("gather pad reflect", y, want_reflect, 7, kTolerance);
  const cr_axis_map edge = {CR_MAP_PAD_EDGE, 2, 1, 3};
  const float want_edge[7] = {1, 1, 1, 2, 3, 3, 3};
  cr_gather(1, dims, &edge, stride, stride, sizeof(float), x, NULL, y);
  check_close("gather pad edge", y, want_edge, 7, kTolerance);
  const cr_axis_map constant = {CR_MAP_PAD_CONSTANT, 2, 1, 3};
  const float want_constant[7] = {9, 9, 1, 2, 3, 9, 9};
  cr_gather(1, dims, &constant, stride, stride, sizeof(float), x, &nine, y);
  check_close("gather pad constant", y, want_constant, 7, kTolerance);
  const cr_axis_map tile = {CR_MAP_TILE, 0, 1, 3};
  const float want_tile[7] = {1, 2, 3, 1, 2, 3, 1};
  cr_gather(1, dims, &tile, stride, stride, sizeof(float), x, NULL, y);
  check_close("gather tile", y, want_tile, 7, kTolerance);
  const cr_axis_map repeat = {CR_MAP_REPEAT, 0, 3, 0};
  const float want_repeat[7] = {1, 1, 1, 2, 2, 2, 3};
  cr_gather(1, dims, &repeat, stride, stride, sizeof(float), x, NULL, y);
  check_close("gather repeat", y, want_repeat, 7, kTolerance);

  /* 2-D, int16-sized elements: rows of (2, 3) sliced backwards with step
   * -2 on axis 1 and broadcast (stride 0) along a new leading axis. */
  const uint16_t m[6] = {10, 11, 12, 20, 21, 22};
  const int64_t dims2[3] = {2, 2, 2}, x_strides[3] = {0, 3, 1}, y_strides[3] = {4, 2, 1};
  const cr_axis_map maps[3] = {{CR_MAP_STEP, 0, 1, 0}, {CR_MAP_STEP, 0, 1, 0},
                               {CR_MAP_STEP, 2, -2, 0}};
  const uint16_t want2[8] = {12, 10, 22, 20, 12, 10, 22, 20};
  uint16_t got2[8];
  cr_gather(3, dims2, maps, x_strides, y_strides, sizeof(uint16_t), m, NULL, got2);
  report(memcmp(got2, want2, sizeof got2) == 0, "gather 3-D with negative step and broadcast");
}

static void test_take_and_where(void) {
  /* x (2, 3) along axis 1 at float indices: clip, wrap, raise. */
  const float x[6] = {0, 1, 2, 10, 11, 12};
  const float indices[4] = {-1.0f, 1.9f, 4.0f, -2.5f};
  float y[8];
  const float want_clip[8] = {0, 1, 2, 0, 10, 11, 12, 10};
  report(cr_take(CR_TAKE_CLIP, 2, 3, 1, sizeof(float), x, 4, CR_FLOAT32, indices, y) == 0,
         "take clip succeeds");
  check_close("take clip", y, want_clip, 8, kTolerance);
  const float want_wrap[8] = {2, 1, 1, 1, 12, 11, 11, 11};
  cr_take(CR_TAKE_WRAP, 2, 3, 1, sizeof(float), x, 4, CR_FLOAT32, indices, y);
  check_close("take wrap", y, want_wrap, 8, kTolerance);
  const int32_t in_range[2] = {-3, 2};
  const float want_raise[4] = {0, 2, 10, 12};
  report(cr_take(CR_TAKE_RAISE, 2, 3, 1, sizeof(float), x, 2, CR_INT32, in_range, y) == 0,
         "take raise accepts [-size, size)");
  check_close("take raise", y, want_raise, 4, kTolerance);
  float untouched[8] = {5, 5, 5, 5, 5, 5, 5, 5};
  report(cr_take(CR_TAKE_RAISE, 2, 3, 1, sizeof(float), x, 4, CR_FLOAT32, indices,
                 untouched) == -1 &&
             untouched[0] == 5,
         "take raise refuses, writing nothing");

  /* where, by element and by rows (a vector condition). */
  const float a[4] = {1, 2, 3, 4}, b[4] = {-1, -2, -3, -4};
  const int8_t cond[4] = {1, 0, 0, -3};
  const float want_elements[4] = {1, -2, -3, 4};
  float out[4];
  cr_where(1, 4, CR_INT8, cond, 0, 1, sizeof(float), a, b, out);
  check_close("where by element", out, want_elements, 4, kTolerance);
  const uint16_t rows[2] = {0x0000, 0x7e00}; /* float16 0 and NaN (true) */
  const float want_rows[4] = {-1, -2, 3, 4};
  cr_where(2, 2, CR_FLOAT16, rows, 1, 0, sizeof(float), a, b, out);
  check_close("where by rows", out, want_rows, 4, kTolerance);
}

/* ------------------------------------------------------------------------ */
/* Layers and searches added with the registry's remaining operators         */
/* ------------------------------------------------------------------------ */

/* The transposed convolution by its definition: every input element
 * scatters x * w onto output position i * stride + k * dilate - pad. */
static void reference_deconvolution(const cr_conv_params *p, const int64_t xs[5], const float *x,
                                    const float *w, const float *bias, const int64_t ys[5],
                                    float *y) {
  const int64_t groups = p->num_group, cg = xs[1] / groups, og = ys[1] / groups;
  const int64_t *k = p->kernel;
  double *acc = calloc((size_t)(ys[0] * ys[1] * ys[2] * ys[3] * ys[4]), sizeof *acc);
  if (acc == NULL) return;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t c = 0; c < xs[1]; ++c)
      for (int64_t id = 0; id < xs[2]; ++id)
        for (int64_t ih = 0; ih < xs[3]; ++ih)
          for (int64_t iw = 0; iw < xs[4]; ++iw)
            for (int64_t f = 0; f < og; ++f)
              for (int64_t kd = 0; kd < k[0]; ++kd)
                for (int64_t kh = 0; kh < k[1]; ++kh)
                  for (int64_t kw = 0; kw < k[2]; ++kw) {
                    const int64_t od = id * p->stride[0] + kd * p->dilate[0] - p->pad[0];
                    const int64_t oh = ih * p->stride[1] + kh * p->dilate[1] - p->pad[1];
                    const int64_t ow = iw * p->stride[2] + kw * p->dilate[2] - p->pad[2];
                    if (od < 0 || oh < 0 || ow < 0 || od >= ys[2] || oh >= ys[3] ||
                        ow >= ys[4]) {
                      continue;
                    }
                    const int64_t o = (c / cg) * og + f;
                    const float xv = x[(((n * xs[1] + c) * xs[2] + id) * xs[3] + ih) * xs[4] + iw];
                    const float wv = w[(((c * og + f) * k[0] + kd) * k[1] + kh) * k[2] + kw];
                    acc[(((n * ys[1] + o) * ys[2] + od) * ys[3] + oh) * ys[4] + ow] +=
                        (double)xv * wv;
                  }
  for (int64_t i = 0; i < ys[0] * ys[1] * ys[2] * ys[3] * ys[4]; ++i) {
    const int64_t o = (i / (ys[2] * ys[3] * ys[4])) % ys[1];
    y[i] = (float)(acc[i] + (bias != NULL ? bias[o] : 0.0f));
  }
  free(acc);
}

static void test_deconvolution(void) {
  /* 2-D, groups 2, stride (2, 3), dilate (1, 2), pad (1, 0), and one extra
   * output column past the transposed convolution (what adj makes). */
  rng r = {11};
  const cr_conv_params p = {{1, 3, 2}, {1, 2, 3}, {1, 1, 2}, {0, 1, 0}, 2};
  const int64_t xs[5] = {2, 4, 1, 3, 4};
  /* full extents: 2 * 2 + 3 = 7 (minus 2 * pad 1 = 5) and 3 * 3 + 3 = 12,
   * plus one. */
  const int64_t ys[5] = {2, 6, 1, 5, 13};
  const int64_t x_count = 2 * 4 * 3 * 4, w_count = 4 * 3 * 3 * 2, y_count = 2 * 6 * 5 * 13;
  float *x = random_array(&r, x_count), *w = random_array(&r, w_count);
  float *bias = random_array(&r, 6);
  float *y = malloc((size_t)y_count * sizeof *y), *want = malloc((size_t)y_count * sizeof *want);
  if (x == NULL || w == NULL || bias == NULL || y == NULL || want == NULL) {
    report(0, "deconvolution: out of memory");
  } else {
    reference_deconvolution(&p, xs, x, w, bias, ys, want);
    cr_deconvolution(&p, xs, x, w, bias, ys, y, 3);
    check_close("deconvolution against its definition", y, want, y_count, 1e-5f);
  }
  free(x);
  free(w);
  free(bias);
  free(y);
  free(want);
}

static void test_instance_norm_and_lp_pooling(void) {
  /* Two (sample, channel) rows of 4: [1, 2, 3, 4] has mean 2.5 and
   * variance 1.25; [2, 2, 2, 2] normalises to 0 and leaves beta. */
  const float x[8] = {1, 2, 3, 4, 2, 2, 2, 2};
  const float gamma[2] = {2, 1}, beta[2] = {0, 5};
  float y[8];
  const double s = sqrt(1.25 + 1e-3);
  const float want[8] = {(float)(-3 / s), (float)(-1 / s), (float)(1 / s), (float)(3 / s),
                         5, 5, 5, 5};
  cr_instance_norm(1, 2, 4, x, gamma, beta, 1e-3, y);
  check_close("instance norm", y, want, 8, 1e-6f);

  /* lp pooling of [3, -4, 1] with kernel 2, stride 1: p = 2 gives 5 and
   * sqrt(17); p = 3 keeps signs: cbrt(27 - 64) and cbrt(-64 + 1); p = 1
   * sums plain values. */
  const float v[3] = {3, -4, 1};
  const int64_t x_shape[5] = {1, 1, 1, 1, 3}, y_shape[5] = {1, 1, 1, 1, 2};
  cr_pool_params p = {{1, 1, 2}, {1, 1, 1}, {0, 0, 0}, CR_POOL_LP, 1, 2};
  float out[2];
  const float want2[2] = {5, (float)sqrt(17.0)};
  cr_pooling(&p, x_shape, v, y_shape, out, 1);
  check_close("lp pooling p=2", out, want2, 2, 1e-6f);
  p.p_value = 3;
  const float want3[2] = {(float)cbrt(-37.0), (float)cbrt(-63.0)};
  cr_pooling(&p, x_shape, v, y_shape, out, 1);
  check_close("lp pooling p=3", out, want3, 2, 1e-6f);
  p.p_value = 1;
  const float want1[2] = {-1, -3};
  cr_pooling(&p, x_shape, v, y_shape, out, 1);
  check_close("lp pooling p=1", out, want1, 2, 1e-6f);
}

static void test_searches(void) {
  /* argmax/argmin along the middle axis of (1, 4, 2): the first extreme
   * wins ties, and the first NaN wins over everything. */
  const float x[8] = {1, 5, 3, NAN, 3, 5, 0, NAN};
  float y[2];
  const float want_max[2] = {1, 1}, want_min[2] = {3, 1};
  cr_arg_search(1, 1, 4, 2, x, y);
  check_close("argmax: ties to the first, NaN wins", y, want_max, 2, 0);
  cr_arg_search(0, 1, 4, 2, x, y);
  check_close("argmin: ties to the first, NaN wins", y, want_min, 2, 0);

  /* topk of [2, NaN, 5, 2, -1]: descending ranks NaN first and keeps the
   * tie 2, 2 in position order; ascending puts NaN last. */
  const float row[5] = {2, NAN, 5, 2, -1};
  float values[5], mask[5];
  int32_t indices[5];
  const int32_t want_desc[4] = {1, 2, 0, 3}, want_asc[5] = {4, 0, 3, 2, 1};
  report(cr_topk(1, 5, 1, 4, 0, row, values, CR_INT32, indices, NULL) == 0 &&
             memcmp(indices, want_desc, sizeof want_desc) == 0 && isnan(values[0]) &&
             values[1] == 5 && values[3] == 2,
         "topk descending: NaN first, ties by position");
  report(cr_topk(1, 5, 1, 5, 1, row, NULL, CR_INT32, indices, NULL) == 0 &&
             memcmp(indices, want_asc, sizeof want_asc) == 0,
         "topk ascending sorts the whole axis, NaN last");
  const float want_mask[5] = {1, 1, 1, 0, 0};
  cr_topk(1, 5, 1, 3, 0, row, NULL, CR_INT32, NULL, mask);
  check_close("topk mask", mask, want_mask, 5, 0);
  /* Strided rows: (2, 3) along axis 0, k = 1, indices as float64. */
  const float cols[6] = {1, 9, 3, 4, 2, 8};
  double best[3];
  cr_topk(1, 2, 3, 1, 0, cols, NULL, CR_FLOAT64, best, NULL);
  report(best[0] == 1 && best[1] == 0 && best[2] == 1, "topk along a strided axis");
}

static void test_new_elementwise(void) {
  /* MXNet's mod takes the divisor's sign and gives 0 for a zero divisor. */
  const float a[4] = {-7, 7, 5, 7.5f}, b[4] = {3, -3, 0, 2};
  const float want_mod[4] = {2, -2, 0, 1.5f};
  float y[4];
  cr_binary(CR_BINARY_MOD, 4, a, b, y);
  check_close("mod", y, want_mod, 4, kTolerance);
  const float want_ge[4] = {0, 1, 1, 1};
  cr_binary(CR_BINARY_GREATER_EQUAL, 4, a, b, y);
  check_close("greater_equal", y, want_ge, 4, 0);
  const float want_xor[4] = {0, 0, 1, 0};
  cr_binary(CR_BINARY_LOGICAL_XOR, 4, a, b, y);
  check_close("logical_xor", y, want_xor, 4, 0);

  /* int64 comparisons are exact beyond 2^53, where doubles merge values. */
  const int64_t big[2] = {(INT64_C(1) << 53) + 1, -3};
  const int64_t other[2] = {INT64_C(1) << 53, -3};
  const int64_t two = 2, unit = 1;
  int64_t flags[2];
  cr_broadcast_predicate_int(CR_BINARY_EQUAL, CR_INT64, 1, &two, &unit, &unit, big, other, flags);
  report(flags[0] == 0 && flags[1] == 1, "int64 equal is exact");
  const uint8_t u[2] = {200, 3}, limit = 100;
  const int64_t none = 0;
  uint8_t gt[2];
  cr_broadcast_predicate_int(CR_BINARY_GREATER, CR_UINT8, 1, &two, &unit, &none, u, &limit, gt);
  report(gt[0] == 1 && gt[1] == 0, "uint8 greater than a broadcast scalar");

  const float z[3] = {0, -0.0f, NAN};
  const float want_not[3] = {1, 1, 0};
  cr_unary(CR_UNARY_LOGICAL_NOT, 3, z, y);
  check_close("logical_not", y, want_not, 3, 0);

  /* prod, nansum and nanprod of [2, NaN, 3] and [NaN, NaN]. */
  const float r[5] = {2, NAN, 3, NAN, NAN};
  const int64_t dims[1] = {3}, dims2[1] = {2};
  const unsigned char all[1] = {1};
  float v;
  cr_reduce(CR_REDUCE_NANSUM, 1, dims, all, r, &v);
  report(v == 5, "nansum skips NaN");
  cr_reduce(CR_REDUCE_NANPROD, 1, dims, all, r, &v);
  report(v == 6, "nanprod skips NaN");
  cr_reduce(CR_REDUCE_NANPROD, 1, dims2, all, r + 3, &v);
  report(v == 1, "nanprod of only NaN is 1");
  cr_reduce(CR_REDUCE_PROD, 1, dims, all, r, &v);
  report(isnan(v), "prod keeps NaN");

  /* Upsampling sum: a 1x1 input scaled by 2 plus a 2x2 one scaled by 1. */
  const float small[1] = {10}, full[4] = {1, 2, 3, 4};
  const float *inputs[2] = {small, full};
  const int64_t factors[2] = {2, 1};
  const float want_up[4] = {11, 12, 13, 14};
  float up[4];
  cr_upsampling_sum(2, inputs, factors, 1, 1, 2, 2, up);
  check_close("upsampling sum", up, want_up, 4, 0);
}


/* ------------------------------------------------------------------------ */
/* GEMM and the convolution paths (run under every ISA, see main)            */
/* ------------------------------------------------------------------------ */

/* act(sum + row_bias[i] + col_bias[j] + residual) in double, as the GEMM's
 * epilogue defines it (clip: [p0, p1]; the hard sigmoids: alpha p0, beta
 * p1). */
static void reference_gemm(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                           const float *row_bias, const float *col_bias,
                           const float *residual, cr_epilogue_act act, float p0, float p1,
                           float *c) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) sum += (double)a[i * k + p] * b[p * n + j];
      if (row_bias != NULL) sum += row_bias[i];
      if (col_bias != NULL) sum += col_bias[j];
      if (residual != NULL) sum += residual[i * n + j];
      if (act == CR_EPI_RELU && sum < 0) sum = 0;
      if (act == CR_EPI_CLIP) sum = sum > p1 ? p1 : sum < p0 ? p0 : sum;
      if (act == CR_EPI_HARD_SIGMOID || act == CR_EPI_HARD_SWISH) {
        const double v = (double)p0 * sum + p1;
        const double gate = v < 0 ? 0 : v > 1 ? 1 : v;
        sum = act == CR_EPI_HARD_SWISH ? sum * gate : gate;
      }
      c[i * n + j] = (float)sum;
    }
  }
}

/* The operands, epilogue inputs, results and packed copies of one random
 * m x n x k product of the GEMM tests (NULL members when an allocation
 * failed: gemm_arrays_ok). */
typedef struct gemm_arrays {
  float *a, *b, *row_bias, *col_bias, *residual, *want, *y1, *y2, *pa, *pb;
} gemm_arrays;

static gemm_arrays gemm_arrays_make(rng *r, int64_t m, int64_t n, int64_t k) {
  gemm_arrays g;
  g.a = random_array(r, m * k), g.b = random_array(r, k * n);
  g.row_bias = random_array(r, m), g.col_bias = random_array(r, n);
  g.residual = random_array(r, m * n);
  g.want = zero_array(m * n), g.y1 = zero_array(m * n), g.y2 = zero_array(m * n);
  g.pa = malloc(cr_gemm_packed_a_floats(m, k) * sizeof(float));
  g.pb = malloc(cr_gemm_packed_b_floats(k, n) * sizeof(float));
  return g;
}

static int gemm_arrays_ok(const gemm_arrays *g) {
  return g->a && g->b && g->row_bias && g->col_bias && g->residual && g->want && g->y1 &&
         g->y2 && g->pa && g->pb;
}

static void gemm_arrays_free(gemm_arrays *g) {
  free(g->a), free(g->b), free(g->row_bias), free(g->col_bias), free(g->residual);
  free(g->want), free(g->y1), free(g->y2), free(g->pa), free(g->pb);
}

static void test_gemm_random(void) {
  /* Shapes with edge tiles (1 to 3 vectors of the AVX-512 edge kernel,
   * also over several k blocks), several k blocks (k > 128), narrow tiles
   * (n <= 4) and a single element. */
  const int64_t shapes[][3] = {{1, 1, 1},     {7, 45, 3},   {33, 97, 300}, {9, 2, 50},
                               {200, 70, 20}, {1, 130, 77}, {16, 49, 129}, {10, 60, 260},
                               {13, 112, 140},
                               /* matrix-vector products: single columns,
                                * k not a multiple of the four partial sums */
                               {21, 1, 131}, {8, 1, 4}, {17, 1, 258},
                               /* tall enough for 3 threads sharing A's row
                                * panels: B is packed once for all */
                               {600, 50, 200}, {300, 70, 300},
                               /* a plain B is read in place, except with
                                * many rows of A and B's rows a multiple
                                * of 128 floats apart: packed */
                               {300, 128, 70}, {40, 256, 30},
                               /* more row panels than column panels but
                                * fewer rows than columns, 17 column
                                * panels: the threads share the columns */
                               {160, 800, 150},
                               /* small products, read in place without
                                * packing (the pre-packed run of each is
                                * the blocked path: identical results) */
                               {17, 17, 16}, {32, 32, 32}, {9, 49, 128}, {5, 100, 7},
                               {8, 48, 16}, {1, 64, 128}, {3, 5, 129},
                               /* a tail of k up to 32 joined to the last
                                * block (k_block): 147 and 160 in one
                                * block, 161 as 128 + 33, 288 as 128 +
                                * 160, 289 as 128 + 128 + 33 */
                               {64, 150, 147}, {20, 60, 160}, {20, 60, 161},
                               {24, 100, 288}, {9, 50, 289},
                               /* deep and small (split_k_point): cut in
                                * two sums at k = 256, the second one
                                * block (384) or three (576) */
                               {64, 196, 384}, {96, 196, 576}};
  rng r = {7};
  int ok_close = 1, ok_packed = 1, ok_threads = 1;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
    const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    gemm_arrays g = gemm_arrays_make(&r, m, n, k);
    if (!gemm_arrays_ok(&g)) {
      gemm_arrays_free(&g);
      report(0, "gemm: allocation");
      return;
    }
    float *a = g.a, *b = g.b, *row_bias = g.row_bias, *col_bias = g.col_bias;
    float *residual = g.residual, *want = g.want, *y1 = g.y1, *y3 = g.y2, *pa = g.pa, *pb = g.pb;
    /* The hard sigmoids' parameters make the gate's clamps bite on the
     * products' range. */
    static const cr_epilogue_act kActs[5] = {CR_EPI_NONE, CR_EPI_RELU, CR_EPI_CLIP,
                                             CR_EPI_HARD_SWISH, CR_EPI_HARD_SIGMOID};
    static const float kParams[5][2] = {
        {-0.5f, 0.75f}, {-0.5f, 0.75f}, {-0.5f, 0.75f}, {1.0f / 6.0f, 0.5f}, {2.0f, 0.4f}};
    for (int variant = 0; variant < 5; ++variant) {
      const cr_epilogue_act act = kActs[variant];
      cr_epilogue e = {variant > 0 ? row_bias : NULL, variant >= 2 ? col_bias : NULL,
                       variant > 0 ? residual : NULL, n, act, kParams[variant][0],
                       kParams[variant][1]};
      reference_gemm(m, n, k, a, b, e.row_bias, e.col_bias, e.residual, act, e.clip_low,
                     e.clip_high, want);
      cr_gemm_operand oa = {a, k, 1, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
      cr_gemm_operand ob = {b, n, 1, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
      if (cr_gemm(m, n, k, &oa, &ob, y1, n, &e, 1) != 0) ok_close = 0;
      /* float sums drift from the exact ones about in proportion to k */
      const float tolerance = k <= 300 ? 1e-5f : 1e-5f * (float)k / 300.0f;
      for (int64_t i = 0; i < m * n; ++i) {
        if (!close_enough(y1[i], want[i], tolerance)) ok_close = 0;
      }
      /* Packed operands hold the same values, so the same results. */
      oa.packed = pa;
      oa.packed_isa = cr_gemm_pack_a(m, k, a, k, 1, pa);
      ob.packed = pb;
      ob.packed_isa = cr_gemm_pack_b(k, n, b, n, 1, pb);
      if (cr_gemm(m, n, k, &oa, &ob, y3, n, &e, 1) != 0) ok_packed = 0;
      if (memcmp(y1, y3, (size_t)(m * n) * sizeof *y1) != 0) ok_packed = 0;
      /* B transposed (a strided view) and 3 threads. */
      float *bt = zero_array(k * n);
      if (bt == NULL) {
        ok_threads = 0;
      } else {
        for (int64_t p = 0; p < k; ++p)
          for (int64_t j = 0; j < n; ++j) bt[j * k + p] = b[p * n + j];
        cr_gemm_operand ot = {bt, 1, k, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
        oa.packed = NULL;
        if (cr_gemm(m, n, k, &oa, &ot, y3, n, &e, 3) != 0) ok_threads = 0;
        if (memcmp(y1, y3, (size_t)(m * n) * sizeof *y1) != 0) ok_threads = 0;
        free(bt);
      }
    }
    gemm_arrays_free(&g);
  }
  report(ok_close, "gemm with epilogues vs the double-precision definition");
  report(ok_packed, "gemm: pre-packed operands give identical results");
  report(ok_threads, "gemm: strided B and 3 threads give identical results");
}

/* The last columns of a product (n mod 48 of them: the AVX-512 column tail,
 * up to 12 columns with vectors along A's rows, more through the edge
 * kernel) against the double-precision definition, with rows not a
 * multiple of the panels' 8, k over several blocks (and k <= 64, where the
 * tiles go row panel by row panel), the epilogues, A pre-packed (as
 * convolution weights are) with B read in place, B pre-packed (as
 * FullyConnected's weights are), and the product cut in two shares as two
 * threads cut it: all give identical results. */
static void test_gemm_column_tails(void) {
  const int64_t shapes[][3] = {{37, 49, 200},  {61, 50, 300},  {130, 196, 161}, {20, 56, 290},
                               {45, 57, 40},   {9, 63, 170},   {70, 64, 129},   {13, 65, 300},
                               {29, 95, 200},  {100, 1, 300},  {33, 4, 50},     {140, 241, 64},
                               {131, 8, 330},  {3, 12, 20},    {64, 104, 96},
                               /* fewer row panels than column panels:
                                * threads share the columns, the tail in
                                * the last share */
                               {10, 100, 200}, {16, 241, 170},
                               /* cut along k (split_k_point): each share
                                * sums its rows' two parts */
                               {64, 196, 384}, {96, 196, 576}, {40, 90, 1000}};
  rng r = {23};
  int ok_close = 1, ok_same = 1;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
    const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    gemm_arrays g = gemm_arrays_make(&r, m, n, k);
    if (!gemm_arrays_ok(&g)) {
      gemm_arrays_free(&g);
      report(0, "gemm column tails: allocation");
      return;
    }
    float *a = g.a, *b = g.b, *row_bias = g.row_bias, *col_bias = g.col_bias;
    float *residual = g.residual, *want = g.want, *y1 = g.y1, *y2 = g.y2, *pa = g.pa, *pb = g.pb;
    const cr_isa isa_a = cr_gemm_pack_a(m, k, a, k, 1, pa);
    const cr_isa isa_b = cr_gemm_pack_b(k, n, b, n, 1, pb);
    for (int variant = 0; variant < 3; ++variant) {
      const cr_epilogue_act act = variant == 0 ? CR_EPI_NONE
                                  : variant == 1 ? CR_EPI_RELU
                                                 : CR_EPI_CLIP;
      cr_epilogue e = {variant == 1 ? row_bias : NULL, variant == 2 ? col_bias : NULL,
                       variant == 1 ? residual : NULL, n, act, -0.5f, 0.75f};
      reference_gemm(m, n, k, a, b, e.row_bias, e.col_bias, e.residual, act, e.clip_low,
                     e.clip_high, want);
      const cr_gemm_operand plain_a = {a, k, 1, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
      const cr_gemm_operand plain_b = {b, n, 1, NULL, NULL, NULL, CR_ISA_GENERIC, NULL};
      const cr_gemm_operand packed_a = {a, k, 1, NULL, NULL, pa, isa_a, NULL};
      const cr_gemm_operand packed_b = {b, n, 1, NULL, NULL, pb, isa_b, NULL};
      if (cr_gemm(m, n, k, &packed_a, &plain_b, y1, n, &e, 1) != 0) ok_close = 0;
      for (int64_t i = 0; i < m * n; ++i) {
        if (!close_enough(y1[i], want[i], 1e-5f)) ok_close = 0;
      }
      /* The other operand pre-packed, both plain, 2 threads, 2 shares. */
      const cr_gemm_operand *pairs[][2] = {{&plain_a, &packed_b}, {&plain_a, &plain_b},
                                           {&packed_a, &plain_b}, {&plain_a, &packed_b}};
      for (int v = 0; v < 4; ++v) {
        memset(y2, 0, (size_t)(m * n) * sizeof *y2);
        if (v < 2) {
          if (cr_gemm(m, n, k, pairs[v][0], pairs[v][1], y2, n, &e, 1) != 0) ok_same = 0;
        } else {
          if (cr_gemm(m, n, k, pairs[v][0], pairs[v][1], y2, n, &e, 2) != 0) ok_same = 0;
          float *y3 = zero_array(m * n);
          if (y3 == NULL) {
            ok_same = 0;
            continue;
          }
          for (int64_t share = 0; share < 2; ++share) {
            if (cr_gemm_share(m, n, k, pairs[v][0], pairs[v][1], y3, n, &e, NULL, share, 2) != 0) {
              ok_same = 0;
            }
          }
          if (memcmp(y1, y3, (size_t)(m * n) * sizeof *y1) != 0) ok_same = 0;
          free(y3);
        }
        if (memcmp(y1, y2, (size_t)(m * n) * sizeof *y1) != 0) ok_same = 0;
      }
    }
    gemm_arrays_free(&g);
  }
  report(ok_close, "gemm column tails (n mod 48 of 1 to 47) vs the double-precision definition");
  report(ok_same, "gemm column tails: packed, in place, 2 threads and 2 shares identical");
}

/* The packed layout of a depth with a short tail: k = 147 (ResNet's stem,
 * 3 x 7 x 7) is one block, each panel 147 x MR floats, row r's value at
 * step p at p * MR + r; k = 300 is blocks of 128 and 172 -> 128 + 128 + 44
 * (44 > 32 stays a block of its own): the third block starts at 256 * the
 * panels' rows. */
static void test_gemm_packed_k_blocks(void) {
  const int64_t m = 10;
  const int64_t depths[] = {147, 300};
  int ok = 1;
  rng r = {11};
  for (size_t d = 0; d < sizeof depths / sizeof depths[0]; ++d) {
    const int64_t k = depths[d];
    const size_t floats = cr_gemm_packed_a_floats(m, k);
    const int64_t rows = (int64_t)floats / k; /* m rounded up to the panels' MR */
    const int64_t mr = (int64_t)cr_gemm_packed_a_floats(1, k) / k;
    float *a = random_array(&r, m * k), *pa = malloc(floats * sizeof(float));
    if (a == NULL || pa == NULL) {
      free(a), free(pa);
      report(0, "gemm packed k blocks: allocation");
      return;
    }
    cr_gemm_pack_a(m, k, a, k, 1, pa);
    for (int64_t i = 0; i < m && ok; ++i) {
      for (int64_t p = 0; p < k; ++p) {
        const int64_t k0 = k == 147 || p < 128 ? 0 : p < 256 ? 128 : 256;
        const int64_t kc = k == 147 ? 147 : k0 < 256 ? 128 : 44;
        const int64_t at = k0 * rows + (i / mr) * kc * mr + (p - k0) * mr + i % mr;
        if (pa[at] != a[i * k + p]) {
          ok = 0;
          break;
        }
      }
    }
    free(a), free(pa);
  }
  report(ok, "gemm: a tail of k up to 32 is packed with the last block");
}

/* Each convolution path of kernels/fast/dense.c (1 x 1, the phase planes at
 * stride 1 and 2 with dilation, packed or, when deep, read in place on the
 * wide grid, im2col in 3-D, direct depthwise 3 x 3 and
 * general) against the direct formula, then fused (pre-packed filters,
 * residual, relu) against the unfused result with the epilogue applied. */
static void test_conv_paths(void) {
  typedef struct {
    const char *name;
    cr_conv_params p;
    int64_t x_shape[5];
    int64_t outputs;
  } conv_case;
  const conv_case cases[] = {
      {"1x1", {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, 1}, {2, 5, 1, 6, 7}, 11},
      {"3x3 pad 1", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1}, {2, 4, 1, 9, 8}, 10},
      {"3x3 stride 2", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1}, {1, 3, 1, 11, 10}, 9},
      /* depth 8 x 9 = 72: read in place on the wide grid */
      {"3x3 deep", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1}, {2, 8, 1, 9, 11}, 10},
      {"3x3 deep stride 2 dilated", {{1, 3, 3}, {1, 2, 2}, {1, 2, 1}, {0, 2, 1}, 1},
       {1, 8, 1, 13, 12}, 7},
      {"1x1 stride 2", {{1, 1, 1}, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, 1}, {1, 6, 1, 9, 8}, 5},
      /* small planes of a batch: one product over every image's columns
       * (panels and depth blocks across images; 2 threads: 3 + 2 images) */
      {"1x1 batch of 7x7 planes, deep", {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, 1},
       {5, 160, 1, 7, 7}, 70},
      {"1x1 batch of 9x10 planes", {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, 1},
       {3, 24, 1, 9, 10}, 33},
      /* 1 x 1 images: one product for the batch (a classifier as a
       * convolution), short and deep (k blocks) */
      {"1x1 on 1x1 images", {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, 1}, {3, 20, 1, 1, 1}, 13},
      {"1x1 on 1x1 images, deep", {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, 1},
       {5, 300, 1, 1, 1}, 70},
      /* strided 1 x 1 in 2 shares: of the columns (each gathering its
       * output rows), and of the outputs */
      {"1x1 stride 2, columns shared by 2 threads", {{1, 1, 1}, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, 1},
       {1, 16, 1, 32, 32}, 32},
      {"1x1 stride 2, outputs shared by 2 threads", {{1, 1, 1}, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, 1},
       {1, 32, 1, 16, 15}, 64},
      {"1x1 stride 3x2, groups 2", {{1, 1, 1}, {1, 3, 2}, {1, 1, 1}, {0, 0, 0}, 2},
       {2, 6, 1, 10, 9}, 4},
      {"5x3 dilated, stride 3x1, groups 2", {{1, 5, 3}, {1, 3, 1}, {1, 2, 1}, {0, 2, 1}, 2},
       {2, 4, 1, 13, 7}, 6},
      {"3-D", {{2, 2, 2}, {1, 1, 2}, {1, 1, 1}, {1, 0, 1}, 1}, {1, 3, 4, 5, 6}, 4},
      {"depthwise 3x3", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 6}, {2, 6, 1, 7, 9}, 6},
      /* output rows of 32 or more: computed row by row in place */
      {"depthwise 3x3 wide rows", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 3},
       {2, 3, 1, 4, 37}, 3},
      {"depthwise 3x3 stride 2", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 4},
       {1, 4, 1, 10, 9}, 4},
      /* the stride-2 path splits rows by column parity: odd and even
       * widths, no padding and a padding of 2 */
      {"depthwise 3x3 stride 2 pad 0", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, 3},
       {2, 3, 1, 11, 12}, 3},
      {"depthwise 3x3 stride 2 pad 2", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 2, 2}, 2},
       {1, 2, 1, 7, 8}, 2},
      /* stride 1: a row's right padding is the next row's left padding
       * (none at padding 0, two columns at 2) */
      {"3x3 stride 1 pad 0, deep", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, 1},
       {1, 8, 1, 9, 13}, 6},
      {"5x5 stride 1 pad 2, deep", {{1, 5, 5}, {1, 1, 1}, {1, 1, 1}, {0, 2, 2}, 1},
       {2, 3, 1, 7, 10}, 4},
      /* stride 2 with an even left padding (the even columns first) on
       * rows of more than 32 values (whole vectors of pairs, then a
       * masked tail), odd and even widths */
      {"3x3 stride 2 pad 2, rows of 35", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 2, 2}, 1},
       {1, 4, 1, 9, 35}, 6},
      {"3x3 stride 2 pad 0, rows of 64", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, 1},
       {2, 3, 1, 7, 64}, 5},
      /* strides above 2: the phase split's counted walk (padding shifts
       * the first phase), and a patch convolution (kernel = stride, deep
       * enough to read the phase planes in place) */
      {"3x3 stride 3 pad 1", {{1, 3, 3}, {1, 3, 3}, {1, 1, 1}, {0, 1, 2}, 1},
       {2, 3, 1, 13, 11}, 5},
      {"patches 4x4 stride 4", {{1, 4, 4}, {1, 4, 4}, {1, 1, 1}, {0, 0, 0}, 1},
       {2, 5, 1, 12, 16}, 7},
      /* many outputs, a small image: 2 threads share the filters' row
       * panels, each padding and packing all of the phase planes */
      {"3x3 shallow, 640 outputs", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 6, 1, 12, 12}, 640},
      /* one image large enough for 2 threads to share its product's
       * columns: deep on the wide grid (its rows padded to whole cache
       * lines) at stride 1 and 2, with a dilation, on a short wide plane,
       * and shallow with the output's columns packed */
      {"3x3 deep, 2 threads", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 16, 1, 40, 36}, 24},
      {"3x3 deep stride 2, 2 threads", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 32, 1, 50, 46}, 16},
      {"3x3 dilation 2, 2 threads", {{1, 3, 3}, {1, 1, 1}, {1, 2, 2}, {0, 2, 2}, 1},
       {1, 8, 1, 30, 30}, 64},
      {"3x3 shallow, 2 threads", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 4, 1, 48, 48}, 40},
      {"3x3 deep, 5 rows of 120", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 16, 1, 5, 120}, 64},
      /* each of 2 threads fills the phase rows its share of the columns
       * reads (stride 2 with a zero row past an odd padded height; stride
       * 3's counted walk; short rows), or all of them when the threads
       * share the outputs (72 outputs of an 8 x 8 image); outputs not a
       * multiple of 16, which keeps these on the GEMM path under AVX2 and
       * AVX-512 alike (the blocked kernels have cases of their own) */
      {"3x3 deep stride 2, rows filled by 2 threads",
       {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1}, {1, 8, 1, 41, 70}, 40},
      {"3x3 deep stride 3, rows filled by 2 threads",
       {{1, 3, 3}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, 1}, {1, 8, 1, 40, 101}, 48},
      {"3x3 deep stride 2, short rows filled by 2 threads",
       {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1}, {1, 32, 1, 31, 30}, 72},
      {"3x3 deep, outputs shared by 2 threads", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 64, 1, 8, 8}, 72},
      /* AVX-512: rows of whole vectors of 16, and whole vectors plus a
       * masked tail, at stride 1 and 2 */
      {"depthwise 3x3 rows of 16", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 2},
       {2, 2, 1, 5, 16}, 2},
      {"depthwise 3x3 rows of 20", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 3},
       {1, 3, 1, 6, 20}, 3},
      {"depthwise 3x3 stride 2 rows of 17", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 2},
       {2, 2, 1, 9, 33}, 2},
      {"depthwise 5x5 multiplier 2", {{1, 5, 5}, {1, 2, 1}, {1, 1, 2}, {0, 2, 3}, 3},
       {1, 3, 1, 8, 9}, 6},
      /* 5 x 5 and 7 x 7 under AVX-512 and AVX2 (depthwise_kxk): rows of 14
       * and 28 (masked tails, rows in pairs and an odd last row), stride 2
       * on planes split by column parity (odd and even sizes, pad 0 and 2),
       * a multiplier of 2 */
      {"depthwise 5x5 rows of 14", {{1, 5, 5}, {1, 1, 1}, {1, 1, 1}, {0, 2, 2}, 3},
       {2, 3, 1, 14, 14}, 3},
      {"depthwise 5x5 rows of 28, 9 rows", {{1, 5, 5}, {1, 1, 1}, {1, 1, 1}, {0, 2, 2}, 2},
       {1, 2, 1, 9, 28}, 2},
      {"depthwise 5x5 stride 2, 56 x 56", {{1, 5, 5}, {1, 2, 2}, {1, 1, 1}, {0, 2, 2}, 2},
       {1, 2, 1, 56, 56}, 2},
      {"depthwise 5x5 stride 2, 33 x 41", {{1, 5, 5}, {1, 2, 2}, {1, 1, 1}, {0, 2, 2}, 2},
       {2, 2, 1, 33, 41}, 2},
      {"depthwise 5x5 stride 2 pad 0", {{1, 5, 5}, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, 1},
       {1, 1, 1, 30, 37}, 1},
      {"depthwise 7x7 rows of 19", {{1, 7, 7}, {1, 1, 1}, {1, 1, 1}, {0, 3, 3}, 2},
       {1, 2, 1, 11, 19}, 2},
      {"depthwise 5x5 rows of 20, multiplier 2", {{1, 5, 5}, {1, 1, 1}, {1, 1, 1}, {0, 2, 2}, 2},
       {1, 2, 1, 7, 20}, 4},
      /* stride-2 planes too large to split whole (more than kSmallSplit
       * floats): a ring of three split rows, bottom padding rows zeroed in
       * the ring; odd and even widths and pads */
      {"depthwise 3x3 stride 2, ring of rows", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 2},
       {2, 2, 1, 90, 101}, 2},
      {"depthwise 3x3 stride 2 pad 2, ring", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 2, 2}, 2},
       {1, 2, 1, 95, 104}, 2},
      {"depthwise 3x3 stride 2 pad 0, ring", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, 1},
       {1, 1, 1, 101, 110}, 1},
      /* the same planes under AVX2 read straight from the plane
       * (depthwise_s2_avx2): rows narrower than two vectors (the first
       * vector's loads masked too), a last vector of one output, and a
       * padding of 3 (two outputs left of the row, in scalar code) */
      {"depthwise 3x3 stride 2, ring, rows of 9", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 2},
       {1, 2, 1, 1001, 9}, 2},
      {"depthwise 3x3 stride 2, ring, rows of 33", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 1, 1, 260, 33}, 1},
      {"depthwise 3x3 stride 2 pad 3, ring", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 3, 3}, 1},
       {1, 1, 1, 130, 70}, 1},
      /* under AVX-512 rows of at least 12 outputs read straight from the
       * plane (depthwise_s2_avx512): 12 outputs (the first vector's last
       * value from the row's end), 16 (the 33rd column inside), 64 (four
       * whole vectors), pad 0 on an odd width */
      {"depthwise 3x3 stride 2, rows of 12", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 3},
       {2, 3, 1, 23, 23}, 3},
      {"depthwise 3x3 stride 2, rows of 16", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 2},
       {1, 2, 1, 8, 32}, 2},
      {"depthwise 3x3 stride 2, rows of 64", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 2},
       {1, 2, 1, 6, 128}, 2},
      {"depthwise 3x3 stride 2 pad 0, rows of 14", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, 2},
       {1, 2, 1, 9, 29}, 2},
      /* channel-blocked (conv_blocked.c) once packed, under AVX2: rows
       * narrower than a vector, a block of rows crossing tiles of 6
       * positions; channels in two chunks (32 + 8) and rows shared by 2
       * threads; kernel depth 1 on a 3-D input (each slice a plane); a
       * single row with a masked tail; rows of 100 (one row per block) */
      {"3x3 blocked, rows of 7", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {2, 8, 1, 5, 7}, 16},
      {"3x3 blocked, 40 channels, 2 threads", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 40, 1, 9, 13}, 32},
      {"3x3 blocked, 3-D slices", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {2, 16, 3, 4, 6}, 16},
      {"3x3 blocked, one row of 20", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 64, 1, 1, 20}, 48},
      {"3x3 blocked, rows of 100", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 8, 1, 3, 100}, 16},
      /* stride 2 on phase planes: even and odd sizes, one output row,
       * rows shared by 2 threads with two chunks of channels */
      {"3x3 stride 2 blocked, 16 x 16", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1},
       {2, 16, 1, 16, 16}, 32},
      {"3x3 stride 2 blocked, 13 x 11", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 8, 1, 13, 11}, 16},
      {"3x3 stride 2 blocked, one output row", {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 8, 1, 2, 19}, 16},
      {"3x3 stride 2 blocked, 48 channels, 2 threads",
       {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1}, {1, 48, 1, 21, 30}, 64},
      /* channel-blocked under AVX-512 too (blocks of 32 outputs; at
       * stride 1 from 32 channels): output rows in tiles of at most 12
       * positions (13 -> 7 + 6, 25 -> 9 + 8 + 8, one column), chunks of
       * 16 channels (48: three), 3-D slices, a batch; 2 threads sharing
       * the blocks of outputs (4 blocks) or, with 3 blocks, the rows;
       * stride 2 from 16 channels on odd sizes */
      {"3x3 blocked, rows of 13, 32 outputs", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 32, 1, 5, 13}, 32},
      {"3x3 blocked, rows of 25, 48 channels", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {2, 48, 1, 6, 25}, 64},
      {"3x3 blocked, rows of 1", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 32, 1, 4, 1}, 32},
      {"3x3 blocked, 3-D slices, 32 outputs", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {2, 32, 2, 4, 6}, 32},
      {"3x3 blocked, outputs shared by 2 threads", {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1},
       {1, 64, 1, 13, 13}, 128},
      {"3x3 blocked, 3 blocks, rows shared by 2 threads",
       {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1}, {1, 40, 1, 17, 14}, 96},
      {"3x3 stride 2 blocked, 16 channels, 15 x 17",
       {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1}, {1, 16, 1, 15, 17}, 32},
      {"3x3 stride 2 blocked, 32 outputs, 2 threads",
       {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1}, {1, 32, 1, 32, 32}, 64},
      /* filters over 1 MiB (64 x 480 x 9): the images of a batch run
       * together (1 thread: 3; 2 threads: 2 + 1), at stride 1 and 2 */
      {"3x3 blocked, filters over 1 MiB, a batch of 3",
       {{1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, 1}, {3, 64, 1, 5, 6}, 480},
      {"3x3 stride 2 blocked, filters over 1 MiB, a batch of 3",
       {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, 1}, {3, 64, 1, 7, 9}, 480},
  };
  rng r = {99};
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; ++t) {
    const conv_case *c = &cases[t];
    int64_t y_shape[5] = {c->x_shape[0], c->outputs, 0, 0, 0};
    for (int axis = 0; axis < 3; ++axis) {
      y_shape[2 + axis] = conv_out_size(c->x_shape[2 + axis], c->p.kernel[axis],
                                        c->p.stride[axis], c->p.dilate[axis], c->p.pad[axis]);
    }
    const int64_t group_channels = c->x_shape[1] / c->p.num_group;
    const int64_t w_count =
        c->outputs * group_channels * c->p.kernel[0] * c->p.kernel[1] * c->p.kernel[2];
    const int64_t y_count = product5(y_shape);
    float *x = random_array(&r, product5(c->x_shape)), *w = random_array(&r, w_count);
    float *bias = random_array(&r, c->outputs), *residual = random_array(&r, y_count);
    float *want = zero_array(y_count), *y = zero_array(y_count), *fused = zero_array(y_count);
    const size_t floats = cr_conv_packed_floats(&c->p, c->outputs, group_channels);
    float *packed = floats ? malloc(floats * sizeof(float)) : NULL;
    char name[128];
    reference_convolution(&c->p, c->x_shape, x, w, bias, y_shape, want);
    int status = cr_convolution(&c->p, c->x_shape, x, w, bias, y_shape, y, 1);
    snprintf(name, sizeof name, "conv %s vs direct formula", c->name);
    report(status == 0, name);
    check_close(name, y, want, y_count, 1e-5f);
    const cr_isa isa = packed ? cr_conv_pack(&c->p, c->outputs, group_channels, w, packed)
                              : CR_ISA_GENERIC;
    const cr_fusion fusion = {residual, CR_EPI_RELU, 0.0f, 0.0f};
    status = cr_convolution_fused(&c->p, c->x_shape, x, w, packed, isa, bias, &fusion, y_shape,
                                  fused, 2);
    for (int64_t i = 0; i < y_count; ++i) {
      const float v = y[i] + residual[i];
      want[i] = v < 0.0f ? 0.0f : v;
    }
    snprintf(name, sizeof name, "conv %s fused with residual and relu", c->name);
    report(status == 0, name);
    /* The blocked kernels sum each output in another order than the GEMM
     * (whose depth blocks are summed apart, then added). */
    if (packed != NULL && cr_conv_blocked_applies(&c->p, c->outputs, group_channels, isa)) {
      check_close(name, fused, want, y_count, 1e-5f);
    } else {
      check_identical(name, fused, want, y_count);
    }
    free(x), free(w), free(bias), free(residual), free(want), free(y), free(fused);
    free(packed);
  }
}

/* 3 x 3 depthwise planes small enough for the vector kernels' special
 * cases: stride 2 on planes 16 and 8 wide with padding 1, which AVX-512
 * computes with the rows in registers (s2_plane_w16/w8), next to shapes just
 * outside that case (other heights, padding 0); stride-1 planes at most 8
 * wide; and, with 13 or 16 channels, blocks of 8 channels, which AVX2
 * computes interleaved (blocked_depthwise), beside the planes left over
 * and blocks cut by a thread's share. Under AVX2 and AVX-512 every output
 * must equal, bit for bit, bias then one fused multiply-add per tap in
 * (kh, kw) order with 0 for padding, then the residual and the activation
 * (the vector kernels' operations); under the portable path, close to it. */
static void test_depthwise_small_planes(void) {
  typedef struct {
    int64_t stride, h, w, pad, channels;
    cr_epilogue_act act;
    int threads, has_bias;
  } plane_case;
  const plane_case cases[] = {
      {2, 16, 16, 1, 5, CR_EPI_NONE, 1, 1},  {2, 16, 16, 1, 5, CR_EPI_RELU, 2, 1},
      {2, 16, 16, 1, 5, CR_EPI_CLIP, 1, 1},  {2, 8, 16, 1, 5, CR_EPI_CLIP, 2, 1},
      {2, 32, 16, 1, 5, CR_EPI_RELU, 1, 1},  {2, 8, 8, 1, 5, CR_EPI_NONE, 2, 1},
      {2, 8, 8, 1, 5, CR_EPI_CLIP, 1, 1},    {2, 12, 16, 1, 5, CR_EPI_RELU, 2, 1},
      {2, 10, 8, 1, 5, CR_EPI_CLIP, 1, 1},   {2, 16, 16, 0, 5, CR_EPI_CLIP, 2, 1},
      {2, 8, 8, 0, 5, CR_EPI_RELU, 1, 1},    {2, 14, 14, 1, 13, CR_EPI_CLIP, 1, 1},
      {2, 14, 14, 1, 16, CR_EPI_RELU, 2, 1}, {2, 11, 9, 2, 13, CR_EPI_NONE, 1, 0},
      {2, 32, 32, 1, 8, CR_EPI_RELU, 1, 1},  {2, 7, 7, 0, 16, CR_EPI_CLIP, 2, 1},
      {1, 7, 7, 1, 13, CR_EPI_RELU, 1, 1},   {1, 8, 8, 1, 16, CR_EPI_CLIP, 2, 1},
      {1, 4, 5, 1, 8, CR_EPI_NONE, 1, 0},    {1, 7, 7, 0, 13, CR_EPI_CLIP, 2, 1},
      {1, 6, 8, 2, 9, CR_EPI_RELU, 1, 1},    {1, 7, 7, 1, 5, CR_EPI_NONE, 1, 1},
  };
  rng r = {2024};
  int ok = 1;
  const int exact = cr_gemm_isa() != CR_ISA_GENERIC;
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; ++t) {
    const plane_case *c = &cases[t];
    const int64_t batch = 2, channels = c->channels, s = c->stride;
    const cr_conv_params p = {{1, 3, 3}, {1, s, s}, {1, 1, 1}, {0, c->pad, c->pad}, channels};
    const int64_t x_shape[5] = {batch, channels, 1, c->h, c->w};
    const int64_t oh = (c->h + 2 * c->pad - 3) / s + 1, ow = (c->w + 2 * c->pad - 3) / s + 1;
    const int64_t y_shape[5] = {batch, channels, 1, oh, ow};
    const int64_t y_count = batch * channels * oh * ow;
    float *x = random_array(&r, batch * channels * c->h * c->w);
    float *w = random_array(&r, channels * 9), *bias = random_array(&r, channels);
    float *residual = random_array(&r, y_count);
    float *y = zero_array(y_count), *want = zero_array(y_count);
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t o = 0; o < channels; ++o) {
        const float *plane = x + (n * channels + o) * c->h * c->w;
        for (int64_t i = 0; i < oh; ++i) {
          for (int64_t j = 0; j < ow; ++j) {
            float acc = c->has_bias ? bias[o] : 0.0f;
            for (int64_t kh = 0; kh < 3; ++kh) {
              for (int64_t kw = 0; kw < 3; ++kw) {
                const int64_t ih = s * i + kh - c->pad, iw = s * j + kw - c->pad;
                const float v = ih >= 0 && ih < c->h && iw >= 0 && iw < c->w
                                    ? plane[ih * c->w + iw]
                                    : 0.0f;
                acc = fmaf(w[o * 9 + kh * 3 + kw], v, acc);
              }
            }
            const int64_t at = ((n * channels + o) * oh + i) * ow + j;
            acc += residual[at];
            if (c->act == CR_EPI_RELU) acc = acc < 0.0f ? 0.0f : acc;
            if (c->act == CR_EPI_CLIP) acc = acc < -0.5f ? -0.5f : acc > 0.5f ? 0.5f : acc;
            want[at] = acc;
          }
        }
      }
    }
    const cr_fusion fusion = {residual, c->act, -0.5f, 0.5f};
    const int status = cr_convolution_fused(&p, x_shape, x, w, NULL, CR_ISA_GENERIC,
                                            c->has_bias ? bias : NULL, &fusion, y_shape, y,
                                            c->threads);
    ok = ok && status == 0;
    if (exact) {
      for (int64_t i = 0; i < y_count && ok; ++i) {
        if (memcmp(&y[i], &want[i], sizeof y[i]) != 0) {
          printf("  case %zu: output %lld is %.9g, want %.9g\n", t, (long long)i, y[i],
                 want[i]);
          ok = 0;
        }
      }
    } else {
      check_close("depthwise small planes", y, want, y_count, 1e-5f);
    }
    free(x), free(w), free(bias), free(residual), free(y), free(want);
  }
  report(ok, "depthwise 3x3 on small planes, stride 1 and 2, blocks of 8 channels: fused "
             "multiply-adds in tap order (bit for bit under AVX2 and AVX-512)");
}

/* Every test, once per GEMM ISA this CPU has (the portable path always). */
static void run_all(void) {
  test_parallel_for_covers_each_index_once();
#if defined(__linux__)
  test_parallel_worker_leaves_caller_cpu();
#endif
  test_gemm_random();
  test_gemm_column_tails();
  test_gemm_packed_k_blocks();
  test_conv_paths();
  test_depthwise_small_planes();
  test_conv_valid_stride1();
  test_conv_pad_stride();
  test_conv_groups_dilation();
  test_pool_2d_max_unpadded();
  test_pool_2d_max_wide_rows_nan();
  test_pool_2d_max_shapes();
  test_pool_2d_max_3_wide_stride_2();
  test_pool_2d_max_rows_shared();
  test_pool_global_average();
  test_conv_1d();
  test_conv_3d_random();
  test_pool_full_convention_1d();
  test_pool_empty_windows();
  test_pool_2d();
  test_pool_3d_channels();
  test_fc_small();
  test_fc_threads();
  test_gemv();
  test_activation();
  test_batch_norm();
  test_softmax();
  test_binary();
  test_broadcast_binary();
  test_scalar_binary();
  test_add_n();
  test_unary();
  test_clip_and_fill();
  test_copy_rows();
  test_copy_strided();
  test_reduce();
  test_matmul();
  test_layer_norm();
  test_leaky_relu();
  test_embedding();
  test_half_round_trip();
  test_half_rounding();
  test_cast();
  test_gather_maps();
  test_take_and_where();
  test_deconvolution();
  test_instance_norm_and_lp_pooling();
  test_searches();
  test_new_elementwise();
}

int main(void) {
  const cr_isa isas[] = {CR_ISA_GENERIC, CR_ISA_AVX2, CR_ISA_AVX512};
  for (int i = 0; i < 3; ++i) {
    if (cr_gemm_set_isa(isas[i]) != isas[i]) continue; /* not on this CPU */
    printf("== GEMM ISA %s\n", cr_isa_name(isas[i]));
    run_all();
  }
  printf("%d passed, %d failed\n", counts.passed, counts.failed);
  return counts.failed == 0 ? 0 : 1;
}
