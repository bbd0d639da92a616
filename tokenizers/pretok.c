/* Hugging Face's pre-tokenizers over PCRE2. Every splitting step is a Split:
 * a pattern (a regex, or a literal string) whose matches tile the text with
 * the gaps between them, then a behavior that decides what becomes a piece.
 * Digits, Punctuation, Whitespace and WhitespaceSplit are Splits with a fixed
 * pattern; ByteLevel is an optional prefix space and GPT-2's Split; Metaspace
 * writes spaces as its replacement character, prepends one, and splits in
 * front of each. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizers/pretok.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizers/unicode.h"

static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* Rust's char::is_whitespace and Oniguruma's \s: the White_Space property (PCRE2's \s adds U+180E) */
#define WHITE_SPACE "\\p{White_Space}"
/* Oniguruma's \w: Alphabetic, marks, decimal digits, connectors, and Latin-1's ¹²³¼½¾ */
#define ONIG_WORD "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}"
/* Rust's regex \w (the Whitespace pre-tokenizer's): Alphabetic, marks, decimal digits, connectors, joiners */
#define RUST_WORD "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}"
static const char RE_WHITESPACE[] = "[" RUST_WORD "]+|[^" RUST_WORD WHITE_SPACE "]+";
static const char RE_WHITE_SPACE_CHAR[] = "[" WHITE_SPACE "]";
static const char RE_NUMERIC_CHAR[] = "\\p{N}"; /* Rust's char::is_numeric */
/* ASCII punctuation (symbols included, as Rust's is_ascii_punctuation has it) or Unicode's P */
static const char RE_PUNCTUATION_CHAR[] = "[\\p{P}\\x21-\\x2F\\x3A-\\x40\\x5B-\\x60\\x7B-\\x7E]";

typedef enum behavior { REMOVED, ISOLATED, MERGED_WITH_PREVIOUS, MERGED_WITH_NEXT, CONTIGUOUS } behavior;
static const char *const BEHAVIORS[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};

typedef enum step_kind { STEP_SEQUENCE, STEP_SPLIT, STEP_BYTE_LEVEL, STEP_METASPACE } step_kind;

/* Metaspace's prepend_scheme: when the replacement goes in front of a piece without one */
typedef enum prepend_scheme { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } prepend_scheme;

struct zt_pretok {
    step_kind kind;
    char *where;    /* the JSON path, for errors while splitting */
    pcre2_code *re; /* a split's pattern */
    int jit;        /* re is JIT-compiled: pcre2_jit_match runs it, skipping pcre2_match's checks */
    behavior behavior;
    int invert;
    /* ByteLevel: re is GPT-2's when use_regex */
    int add_prefix_space;
    /* Metaspace: re is the replacement (MergedWithNext) when split */
    char replacement[5]; /* one character, UTF-8, NUL-terminated */
    prepend_scheme prepend;
    /* Sequence */
    zt_pretok **steps;
    int nsteps;
};

/* --- pieces --------------------------------------------------------------------------- */

zt_status zt_pieces_push(zt_pieces *s, const char *p, size_t n)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        size_t *end = realloc(s->end, cap * sizeof *end);
        if (!end) return zt_fail(ZT_ENOMEM, "out of memory for %zu pre-tokenized pieces", cap);
        s->end = end;
        s->cap = cap;
    }
    zt_status st = zt_buf_append(&s->text, p, n);
    if (st) return st;
    s->end[s->n++] = s->text.n;
    return ZT_OK;
}

void zt_pieces_free(zt_pieces *s)
{
    free(s->text.p);
    free(s->end);
    memset(s, 0, sizeof *s);
}

/* --- reading -------------------------------------------------------------------------- */

static const cJSON *field(const cJSON *obj, const char *name) { return cJSON_GetObjectItemCaseSensitive(obj, name); }

static const char *type_of(const cJSON *obj)
{
    const cJSON *t = field(obj, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

static int flag(const cJSON *obj, const char *name, int def)
{
    const cJSON *v = field(obj, name);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* The regex with \s, \S, \w, \W, \b and \B spelled out as Oniguruma (Hugging
 * Face's engine) has them, where PCRE2's differ: its \s also takes U+180E,
 * its \w (letters, numbers, '_') leaves out marks and takes the other numbers.
 * Inside a class, \S and \W stay as they are. */
static zt_status onig_classes(const char *regex, zt_buf *out)
{
    static const char *const spelled[][2] = {
        {"s", "[" WHITE_SPACE "]"},
        {"S", "[^" WHITE_SPACE "]"},
        {"w", "[" ONIG_WORD "]"},
        {"W", "[^" ONIG_WORD "]"},
        {"b", "(?:(?<=[" ONIG_WORD "])(?![" ONIG_WORD "])|(?<![" ONIG_WORD "])(?=[" ONIG_WORD "]))"},
        {"B", "(?:(?<=[" ONIG_WORD "])(?=[" ONIG_WORD "])|(?<![" ONIG_WORD "])(?![" ONIG_WORD "]))"},
    };
    zt_status st = ZT_OK;
    int in_class = 0;
    for (const char *c = regex; *c && !st; c++) {
        if (*c == '\\' && c[1]) {
            const char *with = NULL;
            for (size_t k = 0; k < sizeof spelled / sizeof *spelled; k++)
                if (c[1] == spelled[k][0][0]) with = spelled[k][1];
            if (with && in_class && (c[1] == 's' || c[1] == 'w')) /* the class's inside, brackets dropped */
                st = zt_buf_append(out, with + 1, strlen(with) - 2);
            else if (with && !in_class) st = zt_buf_append(out, with, strlen(with));
            else st = zt_buf_append(out, c, 2);
            c++;
            continue;
        }
        if (*c == '[' && !in_class) {
            in_class = 1;
            size_t k = 1 + (c[1] == '^');
            if (c[k] == ']') k++; /* a ']' first in a class is itself */
            st = zt_buf_append(out, c, k);
            c += k - 1;
            continue;
        }
        if (*c == '[' && in_class && c[1] == ':') { /* [:alpha:] */
            const char *e = strstr(c + 2, ":]");
            size_t k = e ? (size_t)(e + 2 - c) : 1;
            st = zt_buf_append(out, c, k);
            c += k - 1;
            continue;
        }
        if (*c == ']' && in_class) in_class = 0;
        st = zt_buf_append(out, c, 1);
    }
    return st;
}

/* A regex, or with `literal` a string that matches itself (an empty one matches
 * between every two characters, as Hugging Face's does). */
static zt_status compile(zt_pretok *p, const char *regex, int literal, const char *where)
{
    int code;
    PCRE2_SIZE at;
    zt_buf onig = {0};
    zt_status st = literal ? zt_buf_append(&onig, regex, strlen(regex)) : onig_classes(regex, &onig);
    if (st) return st;
    uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    p->re = pcre2_compile((PCRE2_SPTR)onig.p, onig.n, options, &code, &at, NULL);
    free(onig.p);
    if (!p->re) {
        PCRE2_UCHAR why[256];
        pcre2_get_error_message(code, why, sizeof why);
        return zt_fail(ZT_EUSER, "%s: the %s '%s' does not compile: %s", where, literal ? "string" : "regex", regex,
                       (const char *)why);
    }
    p->jit = pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE) == 0; /* else the interpreter runs it */
    return ZT_OK;
}

static zt_status read_behavior(zt_pretok *p, const cJSON *j, const char *where, const char *def)
{
    const cJSON *v = field(j, "behavior");
    const char *name = cJSON_IsString(v) ? v->valuestring : def;
    for (int i = 0; name && i < (int)(sizeof BEHAVIORS / sizeof *BEHAVIORS); i++)
        if (strcmp(name, BEHAVIORS[i]) == 0) {
            p->behavior = (behavior)i;
            return ZT_OK;
        }
    return zt_fail(ZT_EUSER,
                   "%s.behavior: '%s' is none of Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                   "Contiguous",
                   where, name ? name : "(missing)");
}

/* j's "pattern": {"Regex": ...} or {"String": ...} */
static zt_status read_pattern(zt_pretok *p, const cJSON *j, const char *where)
{
    const cJSON *pattern = field(j, "pattern"), *regex = field(pattern, "Regex"), *string = field(pattern, "String");
    if (!cJSON_IsString(regex) && !cJSON_IsString(string))
        return zt_fail(ZT_EUSER, "%s.pattern: neither {\"Regex\": ...} nor {\"String\": ...}", where);
    int literal = !cJSON_IsString(regex);
    char at[512];
    snprintf(at, sizeof at, "%s.pattern.%s", where, literal ? "String" : "Regex");
    return compile(p, literal ? string->valuestring : regex->valuestring, literal, at);
}

static zt_status read_split(zt_pretok *p, const cJSON *j, const char *where)
{
    zt_status st = read_pattern(p, j, where);
    if (st) return st;
    p->invert = flag(j, "invert", 0);
    return read_behavior(p, j, where, NULL);
}

zt_status zt_json_char(const cJSON *j, const char *name, const char *where, char out[5])
{
    const cJSON *v = field(j, name);
    uint32_t cp = ZT_UNI_INVALID;
    size_t n = cJSON_IsString(v) && v->valuestring[0] ? zt_utf8_next(v->valuestring, strlen(v->valuestring), &cp) : 0;
    if (!n || cp == ZT_UNI_INVALID || v->valuestring[n])
        return zt_fail(ZT_EUSER, "%s.%s is missing or not one character", where, name);
    memcpy(out, v->valuestring, n + 1);
    return ZT_OK;
}

zt_status zt_metaspace_read(const cJSON *j, const char *where, char replacement[5], int *prepend, int *split)
{
    zt_status st = zt_json_char(j, "replacement", where, replacement);
    if (st) return st;
    static const char *const SCHEMES[] = {"always", "first", "never"};
    const cJSON *v = field(j, "prepend_scheme");
    *split = flag(j, "split", 1);
    /* files older than prepend_scheme have add_prefix_space */
    *prepend = flag(j, "add_prefix_space", 1) ? PREPEND_ALWAYS : PREPEND_NEVER;
    if (!v || cJSON_IsNull(v)) return ZT_OK;
    for (int i = 0; i < 3; i++)
        if (cJSON_IsString(v) && strcmp(v->valuestring, SCHEMES[i]) == 0) {
            *prepend = i;
            return ZT_OK;
        }
    return zt_fail(ZT_EUSER, "%s.prepend_scheme: '%s' is none of always, first, never", where,
                   cJSON_IsString(v) ? v->valuestring : "(not a string)");
}

static zt_status read_metaspace(zt_pretok *p, const cJSON *j, const char *where)
{
    int prepend, split;
    zt_status st = zt_metaspace_read(j, where, p->replacement, &prepend, &split);
    if (st) return st;
    p->prepend = (prepend_scheme)prepend;
    p->behavior = MERGED_WITH_NEXT;
    return split ? compile(p, p->replacement, 1, where) : ZT_OK;
}

/* A Split with one of the fixed patterns above. */
static zt_status fixed_split(zt_pretok *p, const char *regex, behavior b, int invert, const char *where)
{
    p->behavior = b;
    p->invert = invert;
    return compile(p, regex, 0, where);
}

static zt_status read_sequence(zt_pretok *p, const cJSON *j, const char *where)
{
    const cJSON *items = field(j, "pretokenizers");
    if (!cJSON_IsArray(items)) return zt_fail(ZT_EUSER, "%s.pretokenizers is missing or not an array", where);
    int n = cJSON_GetArraySize(items);
    if (!(p->steps = calloc((size_t)n + 1, sizeof *p->steps))) return zt_fail(ZT_ENOMEM, "out of memory");
    char at[512];
    zt_status st = ZT_OK;
    for (const cJSON *item = items->child; item && !st; item = item->next) {
        snprintf(at, sizeof at, "%s.pretokenizers[%d]", where, p->nsteps);
        st = zt_pretok_read(item, at, &p->steps[p->nsteps]);
        if (!st) p->nsteps++;
    }
    return st;
}

static zt_status read_step(zt_pretok *p, const cJSON *j, const char *where)
{
    const char *type = type_of(j);
    if (strcmp(type, "Sequence") == 0) {
        p->kind = STEP_SEQUENCE;
        return read_sequence(p, j, where);
    }
    p->kind = STEP_SPLIT;
    if (strcmp(type, "Split") == 0) return read_split(p, j, where);
    if (strcmp(type, "ByteLevel") == 0) {
        p->kind = STEP_BYTE_LEVEL;
        p->add_prefix_space = flag(j, "add_prefix_space", 1);
        p->behavior = ISOLATED;
        return flag(j, "use_regex", 1) ? compile(p, RE_GPT2, 0, where) : ZT_OK;
    }
    if (strcmp(type, "Metaspace") == 0) {
        p->kind = STEP_METASPACE;
        return read_metaspace(p, j, where);
    }
    if (strcmp(type, "Digits") == 0)
        return fixed_split(p, RE_NUMERIC_CHAR, flag(j, "individual_digits", 0) ? ISOLATED : CONTIGUOUS, 0, where);
    if (strcmp(type, "Whitespace") == 0) return fixed_split(p, RE_WHITESPACE, REMOVED, 1, where);
    if (strcmp(type, "WhitespaceSplit") == 0) return fixed_split(p, RE_WHITE_SPACE_CHAR, REMOVED, 0, where);
    if (strcmp(type, "Punctuation") == 0) {
        zt_status st = read_behavior(p, j, where, "Isolated");
        return st ? st : fixed_split(p, RE_PUNCTUATION_CHAR, p->behavior, 0, where);
    }
    if (!cJSON_IsObject(j)) return zt_fail(ZT_EUSER, "%s is not an object", where);
    return zt_fail(ZT_EUSER,
                   "%s.type '%s' is not a pre-tokenizer zt implements (ByteLevel, Metaspace, Split, Digits, "
                   "Whitespace, WhitespaceSplit, Punctuation and Sequence)",
                   where, type);
}

/* A zt_pretok read by `read` from json. */
static zt_status read_new(zt_status (*read)(zt_pretok *, const cJSON *, const char *), const cJSON *json,
                          const char *where, zt_pretok **out)
{
    *out = NULL;
    zt_pretok *p = calloc(1, sizeof *p);
    if (!p || !(p->where = strdup(where))) {
        free(p);
        return zt_fail(ZT_ENOMEM, "out of memory");
    }
    p->kind = STEP_SPLIT;
    zt_status st = read(p, json, where);
    if (st) {
        zt_pretok_free(p);
        return st;
    }
    *out = p;
    return ZT_OK;
}

zt_status zt_pretok_read(const cJSON *json, const char *where, zt_pretok **out)
{
    return read_new(read_step, json, where, out);
}

zt_status zt_pretok_read_pattern(const cJSON *json, const char *where, zt_pretok **out)
{
    return read_new(read_pattern, json, where, out);
}

int zt_pretok_byte_level(const zt_pretok *p)
{
    if (p->kind == STEP_BYTE_LEVEL) return 1;
    for (int i = 0; i < p->nsteps; i++)
        if (zt_pretok_byte_level(p->steps[i])) return 1;
    return 0;
}

void zt_pretok_free(zt_pretok *p)
{
    if (!p) return;
    for (int i = 0; i < p->nsteps; i++) zt_pretok_free(p->steps[i]);
    free(p->steps);
    pcre2_code_free(p->re);
    free(p->where);
    free(p);
}

/* --- splitting ------------------------------------------------------------------------ */

/* A stretch of the text: a match of the pattern, or a gap between two. */
typedef struct seg {
    size_t start, end;
    int match;
} seg;

typedef struct work {
    pcre2_match_data *md;
    seg *seg, *acc;
    size_t nseg, cap;
    zt_buf prefixed; /* ByteLevel's piece with its prefix space */
} work;

static zt_status seg_push(work *w, size_t start, size_t end, int match)
{
    if (w->nseg == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        seg *s = realloc(w->seg, cap * sizeof *s);
        if (s) w->seg = s;
        seg *a = s ? realloc(w->acc, cap * sizeof *a) : NULL;
        if (!a) return zt_fail(ZT_ENOMEM, "out of memory for %zu pieces", cap);
        w->acc = a;
        w->cap = cap;
    }
    w->seg[w->nseg++] = (seg){start, end, match};
    return ZT_OK;
}

/* The next match at or after `from`: 1 with [*ms, *me), 0 when none. */
static int next_match(const zt_pretok *p, const char *t, size_t n, size_t from, work *w, size_t *ms, size_t *me,
                      zt_status *st)
{
    int rc = p->jit ? pcre2_jit_match(p->re, (PCRE2_SPTR)t, n, from, 0, w->md, NULL)
                    : pcre2_match(p->re, (PCRE2_SPTR)t, n, from, 0, w->md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) {
        PCRE2_UCHAR why[256];
        pcre2_get_error_message(rc, why, sizeof why);
        *st = zt_fail(ZT_EUSER, "%s: the regex failed on a piece of %zu bytes: %s", p->where, n, (const char *)why);
        return 0;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

/* The matches of p in t[0, n) and the gaps between them, in w->seg. An empty
 * match right where the last match ended is skipped, one character on, as
 * Oniguruma's find_iter does. */
static zt_status find_segments(const zt_pretok *p, const char *t, size_t n, work *w)
{
    w->nseg = 0;
    size_t pos = 0, prev = 0, ms, me;
    int matched = 0;
    zt_status st = ZT_OK;
    while (pos <= n && next_match(p, t, n, pos, w, &ms, &me, &st)) {
        if (ms == me && matched && me == prev) {
            uint32_t cp;
            pos = me < n ? me + zt_utf8_next(t + me, n - me, &cp) : n + 1;
            continue;
        }
        if (ms > prev && (st = seg_push(w, prev, ms, 0))) return st;
        if ((st = seg_push(w, ms, me, 1))) return st;
        prev = pos = me;
        matched = 1;
    }
    if (!st && prev < n) st = seg_push(w, prev, n, 0);
    return st;
}

/* Hugging Face's SplitDelimiterBehavior over w->seg, into w->acc; returns the
 * count. A removed stretch keeps match = 1, every other one 0. */
static size_t apply_behavior(behavior b, work *w)
{
    size_t na = 0;
    int previous = 0;
    if (b == MERGED_WITH_NEXT) { /* built from the end, then turned around */
        for (size_t i = w->nseg; i-- > 0;) {
            seg s = w->seg[i];
            if (s.match && !previous && na) w->acc[na - 1].start = s.start;
            else w->acc[na++] = (seg){s.start, s.end, 0};
            previous = s.match;
        }
        for (size_t i = 0; i < na / 2; i++) {
            seg t = w->acc[i];
            w->acc[i] = w->acc[na - 1 - i];
            w->acc[na - 1 - i] = t;
        }
        return na;
    }
    for (size_t i = 0; i < w->nseg; i++) {
        seg s = w->seg[i];
        int merge = (b == CONTIGUOUS && s.match == previous) || (b == MERGED_WITH_PREVIOUS && s.match && !previous);
        if (merge && na) w->acc[na - 1].end = s.end;
        else w->acc[na++] = (seg){s.start, s.end, b == REMOVED && s.match};
        previous = s.match;
    }
    return na;
}

/* Pushes a piece that starts at t[start]; at_start: t begins where the text did. */
static zt_status push_from(zt_pieces *out, const char *t, size_t start, size_t end, int at_start)
{
    if (at_start && out->n == 0 && start == 0) out->at_start = 1;
    return zt_pieces_push(out, t + start, end - start);
}

static zt_status split_piece(const zt_pretok *p, const char *t, size_t n, int at_start, zt_pieces *out, work *w)
{
    zt_status st = find_segments(p, t, n, w);
    if (st) return st;
    if (p->invert)
        for (size_t i = 0; i < w->nseg; i++) w->seg[i].match = !w->seg[i].match;
    size_t na = apply_behavior(p->behavior, w);
    for (size_t i = 0; i < na && !st; i++)
        if (!w->acc[i].match && w->acc[i].end > w->acc[i].start)
            st = push_from(out, t, w->acc[i].start, w->acc[i].end, at_start);
    return st;
}

zt_status zt_pretok_replace(const zt_pretok *split, const char *text, size_t len, const char *with, zt_buf *out)
{
    if (!len) return zt_buf_append(out, "", 0); /* Hugging Face finds no match in empty text */
    work w = {0};
    zt_status st = (w.md = pcre2_match_data_create(1, NULL)) ? find_segments(split, text, len, &w)
                                                             : zt_fail(ZT_ENOMEM, "out of memory");
    for (size_t i = 0; i < w.nseg && !st; i++)
        st = w.seg[i].match ? zt_buf_append(out, with, strlen(with))
                            : zt_buf_append(out, text + w.seg[i].start, w.seg[i].end - w.seg[i].start);
    pcre2_match_data_free(w.md);
    free(w.seg);
    free(w.acc);
    return st;
}

/* ByteLevel: a space in front unless there is one, then GPT-2's split. */
static zt_status byte_level_piece(const zt_pretok *p, const char *t, size_t n, int at_start, zt_pieces *out, work *w)
{
    if (p->add_prefix_space && t[0] != ' ') {
        zt_status st;
        w->prefixed.n = 0;
        if ((st = zt_buf_append(&w->prefixed, " ", 1)) || (st = zt_buf_append(&w->prefixed, t, n))) return st;
        t = w->prefixed.p;
        n = w->prefixed.n;
    }
    return p->re ? split_piece(p, t, n, at_start, out, w) : push_from(out, t, 0, n, at_start);
}

/* Metaspace: spaces become the replacement, which goes in front as the
 * prepend scheme says ("first": only for the piece where the text starts),
 * then a cut in front of each replacement when splitting. */
static zt_status metaspace_piece(const zt_pretok *p, const char *t, size_t n, int at_start, zt_pieces *out, work *w)
{
    size_t rn = strlen(p->replacement);
    zt_buf *b = &w->prefixed;
    b->n = 0;
    zt_status st = ZT_OK;
    for (size_t i = 0; i < n && !st; i++)
        st = t[i] == ' ' ? zt_buf_append(b, p->replacement, rn) : zt_buf_append(b, t + i, 1);
    int starts = b->n >= rn && memcmp(b->p, p->replacement, rn) == 0;
    if (!st && !starts && (p->prepend == PREPEND_ALWAYS || (p->prepend == PREPEND_FIRST && at_start))) {
        if (!(st = zt_buf_append(b, p->replacement, rn))) { /* room, then the text moves right */
            memmove(b->p + rn, b->p, b->n - rn);
            memcpy(b->p, p->replacement, rn);
        }
    }
    if (st) return st;
    return p->re ? split_piece(p, b->p, b->n, at_start, out, w) : push_from(out, b->p, 0, b->n, at_start);
}

/* Cuts every piece of *cur with p; *cur then points at the result, *spare at scratch. */
static zt_status apply(const zt_pretok *p, zt_pieces **cur, zt_pieces **spare, work *w)
{
    zt_status st = ZT_OK;
    if (p->kind == STEP_SEQUENCE) {
        for (int i = 0; i < p->nsteps && !st; i++) st = apply(p->steps[i], cur, spare, w);
        return st;
    }
    if (p->kind == STEP_BYTE_LEVEL && !p->add_prefix_space && !p->re) return ZT_OK; /* keeps every piece as is */
    zt_pieces *in = *cur, *out = *spare;
    out->n = out->text.n = 0;
    out->at_start = 0;
    for (size_t i = 0; i < in->n && !st; i++) {
        const char *t = zt_piece_text(in, i);
        size_t n = zt_piece_len(in, i);
        int at_start = i == 0 && in->at_start;
        st = p->kind == STEP_BYTE_LEVEL  ? byte_level_piece(p, t, n, at_start, out, w)
             : p->kind == STEP_METASPACE ? metaspace_piece(p, t, n, at_start, out, w)
                                         : split_piece(p, t, n, at_start, out, w);
    }
    *cur = out;
    *spare = in;
    return st;
}

zt_status zt_pretok_split_from(const zt_pretok *p, const char *text, size_t len, int at_start, zt_pieces *out)
{
    out->n = out->text.n = 0;
    out->at_start = at_start;
    zt_pieces other = {0}, *cur = out, *spare = &other;
    work w = {0};
    zt_status st = len ? zt_pieces_push(out, text, len) : ZT_OK;
    if (!st && len && !(w.md = pcre2_match_data_create(1, NULL))) st = zt_fail(ZT_ENOMEM, "out of memory");
    if (!st && len) st = apply(p, &cur, &spare, &w);
    if (cur != out) { /* the result is in `other`: hand its buffers to out */
        zt_pieces t = *out;
        *out = other;
        other = t;
    }
    zt_pieces_free(&other);
    pcre2_match_data_free(w.md);
    free(w.seg);
    free(w.acc);
    free(w.prefixed.p);
    return st;
}

zt_status zt_pretok_split(const zt_pretok *p, const char *text, size_t len, zt_pieces *out)
{
    return zt_pretok_split_from(p, text, len, 1, out);
}
