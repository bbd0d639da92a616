/* kernels/cpu/nf4: the 4-bit NormalFloat (NF4) and 8-bit row formats of a quantized frozen base
 * (QLoRA; lib/model/qbase.h), in the exact arithmetic of the published NF4 format, so that an
 * encoding zt makes is byte for byte the one the reference implementation makes.
 *
 * NF4: x is cut into blocks of 64 elements (the last may be shorter); each block keeps its fp32
 * absmax a, and each element the index (0..15) of zt_nf4_code nearest to x / a. Precisely, in
 * float: r = 1 / max(a, 1e-38), s = clamp(x · r, -1, 1), and the index is the number of midpoints
 * m_i = (code[i] + code[i + 1]) / 2 below s (a tie goes to the lower code). Two indices share a
 * byte, the even element in the high nibble. Dequantization is code[q] · a in float.
 *
 * Double quantization of the absmax values a[0..nb): their mean μ (in double, rounded to float)
 * is subtracted, and a - μ is quantized in blocks of 256 with the 256-entry signed dynamic code:
 * per block the fp32 absmax b of (a - μ), and per value the code nearest to (a - μ) / b, scaled
 * and rounded as above. Dequantized: dyncode[q] · b + μ, in float.
 *
 * int8 rows: each row of a [rows, cols] matrix keeps its fp32 absmax a and each element
 * q = round-half-even(x · (127 / a)) (0 for an all-zero row); dequantized q · (a / 127).
 *
 *     uint8_t *q = malloc((n + 1) / 2); float *a = malloc(zt_nf4_blocks(n) * sizeof(float));
 *     if (zt_nf4_quantize(w, n, q, a)) ...;           // some weight is NaN or ±Inf
 *     zt_nf4_dequantize(q, a, 128, 64, y);            // elements [128, 192) into y[0..64)
 */
#ifndef ZT_KERNELS_CPU_NF4_H
#define ZT_KERNELS_CPU_NF4_H

#include <stddef.h>
#include <stdint.h>

enum { ZT_NF4_BLOCK = 64, ZT_NF4_DQ_BLOCK = 256 };

extern const float zt_nf4_code[16]; /* sorted, code[0] = -1, code[7] = 0, code[15] = 1 */

static inline size_t zt_nf4_blocks(size_t n) { return (n + ZT_NF4_BLOCK - 1) / ZT_NF4_BLOCK; }
static inline size_t zt_nf4_dq_blocks(size_t nb) { return (nb + ZT_NF4_DQ_BLOCK - 1) / ZT_NF4_DQ_BLOCK; }

/* n elements into (n + 1) / 2 bytes q and zt_nf4_blocks(n) absmax values; returns how many inputs
 * were NaN or ±Inf (their encoding is then meaningless). An odd n leaves the last low nibble 0. */
size_t zt_nf4_quantize(const float *x, size_t n, uint8_t *q, float *absmax);
/* The products of x with rows of an NF4 weight without decoding it whole (nf4_product.c), for at
 * most ZT_NF4_FEW_ROWS rows of x: the weight's rows [0, nr) of K elements are elements [first,
 * first + nr·K) of the encoded tensor (codes q, absmax values absmax, as zt_nf4_dequantize takes
 * them). y[M, nr] (rows ldy apart) = x[M, K]·Wᵀ + beta·y; dx[M, K] = dy[M, nr]·W + beta·dx (dy's
 * rows ldy apart). */
enum { ZT_NF4_FEW_ROWS = 8 };
void zt_nf4_product(const uint8_t *q, const float *absmax, size_t first, int nr, int K, const float *x, int M, float *y,
                    int ldy, float beta);
void zt_nf4_product_t(const uint8_t *q, const float *absmax, size_t first, int nr, int K, const float *dy, int ldy,
                      int M, float *dx, float beta);
/* Elements [first, first + n) of the encoded tensor into y[0..n). */
void zt_nf4_dequantize(const uint8_t *q, const float *absmax, size_t first, size_t n, float *y);

/* The mean μ of nb absmax values, then their 8-bit codes q[nb] and block absmax
 * b[zt_nf4_dq_blocks(nb)]; dequantize writes absmax values [first, first + n) into a. */
float zt_nf4_dq_offset(const float *absmax, size_t nb);
void zt_nf4_dq_quantize(const float *absmax, size_t nb, float offset, uint8_t *q, float *b);
void zt_nf4_dq_dequantize(const uint8_t *q, const float *b, float offset, size_t first, size_t n, float *a);

/* A [rows, cols] matrix into int8 q and absmax[rows]; returns the count of NaN or ±Inf inputs. */
size_t zt_int8_rows_quantize(const float *x, size_t rows, size_t cols, int8_t *q, float *absmax);
/* Rows [row0, row0 + nrows) into y [nrows, cols]. */
void zt_int8_rows_dequantize(const int8_t *q, const float *absmax, size_t cols, size_t row0, size_t nrows, float *y);

#endif
