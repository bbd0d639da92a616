#include "vocab.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/train/run/rundir.h"

/* the special tokens each named template writes as literal text */
static const struct {
    zt_chat_template kind;
    const char *tokens[4];
} template_tokens[] = {
    {ZT_TEMPLATE_CHATML, {"<|im_start|>", "<|im_end|>"}},
    {ZT_TEMPLATE_LLAMA3, {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}},
};

zt_status zt_data_tools_open(zt_data_tools *d, const zt_recipe *r)
{
    memset(d, 0, sizeof *d);
    zt_data_format f = r->data.format;
    if (f == ZT_DATA_TOKENS) return ZT_OK;
    zt_status st = zt_tokenizer_open(&d->tok, r->tokenizer.path);
    int needs = f == ZT_DATA_CHAT || f == ZT_DATA_INSTRUCT,
        may = f == ZT_DATA_PREFERENCE || f == ZT_DATA_UNPAIRED || f == ZT_DATA_PROMPT || f == ZT_DATA_COMPLETION;
    if (!st && (needs || may)) {
        st = zt_template_load(&d->tmpl, r->tokenizer.chat_template, r->tokenizer.chat_template_path, r->tokenizer.path);
        /* preference, unpaired, prompt and completion data need a template only for message lists: else they
           stay text */
        if (st && may && r->tokenizer.chat_template == ZT_TEMPLATE_AUTO) st = ZT_OK, d->tmpl = NULL;
        if (!st && d->tmpl) st = zt_template_set_kwargs(d->tmpl, r->tokenizer.chat_template_kwargs);
    }
    if (st) zt_data_tools_close(d);
    return st;
}

void zt_data_tools_close(zt_data_tools *d)
{
    zt_template_free(d->tmpl);
    zt_tokenizer_free(d->tok);
    memset(d, 0, sizeof *d);
}

zt_status zt_vocab_prepare_tokens(zt_data_tools *d)
{
    zt_status st = ZT_OK;
    for (size_t i = 0; d->tok && d->tmpl && i < sizeof template_tokens / sizeof template_tokens[0]; i++) {
        const char *named = zt_template_builtin(template_tokens[i].kind);
        if (!named || strcmp(zt_template_source(d->tmpl), named)) continue;
        for (int k = 0; k < 4 && template_tokens[i].tokens[k] && !st; k++) {
            const char *piece = template_tokens[i].tokens[k];
            if (zt_tokenizer_piece_to_id(d->tok, piece) >= 0) continue;
            int32_t id;
            if ((st = zt_tokenizer_add_special(d->tok, piece, &id))) break;
            zt_log_info("added the special token %s (id %d) that the %s template needs", piece, id,
                        zt_chat_template_names[template_tokens[i].kind]);
            if (d->nadded < 8) d->added[d->nadded++] = id;
        }
    }
    return st;
}

zt_status zt_vocab_prepare(zt_data_tools *d, zt_llama *m)
{
    if (!d->tok) return ZT_OK;
    zt_status st = zt_vocab_prepare_tokens(d);
    int V = zt_tokenizer_vocab_size(d->tok);
    if (!st && d->nadded && V > m->V) {
        zt_log_info("growing the vocabulary from %d to %d (embedding and LM head)", m->V, V);
        st = zt_llama_resize_vocab(m, V);
    }
    if (!st && V > m->V)
        st = zt_fail(ZT_EUSER, "tokenizer '%s' has %d tokens but the model's vocab_size is %d",
                     zt_tokenizer_path(d->tok), V, m->V);
    return st;
}

static cJSON *read_json(const char *path)
{
    char *text;
    size_t len;
    if (!zt_path_exists(path) || zt_read_file(path, &text, &len)) return NULL;
    cJSON *o = zt_json_parse(text, len); /* numbers written back as they were */
    free(text);
    return o;
}

static cJSON *added_token(const char *piece, int id)
{
    cJSON *t = cJSON_CreateObject();
    if (id >= 0) cJSON_AddNumberToObject(t, "id", id);
    cJSON_AddStringToObject(t, "content", piece);
    cJSON_AddBoolToObject(t, "single_word", 0);
    cJSON_AddBoolToObject(t, "lstrip", 0);
    cJSON_AddBoolToObject(t, "rstrip", 0);
    cJSON_AddBoolToObject(t, "normalized", 0);
    cJSON_AddBoolToObject(t, "special", 1);
    return t;
}

zt_status zt_vocab_save(const zt_data_tools *d, const char *tok_dir, const char *out_dir)
{
    if (!d->tok) return ZT_OK;
    char src[4096], dst[4096];
    zt_status st = ZT_OK;
    /* tokenizer_config.json: the chat template used and the added tokens */
    if ((st = zt_path_join(src, sizeof src, tok_dir, "tokenizer_config.json"))) return st;
    cJSON *cfg = read_json(src);
    if (!cJSON_IsObject(cfg)) cJSON_Delete(cfg), cfg = cJSON_CreateObject();
    if (d->tmpl) {
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, "chat_template");
        cJSON_AddStringToObject(cfg, "chat_template", zt_template_source(d->tmpl));
    }
    if (d->nadded) {
        cJSON *dec = cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder");
        if (!cJSON_IsObject(dec))
            cJSON_DeleteItemFromObjectCaseSensitive(cfg, "added_tokens_decoder"),
                dec = cJSON_AddObjectToObject(cfg, "added_tokens_decoder");
        for (int i = 0; i < d->nadded; i++) {
            char key[16];
            snprintf(key, sizeof key, "%d", d->added[i]);
            cJSON_AddItemToObject(dec, key, added_token(zt_tokenizer_id_to_piece(d->tok, d->added[i]), -1));
        }
    }
    if (!(st = zt_path_join(dst, sizeof dst, out_dir, "tokenizer_config.json"))) st = zt_json_write(dst, cfg);
    cJSON_Delete(cfg);
    /* tokenizer.json: the added tokens in its added_tokens list */
    if (st || !d->nadded || strcmp(zt_tokenizer_kind(d->tok), "bpe")) return st;
    cJSON *tj = read_json(zt_tokenizer_path(d->tok));
    cJSON *list = cJSON_GetObjectItemCaseSensitive(tj, "added_tokens");
    if (!cJSON_IsArray(list)) list = cJSON_AddArrayToObject(tj, "added_tokens");
    for (int i = 0; list && i < d->nadded; i++)
        cJSON_AddItemToArray(list, added_token(zt_tokenizer_id_to_piece(d->tok, d->added[i]), d->added[i]));
    if (!list) st = zt_fail(ZT_EUSER, "'%s' is not a tokenizer.json object", zt_tokenizer_path(d->tok));
    else if (!(st = zt_path_join(dst, sizeof dst, out_dir, "tokenizer.json"))) st = zt_json_write(dst, tj);
    cJSON_Delete(tj);
    return st;
}
