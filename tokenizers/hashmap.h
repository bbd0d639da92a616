/* tokenizers/hashmap: the two lookups BPE needs, open addressing with linear
 * probing. zt_strmap maps byte strings (kept by the caller, not copied) to ids;
 * zt_pairmap maps a pair of ids to a merge (rank, result id).
 *
 *     zt_strmap m = {0};
 *     if ((st = zt_strmap_init(&m, n_keys))) return st;
 *     zt_strmap_put(&m, piece, len, id);              // a key put twice keeps the last id
 *     int32_t id = zt_strmap_get(&m, piece, len);     // -1 when absent
 *     zt_strmap_free(&m);
 */
#ifndef ZT_TOKENIZERS_HASHMAP_H
#define ZT_TOKENIZERS_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

uint64_t zt_hash_bytes(const char *p, size_t n);

typedef struct zt_strmap_slot {
    const char *key; /* NULL: empty */
    uint32_t len;
    int32_t val;
} zt_strmap_slot;

typedef struct zt_strmap {
    zt_strmap_slot *slot;
    size_t mask; /* capacity - 1 (a power of two) */
} zt_strmap;

/* Sized for up to n keys; the map does not grow. */
zt_status zt_strmap_init(zt_strmap *m, size_t n);
void zt_strmap_put(zt_strmap *m, const char *key, size_t len, int32_t val);
int32_t zt_strmap_get(const zt_strmap *m, const char *key, size_t len);
void zt_strmap_free(zt_strmap *m);

typedef struct zt_pairmap_slot {
    uint64_t key; /* (left + 1) << 32 | right; 0: empty */
    int32_t rank, id;
} zt_pairmap_slot;

typedef struct zt_pairmap {
    zt_pairmap_slot *slot;
    size_t mask;
} zt_pairmap;

zt_status zt_pairmap_init(zt_pairmap *m, size_t n);
void zt_pairmap_put(zt_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t id);
/* The slot of (left, right), or NULL. */
const zt_pairmap_slot *zt_pairmap_get(const zt_pairmap *m, int32_t left, int32_t right);
void zt_pairmap_free(zt_pairmap *m);

#endif
