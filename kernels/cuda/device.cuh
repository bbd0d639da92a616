/* kernels/cuda/device: helpers shared by the .cu files: API error checks (check.h), grid sizes
 * for grid-stride loops, block sums, the bf16 rounding of lib/core/dtype.h and the hash of
 * lib/core/rng.h. */
#ifndef ZT_KERNELS_CUDA_DEVICE_CUH
#define ZT_KERNELS_CUDA_DEVICE_CUH

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#include "kernels/cuda/check.h"

static inline size_t zt_ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* Blocks for a grid-stride loop over n elements: one element per thread up to a cap
 * that fills any GPU many times over; the loop covers the rest. */
static inline unsigned zt_stride_blocks(size_t n, int threads)
{
    size_t b = zt_ceil_div(n, threads);
    return (unsigned)(b < 65536 ? b : 65536);
}

template <class T> __device__ __forceinline__ T zt_warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Σ v over the block, returned to every thread; blockDim.x must be a multiple of 32.
 * The order is fixed, so the result is deterministic. */
template <class T> __device__ T zt_block_sum(T v)
{
    __shared__ T warp_sums[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = zt_warp_sum(v);
    __syncthreads(); /* a previous call's readers are done with warp_sums */
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : T(0);
    return zt_warp_sum(v);
}

/* lib/core/rng.h's zt_mix64 (splitmix64's output function), bit for bit */
__device__ __forceinline__ uint64_t zt_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* zt_f32_to_bf16, bit for bit: quiet NaNs, round to nearest even on the integer bits. */
__device__ __forceinline__ uint16_t zt_bf16_round(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#endif
