/* ckpt/state: resumable training checkpoints as per-rank shards of the flat fp32
 * arrays (master weights, Adam m, Adam v), the trainer's state, and the rules of
 * completeness (DONE), the newest checkpoint and rotation.
 *
 * A checkpoint directory runs/NAME/checkpoints/step-000100/ holds:
 *   rank-00000-of-00004.bin ...  rank r's segments of the three arrays
 *   trainer_state.json           written by rank 0 (zt_trainer_state)
 *   config.json, tokenizer files copied by rank 0 (zt_state_copy_model_files), so that
 *                                `zt export` needs nothing else
 *   DONE                         written last, after every rank's shard is durable
 * A shard holds a list of segments [offset, offset+count) of the flat arrays. ZeRO stages
 * 0-2 write one, the slice zt_state_slice computes; stage 3 shards each model unit
 * (embedding, each layer, head) separately and writes one segment per unit. Together the
 * shards hold every element exactly once. Any range can be read back from any layout, so
 * a run may resume with another world size or stage (resharding is index arithmetic).
 *
 * A shard file is
 *   a 64-byte header: magic "ZTSHARD3", then little-endian u64 numel, world, rank, nseg,
 *     arrays (= 3), total (elements over all segments), and the CRC-32C of the 56 bytes
 *     before it;
 *   the segment table: nseg pairs of u64 (offset, count), ascending, disjoint and not
 *     empty, then a u64 CRC-32C of those 16*nseg bytes;
 *   the three fp32 arrays params, m, v of total elements each, each packed in segment order;
 *   the block CRCs: each segment's elements of an array are cut into blocks of 65536 from
 *     the segment's start (the last one shorter); for params, then m, then v, a u32 CRC-32C
 *     of each block, segment by segment: nblocks = sum of ceil(count / 65536) per array.
 * Its size is exactly 64 + 16*nseg + 8 + 3*total*4 + 3*nblocks*4 bytes. A read of any range
 * reads and checks every block it touches whole, so no element is returned unchecked. A
 * "ZTSHARD2" shard (an older zt's, without block CRCs) is refused with a message saying so.
 *
 *     char dir[4096];
 *     if (rank == 0) st = zt_state_dir(run, step, dir, sizeof dir);     // then a barrier
 *     zt_state_segment seg;                                             // stages 0-2: one slice
 *     zt_state_slice(numel, world, rank, &seg.offset, &seg.count);
 *     st = zt_state_write_shard(dir, rank, world, numel, &seg, 1, params + seg.offset, my_m, my_v);
 *     if (rank == 0) st = zt_state_write_json(dir, &s);                 // and the model files
 *     barrier;  if (rank == 0) { zt_state_mark_done(dir); zt_state_rotate(run, keep); }
 *
 *     int found;  zt_state_latest(run, dir, sizeof dir, &found);        // resume
 *     zt_state_read_json(dir, &s);
 *     zt_state_read_range(dir, numel, my_off, my_count, params + my_off, m + my_off, v + my_off);
 */
#ifndef ZT_CKPT_STATE_H
#define ZT_CKPT_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

typedef struct zt_trainer_state {
    long step;          /* completed optimizer steps */
    int64_t epoch, row; /* data loader cursor (lib/data/batch.h zt_loader_state) */
    uint64_t rng[4];    /* RNG state, if any (zeros otherwise) */
    uint64_t data_hash; /* the recipe's data-defining keys (zt_recipe_data_hash + global batch) */
    int world, zero_stage;
    size_t numel;
    double tokens_seen, elapsed_s;
    /* a LoRA run: the frozen base's weights hash (its flat arrays hold the adapters); 0 otherwise
       ("base_hash", written only when set) */
    uint64_t base_hash;
} zt_trainer_state;

/* Rank's slice of numel elements over world ranks (count 0 for ranks past the end). */
void zt_state_slice(size_t numel, int world, int rank, size_t *offset, size_t *count);

/* One range of the flat arrays that a shard holds. */
typedef struct zt_state_segment {
    size_t offset, count;
} zt_state_segment;

/* Writes rank's shard: the elements of segs (ascending and disjoint, inside [0, numel); empty
 * ones are left out) of the three arrays params, m, v, each of which holds them packed, one
 * segment after another. Atomic: a temporary name, fsynced, renamed, the directory fsynced. */
zt_status zt_state_write_shard(const char *ckpt_dir, int rank, int world, size_t numel, const zt_state_segment *segs,
                               int nseg, const float *params, const float *m, const float *v);

/* The same, the packed arrays coming from source in pieces (offloaded state, never all in
 * memory): array 0 params, 1 m, 2 v; n elements from packed position first into dst. */
typedef zt_status (*zt_state_source)(void *ctx, int array, size_t first, size_t n, float *dst);
zt_status zt_state_write_shard_from(const char *ckpt_dir, int rank, int world, size_t numel,
                                    const zt_state_segment *segs, int nseg, zt_state_source source, void *ctx);

/* Reads elements [offset, offset+count) of the arrays from whatever shards hold them,
 * whatever world size and segments wrote them: every shard's header and segment table are
 * read, and the parts of its segments inside the range. Any of params, m, v may be NULL to
 * skip that array (all three NULL over [0, numel): checks every shard's header, table and
 * size and that the shards cover every element once, reads no data). A missing, short or
 * corrupt shard (a block failing its CRC: naming the segment, the array and the elements),
 * or one of another numel, is ZT_EUSER naming the file; an element of the
 * range that no shard holds, or two do, is ZT_EUSER naming the checkpoint and the elements. */
zt_status zt_state_read_range(const char *ckpt_dir, size_t numel, size_t offset, size_t count, float *params, float *m,
                              float *v);

/* trainer_state.json, written atomically; reading checks every key's presence and type,
 * and the keys against the checkpoint: 'step' against a directory named step-N, 'world',
 * 'numel' and 'zero_stage' against the shards' names, headers and segment counts
 * (zt_state_check_shards). A contradiction is ZT_EUSER naming the file and the key. */
zt_status zt_state_write_json(const char *ckpt_dir, const zt_trainer_state *s);
zt_status zt_state_read_json(const char *ckpt_dir, zt_trainer_state *s);

/* Checks that ckpt_dir holds the shards of world ranks, each a valid header of a numel-element
 * model, and (stage < 3) one segment at most each; errors name json and the key. */
zt_status zt_state_check_shards(const char *ckpt_dir, const char *json, size_t numel, int world, int stage);

/* Copies into ckpt_dir those of config.json, generation_config.json and the tokenizer
 * files (tokenizer.json, tokenizer.model, tokenizer_config.json, special_tokens_map.json)
 * that model_dir has. */
zt_status zt_state_copy_model_files(const char *ckpt_dir, const char *model_dir);

/* Writes the DONE marker (fsynced, directory fsynced): the checkpoint is complete. */
zt_status zt_state_mark_done(const char *ckpt_dir);
int zt_state_is_done(const char *ckpt_dir);

/* The newest complete checkpoint under run_dir/checkpoints into out; *found = 0 when
 * there is none (also when checkpoints/ does not exist). */
zt_status zt_state_latest(const char *run_dir, char *out, size_t n, int *found);

/* Deletes the oldest complete checkpoints beyond the newest keep (keep < 1: none), and
 * every incomplete one older than the newest complete (a save that was interrupted).
 * A checkpoint loses its DONE marker before its files, so a crash leaves it incomplete. */
zt_status zt_state_rotate(const char *run_dir, int keep);

/* run_dir/checkpoints/step-%06ld into out, created empty: what an earlier save of the
 * same step left there (an interrupted one, or a complete one) is removed first, DONE
 * before the rest. Call it on rank 0 only, then barrier before the ranks write. */
zt_status zt_state_dir(const char *run_dir, long step, char *out, size_t n);

#endif
