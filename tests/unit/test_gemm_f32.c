/* zt_cpu_gemm's skinny fp32 products (kernels/cpu/gemm_f32_dnnl.c: a LoRA adapter's, through
 * oneDNN where zt uses it) against a double-precision reference: every layout, alpha and beta,
 * padded leading dimensions, beta 0 ignoring NaN in C, the same bits on a second call; which
 * products oneDNN takes (the adapters' shapes where oneDNN runs, none where it does not). */
#include <math.h>
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
static int check(int ta, int tb, int M, int N, int K, int pad, float alpha, float beta, int nan_c)
{
    int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad, bad = 0;
    float *A = random_f32((size_t)(ta ? K : M) * lda), *B = random_f32((size_t)(tb ? N : K) * ldb);
    float *C0 = random_f32((size_t)M * ldc), *C = malloc((size_t)M * ldc * sizeof *C);
    if (nan_c)
        for (size_t i = 0; i < (size_t)M * ldc; i++) C0[i] = i % 2 ? NAN : -INFINITY;
    memcpy(C, C0, (size_t)M * ldc * sizeof *C);
    zt_cpu_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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
        zt_cpu_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, again, ldc);
        bad += memcmp(again, C, (size_t)M * ldc * sizeof *C) != 0;
        free(again);
    }
    free(A), free(B), free(C0), free(C);
    return bad;
}

/* the products of a rank-16 adapter on a 512-wide layer over 1024 tokens: x·Aᵀ, u·Bᵀ, dy·B, du·A,
 * duᵀ·x and dyᵀ·u; and a narrow score head's (N = 1) */
static const int shapes[][5] = {{0, 1, 1024, 16, 512}, {0, 1, 1024, 1408, 16}, {0, 0, 1024, 16, 1408},
                                {0, 0, 1024, 512, 16}, {1, 0, 16, 512, 1024},  {1, 0, 1408, 16, 1024},
                                {0, 1, 2048, 1, 640}};
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

/* oneDNN takes the adapters' products exactly where zt runs its bf16 products through it too,
 * and never a layer's or a decoder's few rows */
static void test_which_products(void)
{
    const char *path = zt_gemm_bf16_name();
    int dnnl = !strncmp(path, "oneDNN", 6);
    size_t n = 1 << 22;
    float *A = random_f32(n), *B = random_f32(n), *C = calloc(n, sizeof *C);
    for (int s = 0; s < NSHAPES; s++) {
        const int *d = shapes[s];
        int lda = d[0] ? d[2] : d[4], ldb = d[1] ? d[4] : d[3];
        CHECK_MSG(zt_gemm_f32_skinny(d[0], d[1], d[2], d[3], d[4], 1, A, lda, B, ldb, 0, C, d[3]) == dnnl,
                  "shape %d (bf16 products: %s)", s, path);
    }
    CHECK(!zt_gemm_f32_skinny(0, 1, 1024, 1408, 512, 1, A, 512, B, 512, 0, C, 1408)); /* a layer's */
    CHECK(!zt_gemm_f32_skinny(0, 1, 4, 16, 512, 1, A, 512, B, 512, 0, C, 16));        /* a decoder's rows */
    free(A), free(B), free(C);
}

int main(void)
{
    RUN(test_adapter_products);
    RUN(test_beta0_ignores_nan);
    RUN(test_which_products);
    return test_summary();
}
