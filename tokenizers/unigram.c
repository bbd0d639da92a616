/* The Unigram model of a tokenizer.json (SentencePiece's unigram, as Hugging
 * Face runs it): the best segmentation of each pre-tokenized word by Viterbi
 * over the pieces' log-probabilities. A character no piece starts with is
 * unknown, at the lowest score less 10; runs of unknowns become one piece,
 * which is then looked up, spelled in <0xXX> pieces with byte_fallback, or unk.
 * Ties keep the path found first: shorter pieces are tried first. */
#include <stdlib.h>

#include "tokenizers/bpe.h"
#include "tokenizers/unicode.h"

#define UNK_PENALTY 10.0

typedef struct node {
    double score; /* of the best path ending here */
    int32_t id;   /* its last piece */
    size_t start; /* where that piece starts; SIZE_MAX: not reached */
} node;

/* Best paths to every position of w[0, n): nodes[0, n]. */
static zt_status viterbi(const zt_bpe *b, const char *w, size_t n, node *nodes)
{
    double unk_score = b->min_score - UNK_PENALTY;
    for (size_t i = 0; i <= n; i++) nodes[i] = (node){0.0, -1, SIZE_MAX};
    for (size_t s = 0; s < n;) {
        uint32_t cp;
        size_t mblen = zt_utf8_next(w + s, n - s, &cp), longest = n - s < b->max_piece ? n - s : b->max_piece;
        int single = 0;
        for (size_t len = 1; len <= longest; len++) {
            int32_t id = zt_strmap_get(&b->by_piece, w + s, len);
            if (id < 0) continue;
            double score = nodes[s].score + b->score[id];
            node *t = &nodes[s + len];
            if (t->start == SIZE_MAX || score > t->score) *t = (node){score, id, s};
            single |= len == mblen;
        }
        if (!single) {
            if (b->unk < 0)
                return zt_fail(ZT_EUSER, "'%s': '%.*s' has no piece and the Unigram model has no unk_id", b->path,
                               (int)mblen, w + s);
            double score = nodes[s].score + unk_score;
            node *t = &nodes[s + mblen];
            if (t->start == SIZE_MAX || score > t->score) *t = (node){score, b->unk, s};
        }
        s += mblen;
    }
    return ZT_OK;
}

/* The id of piece w[0, n) of the best path; byte pieces or unk for one not in the vocabulary. */
static zt_status emit(const zt_bpe *b, const char *w, size_t n, zt_ivec *out)
{
    int32_t id = zt_strmap_get(&b->by_piece, w, n);
    if (id >= 0) return zt_ivec_push(out, id);
    size_t have = 0;
    while (b->byte_fallback && have < n && b->byte_piece[(unsigned char)w[have]] >= 0) have++;
    zt_status st = ZT_OK;
    if (b->byte_fallback && have == n) {
        for (size_t i = 0; i < n && !st; i++) st = zt_ivec_push(out, b->byte_piece[(unsigned char)w[i]]);
        return st;
    }
    if (b->unk < 0) return zt_fail(ZT_EUSER, "'%s': the Unigram model has no unk_id", b->path);
    return zt_ivec_push(out, b->unk);
}

zt_status zt_unigram_encode_word(const zt_bpe *b, const char *w, size_t n, zt_ivec *out)
{
    node *nodes = malloc((n + 1) * sizeof *nodes);
    size_t *cut = malloc((n + 1) * sizeof *cut); /* the path's piece boundaries, from the end */
    if (!nodes || !cut) {
        free(nodes);
        free(cut);
        return zt_fail(ZT_ENOMEM, "out of memory for a word of %zu bytes", n);
    }
    zt_status st = viterbi(b, w, n, nodes);
    size_t ncut = 0;
    /* back from the end; a run of unknowns is one piece */
    for (size_t end = n; !st && end > 0;) {
        size_t start = nodes[end].start;
        int unk = nodes[end].id == b->unk;
        while (unk && start > 0 && nodes[start].id == b->unk) start = nodes[start].start;
        cut[ncut++] = end;
        end = start;
    }
    for (size_t k = ncut, from = 0; !st && k-- > 0; from = cut[k]) st = emit(b, w + from, cut[k] - from, out);
    free(nodes);
    free(cut);
    return st;
}
