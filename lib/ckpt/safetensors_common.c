#include "lib/ckpt/safetensors_internal.h"

#include <stdint.h>
#include <string.h>

#include "lib/core/utf8.h"

void zt_st_convert(void *dst, zt_dtype dt, const void *src, zt_dtype st, size_t n)
{
    enum { CHUNK = 4096 }; /* elements per step; an unaligned step is staged on the stack */
    size_t ss = zt_dtype_size(st), ds = zt_dtype_size(dt);
    int aligned = st == dt || (uintptr_t)src % ss == 0;
    size_t nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (nchunks > 256)
    for (size_t c = 0; c < nchunks; c++) {
        size_t i = c * CHUNK, k = n - i < CHUNK ? n - i : CHUNK;
        const char *s = (const char *)src + i * ss;
        char *d = (char *)dst + i * ds;
        if (aligned) {
            zt_convert(d, dt, s, st, k);
        } else {
            _Alignas(64) unsigned char stage[CHUNK * sizeof(double)];
            memcpy(stage, s, k * ss);
            zt_convert(d, dt, stage, st, k);
        }
    }
}

size_t zt_st_utf8_check(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') return i;
        uint32_t cp;
        size_t k = zt_utf8_next((const char *)s + i, len - i, &cp);
        if (cp == ZT_UNI_INVALID) return i; /* overlong, too big, surrogate, cut short */
        i += k;
    }
    return i;
}
