#include "decimal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* Beyond this, every double is 0 or infinite; clamping keeps the text short. */
enum { kExponentClamp = 100000 };

static long long saturating_add(long long a, long long b) {
  if (b > 0 && a > LLONG_MAX - b) return LLONG_MAX;
  if (b < 0 && a < LLONG_MIN - b) return LLONG_MIN;
  return a + b;
}

void acc_decimal_init(acc_decimal *d) {
  d->count = 0;
  d->dropped_nonzero = 0;
  d->exponent = 0;
}

void acc_decimal_add_digit(acc_decimal *d, char digit, int in_fraction) {
  if (d->count == 0 && digit == '0') {
    if (in_fraction) d->exponent = saturating_add(d->exponent, -1);
    return;
  }
  if (d->count < ACC_DECIMAL_DIGITS) {
    d->digits[d->count++] = digit;
    if (in_fraction) d->exponent = saturating_add(d->exponent, -1);
    return;
  }
  if (digit != '0') d->dropped_nonzero = 1;
  if (!in_fraction) d->exponent = saturating_add(d->exponent, 1);
}

void acc_decimal_scale(acc_decimal *d, long long power) {
  d->exponent = saturating_add(d->exponent, power);
}

long long acc_decimal_exponent_step(long long value, char digit) {
  int next = digit - '0';
  return value > (LLONG_MAX - next) / 10 ? LLONG_MAX : value * 10 + next;
}

double acc_decimal_to_double(acc_decimal *d, int negative) {
  if (d->count == 0) return negative ? -0.0 : 0.0;
  if (d->dropped_nonzero) {
    d->digits[d->count++] = '1';
    d->exponent = saturating_add(d->exponent, -1);
  }
  long long exponent = d->exponent;
  if (exponent > kExponentClamp) exponent = kExponentClamp;
  if (exponent < -kExponentClamp) exponent = -kExponentClamp;
  char buffer[ACC_DECIMAL_DIGITS + 32];
  snprintf(buffer, sizeof buffer, "%s%.*se%lld", negative ? "-" : "", (int)d->count, d->digits,
           exponent);
  return strtod(buffer, NULL);
}
