/*
 * libFuzzer harness: the plugins' graph-JSON parser (plugins/common/json.c,
 * graph.c) and the attribute parsers (attrs.c) that read what it returns.
 *
 * Every input is given to
 *   - acc_json_parse with its exact length (no terminating NUL: a read past
 *     the end is a heap-buffer-overflow under AddressSanitizer);
 *   - acc_graph_parse, NUL-terminated, without and with required
 *     annotations; a graph that parses is then walked through its public
 *     accessors (acc_node_attr, acc_graph_find_variable,
 *     acc_graph_output_name, acc_graph_head_names) and every attribute value
 *     goes through every parser of attrs.h, as the plugins' operators do.
 * A failure must come back as a status with a NUL-terminated message; a
 * crash, a sanitizer report, a leak, a hang or an allocation beyond
 * -malloc_limit_mb is a bug.
 *
 * Build: python3 fuzz/run.py build (clang -fsanitize=fuzzer,address,undefined).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "graph.h"
#include "json.h"
#include "mxnet_acc.h"
#include "tensor.h"

/* Inputs are at most this long (run.py passes -max_len too). */
enum { kMaxInput = 1 << 20 };

static void check_message(const char *error, size_t size) {
  if (memchr(error, '\0', size) == NULL) abort(); /* the message must be terminated */
  if (error[0] == '\0') abort();                  /* and say something */
}

static void parse_attribute(const char *value) {
  int64_t integer, tuple[MX_ACC_MAX_NDIM + 1], list[4 * (MX_ACC_MAX_NDIM + 1)];
  int count = 0, lengths[4], boolean = 0;
  double real;
  (void)acc_attr_int(value, &integer);
  (void)acc_attr_float(value, &real);
  (void)acc_attr_bool(value, &boolean);
  (void)acc_attr_int_tuple(value, tuple, MX_ACC_MAX_NDIM + 1, &count);
  (void)acc_attr_int_tuple(value, tuple, 0, &count);
  (void)acc_attr_int_tuple_list(value, list, lengths, 4, MX_ACC_MAX_NDIM + 1, &count);
  (void)acc_attr_is_none(value);
  (void)acc_attr_equals(value, "True");
}

static void walk(const acc_graph *graph) {
  char name[256];
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->name == NULL) abort();
    for (size_t a = 0; a < node->num_attrs; ++a) {
      if (acc_node_attr(node, node->attr_keys[a]) != node->attr_vals[a]) abort();
      parse_attribute(node->attr_vals[a]);
    }
    for (size_t k = 0; k < node->num_inputs; ++k) {
      if (node->inputs[k].node >= i) abort(); /* topological order was promised */
    }
    if (node->op == NULL && acc_graph_find_variable(graph, node->name) != (long)i) abort();
  }
  for (size_t h = 0; h < graph->num_heads; ++h) {
    if (graph->heads[h].node >= graph->num_nodes) abort();
    (void)acc_graph_output_name(graph, graph->heads[h], name, sizeof name);
    (void)acc_graph_output_name(graph, graph->heads[h], name, 4);
  }
  for (size_t v = 0; v < graph->num_arg_nodes; ++v) {
    if (graph->arg_nodes[v] >= graph->num_nodes) abort();
  }
  char **names = NULL;
  if (graph->num_heads > 0) {
    (void)acc_graph_head_names(graph, &names);
    acc_free_head_names(graph, names);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInput) return -1; /* not added to the corpus */
  char error[256];

  /* The JSON parser alone, on exactly the input's bytes. */
  char *exact = malloc(size ? size : 1);
  if (exact == NULL) return 0;
  memcpy(exact, data, size);
  acc_json_doc *doc = NULL;
  if (acc_json_parse(exact, size, &doc, error, sizeof error) == 0) {
    if (doc == NULL || acc_json_root(doc) == NULL) abort();
    (void)acc_json_get(acc_json_root(doc), "nodes");
    acc_json_free(doc);
  } else {
    if (doc != NULL) abort();
    check_message(error, sizeof error);
  }
  free(exact);

  /* The graph parser, both ways. */
  char *text = malloc(size + 1);
  if (text == NULL) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  for (int annotations = 0; annotations <= 1; ++annotations) {
    acc_graph *graph = NULL;
    int status = acc_graph_parse(text, annotations, &graph, error, sizeof error);
    if (status == MX_ACC_OK) {
      if (graph == NULL) abort();
      walk(graph);
      acc_graph_free(graph);
    } else {
      if (status != MX_ACC_ERR_INVALID_ARG && status != MX_ACC_ERR_OUT_OF_MEMORY) abort();
      check_message(error, sizeof error);
    }
  }
  free(text);
  return 0;
}
