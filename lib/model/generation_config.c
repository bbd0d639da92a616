#include "generation_config.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

#include "lib/core/fileio.h"
#include "lib/core/json.h"

/* config.json's item for key (a number or a list), else cfg's id when set */
static void add_id(cJSON *gen, const cJSON *config, const char *key, int id)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
    if (cJSON_IsNumber(v) || cJSON_IsArray(v)) cJSON_AddItemToObject(gen, key, cJSON_Duplicate(v, 1));
    else if (id >= 0) cJSON_AddNumberToObject(gen, key, id);
}

static cJSON *made_generation_config(const zt_llama_config *cfg)
{
    cJSON *gen = cJSON_CreateObject(), *config = NULL;
    if (cfg->path[0] && zt_path_exists(cfg->path) && zt_json_read(cfg->path, &config)) config = NULL;
    add_id(gen, config, "bos_token_id", cfg->bos_token_id);
    add_id(gen, config, "eos_token_id", cfg->eos_token_id);
    cJSON_Delete(config);
    return gen;
}

static int has_id(const cJSON *eos, int32_t id)
{
    if (cJSON_IsNumber(eos)) return eos->valuedouble == id;
    const cJSON *e;
    cJSON_ArrayForEach(e, eos) if (cJSON_IsNumber(e) && e->valuedouble == id) return 1;
    return 0;
}

/* eos_token_id becomes a list when an id is added to a single one; 0 when id was there */
static int append_eos(cJSON *gen, int32_t id)
{
    cJSON *eos = cJSON_GetObjectItemCaseSensitive(gen, "eos_token_id");
    if (has_id(eos, id)) return 0;
    if (!cJSON_IsArray(eos)) {
        cJSON *list = cJSON_CreateArray();
        if (cJSON_IsNumber(eos)) cJSON_AddItemToArray(list, cJSON_Duplicate(eos, 0));
        cJSON_DeleteItemFromObjectCaseSensitive(gen, "eos_token_id");
        cJSON_AddItemToObject(gen, "eos_token_id", list);
        eos = list;
    }
    cJSON_AddItemToArray(eos, cJSON_CreateNumber(id));
    return 1;
}

zt_status zt_generation_config_write(const char *model_dir, const zt_llama_config *cfg, const int32_t *end, int n_end,
                                     const char *out_path)
{
    char src[4096], *text = NULL;
    size_t len;
    cJSON *gen = NULL;
    int added = 0;
    zt_status st = zt_path_join(src, sizeof src, model_dir, "generation_config.json");
    if (!st && zt_path_exists(src) && !(st = zt_read_file(src, &text, &len)) &&
        !cJSON_IsObject(gen = zt_json_parse(text, len)))
        st = zt_fail(ZT_EUSER, "'%s': not a JSON object", src);
    if (!st && !gen) gen = made_generation_config(cfg);
    for (int i = 0; !st && i < n_end; i++) added += end[i] >= 0 && append_eos(gen, end[i]);
    /* a source file with nothing to add is copied byte for byte */
    if (!st) st = text && !added ? zt_write_file_atomic(out_path, text, len) : zt_json_write(out_path, gen);
    cJSON_Delete(gen);
    free(text);
    return st;
}
