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

#include "isa.h"

void mlu_kernel_conv(float *sram, const mlu_conv *conv);
void mlu_kernel_matmul(float *sram, const mlu_matmul *matmul);
void mlu_kernel_pool(float *sram, const mlu_pool *pool);
void mlu_kernel_ewise(float *sram, const mlu_ewise *ewise);
void mlu_kernel_softmax(float *sram, const mlu_softmax *softmax);
void mlu_kernel_copy(float *sram, const mlu_copy *copy);

/* One activation applied to one value. */
float mlu_activate(float x, int act, float lo, float hi);

#endif /* MLU_SIM_KERNELS_H_ */
