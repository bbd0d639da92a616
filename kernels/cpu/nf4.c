/* NF4, its double quantization, and int8 rows (nf4.h). Every result is a fixed sequence of IEEE float
 * operations, the same for any thread count: no contraction into FMA. */
#pragma GCC optimize("fp-contract=off")

#include "nf4.h"

#include <math.h>
#include <string.h>

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

/* The signed dynamic code (Dettmers, 8-bit approximations): a sign, a run of zero bits that sets the
 * decimal exponent, an indicator bit and a linear fraction, as the reference implementation makes it
 * (tests/fixtures/nf4/make_fixture.py --c-table prints it), sorted. */
const float zt_dyn8_code[256] = {
    -0x1.fc6666p-1f,  -0x1.f53334p-1f,  -0x1.eep-1f,      -0x1.e6ccccp-1f,  -0x1.df999ap-1f,  -0x1.d86666p-1f,
    -0x1.d13334p-1f,  -0x1.cap-1f,      -0x1.c2ccccp-1f,  -0x1.bb999ap-1f,  -0x1.b46666p-1f,  -0x1.ad3334p-1f,
    -0x1.a6p-1f,      -0x1.9eccccp-1f,  -0x1.97999ap-1f,  -0x1.906666p-1f,  -0x1.893334p-1f,  -0x1.82p-1f,
    -0x1.7accccp-1f,  -0x1.73999ap-1f,  -0x1.6c6668p-1f,  -0x1.653334p-1f,  -0x1.5ep-1f,      -0x1.56ccccp-1f,
    -0x1.4f999ap-1f,  -0x1.486668p-1f,  -0x1.413334p-1f,  -0x1.3ap-1f,      -0x1.32ccccp-1f,  -0x1.2b999ap-1f,
    -0x1.246668p-1f,  -0x1.1d3334p-1f,  -0x1.16p-1f,      -0x1.0eccccp-1f,  -0x1.079998p-1f,  -0x1.006666p-1f,
    -0x1.f26664p-2f,  -0x1.e4p-2f,      -0x1.d59998p-2f,  -0x1.c73334p-2f,  -0x1.b8ccccp-2f,  -0x1.aa6666p-2f,
    -0x1.9cp-2f,      -0x1.8d9998p-2f,  -0x1.7f3334p-2f,  -0x1.70ccccp-2f,  -0x1.626666p-2f,  -0x1.54p-2f,
    -0x1.459998p-2f,  -0x1.373334p-2f,  -0x1.28ccccp-2f,  -0x1.1a6668p-2f,  -0x1.0cp-2f,      -0x1.fb3332p-3f,
    -0x1.de6666p-3f,  -0x1.c1999ap-3f,  -0x1.a4ccccp-3f,  -0x1.88p-3f,      -0x1.6b3334p-3f,  -0x1.4e6666p-3f,
    -0x1.31999ap-3f,  -0x1.14ccccp-3f,  -0x1.fp-4f,       -0x1.b66668p-4f,  -0x1.93d70ap-4f,  -0x1.8851eep-4f,
    -0x1.7ccccep-4f,  -0x1.7147aep-4f,  -0x1.65c29p-4f,   -0x1.5a3d7p-4f,   -0x1.4eb854p-4f,  -0x1.433334p-4f,
    -0x1.37ae14p-4f,  -0x1.2c28f6p-4f,  -0x1.20a3d6p-4f,  -0x1.151ebap-4f,  -0x1.09999ap-4f,  -0x1.fc28f6p-5f,
    -0x1.e51ebap-5f,  -0x1.ce147ap-5f,  -0x1.b70a3ep-5f,  -0x1.ap-5f,       -0x1.88f5c2p-5f,  -0x1.71eb86p-5f,
    -0x1.5ae146p-5f,  -0x1.43d70ap-5f,  -0x1.2ccccep-5f,  -0x1.15c29p-5f,   -0x1.fd70a4p-6f,  -0x1.cf5c2ap-6f,
    -0x1.a147aep-6f,  -0x1.733334p-6f,  -0x1.451ebap-6f,  -0x1.170a3ep-6f,  -0x1.d1eb86p-7f,  -0x1.75c29p-7f,
    -0x1.3e76c8p-7f,  -0x1.2c083p-7f,   -0x1.19999ap-7f,  -0x1.072b02p-7f,  -0x1.e978d4p-8f,  -0x1.c49ba6p-8f,
    -0x1.9fbe76p-8f,  -0x1.7ae148p-8f,  -0x1.56041ap-8f,  -0x1.3126e8p-8f,  -0x1.0c49bap-8f,  -0x1.ced914p-9f,
    -0x1.851eb8p-9f,  -0x1.3b645ap-9f,  -0x1.e353f8p-10f, -0x1.4fdf3ap-10f, -0x1.eecbfep-11f, -0x1.b3d07cp-11f,
    -0x1.78d5p-11f,   -0x1.3dd982p-11f, -0x1.02de02p-11f, -0x1.8fc506p-12f, -0x1.19ce0ap-12f, -0x1.47ae16p-13f,
    -0x1.743e96p-14f, -0x1.15df66p-14f, -0x1.6f0068p-15f, -0x1.64840cp-16f, -0x1.040bfep-17f, -0x1.b43528p-19f,
    -0x1.27476ep-21f, 0x0p+0f,          0x1.27476ep-21f,  0x1.b43528p-19f,  0x1.040bfep-17f,  0x1.64840cp-16f,
    0x1.6f0068p-15f,  0x1.15df66p-14f,  0x1.743e96p-14f,  0x1.47ae16p-13f,  0x1.19ce0ap-12f,  0x1.8fc506p-12f,
    0x1.02de02p-11f,  0x1.3dd982p-11f,  0x1.78d5p-11f,    0x1.b3d07cp-11f,  0x1.eecbfep-11f,  0x1.4fdf3ap-10f,
    0x1.e353f8p-10f,  0x1.3b645ap-9f,   0x1.851eb8p-9f,   0x1.ced914p-9f,   0x1.0c49bap-8f,   0x1.3126e8p-8f,
    0x1.56041ap-8f,   0x1.7ae148p-8f,   0x1.9fbe76p-8f,   0x1.c49ba6p-8f,   0x1.e978d4p-8f,   0x1.072b02p-7f,
    0x1.19999ap-7f,   0x1.2c083p-7f,    0x1.3e76c8p-7f,   0x1.75c29p-7f,    0x1.d1eb86p-7f,   0x1.170a3ep-6f,
    0x1.451ebap-6f,   0x1.733334p-6f,   0x1.a147aep-6f,   0x1.cf5c2ap-6f,   0x1.fd70a4p-6f,   0x1.15c29p-5f,
    0x1.2ccccep-5f,   0x1.43d70ap-5f,   0x1.5ae146p-5f,   0x1.71eb86p-5f,   0x1.88f5c2p-5f,   0x1.ap-5f,
    0x1.b70a3ep-5f,   0x1.ce147ap-5f,   0x1.e51ebap-5f,   0x1.fc28f6p-5f,   0x1.09999ap-4f,   0x1.151ebap-4f,
    0x1.20a3d6p-4f,   0x1.2c28f6p-4f,   0x1.37ae14p-4f,   0x1.433334p-4f,   0x1.4eb854p-4f,   0x1.5a3d7p-4f,
    0x1.65c29p-4f,    0x1.7147aep-4f,   0x1.7ccccep-4f,   0x1.8851eep-4f,   0x1.93d70ap-4f,   0x1.b66668p-4f,
    0x1.fp-4f,        0x1.14ccccp-3f,   0x1.31999ap-3f,   0x1.4e6666p-3f,   0x1.6b3334p-3f,   0x1.88p-3f,
    0x1.a4ccccp-3f,   0x1.c1999ap-3f,   0x1.de6666p-3f,   0x1.fb3332p-3f,   0x1.0cp-2f,       0x1.1a6668p-2f,
    0x1.28ccccp-2f,   0x1.373334p-2f,   0x1.459998p-2f,   0x1.54p-2f,       0x1.626666p-2f,   0x1.70ccccp-2f,
    0x1.7f3334p-2f,   0x1.8d9998p-2f,   0x1.9cp-2f,       0x1.aa6666p-2f,   0x1.b8ccccp-2f,   0x1.c73334p-2f,
    0x1.d59998p-2f,   0x1.e4p-2f,       0x1.f26664p-2f,   0x1.006666p-1f,   0x1.079998p-1f,   0x1.0eccccp-1f,
    0x1.16p-1f,       0x1.1d3334p-1f,   0x1.246668p-1f,   0x1.2b999ap-1f,   0x1.32ccccp-1f,   0x1.3ap-1f,
    0x1.413334p-1f,   0x1.486668p-1f,   0x1.4f999ap-1f,   0x1.56ccccp-1f,   0x1.5ep-1f,       0x1.653334p-1f,
    0x1.6c6668p-1f,   0x1.73999ap-1f,   0x1.7accccp-1f,   0x1.82p-1f,       0x1.893334p-1f,   0x1.906666p-1f,
    0x1.97999ap-1f,   0x1.9eccccp-1f,   0x1.a6p-1f,       0x1.ad3334p-1f,   0x1.b46666p-1f,   0x1.bb999ap-1f,
    0x1.c2ccccp-1f,   0x1.cap-1f,       0x1.d13334p-1f,   0x1.d86666p-1f,   0x1.df999ap-1f,   0x1.e6ccccp-1f,
    0x1.eep-1f,       0x1.f53334p-1f,   0x1.fc6666p-1f,   0x1p+0f,
};

/* The index of the dynamic code nearest to s, a tie to the lower: the number of midpoints
 * (code[i] + code[i + 1]) / 2 below s, found by bisection. */
static int dyn8_index(float s)
{
    const float *code = zt_dyn8_code;
    int lo = 0, hi = 255; /* the answer lies in [lo, hi] */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if ((code[mid] + code[mid + 1]) / 2 < s) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

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
    for (size_t k = 0; k < zt_nf4_dq_blocks(nb); k++) {
        size_t i0 = k * ZT_NF4_DQ_BLOCK, i1 = i0 + ZT_NF4_DQ_BLOCK < nb ? i0 + ZT_NF4_DQ_BLOCK : nb;
        float m = 0;
        for (size_t i = i0; i < i1; i++) m = fabsf(absmax[i] - offset) > m ? fabsf(absmax[i] - offset) : m;
        b[k] = m;
        for (size_t i = i0; i < i1; i++) q[i] = (uint8_t)dyn8_index(scaled(absmax[i] - offset, m));
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
