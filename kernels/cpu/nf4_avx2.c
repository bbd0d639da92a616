/* AVX2 path of zt_nf4_dequantize's whole blocks (nf4_kernel.h): the 16 codes looked up eight
 * lanes at a time by two permutes and a blend, each times its block's absmax; the same products
 * as the scalar loop (code[q] · a in float, no contraction), so the same bits. */
#include <immintrin.h>

#include "nf4_kernel.h"

/* 8 bytes (16 elements, the even one in each byte's high nibble) times s into y[0..16) */
static inline void decode16(const uint8_t *q, __m256 lo, __m256 hi, __m256 s, float *y)
{
    __m128i b = _mm_loadl_epi64((const __m128i *)q), mask = _mm_set1_epi8(0x0f);
    __m128i idx = _mm_unpacklo_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), mask), _mm_and_si128(b, mask));
    for (int h = 0; h < 2; h++) {
        __m256i k = _mm256_cvtepu8_epi32(h ? _mm_srli_si128(idx, 8) : idx);
        /* code[k]: the lower table by k's low 3 bits, the upper one where bit 3 is set */
        __m256 c = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, k), _mm256_permutevar8x32_ps(hi, k),
                                    _mm256_castsi256_ps(_mm256_slli_epi32(k, 28)));
        _mm256_storeu_ps(y + 8 * h, _mm256_mul_ps(c, s));
    }
}

void zt_nf4_dequantize_blocks_avx2(const uint8_t *q, const float *absmax, size_t b0, size_t b1, float *y)
{
    __m256 lo = _mm256_loadu_ps(zt_nf4_code), hi = _mm256_loadu_ps(zt_nf4_code + 8);
    for (size_t b = b0; b < b1; b++) {
        __m256 s = _mm256_set1_ps(absmax[b]);
        const uint8_t *qb = q + b * (ZT_NF4_BLOCK / 2);
        float *yb = y + (b - b0) * ZT_NF4_BLOCK;
        for (int i = 0; i < ZT_NF4_BLOCK; i += 16) decode16(qb + i / 2, lo, hi, s, yb + i);
    }
}
