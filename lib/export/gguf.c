/* The GGUF writer: metadata serialized as it is added, tensors recorded with their fill functions
 * and converted chunk by chunk while the file is written. */
#include "gguf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/dtype.h"
#include "lib/core/fileio.h"

enum { ALIGN = 32, QK = 32, Q8_BYTES = 34, MAX_DIMS = 4 };
enum { KV_U32 = 4, KV_I32 = 5, KV_F32 = 6, KV_BOOL = 7, KV_STR = 8, KV_ARRAY = 9 };
#define CHUNK ((size_t)1 << 18) /* elements converted per write, at least */

typedef struct tensor {
    char *name;
    zt_gguf_type type;
    int ndim;
    int64_t shape[MAX_DIMS]; /* as given: rows first */
    size_t numel, row, unit, nbytes, offset;
    zt_gguf_fill_fn fill;
    void *ctx;
} tensor;

struct zt_gguf {
    unsigned char *kv; /* the serialized key-value pairs */
    size_t kv_len, kv_cap, n_kv;
    char **keys;
    tensor *t;
    int n, cap;
    size_t data; /* bytes of tensor data, padded */
};

int zt_gguf_type_parse(const char *s, zt_gguf_type *t)
{
    static const struct {
        const char *name;
        zt_gguf_type t;
    } names[] = {{"fp32", ZT_GGUF_F32}, {"fp16", ZT_GGUF_F16}, {"bf16", ZT_GGUF_BF16}, {"q8_0", ZT_GGUF_Q8_0}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(s, names[i].name)) return *t = names[i].t, 0;
    return -1;
}

const char *zt_gguf_type_name(zt_gguf_type t)
{
    switch (t) {
    case ZT_GGUF_F32: return "fp32";
    case ZT_GGUF_F16: return "fp16";
    case ZT_GGUF_BF16: return "bf16";
    default: return "q8_0";
    }
}

uint32_t zt_gguf_file_type(zt_gguf_type t)
{
    switch (t) { /* llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_BF16 32 */
    case ZT_GGUF_F32: return 0;
    case ZT_GGUF_F16: return 1;
    case ZT_GGUF_BF16: return 32;
    default: return 7;
    }
}

zt_gguf *zt_gguf_new(void) { return calloc(1, sizeof(zt_gguf)); }

void zt_gguf_free(zt_gguf *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) free(g->keys[i]);
    for (int i = 0; i < g->n; i++) free(g->t[i].name);
    free(g->keys);
    free(g->kv);
    free(g->t);
    free(g);
}

/* --- metadata --------------------------------------------------------------------------- */

static zt_status put(zt_gguf *g, const void *p, size_t n)
{
    if (g->kv_len + n > g->kv_cap) {
        size_t cap = g->kv_cap ? g->kv_cap : 4096;
        while (cap < g->kv_len + n) cap *= 2;
        unsigned char *kv = realloc(g->kv, cap);
        if (!kv) return zt_fail(ZT_ENOMEM, "out of memory writing GGUF metadata");
        g->kv = kv, g->kv_cap = cap;
    }
    memcpy(g->kv + g->kv_len, p, n);
    g->kv_len += n;
    return ZT_OK;
}

static zt_status put_u32(zt_gguf *g, uint32_t v) { return put(g, &v, 4); } /* the file is little-endian, as x86 */
static zt_status put_u64(zt_gguf *g, uint64_t v) { return put(g, &v, 8); }

static zt_status put_str(zt_gguf *g, const char *s)
{
    size_t n = strlen(s);
    zt_status st = put_u64(g, n);
    return st ? st : put(g, s, n);
}

/* Starts a pair: the key (checked new) and the value's type. */
static zt_status key(zt_gguf *g, const char *k, uint32_t type)
{
    for (size_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->keys[i], k)) return zt_fail(ZT_EUSER, "GGUF: metadata key '%s' written twice", k);
    char **keys = realloc(g->keys, (g->n_kv + 1) * sizeof *keys);
    if (!keys || !(keys[g->n_kv] = strdup(k))) {
        if (keys) g->keys = keys;
        return zt_fail(ZT_ENOMEM, "out of memory writing GGUF metadata");
    }
    g->keys = keys, g->n_kv++;
    zt_status st = put_str(g, k);
    return st ? st : put_u32(g, type);
}

zt_status zt_gguf_str(zt_gguf *g, const char *k, const char *value)
{
    zt_status st = key(g, k, KV_STR);
    return st ? st : put_str(g, value);
}

zt_status zt_gguf_u32(zt_gguf *g, const char *k, uint32_t value)
{
    zt_status st = key(g, k, KV_U32);
    return st ? st : put_u32(g, value);
}

zt_status zt_gguf_f32(zt_gguf *g, const char *k, float value)
{
    zt_status st = key(g, k, KV_F32);
    return st ? st : put(g, &value, 4);
}

zt_status zt_gguf_bool(zt_gguf *g, const char *k, int value)
{
    unsigned char b = value != 0;
    zt_status st = key(g, k, KV_BOOL);
    return st ? st : put(g, &b, 1);
}

zt_status zt_gguf_str_array(zt_gguf *g, const char *k, const char *const *values, size_t n)
{
    zt_status st = key(g, k, KV_ARRAY);
    if (!st) st = put_u32(g, KV_STR);
    if (!st) st = put_u64(g, n);
    for (size_t i = 0; i < n && !st; i++) st = put_str(g, values[i]);
    return st;
}

static zt_status array4(zt_gguf *g, const char *k, uint32_t type, const void *values, size_t n)
{
    zt_status st = key(g, k, KV_ARRAY);
    if (!st) st = put_u32(g, type);
    if (!st) st = put_u64(g, n);
    return st ? st : put(g, values, n * 4);
}

zt_status zt_gguf_i32_array(zt_gguf *g, const char *k, const int32_t *values, size_t n)
{
    return array4(g, k, KV_I32, values, n);
}

zt_status zt_gguf_f32_array(zt_gguf *g, const char *k, const float *values, size_t n)
{
    return array4(g, k, KV_F32, values, n);
}

/* --- tensors ------------------------------------------------------------------------------ */

static size_t padded(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

zt_status zt_gguf_add(zt_gguf *g, const char *name, zt_gguf_type t, const int64_t *shape, int ndim, size_t unit,
                      zt_gguf_fill_fn fill, void *ctx)
{
    if (ndim < 1 || ndim > MAX_DIMS) return zt_fail(ZT_EUSER, "GGUF: tensor '%s' has %d dimensions", name, ndim);
    tensor x = {.type = t, .ndim = ndim, .numel = 1, .fill = fill, .ctx = ctx};
    for (int d = 0; d < ndim; d++) {
        if (shape[d] <= 0) return zt_fail(ZT_EUSER, "GGUF: tensor '%s' has an empty dimension", name);
        x.shape[d] = shape[d];
        x.numel *= (size_t)shape[d];
    }
    x.row = (size_t)shape[ndim - 1];
    x.unit = unit ? unit : x.row;
    ZT_ASSERT(x.unit % x.row == 0 && x.numel % x.unit == 0);
    if (t == ZT_GGUF_Q8_0 && x.row % QK) x.type = ZT_GGUF_F16; /* a row of whole blocks only */
    x.nbytes = x.type == ZT_GGUF_Q8_0 ? x.numel / QK * Q8_BYTES : x.numel * (x.type == ZT_GGUF_F32 ? 4 : 2);
    for (int i = 0; i < g->n; i++)
        if (!strcmp(g->t[i].name, name)) return zt_fail(ZT_EUSER, "GGUF: tensor '%s' added twice", name);
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        tensor *v = realloc(g->t, (size_t)cap * sizeof *v);
        if (!v) return zt_fail(ZT_ENOMEM, "out of memory adding tensor '%s'", name);
        g->t = v, g->cap = cap;
    }
    if (!(x.name = strdup(name))) return zt_fail(ZT_ENOMEM, "out of memory adding tensor '%s'", name);
    x.offset = g->data;
    g->data += padded(x.nbytes);
    g->t[g->n++] = x;
    return ZT_OK;
}

void zt_gguf_q8_0(const float *x, size_t n, unsigned char *out)
{
    for (size_t b = 0; b < n / QK; b++, x += QK, out += Q8_BYTES) {
        float amax = 0;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127, id = d != 0 ? 1 / d : 0;
        uint16_t h = zt_f32_to_f16(d);
        memcpy(out, &h, 2);
        for (int j = 0; j < QK; j++) out[2 + j] = (unsigned char)(int8_t)roundf(x[j] * id);
    }
}

/* n elements of x as t into out */
static void encode(zt_gguf_type t, const float *x, size_t n, void *out)
{
    switch (t) {
    case ZT_GGUF_F32: memcpy(out, x, n * 4); break;
    case ZT_GGUF_F16: zt_convert(out, ZT_F16, x, ZT_F32, n); break;
    case ZT_GGUF_BF16: zt_convert(out, ZT_BF16, x, ZT_F32, n); break;
    case ZT_GGUF_Q8_0: zt_gguf_q8_0(x, n, out); break;
    }
}

static zt_status write_header(const zt_gguf *g, zt_atomic_file *o)
{
    zt_gguf h = {0}; /* the tensor infos, serialized as the metadata is */
    zt_status st = put(&h, "GGUF", 4);
    if (!st) st = put_u32(&h, 3);
    if (!st) st = put_u64(&h, (uint64_t)g->n);
    if (!st) st = put_u64(&h, g->n_kv);
    if (!st) st = put(&h, g->kv, g->kv_len);
    for (int i = 0; i < g->n && !st; i++) {
        const tensor *x = &g->t[i];
        st = put_str(&h, x->name);
        if (!st) st = put_u32(&h, (uint32_t)x->ndim);
        for (int d = x->ndim - 1; d >= 0 && !st; d--) st = put_u64(&h, (uint64_t)x->shape[d]);
        if (!st) st = put_u32(&h, x->type);
        if (!st) st = put_u64(&h, x->offset);
    }
    static const unsigned char zeros[ALIGN];
    if (!st) st = put(&h, zeros, padded(h.kv_len) - h.kv_len);
    if (!st) st = zt_atomic_write(o, h.kv, h.kv_len);
    free(h.kv);
    return st;
}

static zt_status write_tensor(zt_atomic_file *o, const tensor *x, float *f, unsigned char *buf, size_t chunk)
{
    static const unsigned char zeros[ALIGN];
    zt_status st = ZT_OK;
    size_t per = chunk / x->unit * x->unit, ebytes = x->type == ZT_GGUF_F32 ? 4 : 2;
    for (size_t j = 0; j < x->numel && !st; j += per) {
        size_t k = x->numel - j < per ? x->numel - j : per;
        if ((st = x->fill(x->ctx, f, j, k))) break;
        encode(x->type, f, k, buf);
        st = zt_atomic_write(o, buf, x->type == ZT_GGUF_Q8_0 ? k / QK * Q8_BYTES : k * ebytes);
    }
    return st ? st : zt_atomic_write(o, zeros, padded(x->nbytes) - x->nbytes);
}

zt_status zt_gguf_finish(const zt_gguf *g, const char *path)
{
    size_t chunk = CHUNK;
    for (int i = 0; i < g->n; i++)
        if (g->t[i].unit > chunk) chunk = g->t[i].unit;
    float *f = malloc(chunk * sizeof *f);
    unsigned char *buf = malloc(chunk * sizeof(float));
    zt_atomic_file o;
    zt_status st = !f || !buf ? zt_fail(ZT_ENOMEM, "out of memory writing '%s'", path) : zt_atomic_open(&o, path);
    if (!f || !buf || st) {
        free(f), free(buf);
        return st;
    }
    st = write_header(g, &o);
    for (int i = 0; i < g->n && !st; i++) st = write_tensor(&o, &g->t[i], f, buf, chunk);
    free(f), free(buf);
    if (!st) return zt_atomic_commit(&o);
    zt_atomic_abort(&o);
    return st;
}
