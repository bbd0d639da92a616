/* A randomly initialised model written in the bitsandbytes 4-bit serialization, tensor by tensor
 * (qbase_bnb.h: zt_qbase_bnb_write_init): zt init's weights for a model larger than memory. */
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "qbase_bnb.h"

enum { PIECE = 1 << 16 }; /* values drawn and quantized at a time: whole NF4 blocks */

/* What the safetensors writer's fill gets for a tensor other than a linear weight. */
typedef struct init_tensor {
    zt_llama_init_stream s;
    size_t next; /* the element it draws next */
} init_tensor;

typedef struct init_ctx {
    zt_llama m; /* c shaped, with its tensors: zt_llama_init_weights' streams are theirs */
    zt_qbase q;
    uint64_t seed;
    double std;
    init_tensor *t;
    int layer; /* whose linear weights' encodings part holds, or -1 */
    int nparts, *part_of; /* that layer's linear weights (tensor indices) */
    unsigned char **part; /* and their encodings: room for a layer's (q, k, v, o, a router, 3 an MLP) */
} init_ctx;

static size_t numel(const zt_llama_tensor *t) { return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1); }

static zt_status fill(void *ctx, float *dst, size_t offset, size_t n)
{
    init_tensor *t = ctx;
    zt_real v[1024];
    ZT_ASSERT(offset == t->next); /* the writer asks in order */
    for (size_t j = 0; j < n; j += 1024) {
        size_t k = n - j < 1024 ? n - j : 1024;
        zt_llama_init_stream_next(&t->s, v, k);
        for (size_t i = 0; i < k; i++) dst[j + i] = (float)v[i];
    }
    t->next += n;
    return ZT_OK;
}

/* Tensor i (a linear weight) drawn and encoded into part. */
static zt_status encode_tensor(const init_ctx *x, int i, unsigned char *part)
{
    const zt_llama_tensor *t = &x->m.tensors[i];
    size_t n = numel(t);
    zt_llama_init_stream s;
    zt_qbase_encoder e;
    zt_real *v = malloc(PIECE * sizeof *v);
    float *f = malloc(PIECE * sizeof *f);
    zt_status st = v && f ? zt_qbase_encode_begin(&e, &x->q, (size_t)t->shape[0], (size_t)t->shape[1], part)
                          : zt_fail(ZT_ENOMEM, "out of memory drawing '%s'", t->name);
    zt_llama_init_stream_start(&s, &x->m, i, x->seed, x->std);
    s.ziggurat = 1;
    for (size_t j = 0; j < n && !st; j += PIECE) {
        size_t k = n - j < PIECE ? n - j : PIECE;
        zt_llama_init_stream_next(&s, v, k);
        for (size_t a = 0; a < k; a++) f[a] = (float)v[a];
        zt_qbase_encode_piece(&e, f, k);
    }
    if (!st) st = zt_qbase_encode_end(&e, t->name);
    free(v);
    free(f);
    return st;
}

/* The linear weights of layer l encoded into x->part, in parallel, the largest first. */
static zt_status encode_layer(init_ctx *x, int l)
{
    const zt_llama *m = &x->m;
    size_t lo = m->layer0_off + m->lay.numel * (size_t)l, hi = lo + m->lay.numel;
    int n = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].offset >= lo && m->tensors[i].offset < hi && zt_qbase_is_linear(m->tensors[i].name))
            x->part_of[n++] = i;
    for (int a = 1; a < n; a++) /* by size, largest first: the threads end together */
        for (int b = a; b > 0 && numel(&m->tensors[x->part_of[b]]) > numel(&m->tensors[x->part_of[b - 1]]); b--) {
            int s = x->part_of[b];
            x->part_of[b] = x->part_of[b - 1], x->part_of[b - 1] = s;
        }
    zt_status st = ZT_OK;
    x->layer = -1;
#pragma omp parallel for schedule(dynamic, 1)
    for (int k = 0; k < n; k++) {
        const zt_llama_tensor *t = &m->tensors[x->part_of[k]];
        free(x->part[k]);
        x->part[k] = malloc(zt_qbase_tensor_elems(&x->q, (size_t)t->shape[0], (size_t)t->shape[1]) * sizeof(zt_real));
        zt_status s = x->part[k] ? encode_tensor(x, x->part_of[k], x->part[k])
                                 : zt_fail(ZT_ENOMEM, "out of memory encoding '%s'", t->name);
#pragma omp critical
        if (s && !st) st = s;
    }
    if (!st) x->layer = l, x->nparts = n;
    return st;
}

static zt_status encode(void *ctx, const char *name, size_t rows, size_t cols, void *part)
{
    init_ctx *x = ctx;
    const zt_llama *m = &x->m;
    const zt_llama_tensor *t = zt_llama_find_tensor(m, name);
    ZT_ASSERT(t && zt_qbase_is_linear(name));
    int l = (int)((t->offset - m->layer0_off) / m->lay.numel);
    zt_status st = x->layer == l ? ZT_OK : encode_layer(x, l);
    for (int k = 0; !st && k < x->nparts; k++)
        if (&m->tensors[x->part_of[k]] == t) {
            memcpy(part, x->part[k], zt_qbase_tensor_elems(&x->q, rows, cols) * sizeof(zt_real));
            break;
        }
    return st;
}

zt_status zt_qbase_bnb_write_init(const zt_llama_config *c, const char *dir, zt_dtype dtype, int double_quant,
                                  uint64_t seed, double std, size_t max_shard_bytes)
{
    init_ctx x = {.q = {.kind = ZT_QBASE_NF4, .double_quant = double_quant}, .seed = seed, .std = std, .layer = -1};
    zt_st_writer *w = zt_st_writer_new();
    zt_qbase_bnb_writer *b = NULL;
    zt_status st = w ? zt_llama_shape(&x.m, c, zt_backend_cpu(), ZT_F32) : zt_fail(ZT_ENOMEM, "out of memory");
    size_t most = 9 + 3 * (size_t)(c->n_experts ? c->n_experts : 1); /* zt_qbase's layer_parts */
    if (!st) st = zt_llama_tensors(c, &x.m.tensors, &x.m.n_tensors);
    if (!st && (!(x.t = calloc((size_t)x.m.n_tensors, sizeof *x.t)) || !(x.part_of = calloc(most, sizeof *x.part_of)) ||
                !(x.part = calloc(most, sizeof *x.part))))
        st = zt_fail(ZT_ENOMEM, "out of memory");
    if (!st) st = zt_qbase_bnb_writer_new(&b, &x.q, w, encode, &x);
    for (int i = 0; i < x.m.n_tensors && !st; i++) {
        const zt_llama_tensor *t = &x.m.tensors[i];
        if (zt_qbase_is_linear(t->name)) {
            st = zt_qbase_bnb_add(b, t->name, (size_t)t->shape[0], (size_t)t->shape[1]);
            continue;
        }
        zt_llama_init_stream_start(&x.t[i].s, &x.m, i, seed, std);
        x.t[i].s.ziggurat = 1;
        st = zt_st_writer_add_fn(w, t->name, dtype, t->shape, t->ndim, fill, &x.t[i]);
    }
    if (!st) st = zt_mkdir_p(dir);
    if (!st) st = zt_st_writer_finish(w, dir, max_shard_bytes);
    if (!st) st = zt_llama_save_config(c, dir, dtype);
    char path[4096];
    if (!st) st = zt_path_join(path, sizeof path, dir, "config.json");
    if (!st) st = zt_qbase_bnb_write_config(path, double_quant);
    zt_qbase_bnb_writer_free(b);
    zt_st_writer_free(w);
    for (size_t k = 0; x.part && k < most; k++) free(x.part[k]);
    free(x.part);
    free(x.part_of);
    free(x.t);
    free(x.m.tensors);
    return st;
}
