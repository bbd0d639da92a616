/* ZeRO stage 3: each unit's weights gathered just before use and freed right after,
 * gradients reduce-scattered unit by unit, through the model's hooks (zero.h). This rank's
 * slices come from and go to the slice store (zero3.h). */
#include "zero3.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/log.h"
#include "lib/core/pages.h"

static void hold(zt_zero3 *s, long long bytes)
{
    s->held += bytes;
    if (s->held > s->held_peak) s->held_peak = s->held;
}

static size_t weight_bytes(const zt_zero *z, const zt_unit3 *u) { return zt_llama_weight_bytes(z->m, u->n); }

/* A model without gradients (LoRA's base, zero.h): its units are gathered, nothing is reduced. */
static int frozen(const zt_zero *z) { return !z->m->grads; }

static void keep_error(zt_zero3 *s, zt_status st)
{
    if (!s->error) s->error = st;
}

/* The host memory a staged unit's gathered weights go up from: in one process its slice itself. */
static const float *host_weights(const zt_zero *z, const zt_unit3 *u)
{
    return z->comm ? z->params + u->off : u->slice;
}

static void start_gather(zt_zero *z, int i, zt_comm_purpose p)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    if (u->weights != UNIT_OUT) return;
    u->weights = UNIT_GATHERING;
    hold(s, (long long)weight_bytes(z, u));
    zt_backend *be = z->m->be;
    zt_status st = be->populate(be, z->m->params + u->off, u->n * sizeof(float));
    if (!st && z->m->params16) st = be->populate(be, z->m->params16 + u->off, u->n * 2);
    keep_error(s, st);
    if (s->error) return;
    /* hpZ: the backward gathers inside the group; a frozen model's every gather after its first, as
       its secondary slices never go stale */
    if ((p == ZT_COMM_BWD_GATHER || frozen(z)) && zt_hpz_holds(z, i)) {
        s->error = zt_hpz_start(z, i, p);
        return;
    }
    s->error = s->store.ops->read_start(z, i, &u->slice);
    /* several ranks: the slice must be in before the collective; one process: copied once read (finish_gather) */
    if (!s->error && z->comm) s->error = s->store.ops->read_wait(z, i);
    if (s->error) return;
    if (s->overlap) { /* the slice is in memory: up beside the compute, finish_gather waits for it */
        u->upload = be->upload_start(be, z->m->params + u->off, u->slice, u->n * sizeof(float));
        return;
    }
    if (s->o.quantized_weights) s->error = zt_qwz_start(z, i, p, u->slice);
    else if (z->dcomm) /* beside the compute on NCCL: finish_gather's kernels wait for it */
        s->error = zt_comm_device_allgather(z->dcomm, u->slice, z->params + u->off, u->p * sizeof(float),
                                            u->n * sizeof(float), p, &u->upload);
    else if (z->comm)
        s->error = zt_comm_iallgather(z->comm, u->slice, z->params + u->off, u->p * sizeof(float), u->n * sizeof(float),
                                      p, &u->req[0]);
}

static void finish_gather(zt_zero *z, int i, zt_comm_purpose p)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    zt_llama *m = z->m;
    if (u->weights == UNIT_IN) return;
    start_gather(z, i, p); /* nothing when prefetched */
    double t = zt_now_s();
    for (int k = 0; k < 2; k++) {
        keep_error(s, zt_comm_wait(z->comm, u->req[k]));
        u->req[k] = NULL;
    }
    z->wait_s += zt_now_s() - t;
    if (u->qwz.staging && !s->error) s->error = zt_qwz_finish(z, i);
    /* one process: the only slice is the unit (staged, it goes up from there) */
    if (!z->comm && u->slice && !s->error) {
        s->error = s->store.ops->read_wait(z, i);
        if (!s->error && !z->staged) memcpy(m->params + u->off, u->slice, u->n * sizeof(float));
    }
    u->weights = UNIT_IN;
    if (p == ZT_COMM_FWD_GATHER) zt_hpz_keep(z, i);
    if (u->upload) m->be->fence_use(m->be, u->upload); /* the kernels that read the unit wait for its upload */
    else if (z->staged && !s->error) m->be->upload(m->be, m->params + u->off, host_weights(z, u), u->n * sizeof(float));
    u->upload = 0;
    s->store.ops->release(z, i);
    u->slice = NULL;
    if (m->params16) m->be->to_bf16(m->be, m->params16 + u->off, m->params + u->off, u->n);
}

static void drop_params(zt_zero *z, int i)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    zt_llama *m = z->m;
    if (u->weights == UNIT_GATHERING)
        finish_gather(z, i, ZT_COMM_OTHER); /* a prefetch nobody used: its buffer is busy */
    if (u->weights != UNIT_IN) return;
    m->be->discard(m->be, m->params + u->off, u->n * sizeof(float));
    if (m->params16) m->be->discard(m->be, m->params16 + u->off, u->n * 2);
    if (z->staged) zt_pages_discard(z->params + u->off, u->n * sizeof(float));
    u->weights = UNIT_OUT;
    u->for_backward = 0;
    hold(s, -(long long)weight_bytes(z, u));
}

/* The unit's gradient of this micro-batch summed over the ranks: this rank's slice of it, into out. */
static zt_status reduced_slice(zt_zero *z, const zt_unit3 *u, float *out)
{
    zt_zero3 *s = z->z3;
    zt_llama *m = z->m;
    size_t bytes = u->n * sizeof(float);
    if (!z->comm) { /* one process: the unit's gradient is its reduction */
        if (s->overlap) m->be->download_start(m->be, out, m->grads + u->off, bytes); /* reduce_grads waits */
        else if (z->staged) m->be->download(m->be, out, m->grads + u->off, bytes);
        else memcpy(out, z->grads + u->off, bytes);
        return ZT_OK;
    }
    if (z->staged) m->be->download(m->be, z->grads + u->off, m->grads + u->off, bytes);
    if (s->o.quantized_gradients) return zt_qgz_reduce_unit(z, (int)(u - s->u), out);
    if (z->dcomm) /* the next unit's gradient may be unmapped: no room past this one */
        return zt_comm_device_reduce_scatter_sum(z->dcomm, z->grads + u->off, out, u->p, u->n, u->n,
                                                 ZT_COMM_GRAD_REDUCE, NULL);
    return zt_comm_reduce_scatter_sum(z->comm, z->grads + u->off, out, u->p, u->n, ZT_COMM_GRAD_REDUCE);
}

/* The unit's gradient in the model's array before its backward pass adds to it: zeros, or in one
 * rank what the step's earlier micro-batches left, so that the backward kernels accumulate the
 * step's gradient exactly as without ZeRO (bitwise stage 0; a sum of separate micro-batch
 * gradients would round differently). With several ranks each micro-batch's gradient is reduced
 * on its own and added to the slice (reduce). */
static void load_grads(zt_zero *z, int i)
{
    zt_zero3 *s = z->z3;
    const zt_unit3 *u = &s->u[i];
    zt_backend *be = z->m->be;
    float *g = z->m->grads + u->off;
    size_t bytes = u->n * sizeof(float);
    if (z->world > 1 || u->fresh) {
        be->memset0(be, g, bytes);
        return;
    }
    const float *sum = NULL;
    zt_status st = s->store.ops->grad_read(z, i, &sum);
    keep_error(s, st);
    if (st) return;
    if (s->overlap) /* on the copy stream, behind the download of that sum */
        be->fence_use(be, be->upload_start(be, g, sum, bytes));
    else if (z->staged) be->upload(be, g, sum, bytes);
    else memcpy(g, sum, bytes);
}

/* The unit's gradient of this micro-batch, summed over the ranks, into this rank's slice. */
static void reduce(zt_zero *z, int i)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    zt_llama *m = z->m;
    if (!u->grads_in) return;
    float *into = NULL;
    if (!s->error) s->error = s->store.ops->grad_target(z, i, &into);
    if (!s->error) s->error = reduced_slice(z, u, into);
    if (!s->error) s->error = s->store.ops->grad_write(z, i, into);
    u->fresh = 0;
    m->be->discard(m->be, m->grads + u->off, u->n * sizeof(float));
    if (z->staged) zt_pages_discard(z->grads + u->off, u->n * sizeof(float));
    u->grads_in = 0;
    hold(s, -(long long)(u->n * sizeof(float)));
}

/* Starts the gathers of the next units in this pass's order (none for a recompute, whose
 * units come in forward order inside the backward pass). */
static void prefetch(zt_zero *z, int i, zt_llama_use use)
{
    zt_zero3 *s = z->z3;
    if (use == ZT_LLAMA_FORWARD) {
        if (i < s->fwd_pos) return;
        s->fwd_pos = i;
        for (int v = i + 1; v <= i + s->o.prefetch_layers && v < s->units; v++) start_gather(z, v, ZT_COMM_FWD_GATHER);
    } else if (use == ZT_LLAMA_BACKWARD) {
        for (int v = i - 1; v >= i - s->o.prefetch_layers && v >= s->weightless; v--) {
            start_gather(z, v, ZT_COMM_BWD_GATHER);
            s->u[v].for_backward = 1;
        }
    }
}

static void on_acquire(void *ctx, int i, zt_llama_use use)
{
    zt_zero *z = ctx;
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    if (use != ZT_LLAMA_GRADS) {
        finish_gather(z, i, use == ZT_LLAMA_FORWARD ? ZT_COMM_FWD_GATHER : ZT_COMM_BWD_GATHER);
        prefetch(z, i, use);
    }
    if ((use == ZT_LLAMA_BACKWARD || use == ZT_LLAMA_GRADS) && !frozen(z) && !u->grads_in) {
        keep_error(s, z->m->be->populate(z->m->be, z->m->grads + u->off, u->n * sizeof(float)));
        load_grads(z, i);
        u->grads_in = 1;
        hold(s, (long long)(u->n * sizeof(float)));
    }
}

static void on_release(void *ctx, int i, zt_llama_use use)
{
    zt_zero *z = ctx;
    if (i == z->z3->pinned) return;                                    /* until the micro-batch ends */
    if (use == ZT_LLAMA_RECOMPUTE && z->z3->u[i].for_backward) return; /* its backward comes next */
    if (use == ZT_LLAMA_BACKWARD || use == ZT_LLAMA_GRADS) reduce(z, i);
    drop_params(z, i);
}

static void on_finish(void *ctx, int backward)
{
    zt_zero *z = ctx;
    zt_zero3 *s = z->z3;
    for (int i = 0; i < s->units; i++) {
        reduce(z, i);
        drop_params(z, i);
    }
    s->fwd_pos = 0;
}

/* Each unit and this rank's slice of it, z.seg[i] (zt_zero_segments). */
static zt_status cut_units(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    s->u = calloc((size_t)s->units, sizeof *s->u);
    if (!s->u) return zt_fail(ZT_ENOMEM, "out of memory");
    for (int i = 0; i < s->units; i++) {
        zt_unit3 *u = &s->u[i];
        zt_llama_unit_range(z->m, i, &u->off, &u->n);
        u->p = (u->n + z->world - 1) / z->world;
        u->mine = z->seg[i].hi - z->seg[i].lo;
        u->local = z->seg[i].local;
    }
    return ZT_OK;
}

static zt_status init(zt_zero *z)
{
    zt_llama *m = z->m;
    zt_zero3 *s = z->z3 = calloc(1, sizeof *s);
    if (!s) return zt_fail(ZT_ENOMEM, "out of memory");
    s->o = z->o;
    s->units = zt_llama_units(m);
    s->pinned = m->cfg.tie_word_embeddings ? 0 : -1;
    s->weightless = zt_llama_embed_tiles(m);
    zt_status st = cut_units(z);
    if (st) return st;
    s->store.ops = z->o.params_at == ZT_PARAM_NVME ? &zt_store_nvme : &zt_store_memory;
    s->overlap = !z->comm && z->staged && s->store.ops == &zt_store_memory; /* its slices are pinned then */
    st = s->store.ops->open(z, zt_zero3_reads(m, &s->o));
    if (st) return st;
    /* the rest of the model is gathered when used */
    st = zt_zeropp_init(z);
    if (st) return st;
    m->be->discard(m->be, m->params, (m->numel + ZT_LLAMA_PAD) * sizeof(float));
    if (m->grads) m->be->discard(m->be, m->grads, (m->numel + ZT_LLAMA_PAD) * sizeof(float));
    if (m->params16) m->be->discard(m->be, m->params16, m->numel * 2);
    if (z->staged) zt_pages_discard(z->params, (m->numel + ZT_LLAMA_PAD) * sizeof(float));
    s->hooks = (zt_llama_hooks){z, on_acquire, on_release, on_finish};
    m->hooks = &s->hooks;
    return ZT_OK;
}

static void free_stage3(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    if (!s) return;
    if (z->m && z->m->hooks == &s->hooks) z->m->hooks = NULL;
    for (int i = 0; s->u && i < s->units; i++) { /* never leave MPI a dead buffer */
        zt_comm_wait(z->comm, s->u[i].req[0]);
        zt_comm_wait(z->comm, s->u[i].req[1]);
        free(s->u[i].qwz.staging);
    }
    if (s->store.ops) s->store.ops->close(z);
    if (s->u) zt_zeropp_free(z);
    free(s->u);
    free(s);
    z->z3 = NULL;
}

/* The first collective that failed inside the model's hooks since the last call. */
static zt_status take_error(zt_zero *z)
{
    zt_status st = z->z3->error;
    z->z3->error = ZT_OK;
    return st;
}

static void zero_grads(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    if (frozen(z)) return;
    for (int i = 0; i < s->units; i++) s->u[i].fresh = 1;
    s->store.ops->zero_grads(z);
}

/* The gradients were reduced unit by unit in the backward pass: what is left is to report a
 * collective that failed there (a frozen model's only task here), and to complete the slices. */
static zt_status reduce_grads(zt_zero *z)
{
    if (z->z3->overlap) z->m->be->sync(z->m->be); /* the gradients' downloads */
    zt_status st = take_error(z);
    return st || frozen(z) ? st : z->z3->store.ops->flush(z);
}

static zt_status grad_sumsq(zt_zero *z, double *out)
{
    *out = frozen(z) ? 0 : z->z3->store.ops->grad_sumsq(z);
    return zt_zero_allsum(z, out, 1);
}

/* The next use gathers the new weights; hpZ's secondary slices are stale (a frozen model's never are). */
static zt_status params_updated(zt_zero *z)
{
    for (int i = 0; i < z->z3->units && !frozen(z); i++) z->z3->u[i].hpz.held = 0;
    return ZT_OK;
}

static zt_status gather_all(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    for (int i = 0; i < s->units && s->store.ops->reads_at_once; i++) start_gather(z, i, ZT_COMM_OTHER);
    for (int i = 0; i < s->units; i++) finish_gather(z, i, ZT_COMM_OTHER); /* else one slice at a time */
    return take_error(z);
}

static void release_all(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    for (int i = 0; s && s->u && i < s->units; i++) drop_params(z, i); /* s: init may have failed */
}

static zt_status read_local(zt_zero *z, size_t at, size_t n, float *dst)
{
    return z->z3->store.ops->get_weights(z, at, n, dst);
}

static zt_zero_memory memory_use(const zt_zero *z)
{
    const zt_zero3 *s = z->z3;
    size_t local = z->local_numel, trained = frozen(z) ? 0 : local; /* a frozen model: weights alone */
    zt_zero_memory u = {
        .params = (local + s->hpz.numel) * 4, /* the bf16 copy exists only for gathered units */
        .grads = trained * 4 + (s->qgz.residual ? zt_zero_qgz_residual_bytes(z->m) : 0),
        .optimizer = trained * 8,
        .gathered_peak = s->held_peak,
    };
    s->store.ops->memory_use(z, &u);
    return u;
}

int zt_zero3_ahead(int prefetch_layers, int mlp_tiles, int checkpointing)
{
    return mlp_tiles > 1 && checkpointing ? 2 * prefetch_layers : prefetch_layers;
}

/* the units gathered ahead (zt_zero3_ahead) and two more */
int zt_zero3_reads(const zt_llama *m, const zt_zero_options *o)
{
    return zt_zero3_ahead(o->prefetch_layers, zt_llama_mlp_tiles(m), o->checkpointing) + 2;
}

/* The units held at once: the one computing and those gathered ahead, each at most the largest;
 * besides, a tied embedding (the pinned unit: from the forward pass's start to the backward
 * pass's end) and, with a tiled MLP and checkpointing, each layer's first unit while its tiles
 * are recomputed and go back. Gradients: the unit in backward and those that stay. */
size_t zt_zero3_gathered_bytes(const zt_llama *m, const zt_zero_options *o, size_t *grad_bytes)
{
    size_t largest = 0, off, count;
    for (int u = 0; u < zt_llama_units(m); u++) {
        zt_llama_unit_range(m, u, &off, &count);
        if (count > largest) largest = count;
    }
    int ahead = zt_zero3_ahead(o->prefetch_layers, zt_llama_mlp_tiles(m), o->checkpointing);
    size_t stay = m->cfg.tie_word_embeddings ? (size_t)m->V * m->C : 0;
    if (zt_llama_mlp_tiles(m) > 1 && o->checkpointing) stay += m->lay.wgu;
    *grad_bytes = (largest + stay) * sizeof(float);
    return zt_llama_weight_bytes(m, (size_t)(ahead + 1) * largest + stay);
}

/* This rank's segments of the weights come back with the optimizer state (zt_optstate_restore). */
static zt_status read_params(zt_zero *z, const char *dir, size_t numel)
{
    (void)z, (void)dir, (void)numel;
    return ZT_OK;
}

/* The nvme slice store's file (zero3_nvme.c sets z.swap), or NULL. */
static zt_swap *swap_file(const zt_zero *z) { return z->swap; }

const zt_zero_stage_ops zt_zero3_ops = {
    .pageable_copies = 1,
    .init = init,
    .free = free_stage3,
    .zero_grads = zero_grads,
    .reduce_grads = reduce_grads,
    .grad_sumsq = grad_sumsq,
    .params_updated = params_updated,
    .gather_all = gather_all,
    .release_all = release_all,
    .read_local = read_local,
    .memory_use = memory_use,
    .read_params = read_params,
    .swap = swap_file,
};
