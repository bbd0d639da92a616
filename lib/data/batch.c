#include "batch.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/rng.h"

/* A piece of one example placed in a row: tokens [start, start + len). */
typedef struct zt_segment {
    int64_t example, start, len;
} zt_segment;

zt_status zt_batch_alloc(zt_batch *b, int B, int T)
{
    ZT_ASSERT(B >= 1 && T >= 1);
    memset(b, 0, sizeof *b);
    size_t n = (size_t)B * (size_t)T;
    b->input = malloc(n * sizeof *b->input);
    b->target = malloc(n * sizeof *b->target);
    b->pos = malloc(n * sizeof *b->pos);
    b->lens = malloc((size_t)B * sizeof *b->lens);
    if (!b->input || !b->target || !b->pos || !b->lens) {
        zt_batch_free(b);
        return zt_fail(ZT_ENOMEM, "out of memory allocating a batch of %d x %d tokens", B, T);
    }
    b->B = B;
    b->T = T;
    return ZT_OK;
}

void zt_batch_free(zt_batch *b)
{
    free(b->input);
    free(b->target);
    free(b->lens);
    free(b->pos);
    memset(b, 0, sizeof *b);
}

/* ---- planning an epoch ---------------------------------------------------------------- */

static void epoch_order(const zt_loader *l, int64_t epoch, int64_t *perm)
{
    int64_t n = l->ds->n_examples;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (l->shuffle) zt_rng_shuffle(perm, n, l->seed, (uint64_t)epoch);
}

/* Greedy row builder. With segs/row_seg NULL it only counts. */
typedef struct packer {
    zt_segment *segs;
    int64_t *row_seg;
    int64_t n_segs, n_rows, used, pad, widest;
    int T;
} packer;

static void packer_close_row(packer *p)
{
    if (!p->used) return;
    p->pad += p->T - p->used;
    if (p->used > p->widest) p->widest = p->used;
    p->n_rows++;
    if (p->row_seg) p->row_seg[p->n_rows] = p->n_segs;
    p->used = 0;
}

static void packer_add(packer *p, int64_t example, int64_t start, int64_t len)
{
    if (p->used + len > p->T) packer_close_row(p);
    if (p->segs) p->segs[p->n_segs] = (zt_segment){example, start, len};
    p->n_segs++;
    p->used += len;
}

/* Lays the examples out in rows in the order perm (see batch.h). */
static packer pack(const zt_loader *l, const int64_t *perm, zt_segment *segs, int64_t *row_seg)
{
    packer p = {.segs = segs, .row_seg = row_seg, .T = l->T};
    if (row_seg) row_seg[0] = 0;
    for (int64_t i = 0; i < l->ds->n_examples; i++) {
        int64_t e = perm[i], len = zt_dataset_len(l->ds, e);
        if (!l->packing) {
            packer_add(&p, e, 0, len < l->T ? len : l->T);
            packer_close_row(&p);
            continue;
        }
        for (int64_t start = 0; start < len; start += l->T)
            packer_add(&p, e, start, len - start < l->T ? len - start : l->T);
    }
    packer_close_row(&p);
    return p;
}

/* Makes the loader's plan describe epoch (memory was sized at init: cannot fail). */
static void plan_epoch(zt_loader *l, int64_t epoch)
{
    epoch_order(l, epoch, l->perm);
    packer p = pack(l, l->perm, l->segs, l->row_seg);
    ZT_ASSERT(p.n_segs == l->n_segs);
    l->n_rows = p.n_rows;
    l->pad_tokens = p.pad;
    l->state = (zt_loader_state){epoch, 0};
}

/* Segments of an example: its chunks when packing, else one (possibly truncated). */
static int64_t example_segments(const zt_loader *l, int64_t len) { return l->packing ? (len + l->T - 1) / l->T : 1; }

zt_status zt_loader_init(zt_loader *l, const zt_dataset *ds, int T, int B, int packing, int shuffle, uint64_t seed,
                         int rank, int world)
{
    memset(l, 0, sizeof *l);
    if (T < 1) return zt_fail(ZT_EUSER, "max_length must be at least 1 (got %d)", T);
    if (B < 1) return zt_fail(ZT_EUSER, "micro_batch_size must be at least 1 (got %d)", B);
    if (world < 1 || rank < 0 || rank >= world)
        return zt_fail(ZT_EUSER, "rank %d out of range for world size %d", rank, world);
    if (ds->n_examples < 1) return zt_fail(ZT_EUSER, "the dataset has no examples");
    *l = (zt_loader){.ds = ds,
                     .T = T,
                     .B = B,
                     .packing = !!packing,
                     .shuffle = !!shuffle,
                     .rank = rank,
                     .world = world,
                     .seed = seed};
    for (int64_t i = 0; i < ds->n_examples; i++) l->n_segs += example_segments(l, zt_dataset_len(ds, i));
    l->perm = malloc((size_t)ds->n_examples * sizeof *l->perm);
    l->segs = malloc((size_t)l->n_segs * sizeof *l->segs);
    l->row_seg = malloc((size_t)(l->n_segs + 1) * sizeof *l->row_seg); /* rows <= segments */
    if (!l->perm || !l->segs || !l->row_seg) {
        int64_t n_segs = l->n_segs;
        zt_loader_free(l);
        return zt_fail(ZT_ENOMEM, "out of memory planning %lld rows of %d tokens", (long long)n_segs, T);
    }
    plan_epoch(l, 0);
    /* shuffled packing fills other rows each epoch: bound them by the whole data set */
    int64_t tokens = zt_dataset_tokens(ds);
    l->width = l->packing && l->shuffle ? (int)(tokens < T ? tokens : T) : (int)pack(l, l->perm, NULL, NULL).widest;
    if (l->width < 1) l->width = 1; /* empty examples only */
    return ZT_OK;
}

void zt_loader_free(zt_loader *l)
{
    free(l->perm);
    free(l->segs);
    free(l->row_seg);
    memset(l, 0, sizeof *l);
}

/* ---- serving -------------------------------------------------------------------------- */

/* Writes global row g of the planned epoch (g < 0: a row of padding) into T columns; returns its targets. */
static int64_t fill_row(const zt_loader *l, int64_t g, int T, int32_t *input, int32_t *target, int32_t *pos,
                        int32_t *len)
{
    const zt_dataset *ds = l->ds;
    int64_t t = 0, n_targets = 0;
    for (int64_t k = g < 0 ? 0 : l->row_seg[g], end = g < 0 ? 0 : l->row_seg[g + 1]; k < end; k++) {
        const zt_segment *s = &l->segs[k];
        int64_t off = ds->offsets[s->example], len = zt_dataset_len(ds, s->example);
        for (int64_t j = 0; j < s->len; j++, t++) {
            int64_t next = s->start + j + 1;
            input[t] = ds->ids[off + s->start + j];
            target[t] = next < len ? ds->labels[off + next] : ZT_IGNORE_INDEX;
            pos[t] = (int32_t)j;
            n_targets += target[t] != ZT_IGNORE_INDEX;
        }
    }
    *len = (int32_t)t;
    for (int64_t p = 0; t < T; t++, p++) {
        input[t] = 0;
        target[t] = ZT_IGNORE_INDEX;
        pos[t] = (int32_t)p;
    }
    return n_targets;
}

zt_status zt_loader_next(zt_loader *l, zt_batch *out)
{
    ZT_ASSERT(out->B == l->B && out->T >= l->width && out->T <= l->T);
    int64_t T = out->T, group = (int64_t)l->B * l->world;
    out->n_targets = 0;
    for (int64_t k = 0; k < l->B; k++) {
        int64_t g = l->state.row + l->rank + k * l->world;
        out->n_targets += fill_row(l, g < l->n_rows ? g : -1, out->T, out->input + k * T, out->target + k * T,
                                   out->pos + k * T, out->lens + k);
    }
    l->state.row += group;
    /* Move on as soon as the epoch is served, so a saved state always points at a real row. */
    if (l->state.row >= l->n_rows) plan_epoch(l, l->state.epoch + 1);
    return ZT_OK;
}

/* ---- sizes, state, stats -------------------------------------------------------------- */

int64_t zt_loader_rows_per_epoch(const zt_loader *l) { return l->n_rows; }

zt_status zt_loader_epoch_rows(const zt_loader *l, int64_t epoch, int64_t *rows)
{
    if (epoch == l->state.epoch || !(l->packing && l->shuffle)) {
        *rows = l->n_rows;
        return ZT_OK;
    }
    int64_t *perm = malloc((size_t)l->ds->n_examples * sizeof *perm);
    if (!perm) return zt_fail(ZT_ENOMEM, "out of memory ordering %lld examples", (long long)l->ds->n_examples);
    epoch_order(l, epoch, perm);
    *rows = pack(l, perm, NULL, NULL).n_rows;
    free(perm);
    return ZT_OK;
}

zt_loader_state zt_loader_get_state(const zt_loader *l) { return l->state; }

zt_status zt_loader_set_state(zt_loader *l, zt_loader_state s)
{
    if (s.epoch < 0 || s.row < 0)
        return zt_fail(ZT_EUSER, "data position (epoch %lld, row %lld) is negative", (long long)s.epoch,
                       (long long)s.row);
    zt_loader_state old = l->state;
    if (s.epoch != old.epoch) plan_epoch(l, s.epoch);
    if (s.row >= l->n_rows) {
        int64_t rows = l->n_rows;
        plan_epoch(l, old.epoch);
        l->state = old;
        return zt_fail(ZT_EUSER, "data position: row %lld is past the end of epoch %lld (%lld rows)", (long long)s.row,
                       (long long)s.epoch, (long long)rows);
    }
    l->state.row = s.row;
    return ZT_OK;
}

zt_loader_stats zt_loader_get_stats(const zt_loader *l)
{
    const zt_dataset *ds = l->ds;
    int64_t group = (int64_t)l->B * l->world;
    zt_loader_stats st = {
        .examples = ds->n_examples,
        .tokens = zt_dataset_tokens(ds),
        .rows = l->n_rows,
        .batches = (l->n_rows + group - 1) / group,
        .padding_fraction = (double)l->pad_tokens / ((double)l->n_rows * l->T),
    };
    for (int64_t i = 0; i < ds->n_examples; i++) {
        int64_t len = zt_dataset_len(ds, i);
        if (len <= l->T) continue;
        if (l->packing) st.split++;
        else {
            st.truncated++;
            st.truncated_tokens += len - l->T;
        }
    }
    return st;
}
