/* plan/options: what the recipe sets on the parts a run builds, in one place for the trainer,
 * the PPO critic and the memory estimate (memory.h), so that the estimate counts what runs: ZeRO,
 * the tiling and LoRA's adapters.
 *
 *     zt_zero_options o = zt_plan_zero_options(&r);
 *     zt_plan_tile_model(&r, &model);              // before the activations are allocated
 *     zt_zero_init(&z, comm, &o, &model);
 */
#ifndef ZT_PLAN_OPTIONS_H
#define ZT_PLAN_OPTIONS_H

#include "lib/model/llama.h"
#include "lib/model/lora.h"
#include "lib/offload/actstore.h"
#include "lib/recipe/recipe.h"
#include "lib/zero/zero.h"

/* ZeRO's options: [zero], offload.param and offload.optimizer, the checkpointing that stage 3's
 * prefetch depends on, and the swap file's I/O settings. */
zt_zero_options zt_plan_zero_options(const zt_recipe *r);
/* With LoRA, the options of the adapters' partition (the frozen base takes zt_plan_zero_options):
 * replicated and never offloaded, their gradients all-reduced (stages 0-1) or reduce-scattered
 * into the owners' optimizer shards (stages 2 and 3), no ZeRO++ (nothing of theirs is gathered);
 * their AdamW state where offload.optimizer says. */
zt_zero_options zt_plan_adapter_zero_options(const zt_recipe *r);
/* The activation store's options: offload.activations, a micro-batch's tokens, the I/O settings. */
zt_actstore_options zt_plan_actstore_options(const zt_recipe *r);
/* The memory-centric tiling (zero.embedding_tiles, zero.mlp_tiles, zero.head_tiles) on model m;
 * the model leaves untiled what cannot be (a tied embedding or head, a score head). */
void zt_plan_tile_model(const zt_recipe *r, zt_llama *m);
/* The adapters LoRA trains: lora.r, alpha, ... (score: a reward model's head trained too), or
 * lora.adapter's adapter_config.json. lora.trainable_token_indices' tokens given as strings are
 * looked up in tok (its chat template's added tokens included); without a tokenizer (zt validate,
 * which counts them) they are -1. ZT_EUSER for a string that is not one of tok's tokens. */
struct zt_tokenizer;
zt_status zt_plan_lora_config(const zt_recipe *r, int score, const struct zt_tokenizer *tok, zt_lora_config *c);
/* zt rlhf's frozen reference (lib/train/rlhf): the directory of the model a run opens for it
 * (rlhf.reference, else the starting model), or NULL where it opens none: the algorithm compares
 * with no reference (GRPO with rlhf.beta = 0, the reward model), or the policy serves as its own
 * (with LoRA the base, its adapters off; DPO's without rlhf.reference: the starting weights,
 * before the first step). */
const char *zt_plan_reference_dir(const zt_recipe *r);
/* PPO's critic starts from rlhf.reward_model, else from the starting model with a new head. */
const char *zt_plan_critic_dir(const zt_recipe *r);
/* A LoRA critic's adapters: of the actor's kind (c), its value head trained whole and, where the
 * actor trains the embedding (a grown vocabulary), the embedding. */
zt_lora_config zt_plan_critic_lora(zt_lora_config c);
/* Whether GRPO's and PPO's generation on world ranks streams the model unit by unit through
 * ZeRO stage 3's hooks, as training does (offload.param), rather than gathering it whole once
 * per step (rollout.h). */
int zt_plan_rollout_streams(const zt_recipe *r, int world);
/* The prompt tokens their decoder takes at a time (its KV cache's chunk, at least the slots),
 * and the sequences its cache holds: GRPO's completions of a prompt, decoded side by side, PPO's
 * one; streaming, every completion of the step (a rank's rows), decoded together, and on several
 * ranks a spare. */
enum { ZT_PLAN_ROLLOUT_CHUNK = 256 };
int zt_plan_rollout_slots(const zt_recipe *r, int world);
int zt_plan_rollout_chunk(const zt_recipe *r, int world);

#endif
