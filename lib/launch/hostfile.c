#include "hostfile.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"

#define HOST_NAME_MAX_LEN 253 /* the longest DNS name */

static int host_name_ok(const char *s)
{
    if (!isalnum((unsigned char)s[0])) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr(".-_", *s)) return 0;
    return 1;
}

static zt_status host_add(zt_host_pool *p, const char *name, int nslots)
{
    zt_host *grown = realloc(p->hosts, (size_t)(p->n + 1) * sizeof *grown);
    if (!grown) return zt_fail(ZT_ENOMEM, "out of memory");
    p->hosts = grown;
    zt_host *h = &p->hosts[p->n];
    *h = (zt_host){strdup(name), nslots, calloc((size_t)nslots, 1), nslots};
    if (!h->name || !h->used) {
        free(h->name), free(h->used);
        return zt_fail(ZT_ENOMEM, "out of memory");
    }
    memset(h->used, 1, (size_t)nslots);
    p->n++;
    return ZT_OK;
}

static int find_host(const zt_host_pool *p, const char *name, size_t len)
{
    for (int i = 0; i < p->n; i++)
        if (strlen(p->hosts[i].name) == len && !strncmp(p->hosts[i].name, name, len)) return i;
    return -1;
}

static int parse_slots(const char *s, long *out)
{
    if (!isdigit((unsigned char)*s)) return -1;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v > ZT_HOST_MAX_SLOTS) return -1;
    *out = v;
    return 0;
}

/* one hostfile line, comment and surrounding blanks removed, split in place */
static zt_status parse_line(zt_host_pool *p, char *line, const char *where, int lineno, int *first_line)
{
    char *save, *host = strtok_r(line, " \t", &save), *slots = strtok_r(NULL, " \t", &save);
    long n;
    if (!slots || strtok_r(NULL, " \t", &save) || strncmp(slots, "slots=", 6))
        return zt_fail(ZT_EUSER, "%s:%d: expected 'HOST slots=N'", where, lineno);
    if (parse_slots(slots + 6, &n) || n < 1)
        return zt_fail(ZT_EUSER, "%s:%d: slots must be an integer in [1, %d], got '%s'", where, lineno,
                       ZT_HOST_MAX_SLOTS, slots + 6);
    size_t len = strlen(host);
    if (len > HOST_NAME_MAX_LEN)
        return zt_fail(ZT_EUSER, "%s:%d: host name '%.64s...' is %zu characters long, longer than %d", where, lineno,
                       host, len, HOST_NAME_MAX_LEN);
    if (!host_name_ok(host))
        return zt_fail(ZT_EUSER, "%s:%d: host name '%.64s' may only hold letters, digits, '.', '-' and '_'", where,
                       lineno, host);
    int dup = find_host(p, host, len);
    if (dup >= 0)
        return zt_fail(ZT_EUSER, "%s:%d: host '%s' is listed twice (first on line %d)", where, lineno, host,
                       first_line[dup]);
    first_line[p->n] = lineno;
    return host_add(p, host, (int)n);
}

zt_status zt_hostfile_parse(zt_host_pool *p, const char *text, const char *where)
{
    *p = (zt_host_pool){0};
    char *copy = strdup(text);
    int *first_line = calloc(strlen(text) + 1, sizeof *first_line); /* at most one host per byte */
    zt_status st = copy && first_line ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory");
    char *line = copy;
    for (int lineno = 1; !st && line; lineno++) {
        char *next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        if (line[strspn(line, " \t\r")]) {
            line[strcspn(line, "\r")] = 0;
            st = parse_line(p, line, where, lineno, first_line);
        }
        line = next;
    }
    if (!st && !p->n) st = zt_fail(ZT_EUSER, "%s: no hosts (lines 'HOST slots=N')", where);
    free(copy);
    free(first_line);
    if (st) zt_host_pool_free(p);
    return st;
}

zt_status zt_hostfile_load(zt_host_pool *p, const char *path)
{
    char *text;
    size_t len;
    *p = (zt_host_pool){0};
    zt_status st = zt_read_file(path, &text, &len);
    if (st) return st;
    if (strlen(text) != len) st = zt_fail(ZT_EUSER, "%s: not a text file (NUL byte)", path);
    else st = zt_hostfile_parse(p, text, path);
    free(text);
    return st;
}

zt_status zt_host_pool_local(zt_host_pool *p, int nslots)
{
    *p = (zt_host_pool){0};
    if (nslots < 1 || nslots > ZT_HOST_MAX_SLOTS)
        return zt_fail(ZT_EUSER, "ranks per node must be in [1, %d]", ZT_HOST_MAX_SLOTS);
    return host_add(p, "localhost", nslots);
}

zt_status zt_host_pool_resize(zt_host_pool *p, int nslots)
{
    if (nslots < 1 || nslots > ZT_HOST_MAX_SLOTS)
        return zt_fail(ZT_EUSER, "ranks per node must be in [1, %d]", ZT_HOST_MAX_SLOTS);
    for (int i = 0; i < p->n; i++) {
        zt_host *h = &p->hosts[i];
        unsigned char *used = realloc(h->used, (size_t)nslots);
        if (!used) return zt_fail(ZT_ENOMEM, "out of memory");
        memset(used, 1, (size_t)nslots);
        h->used = used, h->nslots = h->nused = nslots;
    }
    return ZT_OK;
}

/* Applies one "host" or "host:s,s" of a spec: include sets the flags in keep, exclude clears them in used. */
static zt_status apply_part(zt_host_pool *p, unsigned char **keep, const char *opt, const char *spec, const char *part,
                            size_t len)
{
    const char *colon = memchr(part, ':', len);
    size_t hlen = colon ? (size_t)(colon - part) : len;
    if (!hlen) return zt_fail(ZT_EUSER, "%s: empty host name in '%s'", opt, spec);
    int i = find_host(p, part, hlen);
    if (i < 0) return zt_fail(ZT_EUSER, "%s: unknown host '%.*s' (not among the job's hosts)", opt, (int)hlen, part);
    zt_host *h = &p->hosts[i];
    unsigned char *flags = keep ? keep[i] : h->used, value = keep ? 1 : 0;
    if (!colon) {
        memset(flags, value, (size_t)h->nslots);
        return ZT_OK;
    }
    const char *s = colon + 1, *end = part + len;
    for (;;) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *stop = comma ? comma : end;
        char num[16];
        long slot;
        snprintf(num, sizeof num, "%.*s", (int)(stop - s < 15 ? stop - s : 15), s);
        if (stop - s >= 15 || parse_slots(num, &slot))
            return zt_fail(ZT_EUSER, "%s: '%.*s' is not a slot number in '%s'", opt, (int)(stop - s), s, spec);
        if (slot >= h->nslots)
            return zt_fail(ZT_EUSER, "%s: host '%s' has no slot %ld (slots 0..%d)", opt, h->name, slot, h->nslots - 1);
        flags[slot] = value;
        if (!comma) return ZT_OK;
        s = comma + 1;
    }
}

static zt_status apply_spec(zt_host_pool *p, unsigned char **keep, const char *opt, const char *spec)
{
    if (!*spec) return zt_fail(ZT_EUSER, "%s: empty host list", opt);
    for (const char *s = spec;;) {
        const char *at = strchr(s, '@');
        size_t len = at ? (size_t)(at - s) : strlen(s);
        zt_status st = apply_part(p, keep, opt, spec, s, len);
        if (st) return st;
        if (!at) return ZT_OK;
        s = at + 1;
    }
}

zt_status zt_host_pool_select(zt_host_pool *p, const char *include, const char *exclude)
{
    if (include && exclude) return zt_fail(ZT_EUSER, "--include and --exclude cannot be combined");
    if (!include && !exclude) return ZT_OK;
    zt_status st = ZT_OK;
    unsigned char **keep = NULL;
    if (include) {
        keep = calloc((size_t)p->n, sizeof *keep);
        for (int i = 0; keep && i < p->n; i++)
            if (!(keep[i] = calloc((size_t)p->hosts[i].nslots, 1))) st = zt_fail(ZT_ENOMEM, "out of memory");
        if (!keep) st = zt_fail(ZT_ENOMEM, "out of memory");
    }
    if (!st) st = apply_spec(p, keep, include ? "--include" : "--exclude", include ? include : exclude);
    int n = 0;
    for (int i = 0; i < p->n; i++) {
        zt_host *h = &p->hosts[i];
        if (!st && keep) memcpy(h->used, keep[i], (size_t)h->nslots);
        if (keep) free(keep[i]);
        h->nused = 0;
        for (int s = 0; s < h->nslots; s++) h->nused += h->used[s];
        if (h->nused || st) p->hosts[n++] = *h;
        else free(h->name), free(h->used);
    }
    free(keep);
    p->n = n;
    if (!st && !n) st = zt_fail(ZT_EUSER, "%s leaves no slot to run on", include ? "--include" : "--exclude");
    return st;
}

int zt_host_uses_prefix(const zt_host *h)
{
    for (int s = 0; s < h->nused; s++)
        if (!h->used[s]) return 0;
    return 1;
}

int zt_host_pool_ranks_per_node(const zt_host_pool *p)
{
    for (int i = 1; i < p->n; i++)
        if (p->hosts[i].nused != p->hosts[0].nused) return 0;
    return p->n ? p->hosts[0].nused : 0;
}

int zt_host_pool_max_ranks(const zt_host_pool *p)
{
    int most = 0;
    for (int i = 0; i < p->n; i++)
        if (p->hosts[i].nused > most) most = p->hosts[i].nused;
    return most;
}

void zt_host_pool_free(zt_host_pool *p)
{
    for (int i = 0; i < p->n; i++) free(p->hosts[i].name), free(p->hosts[i].used);
    free(p->hosts);
    *p = (zt_host_pool){0};
}
