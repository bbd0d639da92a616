/* data/cache: the tokenized data set, cached on disk and content-addressed: the
 * key hashes the data files' bytes, the tokenizer files, the chat template and
 * every option that changes the tokens, so a second run with the same inputs maps
 * the cached file at once and any change builds a new one. A lock file serialises
 * builders (ranks of one job, or two runs), which then find the entry ready.
 *
 *     zt_cache_key k;
 *     zt_cache_key_init(&k);
 *     zt_cache_key_add(&k, "chat", 4); ... zt_cache_key_add_file(&k, path);
 *     st = zt_cache_get(cache_dir, &k, build, ctx, &ds, &hit);   // build(ctx, &ds) on a miss
 */
#ifndef ZT_DATA_CACHE_H
#define ZT_DATA_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"

typedef struct zt_cache_key {
    uint64_t h[2]; /* two independent 64-bit FNV-1a style hashes: 128 bits */
} zt_cache_key;

void zt_cache_key_init(zt_cache_key *k);
void zt_cache_key_add(zt_cache_key *k, const void *data, size_t len);
void zt_cache_key_add_str(zt_cache_key *k, const char *s); /* with its terminator: "ab","c" != "a","bc" */
/* Hashes a file's bytes (ZT_EUSER naming it when it cannot be read). */
zt_status zt_cache_key_add_file(zt_cache_key *k, const char *path);

typedef zt_status (*zt_cache_build_fn)(void *ctx, zt_dataset *ds);

/* Maps the entry for k from dir into *ds (*hit = 1), or builds it with build, writes it
 * (atomically) and returns the built data set (*hit = 0). */
zt_status zt_cache_get(const char *dir, const zt_cache_key *k, zt_cache_build_fn build, void *ctx, zt_dataset *ds,
                       int *hit);

#endif
