/* libFuzzer harness for the tokenized cache's checks (zt_cache_parse): each input is an
 * entry file whose checksum is first made right, so that mutations reach the checks of
 * the counts, offsets, ids and labels rather than stopping at the checksum (a mismatch is
 * one comparison, which t1000-cache covers). Either the entry is refused with a message
 * (ZT_EUSER), or every example it describes can be read whole and holds ids of the
 * vocabulary and labels that are -100 or ids; never a crash or a read out of bounds.
 *
 *     clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
 *         tests/fuzz/fuzz_cache.c lib/data/cache.c lib/data/dataset.c lib/core/[a-z]*.c -lm -o /tmp/fuzz_cache
 *     /tmp/fuzz_cache -max_total_time=120 /tmp/corpus tests/fuzz/corpus/cache
 *
 * The seeds are entries zt wrote (zt data inspect with data.cache_dir set), from a
 * tokenizer of fewer than VOCAB ids.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/data/cache.h"

enum { VOCAB = 64 };

/* Reads every token of every example, as the packer would. */
static void check_dataset(const zt_dataset *ds)
{
    int64_t tokens = zt_dataset_tokens(ds), seen = 0;
    if (ds->n_examples < 1 || ds->offsets[0] != 0) abort();
    for (int64_t i = 0; i < ds->n_examples; i++) {
        int64_t n = zt_dataset_len(ds, i);
        if (n < 1) abort();
        const int32_t *ids = ds->ids + ds->offsets[i], *labels = ds->labels + ds->offsets[i];
        for (int64_t j = 0; j < n; j++)
            if (ids[j] < 0 || ids[j] >= VOCAB || (labels[j] != ZT_IGNORE_INDEX && (labels[j] < 0 || labels[j] >= VOCAB)))
                abort();
        seen += n;
    }
    if (seen != tokens) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *file = malloc(size ? size : 1); /* aligned as a mapped file is */
    if (!file) abort();
    memcpy(file, data, size);
    if (size >= sizeof(zt_cache_header)) {
        uint32_t crc = zt_cache_checksum(file, size);
        memcpy(file + offsetof(zt_cache_header, crc), &crc, sizeof crc);
    }
    zt_dataset ds;
    zt_status st = zt_cache_parse(file, size, VOCAB, &ds);
    if (st) {
        if (st != ZT_EUSER || !zt_errmsg()[0]) abort(); /* a bad entry is refused with a reason */
    } else {
        check_dataset(&ds);
    }
    free(file);
    return 0;
}
