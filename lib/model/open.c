/* Opening a Hugging Face model directory on a device (open.h). */
#include "open.h"

#include <stdio.h>

#include "lib/ckpt/safetensors.h"
#include "lib/core/fileio.h"
#include "lib/hub/hub.h"

zt_status zt_model_open(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device)
{
    return zt_model_open_head(m, dir, dtype, device, 0);
}

static zt_status open_model(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device, int score_head,
                            zt_st_reader **weights)
{
    char path[4096], hub_dir[4096];
    zt_llama_config cfg;
    if (!dir || !dir[0]) return zt_fail(ZT_EUSER, "model.path is not set: name a Hugging Face model directory");
    zt_status st = zt_hub_resolve_model_path(dir, hub_dir, sizeof hub_dir); /* hf://org/name@revision: its snapshot */
    if (!st) st = zt_path_join(path, sizeof path, hub_dir, "config.json");
    dir = hub_dir;
    if (st) return st;
    if (!zt_path_exists(path)) return zt_fail(ZT_EUSER, "model directory '%s' has no config.json", dir);
    zt_backend *be;
    if ((st = zt_llama_config_load(&cfg, path))) return st;
    if (cfg.num_labels && !score_head)
        return zt_fail(ZT_EUSER, "'%s' is a reward or value model (a score head, num_labels = 1), not a causal LM",
                       dir);
    if (score_head && !cfg.num_labels) cfg.num_labels = 1, cfg.tie_word_embeddings = 0; /* a causal LM as backbone */
    if ((st = zt_backend_open(device, &be))) return st;
    if ((st = zt_llama_init(m, &cfg, be, dtype))) return st;
    st = weights ? zt_llama_weights_open(m, dir, weights) : zt_llama_load_weights(m, dir);
    if (st) zt_llama_free(m);
    return st;
}

zt_status zt_model_open_head(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device, int score_head)
{
    return open_model(m, dir, dtype, device, score_head, NULL);
}

zt_status zt_model_open_unloaded(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device, int score_head,
                                 zt_st_reader **weights)
{
    return open_model(m, dir, dtype, device, score_head, weights);
}
