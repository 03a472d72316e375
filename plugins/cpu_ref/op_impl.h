/*
 * What the operator files share (internal to cpu_ref): the attribute and
 * shape helpers defined in ops.c, and the operator families defined in
 * ops_nn.c (neural-network layers), ops_math.c (arithmetic, math,
 * reductions, products) and ops_shape.c (shape changes, copies, joining,
 * splitting, slicing) that ops.c lists in its table.
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

/* Parses "None" or a value of dtype float32 (the only dtype cpu_ref runs). */
int cr_parse_float32_dtype(const char *key, const char *value);

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
 * operator infers from them, fit in int64_t and in size_t bytes. */
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
int cr_one_output(const cr_params *params);
int cr_same_shape_infer(const cr_params *params, const acc_shape *in, int num_in,
                        acc_shape *out);
/* Copies input 0 into output 0 (same element count): every operator that
 * only changes the shape, since tensors are compact and row-major. */
void cr_copy_run(const cr_params *params, const cr_tensor *in, int num_in,
                 const cr_tensor *out, int num_threads);

/* ---- variants ------------------------------------------------------------ */

/* The scalar operators' variant is a cr_binary_op, with this bit set when
 * the scalar is the left operand (_rminus_scalar: scalar - x). */
#define CR_SCALAR_ON_LEFT 0x100

/* ---- the families --------------------------------------------------------- */

/* ops_nn.c */
extern const cr_op_impl cr_impl_convolution;
extern const cr_op_impl cr_impl_pooling;
extern const cr_op_impl cr_impl_fully_connected;
extern const cr_op_impl cr_impl_activation;
extern const cr_op_impl cr_impl_batch_norm;
extern const cr_op_impl cr_impl_layer_norm;
extern const cr_op_impl cr_impl_leaky_relu;
extern const cr_op_impl cr_impl_softmax; /* variant: 1 for log_softmax */
extern const cr_op_impl cr_impl_dropout;
extern const cr_op_impl cr_impl_embedding;

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
extern const cr_op_impl cr_impl_flatten;
extern const cr_op_impl cr_impl_reshape;
extern const cr_op_impl cr_impl_expand_dims;
extern const cr_op_impl cr_impl_squeeze;
extern const cr_op_impl cr_impl_transpose;
extern const cr_op_impl cr_impl_concat;
extern const cr_op_impl cr_impl_split;
extern const cr_op_impl cr_impl_slice_axis;

#endif /* CPU_REF_OP_IMPL_H_ */
