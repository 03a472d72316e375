/*
 * mxnet_acc.h -- the "Bring your own Accelerator" C ABI of acc-host.
 *
 * An accelerator library ("plugin") is a shared library that exports the
 * functions declared below with C linkage. The host (the acc_host Python
 * package) loads it with dlopen, looks the functions up with dlsym and calls
 * them. A plugin needs nothing but this header and a C compiler: it links
 * against nothing from the host, and the host links against nothing from it.
 *
 * Sections, in order: versioning, status codes, tensor types, identification,
 * memory, execution-mode support, imperative execution, symbolic execution,
 * configuration, errors, optional additions of ABI 1.1, sparse tensors of
 * ABI 1.2. The declarations
 * between the ACC_CDEF_BEGIN and ACC_CDEF_END markers are read as they are
 * by the host's cffi layer, so that
 * part holds only plain declarations and integer #defines (no #include, no
 * #if, no expressions).
 *
 * Ownership vocabulary used on every pointer:
 *   "borrowed"          valid only for the duration of the call; the callee
 *                       copies what it needs to keep.
 *   "owned by the plugin until X"
 *                       the plugin allocated it and keeps it valid until X;
 *                       the host never frees or writes it.
 *   "owned by the caller"
 *                       the caller allocated it and frees it; the callee only
 *                       reads or writes it during the call.
 *   "out"               the callee writes through the pointer; the caller
 *                       provides the storage.
 *
 * Status codes: every function that can fail returns an int status, 0
 * (MX_ACC_OK) on success and one of the MX_ACC_ERR_* codes otherwise. After a
 * failure, the plugin may describe it in text through accGetLastError().
 *
 * Threads: the host calls initialize() once, before anything else, and never
 * concurrently with any other call. After that, calls that name different
 * dev_id values may run concurrently on different threads; calls that name
 * the same dev_id (including everything done through a model or executor
 * created on that device) are serialized by the host. configure() calls are
 * serialized with each other (one at a time, whatever their dev_id) and with
 * every other call that names the same dev_id: a configure() never runs
 * while a call for its device is running. Any call may come from any thread:
 * a model loaded on one thread may be run by infer() and freed by
 * unloadModel() on others, an executor created on one thread may be run and
 * released on others, and memory from mx_alloc() may be freed on another
 * thread; the serialization above still holds, so a plugin needs no locks
 * of its own for one device, but must not keep per-thread state that a
 * later call for the same model, executor or pointer relies on (the
 * accGetLastError() message is the one per-thread state the ABI knows). A
 * plugin that needs more guarantees than these must provide them itself.
 *
 * Devices: a plugin drives getNumAcc() devices, numbered 0 .. getNumAcc()-1.
 * Every dev_id argument must be in that range (MX_ACC_ERR_DEVICE otherwise).
 * Memory from mx_alloc(dev_id, ...) belongs to that device; models and
 * executors created with a dev_id run on that device and accept accelerator
 * memory of that device only.
 */
#ifndef MXNET_ACC_H_
#define MXNET_ACC_H_

#include <stddef.h>
#include <stdint.h>

/* Plugins mark each exported entry point with MX_ACC_EXPORT, so that they
 * stay visible when the library is built with -fvisibility=hidden. */
#if defined(_WIN32)
#define MX_ACC_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define MX_ACC_EXPORT __attribute__((visibility("default")))
#else
#define MX_ACC_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ACC_CDEF_BEGIN */

/* ---------------------------------------------------------------------------
 * 1. Versioning
 *
 * MX_ACC_API_VERSION = MAJOR * 100 + MINOR. The host passes its value to
 * initialize(); getAccApiVersion() returns the value the plugin was compiled
 * with.
 *   MAJOR changes when anything already published changes: a struct layout,
 *   a signature, the meaning of a code or of an annotation. A host and a
 *   plugin work together only when their MAJOR numbers are equal.
 *   MINOR changes when something is only added: a new optional function, a
 *   new status code, a new dtype value, a new reserved attribute. A host of
 *   any MINOR loads a plugin of any MINOR of the same MAJOR; neither relies
 *   on what the other's MINOR added without checking for it.
 *
 * Operator versions: the operators named in graphs and in accGetExecutor()
 * follow MXNet's names and attribute conventions. Each operator also has an
 * integer version in the host's registry, starting at 1 and incremented
 * whenever the operator's semantics, inputs, outputs or attributes change.
 * The host writes it as the attribute "__op_version__" (a decimal string) on
 * every operator node it passes, both in graph JSON and in accGetExecutor()'s
 * attributes. A plugin must treat an operator whose version it does not
 * implement exactly as unsupported: leave it out of supportedOps() and fail
 * accGetExecutor() with MX_ACC_ERR_UNSUPPORTED. A missing "__op_version__"
 * means version 1.
 *
 * Published versions (docs/abi.md keeps the changelog; `acc-host sdk --abi
 * 1.0` serves an earlier header as it was published):
 *   1.0 (100)  the initial ABI.
 *   1.1 (101)  additions only: supportedOpsReasons() and retainsWeights()
 *              (section 11), MX_ACC_REASON_MAX, and the guarantees that 1.0
 *              left unstated (threads, pointers inside allocations, where
 *              weights live, aliasing of infer()'s outputs). A 1.0 plugin
 *              works unchanged in a 1.1 host.
 *   1.2 (102)  additions only: the values of MXTensor.isSparse
 *              (MX_ACC_STORAGE_*), row-sparse tensors (RowSparseTensor),
 *              the "__in_stypes__"/"__out_stypes__" annotations and the
 *              ownership of every sparse pointer, supportsSparse()
 *              (section 12). A plugin
 *              built against 1.0 or 1.1 is never given a sparse tensor or
 *              a storage annotation: the host densifies its inputs or keeps
 *              the node on the CPU.
 * ------------------------------------------------------------------------- */
#define MX_ACC_API_VERSION_MAJOR 1
#define MX_ACC_API_VERSION_MINOR 2
#define MX_ACC_API_VERSION 102

/* Device id that MXTensor.dev_id carries for memory that belongs to the host
 * (ordinary process memory, not from mx_alloc()). */
#define MX_ACC_HOST_DEVICE -1

/* Size in bytes, including the terminating NUL, of the buffer the host
 * passes to getAccName(). */
#define MX_ACC_NAME_MAX 32

/* Largest number of dimensions a tensor may have. */
#define MX_ACC_MAX_NDIM 16

/* Size in bytes, including the terminating NUL, of each reason slot that
 * the host passes to supportedOpsReasons() (ABI 1.1). */
#define MX_ACC_REASON_MAX 128

/* ---------------------------------------------------------------------------
 * 2. Status codes
 * ------------------------------------------------------------------------- */
#define MX_ACC_OK 0
/* An argument is invalid: a NULL pointer where one is required, a length,
 * shape, dtype or name that does not match, malformed JSON. */
#define MX_ACC_ERR_INVALID_ARG 1
/* The operator, attribute value, dtype or feature is not supported. */
#define MX_ACC_ERR_UNSUPPORTED 2
/* Host or accelerator memory could not be allocated. */
#define MX_ACC_ERR_OUT_OF_MEMORY 3
/* initialize(): the plugin cannot work with the host's API version. */
#define MX_ACC_ERR_VERSION 4
/* A model id, pointer or configure key the plugin does not know. */
#define MX_ACC_ERR_NOT_FOUND 5
/* dev_id out of range, or the device failed. */
#define MX_ACC_ERR_DEVICE 6
/* Called in the wrong state (e.g. before initialize(), or a model id that is
 * already loaded). */
#define MX_ACC_ERR_STATE 7
/* Any other failure inside the plugin. */
#define MX_ACC_ERR_INTERNAL 8

/* ---------------------------------------------------------------------------
 * 3. Tensors
 * ------------------------------------------------------------------------- */

/* Element types. The values are fixed by the proposal and never reused. */
typedef enum TensorDType {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,
  kUint8 = 3,
  kInt32 = 4,
  kInt8 = 5,
  kInt64 = 6
} TensorDType;

/* A dense n-dimensional array, compact and row-major (C order): the element
 * at index (i0, ..., ik) is at offset ((i0 * shape[1] + i1) * ...) + ik
 * elements from data. A tensor with shape_len == 0 is a scalar holding one
 * element.
 *
 * Descriptors passed to the plugin are borrowed for the call, and so are the
 * shape arrays and layout strings they point to. */
typedef struct MXTensor {
  /* First element, or the SparseTensor or RowSparseTensor that isSparse
   * names (section 12; always host memory then). Otherwise host memory
   * when dev_id == MX_ACC_HOST_DEVICE, otherwise memory returned by
   * mx_alloc() on device dev_id. May be NULL only where a function says so
   * (descriptors that only describe a shape and dtype). Accelerator
   * pointers are always the start of an allocation: the host passes
   * exactly the address that mx_alloc() returned, never an address inside
   * an allocation (the host makes no views into device memory; it copies
   * instead), so a plugin may look the pointer up as it handed it out.
   * Host pointers may point anywhere inside host memory (a view into a
   * larger array) and are aligned to the element size at least. */
  void *data;
  /* shape_len extents, each >= 0 (an extent of 0 makes an empty tensor). May
   * be NULL when shape_len == 0. */
  const uint64_t *shape;
  /* Number of dimensions, 0 .. MX_ACC_MAX_NDIM. */
  uint64_t shape_len;
  /* A TensorDType value (an int32_t for a fixed layout across compilers). */
  int32_t dtype;
  /* Storage kind, an MX_ACC_STORAGE_* value (section 12): 0 dense; 1
   * (ABI 1.2 name; any nonzero value in 1.0/1.1, which only defined CSR)
   * data points to a SparseTensor (CSR) and shape has 2 extents; 2 (ABI
   * 1.2) data points to a RowSparseTensor. The host sets it nonzero only
   * for a plugin whose getAccApiVersion() is 102 or more. */
  int32_t isSparse;
  /* Layout name such as "NCHW", NUL-terminated, or NULL when unspecified. */
  const char *layout;
  /* MX_ACC_HOST_DEVICE, or the accelerator device that owns data. */
  int32_t dev_id;
} MXTensor;

/* A 2-D matrix in CSR format (MXTensor.isSparse == MX_ACC_STORAGE_CSR,
 * section 12, which also states its ownership and checks). Row r holds the
 * elements data[indptr[r]] .. data[indptr[r + 1] - 1], whose column indices
 * are indices[indptr[r]] .. indices[indptr[r + 1] - 1]. The element type is
 * the owning MXTensor's dtype. */
typedef struct SparseTensor {
  void *data;         /* num_nonzero elements */
  uint64_t *indices;  /* num_nonzero column indices */
  uint64_t *indptr;   /* num_rows + 1 offsets into data, non-decreasing */
  uint64_t num_nonzero;
  uint64_t num_rows;
} SparseTensor;

/* ---------------------------------------------------------------------------
 * 4. Identification (required)
 * ------------------------------------------------------------------------- */

/* The API version the plugin was compiled with: return MX_ACC_API_VERSION. */
int getAccApiVersion(void);

/* Called by the host right after loading, before any other function
 * except getAccApiVersion(); a repeated call must be harmless and return the
 * same status. version is the host's MX_ACC_API_VERSION.
 * Returns MX_ACC_OK, or MX_ACC_ERR_VERSION if the plugin cannot work with
 * that version (different MAJOR), or another code if the plugin cannot start
 * (no device found: prefer returning MX_ACC_OK and getNumAcc() == 0). */
int initialize(int version);

/* Writes the accelerator's name into name, a buffer of name_size bytes
 * (owned by the caller; the host passes MX_ACC_NAME_MAX), NUL-terminated.
 * The name becomes the context type in the host (e.g. "mlu" makes mx.mlu(0)),
 * so it must be 1 to 31 characters from [a-z0-9_], starting with a letter.
 * Returns MX_ACC_ERR_INVALID_ARG if the name does not fit. */
int getAccName(char *name, size_t name_size);

/* Number of devices this library drives: >= 1 for a usable library, 0 when
 * it found none. Constant after initialize(). */
int getNumAcc(void);

/* ---------------------------------------------------------------------------
 * 5. Memory (required when supportsImperative() returns 1)
 * ------------------------------------------------------------------------- */

/* Allocates size bytes of accelerator memory on dev_id and stores its address
 * in *ptr (out). The memory is owned by the plugin until mx_free() or
 * mx_releaseAll() for that device; the host only passes the address back in
 * MXTensor.data with MXTensor.dev_id == dev_id and never dereferences it.
 * size == 0 returns a valid, unique pointer. Errors: MX_ACC_ERR_DEVICE,
 * MX_ACC_ERR_INVALID_ARG (ptr NULL), MX_ACC_ERR_OUT_OF_MEMORY. */
int mx_alloc(int dev_id, size_t size, void **ptr);

/* Frees memory from mx_alloc(dev_id, ...). Freeing NULL is a no-op.
 * MX_ACC_ERR_NOT_FOUND if ptr was not allocated on dev_id or already freed. */
int mx_free(int dev_id, void *ptr);

/* Frees every allocation still alive on dev_id. The host calls it at
 * shutdown, after it stopped using that memory. */
int mx_releaseAll(int dev_id);

/* Copies src (host memory, src->dev_id == MX_ACC_HOST_DEVICE) into dst
 * (accelerator memory, dst->dev_id a device). Both descriptors are borrowed;
 * only the bytes at dst->data are written. Shapes must have the same number
 * of elements and dtypes must be equal (MX_ACC_ERR_INVALID_ARG). */
int copyToAcc(const MXTensor *dst, const MXTensor *src);

/* Copies src (accelerator memory) into dst (host memory); as copyToAcc(). */
int copyFromAcc(const MXTensor *dst, const MXTensor *src);

/* ---------------------------------------------------------------------------
 * 6. Execution-mode support (required)
 * ------------------------------------------------------------------------- */

/* 1 if the library supports imperative execution (accGetExecutor) and direct
 * memory management (mx_alloc .. copyFromAcc), in which case all of those
 * functions are exported; 0 if it runs graphs through loadModel()/infer()
 * only. Constant after initialize(). */
int supportsImperative(void);

/* ---------------------------------------------------------------------------
 * 7. Imperative execution (required when supportsImperative() returns 1)
 * ------------------------------------------------------------------------- */

/* An executor: one operator bound to its attributes, input and output shapes
 * and dtypes, and device, created by accGetExecutor(). The plugin allocates
 * it and fills every field; the host only reads the fields and calls the two
 * functions, never concurrently for one executor. */
typedef struct MXAccExecutor {
  /* Runs the operator on fresh tensors whose shapes and dtypes equal those
   * given to accGetExecutor(), in the same order, with data in accelerator
   * memory of the executor's device. Tensors are borrowed for the call; only
   * the bytes of outputs[i].data are written. Blocks until the outputs are
   * written. Returns a status code. */
  int (*forward)(struct MXAccExecutor *self, const MXTensor *inputs, int num_in,
                 const MXTensor *outputs, int num_out);
  /* Destroys the executor; self is invalid afterwards. */
  void (*release)(struct MXAccExecutor *self);
  /* Plugin-private state; the host never touches it. */
  void *state;
} MXAccExecutor;

/* Creates an executor for operator op_name (MXNet's name, e.g.
 * "Convolution") with num_attrs attributes given as parallel arrays of
 * NUL-terminated key and value strings in MXNet's conventions (values such as
 * "(3, 3)", "True", "relu"), including "__op_version__". inputs and outputs
 * describe shapes and dtypes only: their data pointers may be NULL and must
 * not be read. Everything passed is borrowed for the call.
 * On success *executor (out) is owned by the plugin until the host calls
 * (*executor)->release(*executor). Errors: MX_ACC_ERR_UNSUPPORTED for an
 * operator, version, attribute value or dtype the plugin does not run (the
 * host then falls back to the CPU), MX_ACC_ERR_INVALID_ARG for inconsistent
 * shapes or malformed attributes, MX_ACC_ERR_DEVICE. */
int accGetExecutor(const char *op_name, const MXTensor *inputs,
                   const MXTensor *outputs, int num_in, int num_out,
                   const char *const *attr_keys, const char *const *attr_vals,
                   int num_attrs, int dev_id, MXAccExecutor **executor);

/* ---------------------------------------------------------------------------
 * 8. Symbolic execution (required)
 *
 * Graphs are MXNet symbol JSON ({"nodes": [...], "arg_nodes": [...],
 * "heads": [...], "attrs": {...}}), with nodes in topological order, which
 * the host annotates with these node attributes (all values are strings):
 *   "__out_shapes__"  on every node: one shape per visible output, e.g.
 *                     "[[1,3,224,224]]".
 *   "__out_dtypes__"  on every node: one TensorDType value per visible
 *                     output, e.g. "[0]".
 *   "__kind__"        on every variable ("op": "null") node: "data" for an
 *                     input that changes on every inference (images, tokens)
 *                     or "weight" for a parameter or auxiliary state.
 *   "__op_version__"  on every operator node (see section 1).
 *   "__dev_id__"      on every operator node: the device the host assigned.
 * The host writes every operator attribute under "attrs" (attributes that
 * older MXNet files keep under "attr" or "param" are moved there).
 * Node ids are indices into "nodes". The outputs of a graph are its "heads";
 * head (node n, output k) is named "<name of n>_output" when n has one
 * visible output and "<name of n>_output<k>" otherwise.
 * ------------------------------------------------------------------------- */

/* Reports which operator nodes of json the plugin can run on dev_id. data
 * describes the graph's variables named by data_names (num_data of each,
 * borrowed; data pointers may be NULL and must not be read). ids is an array
 * of ids_capacity ints owned by the caller (the host passes the number of
 * nodes); the plugin writes the ids of the supported operator nodes in
 * ascending order and their count into *num_ids (out). Variable nodes are
 * never listed. The answer depends only on the arguments. */
int supportedOps(const char *json, const char *const *data_names,
                 const MXTensor *data, int num_data, int dev_id, int *ids,
                 int ids_capacity, int *num_ids);

/* Compiles json (a graph made of operators supportedOps() accepted) on
 * dev_id and keeps it under model_id, a NUL-terminated name unique among the
 * library's loaded models (MX_ACC_ERR_STATE if already loaded). A plugin
 * that cannot compile the graph after all returns MX_ACC_ERR_UNSUPPORTED,
 * and the host runs it on the CPU. data holds a
 * tensor for every variable of the graph, named by data_names: variables
 * marked "weight" carry their values, which the plugin copies or transforms
 * as it needs (compilation may depend on them); variables marked "data" may
 * have a NULL data pointer. Weights may live in host memory (dev_id
 * MX_ACC_HOST_DEVICE) or, when supportsImperative() is 1, in accelerator
 * memory of dev_id (a weight the host already holds on the device): a
 * plugin reads MXTensor.dev_id of each weight and handles both. Everything
 * passed is borrowed for the call, unless retainsWeights() (section 11)
 * returns 1. */
int loadModel(const char *model_id, const char *json,
              const char *const *data_names, const MXTensor *data,
              int num_data, int dev_id);

/* Frees everything held for model_id. MX_ACC_ERR_NOT_FOUND if not loaded.
 * The host serializes it with the other calls for the model's device. */
int unloadModel(const char *model_id);

/* Runs model_id once. in_data (named by in_names) must include every "data"
 * variable of the graph; it may also include "weight" variables, whose new
 * values replace the ones the plugin holds from then on. out_data (named by
 * out_names, see the naming rule above) must list every head: these are
 * buffers owned by the caller with the shapes and dtypes of the annotated
 * heads, which the plugin fills. Tensors may be host memory, or accelerator
 * memory of the model's device when supportsImperative() is 1. Outputs
 * never alias inputs, and never each other: the host passes every output
 * in memory that no input (and no other output) overlaps, so a plugin may
 * write outputs before it has read every input. Everything passed is
 * borrowed for the call (weights given here are retained as loadModel's
 * when retainsWeights() returns 1); infer blocks until the outputs are
 * written. */
int infer(const char *model_id, const char *const *in_names,
          const char *const *out_names, const MXTensor *in_data,
          const MXTensor *out_data, int num_in, int num_out);

/* ---------------------------------------------------------------------------
 * 9. Configuration (required)
 *
 * Passes num_in key/value string pairs (borrowed) to device dev_id and
 * returns key/value pairs: *out_keys and *out_vals (out) receive arrays of
 * *num_out NUL-terminated strings owned by the plugin until the next
 * configure() call or until the library is unloaded; the host copies them at
 * once. Unknown keys, and unknown values of the "query" key, fail with
 * MX_ACC_ERR_NOT_FOUND; invalid values with MX_ACC_ERR_INVALID_ARG. Reserved
 * keys that every plugin answers:
 *   "query" = "keys"     -> "keys": comma-separated keys configure accepts.
 *   "query" = "ops"      -> "ops": comma-separated operator names (with
 *                           ":<version>" each) the plugin can run.
 *   "query" = "version"  -> "version": the plugin's own version string.
 * Optional keys for compiled models (the proposal's reusable compiled
 * binaries); a plugin that supports them lists both in "query" = "keys":
 *   "export_model" = <model id>, "path" = <file>
 *                        -> "exported": bytes written. Writes the compiled
 *                           form of a loaded model (weights included) to file.
 *   "import_model" = <model id>, "path" = <file>
 *                        -> "imported": <model id>. Loads such a file under a
 *                           new model id on dev_id without compiling; the
 *                           model is then used and unloaded like any other.
 *                           A file the plugin did not write, or a damaged
 *                           one, is refused with MX_ACC_ERR_INVALID_ARG
 *                           (the host's cache checks only the graph and
 *                           weights the file holds, where it starts with the
 *                           SDK's graph section: it relies on this check,
 *                           e.g. a checksum over the whole file).
 *   "query" = "compile_config"
 *                        -> "compile_config": a string that names every
 *                           setting of device dev_id that changes what
 *                           loadModel compiles (precision, on-chip memory
 *                           size...). Optional (MX_ACC_ERR_NOT_FOUND if not
 *                           answered): the host's compiled-model cache keys
 *                           its files by it, so that a model compiled under
 *                           other settings is never imported.
 *   "query" = "cost_model"
 *                        -> "host_device_bandwidth" (bytes/s),
 *                           "host_device_latency_ns" (one copy),
 *                           "launch_latency_ns" (one infer),
 *                           "device_ops_per_s" (sustained operations/s) and
 *                           optionally "min_subgraph_ops". Optional
 *                           (MX_ACC_ERR_NOT_FOUND if not answered): the
 *                           host keeps on the CPU a candidate subgraph
 *                           whose copies and launch would cost more than
 *                           it gains (docs/accelerators.md).
 * ------------------------------------------------------------------------- */
int configure(const char *const *in_keys, const char *const *in_vals,
              int num_in, int dev_id, const char *const **out_keys,
              const char *const **out_vals, int *num_out);

/* ---------------------------------------------------------------------------
 * 10. Errors (optional)
 *
 * A readable message for the most recent failed call made by the calling
 * thread, or NULL or "" if there is none. The string is owned by the plugin
 * until the calling thread's next call into the library.
 * ------------------------------------------------------------------------- */
const char *accGetLastError(void);

/* ---------------------------------------------------------------------------
 * 11. Optional additions of ABI 1.1
 *
 * A host finds these with dlsym; a plugin that does not export one is used
 * as a 1.0 plugin in that respect. A plugin that exports one still works in
 * a 1.0 host, which never calls it.
 * ------------------------------------------------------------------------- */

/* supportedOps() that also says why: the arguments and the answer in ids
 * and *num_ids are exactly supportedOps()'s, and a host that finds this
 * function calls it instead of supportedOps(). reasons is a buffer owned by
 * the caller of ids_capacity * reason_size bytes, filled with zero bytes by
 * the host (it passes reason_size MX_ACC_REASON_MAX); slot k is the
 * reason_size bytes at reasons + k * reason_size. For an operator node k
 * that it declines, the plugin may write into slot k a short NUL-terminated
 * sentence of at most reason_size bytes including the NUL, saying why
 * ("groups > 1 not implemented", "dilation 2 unsupported"); a longer
 * reason is cut by the plugin to fit. Slots of accepted nodes and of
 * variables are left zero, and so may be the slot of a node declined
 * without a reason. The plugin writes nothing outside the buffer and keeps
 * no pointer into it after the call. */
int supportedOpsReasons(const char *json, const char *const *data_names,
                        const MXTensor *data, int num_data, int dev_id,
                        int *ids, int ids_capacity, int *num_ids,
                        char *reasons, size_t reason_size);

/* Returns 1 if the plugin keeps referencing weights instead of copying
 * them, 0 otherwise (the same answer after every call; a plugin that does
 * not export the function is 0). When it returns 1, the data of each weight
 * tensor ("weight" variables only) passed to loadModel() is retained, no
 * longer borrowed, whether it is host memory or accelerator memory of the
 * model's device: the host keeps those bytes allocated (it calls no
 * mx_free() on them) until unloadModel() of that model returns, and the
 * plugin may keep the data pointer and read through it in any later call
 * for that model (infer(), configure() naming it, unloadModel()) instead of
 * keeping a copy. The host never changes the
 * bytes of a retained buffer while a call for that model runs. It changes a
 * weight only between calls, and then bumps the weight's version: it passes
 * that weight to the next infer() of the model (new values in the same
 * buffer or in a new one), before any other call for that model except
 * unloadModel(). A weight given to infer() is retained in the same way from
 * then on, replacing the earlier buffer, which the host may free once that
 * infer() returns. A plugin that derived data from a weight (a packed or
 * folded form) rebuilds it when the weight is given again, as it does for
 * borrowed weights. The plugin never writes a retained buffer. Only the
 * data bytes are retained: MXTensor itself, shape and layout stay borrowed,
 * and so do "data" variables. */
int retainsWeights(void);

/* ---------------------------------------------------------------------------
 * 12. Sparse tensors (ABI 1.2)
 *
 * MXTensor.isSparse names the storage kind of a tensor. For a sparse tensor
 * MXTensor.shape, shape_len and dtype describe the dense array it stands
 * for (its logical shape and element type) and MXTensor.data points to a
 * SparseTensor (MX_ACC_STORAGE_CSR) or a RowSparseTensor
 * (MX_ACC_STORAGE_ROW_SPARSE), which points to the arrays.
 *
 * Where sparse tensors appear: only for a plugin whose supportsSparse()
 * returns 1 (below), in the symbolic calls (supportedOps()
 * and supportedOpsReasons() as descriptors whose data is NULL, loadModel()
 * and infer()) and in accGetExecutor() (descriptors only) and
 * MXAccExecutor.forward(), and only for a plugin whose getAccApiVersion()
 * is 102 or more. A sparse tensor, its SparseTensor or RowSparseTensor and
 * every array it points to are always host memory: dev_id is
 * MX_ACC_HOST_DEVICE, also in forward() of an executor of a device, and a
 * plugin that computes elsewhere copies the arrays it needs.
 *
 * Annotations: the host writes "__out_stypes__" on a node whose visible
 * outputs include a sparse one (one storage value per visible output, e.g.
 * "[1]") and "__in_stypes__" on an operator node that reads a sparse entry
 * (one storage value per input, e.g. "[1,0,0]"); nodes without them are
 * dense throughout. A plugin that does not run an operator on the storage
 * kinds given leaves the node out of supportedOps() (a reason such as
 * "input 0 is csr; dot runs dense inputs only" helps) or fails
 * accGetExecutor() with MX_ACC_ERR_UNSUPPORTED: the host then gives the
 * node dense inputs (it densifies at the subgraph's boundary) or runs it on
 * the CPU, and never passes a sparse tensor to a node the plugin declined.
 * Operator outputs are always dense in ABI 1.2.
 *
 * Ownership: the SparseTensor or RowSparseTensor and every array it points
 * to are owned by the host and borrowed by the plugin for the call, like
 * the descriptor itself: a plugin that keeps a sparse weight past
 * loadModel() or infer() copies its arrays (retainsWeights() retains dense
 * weights' data only, never sparse ones), and it keeps no pointer to any of
 * them after the call. The plugin never writes any of them.
 *
 * What a plugin must check before it reads the arrays (the host builds
 * them right, but the checks are the plugin's own defence, and the
 * conformance kit passes malformed ones): for CSR, num_rows equals shape[0],
 * indptr[0] is 0, indptr is non-decreasing and indptr[num_rows] equals
 * num_nonzero, and every column index is below shape[1]; for row-sparse,
 * num_rows_stored is at most shape[0] and the row ids are strictly
 * increasing and below shape[0]. A violation is MX_ACC_ERR_INVALID_ARG.
 * ------------------------------------------------------------------------- */

/* Values of MXTensor.isSparse. */
#define MX_ACC_STORAGE_DENSE 0
#define MX_ACC_STORAGE_CSR 1
#define MX_ACC_STORAGE_ROW_SPARSE 2

/* A tensor of shape (shape[0], shape[1], ..., shape[n-1]), n >= 1, in
 * row-sparse format (MXTensor.isSparse == MX_ACC_STORAGE_ROW_SPARSE): only
 * num_rows_stored of its shape[0] rows are stored, the others are zero.
 * Stored row j is dense row row_ids[j]; its elements (shape[1] * ... *
 * shape[n-1] of them, row-major) start at element j * that count of data.
 * The element type is the owning MXTensor's dtype. data may be NULL when
 * num_rows_stored is 0. Used for embedding tables and other weights whose
 * gradient touches few rows (MXNet's RowSparseNDArray). */
typedef struct RowSparseTensor {
  void *data;               /* num_rows_stored rows of elements */
  uint64_t *row_ids;        /* num_rows_stored row indices, strictly increasing */
  uint64_t num_rows_stored;
} RowSparseTensor;

/* Returns 1 if the plugin may be given sparse tensors and the storage
 * annotations, 0 otherwise (the same answer after every call). Optional: a
 * plugin that does not export it is 0, and so is every plugin whose
 * getAccApiVersion() is below 102, whatever it exports. A plugin answering
 * 0 never sees a sparse tensor, an MXTensor.isSparse other than 0, or a
 * "__in_stypes__"/"__out_stypes__" annotation: the host densifies or keeps
 * such nodes on the CPU. A plugin answering 1 reads the annotations in
 * supportedOps() and declines what it does not run. */
int supportsSparse(void);

/* ACC_CDEF_END */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MXNET_ACC_H_ */
