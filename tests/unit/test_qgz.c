/* qgz: the quantized two-level reduce-scatter against the exact sum, computed locally
 * (each rank regenerates every rank's input from its seed): every element within the two
 * hops' error bound, no bias, NaN made visible, error feedback, and the inter-node bytes
 * against a plain reduce-scatter's. Runs alone and under mpirun:
 *
 *     build/tests/test_qgz
 *     mpirun --allow-run-as-root --oversubscribe -np 4 -x ZT_RANKS_PER_NODE=2 build/tests/test_qgz
 *     mpirun ... -np 6 -x ZT_RANKS_PER_NODE=2 build/tests/test_qgz       3 nodes (an odd count)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/rng.h"
#include "lib/zero/qgz.h"
#include "tests/unit/test_mpi.h"

/* rank r's input for case seed: normal values, each block of 64 scaled by 10^[-3, 3) */
static void input(int r, uint64_t seed, size_t n, float *x)
{
    zt_rng g;
    zt_rng_seed(&g, seed, (uint64_t)r);
    double scale = 1;
    for (size_t i = 0; i < n; i++) {
        if (i % 64 == 0) scale = pow(10, 6 * zt_rng_uniform(&g) - 3);
        x[i] = (float)(scale * zt_rng_normal(&g));
    }
}

static float absmax(const float *x, size_t n)
{
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}

/* Reduces every rank's input; checks this rank's slice against the exact sum and the bound:
 * Σ over ranks of absmax(their block)/14, plus (several nodes) Σ over nodes of the partial
 * sum's block bound, absmax ≤ Σ over the node's ranks of absmax·(1 + 1/14). Returns the errors. */
static double *check_case(size_t n, size_t block, uint64_t seed, const size_t *cuts, int ncuts, size_t *count)
{
    zt_qgz q;
    CHECK(zt_qgz_init(&q, C, block, n, ncuts) == ZT_OK);
    size_t p = (n + N - 1) / N, lo = (size_t)R * p < n ? (size_t)R * p : n, len = zt_comm_cut(n, p, (size_t)R);
    float *x = malloc((n + 1) * sizeof *x), *all = malloc(((size_t)N * n + 1) * sizeof *all);
    float *out = malloc((p + 1) * sizeof *out);
    double *err = malloc((p + 1) * sizeof *err);
    for (int r = 0; r < N; r++) input(r, seed, n, all + (size_t)r * n);
    memcpy(x, all + (size_t)R * n, n * sizeof *x);
    CHECK(zt_qgz_reduce_scatter(&q, x, n, cuts, ncuts, NULL, out, ZT_COMM_GRAD_REDUCE) == ZT_OK);
    size_t bad = 0, bl;
    for (size_t b0 = 0; b0 < len; b0 += bl) { /* blocks restart where the slice starts and at every cut */
        size_t end = len;
        for (int c = 0; c < ncuts; c++)
            if (cuts[c] > lo + b0 && cuts[c] - lo < end) end = cuts[c] - lo;
        bl = end - b0 < block ? end - b0 : block;
        double bound = 0;
        for (int nd = 0; nd < N / RPN; nd++) {
            double node = 0;
            for (int r = nd * RPN; r < (nd + 1) * RPN; r++) node += absmax(all + (size_t)r * n + lo + b0, bl);
            bound += node / 14 + (N > RPN ? node * (15.0 / 14) / 14 : 0); /* one node: one hop */
        }
        for (size_t i = b0; i < b0 + bl; i++) {
            double exact = 0;
            for (int r = 0; r < N; r++) exact += all[(size_t)r * n + lo + i];
            err[i] = out[i] - exact;
            /* plus fp32 rounding: per hop, N dequantised values (each within 2⁻²⁴ of itself, at
             * most 15/14·absmax ≤ 15·bound) summed with N - 1 more roundings: 30·N·2⁻²⁴ of
             * the bound for two hops; 1e-30 for the blocks of zeros */
            bad += !(fabs(err[i]) <= bound * (1 + 30.0 * N * 0x1p-24) + 1e-30);
        }
    }
    CHECK_MSG(bad == 0, "rank %d: n %zu, block %zu: %zu elements beyond the bound", R, n, block, bad);
    zt_qgz_free(&q);
    free(x), free(all), free(out);
    *count = len;
    return err;
}

static void test_bound(void)
{
    static const size_t ns[] = {1, 7, 1000, 30011};
    static const size_t blocks[] = {2048, 7, 64, 1};
    static const size_t cuts[] = {3, 100, 101, 2500, 7001, 7003, 29000}; /* tensors of odd sizes */
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++)
            for (int with_cuts = 0; with_cuts < 2; with_cuts++) {
                int ncuts = 0;
                while (with_cuts && ncuts < 7 && cuts[ncuts] < ns[a]) ncuts++;
                size_t count;
                free(check_case(ns[a], blocks[b], 100 * a + b, cuts, ncuts, &count));
            }
}

/* no bias: the mean error over the slice within 3σ/√n of zero */
static void test_unbiased(void)
{
    size_t count;
    double *err = check_case(400000, 256, 7, NULL, 0, &count), mean = 0, var = 0;
    for (size_t i = 0; i < count; i++) mean += err[i];
    mean /= (double)count;
    for (size_t i = 0; i < count; i++) var += (err[i] - mean) * (err[i] - mean);
    double sigma = sqrt(var / (double)(count - 1));
    CHECK_MSG(fabs(mean) <= 3 * sigma / sqrt((double)count), "rank %d: mean error %g, 3σ/√n = %g", R, mean,
              3 * sigma / sqrt((double)count));
    free(err);
}

/* with the residual fed back, K calls on the same input sum to K times the exact result
 * with less error than without */
static void test_error_feedback(void)
{
    size_t n = 20000, block = 128, p = (n + N - 1) / N, len = zt_comm_cut(n, p, (size_t)R), K = 8;
    zt_qgz q;
    CHECK(zt_qgz_init(&q, C, block, n, 0) == ZT_OK);
    float *x = malloc(n * sizeof *x), *x0 = malloc(n * sizeof *x0), *res = calloc(2 * n, sizeof *res);
    float *out = malloc((p + 1) * sizeof *out), *exact = calloc(p + 1, sizeof *exact);
    double *sum[2] = {calloc(p + 1, sizeof(double)), calloc(p + 1, sizeof(double))};
    for (int r = 0; r < N; r++) {
        input(r, 99, n, x);
        for (size_t i = 0; i < len; i++) exact[i] += x[(size_t)R * p + i];
    }
    input(R, 99, n, x0);
    for (int fb = 0; fb < 2; fb++)
        for (size_t k = 0; k < K; k++) {
            memcpy(x, x0, n * sizeof *x);
            CHECK(zt_qgz_reduce_scatter(&q, x, n, NULL, 0, fb ? res : NULL, out, ZT_COMM_GRAD_REDUCE) == ZT_OK);
            for (size_t i = 0; i < len; i++) sum[fb][i] += out[i];
        }
    double e[2] = {0, 0};
    for (int fb = 0; fb < 2; fb++)
        for (size_t i = 0; i < len; i++) e[fb] += fabs(sum[fb][i] - (double)K * exact[i]);
    CHECK_MSG(len == 0 || e[1] < e[0], "rank %d: error feedback: %g against %g without", R, e[1], e[0]);
    zt_qgz_free(&q);
    free(x), free(x0), free(res), free(out), free(exact), free(sum[0]), free(sum[1]);
}

/* an Inf on one rank makes its block NaN in the result, on the rank that owns it */
static void test_nonfinite(void)
{
    size_t n = 1000, block = 50, p = (n + N - 1) / N;
    zt_qgz q;
    CHECK(zt_qgz_init(&q, C, block, n, 0) == ZT_OK);
    float *x = malloc(n * sizeof *x), *out = malloc((p + 1) * sizeof *out);
    input(R, 5, n, x);
    if (R == N - 1) x[3] = INFINITY; /* in rank 0's slice */
    CHECK(zt_qgz_reduce_scatter(&q, x, n, NULL, 0, NULL, out, ZT_COMM_GRAD_REDUCE) == ZT_OK);
    if (R == 0) CHECK(isnan(out[3]) && isnan(out[0]) && (p <= block || isfinite(out[block])));
    else CHECK(isfinite(out[0]));
    zt_qgz_free(&q);
    free(x), free(out);
}

/* inter-node bytes: at most a plain reduce-scatter's / (8 × ranks per node), plus scales */
static void test_bytes(void)
{
    size_t n = 1 << 20, block = 2048, p = (n + N - 1) / N;
    zt_qgz q;
    CHECK(zt_qgz_init(&q, C, block, n, 0) == ZT_OK);
    float *x = malloc(n * sizeof *x), *out = malloc((p + 1) * sizeof *out);
    input(R, 3, n, x);
    uint64_t b[ZT_COMM_NPURPOSE][2];
    zt_comm_bytes_reset(C);
    CHECK(zt_qgz_reduce_scatter(&q, x, n, NULL, 0, NULL, out, ZT_COMM_GRAD_REDUCE) == ZT_OK);
    zt_comm_bytes(C, b);
    double plain = (double)(N - RPN) * p * 4, scales = (double)(N / RPN - 1) * (p / block + 1) * 4 + 8 * N;
    CHECK_MSG(b[ZT_COMM_GRAD_REDUCE][1] <= plain / (8 * RPN) + scales, "rank %d: %llu inter-node bytes, plain %.0f", R,
              (unsigned long long)b[ZT_COMM_GRAD_REDUCE][1], plain);
    if (R == 0)
        fprintf(stderr, "  %d nodes × %d: %llu bytes from other nodes, a plain reduce-scatter %.0f (%.4fx)\n", N / RPN,
                RPN, (unsigned long long)b[ZT_COMM_GRAD_REDUCE][1], plain,
                plain > 0 ? (double)b[ZT_COMM_GRAD_REDUCE][1] / plain : 0.0);
    zt_qgz_free(&q);
    free(x), free(out);
}

int main(int argc, char **argv)
{
    int rc = mpi_test_init(&argc, &argv, 120);
    if (rc) return rc;
    RUN_ALL(test_bound);
    RUN_ALL(test_unbiased);
    RUN_ALL(test_error_feedback);
    RUN_ALL(test_nonfinite);
    RUN_ALL(test_bytes);
    return mpi_test_finish();
}
