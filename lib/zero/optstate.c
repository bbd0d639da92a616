/* AdamW's state (optstate.h). */
#include "optstate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/ckpt/state.h"
#include "lib/zero/optstate8.h"

size_t zt_optstate_chunk_bytes(const zt_offload_io *io, size_t n, int narrays)
{
    /* three chunks of each array within offload.max_pinned_bytes, at most 64 MiB an array */
    size_t chunk = io->max_pinned_bytes / (3 * (size_t)narrays), whole = zt_aio_round(n * sizeof(float));
    if (chunk > ((size_t)64 << 20)) chunk = (size_t)64 << 20;
    if (n && chunk > whole) chunk = whole;
    if (chunk < io->block_size) chunk = io->block_size;
    return chunk;
}

/* One moment's array in memory, with room for one more element. */
static size_t moment_bytes(size_t n) { return (n + 1) * sizeof(float); }

size_t zt_optstate_bytes(zt_offload_tier tier, const zt_offload_io *io, size_t n)
{
    if (tier != ZT_OFFLOAD_NVME) return 2 * moment_bytes(n);
    return zt_swap_buffer_bytes(n, zt_optstate_chunk_bytes(io, n, 2), ZT_SWAP_MOMENTS);
}

size_t zt_optstate_bytes_8bit(const zt_llama *m, const zt_zero_segment *seg, int nseg)
{
    return zt_optstate8_bytes(m, seg, nseg);
}

zt_status zt_optstate_open(zt_optstate *o, zt_offload_tier tier, zt_optim_kind optim, const zt_offload_io *io,
                           const zt_zero *z, const char *kind)
{
    memset(o, 0, sizeof *o);
    o->z = z;
    size_t n = z->local_numel;
    if (optim == ZT_OPTIM_ADAMW_8BIT) {
        if (tier != ZT_OFFLOAD_NONE || zt_zero_swap(z) || z->windows)
            return zt_fail(ZT_EUSER, "train.optim = \"adamw_8bit\" keeps its moments in memory: it needs "
                                     "offload.optimizer = \"none\"");
        return zt_optstate8_open(&o->q8, z);
    }
    if ((o->swap = zt_zero_swap(z))) { /* offload.param = "nvme": the partition's file has the moments too */
        o->aio = o->swap->aio;
        return ZT_OK;
    }
    if (tier != ZT_OFFLOAD_NVME) {
        o->m = z->be->alloc(z->be, moment_bytes(n));
        o->v = z->be->alloc(z->be, moment_bytes(n));
        return o->m && o->v ? ZT_OK : zt_fail(ZT_ENOMEM, "out of %s memory for optimizer state", z->be->name);
    }
    zt_status st = zt_aio_open(&o->aio, io->block_size, io->queue_depth);
    if (st) return st;
    size_t chunk = zt_optstate_chunk_bytes(io, n, 2);
    char name[160];
    zt_aio_scratch_name(name, sizeof name, z->rank, kind);
    o->swap = &o->own_swap;
    st = zt_swap_open(o->swap, o->aio, io->nvme_paths, io->npaths, name, n, chunk, ZT_SWAP_MOMENTS, NULL, 0);
    uint64_t rd, wr; /* the file's first zeros are not a step's I/O */
    if (!st) zt_aio_take_bytes(o->aio, &rd, &wr);
    return st;
}

size_t zt_optstate_memory(const zt_optstate *o)
{
    return o->q8 ? zt_optstate8_bytes(o->z->m, o->z->seg, o->z->nseg) : 2 * moment_bytes(o->z->local_numel);
}

void zt_optstate_close(zt_optstate *o)
{
    zt_optstate8_close(o->q8);
    if (o->z) {
        o->z->be->free(o->z->be, o->m);
        o->z->be->free(o->z->be, o->v);
    }
    if (o->swap == &o->own_swap) {
        zt_swap_close(o->swap);
        zt_aio_close(o->aio);
    }
    memset(o, 0, sizeof *o);
}

/* The weights and gradient are in the swap file too: it is the ZeRO partition's (zt_zero_swap). */
static int weights_in_file(const zt_optstate *o) { return o->swap && o->swap != &o->own_swap; }

typedef struct window {
    const zt_optstate *o;
    const zt_llama *m;
    const zt_adamw *h;
    float coef;
} window;

/* AdamW on this rank's elements local [w0, w0 + n): the parts of each tensor there; a[]
 * holds that window of m and v, and of the weights and gradient when they are not in memory */
static zt_status adamw_window(void *ctx, size_t w0, size_t n, float *const *arrays)
{
    float *mm = arrays[ZT_SWAP_M], *vv = arrays[ZT_SWAP_V];
    const window *w = ctx;
    const zt_zero *z = w->o->z;
    zt_zero_window_in(z, w0, n); /* the window's gradient is here */
    const zt_llama *m = w->m;
    int in_file = weights_in_file(w->o);
    for (int k = 0; k < z->nseg; k++) {
        const zt_zero_segment *g = &z->seg[k];
        size_t l0 = g->local > w0 ? g->local : w0, l1 = g->local + (g->hi - g->lo);
        if (l1 > w0 + n) l1 = w0 + n;
        if (l0 >= l1) continue;
        size_t lo = g->lo + (l0 - g->local), hi = g->lo + (l1 - g->local); /* in the flat array */
        for (int i = 0; i < m->n_tensors; i++) {
            const zt_llama_tensor *t = &m->tensors[i];
            size_t a = t->offset, b = a + (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
            a = a > lo ? a : lo, b = b < hi ? b : hi;
            if (a >= b) continue;
            size_t j = g->local + (a - g->lo);
            float *wt = in_file ? arrays[ZT_SWAP_MASTER] + (j - w0) : z->master + j;
            float *gr = in_file ? arrays[ZT_SWAP_GRAD] + (j - w0) : z->grad + j;
            zt_adamw h = *w->h;
            h.lr *= t->lr_scale;
            z->be->adamw(z->be, &h, wt, gr, mm + (j - w0), vv + (j - w0), b - a, w->coef, t->decay,
                         z->params16 ? z->params16 + a : NULL);
        }
    }
    zt_zero_window_out(z, w0, n); /* the window's weights go up while the next one is updated */
    return ZT_OK;
}

zt_status zt_optstate_step(zt_optstate *o, const zt_llama *m, const zt_adamw *h, float coef)
{
    window w = {o, m, h, coef};
    if (o->q8) return zt_optstate8_step(o->q8, h, coef);
    if (!o->m) return zt_swap_update(o->swap, adamw_window, &w);
    size_t n = o->z->local_numel, size = zt_zero_window_size(o->z);
    if (!size) size = n;
    for (size_t lo = 0; lo < n; lo += size) { /* the moments' windows of the same elements */
        float *in_memory[2] = {o->m + lo, o->v + lo};
        zt_status st = adamw_window(&w, lo, n - lo < size ? n - lo : size, in_memory);
        if (st) return st;
    }
    return ZT_OK;
}

/* The shard's arrays in pieces: weights from z.master, moments from memory or the swap file. */
typedef struct source {
    zt_optstate *o;
    size_t base; /* the first local element the shard holds */
} source;

static zt_status read_piece(void *ctx, int array, size_t first, size_t n, float *dst)
{
    source *s = ctx;
    size_t at = s->base + first;
    zt_backend *be = s->o->z->be;
    if (array == 0 && weights_in_file(s->o)) return zt_swap_get(s->o->swap, ZT_SWAP_MASTER, at, n, dst);
    if (array == 0) be->download(be, dst, s->o->z->master + at, n * sizeof *dst);
    else if (s->o->q8) zt_optstate8_read(s->o->q8, array - 1, at, n, dst);
    else if (s->o->m) be->download(be, dst, (array == 1 ? s->o->m : s->o->v) + at, n * sizeof *dst);
    else return zt_swap_get(s->o->swap, array == 1 ? ZT_SWAP_M : ZT_SWAP_V, at, n, dst);
    return ZT_OK;
}

/* This rank's part of a checkpoint: what it updates (zero.seg, packed in its arrays from
 * local 0), or at stage 0, where every rank updates everything, its zt_state_slice. */
zt_status zt_optstate_save(zt_optstate *o, const char *dir)
{
    const zt_zero *z = o->z;
    if (o->q8) zt_optstate8_pull(o->q8);
    source src = {o, 0};
    if (z->stage == 0) {
        zt_state_segment one;
        zt_state_slice(z->numel, z->world, z->rank, &one.offset, &one.count);
        src.base = one.offset;
        return zt_state_write_shard_from(dir, z->rank, z->world, z->numel, &one, 1, read_piece, &src);
    }
    zt_state_segment *segs = malloc((size_t)z->nseg * sizeof *segs);
    if (!segs) return zt_fail(ZT_ENOMEM, "out of memory");
    for (int i = 0; i < z->nseg; i++) segs[i] = (zt_state_segment){z->seg[i].lo, z->seg[i].hi - z->seg[i].lo};
    zt_status st = zt_state_write_shard_from(dir, z->rank, z->world, z->numel, segs, z->nseg, read_piece, &src);
    free(segs);
    return st;
}

/* n restored elements of array a (ZT_SWAP_*) at local element `at` */
static zt_status put(zt_optstate *o, int a, size_t at, size_t n, const float *src)
{
    if (a == ZT_SWAP_MASTER ? weights_in_file(o) : !o->m) return zt_swap_put(o->swap, a, at, n, src);
    float *dst = a == ZT_SWAP_MASTER ? o->z->master : a == ZT_SWAP_M ? o->m : o->v;
    o->z->be->upload(o->z->be, dst + at, src, n * sizeof *src);
    return ZT_OK;
}

/* Stage 3's weight slices of this rank alone (adamw_8bit restores its moments itself): straight
 * into host memory, or to a device 16M elements at a time. */
static zt_status restore_slices(const zt_zero *z, const char *dir, size_t numel)
{
    size_t piece = (size_t)16 << 20;
    float *bounce = z->be->host_memory ? NULL : malloc(piece * sizeof *bounce);
    if (!z->be->host_memory && !bounce) return zt_fail(ZT_ENOMEM, "out of memory restoring the optimizer state");
    zt_status st = ZT_OK;
    for (int i = 0; i < z->nseg && !st; i++) {
        const zt_zero_segment *g = &z->seg[i];
        for (size_t j = 0; j < g->hi - g->lo && !st; j += piece) {
            size_t n = g->hi - g->lo - j < piece ? g->hi - g->lo - j : piece;
            float *at = z->master + g->local + j;
            st = zt_state_read_range(dir, numel, g->lo + j, n, bounce ? bounce : at, NULL, NULL);
            if (!st && bounce) z->be->upload(z->be, at, bounce, n * sizeof *bounce);
        }
    }
    free(bounce);
    return st;
}

zt_status zt_optstate_restore(zt_optstate *o, const char *dir, size_t numel)
{
    const zt_zero *z = o->z;
    if (o->q8) {
        zt_status st = z->stage == 3 ? restore_slices(z, dir, numel) : ZT_OK;
        return st ? st : zt_optstate8_restore(o->q8, dir, numel);
    }
    int sharded = z->stage == 3 && !weights_in_file(o); /* the weights are this rank's segments too */
    int direct = o->m && z->be->host_memory; /* else a piece at a time through the swap file or to the device */
    size_t piece = direct ? 0 : o->m ? (size_t)16 << 20 : o->swap->chunk;
    float *bounce[3] = {NULL, NULL, NULL};
    for (int b = 0; b < 3 && piece; b++)
        if (!(bounce[b] = malloc(piece * sizeof(float)))) {
            free(bounce[0]), free(bounce[1]);
            return zt_fail(ZT_ENOMEM, "out of memory restoring the optimizer state");
        }
    zt_status st = ZT_OK;
    for (int i = 0; i < z->nseg && !st; i++) {
        const zt_zero_segment *g = &z->seg[i];
        size_t len = g->hi - g->lo;
        if (sharded && direct) st = zt_state_read_range(dir, numel, g->lo, len, z->master + g->local, NULL, NULL);
        if (direct) {
            if (!st) st = zt_state_read_range(dir, numel, g->lo, len, NULL, o->m + g->local, o->v + g->local);
            continue;
        }
        for (size_t j = 0; j < len && !st; j += piece) {
            size_t n = len - j < piece ? len - j : piece;
            /* offload.param = "nvme": into the swap file too; sharded on a device: up with the moments */
            float *weights = weights_in_file(o) || sharded ? bounce[2] : NULL;
            if (!(st = zt_state_read_range(dir, numel, g->lo + j, n, weights, bounce[0], bounce[1])) &&
                !(st = put(o, ZT_SWAP_M, g->local + j, n, bounce[0])) &&
                !(st = put(o, ZT_SWAP_V, g->local + j, n, bounce[1])) && weights)
                st = put(o, ZT_SWAP_MASTER, g->local + j, n, weights);
        }
    }
    for (int b = 0; b < 3; b++) free(bounce[b]);
    return st;
}

void zt_optstate_take_io(zt_optstate *o, uint64_t *read, uint64_t *written, double *wait_s)
{
    *read = *written = 0, *wait_s = 0;
    if (!o->aio) return;
    zt_aio_take_bytes(o->aio, read, written);
    *wait_s = zt_aio_take_wait_s(o->aio);
}
