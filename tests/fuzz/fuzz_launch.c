/* libFuzzer harness for zt launch's inputs: the input is split at NUL bytes into
 * a hostfile, an --include spec, an --exclude spec and a .zt_env file. The
 * hostfile is loaded and the specs applied (include when given, else exclude),
 * the env file parsed, and the mpirun and srun commands built and rendered. A
 * failure is ZT_EUSER with a message; a pool that is left has hosts with used
 * slots only, an env sorted names each once.
 *
 *   make fuzz-launch FUZZ_SECONDS=600
 */
#include <stdlib.h>
#include <string.h>

#include "lib/launch/launch.h"
#include "tests/fuzz/fuzz_util.h"

static void check_pool(const zt_host_pool *p)
{
    if (p->n < 1) abort();
    for (int i = 0; i < p->n; i++) {
        const zt_host *h = &p->hosts[i];
        int used = 0;
        for (int s = 0; s < h->nslots; s++) used += h->used[s] != 0;
        if (h->nslots < 1 || h->nslots > ZT_HOST_MAX_SLOTS || used != h->nused || used < 1) abort();
    }
}

static void check_env(const zt_launch_env *e)
{
    for (int i = 1; i < e->n; i++)
        if (strcmp(e->v[i - 1].name, e->v[i].name) >= 0) abort();
}

static void build_commands(const zt_host_pool *p, const zt_launch_env *e)
{
    char *program[] = {"./train", "--flag", NULL};
    zt_launcher launchers[] = {ZT_LAUNCHER_MPIRUN, ZT_LAUNCHER_SRUN};
    for (int i = 0; i < 2; i++) {
        zt_launch_spec s = {.launcher = launchers[i], .hosts = p, .hostfile = 1, .env = e, .program = program};
        zt_launch_cmd c;
        zt_status st = zt_launch_build(&c, &s);
        if (st) fuzz_check_failure(st, ZT_EUSER, NULL);
        else free(zt_launch_render(&c));
        zt_launch_cmd_free(&c);
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *buf;
    const char *part[4];
    fuzz_split(data, size, &buf, part, 4);
    const char *path = fuzz_write("hostfile", part[0], strlen(part[0]));
    zt_host_pool p;
    zt_launch_env e = {0};
    zt_status st = zt_hostfile_load(&p, path);
    if (st) fuzz_check_failure(st, ZT_EUSER, path);
    if (!st && (st = zt_host_pool_select(&p, part[1][0] ? part[1] : NULL, part[1][0] ? NULL : part[2])))
        fuzz_check_failure(st, ZT_EUSER, part[1][0] ? "--include" : "--exclude");
    if (!st) check_pool(&p);
    if (!st && (st = zt_launch_env_parse(&e, part[3], ".zt_env"))) fuzz_check_failure(st, ZT_EUSER, ".zt_env:");
    if (!st) {
        check_env(&e);
        build_commands(&p, &e);
    }
    zt_launch_env_free(&e);
    zt_host_pool_free(&p);
    free(buf);
    return 0;
}
