/* jinja parser: tokens into a syntax tree, following the grammar and the
 * operator precedence of Jinja2's parser (lowest first): x if c else y, or,
 * and, not, comparisons and in, + -, ~, * / // %, **, unary - +, then
 * postfix .attr [index] (call), filters | and tests "is". */
#include "jinja_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct parser {
    jx_err *e;
    jx_arena *a;
    const jx_tok *t;
    size_t i;
    int depth; /* recursion of the parser itself */
    int loops; /* enclosing for loops, for break and continue */
} parser;

typedef struct nvec {
    jx_node **v;
    uint32_t n, cap;
} nvec;

static jx_node *expression(parser *P);
static jx_node *or_expr(parser *P);
static jx_node *unary(parser *P, int with_filter);
static jx_node *primary(parser *P);
static jx_node *postfix(parser *P, jx_node *n);

static const jx_tok *cur(const parser *P) { return &P->t[P->i]; }
static const jx_tok *peek(const parser *P) { return P->t[P->i].kind == JT_EOF ? &P->t[P->i] : &P->t[P->i + 1]; }
static void next(parser *P)
{
    if (P->t[P->i].kind != JT_EOF) P->i++;
}

static int tok_is(const jx_tok *t, const char *name)
{
    return t->kind == JT_NAME && t->len == strlen(name) && !memcmp(t->text, name, t->len);
}
static int is_name(const parser *P, const char *name) { return tok_is(cur(P), name); }
static int is_op(const parser *P, jx_op op) { return cur(P)->kind == JT_OP && cur(P)->op == op; }

static const char *describe(const jx_tok *t, char *buf, size_t n)
{
    static const char *const ops[] = {
        [JO_ADD] = "+",    [JO_SUB] = "-",    [JO_DIV] = "/",    [JO_FDIV] = "//",    [JO_MUL] = "*",
        [JO_POW] = "**",   [JO_MOD] = "%",    [JO_TILDE] = "~",  [JO_LBRACKET] = "[", [JO_RBRACKET] = "]",
        [JO_LPAREN] = "(", [JO_RPAREN] = ")", [JO_LBRACE] = "{", [JO_RBRACE] = "}",   [JO_EQ] = "==",
        [JO_NE] = "!=",    [JO_GT] = ">",     [JO_GE] = ">=",    [JO_LT] = "<",       [JO_LE] = "<=",
        [JO_ASSIGN] = "=", [JO_DOT] = ".",    [JO_COLON] = ":",  [JO_PIPE] = "|",     [JO_COMMA] = ",",
        [JO_SEMI] = ";",
    };
    switch (t->kind) {
    case JT_DATA: return "template text";
    case JT_VAR_BEGIN: return "'{{'";
    case JT_VAR_END: return "'}}'";
    case JT_BLOCK_BEGIN: return "'{%'";
    case JT_BLOCK_END: return "'%}'";
    case JT_STRING: return "a string";
    case JT_INT:
    case JT_FLOAT: return "a number";
    case JT_EOF: return "the end of the template";
    case JT_NAME: snprintf(buf, n, "'%.*s'", (int)(t->len < 40 ? t->len : 40), t->text); return buf;
    case JT_OP: snprintf(buf, n, "'%s'", ops[t->op]); return buf;
    }
    return "?";
}

_Noreturn static void unexpected(parser *P, const char *wanted)
{
    char buf[64];
    const char *got = describe(cur(P), buf, sizeof buf);
    if (wanted) jx_fail(P->e, cur(P)->pos, "expected %s, got %s", wanted, got);
    jx_fail(P->e, cur(P)->pos, "unexpected %s", got);
}

static void expect_op(parser *P, jx_op op, const char *what)
{
    if (!is_op(P, op)) unexpected(P, what);
    next(P);
}

static void expect_kind(parser *P, jx_tok_kind kind, const char *what)
{
    if (cur(P)->kind != kind) unexpected(P, what);
    next(P);
}

static void enter(parser *P)
{
    if (++P->depth > ZT_JINJA_MAX_DEPTH)
        jx_fail(P->e, cur(P)->pos, "nesting deeper than %d levels", ZT_JINJA_MAX_DEPTH);
}

static jx_node *node(parser *P, jx_node_kind kind, uint32_t pos)
{
    jx_node *n = jx_alloc(P->e, P->a, sizeof *n, pos);
    n->kind = kind;
    n->pos = pos;
    return n;
}

/* Builds a node with up to three operands; the tree may not get deeper than the evaluator may recurse. */
static int depth_of(const jx_node *n) { return n ? n->flag >> 8 : 0; }
static jx_node *finish(parser *P, jx_node *n)
{
    int d = depth_of(n->a);
    if (depth_of(n->b) > d) d = depth_of(n->b);
    if (depth_of(n->c) > d) d = depth_of(n->c);
    for (uint32_t k = 0; k < n->n; k++)
        if (depth_of(n->v[k]) > d) d = depth_of(n->v[k]);
    for (uint32_t k = 0; k < n->m; k++)
        if (depth_of(n->w[k]) > d) d = depth_of(n->w[k]);
    if (d + 1 > 2 * ZT_JINJA_MAX_DEPTH)
        jx_fail(P->e, n->pos, "expression or block nested deeper than %d levels", 2 * ZT_JINJA_MAX_DEPTH);
    n->flag = (n->flag & 0xFF) | (d + 1) << 8;
    return n;
}

static jx_node *binary(parser *P, jx_node_kind kind, int op, uint32_t pos, jx_node *a, jx_node *b)
{
    jx_node *n = node(P, kind, pos);
    n->op = op, n->a = a, n->b = b;
    return finish(P, n);
}

static void push(parser *P, nvec *v, jx_node *n)
{
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? 2 * v->cap : 8;
        jx_node **p = jx_alloc(P->e, P->a, cap * sizeof *p, cur(P)->pos);
        if (v->n) memcpy(p, v->v, v->n * sizeof *p);
        v->v = p, v->cap = cap;
    }
    v->v[v->n++] = n;
}

static jx_str *str_of(parser *P, const char *s, size_t n, uint32_t pos)
{
    jx_str *str = jx_alloc(P->e, P->a, sizeof *str + n + 1, pos);
    memcpy(str->s, s, n);
    str->len = n;
    return str;
}

static jx_str *name_of(parser *P, const jx_tok *t) { return str_of(P, t->text, t->len, t->pos); }

/* --- expressions ------------------------------------------------------------------------------ */

/* (args, name=value, ...) after the '(' */
static void call_args(parser *P, jx_node *n)
{
    nvec args = {0}, kwvals = {0};
    jx_str **kwnames = NULL;
    uint32_t nkw = 0, capkw = 0;
    while (!is_op(P, JO_RPAREN)) {
        if (args.n + nkw) {
            expect_op(P, JO_COMMA, "',' or ')'");
            if (is_op(P, JO_RPAREN)) break;
        }
        if (cur(P)->kind == JT_NAME && peek(P)->kind == JT_OP && peek(P)->op == JO_ASSIGN) {
            if (nkw == capkw) {
                capkw = capkw ? 2 * capkw : 4;
                jx_str **p = jx_alloc(P->e, P->a, capkw * sizeof *p, cur(P)->pos);
                if (nkw) memcpy(p, kwnames, nkw * sizeof *p);
                kwnames = p;
            }
            kwnames[nkw++] = name_of(P, cur(P));
            next(P), next(P);
            push(P, &kwvals, expression(P));
        } else {
            if (nkw) jx_fail(P->e, cur(P)->pos, "positional argument after a keyword argument");
            push(P, &args, expression(P));
        }
    }
    next(P);
    n->v = args.v, n->n = args.n;
    n->w = kwvals.v, n->m = kwvals.n;
    n->names = kwnames, n->nnames = nkw;
}

static jx_node *subscript(parser *P, jx_node *obj, uint32_t pos)
{
    jx_node *parts[3] = {NULL, NULL, NULL};
    int slice = 0;
    if (!is_op(P, JO_COLON)) parts[0] = expression(P);
    if (is_op(P, JO_COLON)) {
        slice = 1;
        next(P);
        if (!is_op(P, JO_RBRACKET) && !is_op(P, JO_COLON)) parts[1] = expression(P);
        if (is_op(P, JO_COLON)) {
            next(P);
            if (!is_op(P, JO_RBRACKET)) parts[2] = expression(P);
        }
    }
    expect_op(P, JO_RBRACKET, "']'");
    if (!slice) return binary(P, JN_ITEM, 0, pos, obj, parts[0]);
    jx_node *n = node(P, JN_SLICE, pos);
    n->a = obj;
    n->v = jx_alloc(P->e, P->a, sizeof parts, pos);
    memcpy(n->v, parts, sizeof parts);
    n->n = 3;
    return finish(P, n);
}

static jx_node *postfix(parser *P, jx_node *n)
{
    for (;;) {
        uint32_t pos = cur(P)->pos;
        if (is_op(P, JO_DOT)) {
            next(P);
            if (cur(P)->kind == JT_NAME) {
                jx_node *a = node(P, JN_ATTR, pos);
                a->a = n;
                a->name = name_of(P, cur(P));
                n = finish(P, a);
            } else if (cur(P)->kind == JT_INT) {
                jx_node *k = node(P, JN_CONST, cur(P)->pos);
                k->val = jx_int(cur(P)->i);
                n = binary(P, JN_ITEM, 0, pos, n, finish(P, k));
            } else {
                unexpected(P, "an attribute name");
            }
            next(P);
        } else if (is_op(P, JO_LBRACKET)) {
            next(P);
            n = subscript(P, n, pos);
        } else if (is_op(P, JO_LPAREN)) {
            next(P);
            jx_node *c = node(P, JN_CALL, pos);
            c->a = n;
            call_args(P, c);
            n = finish(P, c);
        } else {
            return n;
        }
    }
}

/* name[(args)] after a '|' (or after {% filter): that filter applied to n */
static jx_node *filter_call(parser *P, jx_node *n, uint32_t pos)
{
    if (cur(P)->kind != JT_NAME) unexpected(P, "a filter name");
    jx_node *f = node(P, JN_FILTER, pos);
    f->a = n;
    f->name = name_of(P, cur(P));
    int id = jx_filter_find(cur(P)->text, cur(P)->len);
    f->op = id < 0 ? JX_UNKNOWN : id;
    next(P);
    if (is_op(P, JO_LPAREN)) next(P), call_args(P, f);
    return finish(P, f);
}

static jx_node *filter_expr(parser *P, jx_node *n)
{
    for (;;) {
        uint32_t pos = cur(P)->pos;
        if (is_op(P, JO_PIPE)) {
            next(P);
            n = filter_call(P, n, pos);
        } else if (is_name(P, "is")) {
            next(P);
            jx_node *t = node(P, JN_TEST, pos);
            t->a = n;
            if (is_name(P, "not")) t->flag = 1, next(P);
            if (cur(P)->kind != JT_NAME) unexpected(P, "a test name");
            t->name = name_of(P, cur(P));
            int id = jx_test_find(cur(P)->text, cur(P)->len);
            t->op = id < 0 ? JX_UNKNOWN : id;
            next(P);
            const jx_tok *k = cur(P);
            if (is_op(P, JO_LPAREN)) {
                next(P);
                call_args(P, t);
            } else if ((k->kind == JT_NAME || k->kind == JT_STRING || k->kind == JT_INT || k->kind == JT_FLOAT ||
                        (k->kind == JT_OP && (k->op == JO_LBRACKET || k->op == JO_LBRACE))) &&
                       !tok_is(k, "else") && !tok_is(k, "or") && !tok_is(k, "and")) {
                /* one argument without parentheses: "x is divisibleby 3" */
                if (tok_is(k, "is")) jx_fail(P->e, k->pos, "tests cannot be chained with 'is'");
                t->v = jx_alloc(P->e, P->a, sizeof *t->v, k->pos);
                t->v[0] = postfix(P, primary(P));
                t->n = 1;
            }
            n = finish(P, t);
        } else if (is_op(P, JO_LPAREN)) {
            next(P);
            jx_node *c = node(P, JN_CALL, pos);
            c->a = n;
            call_args(P, c);
            n = finish(P, c);
        } else {
            return n;
        }
    }
}

/* The items of a list, tuple or dict up to the closing bracket (already past the opening one). */
static void items(parser *P, jx_node *n, jx_op close, int dict)
{
    nvec keys = {0}, vals = {0};
    while (!is_op(P, close)) {
        if (keys.n) {
            expect_op(P, JO_COMMA,
                      close == JO_RBRACKET ? "',' or ']'"
                      : close == JO_RBRACE ? "',' or '}'"
                                           : "',' or ')'");
            if (is_op(P, close)) break;
        }
        push(P, &keys, expression(P));
        if (dict) {
            expect_op(P, JO_COLON, "':'");
            push(P, &vals, expression(P));
        }
    }
    next(P);
    n->v = keys.v, n->n = keys.n;
    n->w = vals.v, n->m = vals.n;
}

static jx_node *primary(parser *P)
{
    const jx_tok *t = cur(P);
    jx_node *n;
    switch (t->kind) {
    case JT_NAME:
        n = node(P, JN_CONST, t->pos);
        if (tok_is(t, "true") || tok_is(t, "True")) n->val = jx_bool(1);
        else if (tok_is(t, "false") || tok_is(t, "False")) n->val = jx_bool(0);
        else if (tok_is(t, "none") || tok_is(t, "None")) n->val = jx_none();
        else n->kind = JN_NAME, n->name = name_of(P, t);
        next(P);
        return finish(P, n);
    case JT_STRING: {
        n = node(P, JN_CONST, t->pos);
        jx_str *s = t->str;
        for (next(P); cur(P)->kind == JT_STRING; next(P)) { /* adjacent literals join */
            jx_str *b = cur(P)->str, *j = jx_alloc(P->e, P->a, sizeof *j + s->len + b->len + 1, t->pos);
            memcpy(j->s, s->s, s->len);
            memcpy(j->s + s->len, b->s, b->len);
            j->len = s->len + b->len;
            s = j;
        }
        n->val = jx_strv(s);
        return finish(P, n);
    }
    case JT_INT:
    case JT_FLOAT:
        n = node(P, JN_CONST, t->pos);
        n->val = t->kind == JT_INT ? jx_int(t->i) : jx_float(t->f);
        next(P);
        return finish(P, n);
    case JT_OP:
        if (t->op == JO_LPAREN) {
            next(P);
            if (is_op(P, JO_RPAREN)) {
                next(P);
                n = node(P, JN_LIST, t->pos);
                n->flag = 1;
                return finish(P, n);
            }
            jx_node *first = expression(P);
            if (is_op(P, JO_RPAREN)) {
                next(P);
                return first;
            }
            n = node(P, JN_LIST, t->pos);
            n->flag = 1;
            nvec v = {0};
            push(P, &v, first);
            while (is_op(P, JO_COMMA)) {
                next(P);
                if (is_op(P, JO_RPAREN)) break;
                push(P, &v, expression(P));
            }
            expect_op(P, JO_RPAREN, "')'");
            n->v = v.v, n->n = v.n;
            return finish(P, n);
        }
        if (t->op == JO_LBRACKET || t->op == JO_LBRACE) {
            next(P);
            n = node(P, t->op == JO_LBRACKET ? JN_LIST : JN_DICT, t->pos);
            items(P, n, t->op == JO_LBRACKET ? JO_RBRACKET : JO_RBRACE, t->op == JO_LBRACE);
            return finish(P, n);
        }
        break;
    default: break;
    }
    unexpected(P, NULL);
}

static jx_node *unary(parser *P, int with_filter)
{
    uint32_t pos = cur(P)->pos;
    jx_node *n;
    if (is_op(P, JO_SUB) || is_op(P, JO_ADD)) {
        jx_node_kind kind = is_op(P, JO_SUB) ? JN_NEG : JN_POS;
        next(P);
        enter(P);
        n = binary(P, kind, 0, pos, unary(P, 0), NULL);
        P->depth--;
    } else {
        n = primary(P);
    }
    n = postfix(P, n);
    return with_filter ? filter_expr(P, n) : n;
}

static jx_node *pow_expr(parser *P)
{
    jx_node *n = unary(P, 1);
    while (is_op(P, JO_POW)) {
        uint32_t pos = cur(P)->pos;
        next(P);
        n = binary(P, JN_BINARY, JO_POW, pos, n, unary(P, 1));
    }
    return n;
}

static jx_node *mul_expr(parser *P)
{
    jx_node *n = pow_expr(P);
    while (is_op(P, JO_MUL) || is_op(P, JO_DIV) || is_op(P, JO_FDIV) || is_op(P, JO_MOD)) {
        jx_op op = cur(P)->op;
        uint32_t pos = cur(P)->pos;
        next(P);
        n = binary(P, JN_BINARY, op, pos, n, pow_expr(P));
    }
    return n;
}

static jx_node *concat_expr(parser *P)
{
    jx_node *n = mul_expr(P);
    while (is_op(P, JO_TILDE)) {
        uint32_t pos = cur(P)->pos;
        next(P);
        n = binary(P, JN_BINARY, JO_TILDE, pos, n, mul_expr(P));
    }
    return n;
}

static jx_node *add_expr(parser *P)
{
    jx_node *n = concat_expr(P);
    while (is_op(P, JO_ADD) || is_op(P, JO_SUB)) {
        jx_op op = cur(P)->op;
        uint32_t pos = cur(P)->pos;
        next(P);
        n = binary(P, JN_BINARY, op, pos, n, concat_expr(P));
    }
    return n;
}

static jx_node *compare_expr(parser *P)
{
    uint32_t pos = cur(P)->pos;
    jx_node *first = add_expr(P);
    nvec operands = {0};
    uint8_t ops[256];
    for (;;) {
        jx_op op;
        const jx_tok *t = cur(P);
        if (t->kind == JT_OP && t->op >= JO_EQ && t->op <= JO_LE) op = t->op, next(P);
        else if (tok_is(t, "in")) op = JO_IN, next(P);
        else if (tok_is(t, "not") && tok_is(peek(P), "in")) op = JO_NOTIN, next(P), next(P);
        else break;
        if (operands.n == sizeof ops) jx_fail(P->e, t->pos, "too many chained comparisons");
        ops[operands.n] = (uint8_t)op;
        push(P, &operands, add_expr(P));
    }
    if (!operands.n) return first;
    jx_node *n = node(P, JN_COMPARE, pos);
    n->a = first;
    n->v = operands.v, n->n = operands.n;
    n->ops = jx_alloc(P->e, P->a, operands.n, pos);
    memcpy(n->ops, ops, operands.n);
    return finish(P, n);
}

static jx_node *not_expr(parser *P)
{
    if (!is_name(P, "not")) return compare_expr(P);
    uint32_t pos = cur(P)->pos;
    next(P);
    enter(P);
    jx_node *n = binary(P, JN_NOT, 0, pos, not_expr(P), NULL);
    P->depth--;
    return n;
}

/* a left-associative chain of one keyword operator: operand (word operand)* */
static jx_node *keyword_chain(parser *P, const char *word, jx_node_kind kind, jx_node *(*operand)(parser *))
{
    jx_node *n = operand(P);
    while (is_name(P, word)) {
        uint32_t pos = cur(P)->pos;
        next(P);
        n = binary(P, kind, 0, pos, n, operand(P));
    }
    return n;
}

static jx_node *and_expr(parser *P) { return keyword_chain(P, "and", JN_AND, not_expr); }
static jx_node *or_expr(parser *P) { return keyword_chain(P, "or", JN_OR, and_expr); }

static jx_node *expression(parser *P)
{
    enter(P);
    jx_node *n = or_expr(P);
    while (is_name(P, "if")) {
        jx_node *c = node(P, JN_COND, cur(P)->pos);
        next(P);
        c->a = n;
        c->b = or_expr(P);
        if (is_name(P, "else")) next(P), c->c = expression(P);
        n = finish(P, c);
    }
    P->depth--;
    return n;
}

/* --- statements ------------------------------------------------------------------------------- */

static int parse_body(parser *P, nvec *out, const char *const *ends, const jx_tok *opener);

/* A body up to one of ends; the end tag's name is consumed. */
static jx_node *block(parser *P, const char *const *ends, const jx_tok *opener, int *which)
{
    jx_node *b = node(P, JN_BLOCK, cur(P)->pos);
    nvec v = {0};
    enter(P);
    *which = parse_body(P, &v, ends, opener);
    P->depth--;
    b->v = v.v, b->n = v.n;
    return finish(P, b);
}

static jx_node *if_stmt(parser *P, const jx_tok *opener)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const endif[] = {"endif", NULL};
    jx_node *n = node(P, JN_IF, opener->pos);
    nvec conds = {0}, bodies = {0};
    for (;;) {
        push(P, &conds, or_expr(P));
        expect_kind(P, JT_BLOCK_END, "'%}'");
        int which;
        push(P, &bodies, block(P, ends, opener, &which));
        if (which == 0) continue;
        if (which == 1) {
            expect_kind(P, JT_BLOCK_END, "'%}'");
            n->c = block(P, endif, opener, &which);
        }
        break;
    }
    expect_kind(P, JT_BLOCK_END, "'%}'");
    n->v = conds.v, n->n = conds.n;
    n->w = bodies.v, n->m = bodies.n;
    return finish(P, n);
}

static jx_node *for_stmt(parser *P, const jx_tok *opener)
{
    static const char *const ends[] = {"else", "endfor", NULL};
    static const char *const endfor[] = {"endfor", NULL};
    jx_node *n = node(P, JN_FOR, opener->pos);
    jx_str *names[16];
    int paren = is_op(P, JO_LPAREN);
    if (paren) next(P);
    do {
        if (n->nnames && is_op(P, JO_COMMA)) next(P);
        if (cur(P)->kind != JT_NAME) unexpected(P, "a loop variable name");
        if (n->nnames == 16) jx_fail(P->e, cur(P)->pos, "too many loop variables");
        names[n->nnames++] = name_of(P, cur(P));
        next(P);
    } while (is_op(P, JO_COMMA));
    if (paren) expect_op(P, JO_RPAREN, "')'");
    n->names = jx_alloc(P->e, P->a, n->nnames * sizeof *names, opener->pos);
    memcpy(n->names, names, n->nnames * sizeof *names);
    if (!is_name(P, "in")) unexpected(P, "'in'");
    next(P);
    n->a = or_expr(P);
    if (is_name(P, "if")) next(P), n->b = expression(P);
    if (is_name(P, "recursive")) jx_fail(P->e, cur(P)->pos, "recursive loops are not supported");
    expect_kind(P, JT_BLOCK_END, "'%}'");
    P->loops++;
    int which;
    jx_node *body = block(P, ends, opener, &which);
    P->loops--;
    n->v = body->v, n->n = body->n;
    if (which == 0) {
        expect_kind(P, JT_BLOCK_END, "'%}'");
        n->c = block(P, endfor, opener, &which);
    }
    expect_kind(P, JT_BLOCK_END, "'%}'");
    return finish(P, n);
}

static jx_node *set_stmt(parser *P, const jx_tok *opener)
{
    static const char *const endset[] = {"endset", NULL};
    if (cur(P)->kind != JT_NAME) unexpected(P, "a variable name");
    jx_node *n = node(P, JN_SET, opener->pos);
    n->name = name_of(P, cur(P));
    next(P);
    if (is_op(P, JO_DOT)) {
        next(P);
        if (cur(P)->kind != JT_NAME) unexpected(P, "an attribute name");
        n->names = jx_alloc(P->e, P->a, sizeof *n->names, cur(P)->pos);
        n->names[0] = name_of(P, cur(P));
        n->nnames = 1;
        next(P);
    }
    if (is_op(P, JO_ASSIGN)) {
        next(P);
        uint32_t pos = cur(P)->pos;
        n->a = expression(P);
        if (is_op(P, JO_COMMA)) { /* set x = a, b makes a tuple */
            jx_node *t = node(P, JN_LIST, pos);
            t->flag = 1;
            nvec v = {0};
            push(P, &v, n->a);
            while (is_op(P, JO_COMMA)) {
                next(P);
                if (cur(P)->kind == JT_BLOCK_END) break;
                push(P, &v, expression(P));
            }
            t->v = v.v, t->n = v.n;
            n->a = finish(P, t);
        }
        expect_kind(P, JT_BLOCK_END, "'%}'");
        return finish(P, n);
    }
    if (n->nnames) unexpected(P, "'='");
    expect_kind(P, JT_BLOCK_END, "'=' or '%}'");
    n->kind = JN_SETBLOCK;
    int which;
    jx_node *body = block(P, endset, opener, &which);
    n->v = body->v, n->n = body->n;
    expect_kind(P, JT_BLOCK_END, "'%}'");
    return finish(P, n);
}

/* Whether the tree under n refers to the variable name (as a name, not an attribute). */
static int refers_to(const jx_node *n, const char *name)
{
    if (!n) return 0;
    if (n->kind == JN_NAME && !strcmp(n->name->s, name)) return 1;
    if (refers_to(n->a, name) || refers_to(n->b, name) || refers_to(n->c, name)) return 1;
    for (uint32_t k = 0; k < n->n; k++)
        if (refers_to(n->v[k], name)) return 1;
    for (uint32_t k = 0; k < n->m; k++)
        if (refers_to(n->w[k], name)) return 1;
    return 0;
}

/* (name[=default], ...) of a macro or a call block's caller; the '(' is the current token. */
static void macro_params(parser *P, jx_node *n)
{
    nvec defaults = {0};
    jx_str *names[64];
    expect_op(P, JO_LPAREN, "'('");
    while (!is_op(P, JO_RPAREN)) {
        if (n->nnames) expect_op(P, JO_COMMA, "',' or ')'");
        if (cur(P)->kind != JT_NAME) unexpected(P, "a parameter name");
        if (n->nnames == 64) jx_fail(P->e, cur(P)->pos, "too many macro parameters");
        for (uint32_t k = 0; k < n->nnames; k++)
            if (names[k]->len == cur(P)->len && !memcmp(names[k]->s, cur(P)->text, cur(P)->len))
                jx_fail(P->e, cur(P)->pos, "duplicate parameter '%s'", names[k]->s);
        names[n->nnames++] = name_of(P, cur(P));
        next(P);
        jx_node *def = NULL;
        if (is_op(P, JO_ASSIGN)) next(P), def = expression(P);
        else if (defaults.n && defaults.v[defaults.n - 1])
            jx_fail(P->e, cur(P)->pos, "parameter without a default follows one with a default");
        push(P, &defaults, def);
    }
    next(P);
    n->names = jx_alloc(P->e, P->a, (n->nnames + 1) * sizeof *names, n->pos);
    memcpy(n->names, names, n->nnames * sizeof *names);
    n->w = defaults.v, n->m = defaults.n;
}

/* The body of a macro up to its end tag, which may not break out of loops around the macro. */
static void macro_body(parser *P, jx_node *n, const char *end, const jx_tok *opener)
{
    const char *const ends[] = {end, NULL};
    int loops = P->loops, which;
    P->loops = 0;
    jx_node *body = block(P, ends, opener, &which);
    P->loops = loops;
    expect_kind(P, JT_BLOCK_END, "'%}'");
    n->v = body->v, n->n = body->n;
    static const char *const special[] = {"caller", "varargs", "kwargs"};
    for (int k = 0; k < 3; k++) {
        int uses = 0;
        for (uint32_t j = 0; j < n->n && !uses; j++) uses = refers_to(n->v[j], special[k]);
        for (uint32_t j = 0; j < n->m && !uses; j++) uses = refers_to(n->w[j], special[k]);
        if (uses) n->flag |= 1 << k;
    }
}

static jx_node *macro_stmt(parser *P, const jx_tok *opener)
{
    if (cur(P)->kind != JT_NAME) unexpected(P, "a macro name");
    jx_node *n = node(P, JN_MACRO, opener->pos);
    n->name = name_of(P, cur(P));
    next(P);
    macro_params(P, n);
    expect_kind(P, JT_BLOCK_END, "'%}'");
    macro_body(P, n, "endmacro", opener);
    return finish(P, n);
}

/* {% call[(params)] m(args) %}body{% endcall %}: m is called with caller, a macro whose body is the block's */
static jx_node *call_stmt(parser *P, const jx_tok *opener)
{
    jx_node *n = node(P, JN_CALLBLOCK, opener->pos);
    jx_node *caller = node(P, JN_MACRO, opener->pos);
    if (is_op(P, JO_LPAREN)) macro_params(P, caller);
    n->a = expression(P);
    if (n->a->kind != JN_CALL) jx_fail(P->e, n->a->pos, "a call block needs a call, as in {%% call m() %%}");
    expect_kind(P, JT_BLOCK_END, "'%}'");
    macro_body(P, caller, "endcall", opener);
    n->b = finish(P, caller);
    return finish(P, n);
}

/* {% filter f(args) | g %}body{% endfilter %}: the body's text through the filters */
static jx_node *filter_stmt(parser *P, const jx_tok *opener)
{
    static const char *const endfilter[] = {"endfilter", NULL};
    jx_node *n = node(P, JN_FILTERBLOCK, opener->pos);
    jx_node *f = filter_call(P, finish(P, node(P, JN_CAPTURED, opener->pos)), cur(P)->pos);
    while (is_op(P, JO_PIPE)) {
        uint32_t pos = cur(P)->pos;
        next(P);
        f = filter_call(P, f, pos);
    }
    n->a = f;
    expect_kind(P, JT_BLOCK_END, "'%}'");
    int which;
    jx_node *body = block(P, endfilter, opener, &which);
    expect_kind(P, JT_BLOCK_END, "'%}'");
    n->v = body->v, n->n = body->n;
    return finish(P, n);
}

/* Statements into out until EOF (ends NULL) or a tag named in ends: returns its index. */
static int parse_body(parser *P, nvec *out, const char *const *ends, const jx_tok *opener)
{
    static const char *const endgen[] = {"endgeneration", NULL};
    for (;;) {
        const jx_tok *t = cur(P);
        switch (t->kind) {
        case JT_EOF:
            if (ends) {
                char buf[64];
                int last = 0;
                while (ends[last + 1]) last++;
                jx_fail(P->e, opener->pos, "%s is never closed (expected '%s')", describe(opener + 1, buf, sizeof buf),
                        ends[last]);
            }
            return -1;
        case JT_DATA: {
            jx_node *n = node(P, JN_TEXT, t->pos);
            n->name = str_of(P, t->text, t->len, t->pos);
            push(P, out, finish(P, n));
            next(P);
            break;
        }
        case JT_VAR_BEGIN: {
            next(P);
            jx_node *n = node(P, JN_OUTPUT, t->pos);
            n->a = expression(P);
            expect_kind(P, JT_VAR_END, "'}}'");
            push(P, out, finish(P, n));
            break;
        }
        case JT_BLOCK_BEGIN: {
            next(P);
            const jx_tok *kw = cur(P);
            if (kw->kind != JT_NAME) unexpected(P, "a tag name");
            for (int k = 0; ends && ends[k]; k++)
                if (tok_is(kw, ends[k])) return next(P), k;
            next(P);
            if (tok_is(kw, "if")) {
                push(P, out, if_stmt(P, t));
            } else if (tok_is(kw, "for")) {
                push(P, out, for_stmt(P, t));
            } else if (tok_is(kw, "set")) {
                push(P, out, set_stmt(P, t));
            } else if (tok_is(kw, "macro")) {
                push(P, out, macro_stmt(P, t));
            } else if (tok_is(kw, "call")) {
                push(P, out, call_stmt(P, t));
            } else if (tok_is(kw, "filter")) {
                push(P, out, filter_stmt(P, t));
            } else if (tok_is(kw, "break") || tok_is(kw, "continue")) {
                if (!P->loops) jx_fail(P->e, kw->pos, "'%.*s' outside of a loop", (int)kw->len, kw->text);
                push(P, out, finish(P, node(P, tok_is(kw, "break") ? JN_BREAK : JN_CONTINUE, t->pos)));
                expect_kind(P, JT_BLOCK_END, "'%}'");
            } else if (tok_is(kw, "generation")) { /* transformers' marker for assistant text: a call block */
                expect_kind(P, JT_BLOCK_END, "'%}'");
                int which, loops = P->loops;
                P->loops = 0;
                jx_node *b = block(P, endgen, t, &which);
                P->loops = loops;
                expect_kind(P, JT_BLOCK_END, "'%}'");
                b->kind = JN_SCOPE;
                push(P, out, b);
            } else {
                char buf[64];
                jx_fail(P->e, kw->pos, "unknown or misplaced tag %s", describe(kw, buf, sizeof buf));
            }
            break;
        }
        default: unexpected(P, NULL);
        }
    }
}

jx_node *jx_parse(jx_err *e, jx_arena *a, const jx_tok *toks)
{
    parser P = {.e = e, .a = a, .t = toks};
    int which;
    return block(&P, NULL, NULL, &which);
}
