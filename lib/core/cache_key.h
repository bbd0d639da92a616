/* core/cache_key: a 128-bit content key for what zt caches on disk (the tokenized data set,
 * a quantized base): every byte and option that changes the cached result is added, so equal
 * inputs find the same entry and any change another. Not a cryptographic hash: it guards
 * against stale entries, not against an adversary; entries carry their own checksum. */
#ifndef ZT_CORE_CACHE_KEY_H
#define ZT_CORE_CACHE_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct zt_cache_key {
    uint64_t h[2]; /* two independent 64-bit FNV-1a style hashes: 128 bits */
} zt_cache_key;

void zt_cache_key_init(zt_cache_key *k);
void zt_cache_key_add(zt_cache_key *k, const void *data, size_t len);
void zt_cache_key_add_str(zt_cache_key *k, const char *s); /* with its terminator: "ab","c" != "a","bc" */
/* Hashes a file's bytes (ZT_EUSER naming it when it cannot be read). */
zt_status zt_cache_key_add_file(zt_cache_key *k, const char *path);

#endif
