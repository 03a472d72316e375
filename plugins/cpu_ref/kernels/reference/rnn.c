/*
 * The reference kernel of MXNet's fused RNN operator (see rnn.h): a plain
 * loop per layer, direction, step and sample, sums in double, libm's exp
 * and tanh, on one thread: the executable definition the fast kernel is
 * checked against.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rnn.h"

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* row . vec + bias over n values, in double. */
static double dot(const float *row, const float *vec, int64_t n) {
  double sum = 0.0;
  for (int64_t k = 0; k < n; ++k) sum += (double)row[k] * (double)vec[k];
  return sum;
}

/* One step of one sample: x (in), h (H'), c (H) in, new h and c out (in
 * place); gates is scratch of G*H doubles, out scratch of H doubles. */
static void step(const cr_rnn_params *p, const cr_rnn_weights *w, const float *x, float *h,
                 float *c, double *gates, double *out) {
  const int64_t hidden = p->hidden, rows = cr_rnn_gates(p->mode) * hidden;
  const int64_t out_hidden = cr_rnn_out_hidden(p);
  for (int64_t j = 0; j < rows; ++j) {
    const double input = dot(w->i2h_w + j * w->in, x, w->in) + w->i2h_b[j];
    const double recurrent = dot(w->h2h_w + j * out_hidden, h, out_hidden) + w->h2h_b[j];
    if (p->mode == CR_RNN_GRU && j >= 2 * hidden) {
      /* n: the reset gate (computed first) scales the recurrent part */
      gates[j] = input + gates[j - 2 * hidden] * recurrent;
    } else {
      gates[j] = input + recurrent;
    }
    if (p->mode == CR_RNN_GRU && j < 2 * hidden) gates[j] = sigmoid(gates[j]);
  }
  for (int64_t i = 0; i < hidden; ++i) {
    switch (p->mode) {
      case CR_RNN_RELU: out[i] = gates[i] > 0.0 ? gates[i] : 0.0; break;
      case CR_RNN_TANH: out[i] = tanh(gates[i]); break;
      case CR_RNN_GRU: {
        const double z = gates[hidden + i], n = tanh(gates[2 * hidden + i]);
        out[i] = (1.0 - z) * n + z * (double)h[i];
        break;
      }
      case CR_RNN_LSTM: {
        const double in_gate = sigmoid(gates[i]), forget = sigmoid(gates[hidden + i]);
        const double cell = tanh(gates[2 * hidden + i]), out_gate = sigmoid(gates[3 * hidden + i]);
        double next = forget * (double)c[i] + in_gate * cell;
        if (p->has_clip_min && next < p->clip_min) next = p->clip_min;
        if (p->has_clip_max && next > p->clip_max) next = p->clip_max;
        c[i] = (float)next;
        out[i] = out_gate * tanh((double)(float)next);
        break;
      }
    }
  }
  if (p->projection > 0) {
    for (int64_t j = 0; j < p->projection; ++j) {
      double sum = 0.0;
      for (int64_t k = 0; k < hidden; ++k) sum += (double)w->h2r_w[j * hidden + k] * out[k];
      h[j] = (float)sum;
    }
  } else {
    for (int64_t i = 0; i < hidden; ++i) h[i] = (float)out[i];
  }
}

int cr_ref_rnn(const cr_rnn_params *p, int64_t steps, int64_t batch, int64_t features,
               const float *x, const float *params, const float *h0, const float *c0,
               const int64_t *lengths, float *y, float *hy, float *cy) {
  const int64_t hidden = p->hidden, out_hidden = cr_rnn_out_hidden(p);
  const int dirs = p->directions;
  const int64_t width = dirs * out_hidden; /* of a layer's output row */
  const size_t rows = (size_t)(cr_rnn_gates(p->mode) * hidden);
  float *buffers[2] = {NULL, NULL};
  float *h = malloc((size_t)out_hidden * sizeof(float));
  float *c = malloc((size_t)hidden * sizeof(float));
  double *gates = malloc(rows * sizeof(double));
  double *out = malloc((size_t)hidden * sizeof(double));
  if (p->layers > 1) {
    for (int b = 0; b < 2; ++b) buffers[b] = malloc((size_t)(steps * batch * width) * sizeof(float));
  }
  if (!h || !c || !gates || !out || (p->layers > 1 && (!buffers[0] || !buffers[1]))) {
    free(h), free(c), free(gates), free(out), free(buffers[0]), free(buffers[1]);
    return -1;
  }
  const float *input = x;
  for (int64_t layer = 0; layer < p->layers; ++layer) {
    float *dst = layer == p->layers - 1 ? y : buffers[layer % 2];
    memset(dst, 0, (size_t)(steps * batch * width) * sizeof(float));
    for (int dir = 0; dir < dirs; ++dir) {
      cr_rnn_weights w;
      cr_rnn_weights_at(p, features, params, layer, dir, &w);
      const int64_t index = layer * dirs + dir;
      for (int64_t b = 0; b < batch; ++b) {
        memcpy(h, h0 + (index * batch + b) * out_hidden, (size_t)out_hidden * sizeof(float));
        if (p->mode == CR_RNN_LSTM) {
          memcpy(c, c0 + (index * batch + b) * hidden, (size_t)hidden * sizeof(float));
        }
        const int64_t length = lengths ? lengths[b] : steps;
        for (int64_t s = 0; s < length; ++s) {
          const int64_t t = dir == 1 ? length - 1 - s : s;
          step(p, &w, input + (t * batch + b) * w.in, h, c, gates, out);
          memcpy(dst + (t * batch + b) * width + dir * out_hidden, h,
                 (size_t)out_hidden * sizeof(float));
        }
        if (hy) memcpy(hy + (index * batch + b) * out_hidden, h, (size_t)out_hidden * sizeof(float));
        if (cy && p->mode == CR_RNN_LSTM) {
          memcpy(cy + (index * batch + b) * hidden, c, (size_t)hidden * sizeof(float));
        }
      }
    }
    input = dst;
  }
  free(h), free(c), free(gates), free(out), free(buffers[0]), free(buffers[1]);
  return 0;
}
