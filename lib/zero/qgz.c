/* The quantized two-level reduce-scatter of qgz.h. */
#include "qgz.h"

#include <string.h>

#include "kernels/cpu/quant.h"
#include "lib/core/arena.h"

/* Bytes of one quantized int4 slice of p elements: data, padded to 4, then the scales. */
static size_t q4_data(size_t p) { return ((p + 1) / 2 + 3) & ~(size_t)3; }
static size_t q4_bytes(size_t p, size_t block) { return q4_data(p) + zt_quant_nblocks(p, block) * sizeof(float); }


zt_status zt_qgz_init(zt_qgz *q, zt_comm *world, size_t block, size_t widest)
{
    memset(q, 0, sizeof *q);
    if (block < 1) return zt_fail(ZT_EUSER, "zero.quant_block_size must be at least 1");
    q->world = world, q->block = block, q->widest = widest;
    int rpn = zt_comm_ranks_per_node(world), size = zt_comm_size(world);
    zt_status st = zt_comm_split(world, rpn, 0, &q->node);
    if (!st) st = zt_comm_split(world, rpn, 1, &q->across);
    if (st) return st;
    size_t p = (widest + size - 1) / size, bytes = q4_bytes(p, block) * (size_t)size;
    q->send = zt_calloc_aligned(bytes);
    q->recv = zt_calloc_aligned(bytes);
    q->sum = zt_calloc_aligned((p + 1) * sizeof(float));
    if (!q->send || !q->recv || !q->sum) return zt_fail(ZT_ENOMEM, "out of memory for qgZ's buffers (%zu bytes)", 3 * bytes);
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

/* Quantizes slice k of x (n elements in slices of p) into dst: data then scales. A NaN or
 * Inf makes its block's scale NaN, and so its block of the result. */
static void quantize_slice(const float *x, size_t n, size_t p, size_t k, size_t block, unsigned char *dst)
{
    memset(dst, 0, q4_bytes(p, block)); /* a short slice's tail: zero data, zero scales */
    zt_quant4(x + k * p, zt_comm_cut(n, p, k), block, dst, (float *)(dst + q4_data(p)));
}

/* sum (p elements) = Σ_j dequant(slice j) in order, the k slices stride bytes apart */
static void sum_slices(const unsigned char *first, size_t stride, int k, size_t p, size_t block, float *sum)
{
    const uint8_t *q[64];
    const float *sc[64];
    for (int j0 = 0; j0 < k; j0 += 64) { /* in pieces, in order: ((s0 + s1) + ...) */
        int m = k - j0 < 64 ? k - j0 : 64;
        for (int j = 0; j < m; j++) {
            q[j] = first + (size_t)(j0 + j) * stride;
            sc[j] = (const float *)(q[j] + q4_data(p));
        }
        zt_dequant4_sum(q, sc, m, p, block, sum, j0 > 0);
    }
}

zt_status zt_qgz_reduce_scatter(zt_qgz *q, float *x, size_t n, float *residual, float *out, zt_comm_purpose purpose)
{
    ZT_ASSERT(n <= q->widest);
    int R = zt_comm_size(q->node), N = zt_comm_size(q->across), W = R * N, me = zt_comm_rank(q->world);
    size_t block = q->block, p = (n + W - 1) / W, bytes = q4_bytes(p, block);
    if (residual)
        for (size_t j = 0; j < n; j++) x[j] += residual[j];
    /* to local rank j: the slices of ranks (node', j), node' = 0..N-1, in node' order */
    for (int j = 0; j < R; j++)
        for (int nd = 0; nd < N; nd++)
            quantize_slice(x, n, p, (size_t)nd * R + j, block, q->send + ((size_t)j * N + nd) * bytes);
    if (residual) /* what the first hop lost, for the next call */
        for (int j = 0; j < R; j++)
            for (int nd = 0; nd < N; nd++) {
                size_t k = (size_t)nd * R + j, len = zt_comm_cut(n, p, k);
                const unsigned char *src = q->send + ((size_t)j * N + nd) * bytes;
                zt_dequant4(src, (const float *)(src + q4_data(p)), len, block, residual + k * p);
                for (size_t e = 0; e < len; e++) residual[k * p + e] = x[k * p + e] - residual[k * p + e];
            }
    zt_status st = zt_comm_alltoall(q->node, q->send, q->recv, (size_t)N * bytes, purpose);
    if (st) return st;
    /* from local rank r, N slices for ranks (node', me's local index): sum each over r, requantize */
    for (int nd = 0; nd < N; nd++) {
        sum_slices(q->recv + (size_t)nd * bytes, (size_t)N * bytes, R, p, block, q->sum);
        quantize_slice(q->sum, p, p, 0, block, q->send + (size_t)nd * bytes);
    }
    if ((st = zt_comm_alltoall(q->across, q->send, q->recv, bytes, purpose))) return st;
    sum_slices(q->recv, bytes, N, p, block, q->sum);
    memcpy(out, q->sum, zt_comm_cut(n, p, (size_t)me) * sizeof *out);
    return ZT_OK;
}
