/* One block per token row; table holds the vocabulary rows [v0, v0 + nv), and a token outside
 * them is left alone (a tiled embedding). The backward pass adds rows with atomics because ids repeat:
 * the order of additions into a shared table row, and so its rounding, varies run to run. */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define EMBEDDING_THREADS 256

static __global__ void embedding_forward_kernel(float *out, const int32_t *ids, const float *table, int v0, int nv,
                                                int C)
{
    unsigned row = (unsigned)(ids[blockIdx.x] - v0);
    if (row >= (unsigned)nv) return;
    const float *src = table + (size_t)row * C;
    float *dst = out + (size_t)blockIdx.x * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dst[c] = src[c];
}

static __global__ void embedding_backward_kernel(float *dtable, const float *dout, const int32_t *ids, int v0, int nv,
                                                 int C)
{
    unsigned row = (unsigned)(ids[blockIdx.x] - v0);
    if (row >= (unsigned)nv) return;
    float *dst = dtable + (size_t)row * C;
    const float *src = dout + (size_t)blockIdx.x * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(dst + c, src[c]);
}

void zt_cuda_embedding_forward(cudaStream_t s, float *out, const int32_t *ids, const float *table, int v0, int nv,
                               int N, int C)
{
    if (N <= 0 || C <= 0) return;
    embedding_forward_kernel<<<N, EMBEDDING_THREADS, 0, s>>>(out, ids, table, v0, nv, C);
    zt_cuda_check("embedding_forward");
}

void zt_cuda_embedding_backward(cudaStream_t s, float *dtable, const float *dout, const int32_t *ids, int v0, int nv,
                                int N, int C)
{
    if (N <= 0 || C <= 0) return;
    embedding_backward_kernel<<<N, EMBEDDING_THREADS, 0, s>>>(dtable, dout, ids, v0, nv, C);
    zt_cuda_check("embedding_backward");
}
