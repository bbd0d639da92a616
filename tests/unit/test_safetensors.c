/* Tests of lib/ckpt/safetensors: round trips (single file and shards), the directory
 * and index rules, one corrupt file per kind of damage, and an independent check of
 * the written bytes by tests/unit/st_check.py (Python struct + json + numpy). */
#include "lib/ckpt/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/test.h"

static char root[256], tmp[320];

/* Each test works in a fresh directory of its own under root. */
static void use_dir(const char *name)
{
    snprintf(tmp, sizeof tmp, "%s/%s", root, name);
    CHECK(mkdir(tmp, 0755) == 0);
}

static const char *path_in(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp, name);
    return buf[k];
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, n, f) == n);
    if (f) fclose(f);
}

/* A file with the given header (length written in front) and data_len bytes of data. */
static void write_st(const char *path, const char *header, size_t data_len)
{
    size_t h = strlen(header);
    unsigned char *b = calloc(1, 8 + h + data_len);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    write_bytes(path, b, 8 + h + data_len);
    free(b);
}

static int exists(const char *path)
{
    struct stat sb;
    return !stat(path, &sb);
}

/* Opening path fails with ZT_EUSER and a message that names file and holds each needle. */
static void expect_fail(const char *path, const char *file, const char *n1, const char *n2)
{
    zt_st_reader *r = NULL;
    zt_status st = zt_st_open(&r, path);
    const char *msg = zt_errmsg();
    CHECK_MSG(st == ZT_EUSER, "'%s' opened (status %d)", path, st);
    CHECK(r == NULL);
    char quoted[600];
    snprintf(quoted, sizeof quoted, "'%s'", file);
    CHECK_MSG(strstr(msg, quoted), "message lacks %s: %s", quoted, msg);
    CHECK_MSG(!n1 || strstr(msg, n1), "message lacks '%s': %s", n1, msg);
    CHECK_MSG(!n2 || strstr(msg, n2), "message lacks '%s': %s", n2, msg);
    zt_st_close(r);
}

static void expect_bad_open(const char *path, const char *n1, const char *n2) { expect_fail(path, path, n1, n2); }

static void expect_bad_header(const char *name, const char *header, size_t data_len, const char *n1, const char *n2)
{
    const char *p = path_in(name);
    write_st(p, header, data_len);
    expect_bad_open(p, n1, n2);
    unlink(p);
}

/* --- round trips ------------------------------------------------------------------------- */

#define NT 6
static const char *rt_names[NT] = {"model.embed.weight", "layers.0.w", "layers.0.norm", "scalar", "empty", "wide"};
static const zt_dtype rt_out[NT] = {ZT_F32, ZT_BF16, ZT_F16, ZT_F32, ZT_BF16, ZT_F64};
static const int rt_ndim[NT] = {2, 3, 1, 0, 2, 2};
static const int64_t rt_shape[NT][3] = {{7, 5}, {2, 3, 4}, {9}, {0}, {0, 3}, {3, 3}};

static size_t numel_of(int i)
{
    size_t n = 1;
    for (int d = 0; d < rt_ndim[i]; d++) n *= (size_t)rt_shape[i][d];
    return n;
}

static float *rt_src[NT];

static void rt_make(void)
{
    uint32_t s = 12345;
    for (int i = 0; i < NT; i++) {
        size_t n = numel_of(i);
        rt_src[i] = malloc((n ? n : 1) * sizeof(float));
        for (size_t j = 0; j < n; j++) {
            s = s * 1664525u + 1013904223u;
            rt_src[i][j] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 8.0f;
        }
    }
}

static zt_status rt_save(const char *dir, size_t max_shard)
{
    zt_st_writer *w = zt_st_writer_new();
    zt_status st = ZT_OK;
    for (int i = 0; i < NT && !st; i++)
        st = zt_st_writer_add(w, rt_names[i], rt_out[i], rt_shape[i], rt_ndim[i], rt_src[i], ZT_F32);
    if (!st) st = zt_st_writer_finish(w, dir, max_shard);
    zt_st_writer_free(w);
    return st;
}

/* Every tensor reads back as its source rounded through the file's dtype. */
static void rt_verify(const char *path)
{
    zt_st_reader *r;
    zt_status st = zt_st_open(&r, path);
    CHECK_MSG(!st, "%s", zt_errmsg());
    if (st) return;
    CHECK(zt_st_count(r) == NT);
    CHECK(zt_st_find(r, "nope") == NULL);
    for (int i = 0; i < NT; i++) {
        const zt_st_tensor *t = zt_st_find(r, rt_names[i]);
        CHECK_MSG(t, "tensor %s missing", rt_names[i]);
        if (!t) continue;
        CHECK(!strcmp(zt_st_dtype_name(t->dtype), zt_dtype_safetensors_name(rt_out[i])));
        CHECK(t->ndim == rt_ndim[i]);
        size_t n = numel_of(i);
        CHECK(t->nbytes == n * zt_dtype_size(rt_out[i]));
        float *got = malloc((n + 1) * sizeof(float)), *want = malloc((n + 1) * sizeof(float));
        double *wide = malloc((n + 1) * sizeof(double));
        uint16_t *half = malloc((n + 1) * sizeof(uint16_t));
        void *rounded = malloc((n + 1) * sizeof(double));
        CHECK(!zt_st_read_into(t, got, ZT_F32, rt_shape[i], rt_ndim[i]));
        zt_convert(rounded, rt_out[i], rt_src[i], ZT_F32, n);
        zt_convert(want, ZT_F32, rounded, rt_out[i], n);
        for (size_t j = 0; j < n; j++) CHECK(got[j] == want[j]);
        if (rt_out[i] == ZT_BF16 || rt_out[i] == ZT_F16) /* the values were rounded, not copied */
            for (size_t j = 0; j < n && j < 4; j++) CHECK(got[j] != rt_src[i][j]);
        CHECK(!zt_st_read_into(t, wide, ZT_F64, NULL, 0));
        for (size_t j = 0; j < n; j++) CHECK(wide[j] == (double)want[j]);
        CHECK(!zt_st_read_into(t, half, ZT_BF16, NULL, 0));
        for (size_t j = 0; j < n; j++) CHECK(half[j] == zt_f32_to_bf16(want[j]));
        CHECK(!zt_st_read_into(t, half, ZT_F16, NULL, 0));
        for (size_t j = 0; j < n; j++) CHECK(half[j] == zt_f32_to_f16(want[j]));
        free(got), free(want), free(wide), free(half), free(rounded);
    }
    /* tensors come file by file in data order, so the single file keeps insertion order */
    zt_st_close(r);
}

static void test_roundtrip_single(void)
{
    use_dir("single");
    CHECK(!rt_save(tmp, 0));
    CHECK(exists(path_in("model.safetensors")));
    CHECK(!exists(path_in("model.safetensors.index.json")));
    rt_verify(path_in("model.safetensors"));
    rt_verify(tmp);
    zt_st_reader *r;
    CHECK(!zt_st_open(&r, tmp));
    for (int i = 0; i < NT; i++) CHECK(!strcmp(zt_st_get(r, i)->name, rt_names[i]));
    zt_st_close(r);
}

static void test_roundtrip_sharded(void)
{
    /* 140 + 48 + 18 + 4 + 0 + 72 bytes: a 100-byte limit gives [embed], [w, norm, scalar, empty], [wide] */
    use_dir("sharded");
    CHECK(!rt_save(tmp, 100));
    CHECK(!exists(path_in("model.safetensors")));
    CHECK(exists(path_in("model.safetensors.index.json")));
    for (int i = 1; i <= 3; i++) {
        char n[64];
        snprintf(n, sizeof n, "model-%05d-of-00003.safetensors", i);
        CHECK_MSG(exists(path_in(n)), "%s missing", n);
    }
    rt_verify(tmp);
    rt_verify(path_in("model.safetensors.index.json"));
    zt_st_reader *r;
    CHECK(!zt_st_open(&r, tmp));
    const zt_st_tensor *t = zt_st_find(r, "wide");
    CHECK(t && strstr(t->file, "model-00003-of-00003.safetensors"));
    zt_st_close(r);

    /* a later save with another shard count leaves no stale file behind, and no other is touched */
    write_bytes(path_in("notes.txt"), "x", 1);
    CHECK(!rt_save(tmp, 200)); /* [embed, w], [norm .. empty, wide] */
    CHECK(exists(path_in("model-00002-of-00002.safetensors")));
    CHECK(!exists(path_in("model-00001-of-00003.safetensors")));
    CHECK(!exists(path_in("model-00003-of-00003.safetensors")));
    rt_verify(tmp);
    CHECK(!rt_save(tmp, 0));
    CHECK(!exists(path_in("model-00001-of-00002.safetensors")));
    CHECK(!exists(path_in("model.safetensors.index.json")));
    CHECK(exists(path_in("notes.txt")));
    rt_verify(tmp);
    CHECK(!rt_save(tmp, 100));
    CHECK(!exists(path_in("model.safetensors")));
    rt_verify(tmp);
}

static void test_index_total_size(void)
{
    use_dir("total");
    CHECK(!rt_save(tmp, 100));
    FILE *f = fopen(path_in("model.safetensors.index.json"), "r");
    char buf[4096] = "";
    CHECK(f && fread(buf, 1, sizeof buf - 1, f) > 0);
    if (f) fclose(f);
    CHECK_MSG(strstr(buf, "\"total_size\":\t282"), "%s", buf); /* 140 + 48 + 18 + 4 + 0 + 72 */
}

static void test_writer_errors(void)
{
    use_dir("writer_errors");
    zt_st_writer *w = zt_st_writer_new();
    float x[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4}, neg[1] = {-1};
    CHECK(!zt_st_writer_add(w, "a", ZT_F32, shape, 1, x, ZT_F32));
    CHECK(zt_st_writer_add(w, "a", ZT_F32, shape, 1, x, ZT_F32) == ZT_EUSER);
    CHECK(strstr(zt_errmsg(), "'a'"));
    CHECK(zt_st_writer_add(w, "__metadata__", ZT_F32, shape, 1, x, ZT_F32) == ZT_EUSER);
    CHECK(zt_st_writer_add(w, "", ZT_F32, shape, 1, x, ZT_F32) == ZT_EUSER);
    CHECK(zt_st_writer_add(w, "bad\xff", ZT_F32, shape, 1, x, ZT_F32) == ZT_EUSER);
    CHECK(zt_st_writer_add(w, "b", ZT_F32, neg, 1, x, ZT_F32) == ZT_EUSER);
    CHECK(zt_st_writer_add(w, "c", ZT_F32, shape, 9, x, ZT_F32) == ZT_EUSER);
    const char *dir = path_in("no/such/dir");
    CHECK(zt_st_writer_finish(w, dir, 0) == ZT_EIO);
    CHECK_MSG(strstr(zt_errmsg(), "cannot create") && strstr(zt_errmsg(), dir), "%s", zt_errmsg());

    /* the rename fails (a directory holds the final name): named, and no temporary file is left */
    CHECK(mkdir(path_in("model.safetensors"), 0755) == 0);
    write_bytes(path_in("model.safetensors/keep"), "x", 1);
    CHECK(zt_st_writer_finish(w, tmp, 0) == ZT_EIO);
    CHECK_MSG(strstr(zt_errmsg(), "rename") && strstr(zt_errmsg(), path_in("model.safetensors")), "%s", zt_errmsg());
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q tmp", tmp);
    CHECK(system(cmd) != 0);
    zt_st_writer_free(w);
}

/* Source data at odd addresses, written unconverted and converted, and read from an
 * unaligned file (a header length that is not a multiple of 8). */
static void test_unaligned(void)
{
    use_dir("unaligned");
    float v[5] = {1.5f, -2.25f, 3.0f, 1e-3f, 7.0f};
    unsigned char raw[1 + sizeof v];
    memcpy(raw + 1, v, sizeof v);
    int64_t shape[1] = {5};
    zt_st_writer *w = zt_st_writer_new();
    CHECK(!zt_st_writer_add(w, "same", ZT_F32, shape, 1, raw + 1, ZT_F32));
    CHECK(!zt_st_writer_add(w, "conv", ZT_F16, shape, 1, raw + 1, ZT_F32));
    CHECK(!zt_st_writer_finish(w, tmp, 0));
    zt_st_writer_free(w);
    zt_st_reader *r;
    CHECK(!zt_st_open(&r, tmp));
    float got[5];
    CHECK(!zt_st_read_into(zt_st_find(r, "same"), got, ZT_F32, shape, 1));
    for (int i = 0; i < 5; i++) CHECK(got[i] == v[i]);
    CHECK(!zt_st_read_into(zt_st_find(r, "conv"), got, ZT_F32, shape, 1));
    for (int i = 0; i < 5; i++) CHECK(got[i] == zt_f16_to_f32(zt_f32_to_f16(v[i])));
    zt_st_close(r);

    /* the mapping is page-aligned: pick the data offset that puts the tensor at an odd byte */
    const char *p = path_in("odd.safetensors");
    char h[128];
    snprintf(h, sizeof h, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1,9]}}");
    size_t hl = strlen(h), off = (8 + hl) % 2 ? 2 : 1;
    snprintf(h, sizeof h, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%zu,%zu]}}", off, off + 8);
    unsigned char file[256] = {0};
    file[0] = (unsigned char)hl;
    memcpy(file + 8, h, hl);
    float two[2] = {0.5f, -4.0f};
    memcpy(file + 8 + hl + off, two, 8);
    write_bytes(p, file, 8 + hl + off + 8);
    CHECK(!zt_st_open(&r, p));
    if (r) {
        double d[2];
        CHECK(!zt_st_read_into(zt_st_find(r, "t"), d, ZT_F64, NULL, 0));
        CHECK(d[0] == 0.5 && d[1] == -4.0);
        zt_st_close(r);
    }
}

/* --- reading rules -------------------------------------------------------------------------- */

static void test_read_errors_after_open(void)
{
    use_dir("read_errors");
    const char *p = path_in("ints.safetensors");
    write_st(p,
             "{\"__metadata__\":{\"format\":\"pt\"},"
             "\"ids\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]}}",
             32);
    zt_st_reader *r;
    CHECK_MSG(!zt_st_open(&r, p), "%s", zt_errmsg());
    if (!r) return;
    float buf[6];
    CHECK(zt_st_read_into(zt_st_find(r, "ids"), buf, ZT_F32, NULL, 0) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), "I32") && strstr(zt_errmsg(), "'ids'") && strstr(zt_errmsg(), p), "%s", zt_errmsg());
    int64_t want[2] = {3, 2};
    CHECK(zt_st_read_into(zt_st_find(r, "w"), buf, ZT_F32, want, 2) == ZT_EUSER);
    char expect[600];
    snprintf(expect, sizeof expect, "'%s': tensor 'w': shape [2, 3] does not match the expected [3, 2]", p);
    CHECK_MSG(!strcmp(zt_errmsg(), expect), "%s", zt_errmsg());
    CHECK(zt_st_read_into(zt_st_find(r, "w"), buf, ZT_F32, want, 1) == ZT_EUSER);
    zt_st_close(r);
    unlink(p);
}

static void test_gaps_allowed(void)
{
    use_dir("gaps");
    const char *p = path_in("gaps.safetensors");
    /* 4 unused bytes between the tensors and 4 after, padding spaces, a zero-size tensor inside another */
    write_st(p,
             "{\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]},"
             "\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
             "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[2,2]}}      ",
             16);
    zt_st_reader *r;
    CHECK_MSG(!zt_st_open(&r, p), "%s", zt_errmsg());
    if (r) {
        CHECK(zt_st_count(r) == 3);
        CHECK(!strcmp(zt_st_get(r, 0)->name, "a")); /* data order */
        zt_st_close(r);
    }
    unlink(p);
}

static void test_bad_files(void)
{
    use_dir("bad");
    const char *p = path_in("short.safetensors");
    write_bytes(p, "\x01\0\0\0\0", 5);
    expect_bad_open(p, "too short", NULL);
    unlink(p);
    p = path_in("long.safetensors");
    write_bytes(p, "\xe8\x03\0\0\0\0\0\0{}", 10);
    expect_bad_open(p, "header length 1000", NULL);
    unlink(p);

    expect_bad_header("utf8.safetensors", "{\"a\xff\":1}", 0, "UTF-8", NULL);
    expect_bad_header("overlong.safetensors", "{\"\xc0\xaf\":1}", 0, "UTF-8", NULL);
    expect_bad_header("overlong3.safetensors", "{\"\xe0\x80\xaf\":1}", 0, "UTF-8", NULL);
    expect_bad_header("surrogate.safetensors", "{\"\xed\xa0\x80\":1}", 0, "UTF-8", NULL);
    expect_bad_header("cut.safetensors", "{\"a\":1}\xe2\x82", 0, "UTF-8", NULL);
    expect_bad_header("beyond.safetensors", "{\"\xf4\x90\x80\x80\":1}", 0, "UTF-8", NULL);
    expect_bad_header("nul.safetensors", "{\"a\":{}}\n\001", 0, "UTF-8", NULL);
    expect_bad_header("json.safetensors", "{\"a\": ", 0, "not valid JSON", NULL);
    expect_bad_header("trail.safetensors", "{} x", 0, "after the JSON", NULL);
    expect_bad_header("array.safetensors", "[1, 2]", 0, "not a JSON object", NULL);
    expect_bad_header("meta.safetensors", "{\"__metadata__\":{\"format\":1}}", 0, "__metadata__", NULL);
    expect_bad_header("entry.safetensors", "{\"x.w\":5}", 0, "'x.w'", "not an object");
    expect_bad_header("nodtype.safetensors", "{\"x.w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'x.w'", "dtype");
    expect_bad_header("dtypetype.safetensors", "{\"x.w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                      "'x.w'", "dtype");
    expect_bad_header("noshape.safetensors", "{\"x.w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "'x.w'",
                      "shape");
    expect_bad_header("shapetype.safetensors", "{\"x.w\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4,
                      "'x.w'", "shape");
    expect_bad_header("dimtype.safetensors", "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}",
                      4, "'x.w'", "shape[0]");
    expect_bad_header("nooffs.safetensors", "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "'x.w'", "data_offsets");
    expect_bad_header("offs3.safetensors", "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
                      "'x.w'", "data_offsets");
    expect_bad_header("offsneg.safetensors", "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8,
                      "'x.w'", "data_offsets");
    expect_bad_header("unknown.safetensors", "{\"x.w\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}", 16,
                      "'x.w'", "unknown dtype 'F128'");
    expect_bad_header("negdim.safetensors", "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
                      "'x.w'", "-1");
    expect_bad_header("fracdim.safetensors", "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
                      "'x.w'", "1.5");
    expect_bad_header("ndim.safetensors",
                      "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "'x.w'",
                      "9 dimensions");
    expect_bad_header("order.safetensors", "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8,
                      "'x.w'", "begin is after end");
    expect_bad_header("past.safetensors", "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
                      "'x.w'", "past the end of the data (4 bytes)");
    expect_bad_header("size.safetensors", "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
                      "'x.w'", "needs 8 bytes");
    expect_bad_header("huge.safetensors",
                      "{\"x.w\":{\"dtype\":\"F32\",\"shape\":[9007199254740992,9007199254740992],"
                      "\"data_offsets\":[0,4]}}",
                      4, "'x.w'", "too large");
    expect_bad_header("bytesover.safetensors",
                      "{\"x.w\":{\"dtype\":\"F64\",\"shape\":[4503599627370496,1024],\"data_offsets\":[0,4]}}", 4,
                      "'x.w'", "too large");
    expect_bad_header("overlap.safetensors",
                      "{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b.w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                      12, "'a.w'", "'b.w'");
    expect_bad_header("dup.safetensors",
                      "{\"a.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"a.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                      8, "duplicate tensor 'a.w'", NULL);
}

/* --- directories and indexes ------------------------------------------------------------------ */

static const char *shard_a = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
static const char *shard_b = "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";

static void write_index(const char *json) { write_bytes(path_in("model.safetensors.index.json"), json, strlen(json)); }

static void test_index_rules(void)
{
    use_dir("index");
    write_st(path_in("s1.safetensors"), shard_a, 4);
    write_st(path_in("s2.safetensors"), shard_b, 4);
    char index[600];
    snprintf(index, sizeof index, "%s", path_in("model.safetensors.index.json"));
    write_index("{\"metadata\":{\"total_size\":8},\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\"}}");
    zt_st_reader *r;
    CHECK_MSG(!zt_st_open(&r, tmp), "%s", zt_errmsg());
    if (r) {
        CHECK(zt_st_count(r) == 2 && zt_st_find(r, "a") && zt_st_find(r, "b"));
        zt_st_close(r);
    }

    write_index("{\"weight_map\":{\"a\":\"s1.safetensors\",");
    expect_bad_open(index, "not valid JSON", NULL);
    write_index("{\"metadata\":{}}");
    expect_bad_open(index, "weight_map", NULL);
    write_index("{\"weight_map\":[]}");
    expect_bad_open(index, "weight_map", NULL);
    write_index("{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s3.safetensors\"}}");
    expect_bad_open(index, "s3.safetensors", "missing");
    write_index("{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\",\"c\":\"s2.safetensors\"}}");
    expect_bad_open(index, "'c'", "s2.safetensors");
    write_index("{\"weight_map\":{\"a\":\"s1.safetensors\"}}");
    write_st(path_in("s1.safetensors"),
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"extra\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             8);
    expect_fail(tmp, path_in("s1.safetensors"), "'extra'", "weight_map");
    write_st(path_in("s1.safetensors"), shard_a, 4);
    write_index("{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s1.safetensors\"}}");
    expect_bad_open(index, "'b'", "s1.safetensors"); /* b is listed in s1 but is not there (nor is s2 opened) */
    write_index("{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\",\"a\":\"s1.safetensors\"}}");
    expect_bad_open(index, "'a'", "twice");
    write_index("{\"weight_map\":{\"a\":\"../s1.safetensors\"}}");
    expect_bad_open(index, "'a'", "file name");
    write_index("{\"weight_map\":{\"a\":5}}");
    expect_bad_open(index, "'a'", NULL);

    /* the same tensor in two shards */
    write_st(path_in("s2.safetensors"),
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             8);
    write_index("{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\"}}");
    expect_fail(tmp, path_in("s1.safetensors"), "'a'", path_in("s2.safetensors"));
    /* a corrupt shard is reported with the shard's name */
    write_st(path_in("s2.safetensors"), "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,9]}}", 4);
    expect_fail(tmp, path_in("s2.safetensors"), "'b'", "past the end");
}

static void test_directory_rules(void)
{
    use_dir("dirs");
    expect_bad_open(tmp, "no .safetensors file", NULL);
    write_st(path_in("weights.safetensors"), shard_a, 4);
    zt_st_reader *r;
    CHECK_MSG(!zt_st_open(&r, tmp), "%s", zt_errmsg());
    if (r) {
        CHECK(zt_st_count(r) == 1 && strstr(zt_st_get(r, 0)->file, "weights.safetensors"));
        zt_st_close(r);
    }
    write_st(path_in("other.safetensors"), shard_b, 4);
    expect_bad_open(tmp, "2 .safetensors files", NULL);
    write_st(path_in("model.safetensors"), shard_b, 4); /* preferred over the others */
    CHECK(!zt_st_open(&r, tmp));
    if (r) {
        CHECK(zt_st_count(r) == 1 && zt_st_find(r, "b"));
        zt_st_close(r);
    }
    zt_status st = zt_st_open(&r, path_in("missing.safetensors"));
    CHECK(st == ZT_EUSER && strstr(zt_errmsg(), "missing.safetensors"));
}

/* --- independent check with Python -------------------------------------------------------------- */

static void test_python_check(void)
{
    char script[512];
    snprintf(script, sizeof script, "%s", __FILE__);
    char *slash = strrchr(script, '/');
    snprintf(slash ? slash + 1 : script, sizeof script - (size_t)(slash ? slash + 1 - script : 0), "st_check.py");
    if (access("/usr/bin/python3", X_OK) || access(script, R_OK)) {
        fprintf(stderr, "  skip: no /usr/bin/python3 or %s\n", script);
        return;
    }
    /* values ((i % 17) - 8) / 4 are exact in every dtype, so the script knows them */
    use_dir("python");
    enum { N = 300 };
    static float v[N];
    for (int i = 0; i < N; i++) v[i] = (float)((i % 17) - 8) / 4.0f;
    int64_t s1[2] = {10, 30}, s2[1] = {N}, s3[3] = {3, 4, 5}, s4[1] = {0};
    for (int round = 0; round < 2; round++) {
        zt_st_writer *w = zt_st_writer_new();
        CHECK(!zt_st_writer_add(w, "f32", ZT_F32, s1, 2, v, ZT_F32));
        CHECK(!zt_st_writer_add(w, "bf16", ZT_BF16, s2, 1, v, ZT_F32));
        CHECK(!zt_st_writer_add(w, "f16", ZT_F16, s3, 3, v, ZT_F32));
        CHECK(!zt_st_writer_add(w, "f64", ZT_F64, s2, 1, v, ZT_F32));
        CHECK(!zt_st_writer_add(w, "none", ZT_BF16, s4, 1, v, ZT_F32));
        CHECK(!zt_st_writer_finish(w, tmp, round ? 1000 : 0));
        zt_st_writer_free(w);
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s", script, tmp);
        int rc = system(cmd);
        if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
            fprintf(stderr, "  skip: /usr/bin/python3 has no numpy\n");
            return;
        }
        CHECK_MSG(rc == 0, "st_check.py failed on the %s save", round ? "sharded" : "single-file");
    }
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/zt_test_st_XXXXXX");
    if (!mkdtemp(root)) return perror("mkdtemp"), 1;
    rt_make();
    RUN(test_roundtrip_single);
    RUN(test_roundtrip_sharded);
    RUN(test_index_total_size);
    RUN(test_writer_errors);
    RUN(test_unaligned);
    RUN(test_read_errors_after_open);
    RUN(test_gaps_allowed);
    RUN(test_bad_files);
    RUN(test_index_rules);
    RUN(test_directory_rules);
    RUN(test_python_check);
    for (int i = 0; i < NT; i++) free(rt_src[i]);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd)) fprintf(stderr, "cannot remove %s\n", root);
    return test_summary();
}
