/* launch/launch: the command line that starts a job (zt launch), built as an
 * argv for execvp (never through a shell), and the variables the ranks get.
 *
 *     zt_launch_env env = {0};
 *     zt_launch_env_defaults(&env, &pool, cores);     // OMP_NUM_THREADS, ZT_RANKS_PER_NODE
 *     zt_launch_env_forward(&env, environ);           // ZT_*, NCCL_*, OMP_*, UCX_* (win over defaults)
 *     zt_launch_env_parse(&env, text, ".zt_env");     // NAME=VALUE lines (win over all)
 *     zt_launch_spec s = {.launcher = ZT_LAUNCHER_MPIRUN, .hosts = &pool, .env = &env, .program = argv};
 *     zt_launch_cmd c;
 *     if (!(st = zt_launch_build(&c, &s))) { char *line = zt_launch_render(&c); puts(line); free(line); }
 *     zt_launch_cmd_free(&c);
 *
 * Backends: mpirun (Open MPI; hosts as --host h:k,..., variables as -x), ssh
 * (the same with ssh forced as the remote agent), srun (Slurm with PMIx;
 * variables set in srun's environment, --export=ALL). With a slot list that
 * is not 0..k-1 (--include h:1,3) each host gets its own Open MPI app context
 * with CUDA_VISIBLE_DEVICES set to its slots.
 */
#ifndef ZT_LAUNCH_LAUNCH_H
#define ZT_LAUNCH_LAUNCH_H

#include "hostfile.h"
#include "lib/core/status.h"

typedef enum zt_launcher { ZT_LAUNCHER_MPIRUN, ZT_LAUNCHER_SSH, ZT_LAUNCHER_SRUN } zt_launcher;

typedef struct zt_launch_var {
    char *name;
    char *value; /* NULL: passed on from the launcher's own environment */
} zt_launch_var;

typedef struct zt_launch_env {
    zt_launch_var *v; /* sorted by name, each name once */
    int n;
} zt_launch_env;

/* Sets or replaces a variable (value NULL: forward the launcher's own). */
zt_status zt_launch_env_set(zt_launch_env *e, const char *name, const char *value);
/* OMP_NUM_THREADS = max(1, cores / the most ranks on a host), assuming every host
 * has this machine's cores; ZT_RANKS_PER_NODE when all hosts run as many ranks. */
zt_status zt_launch_env_defaults(zt_launch_env *e, const zt_host_pool *p, int cores);
/* Forwards the variables of envp (NAME=VALUE strings, NULL-terminated) named ZT_*, NCCL_*, OMP_*, UCX_*. */
zt_status zt_launch_env_forward(zt_launch_env *e, char *const *envp);
/* Adds the lines of an env file: NAME=VALUE (the value taken literally), '#'
 * comments, blank lines; where names the file in messages. */
zt_status zt_launch_env_parse(zt_launch_env *e, const char *text, const char *where);
void zt_launch_env_free(zt_launch_env *e);

typedef struct zt_launch_spec {
    zt_launcher launcher;
    const zt_host_pool *hosts;
    int hostfile;              /* the hosts came from a hostfile (else: this machine, or Slurm's allocation) */
    int oversubscribe;         /* allow more ranks than cores */
    int as_root;               /* Open MPI refuses root without --allow-run-as-root */
    const char *log_dir;       /* per-rank output files, or NULL */
    const char *remote_shell;  /* ssh: the agent (default "ssh") */
    const char *launcher_args; /* extra launcher options, split on whitespace, or NULL */
    const zt_launch_env *env;
    char *const *program; /* PROGRAM ARGS..., NULL-terminated */
} zt_launch_spec;

typedef struct zt_launch_cmd {
    char **argv; /* NULL-terminated, for execvp */
    int argc;
    zt_launch_env set; /* variables to put in the launcher's environment before exec (srun) */
} zt_launch_cmd;

/* Builds the launcher's argv; ZT_EUSER when the spec cannot be expressed by the
 * backend (ssh without a hostfile, srun with uneven ranks per host, ...). */
zt_status zt_launch_build(zt_launch_cmd *c, const zt_launch_spec *s);
/* The command as one shell line (malloc'd; NULL when out of memory): set
 * variables as NAME=VALUE prefixes, then every word, single-quoted unless it
 * holds only characters a shell leaves alone. */
char *zt_launch_render(const zt_launch_cmd *c);
void zt_launch_cmd_free(zt_launch_cmd *c);

#endif
