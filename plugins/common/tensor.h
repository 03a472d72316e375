/*
 * Checked helpers for MXTensor descriptors and shapes received through the
 * ABI. Every function that can fail records a message with acc_fail() and
 * returns its status code, so callers can return it unchanged.
 */
#ifndef ACC_COMMON_TENSOR_H_
#define ACC_COMMON_TENSOR_H_

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "mxnet_acc.h"

/* Bytes per element of dtype, or 0 if dtype is not a TensorDType value. */
size_t acc_dtype_size(int32_t dtype);

/* Name of dtype ("float32", ...) or "invalid". */
const char *acc_dtype_name(int32_t dtype);

/* Copies a descriptor's shape into *shape after checking shape_len and the
 * shape pointer. what names the tensor in messages ("input 0 of infer"). */
int acc_tensor_shape(const MXTensor *tensor, const char *what, acc_shape *shape);

/* Number of elements of shape into *count; fails when the elements would
 * take more than SIZE_MAX bytes at element_size bytes each. */
int acc_shape_count(const acc_shape *shape, size_t element_size, const char *what,
                    size_t *count);

/* Size in bytes of shape's elements at element_size bytes each into *bytes,
 * failing on overflow as acc_shape_count. */
int acc_shape_bytes(const acc_shape *shape, size_t element_size, const char *what,
                    size_t *bytes);

int acc_shape_equal(const acc_shape *a, const acc_shape *b);

/* Writes "(1, 3, 224, 224)" into buffer (always NUL-terminated). */
void acc_shape_format(const acc_shape *shape, char *buffer, size_t size);

/* Checks that tensor describes a dense tensor with the given dtype and
 * shape; its data pointer is not looked at. */
int acc_tensor_expect_spec(const MXTensor *tensor, const char *what, int32_t dtype,
                           const acc_shape *shape);

/* As acc_tensor_expect_spec, and data must be non-NULL unless the tensor is
 * empty. */
int acc_tensor_expect(const MXTensor *tensor, const char *what, int32_t dtype,
                      const acc_shape *shape);

/* Checks the (names, tensors, count) arguments of an ABI call such as
 * supportedOps() or loadModel(): count >= 0, both arrays present when count
 * > 0, every name non-NULL and every descriptor's shape well formed. call
 * names the function in messages. */
int acc_check_named_tensors(const char *call, const char *const *names,
                            const MXTensor *tensors, int count);

/* Checks the arguments of copyToAcc()/copyFromAcc() as far as the ABI
 * defines them: both descriptors present, the host one on
 * MX_ACC_HOST_DEVICE, dense, well-formed shapes, one known dtype, the same
 * byte size, host data present when there are bytes. *bytes (out) receives
 * that size. Whether device_side's device and data are the plugin's own is
 * the plugin's to check. call names the function in messages. */
int acc_check_copy(const MXTensor *device_side, const MXTensor *host_side, const char *call,
                   size_t *bytes);

/* The names of graph's heads (acc_graph_output_name), for
 * acc_match_outputs(). *names (out) is owned by the caller, also on
 * failure (then partly filled): free it with acc_free_head_names(). */
int acc_graph_head_names(const acc_graph *graph, char ***names);
void acc_free_head_names(const acc_graph *graph, char **names);

/* For infer(): maps each requested output name to the head of graph with
 * that name (head_names holds acc_graph_output_name() of every head), every
 * head exactly once, and checks each descriptor against its head's
 * annotated dtype and shape. head_of_output (num_out entries, out) receives
 * the head index of each output. Where the data lives is the plugin's to
 * check. */
int acc_match_outputs(const acc_graph *graph, const char *const *head_names,
                      const char *const *out_names, const MXTensor *out_data, int num_out,
                      size_t *head_of_output);

#endif /* ACC_COMMON_TENSOR_H_ */
