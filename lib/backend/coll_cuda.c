/* NCCL for the CUDA backend (coll_cuda.h). */
#include "coll_cuda.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <nccl.h>

_Static_assert(sizeof(ncclUniqueId) == 128, "an NCCL id is 128 bytes");

static struct {
    void *lib;
    ncclResult_t (*get_id)(ncclUniqueId *);
    ncclResult_t (*init)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*destroy)(ncclComm_t);
    ncclResult_t (*count)(const ncclComm_t, int *);
    ncclResult_t (*user_rank)(const ncclComm_t, int *);
    ncclResult_t (*allgather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                   cudaStream_t);
    ncclResult_t (*allreduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    const char *(*error)(ncclResult_t);
} N;

zt_status zt_nccl_load(void)
{
    if (N.lib) return ZT_OK;
    const char *path = getenv("ZT_NCCL_LIB");
    void *lib = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return zt_fail(ZT_EUSER, "NCCL is not available: %s", dlerror());
    struct {
        void **fn;
        const char *name;
    } want[] = {{(void **)&N.get_id, "ncclGetUniqueId"},      {(void **)&N.init, "ncclCommInitRank"},
                {(void **)&N.destroy, "ncclCommDestroy"},     {(void **)&N.allgather, "ncclAllGather"},
                {(void **)&N.reduce_scatter, "ncclReduceScatter"}, {(void **)&N.allreduce, "ncclAllReduce"},
                {(void **)&N.error, "ncclGetErrorString"}, {(void **)&N.count, "ncclCommCount"},
                {(void **)&N.user_rank, "ncclCommUserRank"}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!(*want[i].fn = dlsym(lib, want[i].name))) {
            dlclose(lib);
            return zt_fail(ZT_EUSER, "NCCL (%s) lacks %s", path && *path ? path : "libnccl.so.2", want[i].name);
        }
    N.lib = lib;
    return ZT_OK;
}

static zt_status check(ncclResult_t r, const char *what)
{
    return r == ncclSuccess ? ZT_OK : zt_fail(ZT_ERUNTIME, "NCCL %s failed: %s (%d)", what, N.error(r), (int)r);
}

zt_status zt_nccl_id(unsigned char id[128])
{
    zt_status st = zt_nccl_load();
    return st ? st : check(N.get_id((ncclUniqueId *)id), "id");
}

zt_status zt_nccl_open(const unsigned char id[128], int nranks, int rank, void **comm)
{
    *comm = NULL;
    zt_status st = zt_nccl_load();
    if (st) return st;
    ncclUniqueId u;
    for (int i = 0; i < 128; i++) u.internal[i] = (char)id[i];
    ncclComm_t c = NULL;
    if ((st = check(N.init(&c, nranks, u, rank), "communicator"))) return st;
    *comm = c;
    return ZT_OK;
}

void zt_nccl_close(void *comm)
{
    if (comm) N.destroy((ncclComm_t)comm);
}

void zt_nccl_shape(void *comm, int *nranks, int *rank)
{
    N.count((ncclComm_t)comm, nranks);
    N.user_rank((ncclComm_t)comm, rank);
}

zt_status zt_nccl_allgather(void *comm, const void *send, void *recv, size_t bytes, cudaStream_t s)
{
    return check(N.allgather(send, recv, bytes, ncclUint8, (ncclComm_t)comm, s), "all-gather");
}

zt_status zt_nccl_reduce_scatter(void *comm, const float *send, float *recv, size_t n_per_rank, cudaStream_t s)
{
    return check(N.reduce_scatter(send, recv, n_per_rank, ncclFloat32, ncclSum, (ncclComm_t)comm, s),
                 "reduce-scatter");
}

zt_status zt_nccl_allreduce(void *comm, float *buf, size_t n, cudaStream_t s)
{
    return check(N.allreduce(buf, buf, n, ncclFloat32, ncclSum, (ncclComm_t)comm, s), "all-reduce");
}
