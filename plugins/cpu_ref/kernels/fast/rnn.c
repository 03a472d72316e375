/*
 * The fast kernel of MXNet's fused RNN operator (see rnn.h).
 *
 * Per layer and direction: the input projection of every step at once, one
 * (T*N x in) . (in x G*H) product on cpu_ref's GEMM (FullyConnected, on the
 * threads given), with the input and recurrent biases summed into it
 * (gru's b_hn, which the reset gate scales, apart). Then per step and
 * sample: the recurrent product h . Wt against the h2h weights packed
 * transposed (H' x G*H) in blocks of 64 columns, each block's 64 sums held
 * in vector registers while its H' rows stream by (no reassociation: each
 * sum runs over k in order), and in its epilogue the gates, the cell and
 * the new state, while the G*H sums are in L1. exp is the branch-free float exp of
 * elementwise_loops.h, tanh(x) = 1 - 2 / (exp(2x) + 1). The recurrent part
 * runs on the calling thread: at batch 1 a step is a few microseconds,
 * less than handing it to the pool costs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "elementwise_loops.h"
#include "kernels.h"
#include "rnn.h"
#include "target_clones.h"

CR_LOOP_BODY float sigmoid_f(float x) { return 1.0f / (1.0f + exp_float(-x)); }

CR_LOOP_BODY float tanh_f(float x) { return 1.0f - 2.0f / (exp_float(2.0f * x) + 1.0f); }

/* acc (the blocks' columns) = h (k values) . wt (k x cols in column
 * blocks, see rnn.h): each block's CR_RNN_BLOCK sums stay in registers
 * while its k rows stream by. */
#if defined(__GNUC__)
typedef float rnn_v16 __attribute__((vector_size(64)));
#endif
CR_TARGET_CLONES static void row_times_blocks(int64_t k, int64_t cols, const float *h,
                                              const float *wt, float *restrict acc) {
  for (int64_t b = 0; b < cr_rnn_blocks(cols); ++b) {
    const float *w = wt + b * k * CR_RNN_BLOCK;
#if defined(__GNUC__)
    /* two sets of sums, even and odd rows, for twice the independent adds
     * in flight; added at the end (a fixed order) */
    rnn_v16 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, t0 = {0}, t1 = {0}, t2 = {0}, t3 = {0};
    int64_t p = 0;
    for (; p + 2 <= k; p += 2, w += 2 * CR_RNN_BLOCK) {
      rnn_v16 w0, w1, w2, w3, v0, v1, v2, v3;
      memcpy(&w0, w, sizeof w0);
      memcpy(&w1, w + 16, sizeof w1);
      memcpy(&w2, w + 32, sizeof w2);
      memcpy(&w3, w + 48, sizeof w3);
      memcpy(&v0, w + 64, sizeof v0);
      memcpy(&v1, w + 80, sizeof v1);
      memcpy(&v2, w + 96, sizeof v2);
      memcpy(&v3, w + 112, sizeof v3);
      const float hp = h[p], hq = h[p + 1];
      s0 = s0 + hp * w0;
      s1 = s1 + hp * w1;
      s2 = s2 + hp * w2;
      s3 = s3 + hp * w3;
      t0 = t0 + hq * v0;
      t1 = t1 + hq * v1;
      t2 = t2 + hq * v2;
      t3 = t3 + hq * v3;
    }
    if (p < k) {
      rnn_v16 w0, w1, w2, w3;
      memcpy(&w0, w, sizeof w0);
      memcpy(&w1, w + 16, sizeof w1);
      memcpy(&w2, w + 32, sizeof w2);
      memcpy(&w3, w + 48, sizeof w3);
      const float hp = h[p];
      s0 = s0 + hp * w0;
      s1 = s1 + hp * w1;
      s2 = s2 + hp * w2;
      s3 = s3 + hp * w3;
    }
    s0 = s0 + t0;
    s1 = s1 + t1;
    s2 = s2 + t2;
    s3 = s3 + t3;
    float *out = acc + b * CR_RNN_BLOCK;
    memcpy(out, &s0, sizeof s0);
    memcpy(out + 16, &s1, sizeof s1);
    memcpy(out + 32, &s2, sizeof s2);
    memcpy(out + 48, &s3, sizeof s3);
#else
    float *out = acc + b * CR_RNN_BLOCK;
    for (int j = 0; j < CR_RNN_BLOCK; ++j) out[j] = 0.0f;
    for (int64_t p = 0; p < k; ++p, w += CR_RNN_BLOCK) {
      for (int j = 0; j < CR_RNN_BLOCK; ++j) out[j] = out[j] + h[p] * w[j];
    }
#endif
  }
}

/* The gates of one step of one sample: gx the input projection with the
 * biases, acc the recurrent sums; writes out (H values: the new h before
 * projection) and updates c (lstm) in place. */
/* low and high clip the cell state (-inf and inf: no clip). */
CR_TARGET_CLONES static void lstm_gates(int64_t hidden, const float *gx, const float *acc,
                                        float *restrict c, float *restrict out, float low,
                                        float high) {
  for (int64_t i = 0; i < hidden; ++i) {
    const float in_gate = sigmoid_f(gx[i] + acc[i]);
    const float forget = sigmoid_f(gx[hidden + i] + acc[hidden + i]);
    const float cell = tanh_f(gx[2 * hidden + i] + acc[2 * hidden + i]);
    const float out_gate = sigmoid_f(gx[3 * hidden + i] + acc[3 * hidden + i]);
    float next = forget * c[i] + in_gate * cell;
    next = select_float(next < low, low, next);
    next = select_float(next > high, high, next);
    c[i] = next;
    out[i] = out_gate * tanh_f(next);
  }
}

CR_TARGET_CLONES static void gru_gates(int64_t hidden, const float *gx, const float *acc,
                                       const float *b_hn, const float *h, float *restrict out) {
  for (int64_t i = 0; i < hidden; ++i) {
    const float reset = sigmoid_f(gx[i] + acc[i]);
    const float update = sigmoid_f(gx[hidden + i] + acc[hidden + i]);
    const float n = tanh_f(gx[2 * hidden + i] + reset * (acc[2 * hidden + i] + b_hn[i]));
    out[i] = (1.0f - update) * n + update * h[i];
  }
}

CR_TARGET_CLONES static void plain_gates(int64_t hidden, int relu, const float *gx,
                                         const float *acc, float *restrict out) {
  if (relu) {
    for (int64_t i = 0; i < hidden; ++i) {
      const float pre = gx[i] + acc[i];
      out[i] = select_float(pre > 0.0f, pre, 0.0f);
    }
  } else {
    for (int64_t i = 0; i < hidden; ++i) out[i] = tanh_f(gx[i] + acc[i]);
  }
}

typedef struct direction_run {
  const cr_rnn_params *p;
  const float *wt, *wrt, *b_hn; /* packed h2h^T, h2r^T, gru's b_hn */
  const float *gx;              /* (T, N, G*H) */
  float *h, *c;                 /* (N, H'), (N, H): in and out */
  float *acc, *out;             /* scratch: G*H, H */
} direction_run;

/* One step of sample b, reading gx at time t; writes h (and c). */
static void run_step(const direction_run *r, int64_t batch, int64_t t, int64_t b) {
  const cr_rnn_params *p = r->p;
  const int64_t hidden = p->hidden, rows = cr_rnn_gates(p->mode) * hidden;
  const int64_t out_hidden = cr_rnn_out_hidden(p);
  float *h = r->h + b * out_hidden;
  const float *gx = r->gx + (t * batch + b) * rows;
  row_times_blocks(out_hidden, rows, h, r->wt, r->acc);
  switch (p->mode) {
    case CR_RNN_LSTM:
      lstm_gates(hidden, gx, r->acc, r->c + b * hidden, r->out,
                 p->has_clip_min ? (float)p->clip_min : -INFINITY,
                 p->has_clip_max ? (float)p->clip_max : INFINITY);
      break;
    case CR_RNN_GRU: gru_gates(hidden, gx, r->acc, r->b_hn, h, r->out); break;
    default: plain_gates(hidden, p->mode == CR_RNN_RELU, gx, r->acc, r->out); break;
  }
  if (p->projection > 0) {
    /* acc is free again: the projection's blocks land there first */
    row_times_blocks(hidden, p->projection, r->out, r->wrt, r->acc);
    memcpy(h, r->acc, (size_t)p->projection * sizeof(float));
  } else {
    memcpy(h, r->out, (size_t)hidden * sizeof(float));
  }
}

/* Floats of the GEMM packing of every layer and direction's i2h weights. */
static size_t input_packing_floats(const cr_rnn_params *p, int64_t features) {
  const int64_t rows = cr_rnn_gates(p->mode) * p->hidden;
  size_t floats = 0;
  for (int64_t layer = 0; layer < p->layers; ++layer) {
    const int64_t in = layer == 0 ? features : p->directions * cr_rnn_out_hidden(p);
    floats += (size_t)p->directions * cr_fc_packed_floats(in, rows);
  }
  return floats;
}

int cr_rnn_packing_update(const cr_rnn_params *p, int64_t features, const float *params,
                          cr_rnn_packing *packing) {
  if (packing->recurrent == NULL) {
    packing->recurrent = malloc(cr_rnn_packed_floats(p, features) * sizeof(float));
    packing->input = malloc(input_packing_floats(p, features) * sizeof(float));
    if (packing->recurrent == NULL || packing->input == NULL) {
      cr_rnn_packing_free(packing);
      return -1;
    }
  }
  cr_rnn_pack(p, features, params, packing->recurrent);
  const int64_t rows = cr_rnn_gates(p->mode) * p->hidden;
  float *dst = packing->input;
  for (int64_t layer = 0; layer < p->layers; ++layer) {
    for (int dir = 0; dir < p->directions; ++dir) {
      cr_rnn_weights w;
      cr_rnn_weights_at(p, features, params, layer, dir, &w);
      packing->input_isa = cr_fc_pack(w.in, rows, w.i2h_w, dst);
      dst += cr_fc_packed_floats(w.in, rows);
    }
  }
  return 0;
}

void cr_rnn_packing_free(cr_rnn_packing *packing) {
  free(packing->recurrent);
  free(packing->input);
  packing->recurrent = packing->input = NULL;
}

int cr_fast_rnn(const cr_rnn_params *p, int64_t steps, int64_t batch, int64_t features,
                const float *x, const float *params, const float *h0, const float *c0,
                const int64_t *lengths, const cr_rnn_packing *packing, float *y, float *hy,
                float *cy, int num_threads) {
  const float *packed = packing != NULL ? packing->recurrent : NULL;
  const float *packed_input = packing != NULL ? packing->input : NULL;
  const int64_t hidden = p->hidden, rows = cr_rnn_gates(p->mode) * hidden;
  const int64_t out_hidden = cr_rnn_out_hidden(p), width = p->directions * out_hidden;
  const size_t direction_floats = cr_rnn_packed_direction(p);
  float *own_packing = NULL;
  if (packed == NULL) {
    own_packing = malloc(cr_rnn_packed_floats(p, features) * sizeof(float));
    if (own_packing == NULL) return -1;
    cr_rnn_pack(p, features, params, own_packing);
    packed = own_packing;
  }
  float *gx = malloc((size_t)(steps * batch * rows) * sizeof(float));
  float *h = malloc((size_t)(batch * out_hidden) * sizeof(float));
  float *c = malloc((size_t)(batch * hidden) * sizeof(float));
  const int64_t widest = rows > p->projection ? rows : p->projection;
  float *acc = malloc((size_t)(cr_rnn_blocks(widest) * CR_RNN_BLOCK) * sizeof(float));
  float *out = malloc((size_t)hidden * sizeof(float));
  float *buffers[2] = {NULL, NULL};
  int failed = !gx || !h || !c || !acc || !out;
  for (int k = 0; k < 2 && p->layers > 1 && !failed; ++k) {
    buffers[k] = malloc((size_t)(steps * batch * width) * sizeof(float));
    failed = buffers[k] == NULL;
  }
  const float *input = x;
  for (int64_t layer = 0; layer < p->layers && !failed; ++layer) {
    float *dst = layer == p->layers - 1 ? y : buffers[layer % 2];
    if (lengths) memset(dst, 0, (size_t)(steps * batch * width) * sizeof(float));
    for (int dir = 0; dir < p->directions && !failed; ++dir) {
      cr_rnn_weights w;
      cr_rnn_weights_at(p, features, params, layer, dir, &w);
      const int64_t index = layer * p->directions + dir;
      const float *base = packed + (size_t)index * direction_floats;
      direction_run r = {p, base, NULL, NULL, gx, h, c, acc, out};
      const float *bias = base + out_hidden * cr_rnn_blocks(rows) * CR_RNN_BLOCK;
      if (p->projection > 0) {
        r.wrt = bias;
        bias += hidden * cr_rnn_blocks(p->projection) * CR_RNN_BLOCK;
      }
      r.b_hn = bias + rows;
      if (cr_fully_connected_fused(steps * batch, w.in, rows, input, w.i2h_w, packed_input,
                                   packing != NULL ? packing->input_isa : CR_ISA_GENERIC, bias,
                                   NULL, gx, num_threads) != 0) {
        failed = 1;
        break;
      }
      if (packed_input != NULL) packed_input += cr_fc_packed_floats(w.in, rows);
      memcpy(h, h0 + index * batch * out_hidden, (size_t)(batch * out_hidden) * sizeof(float));
      if (p->mode == CR_RNN_LSTM) {
        memcpy(c, c0 + index * batch * hidden, (size_t)(batch * hidden) * sizeof(float));
      }
      for (int64_t s = 0; s < steps; ++s) {
        for (int64_t b = 0; b < batch; ++b) {
          const int64_t length = lengths ? lengths[b] : steps;
          if (s >= length) continue;
          const int64_t t = dir == 1 ? length - 1 - s : s;
          run_step(&r, batch, t, b);
          memcpy(dst + (t * batch + b) * width + dir * out_hidden, h + b * out_hidden,
                 (size_t)out_hidden * sizeof(float));
        }
      }
      if (hy) memcpy(hy + index * batch * out_hidden, h, (size_t)(batch * out_hidden) * sizeof(float));
      if (cy && p->mode == CR_RNN_LSTM) {
        memcpy(cy + index * batch * hidden, c, (size_t)(batch * hidden) * sizeof(float));
      }
    }
    input = dst;
  }
  free(own_packing), free(gx), free(h), free(c), free(acc), free(out);
  free(buffers[0]), free(buffers[1]);
  return failed ? -1 : 0;
}
