#include <omp.h>
#include <string.h>

#include "ops.h"

/* Below this a second thread costs more than it saves; above it one core cannot fill the
 * memory bandwidth (the gradient's zeroing each step is hundreds of MB). */
enum { PARALLEL_BYTES = 1 << 20, SLICE = 1 << 16 };

void zt_cpu_zero(void *p, size_t bytes)
{
    if (bytes < PARALLEL_BYTES || omp_in_parallel()) {
        memset(p, 0, bytes);
        return;
    }
    long slices = (long)((bytes + SLICE - 1) / SLICE);
#pragma omp parallel for schedule(static)
    for (long s = 0; s < slices; s++) {
        size_t at = (size_t)s * SLICE;
        memset((char *)p + at, 0, bytes - at < SLICE ? bytes - at : SLICE);
    }
}

void zt_cpu_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes < PARALLEL_BYTES || omp_in_parallel()) {
        memcpy(dst, src, bytes);
        return;
    }
    long slices = (long)((bytes + SLICE - 1) / SLICE);
#pragma omp parallel for schedule(static)
    for (long s = 0; s < slices; s++) {
        size_t at = (size_t)s * SLICE;
        memcpy((char *)dst + at, (const char *)src + at, bytes - at < SLICE ? bytes - at : SLICE);
    }
}
