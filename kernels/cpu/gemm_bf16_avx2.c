/* AVX2 + FMA path of zt_gemm_bf16, for CPUs without bf16 dot products (Zen 2/3, Haswell..):
 * the packing widens bf16 to fp32, and a 6x16 fp32 FMA tile does the rest. */
#include <immintrin.h>
#include <string.h>

#include "gemm_bf16_kernel.h"
#include "lib/core/dtype.h"

enum { MR = 6, NR = 16 };

/* Lane masks for a partial 8-float vector: n valid lanes, n in [0, 8]. */
static __m256i lanes(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* One row of C: alpha * (x0, x1) + beta * C, n of the 16 columns. */
static inline void store_row(float *cr, __m256 x0, __m256 x1, int n, float alpha, float beta)
{
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    x0 = _mm256_mul_ps(va, x0);
    x1 = _mm256_mul_ps(va, x1);
    if (n == NR) {
        if (beta != 0.0f) {
            x0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr), x0);
            x1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr + 8), x1);
        }
        _mm256_storeu_ps(cr, x0);
        _mm256_storeu_ps(cr + 8, x1);
        return;
    }
    __m256i m0 = lanes(n), m1 = lanes(n - 8);
    if (beta != 0.0f) {
        x0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr, m0), x0);
        x1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr + 8, m1), x1);
    }
    _mm256_maskstore_ps(cr, m0, x0);
    _mm256_maskstore_ps(cr + 8, m1, x1);
}

/* Accumulators are named variables, not an array, so that they stay in the 16 ymm registers. */
#define ROW_INIT(r) __m256 c##r##0 = _mm256_setzero_ps(), c##r##1 = _mm256_setzero_ps()
#define ROW_FMA(r)                                                                                                     \
    do {                                                                                                               \
        __m256 ar = _mm256_broadcast_ss(a + r);                                                                        \
        c##r##0 = _mm256_fmadd_ps(ar, b0, c##r##0);                                                                    \
        c##r##1 = _mm256_fmadd_ps(ar, b1, c##r##1);                                                                    \
    } while (0)
#define ROW_STORE(r)                                                                                                   \
    if (r < m) store_row(c + r * ldc, c##r##0, c##r##1, n, alpha, beta)

static void tile_6x16(int units, const void *ap, const void *bp, float *c, size_t ldc, int m, int n, float alpha,
                      float beta)
{
    const float *a = ap, *b = bp;
    for (int r = 0; r < m; r++) { /* the row may straddle two cache lines */
        _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + r * ldc + NR - 1), _MM_HINT_T0);
    }
    ROW_INIT(0);
    ROW_INIT(1);
    ROW_INIT(2);
    ROW_INIT(3);
    ROW_INIT(4);
    ROW_INIT(5);
#pragma GCC unroll 4
    for (int k = 0; k < units; k++) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
        ROW_FMA(0);
        ROW_FMA(1);
        ROW_FMA(2);
        ROW_FMA(3);
        ROW_FMA(4);
        ROW_FMA(5);
        a += MR;
        b += NR;
    }
    ROW_STORE(0);
    ROW_STORE(1);
    ROW_STORE(2);
    ROW_STORE(3);
    ROW_STORE(4);
    ROW_STORE(5);
}

/* The 8 x 8 floats of v transposed in place: v[i][j] becomes v[j][i]. */
static void transpose8(__m256 v[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* 8 bf16 widened to fp32 */
static inline __m256 widen8(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }

/* Lanes [0, w) of v stored at d, w = 6 or 8 with plain stores: AMD's Zen cores run a masked
 * store (vmaskmovps) as microcode, several times the cost of a plain one (MR is 6, NR 16). */
static inline void store_lanes(float *d, __m256 v, int w)
{
    if (w >= 8) _mm256_storeu_ps(d, v);
    else if (w == 6) {
        _mm_storeu_ps(d, _mm256_castps256_ps128(v));
        _mm_storel_pi((__m64 *)(d + 4), _mm256_extractf128_ps(v, 1));
    } else _mm256_maskstore_ps(d, lanes(w), v);
}

/* zt_gemm_pack_rows_fn: 8 k of up to 8 rows at a time, widened and transposed in registers (the
 * plain loop wrote one float at a time, R apart: 8% of a bf16 step at this level); the rows
 * past `rows` get zeros. */
static void pack_rows(const uint16_t *x, size_t rs, int rows, int R, int kb, float *d)
{
    for (int r0 = 0; r0 < rows; r0 += 8) {
        int g = rows - r0 < 8 ? rows - r0 : 8, w = R - r0 < 8 ? R - r0 : 8, k = 0;
        for (; k + 8 <= kb; k += 8) {
            __m256 v[8];
            for (int i = 0; i < 8; i++)
                v[i] = widen8(i < g ? _mm_loadu_si128((const __m128i *)(x + (r0 + i) * rs + k)) : _mm_setzero_si128());
            transpose8(v);
            for (int i = 0; i < 8; i++) store_lanes(d + (size_t)(k + i) * R + r0, v[i], w);
        }
        for (; k < kb; k++)
            for (int i = 0; i < g; i++) d[(size_t)k * R + r0 + i] = zt_bf16_to_f32(x[(r0 + i) * rs + k]);
    }
}

/* zt_gemm_pack_cols_fn: each k's rows are adjacent in x, widened 8 (or the 6 of a full A
 * panel) at a time; the plain loop took a bf16 step's panels of dY·W and dYᵀ·X one value at a
 * time. */
static void pack_cols(const uint16_t *x, size_t ks, int rows, int R, int kb, float *d)
{
    for (int k = 0; k < kb; k++, d += R) {
        const uint16_t *xk = x + k * ks;
        int r = 0;
        for (; r + 8 <= rows; r += 8) _mm256_storeu_ps(d + r, widen8(_mm_loadu_si128((const __m128i *)(xk + r))));
        if (rows - r == 6) {
            int32_t last2;
            memcpy(&last2, xk + r + 4, sizeof last2);
            store_lanes(d + r, widen8(_mm_insert_epi32(_mm_loadl_epi64((const __m128i *)(xk + r)), last2, 2)), 6);
        } else
            for (; r < rows; r++) d[r] = zt_bf16_to_f32(xk[r]);
    }
}

const zt_gemm_bf16_kernel zt_gemm_bf16_avx2 = {
    .name = "avx2",
    .pack = ZT_GEMM_PACK_F32,
    .mr = MR,
    .nr = NR,
    .kc = 256,
    .mc = 144,
    .nc = 2048,
    .tile = tile_6x16,
    .pack_rows = pack_rows,
    .pack_cols = pack_cols,
};

/* zt_f32_to_bf16 on 8 lanes: u + 0x7fff + (bit 16 of u), NaN -> (u >> 16) | 0x40. */
static __m256i bf16_bits(__m256i u)
{
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rne = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
    __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(rne, qnan, nan);
}

void zt_f32_to_bf16_run_avx2(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i lo = bf16_bits(_mm256_loadu_si256((const __m256i *)(src + i)));
        __m256i hi = bf16_bits(_mm256_loadu_si256((const __m256i *)(src + i + 8)));
        /* packus works per 128-bit lane: [lo0 hi0 lo1 hi1] -> reorder the 64-bit quarters */
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
        _mm256_storeu_si256((__m256i *)(dst + i), packed);
    }
    for (; i < n; i++) dst[i] = zt_f32_to_bf16(src[i]);
}
