/*
 * A small, strict JSON parser (RFC 8259) for the graphs the host passes to
 * plugins. It builds a read-only tree owned by one acc_json_doc.
 *
 * Limits, all checked: nesting depth <= ACC_JSON_MAX_DEPTH; input length is
 * given explicitly and need not be NUL-terminated; strings are decoded to
 * UTF-8 (escapes including \uHHHH surrogate pairs) and NUL-terminated, and a
 * string containing U+0000 is rejected; duplicate object keys are rejected.
 * Numbers are parsed independently of the C locale.
 */
#ifndef ACC_COMMON_JSON_H_
#define ACC_COMMON_JSON_H_

#include <stddef.h>

#define ACC_JSON_MAX_DEPTH 256

typedef enum acc_json_type {
  ACC_JSON_NULL,
  ACC_JSON_BOOL,
  ACC_JSON_NUMBER,
  ACC_JSON_STRING,
  ACC_JSON_ARRAY,
  ACC_JSON_OBJECT
} acc_json_type;

typedef struct acc_json_value acc_json_value;
typedef struct acc_json_member acc_json_member;

struct acc_json_value {
  acc_json_type type;
  union {
    int boolean;                                          /* ACC_JSON_BOOL */
    double number;                                        /* ACC_JSON_NUMBER */
    struct { const char *chars; size_t length; } string;  /* ACC_JSON_STRING */
    struct { const acc_json_value *items; size_t count; } array;
    struct { const acc_json_member *members; size_t count; } object;
  } as;
};

struct acc_json_member {
  const char *key; /* NUL-terminated UTF-8 */
  size_t key_length;
  acc_json_value value;
};

typedef struct acc_json_doc acc_json_doc;

/* Parses text[0 .. length). On success returns 0 and stores the document in
 * *doc (owned by the caller, free with acc_json_free). On failure returns -1,
 * leaves *doc NULL and writes a message naming the byte offset into
 * error (error_size bytes, always NUL-terminated when error_size > 0).
 * Memory exhaustion is reported as an error, never by crashing. */
int acc_json_parse(const char *text, size_t length, acc_json_doc **doc,
                   char *error, size_t error_size);

void acc_json_free(acc_json_doc *doc);

/* The root value; valid until acc_json_free. */
const acc_json_value *acc_json_root(const acc_json_doc *doc);

/* Member of an object by key, or NULL if value is not an object or has no
 * such key. */
const acc_json_value *acc_json_get(const acc_json_value *object, const char *key);

/* Converts a number holding an exact integer in [min, max] into *out;
 * returns 0 on success, -1 if value is not such a number. */
int acc_json_integer(const acc_json_value *value, long long min, long long max,
                     long long *out);

#endif /* ACC_COMMON_JSON_H_ */
