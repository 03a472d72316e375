/*
 * The CNML/CNRT-like layer of plugins/mlu_sim, linked directly and run
 * under AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer:
 * tensors and their checks, device buffers that exist only after
 * compilation, numerics of every BaseOp against plain reference loops,
 * batch-norm folding and epilogue fusion in FusionOps, tiling into a tiny
 * on-chip memory, fp16 storage, queue order, parallel queues, failures
 * reported at sync, and out-of-memory errors. Every object is destroyed and
 * every card must end with no allocation. Then the mxnet_acc.h entry points
 * built on that layer: load/infer/unload cycles with weights changed through
 * infer, failed loads, executor and memory cycles, all leak-checked.
 * Prints "N passed, N failed".
 */
#define _DEFAULT_SOURCE /* usleep */

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cnml.h"
#include "cnml_impl.h" /* white-box: tensor shapes */
#include "check.h"
#include "half.h"
#include "mlu_fixture.h"
#include "mxnet_acc.h"

#define OK(call) CHECK((call) == CNML_STATUS_SUCCESS)

/* ---- helpers ---------------------------------------------------------------------------- */

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int64_t count_of(const int64_t *dims, int ndim) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= dims[d];
  return n;
}

static cnmlTensor_t make_tensor(cnmlTensorType_t type, int ndim, const int64_t *dims) {
  cnmlTensor_t t = NULL;
  OK(cnmlCreateTensor(&t, type, CNML_DATA_FLOAT32, dims, ndim));
  return t;
}

static void bind(cnmlTensor_t t, const float *values) {
  cnmlCpuTensor_t cpu = NULL;
  OK(cnmlCreateCpuTensor(&cpu, CNML_TENSOR, CNML_DATA_FLOAT32, t->dims, t->ndim));
  OK(cnmlBindConstData(t, cpu, values));
  cnmlDestroyCpuTensor(&cpu);
}

/* A device buffer for t filled from host values (fp32 on the host). */
static void *upload(cnmlTensor_t t, const float *values) {
  void *device = NULL;
  cnmlCpuTensor_t cpu = NULL;
  OK(cnmlMallocBuffer(t, &device));
  OK(cnmlCreateCpuTensor(&cpu, CNML_TENSOR, CNML_DATA_FLOAT32, t->dims, t->ndim));
  if (values != NULL) OK(cnmlMemcpyTensorToDevice(cpu, values, t, device));
  cnmlDestroyCpuTensor(&cpu);
  return device;
}

static void download(cnmlTensor_t t, const void *device, float *values) {
  cnmlCpuTensor_t cpu = NULL;
  OK(cnmlCreateCpuTensor(&cpu, CNML_TENSOR, CNML_DATA_FLOAT32, t->dims, t->ndim));
  OK(cnmlMemcpyTensorToHost(t, device, cpu, values));
  cnmlDestroyCpuTensor(&cpu);
}

static double max_rel_error(const float *got, const double *want, int64_t n) {
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double err = fabs((double)got[i] - want[i]) / (fabs(want[i]) + 1e-3);
    if (!(err <= worst)) worst = err; /* NaN counts as worst */
  }
  return worst;
}

static int same_floats(const float *a, const float *b, int64_t n) {
  return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

static mlu_params small_sram_params(void) {
  mlu_params params = mlu_params_default();
  params.sram_bytes = 4096; /* forces every kernel to tile */
  params.dram_bytes = 64u << 20;
  return params;
}

/* ---- references ------------------------------------------------------------------------- */

typedef struct conv_case {
  int64_t n, c, h, w, f, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  int bias;
} conv_case;

static int64_t conv_out(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (size + 2 * p - d * (k - 1) - 1) / s + 1;
}

static void conv_reference(const conv_case *k, const float *x, const float *w, const float *b,
                           double *y) {
  int64_t oh = conv_out(k->h, k->kh, k->sh, k->ph, k->dh);
  int64_t ow = conv_out(k->w, k->kw, k->sw, k->pw, k->dw);
  int64_t cg = k->c / k->groups, fg = k->f / k->groups;
  for (int64_t n = 0; n < k->n; ++n)
    for (int64_t f = 0; f < k->f; ++f)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = b != NULL ? b[f] : 0.0;
          for (int64_t ch = 0; ch < cg; ++ch)
            for (int64_t ky = 0; ky < k->kh; ++ky)
              for (int64_t kx = 0; kx < k->kw; ++kx) {
                int64_t iy = oy * k->sh - k->ph + ky * k->dh, ix = ox * k->sw - k->pw + kx * k->dw;
                if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w) continue;
                int64_t in_ch = f / fg * cg + ch;
                sum += (double)x[((n * k->c + in_ch) * k->h + iy) * k->w + ix] *
                       (double)w[((f * cg + ch) * k->kh + ky) * k->kw + kx];
              }
          y[((n * k->f + f) * oh + oy) * ow + ox] = sum;
        }
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_half(void) {
  int exact = 1;
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    if ((bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0) continue; /* NaN */
    if (mlu_float_to_half(mlu_half_to_float((uint16_t)bits)) != bits) exact = 0;
  }
  CHECK(exact);
  CHECK(mlu_float_to_half(1.0f) == 0x3c00);
  CHECK(mlu_float_to_half(65504.0f) == 0x7bff);
  CHECK(mlu_float_to_half(65519.0f) == 0x7bff);
  CHECK(mlu_float_to_half(65520.0f) == 0x7c00);
  CHECK(mlu_float_to_half(ldexpf(1.0f, -25)) == 0);      /* tie to even: zero */
  CHECK(mlu_float_to_half(ldexpf(1.5f, -25)) == 1);      /* above the tie */
  CHECK(mlu_float_to_half(1.0f + ldexpf(1.0f, -11)) == 0x3c00); /* tie to even */
  CHECK(mlu_float_to_half(-2.0f) == 0xc000);
  CHECK(isnan(mlu_half_to_float(mlu_float_to_half(NAN))));
}

static void test_tensors(void) {
  cnmlTensor_t t = NULL;
  int64_t dims[9] = {2, 3, 4, 5, 1, 1, 1, 1, 1};
  CHECK(cnmlCreateTensor(&t, CNML_TENSOR, CNML_DATA_FLOAT32, dims, 9) == CNML_STATUS_INVALIDARG);
  CHECK(cnmlCreateTensor(NULL, CNML_TENSOR, CNML_DATA_FLOAT32, dims, 4) == CNML_STATUS_INVALIDARG);
  CHECK(cnmlCreateTensor(&t, CNML_TENSOR, CNML_DATA_INT8, dims, 4) == CNML_STATUS_UNSUPPORTED);
  CHECK(cnmlCreateTensor(&t, (cnmlTensorType_t)7, CNML_DATA_FLOAT32, dims, 4) ==
        CNML_STATUS_INVALIDARG);
  int64_t negative[2] = {2, -1};
  CHECK(cnmlCreateTensor(&t, CNML_TENSOR, CNML_DATA_FLOAT32, negative, 2) ==
        CNML_STATUS_INVALIDARG);
  int64_t huge[3] = {1 << 20, 1 << 20, 1 << 20};
  CHECK(cnmlCreateTensor(&t, CNML_TENSOR, CNML_DATA_FLOAT32, huge, 3) == CNML_STATUS_UNSUPPORTED);
  OK(cnmlCreateTensor(&t, CNML_TENSOR, CNML_DATA_FLOAT16, dims, 4));
  size_t bytes = 0;
  OK(cnmlGetTensorSize(t, &bytes));
  CHECK(bytes == 2 * 3 * 4 * 5 * 2);
  /* Data is bound to filters and constants only. */
  cnmlCpuTensor_t cpu = NULL;
  OK(cnmlCreateCpuTensor(&cpu, CNML_TENSOR, CNML_DATA_FLOAT32, dims, 4));
  float values[120] = {0};
  CHECK(cnmlBindConstData(t, cpu, values) == CNML_STATUS_INVALIDARG);
  cnmlDestroyTensor(&t);
  CHECK(t == NULL);
  int64_t other[1] = {7};
  OK(cnmlCreateTensor(&t, CNML_CONST, CNML_DATA_FLOAT32, other, 1));
  CHECK(cnmlBindConstData(t, cpu, values) == CNML_STATUS_INVALIDARG); /* 120 != 7 elements */
  cnmlDestroyTensor(&t);
  cnmlDestroyCpuTensor(&cpu);
}

/* A conv op with its tensors, for the lifecycle tests. */
typedef struct conv_op {
  cnmlTensor_t in, out, filter, bias;
  cnmlConvOpParam_t param;
  cnmlBaseOp_t op;
} conv_op;

static conv_op make_conv(const conv_case *k, const float *w, const float *b) {
  conv_op c;
  memset(&c, 0, sizeof c);
  int64_t in_dims[4] = {k->n, k->c, k->h, k->w};
  int64_t out_dims[4] = {k->n, k->f, conv_out(k->h, k->kh, k->sh, k->ph, k->dh),
                         conv_out(k->w, k->kw, k->sw, k->pw, k->dw)};
  int64_t filter_dims[4] = {k->f, k->c / k->groups, k->kh, k->kw};
  c.in = make_tensor(CNML_TENSOR, 4, in_dims);
  c.out = make_tensor(CNML_TENSOR, 4, out_dims);
  c.filter = make_tensor(CNML_FILTER, 4, filter_dims);
  if (w != NULL) bind(c.filter, w);
  if (k->bias) {
    c.bias = make_tensor(CNML_CONST, 1, &k->f);
    if (b != NULL) bind(c.bias, b);
  }
  OK(cnmlCreateConvOpParam(&c.param, (int)k->sh, (int)k->sw, (int)k->dh, (int)k->dw, (int)k->ph,
                           (int)k->pw));
  OK(cnmlCreateConvGroupOp(&c.op, c.param, c.in, c.out, c.filter, c.bias, (int)k->groups));
  return c;
}

static void free_conv(conv_op *c) {
  OK(cnmlDestroyBaseOp(&c->op));
  cnmlDestroyConvOpParam(&c->param);
  cnmlDestroyTensor(&c->in);
  cnmlDestroyTensor(&c->out);
  cnmlDestroyTensor(&c->filter);
  cnmlDestroyTensor(&c->bias);
}

static void test_buffers_exist_only_after_compile(cnrtDev_t dev) {
  conv_case k = {1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  float w[54], b[3];
  fill(w, 54, 1);
  fill(b, 3, 2);
  conv_op c = make_conv(&k, w, NULL); /* bias not bound yet */
  void *buffer = NULL;
  CHECK(cnmlMallocBuffer(c.in, &buffer) == CNML_STATUS_STATE);
  CHECK(strstr(cnmlGetLastError(), "only after compilation") != NULL);
  CHECK(cnmlMallocBuffer(c.filter, &buffer) == CNML_STATUS_INVALIDARG);
  CHECK(cnmlCompileBaseOp(c.op, dev) == CNML_STATUS_STATE); /* the bias has no data */
  bind(c.bias, b);
  OK(cnmlCompileBaseOp(c.op, dev));
  OK(cnmlMallocBuffer(c.in, &buffer));
  CHECK(buffer != NULL);
  OK(cnmlFreeBuffer(c.in, buffer));
  CHECK(cnmlFreeBuffer(c.in, buffer) == CNML_STATUS_NOTFOUND); /* twice */
  mlu_program_info info;
  OK(cnmlSimGetBaseOpInfo(c.op, &info));
  CHECK(info.kernels == 1 && info.by_opcode[MLU_OP_CONV] >= 1 && info.by_opcode[MLU_OP_SYNC] == 1);
  CHECK(info.const_bytes >= 57 * sizeof(float));
  free_conv(&c);
}

/* Runs one compiled conv on card dev and returns its output. */
static void run_conv(cnrtDev_t dev, const conv_case *k, const float *x, const float *w,
                     const float *b, float *y) {
  conv_op c = make_conv(k, w, b);
  cnrtQueue_t queue = NULL;
  OK(cnrtCreateQueue(&queue, dev));
  OK(cnmlCompileBaseOp(c.op, dev));
  void *in = upload(c.in, x), *out = upload(c.out, NULL);
  OK(cnmlComputeConvOpForward(c.op, in, out, queue));
  OK(cnrtSyncQueue(queue));
  download(c.out, out, y);
  OK(cnmlFreeBuffer(c.in, in));
  OK(cnmlFreeBuffer(c.out, out));
  OK(cnrtDestroyQueue(queue));
  free_conv(&c);
}

static void test_conv_numerics(cnrtDev_t dev, cnrtDev_t tiny) {
  const conv_case cases[] = {
      {2, 3, 9, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  /* plain 3x3, pad 1 */
      {1, 4, 11, 10, 6, 3, 2, 2, 3, 1, 0, 1, 1, 2, 1}, /* groups, strides, odd kernel */
      {1, 6, 12, 12, 6, 3, 3, 1, 1, 2, 2, 2, 2, 6, 0}, /* depthwise, dilated, no bias */
      {1, 5, 7, 7, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1},  /* 1x1 */
      {1, 2, 3, 3, 2, 3, 3, 2, 2, 3, 3, 1, 1, 1, 1},  /* padding larger than the kernel reach */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const conv_case *k = &cases[i];
    int64_t oh = conv_out(k->h, k->kh, k->sh, k->ph, k->dh);
    int64_t ow = conv_out(k->w, k->kw, k->sw, k->pw, k->dw);
    int64_t nx = k->n * k->c * k->h * k->w, nw = k->f * k->c / k->groups * k->kh * k->kw;
    int64_t ny = k->n * k->f * oh * ow;
    float *x = malloc((size_t)nx * sizeof(float)), *w = malloc((size_t)nw * sizeof(float));
    float b[16], *y = malloc((size_t)ny * sizeof(float));
    float *y_tiled = malloc((size_t)ny * sizeof(float));
    double *want = malloc((size_t)ny * sizeof(double));
    fill(x, nx, 10 + (unsigned)i);
    fill(w, nw, 20 + (unsigned)i);
    fill(b, 16, 30 + (unsigned)i);
    conv_reference(k, x, w, k->bias ? b : NULL, want);
    run_conv(dev, k, x, w, b, y);
    run_conv(tiny, k, x, w, b, y_tiled);
    CHECK(max_rel_error(y, want, ny) < 1e-5);
    CHECK(same_floats(y, y_tiled, ny)); /* tiling changes no result bit */
    free(x);
    free(w);
    free(y);
    free(y_tiled);
    free(want);
  }
}

/* conv -> batch norm -> relu, fused and imperative. */
typedef struct bn_net {
  conv_op conv;
  cnmlTensor_t bn_out, act_out, mean, var, gamma, beta;
  cnmlBaseOp_t bn, act;
} bn_net;

static bn_net make_bn_net(const conv_case *k, const float *w, const float *b, const float *stats) {
  bn_net net;
  net.conv = make_conv(k, w, b);
  cnmlTensor_t out = net.conv.out;
  net.bn_out = make_tensor(CNML_TENSOR, 4, out->dims);
  net.act_out = make_tensor(CNML_TENSOR, 4, out->dims);
  cnmlTensor_t *vectors[] = {&net.mean, &net.var, &net.gamma, &net.beta};
  for (int v = 0; v < 4; ++v) {
    *vectors[v] = make_tensor(CNML_CONST, 1, &k->f);
    bind(*vectors[v], stats + v * k->f);
  }
  OK(cnmlCreateBatchNormOp(&net.bn, out, net.bn_out, net.mean, net.var, net.gamma, net.beta, 1e-3));
  OK(cnmlCreateActiveOp(&net.act, CNML_ACTIVE_RELU, net.bn_out, net.act_out));
  return net;
}

static void free_bn_net(bn_net *net) {
  OK(cnmlDestroyBaseOp(&net->bn));
  OK(cnmlDestroyBaseOp(&net->act));
  cnmlTensor_t *tensors[] = {&net->bn_out, &net->act_out, &net->mean, &net->var, &net->gamma,
                             &net->beta};
  for (int i = 0; i < 6; ++i) cnmlDestroyTensor(tensors[i]);
  free_conv(&net->conv);
}

static void test_batchnorm_folding(cnrtDev_t dev) {
  conv_case k = {1, 3, 10, 10, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  float x[300], w[108], b[4], stats[16];
  fill(x, 300, 3);
  fill(w, 108, 4);
  fill(b, 4, 5);
  fill(stats, 16, 6);
  for (int i = 4; i < 8; ++i) stats[i] = fabsf(stats[i]) + 0.5f; /* variances */
  double want[400];
  conv_reference(&k, x, w, b, want);
  for (int i = 0; i < 400; ++i) {
    int f = (i / 100) % 4;
    double v = (want[i] - stats[f]) / sqrt((double)stats[4 + f] + 1e-3) * stats[8 + f] +
               stats[12 + f];
    want[i] = v > 0 ? v : 0;
  }
  cnrtQueue_t queue = NULL;
  OK(cnrtCreateQueue(&queue, dev));
  float fused[400], imperative[400];
  mlu_stats before, after_fused, after_imperative;

  bn_net net = make_bn_net(&k, w, b, stats);
  cnmlFusionOp_t fusion = NULL;
  OK(cnmlCreateFusionOp(&fusion));
  OK(cnmlFuseOp(net.conv.op, fusion));
  OK(cnmlFuseOp(net.bn, fusion));
  OK(cnmlFuseOp(net.act, fusion));
  CHECK(cnmlFuseOp(net.act, fusion) == CNML_STATUS_STATE);
  CHECK(cnmlCompileBaseOp(net.act, dev) == CNML_STATUS_STATE);
  CHECK(cnmlDestroyBaseOp(&net.act) == CNML_STATUS_STATE);
  OK(cnmlSetFusionIO(fusion, &net.conv.in, 1, &net.act_out, 1));
  OK(cnmlCompileFusionOp(fusion, dev));
  mlu_program_info info;
  OK(cnmlSimGetFusionOpInfo(fusion, &info));
  CHECK(info.folded_batchnorms == 1);
  CHECK(info.fused_epilogues == 1);
  CHECK(info.kernels == 1);
  CHECK(info.by_opcode[MLU_OP_EWISE] == 0); /* batch norm and relu left no instruction */
  void *in = upload(net.conv.in, x), *out = upload(net.act_out, NULL);
  const void *ins[1] = {in};
  void *outs[1] = {out};
  OK(cnrtSimGetStats(dev, &before));
  OK(cnmlComputeFusionOpForward(fusion, ins, 1, outs, 1, queue));
  OK(cnrtSyncQueue(queue));
  OK(cnrtSimGetStats(dev, &after_fused));
  download(net.act_out, out, fused);
  CHECK(max_rel_error(fused, want, 400) < 1e-5);
  OK(cnmlFreeBuffer(net.conv.in, in));
  OK(cnmlFreeBuffer(net.act_out, out));
  OK(cnmlDestroyFusionOp(&fusion));
  free_bn_net(&net);

  /* The same three ops, compiled and run one by one. */
  net = make_bn_net(&k, w, b, stats);
  OK(cnmlCompileBaseOp(net.conv.op, dev));
  OK(cnmlCompileBaseOp(net.bn, dev));
  OK(cnmlCompileBaseOp(net.act, dev));
  OK(cnmlSimGetBaseOpInfo(net.bn, &info));
  CHECK(info.by_opcode[MLU_OP_EWISE] >= 1 && info.folded_batchnorms == 0);
  in = upload(net.conv.in, x);
  void *mid1 = upload(net.conv.out, NULL), *mid2 = upload(net.bn_out, NULL);
  out = upload(net.act_out, NULL);
  OK(cnmlComputeConvOpForward(net.conv.op, in, mid1, queue));
  OK(cnmlComputeBatchNormOpForward(net.bn, mid1, mid2, queue));
  OK(cnmlComputeActiveOpForward(net.act, mid2, out, queue));
  OK(cnrtSyncQueue(queue));
  OK(cnrtSimGetStats(dev, &after_imperative));
  download(net.act_out, out, imperative);
  CHECK(max_rel_error(imperative, want, 400) < 1e-5);
  CHECK(after_fused.launches - before.launches == 1);
  CHECK(after_imperative.launches - after_fused.launches == 3);
  CHECK(after_fused.dram_bytes - before.dram_bytes <
        after_imperative.dram_bytes - after_fused.dram_bytes);
  CHECK(after_fused.sim_time_ns - before.sim_time_ns <
        after_imperative.sim_time_ns - after_fused.sim_time_ns);
  OK(cnmlFreeBuffer(net.conv.in, in));
  OK(cnmlFreeBuffer(net.conv.out, mid1));
  OK(cnmlFreeBuffer(net.bn_out, mid2));
  OK(cnmlFreeBuffer(net.act_out, out));
  free_bn_net(&net);
  OK(cnrtDestroyQueue(queue));
}

/* ---- a small network: every op kind, fused and one op at a time ---------------------------- */

typedef struct net {
  cnmlTensor_t tensors[64];
  int num_tensors;
  cnmlBaseOp_t ops[32];
  int num_ops;
  cnmlConvOpParam_t conv_params[8];
  int num_conv_params;
  cnmlPoolOpParam_t pool_params[4];
  int num_pool_params;
  cnmlTensor_t input, outputs[2];
} net;

static cnmlTensor_t net_tensor(net *n, cnmlTensorType_t type, int ndim, const int64_t *dims,
                               unsigned seed) {
  cnmlTensor_t t = make_tensor(type, ndim, dims);
  if (type != CNML_TENSOR) {
    int64_t count = count_of(dims, ndim);
    float *values = malloc((size_t)count * sizeof(float));
    fill(values, count, seed);
    bind(t, values);
    free(values);
  }
  n->tensors[n->num_tensors++] = t;
  return t;
}

static cnmlTensor_t net_conv(net *n, cnmlTensor_t in, int64_t filters, int64_t kernel, int64_t pad,
                             int bias, unsigned seed) {
  int64_t out_dims[4] = {in->dims[0], filters, in->dims[2] + 2 * pad - kernel + 1,
                         in->dims[3] + 2 * pad - kernel + 1};
  int64_t filter_dims[4] = {filters, in->dims[1], kernel, kernel};
  cnmlTensor_t out = net_tensor(n, CNML_TENSOR, 4, out_dims, 0);
  cnmlTensor_t filter = net_tensor(n, CNML_FILTER, 4, filter_dims, seed);
  cnmlTensor_t b = bias ? net_tensor(n, CNML_CONST, 1, &filters, seed + 1) : NULL;
  cnmlConvOpParam_t *param = &n->conv_params[n->num_conv_params++];
  OK(cnmlCreateConvOpParam(param, 1, 1, 1, 1, (int)pad, (int)pad));
  OK(cnmlCreateConvOp(&n->ops[n->num_ops++], *param, in, out, filter, b));
  return out;
}

static cnmlTensor_t net_unary(net *n, cnmlTensor_t in, int kind) {
  cnmlTensor_t out = net_tensor(n, CNML_TENSOR, in->ndim, in->dims, 0);
  cnmlBaseOp_t *op = &n->ops[n->num_ops++];
  if (kind == MLU_ACT_CLIP) OK(cnmlCreateClipOp(op, in, out, -0.5, 1.0));
  else OK(cnmlCreateActiveOp(op, (cnmlActiveFunction_t)kind, in, out));
  return out;
}

static cnmlTensor_t net_pool(net *n, cnmlTensor_t in, int kernel, int stride, int pad,
                             cnmlPoolMode_t mode, cnmlPoolStrategyMode_t strategy, int include) {
  int64_t room = in->dims[2] + 2 * pad - kernel;
  int64_t size = (strategy == CNML_POOL_KFULL ? (room + stride - 1) / stride : room / stride) + 1;
  int64_t dims[4] = {in->dims[0], in->dims[1], size, size};
  cnmlTensor_t out = net_tensor(n, CNML_TENSOR, 4, dims, 0);
  cnmlPoolOpParam_t *param = &n->pool_params[n->num_pool_params++];
  OK(cnmlCreatePoolOpParam(param, kernel, kernel, stride, stride, pad, pad, mode, strategy,
                           include));
  OK(cnmlCreatePoolOp(&n->ops[n->num_ops++], *param, in, out));
  return out;
}

/* x (1,4,8,8) -> fire module (squeeze, two expands, concat) -> residual
 * block (conv, batch norm, add, clip -0.5..1) -> square (mult) -> max pool ->
 * avg pool (full, padding excluded) -> flatten -> fully connected ->
 * softmax and sigmoid (two outputs; the fc result has two readers). */
static void build_net(net *n) {
  memset(n, 0, sizeof *n);
  int64_t in_dims[4] = {1, 4, 8, 8};
  n->input = net_tensor(n, CNML_TENSOR, 4, in_dims, 0);
  cnmlTensor_t squeeze = net_unary(n, net_conv(n, n->input, 3, 1, 0, 1, 100), MLU_ACT_RELU);
  cnmlTensor_t e1 = net_unary(n, net_conv(n, squeeze, 4, 1, 0, 1, 110), MLU_ACT_RELU);
  cnmlTensor_t e3 = net_unary(n, net_conv(n, squeeze, 4, 3, 1, 1, 120), MLU_ACT_TANH);
  int64_t cat_dims[4] = {1, 8, 8, 8};
  cnmlTensor_t cat = net_tensor(n, CNML_TENSOR, 4, cat_dims, 0);
  cnmlTensor_t parts[2] = {e1, e3};
  OK(cnmlCreateConcatOp(&n->ops[n->num_ops++], 1, parts, 2, cat));
  cnmlTensor_t body = net_conv(n, cat, 8, 3, 1, 0, 130);
  int64_t eight = 8;
  cnmlTensor_t bn_out = net_tensor(n, CNML_TENSOR, 4, cat_dims, 0);
  cnmlTensor_t mean = net_tensor(n, CNML_CONST, 1, &eight, 140);
  cnmlTensor_t var = net_tensor(n, CNML_CONST, 1, &eight, 0);
  float variances[8] = {0.5f, 1.0f, 1.5f, 2.0f, 0.25f, 0.75f, 1.25f, 3.0f};
  bind(var, variances);
  cnmlTensor_t beta = net_tensor(n, CNML_CONST, 1, &eight, 150);
  OK(cnmlCreateBatchNormOp(&n->ops[n->num_ops++], body, bn_out, mean, var, NULL, beta, 1e-5));
  cnmlTensor_t sum = net_tensor(n, CNML_TENSOR, 4, cat_dims, 0);
  OK(cnmlCreateAddOp(&n->ops[n->num_ops++], cat, bn_out, sum));
  cnmlTensor_t clipped = net_unary(n, sum, MLU_ACT_CLIP);
  cnmlTensor_t squared = net_tensor(n, CNML_TENSOR, 4, cat_dims, 0);
  OK(cnmlCreateMultOp(&n->ops[n->num_ops++], clipped, clipped, squared));
  cnmlTensor_t pooled = net_pool(n, squared, 2, 2, 0, CNML_POOL_MAX, CNML_POOL_KVALID, 1);
  cnmlTensor_t avg = net_pool(n, pooled, 3, 2, 1, CNML_POOL_AVG, CNML_POOL_KFULL, 0);
  int64_t flat_dims[2] = {1, avg->count};
  cnmlTensor_t flat = net_tensor(n, CNML_TENSOR, 2, flat_dims, 0);
  OK(cnmlCreateReshapeOp(&n->ops[n->num_ops++], avg, flat));
  int64_t fc_dims[2] = {1, 10}, w_dims[2] = {10, avg->count}, ten = 10;
  cnmlTensor_t fc = net_tensor(n, CNML_TENSOR, 2, fc_dims, 0);
  cnmlTensor_t fc_w = net_tensor(n, CNML_FILTER, 2, w_dims, 160);
  cnmlTensor_t fc_b = net_tensor(n, CNML_CONST, 1, &ten, 170);
  OK(cnmlCreateMlpOp(&n->ops[n->num_ops++], flat, fc, fc_w, fc_b));
  n->outputs[0] = net_tensor(n, CNML_TENSOR, 2, fc_dims, 0);
  OK(cnmlCreateSoftmaxOp(&n->ops[n->num_ops++], -1, 1.0, fc, n->outputs[0]));
  n->outputs[1] = net_unary(n, fc, MLU_ACT_SIGMOID);
}

static void free_net(net *n) {
  for (int i = 0; i < n->num_ops; ++i) OK(cnmlDestroyBaseOp(&n->ops[i]));
  for (int i = 0; i < n->num_tensors; ++i) cnmlDestroyTensor(&n->tensors[i]);
  for (int i = 0; i < n->num_conv_params; ++i) cnmlDestroyConvOpParam(&n->conv_params[i]);
  for (int i = 0; i < n->num_pool_params; ++i) cnmlDestroyPoolOpParam(&n->pool_params[i]);
}

static void run_fused(cnrtDev_t dev, const float *x, float *out0, float *out1,
                      mlu_program_info *info) {
  net n;
  build_net(&n);
  cnmlFusionOp_t fusion = NULL;
  OK(cnmlCreateFusionOp(&fusion));
  for (int i = n.num_ops; i-- > 0;) OK(cnmlFuseOp(n.ops[i], fusion)); /* any order works */
  OK(cnmlSetFusionIO(fusion, &n.input, 1, n.outputs, 2));
  OK(cnmlCompileFusionOp(fusion, dev));
  OK(cnmlSimGetFusionOpInfo(fusion, info));
  cnrtQueue_t queue = NULL;
  OK(cnrtCreateQueue(&queue, dev));
  void *in = upload(n.input, x), *o0 = upload(n.outputs[0], NULL), *o1 = upload(n.outputs[1], NULL);
  const void *ins[1] = {in};
  void *outs[2] = {o0, o1};
  OK(cnmlComputeFusionOpForward(fusion, ins, 1, outs, 2, queue));
  OK(cnrtSyncQueue(queue));
  download(n.outputs[0], o0, out0);
  download(n.outputs[1], o1, out1);
  OK(cnmlFreeBuffer(n.input, in));
  OK(cnmlFreeBuffer(n.outputs[0], o0));
  OK(cnmlFreeBuffer(n.outputs[1], o1));
  OK(cnrtDestroyQueue(queue));
  OK(cnmlDestroyFusionOp(&fusion));
  free_net(&n);
}

static void *buffer_of(net *n, void **buffers, cnmlTensor_t t) {
  for (int i = 0; i < n->num_tensors; ++i) {
    if (n->tensors[i] == t) return buffers[i];
  }
  return NULL;
}

static void run_imperative(cnrtDev_t dev, const float *x, float *out0, float *out1) {
  net n;
  build_net(&n);
  for (int i = 0; i < n.num_ops; ++i) OK(cnmlCompileBaseOp(n.ops[i], dev));
  void *buffers[64] = {NULL};
  for (int i = 0; i < n.num_tensors; ++i) {
    if (n.tensors[i]->type == CNML_TENSOR) buffers[i] = upload(n.tensors[i], NULL);
  }
  cnmlCpuTensor_t cpu = NULL;
  OK(cnmlCreateCpuTensor(&cpu, CNML_TENSOR, CNML_DATA_FLOAT32, n.input->dims, 4));
  OK(cnmlMemcpyTensorToDevice(cpu, x, n.input, buffer_of(&n, buffers, n.input)));
  cnmlDestroyCpuTensor(&cpu);
  cnrtQueue_t queue = NULL;
  OK(cnrtCreateQueue(&queue, dev));
  for (int i = 0; i < n.num_ops; ++i) {
    const void *ins[MLU_MAX_OP_INPUTS];
    for (int j = 0; j < n.ops[i]->num_inputs; ++j) {
      ins[j] = buffer_of(&n, buffers, n.ops[i]->inputs[j]);
    }
    OK(cnmlComputeBaseOpForward(n.ops[i], ins, n.ops[i]->num_inputs,
                                buffer_of(&n, buffers, n.ops[i]->output), queue));
  }
  OK(cnrtSyncQueue(queue)); /* FIFO: each op saw its producers' results */
  download(n.outputs[0], buffer_of(&n, buffers, n.outputs[0]), out0);
  download(n.outputs[1], buffer_of(&n, buffers, n.outputs[1]), out1);
  for (int i = 0; i < n.num_tensors; ++i) {
    if (buffers[i] != NULL) OK(cnmlFreeBuffer(n.tensors[i], buffers[i]));
  }
  OK(cnrtDestroyQueue(queue));
  free_net(&n);
}

static void test_network(cnrtDev_t dev, cnrtDev_t tiny) {
  float x[256], fused[2][10], imperative[2][10], tiled[2][10];
  fill(x, 256, 99);
  mlu_program_info info, tiny_info;
  run_fused(dev, x, fused[0], fused[1], &info);
  run_imperative(dev, x, imperative[0], imperative[1]);
  run_fused(tiny, x, tiled[0], tiled[1], &tiny_info);
  double want[10];
  for (int o = 0; o < 2; ++o) {
    for (int i = 0; i < 10; ++i) want[i] = imperative[o][i];
    CHECK(max_rel_error(fused[o], want, 10) < 1e-5);
    CHECK(same_floats(fused[o], tiled[o], 10));
  }
  double total = 0;
  for (int i = 0; i < 10; ++i) total += fused[0][i];
  CHECK(fabs(total - 1.0) < 1e-5);
  /* 4 convs (one with the batch norm, residual add and clip fused in), the
   * square, 2 pools, concat, fc, softmax, sigmoid; the reshape is free. */
  CHECK(info.folded_batchnorms == 1);
  CHECK(info.fused_epilogues == 5); /* 3 activations into convs, add, clip */
  CHECK(info.aliased_values == 1);
  CHECK(info.kernels == 11);
  CHECK(info.resident_values > 0);
  CHECK(info.spilled_values == 0);
  CHECK(tiny_info.resident_values == 0 || tiny_info.spilled_values > 0);
  CHECK(tiny_info.sram_words <= 1024);
}

/* ---- pooling, fully connected, softmax against references -------------------------------- */

typedef struct pool_case {
  int kernel, stride, pad;
  cnmlPoolMode_t mode;
  cnmlPoolStrategyMode_t strategy;
  int include_pad;
} pool_case;

/* MXNet's pooling windows: start/end include padding (end capped at
 * size + pad), lo/hi are clipped to the data. */
static double pool_reference_one(const float *plane, int h, int w, const pool_case *p, int oy,
                                 int ox) {
  int ys = oy * p->stride - p->pad, xs = ox * p->stride - p->pad;
  int ye = ys + p->kernel < h + p->pad ? ys + p->kernel : h + p->pad;
  int xe = xs + p->kernel < w + p->pad ? xs + p->kernel : w + p->pad;
  int ylo = ys > 0 ? ys : 0, xlo = xs > 0 ? xs : 0, yhi = ye < h ? ye : h, xhi = xe < w ? xe : w;
  double best = -INFINITY, sum = 0.0;
  for (int y = ylo; y < yhi; ++y) {
    for (int x = xlo; x < xhi; ++x) {
      double v = plane[y * w + x];
      sum += v;
      if (v > best) best = v;
    }
  }
  if (p->mode == CNML_POOL_MAX) return best;
  double divisor = p->include_pad ? (double)(ye - ys) * (xe - xs)
                                  : (double)(yhi - ylo) * (xhi - xlo);
  return sum / divisor;
}

static void run_pool(cnrtDev_t dev, const pool_case *p, const float *x, float *y,
                     int64_t *out_size) {
  int64_t in_dims[4] = {2, 3, 7, 7};
  int64_t room = 7 + 2 * p->pad - p->kernel;
  int64_t size = (p->strategy == CNML_POOL_KFULL ? (room + p->stride - 1) / p->stride
                                                 : room / p->stride) + 1;
  int64_t out_dims[4] = {2, 3, size, size};
  cnmlTensor_t in = make_tensor(CNML_TENSOR, 4, in_dims);
  cnmlTensor_t out = make_tensor(CNML_TENSOR, 4, out_dims);
  cnmlPoolOpParam_t param = NULL;
  cnmlBaseOp_t op = NULL;
  OK(cnmlCreatePoolOpParam(&param, p->kernel, p->kernel, p->stride, p->stride, p->pad, p->pad,
                           p->mode, p->strategy, p->include_pad));
  OK(cnmlCreatePoolOp(&op, param, in, out));
  OK(cnmlCompileBaseOp(op, dev));
  cnrtQueue_t queue = NULL;
  OK(cnrtCreateQueue(&queue, dev));
  void *din = upload(in, x), *dout = upload(out, NULL);
  OK(cnmlComputePoolOpForward(op, din, dout, queue));
  OK(cnrtSyncQueue(queue));
  download(out, dout, y);
  *out_size = size;
  OK(cnmlFreeBuffer(in, din));
  OK(cnmlFreeBuffer(out, dout));
  OK(cnrtDestroyQueue(queue));
  OK(cnmlDestroyBaseOp(&op));
  cnmlDestroyPoolOpParam(&param);
  cnmlDestroyTensor(&in);
  cnmlDestroyTensor(&out);
}

static void test_pool_numerics(cnrtDev_t dev, cnrtDev_t tiny) {
  const pool_case cases[] = {
      {2, 2, 0, CNML_POOL_MAX, CNML_POOL_KVALID, 1},
      {3, 2, 1, CNML_POOL_AVG, CNML_POOL_KFULL, 1},
      {3, 2, 1, CNML_POOL_AVG, CNML_POOL_KFULL, 0},
      {3, 2, 1, CNML_POOL_MAX, CNML_POOL_KFULL, 1},
      {7, 1, 0, CNML_POOL_AVG, CNML_POOL_KVALID, 1}, /* global */
  };
  float x[294];
  fill(x, 294, 77);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    float y[2 * 3 * 8 * 8], y_tiled[2 * 3 * 8 * 8];
    double want[2 * 3 * 8 * 8];
    int64_t size = 0, tiled_size = 0;
    run_pool(dev, &cases[i], x, y, &size);
    run_pool(tiny, &cases[i], x, y_tiled, &tiled_size);
    for (int plane = 0; plane < 6; ++plane) {
      for (int oy = 0; oy < size; ++oy) {
        for (int ox = 0; ox < size; ++ox) {
          want[(plane * size + oy) * size + ox] =
              pool_reference_one(x + plane * 49, 7, 7, &cases[i], oy, ox);
        }
      }
    }
    CHECK(max_rel_error(y, want, 6 * size * size) < 1e-6);
    CHECK(size == tiled_size && same_floats(y, y_tiled, 6 * size * size));
  }
}

static void test_mlp_softmax(cnrtDev_t dev) {
  int64_t in_dims[3] = {3, 2, 5}, w_dims[2] = {4, 5}, out_dims[3] = {3, 2, 4}, four = 4;
  cnmlTensor_t in = make_tensor(CNML_TENSOR, 3, in_dims);
  cnmlTensor_t out = make_tensor(CNML_TENSOR, 3, out_dims);
  cnmlTensor_t prob = make_tensor(CNML_TENSOR, 3, out_dims);
  cnmlTensor_t w = make_tensor(CNML_FILTER, 2, w_dims), b = make_tensor(CNML_CONST, 1, &four);
  float x[30], wv[20], bv[4], y[24], p[24];
  fill(x, 30, 1);
  fill(wv, 20, 2);
  fill(bv, 4, 3);
  bind(w, wv);
  bind(b, bv);
  cnmlBaseOp_t mlp = NULL, softmax = NULL;
  int64_t bad_dims[2] = {4, 7};
  cnmlTensor_t bad = make_tensor(CNML_FILTER, 2, bad_dims);
  CHECK(cnmlCreateMlpOp(&mlp, in, out, bad, b) == CNML_STATUS_INVALIDARG); /* K = 7 */
  cnmlDestroyTensor(&bad);
  OK(cnmlCreateMlpOp(&mlp, in, out, w, b));
  CHECK(cnmlCreateSoftmaxOp(&softmax, 3, 1.0, out, prob) == CNML_STATUS_INVALIDARG);
  OK(cnmlCreateSoftmaxOp(&softmax, 1, 2.0, out, prob)); /* axis 1 of (3, 2, 4), temperature 2 */
  OK(cnmlCompileBaseOp(mlp, dev));
  OK(cnmlCompileBaseOp(softmax, dev));
  cnrtQueue_t queue = NULL;
  OK(cnrtCreateQueue(&queue, dev));
  void *din = upload(in, x), *dout = upload(out, NULL), *dprob = upload(prob, NULL);
  OK(cnmlComputeMlpOpForward(mlp, din, dout, queue));
  CHECK(cnmlComputeConvOpForward(softmax, dout, dprob, queue) == CNML_STATUS_INVALIDARG);
  OK(cnmlComputeSoftmaxOpForward(softmax, dout, dprob, queue));
  OK(cnrtSyncQueue(queue));
  download(out, dout, y);
  download(prob, dprob, p);
  double want_y[24], want_p[24];
  for (int r = 0; r < 6; ++r) {
    for (int m = 0; m < 4; ++m) {
      double sum = bv[m];
      for (int k = 0; k < 5; ++k) sum += (double)x[r * 5 + k] * wv[m * 5 + k];
      want_y[r * 4 + m] = sum;
    }
  }
  for (int o = 0; o < 3; ++o) {
    for (int i = 0; i < 4; ++i) {
      double a = y[(o * 2 + 0) * 4 + i] / 2.0, c = y[(o * 2 + 1) * 4 + i] / 2.0;
      double top = a > c ? a : c, total = exp(a - top) + exp(c - top);
      want_p[(o * 2 + 0) * 4 + i] = exp(a - top) / total;
      want_p[(o * 2 + 1) * 4 + i] = exp(c - top) / total;
    }
  }
  CHECK(max_rel_error(y, want_y, 24) < 1e-6);
  CHECK(max_rel_error(p, want_p, 24) < 1e-6);
  OK(cnmlFreeBuffer(in, din));
  OK(cnmlFreeBuffer(out, dout));
  OK(cnmlFreeBuffer(prob, dprob));
  OK(cnrtDestroyQueue(queue));
  OK(cnmlDestroyBaseOp(&mlp));
  OK(cnmlDestroyBaseOp(&softmax));
  cnmlTensor_t *tensors[] = {&in, &out, &prob, &w, &b};
  for (int i = 0; i < 5; ++i) cnmlDestroyTensor(tensors[i]);
}

/* ---- int8 (precision=int8) ----------------------------------------------------------------- */

/* The quantization arithmetic of docs/mlu_sim.md ("int8 mode"), written
 * again here from the definition, independently of kernels.c. */
static int ref_quantize(float x, float scale) {
  if (!(scale > 0.0f)) return 0;
  float v = x / scale;
  if (v > 127.0f) v = 127.0f;
  if (v < -127.0f) v = -127.0f;
  return (int)roundf(v);
}

/* Per-output-channel filter scales and int8 filters, MXNet layout. */
static void ref_quantize_filters(const float *w, int64_t filters, int64_t per_filter, float *scale,
                                 int *wq) {
  for (int64_t f = 0; f < filters; ++f) {
    float amax = 0.0f;
    for (int64_t i = 0; i < per_filter; ++i) {
      float a = fabsf(w[f * per_filter + i]);
      if (a > amax) amax = a;
    }
    scale[f] = amax / 127.0f;
    for (int64_t i = 0; i < per_filter; ++i) {
      wq[f * per_filter + i] = ref_quantize(w[f * per_filter + i], scale[f]);
    }
  }
}

/* An int8 convolution computed in one tile per image (the compiler's tiling
 * on a card with the default on-chip memory for the small cases below):
 * the activation scale is max|x| over every channel and the rows [0, hi)
 * the output rows reach. Exact int32 accumulation, then the same fp32
 * dequantization as the machine, so results must match bit for bit. */
static void conv_int8_reference(const conv_case *k, const float *x, const float *w, const float *b,
                                float *y) {
  int64_t oh = conv_out(k->h, k->kh, k->sh, k->ph, k->dh);
  int64_t ow = conv_out(k->w, k->kw, k->sw, k->pw, k->dw);
  int64_t cg = k->c / k->groups, fg = k->f / k->groups, taps = cg * k->kh * k->kw;
  float *wscale = malloc((size_t)k->f * sizeof(float));
  int *wq = malloc((size_t)(k->f * taps) * sizeof(int));
  int *xq = malloc((size_t)(k->c * k->h * k->w) * sizeof(int));
  ref_quantize_filters(w, k->f, taps, wscale, wq);
  int64_t hi = (oh - 1) * k->sh - k->ph + (k->kh - 1) * k->dh + 1;
  if (hi > k->h) hi = k->h;
  for (int64_t n = 0; n < k->n; ++n) {
    const float *image = x + n * k->c * k->h * k->w;
    float amax = 0.0f;
    for (int64_t ch = 0; ch < k->c; ++ch)
      for (int64_t iy = 0; iy < hi; ++iy)
        for (int64_t ix = 0; ix < k->w; ++ix) {
          float a = fabsf(image[(ch * k->h + iy) * k->w + ix]);
          if (a > amax) amax = a;
        }
    float sa = amax / 127.0f;
    for (int64_t i = 0; i < k->c * k->h * k->w; ++i) xq[i] = ref_quantize(image[i], sa);
    for (int64_t f = 0; f < k->f; ++f)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int32_t acc = 0;
          for (int64_t ch = 0; ch < cg; ++ch)
            for (int64_t ky = 0; ky < k->kh; ++ky)
              for (int64_t kx = 0; kx < k->kw; ++kx) {
                int64_t iy = oy * k->sh - k->ph + ky * k->dh, ix = ox * k->sw - k->pw + kx * k->dw;
                if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w) continue;
                int64_t in_ch = f / fg * cg + ch;
                acc += xq[(in_ch * k->h + iy) * k->w + ix] * wq[((f * cg + ch) * k->kh + ky) *
                                                                k->kw + kx];
              }
          float dequant = sa * wscale[f];
          y[((n * k->f + f) * oh + oy) * ow + ox] =
              (float)acc * dequant + (b != NULL ? b[f] : 0.0f);
        }
  }
  free(wscale);
  free(wq);
  free(xq);
}

/* Compiles one conv on card dev, runs it and returns its output, program
 * info and simulated time and DRAM bytes of the launch. */
static void run_conv_measured(cnrtDev_t dev, const conv_case *k, const float *x, const float *w,
                              const float *b, float *y, mlu_program_info *info, double *sim_ns,
                              uint64_t *dram_bytes) {
  mlu_stats before, after;
  OK(cnrtSimGetStats(dev, &before));
  run_conv(dev, k, x, w, b, y);
  OK(cnrtSimGetStats(dev, &after));
  *sim_ns = after.sim_time_ns - before.sim_time_ns;
  *dram_bytes = after.dram_bytes - before.dram_bytes;
  conv_op c = make_conv(k, w, b);
  OK(cnmlCompileBaseOp(c.op, dev));
  OK(cnmlSimGetBaseOpInfo(c.op, info));
  free_conv(&c);
}

static void test_int8_conv(cnrtDev_t dev, cnrtDev_t q, cnrtDev_t q_tiny) {
  const conv_case cases[] = {
      {2, 3, 9, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    /* plain 3x3, pad 1, two images */
      {1, 4, 11, 10, 6, 3, 2, 2, 3, 1, 0, 1, 1, 2, 1},  /* groups, strides: rows left unread */
      {1, 6, 12, 12, 6, 3, 3, 1, 1, 2, 2, 2, 2, 6, 0},  /* depthwise, dilated, no bias */
      {1, 16, 16, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, /* large enough to time */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const conv_case *k = &cases[i];
    int64_t oh = conv_out(k->h, k->kh, k->sh, k->ph, k->dh);
    int64_t ow = conv_out(k->w, k->kw, k->sw, k->pw, k->dw);
    int64_t nx = k->n * k->c * k->h * k->w, nw = k->f * k->c / k->groups * k->kh * k->kw;
    int64_t ny = k->n * k->f * oh * ow;
    float *x = malloc((size_t)nx * sizeof(float)), *w = malloc((size_t)nw * sizeof(float));
    size_t y_size = (size_t)ny * sizeof(float);
    float b[32], *y = malloc(y_size), *want = malloc(y_size);
    float *y_float = malloc(y_size), *y_tiled = malloc(y_size);
    fill(x, nx, 40 + (unsigned)i);
    fill(w, nw, 50 + (unsigned)i);
    fill(b, 32, 60 + (unsigned)i);
    conv_int8_reference(k, x, w, k->bias ? b : NULL, want);
    mlu_program_info info_q, info_f;
    double ns_q, ns_f;
    uint64_t bytes_q, bytes_f;
    run_conv_measured(q, k, x, w, b, y, &info_q, &ns_q, &bytes_q);
    run_conv_measured(dev, k, x, w, b, y_float, &info_f, &ns_f, &bytes_f);
    CHECK(info_q.int8_kernels == 1 && info_f.int8_kernels == 0);
    CHECK(info_q.by_opcode[MLU_OP_CONV] == (size_t)k->n); /* one tile per image */
    CHECK(same_floats(y, want, ny)); /* exact int32 accumulation, same dequantization */
    /* Against fp32: within a few quantization steps of the output's range. */
    double top = 0.0, worst = 0.0;
    for (int64_t j = 0; j < ny; ++j) {
      if (fabs((double)y_float[j]) > top) top = fabs((double)y_float[j]);
      double err = fabs((double)y[j] - (double)y_float[j]);
      if (!(err <= worst)) worst = err;
    }
    CHECK(worst < 0.05 * top);
    /* Filters in int8 (one byte each) plus an fp32 scale per filter. */
    CHECK(info_f.const_bytes - info_q.const_bytes >= (uint64_t)(3 * nw) - 64 - 4 * (uint64_t)k->f);
    if (i == 3) {
      CHECK(ns_q < ns_f && bytes_q < bytes_f);
      printf("int8 conv 16->32 3x3 on 16x16: %.1f ns vs fp32 %.1f ns, %llu vs %llu DRAM bytes\n",
             ns_q, ns_f, (unsigned long long)bytes_q, (unsigned long long)bytes_f);
    }
    /* Tiled into 4 KiB: per-tile activation scales, still close. */
    run_conv(q_tiny, k, x, w, b, y_tiled);
    worst = 0.0;
    for (int64_t j = 0; j < ny; ++j) {
      double err = fabs((double)y_tiled[j] - (double)y_float[j]);
      if (!(err <= worst)) worst = err;
    }
    CHECK(worst < 0.05 * top);
    free(x);
    free(w);
    free(y);
    free(want);
    free(y_float);
    free(y_tiled);
  }
}

/* A fully connected layer (rows x k -> rows x m) on card dev. */
static void run_mlp(cnrtDev_t dev, int64_t rows, int64_t k, int64_t m, const float *x,
                    const float *w, const float *b, float *y, mlu_program_info *info) {
  int64_t in_dims[2] = {rows, k}, w_dims[2] = {m, k}, out_dims[2] = {rows, m};
  cnmlTensor_t in = make_tensor(CNML_TENSOR, 2, in_dims);
  cnmlTensor_t out = make_tensor(CNML_TENSOR, 2, out_dims);
  cnmlTensor_t filter = make_tensor(CNML_FILTER, 2, w_dims), bias = make_tensor(CNML_CONST, 1, &m);
  bind(filter, w);
  bind(bias, b);
  cnmlBaseOp_t mlp = NULL;
  OK(cnmlCreateMlpOp(&mlp, in, out, filter, bias));
  OK(cnmlCompileBaseOp(mlp, dev));
  OK(cnmlSimGetBaseOpInfo(mlp, info));
  cnrtQueue_t queue = NULL;
  OK(cnrtCreateQueue(&queue, dev));
  void *din = upload(in, x), *dout = upload(out, NULL);
  OK(cnmlComputeMlpOpForward(mlp, din, dout, queue));
  OK(cnrtSyncQueue(queue));
  download(out, dout, y);
  OK(cnmlFreeBuffer(in, din));
  OK(cnmlFreeBuffer(out, dout));
  OK(cnrtDestroyQueue(queue));
  OK(cnmlDestroyBaseOp(&mlp));
  cnmlTensor_t *tensors[] = {&in, &out, &filter, &bias};
  for (int i = 0; i < 4; ++i) cnmlDestroyTensor(tensors[i]);
}

static void test_int8_mlp(cnrtDev_t q) {
  enum { kRows = 5, kK = 300, kM = 7 };
  float *x = malloc(kRows * kK * sizeof(float)), *w = malloc(kM * kK * sizeof(float));
  float b[kM], y[kRows * kM], want[kRows * kM], wscale[kM];
  int *wq = malloc(kM * kK * sizeof(int)), xq[kK];
  fill(x, kRows * kK, 71);
  fill(w, kM * kK, 72);
  fill(b, kM, 73);
  x[17] = 3.5f; /* an outlier sets the activation scale */
  mlu_program_info info;
  run_mlp(q, kRows, kK, kM, x, w, b, y, &info);
  CHECK(info.int8_kernels == 1 && info.by_opcode[MLU_OP_MATMUL] == 1);
  ref_quantize_filters(w, kM, kK, wscale, wq);
  float amax = 0.0f;
  for (int i = 0; i < kRows * kK; ++i) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
  float sa = amax / 127.0f;
  for (int r = 0; r < kRows; ++r) {
    for (int i = 0; i < kK; ++i) xq[i] = ref_quantize(x[r * kK + i], sa);
    for (int m = 0; m < kM; ++m) {
      int32_t acc = 0;
      for (int i = 0; i < kK; ++i) acc += xq[i] * wq[m * kK + i];
      want[r * kM + m] = (float)acc * (sa * wscale[m]) + b[m];
    }
  }
  CHECK(same_floats(y, want, kRows * kM));
  /* A NaN in the input block: every result of the instruction is NaN. */
  x[3] = NAN;
  run_mlp(q, kRows, kK, kM, x, w, b, y, &info);
  int all_nan = 1;
  for (int i = 0; i < kRows * kM; ++i) all_nan &= isnan(y[i]) != 0;
  CHECK(all_nan);
  free(x);
  free(w);
  free(wq);
}

/* A reduction longer than int32 accumulates exactly stays in fp32; a NaN
 * filter stays in fp32; precision takes only its two values. */
static void test_int8_limits(cnrtDev_t q) {
  const int64_t k = MLU_INT8_MAX_TAPS + 1;
  float *x = malloc((size_t)k * sizeof(float)), *w = malloc((size_t)(2 * k) * sizeof(float));
  float b[2] = {0.5f, -0.5f}, y[2];
  fill(x, k, 81);
  fill(w, 2 * k, 82);
  mlu_program_info info;
  run_mlp(q, 1, k, 2, x, w, b, y, &info);
  CHECK(info.int8_kernels == 0 && info.const_bytes >= (uint64_t)(2 * k) * sizeof(float));
  double want = b[0];
  for (int64_t i = 0; i < k; ++i) want += (double)x[i] * (double)w[i];
  CHECK(fabs((double)y[0] - want) < 1e-3);
  float w2[6] = {1, 2, NAN, 4, 5, 6}, x2[3] = {1, 1, 1};
  run_mlp(q, 1, 3, 2, x2, w2, b, y, &info);
  CHECK(info.int8_kernels == 0 && isnan(y[0]) && y[1] == 15.0f - 0.5f);
  mlu_params params;
  OK(cnrtSimGetParams(q, &params));
  mlu_params bad = params;
  bad.precision = 2;
  CHECK(cnrtSimSetParams(q, &bad) == CNML_STATUS_INVALIDARG);
  char text[32];
  CHECK(mlu_params_format(&params, "precision", text, sizeof text) == 0 &&
        strcmp(text, "int8") == 0);
  CHECK(mlu_params_set(&bad, "precision", "int4") != 0);
  CHECK(mlu_params_set(&bad, "precision", "fp32") == 0 && bad.precision == MLU_PRECISION_FP32);
  free(x);
  free(w);
}

static void test_fp16(cnrtDev_t dev) {
  conv_case k = {1, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  int64_t in_dims[4] = {1, 3, 6, 6}, out_dims[4] = {1, 4, 6, 6}, w_dims[4] = {4, 3, 3, 3}, four = 4;
  float x[108], w[108], b[4], y[144];
  fill(x, 108, 5);
  fill(w, 108, 6);
  fill(b, 4, 7);
  double want[144];
  conv_reference(&k, x, w, b, want);
  cnmlTensor_t in = NULL, out = NULL, filter = NULL, bias = make_tensor(CNML_CONST, 1, &four);
  OK(cnmlCreateTensor(&in, CNML_TENSOR, CNML_DATA_FLOAT16, in_dims, 4));
  OK(cnmlCreateTensor(&out, CNML_TENSOR, CNML_DATA_FLOAT16, out_dims, 4));
  OK(cnmlCreateTensor(&filter, CNML_FILTER, CNML_DATA_FLOAT16, w_dims, 4));
  bind(filter, w);
  bind(bias, b);
  cnmlConvOpParam_t param = NULL;
  cnmlBaseOp_t op = NULL;
  OK(cnmlCreateConvOpParam(&param, 1, 1, 1, 1, 1, 1));
  OK(cnmlCreateConvOp(&op, param, in, out, filter, bias));
  OK(cnmlCompileBaseOp(op, dev));
  size_t bytes = 0;
  OK(cnmlGetTensorSize(out, &bytes));
  CHECK(bytes == 144 * 2);
  cnrtQueue_t queue = NULL;
  OK(cnrtCreateQueue(&queue, dev));
  void *din = upload(in, x), *dout = upload(out, NULL); /* fp32 host data, fp16 on the card */
  OK(cnmlComputeConvOpForward(op, din, dout, queue));
  OK(cnrtSyncQueue(queue));
  download(out, dout, y);
  double worst = 0.0, largest = 0.0;
  for (int i = 0; i < 144; ++i) {
    worst = fmax(worst, fabs(y[i] - want[i]));
    largest = fmax(largest, fabs(want[i]));
  }
  CHECK(worst < 5e-3 * largest); /* fp16 inputs, filters and outputs */
  mlu_program_info info;
  OK(cnmlSimGetBaseOpInfo(op, &info));
  CHECK(info.const_bytes >= 108 * 2 && info.const_bytes < 108 * 4); /* fp16 filters */
  OK(cnmlFreeBuffer(in, din));
  OK(cnmlFreeBuffer(out, dout));
  OK(cnrtDestroyQueue(queue));
  OK(cnmlDestroyBaseOp(&op));
  cnmlDestroyConvOpParam(&param);
  cnmlTensor_t *tensors[] = {&in, &out, &filter, &bias};
  for (int i = 0; i < 4; ++i) cnmlDestroyTensor(tensors[i]);
}

/* ---- queues ---------------------------------------------------------------------------------- */

typedef struct order_log {
  atomic_int next;
  int seen[100];
} order_log;

typedef struct order_entry {
  order_log *log;
  int id;
} order_entry;

static int record_order(void *user) {
  order_entry *entry = user;
  int slot = atomic_fetch_add(&entry->log->next, 1);
  if (slot < 100) entry->log->seen[slot] = entry->id;
  return 0;
}

static int sleep_200ms(void *user) {
  (void)user;
  usleep(200000);
  return 0;
}

static int fail_with_7(void *user) {
  (void)user;
  return 7;
}

static int set_flag(void *user) {
  atomic_store((atomic_int *)user, 1);
  return 0;
}

static int wait_for_gate(void *user) {
  while (!atomic_load((atomic_int *)user)) usleep(1000);
  return 0;
}

static void test_queue_fifo(cnrtDev_t dev) {
  cnrtQueue_t queue = NULL;
  OK(cnrtCreateQueue(&queue, dev));
  order_log log;
  atomic_init(&log.next, 0);
  order_entry entries[100];
  for (int i = 0; i < 100; ++i) {
    entries[i] = (order_entry){&log, i};
    OK(cnrtSimInvokeHostFunc(queue, record_order, &entries[i]));
  }
  OK(cnrtSyncQueue(queue));
  int in_order = atomic_load(&log.next) == 100;
  for (int i = 0; i < 100 && in_order; ++i) in_order = log.seen[i] == i;
  CHECK(in_order);
  OK(cnrtDestroyQueue(queue));
}

static void test_parallel_queues(cnrtDev_t dev, cnrtDev_t other) {
  cnrtQueue_t a = NULL, b = NULL, c = NULL;
  OK(cnrtCreateQueue(&a, dev));
  OK(cnrtCreateQueue(&b, dev));
  OK(cnrtCreateQueue(&c, other));
  double start = now_seconds();
  OK(cnrtSimInvokeHostFunc(a, sleep_200ms, NULL));
  OK(cnrtSimInvokeHostFunc(b, sleep_200ms, NULL));
  OK(cnrtSimInvokeHostFunc(c, sleep_200ms, NULL));
  OK(cnrtSyncQueue(a));
  OK(cnrtSyncQueue(b));
  OK(cnrtSyncQueue(c));
  double parallel = now_seconds() - start;
  CHECK(parallel < 0.38); /* three 0.2 s tasks on three queues overlap */
  start = now_seconds();
  OK(cnrtSimInvokeHostFunc(a, sleep_200ms, NULL));
  OK(cnrtSimInvokeHostFunc(a, sleep_200ms, NULL));
  OK(cnrtSyncQueue(a));
  CHECK(now_seconds() - start >= 0.39); /* one queue runs them one after the other */
  OK(cnrtDestroyQueue(a));
  OK(cnrtDestroyQueue(b));
  OK(cnrtDestroyQueue(c));
}

static void test_errors_at_sync(cnrtDev_t dev) {
  cnrtQueue_t queue = NULL;
  OK(cnrtCreateQueue(&queue, dev));
  atomic_int skipped, later, gate;
  atomic_init(&skipped, 0);
  atomic_init(&later, 0);
  atomic_init(&gate, 0);
  OK(cnrtSimInvokeHostFunc(queue, fail_with_7, NULL)); /* Forward returns at once... */
  OK(cnrtSimInvokeHostFunc(queue, set_flag, &skipped));
  CHECK(cnrtSyncQueue(queue) == CNML_STATUS_DEVICE); /* ...the sync reports the failure */
  CHECK(strstr(cnmlGetLastError(), "returned 7") != NULL);
  CHECK(atomic_load(&skipped) == 0); /* queued behind the failure: discarded */
  OK(cnrtSimInvokeHostFunc(queue, set_flag, &later));
  OK(cnrtSyncQueue(queue)); /* reported once; the queue works again */
  CHECK(atomic_load(&later) == 1);

  /* A buffer freed while its launch waits in the queue. */
  conv_case k = {1, 8, 16, 16, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}; /* needs more than 4 KiB on chip */
  float x[2048], w[576], b[8];
  fill(x, 2048, 1);
  fill(w, 576, 2);
  fill(b, 8, 3);
  conv_op c = make_conv(&k, w, b);
  OK(cnmlCompileBaseOp(c.op, dev));
  void *in = upload(c.in, x), *out = upload(c.out, NULL);
  OK(cnrtSimInvokeHostFunc(queue, wait_for_gate, &gate));
  OK(cnmlComputeConvOpForward(c.op, in, out, queue));
  OK(cnmlFreeBuffer(c.in, in));
  atomic_store(&gate, 1);
  CHECK(cnrtSyncQueue(queue) == CNML_STATUS_INVALIDARG);
  CHECK(strstr(cnmlGetLastError(), "not live device memory") != NULL);
  CHECK(cnmlComputeConvOpForward(c.op, in, out, queue) == CNML_STATUS_INVALIDARG); /* checked now */

  /* The card's on-chip memory shrinks below what the program was built for. */
  mlu_params params;
  OK(cnrtSimGetParams(dev, &params));
  mlu_params shrunk = params;
  shrunk.sram_bytes = 4096;
  OK(cnrtSimSetParams(dev, &shrunk));
  in = upload(c.in, x);
  OK(cnmlComputeConvOpForward(c.op, in, out, queue));
  CHECK(cnrtSyncQueue(queue) == CNML_STATUS_DEVICE);
  CHECK(strstr(cnmlGetLastError(), "compile it again") != NULL);
  OK(cnmlCompileBaseOp(c.op, dev)); /* tiled for 4 KiB now */
  OK(cnmlComputeConvOpForward(c.op, in, out, queue));
  OK(cnrtSyncQueue(queue));
  OK(cnrtSimSetParams(dev, &params));
  CHECK(cnmlComputeConvOpForward(NULL, in, out, queue) == CNML_STATUS_INVALIDARG);
  OK(cnmlFreeBuffer(c.in, in));
  OK(cnmlFreeBuffer(c.out, out));
  free_conv(&c);
  OK(cnrtDestroyQueue(queue));
}

static void test_out_of_memory(void) {
  mlu_params params = mlu_params_default();
  params.dram_bytes = 1u << 20;
  cnrtDev_t dev = NULL;
  OK(cnrtCreateDevice(&dev, 9, &params));
  void *big = NULL, *blocks[4] = {NULL}, *extra = NULL;
  CHECK(cnrtMalloc(dev, &big, 2u << 20) == CNML_STATUS_NOMEMORY);
  CHECK(strstr(cnmlGetLastError(), "out of device memory") != NULL);
  for (int i = 0; i < 4; ++i) OK(cnrtMalloc(dev, &blocks[i], 200000));
  CHECK(cnrtMalloc(dev, &extra, 300000) == CNML_STATUS_NOMEMORY);
  mlu_params bigger = params;
  bigger.dram_bytes = 2u << 20;
  CHECK(cnrtSimSetParams(dev, &bigger) == CNML_STATUS_STATE); /* memory is in use */
  OK(cnrtFree(dev, blocks[1]));
  OK(cnrtMalloc(dev, &extra, 150000)); /* first fit reuses the hole */
  CHECK(extra == blocks[1]);
  CHECK(cnrtFree(dev, (char *)extra + 64) == CNML_STATUS_NOTFOUND);
  OK(cnrtFree(dev, extra));
  for (int i = 0; i < 4; ++i) {
    if (i != 1) OK(cnrtFree(dev, blocks[i]));
  }
  size_t allocations = 1;
  uint64_t bytes = 1;
  OK(cnrtSimMemoryInUse(dev, &allocations, &bytes));
  CHECK(allocations == 0 && bytes == 0);

  /* A program whose constants do not fit the card. */
  int64_t in_dims[2] = {1, 1024}, w_dims[2] = {512, 1024}, out_dims[2] = {1, 512};
  cnmlTensor_t in = make_tensor(CNML_TENSOR, 2, in_dims);
  cnmlTensor_t out = make_tensor(CNML_TENSOR, 2, out_dims);
  cnmlTensor_t w = make_tensor(CNML_FILTER, 2, w_dims);
  float *values = calloc(512 * 1024, sizeof(float));
  bind(w, values);
  free(values);
  cnmlBaseOp_t op = NULL;
  OK(cnmlCreateMlpOp(&op, in, out, w, NULL));
  CHECK(cnmlCompileBaseOp(op, dev) == CNML_STATUS_NOMEMORY);
  OK(cnrtSimMemoryInUse(dev, &allocations, &bytes));
  CHECK(allocations == 0); /* nothing left behind by the failed compile */
  OK(cnmlDestroyBaseOp(&op));
  cnmlDestroyTensor(&in);
  cnmlDestroyTensor(&out);
  cnmlDestroyTensor(&w);
  OK(cnrtSimSetParams(dev, &bigger)); /* idle again: the arena may be re-created */
  OK(cnrtDestroyDevice(dev));
}


/* ---- the mxnet_acc.h layer, linked directly (LeakSanitizer sees it all) ------------------- */

static const char *configure_one(const char *key, const char *value, const char *answer) {
  const char *const keys[] = {key}, *const vals[] = {value};
  const char *const *out_keys = NULL, *const *out_vals = NULL;
  int count = 0;
  if (configure(keys, vals, 1, 0, &out_keys, &out_vals, &count) != MX_ACC_OK) return NULL;
  for (int i = 0; i < count; ++i) {
    if (strcmp(out_keys[i], answer) == 0) return out_vals[i];
  }
  return NULL;
}

static void test_abi_symbolic_cycles(void) {
  for (int i = 0; i < kNumVars; ++i) fill(var_values[i], 75, 500u + (unsigned)i);
  for (int i = 0; i < 3; ++i) var_values[5][i] = fabsf(var_values[5][i]) + 0.5f; /* variances */
  int ids[32], count = -1;
  CHECK(supportedOps(kGraph, NULL, NULL, 0, 0, ids, 32, &count) == MX_ACC_OK);
  CHECK(count == 8 && ids[0] == 3 && ids[2] == 10 && ids[7] == 17);
  const char *in_use = configure_one("query", "memory", "bytes_in_use");
  char before[32];
  snprintf(before, sizeof before, "%s", in_use ? in_use : "?");
  float first[4] = {0}, changed[4] = {0};
  CHECK(load_model("m", 0) == MX_ACC_OK);
  CHECK(run_model("m", first, -1) == MX_ACC_OK);
  CHECK(fabsf(first[0] + first[1] + first[2] + first[3] - 1.0f) < 1e-5f);
  const char *segments = configure_one("model_info", "m", "segments");
  CHECK(segments != NULL && strcmp(segments, "1") == 0);
  const char *folded = configure_one("model_info", "m", "folded_batchnorms");
  CHECK(folded != NULL && strcmp(folded, "1") == 0);
  CHECK(load_model("m", 0) == MX_ACC_ERR_STATE);
  for (int w = 0; w < 8; ++w) { /* new weight values: rebound, recompiled, used */
    for (int i = 0; i < 75; ++i) var_values[w][i] *= w == 5 ? 2.0f : -1.0f;
    CHECK(run_model("m", changed, w) == MX_ACC_OK);
    CHECK(memcmp(changed, first, sizeof first) != 0);
    for (int i = 0; i < 75; ++i) var_values[w][i] /= w == 5 ? 2.0f : -1.0f;
    CHECK(run_model("m", changed, w) == MX_ACC_OK);
    CHECK(fabsf(changed[0] - first[0]) < 1e-6f && fabsf(changed[3] - first[3]) < 1e-6f);
  }
  CHECK(unloadModel("m") == MX_ACC_OK);
  int clean = 1;
  for (int cycle = 0; cycle < 40 && clean; ++cycle) {
    float again[4];
    clean = load_model("cycle", 0) == MX_ACC_OK && run_model("cycle", again, -1) == MX_ACC_OK &&
            memcmp(again, first, sizeof first) == 0 && unloadModel("cycle") == MX_ACC_OK;
  }
  CHECK(clean);
  CHECK(run_model("cycle", first, -1) == MX_ACC_ERR_NOT_FOUND);
  CHECK(unloadModel("cycle") == MX_ACC_ERR_NOT_FOUND);
  in_use = configure_one("query", "memory", "bytes_in_use");
  CHECK(in_use != NULL && strcmp(in_use, before) == 0);
}

static void test_abi_failed_loads_leave_nothing(void) {
  char broken[sizeof kGraph];
  const char *names[] = {"data"};
  MXTensor tensor = host_tensor(NULL, kVarShapes[kNumVars - 1], 4);
  int all_failed = 1;
  for (size_t length = 0; length + 1 < sizeof kGraph; length += 11) {
    memcpy(broken, kGraph, length);
    broken[length] = '\0';
    if (loadModel("broken", broken, names, &tensor, 1, 0) == MX_ACC_OK) {
      all_failed = 0;
      unloadModel("broken");
    }
  }
  CHECK(all_failed);
  CHECK(loadModel("x", kGraph, names, &tensor, 1, 7) == MX_ACC_ERR_DEVICE);
  CHECK(loadModel("x", kGraph, names, &tensor, 1, 0) == MX_ACC_ERR_INVALID_ARG);
  CHECK(strstr(accGetLastError(), "is missing") != NULL);
  const char *keys[] = {"query"}, *vals[] = {"nothing"};
  const char *const *out_keys, *const *out_vals;
  int count;
  CHECK(configure(keys, vals, 1, 0, &out_keys, &out_vals, &count) == MX_ACC_ERR_NOT_FOUND);
}

static void test_abi_imperative_cycles(void) {
  static const uint64_t x_shape[] = {1, 2, 5, 5}, w_shape[] = {3, 2, 3, 3}, b_shape[] = {3},
                        y_shape[] = {1, 3, 5, 5};
  const char *keys[] = {"kernel", "pad", "num_filter", "__op_version__"};
  const char *vals[] = {"(3, 3)", "(1, 1)", "3", "1"};
  const uint64_t *shapes[4] = {x_shape, w_shape, b_shape, y_shape};
  const uint64_t ndims[4] = {4, 4, 1, 4}, bytes[4] = {200, 216, 12, 300};
  float *values[3] = {var_values[kNumVars - 1], var_values[0], var_values[1]}, first[75];
  int clean = 1;
  for (int cycle = 0; cycle < 60 && clean; ++cycle) {
    void *ptr[4] = {NULL};
    MXTensor device[4];
    MXAccExecutor *executor = NULL;
    for (int i = 0; i < 4; ++i) {
      clean = clean && mx_alloc(0, bytes[i], &ptr[i]) == MX_ACC_OK;
      device[i] = (MXTensor){ptr[i], shapes[i], ndims[i], kFloat32, 0, NULL, 0};
    }
    for (int i = 0; i < 3 && clean; ++i) {
      MXTensor host = host_tensor(values[i], shapes[i], ndims[i]);
      clean = copyToAcc(&device[i], &host) == MX_ACC_OK;
    }
    clean = clean && accGetExecutor("Convolution", device, device + 3, 3, 1, keys, vals, 4, 0,
                                    &executor) == MX_ACC_OK;
    clean = clean && executor->forward(executor, device, 3, device + 3, 1) == MX_ACC_OK;
    float out[75];
    MXTensor host_out = host_tensor(out, y_shape, 4);
    clean = clean && copyFromAcc(&host_out, &device[3]) == MX_ACC_OK;
    if (cycle == 0) memcpy(first, out, sizeof out);
    clean = clean && memcmp(first, out, sizeof out) == 0;
    /* The output may not overlap an input. */
    clean = clean && executor->forward(executor, device, 3, device, 1) == MX_ACC_ERR_INVALID_ARG;
    if (executor != NULL) executor->release(executor);
    for (int i = 0; i < 4; ++i) clean = clean && mx_free(0, ptr[i]) == MX_ACC_OK;
  }
  CHECK(clean);
  void *foreign = NULL;
  CHECK(mx_alloc(1, 64, &foreign) == MX_ACC_OK);
  CHECK(mx_free(0, foreign) == MX_ACC_ERR_NOT_FOUND);
  CHECK(mx_alloc(1, 0, &foreign) == MX_ACC_OK); /* a second one, left for releaseAll */
  CHECK(mx_releaseAll(1) == MX_ACC_OK);
  const char *allocations = configure_one("query", "memory", "allocations");
  CHECK(allocations != NULL && strcmp(allocations, "0") == 0);
  MXAccExecutor *executor = NULL;
  const char *leaky[] = {"act_type"}, *leaky_value[] = {"leaky"};
  MXTensor spec = {NULL, y_shape, 4, kFloat32, 0, NULL, 0};
  CHECK(accGetExecutor("LeakyReLU", &spec, &spec, 1, 1, leaky, leaky_value, 1, 0, &executor) ==
        MX_ACC_ERR_UNSUPPORTED);
}

int main(void) {
  cnrtDev_t dev = NULL, tiny = NULL, other = NULL, q = NULL, q_tiny = NULL;
  mlu_params small = small_sram_params(), int8 = mlu_params_default(), int8_small = small;
  int8.dram_bytes = 256u << 20;
  int8.precision = int8_small.precision = MLU_PRECISION_INT8;
  OK(cnrtCreateDevice(&dev, 0, NULL));
  OK(cnrtCreateDevice(&tiny, 1, &small));
  OK(cnrtCreateDevice(&other, 2, &small));
  OK(cnrtCreateDevice(&q, 3, &int8));
  OK(cnrtCreateDevice(&q_tiny, 4, &int8_small));
  test_half();
  test_tensors();
  test_buffers_exist_only_after_compile(dev);
  test_conv_numerics(dev, tiny);
  test_batchnorm_folding(dev);
  test_network(dev, tiny);
  test_pool_numerics(dev, tiny);
  test_mlp_softmax(dev);
  test_int8_conv(dev, q, q_tiny);
  test_int8_mlp(q);
  test_int8_limits(q);
  test_fp16(dev);
  test_queue_fifo(dev);
  test_parallel_queues(dev, other);
  test_errors_at_sync(dev);
  test_out_of_memory();
  CHECK(initialize(MX_ACC_API_VERSION) == MX_ACC_OK);
  CHECK(getNumAcc() >= 2);
  test_abi_symbolic_cycles();
  test_abi_failed_loads_leave_nothing();
  test_abi_imperative_cycles();
  mlu_stats stats;
  OK(cnrtSimGetStats(dev, &stats));
  CHECK(stats.launches > 20 && stats.compiles > 20 && stats.sim_time_ns > 0 &&
        stats.host_device_bytes > 0);
  OK(cnrtSimResetStats(dev));
  OK(cnrtSimGetStats(dev, &stats));
  CHECK(stats.launches == 0 && stats.sim_time_ns == 0);
  OK(cnrtDestroyDevice(dev)); /* fails if anything was left allocated */
  OK(cnrtDestroyDevice(tiny));
  OK(cnrtDestroyDevice(other));
  OK(cnrtDestroyDevice(q));
  OK(cnrtDestroyDevice(q_tiny));
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
