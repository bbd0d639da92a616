/* ZeRO stage 3's slice store in memory (zero3.h): z.master and z.grad hold this rank's slices
 * of every unit, one after another (a frozen model's z.grad is NULL). They are pinned host memory
 * where a device copies straight to and from them (staged in one process: offload.param = "cpu"
 * beside a GPU), the device's memory where the collectives work on the device's arrays (several
 * ranks, not staged: zero.h), else plain host memory. */
#include <stdlib.h>
#include <string.h>

#include "lib/core/arena.h"
#include "lib/core/pages.h"
#include "zero3.h"

typedef struct memory_store {
    int pinned;
    float *scratch; /* several ranks: a micro-batch's reduced slice, before it is added to z.grad */
} memory_store;

static memory_store *state(const zt_zero *z) { return z->z3->store.state; }

static void *slices_alloc(const zt_zero *z, int pinned, size_t bytes)
{
    if (pinned) return z->model_be->host_alloc(z->model_be, bytes);
    return z->be->host_memory ? zt_calloc_aligned(bytes) : z->be->alloc(z->be, bytes);
}

static void slices_free(const zt_zero *z, int pinned, void *p)
{
    if (pinned) z->model_be->host_free(z->model_be, p);
    else if (z->be->host_memory) zt_free(p);
    else z->be->free(z->be, p);
}

/* This rank's slices from the model's array (z.be holds both). */
static zt_status copy_slices(zt_zero *z)
{
    for (int i = 0; i < z->nseg; i++)
        z->be->copy(z->be, z->master + z->seg[i].local, z->params + z->seg[i].lo,
                    (z->seg[i].hi - z->seg[i].lo) * sizeof(float));
    return ZT_OK;
}

/* This rank's slices from the loader, a unit at a time: the whole model is never in memory. */
static zt_status load_slices(zt_zero *z)
{
    const zt_zero3 *s = z->z3;
    size_t widest = 0;
    for (int i = 0; i < s->units; i++) widest = s->u[i].n > widest ? s->u[i].n : widest;
    float *unit = zt_pages_alloc(widest * sizeof(float));
    zt_status st = unit ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory loading a unit of %zu weights", widest);
    for (int i = 0; i < s->units && !st; i++) {
        const zt_unit3 *u = &s->u[i];
        if (!(st = z->o.load(z->o.load_ctx, u->off, u->n, unit)))
            z->be->upload(z->be, z->master + u->local, unit + (z->seg[i].lo - u->off), u->mine * sizeof(float));
        zt_pages_discard(unit, u->n * sizeof(float));
    }
    zt_pages_free(unit);
    return st;
}

static zt_status open_memory(zt_zero *z, int reads)
{
    (void)reads; /* every slice is in memory all the time */
    const zt_zero3 *s = z->z3;
    memory_store *ms = calloc(1, sizeof *ms);
    if (!ms) return zt_fail(ZT_ENOMEM, "out of memory");
    z->z3->store.state = ms;
    ms->pinned = z->staged && !z->comm;
    size_t local = z->local_numel, widest = 0;
    for (int i = 0; i < s->units; i++) widest = s->u[i].p > widest ? s->u[i].p : widest;
    int trained = z->m->grads != NULL;
    z->master = slices_alloc(z, ms->pinned, (local + 1) * sizeof(float));
    if (trained) z->grad = slices_alloc(z, ms->pinned, (local + 1) * sizeof(float));
    if (trained && z->world > 1) ms->scratch = slices_alloc(z, ms->pinned, (widest + 1) * sizeof(float));
    if (!z->master || (trained && !z->grad) || (trained && z->world > 1 && !ms->scratch))
        return zt_fail(ZT_ENOMEM, "out of memory for this rank's %zu parameters", local);
    return z->o.load ? load_slices(z) : copy_slices(z);
}

static void close_memory(zt_zero *z)
{
    memory_store *ms = state(z);
    if (!ms) return;
    slices_free(z, ms->pinned, ms->scratch);
    slices_free(z, ms->pinned, z->master);
    slices_free(z, ms->pinned, z->grad);
    z->master = z->grad = NULL;
    free(ms);
    z->z3->store.state = NULL;
}

static zt_status read_start(zt_zero *z, int i, const float **slice)
{
    *slice = z->master + z->z3->u[i].local;
    return ZT_OK;
}

static zt_status read_wait(zt_zero *z, int i)
{
    (void)z, (void)i;
    return ZT_OK;
}

static void release(zt_zero *z, int i) { (void)z, (void)i; }

static void zero_grads(zt_zero *z) { z->be->memset0(z->be, z->grad, z->local_numel * sizeof *z->grad); }

/* One rank: straight into the slice (the step's sum); several: into the scratch, added in grad_write. */
static zt_status grad_target(zt_zero *z, int i, float **into)
{
    *into = z->world > 1 ? state(z)->scratch : z->grad + z->z3->u[i].local;
    return ZT_OK;
}

static zt_status grad_write(zt_zero *z, int i, float *reduced)
{
    const zt_unit3 *u = &z->z3->u[i];
    if (z->world == 1) return ZT_OK;
#ifndef ZT_REAL_DOUBLE         /* (the double build has no device) */
    if (!z->be->host_memory) { /* the slices are on the device */
        z->be->add(z->be, z->grad + u->local, reduced, u->mine);
        return ZT_OK;
    }
#endif
    for (size_t j = 0; j < u->mine; j++) z->grad[u->local + j] += reduced[j];
    return ZT_OK;
}

static zt_status grad_read(zt_zero *z, int i, const float **sum)
{
    *sum = z->grad + z->z3->u[i].local;
    return ZT_OK;
}

static zt_status flush(zt_zero *z)
{
    (void)z; /* every slice is complete in z.grad */
    return ZT_OK;
}

static double grad_sumsq(const zt_zero *z) { return z->be->sumsq(z->be, z->grad, z->local_numel); }

static zt_status get_weights(zt_zero *z, size_t at, size_t n, float *dst)
{
    z->be->download(z->be, dst, z->master + at, n * sizeof(float));
    return ZT_OK;
}

static void memory_use(const zt_zero *z, zt_zero_memory *u) { (void)z, (void)u; /* all of it in memory */ }

const zt_slice_store_ops zt_store_memory = {
    .reads_at_once = 1,
    .open = open_memory,
    .close = close_memory,
    .read_start = read_start,
    .read_wait = read_wait,
    .release = release,
    .zero_grads = zero_grads,
    .grad_target = grad_target,
    .grad_write = grad_write,
    .grad_read = grad_read,
    .flush = flush,
    .grad_sumsq = grad_sumsq,
    .get_weights = get_weights,
    .memory_use = memory_use,
};
