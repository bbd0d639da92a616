/* Flash attention in fp32: causal, grouped-query, with kernels/cpu/attention.c's document
 * mask, window, score scale and soft-capping. Every kernel works on tiles of BR rows (queries or keys) with 16×16
 * threads; a thread owns the rows ty + 16·i and the columns tx + 16·j of each BR×BR score
 * tile, so a row's 16 threads are 16 neighbouring lanes of one warp (shuffle reductions).
 * Head dims are padded with zeros to DP ∈ {16, 32, 64, 128, 256} in shared memory.
 *
 * forward: one block per (query tile, head, sequence), online softmax over the key tiles
 *          the tile can see; also serves decode (queries at p0.., no document mask).
 * backward (FlashAttention-2): delta = rowsum(dO·O); one block per (key tile, kv head)
 *          accumulates dK, dV over the queries of all heads of the group; one block per
 *          (query tile, head) accumulates dQ. No atomics: the results are deterministic. */
#include <limits.h>
#include <math.h>
#include <type_traits>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define ATTN_TX 16                  /* threads along a tile's columns (and rows) */
#define ATTN_THREADS (ATTN_TX * ATTN_TX)

template <int DP> struct attn_tile {
    static constexpr int BR = DP <= 128 ? 64 : 32; /* rows per tile */
    static constexpr int R = BR / ATTN_TX;         /* rows per thread */
    static constexpr int LD = DP + 4;              /* smem stride of [BR, DP] tiles: float4 rows, no bank conflicts */
    static constexpr int LDP = BR + 4;             /* smem stride of [BR, BR] tiles */
    static constexpr int CPT = DP / ATTN_TX;       /* columns of a [BR, DP] accumulator per thread */
    static constexpr size_t ROWS = sizeof(float) * BR * LD, SCORES = sizeof(float) * BR * LDP;
};

/* Column of a thread's c-th accumulator entry: float4 groups 64 apart (neighbouring lanes
 * read neighbouring float4s) when a thread has 4 or more, else a contiguous run. */
template <int DP> __device__ __forceinline__ int attn_col(int tx, int c)
{
    constexpr int CPT = attn_tile<DP>::CPT;
    return CPT >= 4 ? (c / 4) * 64 + tx * 4 + c % 4 : tx * CPT + c;
}

template <int DP>
__device__ __forceinline__ void attn_load_cols(float (&v)[attn_tile<DP>::CPT], const float *row, int tx)
{
    constexpr int CPT = attn_tile<DP>::CPT;
    if constexpr (CPT >= 4) {
#pragma unroll
        for (int m = 0; m < CPT / 4; m++) {
            float4 x = *reinterpret_cast<const float4 *>(row + m * 64 + tx * 4);
            v[4 * m] = x.x, v[4 * m + 1] = x.y, v[4 * m + 2] = x.z, v[4 * m + 3] = x.w;
        }
    } else {
#pragma unroll
        for (int c = 0; c < CPT; c++) v[c] = row[tx * CPT + c];
    }
}

/* dst[r, c] = src[r·stride + c] for r < nrows, c < D; zeros elsewhere in [BR, DP], so that
 * padded rows and columns add nothing (and no stale NaN meets a zero weight). */
template <int DP> __device__ void attn_load_rows(float *dst, const float *src, size_t stride, int nrows, int D)
{
    using C = attn_tile<DP>;
    for (int e = threadIdx.x; e < C::BR * DP; e += ATTN_THREADS) {
        int r = e / DP, c = e % DP;
        dst[r * C::LD + c] = r < nrows && c < D ? src[r * stride + c] : 0.0f;
    }
}

/* s[i][j] = A[ty + 16i] · B[tx + 16j] over DP, A and B [BR, DP] tiles in smem */
template <int DP>
__device__ __forceinline__ void attn_tile_dot(float (&s)[attn_tile<DP>::R][attn_tile<DP>::R], const float *A,
                                              const float *B, int ty, int tx)
{
    using C = attn_tile<DP>;
#pragma unroll
    for (int i = 0; i < C::R; i++)
#pragma unroll
        for (int j = 0; j < C::R; j++) s[i][j] = 0.0f;
#pragma unroll 2
    for (int d = 0; d < DP; d += 4) {
        float4 a[C::R], b[C::R];
#pragma unroll
        for (int i = 0; i < C::R; i++) a[i] = *reinterpret_cast<const float4 *>(A + (ty + ATTN_TX * i) * C::LD + d);
#pragma unroll
        for (int j = 0; j < C::R; j++) b[j] = *reinterpret_cast<const float4 *>(B + (tx + ATTN_TX * j) * C::LD + d);
#pragma unroll
        for (int i = 0; i < C::R; i++)
#pragma unroll
            for (int j = 0; j < C::R; j++) {
                float t = s[i][j];
                t = fmaf(a[i].x, b[j].x, t);
                t = fmaf(a[i].y, b[j].y, t);
                t = fmaf(a[i].z, b[j].z, t);
                s[i][j] = fmaf(a[i].w, b[j].w, t);
            }
    }
}

/* acc[i][c] += Σ_k P[ty + 16i, k] · M[k, attn_col(c)], P [BR, BR] and M [BR, DP] in smem */
template <int DP>
__device__ __forceinline__ void attn_tile_mac(float (&acc)[attn_tile<DP>::R][attn_tile<DP>::CPT], const float *P,
                                              const float *M, int ty, int tx)
{
    using C = attn_tile<DP>;
#pragma unroll 2
    for (int k = 0; k < C::BR; k += 4) {
        float4 p4[C::R];
#pragma unroll
        for (int i = 0; i < C::R; i++) p4[i] = *reinterpret_cast<const float4 *>(P + (ty + ATTN_TX * i) * C::LDP + k);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            float m[C::CPT];
            attn_load_cols<DP>(m, M + (k + kk) * C::LD, tx);
#pragma unroll
            for (int i = 0; i < C::R; i++) {
                float p = kk == 0 ? p4[i].x : kk == 1 ? p4[i].y : kk == 2 ? p4[i].z : p4[i].w;
#pragma unroll
                for (int c = 0; c < C::CPT; c++) acc[i][c] = fmaf(p, m[c], acc[i][c]);
            }
        }
    }
}

/* over the 16 lanes that share a tile row */
__device__ __forceinline__ float attn_row_max(float v)
{
    for (int o = ATTN_TX / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float attn_row_sum(float v)
{
    for (int o = ATTN_TX / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* First key query t sees: its document's start (t - pos, when pos is given), the window's,
 * and 0. The last is t itself. */
__device__ __forceinline__ int attn_first_key(const int32_t *pos, int t, int window)
{
    int lo = pos ? t - pos[0] : 0;
    if (window > 0 && t - window + 1 > lo) lo = t - window + 1;
    return lo > 0 ? lo : 0;
}

/* A scaled score s soft-capped (softcap > 0): softcap·tanh(s / softcap), with the derivative
 * 1 - tanh² in *slope when slope is given (1 without capping). */
__device__ __forceinline__ float attn_capped(float s, float softcap, float *slope)
{
    if (!(softcap > 0.0f)) {
        if (slope) *slope = 1.0f;
        return s;
    }
    float t = tanhf(s / softcap);
    if (slope) *slope = 1.0f - t * t;
    return t * softcap;
}

/* Sequence b's query i (position p0 + i) is row b·nq + i of q and out; its keys and values
 * are rows b·nq + u of k and v. Pointers are at head 0's (kv head 0's) first column. */
struct attn_fwd_args {
    float *out, *lse; /* lse [B, H, nq], may be null */
    const float *q, *k, *v;
    const int32_t *pos; /* [B, nq]; null: no document mask */
    size_t q_stride, kv_stride, out_stride;
    int nq, p0, H, KV, D, window;
    float scale, softcap; /* softcap > 0: scores softcap·tanh(s / softcap) */
};

template <int DP> static __global__ void __launch_bounds__(ATTN_THREADS) attn_forward_kernel(attn_fwd_args a)
{
    using C = attn_tile<DP>;
    extern __shared__ float4 attn_smem[];
    float *Qs = reinterpret_cast<float *>(attn_smem), *KVs = Qs + C::BR * C::LD, *Ps = KVs + C::BR * C::LD;
    __shared__ int row_lo[C::BR], tile_lo;

    int tx = threadIdx.x % ATTN_TX, ty = threadIdx.x / ATTN_TX;
    int i0 = (gridDim.x - 1 - blockIdx.x) * C::BR; /* the longest tiles start first */
    int h = blockIdx.y, b = blockIdx.z, g = h / (a.H / a.KV);
    int nq = min(C::BR, a.nq - i0), t0 = a.p0 + i0, t_last = t0 + nq - 1;
    size_t row0 = (size_t)b * a.nq;
    const float *K = a.k + row0 * a.kv_stride + (size_t)g * a.D;
    const float *V = a.v + row0 * a.kv_stride + (size_t)g * a.D;

    if (threadIdx.x == 0) tile_lo = INT_MAX;
    __syncthreads();
    if (threadIdx.x < C::BR) {
        int r = threadIdx.x, lo = INT_MAX; /* rows past the end see no key */
        if (r < nq) {
            lo = attn_first_key(a.pos ? a.pos + row0 + i0 + r : nullptr, t0 + r, a.window);
            atomicMin(&tile_lo, lo);
        }
        row_lo[r] = lo;
    }
    attn_load_rows<DP>(Qs, a.q + (row0 + i0) * a.q_stride + (size_t)h * a.D, a.q_stride, nq, a.D);
    __syncthreads();

    int lo[C::R];
    float m[C::R], l[C::R], o[C::R][C::CPT];
#pragma unroll
    for (int i = 0; i < C::R; i++) {
        lo[i] = row_lo[ty + ATTN_TX * i];
        m[i] = -INFINITY, l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < C::CPT; c++) o[i][c] = 0.0f;
    }
    for (int k0 = tile_lo; k0 <= t_last; k0 += C::BR) {
        int nk = min(C::BR, t_last + 1 - k0);
        attn_load_rows<DP>(KVs, K + (size_t)k0 * a.kv_stride, a.kv_stride, nk, a.D);
        __syncthreads();
        float s[C::R][C::R];
        attn_tile_dot<DP>(s, Qs, KVs, ty, tx);
#pragma unroll
        for (int i = 0; i < C::R; i++) {
            int t = t0 + ty + ATTN_TX * i;
            float tile_max = -INFINITY;
#pragma unroll
            for (int j = 0; j < C::R; j++) {
                int u = k0 + tx + ATTN_TX * j;
                s[i][j] = u >= lo[i] && u <= t ? attn_capped(s[i][j] * a.scale, a.softcap, nullptr) : -INFINITY;
                tile_max = fmaxf(tile_max, s[i][j]);
            }
            float m_new = fmaxf(m[i], attn_row_max(tile_max));
            float alpha = m[i] == m_new ? 1.0f : expf(m[i] - m_new); /* also when both are -inf */
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < C::R; j++) {
                float p = s[i][j] == -INFINITY ? 0.0f : expf(s[i][j] - m_new);
                Ps[(ty + ATTN_TX * i) * C::LDP + tx + ATTN_TX * j] = p;
                sum += p;
            }
            m[i] = m_new;
            l[i] = l[i] * alpha + sum; /* this thread's share of the row sum */
#pragma unroll
            for (int c = 0; c < C::CPT; c++) o[i][c] *= alpha;
        }
        __syncthreads(); /* K read, P written */
        attn_load_rows<DP>(KVs, V + (size_t)k0 * a.kv_stride, a.kv_stride, nk, a.D);
        __syncthreads();
        attn_tile_mac<DP>(o, Ps, KVs, ty, tx);
        __syncthreads(); /* V and P read before the next tile overwrites them */
    }

#pragma unroll
    for (int i = 0; i < C::R; i++) {
        int r = ty + ATTN_TX * i;
        float sum = attn_row_sum(l[i]);
        if (r >= nq) continue;
        float inv = 1.0f / sum;
        float *out = a.out + (row0 + i0 + r) * a.out_stride + (size_t)h * a.D;
#pragma unroll
        for (int c = 0; c < C::CPT; c++) {
            int col = attn_col<DP>(tx, c);
            if (col < a.D) out[col] = o[i][c] * inv;
        }
        if (a.lse && tx == 0) a.lse[((size_t)b * a.H + h) * a.nq + i0 + r] = m[i] + logf(sum);
    }
}

/* delta[b, h, t] = Σ_d dout·out of query t, head h: one warp each */
static __global__ void attn_delta_kernel(float *delta, const float *dout, const float *out, int N, int T, int H,
                                         int D)
{
    size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (w >= (size_t)N * H) return; /* whole warps */
    size_t n = w / H;
    int h = (int)(w % H);
    const float *dy = dout + n * H * D + (size_t)h * D, *y = out + n * H * D + (size_t)h * D;
    float acc = 0.0f;
    for (int d = lane; d < D; d += 32) acc = fmaf(dy[d], y[d], acc);
    acc = zt_warp_sum(acc);
    if (lane == 0) delta[((n / T) * H + h) * T + n % T] = acc;
}

struct attn_bwd_args {
    float *dqkv;
    const float *dout, *qkv, *lse, *delta;
    const int32_t *pos;
    int T, H, KV, D, window;
    float scale, softcap;
};

/* Loads query rows q0.. (n of them) of head h for a backward block: Q, dO, and per row its
 * first key, lse and delta. Rows past n see no key. */
template <int DP>
__device__ void attn_load_queries(const attn_bwd_args &a, int b, int h, int q0, int n, float *Qs, float *dOs,
                                  int *row_lo, float *row_lse, float *row_delta)
{
    size_t S3 = (size_t)(a.H + 2 * a.KV) * a.D, row0 = (size_t)b * a.T + q0;
    if (threadIdx.x < attn_tile<DP>::BR) {
        int r = threadIdx.x;
        size_t at = ((size_t)b * a.H + h) * a.T + q0 + r;
        row_lo[r] = r < n ? attn_first_key(a.pos + row0 + r, q0 + r, a.window) : INT_MAX;
        row_lse[r] = r < n ? a.lse[at] : 0.0f;
        row_delta[r] = r < n ? a.delta[at] : 0.0f;
    }
    attn_load_rows<DP>(Qs, a.qkv + row0 * S3 + (size_t)h * a.D, S3, n, a.D);
    attn_load_rows<DP>(dOs, a.dout + row0 * a.H * a.D + (size_t)h * a.D, (size_t)a.H * a.D, n, a.D);
}

/* One block per (key tile, kv head, sequence): dK = scale·Σ dS^T Q, dV = Σ P^T dO over the
 * queries of every head in the group that see the tile. Scores are kept transposed:
 * rows are keys, columns queries. */
template <int DP> static __global__ void __launch_bounds__(ATTN_THREADS) attn_backward_dkv_kernel(attn_bwd_args a)
{
    using C = attn_tile<DP>;
    extern __shared__ float4 attn_smem[];
    float *Ks = reinterpret_cast<float *>(attn_smem), *Vs = Ks + C::BR * C::LD, *Qs = Vs + C::BR * C::LD;
    float *dOs = Qs + C::BR * C::LD, *Ps = dOs + C::BR * C::LD, *dSs = Ps + C::BR * C::LDP;
    __shared__ int row_lo[C::BR];
    __shared__ float row_lse[C::BR], row_delta[C::BR];

    int tx = threadIdx.x % ATTN_TX, ty = threadIdx.x / ATTN_TX;
    int k0 = blockIdx.x * C::BR, g = blockIdx.y, b = blockIdx.z, group = a.H / a.KV;
    int nk = min(C::BR, a.T - k0), k_last = k0 + nk - 1;
    size_t S3 = (size_t)(a.H + 2 * a.KV) * a.D, row0 = (size_t)b * a.T + k0;
    attn_load_rows<DP>(Ks, a.qkv + row0 * S3 + (size_t)(a.H + g) * a.D, S3, nk, a.D);
    attn_load_rows<DP>(Vs, a.qkv + row0 * S3 + (size_t)(a.H + a.KV + g) * a.D, S3, nk, a.D);

    float dk[C::R][C::CPT], dv[C::R][C::CPT];
#pragma unroll
    for (int i = 0; i < C::R; i++)
#pragma unroll
        for (int c = 0; c < C::CPT; c++) dk[i][c] = dv[i][c] = 0.0f;
    /* queries before k0 see none of these keys, nor those at k_last + window and later */
    int q_end = a.window > 0 && a.window < a.T - k_last ? k_last + a.window : a.T;
    for (int h = g * group; h < (g + 1) * group; h++)
        for (int q0 = k0; q0 < q_end; q0 += C::BR) {
            int nq = min(C::BR, a.T - q0);
            attn_load_queries<DP>(a, b, h, q0, nq, Qs, dOs, row_lo, row_lse, row_delta);
            int r = threadIdx.x;
            if (!__syncthreads_or(r < nq && row_lo[r] <= k_last)) continue; /* no query here sees these keys */
            /* P goes to smem before dP is computed (fewer live registers); each thread
             * reads back only its own entries */
            float s[C::R][C::R], slope[C::R][C::R];
            attn_tile_dot<DP>(s, Ks, Qs, ty, tx);
#pragma unroll
            for (int i = 0; i < C::R; i++) {
                int u = k0 + ty + ATTN_TX * i;
#pragma unroll
                for (int j = 0; j < C::R; j++) {
                    int q = tx + ATTN_TX * j;
                    float c = attn_capped(s[i][j] * a.scale, a.softcap, &slope[i][j]);
                    float p = u >= row_lo[q] && u <= q0 + q ? expf(c - row_lse[q]) : 0.0f;
                    Ps[(ty + ATTN_TX * i) * C::LDP + q] = p;
                }
            }
            attn_tile_dot<DP>(s, Vs, dOs, ty, tx); /* now dP */
#pragma unroll
            for (int i = 0; i < C::R; i++)
#pragma unroll
                for (int j = 0; j < C::R; j++) {
                    int at = (ty + ATTN_TX * i) * C::LDP + tx + ATTN_TX * j;
                    dSs[at] = Ps[at] * (s[i][j] - row_delta[tx + ATTN_TX * j]) * slope[i][j];
                }
            __syncthreads();
            attn_tile_mac<DP>(dv, Ps, dOs, ty, tx);
            attn_tile_mac<DP>(dk, dSs, Qs, ty, tx);
            __syncthreads(); /* before the next query tile overwrites Q, dO, P, dS and the row data */
        }

#pragma unroll
    for (int i = 0; i < C::R; i++) {
        int r = ty + ATTN_TX * i;
        if (r >= nk) continue;
        float *dK = a.dqkv + (row0 + r) * S3 + (size_t)(a.H + g) * a.D;
        float *dV = a.dqkv + (row0 + r) * S3 + (size_t)(a.H + a.KV + g) * a.D;
#pragma unroll
        for (int c = 0; c < C::CPT; c++) {
            int col = attn_col<DP>(tx, c);
            if (col < a.D) dK[col] = dk[i][c] * a.scale, dV[col] = dv[i][c];
        }
    }
}

/* One block per (query tile, head, sequence): dQ = scale·Σ dS K over the keys it sees. */
template <int DP> static __global__ void __launch_bounds__(ATTN_THREADS) attn_backward_dq_kernel(attn_bwd_args a)
{
    using C = attn_tile<DP>;
    extern __shared__ float4 attn_smem[];
    float *Qs = reinterpret_cast<float *>(attn_smem), *dOs = Qs + C::BR * C::LD, *Ks = dOs + C::BR * C::LD;
    float *Vs = Ks + C::BR * C::LD, *dSs = Vs + C::BR * C::LD;
    __shared__ int row_lo[C::BR], tile_lo;
    __shared__ float row_lse[C::BR], row_delta[C::BR];

    int tx = threadIdx.x % ATTN_TX, ty = threadIdx.x / ATTN_TX;
    int q0 = (gridDim.x - 1 - blockIdx.x) * C::BR; /* the longest tiles start first */
    int h = blockIdx.y, b = blockIdx.z, g = h / (a.H / a.KV);
    int nq = min(C::BR, a.T - q0), q_last = q0 + nq - 1;
    size_t S3 = (size_t)(a.H + 2 * a.KV) * a.D, row0 = (size_t)b * a.T;
    const float *K = a.qkv + row0 * S3 + (size_t)(a.H + g) * a.D;
    const float *V = a.qkv + row0 * S3 + (size_t)(a.H + a.KV + g) * a.D;

    if (threadIdx.x == 0) tile_lo = INT_MAX;
    attn_load_queries<DP>(a, b, h, q0, nq, Qs, dOs, row_lo, row_lse, row_delta);
    __syncthreads();
    if (threadIdx.x < nq) atomicMin(&tile_lo, row_lo[threadIdx.x]);
    __syncthreads();

    int lo[C::R];
    float lse[C::R], delta[C::R], dq[C::R][C::CPT];
#pragma unroll
    for (int i = 0; i < C::R; i++) {
        lo[i] = row_lo[ty + ATTN_TX * i];
        lse[i] = row_lse[ty + ATTN_TX * i];
        delta[i] = row_delta[ty + ATTN_TX * i];
#pragma unroll
        for (int c = 0; c < C::CPT; c++) dq[i][c] = 0.0f;
    }
    for (int k0 = tile_lo; k0 <= q_last; k0 += C::BR) {
        int nk = min(C::BR, q_last + 1 - k0);
        attn_load_rows<DP>(Ks, K + k0 * S3, S3, nk, a.D);
        attn_load_rows<DP>(Vs, V + k0 * S3, S3, nk, a.D);
        __syncthreads();
        /* P parks in dSs while dP is computed, as in the dK, dV kernel */
        float s[C::R][C::R], slope[C::R][C::R];
        attn_tile_dot<DP>(s, Qs, Ks, ty, tx);
#pragma unroll
        for (int i = 0; i < C::R; i++) {
            int t = q0 + ty + ATTN_TX * i;
#pragma unroll
            for (int j = 0; j < C::R; j++) {
                int u = k0 + tx + ATTN_TX * j;
                float c = attn_capped(s[i][j] * a.scale, a.softcap, &slope[i][j]);
                float p = u >= lo[i] && u <= t ? expf(c - lse[i]) : 0.0f;
                dSs[(ty + ATTN_TX * i) * C::LDP + tx + ATTN_TX * j] = p;
            }
        }
        attn_tile_dot<DP>(s, dOs, Vs, ty, tx); /* now dP */
#pragma unroll
        for (int i = 0; i < C::R; i++)
#pragma unroll
            for (int j = 0; j < C::R; j++) {
                int at = (ty + ATTN_TX * i) * C::LDP + tx + ATTN_TX * j;
                dSs[at] *= (s[i][j] - delta[i]) * slope[i][j];
            }
        __syncthreads();
        attn_tile_mac<DP>(dq, dSs, Ks, ty, tx);
        __syncthreads(); /* K, V and dS read before the next tile overwrites them */
    }

#pragma unroll
    for (int i = 0; i < C::R; i++) {
        int r = ty + ATTN_TX * i;
        if (r >= nq) continue;
        float *dQ = a.dqkv + (row0 + q0 + r) * S3 + (size_t)h * a.D;
#pragma unroll
        for (int c = 0; c < C::CPT; c++) {
            int col = attn_col<DP>(tx, c);
            if (col < a.D) dQ[col] = dq[i][c] * a.scale;
        }
    }
}

/* Calls f(std::integral_constant<int, DP>) with D padded to the next supported tile width. */
template <class F> static void attn_with_padded_dim(int D, F &&f)
{
    if (D <= 0 || D > 256) {
        fprintf(stderr, "zt: CUDA attention supports head dims 1..256, not %d\n", D);
        abort();
    }
    if (D <= 16) f(std::integral_constant<int, 16>{});
    else if (D <= 32) f(std::integral_constant<int, 32>{});
    else if (D <= 64) f(std::integral_constant<int, 64>{});
    else if (D <= 128) f(std::integral_constant<int, 128>{});
    else f(std::integral_constant<int, 256>{});
}

/* Shared memory past 48 KB needs the opt-in (Hopper allows up to 227 KB a block). */
template <class Args>
static void attn_launch(void (*kernel)(Args), dim3 grid, size_t smem, cudaStream_t s, const Args &args,
                        const char *what)
{
    ZT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kernel<<<grid, ATTN_THREADS, smem, s>>>(args);
    zt_cuda_check(what);
}

static void attn_forward(cudaStream_t s, const attn_fwd_args &a, int B)
{
    attn_with_padded_dim(a.D, [&](auto dp) {
        using C = attn_tile<decltype(dp)::value>;
        dim3 grid((unsigned)zt_ceil_div(a.nq, C::BR), a.H, B);
        attn_launch(attn_forward_kernel<decltype(dp)::value>, grid, 2 * C::ROWS + C::SCORES, s, a,
                    "attention_forward");
    });
}

void zt_cuda_attention_forward(cudaStream_t s, float *out, float *lse, const float *qkv, const int32_t *pos, int B,
                               int T, int H, int KV, int D, int window, double scale, double softcap)
{
    if (B <= 0 || T <= 0) return;
    size_t S3 = (size_t)(H + 2 * KV) * D;
    attn_fwd_args a = {out, lse, qkv, qkv + (size_t)H * D, qkv + (size_t)(H + KV) * D, pos, S3, S3, (size_t)H * D,
                       T, 0, H, KV, D, window, (float)scale, (float)softcap};
    attn_forward(s, a, B);
}

void zt_cuda_attention_decode(cudaStream_t s, float *out, const float *q, int q_stride, const float *k,
                              const float *v, int kv_stride, int n, int p0, int H, int KV, int D, int window,
                              double scale, double softcap)
{
    if (n <= 0) return;
    attn_fwd_args a = {out, nullptr, q, k, v, nullptr, (size_t)q_stride, (size_t)kv_stride, (size_t)H * D,
                       n, p0, H, KV, D, window, (float)scale, (float)softcap};
    attn_forward(s, a, 1);
}

void zt_cuda_attention_backward(cudaStream_t s, float *dqkv, const float *dout, const float *qkv, const float *out,
                                const float *lse, const int32_t *pos, int B, int T, int H, int KV, int D,
                                int window, double scale, double softcap)
{
    if (B <= 0 || T <= 0) return;
    int N = B * T;
    float *delta;
    ZT_CUDA_CHECK(cudaMallocAsync((void **)&delta, sizeof(float) * N * H, s));
    attn_delta_kernel<<<(unsigned)zt_ceil_div((size_t)N * H * 32, 256), 256, 0, s>>>(delta, dout, out, N, T, H, D);
    zt_cuda_check("attention_delta");
    attn_bwd_args a = {dqkv, dout, qkv, lse, delta, pos, T, H, KV, D, window, (float)scale, (float)softcap};
    attn_with_padded_dim(D, [&](auto dp) {
        using C = attn_tile<decltype(dp)::value>;
        unsigned tiles = (unsigned)zt_ceil_div(T, C::BR);
        attn_launch(attn_backward_dkv_kernel<decltype(dp)::value>, dim3(tiles, KV, B), 4 * C::ROWS + 2 * C::SCORES, s,
                    a, "attention_backward_dkv");
        attn_launch(attn_backward_dq_kernel<decltype(dp)::value>, dim3(tiles, H, B), 4 * C::ROWS + C::SCORES, s, a,
                    "attention_backward_dq");
    });
    ZT_CUDA_CHECK(cudaFreeAsync(delta, s));
}
