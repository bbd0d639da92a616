/* A PEFT adapter directory on a model (lora.h): what zt eval, zt generate and zt export --merge
 * run base + adapter with. */
#include <stdint.h>

#include "lib/ckpt/safetensors.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lora.h"

int zt_lora_is_adapter_dir(const char *dir)
{
    char path[4096];
    return dir && !zt_path_join(path, sizeof path, dir, "adapter_config.json") && zt_path_exists(path);
}

zt_status zt_lora_fit_vocab(zt_llama *m, const char *dir)
{
    static const char *const copies[] = {"model.embed_tokens.weight", "lm_head.weight"};
    char path[4096], name[256];
    zt_st_reader *rd;
    zt_lora_config c;
    zt_status st = zt_lora_read_config(dir, &c);
    if (!st) st = zt_path_join(path, sizeof path, dir, "adapter_model.safetensors");
    if (!st) st = zt_st_open(&rd, path);
    if (st) return st;
    int64_t rows = m->V;
    for (int i = 0; i < c.n_tokens; i++) /* trainable tokens' new rows */
        if (c.tokens[i] >= rows && c.tokens[i] < ZT_LORA_MAX_NEW_ROWS + (int64_t)m->V) rows = c.tokens[i] + 1;
    for (int i = 0; i < 2; i++) {
        snprintf(name, sizeof name, "%s%s", zt_lora_peft_prefix(&m->cfg), copies[i]);
        const zt_st_tensor *t = zt_st_find(rd, name);
        if (t && t->ndim == 2 && t->shape[0] > rows && t->shape[0] <= INT32_MAX) rows = t->shape[0];
    }
    zt_st_close(rd);
    if (rows == m->V) return ZT_OK; /* other shapes: zt_lora_load names them */
    zt_log_info("'%s': the vocabulary grown from %d to %lld tokens, as its trained embedding and LM head", dir, m->V,
                (long long)rows);
    return zt_llama_resize_vocab(m, (int)rows);
}

zt_status zt_lora_attach_dir(zt_llama *m, const char *dir, zt_qbase_kind kind, int double_quant)
{
    zt_lora_config c;
    zt_qbase_kind noted;
    int dq;
    if (!zt_lora_is_adapter_dir(dir))
        return zt_fail(ZT_EUSER, "'%s' is not a PEFT adapter directory (it has no adapter_config.json)", dir);
    zt_status st = zt_lora_read_config(dir, &c);
    if (!st) st = zt_qbase_note_read(dir, &noted, &dq);
    if (!st && noted != ZT_QBASE_NONE) kind = noted, double_quant = dq;
    if (!st && (c.save || c.n_tokens)) st = zt_lora_fit_vocab(m, dir);
    /* the base's weights as the quantized base computes with them (a decoded checkpoint: already) */
    if (!st && kind != ZT_QBASE_NONE && !m->decoded) st = zt_qbase_round_trip(m, kind, double_quant);
    if (!st) st = zt_lora_attach(m, &c);
    return st ? st : zt_lora_load(m, dir);
}

/* Whether c's trainable tokens hold every row from V on */
static int tokens_hold(const zt_lora_config *c, int V, int V_now)
{
    int held = 0;
    for (int i = 0; i < c->n_tokens; i++) held += c->tokens[i] >= V && c->tokens[i] < V_now;
    return held == V_now - V; /* the tokens are distinct (zt_lora_attach checks) */
}

zt_status zt_lora_check_vocab(const zt_llama *m, const zt_lora_config *c, int V)
{
    unsigned need = ZT_LORA_SAVE_EMBED | (m->cfg.num_labels ? 0 : ZT_LORA_SAVE_HEAD);
    if ((c->save & need) == need) return ZT_OK;
    /* the new rows as trainable tokens: the embedding's, and a tied LM head's with them */
    int head = m->cfg.num_labels || m->cfg.tie_word_embeddings || (c->save & ZT_LORA_SAVE_HEAD);
    if (tokens_hold(c, V, m->V) && head) return ZT_OK;
    return zt_fail(ZT_EUSER,
                   "the chat template's tokens are not in the vocabulary (%d tokens, %d needed): LoRA freezes the "
                   "embedding%s unless modules_to_save (lora.modules_to_save) holds %s, whose new rows then train%s",
                   V, m->V, need & ZT_LORA_SAVE_HEAD ? " and the LM head" : "",
                   need & ZT_LORA_SAVE_HEAD ? "embed_tokens and lm_head" : "embed_tokens",
                   m->cfg.tie_word_embeddings || m->cfg.num_labels
                       ? ", or lora.trainable_token_indices holds the new ids"
                   : need & ZT_LORA_SAVE_HEAD
                       ? ", or lora.trainable_token_indices holds the new ids and modules_to_save lm_head"
                       : "");
}
