/* One block per token row of gateup = [gate (F) | up (F)]. expf is the accurate libdevice
 * exp; the CPU's polynomial agrees with it to a few ulp. */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define SWIGLU_THREADS 256

static __global__ void swiglu_forward_kernel(float *h, const float *gateup, int F)
{
    const float *g = gateup + (size_t)blockIdx.x * 2 * F, *u = g + F;
    float *hr = h + (size_t)blockIdx.x * F;
    for (int i = threadIdx.x; i < F; i += blockDim.x) hr[i] = g[i] / (1 + expf(-g[i])) * u[i];
}

/* silu(g) = g·s with s = sigmoid(g); silu'(g) = s·(1 + g·(1 - s)) */
static __global__ void swiglu_backward_kernel(float *dgateup, const float *dh, const float *gateup, int F)
{
    const float *g = gateup + (size_t)blockIdx.x * 2 * F, *u = g + F, *d = dh + (size_t)blockIdx.x * F;
    float *dg = dgateup + (size_t)blockIdx.x * 2 * F, *du = dg + F;
    for (int i = threadIdx.x; i < F; i += blockDim.x) {
        float s = 1 / (1 + expf(-g[i]));
        du[i] = d[i] * g[i] * s;
        dg[i] = d[i] * u[i] * s * (1 + g[i] * (1 - s));
    }
}

void zt_cuda_swiglu_forward(cudaStream_t s, float *h, const float *gateup, int N, int F)
{
    if (N <= 0 || F <= 0) return;
    swiglu_forward_kernel<<<N, SWIGLU_THREADS, 0, s>>>(h, gateup, F);
    zt_cuda_check("swiglu_forward");
}

void zt_cuda_swiglu_backward(cudaStream_t s, float *dgateup, const float *dh, const float *gateup, int N, int F)
{
    if (N <= 0 || F <= 0) return;
    swiglu_backward_kernel<<<N, SWIGLU_THREADS, 0, s>>>(dgateup, dh, gateup, F);
    zt_cuda_check("swiglu_backward");
}
