/*
 * The data kernels of kernels.h: dtype conversions (float16 included,
 * written out bit by bit rather than relying on a compiler's _Float16) and
 * loops that move elements of any dtype by their size.
 *
 * Elements are read and written through memcpy of their exact size, which
 * is how C lets bytes be viewed as another type without aliasing trouble;
 * compilers turn a fixed-size memcpy into a plain load or store. Floats are
 * never converted to integers without a range check: that conversion is
 * undefined when the value does not fit.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

size_t cr_dtype_size(cr_dtype dtype) {
  switch (dtype) {
    case CR_UINT8:
    case CR_INT8:
      return 1;
    case CR_FLOAT16:
      return 2;
    case CR_FLOAT32:
    case CR_INT32:
      return 4;
    case CR_FLOAT64:
    case CR_INT64:
      return 8;
  }
  return 0; /* unreachable for a valid cr_dtype */
}

int cr_dtype_is_integer(cr_dtype dtype) {
  return dtype == CR_UINT8 || dtype == CR_INT8 || dtype == CR_INT32 || dtype == CR_INT64;
}

/* ------------------------------------------------------------------------ */
/* float16                                                                   */
/* ------------------------------------------------------------------------ */

/* binary16: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits. */
enum { kHalfExponentMask = 0x7c00, kHalfFractionMask = 0x03ff, kHalfSign = 0x8000 };

float cr_half_to_float(uint16_t half) {
  const uint32_t sign = (uint32_t)(half & kHalfSign) << 16;
  const uint32_t exponent = (half & kHalfExponentMask) >> 10;
  const uint32_t fraction = half & kHalfFractionMask;
  float result;
  if (exponent == 0) {
    /* Zero or subnormal: fraction * 2^-24, exact in float. */
    result = ldexpf((float)fraction, -24);
    return sign ? -result : result;
  }
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (fraction << 13); /* infinity, or NaN keeping its payload */
  } else {
    bits = sign | ((exponent - 15 + 127) << 23) | (fraction << 13);
  }
  memcpy(&result, &bits, sizeof result);
  return result;
}

uint16_t cr_half_from_double(double value) {
  uint64_t bits;
  memcpy(&bits, &value, sizeof bits);
  const uint16_t sign = (uint16_t)((bits >> 48) & kHalfSign);
  const int biased = (int)((bits >> 52) & 0x7ff);
  const uint64_t fraction = bits & ((UINT64_C(1) << 52) - 1);
  if (biased == 0x7ff) {
    if (fraction == 0) return (uint16_t)(sign | kHalfExponentMask);
    /* NaN: keep the top payload bits, and at least one so it stays NaN. */
    uint16_t payload = (uint16_t)(fraction >> 42);
    return (uint16_t)(sign | kHalfExponentMask | (payload != 0 ? payload : 1));
  }
  const int exponent = biased - 1023;
  /* Below 2^-25 (half the smallest subnormal, 2^-24) everything rounds to
   * zero, double subnormals included; 2^-25 itself is a tie, to even 0. */
  if (biased == 0 || exponent < -25) return sign;
  if (exponent > 15) return (uint16_t)(sign | kHalfExponentMask);
  /* The 53-bit significand 1.f keeps 11 bits for a normal half, fewer for a
   * subnormal one (whose exponent is fixed at -14); the rest rounds to
   * nearest, ties to even. */
  const uint64_t significand = fraction | (UINT64_C(1) << 52);
  const int shift = exponent >= -14 ? 42 : 42 + (-14 - exponent); /* 42 .. 53 */
  uint64_t kept = significand >> shift;
  const uint64_t rest = significand & ((UINT64_C(1) << shift) - 1);
  const uint64_t halfway = UINT64_C(1) << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1))) kept += 1;
  if (exponent < -14) {
    /* A subnormal; kept == 1024 after rounding up is the smallest normal,
     * whose bits are exactly 0x0400. */
    return (uint16_t)(sign | kept);
  }
  /* kept is 1024 .. 2048: adding it without its leading bit to the
   * exponent field lets a rounding carry (2048) move into the exponent. */
  const uint32_t magnitude = ((uint32_t)(exponent + 15) << 10) + (uint32_t)(kept - 1024);
  if (magnitude >= kHalfExponentMask) return (uint16_t)(sign | kHalfExponentMask);
  return (uint16_t)(sign | magnitude);
}

void cr_widen_half(int64_t count, const uint16_t *x, float *y) {
  for (int64_t i = 0; i < count; ++i) y[i] = cr_half_to_float(x[i]);
}

void cr_narrow_to_half(int64_t count, const float *x, uint16_t *y) {
  for (int64_t i = 0; i < count; ++i) y[i] = cr_half_from_double(x[i]);
}

void cr_round_to_half(int64_t count, float *y) {
  for (int64_t i = 0; i < count; ++i) y[i] = cr_half_to_float(cr_half_from_double(y[i]));
}

/* ------------------------------------------------------------------------ */
/* Conversions                                                               */
/* ------------------------------------------------------------------------ */

/* value truncated toward zero as an integer of `bits` (32 or 64) bits, the
 * conversion x86-64's cvttsd2si does: a NaN or a value out of range gives
 * the type's minimum ("integer indefinite"). */
static int64_t truncate_like_x86(double value, int bits) {
  const double limit = bits == 32 ? 2147483648.0 : 9223372036854775808.0; /* 2^31, 2^63 */
  const double whole = trunc(value);
  if (!(whole >= -limit && whole < limit)) return bits == 32 ? INT32_MIN : INT64_MIN;
  return (int64_t)whole;
}

/* value reduced modulo 2^bits into the signed range of that width, without
 * the implementation-defined conversion of an out-of-range value to a
 * narrower signed type. */
static int64_t wrap_signed(int64_t value, int bits) {
  const uint64_t mask = (UINT64_C(1) << bits) - 1;
  const uint64_t low = (uint64_t)value & mask;
  const uint64_t sign_bit = UINT64_C(1) << (bits - 1);
  return low >= sign_bit ? -(int64_t)(mask - low) - 1 : (int64_t)low;
}

/* Stores an int64_t into an integer dtype, keeping the low bits. */
static void store_wrapped(cr_dtype to, void *y, int64_t index, int64_t value) {
  unsigned char *at = (unsigned char *)y + (size_t)index * cr_dtype_size(to);
  switch (to) {
    case CR_UINT8: {
      const uint8_t v = (uint8_t)((uint64_t)value & 0xff);
      memcpy(at, &v, sizeof v);
      return;
    }
    case CR_INT8: {
      const int8_t v = (int8_t)wrap_signed(value, 8);
      memcpy(at, &v, sizeof v);
      return;
    }
    case CR_INT32: {
      const int32_t v = (int32_t)wrap_signed(value, 32);
      memcpy(at, &v, sizeof v);
      return;
    }
    case CR_INT64:
      memcpy(at, &value, sizeof value);
      return;
    default:
      return; /* callers pass integer dtypes only */
  }
}

/* Stores a float or double value into a float dtype (one rounding). */
static void store_floating(cr_dtype to, void *y, int64_t index, double value) {
  unsigned char *at = (unsigned char *)y + (size_t)index * cr_dtype_size(to);
  if (to == CR_FLOAT32) {
    const float v = (float)value;
    memcpy(at, &v, sizeof v);
  } else if (to == CR_FLOAT64) {
    memcpy(at, &value, sizeof value);
  } else if (to == CR_FLOAT16) {
    const uint16_t v = cr_half_from_double(value);
    memcpy(at, &v, sizeof v);
  }
}

void cr_store_double(cr_dtype to, void *y, int64_t index, double value) {
  switch (to) {
    case CR_UINT8:
    case CR_INT8:
    case CR_INT32:
      /* numpy converts to the 8-bit types through int32_t. */
      store_wrapped(to, y, index, truncate_like_x86(value, 32));
      return;
    case CR_INT64:
      store_wrapped(to, y, index, truncate_like_x86(value, 64));
      return;
    default:
      store_floating(to, y, index, value);
      return;
  }
}

void cr_store_int(cr_dtype to, void *y, int64_t index, int64_t value) {
  if (cr_dtype_is_integer(to)) {
    store_wrapped(to, y, index, value);
  } else if (to == CR_FLOAT16) {
    store_floating(to, y, index, (float)value); /* numpy goes through float */
  } else if (to == CR_FLOAT32) {
    store_floating(to, y, index, (float)value); /* rounded once, from the integer */
  } else {
    store_floating(to, y, index, (double)value);
  }
}

double cr_load_double(cr_dtype from, const void *x, int64_t index) {
  const unsigned char *at = (const unsigned char *)x + (size_t)index * cr_dtype_size(from);
  switch (from) {
    case CR_FLOAT32: {
      float v;
      memcpy(&v, at, sizeof v);
      return v;
    }
    case CR_FLOAT64: {
      double v;
      memcpy(&v, at, sizeof v);
      return v;
    }
    case CR_FLOAT16: {
      uint16_t v;
      memcpy(&v, at, sizeof v);
      return cr_half_to_float(v);
    }
    default:
      return (double)cr_load_int(from, x, index);
  }
}

int64_t cr_load_int(cr_dtype from, const void *x, int64_t index) {
  const unsigned char *at = (const unsigned char *)x + (size_t)index * cr_dtype_size(from);
  switch (from) {
    case CR_UINT8: {
      uint8_t v;
      memcpy(&v, at, sizeof v);
      return v;
    }
    case CR_INT8: {
      int8_t v;
      memcpy(&v, at, sizeof v);
      return v;
    }
    case CR_INT32: {
      int32_t v;
      memcpy(&v, at, sizeof v);
      return v;
    }
    case CR_INT64: {
      int64_t v;
      memcpy(&v, at, sizeof v);
      return v;
    }
    default:
      return 0; /* callers pass integer dtypes only */
  }
}

int64_t cr_load_as_int64(cr_dtype from, const void *x, int64_t index) {
  if (cr_dtype_is_integer(from)) return cr_load_int(from, x, index);
  return truncate_like_x86(cr_load_double(from, x, index), 64);
}

void cr_cast(int64_t count, cr_dtype from, const void *x, cr_dtype to, void *y) {
  if (from == to) {
    if (count > 0) memcpy(y, x, (size_t)count * cr_dtype_size(to));
    return;
  }
  /* Integers convert from their exact value (int64 beyond 2^53 would not
   * survive a trip through double), floats from theirs. */
  if (cr_dtype_is_integer(from)) {
    for (int64_t i = 0; i < count; ++i) cr_store_int(to, y, i, cr_load_int(from, x, i));
  } else {
    for (int64_t i = 0; i < count; ++i) cr_store_double(to, y, i, cr_load_double(from, x, i));
  }
}

int cr_is_nonzero(cr_dtype dtype, const void *x, int64_t index) {
  if (cr_dtype_is_integer(dtype)) return cr_load_int(dtype, x, index) != 0;
  return cr_load_double(dtype, x, index) != 0.0; /* NaN != 0 holds */
}

/* ------------------------------------------------------------------------ */
/* Moving elements                                                           */
/* ------------------------------------------------------------------------ */

/* One element of elem_size bytes; the fixed sizes become plain moves. */
static void copy_element(unsigned char *y, const unsigned char *x, size_t elem_size) {
  switch (elem_size) {
    case 1:
      *y = *x;
      return;
    case 2:
      memcpy(y, x, 2);
      return;
    case 4:
      memcpy(y, x, 4);
      return;
    case 8:
      memcpy(y, x, 8);
      return;
    default:
      memcpy(y, x, elem_size);
      return;
  }
}

/* The input index output index o reads along an axis, or -1 for the fill
 * value. Pad maps are only ever given outputs within size + padding. */
static int64_t map_index(const cr_axis_map *map, int64_t o) {
  switch (map->kind) {
    case CR_MAP_STEP:
      return map->offset + o * map->factor;
    case CR_MAP_TILE:
      return o % map->size;
    case CR_MAP_REPEAT:
      return o / map->factor;
    case CR_MAP_PAD_CONSTANT:
    case CR_MAP_PAD_EDGE:
    case CR_MAP_PAD_REFLECT: {
      const int64_t i = o - map->offset;
      if (i >= 0 && i < map->size) return i;
      if (map->kind == CR_MAP_PAD_CONSTANT) return -1;
      if (map->kind == CR_MAP_PAD_EDGE) return i < 0 ? 0 : map->size - 1;
      return i < 0 ? -i : 2 * (map->size - 1) - i;
    }
  }
  return -1; /* unreachable for a valid cr_axis_map_kind */
}

void cr_gather(int ndim, const int64_t *dims, const cr_axis_map *maps,
               const int64_t *x_strides, const int64_t *y_strides, size_t elem_size,
               const void *x, const void *fill, void *y) {
  const int last = ndim - 1;
  int64_t rows = 1;
  for (int d = 0; d < ndim; ++d) {
    if (dims[d] == 0) return;
    if (d < last) rows *= dims[d];
  }
  const unsigned char *from = x;
  unsigned char *to = y;
  /* index[] runs over the outer axes like an odometer (the last turning
   * fastest); each row's offsets are worked out afresh from it. */
  int64_t index[CR_MAX_NDIM] = {0};
  for (int64_t r = 0; r < rows; ++r) {
    int64_t x_row = 0, y_row = 0;
    int filled = 0; /* the whole row lies in constant padding */
    for (int d = 0; d < last; ++d) {
      const int64_t source = map_index(&maps[d], index[d]);
      if (source < 0) filled = 1;
      x_row += source * x_strides[d];
      y_row += index[d] * y_strides[d];
    }
    for (int64_t o = 0; o < dims[last]; ++o) {
      const int64_t source = filled ? -1 : map_index(&maps[last], o);
      unsigned char *at = to + (size_t)(y_row + o * y_strides[last]) * elem_size;
      if (source < 0) {
        copy_element(at, fill, elem_size);
      } else {
        copy_element(at, from + (size_t)(x_row + source * x_strides[last]) * elem_size,
                     elem_size);
      }
    }
    for (int d = last - 1; d >= 0; --d) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
}

void cr_copy_strided(int ndim, const int64_t *dims, const int64_t *x_strides, size_t elem_size,
                     const void *x, void *y) {
  /* Row by row along the last axis: one memcpy per row when x's rows are
   * contiguous (the usual transposes keep the last axis), else a strided
   * loop; the outer axes are walked with an odometer. */
  if (ndim <= 0) {
    memcpy(y, x, elem_size);
    return;
  }
  const int64_t inner = dims[ndim - 1], inner_stride = x_strides[ndim - 1];
  int64_t outer = 1;
  for (int d = 0; d < ndim - 1; ++d) outer *= dims[d];
  if (outer == 0 || inner == 0) return;
  int64_t index[CR_MAX_NDIM] = {0};
  int64_t offset = 0; /* in elements of x */
  const unsigned char *from = x;
  unsigned char *to = y;
  const size_t row_bytes = (size_t)inner * elem_size;
  for (int64_t o = 0; o < outer; ++o, to += row_bytes) {
    const unsigned char *src = from + offset * (int64_t)elem_size;
    if (inner_stride == 1) {
      memcpy(to, src, row_bytes);
    } else if (elem_size == 4) {
      uint32_t *dst = (uint32_t *)(void *)to;
      for (int64_t i = 0; i < inner; ++i) {
        memcpy(&dst[i], src + i * inner_stride * 4, 4);
      }
    } else {
      for (int64_t i = 0; i < inner; ++i) {
        copy_element(to + (size_t)i * elem_size, src + i * inner_stride * (int64_t)elem_size,
                     elem_size);
      }
    }
    for (int d = ndim - 2; d >= 0; --d) {
      offset += x_strides[d];
      if (++index[d] < dims[d]) break;
      offset -= x_strides[d] * dims[d];
      index[d] = 0;
    }
  }
}

void cr_fill_elements(int64_t count, size_t elem_size, const void *value, void *y) {
  unsigned char *to = y;
  for (int64_t i = 0; i < count; ++i) copy_element(to + (size_t)i * elem_size, value, elem_size);
}

/* ------------------------------------------------------------------------ */
/* Indexing                                                                  */
/* ------------------------------------------------------------------------ */

/* The position index selects along an axis of size entries, or -1 when mode
 * refuses it. */
static int64_t take_position(cr_take_mode mode, int64_t index, int64_t size) {
  switch (mode) {
    case CR_TAKE_CLIP:
      return index < 0 ? 0 : index >= size ? size - 1 : index;
    case CR_TAKE_WRAP: {
      const int64_t r = index % size; /* in (-size, size), no overflow */
      return r < 0 ? r + size : r;
    }
    case CR_TAKE_RAISE:
      if (index < -size || index >= size) return -1;
      return index < 0 ? index + size : index;
  }
  return -1; /* unreachable for a valid cr_take_mode */
}

int cr_take(cr_take_mode mode, int64_t outer, int64_t size, int64_t inner, size_t elem_size,
            const void *x, int64_t count, cr_dtype index_dtype, const void *indices, void *y) {
  /* Every index is checked before anything is written. */
  for (int64_t j = 0; j < count; ++j) {
    if (take_position(mode, cr_load_as_int64(index_dtype, indices, j), size) < 0) return -1;
  }
  const unsigned char *from = x;
  unsigned char *to = y;
  const size_t block = (size_t)inner * elem_size;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      const int64_t p = take_position(mode, cr_load_as_int64(index_dtype, indices, j), size);
      if (block > 0) {
        memcpy(to + (size_t)(o * count + j) * block, from + (size_t)(o * size + p) * block, block);
      }
    }
  }
  return 0;
}

void cr_where(int64_t rows, int64_t inner, cr_dtype cond_dtype, const void *cond,
              int64_t cond_row_step, int64_t cond_step, size_t elem_size, const void *x,
              const void *y, void *out) {
  const unsigned char *a = x, *b = y;
  unsigned char *to = out;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t at = r * inner + i;
      const int pick_x = cr_is_nonzero(cond_dtype, cond, r * cond_row_step + i * cond_step);
      copy_element(to + (size_t)at * elem_size, (pick_x ? a : b) + (size_t)at * elem_size,
                   elem_size);
    }
  }
}

/* The weight row an index selects: truncated toward zero and clipped, the
 * comparisons done in double before any conversion, since converting a
 * float outside int64_t's range (or NaN) to an integer is undefined. */
static int64_t embedding_row(cr_dtype dtype, const void *indices, int64_t i, int64_t input_dim) {
  if (cr_dtype_is_integer(dtype)) {
    const int64_t value = cr_load_int(dtype, indices, i);
    return value < 0 ? 0 : value >= input_dim ? input_dim - 1 : value;
  }
  const double value = trunc(cr_load_double(dtype, indices, i));
  if (!(value > 0.0)) return 0; /* negative, zero or NaN */
  if (value >= (double)(input_dim - 1)) return input_dim - 1;
  return (int64_t)value;
}

void cr_embedding(int64_t count, cr_dtype index_dtype, const void *indices, int64_t input_dim,
                  int64_t output_dim, size_t elem_size, const void *weight, void *out) {
  const size_t row_bytes = (size_t)output_dim * elem_size;
  const unsigned char *from = weight;
  unsigned char *to = out;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = embedding_row(index_dtype, indices, i, input_dim);
    memcpy(to + (size_t)i * row_bytes, from + (size_t)row * row_bytes, row_bytes);
  }
}
