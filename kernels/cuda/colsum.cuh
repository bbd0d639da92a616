/* kernels/cuda/colsum: out[c] += Σ_n term(n, c) over the rows of an [N, C] operand, for
 * the parameter gradients that sum over tokens (bias, RMSNorm weight). Deterministic: a
 * block owns 32 columns and a fixed slice of rows; when the rows are split over several
 * blocks (to fill the GPU), their partial sums go to a stream-ordered scratch buffer and
 * a second kernel adds them in split order. term is a functor: float operator()(int n, int c). */
#ifndef ZT_KERNELS_CUDA_COLSUM_CUH
#define ZT_KERNELS_CUDA_COLSUM_CUH

#include "kernels/cuda/device.cuh"

#define COLSUM_ROWS 8       /* threadIdx.y: rows read together, 32 columns each */
#define COLSUM_BLOCKS 1024  /* aim: several blocks per SM */
#define COLSUM_MIN_ROWS 256 /* rows per split at least, so that partials stay cheap */

/* dst[split, c] = Σ over this split's rows (or += when accumulate, with one split). */
template <class Term>
__global__ void zt_colsum_kernel(float *dst, Term term, int N, int C, int rows_per_split, int accumulate)
{
    __shared__ float part[COLSUM_ROWS][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    int n0 = blockIdx.y * rows_per_split, n1 = min(N, n0 + rows_per_split);
    float acc = 0;
    if (c < C)
        for (int n = n0 + threadIdx.y; n < n1; n += COLSUM_ROWS) acc += term(n, c);
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
    float sum = 0;
    for (int r = 0; r < COLSUM_ROWS; r++) sum += part[r][threadIdx.x];
    float *d = dst + (size_t)blockIdx.y * C + c;
    *d = accumulate ? *d + sum : sum;
}

static __global__ void zt_colsum_finish_kernel(float *out, const float *partials, int splits, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sum = 0;
    for (int k = 0; k < splits; k++) sum += partials[(size_t)k * C + c];
    out[c] += sum;
}

/* Enqueues the sum on s; the caller checks the launches with zt_cuda_check. */
template <class Term> static void zt_colsum(cudaStream_t s, float *out, Term term, int N, int C)
{
    if (N <= 0 || C <= 0) return;
    int tiles = (int)zt_ceil_div(C, 32);
    int splits = (int)zt_ceil_div(COLSUM_BLOCKS, tiles), max_splits = (int)zt_ceil_div(N, COLSUM_MIN_ROWS);
    if (splits > max_splits) splits = max_splits;
    int rows = (int)zt_ceil_div(N, splits);
    splits = (int)zt_ceil_div(N, rows); /* no empty split */
    dim3 grid(tiles, splits), block(32, COLSUM_ROWS);
    if (splits == 1) {
        zt_colsum_kernel<<<grid, block, 0, s>>>(out, term, N, C, rows, 1);
        return;
    }
    float *partials;
    ZT_CUDA_CHECK(cudaMallocAsync((void **)&partials, sizeof(float) * splits * C, s));
    zt_colsum_kernel<<<grid, block, 0, s>>>(partials, term, N, C, rows, 0);
    zt_colsum_finish_kernel<<<(unsigned)zt_ceil_div(C, 256), 256, 0, s>>>(out, partials, splits, C);
    ZT_CUDA_CHECK(cudaFreeAsync(partials, s));
}

#endif
