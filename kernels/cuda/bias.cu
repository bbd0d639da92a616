#include "kernels/cuda/colsum.cuh"
#include "kernels/cuda/ops.h"

#define BIAS_THREADS 256

/* One block per row. */
static __global__ void bias_forward_kernel(float *y, const float *b, int M)
{
    float *row = y + (size_t)blockIdx.x * M;
    for (int m = threadIdx.x; m < M; m += blockDim.x) row[m] += b[m];
}

namespace { /* internal linkage for the colsum instance */
struct bias_grad_term {
    const float *dy;
    int M;
    __device__ float operator()(int n, int m) const { return dy[(size_t)n * M + m]; }
};
}

void zt_cuda_bias_forward(cudaStream_t s, float *y, const float *b, int N, int M)
{
    if (N <= 0 || M <= 0) return;
    bias_forward_kernel<<<N, BIAS_THREADS, 0, s>>>(y, b, M);
    zt_cuda_check("bias_forward");
}

void zt_cuda_bias_backward(cudaStream_t s, float *db, const float *dy, int N, int M)
{
    zt_colsum(s, db, bias_grad_term{dy, M}, N, M);
    zt_cuda_check("bias_backward");
}
