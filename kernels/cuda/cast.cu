#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

static __global__ void to_bf16_kernel(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = zt_bf16_round(src[i]);
}

void zt_cuda_to_bf16(cudaStream_t s, uint16_t *dst, const float *src, size_t n)
{
    if (n == 0) return;
    to_bf16_kernel<<<zt_stride_blocks(n, 256), 256, 0, s>>>(dst, src, n);
    zt_cuda_check("to_bf16");
}
