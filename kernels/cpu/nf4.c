/* NF4, its double quantization, and int8 rows (nf4.h). Every result is a fixed sequence of IEEE float
 * operations, the same for any thread count: no contraction into FMA. */
#pragma GCC optimize("fp-contract=off")

#include "nf4.h"

#include <math.h>
#include <string.h>

#include "dyn8.h"
#include "lib/core/cpu.h"
#include "nf4_kernel.h"

/* The quantiles of N(0, 1) that make NF4 (QLoRA, appendix E), as the reference implementation
 * rounds them to float. */
const float zt_nf4_code[16] = {-1.0f,
                               -0.6961928009986877f,
                               -0.5250730514526367f,
                               -0.39491748809814453f,
                               -0.28444138169288635f,
                               -0.18477343022823334f,
                               -0.09105003625154495f,
                               0.0f,
                               0.07958029955625534f,
                               0.16093020141124725f,
                               0.24611230194568634f,
                               0.33791524171829224f,
                               0.44070982933044434f,
                               0.5626170039176941f,
                               0.7229568362236023f,
                               1.0f};

/* x scaled into [-1, 1] by its block's absmax a, as the formats define it */
static float scaled(float x, float a)
{
    float s = x * (1.0f / (a > 1e-38f ? a : 1e-38f));
    return s < -1.0f ? -1.0f : s > 1.0f ? 1.0f : s;
}

static int is_finite(float x) { return fabsf(x) <= 3.40282347e38f; }

/* The NF4 index of s: the count of the 15 midpoints below it, found by bisection of mid[16] (the
 * midpoints and +inf, which no s passes). */
static inline int nf4_index(const float *mid, float s)
{
    int q = (mid[7] < s) << 3;
    q += (mid[q + 3] < s) << 2;
    q += (mid[q + 1] < s) << 1;
    return q + (mid[q] < s);
}

size_t zt_nf4_quantize(const float *x, size_t n, uint8_t *q, float *absmax)
{
    size_t bad = 0, nb = zt_nf4_blocks(n);
    float mid[16];
    for (int i = 0; i < 15; i++) mid[i] = (zt_nf4_code[i] + zt_nf4_code[i + 1]) / 2;
    mid[15] = INFINITY;
#pragma omp parallel for schedule(static) reduction(+ : bad) if (n >= 65536)
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * ZT_NF4_BLOCK, len = i0 + ZT_NF4_BLOCK < n ? ZT_NF4_BLOCK : n - i0;
        float a = 0, s[ZT_NF4_BLOCK + 1];
        for (size_t i = 0; i < len; i++) {
            bad += !is_finite(x[i0 + i]);
            a = fabsf(x[i0 + i]) > a ? fabsf(x[i0 + i]) : a;
        }
        absmax[b] = a;
        for (size_t i = 0; i < len; i++) s[i] = scaled(x[i0 + i], a);
        s[len] = 0;                         /* an odd tail: its low nibble's index, unused */
        for (size_t i = 0; i < len; i += 2) /* a block is 64 elements: its bytes are its own */
            q[(i0 + i) / 2] = (uint8_t)(nf4_index(mid, s[i]) << 4 | (i + 1 < len ? nf4_index(mid, s[i + 1]) : 0));
    }
    return bad;
}

/* Elements [i, e) of block b (within the range that starts at first) into y, a byte at a time. */
static void dequantize_part(const uint8_t *q, float s, size_t i, size_t e, size_t first, float *y)
{
    if (i < e && i % 2) y[i - first] = zt_nf4_code[q[i / 2] & 0xf] * s, i++;
    for (; i + 1 < e; i += 2) {
        uint8_t byte = q[i / 2];
        y[i - first] = zt_nf4_code[byte >> 4] * s;
        y[i + 1 - first] = zt_nf4_code[byte & 0xf] * s;
    }
    if (i < e) y[i - first] = zt_nf4_code[q[i / 2] >> 4] * s;
}

/* zt_nf4_dequantize on one thread: the whole blocks inside [first, end) through the level's
 * decoder, the ends (or all of it) a byte at a time */
static void dequantize_range(const uint8_t *q, const float *absmax, size_t first, size_t n, float *y)
{
    size_t end = first + n, b0 = first / ZT_NF4_BLOCK, b1 = end ? (end - 1) / ZT_NF4_BLOCK + 1 : 0;
    size_t w0 = (first + ZT_NF4_BLOCK - 1) / ZT_NF4_BLOCK, w1 = end / ZT_NF4_BLOCK;
    if (w0 < w1 && zt_cpu_has(ZT_CPU_AVX2)) {
        zt_nf4_dequantize_blocks_avx2(q, absmax, w0, w1, y + (w0 * ZT_NF4_BLOCK - first));
        if (first < w0 * ZT_NF4_BLOCK) dequantize_part(q, absmax[b0], first, w0 * ZT_NF4_BLOCK, first, y);
        if (w1 * ZT_NF4_BLOCK < end) dequantize_part(q, absmax[w1], w1 * ZT_NF4_BLOCK, end, first, y);
        return;
    }
    for (size_t b = b0; b < b1; b++) { /* the block's elements in [first, end) */
        size_t i = b * ZT_NF4_BLOCK > first ? b * ZT_NF4_BLOCK : first;
        size_t e = (b + 1) * ZT_NF4_BLOCK < end ? (b + 1) * ZT_NF4_BLOCK : end;
        dequantize_part(q, absmax[b], i, e, first, y);
    }
}

void zt_nf4_dequantize(const uint8_t *q, const float *absmax, size_t first, size_t n, float *y)
{
    enum { PIECE = 1 << 15 }; /* whole blocks */
    if (n < 2 * PIECE) {      /* no parallel region: nf4_product.c calls this for pieces of rows */
        dequantize_range(q, absmax, first, n, y);
        return;
    }
    size_t pieces = (n + PIECE - 1) / PIECE;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < pieces; k++) {
        size_t at = k * PIECE, len = n - at < PIECE ? n - at : PIECE;
        dequantize_range(q, absmax, first + at, len, y + at);
    }
}

float zt_nf4_dq_offset(const float *absmax, size_t nb)
{
    double sum = 0;
    for (size_t i = 0; i < nb; i++) sum += absmax[i];
    return nb ? (float)(sum / (double)nb) : 0.0f;
}

void zt_nf4_dq_quantize(const float *absmax, size_t nb, float offset, uint8_t *q, float *b)
{
    const zt_dyn8 *dq = zt_dyn8_signed();
    for (size_t k = 0; k < zt_nf4_dq_blocks(nb); k++) {
        size_t i0 = k * ZT_NF4_DQ_BLOCK, i1 = i0 + ZT_NF4_DQ_BLOCK < nb ? i0 + ZT_NF4_DQ_BLOCK : nb;
        float m = 0;
        for (size_t i = i0; i < i1; i++) m = fabsf(absmax[i] - offset) > m ? fabsf(absmax[i] - offset) : m;
        b[k] = m;
        for (size_t i = i0; i < i1; i++) q[i] = (uint8_t)zt_dyn8_index(dq, scaled(absmax[i] - offset, m));
    }
}

void zt_nf4_dq_dequantize(const uint8_t *q, const float *b, float offset, size_t first, size_t n, float *a)
{
    for (size_t j = 0; j < n; j++) {
        size_t i = first + j;
        a[j] = zt_dyn8_code[q[i]] * b[i / ZT_NF4_DQ_BLOCK] + offset;
    }
}

size_t zt_int8_rows_quantize(const float *x, size_t rows, size_t cols, int8_t *q, float *absmax)
{
    size_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad) if (rows * cols >= 65536)
    for (size_t r = 0; r < rows; r++) {
        const float *row = x + r * cols;
        float a = 0;
        for (size_t c = 0; c < cols; c++) {
            bad += !is_finite(row[c]);
            a = fabsf(row[c]) > a ? fabsf(row[c]) : a;
        }
        absmax[r] = a;
        float k = a > 0 ? 127.0f / a : 0.0f;
        for (size_t c = 0; c < cols; c++) q[r * cols + c] = (int8_t)nearbyintf(row[c] * k);
    }
    return bad;
}

void zt_int8_rows_dequantize(const int8_t *q, const float *absmax, size_t cols, size_t row0, size_t nrows, float *y)
{
#pragma omp parallel for schedule(static) if (nrows * cols >= 65536)
    for (size_t r = 0; r < nrows; r++) {
        float s = absmax[row0 + r] / 127.0f;
        for (size_t c = 0; c < cols; c++) y[r * cols + c] = (float)q[(row0 + r) * cols + c] * s;
    }
}
