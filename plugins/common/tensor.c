#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

size_t acc_dtype_size(int32_t dtype) {
  switch (dtype) {
    case kFloat32: return 4;
    case kFloat64: return 8;
    case kFloat16: return 2;
    case kUint8: return 1;
    case kInt32: return 4;
    case kInt8: return 1;
    case kInt64: return 8;
    default: return 0;
  }
}

const char *acc_dtype_name(int32_t dtype) {
  switch (dtype) {
    case kFloat32: return "float32";
    case kFloat64: return "float64";
    case kFloat16: return "float16";
    case kUint8: return "uint8";
    case kInt32: return "int32";
    case kInt8: return "int8";
    case kInt64: return "int64";
    default: return "invalid";
  }
}

int acc_tensor_shape(const MXTensor *tensor, const char *what, acc_shape *shape) {
  if (tensor == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: tensor descriptor is NULL", what);
  }
  if (tensor->shape_len > MX_ACC_MAX_NDIM) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: %llu dimensions, at most %d allowed",
                    what, (unsigned long long)tensor->shape_len, MX_ACC_MAX_NDIM);
  }
  if (tensor->shape_len > 0 && tensor->shape == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: shape is NULL with shape_len %llu",
                    what, (unsigned long long)tensor->shape_len);
  }
  shape->ndim = (int)tensor->shape_len;
  for (int i = 0; i < shape->ndim; ++i) shape->dims[i] = tensor->shape[i];
  return MX_ACC_OK;
}

int acc_shape_count(const acc_shape *shape, size_t element_size, const char *what,
                    size_t *count) {
  size_t total = 1;
  if (element_size == 0) element_size = 1;
  for (int i = 0; i < shape->ndim; ++i) {
    uint64_t extent = shape->dims[i];
    if (extent != 0 && total > SIZE_MAX / element_size / extent) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: shape is too large", what);
    }
    total *= (size_t)extent;
  }
  *count = total;
  return MX_ACC_OK;
}

int acc_shape_bytes(const acc_shape *shape, size_t element_size, const char *what,
                    size_t *bytes) {
  size_t count = 0;
  int status = acc_shape_count(shape, element_size, what, &count);
  if (status == MX_ACC_OK) *bytes = count * (element_size == 0 ? 1 : element_size);
  return status;
}

int acc_shape_equal(const acc_shape *a, const acc_shape *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; ++i) {
    if (a->dims[i] != b->dims[i]) return 0;
  }
  return 1;
}

void acc_shape_format(const acc_shape *shape, char *buffer, size_t size) {
  if (size == 0) return;
  size_t used = 0;
  buffer[0] = '\0';
  for (int i = 0; i < shape->ndim && used < size; ++i) {
    int n = snprintf(buffer + used, size - used, "%s%llu", i == 0 ? "(" : ", ",
                     (unsigned long long)shape->dims[i]);
    if (n < 0) return;
    used += (size_t)n;
  }
  if (used < size) {
    snprintf(buffer + used, size - used, "%s", shape->ndim == 0 ? "()" : ")");
  }
}

int acc_tensor_expect_spec(const MXTensor *tensor, const char *what, int32_t dtype,
                           const acc_shape *shape) {
  acc_shape actual;
  int status = acc_tensor_shape(tensor, what, &actual);
  if (status != MX_ACC_OK) return status;
  if (tensor->isSparse) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: sparse tensors are not supported", what);
  }
  if (tensor->dtype != dtype) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: dtype %s, expected %s", what,
                    acc_dtype_name(tensor->dtype), acc_dtype_name(dtype));
  }
  if (!acc_shape_equal(&actual, shape)) {
    char got[256], want[256];
    acc_shape_format(&actual, got, sizeof got);
    acc_shape_format(shape, want, sizeof want);
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: shape %s, expected %s", what, got, want);
  }
  size_t count = 0;
  return acc_shape_count(&actual, acc_dtype_size(dtype), what, &count);
}

int acc_tensor_expect(const MXTensor *tensor, const char *what, int32_t dtype,
                      const acc_shape *shape) {
  int status = acc_tensor_expect_spec(tensor, what, dtype, shape);
  if (status != MX_ACC_OK) return status;
  size_t count = 0;
  acc_shape_count(shape, acc_dtype_size(dtype), what, &count);
  if (count > 0 && tensor->data == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: data is NULL", what);
  }
  return MX_ACC_OK;
}

int acc_check_named_tensors(const char *call, const char *const *names,
                            const MXTensor *tensors, int count) {
  if (count < 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: negative tensor count", call);
  if (count > 0 && (names == NULL || tensors == NULL)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: names or tensors is NULL", call);
  }
  for (int i = 0; i < count; ++i) {
    acc_shape shape;
    if (names[i] == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: name %d is NULL", call, i);
    int status = acc_tensor_shape(&tensors[i], names[i], &shape);
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

int acc_match_outputs(const acc_graph *graph, const char *const *head_names,
                      const char *const *out_names, const MXTensor *out_data, int num_out,
                      size_t *head_of_output) {
  size_t num_heads = graph->num_heads;
  if (num_out < 0 || (size_t)num_out != num_heads) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: %d outputs given, the model has %zu",
                    num_out, num_heads);
  }
  for (int i = 0; i < num_out; ++i) {
    if (out_names[i] == NULL) return acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: output name NULL");
    size_t head = num_heads;
    for (size_t h = 0; h < num_heads; ++h) {
      if (strcmp(head_names[h], out_names[i]) == 0) head = h;
    }
    if (head == num_heads) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: \"%s\" is not an output of the model "
                      "(the first is \"%s\")", out_names[i], head_names[0]);
    }
    for (int j = 0; j < i; ++j) {
      if (head_of_output[j] == head) {
        return acc_fail(MX_ACC_ERR_INVALID_ARG, "infer: output \"%s\" is given twice",
                        out_names[i]);
      }
    }
    head_of_output[i] = head;
    acc_entry entry = graph->heads[head];
    const acc_node *node = &graph->nodes[entry.node];
    int status = acc_tensor_expect(&out_data[i], "infer: output", node->out_dtypes[entry.index],
                                   &node->out_shapes[entry.index]);
    if (status != MX_ACC_OK) { /* checked again with the output's name for the message */
      char what[1024];
      snprintf(what, sizeof what, "infer: output \"%s\"", out_names[i]);
      return acc_tensor_expect(&out_data[i], what, node->out_dtypes[entry.index],
                               &node->out_shapes[entry.index]);
    }
  }
  return MX_ACC_OK;
}

int acc_check_copy(const MXTensor *device_side, const MXTensor *host_side, const char *call,
                   size_t *bytes) {
  if (device_side == NULL || host_side == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: a tensor is NULL", call);
  }
  if (host_side->dev_id != MX_ACC_HOST_DEVICE) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: host tensor has dev_id %d", call,
                    (int)host_side->dev_id);
  }
  if (device_side->isSparse || host_side->isSparse) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "%s: sparse tensors are not supported", call);
  }
  acc_shape device_shape, host_shape;
  int status = acc_tensor_shape(device_side, call, &device_shape);
  if (status == MX_ACC_OK) status = acc_tensor_shape(host_side, call, &host_shape);
  if (status != MX_ACC_OK) return status;
  size_t element = acc_dtype_size(device_side->dtype), device_bytes, host_bytes;
  if (element == 0 || device_side->dtype != host_side->dtype) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: dtypes %s and %s", call,
                    acc_dtype_name(device_side->dtype), acc_dtype_name(host_side->dtype));
  }
  status = acc_shape_bytes(&device_shape, element, call, &device_bytes);
  if (status == MX_ACC_OK) status = acc_shape_bytes(&host_shape, element, call, &host_bytes);
  if (status != MX_ACC_OK) return status;
  if (device_bytes != host_bytes) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: sizes differ (%zu and %zu bytes)", call,
                    device_bytes, host_bytes);
  }
  if (host_bytes > 0 && host_side->data == NULL) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s: host data is NULL", call);
  }
  *bytes = device_bytes;
  return MX_ACC_OK;
}

int acc_graph_head_names(const acc_graph *graph, char ***names) {
  *names = calloc(graph->num_heads ? graph->num_heads : 1, sizeof(char *));
  if (*names == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model heads");
  for (size_t i = 0; i < graph->num_heads; ++i) {
    char name[1024];
    if (acc_graph_output_name(graph, graph->heads[i], name, sizeof name) != 0) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "output %zu has too long a name", i);
    }
    size_t length = strlen(name) + 1;
    (*names)[i] = malloc(length);
    if ((*names)[i] == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "model heads");
    memcpy((*names)[i], name, length);
  }
  return MX_ACC_OK;
}

void acc_free_head_names(const acc_graph *graph, char **names) {
  for (size_t i = 0; names != NULL && i < graph->num_heads; ++i) free(names[i]);
  free(names);
}
