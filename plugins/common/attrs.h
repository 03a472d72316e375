/*
 * Parsers for MXNet operator attribute strings, as they appear in real
 * MXNet "-symbol.json" files and in accGetExecutor() attributes: "3",
 * "0.001", "True", "(3, 3)", "[1,3,224,224]", "(2,)", "None".
 *
 * Every function returns 0 on success and -1 when the text does not match
 * the expected form exactly (leading/trailing whitespace allowed, nothing
 * else); on failure the outputs are unspecified. None of them reads beyond
 * the terminating NUL or writes beyond the capacities given.
 */
#ifndef ACC_COMMON_ATTRS_H_
#define ACC_COMMON_ATTRS_H_

#include <stdint.h>

/* Decimal integer with optional sign, within int64_t. */
int acc_attr_int(const char *text, int64_t *out);

/* Decimal floating-point number ("1e-05", "-0.5", "3", "inf", "nan"),
 * independent of the C locale. */
int acc_attr_float(const char *text, double *out);

/* "True"/"true"/"1" -> 1, "False"/"false"/"0" -> 0. */
int acc_attr_bool(const char *text, int *out);

/* A tuple of integers: "(3, 3)", "[3,3]", "(3,)", "()", "[]", or a bare
 * integer "3" (a tuple of one). Stores up to capacity values into values and
 * the count into *count; more than capacity values is an error. Elements may
 * be negative. */
int acc_attr_int_tuple(const char *text, int64_t *values, int capacity,
                       int *count);

/* A list of integer tuples, as in the "__out_shapes__" annotation:
 * "[[1,3,224,224],[10]]" or "[(1, 3), ()]". Stores up to max_tuples tuples
 * of up to max_len values each: tuple i in values[i * max_len ...] with its
 * length in lengths[i]; the tuple count into *count. */
int acc_attr_int_tuple_list(const char *text, int64_t *values, int *lengths,
                            int max_tuples, int max_len, int *count);

/* 1 if text is "None" (surrounding whitespace allowed), else 0. */
int acc_attr_is_none(const char *text);

/* 1 if text equals word exactly, else 0 (a NULL text is never equal). */
int acc_attr_equals(const char *text, const char *word);

#endif /* ACC_COMMON_ATTRS_H_ */
