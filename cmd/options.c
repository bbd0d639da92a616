#include "options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int zt_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(b);
    if (n > 63) return 99;
    int row[64];
    for (size_t j = 0; j <= n; j++) row[j] = (int)j;
    for (size_t i = 1; a[i - 1]; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= n; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[n];
}

int zt_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int zt_parse_size(const char *s, unsigned long long *out)
{
    static const struct {
        const char *suffix;
        unsigned long long mult;
    } units[] = {
        {"", 1},
        {"B", 1},
        {"KB", 1000ull},
        {"MB", 1000000ull},
        {"GB", 1000000000ull},
        {"TB", 1000000000000ull},
        {"KiB", 1ull << 10},
        {"MiB", 1ull << 20},
        {"GiB", 1ull << 30},
    };
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-') return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].suffix)) {
            if (v > ~0ull / units[i].mult) return -1;
            *out = v * units[i].mult;
            return 0;
        }
    return -1;
}

void zt_options_usage(FILE *f, const zt_option *opts, const zt_usage *usage)
{
    fprintf(f, "usage: %s %s\n\n%s\n", usage->command, usage->synopsis, usage->summary);
    if (opts && opts[0].name) fprintf(f, "\noptions:\n");
    for (const zt_option *o = opts; o && o->name; o++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->type == 'F' ? "" : " ", o->type == 'F' ? "" : o->arg);
        fprintf(f, "  %-24s %s\n", left, o->help);
    }
    fprintf(f, "  %-24s %s\n", "--help", "show this help");
}

static const zt_option *find(const zt_option *opts, const char *name, size_t len)
{
    for (const zt_option *o = opts; o && o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len)) return o;
    return NULL;
}

static void unknown(const zt_option *opts, const zt_usage *usage, const char *name, size_t len)
{
    char given[64];
    snprintf(given, sizeof given, "%.*s", (int)(len < 60 ? len : 60), name);
    const char *best = NULL;
    int bestd = 3;
    for (const zt_option *o = opts; o && o->name; o++) {
        int d = zt_edit_distance(given, o->name);
        if (d < bestd) bestd = d, best = o->name;
    }
    fprintf(stderr, "zt: error: %s: unknown option '--%s'", usage->command, given);
    if (best) fprintf(stderr, " (did you mean '--%s'?)", best);
    fprintf(stderr, "\n");
}

int zt_options_parse(int argc, char **argv, const zt_option *opts, const zt_usage *usage)
{
    int npos = 1, only_positional = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (only_positional || a[0] != '-' || a[1] != '-') {
            argv[npos++] = a;
            continue;
        }
        if (!a[2]) {
            only_positional = 1;
            continue;
        }
        if (!strcmp(a, "--help")) {
            zt_options_usage(stdout, opts, usage);
            return -2;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const zt_option *o = find(opts, name, len);
        if (!o) {
            unknown(opts, usage, name, len);
            return -1;
        }
        if (o->type == 'F') {
            if (eq) {
                fprintf(stderr, "zt: error: %s: option '--%s' takes no value\n", usage->command, o->name);
                return -1;
            }
            *(int *)o->dest = 1;
            continue;
        }
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value) {
            fprintf(stderr, "zt: error: %s: option '--%s' needs a value (%s)\n", usage->command, o->name, o->arg);
            return -1;
        }
        if (o->type == 'S') {
            *(const char **)o->dest = value;
        } else if (o->type == 'L') {
            zt_option_list *l = o->dest;
            if (l->n == (int)(sizeof l->items / sizeof l->items[0])) {
                fprintf(stderr, "zt: error: %s: option '--%s' given too often\n", usage->command, o->name);
                return -1;
            }
            l->items[l->n++] = value;
        } else if (o->type == 'D') {
            char *end;
            double v = strtod(value, &end);
            if (end == value || *end || !(v >= o->min && v <= o->max)) {
                fprintf(stderr, "zt: error: %s: option '--%s': '%s' is not a number in [%ld, %ld]\n", usage->command,
                        o->name, value, o->min, o->max);
                return -1;
            }
            *(double *)o->dest = v;
        } else if (zt_parse_long(value, o->min, o->max, (long *)o->dest)) {
            fprintf(stderr, "zt: error: %s: option '--%s': '%s' is not an integer in [%ld, %ld]\n", usage->command,
                    o->name, value, o->min, o->max);
            return -1;
        }
    }
    argv[npos] = NULL;
    return npos;
}
