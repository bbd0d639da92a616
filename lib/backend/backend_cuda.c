/* The CUDA backend: device memory, kernels/cuda for the ops, everything queued in order on one
 * non-blocking stream. Entries that hand data to the host (upload, download, sumsq, free) wait
 * for the stream; the rest only enqueue. A failing CUDA call is a broken invariant: it aborts
 * (kernels/cuda/check.h); running out of device memory is not: alloc returns NULL, populate
 * ZT_ENOMEM. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "backend.h"
#include "coll_cuda.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/ops.h"
#include "profile_cuda.h"
#include "vmm_cuda.h"
#include "lib/optim/adamw_kernels.h"

#ifdef ZT_REAL_DOUBLE
#error "the CUDA backend is float only: zt_real must be float"
#endif

static cudaStream_t stream;
static zt_cuda_gemm_ctx *gemm_ctx;

/* upload_start and download_start (backend.h) copy on a stream of their own; fence f is the
 * event recorded after the f-th copy, kept in a ring (a later copy's event in the same slot
 * stands for it too: the copies run in order). */
enum { FENCES = 64 };
static cudaStream_t copies;
static cudaEvent_t fence_event[FENCES], joined;
static uint64_t fences_made;

/* ZT_CUDA_PROFILE: each entry marks where its work starts on the stream, named after the
 * function without its "cuda_" prefix (profile_cuda.h). */
#define MARK() zt_cuda_profile_mark(__func__ + sizeof "cuda_" - 1)

/* Waits for the work queued so far; a failure names the caller's line. */
#define wait_stream() wait_stream_at(__FILE__, __LINE__)
static void wait_stream_at(const char *file, int line)
{
    zt_cuda_profile_sync();
    cudaError_t e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) zt_cuda_fail("cudaStreamSynchronize(stream)", file, line, cudaGetErrorString(e), (int)e);
    if ((e = cudaStreamSynchronize(copies)) != cudaSuccess)
        zt_cuda_fail("cudaStreamSynchronize(copies)", file, line, cudaGetErrorString(e), (int)e);
    zt_cuda_profile_synced();
}

/* The work queued next on `after` waits for what is queued on `first` so far. */
static void order(cudaStream_t first, cudaStream_t after)
{
    ZT_CUDA_CHECK(cudaEventRecord(joined, first));
    ZT_CUDA_CHECK(cudaStreamWaitEvent(after, joined, 0));
}

/* The device's memory in use, at its highest so far (sampled where memory is taken) */
static size_t peak_in_use;

static void sample_memory(void)
{
    size_t free_b, total;
    if (cudaMemGetInfo(&free_b, &total) == cudaSuccess && total - free_b > peak_in_use) peak_in_use = total - free_b;
}

static size_t cuda_memory_peak(zt_backend *be) { return peak_in_use; }

/* Arrays of 1 MiB and more are granule-mapped (vmm_cuda.h) where the device allows it, so that
 * discard gives their memory back; the rest, and everything when that fails, come from cudaMalloc. */
static void *cuda_alloc(zt_backend *be, size_t bytes)
{
    void *p = NULL;
    for (int again = 0; !p && again < 2; again++) {
        if (again) zt_vmm_trim(); /* the granules kept for stage 3's next populate */
        p = bytes >= ((size_t)1 << 20) ? zt_vmm_alloc(bytes, stream) : NULL;
        if (!p && cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
            cudaGetLastError(); /* out of memory is reported by NULL, not left for the next launch check */
            p = NULL;
        }
    }
    if (!p) return NULL;
    if (!zt_vmm_owns(p)) ZT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
    sample_memory();
    return p;
}

static void cuda_free(zt_backend *be, void *p)
{
    if (!p) return;
    wait_stream();
    if (zt_vmm_owns(p)) zt_vmm_free(p);
    else ZT_CUDA_CHECK(cudaFree(p));
}

/* Page-locked host memory: copies to and from it run at the bus's full speed. */
static void *cuda_host_alloc(zt_backend *be, size_t bytes)
{
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static void cuda_host_free(zt_backend *be, void *p)
{
    if (p) ZT_CUDA_CHECK(cudaFreeHost(p));
}

static zt_status cuda_populate(zt_backend *be, void *p, size_t bytes)
{
    if (!zt_vmm_owns(p)) return ZT_OK;
    if (!zt_vmm_populate(p, bytes, stream)) {
        cudaGetLastError(); /* as in alloc: not left for the next launch check */
        size_t free_b = 0, total = 0;
        cudaMemGetInfo(&free_b, &total);
        return zt_fail(ZT_ENOMEM, "out of GPU memory mapping %zu bytes back (%zu of %zu bytes free)", bytes, free_b,
                       total);
    }
    sample_memory();
    return ZT_OK;
}

/* A granule-mapped array gives back the granules wholly inside the range (after the work
 * queued so far, which may still read them); the rest of the range is zeroed. */
static void cuda_discard(zt_backend *be, void *p, size_t bytes)
{
    MARK();
    if (!zt_vmm_owns(p)) {
        order(copies, stream); /* a copy queued from the range reads it first */
        ZT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
        return;
    }
    order(stream, copies); /* the range goes back once the kernels and the copies queued so far are done */
    zt_vmm_release(p, bytes, stream, copies);
}

static void cuda_memset0(zt_backend *be, void *p, size_t bytes)
{
    MARK();
    ZT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
}

static void cuda_copy(zt_backend *be, void *dst, const void *src, size_t bytes)
{
    MARK();
    ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

/* Waits: the caller may reuse the host buffer as soon as this returns. */
static void cuda_upload(zt_backend *be, void *dst, const void *src, size_t bytes)
{
    MARK();
    ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    wait_stream();
}

static void cuda_download(zt_backend *be, void *dst, const void *src, size_t bytes)
{
    MARK();
    ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
    wait_stream();
}

static void cuda_sync(zt_backend *be) { wait_stream(); }

/* The fence of what the copy stream holds so far. */
static uint64_t copies_fence(void)
{
    uint64_t f = ++fences_made;
    ZT_CUDA_CHECK(cudaEventRecord(fence_event[f % FENCES], copies));
    return f;
}

static uint64_t copy_start(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    order(stream, copies); /* after the kernels queued so far */
    ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, copies));
    return copies_fence();
}

static uint64_t cuda_upload_start(zt_backend *be, void *dst, const void *src, size_t bytes)
{
    return copy_start(dst, src, bytes, cudaMemcpyHostToDevice);
}

static uint64_t cuda_download_start(zt_backend *be, void *dst, const void *src, size_t bytes)
{
    return copy_start(dst, src, bytes, cudaMemcpyDeviceToHost);
}

static void cuda_fence_use(zt_backend *be, uint64_t fence)
{
    if (fence) ZT_CUDA_CHECK(cudaStreamWaitEvent(stream, fence_event[fence % FENCES], 0));
}

static void cuda_fence_wait(zt_backend *be, uint64_t fence)
{
    if (fence) ZT_CUDA_CHECK(cudaEventSynchronize(fence_event[fence % FENCES]));
}

/* A communicator and the scratch that a cut collective's whole blocks go through. */
typedef struct cuda_coll {
    void *nccl;
    char *scratch;
    size_t scratch_bytes;
} cuda_coll;

static zt_status cuda_coll_load(zt_backend *be) { return zt_nccl_load(); }

static zt_status cuda_coll_id(zt_backend *be, unsigned char id[128]) { return zt_nccl_id(id); }

static zt_status cuda_coll_open(zt_backend *be, const unsigned char id[128], int nranks, int rank, void **coll)
{
    cuda_coll *c = calloc(1, sizeof *c);
    *coll = NULL;
    if (!c) return zt_fail(ZT_ENOMEM, "out of memory");
    zt_status st = zt_nccl_open(id, nranks, rank, &c->nccl);
    if (st) {
        free(c);
        return st;
    }
    *coll = c;
    return ZT_OK;
}

static void cuda_coll_close(zt_backend *be, void *coll)
{
    cuda_coll *c = coll;
    if (!c) return;
    wait_stream();
    zt_nccl_close(c->nccl);
    if (c->scratch) ZT_CUDA_CHECK(cudaFree(c->scratch));
    free(c);
}

/* The scratch, at least bytes long; NULL when the GPU is out of memory. */
static char *scratch_of(cuda_coll *c, size_t bytes)
{
    if (bytes <= c->scratch_bytes) return c->scratch;
    ZT_CUDA_CHECK(cudaStreamSynchronize(copies)); /* the collectives queued may still use the old one */
    if (c->scratch) ZT_CUDA_CHECK(cudaFree(c->scratch));
    c->scratch_bytes = 0;
    if (cudaMalloc((void **)&c->scratch, bytes) != cudaSuccess) {
        cudaGetLastError();
        c->scratch = NULL;
        return NULL;
    }
    c->scratch_bytes = bytes;
    return c->scratch;
}

static zt_status no_scratch(size_t bytes)
{
    return zt_fail(ZT_ENOMEM, "out of GPU memory for a %zu-byte collective's scratch", bytes);
}

/* NCCL moves whole blocks: a cut all-gather gathers into the scratch, then recv_bytes of it. */
static zt_status cuda_coll_allgather(zt_backend *be, void *coll, const void *send, void *recv, size_t block,
                                     size_t recv_bytes, uint64_t *fence)
{
    MARK();
    cuda_coll *c = coll;
    int nranks = 0, rank = 0;
    zt_nccl_shape(c->nccl, &nranks, &rank);
    size_t all = (size_t)nranks * block, at = (size_t)rank * block;
    size_t mine = recv_bytes > at ? (recv_bytes - at < block ? recv_bytes - at : block) : 0;
    order(stream, copies);
    zt_status st;
    if (recv_bytes == all) {
        st = zt_nccl_allgather(c->nccl, send, recv, block, copies);
    } else {
        char *w = scratch_of(c, all);
        if (!w) return no_scratch(all);
        ZT_CUDA_CHECK(cudaMemcpyAsync(w + at, send, mine, cudaMemcpyDeviceToDevice, copies));
        st = zt_nccl_allgather(c->nccl, w + at, w, block, copies);
        if (!st) ZT_CUDA_CHECK(cudaMemcpyAsync(recv, w, recv_bytes, cudaMemcpyDeviceToDevice, copies));
    }
    *fence = copies_fence();
    return st;
}

/* Without room for whole blocks, the reduce-scatter runs in the scratch, its tail zeros. */
static zt_status cuda_coll_reduce_scatter(zt_backend *be, void *coll, const float *send, float *recv, size_t block,
                                          size_t n, size_t room, uint64_t *fence)
{
    MARK();
    cuda_coll *c = coll;
    int nranks = 0, rank = 0;
    zt_nccl_shape(c->nccl, &nranks, &rank);
    size_t all = (size_t)nranks * block, at = (size_t)rank * block;
    order(stream, copies);
    zt_status st;
    if (room >= all) {
        st = zt_nccl_reduce_scatter(c->nccl, send, recv, block, copies);
    } else {
        float *w = (float *)scratch_of(c, all * sizeof(float));
        if (!w) return no_scratch(all * sizeof(float));
        size_t cut = at < n ? (n - at < block ? n - at : block) : 0;
        ZT_CUDA_CHECK(cudaMemcpyAsync(w, send, n * sizeof(float), cudaMemcpyDeviceToDevice, copies));
        ZT_CUDA_CHECK(cudaMemsetAsync(w + n, 0, (all - n) * sizeof(float), copies));
        st = zt_nccl_reduce_scatter(c->nccl, w, w + at, block, copies);
        if (!st && cut)
            ZT_CUDA_CHECK(cudaMemcpyAsync(recv, w + at, cut * sizeof(float), cudaMemcpyDeviceToDevice, copies));
    }
    *fence = copies_fence();
    return st;
}

static zt_status cuda_coll_allreduce(zt_backend *be, void *coll, float *buf, size_t n, uint64_t *fence)
{
    MARK();
    order(stream, copies);
    zt_status st = zt_nccl_allreduce(((cuda_coll *)coll)->nccl, buf, n, copies);
    *fence = copies_fence();
    return st;
}

static void cuda_gemm(zt_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc)
{
    MARK();
    zt_cuda_gemm_f32(gemm_ctx, stream, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void cuda_gemm_bf16(zt_backend *be, int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                           const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    MARK();
    zt_cuda_gemm_bf16(gemm_ctx, stream, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void cuda_to_bf16(zt_backend *be, uint16_t *dst, const float *src, size_t n)
{
    MARK();
    zt_cuda_to_bf16(stream, dst, src, n);
}

static void cuda_embedding_forward(zt_backend *be, float *out, const int32_t *ids, const float *table, int v0, int nv,
                                   int N, int C)
{
    MARK();
    zt_cuda_embedding_forward(stream, out, ids, table, v0, nv, N, C);
}

static void cuda_embedding_backward(zt_backend *be, float *dtable, const float *dout, const int32_t *ids, int v0,
                                    int nv, int N, int C)
{
    MARK();
    zt_cuda_embedding_backward(stream, dtable, dout, ids, v0, nv, N, C);
}

static void cuda_rmsnorm_forward(zt_backend *be, float *y, uint16_t *y16, float *rstd, const float *x, const float *w,
                                 float w_offset, int N, int C, double eps)
{
    MARK();
    zt_cuda_rmsnorm_forward(stream, y, y16, rstd, x, w, w_offset, N, C, eps);
}

static void cuda_rmsnorm_backward(zt_backend *be, float *dx, float *dw, const float *dy, const float *x, const float *w,
                                  float w_offset, const float *rstd, int N, int C)
{
    MARK();
    zt_cuda_rmsnorm_backward(stream, dx, dw, dy, x, w, w_offset, rstd, N, C);
}

static void cuda_head_rmsnorm_forward(zt_backend *be, float *x, float *xin, float *rstd, const float *w, float w_offset,
                                      int N, int stride, int nheads, int D, double eps)
{
    MARK();
    zt_cuda_head_rmsnorm_forward(stream, x, xin, rstd, w, w_offset, N, stride, nheads, D, eps);
}

static void cuda_head_rmsnorm_backward(zt_backend *be, float *dx, float *dw, const float *xin, const float *w,
                                       float w_offset, const float *rstd, int N, int stride, int nheads, int D)
{
    MARK();
    zt_cuda_head_rmsnorm_backward(stream, dx, dw, xin, w, w_offset, rstd, N, stride, nheads, D);
}

static void cuda_rope(zt_backend *be, float *x, int N, int stride, int nheads, int D, int R, int interleaved,
                      const int32_t *pos, const float *cos_t, const float *sin_t, int inverse)
{
    MARK();
    zt_cuda_rope(stream, x, N, stride, nheads, D, R, interleaved, pos, cos_t, sin_t, inverse);
}

static void cuda_attention_forward(zt_backend *be, float *out, float *lse, const float *qkv, const int32_t *pos, int B,
                                   int T, int H, int KV, int D, int window, double scale, double softcap)
{
    MARK();
    zt_cuda_attention_forward(stream, out, lse, qkv, pos, B, T, H, KV, D, window, scale, softcap);
}

static void cuda_attention_forward_bf16(zt_backend *be, float *out, float *lse, const float *qkv, const int32_t *pos,
                                        int B, int T, int H, int KV, int D, int window, double scale)
{
    MARK();
    zt_cuda_attention_forward_bf16(stream, out, lse, qkv, pos, B, T, H, KV, D, window, scale);
}

static void cuda_attention_backward_bf16(zt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                         const float *out, const float *lse, const int32_t *pos, int B, int T, int H,
                                         int KV, int D, int window, double scale)
{
    MARK();
    zt_cuda_attention_backward_bf16(stream, dqkv, dout, qkv, out, lse, pos, B, T, H, KV, D, window, scale);
}

static void cuda_attention_backward(zt_backend *be, float *dqkv, const float *dout, const float *qkv, const float *out,
                                    const float *lse, const int32_t *pos, int B, int T, int H, int KV, int D,
                                    int window, double scale, double softcap)
{
    MARK();
    zt_cuda_attention_backward(stream, dqkv, dout, qkv, out, lse, pos, B, T, H, KV, D, window, scale, softcap);
}

static void cuda_attention_decode(zt_backend *be, float *out, const float *q, int q_stride, const float *k,
                                  const float *v, int kv_stride, int n, int p0, int H, int KV, int D, int window,
                                  double scale, double softcap)
{
    MARK();
    zt_cuda_attention_decode(stream, out, q, q_stride, k, v, kv_stride, n, p0, H, KV, D, window, scale, softcap);
}

static void cuda_swiglu_forward(zt_backend *be, float *h, uint16_t *h16, const float *gateup, int N, int F)
{
    MARK();
    zt_cuda_swiglu_forward(stream, h, h16, gateup, N, F);
}

static void cuda_swiglu_backward(zt_backend *be, float *dgateup, uint16_t *dgateup16, const float *dh,
                                 const float *gateup, int N, int F)
{
    MARK();
    zt_cuda_swiglu_backward(stream, dgateup, dgateup16, dh, gateup, N, F);
}

static void cuda_geglu_forward(zt_backend *be, float *h, uint16_t *h16, const float *gateup, int N, int F, int exact)
{
    MARK();
    zt_cuda_geglu_forward(stream, h, h16, gateup, N, F, exact);
}

static void cuda_geglu_backward(zt_backend *be, float *dgateup, uint16_t *dgateup16, const float *dh,
                                const float *gateup, int N, int F, int exact)
{
    MARK();
    zt_cuda_geglu_backward(stream, dgateup, dgateup16, dh, gateup, N, F, exact);
}

static void cuda_softcap_forward(zt_backend *be, float *x, size_t n, double cap)
{
    MARK();
    zt_cuda_softcap_forward(stream, x, n, cap);
}

static void cuda_softcap_backward(zt_backend *be, float *dx, const float *y, size_t n, double cap)
{
    MARK();
    zt_cuda_softcap_backward(stream, dx, y, n, cap);
}

static void cuda_scale(zt_backend *be, float *x, size_t n, float alpha)
{
    MARK();
    zt_cuda_scale(stream, x, n, alpha);
}

static void cuda_add(zt_backend *be, float *y, const float *x, size_t n)
{
    MARK();
    zt_cuda_add(stream, y, x, n);
}

static void cuda_add_uniform_noise(zt_backend *be, float *x, size_t n, uint64_t key, float magnitude)
{
    MARK();
    zt_cuda_add_uniform_noise(stream, x, n, key, magnitude);
}

static void cuda_dropout(zt_backend *be, float *dst, const float *src, size_t n, uint64_t key, uint64_t drop_below,
                         float keep_scale, int accumulate)
{
    MARK();
    zt_cuda_dropout(stream, dst, src, n, key, drop_below, keep_scale, accumulate);
}

static void cuda_row_norms(zt_backend *be, float *norm, const float *x, int rows, int cols)
{
    MARK();
    zt_cuda_row_norms(stream, norm, x, rows, cols);
}

static void cuda_dora_forward(zt_backend *be, float *y, int ldy, const float *v, const float *bu, const float *M,
                              const float *norm, int N, int out)
{
    MARK();
    zt_cuda_dora_forward(stream, y, ldy, v, bu, M, norm, N, out);
}

static void cuda_dora_backward(zt_backend *be, float *gM, float *de, float *dv, const float *dy, int ldy,
                               const float *t, const float *M, const float *norm, int N, int out)
{
    MARK();
    zt_cuda_dora_backward(stream, gM, de, dv, dy, ldy, t, M, norm, N, out);
}

static void cuda_bias_forward(zt_backend *be, float *y, const float *b, int N, int M)
{
    MARK();
    zt_cuda_bias_forward(stream, y, b, N, M);
}

static void cuda_bias_backward(zt_backend *be, float *db, const float *dy, int N, int M)
{
    MARK();
    zt_cuda_bias_backward(stream, db, dy, N, M);
}

static void cuda_cross_entropy(zt_backend *be, float *logits, double *loss_rows, const int32_t *targets, int n, int V,
                               float grad_scale)
{
    MARK();
    zt_cuda_cross_entropy(stream, logits, loss_rows, targets, n, V, grad_scale);
}

static void cuda_cross_entropy_bf16(zt_backend *be, float *logits, double *loss_rows, const int32_t *targets, int n,
                                    int V, float grad_scale, uint16_t *grad16)
{
    MARK();
    zt_cuda_cross_entropy_bf16(stream, logits, loss_rows, targets, n, V, grad_scale, grad16);
}

static void cuda_scale_rows(zt_backend *be, float *x, const float *scale, int n, int V)
{
    MARK();
    zt_cuda_scale_rows(stream, x, scale, n, V);
}

static void cuda_adamw(zt_backend *be, const zt_adamw *h, float *param, const float *grad, float *m, float *v, size_t n,
                       float grad_scale, int apply_decay, uint16_t *param_bf16)
{
    MARK();
    zt_adamw_consts c = zt_adamw_consts_of(h, grad_scale, apply_decay);
    zt_cuda_adamw(stream, &c, param, grad, m, v, n, param_bf16);
}

static void cuda_adamw8(zt_backend *be, const zt_adamw8_piece *pieces, const zt_adamw8_block *blocks, size_t nb,
                        const zt_adamw8_cut *cut, size_t nc, float *param, const float *grad, uint8_t *q1, uint8_t *q2,
                        float *a1, float *a2, uint16_t *param16, float *held, float *slots)
{
    MARK();
    const zt_dyn8 *maps[2] = {zt_adamw8_map(0), zt_adamw8_map(1)};
    zt_cuda_adamw8(stream, maps, pieces, blocks, nb, cut, nc, param, grad, q1, q2, a1, a2, param16, held, slots);
}

static void cuda_adamw8_finish(zt_backend *be, const zt_adamw8_release *r, size_t nr, uint8_t *q1, uint8_t *q2,
                               float *a1, float *a2, const float *held, const float *slots)
{
    MARK();
    const zt_dyn8 *maps[2] = {zt_adamw8_map(0), zt_adamw8_map(1)};
    zt_cuda_adamw8_finish(stream, maps, r, nr, q1, q2, a1, a2, held, slots);
}

static void cuda_nf4_dequantize(zt_backend *be, const uint8_t *q, const float *absmax, size_t first, size_t n,
                                float *y)
{
    MARK();
    zt_cuda_nf4_dequantize(stream, q, absmax, first, n, y);
}

static void cuda_nf4_dq_dequantize(zt_backend *be, const uint8_t *q, const float *b, float offset, size_t first,
                                   size_t n, float *a)
{
    MARK();
    zt_cuda_nf4_dq_dequantize(stream, q, b, offset, first, n, a);
}

static void cuda_int8_rows_dequantize(zt_backend *be, const int8_t *q, const float *absmax, size_t cols, size_t row0,
                                      size_t nrows, float *y)
{
    MARK();
    zt_cuda_int8_rows_dequantize(stream, q, absmax, cols, row0, nrows, y);
}

static double cuda_sumsq(zt_backend *be, const float *x, size_t n)
{
    MARK();
    double v = zt_cuda_sumsq(stream, x, n); /* waits */
    zt_cuda_profile_sync();
    zt_cuda_profile_synced();
    return v;
}

static zt_backend cuda_backend = {
    .name = "cuda",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .populate = cuda_populate,
    .memory_peak = cuda_memory_peak,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .discard = cuda_discard,
    .memset0 = cuda_memset0,
    .copy = cuda_copy,
    .upload = cuda_upload,
    .download = cuda_download,
    .sync = cuda_sync,
    .upload_start = cuda_upload_start,
    .download_start = cuda_download_start,
    .fence_use = cuda_fence_use,
    .fence_wait = cuda_fence_wait,
    .coll_load = cuda_coll_load,
    .coll_id = cuda_coll_id,
    .coll_open = cuda_coll_open,
    .coll_close = cuda_coll_close,
    .coll_allgather = cuda_coll_allgather,
    .coll_reduce_scatter = cuda_coll_reduce_scatter,
    .coll_allreduce = cuda_coll_allreduce,
    .host_memory = 0,
    .gemm = cuda_gemm,
    .gemm_bf16 = cuda_gemm_bf16,
    .to_bf16 = cuda_to_bf16,
    .embedding_forward = cuda_embedding_forward,
    .embedding_backward = cuda_embedding_backward,
    .rmsnorm_forward = cuda_rmsnorm_forward,
    .rmsnorm_backward = cuda_rmsnorm_backward,
    .head_rmsnorm_forward = cuda_head_rmsnorm_forward,
    .head_rmsnorm_backward = cuda_head_rmsnorm_backward,
    .rope = cuda_rope,
    .attention_forward = cuda_attention_forward,
    .attention_backward = cuda_attention_backward,
    .attention_forward_bf16 = cuda_attention_forward_bf16,
    .attention_backward_bf16 = cuda_attention_backward_bf16,
    .attention_decode = cuda_attention_decode,
    .swiglu_forward = cuda_swiglu_forward,
    .swiglu_backward = cuda_swiglu_backward,
    .geglu_forward = cuda_geglu_forward,
    .geglu_backward = cuda_geglu_backward,
    .softcap_forward = cuda_softcap_forward,
    .softcap_backward = cuda_softcap_backward,
    .scale = cuda_scale,
    .add = cuda_add,
    .add_uniform_noise = cuda_add_uniform_noise,
    .dropout = cuda_dropout,
    .row_norms = cuda_row_norms,
    .dora_forward = cuda_dora_forward,
    .dora_backward = cuda_dora_backward,
    .bias_forward = cuda_bias_forward,
    .bias_backward = cuda_bias_backward,
    .cross_entropy = cuda_cross_entropy,
    .cross_entropy_bf16 = cuda_cross_entropy_bf16,
    .scale_rows = cuda_scale_rows,
    .nf4_dequantize = cuda_nf4_dequantize,
    .nf4_dq_dequantize = cuda_nf4_dq_dequantize,
    .int8_rows_dequantize = cuda_int8_rows_dequantize,
    .adamw = cuda_adamw,
    .adamw8 = cuda_adamw8,
    .adamw8_finish = cuda_adamw8_finish,
    .sumsq = cuda_sumsq,
};

/* The device is the process's current one (device 0 unless the caller chose another). A failed
 * first call leaves nothing behind, so a later call tries again. */
zt_status zt_backend_cuda_create(zt_backend **be)
{
    *be = NULL;
    if (gemm_ctx) {
        *be = &cuda_backend;
        return ZT_OK;
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return zt_fail(ZT_EUSER, "no CUDA device: %s", cudaGetErrorString(e));
    if (count == 0) return zt_fail(ZT_EUSER, "no CUDA device: the CUDA runtime found none");
    int dev = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess || (e = cudaSetDevice(dev)) != cudaSuccess)
        return zt_fail(ZT_EUSER, "no CUDA device: cannot use device %d: %s", dev, cudaGetErrorString(e));
    if (!stream && (e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess)
        return zt_fail(ZT_ERUNTIME, "CUDA device %d: cannot create a stream: %s", dev, cudaGetErrorString(e));
    if (!copies && (e = cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking)) != cudaSuccess)
        return zt_fail(ZT_ERUNTIME, "CUDA device %d: cannot create a stream: %s", dev, cudaGetErrorString(e));
    for (int i = 0; i < FENCES; i++)
        if (!fence_event[i] && (e = cudaEventCreateWithFlags(&fence_event[i], cudaEventDisableTiming)) != cudaSuccess)
            return zt_fail(ZT_ERUNTIME, "CUDA device %d: cannot create an event: %s", dev, cudaGetErrorString(e));
    if (!joined && (e = cudaEventCreateWithFlags(&joined, cudaEventDisableTiming)) != cudaSuccess)
        return zt_fail(ZT_ERUNTIME, "CUDA device %d: cannot create an event: %s", dev, cudaGetErrorString(e));
    zt_cuda_profile_init(stream);
    zt_vmm_init(dev); /* without it, arrays come from cudaMalloc and discard only zeroes */
    /* kernels take scratch with cudaMallocAsync: the pool keeps what it got instead of giving it back at each sync */
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    if ((e = cudaDeviceGetDefaultMemPool(&pool, dev)) != cudaSuccess ||
        (e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)) != cudaSuccess)
        return zt_fail(ZT_ERUNTIME, "CUDA device %d: cannot set up the memory pool: %s", dev, cudaGetErrorString(e));
    if (!(gemm_ctx = zt_cuda_gemm_init()))
        return zt_fail(ZT_ERUNTIME, "CUDA device %d: cannot set up cuBLASLt (see the message above)", dev);
    struct cudaDeviceProp p;
    int driver = 0;
    if (cudaGetDeviceProperties(&p, dev) == cudaSuccess) cuda_backend.memory_bytes = p.totalGlobalMem;
    if (cudaGetDeviceProperties(&p, dev) == cudaSuccess && cudaDriverGetVersion(&driver) == cudaSuccess)
        snprintf(cuda_backend.description, sizeof cuda_backend.description,
                 "device %d of %d: %.64s, %.0f GiB, sm_%d%d, %d multiprocessors, driver CUDA %d.%d", dev, count, p.name,
                 p.totalGlobalMem / 1073741824.0, p.major, p.minor, p.multiProcessorCount, driver / 1000,
                 driver % 1000 / 10);
    *be = &cuda_backend;
    return ZT_OK;
}
