#include <cblas.h>

#include "ops.h"

void zt_cpu_gemm(int transa, int transb, int M, int N, int K, zt_real alpha, const zt_real *A, int lda,
                 const zt_real *B, int ldb, zt_real beta, zt_real *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
#ifdef ZT_REAL_DOUBLE
    cblas_dgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, M, N, K, alpha,
                A, lda, B, ldb, beta, C, ldc);
#else
    if (zt_gemm_f32_skinny(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
    cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, M, N, K, alpha,
                A, lda, B, ldb, beta, C, ldc);
#endif
}
