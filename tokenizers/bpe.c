/* BPE: for byte-level BPE the vocabulary keyed by the bytes each piece stands
 * for, else by the piece; merges by rank with a priority queue per word (as
 * Hugging Face's BPE does: lowest rank first, then leftmost). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizers/bpe.h"
#include "tokenizers/unicode.h"

#define NO_PIECE UINT32_MAX

int zt_bytelevel_byte(uint32_t cp)
{
    /* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
     * the other 68 bytes, in order, for U+0100..U+0143 */
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int)cp;
    if (cp < 256 || cp >= 256 + 68) return -1;
    uint32_t k = cp - 256;
    if (k < 33) return (int)k;                   /* 0..32 */
    if (k < 33 + 34) return (int)(127 + k - 33); /* 127..160 */
    return 173;
}

/* Writes the bytes that piece stands for into out (room for len bytes);
 * returns their count, or -1 when a character is outside the byte alphabet. */
static long piece_bytes(const char *piece, size_t len, char *out)
{
    long n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += zt_utf8_next(piece + i, len - i, &cp);
        int b = cp == ZT_UNI_INVALID ? -1 : zt_bytelevel_byte(cp);
        if (b < 0) return -1;
        out[n++] = (char)b;
    }
    return n;
}

/* Files piece i as the id's: by its bytes when byte-level and it is written in
 * the byte alphabet, else by itself. Returns the blob bytes used. */
static size_t put_piece(zt_bpe *b, const char *piece, int32_t id, size_t used)
{
    size_t len = strlen(piece);
    b->piece[id] = (uint32_t)used;
    memcpy(b->blob + used, piece, len + 1);
    used += len + 1;
    long nb = b->byte_level ? piece_bytes(piece, len, b->blob + used) : -1;
    if (nb < 0) { /* (byte-level: decodes to itself, reachable only as an added token) */
        zt_strmap_put(&b->by_piece, b->blob + b->piece[id], len, id);
        return used;
    }
    zt_strmap_put(&b->by_bytes, b->blob + used, (size_t)nb, id);
    return used + (size_t)nb;
}

zt_status zt_bpe_set_vocab(zt_bpe *b, const char *const *pieces, const int32_t *ids, int32_t n)
{
    size_t total = 0;
    int32_t max_id = -1;
    for (int32_t i = 0; i < n; i++) {
        total += strlen(pieces[i]);
        if (ids[i] > max_id) max_id = ids[i];
    }
    b->n_vocab = max_id + 1;
    b->blob = malloc(2 * (total + (size_t)n) + 1);
    b->piece = malloc((size_t)b->n_vocab * sizeof *b->piece + 1);
    zt_status st = ZT_OK;
    if (!b->blob || !b->piece) return zt_fail(ZT_ENOMEM, "out of memory for the vocabulary");
    if ((st = zt_strmap_init(&b->by_bytes, (size_t)n)) || (st = zt_strmap_init(&b->by_piece, (size_t)n))) return st;
    for (int32_t id = 0; id < b->n_vocab; id++) b->piece[id] = NO_PIECE;
    size_t used = 0;
    for (int32_t i = 0; i < n; i++) {
        if (b->piece[ids[i]] != NO_PIECE)
            return zt_fail(ZT_EUSER, "model.vocab: id %d is used twice ('%s' and '%s')", ids[i],
                           b->blob + b->piece[ids[i]], pieces[i]);
        used = put_piece(b, pieces[i], ids[i], used);
    }
    for (int c = 0; c < 256; c++) {
        char byte = (char)c, name[8];
        b->byte_id[c] = zt_strmap_get(&b->by_bytes, &byte, 1);
        snprintf(name, sizeof name, "<0x%02X>", (unsigned)c);
        b->byte_piece[c] = zt_strmap_get(&b->by_piece, name, strlen(name));
    }
    return ZT_OK;
}

int32_t zt_bpe_piece_to_id(const zt_bpe *b, const char *piece, size_t len)
{
    if (!b->byte_level) return zt_strmap_get(&b->by_piece, piece, len);
    char small[256], *buf = len <= sizeof small ? small : malloc(len);
    if (!buf) return -1;
    long nb = piece_bytes(piece, len, buf);
    int32_t id = nb < 0 ? zt_strmap_get(&b->by_piece, piece, len) : zt_strmap_get(&b->by_bytes, buf, (size_t)nb);
    if (buf != small) free(buf);
    return id;
}

zt_status zt_bpe_add_merge(zt_bpe *b, const char *left, size_t nleft, const char *right, size_t nright, int32_t rank)
{
    int32_t l = zt_bpe_piece_to_id(b, left, nleft), r = zt_bpe_piece_to_id(b, right, nright);
    if (l < 0 || r < 0)
        return zt_fail(ZT_EUSER, "model.merges[%d]: '%.*s' is not in the vocabulary", rank,
                       (int)(l < 0 ? nleft : nright), l < 0 ? left : right);
    size_t skip = b->prefix ? strlen(b->prefix) : 0; /* the merged piece drops right's prefix */
    if (skip > nright || (skip && memcmp(right, b->prefix, skip) != 0))
        return zt_fail(ZT_EUSER, "model.merges[%d]: '%.*s' does not start with continuing_subword_prefix '%s'", rank,
                       (int)nright, right, b->prefix);
    right += skip;
    nright -= skip;
    char small[256], *both = nleft + nright <= sizeof small ? small : malloc(nleft + nright);
    if (!both) return zt_fail(ZT_ENOMEM, "out of memory for a merge");
    memcpy(both, left, nleft);
    memcpy(both + nleft, right, nright);
    int32_t id = zt_bpe_piece_to_id(b, both, nleft + nright);
    zt_status st = ZT_OK;
    if (id < 0)
        st = zt_fail(ZT_EUSER, "model.merges[%d]: the merged piece '%.*s' is not in the vocabulary", rank,
                     (int)(nleft + nright), both);
    else zt_pairmap_put(&b->merges, l, r, rank, id);
    if (both != small) free(both);
    return st;
}

void zt_bpe_free(zt_bpe *b)
{
    free(b->path);
    free(b->blob);
    free(b->piece);
    free(b->score);
    free(b->prefix);
    free(b->suffix);
    zt_strmap_free(&b->by_bytes);
    zt_strmap_free(&b->by_piece);
    zt_pairmap_free(&b->merges);
    zt_bpe_cache_free(b->cache);
    zt_pretok_free(b->pretok);
    free(b);
}

/* --- encoding ------------------------------------------------------------------------- */

typedef struct sym {
    int32_t id; /* -1 once merged into its left neighbour */
    int32_t prev, next;
} sym;

typedef struct cand {
    int32_t rank, left, right; /* symbol indices */
    int32_t lid, rid, id;      /* the pair's ids when queued, the merged id */
} cand;

/* Per-call work space, grown as words need. */
typedef struct scratch {
    sym *sym;
    cand *heap;
    size_t cap; /* symbols; heap holds 3 * cap */
    zt_buf tmp; /* a character with its affixes */
} scratch;

static zt_status scratch_reserve(scratch *s, size_t n)
{
    if (n <= s->cap) return ZT_OK;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n) cap *= 2;
    sym *y = realloc(s->sym, cap * sizeof *y);
    if (y) s->sym = y;
    cand *h = y ? realloc(s->heap, 3 * cap * sizeof *h) : NULL;
    if (!h) return zt_fail(ZT_ENOMEM, "out of memory for a word of %zu bytes", n);
    s->heap = h;
    s->cap = cap;
    return ZT_OK;
}

static int cand_less(const cand *a, const cand *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

static void heap_push(cand *h, size_t *n, cand c)
{
    size_t i = (*n)++;
    while (i > 0 && cand_less(&c, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n)
{
    cand top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= *n) break;
        if (k + 1 < *n && cand_less(&h[k + 1], &h[k])) k++;
        if (!cand_less(&h[k], &last)) break;
        h[i] = h[k];
        i = k;
    }
    h[i] = last;
    return top;
}

static void queue_pair(const zt_bpe *b, const sym *y, int32_t left, int32_t right, cand *h, size_t *nh)
{
    const zt_pairmap_slot *m = zt_pairmap_get(&b->merges, y[left].id, y[right].id);
    if (m) heap_push(h, nh, (cand){m->rank, left, right, y[left].id, y[right].id, m->id});
}

static void sym_push(sym *y, int32_t *ny, int32_t id)
{
    y[*ny] = (sym){id, *ny - 1, -1};
    if (*ny > 0) y[*ny - 1].next = *ny;
    ++*ny;
}

/* Byte-level: one symbol per byte. A byte missing from the vocabulary is unk,
 * or dropped when there is no unk, as Hugging Face does. */
static int32_t byte_symbols(const zt_bpe *b, const char *w, size_t n, sym *y)
{
    int32_t ny = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = b->byte_id[(unsigned char)w[i]];
        if (id < 0) {
            if (b->unk < 0 || (b->fuse_unk && ny > 0 && y[ny - 1].id == b->unk)) continue;
            id = b->unk;
        }
        sym_push(y, &ny, id);
    }
    return ny;
}

/* Spells the symbol of character c[0, n) of a word: with the prefix when not
 * first and the suffix when last, in tmp when either applies. */
static zt_status affixed(const zt_bpe *b, const char *c, size_t n, int first, int last, zt_buf *tmp, const char **s,
                         size_t *sn)
{
    *s = c;
    *sn = n;
    if ((first || !b->prefix) && (!last || !b->suffix)) return ZT_OK;
    zt_status st;
    tmp->n = 0;
    if ((!first && (st = zt_buf_append(tmp, b->prefix, strlen(b->prefix)))) || (st = zt_buf_append(tmp, c, n)) ||
        (last && b->suffix && (st = zt_buf_append(tmp, b->suffix, strlen(b->suffix)))))
        return st;
    *s = tmp->p;
    *sn = tmp->n;
    return ZT_OK;
}

/* Over characters: one symbol per character (with the affixes); one that is
 * not in the vocabulary becomes its <0xXX> pieces with byte_fallback when all
 * exist, else unk (runs of them one unk with fuse_unk), else is dropped. */
static zt_status char_symbols(const zt_bpe *b, const char *w, size_t n, sym *y, int32_t *ny, zt_buf *tmp)
{
    int pending_unk = 0;
    *ny = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = zt_utf8_next(w + i, n - i, &cp);
        const char *s;
        size_t sn;
        zt_status st = affixed(b, w + i, k, i == 0, i + k == n, tmp, &s, &sn);
        if (st) return st;
        int32_t id = zt_strmap_get(&b->by_piece, s, sn);
        i += k;
        if (id >= 0) {
            if (pending_unk) sym_push(y, ny, b->unk);
            pending_unk = 0;
            sym_push(y, ny, id);
            continue;
        }
        size_t have = 0;
        while (b->byte_fallback && have < sn && b->byte_piece[(unsigned char)s[have]] >= 0) have++;
        if (b->byte_fallback && have == sn) {
            for (size_t j = 0; j < sn; j++) sym_push(y, ny, b->byte_piece[(unsigned char)s[j]]);
            continue;
        }
        if (b->unk < 0) continue;
        if (pending_unk && !b->fuse_unk) sym_push(y, ny, b->unk);
        pending_unk = 1;
    }
    if (pending_unk) sym_push(y, ny, b->unk);
    return ZT_OK;
}

/* Appends the ids of one pre-tokenized word w[0, n). */
static zt_status encode_word(const zt_bpe *b, const char *w, size_t n, scratch *s, zt_ivec *out)
{
    if (b->unigram) return zt_unigram_encode_word(b, w, n, out);
    const zt_strmap *whole = b->byte_level ? &b->by_bytes : &b->by_piece;
    if (b->word_level) {
        int32_t id = zt_strmap_get(whole, w, n);
        if (id < 0 && b->unk < 0)
            return zt_fail(ZT_EUSER, "'%s': '%.*s' is not in the vocabulary and the WordLevel model has no unk_token",
                           b->path, (int)(n > 60 ? 60 : n), w);
        return zt_ivec_push(out, id >= 0 ? id : b->unk);
    }
    if (b->ignore_merges || (n == 1 && !b->suffix)) {
        int32_t id = zt_strmap_get(whole, w, n);
        if (id >= 0) return zt_ivec_push(out, id);
    }
    int cacheable = n <= ZT_BPE_CACHE_WORD;
    zt_status st = ZT_OK;
    if (cacheable) {
        int32_t ids[ZT_BPE_CACHE_IDS];
        int k = zt_bpe_cache_get(b->cache, w, n, ids);
        for (int i = 0; i < k && !st; i++) st = zt_ivec_push(out, ids[i]);
        if (k >= 0) return st;
    }
    /* a character is at most its bytes in symbols, and its prefix and suffix with byte_fallback */
    size_t affixes = (b->prefix ? strlen(b->prefix) : 0) + (b->suffix ? strlen(b->suffix) : 0);
    if ((st = scratch_reserve(s, n * (1 + affixes)))) return st;
    sym *y = s->sym;
    int32_t ny = 0;
    if (b->byte_level) ny = byte_symbols(b, w, n, y);
    else if ((st = char_symbols(b, w, n, y, &ny, &s->tmp))) return st;
    size_t nh = 0;
    for (int32_t i = 0; i + 1 < ny; i++) queue_pair(b, y, i, i + 1, s->heap, &nh);
    while (nh) {
        cand c = heap_pop(s->heap, &nh);
        sym *l = &y[c.left], *r = &y[c.right];
        if (l->id != c.lid || l->next != c.right || r->id != c.rid) continue; /* stale */
        l->id = c.id;
        l->next = r->next;
        if (r->next >= 0) y[r->next].prev = c.left;
        r->id = -1;
        if (l->prev >= 0) queue_pair(b, y, l->prev, c.left, s->heap, &nh);
        if (l->next >= 0) queue_pair(b, y, c.left, l->next, s->heap, &nh);
    }
    size_t first = out->n;
    for (int32_t i = ny ? 0 : -1; i >= 0 && !st; i = y[i].next) st = zt_ivec_push(out, y[i].id);
    /* an empty result is not cached: out->v may still be NULL, and it costs nothing to recompute */
    if (!st && cacheable && out->n > first && out->n - first <= ZT_BPE_CACHE_IDS)
        zt_bpe_cache_put(b->cache, w, n, out->v + first, out->n - first);
    return st;
}

static zt_status bpe_encode(const void *m, const char *text, size_t len, int at_start, zt_ivec *out)
{
    const zt_bpe *b = m;
    scratch s = {0};
    zt_pieces words = {0};
    zt_status st = b->pretok ? zt_pretok_split_from(b->pretok, text, len, at_start, &words)
                   : len     ? zt_pieces_push(&words, text, len)
                             : ZT_OK;
    for (size_t i = 0; i < words.n && !st; i++)
        st = encode_word(b, zt_piece_text(&words, i), zt_piece_len(&words, i), &s, out);
    zt_pieces_free(&words);
    free(s.sym);
    free(s.heap);
    free(s.tmp.p);
    return st;
}

static int32_t bpe_vocab_size(const void *m) { return ((const zt_bpe *)m)->n_vocab; }

static int32_t bpe_piece_to_id(const void *m, const char *piece, size_t len)
{
    return zt_bpe_piece_to_id(m, piece, len);
}

static const char *bpe_id_to_piece(const void *m, int32_t id)
{
    const zt_bpe *b = m;
    return b->piece[id] == NO_PIECE ? NULL : b->blob + b->piece[id];
}

static void bpe_free(void *m) { zt_bpe_free(m); }

const zt_tok_ops zt_bpe_ops = {
    .name = "bpe",
    .encode = bpe_encode,
    .vocab_size = bpe_vocab_size,
    .piece_to_id = bpe_piece_to_id,
    .id_to_piece = bpe_id_to_piece,
    .free = bpe_free,
};
