#include "dtype.h"

#include <math.h>

size_t zt_dtype_size(zt_dtype t)
{
    switch (t) {
    case ZT_F32: return 4;
    case ZT_F64: return 8;
    default: return 2;
    }
}

const char *const zt_dtype_names[4] = {"fp32", "bf16", "fp16", "fp64"};

const char *zt_dtype_name(zt_dtype t) { return zt_dtype_names[t]; }

const char *zt_dtype_safetensors_name(zt_dtype t)
{
    static const char *n[] = {"F32", "BF16", "F16", "F64"};
    return n[t];
}

int zt_dtype_parse(const char *s, zt_dtype *out)
{
    if (!strcmp(s, "fp32")) *out = ZT_F32;
    else if (!strcmp(s, "bf16")) *out = ZT_BF16;
    else if (!strcmp(s, "fp16")) *out = ZT_F16;
    else return -1;
    return 0;
}

float zt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        float f = ldexpf((float)man, -24); /* subnormal (or zero) */
        return sign ? -f : f;
    } else {
        u = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t zt_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00;  /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00; /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {                      /* below the smallest normal: subnormal */
        /* value = a as float; in units of 2^-24 with round-to-nearest-even */
        float af;
        memcpy(&af, &a, 4);
        float scaled = af * 16777216.0f; /* exact: a power-of-two scaling */
        return sign | (uint16_t)nearbyintf(scaled);
    }
    uint32_t e = ((a >> 23) - 112) << 10, m = a & 0x7fffff;
    uint32_t h = e | (m >> 13);
    uint32_t rest = m & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return sign | (uint16_t)h;
}

static double load(const void *p, zt_dtype t, size_t i)
{
    switch (t) {
    case ZT_F32: return ((const float *)p)[i];
    case ZT_F64: return ((const double *)p)[i];
    case ZT_BF16: return zt_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return zt_f16_to_f32(((const uint16_t *)p)[i]);
    }
}

void zt_convert(void *dst, zt_dtype dt, const void *src, zt_dtype st, size_t n)
{
    if (dt == st) {
        memcpy(dst, src, n * zt_dtype_size(dt));
        return;
    }
    /* the hot cases (saving and loading bf16 weights): plain loops that vectorise */
    if (dt == ZT_BF16 && st == ZT_F32) {
        const float *s = src;
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = zt_f32_to_bf16(s[i]);
        return;
    }
    if (dt == ZT_F32 && st == ZT_BF16) {
        const uint16_t *s = src;
        float *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = zt_bf16_to_f32(s[i]);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        double v = load(src, st, i);
        switch (dt) {
        case ZT_F32: ((float *)dst)[i] = (float)v; break;
        case ZT_F64: ((double *)dst)[i] = v; break;
        case ZT_BF16: ((uint16_t *)dst)[i] = zt_f32_to_bf16((float)v); break;
        default: ((uint16_t *)dst)[i] = zt_f32_to_f16((float)v); break;
        }
    }
}

size_t zt_find_nonfinite(const void *p, zt_dtype t, size_t n, const char **what)
{
    size_t i = 0;
    if (t == ZT_F32) { /* the common case (weights, checkpoints), as a loop that vectorises */
        const float *f = p;
        while (i < n && isfinite(f[i])) i++;
    } else {
        while (i < n && isfinite(load(p, t, i))) i++;
    }
    if (i < n) {
        double v = load(p, t, i);
        *what = isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf";
    }
    return i;
}
