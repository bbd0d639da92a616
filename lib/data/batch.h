/* data/batch: packing examples into rows of T tokens and serving them as
 * micro-batches in a deterministic, resumable order. Knows nothing of data
 * formats: it only sees a zt_dataset (ids + unshifted labels per example).
 *
 *     zt_loader ld;
 *     zt_batch b;
 *     if ((st = zt_loader_init(&ld, &ds, T, B, packing, shuffle, seed, rank, world))) return st;
 *     if ((st = zt_batch_alloc(&b, B, T))) ...;
 *     for (step...) { if ((st = zt_loader_next(&ld, &b))) ...; train(b.input, b.target, b.pos, b.n_targets); }
 *     zt_loader_state s = zt_loader_get_state(&ld);   // save with the checkpoint,
 *     zt_loader_set_state(&ld, s);                     // restore: the same batches follow
 *     zt_batch_free(&b); zt_loader_free(&ld);
 *
 * Layout. A row holds pieces of examples ("documents" for attention): pos
 * restarts at 0 at each one, and query t may attend key u iff
 * t - pos[t] <= u <= t. The target of a position is the label of the next token
 * of the same example (labels shifted as Hugging Face does); where that token
 * does not exist (an example's end) and on padding it is -100, so a document's
 * first token is never predicted from the previous document. Across a split or
 * a truncation point the next token still exists, so that position keeps its
 * target. Padding (input 0, target -100) ends a row as a pseudo-document of its own.
 *
 * packing = 1: examples, in epoch order, fill rows greedily; one that does not
 * fit in the rest of the row starts the next row, and one longer than T starts
 * a fresh row and is split into chunks of T (the last chunk leaves room for the
 * examples after it); nothing is dropped. packing = 0: one example per row,
 * truncated to T tokens.
 *
 * Order. Epoch e orders the examples by a permutation seeded by (seed, e)
 * (file order when shuffle = 0), then packs them. The epoch's rows form a
 * global sequence served world * B rows at a time; rank r of world gets rows
 * r, r + world, r + 2 * world, ... of each such group, so the ranks together see
 * exactly what one rank with micro-batch world * B sees. The last group of an
 * epoch is completed with all-padding rows (no targets); then the next epoch
 * begins, forever.
 */
#ifndef ZT_DATA_BATCH_H
#define ZT_DATA_BATCH_H

#include <stdint.h>

#include "dataset.h"

typedef struct zt_batch {
    int B, T;
    int32_t *input;    /* [B*T] token ids */
    int32_t *target;   /* [B*T] label that position t predicts (already shifted); -100: none */
    int32_t *pos;      /* [B*T] position within its document */
    int32_t *lens;     /* [B] tokens of each row before its padding */
    int64_t n_targets; /* targets != -100 in the batch */
} zt_batch;

zt_status zt_batch_alloc(zt_batch *b, int B, int T);
void zt_batch_free(zt_batch *b);

/* Where the loader stands: the next row of the epoch's global row sequence. */
typedef struct zt_loader_state {
    int64_t epoch;
    int64_t row;
} zt_loader_state;

typedef struct zt_loader_stats {
    int64_t examples;
    int64_t tokens;           /* in the dataset */
    int64_t rows;             /* rows of the current epoch, before completing the last batch */
    int64_t batches;          /* micro-batches per rank in the current epoch */
    double padding_fraction;  /* padding tokens / (rows * T) in the current epoch */
    int64_t split;            /* packing: examples longer than T, split into chunks */
    int64_t truncated;        /* no packing: examples longer than T, cut to T */
    int64_t truncated_tokens; /* tokens cut off by truncation */
} zt_loader_stats;

struct zt_segment;

typedef struct zt_loader {
    const zt_dataset *ds; /* not owned: must outlive the loader */
    int T, B, packing, shuffle, rank, world;
    uint64_t seed;
    zt_loader_state state;   /* state.epoch's rows are planned below */
    int64_t *perm;           /* [n_examples] the epoch's example order */
    struct zt_segment *segs; /* the epoch's pieces of examples, in row order */
    int64_t *row_seg;        /* row r holds segs[row_seg[r] .. row_seg[r+1]) */
    int64_t n_segs, n_rows, pad_tokens;
    int width; /* real tokens of the widest row of any epoch (zt_loader_next) */
} zt_loader;

/* Plans epoch 0. T = max_length, B = micro_batch_size; 0 <= rank < world.
 * ZT_EUSER for sizes out of range or an empty dataset. */
zt_status zt_loader_init(zt_loader *l, const zt_dataset *ds, int T, int B, int packing, int shuffle, uint64_t seed,
                         int rank, int world);
void zt_loader_free(zt_loader *l);

/* Fills this rank's next micro-batch (out from zt_batch_alloc(out, B, W)): rows of W columns,
 * l->width <= W <= T, the padding after a row's tokens cut to fit (computing fewer columns of
 * padding changes nothing else: no token attends to the padding after it).
 * Cannot fail while the data is in memory; the status is for loaders that stream. */
zt_status zt_loader_next(zt_loader *l, zt_batch *out);

/* Rows (before completing the last batch) in the current epoch. They depend on
 * the epoch only when packing shuffled examples; zt_loader_epoch_rows gives any
 * epoch's count, for turning epochs into steps exactly. */
int64_t zt_loader_rows_per_epoch(const zt_loader *l);
zt_status zt_loader_epoch_rows(const zt_loader *l, int64_t epoch, int64_t *rows);

zt_loader_state zt_loader_get_state(const zt_loader *l);
/* ZT_EUSER when the state does not fit this data (row past the epoch's rows). */
zt_status zt_loader_set_state(zt_loader *l, zt_loader_state s);

zt_loader_stats zt_loader_get_stats(const zt_loader *l);

#endif
