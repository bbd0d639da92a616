#include "zero.h"

#include <string.h>

#include "lib/model/llama.h"
#include "lib/optim/clip.h"

zt_status zt_zero_init(zt_zero *z, zt_comm *comm, int stage, size_t numel)
{
    memset(z, 0, sizeof *z);
    z->comm = comm;
    z->world = comm ? zt_comm_size(comm) : 1;
    z->rank = comm ? zt_comm_rank(comm) : 0;
    z->stage = z->world > 1 ? stage : 0; /* one rank: nothing to shard */
    if (z->stage > 2)
        return zt_fail(ZT_EUSER, "zero.stage = %d is not supported yet with %d ranks (use 0, 1 or 2)", stage, z->world);
    z->numel = numel;
    z->p = (numel + z->world - 1) / z->world;
    if (z->p * z->world - numel > ZT_LLAMA_PAD) return zt_fail(ZT_EUSER, "world size %d is too large", z->world);
    z->lo = 0, z->hi = numel;
    if (z->stage >= 1) {
        z->lo = z->p * z->rank < numel ? z->p * z->rank : numel;
        z->hi = z->lo + z->p < numel ? z->lo + z->p : numel;
    }
    return ZT_OK;
}

void zt_zero_free(zt_zero *z) { memset(z, 0, sizeof *z); }

zt_status zt_zero_sum(zt_zero *z, double *v, int n)
{
    return z->comm && z->world > 1 ? zt_comm_allreduce_sum_f64(z->comm, v, (size_t)n, ZT_COMM_OTHER) : ZT_OK;
}

zt_status zt_zero_reduce_grads(zt_zero *z, float *grads)
{
    if (z->world == 1) return ZT_OK;
    if (z->stage < 2) return zt_comm_allreduce_sum(z->comm, grads, z->numel, ZT_COMM_GRAD_REDUCE);
    /* in place: block r lands at r·p; the padding past numel is zero in every rank's gradient */
    return zt_comm_reduce_scatter_sum(z->comm, grads, grads + z->p * z->rank, z->p, ZT_COMM_GRAD_REDUCE);
}

zt_status zt_zero_grad_sumsq(zt_zero *z, const float *grads, double *out)
{
    if (z->stage < 2) { /* every rank holds the whole summed gradient */
        *out = zt_sumsq(grads, z->numel);
        return ZT_OK;
    }
    *out = zt_sumsq(grads + z->lo, z->hi - z->lo);
    return zt_zero_sum(z, out, 1);
}

zt_status zt_zero_gather_params(zt_zero *z, float *params)
{
    if (z->stage < 1) return ZT_OK;
    return zt_comm_allgather(z->comm, params + z->p * z->rank, params, z->p * sizeof(float), ZT_COMM_OTHER); /* in place */
}
