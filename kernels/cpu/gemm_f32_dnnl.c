/* Skinny fp32 products through oneDNN's matmul: a LoRA adapter's, where the rank (at most RANK)
 * is N or K (the forward's x·Aᵀ and u·Bᵀ, the input gradient's dy·B and du·A) or the rows of a
 * transposed A's product (the weight gradients duᵀ·x, and dyᵀ·u with N the rank), of at least
 * MACS multiply-adds (a decoder's few rows stay with OpenBLAS). OpenBLAS runs these at a quarter
 * to a third of its speed on a layer's product; oneDNN's brgemm kernels at 1.5-3.4x OpenBLAS on
 * them (bench/RESULTS.md, 2026-12-06). Only where zt uses oneDNN at all (the
 * avx512-bf16 level, ZT_DNNL not 0: gemm_bf16.h), and outside parallel regions: each product runs
 * on oneDNN's OpenMP threads, its primitive made once per geometry (the rows too) and cached, so
 * the result is the same for the same shape and thread count. */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_bf16_kernel.h"
#include "ops.h"

enum { RANK = 32, MACS = 1 << 20, CACHE = 256 };

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    int ok;
    unsigned long used;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c;
} product;

static struct {
    pthread_once_t once;
    pthread_mutex_t lock;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int n;
    unsigned long clock;
    product cache[CACHE];
} dn = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, 0, {{0}}};

/* only where the bf16 products run on oneDNN (its one switch: level, ZT_DNNL, a fast kernel) */
static void init(void)
{
    if (!zt_gemm_bf16_dnnl_name()) return;
    if (dnnl_engine_create(&dn.engine, dnnl_cpu, 0) != dnnl_success) {
        dn.engine = NULL;
        return;
    }
    if (dnnl_stream_create(&dn.stream, dn.engine, dnnl_stream_default_flags) != dnnl_success) {
        dnnl_engine_destroy(dn.engine);
        dn.engine = NULL;
    }
}

static int same(const product *p, const product *k)
{
    return p->ta == k->ta && p->tb == k->tb && p->M == k->M && p->N == k->N && p->K == k->K && p->lda == k->lda &&
           p->ldb == k->ldb && p->ldc == k->ldc && p->alpha == k->alpha && p->beta == k->beta;
}

/* p's primitive: alpha as the output scale, beta as a sum post-op; ok == 0 where oneDNN has only
 * its reference code for it (OpenBLAS is faster there) */
static void make(product *p)
{
    dnnl_dims_t da = {p->M, p->K}, db = {p->K, p->N}, dc = {p->M, p->N};
    dnnl_dims_t sa = {p->ta ? 1 : p->lda, p->ta ? p->lda : 1}, sb = {p->tb ? 1 : p->ldb, p->tb ? p->ldb : 1},
                sc = {p->ldc, 1};
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_primitive_desc_t pd = NULL;
    const char *impl = "ref";
    int ok = dnnl_memory_desc_init_by_strides(&p->a, 2, da, dnnl_f32, sa) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&p->b, 2, db, dnnl_f32, sb) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&p->c, 2, dc, dnnl_f32, sc) == dnnl_success &&
             dnnl_matmul_desc_init(&md, &p->a, &p->b, NULL, &p->c) == dnnl_success &&
             dnnl_primitive_attr_create(&attr) == dnnl_success &&
             (p->alpha == 1.0f || dnnl_primitive_attr_set_output_scales(attr, 1, 0, &p->alpha) == dnnl_success) &&
             (p->beta == 0.0f ||
              (dnnl_post_ops_create(&post) == dnnl_success && dnnl_post_ops_append_sum(post, p->beta) == dnnl_success &&
               dnnl_primitive_attr_set_post_ops(attr, post) == dnnl_success));
    ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, dn.engine, NULL) == dnnl_success &&
         dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && strncmp(impl, "ref", 3) &&
         dnnl_primitive_create(&p->prim, pd) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (post) dnnl_post_ops_destroy(post);
    if (attr) dnnl_primitive_attr_destroy(attr);
    p->ok = ok;
}

/* the cached product of geometry k, made on first use; the least recently used goes when full */
static product *find(const product *k)
{
    product *p = NULL;
    for (int i = 0; i < dn.n && !p; i++)
        if (same(&dn.cache[i], k)) p = &dn.cache[i];
    if (!p && dn.n < CACHE) p = &dn.cache[dn.n++];
    else if (!p) {
        p = &dn.cache[0];
        for (int i = 1; i < CACHE; i++)
            if (dn.cache[i].used < p->used) p = &dn.cache[i];
        if (p->prim) dnnl_primitive_destroy(p->prim);
    }
    if (!same(p, k) || !p->used) {
        *p = *k;
        make(p);
    }
    p->used = ++dn.clock;
    return p;
}

static int run(const product *p, const float *A, const float *B, float *C)
{
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    int ok = dnnl_memory_create(&ma, &p->a, dn.engine, (void *)A) == dnnl_success &&
             dnnl_memory_create(&mb, &p->b, dn.engine, (void *)B) == dnnl_success &&
             dnnl_memory_create(&mc, &p->c, dn.engine, C) == dnnl_success;
    if (ok) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
        ok = dnnl_primitive_execute(p->prim, dn.stream, 3, args) == dnnl_success &&
             dnnl_stream_wait(dn.stream) == dnnl_success;
    }
    if (ma) dnnl_memory_destroy(ma);
    if (mb) dnnl_memory_destroy(mb);
    if (mc) dnnl_memory_destroy(mc);
    return ok;
}

int zt_gemm_f32_skinny(int transa, int transb, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc)
{
    int skinny = N <= RANK || K <= RANK || (transa && M <= RANK);
    if (!skinny || M <= 0 || N <= 0 || K <= 0 || (double)M * N * K < MACS || omp_in_parallel()) return 0;
    pthread_once(&dn.once, init);
    if (!dn.engine) return 0;
    product k = {transa, transb, M, N, K, lda, ldb, ldc, alpha, beta, 0, 0, NULL, {0}, {0}, {0}};
    pthread_mutex_lock(&dn.lock);
    product *p = find(&k);
    int ok = p->ok && run(p, A, B, C); /* a failed run leaves C untouched: OpenBLAS makes it */
    pthread_mutex_unlock(&dn.lock);
    return ok;
}
