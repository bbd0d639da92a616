/* tokenizers/normalize: the normalizers of a Hugging Face tokenizer.json (NFC,
 * NFD, NFKC, NFKD, Lowercase, Strip, Prepend, Replace and Sequences of them),
 * with ICU for the Unicode forms and case. Invalid UTF-8 passes through as is.
 *
 *     zt_normalizer *n;                                   // NULL: none
 *     st = zt_normalizer_read(json, "normalizer", &n);   // names the JSON path on error
 *     st = zt_normalize(n, text, len, &buf);              // appends the normalized text
 */
#ifndef ZT_TOKENIZERS_NORMALIZE_H
#define ZT_TOKENIZERS_NORMALIZE_H

#include <cjson/cJSON.h>

#include "tokenizers/tok_internal.h"

/* *out is NULL when json is null or an empty Sequence (nothing to do). */
zt_status zt_normalizer_read(const cJSON *json, const char *where, zt_normalizer **out);
zt_status zt_normalize(const zt_normalizer *n, const char *text, size_t len, zt_buf *out);
void zt_normalizer_free(zt_normalizer *n);

#endif
