/*
 * Per-thread "last error" messages for plugins (behind accGetLastError()).
 *
 * Each plugin compiles its own copy of this file, so every loaded library
 * keeps its own messages. The buffer is thread-local: a message set by one
 * thread is never seen or overwritten by another.
 */
#ifndef ACC_COMMON_STATUS_H_
#define ACC_COMMON_STATUS_H_

#include <stddef.h>

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

/* Copies text into dst, a buffer of size bytes, NUL-terminated. Text that
 * does not fit is cut at the last space that leaves room for "...", which
 * then ends it, so that no word is cut in the middle (a single word longer
 * than the buffer is the one exception: it is cut where the buffer ends,
 * before the "..."). Nothing is written when dst is NULL or size is 0. */
void acc_copy_words(char *dst, size_t size, const char *text);

/* supportedOpsReasons() (ABI 1.1): writes a formatted reason for node into
 * its slot of reasons, slots of reason_size bytes each, capacity slots in
 * all, cut at a word as acc_copy_words() does. Does nothing when reasons is
 * NULL or node is not below capacity. */
void acc_reason(char *reasons, size_t reason_size, int capacity, size_t node, const char *fmt,
                ...) ACC_PRINTF_LIKE(5, 6);

/* acc_reason() with the calling thread's last message as the reason, less
 * the "node <index> \"<name>\"", " (<op>)" and ": " it starts with when it
 * does (the bundled plugins' way of naming a node in their messages). */
void acc_node_reason(char *reasons, size_t reason_size, int capacity, size_t index,
                     const char *name, const char *op);

#endif /* ACC_COMMON_STATUS_H_ */
