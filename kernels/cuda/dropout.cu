/* zt_cpu_dropout's twin: the same counter-based mask (lib/core/rng.h's zt_mix64 of key + i), the
 * product and the sum rounded each as the CPU build rounds them. */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define DROPOUT_THREADS 256

static __global__ void dropout_kernel(float *dst, const float *src, size_t n, uint64_t key, uint64_t drop_below,
                                      float keep_scale, int accumulate)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = (zt_mix64(key + i) >> 11) < drop_below ? 0.0f : __fmul_rn(src[i], keep_scale);
        dst[i] = accumulate ? __fadd_rn(dst[i], v) : v;
    }
}

void zt_cuda_dropout(cudaStream_t s, float *dst, const float *src, size_t n, uint64_t key, uint64_t drop_below,
                     float keep_scale, int accumulate)
{
    if (!n) return;
    dropout_kernel<<<zt_stride_blocks(n, DROPOUT_THREADS), DROPOUT_THREADS, 0, s>>>(dst, src, n, key, drop_below,
                                                                                    keep_scale, accumulate);
    zt_cuda_check("dropout");
}
