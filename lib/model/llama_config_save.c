/* config.json written (what `zt init` makes, or the source's with what zt changed) and set key by
 * key for `zt init`. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/core/fileio.h"
#include "lib/core/json.h"
#include "lib/core/version.h"
#include "llama_config_keys.h"

/* an unset id as null: a missing key would take the *Config's default (SmolLM3's pad_token_id is
   128004, outside a small vocabulary) */
static void add_token_id(cJSON *o, const char *key, int id)
{
    if (id >= 0) cJSON_AddNumberToObject(o, key, id);
    else cJSON_AddNullToObject(o, key);
}

/* config.json as zt would write it for c alone (what `zt init` writes) */
static cJSON *made_config(const zt_llama_config *c, const char *torch_dtype)
{
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "architectures");
    char name[64];
    snprintf(name, sizeof name, "%sFor%s", zt_llama_arch_prefix(c->model_type),
             c->num_labels ? "SequenceClassification" : "CausalLM");
    cJSON_AddItemToArray(a, cJSON_CreateString(name));
    if (c->num_labels) { /* what transformers reads as num_labels = 1 */
        cJSON_AddNumberToObject(o, "num_labels", c->num_labels);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "id2label"), "0", "LABEL_0");
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "label2id"), "LABEL_0", 0);
    }
    int pad = c->pad_token_id >= 0 ? c->pad_token_id : c->num_labels ? c->eos_token_id : -1;
    add_token_id(o, "pad_token_id", pad);
    cJSON_AddStringToObject(o, "model_type", c->model_type);
    if (zt_llama_is(c, "gemma")) cJSON_AddStringToObject(o, "hidden_act", c->gelu_exact ? "gelu" : "gelu_pytorch_tanh");
    else if (c->gemma) cJSON_AddStringToObject(o, "hidden_activation", "gelu_pytorch_tanh");
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
    zt_llama_add_family_keys(o, c);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_word_embeddings);
    int qwen2 = !strcmp(c->model_type, "qwen2");
    int qwen2_moe = zt_llama_is(c, "qwen2_moe");
    int qwen = qwen2 || qwen2_moe || zt_llama_is(c, "qwen3") || zt_llama_is(c, "qwen3_moe");
    if (qwen) {
        cJSON_AddBoolToObject(o, "use_sliding_window", c->sliding_window > 0);
        cJSON_AddNumberToObject(o, "max_window_layers", 0);
    }
    if (qwen2_moe) cJSON_AddBoolToObject(o, "qkv_bias", c->qkv_bias);
    else if (!qwen2 && !zt_llama_is(c, "phi3")) cJSON_AddBoolToObject(o, "attention_bias", c->qkv_bias);
    if (!qwen && !c->gemma && !zt_llama_is(c, "phi3")) cJSON_AddBoolToObject(o, "mlp_bias", 0);
    if (c->sliding_window) cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
    else cJSON_AddNullToObject(o, "sliding_window");
    add_token_id(o, "bos_token_id", c->bos_token_id);
    add_token_id(o, "eos_token_id", c->eos_token_id);
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

/* Whether the source's language model config lm ties its LM head to its embedding: its key, else
 * its family's default */
static int source_tied(const cJSON *lm, const zt_llama_config *c)
{
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(lm, "tie_word_embeddings");
    if (tie) return cJSON_IsTrue(tie);
    zt_llama_config d = *c;
    zt_llama_family_defaults(&d); /* sets the tie of a family tied by default */
    return d.tie_word_embeddings;
}

/* The source's config.json with what zt changed: the dtype it saves in, the writer, a
 * value/reward head put on a causal LM, a grown vocabulary, an LM head untied from the embedding
 * (a merged adapter's copies of them), and no quantization_config (zt saves
 * floats: a bitsandbytes source was decoded). Every other key stays as the source wrote it,
 * unknown keys, number types and an image-text checkpoint's vision_config included. */
static void carry_over(cJSON *src, cJSON *made, const zt_llama_config *c)
{
    cJSON_DeleteItemFromObjectCaseSensitive(src, "quantization_config");
    static const char *head_keys[] = {"architectures", "num_labels", "id2label", "label2id", "pad_token_id"};
    /* an image-text checkpoint's language model: its text_config (it may leave vocab_size out) */
    cJSON *lm = c->text_prefix[0] ? cJSON_GetObjectItemCaseSensitive(src, "text_config") : src;
    if (!cJSON_IsObject(lm)) lm = src;
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(lm, "num_labels");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(lm, "vocab_size");
    take(src, made, "torch_dtype");
    take(src, made, "zt_version");
    if (c->num_labels && !(cJSON_IsNumber(labels) && labels->valueint == c->num_labels))
        for (size_t i = 0; i < sizeof head_keys / sizeof head_keys[0]; i++) take(lm, made, head_keys[i]);
    if (!cJSON_IsNumber(vocab) || vocab->valuedouble != c->vocab_size) take(lm, made, "vocab_size");
    if (!c->num_labels && !c->tie_word_embeddings && source_tied(lm, c)) {
        take(lm, made, "tie_word_embeddings");
        if (lm != src && cJSON_GetObjectItemCaseSensitive(src, "tie_word_embeddings"))
            cJSON_ReplaceItemInObjectCaseSensitive(src, "tie_word_embeddings", cJSON_CreateFalse());
    }
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
        {"no_rope_layer_interval", &c->no_rope_layer_interval},
        {"bos_token_id", &c->bos_token_id},
        {"eos_token_id", &c->eos_token_id},
        {"pad_token_id", &c->pad_token_id},
        {"num_experts", &c->n_experts},
        {"num_local_experts", &c->n_experts},
        {"num_experts_per_tok", &c->experts_per_tok},
        {"moe_intermediate_size", &c->moe_intermediate_size},
        {"shared_expert_intermediate_size", &c->shared_expert_size},
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
        {"router_aux_loss_coef", &c->router_aux_loss_coef},
        {"embedding_multiplier", &c->embedding_multiplier},
        {"attention_multiplier", &c->attention_multiplier},
        {"residual_multiplier", &c->residual_multiplier},
        {"logits_scaling", &c->logits_scaling},
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
    if (!strcmp(key, "norm_topk_prob")) return parse_bool_value(key, value, &c->norm_topk_prob);
    if (!strcmp(key, "output_router_logits")) return parse_bool_value(key, value, &c->output_router_logits);
    if (!strcmp(key, "qkv_bias")) { /* Qwen2-MoE's */
        zt_status st = parse_bool_value(key, value, &c->qkv_bias);
        c->o_bias = 0;
        return st;
    }
    if (!strcmp(key, "attention_bias")) { /* as zt_llama_parse_config reads it */
        if (zt_llama_is(c, "qwen2") || zt_llama_is(c, "qwen2_moe"))
            return zt_fail(ZT_EUSER, "config key 'attention_bias' is not read by %s (its q, k, v have biases%s)",
                           c->model_type, zt_llama_is(c, "qwen2") ? " always" : ": qkv_bias");
        int on = 0;
        zt_status st = parse_bool_value(key, value, &on);
        if (!st) zt_llama_set_attention_bias(c, on);
        return st;
    }
    if (!strcmp(key, "hidden_act")) { /* Gemma 1's two GELUs; SiLU for the others (Gemma 2 and 3 read none) */
        int gemma1 = zt_llama_is(c, "gemma");
        if (gemma1 && (!strcmp(value, "gelu") || !strcmp(value, "gelu_pytorch_tanh"))) {
            c->gelu_exact = !strcmp(value, "gelu");
            return ZT_OK;
        }
        if (!c->gemma && !strcmp(value, "silu")) return ZT_OK;
        return zt_fail(ZT_EUSER, "config key 'hidden_act': '%s' is not %s", value,
                       gemma1     ? "gelu or gelu_pytorch_tanh"
                       : c->gemma ? "read by gemma2 and gemma3"
                                  : "silu");
    }
    if (!strcmp(key, "model_type")) {
        if (!zt_llama_arch_prefix(value))
            return zt_fail(ZT_EUSER, "config key 'model_type': '%s' is not %s", value, zt_llama_model_types());
        strcpy(c->model_type, value);
        zt_llama_family_defaults(c);
        int qwen2 = !strcmp(value, "qwen2") || !strcmp(value, "qwen2_moe"); /* biases on q, k, v */
        c->qkv_bias = qwen2 ? 1 : c->qkv_bias;
        c->o_bias = qwen2 ? 0 : c->o_bias;
        return ZT_OK;
    }
    return zt_fail(ZT_EUSER, "unknown config key '%s'", key);
}
