#include "crc32c.h"

uint32_t zt_crc32c(uint32_t crc, const void *data, size_t len)
{
    static uint32_t table[256];
    if (!table[1]) { /* reflected polynomial 0x82F63B78; filling twice from two threads is harmless */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
    }
    const unsigned char *p = data;
    crc = ~crc;
    while (len--) crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
