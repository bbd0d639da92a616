/* The moments' swap file of swap.h: m at 0, v at v_at, each rounded to whole blocks. */
#include "swap.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/crc32c.h"

static size_t chunk_len(const zt_swap *s, size_t k)
{
    size_t first = k * s->chunk;
    return s->numel - first < s->chunk ? s->numel - first : s->chunk;
}

/* Transfers chunk k of m and v to or from buffer b (m in its first half, v in its second);
 * a write records the chunk's checksums. */
static zt_status transfer(zt_swap *s, size_t k, float *b, int write, zt_aio_req r[2])
{
    size_t n = chunk_len(s, k) * sizeof(float);
    if (write) s->crc[2 * k] = zt_crc32c(0, b, n), s->crc[2 * k + 1] = zt_crc32c(0, b + s->chunk, n);
    uint64_t at = (uint64_t)k * s->chunk * sizeof(float);
    zt_status st = write ? zt_aio_write(s->aio, &s->file, b, n, at, &r[0]) : zt_aio_read(s->aio, &s->file, b, n, at, &r[0]);
    if (st) return st;
    float *bv = b + s->chunk;
    return write ? zt_aio_write(s->aio, &s->file, bv, n, s->v_at + at, &r[1])
                 : zt_aio_read(s->aio, &s->file, bv, n, s->v_at + at, &r[1]);
}

/* Chunk k of array a (0: m, 1: v) as read into p is what was written there. */
static zt_status verify(const zt_swap *s, size_t k, int a, const float *p)
{
    if (zt_crc32c(0, p, chunk_len(s, k) * sizeof(float)) == s->crc[2 * k + a]) return ZT_OK;
    return zt_fail(ZT_EIO, "the optimizer's swap file '%s' changed underneath: chunk %zu of %s fails its checksum "
                           "(truncated, overwritten or corrupt)", s->file.path[0], k, a ? "v" : "m");
}

static zt_status finish(zt_swap *s, zt_aio_req r[2], int *pending)
{
    if (!*pending) return ZT_OK;
    *pending = 0;
    zt_status a = zt_aio_wait(s->aio, &r[0]), b = zt_aio_wait(s->aio, &r[1]);
    return a ? a : b;
}

zt_status zt_swap_open(zt_swap *s, zt_aio *aio, const char *const *paths, int npaths, const char *name, size_t numel,
                       size_t chunk_bytes)
{
    memset(s, 0, sizeof *s);
    s->aio = aio, s->numel = numel;
    s->chunk = zt_aio_round(chunk_bytes ? chunk_bytes : 1) / sizeof(float);
    s->v_at = zt_aio_round(numel * sizeof(float));
    if (!(s->crc = calloc(2 * ((numel + s->chunk - 1) / s->chunk) + 1, sizeof *s->crc)))
        return zt_fail(ZT_ENOMEM, "out of memory");
    for (int i = 0; i < 3; i++)
        if (!(s->buf[i] = zt_aio_alloc(2 * s->chunk * sizeof(float)))) {
            zt_swap_close(s);
            return zt_fail(ZT_ENOMEM, "out of memory for the optimizer's swap buffers");
        }
    zt_status st = zt_aio_file_open(aio, &s->file, paths, npaths, name);
    if (!st) st = zt_aio_file_reserve(aio, &s->file, s->v_at * 2);
    if (st) {
        zt_swap_close(s);
        return st;
    }
    /* zeros, as fresh moments: the buffers are zeroed */
    zt_aio_req r[3][2];
    int pending[3] = {0};
    size_t chunks = (numel + s->chunk - 1) / s->chunk;
    for (size_t k = 0; k < chunks && !st; k++) {
        int b = (int)(k % 3);
        if ((st = finish(s, r[b], &pending[b]))) break;
        st = transfer(s, k, s->buf[b], 1, r[b]);
        pending[b] = !st;
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
    memset(s, 0, sizeof *s);
}

zt_status zt_swap_update(zt_swap *s, zt_swap_fn fn, void *ctx)
{
    zt_aio_req rd[3][2], wr[3][2];
    int reading[3] = {0}, writing[3] = {0};
    size_t chunks = (s->numel + s->chunk - 1) / s->chunk;
    zt_status st = chunks ? transfer(s, 0, s->buf[0], 0, rd[0]) : ZT_OK;
    reading[0] = chunks && !st;
    for (size_t k = 0; k < chunks && !st; k++) {
        int b = (int)(k % 3), nb = (int)((k + 1) % 3);
        if (k + 1 < chunks) { /* chunk k+1's buffer last held chunk k-2: its write must be done */
            if ((st = finish(s, wr[nb], &writing[nb])) || (st = transfer(s, k + 1, s->buf[nb], 0, rd[nb]))) break;
            reading[nb] = 1;
        }
        if ((st = finish(s, rd[b], &reading[b])) || (st = verify(s, k, 0, s->buf[b])) ||
            (st = verify(s, k, 1, s->buf[b] + s->chunk)) ||
            (st = fn(ctx, k * s->chunk, chunk_len(s, k), s->buf[b], s->buf[b] + s->chunk)) ||
            (st = transfer(s, k, s->buf[b], 1, wr[b])))
            break;
        writing[b] = 1;
    }
    for (int b = 0; b < 3; b++) { /* drain, also after a failure: no buffer may stay in the kernel's hands */
        zt_status e1 = finish(s, rd[b], &reading[b]), e2 = finish(s, wr[b], &writing[b]);
        if (!st) st = e1 ? e1 : e2;
    }
    return st;
}

/* Copies between the file's array (which: 1 m, 2 v) and mem, window by window: a window is
 * one chunk, read whole, patched and written back for put. */
static zt_status copy(zt_swap *s, int which, size_t first, size_t n, float *get, const float *put)
{
    ZT_ASSERT((which == 1 || which == 2) && first <= s->numel && n <= s->numel - first);
    uint64_t base = which == 1 ? 0 : s->v_at;
    float *w = s->buf[0];
    zt_status st = ZT_OK;
    for (size_t k = first / s->chunk; !st && k * s->chunk < first + n; k++) {
        size_t w0 = k * s->chunk, len = chunk_len(s, k), a = first > w0 ? first : w0;
        size_t b = first + n < w0 + len ? first + n : w0 + len;
        uint64_t at = base + (uint64_t)w0 * sizeof(float);
        zt_aio_req r;
        if ((st = zt_aio_read(s->aio, &s->file, w, len * sizeof(float), at, &r)) || (st = zt_aio_wait(s->aio, &r)) ||
            (st = verify(s, k, which - 1, w)))
            break;
        if (get) {
            memcpy(get + (a - first), w + (a - w0), (b - a) * sizeof(float));
            continue;
        }
        memcpy(w + (a - w0), put + (a - first), (b - a) * sizeof(float));
        s->crc[2 * k + which - 1] = zt_crc32c(0, w, len * sizeof(float));
        if (!(st = zt_aio_write(s->aio, &s->file, w, len * sizeof(float), at, &r))) st = zt_aio_wait(s->aio, &r);
    }
    return st;
}

zt_status zt_swap_get(zt_swap *s, int which, size_t first, size_t n, float *dst)
{
    return copy(s, which, first, n, dst, NULL);
}

zt_status zt_swap_put(zt_swap *s, int which, size_t first, size_t n, const float *src)
{
    return copy(s, which, first, n, NULL, src);
}
