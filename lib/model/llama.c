/* Llama forward and backward, layer by layer, through the backend interface. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/rng.h"
#include "llama_internal.h"
#include "lora.h"
#include "qbase.h"

/* Rows of logits materialised at once: the full [N, V] tensor never is. A device takes
 * larger chunks: the LM head's weight-gradient product then has a long inner dimension. */
static size_t logit_chunk_elems(const zt_llama *m)
{
    return m->be->host_memory ? (size_t)32 << 20 : (size_t)256 << 20; /* 128 MB or 1 GB of fp32 */
}

/* Gemma 3's windowed layers have rotary tables of their own */
static int local_rope(const zt_llama *m) { return m->cfg.rope_local_theta > 0; }

/* rows of logits per chunk (none for a score head, which makes no logits), and the elements of
 * each bf16 staging buffer */
static void acts_plan(const zt_llama *m, int B, int T, int *chunk, size_t *stage)
{
    size_t N = (size_t)B * T, C = m->C;
    *chunk = (int)(logit_chunk_elems(m) / m->V);
    if (*chunk < 16) *chunk = 16;
    if ((size_t)*chunk > N) *chunk = (int)N;
    if (m->cfg.num_labels) *chunk = 0;
    size_t widest = C > (size_t)m->S3 ? C : (size_t)m->S3;
    if (widest < 2 * (size_t)m->F) widest = 2 * (size_t)m->F;
    if (m->cfg.n_experts) { /* the experts' rows (k a token) and the router's logits */
        size_t k = (size_t)m->cfg.experts_per_tok, pairs = k * (C > 2 * (size_t)m->F ? C : 2 * (size_t)m->F);
        if (widest < pairs) widest = pairs;
        if (widest < (size_t)m->cfg.n_experts) widest = (size_t)m->cfg.n_experts;
    }
    *stage = N * widest; /* the widest activation, or a chunk of logits */
    if (*stage < (size_t)*chunk * m->V) *stage = (size_t)*chunk * m->V;
}

void zt_llama_set_length(zt_llama *m, int T)
{
    ZT_ASSERT(T >= 1 && T <= m->T_alloc);
    m->T = T;
}

/* bf16 copies of the products' inputs (zt_llama_layer_acts: in16) save converting them again in
 * the backward pass */
static int keeps_bf16_inputs(const zt_llama *m) { return m->bf16_inputs && !m->qbase; }

size_t zt_llama_acts_bytes(const zt_llama *m, int B, int T, int checkpointing)
{
    int chunk;
    size_t stage, N = (size_t)B * T, C = m->C, L = m->L, nsets = checkpointing ? 1 : L;
    acts_plan(m, B, T, &chunk, &stage);
    int post = m->cfg.post_norms, pre = !m->cfg.no_pre_norms, capped = m->cfg.final_softcap > 0, local = local_rope(m);
    int dpost = post || zt_llama_scaled_residual(m);
    size_t per_set = N * (C + m->S3 + m->HD + 3 * (size_t)m->F) + (size_t)B * m->H * T +
                     zt_llama_qk_norm_elems(m, (int)N) + (pre ? 2 * N * (C + 1) : 0) + (post ? 2 * N * (C + 1) : 0);
    size_t reals = (L + 1) * N * C + nsets * per_set + N * (C + 4) /* lnf, rstdf, head_out, coef, pad_mask */ +
                   (size_t)chunk * m->V * (capped ? 2 : 1) + N * (2 * C + m->HD + m->S3 + 3 * (size_t)m->F) +
                   (dpost ? N * C : 0) + (local ? 4 : 2) * (size_t)T * (m->R / 2);
    /* the alignment of the buffers only some models have */
    size_t extra_buffers = (m->cfg.qk_norm ? nsets * 2 : 0) + (post ? nsets * 4 : 0) + dpost + capped + 2 * local;
    size_t bf16 = m->dtype_bf16 ? 2 * stage : 0;
    if (keeps_bf16_inputs(m)) {
        bf16 += nsets * N * (2 * C + m->HD + (size_t)m->F) + N * C;
        extra_buffers += nsets * 4 + 1;
    }
    return reals * sizeof(zt_real) + N * sizeof(double) + 3 * N * sizeof(int32_t) + bf16 * sizeof(uint16_t) + 64 * 64 +
           extra_buffers * 64 + zt_llama_moe_bytes(m, (int)N, (int)nsets, 1);
}

zt_status zt_llama_alloc_acts(zt_llama *m, int B, int T, int checkpointing)
{
    zt_backend *be = m->be;
    be->free(be, m->acts_mem);
    free(m->x);
    free(m->la);
    free(m->loss_host);
    free(m->out_host);
    zt_llama_moe_release(m, m->moe);
    m->moe = NULL;
    size_t N = (size_t)B * T, C = m->C, L = m->L, nsets = checkpointing ? 1 : L, stage;
    m->B = B, m->T = m->T_alloc = T, m->checkpointing = checkpointing;
    acts_plan(m, B, T, &m->chunk, &stage);
    size_t bytes = zt_llama_acts_bytes(m, B, T, checkpointing);
    m->acts_mem = be->alloc(be, bytes);
    m->x = calloc(L + 1, sizeof *m->x);
    m->la = calloc(nsets, sizeof *m->la);
    if (!m->acts_mem || !m->x || !m->la) return zt_fail(ZT_ENOMEM, "out of memory for activations (%zu bytes)", bytes);

    char *p = m->acts_mem;
#define TAKE(ptr, count)                                                                                               \
    do {                                                                                                               \
        (ptr) = (void *)p;                                                                                             \
        p += ((count) * sizeof(*(ptr)) + 63) & ~(size_t)63;                                                            \
    } while (0)
    for (size_t l = 0; l <= L; l++) TAKE(m->x[l], N * C);
    for (size_t s = 0; s < nsets; s++) {
        zt_llama_layer_acts *a = &m->la[s];
        TAKE(a->qkv, N * m->S3);
        TAKE(a->att, N * m->HD);
        TAKE(a->lse, (size_t)B * m->H * T);
        TAKE(a->xmid, N * C);
        a->ln2 = a->xmid; /* without pre norms the MLP takes xmid itself (the attention x[l]) */
        if (!m->cfg.no_pre_norms) {
            TAKE(a->ln1, N * C);
            TAKE(a->rstd1, N);
            TAKE(a->ln2, N * C);
            TAKE(a->rstd2, N);
        }
        TAKE(a->gateup, N * 2 * m->F);
        TAKE(a->h, N * m->F);
        if (m->cfg.qk_norm) {
            TAKE(a->qkin, N * (m->H + m->KV) * m->D);
            TAKE(a->rstdqk, N * (m->H + m->KV));
        }
        if (m->cfg.post_norms) {
            TAKE(a->attn_out, N * C);
            TAKE(a->rstd3, N);
            TAKE(a->mlp_out, N * C);
            TAKE(a->rstd4, N);
        }
    }
    if (m->cfg.post_norms || zt_llama_scaled_residual(m)) TAKE(m->dpost, N * C);
    if (m->cfg.final_softcap > 0) TAKE(m->capped, (size_t)m->chunk * m->V);
    if (local_rope(m)) {
        TAKE(m->cos_l, (size_t)T * (m->R / 2));
        TAKE(m->sin_l, (size_t)T * (m->R / 2));
    }
    TAKE(m->lnf, N * C);
    TAKE(m->rstdf, N);
    TAKE(m->head_out, N);
    TAKE(m->coef, N);
    TAKE(m->pad_mask, N);
    TAKE(m->logits, (size_t)m->chunk * m->V);
    TAKE(m->dres, N * C);
    TAKE(m->dln, N * C);
    TAKE(m->datt, N * m->HD);
    TAKE(m->dqkv, N * m->S3);
    TAKE(m->dgateup, N * 2 * m->F);
    TAKE(m->dh, N * m->F);
    TAKE(m->cos_t, (size_t)T * (m->R / 2));
    TAKE(m->sin_t, (size_t)T * (m->R / 2));
    TAKE(m->loss_rows, N);
    TAKE(m->input, N);
    TAKE(m->target, N);
    TAKE(m->pos, N);
    if (m->dtype_bf16) {
        TAKE(m->a16, stage);
        TAKE(m->b16, stage);
    }
    if (keeps_bf16_inputs(m)) {
        for (size_t s = 0; s < nsets; s++) {
            zt_llama_layer_acts *a = &m->la[s];
            TAKE(a->in16, N * C);
            TAKE(a->att16, N * m->HD);
            TAKE(a->ln2_16, N * C);
            TAKE(a->h16, N * m->F);
        }
        TAKE(m->lnf16, N * C);
    }
#undef TAKE
    ZT_ASSERT((size_t)(p - (char *)m->acts_mem) <= bytes);
    m->loss_host = malloc(N * sizeof(double));
    m->out_host = malloc(N * (2 * sizeof(double) + sizeof(zt_real)));
    if (m->out_host) m->coef_host = m->out_host + N, m->real_host = (zt_real *)(m->coef_host + N);
    if (!m->loss_host || !m->out_host) return zt_fail(ZT_ENOMEM, "out of memory for activations");
    zt_status st = m->cfg.n_experts ? zt_llama_moe_alloc(m, (int)N, (int)nsets, 1, &m->moe) : ZT_OK;
    if (st) return st;
    st = zt_llama_rope_tables_upload(m, T, 0, m->cos_t, m->sin_t);
    if (!st && local_rope(m)) st = zt_llama_rope_tables_upload(m, T, 1, m->cos_l, m->sin_l);
    if (st) return st;
    return m->lora ? zt_lora_alloc_scratch(m, N) : ZT_OK;
}

/* x's bf16 copy into x16 (NULL: the model keeps none, and NULL is returned) */
static const uint16_t *to_bf16(zt_llama *m, uint16_t *x16, const zt_real *x, size_t n)
{
#ifndef ZT_REAL_DOUBLE
    if (x16) m->be->to_bf16(m->be, x16, x, n);
#endif
    return x16;
}

void zt_llama_linear_forward(zt_llama *m, zt_real *y, int ldy, const zt_real *x, const uint16_t *x16, size_t w, int N,
                             int O, int I, zt_real beta)
{
    zt_backend *be = m->be;
    if (zt_qbase_forward(m, y, ldy, x, w, N, O, I, beta)) return;
#ifndef ZT_REAL_DOUBLE
    if (m->dtype_bf16) {
        if (!x16) x16 = to_bf16(m, m->a16, x, (size_t)N * I);
        be->gemm_bf16(be, 0, 1, N, O, I, 1, x16, I, m->params16 + w, I, beta, y, ldy);
        return;
    }
#endif
    be->gemm(be, 0, 1, N, O, I, 1, x, I, m->params + w, I, beta, y, ldy);
}

/* (llama_internal.h) a quantized base's products dequantize its tiles (qbase.h); a frozen base
 * (LoRA's, a quantized one) adds no weight gradient; dy16 has dy's row stride */
void zt_llama_linear_backward(zt_llama *m, zt_real *dx, zt_real dx_beta, const zt_real *dy, const uint16_t *dy16,
                              int ldy, const zt_real *x, const uint16_t *x16, size_t w, int N, int O, int I)
{
    zt_backend *be = m->be;
    if (m->qbase && (!dx || zt_qbase_backward(m, dx, dx_beta, dy, ldy, w, N, O, I))) return;
#ifndef ZT_REAL_DOUBLE
    if (m->dtype_bf16) {
        if (!dy16) dy16 = to_bf16(m, m->b16, dy, (size_t)(N - 1) * ldy + O);
        if (dx) be->gemm_bf16(be, 0, 0, N, I, O, 1, dy16, ldy, m->params16 + w, I, dx_beta, dx, I);
        if (!m->grads) return;
        if (!x16) x16 = to_bf16(m, m->a16, x, (size_t)N * I);
        be->gemm_bf16(be, 1, 0, O, I, N, 1, dy16, ldy, x16, I, 1, m->grads + w, I);
        return;
    }
#endif
    if (dx) be->gemm(be, 0, 0, N, I, O, 1, dy, ldy, m->params + w, I, dx_beta, dx, I);
    if (m->grads) be->gemm(be, 1, 0, O, I, N, 1, dy, ldy, x, I, 1, m->grads + w, I);
}

/* How the q and the k norm divide a token's q and k: qh rows of qd elements, kh rows of kd
 * (a row per head, or one row over the whole projection) */
static void qk_norm_rows(const zt_llama *m, int *qh, int *qd, int *kh, int *kd)
{
    int whole = m->cfg.qk_norm == ZT_QK_NORM_WHOLE;
    *qh = whole ? 1 : m->H, *qd = whole ? m->HD : m->D;
    *kh = whole ? 1 : m->KV, *kd = whole ? m->KV * m->D : m->D;
}

/* qkin [n, H + KV, D] and rstd (room for a row per head either way) */
size_t zt_llama_qk_norm_elems(const zt_llama *m, int n)
{
    return m->cfg.qk_norm ? (size_t)n * (m->H + m->KV) * (m->D + 1) : 0;
}

size_t zt_llama_qk_norm_weights(const zt_llama *m)
{
    int qh, qd, kh, kd;
    qk_norm_rows(m, &qh, &qd, &kh, &kd);
    return m->cfg.qk_norm ? (size_t)qd + kd : 0;
}

/* q with q_norm (w), then k with k_norm (w + qd); qkin and rstd hold q's first */
void zt_llama_qk_norm_forward(const zt_llama *m, zt_real *qkv, zt_real *qkin, zt_real *rstd, const zt_real *w, int n)
{
    zt_backend *be = m->be;
    int qh, qd, kh, kd;
    qk_norm_rows(m, &qh, &qd, &kh, &kd);
    zt_real off = zt_llama_norm_offset(m);
    double eps = m->cfg.rms_norm_eps;
    be->head_rmsnorm_forward(be, qkv, qkin, rstd, w, off, n, m->S3, qh, qd, eps);
    be->head_rmsnorm_forward(be, qkv + m->HD, qkin + (size_t)n * m->HD, rstd + (size_t)n * qh, w + qd, off, n, m->S3,
                             kh, kd, eps);
}

void zt_llama_qk_norm_backward(const zt_llama *m, zt_real *dqkv, zt_real *dw, const zt_real *qkin, const zt_real *w,
                               const zt_real *rstd, int n)
{
    zt_backend *be = m->be;
    int qh, qd, kh, kd;
    qk_norm_rows(m, &qh, &qd, &kh, &kd);
    zt_real off = zt_llama_norm_offset(m);
    be->head_rmsnorm_backward(be, dqkv, dw, qkin, w, off, rstd, n, m->S3, qh, qd);
    be->head_rmsnorm_backward(be, dqkv + m->HD, dw + qd, qkin + (size_t)n * m->HD, w + qd, off, rstd + (size_t)n * qh,
                              n, m->S3, kh, kd);
}

static zt_llama_layer_acts *acts_of(zt_llama *m, int l) { return &m->la[m->checkpointing ? 0 : l]; }

/* Where a norm weight's gradient at offset off goes: the gradient array, or with a frozen base
 * a sink nothing reads (room for the hidden size, or for Qwen3's q and k head norms). */
static zt_real *norm_grad(zt_llama *m, size_t off) { return m->grads ? m->grads + off : m->lora->norm_sink; }

/* The bf16 copy of dy the last linear_backward made, whole rows of it (not after a product cut
 * in tiles), for the adapters of the same product; NULL where there is none */
static const uint16_t *dy16_of(const zt_llama *m, int tiles)
{
    return keeps_bf16_inputs(m) && tiles == 1 ? m->b16 : NULL;
}

/* The adapters of the q, k and v projections (or of Phi-3's fused qkv_proj), on ln1 into qkv
 * (forward) or from dqkv into dln; in16: ln1's bf16 copy, and dqkv's in dqkv16 (zt_lora_forward). */
static void lora_qkv_forward(zt_llama *m, int l, const zt_real *ln1, const uint16_t *in16, zt_real *qkv)
{
    int kv = m->KV * m->D;
    zt_lora_forward(m, l, ZT_LORA_Q, ln1, in16, qkv, m->S3);
    zt_lora_forward(m, l, ZT_LORA_K, ln1, in16, qkv + m->HD, m->S3);
    zt_lora_forward(m, l, ZT_LORA_V, ln1, in16, qkv + m->HD + kv, m->S3);
    zt_lora_forward(m, l, ZT_LORA_QKV, ln1, in16, qkv, m->S3);
}

static void lora_qkv_backward(zt_llama *m, int l, const zt_real *ln1, const uint16_t *in16, const zt_real *dqkv,
                              const uint16_t *dqkv16, zt_real *dln)
{
    int kv = m->KV * m->D;
    zt_lora_backward(m, l, ZT_LORA_Q, ln1, in16, dqkv, dqkv16, m->S3, dln);
    zt_lora_backward(m, l, ZT_LORA_K, ln1, in16, dqkv + m->HD, dqkv16 ? dqkv16 + m->HD : NULL, m->S3, dln);
    zt_lora_backward(m, l, ZT_LORA_V, ln1, in16, dqkv + m->HD + kv, dqkv16 ? dqkv16 + m->HD + kv : NULL, m->S3, dln);
    zt_lora_backward(m, l, ZT_LORA_QKV, ln1, in16, dqkv, dqkv16, m->S3, dln);
}

void zt_llama_acquire(zt_llama *m, int unit, zt_llama_use use)
{
    if (m->hooks) m->hooks->acquire(m->hooks->ctx, unit, use);
}

void zt_llama_release(zt_llama *m, int unit, zt_llama_use use)
{
    if (m->hooks) m->hooks->release(m->hooks->ctx, unit, use);
}

void zt_llama_acquire_tile(zt_llama *m, int tiles, int unit, zt_llama_use use)
{
    if (tiles > 1) zt_llama_acquire(m, unit, use);
}

void zt_llama_release_tile(zt_llama *m, int tiles, int unit, zt_llama_use use)
{
    if (tiles > 1) zt_llama_release(m, unit, use);
}

void zt_llama_mlp_act_forward(const zt_llama *m, zt_real *h, uint16_t *h16, const zt_real *gateup, int n, int F)
{
    if (m->cfg.gemma) m->be->geglu_forward(m->be, h, h16, gateup, n, F, m->cfg.gelu_exact);
    else m->be->swiglu_forward(m->be, h, h16, gateup, n, F);
}

/* Layer l's MLP on its ln2 into out: added to it (beta 1) or written (beta 0). With K tiles the
 * products go tile by tile: rows of the gate/up weight give columns of gateup, rows of the
 * down weight columns of the output, each tile's weights acquired for its product alone. */
static void mlp_forward(zt_llama *m, int l, zt_llama_use use, zt_real *out, zt_real beta)
{
    const zt_llama_layer_layout *y = &m->lay;
    zt_llama_layer_acts *a = acts_of(m, l);
    size_t base = m->layer0_off + y->numel * l;
    int N = m->B * m->T, C = m->C, F = m->F, K = zt_llama_mlp_tiles(m), u = zt_llama_layer_unit(m, l), r0, nr;
    /* ln2's bf16 copy: made by the pre norm, else (the MLP takes xmid) here */
    const uint16_t *ln2_16 = m->cfg.no_pre_norms ? to_bf16(m, a->ln2_16, a->ln2, (size_t)N * C) : a->ln2_16;
    if (m->cfg.n_experts) {
        zt_llama_moe_forward(m, m->moe, m->checkpointing ? 0 : l, l, a->ln2, ln2_16, N, out, beta, 0);
        return;
    }
    for (int j = 0; j < K; j++) {
        zt_llama_tile(2 * F, K, j, &r0, &nr);
        zt_llama_acquire_tile(m, K, u + 1 + j, use);
        zt_llama_linear_forward(m, a->gateup + r0, 2 * F, a->ln2, ln2_16, base + y->wgu + (size_t)r0 * C, N, nr, C, 0);
        zt_llama_release_tile(m, K, u + 1 + j, use);
    }
    const uint16_t *lora16 = K == 1 ? ln2_16 : NULL; /* the adapters of tiled products: fp32 (dy16_of) */
    zt_lora_forward(m, l, ZT_LORA_GATE, a->ln2, lora16, a->gateup, 2 * F);
    zt_lora_forward(m, l, ZT_LORA_UP, a->ln2, lora16, a->gateup + F, 2 * F);
    zt_lora_forward(m, l, ZT_LORA_GATE_UP, a->ln2, lora16, a->gateup, 2 * F);
    zt_llama_mlp_act_forward(m, a->h, a->h16, a->gateup, N, F);
    const uint16_t *h16 = a->h16;
    for (int j = 0; j < K; j++) {
        zt_llama_tile(C, K, j, &r0, &nr);
        zt_llama_acquire_tile(m, K, u + 1 + K + j, use);
        zt_llama_linear_forward(m, out + r0, C, a->h, h16, base + y->wd + (size_t)r0 * F, N, nr, F, beta);
        zt_llama_release_tile(m, K, u + 1 + K + j, use);
    }
    zt_lora_forward(m, l, ZT_LORA_DOWN, a->h, K == 1 ? h16 : NULL, out, C);
}

/* ∂loss/∂(the MLP's output) in dout → ∂loss/∂ln2 in m->dln, and the MLP's weight gradients;
 * the tiles in reverse order (the order stage 3 prefetches in). */
static void mlp_backward(zt_llama *m, int l, const zt_real *dout)
{
    zt_backend *be = m->be;
    const zt_llama_layer_layout *y = &m->lay;
    zt_llama_layer_acts *a = acts_of(m, l);
    size_t base = m->layer0_off + y->numel * l;
    int N = m->B * m->T, C = m->C, F = m->F, K = zt_llama_mlp_tiles(m), u = zt_llama_layer_unit(m, l), r0, nr;
    if (m->cfg.n_experts) {
        zt_llama_moe_backward(m, m->checkpointing ? 0 : l, l, a->ln2, a->ln2_16, dout);
        return;
    }
    for (int j = K - 1; j >= 0; j--) {
        zt_llama_tile(C, K, j, &r0, &nr);
        zt_llama_acquire_tile(m, K, u + 1 + K + j, ZT_LLAMA_BACKWARD);
        zt_llama_linear_backward(m, m->dh, j < K - 1, dout + r0, NULL, C, a->h, a->h16, base + y->wd + (size_t)r0 * F,
                                 N, nr, F);
        zt_llama_release_tile(m, K, u + 1 + K + j, ZT_LLAMA_BACKWARD);
    }
    zt_lora_backward(m, l, ZT_LORA_DOWN, a->h, a->h16, dout, dy16_of(m, K), C, m->dh);
    /* dgateup's bf16 copy, made by the activation's backward, serves every tile's products */
    uint16_t *dgateup16 = keeps_bf16_inputs(m) ? m->b16 : NULL;
    if (m->cfg.gemma) be->geglu_backward(be, m->dgateup, dgateup16, m->dh, a->gateup, N, F, m->cfg.gelu_exact);
    else be->swiglu_backward(be, m->dgateup, dgateup16, m->dh, a->gateup, N, F);
    for (int j = K - 1; j >= 0; j--) {
        zt_llama_tile(2 * F, K, j, &r0, &nr);
        zt_llama_acquire_tile(m, K, u + 1 + j, ZT_LLAMA_BACKWARD);
        zt_llama_linear_backward(m, m->dln, j < K - 1, m->dgateup + r0, dgateup16 ? dgateup16 + r0 : NULL, 2 * F,
                                 a->ln2, a->ln2_16, base + y->wgu + (size_t)r0 * C, N, nr, C);
        zt_llama_release_tile(m, K, u + 1 + j, ZT_LLAMA_BACKWARD);
    }
    const uint16_t *d16 = dy16_of(m, K);
    zt_lora_backward(m, l, ZT_LORA_GATE, a->ln2, a->ln2_16, m->dgateup, d16, 2 * F, m->dln);
    zt_lora_backward(m, l, ZT_LORA_UP, a->ln2, a->ln2_16, m->dgateup + F, d16 ? d16 + F : NULL, 2 * F, m->dln);
    zt_lora_backward(m, l, ZT_LORA_GATE_UP, a->ln2, a->ln2_16, m->dgateup, d16, 2 * F, m->dln);
}

/* Layer l's rotary embedding on qkv rows (inverse: the backward pass), with Gemma 3's local
 * tables on its windowed layers; none on SmolLM3's no-rope layers */
static void layer_rope(zt_llama *m, int l, zt_real *qkv, int inverse)
{
    if (!zt_llama_layer_rope(&m->cfg, l)) return;
    int local = m->cos_l && zt_llama_layer_local(&m->cfg, l);
    m->be->rope(m->be, qkv, m->B * m->T, m->S3, m->H + m->KV, m->D, m->R, m->cfg.rope_interleaved, m->pos,
                local ? m->cos_l : m->cos_t, local ? m->sin_l : m->sin_t, inverse);
}

/* The bf16 attention kernels serve bf16 models whose scores are not soft-capped. */
static int bf16_attention(const zt_llama *m)
{
    return m->dtype_bf16 && m->be->attention_forward_bf16 && !(m->cfg.attn_softcap > 0);
}

/* Granite: out = residual + residual_multiplier · out, out holding the block's output */
static void add_scaled_block(zt_llama *m, zt_real *out, const zt_real *residual)
{
    size_t n = (size_t)m->B * m->T * m->C;
    m->be->scale(m->be, out, n, (zt_real)m->cfg.residual_multiplier);
    m->be->add(m->be, out, residual, n);
}

/* Granite: ∂loss/∂(a block's output) = residual_multiplier · ∂loss/∂(the sum), m->dres, into m->dpost */
static void scaled_block_backward(zt_llama *m)
{
    size_t n = (size_t)m->B * m->T * m->C;
    m->be->copy(m->be, m->dpost, m->dres, n * sizeof(zt_real));
    m->be->scale(m->be, m->dpost, n, (zt_real)m->cfg.residual_multiplier);
}

/* Layer l's forward: in the forward pass (use FORWARD) acquiring its units itself, in the
 * backward pass's recompute (RECOMPUTE) with the layer's first unit held by the caller. */
static void layer_forward(zt_llama *m, int l, zt_llama_use use)
{
    zt_backend *be = m->be;
    const zt_llama_layer_layout *y = &m->lay;
    zt_llama_layer_acts *a = acts_of(m, l);
    size_t base = m->layer0_off + y->numel * l;
    int N = m->B * m->T, C = m->C, window = zt_llama_layer_window(&m->cfg, l), u = zt_llama_layer_unit(m, l);
    int post = m->cfg.post_norms, pre = !m->cfg.no_pre_norms, scaled = zt_llama_scaled_residual(m);
    /* the layer's first unit is let go during the MLP's tiles, unless a post norm (in that
       unit) still follows them */
    int tiled = zt_llama_mlp_tiles(m) > 1 && !post;
    const zt_real *x = m->x[l], *in = pre ? a->ln1 : x; /* the attention's input */
    zt_real *w = m->params + base, off = zt_llama_norm_offset(m);
    double eps = m->cfg.rms_norm_eps;
    size_t bytes = (size_t)N * C * sizeof(zt_real);

    if (use == ZT_LLAMA_FORWARD) zt_llama_acquire(m, u, use);
    if (pre) be->rmsnorm_forward(be, a->ln1, a->in16, a->rstd1, x, w + y->ln1, off, N, C, eps);
    const uint16_t *in16 = pre ? a->in16 : to_bf16(m, a->in16, in, (size_t)N * C); /* the norm's copy */
    zt_llama_linear_forward(m, a->qkv, m->S3, in, in16, base + y->wqkv, N, m->S3, C, 0);
    lora_qkv_forward(m, l, in, in16, a->qkv);
    if (m->cfg.qkv_bias) be->bias_forward(be, a->qkv, w + y->bqkv, N, m->S3);
    if (m->cfg.qk_norm) zt_llama_qk_norm_forward(m, a->qkv, a->qkin, a->rstdqk, w + y->qkn, N);
    layer_rope(m, l, a->qkv, 0);
    if (bf16_attention(m))
        be->attention_forward_bf16(be, a->att, a->lse, a->qkv, m->pos, m->B, m->T, m->H, m->KV, m->D, window,
                                   m->attn_scale);
    else
        be->attention_forward(be, a->att, a->lse, a->qkv, m->pos, m->B, m->T, m->H, m->KV, m->D, window, m->attn_scale,
                              m->cfg.attn_softcap);
    /* the attention's output added to x, or its post norm, or (scaled) written into xmid first */
    zt_real *attn_out = post ? a->attn_out : a->xmid;
    if (!post && !scaled) be->copy(be, a->xmid, x, bytes);
    const uint16_t *att16 = to_bf16(m, a->att16, a->att, (size_t)N * m->HD);
    zt_llama_linear_forward(m, attn_out, C, a->att, att16, base + y->wo, N, C, m->HD, post || scaled ? 0 : 1);
    zt_lora_forward(m, l, ZT_LORA_O, a->att, att16, attn_out, C);
    if (m->cfg.o_bias) be->bias_forward(be, attn_out, w + y->bo, N, C);
    if (post) {
        be->rmsnorm_forward(be, a->xmid, NULL, a->rstd3, attn_out, w + y->post_attn, off, N, C, eps);
        be->add(be, a->xmid, x, (size_t)N * C);
    } else if (scaled) add_scaled_block(m, a->xmid, x);

    if (pre) be->rmsnorm_forward(be, a->ln2, a->ln2_16, a->rstd2, a->xmid, w + y->ln2, off, N, C, eps);
    if (!post && !scaled) be->copy(be, m->x[l + 1], a->xmid, bytes);
    if (use == ZT_LLAMA_FORWARD && tiled) zt_llama_release(m, u, use); /* the MLP's tiles are units of their own */
    mlp_forward(m, l, use, post ? a->mlp_out : m->x[l + 1], post || scaled ? 0 : 1);
    if (post) {
        be->rmsnorm_forward(be, m->x[l + 1], NULL, a->rstd4, a->mlp_out, w + y->post_mlp, off, N, C, eps);
        be->add(be, m->x[l + 1], a->xmid, (size_t)N * C);
    } else if (scaled) add_scaled_block(m, m->x[l + 1], a->xmid);
    if (use == ZT_LLAMA_FORWARD && !tiled) zt_llama_release(m, u, use);
}

/* The post norm (weight at offset w) of the block output `in` [N, C], whose sum with the
 * residual has its gradient in m->dres: ∂loss/∂in into m->dpost, the weight's gradient added. */
static void post_norm_backward(zt_llama *m, size_t w, const zt_real *in, const zt_real *rstd)
{
    zt_backend *be = m->be;
    int N = m->B * m->T, C = m->C;
    be->memset0(be, m->dpost, (size_t)N * C * sizeof(zt_real));
    be->rmsnorm_backward(be, m->dpost, norm_grad(m, w), m->dres, in, m->params + w, zt_llama_norm_offset(m), rstd, N,
                         C);
}

/* ∂loss/∂(a block's input) in m->dln added to m->dres through the pre norm (weight at offset w)
 * of the residual `in`, or directly without pre norms */
static void pre_norm_backward(zt_llama *m, size_t w, const zt_real *in, const zt_real *rstd)
{
    zt_backend *be = m->be;
    int N = m->B * m->T, C = m->C;
    if (m->cfg.no_pre_norms) be->add(be, m->dres, m->dln, (size_t)N * C);
    else
        be->rmsnorm_backward(be, m->dres, norm_grad(m, w), m->dln, in, m->params + w, zt_llama_norm_offset(m), rstd, N,
                             C);
}

/* m->dres holds ∂loss/∂x[l+1] on entry and ∂loss/∂x[l] on return. */
static void layer_backward(zt_llama *m, int l)
{
    zt_backend *be = m->be;
    const zt_llama_layer_layout *y = &m->lay;
    zt_llama_layer_acts *a = acts_of(m, l);
    size_t base = m->layer0_off + y->numel * l;
    int N = m->B * m->T, C = m->C, window = zt_llama_layer_window(&m->cfg, l), u = zt_llama_layer_unit(m, l);
    int post = m->cfg.post_norms, scaled = zt_llama_scaled_residual(m);
    const zt_real *w = m->params + base, *in = m->cfg.no_pre_norms ? m->x[l] : a->ln1; /* the attention's input */
    /* the layer's first unit is held from the recompute on, else (tiles) taken after the MLP's,
       except with a post norm, which comes before the MLP */
    int early = m->checkpointing || zt_llama_mlp_tiles(m) == 1 || post;

    if (early) zt_llama_acquire(m, u, ZT_LLAMA_BACKWARD);
    if (m->checkpointing) layer_forward(m, l, ZT_LLAMA_RECOMPUTE);
    if (post) post_norm_backward(m, base + y->post_mlp, a->mlp_out, a->rstd4);
    else if (scaled) scaled_block_backward(m);
    mlp_backward(m, l, post || scaled ? m->dpost : m->dres);
    if (!early) zt_llama_acquire(m, u, ZT_LLAMA_BACKWARD);
    pre_norm_backward(m, base + y->ln2, a->xmid, a->rstd2);

    if (post) post_norm_backward(m, base + y->post_attn, a->attn_out, a->rstd3);
    else if (scaled) scaled_block_backward(m);
    const zt_real *dattn_out = post || scaled ? m->dpost : m->dres;
    if (m->cfg.o_bias && m->grads) be->bias_backward(be, m->grads + base + y->bo, dattn_out, N, C);
    zt_llama_linear_backward(m, m->datt, 0, dattn_out, NULL, C, a->att, a->att16, base + y->wo, N, C, m->HD);
    zt_lora_backward(m, l, ZT_LORA_O, a->att, a->att16, dattn_out, dy16_of(m, 1), C, m->datt);
    if (bf16_attention(m))
        be->attention_backward_bf16(be, m->dqkv, m->datt, a->qkv, a->att, a->lse, m->pos, m->B, m->T, m->H, m->KV, m->D,
                                    window, m->attn_scale);
    else
        be->attention_backward(be, m->dqkv, m->datt, a->qkv, a->att, a->lse, m->pos, m->B, m->T, m->H, m->KV, m->D,
                               window, m->attn_scale, m->cfg.attn_softcap);
    layer_rope(m, l, m->dqkv, 1);
    if (m->cfg.qk_norm)
        zt_llama_qk_norm_backward(m, m->dqkv, norm_grad(m, base + y->qkn), a->qkin, w + y->qkn, a->rstdqk, N);
    if (m->cfg.qkv_bias && m->grads) be->bias_backward(be, m->grads + base + y->bqkv, m->dqkv, N, m->S3);
    zt_llama_linear_backward(m, m->dln, 0, m->dqkv, NULL, m->S3, in, a->in16, base + y->wqkv, N, m->S3, C);
    lora_qkv_backward(m, l, in, a->in16, m->dqkv, dy16_of(m, 1), m->dln);
    pre_norm_backward(m, base + y->ln1, m->x[l], a->rstd1);
    zt_llama_release(m, u, ZT_LLAMA_BACKWARD);
}

static int chunk_has_targets(const int32_t *target, int n)
{
    for (int i = 0; i < n; i++)
        if (target[i] >= 0) return 1;
    return 0;
}

/* The final norm into m->lnf. */
static void final_norm(zt_llama *m)
{
    m->be->rmsnorm_forward(m->be, m->lnf, NULL, m->rstdf, m->x[m->L], m->params + m->norm_off, zt_llama_norm_offset(m),
                           m->B * m->T, m->C, m->cfg.rms_norm_eps);
}

/* ∂loss/∂lnf in m->dln → ∂loss/∂x[L] in m->dres, and the final norm's weight gradient */
static void final_norm_backward(zt_llama *m)
{
    zt_backend *be = m->be;
    int N = m->B * m->T, C = m->C;
    be->memset0(be, m->dres, (size_t)N * C * sizeof(zt_real));
    be->rmsnorm_backward(be, m->dres, norm_grad(m, m->norm_off), m->dln, m->x[m->L], m->params + m->norm_off,
                         zt_llama_norm_offset(m), m->rstdf, N, C);
}

/* logits[n, nv] (rows V apart) = x·Wᵀ for the LM head's rows v0 to v0 + nv - 1: the adapters'
 * trained copy (modules_to_save; fp32, as every adapter) or the model's */
static void head_forward(zt_llama *m, zt_real *logits, const zt_real *x, const uint16_t *x16, int v0, int n, int nv)
{
    const zt_real *w = zt_lora_head(m, 0);
    size_t C = m->C;
    if (w) m->be->gemm(m->be, 0, 1, n, nv, m->C, 1, x, m->C, w + v0 * C, m->C, 0, logits, m->V);
    else zt_llama_linear_forward(m, logits, m->V, x, x16, m->head_off + v0 * C, n, nv, m->C, 0);
    zt_lora_tokens_logits(m, logits, m->V, x, v0, n, nv); /* trainable tokens' rows of a tied head */
}

/* ∂loss/∂x (dx, + dx_beta·dx) from the logits' gradient dlogits, and the head's weight gradient */
static void head_backward(zt_llama *m, zt_real *dx, zt_real dx_beta, const zt_real *dlogits, const uint16_t *dlogits16,
                          const zt_real *x, const uint16_t *x16, int v0, int n, int nv)
{
    zt_backend *be = m->be;
    const zt_real *w = zt_lora_head(m, 0);
    size_t C = m->C;
    if (!w) {
        zt_llama_linear_backward(m, dx, dx_beta, dlogits, dlogits16, m->V, x, x16, m->head_off + v0 * C, n, nv, m->C);
        zt_lora_tokens_head_backward(m, dx, dlogits, x, v0, n, nv);
        return;
    }
    be->gemm(be, 0, 0, n, m->C, nv, 1, dlogits, m->V, w + v0 * C, m->C, dx_beta, dx, m->C);
    be->gemm(be, 1, 0, nv, m->C, n, 1, dlogits, m->V, x, m->C, 1, zt_lora_head(m, 1) + v0 * C, m->C);
}

/* The LM head and cross-entropy in row chunks, on m->lnf (target: the host's copy of m->target).
 * Adds each row's loss to m->loss_rows and returns their sum. With grad_scale != 0 adds
 * ∂loss/∂lnf to m->dln, each row's gradient scaled by row_scale (device memory) when given.
 * A tiled head (memory-centric tiling) computes each chunk's logits tile by tile, each tile's
 * weights acquired on their own, and its gradient in a second pass over the tiles, last first
 * (the order stage 3 prefetches in); every chunk then takes part, targets or not, so that
 * every rank acquires the same units. */
static double lm_head(zt_llama *m, const int32_t *target, zt_real grad_scale, const zt_real *row_scale)
{
    zt_backend *be = m->be;
    int N = m->B * m->T, C = m->C, V = m->V, tiles = zt_llama_head_tiles(m), tile0 = zt_llama_head_unit(m) + 1, v0, nv;
    double cap = m->cfg.final_softcap;
    int scaled = m->cfg.logits_scaling != 1; /* Granite: logits divided by logits_scaling */
    zt_real inv_scaling = (zt_real)(1 / m->cfg.logits_scaling);
    be->memset0(be, m->loss_rows, (size_t)N * sizeof(double));
    /* lnf in bf16 once (not per chunk and tile), unless the adapters' fp32 head takes it */
    const uint16_t *lnf16 = zt_lora_head(m, 0) ? NULL : to_bf16(m, m->lnf16, m->lnf, (size_t)N * C);
    /* the logits' gradient straight into bf16 where nothing more is done to it in fp32 */
    uint16_t *d16 = NULL;
#ifndef ZT_REAL_DOUBLE
    if (lnf16 && be->cross_entropy_bf16 && grad_scale != 0 && !(cap > 0) && !scaled && !row_scale &&
        !zt_lora_tokens_on_head(m)) /* whose gradient takes fp32 columns */
        d16 = m->b16;
#endif
    for (int r0 = 0; r0 < N; r0 += m->chunk) {
        int n = N - r0 < m->chunk ? N - r0 : m->chunk;
        if (tiles == 1 && !chunk_has_targets(target + r0, n)) continue;
        const zt_real *xin = m->lnf + (size_t)r0 * C;
        const uint16_t *xin16 = lnf16 ? lnf16 + (size_t)r0 * C : NULL;
        for (int j = 0; j < tiles; j++) {
            zt_llama_tile(V, tiles, j, &v0, &nv);
            zt_llama_acquire_tile(m, tiles, tile0 + j, ZT_LLAMA_FORWARD);
            head_forward(m, m->logits + v0, xin, xin16, v0, n, nv);
            zt_llama_release_tile(m, tiles, tile0 + j, ZT_LLAMA_FORWARD);
        }
        size_t nv_all = (size_t)n * V;
        if (scaled) be->scale(be, m->logits, nv_all, inv_scaling);
        if (cap > 0) be->softcap_forward(be, m->logits, nv_all, cap);
        if (cap > 0 && grad_scale != 0) be->copy(be, m->capped, m->logits, nv_all * sizeof(zt_real));
#ifndef ZT_REAL_DOUBLE
        if (d16) be->cross_entropy_bf16(be, m->logits, m->loss_rows + r0, m->target + r0, n, V, grad_scale, d16);
        else
#endif
            be->cross_entropy(be, m->logits, m->loss_rows + r0, m->target + r0, n, V, grad_scale);
        if (grad_scale == 0) continue;
        if (cap > 0) be->softcap_backward(be, m->logits, m->capped, nv_all, cap);
        if (scaled) be->scale(be, m->logits, nv_all, inv_scaling);
        if (row_scale) be->scale_rows(be, m->logits, row_scale + r0, n, V);
        for (int j = tiles - 1; j >= 0; j--) {
            zt_llama_tile(V, tiles, j, &v0, &nv);
            zt_llama_acquire_tile(m, tiles, tile0 + j, ZT_LLAMA_BACKWARD);
            head_backward(m, m->dln + (size_t)r0 * C, j < tiles - 1, m->logits + v0, d16 ? d16 + v0 : NULL, xin, xin16,
                          v0, n, nv);
            zt_llama_release_tile(m, tiles, tile0 + j, ZT_LLAMA_BACKWARD);
        }
    }
    double loss = 0;
    be->download(be, m->loss_host, m->loss_rows, (size_t)N * sizeof(double));
    for (int i = 0; i < N; i++) loss += m->loss_host[i];
    return loss;
}

/* Final norm, LM head and cross-entropy; with a gradient, leaves ∂loss/∂x[L] in m->dres. */
static double head_forward_backward(zt_llama *m, const int32_t *target, zt_real grad_scale)
{
    ZT_ASSERT(!m->cfg.num_labels);
    final_norm(m);
    if (grad_scale != 0) m->be->memset0(m->be, m->dln, (size_t)m->B * m->T * m->C * sizeof(zt_real));
    double loss = lm_head(m, target, grad_scale, NULL);
    if (grad_scale != 0) final_norm_backward(m);
    return loss;
}

/* The score head's weight: the adapters' trained copy (lora.h), else the model's */
static const zt_real *score_weight(const zt_llama *m)
{
    const zt_real *w = zt_lora_score(m, 0);
    return w ? w : m->params + m->head_off;
}

/* The objective's outputs in m->out_host: target log-probabilities or values. */
static void head_outputs(zt_llama *m, const int32_t *target)
{
    zt_backend *be = m->be;
    int N = m->B * m->T, C = m->C;
    if (!m->cfg.num_labels) {
        lm_head(m, target, 0, NULL);
        for (int i = 0; i < N; i++) m->out_host[i] = target[i] >= 0 ? -m->loss_host[i] : 0;
        return;
    }
    be->gemm(be, 0, 1, N, 1, C, 1, m->lnf, C, score_weight(m), C, 0, m->head_out, 1);
    be->download(be, m->real_host, m->head_out, (size_t)N * sizeof(zt_real));
    for (int i = 0; i < N; i++) m->out_host[i] = m->real_host[i];
}

/* ∂loss/∂out in m->coef_host → ∂loss/∂lnf in m->dln, and the head's weight gradient */
static void head_outputs_backward(zt_llama *m, const int32_t *target)
{
    zt_backend *be = m->be;
    int N = m->B * m->T, C = m->C;
    /* a log-probability is minus the cross-entropy: its gradient is the cross-entropy's, negated */
    for (int i = 0; i < N; i++) m->real_host[i] = (zt_real)(m->cfg.num_labels ? m->coef_host[i] : -m->coef_host[i]);
    be->upload(be, m->coef, m->real_host, (size_t)N * sizeof(zt_real));
    if (!m->cfg.num_labels) {
        be->memset0(be, m->dln, (size_t)N * C * sizeof(zt_real));
        lm_head(m, target, 1, m->coef);
        return;
    }
    be->gemm(be, 0, 0, N, C, 1, 1, m->coef, 1, score_weight(m), C, 0, m->dln, C);
    zt_real *dw = m->grads ? m->grads + m->head_off : zt_lora_score(m, 1);
    if (dw) be->gemm(be, 1, 0, 1, C, N, 1, m->coef, 1, m->lnf, C, 1, dw, C);
}

/* The head for an objective: outputs, obj's loss and, with grad, ∂loss/∂x[L] in m->dres. */
static double head_objective(zt_llama *m, const int32_t *target, const zt_llama_objective *obj, int grad)
{
    final_norm(m);
    head_outputs(m, target);
    int N = m->B * m->T;
    double loss = obj->fn(obj->ctx, m->out_host, grad ? m->coef_host : NULL, N);
    if (grad) {
        head_outputs_backward(m, target);
        final_norm_backward(m);
    }
    return loss;
}

/* transformers' padding_idx: no gradient from pad_token_id's lookups (rows of m->dres zeroed) */
static void drop_pad_rows(zt_llama *m, const int32_t *input)
{
    int N = m->B * m->T, pad = m->cfg.pad_token_id, any = 0;
    for (int i = 0; i < N; i++) any |= (m->real_host[i] = input[i] == pad ? 0 : 1) == 0;
    if (!any) return;
    m->be->upload(m->be, m->pad_mask, m->real_host, (size_t)N * sizeof(zt_real));
    m->be->scale_rows(m->be, m->dres, m->pad_mask, N, m->C);
}

/* The embedding: the adapters' trained copy (modules_to_save), else the model's; and where its
 * gradient goes (NULL: frozen) */
static const zt_real *embed_weight(const zt_llama *m)
{
    const zt_real *w = zt_lora_embed(m, 0);
    return w ? w : m->params + m->embed_off;
}

static zt_real *embed_grad(const zt_llama *m)
{
    zt_real *g = zt_lora_embed(m, 1);
    return g ? g : m->grads ? m->grads + m->embed_off : NULL;
}

/* One pass: the cross-entropy (obj NULL, gradient scaled by grad_scale) or obj's loss. */
static double forward_backward(zt_llama *m, const int32_t *input, const int32_t *target, const int32_t *pos,
                               zt_real grad_scale, const zt_llama_objective *obj, int grad)
{
    zt_backend *be = m->be;
    int N = m->B * m->T;
    be->upload(be, m->input, input, (size_t)N * sizeof(int32_t));
    be->upload(be, m->target, target, (size_t)N * sizeof(int32_t));
    be->upload(be, m->pos, pos, (size_t)N * sizeof(int32_t));
    if (m->lora) m->lora->training = grad; /* dropout in gradient passes only, as in training mode */
    int head = zt_llama_head_unit(m), tied = m->cfg.tie_word_embeddings, E = zt_llama_embed_tiles(m), v0, nv;
    for (int j = 0; j < E; j++) { /* the embedding's vocabulary tiles (unit j) */
        zt_llama_tile(m->V, E, j, &v0, &nv);
        zt_llama_acquire(m, j, ZT_LLAMA_FORWARD);
        be->embedding_forward(be, m->x[0], m->input, embed_weight(m) + (size_t)v0 * m->C, v0, nv, N, m->C);
        zt_llama_release(m, j, ZT_LLAMA_FORWARD);
    }
    zt_lora_tokens_lookup(m, m->x[0], input, N);
    if (grad && m->neftune_alpha > 0) /* on the embedding's output, before Gemma's scale, as transformers */
        be->add_uniform_noise(be, m->x[0], (size_t)N * m->C, zt_mix64(m->draw_seed ^ 0x7e5e) ^ zt_mix64(m->pass),
                              (zt_real)(m->neftune_alpha / sqrt((double)m->T * m->C)));
    if (zt_llama_embed_scaled(m)) be->scale(be, m->x[0], (size_t)N * m->C, zt_llama_embed_scale(m));
    const zt_llama_act_hooks *store = grad && m->checkpointing ? m->act_store : NULL;
    size_t x_bytes = (size_t)N * m->C * sizeof(zt_real);
    for (int l = 0; l < m->L; l++) {
        layer_forward(m, l, ZT_LLAMA_FORWARD);
        if (store) store->put(store->ctx, l, m->x[l], x_bytes);
    }
    if (m->moe) zt_llama_moe_aux(m);
    zt_llama_acquire(m, head, ZT_LLAMA_FORWARD);
    if (tied) zt_llama_acquire(m, 0, ZT_LLAMA_FORWARD);
    if (grad) zt_llama_acquire(m, head, ZT_LLAMA_BACKWARD);
    if (grad && tied) zt_llama_acquire(m, 0, ZT_LLAMA_GRADS);
    double loss = obj ? head_objective(m, target, obj, grad) : head_forward_backward(m, target, grad_scale);
    if (grad && tied) zt_llama_release(m, 0, ZT_LLAMA_GRADS);
    if (grad) zt_llama_release(m, head, ZT_LLAMA_BACKWARD);
    if (tied) zt_llama_release(m, 0, ZT_LLAMA_FORWARD);
    zt_llama_release(m, head, ZT_LLAMA_FORWARD);
    if (grad) {
        for (int l = m->L - 1; l >= 0; l--) {
            if (store) store->get(store->ctx, l, m->x[l], x_bytes);
            layer_backward(m, l);
        }
        if (zt_llama_embed_scaled(m)) be->scale(be, m->dres, (size_t)N * m->C, zt_llama_embed_scale(m));
        drop_pad_rows(m, input);
        zt_lora_tokens_embed_backward(m, m->dres, N);
        zt_real *dembed = embed_grad(m);
        for (int j = E - 1; j >= 0 && dembed; j--) { /* a frozen embedding has no gradient */
            zt_llama_tile(m->V, E, j, &v0, &nv);
            zt_llama_acquire(m, j, ZT_LLAMA_GRADS);
            be->embedding_backward(be, dembed + (size_t)v0 * m->C, m->dres, m->input, v0, nv, N, m->C);
            zt_llama_release(m, j, ZT_LLAMA_GRADS);
        }
    }
    if (m->hooks) m->hooks->finish(m->hooks->ctx, grad);
    if (grad) m->pass++; /* the next gradient pass draws new dropout masks and noise */
    return loss;
}

void zt_llama_forward_backward(zt_llama *m, const int32_t *input, const int32_t *target, const int32_t *pos,
                               zt_real grad_scale, double *loss_sum)
{
    *loss_sum += forward_backward(m, input, target, pos, grad_scale, NULL, grad_scale != 0);
}

double zt_llama_forward_objective(zt_llama *m, const int32_t *input, const int32_t *target, const int32_t *pos,
                                  const zt_llama_objective *obj, int grad)
{
    return forward_backward(m, input, target, pos, 0, obj, grad);
}
