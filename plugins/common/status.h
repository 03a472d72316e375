/*
 * Per-thread "last error" messages for plugins (behind accGetLastError()).
 *
 * Each plugin compiles its own copy of this file, so every loaded library
 * keeps its own messages. The buffer is thread-local: a message set by one
 * thread is never seen or overwritten by another.
 */
#ifndef ACC_COMMON_STATUS_H_
#define ACC_COMMON_STATUS_H_

#include "mxnet_acc.h"

#if defined(__GNUC__)
#define ACC_PRINTF_LIKE(fmt_index, args_index) \
  __attribute__((format(printf, fmt_index, args_index)))
#else
#define ACC_PRINTF_LIKE(fmt_index, args_index)
#endif

/* Records a formatted message for the calling thread and returns code, so
 * that a failing path reads `return acc_fail(MX_ACC_ERR_..., "...", ...);`. */
int acc_fail(int code, const char *fmt, ...) ACC_PRINTF_LIKE(2, 3);

/* Forgets the calling thread's message; entry points call it on entry so a
 * message always belongs to the most recent call. */
void acc_clear_error(void);

/* The calling thread's message, "" if none. */
const char *acc_last_error(void);

#endif /* ACC_COMMON_STATUS_H_ */
