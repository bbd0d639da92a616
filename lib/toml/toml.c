#include "toml.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Node flags: how a table or array came to be, which decides what may later
 * extend or redefine it (TOML 1.0, "Table" and "Array of Tables"). */
enum {
    F_HEADER = 1, /* table defined by a [header] (or an element of [[...]]) */
    F_INLINE = 2, /* inline table: closed once its '}' is read */
    F_AOT = 4,    /* array created by [[header]]; any other array is static */
};

/* Keys longer than this are cut in messages. */
#define SHOW_MAX 48

typedef struct parser {
    const char *s;
    size_t len, pos;
    int line, col; /* of pos */
    char *err;
    size_t errlen;
    bool failed;
    int section; /* counts [headers]: dotted keys may only extend tables of their own section */
} parser;

typedef struct buf {
    char *p;
    size_t n, cap;
    bool oom;
} buf;

typedef struct keyseg {
    char *s;
    size_t len;
    int line, col;
    bool given; /* s now belongs to a table (still readable for messages) */
} keyseg;

typedef struct keypath {
    keyseg *seg;
    int n, cap;
} keypath;

/* ---- errors ----------------------------------------------------------------------- */

static int fail_at(parser *p, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int fail_at(parser *p, int line, int col, const char *fmt, ...)
{
    if (p->failed) return -1;
    p->failed = true;
    if (!p->err || !p->errlen) return -1;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "%d:%d: %s", line, col, msg);
    return -1;
}

#define fail(p, ...) fail_at((p), (p)->line, (p)->col, __VA_ARGS__)

/* Copies s for a message: control characters become '?', long text is cut. */
static const char *show(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0, i = 0;
    for (; i < n && o + 4 < cap && o < SHOW_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        out[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (i < n) {
        while (o > 0 && ((unsigned char)out[o - 1] & 0xC0) == 0x80) o--; /* whole characters only */
        if (o > 0 && (unsigned char)out[o - 1] >= 0xC0) o--;
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
    return out;
}

/* ---- reading ---------------------------------------------------------------------- */

static int peek(const parser *p, size_t k) { return p->pos + k < p->len ? (unsigned char)p->s[p->pos + k] : -1; }

static void adv(parser *p)
{
    unsigned char c = (unsigned char)p->s[p->pos++];
    if (c == '\n') {
        p->line++;
        p->col = 1;
    } else if ((c & 0xC0) != 0x80) {
        p->col++;
    }
}

static void advn(parser *p, int n)
{
    while (n-- > 0) adv(p);
}

/* Bytes of the newline at pos: 1 for LF, 2 for CRLF, 0 for none. */
static int newline_at(const parser *p)
{
    if (peek(p, 0) == '\n') return 1;
    if (peek(p, 0) == '\r' && peek(p, 1) == '\n') return 2;
    return 0;
}

static bool is_ctrl(int c) { return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7f; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_bare(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '-';
}

/* Describes the character at pos for a message: 'x', U+0001, a newline, the end of the file. */
static const char *what_here(const parser *p, char *out, size_t cap)
{
    int c = peek(p, 0);
    if (c < 0) return "the end of the file";
    if (newline_at(p)) return "a newline";
    if (is_ctrl(c)) {
        snprintf(out, cap, "U+%04X", c);
        return out;
    }
    size_t n = 1;
    if (c >= 0x80) /* the document is valid UTF-8: take the whole character */
        while (p->pos + n < p->len && ((unsigned char)p->s[p->pos + n] & 0xC0) == 0x80) n++;
    snprintf(out, cap, "'%.*s'", (int)n, p->s + p->pos);
    return out;
}

static void skip_ws(parser *p)
{
    while (peek(p, 0) == ' ' || peek(p, 0) == '\t') adv(p);
}

/* At '#': skips the comment up to (not including) the newline. */
static int skip_comment(parser *p)
{
    adv(p);
    for (int c; (c = peek(p, 0)) >= 0 && !newline_at(p); adv(p))
        if (is_ctrl(c)) return fail(p, "control character U+%04X in a comment", c);
    return 0;
}

/* Whitespace, comments and newlines, as allowed between array elements. */
static int skip_blank(parser *p)
{
    for (;;) {
        skip_ws(p);
        if (peek(p, 0) == '#' && skip_comment(p) < 0) return -1;
        int nl = newline_at(p);
        if (!nl) return 0;
        advn(p, nl);
    }
}

/* After a key/value pair or a header: only whitespace and a comment may follow on the line. */
static int end_of_line(parser *p, const char *after)
{
    skip_ws(p);
    if (peek(p, 0) == '#' && skip_comment(p) < 0) return -1;
    if (peek(p, 0) < 0) return 0;
    int nl = newline_at(p);
    if (nl) {
        advn(p, nl);
        return 0;
    }
    char w[32];
    return fail(p, "expected the end of the line after %s, found %s", after, what_here(p, w, sizeof w));
}

/* ---- buffers and nodes ------------------------------------------------------------- */

static void buf_put(buf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (b->n + n + 1 > cap) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void buf_putc(buf *b, char c) { buf_put(b, &c, 1); }

/* Ends a buffer as a NUL-terminated string (an empty one is still allocated). */
static int buf_finish(parser *p, buf *b)
{
    buf_put(b, "", 0);
    if (b->oom) {
        free(b->p);
        b->p = NULL;
        return fail(p, "out of memory");
    }
    return 0;
}

static zt_toml *node_new(parser *p, zt_toml_kind kind, int line, int col, int depth)
{
    if (depth > ZT_TOML_MAX_DEPTH) {
        fail_at(p, line, col, "nesting deeper than %d levels", ZT_TOML_MAX_DEPTH);
        return NULL;
    }
    zt_toml *v = calloc(1, sizeof *v);
    if (!v) {
        fail_at(p, line, col, "out of memory");
        return NULL;
    }
    v->kind = kind;
    v->line = line;
    v->col = col;
    v->depth = depth;
    return v;
}

void zt_toml_free(zt_toml *v)
{
    if (!v) return;
    for (int i = 0; i < v->n; i++) {
        free(v->items[i].key);
        zt_toml_free(v->items[i].value);
    }
    free(v->items);
    free(v->str);
    free(v);
}

/* Appends an item; takes ownership of key and value, also when it fails. */
static int item_add(parser *p, zt_toml *t, char *key, size_t keylen, int line, int col, zt_toml *value)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 4;
        zt_toml_item *items = realloc(t->items, (size_t)cap * sizeof *items);
        if (!items) {
            free(key);
            zt_toml_free(value);
            return fail_at(p, line, col, "out of memory");
        }
        t->items = items;
        t->cap = cap;
    }
    t->items[t->n++] = (zt_toml_item){key, keylen, line, col, value};
    return 0;
}

static int find(const zt_toml *t, const char *key, size_t keylen)
{
    for (int i = 0; i < t->n; i++)
        if (t->items[i].keylen == keylen && !memcmp(t->items[i].key, key, keylen)) return i;
    return -1;
}

/* ---- strings ----------------------------------------------------------------------- */

static void put_utf8(buf *b, uint32_t cp)
{
    char u[4];
    if (cp < 0x80) {
        buf_putc(b, (char)cp);
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3F));
        buf_put(b, u, 2);
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12);
        u[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        buf_put(b, u, 3);
    } else {
        u[0] = (char)(0xF0 | cp >> 18);
        u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
        u[2] = (char)(0x80 | (cp >> 6 & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        buf_put(b, u, 4);
    }
}

static int hex_value(int c)
{
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* At a backslash in a basic string. A multi-line string also allows a
 * line-ending backslash, which trims the newline and the whitespace after it. */
static int parse_escape(parser *p, buf *b, bool multiline)
{
    int line = p->line, col = p->col;
    adv(p);
    int c = peek(p, 0);
    static const char from[] = "btnfr\"\\", to[] = "\b\t\n\f\r\"\\";
    const char *e = c > 0 ? strchr(from, c) : NULL;
    if (e) {
        buf_putc(b, to[e - from]);
        adv(p);
        return 0;
    }
    if (c == 'u' || c == 'U') {
        int k = c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int i = 1; i <= k; i++) {
            int h = hex_value(peek(p, (size_t)i));
            if (h < 0) return fail_at(p, line, col, "invalid unicode escape: '\\%c' needs %d hex digits", c, k);
            cp = cp << 4 | (uint32_t)h;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return fail_at(p, line, col, "invalid unicode escape '\\%c%.*s' (not a unicode scalar value)", c, k,
                           p->s + p->pos + 1);
        put_utf8(b, cp);
        advn(p, k + 1);
        return 0;
    }
    if (multiline && (c == ' ' || c == '\t' || newline_at(p))) {
        size_t k = 0;
        while (peek(p, k) == ' ' || peek(p, k) == '\t') k++;
        if (!(peek(p, k) == '\n' || (peek(p, k) == '\r' && peek(p, k + 1) == '\n')))
            return fail_at(p, line, col, "invalid escape '\\%c' (a line-ending backslash must be last on its line)", c);
        for (int nl;;) {
            skip_ws(p);
            if (!(nl = newline_at(p))) return 0;
            advn(p, nl);
        }
    }
    if (c < 0) return fail_at(p, line, col, "unterminated string");
    char w[32];
    if (c > 0x20 && c < 0x7f) return fail_at(p, line, col, "invalid escape '\\%c'", c);
    return fail_at(p, line, col, "invalid escape: backslash before %s", what_here(p, w, sizeof w));
}

/* Parses a string of any of the four kinds at pos into b (not NUL-terminated yet). */
static int parse_string(parser *p, buf *b)
{
    int line = p->line, col = p->col;
    char q = (char)peek(p, 0);
    bool literal = q == '\'';
    bool multi = peek(p, 1) == q && peek(p, 2) == q;
    advn(p, multi ? 3 : 1);
    if (multi) advn(p, newline_at(p)); /* a newline right after the opening quotes is trimmed */
    for (;;) {
        int c = peek(p, 0);
        if (c < 0) return fail_at(p, line, col, "unterminated string");
        if (c == q) {
            if (!multi) {
                adv(p);
                return 0;
            }
            int run = 0;
            while (peek(p, (size_t)run) == q) run++;
            if (run >= 3) {
                if (run > 5) return fail(p, "too many quotes at the end of a multi-line string");
                buf_put(b, p->s + p->pos, (size_t)run - 3); /* up to two quotes belong to the content */
                advn(p, run);
                return 0;
            }
            buf_put(b, p->s + p->pos, (size_t)run);
            advn(p, run);
            continue;
        }
        int nl = newline_at(p);
        if (nl) {
            if (!multi) return fail_at(p, line, col, "unterminated string (a newline before the closing quote)");
            buf_putc(b, '\n');
            advn(p, nl);
            continue;
        }
        if (c == '\\' && !literal) {
            if (parse_escape(p, b, multi) < 0) return -1;
            continue;
        }
        if (is_ctrl(c)) return fail(p, "control character U+%04X in a string%s", c, literal ? "" : " (escape it)");
        buf_putc(b, (char)c);
        adv(p);
    }
}

/* ---- keys -------------------------------------------------------------------------- */

static void keypath_free(keypath *k)
{
    for (int i = 0; i < k->n; i++)
        if (!k->seg[i].given) free(k->seg[i].s);
    free(k->seg);
    k->seg = NULL;
    k->n = k->cap = 0;
}

/* Hands a key part over to a table (which then owns it). */
static char *take(keyseg *s)
{
    s->given = true;
    return s->s;
}

/* Writes the first n parts of a key as written in TOML (a.b."c d") for messages. */
static const char *key_text(const keypath *k, int n, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < n && o + 1 < cap; i++) {
        const keyseg *s = &k->seg[i];
        bool bare = s->len > 0;
        for (size_t j = 0; j < s->len; j++) bare = bare && is_bare((unsigned char)s->s[j]);
        char part[SHOW_MAX + 8];
        show(s->s, s->len, part, sizeof part);
        int w = snprintf(out + o, cap - o, bare ? "%s%s" : "%s\"%s\"", i ? "." : "", part);
        if (w < 0) break;
        o += (size_t)w < cap - o ? (size_t)w : cap - o - 1;
    }
    return out;
}

static int parse_simple_key(parser *p, keyseg *seg)
{
    *seg = (keyseg){.line = p->line, .col = p->col};
    int c = peek(p, 0);
    buf b = {0};
    if (c == '"' || c == '\'') {
        if (peek(p, 1) == c && peek(p, 2) == c) return fail(p, "a multi-line string cannot be a key");
        if (parse_string(p, &b) < 0) {
            free(b.p);
            return -1;
        }
    } else {
        size_t start = p->pos;
        while (is_bare(peek(p, 0))) adv(p);
        if (p->pos == start) {
            char w[32];
            return fail(p, "expected a key, found %s", what_here(p, w, sizeof w));
        }
        buf_put(&b, p->s + start, p->pos - start);
    }
    seg->len = b.n;
    if (buf_finish(p, &b) < 0) return -1;
    seg->s = b.p;
    return 0;
}

/* A dotted key: simple keys joined by '.', with optional whitespace around the dots. */
static int parse_key(parser *p, keypath *k)
{
    for (;;) {
        if (k->n == k->cap) {
            int cap = k->cap ? 2 * k->cap : 4;
            keyseg *seg = realloc(k->seg, (size_t)cap * sizeof *seg);
            if (!seg) return fail(p, "out of memory");
            k->seg = seg;
            k->cap = cap;
        }
        if (parse_simple_key(p, &k->seg[k->n]) < 0) return -1;
        k->n++;
        skip_ws(p);
        if (peek(p, 0) != '.') return 0;
        adv(p);
        skip_ws(p);
    }
}

/* ---- numbers and date-times ---------------------------------------------------------- */

/* Digits with single underscores between them, from t[*j]; 1 ok, 0 no digit, -1 a misplaced '_'. */
static int scan_digits(const char *t, size_t n, size_t *j, int base)
{
    size_t i = *j;
    if (i >= n || (base == 16 ? hex_value((unsigned char)t[i]) : t[i] - '0') < 0 ||
        (base != 16 && (t[i] - '0') >= base)) {
        *j = i;
        return i < n && t[i] == '_' ? -1 : 0;
    }
    for (;;) {
        i++;
        if (i < n && t[i] == '_') {
            if (i + 1 >= n) return -1;
            int d = base == 16 ? hex_value((unsigned char)t[i + 1]) : t[i + 1] - '0';
            if (d < 0 || d >= base) return -1;
            i++;
            continue;
        }
        int d = i < n ? (base == 16 ? hex_value((unsigned char)t[i]) : t[i] - '0') : -1;
        if (d < 0 || d >= base) break;
    }
    *j = i;
    return 1;
}

/* Accumulates the digits of t (underscores skipped) in base; false when it exceeds limit. */
static bool accumulate(const char *t, size_t n, int base, uint64_t limit, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] == '_') continue;
        uint64_t d = (uint64_t)(base == 16 ? hex_value((unsigned char)t[i]) : t[i] - '0');
        if (v > (limit - d) / (uint64_t)base) return false;
        v = v * (uint64_t)base + d;
    }
    *out = v;
    return true;
}

static const char *to_double(const char *t, size_t n, double *out)
{
    char small[64], *s = n < sizeof small ? small : malloc(n + 1);
    if (!s) return "out of memory";
    /* strtod follows the locale's decimal point: give it the one it expects */
    char dp = localeconv()->decimal_point[0];
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (t[i] != '_') s[m++] = t[i] == '.' ? dp : t[i];
    s[m] = 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    bool whole = end == s + m, over = errno == ERANGE && isinf(v);
    if (s != small) free(s);
    if (!whole) return "not a number";
    if (over) return "float out of range";
    *out = v;
    return NULL;
}

/* Integers and floats; NULL when t is one, else the reason. */
static const char *parse_number(const char *t, size_t n, zt_toml *v)
{
    size_t i = t[0] == '+' || t[0] == '-' ? 1 : 0;
    bool neg = t[0] == '-';
    if (n - i == 3 && (!memcmp(t + i, "inf", 3) || !memcmp(t + i, "nan", 3))) {
        v->kind = ZT_TOML_FLOAT;
        v->f = t[i] == 'i' ? INFINITY : NAN;
        if (neg) v->f = -v->f;
        return NULL;
    }
    if (n - i >= 2 && t[i] == '0' && (t[i + 1] == 'x' || t[i + 1] == 'o' || t[i + 1] == 'b')) {
        if (i) return "a sign is not allowed on a hex, octal or binary integer";
        int base = t[1] == 'x' ? 16 : t[1] == 'o' ? 8 : 2;
        size_t j = 2;
        int r = scan_digits(t, n, &j, base);
        if (r < 0) return "'_' must sit between digits";
        if (r == 0 || j != n) return "invalid digit";
        uint64_t u;
        if (!accumulate(t + 2, n - 2, base, INT64_MAX, &u)) return "integer out of range";
        v->kind = ZT_TOML_INT;
        v->i = (int64_t)u;
        return NULL;
    }
    size_t j = i;
    int r = scan_digits(t, n, &j, 10);
    if (r <= 0) return r < 0 ? "'_' must sit between digits" : "not a number";
    size_t int_end = j;
    if (t[i] == '0' && int_end - i > 1) return "leading zeros are not allowed";
    bool is_float = false;
    if (j < n && t[j] == '.') {
        j++;
        r = scan_digits(t, n, &j, 10);
        if (r <= 0) return r < 0 ? "'_' must sit between digits" : "expected digits after '.'";
        is_float = true;
    }
    if (j < n && (t[j] == 'e' || t[j] == 'E')) {
        j++;
        if (j < n && (t[j] == '+' || t[j] == '-')) j++;
        r = scan_digits(t, n, &j, 10);
        if (r <= 0) return r < 0 ? "'_' must sit between digits" : "expected digits in the exponent";
        is_float = true;
    }
    if (j < n) return t[j] == '_' ? "'_' must sit between digits" : "not a number";
    if (is_float) {
        v->kind = ZT_TOML_FLOAT;
        return to_double(t, n, &v->f);
    }
    uint64_t u;
    if (!accumulate(t + i, int_end - i, 10, neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX, &u))
        return "integer out of range";
    v->kind = ZT_TOML_INT;
    v->i = neg ? (int64_t)(0 - u) : (int64_t)u; /* 0 - u wraps to the right value for INT64_MIN */
    return NULL;
}

/* Exactly k digits at t[at]. */
static bool fixed_digits(const char *t, size_t n, size_t at, int k, int *out)
{
    if (at + (size_t)k > n) return false;
    int v = 0;
    for (int i = 0; i < k; i++) {
        if (!is_digit((unsigned char)t[at + (size_t)i])) return false;
        v = v * 10 + t[at + (size_t)i] - '0';
    }
    *out = v;
    return true;
}

static int days_in_month(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* HH:MM:SS[.frac] at t[*i]. */
static const char *parse_time(const char *t, size_t n, size_t *i, zt_toml_datetime *dt)
{
    size_t k = *i;
    if (!(fixed_digits(t, n, k, 2, &dt->hour) && k + 2 < n && t[k + 2] == ':' &&
          fixed_digits(t, n, k + 3, 2, &dt->minute) && k + 5 < n && t[k + 5] == ':' &&
          fixed_digits(t, n, k + 6, 2, &dt->second)))
        return "expected HH:MM:SS";
    if (dt->hour > 23 || dt->minute > 59 || dt->second > 59) return "time out of range";
    k += 8;
    if (k < n && t[k] == '.') {
        k++;
        if (k >= n || !is_digit((unsigned char)t[k])) return "expected digits after '.'";
        int scale = 100000000;
        for (; k < n && is_digit((unsigned char)t[k]); k++, scale /= 10) dt->nanosecond += (t[k] - '0') * scale;
    }
    *i = k;
    return NULL;
}

/* Date-times of the four kinds; NULL when t is one, else the reason. */
static const char *parse_datetime(const char *t, size_t n, zt_toml *v)
{
    zt_toml_datetime *dt = &v->dt;
    size_t i = 0;
    bool date = n >= 5 && t[4] == '-';
    if (date) {
        if (!(fixed_digits(t, n, 0, 4, &dt->year) && fixed_digits(t, n, 5, 2, &dt->month) && n >= 8 && t[7] == '-' &&
              fixed_digits(t, n, 8, 2, &dt->day)))
            return "expected YYYY-MM-DD";
        if (dt->month < 1 || dt->month > 12) return "month out of range";
        if (dt->day < 1 || dt->day > days_in_month(dt->year, dt->month)) return "day out of range";
        i = 10;
        v->kind = ZT_TOML_LOCAL_DATE;
        if (i == n) return NULL;
        if (t[i] != 'T' && t[i] != 't' && t[i] != ' ') return "unexpected text after the date";
        i++;
    }
    const char *why = parse_time(t, n, &i, dt);
    if (why) return why;
    v->kind = date ? ZT_TOML_LOCAL_DATETIME : ZT_TOML_LOCAL_TIME;
    if (i == n) return NULL;
    if (!date) return "a local time cannot have an offset";
    if (t[i] == 'Z' || t[i] == 'z') {
        i++;
    } else if (t[i] == '+' || t[i] == '-') {
        int h, m;
        if (!(fixed_digits(t, n, i + 1, 2, &h) && i + 3 < n && t[i + 3] == ':' && fixed_digits(t, n, i + 4, 2, &m)))
            return "expected an offset +HH:MM";
        if (h > 23 || m > 59) return "offset out of range";
        dt->offset_minutes = (t[i] == '-' ? -1 : 1) * (h * 60 + m);
        i += 6;
    } else {
        return "unexpected text after the time";
    }
    if (i != n) return "unexpected text after the offset";
    v->kind = ZT_TOML_DATETIME;
    return NULL;
}

static bool all_digits(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_digit((unsigned char)t[i])) return false;
    return true;
}

static bool is_token(int c) { return is_bare(c) || c == '+' || c == '.' || c == ':'; }

/* An unquoted value: boolean, number or date-time. */
static zt_toml *parse_bare_value(parser *p, int depth)
{
    int line = p->line, col = p->col;
    size_t start = p->pos;
    while (is_token(peek(p, 0))) adv(p);
    /* a date and a time may be separated by one space */
    size_t n = p->pos - start;
    const char *t = p->s + start;
    if (n == 10 && t[4] == '-' && t[7] == '-' && peek(p, 0) == ' ' && is_digit(peek(p, 1))) {
        adv(p);
        while (is_token(peek(p, 0))) adv(p);
        n = p->pos - start;
    }
    char w[SHOW_MAX + 8];
    show(t, n, w, sizeof w);
    if (n == 0) {
        char c[32];
        fail(p, "expected a value, found %s", what_here(p, c, sizeof c));
        return NULL;
    }
    zt_toml *v = node_new(p, ZT_TOML_BOOL, line, col, depth);
    if (!v) return NULL;
    if ((n == 4 && !memcmp(t, "true", 4)) || (n == 5 && !memcmp(t, "false", 5))) {
        v->b = t[0] == 't';
        return v;
    }
    bool dt = (n >= 5 && all_digits(t, 4) && t[4] == '-') || (n >= 3 && all_digits(t, 2) && t[2] == ':');
    const char *why = dt ? parse_datetime(t, n, v) : parse_number(t, n, v);
    if (!why && dt) {
        v->str = malloc(n + 1);
        if (!v->str) why = "out of memory";
        else {
            memcpy(v->str, t, n);
            v->str[n] = 0;
            v->len = n;
        }
    }
    if (why) {
        bool word = !dt && ((t[0] >= 'a' && t[0] <= 'z') || (t[0] >= 'A' && t[0] <= 'Z'));
        if (word) fail_at(p, line, col, "invalid value '%s' (strings must be quoted)", w);
        else fail_at(p, line, col, "invalid %s '%s': %s", dt ? "date-time" : "number", w, why);
        zt_toml_free(v);
        return NULL;
    }
    return v;
}

/* ---- values, tables --------------------------------------------------------------- */

static zt_toml *parse_value(parser *p, int depth);
static int parse_keyval(parser *p, zt_toml *table);

static zt_toml *parse_string_value(parser *p, int depth)
{
    zt_toml *v = node_new(p, ZT_TOML_STRING, p->line, p->col, depth);
    if (!v) return NULL;
    buf b = {0};
    if (parse_string(p, &b) < 0 || buf_finish(p, &b) < 0) {
        free(b.p);
        zt_toml_free(v);
        return NULL;
    }
    v->str = b.p;
    v->len = b.n;
    return v;
}

static zt_toml *parse_array(parser *p, int depth)
{
    zt_toml *a = node_new(p, ZT_TOML_ARRAY, p->line, p->col, depth);
    if (!a) return NULL;
    adv(p);
    for (;;) {
        if (skip_blank(p) < 0) break;
        if (peek(p, 0) == ']') {
            adv(p);
            return a;
        }
        zt_toml *v = parse_value(p, depth + 1);
        if (!v || item_add(p, a, NULL, 0, v->line, v->col, v) < 0 || skip_blank(p) < 0) break;
        int c = peek(p, 0);
        if (c == ',') {
            adv(p);
            continue;
        }
        if (c == ']') {
            adv(p);
            return a;
        }
        char w[32];
        fail(p, "expected ',' or ']' in the array, found %s", what_here(p, w, sizeof w));
        break;
    }
    zt_toml_free(a);
    return NULL;
}

static zt_toml *parse_inline_table(parser *p, int depth)
{
    zt_toml *t = node_new(p, ZT_TOML_TABLE, p->line, p->col, depth);
    if (!t) return NULL;
    adv(p);
    skip_ws(p);
    if (peek(p, 0) == '}') {
        adv(p);
        t->flags |= F_INLINE;
        return t;
    }
    for (;;) {
        skip_ws(p);
        if (parse_keyval(p, t) < 0) break;
        skip_ws(p);
        int c = peek(p, 0);
        if (c == ',') {
            adv(p);
            skip_ws(p);
            if (peek(p, 0) == '}') {
                fail(p, "trailing comma in an inline table");
                break;
            }
            continue;
        }
        if (c == '}') {
            adv(p);
            t->flags |= F_INLINE;
            return t;
        }
        char w[32];
        if (newline_at(p)) fail(p, "newline in an inline table (an inline table must stay on one line)");
        else fail(p, "expected ',' or '}' in the inline table, found %s", what_here(p, w, sizeof w));
        break;
    }
    zt_toml_free(t);
    return NULL;
}

static zt_toml *parse_value(parser *p, int depth)
{
    switch (peek(p, 0)) {
    case '"':
    case '\'': return parse_string_value(p, depth);
    case '[': return parse_array(p, depth);
    case '{': return parse_inline_table(p, depth);
    default: return parse_bare_value(p, depth);
    }
}

/* Inserts value under a dotted key relative to table; takes ownership of value. */
static int insert_dotted(parser *p, zt_toml *table, keypath *k, zt_toml *value)
{
    char name[256];
    zt_toml *t = table;
    for (int i = 0; i < k->n - 1; i++) {
        keyseg *s = &k->seg[i];
        int at = find(t, s->s, s->len);
        zt_toml *child;
        if (at < 0) {
            child = node_new(p, ZT_TOML_TABLE, s->line, s->col, t->depth + 1);
            if (!child || item_add(p, t, take(s), s->len, s->line, s->col, child) < 0) goto fail;
        } else {
            child = t->items[at].value;
            const char *why = NULL;
            if (child->kind == ZT_TOML_ARRAY && (child->flags & F_AOT)) why = "is an array of tables";
            else if (child->kind != ZT_TOML_TABLE) why = "already holds a value";
            else if (child->flags & F_INLINE) why = "is an inline table, which cannot be extended";
            else if ((child->flags & F_HEADER) || (child->dotted_section && child->dotted_section != p->section))
                why = "is a table defined elsewhere; dotted keys cannot extend it";
            if (why) {
                fail_at(p, s->line, s->col, "key '%s' %s", key_text(k, i + 1, name, sizeof name), why);
                goto fail;
            }
        }
        child->dotted_section = p->section;
        t = child;
    }
    keyseg *last = &k->seg[k->n - 1];
    int at = find(t, last->s, last->len);
    if (at >= 0) {
        fail_at(p, last->line, last->col, "duplicate key '%s' (first defined at line %d)",
                key_text(k, k->n, name, sizeof name), t->items[at].line);
        goto fail;
    }
    return item_add(p, t, take(last), last->len, last->line, last->col, value);
fail:
    zt_toml_free(value);
    return -1;
}

static int parse_keyval(parser *p, zt_toml *table)
{
    keypath k = {0};
    if (parse_key(p, &k) < 0) goto fail;
    if (peek(p, 0) != '=') {
        char w[32];
        fail(p, "expected '=' after the key, found %s", what_here(p, w, sizeof w));
        goto fail;
    }
    adv(p);
    skip_ws(p);
    zt_toml *v = parse_value(p, table->depth + k.n);
    if (!v || insert_dotted(p, table, &k, v) < 0) goto fail;
    keypath_free(&k);
    return 0;
fail:
    keypath_free(&k);
    return -1;
}

/* The table a [header] names: intermediate keys are created as plain tables, or
 * lead into the last element of an array of tables. */
static zt_toml *header_parent(parser *p, zt_toml *root, keypath *k)
{
    char name[256];
    zt_toml *t = root;
    for (int i = 0; i < k->n - 1; i++) {
        keyseg *s = &k->seg[i];
        int at = find(t, s->s, s->len);
        if (at < 0) {
            zt_toml *child = node_new(p, ZT_TOML_TABLE, s->line, s->col, t->depth + 1);
            if (!child || item_add(p, t, take(s), s->len, s->line, s->col, child) < 0) return NULL;
            t = child;
            continue;
        }
        zt_toml *child = t->items[at].value;
        const char *why = NULL;
        if (child->kind == ZT_TOML_ARRAY && (child->flags & F_AOT)) child = child->items[child->n - 1].value;
        else if (child->kind == ZT_TOML_ARRAY) why = "is a static array, which cannot be extended";
        else if (child->kind != ZT_TOML_TABLE) why = "already holds a value";
        else if (child->flags & F_INLINE) why = "is an inline table, which cannot be extended";
        if (why) {
            fail_at(p, s->line, s->col, "key '%s' %s", key_text(k, i + 1, name, sizeof name), why);
            return NULL;
        }
        t = child;
    }
    return t;
}

/* [table] or [[array of tables]]; *cur becomes the table that the following keys fill. */
static int parse_header(parser *p, zt_toml *root, zt_toml **cur)
{
    int line = p->line, col = p->col;
    bool aot = peek(p, 1) == '[';
    advn(p, aot ? 2 : 1);
    skip_ws(p);
    keypath k = {0};
    char name[256], w[32];
    if (parse_key(p, &k) < 0) goto fail;
    if (aot ? !(peek(p, 0) == ']' && peek(p, 1) == ']') : peek(p, 0) != ']') {
        fail(p, "expected '%s' after the table name, found %s", aot ? "]]" : "]", what_here(p, w, sizeof w));
        goto fail;
    }
    advn(p, aot ? 2 : 1);
    p->section++;
    zt_toml *parent = header_parent(p, root, &k);
    if (!parent) goto fail;
    keyseg *last = &k.seg[k.n - 1];
    key_text(&k, k.n, name, sizeof name);
    int at = find(parent, last->s, last->len);
    zt_toml *t = at >= 0 ? parent->items[at].value : NULL;
    if (!aot) {
        if (!t) {
            if (!(t = node_new(p, ZT_TOML_TABLE, line, col, parent->depth + 1))) goto fail;
            if (item_add(p, parent, take(last), last->len, last->line, last->col, t) < 0) goto fail;
        } else if (t->kind == ZT_TOML_ARRAY && (t->flags & F_AOT)) {
            fail_at(p, line, col, "table [%s] already defined as an array of tables at line %d", name, t->line);
            goto fail;
        } else if (t->kind != ZT_TOML_TABLE) {
            fail_at(p, line, col, "table [%s]: key '%s' already holds a value (line %d)", name, name, t->line);
            goto fail;
        } else if (t->flags & (F_HEADER | F_INLINE)) {
            fail_at(p, line, col, "table [%s] defined twice (first at line %d)", name, t->line);
            goto fail;
        } else if (t->dotted_section) {
            fail_at(p, line, col, "table [%s] already defined by dotted keys at line %d", name, t->line);
            goto fail;
        } else { /* created implicitly by an earlier header: this defines it */
            t->line = line;
            t->col = col;
        }
        t->flags |= F_HEADER;
    } else {
        if (!t) {
            if (!(t = node_new(p, ZT_TOML_ARRAY, line, col, parent->depth + 1))) goto fail;
            t->flags |= F_AOT;
            if (item_add(p, parent, take(last), last->len, last->line, last->col, t) < 0) goto fail;
        } else if (t->kind != ZT_TOML_ARRAY || !(t->flags & F_AOT)) {
            fail_at(p, line, col, "cannot define [[%s]]: key '%s' already holds %s (line %d)", name, name,
                    t->kind == ZT_TOML_ARRAY ? "a static array" : zt_toml_kind_name(t->kind), t->line);
            goto fail;
        }
        zt_toml *elem = node_new(p, ZT_TOML_TABLE, line, col, t->depth + 1);
        if (!elem || item_add(p, t, NULL, 0, line, col, elem) < 0) goto fail;
        elem->flags |= F_HEADER;
        t = elem;
    }
    *cur = t;
    keypath_free(&k);
    return 0;
fail:
    keypath_free(&k);
    return -1;
}

/* ---- document ---------------------------------------------------------------------- */

size_t zt_toml_utf8_prefix(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07, min = 0x10000;
        else return i;
        if (len - i <= n) return i;
        for (size_t k = 1; k <= n; k++) {
            unsigned char b = (unsigned char)s[i + k];
            if ((b & 0xC0) != 0x80) return i;
            cp = cp << 6 | (b & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += n + 1;
    }
    return i;
}

zt_toml *zt_toml_parse(const char *text, size_t len, char *err, size_t errlen)
{
    parser p = {.s = text, .len = len, .line = 1, .col = 1, .err = err, .errlen = errlen, .section = 1};
    if (err && errlen) err[0] = 0;
    size_t good = zt_toml_utf8_prefix(text, len);
    if (good < len) {
        while (p.pos < good) adv(&p);
        fail(&p, "invalid UTF-8 (byte 0x%02X)", (unsigned char)text[good]);
        return NULL;
    }
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) p.pos = 3; /* a byte order mark */
    zt_toml *root = node_new(&p, ZT_TOML_TABLE, 1, 1, 0);
    if (!root) return NULL;
    zt_toml *cur = root;
    while (p.pos < p.len) {
        skip_ws(&p);
        int c = peek(&p, 0), r = 0;
        const char *after = "the value";
        if (c == '[') {
            r = parse_header(&p, root, &cur);
            after = "the table header";
        } else if (c >= 0 && c != '#' && !newline_at(&p)) {
            r = parse_keyval(&p, cur);
        }
        if (r < 0 || end_of_line(&p, after) < 0) {
            zt_toml_free(root);
            return NULL;
        }
    }
    return root;
}

/* ---- lookups and writing ----------------------------------------------------------- */

const zt_toml *zt_toml_get(const zt_toml *t, const char *key)
{
    if (!t || t->kind != ZT_TOML_TABLE) return NULL;
    int at = find(t, key, strlen(key));
    return at < 0 ? NULL : t->items[at].value;
}

const zt_toml *zt_toml_path(const zt_toml *t, const char *dotted)
{
    for (;;) {
        if (!t || t->kind != ZT_TOML_TABLE) return NULL;
        const char *dot = strchr(dotted, '.');
        size_t n = dot ? (size_t)(dot - dotted) : strlen(dotted);
        int at = find(t, dotted, n);
        if (at < 0) return NULL;
        t = t->items[at].value;
        if (!dot) return t;
        dotted = dot + 1;
    }
}

const char *zt_toml_kind_name(zt_toml_kind kind)
{
    switch (kind) {
    case ZT_TOML_TABLE: return "a table";
    case ZT_TOML_ARRAY: return "an array";
    case ZT_TOML_STRING: return "a string";
    case ZT_TOML_INT: return "an integer";
    case ZT_TOML_FLOAT: return "a float";
    case ZT_TOML_BOOL: return "a boolean";
    case ZT_TOML_DATETIME: return "a date-time";
    case ZT_TOML_LOCAL_DATETIME: return "a local date-time";
    case ZT_TOML_LOCAL_DATE: return "a local date";
    case ZT_TOML_LOCAL_TIME: return "a local time";
    }
    return "a value";
}

void zt_toml_write_string(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = c == '"'    ? "\\\""
                        : c == '\\' ? "\\\\"
                        : c == '\b' ? "\\b"
                        : c == '\t' ? "\\t"
                        : c == '\n' ? "\\n"
                        : c == '\f' ? "\\f"
                        : c == '\r' ? "\\r"
                                    : NULL;
        if (e) fputs(e, f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04X", c);
        else fputc(c, f);
    }
    fputc('"', f);
}
