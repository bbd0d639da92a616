/* Reads a Hugging Face tokenizer.json with a BPE or WordLevel model. What zt
 * does not implement (other models, normalizers, pre-tokenizers, decoders) is
 * refused with the field named, never approximated. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "tokenizers/bpe.h"
#include "tokenizers/decoder.h"
#include "tokenizers/normalize.h"
#include "tokenizers/unicode.h"

#define MAX_VOCAB (1 << 26)

static const cJSON *field(const cJSON *obj, const char *name) { return cJSON_GetObjectItemCaseSensitive(obj, name); }

static const char *type_of(const cJSON *obj)
{
    const cJSON *t = field(obj, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

/* A boolean field; def when absent or null. */
static int flag(const cJSON *obj, const char *name, int def)
{
    const cJSON *v = field(obj, name);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

static int is_int_in(const cJSON *v, double lo, double hi)
{
    /* the range first: converting a double outside int64_t's is undefined */
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble < hi &&
           v->valuedouble == (double)(int64_t)v->valuedouble;
}

static zt_status read_vocab(zt_bpe *b, const cJSON *vocab)
{
    if (!cJSON_IsObject(vocab)) return zt_fail(ZT_EUSER, "model.vocab is missing or not an object");
    int n = cJSON_GetArraySize(vocab);
    const char **pieces = malloc((size_t)n * sizeof *pieces + 1);
    int32_t *ids = malloc((size_t)n * sizeof *ids + 1);
    zt_status st = ZT_OK;
    if (!pieces || !ids) st = zt_fail(ZT_ENOMEM, "out of memory for a vocabulary of %d pieces", n);
    int i = 0;
    for (const cJSON *v = vocab->child; v && !st; v = v->next, i++) {
        if (!is_int_in(v, 0, MAX_VOCAB))
            st = zt_fail(ZT_EUSER, "model.vocab['%s'] is not an id in [0, %d)", v->string, MAX_VOCAB);
        else {
            pieces[i] = v->string;
            ids[i] = (int32_t)v->valuedouble;
        }
    }
    if (!st) st = zt_bpe_set_vocab(b, pieces, ids, n);
    free(pieces);
    free(ids);
    return st;
}

static zt_status read_merges(zt_bpe *b, const cJSON *merges)
{
    if (!cJSON_IsArray(merges)) return zt_fail(ZT_EUSER, "model.merges is missing or not an array");
    zt_status st = zt_pairmap_init(&b->merges, (size_t)cJSON_GetArraySize(merges));
    int32_t rank = 0;
    for (const cJSON *m = merges->child; m && !st; m = m->next, rank++) {
        if (cJSON_IsString(m)) { /* "left right" */
            const char *s = m->valuestring, *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' '))
                return zt_fail(ZT_EUSER, "model.merges[%d] = '%s' is not two pieces separated by a space", rank, s);
            st = zt_bpe_add_merge(b, s, (size_t)(sp - s), sp + 1, strlen(sp + 1), rank);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) { /* ["left", "right"] */
            const char *l = m->child->valuestring, *r = m->child->next->valuestring;
            st = zt_bpe_add_merge(b, l, strlen(l), r, strlen(r), rank);
        } else {
            return zt_fail(ZT_EUSER, "model.merges[%d] is neither \"left right\" nor [\"left\", \"right\"]", rank);
        }
    }
    return st;
}

/* Unigram's vocab: [[piece, score], ...], the ids in order */
static zt_status read_unigram_vocab(zt_bpe *b, const cJSON *vocab)
{
    if (!cJSON_IsArray(vocab) || !cJSON_GetArraySize(vocab))
        return zt_fail(ZT_EUSER, "model.vocab is missing or not a non-empty array of [piece, score]");
    int n = cJSON_GetArraySize(vocab);
    if (n > MAX_VOCAB) return zt_fail(ZT_EUSER, "model.vocab has %d pieces, more than %d", n, MAX_VOCAB);
    const char **pieces = malloc((size_t)n * sizeof *pieces);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    b->score = malloc((size_t)n * sizeof *b->score);
    zt_status st = ZT_OK;
    if (!pieces || !ids || !b->score) st = zt_fail(ZT_ENOMEM, "out of memory for a vocabulary of %d pieces", n);
    b->min_score = 1e300;
    int i = 0;
    for (const cJSON *v = vocab->child; v && !st; v = v->next, i++) {
        const cJSON *piece = cJSON_GetArrayItem(v, 0), *score = cJSON_GetArrayItem(v, 1);
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsString(piece) || !cJSON_IsNumber(score))
            st = zt_fail(ZT_EUSER, "model.vocab[%d] is not [piece, score]", i);
        else {
            pieces[i] = piece->valuestring;
            ids[i] = i;
            b->score[i] = score->valuedouble;
            if (score->valuedouble < b->min_score) b->min_score = score->valuedouble;
            size_t len = strlen(piece->valuestring);
            if (len > b->max_piece) b->max_piece = len;
        }
    }
    if (!st) st = zt_bpe_set_vocab(b, pieces, ids, n);
    free(pieces);
    free(ids);
    return st;
}

static zt_status read_unigram(zt_bpe *b, const cJSON *model)
{
    if (b->byte_level) return zt_fail(ZT_EUSER, "model.type 'Unigram' is not supported with a ByteLevel pre-tokenizer");
    b->unigram = 1;
    b->fuse_unk = 1;
    b->byte_fallback = flag(model, "byte_fallback", 0);
    zt_status st = read_unigram_vocab(b, field(model, "vocab"));
    if (st) return st;
    const cJSON *unk = field(model, "unk_id");
    if (!unk || cJSON_IsNull(unk)) return ZT_OK;
    if (!is_int_in(unk, 0, b->n_vocab)) return zt_fail(ZT_EUSER, "model.unk_id is not an id in [0, %d)", b->n_vocab);
    b->unk = (int32_t)unk->valuedouble;
    return ZT_OK;
}

/* continuing_subword_prefix or end_of_word_suffix: NULL when absent or empty */
static zt_status read_affix(const zt_bpe *b, const cJSON *model, const char *name, char **out)
{
    const cJSON *v = field(model, name);
    if (!cJSON_IsString(v) || !v->valuestring[0]) return ZT_OK;
    if (b->byte_level)
        return zt_fail(ZT_EUSER, "model.%s = '%s' is not supported with a ByteLevel pre-tokenizer", name,
                       v->valuestring);
    if (!(*out = strdup(v->valuestring))) return zt_fail(ZT_ENOMEM, "out of memory");
    return ZT_OK;
}

static zt_status read_bpe_options(zt_bpe *b, const cJSON *model)
{
    const cJSON *v = field(model, "dropout");
    if (cJSON_IsNumber(v) && v->valuedouble != 0)
        return zt_fail(ZT_EUSER,
                       "model.dropout = %g is not supported (BPE-dropout randomizes the tokens, for training a "
                       "tokenizer; set it to null)",
                       v->valuedouble);
    zt_status st;
    if ((st = read_affix(b, model, "continuing_subword_prefix", &b->prefix)) ||
        (st = read_affix(b, model, "end_of_word_suffix", &b->suffix)))
        return st;
    b->byte_fallback = flag(model, "byte_fallback", 0);
    if (b->byte_fallback && b->byte_level)
        return zt_fail(ZT_EUSER, "model.byte_fallback = true is not supported with a ByteLevel pre-tokenizer");
    b->ignore_merges = flag(model, "ignore_merges", 0);
    b->fuse_unk = flag(model, "fuse_unk", 0);
    return ZT_OK;
}

static zt_status read_model(zt_bpe *b, const cJSON *model)
{
    if (!cJSON_IsObject(model)) return zt_fail(ZT_EUSER, "\"model\" is missing or not an object");
    const char *type = type_of(model);
    zt_status st;
    if (strcmp(type, "Unigram") == 0) return read_unigram(b, model);
    b->word_level = strcmp(type, "WordLevel") == 0;
    if (!b->word_level && strcmp(type, "BPE") != 0 && (type[0] || !field(model, "merges")))
        return zt_fail(ZT_EUSER, "model.type '%s' is not a model zt implements (BPE, WordLevel, Unigram)", type);
    if (!b->word_level && (st = read_bpe_options(b, model))) return st;
    if ((st = read_vocab(b, field(model, "vocab")))) return st;
    if (!b->word_level && (st = read_merges(b, field(model, "merges")))) return st;
    const cJSON *v = field(model, "unk_token");
    const char *unk = cJSON_IsString(v) ? v->valuestring : b->word_level ? "<unk>" : NULL; /* WordLevel's default */
    b->unk = unk ? zt_bpe_piece_to_id(b, unk, strlen(unk)) : -1;
    return ZT_OK;
}

/* Any pre-tokenizer zt implements, or none; with a ByteLevel step the
 * vocabulary is written in ByteLevel's alphabet. */
static zt_status read_pre_tokenizer(zt_bpe *b, const cJSON *pre)
{
    if (!pre || cJSON_IsNull(pre)) return ZT_OK;
    zt_status st = zt_pretok_read(pre, "pre_tokenizer", &b->pretok);
    if (st) return st;
    b->byte_level = zt_pretok_byte_level(b->pretok);
    return ZT_OK;
}

static zt_status read_added_tokens(zt_tokenizer *tok, const cJSON *added)
{
    if (!added || cJSON_IsNull(added)) return ZT_OK;
    if (!cJSON_IsArray(added)) return zt_fail(ZT_EUSER, "added_tokens is not an array");
    int i = 0;
    for (const cJSON *a = added->child; a; a = a->next, i++) {
        const cJSON *content = field(a, "content"), *id = field(a, "id");
        if (!cJSON_IsString(content) || !content->valuestring[0] || !is_int_in(id, 0, MAX_VOCAB))
            return zt_fail(ZT_EUSER, "added_tokens[%d] needs a non-empty \"content\" and an \"id\" in [0, %d)", i,
                           MAX_VOCAB);
        unsigned flags = (flag(a, "special", 0) ? ZT_ADDED_SPECIAL : 0) |
                         (flag(a, "normalized", 0) ? ZT_ADDED_NORMALIZED : 0) |
                         (flag(a, "lstrip", 0) ? ZT_ADDED_LSTRIP : 0) | (flag(a, "rstrip", 0) ? ZT_ADDED_RSTRIP : 0) |
                         (flag(a, "single_word", 0) ? ZT_ADDED_SINGLE_WORD : 0);
        /* a normalized token matches normalized text, so it is normalized too */
        zt_buf norm = {0};
        const char *c = content->valuestring;
        zt_status st = ZT_OK;
        if ((flags & ZT_ADDED_NORMALIZED) && tok->normalizer &&
            !(st = zt_normalize(tok->normalizer, c, strlen(c), &norm)))
            c = norm.p;
        if (!st) st = zt_added_put(&tok->added, c, strlen(c), (int32_t)id->valuedouble, flags);
        free(norm.p);
        if (st) return st;
    }
    return ZT_OK;
}

static zt_status affix_push(zt_affix *side, int32_t id, const char *where)
{
    if (side->n == ZT_AFFIX_MAX)
        return zt_fail(ZT_EUSER, "%s: more than %d special tokens on one side of $A", where, ZT_AFFIX_MAX);
    side->ids[side->n++] = id;
    return ZT_OK;
}

/* Appends the ids of the special token named in a template: all its "ids" in
 * the post-processor's special_tokens, else the token of that content. */
static zt_status template_token(const zt_tokenizer *tok, const zt_bpe *b, const cJSON *tp, const char *name,
                                const char *where, zt_affix *side)
{
    const cJSON *ids = field(field(field(tp, "special_tokens"), name), "ids");
    if (!cJSON_IsArray(ids)) {
        const zt_added_token *t = zt_added_by_content(&tok->added, name, strlen(name));
        int32_t id = t ? t->id : zt_bpe_piece_to_id(b, name, strlen(name));
        if (id < 0)
            return zt_fail(ZT_EUSER, "%s: special token '%s' is not in special_tokens nor a token", where, name);
        return affix_push(side, id, where);
    }
    for (const cJSON *v = ids->child; v; v = v->next) {
        if (!is_int_in(v, 0, MAX_VOCAB))
            return zt_fail(ZT_EUSER, "%s.special_tokens['%s'].ids is not a list of ids", where, name);
        zt_status st = affix_push(side, (int32_t)v->valuedouble, where);
        if (st) return st;
    }
    return ZT_OK;
}

/* The single template of a TemplateProcessing: the special tokens before and
 * after the text ($A), which encode(add_special_tokens=True) adds. The pair
 * template is for text pairs, which zt never encodes. */
static zt_status read_template(zt_tokenizer *tok, const zt_bpe *b, const cJSON *tp, const char *where)
{
    char at[160];
    snprintf(at, sizeof at, "%s.single", where);
    const cJSON *single = field(tp, "single");
    if (!cJSON_IsArray(single)) return zt_fail(ZT_EUSER, "%s is not a list of pieces", at);
    int seen_a = 0, i = 0;
    for (const cJSON *piece = single->child; piece; piece = piece->next, i++) {
        const cJSON *special = field(field(piece, "SpecialToken"), "id"), *seq = field(field(piece, "Sequence"), "id");
        zt_status st;
        if (cJSON_IsString(special))
            st = template_token(tok, b, tp, special->valuestring, where, seen_a ? &tok->after : &tok->before);
        else if (cJSON_IsString(seq) && strcmp(seq->valuestring, "A") == 0 && !seen_a) st = ZT_OK, seen_a = 1;
        else st = zt_fail(ZT_EUSER, "%s[%d] is neither a SpecialToken nor the one Sequence A", at, i);
        if (st) return st;
    }
    if (!seen_a) return zt_fail(ZT_EUSER, "%s has no Sequence A", at);
    if (tok->before.n) tok->bos = tok->before.ids[0];
    if (tok->after.n) tok->eos = tok->after.ids[tok->after.n - 1];
    return ZT_OK;
}

/* BOS/EOS as the post-processor adds them: a TemplateProcessing, alone or in
 * a Sequence (Llama 3's follows a ByteLevel, which adds nothing). */
static zt_status read_post_processor(zt_tokenizer *tok, const zt_bpe *b, const cJSON *post)
{
    if (strcmp(type_of(post), "TemplateProcessing") == 0) return read_template(tok, b, post, "post_processor");
    if (strcmp(type_of(post), "Sequence") != 0) return ZT_OK;
    const cJSON *tp = NULL;
    int i = 0, at = 0;
    for (const cJSON *p = field(post, "processors") ? field(post, "processors")->child : NULL; p; p = p->next, i++) {
        if (strcmp(type_of(p), "TemplateProcessing") != 0) continue;
        if (tp) return zt_fail(ZT_EUSER, "post_processor.processors[%d]: a second TemplateProcessing", i);
        tp = p, at = i;
    }
    char where[64];
    snprintf(where, sizeof where, "post_processor.processors[%d]", at);
    return tp ? read_template(tok, b, tp, where) : ZT_OK;
}

static zt_status read_tokenizer(zt_tokenizer *tok, zt_bpe *b, const cJSON *root)
{
    zt_status st;
    if (!cJSON_IsObject(root)) return zt_fail(ZT_EUSER, "not a JSON object");
    if ((st = read_pre_tokenizer(b, field(root, "pre_tokenizer")))) return st;
    if ((st = read_model(b, field(root, "model")))) return st;
    if ((st = zt_normalizer_read(field(root, "normalizer"), "normalizer", &tok->normalizer))) return st;
    if ((st = zt_decoder_read(field(root, "decoder"), "decoder", &tok->decoder))) return st;
    if ((st = read_added_tokens(tok, field(root, "added_tokens")))) return st;
    tok->unk = b->unk;
    return read_post_processor(tok, b, field(root, "post_processor"));
}

zt_status zt_bpe_open(zt_tokenizer *tok, const char *path)
{
    char *text;
    size_t len;
    zt_status st = zt_read_file(path, &text, &len);
    if (st) return st;
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        st = zt_fail(ZT_EUSER, "'%s': not valid JSON (at byte %td)", path, at ? at - text : (ptrdiff_t)0);
        free(text);
        return st;
    }
    free(text);
    zt_bpe *b = calloc(1, sizeof *b);
    char *p = strdup(path);
    if (!b || !p) {
        free(b);
        free(p);
        cJSON_Delete(root);
        return zt_fail(ZT_ENOMEM, "out of memory reading '%s'", path);
    }
    b->path = p;
    b->unk = -1;
    st = zt_bpe_cache_new(&b->cache);
    if (!st) st = read_tokenizer(tok, b, root);
    cJSON_Delete(root);
    if (st) {
        zt_bpe_free(b);
        return zt_fail_context(st, "'%s'", path);
    }
    tok->ops = &zt_bpe_ops;
    tok->model = b;
    return ZT_OK;
}
