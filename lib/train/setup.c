/* What training and evaluation both need: a model from a directory, data from files. */
#include <stdio.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/data/cache.h"
#include "lib/data/formats.h"
#include "lib/data/tokens.h"
#include "train.h"

typedef struct build_ctx {
    const zt_recipe *r;
    const zt_data_tools *d;
    const zt_strlist *paths;
    int64_t *skipped;
} build_ctx;

static zt_status tokenize(const zt_recipe *r, const zt_data_tools *d, const zt_strlist *paths, int64_t *skipped,
                          zt_dataset *ds);

static zt_status build_entry(void *ctx, zt_dataset *ds)
{
    build_ctx *b = ctx;
    return tokenize(b->r, b->d, b->paths, b->skipped, ds);
}

/* Everything that decides the tokens: format options, tokenizer files, added tokens, template, data bytes. */
static zt_status cache_key(zt_cache_key *k, const zt_recipe *r, const zt_data_tools *d, const zt_strlist *paths)
{
    char opts[256], side[4096];
    snprintf(opts, sizeof opts, "zt-tokens-6|%s|%s|%d|%d|%d|%d", zt_data_format_names[r->data.format],
             zt_train_on_names[r->data.train_on], r->data.max_length, r->data.packing, r->data.skip_bad_lines,
             r->data.split_special_tokens);
    zt_cache_key_init(k);
    zt_cache_key_add_str(k, opts);
    zt_cache_key_add_str(k, r->tokenizer.chat_template_kwargs);
    zt_status st = zt_cache_key_add_file(k, zt_tokenizer_path(d->tok));
    static const char *const sidecars[] = {"tokenizer_config.json", "special_tokens_map.json"};
    for (size_t i = 0; i < 2 && !st; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", zt_tokenizer_path(d->tok));
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        if (!(st = zt_path_join(side, sizeof side, slash ? dir : ".", sidecars[i])) && zt_path_exists(side))
            st = zt_cache_key_add_file(k, side);
    }
    for (int i = 0; i < d->nadded; i++) zt_cache_key_add_str(k, zt_tokenizer_id_to_piece(d->tok, d->added[i]));
    if (d->tmpl) zt_cache_key_add_str(k, zt_template_source(d->tmpl));
    for (int i = 0; i < paths->n && !st; i++) st = zt_cache_key_add_file(k, paths->items[i]);
    return st;
}

/* text, chat and instruct: through the run's tokenizer and chat template, cached in data.cache_dir */
static zt_status load_formatted(zt_dataset *ds, const zt_recipe *r, const zt_data_tools *d, const zt_strlist *paths,
                                int64_t *skipped)
{
    if (!r->data.cache_dir[0]) return tokenize(r, d, paths, skipped, ds);
    zt_cache_key k;
    int hit;
    build_ctx b = {r, d, paths, skipped};
    zt_status st = cache_key(&k, r, d, paths);
    if (!st) st = zt_cache_get(r->data.cache_dir, &k, zt_tokenizer_vocab_size(d->tok), build_entry, &b, ds, &hit);
    if (!st)
        zt_log_info("%s tokenized data: %lld %s (%s)", hit ? "using the cached" : "cached the",
                    (long long)ds->n_examples / zt_format_group(r->data.format), zt_format_unit(r->data.format),
                    r->data.cache_dir);
    return st;
}

static zt_status tokenize(const zt_recipe *r, const zt_data_tools *d, const zt_strlist *paths, int64_t *skipped,
                          zt_dataset *ds)
{
    zt_format f = {.format = r->data.format,
                   .train_on = r->data.train_on,
                   .max_length = r->data.max_length,
                   .packing = r->data.packing,
                   .split_special = r->data.split_special_tokens,
                   .tok = d->tok,
                   .tmpl = d->tmpl,
                   .ds = ds};
    zt_status st = zt_format_load(&f, paths->items, paths->n, r->data.skip_bad_lines, skipped);
    if (!st && (f.truncated || f.no_targets))
        zt_log_warn("%lld of %lld examples truncated to data.max_length = %d; %lld without a token to train on "
                    "(left out)",
                    (long long)f.truncated, (long long)f.examples, r->data.max_length, (long long)f.no_targets);
    return st;
}

static zt_status load_files(zt_dataset *ds, const zt_recipe *r, const zt_data_tools *d, const zt_strlist *paths,
                            int vocab_size)
{
    int64_t skipped = 0;
    zt_status st;
    if (r->data.format == ZT_DATA_TOKENS)
        st = zt_tokens_load(ds, paths->items, paths->n, vocab_size, r->data.skip_bad_lines, &skipped);
    else st = load_formatted(ds, r, d, paths, &skipped);
    if (st) zt_dataset_free(ds); /* a bad line after good ones leaves the examples before it */
    else if (skipped) zt_log_warn("skipped %lld bad lines (data.skip_bad_lines = true)", (long long)skipped);
    return st;
}

zt_status zt_data_open(const zt_recipe *r, const zt_data_tools *d, int vocab_size, zt_dataset *train, zt_dataset *valid)
{
    *train = (zt_dataset){0};
    *valid = (zt_dataset){0};
    if (r->data.train.n == 0) return zt_fail(ZT_EUSER, "data.train is not set: name one or more JSONL files");
    zt_status st = load_files(train, r, d, &r->data.train, vocab_size);
    if (st) return st;
    if (r->data.valid.n) {
        st = load_files(valid, r, d, &r->data.valid, vocab_size);
    } else if (r->data.valid_split > 0) {
        zt_dataset all = *train;
        *train = (zt_dataset){0}; /* all owns the examples now: freed once, whatever the split returns */
        /* pairs stay whole (an unpaired answer is stored as one) */
        st = zt_dataset_split(&all, r->data.valid_split, (uint64_t)r->train.seed, zt_format_group(r->data.format),
                              train, valid);
        zt_dataset_free(&all);
    }
    if (st) zt_dataset_free(train);
    return st;
}
