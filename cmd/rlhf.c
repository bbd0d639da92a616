/* zt rlhf: preference and reinforcement learning (rlhf.algorithm = dpo | kto | reward | grpo | ppo). */
#include "commands.h"
#include "lib/train/rlhf/rlhf.h"
#include "options.h"

static int run_rlhf(const zt_recipe *r, int argc, char **argv) { return zt_rlhf(r, argc, argv); }

int cmd_rlhf(int argc, char **argv)
{
    zt_usage u = {"zt rlhf", "RECIPE [section.key=value ...]",
                  "Train with preferences or rewards, as rlhf.algorithm says:\n"
                  "  dpo     preference pairs (data.format = preference) against reference log-probabilities\n"
                  "          computed once and cached in data.cache_dir\n"
                  "  kto     answers labelled desirable or not (data.format = unpaired, or preference pairs\n"
                  "          taken one answer at a time), against reference log-probabilities as dpo\n"
                  "  reward  a reward model (score head on the last token) on preference pairs\n"
                  "  grpo    groups of rlhf.num_generations completions per prompt (data.format = prompt),\n"
                  "          scored by rlhf.reward_command or rlhf.reward_model\n"
                  "  ppo     actor and critic on generated completions, KL penalty against the reference\n"
                  "ZeRO stages and offload work as in zt sft. Every recipe key is in docs/recipe.md."};
    return cmd_train_with(argc, argv, &u, run_rlhf);
}
