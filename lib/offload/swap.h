/* offload/swap: AdamW's moments (m and v of this rank's elements) kept in a file instead of
 * memory (offload.optimizer = "nvme"), streamed through the optimizer step in chunks: chunk
 * k+1 is read while AdamW updates chunk k and chunk k-1 is written back. Memory: three
 * chunks of m and v. The file is this run's own scratch (a name with the host and pid),
 * deleted at close; checkpoints copy the moments out of it in pieces and resume writes
 * them back, so no checkpoint ever shares a file that training rewrites. Every chunk read
 * back is checked against the CRC-32C it was written with: a file truncated, overwritten
 * or corrupted underneath stops the run instead of feeding AdamW zeros.
 *
 *     zt_swap s;
 *     zt_swap_open(&s, aio, paths, npaths, "rank-00000", numel, 4 << 20);   // zeros
 *     zt_swap_update(&s, adamw_chunk, ctx);     // fn(ctx, first, n, m, v) over every chunk
 *     zt_swap_get(&s, 1, first, n, dst);        // m[first, first + n) (1: m, 2: v)
 *     zt_swap_close(&s);
 */
#ifndef ZT_OFFLOAD_SWAP_H
#define ZT_OFFLOAD_SWAP_H

#include "aio.h"

typedef struct zt_swap {
    zt_aio *aio;
    zt_aio_file file;
    size_t numel, chunk; /* elements; per chunk (a multiple of ZT_AIO_ALIGN / 4) */
    uint64_t v_at;       /* where v starts in the file */
    float *buf[3];       /* each: a chunk of m, then a chunk of v */
    uint32_t *crc;       /* CRC-32C of each chunk of m and v as last written: what is read back must match */
} zt_swap;

/* chunk_bytes: bytes of each array per chunk (rounded to ZT_AIO_ALIGN). */
zt_status zt_swap_open(zt_swap *s, zt_aio *aio, const char *const *paths, int npaths, const char *name, size_t numel,
                       size_t chunk_bytes);
void zt_swap_close(zt_swap *s);
typedef zt_status (*zt_swap_fn)(void *ctx, size_t first, size_t n, float *m, float *v);
zt_status zt_swap_update(zt_swap *s, zt_swap_fn fn, void *ctx);
/* Elements [first, first + n) of m (which = 1) or v (which = 2), through a chunk buffer. */
zt_status zt_swap_get(zt_swap *s, int which, size_t first, size_t n, float *dst);
zt_status zt_swap_put(zt_swap *s, int which, size_t first, size_t n, const float *src);

#endif
