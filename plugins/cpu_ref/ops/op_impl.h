/*
 * What the operator files share (internal to cpu_ref): the attribute,
 * shape and dtype helpers defined in ops.c, and the operator families
 * defined in ops_nn.c (neural-network layers), ops_norm.c (activations,
 * normalisations, softmaxes), ops_math.c (arithmetic, math, reductions,
 * products), ops_shape.c (shape changes, copies and conversions, joining,
 * splitting, slicing), ops_replicate.c (tiling, repeating, broadcasting,
 * padding), ops_index.c (take, where, argmax/argmin, topk) and ops_onnx*.c
 * (the ONNX importer's _onnx_* operators; what those files share is in
 * ops_onnx_impl.h) that ops.c lists in its table.
 *
 * Every helper that can fail records a message with acc_fail() and returns
 * its status, so that callers can return it unchanged.
 */
#ifndef CPU_REF_OP_IMPL_H_
#define CPU_REF_OP_IMPL_H_

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

/* ---- attributes --------------------------------------------------------- */

/* MX_ACC_ERR_INVALID_ARG: "attribute key="value": expected <expected>". */
int cr_bad_attr(const char *key, const char *value, const char *expected);

/* MX_ACC_ERR_UNSUPPORTED for an attribute this plugin does not know: one it
 * does not understand might change the result. */
int cr_unknown_attr(const char *key);

int cr_parse_bool(const char *key, const char *value, int *out);
int cr_parse_int(const char *key, const char *value, int64_t *out);
int cr_parse_positive_int(const char *key, const char *value, int64_t *out);
int cr_parse_float(const char *key, const char *value, double *out);

/* An axis in [-(MX_ACC_MAX_NDIM + 1), MX_ACC_MAX_NDIM]: a value outside
 * cannot name an axis of any tensor (or a position to insert one), so it is
 * refused here rather than when the shapes are known. */
int cr_parse_axis(const char *key, const char *value, int *out);

/* A tuple of at most CR_MAX_NDIM integers, or "None" (axes->given = 0). A
 * longer tuple cannot list distinct axes of a tensor and is refused. */
int cr_parse_axes(const char *key, const char *value, cr_axes *axes);

/* A bounded number of operator instances, e.g. num_outputs of at most
 * CR_MAX_OUTPUTS: positive, and MX_ACC_ERR_UNSUPPORTED above maximum. */
int cr_parse_count(const char *key, const char *value, int maximum, int *out);

/* A dtype name of the registry ("float32", "int8", ...) as its TensorDType
 * value; "None" gives -1 when none_ok. "bool", which mxnet_acc.h has no
 * dtype for, is MX_ACC_ERR_UNSUPPORTED. */
int cr_parse_dtype(const char *key, const char *value, int none_ok, int *dtype);

/* A tuple of at most capacity entries that are integers or None ("(None,
 * 2)", "(1,)", "()", "3"): present[i] is 0 for a None entry. */
int cr_parse_optional_tuple(const char *key, const char *value, int64_t *values,
                            unsigned char *present, int capacity, int *count);

/* MX_ACC_ERR_INVALID_ARG ("attribute key is required") when count is 0,
 * for required counts (num_args, num_outputs) left at 0 by parsing. */
int cr_require_count(const char *key, int count);

/* A parse function for operators without attributes. */
int cr_no_attrs_parse(const char *const *keys, const char *const *vals, size_t count,
                      cr_params *params);

/* ---- shapes ------------------------------------------------------------- */

/* axis (negative: counted from the end) as an index in [0, ndim). */
int cr_resolve_axis(int64_t axis, int ndim, int *resolved);

/* MX_ACC_ERR_INVALID_ARG with fmt's "%s" replaced by the formatted shape. */
int cr_shape_error(const char *fmt, const acc_shape *shape);

/* Product of extents begin .. end - 1. Shapes that reach the operators have
 * had their element counts checked (see cr_resolve_op), so it fits. */
int64_t cr_product(const acc_shape *shape, int begin, int end);

int64_t cr_element_count(const acc_shape *shape);

/* Largest element count, ignoring empty extents, of any shape cpu_ref
 * accepts: the element offsets of such a shape, and of every output an
 * operator infers from them, fit in int64_t and in size_t bytes of the
 * widest dtype. */
uint64_t cr_max_elements(void);

/* *out = a * b, or MX_ACC_ERR_INVALID_ARG ("what is too large") when the
 * product exceeds cr_max_elements(). */
int cr_checked_mul(uint64_t a, uint64_t b, const char *what, uint64_t *out);

/* A shape as kernel dims, with at least one dimension (kernels walk axes):
 * a 0-d tensor's single element is viewed as shape (1,). Returns the
 * number of dims. */
int cr_view_dims(const acc_shape *shape, int64_t dims[CR_MAX_NDIM]);

/* Row-major element strides of a shape. */
void cr_compact_strides(const acc_shape *shape, int64_t strides[CR_MAX_NDIM]);

/* Common shapes of num_inputs / num_outputs / infer_shape / run. */
int cr_one_input(const cr_params *params);
int cr_two_inputs(const cr_params *params);
int cr_three_inputs(const cr_params *params);
int cr_one_output(const cr_params *params);
int cr_same_shape_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out);
/* Copies input 0 into output 0 (same element count and dtype): every
 * operator that only changes the shape, since tensors are compact and
 * row-major. */
int cr_copy_run(const cr_params *params, const cr_tensor *in, int num_in, const cr_tensor *out,
                int num_threads);

/* ---- dtypes --------------------------------------------------------------- */

/* Sets of dtypes, as bit masks of (1 << TensorDType value). */
#define CR_DTYPE_BIT(dtype) (1u << (unsigned)(dtype))
#define CR_DTYPES_FLOAT (CR_DTYPE_BIT(CR_FLOAT32) | CR_DTYPE_BIT(CR_FLOAT16))
#define CR_DTYPES_INTEGER                                                     \
  (CR_DTYPE_BIT(CR_UINT8) | CR_DTYPE_BIT(CR_INT8) | CR_DTYPE_BIT(CR_INT32) | \
   CR_DTYPE_BIT(CR_INT64))
#define CR_DTYPES_ALL (CR_DTYPES_FLOAT | CR_DTYPES_INTEGER | CR_DTYPE_BIT(CR_FLOAT64))

static inline cr_dtype cr_in_dtype(const cr_params *params, int index) {
  return (cr_dtype)params->in_dtypes[index];
}

static inline cr_dtype cr_out_dtype(const cr_params *params, int index) {
  return (cr_dtype)params->out_dtypes[index];
}

/* MX_ACC_ERR_UNSUPPORTED ("<role> <index> has dtype <d>; <family> runs
 * only <allowed>") when dtype is not in the set allowed. */
int cr_dtype_allowed(const char *role, int index, int32_t dtype, unsigned allowed,
                     const char *family, const char *allowed_text);

/* MX_ACC_ERR_INVALID_ARG when dtype differs from expected, the dtype the
 * registry's type rule gives that tensor. */
int cr_dtype_expect(const char *role, int index, int32_t dtype, int32_t expected);

/* Type rules shared by many families (check_dtypes functions):
 * cr_dtypes_float: every input and output has input 0's dtype, float32 or
 *   float16 (the families that compute in float32, see cr_run_float32);
 * cr_dtypes_any: every input and output has input 0's dtype, any dtype (the
 *   families that only move elements);
 * cr_dtypes_first_any: every output has input 0's dtype, any dtype; the
 *   other inputs (indices, shape donors) may have any dtype. */
int cr_dtypes_float(const cr_params *params);
int cr_dtypes_any(const cr_params *params);
int cr_dtypes_first_any(const cr_params *params);

/* The elem_size of input or output index. */
size_t cr_in_size(const cr_params *params, int index);
size_t cr_out_size(const cr_params *params, int index);

/* Runs compute with float16 tensors widened to float32: every float16
 * input is copied into a float32 buffer, compute writes float32 buffers
 * for the float16 outputs, which are then rounded (once) into them. compute
 * sees params unchanged, so it can tell a widened float16 tensor (whose
 * dtype still reads float16) from a float32 one, e.g. to round a scalar
 * attribute to float16 as MXNet does. Tensors of other dtypes are passed
 * as they are. Returns compute's status, or MX_ACC_ERR_OUT_OF_MEMORY. */
int cr_run_float32(const cr_params *params, const cr_tensor *in, int num_in,
                   const cr_tensor *out, int num_threads, cr_run_fn compute);

/* Defines run function `name` of a family that computes in float32: it
 * runs `compute` through cr_run_float32. */
#define CR_DEFINE_FLOAT32_RUN(name, compute)                                             \
  static int name(const cr_params *params, const cr_tensor *in, int num_in,              \
                  const cr_tensor *out, int num_threads) {                               \
    return cr_run_float32(params, in, num_in, out, num_threads, compute);                \
  }

/* ---- variants ------------------------------------------------------------ */

/* The scalar operators' variant is a cr_binary_op, with this bit set when
 * the scalar is the left operand (_rminus_scalar: scalar - x). */
#define CR_SCALAR_ON_LEFT 0x100

/* Pooling's pooling_convention: how the output size rounds. */
typedef enum cr_pool_convention {
  CR_POOL_VALID, /* floor((x + 2p - k) / s) + 1 */
  CR_POOL_FULL,  /* ceil((x + 2p - k) / s) + 1 */
  CR_POOL_SAME   /* ceil(x / s), 1-D only and without padding */
} cr_pool_convention;

/* topk's ret_typ. */
typedef enum cr_topk_return {
  CR_TOPK_INDICES,
  CR_TOPK_VALUE,
  CR_TOPK_MASK,
  CR_TOPK_BOTH
} cr_topk_return;

/* ---- the families --------------------------------------------------------- */

/* ops_nn.c */
extern const cr_op_impl cr_impl_convolution;
extern const cr_op_impl cr_impl_deconvolution; /* variant 1 (parsing shared with Convolution) */
extern const cr_op_impl cr_impl_pooling;
extern const cr_op_impl cr_impl_fully_connected;
extern const cr_op_impl cr_impl_upsampling;
extern const cr_op_impl cr_impl_dropout;
extern const cr_op_impl cr_impl_embedding;

/* ops_rnn.c */
extern const cr_op_impl cr_impl_rnn;

/* ops_norm.c */
extern const cr_op_impl cr_impl_activation;
extern const cr_op_impl cr_impl_leaky_relu;
extern const cr_op_impl cr_impl_batch_norm;
extern const cr_op_impl cr_impl_layer_norm;
extern const cr_op_impl cr_impl_instance_norm;
extern const cr_op_impl cr_impl_softmax; /* variant: 1 for log_softmax */
extern const cr_op_impl cr_impl_softmax_output;
extern const cr_op_impl cr_impl_softmax_activation;

/* ops_math.c */
extern const cr_op_impl cr_impl_elemwise;  /* variant: cr_binary_op */
extern const cr_op_impl cr_impl_broadcast; /* variant: cr_binary_op */
extern const cr_op_impl cr_impl_scalar;    /* variant: cr_binary_op | CR_SCALAR_ON_LEFT */
extern const cr_op_impl cr_impl_unary;     /* variant: cr_unary_op */
extern const cr_op_impl cr_impl_clip;
extern const cr_op_impl cr_impl_fill_like; /* variant: the fill value, 0 or 1 */
extern const cr_op_impl cr_impl_add_n;
extern const cr_op_impl cr_impl_reduce;    /* variant: cr_reduce_op */
extern const cr_op_impl cr_impl_dot;
extern const cr_op_impl cr_impl_batch_dot;

/* ops_shape.c */
extern const cr_op_impl cr_impl_copy;      /* identity, BlockGrad */
extern const cr_op_impl cr_impl_cast;
extern const cr_op_impl cr_impl_flatten;
extern const cr_op_impl cr_impl_reshape;
extern const cr_op_impl cr_impl_expand_dims;
extern const cr_op_impl cr_impl_squeeze;
extern const cr_op_impl cr_impl_transpose;
extern const cr_op_impl cr_impl_concat;
extern const cr_op_impl cr_impl_stack;
extern const cr_op_impl cr_impl_split;
extern const cr_op_impl cr_impl_slice_axis;
extern const cr_op_impl cr_impl_slice;
extern const cr_op_impl cr_impl_slice_like;

/* ops_replicate.c */
extern const cr_op_impl cr_impl_tile;
extern const cr_op_impl cr_impl_repeat;
extern const cr_op_impl cr_impl_broadcast_to;
extern const cr_op_impl cr_impl_broadcast_axis;
extern const cr_op_impl cr_impl_broadcast_like;
extern const cr_op_impl cr_impl_pad;

/* ops_index.c */
extern const cr_op_impl cr_impl_take;
extern const cr_op_impl cr_impl_where;
extern const cr_op_impl cr_impl_arg_search; /* variant: 1 for argmax, 0 for argmin */
extern const cr_op_impl cr_impl_topk;

/* The ONNX importer's _onnx_* operators, by file (cr_impl_onnx_scan is
 * _onnx_cumsum, variant 0, and _onnx_cumprod, variant 1). */

/* ops_onnx_elementwise.c */
extern const cr_op_impl cr_impl_onnx_unary;
extern const cr_op_impl cr_impl_onnx_binary;
extern const cr_op_impl cr_impl_onnx_nary;
extern const cr_op_impl cr_impl_onnx_where;
extern const cr_op_impl cr_impl_onnx_clip;
extern const cr_op_impl cr_impl_onnx_cast;
extern const cr_op_impl cr_impl_onnx_cast_like;
/* 1 when an _onnx_unary step computes ONNX HardSigmoid (*swish 0) or
 * HardSwish (*swish 1), with the alpha and beta its float kernel
 * (cr_fast_hard_sigmoid) computes with (cr_epilogue_hard_sigmoid's); else 0. */
int cr_onnx_unary_hard_sigmoid(const cr_params *params, int *swish, float *alpha, float *beta);

/* ops_onnx_movement.c */
extern const cr_op_impl cr_impl_onnx_shape;
extern const cr_op_impl cr_impl_onnx_size;
extern const cr_op_impl cr_impl_onnx_flatten;
extern const cr_op_impl cr_impl_onnx_reshape;
extern const cr_op_impl cr_impl_onnx_unsqueeze;
extern const cr_op_impl cr_impl_onnx_squeeze;
extern const cr_op_impl cr_impl_onnx_transpose;
extern const cr_op_impl cr_impl_onnx_expand;
extern const cr_op_impl cr_impl_onnx_slice;
extern const cr_op_impl cr_impl_onnx_tile;
extern const cr_op_impl cr_impl_onnx_pad;
extern const cr_op_impl cr_impl_onnx_split;
extern const cr_op_impl cr_impl_onnx_concat;
extern const cr_op_impl cr_impl_onnx_depth_to_space;
extern const cr_op_impl cr_impl_onnx_space_to_depth;
extern const cr_op_impl cr_impl_onnx_trilu;
extern const cr_op_impl cr_impl_onnx_eye_like;
extern const cr_op_impl cr_impl_onnx_reverse_sequence;
extern const cr_op_impl cr_impl_onnx_one_hot;

/* ops_onnx_gather.c */
extern const cr_op_impl cr_impl_onnx_gather;
extern const cr_op_impl cr_impl_onnx_gather_elements;
extern const cr_op_impl cr_impl_onnx_gather_nd;
extern const cr_op_impl cr_impl_onnx_scatter_elements;
extern const cr_op_impl cr_impl_onnx_scatter_nd;

/* ops_onnx_reduce.c */
extern const cr_op_impl cr_impl_onnx_reduce;
extern const cr_op_impl cr_impl_onnx_arg;
extern const cr_op_impl cr_impl_onnx_scan;
extern const cr_op_impl cr_impl_onnx_topk;

/* ops_onnx_linalg.c */
extern const cr_op_impl cr_impl_onnx_matmul;
extern const cr_op_impl cr_impl_onnx_gemm;
extern const cr_op_impl cr_impl_onnx_det;
extern const cr_op_impl cr_impl_onnx_einsum;

/* ops_onnx_nn.c */
extern const cr_op_impl cr_impl_onnx_softmax;
extern const cr_op_impl cr_impl_onnx_lrn;
extern const cr_op_impl cr_impl_onnx_mvn;
extern const cr_op_impl cr_impl_onnx_norm;
extern const cr_op_impl cr_impl_onnx_lp_norm;
extern const cr_op_impl cr_impl_onnx_group_norm;
extern const cr_op_impl cr_impl_onnx_nll_loss;
extern const cr_op_impl cr_impl_onnx_softmax_cross_entropy;
extern const cr_op_impl cr_impl_onnx_pool;
extern const cr_op_impl cr_impl_onnx_resize;
extern const cr_op_impl cr_impl_onnx_upsample_nearest;

#endif /* CPU_REF_OP_IMPL_H_ */
