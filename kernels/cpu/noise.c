#include "lib/core/rng.h"
#include "ops.h"

/* Built for baseline x86-64 (no FMA): the product and the sum are rounded each, as the CUDA
 * twin rounds them explicitly, so both add the same bits. */
void zt_cpu_add_uniform_noise(zt_real *x, size_t n, uint64_t key, zt_real magnitude)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] += magnitude * (zt_real)zt_hash_uniform_pm1(key + i);
}
