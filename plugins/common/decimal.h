/*
 * Locale-independent decimal-to-double conversion, shared by the JSON and
 * attribute parsers.
 *
 * The C library's strtod honours LC_NUMERIC through the decimal point only,
 * and the texts we parse always use '.', so parsers feed digits one by one
 * into an acc_decimal (tracking the decimal point themselves) and convert the
 * result, which is handed to strtod as "<digits>e<exponent>" with no decimal
 * point at all.
 *
 * Rounding changes direction only at the midpoints between adjacent doubles,
 * and each midpoint is a decimal of at most 767 significant digits. Keeping
 * ACC_DECIMAL_DIGITS = 800 digits, plus a "sticky" 1 when any dropped digit
 * is nonzero, therefore leaves the value on the same side of every midpoint:
 * the result is rounded exactly as for the full text, with a fixed-size
 * buffer however long the number is.
 */
#ifndef ACC_COMMON_DECIMAL_H_
#define ACC_COMMON_DECIMAL_H_

#include <stddef.h>

#define ACC_DECIMAL_DIGITS 800

typedef struct acc_decimal {
  char digits[ACC_DECIMAL_DIGITS + 2]; /* significant digits, plus a sticky digit */
  size_t count;
  int dropped_nonzero;
  long long exponent; /* value = digits * 10^exponent */
} acc_decimal;

/* An empty decimal (value 0). */
void acc_decimal_init(acc_decimal *d);

/* Appends one digit ('0'..'9') read before (in_fraction 0) or after
 * (in_fraction 1) the decimal point. */
void acc_decimal_add_digit(acc_decimal *d, char digit, int in_fraction);

/* Multiplies by 10^power (from an exponent part), saturating. */
void acc_decimal_scale(acc_decimal *d, long long power);

/* The nearest double to the value, negated when negative; +-infinity when
 * out of range. d is consumed (its digits may be extended). */
double acc_decimal_to_double(acc_decimal *d, int negative);

/* Adds the decimal exponent digit to *value (value * 10 + digit), saturating
 * at LLONG_MAX: for reading an exponent part of any length. */
long long acc_decimal_exponent_step(long long value, char digit);

#endif /* ACC_COMMON_DECIMAL_H_ */
