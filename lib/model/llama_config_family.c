/* The keys of config.json that only some families have (Gemma 1, 2 and 3, GLM, OLMo 2, Phi-3, SmolLM3, Granite),
 * their *Config defaults, and rope_scaling. */
#include <math.h>
#include <stdio.h>

#include "lib/core/json.h"
#include "llama_config_keys.h"

/* What GemmaConfig, Gemma2Config and Gemma3TextConfig default to, on c's sizes: the Gemma
 * blocks, head_dim 256, a tied head; Gemma 1's pre norms alone and gelu's tanh form, nothing else
 * below; Gemma 2's soft-capping and window on every other layer, Gemma 3's q/k norms and window on
 * five layers of six (their local rope theta 10000 against a global 1e6), and none of its
 * soft-capping (final_logit_softcapping is honoured when set). */
static void gemma_defaults(zt_llama_config *c)
{
    int g1 = zt_llama_is(c, "gemma"), g3 = zt_llama_is(c, "gemma3_text");
    c->gemma = 1;
    c->bos_token_id = 2, c->eos_token_id = 1, c->pad_token_id = 0;
    c->head_dim = 256;
    c->tie_word_embeddings = 1;
    c->max_position_embeddings = g3 ? 131072 : 8192;
    if (g1) return;
    c->post_norms = 1;
    c->qk_norm = g3 ? ZT_QK_NORM_HEADS : 0;
    c->query_pre_attn_scalar = 256;
    c->sliding_window = 4096;
    c->sliding_window_pattern = g3 ? 6 : 2;
    c->attn_softcap = g3 ? 0 : 50;
    c->final_softcap = g3 ? 0 : 30;
    c->rope_theta = g3 ? 1e6 : 10000;
    c->rope_local_theta = g3 ? 10000 : 0;
}

/* Olmo2Config: norms on the blocks' outputs only, q/k norms over the whole projections */
static void olmo2_defaults(zt_llama_config *c)
{
    c->post_norms = c->no_pre_norms = 1;
    c->qk_norm = ZT_QK_NORM_WHOLE;
    c->rms_norm_eps = 1e-5;
    c->bos_token_id = -1, c->eos_token_id = 50279, c->pad_token_id = 1;
}

/* GlmConfig and Glm4Config: the rotary embedding on half of a head of 128 in GLM's interleaved
 * pairs, biases on q, k and v (zt_llama_parse_config); GLM-4's norms on the blocks' outputs too */
static void glm_defaults(zt_llama_config *c)
{
    c->partial_rotary_factor = 0.5;
    c->rope_interleaved = 1;
    c->post_norms = zt_llama_is(c, "glm4");
    c->head_dim = 128;
    c->rms_norm_eps = 1.5625e-7;
    c->max_position_embeddings = 131072;
    c->bos_token_id = -1, c->eos_token_id = c->pad_token_id = 151329;
}

/* SmolLM3Config: every fourth layer without the rotary embedding, a tied head */
static void smollm3_defaults(zt_llama_config *c)
{
    c->no_rope_layer_interval = 4;
    c->tie_word_embeddings = 1;
    c->rope_theta = 2e6;
    c->max_position_embeddings = 32768;
}

void zt_llama_set_attention_bias(zt_llama_config *c, int on)
{
    c->qkv_bias = on;
    c->o_bias = zt_llama_is(c, "glm") || zt_llama_is(c, "glm4") ? 0 : on;
}

void zt_llama_family_defaults(zt_llama_config *c)
{
    c->gemma = c->gelu_exact = c->post_norms = c->no_pre_norms = c->sliding_window_pattern = 0;
    c->qk_norm = zt_llama_is(c, "qwen3") ? ZT_QK_NORM_HEADS : 0;
    c->attn_softcap = c->final_softcap = c->rope_local_theta = 0;
    c->partial_rotary_factor = 1;
    c->rope_interleaved = 0;
    c->embedding_multiplier = c->residual_multiplier = c->logits_scaling = 1;
    c->attention_multiplier = zt_llama_is(c, "granite") ? 1 : 0; /* GraniteConfig's default: no 1/sqrt(head_dim) */
    c->no_rope_layer_interval = c->n_no_rope_layers = 0;
    if (!strncmp(c->model_type, "gemma", 5)) gemma_defaults(c);
    if (zt_llama_is(c, "olmo2")) olmo2_defaults(c);
    if (zt_llama_is(c, "glm") || zt_llama_is(c, "glm4")) glm_defaults(c);
    if (zt_llama_is(c, "phi3")) {
        c->rms_norm_eps = 1e-5;
        c->max_position_embeddings = c->rope_scaling.original_max_position_embeddings = 4096;
    }
    if (zt_llama_is(c, "smollm3")) smollm3_defaults(c);
    zt_llama_moe_defaults(c);
}

/* longrope's rope_scaling.short_factor or .long_factor: positive numbers (their count checked
   against the rotary size in zt_llama_config_check) */
static zt_status get_factors(const cJSON *rs, const char *path, const char *key, double *out, int *n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rs, key), *e;
    char name[32];
    snprintf(name, sizeof name, "rope_scaling.%s", key);
    if (!cJSON_IsArray(v)) return zt_cfg_bad(path, name, "must be a list of positive numbers");
    *n = 0;
    cJSON_ArrayForEach(e, v)
    {
        if (!cJSON_IsNumber(e) || !(e->valuedouble > 0))
            return zt_cfg_bad(path, name, "must be a list of positive numbers");
        if (*n == ZT_ROPE_MAX_FACTORS) return zt_cfg_bad(path, name, "has too many entries");
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

zt_status zt_llama_parse_rope_scaling(zt_llama_config *c, const cJSON *o, const char *path)
{
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(o, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) return ZT_OK;
    if (!cJSON_IsObject(rs)) return zt_cfg_bad(path, "rope_scaling", "must be an object or null");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!cJSON_IsString(t)) return zt_cfg_bad(path, "rope_scaling.rope_type", "is missing");
    if (zt_llama_is(c, "phi3")) return parse_longrope(c, rs, path, t->valuestring);
    if (strcmp(t->valuestring, "linear") && strcmp(t->valuestring, "llama3") && strcmp(t->valuestring, "default"))
        return zt_fail(ZT_EUSER, "'%s': rope_scaling type '%.32s' is not supported (linear, llama3)", path,
                       t->valuestring);
    if (!strcmp(t->valuestring, "default")) return ZT_OK;
    snprintf(c->rope_scaling.type, sizeof c->rope_scaling.type, "%s", t->valuestring);
    zt_status st;
    if ((st = zt_cfg_num(rs, path, "factor", 0, &c->rope_scaling.factor))) return st;
    if (!(c->rope_scaling.factor > 0)) return zt_cfg_bad(path, "rope_scaling.factor", "must be a positive number");
    if (!strcmp(c->rope_scaling.type, "llama3")) {
        if ((st = zt_cfg_num(rs, path, "low_freq_factor", 1, &c->rope_scaling.low_freq_factor)) ||
            (st = zt_cfg_num(rs, path, "high_freq_factor", 4, &c->rope_scaling.high_freq_factor)) ||
            (st = zt_cfg_int(rs, path, "original_max_position_embeddings", 8192,
                             &c->rope_scaling.original_max_position_embeddings)))
            return st;
        if (!(c->rope_scaling.high_freq_factor > c->rope_scaling.low_freq_factor))
            return zt_cfg_bad(path, "rope_scaling.high_freq_factor", "must be larger than low_freq_factor");
    }
    return ZT_OK;
}

/* a soft-capping value: missing → def, null → 0 (none), else positive */
static zt_status get_softcap(const cJSON *o, const char *path, const char *key, double def, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = v ? 0 : def;
    if (!v || cJSON_IsNull(v)) return ZT_OK;
    zt_status st = zt_cfg_num(o, path, key, def, out);
    if (!st && !(*out > 0)) return zt_cfg_bad(path, key, "must be a positive number or null");
    return st;
}

/* The keys only Phi-3 has: the rotary embedding's share of a head, the length past which
   longrope takes its long factors, the dropouts (0 only: zt trains without dropout) */
static zt_status parse_phi3(zt_llama_config *c, const cJSON *o, const char *path)
{
    double resid = 0, embd = 0;
    zt_status st;
    if ((st = zt_cfg_num(o, path, "partial_rotary_factor", 1, &c->partial_rotary_factor)) ||
        (st = zt_cfg_int(o, path, "original_max_position_embeddings", c->rope_scaling.original_max_position_embeddings,
                         &c->rope_scaling.original_max_position_embeddings)) ||
        (st = zt_cfg_num(o, path, "resid_pdrop", 0, &resid)) || (st = zt_cfg_num(o, path, "embd_pdrop", 0, &embd)))
        return st;
    if (resid != 0) return zt_cfg_bad(path, "resid_pdrop", "other than 0 is not supported (no dropout)");
    if (embd != 0) return zt_cfg_bad(path, "embd_pdrop", "other than 0 is not supported (no dropout)");
    return ZT_OK;
}

/* Gemma 1's activation: hidden_act, as transformers' GemmaMLP reads it (4.51.3; hidden_activation,
 * which Google's configs also name, is left unread as it leaves it): "gelu" (Google's Gemma 1
 * configs) is the exact gelu, "gelu_pytorch_tanh" (GemmaConfig's default) its tanh form. */
static zt_status parse_gemma1(zt_llama_config *c, const cJSON *o, const char *path)
{
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, "hidden_act");
    if (!act) return ZT_OK;
    if (cJSON_IsString(act) && !strcmp(act->valuestring, "gelu_pytorch_tanh")) return ZT_OK;
    if (cJSON_IsString(act) && !strcmp(act->valuestring, "gelu")) c->gelu_exact = 1;
    else return zt_cfg_bad(path, "hidden_act", "must be \"gelu\" or \"gelu_pytorch_tanh\" for gemma");
    return ZT_OK;
}

/* The keys only Gemma has (c holds gemma_defaults and the common keys). */
static zt_status parse_gemma(zt_llama_config *c, const cJSON *o, const char *path)
{
    if (zt_llama_is(c, "gemma")) return parse_gemma1(c, o, path);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, "hidden_activation");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "gelu_pytorch_tanh")))
        return zt_cfg_bad(path, "hidden_activation", "must be \"gelu_pytorch_tanh\"");
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "sliding_window")))
        return zt_cfg_bad(path, "sliding_window", "must be a positive integer (Gemma's windowed layers need one)");
    zt_status st;
    if ((st = zt_cfg_num(o, path, "query_pre_attn_scalar", c->query_pre_attn_scalar, &c->query_pre_attn_scalar)) ||
        (st = get_softcap(o, path, "attn_logit_softcapping", c->attn_softcap, &c->attn_softcap)) ||
        (st = get_softcap(o, path, "final_logit_softcapping", c->final_softcap, &c->final_softcap)))
        return st;
    if (!(c->query_pre_attn_scalar > 0)) return zt_cfg_bad(path, "query_pre_attn_scalar", "must be positive");
    if (!zt_llama_is(c, "gemma3_text")) return ZT_OK;
    if ((st = zt_cfg_int(o, path, "sliding_window_pattern", c->sliding_window_pattern, &c->sliding_window_pattern)) ||
        (st = zt_cfg_num(o, path, "rope_local_base_freq", c->rope_local_theta, &c->rope_local_theta)))
        return st;
    if (c->sliding_window_pattern < 1) return zt_cfg_bad(path, "sliding_window_pattern", "must be a positive integer");
    if (!(c->rope_local_theta > 0)) return zt_cfg_bad(path, "rope_local_base_freq", "must be positive");
    return ZT_OK;
}

/* SmolLM3's no_rope_layers: 1 (the rotary embedding) or 0 (none) per layer */
static zt_status parse_no_rope_layers(zt_llama_config *c, const cJSON *o, const char *path)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "no_rope_layers"), *e;
    const char *what = "must be a list of 0 and 1, one per layer (num_hidden_layers entries)";
    if (!v || cJSON_IsNull(v)) return ZT_OK;
    if (!cJSON_IsArray(v)) return zt_cfg_bad(path, "no_rope_layers", what);
    c->n_no_rope_layers = 0;
    cJSON_ArrayForEach(e, v)
    {
        if (!cJSON_IsNumber(e) || (e->valuedouble != 0 && e->valuedouble != 1))
            return zt_cfg_bad(path, "no_rope_layers", what);
        if (c->n_no_rope_layers == ZT_LLAMA_MAX_LISTED_LAYERS)
            return zt_cfg_bad(path, "no_rope_layers", "has more entries than zt reads (1024)");
        c->no_rope_layers[c->n_no_rope_layers++] = (unsigned char)e->valuedouble;
    }
    if (c->n_no_rope_layers != c->num_hidden_layers) return zt_cfg_bad(path, "no_rope_layers", what);
    return ZT_OK;
}

/* SmolLM3's own keys. A layer is windowed when use_sliding_window and sliding_window are set and
   layer_types calls it "sliding_attention" (without layer_types: the layers without rotary
   embedding, as SmolLM3Config derives it); zt refuses windowed layers here (SmolLM3 ships none),
   so that every layer attends to all earlier keys, as transformers does without them. */
static zt_status parse_smollm3(zt_llama_config *c, const cJSON *o, const char *path)
{
    int use_sw;
    zt_status st;
    if ((st = zt_cfg_int(o, path, "no_rope_layer_interval", c->no_rope_layer_interval, &c->no_rope_layer_interval)) ||
        (st = zt_cfg_bool(o, path, "use_sliding_window", 0, &use_sw)))
        return st;
    if (c->no_rope_layer_interval < 1) return zt_cfg_bad(path, "no_rope_layer_interval", "must be a positive integer");
    if ((st = parse_no_rope_layers(c, o, path))) return st;
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(o, "layer_types");
    const char *what = "must be a list of \"full_attention\" and \"sliding_attention\", one per layer";
    if (types && !cJSON_IsNull(types) && (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != c->num_hidden_layers))
        return zt_cfg_bad(path, "layer_types", what);
    if (!cJSON_IsArray(types)) types = NULL;
    for (int l = 0; l < c->num_hidden_layers; l++) {
        int windowed = !zt_llama_layer_rope(c, l);
        if (types) {
            const cJSON *t = cJSON_GetArrayItem(types, l);
            if (!cJSON_IsString(t) ||
                (strcmp(t->valuestring, "full_attention") && strcmp(t->valuestring, "sliding_attention")))
                return zt_cfg_bad(path, "layer_types", what);
            windowed = !strcmp(t->valuestring, "sliding_attention");
        }
        if (use_sw && c->sliding_window && windowed)
            return zt_cfg_bad(path, "use_sliding_window",
                              "= true with windowed layers is not supported for smollm3 (layer_types, sliding_window)");
    }
    c->sliding_window = 0;
    return ZT_OK;
}

/* Granite's four multipliers (GraniteConfig defaults each to 1) */
static zt_status parse_granite(zt_llama_config *c, const cJSON *o, const char *path)
{
    struct {
        const char *key;
        double *v;
    } keys[] = {{"embedding_multiplier", &c->embedding_multiplier},
                {"attention_multiplier", &c->attention_multiplier},
                {"residual_multiplier", &c->residual_multiplier},
                {"logits_scaling", &c->logits_scaling}};
    zt_status st = ZT_OK;
    for (size_t i = 0; i < sizeof keys / sizeof *keys && !st; i++) st = zt_cfg_num(o, path, keys[i].key, 1, keys[i].v);
    return st; /* zt_llama_config_check: each positive */
}

zt_status zt_llama_parse_family(zt_llama_config *c, const cJSON *o, const char *path)
{
    if (c->gemma) return parse_gemma(c, o, path);
    if (zt_llama_is(c, "granite")) return parse_granite(c, o, path);
    if (zt_llama_is(c, "phi3")) return parse_phi3(c, o, path);
    if (zt_llama_is(c, "smollm3")) return parse_smollm3(c, o, path);
    if (zt_llama_is(c, "glm") || zt_llama_is(c, "glm4"))
        return zt_cfg_num(o, path, "partial_rotary_factor", c->partial_rotary_factor, &c->partial_rotary_factor);
    return zt_llama_parse_experts(c, o, path);
}

static void add_softcap(cJSON *o, const char *key, double cap)
{
    if (cap > 0) zt_json_add_float(o, key, cap);
    else cJSON_AddNullToObject(o, key);
}

static void add_gemma_keys(cJSON *o, const zt_llama_config *c)
{
    if (zt_llama_is(c, "gemma")) return; /* hidden_act alone (made_config) */
    zt_json_add_float(o, "query_pre_attn_scalar", c->query_pre_attn_scalar);
    add_softcap(o, "attn_logit_softcapping", c->attn_softcap);
    add_softcap(o, "final_logit_softcapping", c->final_softcap);
    if (!zt_llama_is(c, "gemma3_text")) return;
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

/* SmolLM3's per-layer lists, written out whole (as SmolLM3Config saves them), no window */
static void add_smollm3_keys(cJSON *o, const zt_llama_config *c)
{
    cJSON *rope = cJSON_AddArrayToObject(o, "no_rope_layers"), *types = cJSON_AddArrayToObject(o, "layer_types");
    for (int l = 0; l < c->num_hidden_layers; l++) {
        cJSON_AddItemToArray(rope, cJSON_CreateNumber(zt_llama_layer_rope(c, l)));
        cJSON_AddItemToArray(types, cJSON_CreateString("full_attention"));
    }
    cJSON_AddNumberToObject(o, "no_rope_layer_interval", c->no_rope_layer_interval);
    cJSON_AddBoolToObject(o, "use_sliding_window", 0);
}

static void add_rope_scaling(cJSON *o, const zt_llama_config *c)
{
    if (!c->rope_scaling.type[0]) {
        cJSON_AddNullToObject(o, "rope_scaling");
        return;
    }
    cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
    cJSON_AddStringToObject(rs, "rope_type", c->rope_scaling.type);
    zt_json_add_float(rs, "factor", c->rope_scaling.factor);
    if (!strcmp(c->rope_scaling.type, "llama3")) {
        zt_json_add_float(rs, "low_freq_factor", c->rope_scaling.low_freq_factor);
        zt_json_add_float(rs, "high_freq_factor", c->rope_scaling.high_freq_factor);
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings",
                                c->rope_scaling.original_max_position_embeddings);
    }
}

void zt_llama_add_family_keys(cJSON *o, const zt_llama_config *c)
{
    if (zt_llama_is(c, "phi3")) add_phi3_keys(o, c);
    else add_rope_scaling(o, c);
    if (zt_llama_is(c, "glm") || zt_llama_is(c, "glm4"))
        zt_json_add_float(o, "partial_rotary_factor", c->partial_rotary_factor);
    if (c->gemma) add_gemma_keys(o, c);
    if (zt_llama_is(c, "smollm3")) add_smollm3_keys(o, c);
    if (zt_llama_is(c, "granite")) {
        zt_json_add_float(o, "embedding_multiplier", c->embedding_multiplier);
        zt_json_add_float(o, "attention_multiplier", c->attention_multiplier);
        zt_json_add_float(o, "residual_multiplier", c->residual_multiplier);
        zt_json_add_float(o, "logits_scaling", c->logits_scaling);
    }
    zt_llama_add_expert_keys(o, c);
}
