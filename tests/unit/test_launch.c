/* zt launch's pieces: hostfiles, --include/--exclude, the variables ranks get,
 * the launcher command lines (exact), and shell quoting checked by a real shell. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/launch/launch.h"
#include "test.h"

static zt_status parse(zt_host_pool *p, const char *text) { return zt_hostfile_parse(p, text, "hf"); }

/* "a:2,b:0,2": each host with its used slots */
static const char *describe(const zt_host_pool *p)
{
    static char buf[256];
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < p->n; i++) {
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s:", i ? " " : "", p->hosts[i].name);
        for (int s = 0, k = 0; s < p->hosts[i].nslots; s++)
            if (p->hosts[i].used[s]) n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%d", k++ ? "," : "", s);
    }
    return buf;
}

static void test_hostfile(void)
{
    zt_host_pool p;
    CHECK(!parse(&p, "# the cluster\n\nworker-0 slots=2   # two\n  worker-1\tslots=3\r\n10.0.0.7 slots=1"));
    CHECK_MSG(!strcmp(describe(&p), "worker-0:0,1 worker-1:0,1,2 10.0.0.7:0"), "%s", describe(&p));
    CHECK(p.n == 3 && p.hosts[1].nslots == 3 && p.hosts[1].nused == 3);
    CHECK(zt_host_pool_max_ranks(&p) == 3 && zt_host_pool_ranks_per_node(&p) == 0);
    zt_host_pool_free(&p);

    CHECK(parse(&p, "a slots=1\nb slots=2\n\na slots=4\n") == ZT_EUSER);
    CHECK_MSG(!strcmp(zt_errmsg(), "hf:4: host 'a' is listed twice (first on line 1)"), "%s", zt_errmsg());
    zt_host_pool_free(&p);

    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"a\n", "hf:1: expected 'HOST slots=N'"},
        {"a slots=2 extra\n", "hf:1: expected 'HOST slots=N'"},
        {"a max_slots=2\n", "hf:1: expected 'HOST slots=N'"},
        {"# c\na slots=0\n", "hf:2: slots must be an integer in [1, 4096], got '0'"},
        {"a slots=-1\n", "hf:1: slots must be an integer in [1, 4096], got '-1'"},
        {"a slots=x\n", "hf:1: slots must be an integer in [1, 4096], got 'x'"},
        {"a slots=99999\n", "hf:1: slots must be an integer in [1, 4096], got '99999'"},
        {"a;rm slots=1\n", "hf:1: host name 'a;rm' may only hold letters, digits, '.', '-' and '_'"},
        {"$(reboot) slots=1\n", "hf:1: host name '$(reboot)' may only hold letters, digits, '.', '-' and '_'"},
        {"-oProxyCommand=x slots=1\n",
         "hf:1: host name '-oProxyCommand=x' may only hold letters, digits, '.', '-' and '_'"},
        {"a'b slots=1\n", "hf:1: host name 'a'b' may only hold letters, digits, '.', '-' and '_'"},
        {"# nothing\n\n", "hf: no hosts (lines 'HOST slots=N')"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(parse(&p, bad[i].text) == ZT_EUSER, "%s", bad[i].text);
        CHECK_MSG(!strcmp(zt_errmsg(), bad[i].msg), "%s -> %s", bad[i].text, zt_errmsg());
        zt_host_pool_free(&p);
    }

    /* a name of valid characters but too long is reported as too long; 253 is the DNS limit */
    char line[400];
    memset(line, 'a', 300);
    snprintf(line + 300, sizeof line - 300, " slots=1\n");
    CHECK(parse(&p, line) == ZT_EUSER);
    const char *want = "hf:1: host name 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is "
                       "300 characters long, longer than 253";
    CHECK_MSG(!strcmp(zt_errmsg(), want), "%s", zt_errmsg());
    zt_host_pool_free(&p);
    snprintf(line + 253, sizeof line - 253, " slots=1\n"); /* 253 characters: accepted */
    CHECK(!parse(&p, line) && p.n == 1 && strlen(p.hosts[0].name) == 253);
    zt_host_pool_free(&p);
}

static void test_hostfile_load(void)
{
    char dir[] = "/tmp/zt-test-launch-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/hostfile", dir);
    test_write_text(path, "h1 slots=4\nh2 slots=4\n");
    zt_host_pool p;
    CHECK(!zt_hostfile_load(&p, path) && p.n == 2 && zt_host_pool_ranks_per_node(&p) == 4);
    zt_host_pool_free(&p);
    CHECK(zt_hostfile_load(&p, "/nonexistent/hostfile") == ZT_EUSER && strstr(zt_errmsg(), "/nonexistent/hostfile"));
    zt_host_pool_free(&p);
    unlink(path);
    rmdir(dir);
}

/* the pool after selecting, or "error: message" */
static const char *select_on(const char *hostfile, const char *include, const char *exclude)
{
    static char buf[300];
    zt_host_pool p;
    ZT_ASSERT(!parse(&p, hostfile));
    if (zt_host_pool_select(&p, include, exclude)) snprintf(buf, sizeof buf, "error: %s", zt_errmsg());
    else snprintf(buf, sizeof buf, "%s", describe(&p));
    zt_host_pool_free(&p);
    return buf;
}

static void test_select(void)
{
    const char *hf = "a slots=4\nb slots=2\nc slots=1\n";
    static const struct {
        const char *include, *exclude, *want;
    } cases[] = {
        {NULL, NULL, "a:0,1,2,3 b:0,1 c:0"},
        {"b", NULL, "b:0,1"},
        {"a:0,2", NULL, "a:0,2"},
        {"c@a:3", NULL, "a:3 c:0"},         /* hostfile order, not the spec's */
        {"a:1@a:2@b", NULL, "a:1,2 b:0,1"}, /* parts of one host add up */
        {NULL, "b", "a:0,1,2,3 c:0"},
        {NULL, "a:0,2@c", "a:1,3 b:0,1"},
        {NULL, "a@b@c", "error: --exclude leaves no slot to run on"},
        {"d", NULL, "error: --include: unknown host 'd' (not among the job's hosts)"},
        {"a:4", NULL, "error: --include: host 'a' has no slot 4 (slots 0..3)"},
        {"a:x", NULL, "error: --include: 'x' is not a slot number in 'a:x'"},
        {"a:", NULL, "error: --include: '' is not a slot number in 'a:'"},
        {"a:0,,1", NULL, "error: --include: '' is not a slot number in 'a:0,,1'"},
        {"a:-1", NULL, "error: --include: '-1' is not a slot number in 'a:-1'"},
        {NULL, "a@@b", "error: --exclude: empty host name in 'a@@b'"},
        {"a@", NULL, "error: --include: empty host name in 'a@'"},
        {"b@a:1:2", NULL, "error: --include: '1:2' is not a slot number in 'b@a:1:2'"},
        {"", NULL, "error: --include: empty host list"},
        {"a", "b", "error: --include and --exclude cannot be combined"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = select_on(hf, cases[i].include, cases[i].exclude);
        CHECK_MSG(!strcmp(got, cases[i].want), "include %s exclude %s: %s", cases[i].include, cases[i].exclude, got);
    }
    zt_host_pool p;
    CHECK(!zt_host_pool_local(&p, 3) && !zt_host_pool_select(&p, "localhost:1", NULL));
    CHECK(!strcmp(describe(&p), "localhost:1") && !zt_host_uses_prefix(&p.hosts[0]));
    zt_host_pool_free(&p);
    CHECK(!parse(&p, hf) && !zt_host_pool_resize(&p, 2) && !strcmp(describe(&p), "a:0,1 b:0,1 c:0,1"));
    CHECK(zt_host_pool_ranks_per_node(&p) == 2);
    zt_host_pool_free(&p);
}

static const char *env_text(const zt_launch_env *e)
{
    static char buf[512];
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < e->n; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s%s%s", i ? " " : "", e->v[i].name, e->v[i].value ? "=" : "",
                              e->v[i].value ? e->v[i].value : "");
    return buf;
}

static void test_env(void)
{
    zt_host_pool p;
    zt_launch_env e = {0};
    CHECK(!parse(&p, "a slots=3\nb slots=3\n"));
    CHECK(!zt_launch_env_defaults(&e, &p, 16));
    CHECK_MSG(!strcmp(env_text(&e), "OMP_NUM_THREADS=5 ZT_RANKS_PER_NODE=3"), "%s", env_text(&e));
    zt_launch_env_free(&e);
    CHECK(!zt_launch_env_defaults(&e, &p, 2) && !strcmp(env_text(&e), "OMP_NUM_THREADS=1 ZT_RANKS_PER_NODE=3"));
    zt_host_pool_free(&p);
    CHECK(!parse(&p, "a slots=1\nb slots=2\n"));
    zt_launch_env_free(&e);
    CHECK(!zt_launch_env_defaults(&e, &p, 8) && !strcmp(env_text(&e), "OMP_NUM_THREADS=4"));
    zt_host_pool_free(&p);

    char *envp[] = {"PATH=/bin",
                    "OMP_NUM_THREADS=3",
                    "ZT_FOO=1",
                    "NCCL_DEBUG=INFO",
                    "UCX_TLS=tcp",
                    "ZTX=1",
                    "HF_TOKEN=secret",
                    "OMPI_MCA_x=1",
                    "odd",
                    NULL};
    CHECK(!zt_launch_env_forward(&e, envp));
    CHECK_MSG(!strcmp(env_text(&e), "NCCL_DEBUG OMP_NUM_THREADS UCX_TLS ZT_FOO"), "%s", env_text(&e));
    CHECK(!zt_launch_env_parse(&e, "# settings\n\n  ZT_FOO=2  \nNEW=a b=c\r\nEMPTY=\nQ='$(x)'\n", ".zt_env"));
    CHECK_MSG(!strcmp(env_text(&e), "EMPTY= NCCL_DEBUG NEW=a b=c OMP_NUM_THREADS Q='$(x)' UCX_TLS ZT_FOO=2"), "%s",
              env_text(&e));
    CHECK(zt_launch_env_parse(&e, "A=1\nexport B=2\n", ".zt_env") == ZT_EUSER);
    CHECK_MSG(!strcmp(zt_errmsg(), ".zt_env:2: expected NAME=VALUE, got 'export B=2'"), "%s", zt_errmsg());
    CHECK(zt_launch_env_parse(&e, "just words\n", "f") == ZT_EUSER &&
          !strcmp(zt_errmsg(), "f:1: expected NAME=VALUE, got 'just words'"));
    CHECK(zt_launch_env_parse(&e, "=x\n", "f") == ZT_EUSER);
    zt_launch_env_free(&e);
}

/* builds and renders; "error: message" on failure */
static const char *render(const zt_launch_spec *s)
{
    static char buf[2048];
    zt_launch_cmd c;
    if (zt_launch_build(&c, s)) {
        snprintf(buf, sizeof buf, "error: %s", zt_errmsg());
        return buf;
    }
    char *line = zt_launch_render(&c);
    snprintf(buf, sizeof buf, "%s", line ? line : "(null)");
    free(line);
    zt_launch_cmd_free(&c);
    return buf;
}

#define CHECK_LINE(spec, want)                                                                                         \
    do {                                                                                                               \
        const char *got_ = render(spec);                                                                               \
        CHECK_MSG(!strcmp(got_, want), "\n  got  %s\n  want %s", got_, want);                                          \
    } while (0)

static void test_commands(void)
{
    zt_host_pool hosts, local;
    zt_launch_env env = {0};
    char *prog[] = {"./train", "--steps", "3", NULL};
    CHECK(!parse(&hosts, "node1 slots=2\nnode2 slots=2\n") && !zt_host_pool_local(&local, 3));
    CHECK(!zt_launch_env_set(&env, "OMP_NUM_THREADS", "4") && !zt_launch_env_set(&env, "ZT_FOO", NULL));
    zt_launch_spec s = {.launcher = ZT_LAUNCHER_MPIRUN, .hosts = &local, .env = &env, .program = prog};
    CHECK_LINE(&s, "mpirun --bind-to none -np 3 -x OMP_NUM_THREADS=4 -x ZT_FOO ./train --steps 3");
    s.as_root = s.oversubscribe = 1, s.log_dir = "logs";
    CHECK_LINE(&s, "mpirun --allow-run-as-root --oversubscribe --bind-to none --output-filename logs -np 3 "
                   "-x OMP_NUM_THREADS=4 -x ZT_FOO ./train --steps 3");
    s = (zt_launch_spec){.launcher = ZT_LAUNCHER_MPIRUN,
                         .hosts = &hosts,
                         .hostfile = 1,
                         .env = &env,
                         .program = prog,
                         .launcher_args = "  --mca btl tcp,self\t--report-bindings "};
    CHECK_LINE(&s, "mpirun --bind-to none --mca btl tcp,self --report-bindings -np 4 --host node1:2,node2:2 "
                   "-x OMP_NUM_THREADS=4 -x ZT_FOO ./train --steps 3");
    s.launcher = ZT_LAUNCHER_SSH, s.launcher_args = NULL;
    CHECK_LINE(&s, "mpirun --bind-to none --mca plm rsh --mca plm_rsh_agent ssh -np 4 --host node1:2,node2:2 "
                   "-x OMP_NUM_THREADS=4 -x ZT_FOO ./train --steps 3");
    s.remote_shell = "/opt/agent";
    CHECK_LINE(&s, "mpirun --bind-to none --mca plm rsh --mca plm_rsh_agent /opt/agent -np 4 --host node1:2,node2:2 "
                   "-x OMP_NUM_THREADS=4 -x ZT_FOO ./train --steps 3");
    s.launcher = ZT_LAUNCHER_SRUN, s.remote_shell = NULL, s.log_dir = "run%1/logs", s.oversubscribe = 1;
    CHECK_LINE(&s, "OMP_NUM_THREADS=4 srun --mpi=pmix --nodes=2 --nodelist=node1,node2 --ntasks=4 "
                   "--ntasks-per-node=2 --overcommit --output=run%%1/logs/rank.%t.stdout "
                   "--error=run%%1/logs/rank.%t.stderr --export=ALL ./train --steps 3");
    s.hosts = &local, s.hostfile = 0, s.log_dir = NULL, s.oversubscribe = 0;
    CHECK_LINE(&s, "OMP_NUM_THREADS=4 srun --mpi=pmix --ntasks-per-node=3 --export=ALL ./train --steps 3");

    /* a slot list other than 0..k-1: one app context per host, with its devices */
    CHECK(!zt_host_pool_select(&hosts, "node1:1@node2", NULL));
    s = (zt_launch_spec){.launcher = ZT_LAUNCHER_MPIRUN, .hosts = &hosts, .hostfile = 1, .env = &env, .program = prog};
    CHECK_LINE(&s, "mpirun --bind-to none -np 1 --host node1:1 -x OMP_NUM_THREADS=4 -x ZT_FOO "
                   "-x CUDA_VISIBLE_DEVICES=1 ./train --steps 3 : "
                   "-np 2 --host node2:2 -x OMP_NUM_THREADS=4 -x ZT_FOO ./train --steps 3");
    s.launcher = ZT_LAUNCHER_SRUN;
    CHECK_LINE(&s, "error: --launcher srun: slot lists other than 0..k-1 ('node1') need mpirun or ssh");
    zt_host_pool_free(&hosts);
    CHECK(!parse(&hosts, "node1 slots=2\nnode2 slots=1\n"));
    CHECK_LINE(&s, "error: --launcher srun needs the same number of ranks on every host");

    s = (zt_launch_spec){.launcher = ZT_LAUNCHER_SSH, .hosts = &local, .env = &env, .program = prog};
    CHECK_LINE(&s, "error: --launcher ssh needs --hostfile (the hosts to reach)");
    s.launcher = ZT_LAUNCHER_MPIRUN, s.remote_shell = "rsh";
    CHECK_LINE(&s, "error: --remote-shell applies to --launcher ssh only");
    char *none[] = {NULL};
    s.remote_shell = NULL, s.program = none;
    CHECK_LINE(&s, "error: missing PROGRAM (zt launch [options] -- PROGRAM ARGS...)");
    zt_host_pool_free(&hosts);
    zt_host_pool_free(&local);
    zt_launch_env_free(&env);
}

/* Runs the rendered line through /bin/sh (in a fresh directory, where an injected
 * command would leave a file) with mpirun and srun defined as functions that print
 * their words NUL-separated; returns the bytes the shell printed, -1 on failure. */
static int shell_words(const char *line, char *out, size_t cap)
{
    char dir[] = "/tmp/zt-test-launch-XXXXXX", path[64], sh[128];
    if (!mkdtemp(dir)) return -1;
    snprintf(path, sizeof path, "%s/cmd.sh", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "mpirun() { printf '%%s\\0' mpirun \"$@\"; }\nsrun() { printf '%%s\\0' srun \"$QV\" \"$@\"; }\n%s\n",
            line);
    fclose(f);
    snprintf(sh, sizeof sh, "cd %s && sh cmd.sh && ! ls | grep -v '^cmd.sh$'", dir);
    FILE *p = popen(sh, "r");
    size_t n = p ? fread(out, 1, cap, p) : 0;
    int rc = p ? pclose(p) : -1;
    snprintf(sh, sizeof sh, "rm -rf %s", dir);
    if (system(sh)) return -1;
    return rc == 0 ? (int)n : -1;
}

static void test_quoting(void)
{
    zt_host_pool local;
    zt_launch_env env = {0};
    char *prog[] = {"/bin/echo", "a;rm -rf /", "it's", "two words", "$(touch pwned)", "`id`",    "",
                    "*",         "x\ny",       "'\"'", "~",         "--flag=$HOME",   "a|b&c>d", NULL};
    CHECK(!zt_host_pool_local(&local, 1));
    CHECK(!zt_launch_env_parse(&env, "QV=$(reboot); 'q' \"w\"\n", ".zt_env"));
    zt_launch_spec s = {
        .launcher = ZT_LAUNCHER_MPIRUN, .hosts = &local, .env = &env, .program = prog, .log_dir = "my logs;x"};
    const char *want = "mpirun --bind-to none --output-filename 'my logs;x' -np 1 -x 'QV=$(reboot); '\\''q'\\'' \"w\"' "
                       "/bin/echo 'a;rm -rf /' 'it'\\''s' 'two words' '$(touch pwned)' '`id`' '' '*' 'x\ny' "
                       "''\\''\"'\\''' '~' '--flag=$HOME' 'a|b&c>d'";
    CHECK_LINE(&s, want);
    for (int srun = 0; srun < 2; srun++) {
        s.launcher = srun ? ZT_LAUNCHER_SRUN : ZT_LAUNCHER_MPIRUN;
        zt_launch_cmd c;
        CHECK(!zt_launch_build(&c, &s));
        char *line = zt_launch_render(&c), got[4096];
        int n = shell_words(line, got, sizeof got);
        /* what the shell must see: the argv, and for srun first the variable it sets */
        char expect[4096];
        size_t m = 0;
        for (int i = 0; i < c.argc; i++) {
            if (i == 1 && srun) m += (size_t)snprintf(expect + m, sizeof expect - m, "%s", c.set.v[0].value) + 1;
            m += (size_t)snprintf(expect + m, sizeof expect - m, "%s", c.argv[i]) + 1;
        }
        CHECK_MSG(n == (int)m && !memcmp(got, expect, m), "%s: the shell split '%s' differently",
                  srun ? "srun" : "mpirun", line);
        free(line);
        zt_launch_cmd_free(&c);
    }
    zt_host_pool_free(&local);
    zt_launch_env_free(&env);
}

int main(void)
{
    RUN(test_hostfile);
    RUN(test_hostfile_load);
    RUN(test_select);
    RUN(test_env);
    RUN(test_commands);
    RUN(test_quoting);
    return test_summary();
}
