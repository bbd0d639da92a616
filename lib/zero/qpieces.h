/* qpieces: block quantization of a range of a flat buffer in pieces that never cross a
 * tensor's edge. A unit's flat buffer holds tensors of very different scales (a norm's
 * weights near 1 next to a matrix's near 0.02); a block spanning both would quantize the
 * matrix with the norm's scale. So blocks restart at every cut (the offset where a tensor
 * starts); int4 pieces start on a whole byte.
 *
 *     zt_qpieces l = {cuts, ncuts, 2048};
 *     size_t most = zt_qpieces_most(&l, b - a);        // sizes scales and int4 buffers
 *     zt_qpieces_quant8(&l, x + a, a, b, q, scales);  // q: b - a bytes
 *     zt_qpieces_dequant8(&l, q, scales, a, b, y + a);
 */
#ifndef ZT_ZERO_QPIECES_H
#define ZT_ZERO_QPIECES_H

#include <stddef.h>
#include <stdint.h>

typedef struct zt_qpieces {
    const size_t *cuts; /* ascending offsets in the buffer where a new tensor starts */
    int ncuts;
    size_t block;
} zt_qpieces;

/* The most pieces any range of length n can have: a range needs at most
 * zt_quant_nblocks(n, block) + that many scales, and (n + 1) / 2 + that many int4 bytes. */
size_t zt_qpieces_most(const zt_qpieces *l, size_t n);

/* a and b are offsets in the buffer (they place the cuts); x, y, q and scales point at the
 * range's start. Quantizers return how many inputs were NaN or Inf. */
size_t zt_qpieces_quant8(const zt_qpieces *l, const float *x, size_t a, size_t b, int8_t *q, float *scales);
void zt_qpieces_dequant8(const zt_qpieces *l, const int8_t *q, const float *scales, size_t a, size_t b, float *y);
size_t zt_qpieces_quant4(const zt_qpieces *l, const float *x, size_t a, size_t b, uint8_t *q, float *scales);
/* y[0 .. b - a) = Σ over k inputs (quantized [a, b) each, stride bytes apart, scales scales_at
 * bytes after each input's start) in order; accumulate adds to y. */
void zt_qpieces_dequant4_sum(const zt_qpieces *l, const unsigned char *first, size_t stride, size_t scales_at, int k,
                             size_t a, size_t b, float *y, int accumulate);

#endif
