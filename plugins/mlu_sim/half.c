#include "half.h"

#include <math.h>
#include <string.h>

float mlu_half_to_float(uint16_t bits) {
  uint32_t sign = (uint32_t)(bits >> 15) << 31;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    /* Zero or subnormal: mantissa * 2^-24, exact in fp32. */
    float magnitude = ldexpf((float)mantissa, -24);
    return sign ? -magnitude : magnitude;
  }
  uint32_t out;
  if (exponent == 31) {
    out = sign | 0x7f800000u | (mantissa << 13); /* infinity or NaN (payload kept) */
  } else {
    out = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float value;
  memcpy(&value, &out, sizeof value);
  return value;
}

/* Rounds value >> shift to nearest, ties to even (shift in 1 .. 31). */
static uint32_t round_shift(uint32_t value, unsigned shift) {
  uint32_t kept = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u))) kept += 1;
  return kept;
}

uint16_t mlu_float_to_half(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) { /* infinity, or NaN kept quiet with its top payload bits */
    uint16_t nan = magnitude > 0x7f800000u ? (uint16_t)(0x200u | ((magnitude >> 13) & 0x3ffu)) : 0;
    return (uint16_t)(sign | 0x7c00u | nan);
  }
  if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
  uint32_t exponent = magnitude >> 23;
  if (exponent < 113) { /* below 2^-14: a subnormal half (or zero) in units of 2^-24 */
    unsigned shift = 126u - exponent;
    if (shift > 24) return sign; /* below 2^-25: rounds to zero */
    uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    return (uint16_t)(sign | round_shift(mantissa, shift));
  }
  /* Normal: rebias the exponent; a carry out of the mantissa correctly
   * bumps the exponent (65504 + rounding cannot reach infinity here). */
  uint32_t half = ((exponent - 112) << 10) | ((magnitude & 0x7fffffu) >> 13);
  uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half += 1;
  return (uint16_t)(sign | half);
}
