/*
 * The numerics of the compute instructions (isa.h), on on-chip memory: an
 * array of fp32 words. Each function trusts its instruction, which
 * mlu_program_verify() checked against the program's on-chip size when it
 * was compiled.
 *
 * Precision follows the host's CPU path (acc_host.ops): CONV accumulates
 * in fp32 as MXNet's float32 convolution does; MATMUL, average POOL and
 * SOFTMAX accumulate in double and round once, as the host's float64
 * definitions do; element-wise work is plain fp32.
 */
#ifndef MLU_SIM_KERNELS_H_
#define MLU_SIM_KERNELS_H_

#include <stdint.h>

#include "isa.h"

/* The fp32 kernels compute part `part` of `parts` (0 of 1: all of it): a
 * fixed share of the instruction's output (CONV: of its output rows, or of
 * its columns when pointwise, or of its filters when direct; MATMUL: of
 * its rows; POOL: of its planes; EWISE: of its elements), each value
 * computed the same way whatever the split, so results do not depend on
 * the number of parts. work is the part's own float workspace, at least
 * mlu_kernel_work_words(insn) words (the im2col chunk of a convolution,
 * stride phases, pooling sums, packed MATMUL columns). */
void mlu_kernel_conv(float *sram, const mlu_conv *conv, float *work, int part, int parts);
void mlu_kernel_matmul(float *sram, const mlu_matmul *matmul, float *work, int part, int parts);
uint64_t mlu_conv_work_words(const mlu_conv *conv);
uint64_t mlu_matmul_work_words(const mlu_matmul *matmul);
/* Words of the float workspace one instruction needs (0: none). */
uint64_t mlu_kernel_work_words(const mlu_insn *insn);
/* Into how many parts an instruction is split between `workers` host
 * threads: 1 (not split) unless it is an fp32 CONV, MATMUL, POOL or EWISE
 * with enough work; else up to MLU_PARTS_PER_WORKER parts per thread. And
 * one part of it. */
#define MLU_PARTS_PER_WORKER 4
int mlu_kernel_parts(const mlu_insn *insn, int workers);
void mlu_kernel_part(float *sram, const mlu_insn *insn, float *work, int part, int parts);
void mlu_kernel_pool(float *sram, const mlu_pool *pool, float *work, int part, int parts);
uint64_t mlu_pool_work_words(const mlu_pool *pool);
void mlu_kernel_ewise(float *sram, const mlu_ewise *ewise, int part, int parts);
void mlu_kernel_softmax(float *sram, const mlu_softmax *softmax);
void mlu_kernel_copy(float *sram, const mlu_copy *copy);

/* int8 CONV/MATMUL (instruction dtype MLU_DT_INT8, semantics in isa.h).
 * Besides on-chip memory they use a workspace of the compute cluster: q
 * (mlu_int8_work_bytes bytes: the quantized input block, and for MATMUL one
 * column of weights) and acc (mlu_int8_acc_words int32 accumulators). */
void mlu_kernel_conv_int8(float *sram, const mlu_conv *conv, int8_t *q, int32_t *acc);
void mlu_kernel_matmul_int8(float *sram, const mlu_matmul *matmul, int8_t *q);
uint64_t mlu_int8_work_bytes(const mlu_insn *insn);
uint64_t mlu_int8_acc_words(const mlu_insn *insn);

/* round(x / scale) saturated to [-127, 127], ties away from zero; 0 when
 * scale is not positive or x / scale is NaN. The one quantizer of the
 * simulator: filters at compile time, activations at run time. */
int8_t mlu_quantize(float x, float scale);

/* One activation applied to one value. */
float mlu_activate(float x, int act, float lo, float hi);

#endif /* MLU_SIM_KERNELS_H_ */
