/* A Llama-family model's architecture in GGUF: which llama.cpp architecture it is, what llama.cpp
 * cannot express (refused before anything is written), its hyperparameter keys and the tensors
 * of its rope scaling. */
#define _GNU_SOURCE
#include "gguf_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* zt's model types and llama.cpp's architecture for each; pairs: its rotary embedding pairs
 * neighbours (llama.cpp's "llama": q and k rows reordered) rather than a head's halves (NEOX) */
static const struct {
    const char *type, *arch;
    int pairs;
} archs[] = {
    {"llama", "llama", 1}, {"mistral", "llama", 1},      {"mixtral", "llama", 1},      {"qwen2", "qwen2", 0},
    {"qwen3", "qwen3", 0}, {"qwen2_moe", "qwen2moe", 0}, {"qwen3_moe", "qwen3moe", 0}, {"olmoe", "olmoe", 0},
    {"phi3", "phi3", 0},   {"gemma", "gemma", 0},        {"gemma2", "gemma2", 0},      {"gemma3_text", "gemma3", 0},
    {"olmo2", "olmo2", 0}, {"smollm3", "smollm3", 1},    {"granite", "granite", 1},
};

const char *zt_gguf_arch(const zt_llama_config *cfg, int *pairs)
{
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (!strcmp(cfg->model_type, archs[i].type)) {
            *pairs = archs[i].pairs;
            return archs[i].arch;
        }
    *pairs = 0;
    return NULL;
}

static int is(const zt_llama_config *c, const char *type) { return !strcmp(c->model_type, type); }

/* The window pattern llama.cpp assumes when the file names none */
static int default_window_pattern(const char *arch) { return !strcmp(arch, "gemma3") ? 6 : 2; }

/* What llama.cpp's Gemma 2 and 3 scale q by, 1/sqrt of: head_dim, but hidden_size / heads for the
 * 27B models, which it knows by their layer count (46, 62) */
static double gemma_query_scalar(const zt_llama_config *c)
{
    int big = c->num_hidden_layers == (is(c, "gemma2") ? 46 : 62);
    return big ? (double)(c->hidden_size / c->num_attention_heads) : (double)c->head_dim;
}

/* The mixture's settings that llama.cpp fixes per architecture */
static zt_status check_experts(const zt_llama_config *c, const char *where)
{
    int renorm = is(c, "mixtral") || is(c, "qwen3_moe");
    if (c->norm_topk_prob != renorm)
        return zt_fail(ZT_EUSER, "'%s': norm_topk_prob: llama.cpp's %s %s the chosen experts' weights", where,
                       c->model_type, renorm ? "always renormalises" : "never renormalises");
    if (is(c, "olmoe") && c->num_key_value_heads != c->num_attention_heads)
        return zt_fail(ZT_EUSER, "'%s': num_key_value_heads: llama.cpp's olmoe has k norms of hidden_size", where);
    return ZT_OK;
}

/* Gemma's settings that llama.cpp fixes */
static zt_status check_gemma(const zt_llama_config *c, const char *where)
{
    if (c->gelu_exact)
        return zt_fail(ZT_EUSER, "'%s': hidden_activation: llama.cpp's Gemma has gelu's tanh form, not the exact one",
                       where);
    if (!is(c, "gemma3_text") && !c->tie_word_embeddings)
        return zt_fail(ZT_EUSER, "'%s': tie_word_embeddings: llama.cpp's %s's head is its embedding", where,
                       c->model_type);
    if (c->query_pre_attn_scalar && c->query_pre_attn_scalar != gemma_query_scalar(c))
        return zt_fail(ZT_EUSER, "'%s': query_pre_attn_scalar: llama.cpp scales %s's scores by %g^-1/2", where,
                       c->model_type, gemma_query_scalar(c));
    if (is(c, "gemma2") && (!c->attn_softcap || !c->final_softcap))
        return zt_fail(ZT_EUSER, "'%s': %s: llama.cpp's Gemma 2 always soft-caps", where,
                       c->attn_softcap ? "final_logit_softcapping" : "attn_logit_softcapping");
    return ZT_OK;
}

/* What llama.cpp fixes for OLMo 2, SmolLM3 and Granite: heads of hidden_size / heads (it reads no
 * head_dim for them), SmolLM3's layers without the rotary embedding every fourth */
static zt_status check_family(const zt_llama_config *c, const char *where)
{
    if ((is(c, "olmo2") || is(c, "granite")) && c->head_dim * c->num_attention_heads != c->hidden_size)
        return zt_fail(ZT_EUSER, "'%s': head_dim: llama.cpp's %s has heads of hidden_size / num_attention_heads", where,
                       c->model_type);
    for (int l = 0; is(c, "smollm3") && l < c->num_hidden_layers; l++)
        if (zt_llama_layer_rope(c, l) != ((l + 1) % 4 != 0))
            return zt_fail(ZT_EUSER,
                           "'%s': %s: llama.cpp's SmolLM3 leaves the rotary embedding out of every fourth layer", where,
                           c->n_no_rope_layers ? "no_rope_layers" : "no_rope_layer_interval");
    return ZT_OK;
}

zt_status zt_gguf_check_model(const zt_llama_config *c)
{
    int pairs;
    const char *where = c->path[0] ? c->path : "config.json", *arch = zt_gguf_arch(c, &pairs);
    if (!arch)
        return zt_fail(ZT_EUSER,
                       "'%s': model_type '%s': zt writes GGUF for llama, mistral, mixtral, qwen2, qwen3, qwen2_moe, "
                       "qwen3_moe, olmoe, olmo2, phi3, gemma, gemma2, gemma3, smollm3 and granite models",
                       where, c->model_type);
    if (c->num_labels) return zt_fail(ZT_EUSER, "'%s': num_labels: zt writes GGUF for causal language models", where);
    /* Qwen2-VL's language model rotates by M-RoPE's three rows of positions (llama.cpp's qwen2vl) */
    if (c->image_text && !c->text_prefix[0])
        return zt_fail(ZT_EUSER,
                       "'%s': model_type: zt writes GGUF of Gemma 3's, Mistral 3's and LLaVA's language models", where);
    int phi3 = !strcmp(arch, "phi3");
    const char *scaling = c->rope_scaling.type;
    if (scaling[0] &&
        !(phi3 ? !strcmp(scaling, "longrope") : !strcmp(scaling, "linear") || (pairs && !strcmp(scaling, "llama3"))))
        return zt_fail(ZT_EUSER, "'%s': rope_scaling type '%s': zt writes GGUF of %s with %s scaling", where, scaling,
                       c->model_type,
                       phi3    ? "longrope"
                       : pairs ? "linear or llama3"
                               : "linear");
    if (c->partial_rotary_factor != 1 && !phi3)
        return zt_fail(ZT_EUSER, "'%s': partial_rotary_factor: GGUF of %s has the rotary embedding on whole heads",
                       where, c->model_type);
    zt_status st = c->n_experts ? check_experts(c, where) : c->gemma ? check_gemma(c, where) : check_family(c, where);
    if (st) return st;
    if (c->sliding_window && !pairs && !phi3 && !c->gemma)
        return zt_fail(ZT_EUSER, "'%s': sliding_window: llama.cpp's %s has no window", where, c->model_type);
    return ZT_OK;
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

/* Granite's multipliers: its scores' scale, the embedding's, each block's output's, the logits'
 * divisor (written where not 0, as the converter; llama.cpp requires the last) */
static zt_status add_granite(zt_gguf *g, const zt_llama_config *c)
{
    zt_status st = ZT_OK;
    if (c->attention_multiplier) st = zt_gguf_f32(g, "granite.attention.scale", (float)c->attention_multiplier);
    if (!st && c->embedding_multiplier) st = zt_gguf_f32(g, "granite.embedding_scale", (float)c->embedding_multiplier);
    if (!st && c->residual_multiplier) st = zt_gguf_f32(g, "granite.residual_scale", (float)c->residual_multiplier);
    if (!st) st = zt_gguf_f32(g, "granite.logit_scale", (float)c->logits_scaling);
    return st;
}

/* A mixture's keys: the experts, how many a token uses, Qwen's experts' (and shared expert's) sizes */
static zt_status add_experts(zt_gguf *g, const zt_llama_config *c, const char *arch)
{
    char k[128];
#define KEY(s) (snprintf(k, sizeof k, "%s." s, arch), k)
    zt_status st = zt_gguf_u32(g, KEY("expert_count"), (uint32_t)c->n_experts);
    if (!st) st = zt_gguf_u32(g, KEY("expert_used_count"), (uint32_t)c->experts_per_tok);
    if (!st && c->moe_intermediate_size)
        st = zt_gguf_u32(g, KEY("expert_feed_forward_length"), (uint32_t)c->moe_intermediate_size);
    if (!st && c->shared_expert_size)
        st = zt_gguf_u32(g, KEY("expert_shared_feed_forward_length"), (uint32_t)c->shared_expert_size);
#undef KEY
    return st;
}

/* Gemma 2's and 3's keys: soft-capping, the window, its layers' pattern where it is not the one
 * llama.cpp assumes, Gemma 3's local layers' rotary base */
static zt_status add_gemma(zt_gguf *g, const zt_llama_config *c, const char *arch)
{
    char k[128];
#define KEY(s) (snprintf(k, sizeof k, "%s." s, arch), k)
    zt_status st = ZT_OK;
    int g3 = !strcmp(arch, "gemma3"), pattern = c->sliding_window_pattern;
    if (c->attn_softcap) st = zt_gguf_f32(g, KEY("attn_logit_softcapping"), (float)c->attn_softcap);
    if (!st && c->final_softcap) st = zt_gguf_f32(g, KEY("final_logit_softcapping"), (float)c->final_softcap);
    if (!st && c->sliding_window && pattern != 1)
        st = zt_gguf_u32(g, KEY("attention.sliding_window"), (uint32_t)c->sliding_window);
    if (!st && c->sliding_window && pattern != default_window_pattern(arch))
        st = zt_gguf_u32(g, KEY("attention.sliding_window_pattern"), (uint32_t)pattern);
    if (!st && g3) st = zt_gguf_f32(g, KEY("rope.freq_base_swa"), (float)c->rope_local_theta);
#undef KEY
    return st;
}

static zt_status add_keys(zt_gguf *g, const zt_llama_config *c, zt_gguf_type t, const char *name)
{
    int pairs;
    const char *arch = zt_gguf_arch(c, &pairs);
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
    if (!st && !is(c, "granite")) st = zt_gguf_u32(g, KEY("attention.key_length"), (uint32_t)c->head_dim);
    if (!st && !is(c, "granite")) st = zt_gguf_u32(g, KEY("attention.value_length"), (uint32_t)c->head_dim);
    if (!st && !strcmp(c->rope_scaling.type, "linear")) {
        if (!(st = zt_gguf_str(g, KEY("rope.scaling.type"), "linear")))
            st = zt_gguf_f32(g, KEY("rope.scaling.factor"), (float)c->rope_scaling.factor);
    }
    if (!st && c->n_experts) st = add_experts(g, c, arch);
    if (!st && !strcmp(arch, "phi3")) st = add_phi3(g, c);
    if (!st && !strcmp(arch, "granite")) st = add_granite(g, c);
    if (!st && c->gemma) st = add_gemma(g, c, arch);
    if (!st && pairs) { /* what llama.cpp's converter writes for the Llama-derived architectures */
        if (!(st = zt_gguf_u32(g, KEY("vocab_size"), (uint32_t)c->vocab_size)))
            st = zt_gguf_u32(g, KEY("rope.dimension_count"), (uint32_t)c->head_dim);
    }
#undef KEY
    if (!st) st = zt_gguf_u32(g, "general.file_type", zt_gguf_file_type(t));
    if (!st) st = zt_gguf_u32(g, "general.quantization_version", 2);
    return st;
}

/* The rotary tensors of Llama 3's and Phi-3's scalings */
static zt_status add_rope_tensors(zt_gguf *g, const zt_llama_config *cfg)
{
    int64_t one = cfg->head_dim / 2, pairs_n = zt_llama_rotary_dim(cfg) / 2;
    zt_status st = ZT_OK;
    if (!strcmp(cfg->rope_scaling.type, "llama3"))
        st = zt_gguf_add(g, "rope_freqs.weight", ZT_GGUF_F32, &one, 1, 0, fill_rope_freqs, (void *)cfg);
    if (!st && !strcmp(cfg->rope_scaling.type, "longrope"))
        st = zt_gguf_add(g, "rope_factors_long.weight", ZT_GGUF_F32, &pairs_n, 1, 0, fill_factors,
                         (void *)cfg->rope_scaling.long_factor);
    if (!st && !strcmp(cfg->rope_scaling.type, "longrope"))
        st = zt_gguf_add(g, "rope_factors_short.weight", ZT_GGUF_F32, &pairs_n, 1, 0, fill_factors,
                         (void *)cfg->rope_scaling.short_factor);
    return st;
}

zt_status zt_gguf_add_hparams(zt_gguf *g, const zt_llama_config *c, zt_gguf_type t, const char *name)
{
    zt_status st = add_keys(g, c, t, name);
    return st ? st : add_rope_tensors(g, c);
}
