/*
 * The compiler's working state, shared by compiler.c (ordering, kernels,
 * fusion, memory planning, finishing) and emit.c (tiling, instruction
 * emission). Internal to the compiler.
 *
 * Calls go one way: compiler.c calls emit.c (the functions declared below)
 * and sram.c (the on-chip allocator, sram.h); emit.c calls neither back, and
 * needs only this header's types and inline helpers.
 */
#ifndef MLU_SIM_COMPILER_IMPL_H_
#define MLU_SIM_COMPILER_IMPL_H_

#include <stddef.h>
#include <stdint.h>

#include "card.h"
#include "cnml_impl.h"
#include "isa.h"
#include "sram.h"

/* One tensor of the compiled subgraph. */
typedef struct cvalue {
  cnmlTensor_t tensor;
  int64_t count;
  int dtype;
  int producer;  /* kernel index; -1 for a launch input, -2 once folded away */
  int slot;      /* I/O slot, or -1 for an intermediate */
  int alias;     /* value whose storage it shares (a reshape compiled away), or -1 */
  int uses;      /* reads by live kernels (counted on the root of an alias chain) */
  int last_use;  /* index of the last live kernel reading it (root) */
  int resident;  /* kept on chip from its producer to its last reader */
  uint64_t sram; /* its on-chip address when resident */
  mlu_dram_ref dram; /* its DRAM home otherwise */
} cvalue;

typedef enum ckernel_kind {
  CK_CONV,
  CK_MATMUL,
  CK_POOL,
  CK_EWISE,
  CK_SOFTMAX,
  CK_CONCAT,
  CK_COPY,  /* reshape that must materialize its result */
  CK_ALIAS  /* reshape compiled away: emits nothing */
} ckernel_kind;

/* One compute step: an op, plus whatever fusion folded into it. */
typedef struct ckernel {
  int kind;                 /* ckernel_kind */
  cnmlBaseOp_t op;          /* geometry and parameters */
  int dtype;                /* data type it computes on */
  int dead;                 /* folded into another kernel */
  int num_inputs;
  int inputs[MLU_MAX_OP_INPUTS]; /* values */
  int output;               /* value */
  int ewise;                /* mlu_ewise_kind, CK_EWISE */
  int act;                  /* epilogue activation */
  float act_lo, act_hi;
  int residual;             /* value added in the epilogue, or -1 */
  /* Constants (host copies in fp32, owned), placed in the constant blob. */
  float *weights;           /* CONV [F][kh][kw][cg], MATMUL [M][K]; stored in dtype */
  int64_t weights_count;
  float *bias;              /* CONV/MATMUL, per output channel; stored in fp32 */
  float *scale, *shift;     /* EWISE AFFINE, per channel; stored in fp32 */
  int64_t channels;         /* length of bias / scale / shift / wscale */
  int int8;                 /* CONV/MATMUL compiled to int8: weights hold integers in
                             * [-127, 127], stored as int8; wscale holds their scales */
  float *wscale;            /* int8: per output channel, stored in fp32 */
  uint64_t weights_offset, bias_offset, scale_offset, shift_offset, wscale_offset; /* bytes */
} ckernel;

typedef struct compiler {
  mlu_card *card;
  mlu_params params;
  cvalue *values;
  size_t num_values, value_capacity;
  ckernel *kernels;
  size_t num_kernels;
  int num_inputs, num_outputs;
  mlu_insn *insns;
  size_t num_insns, insn_capacity;
  int emit_status; /* MX_ACC_OK, or the first failure to grow insns */
  mlu_sram_space sram; /* resident values and tiles (sram.h) */
  uint64_t scratch_bytes, const_bytes;
  mlu_program_info info;
} compiler;

/* The value whose storage v uses (follows aliases). */
static inline int mlu_root(const compiler *c, int v) {
  while (c->values[v].alias >= 0) v = c->values[v].alias;
  return v;
}

/* ---- emit.c ----------------------------------------------------------------- */

/* Whether kernel k, with its operands' current residency, can be tiled
 * into gap_words of on-chip scratch; if so *words is what it uses. */
int mlu_kernel_plan(const compiler *c, const ckernel *k, uint64_t gap_words, uint64_t *words);

/* Emits kernel k, tiled into the scratch area [gap_addr, gap_addr +
 * gap_words) (which mlu_kernel_plan accepted). */
void mlu_emit_kernel(compiler *c, const ckernel *k, uint64_t gap_addr, uint64_t gap_words);

/* Appends one instruction (failures are sticky in c->emit_status). */
void mlu_push_insn(compiler *c, const mlu_insn *insn);

#endif /* MLU_SIM_COMPILER_IMPL_H_ */
