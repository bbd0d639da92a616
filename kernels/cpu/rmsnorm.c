#include <math.h>

#include "bf16_row.h"
#include "ops.h"
#include "parallel.h"

/* y = x·r·(w + w_offset) over C elements; returns r = 1/rms(x), the sum of squares in double */
static zt_real norm_row(zt_real *y, const zt_real *x, const zt_real *w, zt_real w_offset, int C, double eps)
{
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
    zt_real r = (zt_real)(1.0 / sqrt(ss / C + eps));
    for (int c = 0; c < C; c++) y[c] = x[c] * r * (w[c] + w_offset);
    return r;
}

/* The input gradient of norm_row: g = r·(dy·s - xh·mean(dy·s·xh)), xh = x·r, s = w + w_offset,
 * added to dx (accumulate) or written; dx may be dy itself (dy[c] is read before dx[c] is written). */
static void norm_row_backward(zt_real *dx, int accumulate, const zt_real *dy, const zt_real *x, const zt_real *w,
                              zt_real w_offset, zt_real r, int C)
{
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int c = 0; c < C; c++) dot += (double)dy[c] * (w[c] + w_offset) * x[c];
    zt_real m = (zt_real)(dot * r / C);
    for (int c = 0; c < C; c++) {
        zt_real g = r * (dy[c] * (w[c] + w_offset) - x[c] * r * m);
        dx[c] = accumulate ? dx[c] + g : g;
    }
}

void zt_cpu_rmsnorm_forward(zt_real *y, uint16_t *y16, zt_real *rstd, const zt_real *x, const zt_real *w,
                            zt_real w_offset, int N, int C, double eps)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        rstd[n] = norm_row(y + (size_t)n * C, x + (size_t)n * C, w, w_offset, C, eps);
        zt_bf16_row(y16, y, n, C);
    }
}

/* dw = Σ_n dy·xh, each thread its own columns (the same sums for any thread count). */
void zt_cpu_rmsnorm_backward(zt_real *dx, zt_real *dw, const zt_real *dy, const zt_real *x, const zt_real *w,
                             zt_real w_offset, const zt_real *rstd, int N, int C)
{
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            size_t row = (size_t)n * C;
            norm_row_backward(dx + row, 1, dy + row, x + row, w, w_offset, rstd[n], C);
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

void zt_cpu_head_rmsnorm_forward(zt_real *x, zt_real *xin, zt_real *rstd, const zt_real *w, zt_real w_offset, int N,
                                 int stride, int nheads, int D, double eps)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < nheads; h++) {
            size_t i = (size_t)n * nheads + h;
            zt_real *xh = x + (size_t)n * stride + (size_t)h * D, *saved = xin + i * D;
            for (int d = 0; d < D; d++) saved[d] = xh[d];
            rstd[i] = norm_row(xh, saved, w, w_offset, D, eps);
        }
}

/* dw first (it reads dy, which dx then overwrites), each thread its own elements of it */
void zt_cpu_head_rmsnorm_backward(zt_real *dx, zt_real *dw, const zt_real *xin, const zt_real *w, zt_real w_offset,
                                  const zt_real *rstd, int N, int stride, int nheads, int D)
{
#pragma omp parallel
    {
        long d0, d1;
        zt_thread_range(D, &d0, &d1);
        for (size_t i = 0; i < (size_t)N * nheads; i++) {
            const zt_real *dy = dx + (i / nheads) * stride + (i % nheads) * D, *xr = xin + i * D;
            for (long d = d0; d < d1; d++) dw[d] += dy[d] * xr[d] * rstd[i];
        }
#pragma omp barrier
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++)
            for (int h = 0; h < nheads; h++) {
                size_t i = (size_t)n * nheads + h;
                zt_real *d = dx + (size_t)n * stride + (size_t)h * D;
                norm_row_backward(d, 0, d, xin + i * D, w, w_offset, rstd[i], D);
            }
    }
}
