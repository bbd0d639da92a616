/* Causal grouped-query attention with a document mask, blocked by queries:
 * each block of QB queries multiplies against the keys it can see (from the
 * earliest document start in the block to the block's last query) with GEMMs,
 * so packed rows of short documents cost little. Backward recomputes the
 * probabilities from the saved log-sum-exp (no T×T tensor is kept). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_parts.h"
#include "fastmath.h"
#include "levels.h"
#include "lib/core/arena.h"
#include "ops.h"

enum { QB = 64 };

typedef struct {
    int T, H, KV, D, window;
    int S3; /* qkv row stride */
    int HD; /* out row stride */
    zt_real scale, softcap;
} attn_shape;

static attn_shape shape_of(int T, int H, int KV, int D, int window, double scale, double softcap)
{
    attn_shape s = {T, H, KV, D, window, (H + 2 * KV) * D, H * D, (zt_real)scale, (zt_real)softcap};
    return s;
}

/* s = cap·tanh(s / cap) over n scores, the tanh kept in t when t is not NULL (its derivative
 * is 1 - t², for backward) */
static void softcap_scores(zt_real *S, zt_real *t, size_t n, zt_real cap)
{
    for (size_t i = 0; i < n; i++) {
        zt_real th = (zt_real)tanh((double)(S[i] / cap));
        if (t) t[i] = th;
        S[i] = th * cap;
    }
}

/* first key query t may see */
static int key_lo(const int32_t *pos, int t, int window)
{
    int lo = t - pos[t];
    if (window > 0 && t - window + 1 > lo) lo = t - window + 1;
    return lo;
}

int zt_attn_block_key_lo(const int32_t *pos, int t0, int t1, int window)
{
    int lo = t0;
    for (int t = t0; t < t1; t++) {
        int l = key_lo(pos, t, window);
        lo = l < lo ? l : lo;
    }
    return lo;
}

/* Turns scores S[qb, nk] (keys from klo) into probabilities. With lse == NULL it
 * computes the softmax and stores each row's log-sum-exp into lse_out; otherwise it
 * uses the given lse. Entries outside a query's visible keys become 0. */
ZT_LEVEL_BODY void scores_to_probs_body(zt_real *S, int qb, int nk, int t0, int klo, const int32_t *pos, int window,
                                        const zt_real *lse, zt_real *lse_out)
{
    for (int i = 0; i < qb; i++) {
        int t = t0 + i, lo = key_lo(pos, t, window) - klo, hi = t - klo; /* inclusive */
        zt_real *row = S + (size_t)i * nk;
        for (int j = 0; j < lo; j++) row[j] = 0;
        for (int j = hi + 1; j < nk; j++) row[j] = 0;
        if (lse) {
            zt_real l = lse[t];
#pragma omp simd
            for (int j = lo; j <= hi; j++) row[j] = zt_vexp(row[j] - l);
            continue;
        }
        /* simd reductions: the sums in lanes (8 or 16 partial sums, then those), as the
           cross-entropy's; a plain loop's sum stays scalar (the compiler keeps its order) */
        zt_real mx = row[lo];
#pragma omp simd reduction(max : mx)
        for (int j = lo + 1; j <= hi; j++) mx = row[j] > mx ? row[j] : mx;
        zt_real sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int j = lo; j <= hi; j++) {
            row[j] = zt_vexp(row[j] - mx);
            sum += row[j];
        }
        zt_real inv = 1 / sum;
#pragma omp simd
        for (int j = lo; j <= hi; j++) row[j] *= inv;
        lse_out[t] = mx + (zt_real)log((double)sum);
    }
}
ZT_LEVELS(void, scores_to_probs, (S, qb, nk, t0, klo, pos, window, lse, lse_out), zt_real *S, int qb, int nk, int t0,
          int klo, const int32_t *pos, int window, const zt_real *lse, zt_real *lse_out)

zt_attn_probs_fn *zt_attn_probs_for_cpu(void) { return scores_to_probs_for_cpu(); }

void zt_cpu_attention_forward(zt_real *out, zt_real *lse, const zt_real *qkv, const int32_t *pos, int B, int T, int H,
                              int KV, int D, int window, double scale, double softcap)
{
    attn_shape s = shape_of(T, H, KV, D, window, scale, softcap);
    zt_attn_probs_fn *to_probs = zt_attn_probs_for_cpu();
#pragma omp parallel
    {
        zt_real *S = zt_calloc_aligned(sizeof(zt_real) * QB * T);
        ZT_ASSERT(S);
#pragma omp for schedule(static)
        for (int bh = 0; bh < B * H; bh++) {
            int b = bh / H, h = bh % H, g = h / (H / KV);
            const int32_t *p = pos + (size_t)b * T;
            const zt_real *base = qkv + (size_t)b * T * s.S3;
            for (int t0 = 0; t0 < T; t0 += QB) {
                int t1 = t0 + QB < T ? t0 + QB : T, qb = t1 - t0;
                int klo = zt_attn_block_key_lo(p, t0, t1, window), nk = t1 - klo;
                const zt_real *Q = base + (size_t)t0 * s.S3 + h * D;
                const zt_real *K = base + (size_t)klo * s.S3 + (H + g) * D;
                const zt_real *V = base + (size_t)klo * s.S3 + (H + KV + g) * D;
                zt_cpu_gemm(0, 1, qb, nk, D, s.scale, Q, s.S3, K, s.S3, 0, S, nk);
                if (s.softcap > 0) softcap_scores(S, NULL, (size_t)qb * nk, s.softcap);
                to_probs(S, qb, nk, t0, klo, p, window, NULL, lse + (size_t)bh * T);
                zt_real *O = out + ((size_t)b * T + t0) * s.HD + h * D;
                zt_cpu_gemm(0, 0, qb, D, nk, 1, S, nk, V, s.S3, 0, O, s.HD);
            }
        }
        zt_free(S);
    }
}

/* dS = P ∘ (dP - rowsum(dO ∘ O)), in place in dP */
ZT_LEVEL_BODY void softmax_backward_body(zt_real *dP, const zt_real *P, const zt_real *dO, const zt_real *O, int qb,
                                         int nk, int D, int HD)
{
    for (int i = 0; i < qb; i++) {
        zt_real di = 0;
#pragma omp simd reduction(+ : di)
        for (int d = 0; d < D; d++) di += dO[(size_t)i * HD + d] * O[(size_t)i * HD + d];
        zt_real *r = dP + (size_t)i * nk;
        const zt_real *pr = P + (size_t)i * nk;
        for (int j = 0; j < nk; j++) r[j] = pr[j] * (r[j] - di);
    }
}
ZT_LEVELS(void, softmax_backward, (dP, P, dO, O, qb, nk, D, HD), zt_real *dP, const zt_real *P, const zt_real *dO,
          const zt_real *O, int qb, int nk, int D, int HD)

zt_attn_dsoftmax_fn *zt_attn_dsoftmax_for_cpu(void) { return softmax_backward_for_cpu(); }

void zt_cpu_attention_backward(zt_real *dqkv, const zt_real *dout, const zt_real *qkv, const zt_real *out,
                               const zt_real *lse, const int32_t *pos, int B, int T, int H, int KV, int D, int window,
                               double scale, double softcap)
{
    attn_shape s = shape_of(T, H, KV, D, window, scale, softcap);
    int group = H / KV;
    zt_attn_probs_fn *to_probs = zt_attn_probs_for_cpu();
    zt_attn_dsoftmax_fn *dsoftmax = zt_attn_dsoftmax_for_cpu();
    /* one task per (row, kv head): the task owns that head's dK and dV */
#pragma omp parallel
    {
        zt_real *P = zt_calloc_aligned(sizeof(zt_real) * QB * T);
        zt_real *dP = zt_calloc_aligned(sizeof(zt_real) * QB * T);
        zt_real *tanhs = s.softcap > 0 ? zt_calloc_aligned(sizeof(zt_real) * QB * T) : NULL; /* soft-capping's */
        ZT_ASSERT(P && dP && (tanhs || !(s.softcap > 0)));
#pragma omp for schedule(static)
        for (int bg = 0; bg < B * KV; bg++) {
            int b = bg / KV, g = bg % KV;
            const int32_t *p = pos + (size_t)b * T;
            const zt_real *base = qkv + (size_t)b * T * s.S3;
            zt_real *dbase = dqkv + (size_t)b * T * s.S3;
            for (int t = 0; t < T; t++) {
                memset(dbase + (size_t)t * s.S3 + (H + g) * D, 0, D * sizeof(zt_real));
                memset(dbase + (size_t)t * s.S3 + (H + KV + g) * D, 0, D * sizeof(zt_real));
            }
            for (int h = g * group; h < (g + 1) * group; h++) {
                const zt_real *l = lse + ((size_t)b * H + h) * T;
                for (int t0 = 0; t0 < T; t0 += QB) {
                    int t1 = t0 + QB < T ? t0 + QB : T, qb = t1 - t0;
                    int klo = zt_attn_block_key_lo(p, t0, t1, window), nk = t1 - klo;
                    const zt_real *Q = base + (size_t)t0 * s.S3 + h * D;
                    const zt_real *K = base + (size_t)klo * s.S3 + (H + g) * D;
                    const zt_real *V = base + (size_t)klo * s.S3 + (H + KV + g) * D;
                    const zt_real *O = out + ((size_t)b * T + t0) * s.HD + h * D;
                    const zt_real *dO = dout + ((size_t)b * T + t0) * s.HD + h * D;
                    zt_real *dQ = dbase + (size_t)t0 * s.S3 + h * D;
                    zt_real *dK = dbase + (size_t)klo * s.S3 + (H + g) * D;
                    zt_real *dV = dbase + (size_t)klo * s.S3 + (H + KV + g) * D;
                    zt_cpu_gemm(0, 1, qb, nk, D, s.scale, Q, s.S3, K, s.S3, 0, P, nk);
                    if (tanhs) softcap_scores(P, tanhs, (size_t)qb * nk, s.softcap);
                    to_probs(P, qb, nk, t0, klo, p, window, l, NULL);
                    zt_cpu_gemm(0, 1, qb, nk, D, 1, dO, s.HD, V, s.S3, 0, dP, nk);
                    dsoftmax(dP, P, dO, O, qb, nk, D, s.HD);
                    if (tanhs)
                        for (size_t i = 0; i < (size_t)qb * nk; i++) dP[i] *= 1 - tanhs[i] * tanhs[i];
                    zt_cpu_gemm(0, 0, qb, D, nk, s.scale, dP, nk, K, s.S3, 0, dQ, s.S3);
                    zt_cpu_gemm(1, 0, nk, D, qb, s.scale, dP, nk, Q, s.S3, 1, dK, s.S3);
                    zt_cpu_gemm(1, 0, nk, D, qb, 1, P, nk, dO, s.HD, 1, dV, s.S3);
                }
            }
        }
        zt_free(P);
        zt_free(dP);
        zt_free(tanhs);
    }
}

void zt_cpu_attention_decode(zt_real *out, const zt_real *q, int q_stride, const zt_real *k, const zt_real *v,
                             int kv_stride, int n, int p0, int H, int KV, int D, int window, double scale,
                             double softcap)
{
    int nk = p0 + n;
#pragma omp parallel
    {
        zt_real *S = zt_calloc_aligned(sizeof(zt_real) * nk);
        ZT_ASSERT(S);
#pragma omp for schedule(static) collapse(2)
        for (int i = 0; i < n; i++)
            for (int h = 0; h < H; h++) {
                int t = p0 + i, g = h / (H / KV), lo = window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
                const zt_real *qr = q + (size_t)i * q_stride + h * D;
                zt_real mx = -INFINITY, sum = 0;
                for (int u = lo; u <= t; u++) {
                    const zt_real *kr = k + (size_t)u * kv_stride + g * D;
                    zt_real dot = 0;
                    for (int d = 0; d < D; d++) dot += qr[d] * kr[d];
                    S[u] = dot * (zt_real)scale;
                    if (softcap > 0) softcap_scores(S + u, NULL, 1, (zt_real)softcap);
                    mx = S[u] > mx ? S[u] : mx;
                }
                for (int u = lo; u <= t; u++) sum += (S[u] = zt_vexp(S[u] - mx));
                zt_real *o = out + (size_t)i * H * D + h * D;
                for (int d = 0; d < D; d++) o[d] = 0;
                for (int u = lo; u <= t; u++) {
                    const zt_real *vr = v + (size_t)u * kv_stride + g * D;
                    zt_real p = S[u] / sum;
                    for (int d = 0; d < D; d++) o[d] += p * vr[d];
                }
            }
        zt_free(S);
    }
}
