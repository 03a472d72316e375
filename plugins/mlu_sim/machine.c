#include "machine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "kernels.h"
#include "mxnet_acc.h"
#include "status.h"

void mlu_cluster_release(mlu_cluster *cluster) {
  free(cluster->sram);
  free(cluster->quant);
  free(cluster->acc);
  free(cluster->work);
  memset(cluster, 0, sizeof *cluster);
}

/* Grows the fast kernels' workspace to the most any instruction of the
 * program needs, and the int8 workspace to what the program's int8
 * instructions need (at least one byte and word once there is any, so the
 * kernels never see NULL). */
static int workspace_reserve(mlu_cluster *cluster, const mlu_program *program, int parts,
                             uint64_t *work_per_part) {
  uint64_t bytes = 0, words = 0, work = 0;
  int any = 0;
  for (size_t i = 0; i < program->num_insns; ++i) {
    const mlu_insn *insn = &program->insns[i];
    uint64_t need = mlu_kernel_work_words(insn);
    if (need > work) work = need;
    if (insn->dtype != MLU_DT_INT8 ||
        (insn->opcode != MLU_OP_CONV && insn->opcode != MLU_OP_MATMUL)) {
      continue;
    }
    any = 1;
    uint64_t b = mlu_int8_work_bytes(insn), w = mlu_int8_acc_words(insn);
    if (b > bytes) bytes = b;
    if (w > words) words = w;
  }
  *work_per_part = work;
  work = work <= UINT64_MAX / (uint64_t)parts ? work * (uint64_t)parts : UINT64_MAX;
  if (work > cluster->work_words) {
    float *buffer = work <= SIZE_MAX / sizeof(float) ? malloc((size_t)work * sizeof(float)) : NULL;
    if (buffer == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "kernel workspace");
    free(cluster->work);
    cluster->work = buffer;
    cluster->work_words = work;
  }
  if (!any) return MX_ACC_OK;
  if (bytes == 0) bytes = 1;
  if (words == 0) words = 1;
  if (bytes > cluster->quant_bytes) {
    int8_t *quant = bytes <= SIZE_MAX ? malloc((size_t)bytes) : NULL;
    if (quant == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "int8 workspace");
    free(cluster->quant);
    cluster->quant = quant;
    cluster->quant_bytes = bytes;
  }
  if (words > cluster->acc_words) {
    int32_t *acc = words <= SIZE_MAX / sizeof(int32_t) ? malloc((size_t)words * sizeof(int32_t))
                                                       : NULL;
    if (acc == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "int8 workspace");
    free(cluster->acc);
    cluster->acc = acc;
    cluster->acc_words = words;
  }
  return MX_ACC_OK;
}

static int cluster_reserve(mlu_cluster *cluster, uint64_t words) {
  if (words <= cluster->words) return MX_ACC_OK;
  float *sram = words <= SIZE_MAX / sizeof(float) ? malloc((size_t)words * sizeof(float)) : NULL;
  if (sram == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "on-chip memory of %llu words",
                                    (unsigned long long)words);
  free(cluster->sram);
  cluster->sram = sram;
  cluster->words = words;
  return MX_ACC_OK;
}

/* ---- program lifetime ------------------------------------------------------ */

void mlu_program_ref(mlu_program *program) { atomic_fetch_add(&program->refs, 1); }

void mlu_program_unref(mlu_program *program) {
  if (program == NULL || atomic_fetch_sub(&program->refs, 1) != 1) return;
  if (program->card != NULL) {
    mlu_card_free(program->card, program->consts, MLU_MEM_PROGRAM);
    mlu_card_free(program->card, program->scratch, MLU_MEM_PROGRAM);
  }
  free(program->insns);
  free(program->io_bytes);
  free(program);
}

/* ---- verification ------------------------------------------------------------ */

/* Largest value any address, count or stride may take: far below the
 * overflow of the products verification computes. */
#define MLU_VERIFY_LIMIT ((uint64_t)1 << 40)

/* Whether count runs of run words, stride apart from base, end within
 * limit. Fields come from the compiler; they are still checked in full. */
static int extent_ok(uint64_t base, uint64_t count, uint64_t stride, uint64_t run,
                     uint64_t limit) {
  if (count == 0 || run == 0) return 1;
  if (base >= MLU_VERIFY_LIMIT || count >= MLU_VERIFY_LIMIT || stride >= MLU_VERIFY_LIMIT ||
      run >= MLU_VERIFY_LIMIT || (count - 1) > MLU_VERIFY_LIMIT / (stride ? stride : 1)) {
    return 0;
  }
  return base + (count - 1) * stride + run <= limit;
}

static int nonnegative(int64_t value) { return value >= 0 && (uint64_t)value < MLU_VERIFY_LIMIT; }

static uint64_t dram_buffer_bytes(const mlu_program *p, const mlu_dram_ref *ref, int *ok) {
  *ok = 1;
  switch (ref->space) {
    case MLU_SPACE_IO:
      if (ref->slot < p->num_inputs + p->num_outputs) return p->io_bytes[ref->slot];
      break;
    case MLU_SPACE_CONST: return p->const_bytes;
    case MLU_SPACE_SCRATCH: return p->scratch_bytes;
    default: break;
  }
  *ok = 0;
  return 0;
}

static int move_ok(const mlu_program *p, const mlu_move *m, int opcode) {
  size_t size = mlu_dtype_size(m->dram.dtype);
  if (opcode == MLU_OP_STORE && m->dram.dtype == MLU_DT_INT8) return 0; /* LOAD-only storage */
  int known;
  uint64_t bytes = dram_buffer_bytes(p, &m->dram, &known);
  if (!known || size == 0 || m->dram.offset % size != 0) return 0;
  if (!extent_ok(m->sram, m->rows, m->sram_stride, m->run, p->info.sram_words)) return 0;
  return extent_ok(m->dram.offset / size, m->rows, m->dram_stride, m->run, bytes / size);
}

/* Rows [lo, hi) of a layer input of height h that output rows oy0 ..
 * oy0 + rows - 1 read, for a window of kernel taps dilate apart. */
static void rows_read(int64_t oy0, int64_t rows, int64_t stride, int64_t pad, int64_t kernel,
                      int64_t dilate, int64_t h, int64_t *lo, int64_t *hi) {
  *lo = oy0 * stride - pad;
  *hi = (oy0 + rows - 1) * stride - pad + (kernel - 1) * dilate + 1;
  if (*lo < 0) *lo = 0;
  if (*hi > h) *hi = h;
}

static int block_rows_ok(int64_t row0, int64_t rows, int64_t lo, int64_t hi, int64_t h) {
  if (row0 < 0 || row0 + rows > h) return 0;
  return hi <= lo || (row0 <= lo && hi <= row0 + rows);
}

/* Compute instructions with no output element. The verifier accepts one
 * without checking its addresses, so the machine must not run it
 * (run_insn); both ask these. */
static int conv_empty(const mlu_conv *c) { return c->nf == 0 || c->out_rows == 0 || c->ow == 0; }
static int matmul_empty(const mlu_matmul *m) { return m->rows == 0 || m->cols == 0; }
static int pool_empty(const mlu_pool *p) {
  return p->planes == 0 || p->out_rows == 0 || p->ow == 0;
}
static int softmax_empty(const mlu_softmax *s) {
  return s->outer == 0 || s->axis_len == 0 || s->inner == 0;
}

static int epilogue_ok(const mlu_epilogue *ep, uint64_t channels, uint64_t count, uint64_t words) {
  if (ep->bias != MLU_NONE && !extent_ok(ep->bias, 1, 0, channels, words)) return 0;
  return ep->residual == MLU_NONE || extent_ok(ep->residual, channels, ep->residual_stride,
                                               count, words);
}

static int conv_ok(const mlu_conv *c, uint64_t words) {
  const int64_t fields[] = {c->in_c0, c->in_row0, c->in_rows, c->h, c->w, c->f0, c->nf, c->oy0,
                            c->out_rows, c->ow, c->cg, c->kh, c->kw, c->ph, c->pw};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) {
    if (!nonnegative(fields[i])) return 0;
  }
  if (c->fg < 1 || c->sh < 1 || c->sw < 1 || c->dh < 1 || c->dw < 1 || c->kh < 1 || c->kw < 1) {
    return 0;
  }
  if (conv_empty(c)) return 1;
  int64_t first_group = c->f0 / c->fg, last_group = (c->f0 + c->nf - 1) / c->fg;
  int64_t channel_lo = first_group * c->cg, channel_hi = (last_group + 1) * c->cg;
  if (channel_lo < c->in_c0) return 0;
  int64_t lo, hi;
  rows_read(c->oy0, c->out_rows, c->sh, c->ph, c->kh, c->dh, c->h, &lo, &hi);
  if (!block_rows_ok(c->in_row0, c->in_rows, lo, hi, c->h)) return 0;
  uint64_t plane = (uint64_t)(c->out_rows * c->ow);
  return extent_ok(c->in, (uint64_t)(channel_hi - c->in_c0), c->in_ch_stride,
                   (uint64_t)(c->in_rows * c->w), words) &&
         extent_ok(c->filter, 1, 0, (uint64_t)(c->nf * c->kh * c->kw * c->cg), words) &&
         extent_ok(c->out, (uint64_t)c->nf, c->out_ch_stride, plane, words) &&
         epilogue_ok(&c->ep, (uint64_t)c->nf, plane, words);
}

static int matmul_ok(const mlu_matmul *m, uint64_t words) {
  if (!nonnegative(m->rows) || !nonnegative(m->cols) || !nonnegative(m->k)) return 0;
  if (matmul_empty(m)) return 1;
  uint64_t rows = (uint64_t)m->rows, cols = (uint64_t)m->cols, k = (uint64_t)m->k;
  if (!extent_ok(m->out, rows, m->out_stride, cols, words)) return 0;
  if (m->ep.bias != MLU_NONE && !extent_ok(m->ep.bias, 1, 0, cols, words)) return 0;
  if (m->ep.residual != MLU_NONE &&
      !extent_ok(m->ep.residual, rows, m->ep.residual_stride, cols, words)) {
    return 0;
  }
  return extent_ok(m->a, rows, m->a_stride, k, words) && extent_ok(m->b, cols, k, k, words);
}

/* The cluster workspace an int8 instruction needs (kernels.h) fits in as
 * many bytes as the on-chip memory has: its quantized input block is a byte
 * per fp32 word the instruction reads. Only a program whose blocks overlap
 * (a channel or row stride below its run) could ask for more, and the
 * machine would allocate it for every launch (the counts saturate rather
 * than wrap). */
static int int8_workspace_ok(const mlu_insn *insn, uint64_t words) {
  return mlu_int8_work_bytes(insn) <= words * sizeof(float) && mlu_int8_acc_words(insn) <= words;
}

/* int8 operands: the per-filter scales, an accumulation that int32 holds
 * exactly (MLU_INT8_MAX_TAPS), and the workspace. */
static int conv_int8_ok(const mlu_insn *insn, uint64_t words) {
  const mlu_conv *c = &insn->u.conv;
  if (conv_empty(c)) return 1;
  if (c->kh > MLU_INT8_MAX_TAPS || c->kw > MLU_INT8_MAX_TAPS || c->cg > MLU_INT8_MAX_TAPS ||
      c->kh * c->kw * c->cg > MLU_INT8_MAX_TAPS) {
    return 0;
  }
  return extent_ok(c->wscale, 1, 0, (uint64_t)c->nf, words) && int8_workspace_ok(insn, words);
}

static int matmul_int8_ok(const mlu_insn *insn, uint64_t words) {
  const mlu_matmul *m = &insn->u.matmul;
  if (matmul_empty(m)) return 1;
  return m->k <= MLU_INT8_MAX_TAPS && extent_ok(m->wscale, 1, 0, (uint64_t)m->cols, words) &&
         int8_workspace_ok(insn, words);
}

static int pool_ok(const mlu_pool *p, uint64_t words) {
  const int64_t fields[] = {p->in_row0, p->in_rows, p->planes, p->h, p->w, p->oy0, p->out_rows,
                            p->ow, p->kh, p->kw, p->ph, p->pw};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) {
    if (!nonnegative(fields[i])) return 0;
  }
  if (p->sh < 1 || p->sw < 1) return 0;
  if (pool_empty(p)) return 1;
  int64_t lo, hi;
  rows_read(p->oy0, p->out_rows, p->sh, p->ph, p->kh, 1, p->h, &lo, &hi);
  return block_rows_ok(p->in_row0, p->in_rows, lo, hi, p->h) &&
         extent_ok(p->in, (uint64_t)p->planes, p->in_ch_stride, (uint64_t)(p->in_rows * p->w),
                   words) &&
         extent_ok(p->out, (uint64_t)p->planes, p->out_ch_stride,
                   (uint64_t)(p->out_rows * p->ow), words);
}

static int ewise_ok(const mlu_ewise *e, uint64_t words) {
  if (!nonnegative(e->n) || !nonnegative(e->first)) return 0;
  if (e->n == 0) return 1;
  uint64_t n = (uint64_t)e->n;
  if (!extent_ok(e->a, 1, 0, n, words) || !extent_ok(e->out, 1, 0, n, words)) return 0;
  if ((e->kind == MLU_EWISE_ADD || e->kind == MLU_EWISE_MUL) && !extent_ok(e->b, 1, 0, n, words)) {
    return 0;
  }
  if (e->kind == MLU_EWISE_AFFINE) {
    if (e->channels < 1 || e->inner < 1 || !nonnegative(e->channels)) return 0;
    return extent_ok(e->scale, 1, 0, (uint64_t)e->channels, words) &&
           extent_ok(e->shift, 1, 0, (uint64_t)e->channels, words);
  }
  return e->kind <= MLU_EWISE_ACT;
}

static int softmax_ok(const mlu_softmax *s, uint64_t words) {
  if (!nonnegative(s->outer) || !nonnegative(s->axis_len) || !nonnegative(s->inner)) return 0;
  if (softmax_empty(s)) return 1;
  /* The last element of the last strip, as a run of inner words. */
  uint64_t in_last = s->in + (uint64_t)(s->outer - 1) * s->in_outer_stride;
  uint64_t out_last = s->out + (uint64_t)(s->outer - 1) * s->out_outer_stride;
  return s->in_outer_stride < MLU_VERIFY_LIMIT && s->out_outer_stride < MLU_VERIFY_LIMIT &&
         extent_ok(in_last, (uint64_t)s->axis_len, s->in_axis_stride, (uint64_t)s->inner,
                   words) &&
         extent_ok(out_last, (uint64_t)s->axis_len, s->out_axis_stride, (uint64_t)s->inner,
                   words) &&
         s->temperature > 0.0;
}

static int insn_ok(const mlu_program *p, const mlu_insn *insn) {
  uint64_t words = p->info.sram_words;
  switch (insn->opcode) {
    case MLU_OP_LOAD:
    case MLU_OP_STORE: return move_ok(p, &insn->u.move, insn->opcode);
    case MLU_OP_CONV:
      return conv_ok(&insn->u.conv, words) &&
             (insn->dtype != MLU_DT_INT8 || conv_int8_ok(insn, words));
    case MLU_OP_MATMUL:
      return matmul_ok(&insn->u.matmul, words) &&
             (insn->dtype != MLU_DT_INT8 || matmul_int8_ok(insn, words));
    case MLU_OP_POOL: return pool_ok(&insn->u.pool, words);
    case MLU_OP_EWISE: return ewise_ok(&insn->u.ewise, words);
    case MLU_OP_SOFTMAX: return softmax_ok(&insn->u.softmax, words);
    case MLU_OP_COPY: {
      const mlu_copy *c = &insn->u.copy;
      return extent_ok(c->src, c->rows, c->src_stride, c->run, words) &&
             extent_ok(c->dst, c->rows, c->dst_stride, c->run, words);
    }
    case MLU_OP_SYNC: return 1;
    default: return 0;
  }
}

int mlu_program_verify(const mlu_program *program) {
  for (size_t i = 0; i < program->num_insns; ++i) {
    if (!insn_ok(program, &program->insns[i])) {
      return acc_fail(MX_ACC_ERR_INTERNAL, "compiled program fails verification at instruction "
                      "%zu (opcode %d)", i, program->insns[i].opcode);
    }
  }
  if (program->num_insns == 0 || program->insns[program->num_insns - 1].opcode != MLU_OP_SYNC) {
    return acc_fail(MX_ACC_ERR_INTERNAL, "compiled program does not end with SYNC");
  }
  return MX_ACC_OK;
}

/* ---- execution ------------------------------------------------------------------ */

typedef struct launch {
  const mlu_program *program;
  void *const *io;
  float *sram;
  const mlu_cluster *cluster; /* its workspaces */
  uint64_t work_per_part;     /* words of the float workspace each worker owns */
  mlu_team *team;             /* the card's claimed team, or NULL */
  int workers;                /* 1 + the team's helpers this launch uses */
} launch;

typedef struct part_job {
  const launch *l;
  const mlu_insn *insn;
} part_job;

static void run_part(void *arg, int part, int parts, int worker) {
  const part_job *job = arg;
  float *work = job->l->cluster->work == NULL
                    ? NULL
                    : job->l->cluster->work + (uint64_t)worker * job->l->work_per_part;
  mlu_kernel_part(job->l->sram, job->insn, work, part, parts);
}

static unsigned char *dram_address(const launch *l, const mlu_dram_ref *ref) {
  switch (ref->space) {
    case MLU_SPACE_IO: return (unsigned char *)l->io[ref->slot] + ref->offset;
    case MLU_SPACE_CONST: return (unsigned char *)l->program->consts + ref->offset;
    default: return (unsigned char *)l->program->scratch + ref->offset;
  }
}

/* A move as rows runs of run elements; one contiguous run when neither
 * side skips anything between rows (the verifier bounded rows * run). */
typedef struct move_shape {
  uint64_t rows, run, dram_stride, sram_stride;
} move_shape;

static move_shape move_shape_of(const mlu_move *m) {
  move_shape shape = {m->rows, m->run, m->dram_stride, m->sram_stride};
  if (m->rows > 1 && m->dram_stride == m->run && m->sram_stride == m->run) {
    shape.run = m->rows * m->run;
    shape.rows = 1;
    shape.dram_stride = shape.sram_stride = shape.run;
  }
  return shape;
}

/* Part `part` of `parts` of a move: a share of its rows, or of its one
 * run's elements when it has fewer rows than parts (columns [*c0, *c1)).
 * Every element is moved the same way whichever part moves it. */
static void move_part(const move_shape *shape, int part, int parts, uint64_t *r0, uint64_t *r1,
                      uint64_t *c0, uint64_t *c1) {
  if (shape->rows >= (uint64_t)parts) {
    *r0 = (uint64_t)((double)shape->rows * part / parts);
    *r1 = part + 1 == parts ? shape->rows : (uint64_t)((double)shape->rows * (part + 1) / parts);
    *c0 = 0;
    *c1 = shape->run;
    return;
  }
  *r0 = 0;
  *r1 = shape->rows;
  uint64_t at = (uint64_t)((double)shape->run * part / parts) & ~(uint64_t)15;
  uint64_t to = part + 1 == parts ? shape->run
                                  : (uint64_t)((double)shape->run * (part + 1) / parts) &
                                        ~(uint64_t)15;
  *c0 = at < shape->run ? at : shape->run;
  *c1 = to < shape->run ? to : shape->run;
}

static void run_load(const launch *l, const mlu_move *m, int part, int parts) {
  move_shape shape = move_shape_of(m);
  uint64_t r0, r1, c0, c1;
  move_part(&shape, part, parts, &r0, &r1, &c0, &c1);
  if (c0 >= c1) return;
  size_t size = mlu_dtype_size(m->dram.dtype);
  const unsigned char *src = dram_address(l, &m->dram);
  uint64_t n = c1 - c0;
  for (uint64_t r = r0; r < r1; ++r) {
    const unsigned char *row = src + (r * shape.dram_stride + c0) * size;
    float *dst = l->sram + m->sram + r * shape.sram_stride + c0;
    if (m->dram.dtype == MLU_DT_FLOAT16) {
      mlu_half_to_float_n(row, dst, n);
    } else if (m->dram.dtype == MLU_DT_INT8) {
      for (uint64_t i = 0; i < n; ++i) {
        int8_t value;
        memcpy(&value, row + i, sizeof value);
        dst[i] = (float)value;
      }
    } else {
      memcpy(dst, row, n * sizeof(float));
    }
  }
}

static void run_store(const launch *l, const mlu_move *m, int part, int parts) {
  move_shape shape = move_shape_of(m);
  uint64_t r0, r1, c0, c1;
  move_part(&shape, part, parts, &r0, &r1, &c0, &c1);
  if (c0 >= c1) return;
  size_t size = mlu_dtype_size(m->dram.dtype);
  unsigned char *dst = dram_address(l, &m->dram);
  uint64_t n = c1 - c0;
  for (uint64_t r = r0; r < r1; ++r) {
    unsigned char *row = dst + (r * shape.dram_stride + c0) * size;
    const float *src = l->sram + m->sram + r * shape.sram_stride + c0;
    if (m->dram.dtype == MLU_DT_FLOAT16) {
      mlu_float_to_half_n(src, row, n);
    } else {
      memcpy(row, src, n * sizeof(float));
    }
  }
}

/* Moves of at least this many elements are split between host threads:
 * some 10 us of copying, above the cost of waking a helper. */
#define MOVE_SPLIT_ELEMENTS 32768u

static int move_splits(const mlu_insn *insn) {
  if (insn->opcode != MLU_OP_LOAD && insn->opcode != MLU_OP_STORE) return 0;
  const mlu_move *m = &insn->u.move;
  /* (each factor below the threshold: the product cannot overflow) */
  return m->rows >= MOVE_SPLIT_ELEMENTS || m->run >= MOVE_SPLIT_ELEMENTS ||
         m->rows * m->run >= MOVE_SPLIT_ELEMENTS;
}

static void run_move_part(void *arg, int part, int parts, int worker) {
  const part_job *job = arg;
  (void)worker;
  if (job->insn->opcode == MLU_OP_LOAD) {
    run_load(job->l, &job->insn->u.move, part, parts);
  } else {
    run_store(job->l, &job->insn->u.move, part, parts);
  }
}

/* Whether an instruction writes no element. The verifier takes one
 * unchecked, so it must not run: the int8 matmul, run anyway, quantized A
 * with no column of B and read past the on-chip memory through an imported
 * file's address; a move or copy with an empty run looped over up to 2^28
 * rows of nothing (a fuzzed file: 11 s for one launch). */
static int insn_empty(const mlu_insn *insn) {
  switch (insn->opcode) {
    case MLU_OP_LOAD:
    case MLU_OP_STORE: return insn->u.move.rows == 0 || insn->u.move.run == 0;
    case MLU_OP_COPY: return insn->u.copy.rows == 0 || insn->u.copy.run == 0;
    case MLU_OP_CONV: return conv_empty(&insn->u.conv);
    case MLU_OP_MATMUL: return matmul_empty(&insn->u.matmul);
    case MLU_OP_POOL: return pool_empty(&insn->u.pool);
    case MLU_OP_EWISE: return insn->u.ewise.n == 0;
    case MLU_OP_SOFTMAX: return softmax_empty(&insn->u.softmax);
    default: return 0;
  }
}

static void run_insn(const launch *l, const mlu_insn *insn) {
  int int8 = insn->dtype == MLU_DT_INT8;
  if (insn_empty(insn)) return;
  if (l->team != NULL) {
    int parts = mlu_kernel_parts(insn, l->workers);
    if (parts > 1) {
      part_job job = {l, insn};
      mlu_team_run(l->team, parts, run_part, &job);
      return;
    }
    if (move_splits(insn)) {
      part_job job = {l, insn};
      mlu_team_run(l->team, l->workers * MLU_PARTS_PER_WORKER, run_move_part, &job);
      return;
    }
  }
  switch (insn->opcode) {
    case MLU_OP_LOAD: run_load(l, &insn->u.move, 0, 1); break;
    case MLU_OP_STORE: run_store(l, &insn->u.move, 0, 1); break;
    case MLU_OP_CONV:
      if (int8) {
        mlu_kernel_conv_int8(l->sram, &insn->u.conv, l->cluster->quant, l->cluster->acc);
      } else {
        mlu_kernel_conv(l->sram, &insn->u.conv, l->cluster->work, 0, 1);
      }
      break;
    case MLU_OP_MATMUL:
      if (int8) {
        mlu_kernel_matmul_int8(l->sram, &insn->u.matmul, l->cluster->quant);
      } else {
        mlu_kernel_matmul(l->sram, &insn->u.matmul, l->cluster->work, 0, 1);
      }
      break;
    case MLU_OP_POOL: mlu_kernel_pool(l->sram, &insn->u.pool, l->cluster->work, 0, 1); break;
    case MLU_OP_EWISE: mlu_kernel_ewise(l->sram, &insn->u.ewise, 0, 1); break;
    case MLU_OP_SOFTMAX: mlu_kernel_softmax(l->sram, &insn->u.softmax); break;
    case MLU_OP_COPY: mlu_kernel_copy(l->sram, &insn->u.copy); break;
    default: break; /* SYNC: every instruction above completes in order */
  }
}

/* Checks the launch's I/O pointers against the card's live memory and its
 * on-chip size; returns the card's parameters for the cost model. */
static int check_launch(const mlu_program *p, void *const *io, mlu_params *params) {
  mlu_card *card = p->card;
  int status = MX_ACC_OK;
  pthread_mutex_lock(&card->lock);
  *params = card->params;
  if (p->info.sram_words > card->params.sram_bytes / sizeof(float)) {
    status = acc_fail(MX_ACC_ERR_DEVICE, "the program needs %llu bytes of on-chip memory, card "
                      "%d has %llu: compile it again", (unsigned long long)(p->info.sram_words * 4),
                      card->ordinal, (unsigned long long)card->params.sram_bytes);
  }
  char what[64];
  for (int i = 0; status == MX_ACC_OK && i < p->num_inputs + p->num_outputs; ++i) {
    snprintf(what, sizeof what, "launch %s %d", i < p->num_inputs ? "input" : "output",
             i < p->num_inputs ? i : i - p->num_inputs);
    status = mlu_card_check_locked(card, io[i], p->io_bytes[i], what);
  }
  pthread_mutex_unlock(&card->lock);
  return status;
}

int mlu_machine_run(const mlu_program *program, void *const *io, mlu_cluster *cluster,
                    double *sim_ns) {
  mlu_params params;
  mlu_card *card = program->card;
  int status = check_launch(program, io, &params);
  if (status == MX_ACC_OK) status = cluster_reserve(cluster, program->info.sram_words);
  if (status != MX_ACC_OK) return status;
  /* Host threads: the card's team when num_threads > 1 and no other queue
   * of the card holds it (team.h); else this worker alone. */
  int helpers = params.num_threads > 1 ? mlu_team_claim(&card->team, (int)params.num_threads - 1)
                                       : 0;
  uint64_t work_per_part = 0;
  status = workspace_reserve(cluster, program, 1 + helpers, &work_per_part);
  if (status != MX_ACC_OK) {
    if (helpers > 0) mlu_team_release(&card->team);
    return status;
  }
  launch l = {program, io, cluster->sram, cluster, work_per_part,
              helpers > 0 ? &card->team : NULL, 1 + helpers};
  double time_ns = params.launch_latency_ns;
  uint64_t dram_bytes = 0;
  for (size_t i = 0; i < program->num_insns; ++i) {
    run_insn(&l, &program->insns[i]);
    time_ns += mlu_cost_insn_ns(&params, &program->insns[i], &dram_bytes);
  }
  if (helpers > 0) mlu_team_release(&card->team);
  pthread_mutex_lock(&card->lock);
  card->stats.launches += 1;
  card->stats.instructions += program->num_insns;
  card->stats.dram_bytes += dram_bytes;
  card->stats.sim_time_ns += time_ns;
  card->stats.sim_cycles += time_ns * params.clock_hz / 1e9;
  pthread_mutex_unlock(&card->lock);
  if (sim_ns != NULL) *sim_ns = time_ns;
  return MX_ACC_OK;
}
