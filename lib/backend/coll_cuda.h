/* coll_cuda: collectives between the ranks' GPUs on NCCL, for the CUDA backend's coll_* entries
 * (backend.h). NCCL is loaded at the first call (dlopen of $ZT_NCCL_LIB, else libnccl.so.2), so
 * zt runs where it is missing: the calls then fail naming why, and the caller goes through host
 * memory instead. Every collective is queued on the given stream, in order with the kernels. */
#ifndef ZT_BACKEND_COLL_CUDA_H
#define ZT_BACKEND_COLL_CUDA_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "lib/core/status.h"

zt_status zt_nccl_load(void); /* ZT_OK once NCCL is loaded, else why not */
zt_status zt_nccl_id(unsigned char id[128]);
zt_status zt_nccl_open(const unsigned char id[128], int nranks, int rank, void **comm);
void zt_nccl_close(void *comm);
void zt_nccl_shape(void *comm, int *nranks, int *rank);
/* recv (nranks · bytes) = every rank's send in rank order; send may be recv's own block */
zt_status zt_nccl_allgather(void *comm, const void *send, void *recv, size_t bytes, cudaStream_t s);
/* rank r's recv (n_per_rank floats) = Σ over ranks of their send's block r; recv may be send's own block */
zt_status zt_nccl_reduce_scatter(void *comm, const float *send, float *recv, size_t n_per_rank, cudaStream_t s);
zt_status zt_nccl_allreduce(void *comm, float *buf, size_t n, cudaStream_t s);

#endif
