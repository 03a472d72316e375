/*
 * State of the cpu_ref library: its devices and its loaded models.
 *
 * The ABI has no handle argument, so the state is one static object per
 * loaded copy of the library, created by initialize(). Everything mutable in
 * it is guarded: each device has its own lock (the host already serializes
 * calls per device; the lock keeps a misbehaving host from corrupting the
 * allocation table), and the model list has one lock of its own.
 */
#ifndef CPU_REF_LIBRARY_H_
#define CPU_REF_LIBRARY_H_

#include <pthread.h>
#include <stdatomic.h>

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

/* The device dev_id after checking that the library is initialized and
 * dev_id is in range; NULL with an error recorded otherwise. */
cr_device *cr_device_get(int dev_id);

/* Checks that tensor's data can be used on device dev_id: host memory, or
 * memory allocated on that device holding at least bytes bytes. */
int cr_check_data(int dev_id, const MXTensor *tensor, size_t bytes, const char *what);

#endif /* CPU_REF_LIBRARY_H_ */
