#include <math.h>

#include "ops.h"
#include "parallel.h"

void zt_cpu_rmsnorm_forward(zt_real *y, zt_real *rstd, const zt_real *x, const zt_real *w, int N, int C, double eps)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const zt_real *xr = x + (size_t)n * C;
        zt_real *yr = y + (size_t)n * C;
        double ss = 0;
#pragma omp simd reduction(+ : ss)
        for (int c = 0; c < C; c++) ss += (double)xr[c] * xr[c];
        zt_real r = (zt_real)(1.0 / sqrt(ss / C + eps));
        rstd[n] = r;
        for (int c = 0; c < C; c++) yr[c] = xr[c] * r * w[c];
    }
}

/* With xh = x·r: dx = r·(dy·w - xh·mean(dy·w·xh)), dw = Σ_n dy·xh. */
void zt_cpu_rmsnorm_backward(zt_real *dx, zt_real *dw, const zt_real *dy, const zt_real *x, const zt_real *w,
                             const zt_real *rstd, int N, int C)
{
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            const zt_real *xr = x + (size_t)n * C, *dyr = dy + (size_t)n * C;
            zt_real *dxr = dx + (size_t)n * C;
            zt_real r = rstd[n];
            double dot = 0;
#pragma omp simd reduction(+ : dot)
            for (int c = 0; c < C; c++) dot += (double)dyr[c] * w[c] * xr[c];
            zt_real m = (zt_real)(dot * r / C);
            for (int c = 0; c < C; c++) dxr[c] += r * (dyr[c] * w[c] - xr[c] * r * m);
        }
        long c0, c1;
        zt_thread_range(C, &c0, &c1);
        for (int n = 0; n < N; n++) {
            const zt_real *xr = x + (size_t)n * C, *dyr = dy + (size_t)n * C;
            zt_real r = rstd[n];
            for (long c = c0; c < c1; c++) dw[c] += dyr[c] * xr[c] * r;
        }
    }
}
