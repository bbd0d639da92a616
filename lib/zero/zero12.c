/* ZeRO stages 0-2 (zero.h): one segment of the flat array per rank, z.master and z.grad views
 * of the flat arrays. */
#include "stage.h"

#include <stdlib.h>

#include "lib/ckpt/state.h"

/* zero.windows (zero.h): in one process the local elements are the flat array's */
typedef struct zt_zero_windows {
    size_t size, count; /* elements a window; windows */
    uint64_t *down;     /* each window's download fence */
    uint64_t up;        /* the last upload's fence, 0: none */
} zt_zero_windows;

/* elements a window: at most 64 MiB copies (enough to keep the bus busy, small enough to overlap),
 * and at least 8 windows where the model has 32 Ki elements (so that small models stream too) */
static size_t window_size(size_t numel)
{
    size_t size = (numel + 7) / 8, most = (size_t)16 << 20, least = (size_t)4 << 10;
    return size > most ? most : size < least ? least : size;
}

static zt_status init(zt_zero *z)
{
    if (z->p * z->world - z->numel > ZT_LLAMA_PAD) return zt_fail(ZT_EUSER, "world size %d is too large", z->world);
    z->master = z->params + z->seg[0].lo;
    z->grad = z->grads + z->seg[0].lo;
    if (!z->staged || z->world > 1) return ZT_OK; /* several ranks reduce the whole gradient first */
    zt_zero_windows *w = z->windows = calloc(1, sizeof *w);
    if (!w) return zt_fail(ZT_ENOMEM, "out of memory");
    w->size = window_size(z->numel), w->count = (z->numel + w->size - 1) / w->size;
    w->down = calloc(w->count ? w->count : 1, sizeof *w->down);
    return w->down ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory");
}

/* z.master and z.grad point into the flat arrays: nothing else but the windows */
static void free_views(zt_zero *z)
{
    if (z->windows) free(z->windows->down);
    free(z->windows);
    z->windows = NULL;
}

size_t zt_zero_window_size(const zt_zero *z) { return z->windows ? z->windows->size : 0; }

void zt_zero_window_in(const zt_zero *z, size_t lo, size_t n)
{
    zt_zero_windows *w = z->windows;
    if (w && n) z->m->be->fence_wait(z->m->be, w->down[(lo + n - 1) / w->size]); /* the copies come in order */
}

void zt_zero_window_out(const zt_zero *z, size_t lo, size_t n)
{
    zt_backend *be = z->m->be;
    if (z->windows && n) z->windows->up = be->upload_start(be, z->m->params + lo, z->params + lo, n * sizeof(float));
}

static void zero_grads(zt_zero *z)
{
    zt_backend *be = z->m->be;
    be->memset0(be, z->m->grads, z->numel * sizeof *z->m->grads);
}

static zt_status reduce_grads(zt_zero *z)
{
    zt_backend *be = z->m->be;
    zt_zero_windows *w = z->windows;
    for (size_t k = 0; w && k < w->count; k++) { /* AdamW waits for each (zt_zero_window_in) */
        size_t lo = k * w->size, n = z->numel - lo < w->size ? z->numel - lo : w->size;
        w->down[k] = be->download_start(be, z->grads + lo, z->m->grads + lo, n * sizeof(float));
    }
    if (z->staged && !w) be->download(be, z->grads, z->m->grads, z->numel * sizeof(float));
    if (z->world == 1) return ZT_OK;
    float *g = z->grads;
    if (z->dcomm && z->stage < 2) return zt_comm_device_allreduce_sum(z->dcomm, g, z->numel, ZT_COMM_GRAD_REDUCE, NULL);
    if (z->dcomm) /* the flat array has room for the last block's padding (NCCL moves whole blocks) */
        return zt_comm_device_reduce_scatter_sum(z->dcomm, g, g + z->p * z->rank, z->p, z->numel,
                                                 z->numel + ZT_LLAMA_PAD, ZT_COMM_GRAD_REDUCE, NULL);
    if (z->stage < 2) return zt_comm_allreduce_sum(z->comm, g, z->numel, ZT_COMM_GRAD_REDUCE);
    /* in place: block r lands at r·p */
    return zt_comm_reduce_scatter_sum(z->comm, g, g + z->p * z->rank, z->p, z->numel, ZT_COMM_GRAD_REDUCE);
}

static zt_status grad_sumsq(zt_zero *z, double *out)
{
    if (z->windows) { /* on the device, while the gradient comes down */
        *out = z->m->be->sumsq(z->m->be, z->m->grads, z->numel);
        return ZT_OK;
    }
    if (z->stage < 2) { /* every rank holds the whole summed gradient */
        *out = z->be->sumsq(z->be, z->grads, z->numel);
        return ZT_OK;
    }
    *out = z->be->sumsq(z->be, z->grad, z->local_numel);
    return zt_zero_allsum(z, out, 1);
}

static zt_status params_updated(zt_zero *z)
{
    zt_status st = ZT_OK;
    zt_backend *be = z->m->be;
    if (z->stage >= 1 && z->dcomm) /* in place */
        st = zt_comm_device_allgather(z->dcomm, z->params + z->p * z->rank, z->params, z->p * sizeof(float),
                                      z->p * z->world * sizeof(float), ZT_COMM_OTHER, NULL);
    else if (z->stage >= 1)
        st = zt_comm_allgather(z->comm, z->params + z->p * z->rank, z->params, z->p * sizeof(float), ZT_COMM_OTHER);
    if (z->windows) { /* each window went up as AdamW finished it */
        be->fence_use(be, z->windows->up);
        z->windows->up = 0;
    } else if (!st && z->staged) be->upload(be, z->m->params, z->params, z->numel * sizeof(float));
    if (!st && !z->params16) zt_llama_sync_params16(z->m); /* else AdamW wrote the bf16 copy */
    return st;
}

/* Every rank holds the whole model all the time. */
static zt_status gather_all(zt_zero *z)
{
    (void)z;
    return ZT_OK;
}

static void release_all(zt_zero *z) { (void)z; }

static zt_status read_local(zt_zero *z, size_t at, size_t n, float *dst)
{
    z->be->download(z->be, dst, z->master + at, n * sizeof(float));
    return ZT_OK;
}

static zt_zero_memory memory_use(const zt_zero *z)
{
    size_t n = z->numel;
    return (zt_zero_memory){.params = zt_llama_weight_bytes(z->m, n), .grads = n * 4, .optimizer = z->local_numel * 8};
}

/* Every rank reads the whole flat array, through its host copy when there is one. */
static zt_status read_params(zt_zero *z, const char *dir, size_t numel)
{
    zt_backend *be = z->m->be;
    float *host = be->host_memory || z->staged ? z->params : malloc(numel * sizeof(float));
    if (!host) return zt_fail(ZT_ENOMEM, "out of memory reading the weights of '%s'", dir);
    zt_status st = zt_state_read_range(dir, numel, 0, numel, host, NULL, NULL);
    if (!st && !be->host_memory) be->upload(be, z->m->params, host, numel * sizeof(float));
    if (host != z->params) free(host);
    if (!st) zt_llama_sync_params16(z->m);
    return st;
}

/* The weights stay in memory. */
static zt_swap *no_swap(const zt_zero *z)
{
    (void)z;
    return NULL;
}

const zt_zero_stage_ops zt_zero12_ops = {
    .pageable_copies = 0,
    .init = init,
    .free = free_views,
    .zero_grads = zero_grads,
    .reduce_grads = reduce_grads,
    .grad_sumsq = grad_sumsq,
    .params_updated = params_updated,
    .gather_all = gather_all,
    .release_all = release_all,
    .read_local = read_local,
    .memory_use = memory_use,
    .read_params = read_params,
    .swap = no_swap,
};
