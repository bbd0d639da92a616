/* A tokenizer.json as llama.cpp's tokenizer models: byte-level BPE as "gpt2" (the tokens by id with
 * their types, the merges, the pre-tokenizer by the name llama.cpp gives its regex), and BPE over
 * characters with byte fallback (SentencePiece's, as Mistral, Llama 2 and Phi-3 ship it) as
 * "llama" (the tokens with scores that make llama.cpp merge in the order of the merges); for both
 * the special ids, whether BOS and EOS are added, and the chat template. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_model.h"
#include "lib/core/fileio.h"
#include "lib/core/json.h"

/* llama.cpp's token types */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER_DEFINED = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };

/* The split regexes of Llama 3 and of Qwen2/Qwen3 (one digit a piece), as their tokenizer.json has them. */
#define WORDS "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define REST "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
static const char *const llama3_regex = WORDS "\\p{N}{1,3}" REST, *const qwen2_regex = WORDS "\\p{N}" REST;

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static int is_type(const cJSON *o, const char *type)
{
    const cJSON *t = get(o, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

static int byte_level(const cJSON *o, int use_regex)
{
    return is_type(o, "ByteLevel") && cJSON_IsTrue(get(o, "use_regex")) == use_regex &&
           !cJSON_IsTrue(get(o, "add_prefix_space"));
}

/* llama.cpp's name for the pre-tokenizer p (NULL: none it has) */
static const char *pre_name(const cJSON *p)
{
    if (byte_level(p, 1)) return "gpt-2";
    const cJSON *s = get(p, "pretokenizers");
    if (!is_type(p, "Sequence") || cJSON_GetArraySize(s) != 2) return NULL;
    const cJSON *a = cJSON_GetArrayItem(s, 0), *b = cJSON_GetArrayItem(s, 1);
    if (is_type(a, "Digits") && cJSON_IsTrue(get(a, "individual_digits")) && byte_level(b, 1)) return "smollm";
    const cJSON *re = get(get(a, "pattern"), "Regex");
    if (!is_type(a, "Split") || !cJSON_IsString(re) || !byte_level(b, 0)) return NULL;
    if (!strcmp(re->valuestring, llama3_regex)) return "llama-bpe";
    if (!strcmp(re->valuestring, qwen2_regex)) return "qwen2";
    return NULL;
}

/* A SentencePiece-style tokenizer's space handling: *prefix whether a text gets "▁" in front
 * (Metaspace with its prepend scheme, or a Prepend normalizer); 0 for one llama.cpp's "llama"
 * tokenizer does not do (spaces not all made "▁", Metaspace splitting at them). */
static int spm_spaces(const cJSON *tok, int *prefix)
{
    const cJSON *pre = get(tok, "pre_tokenizer"), *norm = get(tok, "normalizer"), *scheme = get(pre, "prepend_scheme");
    if (is_type(pre, "Metaspace")) {
        *prefix = !cJSON_IsString(scheme) || strcmp(scheme->valuestring, "never");
        return cJSON_IsNull(norm) || !norm ? !cJSON_IsTrue(get(pre, "split")) : 0;
    }
    if (pre && !cJSON_IsNull(pre)) return 0;
    const cJSON *list = is_type(norm, "Sequence") ? get(norm, "normalizers") : NULL, *n;
    int replace = 0;
    *prefix = 0;
    cJSON_ArrayForEach(n, list)
    {
        const cJSON *from = get(get(n, "pattern"), "String"), *to = get(n, "content"), *p = get(n, "prepend");
        if (is_type(n, "Prepend") && cJSON_IsString(p) && !strcmp(p->valuestring, "\xe2\x96\x81" /* ▁ */)) *prefix = 1;
        else if (is_type(n, "Replace") && cJSON_IsString(from) && cJSON_IsString(to) &&
                 !strcmp(from->valuestring, " ") && !strcmp(to->valuestring, "\xe2\x96\x81" /* ▁ */))
            replace = 1;
        else return 0;
    }
    return replace;
}

/* An added token that marks structure (ChatML's <|im_start|>, ...) though not flagged special. */
static int looks_control(const char *s)
{
    size_t n = strlen(s);
    return n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>");
}

/* A merge as "left right"; pairs' spaces written as U+0120, as byte-level BPE spells a space. */
static char *merge_text(const cJSON *m)
{
    if (cJSON_IsString(m)) return strdup(m->valuestring);
    const cJSON *a = cJSON_GetArrayItem(m, 0), *b = cJSON_GetArrayItem(m, 1);
    if (cJSON_GetArraySize(m) != 2 || !cJSON_IsString(a) || !cJSON_IsString(b)) return NULL;
    size_t n = strlen(a->valuestring) + strlen(b->valuestring);
    char *s = malloc(2 * n + 2), *o = s;
    for (int part = 0; s && part < 2; part++) {
        for (const char *c = (part ? b : a)->valuestring; *c; c++)
            if (*c == ' ') *o++ = (char)0xc4, *o++ = (char)0xa0;
            else *o++ = *c;
        *o++ = part ? '\0' : ' ';
    }
    return s;
}

/* The id of the added token whose content is tokenizer_config.json's entry (a string or
 * {"content": ...}), or -1. */
static int special_id(const cJSON *tc, const char *key, const cJSON *added)
{
    const cJSON *e = get(tc, key);
    if (cJSON_IsObject(e)) e = get(e, "content");
    if (!cJSON_IsString(e)) return -1;
    const cJSON *a;
    cJSON_ArrayForEach(a, added)
    {
        const cJSON *c = get(a, "content"), *id = get(a, "id");
        if (cJSON_IsString(c) && cJSON_IsNumber(id) && !strcmp(c->valuestring, e->valuestring)) return id->valueint;
    }
    return -1;
}

/* Whether the post-processor puts BOS before a text (*bos) and EOS after it (*eos): -1 when it
 * does not say. */
static void added_specials(const cJSON *post, const char *bos, const char *eos, int *add_bos, int *add_eos)
{
    const cJSON *list = get(post, "processors"), *p;
    cJSON_ArrayForEach(p, list) { added_specials(p, bos, eos, add_bos, add_eos); }
    if (is_type(post, "ByteLevel")) {
        if (*add_bos < 0) *add_bos = 0;
        if (*add_eos < 0) *add_eos = 0;
    }
    const cJSON *single = get(post, "single");
    if (!is_type(post, "TemplateProcessing") || cJSON_GetArraySize(single) < 2) return;
    const cJSON *first = get(get(cJSON_GetArrayItem(single, 0), "SpecialToken"), "id"),
                *last = get(get(cJSON_GetArrayItem(single, cJSON_GetArraySize(single) - 1), "SpecialToken"), "id");
    if (cJSON_IsString(first)) *add_bos = bos && !strcmp(first->valuestring, bos);
    if (cJSON_IsString(last)) *add_eos = eos && !strcmp(last->valuestring, eos);
}

static const char *token_text(const cJSON *tc, const char *key)
{
    const cJSON *e = get(tc, key);
    if (cJSON_IsObject(e)) e = get(e, "content");
    return cJSON_IsString(e) ? e->valuestring : NULL;
}

/* tokenizer_config.json's chat_template (a string, or the list's "default"), else
 * chat_template.jinja's text; *owned when it was read from a file (free it). */
static zt_status chat_template(const char *dir, const cJSON *tc, const char **out, char **owned)
{
    char path[4096];
    size_t len;
    const cJSON *t = get(tc, "chat_template"), *list = cJSON_IsArray(t) ? t : NULL, *e;
    *out = NULL, *owned = NULL;
    cJSON_ArrayForEach(e, list)
    {
        const cJSON *name = get(e, "name"), *text = get(e, "template");
        if (cJSON_IsString(name) && !strcmp(name->valuestring, "default") && cJSON_IsString(text)) t = text;
    }
    if (cJSON_IsString(t)) return *out = t->valuestring, ZT_OK;
    zt_status st = zt_path_join(path, sizeof path, dir, "chat_template.jinja");
    if (st || !zt_path_exists(path)) return st;
    if (!(st = zt_read_file(path, owned, &len))) *out = *owned;
    return st;
}

typedef struct named {
    const char *text;
    int id;
} named;

static int by_text(const void *a, const void *b) { return strcmp(((const named *)a)->text, ((const named *)b)->text); }

/* tokens[vocab_size] with types: the vocabulary, the added tokens over it, "[PADi]" where no
 * token has the id (a model's vocab_size rounded up past its tokenizer's). */
static zt_status token_list(const char *file, const cJSON *model, const cJSON *added, int n, char **tokens,
                            int32_t *types)
{
    const cJSON *e, *unk = get(model, "unk_token");
    int spm = cJSON_IsTrue(get(model, "byte_fallback"));
    cJSON_ArrayForEach(e, get(model, "vocab"))
    {
        if (!cJSON_IsNumber(e) || e->valueint < 0 || e->valueint >= n)
            return zt_fail(ZT_EUSER, "'%s': model.vocab: token id of '%s' is not below config.json's vocab_size %d",
                           file, e->string, n);
        free(tokens[e->valueint]);
        if (!(tokens[e->valueint] = strdup(e->string))) return zt_fail(ZT_ENOMEM, "out of memory reading '%s'", file);
        unsigned byte;
        char end;
        int is_byte = strlen(e->string) == 6 && sscanf(e->string, "<0x%2X%c", &byte, &end) == 2 && end == '>';
        int is_unk = cJSON_IsString(unk) && !strcmp(unk->valuestring, e->string);
        types[e->valueint] = spm && is_byte ? TOK_BYTE : spm && is_unk ? TOK_UNKNOWN : TOK_NORMAL;
    }
    cJSON_ArrayForEach(e, added)
    {
        const cJSON *id = get(e, "id"), *c = get(e, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(c) || id->valueint < 0 || id->valueint >= n)
            return zt_fail(ZT_EUSER, "'%s': added_tokens: an id not below config.json's vocab_size %d", file, n);
        free(tokens[id->valueint]);
        if (!(tokens[id->valueint] = strdup(c->valuestring)))
            return zt_fail(ZT_ENOMEM, "out of memory reading '%s'", file);
        if (types[id->valueint] != TOK_UNKNOWN) /* SentencePiece's <unk> is an added token too */
            types[id->valueint] =
                cJSON_IsTrue(get(e, "special")) || looks_control(c->valuestring) ? TOK_CONTROL : TOK_USER_DEFINED;
    }
    for (int i = 0; i < n; i++) {
        if (tokens[i]) continue;
        if (asprintf(&tokens[i], "[PAD%d]", i) < 0)
            return tokens[i] = NULL, zt_fail(ZT_ENOMEM, "out of memory reading '%s'", file);
        types[i] = TOK_UNUSED;
    }
    return ZT_OK;
}

static int from_vocab(int32_t type) { return type == TOK_NORMAL || type == TOK_BYTE; }

/* Each text once, as llama.cpp requires: Hugging Face's vocabulary maps a text to one id, an
 * added token's over the vocabulary's entry of the same text, which is then unreachable and
 * becomes "[PADi]" (as llama.cpp's converter has it); two added tokens of one text are refused. */
static zt_status unique_texts(const char *file, char **tokens, int32_t *types, int n)
{
    named *sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) return zt_fail(ZT_ENOMEM, "out of memory reading '%s'", file);
    for (int i = 0; i < n; i++) sorted[i] = (named){tokens[i], i};
    qsort(sorted, (size_t)n, sizeof *sorted, by_text);
    zt_status st = ZT_OK;
    for (int i = 1; i < n && !st; i++) {
        int a = sorted[i - 1].id, b = sorted[i].id, lost = from_vocab(types[a]) ? a : b, kept = a + b - lost;
        if (strcmp(sorted[i - 1].text, sorted[i].text)) continue;
        if (from_vocab(types[a]) == from_vocab(types[b])) {
            st = zt_fail(ZT_EUSER, "'%s': model.vocab, added_tokens: ids %d and %d are both '%s'", file, a, b,
                         tokens[a]);
            break;
        }
        sorted[i] = (named){tokens[kept], kept}; /* a third of the same text is compared with the one kept */
        free(tokens[lost]);
        types[lost] = TOK_UNUSED;
        if (asprintf(&tokens[lost], "[PAD%d]", lost) < 0)
            tokens[lost] = NULL, st = zt_fail(ZT_ENOMEM, "out of memory reading '%s'", file);
    }
    free(sorted);
    return st;
}

/* SentencePiece's scores for tokens[n]: the token that merge r makes -r (llama.cpp's "llama"
 * tokenizer merges the adjacent pair whose joined text is the token of the highest score, so it
 * merges in the merges' order), every other token 0. */
static zt_status add_scores(zt_gguf *g, const char *file, const cJSON *merges, char **tokens, int n)
{
    float *score = calloc((size_t)n, sizeof *score);
    named *sorted = malloc((size_t)n * sizeof *sorted);
    zt_status st = score && sorted ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory reading '%s'", file);
    for (int i = 0; i < n && !st; i++) sorted[i] = (named){tokens[i], i};
    if (!st) qsort(sorted, (size_t)n, sizeof *sorted, by_text);
    const cJSON *m;
    int rank = 0;
    cJSON_ArrayForEach(m, merges)
    {
        char *pair = st ? NULL : merge_text(m), *space = pair ? strchr(pair, ' ') : NULL;
        if (!st && !space) st = zt_fail(ZT_EUSER, "'%s': model.merges[%d] is not a pair", file, rank);
        if (st) {
            free(pair);
            break;
        }
        memmove(space, space + 1, strlen(space)); /* the two halves joined: the token it makes */
        const named key = {pair, 0}, *t = bsearch(&key, sorted, (size_t)n, sizeof *sorted, by_text);
        if (t && score[t->id] == 0) score[t->id] = -(float)rank;
        free(pair);
        rank++;
    }
    if (!st) st = zt_gguf_f32_array(g, "tokenizer.ggml.scores", score, (size_t)n);
    free(score);
    free(sorted);
    return st;
}

static zt_status add_merges(zt_gguf *g, const char *file, const cJSON *merges)
{
    int n = cJSON_GetArraySize(merges);
    char **m = calloc((size_t)n + 1, sizeof *m);
    zt_status st = m ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory reading '%s'", file);
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, merges) /* not by index: cJSON's arrays are lists */
    {
        if (st) break;
        if (!(m[i] = merge_text(e))) st = zt_fail(ZT_EUSER, "'%s': model.merges[%d] is not a pair of strings", file, i);
        i++;
    }
    if (!st) st = zt_gguf_str_array(g, "tokenizer.ggml.merges", (const char *const *)m, (size_t)n);
    for (int i = 0; m && i < n; i++) free(m[i]);
    free(m);
    return st;
}

/* The special ids: tokenizer_config.json's (an added token's), else config.json's; and whether BOS
 * and EOS are added. */
static zt_status add_specials(zt_gguf *g, const cJSON *tc, const cJSON *tok, const zt_llama_config *cfg)
{
    static const struct {
        const char *kind, *key; /* tokenizer_config.json's X_token, GGUF's key (its spelling) */
    } kinds[] = {{"bos", "bos_token_id"},       {"eos", "eos_token_id"},     {"unk", "unknown_token_id"},
                 {"sep", "seperator_token_id"}, {"pad", "padding_token_id"}, {"mask", "mask_token_id"}};
    const cJSON *added = get(tok, "added_tokens");
    zt_status st = ZT_OK;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds && !st; i++) {
        char k[64];
        snprintf(k, sizeof k, "%s_token", kinds[i].kind);
        int id = special_id(tc, k, added);
        if (id < 0) id = i == 0 ? cfg->bos_token_id : i == 1 ? cfg->eos_token_id : i == 4 ? cfg->pad_token_id : -1;
        snprintf(k, sizeof k, "tokenizer.ggml.%s", kinds[i].key);
        if (id >= 0 && id < cfg->vocab_size) st = zt_gguf_u32(g, k, (uint32_t)id);
    }
    int add_bos = -1, add_eos = -1;
    added_specials(get(tok, "post_processor"), token_text(tc, "bos_token"), token_text(tc, "eos_token"), &add_bos,
                   &add_eos);
    if (add_bos < 0 && cJSON_IsBool(get(tc, "add_bos_token"))) add_bos = cJSON_IsTrue(get(tc, "add_bos_token"));
    if (add_eos < 0 && cJSON_IsBool(get(tc, "add_eos_token"))) add_eos = cJSON_IsTrue(get(tc, "add_eos_token"));
    /* neither said: Hugging Face's encode adds nothing */
    if (!st) st = zt_gguf_bool(g, "tokenizer.ggml.add_bos_token", add_bos > 0);
    if (!st) st = zt_gguf_bool(g, "tokenizer.ggml.add_eos_token", add_eos > 0);
    return st;
}

zt_status zt_gguf_add_tokenizer(zt_gguf *g, const char *dir, const zt_llama_config *cfg)
{
    char file[4096], tc_file[4096];
    cJSON *tok = NULL, *tc = NULL;
    zt_status st = zt_path_join(file, sizeof file, dir, "tokenizer.json");
    if (!st && !zt_path_exists(file))
        st = zt_fail(ZT_EUSER, "'%s': no tokenizer.json (GGUF holds the tokenizer with the model)", dir);
    if (!st) st = zt_json_read(file, &tok);
    if (!st) st = zt_path_join(tc_file, sizeof tc_file, dir, "tokenizer_config.json");
    if (!st && zt_path_exists(tc_file)) st = zt_json_read(tc_file, &tc);
    if (st) return cJSON_Delete(tok), st;

    const cJSON *model = get(tok, "model");
    int spm = cJSON_IsTrue(get(model, "byte_fallback")), prefix = 0;
    const char *pre = spm ? "default" : pre_name(get(tok, "pre_tokenizer"));
    if (!is_type(model, "BPE"))
        st = zt_fail(ZT_EUSER, "'%s': model: zt writes GGUF for BPE tokenizers (Llama 3's, Qwen's, Mistral's, ...)",
                     file);
    else if (spm && !spm_spaces(tok, &prefix))
        st = zt_fail(ZT_EUSER,
                     "'%s': normalizer, pre_tokenizer: spaces not handled as llama.cpp's SentencePiece tokenizer does "
                     "(all of them made U+2581, a Metaspace that does not split)",
                     file);
    else if (!pre)
        st =
            zt_fail(ZT_EUSER,
                    "'%s': pre_tokenizer: not one that llama.cpp knows by name (Llama 3's, Qwen2's, SmolLM's, GPT-2's)",
                    file);
    int n = cfg->vocab_size;
    char **tokens = calloc((size_t)n, sizeof *tokens);
    int32_t *types = calloc((size_t)n, sizeof *types);
    if (!st && (!tokens || !types)) st = zt_fail(ZT_ENOMEM, "out of memory reading '%s'", file);
    if (!st) st = token_list(file, model, get(tok, "added_tokens"), n, tokens, types);
    if (!st) st = unique_texts(file, tokens, types, n);
    if (!st) st = zt_gguf_str(g, "tokenizer.ggml.model", spm ? "llama" : "gpt2");
    if (!st) st = zt_gguf_str(g, "tokenizer.ggml.pre", pre);
    if (!st) st = zt_gguf_str_array(g, "tokenizer.ggml.tokens", (const char *const *)tokens, (size_t)n);
    if (!st && spm) st = add_scores(g, file, get(model, "merges"), tokens, n);
    if (!st) st = zt_gguf_i32_array(g, "tokenizer.ggml.token_type", types, (size_t)n);
    if (!st && !spm) st = add_merges(g, file, get(model, "merges"));
    if (!st && spm) st = zt_gguf_bool(g, "tokenizer.ggml.add_space_prefix", prefix);
    if (!st) st = add_specials(g, tc, tok, cfg);
    const char *template = NULL;
    char *owned = NULL;
    if (!st) st = chat_template(dir, tc, &template, &owned);
    if (!st && template) st = zt_gguf_str(g, "tokenizer.chat_template", template);
    for (int i = 0; tokens && i < n; i++) free(tokens[i]);
    free(tokens);
    free(types);
    free(owned);
    cJSON_Delete(tok);
    cJSON_Delete(tc);
    return st;
}
