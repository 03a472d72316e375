/*
 * The envelope of the compiled-model files plugins write for the configure()
 * keys "export_model" and "import_model" (mxnet_acc.h section 9), shared by
 * cpu_ref (plugins/cpu_ref/model/model_file.c) and mlu_sim
 * (plugins/mlu_sim/model_file.c). Each plugin keeps its own format (magic,
 * version, body); what is the same is here:
 *
 *   offset   size   field
 *   0        8      the plugin's magic
 *   8        u32    the plugin's format version
 *   12       u32    MX_ACC_API_VERSION of the writer (the reader requires
 *                   the same MAJOR)
 *   16       u32    flags, 0 (a set bit is refused)
 *   20       u64    size of the whole file, checksum included
 *   28       ...    the body, the plugin's own
 *   size-8   u64    checksum of bytes 0 .. size-9: FNV-1a 64 or XXH64, as
 *                   the plugin's format says (acc_bin_checksum)
 *
 * Integers are little-endian, no padding. Both formats' bodies start with
 * the same graph section (acc_bin_put_graph / acc_bin_read_graph): the graph
 * JSON and the current values of its weight variables.
 *
 * Writing: an acc_bin_out collects the bytes in memory (the size field is
 * filled in by acc_bin_put_checksum) or streams them to a file (the size must
 * be known when the header is written). Reading: acc_bin_load reads the
 * whole file, checking its size against the format's limit and its header
 * before allocating, then its checksum; an acc_bin_reader then takes the
 * body field by field, checking every length against the bytes really left.
 *
 * Messages: failures are recorded with acc_fail() (status.h) and start with
 * "export_model: " or "import_model: "; a file that is not valid is
 * MX_ACC_ERR_INVALID_ARG with "import_model: \"PATH\" is not a valid KIND:
 * offset N: REASON".
 *
 * Byte order: values are copied as they lie in memory, so callers refuse to
 * run on a big-endian host (acc_bin_host_is_little_endian).
 */
#ifndef ACC_COMMON_BINFILE_H_
#define ACC_COMMON_BINFILE_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "graph.h"
#include "mxnet_acc.h"
#include "status.h"

/* Offsets of the header's fields, and the sizes of header and checksum. */
enum {
  ACC_BIN_VERSION_OFFSET = 8,
  ACC_BIN_API_VERSION_OFFSET = 12,
  ACC_BIN_FLAGS_OFFSET = 16,
  ACC_BIN_SIZE_OFFSET = 20,
  ACC_BIN_HEADER_SIZE = 28,
  ACC_BIN_CHECKSUM_SIZE = 8
};

/* Header flag: every weight record's values start at a multiple of
 * ACC_BIN_ALIGN bytes from the start of the file, the bytes between the
 * record's byte length and its values zero (a reader can then use the
 * values in place). Only formats read with acc_bin_load_aligned accept it. */
#define ACC_BIN_FLAG_ALIGNED 1u
enum { ACC_BIN_ALIGN = 64 };

/* What tells one plugin's files from another's; all strings are static,
 * borrowed. */
typedef struct acc_bin_format {
  const unsigned char *magic; /* 8 bytes */
  uint32_t version;           /* the format version written and read */
  const char *plugin;         /* "cpu_ref": "this cpu_ref reads version 1" */
  const char *kind;           /* "cpu_ref model file": "... is not a valid KIND" */
  const char *a_kind;         /* "a cpu_ref model file": "the magic bytes are not those
                               * of A_KIND" */
  const char *smallest;       /* "model file": "fewer than the N of the smallest SMALLEST" */
  uint64_t min_size;          /* the smallest valid file, header and checksum included */
  uint64_t max_size;          /* the largest file written or read, at most SIZE_MAX */
  const char *max_name;       /* max_size's name in messages: "CR_MODEL_FILE_MAX" */
} acc_bin_format;

/* FNV-1a, 64-bit: hash = (hash XOR byte) * prime for every byte, starting
 * from ACC_FNV1A_BASIS. One multiplication per byte, each waiting for the
 * last: about 1 GB/s. */
#define ACC_FNV1A_BASIS UINT64_C(0xcbf29ce484222325)
uint64_t acc_fnv1a(uint64_t hash, const void *bytes, size_t count);

/* XXH64 (Yann Collet's xxHash, 64-bit, as its specification
 * doc/xxhash_spec.md defines it), streamed: four independent lanes take
 * 8-byte little-endian words in turn, so it runs at memory speed (about 10
 * GB/s here), 10 to 20 times faster than FNV-1a. Every round is a bijection
 * of its lane for a fixed word and of the word for a fixed lane, so a change
 * confined to one 8-byte word of a 32-byte stripe always changes that lane.
 * Usage: acc_xxh64_init(&state, seed), acc_xxh64_update() any number of
 * times, acc_xxh64_digest() (which leaves the state unchanged). */
typedef struct acc_xxh64_state {
  uint64_t lanes[4];
  uint64_t total;           /* bytes given so far */
  unsigned char stripe[32]; /* the bytes of a stripe begun, not yet taken */
  size_t buffered;          /* how many, 0 .. 31 */
  uint64_t seed;
} acc_xxh64_state;

void acc_xxh64_init(acc_xxh64_state *state, uint64_t seed);
void acc_xxh64_update(acc_xxh64_state *state, const void *bytes, size_t count);
uint64_t acc_xxh64_digest(const acc_xxh64_state *state);
/* XXH64 of count bytes in one call. */
uint64_t acc_xxh64(const void *bytes, size_t count, uint64_t seed);

/* The checksum algorithms of the envelope's last 8 bytes. A format picks
 * one for good: changing it changes the format (its version). */
typedef enum acc_bin_checksum {
  ACC_BIN_FNV1A = 0, /* cpu_ref's files before version 2, mlu_sim's before version 3 */
  ACC_BIN_XXH64 = 1  /* XXH64, seed 0: cpu_ref's files since version 2, mlu_sim's since 3 */
} acc_bin_checksum;

/* value's low width bytes (1 .. 8) to out, least significant first. */
void acc_bin_put_le(unsigned char *out, uint64_t value, int width);

/* The little-endian integer of width bytes (1 .. 8) at in. */
uint64_t acc_bin_get_le(const unsigned char *in, int width);

/* 1 on a little-endian host. */
int acc_bin_host_is_little_endian(void);

/* ---- writing -------------------------------------------------------------- */

/* A file being written. After the first failure (status != MX_ACC_OK, its
 * message recorded) every put does nothing. */
typedef struct acc_bin_out {
  FILE *file;             /* file mode: the open file, owned until acc_bin_out_close */
  const char *path;       /* file mode: its path, borrowed */
  unsigned char *bytes;   /* memory mode: the bytes put, owned (acc_bin_out_free) */
  size_t capacity;        /* memory mode: allocated bytes */
  uint64_t size;          /* bytes put so far */
  uint64_t limit;         /* size never passes it */
  const char *limit_name; /* its name in the message, borrowed */
  uint64_t hash;          /* file mode, FNV-1a: the checksum of the bytes put */
  acc_xxh64_state xxh64;  /* file mode, XXH64: the checksum of the bytes put */
  int status;             /* MX_ACC_OK until a put fails */
  acc_bin_checksum checksum; /* ACC_BIN_FNV1A unless set (in file mode: when opened) */
  uint32_t flags;         /* the header's flags (set before acc_bin_put_header), 0 unless set */
} acc_bin_out;

/* Puts zero bytes up to the next multiple of ACC_BIN_ALIGN of out->size. */
void acc_bin_put_align(acc_bin_out *out);
/* The bytes acc_bin_put_align would put at offset. */
uint64_t acc_bin_pad(uint64_t offset);

/* An empty buffer in memory of at most format->max_size bytes, with an
 * FNV-1a checksum (set out.checksum for another). */
acc_bin_out acc_bin_out_memory(const acc_bin_format *format);

/* Opens path for writing, replacing the file; MX_ACC_ERR_INTERNAL when it
 * cannot be opened. On success the caller ends with acc_bin_out_close. The
 * checksum, computed as the bytes are written, is FNV-1a for
 * acc_bin_out_open, the one named for acc_bin_out_open_with. */
int acc_bin_out_open(acc_bin_out *out, const acc_bin_format *format, const char *path);
int acc_bin_out_open_with(acc_bin_out *out, const acc_bin_format *format,
                          acc_bin_checksum checksum, const char *path);

/* Appends count bytes of data. Passing the limit fails with
 * MX_ACC_ERR_UNSUPPORTED ("the model needs a file larger than LIMIT_NAME"),
 * memory with MX_ACC_ERR_OUT_OF_MEMORY, a write with MX_ACC_ERR_INTERNAL. */
void acc_bin_put(acc_bin_out *out, const void *data, size_t count);

/* Appends value's low width bytes (1 .. 8), little-endian. */
void acc_bin_put_uint(acc_bin_out *out, uint64_t value, int width);

/* Appends the header: format's magic and version, MX_ACC_API_VERSION, no
 * flags and size (in memory mode 0 will do: acc_bin_put_checksum fills it
 * in). */
void acc_bin_put_header(acc_bin_out *out, const acc_bin_format *format, uint64_t size);

/* Appends the checksum (out->checksum) of everything put. In memory mode
 * it first stores the file's final size in the header. */
void acc_bin_put_checksum(acc_bin_out *out);

/* File mode: closes the file; returns out->status, or MX_ACC_ERR_INTERNAL if
 * closing fails. On failure the partial file is removed. */
int acc_bin_out_close(acc_bin_out *out);

/* Memory mode: frees the bytes. */
void acc_bin_out_free(acc_bin_out *out);

/* Writes size bytes to path, replacing the file (a partial file is removed
 * on failure: MX_ACC_ERR_INTERNAL). */
int acc_bin_write_file(const char *path, const void *bytes, size_t size);

/* ---- reading -------------------------------------------------------------- */

/* Bytes of a file taken field by field. Every take checks the bytes left
 * first and records where its field started, for messages. */
typedef struct acc_bin_reader {
  const unsigned char *data; /* borrowed: the file's bytes (64-byte aligned) */
  size_t size;               /* bytes readable (the checksum excluded) */
  size_t offset;             /* the next field's */
  size_t field;              /* where the field taken last started */
  const char *path;          /* borrowed, for messages */
  const char *kind;          /* borrowed: the format's kind */
  int aligned;               /* ACC_BIN_FLAG_ALIGNED is set in the file's header */
} acc_bin_reader;

/* Records why the file at path is refused ("import_model: \"PATH\" is not a
 * valid KIND: offset OFFSET: REASON") and returns MX_ACC_ERR_INVALID_ARG. */
int acc_bin_refuse(const char *kind, const char *path, size_t offset, const char *fmt, ...)
    ACC_PRINTF_LIKE(4, 5);

/* Records MX_ACC_ERR_INTERNAL: "import_model: cannot WHAT \"PATH\": strerror(error)"
 * ("unexpected end of file" for error 0). */
int acc_bin_io_error(const char *what, const char *path, int error);

/* Reads the file at path: checks its size against format's limits and its
 * header before allocating anything, then its checksum: FNV-1a for
 * acc_bin_load, the one named for acc_bin_load_with. The checksum is
 * computed as the file is read, 256 KiB at a time, while each block is
 * still in the CPU's cache. Errors: MX_ACC_ERR_UNSUPPORTED
 * on a big-endian host, MX_ACC_ERR_INTERNAL when the file cannot be read,
 * MX_ACC_ERR_INVALID_ARG when it is not valid). On success *bytes
 * (malloc'ed, the whole file) is owned by the caller, who frees it after
 * the last use of reader, which is set to take the body: from the end of
 * the header to the checksum. */
int acc_bin_load(const acc_bin_format *format, const char *path, unsigned char **bytes,
                 acc_bin_reader *reader);
int acc_bin_load_with(const acc_bin_format *format, acc_bin_checksum checksum, const char *path,
                      unsigned char **bytes, acc_bin_reader *reader);
/* acc_bin_load_with for a format whose files may set ACC_BIN_FLAG_ALIGNED
 * (a file without it is read as ever). *bytes is 64-byte aligned in every
 * case (free() releases it). */
int acc_bin_load_aligned(const acc_bin_format *format, acc_bin_checksum checksum,
                         const char *path, unsigned char **bytes, acc_bin_reader *reader);

/* Takes count bytes: *bytes points into the reader's data. */
int acc_bin_take(acc_bin_reader *r, uint64_t count, const char *field,
                 const unsigned char **bytes);

/* Takes an unsigned little-endian integer of width bytes (1 .. 8). */
int acc_bin_take_uint(acc_bin_reader *r, int width, const char *field, uint64_t *value);
int acc_bin_take_u32(acc_bin_reader *r, const char *field, uint32_t *value);
int acc_bin_take_u64(acc_bin_reader *r, const char *field, uint64_t *value);

/* ---- the graph section ------------------------------------------------------ */

/* The section that starts both plugins' bodies:
 *
 *   u64        J, length of the graph JSON
 *   J          the graph JSON, UTF-8, no terminating NUL
 *   u32        W, number of weights: the graph's variables with "__kind__"
 *              "weight"
 *   then W weight records, in the order of those variables in "nodes":
 *   u32        N, length of the name
 *   N          the variable's name, no terminating NUL
 *   u32        dtype, a TensorDType value
 *   u32        ndim, 0 .. MX_ACC_MAX_NDIM
 *   8 * ndim   the extents, u64 each
 *   u64        B, byte length: dtype size * product of the extents
 *   B          the values: dense, row-major, little-endian elements
 *
 * Name, dtype and extents must equal the annotations of the graph's
 * variable. */

/* The values of the weight variable graph->nodes[node], as the model holds
 * them (borrowed). */
typedef const void *(*acc_bin_weight_fn)(const void *context, size_t node);

/* Appends the section for graph, parsed from json; weight gives the values.
 * MX_ACC_ERR_UNSUPPORTED for a length that does not fit its field. */
int acc_bin_put_graph(acc_bin_out *out, const char *json, const acc_graph *graph,
                      acc_bin_weight_fn weight, const void *context);

/* The section as read, all owned by it (acc_bin_graph_free), except the
 * tensors' data, which points into the reader's bytes. */
typedef struct acc_bin_graph {
  char *json;          /* NUL-terminated */
  acc_graph *graph;    /* parsed from json, annotations required */
  size_t num_weights;  /* at most INT_MAX */
  const char **names;  /* the graph's weight variables, in node order (the graph's strings) */
  MXTensor *tensors;   /* their values, pointing into the reader's bytes */
  size_t json_offset;  /* where the JSON starts in the file */
} acc_bin_graph;

/* Reads and checks the section; on failure what was read so far is still
 * freed by acc_bin_graph_free. g must start zeroed. */
int acc_bin_read_graph(acc_bin_reader *r, acc_bin_graph *g);

void acc_bin_graph_free(acc_bin_graph *g);

/* ---- the configure() keys ---------------------------------------------------- */

/* Checks the keys of a configure() call for "export_model"/"import_model"
 * (mxnet_acc.h section 9): at most one of them per call, going with the
 * call's one non-empty "path". *path is that value (borrowed from vals), or
 * NULL when the call has neither. Pairs with a NULL key or value are
 * skipped (the caller reports them). MX_ACC_ERR_INVALID_ARG otherwise. */
int acc_bin_configure_path(const char *const *keys, const char *const *vals, int num_in,
                           const char **path);

#endif /* ACC_COMMON_BINFILE_H_ */
