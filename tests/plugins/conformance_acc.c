/*
 * A small but complete plugin for the conformance kit's tests
 * (tests/conformance/test_conformance.py): imperative memory on CONF_NUM_ACC devices
 * (default 2), and symbolic graphs made of Activation(act_type="relu") and
 * elemwise_add nodes on float32 tensors. Built as it is, it passes the kit;
 * each build option breaks one rule of mxnet_acc.h on purpose, so that the
 * tests can show the kit fails it on the right check:
 *
 *   CONF_ANY_VERSION          initialize() accepts every host version
 *   CONF_BAD_IDS              supportedOps() adds an id past the last node
 *   CONF_UNSTABLE_OPS         supportedOps() answers nothing on every second call
 *   CONF_CORRUPT_COPY         copyFromAcc() flips a bit of the last byte
 *   CONF_LEAKY_FREE           mx_free() returns MX_ACC_OK and frees nothing
 *   CONF_RELEASE_KEEPS_ONE    mx_releaseAll() leaves the newest allocation alive
 *   CONF_ACCEPT_UNKNOWN_KEYS  configure() ignores keys it does not know
 *   CONF_WRONG_ADD            elemwise_add computes a + 1.01 * b
 *   CONF_NO_MESSAGE           failures leave no message for accGetLastError()
 *   CONF_GLOBAL_MESSAGE       one message buffer shared by every thread
 *   CONF_UNLOAD_KEEPS         unloadModel() returns MX_ACC_OK and keeps the model
 *   CONF_SHARED_SCRATCH       infer() passes every output through one static
 *                             buffer (a data race between devices), holding it
 *                             CONF_SCRATCH_NS nanoseconds, busy (default 2 ms);
 *                             when driven from several threads across devices,
 *                             held on, blocked, until another call writes it
 *                             (at most CONF_SCRATCH_WAIT_NS, default 200 ms)
 *   CONF_NAN_TO_ZERO_RELU     relu turns NaN into 0 (the CPU path keeps NaN)
 *   CONF_CLAIMS_ALL_FLOATS    supportedOps() also claims float16 and float64
 *                             nodes, which loadModel() then declines
 *   CONF_OUTPUT_OVERRUN       infer() writes 4 floats past the end of every output
 *   CONF_WITH_CONV            adds Convolution (2-D, float32, one group, no
 *                             dilation) with its optional bias
 *   CONF_CONV_DROPS_BIAS      (with CONF_WITH_CONV) the convolution ignores its bias
 *   CONF_NAIVE_FREE           mx_free() of an unknown pointer calls free() on it
 *                             anyway (a double free aborts the process)
 *
 * Compiled with the sources of plugins/common (graph.h parses the graphs).
 * Accelerator memory is host memory from malloc, tracked per device. The
 * tables (models, blocks, answers) are relu_plugin.h's quiet ones: this
 * plugin words its own messages, in its own buffer (see fail()).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime() under -std=c11, without -pthread too */

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attrs.h"
#include "graph.h"
#include "mxnet_acc.h"
#include "relu_plugin.h"

#ifndef CONF_NUM_ACC
#define CONF_NUM_ACC 2
#endif
#define CONF_MAX_BLOCKS 4096
#define CONF_MAX_MODELS 256
#define CONF_MAX_KEYS 8 /* of configure()'s answer: two per query at most */

#ifdef CONF_GLOBAL_MESSAGE
#define CONF_THREAD_LOCAL
#else
#define CONF_THREAD_LOCAL _Thread_local
#endif

/* ---- errors ------------------------------------------------------------- */

static CONF_THREAD_LOCAL char last_error[256];

static void clear_error(void) { last_error[0] = '\0'; }

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int fail(int code, const char *format, ...) {
#ifdef CONF_NO_MESSAGE
  (void)format;
#else
  va_list args;
  va_start(args, format);
  vsnprintf(last_error, sizeof last_error, format, args);
  va_end(args);
#endif
  return code;
}

MX_ACC_EXPORT const char *accGetLastError(void) { return last_error; }

/* ---- identification ----------------------------------------------------- */

MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }

MX_ACC_EXPORT int initialize(int version) {
  clear_error();
#ifndef CONF_ANY_VERSION
  if (version / 100 != MX_ACC_API_VERSION_MAJOR) {
    return fail(MX_ACC_ERR_VERSION, "confacc implements ABI major %d, not %d",
                MX_ACC_API_VERSION_MAJOR, version / 100);
  }
#else
  (void)version;
#endif
  return MX_ACC_OK;
}

MX_ACC_EXPORT int getAccName(char *name, size_t name_size) {
  static const char kName[] = "confacc";
  clear_error();
  return relu_copy_name(name, name_size, kName)
             ? MX_ACC_OK
             : fail(MX_ACC_ERR_INVALID_ARG, "getAccName: the name needs %zu bytes", sizeof kName);
}

MX_ACC_EXPORT int getNumAcc(void) { return CONF_NUM_ACC; }

MX_ACC_EXPORT int supportsImperative(void) { return 1; }

static int check_device(const char *call, int dev_id) {
  if (dev_id >= 0 && dev_id < CONF_NUM_ACC) return MX_ACC_OK;
  return fail(MX_ACC_ERR_DEVICE, "%s: device %d does not exist", call, dev_id);
}

/* ---- memory ------------------------------------------------------------- */

typedef struct device_memory {
  pthread_mutex_t lock;
  relu_block blocks[CONF_MAX_BLOCKS];
  size_t count;
} device_memory;

static device_memory memory[CONF_NUM_ACC];
static pthread_once_t memory_once = PTHREAD_ONCE_INIT;

static void init_memory(void) {
  for (int d = 0; d < CONF_NUM_ACC; ++d) pthread_mutex_init(&memory[d].lock, NULL);
}

MX_ACC_EXPORT int mx_alloc(int dev_id, size_t size, void **ptr) {
  clear_error();
  int status = check_device("mx_alloc", dev_id);
  if (status != MX_ACC_OK) return status;
  if (ptr == NULL) return fail(MX_ACC_ERR_INVALID_ARG, "mx_alloc: ptr is NULL");
  pthread_once(&memory_once, init_memory);
  device_memory *mem = &memory[dev_id];
  switch (relu_alloc_block(&mem->lock, mem->blocks, &mem->count, CONF_MAX_BLOCKS, size, ptr)) {
    case RELU_ALLOC_NO_MEMORY:
      return fail(MX_ACC_ERR_OUT_OF_MEMORY, "mx_alloc: %zu bytes", size);
    case RELU_ALLOC_FULL:
      return fail(MX_ACC_ERR_OUT_OF_MEMORY, "mx_alloc: more than %d allocations",
                  CONF_MAX_BLOCKS);
    default:
      return MX_ACC_OK;
  }
}

MX_ACC_EXPORT int mx_free(int dev_id, void *ptr) {
  clear_error();
  int status = check_device("mx_free", dev_id);
  if (status != MX_ACC_OK || ptr == NULL) return status;
  pthread_once(&memory_once, init_memory);
  device_memory *mem = &memory[dev_id];
#ifdef CONF_LEAKY_FREE
  pthread_mutex_lock(&mem->lock);
  long index = relu_find_block(mem->blocks, mem->count, ptr);
  pthread_mutex_unlock(&mem->lock);
  return index < 0 ? fail(MX_ACC_ERR_NOT_FOUND, "mx_free: unknown pointer") : MX_ACC_OK;
#else
  int found = relu_forget_block(&mem->lock, mem->blocks, &mem->count, ptr);
#ifdef CONF_NAIVE_FREE
  if (!found) {
    free(ptr); /* trusts the caller: a second free of one pointer aborts */
    return MX_ACC_OK;
  }
#endif
  if (!found) {
    return fail(MX_ACC_ERR_NOT_FOUND, "mx_free: %p is not allocated on device %d", ptr, dev_id);
  }
  free(ptr);
  return MX_ACC_OK;
#endif
}

MX_ACC_EXPORT int mx_releaseAll(int dev_id) {
  clear_error();
  int status = check_device("mx_releaseAll", dev_id);
  if (status != MX_ACC_OK) return status;
  pthread_once(&memory_once, init_memory);
  device_memory *mem = &memory[dev_id];
  pthread_mutex_lock(&mem->lock);
  size_t keep = 0;
#ifdef CONF_RELEASE_KEEPS_ONE
  keep = mem->count > 0 ? 1 : 0;
#endif
  for (size_t i = 0; i + keep < mem->count; ++i) free(mem->blocks[i].ptr);
  if (keep) mem->blocks[0] = mem->blocks[mem->count - 1];
  mem->count = keep;
  pthread_mutex_unlock(&mem->lock);
  return MX_ACC_OK;
}

/* Checks one copy: host is the host side, acc the device side. */
static int check_copy(const char *call, const MXTensor *acc, const MXTensor *host,
                      size_t *bytes) {
  if (acc == NULL || host == NULL) return fail(MX_ACC_ERR_INVALID_ARG, "%s: NULL tensor", call);
  int status = check_device(call, acc->dev_id);
  if (status != MX_ACC_OK) return status;
  if (host->dev_id != MX_ACC_HOST_DEVICE) {
    return fail(MX_ACC_ERR_INVALID_ARG, "%s: the host side is not host memory", call);
  }
  int acc_ok, host_ok;
  size_t acc_bytes = relu_tensor_bytes(acc, &acc_ok);
  size_t host_bytes = relu_tensor_bytes(host, &host_ok);
  if (!acc_ok || !host_ok) return fail(MX_ACC_ERR_INVALID_ARG, "%s: invalid tensor", call);
  if (acc->dtype != host->dtype || relu_tensor_count(acc) != relu_tensor_count(host) ||
      acc_bytes != host_bytes) {
    return fail(MX_ACC_ERR_INVALID_ARG, "%s: dtypes or element counts differ", call);
  }
  if (acc_bytes > 0 && (acc->data == NULL || host->data == NULL)) {
    return fail(MX_ACC_ERR_INVALID_ARG, "%s: NULL data", call);
  }
  pthread_once(&memory_once, init_memory);
  device_memory *mem = &memory[acc->dev_id];
  pthread_mutex_lock(&mem->lock);
  long index = relu_find_block(mem->blocks, mem->count, acc->data);
  int fits = index >= 0 && mem->blocks[index].size >= acc_bytes;
  pthread_mutex_unlock(&mem->lock);
  if (!fits) {
    return fail(MX_ACC_ERR_INVALID_ARG, "%s: the device pointer is not an allocation of %zu "
                "bytes or more on device %d", call, acc_bytes, acc->dev_id);
  }
  *bytes = acc_bytes;
  return MX_ACC_OK;
}

/* copyToAcc() (to_acc: dst is the device side) and copyFromAcc(). */
static int copy(const char *call, const MXTensor *dst, const MXTensor *src, int to_acc) {
  clear_error();
  size_t bytes = 0;
  int status = check_copy(call, to_acc ? dst : src, to_acc ? src : dst, &bytes);
  if (status != MX_ACC_OK || bytes == 0) return status;
  memcpy(dst->data, src->data, bytes);
#ifdef CONF_CORRUPT_COPY
  if (!to_acc) ((unsigned char *)dst->data)[bytes - 1] ^= 1u;
#endif
  return MX_ACC_OK;
}

MX_ACC_EXPORT int copyToAcc(const MXTensor *dst, const MXTensor *src) {
  return copy("copyToAcc", dst, src, 1);
}

MX_ACC_EXPORT int copyFromAcc(const MXTensor *dst, const MXTensor *src) {
  return copy("copyFromAcc", dst, src, 0);
}

MX_ACC_EXPORT int accGetExecutor(const char *op_name, const MXTensor *inputs,
                                 const MXTensor *outputs, int num_in, int num_out,
                                 const char *const *attr_keys, const char *const *attr_vals,
                                 int num_attrs, int dev_id, MXAccExecutor **executor) {
  (void)inputs, (void)outputs, (void)num_in, (void)num_out, (void)attr_keys, (void)attr_vals;
  (void)num_attrs, (void)executor;
  clear_error();
  int status = check_device("accGetExecutor", dev_id);
  if (status != MX_ACC_OK) return status;
  return fail(MX_ACC_ERR_UNSUPPORTED, "confacc runs %s in graphs only",
              op_name != NULL ? op_name : "(null)");
}

/* ---- graphs ------------------------------------------------------------- */

#ifdef CONF_WITH_CONV
/* A 2-D convolution's geometry, from its attributes and annotated shapes. */
typedef struct conv_geometry {
  int64_t n, c, h, w, f, kh, kw, sh, sw, ph, pw, oh, ow;
  int bias;
} conv_geometry;

/* Reads an optional tuple attribute of two values (default fallback). */
static int pair_attr(const acc_node *node, const char *key, int64_t fallback, int64_t out[2]) {
  const char *text = acc_node_attr(node, key);
  out[0] = out[1] = fallback;
  if (text == NULL || acc_attr_is_none(text)) return 1;
  int count = 0;
  return acc_attr_int_tuple(text, out, 2, &count) == 0 && count == 2;
}

/* 1 and the geometry when node is a convolution this plugin runs. */
static int conv_geometry_of(const acc_graph *graph, const acc_node *node, conv_geometry *g) {
  int64_t kernel[2], stride[2], pad[2], dilate[2], groups = 1;
  const char *text = acc_node_attr(node, "num_group");
  if (text != NULL && acc_attr_int(text, &groups) != 0) return 0;
  text = acc_node_attr(node, "no_bias");
  int no_bias = 0;
  if (text != NULL && acc_attr_bool(text, &no_bias) != 0) return 0;
  if (groups != 1 || !pair_attr(node, "kernel", 0, kernel) ||
      !pair_attr(node, "stride", 1, stride) || !pair_attr(node, "pad", 0, pad) ||
      !pair_attr(node, "dilate", 1, dilate) || dilate[0] != 1 || dilate[1] != 1 ||
      node->num_inputs != (size_t)(no_bias ? 2 : 3)) {
    return 0;
  }
  const acc_entry data = node->inputs[0], weight = node->inputs[1];
  const acc_shape *x = &graph->nodes[data.node].out_shapes[data.index];
  const acc_shape *k = &graph->nodes[weight.node].out_shapes[weight.index];
  const acc_shape *y = &node->out_shapes[0];
  if (x->ndim != 4 || k->ndim != 4 || y->ndim != 4 || k->dims[1] != x->dims[1] ||
      (int64_t)k->dims[2] != kernel[0] || (int64_t)k->dims[3] != kernel[1]) {
    return 0;
  }
  *g = (conv_geometry){(int64_t)x->dims[0], (int64_t)x->dims[1], (int64_t)x->dims[2],
                       (int64_t)x->dims[3], (int64_t)k->dims[0], kernel[0], kernel[1],
                       stride[0], stride[1], pad[0], pad[1], (int64_t)y->dims[2],
                       (int64_t)y->dims[3], !no_bias};
  return (int64_t)y->dims[0] == g->n && (int64_t)y->dims[1] == g->f && g->sh > 0 &&
         g->sw > 0 && g->oh == (g->h + 2 * g->ph - g->kh) / g->sh + 1 &&
         g->ow == (g->w + 2 * g->pw - g->kw) / g->sw + 1;
}

static void convolve(const conv_geometry *g, const float *x, const float *k, const float *bias,
                     float *y) {
  for (int64_t n = 0; n < g->n; ++n) {
    for (int64_t f = 0; f < g->f; ++f) {
      for (int64_t i = 0; i < g->oh; ++i) {
        for (int64_t j = 0; j < g->ow; ++j) {
          float sum = 0.0f;
#ifndef CONF_CONV_DROPS_BIAS
          if (g->bias) sum = bias[f];
#else
          (void)bias;
#endif
          for (int64_t c = 0; c < g->c; ++c) {
            for (int64_t a = 0; a < g->kh; ++a) {
              int64_t r = i * g->sh - g->ph + a;
              if (r < 0 || r >= g->h) continue;
              for (int64_t b = 0; b < g->kw; ++b) {
                int64_t s = j * g->sw - g->pw + b;
                if (s < 0 || s >= g->w) continue;
                sum += x[((n * g->c + c) * g->h + r) * g->w + s] *
                       k[((f * g->c + c) * g->kh + a) * g->kw + b];
              }
            }
          }
          y[((n * g->f + f) * g->oh + i) * g->ow + j] = sum;
        }
      }
    }
  }
}
#endif

/* 1 if node is a relu or elemwise_add (or, with CONF_WITH_CONV, a
 * Convolution) at operator version 1 whose inputs and output have the dtype
 * this plugin takes (float32; claims: what supportedOps() says, which with
 * CONF_CLAIMS_ALL_FLOATS is more than loadModel() takes). */
static int node_accepted(const acc_graph *graph, const acc_node *node, int claims) {
  const char *version = acc_node_attr(node, "__op_version__");
  int32_t dtype = node->num_outputs == 1 ? node->out_dtypes[0] : -1;
#ifdef CONF_CLAIMS_ALL_FLOATS
  int dtype_ok = dtype == kFloat32 || (claims && (dtype == kFloat16 || dtype == kFloat64));
#else
  (void)claims;
  int dtype_ok = dtype == kFloat32;
#endif
  if (node->op == NULL || (version != NULL && strcmp(version, "1") != 0) || !dtype_ok) return 0;
  if (strcmp(node->op, "Activation") == 0) {
    const char *act_type = acc_node_attr(node, "act_type");
    if (act_type == NULL || strcmp(act_type, "relu") != 0 || node->num_inputs != 1) return 0;
#ifdef CONF_WITH_CONV
  } else if (strcmp(node->op, "Convolution") == 0) {
    conv_geometry g;
    if (dtype != kFloat32 || !conv_geometry_of(graph, node, &g)) return 0;
#endif
  } else if (strcmp(node->op, "elemwise_add") != 0 || node->num_inputs != 2) {
    return 0;
  }
  for (size_t i = 0; i < node->num_inputs; ++i) {
    const acc_entry entry = node->inputs[i];
    const acc_node *source = &graph->nodes[entry.node];
    if (source->out_dtypes[entry.index] != dtype) return 0;
  }
  return 1;
}

static int node_supported(const acc_graph *graph, const acc_node *node) {
  return node_accepted(graph, node, 0);
}

static int parse(const char *call, const char *json, acc_graph **graph) {
  char message[200];
  if (json == NULL) return fail(MX_ACC_ERR_INVALID_ARG, "%s: json is NULL", call);
  int status = acc_graph_parse(json, 1, graph, message, sizeof message);
  return status == MX_ACC_OK ? MX_ACC_OK : fail(status, "%s: %s", call, message);
}

#ifdef CONF_UNSTABLE_OPS
static unsigned long supported_calls;
static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

MX_ACC_EXPORT int supportedOps(const char *json, const char *const *data_names,
                               const MXTensor *data, int num_data, int dev_id, int *ids,
                               int ids_capacity, int *num_ids) {
  (void)data_names, (void)data, (void)num_data;
  clear_error();
  int status = check_device("supportedOps", dev_id);
  if (status != MX_ACC_OK) return status;
  if (num_ids == NULL || ids_capacity < 0 || (ids_capacity > 0 && ids == NULL)) {
    return fail(MX_ACC_ERR_INVALID_ARG, "supportedOps: invalid ids or num_ids");
  }
  acc_graph *graph = NULL;
  status = parse("supportedOps", json, &graph);
  if (status != MX_ACC_OK) return status;
  int count = 0;
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK; ++i) {
    if (!node_accepted(graph, &graph->nodes[i], 1)) continue;
    if (count == ids_capacity) {
      status = fail(MX_ACC_ERR_INVALID_ARG, "supportedOps: ids holds only %d", ids_capacity);
    } else {
      ids[count++] = (int)i;
    }
  }
#ifdef CONF_BAD_IDS
  if (status == MX_ACC_OK && count > 0 && count < ids_capacity) {
    ids[count++] = (int)graph->num_nodes + 5;
  }
#endif
#ifdef CONF_UNSTABLE_OPS
  pthread_mutex_lock(&calls_lock);
  if (++supported_calls % 2 == 0) count = 0;
  pthread_mutex_unlock(&calls_lock);
#endif
  acc_graph_free(graph);
  if (status == MX_ACC_OK) *num_ids = count;
  return status;
}

/* ---- models --------------------------------------------------------------- */

/* A model's weights are the plugin's copies of its weight variables. */
static relu_model models[CONF_MAX_MODELS];
static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;
static relu_table table = {&models_lock, models, CONF_MAX_MODELS, NULL};

static void free_model(relu_model *m) {
  if (m->weights != NULL) {
    for (size_t i = 0; i < m->graph->num_nodes; ++i) free(m->weights[i]);
    free(m->weights);
  }
  acc_graph_free(m->graph);
  memset(m, 0, sizeof *m);
}

/* Checks that tensor is dense float32 data of shape, in host memory or on dev_id. */
static int check_tensor(const char *call, const char *name, const MXTensor *tensor,
                        const acc_shape *shape, int dev_id) {
  if (tensor->isSparse || tensor->dtype != kFloat32 || tensor->data == NULL ||
      (tensor->dev_id != MX_ACC_HOST_DEVICE && tensor->dev_id != dev_id) ||
      tensor->shape_len != (uint64_t)shape->ndim || (shape->ndim > 0 && tensor->shape == NULL)) {
    return fail(MX_ACC_ERR_INVALID_ARG, "%s: %s is not a dense float32 tensor of the graph's "
                "shape on this device", call, name);
  }
  for (int d = 0; d < shape->ndim; ++d) {
    if (tensor->shape[d] != shape->dims[d]) {
      return fail(MX_ACC_ERR_INVALID_ARG, "%s: %s: extent %d differs", call, name, d);
    }
  }
  return MX_ACC_OK;
}

/* Copies the weights given to loadModel (or infer) into m->weights. */
static int take_weights(const char *call, relu_model *m, const char *const *names,
                        const MXTensor *data, int count, int require_all) {
  for (size_t i = 0; i < m->graph->num_nodes; ++i) {
    const acc_node *node = &m->graph->nodes[i];
    if (node->op != NULL || node->kind != ACC_VAR_WEIGHT) continue;
    int index = relu_find_name(names, count, node->name);
    if (index < 0) {
      if (require_all) return fail(MX_ACC_ERR_INVALID_ARG, "%s: weight %s is missing", call,
                                   node->name);
      continue;
    }
    int status = check_tensor(call, node->name, &data[index], &node->out_shapes[0], m->dev_id);
    if (status != MX_ACC_OK) return status;
    uint64_t n = relu_shape_count(&node->out_shapes[0]);
    if (m->weights[i] == NULL) m->weights[i] = malloc((n > 0 ? n : 1) * sizeof(float));
    if (m->weights[i] == NULL) return fail(MX_ACC_ERR_OUT_OF_MEMORY, "%s", call);
    memcpy(m->weights[i], data[index].data, n * sizeof(float));
  }
  return MX_ACC_OK;
}

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  clear_error();
  int status = check_device("loadModel", dev_id);
  if (status != MX_ACC_OK) return status;
  if (model_id == NULL || strlen(model_id) >= RELU_ID_MAX || num_data < 0 ||
      (num_data > 0 && (data_names == NULL || data == NULL))) {
    return fail(MX_ACC_ERR_INVALID_ARG, "loadModel: invalid model id or data");
  }
  relu_model m = {.graph = NULL};
  status = parse("loadModel", json, &m.graph);
  if (status != MX_ACC_OK) return status;
  for (size_t i = 0; i < m.graph->num_nodes && status == MX_ACC_OK; ++i) {
    const acc_node *node = &m.graph->nodes[i];
    if (node->op != NULL && !node_supported(m.graph, node)) {
      status = fail(MX_ACC_ERR_UNSUPPORTED, "loadModel: node %s (%s) is not supported",
                    node->name, node->op);
    }
  }
  m.dev_id = dev_id;
  snprintf(m.id, sizeof m.id, "%s", model_id);
  if (status == MX_ACC_OK) {
    m.weights = calloc(m.graph->num_nodes + 1, sizeof *m.weights);
    if (m.weights == NULL) status = fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel");
  }
  if (status == MX_ACC_OK) status = take_weights("loadModel", &m, data_names, data, num_data, 1);
  if (status == MX_ACC_OK) {
    pthread_mutex_lock(&models_lock);
    relu_model *slot = NULL;
    if (relu_table_find(&table, model_id) != NULL) {
      status = fail(MX_ACC_ERR_STATE, "loadModel: model %s is loaded already", model_id);
    } else {
      slot = relu_table_free_slot(&table);
      if (slot == NULL) status = fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel: too many models");
      else *slot = m;
    }
    pthread_mutex_unlock(&models_lock);
  }
  if (status != MX_ACC_OK) free_model(&m);
  return status;
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  clear_error();
  if (model_id == NULL) return fail(MX_ACC_ERR_INVALID_ARG, "unloadModel: model id is NULL");
  pthread_mutex_lock(&models_lock);
  relu_model *found = relu_table_find(&table, model_id);
#ifndef CONF_UNLOAD_KEEPS
  if (found != NULL) free_model(found);
#endif
  pthread_mutex_unlock(&models_lock);
  if (found == NULL) return fail(MX_ACC_ERR_NOT_FOUND, "unloadModel: %s is not loaded", model_id);
  return MX_ACC_OK;
}

#ifdef CONF_SHARED_SCRATCH
#ifndef CONF_SCRATCH_NS
#define CONF_SCRATCH_NS 2000000
#endif
#ifndef CONF_SCRATCH_WAIT_NS
#define CONF_SCRATCH_WAIT_NS 200000000
#endif
/* The deliberate bug: one buffer for every device's outputs, unguarded.
 * The bookkeeping beside it is atomic (thread-safe): the writes into the
 * buffer so far, and the device and thread of the latest one (threads are
 * numbered from 1 at their first write). */
static float scratch[1 << 20];
static atomic_ulong scratch_writes;
static atomic_int scratch_last_dev = -1;
static atomic_uint scratch_last_thread;
static atomic_uint scratch_threads;
static _Thread_local unsigned scratch_thread;

static long elapsed_ns(const struct timespec *start) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - start->tv_sec) * 1000000000L + (now.tv_nsec - start->tv_nsec);
}
#endif

static void write_output(float *out, const float *value, uint64_t count, int dev_id) {
#ifdef CONF_SHARED_SCRATCH
  if (count <= sizeof scratch / sizeof scratch[0]) {
    if (scratch_thread == 0) scratch_thread = atomic_fetch_add(&scratch_threads, 1) + 1;
    memcpy(scratch, value, count * sizeof(float));
    unsigned long mine = atomic_fetch_add(&scratch_writes, 1) + 1;
    int last_dev = atomic_exchange(&scratch_last_dev, dev_id);
    unsigned last_thread = atomic_exchange(&scratch_last_thread, scratch_thread);
    /* Busy for CONF_SCRATCH_NS, as computing would be (nanosleep sleeps
     * 50 us or more whatever it is asked, the kernel's timer slack). */
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (elapsed_ns(&start) < CONF_SCRATCH_NS) {
    }
    /* A busy window only overlaps another device's call when both threads
     * run at that moment, on two free cores: on a loaded machine the calls
     * of concurrent threads mostly run one after the other, and the race
     * would go unseen by chance. When the previous write came from another
     * device and another thread (the devices are driven concurrently), the
     * buffer is held on, blocked so that the other threads run, until
     * another call has written it: the race then shows whenever the host
     * interleaves the devices' calls, whatever the cores and the load. */
    if (last_dev >= 0 && last_dev != dev_id && last_thread != scratch_thread) {
      struct timespec pause = {0, 20000};
      while (atomic_load(&scratch_writes) == mine && elapsed_ns(&start) < CONF_SCRATCH_WAIT_NS) {
        nanosleep(&pause, NULL);
      }
    }
    memcpy(out, scratch, count * sizeof(float));
    return;
  }
#else
  (void)dev_id;
#endif
#ifdef CONF_OUTPUT_OVERRUN
  memcpy(out, value, count * sizeof(float));
  memset(out + count, 0, 4 * sizeof(float)); /* past the end of the output */
  return;
#endif
  memcpy(out, value, count * sizeof(float));
}

/* Runs m with the given inputs; values[i] is node i's output. */
static int run(relu_model *m, const char *const *in_names, const MXTensor *in_data, int num_in,
               float **values, int *owned) {
  const acc_graph *graph = m->graph;
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    const acc_node *node = &graph->nodes[i];
    uint64_t count = relu_shape_count(&node->out_shapes[0]);
    if (node->op == NULL) {
      if (node->kind == ACC_VAR_WEIGHT) {
        values[i] = m->weights[i];
        continue;
      }
      int index = relu_find_name(in_names, num_in, node->name);
      if (index < 0) return fail(MX_ACC_ERR_INVALID_ARG, "infer: input %s is missing", node->name);
      int status = check_tensor("infer", node->name, &in_data[index], &node->out_shapes[0],
                                m->dev_id);
      if (status != MX_ACC_OK) return status;
      values[i] = in_data[index].data;
      continue;
    }
    values[i] = malloc((count > 0 ? count : 1) * sizeof(float));
    if (values[i] == NULL) return fail(MX_ACC_ERR_OUT_OF_MEMORY, "infer: %s", node->name);
    owned[i] = 1;
    const float *a = values[node->inputs[0].node];
    if (strcmp(node->op, "Activation") == 0) {
#ifdef CONF_NAN_TO_ZERO_RELU
      for (uint64_t k = 0; k < count; ++k) values[i][k] = a[k] > 0.0f ? a[k] : 0.0f;
#else
      /* NaN stays NaN (a comparison with NaN is false), as on the CPU path. */
      for (uint64_t k = 0; k < count; ++k) values[i][k] = a[k] <= 0.0f ? 0.0f : a[k];
#endif
#ifdef CONF_WITH_CONV
    } else if (strcmp(node->op, "Convolution") == 0) {
      conv_geometry g;
      if (!conv_geometry_of(graph, node, &g)) {
        return fail(MX_ACC_ERR_INTERNAL, "infer: %s: geometry changed", node->name);
      }
      const float *bias = g.bias ? values[node->inputs[2].node] : NULL;
      convolve(&g, a, values[node->inputs[1].node], bias, values[i]);
#endif
    } else {
      const float *b = values[node->inputs[1].node];
      for (uint64_t k = 0; k < count; ++k) {
#ifdef CONF_WRONG_ADD
        values[i][k] = a[k] + 1.01f * b[k];
#else
        values[i][k] = a[k] + b[k];
#endif
      }
    }
  }
  return MX_ACC_OK;
}

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  clear_error();
  if (model_id == NULL || num_in < 0 || num_out < 0 || (num_in > 0 && in_data == NULL) ||
      (num_out > 0 && (out_data == NULL || out_names == NULL))) {
    return fail(MX_ACC_ERR_INVALID_ARG, "infer: invalid arguments");
  }
  pthread_mutex_lock(&models_lock);
  relu_model *m = relu_table_find(&table, model_id);
  pthread_mutex_unlock(&models_lock);
  /* m stays valid: the host serializes unloadModel with the model's other calls. */
  if (m == NULL) return fail(MX_ACC_ERR_NOT_FOUND, "infer: model %s is not loaded", model_id);
  int status = take_weights("infer", m, in_names, in_data, num_in, 0);
  if (status != MX_ACC_OK) return status;
  size_t num_nodes = m->graph->num_nodes;
  float **values = calloc(num_nodes + 1, sizeof *values);
  int *owned = calloc(num_nodes + 1, sizeof *owned);
  if (values == NULL || owned == NULL) status = fail(MX_ACC_ERR_OUT_OF_MEMORY, "infer");
  if (status == MX_ACC_OK) status = run(m, in_names, in_data, num_in, values, owned);
  for (size_t h = 0; status == MX_ACC_OK && h < m->graph->num_heads; ++h) {
    char name[RELU_ID_MAX + 16];
    acc_entry head = m->graph->heads[h];
    const acc_node *node = &m->graph->nodes[head.node];
    if (acc_graph_output_name(m->graph, head, name, sizeof name) != 0) {
      status = fail(MX_ACC_ERR_INTERNAL, "infer: head %zu has no name", h);
      break;
    }
    int index = relu_find_name(out_names, num_out, name);
    if (index < 0) {
      status = fail(MX_ACC_ERR_INVALID_ARG, "infer: output %s is missing", name);
      break;
    }
    status = check_tensor("infer", name, &out_data[index], &node->out_shapes[0], m->dev_id);
    if (status == MX_ACC_OK) {
      write_output(out_data[index].data, values[head.node],
                   relu_shape_count(&node->out_shapes[0]), m->dev_id);
    }
  }
  for (size_t i = 0; values != NULL && owned != NULL && i < num_nodes; ++i) {
    if (owned[i]) free(values[i]);
  }
  free(values);
  free(owned);
  return status;
}

/* ---- configure ------------------------------------------------------------ */

static relu_answer answer;
_Static_assert(CONF_MAX_KEYS <= sizeof answer.keys / sizeof answer.keys[0],
               "configure() answers up to CONF_MAX_KEYS pairs");

MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  clear_error();
  int status = check_device("configure", dev_id);
  if (status != MX_ACC_OK) return status;
  if (num_in < 0 || num_in > CONF_MAX_KEYS / 2 || (num_in > 0 && (in_keys == NULL ||
      in_vals == NULL)) || out_keys == NULL || out_vals == NULL || num_out == NULL) {
    return fail(MX_ACC_ERR_INVALID_ARG, "configure: invalid arrays or more than %d keys",
                CONF_MAX_KEYS / 2);
  }
  /* At most CONF_MAX_KEYS / 2 queries of two short answers each: every
   * answer fits, so the results of relu_answer_add() are not looked at. */
  relu_answer_reset(&answer);
  for (int i = 0; i < num_in; ++i) {
    if (in_keys[i] == NULL || in_vals[i] == NULL) {
      return fail(MX_ACC_ERR_INVALID_ARG, "configure: key or value %d is NULL", i);
    }
    if (strcmp(in_keys[i], "query") != 0) {
#ifdef CONF_ACCEPT_UNKNOWN_KEYS
      continue;
#else
      return fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown key \"%.64s\" (confacc knows: "
                  "query)", in_keys[i]);
#endif
    }
    const char *query = in_vals[i];
    if (strcmp(query, "keys") == 0) {
      relu_answer_add(&answer, "keys", "query");
    } else if (strcmp(query, "ops") == 0) {
      relu_answer_add(&answer, "ops", "Activation:1,elemwise_add:1");
    } else if (strcmp(query, "version") == 0) {
      relu_answer_add(&answer, "version", "1.0.0");
    } else if (strcmp(query, "memory") == 0) {
      pthread_once(&memory_once, init_memory);
      device_memory *mem = &memory[dev_id];
      size_t bytes = 0, blocks;
      pthread_mutex_lock(&mem->lock);
      blocks = mem->count;
      for (size_t b = 0; b < mem->count; ++b) bytes += mem->blocks[b].size;
      pthread_mutex_unlock(&mem->lock);
      relu_answer_number(&answer, "allocations", (long)blocks);
      relu_answer_number(&answer, "bytes_in_use", (long)bytes);
    } else {
      return fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown query \"%.64s\"", query);
    }
  }
  *out_keys = answer.keys;
  *out_vals = answer.vals;
  *num_out = answer.count;
  return MX_ACC_OK;
}
