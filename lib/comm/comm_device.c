/* Collectives on device buffers (comm_device.h). */
#include "comm_device.h"

#include <stdio.h>
#include <stdlib.h>

#include "lib/core/log.h"

struct zt_comm_device {
    zt_comm *c;
    zt_backend *be;
    void *coll;   /* the backend's communicator, or NULL: through host memory */
    void *bounce; /* through host memory: the data on its way, pinned */
    size_t bounce_bytes;
};

/* Whether every rank said yes (ok), a collective. */
static zt_status all_agree(zt_comm *c, int ok, int *all)
{
    double yes = ok ? 1 : 0;
    zt_status st = zt_comm_allreduce_sum_f64(c, &yes, 1, ZT_COMM_OTHER);
    *all = yes == zt_comm_size(c);
    return st;
}

/* The backend's communicator on every rank, or none on any: all ranks agree that they can load
 * the library (a rank that cannot would leave the others waiting in coll_open), rank 0 makes the
 * id, every rank opens, and all agree on whether every one did (else each closes what it opened). */
static zt_status open_native(zt_comm_device *d)
{
    zt_backend *be = d->be;
    unsigned char id[128] = {0};
    char why[200] = "another rank cannot use them";
    int all;
    zt_status mine = be->coll_load(be), st;
    if (mine) snprintf(why, sizeof why, "%s", zt_errmsg());
    if ((st = all_agree(d->c, !mine, &all))) return st;
    if (all && zt_comm_rank(d->c) == 0 && (mine = be->coll_id(be, id))) snprintf(why, sizeof why, "%s", zt_errmsg());
    if (all && (st = all_agree(d->c, !mine, &all))) return st;
    if (all && (st = zt_comm_bcast(d->c, id, sizeof id, 0, ZT_COMM_OTHER))) return st;
    if (all && (mine = be->coll_open(be, id, zt_comm_size(d->c), zt_comm_rank(d->c), &d->coll)))
        snprintf(why, sizeof why, "%s", zt_errmsg());
    if (all && (st = all_agree(d->c, !mine, &all))) return st;
    if (all) return ZT_OK;
    if (d->coll) be->coll_close(be, d->coll);
    d->coll = NULL;
    zt_log(ZT_LOG_INFO, "device collectives through host memory: %s", why);
    return ZT_OK;
}

zt_status zt_comm_device_open(zt_comm *c, zt_backend *be, int native, zt_comm_device **out)
{
    zt_comm_device *d = calloc(1, sizeof *d);
    *out = NULL;
    if (!d) return zt_fail(ZT_ENOMEM, "out of memory");
    d->c = c, d->be = be;
    zt_status st = native && be->coll_open ? open_native(d) : ZT_OK;
    if (st) {
        zt_comm_device_close(d);
        return st;
    }
    *out = d;
    return ZT_OK;
}

void zt_comm_device_close(zt_comm_device *d)
{
    if (!d) return;
    if (d->coll) d->be->coll_close(d->be, d->coll);
    if (d->bounce) d->be->host_free(d->be, d->bounce);
    free(d);
}

const char *zt_comm_device_kind(const zt_comm_device *d) { return d->coll ? "nccl" : "host memory"; }

/* The bounce buffer, grown to at least bytes; NULL, the error set, when out of memory. */
static void *bounce(zt_comm_device *d, size_t bytes)
{
    if (bytes <= d->bounce_bytes) return d->bounce;
    if (d->bounce) d->be->host_free(d->be, d->bounce);
    d->bounce = d->be->host_alloc(d->be, bytes);
    d->bounce_bytes = d->bounce ? bytes : 0;
    if (!d->bounce) zt_fail(ZT_ENOMEM, "out of host memory for a %zu-byte collective through host memory", bytes);
    return d->bounce;
}

/* The backend's collective's fence: the caller's to use, or used here (later work waits). */
static void hand_over(zt_backend *be, uint64_t f, uint64_t *fence)
{
    if (fence) *fence = f;
    else be->fence_use(be, f);
}

zt_status zt_comm_device_allgather(zt_comm_device *d, const void *send, void *recv, size_t bytes_per_rank,
                                   size_t recv_bytes, zt_comm_purpose p, uint64_t *fence)
{
    zt_backend *be = d->be;
    int size = zt_comm_size(d->c), rank = zt_comm_rank(d->c);
    size_t all = (size_t)size * bytes_per_rank, at = (size_t)rank * bytes_per_rank;
    size_t mine = recv_bytes > at ? (recv_bytes - at < bytes_per_rank ? recv_bytes - at : bytes_per_rank) : 0;
    if (fence) *fence = 0;
    if (d->coll) {
        uint64_t f = 0;
        zt_status st = be->coll_allgather(be, d->coll, send, recv, bytes_per_rank, recv_bytes, &f);
        hand_over(be, f, fence);
        if (!st) zt_comm_count_allgather(d->c, bytes_per_rank, p);
        return st;
    }
    char *h = bounce(d, all);
    if (!h) return ZT_ENOMEM;
    be->download(be, h + at, send, mine);
    zt_status st = zt_comm_allgather(d->c, h + at, h, bytes_per_rank, p);
    if (!st) be->upload(be, recv, h, recv_bytes);
    return st;
}

zt_status zt_comm_device_reduce_scatter_sum(zt_comm_device *d, const float *send, float *recv, size_t n_per_rank,
                                            size_t n, size_t room, zt_comm_purpose p, uint64_t *fence)
{
    zt_backend *be = d->be;
    int rank = zt_comm_rank(d->c);
    if (fence) *fence = 0;
    if (d->coll) {
        uint64_t f = 0;
        zt_status st = be->coll_reduce_scatter(be, d->coll, send, recv, n_per_rank, n, room, &f);
        hand_over(be, f, fence);
        if (!st) zt_comm_count_reduce_scatter(d->c, n_per_rank, n, p);
        return st;
    }
    float *h = bounce(d, n * sizeof(float));
    if (!h) return ZT_ENOMEM;
    be->download(be, h, send, n * sizeof(float));
    float *mine = h + (size_t)rank * n_per_rank;
    size_t cut = zt_comm_cut(n, n_per_rank, (size_t)rank);
    zt_status st = zt_comm_reduce_scatter_sum(d->c, h, mine, n_per_rank, n, p);
    if (!st && cut) be->upload(be, recv, mine, cut * sizeof(float));
    return st;
}

zt_status zt_comm_device_allreduce_sum(zt_comm_device *d, float *buf, size_t n, zt_comm_purpose p, uint64_t *fence)
{
    zt_backend *be = d->be;
    if (fence) *fence = 0;
    if (d->coll) {
        uint64_t f = 0;
        zt_status st = be->coll_allreduce(be, d->coll, buf, n, &f);
        hand_over(be, f, fence);
        if (!st) zt_comm_count_allreduce_f32(d->c, n, p);
        return st;
    }
    float *h = bounce(d, n * sizeof(float));
    if (!h) return ZT_ENOMEM;
    be->download(be, h, buf, n * sizeof(float));
    zt_status st = zt_comm_allreduce_sum(d->c, h, n, p);
    if (!st) be->upload(be, buf, h, n * sizeof(float));
    return st;
}
