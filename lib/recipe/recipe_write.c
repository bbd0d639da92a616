/* Writing a recipe: values as TOML, the resolved recipe file, the data hash. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/recipe/recipe.h"
#include "lib/toml/toml.h"

/* The shortest text that reads back as exactly x, in TOML float syntax (x is finite). */
static void write_float(FILE *f, double x)
{
    char b[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, x);
        if (strtod(b, NULL) == x) break;
    }
    char dp = localeconv()->decimal_point[0]; /* printf follows the locale: TOML wants '.' */
    for (char *c = b; *c; c++)
        if (*c == dp) *c = '.';
    fputs(b, f);
    if (!strpbrk(b, ".e")) fputs(".0", f);
}

/* A JSON object of strings, numbers and booleans (a table key's value) as a TOML inline table. */
static void write_table(FILE *f, const char *json)
{
    cJSON *o = cJSON_Parse(json);
    fputc('{', f);
    for (const cJSON *e = o ? o->child : NULL; e; e = e->next) {
        if (e != o->child) fputs(", ", f);
        if (e->string[strspn(e->string, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")] ||
            !e->string[0])
            zt_toml_write_string(f, e->string, strlen(e->string));
        else fputs(e->string, f);
        fputs(" = ", f);
        if (cJSON_IsString(e)) zt_toml_write_string(f, e->valuestring, strlen(e->valuestring));
        else if (cJSON_IsBool(e)) fputs(cJSON_IsTrue(e) ? "true" : "false", f);
        else if (fabs(e->valuedouble) < 9e18 && e->valuedouble == (double)(int64_t)e->valuedouble)
            fprintf(f, "%" PRId64, (int64_t)e->valuedouble);
        else write_float(f, e->valuedouble);
    }
    fputc('}', f);
    cJSON_Delete(o);
}

void zt_recipe_write_value(FILE *f, const zt_recipe *r, const zt_recipe_key *k)
{
    const void *p = (const char *)r + k->offset;
    switch (k->type) {
    case ZT_RECIPE_STRING:
    case ZT_RECIPE_ENUM: {
        const char *s = k->type == ZT_RECIPE_ENUM ? zt_recipe_enum_text(r, k) : *(char *const *)p;
        if (!s) s = "";
        zt_toml_write_string(f, s, strlen(s));
        break;
    }
    case ZT_RECIPE_LIST: {
        const zt_strlist *l = p;
        fputc('[', f);
        for (int i = 0; i < l->n; i++) {
            if (i) fputs(", ", f);
            size_t n = strlen(l->items[i]);
            if ((k->flags & ZT_RECIPE_INTS) && strspn(l->items[i], "0123456789") == n)
                fputs(l->items[i], f); /* a number */
            else zt_toml_write_string(f, l->items[i], n);
        }
        fputc(']', f);
        break;
    }
    case ZT_RECIPE_INT: fprintf(f, "%d", *(const int *)p); break;
    case ZT_RECIPE_INT64: fprintf(f, "%" PRId64, *(const int64_t *)p); break;
    case ZT_RECIPE_FLOAT: write_float(f, *(const double *)p); break;
    case ZT_RECIPE_BOOL: fputs(*(const bool *)p ? "true" : "false", f); break;
    case ZT_RECIPE_TABLE: write_table(f, *(char *const *)p); break;
    }
}

static void write_all(FILE *f, const zt_recipe *r)
{
    int n;
    const zt_recipe_key *s = zt_recipe_schema(&n);
    fputs("# The resolved recipe: every key with its final value (written by zt).\n", f);
    if (r->file) fprintf(f, "# From %s.\n", r->file);
    for (int i = 0; i < n; i++) {
        if (!i || strcmp(s[i].section, s[i - 1].section)) fprintf(f, "\n[%s]\n", s[i].section);
        fprintf(f, "%s = ", s[i].key);
        zt_recipe_write_value(f, r, &s[i]);
        fputc('\n', f);
    }
}

zt_status zt_recipe_resolved_text(const zt_recipe *r, char **text)
{
    size_t len;
    *text = NULL;
    FILE *f = open_memstream(text, &len);
    if (!f) return zt_fail(ZT_ENOMEM, "out of memory writing the resolved recipe");
    write_all(f, r);
    if (fclose(f)) {
        free(*text);
        *text = NULL;
        return zt_fail(ZT_ENOMEM, "out of memory writing the resolved recipe");
    }
    return ZT_OK;
}

zt_status zt_recipe_write_resolved(const zt_recipe *r, const char *path)
{
    zt_atomic_file a;
    zt_status st = zt_atomic_open(&a, path);
    if (st) return st;
    write_all(a.f, r);
    return zt_atomic_commit(&a);
}

uint64_t zt_recipe_data_hash(const zt_recipe *r)
{
    int n;
    const zt_recipe_key *s = zt_recipe_schema(&n);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ZT_ASSERT(f != NULL);
    for (int i = 0; i < n; i++) {
        if (!(s[i].flags & ZT_RECIPE_DATA)) continue;
        fprintf(f, "%s.%s=", s[i].section, s[i].key);
        zt_recipe_write_value(f, r, &s[i]);
        fputc('\n', f);
    }
    fclose(f);
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)text[i]) * 0x100000001b3ull;
    free(text);
    return h;
}
