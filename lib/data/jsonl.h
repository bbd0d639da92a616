/* data/jsonl: streaming JSONL files line by line into a callback that turns each
 * object into examples. A bad line is a ZT_EUSER error naming "path:line: what";
 * with skip_bad the line is counted and skipped instead (data.skip_bad_lines).
 *
 *     static zt_status one(void *ctx, const cJSON *obj) { ... return zt_fail(ZT_EUSER, "missing \"text\""); }
 *     int64_t skipped;
 *     st = zt_jsonl_load(paths, npaths, 0, one, &ctx, &skipped);
 */
#ifndef ZT_DATA_JSONL_H
#define ZT_DATA_JSONL_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "lib/core/status.h"

/* One line's object; fn may change it (it is freed after). */
typedef zt_status (*zt_jsonl_fn)(void *ctx, cJSON *obj);

/* The non-blank lines of the files, in order, a batch at a time (memory stays
 * bounded), for callers that work on a batch's lines in parallel; zt_jsonl_parse
 * turns one line into an object (or a ZT_EUSER message). A file whose first byte
 * past a byte order mark and whitespace is '[' is a JSON array of examples
 * (alpaca_data.json, ShareGPT dumps, what datasets' "json" loader takes): each
 * element is a "line", numbered by the line it starts on. */
typedef struct zt_jsonl_lines {
    char **text; /* NUL-terminated, without the newline */
    size_t *len;
    int *file;    /* index into the paths */
    long *lineno; /* 1-based */
    int64_t n, cap;
    /* where reading stands */
    char *const *paths;
    int npaths, at;
    void *fp;
    long line;
    int array; /* how the open file is read: line by line, or as a JSON array (jsonl.c) */
} zt_jsonl_lines;

zt_status zt_jsonl_open(zt_jsonl_lines *l, char *const *paths, int npaths);
/* Replaces the batch with the next up to max lines; l->n == 0 at the end. */
zt_status zt_jsonl_next(zt_jsonl_lines *l, int64_t max);
void zt_jsonl_close(zt_jsonl_lines *l);
zt_status zt_jsonl_parse(const char *text, size_t len, cJSON **obj);
/* After a line's error (message already naming path:line): with skip_bad a ZT_EUSER
 * is counted in *skipped (the first ten logged) and ZT_OK returned; else st. */
zt_status zt_jsonl_skip(zt_status st, int skip_bad, int64_t *skipped);

zt_status zt_jsonl_load(char *const *paths, int npaths, int skip_bad, zt_jsonl_fn fn, void *ctx, int64_t *skipped);
/* The error for data files that gave no example: names the files (and the bad lines
 * data.skip_bad_lines skipped, when there were any). */
zt_status zt_jsonl_no_examples(char *const *paths, int npaths, int64_t skipped);

/* "a string", "an array", ... for messages about a JSON value of the wrong kind */
const char *zt_json_kind(const cJSON *v);

#endif
