#include "tokens.h"

#include "jsonl.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
            return zt_fail(ZT_EUSER, "%s[%lld] is %s, not an integer", name, (long long)i, zt_json_kind(v));
        double d = v->valuedouble;
        if (d != floor(d)) return zt_fail(ZT_EUSER, "%s[%lld] = %.15g is not an integer", name, (long long)i, d);
        if (is_labels && d == ZT_IGNORE_INDEX) {
            out[i] = ZT_IGNORE_INDEX;
            continue;
        }
        if (d < 0 || d >= vocab_size)
            return zt_fail(ZT_EUSER, "%s[%lld] = %.15g is outside the vocabulary [0, %d)%s", name, (long long)i, d,
                           vocab_size, is_labels ? " and is not -100" : "");
        out[i] = (int32_t)d;
    }
    return ZT_OK;
}

/* Checks one parsed line and appends its example. */
static zt_status add_example(zt_dataset *ds, scratch *s, const cJSON *root, int vocab_size)
{
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(root, "input_ids");
    const cJSON *labels = cJSON_GetObjectItemCaseSensitive(root, "labels");
    if (cJSON_IsNull(labels)) labels = NULL;
    if (!ids) return zt_fail(ZT_EUSER, "missing \"input_ids\"");
    if (!cJSON_IsArray(ids))
        return zt_fail(ZT_EUSER, "\"input_ids\" is %s, not an array of integers", zt_json_kind(ids));
    int64_t n = cJSON_GetArraySize(ids);
    if (n == 0) return zt_fail(ZT_EUSER, "\"input_ids\" is empty");
    if (labels && !cJSON_IsArray(labels))
        return zt_fail(ZT_EUSER, "\"labels\" is %s, not an array of integers", zt_json_kind(labels));
    if (labels && cJSON_GetArraySize(labels) != n)
        return zt_fail(ZT_EUSER, "\"labels\" has %d entries but \"input_ids\" has %lld", cJSON_GetArraySize(labels),
                       (long long)n);
    zt_status st;
    if ((st = scratch_reserve(s, n))) return st;
    if ((st = read_ints(ids, "input_ids", s->ids, vocab_size, 0))) return st;
    if (labels && (st = read_ints(labels, "labels", s->labels, vocab_size, 1))) return st;
    return zt_dataset_append(ds, s->ids, labels ? s->labels : NULL, n);
}

typedef struct tokens_ctx {
    zt_dataset *ds;
    scratch s;
    int vocab_size;
} tokens_ctx;

static zt_status one_line(void *ctx, cJSON *root)
{
    tokens_ctx *c = ctx;
    return add_example(c->ds, &c->s, root, c->vocab_size);
}

zt_status zt_tokens_load(zt_dataset *ds, char *const *paths, int npaths, int vocab_size, int skip_bad, int64_t *skipped)
{
    ZT_ASSERT(vocab_size > 0);
    memset(ds, 0, sizeof *ds);
    tokens_ctx c = {.ds = ds, .vocab_size = vocab_size};
    zt_status st = zt_jsonl_load(paths, npaths, skip_bad, one_line, &c, skipped);
    free(c.s.ids);
    free(c.s.labels);
    if (!st && ds->n_examples == 0) {
        /* every line gives an example or an error, so without skipped lines the files are empty */
        if (npaths == 1 && !*skipped) st = zt_fail(ZT_EUSER, "'%s': no examples (the file is empty)", paths[0]);
        else st = zt_jsonl_no_examples(paths, npaths, *skipped);
    }
    if (st) zt_dataset_free(ds);
    return st;
}
