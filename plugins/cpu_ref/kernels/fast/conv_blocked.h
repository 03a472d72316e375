/*
 * 3 x 3 convolutions (stride 1 or 2, padding 1, one group) channel-blocked on
 * AVX2 and AVX-512 machines, see conv_blocked.c. fast/dense.c packs a model's
 * filters for them at loadModel, where cr_conv_blocked_applies, and runs
 * them on those packed filters.
 */
#ifndef CPU_REF_CONV_BLOCKED_H_
#define CPU_REF_CONV_BLOCKED_H_

#include <stddef.h>
#include <stdint.h>

#include "gemm.h"
#include "kernels.h"

/* 1 when a convolution of these parameters, with `outputs` filters of
 * `channels` channels, runs channel-blocked under isa: 3 x 3 (kernel depth
 * 1), stride 1 or 2 (none in depth), padding 1 (none in depth), no
 * dilation, one group, channels a multiple of 8, and outputs a multiple of
 * 16 under AVX2, or of 32 under AVX-512 with, at stride 1, at least 32
 * channels (fewer: the GEMM path was faster, the copies and the transposed
 * store costing more per output than the blocked tiles save); the generic
 * ISA: never. */
int cr_conv_blocked_applies(const cr_conv_params *params, int64_t outputs, int64_t channels,
                            cr_isa isa);

/* 1 when cr_conv_blocked runs the images of a batch together, each chunk
 * of filters read once for several images (filters over 1 MiB, output
 * planes of fewer than 96 positions); the caller then hands it the whole
 * batch and its threads. */
int cr_conv_blocked_batches(int64_t outputs, int64_t channels, int64_t positions);

/* Floats of the packed filters (0 on overflow), and the packing of w
 * (outputs x channels x 3 x 3) for isa's kernels, where
 * cr_conv_blocked_applies. */
size_t cr_conv_blocked_floats(int64_t outputs, int64_t channels);
void cr_conv_blocked_pack(int64_t outputs, int64_t channels, const float *w, cr_isa isa,
                          float *packed);

/* y (N, outputs, D, OH, OW) = the convolution of x (N, C, D, H, W) by the
 * filters packed for isa, plus bias (or NULL), then fusion's residual and
 * activation (fusion may be NULL). At most num_threads threads; isa must be
 * the CPU's (the caller checks, as for the GEMM's packing). Returns 0, or
 * -1 when scratch memory cannot be had, or isa or the build has no blocked
 * kernels (cr_conv_blocked_applies is then 0). */
int cr_conv_blocked(const cr_conv_params *params, const int64_t x_shape[5], const float *x,
                    const float *packed, cr_isa isa, const float *bias, const cr_fusion *fusion,
                    const int64_t y_shape[5], float *y, int num_threads);

#endif /* CPU_REF_CONV_BLOCKED_H_ */
