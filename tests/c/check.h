/*
 * What the C test programs of tests/c/ that drive a plugin through the ABI
 * share: the CHECK counter, the macros that write annotated graph JSON, a
 * host tensor, whole-file reading and writing and the little-endian,
 * checksum and random helpers that the model-file tests damage files with.
 * Each test program includes it once, so the static definitions are private
 * to it; the functions are static inline so that a program need not use
 * them all.
 */
#ifndef TESTS_C_CHECK_H_
#define TESTS_C_CHECK_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mxnet_acc.h"

/* The counts the program prints at the end ("N passed, N failed"). */
static int passed, failed;

/* Counts condition as passed or failed; a failure is reported with the
 * plugin's last error. */
#define CHECK(condition)                                                                    \
  do {                                                                                      \
    if (condition) {                                                                        \
      ++passed;                                                                             \
    } else {                                                                                \
      ++failed;                                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__,      \
              #condition, accGetLastError());                                               \
    }                                                                                       \
  } while (0)

/* An annotated graph node, its float32 output annotations, a variable. */
#define NODE(op, name, attrs, inputs) \
  "{\"op\":\"" op "\",\"name\":\"" name "\",\"attrs\":{" attrs "},\"inputs\":[" inputs "]}"
#define OUT(shape) "\"__out_shapes__\":\"[" shape "]\",\"__out_dtypes__\":\"[0]\""
#define VAR(name, shape, kind) NODE("null", name, OUT(shape) ",\"__kind__\":\"" kind "\"", "")

/* A float32 tensor in host memory; values and shape are borrowed. */
static inline MXTensor host_tensor(void *values, const uint64_t *shape, uint64_t ndim) {
  MXTensor tensor = {values, shape, ndim, kFloat32, 0, NULL, MX_ACC_HOST_DEVICE};
  return tensor;
}

/* count floats of a fixed pattern in [-scale, scale], shifted by seed. */
static inline void fill_pattern(float *values, int count, float scale, int seed) {
  for (int i = 0; i < count; ++i) {
    values[i] = scale * (float)((int)(((unsigned)(i + seed) * 7919u) % 23u) - 11) / 11.0f;
  }
}

/* ---- files ---------------------------------------------------------------------------- */

/* A file's bytes; bytes is malloc'ed and owned by the holder (free it). */
typedef struct buffer {
  unsigned char *bytes;
  size_t size;
} buffer;

/* The whole file at path; size 0 (bytes possibly NULL) when it cannot be
 * read or is empty. */
static inline buffer read_all(const char *path) {
  buffer result = {NULL, 0};
  FILE *file = fopen(path, "rb");
  if (file == NULL) return result;
  if (fseek(file, 0, SEEK_END) == 0) {
    long end = ftell(file);
    if (end > 0 && fseek(file, 0, SEEK_SET) == 0) {
      result.bytes = malloc((size_t)end);
      if (result.bytes != NULL && fread(result.bytes, 1, (size_t)end, file) == (size_t)end) {
        result.size = (size_t)end;
      }
    }
  }
  fclose(file);
  return result;
}

/* Writes size bytes to path, replacing the file: 1 on success. */
static inline int write_all(const char *path, const unsigned char *bytes, size_t size) {
  FILE *file = fopen(path, "wb");
  if (file == NULL) return 0;
  int ok = fwrite(bytes, 1, size, file) == size;
  return fclose(file) == 0 && ok;
}

/* The model files' checksum (FNV-1a 64 of everything before the last 8
 * bytes), written into the last 8 bytes (size >= 8): what a hostile writer
 * would do. */
static inline void fix_checksum(unsigned char *bytes, size_t size) {
  uint64_t hash = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i + 8 < size; ++i) hash = (hash ^ bytes[i]) * UINT64_C(0x100000001b3);
  for (int i = 0; i < 8; ++i) bytes[size - 8 + (size_t)i] = (unsigned char)(hash >> (8 * i));
}

/* value's low width bytes (1 .. 8) to out, least significant first. */
static inline void put_le(unsigned char *out, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out[i] = (unsigned char)(value >> (8 * i));
}

/* The little-endian integer of width bytes (1 .. 8) at in. */
static inline uint64_t get_le(const unsigned char *in, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = (value << 8) | in[i];
  return value;
}

/* xorshift64: reproducible "random" positions and values. */
static inline uint64_t next_random(void) {
  static uint64_t state = UINT64_C(0x9E3779B97F4A7C15);
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

#endif /* TESTS_C_CHECK_H_ */
