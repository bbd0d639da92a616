/* AVX-512 BF16 path of zt_gemm_bf16 (Zen 4, Sapphire Rapids and later): an 8x32 tile of
 * vdpbf16ps, which multiplies two k at a time from panels packed in K pairs. 16 zmm
 * accumulators, 2 for B and 1 broadcast of A leave room to spare in the 32 registers. */
#include <immintrin.h>

#include "gemm_bf16_kernel.h"

enum { MR = 8, NR = 32 };

/* One row of C: alpha * (x0, x1) + beta * C, on the columns the masks select. */
static inline void store_row(float *cr, __m512 x0, __m512 x1, __mmask16 m0, __mmask16 m1, float alpha, float beta)
{
    __m512 va = _mm512_set1_ps(alpha);
    x0 = _mm512_mul_ps(va, x0);
    x1 = _mm512_mul_ps(va, x1);
    if (beta != 0.0f) {
        __m512 vb = _mm512_set1_ps(beta);
        x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), x0);
        x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), x1);
    }
    _mm512_mask_storeu_ps(cr, m0, x0);
    _mm512_mask_storeu_ps(cr + 16, m1, x1);
}

/* Accumulators are named variables, not an array, so that they stay in registers. */
#define ROW_INIT(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps()
#define ROW_DOT(r)                                                                                                     \
    do {                                                                                                               \
        __m512bh ar = (__m512bh)_mm512_set1_epi32(a[r]);                                                               \
        c##r##0 = _mm512_dpbf16_ps(c##r##0, ar, b0);                                                                   \
        c##r##1 = _mm512_dpbf16_ps(c##r##1, ar, b1);                                                                   \
    } while (0)
#define ROW_STORE(r)                                                                                                   \
    if (r < m) store_row(c + r * ldc, c##r##0, c##r##1, m0, m1, alpha, beta)

static void tile_8x32(int units, const void *ap, const void *bp, float *c, size_t ldc, int m, int n, float alpha,
                      float beta)
{
    const int32_t *a = ap;
    const __m512i *b = bp;
    for (int r = 0; r < m; r++) { /* 128 bytes of a row: two or three cache lines */
        _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + r * ldc + 16), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + r * ldc + NR - 1), _MM_HINT_T0);
    }
    ROW_INIT(0);
    ROW_INIT(1);
    ROW_INIT(2);
    ROW_INIT(3);
    ROW_INIT(4);
    ROW_INIT(5);
    ROW_INIT(6);
    ROW_INIT(7);
#pragma GCC unroll 2
    for (int p = 0; p < units; p++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 1);
        ROW_DOT(0);
        ROW_DOT(1);
        ROW_DOT(2);
        ROW_DOT(3);
        ROW_DOT(4);
        ROW_DOT(5);
        ROW_DOT(6);
        ROW_DOT(7);
        a += MR;
        b += 2;
    }
    __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    __mmask16 m1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
    ROW_STORE(0);
    ROW_STORE(1);
    ROW_STORE(2);
    ROW_STORE(3);
    ROW_STORE(4);
    ROW_STORE(5);
    ROW_STORE(6);
    ROW_STORE(7);
}

const zt_gemm_bf16_kernel zt_gemm_bf16_avx512bf16 = {
    .name = "avx512-bf16",
    .pack = ZT_GEMM_PACK_PAIRS,
    .mr = MR,
    .nr = NR,
    .kc = 256,
    .mc = 192,
    .nc = 4096,
    .tile = tile_8x32,
};
