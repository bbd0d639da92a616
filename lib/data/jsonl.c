#include "jsonl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/core/log.h"
#include "lib/core/utf8.h"

const char *zt_json_kind(const cJSON *v)
{
    if (!v) return "missing";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* A key that an object in v holds twice, else NULL (*oom on running out of memory). JSON
 * readers disagree on which value such a key has: Python's keeps the last, cJSON the first. */
static const char *duplicate_key(const cJSON *v, int *oom)
{
    size_t n = 0;
    for (const cJSON *c = v->child; c; c = c->next, n++) {
        const char *d = c->child ? duplicate_key(c, oom) : NULL;
        if (d || *oom) return d;
    }
    if (!cJSON_IsObject(v) || n < 2) return NULL;
    const cJSON *few[16], **keys = n <= 16 ? few : malloc(n * sizeof *keys);
    if (!keys) return *oom = 1, NULL;
    n = 0;
    for (const cJSON *c = v->child; c; c = c->next) keys[n++] = c;
    qsort(keys, n, sizeof *keys, by_name);
    const char *d = NULL;
    for (size_t i = 1; i < n && !d; i++)
        if (!strcmp(keys[i - 1]->string, keys[i]->string)) d = keys[i]->string;
    if (keys != few) free(keys);
    return d;
}

zt_status zt_jsonl_parse(const char *line, size_t len, cJSON **obj)
{
    *obj = NULL;
    if (strlen(line) != len) return zt_fail(ZT_EUSER, "not JSON: the line contains a NUL byte");
    size_t ok = zt_utf8_valid_len(line, len);
    if (ok < len)
        return zt_fail(ZT_EUSER, "not UTF-8 text: byte 0x%02X at column %zu", (unsigned char)line[ok], ok + 1);
    /* a C string ends at U+0000: a string holding one would lose the rest of its text */
    for (size_t i = 0; i + 1 < len; i++)
        if (line[i] == '\\' && line[++i] == 'u' && len - i > 4 && !memcmp(line + i + 1, "0000", 4))
            return zt_fail(ZT_EUSER, "a string holds \"\\u0000\" (U+0000) at column %zu, which zt's text cannot hold",
                           i);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(line, &end, 1);
    if (!root) return zt_fail(ZT_EUSER, "not JSON (parse error at column %td)", end ? end - line + 1 : 1);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return zt_fail(ZT_EUSER, "the line is %s, not a JSON object", zt_json_kind(root));
    }
    int oom = 0;
    const char *dup = duplicate_key(root, &oom);
    if (oom || dup) {
        zt_status st = oom ? zt_fail(ZT_ENOMEM, "out of memory checking a line's keys")
                           : zt_fail(ZT_EUSER,
                                     "key \"%.80s\" appears twice in one object (JSON readers differ on "
                                     "which value counts)",
                                     dup);
        cJSON_Delete(root);
        return st;
    }
    *obj = root;
    return ZT_OK;
}

static int is_blank(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    return *p == 0;
}

static zt_status push_line(zt_jsonl_lines *l, const char *text, size_t len, int file, long lineno)
{
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 1024;
        char **t = realloc(l->text, (size_t)cap * sizeof *t);
        if (t) l->text = t;
        size_t *n = t ? realloc(l->len, (size_t)cap * sizeof *n) : NULL;
        if (n) l->len = n;
        int *f = n ? realloc(l->file, (size_t)cap * sizeof *f) : NULL;
        if (f) l->file = f;
        long *ln = f ? realloc(l->lineno, (size_t)cap * sizeof *ln) : NULL;
        if (!ln) return zt_fail(ZT_ENOMEM, "out of memory reading the data");
        l->lineno = ln, l->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return zt_fail(ZT_ENOMEM, "out of memory reading the data");
    memcpy(copy, text, len + 1);
    l->text[l->n] = copy, l->len[l->n] = len, l->file[l->n] = file, l->lineno[l->n] = lineno;
    l->n++;
    return ZT_OK;
}

zt_status zt_jsonl_open(zt_jsonl_lines *l, char *const *paths, int npaths)
{
    memset(l, 0, sizeof *l);
    if (npaths == 0) return zt_fail(ZT_EUSER, "no data files given");
    l->paths = paths, l->npaths = npaths;
    return ZT_OK;
}

static void clear_batch(zt_jsonl_lines *l)
{
    for (int64_t i = 0; i < l->n; i++) free(l->text[i]);
    l->n = 0;
}

/* How an open file is read: line by line, or as a JSON array expecting its first element (or its
 * end), a next one, or past its end. */
enum { LINES, ARRAY_FIRST, ARRAY_NEXT, ARRAY_DONE };

static int is_space(int c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* A file whose first byte past a byte order mark and whitespace is '[' is a JSON array of
 * examples, read from past the '['; any other is read line by line from that byte on (put back:
 * the file need not be seekable, --input may be a pipe). */
static zt_status detect_array(zt_jsonl_lines *l, FILE *f)
{
    int c = getc(f);
    if (c == 0xEF && (getc(f) != 0xBB || getc(f) != 0xBF)) /* not a byte order mark: no JSON starts so */
        return zt_fail(ZT_EUSER, "%s:1: not JSON (parse error at column 1)", l->paths[l->at]);
    if (c == 0xEF) c = getc(f);
    long lines = 0;
    for (; c != EOF && is_space(c); c = getc(f)) lines += c == '\n';
    l->array = c == '[' ? ARRAY_FIRST : LINES, l->line = lines;
    if (c != '[' && c != EOF) ungetc(c, f);
    return ZT_OK;
}

/* opens the next file when none is open; 0 at the end */
static zt_status next_file(zt_jsonl_lines *l, int *more)
{
    *more = 0;
    if (l->fp) return *more = 1, ZT_OK;
    if (l->at == l->npaths) return ZT_OK;
    const char *path = l->paths[l->at];
    FILE *f = fopen(path, "rb");
    if (!f) return zt_fail(ZT_EUSER, "'%s': cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return zt_fail(ZT_EUSER, "'%s': is a directory, not a JSONL file", path);
    }
    zt_status st = detect_array(l, f);
    if (st) {
        fclose(f);
        return st;
    }
    l->fp = f;
    return *more = 1, ZT_OK;
}

static zt_status end_file(zt_jsonl_lines *l)
{
    FILE *f = l->fp;
    zt_status st = ferror(f) ? zt_fail(ZT_EIO, "'%s': read error after line %ld", l->paths[l->at], l->line) : ZT_OK;
    fclose(f);
    l->fp = NULL, l->at++;
    return st;
}

/* The next line of a JSONL file into the batch (none when blank); the file is closed at its end. */
static zt_status next_line(zt_jsonl_lines *l, char **line, size_t *cap)
{
    ssize_t len = getline(line, cap, l->fp);
    if (len < 0) return end_file(l);
    char *p = *line;
    l->line++;
    while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r')) p[--len] = 0;
    return is_blank(p) ? ZT_OK : push_line(l, p, (size_t)len, l->at, l->line);
}

/* The open file's next byte past whitespace (lines counted). */
static int skip_space(zt_jsonl_lines *l)
{
    int c;
    while ((c = getc(l->fp)) != EOF && is_space(c)) l->line += c == '\n';
    return c;
}

/* The next element of a JSON array file into the batch, with the line it starts on: its text up to
 * the ',' or ']' that ends it outside strings and brackets. Past the array's end only whitespace
 * may follow; the file is closed there. */
static zt_status next_element(zt_jsonl_lines *l, char **buf, size_t *cap)
{
    FILE *f = l->fp;
    const char *path = l->paths[l->at];
    int c = skip_space(l);
    if (l->array == ARRAY_FIRST && c == ']') { /* an empty array */
        l->array = ARRAY_DONE;
        c = skip_space(l);
    }
    if (l->array == ARRAY_DONE)
        return c == EOF ? end_file(l)
                        : zt_fail(ZT_EUSER, "%s:%ld: text after the end of the JSON array", path, l->line + 1);
    long first = l->line + 1;
    size_t n = 0;
    int depth = 0, in_string = 0, escaped = 0;
    for (; c != EOF; c = getc(f)) {
        if (in_string) {
            if (escaped) escaped = 0;
            else if (c == '\\') escaped = 1;
            else if (c == '"') in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        } else if (depth == 0 && (c == ',' || c == ']')) {
            break;
        }
        l->line += c == '\n';
        if (n + 2 > *cap) {
            size_t grown = *cap ? 2 * *cap : 4096;
            char *b = realloc(*buf, grown);
            if (!b) return zt_fail(ZT_ENOMEM, "out of memory reading '%s'", path);
            *buf = b, *cap = grown;
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF) {
        if (ferror(f)) return end_file(l);
        return zt_fail(ZT_EUSER, "%s:%ld: the JSON array that the file starts with is not closed", path, first);
    }
    while (n > 0 && is_space((unsigned char)(*buf)[n - 1])) n--;
    if (n == 0) return zt_fail(ZT_EUSER, "%s:%ld: an empty element in the JSON array (a comma too many?)", path, first);
    (*buf)[n] = 0;
    l->array = c == ']' ? ARRAY_DONE : ARRAY_NEXT;
    return push_line(l, *buf, n, l->at, first);
}

zt_status zt_jsonl_next(zt_jsonl_lines *l, int64_t max)
{
    clear_batch(l);
    char *line = NULL;
    size_t cap = 0;
    zt_status st = ZT_OK;
    int more;
    while (!st && l->n < max && !(st = next_file(l, &more)) && more)
        st = l->array == LINES ? next_line(l, &line, &cap) : next_element(l, &line, &cap);
    free(line);
    return st;
}

void zt_jsonl_close(zt_jsonl_lines *l)
{
    clear_batch(l);
    if (l->fp) fclose(l->fp);
    free(l->text);
    free(l->len);
    free(l->file);
    free(l->lineno);
    memset(l, 0, sizeof *l);
}

zt_status zt_jsonl_skip(zt_status st, int skip_bad, int64_t *skipped)
{
    if (st != ZT_EUSER || !skip_bad) return st;
    if (*skipped < 10) zt_log_warn("skipping a bad line: %s", zt_errmsg());
    ++*skipped;
    return ZT_OK;
}

zt_status zt_jsonl_load(char *const *paths, int npaths, int skip_bad, zt_jsonl_fn fn, void *ctx, int64_t *skipped)
{
    *skipped = 0;
    zt_jsonl_lines l;
    zt_status st = zt_jsonl_open(&l, paths, npaths);
    while (!st && !(st = zt_jsonl_next(&l, 4096)) && l.n > 0) {
        for (int64_t i = 0; i < l.n && !st; i++) {
            cJSON *o;
            if (!(st = zt_jsonl_parse(l.text[i], l.len[i], &o))) st = fn(ctx, o);
            cJSON_Delete(o);
            if (st) st = zt_jsonl_skip(zt_fail_context(st, "%s:%ld", paths[l.file[i]], l.lineno[i]), skip_bad, skipped);
        }
    }
    zt_jsonl_close(&l);
    return st;
}

zt_status zt_jsonl_no_examples(char *const *paths, int npaths, int64_t skipped)
{
    if (npaths == 0) return zt_fail(ZT_EUSER, "no data files given");
    char names[512];
    size_t n = 0;
    for (int i = 0; i < npaths && n < sizeof names; i++)
        n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", paths[i]);
    if (skipped)
        return zt_fail(ZT_EUSER, "the data files (%s) hold no examples: %lld bad line(s) skipped (data.skip_bad_lines)",
                       names, (long long)skipped);
    return zt_fail(ZT_EUSER, "the data files (%s) hold no examples", names);
}
