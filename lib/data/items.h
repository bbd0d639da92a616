/* data/items: items (preference pairs, prompts) served whole, in a deterministic,
 * resumable order, for zt rlhf. The order follows the packer's (batch.h): epoch e
 * permutes the items with the stream (seed, e); the epoch's sequence is served world * n
 * items at a time, rank r taking items r, r + world, ... of each group; the last group
 * of an epoch is completed with -1 (no item); then the next epoch begins.
 *
 *     zt_items s;
 *     zt_items_init(&s, n_pairs, shuffle, seed, rank, world);
 *     int64_t idx[4];
 *     zt_items_next(&s, idx, 4);           // item numbers, -1 for none
 */
#ifndef ZT_DATA_ITEMS_H
#define ZT_DATA_ITEMS_H

#include <stdint.h>

#include "batch.h"
#include "lib/core/status.h"

typedef struct zt_items {
    int64_t n_items, *perm;
    int shuffle, rank, world;
    uint64_t seed;
    zt_loader_state state; /* the epoch, and the next position in its sequence */
} zt_items;

zt_status zt_items_init(zt_items *s, int64_t n_items, int shuffle, uint64_t seed, int rank, int world);
void zt_items_free(zt_items *s);
/* This rank's next n items (every rank calls it with the same n). */
void zt_items_next(zt_items *s, int64_t *items, int n);
/* Groups of world * n items that make one epoch. */
int64_t zt_items_groups_per_epoch(const zt_items *s, int n);
zt_loader_state zt_items_get_state(const zt_items *s);
zt_status zt_items_set_state(zt_items *s, zt_loader_state st);

#endif
