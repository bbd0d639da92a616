/* aio over io_uring: blocks of every queued transfer kept in flight up to the queue depth. */
#include "lib/core/log.h"
#include "aio_internal.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>

/* One block in flight: which transfer, where (logical), how long, how much is done. */
typedef struct slot {
    zt_aio_req *r;
    uint64_t off, len, done;
} slot;

struct zt_aio {
    struct io_uring ring;
    size_t block;
    int depth, inflight;
    slot *slots;
    int *free_slots, nfree;
    zt_aio_req *head, *tail; /* transfers with blocks not yet submitted, in order */
    zt_aio_stats stats;
};

zt_status zt_aio_open(zt_aio **out, size_t block_size, int queue_depth)
{
    *out = NULL;
    if (block_size < ZT_AIO_ALIGN || block_size % ZT_AIO_ALIGN)
        return zt_fail(ZT_EUSER, "offload.aio.block_size = %zu is not a positive multiple of %d", block_size,
                       ZT_AIO_ALIGN);
    zt_aio *a = calloc(1, sizeof *a);
    if (!a) return zt_fail(ZT_ENOMEM, "out of memory");
    a->block = block_size, a->depth = queue_depth;
    a->slots = calloc((size_t)queue_depth, sizeof *a->slots);
    a->free_slots = calloc((size_t)queue_depth, sizeof *a->free_slots);
    int rc = a->slots && a->free_slots ? io_uring_queue_init((unsigned)queue_depth, &a->ring, 0) : -ENOMEM;
    if (rc < 0) {
        free(a->slots), free(a->free_slots), free(a);
        return zt_fail(ZT_ERUNTIME, "io_uring setup with %d entries failed: %s", queue_depth, strerror(-rc));
    }
    for (int i = 0; i < queue_depth; i++) a->free_slots[a->nfree++] = queue_depth - 1 - i;
    *out = a;
    return ZT_OK;
}

void zt_aio_close(zt_aio *a)
{
    if (!a) return;
    io_uring_queue_exit(&a->ring);
    free(a->slots);
    free(a->free_slots);
    free(a);
}

static void enqueue(zt_aio *a, zt_aio_req *r)
{
    r->queued = NULL;
    if (a->tail) a->tail->queued = r;
    else a->head = r;
    a->tail = r;
}

static void dequeue_head(zt_aio *a)
{
    a->head = a->head->queued;
    if (!a->head) a->tail = NULL;
}

/* Puts slot s's remaining bytes on the ring. */
static void prep(zt_aio *a, int s)
{
    slot *b = &a->slots[s];
    uint64_t at, room;
    int k = zt_aio_place(b->r->f, a->block, b->off + b->done, &at, &room);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&a->ring);
    char *p = b->r->buf + (b->off - b->r->off) + b->done;
    unsigned len = (unsigned)(b->len - b->done);
    if (b->r->write) io_uring_prep_write(sqe, b->r->f->fd[k], p, len, at);
    else io_uring_prep_read(sqe, b->r->f->fd[k], p, len, at);
    io_uring_sqe_set_data64(sqe, (uint64_t)s);
}

/* Submits blocks of the queued transfers while the ring has room. */
static void pump(zt_aio *a)
{
    int added = 0;
    while (a->head && a->nfree) {
        zt_aio_req *r = a->head;
        if (r->st || r->next == r->bytes) { /* failed or fully submitted */
            dequeue_head(a);
            continue;
        }
        uint64_t at, room;
        zt_aio_place(r->f, a->block, r->off + r->next, &at, &room);
        uint64_t len = r->bytes - r->next < room ? r->bytes - r->next : room;
        int s = a->free_slots[--a->nfree];
        a->slots[s] = (slot){r, r->off + r->next, len, 0};
        prep(a, s);
        r->next += len, r->inflight++, a->inflight++, added++;
    }
    if (added) io_uring_submit(&a->ring);
}

/* Handles one completion (waiting for it). */
static void complete_one(zt_aio *a)
{
    struct io_uring_cqe *cqe;
    int rc = io_uring_wait_cqe(&a->ring, &cqe);
    if (rc == -EINTR) return;
    ZT_ASSERT(rc == 0);
    int s = (int)io_uring_cqe_get_data64(cqe), res = cqe->res;
    io_uring_cqe_seen(&a->ring, cqe);
    slot *b = &a->slots[s];
    zt_aio_req *r = b->r;
    if (res > 0) {
        b->done += (uint64_t)res;
        r->done += (uint64_t)res;
        *(r->write ? &a->stats.write_bytes : &a->stats.read_bytes) += (uint64_t)res;
        if (b->done < b->len && !r->st) { /* short: the rest of the block again */
            prep(a, s);
            io_uring_submit(&a->ring);
            return;
        }
    } else if (!r->st) {
        r->st = zt_aio_fail(r, a->block, b->off + b->done, res < 0 ? -res : 0);
    }
    r->inflight--, a->inflight--;
    a->free_slots[a->nfree++] = s;
}

zt_status zt_aio_wait(zt_aio *a, zt_aio_req *r)
{
    double t0 = zt_now_s();
    for (;;) {
        pump(a);
        if (r->inflight == 0 && (r->st || r->next == r->bytes)) break;
        complete_one(a);
    }
    a->stats.wait_s += zt_now_s() - t0;
    return r->st;
}

static zt_status queue(zt_aio *a, zt_aio_file *f, void *buf, size_t bytes, uint64_t off, int write, zt_aio_req *r)
{
    zt_status st = zt_aio_prepare(f, buf, bytes, off, write, r);
    if (st) return st;
    enqueue(a, r);
    pump(a);
    return ZT_OK;
}

zt_status zt_aio_read(zt_aio *a, zt_aio_file *f, void *buf, size_t bytes, uint64_t off, zt_aio_req *r)
{
    return queue(a, f, buf, bytes, off, 0, r);
}

zt_status zt_aio_write(zt_aio *a, zt_aio_file *f, const void *buf, size_t bytes, uint64_t off, zt_aio_req *r)
{
    return queue(a, f, (void *)buf, bytes, off, 1, r);
}

size_t zt_aio_block_size(const zt_aio *a) { return a->block; }

zt_aio_stats *zt_aio_stats_of(zt_aio *a) { return &a->stats; }
