/* AdamW's 8-bit moments (optstate8.h). */
#include "optstate8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ckpt/state.h"
#include "lib/comm/comm.h"
#include "lib/optim/adamw8bit.h"

enum { B = ZT_ADAMW8_BLOCK };

/* One tensor's part in one segment. */
typedef struct piece {
    size_t flat, local, n; /* flat elements [flat, flat + n), local ones from local */
    size_t t0, tn;         /* the tensor's first flat element and its elements */
    const zt_llama_tensor *t;
    int seg, small; /* small: fp32 moments */
    size_t at;      /* small: its first element in fp32[]; else its first block's absmax */
} piece;

/* A block that a rank boundary cuts, its part here updated and waiting for the whole block's absmax. */
typedef struct held {
    int used;
    size_t key, local, n, block; /* key: the block's first flat element; block: its absmax */
    float mv[2][B];
} held;

struct zt_optstate8 {
    const zt_zero *z;
    piece *p;
    int np;
    uint8_t *q[2];    /* m's and v's codes, a byte a local element */
    float *absmax[2]; /* a block's each */
    float *fp32[2];   /* the small tensors' moments */
    size_t *keys;     /* [seg][boundary]: the first element of the block the boundary cuts, or SIZE_MAX */
    float *slots;     /* [seg][boundary][side][moment]: the parts' maxima, summed over the ranks */
    held *held;       /* [seg][0: cut at the segment's end, 1: at its start] */
    size_t nblocks, nsmall, nslots;
};

static size_t tensor_numel(const zt_llama_tensor *t)
{
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}
static size_t first_block(const piece *p) { return (p->flat - p->t0) / B; }
static size_t count_blocks(const piece *p) { return (p->flat + p->n - 1 - p->t0) / B - first_block(p) + 1; }

static int by_local(const void *a, const void *b)
{
    size_t x = ((const piece *)a)->local, y = ((const piece *)b)->local;
    return (x > y) - (x < y);
}

/* The pieces of m's tensors in seg, by local element, with their storage assigned (out NULL: count). */
static int pieces(const zt_llama *m, const zt_zero_segment *seg, int nseg, piece *out, size_t *nblocks, size_t *nsmall)
{
    int np = 0;
    for (int k = 0; k < nseg; k++)
        for (int i = 0; i < m->n_tensors; i++) {
            const zt_llama_tensor *t = &m->tensors[i];
            size_t t0 = t->offset, tn = tensor_numel(t);
            size_t a = t0 > seg[k].lo ? t0 : seg[k].lo, b = t0 + tn < seg[k].hi ? t0 + tn : seg[k].hi;
            if (a >= b) continue;
            if (out)
                out[np] = (piece){a, seg[k].local + (a - seg[k].lo), b - a, t0, tn, t, k, tn < ZT_ADAMW8_MIN_NUMEL, 0};
            np++;
        }
    *nblocks = *nsmall = 0;
    if (!out) return np;
    qsort(out, (size_t)np, sizeof *out, by_local);
    for (int i = 0; i < np; i++) {
        piece *p = &out[i];
        p->at = p->small ? *nsmall : *nblocks;
        if (p->small) *nsmall += p->n;
        else *nblocks += count_blocks(p);
    }
    return np;
}

static int cuts(const zt_zero *z) { return z->comm && z->world > 1 && z->stage > 0; }

size_t zt_optstate8_bytes(const zt_llama *m, const zt_zero_segment *seg, int nseg)
{
    size_t nblocks, nsmall, local = 0;
    int np = pieces(m, seg, nseg, NULL, &nblocks, &nsmall);
    piece *p = malloc((size_t)(np ? np : 1) * sizeof *p);
    if (!p) return SIZE_MAX;
    np = pieces(m, seg, nseg, p, &nblocks, &nsmall);
    for (int i = 0; i < np; i++) local += p[i].n; /* a code byte each, small tensors too (unused there) */
    free(p);
    return 2 * local + 2 * sizeof(float) * (nblocks + nsmall) + (size_t)nseg * 2 * sizeof(held);
}

void zt_optstate8_close(zt_optstate8 *q)
{
    if (!q) return;
    for (int k = 0; k < 2; k++) free(q->q[k]), free(q->absmax[k]), free(q->fp32[k]);
    free(q->p), free(q->keys), free(q->slots), free(q->held);
    free(q);
}

/* The first element of the block of m's tensors that flat element x lies in, or SIZE_MAX. */
static size_t block_key(const zt_llama *m, size_t x)
{
    for (int i = 0; i < m->n_tensors; i++) {
        const zt_llama_tensor *t = &m->tensors[i];
        if (x > t->offset && x < t->offset + tensor_numel(t)) return t->offset + (x - t->offset) / B * B;
    }
    return SIZE_MAX; /* a tensor starts there, or none is there: no block is cut */
}

/* For every segment, the block each boundary between ranks b and b + 1 cuts (the same on every rank). */
static zt_status boundary_keys(zt_optstate8 *q)
{
    const zt_zero *z = q->z;
    int W = z->world;
    zt_zero_segment *seg = malloc((size_t)z->nseg * sizeof *seg);
    q->keys = malloc((size_t)z->nseg * (size_t)(W - 1) * sizeof *q->keys);
    q->nslots = (size_t)z->nseg * (size_t)(W - 1) * 4;
    q->slots = calloc(q->nslots, sizeof *q->slots);
    if (!seg || !q->keys || !q->slots) return free(seg), zt_fail(ZT_ENOMEM, "out of memory for optimizer state");
    for (int b = 0; b + 1 < W; b++) {
        int nseg;
        zt_zero_segments(z->m, z->stage, W, b + 1, seg, &nseg);
        for (int k = 0; k < nseg; k++) q->keys[(size_t)k * (W - 1) + b] = block_key(z->m, seg[k].lo);
    }
    free(seg);
    return ZT_OK;
}

zt_status zt_optstate8_open(zt_optstate8 **out, const zt_zero *z)
{
    zt_optstate8 *q = calloc(1, sizeof *q);
    *out = q;
    if (!q) return zt_fail(ZT_ENOMEM, "out of memory for optimizer state");
    q->z = z;
    q->np = pieces(z->m, z->seg, z->nseg, NULL, &q->nblocks, &q->nsmall);
    q->p = malloc((size_t)(q->np ? q->np : 1) * sizeof *q->p);
    if (q->p) pieces(z->m, z->seg, z->nseg, q->p, &q->nblocks, &q->nsmall);
    q->held = calloc((size_t)z->nseg * 2, sizeof *q->held);
    for (int k = 0; k < 2; k++) {
        q->q[k] = calloc(z->local_numel + 1, 1);
        q->absmax[k] = calloc(q->nblocks + 1, sizeof(float));
        q->fp32[k] = calloc(q->nsmall + 1, sizeof(float));
        if (!q->q[k] || !q->absmax[k] || !q->fp32[k]) q->held = (free(q->held), NULL);
    }
    if (!q->p || !q->held) return zt_fail(ZT_ENOMEM, "out of memory for optimizer state");
    /* zero moments: every block's absmax 0, codes of 0 */
    for (int k = 0; k < 2; k++) memset(q->q[k], zt_dyn8_index(zt_adamw8_map(k), 0.0f), z->local_numel);
    return cuts(z) ? boundary_keys(q) : ZT_OK;
}

/* Block j of piece p: the tensor's flat [*lo, *hi), of which [*a, *e) is here. */
static void block_part(const piece *p, size_t j, size_t *lo, size_t *hi, size_t *a, size_t *e)
{
    *lo = p->t0 + (first_block(p) + j) * B;
    *hi = *lo + B < p->t0 + p->tn ? *lo + B : p->t0 + p->tn;
    *a = *lo > p->flat ? *lo : p->flat;
    *e = *hi < p->flat + p->n ? *hi : p->flat + p->n;
}

/* A cut block's part [a, e) of [lo, hi), its fp32 moments mv: kept, and its maxima put in the slots
 * of the boundaries that cut it (side 1 of the boundary before this rank, side 0 of the one after). */
static void hold(zt_optstate8 *q, const piece *p, size_t j, size_t lo, size_t hi, size_t a, size_t e, float mv[2][B])
{
    const zt_zero *z = q->z;
    held *h = &q->held[p->seg * 2 + (a > lo)];
    h->used = 1, h->key = lo, h->local = p->local + (a - p->flat), h->n = e - a, h->block = p->at + j;
    memcpy(h->mv, mv, sizeof h->mv);
    size_t row = (size_t)p->seg * (size_t)(z->world - 1);
    for (int k = 0; k < 2; k++) {
        float x = zt_adamw8_absmax(mv[k], e - a);
        if (a > lo) q->slots[((row + (size_t)(z->rank - 1)) * 2 + 1) * 2 + k] = x;
        if (e < hi) q->slots[((row + (size_t)z->rank) * 2 + 0) * 2 + k] = x;
    }
}

/* The held blocks quantized with their whole block's absmax: the largest of the slots that name it. */
static void release(zt_optstate8 *q)
{
    const zt_zero *z = q->z;
    int W = z->world;
    for (int s = 0; s < z->nseg * 2; s++) {
        held *h = &q->held[s];
        if (!h->used) continue;
        size_t row = (size_t)(s / 2) * (size_t)(W - 1);
        for (int k = 0; k < 2; k++) {
            float x = 0.0f;
            for (int b = 0; b + 1 < W; b++)
                for (int side = 0; side < 2 && q->keys[row + b] == h->key; side++) {
                    float y = q->slots[((row + b) * 2 + side) * 2 + k];
                    x = y > x ? y : x;
                }
            q->absmax[k][h->block] = x;
            zt_adamw8_quantize(zt_adamw8_map(k), h->mv[k], h->n, x, q->q[k] + h->local);
        }
        h->used = 0;
    }
}

zt_status zt_optstate8_step(zt_optstate8 *q, const zt_adamw *h0, float coef)
{
    const zt_zero *z = q->z;
    zt_adamw_kernel *kernel = zt_adamw_kernel_dispatch();
    if (cuts(z)) memset(q->slots, 0, q->nslots * sizeof *q->slots);
    for (int i = 0; i < q->np; i++) {
        const piece *p = &q->p[i];
        zt_adamw h = *h0;
        h.lr *= p->t->lr_scale;
        if (p->small) {
            zt_adamw_update_with(kernel, &h, z->master + p->local, z->grad + p->local, q->fp32[0] + p->at,
                                 q->fp32[1] + p->at, p->n, coef, p->t->decay,
                                 z->params16 ? z->params16 + p->flat : NULL);
            continue;
        }
        zt_adamw_consts c = zt_adamw_consts_of(&h, coef, p->t->decay);
        size_t nb = count_blocks(p);
#pragma omp parallel for schedule(static) if (nb > 16)
        for (size_t j = 0; j < nb; j++) {
            size_t lo, hi, a, e;
            block_part(p, j, &lo, &hi, &a, &e);
            size_t l = p->local + (a - p->flat), n = e - a;
            float mv[2][B];
            zt_adamw8_update(&c, kernel, z->master + l, z->grad + l, q->q[0] + l, q->q[1] + l, q->absmax[0][p->at + j],
                             q->absmax[1][p->at + j], n, z->params16 ? z->params16 + a : NULL, mv[0], mv[1]);
            if (a > lo || e < hi) {
                hold(q, p, j, lo, hi, a, e, mv);
                continue;
            }
            for (int k = 0; k < 2; k++) {
                q->absmax[k][p->at + j] = zt_adamw8_absmax(mv[k], n);
                zt_adamw8_quantize(zt_adamw8_map(k), mv[k], n, q->absmax[k][p->at + j], q->q[k] + l);
            }
        }
    }
    if (cuts(z)) {
        zt_status st = zt_comm_allreduce_sum(z->comm, q->slots, q->nslots, ZT_COMM_OTHER);
        if (st) return st;
    }
    release(q);
    return ZT_OK;
}

void zt_optstate8_read(const zt_optstate8 *q, int k, size_t first, size_t n, float *dst)
{
    const float *map = zt_adamw8_map(k)->code;
    memset(dst, 0, n * sizeof *dst);
    for (int i = 0; i < q->np; i++) {
        const piece *p = &q->p[i];
        size_t a = p->local > first ? p->local : first, e = p->local + p->n < first + n ? p->local + p->n : first + n;
        for (size_t l = a; l < e; l++) {
            size_t j = (p->flat + (l - p->local) - p->t0) / B - first_block(p);
            dst[l - first] = p->small ? q->fp32[k][p->at + (l - p->local)] : map[q->q[k][l]] * q->absmax[k][p->at + j];
        }
    }
}

zt_status zt_optstate8_restore(zt_optstate8 *q, const char *dir, size_t numel)
{
    enum { CHUNK = 16384 }; /* blocks read at a time */
    float *mv[2] = {malloc((size_t)CHUNK * B * sizeof(float)), malloc((size_t)CHUNK * B * sizeof(float))};
    zt_status st = mv[0] && mv[1] ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory restoring the optimizer state");
    for (int i = 0; i < q->np && !st; i++) {
        const piece *p = &q->p[i];
        if (p->small) {
            st = zt_state_read_range(dir, numel, p->flat, p->n, NULL, q->fp32[0] + p->at, q->fp32[1] + p->at);
            continue;
        }
        size_t nb = count_blocks(p);
        for (size_t j0 = 0; j0 < nb && !st; j0 += CHUNK) { /* whole blocks, also their parts on other ranks */
            size_t j1 = nb - j0 < CHUNK ? nb : j0 + CHUNK, lo, hi, a, e, first, last;
            block_part(p, j0, &first, &hi, &a, &e);
            block_part(p, j1 - 1, &lo, &last, &a, &e);
            if ((st = zt_state_read_range(dir, numel, first, last - first, NULL, mv[0], mv[1]))) break;
            for (size_t j = j0; j < j1; j++) {
                block_part(p, j, &lo, &hi, &a, &e);
                uint8_t codes[B];
                for (int k = 0; k < 2; k++) {
                    q->absmax[k][p->at + j] = zt_adamw8_recover(zt_adamw8_map(k), mv[k] + (lo - first), hi - lo, codes);
                    memcpy(q->q[k] + p->local + (a - p->flat), codes + (a - lo), e - a);
                }
            }
        }
    }
    free(mv[0]), free(mv[1]);
    return st;
}
