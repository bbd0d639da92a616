/* Added tokens: special tokens (<|im_start|>, <s>) and user tokens that are
 * cut out of the text before the model sees it, found the way Hugging Face's
 * AddedVocabulary finds them. */
#define _GNU_SOURCE /* qsort_r */
#include <stdlib.h>
#include <string.h>

#include "tokenizers/tok_internal.h"
#include "tokenizers/unicode.h"

static uint8_t kind_bit(int normalized) { return normalized ? 2 : 1; }

static int cmp_by_id(const void *a, const void *b, void *arg)
{
    const zt_added_token *t = arg;
    int32_t x = t[*(const int *)a].id, y = t[*(const int *)b].id;
    return (x > y) - (x < y);
}

static int cmp_by_first(const void *a, const void *b, void *arg)
{
    const zt_added_token *t = arg, *x = &t[*(const int *)a], *y = &t[*(const int *)b];
    unsigned char fx = (unsigned char)x->content[0], fy = (unsigned char)y->content[0];
    if (fx != fy) return (fx > fy) - (fx < fy);
    return (x->len < y->len) - (x->len > y->len); /* longest first */
}

static void reindex(zt_added_set *s)
{
    for (int i = 0; i < s->n; i++) s->by_id[i] = s->by_first[i] = i;
    qsort_r(s->by_id, (size_t)s->n, sizeof(int), cmp_by_id, s->tok);
    qsort_r(s->by_first, (size_t)s->n, sizeof(int), cmp_by_first, s->tok);
    int k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < s->n && (unsigned char)s->tok[s->by_first[k]].content[0] < b) k++;
        s->first[b] = k;
    }
    memset(s->starts, 0, sizeof s->starts);
    for (int i = 0; i < s->n; i++)
        s->starts[(unsigned char)s->tok[i].content[0]] |= kind_bit(s->tok[i].flags & ZT_ADDED_NORMALIZED);
}

zt_status zt_added_put(zt_added_set *s, const char *content, size_t len, int32_t id, unsigned flags)
{
    if (len == 0) return zt_fail(ZT_EUSER, "an added token is empty");
    zt_added_token *t = (zt_added_token *)zt_added_by_content(s, content, len);
    if (!t) {
        if (s->n == s->cap) {
            int cap = s->cap ? 2 * s->cap : 16;
            zt_added_token *tok = realloc(s->tok, (size_t)cap * sizeof *tok);
            if (tok) s->tok = tok;
            int *by_id = tok ? realloc(s->by_id, (size_t)cap * sizeof *by_id) : NULL;
            if (by_id) s->by_id = by_id;
            int *by_first = by_id ? realloc(s->by_first, (size_t)cap * sizeof *by_first) : NULL;
            if (!by_first) return zt_fail(ZT_ENOMEM, "out of memory for %d added tokens", cap);
            s->by_first = by_first;
            s->cap = cap;
        }
        char *c = malloc(len + 1);
        if (!c) return zt_fail(ZT_ENOMEM, "out of memory for an added token");
        memcpy(c, content, len);
        c[len] = 0;
        t = &s->tok[s->n++];
        t->content = c;
        t->len = len;
    }
    t->id = id;
    t->flags = flags;
    reindex(s);
    return ZT_OK;
}

const zt_added_token *zt_added_by_id(const zt_added_set *s, int32_t id)
{
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const zt_added_token *t = &s->tok[s->by_id[mid]];
        if (t->id == id) return t;
        if (t->id < id) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

const zt_added_token *zt_added_by_content(const zt_added_set *s, const char *content, size_t len)
{
    if (len == 0) return NULL;
    unsigned char b = (unsigned char)content[0];
    for (int k = s->first[b]; k < s->first[b + 1]; k++) {
        const zt_added_token *t = &s->tok[s->by_first[k]];
        if (t->len == len && memcmp(t->content, content, len) == 0) return t;
    }
    return NULL;
}

static int space_at(const char *text, size_t len, size_t i, size_t *n)
{
    uint32_t cp;
    *n = zt_utf8_next(text + i, len - i, &cp);
    return zt_uni_class_of(cp) == ZT_UNI_SPACE;
}

/* single_word: neither neighbour of text[start, end) is a word character */
static int is_single_word(const char *text, size_t len, size_t start, size_t end)
{
    uint32_t cp;
    if (start > 0) {
        size_t p = zt_utf8_prev(text, start);
        zt_utf8_next(text + p, start - p, &cp);
        if (zt_uni_is_word(cp)) return 0;
    }
    if (end < len) {
        zt_utf8_next(text + end, len - end, &cp);
        if (zt_uni_is_word(cp)) return 0;
    }
    return 1;
}

int zt_added_next(const zt_added_set *s, const char *text, size_t len, size_t from, size_t floor, int normalized,
                  int parse_special, zt_added_match *m)
{
    uint8_t kind = kind_bit(normalized);
    for (size_t p = from; p < len; p++) {
        if (!(s->starts[(unsigned char)text[p]] & kind)) continue;
        unsigned char b = (unsigned char)text[p];
        for (int k = s->first[b]; k < s->first[b + 1]; k++) {
            const zt_added_token *t = &s->tok[s->by_first[k]];
            if (!(t->flags & ZT_ADDED_NORMALIZED) != !normalized) continue;
            if ((t->flags & ZT_ADDED_SPECIAL) && !parse_special) continue;
            if (t->len > len - p || memcmp(text + p, t->content, t->len) != 0) continue;
            size_t start = p, end = p + t->len, n;
            if ((t->flags & ZT_ADDED_SINGLE_WORD) && !is_single_word(text, len, start, end)) {
                p = end - 1; /* the search goes on after the discarded match */
                break;
            }
            if (t->flags & ZT_ADDED_LSTRIP)
                while (start > floor) {
                    size_t q = zt_utf8_prev(text, start);
                    if (!space_at(text, start, q, &n)) break;
                    start = q;
                }
            if (t->flags & ZT_ADDED_RSTRIP)
                while (end < len && space_at(text, len, end, &n)) end += n;
            m->start = start;
            m->end = end;
            m->tok = t;
            return 1;
        }
    }
    return 0;
}

void zt_added_free(zt_added_set *s)
{
    for (int i = 0; i < s->n; i++) free(s->tok[i].content);
    free(s->tok);
    free(s->by_id);
    free(s->by_first);
    memset(s, 0, sizeof *s);
}
