/*
 * Running programs (isa.h) on a card: the program's lifetime, its
 * verification when it is compiled, and the execution of one launch with
 * real numerics and simulated time.
 */
#ifndef MLU_SIM_MACHINE_H_
#define MLU_SIM_MACHINE_H_

#include "card.h"
#include "isa.h"

/* A compute cluster's on-chip memory. Each queue owns one, so launches from
 * different queues run in parallel without sharing on-chip state. It grows
 * on demand up to the card's sram_bytes. */
typedef struct mlu_cluster {
  float *sram;
  uint64_t words;
  /* Workspace of int8 CONV/MATMUL (kernels.h): the quantized input and the
   * int32 accumulators, grown on demand like sram. */
  int8_t *quant;
  uint64_t quant_bytes;
  int32_t *acc;
  uint64_t acc_words;
  /* Host workspace of the fast kernels (kernels.h: im2col chunks, pooling
   * rows), grown on demand to the largest a program needs: no allocation
   * per launch once a queue has run its programs. */
  float *work;
  uint64_t work_words;
} mlu_cluster;

void mlu_cluster_release(mlu_cluster *cluster);

void mlu_program_ref(mlu_program *program);

/* Drops one reference; the last one frees the program and its device
 * memory. */
void mlu_program_unref(mlu_program *program);

/* Checks every operand of every instruction against the program's buffers
 * and on-chip size (info.sram_words), so execution never leaves them.
 * MX_ACC_ERR_INTERNAL names the first bad instruction. */
int mlu_program_verify(const mlu_program *program);

/* Runs one launch of program with the I/O pointers io (num_inputs +
 * num_outputs device pointers of the program's card) on cluster; counts it
 * in the card's statistics and, if sim_ns is not NULL, stores its simulated
 * time there. Fails cleanly (MX_ACC_ERR_INVALID_ARG, MX_ACC_ERR_DEVICE)
 * when a pointer is not live memory of the card or the card's on-chip
 * memory shrank below what the program was compiled for. */
int mlu_machine_run(const mlu_program *program, void *const *io, mlu_cluster *cluster,
                    double *sim_ns);

#endif /* MLU_SIM_MACHINE_H_ */
