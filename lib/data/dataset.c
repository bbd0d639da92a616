#include "dataset.h"

#include "lib/core/rng.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
    ZT_ASSERT(n >= 1 && !ds->map);
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
    if (ds->map) {
        munmap(ds->map, ds->map_len);
        memset(ds, 0, sizeof *ds);
        return;
    }
    free(ds->offsets);
    free(ds->ids);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

zt_status zt_dataset_split(const zt_dataset *all, double frac, uint64_t seed, int group, zt_dataset *train,
                           zt_dataset *valid)
{
    int64_t n = all->n_examples / group, nv = (int64_t)(frac * n + 0.5);
    if (nv < 1 || nv >= n)
        return zt_fail(ZT_EUSER, "data.valid_split = %g of %lld examples leaves an empty split", frac, (long long)n);
    char *held = calloc((size_t)n, 1);
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    if (!held || !perm) {
        free(held);
        free(perm);
        return zt_fail(ZT_ENOMEM, "out of memory splitting the data");
    }
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    zt_rng_shuffle(perm, n, seed, 0x76616c6964ull); /* its own stream: independent of the epoch order */
    for (int64_t i = 0; i < nv; i++) held[perm[i]] = 1;
    free(perm);
    zt_status st = ZT_OK;
    *train = (zt_dataset){0};
    *valid = (zt_dataset){0};
    for (int64_t i = 0; i < n * group && !st; i++) {
        const int32_t *labels = all->labels ? all->labels + all->offsets[i] : NULL;
        st = zt_dataset_append(held[i / group] ? valid : train, all->ids + all->offsets[i], labels,
                               zt_dataset_len(all, i));
    }
    free(held);
    if (st) {
        zt_dataset_free(train);
        zt_dataset_free(valid);
    }
    return st;
}
