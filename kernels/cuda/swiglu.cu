/* One block per token row of gateup = [gate (F) | up (F)]. expf is the accurate libdevice
 * exp; the CPU's polynomial agrees with it to a few ulp. */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define SWIGLU_THREADS 256

/* h16 and dgateup16, where not NULL, get the outputs rounded to bf16 too */
static __global__ void swiglu_forward_kernel(float *h, uint16_t *h16, const float *gateup, int F)
{
    const float *g = gateup + (size_t)blockIdx.x * 2 * F, *u = g + F;
    size_t row = (size_t)blockIdx.x * F;
    for (int i = threadIdx.x; i < F; i += blockDim.x) {
        float v = g[i] / (1 + expf(-g[i])) * u[i];
        h[row + i] = v;
        if (h16) h16[row + i] = zt_bf16_round(v);
    }
}

/* silu(g) = g·s with s = sigmoid(g); silu'(g) = s·(1 + g·(1 - s)) */
static __global__ void swiglu_backward_kernel(float *dgateup, uint16_t *dgateup16, const float *dh,
                                              const float *gateup, int F)
{
    const float *g = gateup + (size_t)blockIdx.x * 2 * F, *u = g + F, *d = dh + (size_t)blockIdx.x * F;
    size_t row = (size_t)blockIdx.x * 2 * F;
    for (int i = threadIdx.x; i < F; i += blockDim.x) {
        float s = 1 / (1 + expf(-g[i]));
        float du = d[i] * g[i] * s, dg = d[i] * u[i] * s * (1 + g[i] * (1 - s));
        dgateup[row + F + i] = du, dgateup[row + i] = dg;
        if (dgateup16) dgateup16[row + F + i] = zt_bf16_round(du), dgateup16[row + i] = zt_bf16_round(dg);
    }
}

void zt_cuda_swiglu_forward(cudaStream_t s, float *h, uint16_t *h16, const float *gateup, int N, int F)
{
    if (N <= 0 || F <= 0) return;
    swiglu_forward_kernel<<<N, SWIGLU_THREADS, 0, s>>>(h, h16, gateup, F);
    zt_cuda_check("swiglu_forward");
}

void zt_cuda_swiglu_backward(cudaStream_t s, float *dgateup, uint16_t *dgateup16, const float *dh, const float *gateup,
                             int N, int F)
{
    if (N <= 0 || F <= 0) return;
    swiglu_backward_kernel<<<N, SWIGLU_THREADS, 0, s>>>(dgateup, dgateup16, dh, gateup, F);
    zt_cuda_check("swiglu_backward");
}
