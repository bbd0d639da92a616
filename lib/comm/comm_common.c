#include "comm_internal.h"

#include <string.h>

#define BASE(c) ((const zt_comm_base *)(c)) /* struct zt_comm begins with a zt_comm_base */

int zt_comm_rank(const zt_comm *c) { return BASE(c)->rank; }
int zt_comm_size(const zt_comm *c) { return BASE(c)->size; }
int zt_comm_local_rank(const zt_comm *c) { return BASE(c)->rank % BASE(c)->ranks_per_node; }
int zt_comm_ranks_per_node(const zt_comm *c) { return BASE(c)->ranks_per_node; }
int zt_comm_node(const zt_comm *c) { return BASE(c)->rank / BASE(c)->ranks_per_node; }
int zt_comm_nodes(const zt_comm *c) { return BASE(c)->size / BASE(c)->ranks_per_node; }

const char *zt_comm_purpose_name(zt_comm_purpose p)
{
    static const char *const names[ZT_COMM_NPURPOSE] = {"fwd_gather", "bwd_gather", "grad_reduce", "other"};
    ZT_ASSERT(p >= 0 && p < ZT_COMM_NPURPOSE);
    return names[p];
}

void zt_comm_bytes(const zt_comm *c, uint64_t out[ZT_COMM_NPURPOSE][2])
{
    memcpy(out, BASE(c)->bytes, sizeof BASE(c)->counts);
}

void zt_comm_bytes_reset(zt_comm *c) { memset(((zt_comm_base *)c)->bytes, 0, sizeof BASE(c)->counts); }

void zt_comm_set_chunk_bytes(zt_comm *c, size_t bytes)
{
    ((zt_comm_base *)c)->chunk = bytes ? bytes : ZT_COMM_CHUNK_DEFAULT;
}

zt_status zt_comm_check_root(const zt_comm_base *b, int root, const char *op)
{
    if (root >= 0 && root < b->size) return ZT_OK;
    return zt_fail(ZT_ERUNTIME, "rank %d: %s: root %d is not a rank of the world (%d ranks)", b->rank, op, root,
                   b->size);
}

size_t zt_comm_block(size_t n, int parts, int q, size_t *start)
{
    size_t base = n / (size_t)parts, extra = n % (size_t)parts, uq = (size_t)q;
    *start = base * uq + (uq < extra ? uq : extra);
    return base + (uq < extra);
}

void zt_comm_count_from(zt_comm_base *b, zt_comm_purpose p, zt_comm_members m, int q, uint64_t bytes)
{
    ZT_ASSERT(p >= 0 && p < ZT_COMM_NPURPOSE);
    if (q != m.me) b->bytes[p][m.node[q] != m.node[m.me]] += bytes;
}

void zt_comm_count_each(zt_comm_base *b, zt_comm_purpose p, zt_comm_members m, uint64_t bytes)
{
    for (int q = 0; q < m.size; q++) zt_comm_count_from(b, p, m, q, bytes);
}

void zt_comm_count_allreduce(zt_comm_base *b, zt_comm_purpose p, zt_comm_members m, size_t n, size_t elsize)
{
    size_t start, mine = zt_comm_block(n, m.size, m.me, &start);
    for (int q = 0; q < m.size; q++)
        zt_comm_count_from(b, p, m, q, (mine + zt_comm_block(n, m.size, q, &start)) * elsize);
}
