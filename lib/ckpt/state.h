/* ckpt/state: resumable training checkpoints as per-rank shards of the flat fp32
 * arrays (master weights, Adam m, Adam v), the trainer's state, and the rules of
 * completeness (DONE), the newest checkpoint and rotation.
 *
 * A checkpoint directory runs/NAME/checkpoints/step-000100/ holds:
 *   rank-00000-of-00004.bin ...  rank r's slice [offset, offset+count) of the three arrays
 *   trainer_state.json           written by rank 0 (zt_trainer_state)
 *   config.json, tokenizer files copied by rank 0 (zt_state_copy_model_files), so that
 *                                `zt export` needs nothing else
 *   DONE                         written last, after every rank's shard is durable
 * The slices are ZeRO's: p = ceil(numel / world), rank r holds [r*p, min((r+1)*p, numel)).
 * Any range can be read back from any layout, so a run may resume with another world
 * size (resharding is index arithmetic).
 *
 * A shard file is a 64-byte header (magic "ZTSHARD1", then little-endian u64 numel, world,
 * rank, offset, count, arrays = 3, and the CRC-32C of the 56 bytes before it) followed by
 * the three fp32 arrays of count elements each, in that order.
 *
 *     char dir[4096];
 *     if (rank == 0) st = zt_state_dir(run, step, dir, sizeof dir);     // then a barrier
 *     st = zt_state_write_shard(dir, rank, world, numel, params + off, m + off, v + off);
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
} zt_trainer_state;

/* Rank's slice of numel elements over world ranks (count 0 for ranks past the end). */
void zt_state_slice(size_t numel, int world, int rank, size_t *offset, size_t *count);

/* Writes rank's shard: params, m and v point at that rank's slice (zt_state_slice).
 * Atomic: a temporary name, fsynced, renamed, the directory fsynced. */
zt_status zt_state_write_shard(const char *ckpt_dir, int rank, int world, size_t numel, const float *params,
                               const float *m, const float *v);

/* Reads elements [offset, offset+count) of the arrays from whatever shards hold them,
 * whatever world size wrote them. Any of params, m, v may be NULL to skip that array
 * (all three NULL over [0, numel): checks every shard's header and size, reads nothing).
 * A missing, short or corrupt shard, or one of another numel, is ZT_EUSER naming the file. */
zt_status zt_state_read_range(const char *ckpt_dir, size_t numel, size_t offset, size_t count, float *params,
                              float *m, float *v);

/* trainer_state.json, written atomically; reading checks every key's presence and type. */
zt_status zt_state_write_json(const char *ckpt_dir, const zt_trainer_state *s);
zt_status zt_state_read_json(const char *ckpt_dir, zt_trainer_state *s);

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
