#define _GNU_SOURCE
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/crc32c.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"

static const char MAGIC[8] = "ZTTOKv2";

uint32_t zt_cache_checksum(const void *file, size_t len)
{
    size_t from = offsetof(zt_cache_header, zero);
    return zt_crc32c(0, (const char *)file + from, len - from);
}

/* The counts fit the file's length exactly (computed so that no count can overflow). */
static int sizes_fit(const zt_cache_header *h, size_t len)
{
    size_t rest = len - sizeof *h;
    if (h->n_examples == 0 || h->n_examples >= rest / 8) return 0;
    rest -= (size_t)(h->n_examples + 1) * 8;
    return rest % 8 == 0 && h->n_tokens == rest / 8;
}

static zt_status check_offsets(const int64_t *off, int64_t n_examples, int64_t n_tokens)
{
    if (off[0] != 0) return zt_fail(ZT_EUSER, "the first offset is %lld, not 0", (long long)off[0]);
    for (int64_t i = 0; i < n_examples; i++)
        if (off[i + 1] <= off[i] || off[i + 1] > n_tokens)
            return zt_fail(ZT_EUSER, "example %lld ends at token %lld, outside (%lld, %lld]", (long long)i,
                           (long long)off[i + 1], (long long)off[i], (long long)n_tokens);
    if (off[n_examples] != n_tokens)
        return zt_fail(ZT_EUSER, "the examples end at token %lld, not %lld", (long long)off[n_examples],
                       (long long)n_tokens);
    return ZT_OK;
}

static zt_status check_tokens(const int32_t *ids, const int32_t *labels, int64_t n, int32_t vocab_size)
{
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= vocab_size)
            return zt_fail(ZT_EUSER, "token %lld has id %d, outside the vocabulary of %d", (long long)i, ids[i],
                           vocab_size);
        if (labels[i] != ZT_IGNORE_INDEX && (labels[i] < 0 || labels[i] >= vocab_size))
            return zt_fail(ZT_EUSER, "token %lld has label %d, neither -100 nor in the vocabulary of %d", (long long)i,
                           labels[i], vocab_size);
    }
    return ZT_OK;
}

zt_status zt_cache_parse(const void *file, size_t len, int32_t vocab_size, zt_dataset *ds)
{
    const zt_cache_header *h = file;
    *ds = (zt_dataset){0};
    if (len < sizeof *h || memcmp(h->magic, MAGIC, sizeof MAGIC))
        return zt_fail(ZT_EUSER, "not a token cache of this version (%s)", MAGIC);
    if (h->crc != zt_cache_checksum(file, len)) return zt_fail(ZT_EUSER, "checksum mismatch");
    if (h->zero || !sizes_fit(h, len))
        return zt_fail(ZT_EUSER, "%llu examples and %llu tokens do not fill its %zu bytes",
                       (unsigned long long)h->n_examples, (unsigned long long)h->n_tokens, len);
    const int64_t *offsets = (const int64_t *)(h + 1);
    const int32_t *ids = (const int32_t *)(offsets + h->n_examples + 1), *labels = ids + h->n_tokens;
    zt_status st = check_offsets(offsets, (int64_t)h->n_examples, (int64_t)h->n_tokens);
    if (!st) st = check_tokens(ids, labels, (int64_t)h->n_tokens, vocab_size);
    if (st) return st;
    ds->n_examples = (int64_t)h->n_examples;
    ds->offsets = (int64_t *)offsets; /* the dataset is read-only where it is mapped */
    ds->ids = (int32_t *)ids;
    ds->labels = (int32_t *)labels;
    return ZT_OK;
}

/* Maps the cache file at path into ds: 1 when it holds a whole entry, 0 when it is absent
 * or bad (then a warning says why and it is rebuilt). */
static int map_entry(const char *path, int32_t vocab_size, zt_dataset *ds)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    struct stat sb;
    size_t len = 0;
    void *map = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && (len = (size_t)sb.st_size) > 0) map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    zt_status st =
        map == MAP_FAILED ? zt_fail(ZT_EUSER, "empty or unreadable") : zt_cache_parse(map, len, vocab_size, ds);
    if (st) {
        zt_log_warn("the tokenized cache '%s' is bad (%s): building it again", path, zt_errmsg());
        if (map != MAP_FAILED) munmap(map, len);
        return 0;
    }
    ds->map = map, ds->map_len = len;
    return 1;
}

static zt_status write_entry(const char *path, const zt_dataset *ds)
{
    zt_cache_header h = {.n_examples = (uint64_t)ds->n_examples, .n_tokens = (uint64_t)zt_dataset_tokens(ds)};
    memcpy(h.magic, MAGIC, sizeof MAGIC);
    size_t from = offsetof(zt_cache_header, zero), n_off = h.n_examples + 1;
    h.crc = zt_crc32c(0, (const char *)&h + from, sizeof h - from);
    h.crc = zt_crc32c(h.crc, ds->offsets, n_off * 8);
    h.crc = zt_crc32c(h.crc, ds->ids, h.n_tokens * 4);
    h.crc = zt_crc32c(h.crc, ds->labels, h.n_tokens * 4);
    zt_atomic_file a;
    zt_status st = zt_atomic_open(&a, path);
    if (st) return st;
    int ok = fwrite(&h, sizeof h, 1, a.f) == 1 && fwrite(ds->offsets, 8, n_off, a.f) == n_off &&
             fwrite(ds->ids, 4, h.n_tokens, a.f) == h.n_tokens && fwrite(ds->labels, 4, h.n_tokens, a.f) == h.n_tokens;
    if (!ok) {
        zt_atomic_abort(&a);
        return zt_fail(ZT_EIO, "cannot write the tokenized cache '%s': %s", path, strerror(errno));
    }
    return zt_atomic_commit(&a);
}

zt_status zt_cache_get(const char *dir, const zt_cache_key *k, int32_t vocab_size, zt_cache_build_fn build, void *ctx,
                       zt_dataset *ds, int *hit)
{
    *ds = (zt_dataset){0};
    char path[4096];
    int lfd;
    zt_status st = zt_mkdir_p(dir);
    if (st) return st;
    if (snprintf(path, sizeof path, "%s/tokens-%016llx%016llx.bin", dir, (unsigned long long)k->h[0],
                 (unsigned long long)k->h[1]) >= (int)sizeof path)
        return zt_fail(ZT_EUSER, "data.cache_dir is too long");
    if ((st = zt_lock_file(path, &lfd))) return st;
    *hit = map_entry(path, vocab_size, ds);
    if (!*hit && !(st = build(ctx, ds))) st = write_entry(path, ds);
    zt_unlock_file(lfd);
    if (st) zt_dataset_free(ds);
    return st;
}
