/* jinja values: strings, lists and dicts in the render's arena, and the
 * Python semantics the templates rely on: truth, ==, ordering, str(), repr(),
 * json.dumps, iteration, attribute and item lookup, slicing. */
#include "jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- building ------------------------------------------------------------------------------- */

static void *alloc(jx_ctx *c, size_t n, uint32_t pos) { return jx_alloc(&c->err, &c->arena, n, pos); }

jx_str *jx_str_new(jx_ctx *c, uint32_t pos, const char *s, size_t n)
{
    if (n > SIZE_MAX / 2) jx_oom(&c->err, &c->arena, pos);
    jx_str *str = alloc(c, sizeof *str + n + 1, pos);
    if (n) memcpy(str->s, s, n);
    str->len = n;
    return str;
}

jx_str *jx_str_cat(jx_ctx *c, uint32_t pos, const jx_str *a, const jx_str *b)
{
    if (!b->len) return (jx_str *)a;
    if (!a->len) return (jx_str *)b;
    if (a->len > SIZE_MAX / 4 || b->len > SIZE_MAX / 4) jx_oom(&c->err, &c->arena, pos);
    jx_str *s = jx_alloc(&c->err, &c->arena, sizeof *s + a->len + b->len + 1, pos);
    memcpy(s->s, a->s, a->len);
    memcpy(s->s + a->len, b->s, b->len);
    s->len = a->len + b->len;
    return s;
}

static void buf_reserve(jx_buf *b, size_t more)
{
    if (b->cap - b->n > more) return; /* room for the NUL as well */
    if (more > SIZE_MAX / 4 || b->n > SIZE_MAX / 4) jx_oom(&b->c->err, &b->c->arena, b->pos);
    size_t cap = b->cap ? 2 * b->cap : 64;
    while (cap - b->n <= more) cap *= 2;
    jx_str *s = alloc(b->c, sizeof *s + cap, b->pos);
    if (b->n) memcpy(s->s, b->p, b->n);
    b->p = s->s, b->cap = cap;
}

void jx_buf_put(jx_buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}

void jx_buf_putc(jx_buf *b, char ch) { jx_buf_put(b, &ch, 1); }
void jx_buf_puts(jx_buf *b, const char *s) { jx_buf_put(b, s, strlen(s)); }

jx_str *jx_buf_str(jx_buf *b)
{
    buf_reserve(b, 0);
    jx_str *s = (jx_str *)(b->p - offsetof(jx_str, s));
    s->len = b->n;
    s->s[b->n] = 0;
    return s;
}

jx_list *jx_list_new(jx_ctx *c, uint32_t pos, size_t n)
{
    if (n > SIZE_MAX / (4 * sizeof(jx_val))) jx_oom(&c->err, &c->arena, pos);
    jx_list *l = alloc(c, sizeof *l + n * sizeof(jx_val), pos);
    l->n = n;
    return l;
}

jx_dict *jx_dict_new(jx_ctx *c, uint32_t pos) { return alloc(c, sizeof(jx_dict), pos); }

static int scalar_eq(jx_val a, jx_val b)
{
    if (a.kind == JX_STR && b.kind == JX_STR) return a.s->len == b.s->len && !memcmp(a.s->s, b.s->s, a.s->len);
    jx_ctx *none = NULL;
    return jx_equal(none, 0, a, b, ZT_JINJA_MAX_DEPTH);
}

const jx_val *jx_dict_get(const jx_dict *d, const char *key, size_t n)
{
    for (size_t k = 0; k < d->n; k++)
        if (d->keys[k].kind == JX_STR && d->keys[k].s->len == n && !memcmp(d->keys[k].s->s, key, n)) return &d->vals[k];
    return NULL;
}

const jx_val *jx_dict_find(const jx_dict *d, jx_val key)
{
    if (key.kind == JX_STR) return jx_dict_get(d, key.s->s, key.s->len);
    for (size_t k = 0; k < d->n; k++)
        if (d->keys[k].kind != JX_STR && scalar_eq(d->keys[k], key)) return &d->vals[k];
    return NULL;
}

void jx_dict_set(jx_ctx *c, uint32_t pos, jx_dict *d, jx_val key, jx_val val)
{
    jx_val *old = (jx_val *)jx_dict_find(d, key);
    if (old) {
        *old = val;
        return;
    }
    if (key.kind == JX_LIST || key.kind == JX_DICT || key.kind == JX_NS)
        jx_fail(&c->err, pos, "unhashable type: '%s'", jx_type_name(key));
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 8;
        jx_val *keys = alloc(c, cap * sizeof *keys, pos), *vals = alloc(c, cap * sizeof *vals, pos);
        if (d->n) {
            memcpy(keys, d->keys, d->n * sizeof *keys);
            memcpy(vals, d->vals, d->n * sizeof *vals);
        }
        d->keys = keys, d->vals = vals, d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n++] = val;
}

/* --- Python semantics ------------------------------------------------------------------------- */

const char *jx_type_name(jx_val v)
{
    switch (v.kind) {
    case JX_MISSING:
    case JX_UNDEF: return "Undefined";
    case JX_NONE: return "NoneType";
    case JX_BOOL: return "bool";
    case JX_INT: return "int";
    case JX_FLOAT: return "float";
    case JX_STR: return "str";
    case JX_LIST: return v.l->generator ? "generator" : v.l->tuple ? "tuple" : "list";
    case JX_DICT: return "dict";
    case JX_NS: return "Namespace";
    case JX_LOOP: return "LoopContext";
    case JX_FUNC: return "function";
    case JX_METHOD: return "builtin_function_or_method";
    case JX_MACRO: return "Macro";
    }
    return "?";
}

int jx_truthy(jx_val v)
{
    switch (v.kind) {
    case JX_MISSING:
    case JX_UNDEF:
    case JX_NONE: return 0;
    case JX_BOOL:
    case JX_INT: return v.i != 0;
    case JX_FLOAT: return v.f != 0;
    case JX_STR: return v.s->len != 0;
    case JX_LIST: return v.l->generator || v.l->n != 0;
    case JX_DICT: return v.d->n != 0;
    default: return 1;
    }
}

static int is_number(jx_val v) { return v.kind == JX_BOOL || v.kind == JX_INT || v.kind == JX_FLOAT; }

static void too_deep(jx_ctx *c, uint32_t pos, int depth)
{
    if (depth <= 0) jx_fail(&c->err, pos, "a value is nested deeper than %d levels", ZT_JINJA_MAX_DEPTH);
}

/* c may be NULL for scalars (used by dict lookups) */
int jx_equal(jx_ctx *c, uint32_t pos, jx_val a, jx_val b, int depth)
{
    if (a.kind == JX_MISSING) a.kind = JX_UNDEF;
    if (b.kind == JX_MISSING) b.kind = JX_UNDEF;
    if (is_number(a) && is_number(b)) {
        if (a.kind != JX_FLOAT && b.kind != JX_FLOAT) return a.i == b.i;
        if (a.kind == JX_FLOAT && b.kind == JX_FLOAT) return a.f == b.f;
        double f = a.kind == JX_FLOAT ? a.f : b.f;
        int64_t i = a.kind == JX_FLOAT ? b.i : a.i;
        return f == floor(f) && f >= -0x1p63 && f < 0x1p63 && (int64_t)f == i;
    }
    if (a.kind != b.kind) return 0;
    switch (a.kind) {
    case JX_UNDEF:
    case JX_NONE: return 1;
    case JX_STR: return a.s->len == b.s->len && !memcmp(a.s->s, b.s->s, a.s->len);
    case JX_LIST:
        if (a.l == b.l) return 1;
        if (a.l->n != b.l->n || a.l->tuple != b.l->tuple || a.l->generator || b.l->generator || !c) return 0;
        too_deep(c, pos, depth);
        for (size_t k = 0; k < a.l->n; k++)
            if (!jx_equal(c, pos, a.l->v[k], b.l->v[k], depth - 1)) return 0;
        return 1;
    case JX_DICT:
        if (a.d == b.d) return 1;
        if (a.d->n != b.d->n || !c) return 0;
        too_deep(c, pos, depth);
        for (size_t k = 0; k < a.d->n; k++) {
            const jx_val *v = jx_dict_find(b.d, a.d->keys[k]);
            if (!v || !jx_equal(c, pos, a.d->vals[k], *v, depth - 1)) return 0;
        }
        return 1;
    case JX_FUNC: return a.i == b.i;
    default: return a.d == b.d; /* identity */
    }
}

static int apply_order(jx_op op, int cmp)
{
    return op == JO_LT ? cmp < 0 : op == JO_LE ? cmp <= 0 : op == JO_GT ? cmp > 0 : cmp >= 0;
}

int jx_order(jx_ctx *c, uint32_t pos, jx_op op, jx_val a, jx_val b, int depth)
{
    if (is_number(a) && is_number(b)) {
        if (a.kind != JX_FLOAT && b.kind != JX_FLOAT) return apply_order(op, (a.i > b.i) - (a.i < b.i));
        double x = a.kind == JX_FLOAT ? a.f : (double)a.i, y = b.kind == JX_FLOAT ? b.f : (double)b.i;
        return op == JO_LT ? x < y : op == JO_LE ? x <= y : op == JO_GT ? x > y : x >= y;
    }
    if (a.kind == JX_STR && b.kind == JX_STR) {
        size_t n = a.s->len < b.s->len ? a.s->len : b.s->len;
        int cmp = memcmp(a.s->s, b.s->s, n);
        if (!cmp) cmp = (a.s->len > b.s->len) - (a.s->len < b.s->len);
        return apply_order(op, cmp);
    }
    if (a.kind == JX_LIST && b.kind == JX_LIST && a.l->tuple == b.l->tuple) {
        too_deep(c, pos, depth);
        size_t n = a.l->n < b.l->n ? a.l->n : b.l->n;
        for (size_t k = 0; k < n; k++)
            if (!jx_equal(c, pos, a.l->v[k], b.l->v[k], depth - 1))
                return jx_order(c, pos, op, a.l->v[k], b.l->v[k], depth - 1);
        return apply_order(op, (a.l->n > b.l->n) - (a.l->n < b.l->n));
    }
    if (a.kind == JX_UNDEF || a.kind == JX_MISSING) jx_fail_undefined(c, pos, a);
    if (b.kind == JX_UNDEF || b.kind == JX_MISSING) jx_fail_undefined(c, pos, b);
    static const char *const sym[] = {[JO_LT] = "<", [JO_LE] = "<=", [JO_GT] = ">", [JO_GE] = ">="};
    jx_fail(&c->err, pos, "'%s' is not supported between '%s' and '%s'", sym[op], jx_type_name(a), jx_type_name(b));
}

void jx_fail_undefined(jx_ctx *c, uint32_t pos, jx_val v)
{
    const jx_node *n = v.kind == JX_UNDEF ? v.node : NULL;
    if (n && (n->kind == JN_NAME || n->kind == JN_ATTR) && n->name)
        jx_fail(&c->err, pos, "'%.*s' is undefined", (int)(n->name->len < 100 ? n->name->len : 100), n->name->s);
    jx_fail(&c->err, pos, "a value is undefined");
}

/* --- printing --------------------------------------------------------------------------------- */

void jx_fmt_float(double f, char out[32])
{
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    /* the shortest digits that read back to f, placed as Python's repr places them */
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    char digits[24];
    int nd = 0, neg = tmp[0] == '-';
    const char *p = tmp + neg;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = out;
    if (neg) *o++ = '-';
    int decpt = exp + 1;
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            *o++ = '0', *o++ = '.';
            for (int k = 0; k < -decpt; k++) *o++ = '0';
            memcpy(o, digits, (size_t)nd), o += nd;
        } else if (decpt >= nd) {
            memcpy(o, digits, (size_t)nd), o += nd;
            for (int k = nd; k < decpt; k++) *o++ = '0';
            *o++ = '.', *o++ = '0';
        } else {
            memcpy(o, digits, (size_t)decpt), o += decpt;
            *o++ = '.';
            memcpy(o, digits + decpt, (size_t)(nd - decpt)), o += nd - decpt;
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)(nd - 1)), o += nd - 1;
        }
        snprintf(o, 8, "e%c%02d", exp < 0 ? '-' : '+', (exp < 0 ? -exp : exp) % 1000); /* |exp| <= 324 */
    }
}

static void put_scalar(jx_buf *b, jx_val v)
{
    char tmp[32];
    switch (v.kind) {
    case JX_NONE: jx_buf_puts(b, "None"); return;
    case JX_BOOL: jx_buf_puts(b, v.i ? "True" : "False"); return;
    case JX_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.i);
        jx_buf_puts(b, tmp);
        return;
    case JX_FLOAT:
        jx_fmt_float(v.f, tmp);
        jx_buf_puts(b, tmp);
        return;
    default: return;
    }
}

/* Code points Python's repr escapes (an approximation of "not printable"). */
static int unprintable(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp < 0xA0) || (cp != ' ' && jx_isspace(cp)) || cp == 0xAD ||
           (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x2060 && cp <= 0x2064) || cp == 0xFEFF;
}

static void put_quoted(jx_buf *b, const jx_str *s)
{
    char q = memchr(s->s, '\'', s->len) && !memchr(s->s, '"', s->len) ? '"' : '\'';
    jx_buf_putc(b, q);
    for (size_t i = 0; i < s->len;) {
        uint32_t cp;
        int l = jx_utf8_next(s->s + i, s->len - i, &cp);
        char tmp[16];
        if (cp == '\\' || cp == (uint32_t)q) {
            jx_buf_putc(b, '\\'), jx_buf_putc(b, (char)cp);
        } else if (cp == '\n' || cp == '\r' || cp == '\t') {
            jx_buf_putc(b, '\\'), jx_buf_putc(b, cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't');
        } else if (l == 1 && cp == 0xFFFD && (unsigned char)s->s[i] >= 0x80) {
            snprintf(tmp, sizeof tmp, "\\x%02x", (unsigned char)s->s[i]); /* an invalid byte */
            jx_buf_puts(b, tmp);
        } else if (unprintable(cp)) {
            snprintf(tmp, sizeof tmp, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
            jx_buf_puts(b, tmp);
        } else {
            jx_buf_put(b, s->s + i, (size_t)l);
        }
        i += (size_t)l;
    }
    jx_buf_putc(b, q);
}

void jx_put_repr(jx_buf *b, jx_val v, int depth)
{
    switch (v.kind) {
    case JX_MISSING:
    case JX_UNDEF: jx_buf_puts(b, "Undefined"); return;
    case JX_STR: put_quoted(b, v.s); return;
    case JX_LIST:
        if (v.l->generator) {
            jx_buf_puts(b, "<generator object>");
            return;
        }
        too_deep(b->c, b->pos, depth);
        jx_buf_putc(b, v.l->tuple ? '(' : '[');
        for (size_t k = 0; k < v.l->n; k++) {
            if (k) jx_buf_puts(b, ", ");
            jx_put_repr(b, v.l->v[k], depth - 1);
        }
        if (v.l->tuple && v.l->n == 1) jx_buf_putc(b, ',');
        jx_buf_putc(b, v.l->tuple ? ')' : ']');
        return;
    case JX_DICT:
    case JX_NS:
        too_deep(b->c, b->pos, depth);
        if (v.kind == JX_NS) jx_buf_puts(b, "<Namespace ");
        jx_buf_putc(b, '{');
        for (size_t k = 0; k < v.d->n; k++) {
            if (k) jx_buf_puts(b, ", ");
            jx_put_repr(b, v.d->keys[k], depth - 1);
            jx_buf_puts(b, ": ");
            jx_put_repr(b, v.d->vals[k], depth - 1);
        }
        jx_buf_putc(b, '}');
        if (v.kind == JX_NS) jx_buf_putc(b, '>');
        return;
    case JX_LOOP: {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "<LoopContext %zu/%zu>", v.loop->index0 + 1, v.loop->items->n);
        jx_buf_puts(b, tmp);
        return;
    }
    case JX_FUNC: jx_buf_puts(b, "<function>"); return;
    case JX_METHOD: jx_buf_puts(b, "<built-in method>"); return;
    case JX_MACRO:
        jx_buf_puts(b, "<Macro '");
        jx_buf_puts(b, v.mac->def->name ? v.mac->def->name->s : "caller");
        jx_buf_puts(b, "'>");
        return;
    default: put_scalar(b, v); return;
    }
}

void jx_put_str(jx_buf *b, jx_val v, int depth)
{
    if (v.kind == JX_STR) jx_buf_put(b, v.s->s, v.s->len);
    else if (v.kind != JX_UNDEF && v.kind != JX_MISSING) jx_put_repr(b, v, depth);
}

jx_str *jx_to_str(jx_ctx *c, uint32_t pos, jx_val v)
{
    if (v.kind == JX_STR) return v.s;
    jx_buf b = {.c = c, .pos = pos};
    jx_put_str(&b, v, ZT_JINJA_MAX_DEPTH);
    return jx_buf_str(&b);
}

/* --- JSON (json.dumps) ------------------------------------------------------------------------ */

static void json_string(jx_buf *b, const char *s, size_t n, int ensure_ascii)
{
    jx_buf_putc(b, '"');
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = jx_utf8_next(s + i, n - i, &cp);
        char tmp[16];
        switch (cp) {
        case '"': jx_buf_puts(b, "\\\""); break;
        case '\\': jx_buf_puts(b, "\\\\"); break;
        case '\n': jx_buf_puts(b, "\\n"); break;
        case '\r': jx_buf_puts(b, "\\r"); break;
        case '\t': jx_buf_puts(b, "\\t"); break;
        case '\b': jx_buf_puts(b, "\\b"); break;
        case '\f': jx_buf_puts(b, "\\f"); break;
        default:
            if (cp < 0x20 || (ensure_ascii && cp >= 0x80 && cp < 0x10000)) {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
                jx_buf_puts(b, tmp);
            } else if (ensure_ascii && cp >= 0x10000) {
                uint32_t v = cp - 0x10000; /* a surrogate pair */
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                jx_buf_puts(b, tmp);
            } else {
                jx_buf_put(b, s + i, (size_t)l);
            }
        }
        i += (size_t)l;
    }
    jx_buf_putc(b, '"');
}

static void json_newline(jx_buf *b, const jx_json_opts *o, int level)
{
    jx_buf_putc(b, '\n');
    for (int k = 0; k < level; k++) jx_buf_put(b, o->indent->s, o->indent->len);
}

static void json_sep(jx_buf *b, const jx_str *sep, const char *dflt)
{
    if (sep) jx_buf_put(b, sep->s, sep->len);
    else jx_buf_puts(b, dflt);
}

static void json_float(jx_buf *b, double f)
{
    char tmp[32];
    if (isnan(f)) strcpy(tmp, "NaN");
    else if (isinf(f)) strcpy(tmp, f < 0 ? "-Infinity" : "Infinity");
    else jx_fmt_float(f, tmp);
    jx_buf_puts(b, tmp);
}

static int key_order(const void *x, const void *y)
{
    const jx_val *a = *(const jx_val *const *)x, *b = *(const jx_val *const *)y;
    size_t n = a->s->len < b->s->len ? a->s->len : b->s->len;
    int cmp = memcmp(a->s->s, b->s->s, n);
    return cmp ? cmp : (a->s->len > b->s->len) - (a->s->len < b->s->len);
}

void jx_put_json(jx_buf *b, jx_val v, const jx_json_opts *o, int level)
{
    jx_ctx *c = b->c;
    switch (v.kind) {
    case JX_NONE: jx_buf_puts(b, "null"); return;
    case JX_BOOL: jx_buf_puts(b, v.i ? "true" : "false"); return;
    case JX_INT: put_scalar(b, v); return;
    case JX_FLOAT: json_float(b, v.f); return;
    case JX_STR: json_string(b, v.s->s, v.s->len, o->ensure_ascii); return;
    case JX_LIST:
        if (v.l->generator) jx_fail(&c->err, b->pos, "Object of type generator is not JSON serializable");
        too_deep(c, b->pos, ZT_JINJA_MAX_DEPTH - level);
        if (!v.l->n) {
            jx_buf_puts(b, "[]");
            return;
        }
        jx_buf_putc(b, '[');
        for (size_t k = 0; k < v.l->n; k++) {
            if (k) json_sep(b, o->item_sep, o->indent ? "," : ", ");
            if (o->indent) json_newline(b, o, level + 1);
            jx_put_json(b, v.l->v[k], o, level + 1);
        }
        if (o->indent) json_newline(b, o, level);
        jx_buf_putc(b, ']');
        return;
    case JX_DICT: {
        too_deep(c, b->pos, ZT_JINJA_MAX_DEPTH - level);
        if (!v.d->n) {
            jx_buf_puts(b, "{}");
            return;
        }
        size_t n = v.d->n;
        const jx_val **keys = jx_alloc(&c->err, &c->arena, n * sizeof *keys, b->pos);
        int all_str = 1;
        for (size_t k = 0; k < n; k++) {
            keys[k] = &v.d->keys[k];
            all_str &= keys[k]->kind == JX_STR;
        }
        if (o->sort_keys) {
            if (!all_str) jx_fail(&c->err, b->pos, "tojson: sort_keys needs string keys");
            qsort(keys, n, sizeof *keys, key_order);
        }
        jx_buf_putc(b, '{');
        for (size_t k = 0; k < n; k++) {
            if (k) json_sep(b, o->item_sep, o->indent ? "," : ", ");
            if (o->indent) json_newline(b, o, level + 1);
            jx_val key = *keys[k];
            if (key.kind == JX_STR) {
                json_string(b, key.s->s, key.s->len, o->ensure_ascii);
            } else if (key.kind == JX_NONE || key.kind == JX_BOOL || key.kind == JX_INT || key.kind == JX_FLOAT) {
                jx_buf_putc(b, '"');
                if (key.kind == JX_FLOAT) json_float(b, key.f);
                else if (key.kind == JX_INT) put_scalar(b, key);
                else jx_buf_puts(b, key.kind == JX_NONE ? "null" : key.i ? "true" : "false");
                jx_buf_putc(b, '"');
            } else {
                jx_fail(&c->err, b->pos, "tojson: keys must be str, int, float, bool or None, not %s",
                        jx_type_name(key));
            }
            json_sep(b, o->key_sep, ": ");
            jx_put_json(b, v.d->vals[keys[k] - v.d->keys], o, level + 1);
        }
        if (o->indent) json_newline(b, o, level);
        jx_buf_putc(b, '}');
        return;
    }
    default: jx_fail(&c->err, b->pos, "tojson: object of type %s is not JSON serializable", jx_type_name(v));
    }
}

/* --- iteration and lookup --------------------------------------------------------------------- */

/* byte offsets of each code point of s, plus the end */
static size_t *char_offsets(jx_ctx *c, uint32_t pos, const jx_str *s, size_t *count)
{
    size_t n = jx_utf8_count(s->s, s->len), k = 0;
    size_t *off = alloc(c, (n + 1) * sizeof *off, pos);
    for (size_t i = 0; i < s->len; k++) {
        uint32_t cp;
        off[k] = i;
        i += (size_t)jx_utf8_next(s->s + i, s->len - i, &cp);
    }
    off[n] = s->len;
    *count = n;
    return off;
}

jx_list *jx_iterate(jx_ctx *c, uint32_t pos, jx_val v)
{
    switch (v.kind) {
    case JX_LIST: {
        if (!v.l->generator) return v.l;
        jx_list *l = jx_list_new(c, pos, v.l->n); /* a generator's items, once */
        memcpy(l->v, v.l->v, v.l->n * sizeof(jx_val));
        v.l->n = 0;
        return l;
    }
    case JX_MISSING:
    case JX_UNDEF: return jx_list_new(c, pos, 0);
    case JX_DICT: {
        jx_list *l = jx_list_new(c, pos, v.d->n);
        memcpy(l->v, v.d->keys, v.d->n * sizeof(jx_val));
        return l;
    }
    case JX_STR: {
        size_t n;
        size_t *off = char_offsets(c, pos, v.s, &n);
        jx_list *l = jx_list_new(c, pos, n);
        for (size_t k = 0; k < n; k++) l->v[k] = jx_strv(jx_str_new(c, pos, v.s->s + off[k], off[k + 1] - off[k]));
        return l;
    }
    default: jx_fail(&c->err, pos, "'%s' object is not iterable", jx_type_name(v));
    }
}

int jx_method_find(jx_val self, const char *name, size_t n)
{
    static const char *const names[JX_M_COUNT] = {
        [JX_M_STRIP] = "strip",
        [JX_M_LSTRIP] = "lstrip",
        [JX_M_RSTRIP] = "rstrip",
        [JX_M_SPLIT] = "split",
        [JX_M_STARTSWITH] = "startswith",
        [JX_M_ENDSWITH] = "endswith",
        [JX_M_UPPER] = "upper",
        [JX_M_LOWER] = "lower",
        [JX_M_TITLE] = "title",
        [JX_M_CAPITALIZE] = "capitalize",
        [JX_M_REPLACE] = "replace",
        [JX_M_FIND] = "find",
        [JX_M_JOIN] = "join",
        [JX_M_ITEMS] = "items",
        [JX_M_KEYS] = "keys",
        [JX_M_VALUES] = "values",
        [JX_M_GET] = "get",
        [JX_M_CYCLE] = "cycle",
    };
    int lo = self.kind == JX_STR    ? JX_M_STRIP
             : self.kind == JX_DICT ? JX_M_ITEMS
             : self.kind == JX_LOOP ? JX_M_CYCLE
                                    : -1;
    int hi = self.kind == JX_STR ? JX_M_JOIN : self.kind == JX_DICT ? JX_M_GET : JX_M_CYCLE;
    for (int k = lo; lo >= 0 && k <= hi; k++)
        if (strlen(names[k]) == n && !memcmp(names[k], name, n)) return k;
    return -1;
}

static jx_val method(jx_ctx *c, uint32_t pos, jx_val self, int id)
{
    jx_method *m = alloc(c, sizeof *m, pos);
    m->self = self;
    m->id = id;
    return (jx_val){.kind = JX_METHOD, .m = m};
}

static jx_val loop_attr(jx_ctx *c, const jx_loop *L, const char *name, size_t n, const jx_node *node)
{
    size_t len = L->items->n, i = L->index0;
#define IS(s) (n == sizeof s - 1 && !memcmp(name, s, n))
    if (IS("index")) return jx_int((int64_t)i + 1);
    if (IS("index0")) return jx_int((int64_t)i);
    if (IS("revindex")) return jx_int((int64_t)(len - i));
    if (IS("revindex0")) return jx_int((int64_t)(len - i - 1));
    if (IS("first")) return jx_bool(i == 0);
    if (IS("last")) return jx_bool(i + 1 == len);
    if (IS("length")) return jx_int((int64_t)len);
    if (IS("depth")) return jx_int(1);
    if (IS("depth0")) return jx_int(0);
    if (IS("previtem")) return i > 0 ? L->items->v[i - 1] : jx_undef(node);
    if (IS("nextitem")) return i + 1 < len ? L->items->v[i + 1] : jx_undef(node);
#undef IS
    return jx_undef(node);
}

jx_val jx_getattr(jx_ctx *c, uint32_t pos, jx_val obj, const char *name, size_t n, const jx_node *node)
{
    int id;
    switch (obj.kind) {
    case JX_MISSING:
    case JX_UNDEF: jx_fail_undefined(c, pos, obj);
    case JX_DICT:
    case JX_STR:
        if ((id = jx_method_find(obj, name, n)) >= 0) return method(c, pos, obj, id);
        if (obj.kind == JX_STR) return jx_undef(node);
        /* fall through */
    case JX_NS: {
        const jx_val *v = jx_dict_get(obj.d, name, n);
        return v ? *v : jx_undef(node);
    }
    case JX_LOOP:
        if ((id = jx_method_find(obj, name, n)) >= 0) return method(c, pos, obj, id);
        return loop_attr(c, obj.loop, name, n, node);
    default: return jx_undef(node);
    }
}

/* A generator has no items by index: Jinja's lookup then gives undefined. */
static int is_generator(jx_val v) { return v.kind == JX_LIST && v.l->generator; }

jx_val jx_getitem(jx_ctx *c, uint32_t pos, jx_val obj, jx_val key, const jx_node *node)
{
    if (obj.kind == JX_UNDEF || obj.kind == JX_MISSING) jx_fail_undefined(c, pos, obj);
    if (is_generator(obj)) return jx_undef(node);
    if (obj.kind == JX_DICT) {
        const jx_val *v = jx_dict_find(obj.d, key);
        if (v) return *v;
    } else if ((obj.kind == JX_LIST || obj.kind == JX_STR) && (key.kind == JX_INT || key.kind == JX_BOOL)) {
        size_t n = obj.kind == JX_LIST ? obj.l->n : jx_utf8_count(obj.s->s, obj.s->len);
        int64_t i = key.i < 0 ? key.i + (int64_t)n : key.i;
        if (i < 0 || (uint64_t)i >= n) return jx_undef(node);
        if (obj.kind == JX_LIST) return obj.l->v[i];
        const jx_val one = jx_int(1), at = jx_int(i), end = jx_int(i + 1);
        return jx_slice(c, pos, obj, &at, &end, &one);
    }
    /* Jinja falls back to an attribute of that name */
    if (key.kind == JX_STR && obj.kind != JX_DICT) return jx_getattr(c, pos, obj, key.s->s, key.s->len, node);
    if (key.kind == JX_STR) {
        int id = jx_method_find(obj, key.s->s, key.s->len);
        if (id >= 0) return method(c, pos, obj, id);
    }
    return jx_undef(node);
}

static int64_t slice_bound(jx_ctx *c, uint32_t pos, const jx_val *v, int64_t dflt)
{
    if (!v || v->kind == JX_NONE || v->kind == JX_MISSING) return dflt;
    if (v->kind != JX_INT && v->kind != JX_BOOL)
        jx_fail(&c->err, pos, "slice indices must be integers or none, not %s", jx_type_name(*v));
    return v->i;
}

jx_val jx_slice(jx_ctx *c, uint32_t pos, jx_val obj, const jx_val *start, const jx_val *stop, const jx_val *step)
{
    if (obj.kind == JX_UNDEF || obj.kind == JX_MISSING) jx_fail_undefined(c, pos, obj);
    if (is_generator(obj)) return jx_undef(NULL);
    if (obj.kind != JX_LIST && obj.kind != JX_STR)
        jx_fail(&c->err, pos, "'%s' object cannot be sliced", jx_type_name(obj));
    size_t *off = NULL, count;
    if (obj.kind == JX_LIST) count = obj.l->n;
    else off = char_offsets(c, pos, obj.s, &count);
    int64_t n = (int64_t)count, st = slice_bound(c, pos, step, 1);
    if (st == 0) jx_fail(&c->err, pos, "slice step cannot be zero");
    if (st == INT64_MIN) st = -INT64_MAX;
    int64_t lo = st > 0 ? 0 : -1, hi = st > 0 ? n : n - 1;
    int64_t a = slice_bound(c, pos, start, st > 0 ? lo : hi), b = slice_bound(c, pos, stop, st > 0 ? hi : lo);
    if (start && start->kind != JX_NONE && start->kind != JX_MISSING) {
        if (a < 0) a = a < -n ? lo : a + n;
        else if (a > hi) a = hi;
    }
    if (stop && stop->kind != JX_NONE && stop->kind != JX_MISSING) {
        if (b < 0) b = b < -n ? lo : b + n;
        else if (b > hi) b = hi;
    }
    int64_t len = st > 0 ? (b > a ? (b - a - 1) / st + 1 : 0) : (a > b ? (a - b - 1) / -st + 1 : 0);
    if (obj.kind == JX_LIST) {
        jx_list *l = jx_list_new(c, pos, (size_t)len);
        l->tuple = obj.l->tuple;
        for (int64_t k = 0; k < len; k++) l->v[k] = obj.l->v[a + k * st];
        return jx_listv(l);
    }
    if (st == 1) return jx_strv(jx_str_new(c, pos, obj.s->s + off[a], off[a + len] - off[a]));
    jx_buf buf = {.c = c, .pos = pos};
    for (int64_t k = 0; k < len; k++) {
        int64_t i = a + k * st;
        jx_buf_put(&buf, obj.s->s + off[i], off[i + 1] - off[i]);
    }
    return jx_strv(jx_buf_str(&buf));
}
