/* jinja: the arena, errors with line:col, UTF-8 helpers, and parsing a
 * template (lexing in jinja_lex.c, the grammar in jinja_parse.c). */
#include "jinja_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- arena ------------------------------------------------------------------------------------ */

struct jx_chunk {
    jx_chunk *next;
    size_t size, used;
    max_align_t data[];
};

enum { CHUNK_BYTES = 64 << 10, BIG_BYTES = 8 << 10 };

void *jx_arena_alloc(jx_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    jx_chunk *h = a->head;
    if (h && h->size - h->used >= n) {
        void *p = (char *)h->data + h->used;
        h->used += n;
        return p;
    }
    size_t size = n > BIG_BYTES ? n : CHUNK_BYTES;
    a->over_cap = size > a->cap || a->total > a->cap - size;
    jx_chunk *c = a->over_cap ? NULL : calloc(1, sizeof *c + size);
    if (!c) return NULL;
    a->total += size;
    c->size = size;
    c->used = n;
    if (size > CHUNK_BYTES && h) { /* a big piece: keep filling the current chunk */
        c->next = h->next;
        h->next = c;
    } else {
        c->next = h;
        a->head = c;
    }
    return c->data;
}

void jx_arena_free(jx_arena *a)
{
    for (jx_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
    a->total = 0;
}

/* --- errors ----------------------------------------------------------------------------------- */

void jx_fail(jx_err *e, uint32_t pos, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = 1, col = 1;
    for (size_t i = 0; i < pos && i < e->len; i++) {
        unsigned char ch = (unsigned char)e->src[i];
        if (ch == '\n') line++, col = 1;
        else if ((ch & 0xC0) != 0x80) col++;
    }
    zt_fail(ZT_EUSER, "%s:%d:%d: %s", e->name, line, col, msg);
    longjmp(e->jmp, ZT_EUSER);
}

void jx_oom(jx_err *e, const jx_arena *a, uint32_t pos)
{
    if (!a->over_cap) {
        zt_fail(ZT_ENOMEM, "%s: out of memory", e->name);
        longjmp(e->jmp, ZT_ENOMEM);
    }
    jx_fail(e, pos, "the template needs more than %zu MiB of memory", a->cap >> 20);
}

void *jx_alloc(jx_err *e, jx_arena *a, size_t n, uint32_t pos)
{
    void *p = jx_arena_alloc(a, n);
    if (!p) jx_oom(e, a, pos);
    return p;
}

/* --- UTF-8 ------------------------------------------------------------------------------------ */

/* Strict decoding: the length of a valid sequence, 0 for an invalid one. */
static int utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80) return *cp = u[0], 1;
    int len = u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : u[0] >= 0xC2 ? 2 : 0;
    if (!len || (size_t)len > n || u[0] > 0xF4) return 0;
    uint32_t c = u[0] & (0x7F >> len);
    for (int k = 1; k < len; k++) {
        if ((u[k] & 0xC0) != 0x80) return 0;
        c = c << 6 | (u[k] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

int jx_utf8_next(const char *s, size_t n, uint32_t *cp)
{
    int len = utf8_decode(s, n, cp);
    if (len) return len;
    *cp = 0xFFFD;
    return 1;
}

size_t jx_utf8_prev(const char *s, size_t n)
{
    size_t i = n - 1;
    for (int k = 0; k < 3 && i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80; k++) i--;
    uint32_t cp;
    return utf8_decode(s + i, n - i, &cp) == (int)(n - i) ? i : n - 1;
}

int jx_utf8_put(char *out, uint32_t cp)
{
    if (cp < 0x80) return out[0] = (char)cp, 1;
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 0x3F)), out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F)), out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int jx_isspace(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

size_t jx_space_prefix(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int l = jx_utf8_next(s + i, n - i, &cp);
        if (!jx_isspace(cp)) break;
        i += (size_t)l;
    }
    return i;
}

size_t jx_space_suffix(const char *s, size_t n)
{
    size_t end = n;
    while (end > 0) {
        size_t start = jx_utf8_prev(s, end);
        uint32_t cp;
        jx_utf8_next(s + start, end - start, &cp);
        if (!jx_isspace(cp)) break;
        end = start;
    }
    return n - end;
}

size_t zt_jinja_strip(const char *s, size_t n, int left, int right, size_t *begin)
{
    *begin = left ? jx_space_prefix(s, n) : 0;
    return n - *begin - (right ? jx_space_suffix(s + *begin, n - *begin) : 0);
}

size_t jx_utf8_count(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)jx_utf8_next(s + i, n - i, &cp);
        count++;
    }
    return count;
}

/* --- parsing ---------------------------------------------------------------------------------- */

static void parse_all(jx_err *e, zt_jinja *t)
{
    for (size_t i = 0; i < t->len;) {
        uint32_t cp;
        int l = utf8_decode(t->src + i, t->len - i, &cp);
        if (!l) jx_fail(e, (uint32_t)i, "invalid UTF-8");
        i += (size_t)l;
    }
    t->body = jx_parse(e, &t->arena, jx_lex(e, &t->arena, t->src, t->len));
}

zt_status zt_jinja_parse(zt_jinja **out, const char *src, size_t len, const char *name)
{
    *out = NULL;
    if (len > ZT_JINJA_MAX_SOURCE)
        return zt_fail(ZT_EUSER, "%s: the template is larger than %u MiB", name, ZT_JINJA_MAX_SOURCE >> 20);
    zt_jinja *t = calloc(1, sizeof *t);
    if (t) t->name = strdup(name);
    if (t) t->src = malloc(len + 1);
    if (!t || !t->name || !t->src) {
        zt_jinja_free(t);
        return zt_fail(ZT_ENOMEM, "%s: out of memory", name);
    }
    t->arena.cap = SIZE_MAX;
    /* as Jinja does: every newline becomes \n, and one trailing newline is dropped */
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            if (i + 1 < len && src[i + 1] == '\n') i++;
            t->src[t->len++] = '\n';
        } else {
            t->src[t->len++] = src[i];
        }
    }
    if (t->len && t->src[t->len - 1] == '\n') t->len--;
    t->src[t->len] = 0;

    jx_err e = {.name = t->name, .src = t->src, .len = t->len};
    int code = setjmp(e.jmp);
    if (code) {
        zt_jinja_free(t);
        return (zt_status)code;
    }
    parse_all(&e, t);
    *out = t;
    return ZT_OK;
}

void zt_jinja_free(zt_jinja *t)
{
    if (!t) return;
    jx_arena_free(&t->arena);
    free(t->name);
    free(t->src);
    free(t);
}
