/* The image-text checkpoints whose language model zt trains (*ForConditionalGeneration). Gemma 3's
 * gemma3, Mistral Small 3.1's mistral3 and LLaVA's llava keep it under language_model., its config in
 * text_config, read as that family's config.json: transformers builds it with the family's *Config,
 * so the keys it leaves out take that class's defaults (transformers 4.51.3's), required ones
 * included (gemma-3-4b-it's text_config names no vocab_size, llava-1.5-7b's no hidden_size), and
 * nothing outside text_config changes the language model. Qwen2-VL's qwen2_vl and Qwen2.5-VL's
 * qwen2_5_vl keep a qwen2 model's keys at the top and its tensors where a qwen2 model has them,
 * beside visual.*; their rope_scaling is M-RoPE, whose three rows of positions (time, height,
 * width) are the same for text, which makes it the plain rotary embedding. The vision tower's
 * config and tensors are carried through every save (llama_config_save.c, llama_io.c). */
#include <stdio.h>

#include "llama_config_keys.h"

/* model_type → text_config's model_type where it names none; the language model's own at the top */
static const char *const image_text_types[][2] = {{"gemma3", "gemma3_text"},
                                                  {"mistral3", "mistral"},
                                                  {"llava", "llama"},
                                                  {"qwen2_vl", "qwen2"},
                                                  {"qwen2_5_vl", "qwen2"}};

/* What a text family's *Config defaults a key to where zt requires the key or defaults it otherwise */
static const struct {
    const char *text_type, *key;
    int v;
} text_defaults[] = {
    {"gemma3_text", "vocab_size", 262208},
    {"gemma3_text", "hidden_size", 2304},
    {"gemma3_text", "intermediate_size", 9216},
    {"gemma3_text", "num_hidden_layers", 26},
    {"gemma3_text", "num_attention_heads", 8},
    {"gemma3_text", "num_key_value_heads", 4},
    {"gemma3_text", "bos_token_id", 2},
    {"gemma3_text", "eos_token_id", 1},
    {"gemma3_text", "pad_token_id", 0},
    {"mistral", "vocab_size", 32000},
    {"mistral", "hidden_size", 4096},
    {"mistral", "intermediate_size", 14336},
    {"mistral", "num_hidden_layers", 32},
    {"mistral", "num_attention_heads", 32},
    {"mistral", "num_key_value_heads", 8},
    {"mistral", "max_position_embeddings", 131072},
    {"mistral", "sliding_window", 4096},
    {"mistral", "bos_token_id", 1},
    {"mistral", "eos_token_id", 2},
    {"llama", "vocab_size", 32000},
    {"llama", "hidden_size", 4096},
    {"llama", "intermediate_size", 11008},
    {"llama", "num_hidden_layers", 32},
    {"llama", "num_attention_heads", 32},
    {"llama", "bos_token_id", 1},
    {"llama", "eos_token_id", 2},
};

const char *zt_llama_image_text_type(const char *model_type)
{
    for (size_t i = 0; i < sizeof image_text_types / sizeof *image_text_types; i++)
        if (!strcmp(model_type, image_text_types[i][0])) return image_text_types[i][1];
    return NULL;
}

/* Qwen2-VL's: the config a qwen2 at the top, its M-RoPE (rope_scaling "mrope", or "default" with
 * an mrope_section, as transformers writes it back) left out */
static zt_status parse_top_level(zt_llama_config *c, const cJSON *o, const char *path, const char *type)
{
    cJSON *t = cJSON_Duplicate(o, 1);
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(t, "rope_scaling");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!kind) kind = cJSON_GetObjectItemCaseSensitive(rs, "type");
    int mrope = cJSON_IsString(kind) && (!strcmp(kind->valuestring, "mrope") ||
                                         (!strcmp(kind->valuestring, "default") &&
                                          cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(rs, "mrope_section"))));
    if (mrope) cJSON_DeleteItemFromObjectCaseSensitive(t, "rope_scaling");
    cJSON_DeleteItemFromObjectCaseSensitive(t, "model_type");
    int ok = t && cJSON_AddStringToObject(t, "model_type", type);
    zt_status st = ok ? zt_llama_parse_config(c, t, path) : zt_fail(ZT_ENOMEM, "out of memory reading '%s'", path);
    cJSON_Delete(t);
    return st;
}

zt_status zt_llama_parse_image_text(zt_llama_config *c, const cJSON *o, const char *path)
{
    const char *outer = cJSON_GetObjectItemCaseSensitive(o, "model_type")->valuestring;
    if (!strncmp(outer, "qwen2", 5)) {
        zt_status st = parse_top_level(c, o, path, zt_llama_image_text_type(outer));
        if (!st) c->image_text = 1; /* its tensors where a qwen2 model has them: no text_prefix */
        return st;
    }
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(o, "text_config");
    if (!cJSON_IsObject(text))
        return zt_cfg_bad(path, "text_config", "must be an object (the language model's config)");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(text, "model_type");
    const char *type = cJSON_IsString(mt) ? mt->valuestring : zt_llama_image_text_type(outer);
    if ((mt && !cJSON_IsString(mt)) || !zt_llama_arch_prefix(type) || zt_llama_image_text_type(type))
        return zt_cfg_bad(path, "text_config.model_type", "must name a language model zt trains");
    cJSON *t = cJSON_Duplicate(text, 1);
    int ok = t && (mt || cJSON_AddStringToObject(t, "model_type", type));
    for (size_t i = 0; ok && i < sizeof text_defaults / sizeof *text_defaults; i++)
        if (!strcmp(type, text_defaults[i].text_type) && !cJSON_GetObjectItemCaseSensitive(t, text_defaults[i].key))
            ok = cJSON_AddNumberToObject(t, text_defaults[i].key, text_defaults[i].v) != NULL;
    char where[4096 + 32];
    snprintf(where, sizeof where, "%s (text_config)", path);
    zt_status st = ok ? zt_llama_parse_config(c, t, where) : zt_fail(ZT_ENOMEM, "out of memory reading '%s'", path);
    cJSON_Delete(t);
    if (!st) c->image_text = 1, snprintf(c->text_prefix, sizeof c->text_prefix, "language_model.");
    return st;
}
