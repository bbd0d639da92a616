/* Tests for lib/data (tokens JSONL, dataset, packing, sampler) and lib/core/rng. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/fileio.h"
#include "lib/core/rng.h"
#include "lib/data/batch.h"
#include "lib/data/cache.h"
#include "lib/data/formats.h"
#include "lib/data/jsonl.h"
#include "lib/data/messages.h"
#include "lib/data/tokens.h"
#include "lib/generate/generate.h"
#include "tests/unit/test.h"

static int64_t skipped; /* lines skipped by zt_tokens_load (skip_bad is off here) */

#define NO_LOSS ZT_IGNORE_INDEX

static char tmpdir[64];
static char *tmpfiles[64];
static int ntmp;

/* Writes content to tmpdir/name; returns the path (removed and freed at the end). */
static char *write_file(const char *name, const char *content)
{
    char *path = malloc(strlen(tmpdir) + strlen(name) + 2);
    sprintf(path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    fputs(content, f);
    fclose(f);
    for (int i = 0; i < ntmp; i++) {
        if (strcmp(tmpfiles[i], path) == 0) {
            free(path);
            return tmpfiles[i];
        }
    }
    if (ntmp == (int)(sizeof tmpfiles / sizeof *tmpfiles)) abort();
    tmpfiles[ntmp++] = path;
    return path;
}

/* ---- rng ------------------------------------------------------------------------------ */

static void test_rng_determinism(void)
{
    zt_rng a, b, c, d;
    zt_rng_seed(&a, 42, 0);
    zt_rng_seed(&b, 42, 0);
    zt_rng_seed(&c, 42, 1);
    zt_rng_seed(&d, 43, 0);
    int same_c = 0, same_d = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = zt_rng_next_u64(&a);
        CHECK(x == zt_rng_next_u64(&b));
        same_c += x == zt_rng_next_u64(&c);
        same_d += x == zt_rng_next_u64(&d);
    }
    CHECK(same_c == 0 && same_d == 0);
    /* a fixed value pins the generator, so a change to it is a visible change of every run */
    zt_rng_seed(&a, 0, 0);
    uint64_t first = zt_rng_next_u64(&a);
    zt_rng_seed(&b, 0, 0);
    CHECK(first == zt_rng_next_u64(&b) && first != 0);
}

static void test_rng_distributions(void)
{
    enum { N = 100000 };
    zt_rng r;
    zt_rng_seed(&r, 1234, 7);
    double su = 0, su2 = 0, sn = 0, sn2 = 0, umin = 1, umax = 0;
    int64_t counts[10] = {0};
    for (int i = 0; i < N; i++) {
        double u = zt_rng_uniform(&r);
        umin = u < umin ? u : umin;
        umax = u > umax ? u : umax;
        su += u;
        su2 += u * u;
        double z = zt_rng_normal(&r);
        CHECK(isfinite(z));
        sn += z;
        sn2 += z * z;
        counts[zt_rng_below(&r, 10)]++;
    }
    double mu = su / N, mn = sn / N;
    /* The draws come from a fixed seed by integer arithmetic (the normals add libm's log and
     * cos, the same to an ulp everywhere), so these are the same numbers on every CPU. The
     * bounds are what a correct generator meets but for odds below 1e-5, in standard errors
     * over N = 1e5 draws: the uniform mean ±0.005 is 5.5 of them (sqrt(1/12/N) = 9.1e-4), its
     * deviation 12 (sqrt((1/80 - 1/144)/(4/12·N)) = 4.1e-4); the normal mean ±0.015 is 4.7
     * (1/sqrt(N)), its deviation 6.7 (1/sqrt(2N)); a count of ten ±500 is 5.3 (sqrt(N·0.09)). */
    CHECK(umin >= 0 && umax < 1);
    CHECK_NEAR(mu, 0.5, 0.005);
    CHECK_NEAR(sqrt(su2 / N - mu * mu), sqrt(1.0 / 12), 0.005);
    CHECK_NEAR(mn, 0.0, 0.015);
    CHECK_NEAR(sqrt(sn2 / N - mn * mn), 1.0, 0.015);
    for (int k = 0; k < 10; k++) CHECK_NEAR(counts[k], N / 10, 500);
    CHECK(zt_rng_below(&r, 1) == 0);
}

/* The ziggurat's normals (zt init --quantize draws with it) against the normal distribution: its
 * moments and its CDF at eleven points, from the tail past the ziggurat's base (3.44) to the
 * middle. Fixed draws as above; the bounds are 5 standard errors over N = 1e6: the mean ±0.005
 * (1/sqrt(N) = 1e-3), the deviation ±0.0036 (1/sqrt(2N)), the fourth moment 3 ± 0.05
 * (sqrt(96/N) = 0.0098), each CDF value ±5·sqrt(p(1-p)/N). */
static void test_rng_ziggurat(void)
{
    enum { N = 1000000 };
    static const double x[11] = {-4, -3.44, -3, -2, -1, -0.5, 0, 0.5, 1.5, 2.5, 3.6};
    zt_rng r;
    zt_rng_seed(&r, 99, 3);
    double s1 = 0, s2 = 0, s4 = 0;
    int64_t below[11] = {0};
    for (int i = 0; i < N; i++) {
        double z = zt_rng_normal_ziggurat(&r);
        s1 += z, s2 += z * z, s4 += z * z * z * z;
        for (int k = 0; k < 11; k++) below[k] += z < x[k];
    }
    CHECK_NEAR(s1 / N, 0.0, 0.005);
    CHECK_NEAR(sqrt(s2 / N), 1.0, 0.0036);
    CHECK_NEAR(s4 / N, 3.0, 0.05);
    for (int k = 0; k < 11; k++) {
        double p = 0.5 * erfc(-x[k] / sqrt(2.0));
        CHECK_NEAR((double)below[k] / N, p, 5 * sqrt(p * (1 - p) / N) + 1e-12);
    }
}

/* ---- tokens JSONL --------------------------------------------------------------------- */

static void test_tokens_good(void)
{
    char *a = write_file("good_a.jsonl", "{\"input_ids\": [1, 2, 3], \"labels\": [-100, 2, 3], \"id\": \"x\"}\n"
                                         "\n"
                                         "  \r\n"
                                         "{\"input_ids\": [4, 5]}\n"
                                         "{\"input_ids\": [6], \"labels\": null, \"meta\": {\"k\": [1.5]}}");
    char *b = write_file("good_b.jsonl", "\xef\xbb\xbf{\"input_ids\":[9,8,7,6],\"labels\":[9,-100,7,-100]}\r\n");
    char *paths[] = {a, b};
    zt_dataset ds;
    zt_status st = zt_tokens_load(&ds, paths, 2, 10, 0, &skipped);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    CHECK(ds.n_examples == 4);
    int64_t off[] = {0, 3, 5, 6, 10};
    int32_t ids[] = {1, 2, 3, 4, 5, 6, 9, 8, 7, 6};
    int32_t labels[] = {NO_LOSS, 2, 3, 4, 5, 6, 9, NO_LOSS, 7, NO_LOSS};
    CHECK(memcmp(ds.offsets, off, sizeof off) == 0);
    CHECK(memcmp(ds.ids, ids, sizeof ids) == 0);
    CHECK(memcmp(ds.labels, labels, sizeof labels) == 0);
    CHECK(zt_dataset_len(&ds, 1) == 2 && zt_dataset_tokens(&ds) == 10);
    zt_dataset_free(&ds);
    CHECK(ds.n_examples == 0 && ds.offsets == NULL);
}

static void test_tokens_long_line(void)
{
    enum { N = 200000 }; /* a line of about a megabyte */
    char *text = malloc(N * 8 + 64), *p = text;
    p += sprintf(p, "{\"input_ids\": [");
    for (int i = 0; i < N; i++) p += sprintf(p, i ? ",%d" : "%d", i % 50000);
    sprintf(p, "]}\n");
    char *path = write_file("long.jsonl", text);
    free(text);
    zt_dataset ds;
    zt_status st = zt_tokens_load(&ds, &path, 1, 50000, 0, &skipped);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    CHECK(ds.n_examples == 1 && zt_dataset_len(&ds, 0) == N);
    CHECK(ds.ids[N - 1] == (N - 1) % 50000 && ds.labels[12345] == 12345);
    zt_dataset_free(&ds);
}

static void test_tokens_bad_lines(void)
{
    static const struct {
        const char *line, *want;
    } cases[] = {
        {"{\"input_ids\": [1, 2", "not JSON"},
        {"{\"input_ids\": [1]} trailing", "not JSON"},
        {"[1, 2, 3]", "an array, not a JSON object"},
        {"{\"labels\": [1]}", "missing \"input_ids\""},
        {"{\"input_ids\": \"1 2\"}", "\"input_ids\" is a string, not an array of integers"},
        {"{\"input_ids\": [1, \"2\"]}", "input_ids[1] is a string, not an integer"},
        {"{\"input_ids\": [1, null]}", "input_ids[1] is null, not an integer"},
        {"{\"input_ids\": [1, 100]}", "input_ids[1] = 100 is outside the vocabulary [0, 100)"},
        {"{\"input_ids\": [-1]}", "input_ids[0] = -1 is outside the vocabulary"},
        {"{\"input_ids\": [-100]}", "input_ids[0] = -100 is outside the vocabulary"},
        {"{\"input_ids\": [1, 2.5]}", "input_ids[1] = 2.5 is not an integer"},
        {"{\"input_ids\": [1e300]}", "input_ids[0] = 1e+300 is outside the vocabulary"},
        {"{\"input_ids\": []}", "\"input_ids\" is empty"},
        {"{\"input_ids\": [1, 2], \"labels\": [1]}", "\"labels\" has 1 entries but \"input_ids\" has 2"},
        {"{\"input_ids\": [1, 2], \"labels\": [1, -1]}",
         "labels[1] = -1 is outside the vocabulary [0, 100) and is not -100"},
        {"{\"input_ids\": [1, 2], \"labels\": [1, 100]}", "labels[1] = 100 is outside"},
        {"{\"input_ids\": [1, 2], \"labels\": [0.5, 1]}", "labels[0] = 0.5 is not an integer"},
        {"{\"input_ids\": [1, 2], \"labels\": {\"a\": 1}}", "\"labels\" is an object, not an array"},
        {"{\"input_ids\": [1, 2], \"labels\": [true, 1]}", "labels[0] is a boolean, not an integer"},
    };
    char *good = write_file("good_c.jsonl", "{\"input_ids\": [5]}\n");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[512], want[256];
        snprintf(text, sizeof text, "{\"input_ids\": [1, 2]}\n\n%s\n{\"input_ids\": [3]}\n", cases[i].line);
        char *paths[] = {good, write_file("bad.jsonl", text)};
        zt_dataset ds;
        zt_status st = zt_tokens_load(&ds, paths, 2, 100, 0, &skipped);
        snprintf(want, sizeof want, "%s:3: ", paths[1]);
        CHECK_MSG(st == ZT_EUSER, "case %zu: status %d", i, st);
        CHECK_MSG(strstr(zt_errmsg(), want) == zt_errmsg(), "case %zu: '%s' does not start with '%s'", i, zt_errmsg(),
                  want);
        CHECK_MSG(strstr(zt_errmsg(), cases[i].want), "case %zu: '%s' lacks '%s'", i, zt_errmsg(), cases[i].want);
        CHECK(ds.n_examples == 0 && ds.offsets == NULL);
    }
}

/* A file that starts with '[' is a JSON array of examples, pretty-printed or not: the same
 * examples as the JSONL file with one per line (brackets, commas and quotes inside strings are
 * text); errors name the line an element starts on, and a bad element is skipped like a bad line. */
static void test_json_array_files(void)
{
    char *lines =
        write_file("lines.jsonl", "{\"input_ids\": [1, 2, 3], \"labels\": [-100, 2, 3], \"s\": \"[,]}\\\"{\"}\n"
                                  "{\"input_ids\": [4, 5]}\n"
                                  "{\"input_ids\": [6]}\n");
    char *array = write_file("array.json", "\xef\xbb\xbf\n  [\n    {\n        \"input_ids\": [1, 2, 3],\n"
                                           "        \"labels\": [-100, 2, 3], \"s\": \"[,]}\\\"{\"\n    },\n"
                                           "    {\"input_ids\": [4, 5]}\n    ,{\"input_ids\":[6]}]\n\n");
    zt_dataset a, b;
    CHECK_MSG(zt_tokens_load(&a, &lines, 1, 10, 0, &skipped) == ZT_OK, "%s", zt_errmsg());
    CHECK_MSG(zt_tokens_load(&b, &array, 1, 10, 0, &skipped) == ZT_OK, "%s", zt_errmsg());
    CHECK(a.n_examples == 3 && b.n_examples == 3 && !memcmp(a.offsets, b.offsets, 4 * sizeof *a.offsets) &&
          !memcmp(a.ids, b.ids, 6 * sizeof *a.ids) && !memcmp(a.labels, b.labels, 6 * sizeof *a.labels));
    zt_dataset_free(&a);
    zt_dataset_free(&b);

    static const struct {
        const char *text, *want;
    } bad[] = {
        {"[\n{\"input_ids\": [1]},\n{\"input_ids\": [2]}\n",
         ":3: the JSON array that the file starts with is not closed"},
        {"[{\"input_ids\": [1]},\n]", ":2: an empty element in the JSON array (a comma too many?)"},
        {"[{\"input_ids\": [1]}]\n{\"input_ids\": [2]}\n", ":2: text after the end of the JSON array"},
        {"[]]", ":1: text after the end of the JSON array"},
        {"[{\"input_ids\": [1]},\n\n  7]", ":3: the line is a number, not a JSON object"},
        {"[{\"input_ids\": [1]}, {\"input_ids\": [1\n, \"x\"]}]", ":1: input_ids[1] is a string, not an integer"},
        {"[{\"input_ids\": \"]\"}]", ":1: \"input_ids\" is a string"},
        {"[\"{\\\"input_ids\\\": [1]}\"]", ":1: the line is a string, not a JSON object"},
        {"\xef\x80\x80{\"input_ids\": [1]}\n", ":1: not JSON (parse error at column 1)"}, /* U+E000, no BOM */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *path = write_file("bad.json", bad[i].text);
        zt_status st = zt_tokens_load(&a, &path, 1, 10, 0, &skipped);
        CHECK_MSG(st == ZT_EUSER && strstr(zt_errmsg(), bad[i].want) && strstr(zt_errmsg(), "bad.json:"),
                  "case %zu: %s", i, st ? zt_errmsg() : "loaded");
        if (!st) zt_dataset_free(&a);
    }
    char *empty = write_file("empty.json", " [ ] ");
    CHECK(zt_tokens_load(&a, &empty, 1, 10, 0, &skipped) == ZT_EUSER && strstr(zt_errmsg(), "no examples"));
    char *one_bad =
        write_file("one_bad.json", "[{\"input_ids\": [1]},\n {\"input_ids\": [99]},\n {\"input_ids\": [2]}]");
    CHECK(zt_tokens_load(&a, &one_bad, 1, 10, 1, &skipped) == ZT_OK && a.n_examples == 2 && skipped == 1);
    zt_dataset_free(&a);
}

static void test_tokens_bad_files(void)
{
    zt_dataset ds;
    char missing[128];
    snprintf(missing, sizeof missing, "%s/nope.jsonl", tmpdir);
    char *p = missing;
    CHECK(zt_tokens_load(&ds, &p, 1, 10, 0, &skipped) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), "nope.jsonl': cannot open"), "%s", zt_errmsg());

    p = tmpdir;
    CHECK(zt_tokens_load(&ds, &p, 1, 10, 0, &skipped) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), "is a directory"), "%s", zt_errmsg());

    char *empty[] = {write_file("empty1.jsonl", ""), write_file("empty2.jsonl", "\n  \n")};
    CHECK(zt_tokens_load(&ds, empty, 1, 10, 0, &skipped) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), "empty1.jsonl': no examples"), "%s", zt_errmsg());
    CHECK(zt_tokens_load(&ds, empty, 2, 10, 0, &skipped) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), "empty1.jsonl, ") && strstr(zt_errmsg(), "empty2.jsonl) hold no examples"), "%s",
              zt_errmsg());

    char *nul = write_file("nul.jsonl", "{\"input_ids\": [1]}\n{\"input_ids\": [1]}");
    FILE *f = fopen(nul, "r+b");
    fseek(f, 5, SEEK_SET);
    fputc(0, f);
    fclose(f);
    CHECK(zt_tokens_load(&ds, &nul, 1, 10, 0, &skipped) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), ":1: not JSON: the line contains a NUL byte"), "%s", zt_errmsg());
}

/* Text that is not UTF-8, or that a C string would cut short, is refused with its column,
 * not tokenized as <unk> pieces or truncated at the U+0000; a key twice in one object too
 * (Python's json keeps the last value, cJSON the first) */
static void test_jsonl_line_checks(void)
{
    static const struct {
        const char *line, *error; /* NULL: parses */
    } cases[] = {
        {"{\"text\": \"caf\xc3\xa9 \\u00e9 \xf0\x9f\x98\x80\"}", NULL},
        {"{\"text\": \"a\xff\"}", "not UTF-8 text: byte 0xFF at column 12"},
        {"{\"text\": \"\xc0\xaf\"}", "not UTF-8 text: byte 0xC0 at column 11"},     /* overlong '/' */
        {"{\"text\": \"\xed\xa0\x80\"}", "not UTF-8 text: byte 0xED at column 11"}, /* a surrogate */
        {"{\"text\": \"\xe2\x82\"}", "not UTF-8 text: byte 0xE2 at column 11"},     /* cut short */
        {"{\"text\": \"a\\u0000b\"}", "a string holds \"\\u0000\" (U+0000) at column 12"},
        {"{\"a\": \"\\\\\", \"text\": \"x\\u0000\"}", "at column 23"},
        {"{\"text\": \"\\\\u0000\"}", NULL}, /* an escaped backslash, then the letters u0000 */
        {"{\"text\": \"a\", \"text\": \"b\"}", "key \"text\" appears twice in one object"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"role\": \"assistant\"}]}",
         "key \"role\" appears twice"},
        {"{\"a\": {\"b\": 1}, \"c\": {\"b\": 2}, \"d\": [{\"b\": 3}, {\"b\": 4}]}", NULL}, /* in other objects */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *o;
        zt_status st = zt_jsonl_parse(cases[i].line, strlen(cases[i].line), &o);
        if (!cases[i].error) {
            CHECK_MSG(st == ZT_OK && o, "case %zu: %s", i, zt_errmsg());
            cJSON_Delete(o);
            continue;
        }
        CHECK_MSG(st == ZT_EUSER && !o && strstr(zt_errmsg(), cases[i].error), "case %zu: %s", i, zt_errmsg());
    }
    /* an object of more keys than the check sorts on the stack */
    char many[1024];
    size_t n = (size_t)snprintf(many, sizeof many, "{");
    for (int k = 0; k < 40; k++) n += (size_t)snprintf(many + n, sizeof many - n, "\"k%d\": %d, ", k, k);
    snprintf(many + n, sizeof many - n, "\"k17\": 0}");
    cJSON *o;
    CHECK(zt_jsonl_parse(many, strlen(many), &o) == ZT_EUSER && strstr(zt_errmsg(), "key \"k17\" appears twice"));
    snprintf(many + n, sizeof many - n, "\"k40\": 0}");
    CHECK(zt_jsonl_parse(many, strlen(many), &o) == ZT_OK);
    cJSON_Delete(o);
    const char *escaped = "{\"text\": \"\\\\u0000\"}";
    CHECK(zt_jsonl_parse(escaped, strlen(escaped), &o) == ZT_OK);
    CHECK(!strcmp(cJSON_GetObjectItem(o, "text")->valuestring, "\\u0000"));
    cJSON_Delete(o);
}

/* ---- packing and sampling ------------------------------------------------------------- */

/* Checks the invariants every batch keeps: pos restarts or counts up, n_targets is right. */
static void check_batch_invariants(const zt_batch *b)
{
    int64_t n = 0;
    for (int k = 0; k < b->B; k++) {
        const int32_t *pos = b->pos + (size_t)k * b->T;
        CHECK(pos[0] == 0);
        for (int t = 1; t < b->T; t++) CHECK(pos[t] == 0 || pos[t] == pos[t - 1] + 1);
    }
    for (int i = 0; i < b->B * b->T; i++) n += b->target[i] != NO_LOSS;
    CHECK(n == b->n_targets);
}

static void append(zt_dataset *ds, const int32_t *ids, const int32_t *labels, int64_t n)
{
    zt_status st = zt_dataset_append(ds, ids, labels, n);
    CHECK(st == ZT_OK);
}

static void test_packing_layout(void)
{
    zt_dataset ds = {0};
    append(&ds, (int32_t[]){11, 12, 13}, NULL, 3);
    append(&ds, (int32_t[]){21, 22, 23, 24}, (int32_t[]){NO_LOSS, NO_LOSS, 23, 24}, 4);
    append(&ds, (int32_t[]){31, 32, 33, 34, 35}, NULL, 5);
    zt_loader ld;
    zt_batch b;
    CHECK(zt_loader_init(&ld, &ds, 8, 2, 1, 0, 42, 0, 1) == ZT_OK);
    CHECK(zt_batch_alloc(&b, 2, 8) == ZT_OK);
    CHECK(zt_loader_rows_per_epoch(&ld) == 2);
    CHECK(zt_loader_next(&ld, &b) == ZT_OK);
    int32_t input[16] = {11, 12, 13, 21, 22, 23, 24, 0, /**/ 31, 32, 33, 34, 35, 0, 0, 0};
    int32_t target[16] = {12, 13, NO_LOSS, NO_LOSS, 23,      24,      NO_LOSS, NO_LOSS,
                          32, 33, 34,      35,      NO_LOSS, NO_LOSS, NO_LOSS, NO_LOSS};
    int32_t pos[16] = {0, 1, 2, 0, 1, 2, 3, 0, /**/ 0, 1, 2, 3, 4, 0, 1, 2};
    CHECK(memcmp(b.input, input, sizeof input) == 0);
    CHECK(memcmp(b.target, target, sizeof target) == 0);
    CHECK(memcmp(b.pos, pos, sizeof pos) == 0);
    CHECK(b.n_targets == 8);
    check_batch_invariants(&b);
    zt_loader_stats s = zt_loader_get_stats(&ld);
    CHECK(s.examples == 3 && s.tokens == 12 && s.rows == 2 && s.batches == 1);
    CHECK_NEAR(s.padding_fraction, 4.0 / 16, 1e-12);
    CHECK(s.split == 0 && s.truncated == 0);
    /* the epoch was one batch: the next one is epoch 1, identical without shuffling */
    zt_loader_state st = zt_loader_get_state(&ld);
    CHECK(st.epoch == 1 && st.row == 0);
    CHECK(zt_loader_next(&ld, &b) == ZT_OK);
    CHECK(memcmp(b.input, input, sizeof input) == 0 && memcmp(b.pos, pos, sizeof pos) == 0);
    zt_batch_free(&b);
    zt_loader_free(&ld);
    zt_dataset_free(&ds);
}

static void test_packing_split(void)
{
    zt_dataset ds = {0};
    append(&ds, (int32_t[]){60, 61, 62}, NULL, 3);
    append(&ds, (int32_t[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, NULL, 10);
    append(&ds, (int32_t[]){50, 51}, NULL, 2);
    zt_loader ld;
    zt_batch b;
    CHECK(zt_loader_init(&ld, &ds, 4, 4, 1, 0, 0, 0, 1) == ZT_OK);
    CHECK(zt_batch_alloc(&b, 4, 4) == ZT_OK);
    CHECK(zt_loader_next(&ld, &b) == ZT_OK);
    /* the long document starts a fresh row; its last chunk leaves room for the next one */
    int32_t input[16] = {60, 61, 62, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 50, 51};
    int32_t target[16] = {61, 62, NO_LOSS, NO_LOSS, 2, 3, 4, 5, 6, 7, 8, 9, 10, NO_LOSS, 51, NO_LOSS};
    int32_t pos[16] = {0, 1, 2, 0, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 0, 1};
    CHECK(memcmp(b.input, input, sizeof input) == 0);
    CHECK(memcmp(b.target, target, sizeof target) == 0);
    CHECK(memcmp(b.pos, pos, sizeof pos) == 0);
    CHECK(b.n_targets == 12);
    zt_loader_stats s = zt_loader_get_stats(&ld);
    CHECK(s.rows == 4 && s.split == 1 && s.truncated == 0);
    CHECK_NEAR(s.padding_fraction, 1.0 / 16, 1e-12);
    zt_batch_free(&b);
    zt_loader_free(&ld);
    zt_dataset_free(&ds);
}

static void test_no_packing(void)
{
    zt_dataset ds = {0};
    append(&ds, (int32_t[]){1, 2}, NULL, 2);
    append(&ds, (int32_t[]){1, 2, 3, 4, 5, 6}, (int32_t[]){1, NO_LOSS, 3, 4, 5, 6}, 6);
    zt_loader ld;
    zt_batch b;
    CHECK(zt_loader_init(&ld, &ds, 4, 3, 0, 0, 0, 0, 1) == ZT_OK);
    CHECK(zt_batch_alloc(&b, 3, 4) == ZT_OK);
    CHECK(zt_loader_next(&ld, &b) == ZT_OK);
    /* row 2 completes the epoch's only batch: all padding */
    int32_t input[12] = {1, 2, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0};
    int32_t target[12] = {2, NO_LOSS, NO_LOSS, NO_LOSS, NO_LOSS, 3, 4, 5, NO_LOSS, NO_LOSS, NO_LOSS, NO_LOSS};
    int32_t pos[12] = {0, 1, 0, 1, 0, 1, 2, 3, 0, 1, 2, 3};
    CHECK(memcmp(b.input, input, sizeof input) == 0);
    CHECK(memcmp(b.target, target, sizeof target) == 0);
    CHECK(memcmp(b.pos, pos, sizeof pos) == 0);
    CHECK(b.n_targets == 4);
    zt_loader_stats s = zt_loader_get_stats(&ld);
    CHECK(s.rows == 2 && s.batches == 1 && s.truncated == 1 && s.truncated_tokens == 2 && s.split == 0);
    CHECK_NEAR(s.padding_fraction, 2.0 / 8, 1e-12);
    zt_batch_free(&b);
    zt_loader_free(&ld);
    zt_dataset_free(&ds);
}

/* A dataset whose token ids say where they came from: example e, position j -> (e+1)*100 + j
 * (so 0 is only ever padding). */
enum { N_EX = 57 };
static int tag_example(int32_t id) { return id / 100 - 1; }
static void make_tagged(zt_dataset *ds)
{
    zt_rng r;
    zt_rng_seed(&r, 99, 0);
    int32_t ids[40];
    for (int e = 0; e < N_EX; e++) {
        int n = 1 + (int)zt_rng_below(&r, 40);
        for (int j = 0; j < n; j++) ids[j] = (e + 1) * 100 + j;
        append(ds, ids, NULL, n);
    }
}

/* Serves one epoch (it must start at a row 0) and checks every token appears exactly once,
 * in one piece per document, with positions and targets consistent with its tag. */
static void check_epoch_coverage(zt_loader *ld, zt_batch *b, const zt_dataset *ds, int32_t *first_of_row)
{
    int64_t epoch = zt_loader_get_state(ld).epoch, rows = zt_loader_rows_per_epoch(ld), row = 0;
    int64_t group = (int64_t)ld->B * ld->world;
    char *seen = calloc((N_EX + 1) * 100, 1);
    for (int64_t step = 0; step < (rows + group - 1) / group; step++) {
        CHECK(zt_loader_get_state(ld).epoch == epoch);
        zt_loader_next(ld, b);
        check_batch_invariants(b);
        for (int i = 0; i < b->B * b->T; i++) {
            int t = i % b->T;
            if (t == 0 && first_of_row && row < rows) first_of_row[row++] = b->input[i];
            if (b->input[i] == 0) {
                CHECK(b->target[i] == NO_LOSS && b->input[i - b->pos[i]] == 0);
                continue;
            }
            int e = tag_example(b->input[i]), j = b->input[i] % 100;
            CHECK(!seen[b->input[i]]);
            seen[b->input[i]] = 1;
            int64_t len = zt_dataset_len(ds, e);
            CHECK(b->target[i] == (j + 1 < len ? b->input[i] + 1 : NO_LOSS));
            /* attention never leaves the document: the keys t-pos..t are the same example's */
            CHECK(tag_example(b->input[i - b->pos[i]]) == e && b->input[i - b->pos[i]] % 100 == j - b->pos[i]);
        }
    }
    int64_t total = 0;
    for (int i = 0; i < (N_EX + 1) * 100; i++) total += seen[i];
    CHECK(total == zt_dataset_tokens(ds));
    CHECK(zt_loader_get_state(ld).epoch == epoch + 1);
    free(seen);
}

/* Whether the rows' first tokens come from examples in file order. */
static int rows_in_file_order(const int32_t *first_of_row, int64_t rows)
{
    for (int64_t r = 1; r < rows; r++)
        if (tag_example(first_of_row[r]) < tag_example(first_of_row[r - 1])) return 0;
    return 1;
}

static void test_determinism_and_coverage(void)
{
    zt_dataset ds = {0};
    make_tagged(&ds);
    zt_loader a, b, c;
    zt_batch ba, bb, bc;
    CHECK(zt_loader_init(&a, &ds, 16, 3, 1, 1, 7, 0, 1) == ZT_OK);
    CHECK(zt_loader_init(&b, &ds, 16, 3, 1, 1, 7, 0, 1) == ZT_OK);
    CHECK(zt_loader_init(&c, &ds, 16, 3, 1, 1, 8, 0, 1) == ZT_OK);
    zt_batch_alloc(&ba, 3, 16);
    zt_batch_alloc(&bb, 3, 16);
    zt_batch_alloc(&bc, 3, 16);
    int differ = 0;
    for (int step = 0; step < 100; step++) { /* several epochs */
        zt_loader_next(&a, &ba);
        zt_loader_next(&b, &bb);
        zt_loader_next(&c, &bc);
        CHECK(memcmp(ba.input, bb.input, 48 * 4) == 0 && memcmp(ba.target, bb.target, 48 * 4) == 0 &&
              memcmp(ba.pos, bb.pos, 48 * 4) == 0 && ba.n_targets == bb.n_targets);
        differ += memcmp(ba.input, bc.input, 48 * 4) != 0;
    }
    CHECK(differ > 90);
    CHECK(zt_loader_get_state(&a).epoch >= 3);

    /* every epoch is a different order of the same tokens */
    zt_loader d;
    zt_batch bd;
    CHECK(zt_loader_init(&d, &ds, 16, 3, 1, 1, 7, 0, 1) == ZT_OK);
    zt_batch_alloc(&bd, 3, 16);
    int32_t first0[N_EX * 2], first1[N_EX * 2];
    int64_t rows0 = zt_loader_rows_per_epoch(&d);
    check_epoch_coverage(&d, &bd, &ds, first0);
    int64_t rows1 = zt_loader_rows_per_epoch(&d), rows1_ahead;
    CHECK(zt_loader_epoch_rows(&a, 1, &rows1_ahead) == ZT_OK && rows1_ahead == rows1);
    check_epoch_coverage(&d, &bd, &ds, first1);
    CHECK(memcmp(first0, first1, (size_t)(rows0 < rows1 ? rows0 : rows1) * 4) != 0);
    CHECK(!rows_in_file_order(first0, rows0) && !rows_in_file_order(first1, rows1));
    zt_loader_free(&d);
    zt_batch_free(&bd);

    /* unpacked: the same coverage, one example per row */
    CHECK(zt_loader_init(&d, &ds, 64, 4, 0, 1, 7, 0, 1) == ZT_OK);
    zt_batch_alloc(&bd, 4, 64);
    CHECK(zt_loader_rows_per_epoch(&d) == N_EX);
    check_epoch_coverage(&d, &bd, &ds, NULL);
    zt_loader_free(&d);
    zt_batch_free(&bd);

    zt_loader_free(&a);
    zt_loader_free(&b);
    zt_loader_free(&c);
    zt_batch_free(&ba);
    zt_batch_free(&bb);
    zt_batch_free(&bc);
    zt_dataset_free(&ds);
}

static void test_no_shuffle_keeps_order(void)
{
    zt_dataset ds = {0};
    make_tagged(&ds);
    int32_t first[N_EX];
    for (int packing = 0; packing <= 1; packing++) {
        zt_loader ld;
        zt_batch b;
        CHECK(zt_loader_init(&ld, &ds, 40, 2, packing, 0, 7, 0, 1) == ZT_OK);
        zt_batch_alloc(&b, 2, 40);
        int64_t rows = zt_loader_rows_per_epoch(&ld);
        check_epoch_coverage(&ld, &b, &ds, first);
        CHECK(rows_in_file_order(first, rows));
        for (int64_t r = 0; r < rows && !packing; r++) CHECK(first[r] == (r + 1) * 100);
        zt_loader_free(&ld);
        zt_batch_free(&b);
    }
    zt_dataset_free(&ds);
}

static void test_resume(void)
{
    zt_dataset ds = {0};
    make_tagged(&ds);
    enum { STEPS = 40, SAVE = 13, BT = 2 * 24 };
    zt_loader ld;
    zt_batch b;
    CHECK(zt_loader_init(&ld, &ds, 24, 2, 1, 1, 5, 0, 1) == ZT_OK);
    zt_batch_alloc(&b, 2, 24);
    int32_t input[STEPS][BT], target[STEPS][BT], pos[STEPS][BT];
    zt_loader_state saved = {0};
    for (int s = 0; s < STEPS; s++) {
        if (s == SAVE) saved = zt_loader_get_state(&ld);
        zt_loader_next(&ld, &b);
        memcpy(input[s], b.input, sizeof input[s]);
        memcpy(target[s], b.target, sizeof target[s]);
        memcpy(pos[s], b.pos, sizeof pos[s]);
    }
    CHECK(zt_loader_get_state(&ld).epoch > saved.epoch); /* the replay crosses an epoch */
    zt_loader_free(&ld);

    CHECK(zt_loader_init(&ld, &ds, 24, 2, 1, 1, 5, 0, 1) == ZT_OK);
    zt_loader_state bad = {saved.epoch, 1000000};
    CHECK(zt_loader_set_state(&ld, bad) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), "row 1000000 is past the end of epoch"), "%s", zt_errmsg());
    CHECK(zt_loader_get_state(&ld).epoch == 0 && zt_loader_get_state(&ld).row == 0);
    CHECK(zt_loader_set_state(&ld, (zt_loader_state){-1, 0}) == ZT_EUSER);
    CHECK(zt_loader_set_state(&ld, saved) == ZT_OK);
    for (int s = SAVE; s < STEPS; s++) {
        zt_loader_next(&ld, &b);
        CHECK(memcmp(input[s], b.input, sizeof input[s]) == 0);
        CHECK(memcmp(target[s], b.target, sizeof target[s]) == 0);
        CHECK(memcmp(pos[s], b.pos, sizeof pos[s]) == 0);
    }
    zt_loader_free(&ld);
    zt_batch_free(&b);
    zt_dataset_free(&ds);
}

static void test_rank_slicing(void)
{
    enum { W = 3, B = 2, T = 20, STEPS = 30 };
    zt_dataset ds = {0};
    make_tagged(&ds);
    zt_loader one, ranks[W];
    zt_batch bone, branks[W];
    CHECK(zt_loader_init(&one, &ds, T, B * W, 1, 1, 11, 0, 1) == ZT_OK);
    zt_batch_alloc(&bone, B * W, T);
    for (int r = 0; r < W; r++) {
        CHECK(zt_loader_init(&ranks[r], &ds, T, B, 1, 1, 11, r, W) == ZT_OK);
        zt_batch_alloc(&branks[r], B, T);
    }
    int64_t epochs_seen = 0;
    for (int s = 0; s < STEPS; s++) {
        zt_loader_next(&one, &bone);
        int64_t n = 0;
        for (int r = 0; r < W; r++) {
            zt_loader_next(&ranks[r], &branks[r]);
            n += branks[r].n_targets;
            for (int k = 0; k < B; k++) { /* rank r's slot k is global row k*W + r */
                size_t g = (size_t)(k * W + r) * T, l = (size_t)k * T;
                CHECK(memcmp(bone.input + g, branks[r].input + l, T * 4) == 0);
                CHECK(memcmp(bone.target + g, branks[r].target + l, T * 4) == 0);
                CHECK(memcmp(bone.pos + g, branks[r].pos + l, T * 4) == 0);
            }
            CHECK(zt_loader_get_state(&ranks[r]).epoch == zt_loader_get_state(&one).epoch);
            CHECK(zt_loader_get_state(&ranks[r]).row == zt_loader_get_state(&one).row);
        }
        CHECK(n == bone.n_targets);
        epochs_seen = zt_loader_get_state(&one).epoch;
    }
    CHECK(epochs_seen >= 2);
    zt_loader_free(&one);
    zt_batch_free(&bone);
    for (int r = 0; r < W; r++) {
        zt_loader_free(&ranks[r]);
        zt_batch_free(&branks[r]);
    }
    zt_dataset_free(&ds);
}

static void test_loader_bad_args(void)
{
    zt_dataset ds = {0}, empty = {0};
    append(&ds, (int32_t[]){1}, NULL, 1);
    zt_loader ld;
    CHECK(zt_loader_init(&ld, &ds, 0, 1, 1, 1, 0, 0, 1) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), "max_length must be at least 1"), "%s", zt_errmsg());
    CHECK(zt_loader_init(&ld, &ds, 4, 0, 1, 1, 0, 0, 1) == ZT_EUSER);
    CHECK(zt_loader_init(&ld, &ds, 4, 1, 1, 1, 0, -1, 1) == ZT_EUSER);
    CHECK(zt_loader_init(&ld, &ds, 4, 1, 1, 1, 0, 3, 3) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), "rank 3 out of range for world size 3"), "%s", zt_errmsg());
    CHECK(zt_loader_init(&ld, &empty, 4, 1, 1, 1, 0, 0, 1) == ZT_EUSER);
    zt_dataset_free(&ds);
}

/* ---- tokenized cache ---------------------------------------------------------------------- */

static int builds; /* calls of build_three */

static zt_status build_three(void *ctx, zt_dataset *ds)
{
    (void)ctx;
    static const int32_t ids[] = {1, 2, 3, 4, 5, 6}, labels[] = {NO_LOSS, 2, NO_LOSS, 4, 5, 6};
    builds++;
    zt_status st = zt_dataset_append(ds, ids, labels, 2);
    if (!st) st = zt_dataset_append(ds, ids + 2, labels + 2, 3);
    if (!st) st = zt_dataset_append(ds, ids + 5, labels + 5, 1);
    return st;
}

/* The path of key's entry in tmpdir/cache; its bytes in *bytes (free them). */
static char *cache_entry(const zt_cache_key *k, char **bytes, size_t *len)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/cache/tokens-%016llx%016llx.bin", tmpdir, (unsigned long long)k->h[0],
             (unsigned long long)k->h[1]);
    CHECK(zt_read_file(path, bytes, len) == ZT_OK);
    return path;
}

/* Each corruption is refused with its reason, and zt_cache_get builds such an entry again. */
static void test_cache_checks(void)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/cache", tmpdir);
    zt_cache_key k;
    zt_cache_key_init(&k);
    zt_cache_key_add_str(&k, "three");
    zt_dataset ds;
    int hit;
    CHECK(zt_cache_get(dir, &k, 7, build_three, NULL, &ds, &hit) == ZT_OK && !hit && builds == 1);
    zt_dataset_free(&ds);
    char *good;
    size_t len;
    const char *path = cache_entry(&k, &good, &len);
    CHECK(len == sizeof(zt_cache_header) + 4 * 8 + 6 * 8);
    CHECK(zt_cache_parse(good, len, 7, &ds) == ZT_OK && ds.n_examples == 3 && ds.labels[1] == 2);
    CHECK(zt_cache_parse(good, len, 6, &ds) == ZT_EUSER && strstr(zt_errmsg(), "token 5 has id 6, outside"));
    static const struct {
        size_t at; /* byte offset of the int64 or int32 changed */
        int64_t value;
        int width, fix_crc;
        const char *why;
    } bad[] = {
        {sizeof(zt_cache_header) + 8, 1000000000000, 8, 1, "example 0 ends at token 1000000000000"},
        {sizeof(zt_cache_header) + 16, 1, 8, 1, "example 1 ends at token 1, outside (2, 6]"},
        {sizeof(zt_cache_header) + 32 + 4, 2147483647, 4, 1, "token 1 has id 2147483647"},
        {sizeof(zt_cache_header) + 32 + 24 + 8, -7, 4, 1, "token 2 has label -7"},
        {16, 4, 8, 1, "4 examples and 6 tokens do not fill"},
        {sizeof(zt_cache_header) + 32 + 4, 3, 4, 0, "checksum mismatch"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *b = malloc(len);
        memcpy(b, good, len);
        if (bad[i].width == 8) memcpy(b + bad[i].at, &bad[i].value, 8);
        else memcpy(b + bad[i].at, &(int32_t){(int32_t)bad[i].value}, 4);
        if (bad[i].fix_crc) ((zt_cache_header *)b)->crc = zt_cache_checksum(b, len);
        CHECK_MSG(zt_cache_parse(b, len, 7, &ds) == ZT_EUSER && strstr(zt_errmsg(), bad[i].why), "case %zu: %s", i,
                  zt_errmsg());
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(b, 1, len, f) == len);
        fclose(f);
        CHECK(zt_cache_get(dir, &k, 7, build_three, NULL, &ds, &hit) == ZT_OK && !hit && builds == (int)i + 2);
        CHECK(ds.n_examples == 3);
        zt_dataset_free(&ds);
        char *again;
        size_t n;
        cache_entry(&k, &again, &n);
        CHECK(n == len && !memcmp(again, good, len)); /* rewritten whole */
        free(again);
        free(b);
    }
    CHECK(zt_cache_get(dir, &k, 7, build_three, NULL, &ds, &hit) == ZT_OK && hit && ds.map);
    zt_dataset_free(&ds);
    CHECK(zt_cache_parse(good, 0, 7, &ds) == ZT_EUSER); /* shorter than a header */
    free(good);
    char lock[300];
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(path);
    unlink(lock);
    rmdir(dir);
}

/* ---- special tokens in text ---------------------------------------------------------------- */

/* A "text" line's special tokens are their ids, as Hugging Face encodes them by default;
 * split_special = 1 (data.split_special_tokens) encodes them as plain text. */
static void test_text_special_tokens(void)
{
    zt_tokenizer *tok;
    CHECK(zt_tokenizer_open(&tok, "tests/fixtures/tokenizers/bpe_qwen2") == ZT_OK);
    int32_t start = zt_tokenizer_piece_to_id(tok, "<|im_start|>");
    CHECK(start >= 0 && zt_tokenizer_is_special(tok, start));
    char *path = write_file("special.jsonl", "{\"text\": \"a<|im_start|>b\"}\n");
    for (int split = 0; split < 2; split++) {
        zt_dataset ds = {0};
        zt_format f = {
            .format = ZT_DATA_TEXT, .max_length = 64, .packing = 1, .split_special = split, .tok = tok, .ds = &ds};
        int64_t skipped;
        CHECK_MSG(zt_format_load(&f, &path, 1, 0, &skipped) == ZT_OK, "%s", zt_errmsg());
        int found = 0;
        for (int64_t i = 0; i < zt_dataset_len(&ds, 0); i++) found += ds.ids[i] == start;
        CHECK_MSG(found == !split, "split_special = %d: <|im_start|> found %d times", split, found);
        zt_dataset_free(&ds);
    }
    zt_tokenizer_free(tok);
}

/* ---- preference pairs ---------------------------------------------------------------------- */

typedef struct bad_line {
    const char *line, *error;
} bad_line;

/* Each line alone in a file is refused naming the file, its line and what is wrong with it. */
static void expect_bad_lines(zt_data_format format, const zt_tokenizer *tok, const zt_template *tmpl,
                             const bad_line *bad, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *path = write_file("bad.jsonl", bad[i].line);
        zt_dataset d = {0};
        zt_format f = {.format = format, .max_length = 64, .tok = tok, .tmpl = tmpl, .ds = &d};
        int64_t skipped;
        CHECK_MSG(zt_format_load(&f, &path, 1, 0, &skipped) == ZT_EUSER && strstr(zt_errmsg(), bad[i].error) &&
                      strstr(zt_errmsg(), "bad.jsonl:1: "),
                  "case %zu: %s", i, zt_errmsg());
        zt_dataset_free(&d);
    }
}

/* A pair without "prompt" (or with a string beside conversations) takes as its prompt what
 * "chosen" and "rejected" share, as TRL's extract_prompt does (its results for these lines,
 * with trl 1.16: the explicit lines): the same rows as the explicit pairs, through a byte-level
 * tokenizer, so a prompt cut inside a character would show. */
static void test_preference_implicit_prompt(void)
{
    zt_tokenizer *tok;
    zt_template *tmpl;
    CHECK(zt_tokenizer_open(&tok, "tests/fixtures/tokenizers/bpe_qwen2") == ZT_OK);
    CHECK(zt_template_load(&tmpl, ZT_TEMPLATE_CHATML, NULL, NULL) == ZT_OK);
    char *paths[2] = {
        write_file("explicit.jsonl",
                   "{\"prompt\": \"reverse abc\", \"chosen\": \" cba\", \"rejected\": \" abc\"}\n"
                   "{\"prompt\": \"h\\u00e9llo w\", \"chosen\": \"\\u00f6rld\", \"rejected\": \"\\u00e0rld\"}\n"
                   "{\"prompt\": \"ab\", \"chosen\": \"c\", \"rejected\": \"cd\"}\n"
                   "{\"prompt\": [{\"role\": \"user\", \"content\": \"q\"}], \"chosen\": [{\"role\": \"assistant\", "
                   "\"content\": \"x\"}], \"rejected\": [{\"role\": \"assistant\", \"content\": \"y\"}]}\n"),
        write_file(
            "implicit.jsonl",
            "{\"chosen\": \"reverse abc cba\", \"rejected\": \"reverse abc abc\"}\n"
            "{\"chosen\": \"h\\u00e9llo w\\u00f6rld\", \"rejected\": \"h\\u00e9llo w\\u00e0rld\"}\n"
            "{\"chosen\": \"abc\", \"rejected\": \"abcd\"}\n"
            "{\"prompt\": \"q\", \"chosen\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
            "\"content\": \"x\"}], \"rejected\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": "
            "\"assistant\", \"content\": \"y\"}]}\n")};
    zt_dataset ds[2];
    for (int k = 0; k < 2; k++) {
        ds[k] = (zt_dataset){0};
        zt_format f = {.format = ZT_DATA_PREFERENCE, .max_length = 64, .tok = tok, .tmpl = tmpl, .ds = &ds[k]};
        int64_t skipped;
        CHECK_MSG(zt_format_load(&f, &paths[k], 1, 0, &skipped) == ZT_OK, "%s", zt_errmsg());
    }
    CHECK(ds[0].n_examples == 8 && ds[1].n_examples == 8);
    int64_t n = zt_dataset_tokens(&ds[0]);
    CHECK(n == zt_dataset_tokens(&ds[1]) && !memcmp(ds[0].offsets, ds[1].offsets, 9 * sizeof *ds[0].offsets) &&
          !memcmp(ds[0].ids, ds[1].ids, (size_t)n * sizeof *ds[0].ids) &&
          !memcmp(ds[0].labels, ds[1].labels, (size_t)n * sizeof *ds[0].labels));
    for (int k = 0; k < 2; k++) zt_dataset_free(&ds[k]);

    static const bad_line bad[] = {
        {"{\"chosen\": [{\"role\": \"user\", \"content\": \"a\"}], \"rejected\": \"b\"}", "must both be strings or"},
        {"{\"chosen\": \"\", \"rejected\": \"b\"}", "must not be empty"},
        {"{\"chosen\": [{\"role\": \"user\", \"content\": \"a\"}], \"rejected\": [{\"role\": \"user\", \"content\": "
         "\"b\"}]}",
         "share no first message"},
    };
    expect_bad_lines(ZT_DATA_PREFERENCE, tok, tmpl, bad, sizeof bad / sizeof bad[0]);
    zt_template_free(tmpl);
    zt_tokenizer_free(tok);
}

/* data.format = "unpaired": each answer is the side of a pair its label names, tokenized as that
 * side of a preference line is, with a placeholder of one untrained token (the answer's first) in
 * the other place; an answer with nothing to train leaves its line out, placeholder and all. */
static void test_unpaired_lines(void)
{
    zt_tokenizer *tok;
    zt_template *tmpl;
    CHECK(zt_tokenizer_open(&tok, "tests/fixtures/tokenizers/bpe_qwen2") == ZT_OK);
    CHECK(zt_template_load(&tmpl, ZT_TEMPLATE_CHATML, NULL, NULL) == ZT_OK);
    char *paths[2] = {
        write_file("pairs.jsonl", "{\"prompt\": \"reverse abc\", \"chosen\": \" cba\", \"rejected\": \" abc\"}\n"
                                  "{\"prompt\": [{\"role\": \"user\", \"content\": \"q\"}], \"chosen\": \"x\", "
                                  "\"rejected\": \"y\"}\n"),
        write_file("unpaired.jsonl",
                   "{\"prompt\": \"reverse abc\", \"completion\": \" abc\", \"label\": false}\n"
                   "{\"prompt\": [{\"role\": \"user\", \"content\": \"q\"}], \"completion\": \"x\", \"label\": true}\n"
                   "{\"prompt\": [{\"role\": \"user\", \"content\": \"q\"}], \"completion\": [{\"role\": "
                   "\"assistant\", \"content\": \"x\"}], \"label\": true}\n"
                   "{\"prompt\": [{\"role\": \"user\", \"content\": \"a b c d e f g h i j k l m n o p q r s t u v w x "
                   "y z a b c d e f g h i j k l m n o p q r s t u v w x y z\"}], \"completion\": \"x\", \"label\": "
                   "false}\n")};
    zt_dataset ds[2];
    for (int k = 0; k < 2; k++) {
        ds[k] = (zt_dataset){0};
        zt_format f = {.format = k ? ZT_DATA_UNPAIRED : ZT_DATA_PREFERENCE,
                       .max_length = 64,
                       .tok = tok,
                       .tmpl = tmpl,
                       .ds = &ds[k]};
        int64_t skipped;
        CHECK_MSG(zt_format_load(&f, &paths[k], 1, 0, &skipped) == ZT_OK, "%s", zt_errmsg());
        /* the last unpaired line's answer lies past max_length: counted, without targets, left out */
        CHECK_MSG(f.examples == 4 && f.no_targets == (k ? 1 : 0), "%d: %lld examples, %lld without targets", k,
                  (long long)f.examples, (long long)f.no_targets);
    }
    /* unpaired (placeholder, rejected 0), (chosen 1, placeholder), (chosen 1, placeholder) */
    static const int64_t pair_of[6] = {-1, 1, 2, -1, 2, -1};
    CHECK(ds[1].n_examples == 6);
    for (int64_t e = 0; e < 6 && ds[1].n_examples == 6; e++) {
        const int32_t *ids = ds[1].ids + ds[1].offsets[e], *labels = ds[1].labels + ds[1].offsets[e];
        int64_t n = zt_dataset_len(&ds[1], e), p = pair_of[e];
        if (p < 0) {
            CHECK_MSG(n == 1 && labels[0] == ZT_IGNORE_INDEX && ids[0] == ds[1].ids[ds[1].offsets[e ^ 1]],
                      "example %lld: not a placeholder", (long long)e);
            continue;
        }
        CHECK_MSG(n == zt_dataset_len(&ds[0], p) &&
                      !memcmp(ids, ds[0].ids + ds[0].offsets[p], (size_t)n * sizeof *ids) &&
                      !memcmp(labels, ds[0].labels + ds[0].offsets[p], (size_t)n * sizeof *ids),
                  "example %lld is not pair side %lld", (long long)e, (long long)p);
    }
    for (int k = 0; k < 2; k++) zt_dataset_free(&ds[k]);
    static const bad_line bad[] = {
        {"{\"prompt\": \"a\", \"completion\": \"b\", \"label\": 1}", "\"label\" is a number, not true or false"},
        {"{\"prompt\": \"a\", \"completion\": \"b\"}", "needs \"prompt\", \"completion\" and \"label\""},
        {"{\"prompt\": \"a\", \"completion\": [{\"role\": \"assistant\", \"content\": \"b\"}], \"label\": true}",
         "\"completion\" must be a string like \"prompt\""},
        {"{\"prompt\": 3, \"completion\": \"b\", \"label\": true}", "\"prompt\" is a number"},
    };
    expect_bad_lines(ZT_DATA_UNPAIRED, tok, tmpl, bad, sizeof bad / sizeof bad[0]);
    zt_template_free(tmpl);
    zt_tokenizer_free(tok);
}

/* ---- prompt-completion lines ------------------------------------------------------------------ */

/* data.format = "completion": every line of tests/fixtures/completion/expected.jsonl gives the
 * tokens and labels TRL's SFT trainer makes of it (make_expected.py there): text with the
 * tokenizer's BOS and EOS, a cut that tokens merge across, an EOS already written, an empty
 * prompt, message lists through Qwen2.5's template. */
static void test_completion_lines(void)
{
    char *text;
    size_t len;
    CHECK(zt_read_file("tests/fixtures/completion/expected.jsonl", &text, &len) == ZT_OK);
    zt_template *tmpl;
    CHECK(zt_template_load(&tmpl, ZT_TEMPLATE_FILE, "tests/fixtures/templates/qwen2.5-7b-instruct.jinja", NULL) ==
          ZT_OK);
    int rows = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), rows++) {
        cJSON *row = cJSON_Parse(line);
        char dir[128], *json = cJSON_PrintUnformatted(cJSON_GetObjectItem(row, "line"));
        snprintf(dir, sizeof dir, "tests/fixtures/tokenizers/%s", cJSON_GetObjectItem(row, "tokenizer")->valuestring);
        char *path = write_file("completion.jsonl", json);
        zt_tokenizer *tok;
        CHECK(zt_tokenizer_open(&tok, dir) == ZT_OK);
        zt_dataset ds = {0};
        zt_format f = {.format = ZT_DATA_COMPLETION, .max_length = 256, .tok = tok, .tmpl = tmpl, .ds = &ds};
        int64_t skipped;
        CHECK_MSG(zt_format_load(&f, &path, 1, 0, &skipped) == ZT_OK, "%s", zt_errmsg());
        const cJSON *ids = cJSON_GetObjectItem(row, "input_ids"), *labels = cJSON_GetObjectItem(row, "labels");
        int n = cJSON_GetArraySize(ids), same = ds.n_examples == 1 && zt_dataset_len(&ds, 0) == n;
        for (int i = 0; i < n && same; i++)
            same = ds.ids[i] == cJSON_GetArrayItem(ids, i)->valueint &&
                   ds.labels[i] == cJSON_GetArrayItem(labels, i)->valueint;
        CHECK_MSG(same, "%s with %s: not TRL's tokens and labels", json, dir);
        zt_dataset_free(&ds);
        zt_tokenizer_free(tok);
        cJSON_free(json);
        cJSON_Delete(row);
    }
    CHECK(rows == 8);
    zt_template_free(tmpl);
    free(text);
}

/* ---- chat spans ---------------------------------------------------------------------------- */

/* One chat line of n turns (user "say N", assistant "ok N") written to name; *len is its length. */
static char *write_chat(const char *name, int n, size_t *len)
{
    size_t cap = 64 + (size_t)n * 64, at = 0;
    char *line = malloc(cap);
    at += (size_t)sprintf(line, "{\"messages\": [");
    for (int i = 0; i < n; i++)
        at += (size_t)sprintf(line + at, "%s{\"role\": \"%s\", \"content\": \"%s %d\"}", i ? ", " : "",
                              i % 2 ? "assistant" : "user", i % 2 ? "ok" : "say", i);
    *len = at + (size_t)sprintf(line + at, "]}\n");
    char *path = write_file(name, line);
    free(line);
    return path;
}

/* The chat examples of path through chatml and the Qwen2 tokenizer fixture, at max_length. */
static void load_chat(const zt_tokenizer *tok, const zt_template *tmpl, char *path, int max_length, zt_dataset *ds)
{
    zt_format f = {.format = ZT_DATA_CHAT,
                   .train_on = ZT_TRAIN_ASSISTANT,
                   .max_length = max_length,
                   .packing = 1,
                   .tok = tok,
                   .tmpl = tmpl,
                   .ds = ds};
    int64_t skipped_lines;
    *ds = (zt_dataset){0};
    zt_status st = zt_format_load(&f, &path, 1, 0, &skipped_lines);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
}

/* Truncation keeps exactly the first max_length tokens and labels that the whole
 * conversation gives, wherever the cut falls (inside a turn, between turns), though
 * the spans past the cut are not looked for. */
/* The trained tokens of a one-line chat file, decoded. */
static char *trained_text(const zt_tokenizer *tok, const zt_template *tmpl, const char *line)
{
    zt_dataset ds;
    load_chat(tok, tmpl, write_file("tools.jsonl", line), 4096, &ds);
    int64_t n = zt_dataset_tokens(&ds), k = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++)
        if (ds.labels[i] != NO_LOSS) ids[k++] = ds.ids[i];
    char *text = NULL;
    CHECK(zt_tokenizer_decode(tok, ids, (size_t)k, 0, &text) == ZT_OK);
    free(ids);
    zt_dataset_free(&ds);
    return text;
}

/* What eval.generate compares a generation with (zt_format_answer): the last assistant turn as
 * trained, cut at the end of the turn; want[0] for the line cut after its tool-call turn (which
 * is then the last one), want[1] for the whole line */
static void check_answers(const zt_tokenizer *tok, const zt_template *tmpl, const char *line, const char *const want[2])
{
    int32_t end[ZT_END_IDS];
    CHECK(zt_format_end_ids(tok, tmpl, end) == ZT_OK);
    cJSON *o = cJSON_Parse(line);
    zt_message *m;
    int n;
    char *owned, *got;
    CHECK(o && zt_messages_normalize(o) == ZT_OK && zt_format_messages(o, ZT_DATA_CHAT, &m, &n, &owned) == ZT_OK);
    for (int k = 0; k < 2; k++) {
        CHECK_MSG(zt_format_answer(tok, tmpl, m, k ? n : 2, o, end, ZT_END_IDS, &got) == ZT_OK, "%s", zt_errmsg());
        CHECK_MSG(!strcmp(got, want[k]), "answer %d: %s", k, got);
        free(got);
    }
    free(m);
    free(owned);
    cJSON_Delete(o);
}

/* A function-calling conversation: the row's tools and the turn's tool_calls reach the template
 * (Qwen2.5's and Qwen3's, as published), the tool calls and the answer are trained, the tool's
 * result is not. The expected texts are what transformers 4.51.3 renders for the spans (P, Q as
 * template.h defines them; Qwen3 writes an empty <think></think> into the last turn only). */
static void test_chat_tool_calls(void)
{
    static const char line[] =
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The "
        "weather in a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
        "\"string\"}}, \"required\": [\"city\"]}}}], \"messages\": [{\"role\": \"user\", \"content\": \"Weather in "
        "Paris?\"}, {\"role\": \"assistant\", \"content\": %s, \"tool_calls\": [{\"type\": \"function\", "
        "\"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]}, {\"role\": \"tool\", "
        "\"content\": \"{\\\"temperature\\\": 22}\"}, {\"role\": \"assistant\", \"content\": \"It is 22 "
        "\u00b0C.\"}]}\n";
    static const struct {
        const char *file, *content, *want, *answers[2];
    } cases[] = {
        {"tests/fixtures/templates/qwen2.5-7b-instruct.jinja",
         "null",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
         "It is 22 \u00b0C.<|im_end|>\n",
         {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
          "It is 22 \u00b0C."}},
        {"tests/fixtures/templates/llamacpp/Qwen-Qwen3-0.6B.jinja",
         "\"\"",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
         "<think>\n\n</think>\n\nIt is 22 \u00b0C.<|im_end|>\n",
         {"<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
          "</tool_call>",
          "<think>\n\n</think>\n\nIt is 22 \u00b0C."}},
    };
    zt_tokenizer *tok;
    CHECK(zt_tokenizer_open(&tok, "tests/fixtures/tokenizers/bpe_qwen2") == ZT_OK);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        zt_template *tmpl;
        CHECK(zt_template_load(&tmpl, ZT_TEMPLATE_FILE, cases[c].file, NULL) == ZT_OK);
        char text[2048];
        snprintf(text, sizeof text, line, cases[c].content);
        char *got = trained_text(tok, tmpl, text);
        CHECK_MSG(got && !strcmp(got, cases[c].want), "%s: trained %s", cases[c].file, got);
        free(got);
        check_answers(tok, tmpl, text, cases[c].answers);
        zt_template_free(tmpl);
    }
    zt_tokenizer_free(tok);
}

/* Qwen3 with enable_thinking = false (the recipe's tokenizer.chat_template_kwargs, or a line's
 * "chat_template_kwargs", which goes over it) writes the empty <think></think> into the generation
 * prompt, so the answer is trained without it; by default the empty block is trained too. The
 * expected texts are transformers 4.51.3's spans for apply_chat_template(..., **kwargs). */
static void test_chat_template_kwargs(void)
{
    static const char line[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"What is 2+2?\"}, "
                               "{\"role\": \"assistant\", \"content\": \"4\"}]%s}\n";
    static const struct {
        const char *recipe, *row, *want;
    } cases[] = {
        {NULL, "", "<think>\n\n</think>\n\n4<|im_end|>\n"},
        {"{\"enable_thinking\": false}", "", "4<|im_end|>\n"},
        {NULL, ", \"chat_template_kwargs\": {\"enable_thinking\": false}", "4<|im_end|>\n"},
        {"{\"enable_thinking\": false}", ", \"chat_template_kwargs\": {\"enable_thinking\": true}",
         "<think>\n\n</think>\n\n4<|im_end|>\n"},
    };
    zt_tokenizer *tok;
    CHECK(zt_tokenizer_open(&tok, "tests/fixtures/tokenizers/bpe_qwen2") == ZT_OK);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        zt_template *tmpl;
        CHECK(zt_template_load(&tmpl, ZT_TEMPLATE_FILE, "tests/fixtures/templates/llamacpp/Qwen-Qwen3-0.6B.jinja",
                               NULL) == ZT_OK);
        if (cases[c].recipe) CHECK(zt_template_set_kwargs(tmpl, cases[c].recipe) == ZT_OK);
        char text[512];
        snprintf(text, sizeof text, line, cases[c].row);
        char *got = trained_text(tok, tmpl, text);
        CHECK_MSG(got && !strcmp(got, cases[c].want), "case %zu: trained %s", c, got);
        free(got);
        zt_template_free(tmpl);
    }
    zt_template *tmpl;
    CHECK(zt_template_load(&tmpl, ZT_TEMPLATE_CHATML, NULL, NULL) == ZT_OK);
    CHECK(zt_template_set_kwargs(tmpl, "[1]") == ZT_EUSER && strstr(zt_errmsg(), "is not a JSON object"));
    CHECK(zt_template_set_kwargs(tmpl, "{\"tools\": []}") == ZT_EUSER &&
          strstr(zt_errmsg(), "chat_template_kwargs may not set 'tools', which zt passes itself"));
    static const bad_line bad[] = {
        {"{\"chat_template_kwargs\": [], \"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}",
         "\"chat_template_kwargs\" is an array, not an object"},
        {"{\"chat_template_kwargs\": {\"messages\": 1}, \"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}",
         "chat_template_kwargs may not set 'messages'"},
    };
    expect_bad_lines(ZT_DATA_CHAT, tok, tmpl, bad, sizeof bad / sizeof bad[0]);
    zt_template_free(tmpl);
    zt_tokenizer_free(tok);
}

/* The Qwen2 fixture tokenizer and a chat template: the .jinja file, or ChatML when NULL. */
static void open_qwen2(zt_tokenizer **tok, zt_template **tmpl, const char *template_file)
{
    CHECK(zt_tokenizer_open(tok, "tests/fixtures/tokenizers/bpe_qwen2") == ZT_OK);
    CHECK(zt_template_load(tmpl, template_file ? ZT_TEMPLATE_FILE : ZT_TEMPLATE_CHATML, template_file, NULL) == ZT_OK);
}

/* Each chat file (a name and its text) gives the first one's tokens and labels, which are not few. */
static void expect_same_rows(const zt_tokenizer *tok, const zt_template *tmpl, const char *const (*files)[2], int n)
{
    zt_dataset first, ds;
    load_chat(tok, tmpl, write_file(files[0][0], files[0][1]), 512, &first);
    int64_t len = zt_dataset_tokens(&first);
    CHECK(len > 10);
    for (int k = 1; k < n; k++) {
        load_chat(tok, tmpl, write_file(files[k][0], files[k][1]), 512, &ds);
        CHECK_MSG(zt_dataset_tokens(&ds) == len && !memcmp(ds.ids, first.ids, (size_t)len * sizeof(int32_t)) &&
                      !memcmp(ds.labels, first.labels, (size_t)len * sizeof(int32_t)),
                  "%s differs from %s", files[k][0], files[0][0]);
        zt_dataset_free(&ds);
    }
    zt_dataset_free(&first);
}

/* JSON written as strings: "tools" (Hermes', xLAM's data) and a tool call's "arguments" (OpenAI's
 * API) train as the values they hold; a string that holds no such value is refused by name. */
static void test_tool_json_strings(void)
{
    zt_tokenizer *tok;
    zt_template *tmpl;
    open_qwen2(&tok, &tmpl, "tests/fixtures/templates/qwen2.5-7b-instruct.jinja");
    static const char *const files[][2] = {
        {"values.jsonl",
         "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"messages\": [{\"role\": "
         "\"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"tool_calls\": [{\"type\": \"function\", "
         "\"function\": {\"name\": \"f\", \"arguments\": {\"x\": [1, \"]\"]}}}]}]}\n"},
        {"strings.jsonl",
         "{\"tools\": \"[{\\\"type\\\": \\\"function\\\", \\\"function\\\": {\\\"name\\\": \\\"f\\\"}}]\", "
         "\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"tool_calls\": "
         "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"x\\\": [1, "
         "\\\"]\\\"]}\"}}]}]}\n"},
    };
    expect_same_rows(tok, tmpl, files, 2);
    static const bad_line bad[] = {
        {"{\"tools\": \"get_weather\", \"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}",
         "\"tools\" is a string that holds no JSON list of function schemas"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"tool_calls\": "
         "[{\"function\": {\"name\": \"f\", \"arguments\": {}}}, {\"function\": {\"name\": \"f\", "
         "\"arguments\": \"x=1\"}}]}]}",
         "messages[1]: tool call 1's \"arguments\" is a string that holds no JSON object"},
    };
    expect_bad_lines(ZT_DATA_CHAT, tok, tmpl, bad, sizeof bad / sizeof bad[0]);
    zt_template_free(tmpl);
    zt_tokenizer_free(tok);
}

/* ShareGPT's tool turns (Hermes' "tool", LLaMA-Factory's "observation") are the template's tool
 * role, and LLaMA-Factory's function_call turns its tool calls. */
static void test_sharegpt_tool_turns(void)
{
    zt_tokenizer *tok;
    zt_template *tmpl;
    open_qwen2(&tok, &tmpl, "tests/fixtures/templates/qwen2.5-7b-instruct.jinja");
    static const char *const files[][2] = {
        {"openai.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
                         "\"content\": \"<tool_call>f</tool_call>\"}, {\"role\": \"tool\", \"content\": \"22\"}, "
                         "{\"role\": \"assistant\", \"content\": \"a\"}]}\n"},
        {"hermes.jsonl", "{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}, {\"from\": \"gpt\", "
                         "\"value\": \"<tool_call>f</tool_call>\"}, {\"from\": \"tool\", \"value\": \"22\"}, "
                         "{\"from\": \"gpt\", \"value\": \"a\"}]}\n"},
        {"factory.jsonl", "{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}, {\"from\": \"gpt\", "
                          "\"value\": \"<tool_call>f</tool_call>\"}, {\"from\": \"observation\", \"value\": \"22\"}, "
                          "{\"from\": \"gpt\", \"value\": \"a\"}]}\n"},
    };
    expect_same_rows(tok, tmpl, files, 3);
    /* LLaMA-Factory's function calling: a "system" beside the turns, function_call turns (a call or
     * a list of them), "tools" as a string */
    static const char *const calls[][2] = {
        {"calls.jsonl",
         "{\"tools\": [{\"name\": \"f\"}], \"messages\": [{\"role\": \"system\", \"content\": \"S\"}, "
         "{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": "
         "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}, {\"role\": "
         "\"tool\", \"content\": \"22\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": "
         "\"function\", \"function\": {\"name\": \"f\", \"arguments\": {}}}, {\"type\": \"function\", "
         "\"function\": {\"name\": \"g\", \"arguments\": {}}}]}, {\"role\": \"tool\", \"content\": \"1\"}, "
         "{\"role\": \"assistant\", \"content\": \"a\"}]}\n"},
        {"factory-calls.jsonl",
         "{\"system\": \"S\", \"tools\": \"[{\\\"name\\\": \\\"f\\\"}]\", \"conversations\": [{\"from\": "
         "\"human\", \"value\": \"q\"}, {\"from\": \"function_call\", \"value\": \"{\\\"name\\\": \\\"f\\\", "
         "\\\"arguments\\\": {\\\"x\\\": 1}}\"}, {\"from\": \"observation\", \"value\": \"22\"}, {\"from\": "
         "\"function_call\", \"value\": \"[{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": {}}, {\\\"name\\\": "
         "\\\"g\\\", \\\"arguments\\\": \\\"{}\\\"}]\"}, {\"from\": \"observation\", \"value\": \"1\"}, "
         "{\"from\": \"gpt\", \"value\": \"a\"}]}\n"},
    };
    expect_same_rows(tok, tmpl, calls, 2);
    static const bad_line bad[] = {
        {"{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}, {\"from\": \"function_call\", "
         "\"value\": \"f(x=1)\"}]}",
         "conversations[1]: a function_call's value holds no JSON call {\"name\", \"arguments\"} nor a list of them"},
        {"{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}, {\"from\": \"function_call\", "
         "\"value\": \"[{\\\"arguments\\\": {}}]\"}]}",
         "conversations[1]: a function_call's value holds no JSON call"},
        {"{\"conversations\": [{\"from\": \"bot\", \"value\": \"q\"}]}",
         "conversations[0]: \"from\" is 'bot', not human, gpt, system, tool or function_call"},
        {"{\"conversations\": [{\"from\": \"human\"}]}", "conversations[0] needs string \"from\" and \"value\""},
        {"{\"conversations\": []}", "\"conversations\" is empty"},
        {"{\"conversations\": {}}", "\"conversations\" is an object, not a list of {\"from\", \"value\"}"},
    };
    expect_bad_lines(ZT_DATA_CHAT, tok, tmpl, bad, sizeof bad / sizeof bad[0]);
    zt_template_free(tmpl);
    zt_tokenizer_free(tok);
}

/* Content as a list of text parts trains as the parts joined; other parts, tools that are not a
 * list and a turn without content or tool calls are refused by name. */
static void test_chat_content_parts(void)
{
    zt_tokenizer *tok;
    zt_template *tmpl;
    open_qwen2(&tok, &tmpl, NULL);
    static const char *const files[][2] = {
        {"parts.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
                        "\"What is \"}, {\"type\": \"text\", \"text\": \"2+2?\"}]}, {\"role\": \"assistant\", "
                        "\"content\": [{\"type\": \"text\", \"text\": \"4\"}]}]}\n"},
        {"string.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"What is 2+2?\"}, {\"role\": "
                         "\"assistant\", \"content\": \"4\"}]}\n"},
    };
    expect_same_rows(tok, tmpl, files, 2);
    static const bad_line bad[] = {
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {\"url\": "
         "\"x.png\"}}]}]}",
         "message 0: content part 0 is of type 'image_url'; zt trains on text parts only"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}",
         "message 0: content part 0 needs a string \"text\""},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [\"hi\"]}]}", "content part 0 needs a string \"type\""},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": null}]}",
         "message 1: \"content\" is null, not a string or a list of text parts"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\"}]}",
         "(only a turn with tool_calls may leave it out)"},
        {"{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": {}}]}", "message 0: \"tool_calls\" is an object"},
        {"{\"tools\": {}, \"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}",
         "\"tools\" is an object, not a list of function schemas"},
    };
    expect_bad_lines(ZT_DATA_CHAT, tok, tmpl, bad, sizeof bad / sizeof bad[0]);
    zt_template_free(tmpl);
    zt_tokenizer_free(tok);
}

static void test_chat_truncation_is_a_prefix(void)
{
    zt_tokenizer *tok;
    zt_template *tmpl;
    CHECK(zt_tokenizer_open(&tok, "tests/fixtures/tokenizers/bpe_qwen2") == ZT_OK);
    CHECK(zt_template_load(&tmpl, ZT_TEMPLATE_CHATML, NULL, NULL) == ZT_OK);
    size_t line;
    char *path = write_chat("chat40.jsonl", 40, &line);
    zt_dataset whole, cut;
    load_chat(tok, tmpl, path, 1 << 20, &whole);
    int64_t n = zt_dataset_len(&whole, 0);
    CHECK(n > 200 && line > 0);
    int64_t first = 1; /* the first trained token: a shorter cut leaves nothing to train on */
    while (first < n && whole.labels[first] == NO_LOSS) first++;
    for (int max_length = (int)first + 1; max_length < n + 3; max_length += 7) {
        load_chat(tok, tmpl, path, max_length, &cut);
        int64_t k = zt_dataset_len(&cut, 0);
        CHECK(k == (max_length < n ? max_length : n));
        CHECK(!memcmp(cut.ids, whole.ids, (size_t)k * sizeof *cut.ids));
        CHECK(!memcmp(cut.labels, whole.labels, (size_t)k * sizeof *cut.labels));
        zt_dataset_free(&cut);
    }
    zt_dataset_free(&whole);
    zt_template_free(tmpl);
    zt_tokenizer_free(tok);
}

/* A conversation of 20,000 turns cut to max_length costs about one render of it: the
 * assistant spans past the cut are not looked for. Finding every span by prefix
 * rendering (two renders per assistant turn) would render about 10,000 times its text. */
static void test_chat_long_conversation_renders_once(void)
{
    zt_tokenizer *tok;
    zt_template *tmpl;
    CHECK(zt_tokenizer_open(&tok, "tests/fixtures/tokenizers/bpe_qwen2") == ZT_OK);
    CHECK(zt_template_load(&tmpl, ZT_TEMPLATE_CHATML, NULL, NULL) == ZT_OK);
    size_t line;
    char *path = write_chat("chat20000.jsonl", 20000, &line);
    uint64_t before = zt_template_rendered(tmpl);
    zt_dataset ds;
    load_chat(tok, tmpl, path, 256, &ds);
    uint64_t cost = zt_template_rendered(tmpl) - before;
    CHECK(zt_dataset_len(&ds, 0) == 256);
    zt_dataset_free(&ds);
    /* the text once (shorter than the line: each turn's JSON is longer than its chatml), plus
     * the prefixes up to the cut (about 256 tokens, a few KB each) */
    CHECK_MSG(cost < line + 65536, "rendered %llu bytes for a line of %llu", (unsigned long long)cost,
              (unsigned long long)line);
    zt_template_free(tmpl);
    zt_tokenizer_free(tok);
}

/* ---- the end of an assistant turn ---------------------------------------------------------- */

/* The special tokens of every template below, so that a token the template does not end turns
 * with is there to be taken wrongly. */
static const char *const TURN_SPECIALS[] = {"<bos>",
                                            "<eos>",
                                            "<start_of_turn>",
                                            "<end_of_turn>",
                                            "<|begin_of_text|>",
                                            "<|end_of_text|>",
                                            "<|start_header_id|>",
                                            "<|end_header_id|>",
                                            "<|eot_id|>",
                                            "<s>",
                                            "</s>",
                                            "[INST]",
                                            "[/INST]",
                                            "<|user|>",
                                            "<|assistant|>",
                                            "<|end|>"};

/* The Qwen2 tokenizer fixture with TURN_SPECIALS added as special tokens and bos and eos as its
 * BOS and EOS (tokenizer_config.json beside a copy of its tokenizer.json). */
static zt_tokenizer *turn_tokenizer(const char *bos, const char *eos)
{
    char *json, config[2048];
    size_t len;
    CHECK(zt_read_file("tests/fixtures/tokenizers/bpe_qwen2/tokenizer.json", &json, &len) == ZT_OK);
    write_file("tokenizer.json", json);
    free(json);
    int at = snprintf(config, sizeof config,
                      "{\"bos_token\": \"%s\", \"eos_token\": \"%s\", \"added_tokens_decoder\": {", bos, eos);
    for (size_t i = 0; i < sizeof TURN_SPECIALS / sizeof *TURN_SPECIALS; i++)
        at += snprintf(config + at, sizeof config - (size_t)at, "%s\"%zu\": {\"content\": \"%s\", \"special\": true}",
                       i ? ", " : "", 2000 + i, TURN_SPECIALS[i]);
    snprintf(config + at, sizeof config - (size_t)at, "}}");
    write_file("tokenizer_config.json", config);
    zt_tokenizer *tok;
    CHECK_MSG(zt_tokenizer_open(&tok, tmpdir) == ZT_OK, "%s", zt_errmsg());
    return tok;
}

/* The ids that end a turn are the special tokens the template writes right after an assistant's
 * content, with EOS; a template that ends turns with </s> has EOS alone. A chat line through each
 * template then trains on that end of turn. */
static void test_end_of_turn_from_template(void)
{
    static const struct {
        const char *file, *bos, *eos, *turn_end; /* turn_end NULL: EOS ends turns */
    } cases[] = {
        {"llamacpp/google-gemma-2-2b-it.jinja", "<bos>", "<eos>", "<end_of_turn>"},
        {"llamacpp/meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"},
        {"llamacpp/mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>", NULL},
        {"mistral-7b-instruct-v0.2.jinja", "<s>", "</s>", NULL},
        {"llamacpp/Qwen-Qwen2.5-7B-Instruct.jinja", "<|endoftext|>", "<|endoftext|>", "<|im_end|>"},
        {"llamacpp/microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>", "<|end|>"},
    };
    char *chat = write_file("turns.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"say\"}, "
                                           "{\"role\": \"assistant\", \"content\": \"ok\"}]}\n");
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        zt_tokenizer *tok = turn_tokenizer(cases[c].bos, cases[c].eos);
        char path[256];
        snprintf(path, sizeof path, "tests/fixtures/templates/%s", cases[c].file);
        zt_template *tmpl;
        CHECK_MSG(zt_template_load(&tmpl, ZT_TEMPLATE_FILE, path, NULL) == ZT_OK, "%s", zt_errmsg());
        int32_t eos = zt_tokenizer_piece_to_id(tok, cases[c].eos);
        int32_t turn_end = cases[c].turn_end ? zt_tokenizer_piece_to_id(tok, cases[c].turn_end) : -1;
        CHECK(eos >= 0 && zt_tokenizer_eos_id(tok) == eos && (!cases[c].turn_end || turn_end >= 0));
        int32_t end[ZT_END_IDS];
        CHECK_MSG(zt_format_end_ids(tok, tmpl, end) == ZT_OK, "%s: %s", cases[c].file, zt_errmsg());
        CHECK_MSG(end[0] == eos && end[1] == turn_end && end[2] == -1, "%s: end of turn %d %d %d, want %d %d",
                  cases[c].file, end[0], end[1], end[2], eos, turn_end);
        zt_dataset ds;
        load_chat(tok, tmpl, chat, 512, &ds); /* room for the default system prompts of Llama 3.1 and Qwen2.5 */
        int trained_end = 0;
        for (int64_t i = 0; ds.n_examples && i < zt_dataset_len(&ds, 0); i++)
            trained_end += ds.labels[i] == (turn_end >= 0 ? turn_end : eos);
        CHECK_MSG(trained_end == 1, "%s: the turn's end trained %d times", cases[c].file, trained_end);
        zt_dataset_free(&ds);
        zt_template_free(tmpl);
        zt_tokenizer_free(tok);
    }
    /* a template that refuses the conversation: EOS alone (logged at debug level) */
    zt_tokenizer *tok = turn_tokenizer("<bos>", "<eos>");
    zt_template *tmpl;
    CHECK(zt_template_load(&tmpl, ZT_TEMPLATE_FILE, write_file("refuses.jinja", "{{ raise_exception('no') }}"), NULL) ==
          ZT_OK);
    int32_t end[ZT_END_IDS];
    CHECK_MSG(zt_format_end_ids(tok, tmpl, end) == ZT_OK, "%s", zt_errmsg());
    CHECK(end[0] == zt_tokenizer_eos_id(tok) && end[0] >= 0 && end[1] == -1);
    zt_template_free(tmpl);
    zt_tokenizer_free(tok);
}

/* A model that always says <end_of_turn> (every layer's weights zero, so the last position's
 * residual stream is its embedding, all ones; the LM head's one nonzero row is that token's), with
 * the turn tokenizer and the Gemma template, stops at the first token it samples: generation ends
 * where the template ends turns. */
static void test_generation_stops_at_template_turn_end(void)
{
    zt_tokenizer *tok = turn_tokenizer("<bos>", "<eos>");
    int32_t turn_end = zt_tokenizer_piece_to_id(tok, "<end_of_turn>");
    zt_llama_config c;
    zt_llama_config_default(&c);
    c.vocab_size = zt_tokenizer_vocab_size(tok), c.hidden_size = 8, c.intermediate_size = 16;
    c.num_hidden_layers = 1, c.num_attention_heads = 2, c.num_key_value_heads = 1, c.head_dim = 4;
    c.tie_word_embeddings = 0, c.eos_token_id = zt_tokenizer_eos_id(tok);
    zt_tokenizer_free(tok);
    zt_llama m;
    CHECK(zt_llama_init(&m, &c, zt_backend_cpu(), ZT_F32) == ZT_OK);
    memset(m.params, 0, m.numel * sizeof *m.params);
    for (size_t i = 0; i < (size_t)m.V * m.C; i++) m.params[m.embed_off + i] = 1;
    for (int i = 0; i < m.C; i++) {
        m.params[m.norm_off + i] = 1;
        m.params[m.head_off + (size_t)turn_end * m.C + i] = 1;
    }
    CHECK_MSG(zt_llama_save(&m, tmpdir, ZT_F32, 0) == ZT_OK, "%s", zt_errmsg());
    zt_llama_free(&m);
    zt_generator g;
    zt_generator_options o = {.model = tmpdir,
                              .chat_template = ZT_TEMPLATE_FILE,
                              .template_path = "tests/fixtures/templates/llamacpp/google-gemma-2-2b-it.jinja",
                              .max_len = 64};
    CHECK_MSG(zt_generator_open(&g, &o) == ZT_OK, "%s", zt_errmsg());
    g.max_new_tokens = 8;
    zt_message msgs[] = {{"user", "say", NULL}};
    char *out = NULL;
    CHECK_MSG(zt_generate_chat(&g, msgs, 1, NULL, &out) == ZT_OK, "%s", zt_errmsg());
    CHECK_MSG(g.generated == 1 && out && !out[0], "%lld tokens sampled, completion '%s'", (long long)g.generated,
              out ? out : "");
    free(out);
    zt_generator_close(&g);
    char path[256];
    static const char *const saved[] = {"config.json", "model.safetensors"};
    for (size_t i = 0; i < sizeof saved / sizeof *saved; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, saved[i]);
        CHECK(unlink(path) == 0);
    }
}

int main(void)
{
    strcpy(tmpdir, "/tmp/zt_test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_rng_determinism);
    RUN(test_rng_distributions);
    RUN(test_rng_ziggurat);
    RUN(test_tokens_good);
    RUN(test_tokens_long_line);
    RUN(test_tokens_bad_lines);
    RUN(test_tokens_bad_files);
    RUN(test_json_array_files);
    RUN(test_jsonl_line_checks);
    RUN(test_preference_implicit_prompt);
    RUN(test_unpaired_lines);
    RUN(test_completion_lines);
    RUN(test_chat_tool_calls);
    RUN(test_chat_content_parts);
    RUN(test_chat_template_kwargs);
    RUN(test_sharegpt_tool_turns);
    RUN(test_tool_json_strings);
    RUN(test_packing_layout);
    RUN(test_packing_split);
    RUN(test_no_packing);
    RUN(test_determinism_and_coverage);
    RUN(test_no_shuffle_keeps_order);
    RUN(test_resume);
    RUN(test_rank_slicing);
    RUN(test_loader_bad_args);
    RUN(test_cache_checks);
    RUN(test_text_special_tokens);
    RUN(test_chat_truncation_is_a_prefix);
    RUN(test_chat_long_conversation_renders_once);
    RUN(test_end_of_turn_from_template);
    RUN(test_generation_stops_at_template_turn_end);
    for (int i = 0; i < ntmp; i++) {
        unlink(tmpfiles[i]);
        free(tmpfiles[i]);
    }
    rmdir(tmpdir);
    return test_summary();
}
