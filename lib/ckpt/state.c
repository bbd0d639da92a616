/* Shard files of training checkpoints: one rank's slice of params, Adam m and Adam v
 * (format in state.h), written atomically and read back by range from any layout. */
#include "lib/ckpt/state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/crc32c.h"
#include "lib/core/fileio.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shard headers are written in host byte order");

#define SHARD_MAGIC "ZTSHARD1"
#define SHARD_ARRAYS 3
#define SHARD_CHUNK ((size_t)1 << 22) /* elements per write call */

typedef struct shard_header {
    char magic[8];
    uint64_t numel, world, rank, offset, count, arrays, crc; /* crc: CRC-32C of the bytes before it */
} shard_header;
_Static_assert(sizeof(shard_header) == 64, "the shard header is 64 bytes");

void zt_state_slice(size_t numel, int world, int rank, size_t *offset, size_t *count)
{
    ZT_ASSERT(world > 0 && rank >= 0 && rank < world);
    size_t p = numel / (size_t)world + (numel % (size_t)world != 0);
    size_t a = p * (size_t)rank, b = a + p;
    if (a > numel) a = numel;
    if (b > numel) b = numel;
    *offset = a;
    *count = b - a;
}

static zt_status shard_path(char *out, size_t n, const char *dir, int rank, int world)
{
    char name[64];
    snprintf(name, sizeof name, "rank-%05d-of-%05d.bin", rank, world);
    return zt_path_join(out, n, dir, name);
}

static uint64_t header_crc(const shard_header *h) { return zt_crc32c(0, h, offsetof(shard_header, crc)); }

zt_status zt_state_write_shard(const char *ckpt_dir, int rank, int world, size_t numel, const float *params,
                               const float *m, const float *v)
{
    char path[4096];
    shard_header h = {.magic = SHARD_MAGIC, .numel = numel, .world = (uint64_t)world, .rank = (uint64_t)rank,
                      .arrays = SHARD_ARRAYS};
    size_t off, count;
    zt_state_slice(numel, world, rank, &off, &count);
    ZT_ASSERT(!count || (params && m && v));
    h.offset = off, h.count = count;
    h.crc = header_crc(&h);
    zt_status st = shard_path(path, sizeof path, ckpt_dir, rank, world);
    zt_atomic_file a;
    if (st || (st = zt_atomic_open(&a, path))) return st;
    int ok = fwrite(&h, sizeof h, 1, a.f) == 1;
    const float *arrays[SHARD_ARRAYS] = {params, m, v};
    for (int k = 0; k < SHARD_ARRAYS && ok; k++)
        for (size_t j = 0; j < count && ok; j += SHARD_CHUNK) {
            size_t c = count - j < SHARD_CHUNK ? count - j : SHARD_CHUNK;
            ok = fwrite(arrays[k] + j, sizeof(float), c, a.f) == c;
        }
    if (!ok) {
        int e = errno;
        zt_atomic_abort(&a);
        return zt_fail(ZT_EIO, "writing '%s' failed: %s", path, strerror(e));
    }
    return zt_atomic_commit(&a);
}

/* --- reading -------------------------------------------------------------------------------- */

/* "rank-R-of-W.bin" (decimal digits) → W, else 0 */
static int shard_name_world(const char *s)
{
    char *end;
    if (strncmp(s, "rank-", 5) || s[5] < '0' || s[5] > '9') return 0;
    strtol(s + 5, &end, 10);
    if (strncmp(end, "-of-", 4) || end[4] < '0' || end[4] > '9') return 0;
    long w = strtol(end + 4, &end, 10);
    return strcmp(end, ".bin") || w < 1 || w > 1 << 24 ? 0 : (int)w;
}

/* The world size whose shards the directory holds (exactly one layout). */
static zt_status shard_world(const char *dir, int *world)
{
    DIR *d = opendir(dir);
    if (!d)
        return zt_fail(errno == ENOENT || errno == ENOTDIR ? ZT_EUSER : ZT_EIO, "cannot open checkpoint '%s': %s",
                       dir, strerror(errno));
    struct dirent *de;
    *world = 0;
    int other = 0;
    while ((de = readdir(d))) {
        int w = shard_name_world(de->d_name);
        if (!w) continue;
        if (*world && w != *world) other = w;
        else *world = w;
    }
    closedir(d);
    if (!*world) return zt_fail(ZT_EUSER, "'%s': no rank-*-of-*.bin shards (not a training checkpoint)", dir);
    if (other)
        return zt_fail(ZT_EUSER, "'%s': shards of two layouts (%d and %d ranks); the checkpoint is corrupt", dir,
                       *world, other);
    return ZT_OK;
}

static zt_status pread_all(int fd, void *buf, size_t n, off_t at, const char *path)
{
    char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, at);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return zt_fail(ZT_EIO, "reading '%s' failed: %s", path, strerror(errno));
        if (r == 0) return zt_fail(ZT_EUSER, "'%s': truncated shard", path);
        p += r, n -= (size_t)r, at += r;
    }
    return ZT_OK;
}

/* Checks a shard's header and size against what rank of world must hold. */
static zt_status shard_check(int fd, const char *path, size_t numel, int rank, int world)
{
    shard_header h;
    struct stat sb;
    if (fstat(fd, &sb)) return zt_fail(ZT_EIO, "cannot stat '%s': %s", path, strerror(errno));
    if ((size_t)sb.st_size < sizeof h)
        return zt_fail(ZT_EUSER, "'%s': %lld bytes, shorter than a shard header (truncated)", path,
                       (long long)sb.st_size);
    zt_status st = pread_all(fd, &h, sizeof h, 0, path);
    if (st) return st;
    if (memcmp(h.magic, SHARD_MAGIC, 8)) return zt_fail(ZT_EUSER, "'%s': not a zt checkpoint shard (bad magic)", path);
    if (h.crc != header_crc(&h)) return zt_fail(ZT_EUSER, "'%s': shard header checksum mismatch (corrupt)", path);
    size_t off, count;
    zt_state_slice(numel, world, rank, &off, &count);
    if (h.numel != numel)
        return zt_fail(ZT_EUSER, "'%s': shard of a %llu-element model, expected %zu", path,
                       (unsigned long long)h.numel, numel);
    if (h.world != (uint64_t)world || h.rank != (uint64_t)rank || h.offset != off || h.count != count ||
        h.arrays != SHARD_ARRAYS)
        return zt_fail(ZT_EUSER, "'%s': header says rank %llu of %llu holding [%llu, +%llu), the name rank %d of %d", path,
                       (unsigned long long)h.rank, (unsigned long long)h.world, (unsigned long long)h.offset,
                       (unsigned long long)h.count, rank, world);
    size_t want = sizeof h + SHARD_ARRAYS * count * sizeof(float);
    if ((size_t)sb.st_size != want)
        return zt_fail(ZT_EUSER, "'%s': %lld bytes, expected %zu (truncated or corrupt)", path, (long long)sb.st_size,
                       want);
    return ZT_OK;
}

zt_status zt_state_read_range(const char *ckpt_dir, size_t numel, size_t offset, size_t count, float *params,
                              float *m, float *v)
{
    ZT_ASSERT(offset <= numel && count <= numel - offset);
    if (!count) return ZT_OK;
    int world = 0;
    zt_status st = shard_world(ckpt_dir, &world);
    if (st) return st;
    float *dst[SHARD_ARRAYS] = {params, m, v};
    size_t p = numel / (size_t)world + (numel % (size_t)world != 0), end = offset + count;
    for (int r = (int)(offset / p); r < world && (size_t)r * p < end && !st; r++) {
        char path[4096];
        size_t soff, scount;
        zt_state_slice(numel, world, r, &soff, &scount);
        if ((st = shard_path(path, sizeof path, ckpt_dir, r, world))) break;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            st = zt_fail(errno == ENOENT || errno == EACCES ? ZT_EUSER : ZT_EIO,
                         "'%s': cannot open this shard of a %d-rank checkpoint: %s", path, world, strerror(errno));
            break;
        }
        st = shard_check(fd, path, numel, r, world);
        size_t a = offset > soff ? offset : soff, b = end < soff + scount ? end : soff + scount;
        for (int k = 0; k < SHARD_ARRAYS && !st && a < b; k++)
            if (dst[k])
                st = pread_all(fd, dst[k] + (a - offset), (b - a) * sizeof(float),
                               (off_t)(sizeof(shard_header) + ((size_t)k * scount + (a - soff)) * sizeof(float)), path);
        close(fd);
    }
    return st;
}
