/* Generation: the forward pass over new tokens of one sequence, or over one new token of each
 * of several, keys and values of earlier positions kept in a cache, on the model's backend (on
 * a device, the weights used in place). */
#include <stdlib.h>
#include <string.h>

#include "llama_internal.h"
#include "lora.h"
#include "qbase.h"

/* Whether the blocks' outputs are written apart (c->post) before they join the residual */
static int apart(const zt_llama *m) { return m->cfg.post_norms || zt_llama_scaled_residual(m); }

size_t zt_llama_cache_bytes(const zt_llama *m, int capacity, int chunk, int slots)
{
    int device = !m->be->host_memory;
    size_t n = (size_t)chunk, kv = (size_t)m->KV * m->D, half = (size_t)m->R / 2;
    size_t reals = 2 * (size_t)m->L * slots * capacity * kv +
                   n * (2 * (size_t)m->C + m->S3 + m->HD + 3 * (size_t)m->F + 1) + 2 * (size_t)capacity * half;
    reals += zt_llama_qk_norm_elems(m, chunk) + (apart(m) ? n * m->C : 0) +
             (m->cfg.rope_local_theta > 0 ? 2 * (size_t)capacity * half : 0) + (device ? (size_t)slots * m->V : 0);
    return reals * sizeof(zt_real) + (device ? 2 : 1) * n * sizeof(int32_t) + 22 * 64 +
           zt_llama_moe_bytes(m, chunk, 1, 0);
}

zt_status zt_llama_cache_init(zt_llama_cache *c, const zt_llama *m, int capacity, int chunk, int slots)
{
    memset(c, 0, sizeof *c);
    ZT_ASSERT(slots >= 1 && chunk >= slots);
    zt_backend *be = m->be;
    int device = !be->host_memory;
    size_t n = (size_t)chunk, kv = (size_t)m->KV * m->D, half = (size_t)m->R / 2;
    size_t bytes = zt_llama_cache_bytes(m, capacity, chunk, slots);
    c->mem = be->alloc(be, bytes);
    c->lens = calloc((size_t)slots, sizeof *c->lens);
    c->row_slot = malloc(2 * n * sizeof *c->row_slot);
    if (!c->mem || !c->lens || !c->row_slot) {
        zt_llama_cache_free(c, m);
        return zt_fail(ZT_ENOMEM, "out of memory for a KV cache of %d positions", capacity);
    }
    c->row_pos = c->row_slot + n;
    c->capacity = capacity, c->chunk = chunk, c->slots = slots, c->group = slots;
    char *p = c->mem;
#define TAKE(ptr, count)                                                                                               \
    do {                                                                                                               \
        (ptr) = (void *)p;                                                                                             \
        p += ((count) * sizeof(*(ptr)) + 63) & ~(size_t)63;                                                            \
    } while (0)
    TAKE(c->k, (size_t)m->L * slots * capacity * kv);
    TAKE(c->v, (size_t)m->L * slots * capacity * kv);
    TAKE(c->x, n * m->C);
    TAKE(c->ln, n * m->C);
    TAKE(c->qkv, n * m->S3);
    TAKE(c->att, n * m->HD);
    TAKE(c->gateup, n * 2 * m->F);
    TAKE(c->h, n * m->F);
    TAKE(c->rstd, n);
    if (m->cfg.qk_norm) {
        TAKE(c->qkin, n * (m->H + m->KV) * m->D);
        TAKE(c->rstdqk, n * (m->H + m->KV));
    }
    if (apart(m)) TAKE(c->post, n * m->C);
    TAKE(c->cos_t, (size_t)capacity * half);
    TAKE(c->sin_t, (size_t)capacity * half);
    if (m->cfg.rope_local_theta > 0) {
        TAKE(c->cos_l, (size_t)capacity * half);
        TAKE(c->sin_l, (size_t)capacity * half);
    }
    TAKE(c->pos, n);
    if (device) {
        TAKE(c->tokens, n);
        TAKE(c->logits, (size_t)slots * m->V);
    }
#undef TAKE
    ZT_ASSERT((size_t)(p - (char *)c->mem) <= bytes);
    zt_status st = m->cfg.n_experts ? zt_llama_moe_alloc(m, chunk, 1, 0, &c->moe) : ZT_OK;
    if (!st) st = zt_llama_rope_tables_upload(m, capacity, 0, c->cos_t, c->sin_t);
    if (!st && c->cos_l) st = zt_llama_rope_tables_upload(m, capacity, 1, c->cos_l, c->sin_l);
    if (st) zt_llama_cache_free(c, m);
    return st;
}

void zt_llama_cache_free(zt_llama_cache *c, const zt_llama *m)
{
    if (c->mem) m->be->free(m->be, c->mem);
    zt_llama_moe_release(m, c->moe);
    free(c->lens);
    free(c->row_slot);
    memset(c, 0, sizeof *c);
}

void zt_llama_cache_reset(zt_llama_cache *c) { memset(c->lens, 0, (size_t)c->slots * sizeof *c->lens); }

/* layer l's keys (or values, v) of slot s */
static zt_real *slot_kv(const zt_llama *m, const zt_llama_cache *c, int v, int l, int s)
{
    return (v ? c->v : c->k) + ((size_t)l * c->slots + s) * c->capacity * m->KV * m->D;
}

void zt_llama_cache_fork(zt_llama_cache *c, const zt_llama *m, int from, int count)
{
    ZT_ASSERT(from + count <= c->slots);
    size_t bytes = (size_t)c->lens[from] * m->KV * m->D * sizeof(zt_real);
    for (int s = from + 1; s < from + count; s++) {
        for (int l = 0; l < m->L && bytes; l++)
            for (int v = 0; v < 2; v++) m->be->copy(m->be, slot_kv(m, c, v, l, s), slot_kv(m, c, v, l, from), bytes);
        c->lens[s] = c->lens[from];
    }
}

/* The end of the group of rows that starts at row i of n: rows of slots alike in s / c->group */
static int group_end(const zt_llama_cache *c, int i, int n)
{
    int g = c->row_slot[i] / c->group, j = i + 1;
    while (j < n && c->row_slot[j] / c->group == g) j++;
    return j;
}

/* y[n,O] (rows ldy apart) = x[n,I]·Wᵀ + beta·y, each group of rows a product of its own: W, or
 * (NULL) the fp32 master weights at offset w, or a quantized base's encoding there dequantized
 * tile by tile (qbase.h), as the training passes multiply it */
static void product(zt_llama *m, const zt_llama_cache *c, zt_real *y, int ldy, const zt_real *x, const zt_real *W,
                    size_t w, int n, int O, int I, zt_real beta)
{
    for (int i = 0, j; i < n; i = j) {
        j = group_end(c, i, n);
        zt_real *yi = y + (size_t)i * ldy;
        const zt_real *xi = x + (size_t)i * I;
        if (W || !zt_qbase_forward(m, yi, ldy, xi, w, j - i, O, I, beta))
            m->be->gemm(m->be, 0, 1, j - i, O, I, 1, xi, I, W ? W : m->params + w, I, beta, yi, ldy);
    }
}

static void linear(zt_llama *m, const zt_llama_cache *c, zt_real *y, int ldy, const zt_real *x, size_t w, int n, int O,
                   int I, zt_real beta)
{
    product(m, c, y, ldy, x, NULL, w, n, O, I, beta);
}

/* The adapters of module mod on x (rows I wide) added to y, group by group */
static void adapters(zt_llama *m, const zt_llama_cache *c, int l, zt_lora_module mod, const zt_real *x, int I,
                     zt_real *y, int ldy, int n)
{
    for (int i = 0, j; i < n; i = j) {
        j = group_end(c, i, n);
        zt_lora_decode(m, l, 0, mod, x + (size_t)i * I, y + (size_t)i * ldy, ldy, j - i);
    }
}

/* c->x += out (the attention's or the MLP's output, written into c->post), through its post
 * norm (weight at offset w), or (Granite) times residual_multiplier */
static void add_block_out(zt_llama *m, zt_llama_cache *c, size_t w, int n)
{
    zt_backend *be = m->be;
    if (!m->cfg.post_norms) {
        be->scale(be, c->post, (size_t)n * m->C, (zt_real)m->cfg.residual_multiplier);
        be->add(be, c->x, c->post, (size_t)n * m->C);
        return;
    }
    be->rmsnorm_forward(be, c->ln, NULL, c->rstd, c->post, m->params + w, zt_llama_norm_offset(m), n, m->C,
                        m->cfg.rms_norm_eps);
    be->add(be, c->x, c->ln, (size_t)n * m->C);
}

/* The tokens' embeddings into c->x, tile by tile (each tile's unit acquired for its lookup) */
static void embed_rows(zt_llama *m, zt_llama_cache *c, const int32_t *tokens, const int32_t *host_tokens, int n)
{
    zt_backend *be = m->be;
    const zt_real *embed = zt_lora_embed(m, 0); /* modules_to_save's copy */
    int E = zt_llama_embed_tiles(m), v0, nv;
    for (int j = 0; j < E; j++) {
        zt_llama_tile(m->V, E, j, &v0, &nv);
        zt_llama_acquire(m, j, ZT_LLAMA_FORWARD);
        be->embedding_forward(be, c->x, tokens, (embed ? embed : m->params + m->embed_off) + (size_t)v0 * m->C, v0, nv,
                              n, m->C);
        zt_llama_release(m, j, ZT_LLAMA_FORWARD);
    }
    zt_lora_tokens_lookup(m, c->x, host_tokens, n);
    if (zt_llama_embed_scaled(m)) be->scale(be, c->x, (size_t)n * m->C, zt_llama_embed_scale(m));
}

/* Layer l up to its MLP: the attention added to c->x (or through its post norm), and the MLP's
 * pre norm into c->ln */
static void attention_rows(zt_llama *m, zt_llama_cache *c, int l, int n)
{
    zt_backend *be = m->be;
    const zt_llama_layer_layout *y = &m->lay;
    int C = m->C, kv = m->KV * m->D, sep = apart(m), pre = !m->cfg.no_pre_norms;
    double eps = m->cfg.rms_norm_eps;
    zt_real off = zt_llama_norm_offset(m), *out = sep ? c->post : c->x;  /* blocks add into x, or via c->post */
    const zt_real *in = pre ? c->ln : c->x;                              /* a block's input: its pre norm's, or x */
    size_t base = m->layer0_off + y->numel * l;
    zt_real *w = m->params + base;
    int local = c->cos_l && zt_llama_layer_local(&m->cfg, l);
    if (pre) be->rmsnorm_forward(be, c->ln, NULL, c->rstd, c->x, w + y->ln1, off, n, C, eps);
    linear(m, c, c->qkv, m->S3, in, base + y->wqkv, n, m->S3, C, 0);
    adapters(m, c, l, ZT_LORA_Q, in, C, c->qkv, m->S3, n);
    adapters(m, c, l, ZT_LORA_K, in, C, c->qkv + m->HD, m->S3, n);
    adapters(m, c, l, ZT_LORA_V, in, C, c->qkv + m->HD + kv, m->S3, n);
    adapters(m, c, l, ZT_LORA_QKV, in, C, c->qkv, m->S3, n);
    if (m->cfg.qkv_bias) be->bias_forward(be, c->qkv, w + y->bqkv, n, m->S3);
    if (m->cfg.qk_norm) zt_llama_qk_norm_forward(m, c->qkv, c->qkin, c->rstdqk, w + y->qkn, n);
    if (zt_llama_layer_rope(&m->cfg, l))
        be->rope(be, c->qkv, n, m->S3, m->H + m->KV, m->D, m->R, m->cfg.rope_interleaved, c->pos,
                 local ? c->cos_l : c->cos_t, local ? c->sin_l : c->sin_t, 0);
    for (int i = 0, j; i < n; i = j) { /* each slot's rows: their keys and values, then their queries */
        int s = c->row_slot[i], p0 = c->row_pos[i];
        zt_real *K = slot_kv(m, c, 0, l, s), *V = slot_kv(m, c, 1, l, s);
        for (j = i; j < n && c->row_slot[j] == s; j++) {
            const zt_real *row = c->qkv + (size_t)j * m->S3 + m->HD;
            be->copy(be, K + (size_t)c->row_pos[j] * kv, row, kv * sizeof(zt_real));
            be->copy(be, V + (size_t)c->row_pos[j] * kv, row + kv, kv * sizeof(zt_real));
        }
        be->attention_decode(be, c->att + (size_t)i * m->HD, c->qkv + (size_t)i * m->S3, m->S3, K, V, kv, j - i, p0,
                             m->H, m->KV, m->D, zt_llama_layer_window(&m->cfg, l), m->attn_scale, m->cfg.attn_softcap);
    }
    linear(m, c, out, C, c->att, base + y->wo, n, C, m->HD, sep ? 0 : 1);
    adapters(m, c, l, ZT_LORA_O, c->att, m->HD, out, C, n);
    if (m->cfg.o_bias) be->bias_forward(be, out, w + y->bo, n, C);
    if (sep) add_block_out(m, c, base + y->post_attn, n);
    if (pre) be->rmsnorm_forward(be, c->ln, NULL, c->rstd, c->x, w + y->ln2, off, n, C, eps);
}

/* Layer l's MLP on its input (c->ln, or c->x without pre norms) added to c->x (or through its
 * post norm). With K tiles the products go tile by tile, each tile's unit acquired for its
 * product alone (llama.c: mlp_forward). */
static void mlp_rows(zt_llama *m, zt_llama_cache *c, int l, int n)
{
    const zt_llama_layer_layout *y = &m->lay;
    int C = m->C, F = m->F, K = zt_llama_mlp_tiles(m), u = zt_llama_layer_unit(m, l), sep = apart(m), r0, nr;
    const zt_real *in = m->cfg.no_pre_norms ? c->x : c->ln;
    zt_real *out = sep ? c->post : c->x;
    size_t base = m->layer0_off + y->numel * l;
    if (c->moe) { /* group by group, as every product */
        for (int i = 0, j; i < n; i = j) {
            j = group_end(c, i, n);
            zt_llama_moe_forward(m, c->moe, 0, l, in + (size_t)i * C, NULL, j - i, out + (size_t)i * C, sep ? 0 : 1, 1);
        }
        return;
    }
    for (int j = 0; j < K; j++) {
        zt_llama_tile(2 * F, K, j, &r0, &nr);
        zt_llama_acquire_tile(m, K, u + 1 + j, ZT_LLAMA_FORWARD);
        linear(m, c, c->gateup + r0, 2 * F, in, base + y->wgu + (size_t)r0 * C, n, nr, C, 0);
        zt_llama_release_tile(m, K, u + 1 + j, ZT_LLAMA_FORWARD);
    }
    adapters(m, c, l, ZT_LORA_GATE, in, C, c->gateup, 2 * F, n);
    adapters(m, c, l, ZT_LORA_UP, in, C, c->gateup + F, 2 * F, n);
    adapters(m, c, l, ZT_LORA_GATE_UP, in, C, c->gateup, 2 * F, n);
    zt_llama_mlp_act_forward(m, c->h, NULL, c->gateup, n, F);
    for (int j = 0; j < K; j++) {
        zt_llama_tile(C, K, j, &r0, &nr);
        zt_llama_acquire_tile(m, K, u + 1 + K + j, ZT_LLAMA_FORWARD);
        linear(m, c, out + r0, C, c->h, base + y->wd + (size_t)r0 * F, n, nr, F, sep ? 0 : 1);
        zt_llama_release_tile(m, K, u + 1 + K + j, ZT_LLAMA_FORWARD);
    }
    adapters(m, c, l, ZT_LORA_DOWN, c->h, F, out, C, n);
}

/* Layer l, its units acquired as the training forward pass acquires them (llama.c:
 * layer_forward): its first unit let go during a tiled MLP, unless a post norm follows it */
static void layer_rows(zt_llama *m, zt_llama_cache *c, int l, int n)
{
    int u = zt_llama_layer_unit(m, l), post = m->cfg.post_norms, tiled = zt_llama_mlp_tiles(m) > 1 && !post;
    zt_llama_acquire(m, u, ZT_LLAMA_FORWARD);
    attention_rows(m, c, l, n);
    if (tiled) zt_llama_release(m, u, ZT_LLAMA_FORWARD);
    mlp_rows(m, c, l, n);
    if (apart(m)) add_block_out(m, c, m->layer0_off + m->lay.numel * l + m->lay.post_mlp, n);
    if (!tiled) zt_llama_release(m, u, ZT_LLAMA_FORWARD);
}

/* The final norm and the LM head on the last `rows` of c->x into z [rows][V], the head's units
 * (with a tied head the embedding's) acquired as the training forward pass acquires them */
static void head_rows(zt_llama *m, zt_llama_cache *c, int n, int rows, zt_real *z)
{
    zt_backend *be = m->be;
    int C = m->C, head = zt_llama_head_unit(m), tied = m->cfg.tie_word_embeddings, H = zt_llama_head_tiles(m), v0, nv;
    const zt_real *copy = zt_lora_head(m, 0); /* modules_to_save's */
    zt_llama_acquire(m, head, ZT_LLAMA_FORWARD);
    if (tied) zt_llama_acquire(m, 0, ZT_LLAMA_FORWARD);
    be->rmsnorm_forward(be, c->ln, NULL, c->rstd, c->x + (size_t)(n - rows) * C, m->params + m->norm_off,
                        zt_llama_norm_offset(m), rows, C, m->cfg.rms_norm_eps);
    for (int j = 0; j < H; j++) {
        zt_llama_tile(m->V, H, j, &v0, &nv);
        zt_llama_acquire_tile(m, H, head + 1 + j, ZT_LLAMA_FORWARD);
        product(m, c, z + v0, m->V, c->ln, (copy ? copy : m->params + m->head_off) + (size_t)v0 * C, 0, rows, nv, C, 0);
        zt_lora_tokens_logits(m, z + v0, m->V, c->ln, v0, rows, nv);
        zt_llama_release_tile(m, H, head + 1 + j, ZT_LLAMA_FORWARD);
    }
    if (tied) zt_llama_release(m, 0, ZT_LLAMA_FORWARD);
    zt_llama_release(m, head, ZT_LLAMA_FORWARD);
}

/* The n rows of c->row_slot and c->row_pos: row i a token of slot row_slot[i] at position
 * row_pos[i] (a slot's rows consecutive, at consecutive positions). Writes the logits of every
 * row (all) or of the last one, [rows][V]. A model whose units come and go (m->hooks: ZeRO stage
 * 3) has each acquired around its use, in the training forward pass's order, and the pass
 * finished at the end. */
static void decode_rows(zt_llama *m, zt_llama_cache *c, const int32_t *tokens, int n, int all, zt_real *logits)
{
    zt_backend *be = m->be;
    be->upload(be, c->pos, c->row_pos, (size_t)n * sizeof *c->pos);
    const int32_t *host_tokens = tokens;
    if (c->tokens) { /* on a device */
        be->upload(be, c->tokens, tokens, (size_t)n * sizeof *tokens);
        tokens = c->tokens;
    }
    embed_rows(m, c, tokens, host_tokens, n);
    for (int l = 0; l < m->L; l++) layer_rows(m, c, l, n);
    for (int i = 0; i < n; i++) c->lens[c->row_slot[i]] = c->row_pos[i] + 1;
    int rows = all ? n : 1;
    zt_real *z = c->logits ? c->logits : logits;
    size_t nv = (size_t)rows * m->V;
    head_rows(m, c, n, rows, z);
    if (m->cfg.logits_scaling != 1) be->scale(be, z, nv, (zt_real)(1 / m->cfg.logits_scaling));
    if (m->cfg.final_softcap > 0) be->softcap_forward(be, z, nv, m->cfg.final_softcap);
    if (c->logits) be->download(be, logits, c->logits, nv * sizeof *logits);
    if (m->hooks) m->hooks->finish(m->hooks->ctx, 0);
}

/* The cache's chunk, or fewer where the adapters' scratch is smaller */
int zt_llama_decode_rows(const zt_llama *m, const zt_llama_cache *c)
{
    return m->lora && (size_t)c->chunk > m->lora->scratch_tokens ? (int)m->lora->scratch_tokens : c->chunk;
}

static zt_status check_decoder(const zt_llama *m)
{
    if (m->lora && m->lora->cfg.method == ZT_LORA_METHOD_DORA && !m->lora->decode_norms)
        return zt_fail(ZT_EUSER, "generation with a DoRA adapter needs its norms (zt_lora_prepare_decode)");
    if (m->lora && !m->lora->scratch_tokens) return zt_fail(ZT_EUSER, "generation with adapters needs their scratch");
    return ZT_OK;
}

zt_status zt_llama_decode_slot(zt_llama *m, zt_llama_cache *c, int slot, const int32_t *tokens, int n, zt_real *logits)
{
    if (n <= 0) return zt_fail(ZT_EUSER, "nothing to decode");
    zt_status st = check_decoder(m);
    if (st) return st;
    ZT_ASSERT(slot >= 0 && slot < c->slots);
    if (c->lens[slot] + n > c->capacity)
        return zt_fail(ZT_EUSER, "the sequence would pass %d positions (the KV cache's capacity)", c->capacity);
    int chunk = zt_llama_decode_rows(m, c);
    for (int done = 0; done < n; done += chunk) {
        int k = n - done < chunk ? n - done : chunk;
        for (int i = 0; i < k; i++) c->row_slot[i] = slot, c->row_pos[i] = c->lens[slot] + i;
        decode_rows(m, c, tokens + done, k, 0, logits);
    }
    return ZT_OK;
}

zt_status zt_llama_decode(zt_llama *m, zt_llama_cache *c, const int32_t *tokens, int n, zt_real *logits)
{
    return zt_llama_decode_slot(m, c, 0, tokens, n, logits);
}

zt_status zt_llama_decode_slots(zt_llama *m, zt_llama_cache *c, const int *slots, const int32_t *tokens, int n,
                                zt_real *logits)
{
    zt_status st = check_decoder(m);
    if (st) return st;
    if (n <= 0) return zt_fail(ZT_EUSER, "nothing to decode");
    for (int i = 0; i < n; i++) {
        ZT_ASSERT(slots[i] >= 0 && slots[i] < c->slots && (!i || slots[i] > slots[i - 1]));
        if (c->lens[slots[i]] >= c->capacity)
            return zt_fail(ZT_EUSER, "the sequence would pass %d positions (the KV cache's capacity)", c->capacity);
    }
    int chunk = zt_llama_decode_rows(m, c);
    for (int done = 0; done < n; done += chunk) {
        int k = n - done < chunk ? n - done : chunk;
        for (int i = 0; i < k; i++) c->row_slot[i] = slots[done + i], c->row_pos[i] = c->lens[slots[done + i]];
        decode_rows(m, c, tokens + done, k, 1, logits + (size_t)done * m->V);
    }
    return ZT_OK;
}
