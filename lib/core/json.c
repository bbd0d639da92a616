#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

/* The next number token in text at or after *at, skipping strings; its length in *n. */
static const char *next_number(const char *text, size_t len, size_t *at, size_t *n)
{
    size_t i = *at;
    while (i < len) {
        char c = text[i];
        if (c == '"') {
            for (i++; i < len && text[i] != '"'; i++)
                if (text[i] == '\\') i++;
            i++;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i;
            while (j < len && strchr("0123456789+-.eE", text[j])) j++;
            *at = j, *n = j - i;
            return text + i;
        } else {
            i++;
        }
    }
    return NULL;
}

/* cJSON builds nodes in document order, so a depth-first walk meets the numbers in the
 * order the text has them. */
static int annotate(cJSON *node, const char *text, size_t len, size_t *at)
{
    for (; node; node = node->next) {
        if (cJSON_IsNumber(node)) {
            size_t n = 0;
            const char *tok = next_number(text, len, at, &n);
            if (!tok || !(node->valuestring = malloc(n + 1))) return 0;
            memcpy(node->valuestring, tok, n);
            node->valuestring[n] = 0;
        }
        if (!annotate(node->child, text, len, at)) return 0;
    }
    return 1;
}

cJSON *zt_json_parse(const char *text, size_t len)
{
    cJSON *o = cJSON_ParseWithLength(text, len);
    size_t at = 0;
    if (o && !annotate(o, text, len, &at)) cJSON_Delete(o), o = NULL;
    return o;
}

zt_status zt_json_read(const char *path, cJSON **out)
{
    char *text;
    size_t len;
    zt_status st = zt_read_file(path, &text, &len);
    if (st) return st;
    *out = zt_json_parse(text, len);
    free(text);
    return *out ? ZT_OK : zt_fail(ZT_EUSER, "'%s': not valid JSON", path);
}

/* A number printed as its kept text is a raw node for the print, tagged with a bit that
 * cJSON's type switch ignores (it looks at the low 8 bits), so raw nodes that callers
 * made themselves are left alone. */
#define KEPT_NUMBER 0x1000

static void mark_kept(cJSON *node, int on)
{
    for (; node; node = node->next) {
        if (on && cJSON_IsNumber(node) && node->valuestring && strtod(node->valuestring, NULL) == node->valuedouble)
            node->type = cJSON_Raw | KEPT_NUMBER;
        else if (!on && (node->type & KEPT_NUMBER)) node->type = cJSON_Number;
        mark_kept(node->child, on);
    }
}

char *zt_json_print(cJSON *doc)
{
    mark_kept(doc, 1);
    char *text = cJSON_Print(doc);
    mark_kept(doc, 0);
    return text;
}

zt_status zt_json_write(const char *path, cJSON *doc)
{
    char *text = zt_json_print(doc);
    if (!text) return zt_fail(ZT_ENOMEM, "out of memory writing '%s'", path);
    size_t n = strlen(text);
    text[n] = '\n'; /* cJSON leaves room for the NUL: swap it for a newline */
    zt_status st = zt_write_file_atomic(path, text, n + 1);
    free(text);
    return st;
}

/* v as Python's repr writes a float (what transformers' JSON files hold): the fewest
 * digits that read back as v, positional between 1e-4 and 1e16 with at least ".0",
 * else in exponent form. */
static void float_text(char *out, size_t n, double v)
{
    int p = 1;
    while (p < 17) {
        snprintf(out, n, "%.*e", p - 1, v);
        if (strtod(out, NULL) == v) break;
        p++;
    }
    snprintf(out, n, "%.*e", p - 1, v);
    const char *e = strchr(out, 'e'); /* none for inf and nan */
    int exp = e ? atoi(e + 1) : 0;
    if (e && exp >= -4 && exp < 16) {
        snprintf(out, n, "%.*f", p - 1 - exp > 0 ? p - 1 - exp : 0, v);
        if (!strchr(out, '.')) strncat(out, ".0", n - strlen(out) - 1);
    }
}

cJSON *zt_json_add_float(cJSON *o, const char *key, double v)
{
    char text[48];
    float_text(text, sizeof text, v);
    cJSON *num = cJSON_AddNumberToObject(o, key, v);
    if (num) num->valuestring = strdup(text); /* NULL on OOM: printed as cJSON prints it */
    return num;
}
