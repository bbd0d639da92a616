/* One block per row (per head for the per-head norm) for y and dx, with the row's sums in
 * double like the CPU; dw sums over rows with colsum (deterministic). */
#include <math.h>

#include "kernels/cuda/colsum.cuh"
#include "kernels/cuda/ops.h"

#define RMSNORM_THREADS 256
#define HEAD_NORM_THREADS 64 /* a head has 64 to 256 elements */

/* y = x·r·(w + w_offset) over this block's row of C, and y rounded to bf16 in y16 where it is
 * not NULL; returns r = 1/rms(x) (in every thread) */
static __device__ float norm_row(float *y, uint16_t *y16, const float *x, const float *w, float w_offset, int C,
                                 double eps)
{
    double ss = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) ss += (double)x[c] * x[c];
    ss = zt_block_sum(ss);
    float r = (float)(1.0 / sqrt(ss / C + eps));
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float v = x[c] * r * (w[c] + w_offset);
        y[c] = v;
        if (y16) y16[c] = zt_bf16_round(v);
    }
    return r;
}

/* g = r·(dy·s - xh·mean(dy·s·xh)), xh = x·r, s = w + w_offset, added to dx (accumulate) or
 * written; dx may be dy. */
static __device__ void norm_row_backward(float *dx, int accumulate, const float *dy, const float *x, const float *w,
                                         float w_offset, float r, int C)
{
    double dot = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dot += (double)dy[c] * (w[c] + w_offset) * x[c];
    dot = zt_block_sum(dot);
    float m = (float)(dot * r / C);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float g = r * (dy[c] * (w[c] + w_offset) - x[c] * r * m);
        dx[c] = accumulate ? dx[c] + g : g;
    }
}

static __global__ void rmsnorm_forward_kernel(float *y, uint16_t *y16, float *rstd, const float *x, const float *w,
                                              float w_offset, int C, double eps)
{
    size_t row = (size_t)blockIdx.x * C;
    float r = norm_row(y + row, y16 ? y16 + row : NULL, x + row, w, w_offset, C, eps);
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

static __global__ void rmsnorm_backward_dx_kernel(float *dx, const float *dy, const float *x, const float *w,
                                                  float w_offset, const float *rstd, int C)
{
    size_t row = (size_t)blockIdx.x * C;
    norm_row_backward(dx + row, 1, dy + row, x + row, w, w_offset, rstd[blockIdx.x], C);
}

/* block i: head i % nheads of row i / nheads; the input is kept in xin before it is normed */
static __global__ void head_rmsnorm_forward_kernel(float *x, float *xin, float *rstd, const float *w,
                                                   float w_offset, int stride, int nheads, int D, double eps)
{
    size_t i = blockIdx.x;
    float *xh = x + (i / nheads) * stride + (i % nheads) * D, *saved = xin + i * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) saved[d] = xh[d];
    float r = norm_row(xh, NULL, saved, w, w_offset, D, eps);
    if (threadIdx.x == 0) rstd[i] = r;
}

static __global__ void head_rmsnorm_backward_dx_kernel(float *dx, const float *xin, const float *w, float w_offset,
                                                       const float *rstd, int stride, int nheads, int D)
{
    size_t i = blockIdx.x;
    float *d = dx + (i / nheads) * stride + (i % nheads) * D;
    norm_row_backward(d, 0, d, xin + i * D, w, w_offset, rstd[i], D);
}

/* dw = Σ_n dy·xh (internal linkage for the colsum instances); for the per-head norm a row n
 * is one head (row n / nheads, head n % nheads) */
namespace {
struct rmsnorm_dw_term {
    const float *dy, *x, *rstd;
    int C;
    __device__ float operator()(int n, int c) const
    {
        size_t i = (size_t)n * C + c;
        return dy[i] * x[i] * rstd[n];
    }
};
struct head_rmsnorm_dw_term {
    const float *dy, *xin, *rstd;
    int stride, nheads, D;
    __device__ float operator()(int n, int d) const
    {
        size_t at = (size_t)(n / nheads) * stride + (size_t)(n % nheads) * D + d;
        return dy[at] * xin[(size_t)n * D + d] * rstd[n];
    }
};
}

void zt_cuda_rmsnorm_forward(cudaStream_t s, float *y, uint16_t *y16, float *rstd, const float *x, const float *w,
                             float w_offset, int N, int C, double eps)
{
    if (N <= 0 || C <= 0) return;
    rmsnorm_forward_kernel<<<N, RMSNORM_THREADS, 0, s>>>(y, y16, rstd, x, w, w_offset, C, eps);
    zt_cuda_check("rmsnorm_forward");
}

void zt_cuda_rmsnorm_backward(cudaStream_t s, float *dx, float *dw, const float *dy, const float *x, const float *w,
                              float w_offset, const float *rstd, int N, int C)
{
    if (N <= 0 || C <= 0) return;
    rmsnorm_backward_dx_kernel<<<N, RMSNORM_THREADS, 0, s>>>(dx, dy, x, w, w_offset, rstd, C);
    zt_colsum(s, dw, rmsnorm_dw_term{dy, x, rstd, C}, N, C);
    zt_cuda_check("rmsnorm_backward");
}

void zt_cuda_head_rmsnorm_forward(cudaStream_t s, float *x, float *xin, float *rstd, const float *w, float w_offset,
                                  int N, int stride, int nheads, int D, double eps)
{
    if (N <= 0 || nheads <= 0 || D <= 0) return;
    unsigned blocks = (unsigned)((size_t)N * nheads);
    head_rmsnorm_forward_kernel<<<blocks, HEAD_NORM_THREADS, 0, s>>>(x, xin, rstd, w, w_offset, stride, nheads, D,
                                                                     eps);
    zt_cuda_check("head_rmsnorm_forward");
}

/* dw before dx: dx overwrites the dy that dw reads */
void zt_cuda_head_rmsnorm_backward(cudaStream_t s, float *dx, float *dw, const float *xin, const float *w,
                                   float w_offset, const float *rstd, int N, int stride, int nheads, int D)
{
    if (N <= 0 || nheads <= 0 || D <= 0) return;
    unsigned blocks = (unsigned)((size_t)N * nheads);
    zt_colsum(s, dw, head_rmsnorm_dw_term{dx, xin, rstd, stride, nheads, D}, N * nheads, D);
    head_rmsnorm_backward_dx_kernel<<<blocks, HEAD_NORM_THREADS, 0, s>>>(dx, xin, w, w_offset, rstd, stride, nheads,
                                                                         D);
    zt_cuda_check("head_rmsnorm_backward");
}
