#include "crc32c.h"

#if defined(__x86_64__)
#include <nmmintrin.h>

/* SSE4.2's crc32 instruction: 8 bytes a cycle or so, about 20 times the table's speed, which
 * matters where every byte of an offload swap file is checked (lib/offload/swap.c) */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t len)
{
    uint64_t c = crc;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t w;
        __builtin_memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    while (len--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

static uint32_t crc_table(uint32_t crc, const unsigned char *p, size_t len)
{
    static uint32_t table[256];
    if (!table[1]) { /* reflected polynomial 0x82F63B78; filling twice from two threads is harmless */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
    }
    while (len--) crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

uint32_t zt_crc32c(uint32_t crc, const void *data, size_t len)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) return ~crc_hw(~crc, data, len);
#endif
    return ~crc_table(~crc, data, len);
}
