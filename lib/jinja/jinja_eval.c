/* jinja evaluator: runs the syntax tree against the variables, with
 * Jinja's scoping (each loop iteration is a fresh scope over the enclosing
 * one; "set" writes the innermost scope; if-blocks are not scopes) and
 * Python's arithmetic. */
#include "jinja_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct jx_frame {
    jx_frame *up;
    jx_str **names;
    jx_val *vals;
    size_t n, cap;
};

enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

static jx_val eval(jx_ctx *c, const jx_node *n);
static int exec_block(jx_ctx *c, jx_node *const *v, uint32_t n);
static void out_put(jx_ctx *c, uint32_t pos, const char *s, size_t n);

static void step(jx_ctx *c, uint32_t pos)
{
    if (++c->steps > c->max_steps)
        jx_fail(&c->err, pos, "the template ran for more than %lld steps", (long long)c->max_steps);
}

static _Noreturn void no_memory(jx_ctx *c)
{
    zt_fail(ZT_ENOMEM, "%s: out of memory", c->err.name);
    longjmp(c->err.jmp, ZT_ENOMEM);
}

static void out_put(jx_ctx *c, uint32_t pos, const char *s, size_t n)
{
    if (n > c->max_output - c->outlen)
        jx_fail(&c->err, pos, "the rendered text would be longer than %zu bytes", c->max_output);
    if (c->outcap - c->outlen <= n) {
        size_t cap = c->outcap ? c->outcap : 256;
        while (cap - c->outlen <= n) cap *= 2;
        char *p = realloc(c->out, cap);
        if (!p) no_memory(c);
        c->out = p, c->outcap = cap;
    }
    if (n) memcpy(c->out + c->outlen, s, n);
    c->outlen += n;
    c->out[c->outlen] = 0;
}

/* --- scopes ----------------------------------------------------------------------------------- */

static const jx_val *lookup(const jx_ctx *c, const char *name, size_t n)
{
    for (const jx_frame *f = c->top; f; f = f->up)
        for (size_t k = f->n; k-- > 0;)
            if (f->names[k]->len == n && !memcmp(f->names[k]->s, name, n)) return &f->vals[k];
    return NULL;
}

static void frame_set(jx_ctx *c, uint32_t pos, jx_frame *f, jx_str *name, jx_val v)
{
    for (size_t k = 0; k < f->n; k++)
        if (f->names[k]->len == name->len && !memcmp(f->names[k]->s, name->s, name->len)) {
            f->vals[k] = v;
            return;
        }
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 8;
        jx_str **names = jx_alloc(&c->err, &c->arena, cap * sizeof *names, pos);
        jx_val *vals = jx_alloc(&c->err, &c->arena, cap * sizeof *vals, pos);
        if (f->n) {
            memcpy(names, f->names, f->n * sizeof *names);
            memcpy(vals, f->vals, f->n * sizeof *vals);
        }
        f->names = names, f->vals = vals, f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n++] = v;
}

/* --- arithmetic ------------------------------------------------------------------------------- */

static _Noreturn void overflow(jx_ctx *c, uint32_t pos) { jx_fail(&c->err, pos, "integer overflow"); }

static const char *op_symbol(int op)
{
    switch (op) {
    case JO_ADD: return "+";
    case JO_SUB: return "-";
    case JO_MUL: return "*";
    case JO_DIV: return "/";
    case JO_FDIV: return "//";
    case JO_MOD: return "%";
    default: return "**";
    }
}

static jx_val repeat(jx_ctx *c, uint32_t pos, jx_val seq, int64_t times)
{
    size_t unit = seq.kind == JX_STR ? seq.s->len : seq.l->n, n = times > 0 ? (size_t)times : 0;
    if (unit && n > ((size_t)1 << 40) / unit) jx_oom(&c->err, &c->arena, pos);
    if (seq.kind == JX_STR) {
        jx_str *s = jx_alloc(&c->err, &c->arena, sizeof *s + unit * n + 1, pos);
        s->len = unit * n;
        for (size_t k = 0; k < n; k++) memcpy(s->s + k * unit, seq.s->s, unit);
        return jx_strv(s);
    }
    jx_list *l = jx_list_new(c, pos, unit * n);
    l->tuple = seq.l->tuple;
    for (size_t k = 0; k < n; k++) memcpy(l->v + k * unit, seq.l->v, unit * sizeof(jx_val));
    return jx_listv(l);
}

static jx_val int_arith(jx_ctx *c, uint32_t pos, int op, int64_t a, int64_t b)
{
    int64_t r;
    switch (op) {
    case JO_ADD:
        if (__builtin_add_overflow(a, b, &r)) overflow(c, pos);
        return jx_int(r);
    case JO_SUB:
        if (__builtin_sub_overflow(a, b, &r)) overflow(c, pos);
        return jx_int(r);
    case JO_MUL:
        if (__builtin_mul_overflow(a, b, &r)) overflow(c, pos);
        return jx_int(r);
    case JO_DIV:
        if (!b) jx_fail(&c->err, pos, "division by zero");
        return jx_float((double)a / (double)b);
    case JO_FDIV:
    case JO_MOD: {
        if (!b) jx_fail(&c->err, pos, "integer division or modulo by zero");
        if (b == -1) {
            if (op == JO_MOD) return jx_int(0);
            if (a == INT64_MIN) overflow(c, pos);
            return jx_int(-a);
        }
        int64_t q = a / b, m = a % b;
        if (m && (m < 0) != (b < 0)) q--, m += b;
        return jx_int(op == JO_FDIV ? q : m);
    }
    default: /* JO_POW */
        if (b < 0) return jx_float(pow((double)a, (double)b));
        r = 1;
        for (int64_t base = a; b; b >>= 1) {
            if ((b & 1) && __builtin_mul_overflow(r, base, &r)) overflow(c, pos);
            if (b > 1 && __builtin_mul_overflow(base, base, &base)) overflow(c, pos);
        }
        return jx_int(r);
    }
}

static jx_val float_arith(jx_ctx *c, uint32_t pos, int op, double a, double b)
{
    switch (op) {
    case JO_ADD: return jx_float(a + b);
    case JO_SUB: return jx_float(a - b);
    case JO_MUL: return jx_float(a * b);
    case JO_DIV:
        if (b == 0) jx_fail(&c->err, pos, "float division by zero");
        return jx_float(a / b);
    case JO_FDIV:
    case JO_MOD: { /* as CPython's float_divmod */
        if (b == 0) jx_fail(&c->err, pos, "float modulo by zero");
        double mod = fmod(a, b), div = (a - mod) / b;
        if (mod) {
            if ((b < 0) != (mod < 0)) mod += b, div -= 1.0;
        } else {
            mod = copysign(0.0, b);
        }
        if (op == JO_MOD) return jx_float(mod);
        double fl = div ? floor(div) : copysign(0.0, a / b);
        if (div && div - fl > 0.5) fl += 1.0;
        return jx_float(fl);
    }
    default:
        if (a == 0 && b < 0) jx_fail(&c->err, pos, "0.0 cannot be raised to a negative power");
        if (a < 0 && b != floor(b))
            jx_fail(&c->err, pos, "a negative number to a fractional power is not a real number");
        return jx_float(pow(a, b));
    }
}

static int is_num(jx_val v) { return v.kind == JX_INT || v.kind == JX_BOOL || v.kind == JX_FLOAT; }
static int is_int(jx_val v) { return v.kind == JX_INT || v.kind == JX_BOOL; }

/* markupsafe's escape(): & < > " ' as entities */
static jx_str *html_escape(jx_ctx *c, uint32_t pos, const jx_str *s)
{
    jx_buf b = {.c = c, .pos = pos};
    for (size_t i = 0; i < s->len; i++) {
        const char *e = NULL;
        switch (s->s[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '"': e = "&#34;"; break;
        case '\'': e = "&#39;"; break;
        }
        if (e) jx_buf_puts(&b, e);
        else jx_buf_putc(&b, s->s[i]);
    }
    return jx_buf_str(&b);
}

static jx_val arith(jx_ctx *c, uint32_t pos, int op, jx_val a, jx_val b)
{
    if (op == JO_TILDE) return jx_strv(jx_str_cat(c, pos, jx_to_str(c, pos, a), jx_to_str(c, pos, b)));
    if (a.kind == JX_UNDEF || a.kind == JX_MISSING) jx_fail_undefined(c, pos, a);
    if (b.kind == JX_UNDEF || b.kind == JX_MISSING) jx_fail_undefined(c, pos, b);
    if (is_int(a) && is_int(b)) return int_arith(c, pos, op, a.i, b.i);
    if (is_num(a) && is_num(b))
        return float_arith(c, pos, op, a.kind == JX_FLOAT ? a.f : (double)a.i, b.kind == JX_FLOAT ? b.f : (double)b.i);
    if (op == JO_ADD && a.kind == JX_STR && b.kind == JX_STR) {
        if (!a.markup && !b.markup) return jx_strv(jx_str_cat(c, pos, a.s, b.s));
        jx_str *x = a.markup ? a.s : html_escape(c, pos, a.s), *y = b.markup ? b.s : html_escape(c, pos, b.s);
        jx_val m = jx_strv(jx_str_cat(c, pos, x, y)); /* Markup + str escapes the str */
        m.markup = 1;
        return m;
    }
    if (op == JO_ADD && a.kind == JX_LIST && b.kind == JX_LIST && a.l->tuple == b.l->tuple) {
        jx_list *l = jx_list_new(c, pos, a.l->n + b.l->n);
        l->tuple = a.l->tuple;
        memcpy(l->v, a.l->v, a.l->n * sizeof(jx_val));
        memcpy(l->v + a.l->n, b.l->v, b.l->n * sizeof(jx_val));
        return jx_listv(l);
    }
    if (op == JO_MUL && (a.kind == JX_STR || a.kind == JX_LIST) && is_int(b)) return repeat(c, pos, a, b.i);
    if (op == JO_MUL && (b.kind == JX_STR || b.kind == JX_LIST) && is_int(a)) return repeat(c, pos, b, a.i);
    jx_fail(&c->err, pos, "unsupported operand types for %s: '%s' and '%s'", op_symbol(op), jx_type_name(a),
            jx_type_name(b));
}

/* --- macros ---------------------------------------------------------------------------------- */

/* Runs body in frame f (over its scope) and returns what it wrote, which goes nowhere else. */
static jx_str *capture(jx_ctx *c, uint32_t pos, jx_frame *f, jx_node *const *body, uint32_t n, int *flow)
{
    size_t mark = c->outlen;
    jx_frame *saved = c->top;
    if (f) c->top = f;
    int fl = exec_block(c, body, n);
    c->top = saved;
    if (flow) *flow = fl;
    jx_str *s = jx_str_new(c, pos, c->out ? c->out + mark : "", c->outlen - mark);
    c->outlen = mark;
    if (c->out) c->out[mark] = 0;
    return s;
}

static int same_name(const jx_str *a, const jx_str *b) { return a->len == b->len && !memcmp(a->s, b->s, a->len); }

static const char *macro_name(const jx_macro *m) { return m->def->name ? m->def->name->s : "caller"; }

/* Calls a macro as Jinja does: arguments by position, then by name; a missing one takes its
 * default (evaluated in the macro's frame, so it may use the parameters before it) or is
 * undefined; extra ones go to varargs and kwargs when the body uses those, else are errors.
 * caller is the {% call %} block's body, or NULL. The result is the text the body wrote. */
static jx_val call_macro(jx_ctx *c, uint32_t pos, const jx_macro *m, const jx_args *a, const jx_macro *caller)
{
    const jx_node *d = m->def;
    if (++c->calls > ZT_JINJA_MAX_DEPTH) jx_fail(&c->err, pos, "macro calls nested deeper than %d", ZT_JINJA_MAX_DEPTH);
    jx_frame *f = jx_alloc(&c->err, &c->arena, sizeof *f, pos);
    f->up = m->scope;
    jx_val *vals = jx_alloc(&c->err, &c->arena, (d->nnames + 1) * sizeof *vals, pos);
    int npos = a->npos < (int)d->nnames ? a->npos : (int)d->nnames;
    for (uint32_t k = 0; k < d->nnames; k++) vals[k] = (int)k < npos ? a->pos[k] : (jx_val){.kind = JX_MISSING};
    jx_list *varargs = jx_list_new(c, pos, (size_t)(a->npos - npos));
    varargs->tuple = 1;
    for (int k = npos; k < a->npos; k++) varargs->v[k - npos] = a->pos[k];
    if (varargs->n && !(d->flag & MACRO_USES_VARARGS))
        jx_fail(&c->err, pos, "macro '%s' takes not more than %u argument(s)", macro_name(m), d->nnames);
    jx_dict *kwargs = jx_dict_new(c, pos);
    jx_val caller_val = caller ? (jx_val){.kind = JX_MACRO, .mac = caller} : jx_undef(NULL);
    for (int k = 0; k < a->nkw; k++) {
        const jx_str *name = a->kwnames[k];
        uint32_t p = 0;
        while (p < d->nnames && !same_name(d->names[p], name)) p++;
        if (p < d->nnames) {
            if (vals[p].kind != JX_MISSING)
                jx_fail(&c->err, pos, "macro '%s' got multiple values for argument '%s'", macro_name(m), name->s);
            vals[p] = a->kwvals[k];
        } else if (!strcmp(name->s, "caller") && (d->flag & MACRO_USES_CALLER)) {
            caller_val = a->kwvals[k];
        } else if (d->flag & MACRO_USES_KWARGS) {
            jx_dict_set(c, pos, kwargs, jx_strv((jx_str *)name), a->kwvals[k]);
        } else {
            jx_fail(&c->err, pos, "macro '%s' takes no keyword argument '%s'", macro_name(m), name->s);
        }
    }
    for (uint32_t k = 0; k < d->nnames; k++) {
        jx_frame *saved = c->top;
        c->top = f;
        jx_val v = vals[k].kind != JX_MISSING ? vals[k] : d->w[k] ? eval(c, d->w[k]) : jx_undef(NULL);
        c->top = saved;
        frame_set(c, pos, f, d->names[k], v);
    }
    if (d->flag & MACRO_USES_VARARGS) frame_set(c, pos, f, jx_str_new(c, pos, "varargs", 7), jx_listv(varargs));
    if (d->flag & MACRO_USES_KWARGS)
        frame_set(c, pos, f, jx_str_new(c, pos, "kwargs", 6), (jx_val){.kind = JX_DICT, .d = kwargs});
    if (d->flag & MACRO_USES_CALLER) frame_set(c, pos, f, jx_str_new(c, pos, "caller", 6), caller_val);
    jx_str *s = capture(c, pos, f, d->v, d->n, NULL);
    c->calls--;
    return jx_strv(s);
}

static jx_macro *new_macro(jx_ctx *c, const jx_node *def)
{
    jx_macro *m = jx_alloc(&c->err, &c->arena, sizeof *m, def->pos);
    m->def = def, m->scope = c->top;
    return m;
}

/* --- expressions ------------------------------------------------------------------------------ */

static jx_args eval_args(jx_ctx *c, const jx_node *n)
{
    jx_args a = {.npos = (int)n->n, .nkw = (int)n->m, .kwnames = n->names};
    if (n->n + n->m) {
        jx_val *v = jx_alloc(&c->err, &c->arena, (n->n + n->m) * sizeof *v, n->pos);
        for (uint32_t k = 0; k < n->n; k++) v[k] = eval(c, n->v[k]);
        for (uint32_t k = 0; k < n->m; k++) v[n->n + k] = eval(c, n->w[k]);
        a.pos = v, a.kwvals = v + n->n;
    }
    return a;
}

static jx_val eval_compare(jx_ctx *c, const jx_node *n)
{
    jx_val left = eval(c, n->a);
    for (uint32_t k = 0; k < n->n; k++) {
        jx_val right = eval(c, n->v[k]);
        int ok;
        switch (n->ops[k]) {
        case JO_EQ: ok = jx_equal(c, n->pos, left, right, ZT_JINJA_MAX_DEPTH); break;
        case JO_NE: ok = !jx_equal(c, n->pos, left, right, ZT_JINJA_MAX_DEPTH); break;
        case JO_IN: ok = jx_contains(c, n->pos, right, left); break;
        case JO_NOTIN: ok = !jx_contains(c, n->pos, right, left); break;
        default: ok = jx_order(c, n->pos, (jx_op)n->ops[k], left, right, ZT_JINJA_MAX_DEPTH); break;
        }
        if (!ok) return jx_bool(0);
        left = right;
    }
    return jx_bool(1);
}

static jx_val eval(jx_ctx *c, const jx_node *n)
{
    step(c, n->pos);
    switch (n->kind) {
    case JN_CONST: return n->val;
    case JN_LIST: {
        jx_list *l = jx_list_new(c, n->pos, n->n);
        l->tuple = n->flag & 1;
        for (uint32_t k = 0; k < n->n; k++) l->v[k] = eval(c, n->v[k]);
        return jx_listv(l);
    }
    case JN_DICT: {
        jx_dict *d = jx_dict_new(c, n->pos);
        for (uint32_t k = 0; k < n->n; k++) {
            jx_val key = eval(c, n->v[k]);
            jx_dict_set(c, n->pos, d, key, eval(c, n->w[k]));
        }
        return (jx_val){.kind = JX_DICT, .d = d};
    }
    case JN_NAME: {
        const jx_val *v = lookup(c, n->name->s, n->name->len);
        if (v) return *v;
        int fn = jx_global_find(n->name->s, n->name->len);
        return fn >= 0 ? (jx_val){.kind = JX_FUNC, .i = fn} : jx_undef(n);
    }
    case JN_ATTR: return jx_getattr(c, n->pos, eval(c, n->a), n->name->s, n->name->len, n);
    case JN_ITEM: {
        jx_val obj = eval(c, n->a);
        return jx_getitem(c, n->pos, obj, eval(c, n->b), n);
    }
    case JN_SLICE: {
        jx_val obj = eval(c, n->a), parts[3];
        for (int k = 0; k < 3; k++) parts[k] = n->v[k] ? eval(c, n->v[k]) : (jx_val){.kind = JX_MISSING};
        return jx_slice(c, n->pos, obj, &parts[0], &parts[1], &parts[2]);
    }
    case JN_CALL: {
        jx_val fn = eval(c, n->a);
        jx_args a = eval_args(c, n);
        return fn.kind == JX_MACRO ? call_macro(c, n->pos, fn.mac, &a, NULL) : jx_call(c, n->pos, fn, &a);
    }
    case JN_CAPTURED: return c->captured;
    case JN_FILTER: {
        if (n->op == JX_UNKNOWN) jx_fail(&c->err, n->pos, "unknown filter '%s'", n->name->s);
        jx_val v = eval(c, n->a);
        jx_args a = eval_args(c, n);
        return jx_filter_call(c, n->pos, n->op, v, &a);
    }
    case JN_TEST: {
        if (n->op == JX_UNKNOWN) jx_fail(&c->err, n->pos, "unknown test '%s'", n->name->s);
        jx_val v = eval(c, n->a);
        jx_args a = eval_args(c, n);
        return jx_bool(jx_test_call(c, n->pos, n->op, v, &a) != (n->flag & 1));
    }
    case JN_NOT: return jx_bool(!jx_truthy(eval(c, n->a)));
    case JN_NEG:
    case JN_POS: {
        jx_val v = eval(c, n->a);
        if (v.kind == JX_FLOAT) return jx_float(n->kind == JN_NEG ? -v.f : v.f);
        if (!is_int(v)) {
            if (v.kind == JX_UNDEF) jx_fail_undefined(c, n->pos, v);
            jx_fail(&c->err, n->pos, "bad operand type for unary %c: '%s'", n->kind == JN_NEG ? '-' : '+',
                    jx_type_name(v));
        }
        if (n->kind == JN_NEG && v.i == INT64_MIN) overflow(c, n->pos);
        return jx_int(n->kind == JN_NEG ? -v.i : v.i);
    }
    case JN_BINARY: {
        jx_val a = eval(c, n->a);
        return arith(c, n->pos, n->op, a, eval(c, n->b));
    }
    case JN_AND: {
        jx_val a = eval(c, n->a);
        return jx_truthy(a) ? eval(c, n->b) : a;
    }
    case JN_OR: {
        jx_val a = eval(c, n->a);
        return jx_truthy(a) ? a : eval(c, n->b);
    }
    case JN_COMPARE: return eval_compare(c, n);
    case JN_COND:
        if (jx_truthy(eval(c, n->b))) return eval(c, n->a);
        return n->c ? eval(c, n->c) : jx_undef(n);
    default: jx_fail(&c->err, n->pos, "not an expression");
    }
}

/* --- statements ------------------------------------------------------------------------------- */

static void bind_targets(jx_ctx *c, const jx_node *n, jx_val item)
{
    if (n->nnames == 1) {
        frame_set(c, n->pos, c->top, n->names[0], item);
        return;
    }
    jx_list *parts = jx_iterate(c, n->pos, item);
    if (parts->n != n->nnames)
        jx_fail(&c->err, n->pos, "cannot unpack %zu values into %u loop variables", parts->n, n->nnames);
    for (uint32_t k = 0; k < n->nnames; k++) frame_set(c, n->pos, c->top, n->names[k], parts->v[k]);
}

static int exec_for(jx_ctx *c, const jx_node *n)
{
    jx_list *items = jx_iterate(c, n->pos, eval(c, n->a));
    /* one scope per iteration, reusing its storage; in the arena, as a macro defined in the loop keeps it */
    jx_frame *f = jx_alloc(&c->err, &c->arena, sizeof *f, n->pos);
    f->up = c->top;
    if (n->b) { /* for x in xs if cond: the loop sees only the items that pass */
        jx_list *kept = jx_list_new(c, n->pos, items->n);
        size_t nk = 0;
        for (size_t k = 0; k < items->n; k++) {
            f->n = 0;
            c->top = f;
            bind_targets(c, n, items->v[k]);
            int keep = jx_truthy(eval(c, n->b));
            c->top = f->up;
            if (keep) kept->v[nk++] = items->v[k];
        }
        kept->n = nk;
        items = kept;
    }
    if (!items->n) return n->c ? exec_block(c, n->c->v, n->c->n) : FLOW_NEXT;
    jx_loop *L = jx_alloc(&c->err, &c->arena, sizeof *L, n->pos);
    L->items = items;
    for (size_t k = 0; k < items->n; k++) {
        step(c, n->pos);
        L->index0 = k;
        f->n = 0;
        c->top = f;
        bind_targets(c, n, items->v[k]);
        frame_set(c, n->pos, f, c->loop_name, (jx_val){.kind = JX_LOOP, .loop = L});
        int flow = exec_block(c, n->v, n->n);
        c->top = f->up;
        if (flow == FLOW_BREAK) break;
    }
    return FLOW_NEXT;
}

/* {{ v }}: its str(), nothing for undefined */
static void put_value(jx_ctx *c, uint32_t pos, jx_val v)
{
    if (v.kind == JX_STR) out_put(c, pos, v.s->s, v.s->len);
    else if (v.kind != JX_UNDEF) {
        jx_str *s = jx_to_str(c, pos, v);
        out_put(c, pos, s->s, s->len);
    }
}

static int exec(jx_ctx *c, const jx_node *n)
{
    step(c, n->pos);
    switch (n->kind) {
    case JN_TEXT: out_put(c, n->pos, n->name->s, n->name->len); return FLOW_NEXT;
    case JN_OUTPUT: put_value(c, n->pos, eval(c, n->a)); return FLOW_NEXT;
    case JN_IF:
        for (uint32_t k = 0; k < n->n; k++)
            if (jx_truthy(eval(c, n->v[k]))) return exec_block(c, n->w[k]->v, n->w[k]->n);
        return n->c ? exec_block(c, n->c->v, n->c->n) : FLOW_NEXT;
    case JN_FOR: return exec_for(c, n);
    case JN_SET: {
        jx_val v = eval(c, n->a);
        if (!n->nnames) {
            frame_set(c, n->pos, c->top, n->name, v);
            return FLOW_NEXT;
        }
        const jx_val *ns = lookup(c, n->name->s, n->name->len);
        if (!ns) jx_fail(&c->err, n->pos, "'%s' is undefined", n->name->s);
        if (ns->kind != JX_NS)
            jx_fail(&c->err, n->pos, "cannot assign an attribute of '%s', not a namespace", n->name->s);
        jx_dict_set(c, n->pos, ns->d, jx_strv(n->names[0]), v);
        return FLOW_NEXT;
    }
    case JN_SETBLOCK: {
        int flow;
        jx_str *s = capture(c, n->pos, NULL, n->v, n->n, &flow);
        frame_set(c, n->pos, c->top, n->name, jx_strv(s));
        return flow;
    }
    case JN_MACRO:
        frame_set(c, n->pos, c->top, n->name, (jx_val){.kind = JX_MACRO, .mac = new_macro(c, n)});
        return FLOW_NEXT;
    case JN_CALLBLOCK: {
        jx_val fn = eval(c, n->a->a);
        if (fn.kind != JX_MACRO) jx_fail(&c->err, n->pos, "a call block calls a macro, not %s", jx_type_name(fn));
        jx_args a = eval_args(c, n->a);
        put_value(c, n->pos, call_macro(c, n->pos, fn.mac, &a, new_macro(c, n->b)));
        return FLOW_NEXT;
    }
    case JN_SCOPE: {
        jx_frame *f = jx_alloc(&c->err, &c->arena, sizeof *f, n->pos), *saved = c->top;
        f->up = c->top;
        c->top = f;
        exec_block(c, n->v, n->n);
        c->top = saved;
        return FLOW_NEXT;
    }
    case JN_FILTERBLOCK: {
        int flow;
        jx_val saved = c->captured;
        c->captured = jx_strv(capture(c, n->pos, NULL, n->v, n->n, &flow));
        jx_val v = eval(c, n->a);
        c->captured = saved;
        put_value(c, n->pos, v);
        return flow;
    }
    case JN_BREAK: return FLOW_BREAK;
    case JN_CONTINUE: return FLOW_CONTINUE;
    default: jx_fail(&c->err, n->pos, "not a statement");
    }
}

static int exec_block(jx_ctx *c, jx_node *const *v, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        int flow = exec(c, v[k]);
        if (flow) return flow;
    }
    return FLOW_NEXT;
}

/* --- entry ------------------------------------------------------------------------------------ */

static jx_val from_json(jx_ctx *c, const cJSON *j, int depth)
{
    if (depth > ZT_JINJA_MAX_DEPTH) {
        zt_fail(ZT_EUSER, "%s: template variables are nested deeper than %d levels", c->err.name, ZT_JINJA_MAX_DEPTH);
        longjmp(c->err.jmp, ZT_EUSER);
    }
    if (cJSON_IsBool(j)) return jx_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        return d == floor(d) && fabs(d) < 0x1p63 ? jx_int((int64_t)d) : jx_float(d);
    }
    if (cJSON_IsString(j) && j->valuestring) return jx_strv(jx_str_new(c, 0, j->valuestring, strlen(j->valuestring)));
    if (cJSON_IsArray(j)) {
        jx_list *l = jx_list_new(c, 0, (size_t)cJSON_GetArraySize(j));
        size_t k = 0;
        for (const cJSON *e = j->child; e && k < l->n; e = e->next) l->v[k++] = from_json(c, e, depth + 1);
        return jx_listv(l);
    }
    if (cJSON_IsObject(j)) {
        jx_dict *d = jx_dict_new(c, 0);
        for (const cJSON *e = j->child; e; e = e->next) {
            if (!e->string) continue;
            jx_val key = jx_strv(jx_str_new(c, 0, e->string, strlen(e->string)));
            jx_dict_set(c, 0, d, key, from_json(c, e, depth + 1));
        }
        return (jx_val){.kind = JX_DICT, .d = d};
    }
    return jx_none();
}

static void render_all(jx_ctx *c, const zt_jinja *t, const cJSON *vars, jx_frame *root)
{
    c->loop_name = jx_str_new(c, 0, "loop", 4);
    c->top = root;
    for (const cJSON *e = vars ? vars->child : NULL; e; e = e->next)
        if (e->string) frame_set(c, 0, root, jx_str_new(c, 0, e->string, strlen(e->string)), from_json(c, e, 1));
    exec_block(c, t->body->v, t->body->n);
    out_put(c, 0, "", 0);
}

zt_status zt_jinja_render(const zt_jinja *t, const cJSON *vars, const zt_jinja_limits *limits, char **out, size_t *len)
{
    *out = NULL;
    if (len) *len = 0;
    if (vars && !cJSON_IsObject(vars))
        return zt_fail(ZT_EUSER, "%s: template variables must be a JSON object", t->name);
    jx_ctx *c = calloc(1, sizeof *c);
    if (!c) return zt_fail(ZT_ENOMEM, "%s: out of memory", t->name);
    c->err.name = t->name, c->err.src = t->src, c->err.len = t->len;
    c->max_output = limits && limits->max_output ? limits->max_output : (size_t)64 << 20;
    c->arena.cap = limits && limits->max_memory ? limits->max_memory : (size_t)256 << 20;
    c->max_steps = limits && limits->max_steps > 0 ? limits->max_steps : 100000000;
    jx_frame root = {0};
    int code = setjmp(c->err.jmp);
    if (code) {
        free(c->out);
        jx_arena_free(&c->arena);
        free(c);
        return (zt_status)code;
    }
    render_all(c, t, vars, &root);
    *out = c->out;
    if (len) *len = c->outlen;
    jx_arena_free(&c->arena);
    free(c);
    return ZT_OK;
}
