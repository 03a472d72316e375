/*
 * Stages 1-3 of the compiler and the driver (see compiler.h); stage 4,
 * tiling and emission, is in emit.c.
 */
#include "compiler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_impl.h"
#include "half.h"
#include "kernels.h"
#include "machine.h"
#include "sram.h"
#include "mxnet_acc.h"
#include "status.h"

enum { kConstAlign = 64 };

static void compiler_release(compiler *c) {
  for (size_t i = 0; i < c->num_kernels; ++i) {
    free(c->kernels[i].weights);
    free(c->kernels[i].bias);
    free(c->kernels[i].scale);
    free(c->kernels[i].shift);
    free(c->kernels[i].wscale);
  }
  free(c->kernels);
  free(c->values);
  free(c->insns);
  mlu_sram_release(&c->sram);
}

static const char *kind_name(int kind) {
  static const char *const names[] = {"Conv", "Active", "Clip", "Pool", "Mlp", "BatchNorm",
                                      "Add", "Mult", "Softmax", "Concat", "Reshape"};
  return kind >= 0 && kind <= MLU_KIND_RESHAPE ? names[kind] : "?";
}

/* ---- values ------------------------------------------------------------------------- */

static int find_value(const compiler *c, cnmlTensor_t tensor) {
  for (size_t i = 0; i < c->num_values; ++i) {
    if (c->values[i].tensor == tensor) return (int)i;
  }
  return -1;
}

static int add_value(compiler *c, cnmlTensor_t tensor, int slot, int producer, int *index) {
  if (c->num_values == c->value_capacity) {
    size_t capacity = c->value_capacity ? c->value_capacity * 2 : 32;
    cvalue *values = realloc(c->values, capacity * sizeof *values);
    if (values == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "compiler values");
    c->values = values;
    c->value_capacity = capacity;
  }
  cvalue *v = &c->values[c->num_values];
  memset(v, 0, sizeof *v);
  v->tensor = tensor;
  v->count = tensor->count;
  v->dtype = tensor->dtype;
  v->producer = producer;
  v->slot = slot;
  v->alias = -1;
  v->last_use = -1;
  if (slot >= 0) v->dram = (mlu_dram_ref){MLU_SPACE_IO, (uint8_t)v->dtype, (uint16_t)slot, 0};
  *index = (int)c->num_values++;
  return MX_ACC_OK;
}

/* ---- stage 1: topological order ------------------------------------------------------ */

static int producer_of(const cnmlBaseOp_t *ops, size_t num_ops, cnmlTensor_t tensor) {
  for (size_t i = 0; i < num_ops; ++i) {
    if (ops[i]->output == tensor) return (int)i;
  }
  return -1;
}

static int is_listed(const cnmlTensor_t *tensors, int count, cnmlTensor_t tensor) {
  for (int i = 0; i < count; ++i) {
    if (tensors[i] == tensor) return 1;
  }
  return 0;
}

/* Checks that every op input is a launch input or another op's output,
 * that no tensor is produced twice or produced and also a launch input. */
static int check_dataflow(const cnmlBaseOp_t *ops, size_t num_ops, const cnmlTensor_t *inputs,
                          int num_inputs) {
  for (size_t i = 0; i < num_ops; ++i) {
    if (is_listed(inputs, num_inputs, ops[i]->output)) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "op %zu (%s) produces a tensor that is also an "
                      "input of the launch", i, kind_name(ops[i]->kind));
    }
    if (producer_of(ops, num_ops, ops[i]->output) != (int)i) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "two ops produce the same tensor (op %zu, %s)", i,
                      kind_name(ops[i]->kind));
    }
    for (int j = 0; j < ops[i]->num_inputs; ++j) {
      cnmlTensor_t input = ops[i]->inputs[j];
      if (!is_listed(inputs, num_inputs, input) && producer_of(ops, num_ops, input) < 0) {
        return acc_fail(MX_ACC_ERR_INVALID_ARG, "input %d of op %zu (%s) is neither an input of "
                        "the FusionOp nor produced by a fused op", j, i, kind_name(ops[i]->kind));
      }
    }
  }
  return MX_ACC_OK;
}

/* ordered = ops in a topological order, keeping the given order where it
 * already is one. */
static int order_ops(const cnmlBaseOp_t *ops, size_t num_ops, const cnmlTensor_t *inputs,
                     int num_inputs, cnmlBaseOp_t *ordered) {
  int status = check_dataflow(ops, num_ops, inputs, num_inputs);
  if (status != MX_ACC_OK) return status;
  unsigned char *placed = calloc(num_ops ? num_ops : 1, 1);
  if (placed == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "compiler");
  for (size_t count = 0; count < num_ops;) {
    size_t before = count;
    for (size_t i = 0; i < num_ops; ++i) {
      if (placed[i]) continue;
      int ready = 1;
      for (int j = 0; j < ops[i]->num_inputs && ready; ++j) {
        int producer = producer_of(ops, num_ops, ops[i]->inputs[j]);
        ready = producer < 0 || placed[producer];
      }
      if (ready) {
        placed[i] = 1;
        ordered[count++] = ops[i];
        break; /* restart from the first op: the given order wins ties */
      }
    }
    if (count == before) {
      free(placed);
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "the fused ops form a cycle");
    }
  }
  free(placed);
  return MX_ACC_OK;
}

/* ---- stage 1: kernels and constant transforms ------------------------------------------ */

static int need_data(cnmlBaseOp_t op, cnmlTensor_t tensor, const char *role) {
  if (tensor != NULL && tensor->data == NULL) {
    return acc_fail(MX_ACC_ERR_STATE, "the %s of a %s op has no data: bind it with "
                    "cnmlBindConstData before compiling", role, kind_name(op->kind));
  }
  return MX_ACC_OK;
}

static int copy_floats(const float *source, int64_t count, float **out) {
  *out = malloc((size_t)(count ? count : 1) * sizeof(float));
  if (*out == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "compiler constants");
  if (count > 0) memcpy(*out, source, (size_t)count * sizeof(float));
  return MX_ACC_OK;
}

/* MXNet's (F, C/g, kh, kw) filter re-laid out as [F][kh][kw][C/g], the
 * layout the simulated MAC arrays read. */
static int relayout_filter(cnmlTensor_t filter, float **out) {
  int64_t f = filter->dims[0], cg = filter->dims[1], kh = filter->dims[2], kw = filter->dims[3];
  int status = copy_floats(filter->data, filter->count, out);
  if (status != MX_ACC_OK) return status;
  for (int64_t i = 0; i < f; ++i) {
    for (int64_t ch = 0; ch < cg; ++ch) {
      for (int64_t y = 0; y < kh; ++y) {
        for (int64_t x = 0; x < kw; ++x) {
          int64_t from = ((i * cg + ch) * kh + y) * kw + x, to = ((i * kh + y) * kw + x) * cg + ch;
          (*out)[to] = filter->data[from];
        }
      }
    }
  }
  return MX_ACC_OK;
}

/* Inference batch norm of channel ch as y = x * scale + shift, in double,
 * as the host computes it before rounding to the data's type. */
static void batchnorm_factors(cnmlBaseOp_t op, int64_t ch, double *scale, double *shift) {
  double invstd = 1.0 / sqrt((double)op->var->data[ch] + op->p.eps);
  *scale = op->gamma != NULL ? invstd * (double)op->gamma->data[ch] : invstd;
  *shift = (double)op->beta->data[ch] - (double)op->mean->data[ch] * *scale;
}

static int batchnorm_affine(ckernel *k) {
  cnmlBaseOp_t op = k->op;
  int64_t channels = op->inputs[0]->dims[1];
  k->scale = malloc((size_t)channels * sizeof(float));
  k->shift = malloc((size_t)channels * sizeof(float));
  if (k->scale == NULL || k->shift == NULL) {
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "compiler constants");
  }
  for (int64_t ch = 0; ch < channels; ++ch) {
    double scale, shift;
    batchnorm_factors(op, ch, &scale, &shift);
    k->scale[ch] = (float)scale;
    k->shift[ch] = (float)shift;
  }
  k->channels = channels;
  return MX_ACC_OK;
}

/* The parameter tensors of op that must hold data. */
static int check_bound(cnmlBaseOp_t op) {
  int status = need_data(op, op->filter, "filter");
  if (status == MX_ACC_OK) status = need_data(op, op->bias, "bias");
  if (status == MX_ACC_OK) status = need_data(op, op->mean, "mean");
  if (status == MX_ACC_OK) status = need_data(op, op->var, "variance");
  if (status == MX_ACC_OK) status = need_data(op, op->gamma, "gamma");
  if (status == MX_ACC_OK) status = need_data(op, op->beta, "beta");
  return status;
}

/* Fills the kind-specific part of kernel k for its op. */
static int describe_kernel(ckernel *k) {
  cnmlBaseOp_t op = k->op;
  int status = check_bound(op);
  if (status != MX_ACC_OK) return status;
  switch (op->kind) {
    case MLU_KIND_CONV:
    case MLU_KIND_MLP:
      k->kind = op->kind == MLU_KIND_CONV ? CK_CONV : CK_MATMUL;
      k->channels = op->filter->dims[0];
      k->weights_count = op->filter->count;
      status = op->kind == MLU_KIND_CONV ? relayout_filter(op->filter, &k->weights)
                                         : copy_floats(op->filter->data, op->filter->count,
                                                       &k->weights);
      if (status == MX_ACC_OK && op->bias != NULL) {
        status = copy_floats(op->bias->data, op->bias->count, &k->bias);
      }
      return status;
    case MLU_KIND_POOL: k->kind = CK_POOL; return MX_ACC_OK;
    case MLU_KIND_ACTIVE:
      k->kind = CK_EWISE;
      k->ewise = MLU_EWISE_ACT;
      k->act = op->p.act;
      return MX_ACC_OK;
    case MLU_KIND_CLIP:
      k->kind = CK_EWISE;
      k->ewise = MLU_EWISE_ACT;
      k->act = MLU_ACT_CLIP;
      k->act_lo = op->p.clip.lo;
      k->act_hi = op->p.clip.hi;
      return MX_ACC_OK;
    case MLU_KIND_BATCHNORM:
      k->kind = CK_EWISE;
      k->ewise = MLU_EWISE_AFFINE;
      return batchnorm_affine(k);
    case MLU_KIND_ADD:
    case MLU_KIND_MULT:
      k->kind = CK_EWISE;
      k->ewise = op->kind == MLU_KIND_ADD ? MLU_EWISE_ADD : MLU_EWISE_MUL;
      return MX_ACC_OK;
    case MLU_KIND_SOFTMAX: k->kind = CK_SOFTMAX; return MX_ACC_OK;
    case MLU_KIND_CONCAT: k->kind = CK_CONCAT; return MX_ACC_OK;
    case MLU_KIND_RESHAPE: k->kind = CK_COPY; return MX_ACC_OK;
    default: return acc_fail(MX_ACC_ERR_INTERNAL, "unknown op kind %d", op->kind);
  }
}

static int output_slot(const compiler *c, const cnmlTensor_t *outputs, cnmlTensor_t tensor) {
  for (int j = 0; j < c->num_outputs; ++j) {
    if (outputs[j] == tensor) return c->num_inputs + j;
  }
  return -1;
}

static int build_kernels(compiler *c, const cnmlBaseOp_t *ordered, size_t num_ops,
                         const cnmlTensor_t *inputs, const cnmlTensor_t *outputs) {
  for (int i = 0; i < c->num_inputs; ++i) {
    int index;
    if (find_value(c, inputs[i]) >= 0) continue; /* Add(x, x): one value, two slots */
    int status = add_value(c, inputs[i], i, -1, &index);
    if (status != MX_ACC_OK) return status;
  }
  c->kernels = calloc(num_ops, sizeof *c->kernels);
  if (c->kernels == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "compiler kernels");
  for (size_t i = 0; i < num_ops; ++i) {
    ckernel *k = &c->kernels[i];
    c->num_kernels = i + 1;
    k->op = ordered[i];
    k->dtype = ordered[i]->output->dtype;
    k->residual = -1;
    k->num_inputs = ordered[i]->num_inputs;
    for (int j = 0; j < k->num_inputs; ++j) k->inputs[j] = find_value(c, ordered[i]->inputs[j]);
    int status = add_value(c, ordered[i]->output, output_slot(c, outputs, ordered[i]->output),
                           (int)i, &k->output);
    if (status == MX_ACC_OK) status = describe_kernel(k);
    if (status != MX_ACC_OK) return status;
  }
  for (int j = 0; j < c->num_outputs; ++j) {
    if (find_value(c, outputs[j]) < 0) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "output %d of the FusionOp is produced by no fused "
                      "op", j);
    }
  }
  return MX_ACC_OK;
}

/* ---- stage 2: fusion ------------------------------------------------------------------------ */

static int readers(const compiler *c, int value) {
  int count = 0;
  for (size_t i = 0; i < c->num_kernels; ++i) {
    const ckernel *k = &c->kernels[i];
    if (k->dead) continue;
    for (int j = 0; j < k->num_inputs; ++j) count += k->inputs[j] == value;
    count += k->residual == value;
  }
  return count;
}

/* The live kernel producing value, if value is an intermediate that only
 * one kernel reads, so that its producer may absorb that reader. */
static ckernel *sole_producer(compiler *c, int value) {
  const cvalue *v = &c->values[value];
  if (v->producer < 0 || v->slot >= 0 || readers(c, value) != 1) return NULL;
  ckernel *p = &c->kernels[v->producer];
  return p->dead ? NULL : p;
}

/* absorbed's output becomes producer's; absorbed disappears. */
static void absorb(compiler *c, ckernel *producer, ckernel *absorbed) {
  c->values[producer->output].producer = -2;
  producer->output = absorbed->output;
  c->values[absorbed->output].producer = (int)(producer - c->kernels);
  absorbed->dead = 1;
}

/* conv/fc -> batch norm: scale each output channel's weights, fold the
 * shift into the bias. */
static int fold_batchnorm(compiler *c, ckernel *bn) {
  ckernel *p = sole_producer(c, bn->inputs[0]);
  if (p == NULL || (p->kind != CK_CONV && p->kind != CK_MATMUL) || p->act != MLU_ACT_NONE ||
      p->residual >= 0) {
    return MX_ACC_OK;
  }
  if (p->kind == CK_MATMUL && bn->op->inputs[0]->ndim != 2) return MX_ACC_OK; /* not per column */
  if (p->bias == NULL) {
    p->bias = calloc((size_t)p->channels, sizeof(float));
    if (p->bias == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "compiler constants");
  }
  int64_t per_channel = p->weights_count / p->channels;
  for (int64_t ch = 0; ch < p->channels; ++ch) {
    double scale, shift;
    batchnorm_factors(bn->op, ch, &scale, &shift);
    float *weights = p->weights + ch * per_channel;
    for (int64_t i = 0; i < per_channel; ++i) weights[i] = (float)((double)weights[i] * scale);
    p->bias[ch] = (float)((double)p->bias[ch] * scale + shift);
  }
  absorb(c, p, bn);
  c->info.folded_batchnorms += 1;
  return MX_ACC_OK;
}

/* producer -> activation/clip: the activation becomes the epilogue's. */
static void fuse_activation(compiler *c, ckernel *act) {
  ckernel *p = sole_producer(c, act->inputs[0]);
  if (p == NULL || p->act != MLU_ACT_NONE) return;
  if (p->kind != CK_CONV && p->kind != CK_MATMUL && p->kind != CK_EWISE) return;
  p->act = act->act;
  p->act_lo = act->act_lo;
  p->act_hi = act->act_hi;
  absorb(c, p, act);
  c->info.fused_epilogues += 1;
}

/* conv/fc -> add(., other): other becomes the epilogue's residual. The
 * operand produced last is the one absorbed, so the other one already
 * exists when the producer runs. */
static void fuse_residual(compiler *c, ckernel *add) {
  int x = add->inputs[0], y = add->inputs[1];
  if (x == y) return;
  int main_value = c->values[x].producer >= c->values[y].producer ? x : y;
  int other = main_value == x ? y : x;
  ckernel *p = sole_producer(c, main_value);
  if (p == NULL || (p->kind != CK_CONV && p->kind != CK_MATMUL) || p->act != MLU_ACT_NONE ||
      p->residual >= 0) {
    return;
  }
  p->residual = other;
  absorb(c, p, add);
  c->info.fused_epilogues += 1;
}

static int fuse(compiler *c) {
  for (size_t i = 0; i < c->num_kernels; ++i) {
    ckernel *k = &c->kernels[i];
    if (k->dead || k->kind != CK_EWISE) continue;
    if (k->ewise == MLU_EWISE_AFFINE) {
      int status = fold_batchnorm(c, k);
      if (status != MX_ACC_OK) return status;
    } else if (k->ewise == MLU_EWISE_ACT) {
      fuse_activation(c, k);
    } else if (k->ewise == MLU_EWISE_ADD && k->act == MLU_ACT_NONE) {
      fuse_residual(c, k);
    }
  }
  /* A reshape whose result is not a launch output needs no data movement. */
  for (size_t i = 0; i < c->num_kernels; ++i) {
    ckernel *k = &c->kernels[i];
    if (!k->dead && k->kind == CK_COPY && c->values[k->output].slot < 0) {
      k->kind = CK_ALIAS;
      c->values[k->output].alias = k->inputs[0];
      c->info.aliased_values += 1;
    }
  }
  return MX_ACC_OK;
}

/* ---- int8 (precision=int8): filters quantized per output channel --------------------------- */

/* Quantizes kernel k's filters symmetrically per output channel, after
 * batch-norm folding: scale_c = max|w_c| / 127 (in fp32), w_c -> round(w_c
 * / scale_c) in [-127, 127] (mlu_quantize). A kernel keeps floating point
 * when its reduction is longer than MLU_INT8_MAX_TAPS (int32 accumulation
 * must stay exact) or when a filter holds a NaN or infinity. */
static int quantize_kernel(compiler *c, ckernel *k) {
  int64_t per_channel = k->weights_count / k->channels;
  if (per_channel > MLU_INT8_MAX_TAPS || per_channel * k->channels != k->weights_count) {
    return MX_ACC_OK;
  }
  for (int64_t i = 0; i < k->weights_count; ++i) {
    if (!isfinite(k->weights[i])) return MX_ACC_OK;
  }
  k->wscale = malloc((size_t)k->channels * sizeof(float));
  if (k->wscale == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "compiler constants");
  for (int64_t ch = 0; ch < k->channels; ++ch) {
    float *weights = k->weights + ch * per_channel, amax = 0.0f;
    for (int64_t i = 0; i < per_channel; ++i) {
      if (fabsf(weights[i]) > amax) amax = fabsf(weights[i]);
    }
    float scale = amax / 127.0f;
    k->wscale[ch] = scale;
    for (int64_t i = 0; i < per_channel; ++i) weights[i] = (float)mlu_quantize(weights[i], scale);
  }
  k->int8 = 1;
  c->info.int8_kernels += 1;
  return MX_ACC_OK;
}

static int quantize_kernels(compiler *c) {
  if (c->params.precision != MLU_PRECISION_INT8) return MX_ACC_OK;
  for (size_t i = 0; i < c->num_kernels; ++i) {
    ckernel *k = &c->kernels[i];
    if (k->dead || (k->kind != CK_CONV && k->kind != CK_MATMUL) || k->weights == NULL ||
        k->channels <= 0) {
      continue;
    }
    int status = quantize_kernel(c, k);
    if (status != MX_ACC_OK) return status;
  }
  return MX_ACC_OK;
}

/* ---- stage 3: liveness, constants, memory planning ------------------------------------------ */

static int live(const ckernel *k) { return !k->dead && k->kind != CK_ALIAS; }

static void note_use(compiler *c, int value, size_t kernel) {
  cvalue *root = &c->values[mlu_root(c, value)];
  root->uses += 1;
  root->last_use = (int)kernel;
}

static void compute_liveness(compiler *c) {
  for (size_t i = 0; i < c->num_values; ++i) {
    c->values[i].uses = 0;
    c->values[i].last_use = -1;
  }
  for (size_t i = 0; i < c->num_kernels; ++i) {
    const ckernel *k = &c->kernels[i];
    if (!live(k)) continue;
    c->info.kernels += 1;
    for (int j = 0; j < k->num_inputs; ++j) note_use(c, k->inputs[j], i);
    if (k->residual >= 0) note_use(c, k->residual, i);
  }
}

static uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/* Places each live kernel's constants in the blob: weights in the
 * kernel's data type (fp16 models keep fp16 filters) or in int8 (int8
 * kernels), vectors in fp32. */
static void layout_constants(compiler *c) {
  uint64_t at = 0;
  for (size_t i = 0; i < c->num_kernels; ++i) {
    ckernel *k = &c->kernels[i];
    if (!live(k)) continue;
    if (k->weights != NULL) {
      k->weights_offset = at = align_up(at, kConstAlign);
      at += (uint64_t)k->weights_count * mlu_dtype_size(k->int8 ? MLU_DT_INT8 : k->dtype);
    }
    float *vectors[] = {k->bias, k->scale, k->shift, k->wscale};
    uint64_t *offsets[] = {&k->bias_offset, &k->scale_offset, &k->shift_offset,
                           &k->wscale_offset};
    for (int v = 0; v < 4; ++v) {
      if (vectors[v] == NULL) continue;
      *offsets[v] = at = align_up(at, kConstAlign);
      at += (uint64_t)k->channels * sizeof(float);
    }
  }
  c->const_bytes = at;
}

static void write_values(unsigned char *blob, uint64_t offset, const float *values, int64_t count,
                         int dtype) {
  if (dtype == MLU_DT_FLOAT16) {
    for (int64_t i = 0; i < count; ++i) {
      uint16_t half = mlu_float_to_half(values[i]);
      memcpy(blob + offset + (uint64_t)i * 2, &half, sizeof half);
    }
  } else if (dtype == MLU_DT_INT8) {
    for (int64_t i = 0; i < count; ++i) {
      int8_t value = mlu_quantize(values[i], 1.0f); /* already integers: exact */
      memcpy(blob + offset + (uint64_t)i, &value, sizeof value);
    }
  } else {
    memcpy(blob + offset, values, (size_t)count * sizeof(float));
  }
}

static void write_constants(const compiler *c, unsigned char *blob) {
  for (size_t i = 0; i < c->num_kernels; ++i) {
    const ckernel *k = &c->kernels[i];
    if (!live(k)) continue;
    if (k->weights) {
      write_values(blob, k->weights_offset, k->weights, k->weights_count,
                   k->int8 ? MLU_DT_INT8 : k->dtype);
    }
    if (k->wscale) write_values(blob, k->wscale_offset, k->wscale, k->channels, MLU_DT_FLOAT32);
    if (k->bias) write_values(blob, k->bias_offset, k->bias, k->channels, MLU_DT_FLOAT32);
    if (k->scale) write_values(blob, k->scale_offset, k->scale, k->channels, MLU_DT_FLOAT32);
    if (k->shift) write_values(blob, k->shift_offset, k->shift, k->channels, MLU_DT_FLOAT32);
  }
}

/* Decides where kernel index's output lives: its I/O slot; on chip when it
 * fits next to the residents and the kernel's own tiles; DRAM scratch
 * otherwise. Then emits the kernel. */
static int place_and_emit(compiler *c, size_t index, int allow_resident) {
  ckernel *k = &c->kernels[index];
  cvalue *out = &c->values[k->output];
  if (out->slot < 0 && out->uses > 0 && allow_resident) {
    out->resident = mlu_sram_alloc(&c->sram, (uint64_t)out->count, &out->sram);
  }
  uint64_t gap_addr, gap, words = 0;
  mlu_sram_largest_gap(&c->sram, &gap_addr, &gap);
  int fits = mlu_kernel_plan(c, k, gap, &words);
  if (!fits && out->resident) { /* give the tiles the room instead */
    mlu_sram_free(&c->sram, out->sram);
    out->resident = 0;
    mlu_sram_largest_gap(&c->sram, &gap_addr, &gap);
    fits = mlu_kernel_plan(c, k, gap, &words);
  }
  if (!fits) {
    return acc_fail(MX_ACC_ERR_UNSUPPORTED, "a %s op cannot be tiled into %llu bytes of on-chip "
                    "memory", kind_name(k->op->kind), (unsigned long long)(gap * sizeof(float)));
  }
  if (out->slot < 0) {
    if (out->resident) {
      c->info.resident_values += 1;
    } else {
      uint64_t at = align_up(c->scratch_bytes, kConstAlign);
      out->dram = (mlu_dram_ref){MLU_SPACE_SCRATCH, (uint8_t)out->dtype, 0, at};
      c->scratch_bytes = at + (uint64_t)out->count * mlu_dtype_size(out->dtype);
      c->info.spilled_values += 1;
    }
  }
  mlu_sram_note_use(&c->sram, gap_addr, words);
  mlu_emit_kernel(c, k, gap_addr, gap);
  return c->emit_status;
}

/* Frees the on-chip home of every value whose last reader was kernel index. */
static void release_inputs(compiler *c, size_t index) {
  const ckernel *k = &c->kernels[index];
  for (int j = 0; j <= k->num_inputs; ++j) {
    int value = j < k->num_inputs ? k->inputs[j] : k->residual;
    if (value < 0) continue;
    cvalue *root = &c->values[mlu_root(c, value)];
    if (root->resident && root->last_use == (int)index) {
      mlu_sram_free(&c->sram, root->sram);
      root->last_use = -1; /* freed once, even if read twice */
    }
  }
}

/* Forgets every placement and instruction, for a second attempt. */
static void reset_emission(compiler *c) {
  c->num_insns = 0;
  memset(c->info.by_opcode, 0, sizeof c->info.by_opcode);
  c->info.resident_values = c->info.spilled_values = c->info.kernels = 0;
  mlu_sram_reset(&c->sram);
  c->scratch_bytes = 0;
  for (size_t i = 0; i < c->num_values; ++i) c->values[i].resident = 0;
  compute_liveness(c);
}

static int emit_kernels(compiler *c, int allow_resident) {
  for (size_t i = 0; i < c->num_kernels; ++i) {
    if (!live(&c->kernels[i])) continue;
    int status = place_and_emit(c, i, allow_resident);
    if (status != MX_ACC_OK) return status;
    release_inputs(c, i);
  }
  return MX_ACC_OK;
}

static int emit_program(compiler *c) {
  mlu_sram_init(&c->sram, c->params.sram_bytes / sizeof(float));
  int status = emit_kernels(c, 1);
  if (status == MX_ACC_ERR_UNSUPPORTED) {
    /* Values kept on chip left a later kernel too little room to tile:
     * give every kernel the whole on-chip memory instead. */
    reset_emission(c);
    status = emit_kernels(c, 0);
  }
  if (status != MX_ACC_OK) return status;
  mlu_insn sync;
  memset(&sync, 0, sizeof sync);
  sync.opcode = MLU_OP_SYNC;
  mlu_push_insn(c, &sync);
  return c->emit_status;
}

/* ---- finishing: device memory, verification ----------------------------------------------- */

static int upload_constants(compiler *c, mlu_program *program) {
  if (c->const_bytes == 0) return MX_ACC_OK;
  int status = mlu_card_alloc(c->card, c->const_bytes, MLU_MEM_PROGRAM, &program->consts);
  if (status != MX_ACC_OK) return status;
  program->const_bytes = c->const_bytes;
  unsigned char *blob = calloc(1, (size_t)c->const_bytes);
  if (blob == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "compiler constants");
  write_constants(c, blob);
  memcpy(program->consts, blob, (size_t)c->const_bytes); /* the host -> device transfer */
  free(blob);
  mlu_card_count_copy(c->card, c->const_bytes);
  return MX_ACC_OK;
}

static int finish_program(compiler *c, const cnmlTensor_t *inputs, const cnmlTensor_t *outputs,
                          mlu_program **result) {
  mlu_program *program = calloc(1, sizeof *program);
  int slots = c->num_inputs + c->num_outputs;
  if (program == NULL) return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "program");
  atomic_init(&program->refs, 1);
  program->card = c->card;
  program->io_bytes = calloc((size_t)(slots ? slots : 1), sizeof(uint64_t));
  if (program->io_bytes == NULL) {
    mlu_program_unref(program);
    return acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "program");
  }
  program->num_inputs = c->num_inputs;
  program->num_outputs = c->num_outputs;
  for (int i = 0; i < slots; ++i) {
    cnmlTensor_t t = i < c->num_inputs ? inputs[i] : outputs[i - c->num_inputs];
    program->io_bytes[i] = (uint64_t)t->count * mlu_dtype_size(t->dtype);
  }
  program->insns = c->insns;
  program->num_insns = c->num_insns;
  c->insns = NULL;
  c->info.instructions = program->num_insns;
  c->info.sram_words = c->sram.peak;
  c->info.const_bytes = c->const_bytes;
  c->info.scratch_bytes = c->scratch_bytes;
  program->info = c->info;
  int status = upload_constants(c, program);
  if (status == MX_ACC_OK && c->scratch_bytes > 0) {
    status = mlu_card_alloc(c->card, c->scratch_bytes, MLU_MEM_PROGRAM, &program->scratch);
    if (status == MX_ACC_OK) program->scratch_bytes = c->scratch_bytes;
  }
  if (status == MX_ACC_OK) status = mlu_program_verify(program);
  if (status != MX_ACC_OK) {
    mlu_program_unref(program);
    return status;
  }
  *result = program;
  return MX_ACC_OK;
}

int mlu_compile(mlu_card *card, const cnmlBaseOp_t *ops, size_t num_ops,
                const cnmlTensor_t *inputs, int num_inputs, const cnmlTensor_t *outputs,
                int num_outputs, int fusing, mlu_program **program) {
  if (num_ops == 0) return acc_fail(MX_ACC_ERR_INVALID_ARG, "nothing to compile: no ops");
  compiler c;
  memset(&c, 0, sizeof c);
  c.card = card;
  c.params = mlu_card_params(card);
  c.num_inputs = num_inputs;
  c.num_outputs = num_outputs;
  cnmlBaseOp_t *ordered = malloc(num_ops * sizeof *ordered);
  int status = ordered ? MX_ACC_OK : acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "compiler");
  if (status == MX_ACC_OK) status = order_ops(ops, num_ops, inputs, num_inputs, ordered);
  if (status == MX_ACC_OK) status = build_kernels(&c, ordered, num_ops, inputs, outputs);
  if (status == MX_ACC_OK && fusing) status = fuse(&c);
  if (status == MX_ACC_OK) status = quantize_kernels(&c);
  if (status == MX_ACC_OK) {
    compute_liveness(&c);
    layout_constants(&c);
    status = emit_program(&c);
  }
  if (status == MX_ACC_OK) status = finish_program(&c, inputs, outputs, program);
  free(ordered);
  compiler_release(&c);
  return status;
}
