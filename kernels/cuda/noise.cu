/* zt_cpu_add_uniform_noise's twin: the same counter-based draws (lib/core/rng.h's
 * zt_hash_uniform_pm1), the product and the sum rounded each as the CPU build rounds them. */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define NOISE_THREADS 256

static __global__ void add_uniform_noise_kernel(float *x, size_t n, uint64_t key, float magnitude)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = __fsub_rn(__fmul_rn((float)(zt_mix64(key + i) >> 40), 0x1p-23f), 1.0f);
        x[i] = __fadd_rn(x[i], __fmul_rn(magnitude, u));
    }
}

void zt_cuda_add_uniform_noise(cudaStream_t s, float *x, size_t n, uint64_t key, float magnitude)
{
    if (!n) return;
    add_uniform_noise_kernel<<<zt_stride_blocks(n, NOISE_THREADS), NOISE_THREADS, 0, s>>>(x, n, key, magnitude);
    zt_cuda_check("add_uniform_noise");
}
