/* core/utf8: decoding and encoding UTF-8, strictly (no overlong forms, surrogates or
 * code points past U+10FFFF).
 *
 *     uint32_t cp;
 *     size_t n = zt_utf8_next(s, len, &cp);          // 1..4 bytes; ZT_UNI_INVALID for bad ones
 *     if (zt_utf8_valid_len(s, len) < len) ...       // not UTF-8 from that byte on
 */
#ifndef ZT_CORE_UTF8_H
#define ZT_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* A code point that stands for an invalid or truncated UTF-8 sequence. */
#define ZT_UNI_INVALID 0xFFFFFFFFu

/* Decodes the character at s[0] (n > 0) into *cp and returns its length. An
 * invalid sequence yields ZT_UNI_INVALID and the length of its maximal valid
 * prefix (at least 1), so each invalid part counts once, as in WHATWG decoding. */
size_t zt_utf8_next(const char *s, size_t n, uint32_t *cp);

/* The start of the character that ends at s[n] (n > 0); s[0] is a boundary. */
size_t zt_utf8_prev(const char *s, size_t n);

/* Writes cp as UTF-8 into out[4] and returns the length. */
size_t zt_utf8_put(char *out, uint32_t cp);

/* The length of s's longest prefix that is valid UTF-8: n when all of it is. */
size_t zt_utf8_valid_len(const char *s, size_t n);

#endif
