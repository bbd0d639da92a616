/* zt_gemm_bf16's and zt_cpu_gemm's products through oneDNN's matmul (the library PyTorch uses on
 * CPUs): its JIT kernels pick AMX, AVX-512 BF16 or AVX-512 at run time; zt uses them only at its
 * avx512-bf16 level (ZT_CPU). A and B are bf16 or fp32 (the product's type, part of each block's
 * geometry), C is fp32.
 *
 * zt keeps the threading: C is cut into blocks that depend on the shape and layout alone
 * (tiling()), and each block is one single-threaded oneDNN primitive, run by whichever thread
 * takes it. oneDNN left to thread a product itself splits K across threads for some shapes
 * (a weight gradient's long token axis), and then the result depends on the thread count;
 * this way every element sums its K products in an order fixed by the shape, as the
 * contract of gemm_bf16.h asks. The rows past the last whole block are padded to a multiple
 * of 16 where they are A's rows (stage_tail), so a row of C never depends on M. */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "gemm_bf16_kernel.h"
#include "lib/core/cpu.h"
#include "ops.h"

enum { BLOCK = 256, BAND = 128, ROWS = 16, CACHE = 512, KCHUNK = 256, SKINNY = 64, NARROW = 2048, SMALL_B = 1 << 22 };

/* One block's primitive: rows x cols of C over all of K, with the product's layout. Cached by
 * that geometry, so products of other row counts share it; the least recently used is evicted
 * when the cache is full (never one a thread is running). ok == 0: oneDNN has no fast kernel
 * for it here. */
typedef struct {
    dnnl_data_type_t type; /* A's and B's: dnnl_bf16 or dnnl_f32 */
    int ta, tb, rows, cols, K, lda, ldb, ldc;
    float alpha, beta;
    int packed; /* B given in the layout the kernel wants (b), made from B's by `pack` */
    int ok, users;
    unsigned long used;
    dnnl_primitive_t prim, pack;
    dnnl_memory_desc_t a, b, c, scratch, b_own; /* b_own: B's own layout, pack's source */
} block;

static struct {
    pthread_once_t once;
    pthread_mutex_t lock;
    dnnl_engine_t engine;
    char name[96];
    int n;
    unsigned long clock;
    block cache[CACHE];
} dn = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, NULL, "", 0, 0, {{0}}};
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

static int same_block(const block *b, const block *k)
{
    return b->type == k->type && b->ta == k->ta && b->tb == k->tb && b->rows == k->rows && b->cols == k->cols &&
           b->K == k->K && b->lda == k->lda && b->ldb == k->ldb && b->ldc == k->ldc && b->alpha == k->alpha &&
           b->beta == k->beta && b->packed == k->packed;
}

/* Makes b's primitive. Made while zt's thread count is 1, so that oneDNN plans it for one
 * thread (no split of K). A packed block takes B in the layout oneDNN's kernel chooses (b)
 * and gets the reorder that makes it from B's own layout (pack). impl_name, when not NULL,
 * gets the name of oneDNN's kernel. */
static void make_block(block *b, char impl_name[64])
{
    const int64_t lda = b->lda, ldb = b->ldb, ldc = b->ldc;
    dnnl_dims_t da = {b->rows, b->K}, db = {b->K, b->cols}, dc = {b->rows, b->cols};
    dnnl_dims_t sa = {b->ta ? 1 : lda, b->ta ? lda : 1}, sb = {b->tb ? 1 : ldb, b->tb ? ldb : 1}, sc = {ldc, 1};
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_primitive_desc_t pd = NULL;
    const char *impl = "ref";
    b->prim = b->pack = NULL;
    int ok = dnnl_memory_desc_init_by_strides(&b->a, 2, da, b->type, sa) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&b->b_own, 2, db, b->type, sb) == dnnl_success &&
             (b->packed ? dnnl_memory_desc_init_by_tag(&b->b, 2, db, b->type, dnnl_format_tag_any)
                        : dnnl_memory_desc_init_by_strides(&b->b, 2, db, b->type, sb)) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&b->c, 2, dc, dnnl_f32, sc) == dnnl_success &&
             dnnl_matmul_desc_init(&md, &b->a, &b->b, NULL, &b->c) == dnnl_success &&
             dnnl_primitive_attr_create(&attr) == dnnl_success &&
             dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
             (b->alpha == 1.0f || dnnl_primitive_attr_set_output_scales(attr, 1, 0, &b->alpha) == dnnl_success) &&
             (b->beta == 0.0f ||
              (dnnl_post_ops_create(&post) == dnnl_success && dnnl_post_ops_append_sum(post, b->beta) == dnnl_success &&
               dnnl_primitive_attr_set_post_ops(attr, post) == dnnl_success));
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, dn.engine, NULL) == dnnl_success &&
         dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && strncmp(impl, "ref", 3) &&
         dnnl_primitive_create(&b->prim, pd) == dnnl_success;
    if (ok) b->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (ok && impl_name) snprintf(impl_name, 64, "%s", impl);
    omp_set_num_threads(threads);
    dnnl_primitive_desc_t rpd = NULL;
    if (ok && b->packed) { /* the reorder runs on zt's threads (a copy: the same bits on any number) */
        b->b = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        ok = dnnl_reorder_primitive_desc_create(&rpd, &b->b_own, dn.engine, &b->b, dn.engine, NULL) == dnnl_success &&
             dnnl_primitive_create(&b->pack, rpd) == dnnl_success;
        if (rpd) dnnl_primitive_desc_destroy(rpd);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (post) dnnl_post_ops_destroy(post);
    if (attr) dnnl_primitive_attr_destroy(attr);
    b->ok = ok;
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
    block probe = {.type = dnnl_bf16,
                   .rows = BLOCK,
                   .cols = BLOCK,
                   .K = BLOCK,
                   .lda = BLOCK,
                   .ldb = BLOCK,
                   .ldc = BLOCK,
                   .alpha = 1.0f};
    char impl[64] = "";
    make_block(&probe, impl);
    if (!probe.ok) {
        dnnl_engine_destroy(dn.engine);
        dn.engine = NULL;
        return;
    }
    dnnl_primitive_destroy(probe.prim);
    const dnnl_version_t *v = dnnl_version();
    snprintf(dn.name, sizeof dn.name, "oneDNN %d.%d.%d %s", v->major, v->minor, v->patch, impl);
}

/* The cached block of geometry k, made on first use, held (users) until release(); NULL when
 * every entry is held. */
static block *acquire(const block *k)
{
    block *b = NULL, *lru = NULL;
    pthread_mutex_lock(&dn.lock);
    for (int i = 0; i < dn.n && !b; i++)
        if (same_block(&dn.cache[i], k)) b = &dn.cache[i];
    if (!b) {
        if (dn.n < CACHE) b = &dn.cache[dn.n++];
        else {
            for (int i = 0; i < CACHE; i++)
                if (!dn.cache[i].users && (!lru || dn.cache[i].used < lru->used)) lru = &dn.cache[i];
            if (lru && lru->prim) dnnl_primitive_destroy(lru->prim);
            if (lru && lru->pack) dnnl_primitive_destroy(lru->pack);
            b = lru;
        }
        if (b) {
            *b = *k;
            make_block(b, NULL);
        }
    }
    if (b) {
        b->users++;
        b->used = ++dn.clock;
    }
    pthread_mutex_unlock(&dn.lock);
    return b;
}

static void release(block *b)
{
    if (!b) return;
    pthread_mutex_lock(&dn.lock);
    b->users--;
    pthread_mutex_unlock(&dn.lock);
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

static int run_block(const block *p, const void *A, const void *B, float *C)
{
    thread_state *t = this_thread();
    if (!t) return 0;
    size_t sb = dnnl_memory_desc_get_size(&p->scratch);
    void *scratch = sb ? scratchpad(t, sb) : NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, ms = NULL;
    int ok = (scratch || !sb) && dnnl_memory_create(&ma, &p->a, dn.engine, (void *)A) == dnnl_success &&
             dnnl_memory_create(&mb, &p->b, dn.engine, (void *)B) == dnnl_success &&
             dnnl_memory_create(&mc, &p->c, dn.engine, C) == dnnl_success &&
             (!sb || dnnl_memory_create(&ms, &p->scratch, dn.engine, scratch) == dnnl_success);
    if (ok) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma},
                                  {DNNL_ARG_WEIGHTS, mb},
                                  {DNNL_ARG_DST, mc},
                                  {DNNL_ARG_SCRATCHPAD, ms}};
        /* on this thread alone, as the block was planned: a block run outside a parallel region
         * (a product of one block: a decoder's rows) would otherwise get every OpenMP thread,
         * and the fp32 brgemm kernel then overruns its one thread's scratchpad (a crash) */
        int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        ok = dnnl_primitive_execute(p->prim, t->stream, ms ? 4 : 3, args) == dnnl_success &&
             dnnl_stream_wait(t->stream) == dnnl_success;
        omp_set_num_threads(threads);
    }
    if (ma) dnnl_memory_destroy(ma);
    if (mb) dnnl_memory_destroy(mb);
    if (mc) dnnl_memory_destroy(mc);
    if (ms) dnnl_memory_destroy(ms);
    return ok;
}

/* B into the layout of p's kernel, at dst (dnnl_memory_desc_get_size(&p->b) bytes) */
static int pack_b(const block *p, const void *B, void *dst)
{
    thread_state *t = this_thread();
    dnnl_memory_t from = NULL, to = NULL;
    int ok = t && dnnl_memory_create(&from, &p->b_own, dn.engine, (void *)B) == dnnl_success &&
             dnnl_memory_create(&to, &p->b, dn.engine, dst) == dnnl_success;
    if (ok) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        ok = dnnl_primitive_execute(p->pack, t->stream, 2, args) == dnnl_success &&
             dnnl_stream_wait(t->stream) == dnnl_success;
    }
    if (from) dnnl_memory_destroy(from);
    if (to) dnnl_memory_destroy(to);
    return ok;
}

/* The rows of C past the last whole row block of a product whose rows are A's (transa == 0), when
 * their count is not a multiple of ROWS: copied with zero rows up to the next multiple into a
 * buffer of the calling thread and multiplied there. A row of C is then the same bits whatever
 * M is: AMX kernels treat a band of 1 row otherwise than a band of 16, and a block of 16·k rows
 * gives each row what a block of 256 gives it. */
typedef struct {
    int rows, padded;
    char *a;
    float *c;
} staged_tail;

/* an element's size: a product's A and B are bf16 or fp32 */
static size_t esize(dnnl_data_type_t type) { return type == dnnl_f32 ? 4 : 2; }

static int stage_tail(staged_tail *st, size_t es, int rows, int N, int K, float beta, const char *A, int lda,
                      const float *C, int ldc)
{
    static _Thread_local void *buf;
    static _Thread_local size_t size;
    st->rows = rows;
    st->padded = (rows + ROWS - 1) / ROWS * ROWS;
    size_t abytes = ((size_t)st->padded * K * es + 63) / 64 * 64;
    size_t bytes = abytes + (size_t)st->padded * N * sizeof(float);
    if (bytes > size) {
        free(buf);
        buf = aligned_alloc(64, (bytes + 63) / 64 * 64);
        size = buf ? bytes : 0;
        if (!buf) return 0;
    }
    st->a = buf;
    st->c = (float *)((char *)buf + abytes);
    for (int r = 0; r < rows; r++) {
        memcpy(st->a + (size_t)r * K * es, A + (size_t)r * lda * es, (size_t)K * es);
        if (beta != 0.0f) memcpy(st->c + (size_t)r * N, C + (size_t)r * ldc, (size_t)N * sizeof(float));
    }
    memset(st->a + (size_t)rows * K * es, 0, (size_t)(st->padded - rows) * K * es);
    memset(st->c + (size_t)(beta != 0.0f ? rows : 0) * N, 0,
           (size_t)(st->padded - (beta != 0.0f ? rows : 0)) * N * sizeof(float));
    return 1;
}

/* How a product is cut: row blocks of `rb` rows and column blocks of `cb` columns, chosen from
 * the shape and the layout alone. oneDNN's brgemm kernels take only dense operands: given a
 * strided block (a 256 x 256 block of a wider C, or of a transposed A's columns) oneDNN runs its
 * gemm:jit kernels, at half the speed of brgemm's with AMX on a layer's block, a third on an
 * attention block (measured on one core: a 256 x 256 block of the LM head's logits at 715 GFLOP/s
 * strided, 1634 dense). So:
 * - where B and C are dense and B is small (the layers' weights up to 4M elements,
 *   attention's keys and values), rows go in bands of BAND over all of C's columns (a large B,
 *   such as the LM head's, each band would read again from memory); a strided A's rows (an
 *   adapter's input gradient from a stacked projection's) are copied dense per band (pack_a);
 * - a small product of a transposed A (attention's dK and dV) is one block;
 * - a larger one with B and C dense and C narrow (a weight gradient: the layers', the head's)
 *   goes in bands of BLOCK rows over all columns, each band's columns of A copied into a dense
 *   buffer first (pack_a: what gemm:jit would do, then brgemm);
 * - else blocks of BLOCK x BLOCK; without transa each block's C is made in a dense buffer and
 *   copied to its place (dense_c: the LM head's logits). */
typedef struct {
    int rb, cb, pack_a, dense_c;
} cut;

static cut tiling(int transa, int transb, int M, int N, int K, int lda, int ldb, int ldc)
{
    int dense_bc = ldb == (transb ? K : N) && ldc == N, dense_a = lda == (transa ? M : K);
    int bands = dense_bc && !transa && (size_t)K * N <= SMALL_B;
    int whole = dense_bc && dense_a && transa && (size_t)M * N <= (size_t)1 << 16;
    int pack_a = transa ? !whole && dense_bc && N <= NARROW : bands && !dense_a;
    cut c = {.rb = bands ? BAND : whole ? M : BLOCK, .cb = bands || whole || pack_a ? N : BLOCK, .pack_a = pack_a};
    c.dense_c = !transa && c.cb < N;
    return c;
}

/* A thread's buffers for a block's packed A (pack_a) and dense C (dense_c), and for a
 * product's packed B */
enum { PACKED_A, DENSE_C, PACKED_B };
static void *block_buffer(int which, size_t bytes)
{
    static _Thread_local void *buf[3];
    static _Thread_local size_t size[3];
    if (bytes > size[which]) {
        free(buf[which]);
        buf[which] = aligned_alloc(64, (bytes + 63) / 64 * 64);
        size[which] = buf[which] ? bytes : 0;
    }
    return buf[which];
}

/* One block of the product: r x c of C at cc (rows ldc apart) from a and bb, through the dense
 * buffers the cut asks for; 0 when there is no memory for them or for oneDNN's objects. */
static int run_cut_block(const block *p, const cut *k, int transa, int r, int c, int K, float beta, const char *a,
                         int lda, const void *bb, float *cc, int ldc)
{
    size_t es = esize(p->type);
    if (k->pack_a) { /* the band of A (transposed: K rows of r; else r rows of K) made dense */
        char *pa = block_buffer(PACKED_A, (size_t)K * r * es);
        if (!pa) return 0;
        int lines = transa ? K : r, len = transa ? r : K;
        for (int q = 0; q < lines; q++) memcpy(pa + (size_t)q * len * es, a + (size_t)q * lda * es, (size_t)len * es);
        a = pa;
    }
    if (!k->dense_c) return run_block(p, a, bb, cc);
    float *dc = block_buffer(DENSE_C, (size_t)r * c * sizeof *dc);
    if (!dc) return 0;
    if (beta != 0.0f)
        for (int i = 0; i < r; i++) memcpy(dc + (size_t)i * c, cc + (size_t)i * ldc, (size_t)c * sizeof *dc);
    if (!run_block(p, a, bb, dc)) return 0;
    for (int i = 0; i < r; i++) memcpy(cc + (size_t)i * ldc, dc + (size_t)i * c, (size_t)c * sizeof *dc);
    return 1;
}

/* A block oneDNN could not run (no memory for its objects), on one thread: zt's kernel for bf16,
 * OpenBLAS for fp32 (C as oneDNN left it: untouched) */
static void own_block(dnnl_data_type_t type, int transa, int transb, int M, int N, int K, float alpha, const void *A,
                      int lda, const void *B, int ldb, float beta, float *C, int ldc)
{
    if (type == dnnl_f32)
        cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, M, N, K,
                    alpha, A, lda, B, ldb, beta, C, ldc);
    else zt_gemm_bf16_blocked(&zt_gemm_bf16_scalar, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* A skinny product of a transposed A (at most SKINNY rows or columns: an adapter's weight
 * gradient, r of them, over K tokens) is one small block that would run on one thread: K is cut
 * in chunks of KCHUNK instead, each chunk's product made on its own thread into a buffer, and
 * the chunks added to C in their order; the chunks depend on K alone, so the sums' order does
 * too. (Wider blocks, a small model's weight gradients, keep their single block: summed otherwise
 * they train otherwise, and the tests' chaotic runs are measured on that order.) */
static int split_k(dnnl_data_type_t type, int transb, int M, int N, int K, float alpha, const char *A, int lda,
                   const char *B, int ldb, float beta, float *C, int ldc)
{
    static _Thread_local float *buf;
    static _Thread_local size_t size;
    int chunks = (K + KCHUNK - 1) / KCHUNK, tail = K - (chunks - 1) * KCHUNK;
    size_t mn = (size_t)M * N, bytes = (size_t)chunks * mn * sizeof(float), es = esize(type);
    if (bytes > size) {
        free(buf);
        buf = aligned_alloc(64, (bytes + 63) / 64 * 64);
        size = buf ? bytes : 0;
        if (!buf) return 0;
    }
    float *part = buf; /* the calling thread's buffer, shared with the team below */
    block *blk[2] = {NULL, NULL};
    int ok = 1;
    for (int t = 0; t < 2 && ok; t++) { /* whole chunks, and the last when shorter */
        if ((t == 0 && chunks == 1 && tail < KCHUNK) || (t == 1 && tail == KCHUNK)) continue;
        block k = {.type = type,
                   .ta = 1,
                   .tb = transb,
                   .rows = M,
                   .cols = N,
                   .K = t ? tail : KCHUNK,
                   .lda = lda,
                   .ldb = ldb,
                   .ldc = N,
                   .alpha = alpha};
        blk[t] = acquire(&k);
        ok = blk[t] && blk[t]->ok;
    }
    if (ok) {
        size_t bks = transb ? 1 : (size_t)ldb; /* B's step from one k to the next */
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
        for (int c = 0; c < chunks; c++) {
            int k0 = c * KCHUNK, last = c == chunks - 1 && tail < KCHUNK;
            const char *a = A + (size_t)k0 * lda * es, *b = B + (size_t)k0 * bks * es;
            if (!run_block(blk[last], a, b, part + c * mn))
                own_block(type, 1, transb, M, N, last ? tail : KCHUNK, alpha, a, lda, b, ldb, 0.0f, part + c * mn, N);
        }
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float sum = 0.0f;
                for (int c = 0; c < chunks; c++) sum += part[c * mn + (size_t)i * N + j];
                float *cij = C + (size_t)i * ldc + j;
                *cij = beta == 0.0f ? sum : beta * *cij + sum;
            }
    }
    release(blk[0]);
    release(blk[1]);
    return ok;
}

/* The product of A and B of `type` as the blocks of tiling() cut it; 0 where oneDNN is not used
 * or could not make a block's primitive (C untouched). */
static int product(dnnl_data_type_t type, int transa, int transb, int M, int N, int K, float alpha, const char *A,
                   int lda, const char *B, int ldb, float beta, float *C, int ldc)
{
    pthread_once(&dn.once, init);
    if (!dn.engine || M <= 0 || N <= 0 || K <= 0 || alpha == 0.0f) return 0;
    cut k = tiling(transa, transb, M, N, K, lda, ldb, ldc);
    int rb = k.rb, cb = k.cb;
    if (transa && rb == M && cb == N && K > KCHUNK && (M <= SKINNY || N <= SKINNY))
        return split_k(type, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    size_t es = esize(type);
    int whole = M / rb * rb, tail = M - whole; /* rows in whole row blocks, and the rest */
    staged_tail st = {0};
    int staged = !transa && tail % ROWS;
    if (staged &&
        !stage_tail(&st, es, tail, N, K, beta, A + (size_t)whole * lda * es, lda, C + (size_t)whole * ldc, ldc))
        return 0;
    /* the blocks' geometries: [tail rows?][tail columns?]. Where every row block reads all of
     * B, B is packed once into the layout of the kernel (packed blocks) rather than by each
     * block again (into a buffer of the calling thread, so only a B of SMALL_B elements or
     * fewer: a weight gradient's B is the tokens' activations); a tail block whose kernel wants
     * another layout takes B as it is. */
    block *blk[2][2] = {{NULL}};
    int rows[2] = {rb, staged ? st.padded : tail}, cols[2] = {N < cb ? N : cb, N > cb ? N % cb : 0};
    int mblocks = whole / rb + (tail > 0), nblocks = (N + cb - 1) / cb;
    int ok = 1, packed = nblocks == 1 && mblocks > 1 && (size_t)K * N <= SMALL_B;
    for (int it = 0; it < 2; it++)
        for (int jt = 0; jt < 2; jt++) {
            if ((it == 0 && !whole) || !rows[it] || !cols[jt] || !ok) continue;
            int st_ = it && staged;
            block g = {.type = type,
                       .ta = transa,
                       .tb = transb,
                       .rows = rows[it],
                       .cols = cols[jt],
                       .K = K,
                       .lda = k.pack_a ? (transa ? rows[it] : K)
                              : st_    ? K
                                       : lda,
                       .ldb = ldb,
                       .ldc = k.dense_c ? cols[jt]
                              : st_     ? N
                                        : ldc,
                       .alpha = alpha,
                       .beta = beta,
                       .packed = packed};
            block *b = acquire(&g);
            if (packed && (!b || !b->ok || (it && !dnnl_memory_desc_equal(&b->b, &blk[0][0]->b)))) {
                if (!it) packed = 0; /* no kernel for packed B: every block takes B as it is */
                release(b);
                g.packed = 0;
                b = acquire(&g);
            }
            blk[it][jt] = b;
            ok = b && b->ok;
        }
    const void *packed_b = NULL;
    if (ok && packed) {
        void *buf = block_buffer(PACKED_B, dnnl_memory_desc_get_size(&blk[0][0]->b));
        ok = buf && pack_b(blk[0][0], B, buf);
        packed_b = buf;
    }
    if (ok) {
        size_t ars = transa ? 1 : (size_t)lda, bcs = transb ? (size_t)ldb : 1;
#pragma omp parallel for schedule(static) if (mblocks * nblocks > 1 && !omp_in_parallel())
        for (int b = 0; b < mblocks * nblocks; b++) {
            int i = b / nblocks * rb, j = b % nblocks * cb, it = i >= whole, jt = j + cb > N && N > cb;
            /* a staged tail's block is all its padded rows (a dense C or packed A of it too) */
            int r = !it ? rb : staged ? st.padded : tail, c = N - j < cb ? N - j : cb;
            const char *a = it && staged ? st.a : A + i * ars * es;
            float *cc = it && staged ? st.c + j : C + (size_t)i * ldc + j;
            const void *bb = blk[it][jt]->packed ? packed_b : B + j * bcs * es;
            /* a block oneDNN cannot run (no memory for its objects: C untouched) is zt's */
            int la = it && staged ? K : lda, lc = it && staged ? N : ldc;
            if (!run_cut_block(blk[it][jt], &k, transa, r, c, K, beta, a, la, bb, cc, lc))
                own_block(type, transa, transb, r, c, K, alpha, a, la, B + j * bcs * es, ldb, beta, cc, lc);
        }
        if (staged)
            for (int r = 0; r < tail; r++)
                memcpy(C + (size_t)(whole + r) * ldc, st.c + (size_t)r * N, (size_t)N * sizeof(float));
    }
    for (int it = 0; it < 2; it++)
        for (int jt = 0; jt < 2; jt++) release(blk[it][jt]);
    return ok;
}

int zt_gemm_bf16_dnnl(int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                      const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    return product(dnnl_bf16, transa, transb, M, N, K, alpha, (const char *)A, lda, (const char *)B, ldb, beta, C, ldc);
}

int zt_gemm_f32_dnnl(int transa, int transb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc)
{
    return product(dnnl_f32, transa, transb, M, N, K, alpha, (const char *)A, lda, (const char *)B, ldb, beta, C, ldc);
}

const char *zt_gemm_bf16_dnnl_name(void)
{
    pthread_once(&dn.once, init);
    return dn.engine ? dn.name : NULL;
}
