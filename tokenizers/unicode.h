/* tokenizers/unicode: UTF-8 decoding, the character classes the byte-level
 * pre-tokenizer needs (\p{L}, \p{N}, \s, \w), and NFC, from tables generated
 * by tokenizers/gen_unicode_tables.py (the Unicode version is zt_uni_version).
 *
 *     uint32_t cp;
 *     size_t n = zt_utf8_next(s, len, &cp);          // 1..4 bytes
 *     if (zt_uni_class_of(cp) == ZT_UNI_LETTER) ...
 *     st = zt_nfc(text, len, &buf);                   // appends the NFC form to buf
 */
#ifndef ZT_TOKENIZERS_UNICODE_H
#define ZT_TOKENIZERS_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

typedef enum zt_uni_class {
    ZT_UNI_OTHER,         /* anything below */
    ZT_UNI_LETTER,        /* L: Lu Ll Lt Lm Lo */
    ZT_UNI_DIGIT,         /* Nd */
    ZT_UNI_NUMBER_LETTER, /* Nl */
    ZT_UNI_NUMBER_OTHER,  /* No */
    ZT_UNI_MARK,          /* M: Mn Mc Me */
    ZT_UNI_CONNECTOR,     /* Pc */
    ZT_UNI_SPACE,         /* the White_Space property (what \s matches) */
} zt_uni_class;

/* NFC_Quick_Check */
enum { ZT_UNI_QC_YES, ZT_UNI_QC_NO, ZT_UNI_QC_MAYBE };

typedef struct zt_uni_range {
    uint32_t first, last; /* code points, inclusive */
    uint8_t value;
} zt_uni_range;

typedef struct zt_uni_decomp {
    uint32_t cp;
    uint16_t offset; /* into zt_uni_decomp_pool */
    uint8_t len;
} zt_uni_decomp;

typedef struct zt_uni_comp {
    uint32_t first, second, composite;
} zt_uni_comp;

/* Sorted, disjoint ranges; code points outside them have the value 0. */
extern const char zt_uni_version[];
extern const zt_uni_range zt_uni_classes[]; /* zt_uni_class */
extern const int zt_uni_classes_n;
extern const zt_uni_range zt_uni_ccc[]; /* canonical combining class */
extern const int zt_uni_ccc_n;
extern const zt_uni_range zt_uni_nfc_qc[]; /* ZT_UNI_QC_* */
extern const int zt_uni_nfc_qc_n;
/* full canonical decompositions (Hangul syllables aside), sorted by cp */
extern const zt_uni_decomp zt_uni_decomps[];
extern const int zt_uni_decomps_n;
extern const uint32_t zt_uni_decomp_pool[];
/* primary composites, sorted by (first, second) */
extern const zt_uni_comp zt_uni_comps[];
extern const int zt_uni_comps_n;

int zt_uni_lookup(const zt_uni_range *r, int n, uint32_t cp);

/* A code point that stands for an invalid or truncated UTF-8 sequence. */
#define ZT_UNI_INVALID 0xFFFFFFFFu

zt_uni_class zt_uni_class_of(uint32_t cp);

static inline int zt_uni_is_number(zt_uni_class c)
{
    return c == ZT_UNI_DIGIT || c == ZT_UNI_NUMBER_LETTER || c == ZT_UNI_NUMBER_OTHER;
}

/* \w of Rust's regex: alphabetic, marks, decimal digits, connector punctuation, joiners. */
int zt_uni_is_word(uint32_t cp);

/* Decodes the character at s[0] (n > 0) into *cp and returns its length. An
 * invalid sequence yields ZT_UNI_INVALID and the length of its maximal valid
 * prefix (at least 1), so each invalid part counts once, as in WHATWG decoding. */
size_t zt_utf8_next(const char *s, size_t n, uint32_t *cp);

/* The start of the character that ends at s[n] (n > 0); s[0] is a boundary. */
size_t zt_utf8_prev(const char *s, size_t n);

/* Writes cp as UTF-8 into out[4] and returns the length. */
size_t zt_utf8_put(char *out, uint32_t cp);

/* Appends the NFC form of text to out (Unicode Standard Annex #15); bytes of
 * invalid UTF-8 pass through unchanged. */
struct zt_buf;
zt_status zt_nfc(const char *text, size_t len, struct zt_buf *out);

#endif
