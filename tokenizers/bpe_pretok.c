/* The pre-tokenizer regexes of GPT-2, Llama 3 and Qwen2 as hand-written
 * matchers. Each returns the match that a backtracking engine (Oniguruma, as
 * Hugging Face uses) finds at the start of the text: the first alternative that
 * matches wins. Every character starts some alternative, so the matches tile
 * the text and Split's "Isolated" pieces are exactly the matches. */
#include <string.h>

#include "tokenizers/bpe.h"
#include "tokenizers/unicode.h"

static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RE_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

zt_pretok_kind zt_pretok_from_regex(const char *regex)
{
    if (strcmp(regex, RE_GPT2) == 0) return ZT_PRETOK_GPT2;
    if (strcmp(regex, RE_LLAMA3) == 0) return ZT_PRETOK_LLAMA3;
    if (strcmp(regex, RE_QWEN2) == 0) return ZT_PRETOK_QWEN2;
    return ZT_PRETOK_NONE;
}

/* what the regexes tell apart: \p{L}, \p{N}, \s and the rest */
enum { CAT_L, CAT_N, CAT_S, CAT_O };

/* The category of the character at t[i] (i < len); *n is its length. */
static int cat_at(const char *t, size_t len, size_t i, size_t *n)
{
    unsigned char c = (unsigned char)t[i];
    if (c < 0x80) {
        *n = 1;
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return CAT_L;
        if (c >= '0' && c <= '9') return CAT_N;
        if (c == ' ' || (c >= '\t' && c <= '\r')) return CAT_S;
        return CAT_O;
    }
    uint32_t cp;
    *n = zt_utf8_next(t + i, len - i, &cp);
    zt_uni_class k = zt_uni_class_of(cp);
    if (k == ZT_UNI_LETTER) return CAT_L;
    if (zt_uni_is_number(k)) return CAT_N;
    if (k == ZT_UNI_SPACE) return CAT_S;
    return CAT_O;
}

/* The end of the run of category `cat` that starts at i. */
static size_t run_end(const char *t, size_t len, size_t i, int cat)
{
    size_t n;
    while (i < len && cat_at(t, len, i, &n) == cat) i += n;
    return i;
}

/* \s+(?!\S)|\s+ at a whitespace character: the whole run when it ends the
 * text or is one character long, else all of it but its last character
 * (which then leads the next pre-token). */
static size_t space_run(const char *t, size_t len)
{
    size_t i = 0, last = 0, n;
    int count = 0;
    while (i < len && cat_at(t, len, i, &n) == CAT_S) {
        last = i;
        i += n;
        count++;
    }
    return i == len || count == 1 ? i : last;
}

/* 's|'t|'re|'ve|'m|'ll|'d, ASCII-case-insensitive when fold (plus ſ, which
 * folds to s); 0 when none matches. */
static size_t contraction(const char *t, size_t len, int fold)
{
    if (len < 2 || t[0] != '\'') return 0;
    unsigned char a = (unsigned char)t[1], b = len > 2 ? (unsigned char)t[2] : 0;
    if (fold) {
        if (a == 0xC5 && b == 0xBF) return 3; /* U+017F LATIN SMALL LETTER LONG S */
        if (a >= 'A' && a <= 'Z') a |= 0x20;
        if (b >= 'A' && b <= 'Z') b |= 0x20;
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

static size_t next_gpt2(const char *t, size_t len)
{
    size_t m = contraction(t, len, 0), n0, n1;
    if (m) return m;
    int c0 = cat_at(t, len, 0, &n0);
    if (c0 == CAT_S && t[0] == ' ' && len > 1) { /*  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ */
        int c1 = cat_at(t, len, 1, &n1);
        if (c1 != CAT_S) return run_end(t, len, 1, c1);
    }
    if (c0 != CAT_S) return run_end(t, len, 0, c0);
    return space_run(t, len);
}

static size_t next_llama3(const char *t, size_t len, int max_digits)
{
    size_t m = contraction(t, len, 1), n0, n1;
    if (m) return m;
    int c0 = cat_at(t, len, 0, &n0);
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c0 == CAT_L) return run_end(t, len, 0, CAT_L);
    if (c0 != CAT_N && t[0] != '\r' && t[0] != '\n' && n0 < len && cat_at(t, len, n0, &n1) == CAT_L)
        return run_end(t, len, n0, CAT_L);
    /* \p{N}{1,3} (Qwen2: \p{N}) */
    if (c0 == CAT_N) {
        size_t i = 0;
        for (int k = 0; k < max_digits && i < len && cat_at(t, len, i, &n1) == CAT_N; k++) i += n1;
        return i;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t start = c0 == CAT_O ? 0 : t[0] == ' ' && len > 1 && cat_at(t, len, 1, &n1) == CAT_O ? 1 : len;
    if (start < len) {
        size_t i = run_end(t, len, start, CAT_O);
        while (i < len && (t[i] == '\r' || t[i] == '\n')) i++;
        return i;
    }
    /* \s*[\r\n]+ : up to the last line break of the whitespace run */
    size_t i = 0, end = 0;
    while (i < len && cat_at(t, len, i, &n1) == CAT_S) {
        if (t[i] == '\r' || t[i] == '\n') end = i + 1;
        i += n1;
    }
    if (end) return end;
    return space_run(t, len);
}

size_t zt_pretok_next(zt_pretok_kind kind, const char *text, size_t len)
{
    switch (kind) {
    case ZT_PRETOK_GPT2: return next_gpt2(text, len);
    case ZT_PRETOK_LLAMA3: return next_llama3(text, len, 3);
    case ZT_PRETOK_QWEN2: return next_llama3(text, len, 1);
    case ZT_PRETOK_NONE: break;
    }
    return len;
}
