/* What training and evaluation both need: a model from a directory, data from files. */
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/data/tokens.h"
#include "train.h"

zt_status zt_model_open(zt_llama *m, const char *dir, const char *dtype_name)
{
    char path[4096];
    zt_llama_config cfg;
    zt_dtype dtype;
    if (!dir || !dir[0]) return zt_fail(ZT_EUSER, "model.path is not set: name a Hugging Face model directory");
    zt_status st = zt_path_join(path, sizeof path, dir, "config.json");
    if (st) return st;
    if (!zt_path_exists(path)) return zt_fail(ZT_EUSER, "model directory '%s' has no config.json", dir);
    if (zt_dtype_parse(dtype_name, &dtype)) return zt_fail(ZT_EUSER, "model.dtype '%s' is not fp32, bf16 or fp16", dtype_name);
    if ((st = zt_llama_config_load(&cfg, path))) return st;
    if ((st = zt_llama_init(m, &cfg, zt_backend_cpu(), dtype))) return st;
    if ((st = zt_llama_load_weights(m, dir))) zt_llama_free(m);
    return st;
}

static zt_status load_files(zt_dataset *ds, const zt_recipe *r, const zt_strlist *paths, int vocab_size)
{
    if (strcmp(r->data.format, "tokens"))
        return zt_fail(ZT_EUSER, "data.format '%s' is not supported yet (only \"tokens\")", r->data.format);
    return zt_tokens_load(ds, paths->items, paths->n, vocab_size);
}

zt_status zt_data_open(const zt_recipe *r, int vocab_size, zt_dataset *train, zt_dataset *valid)
{
    *train = (zt_dataset){0};
    *valid = (zt_dataset){0};
    if (r->data.train.n == 0) return zt_fail(ZT_EUSER, "data.train is not set: name one or more JSONL files");
    zt_status st = load_files(train, r, &r->data.train, vocab_size);
    if (st) return st;
    if (r->data.valid.n) {
        st = load_files(valid, r, &r->data.valid, vocab_size);
    } else if (r->data.valid_split > 0) {
        zt_dataset all = *train;
        st = zt_dataset_split(&all, r->data.valid_split, (uint64_t)r->train.seed, train, valid);
        zt_dataset_free(&all);
    }
    if (st) zt_dataset_free(train);
    return st;
}
