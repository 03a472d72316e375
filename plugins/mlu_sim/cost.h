/*
 * The cost model of the simulated MLU: documented parameters (defaults for
 * an MLU100-class card, reasoning in docs/mlu_sim.md), the time each
 * instruction takes, and the statistics a card accumulates.
 *
 * Time of one launch (one Forward) = launch_latency_ns + the sum of its
 * instructions' times, where
 *   LOAD / STORE      bytes moved / dram_bandwidth
 *   CONV / MATMUL     2 * multiply-accumulates / peak_ops_<dtype>; int8 ones
 *                     add 2 * (input elements quantized) / vector_ops (the
 *                     max-abs pass and the quantizing pass over the input
 *                     block on the vector unit)
 *   POOL              window elements visited / vector_ops
 *   EWISE / COPY      elements / vector_ops
 *   SOFTMAX           4 * elements / vector_ops (max, exp, sum, divide)
 *   SYNC              0
 * Epilogues (bias, residual, activation) ride along with CONV/MATMUL for
 * free, as they do in a MAC array's output pipeline: that is what fusing
 * them saves. Nothing overlaps (no double buffering is modelled), which
 * keeps the model simple and conservative. Host<->device copies cost
 * host_latency_ns + bytes / host_bandwidth each and are counted apart from
 * launches.
 */
#ifndef MLU_SIM_COST_H_
#define MLU_SIM_COST_H_

#include <stddef.h>
#include <stdint.h>

#include "isa.h"

/* What CONV and MATMUL compile to (parameter "precision"). */
typedef enum mlu_precision {
  MLU_PRECISION_FP32 = 0, /* "fp32": the tensors' own float type (fp32 or fp16) */
  MLU_PRECISION_INT8 = 1  /* "int8": int8 filters and activations, int32 accumulation */
} mlu_precision;

typedef struct mlu_params {
  double clock_hz;          /* converts simulated time into cycles */
  double peak_ops_fp32;     /* CONV/MATMUL operations per second, by dtype */
  double peak_ops_fp16;
  double peak_ops_int8;     /* int8 CONV/MATMUL (precision=int8) */
  double vector_ops;        /* element operations per second of the vector unit */
  double dram_bandwidth;    /* bytes per second between DRAM and on-chip memory */
  double launch_latency_ns; /* fixed cost of every launch */
  double host_bandwidth;    /* bytes per second across PCIe */
  double host_latency_ns;   /* fixed cost of every host<->device copy */
  uint64_t sram_bytes;      /* on-chip memory of a compute cluster (one per queue) */
  uint64_t dram_bytes;      /* device memory of the card */
  uint64_t precision;       /* mlu_precision of programs compiled from now on */
  uint64_t num_threads;     /* not a cost: host threads a launch may use (team.h) */
} mlu_params;

/* MLU100-class defaults. */
mlu_params mlu_params_default(void);

/* Number of parameters, and the name of parameter i (for configure). */
size_t mlu_params_count(void);
const char *mlu_params_name(size_t index);

/* MX_ACC_OK if every parameter lies in its documented range;
 * MX_ACC_ERR_INVALID_ARG naming the first that does not. */
int mlu_params_validate(const mlu_params *params);

/* Sets the parameter called key from text; returns an MX_ACC status
 * (MX_ACC_ERR_NOT_FOUND for an unknown key, MX_ACC_ERR_INVALID_ARG for a
 * value out of its documented range) with a message recorded. */
int mlu_params_set(mlu_params *params, const char *key, const char *text);

/* Writes the value of parameter key into buffer (a number, or the name of
 * a choice such as precision's "fp32" / "int8"); -1 if key is unknown. */
int mlu_params_format(const mlu_params *params, const char *key, char *buffer, size_t size);

/* Input elements an int8 CONV/MATMUL quantizes (0 for anything else;
 * UINT64_MAX where the count overflows). */
uint64_t mlu_int8_input_elements(const mlu_insn *insn);

/* Simulated nanoseconds of one instruction; adds the DRAM bytes it moves
 * to *dram_bytes. */
double mlu_cost_insn_ns(const mlu_params *params, const mlu_insn *insn, uint64_t *dram_bytes);

/* Simulated nanoseconds of one host<->device copy of bytes bytes. */
double mlu_cost_copy_ns(const mlu_params *params, uint64_t bytes);

/* Counters of one card, since it was created or last reset. */
typedef struct mlu_stats {
  uint64_t launches;          /* Forward launches executed */
  uint64_t instructions;      /* instructions executed */
  uint64_t dram_bytes;        /* bytes moved by LOAD/STORE */
  double sim_time_ns;         /* simulated time of all launches */
  double sim_cycles;          /* the same in cycles of clock_hz */
  uint64_t host_device_bytes; /* bytes copied between host and device */
  uint64_t host_device_copies;
  double host_device_time_ns; /* simulated time of those copies */
  uint64_t compiles;          /* BaseOps and FusionOps compiled */
  double compile_time_ns;     /* wall-clock time spent compiling */
} mlu_stats;

#endif /* MLU_SIM_COST_H_ */
