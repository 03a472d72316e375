/*
 * libFuzzer harness: mlu_sim's offline-model loader (configure
 * "import_model", plugins/mlu_sim/model_file.c), then the imported model's
 * infer, export and unload. See model_fuzz.h for what each input goes
 * through and what counts as a bug. Seeds: fuzz/corpus/mlu_model/, files
 * exported by mlu_sim itself (fuzz/make_seeds.py).
 *
 * Build: python3 fuzz/run.py build (clang -fsanitize=fuzzer,address,undefined,
 * with the sources of plugins/mlu_sim and plugins/common).
 */
#include <stdlib.h>

#include "binfile.h"

#define FUZZ_CHECKSUM ACC_BIN_XXH64
#define FUZZ_DEVICE 1 /* not the card of the seeds' __dev_id__ annotations */

static int fuzz_configure(const char *key, const char *value, const char *path, int dev_id);

/* A card with 64 KiB of on-chip memory: the seeds' programs need a few KiB,
 * and the import refuses programs needing more than the card has. That
 * bounds the work one valid instruction may ask for (an instruction writes
 * each word of its destination once; a convolution's or pooling's taps, a
 * matrix product's reduction lie in on-chip memory too), so that what the
 * fuzzer finds slow is a loader bug, not a legitimately large program. */
static void fuzz_init_device(void) {
  if (fuzz_configure("sram_bytes", "65536", NULL, FUZZ_DEVICE) != MX_ACC_OK) abort();
}

#include "model_fuzz.h"
