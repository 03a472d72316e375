/*
 * An MXNet symbol-JSON graph as plugins receive it from supportedOps() and
 * loadModel(): parsed, validated and indexed, with the host's annotations
 * (see section 8 of mxnet_acc.h) decoded.
 *
 * Validation (every failure is an error with a message naming the node):
 * "nodes" is an array of objects, each with string "op" and "name", an
 * "inputs" array of [node, index] or [node, index, version] entries whose
 * node precedes the current one (topological order) and whose index is below
 * that node's output count, and attributes in "attrs" and the older "attr"
 * and "param" keys, merged (a key may appear in only one of them), whose
 * values are all strings; "nodes", "arg_nodes" and "heads" are required
 * arrays; variable ("null") nodes have
 * no inputs; "arg_nodes" entries name variable nodes; "heads" entries name
 * existing outputs; variable names are unique. With annotations required:
 * every node has "__out_shapes__" and "__out_dtypes__" of equal length (at
 * least 1 for operators, exactly 1 for variables), with at most
 * MX_ACC_MAX_NDIM dimensions, non-negative extents and valid TensorDType
 * values; every variable has "__kind__" "data" or "weight".
 */
#ifndef ACC_COMMON_GRAPH_H_
#define ACC_COMMON_GRAPH_H_

#include <stddef.h>
#include <stdint.h>

#include "mxnet_acc.h"

typedef struct acc_shape {
  int ndim;
  uint64_t dims[MX_ACC_MAX_NDIM];
} acc_shape;

/* One output of one node. */
typedef struct acc_entry {
  uint32_t node;
  uint32_t index;
} acc_entry;

typedef enum acc_var_kind {
  ACC_VAR_NONE = 0, /* operator node, or kind not annotated */
  ACC_VAR_DATA,
  ACC_VAR_WEIGHT
} acc_var_kind;

typedef struct acc_node {
  const char *op;   /* operator name; NULL for a variable ("null") node */
  const char *name;
  size_t num_attrs;
  const char *const *attr_keys;
  const char *const *attr_vals;
  size_t num_inputs;
  const acc_entry *inputs;
  /* Annotations; num_outputs is 0 when the graph was parsed without them. */
  int num_outputs;
  const acc_shape *out_shapes;
  const int32_t *out_dtypes;
  acc_var_kind kind;
} acc_node;

typedef struct acc_graph {
  size_t num_nodes;
  const acc_node *nodes;
  size_t num_heads;
  const acc_entry *heads;
  size_t num_arg_nodes;
  const uint32_t *arg_nodes;
  void *storage; /* private */
} acc_graph;

/* Parses and validates json (NUL-terminated). require_annotations: nonzero
 * to demand the host's annotations. On success returns MX_ACC_OK and stores
 * a graph owned by the caller in *graph (free with acc_graph_free). On
 * failure returns MX_ACC_ERR_INVALID_ARG (or MX_ACC_ERR_OUT_OF_MEMORY) and
 * writes a message into error (error_size bytes, NUL-terminated). */
int acc_graph_parse(const char *json, int require_annotations,
                    acc_graph **graph, char *error, size_t error_size);

void acc_graph_free(acc_graph *graph);

/* Value of attribute key on node, or NULL. */
const char *acc_node_attr(const acc_node *node, const char *key);

/* Index of the variable node named name, or -1. */
long acc_graph_find_variable(const acc_graph *graph, const char *name);

/* Writes the name of head (node, index) by the rule of mxnet_acc.h section 8
 * into buffer: "<name>_output" when the node has at most one output and
 * index is 0, "<name>_output<index>" otherwise. Returns 0, or -1 if the name
 * does not fit or index is not below a known output count. */
int acc_graph_output_name(const acc_graph *graph, acc_entry head, char *buffer,
                          size_t buffer_size);

#endif /* ACC_COMMON_GRAPH_H_ */
