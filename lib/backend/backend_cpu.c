/* The CPU backend: host memory, kernels/cpu for the ops. */
#include "backend.h"

#include <stdlib.h>

#include "kernels/cpu/nf4.h"
#include "kernels/cpu/ops.h"
#include "lib/core/arena.h"
#include "lib/core/pages.h"
#include "lib/optim/clip.h"
#ifndef ZT_REAL_DOUBLE
#include "kernels/cpu/gemm_bf16.h"
#endif

static void *cpu_alloc(zt_backend *be, size_t bytes) { return zt_pages_alloc(bytes); }
static void cpu_free(zt_backend *be, void *p) { zt_pages_free(p); }
static void cpu_discard(zt_backend *be, void *p, size_t bytes) { zt_pages_discard(p, bytes); }
static void cpu_memset0(zt_backend *be, void *p, size_t bytes) { zt_cpu_zero(p, bytes); }
static void cpu_copy(zt_backend *be, void *dst, const void *src, size_t bytes) { zt_cpu_copy(dst, src, bytes); }
static void cpu_sync(zt_backend *be) {}
/* host memory: a copy is done when it returns */
static uint64_t cpu_copy_start(zt_backend *be, void *dst, const void *src, size_t bytes)
{
    zt_cpu_copy(dst, src, bytes);
    return 0;
}
static void cpu_fence(zt_backend *be, uint64_t fence) {}
/* pages come back on first touch */
static zt_status cpu_populate(zt_backend *be, void *p, size_t bytes) { return ZT_OK; }
static size_t cpu_memory_peak(zt_backend *be) { return 0; } /* the process's peak RSS tells */
static void cpu_adamw(zt_backend *be, const zt_adamw *h, float *param, const float *grad, float *m, float *v, size_t n,
                      float grad_scale, int apply_decay, uint16_t *param_bf16)
{
    zt_adamw_update(h, param, grad, m, v, n, grad_scale, apply_decay, param_bf16);
}
static void cpu_adamw8(zt_backend *be, const zt_adamw8_piece *pieces, const zt_adamw8_block *blocks, size_t nb,
                       const zt_adamw8_cut *cut, size_t nc, float *param, const float *grad, uint8_t *q1, uint8_t *q2,
                       float *a1, float *a2, uint16_t *param16, float *held, float *slots)
{
    zt_adamw8_step(pieces, blocks, nb, cut, nc, param, grad, q1, q2, a1, a2, param16, held, slots);
}
static void cpu_adamw8_finish(zt_backend *be, const zt_adamw8_release *r, size_t nr, uint8_t *q1, uint8_t *q2,
                              float *a1, float *a2, const float *held, const float *slots)
{
    zt_adamw8_finish(r, nr, q1, q2, a1, a2, held, slots);
}
static double cpu_sumsq(zt_backend *be, const float *x, size_t n) { return zt_sumsq(x, n); }
static void cpu_nf4_dequantize(zt_backend *be, const uint8_t *q, const float *absmax, size_t first, size_t n, float *y)
{
    zt_nf4_dequantize(q, absmax, first, n, y);
}
static void cpu_nf4_dq_dequantize(zt_backend *be, const uint8_t *q, const float *b, float offset, size_t first,
                                  size_t n, float *a)
{
    zt_nf4_dq_dequantize(q, b, offset, first, n, a);
}
static void cpu_nf4_product(zt_backend *be, const uint8_t *q, const float *absmax, size_t first, int nr, int K,
                            const float *x, int M, float *y, int ldy, float beta)
{
    zt_nf4_product(q, absmax, first, nr, K, x, M, y, ldy, beta);
}
static void cpu_nf4_product_t(zt_backend *be, const uint8_t *q, const float *absmax, size_t first, int nr, int K,
                              const float *dy, int ldy, int M, float *dx, float beta)
{
    zt_nf4_product_t(q, absmax, first, nr, K, dy, ldy, M, dx, beta);
}
static void cpu_int8_rows_dequantize(zt_backend *be, const int8_t *q, const float *absmax, size_t cols, size_t row0,
                                     size_t nrows, float *y)
{
    zt_int8_rows_dequantize(q, absmax, cols, row0, nrows, y);
}

static void cpu_gemm(zt_backend *be, int ta, int tb, int M, int N, int K, zt_real alpha, const zt_real *A, int lda,
                     const zt_real *B, int ldb, zt_real beta, zt_real *C, int ldc)
{
    zt_cpu_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#ifndef ZT_REAL_DOUBLE
static void cpu_gemm_bf16(zt_backend *be, int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                          const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    zt_gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
static void cpu_to_bf16(zt_backend *be, uint16_t *dst, const float *src, size_t n)
{
    zt_f32_to_bf16_array(dst, src, n);
}
static void cpu_attention_forward_bf16(zt_backend *be, float *out, float *lse, const float *qkv, const int32_t *pos,
                                       int B, int T, int H, int KV, int D, int window, double scale)
{
    zt_cpu_attention_forward_bf16(out, lse, qkv, pos, B, T, H, KV, D, window, scale);
}
static void cpu_attention_backward_bf16(zt_backend *be, float *dqkv, const float *dout, const float *qkv,
                                        const float *out, const float *lse, const int32_t *pos, int B, int T, int H,
                                        int KV, int D, int window, double scale)
{
    zt_cpu_attention_backward_bf16(dqkv, dout, qkv, out, lse, pos, B, T, H, KV, D, window, scale);
}
#endif

static void cpu_embedding_forward(zt_backend *be, zt_real *out, const int32_t *ids, const zt_real *table, int v0,
                                  int nv, int N, int C)
{
    zt_cpu_embedding_forward(out, ids, table, v0, nv, N, C);
}
static void cpu_embedding_backward(zt_backend *be, zt_real *dtable, const zt_real *dout, const int32_t *ids, int v0,
                                   int nv, int N, int C)
{
    zt_cpu_embedding_backward(dtable, dout, ids, v0, nv, N, C);
}
static void cpu_rmsnorm_forward(zt_backend *be, zt_real *y, uint16_t *y16, zt_real *rstd, const zt_real *x,
                                const zt_real *w, zt_real w_offset, int N, int C, double eps)
{
    zt_cpu_rmsnorm_forward(y, y16, rstd, x, w, w_offset, N, C, eps);
}
static void cpu_rmsnorm_backward(zt_backend *be, zt_real *dx, zt_real *dw, const zt_real *dy, const zt_real *x,
                                 const zt_real *w, zt_real w_offset, const zt_real *rstd, int N, int C)
{
    zt_cpu_rmsnorm_backward(dx, dw, dy, x, w, w_offset, rstd, N, C);
}
static void cpu_head_rmsnorm_forward(zt_backend *be, zt_real *x, zt_real *xin, zt_real *rstd, const zt_real *w,
                                     zt_real w_offset, int N, int stride, int nheads, int D, double eps)
{
    zt_cpu_head_rmsnorm_forward(x, xin, rstd, w, w_offset, N, stride, nheads, D, eps);
}
static void cpu_head_rmsnorm_backward(zt_backend *be, zt_real *dx, zt_real *dw, const zt_real *xin, const zt_real *w,
                                      zt_real w_offset, const zt_real *rstd, int N, int stride, int nheads, int D)
{
    zt_cpu_head_rmsnorm_backward(dx, dw, xin, w, w_offset, rstd, N, stride, nheads, D);
}
static void cpu_rope(zt_backend *be, zt_real *x, int N, int stride, int nheads, int D, int R, int interleaved,
                     const int32_t *pos, const zt_real *cos_t, const zt_real *sin_t, int inverse)
{
    zt_cpu_rope(x, N, stride, nheads, D, R, interleaved, pos, cos_t, sin_t, inverse);
}
static void cpu_attention_forward(zt_backend *be, zt_real *out, zt_real *lse, const zt_real *qkv, const int32_t *pos,
                                  int B, int T, int H, int KV, int D, int window, double scale, double softcap)
{
    zt_cpu_attention_forward(out, lse, qkv, pos, B, T, H, KV, D, window, scale, softcap);
}
static void cpu_attention_backward(zt_backend *be, zt_real *dqkv, const zt_real *dout, const zt_real *qkv,
                                   const zt_real *out, const zt_real *lse, const int32_t *pos, int B, int T, int H,
                                   int KV, int D, int window, double scale, double softcap)
{
    zt_cpu_attention_backward(dqkv, dout, qkv, out, lse, pos, B, T, H, KV, D, window, scale, softcap);
}
static void cpu_attention_decode(zt_backend *be, zt_real *out, const zt_real *q, int q_stride, const zt_real *k,
                                 const zt_real *v, int kv_stride, int n, int p0, int H, int KV, int D, int window,
                                 double scale, double softcap)
{
    zt_cpu_attention_decode(out, q, q_stride, k, v, kv_stride, n, p0, H, KV, D, window, scale, softcap);
}
static void cpu_swiglu_forward(zt_backend *be, zt_real *h, uint16_t *h16, const zt_real *gateup, int N, int F)
{
    zt_cpu_swiglu_forward(h, h16, gateup, N, F);
}
static void cpu_swiglu_backward(zt_backend *be, zt_real *dgateup, uint16_t *dgateup16, const zt_real *dh,
                                const zt_real *gateup, int N, int F)
{
    zt_cpu_swiglu_backward(dgateup, dgateup16, dh, gateup, N, F);
}
static void cpu_geglu_forward(zt_backend *be, zt_real *h, uint16_t *h16, const zt_real *gateup, int N, int F, int exact)
{
    zt_cpu_geglu_forward(h, h16, gateup, N, F, exact);
}
static void cpu_geglu_backward(zt_backend *be, zt_real *dgateup, uint16_t *dgateup16, const zt_real *dh,
                               const zt_real *gateup, int N, int F, int exact)
{
    zt_cpu_geglu_backward(dgateup, dgateup16, dh, gateup, N, F, exact);
}
static void cpu_softcap_forward(zt_backend *be, zt_real *x, size_t n, double cap) { zt_cpu_softcap_forward(x, n, cap); }
static void cpu_softcap_backward(zt_backend *be, zt_real *dx, const zt_real *y, size_t n, double cap)
{
    zt_cpu_softcap_backward(dx, y, n, cap);
}
static void cpu_scale(zt_backend *be, zt_real *x, size_t n, zt_real alpha) { zt_cpu_scale(x, n, alpha); }
static void cpu_add(zt_backend *be, zt_real *y, const zt_real *x, size_t n) { zt_cpu_add(y, x, n); }
static void cpu_add_uniform_noise(zt_backend *be, zt_real *x, size_t n, uint64_t key, zt_real magnitude)
{
    zt_cpu_add_uniform_noise(x, n, key, magnitude);
}
static void cpu_dropout(zt_backend *be, zt_real *dst, const zt_real *src, size_t n, uint64_t key, uint64_t drop_below,
                        zt_real keep_scale, int accumulate)
{
    zt_cpu_dropout(dst, src, n, key, drop_below, keep_scale, accumulate);
}
static void cpu_row_norms(zt_backend *be, zt_real *norm, const zt_real *x, int rows, int cols)
{
    zt_cpu_row_norms(norm, x, rows, cols);
}
static void cpu_dora_forward(zt_backend *be, zt_real *y, int ldy, const zt_real *v, const zt_real *bu, const zt_real *M,
                             const zt_real *norm, int N, int out)
{
    zt_cpu_dora_forward(y, ldy, v, bu, M, norm, N, out);
}
static void cpu_dora_backward(zt_backend *be, zt_real *gM, zt_real *de, zt_real *dv, const zt_real *dy, int ldy,
                              const zt_real *t, const zt_real *M, const zt_real *norm, int N, int out)
{
    zt_cpu_dora_backward(gM, de, dv, dy, ldy, t, M, norm, N, out);
}
static void cpu_bias_forward(zt_backend *be, zt_real *y, const zt_real *b, int N, int M)
{
    zt_cpu_bias_forward(y, b, N, M);
}
static void cpu_bias_backward(zt_backend *be, zt_real *db, const zt_real *dy, int N, int M)
{
    zt_cpu_bias_backward(db, dy, N, M);
}
static void cpu_cross_entropy(zt_backend *be, zt_real *logits, double *loss_rows, const int32_t *targets, int n, int V,
                              zt_real grad_scale)
{
    zt_cpu_cross_entropy(logits, loss_rows, targets, n, V, grad_scale);
}
#ifndef ZT_REAL_DOUBLE
static void cpu_cross_entropy_bf16(zt_backend *be, float *logits, double *loss_rows, const int32_t *targets, int n,
                                   int V, float grad_scale, uint16_t *grad16)
{
    zt_cpu_cross_entropy_bf16(logits, loss_rows, targets, n, V, grad_scale, grad16);
}
#endif
static void cpu_scale_rows(zt_backend *be, zt_real *x, const zt_real *scale, int n, int V)
{
    zt_cpu_scale_rows(x, scale, n, V);
}

static zt_backend cpu_backend = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .discard = cpu_discard,
    .populate = cpu_populate,
    .memory_peak = cpu_memory_peak,
    .memset0 = cpu_memset0,
    .copy = cpu_copy,
    .upload = cpu_copy,
    .download = cpu_copy,
    .sync = cpu_sync,
    .upload_start = cpu_copy_start,
    .download_start = cpu_copy_start,
    .fence_use = cpu_fence,
    .fence_wait = cpu_fence,
    .host_memory = 1,
    .gemm = cpu_gemm,
#ifndef ZT_REAL_DOUBLE
    .gemm_bf16 = cpu_gemm_bf16,
    .to_bf16 = cpu_to_bf16,
#endif
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .rmsnorm_forward = cpu_rmsnorm_forward,
    .rmsnorm_backward = cpu_rmsnorm_backward,
    .head_rmsnorm_forward = cpu_head_rmsnorm_forward,
    .head_rmsnorm_backward = cpu_head_rmsnorm_backward,
    .rope = cpu_rope,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
#ifndef ZT_REAL_DOUBLE
    .attention_forward_bf16 = cpu_attention_forward_bf16,
    .attention_backward_bf16 = cpu_attention_backward_bf16,
#endif
    .attention_decode = cpu_attention_decode,
    .swiglu_forward = cpu_swiglu_forward,
    .swiglu_backward = cpu_swiglu_backward,
    .geglu_forward = cpu_geglu_forward,
    .geglu_backward = cpu_geglu_backward,
    .softcap_forward = cpu_softcap_forward,
    .softcap_backward = cpu_softcap_backward,
    .scale = cpu_scale,
    .add = cpu_add,
    .add_uniform_noise = cpu_add_uniform_noise,
    .dropout = cpu_dropout,
    .row_norms = cpu_row_norms,
    .dora_forward = cpu_dora_forward,
    .dora_backward = cpu_dora_backward,
    .bias_forward = cpu_bias_forward,
    .bias_backward = cpu_bias_backward,
    .cross_entropy = cpu_cross_entropy,
#ifndef ZT_REAL_DOUBLE
    .cross_entropy_bf16 = cpu_cross_entropy_bf16,
#endif
    .scale_rows = cpu_scale_rows,
    .nf4_dequantize = cpu_nf4_dequantize,
    .nf4_dq_dequantize = cpu_nf4_dq_dequantize,
    .int8_rows_dequantize = cpu_int8_rows_dequantize,
    .nf4_product = cpu_nf4_product,
    .nf4_product_t = cpu_nf4_product_t,
    .adamw = cpu_adamw,
    .adamw8 = cpu_adamw8,
    .adamw8_finish = cpu_adamw8_finish,
    .sumsq = cpu_sumsq,
};

zt_backend *zt_backend_cpu(void) { return &cpu_backend; }

/* The CPU as a device: copies queued by upload_start and download_start, made late (backend.h).
 * Fence f stands for the first f copies; queue holds those not yet made, from copy number done. */
typedef struct late_copy {
    void *dst;
    const void *src;
    size_t bytes;
    void *taken; /* the source as it was when discard gave it back (then src), or NULL */
} late_copy;

static struct {
    late_copy *queue;
    size_t cap;
    uint64_t done, queued;
} late;

static void make_copies(uint64_t fence)
{
    for (; late.done < fence && late.done < late.queued; late.done++) {
        late_copy *c = &late.queue[late.done % late.cap];
        zt_cpu_copy(c->dst, c->src, c->bytes);
        free(c->taken);
    }
}

static void make_all(void) { make_copies(late.queued); }

static uint64_t late_start(zt_backend *be, void *dst, const void *src, size_t bytes)
{
    if (late.queued - late.done == late.cap) { /* full: grow the ring, the oldest first */
        size_t cap = late.cap ? 2 * late.cap : 64;
        late_copy *q = malloc(cap * sizeof *q);
        ZT_ASSERT(q);
        for (uint64_t k = late.done; k < late.queued; k++) q[k % cap] = late.queue[k % late.cap];
        free(late.queue);
        late.queue = q, late.cap = cap;
    }
    late.queue[late.queued % late.cap] = (late_copy){dst, src, bytes, NULL};
    return ++late.queued;
}

static void late_fence(zt_backend *be, uint64_t fence) { make_copies(fence); }
static void late_sync(zt_backend *be) { make_all(); }
static void late_free(zt_backend *be, void *p)
{
    make_all();
    zt_pages_free(p);
}
static int overlaps(const void *a, size_t n, const void *b, size_t m)
{
    const char *x = a, *y = b;
    return x < y + m && y < x + n;
}

/* A GPU gives the range back once the copies queued from and to it are done: a copy that reads
 * it keeps what it reads (still made only when needed, so that the host waits for it), the
 * copies that write it are made first (and those queued before them, in order). */
static void late_discard(zt_backend *be, void *p, size_t bytes)
{
    uint64_t writes = late.done;
    for (uint64_t k = late.done; k < late.queued; k++) {
        late_copy *c = &late.queue[k % late.cap];
        if (overlaps(c->dst, c->bytes, p, bytes)) writes = k + 1;
        if (!c->taken && overlaps(c->src, c->bytes, p, bytes)) {
            ZT_ASSERT((c->taken = malloc(c->bytes ? c->bytes : 1)));
            zt_cpu_copy(c->taken, c->src, c->bytes);
            c->src = c->taken;
        }
    }
    make_copies(writes);
    zt_pages_discard(p, bytes);
}
static void late_copy_now(zt_backend *be, void *dst, const void *src, size_t bytes)
{
    make_all();
    zt_cpu_copy(dst, src, bytes);
}

zt_backend *zt_backend_cpu_as_device(void)
{
    static zt_backend staged;
    if (!staged.name) {
        staged = cpu_backend;
        staged.name = "cpu (as a device)";
        staged.host_memory = 0;
        staged.upload_start = staged.download_start = late_start;
        staged.fence_use = staged.fence_wait = late_fence;
        staged.sync = late_sync;
        staged.free = late_free;
        staged.discard = late_discard;
        staged.upload = staged.download = late_copy_now;
    }
    return &staged;
}
