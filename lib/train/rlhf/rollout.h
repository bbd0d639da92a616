/* train/rlhf/rollout: what GRPO and PPO share: the prompts (data.format = prompt, with
 * their JSON lines for the reward program), generation on the training weights, rewards
 * (rlhf.reward_command or rlhf.reward_model), the frozen reference, and the greedy
 * evaluation on held-out prompts.
 *
 * The generations of a step fill A × B rows (gradient_accumulation_steps micro-batches of
 * micro_batch_size rows), prompt + completion each, only the completion trained. Generation
 * runs on the whole model: at ZeRO stage 3 with the weights in memory (several ranks) it is
 * gathered once per step and reused for every token of every completion, so generation needs no
 * collective at all and ranks whose completions end early never hold the others up. A prompt's
 * G completions are decoded side by side, each in a slot of the KV cache forked from the
 * prompt's (one product per layer for all of them, a completion leaving as it stops).
 *
 * A streamed model (stage 3 with offload.param = "cpu" or "nvme": a base larger than memory) is
 * never gathered whole: the decoder acquires it unit by unit through ZeRO's hooks, as a training
 * forward pass does, so generation holds a few units (those prefetched ahead) at a time. To
 * stream it once per token position rather than once per prompt and position, every prompt of
 * the step is prefilled into its slots first and then all of their completions are decoded
 * together, each prompt's slots a group with products of their own, so that its completions are
 * bitwise those it gets decoded alone. On several ranks a unit's gather is a collective: the
 * ranks decode in lockstep, agreeing before each pass (an all-reduce) whether any still has a
 * prompt to prefill or a live completion, and a rank with none decodes a token into a spare
 * slot, so that every rank runs the same passes. Completion g of prompt k at step s samples
 * from the stream (train.seed, s, k, g): the same completions whatever the world size. */
#ifndef ZT_TRAIN_RLHF_ROLLOUT_H
#define ZT_TRAIN_RLHF_ROLLOUT_H

#include "lib/data/formats.h"
#include "lib/data/items.h"
#include "lib/model/sample.h"
#include "reward_program.h"
#include "lib/train/trainer.h"

/* Sums since the last metrics row. */
typedef struct zt_rollout_stats {
    double completions, reward, reward_sq, tokens; /* new generations: rewards and trained tokens */
    double truncated;                              /* completions cut off before a stop token */
    double generated, generate_s; /* tokens sampled (prompts' not counted), the seconds it took (gathers included) */
} zt_rollout_stats;

typedef struct zt_rollout {
    const zt_recipe *r;
    int T, B, A; /* rows of T tokens per micro-batch, micro-batches per step */
    zt_dataset train, valid;
    cJSON **train_obj, **valid_obj; /* each prompt's JSON line */
    zt_items order;
    int32_t *input, *target, *pos; /* the step's A × B rows */
    int *ntok;                     /* trained tokens per row; 0: no completion */
    unsigned char *truncated;      /* per row: the completion was cut off, no stop token came */
    double *rewards;               /* per row */
    double *ref;                   /* the reference's log-probabilities per position (with a reference) */
    double *store;                 /* where zt_rollout_outputs writes */
    zt_llama_cache cache;
    zt_real *logits, *prompt_logits; /* the next tokens' [slots][V], and the prompt's last token's [V] */
    zt_sampler *smp;                 /* [slots] each completion's, and the slots of a decoder call: */
    int *slot;                       /* completion of row i of logits */
    int32_t *next;                   /* its token */
    void *scratch;
    int32_t stop_ids[ZT_END_IDS]; /* zt_format_end_ids */
    int vocab;                    /* ids the tokenizer has: the model's rows past them are padding, never sampled */
    zt_llama *gen;                /* the model that generates: the trained one, on its backend (llama_decode.c) */
    int streams;                  /* gen streamed unit by unit through its hooks (zt_plan_rollout_streams) */
    int lockstep;                 /* streams on several ranks: every rank runs the same decoder passes */
    const zt_llama_hooks *hooks;  /* gen's, set aside while it is gathered whole */
    zt_llama ref_model;           /* numel 0 with LoRA and no rlhf.reference: the reference is t's base */
    zt_llama reward_model;
    zt_reward_program program;
    zt_rollout_stats acc;
} zt_rollout;

/* data.format = prompt (zt_algo.check). */
zt_status zt_rollout_check(const zt_recipe *r);
/* Prompts, generation and rewards for t's model; with_reference also opens the reference
 * (rlhf.reference, else the starting model): weights only, a forward pass per step. With LoRA
 * the reference is the base: t's model with its adapters switched off, no second model. */
zt_status zt_rollout_open(zt_rollout *s, zt_trainer *t, int with_reference);
void zt_rollout_close(zt_rollout *s);
/* Generates G completions of each of the prompts items[0..n) (-1: none) of ds into rows
 * [0, n × G) (the rest of the A × B rows empty), sampled at temperature (0: greedy), and
 * scores them into s->rewards. */
zt_status zt_rollout_generate(zt_rollout *s, zt_trainer *t, const zt_dataset *ds, cJSON *const *lines,
                              const int64_t *items, int n, int G, long step, double temperature);
/* The training prompts of the next step: G completions of each of A × B / G prompts. */
zt_status zt_rollout_step(zt_rollout *s, zt_trainer *t, int G, long step);
/* Forward passes of m over rows [0, n), micro-batch by micro-batch: the head's outputs per
 * position (log-probabilities, or values for a score head) into out[n × T]. */
void zt_rollout_outputs(zt_rollout *s, zt_llama *m, int n, double *out);
/* The position of row's last token. */
int zt_rollout_last(const zt_rollout *s, int row);
/* reward_mean, reward_std, completion_length, completions, generate_tokens_per_s (a collective). */
zt_status zt_rollout_metrics(zt_rollout *s, zt_trainer *t, cJSON *row);
/* The held-out prompts answered greedily: a "valid" row with their mean reward. */
zt_status zt_rollout_evaluate(zt_rollout *s, zt_trainer *t, long step);

#endif
