/* hub: the Hub API's answers. /api/{models,datasets}/{repo}/revision/{rev} gives the commit
 * ("sha"); /api/.../tree/{commit}?recursive=true lists the files: path, size, oid (the git blob
 * sha1) and, for LFS files, lfs.oid (the sha256 of the content) and lfs.size. */
#include <cjson/cJSON.h>
#include <string.h>

#include "hub_internal.h"

zt_status hub_parse_revision(hub_repo *r, const char *json)
{
    cJSON *root = cJSON_Parse(json);
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(root, "sha");
    int ok = cJSON_IsString(sha) && hub_is_hex(sha->valuestring, 40);
    if (ok) strcpy(r->commit, sha->valuestring);
    cJSON_Delete(root);
    if (!ok)
        return zt_fail(ZT_ERUNTIME, "the Hub's answer for '%s' at '%s' has no commit sha", r->repo_id, r->revision);
    return ZT_OK;
}

static long long number(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 9e18 ? (long long)v->valuedouble : -1;
}

static const char *string(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

zt_status hub_parse_tree(hub_repo *r, const char *json)
{
    cJSON *root = cJSON_Parse(json);
    if (!cJSON_IsArray(root)) {
        cJSON_Delete(root);
        return zt_fail(ZT_ERUNTIME, "the Hub's file list for '%s' is not a JSON array", r->repo_id);
    }
    zt_status st = ZT_OK;
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        const char *type = string(e, "type"), *path = string(e, "path"), *oid = string(e, "oid");
        if (type && strcmp(type, "file")) continue; /* directories */
        const cJSON *lfs = cJSON_GetObjectItemCaseSensitive(e, "lfs");
        long long size = number(e, "size");
        if (cJSON_IsObject(lfs)) {
            oid = string(lfs, "oid");
            if (number(lfs, "size") >= 0) size = number(lfs, "size");
        }
        if (!path || !oid) {
            st = zt_fail(ZT_ERUNTIME, "the Hub's file list for '%s' has an entry without path or oid", r->repo_id);
            break;
        }
        if (!strncmp(oid, "sha256:", 7)) oid += 7;
        if ((st = hub_add_file(r, path, size, oid, cJSON_IsObject(lfs)))) break;
    }
    cJSON_Delete(root);
    return st;
}
