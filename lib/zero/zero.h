/* zero: ZeRO data parallelism over the flat parameter array (stages 0-2).
 *
 * Every rank holds the whole model for compute. Stage 0 all-reduces gradients
 * and every rank runs the whole optimizer. Stage 1 keeps AdamW state only for this
 * rank's shard: gradients are all-reduced, the shard is updated, and the updated
 * shards are all-gathered. Stage 2 also reduces gradients straight into the owners'
 * shards (reduce-scatter). Shards are equal slices [r·p, (r+1)·p) with
 * p = ceil(numel / world) (the flat buffers have room for the padding).
 * With comm == NULL (one process) every call is local.
 *
 *     zt_zero z;
 *     zt_zero_init(&z, comm, recipe.zero.stage, m.numel);
 *     zt_zero_sum(&z, sums, 2);                 // loss and target counts over ranks
 *     zt_zero_reduce_grads(&z, m.grads);        // then AdamW on [z.lo, z.hi)
 *     zt_zero_gather_params(&z, m.params);      // every rank has the new weights
 */
#ifndef ZT_ZERO_H
#define ZT_ZERO_H

#include <stddef.h>

#include "lib/comm/comm.h"
#include "lib/core/status.h"

typedef struct zt_zero {
    zt_comm *comm; /* NULL: a single process */
    int stage, rank, world;
    size_t numel, p; /* elements, and per shard */
    size_t lo, hi;   /* the range this rank updates: its shard from stage 1 on, else everything */
} zt_zero;

zt_status zt_zero_init(zt_zero *z, zt_comm *comm, int stage, size_t numel);
void zt_zero_free(zt_zero *z);
/* Sums n doubles over the ranks, in place. */
zt_status zt_zero_sum(zt_zero *z, double *v, int n);
/* After backward: the summed gradient over all ranks in grads[lo, hi) (everywhere for stages 0-1). */
zt_status zt_zero_reduce_grads(zt_zero *z, float *grads);
/* Σ g² over the whole gradient, the same on every rank. */
zt_status zt_zero_grad_sumsq(zt_zero *z, const float *grads, double *out);
/* After the optimizer updated params[lo, hi): the whole array on every rank (stages 1-2). */
zt_status zt_zero_gather_params(zt_zero *z, float *params);

#endif
