/* The compiled-model file envelope: see binfile.h. */
#include "binfile.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"

enum { kMessageSize = 512 };

#define FNV_PRIME UINT64_C(0x100000001b3)

uint64_t acc_fnv1a(uint64_t hash, const void *bytes, size_t count) {
  const unsigned char *p = bytes;
  for (size_t i = 0; i < count; ++i) hash = (hash ^ p[i]) * FNV_PRIME;
  return hash;
}

/* ---- XXH64 (doc/xxhash_spec.md of github.com/Cyan4973/xxHash) ------------- */

#define XXH_P1 UINT64_C(0x9E3779B185EBCA87)
#define XXH_P2 UINT64_C(0xC2B2AE3D27D4EB4F)
#define XXH_P3 UINT64_C(0x165667B19E3779F9)
#define XXH_P4 UINT64_C(0x85EBCA77C2B2AE63)
#define XXH_P5 UINT64_C(0x27D4EB2F165667C5)

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* The little-endian u64 at p (one load on a little-endian host). */
static uint64_t read_le64(const unsigned char *p) {
  uint64_t value;
  memcpy(&value, p, sizeof value);
  return acc_bin_host_is_little_endian() ? value : acc_bin_get_le(p, 8);
}

static uint64_t xxh_round(uint64_t lane, uint64_t word) {
  lane += word * XXH_P2;
  lane = rotl64(lane, 31);
  return lane * XXH_P1;
}

static uint64_t xxh_merge(uint64_t hash, uint64_t lane) {
  hash ^= xxh_round(0, lane);
  return hash * XXH_P1 + XXH_P4;
}

/* Takes count / 32 whole stripes of p; returns the bytes taken. */
static size_t xxh_stripes(uint64_t lanes[4], const unsigned char *p, size_t count) {
  uint64_t v1 = lanes[0], v2 = lanes[1], v3 = lanes[2], v4 = lanes[3];
  size_t done = 0;
  for (; count - done >= 32; done += 32) {
    v1 = xxh_round(v1, read_le64(p + done));
    v2 = xxh_round(v2, read_le64(p + done + 8));
    v3 = xxh_round(v3, read_le64(p + done + 16));
    v4 = xxh_round(v4, read_le64(p + done + 24));
  }
  lanes[0] = v1;
  lanes[1] = v2;
  lanes[2] = v3;
  lanes[3] = v4;
  return done;
}

void acc_xxh64_init(acc_xxh64_state *state, uint64_t seed) {
  *state = (acc_xxh64_state){{seed + XXH_P1 + XXH_P2, seed + XXH_P2, seed, seed - XXH_P1}, 0,
                             {0}, 0, seed};
}

void acc_xxh64_update(acc_xxh64_state *state, const void *bytes, size_t count) {
  const unsigned char *p = bytes;
  state->total += count;
  if (state->buffered > 0) { /* complete the stripe begun */
    size_t take = 32 - state->buffered < count ? 32 - state->buffered : count;
    memcpy(state->stripe + state->buffered, p, take);
    state->buffered += take;
    p += take;
    count -= take;
    if (state->buffered < 32) return;
    xxh_stripes(state->lanes, state->stripe, 32);
    state->buffered = 0;
  }
  size_t done = xxh_stripes(state->lanes, p, count);
  if (done < count) memcpy(state->stripe, p + done, count - done);
  state->buffered = count - done;
}

uint64_t acc_xxh64_digest(const acc_xxh64_state *state) {
  uint64_t hash;
  if (state->total >= 32) {
    const uint64_t *v = state->lanes;
    hash = rotl64(v[0], 1) + rotl64(v[1], 7) + rotl64(v[2], 12) + rotl64(v[3], 18);
    for (int i = 0; i < 4; ++i) hash = xxh_merge(hash, v[i]);
  } else {
    hash = state->seed + XXH_P5;
  }
  hash += state->total;
  const unsigned char *p = state->stripe;
  size_t left = state->buffered;
  for (; left >= 8; p += 8, left -= 8) {
    hash ^= xxh_round(0, read_le64(p));
    hash = rotl64(hash, 27) * XXH_P1 + XXH_P4;
  }
  if (left >= 4) {
    hash ^= acc_bin_get_le(p, 4) * XXH_P1;
    hash = rotl64(hash, 23) * XXH_P2 + XXH_P3;
    p += 4;
    left -= 4;
  }
  for (; left > 0; ++p, --left) {
    hash ^= *p * XXH_P5;
    hash = rotl64(hash, 11) * XXH_P1;
  }
  hash ^= hash >> 33;
  hash *= XXH_P2;
  hash ^= hash >> 29;
  hash *= XXH_P3;
  hash ^= hash >> 32;
  return hash;
}

uint64_t acc_xxh64(const void *bytes, size_t count, uint64_t seed) {
  acc_xxh64_state state;
  acc_xxh64_init(&state, seed);
  acc_xxh64_update(&state, bytes, count);
  return acc_xxh64_digest(&state);
}

/* ---- integers ------------------------------------------------------------- */

void acc_bin_put_le(unsigned char *out, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out[i] = (unsigned char)(value >> (8 * i));
}

uint64_t acc_bin_get_le(const unsigned char *in, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = (value << 8) | in[i];
  return value;
}

int acc_bin_host_is_little_endian(void) {
  const uint16_t probe = 1;
  unsigned char first;
  memcpy(&first, &probe, 1);
  return first == 1;
}

/* ---- writing -------------------------------------------------------------- */

acc_bin_out acc_bin_out_memory(const acc_bin_format *format) {
  acc_bin_out out = {0};
  out.limit = format->max_size;
  out.limit_name = format->max_name;
  out.status = MX_ACC_OK;
  out.checksum = ACC_BIN_FNV1A;
  return out;
}

int acc_bin_out_open(acc_bin_out *out, const acc_bin_format *format, const char *path) {
  return acc_bin_out_open_with(out, format, ACC_BIN_FNV1A, path);
}

int acc_bin_out_open_with(acc_bin_out *out, const acc_bin_format *format,
                          acc_bin_checksum checksum, const char *path) {
  *out = acc_bin_out_memory(format);
  out->path = path;
  out->checksum = checksum;
  out->hash = ACC_FNV1A_BASIS;
  acc_xxh64_init(&out->xxh64, 0);
  out->file = fopen(path, "wb");
  if (out->file == NULL) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "export_model: cannot open \"%s\": %s", path,
                    strerror(errno));
  }
  return MX_ACC_OK;
}

static int write_failed(const char *path, int error) {
  return acc_fail(MX_ACC_ERR_INTERNAL, "export_model: cannot write \"%s\": %s", path,
                  error != 0 ? strerror(error) : "write failed");
}

/* Makes room for count more bytes in memory mode. */
static int reserve(acc_bin_out *out, size_t count) {
  size_t needed = (size_t)out->size + count; /* <= limit <= SIZE_MAX */
  if (needed <= out->capacity) return MX_ACC_OK;
  size_t capacity = out->capacity ? out->capacity : (size_t)1 << 16;
  while (capacity < needed) capacity = capacity > SIZE_MAX / 2 ? needed : capacity * 2;
  unsigned char *grown = realloc(out->bytes, capacity);
  if (grown == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "export_model: file buffer");
  out->bytes = grown;
  out->capacity = capacity;
  return MX_ACC_OK;
}

void acc_bin_put(acc_bin_out *out, const void *data, size_t count) {
  if (out->status != MX_ACC_OK || count == 0) return;
  if (count > out->limit || out->size > out->limit - count) {
    out->status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "export_model: the model needs a file "
                           "larger than %s (%" PRIu64 " bytes)", out->limit_name, out->limit);
    return;
  }
  if (out->file != NULL) {
    errno = 0;
    if (fwrite(data, 1, count, out->file) != count) {
      out->status = write_failed(out->path, errno);
      return;
    }
    if (out->checksum == ACC_BIN_XXH64) {
      acc_xxh64_update(&out->xxh64, data, count);
    } else {
      out->hash = acc_fnv1a(out->hash, data, count);
    }
  } else {
    out->status = reserve(out, count);
    if (out->status != MX_ACC_OK) return;
    memcpy(out->bytes + out->size, data, count);
  }
  out->size += count;
}

void acc_bin_put_uint(acc_bin_out *out, uint64_t value, int width) {
  unsigned char bytes[8];
  acc_bin_put_le(bytes, value, width);
  acc_bin_put(out, bytes, (size_t)width);
}

void acc_bin_put_header(acc_bin_out *out, const acc_bin_format *format, uint64_t size) {
  acc_bin_put(out, format->magic, 8);
  acc_bin_put_uint(out, format->version, 4);
  acc_bin_put_uint(out, MX_ACC_API_VERSION, 4);
  acc_bin_put_uint(out, out->flags, 4);
  acc_bin_put_uint(out, size, 8);
}

uint64_t acc_bin_pad(uint64_t offset) {
  return (ACC_BIN_ALIGN - offset % ACC_BIN_ALIGN) % ACC_BIN_ALIGN;
}

void acc_bin_put_align(acc_bin_out *out) {
  static const unsigned char zeros[ACC_BIN_ALIGN] = {0};
  acc_bin_put(out, zeros, (size_t)acc_bin_pad(out->size));
}

void acc_bin_put_checksum(acc_bin_out *out) {
  if (out->status != MX_ACC_OK) return;
  if (out->file != NULL) {
    uint64_t sum = out->checksum == ACC_BIN_XXH64 ? acc_xxh64_digest(&out->xxh64) : out->hash;
    acc_bin_put_uint(out, sum, 8);
    return;
  }
  if (out->size < ACC_BIN_HEADER_SIZE) {
    out->status = acc_fail(MX_ACC_ERR_INTERNAL, "export_model: checksum before the header");
    return;
  }
  acc_bin_put_le(out->bytes + ACC_BIN_SIZE_OFFSET, out->size + ACC_BIN_CHECKSUM_SIZE, 8);
  uint64_t sum = out->checksum == ACC_BIN_XXH64 ? acc_xxh64(out->bytes, (size_t)out->size, 0)
                                                : acc_fnv1a(ACC_FNV1A_BASIS, out->bytes,
                                                            (size_t)out->size);
  acc_bin_put_uint(out, sum, 8);
}

int acc_bin_out_close(acc_bin_out *out) {
  if (out->file == NULL) return out->status;
  errno = 0;
  int closed = fclose(out->file) == 0;
  int error = errno;
  out->file = NULL;
  if (out->status == MX_ACC_OK && !closed) out->status = write_failed(out->path, error);
  if (out->status != MX_ACC_OK) remove(out->path);
  return out->status;
}

void acc_bin_out_free(acc_bin_out *out) {
  free(out->bytes);
  out->bytes = NULL;
  out->capacity = 0;
}

int acc_bin_write_file(const char *path, const void *bytes, size_t size) {
  FILE *file = fopen(path, "wb");
  if (file == NULL) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "export_model: cannot open \"%s\": %s", path,
                    strerror(errno));
  }
  errno = 0;
  int written = fwrite(bytes, 1, size, file) == size;
  int error = errno;
  if (fclose(file) != 0 && written) {
    written = 0;
    error = errno;
  }
  if (written) return MX_ACC_OK;
  remove(path);
  return write_failed(path, error);
}

/* ---- reading -------------------------------------------------------------- */

static int vrefuse(const char *kind, const char *path, size_t offset, const char *fmt,
                   va_list args) {
  char reason[kMessageSize];
  vsnprintf(reason, sizeof reason, fmt, args);
  return acc_fail(MX_ACC_ERR_INVALID_ARG, "import_model: \"%s\" is not a valid %s: offset %zu: "
                  "%s", path, kind, offset, reason);
}

int acc_bin_refuse(const char *kind, const char *path, size_t offset, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  int status = vrefuse(kind, path, offset, fmt, args);
  va_end(args);
  return status;
}

int acc_bin_io_error(const char *what, const char *path, int error) {
  return acc_fail(MX_ACC_ERR_INTERNAL, "import_model: cannot %s \"%s\": %s", what, path,
                  error != 0 ? strerror(error) : "unexpected end of file");
}

/* Checks the fixed header against the file's real size. */
static int check_header(const acc_bin_format *f, const unsigned char *header, uint64_t file_size,
                        const char *path, uint32_t allowed_flags) {
  if (memcmp(header, f->magic, 8) != 0) {
    return acc_bin_refuse(f->kind, path, 0, "the magic bytes are not those of %s", f->a_kind);
  }
  uint32_t version = (uint32_t)acc_bin_get_le(header + ACC_BIN_VERSION_OFFSET, 4);
  if (version != f->version) {
    return acc_bin_refuse(f->kind, path, ACC_BIN_VERSION_OFFSET, "format version %" PRIu32
                          "; this %s reads version %" PRIu32, version, f->plugin, f->version);
  }
  uint32_t api_version = (uint32_t)acc_bin_get_le(header + ACC_BIN_API_VERSION_OFFSET, 4);
  if (api_version / 100 != MX_ACC_API_VERSION_MAJOR) {
    return acc_bin_refuse(f->kind, path, ACC_BIN_API_VERSION_OFFSET, "written for ABI %" PRIu32
                          ".%" PRIu32 "; this %s implements ABI %d.%d", api_version / 100,
                          api_version % 100, f->plugin, MX_ACC_API_VERSION_MAJOR,
                          MX_ACC_API_VERSION_MINOR);
  }
  uint32_t flags = (uint32_t)acc_bin_get_le(header + ACC_BIN_FLAGS_OFFSET, 4);
  if ((flags & ~allowed_flags) != 0) {
    return acc_bin_refuse(f->kind, path, ACC_BIN_FLAGS_OFFSET, "unknown flags 0x%" PRIx32, flags);
  }
  uint64_t claimed = acc_bin_get_le(header + ACC_BIN_SIZE_OFFSET, 8);
  if (claimed != file_size) {
    return acc_bin_refuse(f->kind, path, ACC_BIN_SIZE_OFFSET, "the header gives a file size of %"
                          PRIu64 " bytes, the file has %" PRIu64 " (truncated or extended)",
                          claimed, file_size);
  }
  return MX_ACC_OK;
}

/* The checksum of the bytes read so far, of either algorithm. */
typedef struct running_sum {
  acc_bin_checksum kind;
  uint64_t fnv1a;
  acc_xxh64_state xxh64;
} running_sum;

static void sum_init(running_sum *sum, acc_bin_checksum kind) {
  sum->kind = kind;
  sum->fnv1a = ACC_FNV1A_BASIS;
  acc_xxh64_init(&sum->xxh64, 0);
}

static void sum_update(running_sum *sum, const unsigned char *bytes, size_t count) {
  if (sum->kind == ACC_BIN_XXH64) {
    acc_xxh64_update(&sum->xxh64, bytes, count);
  } else {
    sum->fnv1a = acc_fnv1a(sum->fnv1a, bytes, count);
  }
}

static uint64_t sum_value(const running_sum *sum) {
  return sum->kind == ACC_BIN_XXH64 ? acc_xxh64_digest(&sum->xxh64) : sum->fnv1a;
}

/* Bytes read (and summed) at a time: small enough that the checksum finds
 * them still in the CPU's cache, a multiple of XXH64's 32-byte stripe. */
enum { kReadBlock = 1 << 18 };

/* Reads the whole open file into *contents (malloc'ed, *size bytes),
 * checking its size against the limits and its header before allocating;
 * *computed is the checksum of every byte before the last 8. */
static int read_file(const acc_bin_format *f, acc_bin_checksum checksum, FILE *file,
                     const char *path, uint32_t allowed_flags, unsigned char **contents,
                     size_t *size, uint64_t *computed) {
  errno = 0;
  if (fseek(file, 0, SEEK_END) != 0) return acc_bin_io_error("seek in", path, errno);
  long end = ftell(file);
  if (end < 0) return acc_bin_io_error("tell the size of", path, errno);
  if (fseek(file, 0, SEEK_SET) != 0) return acc_bin_io_error("seek in", path, errno);
  uint64_t file_size = (uint64_t)end;
  if (file_size < f->min_size) {
    return acc_bin_refuse(f->kind, path, 0, "the file has %" PRIu64 " bytes, fewer than the %"
                          PRIu64 " of the smallest %s", file_size, f->min_size, f->smallest);
  }
  if (file_size > f->max_size) {
    return acc_bin_refuse(f->kind, path, 0, "the file has %" PRIu64 " bytes, more than %s (%"
                          PRIu64 ")", file_size, f->max_name, f->max_size);
  }
  unsigned char header[ACC_BIN_HEADER_SIZE];
  errno = 0;
  if (fread(header, 1, sizeof header, file) != sizeof header) {
    return acc_bin_io_error("read", path, ferror(file) ? errno : 0);
  }
  int status = check_header(f, header, file_size, path, allowed_flags);
  if (status != MX_ACC_OK) return status;
  /* Aligned for records that are used in place (ACC_BIN_FLAG_ALIGNED);
   * aligned_alloc wants a multiple of the alignment (max_size <= SIZE_MAX
   * - ACC_BIN_ALIGN: checked by the caller). */
  unsigned char *bytes =
      aligned_alloc(ACC_BIN_ALIGN, (size_t)(file_size + acc_bin_pad(file_size)));
  if (bytes == NULL) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: cannot allocate %" PRIu64
                    " bytes for \"%s\"", file_size, path);
  }
  memcpy(bytes, header, sizeof header);
  running_sum sum;
  sum_init(&sum, checksum);
  /* The bytes summed: all but the checksum (min_size >= header + checksum). */
  size_t summed = (size_t)file_size - ACC_BIN_CHECKSUM_SIZE, done = sizeof header;
  sum_update(&sum, bytes, done);
  while (done < (size_t)file_size) {
    size_t want = (size_t)file_size - done;
    if (want > kReadBlock) want = kReadBlock;
    errno = 0;
    if (fread(bytes + done, 1, want, file) != want) {
      free(bytes);
      /* A short read without an error: the file shrank since its size was
       * taken. */
      return ferror(file) ? acc_bin_io_error("read", path, errno)
                          : acc_bin_refuse(f->kind, path, 0, "the file shrank while it was read");
    }
    if (done < summed) {
      size_t stop = done + want < summed ? done + want : summed;
      sum_update(&sum, bytes + done, stop - done);
    }
    done += want;
  }
  *contents = bytes;
  *size = (size_t)file_size;
  *computed = sum_value(&sum);
  return MX_ACC_OK;
}

static int load(const acc_bin_format *format, acc_bin_checksum checksum, const char *path,
                uint32_t allowed_flags, unsigned char **bytes, acc_bin_reader *reader) {
  if (format->min_size < ACC_BIN_HEADER_SIZE + ACC_BIN_CHECKSUM_SIZE ||
      format->max_size > SIZE_MAX - ACC_BIN_ALIGN || format->max_size > LONG_MAX) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "import_model: bad limits of %s", format->kind);
  }
  if (!acc_bin_host_is_little_endian()) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "import_model: not supported on a big-endian host");
  }
  FILE *file = fopen(path, "rb");
  if (file == NULL) return acc_bin_io_error("open", path, errno);
  unsigned char *contents = NULL;
  size_t size = 0;
  uint64_t computed = 0;
  int status = read_file(format, checksum, file, path, allowed_flags, &contents, &size,
                         &computed);
  fclose(file); /* opened for reading only: nothing to lose if it fails */
  if (status != MX_ACC_OK) return status;

  size_t hashed = size - ACC_BIN_CHECKSUM_SIZE;
  uint64_t stored = acc_bin_get_le(contents + hashed, 8);
  if (stored != computed) {
    free(contents);
    return acc_bin_refuse(format->kind, path, hashed, "checksum 0x%016" PRIx64 " does not match "
                          "the contents (0x%016" PRIx64 ", %s)", stored, computed,
                          checksum == ACC_BIN_XXH64 ? "XXH64" : "FNV-1a 64");
  }
  *bytes = contents;
  const uint32_t flags = (uint32_t)acc_bin_get_le(contents + ACC_BIN_FLAGS_OFFSET, 4);
  *reader = (acc_bin_reader){contents, hashed, ACC_BIN_HEADER_SIZE, ACC_BIN_HEADER_SIZE, path,
                             format->kind, (flags & ACC_BIN_FLAG_ALIGNED) != 0};
  return MX_ACC_OK;
}

int acc_bin_load_with(const acc_bin_format *format, acc_bin_checksum checksum, const char *path,
                      unsigned char **bytes, acc_bin_reader *reader) {
  return load(format, checksum, path, 0, bytes, reader);
}

int acc_bin_load_aligned(const acc_bin_format *format, acc_bin_checksum checksum,
                         const char *path, unsigned char **bytes, acc_bin_reader *reader) {
  return load(format, checksum, path, ACC_BIN_FLAG_ALIGNED, bytes, reader);
}

int acc_bin_load(const acc_bin_format *format, const char *path, unsigned char **bytes,
                 acc_bin_reader *reader) {
  return acc_bin_load_with(format, ACC_BIN_FNV1A, path, bytes, reader);
}

int acc_bin_take(acc_bin_reader *r, uint64_t count, const char *field,
                 const unsigned char **bytes) {
  size_t left = r->size - r->offset;
  if (count > left) {
    return acc_bin_refuse(r->kind, r->path, r->offset, "%s needs %" PRIu64 " bytes, %zu are "
                          "left", field, count, left);
  }
  r->field = r->offset;
  *bytes = r->data + r->offset;
  r->offset += (size_t)count;
  return MX_ACC_OK;
}

int acc_bin_take_uint(acc_bin_reader *r, int width, const char *field, uint64_t *value) {
  const unsigned char *bytes = NULL;
  int status = acc_bin_take(r, (uint64_t)width, field, &bytes);
  if (status == MX_ACC_OK) *value = acc_bin_get_le(bytes, width);
  return status;
}

int acc_bin_take_u32(acc_bin_reader *r, const char *field, uint32_t *value) {
  uint64_t wide = 0;
  int status = acc_bin_take_uint(r, 4, field, &wide);
  if (status == MX_ACC_OK) *value = (uint32_t)wide;
  return status;
}

int acc_bin_take_u64(acc_bin_reader *r, const char *field, uint64_t *value) {
  return acc_bin_take_uint(r, 8, field, value);
}

/* ---- the graph section ------------------------------------------------------ */

/* Bytes of the values of weight variable node; fails if they would not fit
 * a size_t (never for a loaded model, whose buffers were allocated). */
static int weight_bytes(const acc_node *node, size_t *bytes) {
  return acc_shape_bytes(&node->out_shapes[0], acc_dtype_size(node->out_dtypes[0]), node->name,
                         bytes);
}

int acc_bin_put_graph(acc_bin_out *out, const char *json, const acc_graph *graph,
                      acc_bin_weight_fn weight, const void *context) {
  size_t json_length = strlen(json);
  acc_bin_put_uint(out, json_length, 8);
  acc_bin_put(out, json, json_length);
  uint64_t count = 0;
  for (size_t i = 0; i < graph->num_nodes; ++i) count += graph->nodes[i].kind == ACC_VAR_WEIGHT;
  if (count > UINT32_MAX) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "export_model: too many weights");
  }
  acc_bin_put_uint(out, count, 4);
  for (size_t i = 0; i < graph->num_nodes && out->status == MX_ACC_OK; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->kind != ACC_VAR_WEIGHT) continue;
    const acc_shape *shape = &node->out_shapes[0];
    size_t bytes = 0, name_length = strlen(node->name);
    int status = weight_bytes(node, &bytes);
    if (status != MX_ACC_OK) return status;
    if (name_length > UINT32_MAX) {
      return acc_fail(MX_ACC_ERR_UNSUPPORTED, "export_model: weight name too long");
    }
    acc_bin_put_uint(out, name_length, 4);
    acc_bin_put(out, node->name, name_length);
    acc_bin_put_uint(out, (uint32_t)node->out_dtypes[0], 4);
    acc_bin_put_uint(out, (uint32_t)shape->ndim, 4);
    for (int d = 0; d < shape->ndim; ++d) acc_bin_put_uint(out, shape->dims[d], 8);
    acc_bin_put_uint(out, bytes, 8);
    if (out->flags & ACC_BIN_FLAG_ALIGNED) acc_bin_put_align(out);
    acc_bin_put(out, weight(context, i), bytes);
  }
  return out->status;
}

#define REFUSE(r, ...) acc_bin_refuse((r)->kind, (r)->path, (r)->field, __VA_ARGS__)

/* Reads the record of weight number index, which must describe the graph's
 * weight variable node, and points tensor at its values. */
static int read_weight(acc_bin_reader *r, size_t index, const acc_node *node, MXTensor *tensor) {
  const acc_shape *shape = &node->out_shapes[0];
  const unsigned char *name = NULL, *values = NULL;
  uint32_t name_length = 0, dtype = 0, ndim = 0;
  uint64_t extent = 0, byte_length = 0;
  size_t expected_bytes = 0;
  int status = acc_bin_take_u32(r, "weight name length", &name_length);
  if (status == MX_ACC_OK) status = acc_bin_take(r, name_length, "weight name", &name);
  if (status != MX_ACC_OK) return status;
  if (name_length != strlen(node->name) || memcmp(name, node->name, name_length) != 0) {
    return REFUSE(r, "weight %zu is \"%.*s\"; the graph's weight %zu is \"%s\"", index,
                  (int)(name_length < 64 ? name_length : 64), (const char *)name, index,
                  node->name);
  }
  status = acc_bin_take_u32(r, "weight dtype", &dtype);
  if (status != MX_ACC_OK) return status;
  if (dtype != (uint32_t)node->out_dtypes[0]) {
    return REFUSE(r, "weight \"%s\": dtype %" PRIu32 ", the graph says %s", node->name, dtype,
                  acc_dtype_name(node->out_dtypes[0]));
  }
  status = acc_bin_take_u32(r, "weight ndim", &ndim);
  if (status != MX_ACC_OK) return status;
  if (ndim > MX_ACC_MAX_NDIM || ndim != (uint32_t)shape->ndim) {
    return REFUSE(r, "weight \"%s\": %" PRIu32 " dimensions, the graph says %d", node->name, ndim,
                  shape->ndim);
  }
  for (uint32_t d = 0; d < ndim; ++d) {
    status = acc_bin_take_u64(r, "weight extent", &extent);
    if (status != MX_ACC_OK) return status;
    if (extent != shape->dims[d]) {
      return REFUSE(r, "weight \"%s\": extent %" PRIu32 " is %" PRIu64 ", the graph says %"
                    PRIu64, node->name, d, extent, shape->dims[d]);
    }
  }
  status = acc_bin_take_u64(r, "weight byte length", &byte_length);
  if (status != MX_ACC_OK) return status;
  if (weight_bytes(node, &expected_bytes) != MX_ACC_OK) { /* the extents overflow a size_t */
    char reason[kMessageSize];
    snprintf(reason, sizeof reason, "%s", acc_last_error());
    return REFUSE(r, "weight \"%s\": %s", node->name, reason);
  }
  if (byte_length != expected_bytes) {
    return REFUSE(r, "weight \"%s\": %" PRIu64 " bytes, its shape and dtype take %zu", node->name,
                  byte_length, expected_bytes);
  }
  if (r->aligned) {
    const unsigned char *pad = NULL;
    const uint64_t pad_length = acc_bin_pad(r->offset);
    status = acc_bin_take(r, pad_length, "weight padding", &pad);
    if (status != MX_ACC_OK) return status;
    for (uint64_t b = 0; b < pad_length; ++b) {
      if (pad[b] != 0) return REFUSE(r, "weight \"%s\": a padding byte is not zero", node->name);
    }
  }
  status = acc_bin_take(r, byte_length, "weight values", &values);
  if (status != MX_ACC_OK) return status;
  /* The models' create functions only read the values (cpu_ref's import
   * uses aligned ones in place, in the buffer it keeps). */
  *tensor = (MXTensor){(void *)values, shape->dims, ndim, node->out_dtypes[0], 0, NULL,
                       MX_ACC_HOST_DEVICE};
  return MX_ACC_OK;
}

int acc_bin_read_graph(acc_bin_reader *r, acc_bin_graph *g) {
  const unsigned char *json = NULL;
  uint64_t json_length = 0;
  int status = acc_bin_take_u64(r, "graph JSON length", &json_length);
  if (status == MX_ACC_OK) status = acc_bin_take(r, json_length, "graph JSON", &json);
  if (status != MX_ACC_OK) return status;
  g->json_offset = r->field;
  if (memchr(json, '\0', (size_t)json_length) != NULL) {
    return REFUSE(r, "the graph JSON holds a NUL byte");
  }
  g->json = malloc((size_t)json_length + 1);
  if (g->json == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: graph JSON");
  memcpy(g->json, json, (size_t)json_length);
  g->json[json_length] = '\0';
  char error[kMessageSize];
  status = acc_graph_parse(g->json, 1, &g->graph, error, sizeof error);
  if (status == MX_ACC_ERR_OUT_OF_MEMORY) return acc_fail(status, "import_model: graph JSON");
  if (status != MX_ACC_OK) return REFUSE(r, "graph JSON: %s", error);

  const acc_graph *graph = g->graph;
  for (size_t i = 0; i < graph->num_nodes; ++i) {
    g->num_weights += graph->nodes[i].kind == ACC_VAR_WEIGHT;
  }
  uint32_t count = 0;
  status = acc_bin_take_u32(r, "weight count", &count);
  if (status != MX_ACC_OK) return status;
  if (count != g->num_weights || count > INT_MAX) { /* the create functions take an int */
    return REFUSE(r, "%" PRIu32 " weights; the graph has %zu weight variables", count,
                  g->num_weights);
  }
  size_t slots = g->num_weights ? g->num_weights : 1;
  g->names = calloc(slots, sizeof *g->names);
  g->tensors = calloc(slots, sizeof *g->tensors);
  if (g->names == NULL || g->tensors == NULL) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: weight tables");
  }
  size_t k = 0;
  for (size_t i = 0; i < graph->num_nodes && status == MX_ACC_OK; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->kind != ACC_VAR_WEIGHT) continue;
    g->names[k] = node->name;
    status = read_weight(r, k, node, &g->tensors[k]);
    k += 1;
  }
  return status;
}

void acc_bin_graph_free(acc_bin_graph *g) {
  free(g->tensors);
  free(g->names);
  acc_graph_free(g->graph);
  free(g->json);
  *g = (acc_bin_graph){0};
}

/* ---- the configure() keys ---------------------------------------------------- */

int acc_bin_configure_path(const char *const *keys, const char *const *vals, int num_in,
                           const char **path) {
  int files = 0, paths = 0;
  *path = NULL;
  for (int i = 0; i < num_in; ++i) {
    if (keys[i] == NULL || vals[i] == NULL) continue; /* reported by the caller */
    files += strcmp(keys[i], "export_model") == 0 || strcmp(keys[i], "import_model") == 0;
    if (strcmp(keys[i], "path") == 0) {
      paths += 1;
      *path = vals[i];
    }
  }
  if (files > 1 || paths > 1) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: at most one export_model or "
                    "import_model, and one path, per call");
  }
  if (files != paths) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: export_model and import_model need "
                    "a \"path\", and \"path\" is only used with them");
  }
  if (*path != NULL && (*path)[0] == '\0') {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "configure: path is empty");
  }
  return MX_ACC_OK;
}
