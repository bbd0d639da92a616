#include "ops.h"

void zt_cpu_rope(zt_real *x, int N, int stride, int nheads, int D, int R, int interleaved, const int32_t *pos,
                 const zt_real *cos_t, const zt_real *sin_t, int inverse)
{
    int half = R / 2, step = interleaved ? 2 : 1, other = interleaved ? 1 : half; /* pair j: (j·step, j·step + other) */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const zt_real *c = cos_t + (size_t)pos[n] * half, *s = sin_t + (size_t)pos[n] * half;
        for (int h = 0; h < nheads; h++) {
            zt_real *a = x + (size_t)n * stride + (size_t)h * D, *b = a + other;
            for (int j = 0; j < half; j++) {
                zt_real sn = inverse ? -s[j] : s[j];
                zt_real a0 = a[j * step], b0 = b[j * step];
                a[j * step] = a0 * c[j] - b0 * sn;
                b[j * step] = b0 * c[j] + a0 * sn;
            }
        }
    }
}
