/* tokenizers/decoder: the decoders of a Hugging Face tokenizer.json (ByteLevel,
 * Metaspace, ByteFallback, Fuse, Strip, Replace and Sequences of them), which
 * turn the pieces of the ids back into text. Each step maps the list of pieces
 * to a new list; the text is the last list joined. Without a decoder (null) the
 * pieces are joined with spaces, as Hugging Face does.
 *
 *     zt_decoder *d;
 *     st = zt_decoder_read(json, "decoder", &d);      // names the JSON path on error
 *     st = zt_decode(d, &pieces, &text);               // appends to text
 */
#ifndef ZT_TOKENIZERS_DECODER_H
#define ZT_TOKENIZERS_DECODER_H

#include <cjson/cJSON.h>

#include "tokenizers/pretok.h"

typedef struct zt_decoder zt_decoder;

/* json may be NULL or null (no decoder); *out is never NULL on success. */
zt_status zt_decoder_read(const cJSON *json, const char *where, zt_decoder **out);
/* Appends the decoding of pieces to out; pieces is used as scratch. */
zt_status zt_decode(const zt_decoder *d, zt_pieces *pieces, zt_buf *out);
void zt_decoder_free(zt_decoder *d);

#endif
