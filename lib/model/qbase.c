/* A quantized frozen base (qbase.h): the encoding, its cache file, and the tiled products. */
#include "qbase.h"

#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "kernels/cpu/nf4.h"
#include "lib/core/cache_key.h"
#include "lib/core/crc32c.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/core/pages.h"
#include "lora.h"

#define MAGIC "ZTQBASE1"
#define NOTE_FILE "zt_quantization.json"
enum { ALIGN = 64 };

/* An encoding's first bytes, in the cache file as in memory; the matrices follow, then the data. */
typedef struct qbase_header {
    char magic[8];
    uint32_t crc; /* CRC-32C of every byte after this field */
    uint32_t zero;
    uint32_t kind, double_quant, n, block; /* block: the NF4 block size */
    uint64_t key[2];                       /* the content key it was built for */
    uint64_t bytes;                        /* of the whole encoding */
} qbase_header;

/* A tile of dequantized weights holds this many elements at most, or one row. */
static size_t tile_elems = (size_t)1 << 20;

void zt_qbase_set_tile_elems(size_t n) { tile_elems = n; }

static size_t align_up(size_t n) { return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

static size_t header_bytes(int n) { return align_up(sizeof(qbase_header) + (size_t)n * sizeof(zt_qbase_matrix)); }

/* ---- layout -------------------------------------------------------------------------------- */

/* The encoded weights of m, 4 a layer, with their data's byte offsets; returns the data's bytes. */
static size_t layout(const zt_llama *m, zt_qbase_kind kind, int dq, zt_qbase_matrix *mats)
{
    const zt_llama_layer_layout *y = &m->lay;
    size_t at = 0;
    for (int l = 0; l < m->L; l++) {
        size_t base = m->layer0_off + y->numel * l;
        const size_t off[4] = {base + y->wqkv, base + y->wo, base + y->wgu, base + y->wd};
        const int rows[4] = {m->S3, m->C, 2 * m->F, m->C}, cols[4] = {m->C, m->HD, m->C, m->F};
        for (int k = 0; k < 4; k++) {
            zt_qbase_matrix *a = &mats[4 * l + k];
            size_t n = (size_t)rows[k] * cols[k], nb = zt_nf4_blocks(n);
            *a = (zt_qbase_matrix){.off = off[k], .rows = (uint32_t)rows[k], .cols = (uint32_t)cols[k]};
            a->codes = at;
            at += align_up(kind == ZT_QBASE_NF4 ? (n + 1) / 2 : n);
            a->scales = at;
            at += align_up(kind == ZT_QBASE_INT8 ? rows[k] * sizeof(float) : dq ? nb : nb * sizeof(float));
            a->scales2 = at;
            if (kind == ZT_QBASE_NF4 && dq) at += align_up(zt_nf4_dq_blocks(nb) * sizeof(float));
        }
    }
    return at;
}

size_t zt_qbase_bytes(const zt_llama *m, zt_qbase_kind kind, int double_quant, size_t *weights)
{
    zt_qbase_matrix *mats = calloc((size_t)4 * m->L, sizeof *mats);
    if (!mats) return 0;
    int dq = kind == ZT_QBASE_NF4 && double_quant;
    size_t bytes = header_bytes(4 * m->L) + layout(m, kind, dq, mats), cap = tile_elems;
    *weights = 0;
    for (int i = 0; i < 4 * m->L; i++) {
        *weights += (size_t)mats[i].rows * mats[i].cols;
        cap = mats[i].cols > cap ? mats[i].cols : cap;
    }
    free(mats);
    return bytes + cap * sizeof(float) + (cap / ZT_NF4_BLOCK + 2) * sizeof(float); /* and the tile (alloc_tile) */
}

/* ---- encoding ------------------------------------------------------------------------------ */

/* Weight a's elements as float: m->params itself, or (double-precision build) a copy in *tmp. */
static const float *weight_floats(const zt_llama *m, const zt_qbase_matrix *a, float **tmp)
{
    size_t n = (size_t)a->rows * a->cols;
#ifdef ZT_REAL_DOUBLE
    *tmp = malloc(n * sizeof(float));
    for (size_t i = 0; *tmp && i < n; i++) (*tmp)[i] = (float)m->params[a->off + i];
    return *tmp;
#else
    (void)n, *tmp = NULL;
    return m->params + a->off;
#endif
}

/* The matrix's name for messages: the layer and the weights it holds. */
static const char *const matrix_names[4] = {"self_attn.{q,k,v}_proj", "self_attn.o_proj", "mlp.{gate,up}_proj",
                                            "mlp.down_proj"};

static zt_status encode_matrix(const zt_llama *m, zt_qbase_kind kind, int dq, zt_qbase_matrix *a, unsigned char *data,
                               int index)
{
    float *tmp, *absmax = NULL;
    const float *w = weight_floats(m, a, &tmp);
    size_t n = (size_t)a->rows * a->cols, nb = zt_nf4_blocks(n), bad;
    if (kind == ZT_QBASE_NF4 && dq) absmax = malloc(nb * sizeof(float));
    if (!w || (dq && kind == ZT_QBASE_NF4 && !absmax)) {
        free(tmp);
        return zt_fail(ZT_ENOMEM, "out of memory quantizing the base");
    }
    if (kind == ZT_QBASE_INT8) {
        bad = zt_int8_rows_quantize(w, a->rows, a->cols, (int8_t *)(data + a->codes), (float *)(data + a->scales));
    } else {
        bad = zt_nf4_quantize(w, n, data + a->codes, absmax ? absmax : (float *)(data + a->scales));
        if (absmax) {
            a->offset = zt_nf4_dq_offset(absmax, nb);
            zt_nf4_dq_quantize(absmax, nb, a->offset, data + a->scales, (float *)(data + a->scales2));
        }
    }
    free(tmp);
    free(absmax);
    if (bad)
        return zt_fail(ZT_EUSER, "model.layers.%d.%s: %zu weights are NaN or infinite: they cannot be quantized",
                       index / 4, matrix_names[index % 4], bad);
    return ZT_OK;
}

/* The content key: the format, the encoding, the shapes and a CRC-32C of each weight's values. */
static void content_key(const zt_llama *m, const zt_qbase *q, const zt_qbase_matrix *mats, uint64_t key[2])
{
    zt_cache_key k;
    zt_cache_key_init(&k);
    zt_cache_key_add_str(&k, MAGIC);
    const uint32_t what[4] = {q->kind, (uint32_t)q->double_quant, (uint32_t)q->n, sizeof(zt_real)};
    zt_cache_key_add(&k, what, sizeof what);
    for (int i = 0; i < q->n; i++) {
        const zt_qbase_matrix *a = &mats[i];
        uint32_t crc = zt_crc32c(0, m->params + a->off, (size_t)a->rows * a->cols * sizeof(zt_real));
        zt_cache_key_add(&k, a, offsetof(zt_qbase_matrix, offset));
        zt_cache_key_add(&k, &crc, sizeof crc);
    }
    key[0] = k.h[0], key[1] = k.h[1];
}

static uint32_t checksum(const void *enc, size_t bytes)
{
    size_t from = offsetof(qbase_header, zero);
    return zt_crc32c(0, (const char *)enc + from, bytes - from);
}

/* q's matrices and data in the encoding at enc. */
static void point_into(zt_qbase *q, const void *enc, size_t bytes)
{
    q->mats = (const zt_qbase_matrix *)((const char *)enc + sizeof(qbase_header));
    q->data = (const unsigned char *)enc + header_bytes(q->n);
    q->bytes = bytes;
}

/* Encodes m into q->own: the header, the matrices (mats, laid out for data_bytes), the data. */
static zt_status encode(const zt_llama *m, zt_qbase *q, const zt_qbase_matrix *mats, size_t data_bytes,
                        const uint64_t key[2])
{
    size_t hb = header_bytes(q->n), bytes = hb + data_bytes;
    q->own = zt_pages_alloc(bytes);
    if (!q->own) return zt_fail(ZT_ENOMEM, "out of memory for the quantized base (%zu bytes)", bytes);
    qbase_header *h = q->own;
    zt_qbase_matrix *own_mats = (zt_qbase_matrix *)(h + 1);
    memcpy(own_mats, mats, (size_t)q->n * sizeof *mats);
    unsigned char *data = (unsigned char *)q->own + hb;
    for (int i = 0; i < q->n; i++) {
        zt_status st = encode_matrix(m, q->kind, q->double_quant, &own_mats[i], data, i);
        if (st) return st;
    }
    memcpy(h->magic, MAGIC, sizeof h->magic);
    h->kind = q->kind, h->double_quant = (uint32_t)q->double_quant, h->n = (uint32_t)q->n, h->block = ZT_NF4_BLOCK;
    h->key[0] = key[0], h->key[1] = key[1], h->bytes = bytes;
    h->crc = checksum(h, bytes);
    point_into(q, q->own, bytes);
    return ZT_OK;
}

/* ---- the cache file ------------------------------------------------------------------------ */

static int same_layout(const zt_qbase_matrix *a, const zt_qbase_matrix *b)
{
    return a->off == b->off && a->rows == b->rows && a->cols == b->cols && a->codes == b->codes &&
           a->scales == b->scales && a->scales2 == b->scales2 && isfinite(a->offset) && !a->zero;
}

/* ZT_OK when the len bytes at enc are a whole encoding of what q, mats and key describe. */
static zt_status check_entry(const zt_qbase *q, const void *enc, size_t len, const zt_qbase_matrix *mats,
                             const uint64_t key[2])
{
    const qbase_header *h = enc;
    if (len < header_bytes(q->n) || memcmp(h->magic, MAGIC, sizeof h->magic))
        return zt_fail(ZT_EUSER, "not a quantized base of this version");
    if (h->bytes != len)
        return zt_fail(ZT_EUSER, "%zu bytes where its header says %llu", len, (unsigned long long)h->bytes);
    if (h->crc != checksum(enc, len)) return zt_fail(ZT_EUSER, "checksum mismatch");
    if (h->zero || h->kind != q->kind || h->double_quant != (uint32_t)q->double_quant || h->n != (uint32_t)q->n ||
        h->block != ZT_NF4_BLOCK || h->key[0] != key[0] || h->key[1] != key[1])
        return zt_fail(ZT_EUSER, "its header is not that of this model and encoding");
    const zt_qbase_matrix *got = (const zt_qbase_matrix *)(h + 1);
    for (int i = 0; i < q->n; i++)
        if (!same_layout(&got[i], &mats[i])) return zt_fail(ZT_EUSER, "matrix %d is not laid out as expected", i);
    return ZT_OK;
}

/* Maps path into q when it holds the encoding expected (1), else 0 (absent, or bad: a warning). */
static int map_entry(zt_qbase *q, const char *path, const zt_qbase_matrix *mats, const uint64_t key[2])
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    struct stat sb;
    size_t len = 0;
    void *map = MAP_FAILED;
    if (!fstat(fd, &sb) && (len = (size_t)sb.st_size) > 0) map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    zt_status st = map == MAP_FAILED ? zt_fail(ZT_EUSER, "empty or unreadable") : check_entry(q, map, len, mats, key);
    if (st) {
        zt_log_warn("the quantized base '%s' is bad (%s): quantizing the base again", path, zt_errmsg());
        if (map != MAP_FAILED) munmap(map, len);
        return 0;
    }
    q->map = map;
    point_into(q, map, len);
    return 1;
}

/* The cache entry for key in dir: mapped when whole, else encoded and written (under a lock, so
 * that ranks and runs that start together encode it once). */
static zt_status cached(const zt_llama *m, zt_qbase *q, const char *dir, const zt_qbase_matrix *mats, size_t data_bytes,
                        int *hit)
{
    uint64_t key[2];
    char path[4096];
    int lfd;
    content_key(m, q, mats, key);
    zt_status st = zt_mkdir_p(dir);
    if (st) return st;
    if (snprintf(path, sizeof path, "%s/base-%s%s-%016llx%016llx.bin", dir, zt_qbase_kind_names[q->kind],
                 q->double_quant ? "-dq" : "", (unsigned long long)key[0],
                 (unsigned long long)key[1]) >= (int)sizeof path)
        return zt_fail(ZT_EUSER, "data.cache_dir is too long");
    if ((st = zt_lock_file(path, &lfd))) return st;
    *hit = map_entry(q, path, mats, key);
    if (!*hit && !(st = encode(m, q, mats, data_bytes, key))) st = zt_write_file_atomic(path, q->own, q->bytes);
    zt_unlock_file(lfd);
    return st;
}

/* ---- open, free ---------------------------------------------------------------------------- */

static void free_qbase(zt_qbase *q)
{
    if (!q) return;
    if (q->map) munmap(q->map, q->bytes);
    zt_pages_free(q->own);
    free(q->tile);
    free(q->absmax);
    free(q->tile_real);
    free(q);
}

void zt_qbase_free(zt_llama *m)
{
    free_qbase(m->qbase);
    m->qbase = NULL;
}

/* The tile buffers: tile_elems elements, or the widest row. */
static zt_status alloc_tile(zt_qbase *q)
{
    size_t cap = tile_elems;
    for (int i = 0; i < q->n; i++) cap = q->mats[i].cols > cap ? q->mats[i].cols : cap;
    q->cap = cap;
    q->tile = malloc(cap * sizeof(float));
    q->absmax = malloc((cap / ZT_NF4_BLOCK + 2) * sizeof(float));
#ifdef ZT_REAL_DOUBLE
    q->tile_real = malloc(cap * sizeof(zt_real));
    if (!q->tile_real) return zt_fail(ZT_ENOMEM, "out of memory for the quantized base's tile");
#endif
    return q->tile && q->absmax ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory for the quantized base's tile");
}

/* A qbase for m with its encoding in place: from the cache in dir, or encoded in memory (dir NULL). */
static zt_status make(const zt_llama *m, zt_qbase_kind kind, int dq, const char *dir, zt_qbase **out, int *hit)
{
    *hit = 0;
    if (!m->be->host_memory)
        return zt_fail(ZT_EUSER,
                       "lora.quantize_base = \"%s\" runs on the CPU backend only (model.device = \"cpu\"): the %s "
                       "backend has no dequantizing product yet",
                       zt_qbase_kind_names[kind], m->be->name);
    zt_qbase *q = calloc(1, sizeof *q);
    zt_qbase_matrix *mats = q ? calloc((size_t)4 * m->L, sizeof *mats) : NULL;
    if (!mats) {
        free(q);
        return zt_fail(ZT_ENOMEM, "out of memory for the quantized base");
    }
    q->kind = kind, q->double_quant = kind == ZT_QBASE_NF4 && dq, q->n = 4 * m->L;
    size_t data_bytes = layout(m, kind, q->double_quant, mats);
    static const uint64_t no_key[2] = {0, 0};
    zt_status st = dir ? cached(m, q, dir, mats, data_bytes, hit) : encode(m, q, mats, data_bytes, no_key);
    free(mats);
    if (!st) st = alloc_tile(q);
    if (st) free_qbase(q);
    else *out = q;
    return st;
}

zt_status zt_qbase_open(zt_llama *m, zt_qbase_kind kind, int double_quant, const char *cache_dir, int *hit)
{
    ZT_ASSERT(m->lora && !m->qbase && kind != ZT_QBASE_NONE);
    if (m->lora->cfg.method == ZT_LORA_METHOD_DORA) /* its weight norms read the base's fp32 weights */
        return zt_fail(ZT_EUSER,
                       "lora.quantize_base = \"%s\" with DoRA (lora.method = \"dora\", or an adapter with "
                       "use_dora) is not supported yet",
                       zt_qbase_kind_names[kind]);
    zt_qbase *q;
    zt_status st = make(m, kind, double_quant, cache_dir, &q, hit);
    if (st) return st;
    m->qbase = q;
    for (int i = 0; i < q->n; i++) { /* the weights' own copies go back to the system */
        const zt_qbase_matrix *a = &q->mats[i];
        size_t n = (size_t)a->rows * a->cols;
        m->be->discard(m->be, m->params + a->off, n * sizeof(zt_real));
        if (m->params16) m->be->discard(m->be, m->params16 + a->off, n * sizeof(uint16_t));
    }
    return ZT_OK;
}

/* ---- products ------------------------------------------------------------------------------ */

/* Rows [r0, r0 + nr) of matrix a, dequantized into the tile. */
static const zt_real *dequantize_rows(zt_qbase *q, const zt_qbase_matrix *a, size_t r0, size_t nr)
{
    const unsigned char *codes = q->data + a->codes;
    size_t first = r0 * a->cols, n = nr * a->cols;
    if (q->kind == ZT_QBASE_INT8) {
        zt_int8_rows_dequantize((const int8_t *)codes, (const float *)(q->data + a->scales), a->cols, r0, nr, q->tile);
    } else if (!q->double_quant) {
        zt_nf4_dequantize(codes, (const float *)(q->data + a->scales), first, n, q->tile);
    } else { /* the absmax values of the tile's blocks first */
        size_t b0 = first / ZT_NF4_BLOCK, nb = (first + n - 1) / ZT_NF4_BLOCK - b0 + 1;
        zt_nf4_dq_dequantize(q->data + a->scales, (const float *)(q->data + a->scales2), a->offset, b0, nb, q->absmax);
        zt_nf4_dequantize(codes + b0 * ZT_NF4_BLOCK / 2, q->absmax, first - b0 * ZT_NF4_BLOCK, n, q->tile);
    }
#ifdef ZT_REAL_DOUBLE
    for (size_t i = 0; i < n; i++) q->tile_real[i] = q->tile[i];
    return q->tile_real;
#else
    return q->tile;
#endif
}

/* The encoded matrix that holds rows [*r0, *r0 + O) of I columns from element w on, or NULL. */
static const zt_qbase_matrix *find(const zt_llama *m, size_t w, int O, int I, size_t *r0)
{
    const zt_qbase *q = m->qbase;
    if (!q || w < m->layer0_off || w >= m->layer0_off + m->lay.numel * m->L) return NULL;
    size_t l = (w - m->layer0_off) / m->lay.numel;
    for (int k = 0; k < 4; k++) {
        const zt_qbase_matrix *a = &q->mats[4 * l + k];
        if (w < a->off || w >= a->off + (size_t)a->rows * a->cols) continue;
        ZT_ASSERT(a->cols == (uint32_t)I && (w - a->off) % I == 0);
        *r0 = (w - a->off) / I;
        ZT_ASSERT(*r0 + O <= a->rows);
        return a;
    }
    return NULL;
}

int zt_qbase_forward(zt_llama *m, zt_real *y, int ldy, const zt_real *x, size_t w, int N, int O, int I, zt_real beta)
{
    size_t r0;
    const zt_qbase_matrix *a = find(m, w, O, I, &r0);
    if (!a) return 0;
    zt_backend *be = m->be;
    int rows = (int)(m->qbase->cap / a->cols);
    for (int t = 0; t < O; t += rows) {
        int nr = O - t < rows ? O - t : rows;
        const zt_real *W = dequantize_rows(m->qbase, a, r0 + t, nr);
        be->gemm(be, 0, 1, N, nr, I, 1, x, I, W, I, beta, y + t, ldy);
    }
    return 1;
}

int zt_qbase_backward(zt_llama *m, zt_real *dx, zt_real dx_beta, const zt_real *dy, int ldy, size_t w, int N, int O,
                      int I)
{
    size_t r0;
    const zt_qbase_matrix *a = find(m, w, O, I, &r0);
    if (!a) return 0;
    zt_backend *be = m->be;
    int rows = (int)(m->qbase->cap / a->cols);
    for (int t = 0; t < O; t += rows) { /* dx = Σ over row tiles of dy[:, tile]·W[tile, :] */
        int nr = O - t < rows ? O - t : rows;
        const zt_real *W = dequantize_rows(m->qbase, a, r0 + t, nr);
        be->gemm(be, 0, 0, N, I, nr, 1, dy + t, ldy, W, I, t ? 1 : dx_beta, dx, I);
    }
    return 1;
}

/* ---- round trip, adapter note -------------------------------------------------------------- */

zt_status zt_qbase_round_trip(zt_llama *m, zt_qbase_kind kind, int double_quant)
{
    zt_qbase *q;
    int hit;
    zt_status st = make(m, kind, double_quant, NULL, &q, &hit);
    if (st) return st;
    for (int i = 0; i < q->n; i++) {
        const zt_qbase_matrix *a = &q->mats[i];
        size_t rows = q->cap / a->cols;
        for (size_t r0 = 0; r0 < a->rows; r0 += rows) {
            size_t nr = a->rows - r0 < rows ? a->rows - r0 : rows;
            memcpy(m->params + a->off + r0 * a->cols, dequantize_rows(q, a, r0, nr), nr * a->cols * sizeof(zt_real));
        }
    }
    free_qbase(q);
    if (m->dtype_bf16) zt_llama_sync_params16(m);
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
