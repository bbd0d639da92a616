/* tokenizers/tok_internal: what the tokenizer front (tokenizer.c) shares with
 * its models, SentencePiece (spm_spm.cc) and tokenizer.json's (bpe*.c):
 * growable buffers, the added-token set and the model interface.
 *
 * Encoding text goes: added tokens that match the raw text (pass 1) → the
 * model's normalizer → added tokens that match the normalized text (pass 2) →
 * the model's encode on each piece in between, as Hugging Face does.
 */
#ifndef ZT_TOKENIZERS_TOK_INTERNAL_H
#define ZT_TOKENIZERS_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "lib/core/status.h" /* C linkage for the shim, spm_spm.cc */

/* --- buffers (buf.c) ------------------------------------------------------------------ */

typedef struct zt_ivec {
    int32_t *v;
    size_t n, cap;
} zt_ivec;

typedef struct zt_buf {
    char *p; /* kept NUL-terminated */
    size_t n, cap;
} zt_buf;

zt_status zt_ivec_push(zt_ivec *v, int32_t x);
zt_status zt_buf_append(zt_buf *b, const void *p, size_t n);

/* --- added tokens (added.c) ----------------------------------------------------------- */

enum {
    ZT_ADDED_SPECIAL = 1,     /* skipped by decode(skip_special); matched only with parse_special */
    ZT_ADDED_NORMALIZED = 2,  /* matched against normalized text (pass 2) */
    ZT_ADDED_LSTRIP = 4,      /* the match swallows whitespace on its left */
    ZT_ADDED_RSTRIP = 8,      /* ... and on its right */
    ZT_ADDED_SINGLE_WORD = 16 /* only matches between non-word characters */
};

typedef struct zt_added_token {
    char *content;
    size_t len; /* bytes */
    int32_t id;
    unsigned flags; /* ZT_ADDED_* */
} zt_added_token;

typedef struct zt_added_set {
    zt_added_token *tok;
    int n, cap;
    int *by_id;          /* indices of tok sorted by id */
    int *by_first;       /* indices sorted by first byte, then longest first */
    int first[257];      /* by_first[first[b] .. first[b + 1]) start with byte b */
    uint8_t starts[256]; /* 1: a token matched in raw text starts with byte b; 2: a normalized one does */
} zt_added_set;

typedef struct zt_added_match {
    size_t start, end; /* bytes of text, whitespace taken by lstrip/rstrip included */
    const zt_added_token *tok;
} zt_added_match;

/* Adds a token, or updates the flags of one with the same content. */
zt_status zt_added_put(zt_added_set *s, const char *content, size_t len, int32_t id, unsigned flags);
const zt_added_token *zt_added_by_id(const zt_added_set *s, int32_t id);
const zt_added_token *zt_added_by_content(const zt_added_set *s, const char *content, size_t len);
/* The next match in text[from, len) among tokens whose ZT_ADDED_NORMALIZED flag
 * equals `normalized` (specials only when parse_special): leftmost, then longest,
 * like Aho-Corasick's leftmost-longest. lstrip never reaches below `floor` (the
 * end of the previous match). Returns 0 when there is none. */
int zt_added_next(const zt_added_set *s, const char *text, size_t len, size_t from, size_t floor, int normalized,
                  int parse_special, zt_added_match *m);
void zt_added_free(zt_added_set *s);

/* --- models --------------------------------------------------------------------------- */

typedef struct zt_normalizer zt_normalizer;
typedef struct zt_decoder zt_decoder;

typedef struct zt_tok_ops {
    const char *name; /* "sentencepiece" | "bpe" */
    /* Appends the ids of text (no added tokens in it) to out; at_start: text is
     * where the whole text begins. */
    zt_status (*encode)(const void *m, const char *text, size_t len, int at_start, zt_ivec *out);
    /* Appends the text of ids (all in the model's vocabulary, none added) to
     * out; NULL when the tokenizer's decoder decodes. */
    zt_status (*decode)(const void *m, const int32_t *ids, size_t n, zt_buf *out);
    int32_t (*vocab_size)(const void *m);
    int32_t (*piece_to_id)(const void *m, const char *piece, size_t len); /* -1 when absent */
    const char *(*id_to_piece)(const void *m, int32_t id);                /* NULL when absent */
    void (*free)(void *m);
} zt_tok_ops;

typedef struct zt_tokenizer zt_tokenizer;

#define ZT_AFFIX_MAX 8 /* special tokens on one side of the text in a post-processor's template */
typedef struct {
    int32_t ids[ZT_AFFIX_MAX];
    int n;
} zt_affix;

struct zt_tokenizer {
    const zt_tok_ops *ops;
    void *model;
    zt_added_set added;
    int32_t bos, eos, pad, unk; /* -1 when absent */
    zt_affix before, after;     /* the special tokens encode(add_special_tokens=True) puts around a text */
    char *path;                 /* the model file */
    zt_normalizer *normalizer;  /* the model's normalizer (normalize.h), or NULL */
    zt_decoder *decoder;        /* tokenizer.json's decoder (decoder.h); NULL: ops->decode */
};

/* Each fills tok->ops/model, the added tokens, and the ids the model knows of. */
zt_status zt_spm_open(struct zt_tokenizer *tok, const char *path);
zt_status zt_bpe_open(struct zt_tokenizer *tok, const char *path);

/* Applies tokenizer_config.json / special_tokens_map.json found in dir. */
zt_status zt_tokenizer_read_config(struct zt_tokenizer *tok, const char *dir);

#ifdef __cplusplus
}
#endif

#endif
