/* comm without MPI: a world of one rank. The collectives copy; init never fails. */
#include "comm_internal.h"

#include <string.h>

struct zt_comm {
    zt_comm_base base; /* first: comm_common.c reads it */
};

static zt_comm world_of_one;

zt_status zt_comm_init(zt_comm **out, int *argc, char ***argv, double timeout_s)
{
    world_of_one = (zt_comm){.base = {.rank = 0, .size = 1, .ranks_per_node = 1, .chunk = ZT_COMM_CHUNK_DEFAULT}};
    world_of_one.base.bytes = world_of_one.base.counts;
    *out = &world_of_one;
    return ZT_OK;
}

zt_status zt_comm_split(zt_comm *c, int k, int across, zt_comm **group)
{
    *group = NULL;
    if (k != 1) return zt_fail(ZT_EUSER, "1 rank does not split into groups of %d", k);
    *group = c; /* the world of one is its own only group */
    return ZT_OK;
}

void zt_comm_finalize(zt_comm *c) {}

zt_status zt_comm_allreduce_sum(zt_comm *c, float *buf, size_t n, zt_comm_purpose p) { return ZT_OK; }

zt_status zt_comm_allreduce_sum_f64(zt_comm *c, double *buf, size_t n, zt_comm_purpose p) { return ZT_OK; }

zt_status zt_comm_allgather(zt_comm *c, const void *send, void *recv, size_t bytes_per_rank, zt_comm_purpose p)
{
    if (send != recv) memcpy(recv, send, bytes_per_rank);
    return ZT_OK;
}

zt_status zt_comm_reduce_scatter_sum(zt_comm *c, const float *send, float *recv, size_t n_per_rank, size_t n,
                                     zt_comm_purpose p)
{
    if (send != recv) memcpy(recv, send, (n < n_per_rank ? n : n_per_rank) * sizeof *send);
    return ZT_OK;
}

zt_status zt_comm_alltoall(zt_comm *c, const void *send, void *recv, size_t bytes_per_rank, zt_comm_purpose p)
{
    memcpy(recv, send, bytes_per_rank);
    return ZT_OK;
}

zt_status zt_comm_bcast(zt_comm *c, void *buf, size_t bytes, int root, zt_comm_purpose p)
{
    return zt_comm_check_root(&c->base, root, "broadcast");
}

zt_status zt_comm_barrier(zt_comm *c) { return ZT_OK; }

/* one rank: nothing comes from another */
void zt_comm_count_allgather(zt_comm *c, size_t bytes_per_rank, zt_comm_purpose p) {}
void zt_comm_count_reduce_scatter(zt_comm *c, size_t n_per_rank, size_t n, zt_comm_purpose p) {}
void zt_comm_count_allreduce_f32(zt_comm *c, size_t n, zt_comm_purpose p) {}

zt_status zt_comm_iallgather(zt_comm *c, const void *send, void *recv, size_t bytes_per_rank, size_t recv_bytes,
                             zt_comm_purpose p, zt_comm_req **req)
{
    *req = NULL; /* done already: the wait has nothing to do */
    return zt_comm_allgather(c, send, recv, recv_bytes < bytes_per_rank ? recv_bytes : bytes_per_rank, p);
}

zt_status zt_comm_wait(zt_comm *c, zt_comm_req *req) { return ZT_OK; }

zt_status zt_comm_bytes_total(zt_comm *c, uint64_t out[ZT_COMM_NPURPOSE][2])
{
    zt_comm_bytes(c, out);
    return ZT_OK;
}
