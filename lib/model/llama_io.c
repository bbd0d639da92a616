/* Loading and saving Llama weights as Hugging Face safetensors + config.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ckpt/safetensors.h"
#include "lib/core/fileio.h"
#include "lib/core/rng.h"
#include "llama.h"
#include "lora.h"

/* Tensors a checkpoint may carry that the model does not need (the vision tower: saves carry it). */
static int ignorable(const zt_llama *m, const char *name)
{
    size_t n = strlen(name), k = strlen("rotary_emb.inv_freq");
    if (n >= k && !strcmp(name + n - k, "rotary_emb.inv_freq")) return 1;
    if (zt_llama_passes_through(&m->cfg, name)) return 1;
    size_t p = strlen(m->cfg.text_prefix);
    return (m->cfg.tie_word_embeddings || m->cfg.num_labels) && !strncmp(name, m->cfg.text_prefix, p) &&
           !strcmp(name + p, "lm_head.weight");
}

/* A causal LM opened as a reward or value model: its LM head is dropped and the score
 * head starts at N(0, 0.02²), as transformers initialises it. */
static void init_score(const zt_llama *m, zt_real *params,
                       const zt_llama_tensor *t) /* params: the flat array's start */
{
    zt_rng rng;
    zt_rng_seed(&rng, 0x5c0e, 0);
    for (int64_t j = 0; j < t->shape[0] * t->shape[1]; j++)
        params[t->offset + j] = (zt_real)(0.02 * zt_rng_normal(&rng));
}

zt_status zt_llama_weights_open(const zt_llama *m, const char *dir, zt_st_reader **out)
{
    return zt_llama_weights_open_with(m, dir, NULL, out);
}

zt_status zt_llama_weights_open_with(const zt_llama *m, const char *dir, int (*also)(const char *name),
                                     zt_st_reader **out)
{
    zt_status st = zt_st_open(out, dir);
    for (int i = 0; !st && i < zt_st_count(*out); i++) {
        const zt_st_tensor *t = zt_st_get(*out, i);
        if (!zt_llama_find_tensor(m, t->name) && !ignorable(m, t->name) && !(also && also(t->name)))
            st = zt_fail(ZT_EUSER, "'%s': unexpected tensor '%s' for a %s model with this config.json", t->file,
                         t->name, m->cfg.model_type);
    }
    if (st && *out) zt_st_close(*out), *out = NULL;
    return st;
}

zt_status zt_llama_weights_read(const zt_llama *m, zt_st_reader *r, size_t off, size_t n, zt_real *dst)
{
    zt_status st = ZT_OK;
    for (int i = 0; i < m->n_tensors && !st; i++) {
        const zt_llama_tensor *mt = &m->tensors[i];
        size_t a = mt->offset, b = a + (size_t)mt->shape[0] * (mt->ndim == 2 ? (size_t)mt->shape[1] : 1);
        size_t lo = a > off ? a : off, hi = b < off + n ? b : off + n;
        if (lo >= hi) continue;
        const zt_st_tensor *t = zt_st_find(r, mt->name);
        if (!t && m->cfg.num_labels && !strcmp(mt->name, "score.weight")) {
            init_score(m, dst - off, mt);
            continue;
        }
        if (!t)
            return zt_fail(ZT_EUSER, "'%s': missing tensor '%s'", zt_st_count(r) ? zt_st_get(r, 0)->file : "model",
                           mt->name);
        zt_st_tensor part = *t; /* a unit may hold part of a tensor (a tile of the LM head) */
        if (lo > a || hi < b) {
            if ((st = zt_st_read_into(t, NULL, ZT_REAL_DTYPE, mt->shape, mt->ndim))) break; /* the shape check alone */
            size_t size = t->nbytes / (b - a);
            part.data = (const char *)t->data + (lo - a) * size, part.nbytes = (hi - lo) * size;
        }
        if (!(st = zt_st_read_into(&part, dst + (lo - off), ZT_REAL_DTYPE, lo > a || hi < b ? NULL : mt->shape,
                                   mt->ndim)))
            zt_st_release(&part); /* a model larger than memory is read a unit at a time */
    }
    return st;
}

zt_status zt_llama_load_weights(zt_llama *m, const char *dir)
{
    zt_st_reader *r;
    zt_status st = zt_llama_weights_open(m, dir, &r);
    if (st) return st;
    zt_real *params = zt_llama_params_map(m);
    if (!params) st = zt_fail(ZT_ENOMEM, "out of memory loading '%s'", dir);
    if (!st) st = zt_llama_weights_read(m, r, 0, m->numel, params);
    zt_st_close(r);
    if (params) zt_llama_params_unmap(m, params, !st);
    return st;
}

zt_status zt_llama_save_config(const zt_llama_config *c, const char *dir, zt_dtype dtype)
{
    char path[4096];
    static const char *torch_names[] = {"float32", "bfloat16", "float16", "float64"};
    zt_status st = zt_path_join(path, sizeof path, dir, "config.json");
    return st ? st : zt_llama_config_save(c, path, torch_names[dtype]);
}

static zt_status copy_bytes(void *ctx, void *dst, size_t offset, size_t n)
{
    const zt_st_tensor *t = ctx;
    memcpy(dst, (const char *)t->data + offset, n);
    return ZT_OK;
}

zt_status zt_llama_add_passed_through(const zt_llama_config *c, zt_st_writer *w, zt_st_reader **src,
                                      zt_lora_carried *merge)
{
    char dir[sizeof c->path];
    *src = NULL;
    if (!c->image_text) return ZT_OK;
    snprintf(dir, sizeof dir, "%s", c->path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    zt_status st = zt_st_open(src, dir);
    for (int i = 0; !st && i < zt_st_count(*src); i++) {
        const zt_st_tensor *t = zt_st_get(*src, i);
        int merged = 0;
        if (!zt_llama_passes_through(c, t->name)) continue;
        if (merge) st = zt_lora_carried_add(merge, w, t, &merged);
        if (!st && !merged && !(st = zt_st_check_finite(t)))
            st = zt_st_writer_add_bytes_fn(w, t->name, t->dtype, t->shape, t->ndim, copy_bytes, (void *)t);
    }
    if (st) return zt_fail_context(st, "carrying the vision tower of '%s'", dir);
    return ZT_OK;
}

zt_status zt_llama_save(const zt_llama *m, const char *dir, zt_dtype dtype, size_t max_shard_bytes)
{
    return zt_llama_save_carrying(m, dir, dtype, max_shard_bytes, NULL);
}

zt_status zt_llama_writer_add(const zt_llama *m, zt_st_writer *w, zt_dtype dtype, const zt_real *params)
{
    zt_status st = ZT_OK;
    for (int i = 0; i < m->n_tensors && !st; i++) {
        const zt_llama_tensor *t = &m->tensors[i];
        st = zt_st_writer_add(w, t->name, dtype, t->shape, t->ndim, params + t->offset, ZT_REAL_DTYPE);
    }
    return st;
}

zt_status zt_llama_save_carrying(const zt_llama *m, const char *dir, zt_dtype dtype, size_t max_shard_bytes,
                                 zt_lora_carried *merge)
{
    zt_status st = zt_mkdir_p(dir);
    if (st) return st;
    zt_st_writer *w = zt_st_writer_new();
    zt_st_reader *src = NULL;
    zt_real *params = zt_llama_params_map(m);
    if (!w || !params) st = zt_fail(ZT_ENOMEM, "out of memory saving '%s'", dir);
    if (!st) st = zt_llama_writer_add(m, w, dtype, params);
    if (!st) st = zt_llama_add_passed_through(&m->cfg, w, &src, merge);
    if (!st) st = zt_st_writer_finish(w, dir, max_shard_bytes);
    if (src) zt_st_close(src);
    zt_st_writer_free(w);
    if (params) zt_llama_params_unmap((zt_llama *)m, params, 0);
    return st ? st : zt_llama_save_config(&m->cfg, dir, dtype);
}

typedef struct read_ctx {
    zt_llama_read_fn read;
    void *ctx;
    size_t offset; /* the tensor's first element in the flat array */
} read_ctx;

static zt_status fill_tensor(void *ctx, float *dst, size_t offset, size_t n)
{
    const read_ctx *c = ctx;
    return c->read(c->ctx, dst, c->offset + offset, n);
}

zt_status zt_llama_save_with(const zt_llama *m, const char *dir, zt_dtype dtype, size_t max_shard_bytes,
                             zt_llama_read_fn read, void *ctx)
{
    zt_status st = zt_mkdir_p(dir);
    if (st) return st;
    zt_st_writer *w = zt_st_writer_new();
    zt_st_reader *src = NULL;
    read_ctx *c = calloc((size_t)m->n_tensors, sizeof *c);
    if (!w || !c) st = zt_fail(ZT_ENOMEM, "out of memory saving '%s'", dir);
    for (int i = 0; i < m->n_tensors && !st; i++) {
        const zt_llama_tensor *t = &m->tensors[i];
        c[i] = (read_ctx){read, ctx, t->offset};
        st = zt_st_writer_add_fn(w, t->name, dtype, t->shape, t->ndim, fill_tensor, &c[i]);
    }
    if (!st) st = zt_llama_add_passed_through(&m->cfg, w, &src, NULL);
    if (!st) st = zt_st_writer_finish(w, dir, max_shard_bytes);
    if (src) zt_st_close(src);
    zt_st_writer_free(w);
    free(c);
    return st ? st : zt_llama_save_config(&m->cfg, dir, dtype);
}
