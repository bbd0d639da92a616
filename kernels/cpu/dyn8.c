/* The dynamic 8-bit codes (dyn8.h). */
#pragma GCC optimize("fp-contract=off")

#include "dyn8.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/status.h"

/* The signed dynamic code (Dettmers, 8-bit approximations): a sign, a run of zero bits that sets the
 * decimal exponent, an indicator bit and a linear fraction, as the reference implementation makes it
 * (tests/fixtures/nf4/make_fixture.py --c-table prints it), sorted; zt_dyn8_build(code, 1) makes
 * the same (test_nf4). */
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

/* torch.linspace(0.1, 1, n) in float as the reference computes it: start + step·i for the first
 * half and end - step·(n - 1 - i) for the rest, each rounded once from the exact product. */
static void linspace(float *b, int n)
{
    float start = 0.1f, end = 1.0f, step = (end - start) / (float)(n - 1);
    for (int i = 0; i < n; i++)
        b[i] =
            i < n / 2 ? (float)((double)start + (double)step * i) : (float)((double)end - (double)step * (n - 1 - i));
}

static int ascending(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void zt_dyn8_build(float *code, int is_signed)
{
    int k = 0;
    for (int i = 0; i < 7; i++) {
        int points = (is_signed ? 1 << i : 1 << (i + 1)) + 1;
        float grid[129], scale = (float)pow(10.0, i - 6);
        linspace(grid, points);
        for (int j = 0; j + 1 < points; j++) {
            float mean = (grid[j] + grid[j + 1]) / 2.0f;
            code[k++] = scale * mean;
            if (is_signed) code[k++] = -(scale * mean);
        }
    }
    code[k++] = 0.0f;
    code[k++] = 1.0f;
    qsort(code, (size_t)k, sizeof *code, ascending); /* k is 256 */
}

static zt_dyn8 tables[2];

/* The midpoints below x, by bisection. */
static int count_below(const float *mid, float x)
{
    int lo = 0, hi = 255; /* the answer lies in [lo, hi] */
    while (lo < hi) {
        int m = (lo + hi) / 2;
        if (mid[m] < x) lo = m + 1;
        else hi = m;
    }
    return lo;
}

static void build_table(zt_dyn8 *d)
{
    const float *code = d->code;
    for (int i = 0; i < 255; i++) d->mid[i] = (code[i] + code[i + 1]) / 2;
    d->mid[255] = INFINITY;
    for (uint32_t k = 0; k < 65536; k++) {
        /* the smallest float of these top bits: the low bits 0 if positive, all ones if negative */
        uint32_t bits = k << 16 | (k & 0x8000 ? 0xFFFF : 0);
        float x;
        memcpy(&x, &bits, sizeof x);
        d->below[k] = (uint8_t)(x != x ? 0 : count_below(d->mid, x)); /* NaN: 0 */
        /* the largest float of these bits is past at most one more midpoint */
        uint32_t top = k << 16 | (k & 0x8000 ? 0 : 0xFFFF);
        memcpy(&x, &top, sizeof x);
        ZT_ASSERT(x != x || count_below(d->mid, x) <= d->below[k] + 1);
    }
}

static void build_tables(void)
{
    memcpy(tables[0].code, zt_dyn8_code, sizeof zt_dyn8_code);
    zt_dyn8_build(tables[1].code, 0);
    build_table(&tables[0]);
    build_table(&tables[1]);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

const zt_dyn8 *zt_dyn8_signed(void)
{
    pthread_once(&once, build_tables);
    return &tables[0];
}

const zt_dyn8 *zt_dyn8_unsigned(void)
{
    pthread_once(&once, build_tables);
    return &tables[1];
}
