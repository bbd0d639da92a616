/* core/dtype: element types and conversions (round to nearest even).
 *
 *     uint16_t b = zt_f32_to_bf16(x);   float y = zt_bf16_to_f32(b);
 *     zt_convert(dst, ZT_BF16, src, ZT_F32, n);
 */
#ifndef ZT_CORE_DTYPE_H
#define ZT_CORE_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "status.h"

typedef enum zt_dtype { ZT_F32, ZT_BF16, ZT_F16, ZT_F64 } zt_dtype;

size_t zt_dtype_size(zt_dtype t);
extern const char *const zt_dtype_names[4]; /* "fp32", "bf16", "fp16", "fp64": indexed by zt_dtype */
const char *zt_dtype_name(zt_dtype t);
const char *zt_dtype_safetensors_name(zt_dtype t); /* "F32", "BF16", "F16", "F64" */
/* parses "fp32" / "bf16" / "fp16" (recipe spelling); returns -1 if unknown */
int zt_dtype_parse(const char *s, zt_dtype *out);

static inline float zt_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t zt_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float zt_f16_to_f32(uint16_t h);
uint16_t zt_f32_to_f16(float f);

/* Converts n elements between any two types (double passes through float for 16-bit types). */
void zt_convert(void *dst, zt_dtype dt, const void *src, zt_dtype st, size_t n);

/* The index of the first NaN or infinite element of p (aligned, n elements of t), or n
 * when all are finite; then *what is "NaN", "inf" or "-inf". */
size_t zt_find_nonfinite(const void *p, zt_dtype t, size_t n, const char **what);

#endif
