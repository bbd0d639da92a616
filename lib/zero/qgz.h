/* qgz: ZeRO++'s quantized gradient reduce-scatter (qgZ), on any flat buffer.
 *
 * x (n elements on every rank) is cut into the world's slices, ceil(n / W) elements each
 * (the last ones shorter); rank r ends with slice r of the sum over ranks. Each slice
 * is quantized to int4 (symmetric blocks of `block` elements, fp32 scales,
 * kernels/cpu/quant.h; blocks restart at every cut, where a tensor of the buffer starts:
 * qpieces.h); an all-to-all inside the node brings each rank, from every rank of
 * its node, the slices of the ranks with its local index on every node; it dequantizes
 * them, sums them in rank order and quantizes the sums again; an all-to-all across the
 * nodes (between the ranks of one local index) brings each rank the partial sums of its
 * own slice, which it dequantizes and sums in node order. Two quantization hops whatever
 * the node count (one on a single node, where the sums need not travel again) or ranks per
 * node, and each rank receives from other nodes only its own
 * slice's partial sums: a plain reduce-scatter's inter-node bytes / (8 × ranks per node),
 * plus scales. Per element the error is within the two hops' bounds: Σ over ranks of
 * absmax(its block)/14, plus Σ over nodes of absmax(the partial sum's block)/14.
 *
 *     zt_qgz q;
 *     zt_qgz_init(&q, world, 2048, widest_n, most_cuts);
 *     zt_qgz_reduce_scatter(&q, grads, n, cuts, ncuts, NULL, my_slice, ZT_COMM_GRAD_REDUCE);
 *     zt_qgz_free(&q);
 *
 * With residual (2n floats, zero at first: error feedback) the call adds its first half to x
 * before quantizing and leaves there what the first hop lost; with several nodes the second
 * half does the same for the partial sums this rank requantizes for the second hop. x is
 * modified either way.
 */
#ifndef ZT_ZERO_QGZ_H
#define ZT_ZERO_QGZ_H

#include <stddef.h>

#include "lib/comm/comm.h"
#include "lib/core/status.h"
#include "qpieces.h"

typedef struct zt_qgz {
    zt_comm *world, *node, *across; /* the world; the ranks of this node; this local rank's on every node */
    size_t block, widest;
    int most_cuts;
    unsigned char *send, *recv;
    float *sum;
} zt_qgz;

/* widest: the largest n that will be reduced; most_cuts: the most tensor edges in one buffer.
 * A collective (it splits the world). */
zt_status zt_qgz_init(zt_qgz *q, zt_comm *world, size_t block, size_t widest, int most_cuts);
void zt_qgz_free(zt_qgz *q);
/* out: this rank's slice of the sum (its length: ceil(n / W), fewer at the end). A NaN or
 * Inf makes its quantization block NaN in the result (the trainer's gradient-norm check
 * then stops the step on every rank). */
zt_status zt_qgz_reduce_scatter(zt_qgz *q, float *x, size_t n, const size_t *cuts, int ncuts, float *residual,
                                float *out, zt_comm_purpose p);

#endif
