/* comm: collectives between ranks (processes) over MPI on host buffers, the node
 * topology, a watchdog for stuck collectives, and byte accounting.
 *
 *     zt_comm *c;
 *     zt_status st = zt_comm_init(&c, &argc, &argv, 300.0);  // MPI_Init, topology, watchdog
 *     if (st) { fprintf(stderr, "zt: error: %s\n", zt_errmsg()); return zt_exit_code(st); }
 *     st = zt_comm_allgather(c, shard, full, shard_bytes, ZT_COMM_FWD_GATHER);
 *     st = zt_comm_reduce_scatter_sum(c, grads, grad_shard, shard_len, ZT_COMM_GRAD_REDUCE);
 *     uint64_t bytes[ZT_COMM_NPURPOSE][2];
 *     st = zt_comm_bytes_total(c, bytes);                     // for metrics.jsonl
 *     zt_comm_bytes_reset(c);
 *     zt_comm_finalize(c);
 *
 * Ranks and nodes: node = rank / ranks_per_node, local rank = rank % ranks_per_node.
 * ranks_per_node is the number of ranks on each host (a host name and network namespace;
 * not MPI's shared-memory split, which Open MPI 4.1 crashes in across hosts) unless the
 * environment sets ZT_RANKS_PER_NODE (it must divide the world size), which lets one
 * machine pose as several nodes. Without the override the ranks of each host must be
 * consecutive and every host must hold as many; init fails clearly otherwise.
 *
 * Every collective is blocking unless named i*, is called by all ranks in the same
 * order with the same sizes, and returns a zt_status whose message names the operation
 * and the rank. Sizes beyond 2 GiB work (transfers are split into pieces of at most
 * 1 GiB). Float sums are in rank order, ((x0 + x1) + x2) + ..., so results are the same
 * bitwise on every rank, on every call, and whatever the message size.
 *
 * Byte accounting (docs/distributed.md's logical payload): each call adds the bytes this rank
 * receives that originate from other ranks, under its purpose and at level 0 (the source
 * rank is on this node) or 1 (another node), whatever the transfers underneath:
 *   all-gather, all-to-all    bytes_per_rank from each other rank
 *   reduce-scatter            each other rank's block (n_per_rank elements, or fewer at the end)
 *   all-reduce of n elements  as a reduce-scatter over the balanced split of n (block q
 *                             has n/size elements, one more when q < n % size) then an
 *                             all-gather: |block r| plus |block q| elements from each q != r
 *   broadcast                 the bytes, from the root, on the ranks that are not the root
 *
 * The watchdog: with timeout_s > 0 a thread watches every blocking collective, wait and
 * init's own collectives; one that takes longer than timeout_s prints
 *     zt: error: rank R: <op> did not complete within T s (a rank failed or is stuck)
 * and calls MPI_Abort, which ends every rank of the job. MPI is initialised with
 * MPI_THREAD_MULTIPLE so that this call from a second thread is legal (it costs no
 * measurable bandwidth here against FUNNELED, bench/comm_bw.c); where the caller
 * had initialised MPI at a lower level the call is made anyway, as a last resort, and
 * the process _exits 10 s later if MPI_Abort has not ended it. Time between collectives
 * is not watched: the timeout must exceed the longest time one rank can wait in a
 * collective for another (while it writes a checkpoint, say). Call the functions below
 * from one thread, the one that called init.
 *
 * Builds without MPI get a world of one rank (comm_nompi.c): the collectives copy.
 */
#ifndef ZT_COMM_COMM_H
#define ZT_COMM_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

typedef enum {
    ZT_COMM_FWD_GATHER,  /* parameters gathered for the forward pass */
    ZT_COMM_BWD_GATHER,  /* parameters gathered again for the backward pass */
    ZT_COMM_GRAD_REDUCE, /* gradient reduction */
    ZT_COMM_OTHER,       /* everything else: loss sums, broadcasts of state */
    ZT_COMM_NPURPOSE
} zt_comm_purpose;

typedef struct zt_comm zt_comm;

/* Initialises MPI (unless the caller did; argc and argv may be NULL), the topology and
 * the watchdog (timeout_s <= 0: none). ZT_EUSER for a bad ZT_RANKS_PER_NODE or a
 * placement of ranks that the topology cannot describe. */
zt_status zt_comm_init(zt_comm **out, int *argc, char ***argv, double timeout_s);
/* Stops the watchdog, frees c and calls MPI_Finalize when init called MPI_Init. NULL is fine.
 * On a group (zt_comm_split) frees the group only. */
void zt_comm_finalize(zt_comm *c);

/* Splits the world (a collective) into groups of k consecutive ranks, k dividing the size:
 * *group is this rank's group; with across = 1 instead the ranks of the same place in those
 * groups (rank % k), one from each. A group is a zt_comm of its own for every collective
 * below (ranks numbered within it; the topology functions describe its members as they sit
 * on the nodes), with the world's watchdog, and its bytes count in the world's counters (call
 * zt_comm_bytes_total on the world only). zt_comm_finalize frees it; before the world's. */
zt_status zt_comm_split(zt_comm *c, int k, int across, zt_comm **group);

int zt_comm_rank(const zt_comm *c);
int zt_comm_size(const zt_comm *c);
int zt_comm_local_rank(const zt_comm *c);
int zt_comm_ranks_per_node(const zt_comm *c);
int zt_comm_node(const zt_comm *c);
int zt_comm_nodes(const zt_comm *c);
/* "fwd_gather", "bwd_gather", "grad_reduce", "other": the suffixes of metrics' comm_bytes_* */
const char *zt_comm_purpose_name(zt_comm_purpose p);

/* buf: n elements, summed over the ranks in place */
zt_status zt_comm_allreduce_sum(zt_comm *c, float *buf, size_t n, zt_comm_purpose p);
zt_status zt_comm_allreduce_sum_f64(zt_comm *c, double *buf, size_t n, zt_comm_purpose p);
/* recv (size * bytes_per_rank) = rank 0's send, rank 1's, ...; send may be recv's own
 * block (recv + rank * bytes_per_rank), otherwise the two must not overlap */
zt_status zt_comm_allgather(zt_comm *c, const void *send, void *recv, size_t bytes_per_rank, zt_comm_purpose p);
/* send: n elements in size blocks of n_per_rank, the last ones cut short or empty where
 * n < size * n_per_rank (ZeRO's shards of a flat buffer, no padding moved); rank r's recv
 * = the sum over ranks of their block r. recv may be send's own block (send + rank *
 * n_per_rank). */
zt_status zt_comm_reduce_scatter_sum(zt_comm *c, const float *send, float *recv, size_t n_per_rank, size_t n,
                                     zt_comm_purpose p);
/* The length of block q of n elements cut into blocks of per_rank (the last ones shorter
 * or empty), as the reduce-scatter and iallgather above cut them. */
static inline size_t zt_comm_cut(size_t n, size_t per_rank, size_t q)
{
    return q * per_rank < n ? (n - q * per_rank < per_rank ? n - q * per_rank : per_rank) : 0;
}

/* Block q of send goes to rank q; block q of recv comes from rank q. No overlap. */
zt_status zt_comm_alltoall(zt_comm *c, const void *send, void *recv, size_t bytes_per_rank, zt_comm_purpose p);
/* root's buf to every rank's buf */
zt_status zt_comm_bcast(zt_comm *c, void *buf, size_t bytes, int root, zt_comm_purpose p);
zt_status zt_comm_barrier(zt_comm *c);

/* A non-blocking all-gather (prefetching one layer while another computes): the buffers
 * must stay untouched until zt_comm_wait, which frees req. Other collectives may run in
 * between. Open MPI moves the data only inside MPI calls, so most of it moves in the wait
 * or in the collectives between. The bytes count when the gather starts. recv holds
 * recv_bytes (at most size * bytes_per_rank): the blocks past it are cut short or empty,
 * as in the reduce-scatter, and this rank's send is as long as its block. */
typedef struct zt_comm_req zt_comm_req;
zt_status zt_comm_iallgather(zt_comm *c, const void *send, void *recv, size_t bytes_per_rank, size_t recv_bytes,
                             zt_comm_purpose p, zt_comm_req **req);
zt_status zt_comm_wait(zt_comm *c, zt_comm_req *req); /* NULL is a no-op */

/* Collectives that moved elsewhere between this comm's ranks (on device buffers:
 * comm_device.h) count here what the MPI collective of the same sizes counts: an all-gather of
 * bytes_per_rank, a reduce-scatter of n floats in blocks of n_per_rank, an all-reduce of n floats. */
void zt_comm_count_allgather(zt_comm *c, size_t bytes_per_rank, zt_comm_purpose p);
void zt_comm_count_reduce_scatter(zt_comm *c, size_t n_per_rank, size_t n, zt_comm_purpose p);
void zt_comm_count_allreduce_f32(zt_comm *c, size_t n, zt_comm_purpose p);

/* This rank's bytes since the last reset, by purpose and level (0 intra-node, 1 inter-node). */
void zt_comm_bytes(const zt_comm *c, uint64_t out[ZT_COMM_NPURPOSE][2]);
/* The sum of every rank's counters (a collective; counts no bytes itself). */
zt_status zt_comm_bytes_total(zt_comm *c, uint64_t out[ZT_COMM_NPURPOSE][2]);
void zt_comm_bytes_reset(zt_comm *c);

/* For tests: the largest piece one MPI transfer moves (default 1 GiB, 0 restores it), so
 * that small messages take the paths of huge ones. */
void zt_comm_set_chunk_bytes(zt_comm *c, size_t bytes);

#endif
