/*
 * MXNet attribute string parsers; see attrs.h for the accepted forms.
 *
 * The C library's character classification and number conversion follow the
 * current locale, and attribute strings do not, so this file classifies
 * characters itself and converts numbers through decimal.h.
 */
#include "attrs.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decimal.h"

/* ------------------------------------------------------------------------
 * Characters
 * ---------------------------------------------------------------------- */

static int is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

static const char *skip_spaces(const char *s) {
  while (is_space(*s)) s++;
  return s;
}

static int only_spaces_left(const char *s) { return *skip_spaces(s) == '\0'; }

/* 1 if text is word with optional surrounding whitespace. */
static int trimmed_equals(const char *text, const char *word) {
  const char *s = skip_spaces(text);
  size_t length = strlen(word);
  return strncmp(s, word, length) == 0 && only_spaces_left(s + length);
}

/* If *s starts with word (ASCII, any case), advances *s past it. */
static int skip_word_ignoring_case(const char **s, const char *word) {
  size_t i = 0;
  for (; word[i] != '\0'; i++) {
    if (ascii_lower((*s)[i]) != word[i]) return 0;
  }
  *s += i;
  return 1;
}

/* ------------------------------------------------------------------------
 * Integers
 * ---------------------------------------------------------------------- */

/* Reads an optionally signed decimal integer at *s and advances *s past it. */
static int read_int64(const char **s, int64_t *out) {
  const char *p = *s;
  int negative = 0;
  if (*p == '+' || *p == '-') negative = *p++ == '-';
  if (!is_digit(*p)) return -1;
  /* Accumulate downwards: the negative range also holds INT64_MIN. Integer
   * division truncates towards zero, so the bound below is the ceiling. */
  int64_t value = 0;
  for (; is_digit(*p); p++) {
    int digit = *p - '0';
    if (value < (INT64_MIN + digit) / 10) return -1;
    value = value * 10 - digit;
  }
  if (!negative) {
    if (value == INT64_MIN) return -1;
    value = -value;
  }
  *out = value;
  *s = p;
  return 0;
}

int acc_attr_int(const char *text, int64_t *out) {
  if (text == NULL || out == NULL) return -1;
  const char *s = skip_spaces(text);
  if (read_int64(&s, out) != 0) return -1;
  return only_spaces_left(s) ? 0 : -1;
}

/* ------------------------------------------------------------------------
 * Floating point
 * ---------------------------------------------------------------------- */

static size_t read_digits(const char **s, acc_decimal *d, int in_fraction) {
  size_t count = 0;
  for (; is_digit(**s); (*s)++, count++) acc_decimal_add_digit(d, **s, in_fraction);
  return count;
}

static int read_exponent(const char **s, acc_decimal *d) {
  const char *p = *s + 1; /* past 'e' or 'E' */
  int negative = 0;
  if (*p == '+' || *p == '-') negative = *p++ == '-';
  if (!is_digit(*p)) return -1;
  long long value = 0;
  for (; is_digit(*p); p++) value = acc_decimal_exponent_step(value, *p);
  acc_decimal_scale(d, negative ? -value : value);
  *s = p;
  return 0;
}

/* Python's float literal without sign: "3", "3.", ".5", "1e-05", "2.5E+3". */
static int read_unsigned_decimal(const char **s, double *out) {
  acc_decimal d;
  acc_decimal_init(&d);
  size_t digits = read_digits(s, &d, 0);
  if (**s == '.') {
    (*s)++;
    digits += read_digits(s, &d, 1);
  }
  if (digits == 0) return -1;
  if ((**s == 'e' || **s == 'E') && read_exponent(s, &d) != 0) return -1;
  *out = acc_decimal_to_double(&d, 0);
  return 0;
}

/* "inf", "infinity" and "nan" in any case, as Python's float() accepts. */
static int read_special(const char **s, double *out) {
  if (skip_word_ignoring_case(s, "infinity") || skip_word_ignoring_case(s, "inf")) {
    *out = HUGE_VAL;
    return 0;
  }
  if (skip_word_ignoring_case(s, "nan")) {
    *out = NAN;
    return 0;
  }
  return -1;
}

int acc_attr_float(const char *text, double *out) {
  if (text == NULL || out == NULL) return -1;
  const char *s = skip_spaces(text);
  int negative = 0;
  if (*s == '+' || *s == '-') negative = *s++ == '-';
  double value;
  if (read_special(&s, &value) != 0 && read_unsigned_decimal(&s, &value) != 0) return -1;
  if (!only_spaces_left(s)) return -1;
  *out = negative ? -value : value;
  return 0;
}

/* ------------------------------------------------------------------------
 * Booleans and words
 * ---------------------------------------------------------------------- */

int acc_attr_bool(const char *text, int *out) {
  if (text == NULL || out == NULL) return -1;
  if (trimmed_equals(text, "True") || trimmed_equals(text, "true") ||
      trimmed_equals(text, "1")) {
    *out = 1;
    return 0;
  }
  if (trimmed_equals(text, "False") || trimmed_equals(text, "false") ||
      trimmed_equals(text, "0")) {
    *out = 0;
    return 0;
  }
  return -1;
}

int acc_attr_is_none(const char *text) {
  return text != NULL && trimmed_equals(text, "None");
}

int acc_attr_equals(const char *text, const char *word) {
  return text != NULL && word != NULL && strcmp(text, word) == 0;
}

/* ------------------------------------------------------------------------
 * Tuples
 * ---------------------------------------------------------------------- */

/* Reads one element of a sequence at *s, advancing *s past it. */
typedef int (*item_reader)(const char **s, void *context);

/* Reads "(item, item, ...)" or "[item, ...]" at *s, with an optional
 * trailing comma as Python prints one-element tuples ("(3,)"). */
static int read_sequence(const char **s, item_reader read_item, void *context) {
  const char *p = *s;
  char close = *p == '(' ? ')' : *p == '[' ? ']' : '\0';
  if (close == '\0') return -1;
  p = skip_spaces(p + 1);
  while (*p != close) {
    if (read_item(&p, context) != 0) return -1;
    p = skip_spaces(p);
    if (*p == ',') {
      p = skip_spaces(p + 1);
    } else if (*p != close) {
      return -1;
    }
  }
  *s = p + 1;
  return 0;
}

typedef struct int_sink {
  int64_t *values;
  int capacity;
  int count;
} int_sink;

static int read_tuple_item(const char **s, void *context) {
  int_sink *sink = context;
  int64_t value;
  if (read_int64(s, &value) != 0 || sink->count >= sink->capacity) return -1;
  sink->values[sink->count++] = value;
  return 0;
}

int acc_attr_int_tuple(const char *text, int64_t *values, int capacity, int *count) {
  if (text == NULL || count == NULL || capacity < 0) return -1;
  if (values == NULL && capacity > 0) return -1;
  int_sink sink = {values, capacity, 0};
  const char *s = skip_spaces(text);
  int status = *s == '(' || *s == '[' ? read_sequence(&s, read_tuple_item, &sink)
                                      : read_tuple_item(&s, &sink);
  if (status != 0 || !only_spaces_left(s)) return -1;
  *count = sink.count;
  return 0;
}

typedef struct tuple_sink {
  int64_t *values;
  int *lengths;
  int max_tuples;
  int max_len;
  int count;
} tuple_sink;

static int read_list_item(const char **s, void *context) {
  tuple_sink *sink = context;
  if (sink->count >= sink->max_tuples) return -1;
  /* Only form the address of a tuple's slot when it has room: with
   * max_len == 0, values may be NULL and must not be offset. */
  int_sink tuple = {NULL, sink->max_len, 0};
  if (sink->max_len > 0) {
    tuple.values = sink->values + (size_t)sink->count * (size_t)sink->max_len;
  }
  if (read_sequence(s, read_tuple_item, &tuple) != 0) return -1;
  sink->lengths[sink->count++] = tuple.count;
  return 0;
}

int acc_attr_int_tuple_list(const char *text, int64_t *values, int *lengths,
                            int max_tuples, int max_len, int *count) {
  if (text == NULL || count == NULL || max_tuples < 0 || max_len < 0) return -1;
  if (max_tuples > 0 && (lengths == NULL || (values == NULL && max_len > 0))) return -1;
  /* The caller's array holds max_tuples * max_len values; refuse sizes whose
   * product would not even be addressable. */
  if (max_len > 0 && (size_t)max_tuples > SIZE_MAX / (size_t)max_len) return -1;
  tuple_sink sink = {values, lengths, max_tuples, max_len, 0};
  const char *s = skip_spaces(text);
  if (read_sequence(&s, read_list_item, &sink) != 0 || !only_spaces_left(s)) return -1;
  *count = sink.count;
  return 0;
}
