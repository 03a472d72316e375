/*
 * Stage 4 of the compiler (see compiler.h): tiling and instruction emission
 * for each kernel, into the on-chip gap the memory planner (compiler.c, with
 * sram.h) leaves it.
 *
 * Every kernel follows one pattern: pick the largest tile whose operands
 * fit in the on-chip scratch area it is given, then per tile LOAD each
 * operand that is not resident, compute, and STORE the result unless it is
 * resident. Operands are addressed with explicit strides, so a tile in the
 * scratch area and a tensor resident on chip are used the same way.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_impl.h"
#include "mxnet_acc.h"
#include "status.h"

/* ---- instructions ------------------------------------------------------------------ */

void mlu_push_insn(compiler *c, const mlu_insn *insn) {
  if (c->emit_status != MX_ACC_OK) return;
  if (c->num_insns == c->insn_capacity) {
    size_t capacity = c->insn_capacity ? c->insn_capacity * 2 : 256;
    mlu_insn *insns = realloc(c->insns, capacity * sizeof *insns);
    if (insns == NULL) {
      c->emit_status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "instruction stream");
      return;
    }
    c->insns = insns;
    c->insn_capacity = capacity;
  }
  c->insns[c->num_insns++] = *insn;
  c->info.by_opcode[insn->opcode] += 1;
}

/* Where a value lives: on chip, or in DRAM. */
typedef struct operand {
  int resident;
  uint64_t sram;
  mlu_dram_ref dram;
} operand;

static operand operand_of(const compiler *c, int value) {
  const cvalue *root = &c->values[mlu_root(c, value)];
  operand o = {root->resident, root->sram, root->dram};
  return o;
}

/* ref advanced by elements of its dtype. */
static mlu_dram_ref dram_at(mlu_dram_ref ref, uint64_t elements) {
  ref.offset += elements * mlu_dtype_size(ref.dtype);
  return ref;
}

static mlu_dram_ref const_ref(uint64_t offset, int dtype) {
  mlu_dram_ref ref = {MLU_SPACE_CONST, (uint8_t)dtype, 0, offset};
  return ref;
}

/* LOAD or STORE of rows runs of run elements; nothing when empty. */
static void emit_move(compiler *c, int opcode, mlu_dram_ref dram, uint64_t sram, uint64_t rows,
                      uint64_t run, uint64_t dram_stride, uint64_t sram_stride) {
  if (rows == 0 || run == 0) return;
  mlu_insn insn;
  memset(&insn, 0, sizeof insn);
  insn.opcode = (uint8_t)opcode;
  insn.dtype = dram.dtype;
  insn.u.move = (mlu_move){dram, sram, rows, run, dram_stride, sram_stride};
  mlu_push_insn(c, &insn);
}

static mlu_epilogue epilogue_of(const ckernel *k) {
  mlu_epilogue ep = {MLU_NONE, MLU_NONE, 0, (uint8_t)k->act, k->act_lo, k->act_hi};
  return ep;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t half_up(int64_t x) { return (x + 1) / 2; }

/* Shrinks *x toward floor by halving; 0 when it is already there. */
static int shrink(int64_t *x, int64_t floor) {
  if (*x <= floor) return 0;
  *x = max64(floor, half_up(*x) < *x ? half_up(*x) : *x - 1);
  return 1;
}

/* ---- convolution ---------------------------------------------------------------------- */

typedef struct conv_geom {
  int64_t n, c, h, w, f, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, cg, fg;
} conv_geom;

static conv_geom conv_geom_of(const ckernel *k) {
  const cnmlBaseOp_t op = k->op;
  const struct cnmlConvOpParam *g = &op->p.conv.geometry;
  conv_geom s = {op->inputs[0]->dims[0], op->inputs[0]->dims[1], op->inputs[0]->dims[2],
                 op->inputs[0]->dims[3], op->output->dims[1], op->output->dims[2],
                 op->output->dims[3], op->filter->dims[2], op->filter->dims[3], g->sh, g->sw,
                 g->ph, g->pw, g->dh, g->dw, op->filter->dims[1],
                 op->output->dims[1] / op->p.conv.groups};
  return s;
}

/* Input rows that rows consecutive output rows read, at most. */
static int64_t conv_rows_in(const conv_geom *s, int64_t rows) {
  return min64(s->h, (rows - 1) * s->sh + s->dh * (s->kh - 1) + 1);
}

/* Input channels a block of nf filters reads: whole groups, or one. */
static int64_t conv_block_channels(const conv_geom *s, int64_t nf) {
  return nf >= s->fg ? nf / s->fg * s->cg : s->cg;
}

typedef struct tile2 {
  int64_t a, b; /* the two tiled extents (meaning per kernel) */
} tile2;

static uint64_t conv_words(const compiler *c, const ckernel *k, const conv_geom *s, tile2 t) {
  int64_t nf = t.a, rows = t.b;
  uint64_t words = (uint64_t)(nf * s->kh * s->kw * s->cg) + (k->bias ? (uint64_t)nf : 0) +
                   (k->int8 ? (uint64_t)nf : 0);
  if (!operand_of(c, k->inputs[0]).resident) {
    words += (uint64_t)(conv_block_channels(s, nf) * conv_rows_in(s, rows) * s->w);
  }
  uint64_t block = (uint64_t)(nf * rows * s->ow);
  if (k->residual >= 0 && !operand_of(c, k->residual).resident) words += block;
  if (!operand_of(c, k->output).resident) words += block;
  return words;
}

/* Filters per block shrink by whole groups, then within one group. */
static int conv_shrink_filters(const conv_geom *s, int64_t *nf) {
  if (*nf > s->fg) {
    *nf = max64(s->fg, *nf / 2 / s->fg * s->fg);
    return 1;
  }
  return shrink(nf, 1);
}

/* Tile = (filters per block, output rows per tile): rows shrink to 8 first
 * (the input halo re-read per tile stays small), then filters, then rows
 * down to 1. */
static int conv_plan(const compiler *c, const ckernel *k, uint64_t gap, tile2 *t,
                     uint64_t *words) {
  conv_geom s = conv_geom_of(k);
  *t = (tile2){s.f, s.oh};
  int64_t row_floor = min64(s.oh, 8);
  while ((*words = conv_words(c, k, &s, *t)) > gap) {
    if (shrink(&t->b, row_floor)) continue;
    if (conv_shrink_filters(&s, &t->a)) continue;
    if (shrink(&t->b, 1)) continue;
    return 0;
  }
  return 1;
}

/* Emits the CONV of one tile (filters f0 .. f0 + nf - 1, image n, output
 * rows oy0 .. oy0 + rows - 1) with its loads and store. */
typedef struct conv_tile {
  int64_t f0, nf, n, oy0, rows;
} conv_tile;

typedef struct conv_areas {
  uint64_t filter, bias, wscale, in, residual, out;
} conv_areas;

/* The data type of a CONV/MATMUL instruction, and of its filter constants. */
static int compute_dtype(const ckernel *k) { return k->int8 ? MLU_DT_INT8 : k->dtype; }

static void emit_conv_tile(compiler *c, const ckernel *k, const conv_geom *s, conv_tile t,
                           const conv_areas *area) {
  operand in = operand_of(c, k->inputs[0]), out = operand_of(c, k->output);
  mlu_insn insn;
  memset(&insn, 0, sizeof insn);
  insn.opcode = MLU_OP_CONV;
  insn.dtype = (uint8_t)compute_dtype(k);
  mlu_conv *cv = &insn.u.conv;
  int64_t c_lo = t.f0 / s->fg * s->cg, c_hi = ((t.f0 + t.nf - 1) / s->fg + 1) * s->cg;
  cv->in_c0 = c_lo;
  if (in.resident) {
    cv->in = in.sram + (uint64_t)((t.n * s->c + c_lo) * s->h * s->w);
    cv->in_row0 = 0;
    cv->in_rows = s->h;
  } else {
    int64_t span = s->dh * (s->kh - 1) + 1;
    int64_t lo = max64(0, t.oy0 * s->sh - s->ph);
    int64_t hi = max64(lo, min64(s->h, (t.oy0 + t.rows - 1) * s->sh - s->ph + span));
    uint64_t first = (uint64_t)(((t.n * s->c + c_lo) * s->h + lo) * s->w);
    uint64_t run = (uint64_t)((hi - lo) * s->w);
    emit_move(c, MLU_OP_LOAD, dram_at(in.dram, first), area->in, (uint64_t)(c_hi - c_lo), run,
              (uint64_t)(s->h * s->w), run);
    cv->in = area->in;
    cv->in_row0 = lo;
    cv->in_rows = hi - lo;
  }
  cv->in_ch_stride = (uint64_t)(cv->in_rows * s->w);
  uint64_t at = (uint64_t)(((t.n * s->f + t.f0) * s->oh + t.oy0) * s->ow); /* output element */
  uint64_t full_plane = (uint64_t)(s->oh * s->ow), tile_plane = (uint64_t)(t.rows * s->ow);
  cv->out = out.resident ? out.sram + at : area->out;
  cv->out_ch_stride = out.resident ? full_plane : tile_plane;
  cv->ep = epilogue_of(k);
  if (k->bias) cv->ep.bias = area->bias;
  cv->wscale = k->int8 ? area->wscale : MLU_NONE;
  if (k->residual >= 0) {
    operand res = operand_of(c, k->residual);
    if (res.resident) {
      cv->ep.residual = res.sram + at;
      cv->ep.residual_stride = full_plane;
    } else {
      emit_move(c, MLU_OP_LOAD, dram_at(res.dram, at), area->residual, (uint64_t)t.nf,
                tile_plane, full_plane, tile_plane);
      cv->ep.residual = area->residual;
      cv->ep.residual_stride = tile_plane;
    }
  }
  cv->h = s->h;
  cv->w = s->w;
  cv->filter = area->filter;
  cv->f0 = t.f0;
  cv->nf = t.nf;
  cv->oy0 = t.oy0;
  cv->out_rows = t.rows;
  cv->ow = s->ow;
  cv->cg = s->cg;
  cv->fg = s->fg;
  cv->kh = s->kh;
  cv->kw = s->kw;
  cv->sh = s->sh;
  cv->sw = s->sw;
  cv->ph = s->ph;
  cv->pw = s->pw;
  cv->dh = s->dh;
  cv->dw = s->dw;
  mlu_push_insn(c, &insn);
  if (!out.resident) {
    emit_move(c, MLU_OP_STORE, dram_at(out.dram, at), area->out, (uint64_t)t.nf, tile_plane,
              full_plane, tile_plane);
  }
}

static void emit_conv(compiler *c, const ckernel *k, uint64_t gap_addr, uint64_t gap) {
  conv_geom s = conv_geom_of(k);
  tile2 t;
  uint64_t words;
  conv_plan(c, k, gap, &t, &words);
  int64_t taps = s.kh * s.kw * s.cg;
  conv_areas area;
  area.filter = gap_addr;
  area.bias = area.filter + (uint64_t)(t.a * taps);
  area.wscale = area.bias + (k->bias ? (uint64_t)t.a : 0);
  area.in = area.wscale + (k->int8 ? (uint64_t)t.a : 0);
  area.residual = area.in + (operand_of(c, k->inputs[0]).resident
                                 ? 0
                                 : (uint64_t)(conv_block_channels(&s, t.a) *
                                              conv_rows_in(&s, t.b) * s.w));
  int load_residual = k->residual >= 0 && !operand_of(c, k->residual).resident;
  area.out = area.residual + (load_residual ? (uint64_t)(t.a * t.b * s.ow) : 0);
  for (int64_t f0 = 0; f0 < s.f;) {
    int64_t f1 = min64(f0 + t.a, s.f);
    if (t.a < s.fg) f1 = min64(f1, (f0 / s.fg + 1) * s.fg); /* stay inside one group */
    /* The filter block (and its bias) is loaded once and reused by every
     * image and row tile. */
    mlu_dram_ref filters =
        dram_at(const_ref(k->weights_offset, compute_dtype(k)), (uint64_t)(f0 * taps));
    emit_move(c, MLU_OP_LOAD, filters, area.filter, 1, (uint64_t)((f1 - f0) * taps), 0, 0);
    if (k->bias) {
      emit_move(c, MLU_OP_LOAD, dram_at(const_ref(k->bias_offset, MLU_DT_FLOAT32), (uint64_t)f0),
                area.bias, 1, (uint64_t)(f1 - f0), 0, 0);
    }
    if (k->int8) {
      emit_move(c, MLU_OP_LOAD, dram_at(const_ref(k->wscale_offset, MLU_DT_FLOAT32), (uint64_t)f0),
                area.wscale, 1, (uint64_t)(f1 - f0), 0, 0);
    }
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t oy0 = 0; oy0 < s.oh; oy0 += t.b) {
        conv_tile tile = {f0, f1 - f0, n, oy0, min64(t.b, s.oh - oy0)};
        emit_conv_tile(c, k, &s, tile, &area);
      }
    }
    f0 = f1;
  }
}

/* ---- fully connected (MATMUL) ------------------------------------------------------------ */

typedef struct mm_geom {
  int64_t rows, k, m;
} mm_geom;

static mm_geom mm_geom_of(const ckernel *k) {
  mm_geom g;
  g.m = k->op->filter->dims[0];
  g.k = k->op->filter->dims[1];
  g.rows = k->op->inputs[0]->count / g.k;
  return g;
}

/* tile2: a = columns (outputs) per block, b = rows per block. */
static uint64_t mm_words(const compiler *c, const ckernel *k, const mm_geom *g, tile2 t) {
  uint64_t words = (uint64_t)(t.a * g->k) + (k->bias ? (uint64_t)t.a : 0) +
                   (k->int8 ? (uint64_t)t.a : 0);
  if (!operand_of(c, k->inputs[0]).resident) words += (uint64_t)(t.b * g->k);
  uint64_t block = (uint64_t)(t.a * t.b);
  if (k->residual >= 0 && !operand_of(c, k->residual).resident) words += block;
  if (!operand_of(c, k->output).resident) words += block;
  return words;
}

static int mm_plan(const compiler *c, const ckernel *k, uint64_t gap, tile2 *t, uint64_t *words) {
  mm_geom g = mm_geom_of(k);
  *t = (tile2){g.m, g.rows};
  int64_t row_floor = min64(g.rows, 16);
  while ((*words = mm_words(c, k, &g, *t)) > gap) {
    if (shrink(&t->b, row_floor)) continue;
    if (shrink(&t->a, 1)) continue;
    if (shrink(&t->b, 1)) continue;
    return 0;
  }
  return 1;
}

static void emit_matmul(compiler *c, const ckernel *k, uint64_t gap_addr, uint64_t gap) {
  mm_geom g = mm_geom_of(k);
  tile2 t;
  uint64_t words;
  mm_plan(c, k, gap, &t, &words);
  operand a = operand_of(c, k->inputs[0]), out = operand_of(c, k->output);
  operand res = k->residual >= 0 ? operand_of(c, k->residual) : out;
  uint64_t w_at = gap_addr, bias_at = w_at + (uint64_t)(t.a * g.k);
  uint64_t wscale_at = bias_at + (k->bias ? (uint64_t)t.a : 0);
  uint64_t a_at = wscale_at + (k->int8 ? (uint64_t)t.a : 0);
  uint64_t res_at = a_at + (a.resident ? 0 : (uint64_t)(t.b * g.k));
  uint64_t out_at = res_at + (k->residual >= 0 && !res.resident ? (uint64_t)(t.a * t.b) : 0);
  for (int64_t c0 = 0; c0 < g.m; c0 += t.a) {
    int64_t nc = min64(t.a, g.m - c0);
    emit_move(c, MLU_OP_LOAD,
              dram_at(const_ref(k->weights_offset, compute_dtype(k)), (uint64_t)(c0 * g.k)), w_at,
              1, (uint64_t)(nc * g.k), 0, 0);
    if (k->bias) {
      emit_move(c, MLU_OP_LOAD, dram_at(const_ref(k->bias_offset, MLU_DT_FLOAT32), (uint64_t)c0),
                bias_at, 1, (uint64_t)nc, 0, 0);
    }
    if (k->int8) {
      emit_move(c, MLU_OP_LOAD, dram_at(const_ref(k->wscale_offset, MLU_DT_FLOAT32), (uint64_t)c0),
                wscale_at, 1, (uint64_t)nc, 0, 0);
    }
    for (int64_t r0 = 0; r0 < g.rows; r0 += t.b) {
      int64_t nr = min64(t.b, g.rows - r0);
      uint64_t at = (uint64_t)(r0 * g.m + c0);
      mlu_insn insn;
      memset(&insn, 0, sizeof insn);
      insn.opcode = MLU_OP_MATMUL;
      insn.dtype = (uint8_t)compute_dtype(k);
      mlu_matmul *mm = &insn.u.matmul;
      if (a.resident) {
        mm->a = a.sram + (uint64_t)(r0 * g.k);
      } else {
        emit_move(c, MLU_OP_LOAD, dram_at(a.dram, (uint64_t)(r0 * g.k)), a_at, 1,
                  (uint64_t)(nr * g.k), 0, 0);
        mm->a = a_at;
      }
      mm->a_stride = (uint64_t)g.k;
      mm->b = w_at;
      mm->out = out.resident ? out.sram + at : out_at;
      mm->out_stride = out.resident ? (uint64_t)g.m : (uint64_t)nc;
      mm->rows = nr;
      mm->cols = nc;
      mm->k = g.k;
      mm->ep = epilogue_of(k);
      if (k->bias) mm->ep.bias = bias_at;
      mm->wscale = k->int8 ? wscale_at : MLU_NONE;
      if (k->residual >= 0) {
        if (res.resident) {
          mm->ep.residual = res.sram + at;
          mm->ep.residual_stride = (uint64_t)g.m;
        } else {
          emit_move(c, MLU_OP_LOAD, dram_at(res.dram, at), res_at, (uint64_t)nr, (uint64_t)nc,
                    (uint64_t)g.m, (uint64_t)nc);
          mm->ep.residual = res_at;
          mm->ep.residual_stride = (uint64_t)nc;
        }
      }
      mlu_push_insn(c, &insn);
      if (!out.resident) {
        emit_move(c, MLU_OP_STORE, dram_at(out.dram, at), out_at, (uint64_t)nr, (uint64_t)nc,
                  (uint64_t)g.m, (uint64_t)nc);
      }
    }
  }
}

/* ---- pooling ------------------------------------------------------------------------------ */

typedef struct pool_geom {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
} pool_geom;

static pool_geom pool_geom_of(const ckernel *k) {
  const cnmlTensor_t in = k->op->inputs[0], out = k->op->output;
  const struct cnmlPoolOpParam *p = &k->op->p.pool;
  pool_geom g = {in->dims[0] * in->dims[1], in->dims[2], in->dims[3], out->dims[2], out->dims[3],
                 p->kh, p->kw, p->sh, p->sw, p->ph, p->pw};
  return g;
}

static int64_t pool_rows_in(const pool_geom *g, int64_t rows) {
  return min64(g->h, (rows - 1) * g->sh + g->kh);
}

/* tile2: a = planes per tile, b = output rows per tile. */
static uint64_t pool_words(const compiler *c, const ckernel *k, const pool_geom *g, tile2 t) {
  uint64_t words = 0;
  if (!operand_of(c, k->inputs[0]).resident) words += (uint64_t)(t.a * pool_rows_in(g, t.b) * g->w);
  if (!operand_of(c, k->output).resident) words += (uint64_t)(t.a * t.b * g->ow);
  return words;
}

static int pool_plan(const compiler *c, const ckernel *k, uint64_t gap, tile2 *t, uint64_t *words) {
  pool_geom g = pool_geom_of(k);
  *t = (tile2){g.planes, g.oh};
  int64_t row_floor = min64(g.oh, 8);
  while ((*words = pool_words(c, k, &g, *t)) > gap) {
    if (shrink(&t->b, row_floor)) continue;
    if (shrink(&t->a, 1)) continue;
    if (shrink(&t->b, 1)) continue;
    return 0;
  }
  return 1;
}

static void emit_pool(compiler *c, const ckernel *k, uint64_t gap_addr, uint64_t gap) {
  pool_geom g = pool_geom_of(k);
  tile2 t;
  uint64_t words;
  pool_plan(c, k, gap, &t, &words);
  operand in = operand_of(c, k->inputs[0]), out = operand_of(c, k->output);
  uint64_t in_at = gap_addr;
  uint64_t out_at = in_at + (in.resident ? 0 : (uint64_t)(t.a * pool_rows_in(&g, t.b) * g.w));
  const struct cnmlPoolOpParam *p = &k->op->p.pool;
  for (int64_t p0 = 0; p0 < g.planes; p0 += t.a) {
    int64_t np = min64(t.a, g.planes - p0);
    for (int64_t oy0 = 0; oy0 < g.oh; oy0 += t.b) {
      int64_t rows = min64(t.b, g.oh - oy0);
      mlu_insn insn;
      memset(&insn, 0, sizeof insn);
      insn.opcode = MLU_OP_POOL;
      insn.dtype = (uint8_t)k->dtype;
      mlu_pool *pl = &insn.u.pool;
      if (in.resident) {
        pl->in = in.sram + (uint64_t)(p0 * g.h * g.w);
        pl->in_row0 = 0;
        pl->in_rows = g.h;
      } else {
        int64_t lo = max64(0, oy0 * g.sh - g.ph);
        int64_t hi = max64(lo, min64(g.h, (oy0 + rows - 1) * g.sh - g.ph + g.kh));
        emit_move(c, MLU_OP_LOAD, dram_at(in.dram, (uint64_t)((p0 * g.h + lo) * g.w)), in_at,
                  (uint64_t)np, (uint64_t)((hi - lo) * g.w), (uint64_t)(g.h * g.w),
                  (uint64_t)((hi - lo) * g.w));
        pl->in = in_at;
        pl->in_row0 = lo;
        pl->in_rows = hi - lo;
      }
      pl->in_ch_stride = (uint64_t)(pl->in_rows * g.w);
      uint64_t at = (uint64_t)((p0 * g.oh + oy0) * g.ow);
      uint64_t full_plane = (uint64_t)(g.oh * g.ow), tile_plane = (uint64_t)(rows * g.ow);
      pl->out = out.resident ? out.sram + at : out_at;
      pl->out_ch_stride = out.resident ? full_plane : tile_plane;
      pl->planes = np;
      pl->h = g.h;
      pl->w = g.w;
      pl->oy0 = oy0;
      pl->out_rows = rows;
      pl->ow = g.ow;
      pl->kh = g.kh;
      pl->kw = g.kw;
      pl->sh = g.sh;
      pl->sw = g.sw;
      pl->ph = g.ph;
      pl->pw = g.pw;
      pl->mode = (uint8_t)p->mode;
      pl->count_include_pad = (uint8_t)(p->count_include_pad != 0);
      /* MXNet's max over an empty window: the lowest value of the dtype. */
      pl->empty_value = k->dtype == MLU_DT_FLOAT16 ? -65504.0f : -FLT_MAX;
      mlu_push_insn(c, &insn);
      if (!out.resident) {
        emit_move(c, MLU_OP_STORE, dram_at(out.dram, at), out_at, (uint64_t)np, tile_plane,
                  full_plane, tile_plane);
      }
    }
  }
}

/* ---- element-wise -------------------------------------------------------------------------- */

static int ewise_binary(const ckernel *k) {
  return k->ewise == MLU_EWISE_ADD || k->ewise == MLU_EWISE_MUL;
}

static uint64_t ewise_words(const compiler *c, const ckernel *k, int64_t t) {
  uint64_t words = k->ewise == MLU_EWISE_AFFINE ? (uint64_t)(2 * k->channels) : 0;
  if (!operand_of(c, k->inputs[0]).resident) words += (uint64_t)t;
  if (ewise_binary(k) && !operand_of(c, k->inputs[1]).resident) words += (uint64_t)t;
  if (!operand_of(c, k->output).resident) words += (uint64_t)t;
  return words;
}

static int ewise_plan(const compiler *c, const ckernel *k, uint64_t gap, int64_t *t,
                      uint64_t *words) {
  *t = c->values[k->output].count;
  while ((*words = ewise_words(c, k, *t)) > gap) {
    if (!shrink(t, 1)) return 0;
  }
  return 1;
}

/* Channel count and inner size of the per-channel (axis 1) affine. */
static void affine_shape(const ckernel *k, int64_t *channels, int64_t *inner) {
  const cnmlTensor_t in = k->op->inputs[0];
  *channels = in->dims[1];
  *inner = in->count / (in->dims[0] * in->dims[1]);
}

static void emit_ewise(compiler *c, const ckernel *k, uint64_t gap_addr, uint64_t gap) {
  int64_t t, total = c->values[k->output].count, channels = 1, inner = 1;
  uint64_t words;
  ewise_plan(c, k, gap, &t, &words);
  operand a = operand_of(c, k->inputs[0]), out = operand_of(c, k->output);
  operand b = ewise_binary(k) ? operand_of(c, k->inputs[1]) : a;
  int affine = k->ewise == MLU_EWISE_AFFINE;
  if (affine) affine_shape(k, &channels, &inner);
  uint64_t scale_at = gap_addr, shift_at = gap_addr + (uint64_t)channels;
  uint64_t a_at = gap_addr + (affine ? (uint64_t)(2 * channels) : 0);
  uint64_t b_at = a_at + (a.resident ? 0 : (uint64_t)t);
  uint64_t out_at = b_at + (ewise_binary(k) && !b.resident ? (uint64_t)t : 0);
  if (affine) {
    emit_move(c, MLU_OP_LOAD, const_ref(k->scale_offset, MLU_DT_FLOAT32), scale_at, 1,
              (uint64_t)channels, 0, 0);
    emit_move(c, MLU_OP_LOAD, const_ref(k->shift_offset, MLU_DT_FLOAT32), shift_at, 1,
              (uint64_t)channels, 0, 0);
  }
  for (int64_t e0 = 0; e0 < total; e0 += t) {
    uint64_t n = (uint64_t)min64(t, total - e0), at = (uint64_t)e0;
    mlu_insn insn;
    memset(&insn, 0, sizeof insn);
    insn.opcode = MLU_OP_EWISE;
    insn.dtype = (uint8_t)k->dtype;
    mlu_ewise *ew = &insn.u.ewise;
    if (a.resident) {
      ew->a = a.sram + at;
    } else {
      emit_move(c, MLU_OP_LOAD, dram_at(a.dram, at), a_at, 1, n, 0, 0);
      ew->a = a_at;
    }
    ew->b = MLU_NONE;
    if (ewise_binary(k)) {
      if (b.resident) {
        ew->b = b.sram + at;
      } else {
        emit_move(c, MLU_OP_LOAD, dram_at(b.dram, at), b_at, 1, n, 0, 0);
        ew->b = b_at;
      }
    }
    ew->out = out.resident ? out.sram + at : out_at;
    ew->scale = affine ? scale_at : MLU_NONE;
    ew->shift = affine ? shift_at : MLU_NONE;
    ew->n = (int64_t)n;
    ew->first = e0;
    ew->channels = channels;
    ew->inner = inner;
    ew->kind = (uint8_t)k->ewise;
    ew->act = (uint8_t)k->act;
    ew->act_lo = k->act_lo;
    ew->act_hi = k->act_hi;
    mlu_push_insn(c, &insn);
    if (!out.resident) emit_move(c, MLU_OP_STORE, dram_at(out.dram, at), out_at, 1, n, 0, 0);
  }
}

/* ---- softmax -------------------------------------------------------------------------------- */

typedef struct softmax_geom {
  int64_t outer, len, inner;
} softmax_geom;

static softmax_geom softmax_geom_of(const ckernel *k) {
  const cnmlTensor_t in = k->op->inputs[0];
  int axis = k->op->p.softmax.axis;
  softmax_geom g = {1, in->dims[axis], 1};
  for (int d = 0; d < axis; ++d) g.outer *= in->dims[d];
  for (int d = axis + 1; d < in->ndim; ++d) g.inner *= in->dims[d];
  return g;
}

/* tile2: a = outer slices per tile, b = inner positions per tile (below
 * inner only with one outer slice). */
static uint64_t softmax_words(const compiler *c, const ckernel *k, const softmax_geom *g, tile2 t) {
  uint64_t block = (uint64_t)(t.a * g->len * t.b), words = 0;
  if (!operand_of(c, k->inputs[0]).resident) words += block;
  if (!operand_of(c, k->output).resident) words += block;
  return words;
}

static int softmax_plan(const compiler *c, const ckernel *k, uint64_t gap, tile2 *t,
                        uint64_t *words) {
  softmax_geom g = softmax_geom_of(k);
  *t = (tile2){g.outer, g.inner};
  while ((*words = softmax_words(c, k, &g, *t)) > gap) {
    if (shrink(&t->a, 1)) continue;
    if (shrink(&t->b, 1)) continue;
    return 0;
  }
  return 1;
}

/* Moves one softmax block (nb outer slices x len x ib inner positions from
 * element at) between DRAM and a compact tile. */
static void softmax_move(compiler *c, int opcode, mlu_dram_ref dram, uint64_t at, uint64_t tile,
                         const softmax_geom *g, int64_t nb, int64_t ib) {
  if (ib == g->inner) {
    emit_move(c, opcode, dram_at(dram, at), tile, 1, (uint64_t)(nb * g->len * ib), 0, 0);
  } else {
    emit_move(c, opcode, dram_at(dram, at), tile, (uint64_t)g->len, (uint64_t)ib,
              (uint64_t)g->inner, (uint64_t)ib);
  }
}

static void emit_softmax(compiler *c, const ckernel *k, uint64_t gap_addr, uint64_t gap) {
  softmax_geom g = softmax_geom_of(k);
  tile2 t;
  uint64_t words;
  softmax_plan(c, k, gap, &t, &words);
  operand in = operand_of(c, k->inputs[0]), out = operand_of(c, k->output);
  uint64_t in_at = gap_addr;
  uint64_t out_at = in_at + (in.resident ? 0 : (uint64_t)(t.a * g.len * t.b));
  for (int64_t o0 = 0; o0 < g.outer; o0 += t.a) {
    int64_t nb = min64(t.a, g.outer - o0);
    for (int64_t i0 = 0; i0 < g.inner; i0 += t.b) {
      int64_t ib = min64(t.b, g.inner - i0);
      uint64_t at = (uint64_t)(o0 * g.len * g.inner + i0);
      mlu_insn insn;
      memset(&insn, 0, sizeof insn);
      insn.opcode = MLU_OP_SOFTMAX;
      insn.dtype = (uint8_t)k->dtype;
      mlu_softmax *sm = &insn.u.softmax;
      if (in.resident) {
        sm->in = in.sram + at;
        sm->in_outer_stride = (uint64_t)(g.len * g.inner);
        sm->in_axis_stride = (uint64_t)g.inner;
      } else {
        softmax_move(c, MLU_OP_LOAD, in.dram, at, in_at, &g, nb, ib);
        sm->in = in_at;
        sm->in_outer_stride = (uint64_t)(g.len * ib);
        sm->in_axis_stride = (uint64_t)ib;
      }
      if (out.resident) {
        sm->out = out.sram + at;
        sm->out_outer_stride = (uint64_t)(g.len * g.inner);
        sm->out_axis_stride = (uint64_t)g.inner;
      } else {
        sm->out = out_at;
        sm->out_outer_stride = (uint64_t)(g.len * ib);
        sm->out_axis_stride = (uint64_t)ib;
      }
      sm->outer = nb;
      sm->axis_len = g.len;
      sm->inner = ib;
      sm->temperature = k->op->p.softmax.temperature;
      mlu_push_insn(c, &insn);
      if (!out.resident) softmax_move(c, MLU_OP_STORE, out.dram, at, out_at, &g, nb, ib);
    }
  }
}

/* ---- data movement: concat and materialized reshapes ----------------------------------------- */

/* Copies a rows x run region (strides in elements) from value src to value
 * dst, through the scratch area only when both live in DRAM. */
typedef struct region {
  uint64_t src_at, src_stride, dst_at, dst_stride, rows, run;
} region;

static void copy_region(compiler *c, int src_value, int dst_value, region r, uint64_t gap_addr,
                        uint64_t gap) {
  if (r.rows == 0 || r.run == 0) return;
  operand src = operand_of(c, src_value), dst = operand_of(c, dst_value);
  if (src.resident && dst.resident) {
    mlu_insn insn;
    memset(&insn, 0, sizeof insn);
    insn.opcode = MLU_OP_COPY;
    insn.dtype = (uint8_t)c->values[dst_value].dtype;
    insn.u.copy = (mlu_copy){src.sram + r.src_at, dst.sram + r.dst_at, r.rows, r.run,
                             r.src_stride, r.dst_stride};
    mlu_push_insn(c, &insn);
  } else if (src.resident) {
    emit_move(c, MLU_OP_STORE, dram_at(dst.dram, r.dst_at), src.sram + r.src_at, r.rows, r.run,
              r.dst_stride, r.src_stride);
  } else if (dst.resident) {
    emit_move(c, MLU_OP_LOAD, dram_at(src.dram, r.src_at), dst.sram + r.dst_at, r.rows, r.run,
              r.src_stride, r.dst_stride);
  } else {
    uint64_t chunk = r.run < gap ? r.run : gap;
    uint64_t rows = gap / chunk < r.rows ? gap / chunk : r.rows;
    for (uint64_t r0 = 0; r0 < r.rows; r0 += rows) {
      uint64_t nr = rows < r.rows - r0 ? rows : r.rows - r0;
      for (uint64_t c0 = 0; c0 < r.run; c0 += chunk) {
        uint64_t nc = chunk < r.run - c0 ? chunk : r.run - c0;
        emit_move(c, MLU_OP_LOAD, dram_at(src.dram, r.src_at + r0 * r.src_stride + c0), gap_addr,
                  nr, nc, r.src_stride, nc);
        emit_move(c, MLU_OP_STORE, dram_at(dst.dram, r.dst_at + r0 * r.dst_stride + c0), gap_addr,
                  nr, nc, r.dst_stride, nc);
      }
    }
  }
}

/* Whether some copy of a CONCAT/COPY kernel goes DRAM to DRAM, through the
 * scratch area. */
static int copy_needs_any_scratch(const compiler *c, const ckernel *k) {
  for (int i = 0; i < k->num_inputs; ++i) {
    if (!operand_of(c, k->inputs[i]).resident && !operand_of(c, k->output).resident) return 1;
  }
  return 0;
}

/* Scratch words a CONCAT/COPY kernel uses within gap: enough for its
 * largest input, or the whole gap. */
static uint64_t copy_scratch_words(const compiler *c, const ckernel *k, uint64_t gap) {
  if (!copy_needs_any_scratch(c, k)) return 0;
  uint64_t largest = 1;
  for (int i = 0; i < k->num_inputs; ++i) {
    uint64_t count = (uint64_t)c->values[k->inputs[i]].count;
    if (count > largest) largest = count;
  }
  return largest < gap ? largest : gap;
}

static void emit_concat(compiler *c, const ckernel *k, uint64_t gap_addr, uint64_t gap) {
  gap = copy_scratch_words(c, k, gap);
  const cnmlTensor_t out = k->op->output;
  int axis = k->op->p.axis;
  uint64_t outer = 1, inner = 1, total = (uint64_t)out->dims[axis], offset = 0;
  for (int d = 0; d < axis; ++d) outer *= (uint64_t)out->dims[d];
  for (int d = axis + 1; d < out->ndim; ++d) inner *= (uint64_t)out->dims[d];
  for (int i = 0; i < k->num_inputs; ++i) {
    uint64_t len = (uint64_t)k->op->inputs[i]->dims[axis];
    region r = {0, len * inner, offset * inner, total * inner, outer, len * inner};
    copy_region(c, k->inputs[i], k->output, r, gap_addr, gap);
    offset += len;
  }
}

static void emit_copy(compiler *c, const ckernel *k, uint64_t gap_addr, uint64_t gap) {
  gap = copy_scratch_words(c, k, gap);
  uint64_t count = (uint64_t)c->values[k->output].count;
  region r = {0, count, 0, count, 1, count};
  copy_region(c, k->inputs[0], k->output, r, gap_addr, gap);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

int mlu_kernel_plan(const compiler *c, const ckernel *k, uint64_t gap, uint64_t *words) {
  tile2 t;
  int64_t n;
  switch (k->kind) {
    case CK_CONV: return conv_plan(c, k, gap, &t, words);
    case CK_MATMUL: return mm_plan(c, k, gap, &t, words);
    case CK_POOL: return pool_plan(c, k, gap, &t, words);
    case CK_EWISE: return ewise_plan(c, k, gap, &n, words);
    case CK_SOFTMAX: return softmax_plan(c, k, gap, &t, words);
    case CK_CONCAT:
    case CK_COPY:
      *words = copy_scratch_words(c, k, gap);
      return *words > 0 || !copy_needs_any_scratch(c, k);
    default:
      *words = 0;
      return 1;
  }
}

void mlu_emit_kernel(compiler *c, const ckernel *k, uint64_t gap_addr, uint64_t gap) {
  switch (k->kind) {
    case CK_CONV: emit_conv(c, k, gap_addr, gap); break;
    case CK_MATMUL: emit_matmul(c, k, gap_addr, gap); break;
    case CK_POOL: emit_pool(c, k, gap_addr, gap); break;
    case CK_EWISE: emit_ewise(c, k, gap_addr, gap); break;
    case CK_SOFTMAX: emit_softmax(c, k, gap_addr, gap); break;
    case CK_CONCAT: emit_concat(c, k, gap_addr, gap); break;
    case CK_COPY: emit_copy(c, k, gap_addr, gap); break;
    default: break;
  }
}
