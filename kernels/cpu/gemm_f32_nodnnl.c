/* Without oneDNN (NO_DNNL=1, or libdnnl-dev missing): OpenBLAS runs every fp32 product. */
#include "ops.h"

int zt_gemm_f32_skinny(int transa, int transb, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc)
{
    return 0;
}
