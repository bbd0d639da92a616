/* zt eval: loss and perplexity on the recipe's validation (or training) data. */
#include <math.h>
#include <stdio.h>

#include "commands.h"
#include "lib/train/train.h"
#include "options.h"

static void print_number(const char *key, double v, const char *sep)
{
    if (isfinite(v)) printf("\"%s\": %.17g%s", key, v, sep);
    else printf("\"%s\": null%s", key, sep);
}

int cmd_eval(int argc, char **argv)
{
    const char *checkpoint = NULL;
    zt_usage u = {"zt eval", "RECIPE [--checkpoint DIR] [section.key=value ...]",
                  "Evaluate model.path (or --checkpoint DIR) on data.valid, else data.train, and print\n"
                  "one JSON line: loss (mean over target tokens), tokens, positions (computed: rows times\n"
                  "the widest row's tokens, whatever data.max_length), perplexity."};
    zt_option opts[] = {
        {"checkpoint", 'S', &checkpoint, "DIR", "a model directory to evaluate instead of model.path", 0, 0},
        {0},
    };
    if ((argc = zt_options_parse(argc, argv, opts, &u)) < 0) return argc == -2 ? 0 : 2;
    zt_recipe r;
    int code = cmd_load_recipe(&r, "eval", argc, argv);
    if (code) return code;
    zt_eval_result e;
    zt_status st = zt_evaluate(&r, checkpoint, &e);
    zt_recipe_free(&r);
    if (st) return cmd_fail(st);
    printf("{");
    print_number("loss", e.loss, ", ");
    printf("\"tokens\": %lld, \"positions\": %lld, ", (long long)e.tokens, (long long)e.positions);
    if (e.answered) {
        print_number("accuracy", e.accuracy, ", ");
        printf("\"answered\": %lld, ", (long long)e.answered);
    }
    print_number("perplexity", exp(e.loss), "}\n");
    return 0;
}
