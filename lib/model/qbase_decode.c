/* A bitsandbytes checkpoint as an unquantized model's array (qbase_decode.h). */
#include "qbase_decode.h"

#include <stdlib.h>
#include <string.h>

#include "qbase.h"
#include "qbase_read.h"

struct zt_qbase_decoder {
    const zt_llama *m; /* the unquantized layout read into */
    zt_llama q;        /* the checkpoint's own layout (its array never filled: read a tensor at a time) */
    zt_qbase_reader *r;
    zt_real *enc;  /* a weight's encoding as read */
    float *values; /* and decoded */
    int decoded;   /* the tensor of m whose values those are, or -1 */
};

static size_t numel(const zt_llama_tensor *t) { return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1); }

zt_status zt_qbase_decoder_open(zt_qbase_decoder **out, const zt_llama *m, const char *dir, int double_quant)
{
    size_t widest = 0;
    for (int i = 0; i < m->n_tensors; i++) widest = numel(&m->tensors[i]) > widest ? numel(&m->tensors[i]) : widest;
    zt_qbase_decoder *d = calloc(1, sizeof *d);
    *out = NULL;
    if (!d) return zt_fail(ZT_ENOMEM, "out of memory reading '%s'", dir);
    d->m = m, d->decoded = -1;
    zt_status st = zt_qbase_init(&d->q, &m->cfg, zt_backend_cpu(), ZT_F32, ZT_QBASE_NF4, double_quant);
    if (!st) st = zt_qbase_reader_open(&d->q, dir, &d->r);
    d->enc = malloc(widest * sizeof *d->enc);
    d->values = malloc(widest * sizeof *d->values);
    if (!st && (!d->enc || !d->values)) st = zt_fail(ZT_ENOMEM, "out of memory decoding '%s'", dir);
    if (st) zt_qbase_decoder_close(d);
    else *out = d;
    return st;
}

zt_status zt_qbase_decoder_read(zt_qbase_decoder *d, size_t off, size_t n, zt_real *dst)
{
    const zt_llama *m = d->m;
    zt_status st = ZT_OK;
    for (int i = 0; i < m->n_tensors && !st; i++) {
        const zt_llama_tensor *t = &m->tensors[i];
        size_t lo = t->offset > off ? t->offset : off, end = t->offset + numel(t), hi = off + n < end ? off + n : end;
        if (lo >= hi) continue;
        const zt_llama_tensor *s = zt_llama_find_tensor(&d->q, t->name);
        ZT_ASSERT(s);                       /* the same config: the same names */
        if (!zt_qbase_is_linear(t->name)) { /* stored as floats: read as they are */
            st = zt_qbase_read(d->r, s->offset + (lo - t->offset), hi - lo, dst + (lo - off));
            continue;
        }
        size_t rows = (size_t)t->shape[0], cols = t->ndim == 2 ? (size_t)t->shape[1] : 1;
        if (d->decoded != i) {
            d->decoded = -1;
            st = zt_qbase_read(d->r, s->offset, zt_qbase_tensor_elems(d->q.qbase, rows, cols), d->enc);
            if (!st) st = zt_qbase_decode_tensor(d->q.qbase, d->enc, rows, cols, d->values);
            if (st) return zt_fail_context(st, "tensor '%s'", t->name);
            d->decoded = i;
        }
        for (size_t j = lo; j < hi; j++) dst[j - off] = d->values[j - t->offset];
    }
    return st;
}

void zt_qbase_decoder_close(zt_qbase_decoder *d)
{
    if (!d) return;
    zt_qbase_reader_close(d->r);
    zt_llama_free(&d->q);
    free(d->enc);
    free(d->values);
    free(d);
}
