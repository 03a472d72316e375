/*
 * A plugin that takes its host down while it is loaded, for the tests of
 * discovery's probe (tests/plugins/test_safe_discovery.py). Each build picks what
 * it does with one macro, and when with HOSTILE_IN_CONSTRUCTOR (at dlopen,
 * in a constructor) or HOSTILE_IN_DESTRUCTOR (at exit, after a clean load);
 * the default is inside initialize():
 *   HOSTILE_SEGV          dies of SIGSEGV (with the default handler, so that
 *                         a sanitizer's handler cannot turn it into an exit)
 *   HOSTILE_ABORT         calls abort() after a line on stderr
 *   HOSTILE_HANG          ignores SIGTERM and sleeps forever
 *   HOSTILE_EXIT n        calls exit(n)
 *   HOSTILE_FORK_HANG     forks a helper that writes its pid to the file named
 *                         by $HOSTILE_PID_FILE and sleeps forever, then hangs
 * With none of them it is a well-behaved symbolic plugin called
 * HOSTILE_NAME (default "hostile") with two devices and no operators.
 * Whatever the build, when $HOSTILE_MARK_FILE is set a constructor appends
 * a line "PID NAME" (the loading process, HOSTILE_NAME) to that file: the
 * tests count who loaded which library.
 */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mxnet_acc.h"

#ifndef HOSTILE_NAME
#define HOSTILE_NAME "hostile"
#endif

#if defined(HOSTILE_HANG) || defined(HOSTILE_FORK_HANG)
static void sleep_forever(void) {
  for (;;) sleep(60);
}
#endif

#if defined(HOSTILE_SEGV) || defined(HOSTILE_ABORT) || defined(HOSTILE_HANG) || \
    defined(HOSTILE_EXIT) || defined(HOSTILE_FORK_HANG)
#define HOSTILE_ACTS 1
#else
#define HOSTILE_ACTS 0
#endif

static void misbehave(const char *where) {
  if (HOSTILE_ACTS) {
    fprintf(stderr, "hostile_acc: misbehaving %s\n", where);
    fflush(stderr);
  }
#if defined(HOSTILE_SEGV)
  signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
#elif defined(HOSTILE_ABORT)
  abort();
#elif defined(HOSTILE_HANG)
  signal(SIGTERM, SIG_IGN);
  sleep_forever();
#elif defined(HOSTILE_EXIT)
  exit(HOSTILE_EXIT);
#elif defined(HOSTILE_FORK_HANG)
  if (fork() == 0) {
    const char *pid_file = getenv("HOSTILE_PID_FILE");
    FILE *out = pid_file == NULL ? NULL : fopen(pid_file, "w");
    if (out != NULL) {
      fprintf(out, "%ld\n", (long)getpid());
      fclose(out);
    }
    sleep_forever();
  }
  signal(SIGTERM, SIG_IGN);
  sleep_forever();
#endif
}

__attribute__((constructor)) static void mark(void) {
  const char *mark_file = getenv("HOSTILE_MARK_FILE");
  FILE *out = mark_file == NULL ? NULL : fopen(mark_file, "a");
  if (out != NULL) {
    fprintf(out, "%ld %s\n", (long)getpid(), HOSTILE_NAME);
    fclose(out);
  }
}

#if defined(HOSTILE_IN_CONSTRUCTOR)
__attribute__((constructor)) static void at_load(void) { misbehave("in its constructor"); }
#elif defined(HOSTILE_IN_DESTRUCTOR)
__attribute__((destructor)) static void at_unload(void) { misbehave("in its destructor"); }
#endif

static _Thread_local char last_error[256];

static int fail(int code, const char *message) {
  snprintf(last_error, sizeof last_error, "%s", message);
  return code;
}

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) {
#if !defined(HOSTILE_IN_CONSTRUCTOR) && !defined(HOSTILE_IN_DESTRUCTOR)
  misbehave("in initialize()");
#endif
  return version / 100 == MX_ACC_API_VERSION_MAJOR ? MX_ACC_OK : MX_ACC_ERR_VERSION;
}

MX_ACC_EXPORT int getAccName(char *name, size_t size) {
  if (size < sizeof HOSTILE_NAME) return fail(MX_ACC_ERR_INVALID_ARG, "buffer too small");
  memcpy(name, HOSTILE_NAME, sizeof HOSTILE_NAME);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int getNumAcc(void) { return 2; }

MX_ACC_EXPORT int supportsImperative(void) { return 0; }

MX_ACC_EXPORT int supportedOps(const char *json, const char *const *data_names,
                               const MXTensor *data, int num_data, int dev_id, int *ids,
                               int ids_capacity, int *num_ids) {
  (void)json, (void)data_names, (void)data, (void)num_data, (void)dev_id, (void)ids;
  (void)ids_capacity;
  *num_ids = 0;
  return MX_ACC_OK;
}

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  (void)model_id, (void)json, (void)data_names, (void)data, (void)num_data, (void)dev_id;
  return fail(MX_ACC_ERR_UNSUPPORTED, "hostile compiles nothing");
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  (void)model_id;
  return fail(MX_ACC_ERR_NOT_FOUND, "hostile holds no models");
}

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  (void)model_id, (void)in_names, (void)out_names, (void)in_data, (void)out_data;
  (void)num_in, (void)num_out;
  return fail(MX_ACC_ERR_NOT_FOUND, "hostile holds no models");
}

MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  (void)in_keys, (void)in_vals, (void)dev_id;
  if (num_in != 0) return fail(MX_ACC_ERR_NOT_FOUND, "hostile knows no keys");
  *out_keys = NULL;
  *out_vals = NULL;
  *num_out = 0;
  return MX_ACC_OK;
}

MX_ACC_EXPORT const char *accGetLastError(void) { return last_error; }
