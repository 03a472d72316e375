/*
 * A deliberately configurable plugin for the loader tests. Each build picks
 * one behaviour with a macro:
 *   FAKE_NAME "..."       the name getAccName() reports (default "fake")
 *   FAKE_NUM_ACC n        what getNumAcc() returns (default 2)
 *   FAKE_API_VERSION n    what getAccApiVersion() returns
 *   FAKE_REFUSE_VERSION   initialize() refuses every host version
 *   FAKE_INIT_FAILS       initialize() fails with MX_ACC_ERR_DEVICE
 *   FAKE_OMIT_SYMBOLS     leaves out loadModel, infer and configure
 *   FAKE_IMPERATIVE       supportsImperative() returns 1 without the functions
 *   FAKE_NO_LAST_ERROR    exports no accGetLastError
 *   FAKE_IDS a,b,...      supportedOps() answers these node ids, whatever the
 *                         graph (to test how the host checks the answer)
 * configure() echoes its input pairs back with "echo_" prefixed to each key
 * and fails with a message when given the key "fail".
 */
#include <stdio.h>
#include <string.h>

#include "mxnet_acc.h"

#ifndef FAKE_NAME
#define FAKE_NAME "fake"
#endif
#ifndef FAKE_NUM_ACC
#define FAKE_NUM_ACC 2
#endif
#ifndef FAKE_API_VERSION
#define FAKE_API_VERSION MX_ACC_API_VERSION
#endif

static _Thread_local char last_error[256];

static int fail(int code, const char *message) {
  snprintf(last_error, sizeof last_error, "%s", message);
  return code;
}

MX_ACC_EXPORT int getAccApiVersion(void) { return FAKE_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) {
#if defined(FAKE_REFUSE_VERSION)
  (void)version;
  return fail(MX_ACC_ERR_VERSION, "fake refuses every host");
#elif defined(FAKE_INIT_FAILS)
  (void)version;
  return fail(MX_ACC_ERR_DEVICE, "no fake hardware present");
#else
  return version / 100 == MX_ACC_API_VERSION_MAJOR ? MX_ACC_OK : MX_ACC_ERR_VERSION;
#endif
}

MX_ACC_EXPORT int getAccName(char *name, size_t size) {
  if (size < sizeof FAKE_NAME) return fail(MX_ACC_ERR_INVALID_ARG, "buffer too small");
  memcpy(name, FAKE_NAME, sizeof FAKE_NAME);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int getNumAcc(void) { return FAKE_NUM_ACC; }

MX_ACC_EXPORT int supportsImperative(void) {
#ifdef FAKE_IMPERATIVE
  return 1;
#else
  return 0;
#endif
}

MX_ACC_EXPORT int supportedOps(const char *json, const char *const *data_names,
                               const MXTensor *data, int num_data, int dev_id, int *ids,
                               int ids_capacity, int *num_ids) {
  (void)json, (void)data_names, (void)data, (void)num_data, (void)dev_id;
#ifdef FAKE_IDS
  static const int answer[] = {FAKE_IDS};
  int count = (int)(sizeof answer / sizeof answer[0]);
  if (count > ids_capacity) return fail(MX_ACC_ERR_INVALID_ARG, "ids array too small");
  for (int i = 0; i < count; ++i) ids[i] = answer[i];
  *num_ids = count;
#else
  (void)ids, (void)ids_capacity;
  *num_ids = 0;
#endif
  return MX_ACC_OK;
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  (void)model_id;
  return fail(MX_ACC_ERR_NOT_FOUND, "fake holds no models");
}

#ifndef FAKE_OMIT_SYMBOLS
static char echo_text[4096];
static const char *echo_keys[16];
static const char *echo_vals[16];

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  (void)model_id, (void)json, (void)data_names, (void)data, (void)num_data, (void)dev_id;
  return fail(MX_ACC_ERR_UNSUPPORTED, "fake compiles nothing");
}

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  (void)model_id, (void)in_names, (void)out_names, (void)in_data, (void)out_data;
  (void)num_in, (void)num_out;
  return fail(MX_ACC_ERR_NOT_FOUND, "fake holds no models");
}

MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  size_t used = 0;
  if (num_in > 16) return fail(MX_ACC_ERR_INVALID_ARG, "too many keys");
  for (int i = 0; i < num_in; ++i) {
    if (strcmp(in_keys[i], "fail") == 0) {
      char message[200];
      snprintf(message, sizeof message, "fail requested with \"%.100s\" on device %d", in_vals[i],
               dev_id);
      return fail(MX_ACC_ERR_INVALID_ARG, message);
    }
    int n = snprintf(echo_text + used, sizeof echo_text - used, "echo_%s", in_keys[i]);
    if (n < 0 || (size_t)n + 1 >= sizeof echo_text - used) {
      return fail(MX_ACC_ERR_INVALID_ARG, "too long");
    }
    echo_keys[i] = echo_text + used;
    used += (size_t)n + 1;
    n = snprintf(echo_text + used, sizeof echo_text - used, "%s", in_vals[i]);
    if (n < 0 || (size_t)n + 1 >= sizeof echo_text - used) {
      return fail(MX_ACC_ERR_INVALID_ARG, "too long");
    }
    echo_vals[i] = echo_text + used;
    used += (size_t)n + 1;
  }
  *out_keys = echo_keys;
  *out_vals = echo_vals;
  *num_out = num_in;
  return MX_ACC_OK;
}
#endif

#ifndef FAKE_NO_LAST_ERROR
MX_ACC_EXPORT const char *accGetLastError(void) { return last_error; }
#endif
