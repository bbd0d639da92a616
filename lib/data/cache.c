#define _GNU_SOURCE
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/fileio.h"

static const char MAGIC[8] = "ZTTOKv1";

typedef struct header {
    char magic[8];
    uint64_t n_examples, n_tokens;
} header;

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

/* Maps a cache file and points ds into it; 0 when the file is absent or not whole. */
static int map_entry(const char *path, zt_dataset *ds)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    struct stat sb;
    void *map = fstat(fd, &sb) == 0 && (size_t)sb.st_size >= sizeof(header)
                    ? mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
                    : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED) return 0;
    const header *h = map;
    size_t want = sizeof(header) + (h->n_examples + 1) * 8 + h->n_tokens * 8;
    if (memcmp(h->magic, MAGIC, 8) || h->n_examples == 0 || want != (size_t)sb.st_size) {
        munmap(map, (size_t)sb.st_size);
        return 0;
    }
    *ds = (zt_dataset){0};
    ds->n_examples = (int64_t)h->n_examples;
    ds->offsets = (int64_t *)(h + 1);
    ds->ids = (int32_t *)(ds->offsets + h->n_examples + 1);
    ds->labels = ds->ids + h->n_tokens;
    ds->map = map, ds->map_len = (size_t)sb.st_size;
    return 1;
}

static zt_status write_entry(const char *path, const zt_dataset *ds)
{
    zt_atomic_file a;
    zt_status st = zt_atomic_open(&a, path);
    if (st) return st;
    header h = {.n_examples = (uint64_t)ds->n_examples, .n_tokens = (uint64_t)zt_dataset_tokens(ds)};
    memcpy(h.magic, MAGIC, 8);
    int ok = fwrite(&h, sizeof h, 1, a.f) == 1 &&
             fwrite(ds->offsets, 8, h.n_examples + 1, a.f) == h.n_examples + 1 &&
             fwrite(ds->ids, 4, h.n_tokens, a.f) == h.n_tokens && fwrite(ds->labels, 4, h.n_tokens, a.f) == h.n_tokens;
    if (!ok) {
        zt_atomic_abort(&a);
        return zt_fail(ZT_EIO, "cannot write the tokenized cache '%s': %s", path, strerror(errno));
    }
    return zt_atomic_commit(&a);
}

zt_status zt_cache_get(const char *dir, const zt_cache_key *k, zt_cache_build_fn build, void *ctx, zt_dataset *ds,
                       int *hit)
{
    char path[4096], lock[4096 + 8];
    zt_status st = zt_mkdir_p(dir);
    if (st) return st;
    if (snprintf(path, sizeof path, "%s/tokens-%016llx%016llx.bin", dir, (unsigned long long)k->h[0],
                 (unsigned long long)k->h[1]) >= (int)sizeof path)
        return zt_fail(ZT_EUSER, "data.cache_dir is too long");
    snprintf(lock, sizeof lock, "%s.lock", path);
    int lfd = open(lock, O_RDWR | O_CREAT, 0644);
    if (lfd < 0 || flock(lfd, LOCK_EX)) {
        if (lfd >= 0) close(lfd);
        return zt_fail(ZT_EIO, "cannot lock '%s': %s", lock, strerror(errno));
    }
    *hit = map_entry(path, ds);
    if (!*hit && !(st = build(ctx, ds))) st = write_entry(path, ds);
    close(lfd); /* releases the lock */
    return st;
}
