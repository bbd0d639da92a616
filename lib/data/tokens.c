#include "tokens.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *json_kind(const cJSON *v)
{
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

/* Line-sized scratch for one example's ids and labels. */
typedef struct scratch {
    int32_t *ids, *labels;
    int64_t cap;
} scratch;

static zt_status scratch_reserve(scratch *s, int64_t n)
{
    if (n <= s->cap) return ZT_OK;
    int32_t *ids = realloc(s->ids, (size_t)n * sizeof *ids);
    if (ids) s->ids = ids;
    int32_t *labels = ids ? realloc(s->labels, (size_t)n * sizeof *labels) : NULL;
    if (!labels) return zt_fail(ZT_ENOMEM, "out of memory reading an example of %lld tokens", (long long)n);
    s->labels = labels;
    s->cap = n;
    return ZT_OK;
}

/* Converts a JSON array of token numbers into out[]; labels may also be -100. */
static zt_status read_ints(const cJSON *arr, const char *name, int32_t *out, int vocab_size, int is_labels)
{
    int64_t i = 0;
    for (const cJSON *v = arr->child; v; v = v->next, i++) {
        if (!cJSON_IsNumber(v))
            return zt_fail(ZT_EUSER, "%s[%lld] is %s, not an integer", name, (long long)i, json_kind(v));
        double d = v->valuedouble;
        if (d != floor(d)) return zt_fail(ZT_EUSER, "%s[%lld] = %.15g is not an integer", name, (long long)i, d);
        if (is_labels && d == ZT_IGNORE_INDEX) {
            out[i] = ZT_IGNORE_INDEX;
            continue;
        }
        if (d < 0 || d >= vocab_size)
            return zt_fail(ZT_EUSER, "%s[%lld] = %.15g is outside the vocabulary [0, %d)%s", name, (long long)i,
                           d, vocab_size, is_labels ? " and is not -100" : "");
        out[i] = (int32_t)d;
    }
    return ZT_OK;
}

/* Checks one parsed line and appends its example. */
static zt_status add_example(zt_dataset *ds, scratch *s, const cJSON *root, int vocab_size)
{
    if (!cJSON_IsObject(root)) return zt_fail(ZT_EUSER, "the line is %s, not a JSON object", json_kind(root));
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(root, "input_ids");
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(root, "labels");
    if (cJSON_IsNull(labels)) labels = NULL;
    if (!ids) return zt_fail(ZT_EUSER, "missing \"input_ids\"");
    if (!cJSON_IsArray(ids))
        return zt_fail(ZT_EUSER, "\"input_ids\" is %s, not an array of integers", json_kind(ids));
    int64_t n = cJSON_GetArraySize(ids);
    if (n == 0) return zt_fail(ZT_EUSER, "\"input_ids\" is empty");
    if (labels && !cJSON_IsArray(labels))
        return zt_fail(ZT_EUSER, "\"labels\" is %s, not an array of integers", json_kind(labels));
    if (labels && cJSON_GetArraySize(labels) != n)
        return zt_fail(ZT_EUSER, "\"labels\" has %d entries but \"input_ids\" has %lld", cJSON_GetArraySize(labels),
                       (long long)n);
    zt_status st;
    if ((st = scratch_reserve(s, n))) return st;
    if ((st = read_ints(ids, "input_ids", s->ids, vocab_size, 0))) return st;
    if (labels && (st = read_ints(labels, "labels", s->labels, vocab_size, 1))) return st;
    return zt_dataset_append(ds, s->ids, labels ? s->labels : NULL, n);
}

/* Parses one non-blank line (NUL-terminated, without its newline). */
static zt_status parse_line(zt_dataset *ds, scratch *s, const char *line, size_t len, int vocab_size)
{
    if (strlen(line) != len) return zt_fail(ZT_EUSER, "not JSON: the line contains a NUL byte");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(line, &end, 1);
    if (!root) return zt_fail(ZT_EUSER, "not JSON (parse error at column %td)", end ? end - line + 1 : 1);
    zt_status st = add_example(ds, s, root, vocab_size);
    cJSON_Delete(root);
    return st;
}

static int is_blank(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    return *p == 0;
}

static zt_status load_file(zt_dataset *ds, scratch *s, const char *path, int vocab_size)
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
        if ((st = parse_line(ds, s, p, (size_t)len, vocab_size))) {
            st = zt_fail_context(st, "%s:%ld", path, lineno);
            break;
        }
    }
    if (!st && ferror(f)) st = zt_fail(ZT_EIO, "'%s': read error after line %ld: %s", path, lineno, strerror(errno));
    free(line);
    fclose(f);
    return st;
}

zt_status zt_tokens_load(zt_dataset *ds, char *const *paths, int npaths, int vocab_size)
{
    ZT_ASSERT(vocab_size > 0);
    memset(ds, 0, sizeof *ds);
    scratch s = {0};
    zt_status st = ZT_OK;
    for (int i = 0; i < npaths && !st; i++) st = load_file(ds, &s, paths[i], vocab_size);
    free(s.ids);
    free(s.labels);
    if (!st && ds->n_examples == 0) {
        if (npaths == 0) st = zt_fail(ZT_EUSER, "no data files given");
        else if (npaths == 1) st = zt_fail(ZT_EUSER, "'%s': no examples (the file is empty)", paths[0]);
        else st = zt_fail(ZT_EUSER, "no examples in the %d data files (all are empty)", npaths);
    }
    if (st) zt_dataset_free(ds);
    return st;
}
