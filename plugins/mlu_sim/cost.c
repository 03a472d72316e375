#include "cost.h"

#include <stdio.h>
#include <string.h>

#include "attrs.h"
#include "mxnet_acc.h"
#include "status.h"
#include "team.h"

size_t mlu_dtype_size(int dtype) {
  switch (dtype) {
    case MLU_DT_FLOAT32: return 4;
    case MLU_DT_FLOAT16: return 2;
    case MLU_DT_INT8: return 1;
    default: return 0;
  }
}

mlu_params mlu_params_default(void) {
  mlu_params params = {
      .clock_hz = 1.0e9,          /* MLU100 balanced mode runs at 1 GHz */
      .peak_ops_fp32 = 4.0e12,    /* no fp32 MAC arrays: a quarter of the fp16 rate */
      .peak_ops_fp16 = 16.0e12,   /* sustained-class figure, see docs/mlu_sim.md */
      .peak_ops_int8 = 64.0e12,
      .vector_ops = 1.0e12,
      .dram_bandwidth = 102.4e9,  /* 256-bit DDR4-3200 */
      .launch_latency_ns = 20000.0,
      .host_bandwidth = 12.0e9,   /* PCIe 3.0 x16, effective */
      .host_latency_ns = 10000.0,
      .sram_bytes = 4u << 20,
      .dram_bytes = (uint64_t)16 << 30,
      .precision = MLU_PRECISION_FP32,
      .num_threads = 1,
  };
  return params;
}

/* ---- the parameter table behind configure --------------------------------- */

enum { kDouble = 0, kInteger = 1, kChoice = 2 };

typedef struct param_info {
  const char *name;
  size_t offset;
  int kind;                   /* kDouble: a double field; otherwise a uint64_t field */
  double min, max;
  const char *const *choices; /* kChoice: the names of values 0 .. max */
} param_info;

static const char *const kPrecisions[] = {"fp32", "int8"};

#define DOUBLE_PARAM(field, lo, hi) {#field, offsetof(mlu_params, field), kDouble, lo, hi, NULL}
#define INTEGER_PARAM(field, lo, hi) {#field, offsetof(mlu_params, field), kInteger, lo, hi, NULL}
#define CHOICE_PARAM(field, names)                                                        \
  {#field, offsetof(mlu_params, field), kChoice, 0,                                       \
   (double)(sizeof names / sizeof names[0]) - 1, names}

static const param_info kParams[] = {
    DOUBLE_PARAM(clock_hz, 1e6, 1e12),
    DOUBLE_PARAM(peak_ops_fp32, 1e6, 1e18),
    DOUBLE_PARAM(peak_ops_fp16, 1e6, 1e18),
    DOUBLE_PARAM(peak_ops_int8, 1e6, 1e18),
    DOUBLE_PARAM(vector_ops, 1e6, 1e18),
    DOUBLE_PARAM(dram_bandwidth, 1e6, 1e15),
    DOUBLE_PARAM(launch_latency_ns, 0, 1e12),
    DOUBLE_PARAM(host_bandwidth, 1e6, 1e15),
    DOUBLE_PARAM(host_latency_ns, 0, 1e12),
    /* 4 KiB is the least on-chip memory that every kernel can tile into. */
    INTEGER_PARAM(sram_bytes, 4096, 1073741824.0),
    INTEGER_PARAM(dram_bytes, 1048576.0, 1099511627776.0),
    /* fp32 (default) or int8: what CONV/MATMUL of later compiles use. */
    CHOICE_PARAM(precision, kPrecisions),
    /* Not a cost: host threads one launch's kernels may use (1 + helpers). */
    INTEGER_PARAM(num_threads, 1, 1 + MLU_TEAM_MAX_HELPERS),
};

enum { kNumParams = sizeof kParams / sizeof kParams[0] };

size_t mlu_params_count(void) { return kNumParams; }

const char *mlu_params_name(size_t index) {
  return index < kNumParams ? kParams[index].name : NULL;
}

static const param_info *find_param(const char *key) {
  for (size_t i = 0; i < kNumParams; ++i) {
    if (strcmp(kParams[i].name, key) == 0) return &kParams[i];
  }
  return NULL;
}

int mlu_params_validate(const mlu_params *params) {
  for (size_t i = 0; i < kNumParams; ++i) {
    const char *field = (const char *)params + kParams[i].offset;
    double value;
    if (kParams[i].kind != kDouble) {
      uint64_t stored;
      memcpy(&stored, field, sizeof stored);
      value = (double)stored;
    } else {
      memcpy(&value, field, sizeof value);
    }
    if (!(value >= kParams[i].min) || !(value <= kParams[i].max)) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "parameter %s=%g is outside [%g, %g]",
                      kParams[i].name, value, kParams[i].min, kParams[i].max);
    }
  }
  return MX_ACC_OK;
}

int mlu_params_set(mlu_params *params, const char *key, const char *text) {
  const param_info *info = find_param(key);
  if (info == NULL) return acc_fail(MX_ACC_ERR_NOT_FOUND, "unknown parameter \"%s\"", key);
  char *field = (char *)params + info->offset;
  if (info->kind == kChoice) {
    for (uint64_t v = 0; (double)v <= info->max; ++v) {
      if (strcmp(text, info->choices[v]) == 0) {
        memcpy(field, &v, sizeof v);
        return MX_ACC_OK;
      }
    }
    return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s=\"%s\": expected %s or %s", key, text,
                    info->choices[0], info->choices[1]);
  }
  if (info->kind == kInteger) {
    int64_t value;
    if (acc_attr_int(text, &value) != 0 || (double)value < info->min ||
        (double)value > info->max) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s=\"%s\": expected an integer from %.0f to %.0f",
                      key, text, info->min, info->max);
    }
    uint64_t stored = (uint64_t)value;
    memcpy(field, &stored, sizeof stored);
  } else {
    double value;
    /* The negated comparisons also refuse NaN. */
    if (acc_attr_float(text, &value) != 0 || !(value >= info->min) || !(value <= info->max)) {
      return acc_fail(MX_ACC_ERR_INVALID_ARG, "%s=\"%s\": expected a number from %g to %g", key,
                      text, info->min, info->max);
    }
    memcpy(field, &value, sizeof value);
  }
  return MX_ACC_OK;
}

int mlu_params_format(const mlu_params *params, const char *key, char *buffer, size_t size) {
  const param_info *info = find_param(key);
  if (info == NULL) return -1;
  const char *field = (const char *)params + info->offset;
  if (info->kind != kDouble) {
    uint64_t value;
    memcpy(&value, field, sizeof value);
    if (info->kind == kChoice && (double)value <= info->max) {
      snprintf(buffer, size, "%s", info->choices[value]);
    } else {
      snprintf(buffer, size, "%llu", (unsigned long long)value);
    }
  } else {
    double value;
    memcpy(&value, field, sizeof value);
    snprintf(buffer, size, "%.17g", value); /* reads back exactly */
  }
  return 0;
}

/* ---- instruction costs ---------------------------------------------------- */

static double peak_ops(const mlu_params *params, int dtype) {
  switch (dtype) {
    case MLU_DT_FLOAT16: return params->peak_ops_fp16;
    case MLU_DT_INT8: return params->peak_ops_int8;
    default: return params->peak_ops_fp32;
  }
}

static double seconds_to_ns(double ops, double rate) { return ops / rate * 1e9; }

/* a * b, or UINT64_MAX where that overflows. */
static uint64_t product_or_max(uint64_t a, uint64_t b) {
  return a != 0 && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

uint64_t mlu_int8_input_elements(const mlu_insn *insn) {
  if (insn->dtype != MLU_DT_INT8) return 0;
  if (insn->opcode == MLU_OP_CONV) {
    const mlu_conv *c = &insn->u.conv;
    if (c->nf <= 0 || c->out_rows <= 0 || c->fg <= 0 || c->cg <= 0 || c->w <= 0) return 0;
    /* The channels of the filters' groups, the rows the output rows read. */
    uint64_t groups = (uint64_t)((c->f0 + c->nf - 1) / c->fg - c->f0 / c->fg + 1);
    int64_t lo = c->oy0 * c->sh - c->ph;
    int64_t hi = (c->oy0 + c->out_rows - 1) * c->sh - c->ph + (c->kh - 1) * c->dh + 1;
    if (lo < 0) lo = 0;
    if (hi > c->h) hi = c->h;
    if (hi <= lo) return 0;
    uint64_t channels = product_or_max(groups, (uint64_t)c->cg);
    return product_or_max(channels, product_or_max((uint64_t)(hi - lo), (uint64_t)c->w));
  }
  if (insn->opcode == MLU_OP_MATMUL && insn->u.matmul.rows > 0 && insn->u.matmul.k > 0) {
    return product_or_max((uint64_t)insn->u.matmul.rows, (uint64_t)insn->u.matmul.k);
  }
  return 0;
}

/* The vector-unit passes of an int8 instruction's input: max-abs, quantize. */
static double quantize_ns(const mlu_params *params, const mlu_insn *insn) {
  return seconds_to_ns(2.0 * (double)mlu_int8_input_elements(insn), params->vector_ops);
}

double mlu_cost_insn_ns(const mlu_params *params, const mlu_insn *insn, uint64_t *dram_bytes) {
  switch (insn->opcode) {
    case MLU_OP_LOAD:
    case MLU_OP_STORE: {
      const mlu_move *move = &insn->u.move;
      uint64_t bytes = move->rows * move->run * mlu_dtype_size(move->dram.dtype);
      *dram_bytes += bytes;
      return seconds_to_ns((double)bytes, params->dram_bandwidth);
    }
    case MLU_OP_CONV: {
      const mlu_conv *c = &insn->u.conv;
      double macs = (double)c->nf * (double)c->out_rows * (double)c->ow * (double)c->cg *
                    (double)c->kh * (double)c->kw;
      return seconds_to_ns(2.0 * macs, peak_ops(params, insn->dtype)) + quantize_ns(params, insn);
    }
    case MLU_OP_MATMUL: {
      const mlu_matmul *m = &insn->u.matmul;
      double macs = (double)m->rows * (double)m->cols * (double)m->k;
      return seconds_to_ns(2.0 * macs, peak_ops(params, insn->dtype)) + quantize_ns(params, insn);
    }
    case MLU_OP_POOL: {
      const mlu_pool *p = &insn->u.pool;
      double visits = (double)p->planes * (double)p->out_rows * (double)p->ow * (double)p->kh *
                      (double)p->kw;
      return seconds_to_ns(visits, params->vector_ops);
    }
    case MLU_OP_EWISE:
      return seconds_to_ns((double)insn->u.ewise.n, params->vector_ops);
    case MLU_OP_SOFTMAX: {
      const mlu_softmax *s = &insn->u.softmax;
      double elements = (double)s->outer * (double)s->axis_len * (double)s->inner;
      return seconds_to_ns(4.0 * elements, params->vector_ops);
    }
    case MLU_OP_COPY:
      return seconds_to_ns((double)(insn->u.copy.rows * insn->u.copy.run), params->vector_ops);
    default:
      return 0.0;
  }
}

double mlu_cost_copy_ns(const mlu_params *params, uint64_t bytes) {
  return params->host_latency_ns + seconds_to_ns((double)bytes, params->host_bandwidth);
}
