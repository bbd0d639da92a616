/* jinja lexer: template text into tokens, with Jinja's whitespace rules
 * as transformers configures them (trim_blocks, lstrip_blocks):
 * - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}", "-}}",
 *   "-#}" all whitespace after it;
 * - trim_blocks: one newline right after "%}" or "#}" is dropped ("+%}" keeps it);
 * - lstrip_blocks: whitespace between the start of a line and "{%" or "{#"
 *   is dropped ("{%+" keeps it), but not before "{{".
 * Inside a tag, an end marker counts only where brackets are balanced. */
#include "jinja_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct lexer {
    jx_err *e;
    jx_arena *a;
    const char *s;
    size_t n, i;
    jx_tok *toks;
    size_t nt, cap;
    int line_starting; /* the last tag ended with a newline (or nothing came yet) */
} lexer;

static jx_tok *push(lexer *L, jx_tok_kind kind, size_t pos)
{
    if (L->nt == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        jx_tok *t = jx_alloc(L->e, L->a, cap * sizeof *t, (uint32_t)pos);
        if (L->nt) memcpy(t, L->toks, L->nt * sizeof *t);
        L->toks = t, L->cap = cap;
    }
    jx_tok *t = &L->toks[L->nt++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->pos = (uint32_t)pos;
    return t;
}

static int starts(const lexer *L, size_t i, const char *lit)
{
    size_t k = strlen(lit);
    return i + k <= L->n && !memcmp(L->s + i, lit, k);
}

/* Emits the text [b, e) before a tag whose whitespace sign is sign, after stripping. */
static void text(lexer *L, size_t b, size_t e, char sign, int lstrip)
{
    if (sign == '-') {
        e -= jx_space_suffix(L->s + b, e - b);
    } else if (sign != '+' && lstrip) {
        size_t l = e;
        while (l > b && L->s[l - 1] != '\n') l--;
        if ((l > b || L->line_starting) && l < e && jx_space_prefix(L->s + l, e - l) == e - l) e = l;
    }
    if (e > b) {
        jx_tok *t = push(L, JT_DATA, b);
        t->text = L->s + b;
        t->len = (uint32_t)(e - b);
    }
}

/* The end of a block-like tag at i ("+%}", "-%}" + whitespace, "%}" + one newline), or 0. */
static size_t block_end(const lexer *L, size_t i, char mark)
{
    char plain[3] = {mark, '}', 0}, plus[4] = {'+', mark, '}', 0}, minus[4] = {'-', mark, '}', 0};
    if (starts(L, i, plus)) return i + 3;
    if (starts(L, i, minus)) return i + 3 + jx_space_prefix(L->s + i + 3, L->n - i - 3);
    if (starts(L, i, plain)) return i + 2 + (i + 2 < L->n && L->s[i + 2] == '\n');
    return 0;
}

static size_t skip_space(const lexer *L, size_t i) { return i + jx_space_prefix(L->s + i, L->n - i); }

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_name_char(char c) { return is_name_start(c) || is_digit(c); }

/* {% raw %} at i: the end of its opening tag, or 0 when the tag is something else. */
static size_t raw_begin(const lexer *L, size_t i)
{
    size_t k = i + 2;
    if (k < L->n && (L->s[k] == '-' || L->s[k] == '+')) k++;
    k = skip_space(L, k);
    if (!starts(L, k, "raw")) return 0;
    k = skip_space(L, k + 3);
    if (starts(L, k, "-%}")) return skip_space(L, k + 3);
    if (starts(L, k, "%}")) return k + 2;
    return 0;
}

/* The text of a raw block from i; returns the end of {% endraw %}. */
static size_t raw_body(lexer *L, size_t i, size_t open)
{
    if (i >= L->n) return i; /* as Jinja: nothing after {% raw %} is no error */
    for (size_t k = i; k + 1 < L->n; k++) {
        if (L->s[k] != '{' || L->s[k + 1] != '%') continue;
        size_t j = k + 2;
        char sign = j < L->n && (L->s[j] == '-' || L->s[j] == '+') ? L->s[j++] : 0;
        j = skip_space(L, j);
        if (!starts(L, j, "endraw")) continue;
        size_t end = block_end(L, skip_space(L, j + 6), '%');
        if (!end) continue;
        text(L, i, k, sign, 1);
        return end;
    }
    jx_fail(L->e, (uint32_t)open, "missing end of raw directive");
}

/* A comment from i (after "{#" and its sign); returns its end. */
static size_t comment(lexer *L, size_t i, size_t open)
{
    if (i >= L->n) return i; /* as Jinja: a "{#" that ends the template is dropped */
    for (size_t k = i; k < L->n; k++) {
        size_t end = block_end(L, k, '#');
        if (end) return end;
    }
    jx_fail(L->e, (uint32_t)open, "missing end of comment tag");
}

/* (\d+_)*\d+ from k: the end, or k when no digit is there */
static size_t digit_run(const lexer *L, size_t k)
{
    if (k >= L->n || !is_digit(L->s[k])) return k;
    for (;;) {
        while (k < L->n && is_digit(L->s[k])) k++;
        if (k + 1 < L->n && L->s[k] == '_' && is_digit(L->s[k + 1])) k++;
        else return k;
    }
}

static int digit_value(char c)
{
    c = (char)(c | 0x20);
    return is_digit(c) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 99;
}

/* Numbers as Jinja's float_re and integer_re read them (underscores between digits). */
static size_t number(lexer *L, size_t i)
{
    const char *s = L->s;
    size_t n = L->n;
    if (!(i > 0 && s[i - 1] == '.')) {
        size_t m = digit_run(L, i), end = 0;
        size_t p = m + 1 < n && s[m] == '.' && is_digit(s[m + 1]) ? digit_run(L, m + 1) : m;
        size_t q = p + 1 < n && (s[p] | 0x20) == 'e' ? p + 1 : 0;
        if (q && q < n && (s[q] == '+' || s[q] == '-')) q++;
        if (q && digit_run(L, q) > q) end = digit_run(L, q);
        else if (p > m) end = p;
        if (end) {
            char buf[128];
            size_t nb = 0;
            for (size_t j = i; j < end && nb + 1 < sizeof buf; j++)
                if (s[j] != '_') buf[nb++] = s[j];
            buf[nb] = 0;
            push(L, JT_FLOAT, i)->f = strtod(buf, NULL);
            return end;
        }
    }
    int base = 10;
    size_t j = i + 1;
    char p = i + 2 < n ? (char)(s[i + 1] | 0x20) : 0;
    if (s[i] == '0' && (p == 'b' || p == 'o' || p == 'x')) {
        int b = p == 'b' ? 2 : p == 'o' ? 8 : 16;
        size_t k = i + 2 + (s[i + 2] == '_');
        if (k < n && digit_value(s[k]) < b) base = b, j = i + 2;
    }
    uint64_t v = base == 10 ? (uint64_t)(s[i] - '0') : 0;
    int overflow = 0;
    for (;; j++) {
        size_t k = j + (j + 1 < n && s[j] == '_');
        int d = k < n ? digit_value(s[k]) : 99;
        if (d >= base || (base == 10 && s[i] == '0' && d != 0)) break;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) overflow = 1;
        v = v * (uint64_t)base + (uint64_t)d;
        j = k;
    }
    if (overflow || v > INT64_MAX) jx_fail(L->e, (uint32_t)i, "integer literal is too large");
    push(L, JT_INT, i)->i = (int64_t)v;
    return j;
}

/* A quoted string from i; escapes as in Python ("unicode-escape"). */
static size_t string(lexer *L, size_t i)
{
    const char *s = L->s;
    char q = s[i];
    size_t k = i + 1;
    while (k < L->n && s[k] != q) k += s[k] == '\\' ? 2 : 1;
    if (k >= L->n) jx_fail(L->e, (uint32_t)i, "unterminated string");
    jx_str *str = jx_alloc(L->e, L->a, sizeof *str + (k - i) + 1, (uint32_t)i);
    char *o = str->s;
    for (size_t j = i + 1; j < k;) {
        if (s[j] != '\\') {
            *o++ = s[j++];
            continue;
        }
        char c = s[j + 1];
        size_t esc = j;
        j += 2;
        uint32_t cp;
        int ndig = 0;
        switch (c) {
        case '\n': continue;
        case '\\':
        case '\'':
        case '"': *o++ = c; continue;
        case 'a': *o++ = '\a'; continue;
        case 'b': *o++ = '\b'; continue;
        case 'f': *o++ = '\f'; continue;
        case 'n': *o++ = '\n'; continue;
        case 'r': *o++ = '\r'; continue;
        case 't': *o++ = '\t'; continue;
        case 'v': *o++ = '\v'; continue;
        case 'x': ndig = 2; break;
        case 'u': ndig = 4; break;
        case 'U': ndig = 8; break;
        default:
            if (c >= '0' && c <= '7') {
                cp = 0;
                j--;
                for (int d = 0; d < 3 && j < k && s[j] >= '0' && s[j] <= '7'; d++)
                    cp = cp * 8 + (uint32_t)(s[j++] - '0');
                o += jx_utf8_put(o, cp);
                continue;
            }
            *o++ = '\\'; /* unknown escapes stay as written */
            j--;
            continue;
        }
        cp = 0;
        for (int d = 0; d < ndig; d++, j++) {
            int h = j < k ? digit_value(s[j]) : 99;
            if (h > 15) jx_fail(L->e, (uint32_t)esc, "truncated \\%c escape", c);
            cp = cp << 4 | (uint32_t)h;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            jx_fail(L->e, (uint32_t)esc, "escape \\%c is not a valid character", c);
        o += jx_utf8_put(o, cp);
    }
    *o = 0;
    str->len = (size_t)(o - str->s);
    jx_tok *t = push(L, JT_STRING, i);
    t->str = str;
    return k + 1;
}

static const struct {
    const char *s;
    jx_op op;
} OPS[] = {
    {"//", JO_FDIV},    {"**", JO_POW},     {"==", JO_EQ},    {"!=", JO_NE},    {">=", JO_GE},    {"<=", JO_LE},
    {"+", JO_ADD},      {"-", JO_SUB},      {"/", JO_DIV},    {"*", JO_MUL},    {"%", JO_MOD},    {"~", JO_TILDE},
    {"[", JO_LBRACKET}, {"]", JO_RBRACKET}, {"(", JO_LPAREN}, {")", JO_RPAREN}, {"{", JO_LBRACE}, {"}", JO_RBRACE},
    {">", JO_GT},       {"<", JO_LT},       {"=", JO_ASSIGN}, {".", JO_DOT},    {":", JO_COLON},  {"|", JO_PIPE},
    {",", JO_COMMA},    {";", JO_SEMI},
};

/* The inside of a {% %} or {{ }} tag from i; returns the end of its closing marker. */
static size_t tag(lexer *L, size_t i, char mark, size_t open)
{
    char stack[ZT_JINJA_MAX_DEPTH]; /* closers of the open brackets */
    int depth = 0;
    for (;;) {
        if (i >= L->n) jx_fail(L->e, (uint32_t)open, "missing end of tag ('%c}')", mark);
        if (!depth) {
            size_t end = mark == '%'           ? block_end(L, i, '%')
                         : starts(L, i, "-}}") ? skip_space(L, i + 3)
                         : starts(L, i, "}}")  ? i + 2
                                               : 0;
            if (end) {
                push(L, mark == '%' ? JT_BLOCK_END : JT_VAR_END, i);
                L->line_starting = L->s[end - 1] == '\n';
                return end;
            }
        }
        char c = L->s[i];
        size_t sp = jx_space_prefix(L->s + i, L->n - i);
        if (sp) {
            i += sp;
        } else if (is_digit(c)) {
            i = number(L, i);
        } else if (is_name_start(c)) {
            size_t k = i;
            while (k < L->n && is_name_char(L->s[k])) k++;
            jx_tok *t = push(L, JT_NAME, i);
            t->text = L->s + i;
            t->len = (uint32_t)(k - i);
            i = k;
        } else if (c == '\'' || c == '"') {
            i = string(L, i);
        } else {
            size_t k = 0;
            while (k < sizeof OPS / sizeof OPS[0] && !starts(L, i, OPS[k].s)) k++;
            if (k == sizeof OPS / sizeof OPS[0]) jx_fail(L->e, (uint32_t)i, "unexpected character '%c'", c);
            jx_op op = OPS[k].op;
            if (op == JO_LBRACE || op == JO_LBRACKET || op == JO_LPAREN) {
                if (depth == ZT_JINJA_MAX_DEPTH) jx_fail(L->e, (uint32_t)i, "brackets nested too deeply");
                stack[depth++] = op == JO_LBRACE ? '}' : op == JO_LBRACKET ? ']' : ')';
            } else if (op == JO_RBRACE || op == JO_RBRACKET || op == JO_RPAREN) {
                if (!depth) jx_fail(L->e, (uint32_t)i, "unexpected '%c'", c);
                if (stack[--depth] != c) jx_fail(L->e, (uint32_t)i, "unexpected '%c', expected '%c'", c, stack[depth]);
            }
            push(L, JT_OP, i)->op = op;
            i += strlen(OPS[k].s);
        }
    }
}

jx_tok *jx_lex(jx_err *e, jx_arena *a, const char *src, size_t len)
{
    lexer L = {.e = e, .a = a, .s = src, .n = len, .line_starting = 1};
    while (L.i < L.n) {
        size_t j = L.i;
        while (j + 1 < L.n && !(src[j] == '{' && (src[j + 1] == '{' || src[j + 1] == '%' || src[j + 1] == '#'))) j++;
        if (j + 1 >= L.n) { /* no more tags */
            text(&L, L.i, L.n, 0, 0);
            break;
        }
        char kind = src[j + 1];
        char sign = j + 2 < L.n && (src[j + 2] == '-' || src[j + 2] == '+') ? src[j + 2] : 0;
        size_t raw = kind == '%' ? raw_begin(&L, j) : 0;
        text(&L, L.i, j, sign, kind != '{');
        size_t inner = j + 2 + (sign != 0);
        if (raw) {
            L.line_starting = src[raw - 1] == '\n';
            L.i = raw_body(&L, raw, j);
            L.line_starting = src[L.i - 1] == '\n';
        } else if (kind == '#') {
            L.i = comment(&L, inner, j);
            L.line_starting = src[L.i - 1] == '\n';
        } else {
            push(&L, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, j);
            L.i = tag(&L, inner, kind == '%' ? '%' : '}', j);
        }
    }
    push(&L, JT_EOF, L.n);
    return L.toks;
}
