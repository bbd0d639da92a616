/* kernels/cpu: the CPU reference kernels, one file per op family.
 *
 * Every op works on zt_real (float; double in the gradient-check build) in
 * row-major layouts: N = B*T tokens, C = hidden size. Backward kernels say
 * whether they write (=) or accumulate (+=) each gradient. All kernels are
 * deterministic for a given thread count (static OpenMP schedules, fixed
 * reduction orders). The CUDA backend has a twin of each, tested against these.
 *
 *     zt_cpu_rmsnorm_forward(y, NULL, rstd, x, w, 0, N, C, eps);
 *     zt_cpu_gemm(0, 1, N, O, C, 1, x, C, W, C, 0, y, O);   // y = x·Wᵀ
 */
#ifndef ZT_KERNELS_CPU_OPS_H
#define ZT_KERNELS_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/real.h"

/* C[M,N] = alpha·op(A)·op(B) + beta·C; op(A) is [M,K] (A stored [K,M] when transa). oneDNN for
 * the products zt_gemm_dnnl_takes where zt uses oneDNN (zt_gemm_f32_dnnl), else OpenBLAS. */
void zt_cpu_gemm(int transa, int transb, int M, int N, int K, zt_real alpha, const zt_real *A, int lda,
                 const zt_real *B, int ldb, zt_real beta, zt_real *C, int ldc);
/* Whether a product of this shape goes to oneDNN where zt uses it (fp32 and bf16 alike): large
 * enough, and for transa == 0 decided by N and K alone (kernels/cpu/gemm.c). */
int zt_gemm_dnnl_takes(int transa, int M, int N, int K);
/* The fp32 product through oneDNN (kernels/cpu/gemm_dnnl.c), blocked as the bf16 ones are: the
 * same bits for any thread count, a row of C the same for any M where transa == 0 (zt_cpu_gemm
 * leaves fewer than 16 such rows, a decoder's, to OpenBLAS); 0 where zt does not use oneDNN
 * (built without it, below the avx512-bf16 level, ZT_DNNL=0), C untouched. */
int zt_gemm_f32_dnnl(int transa, int transb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc);

/* out[n,:] = table[ids[n],:]; backward: dtable[ids[n],:] += dout[n,:] */
void zt_cpu_embedding_forward(zt_real *out, const int32_t *ids, const zt_real *table, int v0, int nv, int N, int C);
void zt_cpu_embedding_backward(zt_real *dtable, const zt_real *dout, const int32_t *ids, int v0, int nv, int N, int C);

/* y = x / rms(x) * (w + w_offset), rstd[n] = 1/rms(x[n]), and y's bf16 copy in y16 where given
 * (NULL: none); backward: dx += ..., dw += ... w_offset is 0, or 1 for Gemma's norm weights
 * (stored as the scale minus one). */
void zt_cpu_rmsnorm_forward(zt_real *y, uint16_t *y16, zt_real *rstd, const zt_real *x, const zt_real *w,
                            zt_real w_offset, int N, int C, double eps);
void zt_cpu_rmsnorm_backward(zt_real *dx, zt_real *dw, const zt_real *dy, const zt_real *x, const zt_real *w,
                             zt_real w_offset, const zt_real *rstd, int N, int C);

/* RMSNorm over each head of D elements, in place on heads [0, nheads) of each row (row stride
 * `stride` elements), one weight w [D] for them all (Qwen3's q_norm and k_norm). xin [N, nheads,
 * D] keeps the input, rstd [N, nheads] each head's 1/rms. Backward in place as well: dx holds
 * ∂loss/∂y on entry and ∂loss/∂x on return (=); dw += ... */
void zt_cpu_head_rmsnorm_forward(zt_real *x, zt_real *xin, zt_real *rstd, const zt_real *w, zt_real w_offset, int N,
                                 int stride, int nheads, int D, double eps);
void zt_cpu_head_rmsnorm_backward(zt_real *dx, zt_real *dw, const zt_real *xin, const zt_real *w, zt_real w_offset,
                                  const zt_real *rstd, int N, int stride, int nheads, int D);

/* Rotary embedding in place on heads [0, nheads) of each row (row stride `stride`
 * elements, head size D) at positions pos[n], Hugging Face rotate-half pairing (j, j+R/2) over
 * the head's first R elements (R = D, or a partial rotary: the other D - R pass through), or with
 * interleaved GLM's pairing (2j, 2j+1); pair j turns by table entry j. cos/sin tables are
 * [max_pos, R/2]. inverse = 1 applies the transpose (the backward pass). */
void zt_cpu_rope(zt_real *x, int N, int stride, int nheads, int D, int R, int interleaved, const int32_t *pos,
                 const zt_real *cos_t, const zt_real *sin_t, int inverse);

/* Causal attention with grouped-query heads and a document mask over qkv rows laid
 * out [q heads (H) | k heads (KV) | v heads (KV)] × D. Query t of a row attends key u
 * iff t - pos[t] <= u <= t (same document, causal) and t - u < window (0 = none).
 * A score is s = scale·q·k, then softcap·tanh(s / softcap) when softcap > 0 (Gemma 2's
 * attention-logit soft-capping). out [N, H*D]; lse [B, H, T] (log-sum-exp of each query's
 * scores, kept for backward). Backward writes dqkv (all three parts). */
void zt_cpu_attention_forward(zt_real *out, zt_real *lse, const zt_real *qkv, const int32_t *pos, int B, int T, int H,
                              int KV, int D, int window, double scale, double softcap);
void zt_cpu_attention_backward(zt_real *dqkv, const zt_real *dout, const zt_real *qkv, const zt_real *out,
                               const zt_real *lse, const int32_t *pos, int B, int T, int H, int KV, int D, int window,
                               double scale, double softcap);

/* The same for bf16 models (attention_bf16.c): scale 1/sqrt(D), no soft-capping; q, k, v,
 * dout, the probabilities and the scores' gradients rounded to bf16 for the products, the
 * softmax and every sum in fp32. Not in the double-precision build. */
void zt_cpu_attention_forward_bf16(float *out, float *lse, const float *qkv, const int32_t *pos, int B, int T, int H,
                                   int KV, int D, int window, double scale);
void zt_cpu_attention_backward_bf16(float *dqkv, const float *dout, const float *qkv, const float *out,
                                    const float *lse, const int32_t *pos, int B, int T, int H, int KV, int D,
                                    int window, double scale);

/* Attention of n new queries (q rows of stride q_stride, H heads) at positions
 * p0..p0+n-1 of one sequence over a key/value cache [p0+n, KV*D] (rows of stride
 * kv_stride) that already holds them: generation with a KV cache. out [n, H*D]. */
void zt_cpu_attention_decode(zt_real *out, const zt_real *q, int q_stride, const zt_real *k, const zt_real *v,
                             int kv_stride, int n, int p0, int H, int KV, int D, int window, double scale,
                             double softcap);

/* h = silu(gate)·up with gateup rows [gate (F) | up (I)], and h's bf16 copy in h16 where given
 * (NULL: none); backward writes dgateup, and its bf16 copy in dgateup16 where given. */
void zt_cpu_swiglu_forward(zt_real *h, uint16_t *h16, const zt_real *gateup, int N, int F);
void zt_cpu_swiglu_backward(zt_real *dgateup, uint16_t *dgateup16, const zt_real *dh, const zt_real *gateup, int N,
                            int F);

/* h = gelu(gate)·up (GeGLU), rows as swiglu's: torch's gelu with approximate="tanh", or with
 * exact its erf form (approximate="none"). */
void zt_cpu_geglu_forward(zt_real *h, uint16_t *h16, const zt_real *gateup, int N, int F, int exact);
void zt_cpu_geglu_backward(zt_real *dgateup, uint16_t *dgateup16, const zt_real *dh, const zt_real *gateup, int N,
                           int F, int exact);

/* Soft-capping in place over n elements: x = cap·tanh(x / cap). Backward: dx *= 1 - (y / cap)²
 * with y the capped values. */
void zt_cpu_softcap_forward(zt_real *x, size_t n, double cap);
void zt_cpu_softcap_backward(zt_real *dx, const zt_real *y, size_t n, double cap);
/* x *= alpha over n elements; y += x over n elements */
void zt_cpu_scale(zt_real *x, size_t n, zt_real alpha);
void zt_cpu_add(zt_real *y, const zt_real *x, size_t n);
/* x[i] += magnitude·u, u = zt_hash_uniform_pm1(key + i) (lib/core/rng.h): uniform in [-1, 1), a
 * function of the index alone (noise.c); the CUDA twin adds the same bits */
void zt_cpu_add_uniform_noise(zt_real *x, size_t n, uint64_t key, zt_real magnitude);
/* dst[i] = keep(i) ? src[i]·keep_scale : 0 (accumulate: dst[i] += that), keep(i) when
 * zt_mix64(key + i) >> 11 is not below drop_below (p·2⁵³ drops with probability p): a function of
 * the index alone (dropout.c); the CUDA twin keeps and adds the same bits */
void zt_cpu_dropout(zt_real *dst, const zt_real *src, size_t n, uint64_t key, uint64_t drop_below, zt_real keep_scale,
                    int accumulate);

/* DoRA (dora.c): norm[j] = ||x[j, :]|| over rows × cols (each sum in double); forward
 * y[n, j] (rows ldy apart) += (g_j - 1)·v[n, j] + g_j·bu[n, j], g = M / norm; backward
 * gM[j] += Σₙ dy[n, j]·t[n, j] / norm[j], de = g·dy, dv = (g - 1)·dy ([N, out] each) */
void zt_cpu_row_norms(zt_real *norm, const zt_real *x, int rows, int cols);
void zt_cpu_dora_forward(zt_real *y, int ldy, const zt_real *v, const zt_real *bu, const zt_real *M,
                         const zt_real *norm, int N, int out);
void zt_cpu_dora_backward(zt_real *gM, zt_real *de, zt_real *dv, const zt_real *dy, int ldy, const zt_real *t,
                          const zt_real *M, const zt_real *norm, int N, int out);

/* y[n,:] += b; backward: db += Σ_n dy[n,:] */
void zt_cpu_bias_forward(zt_real *y, const zt_real *b, int N, int M);
void zt_cpu_bias_backward(zt_real *db, const zt_real *dy, int N, int M);

/* memset to 0 and memcpy (no overlap), on the OpenMP threads when large */
void zt_cpu_zero(void *p, size_t bytes);
void zt_cpu_copy(void *dst, const void *src, size_t bytes);

/* Cross-entropy over rows of logits [n, V] with targets (-100 = ignored).
 * Adds each row's loss (logsumexp - logit[target]) into loss_rows[n] (double).
 * When grad_scale != 0, overwrites logits with dlogits = (softmax - onehot)·grad_scale
 * (zero rows for ignored targets). */
void zt_cpu_cross_entropy(zt_real *logits, double *loss_rows, const int32_t *targets, int n, int V, zt_real grad_scale);
#ifndef ZT_REAL_DOUBLE
/* The same, the gradient (grad_scale != 0) also in grad16 [n, V] rounded to bf16: bit for bit
 * zt_f32_to_bf16 of what logits then hold. */
void zt_cpu_cross_entropy_bf16(float *logits, double *loss_rows, const int32_t *targets, int n, int V, float grad_scale,
                               uint16_t *grad16);
#endif
/* x[i, :] *= scale[i] over n rows of V */
void zt_cpu_scale_rows(zt_real *x, const zt_real *scale, int n, int V);

#endif
