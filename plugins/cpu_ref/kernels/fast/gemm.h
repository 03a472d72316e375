/*
 * cpu_ref's single-precision GEMM: C (m x n) = A (m x k) . B (k x n), then an
 * optional epilogue (bias, residual add, activation) applied to each tile
 * of C as it is finished.
 *
 * The design is the usual one of BLIS and OpenBLAS: A is packed into panels
 * of MR rows and B into panels of NR columns, K is cut into blocks of KC
 * (a tail of up to KCMAX - KC joined to the last block), and a register-blocked micro-kernel multiplies one A panel by one B panel
 * into an MR x NR tile of C held in registers. The micro-kernel is chosen
 * at run time from the CPU's features (AVX-512, AVX2 + FMA, or portable C),
 * so the library is built without -march flags and runs on any x86-64 (or
 * other) CPU. Setting the environment variable ACC_CPU_REF_ISA to
 * "generic", "avx2" or "avx512" before the first GEMM caps the choice (the
 * tests use it to run the portable path); cr_gemm_set_isa does the same.
 *
 * Each element of C is summed over k in the same order whatever the thread
 * count and whichever tile it lies in, so results do not depend on
 * num_threads. They depend on the ISA only through fused multiply-add
 * rounding (the portable path rounds each product and sum separately).
 */
#ifndef CPU_REF_GEMM_H_
#define CPU_REF_GEMM_H_

#include <stddef.h>
#include <stdint.h>

#include "kernel_types.h"
#include "target_clones.h"

/* The ISA the GEMM uses now (detected once, capped by ACC_CPU_REF_ISA). */
cr_isa cr_gemm_isa(void);
/* Caps the ISA at isa (never above what the CPU supports); returns the ISA
 * in use afterwards. Not thread-safe against concurrent GEMMs: call it
 * before running any. */
cr_isa cr_gemm_set_isa(cr_isa isa);
const char *cr_isa_name(cr_isa isa);

/* Packs rows [k0, k0 + kc) and columns [n0, n0 + nc) of B into panels of nr
 * columns, zero-filled past nc: panel j holds kc rows of nr values. */
typedef void (*cr_pack_b_fn)(const void *context, int64_t k0, int64_t kc, int64_t n0,
                             int64_t nc, int nr, float *dst);

/* One operand of cr_gemm. Element (i, j) is data[i * rs + j * cs], unless
 * pack_b is set (B only: it packs B, e.g. an im2col view of an image) or
 * row_offsets is (B only: element (p, j) is data[row_offsets[p] + j], read
 * in place by the micro-kernel without packing).
 * packed, when not NULL, holds the whole operand packed by cr_gemm_pack_a
 * (A) or cr_gemm_pack_b (B) under packed_isa; it is used when packed_isa is
 * the ISA in use, and the view otherwise. */
typedef struct cr_gemm_operand {
  const float *data;
  int64_t rs, cs;
  cr_pack_b_fn pack_b;
  const void *pack_context;
  const float *packed;
  cr_isa packed_isa;
  const int64_t *row_offsets;
} cr_gemm_operand;

/* Floats a whole packed A (m x k) or B (k x n) takes under the ISA in use;
 * 0 when the count would not fit in size_t. */
size_t cr_gemm_packed_a_floats(int64_t m, int64_t k);
size_t cr_gemm_packed_b_floats(int64_t k, int64_t n);
/* Packs A (element (i, j) at a[i * rs + j * cs]) or B for the ISA in use
 * into packed (cr_gemm_packed_*_floats floats); returns that ISA. */
cr_isa cr_gemm_pack_a(int64_t m, int64_t k, const float *a, int64_t rs, int64_t cs,
                      float *packed);
cr_isa cr_gemm_pack_b(int64_t k, int64_t n, const float *b, int64_t rs, int64_t cs,
                      float *packed);

/* C (element (i, j) at c[i * ldc + j], not overlapping A or B) = A . B,
 * then epilogue (NULL: none). k = 0 gives zeros before the epilogue. Uses at
 * most num_threads threads. Returns 0, or -1 when scratch memory cannot be
 * had (C is then unspecified). */
int cr_gemm(int64_t m, int64_t n, int64_t k, const cr_gemm_operand *a, const cr_gemm_operand *b,
            float *c, int64_t ldc, const cr_epilogue *epilogue, int num_threads);

/* y[i] = bias[i] (0 when bias is NULL) + the sum over p of a[i * k + p] *
 * x[p], for i in [0, n): a matrix-vector product on A's rows in place (a
 * FullyConnected of one row, or a 1 x 1 convolution of one 1 x 1 image),
 * which cr_gemm would compute in tiles of 6 or 8 rows by 16 or 48 columns
 * with all but one column wasted. Each y[i] is summed in an order fixed by
 * k alone, whatever the thread count. Uses at most num_threads threads. */
void cr_gemv(int64_t n, int64_t k, const float *a, const float *x, const float *bias, float *y,
             int num_threads);

/* The number of threads, at most num_threads, cr_gemm uses for an m x n x k
 * product that does not take the small path (whole panels of the larger
 * dimension of C per thread, each thread worth enough work). */
int cr_gemm_threads(int64_t m, int64_t n, int64_t k, int num_threads);

/* The panels of the larger dimension of an m x n C: the most threads, or
 * shares, its product can be split into. */
int64_t cr_gemm_panels(int64_t m, int64_t n);

/* Told of each block of C once its values are final (epilogue applied):
 * block(context, i0, i1, j0, j1) for rows [i0, i1) and columns [j0, j1),
 * called by the thread that computed the block, while it is still in that
 * core's cache, before cr_gemm_notify returns. The blocks are disjoint and
 * together cover C; several may be told at once on different threads. A
 * convolution uses it to move its output out of the product's grid. */
typedef struct cr_gemm_done {
  void (*block)(void *context, int64_t i0, int64_t i1, int64_t j0, int64_t j1);
  void *context;
} cr_gemm_done;

/* cr_gemm, telling done (NULL: no one) of each finished block. */
int cr_gemm_notify(int64_t m, int64_t n, int64_t k, const cr_gemm_operand *a,
                   const cr_gemm_operand *b, float *c, int64_t ldc, const cr_epilogue *epilogue,
                   const cr_gemm_done *done, int num_threads);

/* Share `share` of `shares` of an m x n product as cr_gemm_share computes
 * it: C's rows [*i0, *i1) and columns [*j0, *j1), whole panels of the
 * larger dimension of C (rows when it has more row panels than column
 * panels, else columns), dealt as evenly as the panels allow. A share may
 * be empty (more shares than panels). */
void cr_gemm_share_bounds(int64_t m, int64_t n, int64_t share, int64_t shares, int64_t *i0,
                          int64_t *i1, int64_t *j0, int64_t *j1);

/* That share of cr_gemm_notify's product, on the calling thread: for a
 * caller that runs the shares on threads of its own, preparing each
 * share's part of B (the rows of an image it reads) on the thread that
 * computes it. Only the share's part of B is read, where a product with
 * row_offsets reads its panels in place: element (p, j) for j in [*j0,
 * *j1). Every share of the same product run once, on any threads, gives C
 * bit for bit as cr_gemm_notify does. Returns 0 or -1 as cr_gemm. */
int cr_gemm_share(int64_t m, int64_t n, int64_t k, const cr_gemm_operand *a,
                  const cr_gemm_operand *b, float *c, int64_t ldc, const cr_epilogue *epilogue,
                  const cr_gemm_done *done, int64_t share, int64_t shares);

/* Applies epilogue to rows [i0, i0 + rows) and columns [j0, j0 + cols) of C
 * (for kernels that compute C without cr_gemm, e.g. depthwise convolution). */
void cr_epilogue_apply(const cr_epilogue *epilogue, int64_t i0, int64_t rows, int64_t j0,
                       int64_t cols, float *c, int64_t ldc);

#endif /* CPU_REF_GEMM_H_ */
