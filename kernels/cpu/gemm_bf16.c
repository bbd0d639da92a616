#include "gemm_bf16.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "gemm_bf16_kernel.h"
#include "ops.h"
#include "parallel.h"
#include "lib/core/arena.h"
#include "lib/core/cpu.h"
#include "lib/core/dtype.h"
#include "lib/core/status.h"

/* ---- reference -------------------------------------------------------------------------- */

void zt_gemm_bf16_ref(int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                      const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    size_t ars = transa ? 1 : (size_t)lda, aks = transa ? (size_t)lda : 1;
    size_t bcs = transb ? (size_t)ldb : 1, bks = transb ? 1 : (size_t)ldb;
#pragma omp parallel for schedule(static) if ((double)M * N * K > 1e6 && !omp_in_parallel())
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += zt_bf16_to_f32(A[i * ars + k * aks]) * zt_bf16_to_f32(B[j * bcs + k * bks]);
            float *c = &C[(size_t)i * ldc + j];
            *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
        }
}

/* ---- scalar tile ------------------------------------------------------------------------ */

/* The plain C kernel behind ZT_CPU=scalar: it sums each element's products in the order of
 * zt_gemm_bf16_ref (k = 0, 1, .. K-1 into one fp32 from 0, so the kernel takes K whole: kc = 0),
 * which keeps its results bitwise those of the plain loops. The speed comes from the MR x NR
 * independent sums the compiler spreads over SSE2 lanes, and from the packed panels. */
enum { SCALAR_MR = 4, SCALAR_NR = 8 };

static void tile_scalar(int units, const void *ap, const void *bp, float *c, size_t ldc, int m, int n, float alpha,
                        float beta)
{
    const float *a = ap, *b = bp;
    float acc[SCALAR_MR][SCALAR_NR] = {{0}};
    for (int k = 0; k < units; k++, a += SCALAR_MR, b += SCALAR_NR)
        for (int r = 0; r < SCALAR_MR; r++)
            for (int j = 0; j < SCALAR_NR; j++) acc[r][j] += a[r] * b[j];
    for (int r = 0; r < m; r++)
        for (int j = 0; j < n; j++) {
            float *cj = &c[r * ldc + j];
            *cj = beta == 0.0f ? alpha * acc[r][j] : alpha * acc[r][j] + beta * *cj;
        }
}

const zt_gemm_bf16_kernel zt_gemm_bf16_scalar = {
    .name = "scalar",
    .pack = ZT_GEMM_PACK_F32,
    .mr = SCALAR_MR,
    .nr = SCALAR_NR,
    .kc = 0,
    .mc = 64,
    .nc = 256,
    .tile = tile_scalar,
};

/* ---- packing ---------------------------------------------------------------------------- */

/* Packs one panel for kern: R rows of X (those past `rows` zero) over k in [0, kb), where
 * X(r, k) = x[r * rs + k * ks]; the layout is the one gemm_bf16_kernel.h describes. */
static void pack_panel(const zt_gemm_bf16_kernel *kern, const uint16_t *x, size_t rs, size_t ks, int rows, int R,
                       int kb, void *dst)
{
    zt_gemm_pack fmt = kern->pack;
    int units = fmt == ZT_GEMM_PACK_PAIRS ? (kb + 1) / 2 : kb;
    if (rows < R) memset(dst, 0, (size_t)units * R * 4);
    if (fmt == ZT_GEMM_PACK_F32) {
        float *d = dst;
        if (ks == 1 && kern->pack_rows) kern->pack_rows(x, rs, rows, R, kb, d);
        else if (rs == 1 && kern->pack_cols) kern->pack_cols(x, ks, rows, R, kb, d);
        else if (ks == 1) {
            for (int r = 0; r < rows; r++)
                for (int k = 0; k < kb; k++) d[(size_t)k * R + r] = zt_bf16_to_f32(x[r * rs + k]);
        } else {
            for (int k = 0; k < kb; k++)
                for (int r = 0; r < rows; r++) d[(size_t)k * R + r] = zt_bf16_to_f32(x[r * rs + k * ks]);
        }
        return;
    }
    uint32_t *d = dst;
    int pairs = kb / 2; /* full pairs; an odd last k is paired with 0 */
    if (ks == 1) {
        for (int r = 0; r < rows; r++) {
            const uint16_t *xr = x + r * rs;
            for (int p = 0; p < pairs; p++) d[(size_t)p * R + r] = xr[2 * p] | (uint32_t)xr[2 * p + 1] << 16;
            if (kb & 1) d[(size_t)pairs * R + r] = xr[kb - 1];
        }
    } else {
        for (int p = 0; p < pairs; p++) {
            const uint16_t *x0 = x + 2 * p * ks, *x1 = x0 + ks;
            for (int r = 0; r < rows; r++) d[(size_t)p * R + r] = x0[r * rs] | (uint32_t)x1[r * rs] << 16;
        }
        if (kb & 1)
            for (int r = 0; r < rows; r++) d[(size_t)pairs * R + r] = x[r * rs + (kb - 1) * ks];
    }
}

/* ---- blocked driver --------------------------------------------------------------------- */

static int div_up(int a, int b) { return (a + b - 1) / b; }
static int round_up(int a, int b) { return div_up(a, b) * b; }

/* The packing buffers stay with the calling thread between calls (a training step makes
 * thousands of calls of a few shapes). NULL when memory runs out. */
static void *workspace(size_t bytes)
{
    static _Thread_local void *buf;
    static _Thread_local size_t size;
    if (bytes > size) {
        zt_free(buf);
        buf = zt_calloc_aligned(bytes);
        size = buf ? bytes : 0;
    }
    return buf;
}

static void scale_c(int M, int N, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
}

void zt_gemm_bf16_blocked(const zt_gemm_bf16_kernel *kern, int transa, int transb, int M, int N, int K, float alpha,
                          const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    const int MR = kern->mr, NR = kern->nr;
    const int pairs = kern->pack == ZT_GEMM_PACK_PAIRS;
    /* K blocks depend on K alone, so every element sums its products in the same order
     * whatever the thread count; M and N blocks only decide who computes what. */
    int kblocks = kern->kc ? div_up(K, kern->kc) : 1;
    int kc = round_up(div_up(K, kblocks), 2);
    int nc = round_up(div_up(N, div_up(N, kern->nc)), NR);
    int threads = omp_in_parallel() || (double)M * N * K < 4e6 ? 1 : omp_get_max_threads();
    /* Row blocks come in a multiple of the thread count, block b holding A panels [b·P/mblocks,
     * (b+1)·P/mblocks) of the P, so each thread gets the same work to a panel; when there are
     * fewer row blocks than threads, the columns of a B block are split too. */
    const int apanels = div_up(M, MR);
    int mblocks = round_up(div_up(M, kern->mc), threads);
    if (mblocks > apanels) mblocks = apanels;
    int mc = div_up(apanels, mblocks) * MR; /* the most rows a block holds */
    int nsplit = mblocks < threads ? div_up(threads, mblocks) : 1;

    int units = pairs ? kc / 2 : kc;
    size_t b_bytes = (size_t)units * nc * 4, a_bytes = (size_t)units * mc * 4;
    char *ws = workspace(b_bytes + (size_t)threads * a_bytes);
    if (!ws) { /* no memory for packing: the unpacked loops still give the answer */
        zt_gemm_bf16_ref(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    size_t ars = transa ? 1 : (size_t)lda, aks = transa ? (size_t)lda : 1;
    size_t bcs = transb ? (size_t)ldb : 1, bks = transb ? 1 : (size_t)ldb;

#pragma omp parallel num_threads(threads)
    {
        char *apack = ws + b_bytes + (size_t)omp_get_thread_num() * a_bytes;
        for (int jc = 0; jc < N; jc += nc) {
            int nb = N - jc < nc ? N - jc : nc, npanels = div_up(nb, NR);
            for (int pc = 0; pc < K; pc += kc) {
                int kb = K - pc < kc ? K - pc : kc;
                int ku = pairs ? (kb + 1) / 2 : kb;
                float bet = pc == 0 ? beta : 1.0f;
#pragma omp for schedule(static)
                for (int jp = 0; jp < npanels; jp++) {
                    int j = jc + jp * NR, cols = N - j < NR ? N - j : NR;
                    pack_panel(kern, B + j * bcs + pc * bks, bcs, bks, cols, NR, kb,
                               ws + (size_t)jp * ku * NR * 4);
                }
#pragma omp for schedule(static)
                for (int item = 0; item < mblocks * nsplit; item++) {
                    int blk = item / nsplit, ic = (int)((long)blk * apanels / mblocks) * MR;
                    int iend = (int)((long)(blk + 1) * apanels / mblocks) * MR, mb = (iend < M ? iend : M) - ic;
                    int per = div_up(npanels, nsplit), jp0 = item % nsplit * per;
                    int jp1 = jp0 + per < npanels ? jp0 + per : npanels;
                    if (jp0 >= jp1) continue;
                    for (int ip = 0; ip * MR < mb; ip++) {
                        int rows = mb - ip * MR < MR ? mb - ip * MR : MR;
                        pack_panel(kern, A + (ic + ip * MR) * ars + pc * aks, ars, aks, rows, MR, kb,
                                   apack + (size_t)ip * ku * MR * 4);
                    }
                    for (int jp = jp0; jp < jp1; jp++) {
                        int j = jc + jp * NR, cols = N - j < NR ? N - j : NR;
                        const char *bp = ws + (size_t)jp * ku * NR * 4;
                        for (int ip = 0; ip * MR < mb; ip++) {
                            int i = ic + ip * MR, rows = M - i < MR ? M - i : MR;
                            kern->tile(ku, apack + (size_t)ip * ku * MR * 4, bp, C + (size_t)i * ldc + j, ldc, rows,
                                       cols, alpha, bet);
                        }
                    }
                }
            }
        }
    }
}

/* ---- entry points ----------------------------------------------------------------------- */

void zt_gemm_bf16(int transa, int transb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                  const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    ZT_ASSERT(M >= 0 && N >= 0 && K >= 0);
    ZT_ASSERT(lda >= (transa ? M : K) && ldb >= (transb ? K : N) && ldc >= N);
    if (zt_gemm_dnnl_takes(transa, M, N, K) &&
        zt_gemm_bf16_dnnl(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    if (zt_cpu_has(ZT_CPU_AVX512BF16))
        zt_gemm_bf16_blocked(&zt_gemm_bf16_avx512bf16, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else if (zt_cpu_has(ZT_CPU_AVX2))
        zt_gemm_bf16_blocked(&zt_gemm_bf16_avx2, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else zt_gemm_bf16_blocked(&zt_gemm_bf16_scalar, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char *zt_gemm_bf16_name(void)
{
    static char own[32];
    const char *dnnl = zt_gemm_bf16_dnnl_name();
    if (dnnl) return dnnl;
    snprintf(own, sizeof own, "zt %s", zt_cpu_level_name());
    return own;
}

void zt_f32_to_bf16_run_scalar(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = zt_f32_to_bf16(src[i]);
}

typedef struct {
    uint16_t *dst;
    const float *src;
    void (*run)(uint16_t *, const float *, size_t);
} convert_job;

static void convert_piece(void *ctx, size_t i, size_t k)
{
    const convert_job *j = ctx;
    j->run(j->dst + i, j->src + i, k);
}

void zt_f32_to_bf16_array(uint16_t *dst, const float *src, size_t n)
{
    const size_t chunk = (size_t)1 << 16;
    convert_job j = {dst, src, zt_cpu_has(ZT_CPU_AVX2) ? zt_f32_to_bf16_run_avx2 : zt_f32_to_bf16_run_scalar};
    zt_parallel_pieces(n, chunk, 4 * chunk, convert_piece, &j);
}
