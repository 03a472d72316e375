/* template: the smallest complete acc-host plugin, to copy and rename (README.md).
 * The operators come first, then the entry points of include/mxnet_acc.h in its
 * order. Each clears the calling thread's error, checks everything it is given and
 * fails through acc_fail(), which keeps the message for accGetLastError() per thread. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "graph.h"
#include "status.h"
#include "tensor.h"

#define TP_NAME "template" /* the context type: mx.template(0) */
#define TP_VERSION "1.0.0"
#define TP_NUM_DEVICES 2

/* ---- Operators: float32 at operator version 1, with the semantics of the host's CPU
 * operators (src/acc_host/ops). op_prepare() alone decides what runs: supportedOps,
 * loadModel and accGetExecutor all ask it, so that they never disagree. */
enum { TP_MAX_INPUTS = 3 };
typedef enum tp_kind { TP_CONV, TP_RELU, TP_ADD, TP_FLATTEN } tp_kind;
static const struct {
  const char *name;
  int inputs; /* without Convolution's bias */
} kOps[] = {[TP_CONV] = {"Convolution", 2}, [TP_RELU] = {"Activation", 1},
            [TP_ADD] = {"elemwise_add", 2}, [TP_FLATTEN] = {"Flatten", 1}};
static const char kOpList[] = "Activation:1,Convolution:1,Flatten:1,elemwise_add:1";

typedef struct tp_op { /* one operator, checked and ready to run */
  tp_kind kind;
  int num_inputs; /* Convolution: 3 with a bias */
  acc_shape in[TP_MAX_INPUTS], out;
  int64_t kernel[2], stride[2], pad[2]; /* Convolution: (y, x) */
} tp_op;

/* Attribute key, or NULL when absent or "None". Attributes that do not change the
 * result (workspace...) are never read. */
static const char *get(const acc_node *node, const char *key) {
  const char *value = acc_node_attr(node, key);
  return value != NULL && !acc_attr_is_none(value) ? value : NULL;
}
static int fail(int status, const acc_node *node, const char *what) {
  return acc_fail(status, "%s: %s", node->op, what);
}

/* n integers in [min, INT32_MAX] (so the loops' indices fit int64_t) into out;
 * fallback when absent or "()", a fallback below min making the key required. */
static int get_ints(const acc_node *node, const char *key, int n, int64_t fallback, int64_t min,
                    int64_t *out) {
  const char *text = get(node, key);
  int count = 0;
  if (text != NULL && acc_attr_int_tuple(text, out, n, &count) != 0) count = -1;
  for (int i = 0; count == 0 && i < n; ++i) out[i] = fallback;
  int ok = count == 0 || count == n;
  for (int i = 0; ok && i < n; ++i) ok = out[i] >= min && out[i] <= INT32_MAX;
  if (ok) return MX_ACC_OK;
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %s=%s is not valid", node->op, key,
                  text != NULL ? text : "None");
}

/* Convolution: data (N, C, H, W), weight (F, C, KH, KW), bias (F) unless no_bias. */
static int prepare_conv(const acc_node *node, tp_op *op) {
  const acc_shape *x = &op->in[0], *w = &op->in[1], *b = &op->in[2];
  const char *layout = get(node, "layout");
  int64_t filters, groups, dilate[2];
  int status = get_ints(node, "kernel", 2, -1, 1, op->kernel);
  if (status == MX_ACC_OK) status = get_ints(node, "stride", 2, 1, 1, op->stride);
  if (status == MX_ACC_OK) status = get_ints(node, "pad", 2, 0, 0, op->pad);
  if (status == MX_ACC_OK) status = get_ints(node, "dilate", 2, 1, 1, dilate);
  if (status == MX_ACC_OK) status = get_ints(node, "num_group", 1, 1, 1, &groups);
  if (status == MX_ACC_OK) status = get_ints(node, "num_filter", 1, -1, 1, &filters);
  if (status != MX_ACC_OK) return status;
  if (groups != 1) return fail(MX_ACC_ERR_UNSUPPORTED, node, "num_group > 1 not implemented");
  if (dilate[0] * dilate[1] != 1) return fail(MX_ACC_ERR_UNSUPPORTED, node, "dilate unsupported");
  if (x->ndim != 4 || (layout != NULL && strcmp(layout, "NCHW") != 0)) {
    return fail(MX_ACC_ERR_UNSUPPORTED, node, "only 2-D NCHW is run");
  }
  if (w->ndim != 4 || w->dims[0] != (uint64_t)filters || w->dims[1] != x->dims[1] ||
      w->dims[2] != (uint64_t)op->kernel[0] || w->dims[3] != (uint64_t)op->kernel[1]) {
    return fail(MX_ACC_ERR_INVALID_ARG, node, "the weight does not match num_filter, kernel...");
  }
  if (op->num_inputs == 3 && (b->ndim != 1 || b->dims[0] != w->dims[0])) {
    return fail(MX_ACC_ERR_INVALID_ARG, node, "the bias does not match num_filter");
  }
  op->out = (acc_shape){4, {x->dims[0], w->dims[0], 0, 0}};
  for (int d = 0; d < 2; ++d) {
    int64_t padded = (int64_t)x->dims[2 + d] + 2 * op->pad[d];
    if (padded < op->kernel[d]) return fail(MX_ACC_ERR_INVALID_ARG, node, "kernel > input");
    op->out.dims[2 + d] = (uint64_t)((padded - op->kernel[d]) / op->stride[d] + 1);
  }
  return MX_ACC_OK;
}

/* Checks node (attributes as MXNet writes them) on float32 tensors of the given shapes
 * into *op: MX_ACC_ERR_UNSUPPORTED for what the template does not run (the host runs
 * it on the CPU), MX_ACC_ERR_INVALID_ARG for what is inconsistent. */
static int op_prepare(const acc_node *node, int num_inputs, const acc_shape *inputs,
                      const acc_shape *output, tp_op *op) {
  const char *version = get(node, "__op_version__"), *no_bias = get(node, "no_bias");
  int k = 0, without_bias = 0;
  while (k <= TP_FLATTEN && strcmp(kOps[k].name, node->op) != 0) ++k;
  if (k > TP_FLATTEN || (version != NULL && strcmp(version, "1") != 0)) { /* absent means 1 */
    return fail(MX_ACC_ERR_UNSUPPORTED, node, "the template has no such operator or version");
  }
  if (k == TP_CONV && no_bias != NULL && acc_attr_bool(no_bias, &without_bias) != 0) {
    return fail(MX_ACC_ERR_INVALID_ARG, node, "no_bias is not a boolean");
  }
  if (num_inputs != kOps[k].inputs + (k == TP_CONV && !without_bias)) {
    return fail(MX_ACC_ERR_INVALID_ARG, node, "wrong number of inputs");
  }
  *op = (tp_op){.kind = (tp_kind)k, .num_inputs = num_inputs, .out = inputs[0]};
  size_t bytes; /* each at most SIZE_MAX: the loops' counts and indices fit int64_t */
  int status = acc_shape_bytes(output, sizeof(float), node->op, &bytes);
  for (int i = 0; status == MX_ACC_OK && i < num_inputs; ++i) {
    status = acc_shape_bytes(&inputs[i], sizeof(float), node->op, &bytes);
    op->in[i] = inputs[i];
  }
  if (status != MX_ACC_OK) return status;
  if (k == TP_CONV) status = prepare_conv(node, op);
  if (k == TP_RELU && !acc_attr_equals(get(node, "act_type"), "relu")) {
    status = fail(MX_ACC_ERR_UNSUPPORTED, node, "act_type other than relu is not run");
  }
  if (k == TP_ADD && !acc_shape_equal(&inputs[0], &inputs[1])) {
    status = fail(MX_ACC_ERR_INVALID_ARG, node, "the inputs' shapes differ");
  }
  if (k == TP_FLATTEN) { /* (d0, d1, ...) as (d0, d1 * ...), which fits as the input does */
    op->out = (acc_shape){2, {inputs[0].ndim > 0 ? inputs[0].dims[0] : 1, 1}};
    for (int d = 1; d < inputs[0].ndim; ++d) op->out.dims[1] *= inputs[0].dims[d];
  }
  if (status == MX_ACC_OK && !acc_shape_equal(&op->out, output)) {
    status = fail(MX_ACC_ERR_INVALID_ARG, node, "the output's shape is not the one computed");
  }
  return status;
}

static void run_conv(const tp_op *op, const float *x, const float *w, const float *b, float *y) {
  const int64_t n = (int64_t)op->in[0].dims[0], c = (int64_t)op->in[0].dims[1];
  const int64_t h = (int64_t)op->in[0].dims[2], wd = (int64_t)op->in[0].dims[3];
  const int64_t f = (int64_t)op->out.dims[1], oh = (int64_t)op->out.dims[2];
  const int64_t ow = (int64_t)op->out.dims[3], kh = op->kernel[0], kw = op->kernel[1];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < f; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          float sum = b != NULL ? b[o] : 0.0f;
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t ky = 0; ky < kh; ++ky) {
              int64_t iy = oy * op->stride[0] - op->pad[0] + ky;
              for (int64_t kx = 0; iy >= 0 && iy < h && kx < kw; ++kx) {
                int64_t ix = ox * op->stride[1] - op->pad[1] + kx;
                if (ix < 0 || ix >= wd) continue; /* padding */
                sum += x[((i * c + ch) * h + iy) * wd + ix] * w[((o * c + ch) * kh + ky) * kw + kx];
              }
            }
          y[((i * f + o) * oh + oy) * ow + ox] = sum;
        }
}

/* Runs op. The output never shares memory with an input: the host gives an executor
 * fresh tensors (mxnet_acc.h), and a model keeps a value per node. */
static void op_run(const tp_op *op, const float *const *in, float *out) {
  int64_t count = 1;
  for (int d = 0; d < op->out.ndim; ++d) count *= (int64_t)op->out.dims[d];
  if (op->kind == TP_CONV) run_conv(op, in[0], in[1], op->num_inputs == 3 ? in[2] : NULL, out);
  for (int64_t i = 0; op->kind == TP_RELU && i < count; ++i) {
    out[i] = in[0][i] < 0.0f ? 0.0f : in[0][i]; /* NaN stays NaN */
  }
  for (int64_t i = 0; op->kind == TP_ADD && i < count; ++i) out[i] = in[0][i] + in[1][i];
  if (op->kind == TP_FLATTEN && count > 0) memcpy(out, in[0], (size_t)count * sizeof(float));
}

/* ---- Identification and errors. */
MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }
MX_ACC_EXPORT int getNumAcc(void) { return TP_NUM_DEVICES; }
MX_ACC_EXPORT int supportsImperative(void) { return 1; }
MX_ACC_EXPORT const char *accGetLastError(void) { return acc_last_error(); }
MX_ACC_EXPORT int initialize(int version) {
  acc_clear_error(); /* a real plugin opens its driver and finds its devices here */
  if (version / 100 == MX_ACC_API_VERSION_MAJOR) return MX_ACC_OK; /* any MINOR will do */
  return acc_fail(MX_ACC_ERR_VERSION, "template implements ABI %d.x, not %d.%d",
                  MX_ACC_API_VERSION_MAJOR, version / 100, version % 100);
}
MX_ACC_EXPORT int getAccName(char *name, size_t name_size) {
  acc_clear_error();
  if (name == NULL || name_size < sizeof TP_NAME) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "getAccName: needs %zu bytes", sizeof TP_NAME);
  }
  memcpy(name, TP_NAME, sizeof TP_NAME); /* with its NUL */
  return MX_ACC_OK;
}

/* The start of each entry point given a dev_id: clears the error, checks dev_id, then args_ok. */
static int begin(const char *call, int dev_id, int args_ok) {
  acc_clear_error();
  if (dev_id < 0 || dev_id >= TP_NUM_DEVICES) {
    return acc_fail(MX_ACC_ERR_DEVICE, "%s: no device %d", call, dev_id);
  }
  return args_ok ? MX_ACC_OK : acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: NULL or negative", call);
}

/* ---- Device memory: a real plugin calls its driver. The template lists its malloc'd
 * blocks per device, so that it refuses a pointer it did not hand out instead of
 * dereferencing it. No lock: the host serializes the calls naming one dev_id. */
typedef struct tp_block { /* one allocation: this header, then the bytes handed out */
  struct tp_block *next;
  size_t size;
  max_align_t data[]; /* aligned for any type, as malloc's memory is */
} tp_block;
static tp_block *blocks[TP_NUM_DEVICES]; /* live allocations per device, newest first */

MX_ACC_EXPORT int mx_alloc(int dev_id, size_t size, void **ptr) {
  int status = begin("mx_alloc", dev_id, ptr != NULL);
  if (status != MX_ACC_OK) return status;
  tp_block *block = size <= SIZE_MAX - sizeof *block ? malloc(sizeof *block + size) : NULL;
  if (block == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "mx_alloc: %zu bytes", size);
  *block = (tp_block){blocks[dev_id], size};
  blocks[dev_id] = block;
  *ptr = block->data;
  return MX_ACC_OK;
}

MX_ACC_EXPORT int mx_free(int dev_id, void *ptr) {
  int status = begin("mx_free", dev_id, 1);
  if (status != MX_ACC_OK || ptr == NULL) return status;
  tp_block **link = &blocks[dev_id], *block;
  while ((block = *link) != NULL && (void *)block->data != ptr) link = &block->next;
  if (block == NULL) {
    return acc_fail(MX_ACC_ERR_NOT_FOUND, "mx_free: %p is not memory of device %d", ptr, dev_id);
  }
  *link = block->next;
  free(block);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int mx_releaseAll(int dev_id) {
  int status = begin("mx_releaseAll", dev_id, 1);
  while (status == MX_ACC_OK && blocks[dev_id] != NULL) {
    status = mx_free(dev_id, blocks[dev_id]->data); /* the newest: found first */
  }
  return status;
}

/* MX_ACC_OK if [ptr, ptr + bytes) lies in one live allocation of dev_id, compared as
 * integers: comparing pointers into different objects is undefined in C. */
static int check_memory(int dev_id, const void *ptr, size_t bytes, const char *what) {
  uintptr_t start = (uintptr_t)ptr;
  for (const tp_block *b = blocks[dev_id]; b != NULL; b = b->next) {
    uintptr_t at = start - (uintptr_t)b->data; /* start's offset in b, if start >= b->data */
    if (start >= (uintptr_t)b->data && at <= b->size && bytes <= b->size - at) return MX_ACC_OK;
  }
  if (bytes == 0) return MX_ACC_OK;
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %zu bytes at %p are not memory of device %d", what,
                  bytes, ptr, dev_id);
}

/* Checks a float32 tensor of the given shape, in memory of dev_id or (if
 * allow_host) in host memory; *data (out) is its first element, *bytes its size. */
static int tensor_data(const MXTensor *tensor, const char *what, const acc_shape *shape,
                       int dev_id, int allow_host, float **data, size_t *bytes) {
  int status = acc_tensor_expect(tensor, what, kFloat32, shape);
  if (status == MX_ACC_OK) status = acc_shape_bytes(shape, sizeof(float), what, bytes);
  if (status != MX_ACC_OK) return status;
  *data = tensor->data;
  if (tensor->dev_id == MX_ACC_HOST_DEVICE && allow_host) return MX_ACC_OK;
  if (tensor->dev_id == dev_id) return check_memory(dev_id, tensor->data, *bytes, what);
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: on device %d", what, tensor->dev_id);
}

/* acc_check_copy checks the two descriptors against each other; the device
 * side must then be memory of its device. Any dtype: bytes are bytes. */
static int copy(const MXTensor *device, const MXTensor *host, int to_device, const char *call) {
  size_t bytes;
  acc_clear_error();
  int status = acc_check_copy(device, host, call, &bytes);
  if (status == MX_ACC_OK) status = begin(call, device->dev_id, 1);
  if (status == MX_ACC_OK) status = check_memory(device->dev_id, device->data, bytes, call);
  if (status == MX_ACC_OK && bytes > 0) {
    memcpy(to_device ? device->data : host->data, to_device ? host->data : device->data, bytes);
  }
  return status;
}
MX_ACC_EXPORT int copyToAcc(const MXTensor *dst, const MXTensor *src) {
  return copy(dst, src, 1, "copyToAcc");
}
MX_ACC_EXPORT int copyFromAcc(const MXTensor *dst, const MXTensor *src) {
  return copy(src, dst, 0, "copyFromAcc");
}

/* ---- Imperative mode: an executor runs one operator that op_prepare() accepted. */
typedef struct tp_executor {
  MXAccExecutor base; /* what the host holds; base.state points back to this */
  tp_op op;
  int dev_id;
} tp_executor;

static int forward(MXAccExecutor *self, const MXTensor *inputs, int num_in,
                   const MXTensor *outputs, int num_out) {
  acc_clear_error();
  const tp_executor *e = self->state;
  float *data[TP_MAX_INPUTS + 1]; /* the inputs, then the output */
  size_t bytes;
  int status = num_in != e->op.num_inputs || num_out != 1 || !inputs || !outputs
                   ? acc_fail(MX_ACC_ERR_INVALID_ARG, "forward: %d inputs, 1 output", num_in)
                   : MX_ACC_OK;
  for (int i = 0; status == MX_ACC_OK && i <= num_in; ++i) {
    const MXTensor *tensor = i < num_in ? &inputs[i] : outputs;
    const acc_shape *shape = i < num_in ? &e->op.in[i] : &e->op.out;
    status = tensor_data(tensor, "forward", shape, e->dev_id, 0, &data[i], &bytes);
  }
  if (status == MX_ACC_OK) op_run(&e->op, (const float *const *)data, data[num_in]);
  return status;
}

static void release(MXAccExecutor *self) { free(self->state); }
MX_ACC_EXPORT int accGetExecutor(const char *op_name, const MXTensor *inputs,
                                 const MXTensor *outputs, int num_in, int num_out,
                                 const char *const *attr_keys, const char *const *attr_vals,
                                 int num_attrs, int dev_id, MXAccExecutor **executor) {
  int valid = op_name != NULL && executor != NULL && num_in >= 0 && num_out >= 0 &&
              (num_in == 0 || inputs != NULL) && (num_out == 0 || outputs != NULL) &&
              num_attrs >= 0 && (num_attrs == 0 || (attr_keys != NULL && attr_vals != NULL));
  for (int i = 0; valid && i < num_attrs; ++i) valid = attr_keys[i] && attr_vals[i];
  int status = begin("accGetExecutor", dev_id, valid);
  if (status != MX_ACC_OK) return status;
  if (num_in > TP_MAX_INPUTS || num_out != 1) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: %d inputs, %d outputs", op_name, num_in, num_out);
  }
  acc_shape shapes[TP_MAX_INPUTS + 1]; /* the inputs, then the output */
  for (int i = 0; status == MX_ACC_OK && i <= num_in; ++i) {
    const MXTensor *tensor = i < num_in ? &inputs[i] : outputs;
    status = acc_tensor_shape(tensor, op_name, &shapes[i]);
    if (status == MX_ACC_OK && tensor->dtype != kFloat32) {
      status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: %s", op_name, acc_dtype_name(tensor->dtype));
    }
  }
  const acc_node node = {.op = op_name, .name = op_name, .num_attrs = (size_t)num_attrs,
                         .attr_keys = attr_keys, .attr_vals = attr_vals};
  tp_op op;
  if (status == MX_ACC_OK) status = op_prepare(&node, num_in, shapes, &shapes[num_in], &op);
  if (status != MX_ACC_OK) return status;
  tp_executor *e = malloc(sizeof *e);
  if (e == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "accGetExecutor");
  *e = (tp_executor){{forward, release, e}, op, dev_id};
  *executor = &e->base;
  return MX_ACC_OK;
}

/* ---- Symbolic mode: a model runs its operator nodes in the graph's (topological)
 * order on a value per node: loadModel copies the weights in (all it is given is
 * borrowed), infer the data, and copies the heads out. The model list is shared by
 * both devices and has a lock; a model needs none (the host serializes its device). */
typedef struct tp_model { /* everything owned */
  struct tp_model *next;
  int dev_id;
  acc_graph *graph;
  char **head_names; /* for acc_match_outputs() */
  size_t *head_of;   /* infer's output i is head head_of[i] */
  struct tp_node {
    tp_op op;     /* operator nodes: the operator */
    float *value; /* the variable's value, or the operator's output */
  } *nodes;       /* one per node of graph */
  char id[];
} tp_model;
static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;
static tp_model *models; /* guarded by models_lock */

/* Checks the arguments supportedOps and loadModel share (args_ok: the others) and parses
 * json (with the host's annotations) into *graph, which is NULL on failure. */
static int parse(const char *call, int dev_id, int args_ok, const char *json,
                 const char *const *names, const MXTensor *data, int num, acc_graph **graph) {
  char error[256];
  *graph = NULL;
  int status = begin(call, dev_id, args_ok);
  if (status == MX_ACC_OK) status = acc_check_named_tensors(call, names, data, num);
  if (status != MX_ACC_OK) return status;
  status = acc_graph_parse(json, 1, graph, error, sizeof error); /* json may be NULL */
  return status == MX_ACC_OK ? status : acc_fail(status, "%s: %s", call, error);
}

/* Checks node n, an operator with float32 inputs and one float32 output. */
static int node_op(const acc_graph *graph, size_t n, tp_op *op) {
  const acc_node *node = &graph->nodes[n];
  acc_shape in[TP_MAX_INPUTS];
  int ok = node->num_outputs == 1 && node->out_dtypes[0] == kFloat32 &&
           node->num_inputs <= TP_MAX_INPUTS;
  for (size_t i = 0; ok && i < node->num_inputs; ++i) { /* graph.h checked the entries */
    const acc_node *from = &graph->nodes[node->inputs[i].node];
    ok = from->out_dtypes[node->inputs[i].index] == kFloat32;
    in[i] = from->out_shapes[node->inputs[i].index];
  }
  if (!ok) return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: float32 only", node->op);
  return op_prepare(node, (int)node->num_inputs, in, &node->out_shapes[0], op);
}

/* supportedOps() and, into reasons (ABI 1.1's supportedOpsReasons), each declined
 * node's reason: the message of the check that refused it. */
static int supported(const char *json, const char *const *names, const MXTensor *data, int num,
                     int dev_id, int *ids, int ids_capacity, int *num_ids, char *reasons,
                     size_t reason_size) {
  acc_graph *graph;
  tp_op op;
  int ids_ok = num_ids != NULL && ids_capacity >= 0 && (ids_capacity == 0 || ids != NULL);
  int count = 0, status = parse("supportedOps", dev_id, ids_ok, json, names, data, num, &graph);
  for (size_t n = 0; status == MX_ACC_OK && n < graph->num_nodes; ++n) {
    if (graph->nodes[n].op == NULL) continue;
    if (node_op(graph, n, &op) != MX_ACC_OK) {
      acc_reason(reasons, reason_size, ids_capacity, n, "%s", acc_last_error());
      continue;
    }
    if (count == ids_capacity) status = acc_fail(MX_ACC_ERR_INVALID_ARG, "supportedOps: ids");
    if (status == MX_ACC_OK) ids[count++] = (int)n;
  }
  if (status == MX_ACC_OK) {
    acc_clear_error(); /* a node left out is no failure */
    *num_ids = count;
  }
  acc_graph_free(graph);
  return status;
}
MX_ACC_EXPORT int supportedOps(const char *json, const char *const *names, const MXTensor *data,
                               int num, int dev_id, int *ids, int capacity, int *num_ids) {
  return supported(json, names, data, num, dev_id, ids, capacity, num_ids, NULL, 0);
}
#if MX_ACC_API_VERSION >= 101 /* ABI 1.1's optional additions; a 1.0 build leaves them out */
MX_ACC_EXPORT int supportedOpsReasons(const char *json, const char *const *names,
                                      const MXTensor *data, int num, int dev_id, int *ids,
                                      int capacity, int *num_ids, char *reasons, size_t size) {
  return supported(json, names, data, num, dev_id, ids, capacity, num_ids, reasons, size);
}
MX_ACC_EXPORT int retainsWeights(void) { return 0; } /* compile() copies the weights */
#endif

static void model_free(tp_model *model) {
  for (size_t n = 0; model->nodes != NULL && n < model->graph->num_nodes; ++n) {
    free(model->nodes[n].value);
  }
  acc_free_head_names(model->graph, model->head_names);
  free(model->head_of);
  free(model->nodes);
  acc_graph_free(model->graph);
  free(model);
}

/* The index of node's value in names, or -1 after failing call. */
static int value_of(const char *call, const acc_node *node, const char *const *names, int count) {
  int i = count - 1;
  while (i >= 0 && strcmp(names[i], node->name) != 0) --i;
  if (i < 0) acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: no value for %s", call, node->name);
  return i;
}

/* Copies tensor into the value of node n (to_model), or that value into tensor. */
static int transfer(tp_model *model, size_t n, const MXTensor *tensor, const char *name,
                    int to_model) {
  const acc_shape *shape = &model->graph->nodes[n].out_shapes[0];
  float *data, *value = model->nodes[n].value;
  size_t bytes;
  int status = tensor_data(tensor, name, shape, model->dev_id, 1, &data, &bytes);
  if (status == MX_ACC_OK && bytes > 0) {
    memcpy(to_model ? value : data, to_model ? data : value, bytes);
  }
  return status;
}

/* Checks every node, allocates its value, copies the weights in. */
static int compile(tp_model *model, const char *const *names, const MXTensor *data, int num) {
  const acc_graph *graph = model->graph;
  model->nodes = calloc(graph->num_nodes + 1, sizeof *model->nodes);
  model->head_of = calloc(graph->num_heads + 1, sizeof *model->head_of);
  int status = model->nodes == NULL || model->head_of == NULL
                   ? acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel")
                   : acc_graph_head_names(graph, &model->head_names);
  for (size_t n = 0, bytes; status == MX_ACC_OK && n < graph->num_nodes; ++n) {
    const acc_node *node = &graph->nodes[n];
    if (node->op != NULL) status = node_op(graph, n, &model->nodes[n].op);
    if (status == MX_ACC_OK) {
      status = acc_shape_bytes(&node->out_shapes[0], sizeof(float), node->name, &bytes);
    }
    if (status == MX_ACC_OK && (model->nodes[n].value = malloc(bytes ? bytes : 1)) == NULL) {
      status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel");
    }
    if (status == MX_ACC_OK && node->kind == ACC_VAR_WEIGHT) {
      int i = value_of("loadModel", node, names, num);
      status = i < 0 ? MX_ACC_ERR_INVALID_ARG : transfer(model, n, &data[i], node->name, 1);
    }
  }
  return status;
}

/* The model called id, taken out of the list if take; if there is none, add (when not
 * NULL) goes at the list's end. Under models_lock: loadModel's test and insertion are one. */
static tp_model *lookup(const char *id, int take, tp_model *add) {
  tp_model **link = &models, *model;
  if (id == NULL) return NULL;
  pthread_mutex_lock(&models_lock);
  while ((model = *link) != NULL && strcmp(model->id, id) != 0) link = &model->next;
  if (model != NULL && take) *link = model->next;
  if (model == NULL) *link = add; /* add->next is NULL */
  pthread_mutex_unlock(&models_lock);
  return model;
}

MX_ACC_EXPORT int loadModel(const char *model_id, const char *json,
                            const char *const *data_names, const MXTensor *data, int num_data,
                            int dev_id) {
  acc_clear_error();
  size_t id_size = model_id != NULL ? strlen(model_id) + 1 : 1;
  if (id_size == 1) return acc_fail(MX_ACC_ERR_INVALID_ARG, "loadModel: no model_id");
  tp_model *model = calloc(1, sizeof *model + id_size);
  if (model == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "loadModel");
  memcpy(model->id, model_id, id_size);
  model->dev_id = dev_id;
  int status = parse("loadModel", dev_id, 1, json, data_names, data, num_data, &model->graph);
  if (status == MX_ACC_OK) status = compile(model, data_names, data, num_data);
  if (status == MX_ACC_OK && lookup(model_id, 0, model) != NULL) {
    status = acc_fail(MX_ACC_ERR_STATE, "loadModel: %s is loaded already", model_id);
  }
  if (status != MX_ACC_OK) model_free(model);
  return status;
}

MX_ACC_EXPORT int unloadModel(const char *model_id) {
  acc_clear_error();
  tp_model *model = lookup(model_id, 1, NULL);
  if (model == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "unloadModel: no such model");
  model_free(model);
  return MX_ACC_OK;
}

MX_ACC_EXPORT int infer(const char *model_id, const char *const *in_names,
                        const char *const *out_names, const MXTensor *in_data,
                        const MXTensor *out_data, int num_in, int num_out) {
  acc_clear_error();
  tp_model *model = lookup(model_id, 0, NULL);
  int status = model == NULL ? acc_fail(MX_ACC_ERR_NOT_FOUND, "infer: no such model")
                             : acc_check_named_tensors("infer", in_names, in_data, num_in);
  if (status == MX_ACC_OK) status = acc_check_named_tensors("infer", out_names, out_data, num_out);
  if (status != MX_ACC_OK) return status;
  const acc_graph *graph = model->graph; /* every head once, of the annotated dtype and shape: */
  status = acc_match_outputs(graph, (const char *const *)model->head_names, out_names, out_data,
                             num_out, model->head_of);
  for (size_t n = 0; status == MX_ACC_OK && n < graph->num_nodes; ++n) {
    const acc_node *node = &graph->nodes[n]; /* each data variable needs a value */
    if (node->kind == ACC_VAR_DATA && value_of("infer", node, in_names, num_in) < 0) {
      status = MX_ACC_ERR_INVALID_ARG;
    }
  }
  for (int i = 0; status == MX_ACC_OK && i < num_in; ++i) { /* weights too: from now on */
    long n = acc_graph_find_variable(graph, in_names[i]);
    status = n < 0 ? acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: no variable %s", in_names[i])
                   : transfer(model, (size_t)n, &in_data[i], in_names[i], 1);
  }
  for (size_t n = 0; status == MX_ACC_OK && n < graph->num_nodes; ++n) {
    const acc_node *node = &graph->nodes[n];
    const float *in[TP_MAX_INPUTS];
    if (node->op == NULL) continue;
    for (size_t i = 0; i < node->num_inputs; ++i) in[i] = model->nodes[node->inputs[i].node].value;
    op_run(&model->nodes[n].op, in, model->nodes[n].value);
  }
  for (int i = 0; status == MX_ACC_OK && i < num_out; ++i) { /* the heads, out */
    status = transfer(model, graph->heads[model->head_of[i]].node, &out_data[i], out_names[i], 0);
  }
  return status;
}

/* ---- configure: the reserved key "query", one per call, answered with a row of
 * kAnswers (the query's name, then the answer), constant so that it outlives the
 * call. A setting of your own is one more key: check every pair, then apply. */
static const char *const kAnswers[][2] = {
    {"keys", "query"}, {"ops", kOpList}, {"version", TP_VERSION}};

MX_ACC_EXPORT int configure(const char *const *in_keys, const char *const *in_vals, int num_in,
                            int dev_id, const char *const **out_keys,
                            const char *const **out_vals, int *num_out) {
  int answer = -1, status = begin("configure", dev_id, num_in >= 0 && out_keys && out_vals &&
                                  num_out && (num_in == 0 || (in_keys && in_vals)));
  if (status != MX_ACC_OK) return status;
  for (int i = 0; i < num_in; ++i) { /* the first failure returns */
    const char *key = in_keys[i], *value = in_vals[i];
    int q = 0; /* the row value asks for; 3 if none */
    while (value != NULL && q < 3 && strcmp(kAnswers[q][0], value) != 0) ++q;
    if (!key || !value) return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: pair %d holds NULL", i);
    if (strcmp(key, "query") != 0) {
      return acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown key %s", key);
    }
    if (answer >= 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: one query per call");
    if (q == 3) return acc_fail(MX_ACC_ERR_NOT_FOUND, "configure: unknown query %s", value);
    answer = q;
  }
  *out_keys = &kAnswers[answer >= 0 ? answer : 0][0];
  *out_vals = &kAnswers[answer >= 0 ? answer : 0][1];
  *num_out = answer >= 0;
  return MX_ACC_OK;
}
