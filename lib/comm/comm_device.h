/* comm_device: collectives on a backend's device buffers, so that ZeRO on GPUs reduces and
 * gathers without host copies of the model: on the backend's own collectives (NCCL on CUDA,
 * backend.h's coll_* entries) where it has them and they open on every rank, else through
 * host memory and the MPI collectives of comm.h (a pinned bounce buffer: download, collective,
 * upload), which is also what the CPU posing as a device tests. Sizes, in-place rules and byte
 * counts are those of comm.h's collectives of the same names (the all-gather's blocks cut at
 * recv_bytes as zt_comm_iallgather's); sums run in rank order through host memory and in NCCL's
 * own order on NCCL (the same on every rank; not MPI's bits). Nothing is read or written past
 * the sizes given: NCCL's whole blocks go through a device scratch buffer where a size cuts one,
 * unless the reduce-scatter's room says send and recv have them (the padding of a flat array).
 * On NCCL a collective runs beside the kernels queued after it (the backend's copy stream):
 * with fence NULL those kernels wait for it; else *fence is the backend fence to use before its
 * result is read (backend.h; 0 where it is done already, as through host memory).
 *
 *     zt_comm_device *d;
 *     st = zt_comm_device_open(c, be, 1, &d);      // a collective: 1 tries the backend's own
 *     st = zt_comm_device_reduce_scatter_sum(d, grads, grads + p * rank, p, n, n, ZT_COMM_GRAD_REDUCE, NULL);
 *     st = zt_comm_device_allgather(d, shard, full, p * 4, n * 4, ZT_COMM_OTHER, &fence);
 *     ...                                          // kernels that do not read full
 *     be->fence_use(be, fence);                    // those that do
 *     zt_comm_device_close(d);
 */
#ifndef ZT_COMM_DEVICE_H
#define ZT_COMM_DEVICE_H

#include "comm.h"
#include "lib/backend/backend.h"

typedef struct zt_comm_device zt_comm_device;

/* A collective of c's ranks, all on backends of the same kind. native: use the backend's own
 * collectives if every rank can (else, or with native 0, host memory; the reason is logged). */
zt_status zt_comm_device_open(zt_comm *c, zt_backend *be, int native, zt_comm_device **out);
void zt_comm_device_close(zt_comm_device *d);             /* NULL is fine */
const char *zt_comm_device_kind(const zt_comm_device *d); /* "nccl" or "host memory" */

zt_status zt_comm_device_allgather(zt_comm_device *d, const void *send, void *recv, size_t bytes_per_rank,
                                   size_t recv_bytes, zt_comm_purpose p, uint64_t *fence);
/* room (>= n): the elements send may be read at, and (in place) recv's block written at, whose
 * values past n do not matter */
zt_status zt_comm_device_reduce_scatter_sum(zt_comm_device *d, const float *send, float *recv, size_t n_per_rank,
                                            size_t n, size_t room, zt_comm_purpose p, uint64_t *fence);
zt_status zt_comm_device_allreduce_sum(zt_comm_device *d, float *buf, size_t n, zt_comm_purpose p, uint64_t *fence);

#endif
