/* zt rlhf: picks the algorithm; the row layout its algorithms share. */
#include <string.h>

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
    static const struct { const char *name; const zt_algo *algo; } algos[] = {
        {"dpo", &zt_algo_dpo}, {"reward", &zt_algo_reward}, {"grpo", &zt_algo_grpo}, {"ppo", &zt_algo_ppo}};
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++)
        if (!strcmp(r->rlhf.algorithm, algos[i].name)) return zt_train_with(r, algos[i].algo, argc, argv);
    return zt_fail(ZT_EUSER, "rlhf.algorithm '%s' is not dpo, reward, grpo or ppo", r->rlhf.algorithm);
}
