/* zt_cpu_gemm's fp32 products (OpenBLAS, or oneDNN's blocks where zt uses it: kernels/cpu/gemm_dnnl.c)
 * against a double-precision reference: a LoRA adapter's and a layer's shapes, tails of rows and
 * columns, every layout, alpha and beta, padded leading dimensions, beta 0 ignoring NaN in C, the
 * same bits on a second call; which products oneDNN takes (training's where oneDNN runs, none
 * where it does not); where it runs, the same bits on 1, 2 and 3 threads and a row of C the same
 * for any M of 16 or more. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/ops.h"
#include "tests/unit/test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float next_unit(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static float *random_f32(size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = next_unit();
    return x;
}

/* Wrong elements of C (or its padding changed) against the sum in double; the bound is what fp32
 * summation of K products may lose, (K + 8) units of 2^-24 of |alpha|·Σ|a||b|, plus the rounding
 * of beta·c and of the result. */
typedef void (*gemm_fn)(int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
static gemm_fn product = zt_cpu_gemm; /* what check() runs */

static int check(int ta, int tb, int M, int N, int K, int pad, float alpha, float beta, int nan_c)
{
    int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad, bad = 0;
    float *A = random_f32((size_t)(ta ? K : M) * lda), *B = random_f32((size_t)(tb ? N : K) * ldb);
    float *C0 = random_f32((size_t)M * ldc), *C = malloc((size_t)M * ldc * sizeof *C);
    if (nan_c)
        for (size_t i = 0; i < (size_t)M * ldc; i++) C0[i] = i % 2 ? NAN : -INFINITY;
    memcpy(C, C0, (size_t)M * ldc * sizeof *C);
    product(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) {
            double c = C[(size_t)i * ldc + j], c0 = C0[(size_t)i * ldc + j];
            if (j >= N) {
                bad += memcmp(&C[(size_t)i * ldc + j], &C0[(size_t)i * ldc + j], sizeof(float)) != 0;
                continue;
            }
            double sum = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                sum += a * b, mag += fabs(a * b);
            }
            double old = beta != 0 ? beta * c0 : 0, want = alpha * sum + old; /* beta 0: C is never read */
            double tol = ((K + 8) * fabs(alpha) * mag + 2 * fabs(old) + fabs(want)) * 0x1p-24;
            bad += !(fabs(c - want) <= tol);
        }
    if (!nan_c) { /* a second call, from the same C, gives the same bits */
        float *again = malloc((size_t)M * ldc * sizeof *again);
        memcpy(again, C0, (size_t)M * ldc * sizeof *again);
        product(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, again, ldc);
        bad += memcmp(again, C, (size_t)M * ldc * sizeof *C) != 0;
        free(again);
    }
    free(A), free(B), free(C0), free(C);
    return bad;
}

/* the products of a rank-16 adapter on a 512-wide layer over 1024 tokens: x·Aᵀ, u·Bᵀ, dy·B, du·A,
 * duᵀ·x and dyᵀ·u; a narrow score head's (N = 1); a layer's three with tails of rows (not a
 * multiple of 16 or of a block) and of columns (past a 256-column block) */
static const int shapes[][5] = {{0, 1, 1024, 16, 512}, {0, 1, 1024, 1408, 16}, {0, 0, 1024, 16, 1408},
                                {0, 0, 1024, 512, 16}, {1, 0, 16, 512, 1024},  {1, 0, 1408, 16, 1024},
                                {0, 1, 2048, 1, 640},  {0, 1, 300, 520, 64},   {0, 0, 271, 300, 96},
                                {1, 0, 96, 300, 1100}};
enum { NSHAPES = sizeof shapes / sizeof shapes[0] };

static void test_adapter_products(void)
{
    static const float ab[][2] = {{1, 0}, {2, 0}, {1, 1}, {-0.5f, 0.25f}};
    for (int s = 0; s < NSHAPES; s++)
        for (int c = 0; c < 4; c++)
            for (int pad = 0; pad < 8; pad += 7) {
                const int *d = shapes[s];
                int bad = check(d[0], d[1], d[2], d[3], d[4], pad, ab[c][0], ab[c][1], 0);
                CHECK_MSG(bad == 0, "ta=%d tb=%d %dx%dx%d pad %d alpha %g beta %g: %d wrong", d[0], d[1], d[2], d[3],
                          d[4], pad, ab[c][0], ab[c][1], bad);
            }
}

static void test_beta0_ignores_nan(void)
{
    for (int s = 0; s < NSHAPES; s++)
        CHECK_MSG(check(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4], 3, 1.5f, 0, 1) == 0,
                  "shape %d", s);
}

static int uses_dnnl(void) { return !strncmp(zt_gemm_bf16_name(), "oneDNN", 6); }

static int dnnl_ran;
static void dnnl_product(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                         int ldb, float beta, float *C, int ldc)
{
    dnnl_ran += zt_gemm_f32_dnnl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Run first in the process, before any product has grown a thread's buffers: oneDNN's blocks on
 * 4 rows (zt_cpu_gemm leaves fewer than 16 fp32 rows to OpenBLAS; the bf16 products bring them
 * here) of an LM head's product (256 x 256 blocks, the rows padded to 16, each block's C made in a
 * dense buffer) and of a layer's (one block, run outside a parallel region, where oneDNN's fp32
 * kernel planned for one thread was handed two and overran its scratchpad: a crash). Where zt
 * does not use oneDNN there is nothing to run. */
static void test_few_rows_first(void)
{
    if (!uses_dnnl()) return;
    product = dnnl_product;
    CHECK(check(0, 1, 4, 512, 512, 0, 1, 0, 0) == 0);
    CHECK(check(0, 1, 4, 4200, 1000, 0, 1, 0, 0) == 0);
    CHECK(dnnl_ran == 4); /* each check runs the product twice */
    product = zt_cpu_gemm;
}

/* oneDNN runs the fp32 products exactly where zt runs its bf16 products through it too; it
 * takes training's and a decoder's few rows of them (decided by N and K), not a small product */
static void test_which_products(void)
{
    int dnnl = uses_dnnl();
    size_t n = 1 << 22;
    float *A = random_f32(n), *B = random_f32(n), *C = calloc(n, sizeof *C);
    for (int s = 0; s < NSHAPES; s++) {
        const int *d = shapes[s];
        int lda = d[0] ? d[2] : d[4], ldb = d[1] ? d[4] : d[3];
        CHECK_MSG(!zt_gemm_dnnl_takes(d[0], d[2], d[3], d[4]) ||
                      zt_gemm_f32_dnnl(d[0], d[1], d[2], d[3], d[4], 1, A, lda, B, ldb, 0, C, d[3]) == dnnl,
                  "shape %d (bf16 products: %s)", s, zt_gemm_bf16_name());
    }
    CHECK(zt_gemm_dnnl_takes(0, 1024, 1408, 512) && zt_gemm_dnnl_takes(1, 512, 1408, 1024)); /* a layer's */
    CHECK(zt_gemm_dnnl_takes(0, 4, 16, 512));                                                /* a decoder's */
    CHECK(!zt_gemm_dnnl_takes(0, 4, 8, 64) && !zt_gemm_dnnl_takes(1, 8, 64, 64));            /* small */
    free(A), free(B), free(C);
}

/* Where oneDNN runs them: the same bits on 1, 2 and 3 threads (a weight gradient's long token
 * axis is never split by the thread count), and rows of C that are rows of A the same bits
 * for any M of 16 or more (a sequence alone or in a micro-batch, in a tail of rows). */
static void test_deterministic(void)
{
    if (!uses_dnnl()) return;
    static const int sh[][5] = {{0, 1, 600, 1408, 512},
                                {0, 0, 600, 300, 96},
                                {1, 0, 512, 16, 8192},
                                {1, 0, 300, 520, 1100}};
    int saved = omp_get_max_threads();
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        int ta = sh[s][0], tb = sh[s][1], M = sh[s][2], N = sh[s][3], K = sh[s][4];
        int lda = ta ? M : K, ldb = tb ? K : N;
        float *A = random_f32((size_t)M * K), *B = random_f32((size_t)N * K), *c[3];
        for (int th = 0; th < 3; th++) {
            c[th] = malloc((size_t)M * N * sizeof(float));
            omp_set_num_threads(th + 1);
            zt_cpu_gemm(ta, tb, M, N, K, 1, A, lda, B, ldb, 0, c[th], N);
        }
        omp_set_num_threads(saved);
        size_t bytes = (size_t)M * N * sizeof(float);
        CHECK_MSG(!memcmp(c[0], c[1], bytes) && !memcmp(c[0], c[2], bytes), "shape %zu: thread counts differ", s);
        static const int ms[] = {16, 17, 31, 255, 256, 257, 300, 513}; /* fewer: OpenBLAS's */
        for (size_t q = 0; q < sizeof ms / sizeof ms[0] && !ta; q++) {
            zt_cpu_gemm(0, tb, ms[q], N, K, 1, A, lda, B, ldb, 0, c[1], N);
            CHECK_MSG(!memcmp(c[1], c[0], (size_t)ms[q] * N * sizeof(float)), "shape %zu: M=%d gives other rows", s,
                      ms[q]);
        }
        for (int th = 0; th < 3; th++) free(c[th]);
        free(A), free(B);
    }
}

int main(void)
{
    RUN(test_few_rows_first); /* first: what it checks needs buffers no product has grown */
    RUN(test_adapter_products);
    RUN(test_beta0_ignores_nan);
    RUN(test_which_products);
    RUN(test_deterministic);
    return test_summary();
}
