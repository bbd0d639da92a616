#include "jsonl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/core/log.h"

const char *zt_json_kind(const cJSON *v)
{
    if (!v) return "missing";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

/* Parses one non-blank line (NUL-terminated, without its newline) and hands it on. */
static zt_status parse_line(const char *line, size_t len, zt_jsonl_fn fn, void *ctx)
{
    if (strlen(line) != len) return zt_fail(ZT_EUSER, "not JSON: the line contains a NUL byte");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(line, &end, 1);
    if (!root) return zt_fail(ZT_EUSER, "not JSON (parse error at column %td)", end ? end - line + 1 : 1);
    zt_status st = cJSON_IsObject(root) ? fn(ctx, root)
                                        : zt_fail(ZT_EUSER, "the line is %s, not a JSON object", zt_json_kind(root));
    cJSON_Delete(root);
    return st;
}

static int is_blank(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    return *p == 0;
}

static zt_status load_file(const char *path, int skip_bad, zt_jsonl_fn fn, void *ctx, int64_t *skipped)
{
    FILE *f = fopen(path, "rb");
    if (!f) return zt_fail(ZT_EUSER, "'%s': cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return zt_fail(ZT_EUSER, "'%s': is a directory, not a JSONL file", path);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    zt_status st = ZT_OK;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        char *p = line;
        if (lineno == 1 && len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) { /* UTF-8 byte order mark */
            p += 3;
            len -= 3;
        }
        while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r')) p[--len] = 0;
        if (is_blank(p)) continue;
        if ((st = parse_line(p, (size_t)len, fn, ctx))) {
            st = zt_fail_context(st, "%s:%ld", path, lineno);
            if (st != ZT_EUSER || !skip_bad) break;
            if (*skipped < 10) zt_log_warn("skipping a bad line: %s", zt_errmsg());
            ++*skipped;
            st = ZT_OK;
        }
    }
    if (!st && ferror(f)) st = zt_fail(ZT_EIO, "'%s': read error after line %ld: %s", path, lineno, strerror(errno));
    free(line);
    fclose(f);
    return st;
}

zt_status zt_jsonl_load(char *const *paths, int npaths, int skip_bad, zt_jsonl_fn fn, void *ctx, int64_t *skipped)
{
    *skipped = 0;
    if (npaths == 0) return zt_fail(ZT_EUSER, "no data files given");
    zt_status st = ZT_OK;
    for (int i = 0; i < npaths && !st; i++) st = load_file(paths[i], skip_bad, fn, ctx, skipped);
    return st;
}
