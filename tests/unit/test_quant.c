#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/quant.h"
#include "lib/core/cpu.h"
#include "tests/unit/test.h"
#include "tests/unit/test_rand.h"

/* Random data of varied magnitude: each run of 1..300 elements has its own exponent in [-30, 30], and a few
 * elements stand out by 2^10, so blocks span exponents both between and within themselves. */
static void fill_spread(float *x, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t run = (size_t)rnd_int(1, 300);
        float scale = ldexpf(1.0f, rnd_int(-30, 30));
        for (; run && i < n; run--, i++) x[i] = rnd() * scale * (rnd_int(0, 50) ? 1.0f : 1024.0f);
    }
}

static size_t nblocks(size_t n, size_t block) { return (n + block - 1) / block; }

/* --- the reference: quant.h's contract written out directly --------------------------------------------- */

/* q values (one int per element) and scales; returns the number of NaN/Inf inputs. */
static size_t ref_quant(const float *x, size_t n, size_t block, int qmax, int *q, float *scales)
{
    size_t bad = 0;
    for (size_t b = 0; b * block < n; b++) {
        size_t lo = b * block, hi = lo + block < n ? lo + block : n;
        float absmax = 0;
        int finite = 1;
        for (size_t i = lo; i < hi; i++) {
            if (!isfinite(x[i])) finite = 0, bad++;
            else absmax = fmaxf(absmax, fabsf(x[i]));
        }
        float s = finite ? absmax / (float)qmax : NAN;
        scales[b] = s;
        for (size_t i = lo; i < hi; i++) {
            float r = s > 0 ? rintf(x[i] / s) : 0; /* rintf: half to even in the default rounding mode */
            q[i] = (int)fmaxf(-(float)qmax, fminf((float)qmax, r));
        }
    }
    return bad;
}

static void ref_pack8(const int *q, size_t n, int8_t *out)
{
    for (size_t i = 0; i < n; i++) out[i] = (int8_t)q[i];
}

static void ref_pack4(const int *q, size_t n, uint8_t *out)
{
    memset(out, 0, (n + 1) / 2);
    for (size_t i = 0; i < n; i++) out[i / 2] |= (uint8_t)(((unsigned)q[i] & 0xfu) << (4 * (i & 1)));
}

static void ref_dequant(const int *q, const float *scales, size_t n, size_t block, float *y)
{
    for (size_t i = 0; i < n; i++) y[i] = (float)q[i] * scales[i / block];
}

/* --- helpers ------------------------------------------------------------------------------------------- */

/* The two paths to run: the dispatched one (AVX2 where the CPU has it) and the scalar one. */
static const char *path_name(int scalar) { return scalar ? "scalar" : zt_cpu_has(ZT_CPU_AVX2) ? "avx2" : "scalar"; }

static int same_bits(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (bits(a[i]) != bits(b[i])) return 0;
    return 1;
}

enum { GUARD = 16, MAX_OFFSET = 3 };

/* Buffers with an odd offset from malloc's alignment and guard bytes after them. */
typedef struct buf {
    unsigned char *base;
    void *p;
    size_t bytes;
} buf;

static buf buf_new(size_t bytes, size_t offset)
{
    buf b = {.base = malloc(bytes + offset + GUARD), .bytes = bytes};
    memset(b.base, 0xa5, bytes + offset + GUARD);
    b.p = b.base + offset;
    return b;
}

static int buf_guard_intact(const buf *b)
{
    const unsigned char *g = (const unsigned char *)b->p + b->bytes;
    for (int i = 0; i < GUARD; i++)
        if (g[i] != 0xa5) return 0;
    return 1;
}

/* Quantizes x with both kernels and both widths; checks q, scales, the non-finite count and the dequantized
 * values bitwise against the reference, that nothing is written past the outputs, and (for finite blocks)
 * the error bound absmax / (2 qmax) + 2^-22 absmax. */
static void check_all(const float *x, size_t n, size_t block)
{
    size_t nb = nblocks(n, block), off = (size_t)rnd_int(0, MAX_OFFSET);
    int *qref = malloc((n + 1) * sizeof(int));
    float *sref = malloc((nb + 1) * sizeof(float)), *yref = malloc((n + 1) * sizeof(float));
    int8_t *q8ref = malloc(n + 1);
    uint8_t *q4ref = malloc(n / 2 + 1);
    for (int width = 8; width >= 4; width -= 4) {
        int qmax = width == 8 ? 127 : 7;
        size_t qbytes = width == 8 ? n : (n + 1) / 2;
        size_t bad_ref = ref_quant(x, n, block, qmax, qref, sref);
        if (width == 8) ref_pack8(qref, n, q8ref);
        else ref_pack4(qref, n, q4ref);
        ref_dequant(qref, sref, n, block, yref);
        const void *qr = width == 8 ? (const void *)q8ref : q4ref;
        for (int scalar = 0; scalar <= 1; scalar++) {
            zt_quant_force_scalar(scalar);
            /* floats 4-byte aligned at most, bytes at any offset */
            buf xin = buf_new(n * sizeof(float), off * sizeof(float));
            memcpy(xin.p, x, n * sizeof(float));
            buf q = buf_new(qbytes, off), s = buf_new(nb * sizeof(float), (MAX_OFFSET - off) * sizeof(float));
            buf y = buf_new(n * sizeof(float), off * sizeof(float));
            size_t bad = width == 8 ? zt_quant8(xin.p, n, block, q.p, s.p) : zt_quant4(xin.p, n, block, q.p, s.p);
            if (width == 8) zt_dequant8(q.p, s.p, n, block, y.p);
            else zt_dequant4(q.p, s.p, n, block, y.p);
            const char *path = path_name(scalar);
            CHECK_MSG(bad == bad_ref, "int%d %s n %zu block %zu: %zu non-finite, want %zu", width, path, n, block, bad,
                      bad_ref);
            CHECK_MSG(!memcmp(q.p, qr, qbytes), "int%d %s n %zu block %zu: q differs", width, path, n, block);
            CHECK_MSG(same_bits(s.p, sref, nb), "int%d %s n %zu block %zu: scales differ", width, path, n, block);
            CHECK_MSG(same_bits(y.p, yref, n), "int%d %s n %zu block %zu: y differs", width, path, n, block);
            CHECK_MSG(buf_guard_intact(&q) && buf_guard_intact(&s) && buf_guard_intact(&y),
                      "int%d %s n %zu block %zu: wrote past the end", width, path, n, block);
            free(xin.base), free(q.base), free(s.base), free(y.base);
        }
        zt_quant_force_scalar(0);
        double worst = 0; /* error / bound, over finite blocks */
        for (size_t lo = 0; lo < n; lo += block) {
            size_t hi = n - lo < block ? n : lo + block;
            double absmax = 0;
            for (size_t i = lo; i < hi; i++) absmax = fmax(absmax, fabs((double)x[i]));
            if (!isfinite(absmax)) continue;
            double bound = absmax / (2.0 * qmax) + 0x1p-22 * absmax;
            for (size_t i = lo; i < hi; i++) {
                double err = fabs((double)yref[i] - (double)x[i]);
                worst = fmax(worst, bound > 0 ? err / bound : err > 0 ? INFINITY : 0);
            }
        }
        CHECK_MSG(worst <= 1.0, "int%d n %zu block %zu: error %.6g x the bound", width, n, block, worst);
    }
    free(qref), free(sref), free(yref), free(q8ref), free(q4ref);
}

/* --- the cases ----------------------------------------------------------------------------------------- */

static const size_t sizes[] = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 100, 255, 256, 257, 1000, 4097};
static const size_t blocks[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 32, 33, 64, 127, 128, 256, 1000, 4096};

static void test_random_against_reference(void)
{
    float *x = malloc(4097 * sizeof(float));
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t bi = 0; bi < sizeof blocks / sizeof *blocks; bi++) {
            fill_spread(x, sizes[si]);
            check_all(x, sizes[si], blocks[bi]);
        }
    free(x);
}

/* Enough blocks for the OpenMP chunks (65536 elements each), with odd blocks whose int4 bytes straddle. */
static void test_large_parallel(void)
{
    const size_t n = 600001;
    float *x = malloc(n * sizeof(float));
    fill_spread(x, n);
    const size_t big_blocks[] = {1, 3, 256, 2047, 65537};
    for (size_t bi = 0; bi < sizeof big_blocks / sizeof *big_blocks; bi++) check_all(x, n, big_blocks[bi]);
    free(x);
}

/* Blocks of k * 2^-e with max |k| = qmax: s = 2^-e exactly, so every element comes back bitwise. */
static void test_exact_round_trip(void)
{
    const size_t n = 1001, block = 37, nb = nblocks(n, block);
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *s = malloc(nb * sizeof(float));
    int8_t *q8 = malloc(n);
    uint8_t *q4 = malloc((n + 1) / 2);
    for (int qmax = 127; qmax >= 7; qmax -= 120)
        for (int scalar = 0; scalar <= 1; scalar++) {
            zt_quant_force_scalar(scalar);
            for (size_t b = 0; b < nb; b++) {
                size_t lo = b * block, hi = lo + block < n ? lo + block : n;
                int e = rnd_int(-40, 40);
                for (size_t i = lo; i < hi; i++) x[i] = ldexpf((float)rnd_int(-qmax, qmax), -e);
                x[lo + (size_t)rnd_int(0, (int)(hi - lo - 1))] = ldexpf((float)(rnd_int(0, 1) ? qmax : -qmax), -e);
            }
            if (qmax == 127) {
                CHECK(zt_quant8(x, n, block, q8, s) == 0);
                zt_dequant8(q8, s, n, block, y);
            } else {
                CHECK(zt_quant4(x, n, block, q4, s) == 0);
                zt_dequant4(q4, s, n, block, y);
            }
            CHECK_MSG(same_bits(x, y, n), "qmax %d %s", qmax, path_name(scalar));
        }
    zt_quant_force_scalar(0);
    free(x), free(y), free(s), free(q8), free(q4);
}

static void test_zero_blocks(void)
{
    const size_t n = 45, block = 9; /* odd block: int4 zero blocks start mid-byte */
    float x[45], y[45], s[5];
    int8_t q8[45];
    uint8_t q4[23];
    for (size_t i = 0; i < n; i++) x[i] = (i / block) % 2 ? rnd() : 0.0f; /* blocks 0, 2, 4 all zero */
    x[block * 2 + 3] = -0.0f;
    for (int scalar = 0; scalar <= 1; scalar++) {
        zt_quant_force_scalar(scalar);
        for (int width = 8; width >= 4; width -= 4) {
            memset(y, 0xff, sizeof y);
            CHECK((width == 8 ? zt_quant8(x, n, block, q8, s) : zt_quant4(x, n, block, q4, s)) == 0);
            if (width == 8) zt_dequant8(q8, s, n, block, y);
            else zt_dequant4(q4, s, n, block, y);
            for (size_t b = 0; b < 5; b += 2) {
                CHECK_MSG(bits(s[b]) == 0, "int%d %s block %zu: scale %g", width, path_name(scalar), b, s[b]);
                for (size_t i = b * block; i < (b + 1) * block; i++) CHECK(bits(y[i]) == 0);
            }
            for (size_t i = 0; i < n; i++)
                if ((i / block) % 2 == 0 && width == 8) CHECK(q8[i] == 0);
            if (width == 4) CHECK(q4[22] >> 4 == 0); /* n odd: the last byte's high nibble is padding */
        }
    }
    zt_quant_force_scalar(0);
    /* scales that underflow or are subnormal still give finite, bounded results */
    float tiny[4] = {1e-44f, -3e-45f, 0, 1e-45f}, yt[4], st[1];
    int8_t qt[4];
    CHECK(zt_quant8(tiny, 4, 4, qt, st) == 0);
    zt_dequant8(qt, st, 4, 4, yt);
    for (int i = 0; i < 4; i++) CHECK(isfinite(yt[i]) && fabsf(yt[i] - tiny[i]) <= 1e-44f);
    float small[3] = {1e-38f, -5e-39f, 2e-39f}, ys[3], ss[1];
    CHECK(zt_quant8(small, 3, 3, qt, ss) == 0);
    zt_dequant8(qt, ss, 3, 3, ys);
    for (int i = 0; i < 3; i++) CHECK(isfinite(ys[i]) && fabsf(ys[i] - small[i]) <= 1e-38f / 254 + 127e-45f);
}

static void test_nonfinite(void)
{
    const size_t n = 103, block = 11, nb = nblocks(n, block);
    float x[103], y[103], s[10], sref[10];
    int8_t q8[103];
    uint8_t q4[52];
    int qref[103];
    fill_spread(x, n);
    x[5] = NAN, x[7] = INFINITY; /* block 0: two */
    x[33] = -INFINITY;           /* block 3: starts at an odd element */
    x[102] = -NAN;               /* the last, short block */
    const size_t want = 4, nan_blocks[] = {0, 3, 9};
    for (int scalar = 0; scalar <= 1; scalar++) {
        zt_quant_force_scalar(scalar);
        for (int width = 8; width >= 4; width -= 4) {
            size_t bad = width == 8 ? zt_quant8(x, n, block, q8, s) : zt_quant4(x, n, block, q4, s);
            if (width == 8) zt_dequant8(q8, s, n, block, y);
            else zt_dequant4(q4, s, n, block, y);
            CHECK_MSG(bad == want, "int%d %s: %zu non-finite, want %zu", width, path_name(scalar), bad, want);
            for (size_t j = 0; j < 3; j++) {
                size_t b = nan_blocks[j];
                CHECK(isnan(s[b]));
                for (size_t i = b * block; i < (b + 1) * block && i < n; i++) CHECK(isnan(y[i]));
            }
            /* the neighbours, sharing int4 bytes with NaN blocks, are untouched */
            ref_quant(x, n, block, width == 8 ? 127 : 7, qref, sref);
            for (size_t b = 0; b < nb; b++)
                if (!isnan(sref[b])) CHECK(bits(s[b]) == bits(sref[b]));
            for (size_t i = 0; i < n; i++)
                if (!isnan(sref[i / block])) CHECK(bits(y[i]) == bits((float)qref[i] * sref[i / block]));
        }
    }
    zt_quant_force_scalar(0);
}

/* zt_dequant4_sum against separate zt_dequant4 calls summed in order, bitwise. */
static void test_dequant4_sum(void)
{
    const size_t cases[][2] = {{1, 1}, {7, 3}, {64, 16}, {1001, 37}, {1000, 256}, {4099, 4096}, {600001, 2047}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t n = cases[c][0], block = cases[c][1], nb = nblocks(n, block);
        uint8_t *q[5];
        float *s[5], *d[5], *x = malloc(n * sizeof(float));
        float *y = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float)), *y0 = malloc(n * sizeof(float));
        for (int j = 0; j < 5; j++) {
            q[j] = malloc((n + 1) / 2), s[j] = malloc(nb * sizeof(float)), d[j] = malloc(n * sizeof(float));
            fill_spread(x, n);
            zt_quant4(x, n, block, q[j], s[j]);
            zt_dequant4(q[j], s[j], n, block, d[j]);
        }
        fill_spread(y0, n);
        for (int scalar = 0; scalar <= 1; scalar++) {
            zt_quant_force_scalar(scalar);
            for (int k = 1; k <= 5; k++)
                for (int acc = 0; acc <= 1; acc++) {
                    for (size_t i = 0; i < n; i++) {
                        float sum = acc ? y0[i] + d[0][i] : d[0][i];
                        for (int j = 1; j < k; j++) sum += d[j][i];
                        want[i] = sum;
                    }
                    memcpy(y, y0, n * sizeof(float));
                    zt_dequant4_sum((const uint8_t *const *)q, (const float *const *)s, k, n, block, y, acc);
                    CHECK_MSG(same_bits(y, want, n), "%s n %zu block %zu k %d accumulate %d", path_name(scalar), n,
                              block, k, acc);
                }
        }
        zt_quant_force_scalar(0);
        memcpy(y, y0, n * sizeof(float));
        zt_dequant4_sum(NULL, NULL, 0, n, block, y, 1);
        CHECK(same_bits(y, y0, n));
        zt_dequant4_sum(NULL, NULL, 0, n, block, y, 0);
        for (size_t i = 0; i < n; i++) CHECK(bits(y[i]) == 0);
        for (int j = 0; j < 5; j++) free(q[j]), free(s[j]), free(d[j]);
        free(x), free(y), free(want), free(y0);
    }
}

/* standard normal (Box-Muller) */
static double gauss(void)
{
    double u = ((double)(rnd_u64() >> 11) + 0.5) / 9007199254740992.0; /* in (0, 1): log(u) is finite */
    double v = (double)(rnd_u64() >> 11) / 9007199254740992.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* Rounding to nearest adds no bias: over many draws the mean error stays within 3 sigma / sqrt(N) of 0.
 * The data is normal, sigma 1, offset by 0.3 so that a rounding toward or away from zero would show; each
 * block holds one element at +-6, which fixes the scale and comes back exactly. A smooth density matters:
 * data with a hard edge just below absmax shows the scheme's own edge effect (of the top half-step only the
 * lower half is populated, and all of it rounds up to absmax). */
static void test_no_bias(void)
{
    const size_t n = 1 << 16, block = 128, draws = 32, nb = nblocks(n, block);
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *s = malloc(nb * sizeof(float));
    int8_t *q8 = malloc(n);
    uint8_t *q4 = malloc(n / 2);
    for (int width = 8; width >= 4; width -= 4) {
        double sum = 0, sum2 = 0;
        for (size_t d = 0; d < draws; d++) {
            for (size_t i = 0; i < n; i++) x[i] = (float)(0.3 + gauss());
            for (size_t b = 0; b < nb; b++)
                x[b * block + (size_t)rnd_int(0, (int)block - 1)] = rnd_int(0, 1) ? 6.0f : -6.0f;
            if (width == 8) zt_quant8(x, n, block, q8, s), zt_dequant8(q8, s, n, block, y);
            else zt_quant4(x, n, block, q4, s), zt_dequant4(q4, s, n, block, y);
            for (size_t i = 0; i < n; i++) {
                double e = (double)y[i] - (double)x[i];
                sum += e, sum2 += e * e;
            }
        }
        double count = (double)(n * draws), mean = sum / count;
        double limit = 3 * sqrt(sum2 / count - mean * mean) / sqrt(count);
        CHECK_MSG(fabs(mean) <= limit, "int%d: mean error %.3g, limit %.3g", width, mean, limit);
        printf("  int%d: mean error %+.3g (3 sigma/sqrt(N) = %.3g)\n", width, mean, limit);
    }
    free(x), free(y), free(s), free(q8), free(q4);
}

/* GB/s of fp32 data (4 bytes per element) on 16M floats, block 256; best of three. Not asserted. */
static void test_throughput(void)
{
    const size_t n = (size_t)1 << 24, block = 256, nb = nblocks(n, block);
    enum { K = 4 };
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *s[K];
    int8_t *q8 = malloc(n);
    uint8_t *q4[K];
    for (size_t i = 0; i < n; i++) x[i] = rnd();
    for (int j = 0; j < K; j++) {
        s[j] = malloc(nb * sizeof(float)), q4[j] = malloc(n / 2);
        zt_quant4(x, n, block, q4[j], s[j]);
    }
    zt_quant8(x, n, block, q8, s[0]);
    for (int scalar = 1; scalar >= 0; scalar--) {
        zt_quant_force_scalar(scalar);
        double best[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
        for (int rep = 0; rep < 3; rep++)
            for (int op = 0; op < 4; op++) {
                double t = omp_get_wtime();
                if (op == 0) zt_quant8(x, n, block, q8, s[0]);
                if (op == 1) zt_dequant8(q8, s[0], n, block, y);
                if (op == 2) zt_quant4(x, n, block, q4[0], s[0]);
                if (op == 3) zt_dequant4_sum((const uint8_t *const *)q4, (const float *const *)s, K, n, block, y, 1);
                t = omp_get_wtime() - t;
                best[op] = t < best[op] ? t : best[op];
            }
        double gb = (double)n * 4 / 1e9;
        printf("  %-6s (%d threads): quant8 %.1f GB/s, dequant8 %.1f GB/s, quant4 %.1f GB/s, "
               "dequant4_sum k=%d %.1f GB/s\n",
               path_name(scalar), omp_get_max_threads(), gb / best[0], gb / best[1], gb / best[2], K, gb / best[3]);
    }
    zt_quant_force_scalar(0);
    for (int j = 0; j < K; j++) free(s[j]), free(q4[j]);
    free(x), free(y), free(q8);
}

int main(void)
{
    RUN(test_random_against_reference);
    RUN(test_large_parallel);
    RUN(test_exact_round_trip);
    RUN(test_zero_blocks);
    RUN(test_nonfinite);
    RUN(test_dequant4_sum);
    RUN(test_no_bias);
    RUN(test_throughput);
    return test_summary();
}
