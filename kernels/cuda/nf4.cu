/* A quantized frozen base's encodings decoded on the GPU: kernels/cpu/nf4.h's dequantization, bitwise.
 * NF4: code[q] · absmax with __fmul_rn; the double-quantized absmax values dyncode[q] · b + μ with __fmul_rn
 * then __fadd_rn (the CPU rounds the product, then the sum: no FMA); int8 rows q · (absmax / 127) with
 * __fdiv_rn and __fmul_rn. One thread per output element in a grid-stride loop; the code tables live in
 * constant memory, copied from the CPU's arrays once (the same bits by construction).
 *
 * Nothing in lib/ calls these yet: the CUDA backend has no quantized base (lora.quantize_base is refused
 * there). They are the dequantizing half of its tiled product, which will multiply each decoded tile with
 * cuBLASLt as zt_qbase_forward does on the CPU; tests/gpu/test_cuda_quant.c checks them against the CPU. */
#include "kernels/cpu/dyn8.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

enum { THREADS = 256 };

__constant__ float nf4_code[16];
__constant__ float dyn8_code[256];

static void load_tables(void)
{
    static int loaded;
    if (loaded) return;
    ZT_CUDA_CHECK(cudaMemcpyToSymbol(nf4_code, zt_nf4_code, sizeof nf4_code));
    ZT_CUDA_CHECK(cudaMemcpyToSymbol(dyn8_code, zt_dyn8_code, sizeof dyn8_code));
    loaded = 1;
}

__global__ static void nf4_dequantize(const uint8_t *q, const float *absmax, size_t first, size_t n, float *y)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
        size_t i = first + j;
        uint8_t byte = q[i / 2];
        y[j] = __fmul_rn(nf4_code[i % 2 ? byte & 0xf : byte >> 4], absmax[i / ZT_NF4_BLOCK]);
    }
}

__global__ static void nf4_dq_dequantize(const uint8_t *q, const float *b, float offset, size_t first, size_t n,
                                         float *a)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
        size_t i = first + j;
        a[j] = __fadd_rn(__fmul_rn(dyn8_code[q[i]], b[i / ZT_NF4_DQ_BLOCK]), offset);
    }
}

__global__ static void int8_rows_dequantize(const int8_t *q, const float *absmax, size_t cols, size_t row0, size_t n,
                                            float *y)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
        size_t r = row0 + j / cols;
        y[j] = __fmul_rn((float)q[r * cols + j % cols], __fdiv_rn(absmax[r], 127.0f));
    }
}

extern "C" void zt_cuda_nf4_dequantize(cudaStream_t s, const uint8_t *q, const float *absmax, size_t first, size_t n,
                                       float *y)
{
    if (!n) return;
    load_tables();
    nf4_dequantize<<<zt_stride_blocks(n, THREADS), THREADS, 0, s>>>(q, absmax, first, n, y);
    zt_cuda_check("nf4_dequantize");
}

extern "C" void zt_cuda_nf4_dq_dequantize(cudaStream_t s, const uint8_t *q, const float *b, float offset, size_t first,
                                          size_t n, float *a)
{
    if (!n) return;
    load_tables();
    nf4_dq_dequantize<<<zt_stride_blocks(n, THREADS), THREADS, 0, s>>>(q, b, offset, first, n, a);
    zt_cuda_check("nf4_dq_dequantize");
}

extern "C" void zt_cuda_int8_rows_dequantize(cudaStream_t s, const int8_t *q, const float *absmax, size_t cols,
                                             size_t row0, size_t nrows, float *y)
{
    size_t n = nrows * cols;
    if (!n) return;
    int8_rows_dequantize<<<zt_stride_blocks(n, THREADS), THREADS, 0, s>>>(q, absmax, cols, row0, n, y);
    zt_cuda_check("int8_rows_dequantize");
}
