#include "tokenizers/hashmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/* 8 bytes at a time; keys are short (token pieces) */
uint64_t zt_hash_bytes(const char *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    return mix(h ^ w);
}

static size_t capacity_for(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2; /* load at most 1/2 */
    return cap;
}

zt_status zt_strmap_init(zt_strmap *m, size_t n)
{
    size_t cap = capacity_for(n);
    m->slot = calloc(cap, sizeof *m->slot);
    if (!m->slot) return zt_fail(ZT_ENOMEM, "out of memory for a vocabulary of %zu pieces", n);
    m->mask = cap - 1;
    return ZT_OK;
}

void zt_strmap_put(zt_strmap *m, const char *key, size_t len, int32_t val)
{
    size_t i = zt_hash_bytes(key, len) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        zt_strmap_slot *s = &m->slot[i];
        if (!s->key) {
            s->key = key;
            s->len = (uint32_t)len;
            s->val = val;
            return;
        }
        if (s->len == len && memcmp(s->key, key, len) == 0) {
            s->val = val;
            return;
        }
    }
}

int32_t zt_strmap_get(const zt_strmap *m, const char *key, size_t len)
{
    if (!m->slot) return -1;
    size_t i = zt_hash_bytes(key, len) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        const zt_strmap_slot *s = &m->slot[i];
        if (!s->key) return -1;
        if (s->len == len && memcmp(s->key, key, len) == 0) return s->val;
    }
}

void zt_strmap_free(zt_strmap *m)
{
    free(m->slot);
    memset(m, 0, sizeof *m);
}

static uint64_t pair_key(int32_t left, int32_t right) { return ((uint64_t)(uint32_t)left + 1) << 32 | (uint32_t)right; }

zt_status zt_pairmap_init(zt_pairmap *m, size_t n)
{
    size_t cap = capacity_for(n);
    m->slot = calloc(cap, sizeof *m->slot);
    if (!m->slot) return zt_fail(ZT_ENOMEM, "out of memory for %zu merges", n);
    m->mask = cap - 1;
    return ZT_OK;
}

void zt_pairmap_put(zt_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t id)
{
    uint64_t key = pair_key(left, right);
    size_t i = mix(key) & m->mask;
    while (m->slot[i].key && m->slot[i].key != key) i = (i + 1) & m->mask;
    m->slot[i] = (zt_pairmap_slot){key, rank, id};
}

const zt_pairmap_slot *zt_pairmap_get(const zt_pairmap *m, int32_t left, int32_t right)
{
    uint64_t key = pair_key(left, right);
    for (size_t i = mix(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->slot[i].key == key) return &m->slot[i];
        if (!m->slot[i].key) return NULL;
    }
}

void zt_pairmap_free(zt_pairmap *m)
{
    free(m->slot);
    memset(m, 0, sizeof *m);
}
