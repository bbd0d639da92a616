/* Hugging Face's decoders over lists of pieces (zt_pieces), one step at a time. */
#include "tokenizers/decoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizers/bpe.h"
#include "tokenizers/unicode.h"

typedef enum dec_kind {
    D_JOIN,
    D_SEQUENCE,
    D_BYTE_LEVEL,
    D_METASPACE,
    D_BYTE_FALLBACK,
    D_FUSE,
    D_STRIP,
    D_REPLACE
} dec_kind;

struct zt_decoder {
    dec_kind kind;
    char text[5];       /* Metaspace: the replacement; Strip: the character stripped */
    int prepend;        /* Metaspace: its prepend scheme is not "never" */
    int start, stop;    /* Strip: at most this many characters from the start and the end */
    char *content;      /* Replace: what a match becomes */
    zt_pretok *pattern; /* Replace */
    zt_decoder **steps; /* Sequence */
    int nsteps;
};

static const cJSON *field(const cJSON *obj, const char *name) { return cJSON_GetObjectItemCaseSensitive(obj, name); }

static zt_status read_sequence(zt_decoder *d, const cJSON *j, const char *where)
{
    const cJSON *items = field(j, "decoders");
    if (!cJSON_IsArray(items)) return zt_fail(ZT_EUSER, "%s.decoders is missing or not an array", where);
    int n = cJSON_GetArraySize(items);
    if (!(d->steps = calloc((size_t)n + 1, sizeof *d->steps))) return zt_fail(ZT_ENOMEM, "out of memory");
    char at[512];
    zt_status st = ZT_OK;
    for (const cJSON *item = items->child; item && !st; item = item->next) {
        snprintf(at, sizeof at, "%s.decoders[%d]", where, d->nsteps);
        st = zt_decoder_read(item, at, &d->steps[d->nsteps]);
        if (!st) d->nsteps++;
    }
    return st;
}

static zt_status read_count(const cJSON *j, const char *name, const char *where, int *out)
{
    const cJSON *v = field(j, name);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1 << 20 || v->valuedouble != (int)v->valuedouble)
        return zt_fail(ZT_EUSER, "%s.%s is missing or not a count", where, name);
    *out = (int)v->valuedouble;
    return ZT_OK;
}

static zt_status read_strip(zt_decoder *d, const cJSON *j, const char *where)
{
    zt_status st;
    if ((st = zt_json_char(j, "content", where, d->text)) || (st = read_count(j, "start", where, &d->start))) return st;
    return read_count(j, "stop", where, &d->stop);
}

static zt_status read_replace(zt_decoder *d, const cJSON *j, const char *where)
{
    const cJSON *c = field(j, "content");
    if (!cJSON_IsString(c)) return zt_fail(ZT_EUSER, "%s.content is missing or not a string", where);
    if (!(d->content = strdup(c->valuestring))) return zt_fail(ZT_ENOMEM, "out of memory");
    return zt_pretok_read_pattern(j, where, &d->pattern);
}

static zt_status read_metaspace(zt_decoder *d, const cJSON *j, const char *where)
{
    int scheme, split; /* split is the pre-tokenizer's business */
    zt_status st = zt_metaspace_read(j, where, d->text, &scheme, &split);
    d->prepend = scheme != 2; /* not "never" */
    return st;
}

static zt_status read_step(zt_decoder *d, const cJSON *j, const char *where)
{
    static const struct {
        const char *type;
        dec_kind kind;
        zt_status (*read)(zt_decoder *d, const cJSON *j, const char *where); /* NULL: no fields */
    } kinds[] = {{"Sequence", D_SEQUENCE, read_sequence},
                 {"ByteLevel", D_BYTE_LEVEL, NULL},
                 {"Metaspace", D_METASPACE, read_metaspace},
                 {"ByteFallback", D_BYTE_FALLBACK, NULL},
                 {"Fuse", D_FUSE, NULL},
                 {"Strip", D_STRIP, read_strip},
                 {"Replace", D_REPLACE, read_replace}};
    if (!j || cJSON_IsNull(j)) {
        d->kind = D_JOIN;
        return ZT_OK;
    }
    if (!cJSON_IsObject(j)) return zt_fail(ZT_EUSER, "%s is not an object", where);
    const cJSON *t = field(j, "type");
    const char *type = cJSON_IsString(t) ? t->valuestring : "";
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (strcmp(type, kinds[i].type) == 0) {
            d->kind = kinds[i].kind;
            return kinds[i].read ? kinds[i].read(d, j, where) : ZT_OK;
        }
    return zt_fail(ZT_EUSER,
                   "%s.type '%s' is not a decoder zt implements (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, "
                   "Replace and Sequence)",
                   where, type);
}

zt_status zt_decoder_read(const cJSON *json, const char *where, zt_decoder **out)
{
    *out = NULL;
    zt_decoder *d = calloc(1, sizeof *d);
    if (!d) return zt_fail(ZT_ENOMEM, "out of memory");
    zt_status st = read_step(d, json, where);
    if (st) {
        zt_decoder_free(d);
        return st;
    }
    *out = d;
    return ZT_OK;
}

void zt_decoder_free(zt_decoder *d)
{
    if (!d) return;
    for (int i = 0; i < d->nsteps; i++) zt_decoder_free(d->steps[i]);
    free(d->steps);
    free(d->content);
    zt_pretok_free(d->pattern);
    free(d);
}

/* --- decoding ------------------------------------------------------------------------- */

/* Ends the piece being written at the end of s->text (appended to it directly). */
static zt_status close_piece(zt_pieces *s) { return zt_pieces_push(s, "", 0); }

/* Appends the bytes of one piece as ByteLevel reads it: the byte of each
 * character of the byte alphabet, or the piece as it is when a character is
 * outside it. */
static zt_status byte_level(const char *t, size_t n, zt_buf *out)
{
    size_t at = out->n;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += zt_utf8_next(t + i, n - i, &cp);
        int b = cp == ZT_UNI_INVALID ? -1 : zt_bytelevel_byte(cp);
        if (b < 0) {
            out->n = at;
            return zt_buf_append(out, t, n);
        }
        char c = (char)b;
        zt_status st = zt_buf_append(out, &c, 1);
        if (st) return st;
    }
    return ZT_OK;
}

/* Replaces each invalid UTF-8 sequence of b[from, n) with U+FFFD (Rust's from_utf8_lossy). */
static zt_status lossy_utf8(zt_buf *b, size_t from)
{
    zt_buf v = {0};
    zt_status st = zt_buf_append(&v, "", 0);
    for (size_t i = from; i < b->n && !st;) {
        uint32_t cp;
        size_t k = zt_utf8_next(b->p + i, b->n - i, &cp);
        st = cp == ZT_UNI_INVALID ? zt_buf_append(&v, "\xEF\xBF\xBD", 3) : zt_buf_append(&v, b->p + i, k);
        i += k;
    }
    b->n = from;
    if (!st) st = zt_buf_append(b, v.p, v.n);
    free(v.p);
    return st;
}

/* <0xXX>: the byte, or -1. Two hex digits, or as Rust's u8::from_str_radix also reads them, '+' and one. */
static int byte_piece(const char *t, size_t n)
{
    if (n != 6 || memcmp(t, "<0x", 3) != 0 || t[5] != '>') return -1;
    int v = 0;
    for (int i = t[3] == '+' ? 4 : 3; i < 5; i++) {
        char c = t[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = 16 * v + d;
    }
    return v;
}

/* ByteFallback: a run of byte pieces becomes its bytes when they are UTF-8, else one U+FFFD per byte. */
static zt_status flush_bytes(zt_buf *bytes, zt_pieces *out)
{
    zt_status st = ZT_OK;
    if (bytes->n && zt_utf8_valid_len(bytes->p, bytes->n) == bytes->n) st = zt_pieces_push(out, bytes->p, bytes->n);
    else
        for (size_t i = 0; i < bytes->n && !st; i++) st = zt_pieces_push(out, "\xEF\xBF\xBD", 3);
    bytes->n = 0;
    return st;
}

static zt_status byte_fallback(const zt_pieces *in, zt_pieces *out)
{
    zt_buf bytes = {0};
    zt_status st = ZT_OK;
    for (size_t i = 0; i < in->n && !st; i++) {
        const char *t = zt_piece_text(in, i);
        size_t n = zt_piece_len(in, i);
        int b = byte_piece(t, n);
        char c = (char)b;
        if (b >= 0) st = zt_buf_append(&bytes, &c, 1);
        else if (!(st = flush_bytes(&bytes, out))) st = zt_pieces_push(out, t, n);
    }
    if (!st) st = flush_bytes(&bytes, out);
    free(bytes.p);
    return st;
}

/* Strip: up to d->start leading and d->stop trailing copies of the character */
static zt_status strip(const zt_decoder *d, const char *t, size_t n, zt_pieces *out)
{
    size_t k = strlen(d->text), lo = 0, hi = n;
    for (int i = 0; i < d->start && hi - lo >= k && memcmp(t + lo, d->text, k) == 0; i++) lo += k;
    for (int i = 0; i < d->stop && hi - lo >= k && memcmp(t + hi - k, d->text, k) == 0; i++) hi -= k;
    return zt_pieces_push(out, t + lo, hi - lo);
}

/* Metaspace: the replacement becomes a space, and is dropped in the first piece unless the scheme is "never" */
static zt_status metaspace(const zt_decoder *d, const char *t, size_t n, int first, zt_pieces *out)
{
    size_t k = strlen(d->text);
    zt_status st = ZT_OK;
    for (size_t i = 0; i < n && !st;) {
        if (n - i >= k && memcmp(t + i, d->text, k) == 0) {
            if (!(first && d->prepend)) st = zt_buf_append(&out->text, " ", 1);
            i += k;
        } else {
            st = zt_buf_append(&out->text, t + i, 1);
            i++;
        }
    }
    return st ? st : close_piece(out);
}

/* One step other than a Sequence: in's pieces to out's. */
static zt_status step(const zt_decoder *d, const zt_pieces *in, zt_pieces *out)
{
    zt_status st = ZT_OK;
    if (d->kind == D_BYTE_FALLBACK) return byte_fallback(in, out);
    size_t from = out->text.n;
    for (size_t i = 0; i < in->n && !st; i++) {
        const char *t = zt_piece_text(in, i);
        size_t n = zt_piece_len(in, i);
        switch (d->kind) {
        case D_JOIN:
            st = i ? zt_buf_append(&out->text, " ", 1) : ZT_OK;
            if (!st) st = zt_buf_append(&out->text, t, n);
            break;
        case D_FUSE: st = zt_buf_append(&out->text, t, n); break;
        case D_BYTE_LEVEL: st = byte_level(t, n, &out->text); break;
        case D_STRIP: st = strip(d, t, n, out); break;
        case D_METASPACE: st = metaspace(d, t, n, i == 0, out); break;
        case D_REPLACE:
            st = zt_pretok_replace(d->pattern, t, n, d->content, &out->text);
            if (!st) st = close_piece(out);
            break;
        default: break;
        }
    }
    /* the joining steps make one piece */
    if (!st && d->kind == D_BYTE_LEVEL) st = lossy_utf8(&out->text, from);
    if (!st && (d->kind == D_JOIN || d->kind == D_FUSE || d->kind == D_BYTE_LEVEL) && in->n) st = close_piece(out);
    return st;
}

/* Runs d on *cur; *cur then points at the result, *spare at scratch. */
static zt_status apply(const zt_decoder *d, zt_pieces **cur, zt_pieces **spare)
{
    zt_status st = ZT_OK;
    if (d->kind == D_SEQUENCE) {
        for (int i = 0; i < d->nsteps && !st; i++) st = apply(d->steps[i], cur, spare);
        return st;
    }
    zt_pieces *in = *cur, *out = *spare;
    out->n = out->text.n = 0;
    st = step(d, in, out);
    *cur = out;
    *spare = in;
    return st;
}

zt_status zt_decode(const zt_decoder *d, zt_pieces *pieces, zt_buf *out)
{
    zt_pieces other = {0}, *cur = pieces, *spare = &other;
    zt_status st = apply(d, &cur, &spare);
    if (!st) st = zt_buf_append(out, cur->text.p ? cur->text.p : "", cur->text.n);
    zt_pieces_free(&other);
    return st;
}
