/*
 * Tests for plugins/common: json.c, attrs.c and graph.c.
 *
 * Self-contained: no framework. Prints every failed check and a final
 * "N passed, N failed" line; exits non-zero when anything failed.
 *
 * Built with -DACC_TEST_WRAP_MALLOC and
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc, the allocations made by
 * the modules under test can be made to fail one by one, which checks that
 * every allocation failure is reported and leaks nothing. Without those
 * flags the allocation-failure tests are skipped.
 */
#include <float.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "graph.h"
#include "json.h"

/* ------------------------------------------------------------------------
 * Minimal test harness
 * ---------------------------------------------------------------------- */

static int g_passed;
static int g_failed;

#define CHECK(cond) check((cond) ? 1 : 0, __FILE__, __LINE__, #cond, "")
#define CHECK_MSG(cond, msg) check((cond) ? 1 : 0, __FILE__, __LINE__, #cond, (msg))

static void check(int ok, const char *file, int line, const char *expr, const char *msg) {
  if (ok) {
    g_passed++;
    return;
  }
  g_failed++;
  printf("FAIL %s:%d: %s %s\n", file, line, expr, msg);
}

/* ------------------------------------------------------------------------
 * Allocation failure injection
 * ---------------------------------------------------------------------- */

#ifdef ACC_TEST_WRAP_MALLOC
void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *pointer, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *pointer, size_t size);

/* -1: never fail; otherwise the number of allocations still allowed. */
static long g_allocations_left = -1;
static long g_allocations_failed;

static int allocation_should_fail(void) {
  if (g_allocations_left < 0) return 0;
  if (g_allocations_left == 0) {
    g_allocations_failed++;
    return 1;
  }
  g_allocations_left--;
  return 0;
}

void *__wrap_malloc(size_t size) {
  return allocation_should_fail() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t count, size_t size) {
  return allocation_should_fail() ? NULL : __real_calloc(count, size);
}

void *__wrap_realloc(void *pointer, size_t size) {
  return allocation_should_fail() ? NULL : __real_realloc(pointer, size);
}
#endif

/* ------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------- */

/* Test JSON is written with ' for " to keep the literals readable. */
static char *quoted(const char *text) {
  size_t length = strlen(text);
  char *copy = malloc(length + 1);
  if (copy == NULL) abort();
  for (size_t i = 0; i <= length; i++) copy[i] = text[i] == '\'' ? '"' : text[i];
  return copy;
}

/* Parses a copy of text[0 .. length) held in a buffer of exactly that size,
 * so that AddressSanitizer catches any read past the explicit length. */
static int parse_exact(const char *text, size_t length, acc_json_doc **doc, char *error,
                       size_t error_size) {
  char *copy = malloc(length == 0 ? 1 : length);
  if (copy == NULL) abort();
  if (length > 0) memcpy(copy, text, length);
  int status = acc_json_parse(copy, length, doc, error, error_size);
  free(copy);
  return status;
}

/* 1 if text (NUL-terminated, ' for ") parses. */
static int json_ok(const char *text) {
  char *json = quoted(text);
  acc_json_doc *doc = NULL;
  char error[256];
  int status = parse_exact(json, strlen(json), &doc, error, sizeof error);
  free(json);
  acc_json_free(doc);
  return status == 0;
}

/* 1 if the raw bytes fail to parse with a message naming an offset and no
 * document. */
static int json_fails_raw(const char *text, size_t length) {
  acc_json_doc *doc = (acc_json_doc *)&doc; /* must be reset to NULL */
  char error[256] = "untouched";
  int status = parse_exact(text, length, &doc, error, sizeof error);
  int ok = status == -1 && doc == NULL && strncmp(error, "offset ", 7) == 0;
  if (!ok) printf("  expected failure for <%.*s>: status %d, error '%s'\n", (int)length, text, status, error);
  if (status == 0) acc_json_free(doc);
  return ok;
}

static int json_fails(const char *text) {
  char *json = quoted(text);
  int ok = json_fails_raw(json, strlen(json));
  free(json);
  return ok;
}

/* Parses a single number; returns 1 and sets *out on success. */
static int json_number(const char *text, double *out) {
  acc_json_doc *doc = NULL;
  char error[256];
  if (parse_exact(text, strlen(text), &doc, error, sizeof error) != 0) return 0;
  const acc_json_value *root = acc_json_root(doc);
  int ok = root->type == ACC_JSON_NUMBER;
  if (ok) *out = root->as.number;
  acc_json_free(doc);
  return ok;
}

static int same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static int number_is(const char *text, double expected) {
  double value = 0;
  int ok = json_number(text, &value) && same_double(value, expected);
  if (!ok) printf("  %s parsed as %.17g, expected %.17g\n", text, value, expected);
  return ok;
}

/* Parses a one-string document; returns the decoded string or NULL. */
static acc_json_doc *json_string(const char *text, const char **chars, size_t *length) {
  acc_json_doc *doc = NULL;
  char error[256];
  if (parse_exact(text, strlen(text), &doc, error, sizeof error) != 0) return NULL;
  const acc_json_value *root = acc_json_root(doc);
  if (root->type != ACC_JSON_STRING) {
    acc_json_free(doc);
    return NULL;
  }
  *chars = root->as.string.chars;
  *length = root->as.string.length;
  return doc;
}

static int string_is(const char *text, const char *expected, size_t expected_length) {
  const char *chars = NULL;
  size_t length = 0;
  acc_json_doc *doc = json_string(text, &chars, &length);
  int ok = doc != NULL && length == expected_length &&
           memcmp(chars, expected, length) == 0 && chars[length] == '\0';
  if (!ok) printf("  string %s did not decode as expected\n", text);
  acc_json_free(doc);
  return ok;
}

/* A tiny deterministic generator (xorshift64*); state lives with the caller. */
static uint64_t next_random(uint64_t *state) {
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * 2685821657736338717ULL;
}

static char *repeat(const char *unit, size_t times, const char *middle, const char *close) {
  size_t unit_length = strlen(unit), middle_length = strlen(middle), close_length = strlen(close);
  size_t size = times * (unit_length + close_length) + middle_length + 1;
  char *text = malloc(size);
  if (text == NULL) abort();
  char *p = text;
  for (size_t i = 0; i < times; i++, p += unit_length) memcpy(p, unit, unit_length);
  memcpy(p, middle, middle_length);
  p += middle_length;
  for (size_t i = 0; i < times; i++, p += close_length) memcpy(p, close, close_length);
  *p = '\0';
  return text;
}

/* ------------------------------------------------------------------------
 * JSON: valid documents
 * ---------------------------------------------------------------------- */

static void test_json_scalars(void) {
  acc_json_doc *doc = NULL;
  char error[128];
  CHECK(parse_exact("null", 4, &doc, error, sizeof error) == 0);
  CHECK(acc_json_root(doc)->type == ACC_JSON_NULL);
  acc_json_free(doc);
  CHECK(parse_exact(" true ", 6, &doc, error, sizeof error) == 0);
  CHECK(acc_json_root(doc)->type == ACC_JSON_BOOL && acc_json_root(doc)->as.boolean == 1);
  acc_json_free(doc);
  CHECK(parse_exact("\t\r\nfalse\n", 9, &doc, error, sizeof error) == 0);
  CHECK(acc_json_root(doc)->type == ACC_JSON_BOOL && acc_json_root(doc)->as.boolean == 0);
  CHECK(error[0] == '\0');
  acc_json_free(doc);
  CHECK(string_is("\"\"", "", 0));
  CHECK(string_is("\"hello\"", "hello", 5));
  CHECK(acc_json_root(NULL) == NULL);
  acc_json_free(NULL);
}

static void test_json_containers(void) {
  char *json = quoted("{'a': [1, 2.5, 'x', true, false, null, {}, []],"
                      " 'b': {'c': {'d': [[[]]]}}, '': 0}");
  acc_json_doc *doc = NULL;
  char error[128];
  CHECK(parse_exact(json, strlen(json), &doc, error, sizeof error) == 0);
  const acc_json_value *root = acc_json_root(doc);
  CHECK(root->type == ACC_JSON_OBJECT && root->as.object.count == 3);
  CHECK(strcmp(root->as.object.members[0].key, "a") == 0);
  CHECK(root->as.object.members[0].key_length == 1);
  CHECK(strcmp(root->as.object.members[2].key, "") == 0);
  const acc_json_value *a = acc_json_get(root, "a");
  CHECK(a != NULL && a->type == ACC_JSON_ARRAY && a->as.array.count == 8);
  if (a != NULL && a->as.array.count == 8) {
    const acc_json_value *items = a->as.array.items;
    CHECK(items[0].type == ACC_JSON_NUMBER && items[0].as.number == 1.0);
    CHECK(items[1].type == ACC_JSON_NUMBER && items[1].as.number == 2.5);
    CHECK(items[2].type == ACC_JSON_STRING && strcmp(items[2].as.string.chars, "x") == 0);
    CHECK(items[3].type == ACC_JSON_BOOL && items[3].as.boolean == 1);
    CHECK(items[4].type == ACC_JSON_BOOL && items[4].as.boolean == 0);
    CHECK(items[5].type == ACC_JSON_NULL);
    CHECK(items[6].type == ACC_JSON_OBJECT && items[6].as.object.count == 0);
    CHECK(items[7].type == ACC_JSON_ARRAY && items[7].as.array.count == 0);
  }
  const acc_json_value *d = acc_json_get(acc_json_get(acc_json_get(root, "b"), "c"), "d");
  CHECK(d != NULL && d->type == ACC_JSON_ARRAY && d->as.array.count == 1);
  CHECK(acc_json_get(root, "missing") == NULL);
  CHECK(acc_json_get(a, "a") == NULL);
  CHECK(acc_json_get(NULL, "a") == NULL);
  CHECK(acc_json_get(root, NULL) == NULL);
  CHECK(acc_json_get(root, "")->as.number == 0.0);
  acc_json_free(doc);
  free(json);
  CHECK(json_ok(" [ ] "));
  CHECK(json_ok("{ }"));
  CHECK(json_ok("[[],[{}],{'a':[]}]"));
  CHECK(json_ok("{'a':1,'b':{'a':2}}"));
  CHECK(json_ok("{'a':1,'ab':2,'b':3}"));
}

static void test_json_member_order(void) {
  /* Duplicate detection sorts a copy: the tree keeps the input order. */
  char *json = quoted("{'z':1,'a':2,'m':3}");
  acc_json_doc *doc = NULL;
  CHECK(acc_json_parse(json, strlen(json), &doc, NULL, 0) == 0);
  const acc_json_value *root = acc_json_root(doc);
  CHECK(strcmp(root->as.object.members[0].key, "z") == 0);
  CHECK(strcmp(root->as.object.members[1].key, "a") == 0);
  CHECK(strcmp(root->as.object.members[2].key, "m") == 0);
  CHECK(acc_json_get(root, "m")->as.number == 3.0);
  acc_json_free(doc);
  free(json);
}

static void test_json_escapes(void) {
  CHECK(string_is("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 8));
  CHECK(string_is("\"\\u0041\\u00e9\\u20AC\"", "A\xC3\xA9\xE2\x82\xAC", 6));
  CHECK(string_is("\"\\u07FF\\u0800\\uFFFF\"", "\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBF", 8));
  CHECK(string_is("\"\\uD83D\\uDE00\"", "\xF0\x9F\x98\x80", 4));
  CHECK(string_is("\"\\uDBFF\\uDFFF\"", "\xF4\x8F\xBF\xBF", 4));
  CHECK(string_is("\"\\ud800\\udc00\"", "\xF0\x90\x80\x80", 4));
  CHECK(string_is("\"a\\u0001b\"", "a\x01" "b", 3));
  /* Raw UTF-8 passes through unchanged. */
  CHECK(string_is("\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"", "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 9));
  CHECK(string_is("\"\x7F\"", "\x7F", 1));
  /* Escaped quote keys compare by decoded bytes. */
  CHECK(json_ok("{'a\\'b':1,'a\\\\b':2}"));
}

static void test_json_numbers(void) {
  CHECK(number_is("0", 0.0));
  CHECK(number_is("-0", -0.0));
  CHECK(number_is("123", 123.0));
  CHECK(number_is("-123", -123.0));
  CHECK(number_is("1.5", 1.5));
  CHECK(number_is("-0.25", -0.25));
  CHECK(number_is("0.000001", 1e-6));
  CHECK(number_is("1e3", 1000.0));
  CHECK(number_is("1E3", 1000.0));
  CHECK(number_is("1e+3", 1000.0));
  CHECK(number_is("1e-3", 0.001));
  CHECK(number_is("-1.25e2", -125.0));
  CHECK(number_is("0e10", 0.0));
  CHECK(number_is("0.0e-999999999999999999999", 0.0));
  CHECK(number_is("1.7976931348623157e308", DBL_MAX));
  CHECK(number_is("2.2250738585072014e-308", DBL_MIN));
  CHECK(number_is("4.9406564584124654e-324", 4.9406564584124654e-324));
  CHECK(number_is("1e-400", 0.0));
  CHECK(number_is("-1e-400", -0.0));
  CHECK(number_is("9007199254740993", 9007199254740992.0));
  CHECK(number_is("0.1000000000000000055511151231257827021181583404541015625", 0.1));
  CHECK(number_is("100000000000000000000000000000000000000000000000000", 1e50));
  CHECK(number_is("0.00000000000000000000000000000000000000000000000001", 1e-50));
  CHECK(number_is("123456789012345678901234567890e-10", 12345678901234567890.123456789));
}

/* Numbers with more significant digits than the converter keeps. */
static void test_json_long_numbers(void) {
  /* 1 + 2^-53 lies exactly halfway between 1 and the next double. */
  const char *halfway = "1.00000000000000011102230246251565404236316680908203125";
  const double above = 1.0 + DBL_EPSILON;
  CHECK(number_is(halfway, 1.0)); /* ties to even */
  char *zeros = repeat("0", 900, "", "");
  size_t size = strlen(halfway) + 900 + 8;
  char *text = malloc(size);
  if (text == NULL) abort();
  snprintf(text, size, "%s%s1", halfway, zeros);
  CHECK(number_is(text, above)); /* a nonzero digit far beyond the tie */
  snprintf(text, size, "%s%s0", halfway, zeros);
  CHECK(number_is(text, 1.0));
  snprintf(text, size, "1%s", zeros);
  CHECK(json_fails(text)); /* 1e900 is out of range */
  snprintf(text, size, "1%se-900", zeros);
  CHECK(number_is(text, 1.0));
  snprintf(text, size, "0.%s1e901", zeros);
  CHECK(number_is(text, 1.0));
  free(text);
  free(zeros);
}

/* The converter must agree with a round trip through the C library's
 * shortest-exact printing, bit for bit, over many random doubles. */
static void test_json_numbers_round_trip(void) {
  uint64_t state = 0x9E3779B97F4A7C15ULL;
  int mismatches = 0;
  for (int i = 0; i < 20000; i++) {
    uint64_t bits = next_random(&state);
    double value;
    memcpy(&value, &bits, sizeof value);
    if (value != value || value > DBL_MAX || value < -DBL_MAX) continue;
    char text[64];
    snprintf(text, sizeof text, "%.*e", (int)(bits % 17) + 1, value);
    double expected = strtod(text, NULL);
    double parsed = 0;
    if (!json_number(text, &parsed) || !same_double(parsed, expected)) {
      if (mismatches++ < 5) printf("  round trip of %s gave %.17g\n", text, parsed);
    }
  }
  CHECK(mismatches == 0);
}

static void test_json_integer(void) {
  acc_json_doc *doc = NULL;
  char *json = quoted("[3, 3.5, 1e3, -1, 1e19, -0, 'x', 9007199254740992, -9.3e18]");
  CHECK(acc_json_parse(json, strlen(json), &doc, NULL, 0) == 0);
  const acc_json_value *items = acc_json_root(doc)->as.array.items;
  long long out = 42;
  CHECK(acc_json_integer(&items[0], 0, 10, &out) == 0 && out == 3);
  CHECK(acc_json_integer(&items[0], 4, 10, &out) == -1);
  CHECK(acc_json_integer(&items[0], 0, 2, &out) == -1);
  CHECK(acc_json_integer(&items[1], 0, 10, &out) == -1);
  CHECK(acc_json_integer(&items[2], 0, 1000, &out) == 0 && out == 1000);
  CHECK(acc_json_integer(&items[3], -1, 0, &out) == 0 && out == -1);
  CHECK(acc_json_integer(&items[3], 0, 10, &out) == -1);
  CHECK(acc_json_integer(&items[4], LLONG_MIN, LLONG_MAX, &out) == -1);
  CHECK(acc_json_integer(&items[5], 0, 0, &out) == 0 && out == 0);
  CHECK(acc_json_integer(&items[6], LLONG_MIN, LLONG_MAX, &out) == -1);
  CHECK(acc_json_integer(&items[7], 0, LLONG_MAX, &out) == 0 && out == 9007199254740992LL);
  CHECK(acc_json_integer(&items[8], LLONG_MIN, LLONG_MAX, &out) == -1);
  CHECK(acc_json_integer(NULL, 0, 1, &out) == -1);
  CHECK(acc_json_integer(&items[0], 0, 10, NULL) == -1);
  acc_json_free(doc);
  free(json);
}

/* ------------------------------------------------------------------------
 * JSON: malformed documents
 * ---------------------------------------------------------------------- */

static void test_json_bad_numbers(void) {
  static const char *const kBad[] = {
      "01", "-01", "00", "1.", "-1.", ".5", "+1", "-", "1e", "1e+", "1E-", "NaN",
      "nan", "Infinity", "-Infinity", "inf", "0x10", "1.e5", "- 1", "1e400",
      "-1e400", "1.5.2", "1ee5", "--1", "1,5", "2.", "0.e1", "1e5.5", "[01]",
      "[1.]", "{'a':01}", "[-]", "[.1]",
  };
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) CHECK_MSG(json_fails(kBad[i]), kBad[i]);
}

static void test_json_malformed(void) {
  static const char *const kBad[] = {
      "", " ", "[", "]", "{", "}", "[1,]", "[,1]", "[1 2]", "[1,,2]", "{,}",
      "{'a'}", "{'a':}", "{'a' 1}", "{'a':1,}", "{1:2}", "{'a':1 'b':2}",
      "{'a':1;'b':2}", "{\\'a\\':1}", "tru", "true1", "nulls", "True", "NULL", "[1]]",
      "{}}", "[]x", "'abc", "['a\\']", "'\\x'", "'\\U0041'", "'\\u12'",
      "'\\u12G4'", "'\\u'", "'\\uD800'", "'\\uDC00'", "'\\uD800\\u0041'",
      "'\\uD800x'", "'\\uD800\\'", "'\\uD800\\uD800'", "'\\uDBFF\\uE000'",
      "'\\u0000'", "'a\\u0000b'", "[1]  [2]", "1 2", "//c\n1", "/*c*/1",
      "[1]//", "'\t'", "'\n'", "'a\x1f'", "\x0b[1]", "\x0c[1]", "\xc2\xa0[1]",
      "\xEF\xBB\xBF[1]", "'\x80'", "'\xC0\x80'", "'\xC1\xBF'", "'\xE0\x80\x80'",
      "'\xED\xA0\x80'", "'\xF0\x80\x80\x80'", "'\xF4\x90\x80\x80'", "'\xF5\x80\x80\x80'",
      "'\xFF'", "'\xE2\x82'", "'\xE2\x82\x41'", "'\xF0\x9F\x98'", "'\xC3'",
      "{'a':1,'a':2}", "{'a':1,'b':2,'a':3}", "{'a':1,'\\u0061':2}",
      "[{'x':{'y':1,'y':1}}]", "{'':1,'':2}",
  };
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) CHECK_MSG(json_fails(kBad[i]), kBad[i]);
}

static void test_json_embedded_nul(void) {
  CHECK(json_fails_raw("[1,\0 2]", 7));
  CHECK(json_fails_raw("\"a\0b\"", 5));
  CHECK(json_fails_raw("[1]\0", 4));
  CHECK(json_fails_raw("\0", 1));
  CHECK(json_fails_raw("\"\\'\"", 4)); /* \' is not a JSON escape */
  acc_json_doc *doc = NULL;
  char error[64];
  /* The explicit length ends the document: trailing bytes are not read. */
  CHECK(parse_exact("[1]xyz", 3, &doc, error, sizeof error) == 0);
  CHECK(acc_json_root(doc)->as.array.count == 1);
  acc_json_free(doc);
}

static void test_json_truncation(void) {
  char *json = quoted("{'nodes': [{'op': 'null', 'name': 'x\\u00e9\\uD83D\\uDE00',"
                      " 'v': [-1.5e-3, true, false, null, 0]}], 'h': [[0, 0, 0]],"
                      " 's': '\xC3\xA9\\n'}");
  size_t length = strlen(json);
  acc_json_doc *doc = NULL;
  CHECK(acc_json_parse(json, length, &doc, NULL, 0) == 0);
  acc_json_free(doc);
  int failures = 0;
  for (size_t prefix = 0; prefix < length; prefix++) {
    if (!json_fails_raw(json, prefix)) failures++;
  }
  CHECK(failures == 0);
  free(json);
}

static void test_json_depth(void) {
  char *ok = repeat("[", ACC_JSON_MAX_DEPTH, "", "]");
  char *too_deep = repeat("[", ACC_JSON_MAX_DEPTH + 1, "", "]");
  char *objects = repeat("{'a':", ACC_JSON_MAX_DEPTH, "1", "}");
  char *objects_too_deep = repeat("{'a':", ACC_JSON_MAX_DEPTH + 1, "1", "}");
  char *huge = repeat("[", 1000000, "", "]");
  CHECK(json_ok(ok));
  CHECK(json_fails(too_deep));
  CHECK(json_ok(objects));
  CHECK(json_fails(objects_too_deep));
  CHECK(json_fails_raw(huge, strlen(huge)));
  char error[128];
  acc_json_doc *doc = NULL;
  acc_json_parse(too_deep, strlen(too_deep), &doc, error, sizeof error);
  CHECK(strstr(error, "offset 256") != NULL && strstr(error, "nesting") != NULL);
  free(ok);
  free(too_deep);
  free(objects);
  free(objects_too_deep);
  free(huge);
}

static void test_json_error_reporting(void) {
  char error[128];
  acc_json_doc *doc = NULL;
  CHECK(acc_json_parse("[1, 2, x]", 9, &doc, error, sizeof error) == -1);
  CHECK(strncmp(error, "offset 7: ", 10) == 0);
  char *dup = quoted("{'key':1, 'other':2, 'key':3}");
  CHECK(acc_json_parse(dup, strlen(dup), &doc, error, sizeof error) == -1);
  CHECK(strncmp(error, "offset 21: ", 11) == 0 && strstr(error, "duplicate") != NULL);
  free(dup);
  /* Tiny, absent and zero-sized error buffers are fine. */
  char tiny[4] = "xyz";
  CHECK(acc_json_parse("[", 1, &doc, tiny, sizeof tiny) == -1 && strlen(tiny) == 3);
  CHECK(acc_json_parse("[", 1, &doc, tiny, 1) == -1 && tiny[0] == '\0');
  tiny[0] = 'q';
  CHECK(acc_json_parse("[", 1, &doc, tiny, 0) == -1 && tiny[0] == 'q');
  CHECK(acc_json_parse("[", 1, &doc, NULL, 100) == -1);
  CHECK(acc_json_parse(NULL, 0, &doc, error, sizeof error) == -1 && doc == NULL);
  CHECK(acc_json_parse("[]", 2, NULL, error, sizeof error) == -1 && error[0] != '\0');
}

/* Many keys (sorted duplicate check) and a document spanning many arena
 * blocks. */
static void test_json_large(void) {
  enum { kKeys = 20000 };
  size_t size = (size_t)kKeys * 24 + 16;
  char *text = malloc(size);
  if (text == NULL) abort();
  size_t used = (size_t)snprintf(text, size, "{");
  for (int i = 0; i < kKeys; i++) {
    used += (size_t)snprintf(text + used, size - used, "%s\"k%d\":[%d,\"v\"]", i ? "," : "", i, i);
  }
  size_t closed = used;
  snprintf(text + used, size - used, "}");
  acc_json_doc *doc = NULL;
  CHECK(acc_json_parse(text, closed + 1, &doc, NULL, 0) == 0);
  const acc_json_value *root = acc_json_root(doc);
  CHECK(root != NULL && root->as.object.count == kKeys);
  CHECK(acc_json_get(root, "k12345")->as.array.items[0].as.number == 12345.0);
  acc_json_free(doc);
  snprintf(text + closed, size - closed, ",\"k777\":0}");
  char error[128];
  CHECK(acc_json_parse(text, strlen(text), &doc, error, sizeof error) == -1);
  CHECK(strstr(error, "duplicate") != NULL);
  free(text);
}

/* Random byte edits of a valid document: every outcome is fine except a
 * crash, a leak or a sanitizer report. */
static void test_json_fuzz(void) {
  char *json = quoted("{'a': [1, -2.5e3, 'x\\u00e9\\uD83D\\uDE00y', true, null],"
                      " 'b': {'c': false, 'd': [[], {}]}, 'e': '\xE2\x82\xAC'}");
  size_t length = strlen(json);
  char *mutated = malloc(length);
  if (mutated == NULL) abort();
  static const char kBytes[] = "{}[],:\"\\u0123456789eE.+-tfnlrsaD8\x80\xC3\xED\xF4 ";
  uint64_t state = 12345;
  int parsed = 0;
  for (int round = 0; round < 20000; round++) {
    memcpy(mutated, json, length);
    int edits = 1 + (int)(next_random(&state) % 3);
    for (int e = 0; e < edits; e++) {
      size_t at = next_random(&state) % length;
      mutated[at] = kBytes[next_random(&state) % (sizeof kBytes - 1)];
    }
    acc_json_doc *doc = NULL;
    char error[128];
    if (parse_exact(mutated, length, &doc, error, sizeof error) == 0) parsed++;
    acc_json_free(doc);
  }
  CHECK(parsed > 0);
  free(mutated);
  free(json);
}

/* ------------------------------------------------------------------------
 * Attributes
 * ---------------------------------------------------------------------- */

static int int_is(const char *text, int64_t expected) {
  int64_t value = 0;
  return acc_attr_int(text, &value) == 0 && value == expected;
}

static void test_attr_int(void) {
  int64_t value = 0;
  CHECK(int_is("3", 3));
  CHECK(int_is(" -42 ", -42));
  CHECK(int_is("+7", 7));
  CHECK(int_is("007", 7));
  CHECK(int_is("\t0\n", 0));
  CHECK(int_is("9223372036854775807", INT64_MAX));
  CHECK(int_is("-9223372036854775808", INT64_MIN));
  static const char *const kBad[] = {
      "9223372036854775808", "-9223372036854775809", "99999999999999999999",
      "", " ", "3a", "3 4", "1.0", "0x10", "--1", "- 1", "+", "-", "1e3", "(3)", "None",
  };
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
    CHECK_MSG(acc_attr_int(kBad[i], &value) == -1, kBad[i]);
  }
  CHECK(acc_attr_int(NULL, &value) == -1);
  CHECK(acc_attr_int("1", NULL) == -1);
}

static int float_is(const char *text, double expected) {
  double value = 0;
  return acc_attr_float(text, &value) == 0 && same_double(value, expected);
}

static void test_attr_float(void) {
  double value = 0;
  CHECK(float_is("1e-05", 1e-05));
  CHECK(float_is("-0.5", -0.5));
  CHECK(float_is("3", 3.0));
  CHECK(float_is(" 2.5 ", 2.5));
  CHECK(float_is(".5", 0.5));
  CHECK(float_is("5.", 5.0));
  CHECK(float_is("+1E3", 1000.0));
  CHECK(float_is("-0", -0.0));
  CHECK(float_is("0.001", 0.001));
  CHECK(float_is("1e400", HUGE_VAL));
  CHECK(float_is("inf", HUGE_VAL));
  CHECK(float_is("-inf", -HUGE_VAL));
  CHECK(float_is("Infinity", HUGE_VAL));
  CHECK(float_is("-INF", -HUGE_VAL));
  CHECK(acc_attr_float("nan", &value) == 0 && value != value);
  CHECK(acc_attr_float(" NaN ", &value) == 0 && value != value);
  CHECK(float_is("0.1000000000000000055511151231257827021181583404541015625", 0.1));
  static const char *const kBad[] = {
      "", " ", ".", "e5", "1e", "1e+", "1.2.3", "abc", "1,5", "infx", "nanx", "in",
      "infinit", "--1", "+-1", "1 2", "0x1p3", "1.0f", "None", "(1.0)",
  };
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
    CHECK_MSG(acc_attr_float(kBad[i], &value) == -1, kBad[i]);
  }
  CHECK(acc_attr_float(NULL, &value) == -1);
  CHECK(acc_attr_float("1", NULL) == -1);
}

static void test_attr_bool_and_words(void) {
  int value = -1;
  CHECK(acc_attr_bool("True", &value) == 0 && value == 1);
  CHECK(acc_attr_bool("true", &value) == 0 && value == 1);
  CHECK(acc_attr_bool(" 1 ", &value) == 0 && value == 1);
  CHECK(acc_attr_bool("False", &value) == 0 && value == 0);
  CHECK(acc_attr_bool("false", &value) == 0 && value == 0);
  CHECK(acc_attr_bool("0", &value) == 0 && value == 0);
  static const char *const kBad[] = {"TRUE", "yes", "2", "", "Truex", "01", "T", "no"};
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
    CHECK_MSG(acc_attr_bool(kBad[i], &value) == -1, kBad[i]);
  }
  CHECK(acc_attr_bool(NULL, &value) == -1);
  CHECK(acc_attr_bool("1", NULL) == -1);
  CHECK(acc_attr_is_none("None") == 1);
  CHECK(acc_attr_is_none("  None\t") == 1);
  CHECK(acc_attr_is_none("none") == 0);
  CHECK(acc_attr_is_none("Non") == 0);
  CHECK(acc_attr_is_none("None1") == 0);
  CHECK(acc_attr_is_none("") == 0);
  CHECK(acc_attr_is_none(NULL) == 0);
  CHECK(acc_attr_equals("relu", "relu") == 1);
  CHECK(acc_attr_equals("relu ", "relu") == 0);
  CHECK(acc_attr_equals("rel", "relu") == 0);
  CHECK(acc_attr_equals(NULL, "relu") == 0);
  CHECK(acc_attr_equals("relu", NULL) == 0);
}

/* Parses text as a tuple into a guarded buffer; checks the values and that
 * nothing past capacity was written. */
static int tuple_is(const char *text, int capacity, const int64_t *expected, int expected_count) {
  int64_t buffer[12];
  for (int i = 0; i < 12; i++) buffer[i] = -777;
  int count = -1;
  if (acc_attr_int_tuple(text, buffer, capacity, &count) != 0) return 0;
  if (count != expected_count) return 0;
  for (int i = 0; i < count; i++) {
    if (buffer[i] != expected[i]) return 0;
  }
  for (int i = capacity; i < 12; i++) {
    if (buffer[i] != -777) return 0;
  }
  return 1;
}

static void test_attr_int_tuple(void) {
  static const int64_t k33[] = {3, 3};
  static const int64_t k3[] = {3};
  static const int64_t kNeg[] = {-3};
  static const int64_t kMixed[] = {1, -2, 3};
  static const int64_t kBig[] = {INT64_MAX, INT64_MIN};
  CHECK(tuple_is("(3, 3)", 4, k33, 2));
  CHECK(tuple_is("[3,3]", 4, k33, 2));
  CHECK(tuple_is("(3,)", 4, k3, 1));
  CHECK(tuple_is("(3)", 4, k3, 1));
  CHECK(tuple_is("()", 4, NULL, 0));
  CHECK(tuple_is("[]", 4, NULL, 0));
  CHECK(tuple_is("( )", 4, NULL, 0));
  CHECK(tuple_is("3", 4, k3, 1));
  CHECK(tuple_is(" -3 ", 4, kNeg, 1));
  CHECK(tuple_is("(1, -2, +3)", 3, kMixed, 3));
  CHECK(tuple_is(" ( 1 ,-2 , 3 , ) ", 3, kMixed, 3));
  CHECK(tuple_is("[9223372036854775807, -9223372036854775808]", 2, kBig, 2));
  CHECK(tuple_is("()", 0, NULL, 0));
  int64_t values[4];
  int count = 0;
  CHECK(acc_attr_int_tuple("()", NULL, 0, &count) == 0 && count == 0);
  static const char *const kBad[] = {
      "(3", "(3]", "[3)", "(,)", "(3,,)", "(,3)", "(3 3)", "(a)", "((1))", "(1)x",
      "(1)(2)", "", " ", "3,", "3 3", "(1.5)", "(9223372036854775808)", "None",
      "{1}", "(1;2)", "(--1)",
  };
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
    CHECK_MSG(acc_attr_int_tuple(kBad[i], values, 4, &count) == -1, kBad[i]);
  }
  CHECK(tuple_is("(1,2,3)", 2, NULL, 0) == 0); /* more values than capacity */
  CHECK(tuple_is("3", 0, NULL, 0) == 0);
  CHECK(acc_attr_int_tuple("(1)", NULL, 0, &count) == -1);
  CHECK(acc_attr_int_tuple("(1)", NULL, 2, &count) == -1);
  CHECK(acc_attr_int_tuple("(1)", values, -1, &count) == -1);
  CHECK(acc_attr_int_tuple("(1)", values, 4, NULL) == -1);
  CHECK(acc_attr_int_tuple(NULL, values, 4, &count) == -1);
}

enum { kGuard = -999 };

typedef struct tuple_list_result {
  int64_t values[5][4]; /* one spare row and column stay untouched */
  int lengths[5];
  int count;
} tuple_list_result;

static int parse_list(const char *text, int max_tuples, int max_len, tuple_list_result *r) {
  int64_t flat[20];
  for (int i = 0; i < 20; i++) flat[i] = kGuard;
  for (int i = 0; i < 5; i++) r->lengths[i] = kGuard;
  r->count = kGuard;
  int status = acc_attr_int_tuple_list(text, flat, r->lengths, max_tuples, max_len, &r->count);
  for (int i = max_tuples * max_len; i < 20; i++) {
    if (flat[i] != kGuard) return -2; /* wrote past the capacity */
  }
  for (int i = max_tuples; i < 5; i++) {
    if (r->lengths[i] != kGuard) return -2;
  }
  for (int t = 0; t < max_tuples; t++) {
    for (int d = 0; d < max_len; d++) r->values[t][d] = flat[t * max_len + d];
  }
  return status;
}

static void test_attr_int_tuple_list(void) {
  tuple_list_result r;
  CHECK(parse_list("[[1,3,224,224],[10]]", 3, 4, &r) == 0);
  CHECK(r.count == 2 && r.lengths[0] == 4 && r.lengths[1] == 1);
  CHECK(r.values[0][0] == 1 && r.values[0][3] == 224 && r.values[1][0] == 10);
  CHECK(parse_list("[(1, 3), ()]", 2, 4, &r) == 0);
  CHECK(r.count == 2 && r.lengths[0] == 2 && r.lengths[1] == 0 && r.values[0][1] == 3);
  CHECK(parse_list(" [ ] ", 2, 4, &r) == 0 && r.count == 0);
  CHECK(parse_list("[[]]", 1, 0, &r) == 0 && r.count == 1 && r.lengths[0] == 0);
  CHECK(parse_list("([1],[-2],)", 2, 1, &r) == 0 && r.count == 2 && r.values[1][0] == -2);
  CHECK(parse_list("[[1,2,3,4,5]]", 3, 4, &r) == -1); /* tuple longer than max_len */
  CHECK(parse_list("[[1],[2],[3]]", 2, 4, &r) == -1); /* more tuples than max_tuples */
  CHECK(parse_list("[[1]]", 0, 4, &r) == -1);
  CHECK(parse_list("[]", 0, 0, &r) == 0 && r.count == 0);
  static const char *const kBad[] = {
      "[1,2]", "[[1],", "[[1]]x", "[[1],[2]", "[[1] [2]]", "[[1],,[2]]", "[(1]]", "",
      "[[1.5]]", "[[a]]", "[[99999999999999999999]]", "[[[1]]]", "3", "[,]", "[[1],2]",
      "((1),(2)", "[[1],[2]])",
  };
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
    CHECK_MSG(parse_list(kBad[i], 3, 4, &r) == -1, kBad[i]);
  }
  int lengths[2], count;
  int64_t values[8];
  CHECK(acc_attr_int_tuple_list("[[1]]", values, NULL, 2, 4, &count) == -1);
  CHECK(acc_attr_int_tuple_list("[[1]]", NULL, lengths, 2, 4, &count) == -1);
  CHECK(acc_attr_int_tuple_list("[[1]]", values, lengths, -1, 4, &count) == -1);
  CHECK(acc_attr_int_tuple_list("[[1]]", values, lengths, 2, -1, &count) == -1);
  CHECK(acc_attr_int_tuple_list("[[1]]", values, lengths, 2, 4, NULL) == -1);
  CHECK(acc_attr_int_tuple_list(NULL, values, lengths, 2, 4, &count) == -1);
  CHECK(acc_attr_int_tuple_list("[]", NULL, NULL, 0, 4, &count) == 0 && count == 0);
}

/* Numbers must not depend on LC_NUMERIC. Runs only where a locale with a
 * decimal comma is installed. */
static void test_locale_independence(void) {
  static const char *const kLocales[] = {
      "de_DE.UTF-8", "de_DE.utf8", "de_DE", "fr_FR.UTF-8", "fr_FR.utf8", "ru_RU.UTF-8", "nl_NL.UTF-8",
  };
  const char *found = NULL;
  for (size_t i = 0; i < sizeof kLocales / sizeof kLocales[0] && found == NULL; i++) {
    if (setlocale(LC_NUMERIC, kLocales[i]) != NULL) found = kLocales[i];
  }
  if (found == NULL) {
    printf("note: no decimal-comma locale installed; locale test skipped\n");
    return;
  }
  double value = 0;
  CHECK(number_is("1.5", 1.5));
  CHECK(number_is("-2.25e-1", -0.225));
  CHECK(json_fails("1,5"));
  CHECK(acc_attr_float("0.001", &value) == 0 && value == 0.001);
  CHECK(acc_attr_float("1,5", &value) == -1);
  setlocale(LC_NUMERIC, "C");
}

/* ------------------------------------------------------------------------
 * Graphs
 * ---------------------------------------------------------------------- */

/* A small annotated conv net as the host passes it: data -> Convolution ->
 * Activation -> Pooling -> FullyConnected, written as MXNet saves it. */
static const char kConvNet[] =
    "{\n"
    "  'nodes': [\n"
    "    {'op': 'null', 'name': 'data', 'inputs': [],\n"
    "     'attrs': {'__out_shapes__': '[[1,3,8,8]]', '__out_dtypes__': '[0]',"
    " '__kind__': 'data'}},\n"
    "    {'op': 'null', 'name': 'conv0_weight', 'inputs': [],\n"
    "     'attrs': {'kernel': '(3, 3)', 'num_filter': '4', '__out_shapes__': '[[4,3,3,3]]',"
    " '__out_dtypes__': '[0]', '__kind__': 'weight'}},\n"
    "    {'op': 'null', 'name': 'conv0_bias', 'inputs': [],\n"
    "     'attrs': {'__out_shapes__': '[(4,)]', '__out_dtypes__': '(0,)', '__kind__': 'weight'}},\n"
    "    {'op': 'Convolution', 'name': 'conv0', 'inputs': [[0, 0, 0], [1, 0, 0], [2, 0, 0]],\n"
    "     'attrs': {'kernel': '(3, 3)', 'num_filter': '4', 'pad': '(1, 1)', 'stride': '(1, 1)',"
    " 'no_bias': 'False', 'layout': 'None', '__op_version__': '1', '__dev_id__': '0',"
    " '__out_shapes__': '[[1,4,8,8]]', '__out_dtypes__': '[0]'}},\n"
    "    {'op': 'Activation', 'name': 'relu0', 'inputs': [[3, 0, 0]],\n"
    "     'attrs': {'act_type': 'relu', '__op_version__': '1', '__dev_id__': '0',"
    " '__out_shapes__': '[[1,4,8,8]]', '__out_dtypes__': '[0]'}},\n"
    "    {'op': 'Pooling', 'name': 'pool0', 'inputs': [[4, 0, 0]],\n"
    "     'attrs': {'kernel': '(2, 2)', 'pool_type': 'max', 'stride': '(2, 2)',"
    " '__op_version__': '1', '__dev_id__': '0', '__out_shapes__': '[[1, 4, 4, 4]]',"
    " '__out_dtypes__': '[0]'}},\n"
    "    {'op': 'null', 'name': 'fc0_weight', 'inputs': [],\n"
    "     'attrs': {'__out_shapes__': '[[10,64]]', '__out_dtypes__': '[0]', '__kind__': 'weight'}},\n"
    "    {'op': 'null', 'name': 'fc0_bias', 'inputs': [],\n"
    "     'attrs': {'__out_shapes__': '[[10]]', '__out_dtypes__': '[0]', '__kind__': 'weight'}},\n"
    "    {'op': 'FullyConnected', 'name': 'fc0', 'inputs': [[5, 0, 0], [6, 0], [7, 0, 0]],\n"
    "     'attrs': {'num_hidden': '10', 'flatten': 'True', '__op_version__': '1',"
    " '__dev_id__': '0', '__out_shapes__': '[[1,10]]', '__out_dtypes__': '[0]'}}\n"
    "  ],\n"
    "  'arg_nodes': [0, 1, 2, 6, 7],\n"
    "  'node_row_ptr': [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],\n"
    "  'heads': [[8, 0, 0]],\n"
    "  'attrs': {'mxnet_version': ['int', 10900]}\n"
    "}\n";

/* Building blocks for the test graphs below. */
#define ANN(shapes, dtypes) "'__out_shapes__': '" shapes "', '__out_dtypes__': '" dtypes "'"
#define VAR(name, kind) \
  "{'op': 'null', 'name': '" name "', 'inputs': [], 'attrs': {" ANN("[[2]]", "[0]") \
  ", '__kind__': '" kind "'}}"
#define OP(name, inputs) \
  "{'op': 'relu', 'name': '" name "', 'inputs': " inputs ", 'attrs': {" ANN("[[2]]", "[0]") "}}"
#define GRAPH(nodes, args, heads) \
  "{'nodes': [" nodes "], 'arg_nodes': " args ", 'heads': " heads "}"
#define X VAR("x", "data")

static acc_graph *parse_graph(const char *text, int require, int *status, char *error,
                              size_t error_size) {
  char *json = quoted(text);
  acc_graph *graph = NULL;
  *status = acc_graph_parse(json, require, &graph, error, error_size);
  free(json);
  return graph;
}

static int shape_is(const acc_shape *shape, int ndim, const uint64_t *dims) {
  if (shape->ndim != ndim) return 0;
  for (int i = 0; i < ndim; i++) {
    if (shape->dims[i] != dims[i]) return 0;
  }
  return 1;
}

static void check_conv_net_nodes(const acc_graph *g) {
  static const char *const kNames[] = {"data", "conv0_weight", "conv0_bias", "conv0", "relu0",
                                       "pool0", "fc0_weight", "fc0_bias", "fc0"};
  static const char *const kOps[] = {NULL, NULL, NULL, "Convolution", "Activation",
                                     "Pooling", NULL, NULL, "FullyConnected"};
  static const size_t kInputs[] = {0, 0, 0, 3, 1, 1, 0, 0, 3};
  for (size_t i = 0; i < 9; i++) {
    const acc_node *node = &g->nodes[i];
    CHECK_MSG(strcmp(node->name, kNames[i]) == 0, kNames[i]);
    CHECK_MSG(kOps[i] == NULL ? node->op == NULL : strcmp(node->op, kOps[i]) == 0, kNames[i]);
    CHECK_MSG(node->num_inputs == kInputs[i], kNames[i]);
    CHECK_MSG(node->num_outputs == 1 && node->out_dtypes[0] == kFloat32, kNames[i]);
    CHECK_MSG((node->num_inputs == 0) == (node->inputs == NULL), kNames[i]);
  }
  CHECK(g->nodes[0].kind == ACC_VAR_DATA);
  CHECK(g->nodes[1].kind == ACC_VAR_WEIGHT && g->nodes[7].kind == ACC_VAR_WEIGHT);
  CHECK(g->nodes[3].kind == ACC_VAR_NONE);
  static const uint64_t kData[] = {1, 3, 8, 8}, kBias[] = {4}, kPool[] = {1, 4, 4, 4};
  static const uint64_t kFc[] = {1, 10};
  CHECK(shape_is(&g->nodes[0].out_shapes[0], 4, kData));
  CHECK(shape_is(&g->nodes[2].out_shapes[0], 1, kBias));
  CHECK(shape_is(&g->nodes[5].out_shapes[0], 4, kPool));
  CHECK(shape_is(&g->nodes[8].out_shapes[0], 2, kFc));
  const acc_node *conv = &g->nodes[3];
  CHECK(conv->inputs[0].node == 0 && conv->inputs[1].node == 1 && conv->inputs[2].node == 2);
  CHECK(conv->inputs[2].index == 0);
  const acc_node *fc = &g->nodes[8];
  CHECK(fc->inputs[0].node == 5 && fc->inputs[1].node == 6 && fc->inputs[2].node == 7);
}

static void check_conv_net_attrs(const acc_graph *g) {
  const acc_node *conv = &g->nodes[3];
  CHECK(conv->num_attrs == 10);
  CHECK(strcmp(acc_node_attr(conv, "kernel"), "(3, 3)") == 0);
  CHECK(strcmp(acc_node_attr(conv, "__op_version__"), "1") == 0);
  CHECK(strcmp(conv->attr_keys[0], "kernel") == 0 && strcmp(conv->attr_vals[0], "(3, 3)") == 0);
  CHECK(acc_node_attr(conv, "missing") == NULL);
  CHECK(acc_node_attr(conv, NULL) == NULL);
  CHECK(acc_node_attr(NULL, "kernel") == NULL);
  CHECK(acc_attr_is_none(acc_node_attr(conv, "layout")));
  int64_t kernel[2];
  int count = 0, no_bias = -1;
  CHECK(acc_attr_int_tuple(acc_node_attr(conv, "kernel"), kernel, 2, &count) == 0);
  CHECK(count == 2 && kernel[0] == 3 && kernel[1] == 3);
  CHECK(acc_attr_bool(acc_node_attr(conv, "no_bias"), &no_bias) == 0 && no_bias == 0);
  CHECK(acc_attr_equals(acc_node_attr(&g->nodes[4], "act_type"), "relu"));
  CHECK(strcmp(acc_node_attr(&g->nodes[1], "kernel"), "(3, 3)") == 0);
}

static void check_conv_net_graph(const acc_graph *g) {
  CHECK(g->num_heads == 1 && g->heads[0].node == 8 && g->heads[0].index == 0);
  CHECK(g->num_arg_nodes == 5 && g->arg_nodes[0] == 0 && g->arg_nodes[4] == 7);
  CHECK(acc_graph_find_variable(g, "data") == 0);
  CHECK(acc_graph_find_variable(g, "fc0_bias") == 7);
  CHECK(acc_graph_find_variable(g, "conv0_weight") == 1);
  CHECK(acc_graph_find_variable(g, "conv0") == -1); /* an operator */
  CHECK(acc_graph_find_variable(g, "nope") == -1);
  CHECK(acc_graph_find_variable(g, NULL) == -1);
  CHECK(acc_graph_find_variable(NULL, "data") == -1);
  char name[16];
  CHECK(acc_graph_output_name(g, g->heads[0], name, sizeof name) == 0);
  CHECK(strcmp(name, "fc0_output") == 0);
  CHECK(acc_graph_output_name(g, g->heads[0], name, 11) == 0); /* exactly fits */
  CHECK(acc_graph_output_name(g, g->heads[0], name, 10) == -1);
  CHECK(acc_graph_output_name(g, g->heads[0], name, 0) == -1);
  CHECK(acc_graph_output_name(g, g->heads[0], NULL, 10) == -1);
  CHECK(acc_graph_output_name(NULL, g->heads[0], name, sizeof name) == -1);
  acc_entry bad_node = {9, 0}, bad_index = {8, 1};
  CHECK(acc_graph_output_name(g, bad_node, name, sizeof name) == -1);
  CHECK(acc_graph_output_name(g, bad_index, name, sizeof name) == -1);
}

static void test_graph_conv_net(void) {
  char error[256] = "untouched";
  int status = -1;
  acc_graph *g = parse_graph(kConvNet, 1, &status, error, sizeof error);
  CHECK_MSG(status == MX_ACC_OK && g != NULL, error);
  if (g == NULL) return;
  CHECK(error[0] == '\0');
  CHECK(g->num_nodes == 9);
  check_conv_net_nodes(g);
  check_conv_net_attrs(g);
  check_conv_net_graph(g);
  acc_graph_free(g);
  acc_graph_free(NULL);
}

/* Multi-output heads, older attribute keys, and an unannotated graph. */
static void test_graph_multi_output(void) {
  static const char kSplit[] =
      "{'nodes': [{'op': 'null', 'name': 'x', 'inputs': [], 'attr': {"
      "'__out_shapes__': '[[2,4]]', '__out_dtypes__': '[6]', '__kind__': 'data'}},"
      " {'op': 'SliceChannel', 'name': 'split0', 'inputs': [[0, 0]], 'param': {"
      "'num_outputs': '2', '__out_shapes__': '[[2,2],[2,2]]', '__out_dtypes__': '[6, 6]'}}],"
      " 'arg_nodes': [0], 'heads': [[1, 1, 0], [1, 0, 0], [0, 0]]}";
  char error[256];
  int status = -1;
  acc_graph *g = parse_graph(kSplit, 1, &status, error, sizeof error);
  CHECK_MSG(status == MX_ACC_OK && g != NULL, error);
  if (g == NULL) return;
  CHECK(g->nodes[1].num_outputs == 2 && g->nodes[1].out_dtypes[1] == kInt64);
  CHECK(strcmp(acc_node_attr(&g->nodes[1], "num_outputs"), "2") == 0);
  CHECK(g->nodes[0].out_dtypes[0] == kInt64 && g->nodes[0].kind == ACC_VAR_DATA);
  char name[32];
  CHECK(acc_graph_output_name(g, g->heads[0], name, sizeof name) == 0);
  CHECK(strcmp(name, "split0_output1") == 0);
  CHECK(acc_graph_output_name(g, g->heads[1], name, sizeof name) == 0);
  CHECK(strcmp(name, "split0_output0") == 0);
  CHECK(acc_graph_output_name(g, g->heads[2], name, sizeof name) == 0);
  CHECK(strcmp(name, "x_output") == 0);
  acc_entry missing = {1, 2};
  CHECK(acc_graph_output_name(g, missing, name, sizeof name) == -1);
  acc_graph_free(g);
}

/* Files saved by old MXNet versions keep operator parameters under "param"
 * and user attributes under "attr"; a node's attributes are all of them. */
static const char kLegacy[] =
    "{'nodes': [{'op': 'null', 'name': 'data', 'param': {}, 'inputs': [],"
    " 'backward_source_id': -1, 'attr': {'__kind__': 'data', " ANN("[[1,2]]", "[0]") "}},"
    " {'op': 'Activation', 'name': 'act', 'param': {'act_type': 'tanh'}, 'inputs': [[0, 0]],"
    " 'backward_source_id': -1, 'attr': {'ctx_group': 'stage1', " ANN("[[1,2]]", "[0]") "},"
    " 'attrs': {'__op_version__': '1'}}],"
    " 'arg_nodes': [0], 'heads': [[1, 0]]}";

static void test_graph_legacy_attr_keys(void) {
  char error[256];
  int status = -1;
  acc_graph *g = parse_graph(kLegacy, 1, &status, error, sizeof error);
  CHECK_MSG(status == MX_ACC_OK && g != NULL, error);
  if (g == NULL) return;
  const acc_node *act = &g->nodes[1];
  CHECK(act->num_attrs == 5);
  CHECK(strcmp(act->attr_keys[0], "__op_version__") == 0); /* "attrs", "attr", "param" */
  CHECK(strcmp(act->attr_keys[4], "act_type") == 0 && strcmp(act->attr_vals[4], "tanh") == 0);
  CHECK(strcmp(acc_node_attr(act, "ctx_group"), "stage1") == 0);
  CHECK(act->num_outputs == 1 && act->out_shapes[0].dims[1] == 2);
  CHECK(g->nodes[0].kind == ACC_VAR_DATA && g->nodes[0].num_attrs == 3);
  acc_graph_free(g);
}

static void test_graph_unannotated(void) {
  static const char kPlain[] =
      "{'nodes': [{'op': 'null', 'name': 'a', 'inputs': []},"
      " {'op': 'null', 'name': 'b', 'inputs': [], 'attrs': {'__kind__': 'weight'}},"
      " {'op': 'split', 'name': 's', 'inputs': [[0, 0, 0]], 'attrs': {'num_outputs': '3'}},"
      " {'op': 'elemwise_add', 'name': 'add', 'inputs': [[2, 2, 0], [1, 0, 0]]}],"
      " 'arg_nodes': [0, 1], 'heads': [[3, 0, 0], [2, 1, 0]]}";
  char error[256];
  int status = -1;
  acc_graph *g = parse_graph(kPlain, 0, &status, error, sizeof error);
  CHECK_MSG(status == MX_ACC_OK && g != NULL, error);
  if (g != NULL) {
    for (size_t i = 0; i < g->num_nodes; i++) {
      CHECK(g->nodes[i].num_outputs == 0 && g->nodes[i].out_shapes == NULL);
      CHECK(g->nodes[i].out_dtypes == NULL);
    }
    CHECK(g->nodes[0].kind == ACC_VAR_NONE && g->nodes[1].kind == ACC_VAR_WEIGHT);
    CHECK(g->nodes[3].num_attrs == 0 && g->nodes[3].attr_keys == NULL);
    CHECK(g->nodes[3].inputs[0].node == 2 && g->nodes[3].inputs[0].index == 2);
    char name[32];
    CHECK(acc_graph_output_name(g, g->heads[0], name, sizeof name) == 0);
    CHECK(strcmp(name, "add_output") == 0);
    CHECK(acc_graph_output_name(g, g->heads[1], name, sizeof name) == 0);
    CHECK(strcmp(name, "s_output1") == 0);
    acc_graph_free(g);
  }
  g = parse_graph(kPlain, 1, &status, error, sizeof error);
  CHECK(status == MX_ACC_ERR_INVALID_ARG && g == NULL);
  CHECK(strstr(error, "node 0 (a)") != NULL);
  static const char kEmpty[] = "{'nodes': [], 'arg_nodes': [], 'heads': []}";
  g = parse_graph(kEmpty, 1, &status, error, sizeof error);
  CHECK(status == MX_ACC_OK && g != NULL && g->num_nodes == 0 && g->nodes == NULL);
  CHECK(g != NULL && acc_graph_find_variable(g, "a") == -1);
  acc_graph_free(g);
}

typedef struct bad_graph {
  const char *json;
  int require;
  const char *message; /* a substring the error must contain */
} bad_graph;

static const bad_graph kBadGraphs[] = {
    {"{", 1, "offset 1"},
    {"[]", 1, "not an object"},
    {"{'arg_nodes': [], 'heads': []}", 1, "\"nodes\""},
    {"{'nodes': {}, 'arg_nodes': [], 'heads': []}", 1, "\"nodes\""},
    {"{'nodes': [], 'heads': []}", 1, "\"arg_nodes\""},
    {"{'nodes': [], 'arg_nodes': []}", 1, "\"heads\""},
    {"{'nodes': [], 'arg_nodes': [], 'heads': 1}", 1, "\"heads\""},
    {GRAPH("1", "[]", "[]"), 1, "node 0: is not an object"},
    {GRAPH(X ", {'name': 'r', 'inputs': [[0, 0]]}", "[0]", "[]"), 1, "node 1 (r)"},
    {GRAPH(X ", {'op': 5, 'name': 'r', 'inputs': []}", "[0]", "[]"), 1, "node 1 (r)"},
    {GRAPH(X ", {'op': 'relu', 'inputs': [[0, 0]]}", "[0]", "[]"), 1, "node 1:"},
    {GRAPH(X ", {'op': 'relu', 'name': null, 'inputs': []}", "[0]", "[]"), 1, "node 1:"},
    {GRAPH(X ", {'op': 'relu', 'name': 'r', 'attrs': {" ANN("[[2]]", "[0]") "}}", "[0]", "[]"),
     1, "node 1 (r)"},
    {GRAPH(X ", {'op': 'relu', 'name': 'r', 'inputs': {}, 'attrs': {" ANN("[[2]]", "[0]") "}}",
           "[0]", "[]"), 1, "node 1 (r)"},
    {GRAPH(X "," OP("r", "[0]"), "[0]", "[]"), 1, "node 1 (r): input 0"},
    {GRAPH(X "," OP("r", "[[0]]"), "[0]", "[]"), 1, "node 1 (r): input 0"},
    {GRAPH(X "," OP("r", "[[0, 0, 0, 0]]"), "[0]", "[]"), 1, "node 1 (r): input 0"},
    {GRAPH(X "," OP("r", "[[0.5, 0]]"), "[0]", "[]"), 1, "node 1 (r): input 0"},
    {GRAPH(X "," OP("r", "[[0, -1]]"), "[0]", "[]"), 1, "node 1 (r): input 0"},
    {GRAPH(X "," OP("r", "[[0, 0, -1]]"), "[0]", "[]"), 1, "node 1 (r): input 0"},
    {GRAPH(X "," OP("r", "[['0', 0]]"), "[0]", "[]"), 1, "node 1 (r): input 0"},
    {GRAPH(X "," OP("r", "[[0, 0], [1, 0]]"), "[0]", "[]"), 1, "node 1 (r): input 1"},
    {GRAPH(X "," OP("r", "[[2, 0]]") "," OP("s", "[[0, 0]]"), "[0]", "[]"), 1, "precede"},
    {GRAPH(X "," OP("r", "[[0, 1]]"), "[0]", "[]"), 1, "output"},
    {GRAPH("{'op': 'null', 'name': 'v', 'inputs': [[0, 0]]}", "[0]", "[]"), 0, "node 0 (v)"},
    {GRAPH(X ",{'op': 'null', 'name': 'v', 'inputs': [[0, 0]], 'attrs': {" ANN("[[2]]", "[0]")
           ", '__kind__': 'data'}}", "[0]", "[]"), 1, "node 1 (v): is a variable"},
    {GRAPH(X ", {'op': 'relu', 'name': 'r', 'inputs': [], 'attrs': []}", "[0]", "[]"), 1,
     "node 1 (r)"},
    {GRAPH(X ", {'op': 'relu', 'name': 'r', 'inputs': [], 'attrs': {'k': 3, "
           ANN("[[2]]", "[0]") "}}", "[0]", "[]"), 1, "attribute \"k\""},
    {GRAPH(X ", {'op': 'relu', 'name': 'r', 'inputs': [], 'attrs': {" ANN("[[2]]", "[0]")
           ", 'k': '1'}, 'param': {'k': '2'}}", "[0]", "[]"), 1,
     "node 1 (r): attribute \"k\" is given twice"},
    {GRAPH(X ", {'op': 'relu', 'name': 'r', 'inputs': [], 'attr': {}, 'param': 5}", "[0]",
           "[]"), 0, "node 1 (r): \"param\" is not an object"},
    {GRAPH(X ", {'op': 'relu', 'name': 'r', 'inputs': [], 'attr': {'a': 'x'}, "
           "'param': {'b': []}}", "[0]", "[]"), 0, "attribute \"b\" is not a string"},
    {GRAPH(X "," OP("r", "[[0, 0]]"), "['0']", "[]"), 1, "arg_nodes[0]"},
    {GRAPH(X "," OP("r", "[[0, 0]]"), "[0, 2]", "[]"), 1, "arg_nodes[1]"},
    {GRAPH(X "," OP("r", "[[0, 0]]"), "[1]", "[]"), 1, "arg_nodes[0]"},
    {GRAPH(X "," OP("r", "[[0, 0]]"), "[-1]", "[]"), 1, "arg_nodes[0]"},
    {GRAPH(X "," OP("r", "[[0, 0]]"), "[0]", "[[1]]"), 1, "heads[0]"},
    {GRAPH(X "," OP("r", "[[0, 0]]"), "[0]", "[[1, 0], [2, 0]]"), 1, "heads[1]"},
    {GRAPH(X "," OP("r", "[[0, 0]]"), "[0]", "[[1, 1]]"), 1, "heads[0]"},
    {GRAPH(X "," OP("r", "[[0, 0]]"), "[0]", "[5]"), 1, "heads[0]"},
    {GRAPH(X "," VAR("y", "weight") "," VAR("x", "weight"), "[0, 1, 2]", "[]"), 1,
     "node 2 (x): variable name is also used by node 0"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': []},{'op': 'null', 'name': 'x', 'inputs': []}",
           "[0, 1]", "[]"), 0, "node 1 (x)"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {'__kind__': 'data'}}", "[0]",
           "[]"), 1, "node 0 (x): has no __out_shapes__"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {'__out_shapes__': '[[1]]',"
           " '__kind__': 'data'}}", "[0]", "[]"), 1, "but not __out_dtypes__"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {'__out_dtypes__': '[0]',"
           " '__kind__': 'data'}}", "[0]", "[]"), 0, "but not __out_shapes__"},
    {GRAPH(X ", {'op': 'relu', 'name': 'r', 'inputs': [[0, 0]], 'attrs': {"
           ANN("[[2],[2]]", "[0]") "}}", "[0]", "[]"), 1, "node 1 (r): __out_dtypes__"},
    {GRAPH(X ", {'op': 'relu', 'name': 'r', 'inputs': [[0, 0]], 'attrs': {"
           ANN("[[2]]", "[0, 0]") "}}", "[0]", "[]"), 1, "node 1 (r): __out_dtypes__"},
    {GRAPH(X ", {'op': 'relu', 'name': 'r', 'inputs': [[0, 0]], 'attrs': {"
           ANN("[]", "[]") "}}", "[0]", "[]"), 1, "at least 1"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {" ANN("[[1],[2]]", "[0,0]")
           ", '__kind__': 'data'}}", "[0]", "[]"), 1, "exactly 1"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {" ANN("[]", "[]")
           ", '__kind__': 'data'}}", "[0]", "[]"), 1, "exactly 1"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {"
           ANN("[[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]]", "[0]") ", '__kind__': 'data'}}", "[0]",
           "[]"), 1, "more than 16 dimensions"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {"
           ANN("[[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]]", "[0]") ", '__kind__': 'data'}}",
           "[0]", "[]"), 1, "node 0 (x): __out_shapes__"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {" ANN("[[2,-1]]", "[0]")
           ", '__kind__': 'data'}}", "[0]", "[]"), 1, "negative"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {" ANN("[[2]]", "[7]")
           ", '__kind__': 'data'}}", "[0]", "[]"), 1, "7 is not a TensorDType"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {" ANN("[[2]]", "[-1]")
           ", '__kind__': 'data'}}", "[0]", "[]"), 1, "-1 is not a TensorDType"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {" ANN("[1,2]", "[0]")
           ", '__kind__': 'data'}}", "[0]", "[]"), 1, "not a list of shapes"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {" ANN("[[1.5]]", "[0]")
           ", '__kind__': 'data'}}", "[0]", "[]"), 1, "not a list of shapes"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {" ANN("[[2]]", "float32")
           ", '__kind__': 'data'}}", "[0]", "[]"), 1, "__out_dtypes__"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {" ANN("[[2]]", "[0]") "}}",
           "[0]", "[]"), 1, "node 0 (x): variable has no __kind__"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {" ANN("[[2]]", "[0]")
           ", '__kind__': 'input'}}", "[0]", "[]"), 1, "\"input\""},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {'__kind__': 'Data'}}", "[0]",
           "[]"), 0, "__kind__"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': [], 'attrs': {" ANN("[[2]]", "[9]") "}}",
           "[0]", "[]"), 0, "9 is not a TensorDType"},
    {GRAPH("{'op': 'null', 'name': 'x', 'inputs': []}, {'op': 'r', 'name': 'r',"
           " 'inputs': [[0, 0]], 'attrs': {" ANN("[[2]]", "[0]") "}}", "[0]", "[[1, 1]]"),
     0, "heads[0]"},
    {"{'nodes': [], 'nodes': [], 'arg_nodes': [], 'heads': []}", 0, "duplicate"},
    {"{'nodes': ['\\u0000'], 'arg_nodes': [], 'heads': []}", 0, "\\u0000"},
};

static void test_graph_errors(void) {
  for (size_t i = 0; i < sizeof kBadGraphs / sizeof kBadGraphs[0]; i++) {
    const bad_graph *bad = &kBadGraphs[i];
    char error[256] = "untouched";
    int status = -1;
    acc_graph *g = parse_graph(bad->json, bad->require, &status, error, sizeof error);
    int ok = status == MX_ACC_ERR_INVALID_ARG && g == NULL && strstr(error, bad->message) != NULL;
    if (!ok) printf("  graph %zu: status %d, error '%s', expected '%s'\n", i, status, error, bad->message);
    CHECK_MSG(ok, bad->json);
    acc_graph_free(g);
  }
}

static void test_graph_arguments(void) {
  char error[64];
  acc_graph *g = (acc_graph *)&g;
  CHECK(acc_graph_parse(NULL, 1, &g, error, sizeof error) == MX_ACC_ERR_INVALID_ARG);
  CHECK(g == NULL && error[0] != '\0');
  CHECK(acc_graph_parse("{}", 1, NULL, error, sizeof error) == MX_ACC_ERR_INVALID_ARG);
  CHECK(acc_graph_parse("{}", 1, &g, NULL, 0) == MX_ACC_ERR_INVALID_ARG && g == NULL);
  char tiny[8];
  CHECK(acc_graph_parse("{}", 1, &g, tiny, sizeof tiny) == MX_ACC_ERR_INVALID_ARG);
  CHECK(strlen(tiny) == sizeof tiny - 1);
  /* A long node name is cut short in the message, never overflowing it. */
  char *name = repeat("n", 1000, "", "");
  size_t size = 2200;
  char *json = malloc(size);
  if (json == NULL) abort();
  snprintf(json, size, "{\"nodes\": [{\"op\": \"null\", \"name\": \"%s\", \"inputs\": []}],"
           " \"arg_nodes\": [0], \"heads\": []}", name);
  CHECK(acc_graph_parse(json, 1, &g, error, sizeof error) == MX_ACC_ERR_INVALID_ARG);
  CHECK(strncmp(error, "node 0 (nnn", 11) == 0 && strlen(error) == sizeof error - 1);
  free(json);
  free(name);
}

/* Random byte edits of the conv net: anything but a crash or leak is fine. */
static void test_graph_fuzz(void) {
  char *json = quoted(kConvNet);
  size_t length = strlen(json);
  static const char kBytes[] = "{}[],:\"0123456789-.()nulabxyz_ ";
  uint64_t state = 99;
  int parsed = 0;
  for (int round = 0; round < 5000; round++) {
    char *mutated = malloc(length + 1);
    if (mutated == NULL) abort();
    memcpy(mutated, json, length + 1);
    size_t at = next_random(&state) % length;
    mutated[at] = kBytes[next_random(&state) % (sizeof kBytes - 1)];
    acc_graph *g = NULL;
    char error[128];
    int status = acc_graph_parse(mutated, (int)(round & 1), &g, error, sizeof error);
    if (status == MX_ACC_OK) {
      parsed++;
      for (size_t h = 0; h < g->num_heads; h++) {
        char name[64];
        acc_graph_output_name(g, g->heads[h], name, sizeof name);
      }
    } else if (status != MX_ACC_ERR_INVALID_ARG || g != NULL || error[0] == '\0') {
      CHECK_MSG(0, mutated);
    }
    acc_graph_free(g);
    free(mutated);
  }
  CHECK(parsed > 0);
  free(json);
}

/* ------------------------------------------------------------------------
 * Allocation failures
 * ---------------------------------------------------------------------- */

#ifdef ACC_TEST_WRAP_MALLOC
/* Fails the first, second, ... allocation of one parse until a parse
 * succeeds; each failing run must report memory exhaustion. */
static void test_json_allocation_failures(const char *json, size_t length) {
  int bad = 0;
  for (long allowed = 0; allowed < 100000; allowed++) {
    acc_json_doc *doc = NULL;
    char error[128] = "";
    g_allocations_failed = 0;
    g_allocations_left = allowed;
    int status = acc_json_parse(json, length, &doc, error, sizeof error);
    g_allocations_left = -1;
    if (g_allocations_failed == 0) {
      CHECK(status == 0);
      acc_json_free(doc);
      printf("note: JSON parse survived failure of each of its %ld allocations\n", allowed);
      break;
    }
    if (status != -1 || doc != NULL || strstr(error, "out of memory") == NULL) bad++;
    acc_json_free(doc);
  }
  CHECK(bad == 0);
}

static void test_graph_allocation_failures(const char *text) {
  char *json = quoted(text);
  int bad = 0;
  for (long allowed = 0; allowed < 100000; allowed++) {
    acc_graph *g = NULL;
    char error[256] = "";
    g_allocations_failed = 0;
    g_allocations_left = allowed;
    int status = acc_graph_parse(json, 1, &g, error, sizeof error);
    g_allocations_left = -1;
    if (g_allocations_failed == 0) {
      CHECK(status == MX_ACC_OK && g != NULL);
      acc_graph_free(g);
      printf("note: graph parse survived failure of each of its %ld allocations\n", allowed);
      break;
    }
    if (status != MX_ACC_ERR_OUT_OF_MEMORY || g != NULL || strstr(error, "out of memory") == NULL) {
      if (bad++ < 5) printf("  allocation %ld: status %d, error '%s'\n", allowed, status, error);
    }
    acc_graph_free(g);
  }
  CHECK(bad == 0);
  free(json);
}

static void test_allocation_failures(void) {
  /* Big enough to need several arena blocks and scratch-stack growth. */
  size_t size = 200000;
  char *json = malloc(size);
  if (json == NULL) abort();
  size_t used = (size_t)snprintf(json, size, "[");
  for (int i = 0; i < 3000 && used + 64 < size; i++) {
    used += (size_t)snprintf(json + used, size - used, "%s{\"k%d\":[\"%d\",[[%d]]]}", i ? "," : "", i, i, i);
  }
  used += (size_t)snprintf(json + used, size - used, "]");
  test_json_allocation_failures(json, used);
  free(json);
  test_graph_allocation_failures(kConvNet);
  test_graph_allocation_failures(kLegacy);
}
#else
static void test_allocation_failures(void) {
  printf("note: built without ACC_TEST_WRAP_MALLOC; allocation-failure tests skipped\n");
}
#endif

int main(void) {
  test_json_scalars();
  test_json_containers();
  test_json_member_order();
  test_json_escapes();
  test_json_numbers();
  test_json_long_numbers();
  test_json_numbers_round_trip();
  test_json_integer();
  test_json_bad_numbers();
  test_json_malformed();
  test_json_embedded_nul();
  test_json_truncation();
  test_json_depth();
  test_json_error_reporting();
  test_json_large();
  test_json_fuzz();
  test_attr_int();
  test_attr_float();
  test_attr_bool_and_words();
  test_attr_int_tuple();
  test_attr_int_tuple_list();
  test_locale_independence();
  test_graph_conv_net();
  test_graph_multi_output();
  test_graph_legacy_attr_keys();
  test_graph_unannotated();
  test_graph_errors();
  test_graph_arguments();
  test_graph_fuzz();
  test_allocation_failures();
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
