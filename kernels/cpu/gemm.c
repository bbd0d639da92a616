#include <cblas.h>

#include "ops.h"

/* oneDNN plans a shape in about a millisecond, once: it takes the products of training, OpenBLAS
 * or zt's bf16 kernels the small ones. Where C's rows are A's (transa == 0: a layer's forward
 * product and its input gradient) the choice depends on N and K alone, as if M were 256: the two
 * sum in other orders, and a token's values must not depend on how many rows its micro-batch has
 * (a sequence alone, or among others, or decoded). */
#define DNNL_MIN_FLOPS (1 << 21)
#define FEW_ROWS 16

int zt_gemm_dnnl_takes(int transa, int M, int N, int K)
{
    if (N < 16) return 0;
    return transa ? M >= 16 && (double)M * N * K >= DNNL_MIN_FLOPS : 256.0 * N * K >= DNNL_MIN_FLOPS;
}

void zt_cpu_gemm(int transa, int transb, int M, int N, int K, zt_real alpha, const zt_real *A, int lda,
                 const zt_real *B, int ldb, zt_real beta, zt_real *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
#ifdef ZT_REAL_DOUBLE
    cblas_dgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, M, N, K, alpha,
                A, lda, B, ldb, beta, C, ldc);
#else
    /* a decoder's few rows (fewer than 16) stay with OpenBLAS: oneDNN would pad them to 16 and run
     * a layer's product as one block on one thread (fp32 decoding 17% slower); fp32 rows were
     * never promised M's independence, which the bf16 products keep */
    if (zt_gemm_dnnl_takes(transa, M, N, K) && (transa || M >= FEW_ROWS) &&
        zt_gemm_f32_dnnl(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, M, N, K, alpha,
                A, lda, B, ldb, beta, C, ldc);
#endif
}
