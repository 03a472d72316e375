/*
 * libFuzzer harness: cpu_ref's compiled-model loader (configure
 * "import_model", plugins/cpu_ref/model/model_file.c), then the imported model's
 * infer, export and unload. See model_fuzz.h. Seeds: fuzz/corpus/cpu_ref_model/.
 *
 * Build: python3 fuzz/run.py build.
 */
#include "binfile.h"

#define FUZZ_CHECKSUM ACC_BIN_XXH64
#define FUZZ_DEVICE 0

static int fuzz_configure(const char *key, const char *value, const char *path, int dev_id);

/* One thread: a fuzzer wants many small runs, not parallel kernels. */
static void fuzz_init_device(void) { fuzz_configure("num_threads", "1", NULL, FUZZ_DEVICE); }

#include "model_fuzz.h"
