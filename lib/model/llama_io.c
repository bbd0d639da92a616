/* Loading and saving Llama weights as Hugging Face safetensors + config.json. */
#include <stdio.h>
#include <string.h>

#include "lib/ckpt/safetensors.h"
#include "lib/core/fileio.h"
#include "lib/core/rng.h"
#include "llama.h"

/* Tensors a checkpoint may carry that the model does not need. */
static int ignorable(const zt_llama *m, const char *name)
{
    size_t n = strlen(name), k = strlen("rotary_emb.inv_freq");
    if (n >= k && !strcmp(name + n - k, "rotary_emb.inv_freq")) return 1;
    return (m->cfg.tie_word_embeddings || m->cfg.num_labels) && !strcmp(name, "lm_head.weight");
}

/* A causal LM opened as a reward or value model: its LM head is dropped and the score
 * head starts at N(0, 0.02²), as transformers initialises it. */
static void init_score(const zt_llama *m, zt_real *params, const zt_llama_tensor *t)
{
    zt_rng rng;
    zt_rng_seed(&rng, 0x5c0e, 0);
    for (int64_t j = 0; j < t->shape[0] * t->shape[1]; j++) params[t->offset + j] = (zt_real)(0.02 * zt_rng_normal(&rng));
}

zt_status zt_llama_load_weights(zt_llama *m, const char *dir)
{
    zt_st_reader *r;
    zt_status st = zt_st_open(&r, dir);
    if (st) return st;
    zt_real *params = zt_llama_params_map(m);
    if (!params) st = zt_fail(ZT_ENOMEM, "out of memory loading '%s'", dir);
    for (int i = 0; i < zt_st_count(r) && !st; i++) {
        const zt_st_tensor *t = zt_st_get(r, i);
        if (!zt_llama_find_tensor(m, t->name) && !ignorable(m, t->name))
            st = zt_fail(ZT_EUSER, "'%s': unexpected tensor '%s' for a %s model with this config.json", t->file,
                         t->name, m->cfg.model_type);
    }
    for (int i = 0; i < m->n_tensors && !st; i++) {
        const zt_llama_tensor *mt = &m->tensors[i];
        const zt_st_tensor *t = zt_st_find(r, mt->name);
        if (!t && m->cfg.num_labels && !strcmp(mt->name, "score.weight")) init_score(m, params, mt);
        else if (!t) st = zt_fail(ZT_EUSER, "'%s': missing tensor '%s'", dir, mt->name);
        else st = zt_st_read_into(t, params + mt->offset, ZT_REAL_DTYPE, mt->shape, mt->ndim);
    }
    zt_st_close(r);
    if (params) zt_llama_params_unmap(m, params, !st);
    return st;
}

zt_status zt_llama_save(const zt_llama *m, const char *dir, zt_dtype dtype, size_t max_shard_bytes)
{
    zt_status st = zt_mkdir_p(dir);
    if (st) return st;
    zt_st_writer *w = zt_st_writer_new();
    zt_real *params = zt_llama_params_map(m);
    if (!w || !params) st = zt_fail(ZT_ENOMEM, "out of memory saving '%s'", dir);
    for (int i = 0; i < m->n_tensors && !st; i++) {
        const zt_llama_tensor *t = &m->tensors[i];
        st = zt_st_writer_add(w, t->name, dtype, t->shape, t->ndim, params + t->offset, ZT_REAL_DTYPE);
    }
    if (!st) st = zt_st_writer_finish(w, dir, max_shard_bytes);
    zt_st_writer_free(w);
    if (params) zt_llama_params_unmap((zt_llama *)m, params, 0);
    char path[4096];
    if (!st) st = zt_path_join(path, sizeof path, dir, "config.json");
    static const char *torch_names[] = {"float32", "bfloat16", "float16", "float64"};
    if (!st) st = zt_llama_config_save(&m->cfg, path, torch_names[dtype]);
    return st;
}
