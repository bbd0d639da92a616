/* backend: the device interface. Model and trainer code call only these entries;
 * each backend (CPU, CUDA) fills the table with its kernels. Buffers
 * passed to an entry live on that backend's device. The CPU backend is the
 * reference every other backend is tested against.
 *
 *     zt_backend *be = zt_backend_cpu();
 *     zt_real *x = be->alloc(be, n * sizeof(zt_real));
 *     be->rmsnorm_forward(be, y, NULL, rstd, x, w, 0, N, C, eps);
 *     be->free(be, x);
 *
 * Entries mirror kernels/cpu/ops.h (same arguments, same write/accumulate rules).
 * The bf16 entries are optional: NULL where a backend lacks them (and in the
 * double-precision build).
 */
#ifndef ZT_BACKEND_H
#define ZT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/real.h"
#include "lib/core/status.h"
#include "lib/optim/adamw.h"
#include "lib/optim/adamw8bit.h"

typedef struct zt_backend zt_backend;

struct zt_backend {
    const char *name;
    char description[160]; /* the device: "NVIDIA H200, 139 GiB, sm_90, driver 13.0" */
    size_t memory_bytes;   /* the device's memory (0 on the CPU backend: host memory) */

    void *(*alloc)(zt_backend *be, size_t bytes); /* zeroed; NULL when out of memory */
    void (*free)(zt_backend *be, void *p);
    /* host memory the device copies to and from fastest (pinned); zeroed; NULL when out of memory */
    void *(*host_alloc)(zt_backend *be, size_t bytes);
    void (*host_free)(zt_backend *be, void *p);
    /* The contents of [p, p + bytes) inside an allocation are no longer needed: its memory
     * may go back to the system (ZeRO stage 3 after a layer). Before the range is used again,
     * populate makes it usable; it then reads as zeros (ZT_ENOMEM when the device's memory
     * cannot hold it). */
    void (*discard)(zt_backend *be, void *p, size_t bytes);
    zt_status (*populate)(zt_backend *be, void *p, size_t bytes);
    size_t (*memory_peak)(zt_backend *be); /* device memory in use at its highest; 0: not tracked */
    void (*memset0)(zt_backend *be, void *p, size_t bytes);
    void (*copy)(zt_backend *be, void *dst, const void *src, size_t bytes);     /* device to device */
    void (*upload)(zt_backend *be, void *dst, const void *src, size_t bytes);   /* host to device */
    void (*download)(zt_backend *be, void *dst, const void *src, size_t bytes); /* device to host; waits */
    void (*sync)(zt_backend *be); /* waits until all queued work is done, the copies below too */
    /* Copies beside the compute (on a GPU a stream of their own, overlapping the kernels):
     * upload_start and download_start queue a copy after the work queued so far and return a
     * fence, which stands for every copy queued until then. Their host memory comes from
     * host_alloc and stays unchanged (upload) or unread (download) until fence_wait(fence) has
     * returned; fence_use(fence) makes the work queued after it wait for those copies on the
     * device. discard, free, sync and the entries that wait also wait for the copies queued. */
    uint64_t (*upload_start)(zt_backend *be, void *dst, const void *src, size_t bytes);
    uint64_t (*download_start)(zt_backend *be, void *dst, const void *src, size_t bytes);
    void (*fence_use)(zt_backend *be, uint64_t fence);
    void (*fence_wait)(zt_backend *be, uint64_t fence);
    int host_memory; /* 1: device pointers are host pointers (the CPU backend) */

    void (*gemm)(zt_backend *be, int transa, int transb, int M, int N, int K, zt_real alpha, const zt_real *A, int lda,
                 const zt_real *B, int ldb, zt_real beta, zt_real *C, int ldc);
    /* bf16 × bf16 → fp32; to_bf16 rounds to nearest even */
    void (*gemm_bf16)(zt_backend *be, int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A,
                      int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);
    void (*to_bf16)(zt_backend *be, uint16_t *dst, const float *src, size_t n);

    /* table (dtable) holds the vocabulary rows [v0, v0 + nv): tokens outside them are skipped */
    void (*embedding_forward)(zt_backend *be, zt_real *out, const int32_t *ids, const zt_real *table, int v0, int nv,
                              int N, int C);
    void (*embedding_backward)(zt_backend *be, zt_real *dtable, const zt_real *dout, const int32_t *ids, int v0, int nv,
                               int N, int C);
    /* the norm's scale is w + w_offset (1 for Gemma's norm weights, else 0); y16, where not
       NULL, gets y in bf16 too (rounded as to_bf16 does), as h16 of the MLP activations */
    void (*rmsnorm_forward)(zt_backend *be, zt_real *y, uint16_t *y16, zt_real *rstd, const zt_real *x,
                            const zt_real *w, zt_real w_offset, int N, int C, double eps);
    void (*rmsnorm_backward)(zt_backend *be, zt_real *dx, zt_real *dw, const zt_real *dy, const zt_real *x,
                             const zt_real *w, zt_real w_offset, const zt_real *rstd, int N, int C);
    /* per-head RMSNorm in place (kernels/cpu/ops.h: zt_cpu_head_rmsnorm_forward) */
    void (*head_rmsnorm_forward)(zt_backend *be, zt_real *x, zt_real *xin, zt_real *rstd, const zt_real *w,
                                 zt_real w_offset, int N, int stride, int nheads, int D, double eps);
    void (*head_rmsnorm_backward)(zt_backend *be, zt_real *dx, zt_real *dw, const zt_real *xin, const zt_real *w,
                                  zt_real w_offset, const zt_real *rstd, int N, int stride, int nheads, int D);
    /* interleaved: GLM's pairs (2j, 2j+1), else rotate-half's (j, j+R/2) (zt_cpu_rope) */
    void (*rope)(zt_backend *be, zt_real *x, int N, int stride, int nheads, int D, int R, int interleaved,
                 const int32_t *pos, const zt_real *cos_t, const zt_real *sin_t, int inverse);
    /* scores scale·q·k, soft-capped when softcap > 0 (zt_cpu_attention_forward) */
    void (*attention_forward)(zt_backend *be, zt_real *out, zt_real *lse, const zt_real *qkv, const int32_t *pos, int B,
                              int T, int H, int KV, int D, int window, double scale, double softcap);
    void (*attention_backward)(zt_backend *be, zt_real *dqkv, const zt_real *dout, const zt_real *qkv,
                               const zt_real *out, const zt_real *lse, const int32_t *pos, int B, int T, int H, int KV,
                               int D, int window, double scale, double softcap);
    /* optional (NULL: the fp32 entries serve): the same with q, k, v and the probabilities
     * rounded to bf16 for the products (tensor cores), for bf16 models; no soft-capping */
    void (*attention_forward_bf16)(zt_backend *be, zt_real *out, zt_real *lse, const zt_real *qkv, const int32_t *pos,
                                   int B, int T, int H, int KV, int D, int window, double scale);
    void (*attention_backward_bf16)(zt_backend *be, zt_real *dqkv, const zt_real *dout, const zt_real *qkv,
                                    const zt_real *out, const zt_real *lse, const int32_t *pos, int B, int T, int H,
                                    int KV, int D, int window, double scale);
    void (*attention_decode)(zt_backend *be, zt_real *out, const zt_real *q, int q_stride, const zt_real *k,
                             const zt_real *v, int kv_stride, int n, int p0, int H, int KV, int D, int window,
                             double scale, double softcap);
    void (*swiglu_forward)(zt_backend *be, zt_real *h, uint16_t *h16, const zt_real *gateup, int N, int F);
    /* dgateup16, where not NULL, gets dgateup in bf16 too (the products' dy) */
    void (*swiglu_backward)(zt_backend *be, zt_real *dgateup, uint16_t *dgateup16, const zt_real *dh,
                            const zt_real *gateup, int N, int F);
    /* GeGLU: gelu's tanh form, or with exact its erf form */
    void (*geglu_forward)(zt_backend *be, zt_real *h, uint16_t *h16, const zt_real *gateup, int N, int F, int exact);
    void (*geglu_backward)(zt_backend *be, zt_real *dgateup, uint16_t *dgateup16, const zt_real *dh,
                           const zt_real *gateup, int N, int F, int exact);
    void (*softcap_forward)(zt_backend *be, zt_real *x, size_t n, double cap);
    void (*softcap_backward)(zt_backend *be, zt_real *dx, const zt_real *y, size_t n, double cap);
    void (*scale)(zt_backend *be, zt_real *x, size_t n, zt_real alpha);  /* x *= alpha */
    void (*add)(zt_backend *be, zt_real *y, const zt_real *x, size_t n); /* y += x */
    /* x[i] += magnitude·u(key + i), u uniform in [-1, 1) (kernels/cpu/ops.h): the same bits everywhere */
    void (*add_uniform_noise)(zt_backend *be, zt_real *x, size_t n, uint64_t key, zt_real magnitude);
    /* dst[i] (+)= keep(i) ? src[i]·keep_scale : 0, keep(i) a function of key + i (kernels/cpu/ops.h) */
    void (*dropout)(zt_backend *be, zt_real *dst, const zt_real *src, size_t n, uint64_t key, uint64_t drop_below,
                    zt_real keep_scale, int accumulate);
    /* DoRA's row norms, output scaling and magnitude gradient (kernels/cpu/ops.h) */
    void (*row_norms)(zt_backend *be, zt_real *norm, const zt_real *x, int rows, int cols);
    void (*dora_forward)(zt_backend *be, zt_real *y, int ldy, const zt_real *v, const zt_real *bu, const zt_real *M,
                         const zt_real *norm, int N, int out);
    void (*dora_backward)(zt_backend *be, zt_real *gM, zt_real *de, zt_real *dv, const zt_real *dy, int ldy,
                          const zt_real *t, const zt_real *M, const zt_real *norm, int N, int out);
    void (*bias_forward)(zt_backend *be, zt_real *y, const zt_real *b, int N, int M);
    void (*bias_backward)(zt_backend *be, zt_real *db, const zt_real *dy, int N, int M);
    void (*cross_entropy)(zt_backend *be, zt_real *logits, double *loss_rows, const int32_t *targets, int n, int V,
                          zt_real grad_scale);
    /* optional (NULL: cross_entropy, then to_bf16): the gradient also in grad16, rounded to bf16
     * (kernels/cpu/ops.h: zt_cpu_cross_entropy_bf16) */
    void (*cross_entropy_bf16)(zt_backend *be, float *logits, double *loss_rows, const int32_t *targets, int n, int V,
                               float grad_scale, uint16_t *grad16);
    /* x[i, :] *= scale[i] for rows of width V (per-sequence or per-token loss weights) */
    void (*scale_rows)(zt_backend *be, zt_real *x, const zt_real *scale, int n, int V);

    /* The optimizer's kernels (lib/optim/adamw.h and clip.h on device memory): fp32 only. */
    /* A quantized base's weights decoded (kernels/cpu/nf4.h's dequantizers, the same bits on every
     * backend): NF4 codes with an absmax per block, double-quantized absmax values, int8 rows. */
    void (*nf4_dequantize)(zt_backend *be, const uint8_t *q, const float *absmax, size_t first, size_t n, float *y);
    void (*nf4_dq_dequantize)(zt_backend *be, const uint8_t *q, const float *b, float offset, size_t first, size_t n,
                              float *a);
    void (*int8_rows_dequantize)(zt_backend *be, const int8_t *q, const float *absmax, size_t cols, size_t row0,
                                 size_t nrows, float *y);
    /* Products of at most ZT_NF4_FEW_ROWS rows with NF4 weight rows decoded a piece at a time, in
     * nf4_dequantize's terms (kernels/cpu/nf4.h: zt_nf4_product, zt_nf4_product_t); NULL where
     * the backend has none (the products then decode tiles for the GEMM). */
    void (*nf4_product)(zt_backend *be, const uint8_t *q, const float *absmax, size_t first, int nr, int K,
                        const float *x, int M, float *y, int ldy, float beta);
    void (*nf4_product_t)(zt_backend *be, const uint8_t *q, const float *absmax, size_t first, int nr, int K,
                          const float *dy, int ldy, int M, float *dx, float beta);

    /* Collectives between the ranks' devices on device buffers (NCCL on CUDA), NULL where the
     * backend has none (lib/comm/comm_device.h goes through host memory then). coll_load says
     * whether this rank can use them at all (so that all ranks agree before any waits in
     * coll_open); coll_id makes a communicator's id on one rank, which every rank passes to
     * coll_open. A collective is queued
     * on the copy stream after the work queued so far, so that it runs beside the kernels queued
     * after it; *fence stands for it (fence_use before reading the result). Sizes, cuts and
     * in-place rules are those of lib/comm's MPI collectives (the all-gather's blocks cut at
     * recv_bytes; the reduce-scatter's n elements of send in blocks of n_per_rank, with room
     * elements readable and writable in place past which nothing is touched); sums run in the
     * backend's order. */
    zt_status (*coll_load)(zt_backend *be);
    zt_status (*coll_id)(zt_backend *be, unsigned char id[128]);
    zt_status (*coll_open)(zt_backend *be, const unsigned char id[128], int nranks, int rank, void **coll);
    void (*coll_close)(zt_backend *be, void *coll);
    zt_status (*coll_allgather)(zt_backend *be, void *coll, const void *send, void *recv, size_t bytes_per_rank,
                                size_t recv_bytes, uint64_t *fence);
    zt_status (*coll_reduce_scatter)(zt_backend *be, void *coll, const float *send, float *recv, size_t n_per_rank,
                                     size_t n, size_t room, uint64_t *fence);
    zt_status (*coll_allreduce)(zt_backend *be, void *coll, float *buf, size_t n, uint64_t *fence);

    void (*adamw)(zt_backend *be, const zt_adamw *h, float *param, const float *grad, float *m, float *v, size_t n,
                  float grad_scale, int apply_decay, uint16_t *param_bf16);
    /* AdamW with 8-bit moments over a table of blocks (lib/optim/adamw8bit.h: zt_adamw8_step and
     * zt_adamw8_finish; every array, the tables too, in the backend's memory) */
    void (*adamw8)(zt_backend *be, const zt_adamw8_piece *pieces, const zt_adamw8_block *blocks, size_t nb,
                   const zt_adamw8_cut *cut, size_t nc, float *param, const float *grad, uint8_t *q1, uint8_t *q2,
                   float *a1, float *a2, uint16_t *param16, float *held, float *slots);
    void (*adamw8_finish)(zt_backend *be, const zt_adamw8_release *r, size_t nr, uint8_t *q1, uint8_t *q2, float *a1,
                          float *a2, const float *held, const float *slots);
    double (*sumsq)(zt_backend *be, const float *x, size_t n); /* waits */
};

/* The CPU backend (a static table; never freed). */
zt_backend *zt_backend_cpu(void);
/* The CPU backend posing as a device (host_memory = 0), so that tests run the trainer's
 * device paths (host copies, uploads, downloads) without a GPU: ZT_CPU_AS_DEVICE=1. Its
 * upload_start and download_start copy only when a fence or an entry that waits needs them, as
 * late as a GPU might: a missing fence, or a host buffer changed too early, changes the results. */
zt_backend *zt_backend_cpu_as_device(void);
/* The CUDA backend on the current device (created once, never freed); fails naming the
 * reason when zt was built without CUDA or no usable GPU is found. */
zt_status zt_backend_cuda(zt_backend **be);
/* model.device: the CPU, CUDA, or auto (CUDA when a GPU is usable, else the CPU). */
typedef enum zt_device { ZT_DEVICE_AUTO, ZT_DEVICE_CPU, ZT_DEVICE_CUDA } zt_device;
extern const char *const zt_device_names[3]; /* "auto", "cpu", "cuda": indexed by zt_device */

/* The backend that device names. */
zt_status zt_backend_open(zt_device device, zt_backend **be);

#endif
