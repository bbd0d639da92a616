/* The item order of zt rlhf (items.h). */
#include <stdlib.h>

#include "lib/core/rng.h"
#include "items.h"

static void plan_epoch(zt_items *s)
{
    for (int64_t i = 0; i < s->n_items; i++) s->perm[i] = i;
    if (s->shuffle) zt_rng_shuffle(s->perm, s->n_items, s->seed, (uint64_t)s->state.epoch);
}

zt_status zt_items_init(zt_items *s, int64_t n_items, int shuffle, uint64_t seed, int rank, int world)
{
    *s = (zt_items){.n_items = n_items, .shuffle = shuffle, .seed = seed, .rank = rank, .world = world};
    if (n_items < 1) return zt_fail(ZT_EUSER, "the data holds no items");
    s->perm = malloc((size_t)n_items * sizeof *s->perm);
    if (!s->perm) return zt_fail(ZT_ENOMEM, "out of memory for the data order");
    plan_epoch(s);
    return ZT_OK;
}

void zt_items_free(zt_items *s)
{
    free(s->perm);
    s->perm = NULL;
}

void zt_items_next(zt_items *s, int64_t *items, int n)
{
    int64_t group = (int64_t)s->world * n;
    for (int i = 0; i < n; i++) {
        int64_t at = s->state.row + (int64_t)i * s->world + s->rank;
        items[i] = at < s->n_items ? s->perm[at] : -1;
    }
    s->state.row += group;
    if (s->state.row >= s->n_items) {
        s->state.epoch++;
        s->state.row = 0;
        plan_epoch(s);
    }
}

int64_t zt_items_groups_per_epoch(const zt_items *s, int n)
{
    int64_t group = (int64_t)s->world * n;
    return (s->n_items + group - 1) / group;
}

zt_loader_state zt_items_get_state(const zt_items *s) { return s->state; }

zt_status zt_items_set_state(zt_items *s, zt_loader_state st)
{
    if (st.epoch < 0 || st.row < 0 || st.row >= s->n_items)
        return zt_fail(ZT_EUSER, "the checkpoint's data position (epoch %lld, item %lld) does not fit %lld items",
                       (long long)st.epoch, (long long)st.row, (long long)s->n_items);
    s->state = st;
    plan_epoch(s);
    return ZT_OK;
}
