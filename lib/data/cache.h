/* data/cache: the tokenized data set, cached on disk and content-addressed: the
 * key hashes the data files' bytes, the tokenizer files, the chat template and
 * every option that changes the tokens, so a second run with the same inputs maps
 * the cached file at once and any change builds a new one. A lock file serialises
 * builders (ranks of one job, or two runs), which then find the entry ready.
 *
 *     zt_cache_key k;
 *     zt_cache_key_init(&k);
 *     zt_cache_key_add(&k, "chat", 4); ... zt_cache_key_add_file(&k, path);
 *     st = zt_cache_get(cache_dir, &k, vocab_size, build, ctx, &ds, &hit);   // build(ctx, &ds) on a miss
 *
 * An entry is checked whole before use: a checksum over the file, then every offset,
 * id and label (zt_cache_parse). A bad entry is data zt wrote itself, so it is not
 * the user's error: it is logged as a warning naming the file and built again, and
 * never trained on.
 */
#ifndef ZT_DATA_CACHE_H
#define ZT_DATA_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "lib/core/cache_key.h"

/* An entry file: this header, n_examples + 1 int64 offsets, then n_tokens int32 ids and
 * n_tokens int32 labels, in the machine's byte order. */
typedef struct zt_cache_header {
    char magic[8];                 /* "ZTTOKv2" */
    uint32_t crc;                  /* CRC-32C of every byte after this field */
    uint32_t zero;                 /* 0 */
    uint64_t n_examples, n_tokens; /* n_examples >= 1 */
} zt_cache_header;

/* The checksum an entry of len bytes (len >= sizeof(zt_cache_header)) must carry. */
uint32_t zt_cache_checksum(const void *file, size_t len);

/* Points ds (read-only, ds->map stays NULL) into the entry file[0..len) when it is whole:
 * the checksum matches, the offsets start at 0, grow by at least 1 and end at n_tokens,
 * the ids lie in [0, vocab_size) and each label is an id or -100. Otherwise ZT_EUSER with
 * what is wrong (the caller names the file). */
zt_status zt_cache_parse(const void *file, size_t len, int32_t vocab_size, zt_dataset *ds);

typedef zt_status (*zt_cache_build_fn)(void *ctx, zt_dataset *ds);

/* Maps the entry for k from dir into *ds (*hit = 1), or builds it with build, writes it
 * (atomically) and returns the built data set (*hit = 0). An entry that fails
 * zt_cache_parse against vocab_size is rebuilt, with a warning. On failure *ds is empty. */
zt_status zt_cache_get(const char *dir, const zt_cache_key *k, int32_t vocab_size, zt_cache_build_fn build, void *ctx,
                       zt_dataset *ds, int *hit);

#endif
