/* aio without liburing: every transfer runs at once with pread/pwrite. */
#include "lib/core/log.h"
#include "aio_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

struct zt_aio {
    size_t block;
    zt_aio_stats stats;
};

zt_status zt_aio_open(zt_aio **out, size_t block_size, int queue_depth)
{
    (void)queue_depth;
    *out = NULL;
    if (block_size < ZT_AIO_ALIGN || block_size % ZT_AIO_ALIGN)
        return zt_fail(ZT_EUSER, "offload.aio.block_size = %zu is not a positive multiple of %d", block_size, ZT_AIO_ALIGN);
    zt_aio *a = calloc(1, sizeof *a);
    if (!a) return zt_fail(ZT_ENOMEM, "out of memory");
    a->block = block_size;
    *out = a;
    return ZT_OK;
}

void zt_aio_close(zt_aio *a) { free(a); }

static zt_status run(zt_aio *a, zt_aio_req *r)
{
    while (r->done < r->bytes) {
        uint64_t at, room, off = r->off + r->done;
        int k = zt_aio_place(r->f, a->block, off, &at, &room);
        size_t len = r->bytes - r->done < room ? r->bytes - r->done : room;
        char *p = r->buf + r->done;
        ssize_t n = r->write ? pwrite(r->f->fd[k], p, len, (off_t)at) : pread(r->f->fd[k], p, len, (off_t)at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return r->st = zt_aio_fail(r, a->block, off, n < 0 ? errno : 0);
        r->done += (uint64_t)n;
        *(r->write ? &a->stats.write_bytes : &a->stats.read_bytes) += (uint64_t)n;
    }
    r->next = r->bytes;
    return ZT_OK;
}

/* the transfer, done here and now: all of it is time the caller waits */
static void timed_run(zt_aio *a, zt_aio_req *r)
{
    double t0 = zt_now_s();
    run(a, r);
    a->stats.wait_s += zt_now_s() - t0;
}

zt_status zt_aio_read(zt_aio *a, zt_aio_file *f, void *buf, size_t bytes, uint64_t off, zt_aio_req *r)
{
    zt_status st = zt_aio_prepare(f, buf, bytes, off, 0, r);
    if (!st) timed_run(a, r); /* its status comes with the wait */
    return st;
}

zt_status zt_aio_write(zt_aio *a, zt_aio_file *f, const void *buf, size_t bytes, uint64_t off, zt_aio_req *r)
{
    zt_status st = zt_aio_prepare(f, (void *)buf, bytes, off, 1, r);
    if (!st) timed_run(a, r);
    return st;
}

zt_status zt_aio_wait(zt_aio *a, zt_aio_req *r)
{
    (void)a;
    return r->st;
}

size_t zt_aio_block_size(const zt_aio *a) { return a->block; }

zt_aio_stats *zt_aio_stats_of(zt_aio *a) { return &a->stats; }
