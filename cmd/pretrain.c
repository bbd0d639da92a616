/* zt pretrain: causal-LM training from a recipe. */
#include "commands.h"
#include "lib/train/train.h"
#include "options.h"

int cmd_pretrain(int argc, char **argv)
{
    zt_usage u = {"zt pretrain", "RECIPE [section.key=value ...]",
                  "Train a causal language model as the recipe says; results go to the run directory\n"
                  "(output.dir), the trained model to its final/ directory."};
    zt_option opts[] = {{0}};
    if ((argc = zt_options_parse(argc, argv, opts, &u)) < 0) return argc == -2 ? 0 : 2;
    zt_recipe r;
    int code = cmd_load_recipe(&r, "pretrain", argc, argv);
    if (code) return code;
    zt_status st = zt_train(&r, argc, argv);
    zt_recipe_free(&r);
    return st ? cmd_fail(st) : 0;
}
