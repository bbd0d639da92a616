/* The front of both tokenizers: picking the file, added tokens around the
 * model's encode and decode, the special ids. */
#include "tokenizers/tokenizer.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "tokenizers/decoder.h"
#include "tokenizers/normalize.h"
#include "tokenizers/pretok.h"
#include "tokenizers/tok_internal.h"
#include "tokenizers/unicode.h"

static void clear(zt_tokenizer *tok)
{
    if (tok->ops) tok->ops->free(tok->model);
    zt_added_free(&tok->added);
    zt_normalizer_free(tok->normalizer);
    zt_decoder_free(tok->decoder);
    free(tok->path);
    memset(tok, 0, sizeof *tok);
    tok->bos = tok->eos = tok->pad = tok->unk = -1;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static zt_status open_file(zt_tokenizer *tok, const char *file)
{
    zt_status st = has_suffix(file, ".json") ? zt_bpe_open(tok, file) : zt_spm_open(tok, file);
    if (st) return st;
    if (!(tok->path = strdup(file))) return zt_fail(ZT_ENOMEM, "out of memory");
    return ZT_OK;
}

/* A directory: tokenizer.json first; tokenizer.model when there is none or zt
 * cannot read it (a model, pre-tokenizer or decoder zt does not implement). */
static zt_status open_dir(zt_tokenizer *tok, const char *dir)
{
    char json[4096], model[4096];
    zt_status st;
    if ((st = zt_path_join(json, sizeof json, dir, "tokenizer.json")) ||
        (st = zt_path_join(model, sizeof model, dir, "tokenizer.model")))
        return st;
    if (!zt_path_exists(json)) {
        if (!zt_path_exists(model))
            return zt_fail(ZT_EUSER, "'%s': no tokenizer.json or tokenizer.model in this directory", dir);
        return open_file(tok, model);
    }
    st = open_file(tok, json);
    if (st != ZT_EUSER || !zt_path_exists(model)) return st;
    char why[1024];
    snprintf(why, sizeof why, "%s", zt_errmsg());
    clear(tok);
    if (open_file(tok, model)) {
        clear(tok);
        return zt_fail(ZT_EUSER, "%s", why);
    }
    zt_log_info("%s; using '%s'", why, model);
    return ZT_OK;
}

zt_status zt_tokenizer_open(zt_tokenizer **out, const char *path)
{
    *out = NULL;
    zt_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return zt_fail(ZT_ENOMEM, "out of memory");
    clear(tok);
    struct stat sb;
    zt_status st;
    if (stat(path, &sb) != 0) st = zt_fail(ZT_EUSER, "'%s': no such tokenizer file or directory", path);
    else st = S_ISDIR(sb.st_mode) ? open_dir(tok, path) : open_file(tok, path);
    if (!st) {
        char *copy = strdup(tok->path);
        if (!copy) st = zt_fail(ZT_ENOMEM, "out of memory");
        else st = zt_tokenizer_read_config(tok, dirname(copy));
        free(copy);
    }
    if (st) {
        zt_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return ZT_OK;
}

void zt_tokenizer_free(zt_tokenizer *tok)
{
    if (!tok) return;
    clear(tok);
    free(tok);
}

/* --- encode --------------------------------------------------------------------------- */

/* The text between added tokens, split on added tokens `normalized` (0: pass 1,
 * 1: pass 2); the gaps go on to `gap`, with at_start when a gap is where the
 * whole text begins. */
typedef zt_status (*gap_fn)(const zt_tokenizer *tok, const char *text, size_t len, int at_start, int parse_special,
                            zt_buf *scratch, zt_ivec *out);

static zt_status split_added(const zt_tokenizer *tok, const char *text, size_t len, int at_start, int normalized,
                             int parse_special, gap_fn gap, zt_buf *scratch, zt_ivec *out)
{
    size_t seg = 0;
    zt_added_match m;
    zt_status st = ZT_OK;
    while (!st && zt_added_next(&tok->added, text, len, seg, seg, normalized, parse_special, &m)) {
        if (m.start > seg) st = gap(tok, text + seg, m.start - seg, at_start && seg == 0, parse_special, scratch, out);
        if (!st) st = zt_ivec_push(out, m.tok->id);
        seg = m.end;
    }
    if (!st && seg < len) st = gap(tok, text + seg, len - seg, at_start && seg == 0, parse_special, scratch, out);
    return st;
}

static zt_status model_encode(const zt_tokenizer *tok, const char *text, size_t len, int at_start, int parse_special,
                              zt_buf *scratch, zt_ivec *out)
{
    return tok->ops->encode(tok->model, text, len, at_start, out);
}

static zt_status normalize_and_split(const zt_tokenizer *tok, const char *text, size_t len, int at_start,
                                     int parse_special, zt_buf *scratch, zt_ivec *out)
{
    if (tok->normalizer) {
        zt_status st;
        scratch->n = 0;
        if ((st = zt_normalize(tok->normalizer, text, len, scratch))) return st;
        text = scratch->p;
        len = scratch->n;
    }
    return split_added(tok, text, len, at_start, 1, parse_special, model_encode, NULL, out);
}

zt_status zt_tokenizer_encode(const zt_tokenizer *tok, const char *text, size_t len, int parse_special, int32_t **ids,
                              size_t *n)
{
    zt_ivec out = {0};
    zt_buf scratch = {0};
    zt_status st = split_added(tok, text, len, 1, 0, parse_special, normalize_and_split, &scratch, &out);
    free(scratch.p);
    if (st) {
        free(out.v);
        *ids = NULL;
        *n = 0;
        return st;
    }
    *ids = out.v ? out.v : malloc(sizeof(int32_t)); /* non-NULL even when empty */
    *n = out.n;
    if (!*ids) return zt_fail(ZT_ENOMEM, "out of memory");
    return ZT_OK;
}

/* --- decode --------------------------------------------------------------------------- */

/* Replaces each invalid UTF-8 sequence with U+FFFD, as Hugging Face's decode does. */
static zt_status make_valid_utf8(zt_buf *b)
{
    size_t i = 0;
    uint32_t cp;
    while (i < b->n) {
        size_t k = zt_utf8_next(b->p + i, b->n - i, &cp);
        if (cp == ZT_UNI_INVALID) break;
        i += k;
    }
    if (i == b->n) return ZT_OK;
    zt_buf v = {0};
    zt_status st = zt_buf_append(&v, b->p, i);
    while (!st && i < b->n) {
        size_t k = zt_utf8_next(b->p + i, b->n - i, &cp);
        st = cp == ZT_UNI_INVALID ? zt_buf_append(&v, "\xEF\xBF\xBD", 3) : zt_buf_append(&v, b->p + i, k);
        i += k;
    }
    free(b->p);
    *b = v;
    return st;
}

/* id's added token in *t (NULL for a model piece); ZT_EUSER when it has no piece. */
static zt_status token_of(const zt_tokenizer *tok, int32_t id, int32_t vocab, const zt_added_token **t)
{
    if (id < 0 || id >= vocab) return zt_fail(ZT_EUSER, "token id %d is outside the vocabulary [0, %d)", id, vocab);
    *t = zt_added_by_id(&tok->added, id);
    if (!*t && (id >= tok->ops->vocab_size(tok->model) || !tok->ops->id_to_piece(tok->model, id)))
        return zt_fail(ZT_EUSER, "token id %d has no piece", id);
    return ZT_OK;
}

/* The model decodes runs of its pieces; added tokens are their text. */
static zt_status decode_runs(const zt_tokenizer *tok, const int32_t *ids, size_t n, int skip_special, zt_buf *out)
{
    int32_t vocab = zt_tokenizer_vocab_size(tok);
    size_t run = 0; /* ids[run, i) are model pieces not yet decoded */
    zt_status st = ZT_OK;
    for (size_t i = 0; i <= n && !st; i++) {
        const zt_added_token *t = NULL;
        if (i < n && ((st = token_of(tok, ids[i], vocab, &t)) || !t)) continue;
        if (i > run) st = tok->ops->decode(tok->model, ids + run, i - run, out);
        if (!st && t && !(skip_special && (t->flags & ZT_ADDED_SPECIAL))) st = zt_buf_append(out, t->content, t->len);
        run = i + 1;
    }
    return st;
}

/* The pieces of all ids (added tokens' text, special ones dropped with skip_special) through the decoder. */
static zt_status decode_pieces(const zt_tokenizer *tok, const int32_t *ids, size_t n, int skip_special, zt_buf *out)
{
    int32_t vocab = zt_tokenizer_vocab_size(tok);
    zt_pieces pieces = {0};
    zt_status st = ZT_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const zt_added_token *t;
        if ((st = token_of(tok, ids[i], vocab, &t))) break;
        if (t && skip_special && (t->flags & ZT_ADDED_SPECIAL)) continue;
        const char *p = t ? t->content : tok->ops->id_to_piece(tok->model, ids[i]);
        st = zt_pieces_push(&pieces, p, t ? t->len : strlen(p));
    }
    if (!st) st = zt_decode(tok->decoder, &pieces, out);
    zt_pieces_free(&pieces);
    return st;
}

zt_status zt_tokenizer_decode(const zt_tokenizer *tok, const int32_t *ids, size_t n, int skip_special, char **text)
{
    *text = NULL;
    zt_buf out = {0};
    zt_status st = zt_buf_append(&out, "", 0);
    if (!st)
        st = tok->decoder ? decode_pieces(tok, ids, n, skip_special, &out)
                          : decode_runs(tok, ids, n, skip_special, &out);
    if (!st) st = make_valid_utf8(&out);
    if (st) {
        free(out.p);
        return st;
    }
    *text = out.p;
    return ZT_OK;
}

/* --- vocabulary and special tokens ---------------------------------------------------- */

int32_t zt_tokenizer_vocab_size(const zt_tokenizer *tok)
{
    int32_t n = tok->ops->vocab_size(tok->model);
    const zt_added_set *a = &tok->added;
    if (a->n && a->tok[a->by_id[a->n - 1]].id >= n) n = a->tok[a->by_id[a->n - 1]].id + 1;
    return n;
}

int32_t zt_tokenizer_piece_to_id(const zt_tokenizer *tok, const char *piece)
{
    size_t len = strlen(piece);
    const zt_added_token *t = zt_added_by_content(&tok->added, piece, len);
    return t ? t->id : tok->ops->piece_to_id(tok->model, piece, len);
}

const char *zt_tokenizer_id_to_piece(const zt_tokenizer *tok, int32_t id)
{
    const zt_added_token *t = zt_added_by_id(&tok->added, id);
    if (t) return t->content;
    return id >= 0 && id < tok->ops->vocab_size(tok->model) ? tok->ops->id_to_piece(tok->model, id) : NULL;
}

int32_t zt_tokenizer_bos_id(const zt_tokenizer *tok) { return tok->bos; }
int32_t zt_tokenizer_eos_id(const zt_tokenizer *tok) { return tok->eos; }
int32_t zt_tokenizer_pad_id(const zt_tokenizer *tok) { return tok->pad; }
int32_t zt_tokenizer_unk_id(const zt_tokenizer *tok) { return tok->unk; }
size_t zt_tokenizer_template(const zt_tokenizer *tok, int after, const int32_t **ids)
{
    const zt_affix *side = after ? &tok->after : &tok->before;
    *ids = side->ids;
    return (size_t)side->n;
}
const char *zt_tokenizer_path(const zt_tokenizer *tok) { return tok->path; }
const char *zt_tokenizer_kind(const zt_tokenizer *tok) { return tok->ops->name; }

zt_status zt_tokenizer_add_special(zt_tokenizer *tok, const char *piece, int32_t *id)
{
    size_t len = strlen(piece);
    if (len == 0) return zt_fail(ZT_EUSER, "a special token cannot be empty");
    const zt_added_token *t = zt_added_by_content(&tok->added, piece, len);
    int32_t at = t ? t->id : tok->ops->piece_to_id(tok->model, piece, len);
    if (at < 0) at = zt_tokenizer_vocab_size(tok);
    unsigned flags = (t ? t->flags & ~ZT_ADDED_NORMALIZED : 0) | ZT_ADDED_SPECIAL;
    zt_status st = zt_added_put(&tok->added, piece, len, at, flags);
    if (st) return st;
    *id = at;
    return ZT_OK;
}

int zt_tokenizer_is_special(const zt_tokenizer *tok, int32_t id)
{
    const zt_added_token *t = zt_added_by_id(&tok->added, id);
    return t && (t->flags & ZT_ADDED_SPECIAL);
}
