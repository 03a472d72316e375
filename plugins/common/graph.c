/*
 * MXNet symbol JSON -> validated acc_graph; see graph.h for the rules.
 *
 * Design notes for plugin authors reading this as a template:
 *
 *  - Strings (op names, node names, attribute keys and values) are not
 *    copied: they point into the parsed JSON document, which the graph keeps
 *    alive until acc_graph_free.
 *  - Per-node arrays (inputs, attributes, output shapes and dtypes) are
 *    appended to a few shared pools in node order while the nodes are
 *    validated, and the nodes' pointers are set only at the end
 *    (link_nodes), because a pool may move while it grows. A graph is
 *    therefore a handful of allocations whatever its size.
 *  - Variables are also indexed by name in a sorted array, which both finds
 *    duplicate names and serves acc_graph_find_variable in O(log n).
 */
#include "graph.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "json.h"

#if defined(__GNUC__)
#define GRAPH_PRINTF_LIKE(fmt_index, args_index) \
  __attribute__((format(printf, fmt_index, args_index)))
#else
#define GRAPH_PRINTF_LIKE(fmt_index, args_index)
#endif

/* Node ids travel as int (supportedOps) and uint32_t (acc_entry). */
#define MAX_NODES INT32_MAX
#define MAX_OUTPUTS INT32_MAX

/* Highest TensorDType value of this API version. */
#define MAX_DTYPE kInt64

/* Shapes are parsed one dimension wider than allowed, so that a shape with
 * too many dimensions gets its own message instead of a parse error. */
enum { kShapeStride = MX_ACC_MAX_NDIM + 1 };

typedef struct variable_entry {
  const char *name;
  uint32_t node;
} variable_entry;

/* Everything one graph owns; acc_graph.storage points here. */
typedef struct graph_box {
  acc_graph graph;
  acc_json_doc *doc;         /* owns every string the graph points to */
  acc_node *nodes;
  acc_entry *entries;        /* node inputs in node order, then the heads */
  const char **strings;      /* per node: its attribute keys, then values */
  acc_shape *shapes;         /* per node: its output shapes */
  int32_t *dtypes;           /* per node: its output dtypes */
  uint32_t *arg_nodes;
  variable_entry *variables; /* sorted by name */
  size_t num_variables;
} graph_box;

/* ------------------------------------------------------------------------
 * Growable pools
 * ---------------------------------------------------------------------- */

typedef struct pool {
  void *items;
  size_t count;
  size_t capacity;
  size_t item_size;
} pool;

/* Appends n > 0 uninitialized items; returns the first, or NULL when memory
 * or the size arithmetic runs out. Earlier items may move. */
static void *pool_extend(pool *p, size_t n) {
  if (n > SIZE_MAX - p->count) return NULL;
  size_t needed = p->count + n;
  if (needed > p->capacity) {
    size_t capacity = p->capacity == 0 ? 64 : p->capacity;
    while (capacity < needed) {
      capacity = capacity > SIZE_MAX / 2 ? needed : capacity * 2;
    }
    if (capacity > SIZE_MAX / p->item_size) return NULL;
    void *items = realloc(p->items, capacity * p->item_size);
    if (items == NULL) return NULL;
    p->items = items;
    p->capacity = capacity;
  }
  void *first = (char *)p->items + p->count * p->item_size;
  p->count = needed;
  return first;
}

/* ------------------------------------------------------------------------
 * Builder state and errors
 * ---------------------------------------------------------------------- */

typedef struct builder {
  graph_box *box;
  int require_annotations;
  pool entries; /* acc_entry */
  pool strings; /* const char * */
  pool shapes;  /* acc_shape */
  pool dtypes;  /* int32_t */
  char *error;
  size_t error_size;
} builder;

static int vfail(builder *b, const char *prefix, const char *format, va_list args) {
  if (b->error == NULL || b->error_size == 0) return MX_ACC_ERR_INVALID_ARG;
  int written = snprintf(b->error, b->error_size, "%s", prefix);
  if (written >= 0 && (size_t)written < b->error_size) {
    vsnprintf(b->error + written, b->error_size - (size_t)written, format, args);
  }
  return MX_ACC_ERR_INVALID_ARG;
}

/* Graph-level error; returns MX_ACC_ERR_INVALID_ARG. */
static int fail(builder *b, const char *format, ...) GRAPH_PRINTF_LIKE(2, 3);
static int fail(builder *b, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vfail(b, "", format, args);
  va_end(args);
  return MX_ACC_ERR_INVALID_ARG;
}

/* Error about node index, named once its name is known. */
static int node_fail(builder *b, size_t index, const char *format, ...)
    GRAPH_PRINTF_LIKE(3, 4);
static int node_fail(builder *b, size_t index, const char *format, ...) {
  char prefix[160];
  const char *name = b->box->nodes[index].name;
  if (name != NULL) {
    snprintf(prefix, sizeof prefix, "node %zu (%s): ", index, name);
  } else {
    snprintf(prefix, sizeof prefix, "node %zu: ", index);
  }
  va_list args;
  va_start(args, format);
  vfail(b, prefix, format, args);
  va_end(args);
  return MX_ACC_ERR_INVALID_ARG;
}

static int fail_out_of_memory(builder *b) {
  fail(b, "out of memory while building the graph");
  return MX_ACC_ERR_OUT_OF_MEMORY;
}

/* ------------------------------------------------------------------------
 * Entries: [node, index] or [node, index, version]
 * ---------------------------------------------------------------------- */

typedef enum entry_problem {
  ENTRY_OK,
  ENTRY_MALFORMED,
  ENTRY_NO_SUCH_NODE,
  ENTRY_NO_SUCH_OUTPUT
} entry_problem;

static const char *describe_entry_problem(entry_problem problem, int is_head) {
  switch (problem) {
    case ENTRY_MALFORMED:
      return "is not [node, index] or [node, index, version] with "
             "non-negative integers";
    case ENTRY_NO_SUCH_NODE:
      return is_head ? "names a node that does not exist"
                     : "names a node that does not precede this one";
    case ENTRY_NO_SUCH_OUTPUT:
      return "names an output its node does not have";
    default:
      return "is valid";
  }
}

/* Decodes an entry naming one of the nodes [0, limit). The index is checked
 * only against annotated output counts (num_outputs > 0). */
static entry_problem decode_entry(const graph_box *box, const acc_json_value *json,
                                  size_t limit, acc_entry *out) {
  long long node, index, version;
  if (json->type != ACC_JSON_ARRAY) return ENTRY_MALFORMED;
  size_t count = json->as.array.count;
  const acc_json_value *items = json->as.array.items;
  if (count != 2 && count != 3) return ENTRY_MALFORMED;
  if (acc_json_integer(&items[0], 0, LLONG_MAX, &node) != 0 ||
      acc_json_integer(&items[1], 0, MAX_OUTPUTS - 1, &index) != 0 ||
      (count == 3 && acc_json_integer(&items[2], 0, LLONG_MAX, &version) != 0)) {
    return ENTRY_MALFORMED;
  }
  /* The version, when present, is validated and otherwise ignored. */
  if ((unsigned long long)node >= limit) return ENTRY_NO_SUCH_NODE;
  int num_outputs = box->nodes[node].num_outputs;
  if (num_outputs > 0 && index >= num_outputs) return ENTRY_NO_SUCH_OUTPUT;
  out->node = (uint32_t)node;
  out->index = (uint32_t)index;
  return ENTRY_OK;
}

/* ------------------------------------------------------------------------
 * Node fields
 * ---------------------------------------------------------------------- */

static const char *string_member(const acc_json_value *object, const char *key) {
  const acc_json_value *value = acc_json_get(object, key);
  return value != NULL && value->type == ACC_JSON_STRING ? value->as.string.chars : NULL;
}

static int read_identity(builder *b, size_t index, const acc_json_value *json,
                         acc_node *node) {
  const char *name = string_member(json, "name");
  if (name == NULL) return node_fail(b, index, "has no string \"name\"");
  node->name = name;
  const char *op = string_member(json, "op");
  if (op == NULL) return node_fail(b, index, "has no string \"op\"");
  node->op = strcmp(op, "null") == 0 ? NULL : op;
  return MX_ACC_OK;
}

/* Where a node's attributes are: MXNet wrote them under "param" (with user
 * attributes under "attr") before settling on "attrs". Like MXNet's own
 * loader, a node's attributes are the union of all three. */
typedef struct attr_sources {
  const acc_json_value *objects[3];
  size_t num_objects;
  size_t num_attrs;
} attr_sources;

static int find_attrs(builder *b, size_t index, const acc_json_value *json,
                      attr_sources *sources) {
  static const char *const kKeys[] = {"attrs", "attr", "param"};
  sources->num_objects = 0;
  sources->num_attrs = 0;
  for (size_t i = 0; i < sizeof kKeys / sizeof kKeys[0]; i++) {
    const acc_json_value *value = acc_json_get(json, kKeys[i]);
    if (value == NULL) continue;
    if (value->type != ACC_JSON_OBJECT) {
      return node_fail(b, index, "\"%s\" is not an object", kKeys[i]);
    }
    sources->objects[sources->num_objects++] = value;
    sources->num_attrs += value->as.object.count;
  }
  return MX_ACC_OK;
}

/* Value of attribute key in sources, or NULL. */
static const char *source_attr(const attr_sources *sources, const char *key) {
  for (size_t i = 0; i < sources->num_objects; i++) {
    const char *value = string_member(sources->objects[i], key);
    if (value != NULL) return value;
  }
  return NULL;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Keys are unique within one JSON object (json.c checks); across objects a
 * repeated key would be ambiguous. Sorting a copy keeps this O(n log n). */
static int check_unique_keys(builder *b, size_t index, const char *const *keys, size_t count) {
  const char **sorted = malloc(count * sizeof *sorted);
  if (sorted == NULL) return fail_out_of_memory(b);
  memcpy(sorted, keys, count * sizeof *sorted);
  qsort(sorted, count, sizeof *sorted, compare_strings);
  int status = MX_ACC_OK;
  for (size_t i = 1; i < count && status == MX_ACC_OK; i++) {
    if (strcmp(sorted[i - 1], sorted[i]) == 0) {
      status = node_fail(b, index, "attribute \"%s\" is given twice", sorted[i]);
    }
  }
  free(sorted);
  return status;
}

/* Appends the attribute keys, then the values, to the strings pool. */
static int store_attrs(builder *b, size_t index, const attr_sources *sources,
                       acc_node *node) {
  node->num_attrs = sources->num_attrs;
  if (node->num_attrs == 0) return MX_ACC_OK;
  /* num_attrs members exist in memory, so 2 * num_attrs pointers fit. */
  const char **slots = pool_extend(&b->strings, 2 * node->num_attrs);
  if (slots == NULL) return fail_out_of_memory(b);
  size_t n = 0;
  for (size_t i = 0; i < sources->num_objects; i++) {
    const acc_json_value *object = sources->objects[i];
    for (size_t j = 0; j < object->as.object.count; j++, n++) {
      const acc_json_member *member = &object->as.object.members[j];
      if (member->value.type != ACC_JSON_STRING) {
        return node_fail(b, index, "attribute \"%s\" is not a string", member->key);
      }
      slots[n] = member->key;
      slots[node->num_attrs + n] = member->value.as.string.chars;
    }
  }
  return sources->num_objects > 1 ? check_unique_keys(b, index, slots, n) : MX_ACC_OK;
}

static int read_inputs(builder *b, size_t index, const acc_json_value *json,
                       acc_node *node) {
  const acc_json_value *inputs = acc_json_get(json, "inputs");
  if (inputs == NULL || inputs->type != ACC_JSON_ARRAY) {
    return node_fail(b, index, "has no \"inputs\" array");
  }
  node->num_inputs = inputs->as.array.count;
  if (node->num_inputs == 0) return MX_ACC_OK;
  if (node->op == NULL) return node_fail(b, index, "is a variable but has inputs");
  acc_entry *slots = pool_extend(&b->entries, node->num_inputs);
  if (slots == NULL) return fail_out_of_memory(b);
  for (size_t i = 0; i < node->num_inputs; i++) {
    entry_problem problem = decode_entry(b->box, &inputs->as.array.items[i], index, &slots[i]);
    if (problem != ENTRY_OK) {
      return node_fail(b, index, "input %zu %s", i, describe_entry_problem(problem, 0));
    }
  }
  return MX_ACC_OK;
}

/* ------------------------------------------------------------------------
 * Annotations
 * ---------------------------------------------------------------------- */

/* Upper bound on the number of tuples in a list such as "[[1,2],[3]]": the
 * brackets opened one level down. It sizes the scratch buffers, so that a
 * short string never needs a large allocation. */
static size_t count_inner_tuples(const char *text) {
  size_t count = 0;
  int depth = 0;
  for (const char *s = text; *s != '\0'; s++) {
    if (*s == '(' || *s == '[') {
      if (++depth == 2) count++;
    } else if ((*s == ')' || *s == ']') && depth > 0) {
      depth--;
    }
  }
  return count;
}

/* Copies the parsed tuples into the shapes pool, checking each extent. */
static int store_shapes(builder *b, size_t index, const int64_t *values,
                        const int *lengths, int count, const char *text) {
  acc_shape *shapes = pool_extend(&b->shapes, (size_t)count);
  if (shapes == NULL) return fail_out_of_memory(b);
  for (int i = 0; i < count; i++) {
    if (lengths[i] > MX_ACC_MAX_NDIM) {
      return node_fail(b, index, "__out_shapes__ \"%s\": shape %d has more than %d dimensions",
                       text, i, MX_ACC_MAX_NDIM);
    }
    memset(&shapes[i], 0, sizeof shapes[i]);
    shapes[i].ndim = lengths[i];
    for (int d = 0; d < lengths[i]; d++) {
      int64_t extent = values[(size_t)i * kShapeStride + (size_t)d];
      if (extent < 0) {
        return node_fail(b, index, "__out_shapes__ \"%s\": negative extent", text);
      }
      shapes[i].dims[d] = (uint64_t)extent;
    }
  }
  return MX_ACC_OK;
}

/* Decodes "__out_shapes__" into the shapes pool and its length into *count. */
static int decode_shapes(builder *b, size_t index, const char *text, int *count) {
  size_t capacity = count_inner_tuples(text);
  if (capacity > MAX_OUTPUTS) {
    return node_fail(b, index, "__out_shapes__ lists more than %d shapes", MAX_OUTPUTS);
  }
  int64_t *values = NULL;
  int *lengths = NULL;
  if (capacity > 0) {
    /* calloc checks capacity * (row size) for overflow itself. */
    values = calloc(capacity, kShapeStride * sizeof *values);
    lengths = calloc(capacity, sizeof *lengths);
    if (values == NULL || lengths == NULL) {
      free(values);
      free(lengths);
      return fail_out_of_memory(b);
    }
  }
  int status = MX_ACC_OK;
  if (acc_attr_int_tuple_list(text, values, lengths, (int)capacity, kShapeStride, count) != 0) {
    status = node_fail(b, index, "__out_shapes__ \"%s\" is not a list of shapes", text);
  } else if (*count > 0) {
    status = store_shapes(b, index, values, lengths, *count, text);
  }
  free(values);
  free(lengths);
  return status;
}

/* Copies the parsed dtypes into the dtypes pool, checking each value. */
static int store_dtypes(builder *b, size_t index, const int64_t *values, int count,
                        const char *text) {
  int32_t *dtypes = pool_extend(&b->dtypes, (size_t)count);
  if (dtypes == NULL) return fail_out_of_memory(b);
  for (int i = 0; i < count; i++) {
    if (values[i] < 0 || values[i] > MAX_DTYPE) {
      return node_fail(b, index, "__out_dtypes__ \"%s\": %" PRId64 " is not a TensorDType",
                       text, values[i]);
    }
    dtypes[i] = (int32_t)values[i];
  }
  return MX_ACC_OK;
}

/* Decodes "__out_dtypes__", which must list expected_count (>= 1, one per
 * output shape) TensorDType values, into the dtypes pool. */
static int decode_dtypes(builder *b, size_t index, const char *text, int expected_count) {
  int64_t *values = calloc((size_t)expected_count, sizeof *values);
  if (values == NULL) return fail_out_of_memory(b);
  int count = 0;
  int status;
  if (acc_attr_int_tuple(text, values, expected_count, &count) != 0 || count != expected_count) {
    status = node_fail(b, index, "__out_dtypes__ \"%s\" is not a list of %d dtypes, one per shape",
                       text, expected_count);
  } else {
    status = store_dtypes(b, index, values, count, text);
  }
  free(values);
  return status;
}

static int decode_outputs(builder *b, size_t index, const char *shapes,
                          const char *dtypes, acc_node *node) {
  int count = 0;
  int status = decode_shapes(b, index, shapes, &count);
  if (status != MX_ACC_OK) return status;
  if (node->op == NULL && count != 1) {
    return node_fail(b, index, "a variable must have exactly 1 output shape, not %d", count);
  }
  if (node->op != NULL && count < 1) {
    return node_fail(b, index, "an operator must have at least 1 output shape");
  }
  status = decode_dtypes(b, index, dtypes, count);
  if (status != MX_ACC_OK) return status;
  node->num_outputs = count;
  return MX_ACC_OK;
}

static int decode_kind(builder *b, size_t index, const char *kind, acc_node *node) {
  if (kind == NULL) {
    if (!b->require_annotations) return MX_ACC_OK;
    return node_fail(b, index, "variable has no __kind__ annotation");
  }
  if (strcmp(kind, "data") == 0) {
    node->kind = ACC_VAR_DATA;
  } else if (strcmp(kind, "weight") == 0) {
    node->kind = ACC_VAR_WEIGHT;
  } else {
    return node_fail(b, index, "__kind__ \"%s\" is neither \"data\" nor \"weight\"", kind);
  }
  return MX_ACC_OK;
}

/* Annotations are checked whenever present; require_annotations only makes
 * their absence an error. store_attrs has checked that every value is a string. */
static int read_annotations(builder *b, size_t index, const attr_sources *attrs,
                            acc_node *node) {
  const char *shapes = source_attr(attrs, "__out_shapes__");
  const char *dtypes = source_attr(attrs, "__out_dtypes__");
  int status = MX_ACC_OK;
  if (shapes != NULL && dtypes != NULL) {
    status = decode_outputs(b, index, shapes, dtypes, node);
  } else if (shapes != NULL || dtypes != NULL) {
    status = node_fail(b, index, "has %s but not %s",
                       shapes != NULL ? "__out_shapes__" : "__out_dtypes__",
                       shapes != NULL ? "__out_dtypes__" : "__out_shapes__");
  } else if (b->require_annotations) {
    status = node_fail(b, index, "has no __out_shapes__ and __out_dtypes__ annotations");
  }
  if (status != MX_ACC_OK || node->op != NULL) return status;
  return decode_kind(b, index, source_attr(attrs, "__kind__"), node);
}

/* ------------------------------------------------------------------------
 * Graph sections
 * ---------------------------------------------------------------------- */

static int build_node(builder *b, size_t index, const acc_json_value *json) {
  acc_node *node = &b->box->nodes[index];
  attr_sources attrs;
  if (json->type != ACC_JSON_OBJECT) return node_fail(b, index, "is not an object");
  int status = read_identity(b, index, json, node);
  if (status == MX_ACC_OK) status = find_attrs(b, index, json, &attrs);
  if (status == MX_ACC_OK) status = store_attrs(b, index, &attrs, node);
  if (status == MX_ACC_OK) status = read_annotations(b, index, &attrs, node);
  if (status == MX_ACC_OK) status = read_inputs(b, index, json, node);
  return status;
}

static int build_nodes(builder *b, const acc_json_value *nodes) {
  size_t count = nodes->as.array.count;
  if (count > MAX_NODES) return fail(b, "graph has more than %d nodes", MAX_NODES);
  graph_box *box = b->box;
  if (count > 0) {
    box->nodes = calloc(count, sizeof *box->nodes);
    if (box->nodes == NULL) return fail_out_of_memory(b);
  }
  box->graph.num_nodes = count;
  for (size_t i = 0; i < count; i++) {
    int status = build_node(b, i, &nodes->as.array.items[i]);
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

static int build_arg_nodes(builder *b, const acc_json_value *arg_nodes) {
  graph_box *box = b->box;
  size_t count = arg_nodes->as.array.count;
  if (count > 0) {
    box->arg_nodes = calloc(count, sizeof *box->arg_nodes);
    if (box->arg_nodes == NULL) return fail_out_of_memory(b);
  }
  for (size_t i = 0; i < count; i++) {
    long long node;
    if (acc_json_integer(&arg_nodes->as.array.items[i], 0, LLONG_MAX, &node) != 0 ||
        (unsigned long long)node >= box->graph.num_nodes || box->nodes[node].op != NULL) {
      return fail(b, "arg_nodes[%zu] does not name a variable node", i);
    }
    box->arg_nodes[i] = (uint32_t)node;
  }
  box->graph.num_arg_nodes = count;
  return MX_ACC_OK;
}

/* Heads go to the end of the entries pool, after every node's inputs. */
static int build_heads(builder *b, const acc_json_value *heads) {
  size_t count = heads->as.array.count;
  b->box->graph.num_heads = count;
  if (count == 0) return MX_ACC_OK;
  acc_entry *slots = pool_extend(&b->entries, count);
  if (slots == NULL) return fail_out_of_memory(b);
  for (size_t i = 0; i < count; i++) {
    entry_problem problem = decode_entry(b->box, &heads->as.array.items[i],
                                         b->box->graph.num_nodes, &slots[i]);
    if (problem != ENTRY_OK) {
      return fail(b, "heads[%zu] %s", i, describe_entry_problem(problem, 1));
    }
  }
  return MX_ACC_OK;
}

/* Orders by name, then node, so that duplicates sort next to each other and
 * the later node is reported. */
static int compare_variables(const void *a, const void *b) {
  const variable_entry *x = a;
  const variable_entry *y = b;
  int order = strcmp(x->name, y->name);
  if (order != 0) return order;
  return x->node < y->node ? -1 : x->node > y->node;
}

static int index_variables(builder *b) {
  graph_box *box = b->box;
  size_t count = 0;
  for (size_t i = 0; i < box->graph.num_nodes; i++) count += box->nodes[i].op == NULL;
  if (count == 0) return MX_ACC_OK;
  box->variables = calloc(count, sizeof *box->variables);
  if (box->variables == NULL) return fail_out_of_memory(b);
  for (size_t i = 0; i < box->graph.num_nodes; i++) {
    if (box->nodes[i].op != NULL) continue;
    box->variables[box->num_variables].name = box->nodes[i].name;
    box->variables[box->num_variables++].node = (uint32_t)i;
  }
  qsort(box->variables, count, sizeof *box->variables, compare_variables);
  for (size_t i = 1; i < count; i++) {
    if (strcmp(box->variables[i - 1].name, box->variables[i].name) == 0) {
      return node_fail(b, box->variables[i].node, "variable name is also used by node %" PRIu32,
                       box->variables[i - 1].node);
    }
  }
  return MX_ACC_OK;
}

/* Hands the pools to the box and points every node into them; see the
 * design note at the top for why this waits until the end. */
static void link_nodes(builder *b) {
  graph_box *box = b->box;
  box->entries = b->entries.items;
  box->strings = b->strings.items;
  box->shapes = b->shapes.items;
  box->dtypes = b->dtypes.items;
  b->entries.items = b->strings.items = b->shapes.items = b->dtypes.items = NULL;
  size_t input = 0, string = 0, output = 0;
  for (size_t i = 0; i < box->graph.num_nodes; i++) {
    acc_node *node = &box->nodes[i];
    size_t outputs = (size_t)node->num_outputs;
    node->inputs = node->num_inputs > 0 ? box->entries + input : NULL;
    node->attr_keys = node->num_attrs > 0 ? box->strings + string : NULL;
    node->attr_vals = node->num_attrs > 0 ? box->strings + string + node->num_attrs : NULL;
    node->out_shapes = outputs > 0 ? box->shapes + output : NULL;
    node->out_dtypes = outputs > 0 ? box->dtypes + output : NULL;
    input += node->num_inputs;
    string += 2 * node->num_attrs;
    output += outputs;
  }
  box->graph.nodes = box->nodes;
  box->graph.heads = box->graph.num_heads > 0 ? box->entries + input : NULL;
  box->graph.arg_nodes = box->arg_nodes;
  box->graph.storage = box;
}

static const acc_json_value *array_member(const acc_json_value *object, const char *key) {
  const acc_json_value *value = acc_json_get(object, key);
  return value != NULL && value->type == ACC_JSON_ARRAY ? value : NULL;
}

/* "attrs" and "node_row_ptr" at the top level are ignored: the host's
 * annotations live on the nodes. */
static int build_graph(builder *b, const acc_json_value *root) {
  if (root->type != ACC_JSON_OBJECT) return fail(b, "graph JSON is not an object");
  const acc_json_value *nodes = array_member(root, "nodes");
  const acc_json_value *arg_nodes = array_member(root, "arg_nodes");
  const acc_json_value *heads = array_member(root, "heads");
  if (nodes == NULL) return fail(b, "graph has no \"nodes\" array");
  if (arg_nodes == NULL) return fail(b, "graph has no \"arg_nodes\" array");
  if (heads == NULL) return fail(b, "graph has no \"heads\" array");
  int status = build_nodes(b, nodes);
  if (status == MX_ACC_OK) status = build_arg_nodes(b, arg_nodes);
  if (status == MX_ACC_OK) status = build_heads(b, heads);
  if (status == MX_ACC_OK) status = index_variables(b);
  if (status == MX_ACC_OK) link_nodes(b);
  return status;
}

/* ------------------------------------------------------------------------
 * Public functions
 * ---------------------------------------------------------------------- */

static void free_box(graph_box *box) {
  if (box == NULL) return;
  acc_json_free(box->doc);
  free(box->nodes);
  free(box->entries);
  free(box->strings);
  free(box->shapes);
  free(box->dtypes);
  free(box->arg_nodes);
  free(box->variables);
  free(box);
}

static int parse_document(builder *b, const char *json) {
  char message[256];
  if (acc_json_parse(json, strlen(json), &b->box->doc, message, sizeof message) == 0) {
    return MX_ACC_OK;
  }
  fail(b, "graph JSON: %s", message);
  /* json.h has no separate code for memory exhaustion, only this wording. */
  return strstr(message, "out of memory") != NULL ? MX_ACC_ERR_OUT_OF_MEMORY
                                                  : MX_ACC_ERR_INVALID_ARG;
}

int acc_graph_parse(const char *json, int require_annotations, acc_graph **graph,
                    char *error, size_t error_size) {
  builder b = {
      .box = NULL, .require_annotations = require_annotations,
      .entries = {NULL, 0, 0, sizeof(acc_entry)},
      .strings = {NULL, 0, 0, sizeof(const char *)},
      .shapes = {NULL, 0, 0, sizeof(acc_shape)},
      .dtypes = {NULL, 0, 0, sizeof(int32_t)},
      .error = error, .error_size = error_size,
  };
  if (error != NULL && error_size > 0) error[0] = '\0';
  if (graph == NULL) return fail(&b, "no graph pointer given");
  *graph = NULL;
  if (json == NULL) return fail(&b, "no graph JSON given");
  b.box = calloc(1, sizeof *b.box);
  if (b.box == NULL) return fail_out_of_memory(&b);
  int status = parse_document(&b, json);
  if (status == MX_ACC_OK) status = build_graph(&b, acc_json_root(b.box->doc));
  free(b.entries.items);
  free(b.strings.items);
  free(b.shapes.items);
  free(b.dtypes.items);
  if (status != MX_ACC_OK) {
    free_box(b.box);
    return status;
  }
  *graph = &b.box->graph;
  return MX_ACC_OK;
}

void acc_graph_free(acc_graph *graph) {
  if (graph != NULL) free_box(graph->storage);
}

const char *acc_node_attr(const acc_node *node, const char *key) {
  if (node == NULL || key == NULL) return NULL;
  for (size_t i = 0; i < node->num_attrs; i++) {
    if (strcmp(node->attr_keys[i], key) == 0) return node->attr_vals[i];
  }
  return NULL;
}

static int compare_name_to_variable(const void *name, const void *entry) {
  return strcmp(name, ((const variable_entry *)entry)->name);
}

long acc_graph_find_variable(const acc_graph *graph, const char *name) {
  if (graph == NULL || name == NULL) return -1;
  const graph_box *box = graph->storage;
  if (box == NULL || box->num_variables == 0) return -1;
  const variable_entry *found = bsearch(name, box->variables, box->num_variables,
                                        sizeof *box->variables, compare_name_to_variable);
  return found == NULL ? -1 : (long)found->node;
}

/* A node with one output, or whose count is not annotated but whose head
 * names output 0, gets the plain "_output" suffix (section 8). */
int acc_graph_output_name(const acc_graph *graph, acc_entry head, char *buffer,
                          size_t buffer_size) {
  if (graph == NULL || buffer == NULL || head.node >= graph->num_nodes) return -1;
  const acc_node *node = &graph->nodes[head.node];
  if (node->num_outputs > 0 && head.index >= (uint32_t)node->num_outputs) return -1;
  int written;
  if (node->num_outputs > 1 || head.index > 0) {
    written = snprintf(buffer, buffer_size, "%s_output%" PRIu32, node->name, head.index);
  } else {
    written = snprintf(buffer, buffer_size, "%s_output", node->name);
  }
  return written >= 0 && (size_t)written < buffer_size ? 0 : -1;
}
