#include "dataset.h"

#include <stdlib.h>
#include <string.h>

/* Grows *p to hold at least need elements of size bytes, doubling. */
static zt_status grow(void **p, int64_t *cap, int64_t need, size_t size)
{
    if (need <= *cap) return ZT_OK;
    int64_t n = *cap ? *cap : 1024;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * size);
    if (!q) return zt_fail(ZT_ENOMEM, "out of memory growing the dataset to %lld entries", (long long)n);
    *p = q;
    *cap = n;
    return ZT_OK;
}

zt_status zt_dataset_append(zt_dataset *ds, const int32_t *ids, const int32_t *labels, int64_t n)
{
    ZT_ASSERT(n >= 1);
    int64_t tokens = zt_dataset_tokens(ds);
    int64_t cap_ex = ds->cap_examples, cap_ids = ds->cap_tokens, cap_labels = ds->cap_tokens;
    zt_status st;
    if ((st = grow((void **)&ds->offsets, &cap_ex, ds->n_examples + 2, sizeof *ds->offsets))) return st;
    ds->cap_examples = cap_ex;
    if ((st = grow((void **)&ds->ids, &cap_ids, tokens + n, sizeof *ds->ids))) return st;
    /* Both token arrays grow from the same capacity to the same size; if labels
     * fail, ids merely keep spare room and cap_tokens stays the smaller value. */
    if ((st = grow((void **)&ds->labels, &cap_labels, tokens + n, sizeof *ds->labels))) return st;
    ds->cap_tokens = cap_ids;
    memcpy(ds->ids + tokens, ids, (size_t)n * sizeof *ids);
    memcpy(ds->labels + tokens, labels ? labels : ids, (size_t)n * sizeof *ids);
    ds->offsets[0] = 0;
    ds->offsets[ds->n_examples + 1] = tokens + n;
    ds->n_examples++;
    return ZT_OK;
}

void zt_dataset_free(zt_dataset *ds)
{
    free(ds->offsets);
    free(ds->ids);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}
