/*
 * Offline models: a loaded model's compiled form written to a file
 * ("export_model") and loaded back under a new model id without compiling
 * ("import_model"), so that the host's compiled-model cache skips the
 * compiler between processes (the seed's "offline model" future work).
 *
 * What the file holds. Everything infer needs without the compiler: for
 * each fusion segment, in launch order, its operator nodes, its launch
 * position, its I/O slot mapping (which graph entries are the FusionOp's
 * inputs and outputs, and the bytes of each slot), its compiled program
 * (every instruction, every field serialized explicitly), the program's
 * transformed constants (re-laid-out filters, folded batch norms, biases)
 * as they lie in device memory, its on-chip and DRAM scratch sizes and its
 * compile report. Besides that, the graph JSON and the weights' current
 * values: import builds the model's BaseOps (cheap, no compiling) without
 * binding their parameters, keeps the values (for a later export) and
 * uploads the weights that flow as data; weights given again to infer()
 * rebind and recompile exactly as after loadModel() (a segment that must
 * compile binds its BaseOps' parameters to the kept values first). The raw
 * values are needed for that: the constants are transformed (folded batch
 * norms, re-laid-out filters) and cannot give them back.
 *
 * Import parses the graph and cuts it into segments again (host-side
 * bookkeeping, deterministic), requires the file's segments to match them
 * node for node and slot for slot, then gives each FusionOp the file's
 * program instead of compiling it. The cards are those of the graph's
 * "__dev_id__" annotations, else the importing device, so a model exported
 * from one card imports on another. The card statistic "compiles" does not
 * change on import.
 *
 * Format, version 3 (version 2 had a byte-wise FNV-1a 64 checksum, about
 * 14 times slower to compute than XXH64; version 1 lacked the int8
 * fields). Integers are little-endian with the widths shown, offsets
 * in bytes, no padding; i64 is two's complement, f32/f64 are the IEEE-754
 * bits as u32/u64.
 *
 *   offset   size      field
 *   0        8         magic 89 4D 4C 55 0D 0A 1A 0A ("\x89MLU\r\n\x1a\n")
 *   8        u32       format version, 3
 *   12       u32       MX_ACC_API_VERSION of the writer (same MAJOR required)
 *   16       u32       flags, 0 (a set bit is refused)
 *   20       u64       size of the whole file, checksum included
 *   28       u64       J, then J bytes: the graph JSON (UTF-8, no NUL)
 *            u32       W, then W weight records (the graph's "weight"
 *                      variables in node order): u32 name length, name,
 *                      u32 dtype, u32 ndim, u64 x ndim extents, u64 byte
 *                      length, the values (dense, row-major, little-endian)
 *            u32       S, then S segment records in launch order:
 *              u32 N, u32 x N    operator nodes, topological order
 *              u32               launch position (a node index)
 *              u32 I, u32 x I    input entries (graph outputs numbered in
 *                                node order), 0 .. 256
 *              u32 O, u32 x O    output entries, 1 .. 256
 *              u64 x (I + O)     bytes of each I/O slot
 *              u32               opcode count, MLU_NUM_OPCODES (9)
 *              u64 x 21          compile report: instructions, per-opcode
 *                                counts (9), kernels, folded_batchnorms,
 *                                fused_epilogues, resident_values,
 *                                spilled_values, aliased_values,
 *                                int8_kernels, a reserved field (written
 *                                0, ignored), sram_words, const_bytes,
 *                                scratch_bytes
 *              u64 C, C bytes    the constants, as uploaded to the card
 *              u64 P, P records  the instructions (below), SYNC last
 *   size-8   u64       checksum: XXH64 (seed 0) of bytes 0 .. size-9
 *
 * An instruction record is u8 opcode, u8 dtype, then the fields of its
 * struct in isa.h, in declaration order: uint64_t as u64, int64_t as i64,
 * uint8_t as u8, uint16_t as u16, float as f32, double as f64; an
 * mlu_dram_ref is u8 space, u8 dtype, u16 slot, u64 offset; an epilogue is
 * u64 bias, u64 residual, u64 residual_stride, u8 act, f32 act_lo, f32
 * act_hi. SYNC has no fields. The constants of an int8-mode program hold
 * its int8 filters (one byte each) and their fp32 scales; LOAD is the only
 * instruction that may name int8 storage, and only in the constants.
 *
 * Safety. The checksum detects damage (truncation, flipped bits, another
 * file), not tampering; safety rests on the reader. It is computed while
 * the file is read, 256 KiB at a time, at memory speed (binfile.h); the
 * host's cache relies on it and does not hash the file itself. It checks the file's
 * size against MLU_MODEL_FILE_MAX and the header before allocating, every
 * length against the bytes really left before using it (so no allocation
 * exceeds a small multiple of the file's size), every enumerator, and every
 * instruction field against limits that keep the verifier's and the
 * kernels' arithmetic far from overflow (below); every program must then
 * pass mlu_program_verify() (every operand inside its buffer and the
 * on-chip memory) and fit the importing card's on-chip memory. Anything
 * else is MX_ACC_ERR_INVALID_ARG naming the offset and field.
 *
 * The envelope (header, checksum, the checked reader and writer) and the
 * graph JSON and weight records are those of plugins/common/binfile.h,
 * shared with cpu_ref's model files; the segment records are mlu_sim's own.
 */
#include "model_file.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "binfile.h"
#include "card.h"
#include "cnml.h"
#include "machine.h"
#include "status.h"
#include "tensor.h"

static const unsigned char kMagic[8] = {0x89, 'M', 'L', 'U', '\r', '\n', 0x1a, '\n'};

enum {
  /* Header, JSON length, weight and segment counts, checksum. */
  kMinFileSize = ACC_BIN_HEADER_SIZE + 8 + 4 + 4 + ACC_BIN_CHECKSUM_SIZE,
  kMessageSize = 512,
  kReportFields = 1 + MLU_NUM_OPCODES + 11
};

/* Limits of instruction fields (see insn_problem): SRAM addresses and
 * strides in words (the card's on-chip memory is at most 2^28 words),
 * extents of convolution, pooling, matmul and softmax blocks, DRAM offsets
 * and strides. Products of up to two extents stay below 2^48, of an extent
 * and a stride below 2^56. */
#define LIMIT_SRAM ((uint64_t)1 << 32)
#define LIMIT_EXTENT ((int64_t)1 << 24)
#define LIMIT_DRAM ((uint64_t)1 << 40)

static const acc_bin_format kFormat = {
  kMagic, 3, "mlu_sim", "mlu_sim offline model", "an mlu_sim offline model", "offline model",
  kMinFileSize, MLU_MODEL_FILE_MAX, "MLU_MODEL_FILE_MAX"
};

/* Records why the file at path is refused (binfile.h). */
#define refuse(path, offset, ...) acc_bin_refuse(kFormat.kind, path, offset, __VA_ARGS__)

/* ---- the two directions of one field ------------------------------------------------------- */

/* Writes or reads (reading) one field; after the first failure, nothing. */
typedef struct codec {
  int reading;
  acc_bin_out *out;
  acc_bin_reader *in;
  int status;
} codec;

static void code_uint(codec *c, uint64_t *value, int width, const char *field) {
  if (c->status != MX_ACC_OK) return;
  if (c->reading) {
    c->status = acc_bin_take_uint(c->in, width, field, value);
  } else {
    acc_bin_put_uint(c->out, *value, width);
    c->status = c->out->status;
  }
}

static void code_u64(codec *c, uint64_t *value, const char *field) {
  code_uint(c, value, 8, field);
}

static void code_i64(codec *c, int64_t *value, const char *field) {
  uint64_t bits = (uint64_t)*value; /* modulo 2^64: two's complement */
  code_uint(c, &bits, 8, field);
  if (c->reading && c->status == MX_ACC_OK) {
    *value = bits <= (uint64_t)INT64_MAX ? (int64_t)bits : -(int64_t)(~bits) - 1;
  }
}

static void code_u16(codec *c, uint16_t *value, const char *field) {
  uint64_t wide = *value;
  code_uint(c, &wide, 2, field);
  *value = (uint16_t)wide;
}

static void code_u8(codec *c, uint8_t *value, const char *field) {
  uint64_t wide = *value;
  code_uint(c, &wide, 1, field);
  *value = (uint8_t)wide;
}

static void code_f32(codec *c, float *value, const char *field) {
  uint32_t bits;
  memcpy(&bits, value, sizeof bits);
  uint64_t wide = bits;
  code_uint(c, &wide, 4, field);
  bits = (uint32_t)wide;
  memcpy(value, &bits, sizeof bits);
}

static void code_f64(codec *c, double *value, const char *field) {
  uint64_t bits;
  memcpy(&bits, value, sizeof bits);
  code_uint(c, &bits, 8, field);
  memcpy(value, &bits, sizeof bits);
}

/* ---- instructions ---------------------------------------------------------------------------- */

/* Each struct of isa.h is serialized field by field below. A field added to
 * one changes its size and stops the build here until its coder (and
 * insn_problem, and the format version) are updated. The sizes are those of
 * LP64 platforms. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(mlu_dram_ref) == 16, "mlu_dram_ref changed: update code_dram_ref");
_Static_assert(sizeof(mlu_epilogue) == 40, "mlu_epilogue changed: update code_epilogue");
_Static_assert(sizeof(mlu_move) == 56, "mlu_move changed: update code_move");
_Static_assert(sizeof(mlu_conv) == 248, "mlu_conv changed: update code_conv");
_Static_assert(sizeof(mlu_matmul) == 112, "mlu_matmul changed: update code_matmul");
_Static_assert(sizeof(mlu_pool) == 152, "mlu_pool changed: update code_pool");
_Static_assert(sizeof(mlu_ewise) == 88, "mlu_ewise changed: update code_ewise");
_Static_assert(sizeof(mlu_softmax) == 80, "mlu_softmax changed: update code_softmax");
_Static_assert(sizeof(mlu_copy) == 48, "mlu_copy changed: update code_copy");
_Static_assert(sizeof(mlu_insn) == 256, "mlu_insn changed: update code_insn");
_Static_assert(sizeof(mlu_program_info) == 17 * sizeof(size_t) + 3 * sizeof(uint64_t),
               "mlu_program_info changed: update code_report");
#endif
_Static_assert(MLU_NUM_OPCODES == 9, "an opcode was added: update code_insn and insn_problem");

static void code_dram_ref(codec *c, mlu_dram_ref *r) {
  code_u8(c, &r->space, "dram space");
  code_u8(c, &r->dtype, "dram dtype");
  code_u16(c, &r->slot, "dram slot");
  code_u64(c, &r->offset, "dram offset");
}

static void code_epilogue(codec *c, mlu_epilogue *e) {
  code_u64(c, &e->bias, "epilogue bias");
  code_u64(c, &e->residual, "epilogue residual");
  code_u64(c, &e->residual_stride, "epilogue residual stride");
  code_u8(c, &e->act, "epilogue activation");
  code_f32(c, &e->act_lo, "epilogue act_lo");
  code_f32(c, &e->act_hi, "epilogue act_hi");
}

static void code_move(codec *c, mlu_move *m) {
  code_dram_ref(c, &m->dram);
  code_u64(c, &m->sram, "move sram");
  code_u64(c, &m->rows, "move rows");
  code_u64(c, &m->run, "move run");
  code_u64(c, &m->dram_stride, "move dram stride");
  code_u64(c, &m->sram_stride, "move sram stride");
}

static void code_conv(codec *c, mlu_conv *v) {
  code_u64(c, &v->in, "conv in");
  code_u64(c, &v->in_ch_stride, "conv in_ch_stride");
  int64_t *first[] = {&v->in_c0, &v->in_row0, &v->in_rows, &v->h, &v->w};
  for (size_t i = 0; i < sizeof first / sizeof first[0]; ++i) code_i64(c, first[i], "conv field");
  code_u64(c, &v->filter, "conv filter");
  code_u64(c, &v->out, "conv out");
  code_u64(c, &v->out_ch_stride, "conv out_ch_stride");
  int64_t *rest[] = {&v->f0, &v->nf, &v->oy0, &v->out_rows, &v->ow, &v->cg, &v->fg, &v->kh,
                     &v->kw, &v->sh, &v->sw, &v->ph, &v->pw, &v->dh, &v->dw};
  for (size_t i = 0; i < sizeof rest / sizeof rest[0]; ++i) code_i64(c, rest[i], "conv field");
  code_epilogue(c, &v->ep);
  code_u64(c, &v->wscale, "conv wscale");
}

static void code_matmul(codec *c, mlu_matmul *m) {
  uint64_t *addresses[] = {&m->a, &m->a_stride, &m->b, &m->out, &m->out_stride};
  for (size_t i = 0; i < 5; ++i) code_u64(c, addresses[i], "matmul field");
  code_i64(c, &m->rows, "matmul rows");
  code_i64(c, &m->cols, "matmul cols");
  code_i64(c, &m->k, "matmul k");
  code_epilogue(c, &m->ep);
  code_u64(c, &m->wscale, "matmul wscale");
}

static void code_pool(codec *c, mlu_pool *p) {
  code_u64(c, &p->in, "pool in");
  code_u64(c, &p->in_ch_stride, "pool in_ch_stride");
  code_i64(c, &p->in_row0, "pool in_row0");
  code_i64(c, &p->in_rows, "pool in_rows");
  code_u64(c, &p->out, "pool out");
  code_u64(c, &p->out_ch_stride, "pool out_ch_stride");
  int64_t *rest[] = {&p->planes, &p->h, &p->w, &p->oy0, &p->out_rows, &p->ow,
                     &p->kh, &p->kw, &p->sh, &p->sw, &p->ph, &p->pw};
  for (size_t i = 0; i < sizeof rest / sizeof rest[0]; ++i) code_i64(c, rest[i], "pool field");
  code_u8(c, &p->mode, "pool mode");
  code_u8(c, &p->count_include_pad, "pool count_include_pad");
  code_f32(c, &p->empty_value, "pool empty_value");
}

static void code_ewise(codec *c, mlu_ewise *e) {
  uint64_t *addresses[] = {&e->a, &e->b, &e->out, &e->scale, &e->shift};
  for (size_t i = 0; i < 5; ++i) code_u64(c, addresses[i], "ewise address");
  code_i64(c, &e->n, "ewise n");
  code_i64(c, &e->first, "ewise first");
  code_i64(c, &e->channels, "ewise channels");
  code_i64(c, &e->inner, "ewise inner");
  code_u8(c, &e->kind, "ewise kind");
  code_u8(c, &e->act, "ewise activation");
  code_f32(c, &e->act_lo, "ewise act_lo");
  code_f32(c, &e->act_hi, "ewise act_hi");
}

static void code_softmax(codec *c, mlu_softmax *s) {
  uint64_t *fields[] = {&s->in, &s->in_outer_stride, &s->in_axis_stride,
                        &s->out, &s->out_outer_stride, &s->out_axis_stride};
  for (size_t i = 0; i < 6; ++i) code_u64(c, fields[i], "softmax field");
  code_i64(c, &s->outer, "softmax outer");
  code_i64(c, &s->axis_len, "softmax axis_len");
  code_i64(c, &s->inner, "softmax inner");
  code_f64(c, &s->temperature, "softmax temperature");
}

static void code_copy(codec *c, mlu_copy *v) {
  uint64_t *fields[] = {&v->src, &v->dst, &v->rows, &v->run, &v->src_stride, &v->dst_stride};
  for (size_t i = 0; i < 6; ++i) code_u64(c, fields[i], "copy field");
}

static void code_insn(codec *c, mlu_insn *insn) {
  code_u8(c, &insn->opcode, "opcode");
  code_u8(c, &insn->dtype, "instruction dtype");
  if (c->status != MX_ACC_OK) return;
  switch (insn->opcode) {
    case MLU_OP_LOAD:
    case MLU_OP_STORE: code_move(c, &insn->u.move); break;
    case MLU_OP_CONV: code_conv(c, &insn->u.conv); break;
    case MLU_OP_MATMUL: code_matmul(c, &insn->u.matmul); break;
    case MLU_OP_POOL: code_pool(c, &insn->u.pool); break;
    case MLU_OP_EWISE: code_ewise(c, &insn->u.ewise); break;
    case MLU_OP_SOFTMAX: code_softmax(c, &insn->u.softmax); break;
    case MLU_OP_COPY: code_copy(c, &insn->u.copy); break;
    case MLU_OP_SYNC: break;
    default:
      c->status = c->reading ? refuse(c->in->path, c->in->field - 1, "unknown opcode %u",
                                      (unsigned)insn->opcode)
                             : acc_fail(MX_ACC_ERR_INTERNAL, "export_model: opcode %u",
                                        (unsigned)insn->opcode);
  }
}

/* The compile report, every field as u64. Field 17 (between int8_kernels
 * and sram_words) is reserved: written as 0, ignored when read. */
static void code_report(codec *c, mlu_program_info *info) {
  uint64_t values[kReportFields] = {0};
  size_t *sizes[] = {&info->kernels, &info->folded_batchnorms, &info->fused_epilogues,
                     &info->resident_values, &info->spilled_values, &info->aliased_values,
                     &info->int8_kernels};
  values[0] = info->instructions;
  for (int i = 0; i < MLU_NUM_OPCODES; ++i) values[1 + i] = info->by_opcode[i];
  for (int i = 0; i < 7; ++i) values[1 + MLU_NUM_OPCODES + i] = *sizes[i];
  values[kReportFields - 3] = info->sram_words;
  values[kReportFields - 2] = info->const_bytes;
  values[kReportFields - 1] = info->scratch_bytes;
  for (int i = 0; i < kReportFields; ++i) {
    code_u64(c, &values[i], "compile report");
    if (c->reading && c->status == MX_ACC_OK && i < kReportFields - 3 && values[i] > SIZE_MAX) {
      c->status = refuse(c->in->path, c->in->field, "compile report field %d is %" PRIu64, i,
                         values[i]);
    }
  }
  if (!c->reading || c->status != MX_ACC_OK) return;
  info->instructions = (size_t)values[0];
  for (int i = 0; i < MLU_NUM_OPCODES; ++i) info->by_opcode[i] = (size_t)values[1 + i];
  for (int i = 0; i < 7; ++i) *sizes[i] = (size_t)values[1 + MLU_NUM_OPCODES + i];
  info->sram_words = values[kReportFields - 3];
  info->const_bytes = values[kReportFields - 2];
  info->scratch_bytes = values[kReportFields - 1];
}

/* ---- limits of instruction fields ------------------------------------------------------------ */

static int sram_ok(uint64_t address) { return address <= LIMIT_SRAM; }
static int optional_ok(uint64_t address) { return address == MLU_NONE || address <= LIMIT_SRAM; }
static int extent_ok(int64_t value) { return value >= 0 && value <= LIMIT_EXTENT; }
static int act_ok(uint8_t act) { return act <= MLU_ACT_CLIP; }

static int all_sram(const uint64_t *values, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (!sram_ok(values[i])) return 0;
  }
  return 1;
}

static int all_extents(const int64_t *values, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (!extent_ok(values[i])) return 0;
  }
  return 1;
}

static int epilogue_ok(const mlu_epilogue *e) {
  return optional_ok(e->bias) && optional_ok(e->residual) && sram_ok(e->residual_stride) &&
         act_ok(e->act);
}

static const char *conv_problem(const mlu_conv *v) {
  const uint64_t addresses[] = {v->in, v->in_ch_stride, v->filter, v->out, v->out_ch_stride};
  const int64_t extents[] = {v->in_c0, v->in_row0, v->in_rows, v->h, v->w, v->f0, v->nf,
                             v->oy0, v->out_rows, v->ow, v->cg, v->fg, v->kh, v->kw,
                             v->sh, v->sw, v->ph, v->pw, v->dh, v->dw};
  if (!all_sram(addresses, 5) || !all_extents(extents, 20) || !epilogue_ok(&v->ep) ||
      !optional_ok(v->wscale)) {
    return "a CONV field is out of range";
  }
  /* The filter block's words, nf * kh * kw * cg, each factor < 2^25. */
  uint64_t words = (uint64_t)v->nf * (uint64_t)v->kh;
  if (words > LIMIT_SRAM || words * (uint64_t)v->kw > LIMIT_SRAM ||
      words * (uint64_t)v->kw * (uint64_t)v->cg > LIMIT_SRAM) {
    return "a CONV filter block is larger than any on-chip memory";
  }
  return NULL;
}

static const char *insn_fields_problem(const mlu_insn *insn, int last);

/* Whether count runs of run words, stride apart, are disjoint. Every
 * instruction the compiler emits writes its destination that way, and that
 * bounds its work by the buffer it writes: with a stride below the run, the
 * verifier (which checks only that every run lies in its buffer) would let
 * a few bytes of file repeat the same writes up to 2^40 times. */
static int disjoint(uint64_t count, uint64_t stride, uint64_t run) {
  return count <= 1 || run == 0 || stride >= run;
}

/* Why an instruction whose fields are in range writes some place more than
 * once, or NULL. */
static const char *overlap_problem(const mlu_insn *insn) {
  int ok = 1;
  switch (insn->opcode) {
    case MLU_OP_LOAD: {
      const mlu_move *m = &insn->u.move;
      ok = disjoint(m->rows, m->sram_stride, m->run);
      break;
    }
    case MLU_OP_STORE: {
      const mlu_move *m = &insn->u.move;
      ok = disjoint(m->rows, m->dram_stride, m->run);
      break;
    }
    case MLU_OP_CONV: {
      const mlu_conv *v = &insn->u.conv;
      ok = disjoint((uint64_t)v->nf, v->out_ch_stride, (uint64_t)(v->out_rows * v->ow));
      break;
    }
    case MLU_OP_MATMUL: {
      const mlu_matmul *m = &insn->u.matmul;
      ok = disjoint((uint64_t)m->rows, m->out_stride, (uint64_t)m->cols);
      break;
    }
    case MLU_OP_POOL: {
      const mlu_pool *p = &insn->u.pool;
      ok = disjoint((uint64_t)p->planes, p->out_ch_stride, (uint64_t)(p->out_rows * p->ow));
      break;
    }
    case MLU_OP_SOFTMAX: {
      const mlu_softmax *s = &insn->u.softmax;
      uint64_t strip = s->axis_len > 0 ? (uint64_t)(s->axis_len - 1) * s->out_axis_stride +
                                             (uint64_t)s->inner : 0;
      ok = disjoint((uint64_t)s->axis_len, s->out_axis_stride, (uint64_t)s->inner) &&
           disjoint((uint64_t)s->outer, s->out_outer_stride, strip);
      break;
    }
    case MLU_OP_COPY: {
      const mlu_copy *c = &insn->u.copy;
      ok = disjoint(c->rows, c->dst_stride, c->run);
      break;
    }
    default: break; /* EWISE writes one run; SYNC nothing */
  }
  return ok ? NULL : "its destination rows overlap (the compiler never writes a place twice)";
}

/* Why insn cannot be run safely whatever the verifier says, or NULL. last:
 * it is the program's last instruction (the only place of SYNC). */
static const char *insn_problem(const mlu_insn *insn, int last) {
  const char *problem = insn_fields_problem(insn, last);
  return problem != NULL ? problem : overlap_problem(insn);
}

/* The range checks of insn_problem. */
static const char *insn_fields_problem(const mlu_insn *insn, int last) {
  if (insn->dtype > MLU_DT_INT8) return "unknown instruction dtype";
  if ((insn->opcode == MLU_OP_SYNC) != (last != 0)) return "SYNC must be last, and only last";
  switch (insn->opcode) {
    case MLU_OP_LOAD:
    case MLU_OP_STORE: {
      const mlu_move *m = &insn->u.move;
      /* LOAD and STORE convert fp32 and fp16 storage; LOAD also reads the
       * int8 filters of int8-mode programs from their constants. */
      int int8_filter = insn->opcode == MLU_OP_LOAD && m->dram.dtype == MLU_DT_INT8 &&
                        m->dram.space == MLU_SPACE_CONST;
      if (m->dram.space > MLU_SPACE_SCRATCH ||
          (m->dram.dtype != MLU_DT_FLOAT32 && m->dram.dtype != MLU_DT_FLOAT16 && !int8_filter) ||
          m->dram.offset > LIMIT_DRAM || m->dram_stride > LIMIT_DRAM) {
        return "a LOAD/STORE DRAM operand is out of range";
      }
      const uint64_t fields[] = {m->sram, m->rows, m->run, m->sram_stride};
      return all_sram(fields, 4) ? NULL : "a LOAD/STORE field is out of range";
    }
    case MLU_OP_CONV: return conv_problem(&insn->u.conv);
    case MLU_OP_MATMUL: {
      const mlu_matmul *m = &insn->u.matmul;
      const uint64_t addresses[] = {m->a, m->a_stride, m->b, m->out, m->out_stride};
      const int64_t extents[] = {m->rows, m->cols, m->k};
      return all_sram(addresses, 5) && all_extents(extents, 3) && epilogue_ok(&m->ep) &&
                     optional_ok(m->wscale)
                 ? NULL : "a MATMUL field is out of range";
    }
    case MLU_OP_POOL: {
      const mlu_pool *p = &insn->u.pool;
      const uint64_t addresses[] = {p->in, p->in_ch_stride, p->out, p->out_ch_stride};
      const int64_t extents[] = {p->in_row0, p->in_rows, p->planes, p->h, p->w, p->oy0,
                                 p->out_rows, p->ow, p->kh, p->kw, p->sh, p->sw, p->ph, p->pw};
      return all_sram(addresses, 4) && all_extents(extents, 14) && p->mode <= MLU_POOL_AVG &&
                     p->count_include_pad <= 1
                 ? NULL : "a POOL field is out of range";
    }
    case MLU_OP_EWISE: {
      const mlu_ewise *e = &insn->u.ewise;
      int binary = e->kind == MLU_EWISE_ADD || e->kind == MLU_EWISE_MUL;
      int affine = e->kind == MLU_EWISE_AFFINE;
      int ok = e->kind <= MLU_EWISE_ACT && act_ok(e->act) && sram_ok(e->a) && sram_ok(e->out) &&
               (binary ? sram_ok(e->b) : optional_ok(e->b)) &&
               (affine ? sram_ok(e->scale) && sram_ok(e->shift)
                       : optional_ok(e->scale) && optional_ok(e->shift)) &&
               e->n >= 0 && (uint64_t)e->n <= LIMIT_SRAM && e->first >= 0 &&
               (uint64_t)e->first <= LIMIT_DRAM && e->channels >= 0 &&
               (uint64_t)e->channels <= LIMIT_DRAM && e->inner >= 0 &&
               (uint64_t)e->inner <= LIMIT_DRAM;
      return ok ? NULL : "an EWISE field is out of range";
    }
    case MLU_OP_SOFTMAX: {
      const mlu_softmax *s = &insn->u.softmax;
      const uint64_t addresses[] = {s->in, s->in_outer_stride, s->in_axis_stride,
                                    s->out, s->out_outer_stride, s->out_axis_stride};
      const int64_t extents[] = {s->outer, s->axis_len, s->inner};
      return all_sram(addresses, 6) && all_extents(extents, 3) ? NULL
                                                               : "a SOFTMAX field is out of range";
    }
    case MLU_OP_COPY: {
      const mlu_copy *v = &insn->u.copy;
      const uint64_t fields[] = {v->src, v->dst, v->rows, v->run, v->src_stride, v->dst_stride};
      return all_sram(fields, 6) ? NULL : "a COPY field is out of range";
    }
    case MLU_OP_SYNC: return NULL;
    default: return "unknown opcode";
  }
}

/* ---- export ---------------------------------------------------------------------------------- */

static void put_entries(acc_bin_out *b, const size_t *entries, size_t count) {
  acc_bin_put_uint(b, count, 4);
  for (size_t i = 0; i < count; ++i) acc_bin_put_uint(b, entries[i], 4);
}

/* acc_bin_weight_fn: the current values of model's (an mlu_model's) weight
 * variable node. */
static const void *weight_values(const void *context, size_t node) {
  return mlu_model_weight(context, node);
}

static int put_segment(acc_bin_out *b, mlu_model *model, size_t k) {
  mlu_segment_view view;
  mlu_model_segment(model, k, &view);
  mlu_program *program = NULL;
  int status = mlu_model_segment_program(model, k, &program);
  if (status != MX_ACC_OK) return status;
  acc_bin_put_uint(b, view.num_nodes, 4);
  for (size_t i = 0; i < view.num_nodes; ++i) acc_bin_put_uint(b, view.nodes[i], 4);
  acc_bin_put_uint(b, (uint64_t)view.launch, 4);
  put_entries(b, view.inputs, view.num_inputs);
  put_entries(b, view.outputs, view.num_outputs);
  for (int i = 0; i < program->num_inputs + program->num_outputs; ++i) {
    acc_bin_put_uint(b, program->io_bytes[i], 8);
  }
  acc_bin_put_uint(b, MLU_NUM_OPCODES, 4);
  codec c = {0, b, NULL, b->status};
  code_report(&c, &program->info);
  acc_bin_put_uint(b, program->const_bytes, 8);
  /* The constants as they lie in the card's memory (the simulator's device
   * memory is host-addressable; a real card would copy them back). */
  if (program->const_bytes > 0) acc_bin_put(b, program->consts, (size_t)program->const_bytes);
  acc_bin_put_uint(b, program->num_insns, 8);
  c.status = b->status;
  for (size_t i = 0; i < program->num_insns && c.status == MX_ACC_OK; ++i) {
    const char *problem = insn_problem(&program->insns[i], i + 1 == program->num_insns);
    if (problem != NULL) {
      c.status = acc_fail(MX_ACC_ERR_UNSUPPORTED, "export_model: segment %zu instruction %zu: "
                          "%s for the offline format", k, i, problem);
    } else {
      code_insn(&c, &program->insns[i]);
    }
  }
  mlu_program_unref(program);
  return c.status != MX_ACC_OK ? c.status : b->status;
}

static int put_model(acc_bin_out *b, mlu_model *model) {
  const acc_graph *graph = mlu_model_graph(model);
  size_t entries = 0;
  for (size_t i = 0; i < graph->num_nodes; ++i) entries += (size_t)graph->nodes[i].num_outputs;
  if (graph->num_nodes > UINT32_MAX || entries > UINT32_MAX) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "export_model: the graph is too large");
  }
  acc_bin_put_header(b, &kFormat, 0); /* the size is filled in at the end */
  int status = acc_bin_put_graph(b, mlu_model_json(model), graph, weight_values, model);
  size_t segments = mlu_model_num_segments(model);
  acc_bin_put_uint(b, segments, 4);
  for (size_t k = 0; k < segments && status == MX_ACC_OK; ++k) status = put_segment(b, model, k);
  if (status != MX_ACC_OK) return status;
  acc_bin_put_checksum(b);
  return b->status;
}

int mlu_model_export(mlu_model *model, const char *path, uint64_t *bytes) {
  if (!acc_bin_host_is_little_endian()) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "export_model: not supported on a big-endian host");
  }
  acc_bin_out b = acc_bin_out_memory(&kFormat);
  b.checksum = ACC_BIN_XXH64;
  int status = put_model(&b, model);
  if (status == MX_ACC_OK) status = acc_bin_write_file(path, b.bytes, (size_t)b.size);
  if (status == MX_ACC_OK) *bytes = b.size;
  acc_bin_out_free(&b);
  return status;
}

/* ---- import: reading and checking the file ------------------------------------------------- */

/* One segment record, checked and decoded. */
typedef struct parsed_segment {
  size_t offset;             /* where its record starts */
  uint32_t num_nodes, launch, num_inputs, num_outputs;
  uint32_t *nodes;
  uint32_t *entries;         /* inputs, then outputs */
  uint64_t *io_bytes;
  mlu_program_info info;
  const unsigned char *consts; /* into the file's bytes */
  uint64_t const_bytes;
  mlu_insn *insns;
  size_t num_insns;
} parsed_segment;

typedef struct parsed_file {
  const char *path;
  acc_bin_graph g;           /* the graph JSON and the weights */
  size_t segments_offset;
  uint32_t num_segments;
  parsed_segment *segments;
  int refused;               /* install_segment refused the file (its message stands) */
} parsed_file;

static void parsed_file_free(parsed_file *p) {
  for (uint32_t k = 0; p->segments != NULL && k < p->num_segments; ++k) {
    free(p->segments[k].nodes);
    free(p->segments[k].entries);
    free(p->segments[k].io_bytes);
    free(p->segments[k].insns);
  }
  free(p->segments);
  acc_bin_graph_free(&p->g);
}

/* count u32 values, count first checked against the bytes left. */
static int take_u32_list(acc_bin_reader *r, uint32_t count, const char *field, uint32_t **list) {
  if ((uint64_t)count * 4 > r->size - r->offset) {
    return refuse(r->path, r->offset, "%" PRIu32 " %s need %" PRIu64 " bytes, %zu are left",
                  count, field, (uint64_t)count * 4, r->size - r->offset);
  }
  *list = malloc(count ? (size_t)count * sizeof **list : 1);
  if (*list == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: %s", field);
  for (uint32_t i = 0; i < count; ++i) acc_bin_take_u32(r, field, &(*list)[i]); /* cannot fail */
  return MX_ACC_OK;
}

/* The smallest record of an instruction other than SYNC (COPY's). */
enum { kMinInsnRecord = 2 + 6 * 8 };

static int read_program(acc_bin_reader *r, parsed_segment *seg) {
  uint32_t slots = seg->num_inputs + seg->num_outputs, opcodes = 0;
  if ((uint64_t)slots * 8 > r->size - r->offset) {
    return refuse(r->path, r->offset, "%" PRIu32 " I/O sizes need %" PRIu64 " bytes", slots,
                  (uint64_t)slots * 8);
  }
  seg->io_bytes = malloc((size_t)slots * sizeof *seg->io_bytes);
  if (seg->io_bytes == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: I/O");
  for (uint32_t i = 0; i < slots; ++i) acc_bin_take_uint(r, 8, "I/O bytes", &seg->io_bytes[i]);
  int status = acc_bin_take_u32(r, "opcode count", &opcodes);
  if (status == MX_ACC_OK && opcodes != MLU_NUM_OPCODES) {
    status = refuse(r->path, r->field, "%" PRIu32 " opcodes; this mlu_sim has %d", opcodes,
                    MLU_NUM_OPCODES);
  }
  codec c = {1, NULL, r, status};
  code_report(&c, &seg->info);
  uint64_t const_bytes = 0, num_insns = 0;
  if (c.status == MX_ACC_OK) c.status = acc_bin_take_uint(r, 8, "constant bytes", &const_bytes);
  if (c.status == MX_ACC_OK) c.status = acc_bin_take(r, const_bytes, "constants", &seg->consts);
  if (c.status != MX_ACC_OK) return c.status;
  seg->const_bytes = const_bytes;
  size_t report_offset = r->field;
  if (seg->info.const_bytes != const_bytes) {
    return refuse(r->path, report_offset, "the report gives %" PRIu64 " constant bytes, the "
                  "record holds %" PRIu64, seg->info.const_bytes, const_bytes);
  }
  if (seg->info.scratch_bytes > MLU_MODEL_FILE_MAX * 4 || seg->info.sram_words > LIMIT_SRAM) {
    return refuse(r->path, report_offset, "scratch of %" PRIu64 " bytes or on-chip memory of %"
                  PRIu64 " words is beyond any model", seg->info.scratch_bytes,
                  seg->info.sram_words);
  }
  status = acc_bin_take_uint(r, 8, "instruction count", &num_insns);
  if (status != MX_ACC_OK) return status;
  size_t left = r->size - r->offset;
  if (num_insns == 0 || num_insns - 1 > left / kMinInsnRecord) {
    return refuse(r->path, r->field, "%" PRIu64 " instructions cannot fit the %zu bytes left",
                  num_insns, left);
  }
  seg->insns = calloc((size_t)num_insns, sizeof *seg->insns);
  if (seg->insns == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: program");
  seg->num_insns = (size_t)num_insns;
  size_t counts[MLU_NUM_OPCODES] = {0};
  for (size_t i = 0; i < seg->num_insns; ++i) {
    size_t start = r->offset;
    code_insn(&c, &seg->insns[i]);
    if (c.status != MX_ACC_OK) return c.status;
    const char *problem = insn_problem(&seg->insns[i], i + 1 == seg->num_insns);
    if (problem != NULL) return refuse(r->path, start, "instruction %zu: %s", i, problem);
    counts[seg->insns[i].opcode] += 1;
  }
  if (seg->info.instructions != seg->num_insns ||
      memcmp(counts, seg->info.by_opcode, sizeof counts) != 0) {
    return refuse(r->path, report_offset, "the compile report's instruction counts do not "
                  "match the %zu instructions", seg->num_insns);
  }
  return MX_ACC_OK;
}

static int read_segment(acc_bin_reader *r, uint32_t k, parsed_segment *seg) {
  seg->offset = r->offset;
  int status = acc_bin_take_u32(r, "segment node count", &seg->num_nodes);
  if (status == MX_ACC_OK && seg->num_nodes == 0) {
    status = refuse(r->path, r->field, "segment %" PRIu32 " has no operators", k);
  }
  if (status == MX_ACC_OK) status = take_u32_list(r, seg->num_nodes, "segment nodes", &seg->nodes);
  if (status == MX_ACC_OK) status = acc_bin_take_u32(r, "segment launch", &seg->launch);
  uint32_t *inputs = NULL, *outputs = NULL;
  if (status == MX_ACC_OK) status = acc_bin_take_u32(r, "segment input count", &seg->num_inputs);
  if (status == MX_ACC_OK && seg->num_inputs > MLU_MAX_FUSION_IO) {
    status = refuse(r->path, r->field, "%" PRIu32 " segment inputs (at most %d)", seg->num_inputs,
                    MLU_MAX_FUSION_IO);
  }
  if (status == MX_ACC_OK) status = take_u32_list(r, seg->num_inputs, "segment inputs", &inputs);
  if (status == MX_ACC_OK) status = acc_bin_take_u32(r, "segment output count", &seg->num_outputs);
  if (status == MX_ACC_OK && (seg->num_outputs == 0 || seg->num_outputs > MLU_MAX_FUSION_IO)) {
    status = refuse(r->path, r->field, "%" PRIu32 " segment outputs (1 to %d)",
                    seg->num_outputs, MLU_MAX_FUSION_IO);
  }
  if (status == MX_ACC_OK) status = take_u32_list(r, seg->num_outputs, "segment outputs", &outputs);
  if (status == MX_ACC_OK) {
    seg->entries = malloc(((size_t)seg->num_inputs + seg->num_outputs) * sizeof *seg->entries);
    if (seg->entries == NULL) status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: I/O");
  }
  if (status == MX_ACC_OK) {
    memcpy(seg->entries, inputs, (size_t)seg->num_inputs * sizeof *inputs);
    memcpy(seg->entries + seg->num_inputs, outputs, (size_t)seg->num_outputs * sizeof *outputs);
  }
  free(inputs);
  free(outputs);
  return status == MX_ACC_OK ? read_program(r, seg) : status;
}

/* The smallest segment record: one node, one output, one SYNC. */
enum { kMinSegmentRecord = 4 + 4 + 4 + 4 + 4 + 4 + 8 + 4 + 8 * kReportFields + 8 + 8 + 2 };

static int parse_body(acc_bin_reader *r, parsed_file *p) {
  int status = acc_bin_read_graph(r, &p->g);
  if (status == MX_ACC_OK) status = acc_bin_take_u32(r, "segment count", &p->num_segments);
  if (status != MX_ACC_OK) return status;
  p->segments_offset = r->field;
  if (p->num_segments == 0 || p->num_segments > (r->size - r->offset) / kMinSegmentRecord) {
    return refuse(r->path, r->field, "%" PRIu32 " segments cannot fit the %zu bytes left",
                  p->num_segments, r->size - r->offset);
  }
  p->segments = calloc(p->num_segments, sizeof *p->segments);
  if (p->segments == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: segments");
  for (uint32_t s = 0; s < p->num_segments && status == MX_ACC_OK; ++s) {
    status = read_segment(r, s, &p->segments[s]);
  }
  if (status == MX_ACC_OK && r->offset != r->size) {
    status = refuse(r->path, r->offset, "%zu bytes follow the last segment", r->size - r->offset);
  }
  return status;
}

/* ---- import: building the model from the file's programs ----------------------------------- */

static int same_list(const uint32_t *file, const size_t *model, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (file[i] != model[i]) return 0;
  }
  return 1;
}

/* The file's program of segment view->index on card. */
static int make_program(parsed_file *p, parsed_segment *seg, const mlu_segment_view *view,
                        cnrtDev_t card, mlu_program **result) {
  mlu_params params = mlu_card_params(card);
  if (seg->info.sram_words > params.sram_bytes / sizeof(float)) {
    return refuse(p->path, seg->offset, "segment %zu needs %" PRIu64 " bytes of on-chip memory, "
                  "card %d has %" PRIu64, view->index, seg->info.sram_words * 4, card->ordinal,
                  (uint64_t)params.sram_bytes);
  }
  mlu_program *program = calloc(1, sizeof *program);
  if (program == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "import_model: program");
  atomic_init(&program->refs, 1);
  program->card = card;
  program->num_inputs = (int)seg->num_inputs;
  program->num_outputs = (int)seg->num_outputs;
  program->io_bytes = seg->io_bytes; /* taken over */
  seg->io_bytes = NULL;
  program->insns = seg->insns;
  program->num_insns = seg->num_insns;
  seg->insns = NULL;
  program->info = seg->info;
  int status = MX_ACC_OK;
  if (seg->const_bytes > 0) {
    status = mlu_card_alloc(card, seg->const_bytes, MLU_MEM_PROGRAM, &program->consts);
    if (status == MX_ACC_OK) {
      program->const_bytes = seg->const_bytes;
      memcpy(program->consts, seg->consts, (size_t)seg->const_bytes); /* host -> device */
      mlu_card_count_copy(card, seg->const_bytes);
    }
  }
  if (status == MX_ACC_OK && seg->info.scratch_bytes > 0) {
    status = mlu_card_alloc(card, seg->info.scratch_bytes, MLU_MEM_PROGRAM, &program->scratch);
    if (status == MX_ACC_OK) program->scratch_bytes = seg->info.scratch_bytes;
  }
  if (status == MX_ACC_OK && mlu_program_verify(program) != MX_ACC_OK) {
    char reason[kMessageSize];
    snprintf(reason, sizeof reason, "%s", acc_last_error());
    status = refuse(p->path, seg->offset, "the program of segment %zu: %s", view->index, reason);
  }
  if (status != MX_ACC_OK) {
    mlu_program_unref(program);
    return status;
  }
  *result = program;
  return MX_ACC_OK;
}

/* mlu_program_source: segment view->index gets the file's program after the
 * file's record is checked against the segment the graph gives. */
static int install_segment(void *context, const mlu_segment_view *view, cnmlFusionOp_t fusion,
                           cnrtDev_t card) {
  parsed_file *p = context;
  p->refused = 1; /* until it succeeds: every failure below is the file's */
  if (view->count != p->num_segments) {
    return refuse(p->path, p->segments_offset, "%" PRIu32 " segments; the graph makes %zu",
                  p->num_segments, view->count);
  }
  parsed_segment *seg = &p->segments[view->index];
  if (seg->num_nodes != view->num_nodes || seg->launch != (uint32_t)view->launch ||
      seg->num_inputs != view->num_inputs || seg->num_outputs != view->num_outputs ||
      !same_list(seg->entries, view->inputs, view->num_inputs) ||
      !same_list(seg->entries + seg->num_inputs, view->outputs, view->num_outputs)) {
    return refuse(p->path, seg->offset, "segment %zu does not match the graph's segment (its "
                  "operators, launch position or I/O)", view->index);
  }
  for (size_t i = 0; i < view->num_nodes; ++i) {
    if (seg->nodes[i] != view->nodes[i]) {
      return refuse(p->path, seg->offset, "segment %zu: operator %zu is node %" PRIu32 ", the "
                    "graph's is %" PRIu32, view->index, i, seg->nodes[i], view->nodes[i]);
    }
  }
  mlu_program *program = NULL;
  int status = make_program(p, seg, view, card, &program);
  if (status == MX_ACC_ERR_OUT_OF_MEMORY) p->refused = 0;
  if (status != MX_ACC_OK) return status;
  status = cnmlSimSetFusionOpProgram(fusion, card, program);
  if (status != MX_ACC_OK) {
    char reason[kMessageSize];
    snprintf(reason, sizeof reason, "%s", acc_last_error());
    mlu_program_unref(program);
    return refuse(p->path, seg->offset, "segment %zu: %s", view->index, reason);
  }
  p->refused = 0;
  return MX_ACC_OK;
}

int mlu_model_import(const char *model_id, const char *path, int dev_id, mlu_model **model) {
  unsigned char *bytes = NULL;
  acc_bin_reader r;
  int status = acc_bin_load_with(&kFormat, ACC_BIN_XXH64, path, &bytes, &r);
  if (status != MX_ACC_OK) return status;
  parsed_file parsed = {0};
  parsed.path = path;
  status = parse_body(&r, &parsed);
  if (status == MX_ACC_OK) {
    status = mlu_model_create_from(model_id, parsed.g.json, parsed.g.names, parsed.g.tensors,
                                   (int)parsed.g.num_weights, dev_id, install_segment, &parsed,
                                   model);
    if (status != MX_ACC_OK && status != MX_ACC_ERR_OUT_OF_MEMORY && !parsed.refused) {
      /* E.g. an operator this mlu_sim does not run: a file it cannot use. */
      char reason[kMessageSize];
      snprintf(reason, sizeof reason, "%s", acc_last_error());
      status = refuse(path, parsed.g.json_offset, "the graph cannot be loaded: %s", reason);
    }
  }
  parsed_file_free(&parsed);
  free(bytes);
  return status;
}
