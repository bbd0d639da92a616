/* zt_gemm_bf16 on every CPU path against a double-precision reference on the same bf16
 * inputs; zt_f32_to_bf16_array and the cross-entropy's bf16 gradient against zt_f32_to_bf16;
 * and GFLOP/s next to OpenBLAS sgemm. */
#include <cblas.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_bf16_kernel.h"
#include "kernels/cpu/ops.h"
#include "lib/core/cpu.h"
#include "lib/core/dtype.h"
#include "tests/unit/test.h"

typedef void (*gemm_fn)(int, int, int, int, int, float, const uint16_t *, int, const uint16_t *, int, float, float *,
                        int);

static void gemm_scalar(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A, int lda, const uint16_t *B,
                        int ldb, float beta, float *C, int ldc)
{
    zt_gemm_bf16_blocked(&zt_gemm_bf16_scalar, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void gemm_avx2(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A, int lda, const uint16_t *B,
                      int ldb, float beta, float *C, int ldc)
{
    zt_gemm_bf16_blocked(&zt_gemm_bf16_avx2, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void gemm_avx512(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A, int lda, const uint16_t *B,
                        int ldb, float beta, float *C, int ldc)
{
    zt_gemm_bf16_blocked(&zt_gemm_bf16_avx512bf16, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* oneDNN's matmul on every shape (zt_gemm_bf16 gives it only large ones); where it declines
 * a shape, the scalar kernel answers, so the check still means something */
static void gemm_dnnl(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A, int lda, const uint16_t *B,
                      int ldb, float beta, float *C, int ldc)
{
    if (!zt_gemm_bf16_dnnl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        gemm_scalar(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

typedef struct {
    const char *name;
    gemm_fn fn;
    zt_cpu_feature need; /* 0: runs anywhere */
} path;

static const path paths[] = {
    {"loops", zt_gemm_bf16_ref, 0}, /* the reference: first, and only on small shapes */
    {"scalar", gemm_scalar, 0},
    {"avx2", gemm_avx2, ZT_CPU_AVX2},
    {"avx512-bf16", gemm_avx512, ZT_CPU_AVX512BF16},
    {"onednn", gemm_dnnl, ZT_CPU_AVX2},
    {"dispatch", zt_gemm_bf16, 0},
};
enum { NPATHS = sizeof paths / sizeof paths[0] };

static int path_runs(const path *p) { return !p->need || zt_cpu_has(p->need); }

static uint64_t rng = 88172645463325252ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float next_unit(void) { return (float)(next_u32() & 0xffffff) / 16777216.0f * 2.0f - 1.0f; }

static uint16_t *random_bf16(size_t n)
{
    uint16_t *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = zt_f32_to_bf16(next_unit());
    return x;
}

/* A problem: operands stored as the trans flags say, leading dimensions padded by `pad`, and
 * what C must become (want) within what fp32 summation of K products may lose (tol):
 * (K + 8) ulps of |alpha|·Σ|a||b| + |beta·c|. Padding columns of C must keep their value. */
typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    uint16_t *A, *B;
    float *C0;          /* C before the call */
    double *want, *tol; /* [M * ldc] */
} problem;

static double a_at(const problem *p, int i, int k)
{
    return zt_bf16_to_f32(p->ta ? p->A[(size_t)k * p->lda + i] : p->A[(size_t)i * p->lda + k]);
}
static double b_at(const problem *p, int k, int j)
{
    return zt_bf16_to_f32(p->tb ? p->B[(size_t)j * p->ldb + k] : p->B[(size_t)k * p->ldb + j]);
}

/* A product with A's rows pad_a elements longer than it uses, and B's and C's pad_bc */
static problem problem_make_padded(int ta, int tb, int M, int N, int K, int pad_a, int pad_bc, float alpha, float beta)
{
    problem p = {ta,   tb,   M,    N,    K,   (ta ? M : K) + pad_a, (tb ? K : N) + pad_bc, N + pad_bc, alpha, beta,
                 NULL, NULL, NULL, NULL, NULL};
    size_t csize = (size_t)M * p.ldc;
    p.A = random_bf16((size_t)(ta ? K : M) * p.lda);
    p.B = random_bf16((size_t)(tb ? N : K) * p.ldb);
    p.C0 = malloc(csize * sizeof(float));
    p.want = malloc(csize * sizeof(double));
    p.tol = malloc(csize * sizeof(double));
    for (size_t i = 0; i < csize; i++) p.C0[i] = next_unit();
    double *arow = malloc((size_t)K * sizeof(double));
    for (int i = 0; i < M; i++) {
        for (int k = 0; k < K; k++) arow[k] = a_at(&p, i, k);
        for (int j = 0; j < p.ldc; j++) {
            size_t at = (size_t)i * p.ldc + j;
            double c0 = p.C0[at];
            if (j >= N) {
                p.want[at] = c0;
                p.tol[at] = 0;
                continue;
            }
            double sum = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double ab = arow[k] * b_at(&p, k, j);
                sum += ab;
                mag += fabs(ab);
            }
            double cterm = beta == 0.0f ? 0.0 : beta * c0;
            p.want[at] = alpha * sum + cterm;
            p.tol[at] = (K + 8) * 0x1p-23 * (fabs(alpha) * mag + fabs(cterm));
        }
    }
    free(arow);
    return p;
}

static problem problem_make(int ta, int tb, int M, int N, int K, int pad, float alpha, float beta)
{
    return problem_make_padded(ta, tb, M, N, K, pad, pad, alpha, beta);
}

static void problem_free(problem *p)
{
    free(p->A);
    free(p->B);
    free(p->C0);
    free(p->want);
    free(p->tol);
}

/* Runs fn on a copy of C0 and counts the elements off by more than tol (printing a few). */
static int problem_check(const problem *p, gemm_fn fn, const char *name)
{
    size_t csize = (size_t)p->M * p->ldc;
    float *C = malloc(csize * sizeof(float));
    memcpy(C, p->C0, csize * sizeof(float));
    fn(p->ta, p->tb, p->M, p->N, p->K, p->alpha, p->A, p->lda, p->B, p->ldb, p->beta, C, p->ldc);
    int bad = 0;
    for (size_t at = 0; at < csize; at++)
        if (!(fabs(C[at] - p->want[at]) <= p->tol[at]) && bad++ < 3)
            fprintf(stderr, "  %s ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g: C[%zu,%zu] = %.9g, want %.9g\n", name,
                    p->ta, p->tb, p->M, p->N, p->K, p->alpha, p->beta, at / p->ldc, at % p->ldc, C[at], p->want[at]);
    free(C);
    return bad;
}

/* Run first in the process, before any product has grown a thread's buffers: a decoder's few
 * rows of a product cut in 256 x 256 blocks (an LM head's logits: the rows padded to 16, each
 * block's C made in a dense buffer) and of a product of one block (a layer's, run outside a
 * parallel region). The padded block wrote 16 rows into a dense buffer sized for the 4 real ones
 * (heap corruption; seen as a crash of fp32 decoding, and as an error under the sanitizers). */
static void test_few_rows_first(void)
{
    static const int shapes[][3] = {{4, 512, 512}, {4, 4200, 1000}};
    for (int s = 0; s < 2; s++) {
        problem p = problem_make(0, 1, shapes[s][0], shapes[s][1], shapes[s][2], 0, 1.0f, 0.0f);
        CHECK_MSG(problem_check(&p, zt_gemm_bf16, "zt_gemm_bf16") == 0, "%dx%dx%d", p.M, p.N, p.K);
        problem_free(&p);
    }
}

static void test_shapes_all_paths(void)
{
    static const int sizes[] = {1, 3, 17, 64, 127, 300};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    int bad = 0, runs = 0;
    for (int t = 0; t < 4; t++)
        for (int im = 0; im < NS; im++)
            for (int in = 0; in < NS; in++)
                for (int ik = 0; ik < NS; ik++) {
                    int M = sizes[im], N = sizes[in], K = sizes[ik];
                    problem p = problem_make(t >> 1, t & 1, M, N, K, (M + N + K) % 3, 1.0f, 0.0f);
                    for (int q = 0; q < NPATHS; q++) {
                        /* the scalar loops are slow; their answers on smaller shapes suffice */
                        if (!path_runs(&paths[q]) || (paths[q].fn == zt_gemm_bf16_ref && M * N * K > 300000)) continue;
                        bad += problem_check(&p, paths[q].fn, paths[q].name);
                        runs++;
                    }
                    problem_free(&p);
                }
    CHECK_MSG(bad == 0, "%d wrong elements in %d runs", bad, runs);
}

static void test_alpha_beta(void)
{
    static const float ab[][2] = {{1, 0}, {0.5f, 0}, {1, 1}, {-2, 0.25f}, {0.75f, -1}, {0, 0.5f}, {0, 0}};
    int bad = 0;
    /* small, and large enough for oneDNN's cuts: blocks whose C is made in a dense buffer (padded
       rows), bands whose transposed A is packed (dense), bands of a strided A's rows packed
       (only A padded), their packed B */
    static const int shape[][5] = {
        {37, 70, 45, 5, 5}, {300, 520, 64, 5, 5}, {300, 520, 64, 0, 0}, {300, 48, 200, 7, 0}, {600, 24, 400, 9, 0}};
    enum { NSHAPES = sizeof shape / sizeof shape[0] };
    for (size_t c = 0; c < sizeof ab / sizeof ab[0]; c++)
        for (int s = 0; s < NSHAPES; s++)
            for (int t = 0; t < 4; t++) {
                problem p = problem_make_padded(t >> 1, t & 1, shape[s][0], shape[s][1], shape[s][2], shape[s][3],
                                                shape[s][4], ab[c][0], ab[c][1]);
                for (int q = 0; q < NPATHS; q++)
                    if (path_runs(&paths[q]) && (s == 0 || paths[q].fn != zt_gemm_bf16_ref))
                        bad += problem_check(&p, paths[q].fn, paths[q].name);
                problem_free(&p);
            }
    CHECK_MSG(bad == 0, "%d wrong elements", bad);
}

/* beta == 0 must not read C: NaN and Inf there must not leak into the result. */
static void test_beta0_ignores_nan(void)
{
    for (int q = 0; q < NPATHS; q++) {
        if (!path_runs(&paths[q])) continue;
        for (int t = 0; t < 4; t++)
            for (int alpha0 = 0; alpha0 < 2; alpha0++) {
                problem p = problem_make(t >> 1, t & 1, 19, 41, 33, 0, alpha0 ? 0.0f : 1.5f, 0.0f);
                for (int i = 0; i < p.M * p.ldc; i++) p.C0[i] = i % 2 ? NAN : -INFINITY;
                CHECK_MSG(problem_check(&p, paths[q].fn, paths[q].name) == 0, "%s ta=%d tb=%d alpha=%g", paths[q].name,
                          p.ta, p.tb, p.alpha);
                problem_free(&p);
            }
    }
}

/* More than one K block (the kernels take 256 at a time), with an odd tail and odd lda. */
static void test_long_k(void)
{
    int bad = 0;
    for (int t = 0; t < 4; t++) {
        problem p = problem_make(t >> 1, t & 1, 29, 50, 1025, 1, 1.0f, 0.5f);
        for (int q = 1; q < NPATHS; q++)
            if (path_runs(&paths[q])) bad += problem_check(&p, paths[q].fn, paths[q].name);
        problem_free(&p);
    }
    CHECK_MSG(bad == 0, "%d wrong elements", bad);
}

/* The scalar kernel (what ZT_CPU=scalar runs) sums in the order of the plain loops, so its
 * results are theirs bit for bit: any shape, either transpose, K past any block size, any
 * nonzero alpha, beta (alpha == 0 and K == 0 only scale C, as on every blocked path). */
static void test_scalar_bitwise_loops(void)
{
    static const int mn[] = {1, 5, 17, 130}, ks[] = {1, 7, 300, 1025};
    static const float ab[][2] = {{1, 0}, {1, 1}, {-2, 0.25f}, {0.75f, -1}};
    int differ = 0, runs = 0;
    for (int t = 0; t < 4; t++)
        for (int im = 0; im < 4; im++)
            for (int in = 0; in < 4; in++)
                for (int ik = 0; ik < 4; ik++) {
                    int M = mn[im], N = mn[in], K = ks[ik], c = (im + in + ik + t) % 4;
                    problem p = problem_make(t >> 1, t & 1, M, N, K, (M + N + K) % 3, ab[c][0], ab[c][1]);
                    size_t n = (size_t)M * p.ldc;
                    float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
                    memcpy(want, p.C0, n * sizeof(float));
                    memcpy(got, p.C0, n * sizeof(float));
                    zt_gemm_bf16_ref(p.ta, p.tb, M, N, K, p.alpha, p.A, p.lda, p.B, p.ldb, p.beta, want, p.ldc);
                    gemm_scalar(p.ta, p.tb, M, N, K, p.alpha, p.A, p.lda, p.B, p.ldb, p.beta, got, p.ldc);
                    if (memcmp(want, got, n * sizeof(float)) && differ++ < 3)
                        fprintf(stderr, "  scalar != loops: ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g\n", p.ta, p.tb,
                                M, N, K, p.alpha, p.beta);
                    runs++;
                    free(want);
                    free(got);
                    problem_free(&p);
                }
    CHECK_MSG(differ == 0, "%d of %d products differ from the plain loops", differ, runs);
}

/* Each SIMD path against the scalar loops on the same inputs, element by element: both sum
 * the same exact products (bf16 x bf16 fits fp32) in other orders, each within tol of the
 * exact sum, so they differ by at most twice that. */
static void test_simd_vs_scalar(void)
{
    for (int q = 0; q < NPATHS; q++) {
        if (!paths[q].need) continue; /* the SIMD paths alone */
        if (!path_runs(&paths[q])) {
            fprintf(stderr, "  (%s path not run: this CPU lacks it)\n", paths[q].name);
            continue;
        }
        for (int t = 0; t < 4; t++) {
            problem p = problem_make(t >> 1, t & 1, 70, 90, 301, 3, 1.0f, 0.0f);
            size_t n = (size_t)p.M * p.ldc;
            float *ref = calloc(n, sizeof(float)), *got = calloc(n, sizeof(float));
            zt_gemm_bf16_ref(p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A, p.lda, p.B, p.ldb, 0.0f, ref, p.ldc);
            paths[q].fn(p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A, p.lda, p.B, p.ldb, 0.0f, got, p.ldc);
            size_t bad = 0; /* padding columns (tol 0) are never written: both stay 0 */
            for (size_t i = 0; i < n; i++) bad += !(fabs((double)got[i] - ref[i]) <= 2 * p.tol[i]);
            CHECK_MSG(bad == 0, "%s ta=%d tb=%d: %zu elements differ from scalar by more than 2 tol", paths[q].name,
                      p.ta, p.tb, bad);
            free(ref);
            free(got);
            problem_free(&p);
        }
    }
}

/* Bitwise the same result on 1, 2 and 3 threads (the K order never depends on them); the
 * second shape is a weight gradient's (few columns, a long token axis), where oneDNN left to
 * thread a product itself would split K across threads. */
static void test_deterministic_threads(void)
{
    static const int shapes[][3] = {{250, 333, 600}, {512, 16, 8192}};
    int saved = omp_get_max_threads();
    for (int q = 1; q < NPATHS; q++) {
        if (!path_runs(&paths[q])) continue;
        for (int t = 0; t < 8; t++) {
            const int *sh = shapes[t / 4];
            problem p = problem_make(t >> 1 & 1, t & 1, sh[0], sh[1], sh[2], 0, 1.0f, 0.0f);
            size_t n = (size_t)p.M * p.ldc;
            float *c[3];
            for (int th = 0; th < 3; th++) {
                c[th] = malloc(n * sizeof(float));
                omp_set_num_threads(th + 1);
                paths[q].fn(p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A, p.lda, p.B, p.ldb, 0.0f, c[th], p.ldc);
            }
            CHECK_MSG(!memcmp(c[0], c[1], n * sizeof(float)) && !memcmp(c[0], c[2], n * sizeof(float)),
                      "%s ta=%d tb=%d", paths[q].name, p.ta, p.tb);
            for (int th = 0; th < 3; th++) free(c[th]);
            problem_free(&p);
        }
    }
    omp_set_num_threads(saved);
}

/* Products of one shape at once on several threads (called inside a parallel region, and
 * blocks of one product), each the same oneDNN primitive, checked element by element. A
 * primitive left to own its scratchpad shares it between concurrent executions, and then they
 * corrupt each other: run first in the process, this failed every time on that code (100 000+
 * wrong elements of 262 144), while after the other tests it did not show in 40 repetitions. */
static void test_concurrent_products(void)
{
    enum { P = 4 };
    problem p[P];
    float *c[P];
    for (int i = 0; i < P; i++) p[i] = problem_make(0, 0, 512, 128, 128, 0, 1.0f, 0.0f);
    int bad = 0;
    for (int rep = 0; rep < 3; rep++) {
        for (int inside = 1; inside >= 0; inside--) { /* made first inside a parallel region */
            for (int i = 0; i < P; i++) c[i] = calloc((size_t)p[i].M * p[i].ldc, sizeof(float));
#pragma omp parallel for num_threads(2) if (inside)
            for (int i = 0; i < P; i++)
                gemm_dnnl(0, 0, p[i].M, p[i].N, p[i].K, 1.0f, p[i].A, p[i].lda, p[i].B, p[i].ldb, 0.0f, c[i], p[i].ldc);
            for (int i = 0; i < P; i++) {
                for (size_t at = 0; at < (size_t)p[i].M * p[i].ldc; at++)
                    bad += !(fabs(c[i][at] - p[i].want[at]) <= p[i].tol[at]);
                free(c[i]);
            }
        }
    }
    for (int i = 0; i < P; i++) problem_free(&p[i]);
    CHECK_MSG(bad == 0, "%d wrong elements", bad);
}

/* Rows of C that are rows of A (a layer's forward product, its input gradient) come out the
 * same bits whatever M is: the same token alone, in a micro-batch of 4 or of 8, in a whole
 * block of 256 rows or in a tail. t2300's 2 ranks against 1 rests on it; on a CPU with AMX,
 * oneDNN's kernels sum otherwise than zt's, and than its own kernel for a 1-row band, so this
 * failed while the kernel was chosen by M·N·K and tails ran as they came. The last pass runs
 * after more block shapes than the cache of oneDNN's primitives holds: an evicted shape is made
 * again, never handed to zt's kernels (a resumed run, whose cache starts empty, would differ). */
static void rows_against_whole(int N, int K, int tb, const uint16_t *A, const uint16_t *B, const float *whole,
                               const char *when)
{
    static const int ms[] = {1, 2, 15, 16, 17, 100, 255, 256, 257, 271, 300, 513};
    float *c = malloc((size_t)600 * N * sizeof(float));
    for (size_t q = 0; q < sizeof ms / sizeof ms[0]; q++) {
        zt_gemm_bf16(0, tb, ms[q], N, K, 1.0f, A, K, B, tb ? K : N, 0.0f, c, N);
        CHECK_MSG(!memcmp(c, whole, (size_t)ms[q] * N * sizeof(float)), "N=%d K=%d tb=%d: M=%d gives other rows%s", N,
                  K, tb, ms[q], when);
    }
    free(c);
}

static void test_rows_independent_of_m(void)
{
    /* bands (a small dense B), 256 x 256 blocks (a large one), zt's kernels (a small product) */
    static const int shapes[][2] = {{1408, 512}, {128, 128}, {48, 40}, {300, 96}, {4200, 1000}};
    enum { MMAX = 600, NS = sizeof shapes / sizeof shapes[0] };
    uint16_t *A[NS][2], *B[NS][2];
    float *whole[NS][2];
    for (int s = 0; s < NS; s++)
        for (int tb = 0; tb < 2; tb++) {
            int N = shapes[s][0], K = shapes[s][1];
            A[s][tb] = random_bf16((size_t)MMAX * K);
            B[s][tb] = random_bf16((size_t)N * K);
            whole[s][tb] = malloc((size_t)MMAX * N * sizeof(float));
            zt_gemm_bf16(0, tb, MMAX, N, K, 1.0f, A[s][tb], K, B[s][tb], tb ? K : N, 0.0f, whole[s][tb], N);
            rows_against_whole(N, K, tb, A[s][tb], B[s][tb], whole[s][tb], "");
        }
    /* weight-gradient products of 700 token counts: 700 block shapes or more */
    uint16_t *x = random_bf16((size_t)64 * 1100);
    float *dw = malloc((size_t)64 * 64 * sizeof(float));
    for (int tokens = 400; tokens < 1100; tokens++)
        zt_gemm_bf16(1, 0, 64, 64, tokens, 1.0f, x, 64, x, 64, 0.0f, dw, 64);
    free(dw);
    free(x);
    for (int s = 0; s < NS; s++)
        for (int tb = 0; tb < 2; tb++) {
            rows_against_whole(shapes[s][0], shapes[s][1], tb, A[s][tb], B[s][tb], whole[s][tb],
                               " after the cache filled");
            free(A[s][tb]);
            free(B[s][tb]);
            free(whole[s][tb]);
        }
}

static void test_empty(void)
{
    float c = 7.0f;
    uint16_t one = 0x3f80;
    zt_gemm_bf16(0, 0, 0, 1, 1, 1.0f, &one, 1, &one, 1, 0.0f, &c, 1);
    CHECK(c == 7.0f);
    zt_gemm_bf16(0, 0, 1, 1, 0, 1.0f, &one, 1, &one, 1, 2.0f, &c, 1);
    CHECK(c == 14.0f); /* K = 0: C = beta * C */
}

/* ---- fp32 -> bf16 arrays ----------------------------------------------------------------- */

static int convert_mismatches(void (*run)(uint16_t *, const float *, size_t), const float *src, size_t n)
{
    uint16_t *dst = malloc(n * sizeof *dst);
    run(dst, src, n);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (dst[i] != zt_f32_to_bf16(src[i])) {
            uint32_t u;
            memcpy(&u, &src[i], 4);
            if (bad++ < 3) fprintf(stderr, "  0x%08x -> 0x%04x, want 0x%04x\n", u, dst[i], zt_f32_to_bf16(src[i]));
        }
    }
    free(dst);
    return bad;
}

static void test_convert(void)
{
    static const uint32_t special[] = {
        0x00000000, 0x80000000, 0x7f800000, 0xff800000,                                     /* zeros, infinities */
        0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0x7fffffff, 0x7f80ffff, /* NaNs */
        0x00000001, 0x00007fff, 0x00008000, 0x00018000, 0x007fffff, 0x80008001,             /* denormals */
        0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001, /* ties to even, just below/above */
        0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff, /* rounding up to infinity or not */
        0x3f800000, 0xbf800000, 0x00800000, 0x80800000,
    };
    enum { NSPECIAL = sizeof special / sizeof special[0] };
    /* specials at every position of a 16-lane vector and in the tail */
    size_t n = 16 * NSPECIAL + 13;
    float *src = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) memcpy(&src[i], &special[(i * 7) % NSPECIAL], 4);
    CHECK(convert_mismatches(zt_f32_to_bf16_array, src, n) == 0);
    CHECK(convert_mismatches(zt_f32_to_bf16_run_scalar, src, n) == 0);
    if (zt_cpu_has(ZT_CPU_AVX2)) CHECK(convert_mismatches(zt_f32_to_bf16_run_avx2, src, n) == 0);
    free(src);

    /* random bit patterns over the whole range, large enough for the threaded path */
    n = ((size_t)1 << 22) + 5;
    src = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        uint32_t u = next_u32() << 16 | (next_u32() & 0xffff);
        memcpy(&src[i], &u, 4);
    }
    CHECK(convert_mismatches(zt_f32_to_bf16_array, src, n) == 0);
    if (zt_cpu_has(ZT_CPU_AVX2)) CHECK(convert_mismatches(zt_f32_to_bf16_run_avx2, src, n) == 0);
    free(src);
}

/* zt_cpu_cross_entropy_bf16: zt_cpu_cross_entropy's losses and fp32 gradient, bit for bit, and
 * the gradient rounded by zt_f32_to_bf16 in grad16; ignored rows zero in both */
static void test_cross_entropy_bf16(void)
{
    enum { N = 37, V = 1000 };
    float *a = malloc(2 * (size_t)N * V * sizeof(float)), *b = a + (size_t)N * V;
    uint16_t *g16 = malloc((size_t)N * V * sizeof *g16);
    double la[N] = {0}, lb[N] = {0};
    int32_t target[N];
    for (size_t i = 0; i < (size_t)N * V; i++) a[i] = b[i] = 8 * next_unit();
    for (int i = 0; i < N; i++) target[i] = i % 5 == 3 ? -100 : (int32_t)(next_u32() % V);
    memset(g16, 0xff, (size_t)N * V * sizeof *g16);
    zt_cpu_cross_entropy(a, la, target, N, V, 1.0f / N);
    zt_cpu_cross_entropy_bf16(b, lb, target, N, V, 1.0f / N, g16);
    CHECK(!memcmp(la, lb, sizeof la) && !memcmp(a, b, (size_t)N * V * sizeof(float)));
    size_t bad = 0, zero = 0;
    for (size_t i = 0; i < (size_t)N * V; i++) bad += g16[i] != zt_f32_to_bf16(a[i]), zero += !g16[i];
    CHECK_MSG(bad == 0, "%zu of %d bf16 gradients are not the fp32 ones rounded", bad, N * V);
    CHECK(zero >= (size_t)(N / 5) * V); /* the ignored rows (and no more than chance elsewhere) */
    free(a);
    free(g16);
}

/* ---- speed (printed, not asserted) --------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void bench_shape(int M, int N, int K)
{
    uint16_t *A = random_bf16((size_t)M * K), *B = random_bf16((size_t)K * N);
    float *Af = malloc((size_t)M * K * sizeof(float)), *Bf = malloc((size_t)K * N * sizeof(float));
    float *C = malloc((size_t)M * N * sizeof(float));
    for (size_t i = 0; i < (size_t)M * K; i++) Af[i] = zt_bf16_to_f32(A[i]);
    for (size_t i = 0; i < (size_t)K * N; i++) Bf[i] = zt_bf16_to_f32(B[i]);
    double flop = 2.0 * M * N * K;
    int reps = flop > 1e10 ? 1 : 3; /* keeps the test at a few seconds; bench/ times longer */
    static const char *what[] = {"A·B  ", "A·Bt ", "At·B ", "At·Bt"};
    for (int t = 0; t < 4; t++) {
        int ta = t >> 1, tb = t & 1, lda = ta ? M : K, ldb = tb ? K : N;
        double best_z = 1e30, best_s = 1e30;
        for (int r = 0; r <= reps; r++) {
            double t0 = now_s();
            zt_gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
            double t1 = now_s();
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                        Af, lda, Bf, ldb, 0.0f, C, N);
            double t2 = now_s();
            if (r == 0) continue; /* warm-up: page faults, packing buffers */
            best_z = fmin(best_z, t1 - t0);
            best_s = fmin(best_s, t2 - t1);
        }
        printf("  M=%-5d N=%-5d K=%-4d %s  zt_gemm_bf16 %7.1f GFLOP/s   sgemm %7.1f GFLOP/s   ratio %.2f\n", M, N, K,
               what[t], flop / best_z * 1e-9, flop / best_s * 1e-9, best_s / best_z);
    }
    free(A);
    free(B);
    free(Af);
    free(Bf);
    free(C);
}

#ifdef __SANITIZE_ADDRESS__
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static void bench_vs_sgemm(void)
{
    if (SANITIZED) {
        printf("  (speed not measured under AddressSanitizer)\n");
        return;
    }
    printf("  zt_gemm_bf16 path: %s (%s), %d threads; OpenBLAS core: %s\n", zt_cpu_level_name(), zt_gemm_bf16_name(),
           omp_get_max_threads(), openblas_get_corename());
    bench_shape(1024, 1408, 512);
    bench_shape(1024, 32000, 512);
}

int main(void)
{
    RUN(test_few_rows_first); /* first: what it checks needs buffers no product has grown */
    RUN(test_concurrent_products);
    RUN(test_rows_independent_of_m); /* early: before other tests fill the cache of oneDNN's primitives */
    RUN(test_empty);
    RUN(test_shapes_all_paths);
    RUN(test_alpha_beta);
    RUN(test_beta0_ignores_nan);
    RUN(test_long_k);
    RUN(test_scalar_bitwise_loops);
    RUN(test_simd_vs_scalar);
    RUN(test_deterministic_threads);
    RUN(test_convert);
    RUN(test_cross_entropy_bf16);
    bench_vs_sgemm();
    return test_summary();
}
