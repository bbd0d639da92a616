/* ZeRO: the public functions of zero.h, which call the stage's table (stage.h), and what all
 * stages share. */
#include "zero.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ckpt/state.h"
#include "lib/core/pages.h"
#include "stage.h"

/* Host copies of the flat arrays, the weights downloaded (staged: zero.h). Stage 3 frees
 * their pages unit by unit (zt_pages_discard); the others keep them pinned for fast copies. */
static void *host_alloc(zt_zero *z, size_t bytes)
{
    return z->ops->pageable_copies ? zt_pages_alloc(bytes) : z->model_be->host_alloc(z->model_be, bytes);
}

static void host_free(zt_zero *z, void *p)
{
    if (z->ops->pageable_copies) zt_pages_free(p);
    else z->model_be->host_free(z->model_be, p);
}

static zt_status stage_in(zt_zero *z)
{
    size_t bytes = (z->numel + ZT_LLAMA_PAD) * sizeof(float);
    z->params = host_alloc(z, bytes);
    z->grads = z->m->grads ? host_alloc(z, bytes) : NULL; /* a frozen model has none */
    if (!z->params || (z->m->grads && !z->grads))
        return zt_fail(ZT_ENOMEM, "out of host memory for %zu parameters", z->numel);
    z->m->be->download(z->m->be, z->params, z->m->params, z->numel * sizeof(float));
    return ZT_OK;
}

int zt_zero_effective_stage(const zt_zero_options *o, int world)
{
    return world > 1 || o->params_at != ZT_PARAM_DEVICE ? o->stage : 0;
}

int zt_zero_staged(const zt_zero_options *o, int world, int host_memory)
{
    int zeropp = o->quantized_weights || o->hpz > 1 || o->quantized_gradients; /* its quantizers run on the host */
    int on_device = o->device_collectives && (zt_zero_effective_stage(o, world) < 3 || !zeropp);
    return !host_memory && ((world > 1 && !on_device) || o->host_optimizer || o->params_at != ZT_PARAM_DEVICE);
}

zt_status zt_zero_init(zt_zero *z, zt_comm *comm, const zt_zero_options *o, zt_llama *m)
{
    memset(z, 0, sizeof *z);
    z->comm = comm;
    z->m = m;
    z->o = *o;
    z->world = comm ? zt_comm_size(comm) : 1;
    z->rank = comm ? zt_comm_rank(comm) : 0;
    z->stage = zt_zero_effective_stage(o, z->world);
    if (z->world == 1) { /* nothing to communicate: ZeRO++ is off */
        z->o.quantized_weights = z->o.quantized_gradients = z->o.error_feedback = z->o.measure_quant = 0;
        z->o.hpz = 1;
    }
    z->numel = m->numel;
    z->p = (z->numel + z->world - 1) / z->world;
    z->staged = zt_zero_staged(o, z->world, m->be->host_memory);
    z->be = z->staged ? zt_backend_cpu() : m->be;
    z->model_be = m->be;
    z->params = m->params, z->grads = m->grads;
    /* AdamW writes the bf16 copy along, except at stage 3, where a gather makes each unit's copy */
    z->params16 = z->comm || z->staged || z->stage == 3 ? NULL : m->params16;
    ZT_ASSERT(m->grads || z->stage == 3); /* a frozen model is only ever sharded */
    z->ops = z->stage == 3 ? &zt_zero3_ops : &zt_zero12_ops;
    zt_status st = z->staged ? stage_in(z) : ZT_OK;
    if (!st && !z->staged && z->world > 1 && !m->be->host_memory) /* the device arrays themselves */
        st = zt_comm_device_open(comm, m->be, 1, &z->dcomm);
    if (st) return st;
    z->seg = malloc((size_t)zt_zero_nsegments(m, z->stage) * sizeof *z->seg);
    if (!z->seg) return zt_fail(ZT_ENOMEM, "out of memory");
    z->local_numel = zt_zero_segments(m, z->stage, z->world, z->rank, z->seg, &z->nseg);
    return z->ops->init(z);
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
        if (seg) seg[i] = (zt_zero_segment){off + lo, off + lo + mine, local};
        local += mine;
    }
    return local;
}

void zt_zero_free(zt_zero *z)
{
    if (z->ops) z->ops->free(z);
    zt_comm_device_close(z->dcomm);
    if (z->staged) {
        host_free(z, z->params);
        host_free(z, z->grads);
    }
    free(z->seg);
    memset(z, 0, sizeof *z);
}

zt_status zt_zero_sum(zt_zero *z, double *v, int n) { return zt_zero_allsum(z, v, n); }

void zt_zero_zero_grads(zt_zero *z) { z->ops->zero_grads(z); }

zt_status zt_zero_reduce_grads(zt_zero *z) { return z->ops->reduce_grads(z); }

zt_status zt_zero_grad_sumsq(zt_zero *z, double *out) { return z->ops->grad_sumsq(z, out); }

zt_status zt_zero_params_updated(zt_zero *z) { return z->ops->params_updated(z); }

zt_status zt_zero_gather_all(zt_zero *z) { return z->ops->gather_all(z); }

void zt_zero_release_all(zt_zero *z)
{
    if (z->ops) z->ops->release_all(z); /* also after a failed zt_zero_init, or none */
}

zt_zero_memory zt_zero_memory_use(const zt_zero *z) { return z->ops->memory_use(z); }

zt_status zt_zero_read_params(zt_zero *z, const char *dir, size_t numel) { return z->ops->read_params(z, dir, numel); }

zt_swap *zt_zero_swap(const zt_zero *z) { return z->ops->swap(z); }

zt_status zt_zero_read_weights(zt_zero *z, float *dst, size_t first, size_t n)
{
    for (int i = 0; i < z->nseg && n; i++) {
        const zt_zero_segment *g = &z->seg[i];
        if (first < g->lo || first >= g->hi) continue;
        size_t k = g->hi - first < n ? g->hi - first : n, at = g->local + (first - g->lo);
        zt_status st = z->ops->read_local(z, at, k, dst);
        if (st) return st;
        dst += k, first += k, n -= k;
        i = -1; /* the next piece may lie in any segment */
    }
    return n ? zt_fail(ZT_ERUNTIME, "rank %d holds no weights at element %zu", z->rank, first) : ZT_OK;
}

zt_status zt_zero_take_quant_error(zt_zero *z, double out[2])
{
    double *q = z->qerr;
    zt_status st = zt_zero_sum(z, q, 4);
    for (int k = 0; k < 2; k++) out[k] = q[2 * k + 1] > 0 ? sqrt(q[2 * k] / q[2 * k + 1]) : -1;
    memset(q, 0, 4 * sizeof *q);
    return st;
}

double zt_zero_take_wait_s(zt_zero *z)
{
    double t = z->wait_s;
    z->wait_s = 0;
    return t;
}
