/* Trainable tokens (lora.h: PEFT's trainable_token_indices): rows of the embedding trained, the
 * rest frozen. The rows [n, C] follow the adapters in their flat array, starting as the base's.
 * The passes look the base up as they would, then write the trained rows over the positions of
 * those tokens; a tied LM head's logits of those tokens are the trained rows' products, and its
 * gradient the base's product with their rows' difference added. Each token is a product of
 * its own (a column of the logits, ldc = V): the lists are short, a few new tokens. */
#include <stdlib.h>

#include "lora.h"

/* The trained rows (grad: their gradient), else NULL (none, or the adapters switched off) */
static zt_real *rows(const zt_llama *m, int grad)
{
    const zt_lora *a = m->lora;
    if (!a || a->disabled || !a->cfg.n_tokens) return NULL;
    return (grad ? a->view.grads : a->view.params) + a->tokens_off;
}

int zt_lora_tokens_on_head(const zt_llama *m) { return rows(m, 0) && m->cfg.tie_word_embeddings; }

void zt_lora_tokens_lookup(zt_llama *m, zt_real *out, const int32_t *ids, int N)
{
    const zt_real *t = rows(m, 0);
    if (!t) return;
    zt_lora *a = m->lora;
    ZT_ASSERT((size_t)N <= a->scratch_tokens);
    for (int i = 0; i < N; i++) a->slot_host[i] = ids[i] >= 0 && ids[i] < m->V ? a->slot_of[ids[i]] : -1;
    m->be->upload(m->be, a->token_slot, a->slot_host, (size_t)N * sizeof(int32_t));
    m->be->embedding_forward(m->be, out, a->token_slot, t, 0, a->cfg.n_tokens, N, m->C);
}

void zt_lora_tokens_embed_backward(zt_llama *m, const zt_real *dout, int N)
{
    zt_real *g = rows(m, 1);
    if (g) m->be->embedding_backward(m->be, g, dout, m->lora->token_slot, 0, m->lora->cfg.n_tokens, N, m->C);
}

void zt_lora_tokens_logits(zt_llama *m, zt_real *logits, int ld, const zt_real *x, int v0, int n, int nv)
{
    const zt_real *t = rows(m, 0);
    if (!t || !m->cfg.tie_word_embeddings) return;
    const zt_lora_config *c = &m->lora->cfg;
    size_t C = m->C;
    for (int j = 0; j < c->n_tokens; j++)
        if (c->tokens[j] >= v0 && c->tokens[j] < v0 + nv)
            m->be->gemm(m->be, 0, 1, n, 1, m->C, 1, x, m->C, t + j * C, m->C, 0, logits + (c->tokens[j] - v0), ld);
}

void zt_lora_tokens_head_backward(zt_llama *m, zt_real *dx, const zt_real *dlogits, const zt_real *x, int v0, int n,
                                  int nv)
{
    const zt_real *t = rows(m, 0);
    if (!t || !m->cfg.tie_word_embeddings) return;
    zt_backend *be = m->be;
    zt_real *g = rows(m, 1);
    const zt_lora_config *c = &m->lora->cfg;
    size_t C = m->C;
    for (int j = 0; j < c->n_tokens; j++) {
        int v = c->tokens[j];
        if (v < v0 || v >= v0 + nv) continue;
        const zt_real *col = dlogits + (v - v0); /* [n, 1], rows V apart */
        be->gemm(be, 1, 0, 1, m->C, n, 1, col, m->V, x, m->C, 1, g + j * C, m->C);
        /* the base's product took the base's row: the trained one's instead */
        be->gemm(be, 0, 0, n, m->C, 1, 1, col, m->V, t + j * C, m->C, 1, dx, m->C);
        be->gemm(be, 0, 0, n, m->C, 1, -1, col, m->V, m->params + m->head_off + (size_t)v * C, m->C, 1, dx, m->C);
    }
}
