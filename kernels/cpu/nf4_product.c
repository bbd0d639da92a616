/* Products with a few rows of input on NF4 weights as they are decoded (nf4.h): each weight row
 * decoded a piece at a time into a small buffer that stays in cache, and multiplied there. For
 * the few rows a mixture's expert or a decoder step gives, this replaces a tile decoded whole and
 * handed to the GEMM, whose few-row path runs at a fraction of its speed. Each output is summed
 * by one thread in a fixed order: the same bits for any thread count (the dot product compiled
 * per CPU level, levels.h: the levels may differ in rounding). */
#include <string.h>

#include "levels.h"
#include "nf4.h"

enum { PIECE = 512 }; /* elements of a weight row decoded at a time */

/* Σ a[i]·b[i], in 16 running sums */
ZT_LEVEL_BODY float dot_body(const float *a, const float *b, int n)
{
    float s[16] = {0}, t = 0;
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) s[k] += a[i + k] * b[i + k];
    for (; i < n; i++) t += a[i] * b[i];
    for (int w = 8; w > 0; w /= 2)
        for (int k = 0; k < w; k++) s[k] += s[k + w];
    return s[0] + t;
}
ZT_LEVELS(float, dot, (a, b, n), const float *a, const float *b, int n)

/* y[i] += a · x[i] */
ZT_LEVEL_BODY void axpy_body(float *y, float a, const float *x, int n)
{
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}
ZT_LEVELS(void, axpy, (y, a, x, n), float *y, float a, const float *x, int n)

void zt_nf4_product(const uint8_t *q, const float *absmax, size_t first, int nr, int K, const float *x, int M, float *y,
                    int ldy, float beta)
{
    dot_fn *dot = dot_for_cpu();
#pragma omp parallel for schedule(static) if ((size_t)nr * K >= 65536)
    for (int o = 0; o < nr; o++) {
        float w[PIECE], sum[ZT_NF4_FEW_ROWS] = {0};
        for (int c = 0; c < K; c += PIECE) {
            int len = K - c < PIECE ? K - c : PIECE;
            zt_nf4_dequantize(q, absmax, first + (size_t)o * K + c, (size_t)len, w);
            for (int r = 0; r < M; r++) sum[r] += dot(x + (size_t)r * K + c, w, len);
        }
        for (int r = 0; r < M; r++) {
            float *out = y + (size_t)r * ldy + o;
            *out = beta == 0 ? sum[r] : sum[r] + beta * *out;
        }
    }
}

void zt_nf4_product_t(const uint8_t *q, const float *absmax, size_t first, int nr, int K, const float *dy, int ldy,
                      int M, float *dx, float beta)
{
    axpy_fn *axpy = axpy_for_cpu();
    int pieces = (K + PIECE - 1) / PIECE;
#pragma omp parallel for schedule(static) if ((size_t)nr * K >= 65536)
    for (int p = 0; p < pieces; p++) { /* columns [c, c + len) of every row, the rows in order */
        int c = p * PIECE, len = K - c < PIECE ? K - c : PIECE;
        float w[PIECE];
        for (int r = 0; r < M; r++) {
            float *d = dx + (size_t)r * K + c;
            if (beta == 0) memset(d, 0, (size_t)len * sizeof *d);
            else
                for (int i = 0; i < len; i++) d[i] *= beta;
        }
        for (int o = 0; o < nr; o++) {
            zt_nf4_dequantize(q, absmax, first + (size_t)o * K + c, (size_t)len, w);
            for (int r = 0; r < M; r++) axpy(dx + (size_t)r * K + c, dy[(size_t)r * ldy + o], w, len);
        }
    }
}
