/* ZeRO stage 3 with offload.param = "nvme": this rank's slices of the fp32 weights and of
 * the summed gradient live in the swap file that also holds AdamW's moments (offload/swap.h),
 * one unit's slice a transfer. A gather reads the slice into a staging buffer (started with
 * the prefetch, so the read overlaps the layers before it); a unit's reduced gradient is
 * written in the background from one of two buffers while the backward pass goes on. The
 * optimizer step then streams weights, gradient and moments together (zero/optstate.c). */
#include <stdlib.h>
#include <string.h>

#include "lib/core/log.h"
#include "lib/core/pages.h"
#include "lib/optim/clip.h"
#include "zero3.h"

static zt_status wait_write(zt_zero *z, int b)
{
    zt_zero3 *s = z->z3;
    if (!s->gpending[b]) return ZT_OK;
    s->gpending[b] = 0;
    return zt_aio_wait(z->aio, &s->gio[b]);
}

/* The weights of every unit into the file: from the loader, a unit at a time, or from the
 * model's array; writes alternate between two staging buffers. */
static zt_status write_weights(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    size_t widest = 0;
    for (int i = 0; i < s->units; i++) widest = s->u[i].n > widest ? s->u[i].n : widest;
    float *unit = z->o.load ? zt_pages_alloc(widest * sizeof(float)) : NULL;
    if (z->o.load && !unit) return zt_fail(ZT_ENOMEM, "out of memory loading a unit of %zu weights", widest);
    zt_status st = ZT_OK;
    for (int i = 0; i < s->units && !st; i++) {
        zt_unit3 *u = &s->u[i];
        size_t lo = z->seg[i].lo - u->off;
        const float *src = z->params + u->off;
        if (z->o.load && !(st = z->o.load(z->o.load_ctx, u->off, u->n, unit))) src = unit;
        if (st || !u->mine) continue;
        int b = i % 2;
        if ((st = wait_write(z, b))) break;
        memcpy(s->gbuf[b], src + lo, u->mine * sizeof(float));
        if (unit) zt_pages_discard(unit, u->n * sizeof(float));
        st = zt_swap_range_write(z->swap, ZT_SWAP_MASTER, u->local, u->mine, s->gbuf[b], &s->gio[b]);
        s->gpending[b] = !st;
    }
    for (int b = 0; b < 2; b++) {
        zt_status e = wait_write(z, b);
        if (!st) st = e;
    }
    zt_pages_free(unit);
    uint64_t rd, wr; /* not a step's I/O */
    zt_aio_take_bytes(z->aio, &rd, &wr);
    return st;
}

zt_status zt_p3_init(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    const zt_zero_options *o = &z->o;
    size_t widest = 0;
    size_t *cuts = malloc(((size_t)s->units + 1) * sizeof *cuts);
    if (!cuts || !(z->swap = calloc(1, sizeof *z->swap))) {
        free(cuts);
        return zt_fail(ZT_ENOMEM, "out of memory");
    }
    for (int i = 0; i < s->units; i++) {
        cuts[i] = s->u[i].local;
        widest = s->u[i].mine > widest ? s->u[i].mine : widest;
        s->u[i].buf = -1;
    }
    char name[160];
    zt_aio_scratch_name(name, sizeof name, z->rank, o->swap_kind ? o->swap_kind : "params");
    zt_status st = zt_aio_open(&z->aio, o->aio_block, o->aio_depth);
    if (!st) st = zt_swap_open(z->swap, z->aio, o->nvme_paths, o->nvme_npaths, name, z->local_numel, o->swap_chunk, 4, cuts,
                               s->units);
    free(cuts);
    if (st) {
        free(z->swap);
        z->swap = NULL;
        return st;
    }
    s->slice_bytes = zt_aio_round(widest * sizeof(float) + 1);
    s->nstage = zt_zero3_ahead(o->prefetch_layers, zt_llama_mlp_tiles(z->m), o->checkpointing) + 2;
    s->stage = calloc((size_t)s->nstage, sizeof *s->stage);
    s->stage_busy = calloc((size_t)s->nstage, sizeof *s->stage_busy);
    if (!s->stage || !s->stage_busy) return zt_fail(ZT_ENOMEM, "out of memory");
    for (int b = 0; b < s->nstage; b++)
        if (!(s->stage[b] = zt_aio_alloc(s->slice_bytes))) return zt_fail(ZT_ENOMEM, "out of memory for staging buffers");
    for (int b = 0; b < 2; b++)
        if (!(s->gbuf[b] = zt_aio_alloc(s->slice_bytes))) return zt_fail(ZT_ENOMEM, "out of memory for staging buffers");
    return write_weights(z);
}

void zt_p3_free(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    if (!z->swap) return;
    for (int i = 0; s->u && i < s->units; i++) zt_p3_release(z, i);
    for (int b = 0; b < 2; b++) wait_write(z, b);
    for (int b = 0; s->stage && b < s->nstage; b++) zt_aio_free(s->stage[b]);
    free(s->stage);
    free(s->stage_busy);
    for (int b = 0; b < 2; b++) zt_aio_free(s->gbuf[b]);
    zt_aio_free(s->gold);
    zt_swap_close(z->swap);
    free(z->swap);
    z->swap = NULL;
    zt_aio_close(z->aio);
    z->aio = NULL;
}

float *zt_p3_read_start(zt_zero *z, int i)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    int b = 0;
    while (b < s->nstage && s->stage_busy[b]) b++;
    if (b == s->nstage) {
        s->error = zt_fail(ZT_ERUNTIME, "rank %d: no staging buffer free for unit %d", z->rank, i);
        return NULL;
    }
    s->stage_busy[b] = 1, u->buf = b;
    if (u->mine) {
        s->error = zt_swap_range_read(z->swap, ZT_SWAP_MASTER, u->local, u->mine, s->stage[b], &u->io);
        u->reading = !s->error;
    }
    return s->error ? NULL : s->stage[b];
}

zt_status zt_p3_read_wait(zt_zero *z, int i)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    if (!u->reading) return ZT_OK;
    u->reading = 0;
    double t = zt_now_s();
    zt_status st = zt_aio_wait(z->aio, &u->io);
    z->wait_s += zt_now_s() - t;
    return st ? st : zt_swap_check_range(z->swap, ZT_SWAP_MASTER, u->local, u->mine, s->stage[u->buf]);
}

void zt_p3_release(zt_zero *z, int i)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    if (u->buf < 0) return;
    if (u->reading) zt_aio_wait(z->aio, &u->io), u->reading = 0;
    s->stage_busy[u->buf] = 0, u->buf = -1;
}

float *zt_p3_reduce_target(zt_zero *z, zt_unit3 *u)
{
    zt_zero3 *s = z->z3;
    if (!u->fresh && z->world > 1) { /* added to what the step wrote before, read into the other buffer */
        if (!s->gold && !(s->gold = zt_aio_alloc(s->slice_bytes)))
            s->error = zt_fail(ZT_ENOMEM, "out of memory for gradient accumulation");
        return s->gold;
    }
    zt_status st = wait_write(z, s->gnext);
    if (st) s->error = st;
    return st ? NULL : s->gbuf[s->gnext];
}

/* Unit u's gradient slice as written this step into out (every write done first: the file's
 * order is the order of completion). */
static zt_status read_grad(zt_zero *z, const zt_unit3 *u, float *out)
{
    zt_aio_req r;
    zt_status st;
    for (int b = 0; b < 2; b++)
        if ((st = wait_write(z, b))) return st;
    if (!u->mine) return ZT_OK;
    if ((st = zt_swap_range_read(z->swap, ZT_SWAP_GRAD, u->local, u->mine, out, &r)) || (st = zt_aio_wait(z->aio, &r)))
        return st;
    return zt_swap_check_range(z->swap, ZT_SWAP_GRAD, u->local, u->mine, out);
}

const float *zt_p3_grad_read(zt_zero *z, zt_unit3 *u)
{
    zt_zero3 *s = z->z3;
    if (!s->gold && !(s->gold = zt_aio_alloc(s->slice_bytes))) {
        s->error = zt_fail(ZT_ENOMEM, "out of memory for gradient accumulation");
        return NULL;
    }
    s->error = read_grad(z, u, s->gold);
    return s->error ? NULL : s->gold;
}

zt_status zt_p3_grad_store(zt_zero *z, zt_unit3 *u, float *reduced)
{
    zt_zero3 *s = z->z3;
    int b = s->gnext;
    float *out = reduced;
    zt_status st = ZT_OK;
    if (!u->fresh && z->world > 1) { /* another micro-batch of the step: what it wrote before, plus this one */
        out = s->gbuf[b];
        if ((st = read_grad(z, u, out))) return st;
        for (size_t j = 0; j < u->mine; j++) out[j] += reduced[j];
    }
    u->sumsq = zt_sumsq(out, u->mine);
    if (!u->mine) return ZT_OK;
    st = zt_swap_range_write(z->swap, ZT_SWAP_GRAD, u->local, u->mine, out, &s->gio[b]);
    s->gpending[b] = !st;
    s->gnext = 1 - b;
    return st;
}

zt_status zt_p3_flush(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    zt_status st = ZT_OK;
    for (int i = 0; i < s->units && !st; i++) {
        zt_unit3 *u = &s->u[i];
        if (!u->fresh) continue;
        float *zeros = zt_p3_reduce_target(z, u);
        if (!zeros) { /* s->error says why */
            st = s->error;
            s->error = ZT_OK;
            return st;
        }
        memset(zeros, 0, u->mine * sizeof(float));
        st = zt_p3_grad_store(z, u, zeros);
    }
    for (int b = 0; b < 2; b++) {
        zt_status e = wait_write(z, b);
        if (!st) st = e;
    }
    return st;
}

double zt_p3_sumsq(const zt_zero *z)
{
    double total = 0;
    for (int i = 0; i < z->z3->units; i++) total += z->z3->u[i].sumsq;
    return total;
}
