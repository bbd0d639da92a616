/* zt_gemm_bf16 through oneDNN's matmul (the library PyTorch uses on CPUs): its JIT kernels
 * pick AMX or AVX-512 BF16 at run time; zt uses them only at its avx512-bf16 level (ZT_CPU).
 *
 * zt keeps the threading: C is cut into blocks of BLOCK x BLOCK that depend on the shape
 * alone, and each block is one single-threaded oneDNN primitive, run by whichever thread
 * takes it. oneDNN left to thread a product itself splits K across threads for some shapes
 * (a weight gradient's long token axis), and then the result depends on the thread count;
 * this way every element sums its K products in an order fixed by the shape, as the
 * contract of gemm_bf16.h asks. */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_bf16_kernel.h"
#include "lib/core/cpu.h"

enum { BLOCK = 256, CACHE = 256 };

/* The primitives of one product: [row tail?][column tail?], NULL where that block does not
 * occur. ok == 0: oneDNN has no fast kernel for it here (zt's own runs instead). */
typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    int ok;
    dnnl_primitive_t prim[2][2];
    dnnl_memory_desc_t a[2], b[2], c[2][2], scratch[2][2];
} product;

static struct {
    pthread_once_t once;
    pthread_mutex_t lock;
    dnnl_engine_t engine;
    char name[96];
    int n;
    product cache[CACHE];
} dn = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, NULL, "", 0, {{0}}};

/* What each thread keeps between products: its stream (a oneDNN stream is not shared between
 * threads) and its scratchpad; freed when the thread ends (OpenMP ends threads when the team
 * size changes). */
typedef struct {
    dnnl_stream_t stream;
    void *scratch;
    size_t size;
} thread_state;

static pthread_key_t thread_key;

static void thread_state_free(void *arg)
{
    thread_state *t = arg;
    if (t->stream) dnnl_stream_destroy(t->stream);
    free(t->scratch);
    free(t);
}

static thread_state *this_thread(void)
{
    static _Thread_local thread_state *t;
    if (t) return t;
    thread_state *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    if (dnnl_stream_create(&n->stream, dn.engine, dnnl_stream_default_flags) != dnnl_success ||
        pthread_setspecific(thread_key, n)) {
        thread_state_free(n);
        return NULL;
    }
    return t = n;
}

static int same_key(const product *p, int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, float alpha,
                    float beta)
{
    return p->ta == ta && p->tb == tb && p->M == M && p->N == N && p->K == K && p->lda == lda && p->ldb == ldb &&
           p->ldc == ldc && p->alpha == alpha && p->beta == beta;
}

/* One block's primitive: rows x cols of C over all of K. Made while zt's thread count is 1,
 * so that oneDNN plans it for one thread (no split of K). impl_name, when not NULL, gets the
 * name of oneDNN's kernel. */
static dnnl_primitive_t make_block(product *p, int rows, int cols, int it, int jt, char impl_name[64])
{
    const int64_t lda = p->lda, ldb = p->ldb, ldc = p->ldc;
    dnnl_dims_t da = {rows, p->K}, db = {p->K, cols}, dc = {rows, cols};
    dnnl_dims_t sa = {p->ta ? 1 : lda, p->ta ? lda : 1}, sb = {p->tb ? 1 : ldb, p->tb ? ldb : 1}, sc = {ldc, 1};
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    const char *impl = "ref";
    int ok = dnnl_memory_desc_init_by_strides(&p->a[it], 2, da, dnnl_bf16, sa) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&p->b[jt], 2, db, dnnl_bf16, sb) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&p->c[it][jt], 2, dc, dnnl_f32, sc) == dnnl_success &&
             dnnl_matmul_desc_init(&md, &p->a[it], &p->b[jt], NULL, &p->c[it][jt]) == dnnl_success &&
             dnnl_primitive_attr_create(&attr) == dnnl_success &&
             dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
             (p->alpha == 1.0f || dnnl_primitive_attr_set_output_scales(attr, 1, 0, &p->alpha) == dnnl_success) &&
             (p->beta == 0.0f ||
              (dnnl_post_ops_create(&post) == dnnl_success && dnnl_post_ops_append_sum(post, p->beta) == dnnl_success &&
               dnnl_primitive_attr_set_post_ops(attr, post) == dnnl_success));
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, dn.engine, NULL) == dnnl_success &&
         dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && strncmp(impl, "ref", 3) &&
         dnnl_primitive_create(&prim, pd) == dnnl_success;
    if (ok) p->scratch[it][jt] = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (ok && impl_name) snprintf(impl_name, 64, "%s", impl);
    omp_set_num_threads(threads);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (post) dnnl_post_ops_destroy(post);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return ok ? prim : NULL;
}

static void init(void)
{
    /* Only where the CPU has AVX-512 BF16 (and AMX, where oneDNN finds it): its brgemm kernels
     * there sum each element over K in an order the block's row count does not change. Capped
     * lower (ZT_CPU=avx512), oneDNN runs gemm:jit, whose order does depend on it, and then a
     * micro-batch of 4 rows gives other values than one of 8 (t2300's 2 ranks against 1);
     * zt's kernels run there. ZT_DNNL=0 leaves every product to zt's kernels. */
    const char *off = getenv("ZT_DNNL");
    if (!zt_cpu_has(ZT_CPU_AVX512BF16) || (off && !strcmp(off, "0"))) return;
    if (pthread_key_create(&thread_key, thread_state_free)) return;
    if (dnnl_engine_create(&dn.engine, dnnl_cpu, 0) != dnnl_success) {
        dn.engine = NULL;
        return;
    }
    /* what oneDNN runs for a block of training size names the path (zt env, run.json); its
     * reference code is no faster than zt's kernels, so then zt's run everything */
    product probe = {.M = BLOCK, .N = BLOCK, .K = BLOCK, .lda = BLOCK, .ldb = BLOCK, .ldc = BLOCK, .alpha = 1.0f};
    char impl[64] = "";
    dnnl_primitive_t prim = make_block(&probe, BLOCK, BLOCK, 0, 0, impl);
    if (!prim) {
        dnnl_engine_destroy(dn.engine);
        dn.engine = NULL;
        return;
    }
    dnnl_primitive_destroy(prim);
    const dnnl_version_t *v = dnnl_version();
    snprintf(dn.name, sizeof dn.name, "oneDNN %d.%d.%d %s", v->major, v->minor, v->patch, impl);
}

/* The cached product for this call, made on first use; NULL when the cache is full. */
static product *lookup(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, float alpha, float beta)
{
    product *p = NULL;
    pthread_mutex_lock(&dn.lock);
    for (int i = 0; i < dn.n && !p; i++)
        if (same_key(&dn.cache[i], ta, tb, M, N, K, lda, ldb, ldc, alpha, beta)) p = &dn.cache[i];
    if (!p && dn.n < CACHE) {
        p = &dn.cache[dn.n++];
        *p = (product){.ta = ta,
                       .tb = tb,
                       .M = M,
                       .N = N,
                       .K = K,
                       .lda = lda,
                       .ldb = ldb,
                       .ldc = ldc,
                       .alpha = alpha,
                       .beta = beta,
                       .ok = 1};
        int rows[2] = {M < BLOCK ? M : BLOCK, M % BLOCK}, cols[2] = {N < BLOCK ? N : BLOCK, N % BLOCK};
        for (int it = 0; it < 2; it++)
            for (int jt = 0; jt < 2; jt++)
                if (rows[it] && cols[jt] && (it == 0 || M > BLOCK) && (jt == 0 || N > BLOCK) && p->ok)
                    p->ok = (p->prim[it][jt] = make_block(p, rows[it], cols[jt], it, jt, NULL)) != NULL;
    }
    pthread_mutex_unlock(&dn.lock);
    return p;
}

static void *scratchpad(thread_state *t, size_t bytes)
{
    if (bytes > t->size) {
        free(t->scratch);
        t->scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
        t->size = t->scratch ? bytes : 0;
    }
    return t->scratch;
}

static int run_block(const product *p, int it, int jt, const uint16_t *A, const uint16_t *B, float *C)
{
    thread_state *t = this_thread();
    if (!t) return 0;
    size_t sb = dnnl_memory_desc_get_size(&p->scratch[it][jt]);
    void *scratch = sb ? scratchpad(t, sb) : NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, ms = NULL;
    int ok = (scratch || !sb) && dnnl_memory_create(&ma, &p->a[it], dn.engine, (void *)A) == dnnl_success &&
             dnnl_memory_create(&mb, &p->b[jt], dn.engine, (void *)B) == dnnl_success &&
             dnnl_memory_create(&mc, &p->c[it][jt], dn.engine, C) == dnnl_success &&
             (!sb || dnnl_memory_create(&ms, &p->scratch[it][jt], dn.engine, scratch) == dnnl_success);
    if (ok) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma},
                                  {DNNL_ARG_WEIGHTS, mb},
                                  {DNNL_ARG_DST, mc},
                                  {DNNL_ARG_SCRATCHPAD, ms}};
        ok = dnnl_primitive_execute(p->prim[it][jt], t->stream, ms ? 4 : 3, args) == dnnl_success &&
             dnnl_stream_wait(t->stream) == dnnl_success;
    }
    if (ma) dnnl_memory_destroy(ma);
    if (mb) dnnl_memory_destroy(mb);
    if (mc) dnnl_memory_destroy(mc);
    if (ms) dnnl_memory_destroy(ms);
    return ok;
}

int zt_gemm_bf16_dnnl(int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                      const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    pthread_once(&dn.once, init);
    if (!dn.engine || M <= 0 || N <= 0 || K <= 0 || alpha == 0.0f) return 0;
    product *p = lookup(transa, transb, M, N, K, lda, ldb, ldc, alpha, beta);
    if (!p || !p->ok) return 0;
    int mblocks = (M + BLOCK - 1) / BLOCK, nblocks = (N + BLOCK - 1) / BLOCK;
    size_t ars = transa ? 1 : (size_t)lda, bcs = transb ? (size_t)ldb : 1;
#pragma omp parallel for schedule(static) if (mblocks * nblocks > 1 && !omp_in_parallel())
    for (int b = 0; b < mblocks * nblocks; b++) {
        int i = b / nblocks * BLOCK, j = b % nblocks * BLOCK;
        int rows = M - i < BLOCK ? M - i : BLOCK, cols = N - j < BLOCK ? N - j : BLOCK;
        const uint16_t *a = A + i * ars, *bb = B + j * bcs;
        float *c = C + (size_t)i * ldc + j;
        /* a block oneDNN cannot run (no memory for its objects: C untouched) is zt's */
        if (!run_block(p, i + BLOCK > M && M > BLOCK, j + BLOCK > N && N > BLOCK, a, bb, c))
            zt_gemm_bf16_blocked(&zt_gemm_bf16_scalar, transa, transb, rows, cols, K, alpha, a, lda, bb, ldb, beta, c,
                                 ldc);
    }
    return 1;
}

const char *zt_gemm_bf16_dnnl_name(void)
{
    pthread_once(&dn.once, init);
    return dn.engine ? dn.name : NULL;
}
