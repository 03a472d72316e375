/*
 * cpu_ref's compiled-model files (configure "export_model"/"import_model",
 * plugins/cpu_ref/model/model_file.c) through the ABI entry points, linked
 * directly so that AddressSanitizer and LeakSanitizer watch every path:
 * export -> import gives a model with the same outputs; every truncation of
 * an exported file, every single-byte change and random byte flips are
 * refused with MX_ACC_ERR_INVALID_ARG; hostile files whose checksum was
 * recomputed (so that only the reader's checks stand between them and the
 * model) are refused or, where only weight values or names changed, loaded,
 * never crashing or leaking.
 * Prints "N passed, N failed"; exits non-zero on failure.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binfile.h"
#include "mxnet_acc.h"

#include "cpu_ref_fixture.h"

/* The format's checksum (versions 2 to 4: XXH64, seed 0, of everything before the
 * last 8 bytes) written into the last 8 bytes: what a hostile writer would
 * do. */
static void fix_xxh64(unsigned char *bytes, size_t size) {
  put_le(bytes + size - 8, acc_xxh64(bytes, size - 8, 0), 8);
}

static const uint64_t kDataShape[] = {1, 2, 5, 5}, kFcBShape[] = {4};

static int load(const char *id) {
  static const uint64_t conv_w_shape[] = {3, 2, 3, 3}, conv_b_shape[] = {3},
                        fc_w_shape[] = {4, 12};
  const char *names[] = {"conv_w", "conv_b", "fc_w", "fc_b", "data"};
  MXTensor tensors[] = {host_tensor(conv_w, conv_w_shape, 4), host_tensor(conv_b, conv_b_shape, 1),
                        host_tensor(fc_w, fc_w_shape, 2), host_tensor(fc_b, kFcBShape, 1),
                        host_tensor(NULL, kDataShape, 4)};
  return loadModel(id, kGraph, names, tensors, 5, 0);
}

static int run(const char *id, float *probabilities) {
  static const uint64_t out_shape[] = {1, 4};
  const char *in_names[] = {"data"}, *out_names[] = {"prob_output"};
  MXTensor in = host_tensor(data, kDataShape, 4), out = host_tensor(probabilities, out_shape, 2);
  return infer(id, in_names, out_names, &in, &out, 1, 1);
}

/* configure() with one key/value pair and "path" (when path is not NULL);
 * the answer's first value goes to answer (when not NULL). */
static int call(const char *key, const char *value, const char *path, char *answer,
                size_t answer_size) {
  const char *keys[] = {key, "path"}, *vals[] = {value, path};
  const char *const *out_keys, *const *out_vals;
  int count = 0;
  int status = configure(keys, vals, path ? 2 : 1, 0, &out_keys, &out_vals, &count);
  if (status == MX_ACC_OK && answer != NULL) {
    snprintf(answer, answer_size, "%s", count > 0 ? out_vals[0] : "");
  }
  return status;
}

static int export_to(const char *id, const char *path) {
  return call("export_model", id, path, NULL, 0);
}

static int import_from(const char *id, const char *path) {
  return call("import_model", id, path, NULL, 0);
}

static int is_loaded(const char *id) {
  float probabilities[4];
  return run(id, probabilities) != MX_ACC_ERR_NOT_FOUND;
}

/* ---- files ---------------------------------------------------------------- */

/* The message of the last import_bytes(). */
static char import_message[1024];

/* Imports bytes written to "damaged.model": the status, after checking that
 * a failed import loaded nothing. A model loaded anyway is unloaded. */
static int import_bytes(const unsigned char *bytes, size_t size) {
  if (!write_all("damaged.model", bytes, size)) return -1;
  int status = import_from("damaged", "damaged.model");
  snprintf(import_message, sizeof import_message, "%s", accGetLastError());
  if (status == MX_ACC_OK) {
    unloadModel("damaged");
  } else if (is_loaded("damaged")) {
    return -2;
  }
  return status;
}

/* ---- tests ---------------------------------------------------------------- */

static float reference[4];

static void test_round_trip(void) {
  char answer[64];
  CHECK(load("original") == MX_ACC_OK);
  CHECK(run("original", reference) == MX_ACC_OK);
  CHECK(call("export_model", "original", "original.model", answer, sizeof answer) == MX_ACC_OK);
  buffer file = read_all("original.model");
  CHECK(file.size > 0 && strtoull(answer, NULL, 10) == file.size);
  CHECK(file.size > 8 && memcmp(file.bytes, "\x89" "CRM\r\n\x1a\n", 8) == 0);
  free(file.bytes);

  CHECK(call("import_model", "imported", "original.model", answer, sizeof answer) == MX_ACC_OK);
  CHECK(strcmp(answer, "imported") == 0);
  float again[4] = {0};
  CHECK(run("imported", again) == MX_ACC_OK && memcmp(again, reference, sizeof again) == 0);
  /* The imported model is an ordinary one: exported again, it gives the
   * same file; unloaded like any other. */
  CHECK(export_to("imported", "again.model") == MX_ACC_OK);
  buffer first = read_all("original.model"), second = read_all("again.model");
  CHECK(first.size == second.size && first.size > 0 &&
        memcmp(first.bytes, second.bytes, first.size) == 0);
  free(first.bytes);
  free(second.bytes);
  CHECK(unloadModel("imported") == MX_ACC_OK);

  /* Many cycles: nothing accumulates. */
  int ok = 1;
  for (int cycle = 0; cycle < 100 && ok; ++cycle) {
    float out[4];
    ok = import_from("cycle", "original.model") == MX_ACC_OK && run("cycle", out) == MX_ACC_OK &&
         memcmp(out, reference, sizeof out) == 0 && unloadModel("cycle") == MX_ACC_OK;
  }
  CHECK(ok);
}

/* Export saves the weights the model holds now: those last given to
 * infer(), not those of loadModel(). */
static void test_export_saves_current_weights(void) {
  static const uint64_t out_shape[] = {1, 4};
  float new_bias[4] = {3.0f, -1.0f, 0.5f, 0.0f}, refreshed[4], imported[4];
  const char *in_names[] = {"data", "fc_b"}, *out_names[] = {"prob_output"};
  MXTensor in[] = {host_tensor(data, kDataShape, 4), host_tensor(new_bias, kFcBShape, 1)};
  MXTensor out = host_tensor(refreshed, out_shape, 2);
  CHECK(infer("original", in_names, out_names, in, &out, 2, 1) == MX_ACC_OK);
  CHECK(memcmp(refreshed, reference, sizeof refreshed) != 0);
  CHECK(export_to("original", "refreshed.model") == MX_ACC_OK);
  CHECK(import_from("refreshed", "refreshed.model") == MX_ACC_OK);
  CHECK(run("refreshed", imported) == MX_ACC_OK &&
        memcmp(imported, refreshed, sizeof imported) == 0);
  CHECK(unloadModel("refreshed") == MX_ACC_OK);
  /* Back to the original weights for the tests below. */
  in[1] = host_tensor(fc_b, kFcBShape, 1);
  CHECK(infer("original", in_names, out_names, in, &out, 2, 1) == MX_ACC_OK &&
        memcmp(refreshed, reference, sizeof refreshed) == 0);
}

static void test_errors(void) {
  const char *const *out_keys, *const *out_vals;
  int count = 0;
  CHECK(export_to("nosuch", "nosuch.model") == MX_ACC_ERR_NOT_FOUND);
  CHECK(strstr(accGetLastError(), "\"nosuch\" is not loaded") != NULL);
  CHECK(import_from("original", "original.model") == MX_ACC_ERR_STATE);
  CHECK(strstr(accGetLastError(), "already loaded") != NULL);
  CHECK(import_from("", "original.model") == MX_ACC_ERR_INVALID_ARG);
  CHECK(import_from("x", "no-such-file.model") == MX_ACC_ERR_INTERNAL);
  CHECK(strstr(accGetLastError(), "No such file or directory") != NULL);
  CHECK(export_to("original", "no-such-directory/x.model") == MX_ACC_ERR_INTERNAL);
  CHECK(strstr(accGetLastError(), "No such file or directory") != NULL);
  CHECK(export_to("original", ".") == MX_ACC_ERR_INTERNAL); /* a directory */
  int status = import_from("x", ".");
  CHECK(status == MX_ACC_ERR_INTERNAL || status == MX_ACC_ERR_INVALID_ARG);
  CHECK(!is_loaded("x"));
  /* "path" is required with, and only with, export_model/import_model. */
  CHECK(call("export_model", "original", NULL, NULL, 0) == MX_ACC_ERR_INVALID_ARG);
  CHECK(call("path", "a.model", NULL, NULL, 0) == MX_ACC_ERR_INVALID_ARG);
  CHECK(call("path", "a.model", "b.model", NULL, 0) == MX_ACC_ERR_INVALID_ARG);
  CHECK(call("import_model", "x", "", NULL, 0) == MX_ACC_ERR_INVALID_ARG);
  const char *both[] = {"export_model", "import_model", "path"};
  const char *both_vals[] = {"original", "x", "original.model"};
  CHECK(configure(both, both_vals, 3, 0, &out_keys, &out_vals, &count) ==
        MX_ACC_ERR_INVALID_ARG);
  const char *keys[] = {"import_model", "path"}, *vals[] = {"x", "original.model"};
  CHECK(configure(keys, vals, 2, 1, &out_keys, &out_vals, &count) == MX_ACC_ERR_DEVICE);
  CHECK(!is_loaded("x"));
  const char *query[] = {"query"}, *query_vals[] = {"keys"};
  CHECK(configure(query, query_vals, 1, 0, &out_keys, &out_vals, &count) == MX_ACC_OK &&
        count == 1 && strstr(out_vals[0], "export_model,import_model,path") != NULL);
}

static void test_truncations_and_flips(void) {
  buffer file = read_all("original.model");
  CHECK(file.size > 100);
  if (file.size <= 100) return;
  unsigned char *copy = malloc(file.size);
  if (copy == NULL) return;

  int refused = 0;
  for (size_t length = 0; length < file.size; ++length) {
    refused += import_bytes(file.bytes, length) == MX_ACC_ERR_INVALID_ARG;
  }
  CHECK(refused == (int)file.size);
  CHECK(strstr(import_message, "offset 20: the header gives a file size of") != NULL);
  /* A byte more is refused as well. */
  memcpy(copy, file.bytes, file.size);
  unsigned char *longer = malloc(file.size + 1);
  if (longer != NULL) {
    memcpy(longer, file.bytes, file.size);
    longer[file.size] = 0;
    CHECK(import_bytes(longer, file.size + 1) == MX_ACC_ERR_INVALID_ARG);
    free(longer);
  }

  /* Every single-byte change is detected (each XXH64 round is a bijection of
   * its lane for a given input word, and the header fields are checked
   * first). */
  refused = 0;
  for (size_t i = 0; i < file.size; ++i) {
    memcpy(copy, file.bytes, file.size);
    copy[i] ^= (unsigned char)(1u + next_random() % 255);
    refused += import_bytes(copy, file.size) == MX_ACC_ERR_INVALID_ARG;
  }
  CHECK(refused == (int)file.size);

  /* Random flips of 2 to 9 bytes. */
  refused = 0;
  for (int trial = 0; trial < 500; ++trial) {
    memcpy(copy, file.bytes, file.size);
    int flips = 2 + (int)(next_random() % 8);
    for (int f = 0; f < flips; ++f) {
      copy[next_random() % file.size] ^= (unsigned char)(1u + next_random() % 255);
    }
    int changed = memcmp(copy, file.bytes, file.size) != 0;
    int status = import_bytes(copy, file.size);
    refused += changed ? status == MX_ACC_ERR_INVALID_ARG : status == MX_ACC_OK;
  }
  CHECK(refused == 500);

  /* Hostile: random flips with the checksum recomputed. Flips inside the
   * weight values, or JSON text that stays a loadable graph (an operator
   * node's name), make a valid file; the rest must be refused, and nothing
   * may crash or leak. */
  int outcomes_ok = 1, accepted = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    memcpy(copy, file.bytes, file.size);
    int flips = 1 + (int)(next_random() % 3);
    for (int f = 0; f < flips; ++f) {
      copy[next_random() % (file.size - 8)] ^= (unsigned char)(1u + next_random() % 255);
    }
    fix_xxh64(copy, file.size);
    int status = import_bytes(copy, file.size);
    outcomes_ok &= status == MX_ACC_OK || status == MX_ACC_ERR_INVALID_ARG;
    accepted += status == MX_ACC_OK;
  }
  CHECK(outcomes_ok);
  CHECK(accepted < 2000);
  printf("hostile flips with a valid checksum: %d of 2000 loaded (weights or names changed)\n",
         accepted);
  free(copy);
  free(file.bytes);
}

/* A field of the file patched to value, checksum recomputed: refused with a
 * message holding expect. */
static void expect_refused(const buffer *file, size_t offset, int width, uint64_t value,
                           const char *expect, int line) {
  unsigned char *copy = malloc(file->size);
  if (copy == NULL) return;
  memcpy(copy, file->bytes, file->size);
  put_le(copy + offset, value, width);
  fix_xxh64(copy, file->size);
  int status = import_bytes(copy, file->size);
  int ok = status == MX_ACC_ERR_INVALID_ARG && strstr(import_message, expect) != NULL;
  if (!ok) fprintf(stderr, "line %d: status %d, message \"%s\"\n", line, status, import_message);
  CHECK(ok);
  free(copy);
}

static void test_hostile_fields(void) {
  buffer file = read_all("original.model");
  CHECK(file.size > 100);
  if (file.size <= 100) return;
  size_t json_length = (size_t)get_le(file.bytes + 28, 8);
  size_t count_at = 36 + json_length, record = count_at + 4; /* first weight: "conv_w" */
  size_t name_length = (size_t)get_le(file.bytes + record, 4);
  size_t dtype_at = record + 4 + name_length, ndim_at = dtype_at + 4, dims_at = ndim_at + 4;
  size_t bytes_at = dims_at + 4 * 8;
  CHECK(name_length == 6 && memcmp(file.bytes + record + 4, "conv_w", 6) == 0);
  CHECK(get_le(file.bytes + bytes_at, 8) == sizeof conv_w);

  expect_refused(&file, 0, 1, 'P', "offset 0: the magic bytes", __LINE__);
  expect_refused(&file, 8, 4, 2, "offset 8: format version 2; this cpu_ref reads version 4",
                 __LINE__);
  expect_refused(&file, 12, 4, 200, "offset 12: written for ABI 2.0", __LINE__);
  expect_refused(&file, 16, 4, 3, "offset 16: unknown flags 0x3", __LINE__);
  expect_refused(&file, 16, 4, 0, "the weight records are not aligned", __LINE__);
  expect_refused(&file, 20, 8, UINT64_MAX, "offset 20: the header gives a file size", __LINE__);
  expect_refused(&file, 28, 8, UINT64_MAX, "offset 36: graph JSON needs 18446744073709551615 "
                 "bytes", __LINE__);
  expect_refused(&file, 28, 8, json_length - 1, "graph JSON", __LINE__);
  expect_refused(&file, 36, 1, '[', "offset 36: graph JSON", __LINE__);
  expect_refused(&file, 40, 1, 0, "offset 36: the graph JSON holds a NUL byte", __LINE__);
  expect_refused(&file, count_at, 4, UINT32_MAX, "4294967295 weights; the graph has 4",
                 __LINE__);
  expect_refused(&file, count_at, 4, 3, "3 weights; the graph has 4", __LINE__);
  expect_refused(&file, record, 4, UINT32_MAX, "weight name needs 4294967295 bytes", __LINE__);
  expect_refused(&file, record, 4, 5, "weight 0 is \"conv_\"", __LINE__);
  expect_refused(&file, record + 4, 1, 'k', "weight 0 is \"konv_w\"; the graph's weight 0 is "
                 "\"conv_w\"", __LINE__);
  expect_refused(&file, dtype_at, 4, kFloat64, "dtype 1, the graph says float32", __LINE__);
  expect_refused(&file, dtype_at, 4, UINT32_MAX, "dtype 4294967295", __LINE__);
  expect_refused(&file, ndim_at, 4, 17, "17 dimensions, the graph says 4", __LINE__);
  expect_refused(&file, ndim_at, 4, UINT32_MAX, "4294967295 dimensions", __LINE__);
  expect_refused(&file, dims_at + 8, 8, UINT64_MAX, "extent 1 is 18446744073709551615",
                 __LINE__);
  expect_refused(&file, bytes_at, 8, UINT64_MAX, "18446744073709551615 bytes, its shape",
                 __LINE__);
  expect_refused(&file, bytes_at, 8, sizeof conv_w - 4, "212 bytes, its shape and dtype take 216",
                 __LINE__);
  /* Version 3: zero padding up to the values' 64-byte boundary. */
  const size_t values_at = (bytes_at + 8 + 63) / 64 * 64;
  if (values_at > bytes_at + 8) {
    expect_refused(&file, bytes_at + 8, 1, 7, "weight \"conv_w\": a padding byte is not zero",
                   __LINE__);
  }
  CHECK(memcmp(file.bytes + values_at, conv_w, sizeof conv_w) == 0);
  /* The plan records after the weights: a count that cannot fit. */
  size_t plans_at = 0;
  {
    size_t at = values_at + sizeof conv_w;
    for (int w = 1; w < 4; ++w) { /* conv_b, fc_w, fc_b: skip each record */
      size_t length = (size_t)get_le(file.bytes + at, 4);
      size_t ndim = (size_t)get_le(file.bytes + at + 4 + length + 4, 4);
      size_t nbytes_at = at + 4 + length + 4 + 4 + 8 * ndim;
      at = (nbytes_at + 8 + 63) / 64 * 64 + (size_t)get_le(file.bytes + nbytes_at, 8);
    }
    plans_at = (at + 63) / 64 * 64;
  }
  CHECK(get_le(file.bytes + plans_at, 4) <= 2); /* the convolution and the FullyConnected */
  expect_refused(&file, plans_at, 4, UINT32_MAX, "plan records do not fit", __LINE__);

  /* Trailing bytes inside the checksummed part, header size adjusted. */
  unsigned char *longer = malloc(file.size + 3);
  if (longer != NULL) {
    memcpy(longer, file.bytes, file.size - 8);
    memset(longer + file.size - 8, 0xAB, 3);
    put_le(longer + 20, file.size + 3, 8);
    fix_xxh64(longer, file.size + 3);
    CHECK(import_bytes(longer, file.size + 3) == MX_ACC_ERR_INVALID_ARG);
    CHECK(strstr(import_message, "3 bytes follow the last plan record") != NULL);
    free(longer);
  }
  /* A graph that parses but that cpu_ref cannot load: act_type "relv". */
  unsigned char *copy = malloc(file.size);
  if (copy != NULL) {
    static const char kActType[] = "\"act_type\":\"relu\"";
    size_t length = sizeof kActType - 1;
    memcpy(copy, file.bytes, file.size);
    unsigned char *found = NULL;
    for (size_t i = 36; i + length <= 36 + json_length && found == NULL; ++i) {
      if (memcmp(copy + i, kActType, length) == 0) found = copy + i;
    }
    CHECK(found != NULL);
    if (found != NULL) {
      found[length - 2] = 'v';
      fix_xxh64(copy, file.size);
      CHECK(import_bytes(copy, file.size) == MX_ACC_ERR_INVALID_ARG);
      CHECK(strstr(import_message, "the graph cannot be loaded") != NULL);
      CHECK(strstr(import_message, "relv") != NULL);
    }
    free(copy);
  }
  /* An empty file, a text file. */
  CHECK(import_bytes((const unsigned char *)"", 0) == MX_ACC_ERR_INVALID_ARG);
  const char text[] = "{\"nodes\": [], \"arg_nodes\": [], \"heads\": []} and some more text";
  CHECK(import_bytes((const unsigned char *)text, sizeof text - 1) == MX_ACC_ERR_INVALID_ARG);
  free(file.bytes);
}

/* A file of format version 1 (its checksum FNV-1a 64, check.h's
 * fix_checksum), 2 or 3 (filters packed in the old k blocks, every
 * BatchNorm step's folded filters) is refused by its version, never read as
 * version 4; the same bytes with version 4's number and the old checksum
 * fail the checksum. */
static void test_old_version_refused(void) {
  buffer file = read_all("original.model");
  CHECK(file.size > 100);
  if (file.size <= 100) return;
  unsigned char *copy = malloc(file.size);
  if (copy == NULL) return;
  memcpy(copy, file.bytes, file.size);
  put_le(copy + 8, 1, 4);
  fix_checksum(copy, file.size);
  CHECK(import_bytes(copy, file.size) == MX_ACC_ERR_INVALID_ARG);
  CHECK(strstr(import_message, "offset 8: format version 1; this cpu_ref reads version 4") !=
        NULL);
  memcpy(copy, file.bytes, file.size);
  put_le(copy + 8, 2, 4); /* version 2: unaligned records, no plans */
  fix_xxh64(copy, file.size);
  CHECK(import_bytes(copy, file.size) == MX_ACC_ERR_INVALID_ARG);
  CHECK(strstr(import_message, "offset 8: format version 2; this cpu_ref reads version 4") !=
        NULL);
  memcpy(copy, file.bytes, file.size);
  put_le(copy + 8, 3, 4); /* version 3: old k blocks, every folded filter */
  fix_xxh64(copy, file.size);
  CHECK(import_bytes(copy, file.size) == MX_ACC_ERR_INVALID_ARG);
  CHECK(strstr(import_message, "offset 8: format version 3; this cpu_ref reads version 4") !=
        NULL);
  memcpy(copy, file.bytes, file.size);
  fix_checksum(copy, file.size);
  CHECK(import_bytes(copy, file.size) == MX_ACC_ERR_INVALID_ARG);
  CHECK(strstr(import_message, "checksum") != NULL && strstr(import_message, "XXH64") != NULL);
  free(copy);
  free(file.bytes);
}

int main(void) {
  CHECK(initialize(MX_ACC_API_VERSION) == MX_ACC_OK);
  fill(data, 50, 1.0f);
  fill(conv_w, 54, 0.5f);
  fill(conv_b, 3, 0.1f);
  fill(fc_w, 48, 0.3f);
  fill(fc_b, 4, 0.2f);
  test_round_trip();
  test_export_saves_current_weights();
  test_errors();
  test_truncations_and_flips();
  test_hostile_fields();
  test_old_version_refused();
  CHECK(unloadModel("original") == MX_ACC_OK);
  CHECK(fabsf(reference[0] + reference[1] + reference[2] + reference[3] - 1.0f) < 1e-5f);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
