/* aio internals shared by aio_uring.c and aio_nouring.c: files, stripes, messages. */
#ifndef ZT_OFFLOAD_AIO_INTERNAL_H
#define ZT_OFFLOAD_AIO_INTERNAL_H

#include "aio.h"

/* Where logical byte off lies: the stripe, and the offset in its file; *room is how many
 * bytes from there stay in the same block. */
int zt_aio_place(const zt_aio_file *f, size_t block, uint64_t off, uint64_t *file_off, uint64_t *room);
/* The failure of a transfer of r's at logical offset off: errno-style err (negative res) or
 * a read past the end (err == 0). */
zt_status zt_aio_fail(const zt_aio_req *r, size_t block, uint64_t off, int err);
/* The engine's block size. */
size_t zt_aio_block_size(const zt_aio *a);
/* Checks a transfer's arguments and fills r. */
zt_status zt_aio_prepare(zt_aio_file *f, void *buf, size_t bytes, uint64_t off, int write, zt_aio_req *r);

/* What each engine counts: bytes moved, and seconds the caller spent waiting for transfers. */
typedef struct zt_aio_stats {
    uint64_t read_bytes, write_bytes;
    double wait_s;
} zt_aio_stats;
zt_aio_stats *zt_aio_stats_of(zt_aio *a);

#endif
