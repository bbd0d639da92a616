/* One block per token row; threads walk the (head, pair) elements of the row. */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define ROPE_THREADS 256

/* pair j of a head: (j, j + R/2), or interleaved (2j, 2j + 1) */
static __global__ void rope_kernel(float *x, int stride, int nheads, int D, int R, int interleaved, const int32_t *pos,
                                   const float *cos_t, const float *sin_t, int inverse)
{
    int half = R / 2;
    const float *c = cos_t + (size_t)pos[blockIdx.x] * half, *s = sin_t + (size_t)pos[blockIdx.x] * half;
    float *row = x + (size_t)blockIdx.x * stride;
    for (int i = threadIdx.x; i < nheads * half; i += blockDim.x) {
        int h = i / half, j = i - h * half;
        float *a = row + (size_t)h * D + (interleaved ? 2 * j : j), *b = a + (interleaved ? 1 : half);
        float sn = inverse ? -s[j] : s[j];
        float a0 = *a, b0 = *b;
        *a = a0 * c[j] - b0 * sn;
        *b = b0 * c[j] + a0 * sn;
    }
}

void zt_cuda_rope(cudaStream_t s, float *x, int N, int stride, int nheads, int D, int R, int interleaved,
                  const int32_t *pos, const float *cos_t, const float *sin_t, int inverse)
{
    if (N <= 0 || nheads <= 0 || R < 2) return;
    rope_kernel<<<N, ROPE_THREADS, 0, s>>>(x, stride, nheads, D, R, interleaved, pos, cos_t, sin_t, inverse);
    zt_cuda_check("rope");
}
