/* The launcher command lines (mpirun, ssh, srun) and their shell rendering. */
#define _GNU_SOURCE /* vasprintf */
#include "launch.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a growing argv; the first allocation failure sticks and is reported once at the end */
typedef struct words {
    char **v;
    int n, cap, oom;
} words;

static void take(words *w, char *s)
{
    if (w->n + 2 > w->cap) {
        int cap = w->cap ? 2 * w->cap : 32;
        char **grown = realloc(w->v, (size_t)cap * sizeof *grown);
        if (!grown) w->oom = 1;
        else w->v = grown, w->cap = cap;
    }
    if (!s || w->oom) {
        w->oom = 1;
        free(s);
        return;
    }
    w->v[w->n++] = s;
    w->v[w->n] = NULL;
}

static void add(words *w, const char *s) { take(w, strdup(s)); }

static void addf(words *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(words *w, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    take(w, s);
}

static void add_split(words *w, const char *text)
{
    for (const char *s = text; s && *s;) {
        s += strspn(s, " \t\n");
        size_t len = strcspn(s, " \t\n");
        if (len) take(w, strndup(s, len));
        s += len;
    }
}

static void add_program(words *w, const zt_launch_spec *s)
{
    for (char *const *p = s->program; *p; p++) add(w, *p);
}

/* "a:2,b:4" (with_counts) or "a,b": the hosts first..last-1 */
static char *host_list(const zt_host_pool *p, int first, int last, int with_counts)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    for (int i = first; i < last; i++) {
        fprintf(f, "%s%s", i > first ? "," : "", p->hosts[i].name);
        if (with_counts) fprintf(f, ":%d", p->hosts[i].nused);
    }
    return fclose(f) ? (free(buf), NULL) : buf;
}

/* "1,3": the slot ids a host uses */
static char *slot_list(const zt_host *h)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    for (int s = 0, k = 0; s < h->nslots; s++)
        if (h->used[s]) fprintf(f, "%s%d", k++ ? "," : "", s);
    return fclose(f) ? (free(buf), NULL) : buf;
}

/* one Open MPI app context: ranks of hosts first..last-1, their variables, the program */
static void mpirun_context(words *w, const zt_launch_spec *s, int first, int last)
{
    int ranks = 0;
    for (int i = first; i < last; i++) ranks += s->hosts->hosts[i].nused;
    add(w, "-np");
    addf(w, "%d", ranks);
    if (s->hostfile) {
        add(w, "--host");
        take(w, host_list(s->hosts, first, last, 1));
    }
    for (int i = 0; i < s->env->n; i++) {
        const zt_launch_var *v = &s->env->v[i];
        add(w, "-x");
        if (v->value) addf(w, "%s=%s", v->name, v->value);
        else add(w, v->name);
    }
    const zt_host *h = &s->hosts->hosts[first];
    if (last == first + 1 && !zt_host_uses_prefix(h)) {
        char *ids = slot_list(h);
        add(w, "-x");
        if (ids) addf(w, "CUDA_VISIBLE_DEVICES=%s", ids);
        else take(w, NULL);
        free(ids);
    }
    add_program(w, s);
}

static zt_status build_mpirun(words *w, const zt_launch_spec *s)
{
    if (s->launcher == ZT_LAUNCHER_SSH && !s->hostfile)
        return zt_fail(ZT_EUSER, "--launcher ssh needs --hostfile (the hosts to reach)");
    add(w, "mpirun");
    if (s->as_root) add(w, "--allow-run-as-root");
    if (s->oversubscribe) add(w, "--oversubscribe");
    add(w, "--bind-to"),
        add(w, "none"); /* each rank runs OMP_NUM_THREADS threads: a one-core binding would starve them */
    if (s->log_dir) add(w, "--output-filename"), add(w, s->log_dir);
    if (s->launcher == ZT_LAUNCHER_SSH) {
        add(w, "--mca"), add(w, "plm"), add(w, "rsh");
        add(w, "--mca"), add(w, "plm_rsh_agent"), add(w, s->remote_shell ? s->remote_shell : "ssh");
    }
    add_split(w, s->launcher_args);
    int per_host = 0;
    for (int i = 0; i < s->hosts->n; i++) per_host |= !zt_host_uses_prefix(&s->hosts->hosts[i]);
    if (!per_host) mpirun_context(w, s, 0, s->hosts->n);
    for (int i = 0; per_host && i < s->hosts->n; i++) {
        if (i) add(w, ":");
        mpirun_context(w, s, i, i + 1);
    }
    return ZT_OK;
}

static zt_status build_srun(words *w, zt_launch_env *set, const zt_launch_spec *s)
{
    const zt_host_pool *p = s->hosts;
    int per_node = zt_host_pool_ranks_per_node(p);
    for (int i = 0; i < p->n; i++)
        if (!zt_host_uses_prefix(&p->hosts[i]))
            return zt_fail(ZT_EUSER, "--launcher srun: slot lists other than 0..k-1 ('%s') need mpirun or ssh",
                           p->hosts[i].name);
    if (!per_node) return zt_fail(ZT_EUSER, "--launcher srun needs the same number of ranks on every host");
    for (int i = 0; i < s->env->n; i++) {
        zt_status st = s->env->v[i].value ? zt_launch_env_set(set, s->env->v[i].name, s->env->v[i].value) : ZT_OK;
        if (st) return st;
    }
    add(w, "srun");
    add(w, "--mpi=pmix");
    if (s->hostfile) {
        char *list = host_list(p, 0, p->n, 0);
        addf(w, "--nodes=%d", p->n);
        if (list) addf(w, "--nodelist=%s", list);
        else take(w, NULL);
        free(list);
        addf(w, "--ntasks=%d", p->n * per_node);
    }
    addf(w, "--ntasks-per-node=%d", per_node);
    if (s->oversubscribe) add(w, "--overcommit");
    if (s->log_dir) {
        /* '%' starts a pattern in srun's file names: a literal one is "%%" */
        size_t n = strlen(s->log_dir);
        char *dir = malloc(2 * n + 1), *o = dir;
        for (size_t i = 0; dir && i < n; i++) {
            if (s->log_dir[i] == '%') *o++ = '%';
            *o++ = s->log_dir[i];
        }
        if (dir) *o = 0, addf(w, "--output=%s/rank.%%t.stdout", dir), addf(w, "--error=%s/rank.%%t.stderr", dir);
        else take(w, NULL);
        free(dir);
    }
    add_split(w, s->launcher_args);
    add(w, "--export=ALL");
    add_program(w, s);
    return ZT_OK;
}

zt_status zt_launch_build(zt_launch_cmd *c, const zt_launch_spec *s)
{
    *c = (zt_launch_cmd){0};
    if (!s->program || !s->program[0])
        return zt_fail(ZT_EUSER, "missing PROGRAM (zt launch [options] -- PROGRAM ARGS...)");
    if (!s->hosts->n) return zt_fail(ZT_EUSER, "no hosts to run on");
    if (s->remote_shell && s->launcher != ZT_LAUNCHER_SSH)
        return zt_fail(ZT_EUSER, "--remote-shell applies to --launcher ssh only");
    words w = {0};
    zt_status st = s->launcher == ZT_LAUNCHER_SRUN ? build_srun(&w, &c->set, s) : build_mpirun(&w, s);
    if (!st && w.oom) st = zt_fail(ZT_ENOMEM, "out of memory");
    c->argv = w.v, c->argc = w.n;
    if (st) zt_launch_cmd_free(c);
    return st;
}

/* appends word to f as one shell word */
static void quote(FILE *f, const char *word)
{
    static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-";
    if (*word && strspn(word, plain) == strlen(word)) {
        fputs(word, f);
        return;
    }
    fputc('\'', f);
    for (; *word; word++) {
        if (*word == '\'') fputs("'\\''", f); /* close, an escaped quote, reopen */
        else fputc(*word, f);
    }
    fputc('\'', f);
}

char *zt_launch_render(const zt_launch_cmd *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    for (int i = 0; i < c->set.n; i++) {
        fprintf(f, "%s=", c->set.v[i].name);
        quote(f, c->set.v[i].value);
        fputc(' ', f);
    }
    for (int i = 0; i < c->argc; i++) {
        if (i) fputc(' ', f);
        quote(f, c->argv[i]);
    }
    return fclose(f) ? (free(buf), NULL) : buf;
}

void zt_launch_cmd_free(zt_launch_cmd *c)
{
    for (int i = 0; i < c->argc; i++) free(c->argv[i]);
    free(c->argv);
    zt_launch_env_free(&c->set);
    *c = (zt_launch_cmd){0};
}
