/* kernels/cpu/fastmath: a branch-free exp that compilers vectorise (kernels/cpu/levels.h
 * builds the loops that use it for each CPU level). The double (gradient-check) build
 * uses libm's exp. */
#ifndef ZT_KERNELS_CPU_FASTMATH_H
#define ZT_KERNELS_CPU_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lib/core/real.h"

/* c ? a : b with bit masks: GCC turns ternaries on floats into branches in
 * some loops (and then does not vectorise them); integer masks it always does. */
static inline float zt_select(int c, float a, float b)
{
    uint32_t ua, ub, m = -(uint32_t)(c != 0);
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    uint32_t r = (ua & m) | (ub & ~m);
    float f;
    memcpy(&f, &r, 4);
    return f;
}

/* e^x for float, relative error below 3e-7 on [-87, 88]; inputs are clamped there, NaN gives NaN. */
static inline float zt_expf_fast(float x)
{
    x = zt_select(x < -87.0f, -87.0f, x);
    x = zt_select(x > 88.0f, 88.0f, x);
    const float shift = 12582912.0f; /* 1.5·2^23: adding it rounds to an integer */
    float t = x * 1.44269504088896341f + shift;
    float n = t - shift;
    float r = x - n * 0.693145751953125f - n * 1.42860682030941723e-6f;
    float p = 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* the integer n sits in t's low mantissa bits; unsigned arithmetic, so that a NaN input
     * (which the clamps let through, and which p carries to the result) is defined too */
    uint32_t bits;
    memcpy(&bits, &t, 4);
    uint32_t e = (bits - 0x4b400000u + 127u) << 23;
    float scale;
    memcpy(&scale, &e, 4);
    return p * scale;
}

#ifdef ZT_REAL_DOUBLE
#define zt_vexp exp
#else
#define zt_vexp zt_expf_fast
#endif

#endif
