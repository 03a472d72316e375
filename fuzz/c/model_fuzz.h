/*
 * What the model-file harnesses (mlu_model_fuzz.c, cpu_ref_model_fuzz.c)
 * share. Each is compiled together with one plugin's sources and drives it
 * through its ABI entry points, as the host would:
 *
 *   1. the input is the file. Its size field (offset 20) and its checksum
 *      (the last 8 bytes: XXH64 for both plugins) are
 *      recomputed first, as a hostile writer would do, so that mutations
 *      reach the body instead of stopping at the checksum (the envelope's
 *      size and checksum checks are tested exhaustively in tests/c/);
 *   2. configure(import_model=ID, path=FILE) on a device;
 *   3. refused: the status must be MX_ACC_ERR_INVALID_ARG or
 *      MX_ACC_ERR_UNSUPPORTED with a message naming import_model, and no
 *      model may be left under ID;
 *      accepted: the model is run once on inputs of the annotated shapes
 *      (when they total at most kMaxRunBytes), exported again, and unloaded.
 * Anything else (another status, an empty message, a crash, a sanitizer
 * report, a leak, a hang, an allocation beyond -malloc_limit_mb) is a bug.
 *
 * The harness file defines FUZZ_CHECKSUM (ACC_BIN_XXH64 or ACC_BIN_FNV1A)
 * and FUZZ_DEVICE before including this header.
 */
#ifndef FUZZ_MODEL_FUZZ_H_
#define FUZZ_MODEL_FUZZ_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binfile.h"
#include "graph.h"
#include "mxnet_acc.h"
#include "tensor.h"

/* The plugin's entry points are linked in; mxnet_acc.h declares them. */

enum {
  kMaxInput = 1 << 20,        /* run.py passes a smaller -max_len */
  kMaxRunBytes = 16 << 20,    /* inputs and outputs of one run together */
  kMaxTensors = 64            /* data inputs, outputs */
};

static char file_path[64], export_path[64];
static int verbose; /* ACC_FUZZ_VERBOSE=1: print what import answers */

static void fuzz_fail(const char *what, int status) {
  fprintf(stderr, "model fuzz: %s (status %d): %s\n", what, status, accGetLastError());
  abort();
}

static int fuzz_configure(const char *key, const char *value, const char *path, int dev_id) {
  const char *keys[] = {key, "path"}, *vals[] = {value, path};
  const char *const *out_keys, *const *out_vals;
  int count = 0;
  return configure(keys, vals, path ? 2 : 1, dev_id, &out_keys, &out_vals, &count);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *dir = getenv("TMPDIR");
  snprintf(file_path, sizeof file_path, "%s/fuzz-%ld.model", dir ? dir : "/tmp", (long)getpid());
  snprintf(export_path, sizeof export_path, "%s/fuzz-%ld.export", dir ? dir : "/tmp",
           (long)getpid());
  verbose = getenv("ACC_FUZZ_VERBOSE") != NULL;
  if (initialize(MX_ACC_API_VERSION) != MX_ACC_OK) fuzz_fail("initialize", -1);
  fuzz_init_device();
  return 0;
}

static void remove_files(void) {
  remove(file_path);
  remove(export_path);
}

/* Runs the model once with the data inputs and outputs its graph annotates. */
static void run_imported(const char *json, size_t json_length) {
  char *text = malloc(json_length + 1), error[256];
  if (text == NULL) return;
  memcpy(text, json, json_length);
  text[json_length] = '\0';
  acc_graph *graph = NULL;
  if (acc_graph_parse(text, 1, &graph, error, sizeof error) != MX_ACC_OK) {
    /* The plugin accepted a graph the common parser refuses. */
    fprintf(stderr, "model fuzz: imported graph does not parse: %s\n", error);
    abort();
  }
  const char *in_names[kMaxTensors];
  char *out_names[kMaxTensors];
  MXTensor in[kMaxTensors], out[kMaxTensors];
  void *buffers[2 * kMaxTensors];
  int num_in = 0, num_out = 0, num_buffers = 0, runnable = 1;
  uint64_t total = 0;
  for (size_t i = 0; i < graph->num_nodes && runnable; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->op != NULL || node->kind != ACC_VAR_DATA) continue;
    size_t bytes = 0;
    if (num_in == kMaxTensors ||
        acc_shape_bytes(&node->out_shapes[0], acc_dtype_size(node->out_dtypes[0]), "input",
                        &bytes) != MX_ACC_OK || bytes > kMaxRunBytes - total) {
      runnable = 0;
      break;
    }
    total += bytes;
    void *data = malloc(bytes ? bytes : 1);
    if (data == NULL) {
      runnable = 0;
      break;
    }
    for (size_t b = 0; b < bytes; ++b) ((unsigned char *)data)[b] = (unsigned char)(b * 7 % 61);
    buffers[num_buffers++] = data;
    in_names[num_in] = node->name;
    in[num_in] = (MXTensor){data, node->out_shapes[0].dims, (uint64_t)node->out_shapes[0].ndim,
                            node->out_dtypes[0], 0, NULL, MX_ACC_HOST_DEVICE};
    ++num_in;
  }
  for (size_t h = 0; h < graph->num_heads && runnable; ++h) {
    acc_entry head = graph->heads[h];
    const acc_node *node = &graph->nodes[head.node];
    size_t bytes = 0;
    char name[512];
    if (num_out == kMaxTensors || (int)head.index >= node->num_outputs ||
        acc_graph_output_name(graph, head, name, sizeof name) != 0 ||
        acc_shape_bytes(&node->out_shapes[head.index], acc_dtype_size(node->out_dtypes[head.index]),
                        "output", &bytes) != MX_ACC_OK || bytes > kMaxRunBytes - total) {
      runnable = 0;
      break;
    }
    /* Heads naming the same output more than once: the plugin refuses, fine. */
    total += bytes;
    void *data = malloc(bytes ? bytes : 1);
    out_names[num_out] = malloc(strlen(name) + 1);
    if (out_names[num_out] != NULL) memcpy(out_names[num_out], name, strlen(name) + 1);
    if (data == NULL || out_names[num_out] == NULL) {
      free(data);
      free(out_names[num_out]);
      runnable = 0;
      break;
    }
    buffers[num_buffers++] = data;
    out[num_out] = (MXTensor){data, node->out_shapes[head.index].dims,
                              (uint64_t)node->out_shapes[head.index].ndim,
                              node->out_dtypes[head.index], 0, NULL, MX_ACC_HOST_DEVICE};
    ++num_out;
  }
  if (runnable) {
    int status = infer("fuzz", in_names, (const char *const *)out_names, in, out, num_in, num_out);
    /* A model that loaded may still fail to run (e.g. two heads with one
     * name); it must say why. */
    if (status != MX_ACC_OK && accGetLastError()[0] == '\0') fuzz_fail("infer, no message", status);
  }
  for (int i = 0; i < num_buffers; ++i) free(buffers[i]);
  for (int i = 0; i < num_out; ++i) free(out_names[i]);
  acc_graph_free(graph);
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInput) return -1;
  unsigned char *bytes = malloc(size ? size : 1);
  if (bytes == NULL) return 0;
  memcpy(bytes, data, size);
  if (size >= ACC_BIN_HEADER_SIZE + ACC_BIN_CHECKSUM_SIZE) {
    acc_bin_put_le(bytes + ACC_BIN_SIZE_OFFSET, size, 8);
    uint64_t sum = FUZZ_CHECKSUM == ACC_BIN_XXH64
                       ? acc_xxh64(bytes, size - ACC_BIN_CHECKSUM_SIZE, 0)
                       : acc_fnv1a(ACC_FNV1A_BASIS, bytes, size - ACC_BIN_CHECKSUM_SIZE);
    acc_bin_put_le(bytes + size - ACC_BIN_CHECKSUM_SIZE, sum, 8);
  }
  FILE *file = fopen(file_path, "wb");
  if (file == NULL || fwrite(bytes, 1, size, file) != size || fclose(file) != 0) {
    fuzz_fail("cannot write the input file", 0);
  }
  int status = fuzz_configure("import_model", "fuzz", file_path, FUZZ_DEVICE);
  if (verbose) fprintf(stderr, "import: status %d: %s\n", status, accGetLastError());
  if (status == MX_ACC_OK) {
    /* The graph JSON lies at offset 36 (binfile.h), its length at 28. */
    uint64_t json_length = acc_bin_get_le(bytes + 28, 8);
    run_imported((const char *)bytes + 36, (size_t)json_length);
    status = fuzz_configure("export_model", "fuzz", export_path, FUZZ_DEVICE);
    if (status != MX_ACC_OK && status != MX_ACC_ERR_UNSUPPORTED) {
      fuzz_fail("export of an imported model", status);
    }
    status = unloadModel("fuzz");
    if (status != MX_ACC_OK) fuzz_fail("unloadModel of an imported model", status);
  } else {
    const char *message = accGetLastError();
    if (status != MX_ACC_ERR_INVALID_ARG && status != MX_ACC_ERR_UNSUPPORTED) {
      fuzz_fail("import refused with an unexpected status", status);
    }
    if (strncmp(message, "import_model: ", 14) != 0) fuzz_fail("import message", status);
    if (unloadModel("fuzz") != MX_ACC_ERR_NOT_FOUND) fuzz_fail("a refused model is loaded", 0);
  }
  remove_files();
  free(bytes);
  return 0;
}

#endif /* FUZZ_MODEL_FUZZ_H_ */
