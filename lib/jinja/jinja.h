/* jinja: an interpreter for the subset of Jinja2 that chat templates use.
 *
 * It renders a template the way transformers' apply_chat_template does: the
 * environment has trim_blocks and lstrip_blocks on, no autoescaping, the
 * loopcontrols extension ({% break %}, {% continue %}) and the globals
 * raise_exception(msg), strftime_now(fmt), range, namespace and dict; tojson
 * writes non-ASCII as is and keeps key order (transformers' version).
 *
 * What it understands: {{ }}, {% if/elif/else %}, {% for a[, b] in xs [if c] %}
 * with {% else %} and the loop variable (index, index0, revindex, revindex0,
 * first, last, length, previtem, nextitem, cycle), {% set x = ... %},
 * {% set ns.attr = ... %}, {% set x %}...{% endset %}, {% raw %},
 * {% macro name(a, b=default) %} (with varargs, kwargs and caller),
 * {% call[(params)] m(args) %}, {% filter f(args) | g %},
 * {% generation %} (its body, in a scope of its own), comments, whitespace control
 * ({%- -%} {{- -}} {%+ +%}); expressions with Python's precedence and
 * semantics: literals, lists, tuples, dicts, attribute/item access, slices,
 * + - * / // % ** ~, comparisons, in / not in, and/or/not, x if c else y,
 * filters (abs capitalize count d default dictsort first float indent int
 * items join last length list lower map reject rejectattr replace reverse
 * safe select selectattr sort string title tojson trim unique upper), tests
 * (defined undefined none boolean true false integer float number string
 * mapping iterable sequence callable sameas odd even divisibleby eq ne lt le
 * gt ge in lower upper) and
 * methods (str: strip lstrip rstrip split startswith endswith upper lower
 * title capitalize replace find join; dict: items keys values get).
 * A macro sees the scope it was defined in as it is when called; calls nest at
 * most ZT_JINJA_MAX_DEPTH deep. As in Jinja, safe gives a Markup string, and
 * Markup + str escapes the str (& < > " '); map, select, reject, selectattr,
 * rejectattr and unique give generators: iterated once, always true, with no
 * len(), no index (undefined) and no JSON (an error). Not supported: with blocks, include/extends/import,
 * "%" string formatting. Integers are 64-bit (overflow is an error, not a big
 * integer); case mapping (upper, lower, title, capitalize, and the case-blind
 * comparisons of sort, dictsort and unique) changes ASCII letters only; repr()
 * of a string escapes the usual invisible characters but does not consult the
 * full Unicode tables as Python does.
 *
 *     zt_jinja *t;
 *     if ((st = zt_jinja_parse(&t, src, len, "chat.jinja"))) return st;   // "chat.jinja:3:14: ..."
 *     cJSON *vars = cJSON_Parse("{\"messages\": [...], \"add_generation_prompt\": true}");
 *     char *text; size_t n;
 *     st = zt_jinja_render(t, vars, NULL, &text, &n);                     // free(text)
 *     zt_jinja_free(t);
 *
 * Errors are ZT_EUSER with "NAME:LINE:COL: what" (columns count characters);
 * raise_exception's message is passed through after that prefix. Nothing is
 * global: one parsed template may be rendered from several threads at once.
 * Rendering is bounded: output size, memory and evaluation steps have limits
 * (zt_jinja_limits), and nesting deeper than ZT_JINJA_MAX_DEPTH is refused.
 */
#ifndef ZT_JINJA_H
#define ZT_JINJA_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

#define ZT_JINJA_MAX_DEPTH 64           /* nesting of blocks, expressions and values */
#define ZT_JINJA_MAX_SOURCE (16u << 20) /* bytes of template text */

typedef struct zt_jinja zt_jinja;

typedef struct zt_jinja_limits {
    size_t max_output; /* bytes of rendered text; 0: 64 MiB */
    size_t max_memory; /* bytes of values alive during one render; 0: 256 MiB */
    int64_t max_steps; /* statements and expressions evaluated; 0: 100 million */
} zt_jinja_limits;

/* Parses template text (UTF-8; need not be NUL-terminated). name is used in
 * error messages. */
zt_status zt_jinja_parse(zt_jinja **t, const char *src, size_t len, const char *name);

/* Renders with vars, a JSON object whose members are the template's variables
 * (numbers without a fraction become integers). *out is NUL-terminated and
 * malloc'ed; *len excludes the NUL. limits may be NULL (the defaults). */
zt_status zt_jinja_render(const zt_jinja *t, const cJSON *vars, const zt_jinja_limits *limits, char **out, size_t *len);

void zt_jinja_free(zt_jinja *t);

/* What str.strip() (left and right), lstrip() (left) or rstrip() (right) leaves of s[0..n), as the
 * trim filter and those methods strip: s[*begin, *begin + the result). */
size_t zt_jinja_strip(const char *s, size_t n, int left, int right, size_t *begin);

#endif
