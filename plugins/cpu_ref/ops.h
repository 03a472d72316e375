/*
 * The cpu_ref operator table: for each operator MXNet's name, the version of
 * its semantics this plugin implements (see "Operator versions" in
 * mxnet_acc.h), attribute parsing with MXNet's defaults, output-shape
 * inference, and the function that runs it on host memory.
 *
 * Adding an operator means adding one cr_op entry in ops.c (and its kernel
 * in kernels.c when it computes anything new).
 */
#ifndef CPU_REF_OPS_H_
#define CPU_REF_OPS_H_

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "kernels.h"

#define CR_MAX_INPUTS 8
#define CR_MAX_OUTPUTS 4

/* Attributes of one operator instance, parsed once at load/bind time. */
typedef struct cr_params {
  union {
    struct {
      cr_conv_params conv;
      int spatial_ndim;
      int64_t num_filter;
      int no_bias;
    } convolution;
    struct {
      cr_pool_params pool;
      int spatial_ndim; /* 0 until resolved from the input for global_pool */
      int global_pool;
      int full_convention;
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
    } batch_norm;
    struct {
      int axis;
      double temperature;
    } softmax;
  } u;
} cr_params;

/* A tensor in host-addressable memory, as kernels see it. */
typedef struct cr_tensor {
  void *data;
  acc_shape shape;
} cr_tensor;

typedef struct cr_op {
  const char *name;
  int version;
  /* Parses attributes (keys of the form "__*__" are skipped by the caller).
   * Returns a status recorded with acc_fail(). */
  int (*parse)(const char *const *keys, const char *const *vals, size_t count,
               cr_params *params);
  /* Number of inputs the operator takes with these attributes. */
  int (*num_inputs)(const cr_params *params);
  /* Checks the input shapes and computes the output shapes (one output for
   * every operator in this table). */
  int (*infer_shape)(const cr_params *params, const acc_shape *inputs,
                     int num_inputs, acc_shape *output);
  void (*run)(const cr_params *params, const cr_tensor *inputs, int num_inputs,
              const cr_tensor *output, int num_threads);
} cr_op;

/* The operator named name, or NULL. */
const cr_op *cr_find_op(const char *name);

/* All operators, for configure's "query" = "ops". */
const cr_op *cr_op_at(size_t index);
size_t cr_num_ops(void);

/* Resolves an operator node for execution: the operator must exist, its
 * "__op_version__" must be the one implemented, every dtype must be float32,
 * the attributes must parse and the output shape inferred from in_shapes must
 * equal out_shape. Fills *op and *params. Returns MX_ACC_ERR_UNSUPPORTED for
 * anything this plugin does not run and MX_ACC_ERR_INVALID_ARG for
 * inconsistent shapes or malformed attributes; what names the node in
 * messages. */
int cr_resolve_op(const char *what, const char *op_name, const char *const *keys,
                  const char *const *vals, size_t num_attrs, const acc_shape *in_shapes,
                  const int32_t *in_dtypes, int num_inputs, const acc_shape *out_shape,
                  int32_t out_dtype, const cr_op **op, cr_params *params);

#endif /* CPU_REF_OPS_H_ */
