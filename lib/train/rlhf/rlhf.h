/* train/rlhf: zt rlhf's algorithms on the shared trainer (trainer.h):
 *   dpo, reward  preference pairs (pref.c)
 *   kto          answers labelled desirable or not (pref.c)
 *   grpo, ppo    generation and rewards (rollout.c), their updates (grpo.c, ppo.c)
 * and what they share: one sequence per row, reference log-probabilities. */
#ifndef ZT_TRAIN_RLHF_RLHF_H
#define ZT_TRAIN_RLHF_RLHF_H

#include "lib/train/trainer.h"

extern const zt_algo zt_algo_dpo, zt_algo_reward, zt_algo_grpo, zt_algo_ppo, zt_algo_kto;

/* `zt rlhf`: the algorithm rlhf.algorithm names. */
zt_status zt_rlhf(const zt_recipe *r, int argc, char **argv);

/* One sequence of n tokens in a row of T: labels[i] is token i's label (-100: not trained),
 * so position t's target is labels[t + 1]; padding after it is its own pseudo-document. */
void zt_rlhf_fill_row(const int32_t *ids, const int32_t *labels, int n, int T, int32_t *input, int32_t *target,
                      int32_t *pos);

#endif
