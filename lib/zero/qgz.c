/* The quantized two-level reduce-scatter of qgz.h. Each slice travels in a slot of fixed
 * size: its int4 pieces, then (at a 4-byte boundary) its scales. */
#include "qgz.h"

#include <string.h>

#include "kernels/cpu/quant.h"
#include "lib/core/arena.h"

/* The slot of a slice of at most p elements: data bytes (scales start there), total bytes. */
static size_t slot_data(const zt_qpieces *l, size_t p)
{
    return ((p + 1) / 2 + zt_qpieces_most(l, p) + 3) & ~(size_t)3;
}

static size_t slot_bytes(const zt_qpieces *l, size_t p)
{
    return slot_data(l, p) + (zt_quant_nblocks(p, l->block) + zt_qpieces_most(l, p)) * sizeof(float);
}

zt_status zt_qgz_init(zt_qgz *q, zt_comm *world, size_t block, size_t widest, int most_cuts)
{
    memset(q, 0, sizeof *q);
    if (block < 1) return zt_fail(ZT_EUSER, "zero.quant_block_size must be at least 1");
    q->world = world, q->block = block, q->widest = widest, q->most_cuts = most_cuts;
    int rpn = zt_comm_ranks_per_node(world), size = zt_comm_size(world);
    zt_status st = zt_comm_split(world, rpn, 0, &q->node);
    if (!st) st = zt_comm_split(world, rpn, 1, &q->across);
    if (st) return st;
    zt_qpieces l = {NULL, most_cuts, block};
    size_t p = (widest + size - 1) / size, bytes = slot_bytes(&l, p) * (size_t)size;
    q->send = zt_calloc_aligned(bytes);
    q->recv = zt_calloc_aligned(bytes);
    q->sum = zt_calloc_aligned((p + 1) * sizeof(float));
    if (!q->send || !q->recv || !q->sum)
        return zt_fail(ZT_ENOMEM, "out of memory for qgZ's buffers (%zu bytes)", 3 * bytes);
    return ZT_OK;
}

void zt_qgz_free(zt_qgz *q)
{
    if (q->node != q->world) zt_comm_finalize(q->node); /* a world of one is its own group */
    if (q->across != q->world) zt_comm_finalize(q->across);
    zt_free(q->send);
    zt_free(q->recv);
    zt_free(q->sum);
    memset(q, 0, sizeof *q);
}

zt_status zt_qgz_reduce_scatter(zt_qgz *q, float *x, size_t n, const size_t *cuts, int ncuts, float *residual,
                                float *out, zt_comm_purpose purpose)
{
    ZT_ASSERT(n <= q->widest && ncuts <= q->most_cuts);
    int R = zt_comm_size(q->node), N = zt_comm_size(q->across), W = R * N, me = zt_comm_rank(q->world);
    zt_qpieces l = {cuts, ncuts, q->block};
    size_t p = (n + W - 1) / W, data = slot_data(&(zt_qpieces){NULL, q->most_cuts, q->block}, p);
    size_t bytes = slot_bytes(&(zt_qpieces){NULL, q->most_cuts, q->block}, p);
    if (residual)
        for (size_t j = 0; j < n; j++) x[j] += residual[j];
    /* to local rank j: the slices of ranks (node', j), node' = 0..N-1, in node' order */
    for (int j = 0; j < R; j++)
        for (int nd = 0; nd < N; nd++) {
            size_t k = (size_t)nd * R + j, a = k * p < n ? k * p : n, b = a + zt_comm_cut(n, p, k);
            unsigned char *slot = q->send + ((size_t)j * N + nd) * bytes;
            zt_qpieces_quant4(&l, x + a, a, b, slot, (float *)(slot + data)); /* NaN: its block's scale is NaN */
            if (residual) { /* what this hop lost, for the next call */
                zt_qpieces_dequant4_sum(&l, slot, bytes, data, 1, a, b, residual + a, 0);
                for (size_t e = a; e < b; e++) residual[e] = x[e] - residual[e];
            }
        }
    zt_status st = zt_comm_alltoall(q->node, q->send, q->recv, (size_t)N * bytes, purpose);
    if (st) return st;
    size_t lo = (size_t)me * p < n ? (size_t)me * p : n, hi = lo + zt_comm_cut(n, p, (size_t)me); /* my slice */
    if (N == 1) { /* one node: the sum over its ranks is the result, no second hop to quantize for */
        zt_qpieces_dequant4_sum(&l, q->recv, bytes, data, R, lo, hi, out, 0);
        return ZT_OK;
    }
    /* from local rank r, N slices for ranks (node', my local index): sum each over r, requantize */
    int local = me % R;
    float *lost = residual ? residual + n : NULL; /* the second hop's, at the slices this rank requantizes */
    for (int nd = 0; nd < N; nd++) {
        size_t k = (size_t)nd * R + local, a = k * p < n ? k * p : n, b = a + zt_comm_cut(n, p, k);
        zt_qpieces_dequant4_sum(&l, q->recv + (size_t)nd * bytes, (size_t)N * bytes, data, R, a, b, q->sum, 0);
        for (size_t e = a; lost && e < b; e++) q->sum[e - a] += lost[e];
        unsigned char *slot = q->send + (size_t)nd * bytes;
        zt_qpieces_quant4(&l, q->sum, a, b, slot, (float *)(slot + data));
        if (lost) {
            zt_qpieces_dequant4_sum(&l, slot, bytes, data, 1, a, b, lost + a, 0);
            for (size_t e = a; e < b; e++) lost[e] = q->sum[e - a] - lost[e];
        }
    }
    if ((st = zt_comm_alltoall(q->across, q->send, q->recv, bytes, purpose))) return st;
    zt_qpieces_dequant4_sum(&l, q->recv, bytes, data, N, lo, hi, out, 0);
    return ZT_OK;
}
