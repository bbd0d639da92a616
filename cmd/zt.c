/* zt: the command table and what every command shares. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "lib/core/log.h"
#include "lib/core/status.h"
#include "lib/hub/hub.h"
#include "lib/recipe/recipe.h"
#include "options.h"

static int cmd_help(int argc, char **argv);

static const struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"pretrain", cmd_pretrain, "causal-LM training on raw text or token ids"},
    {"sft", cmd_sft, "supervised fine-tuning on chat or instruction data"},
    {"rlhf", cmd_rlhf, "preference and RL training: dpo, reward models, grpo, ppo"},
    {"eval", cmd_eval, "loss and perplexity of a model on the recipe's data (one JSON line)"},
    {"data", cmd_data, "data inspect: the first examples or packed rows as the trainer sees them"},
    {"generate", cmd_generate, "generate text: a prompt, a chat, or a JSONL file of prompts"},
    {"export", cmd_export, "write a Hugging Face model directory from a run or checkpoint"},
    {"download", cmd_download, "download a Hugging Face Hub repository into the shared cache or a directory"},
    {"launch", cmd_launch, "start a multi-process job (Open MPI, ssh, Slurm)"},
    {"validate", cmd_validate, "check a recipe; print it resolved, with a memory estimate per rank"},
    {"init", cmd_init, "write a randomly initialised model in Hugging Face format"},
    {"env", cmd_env, "versions, backends, CPU features"},
    {"version", cmd_version, "print the zt version"},
    {"help", cmd_help, "show the commands, or one command's usage"},
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

int cmd_fail(int st)
{
    fprintf(stderr, "zt: error: %s\n", zt_errmsg());
    return zt_exit_code((zt_status)st);
}

/* model.path = "hf://org/name@revision": from here on the snapshot's directory in the Hub cache
 * (downloaded when missing), and the tokenizer's too when it is the model's. */
static zt_status resolve_hub_model(zt_recipe *r)
{
    char dir[4096], *copy;
    if (strncmp(r->model.path, "hf://", 5)) return ZT_OK;
    zt_status st = zt_hub_resolve_model_path(r->model.path, dir, sizeof dir);
    if (st) return st;
    if (!strcmp(r->tokenizer.path, r->model.path)) {
        if (!(copy = strdup(dir))) return zt_fail(ZT_ENOMEM, "out of memory");
        free(r->tokenizer.path);
        r->tokenizer.path = copy;
    }
    if (!(copy = strdup(dir))) return zt_fail(ZT_ENOMEM, "out of memory");
    free(r->model.path);
    r->model.path = copy;
    return ZT_OK;
}

int cmd_load_recipe(zt_recipe *r, const char *command, int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "zt: error: %s: missing RECIPE (see 'zt %s --help')\n", command, command);
        return 2;
    }
    zt_status st = zt_recipe_load(r, argv[1], argc - 2, argv + 2);
    if (!st) st = resolve_hub_model(r);
    return st ? cmd_fail(st) : 0;
}

static void list_commands(FILE *f)
{
    fprintf(f, "usage: zt COMMAND [ARGS]\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'zt help COMMAND' or 'zt COMMAND --help' shows a command's usage.\n");
}

static const struct command *find_command(const char *name)
{
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

static int unknown_command(const char *name)
{
    const char *best = NULL;
    int bestd = 3;
    for (int i = 0; i < NCOMMANDS; i++) {
        int d = zt_edit_distance(name, commands[i].name);
        if (d < bestd) bestd = d, best = commands[i].name;
    }
    fprintf(stderr, "zt: error: '%s' is not a zt command", name);
    if (best) fprintf(stderr, " (did you mean '%s'?)", best);
    fprintf(stderr, "; see 'zt help'\n");
    return 2;
}

static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        list_commands(stdout);
        return 0;
    }
    const struct command *c = find_command(argv[1]);
    if (!c || c->fn == cmd_help) return c ? (list_commands(stdout), 0) : unknown_command(argv[1]);
    char *args[] = {argv[1], "--help", NULL};
    return c->fn(2, args);
}

/* stdout carries machine output: a failed write (disk full, closed pipe) must not pass silently */
static int finish_stdout(int code)
{
    if (fflush(stdout) || ferror(stdout) || fclose(stdout)) {
        if (errno != EPIPE) fprintf(stderr, "zt: error: writing to standard output failed: %s\n", strerror(errno));
        return code ? code : 1;
    }
    return code;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        list_commands(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return finish_stdout(cmd_help(1, argv + 1));
    if (!strcmp(argv[1], "--version")) return finish_stdout(cmd_version(1, argv + 1));
    const struct command *c = find_command(argv[1]);
    if (!c) return unknown_command(argv[1]);
    return finish_stdout(c->fn(argc - 1, argv + 1));
}
