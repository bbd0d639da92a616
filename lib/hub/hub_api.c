/* hub: the Hub API's answers. /api/{models,datasets}/{repo}/revision/{rev} gives the commit
 * ("sha"); /api/.../tree/{commit}?recursive=true lists the files: path, size, oid (the git blob
 * sha1) and, for LFS files, lfs.oid (the sha256 of the content) and lfs.size. Of any answer's
 * headers zt reads X-Repo-Commit, X-Linked-Etag / ETag, X-Linked-Size, X-Error-Code /
 * X-Error-Message, Link (the next page of a listing) and Content-Range. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

static void copy_value(char *dst, size_t n, const char *v, size_t len)
{
    while (len && isspace((unsigned char)*v)) v++, len--;
    while (len && isspace((unsigned char)v[len - 1])) len--;
    snprintf(dst, n, "%.*s", (int)len, v);
}

static void parse_link_next(hub_headers *h, const char *v, size_t len)
{
    char buf[4096];
    copy_value(buf, sizeof buf, v, len);
    for (char *part = buf; part && *part;) {
        char *next = strchr(part, ','), *lt = strchr(part, '<'), *gt = lt ? strchr(lt, '>') : NULL;
        if (next) *next++ = 0;
        if (lt && gt && strstr(gt, "rel=\"next\"")) {
            snprintf(h->link_next, sizeof h->link_next, "%.*s", (int)(gt - lt - 1), lt + 1);
            return;
        }
        part = next;
    }
}

void hub_parse_header(hub_headers *h, const char *line, size_t n)
{
    if (n >= 5 && !strncmp(line, "HTTP/", 5)) {
        *h = (hub_headers){.linked_size = -1, .range_start = -1};
        return;
    }
    const char *colon = memchr(line, ':', n);
    if (!colon) return;
    size_t klen = (size_t)(colon - line), vlen = n - klen - 1;
    const char *v = colon + 1;
    char tmp[256];
#define IS(name) (klen == strlen(name) && !strncasecmp(line, name, klen))
    if (IS("X-Repo-Commit")) copy_value(h->repo_commit, sizeof h->repo_commit, v, vlen);
    else if (IS("X-Error-Code")) copy_value(h->error_code, sizeof h->error_code, v, vlen);
    else if (IS("X-Error-Message")) copy_value(h->error_message, sizeof h->error_message, v, vlen);
    else if (IS("Link")) parse_link_next(h, v, vlen);
    else if (IS("X-Linked-Size")) copy_value(tmp, sizeof tmp, v, vlen), h->linked_size = strtoll(tmp, NULL, 10);
    else if (IS("X-Linked-Etag") || IS("ETag")) {
        copy_value(tmp, sizeof tmp, v, vlen);
        hub_normalize_etag(tmp, IS("ETag") ? h->etag : h->linked_etag, sizeof h->etag);
    } else if (IS("Content-Range")) {
        copy_value(tmp, sizeof tmp, v, vlen);
        long long start;
        if (sscanf(tmp, "bytes %lld-", &start) == 1) h->range_start = start;
    }
#undef IS
    for (char *c = h->error_message; *c; c++)
        if ((unsigned char)*c < 0x20) *c = ' ';
}
