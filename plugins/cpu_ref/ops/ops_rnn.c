/*
 * MXNet's fused RNN operator in cpu_ref (both modes): attributes with the
 * registry's defaults, shapes, dtypes, and the dispatch to the reference or
 * fast kernel (kernels/rnn.h; the kernel design is in docs/rnn.md).
 *
 * Inputs: data (T, N, I), parameters (the packed vector), state (L*D, N,
 * H'), state_cell (L*D, N, H) for lstm, sequence_length (N,) with
 * use_sequence_length. Outputs: the output (T, N, D*H'), and with
 * state_outputs the final states (and cells for lstm). Data, parameters,
 * states and outputs are float32, or float16 widened to float32;
 * sequence_length is int32, int64, float32 or float16 holding integers
 * from 1 to T (anything else is refused with the value named). p
 * (dropout) is training-only and ignored; lstm_state_clip_nan has no NaN
 * to act on at inference.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrs.h"
#include "op_impl.h"
#include "rnn.h"
#include "status.h"
#include "tensor.h"

/* Sizes beyond these are refused as unsupported: they keep every product of
 * sizes the kernels form far inside int64_t and size_t. */
enum { kMaxRnnLayers = 64 };
static const int64_t kMaxRnnSize = (int64_t)1 << 24;

static int optional_float(const char *key, const char *value, int *given, double *out) {
  if (acc_attr_is_none(value)) {
    *given = 0;
    return MX_ACC_OK;
  }
  *given = 1;
  return cr_parse_float(key, value, out);
}

static int rnn_parse(const char *const *keys, const char *const *vals, size_t count,
                     cr_params *params) {
  cr_rnn_params *p = &params->u.rnn;
  memset(p, 0, sizeof *p);
  p->directions = 1;
  int have_mode = 0;
  for (size_t i = 0; i < count; ++i) {
    const char *key = keys[i], *value = vals[i];
    int status = MX_ACC_OK, flag = 0;
    double ignored = 0.0;
    if (strcmp(key, "mode") == 0) {
      static const struct { const char *name; cr_rnn_mode mode; } kModes[] = {
          {"rnn_relu", CR_RNN_RELU}, {"rnn_tanh", CR_RNN_TANH}, {"lstm", CR_RNN_LSTM},
          {"gru", CR_RNN_GRU}};
      have_mode = 0;
      for (size_t m = 0; m < sizeof kModes / sizeof kModes[0]; ++m) {
        if (acc_attr_equals(value, kModes[m].name)) {
          p->mode = kModes[m].mode;
          have_mode = 1;
        }
      }
      if (!have_mode) status = cr_bad_attr(key, value, "rnn_relu, rnn_tanh, lstm or gru");
    } else if (strcmp(key, "state_size") == 0) {
      status = cr_parse_positive_int(key, value, &p->hidden);
    } else if (strcmp(key, "num_layers") == 0) {
      status = cr_parse_positive_int(key, value, &p->layers);
    } else if (strcmp(key, "bidirectional") == 0) {
      status = cr_parse_bool(key, value, &flag);
      p->directions = flag ? 2 : 1;
    } else if (strcmp(key, "state_outputs") == 0) {
      status = cr_parse_bool(key, value, &p->state_outputs);
    } else if (strcmp(key, "use_sequence_length") == 0) {
      status = cr_parse_bool(key, value, &p->use_sequence_length);
    } else if (strcmp(key, "projection_size") == 0) {
      p->projection = 0;
      if (!acc_attr_is_none(value)) status = cr_parse_positive_int(key, value, &p->projection);
    } else if (strcmp(key, "lstm_state_clip_min") == 0) {
      status = optional_float(key, value, &p->has_clip_min, &p->clip_min);
    } else if (strcmp(key, "lstm_state_clip_max") == 0) {
      status = optional_float(key, value, &p->has_clip_max, &p->clip_max);
    } else if (strcmp(key, "lstm_state_clip_nan") == 0) {
      status = cr_parse_bool(key, value, &flag);
    } else if (strcmp(key, "p") == 0) {
      status = cr_parse_float(key, value, &ignored);
      if (status == MX_ACC_OK && !(ignored >= 0.0 && ignored <= 1.0)) {
        status = cr_bad_attr(key, value, "a probability in [0, 1]");
      }
    } else {
      status = cr_unknown_attr(key);
    }
    if (status != MX_ACC_OK) return status;
  }
  if (!have_mode) return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute mode is required");
  if (p->hidden == 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute state_size is required");
  if (p->layers == 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "attribute num_layers is required");
  if (p->layers > kMaxRnnLayers || p->hidden > kMaxRnnSize) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "RNN with %lld layers of state_size %lld: cpu_ref "
                    "runs at most %d layers of at most %lld", (long long)p->layers,
                    (long long)p->hidden, kMaxRnnLayers, (long long)kMaxRnnSize);
  }
  if (p->projection > 0 && (p->mode != CR_RNN_LSTM || p->projection >= p->hidden)) {
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "projection_size=%lld needs mode lstm and a "
                    "smaller state_size (%lld)", (long long)p->projection, (long long)p->hidden);
  }
  return MX_ACC_OK;
}

static int rnn_num_inputs(const cr_params *params) {
  const cr_rnn_params *p = &params->u.rnn;
  return 3 + (p->mode == CR_RNN_LSTM) + (p->use_sequence_length != 0);
}

static int rnn_num_outputs(const cr_params *params) {
  const cr_rnn_params *p = &params->u.rnn;
  if (!p->state_outputs) return 1;
  return p->mode == CR_RNN_LSTM ? 3 : 2;
}

static int lengths_index(const cr_params *params) {
  return params->u.rnn.use_sequence_length ? rnn_num_inputs(params) - 1 : -1;
}

static int rnn_dtypes(const cr_params *params) {
  int status = cr_dtype_allowed("input", 0, params->in_dtypes[0], CR_DTYPES_FLOAT, "RNN",
                                "float32 and float16");
  const int lengths = lengths_index(params);
  for (int i = 1; i < params->num_inputs && status == MX_ACC_OK; ++i) {
    if (i == lengths) {
      status = cr_dtype_allowed("input", i, params->in_dtypes[i],
                                CR_DTYPES_FLOAT | CR_DTYPE_BIT(CR_INT32) | CR_DTYPE_BIT(CR_INT64),
                                "RNN's sequence_length", "float32, float16, int32 and int64");
    } else {
      status = cr_dtype_expect("input", i, params->in_dtypes[i], params->in_dtypes[0]);
    }
  }
  for (int k = 0; k < params->num_outputs && status == MX_ACC_OK; ++k) {
    status = cr_dtype_expect("output", k, params->out_dtypes[k], params->in_dtypes[0]);
  }
  return status;
}

static int expect_shape(const char *name, const acc_shape *given, int ndim, const int64_t *dims) {
  int same = given->ndim == ndim;
  for (int i = 0; i < ndim && same; ++i) same = given->dims[i] == (uint64_t)dims[i];
  if (same) return MX_ACC_OK;
  char fmt[128];
  snprintf(fmt, sizeof fmt, "RNN: %s has shape %%s, which does not fit the data and attributes",
           name);
  return cr_shape_error(fmt, given);
}

static int rnn_infer(const cr_params *params, const acc_shape *in, int num_in, acc_shape *out) {
  (void)num_in;
  const cr_rnn_params *p = &params->u.rnn;
  if (in[0].ndim != 3) return cr_shape_error("RNN: data shape %s is not 3-D (T, N, I)", &in[0]);
  const int64_t steps = in[0].dims[0], batch = in[0].dims[1], features = in[0].dims[2];
  if (features < 1 || features > kMaxRnnSize || steps < 1 || batch < 1) {
    return cr_shape_error("RNN: data shape %s is empty or wider than cpu_ref runs", &in[0]);
  }
  const int64_t count = cr_rnn_param_count(p, features);
  if (count < 0) return acc_fail(MX_ACC_ERR_UNSUPPORTED, "RNN: too many parameters");
  const int64_t out_hidden = cr_rnn_out_hidden(p), states = p->layers * p->directions;
  /* the kernels' buffers: every step's gate pre-activations, and a layer's
   * output; their element counts must fit as the data's do */
  const int64_t rows = cr_rnn_gates(p->mode) * p->hidden;
  const int64_t widest = rows > p->directions * out_hidden ? rows : p->directions * out_hidden;
  uint64_t elements = 0;
  int status = cr_checked_mul((uint64_t)steps * (uint64_t)batch, (uint64_t)widest,
                              "RNN's per-step buffers", &elements);
  if (status != MX_ACC_OK) return status;
  status = expect_shape("parameters", &in[1], 1, &count);
  const int64_t state[3] = {states, batch, out_hidden}, cell[3] = {states, batch, p->hidden};
  if (status == MX_ACC_OK) status = expect_shape("state", &in[2], 3, state);
  if (status == MX_ACC_OK && p->mode == CR_RNN_LSTM) {
    status = expect_shape("state_cell", &in[3], 3, cell);
  }
  if (status == MX_ACC_OK && p->use_sequence_length) {
    status = expect_shape("sequence_length", &in[lengths_index(params)], 1, &batch);
  }
  if (status != MX_ACC_OK) return status;
  memset(out, 0, sizeof *out * (size_t)rnn_num_outputs(params));
  out[0].ndim = 3;
  out[0].dims[0] = steps;
  out[0].dims[1] = batch;
  out[0].dims[2] = p->directions * out_hidden;
  if (p->state_outputs) {
    out[1].ndim = 3;
    memcpy(out[1].dims, state, sizeof state);
    if (p->mode == CR_RNN_LSTM) {
      out[2].ndim = 3;
      memcpy(out[2].dims, cell, sizeof cell);
    }
  }
  return MX_ACC_OK;
}

/* sequence_length as checked int64 lengths in [1, steps]. */
static int read_lengths(const cr_params *params, const cr_tensor *t, int64_t steps,
                        int64_t batch, int64_t *lengths) {
  const int32_t dtype = params->in_dtypes[lengths_index(params)];
  for (int64_t b = 0; b < batch; ++b) {
    double value;
    if (dtype == kInt32) {
      value = (double)((const int32_t *)t->data)[b];
    } else if (dtype == kInt64) {
      value = (double)((const int64_t *)t->data)[b];
    } else { /* float32, or float16 widened by cr_run_float32 */
      value = (double)((const float *)t->data)[b];
    }
    if (!(value >= 1.0 && value <= (double)steps && value == floor(value))) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "RNN: sequence_length[%lld] = %g must be an "
                      "integer from 1 to %lld", (long long)b, value, (long long)steps);
    }
    lengths[b] = (int64_t)value;
  }
  return MX_ACC_OK;
}

/* The run with the weights packed by a loaded model (fast kernels), or NULL. */
static int rnn_compute_packed(const cr_params *params, const cr_tensor *in, const cr_tensor *out,
                              const cr_rnn_packing *packed, int num_threads) {
  const cr_rnn_params *p = &params->u.rnn;
  const int64_t steps = in[0].shape.dims[0], batch = in[0].shape.dims[1];
  const int64_t features = in[0].shape.dims[2];
  int64_t *lengths = NULL;
  if (p->use_sequence_length) {
    lengths = malloc((size_t)batch * sizeof(int64_t));
    if (lengths == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "RNN: no memory for lengths");
    int status = read_lengths(params, &in[lengths_index(params)], steps, batch, lengths);
    if (status != MX_ACC_OK) {
      free(lengths);
      return status;
    }
  }
  const float *c0 = p->mode == CR_RNN_LSTM ? in[3].data : NULL;
  float *hy = p->state_outputs ? out[1].data : NULL;
  float *cy = p->state_outputs && p->mode == CR_RNN_LSTM ? out[2].data : NULL;
  int failed;
  if (params->kernels == CR_KERNELS_REFERENCE) {
    failed = cr_ref_rnn(p, steps, batch, features, in[0].data, in[1].data, in[2].data, c0,
                        lengths, out[0].data, hy, cy);
  } else {
    failed = cr_fast_rnn(p, steps, batch, features, in[0].data, in[1].data, in[2].data, c0,
                         lengths, packed, out[0].data, hy, cy, num_threads);
  }
  free(lengths);
  return failed ? acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "RNN: cannot allocate its buffers")
                : MX_ACC_OK;
}

static int rnn_compute(const cr_params *params, const cr_tensor *in, int num_in,
                       const cr_tensor *out, int num_threads) {
  (void)num_in;
  return rnn_compute_packed(params, in, out, NULL, num_threads);
}

CR_DEFINE_FLOAT32_RUN(rnn_run, rnn_compute)

int cr_rnn_run_packed(const cr_params *params, const cr_tensor *inputs, const cr_tensor *outputs,
                      const cr_rnn_packing *packed, int num_threads) {
  return rnn_compute_packed(params, inputs, outputs, packed, num_threads);
}

const cr_op_impl cr_impl_rnn = {.parse = rnn_parse, .num_inputs = rnn_num_inputs,
                                .num_outputs = rnn_num_outputs, .check_dtypes = rnn_dtypes,
                                .infer_shape = rnn_infer, .run = rnn_run};
