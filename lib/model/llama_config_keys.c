/* config.json's keys read by type; each problem names the file and the key. */
#include <math.h>

#include "llama_config_keys.h"

zt_status zt_cfg_bad(const char *path, const char *key, const char *what)
{
    return zt_fail(ZT_EUSER, "'%s': key '%s' %s", path, key, what);
}

zt_status zt_cfg_int(const cJSON *o, const char *path, const char *key, int def, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (def == -2) return zt_cfg_bad(path, key, "is missing");
        *out = def;
        return ZT_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 2147483647.0)
        return zt_cfg_bad(path, key, "must be an integer");
    *out = (int)v->valuedouble;
    return ZT_OK;
}

zt_status zt_cfg_num(const cJSON *o, const char *path, const char *key, double def, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return ZT_OK;
    }
    if (!cJSON_IsNumber(v)) return zt_cfg_bad(path, key, "must be a number");
    *out = v->valuedouble;
    return ZT_OK;
}

zt_status zt_cfg_bool(const cJSON *o, const char *path, const char *key, int def, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return ZT_OK;
    }
    if (!cJSON_IsBool(v)) return zt_cfg_bad(path, key, "must be true or false");
    *out = cJSON_IsTrue(v);
    return ZT_OK;
}

/* an integer id, -1 for none (the range first: converting a double outside int's is undefined) */
static int is_token_id(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble >= -1 && v->valuedouble <= 2147483647.0 &&
           v->valuedouble == floor(v->valuedouble);
}

zt_status zt_cfg_token_id(const cJSON *o, const char *path, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    const char *what = "must be a token id (an integer, -1 for none) or a list of them";
    *out = -1;
    if (!v || cJSON_IsNull(v)) return ZT_OK;
    if (!cJSON_IsArray(v)) {
        if (!is_token_id(v)) return zt_cfg_bad(path, key, what);
        *out = (int)v->valuedouble;
        return ZT_OK;
    }
    for (const cJSON *e = v->child; e; e = e->next)
        if (!is_token_id(e)) return zt_cfg_bad(path, key, what);
    if (v->child) *out = (int)v->child->valuedouble;
    return ZT_OK;
}
