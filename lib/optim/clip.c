#include "lib/optim/clip.h"

#include <math.h>

#include "kernels/cpu/levels.h"

#define SUMSQ_BLOCK 4096 /* elements summed by one work item */
#define SUMSQ_ROUND 256  /* blocks whose sums are kept before they are added in order */
#define SUMSQ_LANES 8

/* One block in a fixed order: lane j sums the elements j, j+8, j+16, ...; the lanes are
 * then added pairwise. The compiler vectorises the lanes (8 doubles: one AVX-512 register,
 * two AVX2 ones), for each CPU level; it may not reorder them. */
ZT_LEVEL_BODY double block_sumsq_body(const float *x, size_t n)
{
    double acc[SUMSQ_LANES] = {0};
    size_t i = 0;
    for (; i + SUMSQ_LANES <= n; i += SUMSQ_LANES)
        for (int j = 0; j < SUMSQ_LANES; j++) acc[j] += (double)x[i + j] * x[i + j];
    for (int j = 0; i + j < n; j++) acc[j] += (double)x[i + j] * x[i + j];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
ZT_LEVELS(double, block_sumsq, (x, n), const float *x, size_t n)

double zt_sumsq(const float *x, size_t n)
{
    size_t blocks = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    double total = 0, part[SUMSQ_ROUND];
    block_sumsq_fn *block_sumsq = block_sumsq_for_cpu();
#pragma omp parallel if (blocks > 1)
    for (size_t r = 0; r < blocks; r += SUMSQ_ROUND) {
        size_t nb = blocks - r < SUMSQ_ROUND ? blocks - r : SUMSQ_ROUND;
#pragma omp for schedule(static)
        for (size_t b = 0; b < nb; b++) {
            size_t lo = (r + b) * SUMSQ_BLOCK;
            part[b] = block_sumsq(x + lo, n - lo < SUMSQ_BLOCK ? n - lo : SUMSQ_BLOCK);
        }
#pragma omp single
        for (size_t b = 0; b < nb; b++) total += part[b];
    }
    return total;
}

float zt_clip_coef(double total_sumsq, float max_norm, float *norm_out)
{
    double norm = sqrt(total_sumsq);
    float reported = (float)norm; /* a norm past FLT_MAX is reported as inf */
    if (norm_out) *norm_out = reported;
    if (!(max_norm > 0) || !isfinite(reported)) return 1.0f;
    double coef = max_norm / (norm + 1e-6);
    return coef < 1.0 ? (float)coef : 1.0f;
}
