/* The safetensors writer: plans shards, then writes each file atomically
 * (zt_atomic_open/commit), removes the stale files of an earlier save and fsyncs the directory. */
#include "lib/ckpt/safetensors.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/ckpt/safetensors_internal.h"
#include "lib/core/arena.h"
#include "lib/core/fileio.h"

#define ST_CHUNK ((size_t)1 << 18) /* elements converted per write */

typedef struct st_entry {
    char *name;
    zt_dtype out, src_dtype;
    int ndim;
    int64_t shape[ZT_ST_MAX_DIMS];
    const void *src;
    zt_st_fill_fn fill;   /* or data on demand, fp32 */
    zt_st_bytes_fn bytes; /* or data on demand as stored, of dtype stored */
    zt_st_dtype stored;
    void *ctx;
    size_t numel, nbytes; /* nbytes as written (out dtype) */
} st_entry;

struct zt_st_writer {
    st_entry *v;
    int n, cap;
    size_t total; /* bytes of all tensors */
};

zt_st_writer *zt_st_writer_new(void) { return calloc(1, sizeof(zt_st_writer)); }

void zt_st_writer_free(zt_st_writer *w)
{
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->v[i].name);
    free(w->v);
    free(w);
}

/* Checks and appends e (st_entry_init, then its data source set), computing its sizes. */
static zt_status st_add(zt_st_writer *w, st_entry e)
{
    const char *name = e.name;
    const int64_t *shape = e.shape;
    int ndim = e.ndim;
    ZT_ASSERT(e.out <= ZT_F64 && e.src_dtype <= ZT_F64);
    size_t len = strlen(name);
    if (!len || !strcmp(name, "__metadata__") || zt_st_utf8_check((const unsigned char *)name, len) < len)
        return zt_fail(ZT_EUSER, "safetensors: '%s' cannot be a tensor name", name);
    size_t numel = 1, nbytes, total;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return zt_fail(ZT_EUSER, "safetensors: tensor '%s': negative dimension", name);
        if (__builtin_mul_overflow(numel, (uint64_t)shape[i], &numel))
            return zt_fail(ZT_EUSER, "safetensors: tensor '%s': shape is too large", name);
    }
    if (__builtin_mul_overflow(numel, e.bytes ? zt_st_dtype_size(e.stored) : zt_dtype_size(e.out), &nbytes) ||
        __builtin_add_overflow(w->total, nbytes, &total))
        return zt_fail(ZT_EUSER, "safetensors: tensor '%s': shape is too large", name);
    ZT_ASSERT(e.src || e.fill || e.bytes || !numel);
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->v[i].name, name)) return zt_fail(ZT_EUSER, "safetensors: tensor '%s' added twice", name);
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        st_entry *v = realloc(w->v, (size_t)cap * sizeof *v);
        if (!v) return zt_fail(ZT_ENOMEM, "out of memory adding tensor '%s'", name);
        w->v = v, w->cap = cap;
    }
    e.numel = numel, e.nbytes = nbytes;
    if (!(e.name = strdup(name))) return zt_fail(ZT_ENOMEM, "out of memory adding tensor '%s'", name);
    w->v[w->n++] = e;
    w->total = total;
    return ZT_OK;
}

/* An entry with name and shape; the caller sets the data source. */
static zt_status st_entry_init(st_entry *e, const char *name, zt_dtype out_dtype, const int64_t *shape, int ndim)
{
    *e = (st_entry){.name = (char *)name, .out = out_dtype, .src_dtype = ZT_F32, .ndim = ndim};
    if (ndim < 0 || ndim > ZT_ST_MAX_DIMS)
        return zt_fail(ZT_EUSER, "safetensors: tensor '%s': %d dimensions (at most %d)", name, ndim, ZT_ST_MAX_DIMS);
    if (ndim) memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
    return ZT_OK;
}

zt_status zt_st_writer_add(zt_st_writer *w, const char *name, zt_dtype out_dtype, const int64_t *shape, int ndim,
                           const void *src, zt_dtype src_dtype)
{
    st_entry e;
    zt_status st = st_entry_init(&e, name, out_dtype, shape, ndim);
    e.src = src, e.src_dtype = src_dtype;
    return st ? st : st_add(w, e);
}

zt_status zt_st_writer_add_fn(zt_st_writer *w, const char *name, zt_dtype out_dtype, const int64_t *shape, int ndim,
                              zt_st_fill_fn fill, void *ctx)
{
    st_entry e;
    zt_status st = st_entry_init(&e, name, out_dtype, shape, ndim);
    e.fill = fill, e.ctx = ctx;
    return st ? st : st_add(w, e);
}

zt_status zt_st_writer_add_bytes_fn(zt_st_writer *w, const char *name, zt_st_dtype dtype, const int64_t *shape,
                                    int ndim, zt_st_bytes_fn fill, void *ctx)
{
    st_entry e;
    zt_status st = st_entry_init(&e, name, ZT_F32, shape, ndim);
    e.bytes = fill, e.stored = dtype, e.ctx = ctx;
    return st ? st : st_add(w, e);
}

int zt_st_writer_count(const zt_st_writer *w) { return w->n; }

const char *zt_st_writer_tensor(const zt_st_writer *w, int i, int64_t *shape, int *ndim)
{
    const st_entry *e = &w->v[i];
    memcpy(shape, e->shape, sizeof e->shape);
    *ndim = e->ndim;
    return e->name;
}

zt_status zt_st_writer_read(const zt_st_writer *w, int i, float *dst, size_t offset, size_t n)
{
    const st_entry *e = &w->v[i];
    ZT_ASSERT(offset + n <= e->numel);
    if (e->bytes)
        return zt_fail(ZT_EUSER, "tensor '%s' is %s, not floating-point", e->name, zt_st_dtype_name(e->stored));
    if (e->fill) return e->fill(e->ctx, dst, offset, n);
    zt_st_convert(dst, ZT_F32, (const char *)e->src + offset * zt_dtype_size(e->src_dtype), e->src_dtype, n);
    return ZT_OK;
}

/* --- one output file: dir/name, written atomically -------------------------------------- */

static zt_status st_out_open(zt_atomic_file *o, const char *dir, const char *name)
{
    char path[sizeof o->path];
    zt_status st = zt_path_join(path, sizeof path, dir, name);
    return st ? st : zt_atomic_open(o, path);
}

/* Commits o when st is ZT_OK, else removes its temporary file; returns the first failure. */
static zt_status st_out_close(zt_atomic_file *o, zt_status st)
{
    if (!st) return zt_atomic_commit(o);
    zt_atomic_abort(o);
    return st;
}

/* --- headers ------------------------------------------------------------------------------ */

/* cJSON prints large numbers as doubles ("1e+15"); offsets must be plain integers */
static cJSON *st_json_int(uint64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%" PRIu64, v);
    return cJSON_CreateRaw(s);
}

/* The JSON header of tensors [a, b), padded with spaces to a multiple of 8 bytes. */
static char *st_header(const zt_st_writer *w, int a, int b, size_t *len)
{
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "__metadata__");
    int ok = cJSON_AddStringToObject(meta, "format", "pt") != NULL;
    uint64_t off = 0;
    for (int i = a; i < b && ok; i++) {
        const st_entry *e = &w->v[i];
        cJSON *t = cJSON_AddObjectToObject(root, e->name);
        const char *dtype = e->bytes ? zt_st_dtype_name(e->stored) : zt_dtype_safetensors_name(e->out);
        ok = cJSON_AddStringToObject(t, "dtype", dtype) != NULL;
        cJSON *shape = cJSON_AddArrayToObject(t, "shape"), *offs = cJSON_AddArrayToObject(t, "data_offsets");
        ok = ok && shape && offs;
        for (int d = 0; d < e->ndim && ok; d++) ok = cJSON_AddItemToArray(shape, st_json_int((uint64_t)e->shape[d]));
        ok = ok && cJSON_AddItemToArray(offs, st_json_int(off)) &&
             cJSON_AddItemToArray(offs, st_json_int(off + e->nbytes));
        off += e->nbytes;
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) return NULL;
    size_t n = strlen(text), padded = (n + 7) & ~(size_t)7;
    char *p = realloc(text, padded + 1);
    if (!p) {
        free(text);
        return NULL;
    }
    memset(p + n, ' ', padded - n);
    p[padded] = 0;
    *len = padded;
    return p;
}

static char *st_index_json(const zt_st_writer *w, const int *first, int nshards, char (*names)[64])
{
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
    int ok = meta && map && cJSON_AddItemToObject(meta, "total_size", st_json_int(w->total));
    for (int s = 0; s < nshards && ok; s++)
        for (int i = first[s]; i < first[s + 1] && ok; i++)
            ok = cJSON_AddStringToObject(map, w->v[i].name, names[s]) != NULL;
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    return text;
}

/* --- files ---------------------------------------------------------------------------------- */

/* Writes entry e's data in chunks of ST_CHUNK elements through buf (ST_CHUNK doubles) and,
 * for data on demand, fbuf (ST_CHUNK floats). */
static zt_status st_write_data(zt_atomic_file *o, const st_entry *e, void *buf, float *fbuf)
{
    if (!e->fill && !e->bytes && e->out == e->src_dtype) return zt_atomic_write(o, e->src, e->nbytes);
    zt_status st = ZT_OK;
    for (size_t j = 0; e->bytes && j < e->nbytes && !st; j += ST_CHUNK * sizeof(double)) {
        size_t k = e->nbytes - j < ST_CHUNK * sizeof(double) ? e->nbytes - j : ST_CHUNK * sizeof(double);
        if (!(st = e->bytes(e->ctx, buf, j, k))) st = zt_atomic_write(o, buf, k);
    }
    if (e->bytes) return st;
    size_t ss = zt_dtype_size(e->src_dtype), os = zt_dtype_size(e->out);
    for (size_t j = 0; j < e->numel && !st; j += ST_CHUNK) {
        size_t k = e->numel - j < ST_CHUNK ? e->numel - j : ST_CHUNK;
        const void *src = fbuf, *out;
        if (!e->fill) src = (const char *)e->src + j * ss;
        else if ((st = e->fill(e->ctx, fbuf, j, k))) break;
        out = src; /* fp32 data on demand written as fp32 */
        if (e->out != e->src_dtype) zt_st_convert(buf, e->out, src, e->src_dtype, k), out = buf;
        st = zt_atomic_write(o, out, k * os);
    }
    return st;
}

static zt_status st_write_shard(const zt_st_writer *w, int a, int b, const char *dir, const char *name, void *buf,
                                float *fbuf)
{
    zt_atomic_file o;
    size_t hlen = 0;
    char *header = NULL;
    zt_status st = st_out_open(&o, dir, name);
    if (st) return st;
    if (!(header = st_header(w, a, b, &hlen))) st = zt_fail(ZT_ENOMEM, "out of memory writing '%s'", o.path);
    if (!st) {
        unsigned char len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
        if (!(st = zt_atomic_write(&o, len8, 8))) st = zt_atomic_write(&o, header, hlen);
    }
    for (int i = a; i < b && !st; i++) st = st_write_data(&o, &w->v[i], buf, fbuf);
    free(header);
    return st_out_close(&o, st);
}

static zt_status st_write_text(const char *dir, const char *name, const char *text)
{
    zt_atomic_file o;
    zt_status st = st_out_open(&o, dir, name);
    return st ? st : st_out_close(&o, zt_atomic_write(&o, text, strlen(text)));
}

static void st_shard_name(char *buf, size_t cap, unsigned long i, unsigned long n)
{
    snprintf(buf, cap, "model-%05lu-of-%05lu.safetensors", i, n);
}

/* model-<digits>-of-<digits>.safetensors; *i gets the first number */
static int st_is_shard_name(const char *s, unsigned long *i)
{
    char *end;
    if (strncmp(s, "model-", 6) || !isdigit((unsigned char)s[6])) return 0;
    *i = strtoul(s + 6, &end, 10);
    if (strncmp(end, "-of-", 4) || !isdigit((unsigned char)end[4])) return 0;
    strtoul(end + 4, &end, 10);
    return !strcmp(end, ".safetensors");
}

/* Removes the files of an earlier save that this one (nshards files) did not overwrite. */
static zt_status st_remove_stale(const char *dir, int nshards)
{
    DIR *d = opendir(dir);
    if (!d) return zt_fail(ZT_EIO, "cannot list '%s': %s", dir, strerror(errno));
    zt_status st = ZT_OK;
    struct dirent *de;
    while (!st && (de = readdir(d))) {
        const char *n = de->d_name;
        unsigned long i;
        char ours[64];
        int stale;
        if (!strcmp(n, ST_SINGLE_NAME)) stale = nshards > 1;
        else if (!strcmp(n, ST_INDEX_NAME)) stale = nshards == 1;
        else if (st_is_shard_name(n, &i)) {
            stale = nshards == 1 || i < 1 || i > (unsigned long)nshards;
            if (!stale) {
                st_shard_name(ours, sizeof ours, i, (unsigned long)nshards);
                stale = strcmp(n, ours) != 0;
            }
        } else {
            continue;
        }
        if (stale && unlinkat(dirfd(d), n, 0) && errno != ENOENT)
            st = zt_fail(ZT_EIO, "cannot remove the stale '%s/%s': %s", dir, n, strerror(errno));
    }
    closedir(d);
    return st;
}

zt_status zt_st_writer_finish(const zt_st_writer *w, const char *dir, size_t max_shard_bytes)
{
    /* shards: runs of tensors in insertion order; a tensor larger than the limit gets one alone */
    int *first = malloc((size_t)(w->n + 2) * sizeof *first), nshards = 0;
    char(*names)[64] = malloc((size_t)(w->n + 1) * sizeof *names);
    void *buf = zt_calloc_aligned(ST_CHUNK * sizeof(double));
    float *fbuf = zt_calloc_aligned(ST_CHUNK * sizeof(float));
    zt_status st = ZT_OK;
    if (!first || !names || !buf || !fbuf) {
        st = zt_fail(ZT_ENOMEM, "out of memory saving to '%s'", dir);
        goto out;
    }
    first[0] = 0;
    size_t used = 0;
    for (int i = 0; i < w->n; i++) {
        if (i > first[nshards] && max_shard_bytes && used + w->v[i].nbytes > max_shard_bytes) {
            first[++nshards] = i;
            used = 0;
        }
        used += w->v[i].nbytes;
    }
    first[++nshards] = w->n;

    for (int s = 0; s < nshards && !st; s++) {
        if (nshards == 1) snprintf(names[s], sizeof names[s], ST_SINGLE_NAME);
        else st_shard_name(names[s], sizeof names[s], (unsigned long)s + 1, (unsigned long)nshards);
        st = st_write_shard(w, first[s], first[s + 1], dir, names[s], buf, fbuf);
    }
    if (!st && nshards > 1) {
        char *index = st_index_json(w, first, nshards, names);
        st = index ? st_write_text(dir, ST_INDEX_NAME, index)
                   : zt_fail(ZT_ENOMEM, "out of memory writing '%s/%s'", dir, ST_INDEX_NAME);
        free(index);
    }
    if (!st) st = st_remove_stale(dir, nshards);
    if (!st) st = zt_fsync_dir(dir); /* the removals */
out:
    free(first);
    free(names);
    zt_free(buf);
    zt_free(fbuf);
    return st;
}

zt_status zt_st_writer_finish_file(const zt_st_writer *w, const char *dir, const char *name)
{
    void *buf = zt_calloc_aligned(ST_CHUNK * sizeof(double));
    float *fbuf = zt_calloc_aligned(ST_CHUNK * sizeof(float));
    zt_status st = buf && fbuf ? st_write_shard(w, 0, w->n, dir, name, buf, fbuf)
                               : zt_fail(ZT_ENOMEM, "out of memory saving to '%s'", dir);
    if (!st) st = zt_fsync_dir(dir);
    zt_free(buf);
    zt_free(fbuf);
    return st;
}
