/* ZeRO++ block quantization on the GPU: kernels/cpu/quant.h's arithmetic, bitwise.
 *
 * Nothing in lib/ calls these yet: ZeRO++ quantizes on the host today (lib/zero/zeropp.c). They are
 * built and tested (tests/gpu/test_cuda_quant.c) for the collectives on device memory (NCCL) to use.
 *
 * The same IEEE operations as the CPU kernels, spelled out so nvcc cannot change them: s = absmax / qmax and
 * x / s with __fdiv_rn, round half to even with __float2int_rn (the CPU's magic-number trick gives the same
 * integer for |x / s| < 2^22, which always holds), (float)q * s with __fmul_rn, sums with __fadd_rn (no FMA).
 * Subnormal scales need denormals kept: this file must not be built with -ftz=true or --use_fast_math.
 * NaN payloads are not part of the contract: the GPU's arithmetic returns its canonical NaN where x86 keeps
 * the operand's, so a NaN scale dequantizes to a NaN of other bits than on the CPU.
 *
 * One warp per quantization block finds the absmax (integer max of |x| bits, so NaN and Inf need no special
 * case) and writes the scale; int8 writes its q in the same pass. int4 packs in a second pass with one thread
 * per output byte: two neighbouring elements share a byte, and with an odd block size a byte holds elements
 * of two blocks, so a byte must have a single writer that looks up the scale of each of its elements. */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define ABS_MASK 0x7fffffffu
#define MAX_FINITE 0x7f7fffffu /* |x| bits above this: ±Inf or NaN */
#define SCALE_NAN 0x7fc00000u  /* the CPU's NAN: the scale of a block with a NaN or Inf input */

enum { QMAX8 = 127, QMAX4 = 7 };
enum { THREADS = 256 };

static size_t nblocks(size_t n, size_t block)
{
    if (block == 0) {
        fprintf(stderr, "zt: quantization block size 0\n");
        abort();
    }
    return n / block + (n % block != 0);
}

/* --- device helpers ------------------------------------------------------------------------------------- */

/* clamp(round-half-even(x / s), -qmax, qmax) for a block scale s > 0 and finite x */
__device__ static int quant_one(float x, float s, int qmax)
{
    int q = __float2int_rn(__fdiv_rn(x, s));
    return max(-qmax, min(q, qmax));
}

/* element i of packed int4 data, sign-extended */
__device__ static int nibble_at(const uint8_t *q, size_t i)
{
    int v = (q[i >> 1] >> (4 * (i & 1))) & 0xf;
    return (v ^ 8) - 8;
}

/* the int4 nibble of element i (0 in a block whose scale is 0 or NaN) */
__device__ static unsigned quant4_nibble(const float *x, const float *scales, size_t block, size_t i)
{
    float s = scales[i / block];
    return s > 0 ? (unsigned)quant_one(x[i], s, QMAX4) & 0xfu : 0u;
}

__device__ static float dequant4_one(const uint8_t *q, const float *scales, size_t block, size_t i)
{
    return __fmul_rn((float)nibble_at(q, i), scales[i / block]);
}

/* The scale of block [lo, lo + len), computed by a whole warp (every lane gets it); lane 0 adds the block's
 * NaN/Inf inputs to *nonfinite. */
__device__ static float warp_block_scale(const float *x, size_t lo, size_t len, int qmax,
                                         unsigned long long *nonfinite)
{
    unsigned lane = threadIdx.x & 31u, m = 0;
    unsigned long long bad = 0;
    for (size_t i = lane; i < len; i += 32) {
        unsigned a = __float_as_uint(x[lo + i]) & ABS_MASK;
        m = max(m, a);
        bad += a > MAX_FINITE;
    }
    for (int d = 16; d; d >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, d));
    if (m > MAX_FINITE) { /* m is the same in every lane: the whole warp takes this branch */
        bad = zt_warp_sum(bad);
        if (lane == 0) atomicAdd(nonfinite, bad);
        return __uint_as_float(SCALE_NAN);
    }
    return __fdiv_rn(__uint_as_float(m), (float)qmax);
}

/* --- kernels -------------------------------------------------------------------------------------------- */

/* One warp per block: scales[b], and for int8 (q8 not null) the block's q. */
__global__ static void block_scales_kernel(const float *x, size_t n, size_t block, size_t nb, int qmax,
                                           float *scales, int8_t *q8, unsigned long long *nonfinite)
{
    size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32, nwarps = (size_t)gridDim.x * blockDim.x / 32;
    unsigned lane = threadIdx.x & 31u;
    for (size_t b = warp; b < nb; b += nwarps) {
        size_t lo = b * block, len = n - lo < block ? n - lo : block;
        float s = warp_block_scale(x, lo, len, qmax, nonfinite);
        if (lane == 0) scales[b] = s;
        if (!q8) continue;
        int live = s > 0; /* not 0 (all zero, or underflowed) and not NaN */
        for (size_t i = lane; i < len; i += 32) q8[lo + i] = (int8_t)(live ? quant_one(x[lo + i], s, qmax) : 0);
    }
}

/* One thread per byte of q: elements 2j (low nibble) and 2j + 1 (high nibble, 0 past the end). */
__global__ static void pack4_kernel(const float *x, size_t n, size_t block, const float *scales, uint8_t *q)
{
    size_t nbytes = (n + 1) / 2, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < nbytes; j += stride) {
        unsigned v = quant4_nibble(x, scales, block, 2 * j);
        if (2 * j + 1 < n) v |= quant4_nibble(x, scales, block, 2 * j + 1) << 4;
        q[j] = (uint8_t)v;
    }
}

__global__ static void dequant8_kernel(const int8_t *q, const float *scales, size_t n, size_t block, float *y)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = __fmul_rn((float)q[i], scales[i / block]);
}

__global__ static void dequant4_kernel(const uint8_t *q, const float *scales, size_t n, size_t block, float *y)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = dequant4_one(q, scales, block, i);
}

/* per element: ((y + d0) + d1) + ... when accumulating, else (d0 + d1) + ...; k >= 1 */
__global__ static void dequant4_sum_kernel(const uint8_t *const *q, const float *const *scales, int k, size_t n,
                                           size_t block, float *y, int accumulate)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float sum = accumulate ? y[i] : dequant4_one(q[0], scales[0], block, i);
        for (int j = accumulate ? 0 : 1; j < k; j++) sum = __fadd_rn(sum, dequant4_one(q[j], scales[j], block, i));
        y[i] = sum;
    }
}

/* --- launchers ------------------------------------------------------------------------------------------ */

/* The scale pass (with q for int8) on a fresh non-finite counter; returns the counter. */
static unsigned long long *launch_scales(cudaStream_t s, const float *x, size_t n, size_t block, int qmax,
                                         float *scales, int8_t *q8, const char *what)
{
    size_t nb = nblocks(n, block);
    unsigned long long *bad;
    ZT_CUDA_CHECK(cudaMallocAsync((void **)&bad, sizeof *bad, s));
    ZT_CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof *bad, s));
    block_scales_kernel<<<zt_stride_blocks(nb * 32, THREADS), THREADS, 0, s>>>(x, n, block, nb, qmax, scales, q8, bad);
    zt_cuda_check(what);
    return bad;
}

/* Waits for the stream and returns the counter's value; frees it. */
static size_t read_count(cudaStream_t s, unsigned long long *bad, const char *what)
{
    unsigned long long count = 0;
    ZT_CUDA_CHECK(cudaMemcpyAsync(&count, bad, sizeof count, cudaMemcpyDeviceToHost, s));
    ZT_CUDA_CHECK(cudaFreeAsync(bad, s));
    ZT_CUDA_CHECK(cudaStreamSynchronize(s));
    return (size_t)count;
}

size_t zt_cuda_quant8(cudaStream_t s, const float *x, size_t n, size_t block, int8_t *q, float *scales)
{
    if (nblocks(n, block) == 0) return 0;
    return read_count(s, launch_scales(s, x, n, block, QMAX8, scales, q, "quant8"), "quant8");
}

size_t zt_cuda_quant4(cudaStream_t s, const float *x, size_t n, size_t block, uint8_t *q, float *scales)
{
    if (nblocks(n, block) == 0) return 0;
    unsigned long long *bad = launch_scales(s, x, n, block, QMAX4, scales, NULL, "quant4");
    pack4_kernel<<<zt_stride_blocks((n + 1) / 2, THREADS), THREADS, 0, s>>>(x, n, block, scales, q);
    zt_cuda_check("quant4");
    return read_count(s, bad, "quant4");
}

void zt_cuda_dequant8(cudaStream_t s, const int8_t *q, const float *scales, size_t n, size_t block, float *y)
{
    if (nblocks(n, block) == 0) return;
    dequant8_kernel<<<zt_stride_blocks(n, THREADS), THREADS, 0, s>>>(q, scales, n, block, y);
    zt_cuda_check("dequant8");
}

void zt_cuda_dequant4(cudaStream_t s, const uint8_t *q, const float *scales, size_t n, size_t block, float *y)
{
    if (nblocks(n, block) == 0) return;
    dequant4_kernel<<<zt_stride_blocks(n, THREADS), THREADS, 0, s>>>(q, scales, n, block, y);
    zt_cuda_check("dequant4");
}

void zt_cuda_dequant4_sum(cudaStream_t s, const uint8_t *const *q, const float *const *scales, int k, size_t n,
                          size_t block, float *y, int accumulate)
{
    if (k < 0) {
        fprintf(stderr, "zt: dequant4_sum with k = %d\n", k);
        abort();
    }
    if (nblocks(n, block) == 0) return;
    if (k == 0) { /* as the CPU: y unchanged, or y = 0 */
        if (!accumulate) ZT_CUDA_CHECK(cudaMemsetAsync(y, 0, n * sizeof *y, s));
        return;
    }
    dequant4_sum_kernel<<<zt_stride_blocks(n, THREADS), THREADS, 0, s>>>(q, scales, k, n, block, y, accumulate);
    zt_cuda_check("dequant4_sum");
}
