/* AdamW kernel, 8 floats at a time; the same operations in the same order as the
 * scalar kernel, so the results are bitwise equal. GCC treats the intrinsics as plain
 * vector arithmetic and would fuse mul+add into FMA: contraction is off. */
#pragma GCC optimize("fp-contract=off")

#include <immintrin.h>

#include "lib/optim/adamw_kernels.h"

/* zt_f32_to_bf16 on 8 lanes: round to nearest even, NaN kept quiet. */
static inline __m128i bf16_round8(__m256 x)
{
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

void zt_adamw_kernel_avx2(const zt_adamw_consts *c, float *param, const float *grad, float *m, float *v, size_t n,
                          uint16_t *param_bf16)
{
    const __m256 gs = _mm256_set1_ps(c->grad_scale), decay = _mm256_set1_ps(c->decay);
    const __m256 b1 = _mm256_set1_ps(c->beta1), omb1 = _mm256_set1_ps(c->one_minus_beta1);
    const __m256 b2 = _mm256_set1_ps(c->beta2), omb2 = _mm256_set1_ps(c->one_minus_beta2);
    const __m256 step = _mm256_set1_ps(c->step_size), bc2 = _mm256_set1_ps(c->bias2_sqrt);
    const __m256 eps = _mm256_set1_ps(c->eps);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_mul_ps(_mm256_loadu_ps(grad + i), gs);
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(omb1, g));
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)), _mm256_mul_ps(_mm256_mul_ps(omb2, g), g));
        __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), bc2), eps);
        __m256 p = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(param + i), decay),
                                 _mm256_mul_ps(step, _mm256_div_ps(mi, denom)));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        _mm256_storeu_ps(param + i, p);
        if (param_bf16) _mm_storeu_si128((__m128i *)(param_bf16 + i), bf16_round8(p));
    }
    zt_adamw_kernel_scalar(c, param + i, grad + i, m + i, v + i, n - i, param_bf16 ? param_bf16 + i : NULL);
}
