/* AdamW kernel, 16 floats at a time; the same operations in the same order as the
 * scalar kernel, so the results are bitwise equal. GCC treats the intrinsics as plain
 * vector arithmetic and would fuse mul+add into FMA: contraction is off. The bf16 copy
 * is rounded with integer operations: VCVTNEPS2BF16 would flush subnormals to zero. */
#pragma GCC optimize("fp-contract=off")

#include <immintrin.h>

#include "lib/optim/adamw_kernels.h"

/* zt_f32_to_bf16 on 16 lanes: round to nearest even, NaN kept quiet. */
static inline __m256i bf16_round16(__m512 x)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7f800000));
    __m512i r = _mm512_mask_or_epi32(rounded, nan, hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

void zt_adamw_kernel_avx512(const zt_adamw_consts *c, float *param, const float *grad, float *m, float *v, size_t n,
                            uint16_t *param_bf16)
{
    const __m512 gs = _mm512_set1_ps(c->grad_scale), decay = _mm512_set1_ps(c->decay);
    const __m512 b1 = _mm512_set1_ps(c->beta1), omb1 = _mm512_set1_ps(c->one_minus_beta1);
    const __m512 b2 = _mm512_set1_ps(c->beta2), omb2 = _mm512_set1_ps(c->one_minus_beta2);
    const __m512 step = _mm512_set1_ps(c->step_size), bc2 = _mm512_set1_ps(c->bias2_sqrt);
    const __m512 eps = _mm512_set1_ps(c->eps);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 g = _mm512_mul_ps(_mm512_loadu_ps(grad + i), gs);
        __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(omb1, g));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)), _mm512_mul_ps(_mm512_mul_ps(omb2, g), g));
        __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), bc2), eps);
        __m512 p = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(param + i), decay),
                                 _mm512_mul_ps(step, _mm512_div_ps(mi, denom)));
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        _mm512_storeu_ps(param + i, p);
        if (param_bf16) _mm256_storeu_si256((__m256i *)(param_bf16 + i), bf16_round16(p));
    }
    zt_adamw_kernel_scalar(c, param + i, grad + i, m + i, v + i, n - i, param_bf16 ? param_bf16 + i : NULL);
}
