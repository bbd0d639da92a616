/* The variables a job's ranks get: defaults, forwarded prefixes, env files. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"

static const char *const forwarded_prefixes[] = {"ZT_", "NCCL_", "OMP_", "UCX_"};

static int name_ok(const char *s, size_t len)
{
    if (!len || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
    for (size_t i = 1; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_') return 0;
    return 1;
}

/* strcmp of entry against the first len bytes of name */
static int name_cmp(const char *entry, const char *name, size_t len)
{
    int c = strncmp(entry, name, len);
    return c ? c : entry[len] != 0;
}

/* the name is the first name_len bytes of name; value NULL means inherit */
static zt_status env_put(zt_launch_env *e, const char *name, size_t name_len, const char *value)
{
    int at = 0;
    while (at < e->n && name_cmp(e->v[at].name, name, name_len) < 0) at++;
    char *v = value ? strdup(value) : NULL;
    if (value && !v) return zt_fail(ZT_ENOMEM, "out of memory");
    if (at < e->n && !name_cmp(e->v[at].name, name, name_len)) {
        free(e->v[at].value);
        e->v[at].value = v;
        return ZT_OK;
    }
    zt_launch_var *grown = realloc(e->v, (size_t)(e->n + 1) * sizeof *grown);
    char *n = strndup(name, name_len);
    if (!grown || !n) {
        if (grown) e->v = grown;
        free(v), free(n);
        return zt_fail(ZT_ENOMEM, "out of memory");
    }
    e->v = grown;
    memmove(&e->v[at + 1], &e->v[at], (size_t)(e->n - at) * sizeof *e->v);
    e->v[at] = (zt_launch_var){n, v};
    e->n++;
    return ZT_OK;
}

zt_status zt_launch_env_set(zt_launch_env *e, const char *name, const char *value)
{
    if (!name_ok(name, strlen(name))) return zt_fail(ZT_EUSER, "'%s' is not a variable name", name);
    return env_put(e, name, strlen(name), value);
}

zt_status zt_launch_env_defaults(zt_launch_env *e, const zt_host_pool *p, int cores)
{
    char num[32];
    int most = zt_host_pool_max_ranks(p), per_node = zt_host_pool_ranks_per_node(p);
    snprintf(num, sizeof num, "%d", most > 0 && cores / most > 1 ? cores / most : 1);
    zt_status st = zt_launch_env_set(e, "OMP_NUM_THREADS", num);
    if (!st && per_node) {
        snprintf(num, sizeof num, "%d", per_node);
        st = zt_launch_env_set(e, "ZT_RANKS_PER_NODE", num);
    }
    return st;
}

zt_status zt_launch_env_forward(zt_launch_env *e, char *const *envp)
{
    for (; envp && *envp; envp++) {
        const char *eq = strchr(*envp, '=');
        size_t len = eq ? (size_t)(eq - *envp) : 0;
        if (!eq || !name_ok(*envp, len)) continue;
        for (size_t i = 0; i < sizeof forwarded_prefixes / sizeof forwarded_prefixes[0]; i++) {
            if (strncmp(*envp, forwarded_prefixes[i], strlen(forwarded_prefixes[i]))) continue;
            zt_status st = env_put(e, *envp, len, NULL);
            if (st) return st;
            break;
        }
    }
    return ZT_OK;
}

zt_status zt_launch_env_parse(zt_launch_env *e, const char *text, const char *where)
{
    int lineno = 1;
    for (const char *line = text; *line; lineno++) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        const char *s = line, *t = end;
        while (s < t && isspace((unsigned char)*s)) s++;
        while (t > s && isspace((unsigned char)t[-1])) t--;
        if (s < t && *s != '#') {
            const char *eq = memchr(s, '=', (size_t)(t - s));
            if (!eq || !name_ok(s, (size_t)(eq - s)))
                return zt_fail(ZT_EUSER, "%s:%d: expected NAME=VALUE, got '%.*s'", where, lineno,
                               (int)(t - s < 64 ? t - s : 64), s);
            char *value = strndup(eq + 1, (size_t)(t - eq - 1));
            if (!value) return zt_fail(ZT_ENOMEM, "out of memory");
            zt_status st = env_put(e, s, (size_t)(eq - s), value);
            free(value);
            if (st) return st;
        }
        line = *end ? end + 1 : end;
    }
    return ZT_OK;
}

void zt_launch_env_free(zt_launch_env *e)
{
    for (int i = 0; i < e->n; i++) free(e->v[i].name), free(e->v[i].value);
    free(e->v);
    *e = (zt_launch_env){0};
}
