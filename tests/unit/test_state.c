/* Tests of lib/ckpt/state (checkpoint shards, trainer_state.json, DONE, newest and
 * rotation) and of the safetensors writer's fill callback that zt export uses.
 *
 * Also a tool for tests/cli/t1400-export.sh:
 *     test_state --make-checkpoint MODEL_DIR RUN_DIR STEP WORLD
 * writes MODEL_DIR's weights as a complete WORLD-rank checkpoint of RUN_DIR at STEP
 * (Adam m and v filled with other values, so that export must pick the weights). */
#include "lib/ckpt/state.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/ckpt/safetensors.h"
#include "lib/core/crc32c.h"
#include "lib/core/fileio.h"
#include "lib/core/rng.h"
#include "lib/model/llama.h"
#include "tests/unit/test.h"

static char root[256];

static void path_of(char *out, size_t n, const char *a, const char *b) { snprintf(out, n, "%s/%s", a, b); }

/* A fresh directory root/name. */
static void fresh_dir(char *out, size_t n, const char *name)
{
    path_of(out, n, root, name);
    CHECK(!zt_remove_tree(out) && !zt_mkdir_p(out));
}

/* n floats of random bits (any finite pattern, subnormals and -0 included: comparisons
 * are bitwise; NaN and infinity a checkpoint refuses to hold) */
static float *random_floats(size_t n, uint64_t seed)
{
    zt_rng r;
    zt_rng_seed(&r, seed, 0);
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)zt_rng_next_u64(&r);
        if ((u & 0x7f800000u) == 0x7f800000u) u ^= 0x40000000u; /* an all-ones exponent: clear its top bit */
        memcpy(&p[i], &u, 4);
    }
    return p;
}

/* Writes rank's shard of segs, packing them from the whole arrays src (params, m, v). */
static void write_segments(const char *dir, int rank, int world, size_t numel, const zt_state_segment *segs, int nseg,
                           const float *const src[3])
{
    size_t total = 0;
    for (int i = 0; i < nseg; i++) total += segs[i].count;
    float *packed[3];
    for (int k = 0; k < 3; k++) {
        packed[k] = malloc((total ? total : 1) * sizeof(float));
        size_t at = 0;
        for (int i = 0; i < nseg; i++) {
            memcpy(packed[k] + at, src[k] + segs[i].offset, segs[i].count * sizeof(float));
            at += segs[i].count;
        }
    }
    zt_status st = zt_state_write_shard(dir, rank, world, numel, segs, nseg, packed[0], packed[1], packed[2]);
    CHECK_MSG(!st, "%s", zt_errmsg());
    for (int k = 0; k < 3; k++) free(packed[k]);
}

/* The arrays of a model of numel elements, written as shards of world ranks into dir,
 * one slice each (ZeRO stages 0-2). */
static void write_all(const char *dir, size_t numel, int world, const float *p, const float *m, const float *v)
{
    const float *src[3] = {p, m, v};
    for (int r = 0; r < world; r++) {
        zt_state_segment seg;
        zt_state_slice(numel, world, r, &seg.offset, &seg.count);
        write_segments(dir, r, world, numel, &seg, 1, src);
    }
}

/* Rank's segments when each unit (units[i] elements, one after another) is cut into world
 * slices of ceil(n / world), as ZeRO stage 3 shards each model unit; some may be empty. */
static void unit_segments(const size_t *units, int nunits, int world, int rank, zt_state_segment *segs)
{
    size_t base = 0;
    for (int u = 0; u < nunits; u++) {
        zt_state_slice(units[u], world, rank, &segs[u].offset, &segs[u].count);
        segs[u].offset += base;
        base += units[u];
    }
}

/* The arrays written as shards of world ranks in the stage 3 layout of units. */
static void write_units(const char *dir, size_t numel, int world, const size_t *units, int nunits,
                        const float *const src[3])
{
    zt_state_segment *segs = malloc((size_t)nunits * sizeof *segs);
    for (int r = 0; r < world; r++) {
        unit_segments(units, nunits, world, r, segs);
        write_segments(dir, r, world, numel, segs, nunits, src);
    }
    free(segs);
}

/* The sum of n unit sizes. */
static size_t units_numel(const size_t *units, int n)
{
    size_t sum = 0;
    for (int i = 0; i < n; i++) sum += units[i];
    return sum;
}

/* Reads [off, off+count) of all three arrays and compares them bitwise with src. */
static int read_equal(const char *dir, size_t numel, size_t off, size_t count, const float *const src[3])
{
    float *got[3];
    int same = 1;
    for (int k = 0; k < 3; k++) got[k] = malloc((count ? count : 1) * sizeof(float));
    zt_status st = zt_state_read_range(dir, numel, off, count, got[0], got[1], got[2]);
    CHECK_MSG(!st, "range [%zu, +%zu): %s", off, count, zt_errmsg());
    for (int k = 0; k < 3; k++) {
        same &= !st && !memcmp(got[k], src[k] + off, count * sizeof(float));
        free(got[k]);
    }
    CHECK_MSG(same, "range [%zu, +%zu) reads back different values", off, count);
    return same;
}

/* st failed with ZT_EUSER and a message holding both needles */
static void expect_user_error(zt_status st, const char *n1, const char *n2)
{
    const char *msg = zt_errmsg();
    CHECK_MSG(st == ZT_EUSER, "status %d (%s)", st, msg);
    CHECK_MSG(!n1 || strstr(msg, n1), "message lacks '%s': %s", n1, msg);
    CHECK_MSG(!n2 || strstr(msg, n2), "message lacks '%s': %s", n2, msg);
}

/* --- slices and shards --------------------------------------------------------------------- */

static void test_slices(void)
{
    size_t sizes[] = {1, 2, 3, 5, 7, 37, 1009, 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int world = 1; world <= 9; world++) {
            size_t next = 0, p = (sizes[i] + (size_t)world - 1) / (size_t)world;
            for (int r = 0; r < world; r++) {
                size_t off, count;
                zt_state_slice(sizes[i], world, r, &off, &count);
                CHECK(off == next && count <= p);
                CHECK(count == p || off + count == sizes[i]); /* only the tail is short */
                next = off + count;
            }
            CHECK(next == sizes[i]);
        }
}

/* Every range of every layout (one slice per rank, or the stage 3 layout of units when
 * units is not NULL) reads back bitwise, any array skippable. */
static void check_all_ranges(size_t numel, int range_step, const size_t *units, int nunits)
{
    const float *src[3] = {random_floats(numel, 1), random_floats(numel, 2), random_floats(numel, 3)};
    float *got[3] = {malloc(numel * 4), malloc(numel * 4), malloc(numel * 4)};
    for (int world = 1; world <= 4; world++) {
        char dir[512], name[64];
        snprintf(name, sizeof name, "ranges-%zu-w%d%s", numel, world, units ? "-units" : "");
        fresh_dir(dir, sizeof dir, name);
        if (units) write_units(dir, numel, world, units, nunits, src);
        else write_all(dir, numel, world, src[0], src[1], src[2]);
        CHECK(!zt_state_read_range(dir, numel, 0, numel, NULL, NULL, NULL)); /* every shard and the coverage */
        int bad = 0;
        for (size_t off = 0; off < numel && !bad; off += (size_t)range_step)
            for (size_t count = 1; off + count <= numel && !bad; count += count < 8 ? 1 : (size_t)range_step) {
                int skip = (int)((off + count) % 4); /* 0: read all; 1..3: skip that array */
                float *dst[3];
                for (int k = 0; k < 3; k++) {
                    memset(got[k], 0xA5, count * 4);
                    dst[k] = skip == k + 1 ? NULL : got[k];
                }
                zt_status st = zt_state_read_range(dir, numel, off, count, dst[0], dst[1], dst[2]);
                for (int k = 0; k < 3 && !st; k++)
                    if (dst[k] && memcmp(got[k], src[k] + off, count * 4)) st = ZT_ERUNTIME;
                CHECK_MSG(!st, "world %d, range [%zu, +%zu) array mismatch or error: %s", world, off, count,
                          zt_errmsg());
                bad = st != ZT_OK;
            }
    }
    for (int k = 0; k < 3; k++) free((void *)src[k]), free(got[k]);
}

/* units of uneven sizes, some smaller than the world (empty slices) */
static const size_t small_units[] = {5, 1, 13, 2, 8, 3, 1, 4};
static const size_t large_units[] = {3000, 7, 50000, 1, 2, 46993};

static void test_ranges_small(void) { check_all_ranges(37, 1, NULL, 0); } /* every range */
static void test_ranges_large(void) { check_all_ranges(100003, 9973, NULL, 0); }
static void test_units_small(void) { check_all_ranges(units_numel(small_units, 8), 1, small_units, 8); }
static void test_units_large(void) { check_all_ranges(units_numel(large_units, 6), 9973, large_units, 6); }

/* A 1500-unit model at 64 ranks: shards of about 1500 segments each. */
static void test_many_segments(void)
{
    enum { UNITS = 1500, WORLD = 64 };
    size_t units[UNITS];
    for (int i = 0; i < UNITS; i++) units[i] = 1 + (size_t)i * 37 % 211;
    size_t numel = units_numel(units, UNITS);
    const float *src[3] = {random_floats(numel, 7), random_floats(numel, 8), random_floats(numel, 9)};
    char dir[512];
    fresh_dir(dir, sizeof dir, "many");
    write_units(dir, numel, WORLD, units, UNITS, src);
    CHECK(!zt_state_read_range(dir, numel, 0, numel, NULL, NULL, NULL));
    read_equal(dir, numel, 0, numel, src);
    zt_rng rng;
    zt_rng_seed(&rng, 10, 0);
    for (int i = 0; i < 50; i++) {
        size_t off = zt_rng_next_u64(&rng) % numel, count = 1 + zt_rng_next_u64(&rng) % (numel - off);
        if (!read_equal(dir, numel, off, count, src)) break;
    }
    for (int k = 0; k < 3; k++) free((void *)src[k]);
}

/* Written in one layout, read in another: the ranges each rank of the other reads. */
static void test_reshard(void)
{
    static const size_t units[] = {100, 1, 400, 7, 501};
    size_t numel = units_numel(units, 5);
    const float *src[3] = {random_floats(numel, 11), random_floats(numel, 12), random_floats(numel, 13)};
    char dir[512];
    fresh_dir(dir, sizeof dir, "reshard-3units");
    write_units(dir, numel, 3, units, 5, src);
    for (int r = 0; r < 2; r++) { /* stage 3 on 3 ranks → one slice per rank on 2 */
        size_t off, count;
        zt_state_slice(numel, 2, r, &off, &count);
        read_equal(dir, numel, off, count, src);
    }
    fresh_dir(dir, sizeof dir, "reshard-2flat");
    write_all(dir, numel, 2, src[0], src[1], src[2]);
    for (int r = 0; r < 3; r++) { /* one slice per rank on 2 → stage 3 on 3 ranks, segment by segment */
        zt_state_segment segs[5];
        unit_segments(units, 5, 3, r, segs);
        for (int i = 0; i < 5; i++) read_equal(dir, numel, segs[i].offset, segs[i].count, src);
    }
    for (int k = 0; k < 3; k++) free((void *)src[k]);
}

/* Shards that leave elements out, or hold some twice, are refused where a read needs them. */
static void test_gap_overlap(void)
{
    static const size_t units[] = {30, 40, 30}; /* rank 1 of 3 holds [10, 20), [44, 58), [80, 90) */
    enum { N = 100 };
    const float *src[3] = {random_floats(N, 14), random_floats(N, 15), random_floats(N, 16)};
    float buf[N];
    char dir[512];
    zt_state_segment segs[3];

    fresh_dir(dir, sizeof dir, "gap");
    write_units(dir, N, 3, units, 3, src);
    unit_segments(units, 3, 3, 1, segs);
    segs[1] = segs[2]; /* rank 1 without [44, 58) */
    write_segments(dir, 1, 3, N, segs, 2, src);
    expect_user_error(zt_state_read_range(dir, N, 0, N, NULL, NULL, NULL), dir, "no shard holds elements [44, 58)");
    expect_user_error(zt_state_read_range(dir, N, 50, 10, buf, NULL, NULL), dir, "no shard holds elements [50, 58)");
    read_equal(dir, N, 0, 44, src); /* the rest reads */
    read_equal(dir, N, 58, N - 58, src);

    fresh_dir(dir, sizeof dir, "gap-all"); /* a one-rank checkpoint whose shard holds nothing */
    write_segments(dir, 0, 1, N, NULL, 0, src);
    expect_user_error(zt_state_read_range(dir, N, 0, N, buf, NULL, NULL), dir, "no shard holds elements [0, 100)");

    fresh_dir(dir, sizeof dir, "gap-end");
    zt_state_segment most = {0, N - 1};
    write_segments(dir, 0, 1, N, &most, 1, src);
    expect_user_error(zt_state_read_range(dir, N, 0, N, buf, NULL, NULL), dir, "no shard holds elements [99, 100)");

    fresh_dir(dir, sizeof dir, "overlap");
    write_units(dir, N, 3, units, 3, src);
    unit_segments(units, 3, 3, 1, segs);
    segs[0] = (zt_state_segment){5, 15}; /* rank 1 also holds [5, 10) of rank 0's [0, 10) */
    write_segments(dir, 1, 3, N, segs, 3, src);
    expect_user_error(zt_state_read_range(dir, N, 0, N, NULL, NULL, NULL), dir,
                      "elements [5, 10) are in two shards (ranks 0 and 1 of 3)");
    expect_user_error(zt_state_read_range(dir, N, 8, 1, buf, NULL, NULL), dir, "elements [8, 9) are in two shards");
    read_equal(dir, N, 10, N - 10, src);
    for (int k = 0; k < 3; k++) free((void *)src[k]);
}

/* fewer elements than ranks: the last ranks hold empty shards */
static void test_tiny_model(void)
{
    char dir[512];
    fresh_dir(dir, sizeof dir, "tiny");
    float p[3] = {1, 2, 3}, m[3] = {4, 5, 6}, v[3] = {7, 8, 9}, got[3];
    write_all(dir, 3, 4, p, m, v);
    CHECK(!zt_state_read_range(dir, 3, 0, 3, got, NULL, NULL) && !memcmp(got, p, sizeof p));
    CHECK(!zt_state_read_range(dir, 3, 1, 2, NULL, NULL, got) && !memcmp(got, v + 1, 8));
}

static void copy_file(const char *from, const char *to)
{
    char *data;
    size_t len;
    CHECK(!zt_read_file(from, &data, &len) && !zt_write_file_atomic(to, data, len));
    free(data);
}

/* Rewrites bytes [at, at+n) of path. */
static void patch(const char *path, long at, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "r+b");
    CHECK(f && !fseek(f, at, SEEK_SET) && fwrite(bytes, 1, n, f) == n);
    if (f) fclose(f);
}

/* Sets field i (0: numel ... 5: total) of path's header and the header CRC to match. */
static void set_header_field(const char *path, int i, uint64_t value)
{
    unsigned char h[64];
    FILE *f = fopen(path, "rb");
    CHECK(f && fread(h, 1, 64, f) == 64);
    if (f) fclose(f);
    memcpy(h + 8 + 8 * i, &value, 8);
    uint64_t crc = zt_crc32c(0, h, 56);
    memcpy(h + 56, &crc, 8);
    patch(path, 0, h, 64);
}

static void test_bad_shards(void)
{
    enum { N = 101 };
    char good[512], dir[512], shard[600], other[600];
    float *p = random_floats(N, 4), buf[N];
    fresh_dir(good, sizeof good, "bad-good");
    write_all(good, N, 3, p, p, p);
    CHECK(!zt_state_read_range(good, N, 0, N, NULL, NULL, NULL)); /* header check only */

    /* each case: a fresh copy of the good checkpoint, one shard damaged */
    for (int c = 0; c < 12; c++) {
        char name[32];
        snprintf(name, sizeof name, "bad-%d", c);
        fresh_dir(dir, sizeof dir, name);
        for (int r = 0; r < 3; r++) {
            char n1[64];
            snprintf(n1, sizeof n1, "rank-%05d-of-00003.bin", r);
            path_of(shard, sizeof shard, good, n1);
            path_of(other, sizeof other, dir, n1);
            copy_file(shard, other);
        }
        path_of(shard, sizeof shard, dir, "rank-00001-of-00003.bin");
        zt_status st = ZT_OK;
        const char *what = NULL;
        if (c == 0) unlink(shard), what = "cannot open";
        if (c == 1) what = "truncated", st = truncate(shard, 64 + 16 + 8 + 3 * 34 * 4 + 3 * 4 - 4) ? ZT_EIO : ZT_OK;
        if (c == 2) what = "shorter than a shard header", st = truncate(shard, 10) ? ZT_EIO : ZT_OK;
        CHECK(!st);
        if (c == 3) patch(shard, 0, "ZTSHARD9", 8), what = "bad magic";
        if (c == 4) patch(shard, 9, "\x01", 1), what = "checksum";
        if (c == 5) { /* rank 2's file under rank 1's name */
            path_of(other, sizeof other, good, "rank-00002-of-00003.bin");
            copy_file(other, shard);
            what = "header says rank 2 of 3";
        }
        if (c == 6) { /* a stray shard of another layout */
            path_of(other, sizeof other, dir, "rank-00000-of-00002.bin");
            copy_file(shard, other);
            what = "two layouts";
        }
        if (c == 7) patch(shard, 64, "\x23", 1), what = "segment table checksum"; /* offset 34 → 35 */
        if (c == 8) set_header_field(shard, 3, (uint64_t)1 << 40), what = "cannot hold the 1099511627776 segments";
        if (c == 9) { /* rank 1's one segment [34, +34) says [34, +35), its table CRC updated */
            uint64_t entry[2] = {34, 35}, crc = zt_crc32c(0, entry, 16);
            patch(shard, 64, entry, 16);
            patch(shard, 80, &crc, 8);
            what = "segments of 35 elements, the header says 34";
        }
        if (c == 10) { /* two segments out of order, the header and table consistent */
            uint64_t table[5] = {50, 18, 34, 16};
            table[4] = zt_crc32c(0, table, 32);
            char *data;
            size_t len;
            CHECK(!zt_read_file(shard, &data, &len) && len == 88 + 3 * 34 * 4 + 3 * 4);
            FILE *f = fopen(shard, "wb");
            CHECK(f && fwrite(data, 1, 64, f) == 64 && fwrite(table, 8, 5, f) == 5 &&
                  fwrite(data + 88, 1, len - 88, f) == len - 88);
            if (f) fclose(f);
            free(data);
            set_header_field(shard, 3, 2);
            what = "segment 1 [34, +16) is empty, out of order";
        }
        if (c == 11) patch(shard, 0, "ZTSHARD2", 8), what = "a ZTSHARD2 shard of an older zt";
        st = zt_state_read_range(dir, N, 30, 10, buf, NULL, NULL); /* straddles ranks 0 and 1 */
        expect_user_error(st, c == 6 ? dir : shard, what);
    }
    /* the model's size must match the checkpoint's */
    expect_user_error(zt_state_read_range(good, N + 1, 0, 4, buf, NULL, NULL), "rank-00000-of-00003.bin",
                      "101-element");
    path_of(dir, sizeof dir, root, "nosuch");
    expect_user_error(zt_state_read_range(dir, N, 0, 4, buf, NULL, NULL), dir, NULL);
    fresh_dir(dir, sizeof dir, "bad-empty");
    expect_user_error(zt_state_read_range(dir, N, 0, 4, buf, NULL, NULL), dir, "no rank-");
    free(p);
}

/* Flips bit `bit` of float `index` of array k (0 params, 1 m, 2 v) of a one-segment shard of total elements. */
static void flip_bit(const char *shard, size_t total, int k, size_t index, int bit)
{
    FILE *f = fopen(shard, "r+b");
    long at = 64 + 16 + 8 + (long)((k * total + index) * 4 + (size_t)bit / 8);
    unsigned char byte = 0;
    CHECK(f && !fseek(f, at, SEEK_SET) && fread(&byte, 1, 1, f) == 1);
    byte ^= (unsigned char)(1u << bit % 8);
    CHECK(f && !fseek(f, at, SEEK_SET) && fwrite(&byte, 1, 1, f) == 1);
    if (f) fclose(f);
}

/* One flipped bit in a shard's data fails every read that touches its block, naming the
 * file, the segment and the array; reads of other blocks still succeed. */
static void test_flipped_bit(void)
{
    enum { N = 300000, WORLD = 2 }; /* rank 1 holds [150000, 300000): three blocks of 65536 */
    const float *src[3] = {random_floats(N, 17), random_floats(N, 18), random_floats(N, 19)};
    float *buf = malloc(N * sizeof *buf);
    char dir[512], shard[600];
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "flip-%d", k);
        fresh_dir(dir, sizeof dir, name);
        write_all(dir, N, WORLD, src[0], src[1], src[2]);
        path_of(shard, sizeof shard, dir, "rank-00001-of-00002.bin");
        flip_bit(shard, N / 2, k, 70000, 5 + k); /* element 220000, in the segment's second block */
        float *dst[3] = {k == 0 ? buf : NULL, k == 1 ? buf : NULL, k == 2 ? buf : NULL};
        static const char *array[] = {"params", "Adam m", "Adam v"};
        expect_user_error(zt_state_read_range(dir, N, 0, N, dst[0], dst[1], dst[2]), shard, array[k]);
        expect_user_error(zt_state_read_range(dir, N, 220000, 1, dst[0], dst[1], dst[2]), shard,
                          "segment 0 [150000, +150000)");
        expect_user_error(zt_state_read_range(dir, N, 150000 + 65536, 2, dst[0], dst[1], dst[2]), shard, "checksum");
        read_equal(dir, N, 0, 150000 + 65536, src);                    /* up to the damaged block */
        read_equal(dir, N, 150000 + 131072, N - 150000 - 131072, src); /* after it */
    }
    free(buf);
    for (int k = 0; k < 3; k++) free((void *)src[k]);
}

/* --- trainer_state.json --------------------------------------------------------------------- */

static void test_json(void)
{
    char dir[512], path[600];
    fresh_dir(dir, sizeof dir, "json");
    zt_trainer_state s = {.step = 123456,
                          .epoch = 3,
                          .row = 9007199254740991LL,
                          .rng = {UINT64_MAX, 0, 0x8000000000000001ull, 42},
                          .data_hash = 0xfedcba9876543210ull,
                          .world = 4,
                          .zero_stage = 3,
                          .numel = 7000000123ull,
                          .tokens_seen = 1.5e12 + 0.25,
                          .elapsed_s = 1.0 / 3.0},
                     t;
    for (int r = 0; r < 4; r++) CHECK(!zt_state_write_shard(dir, r, 4, s.numel, NULL, 0, NULL, NULL, NULL));
    CHECK(!zt_state_write_json(dir, &s));
    zt_status st = zt_state_read_json(dir, &t);
    CHECK_MSG(!st, "%s", zt_errmsg());
    CHECK(t.step == s.step && t.epoch == s.epoch && t.row == s.row && t.data_hash == s.data_hash);
    CHECK(!memcmp(t.rng, s.rng, sizeof s.rng));
    CHECK(t.world == 4 && t.zero_stage == 3 && t.numel == s.numel);
    CHECK(t.tokens_seen == s.tokens_seen && t.elapsed_s == s.elapsed_s);

    path_of(path, sizeof path, dir, "trainer_state.json");
    static const char *bad[][2] = {
        {"{\"format\": \"zt-trainer-state\", \"version\": 1}", "'step'"},
        {"[1, 2]", "not a JSON object"},
        {"{\"format\": \"other\"}", "format"},
        {"{\"format\": \"zt-trainer-state\", \"version\": 2}", "newer"},
        {"{\"format\": \"zt-trainer-state\", \"version\": 1, \"step\": 1.5}", "'step'"},
        {"{\"format\": \"zt-trainer-state\", \"version\": 1, \"step\": 1, \"epoch\": 0, \"row\": 0, \"rng\": [\"1\"]}",
         "'rng'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_write_text(path, bad[i][0]);
        expect_user_error(zt_state_read_json(dir, &t), path, bad[i][1]);
    }
    unlink(path);
    expect_user_error(zt_state_read_json(dir, &t), path, NULL);
}

/* trainer_state.json whose step, world, numel or stage the shards and the directory's
 * name contradict is refused, naming the file and the key. */
static void test_json_vs_shards(void)
{
    enum { N = 100 };
    char run[512], dir[600], path[700];
    float *p = random_floats(N, 20);
    fresh_dir(run, sizeof run, "json-shards");
    path_of(dir, sizeof dir, run, "step-000004");
    CHECK(!zt_mkdir_p(dir));
    path_of(path, sizeof path, dir, "trainer_state.json");
    write_all(dir, N, 1, p, p, p);
    zt_trainer_state good = {.step = 4, .world = 1, .zero_stage = 1, .numel = N}, s = good, t;
    CHECK(!zt_state_write_json(dir, &s));
    zt_status st = zt_state_read_json(dir, &t);
    CHECK_MSG(!st, "%s", zt_errmsg());
    s.step = 999999;
    CHECK(!zt_state_write_json(dir, &s));
    expect_user_error(zt_state_read_json(dir, &t), path,
                      "'step' is 999999, but the checkpoint directory is step-000004");
    s = good, s.world = 2;
    CHECK(!zt_state_write_json(dir, &s));
    expect_user_error(zt_state_read_json(dir, &t), path, "'world' is 2, but the checkpoint holds the shards of 1 rank");
    s = good, s.numel = N + 1;
    CHECK(!zt_state_write_json(dir, &s));
    expect_user_error(zt_state_read_json(dir, &t), path, "'numel' is 101, but");
    s = good;
    CHECK(!zt_state_write_json(dir, &s));
    zt_state_segment two[2] = {{0, 50}, {50, 50}}; /* the stage 3 layout of two units */
    const float *src[3] = {p, p, p};
    write_segments(dir, 0, 1, N, two, 2, src);
    expect_user_error(zt_state_read_json(dir, &t), path, "'zero_stage' is 1, but");
    s.zero_stage = 3;
    CHECK(!zt_state_write_json(dir, &s));
    st = zt_state_read_json(dir, &t);
    CHECK_MSG(!st, "%s", zt_errmsg());
    free(p);
}

/* --- DONE, newest, rotation ----------------------------------------------------------------- */

static int step_exists(const char *run, const char *name)
{
    char a[512], b[600];
    path_of(a, sizeof a, run, "checkpoints");
    path_of(b, sizeof b, a, name);
    return zt_path_exists(b);
}

static void make_step(const char *run, long step, int done)
{
    char dir[4096];
    float x[4] = {(float)step, 1, 2, 3};
    CHECK(!zt_state_dir(run, step, dir, sizeof dir));
    zt_state_segment all = {0, 4};
    CHECK(!zt_state_write_shard(dir, 0, 1, 4, &all, 1, x, x, x));
    if (done) CHECK(!zt_state_mark_done(dir));
}

static void expect_latest(const char *run, const char *name)
{
    char out[4096];
    int found = -1;
    zt_status st = zt_state_latest(run, out, sizeof out, &found);
    CHECK_MSG(!st, "%s", zt_errmsg());
    CHECK(found == (name != NULL));
    if (name && found) {
        const char *slash = strrchr(out, '/');
        CHECK_MSG(slash && !strcmp(slash + 1, name), "latest is %s, wanted %s", out, name);
    }
}

static void test_latest_rotate(void)
{
    char run[512], dir[4096], junk[4200];
    fresh_dir(run, sizeof run, "run");
    expect_latest(run, NULL); /* no checkpoints/ at all */
    make_step(run, 50, 0);    /* an interrupted save */
    make_step(run, 100, 1);
    make_step(run, 200, 1);
    make_step(run, 1000, 1);
    make_step(run, 1200, 0); /* being written (or interrupted): ignored */
    path_of(junk, sizeof junk, run, "checkpoints/step-abc");
    CHECK(!zt_mkdir_p(junk));
    path_of(junk, sizeof junk, run, "checkpoints/step-002000.tmp");
    CHECK(!zt_mkdir_p(junk));
    path_of(dir, sizeof dir, run, "checkpoints/step-001000");
    CHECK(zt_state_is_done(dir));
    expect_latest(run, "step-001000"); /* numerically newest, not by name order */

    CHECK(!zt_state_rotate(run, 2));
    CHECK(!step_exists(run, "step-000050") && !step_exists(run, "step-000100"));
    CHECK(step_exists(run, "step-000200") && step_exists(run, "step-001000") && step_exists(run, "step-001200"));
    CHECK(step_exists(run, "step-abc") && step_exists(run, "step-002000.tmp"));
    CHECK(!zt_state_rotate(run, 0)); /* keep < 1: every complete one stays */
    CHECK(step_exists(run, "step-000200") && step_exists(run, "step-001000"));
    CHECK(!zt_state_rotate(run, 1));
    CHECK(!step_exists(run, "step-000200") && step_exists(run, "step-001000") && step_exists(run, "step-001200"));
    expect_latest(run, "step-001000");

    /* saving a step again starts from an empty, incomplete directory */
    CHECK(!zt_state_dir(run, 1000, dir, sizeof dir));
    CHECK(!zt_state_is_done(dir));
    DIR *d = opendir(dir);
    int entries = 0;
    for (struct dirent *de; d && (de = readdir(d));) entries += de->d_name[0] != '.';
    if (d) closedir(d);
    CHECK(entries == 0);
    expect_latest(run, NULL);
    make_step(run, 1200, 1);
    expect_latest(run, "step-001200");
}

/* --- the safetensors writer with a fill callback --------------------------------------------- */

typedef struct fill_src {
    const float *data;
    int calls;
    size_t next, max_chunk; /* next offset expected: chunks come in order */
    int fail_at;            /* fail on this call (0: never) */
} fill_src;

static zt_status fill(void *ctx, float *dst, size_t offset, size_t n)
{
    fill_src *s = ctx;
    s->calls++;
    CHECK(offset == s->next);
    s->next = offset + n;
    if (n > s->max_chunk) s->max_chunk = n;
    if (s->calls == s->fail_at) return zt_fail(ZT_EUSER, "fill failed at %zu", offset);
    memcpy(dst, s->data + offset, n * sizeof *dst);
    return ZT_OK;
}

static int same_file(const char *a, const char *b)
{
    char *x, *y;
    size_t nx, ny;
    if (zt_read_file(a, &x, &nx)) return 0;
    if (zt_read_file(b, &y, &ny)) return free(x), 0;
    int same = nx == ny && !memcmp(x, y, nx);
    free(x), free(y);
    return same;
}

/* The same tensors through zt_st_writer_add and zt_st_writer_add_fn give the same bytes. */
static void test_writer_fill(void)
{
    enum { ROWS = 1000, COLS = 700 }; /* more than one chunk */
    const int64_t big[2] = {ROWS, COLS}, small[1] = {33};
    float *a = random_floats(ROWS * COLS, 5), *b = random_floats(33, 6);
    for (size_t i = 0; i < ROWS * COLS; i++) a[i] = (float)(i % 977) * 0.01f - 3; /* finite values */
    for (int i = 0; i < 33; i++) b[i] = (float)i;
    zt_dtype types[] = {ZT_F32, ZT_BF16};
    for (int k = 0; k < 2; k++)
        for (size_t max_shard = 0; max_shard <= 1000; max_shard += 1000) {
            char d1[512], d2[512], f1[600], f2[600];
            fresh_dir(d1, sizeof d1, "w-direct");
            fresh_dir(d2, sizeof d2, "w-fill");
            zt_st_writer *w1 = zt_st_writer_new(), *w2 = zt_st_writer_new();
            fill_src sa = {.data = a}, sb = {.data = b};
            CHECK(!zt_st_writer_add(w1, "a", types[k], big, 2, a, ZT_F32));
            CHECK(!zt_st_writer_add(w1, "b", types[k], small, 1, b, ZT_F32));
            CHECK(!zt_st_writer_add_fn(w2, "a", types[k], big, 2, fill, &sa));
            CHECK(!zt_st_writer_add_fn(w2, "b", types[k], small, 1, fill, &sb));
            CHECK(!zt_st_writer_finish(w1, d1, max_shard * 1000));
            zt_status st = zt_st_writer_finish(w2, d2, max_shard * 1000);
            CHECK_MSG(!st, "%s", zt_errmsg());
            CHECK(sa.next == ROWS * COLS && sb.next == 33 && sa.calls > 1 && sa.max_chunk < ROWS * COLS);
            const char *names[] = {"model.safetensors", "model-00001-of-00002.safetensors",
                                   "model-00002-of-00002.safetensors", "model.safetensors.index.json"};
            for (int i = max_shard ? 1 : 0; i < (max_shard ? 4 : 1); i++) {
                path_of(f1, sizeof f1, d1, names[i]);
                path_of(f2, sizeof f2, d2, names[i]);
                CHECK_MSG(same_file(f1, f2), "%s differs", f2);
            }
            zt_st_writer_free(w1);
            zt_st_writer_free(w2);
        }
    /* a failing fill fails the save with its message and leaves nothing behind */
    char d[512];
    fresh_dir(d, sizeof d, "w-fail");
    zt_st_writer *w = zt_st_writer_new();
    fill_src sa = {.data = a, .fail_at = 2};
    CHECK(!zt_st_writer_add_fn(w, "a", ZT_BF16, big, 2, fill, &sa));
    expect_user_error(zt_st_writer_finish(w, d, 0), "fill failed", NULL);
    zt_st_writer_free(w);
    DIR *dd = opendir(d);
    int entries = 0;
    for (struct dirent *de; dd && (de = readdir(dd));) entries += de->d_name[0] != '.';
    if (dd) closedir(dd);
    CHECK(entries == 0);
    free(a), free(b);
}

/* --- the tool for the CLI test ---------------------------------------------------------------- */

static int make_checkpoint(const char *model_dir, const char *run_dir, long step, int world)
{
    char cfg_path[4096], dir[4096];
    zt_llama_config cfg;
    zt_llama m;
    zt_status st = zt_path_join(cfg_path, sizeof cfg_path, model_dir, "config.json");
    if (!st) st = zt_llama_config_load(&cfg, cfg_path);
    if (!st) st = zt_llama_init(&m, &cfg, zt_backend_cpu(), ZT_F32);
    if (st) return fprintf(stderr, "%s\n", zt_errmsg()), 2;
    float *mv = malloc(m.numel * sizeof *mv);
    for (size_t i = 0; i < m.numel; i++) mv[i] = 1000.0f + (float)i;
    if (!(st = zt_llama_load_weights(&m, model_dir))) st = zt_state_dir(run_dir, step, dir, sizeof dir);
    for (int r = 0; r < world && !st; r++) {
        zt_state_segment seg;
        zt_state_slice(m.numel, world, r, &seg.offset, &seg.count);
        st = zt_state_write_shard(dir, r, world, m.numel, &seg, 1, m.params + seg.offset, mv + seg.offset,
                                  mv + seg.offset);
    }
    zt_trainer_state s = {.step = step, .world = world, .numel = m.numel};
    if (!st) st = zt_state_write_json(dir, &s);
    if (!st) st = zt_state_copy_model_files(dir, model_dir);
    if (!st) st = zt_state_mark_done(dir);
    if (!st) printf("%s\n", dir);
    else fprintf(stderr, "%s\n", zt_errmsg());
    free(mv);
    zt_llama_free(&m);
    return st ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "--make-checkpoint"))
        return make_checkpoint(argv[2], argv[3], atol(argv[4]), atoi(argv[5]));
    snprintf(root, sizeof root, "/tmp/zt_test_state_XXXXXX");
    if (!mkdtemp(root)) return perror("mkdtemp"), 1;
    RUN(test_slices);
    RUN(test_ranges_small);
    RUN(test_ranges_large);
    RUN(test_units_small);
    RUN(test_units_large);
    RUN(test_many_segments);
    RUN(test_reshard);
    RUN(test_gap_overlap);
    RUN(test_tiny_model);
    RUN(test_bad_shards);
    RUN(test_flipped_bit);
    RUN(test_json);
    RUN(test_json_vs_shards);
    RUN(test_latest_rotate);
    RUN(test_writer_fill);
    if (zt_remove_tree(root)) fprintf(stderr, "cannot remove %s\n", root);
    return test_summary();
}
