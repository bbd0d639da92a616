#include "cache_key.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void zt_cache_key_init(zt_cache_key *k)
{
    k->h[0] = 0xcbf29ce484222325ull;
    k->h[1] = 0x84222325cbf29ce4ull;
}

void zt_cache_key_add(zt_cache_key *k, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t a = k->h[0], b = k->h[1];
    for (size_t i = 0; i < len; i++) {
        a = (a ^ p[i]) * 0x100000001b3ull;
        b = (b ^ p[i]) * 0x00000100000001B3ull + 0x9e3779b97f4a7c15ull; /* a second, differently mixed stream */
        b ^= b >> 29;
    }
    k->h[0] = a, k->h[1] = b;
}

void zt_cache_key_add_str(zt_cache_key *k, const char *s) { zt_cache_key_add(k, s, strlen(s) + 1); }

zt_status zt_cache_key_add_file(zt_cache_key *k, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return zt_fail(ZT_EUSER, "'%s': cannot open: %s", path, strerror(errno));
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) zt_cache_key_add(k, buf, n);
    int bad = ferror(f);
    fclose(f);
    return bad ? zt_fail(ZT_EIO, "'%s': read error", path) : ZT_OK;
}
