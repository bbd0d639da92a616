/* Hugging Face config.json read and checked (llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text,
 * glm, glm4, olmo2, phi3, smollm3, granite, mixtral, qwen2_moe, qwen3_moe, olmoe; the image-text models' language models:
 * llama_config_image_text.c); the families' own keys are in llama_config_family.c, writing it in llama_config_save.c. */
#include <math.h>
#include <stdio.h>

#include "lib/core/json.h"
#include "llama_config_keys.h"

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
    c->embedding_multiplier = c->residual_multiplier = c->logits_scaling = 1;
    c->bos_token_id = 1;
    c->eos_token_id = 2;
    c->pad_token_id = -1;
}

/* model_type → the architecture's class-name prefix */
static const char *const model_types[][2] = {
    {"llama", "Llama"},     {"mistral", "Mistral"}, {"qwen2", "Qwen2"},        {"qwen3", "Qwen3"},
    {"gemma", "Gemma"},     {"gemma2", "Gemma2"},   {"gemma3_text", "Gemma3"}, {"glm", "Glm"},
    {"glm4", "Glm4"},       {"olmo2", "Olmo2"},     {"phi3", "Phi3"},          {"smollm3", "SmolLM3"},
    {"granite", "Granite"}, {"mixtral", "Mixtral"}, {"qwen2_moe", "Qwen2Moe"}, {"qwen3_moe", "Qwen3Moe"},
    {"olmoe", "Olmoe"}};
enum { N_MODEL_TYPES = sizeof model_types / sizeof model_types[0] };

const char *zt_llama_arch_prefix(const char *model_type)
{
    for (int i = 0; i < N_MODEL_TYPES; i++)
        if (!strcmp(model_type, model_types[i][0])) return model_types[i][1];
    return NULL;
}

const char *zt_llama_model_types(void)
{
    return "llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, glm, glm4, olmo2, phi3, smollm3, granite, "
           "mixtral, qwen2_moe, qwen3_moe, olmoe, or the language model of gemma3, mistral3, llava, qwen2_vl or "
           "qwen2_5_vl";
}

const char *zt_llama_text_name(const char *name)
{
    size_t n = strlen("language_model.");
    return strncmp(name, "language_model.", n) ? name : name + n;
}

int zt_llama_passes_through(const zt_llama_config *c, const char *name)
{
    size_t n = strlen(c->text_prefix);
    if (!c->image_text) return 0;
    if (strncmp(name, c->text_prefix, n)) return 1;
    return strncmp(name + n, "model.", strlen("model.")) && strncmp(name + n, "lm_head.", strlen("lm_head."));
}

int zt_llama_expert_size(const zt_llama_config *c)
{
    int qwen = zt_llama_is(c, "qwen2_moe") || zt_llama_is(c, "qwen3_moe");
    return qwen ? c->moe_intermediate_size : c->intermediate_size;
}

int zt_llama_fused_qkv(const zt_llama_config *c) { return zt_llama_is(c, "phi3"); }

int zt_llama_fused_gate_up(const zt_llama_config *c)
{
    return zt_llama_is(c, "phi3") || zt_llama_is(c, "glm") || zt_llama_is(c, "glm4");
}

int zt_llama_rotary_dim(const zt_llama_config *c) { return (int)(c->head_dim * c->partial_rotary_factor); }

int zt_llama_layer_rope(const zt_llama_config *c, int l)
{
    if (c->n_no_rope_layers) return l >= c->n_no_rope_layers || c->no_rope_layers[l];
    return !c->no_rope_layer_interval || (l + 1) % c->no_rope_layer_interval;
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
        zt_cfg_int(o, path, "num_labels", cJSON_IsObject(labels) ? cJSON_GetArraySize(labels) : 1, &c->num_labels);
    if (st) return st;
    if (c->num_labels != 1) return zt_cfg_bad(path, "num_labels", "must be 1 (a scalar reward or value head)");
    c->tie_word_embeddings = 0; /* the score head is its own tensor */
    return ZT_OK;
}

zt_status zt_llama_parse_config(zt_llama_config *c, const cJSON *o, const char *path)
{
    zt_llama_config_default(c);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    if (!cJSON_IsString(mt)) return zt_cfg_bad(path, "model_type", "is missing");
    if (zt_llama_image_text_type(mt->valuestring)) return zt_llama_parse_image_text(c, o, path);
    if (!zt_llama_arch_prefix(mt->valuestring))
        return zt_fail(ZT_EUSER, "'%s': model_type '%.32s' is not supported (%s)", path, mt->valuestring,
                       zt_llama_model_types());
    strcpy(c->model_type, mt->valuestring);
    /* Gemma's activation is parse_gemma's */
    zt_llama_family_defaults(c);
    int gemma = c->gemma;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, "hidden_act");
    if (!gemma && act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu")))
        return zt_cfg_bad(path, "hidden_act", "must be \"silu\"");
    /* Qwen2 and Qwen3 window only the layers from max_window_layers on; Qwen3 has q/k norms and
       (without the key) a head_dim of 128 */
    int qwen2 = !strcmp(c->model_type, "qwen2"), qwen3 = !strcmp(c->model_type, "qwen3");
    int qwen2_moe = zt_llama_is(c, "qwen2_moe"); /* its q/k/v biases: qkv_bias, true by default */
    int qwen = qwen2 || qwen3 || qwen2_moe || zt_llama_is(c, "qwen3_moe");
    int glm = zt_llama_is(c, "glm") || zt_llama_is(c, "glm4"); /* biases on q, k, v alone, true by default */
    int mlp_bias = 0, attention_bias = glm, qkv_bias = 1, use_sw = 1, max_window_layers;
    double attention_dropout = 0;
    zt_status st;
    if ((st = zt_cfg_int(o, path, "vocab_size", -2, &c->vocab_size)) ||
        (st = zt_cfg_int(o, path, "hidden_size", -2, &c->hidden_size)) ||
        (st = zt_cfg_int(o, path, "intermediate_size", -2, &c->intermediate_size)) ||
        (st = zt_cfg_int(o, path, "num_hidden_layers", -2, &c->num_hidden_layers)) ||
        (st = zt_cfg_int(o, path, "num_attention_heads", -2, &c->num_attention_heads)) ||
        (st = zt_cfg_int(o, path, "num_key_value_heads", c->num_attention_heads, &c->num_key_value_heads)) ||
        (st = zt_cfg_int(o, path, "head_dim", qwen3 ? 128 : c->head_dim, &c->head_dim)) ||
        (st =
             zt_cfg_int(o, path, "max_position_embeddings", c->max_position_embeddings, &c->max_position_embeddings)) ||
        (st = zt_cfg_num(o, path, "rms_norm_eps", c->rms_norm_eps, &c->rms_norm_eps)) ||
        (st = zt_cfg_num(o, path, "rope_theta", c->rope_theta, &c->rope_theta)) ||
        (st = zt_cfg_num(o, path, "attention_dropout", 0, &attention_dropout)) ||
        (st = zt_cfg_bool(o, path, "tie_word_embeddings", c->tie_word_embeddings, &c->tie_word_embeddings)) ||
        (st = zt_cfg_bool(o, path, "attention_bias", glm, &attention_bias)) ||
        (qwen2_moe && (st = zt_cfg_bool(o, path, "qkv_bias", 1, &qkv_bias))) ||
        (st = zt_cfg_bool(o, path, "mlp_bias", 0, &mlp_bias)) ||
        (st = zt_cfg_int(o, path, "sliding_window", c->sliding_window, &c->sliding_window)) ||
        (st = zt_cfg_bool(o, path, "use_sliding_window", !qwen, &use_sw)) ||
        (st = zt_cfg_int(o, path, "max_window_layers", c->num_hidden_layers, &max_window_layers)) ||
        (st = zt_cfg_token_id(o, path, "bos_token_id", &c->bos_token_id)) ||
        (st = zt_cfg_token_id(o, path, "eos_token_id", &c->eos_token_id)) ||
        (st = zt_cfg_token_id(o, path, "pad_token_id", &c->pad_token_id)) ||
        (st = zt_llama_parse_rope_scaling(c, o, path)) || (st = zt_llama_parse_family(c, o, path)))
        return st;
    if (mlp_bias) return zt_cfg_bad(path, "mlp_bias", "= true is not supported");
    if (attention_dropout != 0)
        return zt_cfg_bad(path, "attention_dropout", "other than 0 is not supported (no dropout)");
    if ((st = parse_num_labels(c, o, path))) return st;
    if (qwen) {
        if (!use_sw) c->sliding_window = 0;
        else if (c->sliding_window && max_window_layers != 0)
            return zt_cfg_bad(path, "max_window_layers", "other than 0 with use_sliding_window is not supported");
    }
    if (qwen2) c->qkv_bias = 1;
    else if (qwen2_moe) c->qkv_bias = qkv_bias, c->o_bias = 0;
    else zt_llama_set_attention_bias(c, attention_bias);
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
        if (pos[i].v <= 0) return zt_cfg_bad(where, pos[i].key, "must be a positive integer");
    if (c->num_attention_heads % c->num_key_value_heads)
        return zt_cfg_bad(where, "num_key_value_heads", "must divide num_attention_heads");
    if (c->head_dim % 2) return zt_cfg_bad(where, "head_dim", "must be even (rotary embedding)");
    int partial = zt_llama_is(c, "phi3") || zt_llama_is(c, "glm") || zt_llama_is(c, "glm4"); /* their attention's */
    if (!(c->partial_rotary_factor > 0 && c->partial_rotary_factor <= 1) || (!partial && c->partial_rotary_factor != 1))
        return zt_cfg_bad(where, "partial_rotary_factor", "must be in (0, 1], and 1 but for phi3, glm and glm4");
    int rd = zt_llama_rotary_dim(c);
    if (rd < 2 || rd % 2)
        return zt_cfg_bad(where, "partial_rotary_factor",
                          "must make head_dim · partial_rotary_factor even, at least 2");
    if (!strcmp(c->rope_scaling.type, "longrope")) {
        if (c->rope_scaling.n_short != rd / 2)
            return zt_cfg_bad(where, "rope_scaling.short_factor",
                              "must have head_dim · partial_rotary_factor / 2 entries");
        if (c->rope_scaling.n_long != rd / 2)
            return zt_cfg_bad(where, "rope_scaling.long_factor",
                              "must have head_dim · partial_rotary_factor / 2 entries");
        if (c->rope_scaling.original_max_position_embeddings < 2) /* its log divides */
            return zt_cfg_bad(where, "original_max_position_embeddings", "must be an integer of at least 2");
    }
    if (c->qkv_bias && zt_llama_is(c, "phi3")) /* Phi3Config has none: transformers would ignore it */
        return zt_cfg_bad(where, "attention_bias", "must be false for phi3 (its projections have no biases)");
    if (c->no_rope_layer_interval < 0 || (c->no_rope_layer_interval && !zt_llama_is(c, "smollm3")))
        return zt_cfg_bad(where, "no_rope_layer_interval", "must be a positive integer, for smollm3 only");
    if (c->n_no_rope_layers && c->n_no_rope_layers != c->num_hidden_layers)
        return zt_cfg_bad(where, "no_rope_layers", "must have num_hidden_layers entries");
    if (!(c->rms_norm_eps > 0)) return zt_cfg_bad(where, "rms_norm_eps", "must be positive");
    if (!(c->rope_theta > 0)) return zt_cfg_bad(where, "rope_theta", "must be positive");
    if (c->sliding_window < 0) return zt_cfg_bad(where, "sliding_window", "must be positive or null");
    if (c->sliding_window && (zt_llama_is(c, "olmo2") || zt_llama_is(c, "gemma"))) /* their *Config has none */
        return zt_cfg_bad(where, "sliding_window", "must be null for olmo2 and gemma (their attention has no window)");
    if (c->gelu_exact && !zt_llama_is(c, "gemma"))
        return zt_cfg_bad(where, "hidden_act",
                          "\"gelu\" is for gemma only (the others' MLPs are SwiGLU or Gemma's tanh GeGLU)");
    if (c->sliding_window_pattern < 0) return zt_cfg_bad(where, "sliding_window_pattern", "must be a positive integer");
    if (c->query_pre_attn_scalar < 0) return zt_cfg_bad(where, "query_pre_attn_scalar", "must be positive");
    if (c->attn_softcap < 0) return zt_cfg_bad(where, "attn_logit_softcapping", "must be positive or null");
    if (c->attn_softcap > 0 && zt_llama_is(c, "gemma3_text")) /* its attention never passes it on */
        return zt_cfg_bad(where, "attn_logit_softcapping",
                          "must be null for gemma3_text (transformers' Gemma 3 ignores it)");
    if (c->final_softcap < 0) return zt_cfg_bad(where, "final_logit_softcapping", "must be positive or null");
    if (c->rope_local_theta < 0) return zt_cfg_bad(where, "rope_local_base_freq", "must be positive");
    int granite = zt_llama_is(c, "granite");
    const struct {
        const char *key;
        double v, other; /* the value, and the one every family but Granite has */
    } mults[] = {{"embedding_multiplier", c->embedding_multiplier, 1},
                 {"attention_multiplier", c->attention_multiplier, 0},
                 {"residual_multiplier", c->residual_multiplier, 1},
                 {"logits_scaling", c->logits_scaling, 1}};
    for (size_t i = 0; i < sizeof mults / sizeof mults[0]; i++)
        if (granite ? !(mults[i].v > 0) || !isfinite(mults[i].v) : mults[i].v != mults[i].other)
            return zt_cfg_bad(where, mults[i].key, "must be a positive number, for granite only");
    zt_status st = zt_llama_check_experts(c, where);
    if (st) return st;
    if ((double)c->vocab_size * c->hidden_size > 4e12) return zt_cfg_bad(where, "vocab_size", "is too large");
    return ZT_OK;
}

zt_status zt_llama_config_load(zt_llama_config *c, const char *path)
{
    cJSON *o;
    zt_status st = zt_json_read(path, &o);
    if (st) return st;
    if (!cJSON_IsObject(o)) st = zt_fail(ZT_EUSER, "'%s': not a JSON object", path);
    if (!st) st = zt_llama_parse_config(c, o, path);
    cJSON_Delete(o);
    if (!st && snprintf(c->path, sizeof c->path, "%s", path) >= (int)sizeof c->path) c->path[0] = 0;
    return st;
}
