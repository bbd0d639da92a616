/* zt_cpu_row_norms', zt_cpu_dora_forward's and zt_cpu_dora_backward's twins (kernels/cpu/dora.c):
 * the same operations, each product and sum rounded as the CPU build rounds them; the row norms'
 * double sums in another order (a block's threads, then their partial sums). */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define DORA_THREADS 256

static __global__ void row_norms_kernel(float *norm, const float *x, int cols)
{
    __shared__ double part[DORA_THREADS];
    const float *row = x + (size_t)blockIdx.x * cols;
    double sum = 0;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) sum += (double)row[i] * row[i];
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    if (!threadIdx.x) norm[blockIdx.x] = (float)sqrt(part[0]);
}

static __global__ void dora_forward_kernel(float *y, int ldy, const float *v, const float *bu, const float *M,
                                           const float *norm, int N, int out)
{
    size_t total = (size_t)N * out;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(k / out), j = (int)(k % out);
        float g = __fdiv_rn(M[j], norm[j]);
        float add = __fadd_rn(__fmul_rn(__fsub_rn(g, 1.0f), v[k]), __fmul_rn(g, bu[k]));
        y[(size_t)n * ldy + j] = __fadd_rn(y[(size_t)n * ldy + j], add);
    }
}

static __global__ void dora_magnitude_grad_kernel(float *gM, const float *dy, int ldy, const float *t,
                                                  const float *norm, int N, int out)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= out) return;
    float sum = 0;
    for (int n = 0; n < N; n++) sum = __fadd_rn(sum, __fmul_rn(dy[(size_t)n * ldy + j], t[(size_t)n * out + j]));
    gM[j] = __fadd_rn(gM[j], __fdiv_rn(sum, norm[j]));
}

static __global__ void dora_dy_kernel(float *de, float *dv, const float *dy, int ldy, const float *M,
                                      const float *norm, int N, int out)
{
    size_t total = (size_t)N * out;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(k / out), j = (int)(k % out);
        float g = __fdiv_rn(M[j], norm[j]), d = dy[(size_t)n * ldy + j];
        de[k] = __fmul_rn(g, d);
        dv[k] = __fmul_rn(__fsub_rn(g, 1.0f), d);
    }
}

void zt_cuda_row_norms(cudaStream_t s, float *norm, const float *x, int rows, int cols)
{
    if (rows <= 0) return;
    row_norms_kernel<<<rows, DORA_THREADS, 0, s>>>(norm, x, cols);
    zt_cuda_check("row_norms");
}

void zt_cuda_dora_forward(cudaStream_t s, float *y, int ldy, const float *v, const float *bu, const float *M,
                          const float *norm, int N, int out)
{
    size_t total = (size_t)N * out;
    if (!total) return;
    dora_forward_kernel<<<zt_stride_blocks(total, DORA_THREADS), DORA_THREADS, 0, s>>>(y, ldy, v, bu, M, norm, N, out);
    zt_cuda_check("dora_forward");
}

void zt_cuda_dora_backward(cudaStream_t s, float *gM, float *de, float *dv, const float *dy, int ldy, const float *t,
                           const float *M, const float *norm, int N, int out)
{
    size_t total = (size_t)N * out;
    if (!total) return;
    dora_magnitude_grad_kernel<<<(out + DORA_THREADS - 1) / DORA_THREADS, DORA_THREADS, 0, s>>>(gM, dy, ldy, t, norm,
                                                                                                N, out);
    dora_dy_kernel<<<zt_stride_blocks(total, DORA_THREADS), DORA_THREADS, 0, s>>>(de, dv, dy, ldy, M, norm, N, out);
    zt_cuda_check("dora_backward");
}
