#include <string.h>

#include "ops.h"
#include "parallel.h"

/* Below this a second thread costs more than it saves; above it one core cannot fill the
 * memory bandwidth (the gradient's zeroing each step is hundreds of MB). */
enum { PARALLEL_BYTES = 1 << 20, SLICE = 1 << 16 };

static void zero_piece(void *p, size_t i, size_t k) { memset((char *)p + i, 0, k); }

void zt_cpu_zero(void *p, size_t bytes) { zt_parallel_pieces(bytes, SLICE, PARALLEL_BYTES, zero_piece, p); }

typedef struct {
    void *dst;
    const void *src;
} copy_job;

static void copy_piece(void *ctx, size_t i, size_t k)
{
    const copy_job *j = ctx;
    memcpy((char *)j->dst + i, (const char *)j->src + i, k);
}

void zt_cpu_copy(void *dst, const void *src, size_t bytes)
{
    copy_job j = {dst, src};
    zt_parallel_pieces(bytes, SLICE, PARALLEL_BYTES, copy_piece, &j);
}
