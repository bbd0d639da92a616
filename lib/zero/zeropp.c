/* ZeRO++ on top of stage 3 (arXiv 2306.10209): qwZ, hpZ and qgZ.
 *
 * qwZ: a gather sends each rank's slice as int8 with one fp32 scale per block
 * (zero.quant_block_size elements; blocks restart at the slice's start and wherever a
 * tensor starts, qpieces.h); every rank,
 * the sender included, computes with the dequantized values, and since the slice
 * quantizes the same way each time, forward and backward see the same weights.
 *
 * hpZ: after a unit's forward gather each rank copies its 1/K slice of the gathered
 * (dequantized) weights into a secondary array; the backward gather then runs inside the
 * group of K consecutive ranks (K divides the ranks per node, so it never leaves the node).
 * The optimizer step makes the secondary slices stale.
 *
 * qgZ: each unit's gradient goes through the quantized two-level reduce-scatter of qgz.h.
 * Its result is the sum over ranks, as the unquantized reduce-scatter's: zt scales each
 * rank's gradient by 1/(target tokens of the whole step) before, so the sum is the step's
 * mean gradient. With error feedback each rank adds the residuals of its previous quantizations
 * of the unit (both hops) before quantizing and keeps the new ones (8 bytes a parameter).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/quant.h"
#include "qpieces.h"
#include "lib/core/arena.h"
#include "zero3.h"

/* Each unit's cuts: the offsets (in the unit) where its tensors after the first start. */
static zt_status find_cuts(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    const zt_llama *m = z->m;
    for (int i = 0; i < s->units; i++) {
        zt_unit3 *u = &s->u[i];
        u->quant.cuts = calloc((size_t)m->n_tensors + 1, sizeof *u->quant.cuts);
        if (!u->quant.cuts) return zt_fail(ZT_ENOMEM, "out of memory");
        for (int t = 0; t < m->n_tensors; t++) /* in layout order */
            if (m->tensors[t].offset > u->off && m->tensors[t].offset < u->off + u->n)
                u->quant.cuts[u->quant.ncuts++] = m->tensors[t].offset - u->off;
    }
    return ZT_OK;
}

/* Group rank me's secondary slice of a unit of n elements: ceil(n / K) each, the last ones less. */
static size_t hpz_slice(size_t n, int hpz, size_t me) { return zt_comm_cut(n, (n + hpz - 1) / hpz, me); }

size_t zt_zero_hpz_bytes(const zt_llama *m, int hpz)
{
    size_t n = 0, off, count;
    for (int u = 0; u < zt_llama_units(m); u++) {
        zt_llama_unit_range(m, u, &off, &count);
        n += hpz_slice(count, hpz, 0);
    }
    return n * sizeof(float);
}

/* two hops' residuals of every element */
size_t zt_zero_qgz_residual_bytes(const zt_llama *m) { return 2 * m->numel * sizeof(float); }

zt_status zt_zeropp_init(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    const zt_zero_options *o = &s->o;
    if ((o->quantized_weights || o->quantized_gradients) && o->quant_block < 1)
        return zt_fail(ZT_EUSER, "zero.quant_block_size must be at least 1");
    zt_status st = ZT_OK;
    if (o->hpz > 1) {
        st = zt_comm_split(z->comm, o->hpz, 0, &s->hpz.comm);
        if (st) return st;
        size_t local = 0, me = (size_t)zt_comm_rank(s->hpz.comm);
        for (int i = 0; i < s->units; i++) {
            zt_unit3 *u = &s->u[i];
            u->hpz.p = (u->n + o->hpz - 1) / o->hpz;
            u->hpz.local = local;
            local += hpz_slice(u->n, o->hpz, me);
        }
        s->hpz.numel = local;
        s->hpz.secondary = zt_calloc_aligned((local + 1) * sizeof(float));
        if (!s->hpz.secondary)
            return zt_fail(ZT_ENOMEM, "out of memory for hpZ's secondary slices (%zu parameters)", local);
    }
    if (o->quantized_weights || o->quantized_gradients) st = find_cuts(z);
    if (st) return st;
    if (o->quantized_gradients) {
        size_t widest = 0;
        int most = 0;
        for (int i = 0; i < s->units; i++) {
            widest = s->u[i].n > widest ? s->u[i].n : widest;
            most = s->u[i].quant.ncuts > most ? s->u[i].quant.ncuts : most;
        }
        st = zt_qgz_init(&s->qgz.q, z->comm, (size_t)o->quant_block, widest, most);
        if (st) return st;
        if (o->error_feedback) s->qgz.residual = zt_calloc_aligned(zt_zero_qgz_residual_bytes(z->m) + sizeof(float));
        if (o->error_feedback && !s->qgz.residual)
            return zt_fail(ZT_ENOMEM, "out of memory for qgZ's residuals (%zu parameters)", z->numel);
    }
    return ZT_OK;
}

void zt_zeropp_free(zt_zero *z)
{
    zt_zero3 *s = z->z3;
    zt_comm_finalize(s->hpz.comm);
    if (s->qgz.q.world) zt_qgz_free(&s->qgz.q);
    for (int i = 0; i < s->units; i++) free(s->u[i].quant.cuts);
    zt_free(s->hpz.secondary);
    zt_free(s->qgz.residual);
}

/* measure_quant: what quantizing lost, Σ (q − x)² and Σ x² over n elements, into z.qerr[at], z.qerr[at + 1] */
static void count_error(zt_zero *z, int at, const float *q, const float *x, size_t n)
{
    double e = 0, r = 0;
    for (size_t j = 0; j < n; j++) e += ((double)q[j] - x[j]) * ((double)q[j] - x[j]), r += (double)x[j] * x[j];
    z->qerr[at] += e, z->qerr[at + 1] += r;
}

/* --- qwZ ------------------------------------------------------------------------------ */

/* The staging of a unit's int8 gather: received slices (n bytes, padded to 4), received
 * scales (nb per rank), this rank's slice (p bytes, padded), its scales. */
typedef struct qwz_layout {
    size_t nb, data, scales, send, send_scales, bytes;
} qwz_layout;

static zt_qpieces pieces_of(const zt_zero *z, const zt_unit3 *u)
{
    return (zt_qpieces){u->quant.cuts, u->quant.ncuts, (size_t)z->z3->o.quant_block};
}

static qwz_layout qwz_of(const zt_zero *z, const zt_unit3 *u)
{
    qwz_layout l;
    zt_qpieces pc = pieces_of(z, u);
    l.nb = zt_quant_nblocks(u->p, pc.block) + zt_qpieces_most(&pc, u->p); /* scales a slice may need */
    l.data = 0;
    l.scales = (u->n + 3) & ~(size_t)3;
    l.send = l.scales + (size_t)z->world * l.nb * sizeof(float);
    l.send_scales = l.send + ((u->p + 3) & ~(size_t)3);
    l.bytes = l.send_scales + l.nb * sizeof(float);
    return l;
}

zt_status zt_qwz_start(zt_zero *z, int i, zt_comm_purpose p, const float *slice)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    qwz_layout l = qwz_of(z, u);
    char *b = u->qwz.staging = calloc(1, l.bytes); /* zeroed: the scales past a short slice's blocks */
    if (!b) return zt_fail(ZT_ENOMEM, "rank %d: out of memory for a quantized gather (%zu bytes)", z->rank, l.bytes);
    zt_qpieces pc = pieces_of(z, u);
    size_t lo = u->p * (size_t)z->rank < u->n ? u->p * (size_t)z->rank : u->n;
    size_t bad = zt_qpieces_quant8(&pc, slice, lo, lo + u->mine, (int8_t *)(b + l.send), (float *)(b + l.send_scales));
    if (bad)
        return zt_fail(ZT_ERUNTIME, "rank %d: %zu weights of unit %d (of %d: embedding, layers, head) are NaN or Inf",
                       z->rank, bad, i, s->units);
    if (s->o.measure_quant) {
        float *back = malloc((u->mine + 1) * sizeof(float));
        if (!back) return zt_fail(ZT_ENOMEM, "rank %d: out of memory to measure qwZ's error", z->rank);
        zt_qpieces_dequant8(&pc, (const int8_t *)(b + l.send), (const float *)(b + l.send_scales), lo, lo + u->mine,
                            back);
        count_error(z, 0, back, slice, u->mine);
        free(back);
    }
    zt_status st = zt_comm_iallgather(z->comm, b + l.send, b + l.data, u->p, u->n, p, &u->req[0]);
    if (!st)
        st = zt_comm_iallgather(z->comm, b + l.send_scales, b + l.scales, l.nb * sizeof(float),
                                (size_t)z->world * l.nb * sizeof(float), p, &u->req[1]);
    return st;
}

zt_status zt_qwz_finish(zt_zero *z, int i)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    qwz_layout l = qwz_of(z, u);
    const char *b = u->qwz.staging;
    zt_qpieces pc = pieces_of(z, u);
    for (size_t q = 0; q < (size_t)z->world; q++) {
        size_t lo = q * u->p < u->n ? q * u->p : u->n, hi = lo + zt_comm_cut(u->n, u->p, q);
        zt_qpieces_dequant8(&pc, (const int8_t *)(b + l.data) + lo, (const float *)(b + l.scales) + q * l.nb, lo, hi,
                            z->params + u->off + lo);
    }
    free(u->qwz.staging);
    u->qwz.staging = NULL;
    return ZT_OK;
}

/* --- hpZ ------------------------------------------------------------------------------ */

int zt_hpz_holds(const zt_zero *z, int i) { return z->z3->hpz.comm && z->z3->u[i].hpz.held; }

zt_status zt_hpz_start(zt_zero *z, int i, zt_comm_purpose p)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    return zt_comm_iallgather(s->hpz.comm, s->hpz.secondary + u->hpz.local, z->params + u->off,
                              u->hpz.p * sizeof(float), u->n * sizeof(float), p, &u->req[0]);
}

void zt_hpz_keep(zt_zero *z, int i)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    if (!s->hpz.comm) return;
    size_t me = (size_t)zt_comm_rank(s->hpz.comm);
    memcpy(s->hpz.secondary + u->hpz.local, z->params + u->off + me * u->hpz.p,
           zt_comm_cut(u->n, u->hpz.p, me) * sizeof(float));
    u->hpz.held = 1;
}

/* --- qgZ ------------------------------------------------------------------------------ */

zt_status zt_qgz_reduce_unit(zt_zero *z, int i, float *out)
{
    zt_zero3 *s = z->z3;
    zt_unit3 *u = &s->u[i];
    float *g = z->grads + u->off, *residual = s->qgz.residual ? s->qgz.residual + 2 * u->off : NULL, *exact = NULL;
    zt_status st = ZT_OK;
    if (s->o.measure_quant) { /* the exact reduction first (qgZ adds the residual to g), counted as other traffic */
        exact = malloc((u->p + 1) * sizeof(float));
        if (!exact) return zt_fail(ZT_ENOMEM, "rank %d: out of memory to measure qgZ's error", z->rank);
        st = zt_comm_reduce_scatter_sum(z->comm, g, exact, u->p, u->n, ZT_COMM_OTHER);
    }
    if (!st)
        st = zt_qgz_reduce_scatter(&s->qgz.q, g, u->n, u->quant.cuts, u->quant.ncuts, residual, out,
                                   ZT_COMM_GRAD_REDUCE);
    if (!st && exact) count_error(z, 2, out, exact, u->mine);
    free(exact);
    return st;
}
