/* comm internals shared by comm_mpi.c and comm_nompi.c: the part of struct zt_comm that
 * both have (it comes first in each), and the byte-accounting arithmetic. */
#ifndef ZT_COMM_INTERNAL_H
#define ZT_COMM_INTERNAL_H

#include "comm.h"

typedef struct zt_comm_base {
    int rank, size, ranks_per_node;
    uint64_t counts[ZT_COMM_NPURPOSE][2]; /* received from other ranks: [purpose][0 intra, 1 inter] */
    uint64_t (*bytes)[2];                 /* where this comm counts: its counts, or (a group) the world's */
    size_t chunk;                         /* the largest piece one transfer moves, bytes */
} zt_comm_base;

#define ZT_COMM_CHUNK_DEFAULT ((size_t)1 << 30)

/* The balanced split of n items into parts: part q starts at *start and has the returned length. */
size_t zt_comm_block(size_t n, int parts, int q, size_t *start);

/* ZT_OK when root is a rank of the world, else a message naming op. */
zt_status zt_comm_check_root(const zt_comm_base *b, int root, const char *op);

/* A group of ranks (the world, or one level of it): node[q] is the node of member q. */
typedef struct zt_comm_members {
    int size, me;
    const int *node;
} zt_comm_members;

/* Counts bytes received from member q (nothing when q is this rank). */
void zt_comm_count_from(zt_comm_base *b, zt_comm_purpose p, zt_comm_members m, int q, uint64_t bytes);
/* Counts bytes received from every other member. */
void zt_comm_count_each(zt_comm_base *b, zt_comm_purpose p, zt_comm_members m, uint64_t bytes);
/* Counts an all-reduce of n elements of elsize bytes (see comm.h). */
void zt_comm_count_allreduce(zt_comm_base *b, zt_comm_purpose p, zt_comm_members m, size_t n, size_t elsize);

#endif
