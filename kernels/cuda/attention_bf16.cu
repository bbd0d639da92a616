/* Flash attention on tensor cores for bf16 models: attention.cu's contract (fp32 in and out, causal,
 * grouped-query, kernels/cpu/attention.c's document mask and window) with q, k, v, dout and the
 * probabilities rounded to bf16 for the products (mma.sync m16n8k16, fp32 accumulators) and the softmax
 * in fp32 registers. qkv (and dout) are first rounded into bf16 scratch copies, so that tiles stream
 * into shared memory with cp.async, two stages deep. Head dims 64 and 128; others go to attention.cu.
 *
 * Every block has 4 warps; warp w owns rows 16w..16w + 15 of the block's own 64-row tile (queries, or
 * keys in the dK, dV kernel) against all columns of the tile it streams. In an accumulator tile of
 * 16 rows × 8 columns, lane 4g + c holds rows g and g + 8, columns 2c and 2c + 1 (PTX ISA, mma.m16n8k16),
 * so a row's softmax statistics live in 4 neighbouring lanes, and two neighbouring accumulator tiles
 * are the A operand of the next product without a trip through shared memory.
 *
 * forward:  one block per (query tile, head, sequence), online softmax over the key tiles it sees.
 * backward: delta = rowsum(dO·O), dO rounded to bf16 on the way; one block per (key tile, kv head)
 *           accumulates dK, dV over the queries of the group's heads; one block per (query tile, head)
 *           accumulates dQ. No atomics: the results are deterministic. */
#include <cuda_bf16.h>
#include <limits.h>
#include <math.h>
#include <type_traits>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

typedef __nv_bfloat16 bf16;

#define AB_THREADS 128 /* 4 warps of 16 rows */
#define AB_ROWS 64     /* rows of a block's own tile; also the keys of a streamed key tile */
#define AB_LOG2E 1.4426950408889634f
#define AB_LN2 0.6931471805599453f

template <int D> struct ab_tile {
    static constexpr int LD = D + 8;             /* smem row stride (bf16): rows 16 bytes apart mod 128 */
    static constexpr int BQ = D <= 64 ? 64 : 32; /* queries per streamed tile of the dK, dV kernel */
    static constexpr size_t ROWS = sizeof(bf16) * AB_ROWS * LD, QROWS = sizeof(bf16) * BQ * LD;
};

/* --- PTX wrappers ------------------------------------------------------------------------------ */

__device__ __forceinline__ unsigned ab_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

/* 16 bytes global → shared, asynchronously; zeros (and no read) when !valid */
__device__ __forceinline__ void ab_cp16(void *dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(ab_smem_addr(dst)), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}

__device__ __forceinline__ void ab_cp4(void *dst, const void *src, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(ab_smem_addr(dst)), "l"(src),
                 "r"(valid ? 4 : 0)
                 : "memory");
}

__device__ __forceinline__ void ab_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/* this thread's copies landed, but for the newest group (the prefetch of the next stage) */
__device__ __forceinline__ void ab_wait_prefetch() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

/* four 8×8 b16 matrices; lanes 8i..8i + 7 address the rows of matrix i, which lands in r[i] */
__device__ __forceinline__ void ab_ldsm(uint32_t (&r)[4], const bf16 *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(ab_smem_addr(p))
                 : "memory");
}

__device__ __forceinline__ void ab_ldsm_trans(uint32_t (&r)[4], const bf16 *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(ab_smem_addr(p))
                 : "memory");
}

/* c += a·b, a 16×16 (row), b 16×8 (col), bf16 in, fp32 accumulators */
__device__ __forceinline__ void ab_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float ab_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* --- tiles and fragments ----------------------------------------------------------------------- */

/* dst[r][0..D) = src[r·stride..] for r < n, zeros for n <= r < ROWS (n >= 1: row 0 stands in as the
 * address of the rows not read) */
template <int D, int ROWS>
__device__ __forceinline__ void ab_load_rows(bf16 *dst, const bf16 *src, size_t stride, int n)
{
    constexpr int CH = D / 8; /* 16-byte chunks per row */
    static_assert(ROWS * CH % AB_THREADS == 0, "whole rounds of chunks");
#pragma unroll
    for (int e = threadIdx.x; e < ROWS * CH; e += AB_THREADS) {
        int r = e / CH, k = e % CH;
        ab_cp16(dst + r * (D + 8) + k * 8, src + (size_t)(r < n ? r : 0) * stride + k * 8, r < n);
    }
}

/* A operand (16 × 16) of tile rows r0.., columns k0.., a row-major smem tile */
template <int LD>
__device__ __forceinline__ void ab_frag_a(uint32_t (&a)[4], const bf16 *tile, int r0, int k0, int lane)
{
    ab_ldsm(a, tile + (r0 + (lane & 15)) * LD + k0 + (lane >> 4) * 8);
}

/* B operands of the 8-column tiles n0.. (b[0], b[1]) and n0 + 8.. (b[2], b[3]) over k0..k0 + 15, where
 * B = tileᵀ: the smem tile is stored [n][k] */
template <int LD>
__device__ __forceinline__ void ab_frag_bt(uint32_t (&b)[4], const bf16 *tile, int n0, int k0, int lane)
{
    ab_ldsm(b, tile + (n0 + (lane & 7) + (lane >> 4) * 8) * LD + k0 + ((lane >> 3) & 1) * 8);
}

/* the same where B = tile: the smem tile is stored [k][n] */
template <int LD>
__device__ __forceinline__ void ab_frag_b(uint32_t (&b)[4], const bf16 *tile, int k0, int n0, int lane)
{
    ab_ldsm_trans(b, tile + (k0 + (lane & 15)) * LD + n0 + (lane >> 4) * 8);
}

__device__ __forceinline__ uint32_t ab_pack(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return (uint32_t)__bfloat16_as_ushort(v.x) | (uint32_t)__bfloat16_as_ushort(v.y) << 16;
}

/* acc[j] = A[r0..r0 + 15, :D] · Bt[8j..8j + 7, :D]ᵀ for the N accumulator tiles (8N rows of Bt) */
template <int D, int N>
__device__ __forceinline__ void ab_dot_nt(float (&acc)[N][4], const bf16 *A, int r0, const bf16 *Bt, int lane)
{
    constexpr int LD = D + 8;
#pragma unroll
    for (int j = 0; j < N; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
    for (int k = 0; k < D; k += 16) {
        uint32_t a[4];
        ab_frag_a<LD>(a, A, r0, k, lane);
#pragma unroll
        for (int j = 0; j < N; j += 2) {
            uint32_t b[4];
            ab_frag_bt<LD>(b, Bt, 8 * j, k, lane);
            ab_mma(acc[j], a, b[0], b[1]);
            ab_mma(acc[j + 1], a, b[2], b[3]);
        }
    }
}

/* acc[j] += P · B[:, 8j..8j + 7]: P the 16 × 8K values of accumulator tiles p (rounded to bf16 here),
 * B the first 8K rows of a [k][n] smem tile */
template <int D, int K, int N>
__device__ __forceinline__ void ab_mac(float (&acc)[N][4], const float (&p)[K][4], const bf16 *B, int lane)
{
    constexpr int LD = D + 8;
#pragma unroll
    for (int j = 0; j < K; j += 2) {
        uint32_t a[4] = {ab_pack(p[j][0], p[j][1]), ab_pack(p[j][2], p[j][3]), ab_pack(p[j + 1][0], p[j + 1][1]),
                         ab_pack(p[j + 1][2], p[j + 1][3])};
#pragma unroll
        for (int n = 0; n < N; n += 2) {
            uint32_t b[4];
            ab_frag_b<LD>(b, B, 8 * j, 8 * n, lane);
            ab_mma(acc[n], a, b[0], b[1]);
            ab_mma(acc[n + 1], a, b[2], b[3]);
        }
    }
}

/* writes rows r0 and r0 + 8 of the accumulator tiles (times scale) to dst0, dst8 (null: row not written) */
template <int N>
__device__ __forceinline__ void ab_store_rows(float *dst0, float *dst8, const float (&acc)[N][4], float scale, int lane)
{
    int col = 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < N; j++) {
        if (dst0) *reinterpret_cast<float2 *>(dst0 + 8 * j + col) = make_float2(acc[j][0] * scale, acc[j][1] * scale);
        if (dst8) *reinterpret_cast<float2 *>(dst8 + 8 * j + col) = make_float2(acc[j][2] * scale, acc[j][3] * scale);
    }
}

/* First key query t (at document position pos_t) sees: its document's start, the window's, and 0. */
__device__ __forceinline__ int ab_first_key(int t, int pos_t, int window)
{
    int lo = t - pos_t;
    if (window > 0 && t - window + 1 > lo) lo = t - window + 1;
    return lo > 0 ? lo : 0;
}

/* Per-row first keys of query tile i0.. (n valid rows; the others get 0 and see what the tile's rows
 * see) into row_lo; their min and max into *lo_min, *lo_max. Ends with a barrier. */
__device__ void ab_query_rows(int *row_lo, int *lo_min, int *lo_max, const int32_t *pos, int i0, int n, int window)
{
    if (threadIdx.x == 0) *lo_min = INT_MAX, *lo_max = INT_MIN;
    __syncthreads();
    if (threadIdx.x < AB_ROWS) {
        int r = threadIdx.x, lo = 0;
        if (r < n) {
            lo = ab_first_key(i0 + r, pos[r], window);
            atomicMin(lo_min, lo);
            atomicMax(lo_max, lo);
        }
        row_lo[r] = lo;
    }
    __syncthreads();
}

/* --- forward ----------------------------------------------------------------------------------- */

struct ab_fwd_args {
    float *out, *lse;
    const bf16 *qkv; /* [B·T, (H + 2KV)·D] */
    const int32_t *pos;
    int T, H, KV, window;
    float scale_log2; /* log2(e) / sqrt(D): scores in base-2 units */
};

template <int D> static __global__ void __launch_bounds__(AB_THREADS) ab_forward_kernel(ab_fwd_args a)
{
    constexpr int LD = D + 8, NS = AB_ROWS / 8, NO = D / 8, TILE = AB_ROWS * LD;
    extern __shared__ uint4 ab_smem[];
    bf16 *Qs = reinterpret_cast<bf16 *>(ab_smem), *Ks = Qs + TILE, *Vs = Ks + 2 * TILE; /* K, V: 2 stages */
    __shared__ int row_lo[AB_ROWS], lo_min, lo_max;

    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, c = lane % 4;
    int i0 = (gridDim.x - 1 - blockIdx.x) * AB_ROWS; /* the longest tiles start first */
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (a.H / a.KV);
    int nq = min(AB_ROWS, a.T - i0), t_last = i0 + nq - 1;
    size_t S3 = (size_t)(a.H + 2 * a.KV) * D, row0 = (size_t)b * a.T;
    const bf16 *K = a.qkv + row0 * S3 + (size_t)(a.H + kvh) * D, *V = K + (size_t)a.KV * D;

    ab_load_rows<D, AB_ROWS>(Qs, a.qkv + (row0 + i0) * S3 + (size_t)h * D, S3, nq);
    ab_query_rows(row_lo, &lo_min, &lo_max, a.pos + row0 + i0, i0, nq, a.window);
    int k_begin = lo_min, n_tiles = t_last >= k_begin ? (t_last - k_begin) / AB_ROWS + 1 : 0;
    if (n_tiles > 0) {
        ab_load_rows<D, AB_ROWS>(Ks, K + (size_t)k_begin * S3, S3, min(AB_ROWS, t_last + 1 - k_begin));
        ab_load_rows<D, AB_ROWS>(Vs, V + (size_t)k_begin * S3, S3, min(AB_ROWS, t_last + 1 - k_begin));
    }
    ab_commit();

    int r0 = 16 * warp + g, t[2] = {i0 + r0, i0 + r0 + 8}, lo[2] = {row_lo[r0], row_lo[r0 + 8]};
    float o[NO][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < NO; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

    for (int it = 0; it < n_tiles; it++) {
        int k0 = k_begin + it * AB_ROWS, stage = it & 1;
        if (it + 1 < n_tiles) {
            int k1 = k0 + AB_ROWS, nk1 = min(AB_ROWS, t_last + 1 - k1);
            ab_load_rows<D, AB_ROWS>(Ks + (stage ^ 1) * TILE, K + (size_t)k1 * S3, S3, nk1);
            ab_load_rows<D, AB_ROWS>(Vs + (stage ^ 1) * TILE, V + (size_t)k1 * S3, S3, nk1);
        }
        ab_commit();
        ab_wait_prefetch();
        __syncthreads();

        float s[NS][4];
        ab_dot_nt<D, NS>(s, Qs, 16 * warp, Ks + stage * TILE, lane);
        /* keys past the diagonal (or the sequence), before a row's first key */
        if (k0 + AB_ROWS - 1 > i0 || k0 < lo_max) {
#pragma unroll
            for (int j = 0; j < NS; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int u = k0 + 8 * j + 2 * c + (e & 1), r = e >> 1;
                    if (u < lo[r] || u > t[r]) s[j][e] = -INFINITY;
                }
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < NS; j++) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            float m_new = fmaxf(m[r], mx * a.scale_log2);
            float m_use = m_new == -INFINITY ? 0.0f : m_new; /* a row that sees nothing yet keeps p = 0 */
            float alpha = ab_exp2(m[r] - m_use), sum = 0.0f;
#pragma unroll
            for (int j = 0; j < NS; j++)
#pragma unroll
                for (int e = 2 * r; e < 2 * r + 2; e++) {
                    s[j][e] = ab_exp2(fmaf(s[j][e], a.scale_log2, -m_use));
                    sum += s[j][e];
                }
            m[r] = m_new;
            l[r] = l[r] * alpha + sum; /* this lane's share of the row sum */
#pragma unroll
            for (int j = 0; j < NO; j++) o[j][2 * r] *= alpha, o[j][2 * r + 1] *= alpha;
        }
        ab_mac<D, NS, NO>(o, s, Vs + stage * TILE, lane);
        __syncthreads(); /* the stage is read before the next prefetch overwrites it */
    }

    float *dst[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float sum = l[r] + __shfl_xor_sync(0xffffffffu, l[r], 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        int row = r0 + 8 * r;
        dst[r] = row < nq ? a.out + (row0 + i0 + row) * a.H * D + (size_t)h * D : nullptr;
        l[r] = 1.0f / sum;
        if (row < nq && c == 0) a.lse[((size_t)b * a.H + h) * a.T + i0 + row] = (m[r] + log2f(sum)) * AB_LN2;
    }
#pragma unroll
    for (int j = 0; j < NO; j++) o[j][0] *= l[0], o[j][1] *= l[0], o[j][2] *= l[1], o[j][3] *= l[1];
    ab_store_rows<NO>(dst[0], dst[1], o, 1.0f, lane);
}

/* --- backward ---------------------------------------------------------------------------------- */

/* delta[b, h, t] = Σ_d dout·out (fp32) of query t, head h, and dout16 = dout rounded to bf16: one warp
 * per (row, head); D even */
static __global__ void ab_delta_kernel(float *delta, bf16 *dout16, const float *dout, const float *out, int N, int T,
                                       int H, int D)
{
    size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (w >= (size_t)N * H) return; /* whole warps */
    size_t n = w / H, at = w * D;   /* rows are [N, H·D]: (n·H + h)·D */
    int h = (int)(w % H);
    float acc = 0.0f;
    for (int d = 2 * lane; d < D; d += 64) {
        float2 dy = *reinterpret_cast<const float2 *>(dout + at + d);
        float2 y = *reinterpret_cast<const float2 *>(out + at + d);
        acc = fmaf(dy.x, y.x, fmaf(dy.y, y.y, acc));
        *reinterpret_cast<__nv_bfloat162 *>(dout16 + at + d) = __floats2bfloat162_rn(dy.x, dy.y);
    }
    acc = zt_warp_sum(acc);
    if (lane == 0) delta[((n / T) * H + h) * T + n % T] = acc;
}

struct ab_bwd_args {
    float *dqkv;
    const bf16 *qkv, *dout; /* bf16 copies: [B·T, (H + 2KV)·D], [B·T, H·D] */
    const float *lse, *delta;
    const int32_t *pos;
    int T, H, KV, window;
    float scale, scale_log2;
};

/* One stage of the dK, dV kernel's walk over (head, query tile) pairs: its smem buffers. */
struct ab_dkv_stage {
    bf16 *Q, *dO;
    int *pos;
    float *lse, *delta;
};

template <int D>
__device__ void ab_load_dkv_stage(const ab_bwd_args &a, const ab_dkv_stage &st, int b, int h, int q0)
{
    constexpr int BQ = ab_tile<D>::BQ;
    int nq = min(BQ, a.T - q0);
    size_t row = (size_t)b * a.T + q0;
    ab_load_rows<D, BQ>(st.Q, a.qkv + row * (a.H + 2 * a.KV) * D + (size_t)h * D, (size_t)(a.H + 2 * a.KV) * D, nq);
    ab_load_rows<D, BQ>(st.dO, a.dout + row * a.H * D + (size_t)h * D, (size_t)a.H * D, nq);
    if (threadIdx.x < BQ) {
        int r = threadIdx.x, rr = r < nq ? r : 0;
        size_t at = ((size_t)b * a.H + h) * a.T + q0 + rr;
        ab_cp4(st.pos + r, a.pos + row + rr, r < nq);
        ab_cp4(st.lse + r, a.lse + at, r < nq);
        ab_cp4(st.delta + r, a.delta + at, r < nq);
    }
}

/* One block per (key tile, kv head, sequence): dK = scale·Σ dSᵀQ, dV = Σ PᵀdO over the queries of every
 * head in the group that see the tile, BQ queries at a time. Scores are transposed: rows are keys,
 * columns queries. */
template <int D> static __global__ void __launch_bounds__(AB_THREADS) ab_backward_dkv_kernel(ab_bwd_args a)
{
    using C = ab_tile<D>;
    constexpr int LD = C::LD, BQ = C::BQ, NS = BQ / 8, NO = D / 8, TILE = AB_ROWS * LD, QTILE = BQ * LD;
    extern __shared__ uint4 ab_smem[];
    bf16 *Ks = reinterpret_cast<bf16 *>(ab_smem), *Vs = Ks + TILE, *Qs = Vs + TILE, *dOs = Qs + 2 * QTILE;
    __shared__ int pos_s[2][BQ];
    __shared__ __align__(8) float lse_s[2][BQ], delta_s[2][BQ];

    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, c = lane % 4;
    int k0 = blockIdx.x * AB_ROWS, kvh = blockIdx.y, b = blockIdx.z, group = a.H / a.KV;
    int nk = min(AB_ROWS, a.T - k0), k_last = k0 + nk - 1;
    size_t S3 = (size_t)(a.H + 2 * a.KV) * D, row0 = (size_t)b * a.T;
    ab_load_rows<D, AB_ROWS>(Ks, a.qkv + (row0 + k0) * S3 + (size_t)(a.H + kvh) * D, S3, nk);
    ab_load_rows<D, AB_ROWS>(Vs, a.qkv + (row0 + k0) * S3 + (size_t)(a.H + a.KV + kvh) * D, S3, nk);

    /* queries before k0 see none of these keys, nor those at k_last + window and later */
    int q_end = a.window > 0 && a.window < a.T - k_last ? k_last + a.window : a.T;
    int n_qtiles = (q_end - k0 + BQ - 1) / BQ, n_iters = group * n_qtiles;
    auto stage_of = [&](int s) {
        return ab_dkv_stage{Qs + s * QTILE, dOs + s * QTILE, pos_s[s], lse_s[s], delta_s[s]};
    };
    ab_load_dkv_stage<D>(a, stage_of(0), b, kvh * group, k0);
    ab_commit();

    int u[2] = {k0 + 16 * warp + g, k0 + 16 * warp + g + 8};
    float dk[NO][4], dv[NO][4];
#pragma unroll
    for (int j = 0; j < NO; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[j][e] = dv[j][e] = 0.0f;

    for (int it = 0; it < n_iters; it++) {
        int q0 = k0 + it % n_qtiles * BQ, nq = min(BQ, a.T - q0);
        ab_dkv_stage st = stage_of(it & 1);
        if (it + 1 < n_iters)
            ab_load_dkv_stage<D>(a, stage_of((it + 1) & 1), b, kvh * group + (it + 1) / n_qtiles,
                                 k0 + (it + 1) % n_qtiles * BQ);
        ab_commit();
        ab_wait_prefetch();
        /* each of the first BQ threads reads the row it copied; the barriers publish the rest */
        bool sees = false, partial = false;
        if (threadIdx.x < BQ) {
            int r = threadIdx.x, t = q0 + r;
            int lo = r < nq ? ab_first_key(t, st.pos[r], a.window) : INT_MAX;
            sees = lo <= k_last;
            partial = lo > k0 || t < k0 + AB_ROWS - 1; /* misses a key of the tile (or is past the end) */
        }
        if (!__syncthreads_or(sees)) continue; /* no query here sees these keys */
        bool masked = __syncthreads_or(partial);

        float p[NS][4], ds[NS][4];
        ab_dot_nt<D, NS>(p, Ks, 16 * warp, st.Q, lane); /* Sᵀ */
#pragma unroll
        for (int j = 0; j < NS; j++) {
            int q = 8 * j + 2 * c;
            float2 lse2 = *reinterpret_cast<const float2 *>(st.lse + q);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int qe = q + (e & 1), t = q0 + qe, key = u[e >> 1];
                bool keep = !masked || (qe < nq && key <= t && key >= ab_first_key(t, st.pos[qe], a.window));
                float l2 = (e & 1 ? lse2.y : lse2.x) * AB_LOG2E;
                p[j][e] = keep ? ab_exp2(fmaf(p[j][e], a.scale_log2, -l2)) : 0.0f;
            }
        }
        ab_dot_nt<D, NS>(ds, Vs, 16 * warp, st.dO, lane); /* dPᵀ */
#pragma unroll
        for (int j = 0; j < NS; j++) {
            float2 d = *reinterpret_cast<const float2 *>(st.delta + 8 * j + 2 * c);
            ds[j][0] = p[j][0] * (ds[j][0] - d.x), ds[j][1] = p[j][1] * (ds[j][1] - d.y);
            ds[j][2] = p[j][2] * (ds[j][2] - d.x), ds[j][3] = p[j][3] * (ds[j][3] - d.y);
        }
        ab_mac<D, NS, NO>(dv, p, st.dO, lane);
        ab_mac<D, NS, NO>(dk, ds, st.Q, lane);
        __syncthreads(); /* the stage is read before the next prefetch overwrites it */
    }

    int key = 16 * warp + g;
    float *dK = a.dqkv + (row0 + k0 + key) * S3 + (size_t)(a.H + kvh) * D, *dV = dK + (size_t)a.KV * D;
    ab_store_rows<NO>(key < nk ? dK : nullptr, key + 8 < nk ? dK + 8 * S3 : nullptr, dk, a.scale, lane);
    ab_store_rows<NO>(key < nk ? dV : nullptr, key + 8 < nk ? dV + 8 * S3 : nullptr, dv, 1.0f, lane);
}

/* One block per (query tile, head, sequence): dQ = scale·Σ dS·K over the key tiles it sees. */
template <int D> static __global__ void __launch_bounds__(AB_THREADS) ab_backward_dq_kernel(ab_bwd_args a)
{
    constexpr int LD = D + 8, NS = AB_ROWS / 8, NO = D / 8, TILE = AB_ROWS * LD;
    extern __shared__ uint4 ab_smem[];
    bf16 *Qs = reinterpret_cast<bf16 *>(ab_smem), *dOs = Qs + TILE, *Ks = dOs + TILE, *Vs = Ks + 2 * TILE;
    __shared__ int row_lo[AB_ROWS], lo_min, lo_max;

    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, c = lane % 4;
    int q0 = (gridDim.x - 1 - blockIdx.x) * AB_ROWS; /* the longest tiles start first */
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (a.H / a.KV);
    int nq = min(AB_ROWS, a.T - q0), q_last = q0 + nq - 1;
    size_t S3 = (size_t)(a.H + 2 * a.KV) * D, row0 = (size_t)b * a.T;
    const bf16 *K = a.qkv + row0 * S3 + (size_t)(a.H + kvh) * D, *V = K + (size_t)a.KV * D;

    ab_load_rows<D, AB_ROWS>(Qs, a.qkv + (row0 + q0) * S3 + (size_t)h * D, S3, nq);
    ab_load_rows<D, AB_ROWS>(dOs, a.dout + (row0 + q0) * a.H * D + (size_t)h * D, (size_t)a.H * D, nq);
    ab_query_rows(row_lo, &lo_min, &lo_max, a.pos + row0 + q0, q0, nq, a.window);
    int k_begin = lo_min, n_tiles = q_last >= k_begin ? (q_last - k_begin) / AB_ROWS + 1 : 0;
    if (n_tiles > 0) {
        ab_load_rows<D, AB_ROWS>(Ks, K + (size_t)k_begin * S3, S3, min(AB_ROWS, q_last + 1 - k_begin));
        ab_load_rows<D, AB_ROWS>(Vs, V + (size_t)k_begin * S3, S3, min(AB_ROWS, q_last + 1 - k_begin));
    }
    ab_commit();

    int r0 = 16 * warp + g, t[2] = {q0 + r0, q0 + r0 + 8}, lo[2] = {row_lo[r0], row_lo[r0 + 8]};
    float lse2[2], delta[2], dq[NO][4];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        size_t at = ((size_t)b * a.H + h) * a.T + t[r];
        bool valid = r0 + 8 * r < nq;
        lse2[r] = valid ? a.lse[at] * AB_LOG2E : 0.0f;
        delta[r] = valid ? a.delta[at] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < NO; j++) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;

    for (int it = 0; it < n_tiles; it++) {
        int k0 = k_begin + it * AB_ROWS, stage = it & 1;
        if (it + 1 < n_tiles) {
            int k1 = k0 + AB_ROWS, nk1 = min(AB_ROWS, q_last + 1 - k1);
            ab_load_rows<D, AB_ROWS>(Ks + (stage ^ 1) * TILE, K + (size_t)k1 * S3, S3, nk1);
            ab_load_rows<D, AB_ROWS>(Vs + (stage ^ 1) * TILE, V + (size_t)k1 * S3, S3, nk1);
        }
        ab_commit();
        ab_wait_prefetch();
        __syncthreads();

        const bf16 *Kt = Ks + stage * TILE;
        bool masked = k0 + AB_ROWS - 1 > q0 || k0 < lo_max;
        float p[NS][4], ds[NS][4];
        ab_dot_nt<D, NS>(p, Qs, 16 * warp, Kt, lane);
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int u = k0 + 8 * j + 2 * c + (e & 1), r = e >> 1;
                bool keep = !masked || (u >= lo[r] && u <= t[r]);
                p[j][e] = keep ? ab_exp2(fmaf(p[j][e], a.scale_log2, -lse2[r])) : 0.0f;
            }
        ab_dot_nt<D, NS>(ds, dOs, 16 * warp, Vs + stage * TILE, lane); /* dP */
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) ds[j][e] = p[j][e] * (ds[j][e] - delta[e >> 1]);
        ab_mac<D, NS, NO>(dq, ds, Kt, lane);
        __syncthreads(); /* the stage is read before the next prefetch overwrites it */
    }

    float *dQ = a.dqkv + (row0 + q0 + r0) * S3 + (size_t)h * D;
    ab_store_rows<NO>(r0 < nq ? dQ : nullptr, r0 + 8 < nq ? dQ + 8 * S3 : nullptr, dq, a.scale, lane);
}

/* --- launchers --------------------------------------------------------------------------------- */

/* Calls f(std::integral_constant<int, D>) for the head dims with a tensor-core path (64, 128). */
template <class F> static void ab_with_dim(int D, F &&f)
{
    if (D == 64) f(std::integral_constant<int, 64>{});
    else f(std::integral_constant<int, 128>{});
}

template <class Args>
static void ab_launch(void (*kernel)(Args), dim3 grid, size_t smem, cudaStream_t s, const Args &args, const char *what)
{
    ZT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kernel<<<grid, AB_THREADS, smem, s>>>(args);
    zt_cuda_check(what);
}

/* a bf16 copy of qkv in stream-ordered scratch */
static bf16 *ab_qkv_bf16(cudaStream_t s, const float *qkv, size_t n)
{
    bf16 *q16;
    ZT_CUDA_CHECK(cudaMallocAsync((void **)&q16, sizeof(bf16) * n, s));
    zt_cuda_to_bf16(s, reinterpret_cast<uint16_t *>(q16), qkv, n);
    return q16;
}

void zt_cuda_attention_forward_bf16(cudaStream_t s, float *out, float *lse, const float *qkv, const int32_t *pos,
                                    int B, int T, int H, int KV, int D, int window, double scale)
{
    if (D != 64 && D != 128) {
        zt_cuda_attention_forward(s, out, lse, qkv, pos, B, T, H, KV, D, window, scale, 0);
        return;
    }
    if (B <= 0 || T <= 0) return;
    bf16 *qkv16 = ab_qkv_bf16(s, qkv, (size_t)B * T * (H + 2 * KV) * D);
    ab_fwd_args a = {out, lse, qkv16, pos, T, H, KV, window, (float)(AB_LOG2E * scale)};
    dim3 grid((unsigned)zt_ceil_div(T, AB_ROWS), H, B);
    ab_with_dim(D, [&](auto d) {
        constexpr int DD = decltype(d)::value;
        ab_launch(ab_forward_kernel<DD>, grid, 5 * ab_tile<DD>::ROWS, s, a, "attention_forward_bf16");
    });
    ZT_CUDA_CHECK(cudaFreeAsync(qkv16, s));
}

void zt_cuda_attention_backward_bf16(cudaStream_t s, float *dqkv, const float *dout, const float *qkv,
                                     const float *out, const float *lse, const int32_t *pos, int B, int T, int H,
                                     int KV, int D, int window, double scale)
{
    if (D != 64 && D != 128) {
        zt_cuda_attention_backward(s, dqkv, dout, qkv, out, lse, pos, B, T, H, KV, D, window, scale, 0);
        return;
    }
    if (B <= 0 || T <= 0) return;
    size_t N = (size_t)B * T;
    bf16 *qkv16 = ab_qkv_bf16(s, qkv, N * (H + 2 * KV) * D), *dout16;
    float *delta;
    ZT_CUDA_CHECK(cudaMallocAsync((void **)&dout16, sizeof(bf16) * N * H * D, s));
    ZT_CUDA_CHECK(cudaMallocAsync((void **)&delta, sizeof(float) * N * H, s));
    ab_delta_kernel<<<(unsigned)zt_ceil_div(N * H * 32, 256), 256, 0, s>>>(delta, dout16, dout, out, (int)N, T, H, D);
    zt_cuda_check("attention_delta_bf16");
    ab_bwd_args a = {dqkv, qkv16, dout16, lse, delta, pos, T, H, KV, window, (float)scale, (float)(AB_LOG2E * scale)};
    unsigned tiles = (unsigned)zt_ceil_div(T, AB_ROWS);
    ab_with_dim(D, [&](auto d) {
        using C = ab_tile<decltype(d)::value>;
        ab_launch(ab_backward_dkv_kernel<decltype(d)::value>, dim3(tiles, KV, B), 2 * C::ROWS + 4 * C::QROWS, s, a,
                  "attention_backward_dkv_bf16");
        ab_launch(ab_backward_dq_kernel<decltype(d)::value>, dim3(tiles, H, B), 6 * C::ROWS, s, a,
                  "attention_backward_dq_bf16");
    });
    ZT_CUDA_CHECK(cudaFreeAsync(delta, s));
    ZT_CUDA_CHECK(cudaFreeAsync(dout16, s));
    ZT_CUDA_CHECK(cudaFreeAsync(qkv16, s));
}
