/* Loading a recipe: defaults, the TOML file, overrides, paths, checks between keys. */
#include "lib/recipe/recipe.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/toml/toml.h"

/* Where a key got its value: the file position of its key, or an override. */
struct zt_recipe_origin {
    int line, col;  /* 0 when not from the file */
    char *override; /* the override text; NULL when not from one */
    int seq;        /* order of assignment: the later of two keys has the larger */
};

/* Where a value being set comes from: for messages, and for resolving paths. */
typedef struct source {
    const char *file;     /* the recipe file */
    const char *override; /* the override text, or NULL */
    const char *base;     /* absolute directory that relative paths resolve against */
    int line, col;        /* of the value in the file */
} source;

static int key_index(const zt_recipe_key *k)
{
    int n;
    return (int)(k - zt_recipe_schema(&n));
}

/* Fails with the place first: "file:line:col: section.key: msg" or "override 'a.b=c': msg". */
static zt_status src_fail(const source *s, const zt_recipe_key *k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static zt_status src_fail(const source *s, const zt_recipe_key *k, const char *fmt, ...)
{
    char msg[768], key[96] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (s->override) return zt_fail(ZT_EUSER, "override '%.200s': %s", s->override, msg);
    if (k) snprintf(key, sizeof key, "%s.%s: ", k->section, k->key);
    if (s->file && s->line) return zt_fail(ZT_EUSER, "%s:%d:%d: %s%s", s->file, s->line, s->col, key, msg);
    return zt_fail(ZT_EUSER, "%s%s", key, msg);
}

/* ---- paths ------------------------------------------------------------------------ */

/* a + "/" + b without empty and "." parts (".." is kept: it depends on symlinks). */
static char *join_path(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *out = malloc(na + nb + 3);
    if (!out) return NULL;
    size_t o = 0;
    bool absolute = (na ? a[0] : b[0]) == '/';
    for (int part = 0; part < 2; part++) {
        const char *s = part ? b : a;
        while (*s) {
            size_t n = strcspn(s, "/");
            if (n && !(n == 1 && s[0] == '.')) {
                if (o || absolute) out[o++] = '/';
                memcpy(out + o, s, n);
                o += n;
            }
            s += n + (s[n] == '/');
        }
    }
    if (!o) out[o++] = absolute ? '/' : '.';
    out[o] = 0;
    return out;
}

static zt_status current_dir(char **out)
{
    if (!(*out = getcwd(NULL, 0))) return zt_fail(ZT_EIO, "cannot get the current directory: %s", strerror(errno));
    return ZT_OK;
}

/* An absolute path for p: ~/ is $HOME, a relative path joins src->base. */
static zt_status resolve_path(const source *src, const zt_recipe_key *k, const char *p, char **out)
{
    const char *prefix = src->base;
    if (!strncmp(p, "hf://", 5)) { /* a Hub repository (zt download): resolved when a command loads the recipe */
        *out = strdup(p);
        return *out ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory");
    }
    if (p[0] == '~' && (p[1] == '/' || !p[1])) {
        prefix = getenv("HOME");
        if (!prefix || !prefix[0]) return src_fail(src, k, "cannot expand '%s': HOME is not set", p);
        p += p[1] ? 2 : 1;
    } else if (p[0] == '/') {
        prefix = "";
    }
    if (!(*out = join_path(prefix, p))) return zt_fail(ZT_ENOMEM, "out of memory");
    return ZT_OK;
}

/* ---- values ----------------------------------------------------------------------- */

static const char *expected(const zt_recipe_key *k)
{
    switch (k->type) {
    case ZT_RECIPE_STRING:
    case ZT_RECIPE_ENUM: return "a string";
    case ZT_RECIPE_LIST: return "a string or an array of strings";
    case ZT_RECIPE_INT:
    case ZT_RECIPE_INT64: return "an integer";
    case ZT_RECIPE_FLOAT: return "a number";
    case ZT_RECIPE_BOOL: return "true or false";
    case ZT_RECIPE_TABLE: return "a table";
    }
    return "a value";
}

/* The index of s in an enum key's names; -1 when it is none of them. */
static int enum_index(const zt_recipe_key *k, const char *s)
{
    for (int i = 0; i < k->nnames; i++)
        if (!strcmp(k->names[i], s)) return i;
    const char *value = zt_recipe_enum_alias(k, s);
    return value ? enum_index(k, value) : -1;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && !strcmp(s + n - m, suffix);
}

/* The stored form of a string value: a path made absolute. */
static zt_status string_value(const source *src, const zt_recipe_key *k, const char *s, char **out)
{
    if ((k->flags & ZT_RECIPE_PATH) && s[0]) return resolve_path(src, k, s, out);
    if (!(*out = strdup(s))) return zt_fail(ZT_ENOMEM, "out of memory");
    return ZT_OK;
}

/* Stores an enum key's value s into *value: its index in the names, or past them with the
 * path in *path (NULL otherwise). */
static zt_status enum_value(const source *src, const zt_recipe_key *k, const char *s, int *value, char **path)
{
    int i = enum_index(k, s);
    char *p = NULL;
    if (i < 0 && (!k->path_suffix || !s[0] || !ends_with(s, k->path_suffix))) {
        char list[256];
        size_t o = 0;
        for (int j = 0; j < k->nnames && o < sizeof list - 1; j++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", j ? ", " : "", k->names[j]);
        return src_fail(src, k, "'%.100s' is not one of %s%s%s", s, list, k->path_suffix ? " or a file ending in " : "",
                        k->path_suffix ? k->path_suffix : "");
    }
    if (i < 0) {
        zt_status st = string_value(src, k, s, &p);
        if (st) return st;
        i = k->nnames;
    }
    *value = i;
    if (k->path_suffix) {
        free(*path);
        *path = p;
    }
    return ZT_OK;
}

static void list_free(zt_strlist *l)
{
    for (int i = 0; i < l->n; i++) free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static zt_status list_value(const source *src, const zt_recipe_key *k, const zt_toml *v, zt_strlist *out)
{
    int ints = k->flags & ZT_RECIPE_INTS, tokens = k->flags & ZT_RECIPE_TOKENS;
    int n = v->kind == ZT_TOML_ARRAY ? v->n : v->kind == ZT_TOML_INT || v->len > 0;
    zt_strlist l = {calloc((size_t)n + 1, sizeof(char *)), 0};
    if (!l.items) return zt_fail(ZT_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const zt_toml *s = v->kind == ZT_TOML_ARRAY ? v->items[i].value : v;
        zt_status st = ZT_OK;
        char id[24];
        if (ints && s->kind == ZT_TOML_INT) {
            if (s->i < 0 || s->i > INT32_MAX)
                st = src_fail(src, k, "%s below 0 or above 2147483647", tokens ? "a token id" : "a number");
            else snprintf(id, sizeof id, "%lld", (long long)s->i), st = string_value(src, k, id, &l.items[l.n]);
        } else if (tokens && s->kind == ZT_TOML_STRING && s->len && strspn(s->str, "0123456789") == s->len)
            st = src_fail(src, k, "'%s': a token id is written as a number, not a string", s->str);
        else if (tokens && s->kind != ZT_TOML_STRING)
            st = src_fail(src, k, "expected token ids (integers from 0) or tokens (strings), got %s",
                          zt_toml_kind_name(s->kind));
        else if (ints && !tokens) st = src_fail(src, k, "expected integers from 0, got %s", zt_toml_kind_name(s->kind));
        else if (s->kind != ZT_TOML_STRING)
            st = src_fail(src, k, "expected a string or an array of strings, got an array holding %s",
                          zt_toml_kind_name(s->kind));
        else if (!s->len) st = src_fail(src, k, "an empty string in the list");
        else if (strlen(s->str) != s->len) st = src_fail(src, k, "a string holding a NUL character");
        else st = string_value(src, k, s->str, &l.items[l.n]);
        if (st) {
            list_free(&l);
            return st;
        }
        l.n++;
    }
    *out = l;
    return ZT_OK;
}

static bool in_range(const zt_recipe_key *k, double x)
{
    bool lo = k->flags & ZT_RECIPE_MIN_OPEN ? x > k->min : x >= k->min;
    bool hi = k->flags & ZT_RECIPE_MAX_OPEN ? x < k->max : x <= k->max;
    return lo && hi;
}

static zt_status range_fail(const source *src, const zt_recipe_key *k, const char *got)
{
    char range[64];
    zt_recipe_range_text(k, range, sizeof range);
    return src_fail(src, k, "must be %s%s, got %s", range[0] == '>' ? "" : "in ", range, got);
}

/* A table of strings, numbers and booleans as a JSON object's text (malloc'd). */
static zt_status table_value(const source *src, const zt_recipe_key *k, const zt_toml *t, char **out)
{
    cJSON *o = cJSON_CreateObject();
    zt_status st = o ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory");
    for (int i = 0; !st && i < t->n; i++) {
        const zt_toml_item *it = &t->items[i];
        const zt_toml *v = it->value;
        source at = *src; /* errors point at the item */
        at.line = it->line, at.col = it->col;
        if (strlen(it->key) != it->keylen || (v->kind == ZT_TOML_STRING && strlen(v->str) != v->len)) {
            st = src_fail(&at, k, "a key or string holding a NUL character");
        } else if (v->kind != ZT_TOML_STRING && v->kind != ZT_TOML_INT && v->kind != ZT_TOML_BOOL &&
                   !(v->kind == ZT_TOML_FLOAT && isfinite(v->f))) {
            st = src_fail(&at, k, "'%.64s' must be a string, a finite number or a boolean, got %s", it->key,
                          v->kind == ZT_TOML_FLOAT ? "an infinity or NaN" : zt_toml_kind_name(v->kind));
        } else {
            cJSON *j = v->kind == ZT_TOML_STRING ? cJSON_CreateString(v->str)
                       : v->kind == ZT_TOML_INT  ? cJSON_CreateNumber((double)v->i)
                       : v->kind == ZT_TOML_BOOL ? cJSON_CreateBool(v->b)
                                                 : cJSON_CreateNumber(v->f);
            if (!j || !cJSON_AddItemToObject(o, it->key, j)) {
                cJSON_Delete(j);
                st = zt_fail(ZT_ENOMEM, "out of memory");
            }
        }
    }
    *out = st ? NULL : cJSON_PrintUnformatted(o);
    if (!st && !*out) st = zt_fail(ZT_ENOMEM, "out of memory");
    cJSON_Delete(o);
    return st;
}

/* Stores the TOML value v as key k of r. */
static zt_status set_key(zt_recipe *r, const zt_recipe_key *k, const zt_toml *v, const source *src)
{
    void *dst = (char *)r + k->offset;
    char got[64];
    bool number = v->kind == ZT_TOML_INT || v->kind == ZT_TOML_FLOAT;
    bool ok = k->type == ZT_RECIPE_STRING || k->type == ZT_RECIPE_ENUM ? v->kind == ZT_TOML_STRING
              : k->type == ZT_RECIPE_LIST ? v->kind == ZT_TOML_STRING || v->kind == ZT_TOML_ARRAY ||
                                                (v->kind == ZT_TOML_INT && (k->flags & ZT_RECIPE_INTS))
              : k->type == ZT_RECIPE_FLOAT ? number
              : k->type == ZT_RECIPE_BOOL  ? v->kind == ZT_TOML_BOOL
              : k->type == ZT_RECIPE_TABLE ? v->kind == ZT_TOML_TABLE
                                           : v->kind == ZT_TOML_INT;
    if (!ok) return src_fail(src, k, "expected %s, got %s", expected(k), zt_toml_kind_name(v->kind));
    if ((k->type == ZT_RECIPE_STRING || k->type == ZT_RECIPE_ENUM) && strlen(v->str) != v->len)
        return src_fail(src, k, "a string holding a NUL character");
    switch (k->type) {
    case ZT_RECIPE_ENUM:
        return enum_value(src, k, v->str, dst, k->path_suffix ? (char **)((char *)r + k->path_offset) : NULL);
    case ZT_RECIPE_STRING: {
        char *s;
        zt_status st = string_value(src, k, v->str, &s);
        if (st) return st;
        free(*(char **)dst);
        *(char **)dst = s;
        return ZT_OK;
    }
    case ZT_RECIPE_LIST: {
        zt_strlist l;
        zt_status st = list_value(src, k, v, &l);
        if (st) return st;
        list_free(dst);
        *(zt_strlist *)dst = l;
        return ZT_OK;
    }
    case ZT_RECIPE_INT:
    case ZT_RECIPE_INT64:
        snprintf(got, sizeof got, "%lld", (long long)v->i);
        if (!in_range(k, (double)v->i)) return range_fail(src, k, got);
        if (k->type == ZT_RECIPE_INT) *(int *)dst = (int)v->i; /* the schema's range fits an int */
        else *(int64_t *)dst = v->i;
        return ZT_OK;
    case ZT_RECIPE_FLOAT: {
        double x = v->kind == ZT_TOML_INT ? (double)v->i : v->f;
        snprintf(got, sizeof got, "%g", x);
        if (!isfinite(x)) return src_fail(src, k, "must be a finite number, got %s", got);
        if (!in_range(k, x)) return range_fail(src, k, got);
        *(double *)dst = x;
        return ZT_OK;
    }
    case ZT_RECIPE_BOOL: *(bool *)dst = v->b; return ZT_OK;
    case ZT_RECIPE_TABLE: {
        char *s;
        zt_status st = table_value(src, k, v, &s);
        if (st) return st;
        free(*(char **)dst);
        *(char **)dst = s;
        return ZT_OK;
    }
    }
    return ZT_OK;
}

/* ---- did you mean ----------------------------------------------------------------- */

/* Edit distance with transpositions (optimal string alignment); large for long strings. */
static int distance(const char *a, const char *b)
{
    enum { MAX = 64 };
    size_t n = strlen(a), m = strlen(b);
    if (n >= MAX || m >= MAX) return MAX;
    int d[MAX + 1][MAX + 1];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

typedef struct guess {
    const char *word; /* the closest candidate so far */
    int score;        /* its distance; a substring match scores worse than any close typo */
} guess;

static void consider(guess *g, const char *typed, const char *candidate)
{
    int len = (int)strlen(typed), d = distance(typed, candidate);
    int limit = len <= 4 ? 1 : len / 3 + 1;
    int score = d <= limit ? d : (len >= 4 && strstr(candidate, typed)) ? 100 : -1;
    if (score >= 0 && (!g->word || score < g->score)) *g = (guess){candidate, score};
}

static bool is_section(const char *name)
{
    int n;
    const zt_recipe_key *s = zt_recipe_schema(&n);
    for (int i = 0; i < n; i++)
        if (!strcmp(s[i].section, name)) return true;
    return false;
}

/* "unknown section [name] (did you mean [x]?)", over the full section names. */
static zt_status unknown_section(const source *src, const char *name)
{
    int n;
    const zt_recipe_key *s = zt_recipe_schema(&n);
    guess g = {0};
    for (int i = 0; i < n; i++)
        if (!i || strcmp(s[i].section, s[i - 1].section)) consider(&g, name, s[i].section);
    char hint[96] = "";
    if (g.word) snprintf(hint, sizeof hint, " (did you mean [%s]?)", g.word);
    return src_fail(src, NULL, "unknown section [%.64s]%s", name, hint);
}

/* "unknown key 'x' in [section] (did you mean 'y'?)"; section NULL: at the top level. A
 * close key of the section is suggested, else the same name in another section. */
static zt_status unknown_key(const source *src, const char *section, const char *key)
{
    int n;
    const zt_recipe_key *s = zt_recipe_schema(&n);
    guess g = {0};
    for (int i = 0; section && i < n; i++)
        if (!strcmp(s[i].section, section)) consider(&g, key, s[i].key);
    char hint[160] = "", where[96] = "at the top level";
    if (g.word) snprintf(hint, sizeof hint, " (did you mean '%s'?)", g.word);
    for (int i = 0; !g.word && i < n; i++)
        if (!strcmp(s[i].key, key)) {
            snprintf(hint, sizeof hint, " (did you mean '%s' in [%s]?)", s[i].key, s[i].section);
            break;
        }
    if (section) snprintf(where, sizeof where, "in [%s]", section);
    return src_fail(src, NULL, "unknown key '%.64s' %s%s", key, where, hint);
}

/* ---- file and overrides ------------------------------------------------------------- */

static zt_status note_origin(zt_recipe *r, const zt_recipe_key *k, int line, int col, const char *override)
{
    int n, seq = 0;
    zt_recipe_schema(&n);
    for (int i = 0; i < n; i++)
        if (r->origin[i].seq > seq) seq = r->origin[i].seq;
    struct zt_recipe_origin *o = &r->origin[key_index(k)];
    free(o->override);
    *o = (struct zt_recipe_origin){line, col, NULL, seq + 1};
    if (override && !(o->override = strdup(override))) return zt_fail(ZT_ENOMEM, "out of memory");
    return ZT_OK;
}

/* The keys of table t, which is section (NULL: the document root). */
static zt_status apply_table(zt_recipe *r, const char *section, const zt_toml *t, source *src)
{
    for (int i = 0; i < t->n; i++) {
        const zt_toml_item *it = &t->items[i];
        const zt_toml *v = it->value;
        src->line = it->line;
        src->col = it->col;
        bool plain = strlen(it->key) == it->keylen && !strchr(it->key, '.') && it->keylen < 64;
        char sub[160] = "";
        if (plain) snprintf(sub, sizeof sub, "%s%s%s", section ? section : "", section ? "." : "", it->key);
        if (plain && is_section(sub)) {
            if (v->kind != ZT_TOML_TABLE)
                return src_fail(src, NULL, "[%s] must be a table, got %s", sub, zt_toml_kind_name(v->kind));
            zt_status st = apply_table(r, sub, v, src);
            if (st) return st;
            continue;
        }
        const zt_recipe_key *k = plain && section ? zt_recipe_find(section, it->key) : NULL;
        if (!k && v->kind == ZT_TOML_TABLE) {
            if (!sub[0]) snprintf(sub, sizeof sub, "%s%s%.64s", section ? section : "", section ? "." : "", it->key);
            return unknown_section(src, sub);
        }
        if (!k) return unknown_key(src, section, it->key);
        src->line = v->line;
        src->col = v->col;
        zt_status st = set_key(r, k, v, src);
        if (!st) st = note_origin(r, k, it->line, it->col, NULL);
        if (st) return st;
    }
    return ZT_OK;
}

static zt_status read_file(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return zt_fail(errno == ENOENT || errno == EACCES ? ZT_EUSER : ZT_EIO, "'%s': cannot open the recipe: %s", path,
                       strerror(errno));
    size_t cap = 0, n = 0;
    char *buf = NULL;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            char *more = realloc(buf, cap);
            if (!more) {
                free(buf);
                fclose(f);
                return zt_fail(ZT_ENOMEM, "'%s': out of memory", path);
            }
            buf = more;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (!got) break;
        n += got;
    }
    int bad = ferror(f) ? errno : 0;
    fclose(f);
    if (bad) {
        free(buf);
        return zt_fail(bad == EISDIR ? ZT_EUSER : ZT_EIO, "'%s': cannot read the recipe: %s", path, strerror(bad));
    }
    *text = buf;
    *len = n;
    return ZT_OK;
}

static zt_status apply_file(zt_recipe *r, const char *path, const char *cwd)
{
    char *text = NULL, err[256], *dir = strdup(path);
    size_t len = 0;
    if (!dir) return zt_fail(ZT_ENOMEM, "out of memory");
    char *slash = strrchr(dir, '/');
    if (slash) slash[slash == dir] = 0; /* "/x.toml" keeps its "/" */
    char *base = join_path(dir[0] == '/' ? "" : cwd, slash ? dir : ".");
    free(dir);
    if (!base) return zt_fail(ZT_ENOMEM, "out of memory");
    zt_status st = read_file(path, &text, &len);
    if (st) {
        free(base);
        return st;
    }
    zt_toml *doc = zt_toml_parse(text, len, err, sizeof err);
    free(text);
    source src = {.file = path, .base = base};
    st = doc ? apply_table(r, NULL, doc, &src) : zt_fail(ZT_EUSER, "%s:%s", path, err);
    zt_toml_free(doc);
    free(base);
    return st;
}

/* Parses "v = ..." (text, which it frees) and hands back the value; NULL when
 * it is not exactly one TOML value. */
static const zt_toml *parse_value_text(char *text, zt_toml **doc)
{
    *doc = text ? zt_toml_parse(text, strlen(text), NULL, 0) : NULL;
    free(text);
    if (*doc && (*doc)->n == 1 && !strcmp((*doc)->items[0].key, "v")) return (*doc)->items[0].value;
    zt_toml_free(*doc);
    *doc = NULL;
    return NULL;
}

/* "v = <value>": as written, or quoted as a string, or as an array of the
 * quoted items of a bare list "[a, b]" (numbers: items of digits alone left numbers). */
static char *override_toml(const char *value, bool as_written, bool list, bool numbers)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return NULL;
    fputs("v = ", f);
    if (as_written) {
        fputs(value, f);
    } else if (list) {
        fputc('[', f);
        const char *s = value + 1, *end = value + strlen(value);
        if (end > s && end[-1] == ']') end--;
        while (s < end) {
            const char *a = s, *b = memchr(s, ',', (size_t)(end - s));
            if (!b) b = end;
            s = b + 1;
            while (a < b && (*a == ' ' || *a == '\t')) a++;
            while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
            if (b > a && numbers && strspn(a, "0123456789") >= (size_t)(b - a)) {
                fprintf(f, "%.*s,", (int)(b - a), a);
            } else if (b > a) {
                zt_toml_write_string(f, a, (size_t)(b - a));
                fputc(',', f);
            }
        }
        fputc(']', f);
    } else {
        zt_toml_write_string(f, value, strlen(value));
    }
    fclose(f);
    return text;
}

/* An override value as TOML: numbers and booleans as written; strings quoted
 * or not; a list as a TOML array, as [a, b] with bare items, or one string. */
static const zt_toml *override_value(const zt_recipe_key *k, const char *value, zt_toml **doc)
{
    bool stringy = k->type == ZT_RECIPE_STRING || k->type == ZT_RECIPE_ENUM || k->type == ZT_RECIPE_LIST;
    bool list = k->type == ZT_RECIPE_LIST && value[0] == '[';
    const zt_toml *v = NULL;
    if (!stringy || list || value[0] == '"' || value[0] == '\'' || (k->flags & ZT_RECIPE_INTS)) /* a number */
        v = parse_value_text(override_toml(value, true, list, false), doc);
    if (!v && stringy) v = parse_value_text(override_toml(value, false, list, k->flags & ZT_RECIPE_INTS), doc);
    return v;
}

/* Trims spaces and tabs around s[0..n) into out. */
static void trimmed(const char *s, size_t n, char *out, size_t cap)
{
    while (n && (*s == ' ' || *s == '\t')) s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    snprintf(out, cap, "%.*s", (int)n, s);
}

static zt_status apply_override(zt_recipe *r, const char *text, const char *cwd)
{
    source src = {.override = text, .base = cwd};
    const char *eq = strchr(text, '=');
    char name[160], *value = NULL;
    if (eq) trimmed(text, (size_t)(eq - text), name, sizeof name);
    char *dot = eq ? strrchr(name, '.') : NULL;
    if (!dot || dot == name || !dot[1]) return src_fail(&src, NULL, "expected section.key=value");
    *dot = 0;
    const char *section = name, *key = dot + 1;
    if (!is_section(section)) return unknown_section(&src, section);
    const zt_recipe_key *k = zt_recipe_find(section, key);
    if (!k) return unknown_key(&src, section, key);
    size_t n = strlen(eq + 1);
    if (!(value = malloc(n + 1))) return zt_fail(ZT_ENOMEM, "out of memory");
    trimmed(eq + 1, n, value, n + 1);
    if (zt_toml_utf8_prefix(value, strlen(value)) < strlen(value)) {
        free(value);
        return src_fail(&src, k, "not valid UTF-8");
    }
    zt_toml *doc = NULL;
    const zt_toml *v = override_value(k, value, &doc);
    free(value);
    zt_status st = v ? set_key(r, k, v, &src) : src_fail(&src, k, "expected %s", expected(k));
    zt_toml_free(doc);
    if (!st) st = note_origin(r, k, 0, 0, text);
    return st;
}

static zt_status apply_defaults(zt_recipe *r, const char *cwd)
{
    int n;
    const zt_recipe_key *s = zt_recipe_schema(&n);
    source src = {.base = cwd};
    for (int i = 0; i < n; i++) {
        zt_toml *doc;
        const zt_toml *v = override_value(&s[i], s[i].def, &doc);
        ZT_ASSERT(v != NULL); /* a default the schema cannot read is a bug */
        zt_status st = set_key(r, &s[i], v, &src);
        zt_toml_free(doc);
        if (st) return st;
    }
    return ZT_OK;
}

/* ---- checks between keys ------------------------------------------------------------ */

/* Fails naming where key section.key was set (the file position, the override, or the file). */
static zt_status key_fail(const zt_recipe *r, const zt_recipe_key *k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static zt_status key_fail(const zt_recipe *r, const zt_recipe_key *k, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const struct zt_recipe_origin *o = &r->origin[key_index(k)];
    if (o->override) return zt_fail(ZT_EUSER, "override '%.200s': %s", o->override, msg);
    if (o->line) return zt_fail(ZT_EUSER, "%s:%d:%d: %s", r->file, o->line, o->col, msg);
    if (r->file) return zt_fail(ZT_EUSER, "%s: %s", r->file, msg);
    return zt_fail(ZT_EUSER, "%s", msg);
}

static const zt_recipe_key *schema_key(const char *section, const char *name)
{
    const zt_recipe_key *k = zt_recipe_find(section, name);
    ZT_ASSERT(k != NULL);
    return k;
}

/* Of two keys, the one set last: the place to point at when they conflict. */
static const zt_recipe_key *later(const zt_recipe *r, const zt_recipe_key *a, const zt_recipe_key *b)
{
    return r->origin[key_index(a)].seq >= r->origin[key_index(b)].seq ? a : b;
}

int zt_recipe_lora_on(const zt_recipe *r) { return r->lora.r > 0 || r->lora.adapter[0]; }

unsigned zt_recipe_lora_targets(const zt_recipe *r)
{
    unsigned bits = 0;
    for (int i = 0; i < r->lora.target_modules.n; i++) {
        const char *name = r->lora.target_modules.items[i];
        int mod = zt_lora_module_of(name);
        bits |= !strcmp(name, "all-linear") ? ZT_LORA_ALL : mod >= 0 ? 1u << mod : 0;
    }
    return bits;
}

unsigned zt_recipe_lora_saved(const zt_recipe *r)
{
    unsigned bits = 0;
    for (int i = 0; i < r->lora.modules_to_save.n; i++)
        bits |= !strcmp(r->lora.modules_to_save.items[i], "embed_tokens") ? ZT_LORA_SAVE_EMBED
                : !strcmp(r->lora.modules_to_save.items[i], "lm_head")    ? ZT_LORA_SAVE_HEAD
                                                                          : 0;
    return bits;
}

/* [lora]: the target names, one source of the adapter's shape, and what LoRA cannot train
 * with (the trainer refuses what a sharded base cannot carry yet, once it knows the world). */
static zt_status check_lora(const zt_recipe *r)
{
    if (r->lora.quantize_base != ZT_QBASE_NONE && !zt_recipe_lora_on(r))
        return key_fail(r, schema_key("lora", "quantize_base"),
                        "lora.quantize_base = \"%s\" quantizes the frozen base of LoRA training: set lora.r (or "
                        "lora.adapter) too",
                        zt_qbase_kind_names[r->lora.quantize_base]);
    if (r->lora.quantize_base != ZT_QBASE_NONE && r->lora.method == ZT_LORA_METHOD_DORA)
        return key_fail(r, later(r, schema_key("lora", "quantize_base"), schema_key("lora", "method")),
                        "lora.quantize_base = \"%s\" with lora.method = \"dora\" is not supported yet",
                        zt_qbase_kind_names[r->lora.quantize_base]);
    if (r->lora.double_quant && r->lora.quantize_base != ZT_QBASE_NF4)
        return key_fail(r, schema_key("lora", "double_quant"),
                        "lora.double_quant quantizes NF4's absmax values: it needs lora.quantize_base = \"nf4\"");
    if (r->lora.quantize_base != ZT_QBASE_NONE && r->zero.quantized_weights)
        return key_fail(r, later(r, schema_key("lora", "quantize_base"), schema_key("zero", "quantized_weights")),
                        "zero.quantized_weights (qwZ) gathers fp32 weights as int8; a quantized base "
                        "(lora.quantize_base = \"%s\") is gathered as it is held, already quantized",
                        zt_qbase_kind_names[r->lora.quantize_base]);
    if (r->lora.quantize_base != ZT_QBASE_NONE && r->zero.mlp_tiles > 1)
        return key_fail(r, later(r, schema_key("lora", "quantize_base"), schema_key("zero", "mlp_tiles")),
                        "zero.mlp_tiles cuts the MLP weights into row tiles; a quantized base (lora.quantize_base = "
                        "\"%s\") keeps each encoded weight whole (leave zero.mlp_tiles at 1)",
                        zt_qbase_kind_names[r->lora.quantize_base]);
    if (r->lora.trainable_token_indices.n && !zt_recipe_lora_on(r))
        return key_fail(r, schema_key("lora", "trainable_token_indices"),
                        "lora.trainable_token_indices trains rows beside LoRA's adapters: set lora.r too");
    if (r->lora.layers_to_transform.n && !zt_recipe_lora_on(r))
        return key_fail(r, schema_key("lora", "layers_to_transform"),
                        "lora.layers_to_transform places LoRA's adapters: set lora.r too");
    if (!zt_recipe_lora_on(r)) return ZT_OK;
    const zt_recipe_key *targets = schema_key("lora", "target_modules");
    if (r->lora.r > 0 && r->lora.adapter[0])
        return key_fail(r, later(r, schema_key("lora", "r"), schema_key("lora", "adapter")),
                        "lora.adapter supplies r, alpha and target_modules from its adapter_config.json: leave lora.r "
                        "at 0 (it is %d)",
                        r->lora.r);
    if (r->lora.adapter[0] && r->lora.method != ZT_LORA_METHOD_LORA)
        return key_fail(r, later(r, schema_key("lora", "method"), schema_key("lora", "adapter")),
                        "lora.adapter supplies the method from its adapter_config.json (use_dora): leave lora.method "
                        "unset");
    const zt_recipe_key *saved = schema_key("lora", "modules_to_save");
    if (r->lora.adapter[0] && r->lora.modules_to_save.n)
        return key_fail(r, later(r, saved, schema_key("lora", "adapter")),
                        "lora.adapter supplies modules_to_save from its adapter_config.json: leave "
                        "lora.modules_to_save empty");
    const zt_recipe_key *tokens = schema_key("lora", "trainable_token_indices");
    if (r->lora.adapter[0] && r->lora.trainable_token_indices.n)
        return key_fail(r, tokens,
                        "lora.adapter supplies trainable_token_indices from its adapter_config.json: leave "
                        "lora.trainable_token_indices empty");
    if (r->lora.adapter[0] && r->lora.layers_to_transform.n)
        return key_fail(r, schema_key("lora", "layers_to_transform"),
                        "lora.adapter supplies layers_to_transform from its adapter_config.json: leave "
                        "lora.layers_to_transform empty");
    for (int i = 0; i < r->lora.modules_to_save.n; i++)
        if (strcmp(r->lora.modules_to_save.items[i], "embed_tokens") &&
            strcmp(r->lora.modules_to_save.items[i], "lm_head"))
            return key_fail(r, saved, "lora.modules_to_save: '%.100s' is not embed_tokens or lm_head",
                            r->lora.modules_to_save.items[i]);
    if (r->lora.r > 0 && !r->lora.target_modules.n) return key_fail(r, targets, "lora.target_modules is empty");
    for (int i = 0; r->lora.r > 0 && i < r->lora.target_modules.n; i++) {
        const char *name = r->lora.target_modules.items[i];
        if (!strcmp(name, "all-linear") ? r->lora.target_modules.n > 1 : zt_lora_module_of(name) < 0)
            return key_fail(r, targets,
                            "lora.target_modules: '%.100s' is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, "
                            "up_proj, down_proj, qkv_proj, gate_up_proj, gate, shared_expert_gate, w1, w2, w3, or "
                            "\"all-linear\" alone",
                            name);
    }
    if (r->zero.quantized_gradients)
        return key_fail(r, schema_key("zero", "quantized_gradients"),
                        "zero.quantized_gradients (qgZ) quantizes the gradients ZeRO stage 3 reduce-scatters; with "
                        "LoRA (lora.r, lora.adapter) there are none: the frozen base has no gradient and the adapters' "
                        "are reduced exactly");
    return ZT_OK;
}

/* train.lr_scheduler_kwargs into r->train.lr_kwargs: the keywords the schedule takes, as numbers
 * in their ranges (Hugging Face's get_scheduler passes them to the schedule's function) */
static zt_status check_schedule_kwargs(zt_recipe *r)
{
    static const char *const taken[] = {
        [ZT_SCHEDULE_COSINE] = " num_cycles min_lr_rate min_lr ",
        [ZT_SCHEDULE_COSINE_RESTARTS] = " num_cycles ",
        [ZT_SCHEDULE_POLYNOMIAL] = " power lr_end ",
    };
    const zt_recipe_key *k = schema_key("train", "lr_scheduler_kwargs");
    zt_schedule_type type = r->train.lr_scheduler_type;
    zt_schedule_kwargs *kw = &r->train.lr_kwargs;
    *kw = zt_schedule_kwargs_default(type);
    cJSON *o = cJSON_Parse(r->train.lr_scheduler_kwargs), *e;
    zt_status st = o ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory reading train.lr_scheduler_kwargs");
    cJSON_ArrayForEach(e, o)
    {
        char word[64];
        snprintf(word, sizeof word, " %.60s ", e->string);
        const char *keys = type < sizeof taken / sizeof *taken && taken[type] ? taken[type] : " ";
        double v = cJSON_IsNumber(e) ? e->valuedouble : NAN;
        if (!strstr(keys, word) || strlen(e->string) > 60)
            st = key_fail(r, k, "train.lr_scheduler_kwargs: the %s schedule takes no '%.60s' (it takes:%s)",
                          zt_schedule_names[type], e->string, keys[1] ? keys : " nothing ");
        else if (!strcmp(e->string, "min_lr_rate")                              ? !(v >= 0 && v <= 1)
                 : !strcmp(e->string, "lr_end") || !strcmp(e->string, "min_lr") ? !(v >= 0 && isfinite(v))
                                                                                : !(v > 0 && isfinite(v)))
            st = key_fail(r, k, "train.lr_scheduler_kwargs: '%s' is out of range (%s)", e->string,
                          !strcmp(e->string, "min_lr_rate")                              ? "a number in [0, 1]"
                          : !strcmp(e->string, "lr_end") || !strcmp(e->string, "min_lr") ? "a number >= 0"
                                                                                         : "a number above 0");
        if (st) break;
        if (!strcmp(e->string, "num_cycles")) kw->num_cycles = v;
        else if (!strcmp(e->string, "power")) kw->power = v;
        else if (!strcmp(e->string, "lr_end")) kw->lr_end = v;
        else if (!strcmp(e->string, "min_lr_rate")) kw->min_lr_rate = v;
        else kw->min_lr = v;
    }
    cJSON_Delete(o);
    if (!st && type == ZT_SCHEDULE_POLYNOMIAL && !(kw->lr_end < r->train.learning_rate))
        st = key_fail(r, later(r, k, schema_key("train", "learning_rate")),
                      "train.lr_scheduler_kwargs: the polynomial schedule's lr_end %g (1e-7 unless set) must be below "
                      "train.learning_rate %g",
                      kw->lr_end, r->train.learning_rate);
    if (!st && kw->min_lr_rate >= 0 && kw->min_lr >= 0)
        st = key_fail(r, k, "train.lr_scheduler_kwargs: min_lr_rate and min_lr are both set; use one");
    if (!st && (kw->min_lr_rate >= 0 || kw->min_lr >= 0) && r->train.min_lr_ratio > 0)
        st = key_fail(r, later(r, k, schema_key("train", "min_lr_ratio")),
                      "train.lr_scheduler_kwargs' %s and train.min_lr_ratio are both set; use one",
                      kw->min_lr_rate >= 0 ? "min_lr_rate" : "min_lr");
    return st;
}

/* rlhf keys that only one algorithm reads, set for another */
static zt_status check_rlhf_algorithm_keys(const zt_recipe *r)
{
    zt_rlhf_algorithm a = r->rlhf.algorithm;
    zt_rlhf_loss l = r->rlhf.loss_type;
    const char *algo = zt_rlhf_algorithm_names[a];
    zt_rlhf_algorithm owner = l >= ZT_RLHF_LOSS_KTO ? ZT_RLHF_KTO : l >= ZT_RLHF_SIGMOID ? ZT_RLHF_DPO : ZT_RLHF_GRPO;
    static const char *const owner_names[] = {[ZT_RLHF_DPO] = "DPO", [ZT_RLHF_GRPO] = "GRPO", [ZT_RLHF_KTO] = "KTO"};
    if (l != ZT_RLHF_LOSS_AUTO && a != owner)
        return key_fail(r, later(r, schema_key("rlhf", "loss_type"), schema_key("rlhf", "algorithm")),
                        "rlhf.loss_type = \"%s\" is %s's, not %s's", zt_rlhf_loss_names[l], owner_names[owner], algo);
    if (l == ZT_RLHF_SIMPO && !(r->rlhf.beta > 0))
        return key_fail(r, later(r, schema_key("rlhf", "loss_type"), schema_key("rlhf", "beta")),
                        "rlhf.loss_type = \"simpo\" needs rlhf.beta above 0 (SimPO's paper uses 2 to 2.5)");
    if ((l == ZT_RLHF_SIMPO || l == ZT_RLHF_ORPO) && r->rlhf.reference[0])
        return key_fail(r, later(r, schema_key("rlhf", "loss_type"), schema_key("rlhf", "reference")),
                        "rlhf.loss_type = \"%s\" has no reference model: leave rlhf.reference unset",
                        zt_rlhf_loss_names[l]);
    if (l == ZT_RLHF_EXO_PAIR && !(r->rlhf.label_smoothing > 0))
        return key_fail(
            r, later(r, schema_key("rlhf", "loss_type"), schema_key("rlhf", "label_smoothing")),
            "rlhf.loss_type = \"exo_pair\" needs rlhf.label_smoothing above 0 (EXO's ε; 1e-3 in its paper)");
    static const char *const grpo_only[] = {"scale_rewards", "mask_truncated_completions", "cliprange_high"};
    const int set[] = {r->rlhf.scale_rewards != ZT_RLHF_SCALE_GROUP, r->rlhf.mask_truncated_completions,
                       r->rlhf.cliprange_high > 0};
    for (int i = 0; i < 3; i++)
        if (set[i] && a != ZT_RLHF_GRPO)
            return key_fail(r, later(r, schema_key("rlhf", grpo_only[i]), schema_key("rlhf", "algorithm")),
                            "rlhf.%s is GRPO's, not %s's", grpo_only[i], algo);
    static const char *const kto_only[] = {"desirable_weight", "undesirable_weight"};
    const int weighted[] = {r->rlhf.desirable_weight != 1, r->rlhf.undesirable_weight != 1};
    for (int i = 0; i < 2; i++)
        if (weighted[i] && a != ZT_RLHF_KTO)
            return key_fail(r, later(r, schema_key("rlhf", kto_only[i]), schema_key("rlhf", "algorithm")),
                            "rlhf.%s is KTO's, not %s's", kto_only[i], algo);
    return ZT_OK;
}

static zt_status check_keys(zt_recipe *r)
{
    zt_status st = check_lora(r);
    if (!st) st = check_schedule_kwargs(r);
    if (st) return st;
    if (r->train.warmup_steps > 0 && r->train.warmup_ratio > 0)
        return key_fail(r, later(r, schema_key("train", "warmup_steps"), schema_key("train", "warmup_ratio")),
                        "train.warmup_steps and train.warmup_ratio are both set; use one");
    if (!(r->train.num_train_epochs > 0) && r->train.max_steps <= 0)
        return key_fail(r, later(r, schema_key("train", "num_train_epochs"), schema_key("train", "max_steps")),
                        "train.num_train_epochs or train.max_steps must be above 0");
    if (r->data.valid.n > 0 && r->data.valid_split > 0)
        return key_fail(r, later(r, schema_key("data", "valid"), schema_key("data", "valid_split")),
                        "data.valid and data.valid_split are both set; use one");
    if ((st = check_rlhf_algorithm_keys(r))) return st;
    if (r->rlhf.reward_model[0] && r->rlhf.reward_command[0])
        return key_fail(r, later(r, schema_key("rlhf", "reward_model"), schema_key("rlhf", "reward_command")),
                        "rlhf.reward_model and rlhf.reward_command are both set; use one");
    if (r->offload.param != ZT_OFFLOAD_NONE && r->offload.param != ZT_OFFLOAD_AUTO && r->zero.stage != 3)
        return key_fail(r, later(r, schema_key("offload", "param"), schema_key("zero", "stage")),
                        "offload.param = \"%s\" needs zero.stage = 3 (it is %d)",
                        zt_offload_tier_names[r->offload.param], r->zero.stage);
    if (r->offload.param == ZT_OFFLOAD_NVME && r->offload.optimizer != ZT_OFFLOAD_NVME &&
        r->offload.optimizer != ZT_OFFLOAD_AUTO && !zt_recipe_lora_on(r)) /* LoRA: the file holds the base alone */
        return key_fail(r, later(r, schema_key("offload", "param"), schema_key("offload", "optimizer")),
                        "offload.param = \"nvme\" needs offload.optimizer = \"nvme\" (it is \"%s\"): the step streams "
                        "weights, gradients and moments through the same file",
                        zt_offload_tier_names[r->offload.optimizer]);
    if (r->train.optim == ZT_OPTIM_ADAMW_8BIT && r->offload.optimizer != ZT_OFFLOAD_NONE &&
        r->offload.optimizer != ZT_OFFLOAD_AUTO)
        return key_fail(r, later(r, schema_key("train", "optim"), schema_key("offload", "optimizer")),
                        "train.optim = \"adamw_8bit\" keeps its moments in memory: it needs offload.optimizer = "
                        "\"none\" (it is \"%s\")",
                        zt_offload_tier_names[r->offload.optimizer]);
    static const char *const zeropp[] = {"quantized_weights", "hpz_partition_size", "quantized_gradients"};
    const int on[] = {r->zero.quantized_weights, r->zero.hpz_partition_size > 1, r->zero.quantized_gradients};
    for (int i = 0; i < 3; i++)
        if (on[i] && r->zero.stage != 3)
            return key_fail(r, later(r, schema_key("zero", zeropp[i]), schema_key("zero", "stage")),
                            "zero.%s (ZeRO++) needs zero.stage = 3 (it is %d)", zeropp[i], r->zero.stage);
    static const char *const tiling[] = {"embedding_tiles", "mlp_tiles", "head_tiles"};
    const int tiles[] = {r->zero.embedding_tiles, r->zero.mlp_tiles, r->zero.head_tiles};
    for (int i = 0; i < 3; i++)
        if (tiles[i] > 1 && r->zero.stage != 3)
            return key_fail(r, later(r, schema_key("zero", tiling[i]), schema_key("zero", "stage")),
                            "zero.%s (memory-centric tiling) needs zero.stage = 3 (it is %d)", tiling[i],
                            r->zero.stage);
    if (r->zero.quantized_gradients_error_feedback && !r->zero.quantized_gradients)
        return key_fail(r, schema_key("zero", "quantized_gradients_error_feedback"),
                        "zero.quantized_gradients_error_feedback needs zero.quantized_gradients = true");
    if (r->zero.measure_quantization && !r->zero.quantized_weights && !r->zero.quantized_gradients)
        return key_fail(r, schema_key("zero", "measure_quantization"),
                        "zero.measure_quantization needs zero.quantized_weights or zero.quantized_gradients");
    if (r->offload.aio.block_size % 4096)
        return key_fail(r, schema_key("offload.aio", "block_size"),
                        "offload.aio.block_size = %lld is not a multiple of 4096",
                        (long long)r->offload.aio.block_size);
    return ZT_OK;
}

zt_status zt_recipe_check_world(const zt_recipe *r, int world, int ranks_per_node)
{
    if (world < 1 || ranks_per_node < 1)
        return zt_fail(ZT_EUSER, "world size %d and ranks per node %d must be at least 1", world, ranks_per_node);
    int hpz = r->zero.hpz_partition_size;
    const zt_recipe_key *k = schema_key("zero", "hpz_partition_size");
    if (world % hpz)
        return key_fail(r, k, "zero.hpz_partition_size = %d does not divide the world size %d", hpz, world);
    if (ranks_per_node % hpz)
        return key_fail(r, k, "zero.hpz_partition_size = %d does not divide the ranks per node (%d)", hpz,
                        ranks_per_node);
    return ZT_OK;
}

/* ---- load and free ------------------------------------------------------------------ */

/* Defaults that depend on other keys: the tokenizer of the model, runs/<recipe name>. */
static zt_status derive(zt_recipe *r, const char *cwd)
{
    if (!r->tokenizer.path[0]) {
        free(r->tokenizer.path);
        if (!(r->tokenizer.path = strdup(r->model.path))) return zt_fail(ZT_ENOMEM, "out of memory");
    }
    if (!r->output.dir[0]) {
        const char *name = "default";
        char stem[256];
        if (r->file) {
            const char *slash = strrchr(r->file, '/');
            snprintf(stem, sizeof stem, "%s", slash ? slash + 1 : r->file);
            size_t n = strlen(stem);
            if (n > 5 && !strcmp(stem + n - 5, ".toml")) stem[n - 5] = 0;
            name = stem;
        }
        char rel[300];
        snprintf(rel, sizeof rel, "runs/%s", name);
        free(r->output.dir);
        if (!(r->output.dir = join_path(cwd, rel))) return zt_fail(ZT_ENOMEM, "out of memory");
    }
    return ZT_OK;
}

zt_status zt_recipe_load(zt_recipe *r, const char *path, int noverrides, char *const *overrides)
{
    int n;
    zt_recipe_schema(&n);
    memset(r, 0, sizeof *r);
    char *cwd = NULL;
    zt_status st = current_dir(&cwd);
    if (!st && !(r->origin = calloc((size_t)n, sizeof *r->origin))) st = zt_fail(ZT_ENOMEM, "out of memory");
    if (!st && path && !(r->file = strdup(path))) st = zt_fail(ZT_ENOMEM, "out of memory");
    if (!st) st = apply_defaults(r, cwd);
    if (!st && path) st = apply_file(r, path, cwd);
    for (int i = 0; !st && i < noverrides; i++) st = apply_override(r, overrides[i], cwd);
    if (!st) st = derive(r, cwd);
    if (!st) st = check_keys(r);
    free(cwd);
    if (st) zt_recipe_free(r);
    return st;
}

void zt_recipe_free(zt_recipe *r)
{
    int n;
    const zt_recipe_key *s = zt_recipe_schema(&n);
    for (int i = 0; i < n; i++) {
        void *p = (char *)r + s[i].offset;
        if (s[i].type == ZT_RECIPE_STRING || s[i].type == ZT_RECIPE_TABLE) free(*(char **)p);
        if (s[i].type == ZT_RECIPE_ENUM && s[i].path_suffix) free(*(char **)((char *)r + s[i].path_offset));
        if (s[i].type == ZT_RECIPE_LIST) list_free(p);
        if (r->origin) free(r->origin[i].override);
    }
    free(r->origin);
    free(r->file);
    memset(r, 0, sizeof *r);
}
