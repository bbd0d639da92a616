/* tokenizers/pretok: the pre-tokenizers of a Hugging Face tokenizer.json
 * (ByteLevel, Metaspace, Split, Digits, Whitespace, WhitespaceSplit, Punctuation and
 * Sequences of them), with PCRE2 for the regexes. A pre-tokenizer cuts text
 * into pieces that the model encodes one by one; each step of a Sequence cuts
 * every piece the step before it made, and empty pieces are dropped, as
 * Hugging Face's PreTokenizedString does.
 *
 *     zt_pretok *p;
 *     st = zt_pretok_read(json, "pre_tokenizer", &p);   // names the JSON path on error
 *     zt_pieces pieces = {0};
 *     st = zt_pretok_split(p, text, len, &pieces);
 *     for (size_t i = 0; i < pieces.n; i++) use(zt_piece_text(&pieces, i), zt_piece_len(&pieces, i));
 *
 * zt_pretok_split may run on many threads at once.
 */
#ifndef ZT_TOKENIZERS_PRETOK_H
#define ZT_TOKENIZERS_PRETOK_H

#include <cjson/cJSON.h>

#include "tokenizers/tok_internal.h"

typedef struct zt_pretok zt_pretok;

/* Pieces back to back in one buffer: piece i is text.p[end[i - 1], end[i]). */
typedef struct zt_pieces {
    zt_buf text;
    size_t *end;
    size_t n, cap;
    int at_start; /* piece 0 begins where the text did (Metaspace's prepend_scheme "first") */
} zt_pieces;

static inline const char *zt_piece_text(const zt_pieces *s, size_t i) { return s->text.p + (i ? s->end[i - 1] : 0); }
static inline size_t zt_piece_len(const zt_pieces *s, size_t i) { return s->end[i] - (i ? s->end[i - 1] : 0); }
zt_status zt_pieces_push(zt_pieces *s, const char *p, size_t n);
void zt_pieces_free(zt_pieces *s);

/* Reads the pre-tokenizer object json found at `where` (a JSON path, for the
 * errors: "pre_tokenizer.pretokenizers[1]"). What zt does not implement, and a
 * regex PCRE2 cannot compile, is ZT_EUSER naming the component and its path. */
zt_status zt_pretok_read(const cJSON *json, const char *where, zt_pretok **out);
/* Reads only the "pattern" of json ({"Regex": ...} or {"String": ...}), for
 * zt_pretok_replace. */
zt_status zt_pretok_read_pattern(const cJSON *json, const char *where, zt_pretok **out);
/* Reads json's field `name`, a string of one character (UTF-8, NUL-terminated). */
zt_status zt_json_char(const cJSON *json, const char *name, const char *where, char out[5]);
/* Reads Metaspace's replacement, prepend scheme (0 always, 1 first, 2 never)
 * and split, for the pre-tokenizer and the decoder alike. */
zt_status zt_metaspace_read(const cJSON *json, const char *where, char replacement[5], int *prepend, int *split);
/* Whether a ByteLevel step is part of p (its pieces are then byte-level). */
int zt_pretok_byte_level(const zt_pretok *p);
/* Replaces the contents of out with the pieces of text[0, len). */
zt_status zt_pretok_split(const zt_pretok *p, const char *text, size_t len, zt_pieces *out);
/* The same for a piece of a longer text; at_start: the piece is where that text
 * begins (Hugging Face's offset 0 in the original text, which Metaspace's
 * prepend_scheme "first" asks for). */
zt_status zt_pretok_split_from(const zt_pretok *p, const char *text, size_t len, int at_start, zt_pieces *out);
void zt_pretok_free(zt_pretok *p);
/* Appends text[0, len) to out with every match of split's pattern (a Split
 * pre-tokenizer's; its behavior and invert aside) replaced by `with`, as the
 * Replace normalizer does. */
zt_status zt_pretok_replace(const zt_pretok *split, const char *text, size_t len, const char *with, zt_buf *out);

#endif
