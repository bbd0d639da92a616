/* zt launch: start a multi-process job (one MPI world) through mpirun, mpirun over ssh, or srun. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/launch/launch.h"
#include "options.h"

extern char **environ;

/* the cores this process may run on (a cgroup or taskset limit counts) */
static int cores_here(void)
{
    cpu_set_t set;
    if (!sched_getaffinity(0, sizeof set, &set)) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ~/.zt_env, then ./.zt_env (whose lines win) */
static zt_status read_env_files(zt_launch_env *e)
{
    const char *home = getenv("HOME");
    char in_home[4096];
    const char *paths[2] = {NULL, ".zt_env"};
    if (home && !zt_path_join(in_home, sizeof in_home, home, ".zt_env")) paths[0] = in_home;
    for (int i = 0; i < 2; i++) {
        if (!paths[i] || !zt_path_exists(paths[i])) continue;
        char *text;
        size_t len;
        zt_status st = zt_read_file(paths[i], &text, &len);
        if (!st) st = zt_launch_env_parse(e, text, paths[i]);
        free(text);
        if (st) return st;
    }
    return ZT_OK;
}

static int env_has(const zt_launch_env *e, const char *name)
{
    for (int i = 0; i < e->n; i++)
        if (!strcmp(e->v[i].name, name)) return 1;
    return 0;
}

static zt_status make_pool(zt_host_pool *p, const char *hostfile, long nproc, const char *include, const char *exclude)
{
    zt_status st = hostfile ? zt_hostfile_load(p, hostfile) : zt_host_pool_local(p, nproc ? (int)nproc : 1);
    if (!st && hostfile && nproc) st = zt_host_pool_resize(p, (int)nproc);
    if (!st) st = zt_host_pool_select(p, include, exclude);
    return st;
}

static void execute(const zt_launch_cmd *c)
{
    char *line = zt_launch_render(c);
    zt_log_info("launch: %s", line ? line : c->argv[0]);
    free(line);
    for (int i = 0; i < c->set.n; i++) setenv(c->set.v[i].name, c->set.v[i].value, 1);
    fflush(stdout);
    fflush(stderr);
    execvp(c->argv[0], c->argv);
    fprintf(stderr, "zt: error: cannot run '%s': %s%s\n", c->argv[0], strerror(errno),
            errno != ENOENT               ? ""
            : !strcmp(c->argv[0], "srun") ? " (is Slurm installed?)"
                                          : " (is Open MPI installed?)");
}

int cmd_launch(int argc, char **argv)
{
    const char *hostfile = NULL, *launcher = "mpirun", *include = NULL, *exclude = NULL, *log_dir = NULL;
    const char *launcher_args = NULL, *remote_shell = NULL;
    long nproc = 0;
    int oversubscribe = 0, dry_run = 0;
    zt_usage u = {"zt launch", "[options] -- PROGRAM ARGS...",
                  "Start PROGRAM as one MPI world: on this machine, or on the hosts of a DeepSpeed-style\n"
                  "hostfile (lines 'HOST slots=N'). Ranks get ZT_*, NCCL_*, OMP_*, UCX_* variables, the lines\n"
                  "of ~/.zt_env and ./.zt_env, OMP_NUM_THREADS (cores / ranks per host) and ZT_RANKS_PER_NODE.\n"
                  "The exit status is the launcher's (non-zero when a rank fails). See docs/launch.md."};
    zt_option opts[] = {
        {"hostfile", 'S', &hostfile, "FILE", "hosts and their slots ('HOST slots=N' lines)", 0, 0},
        {"nproc-per-node", 'I', &nproc, "N", "ranks per host (default: the host's slots, or 1)", 1, ZT_HOST_MAX_SLOTS},
        {"launcher", 'S', &launcher, "NAME", "mpirun (default), ssh (mpirun over ssh) or srun (Slurm, PMIx)", 0, 0},
        {"include", 'S', &include, "SPEC", "only these hosts/slots: HOST[:SLOT,...]@HOST...", 0, 0},
        {"exclude", 'S', &exclude, "SPEC", "all but these hosts/slots: HOST[:SLOT,...]@HOST...", 0, 0},
        {"oversubscribe", 'F', &oversubscribe, "", "allow more ranks than cores", 0, 0},
        {"log-dir", 'S', &log_dir, "DIR", "also write each rank's stdout and stderr to files under DIR", 0, 0},
        {"launcher-args", 'S', &launcher_args, "ARGS", "extra launcher options (split on spaces)", 0, 0},
        {"remote-shell", 'S', &remote_shell, "CMD", "--launcher ssh: the remote shell (default ssh)", 0, 0},
        {"dry-run", 'F', &dry_run, "", "print the command (shell-quoted) instead of running it", 0, 0},
        {0},
    };
    /* options end at "--": PROGRAM's own --options must never be taken for zt's */
    int dashdash = 0;
    for (int i = 1; i < argc && !dashdash; i++)
        if (!strcmp(argv[i], "--")) dashdash = i;
    int npos = zt_options_parse(dashdash ? dashdash : argc, argv, opts, &u);
    if (npos < 0) return npos == -2 ? 0 : 2;
    if (npos > 1) {
        fprintf(stderr,
                "zt: error: zt launch: '%s': PROGRAM goes after '--' (zt launch [options] -- PROGRAM ARGS...)\n",
                argv[1]);
        return 2;
    }
    char **program = dashdash ? argv + dashdash + 1 : argv + npos;
    zt_launcher kind = !strcmp(launcher, "mpirun") ? ZT_LAUNCHER_MPIRUN
                       : !strcmp(launcher, "ssh")  ? ZT_LAUNCHER_SSH
                       : !strcmp(launcher, "srun") ? ZT_LAUNCHER_SRUN
                                                   : (zt_launcher)-1;
    if ((int)kind < 0) {
        fprintf(stderr, "zt: error: zt launch: unknown launcher '%s' (mpirun, ssh or srun)\n", launcher);
        return 2;
    }
    zt_host_pool pool;
    zt_launch_env env = {0};
    zt_launch_cmd cmd = {0};
    zt_status st = make_pool(&pool, hostfile, nproc, include, exclude);
    if (!st) st = zt_launch_env_defaults(&env, &pool, cores_here());
    if (!st) st = zt_launch_env_forward(&env, environ);
    if (!st) st = read_env_files(&env);
    if (!st && !env_has(&env, "ZT_RANKS_PER_NODE"))
        zt_log_warn("hosts run different numbers of ranks: ZT_RANKS_PER_NODE is not set");
    zt_launch_spec spec = {
        .launcher = kind,
        .hosts = &pool,
        .hostfile = hostfile != NULL,
        .oversubscribe = oversubscribe,
        .as_root = geteuid() == 0,
        .log_dir = log_dir,
        .remote_shell = remote_shell,
        .launcher_args = launcher_args,
        .env = &env,
        .program = program,
    };
    if (!st) st = zt_launch_build(&cmd, &spec);
    if (!st && log_dir && !dry_run) st = zt_mkdir_p(log_dir);
    int code = st ? cmd_fail(st) : 0;
    if (!st && dry_run) {
        char *line = zt_launch_render(&cmd);
        if (line) printf("%s\n", line);
        else code = cmd_fail(zt_fail(ZT_ENOMEM, "out of memory"));
        free(line);
    } else if (!st) {
        execute(&cmd); /* returns only when the launcher could not start */
        code = 1;
    }
    zt_launch_cmd_free(&cmd);
    zt_launch_env_free(&env);
    zt_host_pool_free(&pool);
    return code;
}
