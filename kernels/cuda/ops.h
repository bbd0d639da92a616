/* kernels/cuda: the CUDA twins of kernels/cpu, one file per op family (.cu).
 *
 * Each launcher has the arguments of its CPU twin (kernels/cpu/ops.h, quant.h,
 * lib/optim/adamw.h, clip.h) after a leading stream, and the same write/accumulate
 * rules; every pointer is device memory. Launchers only enqueue work on the stream:
 * nothing waits, except the ones that return a value to the host (they say so).
 * float only (the CUDA backend has no double-precision build).
 *
 *     zt_cuda_rmsnorm_forward(stream, y, NULL, rstd, x, w, 0, N, C, eps);
 *     zt_cuda_check("rmsnorm");            // a launch error aborts with the op's name
 */
#ifndef ZT_KERNELS_CUDA_OPS_H
#define ZT_KERNELS_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "lib/optim/adamw8bit.h"
#include "lib/optim/adamw_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Aborts as ZT_CUDA_CHECK (check.h), naming the op, when the last launch failed. */
void zt_cuda_check_at(const char *what, const char *file, int line);
#define zt_cuda_check(what) zt_cuda_check_at(what, __FILE__, __LINE__)

/* --- GEMM through cuBLASLt (gemm.cu). C[M,N] = alpha·op(A)·op(B) + beta·C in row-major
 * terms, op(A) [M,K] (A stored [K,M] when transa); fp32 accumulation. One context per
 * backend: a cuBLASLt handle and a workspace. */
typedef struct zt_cuda_gemm_ctx zt_cuda_gemm_ctx;
zt_cuda_gemm_ctx *zt_cuda_gemm_init(void);
void zt_cuda_gemm_f32(zt_cuda_gemm_ctx *g, cudaStream_t s, int transa, int transb, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* bf16 × bf16 → fp32 C */
void zt_cuda_gemm_bf16(zt_cuda_gemm_ctx *g, cudaStream_t s, int transa, int transb, int M, int N, int K, float alpha,
                       const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);

/* --- casts (cast.cu): round to nearest even, as zt_f32_to_bf16 */
void zt_cuda_to_bf16(cudaStream_t s, uint16_t *dst, const float *src, size_t n);

/* --- row ops (embedding.cu, rmsnorm.cu, rope.cu, swiglu.cu, bias.cu) */
void zt_cuda_embedding_forward(cudaStream_t s, float *out, const int32_t *ids, const float *table, int v0, int nv,
                               int N, int C);
void zt_cuda_embedding_backward(cudaStream_t s, float *dtable, const float *dout, const int32_t *ids, int v0, int nv,
                                int N, int C);
/* y16, h16 and dgateup16 (where not NULL) get the outputs rounded to bf16 too, as zt_cuda_to_bf16 rounds */
void zt_cuda_rmsnorm_forward(cudaStream_t s, float *y, uint16_t *y16, float *rstd, const float *x, const float *w,
                             float w_offset, int N, int C, double eps);
void zt_cuda_rmsnorm_backward(cudaStream_t s, float *dx, float *dw, const float *dy, const float *x, const float *w,
                              float w_offset, const float *rstd, int N, int C);
void zt_cuda_head_rmsnorm_forward(cudaStream_t s, float *x, float *xin, float *rstd, const float *w, float w_offset,
                                  int N, int stride, int nheads, int D, double eps);
void zt_cuda_head_rmsnorm_backward(cudaStream_t s, float *dx, float *dw, const float *xin, const float *w,
                                   float w_offset, const float *rstd, int N, int stride, int nheads, int D);
void zt_cuda_rope(cudaStream_t s, float *x, int N, int stride, int nheads, int D, int R, int interleaved,
                  const int32_t *pos, const float *cos_t, const float *sin_t, int inverse);
void zt_cuda_swiglu_forward(cudaStream_t s, float *h, uint16_t *h16, const float *gateup, int N, int F);
void zt_cuda_swiglu_backward(cudaStream_t s, float *dgateup, uint16_t *dgateup16, const float *dh, const float *gateup,
                             int N, int F);
/* GeGLU, soft-capping, scaling and sums (geglu.cu) */
void zt_cuda_geglu_forward(cudaStream_t s, float *h, uint16_t *h16, const float *gateup, int N, int F, int exact);
void zt_cuda_geglu_backward(cudaStream_t s, float *dgateup, uint16_t *dgateup16, const float *dh, const float *gateup,
                            int N, int F, int exact);
void zt_cuda_softcap_forward(cudaStream_t s, float *x, size_t n, double cap);
void zt_cuda_softcap_backward(cudaStream_t s, float *dx, const float *y, size_t n, double cap);
void zt_cuda_scale(cudaStream_t s, float *x, size_t n, float alpha);
void zt_cuda_add(cudaStream_t s, float *y, const float *x, size_t n);
void zt_cuda_add_uniform_noise(cudaStream_t s, float *x, size_t n, uint64_t key, float magnitude); /* noise.cu */
void zt_cuda_dropout(cudaStream_t s, float *dst, const float *src, size_t n, uint64_t key, uint64_t drop_below,
                     float keep_scale, int accumulate); /* dropout.cu */
/* dora.cu */
void zt_cuda_row_norms(cudaStream_t s, float *norm, const float *x, int rows, int cols);
void zt_cuda_dora_forward(cudaStream_t s, float *y, int ldy, const float *v, const float *bu, const float *M,
                          const float *norm, int N, int out);
void zt_cuda_dora_backward(cudaStream_t s, float *gM, float *de, float *dv, const float *dy, int ldy, const float *t,
                           const float *M, const float *norm, int N, int out);
void zt_cuda_bias_forward(cudaStream_t s, float *y, const float *b, int N, int M);
void zt_cuda_bias_backward(cudaStream_t s, float *db, const float *dy, int N, int M);

/* --- attention (attention.cu): tiled, online softmax, no T×T matrix in memory */
void zt_cuda_attention_forward(cudaStream_t s, float *out, float *lse, const float *qkv, const int32_t *pos, int B,
                               int T, int H, int KV, int D, int window, double scale, double softcap);
void zt_cuda_attention_backward(cudaStream_t s, float *dqkv, const float *dout, const float *qkv, const float *out,
                                const float *lse, const int32_t *pos, int B, int T, int H, int KV, int D, int window,
                                double scale, double softcap);
void zt_cuda_attention_decode(cudaStream_t s, float *out, const float *q, int q_stride, const float *k, const float *v,
                              int kv_stride, int n, int p0, int H, int KV, int D, int window, double scale,
                              double softcap);
/* same contract, q/k/v/dout/P rounded to bf16 for the products, fp32 accumulation and softmax (attention_bf16.cu) */
void zt_cuda_attention_forward_bf16(cudaStream_t s, float *out, float *lse, const float *qkv, const int32_t *pos, int B,
                                    int T, int H, int KV, int D, int window, double scale);
void zt_cuda_attention_backward_bf16(cudaStream_t s, float *dqkv, const float *dout, const float *qkv, const float *out,
                                     const float *lse, const int32_t *pos, int B, int T, int H, int KV, int D,
                                     int window, double scale);

/* --- loss (crossentropy.cu): loss_rows is device memory too */
void zt_cuda_cross_entropy(cudaStream_t s, float *logits, double *loss_rows, const int32_t *targets, int n, int V,
                           float grad_scale);
/* the same, the gradient also rounded to bf16 into grad16 */
void zt_cuda_cross_entropy_bf16(cudaStream_t s, float *logits, double *loss_rows, const int32_t *targets, int n, int V,
                                float grad_scale, uint16_t *grad16);
/* x[i, :] *= scale[i] over n rows of V (scale: device memory) */
void zt_cuda_scale_rows(cudaStream_t s, float *x, const float *scale, int n, int V);

/* --- optimizer (adamw.cu): the CPU scalar kernel's arithmetic, bitwise (no FMA); c is host memory */
void zt_cuda_adamw(cudaStream_t s, const zt_adamw_consts *c, float *param, const float *grad, float *m, float *v,
                   size_t n, uint16_t *param_bf16);
/* adamw8.cu: lib/optim/adamw8bit.h's zt_adamw8_step and zt_adamw8_finish, bitwise; maps are
 * zt_adamw8_map(0) and (1) in host memory (copied to the device on the first call) */
void zt_cuda_adamw8(cudaStream_t s, const zt_dyn8 *const maps[2], const zt_adamw8_piece *pieces,
                    const zt_adamw8_block *blocks, size_t nb, const zt_adamw8_cut *cut, size_t nc, float *param,
                    const float *grad, uint8_t *q1, uint8_t *q2, float *a1, float *a2, uint16_t *param16, float *held,
                    float *slots);
void zt_cuda_adamw8_finish(cudaStream_t s, const zt_dyn8 *const maps[2], const zt_adamw8_release *r, size_t nr,
                           uint8_t *q1, uint8_t *q2, float *a1, float *a2, const float *held, const float *slots);
/* Σ x² in double; waits for the stream and returns the value. */
double zt_cuda_sumsq(cudaStream_t s, const float *x, size_t n);

/* --- a quantized base's encodings decoded (nf4.cu): kernels/cpu/nf4.h's dequantizers, bitwise */
void zt_cuda_nf4_dequantize(cudaStream_t s, const uint8_t *q, const float *absmax, size_t first, size_t n, float *y);
void zt_cuda_nf4_dq_dequantize(cudaStream_t s, const uint8_t *q, const float *b, float offset, size_t first, size_t n,
                               float *a);
void zt_cuda_int8_rows_dequantize(cudaStream_t s, const int8_t *q, const float *absmax, size_t cols, size_t row0,
                                  size_t nrows, float *y);

/* --- ZeRO++ block quantization (quant.cu): kernels/cpu/quant.h's arithmetic, bitwise.
 * The quantizers return (after waiting for the stream) how many inputs were NaN or Inf. */
size_t zt_cuda_quant8(cudaStream_t s, const float *x, size_t n, size_t block, int8_t *q, float *scales);
void zt_cuda_dequant8(cudaStream_t s, const int8_t *q, const float *scales, size_t n, size_t block, float *y);
size_t zt_cuda_quant4(cudaStream_t s, const float *x, size_t n, size_t block, uint8_t *q, float *scales);
void zt_cuda_dequant4(cudaStream_t s, const uint8_t *q, const float *scales, size_t n, size_t block, float *y);
/* y = Σ_j dequant4(q[j], scales[j]) (+ y when accumulate); q and scales are device arrays of k
 * device pointers. */
void zt_cuda_dequant4_sum(cudaStream_t s, const uint8_t *const *q, const float *const *scales, int k, size_t n,
                          size_t block, float *y, int accumulate);

#ifdef __cplusplus
}
#endif

#endif
