/*
 * Compiled-model files: a loaded model written to a file ("export_model")
 * and read back under a new model id ("import_model"), so that the host can
 * cache compiled models between processes (mxnet_acc.h section 9).
 *
 * What the file holds. cpu_ref has no real compiler: loadModel() parses and
 * checks the annotated graph, resolves every operator node against the op
 * table, lays out buffers, copies the weights and, for Convolution and
 * FullyConnected steps whose filters are weights, folds a following
 * BatchNorm into them and packs them for the GEMM (dense_steps.c). Its
 * "compiled form" is therefore the graph JSON exactly as loadModel()
 * received it, the weights as the model holds them at export time (the
 * values given to loadModel(), or the latest ones passed to infer()), and
 * those folded and packed filters. Import checks the file completely,
 * reads it into one 64-byte-aligned buffer that the model keeps, and
 * builds the model with cr_model_adopt_file() from that JSON and the
 * weights in place in the buffer (no copy); the dense steps take their
 * folded and packed filters from the file, in place too, when its plan
 * records are those this build makes for the model on this CPU (the same
 * steps, array sizes and cr_gemm_isa()); else they are folded and packed
 * again (a file written on a CPU with other vector instructions). The
 * graph is parsed and the operators resolved again (cheap), but the
 * checks loadModel() makes of the host's arguments (names and
 * descriptors) are replaced by the checks of the file below. A vendor
 * plugin would store its compiled binary (kernels, schedules, packed
 * weights) the same way and keep the envelope: magic, versions, every
 * length checked against the bytes that are really there, a checksum.
 *
 * Format, version 4. Integers are little-endian with the widths shown;
 * offsets are in bytes; "pad" is zero bytes up to the next multiple of 64
 * from the start of the file (what lets the values be used in place).
 *
 *   offset   size       field
 *   0        8          magic 89 43 52 4D 0D 0A 1A 0A ("\x89CRM\r\n\x1a\n":
 *                       a non-ASCII first byte and a CR LF, so that text
 *                       files and line-ending conversions are caught)
 *   8        u32        format version, 4 (versions 1 to 3 are refused:
 *                       the host's cache then compiles the model again and
 *                       replaces the file; version 3 held the folded
 *                       filters of every step with a BatchNorm, and filters
 *                       packed in k blocks of 128 and a short tail, where
 *                       gemm.c now joins a tail of up to 32 to the last
 *                       block: its packed filters would be misread)
 *   12       u32        MX_ACC_API_VERSION of the writer (the reader
 *                       requires the same MAJOR)
 *   16       u32        flags, 1 (ACC_BIN_FLAG_ALIGNED: the weight records'
 *                       values are aligned; required; another bit is refused)
 *   20       u64        size of the whole file, checksum included
 *   28       u64        J, length of the graph JSON
 *   36       J          the graph JSON, UTF-8, no terminating NUL
 *            u32        W, number of weights: the graph's variables with
 *                       "__kind__" "weight"
 *   then W weight records, in the order of those variables in "nodes":
 *            u32        N, length of the name
 *            N          the variable's name, no terminating NUL
 *            u32        dtype, a TensorDType value
 *            u32        ndim, 0 .. MX_ACC_MAX_NDIM
 *            8 * ndim   the extents, u64 each
 *            u64        B, byte length: dtype size * product of the extents
 *            pad
 *            B          the values: dense, row-major, little-endian
 *                       elements, the layout cpu_ref keeps after loadModel()
 *            pad
 *            u32        P, number of plan records: the dense steps whose
 *                       filters are weights, in step order
 *   then P plan records:
 *            u32        the step's index
 *            u32        the cr_isa its filters were packed for
 *            u32        1 when a BatchNorm is folded into it, else 0
 *            u32        0
 *            3 * u64    F, G, K: floats of the folded filters (0 without a
 *                       BatchNorm, and 0 where only the packed filters are
 *                       read: dense_keeps_folded in dense_steps.c), the
 *                       folded bias (0 without a BatchNorm) and the packed
 *                       filters (0 for a direct convolution)
 *            pad, 4F    the folded filters, float32
 *            pad, 4G    the folded bias
 *            pad, 4K    the packed filters, as cr_conv_pack / cr_fc_pack
 *                       wrote them
 *   size-8   u64        checksum: XXH64, seed 0, of bytes 0 .. size-9
 *
 * The weights come before the plans so that the graph section (JSON and
 * weight records, plugins/common/binfile.h) is the same as in the SDK's
 * other files: the host binds a cache entry to its contents by it
 * (acc_host/runtime/cache_contents.py). The plans hold what import would
 * otherwise compute, about the weights' bytes again (ResNet-50 v1: 205 MB,
 * version 3's 299 MB, version 2's 102 MB); the host cannot check them, only
 * the checksum and the cache directory's trust rules protect them.
 *
 * Name, dtype and extents must equal the annotations of the graph's
 * variable; they are in the file so that a reader can check a record on its
 * own. The checksum detects damage (truncation, flipped bits, another file),
 * not tampering, since anyone can recompute it. XXH64 (plugins/common/binfile.h)
 * takes four independent lanes of 8 bytes per step: 0.02-0.04 s over
 * ResNet-50's 102 MB where FNV-1a, one multiplication per byte, each
 * waiting for the last, takes 0.19-0.25 s (hence version 2). Safety rests on the reader,
 * which checks every field against the bytes left before using it: a
 * hostile file makes import fail with MX_ACC_ERR_INVALID_ARG, or, if it is
 * well-formed, loads a model that loadModel() would have accepted from the
 * same graph and weights (and allocates what loadModel() would); it can
 * neither make the reader read out of bounds nor make it allocate more than
 * the file's real size, itself at most CR_MODEL_FILE_MAX, before the whole
 * file has been checked.
 *
 * Byte order: the element bytes are copied as they are in memory, so
 * export and import refuse to run on a big-endian host (cpu_ref does not
 * support one) rather than write or read byte-swapped values.
 *
 * The envelope (header, checksum, the checked reader) and the graph JSON and
 * weight records are those of plugins/common/binfile.h, which mlu_sim's
 * offline models share; what is cpu_ref's own is the magic, the version,
 * the aligned records and the plan records that end the body.
 */
#include "model_file.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binfile.h"
#include "fast/gemm.h"
#include "kernels.h"
#include "model_impl.h"
#include "status.h"
#include "tensor.h"

static const unsigned char kMagic[8] = {0x89, 'C', 'R', 'M', '\r', '\n', 0x1a, '\n'};

enum {
  /* Header, JSON length, weight count and checksum of an empty model. */
  kMinFileSize = ACC_BIN_HEADER_SIZE + 8 + 4 + ACC_BIN_CHECKSUM_SIZE,
  kMessageSize = 512
};

static const acc_bin_format kFormat = {
  kMagic, 4, "cpu_ref", "cpu_ref model file", "a cpu_ref model file", "model file",
  kMinFileSize, CR_MODEL_FILE_MAX, "CR_MODEL_FILE_MAX"
};

/* The checksum of versions 2 to 4 (version 1's was FNV-1a). */
static const acc_bin_checksum kChecksum = ACC_BIN_XXH64;

/* ---- the dense steps' filters ----------------------------------------------- */

/* A plan record: u32 step, u32 packed_isa, u32 has_bn, u32 0, u64 floats of
 * folded_w, folded_b and packed. */
enum { kPlanRecord = 4 * 4 + 3 * 8 };

/* The floats of a dense step's folded filters, folded bias and packed
 * filters, as prepare_dense (dense_steps.c) makes them. */
typedef struct plan_sizes {
  size_t floats[3];
} plan_sizes;

/* Whether step s has a dense plan whose filters are folded and packed at
 * load (its weights are constant), and their sizes. */
static int plan_of(const cr_model *model, size_t s, plan_sizes *sizes) {
  const cr_step *step = &model->steps[s];
  const cr_dense_plan *plan = step->dense;
  if (plan == NULL || !plan->weights_constant) return 0;
  const acc_shape *w_shape = &model->entries[step->inputs[1]].shape;
  const int64_t outputs = w_shape->ndim > 0 ? (int64_t)w_shape->dims[0] : 0;
  int64_t w_count = 1;
  for (int d = 0; d < w_shape->ndim; ++d) w_count *= (int64_t)w_shape->dims[d];
  sizes->floats[0] = dense_keeps_folded(model, step) ? (size_t)w_count : 0;
  sizes->floats[1] = plan->has_bn ? (size_t)outputs : 0;
  if (plan->is_conv) {
    const cr_conv_params *conv = &step->params.u.convolution.conv;
    const int64_t group_channels = (int64_t)model->entries[step->inputs[0]].shape.dims[1] /
                                   conv->num_group;
    sizes->floats[2] = cr_conv_packed_floats(conv, outputs, group_channels);
  } else {
    sizes->floats[2] = cr_fc_packed_floats(outputs > 0 ? w_count / outputs : 0, outputs);
  }
  return 1;
}

/* Appends one plan record and its arrays (each ACC_BIN_ALIGN-aligned). */
static void put_plan(acc_bin_out *out, const cr_model *model, size_t s, const plan_sizes *sizes) {
  const cr_dense_plan *plan = model->steps[s].dense;
  const float *arrays[3] = {plan->folded_w, plan->folded_b, plan->packed};
  acc_bin_put_uint(out, s, 4);
  acc_bin_put_uint(out, (uint32_t)plan->packed_isa, 4);
  acc_bin_put_uint(out, (uint32_t)plan->has_bn, 4);
  acc_bin_put_uint(out, 0, 4);
  for (int k = 0; k < 3; ++k) acc_bin_put_uint(out, sizes->floats[k], 8);
  for (int k = 0; k < 3; ++k) {
    acc_bin_put_align(out);
    if (sizes->floats[k] == 0) continue;
    if (arrays[k] == NULL) { /* prepare_dense made no such array: a bug */
      out->status = acc_fail(MX_ACC_ERR_INTERNAL, "export_model: step %zu has no array %d", s, k);
      return;
    }
    acc_bin_put(out, arrays[k], 4 * sizes->floats[k]);
  }
}

/* ---- export -------------------------------------------------------------- */

/* Adds more to *total; 0 if the sum would pass CR_MODEL_FILE_MAX. */
static int grow(uint64_t *total, uint64_t more) {
  if (more > CR_MODEL_FILE_MAX || *total > CR_MODEL_FILE_MAX - more) return 0;
  *total += more;
  return 1;
}

/* The size of model's file, computed before writing so that the header can
 * hold it; also checks that every length fits its field. */
static int planned_size(const cr_model *model, uint64_t *size) {
  const acc_graph *graph = model->graph;
  uint64_t total = ACC_BIN_HEADER_SIZE;
  int fits = grow(&total, 8) && grow(&total, strlen(model->json)) && grow(&total, 4);
  size_t count = 0, plans = 0;
  for (size_t i = 0; fits && i < graph->num_nodes; ++i) {
    const acc_node *node = &graph->nodes[i];
    if (node->kind != ACC_VAR_WEIGHT) continue;
    size_t bytes, name_length = strlen(node->name);
    int status = acc_shape_bytes(&node->out_shapes[0], acc_dtype_size(node->out_dtypes[0]),
                                 node->name, &bytes);
    if (status != MX_ACC_OK) return status;
    count += 1;
    fits = name_length <= UINT32_MAX && grow(&total, 4 + (uint64_t)name_length) &&
           grow(&total, 4 + 4 + 8 * (uint64_t)node->out_shapes[0].ndim + 8) &&
           grow(&total, acc_bin_pad(total)) && grow(&total, bytes);
  }
  fits = fits && count <= UINT32_MAX && grow(&total, acc_bin_pad(total)) && grow(&total, 4);
  for (size_t s = 0; fits && s < model->num_steps; ++s) {
    plan_sizes sizes;
    if (!plan_of(model, s, &sizes)) continue;
    plans += 1;
    fits = grow(&total, kPlanRecord);
    for (int k = 0; k < 3 && fits; ++k) {
      fits = grow(&total, acc_bin_pad(total)) && grow(&total, 4 * (uint64_t)sizes.floats[k]);
    }
  }
  fits = fits && plans <= UINT32_MAX && grow(&total, ACC_BIN_CHECKSUM_SIZE);
  if (!fits) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "export_model: model \"%s\" needs a file larger "
                    "than CR_MODEL_FILE_MAX (%" PRIu64 " bytes)", model->id, CR_MODEL_FILE_MAX);
  }
  *size = total;
  return MX_ACC_OK;
}

/* acc_bin_weight_fn: the values model (a cr_model) holds for node. */
static const void *weight_values(const void *context, size_t node) {
  const cr_model *model = context;
  return model->entries[model->entry_of_node[node]].data;
}

int cr_model_export(const cr_model *model, const char *path, uint64_t *bytes) {
  if (!acc_bin_host_is_little_endian()) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "export_model: not supported on a big-endian host");
  }
  if (model->sparse_weights) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "export_model: model \"%s\" has sparse weights, "
                    "which the file format does not hold", model->id);
  }
  uint64_t size = 0;
  int status = planned_size(model, &size);
  if (status != MX_ACC_OK) return status;
  /* The file is written as it is made: its size is known. */
  acc_bin_out out;
  status = acc_bin_out_open_with(&out, &kFormat, kChecksum, path);
  if (status != MX_ACC_OK) return status;
  out.flags = ACC_BIN_FLAG_ALIGNED;
  acc_bin_put_header(&out, &kFormat, size);
  status = acc_bin_put_graph(&out, model->json, model->graph, weight_values, model);
  if (status != MX_ACC_OK && out.status == MX_ACC_OK) out.status = status;
  uint32_t plans = 0;
  plan_sizes sizes;
  for (size_t s = 0; s < model->num_steps; ++s) plans += (uint32_t)plan_of(model, s, &sizes);
  acc_bin_put_align(&out);
  acc_bin_put_uint(&out, plans, 4);
  for (size_t s = 0; s < model->num_steps && out.status == MX_ACC_OK; ++s) {
    if (plan_of(model, s, &sizes)) put_plan(&out, model, s, &sizes);
  }
  acc_bin_put_checksum(&out);
  uint64_t written = out.size;
  status = acc_bin_out_close(&out);
  if (status != MX_ACC_OK) return status;
  if (written != size) { /* planned_size() and the writes disagree: a bug */
    remove(path);
    return acc_fail(MX_ACC_ERR_INTERNAL, "export_model: wrote %" PRIu64 " bytes to \"%s\", "
                    "planned %" PRIu64, written, path, size);
  }
  *bytes = size;
  return MX_ACC_OK;
}

/* ---- import -------------------------------------------------------------- */

/* A plan record as read: its fields and its arrays in the file's bytes. */
typedef struct read_plan {
  uint32_t step, isa, has_bn;
  size_t floats[3];
  const float *arrays[3];
} read_plan;

static int read_plan_record(acc_bin_reader *r, read_plan *p) {
  uint32_t reserved = 0;
  int status = acc_bin_take_u32(r, "plan step", &p->step);
  if (status == MX_ACC_OK) status = acc_bin_take_u32(r, "plan ISA", &p->isa);
  if (status == MX_ACC_OK) status = acc_bin_take_u32(r, "plan BatchNorm flag", &p->has_bn);
  if (status == MX_ACC_OK) status = acc_bin_take_u32(r, "plan reserved field", &reserved);
  if (status == MX_ACC_OK && reserved != 0) {
    status = acc_bin_refuse(r->kind, r->path, r->field, "plan reserved field is %" PRIu32,
                            reserved);
  }
  for (int k = 0; k < 3 && status == MX_ACC_OK; ++k) {
    uint64_t floats = 0;
    status = acc_bin_take_u64(r, "plan array length", &floats);
    if (status == MX_ACC_OK && floats > (r->size - r->offset) / 4) {
      status = acc_bin_refuse(r->kind, r->path, r->field, "plan array of %" PRIu64 " floats runs "
                              "past the end of the file", floats);
    }
    p->floats[k] = (size_t)floats;
  }
  for (int k = 0; k < 3 && status == MX_ACC_OK; ++k) {
    const unsigned char *pad = NULL, *values = NULL;
    const uint64_t pad_length = acc_bin_pad(r->offset);
    status = acc_bin_take(r, pad_length, "plan padding", &pad);
    for (uint64_t b = 0; status == MX_ACC_OK && b < pad_length; ++b) {
      if (pad[b] != 0) {
        status = acc_bin_refuse(r->kind, r->path, r->field, "a padding byte is not zero");
      }
    }
    if (status == MX_ACC_OK) status = acc_bin_take(r, 4 * (uint64_t)p->floats[k], "plan array",
                                                   &values);
    /* values is 64-byte aligned: the buffer is, and the padding made the
     * offset a multiple of ACC_BIN_ALIGN. */
    p->arrays[k] = (const float *)(const void *)values;
  }
  return status;
}

/* Reads the plan records and gives model's dense steps their folded and
 * packed filters from the file when the records are those this build
 * would make for this model on this CPU (the same steps, sizes and ISA);
 * else folds and packs them as loadModel() does. */
static int read_plans(acc_bin_reader *r, cr_model *model) {
  const unsigned char *pad = NULL;
  uint32_t count = 0;
  int status = acc_bin_take(r, acc_bin_pad(r->offset), "plan padding", &pad);
  if (status == MX_ACC_OK) status = acc_bin_take_u32(r, "plan count", &count);
  if (status != MX_ACC_OK) return status;
  if (count > (r->size - r->offset) / kPlanRecord) {
    return acc_bin_refuse(r->kind, r->path, r->field, "%" PRIu32 " plan records do not fit in "
                          "the file", count);
  }
  read_plan *plans = calloc(count ? count : 1, sizeof *plans);
  if (plans == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: plan table");
  for (uint32_t i = 0; i < count && status == MX_ACC_OK; ++i) {
    status = read_plan_record(r, &plans[i]);
  }
  int usable = status == MX_ACC_OK;
  uint32_t next = 0;
  const cr_isa isa = cr_gemm_isa();
  for (size_t s = 0; usable && s < model->num_steps; ++s) {
    plan_sizes sizes;
    if (!plan_of(model, s, &sizes)) continue;
    const read_plan *p = next < count ? &plans[next] : NULL;
    next += 1;
    usable = p != NULL && p->step == s && p->has_bn == (uint32_t)model->steps[s].dense->has_bn &&
             (p->floats[2] == 0 || p->isa == (uint32_t)isa);
    for (int k = 0; k < 3 && usable; ++k) usable = p->floats[k] == sizes.floats[k];
  }
  usable = usable && next == count;
  if (usable) {
    next = 0;
    for (size_t s = 0; s < model->num_steps; ++s) {
      plan_sizes sizes;
      if (!plan_of(model, s, &sizes)) continue;
      cr_dense_plan *plan = model->steps[s].dense;
      const read_plan *p = &plans[next++];
      /* The file's bytes are the model's own (writable) buffer. */
      plan->folded_w = p->floats[0] ? (float *)p->arrays[0] : NULL;
      plan->folded_b = p->floats[1] ? (float *)p->arrays[1] : NULL;
      plan->packed = p->floats[2] ? (float *)p->arrays[2] : NULL;
      plan->packed_isa = (cr_isa)p->isa;
    }
  } else if (status == MX_ACC_OK) {
    status = cr_model_prepare(model);
  }
  free(plans);
  return status;
}

int cr_model_import(const char *model_id, const char *path, int dev_id, cr_model **model) {
  unsigned char *bytes = NULL;
  acc_bin_reader r;
  int status = acc_bin_load_aligned(&kFormat, kChecksum, path, &bytes, &r);
  if (status != MX_ACC_OK) return status;
  if (!r.aligned) {
    status = acc_bin_refuse(r.kind, path, ACC_BIN_FLAGS_OFFSET, "the weight records are not "
                            "aligned (flag 0x%x unset)", ACC_BIN_FLAG_ALIGNED);
    free(bytes);
    return status;
  }
  acc_bin_graph parsed = {0};
  status = acc_bin_read_graph(&r, &parsed);
  cr_model *created = NULL;
  if (status == MX_ACC_OK) {
    status = cr_model_adopt_file(model_id, parsed.json, parsed.names, parsed.tensors,
                                 (int)parsed.num_weights, dev_id, bytes, r.size, &created);
    if (status == MX_ACC_OK) {
      bytes = NULL; /* the model's now */
    } else if (status != MX_ACC_ERR_OUT_OF_MEMORY) {
      /* E.g. an operator this cpu_ref does not run: still a file it cannot
       * use, whatever loadModel() would have answered. */
      char reason[kMessageSize];
      snprintf(reason, sizeof reason, "%s", acc_last_error());
      status = acc_bin_refuse(r.kind, path, parsed.json_offset, "the graph cannot be loaded: %s",
                              reason);
    }
  }
  if (status == MX_ACC_OK) status = read_plans(&r, created);
  if (status == MX_ACC_OK && r.offset != r.size) {
    status = acc_bin_refuse(r.kind, path, r.offset, "%zu bytes follow the last plan record",
                            r.size - r.offset);
  }
  if (status == MX_ACC_OK) {
    *model = created;
  } else {
    cr_model_free(created);
  }
  acc_bin_graph_free(&parsed);
  free(bytes);
  return status;
}
