/* zt sft: supervised fine-tuning on chat or instruction data. */
#include "commands.h"
#include "options.h"

int cmd_sft(int argc, char **argv)
{
    zt_usage u = {"zt sft", "RECIPE [section.key=value ...]",
                  "Fine-tune a model on chat (data.format = chat) or instruction (instruct) data: the\n"
                  "conversation goes through the chat template and only data.train_on turns carry loss.\n"
                  "Results go to the run directory (output.dir), the model to its final/ directory with\n"
                  "the tokenizer and the chat template used. Every recipe key is in docs/recipe.md."};
    return cmd_train_with(argc, argv, &u, cmd_run_train);
}
