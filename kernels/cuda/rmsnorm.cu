/* One block per row for y and dx, with the row's sums in double like the CPU; dw sums over
 * rows with colsum (deterministic). */
#include <math.h>

#include "kernels/cuda/colsum.cuh"
#include "kernels/cuda/ops.h"

#define RMSNORM_THREADS 256

static __global__ void rmsnorm_forward_kernel(float *y, float *rstd, const float *x, const float *w, int C,
                                              double eps)
{
    const float *xr = x + (size_t)blockIdx.x * C;
    float *yr = y + (size_t)blockIdx.x * C;
    double ss = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) ss += (double)xr[c] * xr[c];
    ss = zt_block_sum(ss);
    float r = (float)(1.0 / sqrt(ss / C + eps));
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
    for (int c = threadIdx.x; c < C; c += blockDim.x) yr[c] = xr[c] * r * w[c];
}

/* With xh = x·r: dx += r·(dy·w - xh·mean(dy·w·xh)). */
static __global__ void rmsnorm_backward_dx_kernel(float *dx, const float *dy, const float *x, const float *w,
                                                  const float *rstd, int C)
{
    size_t row = (size_t)blockIdx.x * C;
    const float *xr = x + row, *dyr = dy + row;
    float *dxr = dx + row;
    float r = rstd[blockIdx.x];
    double dot = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dot += (double)dyr[c] * w[c] * xr[c];
    dot = zt_block_sum(dot);
    float m = (float)(dot * r / C);
    for (int c = threadIdx.x; c < C; c += blockDim.x) dxr[c] += r * (dyr[c] * w[c] - xr[c] * r * m);
}

/* dw = Σ_n dy·xh (internal linkage for the colsum instance) */
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
}

void zt_cuda_rmsnorm_forward(cudaStream_t s, float *y, float *rstd, const float *x, const float *w, int N, int C,
                             double eps)
{
    if (N <= 0 || C <= 0) return;
    rmsnorm_forward_kernel<<<N, RMSNORM_THREADS, 0, s>>>(y, rstd, x, w, C, eps);
    zt_cuda_check("rmsnorm_forward");
}

void zt_cuda_rmsnorm_backward(cudaStream_t s, float *dx, float *dw, const float *dy, const float *x, const float *w,
                              const float *rstd, int N, int C)
{
    if (N <= 0 || C <= 0) return;
    rmsnorm_backward_dx_kernel<<<N, RMSNORM_THREADS, 0, s>>>(dx, dy, x, w, rstd, C);
    zt_colsum(s, dw, rmsnorm_dw_term{dy, x, rstd, C}, N, C);
    zt_cuda_check("rmsnorm_backward");
}
