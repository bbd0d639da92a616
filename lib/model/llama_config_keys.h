/* model/llama_config_keys: what the llama_config*.c files share: config.json's keys read by
 * type (each problem a ZT_EUSER error naming the file and the key), the model_type table, and
 * each family's defaults and keys. Internal to lib/model. */
#ifndef ZT_MODEL_LLAMA_CONFIG_KEYS_H
#define ZT_MODEL_LLAMA_CONFIG_KEYS_H

#include <cjson/cJSON.h>
#include <string.h>

#include "llama.h"

static inline int zt_llama_is(const zt_llama_config *c, const char *model_type)
{
    return !strcmp(c->model_type, model_type);
}

/* "'path': key 'key' what" */
zt_status zt_cfg_bad(const char *path, const char *key, const char *what);
/* o[key] as an integer; missing or null → def (def -2: an error, the key is required) */
zt_status zt_cfg_int(const cJSON *o, const char *path, const char *key, int def, int *out);
zt_status zt_cfg_num(const cJSON *o, const char *path, const char *key, double def, double *out);
zt_status zt_cfg_bool(const cJSON *o, const char *path, const char *key, int def, int *out);
/* a token id or a list of them (the first is used); missing, null or [] → -1 */
zt_status zt_cfg_token_id(const cJSON *o, const char *path, const char *key, int *out);

/* config.json's object o read into c (zt_llama_config_load's work; path names the file in errors) */
zt_status zt_llama_parse_config(zt_llama_config *c, const cJSON *o, const char *path);
/* An image-text model's (llama_config_image_text.c): for its model_type ("gemma3"), the model_type
 * of its text_config where that names none ("gemma3_text"), NULL for any other model_type; and its
 * language model's config read from text_config into c. */
const char *zt_llama_image_text_type(const char *model_type);
zt_status zt_llama_parse_image_text(zt_llama_config *c, const cJSON *o, const char *path);

/* model_type → the architecture's class-name prefix ("Qwen3"), NULL when zt has no such family */
const char *zt_llama_arch_prefix(const char *model_type);
/* The supported model_types, as "a, b, ... or z" (and: the joining word) */
const char *zt_llama_model_types(void);

/* What the family's *Config defaults to on c's sizes (c->model_type set, the rest llama's). */
void zt_llama_family_defaults(zt_llama_config *c);
/* attention_bias as c's family's config.json means it: GLM's biases on q, k and v alone, the
 * other families' on o too (Qwen2 and Qwen2-MoE read no such key) */
void zt_llama_set_attention_bias(zt_llama_config *c, int on);
/* rope_scaling, and the keys only some families have (c holds the common keys). */
zt_status zt_llama_parse_rope_scaling(zt_llama_config *c, const cJSON *o, const char *path);
zt_status zt_llama_parse_family(zt_llama_config *c, const cJSON *o, const char *path);
/* Mixtures of experts (llama_config_experts.c): whether c's family is one, its *Config's
 * defaults (zt_llama_family_defaults calls it), its keys read, checked (none in a dense family,
 * sizes and counts in range) and written. */
int zt_llama_moe_family(const zt_llama_config *c);
void zt_llama_moe_defaults(zt_llama_config *c);
zt_status zt_llama_parse_experts(zt_llama_config *c, const cJSON *o, const char *path);
zt_status zt_llama_check_experts(const zt_llama_config *c, const char *where);
void zt_llama_add_expert_keys(cJSON *o, const zt_llama_config *c);
/* The family's own keys and rope_scaling into a config.json being written. */
void zt_llama_add_family_keys(cJSON *o, const zt_llama_config *c);

#endif
