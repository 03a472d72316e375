/*
 * The compiler of the simulated MLU: BaseOps (one, or a FusionOp's
 * subgraph) -> a verified program (isa.h) with its constants uploaded to
 * the card.
 *
 * Stages, in compiler.c:
 *   1. order the ops topologically and turn each into a kernel (one compute
 *      step), transforming FILTER/CONST data: convolution filters are
 *      re-laid out [filter][ky][kx][channel] (the reduction innermost, as
 *      the MAC arrays consume it); batch norm becomes a per-channel affine
 *      (scale, shift) computed once;
 *   2. fusion (FusionOps only): a batch norm right after a convolution or
 *      fully connected layer is folded into its weights and bias; an
 *      activation, clip or residual add right after a producer becomes that
 *      producer's epilogue; reshapes become aliases of their input;
 *   2b. int8 (card parameter precision=int8, FusionOps and single BaseOps):
 *      convolution and fully connected filters are quantized per output
 *      channel (scale = max|w| / 127, after batch-norm folding) and stored
 *      as int8 with fp32 scales; their instructions compute in int8;
 *   3. memory planning: each intermediate is kept resident on chip for its
 *      whole life when it fits next to what is already there and the tiles
 *      of the kernel producing it, otherwise it goes through DRAM scratch;
 *   4. emission: each kernel is tiled to the on-chip space left (LOAD the
 *      operands that are not resident, compute, STORE the result unless it
 *      stays on chip), and the launch ends with SYNC.
 * Single BaseOps (imperative mode) skip stage 2: every op reads its inputs
 * from DRAM and writes its output back, one launch each.
 */
#ifndef MLU_SIM_COMPILER_H_
#define MLU_SIM_COMPILER_H_

#include <stddef.h>

#include "card.h"
#include "cnml_impl.h"

/* Compiles ops for card. inputs / outputs are the launch's I/O slots in
 * order (inputs may repeat a tensor for single ops such as Add(x, x)).
 * fuse: apply stage 2. On success *program holds one reference. Returns an
 * MX_ACC status (MX_ACC_ERR_UNSUPPORTED when something cannot be tiled into
 * the card's on-chip memory, MX_ACC_ERR_OUT_OF_MEMORY when the card's DRAM
 * cannot hold the constants or scratch) with a message recorded. */
int mlu_compile(mlu_card *card, const cnmlBaseOp_t *ops, size_t num_ops,
                const cnmlTensor_t *inputs, int num_inputs, const cnmlTensor_t *outputs,
                int num_outputs, int fuse, mlu_program **program);

#endif /* MLU_SIM_COMPILER_H_ */
