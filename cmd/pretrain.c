/* zt pretrain: causal-LM training from a recipe (shares the trainer with zt sft). */
#include <stdio.h>

#include "commands.h"
#include "lib/train/train.h"
#include "options.h"

/* the recipe keys, from the schema, after a training command's usage */
static void print_recipe_keys(void)
{
    int n;
    const zt_recipe_key *k = zt_recipe_schema(&n);
    printf("\nrecipe keys (section.key = default: meaning; all of them in docs/recipe.md):\n");
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.%s", k[i].section, k[i].key);
        printf("  %-36s = %-14s %s\n", name, k[i].def[0] ? k[i].def : "\"\"", k[i].doc);
    }
}

int cmd_train_with(int argc, char **argv, const zt_usage *u, int (*train)(const zt_recipe *r, int argc, char **argv))
{
    zt_option opts[] = {{0}};
    if ((argc = zt_options_parse(argc, argv, opts, u)) < 0) {
        if (argc == -2) print_recipe_keys();
        return argc == -2 ? 0 : 2;
    }
    zt_recipe r;
    int code = cmd_load_recipe(&r, u->command + 3, argc, argv);
    if (code) return code;
    zt_status st = train(&r, argc, argv);
    zt_recipe_free(&r);
    return st ? cmd_fail(st) : 0;
}

/* zt_train as a training command's function */
int cmd_run_train(const zt_recipe *r, int argc, char **argv) { return zt_train(r, argc, argv); }

int cmd_pretrain(int argc, char **argv)
{
    zt_usage u = {"zt pretrain", "RECIPE [section.key=value ...]",
                  "Train a causal language model on raw text (data.format = text) or token ids (tokens)\n"
                  "as the recipe says; results go to the run directory (output.dir), the trained model\n"
                  "to its final/ directory. Every recipe key is described in docs/recipe.md."};
    return cmd_train_with(argc, argv, &u, cmd_run_train);
}
