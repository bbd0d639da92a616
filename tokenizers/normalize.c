/* Hugging Face's normalizers: each step rewrites the whole text, a Sequence
 * runs its steps in order. NFD, NFKC, NFKD and Lowercase go through ICU on
 * UTF-16; NFC is zt's own (nfc.c); Replace finds its pattern as Split does. */
#include "tokenizers/normalize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "tokenizers/pretok.h"
#include "tokenizers/unicode.h"

typedef enum norm_kind {
    N_SEQUENCE,
    N_NFC,
    N_NFD,
    N_NFKC,
    N_NFKD,
    N_LOWERCASE,
    N_STRIP,
    N_PREPEND,
    N_REPLACE
} norm_kind;

struct zt_normalizer {
    norm_kind kind;
    const UNormalizer2 *icu; /* NFD, NFKC, NFKD */
    int left, right;         /* Strip */
    char *text;              /* Prepend: what goes in front; Replace: what a match becomes */
    zt_pretok *pattern;      /* Replace */
    zt_normalizer **steps;   /* Sequence */
    int nsteps;
};

static const cJSON *field(const cJSON *obj, const char *name) { return cJSON_GetObjectItemCaseSensitive(obj, name); }

static int flag(const cJSON *obj, const char *name, int def)
{
    const cJSON *v = field(obj, name);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

static zt_status read_string(zt_normalizer *n, const cJSON *j, const char *name, const char *where)
{
    const cJSON *v = field(j, name);
    if (!cJSON_IsString(v)) return zt_fail(ZT_EUSER, "%s.%s is missing or not a string", where, name);
    if (!(n->text = strdup(v->valuestring))) return zt_fail(ZT_ENOMEM, "out of memory");
    return ZT_OK;
}

static zt_status read_replace(zt_normalizer *n, const cJSON *j, const char *where)
{
    zt_status st = read_string(n, j, "content", where);
    return st ? st : zt_pretok_read_pattern(j, where, &n->pattern);
}

static zt_status read_sequence(zt_normalizer *n, const cJSON *j, const char *where)
{
    const cJSON *items = field(j, "normalizers");
    if (!cJSON_IsArray(items)) return zt_fail(ZT_EUSER, "%s.normalizers is missing or not an array", where);
    if (!(n->steps = calloc((size_t)cJSON_GetArraySize(items) + 1, sizeof *n->steps)))
        return zt_fail(ZT_ENOMEM, "out of memory");
    char at[512];
    int i = 0;
    zt_status st = ZT_OK;
    for (const cJSON *item = items->child; item && !st; item = item->next, i++) {
        snprintf(at, sizeof at, "%s.normalizers[%d]", where, i);
        if (cJSON_IsNull(item)) st = zt_fail(ZT_EUSER, "%s is null", at);
        else if (!(st = zt_normalizer_read(item, at, &n->steps[n->nsteps])) && n->steps[n->nsteps]) n->nsteps++;
    }
    return st;
}

static zt_status read_step(zt_normalizer *n, const cJSON *j, const char *where)
{
    static const struct {
        const char *type;
        norm_kind kind;
    } simple[] = {{"NFC", N_NFC}, {"NFD", N_NFD}, {"NFKC", N_NFKC}, {"NFKD", N_NFKD}, {"Lowercase", N_LOWERCASE}};
    const cJSON *t = field(j, "type");
    const char *type = cJSON_IsString(t) ? t->valuestring : "";
    for (size_t i = 0; i < sizeof simple / sizeof *simple; i++)
        if (strcmp(type, simple[i].type) == 0) {
            n->kind = simple[i].kind;
            UErrorCode err = U_ZERO_ERROR;
            if (n->kind == N_NFD) n->icu = unorm2_getNFDInstance(&err);
            if (n->kind == N_NFKC) n->icu = unorm2_getNFKCInstance(&err);
            if (n->kind == N_NFKD) n->icu = unorm2_getNFKDInstance(&err);
            if (U_FAILURE(err)) return zt_fail(ZT_EIO, "%s: ICU has no %s data: %s", where, type, u_errorName(err));
            return ZT_OK;
        }
    if (strcmp(type, "Sequence") == 0) {
        n->kind = N_SEQUENCE;
        return read_sequence(n, j, where);
    }
    if (strcmp(type, "Strip") == 0) {
        n->kind = N_STRIP;
        n->left = flag(j, "strip_left", 1);
        n->right = flag(j, "strip_right", 1);
        return ZT_OK;
    }
    if (strcmp(type, "Prepend") == 0) {
        n->kind = N_PREPEND;
        return read_string(n, j, "prepend", where);
    }
    if (strcmp(type, "Replace") == 0) {
        n->kind = N_REPLACE;
        return read_replace(n, j, where);
    }
    if (!cJSON_IsObject(j)) return zt_fail(ZT_EUSER, "%s is not an object", where);
    return zt_fail(ZT_EUSER,
                   "%s: normalizer '%s' is not supported (zt implements NFC, NFD, NFKC, NFKD, Lowercase, "
                   "Strip, Prepend, Replace and Sequence)",
                   where, type);
}

zt_status zt_normalizer_read(const cJSON *json, const char *where, zt_normalizer **out)
{
    *out = NULL;
    if (!json || cJSON_IsNull(json)) return ZT_OK;
    zt_normalizer *n = calloc(1, sizeof *n);
    if (!n) return zt_fail(ZT_ENOMEM, "out of memory");
    zt_status st = read_step(n, json, where);
    if (st || (n->kind == N_SEQUENCE && !n->nsteps)) { /* an empty Sequence does nothing */
        zt_normalizer_free(n);
        return st;
    }
    *out = n;
    return ZT_OK;
}

void zt_normalizer_free(zt_normalizer *n)
{
    if (!n) return;
    for (int i = 0; i < n->nsteps; i++) zt_normalizer_free(n->steps[i]);
    free(n->steps);
    free(n->text);
    zt_pretok_free(n->pattern);
    free(n);
}

/* --- normalizing ---------------------------------------------------------------------- */

/* Grows *u to hold at least need UTF-16 units. */
static zt_status reserve16(UChar **u, int32_t *cap, int32_t need)
{
    if (need <= *cap) return ZT_OK;
    UChar *p = realloc(*u, (size_t)need * sizeof *p);
    if (!p) return zt_fail(ZT_ENOMEM, "out of memory for %d UTF-16 units", (int)need);
    *u = p;
    *cap = need;
    return ZT_OK;
}

/* Runs ICU's normalizer (or, without one, the lowercase of each character on
 * its own, as Rust's char::to_lowercase: no final-sigma rule) on valid UTF-8. */
static zt_status icu_run(const zt_normalizer *n, const char *t, size_t len, zt_buf *out)
{
    if (len > INT32_MAX / 4) return zt_fail(ZT_EUSER, "a text of %zu bytes is too long to normalize", len);
    UChar *src = NULL, *dst = NULL;
    int32_t nsrc = 0, ncap = 0, dcap = 0, ndst = 0;
    UErrorCode err = U_ZERO_ERROR;
    zt_status st = reserve16(&src, &ncap, (int32_t)len + 1);
    if (!st) u_strFromUTF8(src, ncap, &nsrc, t, (int32_t)len, &err);
    if (!st && !U_FAILURE(err)) st = reserve16(&dst, &dcap, 2 * nsrc + 8); /* a first guess, grown on overflow */
    while (!st && !U_FAILURE(err)) {
        err = U_ZERO_ERROR;
        if (n->icu) ndst = unorm2_normalize(n->icu, src, nsrc, dst, dcap, &err);
        else {
            ndst = 0;
            for (int32_t i = 0; i < nsrc && !U_FAILURE(err);) {
                int32_t k = i;
                UChar32 c;
                U16_NEXT(src, i, nsrc, c); /* src[k, i) is one character */
                (void)c;
                ndst += u_strToLower(ndst < dcap ? dst + ndst : NULL, ndst < dcap ? dcap - ndst : 0, src + k, i - k, "",
                                     &err);
            }
        }
        if (err != U_BUFFER_OVERFLOW_ERROR) break;
        st = reserve16(&dst, &dcap, 2 * dcap);
    }
    char *bytes = NULL;
    int32_t nbytes = 0;
    if (!st && !U_FAILURE(err)) u_strToUTF8(NULL, 0, &nbytes, dst, ndst, &err);
    if (err == U_BUFFER_OVERFLOW_ERROR) err = U_ZERO_ERROR;
    if (!st && !U_FAILURE(err) && !(bytes = malloc((size_t)nbytes + 1))) st = zt_fail(ZT_ENOMEM, "out of memory");
    if (!st && !U_FAILURE(err)) u_strToUTF8(bytes, nbytes + 1, NULL, dst, ndst, &err);
    if (!st && U_FAILURE(err)) st = zt_fail(ZT_EIO, "ICU failed normalizing %zu bytes: %s", len, u_errorName(err));
    if (!st) st = zt_buf_append(out, bytes, (size_t)nbytes);
    free(bytes);
    free(src);
    free(dst);
    return st;
}

/* ICU on each run of valid UTF-8; invalid bytes are copied between them. */
static zt_status icu_apply(const zt_normalizer *n, const char *t, size_t len, zt_buf *out)
{
    zt_status st = ZT_OK;
    size_t run = 0, i = 0;
    while (i <= len && !st) {
        uint32_t cp = 0;
        size_t k = i < len ? zt_utf8_next(t + i, len - i, &cp) : 0;
        if (i == len || cp == ZT_UNI_INVALID) {
            if (i > run) st = icu_run(n, t + run, i - run, out);
            if (!st && i < len) st = zt_buf_append(out, t + i, k);
            run = i + k;
        }
        if (i == len) break;
        i += k;
    }
    return st;
}

static int is_space_at(const char *t, size_t len, size_t i, size_t *n)
{
    uint32_t cp;
    *n = zt_utf8_next(t + i, len - i, &cp);
    return zt_uni_class_of(cp) == ZT_UNI_SPACE;
}

static zt_status strip(const zt_normalizer *n, const char *t, size_t len, zt_buf *out)
{
    size_t start = 0, end = len, k;
    while (n->left && start < end && is_space_at(t, end, start, &k)) start += k;
    while (n->right && end > start) {
        size_t p = zt_utf8_prev(t, end);
        if (!is_space_at(t, end, p, &k)) break;
        end = p;
    }
    return zt_buf_append(out, t + start, end - start);
}

/* One step, appending to out (never t's own buffer). */
static zt_status step(const zt_normalizer *n, const char *t, size_t len, zt_buf *out)
{
    zt_status st;
    switch (n->kind) {
    case N_NFC: return zt_nfc(t, len, out);
    case N_NFD:
    case N_NFKC:
    case N_NFKD:
    case N_LOWERCASE: return icu_apply(n, t, len, out);
    case N_STRIP: return strip(n, t, len, out);
    case N_PREPEND: /* only in front of something */
        if (len && (st = zt_buf_append(out, n->text, strlen(n->text)))) return st;
        return zt_buf_append(out, t, len);
    case N_REPLACE: return zt_pretok_replace(n->pattern, t, len, n->text, out);
    case N_SEQUENCE: break;
    }
    /* a Sequence: each step on the last one's text, through two buffers */
    zt_buf a = {0}, b = {0}, *cur = &a, *next = &b;
    st = zt_buf_append(cur, t, len);
    for (int i = 0; i < n->nsteps && !st; i++) {
        next->n = 0;
        st = step(n->steps[i], cur->p, cur->n, next);
        zt_buf *swap = cur;
        cur = next;
        next = swap;
    }
    if (!st) st = zt_buf_append(out, cur->p, cur->n);
    free(a.p);
    free(b.p);
    return st;
}

zt_status zt_normalize(const zt_normalizer *n, const char *text, size_t len, zt_buf *out)
{
    return n ? step(n, text, len, out) : zt_buf_append(out, text, len);
}
