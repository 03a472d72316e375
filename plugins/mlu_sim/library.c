#include "library.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "card.h"
#include "status.h"

static mlu_library library = {.models_lock = PTHREAD_MUTEX_INITIALIZER};

mlu_library *mlu_library_instance(void) { return &library; }

/* An integer environment variable within [lo, hi], or fallback if unset. */
static int read_env(const char *name, long long lo, long long hi, long long fallback,
                    long long *value) {
  const char *text = getenv(name);
  if (text == NULL || text[0] == '\0') {
    *value = fallback;
    return MX_ACC_OK;
  }
  char *end;
  long long parsed = strtoll(text, &end, 10);
  if (*end != '\0' || parsed < lo || parsed > hi) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s=\"%s\": expected an integer from %lld to %lld",
                    name, text, lo, hi);
  }
  *value = parsed;
  return MX_ACC_OK;
}

int mlu_library_initialize(void) {
  if (atomic_load(&library.initialized)) return MX_ACC_OK;
  long long cards, dram;
  mlu_params params = mlu_params_default();
  int status = read_env("MLU_SIM_NUM_CARDS", 1, MLU_MAX_CARDS, MLU_DEFAULT_CARDS, &cards);
  if (status == MX_ACC_OK) {
    /* Lets a machine with little address space run the simulator. */
    status = read_env("MLU_SIM_DRAM_BYTES", 1 << 20, (long long)1 << 40,
                      (long long)params.dram_bytes, &dram);
  }
  if (status != MX_ACC_OK) return status;
  params.dram_bytes = (uint64_t)dram;
  for (int i = 0; i < (int)cards; ++i) {
    status = cnrtCreateDevice(&library.cards[i], i, &params);
    if (status != MX_ACC_OK) {
      while (i-- > 0) cnrtDestroyDevice(library.cards[i]);
      return status;
    }
  }
  library.num_cards = (int)cards;
  atomic_store(&library.initialized, 1);
  return MX_ACC_OK;
}

cnrtDev_t mlu_card_for(int dev_id) {
  if (!atomic_load(&library.initialized)) {
    acc_fail(MX_ACC_ERR_STATE, "mlu_sim is not initialized");
    return NULL;
  }
  if (dev_id < 0 || dev_id >= library.num_cards) {
    acc_fail(MX_ACC_ERR_DEVICE, "device %d does not exist (mlu_sim has %d cards)", dev_id,
             library.num_cards);
    return NULL;
  }
  return library.cards[dev_id];
}

int mlu_device_status(int dev_id) {
  return atomic_load(&library.initialized) && (dev_id < 0 || dev_id >= library.num_cards)
             ? MX_ACC_ERR_DEVICE
             : MX_ACC_ERR_STATE;
}

int mlu_check_data(int dev_id, const MXTensor *tensor, uint64_t bytes, const char *what) {
  if (tensor->dev_id == MX_ACC_HOST_DEVICE) return MX_ACC_OK;
  if (tensor->dev_id != dev_id) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: data is on device %d, expected %d or the host",
                    what, (int)tensor->dev_id, dev_id);
  }
  cnrtDev_t card = mlu_card_for(dev_id);
  if (card == NULL) return mlu_device_status(dev_id);
  return mlu_card_check(card, tensor->data, bytes, what);
}

/* ---- the model registry -------------------------------------------------------- */

/* The link pointing at the model called id, or NULL; models_lock held. */
static mlu_model **find_link(const char *id) {
  for (mlu_model **link = &library.models; *link != NULL; link = &(*link)->next) {
    if (strcmp((*link)->id, id) == 0) return link;
  }
  return NULL;
}

int mlu_models_add(mlu_model *model) {
  pthread_mutex_lock(&library.models_lock);
  int exists = find_link(model->id) != NULL;
  if (!exists) {
    model->next = library.models;
    library.models = model;
  }
  pthread_mutex_unlock(&library.models_lock);
  if (exists) return acc_fail(MX_ACC_ERR_STATE, "model \"%s\" is already loaded", model->id);
  return MX_ACC_OK;
}

mlu_model *mlu_models_remove(const char *id) {
  pthread_mutex_lock(&library.models_lock);
  mlu_model **link = find_link(id), *model = link ? *link : NULL;
  if (link != NULL) *link = model->next;
  pthread_mutex_unlock(&library.models_lock);
  return model;
}

mlu_model *mlu_models_find(const char *id) {
  pthread_mutex_lock(&library.models_lock);
  mlu_model **link = find_link(id);
  pthread_mutex_unlock(&library.models_lock);
  return link ? *link : NULL;
}

int mlu_models_exists(const char *id) { return mlu_models_find(id) != NULL; }

int mlu_models_with(const char *id, int (*fn)(mlu_model *model, void *context), void *context) {
  pthread_mutex_lock(&library.models_lock);
  mlu_model **link = find_link(id);
  int status = link != NULL ? fn(*link, context)
                            : acc_fail(MX_ACC_ERR_NOT_FOUND, "model \"%s\" is not loaded", id);
  pthread_mutex_unlock(&library.models_lock);
  return status;
}
