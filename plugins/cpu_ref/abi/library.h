/*
 * State of the cpu_ref library: its devices and its loaded models.
 *
 * The ABI has no handle argument, so the state is one static object per
 * loaded copy of the library (library.c), set up by initialize(). Everything mutable in
 * it is guarded: each device has its own lock (the host already serializes
 * calls per device; the lock keeps a misbehaving host from corrupting the
 * allocation table), and the model list has one lock of its own.
 */
#ifndef CPU_REF_LIBRARY_H_
#define CPU_REF_LIBRARY_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "memory.h"
#include "model.h"

#define CR_MAX_DEVICES 16

/* Bytes behind one configure() call's answers: room for the operator list
 * (the largest answer) twice over, so that a call may ask for it along with
 * the other queries. */
#define CR_CONFIGURE_TEXT_SIZE 16384

typedef struct cr_device {
  pthread_mutex_t lock;
  cr_memory memory;
  atomic_int num_threads;
  /* A cr_kernels: what executors created and models loaded on the device
   * run with (configure key kernels; ACC_CPU_REF_KERNELS at initialize). */
  atomic_int kernels;
} cr_device;

typedef struct cr_library {
  atomic_int initialized;
  int num_devices;
  cr_device devices[CR_MAX_DEVICES];
  pthread_mutex_t models_lock;
  cr_model *models; /* singly linked through cr_model.next */
  /* Storage behind configure()'s outputs, valid until the next call. */
  char configure_text[CR_CONFIGURE_TEXT_SIZE];
  const char *configure_keys[16];
  const char *configure_vals[16];
} cr_library;

cr_library *cr_library_instance(void);

/* initialize(): reads CPU_REF_NUM_DEVICES (1 .. 16, default 1) and
 * ACC_CPU_REF_KERNELS (fast or reference, default fast) and sets the
 * devices up, once. */
int cr_library_initialize(void);
int cr_library_num_devices(void);

/* "fast" or "reference" as a cr_kernels; MX_ACC_ERR_INVALID_ARG naming what
 * otherwise. */
int cr_parse_kernels(const char *what, const char *value, cr_kernels *kernels);
const char *cr_kernels_name(cr_kernels kernels);

/* The device dev_id after checking that the library is initialized and
 * dev_id is in range; NULL with an error recorded otherwise. */
cr_device *cr_device_get(int dev_id);

/* The status cr_device_get() recorded for the failure it just reported. */
int cr_device_error(int dev_id);

/* Checks that tensor's data can be used on device dev_id: host memory, or
 * memory allocated on that device holding at least bytes bytes. */
int cr_check_data(int dev_id, const MXTensor *tensor, size_t bytes, const char *what);

/* ---- the loaded models, by id (guarded by models_lock) ---- */

int cr_library_model_loaded(const char *model_id);
/* MX_ACC_ERR_STATE: "model ... is already loaded". */
int cr_library_already_loaded(const char *model_id);
/* Adds a model built by loadModel() or import_model, or frees it if
 * another thread loaded its id meanwhile. */
int cr_library_add_model(cr_model *model);
/* Removes and frees the model; MX_ACC_ERR_NOT_FOUND when not loaded. */
int cr_library_unload_model(const char *model_id);
/* The model, or NULL with MX_ACC_ERR_NOT_FOUND recorded. The host
 * serializes a model's infer() with its unloadModel(). */
cr_model *cr_library_find_model(const char *model_id);
/* Writes the model on dev_id to path (model_file.h), holding models_lock. */
int cr_library_export_model(const char *model_id, const char *path, int dev_id,
                            uint64_t *bytes);

#endif /* CPU_REF_LIBRARY_H_ */
