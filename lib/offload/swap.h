/* offload/swap: arrays of this rank's elements kept in a file instead of memory: AdamW's
 * moments m and v (offload.optimizer = "nvme"), and with offload.param = "nvme" also the
 * fp32 master weights and the summed gradient (or the weights alone: LoRA's frozen base,
 * which nothing updates). The optimizer step streams them through in
 * chunks: chunk k+1 is read while AdamW updates chunk k and chunk k-1 is written back.
 * Memory: three chunks of each array. ZeRO stage 3 moves whole units: chunks never cross
 * the cuts given at open (each unit's first element), and a unit's chunks lie back to back
 * in the file, so a unit is one transfer.
 *
 * The file is this run's own scratch (a name with the host and pid), deleted at close;
 * checkpoints copy the arrays out of it in pieces and resume writes them back, so no
 * checkpoint ever shares a file that training rewrites. Every chunk read back is checked
 * against the CRC-32C it was written with: a file truncated, overwritten or corrupted
 * underneath (or a chunk never written) stops the run instead of feeding AdamW zeros.
 *
 *     zt_swap s;
 *     zt_swap_open(&s, aio, paths, npaths, "rank-00000", numel, 4 << 20, ZT_SWAP_MOMENTS, NULL, 0);  // zeros
 *     zt_swap_update(&s, adamw_chunk, ctx);     // fn(ctx, first, n, arrays) over every chunk
 *     zt_swap_get(&s, ZT_SWAP_M, first, n, dst);
 *     zt_swap_close(&s);
 */
#ifndef ZT_OFFLOAD_SWAP_H
#define ZT_OFFLOAD_SWAP_H

#include "aio.h"

/* The arrays, in this order in the file (those it holds: a mask of 1 << ZT_SWAP_*). */
enum { ZT_SWAP_M, ZT_SWAP_V, ZT_SWAP_MASTER, ZT_SWAP_GRAD, ZT_SWAP_MAX_ARRAYS };
#define ZT_SWAP_MOMENTS (1u << ZT_SWAP_M | 1u << ZT_SWAP_V)
#define ZT_SWAP_ALL ((1u << ZT_SWAP_MAX_ARRAYS) - 1)

typedef struct zt_swap {
    zt_aio *aio;
    zt_aio_file file;
    size_t numel, chunk; /* elements; the most per chunk (a multiple of ZT_AIO_ALIGN / 4) */
    unsigned arrays;     /* the arrays it holds, 1 << ZT_SWAP_* each */
    int narrays;         /* how many */
    size_t nchunks;
    size_t *first;  /* chunk k holds elements [first[k], first[k + 1]) */
    uint64_t *slot; /* at slot[k] within each array's region of region bytes */
    uint64_t region;
    float *buf[3];    /* each: a chunk of every array, array a at a × chunk */
    uint32_t *crc;    /* CRC-32C of chunk k of the file's array a at [k × narrays + a], as last written */
    uint8_t *written; /* the same, whether it was ever written */
    size_t cached;    /* buf[0] holds chunk k of array a: k × narrays + a + 1; 0: nothing */
} zt_swap;

/* chunk_bytes: bytes of each array per chunk (rounded to ZT_AIO_ALIGN). arrays: which of
 * ZT_SWAP_* the file holds (ZT_SWAP_MOMENTS, ZT_SWAP_ALL, 1 << ZT_SWAP_MASTER). cuts: ncuts
 * ascending element offsets where a chunk must start. m and v start as zeros; the
 * weights and gradient must be written before they are read. */
zt_status zt_swap_open(zt_swap *s, zt_aio *aio, const char *const *paths, int npaths, const char *name, size_t numel,
                       size_t chunk_bytes, unsigned arrays, const size_t *cuts, int ncuts);
void zt_swap_close(zt_swap *s);
/* The bytes of chunk buffers zt_swap_open allocates for these arguments (three chunks of each array). */
size_t zt_swap_buffer_bytes(size_t numel, size_t chunk_bytes, unsigned arrays);
/* fn gets the chunk's elements [first, first + n) of every array the file holds, arrays[a]
 * (NULL for the others); what it leaves in each but the gradient is written back. */
typedef zt_status (*zt_swap_fn)(void *ctx, size_t first, size_t n, float *const *arrays);
zt_status zt_swap_update(zt_swap *s, zt_swap_fn fn, void *ctx);
/* Elements [first, first + n) of array a, through a chunk buffer (not while an update runs). */
zt_status zt_swap_get(zt_swap *s, int a, size_t first, size_t n, float *dst);
zt_status zt_swap_put(zt_swap *s, int a, size_t first, size_t n, const float *src);
/* A whole run of chunks, [first, first + n) from a cut to a cut, between the file and an
 * aligned buffer of zt_aio_round(n × 4) bytes, queued as one transfer; a read is checked
 * with zt_swap_check_range once waited. */
zt_status zt_swap_range_read(zt_swap *s, int a, size_t first, size_t n, float *buf, zt_aio_req *r);
zt_status zt_swap_range_write(zt_swap *s, int a, size_t first, size_t n, const float *buf, zt_aio_req *r);
zt_status zt_swap_check_range(const zt_swap *s, int a, size_t first, size_t n, const float *buf);

#endif
