#include "generate.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/arena.h"
#include "lib/core/log.h"
#include "lib/model/open.h"

zt_status zt_generator_open(zt_generator *g, const char *model_dir, zt_chat_template kind, const char *template_path,
                            int max_len)
{
    memset(g, 0, sizeof *g);
    g->max_new_tokens = 128;
    zt_status st = zt_model_open(&g->m, model_dir, ZT_F32, ZT_DEVICE_CPU);
    if (st) return st;
    if ((st = zt_tokenizer_open(&g->tok, model_dir))) goto fail;
    if (zt_tokenizer_vocab_size(g->tok) > g->m.V) {
        st = zt_fail(ZT_EUSER, "'%s': the tokenizer has %d tokens but the model only %d", model_dir,
                     zt_tokenizer_vocab_size(g->tok), g->m.V);
        goto fail;
    }
    if (kind != ZT_TEMPLATE_AUTO) st = zt_template_load(&g->tmpl, kind, template_path, model_dir);
    else if (zt_template_load(&g->tmpl, kind, NULL, model_dir)) g->tmpl = NULL; /* no template: raw prompts only */
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
    if ((st = zt_llama_cache_init(&g->cache, &g->m, max_len, 256))) goto fail;
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
        if (g->cache.len >= g->cache.capacity) break; /* the context is full */
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

zt_status zt_generate_chat(zt_generator *g, const zt_message *msgs, int n, char **out)
{
    if (!g->tmpl) return zt_fail(ZT_EUSER, "the model has no chat template (name one with --chat-template)");
    int32_t bos = zt_tokenizer_bos_id(g->tok), eos = zt_tokenizer_eos_id(g->tok);
    const char *bos_s = bos >= 0 ? zt_tokenizer_id_to_piece(g->tok, bos) : NULL;
    const char *eos_s = eos >= 0 ? zt_tokenizer_id_to_piece(g->tok, eos) : NULL;
    char *text;
    zt_status st = zt_template_render(g->tmpl, msgs, n, 1, bos_s, eos_s, &text);
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
