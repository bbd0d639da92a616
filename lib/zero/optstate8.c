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

/* The moments and what a step needs, in the backend's memory; the host mirrors of the moments
 * (the same arrays on the CPU backend) serve checkpoints. */
struct zt_optstate8 {
    const zt_zero *z;
    zt_backend *be;
    piece *p;
    int np;
    size_t nblocks, nsmall, nheld;
    uint8_t *q[2];    /* m's and v's codes, a byte a local element */
    float *absmax[2]; /* a block's each */
    float *fp32[2];   /* the small tensors' moments */
    zt_adamw8_piece *pieces; /* every piece's (the small ones' unused), this step's constants in them */
    zt_adamw8_block *blocks; /* the blocks all here */
    zt_adamw8_cut *cut;      /* the blocks a rank boundary cuts, held in that order */
    zt_adamw8_release *rel;  /* and how each is finished */
    float *held;             /* the cut blocks' parts' fp32 moments */
    float *slots, *sums;     /* [seg][boundary][side][moment]: this rank's parts' maxima; summed over the ranks */
    size_t nslots;
    zt_adamw8_piece *host_pieces; /* what is uploaded into pieces */
    float *host_slots;
    uint8_t *mirror_q[2];
    float *mirror_absmax[2], *mirror_fp32[2];
};

static size_t tensor_numel(const zt_llama_tensor *t)
{
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}
static size_t first_block(const piece *p) { return (p->flat - p->t0) / B; }
static size_t count_blocks(const piece *p) { return (p->flat + p->n - 1 - p->t0) / B - first_block(p) + 1; }
static int cuts(const zt_zero *z) { return z->comm && z->world > 1 && z->stage > 0; }

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

/* Block j of piece p: the tensor's flat [*lo, *hi), of which [*a, *e) is here. */
static void block_part(const piece *p, size_t j, size_t *lo, size_t *hi, size_t *a, size_t *e)
{
    *lo = p->t0 + (first_block(p) + j) * B;
    *hi = *lo + B < p->t0 + p->tn ? *lo + B : p->t0 + p->tn;
    *a = *lo > p->flat ? *lo : p->flat;
    *e = *hi < p->flat + p->n ? *hi : p->flat + p->n;
}

static int is_cut(const piece *p, size_t j)
{
    size_t lo, hi, a, e;
    block_part(p, j, &lo, &hi, &a, &e);
    return a > lo || e < hi;
}

/* The blocks a rank boundary cuts: a piece's first or last, where it ends a segment. */
static size_t count_held(const piece *p, int np)
{
    size_t held = 0;
    for (int i = 0; i < np; i++) {
        size_t nb = p[i].small ? 0 : count_blocks(&p[i]);
        held += nb && is_cut(&p[i], 0);
        held += nb > 1 && is_cut(&p[i], nb - 1);
    }
    return held;
}

size_t zt_optstate8_bytes(const zt_llama *m, const zt_zero_segment *seg, int nseg)
{
    size_t nblocks, nsmall, local = 0;
    int np = pieces(m, seg, nseg, NULL, &nblocks, &nsmall);
    piece *p = malloc((size_t)(np ? np : 1) * sizeof *p);
    if (!p) return SIZE_MAX;
    np = pieces(m, seg, nseg, p, &nblocks, &nsmall);
    for (int i = 0; i < np; i++) local += p[i].n; /* a code byte each, small tensors too (unused there) */
    size_t held = count_held(p, np);
    free(p);
    return 2 * local + 2 * sizeof(float) * (nblocks + nsmall) + nblocks * sizeof(zt_adamw8_block) +
           held * (2 * B * sizeof(float) + sizeof(zt_adamw8_cut) + sizeof(zt_adamw8_release)) +
           (size_t)np * sizeof(zt_adamw8_piece);
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
static size_t *boundary_keys(const zt_zero *z)
{
    int W = z->world;
    zt_zero_segment *seg = malloc((size_t)z->nseg * sizeof *seg);
    size_t *keys = malloc((size_t)z->nseg * (size_t)(W - 1) * sizeof *keys + 1);
    for (int b = 0; b + 1 < W && seg && keys; b++) {
        int nseg;
        zt_zero_segments(z->m, z->stage, W, b + 1, seg, &nseg);
        for (int k = 0; k < nseg; k++) keys[(size_t)k * (W - 1) + b] = block_key(z->m, seg[k].lo);
    }
    if (!seg) free(keys), keys = NULL;
    free(seg);
    return keys;
}

/* The tables, on the host: the pieces (lead: where the first block starts before the piece), the
 * blocks all here, and the cut ones with their slots (those of the boundaries that cut them) and
 * releases (the range of the boundaries that cut the same block). */
static zt_status lay_out(zt_optstate8 *q, zt_adamw8_block *blocks, zt_adamw8_cut *cut, zt_adamw8_release *rel)
{
    const zt_zero *z = q->z;
    size_t *keys = cuts(z) ? boundary_keys(z) : NULL, nb = 0, nh = 0;
    if (cuts(z) && !keys) return zt_fail(ZT_ENOMEM, "out of memory for optimizer state");
    int W = z->world;
    for (int i = 0; i < q->np; i++) {
        const piece *p = &q->p[i];
        q->host_pieces[i] = (zt_adamw8_piece){.local = p->local,
                                              .flat = p->flat,
                                              .n = p->n,
                                              .lead = (uint32_t)((p->flat - p->t0) % B),
                                              .absmax = (uint32_t)p->at};
        if (p->small) continue;
        size_t row = (size_t)p->seg * (size_t)(W - 1);
        for (size_t j = 0; j < count_blocks(p); j++) {
            size_t lo, hi, a, e;
            block_part(p, j, &lo, &hi, &a, &e);
            if (a == lo && e == hi) {
                blocks[nb++] = (zt_adamw8_block){(uint32_t)i, (uint32_t)j};
                continue;
            }
            zt_adamw8_cut *c = &cut[nh];
            *c = (zt_adamw8_cut){(uint32_t)i, (uint32_t)j, {-1, -1}};
            if (a > lo) c->slot[0] = (int32_t)(((row + (size_t)(z->rank - 1)) * 2 + 1) * 2);
            if (e < hi) c->slot[1] = (int32_t)(((row + (size_t)z->rank) * 2 + 0) * 2);
            size_t b0 = 0, b1 = 0;             /* the boundaries that cut this block: consecutive */
            while (keys[row + b0] != lo) b0++; /* one does: the block is cut */
            for (b1 = b0; b1 + 1 < (size_t)(W - 1) && keys[row + b1 + 1] == lo; b1++) {
            }
            rel[nh] = (zt_adamw8_release){p->local + (a - p->flat),   (uint32_t)(e - a),
                                          (uint32_t)(p->at + j),      (int32_t)nh,
                                          (uint32_t)((row + b0) * 4), (uint32_t)(2 * (b1 - b0 + 1))};
            nh++;
        }
    }
    free(keys);
    return ZT_OK;
}

void zt_optstate8_close(zt_optstate8 *q)
{
    if (!q) return;
    zt_backend *be = q->be;
    for (int k = 0; k < 2 && be; k++) {
        if (!be->host_memory) free(q->mirror_q[k]), free(q->mirror_absmax[k]), free(q->mirror_fp32[k]);
        be->free(be, q->q[k]), be->free(be, q->absmax[k]), be->free(be, q->fp32[k]);
    }
    if (be) {
        be->free(be, q->pieces), be->free(be, q->blocks), be->free(be, q->cut), be->free(be, q->rel);
        be->free(be, q->held), be->free(be, q->slots), be->free(be, q->sums);
    }
    free(q->p), free(q->host_pieces), free(q->host_slots);
    free(q);
}

zt_status zt_optstate8_open(zt_optstate8 **out, const zt_zero *z)
{
    zt_optstate8 *q = calloc(1, sizeof *q);
    *out = q;
    if (!q) return zt_fail(ZT_ENOMEM, "out of memory for optimizer state");
    zt_backend *be = q->be = z->be;
    q->z = z;
    q->np = pieces(z->m, z->seg, z->nseg, NULL, &q->nblocks, &q->nsmall);
    q->p = malloc((size_t)(q->np ? q->np : 1) * sizeof *q->p);
    if (!q->p) return zt_fail(ZT_ENOMEM, "out of memory for optimizer state");
    pieces(z->m, z->seg, z->nseg, q->p, &q->nblocks, &q->nsmall);
    q->nheld = count_held(q->p, q->np);
    q->nslots = cuts(z) ? (size_t)z->nseg * (size_t)(z->world - 1) * 4 : 0;
    size_t nb = q->nblocks - q->nheld, nh = q->nheld;
    q->host_pieces = calloc((size_t)q->np + 1, sizeof *q->host_pieces);
    q->host_slots = calloc(q->nslots + 1, sizeof *q->host_slots);
    zt_adamw8_block *blocks = malloc((nb + 1) * sizeof *blocks);
    zt_adamw8_cut *cut = malloc((nh + 1) * sizeof *cut);
    zt_adamw8_release *rel = malloc((nh + 1) * sizeof *rel);
    int ok = q->host_pieces && q->host_slots && blocks && cut && rel;
    for (int k = 0; k < 2 && ok; k++) {
        ok = (q->q[k] = be->alloc(be, z->local_numel + 1)) && (q->absmax[k] = be->alloc(be, (q->nblocks + 1) * 4)) &&
             (q->fp32[k] = be->alloc(be, (q->nsmall + 1) * 4));
        if (ok && be->host_memory)
            q->mirror_q[k] = q->q[k], q->mirror_absmax[k] = q->absmax[k], q->mirror_fp32[k] = q->fp32[k];
        else if (ok)
            ok = (q->mirror_q[k] = malloc(z->local_numel + 1)) && (q->mirror_absmax[k] = calloc(q->nblocks + 1, 4)) &&
                 (q->mirror_fp32[k] = calloc(q->nsmall + 1, 4));
    }
    ok = ok && (q->pieces = be->alloc(be, ((size_t)q->np + 1) * sizeof *q->pieces)) &&
         (q->blocks = be->alloc(be, (nb + 1) * sizeof *q->blocks)) &&
         (q->cut = be->alloc(be, (nh + 1) * sizeof *q->cut)) && (q->rel = be->alloc(be, (nh + 1) * sizeof *q->rel)) &&
         (q->held = be->alloc(be, (nh + 1) * 2 * B * sizeof(float))) &&
         (q->slots = be->alloc(be, (q->nslots + 1) * sizeof(float))) &&
         (q->sums = be->alloc(be, (q->nslots + 1) * sizeof(float)));
    zt_status st =
        ok ? lay_out(q, blocks, cut, rel) : zt_fail(ZT_ENOMEM, "out of %s memory for optimizer state", be->name);
    if (!st) {
        be->upload(be, q->blocks, blocks, nb * sizeof *blocks);
        be->upload(be, q->cut, cut, nh * sizeof *cut);
        be->upload(be, q->rel, rel, nh * sizeof *rel);
        /* zero moments: every block's absmax 0 (alloc zeroes), codes of 0 */
        for (int k = 0; k < 2; k++) memset(q->mirror_q[k], zt_dyn8_index(zt_adamw8_map(k), 0.0f), z->local_numel);
        if (!be->host_memory)
            for (int k = 0; k < 2; k++) be->upload(be, q->q[k], q->mirror_q[k], z->local_numel);
    }
    free(blocks), free(cut), free(rel);
    return st;
}

zt_status zt_optstate8_step(zt_optstate8 *q, const zt_adamw *h0, float coef)
{
    const zt_zero *z = q->z;
    zt_backend *be = q->be;
    for (int i = 0; i < q->np; i++) {
        const piece *p = &q->p[i];
        zt_adamw h = *h0;
        h.lr *= p->t->lr_scale;
        if (p->small)
            be->adamw(be, &h, z->master + p->local, z->grad + p->local, q->fp32[0] + p->at, q->fp32[1] + p->at, p->n,
                      coef, p->t->decay, z->params16 ? z->params16 + p->flat : NULL);
        else q->host_pieces[i].c = zt_adamw_consts_of(&h, coef, p->t->decay);
    }
    be->upload(be, q->pieces, q->host_pieces, (size_t)q->np * sizeof *q->pieces);
    be->adamw8(be, q->pieces, q->blocks, q->nblocks - q->nheld, q->cut, q->nheld, z->master, z->grad, q->q[0], q->q[1],
               q->absmax[0], q->absmax[1], z->params16, q->held, q->slots);
    if (!q->nslots) return ZT_OK;
    /* every rank takes part: its slots hold its own parts' maxima and zeros */
    be->download(be, q->host_slots, q->slots, q->nslots * sizeof(float));
    zt_status st = zt_comm_allreduce_sum(z->comm, q->host_slots, q->nslots, ZT_COMM_OTHER);
    if (st) return st;
    be->upload(be, q->sums, q->host_slots, q->nslots * sizeof(float));
    be->adamw8_finish(be, q->rel, q->nheld, q->q[0], q->q[1], q->absmax[0], q->absmax[1], q->held, q->sums);
    return ZT_OK;
}

void zt_optstate8_pull(zt_optstate8 *q)
{
    zt_backend *be = q->be;
    if (be->host_memory) return;
    for (int k = 0; k < 2; k++) {
        be->download(be, q->mirror_q[k], q->q[k], q->z->local_numel);
        be->download(be, q->mirror_absmax[k], q->absmax[k], q->nblocks * sizeof(float));
        be->download(be, q->mirror_fp32[k], q->fp32[k], q->nsmall * sizeof(float));
    }
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
            dst[l - first] = p->small ? q->mirror_fp32[k][p->at + (l - p->local)]
                                      : map[q->mirror_q[k][l]] * q->mirror_absmax[k][p->at + j];
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
            st = zt_state_read_range(dir, numel, p->flat, p->n, NULL, q->mirror_fp32[0] + p->at,
                                     q->mirror_fp32[1] + p->at);
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
                    q->mirror_absmax[k][p->at + j] =
                        zt_adamw8_recover(zt_adamw8_map(k), mv[k] + (lo - first), hi - lo, codes);
                    memcpy(q->mirror_q[k] + p->local + (a - p->flat), codes + (a - lo), e - a);
                }
            }
        }
    }
    free(mv[0]), free(mv[1]);
    zt_backend *be = q->be;
    for (int k = 0; k < 2 && !st && !be->host_memory; k++) {
        be->upload(be, q->q[k], q->mirror_q[k], q->z->local_numel);
        be->upload(be, q->absmax[k], q->mirror_absmax[k], q->nblocks * sizeof(float));
        be->upload(be, q->fp32[k], q->mirror_fp32[k], q->nsmall * sizeof(float));
    }
    return st;
}
