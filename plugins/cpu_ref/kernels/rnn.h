/*
 * MXNet's fused RNN operator as cpu_ref's kernels see it: the sizes and
 * options of one node, and the reference and fast kernels (no ABI, JSON or
 * attributes here; ops/ops_rnn.c parses and checks).
 *
 * data (T, N, I) is time-major. params is MXNet's packed vector: every
 * weight, layer by layer and within a layer direction by direction (left,
 * then right): i2h (G*H, in), h2h (G*H, H'), and for an LSTMP h2r (P, H);
 * then every bias in the same order: i2h (G*H), h2h (G*H). in is I for
 * layer 0 and D*H' above; H' is P for an LSTMP and H otherwise. Gate rows
 * are i, f, g, o (lstm) and r, z, n (gru); G is 1, 4 or 3.
 * Outputs: y (T, N, D*H'), and when not NULL hy (L*D, N, H') and cy
 * (L*D, N, H) (lstm). With lengths (N values in [1, T]), sample b runs
 * steps 0..len-1 (reverse: len-1..0), y is zero at steps >= len and its
 * final state is the one after its last valid step.
 */
#ifndef CPU_REF_RNN_H_
#define CPU_REF_RNN_H_

#include <stddef.h>
#include <stdint.h>

#include "kernel_types.h"

typedef enum cr_rnn_mode { CR_RNN_RELU, CR_RNN_TANH, CR_RNN_LSTM, CR_RNN_GRU } cr_rnn_mode;

typedef struct cr_rnn_params {
  cr_rnn_mode mode;
  int64_t hidden;     /* H, state_size */
  int64_t layers;     /* L */
  int directions;     /* D: 1 or 2 */
  int64_t projection; /* P, 0 for none (lstm only) */
  int state_outputs;
  int use_sequence_length;
  int has_clip_min, has_clip_max; /* lstm_state_clip_min / _max given */
  double clip_min, clip_max;
} cr_rnn_params;

/* One direction of one layer's slices of the packed vector. */
typedef struct cr_rnn_weights {
  const float *i2h_w; /* (G*H, in) */
  const float *h2h_w; /* (G*H, H') */
  const float *h2r_w; /* (P, H), NULL without projection */
  const float *i2h_b; /* (G*H) */
  const float *h2h_b; /* (G*H) */
  int64_t in;         /* the layer's input size */
} cr_rnn_weights;

/* The slices of layer `layer`, direction `dir` (the caller has checked the
 * vector's length against cr_rnn_param_count). */
void cr_rnn_weights_at(const cr_rnn_params *p, int64_t features, const float *params,
                       int64_t layer, int dir, cr_rnn_weights *w);

/* H': what a direction outputs and carries (P, or H without projection). */
int64_t cr_rnn_out_hidden(const cr_rnn_params *p);

/* Gates per mode: 1, 1, 4, 3. */
int64_t cr_rnn_gates(cr_rnn_mode mode);

/* The length of the packed parameter vector for input size features, or
 * -1 when it would overflow int64_t. */
int64_t cr_rnn_param_count(const cr_rnn_params *p, int64_t features);

/* The plain reference kernel: sums in double, libm's exp and tanh, one
 * thread. Returns 0, or -1 when memory cannot be had. */
int cr_ref_rnn(const cr_rnn_params *p, int64_t steps, int64_t batch, int64_t features,
               const float *x, const float *params, const float *h0, const float *c0,
               const int64_t *lengths, float *y, float *hy, float *cy);

/* A node's weights packed for the fast kernel, once, by a loaded model:
 * the recurrent part (cr_rnn_pack) and every layer and direction's i2h
 * weights packed for the GEMM (in turn, under input_isa). */
typedef struct cr_rnn_packing {
  float *recurrent;
  float *input;
  cr_isa input_isa;
} cr_rnn_packing;

/* Makes *packing (zeroed before the first call) or packs new values into
 * it (same node, same features). Returns 0, or -1 when memory cannot be
 * had. */
int cr_rnn_packing_update(const cr_rnn_params *p, int64_t features, const float *params,
                          cr_rnn_packing *packing);
void cr_rnn_packing_free(cr_rnn_packing *packing);

/* The fast kernel: each layer's input projection for all steps is one GEMM
 * (cpu_ref's FullyConnected), then per step the recurrent product against
 * the h2h weights packed transposed, with the gates computed in its
 * epilogue while the row is in cache. packing, when not NULL, holds the
 * weights packed when a model was loaded; otherwise the kernel packs the
 * recurrent weights into memory of its own and the GEMM packs the input
 * weights. Returns 0, or -1 when memory cannot be had. */
int cr_fast_rnn(const cr_rnn_params *p, int64_t steps, int64_t batch, int64_t features,
                const float *x, const float *params, const float *h0, const float *c0,
                const int64_t *lengths, const cr_rnn_packing *packing, float *y, float *hy,
                float *cy, int num_threads);

/* The packing's column blocks: a packed matrix (k x cols) is stored as
 * ceil(cols / CR_RNN_BLOCK) blocks, each k rows of CR_RNN_BLOCK columns
 * (zero past cols), so that a row-times-matrix product streams each block
 * once with its CR_RNN_BLOCK sums in registers. */
#define CR_RNN_BLOCK 64
static inline int64_t cr_rnn_blocks(int64_t cols) {
  return (cols + CR_RNN_BLOCK - 1) / CR_RNN_BLOCK;
}

/* Floats cr_rnn_pack writes, and the packing: for every layer and direction
 * the h2h weights transposed (H' x G*H) and the h2r weights transposed
 * (H x P), in column blocks, and the summed biases (G*H, plus H for gru's
 * separate b_hn). */
size_t cr_rnn_packed_floats(const cr_rnn_params *p, int64_t features);
/* Floats of one direction's share of the packing (layer l, direction d
 * starts at (l * D + d) times this): Wt (H' x G*H), [Wrt (H x P)] (both in
 * column blocks), bias (G*H), [b_hn (H)]. */
size_t cr_rnn_packed_direction(const cr_rnn_params *p);
void cr_rnn_pack(const cr_rnn_params *p, int64_t features, const float *params, float *packed);

#endif /* CPU_REF_RNN_H_ */
