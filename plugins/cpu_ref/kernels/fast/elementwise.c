/*
 * The fast kernels of the element-wise operators, softmax, LayerNorm and
 * the GELU and leaky cases of LeakyReLU: the loop bodies of
 * ../elementwise_loops.h, which the reference kernels (reference/kernels.c)
 * run as plain C, here each wrapped in a function compiled once per ISA
 * (CR_TARGET_CLONES: AVX-512, AVX2, baseline) so that the vectorised loops
 * use the widest vectors the CPU has. The body is the same C, inlined into
 * every clone, and no clone contracts or reassociates (C11, no
 * -ffast-math): each kernel gives the reference kernel's values bit for
 * bit. The cases without such a loop (libm calls per element, strided
 * rows) run the reference kernel itself.
 */
#include <stdint.h>
#include <string.h>

#include "elementwise_loops.h"
#include "kernels.h"
#include "parallel.h"
#include "target_clones.h"

CR_TARGET_CLONES static int fast_activation_simple(cr_activation_type type, int64_t count,
                                                   const float *x, float *y) {
  return activation_simple(type, count, x, y);
}

CR_TARGET_CLONES static void fast_binary_simple(cr_binary_op op, int64_t count, const float *a,
                                                const float *b, float *y) {
  binary_simple(op, count, a, b, y);
}

CR_TARGET_CLONES static void fast_scalar_binary_simple(cr_binary_op op, int reverse,
                                                       int64_t count, const float *x, float s,
                                                       float *y) {
  scalar_binary_simple(op, reverse, count, x, s, y);
}

CR_TARGET_CLONES static int fast_unary_simple(cr_unary_op op, int64_t count, const float *x,
                                              float *y) {
  return unary_simple(op, count, x, y);
}

CR_TARGET_CLONES static void fast_layer_norm_rows(int64_t rows, int64_t channels,
                                                  const float *x, const float *gamma,
                                                  const float *beta, double eps, float *y,
                                                  float *mean, float *sigma) {
  layer_norm_rows(rows, channels, x, gamma, beta, eps, y, mean, sigma);
}

CR_TARGET_CLONES static void fast_leaky_loop(double slope, int64_t count, const float *x,
                                             float *y) {
  leaky_loop(slope, count, x, y);
}

/* Sigmoid (swish 0) and SiLU (swish 1): their exponential is made of
 * fmaf, which the "avx2" clone of CR_TARGET_CLONES would call in libm per
 * element (-mavx2 does not imply -mfma), so they have clones of their own,
 * picked here by the CPU: AVX-512 (which implies FMA), AVX2 with FMA, and
 * the baseline. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    defined(__GLIBC__) && !defined(__SANITIZE_THREAD__)
#define CR_FMA_CLONES 1
#endif

/* Which of those clones the CPU runs: 2 AVX-512, 1 AVX2 with FMA, 0 the
 * baseline (always 0 without the clones). */
static int fma_clone(void) {
#ifdef CR_FMA_CLONES
  if (__builtin_cpu_supports("avx512f")) return 2;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
#endif
  return 0;
}

CR_LOOP_BODY void sigmoid_or_swish(int swish, int64_t count, const float *x, float *y) {
  if (swish) {
    swish_loop(count, x, y);
  } else {
    for (int64_t i = 0; i < count; ++i) y[i] = sigmoid_float(x[i]);
  }
}

#ifdef CR_FMA_CLONES
__attribute__((target("avx512f"))) static void sigmoid_or_swish_avx512(int swish, int64_t count,
                                                                       const float *x, float *y) {
  sigmoid_or_swish(swish, count, x, y);
}

__attribute__((target("avx2,fma"))) static void sigmoid_or_swish_avx2(int swish, int64_t count,
                                                                     const float *x, float *y) {
  sigmoid_or_swish(swish, count, x, y);
}
#endif

static void fast_sigmoid_or_swish(int swish, int64_t count, const float *x, float *y) {
  switch (fma_clone()) {
#ifdef CR_FMA_CLONES
    case 2: sigmoid_or_swish_avx512(swish, count, x, y); return;
    case 1: sigmoid_or_swish_avx2(swish, count, x, y); return;
#endif
    default: sigmoid_or_swish(swish, count, x, y);
  }
}

/* Softmax rows and GELU: their exponentials (and GELU's erfc) are made of
 * fmaf too, so they take the same three-way dispatch. */
#ifdef CR_FMA_CLONES
__attribute__((target("avx512f"))) static void softmax_rows_avx512(int64_t rows, int64_t length,
                                                                   const float *x, float *y) {
  softmax_rows(rows, length, x, y);
}

__attribute__((target("avx2,fma"))) static void softmax_rows_avx2(int64_t rows, int64_t length,
                                                                 const float *x, float *y) {
  softmax_rows(rows, length, x, y);
}

__attribute__((target("avx512f"))) static void gelu_avx512(int64_t count, const float *x,
                                                           float *y) {
  gelu_float(count, x, y);
}

__attribute__((target("avx2,fma"))) static void gelu_avx2(int64_t count, const float *x,
                                                         float *y) {
  gelu_float(count, x, y);
}
#endif

static void fast_softmax_rows(int64_t rows, int64_t length, const float *x, float *y) {
  switch (fma_clone()) {
#ifdef CR_FMA_CLONES
    case 2: softmax_rows_avx512(rows, length, x, y); return;
    case 1: softmax_rows_avx2(rows, length, x, y); return;
#endif
    default: softmax_rows(rows, length, x, y);
  }
}

static void fast_gelu(int64_t count, const float *x, float *y) {
  switch (fma_clone()) {
#ifdef CR_FMA_CLONES
    case 2: gelu_avx512(count, x, y); return;
    case 1: gelu_avx2(count, x, y); return;
#endif
    default: gelu_float(count, x, y);
  }
}

CR_TARGET_CLONES static void fast_hard_sigmoid(int swish, double alpha, double beta,
                                              int64_t count, const float *x, float *y) {
  hard_sigmoid_loop(swish, (float)alpha, (float)beta, count, x, y);
}

void cr_fast_activation(cr_activation_type type, int64_t count, const float *x, float *y) {
  if (!fast_activation_simple(type, count, x, y)) cr_activation(type, count, x, y);
}

void cr_fast_softmax(int64_t outer, int64_t length, int64_t inner, double temperature, int log,
                     const float *x, float *y) {
  if (inner == 1 && temperature == 1.0 && !log) {
    fast_softmax_rows(outer, length, x, y);
    return;
  }
  cr_softmax(outer, length, inner, temperature, log, x, y);
}

void cr_fast_binary(cr_binary_op op, int64_t count, const float *a, const float *b, float *y) {
  if (is_simple_binary(op)) {
    fast_binary_simple(op, count, a, b, y);
    return;
  }
  cr_binary(op, count, a, b, y);
}

void cr_fast_scalar_binary(cr_binary_op op, int reverse, int64_t count, const float *x,
                           float scalar, float *y) {
  if (is_simple_binary(op)) {
    fast_scalar_binary_simple(op, reverse, count, x, scalar, y);
    return;
  }
  cr_scalar_binary(op, reverse, count, x, scalar, y);
}

/* A broadcast of merged axes (broadcast_rows), its rows shared out between
 * threads. */
typedef struct broadcast_task {
  cr_binary_op op;
  int ndim; /* axes after merging, at least 1 */
  int64_t dims[CR_MAX_NDIM], a_strides[CR_MAX_NDIM], b_strides[CR_MAX_NDIM];
  const float *a, *b;
  float *y;
} broadcast_task;

/* Rows [begin, end) of the broadcast: each row the last axis, at the
 * offsets its index gives on the axes before it. */
static void broadcast_rows(void *context, int64_t begin, int64_t end) {
  const broadcast_task *t = context;
  const int last = t->ndim - 1;
  const int64_t row = t->dims[last];
  const int64_t a_step = t->a_strides[last], b_step = t->b_strides[last];
  for (int64_t r = begin; r < end; ++r) {
    int64_t a_off = 0, b_off = 0, rest = r;
    for (int d = last - 1; d >= 0; --d) {
      const int64_t i = rest % t->dims[d];
      rest /= t->dims[d];
      a_off += i * t->a_strides[d];
      b_off += i * t->b_strides[d];
    }
    const float *a_row = t->a + a_off;
    const float *b_row = t->b + b_off;
    float *y_row = t->y + r * row;
    if (a_step == 1 && b_step == 1) {
      fast_binary_simple(t->op, row, a_row, b_row, y_row);
    } else if (a_step == 1 && b_step == 0) {
      fast_scalar_binary_simple(t->op, 0, row, a_row, b_row[0], y_row);
    } else if (a_step == 0 && b_step == 1) {
      fast_scalar_binary_simple(t->op, 1, row, b_row, a_row[0], y_row);
    } else {
      cr_broadcast_binary(t->op, 1, &row, &a_step, &b_step, a_row, b_row, y_row);
    }
  }
}

/* cr_broadcast_binary's rows, the contiguous ones (both operands, or one
 * repeated) through the per-ISA loops, the others through the reference
 * kernel on that one row; shared out by rows between up to num_threads
 * threads, a thread per cr_threads_for_bytes' share of the output (each
 * value is computed as on one thread). */
void cr_fast_broadcast_binary_shared(cr_binary_op op, int ndim, const int64_t *dims,
                                     const int64_t *a_strides, const int64_t *b_strides,
                                     const float *a, const float *b, float *y,
                                     int num_threads) {
  if (!is_simple_binary(op) || ndim > CR_MAX_NDIM) {
    cr_broadcast_binary(op, ndim, dims, a_strides, b_strides, a, b, y);
    return;
  }
  const int64_t count = count_of(ndim, dims);
  if (count == 0) return;
  /* Axes of one element dropped, and each axis merged into the one before
   * it where both operands step through the pair as through one axis: a
   * squeeze-excitation scale of (N, C, H, W) by (N, C, 1, 1) then runs in
   * rows of H * W, not W (EfficientNet's 7 x 7 planes: a call per 7
   * values). The walk's order, and so each value, is unchanged. */
  broadcast_task task = {.op = op, .a = a, .b = b, .y = y};
  int m = 0;
  for (int d = 0; d < ndim; ++d) {
    if (dims[d] == 1) continue;
    if (m > 0 && task.a_strides[m - 1] == a_strides[d] * dims[d] &&
        task.b_strides[m - 1] == b_strides[d] * dims[d]) {
      task.dims[m - 1] *= dims[d];
      task.a_strides[m - 1] = a_strides[d];
      task.b_strides[m - 1] = b_strides[d];
      continue;
    }
    task.dims[m] = dims[d];
    task.a_strides[m] = a_strides[d];
    task.b_strides[m] = b_strides[d];
    ++m;
  }
  if (m == 0) task.dims[0] = 1, task.a_strides[0] = task.b_strides[0] = 0, m = 1; /* one element */
  task.ndim = m;
  const int64_t rows = count / task.dims[m - 1];
  const int threads = rows < 2 ? 1 : cr_threads_for_bytes(num_threads, 8.0 * (double)count);
  if (threads <= 1) {
    broadcast_rows(&task, 0, rows);
    return;
  }
  cr_parallel_for(threads, rows, broadcast_rows, &task);
}

void cr_fast_broadcast_binary(cr_binary_op op, int ndim, const int64_t *dims,
                              const int64_t *a_strides, const int64_t *b_strides,
                              const float *a, const float *b, float *y) {
  cr_fast_broadcast_binary_shared(op, ndim, dims, a_strides, b_strides, a, b, y, 1);
}

void cr_fast_add_n(int num, int64_t count, const float *const *x, float *y) {
  /* As cr_add_n: y may be x[0], read before it is written. */
  if (num == 1) {
    if (y != x[0]) memcpy(y, x[0], (size_t)count * sizeof *y);
    return;
  }
  fast_binary_simple(CR_BINARY_ADD, count, x[0], x[1], y);
  for (int k = 2; k < num; ++k) fast_binary_simple(CR_BINARY_ADD, count, y, x[k], y);
}

void cr_fast_unary(cr_unary_op op, int64_t count, const float *x, float *y) {
  if (op == CR_UNARY_SIGMOID) {
    fast_sigmoid_or_swish(0, count, x, y);
    return;
  }
  if (!fast_unary_simple(op, count, x, y)) cr_unary(op, count, x, y);
}

void cr_fast_layer_norm(int64_t outer, int64_t channels, int64_t inner, const float *x,
                        const float *gamma, const float *beta, double eps, float *y,
                        float *mean, float *std) {
  if (inner == 1 && channels > 0) {
    fast_layer_norm_rows(outer, channels, x, gamma, beta, eps, y, mean, std);
    return;
  }
  cr_layer_norm(outer, channels, inner, x, gamma, beta, eps, y, mean, std);
}

void cr_fast_leaky_relu(cr_leaky_type type, double slope, int64_t count, const float *x,
                        float *y) {
  if (type == CR_LEAKY_GELU) {
    fast_gelu(count, x, y);
  } else if (type == CR_LEAKY_LEAKY) {
    fast_leaky_loop(slope, count, x, y);
  } else {
    cr_leaky_relu(type, slope, count, x, y);
  }
}

void cr_fast_prelu(int64_t outer, int64_t channels, int64_t inner, const float *x,
                   const float *gamma, int64_t outer_step, int64_t channel_step, float *y) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t base = (o * channels + c) * inner;
      const double slope = gamma[o * outer_step + c * channel_step];
      fast_leaky_loop(slope, inner, x + base, y + base);
    }
  }
}

/* The element-wise jobs shared out between threads: contiguous ranges of
 * whole vectors (64 bytes), a thread per cr_threads_for_bytes' share of
 * the bytes read and written. */
typedef struct elementwise_task {
  int kind; /* 0: cr_fast_unary, 1: hard sigmoid / hard swish, 2: swish */
  cr_unary_op op;
  int swish;
  double alpha, beta;
  const float *x;
  float *y;
  int64_t count;
} elementwise_task;

enum { kElementwiseChunk = 16 };

static void elementwise_range(void *context, int64_t begin, int64_t end) {
  const elementwise_task *t = context;
  const int64_t first = begin * kElementwiseChunk;
  const int64_t last = end * kElementwiseChunk < t->count ? end * kElementwiseChunk : t->count;
  if (t->kind == 0) {
    cr_fast_unary(t->op, last - first, t->x + first, t->y + first);
  } else if (t->kind == 1) {
    fast_hard_sigmoid(t->swish, t->alpha, t->beta, last - first, t->x + first, t->y + first);
  } else {
    fast_sigmoid_or_swish(1, last - first, t->x + first, t->y + first);
  }
}

static void elementwise_shared(const elementwise_task *task, int num_threads) {
  const int64_t chunks = (task->count + kElementwiseChunk - 1) / kElementwiseChunk;
  const int threads = cr_threads_for_bytes(num_threads, 8.0 * (double)task->count);
  if (threads <= 1 || chunks < 2) {
    elementwise_range((void *)task, 0, chunks);
    return;
  }
  cr_parallel_for(threads, chunks, elementwise_range, (void *)task);
}

void cr_fast_unary_shared(cr_unary_op op, int64_t count, const float *x, float *y,
                          int num_threads) {
  const elementwise_task task = {0, op, 0, 0.0, 0.0, x, y, count};
  elementwise_shared(&task, num_threads);
}

void cr_fast_hard_sigmoid(int swish, double alpha, double beta, int64_t count, const float *x,
                          float *y, int num_threads) {
  const elementwise_task task = {1, CR_UNARY_ABS, swish, alpha, beta, x, y, count};
  elementwise_shared(&task, num_threads);
}

void cr_fast_swish(int64_t count, const float *x, float *y, int num_threads) {
  const elementwise_task task = {2, CR_UNARY_ABS, 0, 0.0, 0.0, x, y, count};
  elementwise_shared(&task, num_threads);
}
