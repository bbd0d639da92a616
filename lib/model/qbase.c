/* A quantized frozen base (qbase.h): the encodings' layout, encoding, and the tiled products. */
#include "qbase.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kernels/cpu/nf4.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"

#define MAGIC "ZTQPART1"
#define NOTE_FILE "zt_quantization.json"
enum { ALIGN = 64 };

/* An encoding's first ALIGN bytes. */
typedef struct part_header {
    char magic[8];
    uint32_t kind, double_quant, rows, cols, block; /* block: the NF4 block size */
    float offset;                                   /* double_quant: the mean taken off the absmax values */
    uint32_t zero[8];
} part_header;

/* A tile of dequantized weights holds this many elements at most, or one row. */
static size_t tile_elems = (size_t)1 << 20;

void zt_qbase_set_tile_elems(size_t n) { tile_elems = n; }

static size_t align_up(size_t n) { return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

/* ---- the layout of an encoding ------------------------------------------------------------- */

size_t zt_qbase_part_layout(const zt_qbase *q, size_t rows, size_t cols, size_t *codes, size_t *scales, size_t *scales2)
{
    size_t n = rows * cols, nb = zt_nf4_blocks(n), at = align_up(sizeof(part_header));
    int nf4 = q->kind == ZT_QBASE_NF4, dq = nf4 && q->double_quant;
    *codes = at;
    at += align_up(nf4 ? (n + 1) / 2 : n);
    *scales = at;
    at += align_up(!nf4 ? rows * sizeof(float) : dq ? nb : nb * sizeof(float));
    *scales2 = at;
    return at + (dq ? align_up(zt_nf4_dq_blocks(nb) * sizeof(float)) : 0);
}

size_t zt_qbase_tensor_elems(const zt_qbase *q, size_t rows, size_t cols)
{
    size_t codes, scales, scales2, bytes = zt_qbase_part_layout(q, rows, cols, &codes, &scales, &scales2);
    return (bytes + sizeof(zt_real) - 1) / sizeof(zt_real);
}

size_t zt_qbase_params(const zt_llama *m)
{
    zt_llama plain;
    return m->qbase && !zt_llama_shape(&plain, &m->cfg, m->be, ZT_F32) ? plain.numel : m->numel;
}

/* name past "model.layers.N." or past "E." in "experts.E.": the rest, or NULL */
static const char *past_number(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) || name[n] < '0' || name[n] > '9') return NULL;
    name += n;
    while (*name >= '0' && *name <= '9') name++;
    return *name == '.' ? name + 1 : NULL;
}

static int named(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, list[i])) return 1;
    return 0;
}

int zt_qbase_is_linear(const char *name)
{
    static const char *const linear[] = {"self_attn.q_proj.weight",
                                         "self_attn.k_proj.weight",
                                         "self_attn.v_proj.weight",
                                         "self_attn.qkv_proj.weight",
                                         "self_attn.o_proj.weight",
                                         "mlp.gate_proj.weight",
                                         "mlp.up_proj.weight",
                                         "mlp.gate_up_proj.weight",
                                         "mlp.down_proj.weight",
                                         "mlp.gate.weight",
                                         "block_sparse_moe.gate.weight",
                                         "mlp.shared_expert.gate_proj.weight",
                                         "mlp.shared_expert.up_proj.weight",
                                         "mlp.shared_expert.down_proj.weight",
                                         "mlp.shared_expert_gate.weight"};
    /* an expert's: Qwen3-MoE's and OLMoE's mlp.experts.E.gate_proj, Mixtral's block_sparse_moe.experts.E.w1 */
    static const char *const expert[] = {"gate_proj.weight", "up_proj.weight", "down_proj.weight",
                                         "w1.weight",        "w3.weight",      "w2.weight"};
    if (!(name = past_number(zt_llama_text_name(name), "model.layers."))) return 0;
    if (named(name, linear, sizeof linear / sizeof *linear)) return 1;
    const char *e = past_number(name, "mlp.experts.");
    if (!e) e = past_number(name, "block_sparse_moe.experts.");
    return e && named(e, expert, sizeof expert / sizeof *expert);
}

void zt_qbase_write_header(const zt_qbase *q, void *part, size_t rows, size_t cols, float offset)
{
    part_header h = {.kind = q->kind,
                     .double_quant = (uint32_t)q->double_quant,
                     .rows = (uint32_t)rows,
                     .cols = (uint32_t)cols,
                     .block = ZT_NF4_BLOCK,
                     .offset = offset};
    memcpy(h.magic, MAGIC, sizeof h.magic);
    memcpy(part, &h, sizeof h);
}

float zt_qbase_part_offset(const void *part) { return ((const part_header *)part)->offset; }

zt_status zt_qbase_check_part(const zt_qbase *q, const void *part, size_t rows, size_t cols)
{
    const part_header *h = part;
    if (memcmp(h->magic, MAGIC, sizeof h->magic)) return zt_fail(ZT_EUSER, "not an encoded weight of this version");
    if (h->kind != q->kind || h->double_quant != (uint32_t)q->double_quant || h->block != ZT_NF4_BLOCK)
        return zt_fail(ZT_EUSER, "encoded as %s%s, not as %s%s", h->kind < 3 ? zt_qbase_kind_names[h->kind] : "?",
                       h->double_quant ? " with double_quant" : "", zt_qbase_kind_names[q->kind],
                       q->double_quant ? " with double_quant" : "");
    if (h->rows != rows || h->cols != cols)
        return zt_fail(ZT_EUSER, "a [%u, %u] weight where [%zu, %zu] was expected", h->rows, h->cols, rows, cols);
    if (!isfinite(h->offset)) return zt_fail(ZT_EUSER, "its absmax values' mean is not finite");
    for (size_t i = 0; i < sizeof h->zero / sizeof *h->zero; i++)
        if (h->zero[i]) return zt_fail(ZT_EUSER, "its header's reserved bytes are not zero");
    return ZT_OK;
}

size_t zt_qbase_buffer_bytes(const zt_llama *m)
{
    size_t cap = tile_elems, widest = (size_t)(m->C > m->F ? m->C : m->F); /* the rows of any matrix */
    if ((size_t)m->HD > widest) widest = (size_t)m->HD;
    cap = widest > cap ? widest : cap;
    return cap * sizeof(float) + (cap / ZT_NF4_BLOCK + 2) * sizeof(float) /* the tile (alloc_tile) */
           + cap * (sizeof(zt_real) + sizeof(float));                     /* qbase_read.c's pieces */
}

/* ---- encoding ------------------------------------------------------------------------------ */

zt_status zt_qbase_encode_begin(zt_qbase_encoder *e, const zt_qbase *q, size_t rows, size_t cols, void *part)
{
    *e = (zt_qbase_encoder){.q = q, .part = part, .rows = rows, .cols = cols};
    memset(part, 0, zt_qbase_tensor_elems(q, rows, cols) * sizeof(zt_real));
    if (q->kind == ZT_QBASE_NF4 && q->double_quant && !(e->absmax = malloc(zt_nf4_blocks(rows * cols) * sizeof(float))))
        return zt_fail(ZT_ENOMEM, "out of memory quantizing a [%zu, %zu] weight", rows, cols);
    return ZT_OK;
}

void zt_qbase_encode_piece(zt_qbase_encoder *e, const float *x, size_t n)
{
    size_t codes, scales, scales2, first = e->done;
    zt_qbase_part_layout(e->q, e->rows, e->cols, &codes, &scales, &scales2);
    ZT_ASSERT(first + n <= e->rows * e->cols);
    if (e->q->kind == ZT_QBASE_INT8) {
        ZT_ASSERT(first % e->cols == 0 && (n % e->cols == 0 || first + n == e->rows * e->cols));
        e->bad += zt_int8_rows_quantize(x, n / e->cols, e->cols, (int8_t *)(e->part + codes) + first,
                                        (float *)(e->part + scales) + first / e->cols);
    } else {
        ZT_ASSERT(first % ZT_NF4_BLOCK == 0);
        float *absmax = e->absmax ? e->absmax : (float *)(e->part + scales);
        e->bad += zt_nf4_quantize(x, n, e->part + codes + first / 2, absmax + first / ZT_NF4_BLOCK);
    }
    e->done += n;
}

zt_status zt_qbase_encode_end(zt_qbase_encoder *e, const char *name)
{
    size_t codes, scales, scales2, nb = zt_nf4_blocks(e->rows * e->cols);
    zt_qbase_part_layout(e->q, e->rows, e->cols, &codes, &scales, &scales2);
    ZT_ASSERT(e->done == e->rows * e->cols);
    float offset = 0;
    if (e->absmax) {
        offset = zt_nf4_dq_offset(e->absmax, nb);
        zt_nf4_dq_quantize(e->absmax, nb, offset, e->part + scales, (float *)(e->part + scales2));
        free(e->absmax);
        e->absmax = NULL;
    }
    zt_qbase_write_header(e->q, e->part, e->rows, e->cols, offset);
    if (e->bad) return zt_fail(ZT_EUSER, "%s: %zu weights are NaN or infinite: they cannot be quantized", name, e->bad);
    return ZT_OK;
}

/* ---- dequantization ------------------------------------------------------------------------ */

/* Rows [r0, r0 + nr) of the [rows, cols] NF4 tensor encoded at part as nf4_dequantize takes them:
 * its codes, its absmax values (with double_quant decoded into absmax, which has room for the rows'
 * blocks and two more) and the rows' first element in those terms. */
static const float *nf4_rows(zt_backend *be, const zt_qbase *q, const unsigned char *part, size_t rows, size_t cols,
                             size_t r0, size_t nr, float offset, float *absmax, const uint8_t **codes_at,
                             size_t *first_at)
{
    size_t codes, scales, scales2, first = r0 * cols, n = nr * cols;
    zt_qbase_part_layout(q, rows, cols, &codes, &scales, &scales2);
    *codes_at = part + codes, *first_at = first;
    if (!q->double_quant) return (const float *)(part + scales);
    size_t b0 = first / ZT_NF4_BLOCK, nb = (first + n - 1) / ZT_NF4_BLOCK - b0 + 1; /* the rows' blocks */
    be->nf4_dq_dequantize(be, part + scales, (const float *)(part + scales2), offset, b0, nb, absmax);
    *codes_at = part + codes + b0 * ZT_NF4_BLOCK / 2, *first_at = first - b0 * ZT_NF4_BLOCK;
    return absmax;
}

/* Rows [r0, r0 + nr) of the [rows, cols] tensor encoded at part into y; absmax: room for the
 * rows' blocks and two more (double_quant). */
static void dequantize(zt_backend *be, const zt_qbase *q, const unsigned char *part, size_t rows, size_t cols,
                       size_t r0, size_t nr, float offset, float *absmax, float *y)
{
    if (q->kind == ZT_QBASE_INT8) {
        size_t codes, scales, scales2;
        zt_qbase_part_layout(q, rows, cols, &codes, &scales, &scales2);
        be->int8_rows_dequantize(be, (const int8_t *)(part + codes), (const float *)(part + scales), cols, r0, nr, y);
        return;
    }
    const uint8_t *codes;
    size_t first;
    const float *a = nf4_rows(be, q, part, rows, cols, r0, nr, offset, absmax, &codes, &first);
    be->nf4_dequantize(be, codes, a, first, nr * cols, y);
}

/* In host memory: the header is there to read. */
static void dequantize_here(const zt_qbase *q, const unsigned char *part, size_t rows, size_t cols, size_t r0,
                            size_t nr, float *absmax, float *y)
{
    dequantize(zt_backend_cpu(), q, part, rows, cols, r0, nr, zt_qbase_part_offset(part), absmax, y);
}

/* ---- the quantized base -------------------------------------------------------------------- */

/* The encoded tensors of a layer: the next matrix's parts (rows × cols each, stacked) from its offset on. */
static void add_parts(zt_qbase *q, size_t off, int n, const int *rows, int cols)
{
    int k = q->nmats++;
    q->first[k] = q->nparts;
    for (int i = 0, row0 = 0; i < n; i++) {
        zt_qbase_part *a = &q->part[q->nparts++];
        a->off = off, a->rows = (uint32_t)rows[i], a->cols = (uint32_t)cols, a->row0 = (uint32_t)row0;
        zt_qbase_part_layout(q, (size_t)rows[i], (size_t)cols, &a->codes, &a->scales, &a->scales2);
        off += zt_qbase_tensor_elems(q, (size_t)rows[i], (size_t)cols);
        row0 += rows[i];
    }
    q->first[k + 1] = q->nparts;
}

/* A layer's matrices: q/k/v, o, then the MLP's gate/up and down, or a mixture's router and each
 * expert's gate/up and down (and a shared expert's gate/up, down and gate). */
static zt_status layer_parts(const zt_llama *m, zt_qbase *q)
{
    const zt_llama_layer_layout *y = &m->lay;
    int fused = zt_llama_fused_qkv(&m->cfg), fused_gu = zt_llama_fused_gate_up(&m->cfg), kd = m->KV * m->D,
        E = m->cfg.n_experts, mlps = E ? E : 1;
    const int qkv[3] = {m->HD, kd, kd}, s3 = m->S3, gu[2] = {m->F, m->F}, f2 = 2 * m->F, c = m->C;
    const int Fs = m->cfg.shared_expert_size, sgu[2] = {Fs, Fs}, one = 1;
    q->part = malloc((size_t)(9 + 3 * mlps) * sizeof *q->part);   /* q, k, v, o, routers, shared, 3 an MLP */
    q->first = malloc((size_t)(7 + 2 * mlps) * sizeof *q->first); /* 3 matrices and 3 shared, 2 an MLP, the end */
    if (!q->part || !q->first) return zt_fail(ZT_ENOMEM, "out of memory for the quantized base's layout");
    add_parts(q, y->wqkv, fused ? 1 : 3, fused ? &s3 : qkv, m->C);
    add_parts(q, y->wo, 1, &c, m->HD);
    if (E) add_parts(q, y->router, 1, &E, m->C);
    for (int e = 0; e < mlps; e++) {
        add_parts(q, y->wgu + y->expert * (size_t)e, fused_gu ? 1 : 2, fused_gu ? &f2 : gu, m->C);
        add_parts(q, y->wd + y->expert * (size_t)e, 1, &c, m->F);
    }
    if (Fs) {
        add_parts(q, y->shared_gu, 2, sgu, m->C);
        add_parts(q, y->shared_d, 1, &c, Fs);
        add_parts(q, y->shared_gate, 1, &one, m->C);
    }
    return ZT_OK;
}

/* The tile buffers on the model's backend: tile_elems elements, or the widest row; the offsets. */
static zt_status alloc_tile(zt_qbase *q, zt_backend *be, int layers)
{
    size_t cap = tile_elems;
    for (int i = 0; i < q->nparts; i++) cap = q->part[i].cols > cap ? q->part[i].cols : cap;
    size_t nb = cap / ZT_NF4_BLOCK + 2;
    q->cap = cap;
    q->tile = be->host_memory ? malloc(cap * sizeof(float)) : be->alloc(be, cap * sizeof(float));
    q->absmax = be->host_memory ? malloc(nb * sizeof(float)) : be->alloc(be, nb * sizeof(float));
    q->offsets = malloc(((size_t)layers * (size_t)q->nparts + 1) * sizeof(float));
    for (size_t i = 0; q->offsets && i < (size_t)layers * (size_t)q->nparts; i++) q->offsets[i] = NAN;
#ifdef ZT_REAL_DOUBLE
    q->tile_real = malloc(cap * sizeof(zt_real));
    if (!q->tile_real) return zt_fail(ZT_ENOMEM, "out of memory for the quantized base's tile");
#endif
    return q->tile && q->absmax && q->offsets
               ? ZT_OK
               : zt_fail(ZT_ENOMEM, "out of %s memory for the quantized base's tile", be->name);
}

zt_status zt_qbase_init(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype, zt_qbase_kind kind,
                        int double_quant)
{
    ZT_ASSERT(kind != ZT_QBASE_NONE);
    zt_qbase *q = calloc(1, sizeof *q);
    if (!q) return zt_fail(ZT_ENOMEM, "out of memory for the quantized base");
    q->kind = kind, q->double_quant = kind == ZT_QBASE_NF4 && double_quant;
    zt_status st = zt_llama_init_quantized(m, c, be, dtype, q); /* m owns q from here */
    if (st) return st;
    if ((st = layer_parts(m, q)) || (st = alloc_tile(q, be, m->L))) zt_llama_free(m);
    return st;
}

void zt_qbase_free(zt_llama *m)
{
    zt_qbase *q = m->qbase;
    if (!q) return;
    if (m->be->host_memory) {
        free(q->tile);
        free(q->absmax);
    } else {
        m->be->free(m->be, q->tile);
        m->be->free(m->be, q->absmax);
    }
    free(q->offsets);
    free(q->tile_real);
    free(q->part);
    free(q->first);
    free(q);
    m->qbase = NULL;
}

/* ---- products ------------------------------------------------------------------------------ */

/* double_quant: the offset in the header of part p of the layer whose block starts at base */
static float part_offset(zt_llama *m, size_t base, int p, const unsigned char *part)
{
    zt_qbase *q = m->qbase;
    if (!q->double_quant) return 0;
    float *at = &q->offsets[(base - m->layer0_off) / m->lay.numel * (size_t)q->nparts + (size_t)p];
    if (isnan(*at)) {
        zt_backend *be = m->be;
        unsigned char header[64]; /* the part's header (zt_qbase_write_header) */
        _Static_assert(sizeof(part_header) <= sizeof header, "a part's header fits");
        be->download(be, header, part, sizeof(part_header));
        *at = zt_qbase_part_offset(header);
    }
    return *at;
}

/* The rows [lo, hi) of the matrix's [r0, r0 + nr) that part a holds; whether there are any. */
static int rows_in(const zt_qbase_part *a, size_t r0, size_t nr, size_t *lo, size_t *hi)
{
    *lo = r0 > a->row0 ? r0 : a->row0, *hi = r0 + nr < a->row0 + a->rows ? r0 + nr : a->row0 + a->rows;
    return *lo < *hi;
}

/* Rows [r0, r0 + nr) of matrix k of the layer whose block starts at element base, into the tile. */
static const zt_real *dequantize_rows(zt_llama *m, size_t base, int k, size_t r0, size_t nr)
{
    zt_qbase *q = m->qbase;
    size_t cols = q->part[q->first[k]].cols;
    for (int p = q->first[k]; p < q->first[k + 1]; p++) {
        const zt_qbase_part *a = &q->part[p];
        size_t lo, hi;
        if (!rows_in(a, r0, nr, &lo, &hi)) continue;
        const unsigned char *part = (const unsigned char *)(m->params + base + a->off);
        dequantize(m->be, q, part, a->rows, cols, lo - a->row0, hi - lo, part_offset(m, base, p, part), q->absmax,
                   q->tile + (lo - r0) * cols);
    }
#ifdef ZT_REAL_DOUBLE
    for (size_t i = 0; i < nr * cols; i++) q->tile_real[i] = q->tile[i];
    return q->tile_real;
#else
    return q->tile;
#endif
}

/* The layer's block and matrix whose whole [O, I] weight starts at element w, or -1. */
static int find(const zt_llama *m, size_t w, int O, int I, size_t *base)
{
    const zt_qbase *q = m->qbase;
    if (!q || w < m->layer0_off || w >= m->layer0_off + m->lay.numel * m->L) return -1;
    *base = m->layer0_off + (w - m->layer0_off) / m->lay.numel * m->lay.numel;
    for (int k = 0; k < q->nmats; k++) {
        const zt_qbase_part *a = &q->part[q->first[k]], *z = &q->part[q->first[k + 1] - 1];
        if (*base + a->off != w) continue;
        ZT_ASSERT(a->cols == (uint32_t)I && z->row0 + z->rows == (uint32_t)O); /* a whole matrix (no MLP tiles) */
        return k;
    }
    return -1;
}

/* Whether N rows multiply as the weights are decoded (the backend's nf4_product), not through
 * decoded tiles and the GEMM, whose few-row path is slow: an NF4 base, at most ZT_NF4_FEW_ROWS
 * rows (a mixture's expert, a decoding step), fp32 (the double-precision build decodes tiles) */
static int few_rows(const zt_llama *m, int N)
{
#ifdef ZT_REAL_DOUBLE
    return 0;
#else
    return m->qbase->kind == ZT_QBASE_NF4 && N <= ZT_NF4_FEW_ROWS && m->be->nf4_product && m->be->nf4_product_t;
#endif
}

/* Rows [r0, r0 + nr) of matrix k of the layer at base times N rows as they are decoded, part by
 * part: forward y[:, r0 ..] = x·Wᵀ + beta·y, or (dx) dx = y[:, r0 ..]·W + beta·dx with y as dy. */
static void product_rows(zt_llama *m, size_t base, int k, size_t r0, size_t nr, int N, const zt_real *x, zt_real *y,
                         int ldy, zt_real *dx, zt_real beta)
{
#ifndef ZT_REAL_DOUBLE
    zt_qbase *q = m->qbase;
    size_t cols = q->part[q->first[k]].cols;
    for (int p = q->first[k]; p < q->first[k + 1]; p++) {
        const zt_qbase_part *a = &q->part[p];
        size_t lo, hi;
        if (!rows_in(a, r0, nr, &lo, &hi)) continue;
        const unsigned char *part = (const unsigned char *)(m->params + base + a->off);
        const uint8_t *codes;
        size_t first;
        const float *am = nf4_rows(m->be, q, part, a->rows, cols, lo - a->row0, hi - lo, part_offset(m, base, p, part),
                                   q->absmax, &codes, &first);
        if (dx) m->be->nf4_product_t(m->be, codes, am, first, (int)(hi - lo), (int)cols, y + lo, ldy, N, dx, beta);
        else m->be->nf4_product(m->be, codes, am, first, (int)(hi - lo), (int)cols, x, N, y + lo, ldy, beta);
        beta = dx ? 1 : beta; /* dx sums the parts */
    }
#endif
}

int zt_qbase_forward(zt_llama *m, zt_real *y, int ldy, const zt_real *x, size_t w, int N, int O, int I, zt_real beta)
{
    size_t base;
    int k = find(m, w, O, I, &base);
    if (k < 0) return 0;
    zt_backend *be = m->be;
    int rows = (int)(m->qbase->cap / (size_t)I), few = few_rows(m, N);
    for (int t = 0; t < O; t += rows) {
        int nr = O - t < rows ? O - t : rows;
        if (few) {
            product_rows(m, base, k, (size_t)t, (size_t)nr, N, x, y, ldy, NULL, beta);
            continue;
        }
        const zt_real *W = dequantize_rows(m, base, k, (size_t)t, (size_t)nr);
        be->gemm(be, 0, 1, N, nr, I, 1, x, I, W, I, beta, y + t, ldy);
    }
    return 1;
}

int zt_qbase_backward(zt_llama *m, zt_real *dx, zt_real dx_beta, const zt_real *dy, int ldy, size_t w, int N, int O,
                      int I)
{
    size_t base;
    int k = find(m, w, O, I, &base);
    if (k < 0) return 0;
    zt_backend *be = m->be;
    int rows = (int)(m->qbase->cap / (size_t)I), few = few_rows(m, N);
    for (int t = 0; t < O; t += rows) { /* dx = Σ over row tiles of dy[:, tile]·W[tile, :] */
        int nr = O - t < rows ? O - t : rows;
        if (few) {
            product_rows(m, base, k, (size_t)t, (size_t)nr, N, NULL, (zt_real *)dy, ldy, dx, t ? 1 : dx_beta);
            continue;
        }
        const zt_real *W = dequantize_rows(m, base, k, (size_t)t, (size_t)nr);
        be->gemm(be, 0, 0, N, I, nr, 1, dy + t, ldy, W, I, t ? 1 : dx_beta, dx, I);
    }
    return 1;
}

/* The rate of zt_qbase_forward's tiled product for an [O, I] weight, O four tiles' rows of random
 * values encoded as kind says, x [M, I]: GFLOP/s, the best of the repetitions after a warm-up; 0
 * when out of memory. (zt validate's step time: the base's products are these, not plain GEMMs.) */
double zt_qbase_gflops(zt_qbase_kind kind, int double_quant, int M, int I)
{
    zt_qbase q = {.kind = kind, .double_quant = kind == ZT_QBASE_NF4 && double_quant};
    size_t cap = tile_elems > (size_t)I ? tile_elems : (size_t)I, rows = cap / (size_t)I, O = 4 * rows;
    size_t n = O * (size_t)I;
    float *w = malloc(n * sizeof *w), *tile = malloc(cap * sizeof *tile),
          *absmax = malloc((cap / 64 + 2) * sizeof *absmax);
    zt_real *x = calloc((size_t)M * I, sizeof *x), *y = calloc((size_t)M * O, sizeof *y), *tr = NULL;
    unsigned char *part = malloc(zt_qbase_tensor_elems(&q, O, (size_t)I) * sizeof(zt_real));
#ifdef ZT_REAL_DOUBLE
    tr = malloc(cap * sizeof *tr);
#endif
    zt_qbase_encoder e = {0};
    double best = 0;
    uint64_t seed = 88172645463325252ull;
    for (size_t i = 0; w && i < n; i++) { /* values of either sign across many blocks' scales */
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        w[i] = (float)((double)(seed >> 11) / 9007199254740992.0 - 0.5);
    }
    zt_backend *be = zt_backend_cpu();
#ifndef ZT_REAL_DOUBLE
    int few = kind == ZT_QBASE_NF4 && M <= ZT_NF4_FEW_ROWS;
#endif
    int ok = w && tile && absmax && x && y && part && !zt_qbase_encode_begin(&e, &q, O, (size_t)I, part);
    if (ok) zt_qbase_encode_piece(&e, w, n);
    if (ok && !zt_qbase_encode_end(&e, "timing")) {
        /* repeated for a quarter of a second at least: a few milliseconds' products time the
           threads' and the clock's warm-up more than the product (measured: up to 1.4x slower) */
        double start = zt_now_s();
        for (int rep = 0; rep < 4 || zt_now_s() - start < 0.25; rep++) {
            double t0 = zt_now_s();
            for (size_t t = 0; t < O; t += rows) {
#ifndef ZT_REAL_DOUBLE
                if (few) { /* as zt_qbase_forward multiplies few rows: as they are decoded */
                    const uint8_t *codes;
                    size_t first;
                    const float *a = nf4_rows(be, &q, part, O, (size_t)I, t, rows, zt_qbase_part_offset(part), absmax,
                                              &codes, &first);
                    be->nf4_product(be, codes, a, first, (int)rows, I, x, M, y + t, (int)O, 0);
                    continue;
                }
#endif
                dequantize_here(&q, part, O, (size_t)I, t, rows, absmax, tile);
#ifdef ZT_REAL_DOUBLE
                for (size_t i = 0; i < rows * (size_t)I; i++) tr[i] = tile[i];
                be->gemm(be, 0, 1, M, (int)rows, I, 1, x, I, tr, I, 0, y + t, (int)O);
#else
                be->gemm(be, 0, 1, M, (int)rows, I, 1, x, I, tile, I, 0, y + t, (int)O);
#endif
            }
            double s = zt_now_s() - t0;
            if (rep > 0 && (best == 0 || s < best)) best = s;
        }
    }
    free(e.absmax), free(w), free(tile), free(absmax), free(x), free(y), free(part), free(tr);
    return best > 0 ? 2.0 * M * (double)n / best * 1e-9 : 0;
}

/* ---- round trip, adapter note -------------------------------------------------------------- */

/* One tensor's values replaced by their encoding's, dequantized. */
static zt_status round_trip_tensor(const zt_qbase *q, zt_real *w, const zt_llama_tensor *t)
{
    size_t rows = (size_t)t->shape[0], cols = (size_t)t->shape[1], n = rows * cols;
    unsigned char *part = malloc(zt_qbase_tensor_elems(q, rows, cols) * sizeof(zt_real));
    float *x = malloc(n * sizeof(float)), *absmax = malloc((zt_nf4_blocks(n) + 2) * sizeof(float));
    zt_qbase_encoder e = {0};
    zt_status st = part && x && absmax ? zt_qbase_encode_begin(&e, q, rows, cols, part)
                                       : zt_fail(ZT_ENOMEM, "out of memory quantizing '%s'", t->name);
    for (size_t i = 0; !st && i < n; i++) x[i] = (float)w[i];
    if (!st) zt_qbase_encode_piece(&e, x, n);
    if (!st) st = zt_qbase_encode_end(&e, t->name);
    if (!st) dequantize_here(q, part, rows, cols, 0, rows, absmax, x);
    for (size_t i = 0; !st && i < n; i++) w[i] = x[i];
    free(e.absmax);
    free(part);
    free(x);
    free(absmax);
    return st;
}

zt_status zt_qbase_round_trip(zt_llama *m, zt_qbase_kind kind, int double_quant)
{
    ZT_ASSERT(!m->qbase && kind != ZT_QBASE_NONE);
    zt_qbase q = {.kind = kind, .double_quant = kind == ZT_QBASE_NF4 && double_quant};
    zt_real *p = zt_llama_params_map(m);
    zt_status st = p ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory quantizing the base");
    for (int i = 0; !st && i < m->n_tensors; i++)
        if (zt_qbase_is_linear(m->tensors[i].name))
            st = round_trip_tensor(&q, p + m->tensors[i].offset, &m->tensors[i]);
    if (p) zt_llama_params_unmap(m, p, 1);
    return st;
}

zt_status zt_qbase_decode_tensor(const zt_qbase *q, const void *enc, size_t rows, size_t cols, float *y)
{
    float *absmax = malloc((zt_nf4_blocks(rows * cols) + 2) * sizeof(float));
    if (!absmax) return zt_fail(ZT_ENOMEM, "out of memory decoding a quantized weight");
    dequantize_here(q, enc, rows, cols, 0, rows, absmax, y);
    free(absmax);
    return ZT_OK;
}

zt_status zt_qbase_note_write(const char *dir, zt_qbase_kind kind, int double_quant)
{
    char path[4096];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "quantize_base", zt_qbase_kind_names[kind]);
    cJSON_AddBoolToObject(o, "double_quant", kind == ZT_QBASE_NF4 && double_quant);
    if (kind == ZT_QBASE_NF4) cJSON_AddNumberToObject(o, "block_size", ZT_NF4_BLOCK);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    zt_status st = text ? zt_path_join(path, sizeof path, dir, NOTE_FILE)
                        : zt_fail(ZT_ENOMEM, "out of memory writing the base's quantization");
    if (!st) st = zt_write_file_atomic(path, text, strlen(text));
    free(text);
    return st;
}

zt_status zt_qbase_note_read(const char *dir, zt_qbase_kind *kind, int *double_quant)
{
    char path[4096], *text;
    size_t len;
    *kind = ZT_QBASE_NONE, *double_quant = 0;
    zt_status st = zt_path_join(path, sizeof path, dir, NOTE_FILE);
    if (st || !zt_path_exists(path)) return st;
    if ((st = zt_read_file(path, &text, &len))) return st;
    cJSON *o = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "quantize_base"),
                *dq = cJSON_GetObjectItemCaseSensitive(o, "double_quant");
    int found = -1;
    for (int i = 1; i < 3 && cJSON_IsString(k); i++)
        if (!strcmp(k->valuestring, zt_qbase_kind_names[i])) found = i;
    if (found < 0) st = zt_fail(ZT_EUSER, "'%s': 'quantize_base' must be \"nf4\" or \"int8\"", path);
    else if (dq && !cJSON_IsBool(dq)) st = zt_fail(ZT_EUSER, "'%s': 'double_quant' must be true or false", path);
    else *kind = (zt_qbase_kind)found, *double_quant = cJSON_IsTrue(dq);
    cJSON_Delete(o);
    return st;
}
