#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { kMessageSize = 1024 };

static _Thread_local char last_message[kMessageSize];

void acc_copy_words(char *dst, size_t size, const char *text) {
  static const char kEllipsis[] = "...";
  if (dst == NULL || size == 0) return;
  if (text == NULL) text = "";
  size_t length = strlen(text);
  if (length < size) {
    memcpy(dst, text, length + 1);
    return;
  }
  if (size < sizeof kEllipsis) { /* no room for a word and the ellipsis */
    memcpy(dst, text, size - 1);
    dst[size - 1] = '\0';
    return;
  }
  size_t keep = size - sizeof kEllipsis; /* characters of text that fit before "..." */
  size_t cut = keep;
  while (cut > 0 && text[cut] != ' ') --cut; /* text[keep] itself may be the space */
  if (cut == 0) cut = keep;                   /* one long word: cut it where room ends */
  while (cut > 0 && (text[cut - 1] == ' ' || text[cut - 1] == ',' || text[cut - 1] == ';')) {
    --cut;
  }
  memcpy(dst, text, cut);
  memcpy(dst + cut, kEllipsis, sizeof kEllipsis);
}

int acc_fail(int code, const char *fmt, ...) {
  /* Formatted at full length first, so that a long message is cut at a word
   * rather than wherever the buffer happens to end. */
  char full[4 * kMessageSize];
  va_list args;
  va_start(args, fmt);
  vsnprintf(full, sizeof full, fmt, args);
  va_end(args);
  acc_copy_words(last_message, sizeof last_message, full);
  return code;
}

void acc_clear_error(void) { last_message[0] = '\0'; }

const char *acc_last_error(void) { return last_message; }

void acc_reason(char *reasons, size_t reason_size, int capacity, size_t node, const char *fmt,
                ...) {
  if (reasons == NULL || reason_size == 0 || capacity <= 0 || node >= (size_t)capacity) return;
  char full[kMessageSize];
  va_list args;
  va_start(args, fmt);
  vsnprintf(full, sizeof full, fmt, args);
  va_end(args);
  acc_copy_words(reasons + node * reason_size, reason_size, full);
}

void acc_node_reason(char *reasons, size_t reason_size, int capacity, size_t index,
                     const char *name, const char *op) {
  const char *message = last_message;
  char what[kMessageSize];
  int length = snprintf(what, sizeof what, "node %zu \"%s\"", index, name != NULL ? name : "");
  if (length > 0 && (size_t)length < sizeof what && strncmp(message, what, (size_t)length) == 0) {
    message += length;
    size_t op_length = op != NULL ? strlen(op) : 0;
    if (op_length > 0 && message[0] == ' ' && message[1] == '(' &&
        strncmp(message + 2, op, op_length) == 0 && message[2 + op_length] == ')') {
      message += 3 + op_length;
    }
    if (message[0] == ':' && message[1] == ' ') message += 2;
  }
  acc_reason(reasons, reason_size, capacity, index, "%s", message);
}
