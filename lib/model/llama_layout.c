/* Parameter layout: sizes first, then named tensors as offsets into one array. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/rng.h"
#include "llama_internal.h"
#include "lora.h"
#include "qbase.h"

static void add_tensor(zt_llama *m, size_t off, int64_t rows, int64_t cols, int decay, const char *fmt, int layer)
{
    zt_llama_tensor *t = &m->tensors[m->n_tensors++];
    size_t k = strlen(m->cfg.text_prefix); /* an image-text model's: the names fit in 128 with it */
    memcpy(t->name, m->cfg.text_prefix, k);
    snprintf(t->name + k, sizeof t->name - k, fmt, layer);
    t->offset = off;
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->decay = decay;
    t->lr_scale = 1;
}

/* Elements a linear weight [rows, cols] takes in the flat array: its values, or in a quantized
 * base its encoding (qbase.h). */
static size_t linear_elems(const zt_llama *m, size_t rows, size_t cols)
{
    return m->qbase ? zt_qbase_tensor_elems(m->qbase, rows, cols) : rows * cols;
}

static void layout(zt_llama *m)
{
    const zt_llama_config *c = &m->cfg;
    zt_llama_layer_layout *y = &m->lay;
    size_t C = m->C, o = 0, pre = c->no_pre_norms ? 0 : C, post = c->post_norms ? C : 0;
    size_t qd = m->HD, kd = (size_t)m->KV * m->D, F = m->F;
    int fused = zt_llama_fused_qkv(c), fused_gu = zt_llama_fused_gate_up(c); /* one tensor, or apart */
    y->ln1 = o, o += pre;
    y->wqkv = o, o += fused ? linear_elems(m, m->S3, C) : linear_elems(m, qd, C) + 2 * linear_elems(m, kd, C);
    y->bqkv = o, o += c->qkv_bias ? (size_t)m->S3 : 0;
    y->qkn = o, o += zt_llama_qk_norm_weights(m);
    y->wo = o, o += linear_elems(m, C, qd);
    y->bo = o, o += c->o_bias ? C : 0;
    y->post_attn = o, o += post;
    y->ln2 = o, o += pre;
    y->post_mlp = o, o += post; /* before the MLP's matrices: in the layer's first unit */
    size_t experts = c->n_experts ? (size_t)c->n_experts : 1;
    y->router = o, o += c->n_experts ? linear_elems(m, (size_t)c->n_experts, C) : 0;
    y->wgu = o, o += fused_gu ? linear_elems(m, 2 * F, C) : 2 * linear_elems(m, F, C);
    y->wd = o, o += linear_elems(m, C, F);
    y->expert = c->n_experts ? o - y->wgu : 0;
    o += (experts - 1) * y->expert; /* experts 1 .. n-1, as expert 0 */
    size_t Fs = (size_t)c->shared_expert_size; /* Qwen2-MoE's shared expert and its gate */
    y->shared_gu = o, o += Fs ? 2 * linear_elems(m, Fs, C) : 0;
    y->shared_d = o, o += Fs ? linear_elems(m, C, Fs) : 0;
    y->shared_gate = o, o += Fs ? linear_elems(m, 1, C) : 0;
    y->numel = o;

    m->embed_off = 0;
    m->layer0_off = (size_t)m->V * C;
    m->norm_off = m->layer0_off + y->numel * m->L;
    m->head_off = c->tie_word_embeddings ? m->embed_off : m->norm_off + C;
    m->numel = m->norm_off + C + (c->tie_word_embeddings ? 0 : (size_t)zt_llama_head_rows(m) * C);
}

/* A linear weight [rows, cols] at *off, which moves past it: in a quantized base its encoding,
 * a vector of its elements (qbase.h), else the matrix. */
static void add_linear(zt_llama *m, size_t *off, int64_t rows, int64_t cols, const char *fmt, int layer)
{
    size_t n = linear_elems(m, (size_t)rows, (size_t)cols);
    if (m->qbase) add_tensor(m, *off, (int64_t)n, 0, 0, fmt, layer);
    else add_tensor(m, *off, rows, cols, 1, fmt, layer);
    *off += n;
}

/* A mixture of experts' router and experts, named as the family's checkpoints name them (Mixtral's
 * block_sparse_moe with w1, w3, w2; the others' mlp with gate_proj, up_proj, down_proj), and
 * Qwen2-MoE's shared expert and its gate */
static void name_experts(zt_llama *m, int l)
{
    const zt_llama_layer_layout *y = &m->lay;
    int C = m->C, F = m->F, mixtral = !strcmp(m->cfg.model_type, "mixtral");
    const char *block = mixtral ? "block_sparse_moe" : "mlp";
    const char *gate = mixtral ? "w1" : "gate_proj", *up = mixtral ? "w3" : "up_proj",
               *down = mixtral ? "w2" : "down_proj";
    size_t b = m->layer0_off + y->numel * l;
    char fmt[96];
    size_t w = b + y->router;
    snprintf(fmt, sizeof fmt, "model.layers.%%d.%s.gate.weight", block);
    add_linear(m, &w, m->cfg.n_experts, C, fmt, l);
    for (int e = 0; e < m->cfg.n_experts; e++) {
        w = b + y->wgu + y->expert * e;
        snprintf(fmt, sizeof fmt, "model.layers.%%d.%s.experts.%d.%s.weight", block, e, gate);
        add_linear(m, &w, F, C, fmt, l);
        snprintf(fmt, sizeof fmt, "model.layers.%%d.%s.experts.%d.%s.weight", block, e, up);
        add_linear(m, &w, F, C, fmt, l);
        snprintf(fmt, sizeof fmt, "model.layers.%%d.%s.experts.%d.%s.weight", block, e, down);
        add_linear(m, &w, C, F, fmt, l);
    }
    int Fs = m->cfg.shared_expert_size;
    if (!Fs) return;
    w = b + y->shared_gu;
    add_linear(m, &w, Fs, C, "model.layers.%d.mlp.shared_expert.gate_proj.weight", l);
    add_linear(m, &w, Fs, C, "model.layers.%d.mlp.shared_expert.up_proj.weight", l);
    add_linear(m, &w, C, Fs, "model.layers.%d.mlp.shared_expert.down_proj.weight", l);
    add_linear(m, &w, 1, C, "model.layers.%d.mlp.shared_expert_gate.weight", l);
}

static void name_tensors(zt_llama *m)
{
    const zt_llama_layer_layout *y = &m->lay;
    int C = m->C, qd = m->H * m->D, kd = m->KV * m->D, fused = zt_llama_fused_qkv(&m->cfg);
    int glm4 = !strcmp(m->cfg.model_type, "glm4"); /* its post norms' names */
    add_tensor(m, m->embed_off, m->V, C, 1, "model.embed_tokens.weight", 0);
    for (int l = 0; l < m->L; l++) {
        size_t b = m->layer0_off + y->numel * l, w = b + y->wqkv;
        if (!m->cfg.no_pre_norms) add_tensor(m, b + y->ln1, C, 0, 0, "model.layers.%d.input_layernorm.weight", l);
        if (fused) { /* Phi-3's checkpoints hold q, k, v in one matrix, as zt does */
            add_linear(m, &w, m->S3, C, "model.layers.%d.self_attn.qkv_proj.weight", l);
        } else {
            add_linear(m, &w, qd, C, "model.layers.%d.self_attn.q_proj.weight", l);
            add_linear(m, &w, kd, C, "model.layers.%d.self_attn.k_proj.weight", l);
            add_linear(m, &w, kd, C, "model.layers.%d.self_attn.v_proj.weight", l);
        }
        if (m->cfg.qkv_bias) {
            add_tensor(m, b + y->bqkv, qd, 0, 0, "model.layers.%d.self_attn.q_proj.bias", l);
            add_tensor(m, b + y->bqkv + qd, kd, 0, 0, "model.layers.%d.self_attn.k_proj.bias", l);
            add_tensor(m, b + y->bqkv + qd + kd, kd, 0, 0, "model.layers.%d.self_attn.v_proj.bias", l);
        }
        if (m->cfg.qk_norm) { /* a head's width, or (OLMo 2) the whole projection's */
            int qn = m->cfg.qk_norm == ZT_QK_NORM_WHOLE ? qd : m->D, kn = (int)zt_llama_qk_norm_weights(m) - qn;
            add_tensor(m, b + y->qkn, qn, 0, 0, "model.layers.%d.self_attn.q_norm.weight", l);
            add_tensor(m, b + y->qkn + qn, kn, 0, 0, "model.layers.%d.self_attn.k_norm.weight", l);
        }
        w = b + y->wo;
        add_linear(m, &w, C, qd, "model.layers.%d.self_attn.o_proj.weight", l);
        if (m->cfg.o_bias) add_tensor(m, b + y->bo, C, 0, 0, "model.layers.%d.self_attn.o_proj.bias", l);
        if (glm4) { /* GLM-4's post_attention_layernorm is the MLP's input's, as Llama's */
            add_tensor(m, b + y->post_attn, C, 0, 0, "model.layers.%d.post_self_attn_layernorm.weight", l);
            add_tensor(m, b + y->ln2, C, 0, 0, "model.layers.%d.post_attention_layernorm.weight", l);
            add_tensor(m, b + y->post_mlp, C, 0, 0, "model.layers.%d.post_mlp_layernorm.weight", l);
        } else if (m->cfg.post_norms) { /* then post_attention_layernorm is a norm of the attention's output */
            add_tensor(m, b + y->post_attn, C, 0, 0, "model.layers.%d.post_attention_layernorm.weight", l);
            if (!m->cfg.no_pre_norms)
                add_tensor(m, b + y->ln2, C, 0, 0, "model.layers.%d.pre_feedforward_layernorm.weight", l);
            add_tensor(m, b + y->post_mlp, C, 0, 0, "model.layers.%d.post_feedforward_layernorm.weight", l);
        } else {
            add_tensor(m, b + y->ln2, C, 0, 0, "model.layers.%d.post_attention_layernorm.weight", l);
        }
        if (m->cfg.n_experts) {
            name_experts(m, l);
            continue;
        }
        w = b + y->wgu;
        if (zt_llama_fused_gate_up(&m->cfg)) { /* gate over up */
            add_linear(m, &w, 2 * (int64_t)m->F, C, "model.layers.%d.mlp.gate_up_proj.weight", l);
        } else {
            add_linear(m, &w, m->F, C, "model.layers.%d.mlp.gate_proj.weight", l);
            add_linear(m, &w, m->F, C, "model.layers.%d.mlp.up_proj.weight", l);
        }
        add_linear(m, &w, C, m->F, "model.layers.%d.mlp.down_proj.weight", l);
    }
    add_tensor(m, m->norm_off, C, 0, 0, "model.norm.weight", 0);
    if (m->cfg.num_labels) add_tensor(m, m->head_off, m->cfg.num_labels, C, 1, "score.weight", 0);
    else if (!m->cfg.tie_word_embeddings) add_tensor(m, m->head_off, m->V, C, 1, "lm_head.weight", 0);
}

/* zt_llama_shape, the linear weights encoded as q says when it is not NULL (m then owns q, also
 * when this fails) */
static zt_status shape(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype, struct zt_qbase *q)
{
    memset(m, 0, sizeof *m);
    m->be = be;
    m->qbase = q;
    zt_status st = zt_llama_config_check(c, "model config");
    if (st) return st;
    if (dtype == ZT_F16)
        return zt_fail(ZT_EUSER, "model.dtype = \"fp16\" is not supported on the %s backend (use bf16 or fp32)",
                       be->name);
    if (dtype == ZT_BF16 && !be->gemm_bf16)
        return zt_fail(ZT_EUSER, "model.dtype = \"bf16\" is not supported by this build of the %s backend", be->name);
    m->cfg = *c;
    m->dtype_bf16 = dtype == ZT_BF16;
    /* on every backend: the kernels that make the products' inputs write their bf16 copies too,
       and the weight gradients read them again instead of converting a second time */
    m->bf16_inputs = m->dtype_bf16;
    m->C = c->hidden_size, m->F = c->n_experts ? zt_llama_expert_size(c) : c->intermediate_size,
    m->H = c->num_attention_heads;
    m->KV = c->num_key_value_heads, m->D = c->head_dim, m->L = c->num_hidden_layers, m->V = c->vocab_size;
    m->S3 = (m->H + 2 * m->KV) * m->D;
    m->HD = m->H * m->D;
    m->R = zt_llama_rotary_dim(c);
    m->attn_scale = (zt_real)(c->attention_multiplier > 0    ? c->attention_multiplier
                              : c->query_pre_attn_scalar > 0 ? pow(c->query_pre_attn_scalar, -0.5)
                                                             : 1.0 / sqrt((double)m->D));
    layout(m);
    return ZT_OK;
}

zt_status zt_llama_shape(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype)
{
    return shape(m, c, be, dtype, NULL);
}

zt_status zt_llama_shape_quantized(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype,
                                   struct zt_qbase *q)
{
    return shape(m, c, be, dtype, q);
}

/* room for the most tensors a layer (17 with every bias, the q/k norms and Gemma's two more
 * norms; a mixture of experts' router and three a expert more) and the rest can have */
static zt_llama_tensor *alloc_tensors(const zt_llama *m)
{
    return calloc((size_t)m->L * (18 + 3 * (size_t)m->cfg.n_experts) + 4, sizeof(zt_llama_tensor));
}

zt_status zt_llama_tensors(const zt_llama_config *c, zt_llama_tensor **tensors, int *n)
{
    zt_llama m;
    zt_status st = zt_llama_shape(&m, c, zt_backend_cpu(), ZT_F32);
    if (st) return st;
    if (!(m.tensors = alloc_tensors(&m))) return zt_fail(ZT_ENOMEM, "out of memory for the tensor table");
    name_tensors(&m);
    *tensors = m.tensors, *n = m.n_tensors;
    return ZT_OK;
}

size_t zt_llama_weight_bytes(const zt_llama *m, size_t n)
{
    return n * (sizeof(float) + (m->dtype_bf16 ? sizeof(uint16_t) : 0));
}

static zt_status init(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype, struct zt_qbase *q)
{
    zt_status st = shape(m, c, be, dtype, q);
    if (st) {
        zt_qbase_free(m);
        return st;
    }
    m->tensors = alloc_tensors(m);
    m->router_aux_weight = c->output_router_logits ? c->router_aux_loss_coef : 0;
    /* room past the end so that ZeRO's equal shards (numel rounded up to the world size) fit */
    m->params = be->alloc(be, (m->numel + ZT_LLAMA_PAD) * sizeof(zt_real));
    if (!q) m->grads = be->alloc(be, (m->numel + ZT_LLAMA_PAD) * sizeof(zt_real)); /* a quantized base is frozen */
    if (m->dtype_bf16) m->params16 = be->alloc(be, m->numel * sizeof(uint16_t));
    if (!m->tensors || !m->params || (!q && !m->grads) || (m->dtype_bf16 && !m->params16)) {
        size_t numel = m->numel;
        zt_llama_free(m);
        return zt_fail(ZT_ENOMEM, "out of memory for %zu parameters", numel);
    }
    name_tensors(m);
    return ZT_OK;
}

zt_status zt_llama_init(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype)
{
    return init(m, c, be, dtype, NULL);
}

zt_status zt_llama_init_quantized(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype,
                                  struct zt_qbase *q)
{
    return init(m, c, be, dtype, q);
}

void zt_llama_free(zt_llama *m)
{
    if (!m->be) return;
    zt_lora_free(m);
    zt_qbase_free(m);
    free(m->tensors);
    m->be->free(m->be, m->params);
    m->be->free(m->be, m->grads);
    m->be->free(m->be, m->params16);
    m->be->free(m->be, m->acts_mem);
    free(m->x);
    free(m->la);
    free(m->loss_host);
    free(m->out_host);
    zt_llama_moe_release(m, m->moe);
    memset(m, 0, sizeof *m);
}

const zt_llama_tensor *zt_llama_find_tensor(const zt_llama *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

static int clamp_tiles(int k, int rows) { return k <= 1 ? 1 : k < rows ? k : rows; }

int zt_llama_embed_tiles(const zt_llama *m)
{
    return m->cfg.tie_word_embeddings ? 1 : clamp_tiles(m->embed_tiles, m->V);
}

/* a mixture of experts' MLP is one piece of its layer's unit */
int zt_llama_mlp_tiles(const zt_llama *m)
{
    return m->cfg.n_experts ? 1 : clamp_tiles(m->mlp_tiles, m->C < m->F ? m->C : m->F);
}

int zt_llama_head_tiles(const zt_llama *m)
{
    return m->cfg.tie_word_embeddings || m->cfg.num_labels ? 1 : clamp_tiles(m->head_tiles, m->V);
}

void zt_llama_tile(int rows, int k, int j, int *r0, int *nr)
{
    *r0 = (int)((long long)rows * j / k);
    *nr = (int)((long long)rows * (j + 1) / k) - *r0;
}

static int layer_units(const zt_llama *m)
{
    int k = zt_llama_mlp_tiles(m);
    return k > 1 ? 1 + 2 * k : 1;
}

int zt_llama_layer_unit(const zt_llama *m, int l) { return zt_llama_embed_tiles(m) + l * layer_units(m); }

int zt_llama_head_unit(const zt_llama *m) { return zt_llama_layer_unit(m, m->L); }

int zt_llama_units(const zt_llama *m)
{
    int k = zt_llama_head_tiles(m);
    return zt_llama_head_unit(m) + 1 + (k > 1 ? k : 0);
}

/* Part p of layer l's units (layer_units of them) */
static void layer_unit_range(const zt_llama *m, int l, int p, size_t *offset, size_t *count)
{
    const zt_llama_layer_layout *y = &m->lay;
    size_t base = m->layer0_off + y->numel * (size_t)l;
    int k = zt_llama_mlp_tiles(m), r0, nr;
    if (k == 1) {
        *offset = base, *count = y->numel;
    } else if (p == 0) {
        *offset = base, *count = y->wgu;
    } else if (p <= k) {
        zt_llama_tile(2 * m->F, k, p - 1, &r0, &nr);
        *offset = base + y->wgu + (size_t)r0 * m->C, *count = (size_t)nr * m->C;
    } else {
        zt_llama_tile(m->C, k, p - 1 - k, &r0, &nr);
        *offset = base + y->wd + (size_t)r0 * m->F, *count = (size_t)nr * m->F;
    }
}

void zt_llama_unit_range(const zt_llama *m, int unit, size_t *offset, size_t *count)
{
    ZT_ASSERT(unit >= 0 && unit < zt_llama_units(m));
    int E = zt_llama_embed_tiles(m), head = zt_llama_head_unit(m), v0, nv;
    if (unit < E) {
        zt_llama_tile(m->V, E, unit, &v0, &nv);
        *offset = m->embed_off + (size_t)v0 * m->C, *count = (size_t)nv * m->C;
    } else if (unit < head) {
        layer_unit_range(m, (unit - E) / layer_units(m), (unit - E) % layer_units(m), offset, count);
    } else if (zt_llama_head_tiles(m) == 1) {
        *offset = m->norm_off, *count = m->numel - m->norm_off;
    } else if (unit == head) {
        *offset = m->norm_off, *count = m->head_off - m->norm_off;
    } else {
        zt_llama_tile(m->V, zt_llama_head_tiles(m), unit - head - 1, &v0, &nv);
        *offset = m->head_off + (size_t)v0 * m->C, *count = (size_t)nv * m->C;
    }
}

size_t zt_llama_matmul_params(const zt_llama *m)
{
    /* a mixture of experts: the router and the experts a token passes through (a shared expert too) */
    size_t mlps = m->cfg.n_experts ? (size_t)m->cfg.experts_per_tok : 1, Fs = (size_t)m->cfg.shared_expert_size;
    size_t router = (size_t)m->cfg.n_experts * m->C + (Fs ? (3 * Fs + 1) * m->C : 0);
    size_t per_layer = (size_t)m->S3 * m->C + (size_t)m->C * m->HD + 3 * mlps * m->F * m->C + router;
    return per_layer * m->L + (size_t)zt_llama_head_rows(m) * m->C;
}

double zt_llama_flops_per_token(const zt_llama *m, int T)
{
    return 6.0 * (double)zt_llama_matmul_params(m) + 12.0 * m->L * m->C * (double)T;
}

zt_real *zt_llama_params_map(const zt_llama *m)
{
    zt_backend *be = m->be;
    if (be->host_memory) return m->params;
    zt_real *host = malloc(m->numel * sizeof *host);
    if (host) be->download(be, host, m->params, m->numel * sizeof *host);
    return host;
}

void zt_llama_params_unmap(zt_llama *m, zt_real *host, int changed)
{
    zt_backend *be = m->be;
    if (!be->host_memory && host && changed) be->upload(be, m->params, host, m->numel * sizeof *host);
    if (changed) zt_llama_sync_params16(m);
    if (host != m->params) free(host);
}

void zt_llama_init_stream_start(zt_llama_init_stream *s, const zt_llama *m, int i, uint64_t seed, double std)
{
    const zt_llama_tensor *t = &m->tensors[i];
    /* a norm weight's scale is 1: Gemma's scale is 1 + weight */
    s->random = t->ndim == 2, s->std = std, s->ziggurat = 0;
    s->fixed = strstr(t->name, "norm.weight") && !m->cfg.gemma ? 1 : 0;
    zt_rng_seed(&s->rng, seed, (uint64_t)i); /* tensor i draws from stream i */
}

void zt_llama_init_stream_next(zt_llama_init_stream *s, zt_real *dst, size_t n)
{
    for (size_t j = 0; j < n; j++)
        dst[j] = !s->random    ? s->fixed
                 : s->ziggurat ? (zt_real)(s->std * zt_rng_normal_ziggurat(&s->rng))
                               : (zt_real)(s->std * zt_rng_normal(&s->rng));
}

zt_status zt_llama_init_weights(zt_llama *m, uint64_t seed, double std)
{
    zt_real *p = zt_llama_params_map(m);
    if (!p) return zt_fail(ZT_ENOMEM, "out of memory initialising the weights");
        /* a stream per tensor: the same weights for any thread count */
#pragma omp parallel for schedule(dynamic)
    for (int i = 0; i < m->n_tensors; i++) {
        const zt_llama_tensor *t = &m->tensors[i];
        zt_llama_init_stream s;
        zt_llama_init_stream_start(&s, m, i, seed, std);
        zt_llama_init_stream_next(&s, p + t->offset, (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1));
    }
    zt_llama_params_unmap(m, p, 1);
    return ZT_OK;
}

void zt_llama_sync_params16(zt_llama *m)
{
#ifndef ZT_REAL_DOUBLE
    if (m->dtype_bf16) m->be->to_bf16(m->be, m->params16, m->params, m->numel);
#endif
}

/* m laid out again for config c, m's with a larger vocabulary or the LM head untied from the
 * embedding (what: the message's words): each tensor in its new place, the rows a
 * vocabulary-sized matrix gains at the mean of the old ones, an untied head starting as the
 * embedding. The attached adapters stay attached. */
static zt_status relayout(zt_llama *m, const zt_llama_config *c, const char *what)
{
    if (m->qbase) return zt_fail(ZT_EUSER, "a quantized base cannot be laid out again (%s)", what);
    zt_llama n;
    zt_status st = zt_llama_init(&n, c, m->be, m->dtype_bf16 ? ZT_BF16 : ZT_F32);
    if (st) return st;
    zt_real *from = zt_llama_params_map(m), *to = zt_llama_params_map(&n);
    if (!from || !to) {
        zt_llama_params_unmap(m, from, 0);
        zt_llama_params_unmap(&n, to, 0);
        zt_llama_free(&n);
        return zt_fail(ZT_ENOMEM, "out of memory %s", what);
    }
    for (int i = 0; i < m->n_tensors; i++) { /* the same tensors in the same order, an untied head last */
        const zt_llama_tensor *a = &m->tensors[i], *b = &n.tensors[i];
        size_t cols = a->ndim == 2 ? (size_t)a->shape[1] : 1, old_rows = (size_t)a->shape[0];
        memcpy(to + b->offset, from + a->offset, old_rows * cols * sizeof(zt_real));
        if (b->shape[0] == a->shape[0]) continue;
        /* a vocabulary-sized matrix: new rows start at the mean of the old ones */
        for (size_t j = 0; j < cols; j++) {
            double mean = 0;
            for (size_t r = 0; r < old_rows; r++) mean += from[a->offset + r * cols + j];
            mean /= (double)old_rows;
            for (size_t r = old_rows; r < (size_t)b->shape[0]; r++) to[b->offset + r * cols + j] = (zt_real)mean;
        }
    }
    if (n.head_off != n.embed_off && m->head_off == m->embed_off)
        memcpy(to + n.head_off, to + n.embed_off, (size_t)n.V * n.C * sizeof(zt_real));
    zt_llama_params_unmap(m, from, 0);
    zt_llama_params_unmap(&n, to, 1);
    n.embed_tiles = m->embed_tiles, n.mlp_tiles = m->mlp_tiles, n.head_tiles = m->head_tiles;
    n.router_aux_weight = m->router_aux_weight;
    n.lora = m->lora, m->lora = NULL;
    zt_llama_free(m);
    *m = n;
    return ZT_OK;
}

zt_status zt_llama_resize_vocab(zt_llama *m, int V)
{
    if (V == m->V) return ZT_OK;
    ZT_ASSERT(V > m->V);
    if (m->qbase)
        return zt_fail(ZT_EUSER,
                       "the vocabulary of a quantized base cannot grow (%d to %d tokens): add the tokens to the model "
                       "first",
                       m->V, V);
    zt_llama_config c = m->cfg;
    c.vocab_size = V;
    return relayout(m, &c, "resizing the vocabulary");
}

zt_status zt_llama_untie(zt_llama *m)
{
    if (!m->cfg.tie_word_embeddings) return ZT_OK;
    zt_llama_config c = m->cfg;
    c.tie_word_embeddings = 0;
    return relayout(m, &c, "untying the LM head from the embedding");
}
