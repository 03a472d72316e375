/*
 * Where the time of an mlu_sim offline-model import goes, inside the plugin
 * (driven by benchmarks/compile_cache.py, which builds this file with the
 * plugins' release flags together with the mlu_sim and common sources and
 * exports the model files).
 *
 * Usage: bench_model_file FILE REPEAT
 * FILE is a model file written by export_model. Prints one line per step,
 * "<step> <median milliseconds>":
 *   read       fopen + fread of the whole file into fresh memory
 *   xxh64      the format's checksum over the bytes in memory (version 3)
 *   fnv1a      byte-wise FNV-1a 64 over the same bytes (version 2's)
 *   load       acc_bin_load_with: read + streamed XXH64 + header checks
 *   import     configure import_model (all of it), then unloadModel (not timed)
 *   loadmodel  loadModel of the file's graph and weights (a cold compile)
 * "import" minus "load" is the parse, checks, program verification and
 * model reconstruction (BaseOps, constants uploaded to the card).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "binfile.h"
#include "mxnet_acc.h"

static double now_ms(void) {
  struct timespec t;
  timespec_get(&t, TIME_UTC);
  return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *values, int count) {
  qsort(values, (size_t)count, sizeof *values, compare);
  return count % 2 ? values[count / 2] : 0.5 * (values[count / 2 - 1] + values[count / 2]);
}

static unsigned char *read_whole(const char *path, size_t *size) {
  FILE *file = fopen(path, "rb");
  if (file == NULL) return NULL;
  unsigned char *bytes = NULL;
  if (fseek(file, 0, SEEK_END) == 0) {
    long end = ftell(file);
    if (end > 0 && fseek(file, 0, SEEK_SET) == 0 && (bytes = malloc((size_t)end)) != NULL &&
        fread(bytes, 1, (size_t)end, file) != (size_t)end) {
      free(bytes);
      bytes = NULL;
    }
    *size = end > 0 ? (size_t)end : 0;
  }
  fclose(file);
  return bytes;
}

static int configure_one(const char *key, const char *value, const char *path) {
  const char *keys[] = {key, "path"}, *vals[] = {value, path};
  const char *const *out_keys, *const *out_vals;
  int count = 0;
  return configure(keys, vals, 2, 0, &out_keys, &out_vals, &count);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: bench_model_file FILE REPEAT\n");
    return 2;
  }
  const char *path = argv[1];
  int repeat = atoi(argv[2]);
  if (repeat < 1) repeat = 1;
  if (initialize(MX_ACC_API_VERSION) != MX_ACC_OK) {
    fprintf(stderr, "initialize: %s\n", accGetLastError());
    return 1;
  }
  size_t size = 0;
  unsigned char *file = read_whole(path, &size);
  if (file == NULL || size < ACC_BIN_HEADER_SIZE + ACC_BIN_CHECKSUM_SIZE) {
    fprintf(stderr, "cannot read %s\n", path);
    return 1;
  }
  /* The graph section: the JSON and the weights, for loadModel. */
  acc_bin_reader reader = {file, size - ACC_BIN_CHECKSUM_SIZE, ACC_BIN_HEADER_SIZE,
                           ACC_BIN_HEADER_SIZE, path, "model"};
  acc_bin_graph g = {0};
  if (acc_bin_read_graph(&reader, &g) != MX_ACC_OK) {
    fprintf(stderr, "%s\n", accGetLastError());
    return 1;
  }
  size_t variables = 0;
  for (size_t i = 0; i < g.graph->num_nodes; ++i) variables += g.graph->nodes[i].op == NULL;
  const char **names = calloc(variables + 1, sizeof *names);
  MXTensor *tensors = calloc(variables + 1, sizeof *tensors);
  double *times = calloc((size_t)repeat, sizeof *times);
  if (names == NULL || tensors == NULL || times == NULL) return 1;
  size_t count = 0, weight = 0;
  for (size_t i = 0; i < g.graph->num_nodes; ++i) {
    const acc_node *node = &g.graph->nodes[i];
    if (node->op != NULL) continue;
    names[count] = node->name;
    if (node->kind == ACC_VAR_WEIGHT) {
      tensors[count] = g.tensors[weight++];
    } else {
      tensors[count] = (MXTensor){NULL, node->out_shapes[0].dims, (uint32_t)node->out_shapes[0].ndim,
                                  node->out_dtypes[0], 0, NULL, MX_ACC_HOST_DEVICE};
    }
    count += 1;
  }

  volatile uint64_t sink = 0;
  size_t summed = size - ACC_BIN_CHECKSUM_SIZE;
  for (int step = 0; step < 6; ++step) {
    static const char *const kSteps[] = {"read", "xxh64", "fnv1a", "load", "import",
                                         "loadmodel"};
    for (int r = 0; r < repeat; ++r) {
      double start = now_ms(), stop = start;
      int status = MX_ACC_OK;
      if (step == 0) {
        size_t got = 0;
        unsigned char *bytes = read_whole(path, &got);
        stop = now_ms();
        status = bytes != NULL && got == size ? MX_ACC_OK : MX_ACC_ERR_INTERNAL;
        free(bytes);
      } else if (step == 1) {
        sink ^= acc_xxh64(file, summed, 0);
        stop = now_ms();
      } else if (step == 2) {
        sink ^= acc_fnv1a(ACC_FNV1A_BASIS, file, summed);
        stop = now_ms();
      } else if (step == 3) {
        unsigned char *bytes = NULL;
        acc_bin_reader r2;
        static const unsigned char kMagic[8] = {0x89, 'M', 'L', 'U', '\r', '\n', 0x1a, '\n'};
        static const acc_bin_format kFormat = {kMagic, 3, "mlu_sim", "model", "a model",
                                               "model", ACC_BIN_HEADER_SIZE + 8, (uint64_t)1 << 30,
                                               "MAX"};
        status = acc_bin_load_with(&kFormat, ACC_BIN_XXH64, path, &bytes, &r2);
        stop = now_ms();
        free(bytes);
      } else if (step == 4) {
        status = configure_one("import_model", "bench", path);
        stop = now_ms();
        if (status == MX_ACC_OK) status = unloadModel("bench");
      } else {
        status = loadModel("bench", g.json, names, tensors, (int)count, 0);
        stop = now_ms();
        if (status == MX_ACC_OK) status = unloadModel("bench");
      }
      if (status != MX_ACC_OK) {
        fprintf(stderr, "%s: %s\n", kSteps[step], accGetLastError());
        return 1;
      }
      times[r] = stop - start;
    }
    printf("%s %.4f\n", kSteps[step], median(times, repeat));
  }
  printf("bytes %zu\n", size);
  acc_bin_graph_free(&g);
  free(names);
  free(tensors);
  free(times);
  free(file);
  printf("checksums %016llx\n", (unsigned long long)sink);
  return 0;
}
