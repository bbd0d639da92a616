/* jinja builtins: filters, tests, string/dict/loop methods and the
 * global functions, with Jinja's (and Python's) argument conventions. */
#include "jinja_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static jx_err *E(jx_ctx *c) { return &c->err; }

/* Binds positional and keyword arguments to the parameters params[np]; missing ones are JX_MISSING. */
static void bind(jx_ctx *c, uint32_t pos, const char *what, const jx_args *a, const char *const *params, int np,
                 jx_val *out)
{
    if (a->npos > np)
        jx_fail(E(c), pos, "%s takes at most %d argument%s (%d given)", what, np, np == 1 ? "" : "s", a->npos);
    for (int k = 0; k < np; k++) out[k] = k < a->npos ? a->pos[k] : (jx_val){.kind = JX_MISSING};
    for (int k = 0; k < a->nkw; k++) {
        const jx_str *name = a->kwnames[k];
        int p = 0;
        while (p < np && !(strlen(params[p]) == name->len && !memcmp(params[p], name->s, name->len))) p++;
        if (p == np) jx_fail(E(c), pos, "%s got an unexpected keyword argument '%s'", what, name->s);
        if (out[p].kind != JX_MISSING) jx_fail(E(c), pos, "%s got multiple values for argument '%s'", what, name->s);
        out[p] = a->kwvals[k];
    }
}

static int given(jx_val v) { return v.kind != JX_MISSING; }

static void need(jx_ctx *c, uint32_t pos, const char *what, jx_val v, const char *param)
{
    if (!given(v)) jx_fail(E(c), pos, "%s is missing the argument '%s'", what, param);
}

static jx_str *need_str(jx_ctx *c, uint32_t pos, const char *what, jx_val v)
{
    if (v.kind != JX_STR) jx_fail(E(c), pos, "%s needs a string, not %s", what, jx_type_name(v));
    return v.s;
}

static int64_t need_int(jx_ctx *c, uint32_t pos, const char *what, jx_val v)
{
    if (v.kind != JX_INT && v.kind != JX_BOOL) jx_fail(E(c), pos, "%s needs an integer, not %s", what, jx_type_name(v));
    return v.i;
}

static jx_val str_val(jx_ctx *c, uint32_t pos, const char *s, size_t n) { return jx_strv(jx_str_new(c, pos, s, n)); }

/* --- strings ---------------------------------------------------------------------------------- */

static int in_chars(const jx_str *chars, uint32_t cp)
{
    for (size_t i = 0; i < chars->len;) {
        uint32_t x;
        i += (size_t)jx_utf8_next(chars->s + i, chars->len - i, &x);
        if (x == cp) return 1;
    }
    return 0;
}

/* str.strip / lstrip / rstrip; chars NULL strips whitespace */
static jx_val strip(jx_ctx *c, uint32_t pos, const jx_str *s, const jx_str *chars, int left, int right)
{
    size_t b = 0, e = s->len;
    while (left && b < e) {
        uint32_t cp;
        int l = jx_utf8_next(s->s + b, e - b, &cp);
        if (chars ? !in_chars(chars, cp) : !jx_isspace(cp)) break;
        b += (size_t)l;
    }
    while (right && e > b) {
        size_t p = jx_utf8_prev(s->s + b, e - b) + b;
        uint32_t cp;
        jx_utf8_next(s->s + p, e - p, &cp);
        if (chars ? !in_chars(chars, cp) : !jx_isspace(cp)) break;
        e = p;
    }
    return str_val(c, pos, s->s + b, e - b);
}

enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE, CASE_WORDS };

/* Case mapping of ASCII letters; other characters count as cased letters for title() but stay as they are.
 * CASE_WORDS is Jinja's title filter: words start after whitespace or one of -({[< */
static jx_val change_case(jx_ctx *c, uint32_t pos, const jx_str *s, int mode)
{
    jx_str *o = jx_str_new(c, pos, s->s, s->len);
    int prev_cased = 0, first = 1;
    for (size_t i = 0; i < o->len;) {
        uint32_t cp;
        int l = jx_utf8_next(o->s + i, o->len - i, &cp);
        int upper = cp >= 'A' && cp <= 'Z', lower = cp >= 'a' && cp <= 'z';
        int cased = upper || lower || (cp >= 0x80 && !jx_isspace(cp));
        int want_upper = mode == CASE_UPPER || (mode == CASE_TITLE && !prev_cased) ||
                         ((mode == CASE_CAPITALIZE || mode == CASE_WORDS) && first);
        if (want_upper && lower) o->s[i] = (char)(cp - 32);
        if (!want_upper && upper) o->s[i] = (char)(cp + 32);
        prev_cased = cased;
        if (mode == CASE_WORDS && (jx_isspace(cp) || (cp < 0x80 && strchr("-({[<", (int)cp) && cp))) {
            first = 1;
            i += (size_t)l;
            continue;
        }
        first = 0;
        i += (size_t)l;
    }
    return jx_strv(o);
}

static const char *find_bytes(const char *h, size_t hn, const char *n, size_t nn)
{
    if (!nn) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && !memcmp(h + i, n, nn)) return h + i;
    return NULL;
}

static jx_val replace(jx_ctx *c, uint32_t pos, const jx_str *s, const jx_str *old, const jx_str *new, int64_t count)
{
    jx_buf b = {.c = c, .pos = pos};
    size_t i = 0;
    if (!old->len) { /* Python inserts the replacement around every character */
        for (; count != 0; count--) {
            jx_buf_put(&b, new->s, new->len);
            if (i >= s->len) break;
            uint32_t cp;
            int l = jx_utf8_next(s->s + i, s->len - i, &cp);
            jx_buf_put(&b, s->s + i, (size_t)l);
            i += (size_t)l;
        }
    } else {
        for (; count != 0; count--) {
            const char *hit = find_bytes(s->s + i, s->len - i, old->s, old->len);
            if (!hit) break;
            jx_buf_put(&b, s->s + i, (size_t)(hit - s->s) - i);
            jx_buf_put(&b, new->s, new->len);
            i = (size_t)(hit - s->s) + old->len;
        }
    }
    jx_buf_put(&b, s->s + i, s->len - i);
    return jx_strv(jx_buf_str(&b));
}

static jx_val split(jx_ctx *c, uint32_t pos, const jx_str *s, const jx_str *sep, int64_t maxsplit)
{
    jx_val parts[64];
    size_t np = 0, total = 0;
    jx_list *acc = NULL;
#define PART(p, n)                                                                                                     \
    do {                                                                                                               \
        if (np == 64) {                                                                                                \
            jx_list *l = jx_list_new(c, pos, total + np);                                                              \
            if (total) memcpy(l->v, acc->v, total * sizeof(jx_val));                                                   \
            memcpy(l->v + total, parts, np * sizeof(jx_val));                                                          \
            acc = l, total += np, np = 0;                                                                              \
        }                                                                                                              \
        parts[np++] = str_val(c, pos, (p), (n));                                                                       \
    } while (0)
    size_t i = 0;
    if (sep) {
        if (!sep->len) jx_fail(E(c), pos, "split: empty separator");
        for (; maxsplit != 0; maxsplit--) {
            const char *hit = find_bytes(s->s + i, s->len - i, sep->s, sep->len);
            if (!hit) break;
            PART(s->s + i, (size_t)(hit - s->s) - i);
            i = (size_t)(hit - s->s) + sep->len;
        }
        PART(s->s + i, s->len - i);
    } else { /* runs of whitespace separate, and there are no empty parts */
        for (;;) {
            i += jx_space_prefix(s->s + i, s->len - i);
            if (i >= s->len) break;
            if (maxsplit == 0) { /* the rest, trailing whitespace and all */
                PART(s->s + i, s->len - i);
                break;
            }
            size_t e = i;
            while (e < s->len) {
                uint32_t cp;
                int l = jx_utf8_next(s->s + e, s->len - e, &cp);
                if (jx_isspace(cp)) break;
                e += (size_t)l;
            }
            PART(s->s + i, e - i);
            i = e;
            if (maxsplit > 0) maxsplit--;
        }
    }
#undef PART
    jx_list *l = jx_list_new(c, pos, total + np);
    if (total) memcpy(l->v, acc->v, total * sizeof(jx_val));
    memcpy(l->v + total, parts, np * sizeof(jx_val));
    return jx_listv(l);
}

static int affix(jx_ctx *c, uint32_t pos, const jx_str *s, jx_val x, int at_end)
{
    if (x.kind == JX_LIST && x.l->tuple) {
        for (size_t k = 0; k < x.l->n; k++)
            if (affix(c, pos, s, x.l->v[k], at_end)) return 1;
        return 0;
    }
    const jx_str *p = need_str(c, pos, at_end ? "endswith" : "startswith", x);
    return p->len <= s->len && !memcmp(s->s + (at_end ? s->len - p->len : 0), p->s, p->len);
}

static jx_val join(jx_ctx *c, uint32_t pos, jx_list *items, const jx_str *sep, int strict)
{
    jx_buf b = {.c = c, .pos = pos};
    for (size_t k = 0; k < items->n; k++) {
        if (k) jx_buf_put(&b, sep->s, sep->len);
        if (strict && items->v[k].kind != JX_STR)
            jx_fail(E(c), pos, "join: item %zu is %s, not a string", k, jx_type_name(items->v[k]));
        jx_put_str(&b, items->v[k], ZT_JINJA_MAX_DEPTH);
    }
    return jx_strv(jx_buf_str(&b));
}

static const jx_str *opt_str(jx_ctx *c, uint32_t pos, const char *what, jx_val v)
{
    return given(v) && v.kind != JX_NONE ? need_str(c, pos, what, v) : NULL;
}

/* --- containers ------------------------------------------------------------------------------- */

static int64_t length(jx_ctx *c, uint32_t pos, jx_val v)
{
    switch (v.kind) {
    case JX_STR: return (int64_t)jx_utf8_count(v.s->s, v.s->len);
    case JX_LIST:
        if (v.l->generator) jx_fail(E(c), pos, "object of type 'generator' has no len()");
        return (int64_t)v.l->n;
    case JX_DICT: return (int64_t)v.d->n;
    case JX_LOOP: return (int64_t)v.loop->items->n;
    case JX_MISSING:
    case JX_UNDEF: return 0;
    default: jx_fail(E(c), pos, "object of type '%s' has no len()", jx_type_name(v));
    }
}

static jx_val items_of(jx_ctx *c, uint32_t pos, const jx_dict *d)
{
    jx_list *l = jx_list_new(c, pos, d->n);
    for (size_t k = 0; k < d->n; k++) {
        jx_list *pair = jx_list_new(c, pos, 2);
        pair->tuple = 1;
        pair->v[0] = d->keys[k], pair->v[1] = d->vals[k];
        l->v[k] = jx_listv(pair);
    }
    return jx_listv(l);
}

static jx_val dict_part(jx_ctx *c, uint32_t pos, const jx_dict *d, int vals)
{
    jx_list *l = jx_list_new(c, pos, d->n);
    memcpy(l->v, vals ? d->vals : d->keys, d->n * sizeof(jx_val));
    return jx_listv(l);
}

int jx_contains(jx_ctx *c, uint32_t pos, jx_val seq, jx_val x)
{
    switch (seq.kind) {
    case JX_STR:
        if (x.kind != JX_STR) jx_fail(E(c), pos, "'in <string>' needs a string on the left, not %s", jx_type_name(x));
        return find_bytes(seq.s->s, seq.s->len, x.s->s, x.s->len) != NULL;
    case JX_LIST:
        for (size_t k = 0; k < seq.l->n; k++)
            if (jx_equal(c, pos, seq.l->v[k], x, ZT_JINJA_MAX_DEPTH)) return 1;
        return 0;
    case JX_DICT: return jx_dict_find(seq.d, x) != NULL;
    case JX_MISSING:
    case JX_UNDEF: return 0;
    default: jx_fail(E(c), pos, "argument of type '%s' is not iterable", jx_type_name(seq));
    }
}

/* obj.a.b for map/selectattr/join's attribute= */
static jx_val attr_path(jx_ctx *c, uint32_t pos, jx_val obj, const jx_str *path)
{
    size_t i = 0;
    while (i <= path->len) {
        const char *dot = memchr(path->s + i, '.', path->len - i);
        size_t e = dot ? (size_t)(dot - path->s) : path->len;
        if (obj.kind == JX_UNDEF) return obj;
        char *end;
        long long idx = e > i ? strtoll(path->s + i, &end, 10) : 0;
        if (e > i && end == path->s + e) obj = jx_getitem(c, pos, obj, jx_int(idx), NULL);
        else obj = jx_getitem(c, pos, obj, str_val(c, pos, path->s + i, e - i), NULL);
        i = e + 1;
    }
    return obj;
}

/* --- filters ---------------------------------------------------------------------------------- */

typedef jx_val (*filter_fn)(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a);

#define PARAMS(...)                                                                                                    \
    static const char *const params[] = {__VA_ARGS__};                                                                 \
    jx_val p[sizeof params / sizeof *params]
#define BIND(what) bind(c, pos, what, a, params, (int)(sizeof params / sizeof *params), p)

static jx_val f_abs(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "abs", a, NULL, 0, NULL);
    if (v.kind == JX_FLOAT) return jx_float(fabs(v.f));
    int64_t i = need_int(c, pos, "abs", v);
    if (i == INT64_MIN) jx_fail(E(c), pos, "integer overflow");
    return jx_int(i < 0 ? -i : i);
}

static jx_val f_capitalize(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "capitalize", a, NULL, 0, NULL);
    return change_case(c, pos, jx_to_str(c, pos, v), CASE_CAPITALIZE);
}

static jx_val f_length(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "length", a, NULL, 0, NULL);
    return jx_int(length(c, pos, v));
}

static jx_val f_default(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    PARAMS("default_value", "boolean");
    BIND("default");
    int missing = v.kind == JX_UNDEF || v.kind == JX_MISSING || (given(p[1]) && jx_truthy(p[1]) && !jx_truthy(v));
    if (!missing) return v;
    return given(p[0]) ? p[0] : str_val(c, pos, "", 0);
}

static jx_val f_first(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "first", a, NULL, 0, NULL);
    jx_list *l = jx_iterate(c, pos, v);
    return l->n ? l->v[0] : jx_undef(NULL);
}

static jx_val f_last(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "last", a, NULL, 0, NULL);
    if (v.kind == JX_LIST && v.l->generator) jx_fail(E(c), pos, "'generator' object is not reversible");
    jx_list *l = jx_iterate(c, pos, v);
    return l->n ? l->v[l->n - 1] : jx_undef(NULL);
}

/* Python's float(): surrounding whitespace, underscores between digits, inf and nan */
static int parse_float(const jx_str *s, double *out)
{
    size_t b = jx_space_prefix(s->s, s->len), e = s->len - jx_space_suffix(s->s, s->len);
    if (b >= e || e - b > 300) return 0;
    char tmp[320];
    size_t n = 0;
    for (size_t i = b; i < e; i++)
        if (s->s[i] != '_') tmp[n++] = s->s[i];
    tmp[n] = 0;
    if (n && (tmp[0] == 'x' || tmp[n - 1] == 'x' || strpbrk(tmp, "xXpP"))) return 0; /* no hex floats */
    char *end;
    *out = strtod(tmp, &end);
    return end == tmp + n;
}

static jx_val f_float(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    PARAMS("default");
    BIND("float");
    double f;
    if (v.kind == JX_UNDEF || v.kind == JX_MISSING) jx_fail_undefined(c, pos, v);
    if (v.kind == JX_FLOAT) return v;
    if (v.kind == JX_INT || v.kind == JX_BOOL) return jx_float((double)v.i);
    if (v.kind == JX_STR && parse_float(v.s, &f)) return jx_float(f);
    return given(p[0]) ? p[0] : jx_float(0);
}

/* Python's int(s, base) for bases 2..36; 0 reads the prefix. */
static int parse_int(const jx_str *s, int base, int64_t *out)
{
    size_t i = jx_space_prefix(s->s, s->len), e = s->len - jx_space_suffix(s->s, s->len);
    int neg = 0;
    if (i < e && (s->s[i] == '+' || s->s[i] == '-')) neg = s->s[i++] == '-';
    if (base == 0 || base == 16 || base == 8 || base == 2) {
        char p = i + 1 < e && s->s[i] == '0' ? (char)(s->s[i + 1] | 0x20) : 0;
        int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
        if (pb && (base == 0 || base == pb)) base = pb, i += 2;
        else if (base == 0) base = 10;
    }
    uint64_t v = 0;
    int digits = 0;
    for (; i < e; i++) {
        char ch = s->s[i];
        if (ch == '_' && digits && i + 1 < e) continue;
        int d = ch >= '0' && ch <= '9'                     ? ch - '0'
                : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z' ? (ch | 0x20) - 'a' + 10
                                                           : 99;
        if (d >= base) return 0;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return 0;
        v = v * (uint64_t)base + (uint64_t)d;
        digits++;
    }
    if (!digits || v > (uint64_t)INT64_MAX + (uint64_t)neg) return 0;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

static jx_val f_int(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    PARAMS("default", "base");
    BIND("int");
    int64_t i;
    double f;
    int base = given(p[1]) ? (int)need_int(c, pos, "int", p[1]) : 10;
    if (base != 0 && (base < 2 || base > 36)) jx_fail(E(c), pos, "int: base must be 0 or 2..36");
    if (v.kind == JX_UNDEF || v.kind == JX_MISSING) jx_fail_undefined(c, pos, v);
    if (v.kind == JX_INT || v.kind == JX_BOOL) return jx_int(v.i);
    if (v.kind == JX_STR && parse_int(v.s, base, &i)) return jx_int(i);
    if (v.kind == JX_FLOAT) f = v.f;
    else if (v.kind != JX_STR || !parse_float(v.s, &f)) f = NAN;
    if (f >= -0x1p63 && f < 0x1p63) return jx_int((int64_t)f);
    return given(p[0]) ? p[0] : jx_int(0);
}

static jx_val f_items(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "items", a, NULL, 0, NULL);
    if (v.kind == JX_UNDEF || v.kind == JX_MISSING) return jx_listv(jx_list_new(c, pos, 0));
    if (v.kind != JX_DICT) jx_fail(E(c), pos, "items: can only get items of a mapping, not %s", jx_type_name(v));
    return items_of(c, pos, v.d);
}

static jx_val f_join(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    PARAMS("d", "attribute");
    BIND("join");
    jx_list *l = jx_iterate(c, pos, v);
    if (given(p[1]) && p[1].kind != JX_NONE) {
        jx_list *m = jx_list_new(c, pos, l->n);
        for (size_t k = 0; k < l->n; k++) m->v[k] = attr_path(c, pos, l->v[k], jx_to_str(c, pos, p[1]));
        l = m;
    }
    return join(c, pos, l, given(p[0]) ? jx_to_str(c, pos, p[0]) : jx_str_new(c, pos, "", 0), 0);
}

static jx_val f_list(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "list", a, NULL, 0, NULL);
    jx_list *l = jx_iterate(c, pos, v), *o = jx_list_new(c, pos, l->n);
    memcpy(o->v, l->v, l->n * sizeof(jx_val));
    return jx_listv(o);
}

static jx_val f_lower(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "lower", a, NULL, 0, NULL);
    return change_case(c, pos, jx_to_str(c, pos, v), CASE_LOWER);
}

static jx_val f_upper(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "upper", a, NULL, 0, NULL);
    return change_case(c, pos, jx_to_str(c, pos, v), CASE_UPPER);
}

static jx_val f_title(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "title", a, NULL, 0, NULL);
    return change_case(c, pos, jx_to_str(c, pos, v), CASE_WORDS);
}

static jx_val f_replace(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    PARAMS("old", "new", "count");
    BIND("replace");
    need(c, pos, "replace", p[0], "old");
    need(c, pos, "replace", p[1], "new");
    int64_t count = given(p[2]) && p[2].kind != JX_NONE ? need_int(c, pos, "replace", p[2]) : -1;
    return replace(c, pos, jx_to_str(c, pos, v), jx_to_str(c, pos, p[0]), jx_to_str(c, pos, p[1]), count);
}

static jx_val f_reverse(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "reverse", a, NULL, 0, NULL);
    jx_list *l = jx_iterate(c, pos, v), *o = jx_list_new(c, pos, l->n);
    for (size_t k = 0; k < l->n; k++) o->v[k] = l->v[l->n - 1 - k];
    if (v.kind != JX_STR) return jx_listv(o);
    return join(c, pos, o, jx_str_new(c, pos, "", 0), 0);
}

static jx_val f_safe(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "safe", a, NULL, 0, NULL);
    jx_val m = jx_strv(jx_to_str(c, pos, v));
    m.markup = 1;
    return m;
}

static jx_val f_string(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    bind(c, pos, "string", a, NULL, 0, NULL);
    return jx_strv(jx_to_str(c, pos, v));
}

static jx_val f_trim(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    PARAMS("chars");
    BIND("trim");
    return strip(c, pos, jx_to_str(c, pos, v), opt_str(c, pos, "trim", p[0]), 1, 1);
}

static jx_val f_tojson(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    PARAMS("ensure_ascii", "indent", "separators", "sort_keys"); /* transformers' order */
    BIND("tojson");
    jx_json_opts o = {.ensure_ascii = given(p[0]) && jx_truthy(p[0]), .sort_keys = given(p[3]) && jx_truthy(p[3])};
    if (given(p[1]) && p[1].kind != JX_NONE) {
        if (p[1].kind == JX_STR) {
            o.indent = p[1].s;
        } else {
            int64_t n = need_int(c, pos, "tojson", p[1]);
            if (n > 1024) jx_fail(E(c), pos, "tojson: indent %lld is too large", (long long)n);
            char spaces[1024];
            memset(spaces, ' ', sizeof spaces);
            o.indent = jx_str_new(c, pos, spaces, n > 0 ? (size_t)n : 0);
        }
    }
    if (given(p[2]) && p[2].kind != JX_NONE) {
        if (p[2].kind != JX_LIST || p[2].l->n != 2) jx_fail(E(c), pos, "tojson: separators must be a pair of strings");
        o.item_sep = need_str(c, pos, "tojson", p[2].l->v[0]);
        o.key_sep = need_str(c, pos, "tojson", p[2].l->v[1]);
    }
    jx_buf b = {.c = c, .pos = pos};
    jx_put_json(&b, v, &o, 0);
    return jx_strv(jx_buf_str(&b));
}

static jx_val generator(jx_list *items)
{
    items->generator = 1;
    return jx_listv(items);
}

static jx_val f_map(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    jx_list *l = jx_iterate(c, pos, v), *o = jx_list_new(c, pos, l->n);
    const jx_str *attr = NULL;
    jx_val dflt = {.kind = JX_MISSING};
    for (int k = 0; k < a->nkw; k++) {
        const jx_str *name = a->kwnames[k];
        if (!strcmp(name->s, "attribute")) attr = jx_to_str(c, pos, a->kwvals[k]);
        else if (!strcmp(name->s, "default")) dflt = a->kwvals[k];
        else jx_fail(E(c), pos, "map got an unexpected keyword argument '%s'", name->s);
    }
    if (attr) {
        if (a->npos) jx_fail(E(c), pos, "map: attribute= takes no other arguments");
        for (size_t k = 0; k < l->n; k++) {
            o->v[k] = attr_path(c, pos, l->v[k], attr);
            if (o->v[k].kind == JX_UNDEF && given(dflt)) o->v[k] = dflt;
        }
        return generator(o);
    }
    if (!a->npos || a->pos[0].kind != JX_STR) jx_fail(E(c), pos, "map needs a filter name or attribute=");
    int id = jx_filter_find(a->pos[0].s->s, a->pos[0].s->len);
    if (id < 0) jx_fail(E(c), pos, "map: unknown filter '%s'", a->pos[0].s->s);
    if (!strcmp(a->pos[0].s->s, "map")) jx_fail(E(c), pos, "map cannot apply map"); /* keeps recursion bounded */
    jx_args rest = {.pos = a->pos + 1, .npos = a->npos - 1};
    for (size_t k = 0; k < l->n; k++) o->v[k] = jx_filter_call(c, pos, id, l->v[k], &rest);
    return generator(o);
}

/* select / reject / selectattr / rejectattr */
static jx_val pick(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a, int keep, int by_attr)
{
    const char *what = by_attr ? (keep ? "selectattr" : "rejectattr") : (keep ? "select" : "reject");
    if (a->nkw) jx_fail(E(c), pos, "%s takes no keyword arguments", what);
    int skip = by_attr;
    if (by_attr && !a->npos) jx_fail(E(c), pos, "%s needs an attribute name", what);
    const jx_str *attr = by_attr ? jx_to_str(c, pos, a->pos[0]) : NULL;
    int id = -1;
    if (a->npos > skip) {
        jx_val name = a->pos[skip];
        if (name.kind != JX_STR || (id = jx_test_find(name.s->s, name.s->len)) < 0)
            jx_fail(E(c), pos, "%s: unknown test '%s'", what, jx_to_str(c, pos, name)->s);
        skip++;
    }
    jx_args rest = {.pos = a->npos ? a->pos + skip : NULL, .npos = a->npos - skip};
    if (!jx_truthy(v)) return generator(jx_list_new(c, pos, 0)); /* Jinja skips falsy values without iterating */
    jx_list *l = jx_iterate(c, pos, v), *o = jx_list_new(c, pos, l->n);
    size_t n = 0;
    for (size_t k = 0; k < l->n; k++) {
        jx_val x = attr ? attr_path(c, pos, l->v[k], attr) : l->v[k];
        int ok = id < 0 ? jx_truthy(x) : jx_test_call(c, pos, id, x, &rest);
        if (ok == keep) o->v[n++] = l->v[k];
    }
    o->n = n;
    return generator(o);
}

static jx_val f_select(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a) { return pick(c, pos, v, a, 1, 0); }
static jx_val f_reject(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a) { return pick(c, pos, v, a, 0, 0); }
static jx_val f_selectattr(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a) { return pick(c, pos, v, a, 1, 1); }
static jx_val f_rejectattr(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a) { return pick(c, pos, v, a, 0, 1); }

/* --- sorting: sort, dictsort, unique ---------------------------------------------------------- */

/* What sort, dictsort and unique compare: x (its attribute, when given), lowercased unless case_sensitive */
static jx_val sort_key(jx_ctx *c, uint32_t pos, jx_val x, const jx_str *attr, int case_sensitive)
{
    if (attr) x = attr_path(c, pos, x, attr);
    return !case_sensitive && x.kind == JX_STR ? change_case(c, pos, x.s, CASE_LOWER) : x;
}

/* Sorts v[0..n) by keys[0..n) (moved along), stably, as Python's sorted(reverse=...) does. */
static void merge_sort(jx_ctx *c, uint32_t pos, jx_val *v, jx_val *keys, size_t n, int reverse, jx_val *tv, jx_val *tk)
{
    if (n < 2) return;
    size_t h = n / 2, i = 0, j = h, o = 0;
    merge_sort(c, pos, v, keys, h, reverse, tv, tk);
    merge_sort(c, pos, v + h, keys + h, n - h, reverse, tv, tk);
    while (i < h && j < n) { /* the right one goes first only when strictly before the left one */
        int right = reverse ? jx_order(c, pos, JO_GT, keys[j], keys[i], ZT_JINJA_MAX_DEPTH)
                            : jx_order(c, pos, JO_LT, keys[j], keys[i], ZT_JINJA_MAX_DEPTH);
        size_t k = right ? j++ : i++;
        tv[o] = v[k], tk[o++] = keys[k];
    }
    for (; i < h; i++) tv[o] = v[i], tk[o++] = keys[i];
    for (; j < n; j++) tv[o] = v[j], tk[o++] = keys[j];
    memcpy(v, tv, n * sizeof *v);
    memcpy(keys, tk, n * sizeof *keys);
}

static jx_list *sorted(jx_ctx *c, uint32_t pos, const jx_list *items, jx_val *keys, int reverse)
{
    jx_list *o = jx_list_new(c, pos, items->n);
    memcpy(o->v, items->v, items->n * sizeof(jx_val));
    jx_val *tmp = jx_alloc(E(c), &c->arena, (2 * items->n + 1) * sizeof *tmp, pos);
    merge_sort(c, pos, o->v, keys, items->n, reverse, tmp, tmp + items->n);
    return o;
}

static jx_val f_sort(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    PARAMS("reverse", "case_sensitive", "attribute");
    BIND("sort");
    const jx_str *attr = given(p[2]) && p[2].kind != JX_NONE ? jx_to_str(c, pos, p[2]) : NULL;
    jx_list *l = jx_iterate(c, pos, v);
    jx_val *keys = jx_alloc(E(c), &c->arena, (l->n + 1) * sizeof *keys, pos);
    for (size_t k = 0; k < l->n; k++) keys[k] = sort_key(c, pos, l->v[k], attr, jx_truthy(p[1]));
    return jx_listv(sorted(c, pos, l, keys, jx_truthy(p[0])));
}

static jx_val f_dictsort(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    PARAMS("case_sensitive", "by", "reverse");
    BIND("dictsort");
    if (v.kind != JX_DICT && v.kind != JX_NS) jx_fail(E(c), pos, "dictsort needs a mapping, not %s", jx_type_name(v));
    int by_value = 0;
    if (given(p[1])) {
        const jx_str *by = need_str(c, pos, "dictsort", p[1]);
        if (!strcmp(by->s, "value")) by_value = 1;
        else if (strcmp(by->s, "key")) jx_fail(E(c), pos, "dictsort: you can only sort by either 'key' or 'value'");
    }
    jx_list *l = items_of(c, pos, v.d).l;
    jx_val *keys = jx_alloc(E(c), &c->arena, (l->n + 1) * sizeof *keys, pos);
    for (size_t k = 0; k < l->n; k++) keys[k] = sort_key(c, pos, l->v[k].l->v[by_value], NULL, jx_truthy(p[0]));
    return jx_listv(sorted(c, pos, l, keys, jx_truthy(p[2])));
}

static jx_val f_unique(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    PARAMS("case_sensitive", "attribute");
    BIND("unique");
    const jx_str *attr = given(p[1]) && p[1].kind != JX_NONE ? jx_to_str(c, pos, p[1]) : NULL;
    jx_list *l = jx_iterate(c, pos, v), *o = jx_list_new(c, pos, l->n), *seen = jx_list_new(c, pos, l->n);
    size_t n = 0;
    for (size_t k = 0; k < l->n; k++) {
        jx_val key = sort_key(c, pos, l->v[k], attr, jx_truthy(p[0]));
        seen->n = n;
        if (jx_contains(c, pos, jx_listv(seen), key)) continue;
        seen->v[n] = key;
        o->v[n++] = l->v[k];
    }
    o->n = n;
    return generator(o);
}

/* --- indent ----------------------------------------------------------------------------------- */

/* Bytes of the line break at s[0..n) as str.splitlines() knows them, or 0 */
static size_t line_break(const char *s, size_t n)
{
    if (s[0] == '\r') return n > 1 && s[1] == '\n' ? 2 : 1;
    if (s[0] == '\n' || s[0] == '\v' || s[0] == '\f' || (s[0] >= 0x1c && s[0] <= 0x1e)) return 1;
    uint32_t cp;
    int l = jx_utf8_next(s, n, &cp);
    return cp == 0x85 || cp == 0x2028 || cp == 0x2029 ? (size_t)l : 0;
}

/* Jinja's indent: every line but the first (and the first too with first=true) gets the indent,
 * blank lines only with blank=true; the lines are joined with \n whatever broke them. */
static jx_val f_indent(jx_ctx *c, uint32_t pos, jx_val v, const jx_args *a)
{
    PARAMS("width", "first", "blank");
    BIND("indent");
    const jx_str *s = jx_to_str(c, pos, v), *ind;
    if (given(p[0]) && p[0].kind == JX_STR) {
        ind = p[0].s;
    } else {
        int64_t w = given(p[0]) ? need_int(c, pos, "indent", p[0]) : 4;
        if (w > 0 && (uint64_t)w > c->max_output)
            jx_fail(E(c), pos, "indent: %lld is wider than the rendered text may be", (long long)w);
        jx_str *sp = jx_alloc(E(c), &c->arena, sizeof *sp + (w > 0 ? (size_t)w : 0) + 1, pos);
        sp->len = w > 0 ? (size_t)w : 0;
        memset(sp->s, ' ', sp->len);
        ind = sp;
    }
    jx_buf b = {.c = c, .pos = pos};
    if (jx_truthy(p[1])) jx_buf_put(&b, ind->s, ind->len);
    /* the lines of s + "\n", as Jinja splits them: the end of s ends a line too, except that a \r
     * there and that \n make one break */
    for (size_t i = 0, line = 0;; line++) {
        size_t e = i, br = 0;
        while (e < s->len && !(br = line_break(s->s + e, s->len - e))) e++;
        if (line && !(e == i && i == s->len && s->s[i - 1] == '\r')) {
            jx_buf_putc(&b, '\n');
            if (e > i || jx_truthy(p[2])) jx_buf_put(&b, ind->s, ind->len);
        }
        jx_buf_put(&b, s->s + i, e - i);
        if (e == s->len) break;
        i = e + br;
    }
    return jx_strv(jx_buf_str(&b));
}

static const struct {
    const char *name;
    filter_fn fn;
} FILTERS[] = {
    {"abs", f_abs},
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"first", f_first},
    {"float", f_float},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
};

int jx_filter_find(const char *name, size_t n)
{
    for (size_t k = 0; k < sizeof FILTERS / sizeof *FILTERS; k++)
        if (strlen(FILTERS[k].name) == n && !memcmp(FILTERS[k].name, name, n)) return (int)k;
    return -1;
}

jx_val jx_filter_call(jx_ctx *c, uint32_t pos, int id, jx_val v, const jx_args *a)
{
    return FILTERS[id].fn(c, pos, v, a);
}

/* --- tests ------------------------------------------------------------------------------------ */

enum {
    T_DEFINED,
    T_UNDEFINED,
    T_NONE,
    T_BOOLEAN,
    T_FALSE,
    T_TRUE,
    T_INTEGER,
    T_FLOAT,
    T_NUMBER,
    T_STRING,
    T_MAPPING,
    T_ITERABLE,
    T_SEQUENCE,
    T_CALLABLE,
    T_SAMEAS,
    T_ODD,
    T_EVEN,
    T_DIVISIBLEBY,
    T_EQ,
    T_NE,
    T_LT,
    T_LE,
    T_GT,
    T_GE,
    T_IN,
    T_LOWER,
    T_UPPER,
};

static const struct {
    const char *name;
    int id, nargs;
} TESTS[] = {
    {"defined", T_DEFINED, 0},
    {"undefined", T_UNDEFINED, 0},
    {"none", T_NONE, 0},
    {"boolean", T_BOOLEAN, 0},
    {"false", T_FALSE, 0},
    {"true", T_TRUE, 0},
    {"integer", T_INTEGER, 0},
    {"float", T_FLOAT, 0},
    {"number", T_NUMBER, 0},
    {"string", T_STRING, 0},
    {"mapping", T_MAPPING, 0},
    {"iterable", T_ITERABLE, 0},
    {"sequence", T_SEQUENCE, 0},
    {"callable", T_CALLABLE, 0},
    {"sameas", T_SAMEAS, 1},
    {"odd", T_ODD, 0},
    {"even", T_EVEN, 0},
    {"divisibleby", T_DIVISIBLEBY, 1},
    {"eq", T_EQ, 1},
    {"equalto", T_EQ, 1},
    {"==", T_EQ, 1},
    {"ne", T_NE, 1},
    {"!=", T_NE, 1},
    {"lt", T_LT, 1},
    {"lessthan", T_LT, 1},
    {"<", T_LT, 1},
    {"le", T_LE, 1},
    {"<=", T_LE, 1},
    {"gt", T_GT, 1},
    {"greaterthan", T_GT, 1},
    {">", T_GT, 1},
    {"ge", T_GE, 1},
    {">=", T_GE, 1},
    {"in", T_IN, 1},
    {"lower", T_LOWER, 0},
    {"upper", T_UPPER, 0},
};

int jx_test_find(const char *name, size_t n)
{
    for (size_t k = 0; k < sizeof TESTS / sizeof *TESTS; k++)
        if (strlen(TESTS[k].name) == n && !memcmp(TESTS[k].name, name, n)) return (int)k;
    return -1;
}

static int64_t python_mod(jx_ctx *c, uint32_t pos, int64_t a, int64_t b)
{
    if (!b) jx_fail(E(c), pos, "integer modulo by zero");
    if (b == -1) return 0;
    int64_t r = a % b;
    return r && (r < 0) != (b < 0) ? r + b : r;
}

/* a % b for numbers, as Python computes it (a float when either is one) */
static double number_mod(jx_ctx *c, uint32_t pos, const char *what, jx_val a, jx_val b)
{
    if (a.kind == JX_FLOAT || b.kind == JX_FLOAT) {
        double x = a.kind == JX_FLOAT ? a.f : (double)need_int(c, pos, what, a);
        double y = b.kind == JX_FLOAT ? b.f : (double)need_int(c, pos, what, b);
        if (y == 0) jx_fail(E(c), pos, "float modulo by zero");
        double m = fmod(x, y);
        return m && (m < 0) != (y < 0) ? m + y : m;
    }
    return (double)python_mod(c, pos, need_int(c, pos, what, a), need_int(c, pos, what, b));
}

static int has_case(const jx_str *s, int upper)
{
    int cased = 0;
    for (size_t i = 0; i < s->len; i++) {
        char ch = s->s[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
            if ((ch >= 'A' && ch <= 'Z') != upper) return 0;
            cased = 1;
        }
    }
    return cased;
}

int jx_test_call(jx_ctx *c, uint32_t pos, int id, jx_val v, const jx_args *a)
{
    static const char *const one[] = {"value"};
    jx_val arg[1];
    bind(c, pos, TESTS[id].name, a, one, TESTS[id].nargs, arg);
    if (TESTS[id].nargs) need(c, pos, TESTS[id].name, arg[0], "value");
    jx_kind k = v.kind == JX_MISSING ? JX_UNDEF : v.kind;
    switch (TESTS[id].id) {
    case T_DEFINED: return k != JX_UNDEF;
    case T_UNDEFINED: return k == JX_UNDEF;
    case T_NONE: return k == JX_NONE;
    case T_BOOLEAN: return k == JX_BOOL;
    case T_FALSE: return k == JX_BOOL && !v.i;
    case T_TRUE: return k == JX_BOOL && v.i;
    case T_INTEGER: return k == JX_INT;
    case T_FLOAT: return k == JX_FLOAT;
    case T_NUMBER: return k == JX_INT || k == JX_FLOAT || k == JX_BOOL;
    case T_STRING: return k == JX_STR;
    case T_MAPPING: return k == JX_DICT;
    case T_ITERABLE: return k == JX_STR || k == JX_LIST || k == JX_DICT || k == JX_UNDEF || k == JX_LOOP;
    case T_SEQUENCE: return k == JX_STR || (k == JX_LIST && !v.l->generator) || k == JX_DICT || k == JX_UNDEF;
    case T_CALLABLE: return k == JX_FUNC || k == JX_METHOD || k == JX_LOOP || k == JX_MACRO;
    case T_SAMEAS:
        if (k != arg[0].kind) return 0;
        if (k == JX_NONE || k == JX_UNDEF) return 1;
        if (k == JX_BOOL || k == JX_INT || k == JX_FUNC) return v.i == arg[0].i;
        return k == JX_FLOAT ? v.f == arg[0].f : v.d == arg[0].d;
    case T_ODD: return number_mod(c, pos, "odd", v, jx_int(2)) == 1;
    case T_EVEN: return number_mod(c, pos, "even", v, jx_int(2)) == 0;
    case T_DIVISIBLEBY: return number_mod(c, pos, "divisibleby", v, arg[0]) == 0;
    case T_EQ: return jx_equal(c, pos, v, arg[0], ZT_JINJA_MAX_DEPTH);
    case T_NE: return !jx_equal(c, pos, v, arg[0], ZT_JINJA_MAX_DEPTH);
    case T_LT: return jx_order(c, pos, JO_LT, v, arg[0], ZT_JINJA_MAX_DEPTH);
    case T_LE: return jx_order(c, pos, JO_LE, v, arg[0], ZT_JINJA_MAX_DEPTH);
    case T_GT: return jx_order(c, pos, JO_GT, v, arg[0], ZT_JINJA_MAX_DEPTH);
    case T_GE: return jx_order(c, pos, JO_GE, v, arg[0], ZT_JINJA_MAX_DEPTH);
    case T_IN: return jx_contains(c, pos, arg[0], v);
    case T_LOWER: return has_case(jx_to_str(c, pos, v), 0);
    case T_UPPER: return has_case(jx_to_str(c, pos, v), 1);
    }
    return 0;
}

/* --- methods ---------------------------------------------------------------------------------- */

static jx_val call_method(jx_ctx *c, uint32_t pos, const jx_method *m, const jx_args *a)
{
    jx_val self = m->self;
    switch (m->id) {
    case JX_M_STRIP:
    case JX_M_LSTRIP:
    case JX_M_RSTRIP: {
        PARAMS("chars");
        BIND("strip");
        return strip(c, pos, self.s, opt_str(c, pos, "strip", p[0]), m->id != JX_M_RSTRIP, m->id != JX_M_LSTRIP);
    }
    case JX_M_SPLIT: {
        PARAMS("sep", "maxsplit");
        BIND("split");
        int64_t max = given(p[1]) ? need_int(c, pos, "split", p[1]) : -1;
        return split(c, pos, self.s, opt_str(c, pos, "split", p[0]), max < 0 ? -1 : max);
    }
    case JX_M_STARTSWITH:
    case JX_M_ENDSWITH: {
        PARAMS("prefix");
        BIND("startswith");
        need(c, pos, "startswith", p[0], "prefix");
        return jx_bool(affix(c, pos, self.s, p[0], m->id == JX_M_ENDSWITH));
    }
    case JX_M_UPPER:
    case JX_M_LOWER:
    case JX_M_TITLE:
    case JX_M_CAPITALIZE:
        bind(c, pos, "upper", a, NULL, 0, NULL);
        return change_case(c, pos, self.s,
                           m->id == JX_M_UPPER   ? CASE_UPPER
                           : m->id == JX_M_LOWER ? CASE_LOWER
                           : m->id == JX_M_TITLE ? CASE_TITLE
                                                 : CASE_CAPITALIZE);
    case JX_M_REPLACE: {
        PARAMS("old", "new", "count");
        BIND("replace");
        need(c, pos, "replace", p[0], "old");
        need(c, pos, "replace", p[1], "new");
        int64_t count = given(p[2]) ? need_int(c, pos, "replace", p[2]) : -1;
        return replace(c, pos, self.s, need_str(c, pos, "replace", p[0]), need_str(c, pos, "replace", p[1]),
                       count < 0 ? -1 : count);
    }
    case JX_M_FIND: {
        PARAMS("sub");
        BIND("find");
        need(c, pos, "find", p[0], "sub");
        const jx_str *sub = need_str(c, pos, "find", p[0]);
        const char *hit = find_bytes(self.s->s, self.s->len, sub->s, sub->len);
        return jx_int(hit ? (int64_t)jx_utf8_count(self.s->s, (size_t)(hit - self.s->s)) : -1);
    }
    case JX_M_JOIN: {
        PARAMS("iterable");
        BIND("join");
        need(c, pos, "join", p[0], "iterable");
        return join(c, pos, jx_iterate(c, pos, p[0]), self.s, 1);
    }
    case JX_M_ITEMS: bind(c, pos, "items", a, NULL, 0, NULL); return items_of(c, pos, self.d);
    case JX_M_KEYS: bind(c, pos, "keys", a, NULL, 0, NULL); return dict_part(c, pos, self.d, 0);
    case JX_M_VALUES: bind(c, pos, "values", a, NULL, 0, NULL); return dict_part(c, pos, self.d, 1);
    case JX_M_GET: {
        PARAMS("key", "default");
        BIND("get");
        need(c, pos, "get", p[0], "key");
        const jx_val *v = jx_dict_find(self.d, p[0]);
        return v ? *v : given(p[1]) ? p[1] : jx_none();
    }
    case JX_M_CYCLE:
        if (a->nkw || !a->npos) jx_fail(E(c), pos, "cycle needs at least one positional argument");
        return a->pos[self.loop->index0 % (size_t)a->npos];
    }
    jx_fail(E(c), pos, "unknown method");
}

/* --- global functions ------------------------------------------------------------------------- */

enum { MAX_RANGE = 100000 }; /* as Jinja's sandbox */

static jx_val g_range(jx_ctx *c, uint32_t pos, const jx_args *a)
{
    if (a->nkw || a->npos < 1 || a->npos > 3) jx_fail(E(c), pos, "range takes 1 to 3 integer arguments");
    int64_t v[3];
    for (int k = 0; k < a->npos; k++) v[k] = need_int(c, pos, "range", a->pos[k]);
    int64_t start = a->npos > 1 ? v[0] : 0, stop = a->npos > 1 ? v[1] : v[0], step = a->npos > 2 ? v[2] : 1;
    if (!step) jx_fail(E(c), pos, "range: step must not be zero");
    double n = step > 0 ? ceil(((double)stop - (double)start) / (double)step)
                        : ceil(((double)start - (double)stop) / -(double)step);
    if (n > MAX_RANGE) jx_fail(E(c), pos, "range is too big (more than %d items)", MAX_RANGE);
    size_t len = n > 0 ? (size_t)n : 0;
    jx_list *l = jx_list_new(c, pos, len);
    for (size_t k = 0; k < len; k++) l->v[k] = jx_int(start + (int64_t)k * step);
    return jx_listv(l);
}

static jx_val g_dict(jx_ctx *c, uint32_t pos, const jx_args *a, int ns)
{
    jx_dict *d = jx_dict_new(c, pos);
    if (a->npos > 1) jx_fail(E(c), pos, "%s takes at most one positional argument", ns ? "namespace" : "dict");
    if (a->npos) {
        if (a->pos[0].kind != JX_DICT) jx_fail(E(c), pos, "%s needs a mapping", ns ? "namespace" : "dict");
        for (size_t k = 0; k < a->pos[0].d->n; k++) jx_dict_set(c, pos, d, a->pos[0].d->keys[k], a->pos[0].d->vals[k]);
    }
    for (int k = 0; k < a->nkw; k++) jx_dict_set(c, pos, d, jx_strv((jx_str *)a->kwnames[k]), a->kwvals[k]);
    return (jx_val){.kind = ns ? JX_NS : JX_DICT, .d = d};
}

static jx_val g_strftime_now(jx_ctx *c, uint32_t pos, const jx_args *a)
{
    static const char *const params[] = {"format"};
    jx_val p[1];
    bind(c, pos, "strftime_now", a, params, 1, p);
    need(c, pos, "strftime_now", p[0], "format");
    const jx_str *fmt = need_str(c, pos, "strftime_now", p[0]);
    /* SOURCE_DATE_EPOCH (the reproducible-builds convention) pins the clock, in UTC, so that a
     * template that writes today's date renders the same bytes on every day */
    const char *pinned = getenv("SOURCE_DATE_EPOCH");
    time_t now = time(NULL);
    if (pinned && *pinned) {
        char *end;
        errno = 0;
        long long v = strtoll(pinned, &end, 10);
        if (*end || errno || v < 0)
            jx_fail(E(c), pos, "strftime_now: SOURCE_DATE_EPOCH '%s' is not a count of seconds", pinned);
        now = (time_t)v;
    }
    struct tm tm;
    char out[256];
    struct tm *ok = pinned && *pinned ? gmtime_r(&now, &tm) : localtime_r(&now, &tm);
    size_t n = ok ? strftime(out, sizeof out, fmt->s, &tm) : 0;
    if (!n && fmt->len) jx_fail(E(c), pos, "strftime_now: cannot format the time with '%s'", fmt->s);
    return str_val(c, pos, out, n);
}

static const char *const GLOBALS[JX_FN_COUNT] = {
    [JX_FN_RANGE] = "range",           [JX_FN_NAMESPACE] = "namespace",   [JX_FN_DICT] = "dict",
    [JX_FN_RAISE] = "raise_exception", [JX_FN_STRFTIME] = "strftime_now",
};

int jx_global_find(const char *name, size_t n)
{
    for (int k = 0; k < JX_FN_COUNT; k++)
        if (strlen(GLOBALS[k]) == n && !memcmp(GLOBALS[k], name, n)) return k;
    return -1;
}

jx_val jx_call(jx_ctx *c, uint32_t pos, jx_val fn, const jx_args *a)
{
    if (fn.kind == JX_METHOD) return call_method(c, pos, fn.m, a);
    if (fn.kind == JX_UNDEF || fn.kind == JX_MISSING) jx_fail_undefined(c, pos, fn);
    if (fn.kind != JX_FUNC) jx_fail(E(c), pos, "'%s' object is not callable", jx_type_name(fn));
    switch (fn.i) {
    case JX_FN_RANGE: return g_range(c, pos, a);
    case JX_FN_NAMESPACE: return g_dict(c, pos, a, 1);
    case JX_FN_DICT:
        if (a->npos) jx_fail(E(c), pos, "dict takes keyword arguments only");
        return g_dict(c, pos, a, 0);
    case JX_FN_RAISE: {
        static const char *const params[] = {"message"};
        jx_val p[1];
        bind(c, pos, "raise_exception", a, params, 1, p);
        jx_fail(E(c), pos, "%s", given(p[0]) ? jx_to_str(c, pos, p[0])->s : "raise_exception() was called");
    }
    case JX_FN_STRFTIME: return g_strftime_now(c, pos, a);
    }
    jx_fail(E(c), pos, "unknown function");
}
