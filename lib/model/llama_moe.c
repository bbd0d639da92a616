/* A mixture of experts' MLP (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE), forward and backward: the
 * router's softmax over the experts, each token's experts_per_tok most likely experts, each
 * expert's SwiGLU on the rows sent to it, their outputs weighted and added back to their rows,
 * Qwen2-MoE's shared expert on every row weighted by the sigmoid of its gate, and the
 * load-balancing loss.
 *
 * The routing is decided in host memory (a device's router logits downloaded): which rows an
 * expert takes sets the sizes of its products. A row's (token, expert) pairs are laid out by
 * expert, tokens in order within each, so every result is the same at any thread count. The rows
 * are gathered and scattered with the embedding's kernels (a lookup of rows by index, and its
 * gradient, which adds rows in order): a device needs no kernel of its own.
 *
 * The load-balancing loss is transformers' load_balancing_loss_func: over the counted tokens
 * (padding left out) of all layers together, f_e the share of (token, choice) pairs routed to
 * expert e and P_e its mean probability, E · Σ_e f_e · P_e; its gradient flows through P alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llama_internal.h"
#include "lora.h"
#include "qbase.h"

typedef struct moe_set {
    /* backend memory: the router's logits [n, E]; per (token, expert) pair, in expert order, the
       expert's input row, gate/up, h and output, the pair's token and its weight */
    zt_real *logits, *x, *gateup, *h, *y, *w;
    int32_t *tok;
    /* a shared expert's, per row: gate/up [n, 2·Fs], h [n, Fs], output [n, C], its gate's logit and
       sigmoid [n] (the sigmoid in host memory too) */
    zt_real *sgu, *sh, *sy, *sg, *sw;
    zt_real *sw_host;
    /* host memory: the pairs of expert e are [start[e], start[e + 1]); token t's j-th choice is
       expert sel[t·k + j], pair pair[t·k + j]; prob [n, E] the router's softmax */
    int *start, *pair, *sel;
    int32_t *tok_host;
    zt_real *w_host;
    double *prob;
} moe_set;

struct zt_llama_moe {
    int n, nsets, backward;
    void *mem; /* backend memory */
    moe_set *sets;
    zt_real *tmp;                      /* [n·k, C]: weighted outputs; in backward ∂pair output, then ∂pair input */
    zt_real *dgateup, *dh, *dlogits;   /* backward: [n·k, 2F], [n·k, F], [n, E] */
    zt_real *dsgu, *dsh, *dsg, *dsg_host; /* backward, a shared expert: [n, 2·Fs], [n, Fs], its gate's [n] (and host) */
    zt_real *logits_host, *dw, *stage; /* host: [n·E]; [n·k]; on a device [2·n·k·C] (downloads), else NULL */
    double *cnt, *psum, *grad;         /* [L·E] pairs and summed probabilities of layer l's counted tokens; [E] */
};

static size_t align64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* the backend memory of a shared expert's rows: n of gate/up, h (and output with out) */
static size_t shared_bytes(const zt_llama *m, size_t n, int out)
{
    size_t Fs = (size_t)m->cfg.shared_expert_size;
    if (!Fs) return 0;
    return align64(n * 2 * Fs * sizeof(zt_real)) + align64(n * Fs * sizeof(zt_real)) +
           (out ? align64(n * m->C * sizeof(zt_real)) : 0) + 2 * align64(n * sizeof(zt_real));
}

/* the backend memory of a set (elements of zt_real, then the int32 tokens) */
static size_t set_bytes(const zt_llama *m, size_t n)
{
    size_t E = m->cfg.n_experts, k = m->cfg.experts_per_tok, C = m->C, F = m->F, nk = n * k;
    return align64(n * E * sizeof(zt_real)) + 2 * align64(nk * C * sizeof(zt_real)) +
           align64(nk * 2 * F * sizeof(zt_real)) + align64(nk * F * sizeof(zt_real)) + align64(nk * sizeof(zt_real)) +
           align64(nk * sizeof(int32_t)) + shared_bytes(m, n, 1);
}

static size_t scratch_bytes(const zt_llama *m, size_t n, int backward)
{
    size_t E = m->cfg.n_experts, nk = n * m->cfg.experts_per_tok, C = m->C, F = m->F;
    size_t b = align64(nk * C * sizeof(zt_real));
    if (backward)
        b += align64(nk * 2 * F * sizeof(zt_real)) + align64(nk * F * sizeof(zt_real)) +
             align64(n * E * sizeof(zt_real)) + shared_bytes(m, n, 0);
    return b;
}

size_t zt_llama_moe_bytes(const zt_llama *m, int n, int nsets, int backward)
{
    if (!m->cfg.n_experts) return 0;
    return (size_t)nsets * set_bytes(m, (size_t)n) + scratch_bytes(m, (size_t)n, backward);
}

void zt_llama_moe_release(const zt_llama *m, struct zt_llama_moe *moe)
{
    if (!moe) return;
    m->be->free(m->be, moe->mem);
    if (moe->sets)
        for (int s = 0; s < moe->nsets; s++) {
            moe_set *x = &moe->sets[s];
            free(x->start), free(x->pair), free(x->sel), free(x->tok_host), free(x->w_host), free(x->prob);
            free(x->sw_host);
        }
    free(moe->sets);
    free(moe->logits_host), free(moe->dw), free(moe->stage), free(moe->dsg_host);
    free(moe->cnt), free(moe->psum), free(moe->grad);
    free(moe);
}

zt_status zt_llama_moe_alloc(const zt_llama *m, int n, int nsets, int backward, struct zt_llama_moe **out)
{
    zt_backend *be = m->be;
    size_t E = m->cfg.n_experts, k = m->cfg.experts_per_tok, C = m->C, F = m->F, nk = (size_t)n * k, L = m->L;
    size_t Fs = (size_t)m->cfg.shared_expert_size;
    struct zt_llama_moe *moe = calloc(1, sizeof *moe);
    size_t bytes = zt_llama_moe_bytes(m, n, nsets, backward);
    int ok = moe && (moe->sets = calloc((size_t)nsets, sizeof *moe->sets)) && (moe->mem = be->alloc(be, bytes));
    if (ok) {
        moe->n = n, moe->nsets = nsets, moe->backward = backward;
        char *p = moe->mem;
#define TAKE(ptr, count)                                                                                               \
    do {                                                                                                               \
        (ptr) = (void *)p;                                                                                             \
        p += align64((count) * sizeof(*(ptr)));                                                                        \
    } while (0)
        for (int s = 0; s < nsets; s++) {
            moe_set *x = &moe->sets[s];
            TAKE(x->logits, (size_t)n * E);
            TAKE(x->x, nk * C);
            TAKE(x->y, nk * C);
            TAKE(x->gateup, nk * 2 * F);
            TAKE(x->h, nk * F);
            TAKE(x->w, nk);
            TAKE(x->tok, nk);
            if (Fs) {
                TAKE(x->sgu, (size_t)n * 2 * Fs);
                TAKE(x->sh, (size_t)n * Fs);
                TAKE(x->sy, (size_t)n * C);
                TAKE(x->sg, (size_t)n);
                TAKE(x->sw, (size_t)n);
                ok = ok && (x->sw_host = malloc((size_t)n * sizeof *x->sw_host));
            }
            x->start = malloc((E + 1) * sizeof *x->start);
            x->pair = malloc(nk * sizeof *x->pair);
            x->sel = malloc(nk * sizeof *x->sel);
            x->tok_host = malloc(nk * sizeof *x->tok_host);
            x->w_host = malloc(nk * sizeof *x->w_host);
            x->prob = malloc((size_t)n * E * sizeof *x->prob);
            ok = ok && x->start && x->pair && x->sel && x->tok_host && x->w_host && x->prob;
        }
        TAKE(moe->tmp, nk * C);
        if (backward) {
            TAKE(moe->dgateup, nk * 2 * F);
            TAKE(moe->dh, nk * F);
            TAKE(moe->dlogits, (size_t)n * E);
            if (Fs) {
                TAKE(moe->dsgu, (size_t)n * 2 * Fs);
                TAKE(moe->dsh, (size_t)n * Fs);
                TAKE(moe->dsg, (size_t)n);
                ok = ok && (moe->dsg_host = malloc((size_t)n * sizeof *moe->dsg_host));
            }
        }
#undef TAKE
        ZT_ASSERT((size_t)(p - (char *)moe->mem) <= bytes);
        moe->logits_host = malloc((size_t)n * E * sizeof *moe->logits_host);
        ok = ok && moe->logits_host;
        if (backward) {
            moe->dw = malloc(nk * sizeof *moe->dw);
            moe->cnt = calloc(L * E, sizeof *moe->cnt);
            moe->psum = calloc(L * E, sizeof *moe->psum);
            moe->grad = calloc(E, sizeof *moe->grad);
            if (!be->host_memory) moe->stage = malloc(2 * nk * C * sizeof *moe->stage);
            ok = ok && moe->dw && moe->cnt && moe->psum && moe->grad && (be->host_memory || moe->stage);
        }
    }
    if (!ok) {
        zt_llama_moe_release(m, moe);
        return zt_fail(ZT_ENOMEM, "out of memory for the routing of %d experts (%zu bytes)", (int)E, bytes);
    }
    *out = moe;
    return ZT_OK;
}

/* x [count] of backend memory readable in host memory: itself, or downloaded into stage */
static const zt_real *host_view(const zt_llama *m, const zt_real *x, zt_real *stage, size_t count)
{
    if (m->be->host_memory) return x;
    m->be->download(m->be, stage, x, count * sizeof *x);
    return stage;
}

/* The product a layer's weights take: the model's own (training), or fp32 on the master weights
 * (generation, as llama_decode.c; a quantized base's tiles dequantized as training does) */
static void product(zt_llama *m, int decode, zt_real *y, int ldy, const zt_real *x, const uint16_t *x16, size_t w,
                    int N, int O, int I)
{
    if (!decode) zt_llama_linear_forward(m, y, ldy, x, x16, w, N, O, I, 0);
    else if (!zt_qbase_forward(m, y, ldy, x, w, N, O, I, 0))
        m->be->gemm(m->be, 0, 1, N, O, I, 1, x, I, m->params + w, I, 0, y, ldy);
}

/* module mod's adapter (of expert e) on n rows of x added to y, if it has one: the decoder's, or a
 * training pass's (fp32 products: the backward pass has no bf16 copies of its gradients here) */
static void adapter(zt_llama *m, int decode, int l, int e, zt_lora_module mod, const zt_real *x, zt_real *y, int ldy,
                    int n)
{
    if (decode) zt_lora_decode(m, l, e, mod, x, y, ldy, n);
    else zt_lora_forward_rows(m, l, e, mod, x, NULL, y, ldy, n);
}

/* s's routing of n rows from their router logits lg [n, E]: the softmax, each row's k largest
 * probabilities (the lower expert first among equals), the pairs in expert order */
static void route(const zt_llama *m, moe_set *s, const zt_real *lg, int n)
{
    int E = m->cfg.n_experts, k = m->cfg.experts_per_tok;
    memset(s->start, 0, (size_t)(E + 1) * sizeof *s->start);
    for (int t = 0; t < n; t++) {
        const zt_real *z = lg + (size_t)t * E;
        double *p = s->prob + (size_t)t * E, top = z[0], sum = 0;
        for (int e = 1; e < E; e++) top = fmax(top, z[e]);
        for (int e = 0; e < E; e++) sum += p[e] = exp(z[e] - top);
        for (int e = 0; e < E; e++) p[e] /= sum;
        int *sel = s->sel + (size_t)t * k;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= sel[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            sel[j] = best;
            s->start[best + 1]++;
        }
    }
    for (int e = 0; e < E; e++) s->start[e + 1] += s->start[e];
    int next[4096]; /* each expert's next pair (zt_llama_check_experts: at most 4096 experts) */
    memcpy(next, s->start, (size_t)E * sizeof *next);
    for (int t = 0; t < n; t++) {
        const int *sel = s->sel + (size_t)t * k;
        const double *p = s->prob + (size_t)t * E;
        double norm = 1;
        if (m->cfg.norm_topk_prob) {
            norm = 0;
            for (int j = 0; j < k; j++) norm += p[sel[j]];
        }
        for (int j = 0; j < k; j++) {
            int q = next[sel[j]]++;
            s->pair[(size_t)t * k + j] = q;
            s->tok_host[q] = t;
            s->w_host[q] = (zt_real)(p[sel[j]] / norm);
        }
    }
}

/* whether row t of the micro-batch counts in the load-balancing loss (m->row_lens: not padding) */
static int counted(const zt_llama *m, int t) { return !m->row_lens || t % m->T < m->row_lens[t / m->T]; }

/* layer l's pairs per expert and summed probabilities over the counted rows */
static void count_rows(const zt_llama *m, struct zt_llama_moe *moe, const moe_set *s, int l, int n)
{
    int E = m->cfg.n_experts, k = m->cfg.experts_per_tok;
    double *cnt = moe->cnt + (size_t)l * E, *psum = moe->psum + (size_t)l * E;
    memset(cnt, 0, (size_t)E * sizeof *cnt);
    memset(psum, 0, (size_t)E * sizeof *psum);
    for (int t = 0; t < n; t++) {
        if (!counted(m, t)) continue;
        for (int e = 0; e < E; e++) psum[e] += s->prob[(size_t)t * E + e];
        for (int j = 0; j < k; j++) cnt[s->sel[(size_t)t * k + j]]++;
    }
}

/* Qwen2-MoE's shared expert on the n rows `in`, its output times the sigmoid of its gate's logit
 * added to out */
static void shared_forward(zt_llama *m, struct zt_llama_moe *moe, moe_set *s, int l, const zt_real *in,
                           const uint16_t *in16, int n, zt_real *out, int decode)
{
    zt_backend *be = m->be;
    int C = m->C, Fs = m->cfg.shared_expert_size;
    size_t base = m->layer0_off + m->lay.numel * l;
    product(m, decode, s->sgu, 2 * Fs, in, in16, base + m->lay.shared_gu, n, 2 * Fs, C);
    adapter(m, decode, l, 0, ZT_LORA_SHARED_GATE, in, s->sgu, 2 * Fs, n);
    adapter(m, decode, l, 0, ZT_LORA_SHARED_UP, in, s->sgu + Fs, 2 * Fs, n);
    zt_llama_mlp_act_forward(m, s->sh, NULL, s->sgu, n, Fs);
    product(m, decode, s->sy, C, s->sh, NULL, base + m->lay.shared_d, n, C, Fs);
    adapter(m, decode, l, 0, ZT_LORA_SHARED_DOWN, s->sh, s->sy, C, n);
    product(m, decode, s->sg, 1, in, in16, base + m->lay.shared_gate, n, 1, C);
    adapter(m, decode, l, 0, ZT_LORA_SHARED_ROUTER, in, s->sg, 1, n);
    const zt_real *g = host_view(m, s->sg, moe->logits_host, (size_t)n);
    for (int t = 0; t < n; t++) s->sw_host[t] = (zt_real)(1 / (1 + exp(-(double)g[t])));
    be->upload(be, s->sw, s->sw_host, (size_t)n * sizeof *s->sw);
    be->copy(be, moe->tmp, s->sy, (size_t)n * C * sizeof(zt_real));
    be->scale_rows(be, moe->tmp, s->sw, n, C);
    be->add(be, out, moe->tmp, (size_t)n * C);
}

void zt_llama_moe_forward(zt_llama *m, struct zt_llama_moe *moe, int set, int l, const zt_real *in,
                          const uint16_t *in16, int n, zt_real *out, zt_real beta, int decode)
{
    zt_backend *be = m->be;
    const zt_llama_layer_layout *y = &m->lay;
    moe_set *s = &moe->sets[set];
    int E = m->cfg.n_experts, k = m->cfg.experts_per_tok, C = m->C, F = m->F, nk = n * k;
    size_t base = m->layer0_off + y->numel * l;
    product(m, decode, s->logits, E, in, in16, base + y->router, n, E, C);
    adapter(m, decode, l, 0, ZT_LORA_ROUTER, in, s->logits, E, n);
    route(m, s, host_view(m, s->logits, moe->logits_host, (size_t)n * E), n);
    if (moe->backward && !decode) count_rows(m, moe, s, l, n);
    be->upload(be, s->tok, s->tok_host, (size_t)nk * sizeof *s->tok);
    be->upload(be, s->w, s->w_host, (size_t)nk * sizeof *s->w);
    be->embedding_forward(be, s->x, s->tok, in, 0, n, nk, C);
    for (int e = 0; e < E; e++) {
        int r0 = s->start[e], nr = s->start[e + 1] - r0;
        if (!nr) continue;
        zt_real *gu = s->gateup + (size_t)r0 * 2 * F;
        const zt_real *x = s->x + (size_t)r0 * C;
        product(m, decode, gu, 2 * F, x, NULL, base + y->wgu + y->expert * e, nr, 2 * F, C);
        adapter(m, decode, l, e, ZT_LORA_GATE, x, gu, 2 * F, nr);
        adapter(m, decode, l, e, ZT_LORA_UP, x, gu + F, 2 * F, nr);
    }
    zt_llama_mlp_act_forward(m, s->h, NULL, s->gateup, nk, F);
    for (int e = 0; e < E; e++) {
        int r0 = s->start[e], nr = s->start[e + 1] - r0;
        if (!nr) continue;
        product(m, decode, s->y + (size_t)r0 * C, C, s->h + (size_t)r0 * F, NULL, base + y->wd + y->expert * e, nr, C,
                F);
        adapter(m, decode, l, e, ZT_LORA_DOWN, s->h + (size_t)r0 * F, s->y + (size_t)r0 * C, C, nr);
    }
    /* each pair's output times its weight, added to its row in pair order */
    be->copy(be, moe->tmp, s->y, (size_t)nk * C * sizeof(zt_real));
    be->scale_rows(be, moe->tmp, s->w, nk, C);
    if (beta == 0) be->memset0(be, out, (size_t)n * C * sizeof(zt_real));
    be->embedding_backward(be, out, moe->tmp, s->tok, 0, n, nk, C);
    if (m->cfg.shared_expert_size) shared_forward(m, moe, s, l, in, in16, n, out, decode);
}

void zt_llama_moe_aux(zt_llama *m)
{
    struct zt_llama_moe *moe = m->moe;
    int E = m->cfg.n_experts, N = m->B * m->T, rows = 0;
    for (int t = 0; t < N; t++) rows += counted(m, t);
    double M = (double)m->L * rows, aux = 0;
    for (int e = 0; e < E; e++) {
        double f = 0, P = 0;
        for (int l = 0; l < m->L; l++) f += moe->cnt[(size_t)l * E + e], P += moe->psum[(size_t)l * E + e];
        f = M > 0 ? f / M : 0, P = M > 0 ? P / M : 0;
        aux += f * P;
        /* ∂(weight · E · Σ f·P)/∂(a counted row's probability of e) = weight · E · f_e / M */
        moe->grad[e] = M > 0 ? m->router_aux_weight * E * f / M : 0;
    }
    m->router_aux = E * aux;
}

/* ∂loss/∂(the router's logits) of the n rows into moe->dlogits: from each pair's weight (dw, the
 * output's gradient dotted with the expert's output), through the division by the chosen
 * probabilities' sum (norm_topk_prob), and the load-balancing loss's, through the softmax */
static void router_grad(const zt_llama *m, struct zt_llama_moe *moe, const moe_set *s, int n)
{
    int E = m->cfg.n_experts, k = m->cfg.experts_per_tok;
    zt_real *dl = moe->logits_host;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) {
        const double *p = s->prob + (size_t)t * E;
        const int *sel = s->sel + (size_t)t * k, *pair = s->pair + (size_t)t * k;
        double dp[4096], norm = 0, wdw = 0, dot = 0;
        for (int e = 0; e < E; e++) dp[e] = counted(m, t) ? moe->grad[e] : 0;
        for (int j = 0; j < k; j++) norm += p[sel[j]];
        if (m->cfg.norm_topk_prob) { /* w_j = p_j / S: ∂/∂p_j = (dw_j − Σ_i dw_i·w_i) / S */
            for (int j = 0; j < k; j++) wdw += moe->dw[pair[j]] * p[sel[j]] / norm;
            for (int j = 0; j < k; j++) dp[sel[j]] += (moe->dw[pair[j]] - wdw) / norm;
        } else {
            for (int j = 0; j < k; j++) dp[sel[j]] += moe->dw[pair[j]];
        }
        for (int e = 0; e < E; e++) dot += p[e] * dp[e];
        for (int e = 0; e < E; e++) dl[(size_t)t * E + e] = (zt_real)(p[e] * (dp[e] - dot));
    }
    m->be->upload(m->be, moe->dlogits, dl, (size_t)n * E * sizeof *dl);
}

/* The shared expert's part of ∂loss/∂in added to m->dln, its weights' gradients added: ∂ its
 * output = sigmoid · ∂out, ∂ its gate's logit = sigmoid' · (∂out · its output) */
static void shared_backward(zt_llama *m, const moe_set *s, int l, const zt_real *in, const uint16_t *in16,
                            const zt_real *dout)
{
    zt_backend *be = m->be;
    struct zt_llama_moe *moe = m->moe;
    int C = m->C, Fs = m->cfg.shared_expert_size, n = m->B * m->T, nk = n * m->cfg.experts_per_tok;
    size_t base = m->layer0_off + m->lay.numel * l;
    const zt_real *g = host_view(m, dout, moe->stage, (size_t)n * C);
    const zt_real *o = host_view(m, s->sy, moe->stage ? moe->stage + (size_t)nk * C : NULL, (size_t)n * C);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) {
        double d = 0, w = s->sw_host[t];
        for (int c = 0; c < C; c++) d += (double)g[(size_t)t * C + c] * o[(size_t)t * C + c];
        moe->dsg_host[t] = (zt_real)(w * (1 - w) * d);
    }
    be->upload(be, moe->dsg, moe->dsg_host, (size_t)n * sizeof *moe->dsg);
    be->copy(be, moe->tmp, dout, (size_t)n * C * sizeof(zt_real));
    be->scale_rows(be, moe->tmp, s->sw, n, C);
    zt_llama_linear_backward(m, moe->dsh, 0, moe->tmp, NULL, C, s->sh, NULL, base + m->lay.shared_d, n, C, Fs);
    zt_lora_backward_rows(m, l, 0, ZT_LORA_SHARED_DOWN, s->sh, NULL, moe->tmp, NULL, C, moe->dsh, n);
    be->swiglu_backward(be, moe->dsgu, NULL, moe->dsh, s->sgu, n, Fs);
    zt_llama_linear_backward(m, m->dln, 1, moe->dsgu, NULL, 2 * Fs, in, in16, base + m->lay.shared_gu, n, 2 * Fs, C);
    zt_lora_backward_rows(m, l, 0, ZT_LORA_SHARED_GATE, in, NULL, moe->dsgu, NULL, 2 * Fs, m->dln, n);
    zt_lora_backward_rows(m, l, 0, ZT_LORA_SHARED_UP, in, NULL, moe->dsgu + Fs, NULL, 2 * Fs, m->dln, n);
    zt_llama_linear_backward(m, m->dln, 1, moe->dsg, NULL, 1, in, in16, base + m->lay.shared_gate, n, 1, C);
    zt_lora_backward_rows(m, l, 0, ZT_LORA_SHARED_ROUTER, in, NULL, moe->dsg, NULL, 1, m->dln, n);
}

void zt_llama_moe_backward(zt_llama *m, int set, int l, const zt_real *in, const uint16_t *in16, const zt_real *dout)
{
    zt_backend *be = m->be;
    const zt_llama_layer_layout *y = &m->lay;
    struct zt_llama_moe *moe = m->moe;
    moe_set *s = &moe->sets[set];
    int E = m->cfg.n_experts, k = m->cfg.experts_per_tok, C = m->C, F = m->F, n = m->B * m->T, nk = n * k;
    size_t base = m->layer0_off + y->numel * l;
    /* each pair's weight's gradient: its row's output gradient (gathered in pair order) · the expert's output */
    be->embedding_forward(be, moe->tmp, s->tok, dout, 0, n, nk, C);
    const zt_real *g = host_view(m, moe->tmp, moe->stage, (size_t)nk * C);
    const zt_real *o = host_view(m, s->y, moe->stage ? moe->stage + (size_t)nk * C : NULL, (size_t)nk * C);
#pragma omp parallel for schedule(static)
    for (int q = 0; q < nk; q++) {
        double d = 0;
        for (int c = 0; c < C; c++) d += (double)g[(size_t)q * C + c] * o[(size_t)q * C + c];
        moe->dw[q] = (zt_real)d;
    }
    router_grad(m, moe, s, n);
    zt_llama_linear_backward(m, m->dln, 0, moe->dlogits, NULL, E, in, in16, base + y->router, n, E, C);
    zt_lora_backward_rows(m, l, 0, ZT_LORA_ROUTER, in, NULL, moe->dlogits, NULL, E, m->dln, n);
    /* the experts: ∂ pair output = weight · ∂ row output; their inputs' gradients added to their rows */
    be->scale_rows(be, moe->tmp, s->w, nk, C);
    for (int e = 0; e < E; e++) {
        int r0 = s->start[e], nr = s->start[e + 1] - r0;
        if (!nr) continue;
        zt_real *dh = moe->dh + (size_t)r0 * F, *dy = moe->tmp + (size_t)r0 * C, *h = s->h + (size_t)r0 * F;
        zt_llama_linear_backward(m, dh, 0, dy, NULL, C, h, NULL, base + y->wd + y->expert * e, nr, C, F);
        zt_lora_backward_rows(m, l, e, ZT_LORA_DOWN, h, NULL, dy, NULL, C, dh, nr);
    }
    be->swiglu_backward(be, moe->dgateup, NULL, moe->dh, s->gateup, nk, F);
    for (int e = 0; e < E; e++) {
        int r0 = s->start[e], nr = s->start[e + 1] - r0;
        if (!nr) continue;
        zt_real *dx = moe->tmp + (size_t)r0 * C, *dgu = moe->dgateup + (size_t)r0 * 2 * F, *x = s->x + (size_t)r0 * C;
        zt_llama_linear_backward(m, dx, 0, dgu, NULL, 2 * F, x, NULL, base + y->wgu + y->expert * e, nr, 2 * F, C);
        zt_lora_backward_rows(m, l, e, ZT_LORA_GATE, x, NULL, dgu, NULL, 2 * F, dx, nr);
        zt_lora_backward_rows(m, l, e, ZT_LORA_UP, x, NULL, dgu + F, NULL, 2 * F, dx, nr);
    }
    be->embedding_backward(be, m->dln, moe->tmp, s->tok, 0, n, nk, C);
    if (m->cfg.shared_expert_size) shared_backward(m, s, l, in, in16, dout);
}
