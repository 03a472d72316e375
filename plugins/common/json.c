/*
 * Strict JSON (RFC 8259) parser; see json.h for the contract.
 *
 * Design notes for plugin authors reading this as a template:
 *
 *  - Every node, string and array of the finished tree lives in an arena
 *    owned by the document, so freeing a document is freeing a short list of
 *    blocks, and a failed parse releases everything in one place.
 *  - Arrays and objects are collected on scratch stacks while they are being
 *    parsed (their size is unknown until the closing bracket) and copied into
 *    the arena once, so the tree holds plain contiguous arrays.
 *  - Recursion depth is bounded by ACC_JSON_MAX_DEPTH, so hostile input
 *    cannot exhaust the C stack.
 *  - Duplicate keys are found by sorting a copy of each object's members:
 *    O(n log n) even for objects with many keys.
 *  - Numbers: the grammar is checked here byte by byte and the digits are
 *    converted by decimal.h, the same in every locale and correctly rounded.
 */
#include "json.h"

#include "decimal.h"

#include <float.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Arena
 * ---------------------------------------------------------------------- */

enum { kArenaBlockSize = 16 * 1024 };

typedef struct arena_block {
  struct arena_block *next;
  size_t used;
  size_t capacity;
  max_align_t data[]; /* max_align_t elements keep every allocation aligned */
} arena_block;

struct acc_json_doc {
  arena_block *blocks; /* the block serving small requests comes first */
  acc_json_value root;
};

/* Rounds size up to keep every allocation aligned for any type; 0 for a
 * zero size or on overflow. */
static size_t aligned_size(size_t size) {
  const size_t align = _Alignof(max_align_t);
  if (size == 0 || size > SIZE_MAX - (align - 1)) return 0;
  return (size + align - 1) / align * align;
}

static arena_block *arena_new_block(size_t capacity) {
  if (capacity > SIZE_MAX - sizeof(arena_block)) return NULL;
  arena_block *block = malloc(sizeof(arena_block) + capacity);
  if (block == NULL) return NULL;
  block->next = NULL;
  block->used = 0;
  block->capacity = capacity;
  return block;
}

/* Returns size bytes of aligned storage owned by doc, or NULL when memory is
 * exhausted. Zero-byte requests return NULL too, and callers never make
 * them: empty arrays are represented by a NULL pointer and a zero count. */
static void *arena_alloc(acc_json_doc *doc, size_t size) {
  size_t rounded = aligned_size(size);
  if (rounded == 0) return NULL;
  arena_block *block = doc->blocks;
  if (block == NULL || block->capacity - block->used < rounded) {
    /* A large request gets a block of exactly its size, linked behind the
     * current one so that the room left there still serves small ones. */
    int alone = rounded > kArenaBlockSize / 4;
    block = arena_new_block(alone ? rounded : kArenaBlockSize);
    if (block == NULL) return NULL;
    arena_block **link = alone && doc->blocks != NULL ? &doc->blocks->next : &doc->blocks;
    block->next = *link;
    *link = block;
  }
  void *result = (char *)block->data + block->used;
  block->used += rounded;
  return result;
}

static void *arena_alloc_array(acc_json_doc *doc, size_t count, size_t size) {
  if (count != 0 && size > SIZE_MAX / count) return NULL;
  return arena_alloc(doc, count * size);
}

void acc_json_free(acc_json_doc *doc) {
  if (doc == NULL) return;
  arena_block *block = doc->blocks;
  while (block != NULL) {
    arena_block *next = block->next;
    free(block);
    block = next;
  }
  free(doc);
}

/* ------------------------------------------------------------------------
 * Scratch stacks (owned by the parser, not by the document)
 * ---------------------------------------------------------------------- */

/* A member while its object is still open; offset is where its key starts,
 * kept only to name the byte offset of a duplicate key. */
typedef struct pending_member {
  acc_json_member member;
  size_t offset;
} pending_member;

typedef struct stack {
  void *items;
  size_t count;
  size_t capacity;
  size_t item_size;
} stack;

/* Makes room for one more item; returns the slot or NULL on failure. */
static void *stack_push(stack *s) {
  if (s->count == s->capacity) {
    size_t capacity = s->capacity == 0 ? 16 : s->capacity;
    if (s->capacity != 0) {
      if (capacity > SIZE_MAX / 2) return NULL;
      capacity *= 2;
    }
    if (capacity > SIZE_MAX / s->item_size) return NULL;
    void *items = realloc(s->items, capacity * s->item_size);
    if (items == NULL) return NULL;
    s->items = items;
    s->capacity = capacity;
  }
  return (char *)s->items + s->count++ * s->item_size;
}

/* ------------------------------------------------------------------------
 * Parser state and errors
 * ---------------------------------------------------------------------- */

typedef struct parser {
  const unsigned char *text;
  size_t length;
  size_t pos;
  int depth;
  acc_json_doc *doc;
  stack values;  /* acc_json_value: items of the open arrays */
  stack members; /* pending_member: members of the open objects */
  char *error;
  size_t error_size;
} parser;

#if defined(__GNUC__)
#define JSON_PRINTF_LIKE __attribute__((format(printf, 3, 4)))
#else
#define JSON_PRINTF_LIKE
#endif

static int fail_at(parser *p, size_t offset, const char *format, ...)
    JSON_PRINTF_LIKE;

/* Writes "offset N: <message>" and returns -1. Every caller returns at once
 * and the parse stops, so the message always describes the first error. */
static int fail_at(parser *p, size_t offset, const char *format, ...) {
  if (p->error == NULL || p->error_size == 0) return -1;
  int written = snprintf(p->error, p->error_size, "offset %zu: ", offset);
  if (written < 0 || (size_t)written >= p->error_size) return -1;
  va_list args;
  va_start(args, format);
  vsnprintf(p->error + written, p->error_size - (size_t)written, format, args);
  va_end(args);
  return -1;
}

/* The fixed wording lets callers (graph.c) tell memory exhaustion from
 * malformed input, as json.h offers no separate return code for it. */
static int fail_out_of_memory(parser *p) {
  return fail_at(p, p->pos, "out of memory");
}

static int at_end(const parser *p) { return p->pos >= p->length; }

static int peek(const parser *p) { return at_end(p) ? -1 : p->text[p->pos]; }

static void skip_whitespace(parser *p) {
  while (!at_end(p)) {
    unsigned char c = p->text[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
    p->pos++;
  }
}

static int describe_unexpected(parser *p, const char *expected) {
  if (at_end(p)) return fail_at(p, p->pos, "unexpected end of input, expected %s", expected);
  return fail_at(p, p->pos, "unexpected byte 0x%02x, expected %s",
                 p->text[p->pos], expected);
}

static int parse_value(parser *p, acc_json_value *out);

/* ------------------------------------------------------------------------
 * Literals
 * ---------------------------------------------------------------------- */

static int parse_literal(parser *p, const char *word, acc_json_value *out,
                         acc_json_type type, int boolean) {
  size_t word_length = strlen(word);
  if (p->length - p->pos < word_length ||
      memcmp(p->text + p->pos, word, word_length) != 0) {
    return fail_at(p, p->pos, "invalid literal, expected '%s'", word);
  }
  p->pos += word_length;
  out->type = type;
  if (type == ACC_JSON_BOOL) out->as.boolean = boolean;
  return 0;
}

/* ------------------------------------------------------------------------
 * Numbers
 * ---------------------------------------------------------------------- */

static int is_digit(int c) { return c >= '0' && c <= '9'; }

/* Reads [0-9]+ into d; returns the number of digits read. */
static size_t read_digits(parser *p, acc_decimal *d, int in_fraction) {
  size_t start = p->pos;
  while (!at_end(p) && is_digit(p->text[p->pos])) {
    acc_decimal_add_digit(d, (char)p->text[p->pos], in_fraction);
    p->pos++;
  }
  return p->pos - start;
}

static int parse_exponent(parser *p, acc_decimal *d) {
  int negative = 0;
  p->pos++; /* 'e' or 'E' */
  if (peek(p) == '+' || peek(p) == '-') negative = p->text[p->pos++] == '-';
  if (!is_digit(peek(p))) return describe_unexpected(p, "exponent digits");
  long long value = 0;
  while (!at_end(p) && is_digit(p->text[p->pos])) {
    value = acc_decimal_exponent_step(value, (char)p->text[p->pos++]);
  }
  acc_decimal_scale(d, negative ? -value : value);
  return 0;
}

static int parse_number(parser *p, acc_json_value *out) {
  size_t start = p->pos;
  acc_decimal d;
  acc_decimal_init(&d);
  int negative = peek(p) == '-';
  if (negative) p->pos++;
  if (!is_digit(peek(p))) return describe_unexpected(p, "a digit");
  if (p->text[p->pos] == '0') {
    p->pos++;
    if (is_digit(peek(p))) return fail_at(p, start, "leading zero in number");
  } else {
    read_digits(p, &d, 0);
  }
  if (peek(p) == '.') {
    p->pos++;
    if (read_digits(p, &d, 1) == 0) return describe_unexpected(p, "a fraction digit");
  }
  if ((peek(p) == 'e' || peek(p) == 'E') && parse_exponent(p, &d) != 0) return -1;
  double value = acc_decimal_to_double(&d, negative);
  if (value > DBL_MAX || value < -DBL_MAX) {
    return fail_at(p, start, "number out of range of a double");
  }
  out->type = ACC_JSON_NUMBER;
  out->as.number = value;
  return 0;
}

/* ------------------------------------------------------------------------
 * Strings
 * ---------------------------------------------------------------------- */

/* Finds the closing quote of the string opening at p->pos. Knowing the end
 * first sizes the decoded copy (never longer than the raw text) and bounds
 * every read of the decoder. */
static int find_string_end(parser *p, size_t *end) {
  size_t i = p->pos + 1;
  while (i < p->length) {
    unsigned char c = p->text[i];
    if (c == '"') {
      *end = i;
      return 0;
    }
    if (c == '\\' && p->length - i < 2) break;
    i += c == '\\' ? 2 : 1;
  }
  return fail_at(p, p->pos, "unterminated string");
}

/* Length of the well-formed UTF-8 sequence at s (at most available bytes),
 * or 0. Follows Unicode table 3-7, which excludes overlong forms, encoded
 * surrogates and code points above U+10FFFF. */
static size_t utf8_sequence_length(const unsigned char *s, size_t available) {
  unsigned char lead = s[0];
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  size_t length;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (available < length || s[1] < low || s[1] > high) return 0;
  for (size_t i = 2; i < length; i++) {
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  }
  return length;
}

static size_t encode_utf8(unsigned long code_point, char *out) {
  if (code_point < 0x80) {
    out[0] = (char)code_point;
    return 1;
  }
  if (code_point < 0x800) {
    out[0] = (char)(0xC0 | (code_point >> 6));
    out[1] = (char)(0x80 | (code_point & 0x3F));
    return 2;
  }
  if (code_point < 0x10000) {
    out[0] = (char)(0xE0 | (code_point >> 12));
    out[1] = (char)(0x80 | ((code_point >> 6) & 0x3F));
    out[2] = (char)(0x80 | (code_point & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (code_point >> 18));
  out[1] = (char)(0x80 | ((code_point >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((code_point >> 6) & 0x3F));
  out[3] = (char)(0x80 | (code_point & 0x3F));
  return 4;
}

static int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Reads "\uHHHH" at p->text[at], which must end by end; returns 0 or -1. */
static int read_u_escape(const parser *p, size_t at, size_t end,
                         unsigned long *code_unit) {
  if (at > end || end - at < 6) return -1;
  if (p->text[at] != '\\' || p->text[at + 1] != 'u') return -1;
  unsigned long value = 0;
  for (size_t i = at + 2; i < at + 6; i++) {
    int digit = hex_value(p->text[i]);
    if (digit < 0) return -1;
    value = value * 16 + (unsigned long)digit;
  }
  *code_unit = value;
  return 0;
}

/* Decodes "\uHHHH", or a "\uD8xx\uDCxx" surrogate pair, at p->pos. */
static int decode_u_escape(parser *p, size_t end, char *out, size_t *n) {
  size_t start = p->pos;
  unsigned long code_point;
  if (read_u_escape(p, start, end, &code_point) != 0) {
    return fail_at(p, start, "invalid \\u escape (expected 4 hex digits)");
  }
  p->pos += 6;
  if (code_point >= 0xDC00 && code_point <= 0xDFFF) {
    return fail_at(p, start, "unpaired low surrogate \\u%04lX", code_point);
  }
  if (code_point >= 0xD800 && code_point <= 0xDBFF) {
    unsigned long low;
    if (read_u_escape(p, p->pos, end, &low) != 0 || low < 0xDC00 || low > 0xDFFF) {
      return fail_at(p, start, "high surrogate \\u%04lX not followed by a low surrogate",
                     code_point);
    }
    p->pos += 6;
    code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
  }
  if (code_point == 0) return fail_at(p, start, "\\u0000 is not allowed in strings");
  *n += encode_utf8(code_point, out + *n);
  return 0;
}

static int decode_escape(parser *p, size_t end, char *out, size_t *n) {
  /* find_string_end guarantees a byte after the backslash before end. */
  unsigned char c = p->text[p->pos + 1];
  char decoded;
  switch (c) {
    case '"': decoded = '"'; break;
    case '\\': decoded = '\\'; break;
    case '/': decoded = '/'; break;
    case 'b': decoded = '\b'; break;
    case 'f': decoded = '\f'; break;
    case 'n': decoded = '\n'; break;
    case 'r': decoded = '\r'; break;
    case 't': decoded = '\t'; break;
    case 'u': return decode_u_escape(p, end, out, n);
    default: return fail_at(p, p->pos, "invalid escape sequence");
  }
  out[(*n)++] = decoded;
  p->pos += 2;
  return 0;
}

static int copy_utf8(parser *p, size_t end, char *out, size_t *n) {
  size_t length = utf8_sequence_length(p->text + p->pos, end - p->pos);
  if (length == 0) return fail_at(p, p->pos, "invalid UTF-8 in string");
  memcpy(out + *n, p->text + p->pos, length);
  *n += length;
  p->pos += length;
  return 0;
}

/* Decodes the string body between p->pos (opening quote) and end (closing
 * quote) into out, which has room for end - p->pos bytes. */
static int decode_string(parser *p, size_t end, char *out, size_t *length) {
  size_t n = 0;
  p->pos++;
  while (p->pos < end) {
    unsigned char c = p->text[p->pos];
    if (c == '\\') {
      if (decode_escape(p, end, out, &n) != 0) return -1;
    } else if (c < 0x20) {
      return fail_at(p, p->pos, "unescaped control character 0x%02x in string", c);
    } else if (c < 0x80) {
      out[n++] = (char)c;
      p->pos++;
    } else if (copy_utf8(p, end, out, &n) != 0) {
      return -1;
    }
  }
  out[n] = '\0';
  *length = n;
  p->pos = end + 1;
  return 0;
}

static int parse_string(parser *p, const char **chars, size_t *length) {
  size_t end = 0;
  if (find_string_end(p, &end) != 0) return -1;
  /* Raw bytes between the quotes, plus one for the terminating NUL. */
  char *out = arena_alloc(p->doc, end - p->pos);
  if (out == NULL) return fail_out_of_memory(p);
  if (decode_string(p, end, out, length) != 0) return -1;
  *chars = out;
  return 0;
}

/* ------------------------------------------------------------------------
 * Arrays and objects
 * ---------------------------------------------------------------------- */

static int finish_array(parser *p, size_t base, acc_json_value *out) {
  size_t count = p->values.count - base;
  acc_json_value *items = NULL;
  if (count > 0) {
    items = arena_alloc_array(p->doc, count, sizeof *items);
    if (items == NULL) return fail_out_of_memory(p);
    memcpy(items, (acc_json_value *)p->values.items + base, count * sizeof *items);
  }
  p->values.count = base;
  out->type = ACC_JSON_ARRAY;
  out->as.array.items = items;
  out->as.array.count = count;
  return 0;
}

static int parse_array(parser *p, acc_json_value *out) {
  size_t base = p->values.count;
  p->pos++; /* '[' */
  skip_whitespace(p);
  if (peek(p) == ']') {
    p->pos++;
    return finish_array(p, base, out);
  }
  for (;;) {
    acc_json_value item;
    if (parse_value(p, &item) != 0) return -1;
    acc_json_value *slot = stack_push(&p->values);
    if (slot == NULL) return fail_out_of_memory(p);
    *slot = item;
    skip_whitespace(p);
    if (peek(p) == ']') {
      p->pos++;
      return finish_array(p, base, out);
    }
    if (peek(p) != ',') return describe_unexpected(p, "',' or ']'");
    p->pos++;
  }
}

/* Orders members by key bytes, then by position, so that a duplicate sorts
 * directly after the first occurrence and is the one reported. */
static int compare_pending(const void *a, const void *b) {
  const pending_member *x = a;
  const pending_member *y = b;
  size_t shorter = x->member.key_length < y->member.key_length
                       ? x->member.key_length : y->member.key_length;
  int order = memcmp(x->member.key, y->member.key, shorter);
  if (order != 0) return order;
  if (x->member.key_length != y->member.key_length) {
    return x->member.key_length < y->member.key_length ? -1 : 1;
  }
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int check_duplicate_keys(parser *p, pending_member *members, size_t count) {
  if (count < 2) return 0;
  qsort(members, count, sizeof *members, compare_pending);
  for (size_t i = 1; i < count; i++) {
    const acc_json_member *a = &members[i - 1].member;
    const acc_json_member *b = &members[i].member;
    if (a->key_length == b->key_length && memcmp(a->key, b->key, a->key_length) == 0) {
      return fail_at(p, members[i].offset, "duplicate object key");
    }
  }
  return 0;
}

static int finish_object(parser *p, size_t base, acc_json_value *out) {
  size_t count = p->members.count - base;
  acc_json_member *members = NULL;
  if (count > 0) {
    /* Only now: before the first member is pushed, items is NULL, and even
     * NULL + 0 is undefined in C. */
    pending_member *pending = (pending_member *)p->members.items + base;
    members = arena_alloc_array(p->doc, count, sizeof *members);
    if (members == NULL) return fail_out_of_memory(p);
    for (size_t i = 0; i < count; i++) members[i] = pending[i].member;
    /* Sorting reorders the scratch copies only; the tree keeps input order. */
    if (check_duplicate_keys(p, pending, count) != 0) return -1;
  }
  p->members.count = base;
  out->type = ACC_JSON_OBJECT;
  out->as.object.members = members;
  out->as.object.count = count;
  return 0;
}

static int parse_member(parser *p) {
  pending_member member;
  skip_whitespace(p);
  if (peek(p) != '"') return describe_unexpected(p, "a string key");
  member.offset = p->pos;
  if (parse_string(p, &member.member.key, &member.member.key_length) != 0) return -1;
  skip_whitespace(p);
  if (peek(p) != ':') return describe_unexpected(p, "':'");
  p->pos++;
  if (parse_value(p, &member.member.value) != 0) return -1;
  pending_member *slot = stack_push(&p->members);
  if (slot == NULL) return fail_out_of_memory(p);
  *slot = member;
  return 0;
}

static int parse_object(parser *p, acc_json_value *out) {
  size_t base = p->members.count;
  p->pos++; /* '{' */
  skip_whitespace(p);
  if (peek(p) == '}') {
    p->pos++;
    return finish_object(p, base, out);
  }
  for (;;) {
    if (parse_member(p) != 0) return -1;
    skip_whitespace(p);
    if (peek(p) == '}') {
      p->pos++;
      return finish_object(p, base, out);
    }
    if (peek(p) != ',') return describe_unexpected(p, "',' or '}'");
    p->pos++;
  }
}

/* ------------------------------------------------------------------------
 * Values and documents
 * ---------------------------------------------------------------------- */

static int parse_nested(parser *p, int (*parse)(parser *, acc_json_value *),
                        acc_json_value *out) {
  if (p->depth >= ACC_JSON_MAX_DEPTH) {
    return fail_at(p, p->pos, "nesting deeper than %d levels", ACC_JSON_MAX_DEPTH);
  }
  p->depth++;
  int status = parse(p, out);
  p->depth--;
  return status;
}

static int parse_value(parser *p, acc_json_value *out) {
  skip_whitespace(p);
  int c = peek(p);
  switch (c) {
    case '{': return parse_nested(p, parse_object, out);
    case '[': return parse_nested(p, parse_array, out);
    case '"':
      out->type = ACC_JSON_STRING;
      return parse_string(p, &out->as.string.chars, &out->as.string.length);
    case 't': return parse_literal(p, "true", out, ACC_JSON_BOOL, 1);
    case 'f': return parse_literal(p, "false", out, ACC_JSON_BOOL, 0);
    case 'n': return parse_literal(p, "null", out, ACC_JSON_NULL, 0);
    default:
      if (c == '-' || is_digit(c)) return parse_number(p, out);
      return describe_unexpected(p, "a JSON value");
  }
}

static int parse_document(parser *p) {
  if (parse_value(p, &p->doc->root) != 0) return -1;
  skip_whitespace(p);
  if (!at_end(p)) return fail_at(p, p->pos, "unexpected data after the JSON value");
  return 0;
}

int acc_json_parse(const char *text, size_t length, acc_json_doc **doc,
                   char *error, size_t error_size) {
  parser p = {
      .text = (const unsigned char *)text, .length = length, .pos = 0,
      .depth = 0, .doc = NULL,
      .values = {NULL, 0, 0, sizeof(acc_json_value)},
      .members = {NULL, 0, 0, sizeof(pending_member)},
      .error = error, .error_size = error_size,
  };
  if (error != NULL && error_size > 0) error[0] = '\0';
  if (doc == NULL) return fail_at(&p, 0, "no document pointer given");
  *doc = NULL;
  if (text == NULL) return fail_at(&p, 0, "no text given");
  p.doc = malloc(sizeof *p.doc);
  if (p.doc == NULL) return fail_out_of_memory(&p);
  p.doc->blocks = NULL;
  int status = parse_document(&p);
  free(p.values.items);
  free(p.members.items);
  if (status != 0) {
    acc_json_free(p.doc);
    return -1;
  }
  *doc = p.doc;
  return 0;
}

/* ------------------------------------------------------------------------
 * Accessors
 * ---------------------------------------------------------------------- */

const acc_json_value *acc_json_root(const acc_json_doc *doc) {
  return doc == NULL ? NULL : &doc->root;
}

const acc_json_value *acc_json_get(const acc_json_value *object, const char *key) {
  if (object == NULL || key == NULL || object->type != ACC_JSON_OBJECT) return NULL;
  for (size_t i = 0; i < object->as.object.count; i++) {
    const acc_json_member *member = &object->as.object.members[i];
    /* Keys never contain NUL (U+0000 is rejected), so strcmp is exact. */
    if (strcmp(member->key, key) == 0) return &member->value;
  }
  return NULL;
}

int acc_json_integer(const acc_json_value *value, long long min, long long max,
                     long long *out) {
  if (value == NULL || out == NULL || value->type != ACC_JSON_NUMBER) return -1;
  double number = value->as.number;
  /* -2^63 and 2^63 are exact doubles; the range test also rejects NaN and
   * infinities, so the conversion below is always defined. */
  if (!(number >= -9223372036854775808.0 && number < 9223372036854775808.0)) return -1;
  long long integer = (long long)number;
  if ((double)integer != number || integer < min || integer > max) return -1;
  *out = integer;
  return 0;
}
