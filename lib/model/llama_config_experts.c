/* The keys of config.json that a mixture of experts has (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE): their
 * *Config defaults, reading, checks and writing. */
#include <stdio.h>

#include "lib/core/json.h"
#include "llama_config_keys.h"

int zt_llama_moe_family(const zt_llama_config *c)
{
    return zt_llama_is(c, "mixtral") || zt_llama_is(c, "qwen2_moe") || zt_llama_is(c, "qwen3_moe") ||
           zt_llama_is(c, "olmoe");
}

/* Qwen2-MoE and Qwen3-MoE: moe_intermediate_size, decoder_sparse_step and mlp_only_layers */
static int qwen_moe(const zt_llama_config *c) { return zt_llama_is(c, "qwen2_moe") || zt_llama_is(c, "qwen3_moe"); }

/* MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig, OlmoeConfig: their expert counts (Qwen2-MoE's
 * shared expert), router loss coefficients and the attention they share with Mistral, Qwen2,
 * Qwen3 and OLMo 2 (q/k norms over the whole projections, but pre norms as Llama's) */
void zt_llama_moe_defaults(zt_llama_config *c)
{
    c->n_experts = c->experts_per_tok = c->moe_intermediate_size = c->norm_topk_prob = c->shared_expert_size = 0;
    c->output_router_logits = 0;
    c->router_aux_loss_coef = 0;
    if (!zt_llama_moe_family(c)) return;
    c->router_aux_loss_coef = 0.001;
    if (zt_llama_is(c, "mixtral")) {
        c->n_experts = 8, c->experts_per_tok = 2, c->norm_topk_prob = 1; /* Mixtral always renormalises */
        c->rms_norm_eps = 1e-5, c->rope_theta = 1e6, c->max_position_embeddings = 131072;
    } else if (zt_llama_is(c, "qwen2_moe")) {
        c->n_experts = 60, c->experts_per_tok = 4, c->moe_intermediate_size = 1408, c->shared_expert_size = 5632;
        c->max_position_embeddings = 32768;
    } else if (zt_llama_is(c, "qwen3_moe")) {
        c->n_experts = 128, c->experts_per_tok = 8, c->moe_intermediate_size = 768;
        c->qk_norm = ZT_QK_NORM_HEADS, c->max_position_embeddings = 32768;
    } else {
        c->n_experts = 64, c->experts_per_tok = 8, c->router_aux_loss_coef = 0.01;
        c->qk_norm = ZT_QK_NORM_WHOLE, c->rms_norm_eps = 1e-5, c->max_position_embeddings = 4096;
        c->bos_token_id = -1, c->eos_token_id = 50279, c->pad_token_id = 1;
    }
}

/* a key transformers reads whose other values zt does not train with: it must be null, absent or
   the value given */
static zt_status need_null(const cJSON *o, const char *path, const char *key, const char *what)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v) || (cJSON_IsArray(v) && !cJSON_GetArraySize(v))) return ZT_OK;
    return zt_cfg_bad(path, key, what);
}

zt_status zt_llama_parse_experts(zt_llama_config *c, const cJSON *o, const char *path)
{
    if (!zt_llama_moe_family(c)) return ZT_OK;
    int mixtral = zt_llama_is(c, "mixtral"), qwen = qwen_moe(c), sparse_step = 1;
    double jitter = 0;
    zt_status st;
    if ((st = zt_cfg_int(o, path, mixtral ? "num_local_experts" : "num_experts", c->n_experts, &c->n_experts)) ||
        (st = zt_cfg_int(o, path, "num_experts_per_tok", c->experts_per_tok, &c->experts_per_tok)) ||
        (st = zt_cfg_num(o, path, "router_aux_loss_coef", c->router_aux_loss_coef, &c->router_aux_loss_coef)) ||
        (st = zt_cfg_bool(o, path, "output_router_logits", 0, &c->output_router_logits)))
        return st;
    if (!mixtral && (st = zt_cfg_bool(o, path, "norm_topk_prob", 0, &c->norm_topk_prob))) return st;
    if (mixtral) {
        if ((st = zt_cfg_num(o, path, "router_jitter_noise", 0, &jitter))) return st;
        if (jitter != 0)
            return zt_cfg_bad(path, "router_jitter_noise", "other than 0 is not supported (no jitter on the router)");
    }
    if (qwen) {
        if ((st = zt_cfg_int(o, path, "moe_intermediate_size", c->moe_intermediate_size, &c->moe_intermediate_size)) ||
            (st = zt_cfg_int(o, path, "decoder_sparse_step", 1, &sparse_step)))
            return st;
        if (zt_llama_is(c, "qwen2_moe") && (st = zt_cfg_int(o, path, "shared_expert_intermediate_size",
                                                            c->shared_expert_size, &c->shared_expert_size)))
            return st;
        if (sparse_step != 1)
            return zt_cfg_bad(path, "decoder_sparse_step", "other than 1 is not supported (every layer has experts)");
        if ((st = need_null(o, path, "mlp_only_layers", "must be empty (every layer has experts)"))) return st;
    }
    if (zt_llama_is(c, "olmoe") && (st = need_null(o, path, "clip_qkv", "must be null (zt does not clip q, k, v)")))
        return st;
    return ZT_OK;
}

zt_status zt_llama_check_experts(const zt_llama_config *c, const char *where)
{
    const char *key = zt_llama_is(c, "mixtral") ? "num_local_experts" : "num_experts";
    if (!zt_llama_moe_family(c))
        return c->n_experts ? zt_cfg_bad(where, key, "is for mixtral, qwen2_moe, qwen3_moe and olmoe only") : ZT_OK;
    if (zt_llama_is(c, "qwen2_moe") ? c->shared_expert_size <= 0 : c->shared_expert_size != 0)
        return zt_cfg_bad(where, "shared_expert_intermediate_size", "must be a positive integer, for qwen2_moe only");
    if (c->n_experts < 1 || c->n_experts > 4096) return zt_cfg_bad(where, key, "must be an integer from 1 to 4096");
    if (c->experts_per_tok < 1 || c->experts_per_tok > c->n_experts)
        return zt_cfg_bad(where, "num_experts_per_tok", "must be an integer from 1 to the number of experts");
    if (zt_llama_expert_size(c) <= 0)
        return zt_cfg_bad(where, qwen_moe(c) ? "moe_intermediate_size" : "intermediate_size",
                          "must be a positive integer");
    if (!(c->router_aux_loss_coef >= 0)) return zt_cfg_bad(where, "router_aux_loss_coef", "must be 0 or more");
    if (zt_llama_is(c, "mixtral") && !c->norm_topk_prob)
        return zt_cfg_bad(where, "norm_topk_prob", "must be true for mixtral");
    return ZT_OK;
}

void zt_llama_add_expert_keys(cJSON *o, const zt_llama_config *c)
{
    if (!zt_llama_moe_family(c)) return;
    int mixtral = zt_llama_is(c, "mixtral");
    cJSON_AddNumberToObject(o, mixtral ? "num_local_experts" : "num_experts", c->n_experts);
    cJSON_AddNumberToObject(o, "num_experts_per_tok", c->experts_per_tok);
    if (!mixtral) cJSON_AddBoolToObject(o, "norm_topk_prob", c->norm_topk_prob);
    cJSON_AddBoolToObject(o, "output_router_logits", c->output_router_logits);
    zt_json_add_float(o, "router_aux_loss_coef", c->router_aux_loss_coef);
    if (mixtral) cJSON_AddNumberToObject(o, "router_jitter_noise", 0);
    if (zt_llama_is(c, "qwen2_moe"))
        cJSON_AddNumberToObject(o, "shared_expert_intermediate_size", c->shared_expert_size);
    if (qwen_moe(c)) {
        cJSON_AddNumberToObject(o, "moe_intermediate_size", c->moe_intermediate_size);
        cJSON_AddNumberToObject(o, "decoder_sparse_step", 1);
        cJSON_AddArrayToObject(o, "mlp_only_layers");
    }
    if (zt_llama_is(c, "olmoe")) cJSON_AddNullToObject(o, "clip_qkv");
}
