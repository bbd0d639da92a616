/* The CPU attention for bf16 models (kernels/cpu/attention_bf16.c) against the fp32 attention
 * (kernels/cpu/attention.c) on the same inputs: packed rows of several documents, query blocks
 * with tails, grouped and ungrouped heads, a window.
 *
 * error: NMSE Σ(bf16 - fp32)² / Σ fp32² for out and dqkv; for lse the same over max(Σ fp32², n),
 * as a short row's lse is one score, near 0. The backward gets the fp32 kernel's out and lse on
 * both sides. The roundings are those of the CUDA backend's bf16 attention (q, k, v, dout, the
 * probabilities and dS to bf16, fp32 sums), and so are the inputs (uniform in ±1.5 and ±1) and
 * the tolerances: 5-10 times the worst a numpy emulation of those roundings gave on such inputs
 * (out 6e-6, lse 1.4e-5, dqkv 4e-5). Outputs start as NaN: every element must be written and
 * finite. Then the same call on 1 and 2 threads must give the same bits (the kernel's order of
 * sums depends on the shapes alone). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ops.h"
#include "test.h"
#include "test_rand.h"

static char case_name[128];

static float *uniforms(size_t n, float scale)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = scale * rnd();
    return x;
}

static float *nans(size_t n)
{
    float *x = malloc(n * sizeof *x);
    memset(x, 0xFF, n * sizeof *x); /* 0xFFFFFFFF is a NaN */
    return x;
}

/* B rows of T tokens, each packed with several documents (pos restarts at 0) */
static int32_t *doc_positions(int B, int T)
{
    int32_t *pos = malloc((size_t)B * T * sizeof *pos);
    for (int b = 0; b < B; b++)
        for (int t = 0, start = 0; t < T; t++) {
            if (t && rnd_int(0, T / 4) == 0) start = t;
            pos[b * T + t] = t - start;
        }
    return pos;
}

/* Σ(got - want)² / max(Σ want², floor·n) within tol, got finite everywhere */
static void expect(const char *what, const float *got, const float *want, size_t n, double tol, double floor)
{
    double err = 0, ref = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) {
            bad++;
            continue;
        }
        err += ((double)got[i] - want[i]) * ((double)got[i] - want[i]), ref += (double)want[i] * want[i];
    }
    double e = err / fmax(fmax(ref, floor * (double)n), 1e-30);
    CHECK_MSG(e <= tol && !bad, "%s %s: NMSE %.3e (tol %.1e), %zu of %zu not finite", what, case_name, e, tol, bad, n);
}

/* scale: the scores' (0: 1/sqrt(D)) */
static void attention_case(int T, int KV, int D, int window, double scale)
{
    const int B = 2, H = 4, S3 = (H + 2 * KV) * D;
    if (scale == 0) scale = 1 / sqrt(D);
    size_t nqkv = (size_t)B * T * S3, nout = (size_t)B * T * H * D, nlse = (size_t)B * H * T;
    snprintf(case_name, sizeof case_name, "B=%d T=%d H=%d KV=%d D=%d window=%d scale=%g", B, T, H, KV, D, window,
             scale);
    float *qkv = uniforms(nqkv, 1.5f), *dout = uniforms(nout, 1);
    int32_t *pos = doc_positions(B, T);
    float *out = malloc(nout * sizeof *out), *lse = malloc(nlse * sizeof *lse), *dqkv = malloc(nqkv * sizeof *dqkv);
    zt_cpu_attention_forward(out, lse, qkv, pos, B, T, H, KV, D, window, scale, 0);
    zt_cpu_attention_backward(dqkv, dout, qkv, out, lse, pos, B, T, H, KV, D, window, scale, 0);

    float *got[2][3]; /* [threads - 1][out, lse, dqkv] */
    for (int th = 0; th < 2; th++) {
        omp_set_num_threads(th + 1);
        got[th][0] = nans(nout), got[th][1] = nans(nlse), got[th][2] = nans(nqkv);
        zt_cpu_attention_forward_bf16(got[th][0], got[th][1], qkv, pos, B, T, H, KV, D, window, scale);
        zt_cpu_attention_backward_bf16(got[th][2], dout, qkv, out, lse, pos, B, T, H, KV, D, window, scale);
    }
    expect("out", got[1][0], out, nout, 5e-5, 0);
    expect("lse", got[1][1], lse, nlse, 1e-4, 1);
    expect("dqkv", got[1][2], dqkv, nqkv, 3e-4, 0);
    size_t n[3] = {nout, nlse, nqkv};
    for (int i = 0; i < 3; i++)
        CHECK_MSG(!memcmp(got[0][i], got[1][i], n[i] * sizeof(float)), "%s: output %d differs on 1 and 2 threads",
                  case_name, i);
    for (int th = 0; th < 2; th++)
        for (int i = 0; i < 3; i++) free(got[th][i]);
    free(qkv), free(dout), free(pos), free(out), free(lse), free(dqkv);
}

static void test_against_fp32(void)
{
    int saved = omp_get_max_threads();
    attention_case(150, 2, 64, 0, 0);  /* query blocks 64, 64, 22; two heads a kv head */
    attention_case(300, 4, 64, 0, 0);  /* key blocks past 256 */
    attention_case(200, 1, 32, 0, 0);  /* all heads on one kv head; head size 32 */
    attention_case(130, 2, 64, 17, 0); /* a window, so blocks start inside documents */
    attention_case(5, 2, 64, 0, 0);    /* one short block */
    /* other scales: Gemma 3 27B's query_pre_attn_scalar^-1/2 on head size 128, Granite's multiplier */
    attention_case(150, 2, 128, 0, 1 / sqrt(168));
    attention_case(130, 2, 64, 17, 0.3);
    omp_set_num_threads(saved);
}

int main(void)
{
    RUN(test_against_fp32);
    return test_summary();
}
