/* A Llama-family model's tensors into GGUF: their names, the rotary reordering, the experts of a
 * mixture stacked into one tensor each. */
#define _GNU_SOURCE
#include "gguf_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct renamed {
    const char *hf, *gguf; /* a layer's tensor, after "model.layers.N." and after "blk.N." */
} renamed;

/* A Hugging Face tensor name → llama.cpp's; 0 when there is no such tensor. */
static int gguf_name(const char *hf, int post_norms, char *out, size_t cap)
{
    /* Gemma 2's and 3's norms of each block's output inside the residual (post_norms), its MLP's input's */
    static const renamed post[] = {
        {"post_attention_layernorm.weight", "post_attention_norm.weight"},
        {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    };
    static const renamed layer[] = {
        {"input_layernorm.weight", "attn_norm.weight"},
        {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.k_proj.bias", "attn_k.bias"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.v_proj.bias", "attn_v.bias"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.o_proj.bias", "attn_output.bias"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
        /* Phi-3's fused projections, which llama.cpp keeps fused (gate first, then up) */
        {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
        {"mlp.gate_up_proj.weight", "ffn_up.weight"},
        /* a mixture's router (Mixtral's in block_sparse_moe), Qwen2-MoE's shared expert and its gate */
        {"mlp.gate.weight", "ffn_gate_inp.weight"},
        {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
        {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
        {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
        {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
        {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
    };
    if (!strcmp(hf, "model.embed_tokens.weight")) return snprintf(out, cap, "token_embd.weight") > 0;
    if (!strcmp(hf, "model.norm.weight")) return snprintf(out, cap, "output_norm.weight") > 0;
    if (!strcmp(hf, "lm_head.weight")) return snprintf(out, cap, "output.weight") > 0;
    int l, n = 0;
    if (sscanf(hf, "model.layers.%d.%n", &l, &n) != 1 || !n) return 0;
    for (size_t i = 0; post_norms && i < sizeof post / sizeof *post; i++)
        if (!strcmp(hf + n, post[i].hf)) return snprintf(out, cap, "blk.%d.%s", l, post[i].gguf) > 0;
    for (size_t i = 0; i < sizeof layer / sizeof *layer; i++)
        if (!strcmp(hf + n, layer[i].hf)) return snprintf(out, cap, "blk.%d.%s", l, layer[i].gguf) > 0;
    return 0;
}

/* llama.cpp's stacked expert tensors, [experts, rows, columns] */
static const char *const stacked[] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};

/* An expert's matrix, "model.layers.L.mlp.experts.E.gate_proj.weight" (Mixtral's
 * block_sparse_moe.experts.E.w1): its layer, expert and stacked tensor (0 gate, 1 up, 2 down); -1
 * when hf is not one. */
static int expert_matrix(const char *hf, int *layer, int *expert)
{
    static const char *const kinds[][2] = {{"gate_proj", "w1"}, {"up_proj", "w3"}, {"down_proj", "w2"}};
    int n = 0;
    if (sscanf(hf, "model.layers.%d.%*[a-z_].experts.%d.%n", layer, expert, &n) != 2 || !n) return -1;
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 2; j++) {
            size_t len = strlen(kinds[k][j]);
            if (!strncmp(hf + n, kinds[k][j], len) && !strcmp(hf + n + len, ".weight")) return k;
        }
    return -1;
}

typedef struct source {
    const zt_st_writer *w;
    int i;            /* the writer's tensor */
    const int *parts; /* experts stacked: the writer's tensor of each, part elements each (NULL: i alone) */
    size_t part;
    size_t cols;  /* elements a row */
    int head_dim; /* rows a head, when its rows are reordered (0: as they are) */
    float shift;  /* added to every element: Gemma's norms scale by 1 + weight, llama.cpp's by the weight */
} source;

/* elements [offset, offset + n) of the tensor, across the experts it stacks */
static zt_status read_source(const source *s, float *dst, size_t offset, size_t n)
{
    if (!s->parts) return zt_st_writer_read(s->w, s->i, dst, offset, n);
    zt_status st = ZT_OK;
    for (size_t done = 0, k; done < n && !st; done += k) {
        size_t at = offset + done, in = at % s->part;
        k = n - done < s->part - in ? n - done : s->part - in;
        st = zt_st_writer_read(s->w, s->parts[at / s->part], dst + done, in, k);
    }
    return st;
}

/* A head's rows (halves [0, d/2) and [d/2, d) of the rotary pairs) interleaved: row 2i + j of
 * the output is row j·d/2 + i of the head. */
static zt_status fill_source(void *ctx, float *dst, size_t offset, size_t n)
{
    const source *s = ctx;
    if (!s->head_dim) {
        zt_status st = read_source(s, dst, offset, n);
        for (size_t j = 0; j < n && s->shift != 0; j++) dst[j] += s->shift;
        return st;
    }
    float *x = malloc(n * sizeof *x);
    if (!x) return zt_fail(ZT_ENOMEM, "out of memory writing GGUF");
    zt_status st = read_source(s, x, offset, n);
    size_t d = (size_t)s->head_dim, half = d / 2, rows = n / s->cols;
    for (size_t r = 0; r < rows && !st; r++) {
        size_t h = r / d, k = r % d, from = h * d + (k % 2) * half + k / 2;
        memcpy(dst + r * s->cols, x + from * s->cols, s->cols * sizeof *x);
    }
    free(x);
    return st;
}
/* The writer's tensor of every layer's every expert matrix (layer, stacked kind, expert: -1
 * where there is none), each of the shape of its kind's expert 0; NULL with st set on failure. */
static int *find_experts(const zt_llama_config *cfg, const zt_st_writer *w, zt_status *st)
{
    int ne = cfg->n_experts, L = cfg->num_hidden_layers, n = zt_st_writer_count(w);
    int *at = malloc((size_t)L * 3 * (size_t)ne * sizeof *at);
    if (!at) {
        *st = zt_fail(ZT_ENOMEM, "out of memory writing GGUF");
        return NULL;
    }
    for (size_t j = 0; j < (size_t)L * 3 * (size_t)ne; j++) at[j] = -1;
    for (int i = 0; i < n; i++) {
        int l, e, k = expert_matrix(zt_st_writer_tensor(w, i, (int64_t[ZT_ST_MAX_DIMS]){0}, &(int){0}), &l, &e);
        if (k >= 0 && l >= 0 && l < L && e >= 0 && e < ne) at[((size_t)l * 3 + (size_t)k) * (size_t)ne + (size_t)e] = i;
    }
    for (size_t j = 0; j < (size_t)L * 3 * (size_t)ne; j++) {
        int64_t s0[ZT_ST_MAX_DIMS], s[ZT_ST_MAX_DIMS];
        int d0, d;
        if (at[j] >= 0) zt_st_writer_tensor(w, at[j], s, &d);
        if (at[j] >= 0 && j % (size_t)ne) zt_st_writer_tensor(w, at[j - j % (size_t)ne], s0, &d0);
        if (at[j] < 0 || (j % (size_t)ne && (d != d0 || memcmp(s, s0, (size_t)d * sizeof *s)))) {
            *st =
                zt_fail(ZT_EUSER, "layer %d: expert %d's %s is %s", (int)(j / (3 * (size_t)ne)), (int)(j % (size_t)ne),
                        stacked[j / (size_t)ne % 3], at[j] < 0 ? "missing" : "of another shape than expert 0's");
            free(at);
            return NULL;
        }
    }
    return at;
}

/* Adds src's tensor (shape[ndim]) to g as gname, its rows reordered in heads of head_dim (0: as
 * they are), its matrices of type t. */
static zt_status add_source(zt_gguf *g, const char *gname, source *src, const int64_t *shape, int ndim, int head_dim,
                            zt_gguf_type t)
{
    src->cols = (size_t)shape[ndim - 1];
    src->head_dim = head_dim;
    /* vectors (norms, biases) and routers stay fp32, as llama.cpp's converter keeps them */
    zt_gguf_type tt = ndim == 1 || strstr(gname, "_norm.weight") || strstr(gname, ".ffn_gate_inp") ? ZT_GGUF_F32 : t;
    size_t unit = head_dim ? (size_t)head_dim * src->cols : 0;
    return zt_gguf_add(g, gname, tt, shape, ndim, ndim == 1 ? (size_t)shape[0] : unit, fill_source, src);
}

/* Adds src's tensor hf to g as llama.cpp names it: a layer's expert 0 stacks the layer's experts
 * (the others then add nothing). */
static zt_status add_tensor(zt_gguf *g, const zt_llama_config *cfg, source *src, const int *experts, const char *hf,
                            int pairs, zt_gguf_type t)
{
    int64_t shape[ZT_ST_MAX_DIMS + 1];
    int ndim, l, e, k = expert_matrix(hf, &l, &e);
    char gname[128];
    zt_st_writer_tensor(src->w, src->i, shape, &ndim);
    if (k >= 0 && experts) {
        if (e) return ZT_OK;
        src->parts = experts + ((size_t)l * 3 + (size_t)k) * (size_t)cfg->n_experts;
        src->part = (size_t)shape[0] * (size_t)shape[1];
        memmove(shape + 1, shape, (size_t)ndim * sizeof *shape);
        shape[0] = cfg->n_experts, ndim++;
        snprintf(gname, sizeof gname, "blk.%d.%s", l, stacked[k]);
    } else if (!gguf_name(hf, cfg->post_norms, gname, sizeof gname))
        return zt_fail(ZT_EUSER, "tensor '%s': llama.cpp's %s has no such tensor", hf, cfg->model_type);
    src->shift = cfg->gemma && strstr(hf, "norm.weight") ? 1.0f : 0.0f;
    int rotated = pairs && (strstr(hf, ".q_proj.") || strstr(hf, ".k_proj."));
    return add_source(g, gname, src, shape, ndim, rotated ? cfg->head_dim : 0, t);
}

zt_status zt_gguf_write_model(const zt_llama_config *cfg, const zt_st_writer *w, const char *tokenizer_dir,
                              zt_gguf_type t, const char *name, const char *path)
{
    int pairs, n = zt_st_writer_count(w), embed = -1, head = 0;
    size_t prefix = strlen(cfg->text_prefix);
    const char *arch = zt_gguf_arch(cfg, &pairs);
    zt_status st = zt_gguf_check_model(cfg);
    if (st) return st;
    int *experts = cfg->n_experts ? find_experts(cfg, w, &st) : NULL;
    if (st) return st;
    zt_gguf *g = zt_gguf_new();
    source *src = calloc((size_t)n + 1, sizeof *src);
    if (!g || !src) st = zt_fail(ZT_ENOMEM, "out of memory writing '%s'", path);
    if (!st) st = zt_gguf_add_hparams(g, cfg, t, name);
    if (!st) st = zt_gguf_add_tokenizer(g, tokenizer_dir, cfg);
    for (int i = 0; i < n && !st; i++) {
        const char *hf = zt_st_writer_tensor(w, i, (int64_t[ZT_ST_MAX_DIMS]){0}, &(int){0});
        if (prefix && !strncmp(hf, cfg->text_prefix, prefix)) hf += prefix; /* an image-text model's language model */
        if (!strcmp(hf, "model.embed_tokens.weight")) embed = i;
        if (cfg->gemma && cfg->tie_word_embeddings && !strcmp(hf, "lm_head.weight")) continue; /* its embedding */
        head |= !strcmp(hf, "lm_head.weight");
        src[i] = (source){.w = w, .i = i};
        st = add_tensor(g, cfg, &src[i], experts, hf, pairs, t);
    }
    /* Qwen2-MoE's, OLMoE's and OLMo 2's head, which llama.cpp requires, when it is the embedding */
    if (!st && !head && embed >= 0 && (!strcmp(arch, "qwen2moe") || !strcmp(arch, "olmoe") || !strcmp(arch, "olmo2"))) {
        int64_t shape[ZT_ST_MAX_DIMS];
        int ndim;
        zt_st_writer_tensor(w, embed, shape, &ndim);
        src[n] = (source){.w = w, .i = embed, .cols = (size_t)shape[1]};
        st = zt_gguf_add(g, "output.weight", t, shape, ndim, 0, fill_source, &src[n]);
    }
    if (!st) st = zt_gguf_finish(g, path);
    zt_gguf_free(g);
    free(src);
    free(experts);
    return st;
}

zt_status zt_gguf_write_adapter(const zt_llama_config *cfg, const zt_st_writer *w, double alpha, zt_gguf_type t,
                                const char *name, const char *path)
{
    int pairs, n = zt_st_writer_count(w);
    const char *arch = zt_gguf_arch(cfg, &pairs);
    zt_gguf *g = zt_gguf_new();
    source *src = calloc((size_t)n, sizeof *src);
    zt_status st = !g || !src ? zt_fail(ZT_ENOMEM, "out of memory writing '%s'", path) : ZT_OK;
    if (!st) st = zt_gguf_str(g, "general.architecture", arch);
    if (!st) st = zt_gguf_str(g, "general.type", "adapter");
    if (!st) st = zt_gguf_str(g, "adapter.type", "lora");
    if (!st) st = zt_gguf_str(g, "general.name", name);
    if (!st) st = zt_gguf_f32(g, "adapter.lora.alpha", (float)alpha);
    if (!st) st = zt_gguf_u32(g, "general.quantization_version", 2);
    for (int i = 0; i < n && !st; i++) {
        int64_t shape[ZT_ST_MAX_DIMS];
        int ndim, l, e;
        char hf[256], gname[160] = "";
        const char *full = zt_st_writer_tensor(w, i, shape, &ndim), *dot = strrchr(full, '.');
        int b = !strcmp(dot, ".lora_b");
        snprintf(hf, sizeof hf, "%.*s", (int)(dot - full), full);
        if (expert_matrix(hf, &l, &e) >= 0)
            st = zt_fail(ZT_EUSER, "'%s': llama.cpp's adapters have no experts: merge the adapter (--merge)", hf);
        else if (!gguf_name(hf, cfg->post_norms, gname, sizeof gname - 8))
            st = zt_fail(ZT_EUSER, "tensor '%s': llama.cpp's %s has no such tensor", hf, cfg->model_type);
        strcat(gname, b ? ".lora_b" : ".lora_a");
        src[i] = (source){.w = w, .i = i};
        /* B's rows are the projection's outputs: q's and k's reordered as their weights' */
        int rotated = b && pairs && (strstr(hf, ".q_proj.") || strstr(hf, ".k_proj."));
        if (!st) st = add_source(g, gname, &src[i], shape, ndim, rotated ? cfg->head_dim : 0, t);
    }
    if (!st) st = zt_gguf_finish(g, path);
    zt_gguf_free(g);
    free(src);
    return st;
}
