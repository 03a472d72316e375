/*
 * The RNN operator's parameter layout (see rnn.h), shared by the reference
 * and fast kernels and by ops/ops_rnn.c: sizes, the slices of MXNet's
 * packed vector, and the packing the fast kernel runs from.
 */
#include <string.h>

#include "rnn.h"

int64_t cr_rnn_gates(cr_rnn_mode mode) {
  return mode == CR_RNN_LSTM ? 4 : mode == CR_RNN_GRU ? 3 : 1;
}

int64_t cr_rnn_out_hidden(const cr_rnn_params *p) {
  return p->projection > 0 ? p->projection : p->hidden;
}

/* Floats of one direction's weights in layer `layer`. */
static int64_t direction_weights(const cr_rnn_params *p, int64_t in) {
  const int64_t rows = cr_rnn_gates(p->mode) * p->hidden;
  int64_t total = rows * in + rows * cr_rnn_out_hidden(p);
  if (p->projection > 0) total += p->projection * p->hidden;
  return total;
}

static int64_t layer_input(const cr_rnn_params *p, int64_t features, int64_t layer) {
  return layer == 0 ? features : p->directions * cr_rnn_out_hidden(p);
}

int64_t cr_rnn_param_count(const cr_rnn_params *p, int64_t features) {
  /* the sizes are checked by ops_rnn.c to lie far below INT64_MAX / 16 */
  const int64_t rows = cr_rnn_gates(p->mode) * p->hidden;
  int64_t total = 0;
  for (int64_t layer = 0; layer < p->layers; ++layer) {
    int64_t per = direction_weights(p, layer_input(p, features, layer)) + 2 * rows;
    if (per < 0 || total > INT64_MAX / 4 - per * p->directions) return -1;
    total += p->directions * per;
  }
  return total;
}

void cr_rnn_weights_at(const cr_rnn_params *p, int64_t features, const float *params,
                       int64_t layer, int dir, cr_rnn_weights *w) {
  const int64_t rows = cr_rnn_gates(p->mode) * p->hidden;
  const int64_t out_hidden = cr_rnn_out_hidden(p);
  int64_t offset = 0, bias_offset = 0;
  for (int64_t l = 0; l < p->layers; ++l) {
    offset += p->directions * direction_weights(p, layer_input(p, features, l));
  }
  bias_offset = offset + (layer * p->directions + dir) * 2 * rows;
  offset = 0;
  for (int64_t l = 0; l < layer; ++l) {
    offset += p->directions * direction_weights(p, layer_input(p, features, l));
  }
  const int64_t in = layer_input(p, features, layer);
  offset += dir * direction_weights(p, in);
  w->in = in;
  w->i2h_w = params + offset;
  w->h2h_w = w->i2h_w + rows * in;
  w->h2r_w = p->projection > 0 ? w->h2h_w + rows * out_hidden : NULL;
  w->i2h_b = params + bias_offset;
  w->h2h_b = w->i2h_b + rows;
}

/* Floats of one direction's packing: h2h transposed, h2r transposed, the
 * summed bias and gru's b_hn. */
/* The transpose of m (cols x k, row-major) in column blocks (see rnn.h). */
static void pack_transposed(int64_t k, int64_t cols, const float *m, float *dst) {
  for (int64_t b = 0; b < cr_rnn_blocks(cols); ++b) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < CR_RNN_BLOCK; ++j) {
        const int64_t col = b * CR_RNN_BLOCK + j;
        *dst++ = col < cols ? m[col * k + p] : 0.0f;
      }
    }
  }
}

static size_t blocked_floats(int64_t k, int64_t cols) {
  return (size_t)(k * cr_rnn_blocks(cols) * CR_RNN_BLOCK);
}

size_t cr_rnn_packed_direction(const cr_rnn_params *p) {
  const int64_t rows = cr_rnn_gates(p->mode) * p->hidden;
  size_t floats = blocked_floats(cr_rnn_out_hidden(p), rows) + (size_t)rows;
  if (p->projection > 0) floats += blocked_floats(p->hidden, p->projection);
  if (p->mode == CR_RNN_GRU) floats += (size_t)p->hidden;
  return floats;
}

size_t cr_rnn_packed_floats(const cr_rnn_params *p, int64_t features) {
  (void)features;
  return cr_rnn_packed_direction(p) * (size_t)(p->layers * p->directions);
}

void cr_rnn_pack(const cr_rnn_params *p, int64_t features, const float *params, float *packed) {
  const int64_t rows = cr_rnn_gates(p->mode) * p->hidden;
  const int64_t out_hidden = cr_rnn_out_hidden(p);
  for (int64_t layer = 0; layer < p->layers; ++layer) {
    for (int dir = 0; dir < p->directions; ++dir) {
      cr_rnn_weights w;
      cr_rnn_weights_at(p, features, params, layer, dir, &w);
      float *dst = packed + (size_t)(layer * p->directions + dir) * cr_rnn_packed_direction(p);
      pack_transposed(out_hidden, rows, w.h2h_w, dst);
      dst += blocked_floats(out_hidden, rows);
      if (p->projection > 0) {
        pack_transposed(p->hidden, p->projection, w.h2r_w, dst);
        dst += blocked_floats(p->hidden, p->projection);
      }
      /* the recurrent bias joins the input bias, except gru's b_hn, which
       * the reset gate multiplies */
      const int64_t joined = p->mode == CR_RNN_GRU ? 2 * p->hidden : rows;
      for (int64_t j = 0; j < rows; ++j) dst[j] = w.i2h_b[j] + (j < joined ? w.h2h_b[j] : 0.0f);
      if (p->mode == CR_RNN_GRU) memcpy(dst + rows, w.h2h_b + 2 * p->hidden,
                                        (size_t)p->hidden * sizeof(float));
    }
  }
}
