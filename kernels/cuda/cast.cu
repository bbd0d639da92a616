/* fp32 to bf16, rounded as zt_f32_to_bf16. Where src is 16-byte and dst 8-byte aligned (whole
 * arrays always are: cudaMalloc and the granule-mapped arrays), four elements a thread step:
 * one 16-byte load and one 8-byte store instead of four and four. */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

static __global__ void to_bf16_kernel(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = zt_bf16_round(src[i]);
}

static __global__ void to_bf16_x4_kernel(uint2 *dst, const float4 *src, size_t n4)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 f = src[i];
        uint2 o;
        o.x = zt_bf16_round(f.x) | (uint32_t)zt_bf16_round(f.y) << 16;
        o.y = zt_bf16_round(f.z) | (uint32_t)zt_bf16_round(f.w) << 16;
        dst[i] = o;
    }
}

void zt_cuda_to_bf16(cudaStream_t s, uint16_t *dst, const float *src, size_t n)
{
    if (n == 0) return;
    size_t n4 = (uintptr_t)src % 16 == 0 && (uintptr_t)dst % 8 == 0 ? n / 4 : 0, done = 4 * n4;
    if (n4) to_bf16_x4_kernel<<<zt_stride_blocks(n4, 256), 256, 0, s>>>((uint2 *)dst, (const float4 *)src, n4);
    if (done < n) to_bf16_kernel<<<zt_stride_blocks(n - done, 256), 256, 0, s>>>(dst + done, src + done, n - done);
    zt_cuda_check("to_bf16");
}
