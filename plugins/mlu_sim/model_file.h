/*
 * Offline models of mlu_sim: a loaded model's compiled form written to a
 * file and loaded back under a new model id without compiling, for the
 * configure() keys "export_model" and "import_model" (mxnet_acc.h section
 * 9) and so for the host's compiled-model cache. The format is described
 * at the top of model_file.c and in docs/mlu_sim.md ("Offline models").
 */
#ifndef MLU_SIM_MODEL_FILE_H_
#define MLU_SIM_MODEL_FILE_H_

#include <stdint.h>

#include "model.h"

/* The largest offline model file mlu_sim writes or reads, in bytes. Import
 * compares a file's size with it before allocating anything; export refuses
 * a model whose file would be larger (MX_ACC_ERR_UNSUPPORTED). */
#define MLU_MODEL_FILE_MAX ((uint64_t)1 << 30)

/* Writes model's compiled form (each segment's program, constants and I/O
 * mapping), graph and current weights to path, replacing the file; stores
 * the file's size in *bytes. Segments whose weights changed since they were
 * compiled are compiled first (as the next infer would). The caller keeps
 * the model from being run or unloaded meanwhile. Errors:
 * MX_ACC_ERR_INTERNAL when the file cannot be written (a partial file is
 * removed), MX_ACC_ERR_UNSUPPORTED when the model exceeds the format's
 * limits. */
int mlu_model_export(mlu_model *model, const char *path, uint64_t *bytes);

/* Reads a file written by mlu_model_export and builds the model under
 * model_id on dev_id with the file's programs, running no compiler; on
 * success *model is owned by the caller (mlu_model_free). Errors:
 * MX_ACC_ERR_INVALID_ARG for a file that is not a valid offline model (the
 * message names the offset and field), MX_ACC_ERR_INTERNAL when it cannot be
 * read, MX_ACC_ERR_OUT_OF_MEMORY (host or card memory). */
int mlu_model_import(const char *model_id, const char *path, int dev_id, mlu_model **model);

#endif /* MLU_SIM_MODEL_FILE_H_ */
