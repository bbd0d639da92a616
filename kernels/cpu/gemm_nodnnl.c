/* Without oneDNN (NO_DNNL=1, or libdnnl-dev missing): zt's own bf16 kernels and OpenBLAS run
 * everything. */
#include "gemm_bf16_kernel.h"
#include "ops.h"

int zt_gemm_bf16_dnnl(int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                      const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    return 0;
}

const char *zt_gemm_bf16_dnnl_name(void) { return NULL; }

int zt_gemm_f32_dnnl(int transa, int transb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc)
{
    return 0;
}
