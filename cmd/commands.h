/* cmd: one file per command; each returns the process exit code
 * (0 ok, 2 for the user's input, 1 for failures of the system). */
#ifndef ZT_CMD_COMMANDS_H
#define ZT_CMD_COMMANDS_H

int cmd_init(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_pretrain(int argc, char **argv);
int cmd_sft(int argc, char **argv);
int cmd_rlhf(int argc, char **argv);
/* the training commands: parse, load the recipe, run train (zt_train or zt_rlhf) */
struct zt_usage;
struct zt_recipe;
int cmd_train_with(int argc, char **argv, const struct zt_usage *u,
                   int (*train)(const struct zt_recipe *r, int argc, char **argv));
int cmd_run_train(const struct zt_recipe *r, int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_download(int argc, char **argv);
int cmd_launch(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_version(int argc, char **argv);

/* Prints "zt: error: <message>" and returns the exit code of st. */
int cmd_fail(int st);
/* Loads RECIPE and the key=value overrides after it (argv[1..argc-1]); exit code or 0. */
int cmd_load_recipe(struct zt_recipe *r, const char *command, int argc, char **argv);

#endif
