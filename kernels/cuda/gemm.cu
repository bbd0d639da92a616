/* kernels/cuda/gemm: row-major GEMM (zt_cpu_gemm's semantics) through cuBLASLt.
 *
 * cuBLASLt is column-major. A row-major C[M,N] with row stride ldc is, read column-major,
 * Cᵀ [N,M] with leading dimension ldc, and Cᵀ = op(B)ᵀ·op(A)ᵀ: so cuBLASLt multiplies our B
 * (its "A") by our A (its "B") with the same transpose flags and every stride unchanged.
 *
 * Accumulation is fp32 (CUBLAS_COMPUTE_32F, never TF32: results are compared with the CPU).
 * Like BLAS, K == 0 or alpha == 0 only scales C by beta, and beta == 0 never reads C.
 * A plan (descriptors and the heuristic's algorithm) is cached per shape, strides and pointer
 * alignment, so the heuristic runs once per distinct call. Not thread-safe: one context per stream.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

enum { GEMM_PLANS = 128 };
static const uint64_t GEMM_WORKSPACE_BYTES = 32u << 20;

/* Everything a plan depends on; compared with memcmp (only ints, no padding). */
typedef struct gemm_key {
    int bf16, ta, tb, M, N, K, lda, ldb, ldc, beta0;
    unsigned align_a, align_b, align_c;
} gemm_key;

typedef struct gemm_plan {
    gemm_key key;
    int used;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lay_b, lay_a, lay_c; /* cuBLASLt's A, B and C = D: our B, A and C */
    cublasLtMatmulAlgo_t algo;
    int has_algo; /* 0: the heuristic found none; cublasLtMatmul chooses (NULL algo) */
} gemm_plan;

struct zt_cuda_gemm_ctx {
    cublasLtHandle_t lt;
    void *workspace;
    gemm_plan plans[GEMM_PLANS];
    int victim; /* the plan a full cache replaces next (round robin) */
};

/* Prints the gemm a failing cuBLASLt call was for; GEMM_CHECK then aborts as ZT_CUBLAS_CHECK. */
static void print_gemm(const gemm_key *k)
{
    fprintf(stderr, "zt: in gemm_%s ta=%d tb=%d M=%d N=%d K=%d lda=%d ldb=%d ldc=%d beta%s0:\n",
            k->bf16 ? "bf16" : "f32", k->ta, k->tb, k->M, k->N, k->K, k->lda, k->ldb, k->ldc, k->beta0 ? "==" : "!=");
}

#define GEMM_CHECK(stmt, k)                                                                                            \
    do {                                                                                                               \
        cublasStatus_t gemm_s_ = (stmt);                                                                               \
        if (gemm_s_ != CUBLAS_STATUS_SUCCESS) print_gemm(k);                                                           \
        ZT_CUBLAS_CHECK(gemm_s_);                                                                                      \
    } while (0)

/* The largest power of two up to 256 that divides the address (cuBLASLt's alignment preference). */
static unsigned align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    unsigned al = 256;
    while (al > 1 && a % al) al /= 2;
    return al;
}

static void plan_destroy(gemm_plan *p)
{
    if (!p->used) return;
    GEMM_CHECK(cublasLtMatrixLayoutDestroy(p->lay_c), &p->key);
    GEMM_CHECK(cublasLtMatrixLayoutDestroy(p->lay_a), &p->key);
    GEMM_CHECK(cublasLtMatrixLayoutDestroy(p->lay_b), &p->key);
    GEMM_CHECK(cublasLtMatmulDescDestroy(p->desc), &p->key);
    p->used = 0;
}

static void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *v,
                     size_t size, const gemm_key *k)
{
    GEMM_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, v, size), k);
}

static void plan_build(zt_cuda_gemm_ctx *g, gemm_plan *p, const gemm_key *k)
{
    cudaDataType_t ab = k->bf16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasOperation_t op_b = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    p->key = *k;
    GEMM_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), k);
    GEMM_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof op_b), k);
    GEMM_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof op_a), k);
    /* Stored shapes, column-major (rows, cols, ld): row-major B [K,N] is (N, K); stored [N,K] it is (K, N). */
    GEMM_CHECK(cublasLtMatrixLayoutCreate(&p->lay_b, ab, k->tb ? k->K : k->N, k->tb ? k->N : k->K, k->ldb), k);
    GEMM_CHECK(cublasLtMatrixLayoutCreate(&p->lay_a, ab, k->ta ? k->M : k->K, k->ta ? k->K : k->M, k->lda), k);
    GEMM_CHECK(cublasLtMatrixLayoutCreate(&p->lay_c, CUDA_R_32F, k->N, k->M, k->ldc), k);

    cublasLtMatmulPreference_t pref;
    GEMM_CHECK(cublasLtMatmulPreferenceCreate(&pref), k);
    uint64_t ws = GEMM_WORKSPACE_BYTES;
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws, k);
    /* The default assumes 256-byte aligned pointers; views into larger buffers may not be. */
    uint32_t al_b = k->align_b, al_a = k->align_a, al_c = k->align_c;
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_b, sizeof al_b, k);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_a, sizeof al_a, k);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c, k);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c, k);

    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    cublasStatus_t heuristic =
        cublasLtMatmulAlgoGetHeuristic(g->lt, p->desc, p->lay_b, p->lay_a, p->lay_c, p->lay_c, pref, 1, &res, &found);
    if (heuristic != CUBLAS_STATUS_NOT_SUPPORTED) GEMM_CHECK(heuristic, k);
    p->has_algo = heuristic == CUBLAS_STATUS_SUCCESS && found > 0 && res.state == CUBLAS_STATUS_SUCCESS;
    if (p->has_algo) p->algo = res.algo;
    GEMM_CHECK(cublasLtMatmulPreferenceDestroy(pref), k);
    p->used = 1;
}

static gemm_plan *plan_for(zt_cuda_gemm_ctx *g, const gemm_key *k)
{
    for (int i = 0; i < GEMM_PLANS; i++)
        if (g->plans[i].used && !memcmp(&g->plans[i].key, k, sizeof *k)) return &g->plans[i];
    gemm_plan *p = &g->plans[g->victim];
    g->victim = (g->victim + 1) % GEMM_PLANS;
    plan_destroy(p);
    plan_build(g, p, k);
    return p;
}

__global__ void scale_matrix(float *C, int M, int N, int ldc, float beta)
{
    size_t n = (size_t)M * N;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        C[i / N * ldc + i % N] *= beta;
}

/* C = beta·C without the product (K == 0 or alpha == 0); beta == 0 writes zeros without reading C. */
static void scale_only(cudaStream_t s, int M, int N, float beta, float *C, int ldc)
{
    if (beta == 0.0f) {
        ZT_CUDA_CHECK(cudaMemset2DAsync(C, (size_t)ldc * sizeof(float), 0, (size_t)N * sizeof(float), M, s));
        return;
    }
    if (beta == 1.0f) return;
    size_t n = (size_t)M * N;
    scale_matrix<<<zt_stride_blocks(n, 256), 256, 0, s>>>(C, M, N, ldc, beta);
    zt_cuda_check("gemm: scale_matrix");
}

static void gemm(zt_cuda_gemm_ctx *g, cudaStream_t s, int bf16, int ta, int tb, int M, int N, int K, float alpha,
                 const void *A, int lda, const void *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_only(s, M, N, beta, C, ldc);
        return;
    }
    gemm_key k;
    memset(&k, 0, sizeof k);
    k.bf16 = bf16, k.ta = ta != 0, k.tb = tb != 0, k.M = M, k.N = N, k.K = K;
    k.lda = lda, k.ldb = ldb, k.ldc = ldc, k.beta0 = beta == 0.0f;
    k.align_a = align_of(A), k.align_b = align_of(B), k.align_c = align_of(C);
    gemm_plan *p = plan_for(g, &k);
    const cublasLtMatmulAlgo_t *algo = p->has_algo ? &p->algo : NULL;
    GEMM_CHECK(cublasLtMatmul(g->lt, p->desc, &alpha, B, p->lay_b, A, p->lay_a, &beta, C, p->lay_c, C, p->lay_c, algo,
                              g->workspace, GEMM_WORKSPACE_BYTES, s),
               &k);
}

zt_cuda_gemm_ctx *zt_cuda_gemm_init(void)
{
    zt_cuda_gemm_ctx *g = (zt_cuda_gemm_ctx *)calloc(1, sizeof *g);
    if (!g) return NULL;
    cublasStatus_t st = cublasLtCreate(&g->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "zt: cublasLtCreate failed: %s\n", cublasLtGetStatusString(st));
        free(g);
        return NULL;
    }
    cudaError_t e = cudaMalloc(&g->workspace, GEMM_WORKSPACE_BYTES);
    if (e != cudaSuccess) {
        fprintf(stderr, "zt: cudaMalloc of the %llu-byte cuBLASLt workspace failed: %s\n",
                (unsigned long long)GEMM_WORKSPACE_BYTES, cudaGetErrorString(e));
        cublasLtDestroy(g->lt);
        free(g);
        return NULL;
    }
    return g;
}

void zt_cuda_gemm_f32(zt_cuda_gemm_ctx *g, cudaStream_t s, int transa, int transb, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    gemm(g, s, 0, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void zt_cuda_gemm_bf16(zt_cuda_gemm_ctx *g, cudaStream_t s, int transa, int transb, int M, int N, int K,
                       float alpha, const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
                       int ldc)
{
    gemm(g, s, 1, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
