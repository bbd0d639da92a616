#include "lib/core/rng.h"
#include "ops.h"

/* Built for baseline x86-64 (no FMA): the product and the sum are rounded each, as the CUDA
 * twin rounds them explicitly, so both keep, scale and add the same bits. */
void zt_cpu_dropout(zt_real *dst, const zt_real *src, size_t n, uint64_t key, uint64_t drop_below, zt_real keep_scale,
                    int accumulate)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        zt_real v = (zt_mix64(key + i) >> 11) < drop_below ? 0 : src[i] * keep_scale;
        dst[i] = accumulate ? dst[i] + v : v;
    }
}
