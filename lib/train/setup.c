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

zt_status zt_data_open(zt_dataset *ds, const zt_recipe *r, const zt_strlist *paths, int vocab_size)
{
    if (strcmp(r->data.format, "tokens"))
        return zt_fail(ZT_EUSER, "data.format '%s' is not supported yet (only \"tokens\")", r->data.format);
    if (paths->n == 0) return zt_fail(ZT_EUSER, "data.train is empty");
    return zt_tokens_load(ds, paths->items, paths->n, vocab_size);
}
