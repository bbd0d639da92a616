/* backend: the device interface. Model and trainer code call only these entries;
 * each backend (CPU now, CUDA later) fills the table with its kernels. Buffers
 * passed to an entry live on that backend's device. The CPU backend is the
 * reference every other backend is tested against.
 *
 *     zt_backend *be = zt_backend_cpu();
 *     zt_real *x = be->alloc(be, n * sizeof(zt_real));
 *     be->rmsnorm_forward(be, y, rstd, x, w, N, C, eps);
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

typedef struct zt_backend zt_backend;

struct zt_backend {
    const char *name;

    void *(*alloc)(zt_backend *be, size_t bytes); /* zeroed; NULL when out of memory */
    void (*free)(zt_backend *be, void *p);
    /* The contents of [p, p + bytes) inside an allocation are no longer needed: its memory
     * may go back to the system (ZeRO stage 3 after a layer); it reads as zeros afterwards. */
    void (*discard)(zt_backend *be, void *p, size_t bytes);
    void (*memset0)(zt_backend *be, void *p, size_t bytes);
    void (*copy)(zt_backend *be, void *dst, const void *src, size_t bytes); /* device to device */

    void (*gemm)(zt_backend *be, int transa, int transb, int M, int N, int K, zt_real alpha, const zt_real *A,
                 int lda, const zt_real *B, int ldb, zt_real beta, zt_real *C, int ldc);
    /* bf16 × bf16 → fp32; to_bf16 rounds to nearest even */
    void (*gemm_bf16)(zt_backend *be, int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A,
                      int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);
    void (*to_bf16)(zt_backend *be, uint16_t *dst, const float *src, size_t n);

    void (*embedding_forward)(zt_backend *be, zt_real *out, const int32_t *ids, const zt_real *table, int N, int C);
    void (*embedding_backward)(zt_backend *be, zt_real *dtable, const zt_real *dout, const int32_t *ids, int N,
                               int C);
    void (*rmsnorm_forward)(zt_backend *be, zt_real *y, zt_real *rstd, const zt_real *x, const zt_real *w, int N,
                            int C, double eps);
    void (*rmsnorm_backward)(zt_backend *be, zt_real *dx, zt_real *dw, const zt_real *dy, const zt_real *x,
                             const zt_real *w, const zt_real *rstd, int N, int C);
    void (*rope)(zt_backend *be, zt_real *x, int N, int stride, int nheads, int D, const int32_t *pos,
                 const zt_real *cos_t, const zt_real *sin_t, int inverse);
    void (*attention_forward)(zt_backend *be, zt_real *out, zt_real *lse, const zt_real *qkv, const int32_t *pos,
                              int B, int T, int H, int KV, int D, int window);
    void (*attention_backward)(zt_backend *be, zt_real *dqkv, const zt_real *dout, const zt_real *qkv,
                               const zt_real *out, const zt_real *lse, const int32_t *pos, int B, int T, int H,
                               int KV, int D, int window);
    void (*attention_decode)(zt_backend *be, zt_real *out, const zt_real *q, int q_stride, const zt_real *k,
                             const zt_real *v, int kv_stride, int n, int p0, int H, int KV, int D, int window);
    void (*swiglu_forward)(zt_backend *be, zt_real *h, const zt_real *gateup, int N, int F);
    void (*swiglu_backward)(zt_backend *be, zt_real *dgateup, const zt_real *dh, const zt_real *gateup, int N,
                            int F);
    void (*bias_forward)(zt_backend *be, zt_real *y, const zt_real *b, int N, int M);
    void (*bias_backward)(zt_backend *be, zt_real *db, const zt_real *dy, int N, int M);
    void (*cross_entropy)(zt_backend *be, zt_real *logits, double *loss_rows, const int32_t *targets, int n, int V,
                          zt_real grad_scale);
};

/* The CPU backend (a static table; never freed). */
zt_backend *zt_backend_cpu(void);

#endif
