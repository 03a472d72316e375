/*
 * IEEE 754 binary16 ("fp16") storage conversions.
 *
 * The simulated MLU keeps fp16 tensors in device DRAM and computes in fp32
 * on chip: LOAD widens with mlu_half_to_float, STORE narrows with
 * mlu_float_to_half (round to nearest, ties to even, as numpy does), so
 * results match the host's float16 arrays bit for bit wherever the fp32
 * computation matches.
 */
#ifndef MLU_SIM_HALF_H_
#define MLU_SIM_HALF_H_

#include <stdint.h>

float mlu_half_to_float(uint16_t bits);
uint16_t mlu_float_to_half(float value);

/* n values at once, the same conversions (src / dst: little-endian fp16
 * bytes, any alignment): F16C instructions where the CPU has them, for
 * blocks of finite values, the functions above otherwise. */
void mlu_half_to_float_n(const unsigned char *src, float *dst, uint64_t n);
void mlu_float_to_half_n(const float *src, unsigned char *dst, uint64_t n);

#endif /* MLU_SIM_HALF_H_ */
