/* zt rlhf: picks the algorithm; the row layout its algorithms share. */
#include "lib/data/dataset.h"
#include "rlhf.h"

void zt_rlhf_fill_row(const int32_t *ids, const int32_t *labels, int n, int T, int32_t *input, int32_t *target,
                      int32_t *pos)
{
    if (n > T) n = T;
    for (int t = 0; t < T; t++) {
        input[t] = t < n ? ids[t] : 0;
        target[t] = t + 1 < n ? labels[t + 1] : ZT_IGNORE_INDEX;
        pos[t] = t < n ? t : t - n;
    }
}

zt_status zt_rlhf(const zt_recipe *r, int argc, char **argv)
{
    static const zt_algo *const algos[] = {[ZT_RLHF_DPO] = &zt_algo_dpo,
                                           [ZT_RLHF_REWARD] = &zt_algo_reward,
                                           [ZT_RLHF_GRPO] = &zt_algo_grpo,
                                           [ZT_RLHF_PPO] = &zt_algo_ppo,
                                           [ZT_RLHF_KTO] = &zt_algo_kto};
    return zt_train_with(r, algos[r->rlhf.algorithm], argc, argv);
}
