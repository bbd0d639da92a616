/* data/dataset: the in-memory examples every data format produces and the
 * packer consumes: token ids and their labels in CSR form (example i is the
 * token range [offsets[i], offsets[i+1])). Labels are aligned with ids as in
 * Hugging Face (unshifted); -100 means no loss on that token.
 *
 *     zt_dataset ds = {0};                       // an empty dataset
 *     if ((st = zt_dataset_append(&ds, ids, labels, n))) return st;
 *     for (int64_t i = 0; i < ds.n_examples; i++) use(zt_dataset_len(&ds, i));
 *     zt_dataset_free(&ds);
 */
#ifndef ZT_DATA_DATASET_H
#define ZT_DATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

#define ZT_IGNORE_INDEX (-100) /* label of a token that carries no loss */

typedef struct zt_dataset {
    int64_t n_examples;
    int64_t *offsets; /* n_examples + 1 token offsets (NULL while empty) */
    int32_t *ids;
    int32_t *labels;
    int64_t cap_examples, cap_tokens; /* room allocated, for amortized appends */
    void *map;                        /* when the arrays point into a mapped cache file */
    size_t map_len;                   /* bytes */
} zt_dataset;

/* Appends one example of n >= 1 tokens; labels NULL means labels = ids. Not for a mapped dataset. */
zt_status zt_dataset_append(zt_dataset *ds, const int32_t *ids, const int32_t *labels, int64_t n);
void zt_dataset_free(zt_dataset *ds);

static inline int64_t zt_dataset_len(const zt_dataset *ds, int64_t i) { return ds->offsets[i + 1] - ds->offsets[i]; }
static inline int64_t zt_dataset_tokens(const zt_dataset *ds)
{
    return ds->n_examples ? ds->offsets[ds->n_examples] : 0;
}

/* Holds out round(frac * n) groups of `group` consecutive examples (1, or 2 for
 * preference pairs), chosen by a permutation seeded with seed, as valid
 * (data.valid_split); the rest, in file order, become train. Both are fresh
 * datasets; ZT_EUSER when either would be empty. */
zt_status zt_dataset_split(const zt_dataset *all, double frac, uint64_t seed, int group, zt_dataset *train,
                           zt_dataset *valid);

#endif
