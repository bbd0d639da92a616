/* kernels/cpu/nf4_kernel: the ISA-specific path of NF4's dequantization (nf4.c chooses it). */
#ifndef ZT_KERNELS_CPU_NF4_KERNEL_H
#define ZT_KERNELS_CPU_NF4_KERNEL_H

#include "nf4.h"

/* Whole blocks [b0, b1) of the encoded tensor (codes q, absmax values absmax) into y, block b0's
 * first element at y[0]: bit for bit zt_nf4_dequantize's, on the calling thread. Only on a CPU
 * with AVX2. */
void zt_nf4_dequantize_blocks_avx2(const uint8_t *q, const float *absmax, size_t b0, size_t b1, float *y);

#endif
