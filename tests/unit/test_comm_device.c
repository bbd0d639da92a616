/* comm_device: how the ranks agree on the backend's own collectives, and the path through host
 * memory. A backend whose collectives are this file's stand-ins (NCCL cannot run here) that fail
 * to load or to open on chosen ranks: every rank must end with the same kind, none may wait in
 * an open the others skip, and every communicator opened must be closed. The host path's
 * collectives of the CPU posing as a device against the values each rank knows (cut blocks
 * included). Runs alone and under mpirun (t1100: 2 and 3 ranks). */
#include <stdlib.h>
#include <string.h>

#include "lib/comm/comm_device.h"
#include "tests/unit/test_mpi.h"

/* the stand-ins: which rank fails where, and what happened on this one */
static int fail_load = -1, fail_open = -1, opened, closed, collectives;

static zt_status stub_load(zt_backend *be)
{
    return R == fail_load ? zt_fail(ZT_EUSER, "no library on rank %d", R) : ZT_OK;
}
static zt_status stub_id(zt_backend *be, unsigned char id[128])
{
    memset(id, 7, 128);
    return ZT_OK;
}
static zt_status stub_open(zt_backend *be, const unsigned char id[128], int nranks, int rank, void **coll)
{
    *coll = NULL;
    if (id[0] != 7 || id[127] != 7 || nranks != N || rank != R) return zt_fail(ZT_ERUNTIME, "a wrong id or shape");
    if (R == fail_open) return zt_fail(ZT_ERUNTIME, "open refused on rank %d", R);
    opened++;
    *coll = &opened;
    return ZT_OK;
}
static void stub_close(zt_backend *be, void *coll) { closed += coll == &opened; }
static zt_status stub_allgather(zt_backend *be, void *coll, const void *send, void *recv, size_t bytes_per_rank,
                                size_t recv_bytes, uint64_t *fence)
{
    collectives++;
    *fence = 0;
    return ZT_OK;
}

static zt_backend stub;

static void use_stub(void)
{
    stub = *zt_backend_cpu_as_device();
    stub.coll_load = stub_load, stub.coll_id = stub_id, stub.coll_open = stub_open, stub.coll_close = stub_close;
    stub.coll_allgather = stub_allgather;
    fail_load = fail_open = -1, opened = closed = collectives = 0;
}

/* opens with the stand-ins, checks the kind every rank got and the communicators' fate */
static void agree(const char *want)
{
    zt_comm_device *d;
    CHECK(zt_comm_device_open(C, &stub, 1, &d) == ZT_OK);
    CHECK_MSG(!strcmp(zt_comm_device_kind(d), want), "rank %d: %s, wanted %s", R, zt_comm_device_kind(d), want);
    float x = 1;
    if (!strcmp(want, "nccl")) /* the stand-in's, which moves nothing */
        CHECK(zt_comm_device_allgather(d, &x, &x, sizeof x, sizeof x, ZT_COMM_OTHER, NULL) == ZT_OK);
    zt_comm_device_close(d);
    CHECK_MSG(opened == closed, "rank %d opened %d communicators and closed %d", R, opened, closed);
}

static void test_all_open(void)
{
    use_stub();
    agree("nccl");
    CHECK(opened == 1 && collectives == 1);
}

static void test_one_cannot_load(void)
{
    use_stub();
    fail_load = N - 1;
    agree("host memory");
    CHECK_MSG(opened == 0, "rank %d opened a communicator another rank could not", R);
}

static void test_one_cannot_open(void)
{
    use_stub();
    fail_open = 0;
    agree("host memory");
    CHECK(opened == (R == 0 ? 0 : 1));
}

/* through host memory on the CPU posing as a device: an all-gather cut short, a reduce-scatter
 * with a cut last block, an all-reduce, each against what every rank knows of the others */
static void test_host_path(void)
{
    zt_backend *be = zt_backend_cpu_as_device();
    zt_comm_device *d;
    CHECK(zt_comm_device_open(C, be, 1, &d) == ZT_OK && !strcmp(zt_comm_device_kind(d), "host memory"));
    size_t p = 5, n = p * (size_t)N - 2, cut = zt_comm_cut(n, p, (size_t)R);
    float *x = be->alloc(be, (p * N + 1) * sizeof *x), *y = be->alloc(be, (p * N + 1) * sizeof *y);
    for (size_t i = 0; i < p; i++) x[i] = (float)(100 * R + (int)i);
    CHECK(zt_comm_device_allgather(d, x, y, p * sizeof *x, n * sizeof *x, ZT_COMM_OTHER, NULL) == ZT_OK);
    for (size_t i = 0; i < n; i++) CHECK(y[i] == (float)(100 * (int)(i / p) + (int)(i % p)));
    CHECK(y[n] == 0); /* nothing past recv_bytes */
    for (size_t i = 0; i < n; i++) x[i] = (float)(R + 1) * (float)i;
    CHECK(zt_comm_device_reduce_scatter_sum(d, x, y, p, n, n, ZT_COMM_GRAD_REDUCE, NULL) == ZT_OK);
    float ranks = (float)(N * (N + 1) / 2);
    for (size_t i = 0; i < cut; i++) CHECK(y[i] == ranks * (float)((size_t)R * p + i));
    CHECK(zt_comm_device_allreduce_sum(d, x, n, ZT_COMM_GRAD_REDUCE, NULL) == ZT_OK);
    for (size_t i = 0; i < n; i++) CHECK(x[i] == ranks * (float)i);
    be->free(be, x), be->free(be, y);
    zt_comm_device_close(d);
}

int main(int argc, char **argv)
{
    int rc = mpi_test_init(&argc, &argv, 60);
    if (rc) return rc;
    RUN_ALL(test_all_open);
    RUN_ALL(test_one_cannot_load);
    RUN_ALL(test_one_cannot_open);
    RUN_ALL(test_host_path);
    return mpi_test_finish();
}
