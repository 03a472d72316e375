/*
 * mlu_sim's offline models (configure "export_model"/"import_model",
 * plugins/mlu_sim/model_file.c) through the ABI entry points, linked
 * directly so that AddressSanitizer, LeakSanitizer and UBSan watch every
 * path: export -> import (on the same and on another card) gives bitwise
 * the same outputs without compiling; weights given again to infer() after
 * import behave as after loadModel(); every truncation, every single-bit
 * flip of an exported file is refused with MX_ACC_ERR_INVALID_ARG (the
 * format's XXH64 checksum is checked against known answers, and a file
 * with version 2's FNV-1a checksum is refused); hostile
 * length fields and random changes with the checksum recomputed (so that
 * only the reader's checks stand between them and the simulator) are
 * refused or load a model that runs, never crashing or leaking; an int8
 * instruction whose workspace would exceed the on-chip memory is refused.
 * Prints "N passed, N failed"; exits non-zero on failure.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binfile.h"
#include "check.h"
#include "isa.h"
#include "mlu_fixture.h"
#include "mxnet_acc.h"

/* The format's checksum (XXH64, seed 0, of everything before the last 8
 * bytes), written into the last 8 bytes (size >= 8): what a hostile writer
 * would do. */
static void fix_xxh64(unsigned char *bytes, size_t size) {
  put_le(bytes + size - 8, acc_xxh64(bytes, size - 8, 0), 8);
}

/* configure(dev_id) with key=value and "path" (when not NULL); the value
 * answered for answer_key goes to answer (when not NULL). */
static int call(int dev_id, const char *key, const char *value, const char *path,
                const char *answer_key, char *answer, size_t answer_size) {
  const char *keys[] = {key, "path"}, *vals[] = {value, path};
  const char *const *out_keys, *const *out_vals;
  int count = 0;
  int status = configure(keys, vals, path ? 2 : 1, dev_id, &out_keys, &out_vals, &count);
  if (status == MX_ACC_OK && answer != NULL) {
    snprintf(answer, answer_size, "?");
    for (int i = 0; i < count; ++i) {
      if (strcmp(out_keys[i], answer_key) == 0) snprintf(answer, answer_size, "%s", out_vals[i]);
    }
  }
  return status;
}

static int export_to(const char *id, int dev_id, const char *path) {
  return call(dev_id, "export_model", id, path, NULL, NULL, 0);
}

static int import_from(const char *id, int dev_id, const char *path) {
  return call(dev_id, "import_model", id, path, NULL, NULL, 0);
}

static long long stat_of(int dev_id, const char *query, const char *key) {
  char text[64];
  if (call(dev_id, "query", query, NULL, key, text, sizeof text) != MX_ACC_OK) return -1;
  return strtoll(text, NULL, 10);
}

static int is_loaded(const char *id) {
  float probabilities[4];
  return run_model(id, probabilities, -1) != MX_ACC_ERR_NOT_FOUND;
}

/* ---- files ------------------------------------------------------------------------------- */

static char import_message[1024];

/* Imports bytes (written to "damaged.model") as "damaged" on card 1: the
 * status. A model loaded anyway is run and unloaded; -2 if a failed import
 * left a model behind, -3 if a loaded one cannot be unloaded. */
static int import_bytes(const unsigned char *bytes, size_t size) {
  if (!write_all("damaged.model", bytes, size)) return -1;
  int status = import_from("damaged", 1, "damaged.model");
  snprintf(import_message, sizeof import_message, "%s", accGetLastError());
  if (status == MX_ACC_OK) {
    float probabilities[4];
    run_model("damaged", probabilities, -1); /* may fail; must not crash */
    if (unloadModel("damaged") != MX_ACC_OK) return -3;
  } else if (is_loaded("damaged")) {
    return -2;
  }
  return status;
}

/* Offsets of the fields of an exported file (one segment), found by walking
 * it as the format describes. */
typedef struct layout {
  size_t json_length, weight_count, first_weight_length, segment_count, node_count,
      input_count, output_count, sram_words, const_length, insn_count, first_insn;
} layout;

static layout walk(const buffer *file) {
  layout l;
  memset(&l, 0, sizeof l);
  size_t at = 28;
  l.json_length = at;
  at += 8 + (size_t)get_le(file->bytes + at, 8);
  l.weight_count = at;
  uint32_t weights = (uint32_t)get_le(file->bytes + at, 4);
  at += 4;
  l.first_weight_length = at;
  for (uint32_t w = 0; w < weights; ++w) {
    at += 4 + (size_t)get_le(file->bytes + at, 4) + 4; /* name, dtype */
    uint32_t ndim = (uint32_t)get_le(file->bytes + at, 4);
    at += 4 + 8 * (size_t)ndim;
    at += 8 + (size_t)get_le(file->bytes + at, 8);
  }
  l.segment_count = at;
  at += 4;
  l.node_count = at;
  uint32_t nodes = (uint32_t)get_le(file->bytes + at, 4);
  at += 4 + 4 * (size_t)nodes + 4; /* nodes, launch */
  l.input_count = at;
  uint32_t inputs = (uint32_t)get_le(file->bytes + at, 4);
  at += 4 + 4 * (size_t)inputs;
  l.output_count = at;
  uint32_t outputs = (uint32_t)get_le(file->bytes + at, 4);
  at += 4 + 4 * (size_t)outputs;
  at += 8 * ((size_t)inputs + outputs) + 4 + 8 * 21; /* I/O bytes, opcodes, report */
  l.sram_words = at - 3 * 8; /* the report's third field from the end */
  l.const_length = at;
  at += 8 + (size_t)get_le(file->bytes + at, 8);
  l.insn_count = at;
  l.first_insn = at + 8;
  return l;
}

/* ---- tests ------------------------------------------------------------------------------- */

static float first[4];

static void test_round_trip(void) {
  for (int i = 0; i < kNumVars; ++i) fill(var_values[i], 75, 900u + (unsigned)i);
  for (int i = 0; i < 3; ++i) var_values[5][i] = fabsf(var_values[5][i]) + 0.5f; /* variances */
  CHECK(load_model("m", 0) == MX_ACC_OK);
  CHECK(run_model("m", first, -1) == MX_ACC_OK);
  CHECK(fabsf(first[0] + first[1] + first[2] + first[3] - 1.0f) < 1e-5f);
  char answer[64];
  CHECK(call(0, "export_model", "m", "m.model", "exported", answer, sizeof answer) == MX_ACC_OK);
  buffer file = read_all("m.model");
  CHECK(file.size > 0 && strtoull(answer, NULL, 10) == file.size);
  free(file.bytes);

  /* Import on card 0 and on card 1: no compile, the same bits. */
  for (int card = 0; card < 2; ++card) {
    long long compiles = stat_of(card, "stats", "compiles");
    const char *id = card == 0 ? "same_card" : "other_card";
    CHECK(import_from(id, card, "m.model") == MX_ACC_OK);
    CHECK(stat_of(card, "stats", "compiles") == compiles);
    float again[4] = {0};
    CHECK(run_model(id, again, -1) == MX_ACC_OK);
    CHECK(memcmp(again, first, sizeof first) == 0);
    CHECK(import_from(id, card, "m.model") == MX_ACC_ERR_STATE); /* the id is taken */
  }
  char segments[16];
  CHECK(call(0, "model_info", "other_card", NULL, "segments", segments, sizeof segments) ==
            MX_ACC_OK && strcmp(segments, "1") == 0);
  CHECK(call(0, "model_info", "other_card", NULL, "folded_batchnorms", segments,
             sizeof segments) == MX_ACC_OK && strcmp(segments, "1") == 0);
  CHECK(export_to("other_card", 0, "x.model") == MX_ACC_ERR_INVALID_ARG); /* not its device */
  CHECK(export_to("nothing", 0, "x.model") == MX_ACC_ERR_NOT_FOUND);

  /* Weights given again after import: rebound and recompiled exactly as
   * after loadModel (compared with the loaded model, bit for bit). */
  for (int w = 0; w < 8; ++w) {
    for (int i = 0; i < 75; ++i) var_values[w][i] *= w == 5 ? 2.0f : -1.0f;
    float loaded[4] = {0}, imported[4] = {0};
    long long compiles = stat_of(1, "stats", "compiles");
    CHECK(run_model("m", loaded, w) == MX_ACC_OK);
    CHECK(run_model("other_card", imported, w) == MX_ACC_OK);
    CHECK(memcmp(loaded, imported, sizeof loaded) == 0 && memcmp(loaded, first, sizeof first));
    /* offset (6) flows as data: no recompile; the others are parameters */
    CHECK(stat_of(1, "stats", "compiles") == compiles + (w == 6 ? 0 : 1));
    if (w == 2) { /* an export after a weight change carries the new values */
      CHECK(export_to("other_card", 1, "changed.model") == MX_ACC_OK);
      CHECK(import_from("changed", 0, "changed.model") == MX_ACC_OK);
      float again[4] = {0};
      CHECK(run_model("changed", again, -1) == MX_ACC_OK);
      CHECK(memcmp(again, loaded, sizeof again) == 0);
      CHECK(unloadModel("changed") == MX_ACC_OK);
    }
    for (int i = 0; i < 75; ++i) var_values[w][i] /= w == 5 ? 2.0f : -1.0f;
    CHECK(run_model("m", loaded, w) == MX_ACC_OK);
    CHECK(run_model("other_card", imported, w) == MX_ACC_OK);
    CHECK(memcmp(loaded, imported, sizeof loaded) == 0);
  }
  CHECK(unloadModel("same_card") == MX_ACC_OK);
  CHECK(unloadModel("other_card") == MX_ACC_OK);
}

static void test_bad_calls(void) {
  CHECK(import_from("x", 0, "does-not-exist.model") == MX_ACC_ERR_INTERNAL);
  CHECK(import_from("", 0, "m.model") == MX_ACC_ERR_INVALID_ARG);
  CHECK(call(0, "import_model", "x", NULL, NULL, NULL, 0) == MX_ACC_ERR_INVALID_ARG); /* no path */
  CHECK(call(0, "path", "m.model", NULL, NULL, NULL, 0) == MX_ACC_ERR_INVALID_ARG);
  CHECK(import_from("x", 0, "") == MX_ACC_ERR_INVALID_ARG);
  CHECK(export_to("m", 0, "no-such-dir/m.model") == MX_ACC_ERR_INTERNAL);
  char keys[512];
  CHECK(call(0, "query", "keys", NULL, "keys", keys, sizeof keys) == MX_ACC_OK);
  CHECK(strstr(keys, "export_model") != NULL && strstr(keys, "import_model") != NULL &&
        strstr(keys, "path") != NULL);
  static const unsigned char garbage[] = "this is not a model file, not at all, not even close.";
  CHECK(import_bytes(garbage, sizeof garbage) == MX_ACC_ERR_INVALID_ARG);
  CHECK(strstr(import_message, "not a valid mlu_sim offline model") != NULL);
  CHECK(import_bytes(garbage, 0) == MX_ACC_ERR_INVALID_ARG);
}

/* XXH64 against known answers: bytes (7 i + 3) mod 256, i = 0 .. n - 1;
 * the low 32 bits of each agree with zstd's frame checksum of the same
 * bytes (which is XXH64's low half), and n = 0 is the specification's
 * 0xEF46DB3751D8E999. Fed in uneven pieces, the streamed hash agrees. */
static void test_xxh64(void) {
  static const struct {
    size_t length;
    uint64_t hash;
  } kAnswers[] = {
      {0, UINT64_C(0xef46db3751d8e999)},      {1, UINT64_C(0x1f25c8d0bc1f4bb6)},
      {3, UINT64_C(0x31d2363f52e564c9)},      {4, UINT64_C(0x9bb64b7d66ee9fda)},
      {8, UINT64_C(0xdab99d95c6f90092)},      {31, UINT64_C(0xa2aa5f33cc4a6119)},
      {32, UINT64_C(0x23c3c17ef790fd97)},     {33, UINT64_C(0x50a7cfc7ba588784)},
      {100, UINT64_C(0xa61f8d4c170fe531)},    {1000, UINT64_C(0x5f235fa033f1a3fb)},
      {100003, UINT64_C(0x924a64f3ae9ea839)},
  };
  unsigned char *bytes = malloc(100003);
  if (bytes == NULL) {
    CHECK(0);
    return;
  }
  for (size_t i = 0; i < 100003; ++i) bytes[i] = (unsigned char)((7 * i + 3) & 0xff);
  for (size_t k = 0; k < sizeof kAnswers / sizeof kAnswers[0]; ++k) {
    size_t n = kAnswers[k].length;
    CHECK(acc_xxh64(bytes, n, 0) == kAnswers[k].hash);
    acc_xxh64_state state;
    acc_xxh64_init(&state, 0);
    for (size_t at = 0, step = 1; at < n; step = step * 5 % 67 + 1) {
      size_t take = step < n - at ? step : n - at;
      acc_xxh64_update(&state, bytes + at, take);
      at += take;
    }
    CHECK(acc_xxh64_digest(&state) == kAnswers[k].hash);
  }
  free(bytes);
}

static void test_every_truncation_and_bit_flip(void) {
  buffer file = read_all("m.model");
  CHECK(file.size > 100);
  if (file.size == 0) return;
  int truncations = 1, flips = 1;
  for (size_t length = 0; length < file.size; ++length) {
    truncations &= import_bytes(file.bytes, length) == MX_ACC_ERR_INVALID_ARG;
  }
  CHECK(truncations);
  unsigned char *copy = malloc(file.size + 1);
  for (size_t i = 0; copy != NULL && i < file.size; ++i) {
    memcpy(copy, file.bytes, file.size);
    copy[i] ^= (unsigned char)(1u << (i % 8));
    flips &= import_bytes(copy, file.size) == MX_ACC_ERR_INVALID_ARG;
  }
  CHECK(flips);
  if (copy != NULL) { /* version 2's checksum (byte-wise FNV-1a) under version 3 */
    memcpy(copy, file.bytes, file.size);
    fix_checksum(copy, file.size);
    CHECK(import_bytes(copy, file.size) == MX_ACC_ERR_INVALID_ARG);
    CHECK(strstr(import_message, "checksum") != NULL);
  }
  if (copy != NULL) { /* one byte too many */
    memcpy(copy, file.bytes, file.size);
    copy[file.size] = 0;
    CHECK(import_bytes(copy, file.size + 1) == MX_ACC_ERR_INVALID_ARG);
  }
  free(copy);
  free(file.bytes);
}

/* Sets the width-byte field at offset to value, fixes the checksum and
 * imports: the status. */
static int import_with(const buffer *file, size_t offset, uint64_t value, int width) {
  unsigned char *copy = malloc(file->size);
  if (copy == NULL) return -1;
  memcpy(copy, file->bytes, file->size);
  put_le(copy + offset, value, width);
  fix_xxh64(copy, file->size);
  int status = import_bytes(copy, file->size);
  free(copy);
  return status;
}

static void test_hostile_fields(void) {
  buffer file = read_all("m.model");
  if (file.size == 0) {
    CHECK(0);
    return;
  }
  layout l = walk(&file);
  CHECK(get_le(file.bytes + l.segment_count, 4) == 1);
  CHECK(get_le(file.bytes + l.first_insn + 0, 1) <= 8); /* an opcode */
  const struct {
    size_t offset;
    int width;
    uint64_t value;
  } cases[] = {
      {0, 1, 0x88},                          /* magic */
      {8, 4, 1},                             /* format version 1 (pre-int8) */
      {8, 4, 2},                             /* version 2 (FNV-1a checksum) */
      {8, 4, 4},                             /* a later format version */
      {12, 4, 200},                          /* ABI 2.0 */
      {16, 4, 1},                            /* flags */
      {20, 8, file.size - 1},                /* size */
      {20, 8, UINT64_MAX},
      {l.json_length, 8, UINT64_MAX},        /* lengths beyond the file */
      {l.json_length, 8, file.size},
      {l.json_length, 8, 3},                 /* a JSON that does not parse */
      {l.weight_count, 4, 0xFFFFFFFF},
      {l.weight_count, 4, 0},
      {l.first_weight_length, 4, 0xFFFFFFFF},
      {l.segment_count, 4, 0xFFFFFFFF},
      {l.segment_count, 4, 0},
      {l.segment_count, 4, 2},
      {l.node_count, 4, 0xFFFFFFFF},
      {l.node_count, 4, 0},
      {l.input_count, 4, 0xFFFFFFFF},
      {l.input_count, 4, 257},
      {l.output_count, 4, 0},
      {l.output_count, 4, 0xFFFFFFFF},
      {l.const_length, 8, UINT64_MAX},
      {l.const_length, 8, UINT64_C(1) << 40},
      {l.insn_count, 8, UINT64_MAX},
      {l.insn_count, 8, UINT64_C(1) << 62},
      {l.insn_count, 8, 0},
      {l.first_insn, 1, 200},                /* unknown opcode */
      {l.first_insn, 1, 8},                  /* SYNC first */
      {l.first_insn + 1, 1, 77},             /* unknown dtype */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    int status = import_with(&file, cases[i].offset, cases[i].value, cases[i].width);
    if (status != MX_ACC_ERR_INVALID_ARG) {
      fprintf(stderr, "hostile case %zu (offset %zu): status %d: %s\n", i, cases[i].offset,
              status, import_message);
    }
    CHECK(status == MX_ACC_ERR_INVALID_ARG);
  }
  /* Every 8-byte field of the instructions set to hostile values in turn,
   * checksum fixed: refused, or (where the value is harmless) loaded and
   * run, never a crash. */
  const uint64_t hostile[] = {UINT64_MAX, UINT64_C(1) << 40, 0};
  int refused = 0, loaded = 0, clean = 1;
  for (size_t at = l.first_insn; at + 8 <= file.size - 8; at += 4) {
    for (size_t v = 0; v < sizeof hostile / sizeof hostile[0]; ++v) {
      int status = import_with(&file, at, hostile[v], 8);
      refused += status == MX_ACC_ERR_INVALID_ARG;
      loaded += status == MX_ACC_OK;
      clean &= status == MX_ACC_OK || status == MX_ACC_ERR_INVALID_ARG;
    }
  }
  CHECK(clean && refused > 0);
  printf("instruction fields: %d hostile values refused, %d harmless ones loaded\n", refused,
         loaded);
  /* Random bytes anywhere, checksum fixed. */
  unsigned char *copy = malloc(file.size);
  int survived = copy != NULL;
  for (int round = 0; copy != NULL && round < 400; ++round) {
    memcpy(copy, file.bytes, file.size);
    int changes = 1 + (int)(next_random() % 4);
    for (int c = 0; c < changes; ++c) {
      copy[next_random() % (file.size - 8)] = (unsigned char)next_random();
    }
    fix_xxh64(copy, file.size);
    int status = import_bytes(copy, file.size);
    survived &= status == MX_ACC_OK || status == MX_ACC_ERR_INVALID_ARG;
  }
  CHECK(survived);
  free(copy);
  free(file.bytes);
}

/* Bytes each instruction takes in the file after its opcode and dtype
 * (model_file.c's coders, field by field), by opcode. */
static size_t insn_body_bytes(unsigned opcode) {
  enum { kDramRef = 1 + 1 + 2 + 8, kEpilogue = 3 * 8 + 1 + 4 + 4 };
  static const size_t bytes[MLU_NUM_OPCODES] = {
      kDramRef + 5 * 8,                      /* LOAD */
      kDramRef + 5 * 8,                      /* STORE */
      2 * 8 + 5 * 8 + 3 * 8 + 15 * 8 + kEpilogue + 8, /* CONV */
      5 * 8 + 3 * 8 + kEpilogue + 8,         /* MATMUL */
      6 * 8 + 12 * 8 + 1 + 1 + 4,            /* POOL */
      5 * 8 + 4 * 8 + 1 + 1 + 4 + 4,         /* EWISE */
      6 * 8 + 3 * 8 + 8,                     /* SOFTMAX */
      6 * 8,                                 /* COPY */
      0,                                     /* SYNC */
  };
  return opcode < MLU_NUM_OPCODES ? bytes[opcode] : SIZE_MAX;
}

/* An int8 matrix product whose input rows overlap (a_stride 0) reads few
 * words of on-chip memory but quantizes every row into the cluster's
 * workspace: the machine once allocated rows * k bytes for it at every
 * launch (1.3 GB for a fuzzed file). The verifier bounds that workspace by
 * the on-chip memory, so such a file is refused. */
static void test_int8_workspace_beyond_on_chip_memory(void) {
  CHECK(call(0, "precision", "int8", NULL, NULL, NULL, 0) == MX_ACC_OK);
  CHECK(load_model("q", 0) == MX_ACC_OK);
  CHECK(call(0, "precision", "fp32", NULL, NULL, NULL, 0) == MX_ACC_OK);
  CHECK(export_to("q", 0, "q.model") == MX_ACC_OK);
  CHECK(unloadModel("q") == MX_ACC_OK);
  buffer file = read_all("q.model");
  if (file.size == 0) {
    CHECK(0);
    return;
  }
  layout l = walk(&file);
  uint64_t words = get_le(file.bytes + l.sram_words, 8);
  uint64_t count = get_le(file.bytes + l.insn_count, 8);
  size_t at = l.first_insn, matmul = 0;
  for (uint64_t i = 0; i < count && at + 2 <= file.size; ++i) {
    unsigned opcode = file.bytes[at], dtype = file.bytes[at + 1];
    if (opcode == MLU_OP_MATMUL && dtype == MLU_DT_INT8) matmul = at;
    size_t body = insn_body_bytes(opcode);
    if (body == SIZE_MAX) break;
    at += 2 + body;
  }
  CHECK(matmul != 0 && words > 0);
  if (matmul == 0) {
    free(file.bytes);
    return;
  }
  /* The unchanged file loads; then A at 0 with stride 0, one output column
   * per row at 0 .. words - 1: every extent lies in on-chip memory, the
   * workspace is words * k + k bytes. */
  CHECK(import_bytes(file.bytes, file.size) == MX_ACC_OK);
  size_t fields = matmul + 2;
  put_le(file.bytes + fields + 0 * 8, 0, 8);      /* a */
  put_le(file.bytes + fields + 1 * 8, 0, 8);      /* a_stride */
  put_le(file.bytes + fields + 3 * 8, 0, 8);      /* out */
  put_le(file.bytes + fields + 4 * 8, 1, 8);      /* out_stride */
  put_le(file.bytes + fields + 5 * 8, words, 8);  /* rows */
  put_le(file.bytes + fields + 6 * 8, 1, 8);      /* cols */
  fix_xxh64(file.bytes, file.size);
  int status = import_bytes(file.bytes, file.size);
  if (status != MX_ACC_ERR_INVALID_ARG) fprintf(stderr, "int8 workspace: %s\n", import_message);
  CHECK(status == MX_ACC_ERR_INVALID_ARG);
  CHECK(strstr(import_message, "verification") != NULL);
  free(file.bytes);
  remove("q.model");
}

int main(void) {
  CHECK(initialize(MX_ACC_API_VERSION) == MX_ACC_OK);
  CHECK(getNumAcc() >= 2);
  long long before = stat_of(0, "memory", "bytes_in_use");
  long long before1 = stat_of(1, "memory", "bytes_in_use");
  test_xxh64();
  test_round_trip();
  test_bad_calls();
  test_every_truncation_and_bit_flip();
  test_hostile_fields();
  test_int8_workspace_beyond_on_chip_memory();
  CHECK(unloadModel("m") == MX_ACC_OK);
  CHECK(!is_loaded("damaged"));
  CHECK(stat_of(0, "memory", "bytes_in_use") == before);
  CHECK(stat_of(1, "memory", "bytes_in_use") == before1);
  remove("m.model");
  remove("changed.model");
  remove("damaged.model");
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
