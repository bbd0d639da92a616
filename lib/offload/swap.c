/* The swap file of swap.h: array a's chunk k at a × region + slot[k]; a chunk's bytes are
 * rounded up to whole blocks, so only a chunk that ends at a cut leaves a gap. */
#include "swap.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/crc32c.h"

static const char *const array_names[] = {"m", "v", "weights", "gradient"};

static size_t chunk_len(const zt_swap *s, size_t k) { return s->first[k + 1] - s->first[k]; }

static int holds(const zt_swap *s, int a) { return (s->arrays >> a) & 1; }

/* Where array a (ZT_SWAP_*) comes among the arrays the file holds: its region, its part of a buffer. */
static int place(const zt_swap *s, int a) { return __builtin_popcount(s->arrays & ((1u << a) - 1)); }

static uint64_t at(const zt_swap *s, int a, size_t k) { return (uint64_t)place(s, a) * s->region + s->slot[k]; }

static size_t chunk_id(const zt_swap *s, size_t k, int a) { return k * s->narrays + place(s, a); }

static void record(zt_swap *s, size_t k, int a, const float *p)
{
    s->crc[chunk_id(s, k, a)] = zt_crc32c(0, p, chunk_len(s, k) * sizeof(float));
    s->written[chunk_id(s, k, a)] = 1;
}

/* Chunk k of array a as read into p is what was last written there. */
static zt_status verify(const zt_swap *s, size_t k, int a, const float *p)
{
    size_t i = chunk_id(s, k, a);
    if (s->written[i] && zt_crc32c(0, p, chunk_len(s, k) * sizeof(float)) == s->crc[i]) return ZT_OK;
    return zt_fail(ZT_EIO,
                   "the offload swap file '%s' changed underneath: chunk %zu of %s fails its checksum "
                   "(truncated, overwritten or corrupt)",
                   s->file.path[0], k, array_names[a]);
}

/* The chunk holding element e. */
static size_t chunk_of(const zt_swap *s, size_t e)
{
    size_t lo = 0, hi = s->nchunks;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (s->first[mid] <= e) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Transfers chunk k of the arrays selected by mask to or from buffer b; a write records checksums. */
static zt_status transfer(zt_swap *s, size_t k, float *b, int write, unsigned mask, zt_aio_req r[])
{
    size_t n = chunk_len(s, k) * sizeof(float);
    for (int a = 0; a < ZT_SWAP_MAX_ARRAYS; a++) {
        if (!(mask & s->arrays & 1u << a)) continue;
        float *p = b + (size_t)place(s, a) * s->chunk;
        if (write) record(s, k, a, p);
        zt_status st = write ? zt_aio_write(s->aio, &s->file, p, n, at(s, a, k), &r[a])
                             : zt_aio_read(s->aio, &s->file, p, n, at(s, a, k), &r[a]);
        if (st) return st;
    }
    return ZT_OK;
}

/* Waits for the transfers of mask in r[], if pending. */
static zt_status finish(zt_swap *s, zt_aio_req r[], unsigned *pending)
{
    zt_status st = ZT_OK;
    for (int a = 0; a < ZT_SWAP_MAX_ARRAYS; a++)
        if (*pending & 1u << a) {
            zt_status e = zt_aio_wait(s->aio, &r[a]);
            if (!st) st = e;
        }
    *pending = 0;
    return st;
}

/* Chunks: every cut starts one, none is longer than s->chunk. */
static zt_status plan_chunks(zt_swap *s, const size_t *cuts, int ncuts)
{
    size_t max = (s->numel + s->chunk - 1) / s->chunk + (size_t)ncuts + 1;
    s->first = malloc((max + 1) * sizeof *s->first);
    s->slot = malloc((max + 1) * sizeof *s->slot);
    if (!s->first || !s->slot) return zt_fail(ZT_ENOMEM, "out of memory");
    size_t k = 0, e = 0;
    uint64_t slot = 0;
    int c = 0;
    while (e < s->numel) {
        while (c < ncuts && cuts[c] <= e) c++;
        size_t end = e + s->chunk < s->numel ? e + s->chunk : s->numel;
        if (c < ncuts && cuts[c] < end) end = cuts[c];
        s->first[k] = e, s->slot[k] = slot, k++;
        slot += zt_aio_round((end - e) * sizeof(float));
        e = end;
    }
    s->first[k] = s->numel, s->slot[k] = slot;
    s->nchunks = k, s->region = slot;
    return ZT_OK;
}

/* Elements per chunk: chunk_bytes, no more than the arrays hold, in whole blocks. */
static size_t chunk_elements(size_t numel, size_t chunk_bytes)
{
    if (chunk_bytes > numel * sizeof(float)) chunk_bytes = numel * sizeof(float); /* one chunk holds it all */
    return zt_aio_round(chunk_bytes ? chunk_bytes : 1) / sizeof(float);
}

/* Each of the three buffers: a chunk of every array. */
static size_t buffer_bytes(size_t chunk, int narrays) { return (size_t)narrays * chunk * sizeof(float); }

size_t zt_swap_buffer_bytes(size_t numel, size_t chunk_bytes, unsigned arrays)
{
    return 3 * buffer_bytes(/* zt_swap.buf */ chunk_elements(numel, chunk_bytes), __builtin_popcount(arrays));
}

zt_status zt_swap_open(zt_swap *s, zt_aio *aio, const char *const *paths, int npaths, const char *name, size_t numel,
                       size_t chunk_bytes, unsigned arrays, const size_t *cuts, int ncuts)
{
    memset(s, 0, sizeof *s);
    ZT_ASSERT(arrays && arrays < 1u << ZT_SWAP_MAX_ARRAYS);
    int narrays = __builtin_popcount(arrays);
    s->aio = aio, s->numel = numel, s->arrays = arrays, s->narrays = narrays;
    s->chunk = chunk_elements(numel, chunk_bytes);
    zt_status st = plan_chunks(s, cuts, ncuts);
    if (st) return st;
    if (!(s->crc = calloc(s->nchunks * narrays + 1, sizeof *s->crc)) ||
        !(s->written = calloc(s->nchunks * narrays + 1, 1))) {
        zt_swap_close(s);
        return zt_fail(ZT_ENOMEM, "out of memory");
    }
    for (int i = 0; i < 3; i++)
        if (!(s->buf[i] = zt_aio_alloc(buffer_bytes(s->chunk, narrays)))) {
            zt_swap_close(s);
            return zt_fail(ZT_ENOMEM, "out of memory for the offload swap buffers");
        }
    st = zt_aio_file_open(aio, &s->file, paths, npaths, name);
    if (!st) st = zt_aio_file_reserve(aio, &s->file, s->region * (uint64_t)narrays);
    if (st) {
        zt_swap_close(s);
        return st;
    }
    /* zeros, as fresh moments: the buffers are zeroed */
    zt_aio_req r[3][ZT_SWAP_MAX_ARRAYS];
    unsigned pending[3] = {0}, moments = arrays & ZT_SWAP_MOMENTS;
    for (size_t k = 0; k < s->nchunks && !st; k++) {
        int b = (int)(k % 3);
        if ((st = finish(s, r[b], &pending[b]))) break;
        st = transfer(s, k, s->buf[b], 1, moments, r[b]);
        pending[b] = st ? 0 : moments;
    }
    for (int b = 0; b < 3; b++) {
        zt_status e = finish(s, r[b], &pending[b]);
        if (!st) st = e;
    }
    if (st) zt_swap_close(s);
    return st;
}

void zt_swap_close(zt_swap *s)
{
    if (s->file.nfd) zt_aio_file_close(&s->file, 1);
    for (int i = 0; i < 3; i++) zt_aio_free(s->buf[i]);
    free(s->crc);
    free(s->written);
    free(s->first);
    free(s->slot);
    memset(s, 0, sizeof *s);
}

zt_status zt_swap_update(zt_swap *s, zt_swap_fn fn, void *ctx)
{
    s->cached = 0;
    zt_aio_req rd[3][ZT_SWAP_MAX_ARRAYS], wr[3][ZT_SWAP_MAX_ARRAYS];
    unsigned reading[3] = {0}, writing[3] = {0};
    unsigned all = s->arrays, back = all & ~(1u << ZT_SWAP_GRAD); /* the gradient is only read */
    size_t chunks = s->nchunks;
    zt_status st = chunks ? transfer(s, 0, s->buf[0], 0, all, rd[0]) : ZT_OK;
    reading[0] = chunks && !st ? all : 0;
    for (size_t k = 0; k < chunks && !st; k++) {
        int b = (int)(k % 3), nb = (int)((k + 1) % 3);
        if (k + 1 < chunks) { /* chunk k+1's buffer last held chunk k-2: its write must be done */
            if ((st = finish(s, wr[nb], &writing[nb])) || (st = transfer(s, k + 1, s->buf[nb], 0, all, rd[nb]))) break;
            reading[nb] = all;
        }
        if ((st = finish(s, rd[b], &reading[b]))) break;
        float *arrays[ZT_SWAP_MAX_ARRAYS] = {NULL};
        for (int a = 0; a < ZT_SWAP_MAX_ARRAYS && !st; a++) {
            if (!holds(s, a)) continue;
            arrays[a] = s->buf[b] + (size_t)place(s, a) * s->chunk;
            st = verify(s, k, a, arrays[a]);
        }
        if (st || (st = fn(ctx, s->first[k], chunk_len(s, k), arrays)) ||
            (st = transfer(s, k, s->buf[b], 1, back, wr[b])))
            break;
        writing[b] = back;
    }
    for (int b = 0; b < 3; b++) { /* drain, also after a failure: no buffer may stay in the kernel's hands */
        zt_status e1 = finish(s, rd[b], &reading[b]), e2 = finish(s, wr[b], &writing[b]);
        if (!st) st = e1 ? e1 : e2;
    }
    return st;
}

/* Copies between the file's array a and mem, a chunk at a time: read whole, patched and
 * written back for a put. */
static zt_status copy(zt_swap *s, int a, size_t first, size_t n, float *get, const float *put)
{
    ZT_ASSERT(holds(s, a) && first <= s->numel && n <= s->numel - first);
    float *w = s->buf[0];
    zt_status st = ZT_OK;
    for (size_t k = n ? chunk_of(s, first) : s->nchunks; !st && k < s->nchunks && s->first[k] < first + n; k++) {
        size_t w0 = s->first[k], len = chunk_len(s, k), lo = first > w0 ? first : w0;
        size_t hi = first + n < w0 + len ? first + n : w0 + len;
        zt_aio_req r;
        size_t id = chunk_id(s, k, a) + 1;
        int skip = s->cached == id || (put && lo == w0 && hi == w0 + len); /* in the buffer, or all replaced */
        s->cached = 0;
        if (!skip && ((st = zt_aio_read(s->aio, &s->file, w, len * sizeof(float), at(s, a, k), &r)) ||
                      (st = zt_aio_wait(s->aio, &r)) || (st = verify(s, k, a, w))))
            break;
        s->cached = id; /* a caller reading a tensor in small pieces reads each chunk once */
        if (get) {
            memcpy(get + (lo - first), w + (lo - w0), (hi - lo) * sizeof(float));
            continue;
        }
        memcpy(w + (lo - w0), put + (lo - first), (hi - lo) * sizeof(float));
        record(s, k, a, w);
        if (!(st = zt_aio_write(s->aio, &s->file, w, len * sizeof(float), at(s, a, k), &r)))
            st = zt_aio_wait(s->aio, &r);
    }
    return st;
}

zt_status zt_swap_get(zt_swap *s, int a, size_t first, size_t n, float *dst) { return copy(s, a, first, n, dst, NULL); }

zt_status zt_swap_put(zt_swap *s, int a, size_t first, size_t n, const float *src)
{
    return copy(s, a, first, n, NULL, src);
}

/* The chunks [k0, k1) that make up [first, first + n), which must start and end at chunk edges. */
static void range_chunks(const zt_swap *s, size_t first, size_t n, size_t *k0, size_t *k1)
{
    *k0 = chunk_of(s, first);
    *k1 = n ? chunk_of(s, first + n - 1) + 1 : *k0;
    ZT_ASSERT(s->first[*k0] == first && s->first[*k1] == first + n);
    ZT_ASSERT(s->slot[*k1] - s->slot[*k0] == zt_aio_round(n * sizeof(float))); /* back to back: one transfer */
}

zt_status zt_swap_range_read(zt_swap *s, int a, size_t first, size_t n, float *buf, zt_aio_req *r)
{
    size_t k0, k1;
    range_chunks(s, first, n, &k0, &k1);
    return zt_aio_read(s->aio, &s->file, buf, s->slot[k1] - s->slot[k0], at(s, a, k0), r);
}

zt_status zt_swap_range_write(zt_swap *s, int a, size_t first, size_t n, const float *buf, zt_aio_req *r)
{
    size_t k0, k1;
    range_chunks(s, first, n, &k0, &k1);
    s->cached = 0;
    for (size_t k = k0; k < k1; k++) record(s, k, a, buf + (s->first[k] - first));
    return zt_aio_write(s->aio, &s->file, buf, s->slot[k1] - s->slot[k0], at(s, a, k0), r);
}

zt_status zt_swap_check_range(const zt_swap *s, int a, size_t first, size_t n, const float *buf)
{
    size_t k0, k1;
    range_chunks(s, first, n, &k0, &k1);
    zt_status st = ZT_OK;
    for (size_t k = k0; k < k1 && !st; k++) st = verify(s, k, a, buf + (s->first[k] - first));
    return st;
}
