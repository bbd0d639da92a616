/* Attention for bf16 models: zt_cpu_attention_forward's contract (fp32 in and out, causal,
 * grouped-query, the document mask and window, the scores' scale) with no soft-capping, and
 * q, k, v, dout, the probabilities and the scores' gradients rounded to bf16 for the products,
 * which oneDNN's AMX or AVX-512 BF16 kernels run where zt has them (zt_gemm_bf16 otherwise).
 * The softmax, its backward and every sum stay fp32: what the CUDA backend's attention_bf16.cu
 * computes.
 *
 * qkv (and dout) are rounded once per call into head-major copies [B, heads, T, D] of the
 * calling thread, so that every product's operands are dense: oneDNN's brgemm kernels take
 * nothing else (a strided operand gets its gemm:jit kernels, at a third of the speed on these
 * small products). Outputs go through small dense buffers into their strided places; dK and dV
 * are summed in a dense buffer per (row, kv head) task. Blocks of QB queries as in attention.c,
 * but of 128 (a product this small costs oneDNN about as much to start as to run: on the bench
 * shape, T = 256, blocks of 128 gave 2% more tokens/s than 64 and than 256); a block's first key is taken down to a multiple of KEY_ALIGN (keys it may not see get
 * probability 0 and add exact zeros), so the products come in few shapes, each planned once. */
#include "ops.h"

#ifndef ZT_REAL_DOUBLE
#include <math.h>
#include <string.h>

#include "attention_parts.h"
#include "gemm_bf16.h"
#include "gemm_bf16_kernel.h"
#include "lib/core/arena.h"
#include "lib/core/dtype.h"
#include "lib/core/status.h"

enum { QB = 128, KEY_ALIGN = 16 };

typedef struct {
    int B, T, H, KV, D, S3, HD;
} dims;

/* C = alpha·op(A)·op(B) + beta·C on dense operands: oneDNN where it takes it, else zt's kernels */
static void product(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A, int lda, const uint16_t *B,
                    int ldb, float beta, float *C, int ldc)
{
    if (!zt_gemm_bf16_dnnl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        zt_gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* The calling thread's buffer number `which`, at least n elements (kept between calls) */
static uint16_t *thread_buffer(int which, size_t n)
{
    static _Thread_local uint16_t *buf[2];
    static _Thread_local size_t cap[2];
    if (n > cap[which]) {
        zt_free(buf[which]);
        buf[which] = zt_calloc_aligned(n * sizeof(uint16_t));
        ZT_ASSERT(buf[which]);
        cap[which] = n;
    }
    return buf[which];
}

/* rows [B, T] of `heads` heads of D elements, row stride `stride`, rounded into [B, heads, T, D] */
static void head_major(uint16_t *dst, const float *src, int stride, int heads, const dims *d)
{
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < d->B * d->T; bt++) {
        int b = bt / d->T, t = bt % d->T;
        for (int h = 0; h < heads; h++)
            zt_f32_to_bf16_array(dst + (((size_t)b * heads + h) * d->T + t) * d->D,
                                 src + (size_t)bt * stride + (size_t)h * d->D, d->D);
    }
}

/* qkv's heads in one head-major copy [B, H + 2KV, T, D]: row b's q heads, then its k and v heads */
static const uint16_t *rounded_qkv(const float *qkv, const dims *d)
{
    uint16_t *hm = thread_buffer(0, (size_t)d->B * d->T * d->D * (d->H + 2 * d->KV));
    head_major(hm, qkv, d->S3, d->H + 2 * d->KV, d);
    return hm;
}

/* the head-major row block of head j (q heads 0..H-1, k heads H.., v heads H + KV..) of row b */
static const uint16_t *head_at(const uint16_t *hm, const dims *d, int b, int j)
{
    return hm + ((size_t)b * (d->H + 2 * d->KV) + j) * d->T * d->D;
}

static void copy_rows(float *dst, int ld_dst, const float *src, int rows, int cols)
{
    for (int r = 0; r < rows; r++) memcpy(dst + (size_t)r * ld_dst, src + (size_t)r * cols, cols * sizeof(float));
}

static int block_keys(const int32_t *pos, int t0, int t1, int window)
{
    return zt_attn_block_key_lo(pos, t0, t1, window) / KEY_ALIGN * KEY_ALIGN;
}

void zt_cpu_attention_forward_bf16(float *out, float *lse, const float *qkv, const int32_t *pos, int B, int T, int H,
                                   int KV, int D, int window, double scale_)
{
    const dims d = {B, T, H, KV, D, (H + 2 * KV) * D, H * D};
    const float scale = (float)scale_;
    const uint16_t *hm = rounded_qkv(qkv, &d);
    zt_attn_probs_fn *to_probs = zt_attn_probs_for_cpu();
#pragma omp parallel
    {
        float *S = zt_calloc_aligned(sizeof(float) * QB * T), *O = zt_calloc_aligned(sizeof(float) * QB * D);
        uint16_t *P = zt_calloc_aligned(sizeof(uint16_t) * QB * T);
        ZT_ASSERT(S && O && P);
#pragma omp for schedule(static)
        for (int bh = 0; bh < B * H; bh++) {
            int b = bh / H, h = bh % H, g = h / (H / KV);
            const int32_t *p = pos + (size_t)b * T;
            const uint16_t *Qh = head_at(hm, &d, b, h), *Kh = head_at(hm, &d, b, H + g),
                           *Vh = head_at(hm, &d, b, H + KV + g);
            for (int t0 = 0; t0 < T; t0 += QB) {
                int t1 = t0 + QB < T ? t0 + QB : T, qb = t1 - t0, klo = block_keys(p, t0, t1, window), nk = t1 - klo;
                product(0, 1, qb, nk, D, scale, Qh + (size_t)t0 * D, D, Kh + (size_t)klo * D, D, 0, S, nk);
                to_probs(S, qb, nk, t0, klo, p, window, NULL, lse + (size_t)bh * T);
                zt_f32_to_bf16_array(P, S, (size_t)qb * nk);
                product(0, 0, qb, D, nk, 1, P, nk, Vh + (size_t)klo * D, D, 0, O, D);
                copy_rows(out + ((size_t)b * T + t0) * d.HD + h * D, d.HD, O, qb, D);
            }
        }
        zt_free(S);
        zt_free(O);
        zt_free(P);
    }
}

void zt_cpu_attention_backward_bf16(float *dqkv, const float *dout, const float *qkv, const float *out,
                                    const float *lse, const int32_t *pos, int B, int T, int H, int KV, int D,
                                    int window, double scale_)
{
    const dims d = {B, T, H, KV, D, (H + 2 * KV) * D, H * D};
    const int group = H / KV;
    const float scale = (float)scale_;
    const uint16_t *hm = rounded_qkv(qkv, &d);
    uint16_t *dohm = thread_buffer(1, (size_t)B * H * T * D);
    head_major(dohm, dout, d.HD, H, &d); /* dout [B, H, T, D] */
    zt_attn_probs_fn *to_probs = zt_attn_probs_for_cpu();
    zt_attn_dsoftmax_fn *dsoftmax = zt_attn_dsoftmax_for_cpu();
    /* one task per (row, kv head): the task sums that head's dK and dV */
#pragma omp parallel
    {
        float *P = zt_calloc_aligned(sizeof(float) * QB * T), *dP = zt_calloc_aligned(sizeof(float) * QB * T);
        float *dQ = zt_calloc_aligned(sizeof(float) * QB * D);
        float *dK = zt_calloc_aligned(sizeof(float) * T * D), *dV = zt_calloc_aligned(sizeof(float) * T * D);
        uint16_t *P16 = zt_calloc_aligned(sizeof(uint16_t) * QB * T);
        uint16_t *dS16 = zt_calloc_aligned(sizeof(uint16_t) * QB * T);
        ZT_ASSERT(P && dP && dQ && dK && dV && P16 && dS16);
#pragma omp for schedule(static)
        for (int bg = 0; bg < B * KV; bg++) {
            int b = bg / KV, g = bg % KV;
            const int32_t *p = pos + (size_t)b * T;
            const uint16_t *Kh = head_at(hm, &d, b, H + g), *Vh = head_at(hm, &d, b, H + KV + g);
            float *dbase = dqkv + (size_t)b * T * d.S3;
            memset(dK, 0, sizeof(float) * T * D);
            memset(dV, 0, sizeof(float) * T * D);
            for (int h = g * group; h < (g + 1) * group; h++) {
                const float *l = lse + ((size_t)b * H + h) * T;
                const uint16_t *Qh = head_at(hm, &d, b, h), *dOh = dohm + ((size_t)b * H + h) * T * D;
                for (int t0 = 0; t0 < T; t0 += QB) {
                    int t1 = t0 + QB < T ? t0 + QB : T, qb = t1 - t0, klo = block_keys(p, t0, t1, window);
                    int nk = t1 - klo;
                    size_t row = (size_t)b * T + t0;
                    const uint16_t *Q = Qh + (size_t)t0 * D, *dO16 = dOh + (size_t)t0 * D;
                    product(0, 1, qb, nk, D, scale, Q, D, Kh + (size_t)klo * D, D, 0, P, nk);
                    to_probs(P, qb, nk, t0, klo, p, window, l, NULL);
                    product(0, 1, qb, nk, D, 1, dO16, D, Vh + (size_t)klo * D, D, 0, dP, nk);
                    dsoftmax(dP, P, dout + row * d.HD + h * D, out + row * d.HD + h * D, qb, nk, D, d.HD);
                    zt_f32_to_bf16_array(P16, P, (size_t)qb * nk);
                    zt_f32_to_bf16_array(dS16, dP, (size_t)qb * nk);
                    product(0, 0, qb, D, nk, scale, dS16, nk, Kh + (size_t)klo * D, D, 0, dQ, D);
                    copy_rows(dbase + (size_t)t0 * d.S3 + h * D, d.S3, dQ, qb, D);
                    product(1, 0, nk, D, qb, scale, dS16, nk, Q, D, 1, dK + (size_t)klo * D, D);
                    product(1, 0, nk, D, qb, 1, P16, nk, dO16, D, 1, dV + (size_t)klo * D, D);
                }
            }
            copy_rows(dbase + (H + g) * D, d.S3, dK, T, D);
            copy_rows(dbase + (H + KV + g) * D, d.S3, dV, T, D);
        }
        zt_free(P);
        zt_free(dP);
        zt_free(dQ);
        zt_free(dK);
        zt_free(dV);
        zt_free(P16);
        zt_free(dS16);
    }
}
#endif
