/* GeGLU (one block per token row of gateup = [gate (F) | up (F)]) in kernels/cpu/geglu.c's
 * steps, and the elementwise soft-capping, scaling and sum (grid-stride loops). tanhf is libdevice's
 * accurate tanh. */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define GEGLU_THREADS 256

#define GELU_BETA 0.7978845608028654f /* sqrt(2/π) */
#define GELU_KAPPA 0.044715f
#define SQRT_HALF 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f

/* gelu(x) and gelu'(x): exact, ½x(1 + erf(x/√2)) and ½(1 + erf(x/√2)) + x·φ(x); else the tanh
 * form, ½x(1 + t) and ½(1 + t) + ½x·(1 - t²)·β·(1 + 3κx²), t = tanh(β(x + κx³)) */
static __device__ float gelu(float x, int exact)
{
    if (exact) return 0.5f * x * (1 + erff(x * SQRT_HALF));
    return 0.5f * x * (1 + tanhf(GELU_BETA * (x + GELU_KAPPA * (x * x * x))));
}

static __device__ float gelu_slope(float x, int exact)
{
    float x2 = x * x;
    if (exact) return 0.5f * (1 + erff(x * SQRT_HALF)) + x * INV_SQRT_2PI * expf(-0.5f * x2);
    float t = tanhf(GELU_BETA * (x + GELU_KAPPA * x2 * x));
    return 0.5f * (1 + t) + 0.5f * x * (1 - t * t) * GELU_BETA * (1 + 3 * GELU_KAPPA * x2);
}

/* h16 and dgateup16, where not NULL, get the outputs rounded to bf16 too */
static __global__ void geglu_forward_kernel(float *h, uint16_t *h16, const float *gateup, int F, int exact)
{
    const float *g = gateup + (size_t)blockIdx.x * 2 * F, *u = g + F;
    size_t row = (size_t)blockIdx.x * F;
    for (int i = threadIdx.x; i < F; i += blockDim.x) {
        float v = gelu(g[i], exact) * u[i];
        h[row + i] = v;
        if (h16) h16[row + i] = zt_bf16_round(v);
    }
}

static __global__ void geglu_backward_kernel(float *dgateup, uint16_t *dgateup16, const float *dh,
                                             const float *gateup, int F, int exact)
{
    const float *g = gateup + (size_t)blockIdx.x * 2 * F, *u = g + F, *d = dh + (size_t)blockIdx.x * F;
    size_t row = (size_t)blockIdx.x * 2 * F;
    for (int i = threadIdx.x; i < F; i += blockDim.x) {
        float du = d[i] * gelu(g[i], exact), dg = d[i] * u[i] * gelu_slope(g[i], exact);
        dgateup[row + F + i] = du, dgateup[row + i] = dg;
        if (dgateup16) dgateup16[row + F + i] = zt_bf16_round(du), dgateup16[row + i] = zt_bf16_round(dg);
    }
}

static __global__ void softcap_forward_kernel(float *x, size_t n, float cap)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = tanhf(x[i] / cap) * cap;
}

static __global__ void softcap_backward_kernel(float *dx, const float *y, size_t n, float cap)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float t = y[i] / cap;
        dx[i] *= 1 - t * t;
    }
}

static __global__ void scale_kernel(float *x, size_t n, float alpha)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] *= alpha;
}

static __global__ void add_kernel(float *y, const float *x, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

void zt_cuda_geglu_forward(cudaStream_t s, float *h, uint16_t *h16, const float *gateup, int N, int F, int exact)
{
    if (N <= 0 || F <= 0) return;
    geglu_forward_kernel<<<N, GEGLU_THREADS, 0, s>>>(h, h16, gateup, F, exact);
    zt_cuda_check("geglu_forward");
}

void zt_cuda_geglu_backward(cudaStream_t s, float *dgateup, uint16_t *dgateup16, const float *dh, const float *gateup,
                            int N, int F, int exact)
{
    if (N <= 0 || F <= 0) return;
    geglu_backward_kernel<<<N, GEGLU_THREADS, 0, s>>>(dgateup, dgateup16, dh, gateup, F, exact);
    zt_cuda_check("geglu_backward");
}

void zt_cuda_softcap_forward(cudaStream_t s, float *x, size_t n, double cap)
{
    if (!n) return;
    softcap_forward_kernel<<<zt_stride_blocks(n, GEGLU_THREADS), GEGLU_THREADS, 0, s>>>(x, n, (float)cap);
    zt_cuda_check("softcap_forward");
}

void zt_cuda_softcap_backward(cudaStream_t s, float *dx, const float *y, size_t n, double cap)
{
    if (!n) return;
    softcap_backward_kernel<<<zt_stride_blocks(n, GEGLU_THREADS), GEGLU_THREADS, 0, s>>>(dx, y, n, (float)cap);
    zt_cuda_check("softcap_backward");
}

void zt_cuda_scale(cudaStream_t s, float *x, size_t n, float alpha)
{
    if (!n) return;
    scale_kernel<<<zt_stride_blocks(n, GEGLU_THREADS), GEGLU_THREADS, 0, s>>>(x, n, alpha);
    zt_cuda_check("scale");
}

void zt_cuda_add(cudaStream_t s, float *y, const float *x, size_t n)
{
    if (!n) return;
    add_kernel<<<zt_stride_blocks(n, GEGLU_THREADS), GEGLU_THREADS, 0, s>>>(y, x, n);
    zt_cuda_check("add");
}
