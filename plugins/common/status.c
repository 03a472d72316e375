#include "status.h"

#include <stdarg.h>
#include <stdio.h>

enum { kMessageSize = 1024 };

static _Thread_local char last_message[kMessageSize];

int acc_fail(int code, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(last_message, sizeof last_message, fmt, args);
  va_end(args);
  return code;
}

void acc_clear_error(void) { last_message[0] = '\0'; }

const char *acc_last_error(void) { return last_message; }
