/* Hugging Face config.json for llama, mistral, qwen2, qwen3, gemma2, gemma3_text, olmo2 and phi3. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/core/json.h"
#include "lib/core/version.h"
#include "llama.h"

void zt_llama_config_default(zt_llama_config *c)
{
    memset(c, 0, sizeof *c);
    strcpy(c->model_type, "llama");
    c->vocab_size = 32000;
    c->hidden_size = 256;
    c->intermediate_size = 688;
    c->num_hidden_layers = 4;
    c->num_attention_heads = 4;
    c->num_key_value_heads = 4;
    c->max_position_embeddings = 2048;
    c->rms_norm_eps = 1e-6;
    c->rope_theta = 10000;
    c->partial_rotary_factor = 1;
    c->bos_token_id = 1;
    c->eos_token_id = 2;
    c->pad_token_id = -1;
}

/* model_type → the architecture's class-name prefix */
static const char *const model_types[][2] = {{"llama", "Llama"}, {"mistral", "Mistral"}, {"qwen2", "Qwen2"},
                                             {"qwen3", "Qwen3"}, {"gemma2", "Gemma2"},   {"gemma3_text", "Gemma3"},
                                             {"olmo2", "Olmo2"}, {"phi3", "Phi3"}};
enum { N_MODEL_TYPES = sizeof model_types / sizeof model_types[0] };

static const char *arch_prefix(const char *model_type)
{
    for (int i = 0; i < N_MODEL_TYPES; i++)
        if (!strcmp(model_type, model_types[i][0])) return model_types[i][1];
    return NULL;
}

static zt_status bad_key(const char *path, const char *key, const char *what)
{
    return zt_fail(ZT_EUSER, "'%s': key '%s' %s", path, key, what);
}

static int is_gemma3(const char *model_type) { return !strcmp(model_type, "gemma3_text"); }

/* What Gemma2Config and Gemma3TextConfig default to, on c's sizes: the Gemma blocks, head_dim
 * 256, a tied head, Gemma 2's soft-capping and window on every other layer, Gemma 3's q/k norms
 * and window on five layers of six (their local rope theta 10000 against a global 1e6), and
 * none of its soft-capping (final_logit_softcapping is honoured when set). */
static void gemma_defaults(zt_llama_config *c)
{
    int g3 = is_gemma3(c->model_type);
    c->gemma = c->post_norms = 1;
    c->qk_norm = g3 ? ZT_QK_NORM_HEADS : 0;
    c->head_dim = 256;
    c->query_pre_attn_scalar = 256;
    c->tie_word_embeddings = 1;
    c->sliding_window = 4096;
    c->sliding_window_pattern = g3 ? 6 : 2;
    c->attn_softcap = g3 ? 0 : 50;
    c->final_softcap = g3 ? 0 : 30;
    c->rope_theta = g3 ? 1e6 : 10000;
    c->rope_local_theta = g3 ? 10000 : 0;
    c->max_position_embeddings = g3 ? 131072 : 8192;
    c->bos_token_id = 2, c->eos_token_id = 1, c->pad_token_id = 0;
}

static int is_olmo2(const char *model_type) { return !strcmp(model_type, "olmo2"); }

/* What Olmo2Config defaults to, on c's sizes: norms on the blocks' outputs only, q/k norms over
 * the whole projections, rms_norm_eps 1e-5 */
static void olmo2_defaults(zt_llama_config *c)
{
    c->post_norms = c->no_pre_norms = 1;
    c->qk_norm = ZT_QK_NORM_WHOLE;
    c->rms_norm_eps = 1e-5;
    c->bos_token_id = -1, c->eos_token_id = 50279, c->pad_token_id = 1;
}

static int is_phi3(const char *model_type) { return !strcmp(model_type, "phi3"); }

int zt_llama_fused_names(const zt_llama_config *c) { return is_phi3(c->model_type); }

int zt_llama_rotary_dim(const zt_llama_config *c) { return (int)(c->head_dim * c->partial_rotary_factor); }

/* What Phi3Config defaults to, on c's sizes */
static void phi3_defaults(zt_llama_config *c)
{
    c->rms_norm_eps = 1e-5;
    c->max_position_embeddings = c->rope_scaling.original_max_position_embeddings = 4096;
}

int zt_llama_layer_local(const zt_llama_config *c, int l)
{
    int p = c->sliding_window_pattern;
    return p && (l + 1) % p;
}

int zt_llama_layer_window(const zt_llama_config *c, int l)
{
    return !c->sliding_window_pattern || zt_llama_layer_local(c, l) ? c->sliding_window : 0;
}

/* integer key; missing → def (or an error when def < 0 means required) */
static zt_status get_int(const cJSON *o, const char *path, const char *key, int def, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (def == -2) return bad_key(path, key, "is missing");
        *out = def;
        return ZT_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 2147483647.0)
        return bad_key(path, key, "must be an integer");
    *out = (int)v->valuedouble;
    return ZT_OK;
}

static zt_status get_num(const cJSON *o, const char *path, const char *key, double def, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return ZT_OK;
    }
    if (!cJSON_IsNumber(v)) return bad_key(path, key, "must be a number");
    *out = v->valuedouble;
    return ZT_OK;
}

static zt_status get_bool(const cJSON *o, const char *path, const char *key, int def, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return ZT_OK;
    }
    if (!cJSON_IsBool(v)) return bad_key(path, key, "must be true or false");
    *out = cJSON_IsTrue(v);
    return ZT_OK;
}

/* eos_token_id may be a list in newer configs: the first entry is kept */
/* an integer id, -1 for none (the range first: converting a double outside int's is undefined) */
static int is_token_id(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble >= -1 && v->valuedouble <= 2147483647.0 &&
           v->valuedouble == floor(v->valuedouble);
}

/* a token id or a list of them (the first is used); missing, null or [] → -1 */
static zt_status get_token_id(const cJSON *o, const char *path, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    const char *what = "must be a token id (an integer, -1 for none) or a list of them";
    *out = -1;
    if (!v || cJSON_IsNull(v)) return ZT_OK;
    if (!cJSON_IsArray(v)) {
        if (!is_token_id(v)) return bad_key(path, key, what);
        *out = (int)v->valuedouble;
        return ZT_OK;
    }
    for (const cJSON *e = v->child; e; e = e->next)
        if (!is_token_id(e)) return bad_key(path, key, what);
    if (v->child) *out = (int)v->child->valuedouble;
    return ZT_OK;
}

/* longrope's rope_scaling.short_factor or .long_factor: positive numbers (their count checked
   against the rotary size in zt_llama_config_check) */
static zt_status get_factors(const cJSON *rs, const char *path, const char *key, double *out, int *n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rs, key), *e;
    char name[32];
    snprintf(name, sizeof name, "rope_scaling.%s", key);
    if (!cJSON_IsArray(v)) return bad_key(path, name, "must be a list of positive numbers");
    *n = 0;
    cJSON_ArrayForEach(e, v)
    {
        if (!cJSON_IsNumber(e) || !(e->valuedouble > 0))
            return bad_key(path, name, "must be a list of positive numbers");
        if (*n == ZT_ROPE_MAX_FACTORS) return bad_key(path, name, "has too many entries");
        out[(*n)++] = e->valuedouble;
    }
    return ZT_OK;
}

/* Phi3Config's only rope_scaling: longrope ("su" and "yarn" are its old names), its factors and
   type alone */
static zt_status parse_longrope(zt_llama_config *c, const cJSON *rs, const char *path, const char *type)
{
    if (strcmp(type, "longrope") && strcmp(type, "su") && strcmp(type, "yarn"))
        return zt_fail(ZT_EUSER, "'%s': rope_scaling type '%.32s' is not supported for phi3 (longrope)", path, type);
    for (const cJSON *e = rs->child; e; e = e->next)
        if (strcmp(e->string, "type") && strcmp(e->string, "rope_type") && strcmp(e->string, "short_factor") &&
            strcmp(e->string, "long_factor"))
            return zt_fail(ZT_EUSER, "'%s': key 'rope_scaling.%.32s' is not supported (Phi3Config reads none)", path,
                           e->string);
    strcpy(c->rope_scaling.type, "longrope");
    zt_status st = get_factors(rs, path, "short_factor", c->rope_scaling.short_factor, &c->rope_scaling.n_short);
    return st ? st : get_factors(rs, path, "long_factor", c->rope_scaling.long_factor, &c->rope_scaling.n_long);
}

static zt_status parse_rope_scaling(zt_llama_config *c, const cJSON *o, const char *path)
{
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(o, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) return ZT_OK;
    if (!cJSON_IsObject(rs)) return bad_key(path, "rope_scaling", "must be an object or null");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!cJSON_IsString(t)) return bad_key(path, "rope_scaling.rope_type", "is missing");
    if (is_phi3(c->model_type)) return parse_longrope(c, rs, path, t->valuestring);
    if (strcmp(t->valuestring, "linear") && strcmp(t->valuestring, "llama3") && strcmp(t->valuestring, "default"))
        return zt_fail(ZT_EUSER, "'%s': rope_scaling type '%.32s' is not supported (linear, llama3)", path,
                       t->valuestring);
    if (!strcmp(t->valuestring, "default")) return ZT_OK;
    snprintf(c->rope_scaling.type, sizeof c->rope_scaling.type, "%s", t->valuestring);
    zt_status st;
    if ((st = get_num(rs, path, "factor", 0, &c->rope_scaling.factor))) return st;
    if (!(c->rope_scaling.factor > 0)) return bad_key(path, "rope_scaling.factor", "must be a positive number");
    if (!strcmp(c->rope_scaling.type, "llama3")) {
        if ((st = get_num(rs, path, "low_freq_factor", 1, &c->rope_scaling.low_freq_factor)) ||
            (st = get_num(rs, path, "high_freq_factor", 4, &c->rope_scaling.high_freq_factor)) ||
            (st = get_int(rs, path, "original_max_position_embeddings", 8192,
                          &c->rope_scaling.original_max_position_embeddings)))
            return st;
        if (!(c->rope_scaling.high_freq_factor > c->rope_scaling.low_freq_factor))
            return bad_key(path, "rope_scaling.high_freq_factor", "must be larger than low_freq_factor");
    }
    return ZT_OK;
}

/* A *ForSequenceClassification model (reward or value model): its score head has num_labels
 * rows, taken from "num_labels" or the size of "id2label". Only one label is supported. */
static zt_status parse_num_labels(zt_llama_config *c, const cJSON *o, const char *path)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "architectures"), *first = cJSON_GetArrayItem(a, 0);
    const char *suffix = "ForSequenceClassification";
    size_t n = cJSON_IsString(first) ? strlen(first->valuestring) : 0, k = strlen(suffix);
    if (n < k || strcmp(first->valuestring + n - k, suffix)) return ZT_OK;
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(o, "id2label");
    zt_status st =
        get_int(o, path, "num_labels", cJSON_IsObject(labels) ? cJSON_GetArraySize(labels) : 1, &c->num_labels);
    if (st) return st;
    if (c->num_labels != 1) return bad_key(path, "num_labels", "must be 1 (a scalar reward or value head)");
    c->tie_word_embeddings = 0; /* the score head is its own tensor */
    return ZT_OK;
}

/* a soft-capping value: missing → def, null → 0 (none), else positive */
static zt_status get_softcap(const cJSON *o, const char *path, const char *key, double def, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = v ? 0 : def;
    if (!v || cJSON_IsNull(v)) return ZT_OK;
    zt_status st = get_num(o, path, key, def, out);
    if (!st && !(*out > 0)) return bad_key(path, key, "must be a positive number or null");
    return st;
}

/* The keys only Phi-3 has: the rotary embedding's share of a head, the length past which
   longrope takes its long factors, the dropouts (0 only: zt trains without dropout) */
static zt_status parse_phi3(zt_llama_config *c, const cJSON *o, const char *path)
{
    double resid = 0, embd = 0;
    zt_status st;
    if ((st = get_num(o, path, "partial_rotary_factor", 1, &c->partial_rotary_factor)) ||
        (st = get_int(o, path, "original_max_position_embeddings", c->rope_scaling.original_max_position_embeddings,
                      &c->rope_scaling.original_max_position_embeddings)) ||
        (st = get_num(o, path, "resid_pdrop", 0, &resid)) || (st = get_num(o, path, "embd_pdrop", 0, &embd)))
        return st;
    if (resid != 0) return bad_key(path, "resid_pdrop", "other than 0 is not supported (no dropout)");
    if (embd != 0) return bad_key(path, "embd_pdrop", "other than 0 is not supported (no dropout)");
    return ZT_OK;
}

/* The keys only Gemma has (c holds gemma_defaults and the common keys). */
static zt_status parse_gemma(zt_llama_config *c, const cJSON *o, const char *path)
{
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, "hidden_activation");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "gelu_pytorch_tanh")))
        return bad_key(path, "hidden_activation", "must be \"gelu_pytorch_tanh\"");
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "sliding_window")))
        return bad_key(path, "sliding_window", "must be a positive integer (Gemma's windowed layers need one)");
    zt_status st;
    if ((st = get_num(o, path, "query_pre_attn_scalar", c->query_pre_attn_scalar, &c->query_pre_attn_scalar)) ||
        (st = get_softcap(o, path, "attn_logit_softcapping", c->attn_softcap, &c->attn_softcap)) ||
        (st = get_softcap(o, path, "final_logit_softcapping", c->final_softcap, &c->final_softcap)))
        return st;
    if (!(c->query_pre_attn_scalar > 0)) return bad_key(path, "query_pre_attn_scalar", "must be positive");
    if (!is_gemma3(c->model_type)) return ZT_OK;
    if ((st = get_int(o, path, "sliding_window_pattern", c->sliding_window_pattern, &c->sliding_window_pattern)) ||
        (st = get_num(o, path, "rope_local_base_freq", c->rope_local_theta, &c->rope_local_theta)))
        return st;
    if (c->sliding_window_pattern < 1) return bad_key(path, "sliding_window_pattern", "must be a positive integer");
    if (!(c->rope_local_theta > 0)) return bad_key(path, "rope_local_base_freq", "must be positive");
    return ZT_OK;
}

static zt_status parse_config(zt_llama_config *c, const cJSON *o, const char *path)
{
    zt_llama_config_default(c);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    if (!cJSON_IsString(mt)) return bad_key(path, "model_type", "is missing");
    if (!arch_prefix(mt->valuestring))
        return zt_fail(ZT_EUSER,
                       "'%s': model_type '%.32s' is not supported (llama, mistral, qwen2, qwen3, gemma2, gemma3_text, "
                       "olmo2, phi3)",
                       path, mt->valuestring);
    strcpy(c->model_type, mt->valuestring);
    /* Gemma's MLP reads hidden_activation (parse_gemma) and leaves hidden_act unread */
    int gemma = !strncmp(c->model_type, "gemma", 5);
    if (gemma) gemma_defaults(c);
    if (is_olmo2(c->model_type)) olmo2_defaults(c);
    if (is_phi3(c->model_type)) phi3_defaults(c);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, "hidden_act");
    if (!gemma && act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu")))
        return bad_key(path, "hidden_act", "must be \"silu\"");
    /* Qwen2 and Qwen3 window only the layers from max_window_layers on; Qwen3 has q/k norms and
       (without the key) a head_dim of 128 */
    int qwen2 = !strcmp(c->model_type, "qwen2"), qwen3 = !strcmp(c->model_type, "qwen3"), qwen = qwen2 || qwen3;
    int mlp_bias = 0, attention_bias = 0, use_sw = 1, max_window_layers;
    double attention_dropout = 0;
    zt_status st;
    if ((st = get_int(o, path, "vocab_size", -2, &c->vocab_size)) ||
        (st = get_int(o, path, "hidden_size", -2, &c->hidden_size)) ||
        (st = get_int(o, path, "intermediate_size", -2, &c->intermediate_size)) ||
        (st = get_int(o, path, "num_hidden_layers", -2, &c->num_hidden_layers)) ||
        (st = get_int(o, path, "num_attention_heads", -2, &c->num_attention_heads)) ||
        (st = get_int(o, path, "num_key_value_heads", c->num_attention_heads, &c->num_key_value_heads)) ||
        (st = get_int(o, path, "head_dim", qwen3 ? 128 : c->head_dim, &c->head_dim)) ||
        (st = get_int(o, path, "max_position_embeddings", c->max_position_embeddings, &c->max_position_embeddings)) ||
        (st = get_num(o, path, "rms_norm_eps", c->rms_norm_eps, &c->rms_norm_eps)) ||
        (st = get_num(o, path, "rope_theta", c->rope_theta, &c->rope_theta)) ||
        (st = get_num(o, path, "attention_dropout", 0, &attention_dropout)) ||
        (st = get_bool(o, path, "tie_word_embeddings", gemma, &c->tie_word_embeddings)) ||
        (st = get_bool(o, path, "attention_bias", 0, &attention_bias)) ||
        (st = get_bool(o, path, "mlp_bias", 0, &mlp_bias)) ||
        (st = get_int(o, path, "sliding_window", c->sliding_window, &c->sliding_window)) ||
        (st = get_bool(o, path, "use_sliding_window", !qwen, &use_sw)) ||
        (st = get_int(o, path, "max_window_layers", c->num_hidden_layers, &max_window_layers)) ||
        (st = get_token_id(o, path, "bos_token_id", &c->bos_token_id)) ||
        (st = get_token_id(o, path, "eos_token_id", &c->eos_token_id)) ||
        (st = get_token_id(o, path, "pad_token_id", &c->pad_token_id)) || (st = parse_rope_scaling(c, o, path)) ||
        (gemma && (st = parse_gemma(c, o, path))) || (is_phi3(c->model_type) && (st = parse_phi3(c, o, path))))
        return st;
    if (mlp_bias) return bad_key(path, "mlp_bias", "= true is not supported");
    if (attention_dropout != 0) return bad_key(path, "attention_dropout", "other than 0 is not supported (no dropout)");
    if ((st = parse_num_labels(c, o, path))) return st;
    if (qwen) {
        if (!use_sw) c->sliding_window = 0;
        else if (c->sliding_window && max_window_layers != 0)
            return bad_key(path, "max_window_layers", "other than 0 with use_sliding_window is not supported");
    }
    if (qwen2) c->qkv_bias = 1;
    else c->qkv_bias = c->o_bias = attention_bias;
    if (qwen3) c->qk_norm = ZT_QK_NORM_HEADS;
    if (!c->head_dim && c->num_attention_heads > 0) c->head_dim = c->hidden_size / c->num_attention_heads;
    return zt_llama_config_check(c, path);
}

zt_status zt_llama_config_check(const zt_llama_config *c, const char *where)
{
    struct {
        const char *key;
        int v;
    } pos[] = {
        {"vocab_size", c->vocab_size},
        {"hidden_size", c->hidden_size},
        {"intermediate_size", c->intermediate_size},
        {"num_hidden_layers", c->num_hidden_layers},
        {"num_attention_heads", c->num_attention_heads},
        {"num_key_value_heads", c->num_key_value_heads},
        {"head_dim", c->head_dim},
        {"max_position_embeddings", c->max_position_embeddings},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0) return bad_key(where, pos[i].key, "must be a positive integer");
    if (c->num_attention_heads % c->num_key_value_heads)
        return bad_key(where, "num_key_value_heads", "must divide num_attention_heads");
    if (c->head_dim % 2) return bad_key(where, "head_dim", "must be even (rotary embedding)");
    if (!(c->partial_rotary_factor > 0 && c->partial_rotary_factor <= 1) ||
        (!is_phi3(c->model_type) && c->partial_rotary_factor != 1)) /* only Phi-3's attention honours it */
        return bad_key(where, "partial_rotary_factor", "must be in (0, 1], and 1 but for phi3");
    int rd = zt_llama_rotary_dim(c);
    if (rd < 2 || rd % 2)
        return bad_key(where, "partial_rotary_factor", "must make head_dim · partial_rotary_factor even, at least 2");
    if (!strcmp(c->rope_scaling.type, "longrope")) {
        if (c->rope_scaling.n_short != rd / 2)
            return bad_key(where, "rope_scaling.short_factor",
                           "must have head_dim · partial_rotary_factor / 2 entries");
        if (c->rope_scaling.n_long != rd / 2)
            return bad_key(where, "rope_scaling.long_factor", "must have head_dim · partial_rotary_factor / 2 entries");
        if (c->rope_scaling.original_max_position_embeddings < 2) /* its log divides */
            return bad_key(where, "original_max_position_embeddings", "must be an integer of at least 2");
    }
    if (c->qkv_bias && is_phi3(c->model_type)) /* Phi3Config has none: transformers would ignore it */
        return bad_key(where, "attention_bias", "must be false for phi3 (its projections have no biases)");
    if (!(c->rms_norm_eps > 0)) return bad_key(where, "rms_norm_eps", "must be positive");
    if (!(c->rope_theta > 0)) return bad_key(where, "rope_theta", "must be positive");
    if (c->sliding_window < 0) return bad_key(where, "sliding_window", "must be positive or null");
    if (c->sliding_window && is_olmo2(c->model_type)) /* Olmo2Config has none: transformers would ignore it */
        return bad_key(where, "sliding_window", "must be null for olmo2 (its attention has no window)");
    if (c->sliding_window_pattern < 0) return bad_key(where, "sliding_window_pattern", "must be a positive integer");
    if (c->query_pre_attn_scalar < 0) return bad_key(where, "query_pre_attn_scalar", "must be positive");
    if (c->attn_softcap < 0) return bad_key(where, "attn_logit_softcapping", "must be positive or null");
    if (c->attn_softcap > 0 && is_gemma3(c->model_type)) /* its attention never passes it on */
        return bad_key(where, "attn_logit_softcapping",
                       "must be null for gemma3_text (transformers' Gemma 3 ignores it)");
    if (c->final_softcap < 0) return bad_key(where, "final_logit_softcapping", "must be positive or null");
    if (c->rope_local_theta < 0) return bad_key(where, "rope_local_base_freq", "must be positive");
    if ((double)c->vocab_size * c->hidden_size > 4e12) return bad_key(where, "vocab_size", "is too large");
    return ZT_OK;
}

zt_status zt_llama_config_load(zt_llama_config *c, const char *path)
{
    cJSON *o;
    zt_status st = zt_json_read(path, &o);
    if (st) return st;
    if (!cJSON_IsObject(o)) st = zt_fail(ZT_EUSER, "'%s': not a JSON object", path);
    if (!st) st = parse_config(c, o, path);
    cJSON_Delete(o);
    if (!st && snprintf(c->path, sizeof c->path, "%s", path) >= (int)sizeof c->path) c->path[0] = 0;
    return st;
}

static void add_softcap(cJSON *o, const char *key, double cap)
{
    if (cap > 0) zt_json_add_float(o, key, cap);
    else cJSON_AddNullToObject(o, key);
}

static void add_gemma_keys(cJSON *o, const zt_llama_config *c)
{
    zt_json_add_float(o, "query_pre_attn_scalar", c->query_pre_attn_scalar);
    add_softcap(o, "attn_logit_softcapping", c->attn_softcap);
    add_softcap(o, "final_logit_softcapping", c->final_softcap);
    if (!is_gemma3(c->model_type)) return;
    cJSON_AddNumberToObject(o, "sliding_window_pattern", c->sliding_window_pattern);
    zt_json_add_float(o, "rope_local_base_freq", c->rope_local_theta);
}

/* Phi3Config's rotary keys: rope_scaling holds type and factors alone */
static void add_phi3_keys(cJSON *o, const zt_llama_config *c)
{
    zt_json_add_float(o, "partial_rotary_factor", c->partial_rotary_factor);
    cJSON_AddNumberToObject(o, "original_max_position_embeddings", c->rope_scaling.original_max_position_embeddings);
    if (!c->rope_scaling.type[0]) {
        cJSON_AddNullToObject(o, "rope_scaling");
        return;
    }
    cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
    cJSON_AddStringToObject(rs, "type", c->rope_scaling.type);
    cJSON_AddItemToObject(rs, "short_factor",
                          cJSON_CreateDoubleArray(c->rope_scaling.short_factor, c->rope_scaling.n_short));
    cJSON_AddItemToObject(rs, "long_factor",
                          cJSON_CreateDoubleArray(c->rope_scaling.long_factor, c->rope_scaling.n_long));
}

/* config.json as zt would write it for c alone (what `zt init` writes) */
static cJSON *made_config(const zt_llama_config *c, const char *torch_dtype)
{
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "architectures");
    char name[64];
    snprintf(name, sizeof name, "%sFor%s", arch_prefix(c->model_type),
             c->num_labels ? "SequenceClassification" : "CausalLM");
    cJSON_AddItemToArray(a, cJSON_CreateString(name));
    if (c->num_labels) { /* what transformers reads as num_labels = 1 */
        cJSON_AddNumberToObject(o, "num_labels", c->num_labels);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "id2label"), "0", "LABEL_0");
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "label2id"), "LABEL_0", 0);
    }
    int pad = c->pad_token_id >= 0 ? c->pad_token_id : c->num_labels ? c->eos_token_id : -1;
    if (pad >= 0) cJSON_AddNumberToObject(o, "pad_token_id", pad);
    cJSON_AddStringToObject(o, "model_type", c->model_type);
    if (c->gemma) cJSON_AddStringToObject(o, "hidden_activation", "gelu_pytorch_tanh");
    else cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(o, "hidden_size", c->hidden_size);
    cJSON_AddNumberToObject(o, "intermediate_size", c->intermediate_size);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->num_hidden_layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", c->num_attention_heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->num_key_value_heads);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(o, "max_position_embeddings", c->max_position_embeddings);
    zt_json_add_float(o, "rms_norm_eps", c->rms_norm_eps);
    zt_json_add_float(o, "rope_theta", c->rope_theta);
    if (is_phi3(c->model_type)) add_phi3_keys(o, c);
    else if (c->rope_scaling.type[0]) {
        cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", c->rope_scaling.type);
        zt_json_add_float(rs, "factor", c->rope_scaling.factor);
        if (!strcmp(c->rope_scaling.type, "llama3")) {
            zt_json_add_float(rs, "low_freq_factor", c->rope_scaling.low_freq_factor);
            zt_json_add_float(rs, "high_freq_factor", c->rope_scaling.high_freq_factor);
            cJSON_AddNumberToObject(rs, "original_max_position_embeddings",
                                    c->rope_scaling.original_max_position_embeddings);
        }
    } else {
        cJSON_AddNullToObject(o, "rope_scaling");
    }
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_word_embeddings);
    int qwen2 = !strcmp(c->model_type, "qwen2"), qwen = qwen2 || !strcmp(c->model_type, "qwen3");
    if (qwen) {
        cJSON_AddBoolToObject(o, "use_sliding_window", c->sliding_window > 0);
        cJSON_AddNumberToObject(o, "max_window_layers", 0);
    }
    if (!qwen2 && !is_phi3(c->model_type)) cJSON_AddBoolToObject(o, "attention_bias", c->qkv_bias);
    if (!qwen && !c->gemma && !is_phi3(c->model_type)) cJSON_AddBoolToObject(o, "mlp_bias", 0);
    if (c->gemma) add_gemma_keys(o, c);
    if (c->sliding_window) cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
    else cJSON_AddNullToObject(o, "sliding_window");
    if (c->bos_token_id >= 0) cJSON_AddNumberToObject(o, "bos_token_id", c->bos_token_id);
    if (c->eos_token_id >= 0) cJSON_AddNumberToObject(o, "eos_token_id", c->eos_token_id);
    cJSON_AddStringToObject(o, "torch_dtype", torch_dtype);
    cJSON_AddStringToObject(o, "zt_version", ZT_VERSION);
    return o;
}

/* dst[key] = src[key], in dst's place for the key (a new key goes last), so that saving a
 * saved config changes nothing */
static void take(cJSON *dst, cJSON *src, const char *key)
{
    cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(src, key);
    if (!v) cJSON_DeleteItemFromObjectCaseSensitive(dst, key);
    else if (cJSON_GetObjectItemCaseSensitive(dst, key)) cJSON_ReplaceItemInObjectCaseSensitive(dst, key, v);
    else cJSON_AddItemToObject(dst, key, v);
}

/* The source's config.json with what zt changed: the dtype it saves in, the writer, a
 * value/reward head put on a causal LM, a grown vocabulary. Every other key stays as the
 * source wrote it, unknown keys and number types included. */
static void carry_over(cJSON *src, cJSON *made, const zt_llama_config *c)
{
    static const char *head_keys[] = {"architectures", "num_labels", "id2label", "label2id", "pad_token_id"};
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(src, "num_labels");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(src, "vocab_size");
    take(src, made, "torch_dtype");
    take(src, made, "zt_version");
    if (c->num_labels && !(cJSON_IsNumber(labels) && labels->valueint == c->num_labels))
        for (size_t i = 0; i < sizeof head_keys / sizeof head_keys[0]; i++) take(src, made, head_keys[i]);
    if (!cJSON_IsNumber(vocab) || vocab->valuedouble != c->vocab_size) take(src, made, "vocab_size");
}

zt_status zt_llama_config_save(const zt_llama_config *c, const char *path, const char *torch_dtype)
{
    cJSON *o = made_config(c, torch_dtype), *src = NULL;
    zt_status st = c->path[0] && zt_path_exists(c->path) ? zt_json_read(c->path, &src) : ZT_OK;
    if (!st && cJSON_IsObject(src)) carry_over(src, o, c), cJSON_Delete(o), o = src, src = NULL;
    cJSON_Delete(src);
    if (!st) st = zt_json_write(path, o);
    cJSON_Delete(o);
    return st;
}

static zt_status parse_int_value(const char *key, const char *value, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno || end == value || *end || v < -1 || v > 2147483647L)
        return zt_fail(ZT_EUSER, "config key '%s': '%s' is not a valid integer", key, value);
    *out = (int)v;
    return ZT_OK;
}

static zt_status parse_bool_value(const char *key, const char *value, int *out)
{
    if (!strcmp(value, "true")) *out = 1;
    else if (!strcmp(value, "false")) *out = 0;
    else return zt_fail(ZT_EUSER, "config key '%s': '%s' is not true or false", key, value);
    return ZT_OK;
}

zt_status zt_llama_config_set(zt_llama_config *c, const char *key, const char *value)
{
    struct {
        const char *key;
        int *p;
    } ints[] = {
        {"vocab_size", &c->vocab_size},
        {"hidden_size", &c->hidden_size},
        {"intermediate_size", &c->intermediate_size},
        {"num_hidden_layers", &c->num_hidden_layers},
        {"num_attention_heads", &c->num_attention_heads},
        {"num_key_value_heads", &c->num_key_value_heads},
        {"head_dim", &c->head_dim},
        {"max_position_embeddings", &c->max_position_embeddings},
        {"original_max_position_embeddings", &c->rope_scaling.original_max_position_embeddings},
        {"sliding_window", &c->sliding_window},
        {"sliding_window_pattern", &c->sliding_window_pattern},
        {"bos_token_id", &c->bos_token_id},
        {"eos_token_id", &c->eos_token_id},
        {"pad_token_id", &c->pad_token_id},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(key, ints[i].key)) return parse_int_value(key, value, ints[i].p);
    struct {
        const char *key;
        double *p;
    } nums[] = {
        {"rms_norm_eps", &c->rms_norm_eps},
        {"rope_theta", &c->rope_theta},
        {"query_pre_attn_scalar", &c->query_pre_attn_scalar},
        {"attn_logit_softcapping", &c->attn_softcap},
        {"final_logit_softcapping", &c->final_softcap},
        {"rope_local_base_freq", &c->rope_local_theta},
        {"partial_rotary_factor", &c->partial_rotary_factor},
    };
    double *num = NULL;
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (!strcmp(key, nums[i].key)) num = nums[i].p;
    if (num) {
        char *end;
        *num = strtod(value, &end);
        if (end == value || *end || !isfinite(*num))
            return zt_fail(ZT_EUSER, "config key '%s': '%s' is not a number", key, value);
        return ZT_OK;
    }
    if (!strcmp(key, "tie_word_embeddings")) return parse_bool_value(key, value, &c->tie_word_embeddings);
    if (!strcmp(key, "attention_bias")) {
        zt_status st = parse_bool_value(key, value, &c->qkv_bias);
        c->o_bias = c->qkv_bias;
        return st;
    }
    if (!strcmp(key, "model_type")) {
        if (!arch_prefix(value))
            return zt_fail(ZT_EUSER,
                           "config key 'model_type': '%s' is not llama, mistral, qwen2, qwen3, gemma2, gemma3_text, "
                           "olmo2 or phi3",
                           value);
        strcpy(c->model_type, value);
        c->qk_norm = !strcmp(value, "qwen3") ? ZT_QK_NORM_HEADS : 0;
        c->post_norms = c->no_pre_norms = 0;
        if (!strncmp(value, "gemma", 5)) gemma_defaults(c);
        else c->gemma = c->sliding_window_pattern = 0, c->attn_softcap = c->final_softcap = 0;
        if (is_olmo2(value)) olmo2_defaults(c);
        if (is_phi3(value)) phi3_defaults(c);
        else c->partial_rotary_factor = 1;
        c->qkv_bias = !strcmp(value, "qwen2") ? 1 : c->qkv_bias;
        c->o_bias = !strcmp(value, "qwen2") ? 0 : c->o_bias;
        return ZT_OK;
    }
    return zt_fail(ZT_EUSER, "unknown config key '%s'", key);
}
