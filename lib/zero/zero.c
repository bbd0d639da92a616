/* ZeRO stages 0-2, and what all stages share. */
#include "zero.h"

#include <stdlib.h>
#include <string.h>

#include "lib/ckpt/state.h"
#include "lib/core/pages.h"
#include "zero3.h"

/* Host copies of the flat arrays, the weights downloaded (staged: zero.h). Stage 3 frees
 * their pages unit by unit (zt_pages_discard); the others keep them pinned for fast copies. */
static void *host_alloc(zt_zero *z, size_t bytes)
{
    return z->stage == 3 ? zt_pages_alloc(bytes) : z->model_be->host_alloc(z->model_be, bytes);
}

static void host_free(zt_zero *z, void *p)
{
    if (z->stage == 3) zt_pages_free(p);
    else z->model_be->host_free(z->model_be, p);
}

static zt_status stage_in(zt_zero *z)
{
    size_t bytes = (z->numel + ZT_LLAMA_PAD) * sizeof(float);
    z->params = host_alloc(z, bytes);
    z->grads = host_alloc(z, bytes);
    if (!z->params || !z->grads) return zt_fail(ZT_ENOMEM, "out of host memory for %zu parameters", z->numel);
    z->m->be->download(z->m->be, z->params, z->m->params, z->numel * sizeof(float));
    return ZT_OK;
}

zt_status zt_zero_init(zt_zero *z, zt_comm *comm, const zt_zero_options *o, zt_llama *m)
{
    memset(z, 0, sizeof *z);
    z->comm = comm;
    z->m = m;
    z->o = *o;
    z->world = comm ? zt_comm_size(comm) : 1;
    z->rank = comm ? zt_comm_rank(comm) : 0;
    /* one rank: nothing to shard, unless the weights are to leave the device between uses */
    z->stage = z->world > 1 || o->host_params ? o->stage : 0;
    if (z->world == 1) { /* nothing to communicate: ZeRO++ is off */
        z->o.quantized_weights = z->o.quantized_gradients = z->o.error_feedback = z->o.measure_quant = 0;
        z->o.hpz = 1;
    }
    z->numel = m->numel;
    z->p = (z->numel + z->world - 1) / z->world;
    z->staged = !m->be->host_memory && (z->world > 1 || o->host_optimizer || o->host_params);
    z->be = z->staged ? zt_backend_cpu() : m->be;
    z->model_be = m->be;
    z->params = m->params, z->grads = m->grads;
    /* AdamW writes the bf16 copy along, except at stage 3, where a gather makes each unit's copy */
    z->params16 = z->comm || z->staged || z->stage == 3 ? NULL : m->params16;
    zt_status st = z->staged ? stage_in(z) : ZT_OK;
    if (st) return st;
    if (z->stage < 3 && z->p * z->world - z->numel > ZT_LLAMA_PAD)
        return zt_fail(ZT_EUSER, "world size %d is too large", z->world);
    if (!(z->seg = malloc((size_t)zt_zero_nsegments(m, z->stage) * sizeof *z->seg)))
        return zt_fail(ZT_ENOMEM, "out of memory");
    z->local_numel = zt_zero_segments(m, z->stage, z->world, z->rank, z->seg, &z->nseg);
    if (z->stage == 3) return zt_zero3_init(z);
    z->master = z->params + z->seg[0].lo;
    z->grad = z->grads + z->seg[0].lo;
    return ZT_OK;
}

int zt_zero_nsegments(const zt_llama *m, int stage) { return stage == 3 ? zt_llama_units(m) : 1; }

size_t zt_zero_segments(const zt_llama *m, int stage, int world, int rank, zt_zero_segment *seg, int *nseg)
{
    size_t local = 0;
    *nseg = zt_zero_nsegments(m, stage);
    for (int i = 0; i < *nseg; i++) {
        size_t off = 0, n = m->numel, lo = 0, mine = n;
        if (stage == 3) zt_llama_unit_range(m, i, &off, &n);
        if (stage > 0) zt_state_slice(n, world, rank, &lo, &mine); /* ceil(n / world) a rank, the last ones less */
        seg[i] = (zt_zero_segment){off + lo, off + lo + mine, local};
        local += mine;
    }
    return local;
}

void zt_zero_free(zt_zero *z)
{
    if (z->z3) zt_zero3_free(z);
    if (z->staged) {
        host_free(z, z->params);
        host_free(z, z->grads);
    }
    free(z->seg);
    memset(z, 0, sizeof *z);
}

zt_status zt_zero_sum(zt_zero *z, double *v, int n)
{
    return z->comm && z->world > 1 ? zt_comm_allreduce_sum_f64(z->comm, v, (size_t)n, ZT_COMM_OTHER) : ZT_OK;
}

void zt_zero_zero_grads(zt_zero *z)
{
    zt_backend *be = z->m->be;
    if (z->stage == 3) zt_zero3_zero_grads(z);
    else be->memset0(be, z->m->grads, z->numel * sizeof *z->m->grads);
}

zt_status zt_zero_reduce_grads(zt_zero *z)
{
    zt_backend *be = z->m->be;
    if (z->stage == 3) { /* reduced unit by unit in the backward pass */
        zt_status st = zt_zero3_error(z);
        return !st && z->swap ? zt_p3_flush(z) : st;
    }
    if (z->staged) be->download(be, z->grads, z->m->grads, z->numel * sizeof(float));
    if (z->world == 1) return ZT_OK;
    float *g = z->grads;
    if (z->stage < 2) return zt_comm_allreduce_sum(z->comm, g, z->numel, ZT_COMM_GRAD_REDUCE);
    /* in place: block r lands at r·p */
    return zt_comm_reduce_scatter_sum(z->comm, g, g + z->p * z->rank, z->p, z->numel, ZT_COMM_GRAD_REDUCE);
}

zt_status zt_zero_grad_sumsq(zt_zero *z, double *out)
{
    if (z->stage < 2) { /* every rank holds the whole summed gradient */
        *out = z->be->sumsq(z->be, z->grads, z->numel);
        return ZT_OK;
    }
    *out = z->swap ? zt_p3_sumsq(z) : z->be->sumsq(z->be, z->grad, z->local_numel);
    return zt_zero_sum(z, out, 1);
}

zt_status zt_zero_params_updated(zt_zero *z)
{
    zt_status st = ZT_OK;
    zt_backend *be = z->m->be;
    if (z->stage == 1 || z->stage == 2) /* in place */
        st = zt_comm_allgather(z->comm, z->params + z->p * z->rank, z->params, z->p * sizeof(float), ZT_COMM_OTHER);
    if (!st && z->staged && z->stage < 3) be->upload(be, z->m->params, z->params, z->numel * sizeof(float));
    if (!st && !z->params16 && z->stage < 3) zt_llama_sync_params16(z->m); /* else AdamW wrote the bf16 copy */
    if (z->z3) zt_zero3_params_updated(z);
    return st;
}

zt_status zt_zero_read_params(zt_zero *z, const char *dir, size_t numel)
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

zt_zero_memory zt_zero_memory_use(const zt_zero *z)
{
    size_t n = z->numel, local = z->local_numel, copy16 = z->m->params16 ? 2 : 0;
    zt_zero_memory u = {.params = n * (4 + copy16), .grads = n * 4, .optimizer = local * 8};
    if (z->z3) {
        u.params = (local + z->z3->secondary_numel) * 4; /* the bf16 copy exists only for gathered units */
        u.grads = (local + (z->z3->residual ? 2 * z->numel : 0)) * 4;
        u.gathered_peak = zt_zero3_gathered_peak(z);
        if (z->swap) { /* weights, gradient and moments in the file; what stays is the staging */
            u.params = z->z3->secondary_numel * 4, u.grads -= local * 4, u.optimizer = 0;
            u.gathered_peak += (size_t)(z->z3->nstage + 2) * z->z3->slice_bytes;
        }
    }
    return u;
}

zt_status zt_zero_read_weights(zt_zero *z, float *dst, size_t first, size_t n)
{
    for (int i = 0; i < z->nseg && n; i++) {
        const zt_zero_segment *g = &z->seg[i];
        if (first < g->lo || first >= g->hi) continue;
        size_t k = g->hi - first < n ? g->hi - first : n, at = g->local + (first - g->lo);
        zt_status st = z->swap ? zt_swap_get(z->swap, ZT_SWAP_MASTER, at, k, dst) : ZT_OK;
        if (st) return st;
        if (!z->swap) z->be->download(z->be, dst, z->master + at, k * sizeof(float));
        dst += k, first += k, n -= k;
        i = -1; /* the next piece may lie in any segment */
    }
    return n ? zt_fail(ZT_ERUNTIME, "rank %d holds no weights at element %zu", z->rank, first) : ZT_OK;
}
