/*
 * The state of the mlu_sim library: its simulated cards and its loaded
 * models.
 *
 * The ABI has no handle argument, so this is the one static object of the
 * plugin (library.c), filled by initialize(): MLU_SIM_NUM_CARDS cards
 * (1 .. 16, default 4), each created through cnrtCreateDevice with its own
 * DRAM, lock, parameters and statistics. Everything else the plugin keeps
 * hangs off it (models) or off the host's handles (executors). Cards live
 * until the process ends.
 */
#ifndef MLU_SIM_LIBRARY_H_
#define MLU_SIM_LIBRARY_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cnml.h"
#include "model.h"
#include "mxnet_acc.h"

#define MLU_MAX_CARDS 16
#define MLU_DEFAULT_CARDS 4

/* Room behind one configure() call's answers. */
#define MLU_CONFIGURE_TEXT_SIZE 16384
#define MLU_CONFIGURE_MAX_PAIRS 64

typedef struct mlu_library {
  atomic_int initialized;
  int num_cards;
  cnrtDev_t cards[MLU_MAX_CARDS];
  pthread_mutex_t models_lock;
  mlu_model *models; /* singly linked through mlu_model.next */
  /* Storage behind configure()'s outputs, valid until the next call. */
  char configure_text[MLU_CONFIGURE_TEXT_SIZE];
  const char *configure_keys[MLU_CONFIGURE_MAX_PAIRS];
  const char *configure_vals[MLU_CONFIGURE_MAX_PAIRS];
} mlu_library;

mlu_library *mlu_library_instance(void);

/* Creates the cards (once); returns an MX_ACC status. */
int mlu_library_initialize(void);

/* The card behind dev_id after checking that the library is initialized
 * and dev_id in range; NULL with an error recorded otherwise (see
 * mlu_device_status for its code). */
cnrtDev_t mlu_card_for(int dev_id);

/* The status mlu_card_for(dev_id) recorded when it returned NULL. */
int mlu_device_status(int dev_id);

/* MX_ACC_OK when tensor's data can be used on dev_id: host memory, or
 * bytes of live device memory of that card. */
int mlu_check_data(int dev_id, const MXTensor *tensor, uint64_t bytes, const char *what);

/* The loaded-model registry (models_lock held inside). */
int mlu_models_add(mlu_model *model);          /* MX_ACC_ERR_STATE if the id exists */
mlu_model *mlu_models_remove(const char *id);  /* NULL if not loaded */
mlu_model *mlu_models_find(const char *id);
int mlu_models_exists(const char *id);
/* Runs fn(model, context) on the model called id with models_lock held, so
 * that no unloadModel() frees it meanwhile (export_model); returns fn's
 * status, MX_ACC_ERR_NOT_FOUND if no such model is loaded. */
int mlu_models_with(const char *id, int (*fn)(mlu_model *model, void *context), void *context);

#endif /* MLU_SIM_LIBRARY_H_ */
