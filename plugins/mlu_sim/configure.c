#include "configure.h"

#include <stdio.h>
#include <string.h>

#include "attrs.h"
#include "binfile.h"
#include "card.h"
#include "cnml.h"
#include "library.h"
#include "model.h"
#include "model_file.h"
#include "ops.h"
#include "status.h"

#define MLU_SIM_VERSION "0.1.0"

/* The answers of one call, in the library's buffers. */
typedef struct answers {
  mlu_library *library;
  int count;
  size_t used;
} answers;

static int emit(answers *a, const char *key, const char *value) {
  size_t key_size = strlen(key) + 1, value_size = strlen(value) + 1;
  if (a->count == MLU_CONFIGURE_MAX_PAIRS ||
      a->used + key_size + value_size > sizeof a->library->configure_text) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "configure: too many answers in one call");
  }
  char *text = a->library->configure_text + a->used;
  memcpy(text, key, key_size);
  memcpy(text + key_size, value, value_size);
  a->library->configure_keys[a->count] = text;
  a->library->configure_vals[a->count] = text + key_size;
  a->used += key_size + value_size;
  a->count += 1;
  return MX_ACC_OK;
}

static int emit_u64(answers *a, const char *key, uint64_t value) {
  char text[32];
  snprintf(text, sizeof text, "%llu", (unsigned long long)value);
  return emit(a, key, text);
}

static int emit_double(answers *a, const char *key, double value) {
  char text[48];
  snprintf(text, sizeof text, "%.17g", value);
  return emit(a, key, text);
}

/* Appends text to list (size bytes, length used), comma-separated. */
static int append(char *list, size_t size, size_t *length, const char *text) {
  int n = snprintf(list + *length, size - *length, "%s%s", *length ? "," : "", text);
  if (n < 0 || (size_t)n >= size - *length) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "configure: a list outgrew its buffer");
  }
  *length += (size_t)n;
  return MX_ACC_OK;
}

static int list_keys(answers *a) {
  char list[1024];
  size_t length = 0;
  int status = append(list, sizeof list, &length, "query,reset_stats,model_info,export_model,import_model,path");
  for (size_t i = 0; i < mlu_params_count() && status == MX_ACC_OK; ++i) {
    status = append(list, sizeof list, &length, mlu_params_name(i));
  }
  return status == MX_ACC_OK ? emit(a, "keys", list) : status;
}

static int list_ops(answers *a) {
  char list[2048], item[64];
  size_t length = 0;
  int status = MX_ACC_OK;
  for (size_t i = 0; i < mlu_num_ops() && status == MX_ACC_OK; ++i) {
    const mlu_mx_op *op = mlu_op_at(i);
    snprintf(item, sizeof item, "%s:%d", op->name, op->version);
    status = append(list, sizeof list, &length, item);
    for (int k = 0; op->aliases[k] != NULL && status == MX_ACC_OK; ++k) {
      snprintf(item, sizeof item, "%s:%d", op->aliases[k], op->version);
      status = append(list, sizeof list, &length, item);
    }
  }
  return status == MX_ACC_OK ? emit(a, "ops", list) : status;
}

static int answer_stats(answers *a, cnrtDev_t card) {
  mlu_stats st;
  cnrtSimGetStats(card, &st);
  int status = emit_double(a, "sim_time_ns", st.sim_time_ns);
  if (status == MX_ACC_OK) status = emit_double(a, "sim_cycles", st.sim_cycles);
  if (status == MX_ACC_OK) status = emit_u64(a, "launches", st.launches);
  if (status == MX_ACC_OK) status = emit_u64(a, "instructions", st.instructions);
  if (status == MX_ACC_OK) status = emit_u64(a, "dram_bytes", st.dram_bytes);
  if (status == MX_ACC_OK) status = emit_u64(a, "host_device_bytes", st.host_device_bytes);
  if (status == MX_ACC_OK) status = emit_u64(a, "host_device_copies", st.host_device_copies);
  if (status == MX_ACC_OK) status = emit_double(a, "host_device_time_ns", st.host_device_time_ns);
  if (status == MX_ACC_OK) status = emit_u64(a, "compiles", st.compiles);
  if (status == MX_ACC_OK) status = emit_double(a, "compile_time_ns", st.compile_time_ns);
  return status;
}

static int answer_params(answers *a, cnrtDev_t card) {
  mlu_params params;
  cnrtSimGetParams(card, &params);
  char text[48];
  int status = MX_ACC_OK;
  for (size_t i = 0; i < mlu_params_count() && status == MX_ACC_OK; ++i) {
    mlu_params_format(&params, mlu_params_name(i), text, sizeof text);
    status = emit(a, mlu_params_name(i), text);
  }
  return status;
}

static int answer_memory(answers *a, cnrtDev_t card) {
  size_t allocations;
  uint64_t bytes;
  mlu_params params;
  cnrtSimMemoryInUse(card, &allocations, &bytes);
  cnrtSimGetParams(card, &params);
  int status = emit_u64(a, "allocations", allocations);
  if (status == MX_ACC_OK) status = emit_u64(a, "bytes_in_use", bytes);
  if (status == MX_ACC_OK) status = emit_u64(a, "dram_bytes", params.dram_bytes);
  return status;
}

/* The parameters the compiler reads (compiler.c): a compiled program is
 * valid for another card, or after a parameter change, exactly when this
 * string is unchanged (mxnet_acc.h section 9, "compile_config"). */
static int answer_compile_config(answers *a, cnrtDev_t card) {
  mlu_params params;
  cnrtSimGetParams(card, &params);
  char precision[48], sram[48], text[128];
  mlu_params_format(&params, "precision", precision, sizeof precision);
  mlu_params_format(&params, "sram_bytes", sram, sizeof sram);
  snprintf(text, sizeof text, "precision=%s,sram_bytes=%s", precision, sram);
  return emit(a, "compile_config", text);
}

/* What offloading costs on this card (mxnet_acc.h section 9, "cost_model"),
 * from the cost model's parameters: the host keeps on the CPU a candidate
 * subgraph whose copies and launch would cost more than it gains. The
 * sustained rate is the fp32 peak (the most conservative dtype). */
static int answer_cost_model(answers *a, cnrtDev_t card) {
  mlu_params params;
  cnrtSimGetParams(card, &params);
  const char *keys[] = {"host_device_bandwidth", "host_device_latency_ns", "launch_latency_ns",
                        "device_ops_per_s"};
  const char *sources[] = {"host_bandwidth", "host_latency_ns", "launch_latency_ns",
                           "peak_ops_fp32"};
  char text[48];
  int status = MX_ACC_OK;
  for (size_t i = 0; i < sizeof keys / sizeof keys[0] && status == MX_ACC_OK; ++i) {
    mlu_params_format(&params, sources[i], text, sizeof text);
    status = emit(a, keys[i], text);
  }
  return status == MX_ACC_OK ? emit(a, "min_subgraph_ops", "1") : status;
}

static int answer_query(answers *a, const char *what, cnrtDev_t card) {
  if (strcmp(what, "keys") == 0) return list_keys(a);
  if (strcmp(what, "ops") == 0) return list_ops(a);
  if (strcmp(what, "version") == 0) return emit(a, "version", MLU_SIM_VERSION);
  if (strcmp(what, "stats") == 0) return answer_stats(a, card);
  if (strcmp(what, "params") == 0) return answer_params(a, card);
  if (strcmp(what, "memory") == 0) return answer_memory(a, card);
  if (strcmp(what, "compile_config") == 0) return answer_compile_config(a, card);
  if (strcmp(what, "cost_model") == 0) return answer_cost_model(a, card);
  return acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown query \"%s\" (keys, ops, version, "
                  "stats, params, memory, compile_config, cost_model)", what);
}

static int answer_model(answers *a, const char *id) {
  mlu_model *model = mlu_models_find(id);
  if (model == NULL) {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: model \"%s\" is not loaded", id);
  }
  mlu_model_info info;
  mlu_model_describe(model, &info);
  const char *names[] = {"segments", "operators", "kernels", "instructions", "folded_batchnorms",
                         "fused_epilogues", "resident_values", "spilled_values", "aliased_values",
                         "int8_kernels", "sram_words", "const_bytes", "scratch_bytes"};
  const uint64_t values[] = {info.segments, info.operators, info.kernels, info.instructions,
                             info.folded_batchnorms, info.fused_epilogues, info.resident_values,
                             info.spilled_values, info.aliased_values, info.int8_kernels,
                             info.sram_words, info.const_bytes, info.scratch_bytes};
  int status = MX_ACC_OK;
  for (size_t i = 0; i < sizeof values / sizeof values[0] && status == MX_ACC_OK; ++i) {
    status = emit_u64(a, names[i], values[i]);
  }
  return status;
}

typedef struct export_job {
  const char *path;
  int dev_id;
  uint64_t bytes;
} export_job;

/* The model must be on the call's device: the host serializes the calls
 * naming one device, so no infer() runs it while it is written, and the
 * registry's lock keeps unloadModel() from freeing it. */
static int export_locked(mlu_model *model, void *context) {
  export_job *job = context;
  if (model->dev_id != job->dev_id) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "export_model: model \"%s\" is on device %d, not %d",
                    model->id, model->dev_id, job->dev_id);
  }
  return mlu_model_export(model, job->path, &job->bytes);
}

static int export_model(answers *a, const char *id, const char *path, int dev_id) {
  export_job job = {path, dev_id, 0};
  int status = mlu_models_with(id, export_locked, &job);
  return status == MX_ACC_OK ? emit_u64(a, "exported", job.bytes) : status;
}

static int import_model(answers *a, const char *id, const char *path, int dev_id) {
  if (id[0] == '\0') return acc_fail(MX_ACC_ERR_INVALID_ARG, "import_model: empty id");
  if (mlu_models_exists(id)) {
    return acc_fail(MX_ACC_ERR_STATE, "model \"%s\" is already loaded", id);
  }
  int status = emit(a, "imported", id); /* the answer first: once added, nothing may fail */
  mlu_model *model = NULL;
  if (status == MX_ACC_OK) status = mlu_model_import(id, path, dev_id, &model);
  if (status == MX_ACC_OK) {
    status = mlu_models_add(model); /* fails if another thread loaded the id meanwhile */
    if (status != MX_ACC_OK) mlu_model_free(model);
  }
  return status;
}

static int reset_stats(answers *a, const char *value, cnrtDev_t card) {
  int flag;
  if (acc_attr_bool(value, &flag) != 0 || !flag) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: reset_stats=\"%s\": expected 1", value);
  }
  cnrtSimResetStats(card);
  return emit(a, "reset_stats", "1");
}

static int set_param(answers *a, const char *key, const char *value, cnrtDev_t card) {
  mlu_params params;
  cnrtSimGetParams(card, &params);
  int status = mlu_params_set(&params, key, value);
  if (status == MX_ACC_ERR_NOT_FOUND) {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown key \"%s\" (query \"keys\" lists "
                    "them)", key);
  }
  if (status == MX_ACC_OK) status = cnrtSimSetParams(card, &params);
  char text[48];
  mlu_params_format(&params, key, text, sizeof text);
  return status == MX_ACC_OK ? emit(a, key, text) : status;
}

int mlu_configure(int dev_id, const char *const *in_keys, const char *const *in_vals, int num_in,
                  const char *const **out_keys, const char *const **out_vals, int *num_out) {
  cnrtDev_t card = mlu_card_for(dev_id);
  if (card == NULL) return mlu_device_status(dev_id);
  answers a = {mlu_library_instance(), 0, 0};
  const char *path = NULL;
  int status = acc_bin_configure_path(in_keys, in_vals, num_in, &path);
  for (int i = 0; i < num_in && status == MX_ACC_OK; ++i) {
    const char *key = in_keys[i], *value = in_vals[i];
    if (key == NULL || value == NULL) {
      status = acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: key or value %d is NULL", i);
    } else if (strcmp(key, "query") == 0) {
      status = answer_query(&a, value, card);
    } else if (strcmp(key, "reset_stats") == 0) {
      status = reset_stats(&a, value, card);
    } else if (strcmp(key, "model_info") == 0) {
      status = answer_model(&a, value);
    } else if (strcmp(key, "export_model") == 0) {
      status = export_model(&a, value, path, dev_id);
    } else if (strcmp(key, "import_model") == 0) {
      status = import_model(&a, value, path, dev_id);
    } else if (strcmp(key, "path") == 0) {
      /* read by acc_bin_configure_path() */
    } else {
      status = set_param(&a, key, value, card);
    }
  }
  if (status != MX_ACC_OK) return status;
  *out_keys = a.library->configure_keys;
  *out_vals = a.library->configure_vals;
  *num_out = a.count;
  return MX_ACC_OK;
}
