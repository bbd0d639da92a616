/* kernels/cuda/check: the one check of CUDA calls, for the .c and the .cu files. A failing
 * call is a broken invariant: the macro prints "zt: rank R: file:line: statement: error"
 * and aborts (the rank is the communicator's once the trainer has it, else mpirun's).
 *
 *     ZT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, s));           // runtime API, cudaError_t
 *     ZT_CU_CHECK(cuMemMap(at, bytes, 0, h, 0));                // driver API, CUresult
 *     ZT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, c, t));      // cuBLASLt, cublasStatus_t
 *     kernel<<<blocks, threads, 0, s>>>(...);
 *     zt_cuda_check("rmsnorm");                                  // the launch (ops.h)
 */
#ifndef ZT_KERNELS_CUDA_CHECK_H
#define ZT_KERNELS_CUDA_CHECK_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Prints the failure (error: the library's string for code) and aborts. */
__attribute__((noreturn)) void zt_cuda_fail(const char *stmt, const char *file, int line, const char *error, int code);

#ifdef __cplusplus
}
#endif

#define ZT_CUDA_CHECK(stmt)                                                                                            \
    do {                                                                                                               \
        cudaError_t zt_e_ = (stmt);                                                                                    \
        if (zt_e_ != cudaSuccess) zt_cuda_fail(#stmt, __FILE__, __LINE__, cudaGetErrorString(zt_e_), (int)zt_e_);      \
    } while (0)

/* the driver's error strings are not linked (lib/backend/vmm_cuda.c reaches it by entry points) */
#define ZT_CU_CHECK(stmt)                                                                                              \
    do {                                                                                                               \
        int zt_r_ = (int)(stmt);                                                                                       \
        if (zt_r_) zt_cuda_fail(#stmt, __FILE__, __LINE__, "CUDA driver error", zt_r_);                                \
    } while (0)

/* needs <cublasLt.h> */
#define ZT_CUBLAS_CHECK(stmt)                                                                                          \
    do {                                                                                                               \
        cublasStatus_t zt_s_ = (stmt);                                                                                 \
        if (zt_s_ != CUBLAS_STATUS_SUCCESS)                                                                            \
            zt_cuda_fail(#stmt, __FILE__, __LINE__, cublasLtGetStatusString(zt_s_), (int)zt_s_);                       \
    } while (0)

#endif
