/* kernels/cpu/gemm_bf16: bf16 x bf16 -> fp32 matrix products (row-major), and fp32 -> bf16 arrays.
 *
 * C[M,N] = alpha * op(A) · op(B) + beta * C, with op(A) [M,K] (A stored [M,K], or [K,M] when
 * transa) and op(B) [K,N] (B stored [K,N], or [N,K] when transb). Inputs are bf16 bit patterns,
 * products are summed in fp32. beta == 0 never reads C (it may hold NaN). The three uses of a
 * linear layer Y = X·Wᵀ (X [M,K], W [N,K]):
 *
 *     zt_gemm_bf16(0, 1, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N);   // forward  Y = X·Wᵀ
 *     zt_gemm_bf16(0, 0, M, K, N, 1.0f, dy, N, w, K, 0.0f, dx, K); // input grad dX = dY·W
 *     zt_gemm_bf16(1, 0, N, K, M, 1.0f, dy, N, x, K, 1.0f, dw, K); // weight grad dW += dYᵀ·X
 *
 *     zt_f32_to_bf16_array(xb, x, n);   // what zt_f32_to_bf16 does, element by element
 *
 * Runs on the OpenMP threads of the caller (one thread when called inside a parallel region).
 * The result is bitwise the same for any thread count: each output element sums K in a fixed
 * order that depends only on K and on the CPU path (AVX-512 BF16, AVX2, or scalar; ZT_CPU caps it).
 * The scalar path sums k = 0, 1, .. K-1 into one fp32, as the plain loops of zt_gemm_bf16_ref do.
 * Large products go to oneDNN's matmul where zt is built with it (its kernels use AMX where the
 * CPU has it), in blocks whose summation order depends on the shape alone; ZT_DNNL=0 turns it off.
 * Without transa, a row of C depends on its row of A, B and K alone, not on M (the choice of
 * kernel and the blocks do not look at M), so a token's values are the same in any micro-batch.
 */
#ifndef ZT_KERNELS_CPU_GEMM_BF16_H
#define ZT_KERNELS_CPU_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

void zt_gemm_bf16(int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                  const uint16_t *B, int ldb, float beta, float *C, int ldc);

/* What runs the large products, for zt env and run.json: "oneDNN 2.6.3 brg:avx512_core_bf16"
 * (oneDNN's version and kernel), or "zt avx512-bf16" (zt's own kernels at the level in use). */
const char *zt_gemm_bf16_name(void);

/* Round to nearest even, NaN kept quiet; identical to zt_f32_to_bf16 for every input. */
void zt_f32_to_bf16_array(uint16_t *dst, const float *src, size_t n);

#endif
