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

#define SHARD_MAGIC "ZTSHARD3"
#define SHARD_MAGIC_V2 "ZTSHARD2" /* the format before block checksums */
#define SHARD_ARRAYS 3
#define SHARD_CHUNK ((size_t)1 << 22) /* elements per write call */
#define SHARD_BLOCK ((size_t)1 << 16) /* elements per data checksum (256 KiB) */

static const char *const array_names[SHARD_ARRAYS] = {"params", "Adam m", "Adam v"};

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

static size_t blocks_of(size_t count) { return (count + SHARD_BLOCK - 1) / SHARD_BLOCK; }

/* The CRC-32C of each block of each segment of one packed array, as the array streams past
 * in pieces of any size: a block is SHARD_BLOCK elements from its segment's start, or the
 * segment's tail. */
typedef struct block_crcs {
    const zt_state_segment *segs;
    int seg;       /* the segment being passed (empty ones are skipped) */
    size_t in_seg; /* its elements passed so far */
    uint32_t crc;  /* of the block being passed */
    uint32_t *out; /* where the next block's CRC goes */
} block_crcs;

static void block_crcs_pass(block_crcs *b, const float *p, size_t n)
{
    while (n) {
        while (b->in_seg == b->segs[b->seg].count) b->seg++, b->in_seg = 0;
        size_t count = b->segs[b->seg].count, take = SHARD_BLOCK - b->in_seg % SHARD_BLOCK;
        if (take > count - b->in_seg) take = count - b->in_seg;
        if (take > n) take = n;
        b->crc = zt_crc32c(b->crc, p, take * sizeof *p);
        b->in_seg += take, p += take, n -= take;
        if (b->in_seg % SHARD_BLOCK == 0 || b->in_seg == count) *b->out++ = b->crc, b->crc = 0;
    }
}

/* Writes the three packed arrays (from arrays, or from source through a bounce buffer), then
 * their block CRCs: nblocks for each array. */
static zt_status write_arrays(FILE *f, const char *path, const shard_header *h, const zt_state_segment *segs,
                              size_t nblocks, const float *const *arrays, zt_state_source source, void *ctx)
{
    size_t chunk = h->total < SHARD_CHUNK ? h->total : SHARD_CHUNK;
    float *bounce = source && h->total ? malloc(chunk * sizeof *bounce) : NULL;
    uint32_t *crcs = malloc((SHARD_ARRAYS * nblocks + 1) * sizeof *crcs);
    if (!crcs || (source && h->total && !bounce)) {
        free(bounce), free(crcs);
        return zt_fail(ZT_ENOMEM, "out of memory writing checkpoint shard '%s'", path);
    }
    zt_status st = ZT_OK;
    int ok = 1;
    for (int k = 0; k < SHARD_ARRAYS && ok && !st; k++) {
        block_crcs b = {.segs = segs, .out = crcs + k * nblocks};
        for (size_t j = 0; j < h->total && ok && !st; j += SHARD_CHUNK) {
            size_t c = h->total - j < SHARD_CHUNK ? h->total - j : SHARD_CHUNK;
            const float *piece = source ? bounce : arrays[k] + j;
            if (source && (st = source(ctx, k, j, c, bounce))) break;
            block_crcs_pass(&b, piece, c);
            ok = fwrite(piece, sizeof *piece, c, f) == c;
        }
    }
    if (ok && !st) ok = fwrite(crcs, sizeof *crcs, SHARD_ARRAYS * nblocks, f) == SHARD_ARRAYS * nblocks;
    int e = errno;
    free(bounce), free(crcs);
    return st ? st : ok ? ZT_OK : zt_fail(ZT_EIO, "writing '%s' failed: %s", path, strerror(e));
}

/* The shard from arrays, or (arrays NULL) from source. */
static zt_status write_shard(const char *ckpt_dir, int rank, int world, size_t numel, const zt_state_segment *segs,
                             int nseg, const float *const *arrays, zt_state_source source, void *ctx)
{
    ZT_ASSERT(world > 0 && rank >= 0 && rank < world && nseg >= 0 && (segs || !nseg));
    shard_header h = {
        .magic = SHARD_MAGIC, .numel = numel, .world = (uint64_t)world, .rank = (uint64_t)rank, .arrays = SHARD_ARRAYS};
    size_t end = 0, nblocks = 0; /* end of the previous segment; blocks of each array */
    for (int i = 0; i < nseg; i++) {
        ZT_ASSERT(segs[i].offset >= end && segs[i].offset <= numel && segs[i].count <= numel - segs[i].offset);
        end = segs[i].offset + segs[i].count;
        h.nseg += segs[i].count != 0;
        h.total += segs[i].count;
        nblocks += blocks_of(segs[i].count);
    }
    ZT_ASSERT(!h.total || source || (arrays[0] && arrays[1] && arrays[2]));
    h.crc = header_crc(&h);
    char path[4096];
    zt_status st = shard_path(path, sizeof path, ckpt_dir, rank, world);
    zt_atomic_file a;
    if (st || (st = zt_atomic_open(&a, path))) return st;
    uint64_t table_crc;
    if (fwrite(&h, sizeof h, 1, a.f) != 1 || !write_table(a.f, segs, nseg, &table_crc) ||
        fwrite(&table_crc, sizeof table_crc, 1, a.f) != 1)
        st = zt_fail(ZT_EIO, "writing '%s' failed: %s", path, strerror(errno));
    if (!st) st = write_arrays(a.f, path, &h, segs, nblocks, arrays, source, ctx);
    if (st) {
        zt_atomic_abort(&a);
        return st;
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
        return zt_fail(errno == ENOENT || errno == ENOTDIR ? ZT_EUSER : ZT_EIO, "cannot open checkpoint '%s': %s", dir,
                       strerror(errno));
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

/* Checks a shard's header against what rank of world must hold and against the file's
 * size, which *size gets; *h gets the header. */
static zt_status header_check(int fd, const char *path, size_t numel, int rank, int world, shard_header *h,
                              size_t *size)
{
    struct stat sb;
    if (fstat(fd, &sb)) return zt_fail(ZT_EIO, "cannot stat '%s': %s", path, strerror(errno));
    if ((size_t)sb.st_size < sizeof *h)
        return zt_fail(ZT_EUSER, "'%s': %lld bytes, shorter than a shard header (truncated)", path,
                       (long long)sb.st_size);
    zt_status st = pread_all(fd, h, sizeof *h, 0, path);
    if (st) return st;
    if (!memcmp(h->magic, SHARD_MAGIC_V2, 8))
        return zt_fail(ZT_EUSER,
                       "'%s': a ZTSHARD2 shard of an older zt, without data checksums: this zt reads "
                       "ZTSHARD3 (resume or export it with the zt that wrote it)",
                       path);
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
        return zt_fail(ZT_EUSER,
                       "'%s': %lld bytes cannot hold the %llu segments of %llu elements its header claims "
                       "(truncated or corrupt)",
                       path, (long long)sb.st_size, (unsigned long long)h->nseg, (unsigned long long)h->total);
    *size = (size_t)sb.st_size;
    return ZT_OK;
}

/* Reads and checks the segment table of the shard open as fd (header h) into *table, and
 * the file's size: the block CRCs of its segments end it. */
static zt_status read_table(int fd, const char *path, const shard_header *h, size_t numel, size_t size,
                            shard_entry **table, size_t *nblocks)
{
    size_t bytes = h->nseg * sizeof(shard_entry);
    shard_entry *t = malloc(bytes + sizeof(uint64_t));
    if (!t) return zt_fail(ZT_ENOMEM, "out of memory reading the segment table of '%s'", path);
    zt_status st = pread_all(fd, t, bytes + sizeof(uint64_t), sizeof *h, path);
    uint64_t crc;
    if (!st) memcpy(&crc, (char *)t + bytes, sizeof crc);
    if (!st && crc != zt_crc32c(0, t, bytes))
        st = zt_fail(ZT_EUSER, "'%s': segment table checksum mismatch (corrupt)", path);
    size_t end = 0, packed = 0; /* end of the previous segment; elements of those before */
    *nblocks = 0;
    for (size_t i = 0; i < h->nseg && !st; i++) {
        shard_entry e = t[i];
        if (!e.count || e.offset < end || e.offset > numel || e.count > numel - e.offset)
            st = zt_fail(ZT_EUSER,
                         "'%s': segment %zu [%llu, +%llu) is empty, out of order or past the %zu elements "
                         "(corrupt)",
                         path, i, (unsigned long long)e.offset, (unsigned long long)e.count, numel);
        end = e.offset + e.count;
        packed += e.count;
        *nblocks += blocks_of(e.count);
    }
    if (!st && packed != h->total)
        st = zt_fail(ZT_EUSER, "'%s': segments of %zu elements, the header says %llu (corrupt)", path, packed,
                     (unsigned long long)h->total);
    size_t want = table_end(h) + SHARD_ARRAYS * (h->total * sizeof(float) + *nblocks * sizeof(uint32_t));
    if (!st && size != want)
        st = zt_fail(ZT_EUSER, "'%s': %zu bytes, expected %zu (truncated or corrupt)", path, size, want);
    if (st) free(t);
    else *table = t;
    return st;
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
    float *block; /* SHARD_BLOCK elements: one block, read to be checked */
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

/* Where in a shard one segment's data lies: the segment, its position in the packed arrays
 * and the index of its first block. */
typedef struct segment_at {
    const char *path;
    const shard_header *h;
    size_t index, nblocks; /* the segment's index in the table; blocks of each array */
    shard_entry e;
    size_t packed, block;
} segment_at;

/* Reads elements [lo, hi) of array k of the segment into rr's dst[k], each block they touch
 * read whole and checked against its CRC. */
static zt_status read_checked(range_read *rr, int fd, const segment_at *s, int k, size_t lo, size_t hi)
{
    size_t data = table_end(s->h), crcs = data + SHARD_ARRAYS * s->h->total * sizeof(float);
    size_t seg_end = s->e.offset + s->e.count;
    zt_status st = ZT_OK;
    for (size_t b = (lo - s->e.offset) / SHARD_BLOCK; !st && s->e.offset + b * SHARD_BLOCK < hi; b++) {
        size_t first = s->e.offset + b * SHARD_BLOCK; /* the block's first element */
        size_t n = seg_end - first < SHARD_BLOCK ? seg_end - first : SHARD_BLOCK;
        size_t packed = k * s->h->total + s->packed + b * SHARD_BLOCK;           /* its position in the arrays */
        size_t a = first > lo ? first : lo, z = first + n < hi ? first + n : hi; /* the part wanted */
        /* a block wanted whole is read in place, one that is not through rr->block */
        float *buf = a == first && z == first + n ? rr->dst[k] + (first - rr->offset) : rr->block;
        uint32_t want;
        st = pread_all(fd, buf, n * sizeof(float), (off_t)(data + packed * sizeof(float)), s->path);
        if (!st)
            st = pread_all(fd, &want, sizeof want, (off_t)(crcs + (k * s->nblocks + s->block + b) * sizeof want),
                           s->path);
        if (!st && want != zt_crc32c(0, buf, n * sizeof(float)))
            st = zt_fail(ZT_EUSER,
                         "'%s': segment %zu [%llu, +%llu): %s elements [%zu, %zu) fail their checksum "
                         "(corrupt)",
                         s->path, s->index, (unsigned long long)s->e.offset, (unsigned long long)s->e.count,
                         array_names[k], first, first + n);
        if (!st && buf == rr->block)
            memcpy(rr->dst[k] + (a - rr->offset), rr->block + (a - first), (z - a) * sizeof(float));
    }
    return st;
}

/* A NaN or infinity read back from array k (elements [lo, lo+n) of the flat arrays) is
 * a corrupt or diverged checkpoint, not something to resume from or export. */
static zt_status finite_check(const char *path, int k, const float *p, size_t lo, size_t n)
{
    const char *what;
    size_t bad = zt_find_nonfinite(p, ZT_F32, n, &what);
    if (bad == n) return ZT_OK;
    return zt_fail(ZT_EUSER, "'%s': element %zu of the %s is %s (a diverged or corrupt checkpoint)", path, lo + bad,
                   array_names[k], what);
}

/* Reads the parts of the segments of the shard open as fd that lie inside the range,
 * noting them as pieces. */
static zt_status read_segments(range_read *rr, int fd, const char *path, const shard_header *h, size_t size, int rank)
{
    shard_entry *table = NULL;
    size_t nblocks = 0;
    zt_status st = read_table(fd, path, h, rr->numel, size, &table, &nblocks);
    if (st) return st;
    segment_at s = {.path = path, .h = h, .nblocks = nblocks};
    for (; s.index < h->nseg && !st; s.index++) {
        s.e = table[s.index];
        size_t lo = s.e.offset > rr->offset ? s.e.offset : rr->offset;
        size_t hi = s.e.offset + s.e.count < rr->end ? s.e.offset + s.e.count : rr->end;
        if (lo < hi) st = add_piece(rr, lo, hi, rank);
        for (int k = 0; k < SHARD_ARRAYS && !st && lo < hi; k++)
            if (rr->dst[k] && !(st = read_checked(rr, fd, &s, k, lo, hi)))
                st = finite_check(path, k, rr->dst[k] + (lo - rr->offset), lo, hi - lo);
        s.packed += s.e.count;
        s.block += blocks_of(s.e.count);
    }
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
    if (rr->npieces) /* pieces is NULL when there are none */
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

zt_status zt_state_read_range(const char *ckpt_dir, size_t numel, size_t offset, size_t count, float *params, float *m,
                              float *v)
{
    ZT_ASSERT(offset <= numel && count <= numel - offset);
    if (!count) return ZT_OK;
    int world = 0;
    zt_status st = shard_world(ckpt_dir, &world);
    if (st) return st;
    range_read rr = {.dir = ckpt_dir, .numel = numel, .offset = offset, .end = offset + count, .dst = {params, m, v}};
    if ((params || m || v) && !(rr.block = malloc(SHARD_BLOCK * sizeof *rr.block)))
        return zt_fail(ZT_ENOMEM, "out of memory reading checkpoint '%s'", ckpt_dir);
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
        size_t size = 0;
        st = header_check(fd, path, numel, r, world, &h, &size);
        if (!st) st = read_segments(&rr, fd, path, &h, size, r);
        close(fd);
    }
    if (!st) st = coverage_check(&rr, world);
    free(rr.pieces);
    free(rr.block);
    return st;
}

/* The shard's header, if it is one of this format (magic and checksum right), else zeros. */
static shard_header peek_header(int fd, const char *path)
{
    shard_header h = {0};
    if (pread_all(fd, &h, sizeof h, 0, path) || memcmp(h.magic, SHARD_MAGIC, 8) || h.crc != header_crc(&h))
        memset(&h, 0, sizeof h);
    return h;
}

zt_status zt_state_check_shards(const char *ckpt_dir, const char *json, size_t numel, int world, int stage)
{
    int w;
    zt_status st = shard_world(ckpt_dir, &w);
    if (st) return st;
    if (w != world)
        return zt_fail(ZT_EUSER, "'%s': 'world' is %d, but the checkpoint holds the shards of %d rank(s)", json, world,
                       w);
    for (int r = 0; r < world && !st; r++) {
        char path[4096];
        if ((st = shard_path(path, sizeof path, ckpt_dir, r, world))) break;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            st = zt_fail(errno == ENOENT || errno == EACCES ? ZT_EUSER : ZT_EIO, "'%s': cannot open: %s", path,
                         strerror(errno));
            break;
        }
        shard_header h = peek_header(fd, path);
        size_t size = 0;
        if (h.numel && h.numel != numel)
            st = zt_fail(ZT_EUSER, "'%s': 'numel' is %zu, but '%s' is a shard of a %llu-element model", json, numel,
                         path, (unsigned long long)h.numel);
        if (!st) st = header_check(fd, path, numel, r, world, &h, &size);
        /* stages 0-2 write one slice a rank; stage 3 a segment per model unit */
        if (!st && stage < 3 && h.nseg > 1)
            st = zt_fail(ZT_EUSER, "'%s': 'zero_stage' is %d, but '%s' holds %llu segments (the layout of stage 3)",
                         json, stage, path, (unsigned long long)h.nseg);
        close(fd);
    }
    return st;
}
