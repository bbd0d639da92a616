/* kernels/cpu/quant: block quantization to int8 and int4 for ZeRO++ (quantized weight all-gather and
 * quantized gradient reduce-scatter).
 *
 * Symmetric block quantization: x is cut into blocks of `block` elements (the last one may be shorter);
 * each block has one fp32 scale s = absmax(block) / qmax (s = 0 for an all-zero block), and each element
 * becomes q = round-to-nearest(x / s), clamped to [-qmax, qmax]. int8: qmax = 127, one byte each.
 * int4: qmax = 7, two per byte (element 2i in the low nibble of byte i, 2i+1 in the high nibble, two's
 * complement nibbles), (n + 1) / 2 bytes. Dequantization is q * s. Error bound per element: s/2, i.e.
 * absmax/254 for int8 and absmax/14 for int4.
 *
 * The exact arithmetic, the same on every path (scalar, AVX2) and for every thread count, so that results
 * are bitwise reproducible:
 *   - s = absmax / qmax in float (IEEE division); x / s is an IEEE division too (not x * (1/s): the
 *     reciprocal overflows for tiny blocks and adds a second rounding);
 *   - x / s is rounded half to even (in the default FP rounding mode), then clamped to [-qmax, qmax];
 *   - dequantization is (float)q * s, and zt_dequant4_sum adds those products without FMA.
 * The error bound above holds up to the float roundings of s, x / s and q * s: |y - x| <= absmax / (2 qmax)
 * + 2^-22 absmax. Where absmax / qmax is subnormal (absmax < 127 * 2^-126) the scale itself is rounded to
 * the subnormal grid, and a block whose scale underflows to 0 quantizes to zeros.
 * A block with a NaN or ±Inf input gets scale NaN and all its q = 0, so it dequantizes to NaN throughout.
 * int4 with an odd block size is fine: a block may start in the middle of a byte. For odd n the unused high
 * nibble of the last byte is 0. Pointers need no alignment; q, scales and y must not overlap the inputs.
 * Large arrays run on the caller's OpenMP threads (one thread when called inside a parallel region).
 *
 *     size_t nb = zt_quant_nblocks(n, 256);
 *     int8_t *q = malloc(n); float *s = malloc(nb * sizeof(float));
 *     if (zt_quant8(grad, n, 256, q, s)) ...;   // some gradient was NaN/Inf: its blocks' scales are NaN
 *     zt_dequant8(q, s, n, 256, y);              // |y[i] - grad[i]| <= absmax of its block / 254
 *
 *     // reduce-scatter: k ranks each sent int4 shards q4[j] (n elements) with scales s4[j]
 *     zt_dequant4_sum((const uint8_t *const *)q4, (const float *const *)s4, k, n, 256, grad_shard, 0);
 */
#ifndef ZT_KERNELS_CPU_QUANT_H
#define ZT_KERNELS_CPU_QUANT_H

#include <stddef.h>
#include <stdint.h>

size_t zt_quant_nblocks(size_t n, size_t block); /* ceil(n / block); block >= 1 */

/* Quantize n floats; returns how many inputs were NaN or ±Inf (0 = all finite). A non-finite input makes
 * its block's scale NaN (so the damage is visible downstream, never silently clipped).
 * q holds n bytes (int8) or (n + 1) / 2 bytes (int4); scales holds zt_quant_nblocks(n, block) floats. */
size_t zt_quant8(const float *x, size_t n, size_t block, int8_t *q, float *scales);
void zt_dequant8(const int8_t *q, const float *scales, size_t n, size_t block, float *y);
size_t zt_quant4(const float *x, size_t n, size_t block, uint8_t *q, float *scales);
void zt_dequant4(const uint8_t *q, const float *scales, size_t n, size_t block, float *y);

/* y = sum over k inputs of dequant4(q[j], scales[j]) (each n elements, same block size), summed in
 * order j = 0, 1, ... (deterministic); y += ... when accumulate, else y = ... . This is the
 * "dequantize + reduce" step of the quantized reduce-scatter. Precisely, per element:
 * accumulate: ((y + d0) + d1) + ...; otherwise (d0 + d1) + ... (k = 0 then gives y = 0). */
void zt_dequant4_sum(const uint8_t *const *q, const float *const *scales, int k, size_t n, size_t block, float *y,
                     int accumulate);

/* For tests: on = 1 runs the scalar kernels even where AVX2 is available, so both paths can be compared;
 * on = 0 restores the default. Not thread-safe: set it only while no quantization runs. */
void zt_quant_force_scalar(int on);

#endif
