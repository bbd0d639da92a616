/* tokenizers/tokenizer: one C API over the two tokenizer files Llama-family
 * models ship: SentencePiece (tokenizer.model, through libsentencepiece) and
 * Hugging Face's tokenizer.json (byte-level BPE of the GPT-2, Llama 3 and Qwen2
 * kind, SentencePiece-style BPE with byte fallback of the Llama 2 and Mistral
 * kind, Unigram, WordLevel: their normalizers, pre-tokenizers and decoders),
 * with added and special tokens as Hugging Face handles them. What zt does not
 * implement is refused by name.
 *
 *     zt_tokenizer *tok;
 *     zt_status st = zt_tokenizer_open(&tok, "models/tiny-llama");   // a directory or a file
 *     if (st) return st;
 *     int32_t *ids; size_t n;
 *     if (!(st = zt_tokenizer_encode(tok, text, strlen(text), 1, &ids, &n))) {
 *         char *back;
 *         st = zt_tokenizer_decode(tok, ids, n, 0, &back);            // == text for lossless tokenizers
 *         free(back);
 *         free(ids);
 *     }
 *     zt_tokenizer_free(tok);
 *
 * Encode never adds BOS/EOS: the caller does, with zt_tokenizer_template().
 * Encoding, decoding and the lookups may run concurrently on one tokenizer;
 * zt_tokenizer_add_special may not run alongside anything else.
 */
#ifndef ZT_TOKENIZERS_TOKENIZER_H
#define ZT_TOKENIZERS_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

typedef struct zt_tokenizer zt_tokenizer;

/* path: a directory (tokenizer.json is preferred over tokenizer.model, as
 * Hugging Face does; a tokenizer.json zt cannot read falls back to a
 * tokenizer.model next to it) or either file. tokenizer_config.json and
 * special_tokens_map.json next to the file, when present, give the special
 * tokens, add_bos_token / add_eos_token and the added tokens of
 * added_tokens_decoder.
 * A model zt cannot read is ZT_EUSER with the file and field named. */
zt_status zt_tokenizer_open(zt_tokenizer **out, const char *path);
void zt_tokenizer_free(zt_tokenizer *tok);

/* Text (any bytes; UTF-8 expected) to ids; *ids is malloc'd (free it), *n may
 * be 0. parse_special: special tokens written in the text (<|im_start|>, <s>)
 * become their ids; when 0 they are encoded as plain text. Non-special added
 * tokens (and SentencePiece user-defined symbols) always match, as in
 * Hugging Face. */
zt_status zt_tokenizer_encode(const zt_tokenizer *tok, const char *text, size_t len, int parse_special, int32_t **ids,
                              size_t *n);

/* Ids to a NUL-terminated, valid UTF-8 string (invalid byte sequences become
 * U+FFFD); *text is malloc'd. skip_special drops special tokens, else they are
 * written as their pieces. An id outside the vocabulary is ZT_EUSER. */
zt_status zt_tokenizer_decode(const zt_tokenizer *tok, const int32_t *ids, size_t n, int skip_special, char **text);

/* Largest id + 1, added tokens included. */
int32_t zt_tokenizer_vocab_size(const zt_tokenizer *tok);
int32_t zt_tokenizer_piece_to_id(const zt_tokenizer *tok, const char *piece); /* -1 when absent */
/* The piece as the vocabulary writes it ("Ġthe", "▁the", "<|im_end|>"); NULL
 * when id has none. Valid until the tokenizer is freed. */
const char *zt_tokenizer_id_to_piece(const zt_tokenizer *tok, int32_t id);

/* -1 when the tokenizer has none */
int32_t zt_tokenizer_bos_id(const zt_tokenizer *tok);
int32_t zt_tokenizer_eos_id(const zt_tokenizer *tok);
int32_t zt_tokenizer_pad_id(const zt_tokenizer *tok);
int32_t zt_tokenizer_unk_id(const zt_tokenizer *tok);
/* The special tokens Hugging Face's encode(text, add_special_tokens=True) puts
 * before the text's ids (after = 0) or after them (after = 1): the single
 * template of tokenizer.json's post-processor (TemplateProcessing, alone or in
 * a Sequence), which also gives BOS (its first token before) and EOS (its last
 * after); tokenizer_config.json's add_bos_token / add_eos_token, where set,
 * replace a side with BOS / EOS alone or nothing, as transformers' Llama and
 * Gemma tokenizers do; a tokenizer.model puts its BOS before. Returns how many;
 * *ids is valid until the tokenizer is freed. */
size_t zt_tokenizer_template(const zt_tokenizer *tok, int after, const int32_t **ids);

/* Makes piece a special token: its id when it is already in the vocabulary,
 * else a new id at the end. For chat templates whose tokens the vocabulary lacks. */
zt_status zt_tokenizer_add_special(zt_tokenizer *tok, const char *piece, int32_t *id);
int zt_tokenizer_is_special(const zt_tokenizer *tok, int32_t id);

/* The model file in use, and its kind: "sentencepiece" (tokenizer.model) or
 * "bpe" (tokenizer.json, whichever its model). */
const char *zt_tokenizer_path(const zt_tokenizer *tok);
const char *zt_tokenizer_kind(const zt_tokenizer *tok);

#endif
