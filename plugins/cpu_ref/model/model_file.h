/*
 * Compiled-model files of cpu_ref: a loaded model written to a file and read
 * back under a new model id, for the configure() keys "export_model" and
 * "import_model" (mxnet_acc.h section 9). The file format is described at
 * the top of model_file.c.
 */
#ifndef CPU_REF_MODEL_FILE_H_
#define CPU_REF_MODEL_FILE_H_

#include <stdint.h>

#include "model.h"

/* The largest model file cpu_ref writes or reads, in bytes. Import compares
 * a file's size with it before allocating anything; export refuses a model
 * whose file would be larger (MX_ACC_ERR_UNSUPPORTED), so that no file is
 * written that could not be read back. 1 GiB holds the models of
 * tests/models many times over; raising it past 2 GiB needs a 64-bit file
 * offset on platforms whose long has 32 bits (ftell). */
#define CR_MODEL_FILE_MAX ((uint64_t)1 << 30)

/* Writes model's graph, current weights and its dense steps' folded and
 * packed filters to path, replacing the file.
 * Stores the file's size in *bytes. The caller keeps the model from being
 * unloaded or run meanwhile. Errors: MX_ACC_ERR_INTERNAL when the file
 * cannot be written (a partial file is removed), MX_ACC_ERR_UNSUPPORTED
 * when the model exceeds CR_MODEL_FILE_MAX. */
int cr_model_export(const cr_model *model, const char *path, uint64_t *bytes);

/* Reads a file written by cr_model_export and builds the model under
 * model_id on dev_id; on success *model is owned by the caller (free it with
 * cr_model_free). Errors: MX_ACC_ERR_INVALID_ARG for a file that is not a
 * valid cpu_ref model file (the message names the offset and field),
 * MX_ACC_ERR_INTERNAL when it cannot be read, MX_ACC_ERR_OUT_OF_MEMORY. */
int cr_model_import(const char *model_id, const char *path, int dev_id, cr_model **model);

#endif /* CPU_REF_MODEL_FILE_H_ */
