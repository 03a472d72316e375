/*
 * The fast copies of kernels.h: cr_copy_bytes shares a large copy (a
 * batch of images) among threads, and cr_copy_rows copies short rows of
 * floats through vector moves (short_rows.h) rather than a memcpy call per
 * row. Copies move bytes: the result is the same however they are made.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gemm.h"
#include "kernels.h"
#include "parallel.h"
#include "short_rows.h"

typedef struct cr_byte_copy {
  const unsigned char *x;
  unsigned char *y;
  size_t bytes;
} cr_byte_copy;

enum { kCopyLine = 64 };

/* Lines [begin, end) of the copy (the last one short). */
static void copy_lines(void *context, int64_t begin, int64_t end) {
  const cr_byte_copy *t = context;
  const size_t first = (size_t)begin * kCopyLine;
  const size_t last = (size_t)end * kCopyLine < t->bytes ? (size_t)end * kCopyLine : t->bytes;
  memcpy(t->y + first, t->x + first, last - first);
}

void cr_copy_bytes(size_t bytes, const void *x, void *y, int num_threads) {
  if (bytes == 0) return;
  cr_byte_copy task = {x, y, bytes};
  const int64_t lines = (int64_t)((bytes + kCopyLine - 1) / kCopyLine);
  const int threads = cr_threads_for_bytes(num_threads, (double)bytes);
  if (threads > 1) {
    cr_parallel_for(threads, lines, copy_lines, &task);
  } else {
    memcpy(y, x, bytes);
  }
}

/* Float rows shorter than this are copied by one vectorised loop instead of
 * a memcpy call per row (the convolutions' wide-grid compaction: rows of 8
 * to 32 floats, where the calls cost more than the copies). */
enum { kShortFloatRow = 64 };

CR_TARGET_CLONES static void copy_short_float_rows(int64_t rows, int64_t width,
                                                   const float *restrict x, int64_t x_stride,
                                                   float *restrict y, int64_t y_stride) {
  for (int64_t r = 0; r < rows; ++r) cr_copy_floats(y + r * y_stride, x + r * x_stride, width);
}

void cr_copy_rows(int64_t rows, int64_t width, size_t elem_size, const void *x,
                  int64_t x_stride, void *y, int64_t y_stride) {
  if (width == 0) return;
  if (elem_size == sizeof(float) && width < kShortFloatRow) {
    copy_short_float_rows(rows, width, x, x_stride, y, y_stride);
    return;
  }
  const unsigned char *from = x;
  unsigned char *to = y;
  for (int64_t r = 0; r < rows; ++r) {
    memcpy(to + (size_t)(r * y_stride) * elem_size, from + (size_t)(r * x_stride) * elem_size,
           (size_t)width * elem_size);
  }
}

typedef struct cr_strided_copy {
  int ndim, axis; /* axis: the first of extent > 1, shared out */
  const int64_t *dims, *x_strides;
  size_t elem_size;
  int64_t y_step; /* elements of y per index along axis */
  const unsigned char *x;
  unsigned char *y;
} cr_strided_copy;

static void copy_strided_range(void *context, int64_t begin, int64_t end) {
  const cr_strided_copy *t = context;
  int64_t dims[CR_MAX_NDIM];
  for (int d = 0; d < t->ndim; ++d) dims[d] = t->dims[d];
  dims[t->axis] = end - begin;
  cr_copy_strided(t->ndim, dims, t->x_strides, t->elem_size,
                  t->x + (size_t)(begin * t->x_strides[t->axis]) * t->elem_size,
                  t->y + (size_t)(begin * t->y_step) * t->elem_size);
}

void cr_copy_strided_shared(int ndim, const int64_t *dims, const int64_t *x_strides,
                            size_t elem_size, const void *x, void *y, int num_threads) {
  int64_t count = 1;
  for (int d = 0; d < ndim; ++d) count *= dims[d];
  int axis = 0;
  while (axis < ndim - 1 && dims[axis] == 1) ++axis;
  const int threads =
      ndim > 0 && dims[axis] > 1
          ? cr_threads_for_bytes(num_threads, (double)count * (double)elem_size)
          : 1;
  if (threads <= 1) {
    cr_copy_strided(ndim, dims, x_strides, elem_size, x, y);
    return;
  }
  cr_strided_copy task = {ndim, axis, dims, x_strides, elem_size, count / dims[axis], x, y};
  cr_parallel_for(threads, dims[axis], copy_strided_range, &task);
}
