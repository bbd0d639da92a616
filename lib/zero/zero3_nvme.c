/* ZeRO stage 3's slice store in the swap file (zero3.h), for offload.param = "nvme": this rank's
 * slices of the fp32 weights and of the summed gradient live in the swap file that also holds
 * AdamW's moments (offload/swap.h, z.swap), one unit's slice a transfer; a frozen model's file
 * holds its weights alone. A gather reads the
 * slice into a staging buffer (started with the prefetch, so the read overlaps the layers
 * before it); a unit's reduced gradient is written in the background from one of two buffers
 * while the backward pass goes on. The optimizer step then streams weights, gradient and
 * moments together (zero/optstate.c). */
#include <stdlib.h>
#include <string.h>

#include "lib/ckpt/state.h"
#include "lib/core/log.h"
#include "lib/core/pages.h"
#include "lib/optim/clip.h"
#include "zero3.h"

typedef struct nvme_unit {
    int buf;     /* the staging buffer its slice is read into, or -1 */
    int reading; /* a read of its slice in flight */
    zt_aio_req io;
    double sumsq; /* Σ g² of the gradient slice as last written */
} nvme_unit;

/* Staging buffers for slices read (`reads` of them) and for gradients written (2, alternating;
 * a third to add to what a step wrote before), slice_bytes each. */
typedef struct nvme_store {
    nvme_unit *u;
    float **stage;
    int nstage, *stage_busy;
    float *gbuf[2], *gold;
    zt_aio_req gio[2];
    int gpending[2], gnext;
    size_t slice_bytes;
} nvme_store;

static nvme_store *state(const zt_zero *z) { return z->z3->store.state; }

/* Each staging buffer: the widest slice of this rank, in whole blocks. */
static size_t slice_bytes(size_t widest) { return zt_aio_round(widest * sizeof(float) + 1); }

/* The staging buffers open_nvme allocates (reads of slices, the two for gradients), and the one
 * the first accumulation allocates (old_buffer). */
static int staging_buffers(int reads, int accumulates) { return reads + 2 + (accumulates != 0); }

size_t zt_zero_nvme_staging_bytes(const zt_llama *m, const zt_zero_options *o, int world, int micro_batches, int frozen)
{
    if (o->params_at != ZT_PARAM_NVME) return 0;
    size_t widest = 0, off, count, lo, mine;
    for (int u = 0; u < zt_llama_units(m); u++) { /* rank 0's slices, as zt_zero_segments cuts them */
        zt_llama_unit_range(m, u, &off, &count);
        zt_state_slice(count, world, 0, &lo, &mine);
        if (mine > widest) widest = mine;
    }
    int nseg;
    size_t local = zt_zero_segments(m, 3, world, 0, NULL, &nseg);
    /* a frozen model accumulates no gradient, and its file holds the weights alone (open_file) */
    return (size_t)staging_buffers(zt_zero3_reads(m, o), !frozen && micro_batches > 1) * slice_bytes(widest) +
           zt_swap_buffer_bytes(local, o->swap_chunk, frozen ? 1u << ZT_SWAP_MASTER : ZT_SWAP_ALL);
}

static zt_status wait_write(zt_zero *z, int b)
{
    nvme_store *ns = state(z);
    if (!ns->gpending[b]) return ZT_OK;
    ns->gpending[b] = 0;
    return zt_aio_wait(z->aio, &ns->gio[b]);
}

static zt_status wait_writes(zt_zero *z)
{
    zt_status st = wait_write(z, 0), st1 = wait_write(z, 1);
    return st ? st : st1;
}

/* The weights of every unit into the file: from the loader, a unit at a time, or from the
 * model's array; writes alternate between two staging buffers. */
static zt_status write_weights(zt_zero *z)
{
    const zt_zero3 *s = z->z3;
    nvme_store *ns = state(z);
    size_t widest = 0;
    for (int i = 0; i < s->units; i++) widest = s->u[i].n > widest ? s->u[i].n : widest;
    float *unit = z->o.load ? zt_pages_alloc(widest * sizeof(float)) : NULL;
    if (z->o.load && !unit) return zt_fail(ZT_ENOMEM, "out of memory loading a unit of %zu weights", widest);
    zt_status st = ZT_OK;
    for (int i = 0; i < s->units && !st; i++) {
        const zt_unit3 *u = &s->u[i];
        size_t lo = z->seg[i].lo - u->off;
        const float *src = z->params + u->off;
        if (z->o.load) {
            st = z->o.load(z->o.load_ctx, u->off, u->n, unit);
            src = unit;
        }
        if (!st && u->mine) {
            int b = i % 2;
            st = wait_write(z, b);
            if (st) break;
            memcpy(ns->gbuf[b], src + lo, u->mine * sizeof(float));
            if (unit) zt_pages_discard(unit, u->n * sizeof(float));
            st = zt_swap_range_write(z->swap, ZT_SWAP_MASTER, u->local, u->mine, ns->gbuf[b], &ns->gio[b]);
            ns->gpending[b] = !st;
        }
    }
    zt_status e = wait_writes(z);
    if (!st) st = e;
    zt_pages_free(unit);
    uint64_t rd, wr; /* not a step's I/O */
    zt_aio_take_bytes(z->aio, &rd, &wr);
    return st;
}

/* The engine and the swap file, of this rank's slices (one array range a unit). */
static zt_status open_file(zt_zero *z)
{
    const zt_zero3 *s = z->z3;
    const zt_zero_options *o = &z->o;
    size_t *cuts = malloc(((size_t)s->units + 1) * sizeof *cuts);
    z->swap = calloc(1, sizeof *z->swap);
    if (!cuts || !z->swap) {
        free(cuts);
        free(z->swap);
        z->swap = NULL;
        return zt_fail(ZT_ENOMEM, "out of memory");
    }
    for (int i = 0; i < s->units; i++) cuts[i] = s->u[i].local;
    char name[160];
    zt_aio_scratch_name(name, sizeof name, z->rank, o->swap_kind ? o->swap_kind : "params");
    zt_status st = zt_aio_open(&z->aio, o->aio_block, o->aio_depth);
    if (!st)
        st = zt_swap_open(z->swap, z->aio, o->nvme_paths, o->nvme_npaths, name, z->local_numel, o->swap_chunk,
                          z->m->grads ? ZT_SWAP_ALL : 1u << ZT_SWAP_MASTER, cuts, s->units);
    free(cuts);
    if (st) { /* nothing of the file to close */
        free(z->swap);
        z->swap = NULL;
    }
    return st;
}

static zt_status open_nvme(zt_zero *z, int reads)
{
    const zt_zero3 *s = z->z3;
    nvme_store *ns = calloc(1, sizeof *ns);
    if (!ns) return zt_fail(ZT_ENOMEM, "out of memory");
    z->z3->store.state = ns;
    ns->u = calloc((size_t)s->units, sizeof *ns->u);
    if (!ns->u) return zt_fail(ZT_ENOMEM, "out of memory");
    size_t widest = 0;
    for (int i = 0; i < s->units; i++) {
        widest = s->u[i].mine > widest ? s->u[i].mine : widest;
        ns->u[i].buf = -1;
    }
    zt_status st = open_file(z);
    if (st) return st;
    ns->slice_bytes = slice_bytes(widest);
    ns->nstage = reads;
    ns->stage = calloc((size_t)ns->nstage, sizeof *ns->stage);
    ns->stage_busy = calloc((size_t)ns->nstage, sizeof *ns->stage_busy);
    if (!ns->stage || !ns->stage_busy) return zt_fail(ZT_ENOMEM, "out of memory");
    for (int b = 0; b < ns->nstage; b++) {
        ns->stage[b] = zt_aio_alloc(ns->slice_bytes);
        if (!ns->stage[b]) return zt_fail(ZT_ENOMEM, "out of memory for staging buffers");
    }
    for (int b = 0; b < 2; b++) {
        ns->gbuf[b] = zt_aio_alloc(ns->slice_bytes);
        if (!ns->gbuf[b]) return zt_fail(ZT_ENOMEM, "out of memory for staging buffers");
    }
    return write_weights(z);
}

static void release(zt_zero *z, int i)
{
    nvme_store *ns = state(z);
    nvme_unit *nu = &ns->u[i];
    if (nu->buf < 0) return;
    if (nu->reading) {
        zt_aio_wait(z->aio, &nu->io);
        nu->reading = 0;
    }
    ns->stage_busy[nu->buf] = 0;
    nu->buf = -1;
}

static void close_nvme(zt_zero *z)
{
    nvme_store *ns = state(z);
    if (!ns) return;
    if (z->swap) { /* else nothing was read or written */
        for (int i = 0; i < z->z3->units; i++) release(z, i);
        wait_writes(z);
        zt_swap_close(z->swap);
        free(z->swap);
        z->swap = NULL;
    }
    zt_aio_close(z->aio);
    z->aio = NULL;
    for (int b = 0; ns->stage && b < ns->nstage; b++) zt_aio_free(ns->stage[b]);
    free(ns->stage);
    free(ns->stage_busy);
    for (int b = 0; b < 2; b++) zt_aio_free(ns->gbuf[b]);
    zt_aio_free(ns->gold);
    free(ns->u);
    free(ns);
    z->z3->store.state = NULL;
}

static zt_status read_start(zt_zero *z, int i, const float **slice)
{
    nvme_store *ns = state(z);
    const zt_unit3 *u = &z->z3->u[i];
    nvme_unit *nu = &ns->u[i];
    int b = 0;
    while (b < ns->nstage && ns->stage_busy[b]) b++;
    if (b == ns->nstage) return zt_fail(ZT_ERUNTIME, "rank %d: no staging buffer free for unit %d", z->rank, i);
    ns->stage_busy[b] = 1, nu->buf = b;
    *slice = ns->stage[b];
    if (!u->mine) return ZT_OK;
    zt_status st = zt_swap_range_read(z->swap, ZT_SWAP_MASTER, u->local, u->mine, ns->stage[b], &nu->io);
    nu->reading = !st;
    return st;
}

static zt_status read_wait(zt_zero *z, int i)
{
    nvme_store *ns = state(z);
    const zt_unit3 *u = &z->z3->u[i];
    nvme_unit *nu = &ns->u[i];
    if (!nu->reading) return ZT_OK;
    nu->reading = 0;
    double t = zt_now_s();
    zt_status st = zt_aio_wait(z->aio, &nu->io);
    z->wait_s += zt_now_s() - t;
    return st ? st : zt_swap_check_range(z->swap, ZT_SWAP_MASTER, u->local, u->mine, ns->stage[nu->buf]);
}

/* A new step: the gradient slices are rewritten unit by unit (flush writes zeros for the rest). */
static void zero_grads(zt_zero *z)
{
    for (int i = 0; i < z->z3->units; i++) state(z)->u[i].sumsq = 0;
}

/* The buffer to add to what the step wrote before (several ranks, a later micro-batch). */
static zt_status old_buffer(zt_zero *z, float **buf)
{
    nvme_store *ns = state(z);
    if (!ns->gold) ns->gold = zt_aio_alloc(ns->slice_bytes);
    *buf = ns->gold;
    return ns->gold ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory for gradient accumulation");
}

static zt_status grad_target(zt_zero *z, int i, float **into)
{
    nvme_store *ns = state(z);
    if (!z->z3->u[i].fresh && z->world > 1) return old_buffer(z, into); /* grad_write adds it to the other buffer */
    *into = NULL;
    zt_status st = wait_write(z, ns->gnext);
    if (!st) *into = ns->gbuf[ns->gnext];
    return st;
}

/* Unit u's gradient slice as written this step into out (every write done first: the file's
 * order is the order of completion). */
static zt_status read_grad(zt_zero *z, const zt_unit3 *u, float *out)
{
    zt_status st = wait_writes(z);
    if (st || !u->mine) return st;
    zt_aio_req r;
    st = zt_swap_range_read(z->swap, ZT_SWAP_GRAD, u->local, u->mine, out, &r);
    if (!st) st = zt_aio_wait(z->aio, &r);
    return st ? st : zt_swap_check_range(z->swap, ZT_SWAP_GRAD, u->local, u->mine, out);
}

static zt_status grad_read(zt_zero *z, int i, const float **sum)
{
    float *buf = NULL;
    zt_status st = old_buffer(z, &buf);
    if (!st) st = read_grad(z, &z->z3->u[i], buf);
    *sum = buf;
    return st;
}

static zt_status grad_write(zt_zero *z, int i, float *reduced)
{
    nvme_store *ns = state(z);
    const zt_unit3 *u = &z->z3->u[i];
    int b = ns->gnext;
    float *out = reduced;
    if (!u->fresh && z->world > 1) { /* another micro-batch of the step: what it wrote before, plus this one */
        out = ns->gbuf[b];
        zt_status st = read_grad(z, u, out);
        if (st) return st;
        for (size_t j = 0; j < u->mine; j++) out[j] += reduced[j];
    }
    ns->u[i].sumsq = zt_sumsq(out, u->mine);
    if (!u->mine) return ZT_OK;
    zt_status st = zt_swap_range_write(z->swap, ZT_SWAP_GRAD, u->local, u->mine, out, &ns->gio[b]);
    ns->gpending[b] = !st;
    ns->gnext = 1 - b;
    return st;
}

/* Every write done, a unit without a gradient this step written as zeros. */
static zt_status flush(zt_zero *z)
{
    const zt_zero3 *s = z->z3;
    zt_status st = ZT_OK;
    for (int i = 0; i < s->units && !st; i++) {
        if (!s->u[i].fresh) continue;
        float *zeros = NULL;
        st = grad_target(z, i, &zeros);
        if (st) return st;
        memset(zeros, 0, s->u[i].mine * sizeof(float));
        st = grad_write(z, i, zeros);
    }
    zt_status e = wait_writes(z);
    return st ? st : e;
}

static double grad_sumsq(const zt_zero *z)
{
    double total = 0;
    for (int i = 0; i < z->z3->units; i++) total += state(z)->u[i].sumsq;
    return total;
}

static zt_status get_weights(zt_zero *z, size_t at, size_t n, float *dst)
{
    return zt_swap_get(z->swap, ZT_SWAP_MASTER, at, n, dst);
}

/* Weights, gradient and moments in the file (a frozen model's weights); what stays is the staging. */
static void memory_use(const zt_zero *z, zt_zero_memory *u)
{
    const nvme_store *ns = state(z);
    u->params -= z->local_numel * 4, u->grads -= z->m->grads ? z->local_numel * 4 : 0, u->optimizer = 0;
    u->gathered_peak += (size_t)staging_buffers(ns->nstage, 0) * ns->slice_bytes; /* the accumulation's aside */
}

const zt_slice_store_ops zt_store_nvme = {
    .reads_at_once = 0,
    .open = open_nvme,
    .close = close_nvme,
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
