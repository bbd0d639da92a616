/* A cache of short words and their BPE ids: most words repeat, and merging
 * costs several hash lookups per byte. Direct-mapped slots in shards, each
 * shard behind a mutex, so that threads may encode with one tokenizer. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizers/bpe.h"

#define SHARDS 16
#define SLOTS 1024 /* per shard */

typedef struct slot {
    uint8_t len, nids; /* len 0: empty */
    char word[ZT_BPE_CACHE_WORD];
    int32_t ids[ZT_BPE_CACHE_IDS];
} slot;

struct zt_bpe_cache {
    struct {
        pthread_mutex_t lock;
        slot slot[SLOTS];
    } shard[SHARDS];
};

zt_status zt_bpe_cache_new(zt_bpe_cache **out)
{
    zt_bpe_cache *c = calloc(1, sizeof *c);
    if (!c) return zt_fail(ZT_ENOMEM, "out of memory for the word cache");
    for (int i = 0; i < SHARDS; i++) pthread_mutex_init(&c->shard[i].lock, NULL);
    *out = c;
    return ZT_OK;
}

void zt_bpe_cache_free(zt_bpe_cache *c)
{
    if (!c) return;
    for (int i = 0; i < SHARDS; i++) pthread_mutex_destroy(&c->shard[i].lock);
    free(c);
}

static slot *find(zt_bpe_cache *c, const char *w, size_t n, pthread_mutex_t **lock)
{
    uint64_t h = zt_hash_bytes(w, n);
    *lock = &c->shard[h % SHARDS].lock;
    return &c->shard[h % SHARDS].slot[(h / SHARDS) % SLOTS];
}

int zt_bpe_cache_get(zt_bpe_cache *c, const char *w, size_t n, int32_t *ids)
{
    pthread_mutex_t *lock;
    slot *s = find(c, w, n, &lock);
    int nids = -1;
    pthread_mutex_lock(lock);
    if (s->len == n && memcmp(s->word, w, n) == 0) {
        nids = s->nids;
        memcpy(ids, s->ids, (size_t)nids * sizeof *ids);
    }
    pthread_mutex_unlock(lock);
    return nids;
}

void zt_bpe_cache_put(zt_bpe_cache *c, const char *w, size_t n, const int32_t *ids, size_t nids)
{
    pthread_mutex_t *lock;
    slot *s = find(c, w, n, &lock);
    pthread_mutex_lock(lock);
    s->len = (uint8_t)n;
    s->nids = (uint8_t)nids;
    memcpy(s->word, w, n);
    memcpy(s->ids, ids, nids * sizeof *ids);
    pthread_mutex_unlock(lock);
}
