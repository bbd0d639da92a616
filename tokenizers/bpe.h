/* tokenizers/bpe: the BPE and WordLevel models of a Hugging Face tokenizer.json:
 * byte-level BPE (GPT-2, Llama 3, Qwen2: a ByteLevel pre-tokenizer, its
 * byte-to-unicode mapping), and BPE over characters (Llama 2, Mistral:
 * Metaspace or a normalizer writing spaces as '▁', byte_fallback to <0xXX>
 * pieces, fuse_unk, continuing_subword_prefix, end_of_word_suffix), merges by
 * rank; a WordLevel model is a vocabulary of whole words and no merges; a
 * Unigram model (unigram.c) pieces with scores and Viterbi. The
 * pre-tokenizer is tokenizers/pretok.h's, the decoder tokenizers/decoder.h's.
 * Internal to tokenizers/; reached through tokenizers/tokenizer.h.
 *
 *   bpe_json.c   reads tokenizer.json into a zt_bpe (zt_bpe_open)
 *   bpe.c        vocabulary, merges, encode and decode of pre-tokenized words
 *   bpe_cache.c  a thread-safe cache of encoded words
 *   unigram.c    the Unigram model's encode
 */
#ifndef ZT_TOKENIZERS_BPE_H
#define ZT_TOKENIZERS_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizers/hashmap.h"
#include "tokenizers/pretok.h"
#include "tokenizers/tok_internal.h"

/* Caches words of at most ZT_BPE_CACHE_WORD bytes that encode to at most ZT_BPE_CACHE_IDS ids. */
#define ZT_BPE_CACHE_WORD 22
#define ZT_BPE_CACHE_IDS 8
typedef struct zt_bpe_cache zt_bpe_cache;
zt_status zt_bpe_cache_new(zt_bpe_cache **out);
void zt_bpe_cache_free(zt_bpe_cache *c);
/* Copies the ids of word w[0, n) into ids[] and returns their count; -1 when not cached. */
int zt_bpe_cache_get(zt_bpe_cache *c, const char *w, size_t n, int32_t *ids);
void zt_bpe_cache_put(zt_bpe_cache *c, const char *w, size_t n, const int32_t *ids, size_t nids);

typedef struct zt_bpe {
    char *path;
    int byte_level; /* pieces are written in the byte alphabet of a ByteLevel pre-tokenizer */
    int word_level; /* a WordLevel model: whole words only */
    int unigram;    /* a Unigram model: score, min_score and max_piece are set */
    double *score;  /* Unigram: per id, the piece's log-probability */
    double min_score;
    size_t max_piece;        /* Unigram: the longest piece, in bytes */
    int32_t n_vocab;         /* largest id + 1 */
    char *blob;              /* the pieces, NUL-terminated, then (byte_level) their decoded bytes */
    uint32_t *piece;         /* per id: offset of the piece in blob; UINT32_MAX for an unused id */
    zt_strmap by_bytes;      /* byte_level: decoded bytes → id, for pieces written in the byte alphabet */
    zt_strmap by_piece;      /* piece → id, for the others (byte_level: they never come out of merges) */
    int32_t byte_id[256];    /* byte_level: the piece of each byte */
    int32_t byte_piece[256]; /* the <0xXX> pieces, for byte_fallback */
    zt_pairmap merges;
    int32_t unk;
    int fuse_unk, ignore_merges, byte_fallback;
    char *prefix, *suffix; /* continuing_subword_prefix, end_of_word_suffix; NULL when none */
    zt_pretok *pretok;     /* NULL: each text is one word */
    zt_bpe_cache *cache;
} zt_bpe;

/* The byte that the byte-level alphabet writes as code point cp, or -1. */
int zt_bytelevel_byte(uint32_t cp);

/* Fills the vocabulary from (piece, id) pairs: the maps, byte_id and byte_piece. */
zt_status zt_bpe_set_vocab(zt_bpe *b, const char *const *pieces, const int32_t *ids, int32_t n);
int32_t zt_bpe_piece_to_id(const zt_bpe *b, const char *piece, size_t len);
/* Adds merge number `rank`, left + right; ZT_EUSER when a part is not in the vocabulary. */
zt_status zt_bpe_add_merge(zt_bpe *b, const char *left, size_t nleft, const char *right, size_t nright, int32_t rank);
void zt_bpe_free(zt_bpe *b);
/* Unigram: appends the ids of one pre-tokenized word w[0, n). */
zt_status zt_unigram_encode_word(const zt_bpe *b, const char *w, size_t n, zt_ivec *out);

extern const zt_tok_ops zt_bpe_ops;

#endif
