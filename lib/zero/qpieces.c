/* Piecewise block quantization (qpieces.h). */
#include "qpieces.h"

#include "kernels/cpu/quant.h"

/* The end of the piece that starts at a: the next cut after a, or b. */
static size_t piece_end(const zt_qpieces *l, size_t a, size_t b)
{
    int lo = 0, hi = l->ncuts; /* the first cut > a */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (l->cuts[mid] <= a) lo = mid + 1;
        else hi = mid;
    }
    return lo < l->ncuts && l->cuts[lo] < b ? l->cuts[lo] : b;
}

size_t zt_qpieces_most(const zt_qpieces *l, size_t n) { return (size_t)l->ncuts + 1 < n ? (size_t)l->ncuts + 1 : n; }

size_t zt_qpieces_quant8(const zt_qpieces *l, const float *x, size_t a, size_t b, int8_t *q, float *scales)
{
    size_t bad = 0;
    for (size_t e, a0 = a; a < b; a = e) {
        e = piece_end(l, a, b);
        bad += zt_quant8(x + (a - a0), e - a, l->block, q, scales);
        q += e - a, scales += zt_quant_nblocks(e - a, l->block);
    }
    return bad;
}

void zt_qpieces_dequant8(const zt_qpieces *l, const int8_t *q, const float *scales, size_t a, size_t b, float *y)
{
    for (size_t e, a0 = a; a < b; a = e) {
        e = piece_end(l, a, b);
        zt_dequant8(q, scales, e - a, l->block, y + (a - a0));
        q += e - a, scales += zt_quant_nblocks(e - a, l->block);
    }
}

size_t zt_qpieces_quant4(const zt_qpieces *l, const float *x, size_t a, size_t b, uint8_t *q, float *scales)
{
    size_t bad = 0;
    for (size_t e, a0 = a; a < b; a = e) {
        e = piece_end(l, a, b);
        bad += zt_quant4(x + (a - a0), e - a, l->block, q, scales);
        q += (e - a + 1) / 2, scales += zt_quant_nblocks(e - a, l->block);
    }
    return bad;
}

void zt_qpieces_dequant4_sum(const zt_qpieces *l, const unsigned char *first, size_t stride, size_t scales_at, int k,
                             size_t a, size_t b, float *y, int accumulate)
{
    enum { MOST = 64 };
    const uint8_t *q[MOST];
    const float *sc[MOST];
    size_t data = 0, nsc = 0, a0 = a; /* the piece's place in each input */
    for (size_t e; a < b; a = e) {
        e = piece_end(l, a, b);
        for (int j0 = 0; j0 < k; j0 += MOST) { /* in groups, in order: ((s0 + s1) + ...) */
            int m = k - j0 < MOST ? k - j0 : MOST;
            for (int j = 0; j < m; j++) {
                const unsigned char *in = first + (size_t)(j0 + j) * stride;
                q[j] = in + data;
                sc[j] = (const float *)(in + scales_at) + nsc;
            }
            zt_dequant4_sum(q, sc, m, e - a, l->block, y + (a - a0), accumulate || j0 > 0);
        }
        data += (e - a + 1) / 2, nsc += zt_quant_nblocks(e - a, l->block);
    }
}
