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

/* ---- bulk conversions ------------------------------------------------------------- */

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define MLU_HALF_F16C 1
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>

/* Whether this CPU converts with F16C: CPUID leaf 1, ECX bit 29 (clang's
 * __builtin_cpu_supports has no "f16c"), and the OS keeps AVX state
 * (__builtin_cpu_supports("avx") checks both). Worked out once; the
 * cache is an atomic, so two threads racing on the first call both store
 * the same answer. */
static int has_f16c(void) {
  static atomic_int known; /* 0: not yet, 1: no, 2: yes */
  int state = atomic_load_explicit(&known, memory_order_relaxed);
  if (state == 0) {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    int f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
    state = f16c && __builtin_cpu_supports("avx") ? 2 : 1;
    atomic_store_explicit(&known, state, memory_order_relaxed);
  }
  return state == 2;
}

/* Eight values at a time with the F16C instructions, which convert exactly
 * as the scalar functions (round to nearest, ties to even; subnormals
 * kept) for every finite value; a block holding an infinity or NaN takes
 * the scalar path, which keeps NaN payloads as they are. */
__attribute__((target("avx,f16c"))) static uint64_t widen_f16c(const unsigned char *src,
                                                               float *dst, uint64_t n) {
  uint64_t i = 0;
  const __m128i exponent = _mm_set1_epi16(0x7c00);
  for (; i + 8 <= n; i += 8) {
    __m128i bits = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i));
    __m128i special = _mm_cmpeq_epi16(_mm_and_si128(bits, exponent), exponent);
    if (_mm_movemask_epi8(special) != 0) break;
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(bits));
  }
  return i;
}

__attribute__((target("avx,f16c"))) static uint64_t narrow_f16c(const float *src,
                                                                unsigned char *dst, uint64_t n) {
  uint64_t i = 0;
  const __m256 limit = _mm256_set1_ps(3.4028234663852886e38f);
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(src + i);
    /* |v| <= FLT_MAX is false for infinities and NaN */
    __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    if (_mm256_movemask_ps(_mm256_cmp_ps(magnitude, limit, _CMP_LE_OQ)) != 0xff) break;
    __m128i bits = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128((__m128i *)(void *)(dst + 2 * i), bits);
  }
  return i;
}
#else
#define MLU_HALF_F16C 0
#endif

void mlu_half_to_float_n(const unsigned char *src, float *dst, uint64_t n) {
  uint64_t i = 0;
#if MLU_HALF_F16C
  if (has_f16c()) {
    while (i + 8 <= n) {
      i += widen_f16c(src + 2 * i, dst + i, n - i);
      /* a block with a special value: its 8 values one by one */
      for (uint64_t end = i + 8 <= n ? i + 8 : i; i < end; ++i) {
        uint16_t bits;
        memcpy(&bits, src + 2 * i, sizeof bits);
        dst[i] = mlu_half_to_float(bits);
      }
    }
  }
#endif
  for (; i < n; ++i) {
    uint16_t bits;
    memcpy(&bits, src + 2 * i, sizeof bits);
    dst[i] = mlu_half_to_float(bits);
  }
}

void mlu_float_to_half_n(const float *src, unsigned char *dst, uint64_t n) {
  uint64_t i = 0;
#if MLU_HALF_F16C
  if (has_f16c()) {
    while (i + 8 <= n) {
      i += narrow_f16c(src + i, dst + 2 * i, n - i);
      for (uint64_t end = i + 8 <= n ? i + 8 : i; i < end; ++i) {
        uint16_t bits = mlu_float_to_half(src[i]);
        memcpy(dst + 2 * i, &bits, sizeof bits);
      }
    }
  }
#endif
  for (; i < n; ++i) {
    uint16_t bits = mlu_float_to_half(src[i]);
    memcpy(dst + 2 * i, &bits, sizeof bits);
  }
}
