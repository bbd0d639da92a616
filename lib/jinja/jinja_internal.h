/* jinja internals, shared by jinja*.c: the arena, values, tokens, the
 * syntax tree and the evaluation context.
 *
 * Memory: the syntax tree lives in the template's arena, every value made
 * during a render in that render's arena; both are freed at once. Errors
 * unwind with longjmp to the entry point (zt_jinja_parse or zt_jinja_render),
 * which owns every allocation, so an error never leaks and no function below
 * needs an error path of its own.
 */
#ifndef ZT_JINJA_INTERNAL_H
#define ZT_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja.h"

/* --- arena ------------------------------------------------------------------------------------ */

typedef struct jx_chunk jx_chunk;
typedef struct jx_arena {
    jx_chunk *head;
    size_t total; /* bytes allocated from malloc */
    size_t cap;   /* bound on total */
    int over_cap; /* the last failure was the cap, not malloc */
} jx_arena;

/* Zeroed, 16-byte aligned; NULL when malloc fails or the cap would be passed. */
void *jx_arena_alloc(jx_arena *a, size_t n);
void jx_arena_free(jx_arena *a);

/* --- errors ----------------------------------------------------------------------------------- */

typedef struct jx_err {
    jmp_buf jmp;
    const char *name; /* template name for messages */
    const char *src;  /* normalized source, for line:col */
    size_t len;
} jx_err;

/* Sets "NAME:LINE:COL: message" (pos is a byte offset into src) and unwinds with ZT_EUSER. */
_Noreturn void jx_fail(jx_err *e, uint32_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* An allocation failed: over the arena's cap (ZT_EUSER) or out of memory (ZT_ENOMEM). */
_Noreturn void jx_oom(jx_err *e, const jx_arena *a, uint32_t pos);
void *jx_alloc(jx_err *e, jx_arena *a, size_t n, uint32_t pos); /* never NULL */

/* --- UTF-8 and Python's notion of whitespace -------------------------------------------------- */

/* Decodes one code point at s[0..n) (n >= 1); an invalid byte decodes as itself, length 1. */
int jx_utf8_next(const char *s, size_t n, uint32_t *cp);
/* Start of the code point that ends at s[n-1]. */
size_t jx_utf8_prev(const char *s, size_t n);
int jx_isspace(uint32_t cp);                     /* str.isspace() / re's \s */
size_t jx_space_prefix(const char *s, size_t n); /* bytes of leading whitespace */
size_t jx_space_suffix(const char *s, size_t n); /* bytes of trailing whitespace */
size_t jx_utf8_count(const char *s, size_t n);   /* code points */
int jx_utf8_put(char *out, uint32_t cp);         /* bytes written (1..4) */

/* --- values ----------------------------------------------------------------------------------- */

typedef struct jx_str {
    size_t len;
    char s[]; /* NUL-terminated as well */
} jx_str;

typedef enum jx_kind {
    JX_MISSING, /* an argument that was not passed (only between a call and its callee) */
    JX_UNDEF,
    JX_NONE,
    JX_BOOL,
    JX_INT,
    JX_FLOAT,
    JX_STR,
    JX_LIST, /* lists and tuples */
    JX_DICT,
    JX_NS, /* namespace(): a mutable dict with attribute syntax */
    JX_LOOP,
    JX_FUNC,   /* a global function */
    JX_METHOD, /* a method bound to a value */
    JX_MACRO,  /* a {% macro %}, or the caller of a {% call %} block */
} jx_kind;

typedef struct jx_list jx_list;
typedef struct jx_dict jx_dict;
typedef struct jx_loop jx_loop;
typedef struct jx_method jx_method;
typedef struct jx_node jx_node;
typedef struct jx_macro jx_macro;

typedef struct jx_val {
    jx_kind kind;
    int markup; /* STR: markupsafe's Markup (the safe filter's result), whose + escapes a plain operand */
    union {
        int64_t i; /* BOOL (0/1), INT, FUNC (a JX_FN_*) */
        double f;
        jx_str *s;
        jx_list *l;
        jx_dict *d; /* DICT, NS */
        jx_loop *loop;
        jx_method *m;
        const jx_macro *mac;
        const jx_node *node; /* UNDEF: where it came from, for messages (may be NULL) */
    };
} jx_val;

struct jx_list {
    size_t n;
    int tuple;
    int generator; /* what map, select and the like give in Jinja: one pass, no len(), no index, always true */
    jx_val v[];
};

struct jx_dict {
    size_t n, cap;
    jx_val *keys, *vals;
};

struct jx_loop {
    size_t index0;
    jx_list *items;
};

struct jx_method {
    jx_val self;
    int id; /* a JX_M_* */
};

typedef struct jx_frame jx_frame;

struct jx_macro {
    const jx_node *def; /* its JN_MACRO node */
    jx_frame *scope;    /* where it was defined: what its body sees besides its arguments */
};

enum { JX_FN_RANGE, JX_FN_NAMESPACE, JX_FN_DICT, JX_FN_RAISE, JX_FN_STRFTIME, JX_FN_COUNT };
/* packed by kind */
/* clang-format off */
enum {
    JX_M_STRIP, JX_M_LSTRIP, JX_M_RSTRIP, JX_M_SPLIT, JX_M_STARTSWITH, JX_M_ENDSWITH, JX_M_UPPER, JX_M_LOWER,
    JX_M_TITLE, JX_M_CAPITALIZE, JX_M_REPLACE, JX_M_FIND, JX_M_JOIN, /* str */
    JX_M_ITEMS, JX_M_KEYS, JX_M_VALUES, JX_M_GET, /* dict */
    JX_M_CYCLE, /* loop */
    JX_M_COUNT
};
/* clang-format on */

static inline jx_val jx_undef(const jx_node *n) { return (jx_val){.kind = JX_UNDEF, .node = n}; }
static inline jx_val jx_none(void) { return (jx_val){.kind = JX_NONE}; }
static inline jx_val jx_bool(int b) { return (jx_val){.kind = JX_BOOL, .i = b != 0}; }
static inline jx_val jx_int(int64_t i) { return (jx_val){.kind = JX_INT, .i = i}; }
static inline jx_val jx_float(double f) { return (jx_val){.kind = JX_FLOAT, .f = f}; }
static inline jx_val jx_strv(jx_str *s) { return (jx_val){.kind = JX_STR, .s = s}; }
static inline jx_val jx_listv(jx_list *l) { return (jx_val){.kind = JX_LIST, .l = l}; }

/* --- tokens ----------------------------------------------------------------------------------- */

/* packed by kind */
/* clang-format off */
typedef enum jx_tok_kind {
    JT_DATA, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END,
    JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP, JT_EOF,
} jx_tok_kind;

typedef enum jx_op {
    JO_NONE, JO_ADD, JO_SUB, JO_DIV, JO_FDIV, JO_MUL, JO_POW, JO_MOD, JO_TILDE,
    JO_LBRACKET, JO_RBRACKET, JO_LPAREN, JO_RPAREN, JO_LBRACE, JO_RBRACE,
    JO_EQ, JO_NE, JO_GT, JO_GE, JO_LT, JO_LE, JO_ASSIGN, JO_DOT, JO_COLON, JO_PIPE, JO_COMMA, JO_SEMI,
    JO_IN, JO_NOTIN, /* comparison operators spelled with names */
} jx_op;
/* clang-format on */

typedef struct jx_tok {
    jx_tok_kind kind;
    jx_op op;
    uint32_t pos;     /* byte offset into the normalized source */
    uint32_t len;     /* DATA, NAME: bytes of text */
    const char *text; /* DATA, NAME: into the source */
    jx_str *str;      /* STRING: decoded */
    int64_t i;
    double f;
} jx_tok;

/* Splits normalized source into tokens, applying whitespace control; ends with JT_EOF. */
jx_tok *jx_lex(jx_err *e, jx_arena *a, const char *src, size_t len);

/* --- syntax tree ------------------------------------------------------------------------------ */

/* packed by kind */
/* clang-format off */
typedef enum jx_node_kind {
    /* statements */
    JN_BLOCK,   /* v[n]: statements */
    JN_TEXT,    /* name: the text */
    JN_OUTPUT,  /* a: expression */
    JN_IF,      /* v[n]: conditions, w[n]: JN_BLOCK bodies, c: else JN_BLOCK or NULL */
    JN_FOR,     /* names[nnames]: targets, a: iterable, b: filter or NULL, c: else JN_BLOCK or NULL, v[n]: body */
    JN_SET,     /* name: variable, names[0] (nnames 1): attribute for ns.attr, a: value */
    JN_SETBLOCK,/* name: variable, v[n]: body */
    JN_BREAK,
    JN_CONTINUE,
    JN_MACRO,   /* name (NULL for a call block's caller), names[nnames]: parameters, w[m == nnames]: their
                   defaults (NULL entries: none), v[n]: body; flag: MACRO_USES_* */
    JN_CALLBLOCK,  /* a: the call expression, b: the caller (JN_MACRO) */
    JN_FILTERBLOCK,/* v[n]: body, a: the filters, applied to a JN_CAPTURED */
    JN_SCOPE,   /* v[n]: body, run in a scope of its own ({% generation %}, which is a call block) */
    /* expressions */
    JN_CONST,   /* val */
    JN_LIST,    /* v[n]; flag: a tuple */
    JN_DICT,    /* v[n]: keys, w[n]: values */
    JN_NAME,    /* name */
    JN_ATTR,    /* a.name */
    JN_ITEM,    /* a[b] */
    JN_SLICE,   /* a[v[0]:v[1]:v[2]], entries may be NULL */
    JN_CALL,    /* a(v[n], names[i] = w[i]) */
    JN_FILTER,  /* a | name(v[n], names[i] = w[i]); op: filter id (JX_UNKNOWN when none) */
    JN_TEST,    /* a is [not] name(v[n], names[i] = w[i]); op: test id; flag: negated */
    JN_NOT, JN_NEG, JN_POS,   /* a */
    JN_BINARY,  /* a op b, op: JO_ADD..JO_TILDE */
    JN_AND, JN_OR,            /* a, b */
    JN_COMPARE, /* a ops[0] v[0] ops[1] v[1] ... */
    JN_COND,    /* a if b else c (c may be NULL) */
    JN_CAPTURED,/* the text the enclosing {% filter %} block rendered */
} jx_node_kind;
/* clang-format on */

#define JX_UNKNOWN 255

/* What a macro's body refers to, which decides what it accepts (as Jinja decides it). */
enum { MACRO_USES_CALLER = 1, MACRO_USES_VARARGS = 2, MACRO_USES_KWARGS = 4 };

struct jx_node {
    jx_node_kind kind;
    int op, flag;
    uint32_t pos;
    jx_str *name;
    jx_node *a, *b, *c;
    jx_node **v, **w;
    uint32_t n, m; /* entries in v, w */
    jx_str **names;
    uint32_t nnames;
    uint8_t *ops;
    jx_val val;
};

/* Parses tokens into the template's top-level block. */
jx_node *jx_parse(jx_err *e, jx_arena *a, const jx_tok *toks);

struct zt_jinja {
    jx_arena arena;
    char *name;
    char *src; /* normalized: \r\n and \r become \n, one trailing newline dropped */
    size_t len;
    jx_node *body;
};

/* --- evaluation ------------------------------------------------------------------------------- */

typedef struct jx_ctx {
    jx_err err;
    jx_arena arena;
    jx_frame *top;     /* innermost scope: a loop iteration, or the template's globals */
    jx_str *loop_name; /* "loop" */
    char *out;         /* malloc'ed rendered text */
    size_t outlen, outcap, max_output;
    int64_t steps, max_steps;
    int calls;       /* macro calls under way, bounded by ZT_JINJA_MAX_DEPTH */
    jx_val captured; /* what JN_CAPTURED gives: the innermost filter block's text */
} jx_ctx;

/* Arguments of a filter, test, method or function call. */
typedef struct jx_args {
    const jx_val *pos;
    int npos;
    jx_str *const *kwnames;
    const jx_val *kwvals;
    int nkw;
} jx_args;

/* A string builder inside the render's arena. */
typedef struct jx_buf {
    jx_ctx *c;
    uint32_t pos; /* for errors */
    char *p;
    size_t n, cap;
} jx_buf;

void jx_buf_put(jx_buf *b, const char *s, size_t n);
void jx_buf_putc(jx_buf *b, char ch);
void jx_buf_puts(jx_buf *b, const char *s);
jx_str *jx_buf_str(jx_buf *b);

jx_str *jx_str_new(jx_ctx *c, uint32_t pos, const char *s, size_t n);
jx_str *jx_str_cat(jx_ctx *c, uint32_t pos, const jx_str *a, const jx_str *b);
jx_list *jx_list_new(jx_ctx *c, uint32_t pos, size_t n);
jx_dict *jx_dict_new(jx_ctx *c, uint32_t pos);
void jx_dict_set(jx_ctx *c, uint32_t pos, jx_dict *d, jx_val key, jx_val val);
const jx_val *jx_dict_get(const jx_dict *d, const char *key, size_t n); /* string keys */
const jx_val *jx_dict_find(const jx_dict *d, jx_val key);

const char *jx_type_name(jx_val v);
int jx_truthy(jx_val v);
int jx_equal(jx_ctx *c, uint32_t pos, jx_val a, jx_val b, int depth);
/* a op b for op in JO_LT, JO_LE, JO_GT, JO_GE, as Python orders numbers, strings and lists */
int jx_order(jx_ctx *c, uint32_t pos, jx_op op, jx_val a, jx_val b, int depth);
void jx_put_str(jx_buf *b, jx_val v, int depth);  /* Python str() */
void jx_put_repr(jx_buf *b, jx_val v, int depth); /* Python repr() */
jx_str *jx_to_str(jx_ctx *c, uint32_t pos, jx_val v);
void jx_fmt_float(double f, char out[32]); /* Python repr of a float */
typedef struct jx_json_opts {              /* json.dumps's arguments */
    const jx_str *indent;                  /* NULL: no newlines */
    int sort_keys, ensure_ascii;
    const jx_str *item_sep, *key_sep; /* NULL: Python's defaults */
} jx_json_opts;
void jx_put_json(jx_buf *b, jx_val v, const jx_json_opts *o, int level);
_Noreturn void jx_fail_undefined(jx_ctx *c, uint32_t pos, jx_val v);

/* The items of an iterable (a dict's keys, a string's characters); undefined iterates as empty. */
jx_list *jx_iterate(jx_ctx *c, uint32_t pos, jx_val v);
/* obj.name and obj[key] as Jinja looks them up (a miss is undefined); strings index by code point. */
jx_val jx_getattr(jx_ctx *c, uint32_t pos, jx_val obj, const char *name, size_t n, const jx_node *node);
jx_val jx_getitem(jx_ctx *c, uint32_t pos, jx_val obj, jx_val key, const jx_node *node);
jx_val jx_slice(jx_ctx *c, uint32_t pos, jx_val obj, const jx_val *start, const jx_val *stop, const jx_val *step);

/* Builtins (jinja_builtins.c): ids by name, or -1. */
int jx_filter_find(const char *name, size_t n);
int jx_test_find(const char *name, size_t n);
int jx_global_find(const char *name, size_t n);
jx_val jx_filter_call(jx_ctx *c, uint32_t pos, int id, jx_val v, const jx_args *a);
int jx_test_call(jx_ctx *c, uint32_t pos, int id, jx_val v, const jx_args *a);
jx_val jx_call(jx_ctx *c, uint32_t pos, jx_val fn, const jx_args *a);
int jx_contains(jx_ctx *c, uint32_t pos, jx_val seq, jx_val x); /* x in seq */
int jx_method_find(jx_val self, const char *name, size_t n);    /* a JX_M_* or -1 */

#endif
