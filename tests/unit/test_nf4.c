/* NF4 against the reference encoder: tests/fixtures/nf4/vectors.safetensors (make_fixture.py, with
 * bitsandbytes' CPU backend; nothing of it is needed here) holds weights and the bytes, absmax values,
 * double-quantized absmax values and dequantized weights the reference made of them. zt's must be
 * the same bit for bit. Then the error bounds of NF4 and of int8 rows, which follow from the formats. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dyn8.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cpu/nf4_kernel.h"
#include "lib/ckpt/safetensors.h"
#include "lib/core/cpu.h"
#include "test.h"

static zt_st_reader *fixture;

/* Tensor name's bytes, which must be n elements of size bytes each */
static const void *tensor(const char *name, size_t n, size_t size)
{
    const zt_st_tensor *t = zt_st_find(fixture, name);
    CHECK_MSG(t && t->nbytes == n * size, "%s", name);
    return t && t->nbytes == n * size ? t->data : NULL;
}

/* float arrays compared bit for bit (the mapping may be unaligned: memcmp) */
static int same_bits(const void *a, const void *b, size_t bytes) { return a && b && !memcmp(a, b, bytes); }

static void test_tables(void)
{
    CHECK(same_bits(tensor("nf4code", 16, 4), zt_nf4_code, sizeof zt_nf4_code));
    /* the fixture's dynamic code is the reference's table as is: its first entry -0.99297 */
    CHECK(same_bits(tensor("dyncode", 256, 4), zt_dyn8_code, sizeof zt_dyn8_code));
}

static void test_nf4_matches_reference(void)
{
    enum { N = 600, NB = 10 };
    float w[N], absmax[NB], y[N];
    uint8_t q[N / 2];
    const void *src = tensor("w1", N, 4);
    if (!src) return;
    memcpy(w, src, sizeof w);
    CHECK(zt_nf4_quantize(w, N, q, absmax) == 0);
    CHECK(same_bits(tensor("w1.q", N / 2, 1), q, sizeof q));
    CHECK(same_bits(tensor("w1.absmax", NB, 4), absmax, sizeof absmax));
    zt_nf4_dequantize(q, absmax, 0, N, y);
    CHECK(same_bits(tensor("w1.deq", N, 4), y, sizeof y));
    /* a piece that starts inside a byte and a block */
    zt_nf4_dequantize(q, absmax, 77, 100, y);
    CHECK(same_bits((const float *)tensor("w1.deq", N, 4) + 77, y, 100 * sizeof *y));
}

/* Every range of a tensor decodes to code[q] · absmax, bit for bit, whatever the CPU level decodes
 * its whole blocks with: ranges that start and end inside a byte or a block, inside one block,
 * and large enough for the parallel loop; random codes and absmax values of both signs. */
static void test_dequantize_ranges(void)
{
    enum { NB = 1200, N = NB * ZT_NF4_BLOCK };
    uint8_t *q = malloc(N / 2);
    float *absmax = malloc(NB * sizeof *absmax), *y = malloc(N * sizeof *y), *want = malloc(N * sizeof *want);
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < N / 2; i++) s ^= s << 13, s ^= s >> 7, s ^= s << 17, q[i] = (uint8_t)(s >> 32);
    for (size_t b = 0; b < NB; b++)
        s ^= s << 13, s ^= s >> 7, s ^= s << 17, absmax[b] = (float)((int64_t)s >> 11) * 1e-15f;
    for (size_t i = 0; i < N; i++)
        want[i] = zt_nf4_code[i % 2 ? q[i / 2] & 0xf : q[i / 2] >> 4] * absmax[i / ZT_NF4_BLOCK];
    const size_t ranges[][2] = {{0, N}, {1, N - 1},   {77, 100},   {64, 64},     {63, 2}, {130, 3},
                                {5, 1}, {640, 70000}, {33, 65600}, {N - 65, 65}, {128, 0}};
    int bad = 0;
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
        size_t first = ranges[r][0], n = ranges[r][1];
        memset(y, 0xff, N * sizeof *y);
        zt_nf4_dequantize(q, absmax, first, n, y);
        if (!same_bits(want + first, y, n * sizeof *y)) bad++, fprintf(stderr, "  [%zu, +%zu) differs\n", first, n);
    }
    if (zt_cpu_has(ZT_CPU_AVX2)) { /* the AVX2 blocks alone */
        zt_nf4_dequantize_blocks_avx2(q, absmax, 3, NB, y);
        bad += !same_bits(want + 3 * ZT_NF4_BLOCK, y, (size_t)(NB - 3) * ZT_NF4_BLOCK * sizeof *y);
    }
    fprintf(stderr, "  CPU level %s\n", zt_cpu_has(ZT_CPU_AVX2) ? "with AVX2" : "without AVX2");
    CHECK(bad == 0);
    free(q), free(absmax), free(y), free(want);
}

/* got against ref + Σ a[i·as]·b[i·bs] (n terms) in double, as a fraction of its bound: an fp32
 * sum of n products within (n + 2)·2⁻²⁴ of Σ|terms|, the ref term (beta's) within 2⁻²³ of itself */
static double sum_error(float got, double ref, const float *a, int as, const float *b, int bs, int n)
{
    double sum = 0, abs = 0;
    for (int i = 0; i < n; i++) {
        double t = (double)a[(size_t)i * as] * b[(size_t)i * bs];
        sum += t, abs += fabs(t);
    }
    return fabs(got - (ref + sum)) / ((n + 2) * 0x1p-24 * abs + fabs(ref) * 0x1p-23 + 1e-30);
}

/* *worst raised to e, or to NaN for good (which then fails the check) */
static void worse(double *worst, double e)
{
    if (!isnan(*worst) && !(e <= *worst)) *worst = e;
}

/* The few-row products on the weights as they are decoded (zt_nf4_product, zt_nf4_product_t)
 * against the decoded weights' products in double: rows of 64 (whole blocks), 96 and 1000
 * elements (rows that start inside blocks; 1000 also spans two of the kernel's pieces of 512),
 * starting at row 3 of the tensor, 1, 3 and 8 rows of input (y's starting values the
 * backward's dy), beta 0 over NaN (overwritten) and 0.5. Each output is an fp32 sum of n
 * products (n = the row length forward, the rows backward): within (n + 2)·2⁻²⁴ of Σ|terms|, the
 * beta term within 2⁻²³ of itself (sum_error). */
static void test_few_row_products(void)
{
    enum { O = 37, R0 = 3, MAXK = 1000, MAXM = 8 };
    const int Ks[] = {64, 96, 1000}, Ms[] = {1, 3, 8};
    size_t n = (size_t)(O + R0) * MAXK;
    uint8_t *q = malloc(n / 2 + 1);
    float *absmax = malloc(zt_nf4_blocks(n) * sizeof *absmax), *w = malloc(n * sizeof *w);
    float *x = malloc((size_t)MAXM * MAXK * sizeof *x), *y = malloc((size_t)MAXM * O * sizeof *y),
          *y0 = malloc((size_t)MAXM * O * sizeof *y0), *dx = malloc((size_t)MAXM * MAXK * sizeof *dx),
          *dx0 = malloc((size_t)MAXM * MAXK * sizeof *dx0);
    uint64_t s = 2463534242ull;
#define NEXT() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1))
    for (size_t i = 0; i < n; i++) w[i] = 0.1f * NEXT();
    CHECK(zt_nf4_quantize(w, n, q, absmax) == 0);
    double worst = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 2; c++) {
                int K = Ks[a], M = Ms[b];
                float beta = c ? 0.5f : 0.0f;
                size_t first = (size_t)R0 * K;
                zt_nf4_dequantize(q, absmax, first, (size_t)O * K, w); /* W [O, K] */
                for (int i = 0; i < M * K; i++) x[i] = NEXT(), dx[i] = dx0[i] = c ? NEXT() : NAN;
                for (int i = 0; i < M * O; i++) y0[i] = NEXT(), y[i] = c ? y0[i] : NAN;
                zt_nf4_product(q, absmax, first, O, K, x, M, y, O, beta);
                zt_nf4_product_t(q, absmax, first, O, K, y0, O, M, dx, beta); /* dy: y's values before */
                for (int r = 0; r < M; r++) {
                    for (int o = 0; o < O; o++)
                        worse(&worst, sum_error(y[r * O + o], c ? beta * (double)y0[r * O + o] : 0, x + r * K, 1,
                                                w + (size_t)o * K, 1, K));
                    for (int i = 0; i < K; i++)
                        worse(&worst, sum_error(dx[r * K + i], c ? beta * (double)dx0[r * K + i] : 0, y0 + r * O, 1,
                                                w + i, K, O));
                }
            }
#undef NEXT
    fprintf(stderr, "  worst error %.3g of its bound\n", worst);
    CHECK(worst <= 1);
    free(q), free(absmax), free(w), free(x), free(y), free(y0), free(dx), free(dx0);
}

static void test_double_quant_matches_reference(void)
{
    enum { N = 300 * 64, NB = 300, NB2 = 2 };
    float *w = malloc(N * sizeof *w), *y = malloc(N * sizeof *y), absmax[NB], b[NB2], deq[NB];
    uint8_t *q = malloc(N / 2), qa[NB];
    const void *src = tensor("w2", N, 4), *off = tensor("w2.offset", 1, 4);
    if (!src || !off || !w || !y || !q) goto done;
    memcpy(w, src, N * sizeof *w);
    CHECK(zt_nf4_quantize(w, N, q, absmax) == 0);
    CHECK(same_bits(tensor("w2.q", N / 2, 1), q, N / 2));
    CHECK(same_bits(tensor("w2.absmax_fp32", NB, 4), absmax, sizeof absmax));
    /* the reference sums the mean in float, zt in double: they may differ by rounding, a few ulp */
    float mu = zt_nf4_dq_offset(absmax, NB), ref_mu;
    memcpy(&ref_mu, off, 4);
    CHECK_NEAR(mu, ref_mu, 4 * 1.2e-7 * ref_mu);
    zt_nf4_dq_quantize(absmax, NB, ref_mu, qa, b);
    CHECK(same_bits(tensor("w2.qabsmax", NB, 1), qa, sizeof qa));
    CHECK(same_bits(tensor("w2.absmax2", NB2, 4), b, sizeof b));
    zt_nf4_dq_dequantize(qa, b, ref_mu, 0, NB, deq);
    CHECK(same_bits(tensor("w2.absmax_deq", NB, 4), deq, sizeof deq));
    zt_nf4_dequantize(q, deq, 0, N, y);
    CHECK(same_bits(tensor("w2.deq", N, 4), y, N * sizeof *y));
done:
    free(w), free(y), free(q);
}

/* |x - dequant(x)| <= a · (the widest gap between neighbouring codes) / 2 per element, a its block's
 * absmax: the code is the nearest one, up to the float roundings of x · (1/a) and code · a (a few
 * ulp of a, covered by the 1e-6 relative slack). The widest gap is from -1 to -0.696. */
static void test_nf4_error_bound(void)
{
    enum { N = 64 * 40 + 17 };
    float x[N], y[N], absmax[zt_nf4_blocks(N)];
    uint8_t q[(N + 1) / 2];
    unsigned s = 12345;
    for (int i = 0; i < N; i++) s = s * 1103515245u + 12345u, x[i] = ((s >> 8) / 16777216.0f - 0.5f) * (1 + i % 7);
    CHECK(zt_nf4_quantize(x, N, q, absmax) == 0);
    zt_nf4_dequantize(q, absmax, 0, N, y);
    double gap = 0;
    for (int i = 0; i < 15; i++) gap = fmax(gap, zt_nf4_code[i + 1] - zt_nf4_code[i]);
    for (int i = 0; i < N; i++) {
        double a = absmax[i / 64];
        CHECK_MSG(fabs(x[i] - y[i]) <= a * (gap / 2 + 1e-6), "element %d: %g against %g", i, y[i], x[i]);
    }
    x[5] = NAN;
    CHECK(zt_nf4_quantize(x, N, q, absmax) == 1);
}

/* int8 rows: |x - y| <= a / 254 per element, a the row's absmax, up to the float roundings of
 * 127 / a, the product and a / 127 (1e-6 relative); an all-zero row stays zero. */
static void test_int8_rows(void)
{
    enum { R = 5, C = 33 };
    float x[R * C], y[R * C], absmax[R];
    int8_t q[R * C];
    for (int i = 0; i < R * C; i++) x[i] = i / C == 3 ? 0 : sinf((float)i * 0.7f) * (1 + i / C);
    CHECK(zt_int8_rows_quantize(x, R, C, q, absmax) == 0);
    zt_int8_rows_dequantize(q, absmax, C, 0, R, y);
    for (int i = 0; i < R * C; i++) CHECK_MSG(fabs(x[i] - y[i]) <= absmax[i / C] * (1.0 / 254 + 1e-6), "element %d", i);
    CHECK(absmax[3] == 0 && y[3 * C] == 0);
    zt_int8_rows_dequantize(q, absmax, C, 2, 1, y);
    CHECK(y[0] == (float)q[2 * C] * (absmax[2] / 127.0f));
}

int main(void)
{
    if (zt_st_open(&fixture, "tests/fixtures/nf4/vectors.safetensors")) {
        fprintf(stderr, "cannot open the fixture: %s\n", zt_errmsg());
        return 1;
    }
    RUN(test_tables);
    RUN(test_nf4_matches_reference);
    RUN(test_dequantize_ranges);
    RUN(test_few_row_products);
    RUN(test_double_quant_matches_reference);
    RUN(test_nf4_error_bound);
    RUN(test_int8_rows);
    zt_st_close(fixture);
    return test_summary();
}
