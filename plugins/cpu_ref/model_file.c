/*
 * Compiled-model files: a loaded model written to a file ("export_model")
 * and read back under a new model id ("import_model"), so that the host can
 * cache compiled models between processes (mxnet_acc.h section 9).
 *
 * What the file holds. cpu_ref has no real compiler: loadModel() parses and
 * checks the annotated graph, resolves every operator node against the op
 * table, lays out buffers and copies the weights. Its "compiled form" is
 * therefore the graph JSON exactly as loadModel() received it plus the
 * weights as the model holds them at export time (the values given to
 * loadModel(), or the latest ones passed to infer()). Import checks the file
 * completely, then builds the model with cr_model_create() from that JSON and
 * host tensors pointing into the file's bytes: the graph is parsed and the
 * operators resolved again (cheap for cpu_ref), but the checks loadModel()
 * makes of the host's arguments (names and descriptors) are replaced by the
 * checks of the file below. A vendor plugin would store its compiled binary
 * (kernels, schedules, packed weights) in place of the JSON and weight
 * records and keep the envelope: magic, versions, every length checked
 * against the bytes that are really there, a checksum.
 *
 * Format, version 1. Integers are little-endian with the widths shown;
 * offsets are in bytes; there is no padding.
 *
 *   offset   size       field
 *   0        8          magic 89 43 52 4D 0D 0A 1A 0A ("\x89CRM\r\n\x1a\n":
 *                       a non-ASCII first byte and a CR LF, so that text
 *                       files and line-ending conversions are caught)
 *   8        u32        format version, 1
 *   12       u32        MX_ACC_API_VERSION of the writer (the reader
 *                       requires the same MAJOR)
 *   16       u32        flags, 0 (none is defined; a set bit is refused)
 *   20       u64        size of the whole file, checksum included
 *   28       u64        J, length of the graph JSON
 *   36       J          the graph JSON, UTF-8, no terminating NUL
 *            u32        W, number of weights: the graph's variables with
 *                       "__kind__" "weight"
 *   then W weight records, in the order of those variables in "nodes":
 *            u32        N, length of the name
 *            N          the variable's name, no terminating NUL
 *            u32        dtype, a TensorDType value
 *            u32        ndim, 0 .. MX_ACC_MAX_NDIM
 *            8 * ndim   the extents, u64 each
 *            u64        B, byte length: dtype size * product of the extents
 *            B          the values: dense, row-major, little-endian
 *                       elements, the layout cpu_ref keeps after loadModel()
 *   size-8   u64        checksum: FNV-1a 64 of bytes 0 .. size-9
 *
 * Name, dtype and extents must equal the annotations of the graph's
 * variable; they are in the file so that a reader can check a record on its
 * own. The checksum detects damage (truncation, flipped bits, another file),
 * not tampering, since anyone can recompute it. Safety rests on the reader,
 * which checks every field against the bytes left before using it: a
 * hostile file makes import fail with MX_ACC_ERR_INVALID_ARG, or, if it is
 * well-formed, loads a model that loadModel() would have accepted from the
 * same graph and weights (and allocates what loadModel() would); it can
 * neither make the reader read out of bounds nor make it allocate more than
 * the file's real size, itself at most CR_MODEL_FILE_MAX, before the whole
 * file has been checked.
 *
 * Byte order: the element bytes are copied as they are in memory, so
 * export and import refuse to run on a big-endian host (cpu_ref does not
 * support one) rather than write or read byte-swapped values.
 */
#include "model_file.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "tensor.h"

static const unsigned char kMagic[8] = {0x89, 'C', 'R', 'M', '\r', '\n', 0x1a, '\n'};

enum {
  kFormatVersion = 1,
  /* Offsets of the fixed header's fields. */
  kVersionOffset = 8,
  kApiVersionOffset = 12,
  kFlagsOffset = 16,
  kSizeOffset = 20,
  kHeaderSize = 28,
  kJsonOffset = kHeaderSize + 8,
  kChecksumSize = 8,
  /* Header, JSON length, weight count and checksum of an empty model. */
  kMinFileSize = kHeaderSize + 8 + 4 + kChecksumSize,
  kMessageSize = 512
};

/* FNV-1a, 64-bit: hash = (hash XOR byte) * prime for every byte. */
#define FNV_OFFSET_BASIS UINT64_C(0xcbf29ce484222325)
#define FNV_PRIME UINT64_C(0x100000001b3)

static uint64_t fnv1a(uint64_t hash, const unsigned char *bytes, size_t count) {
  for (size_t i = 0; i < count; ++i) hash = (hash ^ bytes[i]) * FNV_PRIME;
  return hash;
}

static void put_le(unsigned char *out, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out[i] = (unsigned char)(value >> (8 * i));
}

static uint64_t get_le(const unsigned char *in, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = (value << 8) | in[i];
  return value;
}

static int host_is_little_endian(void) {
  const uint16_t probe = 1;
  unsigned char first;
  memcpy(&first, &probe, 1);
  return first == 1;
}

/* Bytes of the values of weight variable node; fails if they would not fit
 * a size_t (never for a loaded model, whose buffers were allocated). */
static int weight_bytes(const acc_node *node, size_t *bytes) {
  return acc_shape_bytes(&node->out_shapes[0], acc_dtype_size(node->out_dtypes[0]), node->name,
                         bytes);
}

/* ---- export -------------------------------------------------------------- */

/* Adds more to *total; 0 if the sum would pass CR_MODEL_FILE_MAX. */
static int grow(uint64_t *total, uint64_t more) {
  if (more > CR_MODEL_FILE_MAX || *total > CR_MODEL_FILE_MAX - more) return 0;
  *total += more;
  return 1;
}

/* The size of model's file, computed before writing so that the header can
 * hold it; also checks that every length fits its field. */
static int planned_size(const cr_model *model, uint64_t *size) {
  const acc_graph *graph = model->graph;
  uint64_t total = kHeaderSize;
  int fits = grow(&total, 8) && grow(&total, strlen(model->json)) && grow(&total, 4);
  size_t count = 0;
  for (size_t i = 0; fits && i < graph->num_nodes; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->kind != ACC_VAR_WEIGHT) continue;
    size_t bytes, name_length = strlen(node->name);
    int status = weight_bytes(node, &bytes);
    if (status != MX_ACC_OK) return status;
    count += 1;
    fits = name_length <= UINT32_MAX && grow(&total, 4 + (uint64_t)name_length) &&
           grow(&total, 4 + 4 + 8 * (uint64_t)node->out_shapes[0].ndim + 8) &&
           grow(&total, bytes);
  }
  fits = fits && count <= UINT32_MAX && grow(&total, kChecksumSize);
  if (!fits) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "export_model: model \"%s\" needs a file larger "
                    "than CR_MODEL_FILE_MAX (%" PRIu64 " bytes)", model->id, CR_MODEL_FILE_MAX);
  }
  *size = total;
  return MX_ACC_OK;
}

/* Writes to a file, hashing what it writes; after the first failure it
 * writes nothing more and keeps that failure's errno. */
typedef struct writer {
  FILE *file;
  uint64_t hash;
  uint64_t written;
  int failed;
  int error; /* errno of the failure, 0 if the library set none */
} writer;

static void write_bytes(writer *w, const void *data, size_t count) {
  if (w->failed || count == 0) return;
  errno = 0;
  if (fwrite(data, 1, count, w->file) != count) {
    w->failed = 1;
    w->error = errno;
    return;
  }
  w->hash = fnv1a(w->hash, data, count);
  w->written += count;
}

static void write_u32(writer *w, uint32_t value) {
  unsigned char bytes[4];
  put_le(bytes, value, 4);
  write_bytes(w, bytes, sizeof bytes);
}

static void write_u64(writer *w, uint64_t value) {
  unsigned char bytes[8];
  put_le(bytes, value, 8);
  write_bytes(w, bytes, sizeof bytes);
}

static void write_weight(writer *w, const cr_model *model, size_t index) {
  const acc_node *node = &model->graph->nodes[index];
  const acc_shape *shape = &node->out_shapes[0];
  size_t name_length = strlen(node->name), bytes = 0;
  weight_bytes(node, &bytes); /* cannot fail: planned_size() succeeded */
  write_u32(w, (uint32_t)name_length);
  write_bytes(w, node->name, name_length);
  write_u32(w, (uint32_t)node->out_dtypes[0]);
  write_u32(w, (uint32_t)shape->ndim);
  for (int d = 0; d < shape->ndim; ++d) write_u64(w, shape->dims[d]);
  write_u64(w, bytes);
  write_bytes(w, model->entries[model->entry_of_node[index]].data, bytes);
}

int cr_model_export(const cr_model *model, const char *path, uint64_t *bytes) {
  if (!host_is_little_endian()) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "export_model: not supported on a big-endian host");
  }
  const acc_graph *graph = model->graph;
  uint64_t size = 0;
  int status = planned_size(model, &size);
  if (status != MX_ACC_OK) return status;
  uint32_t num_weights = 0; /* fits: planned_size() checked it */
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    num_weights += graph->nodes[i].kind == ACC_VAR_WEIGHT;
  }

  FILE *file = fopen(path, "wb");
  if (file == NULL) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "export_model: cannot open \"%s\": %s", path,
                    strerror(errno));
  }
  writer w = {file, FNV_OFFSET_BASIS, 0, 0, 0};
  write_bytes(&w, kMagic, sizeof kMagic);
  write_u32(&w, kFormatVersion);
  write_u32(&w, MX_ACC_API_VERSION);
  write_u32(&w, 0); /* flags */
  write_u64(&w, size);
  size_t json_length = strlen(model->json);
  write_u64(&w, json_length);
  write_bytes(&w, model->json, json_length);
  write_u32(&w, num_weights);
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    if (graph->nodes[i].kind == ACC_VAR_WEIGHT) write_weight(&w, model, i);
  }
  write_u64(&w, w.hash); /* the checksum of everything before it */
  errno = 0;
  if (fclose(file) != 0 && !w.failed) {
    w.failed = 1;
    w.error = errno;
  }
  if (w.failed) {
    remove(path);
    return acc_fail(MX_ACC_ERR_INTERNAL, "export_model: cannot write \"%s\": %s", path,
                    w.error != 0 ? strerror(w.error) : "write failed");
  }
  if (w.written != size) { /* planned_size() and the writes above disagree: a bug */
    remove(path);
    return acc_fail(MX_ACC_ERR_INTERNAL, "export_model: wrote %" PRIu64 " bytes to \"%s\", "
                    "planned %" PRIu64, w.written, path, size);
  }
  *bytes = size;
  return MX_ACC_OK;
}

/* ---- import -------------------------------------------------------------- */

/* The file's bytes before the checksum, read field by field. Every take_*
 * checks the bytes left first and remembers where its field started, for
 * the messages of refuse(). */
typedef struct reader {
  const unsigned char *data;
  size_t size;
  size_t offset;
  size_t field; /* offset of the field taken last */
  const char *path;
} reader;

/* Records why the file is refused, naming the file and the offset. */
static int refuse(const char *path, size_t offset, const char *fmt, ...) ACC_PRINTF_LIKE(3, 4);

static int refuse(const char *path, size_t offset, const char *fmt, ...) {
  char reason[kMessageSize];
  va_list args;
  va_start(args, fmt);
  vsnprintf(reason, sizeof reason, fmt, args);
  va_end(args);
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "import_model: \"%s\" is not a valid cpu_ref model "
                  "file: offset %zu: %s", path, offset, reason);
}

static int take(reader *r, uint64_t count, const char *field, const unsigned char **bytes) {
  size_t left = r->size - r->offset;
  if (count > left) {
    return refuse(r->path, r->offset, "%s needs %" PRIu64 " bytes, %zu are left", field, count,
                  left);
  }
  r->field = r->offset;
  *bytes = r->data + r->offset;
  r->offset += (size_t)count;
  return MX_ACC_OK;
}

static int take_u32(reader *r, const char *field, uint32_t *value) {
  const unsigned char *bytes = NULL;
  int status = take(r, 4, field, &bytes);
  if (status == MX_ACC_OK) *value = (uint32_t)get_le(bytes, 4);
  return status;
}

static int take_u64(reader *r, const char *field, uint64_t *value) {
  const unsigned char *bytes = NULL;
  int status = take(r, 8, field, &bytes);
  if (status == MX_ACC_OK) *value = get_le(bytes, 8);
  return status;
}

/* Checks the fixed header against the file's real size. */
static int check_header(const unsigned char *header, uint64_t file_size, const char *path) {
  if (memcmp(header, kMagic, sizeof kMagic) != 0) {
    return refuse(path, 0, "the magic bytes are not those of a cpu_ref model file");
  }
  uint32_t version = (uint32_t)get_le(header + kVersionOffset, 4);
  if (version != kFormatVersion) {
    return refuse(path, kVersionOffset, "format version %" PRIu32 "; this cpu_ref reads "
                  "version %d", version, kFormatVersion);
  }
  uint32_t api_version = (uint32_t)get_le(header + kApiVersionOffset, 4);
  if (api_version / 100 != MX_ACC_API_VERSION_MAJOR) {
    return refuse(path, kApiVersionOffset, "written for ABI %" PRIu32 ".%" PRIu32 "; this "
                  "cpu_ref implements ABI %d.%d", api_version / 100, api_version % 100,
                  MX_ACC_API_VERSION_MAJOR, MX_ACC_API_VERSION_MINOR);
  }
  uint32_t flags = (uint32_t)get_le(header + kFlagsOffset, 4);
  if (flags != 0) return refuse(path, kFlagsOffset, "unknown flags 0x%" PRIx32, flags);
  uint64_t claimed = get_le(header + kSizeOffset, 8);
  if (claimed != file_size) {
    return refuse(path, kSizeOffset, "the header gives a file size of %" PRIu64 " bytes, the "
                  "file has %" PRIu64 " (truncated or extended)", claimed, file_size);
  }
  return MX_ACC_OK;
}

static int io_error(const char *what, const char *path, int error) {
  return acc_fail(MX_ACC_ERR_INTERNAL, "import_model: cannot %s \"%s\": %s", what, path,
                  error != 0 ? strerror(error) : "unexpected end of file");
}

/* Reads the whole file into *contents (malloc'ed, *size bytes), checking its
 * size against the limit and its header before allocating. */
static int read_file(FILE *file, const char *path, unsigned char **contents, size_t *size) {
  errno = 0;
  if (fseek(file, 0, SEEK_END) != 0) return io_error("seek in", path, errno);
  long end = ftell(file);
  if (end < 0) return io_error("tell the size of", path, errno);
  if (fseek(file, 0, SEEK_SET) != 0) return io_error("seek in", path, errno);
  uint64_t file_size = (uint64_t)end;
  if (file_size < kMinFileSize) {
    return refuse(path, 0, "the file has %" PRIu64 " bytes, fewer than the %d of the smallest "
                  "model file", file_size, kMinFileSize);
  }
  if (file_size > CR_MODEL_FILE_MAX) {
    return refuse(path, 0, "the file has %" PRIu64 " bytes, more than CR_MODEL_FILE_MAX (%"
                  PRIu64 ")", file_size, CR_MODEL_FILE_MAX);
  }
  unsigned char header[kHeaderSize];
  errno = 0;
  if (fread(header, 1, sizeof header, file) != sizeof header) {
    return io_error("read", path, ferror(file) ? errno : 0);
  }
  int status = check_header(header, file_size, path);
  if (status != MX_ACC_OK) return status;

  unsigned char *bytes = malloc((size_t)file_size);
  if (bytes == NULL) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: cannot allocate %" PRIu64
                    " bytes for \"%s\"", file_size, path);
  }
  memcpy(bytes, header, sizeof header);
  size_t rest = (size_t)file_size - sizeof header;
  errno = 0;
  if (fread(bytes + sizeof header, 1, rest, file) != rest) {
    free(bytes);
    /* A short read without an error: the file shrank since its size was
     * taken. */
    return ferror(file) ? io_error("read", path, errno)
                        : refuse(path, 0, "the file shrank while it was read");
  }
  *contents = bytes;
  *size = (size_t)file_size;
  return MX_ACC_OK;
}

/* Reads the record of weight number index, which must describe the graph's
 * weight variable node, and points tensor at its values. */
static int read_weight(reader *r, size_t index, const acc_node *node, MXTensor *tensor) {
  const acc_shape *shape = &node->out_shapes[0];
  const unsigned char *name = NULL, *values = NULL;
  uint32_t name_length = 0, dtype = 0, ndim = 0;
  uint64_t extent = 0, byte_length = 0;
  size_t expected_bytes = 0;
  int status = take_u32(r, "weight name length", &name_length);
  if (status == MX_ACC_OK) status = take(r, name_length, "weight name", &name);
  if (status != MX_ACC_OK) return status;
  if (name_length != strlen(node->name) || memcmp(name, node->name, name_length) != 0) {
    return refuse(r->path, r->field, "weight %zu is \"%.*s\"; the graph's weight %zu is \"%s\"",
                  index, (int)(name_length < 64 ? name_length : 64), (const char *)name, index,
                  node->name);
  }
  status = take_u32(r, "weight dtype", &dtype);
  if (status != MX_ACC_OK) return status;
  if (dtype != (uint32_t)node->out_dtypes[0]) {
    return refuse(r->path, r->field, "weight \"%s\": dtype %" PRIu32 ", the graph says %s",
                  node->name, dtype, acc_dtype_name(node->out_dtypes[0]));
  }
  status = take_u32(r, "weight ndim", &ndim);
  if (status != MX_ACC_OK) return status;
  if (ndim > MX_ACC_MAX_NDIM || ndim != (uint32_t)shape->ndim) {
    return refuse(r->path, r->field, "weight \"%s\": %" PRIu32 " dimensions, the graph says %d",
                  node->name, ndim, shape->ndim);
  }
  for (uint32_t d = 0; d < ndim; ++d) {
    status = take_u64(r, "weight extent", &extent);
    if (status != MX_ACC_OK) return status;
    if (extent != shape->dims[d]) {
      return refuse(r->path, r->field, "weight \"%s\": extent %" PRIu32 " is %" PRIu64
                    ", the graph says %" PRIu64, node->name, d, extent, shape->dims[d]);
    }
  }
  status = take_u64(r, "weight byte length", &byte_length);
  if (status != MX_ACC_OK) return status;
  if (weight_bytes(node, &expected_bytes) != MX_ACC_OK) { /* the extents overflow a size_t */
    char reason[kMessageSize];
    snprintf(reason, sizeof reason, "%s", acc_last_error());
    return refuse(r->path, r->field, "weight \"%s\": %s", node->name, reason);
  }
  if (byte_length != expected_bytes) {
    return refuse(r->path, r->field, "weight \"%s\": %" PRIu64 " bytes, its shape and dtype "
                  "take %zu", node->name, byte_length, expected_bytes);
  }
  status = take(r, byte_length, "weight values", &values);
  if (status != MX_ACC_OK) return status;
  /* cr_model_create() only reads the values (it copies them). */
  *tensor = (MXTensor){(void *)values, shape->dims, ndim, node->out_dtypes[0], 0, NULL,
                       MX_ACC_HOST_DEVICE};
  return MX_ACC_OK;
}

/* Everything import parsed from the file, freed together. */
typedef struct parsed_file {
  char *json;
  acc_graph *graph;
  size_t num_weights;
  const char **names;  /* the graph's weight variables, in node order */
  MXTensor *tensors;   /* their values, pointing into the file's bytes */
} parsed_file;

static void parsed_file_free(parsed_file *parsed) {
  free(parsed->tensors);
  free(parsed->names);
  acc_graph_free(parsed->graph);
  free(parsed->json);
}

/* Checks the body of the file (its checksum is already checked) and
 * collects what cr_model_create() needs. */
static int parse_body(reader *r, parsed_file *parsed) {
  const unsigned char *json = NULL;
  uint64_t json_length = 0;
  int status = take_u64(r, "graph JSON length", &json_length);
  if (status == MX_ACC_OK) status = take(r, json_length, "graph JSON", &json);
  if (status != MX_ACC_OK) return status;
  size_t json_offset = r->field;
  if (memchr(json, '\0', (size_t)json_length) != NULL) {
    return refuse(r->path, json_offset, "the graph JSON holds a NUL byte");
  }
  parsed->json = malloc((size_t)json_length + 1);
  if (parsed->json == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: graph JSON");
  memcpy(parsed->json, json, (size_t)json_length);
  parsed->json[json_length] = '\0';
  char error[kMessageSize];
  status = acc_graph_parse(parsed->json, 1, &parsed->graph, error, sizeof error);
  if (status == MX_ACC_ERR_OUT_OF_MEMORY) return acc_fail(status, "import_model: graph JSON");
  if (status != MX_ACC_OK) return refuse(r->path, json_offset, "graph JSON: %s", error);

  const acc_graph *graph = parsed->graph;
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    parsed->num_weights += graph->nodes[i].kind == ACC_VAR_WEIGHT;
  }
  uint32_t count = 0;
  status = take_u32(r, "weight count", &count);
  if (status != MX_ACC_OK) return status;
  if (count != parsed->num_weights || count > INT_MAX) { /* cr_model_create takes an int */
    return refuse(r->path, r->field, "%" PRIu32 " weights; the graph has %zu weight variables",
                  count, parsed->num_weights);
  }
  size_t slots = parsed->num_weights ? parsed->num_weights : 1;
  parsed->names = calloc(slots, sizeof *parsed->names);
  parsed->tensors = calloc(slots, sizeof *parsed->tensors);
  if (parsed->names == NULL || parsed->tensors == NULL) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: weight tables");
  }
  size_t k = 0;
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->kind != ACC_VAR_WEIGHT) continue;
    parsed->names[k] = node->name;
    status = read_weight(r, k, node, &parsed->tensors[k]);
    k += 1;
  }
  if (status == MX_ACC_OK && r->offset != r->size) {
    status = refuse(r->path, r->offset, "%zu bytes follow the last weight",
                    r->size - r->offset);
  }
  return status;
}

int cr_model_import(const char *model_id, const char *path, int dev_id, cr_model **model) {
  if (!host_is_little_endian()) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "import_model: not supported on a big-endian host");
  }
  FILE *file = fopen(path, "rb");
  if (file == NULL) return io_error("open", path, errno);
  unsigned char *bytes = NULL;
  size_t size = 0;
  int status = read_file(file, path, &bytes, &size);
  fclose(file); /* opened for reading only: nothing to lose if it fails */
  if (status != MX_ACC_OK) return status;

  size_t hashed = size - kChecksumSize;
  uint64_t stored = get_le(bytes + hashed, 8), computed = fnv1a(FNV_OFFSET_BASIS, bytes, hashed);
  if (stored != computed) {
    status = refuse(path, hashed, "checksum 0x%016" PRIx64 " does not match the contents "
                    "(0x%016" PRIx64 ")", stored, computed);
  }
  parsed_file parsed = {0};
  reader r = {bytes, hashed, kHeaderSize, kHeaderSize, path};
  if (status == MX_ACC_OK) status = parse_body(&r, &parsed);
  if (status == MX_ACC_OK) {
    status = cr_model_create(model_id, parsed.json, parsed.names, parsed.tensors,
                             (int)parsed.num_weights, dev_id, model);
    if (status != MX_ACC_OK && status != MX_ACC_ERR_OUT_OF_MEMORY) {
      /* E.g. an operator this cpu_ref does not run: still a file it cannot
       * use, whatever loadModel() would have answered. */
      char reason[kMessageSize];
      snprintf(reason, sizeof reason, "%s", acc_last_error());
      status = refuse(path, kJsonOffset, "the graph cannot be loaded: %s", reason);
    }
  }
  parsed_file_free(&parsed);
  free(bytes);
  return status;
}
