/* Shard files of training checkpoints: one rank's segments of params, Adam m and Adam v
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
#include "lib/core/dtype.h"
#include "lib/core/fileio.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shard headers are written in host byte order");

#define SHARD_MAGIC "ZTSHARD2"
#define SHARD_ARRAYS 3
#define SHARD_CHUNK ((size_t)1 << 22) /* elements per write call */

typedef struct shard_header {
    char magic[8];
    uint64_t numel, world, rank, nseg, arrays, total, crc; /* crc: CRC-32C of the bytes before it */
} shard_header;
_Static_assert(sizeof(shard_header) == 64, "the shard header is 64 bytes");

typedef struct shard_entry {
    uint64_t offset, count;
} shard_entry; /* one segment in the table */
_Static_assert(sizeof(shard_entry) == 16, "a segment table entry is 16 bytes");

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

/* Writes the segment table: the non-empty segments; *crc gets their CRC-32C. */
static int write_table(FILE *f, const zt_state_segment *segs, int nseg, uint64_t *crc)
{
    uint32_t c = 0;
    int ok = 1;
    for (int i = 0; i < nseg && ok; i++) {
        shard_entry e = {segs[i].offset, segs[i].count};
        if (!e.count) continue;
        c = zt_crc32c(c, &e, sizeof e);
        ok = fwrite(&e, sizeof e, 1, f) == 1;
    }
    *crc = c;
    return ok;
}

/* The shard from arrays, or (arrays NULL) from source through a bounce buffer. */
static zt_status write_shard(const char *ckpt_dir, int rank, int world, size_t numel, const zt_state_segment *segs,
                             int nseg, const float *const *arrays, zt_state_source source, void *ctx)
{
    ZT_ASSERT(world > 0 && rank >= 0 && rank < world && nseg >= 0 && (segs || !nseg));
    shard_header h = {.magic = SHARD_MAGIC, .numel = numel, .world = (uint64_t)world, .rank = (uint64_t)rank,
                      .arrays = SHARD_ARRAYS};
    size_t end = 0; /* of the previous segment */
    for (int i = 0; i < nseg; i++) {
        ZT_ASSERT(segs[i].offset >= end && segs[i].offset <= numel && segs[i].count <= numel - segs[i].offset);
        end = segs[i].offset + segs[i].count;
        h.nseg += segs[i].count != 0;
        h.total += segs[i].count;
    }
    ZT_ASSERT(!h.total || source || (arrays[0] && arrays[1] && arrays[2]));
    h.crc = header_crc(&h);
    float *bounce = NULL;
    if (source && h.total && !(bounce = malloc((h.total < SHARD_CHUNK ? h.total : SHARD_CHUNK) * sizeof *bounce)))
        return zt_fail(ZT_ENOMEM, "out of memory writing a checkpoint shard");
    char path[4096];
    zt_status st = shard_path(path, sizeof path, ckpt_dir, rank, world);
    zt_atomic_file a;
    if (st || (st = zt_atomic_open(&a, path))) {
        free(bounce);
        return st;
    }
    uint64_t table_crc;
    int ok = fwrite(&h, sizeof h, 1, a.f) == 1 && write_table(a.f, segs, nseg, &table_crc) &&
             fwrite(&table_crc, sizeof table_crc, 1, a.f) == 1;
    for (int k = 0; k < SHARD_ARRAYS && ok && !st; k++)
        for (size_t j = 0; j < h.total && ok && !st; j += SHARD_CHUNK) {
            size_t c = h.total - j < SHARD_CHUNK ? h.total - j : SHARD_CHUNK;
            if (source) st = source(ctx, k, j, c, bounce);
            ok = st || fwrite(source ? bounce : arrays[k] + j, sizeof(float), c, a.f) == c;
        }
    free(bounce);
    if (!ok || st) {
        int e = errno;
        zt_atomic_abort(&a);
        return st ? st : zt_fail(ZT_EIO, "writing '%s' failed: %s", path, strerror(e));
    }
    return zt_atomic_commit(&a);
}

zt_status zt_state_write_shard(const char *ckpt_dir, int rank, int world, size_t numel, const zt_state_segment *segs,
                               int nseg, const float *params, const float *m, const float *v)
{
    const float *arrays[SHARD_ARRAYS] = {params, m, v};
    return write_shard(ckpt_dir, rank, world, numel, segs, nseg, arrays, NULL, NULL);
}

zt_status zt_state_write_shard_from(const char *ckpt_dir, int rank, int world, size_t numel,
                                    const zt_state_segment *segs, int nseg, zt_state_source source, void *ctx)
{
    return write_shard(ckpt_dir, rank, world, numel, segs, nseg, NULL, source, ctx);
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

/* Where the segment table and its CRC end: the first array starts there. */
static size_t table_end(const shard_header *h) { return sizeof *h + h->nseg * sizeof(shard_entry) + sizeof(uint64_t); }

/* Checks a shard's header and size against what rank of world must hold; *h gets the header. */
static zt_status header_check(int fd, const char *path, size_t numel, int rank, int world, shard_header *h)
{
    struct stat sb;
    if (fstat(fd, &sb)) return zt_fail(ZT_EIO, "cannot stat '%s': %s", path, strerror(errno));
    if ((size_t)sb.st_size < sizeof *h)
        return zt_fail(ZT_EUSER, "'%s': %lld bytes, shorter than a shard header (truncated)", path,
                       (long long)sb.st_size);
    zt_status st = pread_all(fd, h, sizeof *h, 0, path);
    if (st) return st;
    if (memcmp(h->magic, SHARD_MAGIC, 8)) return zt_fail(ZT_EUSER, "'%s': not a zt checkpoint shard (bad magic)", path);
    if (h->crc != header_crc(h)) return zt_fail(ZT_EUSER, "'%s': shard header checksum mismatch (corrupt)", path);
    if (h->numel != numel)
        return zt_fail(ZT_EUSER, "'%s': shard of a %llu-element model, expected %zu", path,
                       (unsigned long long)h->numel, numel);
    if (h->world != (uint64_t)world || h->rank != (uint64_t)rank)
        return zt_fail(ZT_EUSER, "'%s': header says rank %llu of %llu, the name rank %d of %d", path,
                       (unsigned long long)h->rank, (unsigned long long)h->world, rank, world);
    if (h->arrays != SHARD_ARRAYS)
        return zt_fail(ZT_EUSER, "'%s': %llu arrays, expected %d (params, Adam m, Adam v)", path,
                       (unsigned long long)h->arrays, SHARD_ARRAYS);
    /* bounded by the file's size first, so that a corrupt count allocates nothing and overflows nothing */
    uint64_t room = (uint64_t)sb.st_size - sizeof *h;
    if (h->nseg > numel || h->total > numel || h->nseg > room / sizeof(shard_entry) ||
        h->total > room / (SHARD_ARRAYS * sizeof(float)))
        return zt_fail(ZT_EUSER, "'%s': %lld bytes cannot hold the %llu segments of %llu elements its header claims "
                       "(truncated or corrupt)", path, (long long)sb.st_size, (unsigned long long)h->nseg,
                       (unsigned long long)h->total);
    size_t want = table_end(h) + SHARD_ARRAYS * h->total * sizeof(float);
    if ((size_t)sb.st_size != want)
        return zt_fail(ZT_EUSER, "'%s': %lld bytes, expected %zu (truncated or corrupt)", path, (long long)sb.st_size,
                       want);
    return ZT_OK;
}

/* [lo, hi): elements of the requested range that rank's shard holds */
typedef struct shard_piece {
    size_t lo, hi;
    int rank;
} shard_piece;

typedef struct range_read {
    const char *dir;
    size_t numel, offset, end; /* the requested range [offset, end) */
    float *dst[SHARD_ARRAYS];  /* the arrays' element offset goes to dst[k][0]; NULL: skipped */
    shard_piece *pieces;       /* what the shards read so far hold of the range */
    size_t npieces, cap;
} range_read;

static zt_status add_piece(range_read *rr, size_t lo, size_t hi, int rank)
{
    if (rr->npieces == rr->cap) {
        size_t cap = rr->cap ? 2 * rr->cap : 64;
        shard_piece *p = realloc(rr->pieces, cap * sizeof *p);
        if (!p) return zt_fail(ZT_ENOMEM, "out of memory reading checkpoint '%s'", rr->dir);
        rr->pieces = p, rr->cap = cap;
    }
    rr->pieces[rr->npieces++] = (shard_piece){lo, hi, rank};
    return ZT_OK;
}

/* A NaN or infinity read back from array k (elements [lo, lo+n) of the flat arrays) is
 * a corrupt or diverged checkpoint, not something to resume from or export. */
static zt_status finite_check(const char *path, int k, const float *p, size_t lo, size_t n)
{
    static const char *const arrays[SHARD_ARRAYS] = {"weights", "Adam m", "Adam v"};
    const char *what;
    size_t bad = zt_find_nonfinite(p, ZT_F32, n, &what);
    if (bad == n) return ZT_OK;
    return zt_fail(ZT_EUSER, "'%s': element %zu of the %s is %s (a diverged or corrupt checkpoint)", path, lo + bad,
                   arrays[k], what);
}

/* Checks the segment table of the shard open as fd (header h), and reads the parts of its
 * segments that lie inside the range, noting them as pieces. */
static zt_status read_segments(range_read *rr, int fd, const char *path, const shard_header *h, int rank)
{
    size_t bytes = h->nseg * sizeof(shard_entry);
    shard_entry *table = malloc(bytes + sizeof(uint64_t));
    if (!table) return zt_fail(ZT_ENOMEM, "out of memory reading the segment table of '%s'", path);
    zt_status st = pread_all(fd, table, bytes + sizeof(uint64_t), sizeof *h, path);
    uint64_t crc;
    if (!st) memcpy(&crc, (char *)table + bytes, sizeof crc);
    if (!st && crc != zt_crc32c(0, table, bytes))
        st = zt_fail(ZT_EUSER, "'%s': segment table checksum mismatch (corrupt)", path);
    size_t end = 0, packed = 0; /* end of the previous segment; elements before this segment in each array */
    for (size_t i = 0; i < h->nseg && !st; i++) {
        shard_entry e = table[i];
        if (!e.count || e.offset < end || e.offset > rr->numel || e.count > rr->numel - e.offset) {
            st = zt_fail(ZT_EUSER, "'%s': segment %zu [%llu, +%llu) is empty, out of order or past the %zu elements "
                         "(corrupt)", path, i, (unsigned long long)e.offset, (unsigned long long)e.count, rr->numel);
            break;
        }
        size_t lo = e.offset > rr->offset ? e.offset : rr->offset;
        size_t hi = e.offset + e.count < rr->end ? e.offset + e.count : rr->end;
        if (lo < hi) st = add_piece(rr, lo, hi, rank);
        size_t at = packed + (lo - e.offset); /* lo's position in each array */
        for (int k = 0; k < SHARD_ARRAYS && !st && lo < hi; k++)
            if (rr->dst[k]) {
                float *dst = rr->dst[k] + (lo - rr->offset);
                st = pread_all(fd, dst, (hi - lo) * sizeof(float),
                               (off_t)(table_end(h) + ((size_t)k * h->total + at) * sizeof(float)), path);
                if (!st) st = finite_check(path, k, dst, lo, hi - lo);
            }
        end = e.offset + e.count;
        packed += e.count;
    }
    if (!st && packed != h->total)
        st = zt_fail(ZT_EUSER, "'%s': segments of %zu elements, the header says %llu (corrupt)", path, packed,
                     (unsigned long long)h->total);
    free(table);
    return st;
}

static int piece_order(const void *a, const void *b)
{
    size_t x = ((const shard_piece *)a)->lo, y = ((const shard_piece *)b)->lo;
    return (x > y) - (x < y);
}

/* Every element of the range in exactly one piece. */
static zt_status coverage_check(range_read *rr, int world)
{
    qsort(rr->pieces, rr->npieces, sizeof *rr->pieces, piece_order);
    size_t next = rr->offset; /* the first element no piece so far holds */
    int holder = -1;          /* the rank whose piece ends at next */
    for (size_t i = 0; i < rr->npieces; i++) {
        const shard_piece *p = &rr->pieces[i];
        if (p->lo > next)
            return zt_fail(ZT_EUSER, "checkpoint '%s': no shard holds elements [%zu, %zu)", rr->dir, next, p->lo);
        if (p->lo < next)
            return zt_fail(ZT_EUSER, "checkpoint '%s': elements [%zu, %zu) are in two shards (ranks %d and %d of %d)",
                           rr->dir, p->lo, p->hi < next ? p->hi : next, holder, p->rank, world);
        next = p->hi, holder = p->rank;
    }
    if (next < rr->end)
        return zt_fail(ZT_EUSER, "checkpoint '%s': no shard holds elements [%zu, %zu)", rr->dir, next, rr->end);
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
    range_read rr = {.dir = ckpt_dir, .numel = numel, .offset = offset, .end = offset + count, .dst = {params, m, v}};
    /* any shard may hold any part of the range: each one's table is read */
    for (int r = 0; r < world && !st; r++) {
        char path[4096];
        if ((st = shard_path(path, sizeof path, ckpt_dir, r, world))) break;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            st = zt_fail(errno == ENOENT || errno == EACCES ? ZT_EUSER : ZT_EIO,
                         "'%s': cannot open this shard of a %d-rank checkpoint: %s", path, world, strerror(errno));
            break;
        }
        shard_header h;
        st = header_check(fd, path, numel, r, world, &h);
        if (!st) st = read_segments(&rr, fd, path, &h, r);
        close(fd);
    }
    if (!st) st = coverage_check(&rr, world);
    free(rr.pieces);
    return st;
}
