/* toml: a TOML 1.0 parser (https://toml.io/en/v1.0.0) into a tree of nodes.
 *
 * It owns the whole document: every value type, tables, arrays of tables,
 * dotted and quoted keys, and the spec's rules on redefinition (a duplicate
 * key, a table defined twice, extending an inline table or a static array are
 * errors). The input must be valid UTF-8. Every node records the line and
 * column (1-based, columns count characters) where it was defined, and every
 * table entry where its key was written, so that callers can point at both.
 *
 *     char err[256];
 *     zt_toml *doc = zt_toml_parse(text, len, err, sizeof err);
 *     if (!doc) return zt_fail(ZT_EUSER, "%s:%s", path, err);   // err: "12:5: duplicate key 'x'"
 *     const zt_toml *lr = zt_toml_path(doc, "train.learning_rate");
 *     if (lr && lr->kind == ZT_TOML_FLOAT) use(lr->f);
 *     for (int i = 0; i < doc->n; i++) printf("%s\n", doc->items[i].key);  // file order
 *     zt_toml_free(doc);
 *
 * The parser has no global state, never reads past text + len and does not
 * need a terminating NUL. Nesting deeper than ZT_TOML_MAX_DEPTH is an error.
 * Where the spec leaves room: newlines in multi-line strings come out as "\n";
 * a float too large for a double is an error; seconds run to 59 (no leap
 * second); digits of a second past nanoseconds are dropped; a leading byte
 * order mark is skipped. Dotted keys may extend a table that a [header] only
 * created on the way (as in [a.b.c] then [a] b.d = 1), not one it defined.
 * Keys are looked up by a linear scan: fine for recipes, slow for tables with
 * many thousands of keys.
 */
#ifndef ZT_TOML_H
#define ZT_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ZT_TOML_MAX_DEPTH 256

typedef enum zt_toml_kind {
    ZT_TOML_TABLE,
    ZT_TOML_ARRAY,
    ZT_TOML_STRING,
    ZT_TOML_INT,
    ZT_TOML_FLOAT,
    ZT_TOML_BOOL,
    ZT_TOML_DATETIME,       /* offset date-time: 1979-05-27T07:32:00Z */
    ZT_TOML_LOCAL_DATETIME, /* 1979-05-27T07:32:00 */
    ZT_TOML_LOCAL_DATE,     /* 1979-05-27 */
    ZT_TOML_LOCAL_TIME,     /* 07:32:00 */
} zt_toml_kind;

/* The parts of a date-time value; fields a kind lacks are 0. */
typedef struct zt_toml_datetime {
    int year, month, day;
    int hour, minute, second;
    int nanosecond;     /* fraction of the second; digits past 9 are dropped */
    int offset_minutes; /* ZT_TOML_DATETIME only: offset from UTC (Z is 0) */
} zt_toml_datetime;

typedef struct zt_toml zt_toml;

/* One element of a table (key set) or an array (key NULL). */
typedef struct zt_toml_item {
    char *key; /* NUL-terminated; a quoted key may hold NUL bytes: keylen */
    size_t keylen;
    int line, col; /* where the key was written (last one of a dotted key) */
    zt_toml *value;
} zt_toml_item;

struct zt_toml {
    zt_toml_kind kind;
    int line, col; /* where the value starts; a table: its [header] or first key */
    char *str;     /* STRING: the decoded value; date-time kinds: the text as written */
    size_t len;    /* bytes in str (a string may hold NUL bytes); NUL-terminated too */
    int64_t i;     /* INT */
    double f;      /* FLOAT */
    bool b;        /* BOOL */
    zt_toml_datetime dt;
    int n; /* TABLE: entries, in file order; ARRAY: elements */
    zt_toml_item *items;
    /* parser bookkeeping */
    int cap, depth, dotted_section;
    unsigned flags;
};

/* Parses len bytes of text. Returns the root table, or NULL with
 * "LINE:COL: message" in err (errlen bytes, always NUL-terminated) when the
 * document is not valid TOML or memory ran out. */
zt_toml *zt_toml_parse(const char *text, size_t len, char *err, size_t errlen);
void zt_toml_free(zt_toml *doc);

/* The value of key in table t; NULL when t is not a table or has no such key. */
const zt_toml *zt_toml_get(const zt_toml *t, const char *key);
/* Follows a dotted path of bare keys ("offload.aio.block_size"); NULL when absent. */
const zt_toml *zt_toml_path(const zt_toml *t, const char *dotted);

/* "a string", "an integer", ...: for messages like "expected a number, got a string" */
const char *zt_toml_kind_name(zt_toml_kind kind);

/* Length of the longest valid UTF-8 prefix of s (== len when all of it is valid). */
size_t zt_toml_utf8_prefix(const char *s, size_t len);

/* Writes s as a TOML basic string, quotes included, escaping what must be escaped. */
void zt_toml_write_string(FILE *f, const char *s, size_t len);

#endif
