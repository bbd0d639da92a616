/* A quantized base's flat array from a model directory (qbase_read.h): the linear weights
 * quantized as they are read, or read as bitsandbytes stored them. */
#include "qbase_read.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/nf4.h"
#include "lib/ckpt/safetensors.h"
#include "lib/core/cache_key.h"
#include "lib/core/crc32c.h"
#include "lib/core/fileio.h"
#include "qbase_bnb.h"

struct zt_qbase_reader {
    const zt_llama *m; /* the quantized base */
    zt_llama plain;    /* m unquantized, shaped: its tensors' offsets are the checkpoint's terms */
    zt_st_reader *st;
    int bnb;        /* the checkpoint is bitsandbytes 4-bit */
    zt_real *piece; /* a piece of a weight as read: q->cap elements */
    float *piece_f; /* the same in float (the double-precision build) */
};

int zt_qbase_reader_prequantized(const zt_qbase_reader *r) { return r->bnb; }

void zt_qbase_reader_close(zt_qbase_reader *r)
{
    if (!r) return;
    zt_st_close(r->st);
    free(r->plain.tensors);
    free(r->piece);
    free(r->piece_f);
    free(r);
}

zt_status zt_qbase_reader_open(const zt_llama *m, const char *dir, zt_qbase_reader **out)
{
    const zt_qbase *q = m->qbase;
    char path[4096];
    int nf4 = 0, dq = 0;
    *out = NULL;
    zt_qbase_reader *r = calloc(1, sizeof *r);
    if (!r) return zt_fail(ZT_ENOMEM, "out of memory");
    r->m = m;
    zt_status st = zt_path_join(path, sizeof path, dir, "config.json");
    if (!st) st = zt_qbase_bnb_config(path, &nf4, &dq);
    if (!st && nf4 && (q->kind != ZT_QBASE_NF4 || dq != q->double_quant))
        st = zt_fail(ZT_EUSER,
                     "'%s' holds linear weights quantized by bitsandbytes as NF4 %s double quantization: set "
                     "lora.quantize_base = \"nf4\" and lora.double_quant = %s",
                     dir, dq ? "with" : "without", dq ? "true" : "false");
    r->bnb = nf4;
    if (!st) st = zt_llama_shape(&r->plain, &m->cfg, m->be, ZT_F32);
    if (!st) st = zt_llama_tensors(&m->cfg, &r->plain.tensors, &r->plain.n_tensors);
    if (!st) st = zt_llama_weights_open_with(&r->plain, dir, nf4 ? zt_qbase_bnb_is_state : NULL, &r->st);
    r->piece = malloc(q->cap * sizeof *r->piece);
    r->piece_f = malloc(q->cap * sizeof *r->piece_f);
    if (!st && (!r->piece || !r->piece_f)) st = zt_fail(ZT_ENOMEM, "out of memory reading '%s'", dir);
    ZT_ASSERT(st || r->plain.n_tensors == m->n_tensors);
    if (st) zt_qbase_reader_close(r);
    else *out = r;
    return st;
}

static size_t numel(const zt_llama_tensor *t) { return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1); }

/* The elements read at a time of a weight with cols columns: a tile's worth, in whole NF4 blocks
 * or whole rows (int8). */
static size_t piece_elems(const zt_qbase *q, size_t cols)
{
    size_t k = q->kind == ZT_QBASE_NF4 ? ZT_NF4_BLOCK : cols;
    return q->cap / k * k;
}

/* Elements [at, at + n) of the unquantized weight t, as floats (r->piece_f). */
static zt_status read_piece(zt_qbase_reader *r, const zt_llama_tensor *t, size_t at, size_t n, const float **x)
{
    zt_status st = zt_llama_weights_read(&r->plain, r->st, t->offset + at, n, r->piece);
#ifdef ZT_REAL_DOUBLE
    for (size_t i = 0; i < n; i++) r->piece_f[i] = (float)r->piece[i];
    *x = r->piece_f;
#else
    *x = r->piece;
#endif
    return st;
}

/* The unquantized weight t (the checkpoint's tensor) encoded into part. */
static zt_status read_linear(zt_qbase_reader *r, const zt_llama_tensor *t, void *part)
{
    const zt_qbase *q = r->m->qbase;
    size_t rows = (size_t)t->shape[0], cols = (size_t)t->shape[1], n = rows * cols, k = piece_elems(q, cols);
    if (r->bnb) return zt_qbase_bnb_read(q, r->st, t->name, rows, cols, part);
    zt_qbase_encoder e;
    zt_status st = zt_qbase_encode_begin(&e, q, rows, cols, part);
    for (size_t j = 0; j < n && !st; j += k) {
        const float *x;
        size_t len = n - j < k ? n - j : k;
        if (!(st = read_piece(r, t, j, len, &x))) zt_qbase_encode_piece(&e, x, len);
    }
    if (!st) return zt_qbase_encode_end(&e, t->name);
    free(e.absmax);
    return st;
}

zt_status zt_qbase_read(zt_qbase_reader *r, size_t off, size_t n, zt_real *dst)
{
    const zt_llama *m = r->m;
    zt_status st = ZT_OK;
    for (int i = 0; i < m->n_tensors && !st; i++) {
        const zt_llama_tensor *t = &m->tensors[i], *p = &r->plain.tensors[i];
        size_t a = t->offset, b = a + numel(t), lo = a > off ? a : off, hi = b < off + n ? b : off + n;
        if (lo >= hi) continue;
        if (zt_qbase_is_linear(t->name)) {
            ZT_ASSERT(lo == a && hi == b); /* an encoding is read whole */
            st = read_linear(r, p, dst + (a - off));
        } else {
            st = zt_llama_weights_read(&r->plain, r->st, p->offset + (lo - a), hi - lo, dst + (lo - off));
        }
    }
    return st;
}

zt_status zt_qbase_reader_key(zt_qbase_reader *r, uint64_t key[2])
{
    const zt_llama *m = r->m;
    const zt_qbase *q = m->qbase;
    zt_cache_key k;
    zt_cache_key_init(&k);
    zt_cache_key_add_str(&k, "ZTQBASE2");
    const uint64_t what[6] = {q->kind,       (uint64_t)q->double_quant, sizeof(zt_real), m->numel, m->lay.numel,
                              (uint64_t)m->L};
    zt_cache_key_add(&k, what, sizeof what);
    zt_status st = ZT_OK;
    for (int i = 0; i < r->plain.n_tensors && !st; i++) { /* the layers' tensors, every value as read */
        const zt_llama_tensor *t = &r->plain.tensors[i];
        if (t->offset < r->plain.layer0_off || t->offset >= r->plain.norm_off) continue;
        uint32_t crc = 0;
        for (size_t j = 0; j < numel(t) && !st; j += q->cap) {
            size_t len = numel(t) - j < q->cap ? numel(t) - j : q->cap;
            if (!(st = zt_llama_weights_read(&r->plain, r->st, t->offset + j, len, r->piece)))
                crc = zt_crc32c(crc, r->piece, len * sizeof *r->piece);
        }
        zt_cache_key_add_str(&k, t->name);
        zt_cache_key_add(&k, t->shape, sizeof t->shape);
        zt_cache_key_add(&k, &crc, sizeof crc);
    }
    key[0] = k.h[0], key[1] = k.h[1];
    return st;
}
