/* Collectives of device buffers on NCCL against the same collectives through host memory and
 * MPI (lib/comm/comm_device.h), bitwise, on this process's GPU at world size 1 (NCCL refuses two
 * ranks on one GPU; zt's CPU tests, t2100, run the code around the calls at 2 ranks): an
 * all-gather out of place, in place and cut short, a reduce-scatter in place and cut short (NCCL's
 * whole blocks through the scratch), an all-reduce, and the bytes counted (none from other ranks).
 * Run alone or under mpirun -np 1. Exits 77 without a usable GPU; fails when NCCL does not open
 * (ZT_NCCL_LIB names the library where it is not on the loader's path). */
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/comm/comm_device.h"
#include "lib/core/rng.h"
#include "tests/unit/test.h"

static zt_backend *gpu;
static zt_comm *comm;
static zt_comm_device *nccl, *host;

/* n random floats on the device, the same on both sides' buffers */
static void twin(size_t n, float **a, float **b, float *h, zt_rng *rng)
{
    for (size_t i = 0; i < n; i++) h[i] = (float)(2 * zt_rng_uniform(rng) - 1);
    *a = gpu->alloc(gpu, n * sizeof(float)), *b = gpu->alloc(gpu, n * sizeof(float));
    ZT_ASSERT(*a && *b);
    gpu->upload(gpu, *a, h, n * sizeof(float));
    gpu->upload(gpu, *b, h, n * sizeof(float));
}

static void same(const char *what, const float *a, const float *b, size_t n)
{
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    ZT_ASSERT(x && y);
    gpu->download(gpu, x, a, n * sizeof *x);
    gpu->download(gpu, y, b, n * sizeof *y);
    CHECK_MSG(!memcmp(x, y, n * sizeof *x), "%s: NCCL and host memory differ", what);
    free(x), free(y);
}

static void test_collectives(void)
{
    zt_rng rng;
    zt_rng_seed(&rng, 7, 0);
    size_t n = 3000017;
    float *h = malloc(2 * n * sizeof *h), *a, *b, *ra, *rb;
    ZT_ASSERT(h);
    CHECK(!strcmp(zt_comm_device_kind(nccl), "nccl"));
    CHECK(!strcmp(zt_comm_device_kind(host), "host memory"));
    twin(n, &a, &b, h, &rng);
    twin(n, &ra, &rb, h, &rng);
    size_t f = sizeof(float);
    CHECK(zt_comm_device_allgather(nccl, a, ra, n * f, n * f, ZT_COMM_OTHER, NULL) == ZT_OK);
    CHECK(zt_comm_device_allgather(host, b, rb, n * f, n * f, ZT_COMM_OTHER, NULL) == ZT_OK);
    same("all-gather", ra, rb, n);
    CHECK(zt_comm_device_allgather(nccl, ra, ra, n * f, n * f, ZT_COMM_FWD_GATHER, NULL) == ZT_OK);
    CHECK(zt_comm_device_allgather(host, rb, rb, n * f, n * f, ZT_COMM_FWD_GATHER, NULL) == ZT_OK);
    same("all-gather in place", ra, rb, n);
    /* blocks of n + 9 cut at n - 3: through the scratch on NCCL, nothing written past it */
    CHECK(zt_comm_device_allgather(nccl, a, ra, (n + 9) * f, (n - 3) * f, ZT_COMM_OTHER, NULL) == ZT_OK);
    CHECK(zt_comm_device_allgather(host, b, rb, (n + 9) * f, (n - 3) * f, ZT_COMM_OTHER, NULL) == ZT_OK);
    same("all-gather, cut", ra, rb, n);
    CHECK(zt_comm_device_reduce_scatter_sum(nccl, a, a, n, n, n, ZT_COMM_GRAD_REDUCE, NULL) == ZT_OK);
    CHECK(zt_comm_device_reduce_scatter_sum(host, b, b, n, n, n, ZT_COMM_GRAD_REDUCE, NULL) == ZT_OK);
    same("reduce-scatter in place", a, b, n);
    CHECK(zt_comm_device_reduce_scatter_sum(nccl, a, ra, n + 7, n - 1, n - 1, ZT_COMM_GRAD_REDUCE, NULL) == ZT_OK);
    CHECK(zt_comm_device_reduce_scatter_sum(host, b, rb, n + 7, n - 1, n - 1, ZT_COMM_GRAD_REDUCE, NULL) == ZT_OK);
    same("reduce-scatter, cut", ra, rb, n);
    CHECK(zt_comm_device_allreduce_sum(nccl, a, n - 5, ZT_COMM_GRAD_REDUCE, NULL) == ZT_OK);
    CHECK(zt_comm_device_allreduce_sum(host, b, n - 5, ZT_COMM_GRAD_REDUCE, NULL) == ZT_OK);
    same("all-reduce", a, b, n);
    uint64_t bytes[ZT_COMM_NPURPOSE][2], none[ZT_COMM_NPURPOSE][2] = {{0}};
    zt_comm_bytes(comm, bytes);
    CHECK_MSG(!memcmp(bytes, none, sizeof bytes), "one rank counted bytes from another");
    gpu->free(gpu, a), gpu->free(gpu, b), gpu->free(gpu, ra), gpu->free(gpu, rb);
    free(h);
}

int main(int argc, char **argv)
{
    if (zt_backend_cuda(&gpu)) {
        printf("skipped: %s\n", zt_errmsg());
        return 77;
    }
    if (zt_comm_init(&comm, &argc, &argv, 120.0) || zt_comm_device_open(comm, gpu, 1, &nccl) ||
        zt_comm_device_open(comm, gpu, 0, &host)) {
        fprintf(stderr, "test_nccl: %s\n", zt_errmsg());
        return 1;
    }
    RUN(test_collectives);
    zt_comm_device_close(nccl);
    zt_comm_device_close(host);
    zt_comm_finalize(comm);
    return test_summary();
}
