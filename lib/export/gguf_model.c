/* A Llama-family model into GGUF: hyperparameters, tensor names, the rotary reordering. */
#define _GNU_SOURCE
#include "gguf_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's architecture for cfg (NULL: none that zt writes), and whether its rotary embedding
 * pairs neighbours ("llama": q and k rows reordered) rather than a head's halves (Qwen's NEOX). */
static const char *gguf_arch(const zt_llama_config *cfg, int *pairs)
{
    *pairs = 0;
    if (!strcmp(cfg->model_type, "qwen2")) return "qwen2";
    if (!strcmp(cfg->model_type, "qwen3")) return "qwen3";
    if (!strcmp(cfg->model_type, "phi3")) return "phi3";
    if (!strcmp(cfg->model_type, "gemma")) return "gemma";
    if (!strcmp(cfg->model_type, "gemma2")) return "gemma2";
    *pairs = 1;
    if (!strcmp(cfg->model_type, "llama") || !strcmp(cfg->model_type, "mistral")) return "llama";
    return NULL;
}

zt_status zt_gguf_check_model(const zt_llama_config *c)
{
    int pairs;
    const char *where = c->path[0] ? c->path : "config.json";
    if (!gguf_arch(c, &pairs))
        return zt_fail(ZT_EUSER, "'%s': model_type '%s': zt writes GGUF for llama, mistral, qwen2 and qwen3 models",
                       where, c->model_type);
    if (c->image_text || c->num_labels || c->n_experts)
        return zt_fail(ZT_EUSER, "'%s': %s: zt writes GGUF for causal language models without experts", where,
                       c->image_text   ? "an image-text model"
                       : c->num_labels ? "num_labels"
                                       : "num_experts");
    int phi3 = !strcmp(c->model_type, "phi3");
    if (c->rope_scaling.type[0] && strcmp(c->rope_scaling.type, phi3 ? "longrope" : "linear") &&
        strcmp(c->rope_scaling.type, "llama3"))
        return zt_fail(ZT_EUSER, "'%s': rope_scaling type '%s': zt writes GGUF with %s scaling", where,
                       c->rope_scaling.type, phi3 ? "longrope" : "linear or llama3");
    if (c->partial_rotary_factor != 1 && !phi3)
        return zt_fail(ZT_EUSER, "'%s': partial_rotary_factor: GGUF of %s has the rotary embedding on whole heads",
                       where, c->model_type);
    if (c->gemma && c->gelu_exact)
        return zt_fail(ZT_EUSER, "'%s': hidden_activation: llama.cpp's Gemma has gelu's tanh form, not the exact one",
                       where);
    if (c->gemma && c->query_pre_attn_scalar && c->query_pre_attn_scalar != c->head_dim)
        return zt_fail(ZT_EUSER, "'%s': query_pre_attn_scalar: llama.cpp scales %s's scores by head_dim^-1/2", where,
                       c->model_type);
    int gemma2 = !strcmp(c->model_type, "gemma2");
    if (gemma2 && (!c->attn_softcap || !c->final_softcap))
        return zt_fail(ZT_EUSER, "'%s': %s: llama.cpp's Gemma 2 always soft-caps", where,
                       c->attn_softcap ? "final_logit_softcapping" : "attn_logit_softcapping");
    if (gemma2 && c->sliding_window && c->sliding_window_pattern != 2)
        return zt_fail(ZT_EUSER, "'%s': sliding_window_pattern: llama.cpp's Gemma 2 windows every other layer", where);
    if (c->sliding_window && strcmp(c->model_type, "mistral") && !phi3 && !gemma2)
        return zt_fail(ZT_EUSER, "'%s': sliding_window: llama.cpp's %s has no window", where, c->model_type);
    return ZT_OK;
}

typedef struct renamed {
    const char *hf, *gguf; /* a layer's tensor, after "model.layers.N." and after "blk.N." */
} renamed;

/* A Hugging Face tensor name → llama.cpp's; 0 when there is no such tensor. */
static int gguf_name(const char *hf, int post_norms, char *out, size_t cap)
{
    /* Gemma 2's norms of each block's output inside the residual (post_norms), its MLP's input's */
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

typedef struct source {
    const zt_st_writer *w;
    int i;
    size_t cols;  /* elements a row */
    int head_dim; /* rows a head, when its rows are reordered (0: as they are) */
    float shift;  /* added to every element: Gemma's norms scale by 1 + weight, llama.cpp's by the weight */
} source;

/* A head's rows (halves [0, d/2) and [d/2, d) of the rotary pairs) interleaved: row 2i + j of
 * the output is row j·d/2 + i of the head. */
static zt_status fill_source(void *ctx, float *dst, size_t offset, size_t n)
{
    const source *s = ctx;
    if (!s->head_dim) {
        zt_status st = zt_st_writer_read(s->w, s->i, dst, offset, n);
        for (size_t j = 0; j < n && s->shift != 0; j++) dst[j] += s->shift;
        return st;
    }
    float *x = malloc(n * sizeof *x);
    if (!x) return zt_fail(ZT_ENOMEM, "out of memory writing GGUF");
    zt_status st = zt_st_writer_read(s->w, s->i, x, offset, n);
    size_t d = (size_t)s->head_dim, half = d / 2, rows = n / s->cols;
    for (size_t r = 0; r < rows && !st; r++) {
        size_t h = r / d, k = r % d, from = h * d + (k % 2) * half + k / 2;
        memcpy(dst + r * s->cols, x + from * s->cols, s->cols * sizeof *x);
    }
    free(x);
    return st;
}

/* Llama 3's frequency divisors (rope_freqs.weight): 1 for short wavelengths, factor for long
 * ones, a blend between, computed in fp32 as llama.cpp's converter does. */
static zt_status fill_rope_freqs(void *ctx, float *dst, size_t offset, size_t n)
{
    const zt_llama_config *c = ctx;
    int dim = c->head_dim;
    float factor = (float)c->rope_scaling.factor, lo = (float)c->rope_scaling.low_freq_factor,
          hi = (float)c->rope_scaling.high_freq_factor;
    double old = c->rope_scaling.original_max_position_embeddings;
    float lo_wavelen = (float)(old / c->rope_scaling.low_freq_factor),
          hi_wavelen = (float)(old / c->rope_scaling.high_freq_factor);
    for (size_t j = 0; j < n; j++) {
        size_t i = offset + j;
        float freq = 1.0f / powf((float)c->rope_theta, (float)(2 * i) / (float)dim);
        /* a number over a tensor, as PyTorch divides: the tensor's reciprocal times the number */
        float wavelen = 1.0f / freq * (float)(2 * M_PI);
        if (wavelen < hi_wavelen) dst[j] = 1;
        else if (wavelen > lo_wavelen) dst[j] = factor;
        else {
            float smooth = (1.0f / wavelen * (float)old - lo) / (hi - lo);
            dst[j] = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
    }
    return ZT_OK;
}

/* Phi-3's longrope factors, a rotary pair each: ctx the list (short or long) */
static zt_status fill_factors(void *ctx, float *dst, size_t offset, size_t n)
{
    const double *f = ctx;
    for (size_t j = 0; j < n; j++) dst[j] = (float)f[offset + j];
    return ZT_OK;
}

/* Phi-3's keys (what llama.cpp's phi3 reads): the rotary dimensions, the window, longrope's
 * original context and attention factor sqrt(1 + ln(scale) / ln(original)). */
static zt_status add_phi3(zt_gguf *g, const zt_llama_config *c)
{
    int orig = c->rope_scaling.original_max_position_embeddings;
    zt_status st = zt_gguf_u32(g, "phi3.rope.dimension_count", (uint32_t)zt_llama_rotary_dim(c));
    if (!st) st = zt_gguf_u32(g, "phi3.attention.sliding_window", (uint32_t)c->sliding_window);
    if (!st && orig) st = zt_gguf_u32(g, "phi3.rope.scaling.original_context_length", (uint32_t)orig);
    if (!st && !strcmp(c->rope_scaling.type, "longrope")) {
        double scale = (double)c->max_position_embeddings / orig;
        st = zt_gguf_f32(g, "phi3.rope.scaling.attn_factor",
                         (float)(scale > 1 ? sqrt(1 + log(scale) / log((double)orig)) : 1.0));
    }
    return st;
}

static zt_status add_hparams(zt_gguf *g, const zt_llama_config *c, const char *arch, zt_gguf_type t, const char *name)
{
    char k[128];
#define KEY(s) (snprintf(k, sizeof k, "%s." s, arch), k)
    zt_status st = zt_gguf_str(g, "general.architecture", arch);
    if (!st) st = zt_gguf_str(g, "general.type", "model");
    if (!st) st = zt_gguf_str(g, "general.name", name);
    if (!st) st = zt_gguf_u32(g, KEY("block_count"), (uint32_t)c->num_hidden_layers);
    if (!st) st = zt_gguf_u32(g, KEY("context_length"), (uint32_t)c->max_position_embeddings);
    if (!st) st = zt_gguf_u32(g, KEY("embedding_length"), (uint32_t)c->hidden_size);
    if (!st) st = zt_gguf_u32(g, KEY("feed_forward_length"), (uint32_t)c->intermediate_size);
    if (!st) st = zt_gguf_u32(g, KEY("attention.head_count"), (uint32_t)c->num_attention_heads);
    if (!st) st = zt_gguf_u32(g, KEY("attention.head_count_kv"), (uint32_t)c->num_key_value_heads);
    if (!st) st = zt_gguf_f32(g, KEY("rope.freq_base"), (float)c->rope_theta);
    if (!st) st = zt_gguf_f32(g, KEY("attention.layer_norm_rms_epsilon"), (float)c->rms_norm_eps);
    if (!st) st = zt_gguf_u32(g, KEY("attention.key_length"), (uint32_t)c->head_dim);
    if (!st) st = zt_gguf_u32(g, KEY("attention.value_length"), (uint32_t)c->head_dim);
    if (!st && !strcmp(c->rope_scaling.type, "linear")) {
        if (!(st = zt_gguf_str(g, KEY("rope.scaling.type"), "linear")))
            st = zt_gguf_f32(g, KEY("rope.scaling.factor"), (float)c->rope_scaling.factor);
    }
    if (!st && !strcmp(arch, "phi3")) st = add_phi3(g, c);
    if (!st && !strcmp(arch, "gemma2")) {
        if (!(st = zt_gguf_f32(g, "gemma2.attn_logit_softcapping", (float)c->attn_softcap)))
            st = zt_gguf_f32(g, "gemma2.final_logit_softcapping", (float)c->final_softcap);
        if (!st) st = zt_gguf_u32(g, "gemma2.attention.sliding_window", (uint32_t)c->sliding_window);
    }
    if (!st && !strcmp(arch, "llama")) {
        if (!(st = zt_gguf_u32(g, KEY("vocab_size"), (uint32_t)c->vocab_size)))
            st = zt_gguf_u32(g, KEY("rope.dimension_count"), (uint32_t)c->head_dim);
    }
#undef KEY
    if (!st) st = zt_gguf_u32(g, "general.file_type", zt_gguf_file_type(t));
    if (!st) st = zt_gguf_u32(g, "general.quantization_version", 2);
    return st;
}

zt_status zt_gguf_write_model(const zt_llama_config *cfg, const zt_st_writer *w, const char *tokenizer_dir,
                              zt_gguf_type t, const char *name, const char *path)
{
    int pairs, n = zt_st_writer_count(w);
    const char *arch = gguf_arch(cfg, &pairs);
    zt_status st = zt_gguf_check_model(cfg);
    if (st) return st;
    zt_gguf *g = zt_gguf_new();
    source *src = calloc((size_t)n, sizeof *src);
    if (!g || !src) st = zt_fail(ZT_ENOMEM, "out of memory writing '%s'", path);
    if (!st) st = add_hparams(g, cfg, arch, t, name);
    if (!st) st = zt_gguf_add_tokenizer(g, tokenizer_dir, cfg);
    int64_t one = cfg->head_dim / 2;
    if (!st && !strcmp(cfg->rope_scaling.type, "llama3"))
        st = zt_gguf_add(g, "rope_freqs.weight", ZT_GGUF_F32, &one, 1, 0, fill_rope_freqs, (void *)cfg);
    int64_t pairs_n = zt_llama_rotary_dim(cfg) / 2;
    if (!st && !strcmp(cfg->rope_scaling.type, "longrope"))
        st = zt_gguf_add(g, "rope_factors_long.weight", ZT_GGUF_F32, &pairs_n, 1, 0, fill_factors,
                         (void *)cfg->rope_scaling.long_factor);
    if (!st && !strcmp(cfg->rope_scaling.type, "longrope"))
        st = zt_gguf_add(g, "rope_factors_short.weight", ZT_GGUF_F32, &pairs_n, 1, 0, fill_factors,
                         (void *)cfg->rope_scaling.short_factor);
    for (int i = 0; i < n && !st; i++) {
        int64_t shape[ZT_ST_MAX_DIMS];
        int ndim;
        char gname[128];
        const char *hf = zt_st_writer_tensor(w, i, shape, &ndim);
        if (cfg->gemma && !strcmp(hf, "lm_head.weight")) continue; /* Gemma's head is its embedding, always */
        if (!gguf_name(hf, cfg->post_norms, gname, sizeof gname)) {
            st = zt_fail(ZT_EUSER, "tensor '%s': llama.cpp's %s has no such tensor", hf, arch);
            break;
        }
        size_t numel = 1;
        for (int d = 0; d < ndim; d++) numel *= (size_t)shape[d];
        src[i] = (source){w, i, numel / (size_t)shape[0], 0, cfg->gemma && strstr(hf, "norm.weight") ? 1.0f : 0.0f};
        int q = strstr(hf, ".q_proj.") != NULL, k = strstr(hf, ".k_proj.") != NULL;
        if (pairs && (q || k)) src[i].head_dim = cfg->head_dim;
        /* vectors (norms, biases) stay fp32: llama.cpp's kernels take them so */
        zt_gguf_type tt = ndim == 1 || strstr(gname, "_norm.weight") ? ZT_GGUF_F32 : t;
        size_t unit = src[i].head_dim ? (size_t)cfg->head_dim * src[i].cols : 0;
        st = zt_gguf_add(g, gname, tt, shape, ndim, ndim == 1 ? (size_t)shape[0] : unit, fill_source, &src[i]);
    }
    if (!st) st = zt_gguf_finish(g, path);
    zt_gguf_free(g);
    free(src);
    return st;
}
