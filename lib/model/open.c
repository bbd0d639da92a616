/* Opening a Hugging Face model directory on a device (open.h). */
#include "open.h"

#include <stdio.h>

#include "lib/ckpt/safetensors.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/hub/hub.h"
#include "qbase.h"
#include "qbase_bnb.h"
#include "qbase_decode.h"
#include "qbase_read.h"

zt_status zt_model_open(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device)
{
    return zt_model_open_head(m, dir, dtype, device, 0);
}

/* How open_model reads the weights: all of them (weights and quantized NULL), or none, leaving
 * *weights open (a bitsandbytes checkpoint: *decoded), or *quantized: a base quantized as kind says. */
typedef struct open_how {
    zt_st_reader **weights;
    zt_qbase_decoder **decoded;
    zt_qbase_reader **quantized;
    zt_qbase_kind kind;
    int double_quant;
} open_how;

/* A bitsandbytes NF4 checkpoint as an unquantized model: each linear weight decoded into m (what a
 * QLoRA run's base computes with), or with `streamed` the decoder left to read it unit by unit. */
static zt_status open_decoded(zt_llama *m, const zt_llama_config *cfg, zt_backend *be, zt_dtype dtype, const char *dir,
                              int double_quant, zt_qbase_decoder **streamed)
{
    zt_qbase_decoder *d = NULL;
    zt_status st = zt_llama_init(m, cfg, be, dtype);
    if (st) return st;
    m->decoded = 1;
    if ((st = zt_qbase_decoder_open(&d, m, dir, double_quant))) {
        zt_llama_free(m);
        return st;
    }
    if (streamed) {
        *streamed = d;
        return ZT_OK;
    }
    zt_real *p = zt_llama_params_map(m);
    st = p ? zt_qbase_decoder_read(d, 0, m->numel, p) : zt_fail(ZT_ENOMEM, "out of memory decoding '%s'", dir);
    if (p) zt_llama_params_unmap(m, p, !st);
    zt_qbase_decoder_close(d);
    if (st) zt_llama_free(m);
    else zt_log_info("'%s': bitsandbytes NF4 weights decoded to %s in memory", dir, zt_dtype_names[dtype]);
    return st;
}

static zt_status open_model(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device, int score_head,
                            open_how how)
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
    int nf4, dq;
    if ((st = zt_llama_config_load(&cfg, path)) || (st = zt_qbase_bnb_config(path, &nf4, &dq))) return st;
    if (cfg.num_labels && !score_head)
        return zt_fail(ZT_EUSER, "'%s' is a reward or value model (a score head, num_labels = 1), not a causal LM",
                       dir);
    if (score_head && cfg.image_text) /* transformers has no such class for it */
        return zt_fail(ZT_EUSER,
                       "'%s': a reward or value model on an image-text checkpoint is not supported (use its language "
                       "model alone)",
                       dir);
    if (score_head) zt_model_score_config(&cfg);
    if ((st = zt_backend_open(device, &be))) return st;
    if (how.quantized) {
        if ((st = zt_qbase_init(m, &cfg, be, dtype, how.kind, how.double_quant))) return st;
        st = zt_qbase_reader_open(m, dir, how.quantized);
    } else if (nf4) {
        if (how.weights) *how.weights = NULL;
        return open_decoded(m, &cfg, be, dtype, dir, dq, how.decoded);
    } else {
        if ((st = zt_llama_init(m, &cfg, be, dtype))) return st;
        st = how.weights ? zt_llama_weights_open(m, dir, how.weights) : zt_llama_load_weights(m, dir);
    }
    if (st) zt_llama_free(m);
    return st;
}

void zt_model_score_config(zt_llama_config *c)
{
    if (!c->num_labels) c->num_labels = 1, c->tie_word_embeddings = 0; /* a causal LM as backbone */
}

zt_status zt_model_open_head(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device, int score_head)
{
    return open_model(m, dir, dtype, device, score_head, (open_how){0});
}

zt_status zt_model_open_unloaded(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device, int score_head,
                                 zt_st_reader **weights, zt_qbase_decoder **decoded)
{
    *decoded = NULL;
    return open_model(m, dir, dtype, device, score_head, (open_how){.weights = weights, .decoded = decoded});
}

zt_status zt_model_open_quantized(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device, int score_head,
                                  zt_qbase_kind kind, int double_quant, zt_qbase_reader **weights)
{
    return open_model(m, dir, dtype, device, score_head,
                      (open_how){.quantized = weights, .kind = kind, .double_quant = double_quant});
}
