/* tokenizer_config.json and special_tokens_map.json: the special tokens,
 * add_bos_token / add_eos_token, and added tokens that only tokenizer_config.json lists
 * (added_tokens_decoder, common next to a tokenizer.model). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "tokenizers/tok_internal.h"
#include "tokenizers/tokenizer.h"

/* *out = the parsed file, or NULL when it does not exist. */
static zt_status load_json(const char *dir, const char *name, char *path, size_t size, cJSON **out)
{
    *out = NULL;
    zt_status st = zt_path_join(path, size, dir, name);
    if (st || !zt_path_exists(path)) return st;
    char *text;
    size_t len;
    if ((st = zt_read_file(path, &text, &len))) return st;
    *out = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return zt_fail(ZT_EUSER, "'%s': not a JSON object", path);
    }
    return ZT_OK;
}

static int json_flag(const cJSON *obj, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, name));
}

/* "added_tokens_decoder": {"32000": {"content": "<|im_start|>", "special": true, ...}} */
static zt_status read_added_decoder(zt_tokenizer *tok, const cJSON *dec, const char *path)
{
    int32_t model_vocab = tok->ops->vocab_size(tok->model);
    for (const cJSON *e = dec ? dec->child : NULL; e; e = e->next) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        char *end;
        errno = 0;
        long id = strtol(e->string, &end, 10);
        if (!cJSON_IsString(content) || !content->valuestring[0] || *end || end == e->string || errno || id < 0 ||
            id >= (1L << 26))
            return zt_fail(ZT_EUSER, "'%s': added_tokens_decoder['%s'] is not an id with a non-empty \"content\"", path,
                           e->string);
        const char *piece = content->valuestring;
        size_t len = strlen(piece);
        if (zt_added_by_content(&tok->added, piece, len)) continue; /* tokenizer.json has it */
        int32_t known = tok->ops->piece_to_id(tok->model, piece, len);
        if (id < model_vocab && known != id) {
            zt_log_warn("'%s': added_tokens_decoder['%s'] = '%s' differs from the model's piece; ignored", path,
                        e->string, piece);
            continue;
        }
        unsigned flags =
            (json_flag(e, "special") ? ZT_ADDED_SPECIAL : 0) | (json_flag(e, "normalized") ? ZT_ADDED_NORMALIZED : 0) |
            (json_flag(e, "lstrip") ? ZT_ADDED_LSTRIP : 0) | (json_flag(e, "rstrip") ? ZT_ADDED_RSTRIP : 0) |
            (json_flag(e, "single_word") ? ZT_ADDED_SINGLE_WORD : 0);
        zt_status st = zt_added_put(&tok->added, piece, len, (int32_t)id, flags);
        if (st) return st;
    }
    return ZT_OK;
}

/* bos_token and friends: a string, {"content": ...}, or null for none.
 * Returns 0 when the key is absent (the model's id stays). */
static int special_id(const zt_tokenizer *tok, const cJSON *v, const char *key, const char *path, int32_t *id)
{
    if (!v) return 0;
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (!cJSON_IsString(v)) {
        *id = -1;
        return 1;
    }
    *id = zt_tokenizer_piece_to_id(tok, v->valuestring);
    if (*id < 0) zt_log_warn("'%s': %s '%s' is not in the vocabulary; there is none", path, key, v->valuestring);
    return 1;
}

/* one side of the template: the token alone when on (and known), else nothing */
static zt_affix alone(int on, int32_t id)
{
    zt_affix side = {{id}, on && id >= 0};
    return side;
}

zt_status zt_tokenizer_read_config(zt_tokenizer *tok, const char *dir)
{
    char cfg_path[4096], map_path[4096];
    cJSON *cfg, *map = NULL;
    zt_status st = load_json(dir, "tokenizer_config.json", cfg_path, sizeof cfg_path, &cfg);
    if (!st) st = load_json(dir, "special_tokens_map.json", map_path, sizeof map_path, &map);
    if (!st && cfg)
        st = read_added_decoder(tok, cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder"), cfg_path);
    if (!st) {
        const char *keys[] = {"bos_token", "eos_token", "pad_token", "unk_token"};
        int32_t *ids[] = {&tok->bos, &tok->eos, &tok->pad, &tok->unk};
        for (int i = 0; i < 4; i++)
            if (!special_id(tok, cJSON_GetObjectItemCaseSensitive(cfg, keys[i]), keys[i], cfg_path, ids[i]))
                special_id(tok, cJSON_GetObjectItemCaseSensitive(map, keys[i]), keys[i], map_path, ids[i]);
        /* as transformers' Llama and Gemma tokenizers rebuild the template from them */
        const cJSON *add_bos = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
        const cJSON *add_eos = cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token");
        if (cJSON_IsBool(add_bos)) tok->before = alone(cJSON_IsTrue(add_bos), tok->bos);
        if (cJSON_IsBool(add_eos)) tok->after = alone(cJSON_IsTrue(add_eos), tok->eos);
    }
    cJSON_Delete(cfg);
    cJSON_Delete(map);
    return st;
}
