#include "lib/ckpt/safetensors_internal.h"

#include <stdint.h>
#include <string.h>

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
        unsigned c = s[i];
        if (c < 0x80) {
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return i;
            i++;
            continue;
        }
        size_t more;
        uint32_t cp, min;
        if (c >= 0xc2 && c <= 0xdf) more = 1, cp = c & 0x1f, min = 0x80;
        else if ((c & 0xf0) == 0xe0) more = 2, cp = c & 0x0f, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4) more = 3, cp = c & 0x07, min = 0x10000;
        else return i; /* a continuation byte, or a lead byte no code point uses */
        if (len - i <= more) return i;
        for (size_t k = 1; k <= more; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return i;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i; /* overlong, too big, surrogate */
        i += more + 1;
    }
    return len;
}
