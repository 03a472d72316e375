/*
 * The cpu_ref operator table: for each operator MXNet's name (and aliases),
 * the version of its semantics this plugin implements (see "Operator
 * versions" in mxnet_acc.h), attribute parsing with MXNet's defaults,
 * output-shape inference, and the function that runs it on host memory.
 *
 * Operators that share their attributes, shapes and kernel (the unary math
 * functions, the scalar arithmetic, the reductions, ...) share one cr_op_impl
 * and differ only in their table entry's variant. Adding an operator means
 * adding one cr_op entry in ops.c, plus a cr_op_impl in one of the ops_*.c
 * files (see op_impl.h) and, when it does something new, a kernel in
 * kernels/reference/ (and one in kernels/fast/ where a faster one pays).
 */
#ifndef CPU_REF_OPS_H_
#define CPU_REF_OPS_H_

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "kernels.h"
#include "rnn.h"

/* Most inputs and visible outputs of one operator node (Concat's num_args,
 * SliceChannel's num_outputs); larger nodes are unsupported. */
#define CR_MAX_INPUTS 32
#define CR_MAX_OUTPUTS 32

/* Most aliases of one operator. */
#define CR_MAX_ALIASES 3

/* Most entries of Reshape's shape or target_shape tuple: the special codes
 * let a tuple be longer than the result has dimensions (-4 takes three
 * entries for two dimensions). */
#define CR_MAX_SHAPE_CODES 32

/* A list of axes as given in an attribute, before it is checked against the
 * data's dimensions. */
typedef struct cr_axes {
  int given; /* 0 when the attribute was absent or "None" */
  int count;
  int64_t values[CR_MAX_NDIM];
} cr_axes;

/* Attributes of the ONNX importer's host operators (_onnx_*, ops_onnx*.c):
 * one generic record, each operator documents which fields it uses. */
#define CR_ONNX_TUPLE_MAX (2 * CR_MAX_NDIM)
typedef struct cr_onnx_params {
  int fn;        /* the operator's function or mode (an enum of its ops_onnx_*.c) */
  int axis;
  int axis2;
  int num_args;
  int dtype;     /* a TensorDType, or -1 */
  int flag[6];   /* booleans, per operator */
  int has_f[2];  /* optional floats given (clip's a_min, a_max) */
  double f[6];   /* floats, per operator */
  int64_t i[4];  /* integers, per operator */
  int64_t tup[4][CR_ONNX_TUPLE_MAX];
  int tup_len[4];
  int tup_given[4];
  double ftup[3][CR_ONNX_TUPLE_MAX];
  int ftup_len[3];
  char text[128]; /* einsum's equation */
} cr_onnx_params;

/* Attributes of one operator instance, parsed once at load/bind time, with
 * the number and dtypes (TensorDType values) of its inputs and outputs. */
typedef struct cr_params {
  /* The table entry's variant (see cr_op), set before parsing. */
  int variant;
  /* The kernels that run it: fast (0, what parsing leaves) unless the
   * executor or model that resolved it was made for reference kernels. */
  cr_kernels kernels;
  /* Set after parsing, before the dtypes are checked. */
  int num_inputs;
  int num_outputs;
  int32_t in_dtypes[CR_MAX_INPUTS];
  int32_t out_dtypes[CR_MAX_OUTPUTS];
  union {
    struct {
      cr_conv_params conv;
      int spatial_ndim;
      int64_t num_filter;
      int no_bias;
      /* Deconvolution only: extra output at the end of each axis, and the
       * output size that overrides pad and adj (all 0 when not given). */
      int64_t adj[3];
      int64_t target_shape[3];
    } convolution;
    struct {
      cr_pool_params pool;
      int spatial_ndim; /* 0 until resolved from the input for global_pool */
      int global_pool;
      int convention; /* a cr_pool_convention */
    } pooling;
    struct {
      int64_t num_hidden;
      int no_bias;
      int flatten;
    } fully_connected;
    cr_activation_type activation;
    struct {
      double eps;
      int fix_gamma;
      int axis;
      int output_mean_var;
    } batch_norm;
    struct {
      int axis;
      double eps;
      int output_mean_var;
    } layer_norm;
    double instance_norm_eps;
    struct {
      cr_leaky_type type;
      double slope;
      int prelu; /* slopes come from the gamma input */
    } leaky_relu;
    struct {
      int axis;
      double temperature;
      int dtype; /* of the output; -1 for the data's */
    } softmax;
    struct {
      int multi_output;
      int preserve_shape;
    } softmax_output;
    int softmax_channel; /* SoftmaxActivation: mode "channel" */
    struct {
      int64_t input_dim;
      int64_t output_dim;
      int dtype; /* of weight and output */
    } embedding;
    struct {
      int64_t scale;
      int num_args;
      int sum; /* multi_input_mode "sum" rather than "concat" */
    } upsampling;
    struct {
      cr_axis_map_kind mode; /* one of the CR_MAP_PAD_* kinds */
      int64_t widths[2 * CR_MAX_NDIM];
      int num_widths;
      double value;
    } pad;
    double scalar; /* converted to the data's dtype when run, as MXNet does */
    struct {
      float low;
      float high;
    } clip;
    int num_args; /* add_n */
    struct {
      int num_args;
      int axis;
    } concat; /* Concat (axis is dim), stack */
    struct {
      int num_outputs;
      int axis;
      int squeeze_axis;
    } split;
    struct {
      int axis;
      int64_t begin;
      int64_t end;
      int has_end;
    } slice_axis;
    struct {
      /* begin, end and step per sliced axis; absent entries are None. */
      int64_t begin[CR_MAX_NDIM];
      int64_t end[CR_MAX_NDIM];
      int64_t step[CR_MAX_NDIM];
      unsigned char has_begin[CR_MAX_NDIM];
      unsigned char has_end[CR_MAX_NDIM];
      unsigned char has_step[CR_MAX_NDIM];
      int count;      /* entries of begin and end */
      int step_count; /* entries of step: 0 or count */
    } slice;
    struct {
      int64_t shape[CR_MAX_SHAPE_CODES];
      int shape_len;
      int reverse;
      int64_t target_shape[CR_MAX_SHAPE_CODES];
      int target_shape_len;
      int keep_highest;
    } reshape;
    int axis;     /* expand_dims */
    cr_axes axes; /* squeeze, transpose, slice_like */
    cr_axes reps; /* tile */
    cr_axes target; /* broadcast_to's shape */
    struct {
      cr_axes axis;
      cr_axes size;
    } broadcast_axis;
    struct {
      cr_axes lhs_axes;
      cr_axes rhs_axes;
    } broadcast_like;
    struct {
      int64_t repeats;
      int axis;
      int has_axis;
    } repeat;
    int cast_dtype;
    struct {
      cr_axes axis;
      int keepdims;
      int exclude;
    } reduce;
    struct {
      int transpose_a;
      int transpose_b;
    } dot;
    struct {
      int axis;
      cr_take_mode mode;
    } take;
    struct {
      int axis;
      int has_axis;
      int keepdims;
    } search; /* argmax, argmin */
    struct {
      int axis;
      int has_axis;
      int64_t k;
      int ret_typ; /* a cr_topk_return */
      int ascending;
      int dtype; /* of the indices */
    } topk;
    cr_onnx_params onnx;
    cr_rnn_params rnn; /* RNN (ops_rnn.c) */
  } u;
} cr_params;

/* A tensor in host-addressable memory, as kernels see it. */
typedef struct cr_tensor {
  void *data;
  acc_shape shape;
} cr_tensor;

/* Runs an operator on tensors of the checked shapes and dtypes; outputs
 * never overlap inputs. Returns MX_ACC_OK, MX_ACC_ERR_OUT_OF_MEMORY when
 * scratch memory cannot be had, or MX_ACC_ERR_INVALID_ARG when the data
 * itself is refused (take's mode "raise"), with a message recorded. */
typedef int (*cr_run_fn)(const cr_params *params, const cr_tensor *inputs, int num_inputs,
                         const cr_tensor *outputs, int num_threads);

/* How a family of operators is parsed, checked and run. */
typedef struct cr_op_impl {
  /* Parses the operator's own attributes (the host's "__*__" annotations
   * and MXNet's tuning attributes are removed by the caller). Returns a
   * status recorded with acc_fail(). */
  int (*parse)(const char *const *keys, const char *const *vals, size_t count,
               cr_params *params);
  /* Number of inputs the operator takes with these attributes. */
  int (*num_inputs)(const cr_params *params);
  /* Number of visible outputs: the ones graphs annotate and executors get.
   * Outputs MXNet keeps hidden (BatchNorm's saved statistics, Dropout's
   * mask) are not counted: the host never shows them to plugins. */
  int (*num_outputs)(const cr_params *params);
  /* Checks params->in_dtypes and out_dtypes (each a dtype mxnet_acc.h
   * defines): MX_ACC_ERR_INVALID_ARG for a combination the registry's type
   * rules never produce, MX_ACC_ERR_UNSUPPORTED for one cpu_ref does not
   * implement. */
  int (*check_dtypes)(const cr_params *params);
  /* Checks the input shapes (whose element counts fit in int64_t, see
   * cr_resolve_op) and computes the num_outputs output shapes. */
  int (*infer_shape)(const cr_params *params, const acc_shape *inputs, int num_inputs,
                     acc_shape *outputs);
  cr_run_fn run;
} cr_op_impl;

typedef struct cr_op {
  const char *name;
  const char *aliases[CR_MAX_ALIASES + 1]; /* other names MXNet accepts, NULL-ended */
  int version;
  int variant; /* which member of impl's family: a kernel enum value */
  const cr_op_impl *impl;
} cr_op;

/* Runs a float32 RNN node (ops_rnn.c) with its weights already packed for
 * the fast kernel: a loaded model's steps pack them once, when the weights
 * are loaded (model/rnn_steps.c). */
int cr_rnn_run_packed(const cr_params *params, const cr_tensor *inputs, const cr_tensor *outputs,
                      const cr_rnn_packing *packed, int num_threads);

/* 1 unless this build leaves op out (see CPU_REF_ONLY_OPS in ops.c). */
int cr_op_enabled(const cr_op *op);

/* The operator named name (or one of its aliases), or NULL. */
const cr_op *cr_find_op(const char *name);

/* All operators, for configure's "query" = "ops". */
const cr_op *cr_op_at(size_t index);
size_t cr_num_ops(void);

/* Resolves an operator node for execution: the operator must exist, its
 * "__op_version__" must be the one implemented, the attributes must parse,
 * the number of outputs must be the operator's, its family must run the
 * dtypes given and the output shapes inferred from in_shapes must equal
 * out_shapes.
 * Fills *op and *params. Returns MX_ACC_ERR_UNSUPPORTED for anything this
 * plugin does not run and MX_ACC_ERR_INVALID_ARG for inconsistent shapes or
 * malformed attributes; what names the node in messages. */
int cr_resolve_op(const char *what, const char *op_name, const char *const *keys,
                  const char *const *vals, size_t num_attrs, const acc_shape *in_shapes,
                  const int32_t *in_dtypes, int num_inputs, const acc_shape *out_shapes,
                  const int32_t *out_dtypes, int num_outputs, const cr_op **op,
                  cr_params *params);

/* ---- sparse inputs (mxnet_acc.h section 12; ops_sparse.c) ---------------- */

/* cr_resolve_op() for a node whose inputs have the storage kinds in_stypes
 * (MX_ACC_STORAGE_* values; NULL: all dense): a node with a sparse input
 * resolves to the sparse family of its operator (dot and FullyConnected
 * with a CSR input 0, Embedding with a row-sparse input 1, take with a
 * row-sparse input 0), whose run function receives that input's
 * SparseTensor or RowSparseTensor as the cr_tensor's data;
 * MX_ACC_ERR_UNSUPPORTED for any other combination. */
int cr_resolve_sparse_op(const char *what, const char *op_name, const char *const *keys,
                         const char *const *vals, size_t num_attrs, const acc_shape *in_shapes,
                         const int32_t *in_dtypes, const int32_t *in_stypes, int num_inputs,
                         const acc_shape *out_shapes, const int32_t *out_dtypes, int num_outputs,
                         const cr_op **op, cr_params *params);

/* The sparse family of the dense operator for the storage kinds in_stypes,
 * or MX_ACC_ERR_UNSUPPORTED saying which kinds it runs. */
int cr_find_sparse_op(const char *what, const cr_op *dense, const int32_t *in_stypes,
                      int num_inputs, const cr_op **op);

/* Checks a sparse tensor received through the ABI against the storage kind,
 * logical shape and dtype expected: host memory, then for CSR num_rows ==
 * shape[0], indptr[0] == 0, indptr monotone up to num_nonzero, every
 * column index < shape[1]; for row-sparse at most shape[0] stored rows,
 * row ids strictly increasing and < shape[0]. MX_ACC_ERR_INVALID_ARG
 * naming what otherwise. */
int cr_sparse_check(const MXTensor *tensor, int32_t stype, const acc_shape *shape,
                    int32_t dtype, const char *what);

/* "dense", "csr", "row_sparse" (or "unknown"). */
const char *cr_stype_name(int32_t stype);

#endif /* CPU_REF_OPS_H_ */
