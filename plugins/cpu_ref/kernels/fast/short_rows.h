/*
 * Copies and zero fills of short runs of floats, inline.
 *
 * A plain element loop is what the compiler turns into a call of memcpy or
 * memset (GCC's loop distribution does so even at -O2), and for the runs a
 * convolution pads and compacts (a row of 1 to 64 floats, thousands of
 * them per layer) the call costs more than the copy: compacting a
 * 16 x 32 x 32 output spent 6 us in 512 calls of memmove, 15% of the layer.
 * These copy through GCC/Clang vector types (one AVX-512 move per 16
 * floats in an avx512f clone, two or four narrower moves otherwise), and
 * each loop passes its index through an empty asm statement, which hides
 * from the compiler that the loop is a plain copy or fill (loop distribution
 * turns even loops of vector moves into calls) and costs nothing itself.
 */
#ifndef CPU_REF_SHORT_ROWS_H_
#define CPU_REF_SHORT_ROWS_H_

#include <stdint.h>

#if defined(__GNUC__) /* GCC, and Clang, which defines it too */
typedef float cr_f16 __attribute__((vector_size(64), aligned(4), may_alias));
typedef float cr_f4 __attribute__((vector_size(16), aligned(4), may_alias));
#define CR_SHORT_ROWS_VECTORS 1
#define CR_OPAQUE_INDEX(j) __asm__("" : "+r"(j))
#else
#define CR_SHORT_ROWS_VECTORS 0
#endif

/* y[0, count) = x[0, count); the ranges do not overlap. */
static inline void cr_copy_floats(float *restrict y, const float *restrict x, int64_t count) {
  int64_t j = 0;
#if CR_SHORT_ROWS_VECTORS
  for (; j + 16 <= count; j += 16) {
    *(cr_f16 *)(y + j) = *(const cr_f16 *)(x + j);
    CR_OPAQUE_INDEX(j);
  }
  for (; j + 4 <= count; j += 4) {
    *(cr_f4 *)(y + j) = *(const cr_f4 *)(x + j);
    CR_OPAQUE_INDEX(j);
  }
  /* At most 3 left: written out, so that no loop is left to become a call. */
  if (j < count) y[j] = x[j];
  if (j + 1 < count) y[j + 1] = x[j + 1];
  if (j + 2 < count) y[j + 2] = x[j + 2];
#else
  for (; j < count; ++j) y[j] = x[j];
#endif
}

/* y[0, count) = 0. */
static inline void cr_zero_floats(float *restrict y, int64_t count) {
  int64_t j = 0;
#if CR_SHORT_ROWS_VECTORS
  const cr_f16 zero16 = {0};
  const cr_f4 zero4 = {0};
  for (; j + 16 <= count; j += 16) {
    *(cr_f16 *)(y + j) = zero16;
    CR_OPAQUE_INDEX(j);
  }
  for (; j + 4 <= count; j += 4) {
    *(cr_f4 *)(y + j) = zero4;
    CR_OPAQUE_INDEX(j);
  }
  if (j < count) y[j] = 0.0f;
  if (j + 1 < count) y[j + 1] = 0.0f;
  if (j + 2 < count) y[j + 2] = 0.0f;
#else
  for (; j < count; ++j) y[j] = 0.0f;
#endif
}

#endif /* CPU_REF_SHORT_ROWS_H_ */
