/* The AdamW update of lib/optim/adamw.c, bit for bit (adamw.cuh), and the sum of squares for
 * gradient clipping. */
#include "kernels/cuda/adamw.cuh"
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define ADAMW_THREADS 256
#define SUMSQ_THREADS 256
#define SUMSQ_BLOCKS 1024 /* partial sums, added by one block in a fixed order */

static __global__ void adamw_kernel(zt_adamw_consts c, float *param, const float *grad, float *m, float *v, size_t n,
                                    uint16_t *param_bf16)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float p = zt_adamw_element(c, param[i], grad[i], &m[i], &v[i]);
        param[i] = p;
        if (param_bf16) param_bf16[i] = zt_bf16_round(p);
    }
}

/* c is host memory (the constants of zt_adamw_consts_of); they travel as a kernel argument. */
void zt_cuda_adamw(cudaStream_t s, const zt_adamw_consts *c, float *param, const float *grad, float *m, float *v,
                   size_t n, uint16_t *param_bf16)
{
    if (n == 0) return;
    adamw_kernel<<<zt_stride_blocks(n, ADAMW_THREADS), ADAMW_THREADS, 0, s>>>(*c, param, grad, m, v, n, param_bf16);
    zt_cuda_check("adamw");
}

static __global__ void sumsq_partial_kernel(double *partials, const float *x, size_t n)
{
    double acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc += (double)x[i] * x[i];
    acc = zt_block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

static __global__ void sumsq_finish_kernel(double *total, const double *partials, int nblocks)
{
    double acc = 0;
    for (int b = threadIdx.x; b < nblocks; b += blockDim.x) acc += partials[b];
    acc = zt_block_sum(acc);
    if (threadIdx.x == 0) *total = acc;
}

/* Deterministic: fixed partial blocks for a given n, summed in a fixed order. */
double zt_cuda_sumsq(cudaStream_t s, const float *x, size_t n)
{
    if (n == 0) return 0;
    size_t b = zt_ceil_div(n, SUMSQ_THREADS);
    int nblocks = (int)(b < SUMSQ_BLOCKS ? b : SUMSQ_BLOCKS);
    double *scratch, total;
    ZT_CUDA_CHECK(cudaMallocAsync((void **)&scratch, sizeof(double) * (nblocks + 1), s));
    sumsq_partial_kernel<<<nblocks, SUMSQ_THREADS, 0, s>>>(scratch + 1, x, n);
    sumsq_finish_kernel<<<1, SUMSQ_THREADS, 0, s>>>(scratch, scratch + 1, nblocks);
    zt_cuda_check("sumsq");
    ZT_CUDA_CHECK(cudaMemcpyAsync(&total, scratch, sizeof total, cudaMemcpyDeviceToHost, s));
    ZT_CUDA_CHECK(cudaFreeAsync(scratch, s));
    ZT_CUDA_CHECK(cudaStreamSynchronize(s));
    return total;
}
