/*
 * The instruction set of the simulated MLU ("MLU-sim ISA"), and the program
 * that cnmlCompileBaseOp() / cnmlCompileFusionOp() produce from it.
 *
 * Machine model. A card has device DRAM (a byte arena, see card.h) and each
 * queue runs its launches on a compute cluster with an on-chip SRAM of
 * params.sram_bytes, addressed in 32-bit words: values on chip are always
 * fp32, whatever their storage type in DRAM. Compute instructions read and
 * write only SRAM; LOAD and STORE are the only way data crosses between
 * DRAM and SRAM, converting the storage dtype (fp16 or fp32) on the way.
 * One program is one launch; its last instruction is SYNC.
 *
 * int8 mode. A CONV or MATMUL whose instruction dtype is MLU_DT_INT8 computes
 * in int8 (card parameter precision=int8, see cost.h and docs/mlu_sim.md):
 * its filter block holds int8 weights (LOADed from int8 constants, each an
 * exact integer in [-127, 127] in its fp32 word), wscale addresses one fp32
 * dequantization scale per filter (per column for MATMUL), and the input
 * block is quantized on the fly: scale_a = max|x| / 127 over the input the
 * instruction reads (CONV: the channels of its filters' groups, the rows
 * its output rows read; MATMUL: its rows x k block), q = round(x / scale_a)
 * saturated to [-127, 127]. Products are int8 x int8 accumulated exactly in
 * int32 (so at most MLU_INT8_MAX_TAPS terms per result), then dequantized
 * as (float)acc * (scale_a * wscale[f]) in fp32, then the fp32 epilogue. An
 * input block holding a NaN or infinity makes every result of the
 * instruction NaN before the epilogue. Everything else stays fp32/fp16.
 *
 * DRAM operands name a buffer symbolically (mlu_dram_ref): an I/O slot of
 * the launch (the pointers given to Forward), the program's constants
 * (transformed filters, folded biases) or its scratch (intermediates that do
 * not fit on chip). Programs therefore hold no device addresses but their
 * own two buffers, which is what a later "offline model" export can
 * serialize as it is.
 *
 * Operand layouts. A CONV/POOL block is channels x rows x width with row
 * stride = width and a channel stride given per operand; a MATMUL block is
 * rows x columns with a row stride. Strides let an instruction address a
 * tile loaded into a scratch area and a whole tensor kept resident on chip
 * the same way.
 *
 *   LOAD    dram -> sram: rows runs of run elements (strides per side),
 *           widening fp16 to fp32 and int8 to exact integer-valued fp32
 *   STORE   sram -> dram: the same, the other way (fp32 or fp16 only)
 *   CONV    2-D grouped/strided/dilated/padded convolution of an input block
 *           with a filter block laid out [filter][ky][kx][channel], plus an
 *           epilogue (bias, residual add, activation)
 *   MATMUL  out[r][c] = sum_k a[r][k] * b[c][k], plus an epilogue
 *   POOL    max or average pooling with MXNet's window rules
 *   EWISE   element-wise add, mul, per-channel affine (x * scale + shift:
 *           inference batch norm, folded to two vectors at compile time;
 *           there is no batch-norm instruction) or activation alone, each
 *           with an optional activation
 *   SOFTMAX softmax along the middle axis of an outer x axis x inner block
 *   COPY    sram -> sram strided copy (concat, reshape)
 *   SYNC    end of the launch: every STORE is visible in DRAM
 */
#ifndef MLU_SIM_ISA_H_
#define MLU_SIM_ISA_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Storage types of DRAM data. INT8 holds quantized filters (constants of
 * int8-mode programs); only LOAD reads it and nothing STOREs it. As an
 * instruction dtype, MLU_DT_INT8 marks an int8 CONV/MATMUL (see above). */
typedef enum mlu_dtype { MLU_DT_FLOAT32 = 0, MLU_DT_FLOAT16 = 1, MLU_DT_INT8 = 2 } mlu_dtype;

/* Bytes per element of a storage type, 0 if unknown. */
size_t mlu_dtype_size(int dtype);

typedef enum mlu_space {
  MLU_SPACE_IO = 0,     /* slot = I/O index: inputs first, then outputs */
  MLU_SPACE_CONST = 1,  /* the program's constants */
  MLU_SPACE_SCRATCH = 2 /* the program's DRAM scratch */
} mlu_space;

typedef struct mlu_dram_ref {
  uint8_t space;   /* mlu_space */
  uint8_t dtype;   /* storage type of the elements there */
  uint16_t slot;   /* I/O slot for MLU_SPACE_IO */
  uint64_t offset; /* bytes from the start of the buffer */
} mlu_dram_ref;

typedef enum mlu_opcode {
  MLU_OP_LOAD,
  MLU_OP_STORE,
  MLU_OP_CONV,
  MLU_OP_MATMUL,
  MLU_OP_POOL,
  MLU_OP_EWISE,
  MLU_OP_SOFTMAX,
  MLU_OP_COPY,
  MLU_OP_SYNC,
  MLU_NUM_OPCODES
} mlu_opcode;

typedef enum mlu_act {
  MLU_ACT_NONE,
  MLU_ACT_RELU,
  MLU_ACT_SIGMOID,
  MLU_ACT_TANH,
  MLU_ACT_CLIP /* x > hi ? hi : (x < lo ? lo : x), MXNet's clip (and ReLU6) */
} mlu_act;

/* An absent SRAM operand. */
#define MLU_NONE UINT64_MAX

/* Most products one int8 CONV/MATMUL result may sum (kh * kw * cg, or k):
 * 133144 * 127 * 127 <= INT32_MAX, so the int32 accumulator never
 * overflows. Larger reductions stay in floating point. */
#define MLU_INT8_MAX_TAPS ((int64_t)133144)

/* What CONV, MATMUL and EWISE apply to each result, in this order:
 * + bias[channel], + residual, activation. */
typedef struct mlu_epilogue {
  uint64_t bias;            /* one value per output channel (CONV) / column (MATMUL) */
  uint64_t residual;        /* a block laid out like the output, or MLU_NONE */
  uint64_t residual_stride; /* its channel (CONV) or row (MATMUL) stride */
  uint8_t act;              /* mlu_act */
  float act_lo, act_hi;     /* MLU_ACT_CLIP bounds */
} mlu_epilogue;

typedef struct mlu_move { /* LOAD, STORE */
  mlu_dram_ref dram;      /* first element of row 0 */
  uint64_t sram;
  uint64_t rows, run;     /* rows runs of run contiguous elements */
  uint64_t dram_stride;   /* elements between rows in DRAM */
  uint64_t sram_stride;   /* words between rows on chip */
} mlu_move;

typedef struct mlu_conv {
  /* Input block: channels in_c0 .. of the layer input, rows in_row0 ..
   * in_row0 + in_rows - 1 (rows outside [0, h) are zero padding and never
   * stored), every column. */
  uint64_t in, in_ch_stride;
  int64_t in_c0, in_row0, in_rows;
  int64_t h, w;              /* the layer input's height and width */
  uint64_t filter;           /* nf filters of kh * kw * cg words */
  /* Output block: filters f0 .. f0 + nf - 1, rows oy0 .. oy0 + out_rows - 1. */
  uint64_t out, out_ch_stride;
  int64_t f0, nf, oy0, out_rows, ow;
  int64_t cg, fg;            /* input channels and filters per group */
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  mlu_epilogue ep;
  uint64_t wscale;           /* int8 only: nf fp32 per-filter scales */
} mlu_conv;

typedef struct mlu_matmul {
  uint64_t a, a_stride;      /* rows x k */
  uint64_t b;                /* cols x k, compact */
  uint64_t out, out_stride;  /* rows x cols */
  int64_t rows, cols, k;
  mlu_epilogue ep;
  uint64_t wscale;           /* int8 only: cols fp32 per-column scales */
} mlu_matmul;

typedef enum mlu_pool_mode { MLU_POOL_MAX = 0, MLU_POOL_AVG = 1 } mlu_pool_mode;

typedef struct mlu_pool {
  uint64_t in, in_ch_stride; /* planes x in_rows x w, rows from in_row0 */
  int64_t in_row0, in_rows;
  uint64_t out, out_ch_stride; /* planes x out_rows x ow, rows from oy0 */
  int64_t planes, h, w, oy0, out_rows, ow;
  int64_t kh, kw, sh, sw, ph, pw;
  uint8_t mode;              /* mlu_pool_mode */
  uint8_t count_include_pad; /* avg: divide by the padded window size */
  float empty_value;         /* max over a window with no data (the dtype's lowest) */
} mlu_pool;

typedef enum mlu_ewise_kind {
  MLU_EWISE_ADD,
  MLU_EWISE_MUL,
  MLU_EWISE_AFFINE, /* a * scale[c] + shift[c], c = ((first + i) / inner) % channels */
  MLU_EWISE_ACT     /* the activation alone */
} mlu_ewise_kind;

typedef struct mlu_ewise {
  uint64_t a, b, out;        /* n contiguous words each (b: ADD/MUL only) */
  uint64_t scale, shift;     /* AFFINE: channels words each */
  int64_t n, first, channels, inner;
  uint8_t kind;              /* mlu_ewise_kind */
  uint8_t act;
  float act_lo, act_hi;
} mlu_ewise;

typedef struct mlu_softmax {
  /* element (o, l, i) at o * outer_stride + l * axis_stride + i */
  uint64_t in, in_outer_stride, in_axis_stride;
  uint64_t out, out_outer_stride, out_axis_stride;
  int64_t outer, axis_len, inner;
  double temperature;       /* the values are divided by it first */
} mlu_softmax;

typedef struct mlu_copy {
  uint64_t src, dst, rows, run, src_stride, dst_stride;
} mlu_copy;

typedef struct mlu_insn {
  uint8_t opcode; /* mlu_opcode */
  uint8_t dtype;  /* data type the operation works on (cost model: peak rate);
                   * MLU_DT_INT8 on CONV/MATMUL: int8 compute */
  union {
    mlu_move move;
    mlu_conv conv;
    mlu_matmul matmul;
    mlu_pool pool;
    mlu_ewise ewise;
    mlu_softmax softmax;
    mlu_copy copy;
  } u;
} mlu_insn;

/* What the compiler did, for tests, statistics and documentation. */
typedef struct mlu_program_info {
  size_t instructions;
  size_t by_opcode[MLU_NUM_OPCODES];
  size_t kernels;          /* compute steps after fusion */
  size_t folded_batchnorms; /* BatchNorms folded into a CONV/MATMUL's weights */
  size_t fused_epilogues;  /* activations and residual adds fused into a producer */
  size_t resident_values;  /* intermediates kept on chip for their whole life */
  size_t spilled_values;   /* intermediates that went through DRAM scratch */
  size_t aliased_values;   /* reshapes compiled away */
  size_t int8_kernels;     /* CONV/MATMUL kernels compiled to int8 (precision=int8) */
  uint64_t sram_words;     /* on-chip words the program needs */
  uint64_t const_bytes, scratch_bytes;
} mlu_program_info;

struct mlu_card;

/* A compiled launch. Immutable once compiled; shared (reference counted)
 * by the op that compiled it and by every queued launch of it, so an op may
 * be destroyed or recompiled while launches of it are still queued. */
typedef struct mlu_program {
  atomic_int refs;
  struct mlu_card *card;  /* whose DRAM holds consts and scratch */
  mlu_insn *insns;
  size_t num_insns;
  int num_inputs, num_outputs;
  uint64_t *io_bytes;     /* bytes each I/O slot must hold */
  void *consts;           /* device memory on card (NULL when empty) */
  uint64_t const_bytes;
  void *scratch;          /* device memory on card (NULL when empty) */
  uint64_t scratch_bytes;
  mlu_program_info info;
} mlu_program;

#endif /* MLU_SIM_ISA_H_ */
