/* kernels/cpu/gemm_bf16_kernel: the parts behind zt_gemm_bf16, shared by its SIMD files and tests.
 *
 * The blocked driver packs op(A) and op(B) into panels of MR rows / NR columns and hands pairs of
 * panels to a register-tile kernel (a "microkernel"). Two panel formats:
 *   ZT_GEMM_PACK_PAIRS: K is taken two at a time; a 32-bit word holds (x[k], x[k+1]) as bf16,
 *                       low half first, which is what vdpbf16ps multiplies (odd K padded with 0);
 *   ZT_GEMM_PACK_F32:   one fp32 per k (bf16 widened), for an fp32 kernel (AVX2 FMA, or plain C).
 * A panel stores, for each k unit (a pair or a single k), its MR (or NR) values together.
 *
 *     zt_gemm_bf16_blocked(&zt_gemm_bf16_avx2, 0, 1, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N);
 */
#ifndef ZT_KERNELS_CPU_GEMM_BF16_KERNEL_H
#define ZT_KERNELS_CPU_GEMM_BF16_KERNEL_H

#include <stddef.h>
#include <stdint.h>

typedef enum { ZT_GEMM_PACK_PAIRS, ZT_GEMM_PACK_F32 } zt_gemm_pack;

/* C[m,n] (m <= mr, n <= nr; ldc in floats) = alpha * Apanel · Bpanel + beta * C over `units`
 * k units; beta == 0 does not read C. Panels are 64-byte aligned and zero past the valid rows. */
typedef void (*zt_gemm_tile_fn)(int units, const void *a, const void *b, float *c, size_t ldc, int m, int n,
                                float alpha, float beta);

/* A ZT_GEMM_PACK_F32 panel of R rows whose elements are contiguous in k: d[k·R + r] = x[r·rs + k]
 * widened, for r < rows and k < kb (the rows past `rows` zero or left as they are). */
typedef void (*zt_gemm_pack_rows_fn)(const uint16_t *x, size_t rs, int rows, int R, int kb, float *d);
/* The same for a panel whose rows are adjacent: d[k·R + r] = x[r + k·ks] widened. */
typedef void (*zt_gemm_pack_cols_fn)(const uint16_t *x, size_t ks, int rows, int R, int kb, float *d);

typedef struct zt_gemm_bf16_kernel {
    const char *name;
    zt_gemm_pack pack;
    int mr, nr; /* register tile */
    int kc;     /* most k (elements, even) in one block: a B panel of kc stays in L1; 0: K whole */
    int mc;     /* most rows in one packed A block (stays in L2) */
    int nc;     /* most columns in one packed B block (stays in L3) */
    zt_gemm_tile_fn tile;
    zt_gemm_pack_rows_fn pack_rows; /* NULL: the driver's plain loops */
    zt_gemm_pack_cols_fn pack_cols; /* NULL: the driver's plain loops */
} zt_gemm_bf16_kernel;

extern const zt_gemm_bf16_kernel zt_gemm_bf16_avx512bf16; /* needs zt_cpu_has(ZT_CPU_AVX512BF16) */
extern const zt_gemm_bf16_kernel zt_gemm_bf16_avx2;       /* needs zt_cpu_has(ZT_CPU_AVX2) */
extern const zt_gemm_bf16_kernel zt_gemm_bf16_scalar;     /* any x86-64; bitwise zt_gemm_bf16_ref */

/* The same contract as zt_gemm_bf16, on a given kernel / on plain loops (the reference). */
void zt_gemm_bf16_blocked(const zt_gemm_bf16_kernel *kern, int transa, int transb, int M, int N, int K, float alpha,
                          const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);
void zt_gemm_bf16_ref(int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                      const uint16_t *B, int ldb, float beta, float *C, int ldc);

/* The same contract through oneDNN's matmul (gemm_dnnl.c): 0 when it did nothing (built
 * without oneDNN, below zt's avx512-bf16 level, or no fast oneDNN kernel for this shape here),
 * for zt's own kernels to run. Where transa == 0 a row of C is the same bits for any M. The name says which oneDNN and which of its
 * kernels ("oneDNN 2.6.3 brg:avx512_core_bf16"); NULL when zt's own kernels run everything. */
int zt_gemm_bf16_dnnl(int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                      const uint16_t *B, int ldb, float beta, float *C, int ldc);
const char *zt_gemm_bf16_dnnl_name(void);

/* zt_f32_to_bf16_array on one thread; the AVX2 one needs zt_cpu_has(ZT_CPU_AVX2). */
void zt_f32_to_bf16_run_scalar(uint16_t *dst, const float *src, size_t n);
void zt_f32_to_bf16_run_avx2(uint16_t *dst, const float *src, size_t n);

#endif
