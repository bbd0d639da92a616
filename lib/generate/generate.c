#include "generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/arena.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/model/open.h"

/* The base and the adapter o names: an adapter directory given as the model runs on its
 * base_model_name_or_path. */
static zt_status resolve_model(const zt_generator_options *o, char *base, size_t cap, const char **adapter)
{
    *adapter = o->adapter;
    if (!zt_lora_is_adapter_dir(o->model)) {
        if (snprintf(base, cap, "%s", o->model) >= (int)cap) return zt_fail(ZT_EUSER, "'%s': path too long", o->model);
        return ZT_OK;
    }
    if (o->adapter)
        return zt_fail(ZT_EUSER, "'%s' is a PEFT adapter directory, not a base model for the adapter '%s'", o->model,
                       o->adapter);
    *adapter = o->model;
    return zt_lora_read_base(o->model, base, cap);
}

/* The directory of the tokenizer and the chat template: the adapter's when it has a tokenizer */
static const char *tokenizer_dir(const char *model, const char *adapter)
{
    char json[4096], spm[4096];
    if (!adapter || zt_path_join(json, sizeof json, adapter, "tokenizer.json") ||
        zt_path_join(spm, sizeof spm, adapter, "tokenizer.model"))
        return model;
    return zt_path_exists(json) || zt_path_exists(spm) ? adapter : model;
}

/* The adapter on the model, ready for the decoder (its scratch for the cache's chunks) */
static zt_status attach(zt_generator *g, const zt_generator_options *o, const char *adapter, int chunk)
{
    zt_status st = zt_lora_attach_dir(&g->m, adapter, o->quantize_base, o->double_quant);
    if (!st) st = zt_lora_alloc_scratch(&g->m, (size_t)chunk);
    return st ? st : zt_lora_prepare_decode(&g->m);
}

zt_status zt_generator_open(zt_generator *g, const zt_generator_options *o)
{
    enum { CHUNK = 256 }; /* tokens per decoder call at most */
    char model[4096];
    const char *adapter;
    memset(g, 0, sizeof *g);
    g->max_new_tokens = 128;
    zt_status st = resolve_model(o, model, sizeof model, &adapter);
    if (st) return st;
    const char *tok_dir = tokenizer_dir(model, adapter);
    if ((st = zt_model_open(&g->m, model, ZT_F32, o->device)))
        return adapter == o->model ? zt_fail_context(st, "the base_model_name_or_path of '%s'", adapter) : st;
    if (adapter && (st = attach(g, o, adapter, CHUNK))) goto fail;
    if ((st = zt_tokenizer_open(&g->tok, tok_dir))) goto fail;
    if (zt_tokenizer_vocab_size(g->tok) > g->m.V) {
        st = zt_fail(ZT_EUSER, "'%s': the tokenizer has %d tokens but the model only %d", tok_dir,
                     zt_tokenizer_vocab_size(g->tok), g->m.V);
        goto fail;
    }
    zt_chat_template kind = o->chat_template;
    if (kind != ZT_TEMPLATE_AUTO) st = zt_template_load(&g->tmpl, kind, o->template_path, tok_dir);
    else if (zt_template_load(&g->tmpl, kind, NULL, tok_dir)) g->tmpl = NULL; /* no template: raw prompts only */
    if (!st && o->template_kwargs)
        st = g->tmpl ? zt_template_set_kwargs(g->tmpl, o->template_kwargs)
                     : zt_fail(ZT_EUSER, "chat template kwargs, but '%s' has no chat template", tok_dir);
    if (st) goto fail;
    /* the turn's end as training taught it, and config.json's EOS */
    if ((st = zt_format_end_ids(g->tok, g->tmpl, g->stop_ids))) goto fail;
    g->stop_ids[ZT_END_IDS] = g->m.cfg.eos_token_id;
    g->logits = zt_calloc_aligned((size_t)g->m.V * sizeof(zt_real));
    g->scratch = zt_calloc_aligned(zt_sample_scratch_bytes(g->m.V));
    if (!g->logits || !g->scratch) {
        st = zt_fail(ZT_ENOMEM, "out of memory");
        goto fail;
    }
    if ((st = zt_llama_cache_init(&g->cache, &g->m, o->max_len, CHUNK, 1))) goto fail;
    return ZT_OK;
fail:
    zt_generator_close(g);
    return st;
}

void zt_generator_close(zt_generator *g)
{
    if (g->m.be) zt_llama_cache_free(&g->cache, &g->m);
    zt_free(g->logits);
    zt_free(g->scratch);
    zt_template_free(g->tmpl);
    zt_tokenizer_free(g->tok);
    zt_llama_free(&g->m);
    memset(g, 0, sizeof *g);
}

static int is_stop_id(const zt_generator *g, int32_t id)
{
    for (int i = 0; i <= ZT_END_IDS; i++)
        if (g->stop_ids[i] >= 0 && g->stop_ids[i] == id) return 1;
    return 0;
}

/* cuts text at the first stop string; 1 when one was found */
static int cut_at_stop(const zt_generator *g, char *text)
{
    for (int i = 0; i < g->nstop; i++) {
        char *p = g->stop[i][0] ? strstr(text, g->stop[i]) : NULL;
        if (p) {
            *p = 0;
            return 1;
        }
    }
    return 0;
}

zt_status zt_generate_ids(zt_generator *g, const int32_t *ids, size_t n, char **out)
{
    *out = NULL;
    if (n == 0) return zt_fail(ZT_EUSER, "the prompt is empty");
    int32_t *gen = malloc(sizeof(int32_t) * ((size_t)g->max_new_tokens + 1));
    if (!gen) return zt_fail(ZT_ENOMEM, "out of memory");
    zt_llama_cache_reset(&g->cache);
    double t0 = zt_now_s();
    zt_status st = zt_llama_decode(&g->m, &g->cache, ids, (int)n, g->logits);
    size_t k = 0;
    char *text = NULL;
    while (!st && k < (size_t)g->max_new_tokens) {
        int32_t next = zt_sample(&g->sampler, g->logits, zt_tokenizer_vocab_size(g->tok), g->scratch);
        g->generated++;
        if (is_stop_id(g, next)) break;
        gen[k++] = next;
        free(text);
        text = NULL;
        if ((st = zt_tokenizer_decode(g->tok, gen, k, 1, &text))) break;
        if (cut_at_stop(g, text)) break;
        if (g->cache.lens[0] >= g->cache.capacity) break; /* the context is full */
        st = zt_llama_decode(&g->m, &g->cache, &next, 1, g->logits);
    }
    free(gen);
    g->seconds += zt_now_s() - t0;
    if (!st && !text) text = calloc(1, 1);
    if (st || !text) {
        free(text);
        return st ? st : zt_fail(ZT_ENOMEM, "out of memory");
    }
    *out = text;
    return ZT_OK;
}

zt_status zt_generate_text(zt_generator *g, const char *prompt, char **out)
{
    int32_t *ids;
    size_t n;
    zt_status st = zt_tokenizer_encode(g->tok, prompt, strlen(prompt), 0, &ids, &n);
    if (st) return st;
    /* BOS, as the tokenizer puts it before a text (not what it puts after: the prompt goes on) */
    const int32_t *before;
    size_t k = zt_tokenizer_template(g->tok, 0, &before);
    if (k) {
        int32_t *with = malloc(sizeof(int32_t) * (n + k));
        if (!with) {
            free(ids);
            return zt_fail(ZT_ENOMEM, "out of memory");
        }
        memcpy(with, before, k * sizeof(int32_t));
        memcpy(with + k, ids, n * sizeof(int32_t));
        free(ids);
        ids = with, n += k;
    }
    st = zt_generate_ids(g, ids, n, out);
    free(ids);
    return st;
}

zt_status zt_generate_chat(zt_generator *g, const zt_message *msgs, int n, const cJSON *row, char **out)
{
    if (!g->tmpl) return zt_fail(ZT_EUSER, "the model has no chat template (name one with --chat-template)");
    zt_template_vars v;
    char *text;
    zt_status st = zt_format_vars(g->tok, row, &v);
    if (!st) st = zt_template_render(g->tmpl, msgs, n, 1, &v, &text);
    if (st) return st;
    int32_t *ids;
    size_t k;
    st = zt_tokenizer_encode(g->tok, text, strlen(text), 1, &ids, &k);
    free(text);
    if (st) return st;
    st = zt_generate_ids(g, ids, k, out);
    free(ids);
    return st;
}
