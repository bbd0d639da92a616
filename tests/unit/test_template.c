/* Chat templates and the Jinja interpreter: byte-identical renders against the
 * real jinja2 (tests/fixtures/templates/renders.jsonl, made by make_renders.py
 * there), loss spans, error messages and bounds.
 *
 *   build/tests/test_template                      run the tests
 *   build/tests/test_template --dump-named DIR     write the named templates' sources to DIR/<name>.jinja
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/fileio.h"
#include "lib/jinja/jinja.h"
#include "lib/data/messages.h"
#include "lib/data/template.h"
#include "test.h"

static char fixtures[4096]; /* tests/fixtures/templates, found from this file's path */
#define FIXTURE_EPOCH "1796212800" /* 2026-12-02 12:00 UTC: make_renders.py's clock */
static char tmpdir[] = "/tmp/zt_test_template_XXXXXX";

static const char *fixture(const char *name)
{
    static char path[8192];
    snprintf(path, sizeof path, "%s/%s", fixtures, name);
    return path;
}

/* A template by name ("chatml", ...), as zt generate --chat-template names it. */
static zt_status load_named(zt_template **t, const char *name)
{
    zt_chat_template kind;
    zt_status st = zt_template_kind(name, &kind);
    return st ? st : zt_template_load(t, kind, name, NULL);
}

static const char *tmp_path(const char *name)
{
    static char path[8192];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

/* Renders src with vars (JSON text) through the interpreter; returns malloc'ed text or NULL (error in zt_errmsg). */
static char *jinja(const char *src, const char *vars_json, const zt_jinja_limits *lim)
{
    zt_jinja *t;
    if (zt_jinja_parse(&t, src, strlen(src), "t.jinja")) return NULL;
    cJSON *vars = cJSON_Parse(vars_json ? vars_json : "{}");
    char *out = NULL;
    size_t len;
    zt_status st = zt_jinja_render(t, vars, lim, &out, &len);
    cJSON_Delete(vars);
    zt_jinja_free(t);
    return st ? NULL : out;
}

static void expect_render(const char *src, const char *vars, const char *want)
{
    char *got = jinja(src, vars, NULL);
    CHECK_MSG(got && !strcmp(got, want), "%s\n    got  %s\n    want %s", src, got ? got : zt_errmsg(), want);
    free(got);
}

static void expect_error(const char *src, const char *vars, const char *want)
{
    char *got = jinja(src, vars, NULL);
    CHECK_MSG(!got && strstr(zt_errmsg(), want), "%s\n    got  %s\n    want an error with %s", src,
              got ? got : zt_errmsg(), want);
    free(got);
}

/* --- the fixtures: same bytes as jinja2 --------------------------------------------------------- */

static const char *str_or_null(const cJSON *row, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(row, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_fixture_renders(void)
{
    char *data;
    size_t len;
    if (zt_read_file(fixture("renders.jsonl"), &data, &len)) {
        CHECK_MSG(0, "%s", zt_errmsg());
        return;
    }
    int rows = 0, texts = 0, spans_checked = 0;
    setenv("SOURCE_DATE_EPOCH", FIXTURE_EPOCH, 1); /* the date make_renders.py gives strftime_now */
    char loaded_name[256] = "";
    zt_template *t = NULL;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *row = cJSON_Parse(line);
        if (!row) {
            CHECK_MSG(0, "renders.jsonl: a line is not JSON");
            break;
        }
        const char *name = str_or_null(row, "template");
        if (strcmp(name, loaded_name)) { /* named/x.jinja runs the embedded source of x */
            zt_template_free(t);
            t = NULL;
            char n[256];
            snprintf(n, sizeof n, "%s", name);
            if (!strncmp(n, "named/", 6)) *strstr(n, ".jinja") = 0;
            zt_status st = !strncmp(n, "named/", 6) ? load_named(&t, n + 6)
                                                    : zt_template_load(&t, ZT_TEMPLATE_FILE, fixture(name), NULL);
            CHECK_MSG(!st, "%s: %s", name, zt_errmsg());
            snprintf(loaded_name, sizeof loaded_name, "%s", name);
        }
        /* the messages as the data pipeline reads them, with the row's tools */
        const cJSON *list = cJSON_GetObjectItem(row, "messages"), *tools = cJSON_GetObjectItem(row, "tools");
        zt_message *msgs = NULL;
        int n = 0;
        if (cJSON_GetArraySize(list) && zt_messages_read(list, &msgs, &n)) CHECK_MSG(0, "%s: %s", name, zt_errmsg());
        int agp = cJSON_IsTrue(cJSON_GetObjectItem(row, "add_generation_prompt"));
        int conv = cJSON_GetObjectItem(row, "conversation")->valueint;
        const char *bos = str_or_null(row, "bos_token"), *eos = str_or_null(row, "eos_token");
        const char *want = str_or_null(row, "text"), *want_err = str_or_null(row, "error");
        char *got = NULL;
        zt_status st =
            t ? zt_template_render(t, msgs, n, agp, &(zt_template_vars){.bos = bos, .eos = eos, .tools = tools}, &got)
              : ZT_EUSER;
        if (want) {
            CHECK_MSG(!st && !strcmp(got, want),
                      "%s, conversation %d, add_generation_prompt=%d:\n    got  %s\n    want %s", name, conv, agp,
                      st ? zt_errmsg() : got, want);
            texts++;
        } else {
            CHECK_MSG(st, "%s, conversation %d: jinja2 fails (%s) but zt renders %s", name, conv, want_err, got);
            /* raise_exception's message comes through */
            const char *msg = want_err && !strncmp(want_err, "TemplateError: ", 15) ? want_err + 15 : NULL;
            if (st && msg) CHECK_MSG(strstr(zt_errmsg(), msg), "%s: %s lacks %s", name, zt_errmsg(), msg);
        }
        free(got);
        const cJSON *spans = cJSON_GetObjectItem(row, "spans");
        if (t && !agp && (spans || cJSON_GetObjectItem(row, "spans_error"))) {
            zt_span *sp;
            int ns;
            char *text;
            st = zt_template_spans(t, msgs, n, &(zt_template_vars){.bos = bos, .eos = eos, .tools = tools},
                                   ZT_TRAIN_ASSISTANT, &sp, &ns, &text);
            if (!spans) {
                CHECK_MSG(st, "%s, conversation %d: jinja2 finds no spans but zt does", name, conv);
            } else if (!st) {
                int same = ns == cJSON_GetArraySize(spans);
                for (int k = 0; same && k < ns; k++) {
                    const cJSON *pair = cJSON_GetArrayItem(spans, k);
                    same = sp[k].begin == (size_t)cJSON_GetArrayItem(pair, 0)->valuedouble &&
                           sp[k].end == (size_t)cJSON_GetArrayItem(pair, 1)->valuedouble;
                }
                CHECK_MSG(same, "%s, conversation %d: spans differ from jinja2's", name, conv);
                spans_checked++;
                free(sp);
                free(text);
            } else {
                CHECK_MSG(0, "%s, conversation %d: %s", name, conv, zt_errmsg());
            }
        }
        free(msgs);
        cJSON_Delete(row);
        rows++;
    }
    unsetenv("SOURCE_DATE_EPOCH");
    zt_template_free(t);
    free(data);
    CHECK_MSG(rows >= 300 && texts >= 250 && spans_checked >= 100, "only %d rows, %d texts, %d spans", rows, texts,
              spans_checked);
}

/* The named sources in named/ (read by make_renders.py) are the ones compiled in. */
static void test_named_sources_match(void)
{
    for (int k = ZT_TEMPLATE_CHATML; k < ZT_TEMPLATE_FILE; k++) {
        char rel[64], *text;
        size_t len;
        snprintf(rel, sizeof rel, "named/%s.jinja", zt_chat_template_names[k]);
        if (zt_read_file(fixture(rel), &text, &len)) {
            CHECK_MSG(0, "%s", zt_errmsg());
            continue;
        }
        CHECK_MSG(!strcmp(text, zt_template_builtin((zt_chat_template)k)),
                  "%s differs from template.c: run build/tests/test_template --dump-named %s/named and make_renders.py",
                  rel, fixtures);
        free(text);
    }
    CHECK(zt_template_builtin(ZT_TEMPLATE_AUTO) == NULL && zt_template_builtin(ZT_TEMPLATE_FILE) == NULL &&
          zt_template_builtin(ZT_TEMPLATE_CHATML) != NULL);
}

/* --- loss spans --------------------------------------------------------------------------------- */

static void test_spans(void)
{
    static const struct {
        const char *name, *bos, *eos, *turn1, *turn2;
    } cases[] = {
        {"chatml", NULL, "<|im_end|>", "A1<|im_end|>\n", "A2 <|im_end|>\n"},
        {"llama3", "<|begin_of_text|>", "<|eot_id|>", "A1<|eot_id|>", "A2<|eot_id|>"},
        {"llama2", "<s>", "</s>", " A1 </s>", " A2 </s>"},
        {"mistral", "<s>", "</s>", " A1</s>", " A2 </s>"},
        {"zephyr", "<s>", "</s>", "A1</s>\n", "A2 </s>\n"},
        {"alpaca", "<s>", "</s>", "A1</s>", "A2 </s>"},
    };
    zt_message msgs[] = {{"system", "S", NULL},
                         {"user", "U1", NULL},
                         {"assistant", "A1", NULL},
                         {"user", "U2", NULL},
                         {"assistant", "A2 ", NULL}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        zt_template *t;
        if (load_named(&t, cases[k].name)) {
            CHECK_MSG(0, "%s", zt_errmsg());
            continue;
        }
        zt_span *sp;
        int n;
        char *text;
        zt_status st = zt_template_spans(t, msgs, 5, &(zt_template_vars){.bos = cases[k].bos, .eos = cases[k].eos},
                                         ZT_TRAIN_ASSISTANT, &sp, &n, &text);
        CHECK_MSG(!st && n == 2, "%s: %s", cases[k].name, st ? zt_errmsg() : "not 2 spans");
        if (!st && n == 2) {
            CHECK_MSG(!strncmp(text + sp[0].begin, cases[k].turn1, sp[0].end - sp[0].begin) &&
                          strlen(cases[k].turn1) == sp[0].end - sp[0].begin,
                      "%s: first turn is '%.*s'", cases[k].name, (int)(sp[0].end - sp[0].begin), text + sp[0].begin);
            CHECK_MSG(!strncmp(text + sp[1].begin, cases[k].turn2, sp[1].end - sp[1].begin) &&
                          strlen(cases[k].turn2) == sp[1].end - sp[1].begin,
                      "%s: second turn is '%.*s'", cases[k].name, (int)(sp[1].end - sp[1].begin), text + sp[1].begin);
            CHECK(sp[1].end <= strlen(text) && sp[0].end <= sp[1].begin);
            zt_span first = sp[0], second = sp[1];
            size_t len = strlen(text);
            free(sp);
            free(text);
            st = zt_template_spans(t, msgs, 5, &(zt_template_vars){.bos = cases[k].bos, .eos = cases[k].eos},
                                   ZT_TRAIN_LAST, &sp, &n, &text);
            CHECK(!st && n == 1 && sp[0].begin == second.begin && sp[0].end == second.end);
            if (!st) free(sp), free(text);
            st = zt_template_spans(t, msgs, 5, &(zt_template_vars){.bos = cases[k].bos, .eos = cases[k].eos},
                                   ZT_TRAIN_ALL, &sp, &n, &text);
            CHECK(!st && n == 1 && sp[0].begin == 0 && sp[0].end == len);
            if (!st) free(sp), free(text);
            (void)first;
        } else if (!st) {
            free(sp), free(text);
        }
        /* no assistant turn: no spans */
        st = zt_template_spans(t, msgs, 2, &(zt_template_vars){.bos = cases[k].bos, .eos = cases[k].eos}, ZT_TRAIN_LAST,
                               &sp, &n, &text);
        CHECK(!st && n == 0);
        if (!st) free(sp), free(text);
        zt_template_free(t);
    }

    /* a template that rewrites earlier turns depending on what follows, contents included, cannot be split */
    test_write_text(tmp_path("peek.jinja"),
                    "{% for m in messages %}{{ m.content if loop.last else m.content | lower }}{% if loop.last %}<last>"
                    "{% endif %}{% endfor %}{% if add_generation_prompt %}>{% endif %}");
    zt_template *t;
    CHECK(!zt_template_load(&t, ZT_TEMPLATE_FILE, tmp_path("peek.jinja"), NULL));
    zt_span *sp;
    int n;
    char *text;
    zt_status st = zt_template_spans(t, msgs + 1, 4, &(zt_template_vars){0}, ZT_TRAIN_ASSISTANT, &sp, &n, &text);
    CHECK_MSG(st == ZT_EUSER && strstr(zt_errmsg(), "does not render conversations incrementally") &&
                  strstr(zt_errmsg(), "peek.jinja"),
              "%s", zt_errmsg());
    st = zt_template_spans(t, msgs + 1, 4, &(zt_template_vars){0}, ZT_TRAIN_ALL, &sp, &n, &text);
    CHECK(!st && n == 1 && !strcmp(text, "u1a1u2A2 <last>"));
    if (!st) free(sp), free(text);
    zt_template_free(t);
}

/* --- loss spans: the same as prefix rendering, at the cost of a few renders ---------------------- */

/* The one place text holds c (or c stripped, failing that): 1 and its bytes [*b, *e), else 0. */
static int find_once(const char *text, const char *c, size_t *b, size_t *e)
{
    for (int stripped = 0; stripped < 2; stripped++) {
        size_t from = 0, n = strlen(c);
        if (stripped) n = zt_jinja_strip(c, n, 1, 1, &from);
        char needle[512];
        if (!n || n >= sizeof needle) continue;
        memcpy(needle, c + from, n), needle[n] = 0;
        const char *at = strstr(text, needle);
        if (at && !strstr(at + 1, needle)) {
            *b = (size_t)(at - text), *e = *b + n;
            return 1;
        }
    }
    return 0;
}

/* The spans by their definition (template.h), each turn rendered here on its own: for assistant
 * message i, [len(P), len(Q)) with P = messages [0, i) and the generation prompt, Q = messages
 * [0, i], where the text starts with Q and Q with P; else the closing span: the content where the
 * text has it, then as much of what Q writes after the content as the text has there, found here
 * where the content is in both exactly once. Returns the number of spans (empty ones left out),
 * -1 when a render fails, or -2 when a closing span's content is not in both exactly once or the
 * turn has tool calls (renders.jsonl checks those spans);
 * *closing tells that a closing span was needed. */
static int prefix_spans(const zt_template *t, const zt_message *msgs, int n, const char *bos, const char *eos,
                        int last_only, zt_span *spans, int *closing)
{
    char *text;
    *closing = 0;
    if (zt_template_render(t, msgs, n, 0, &(zt_template_vars){.bos = bos, .eos = eos}, &text)) return -1;
    size_t len = strlen(text);
    int first = 0, ns = 0;
    if (last_only)
        for (first = n - 1; first >= 0 && strcmp(msgs[first].role, "assistant"); first--) {
        }
    for (int i = first; ns >= 0 && i >= 0 && i < n; i++) {
        if (strcmp(msgs[i].role, "assistant")) continue;
        char *p = NULL, *q = NULL;
        if (zt_template_render(t, msgs, i, 1, &(zt_template_vars){.bos = bos, .eos = eos}, &p) ||
            zt_template_render(t, msgs, i + 1, 0, &(zt_template_vars){.bos = bos, .eos = eos}, &q)) {
            ns = -1;
        } else {
            size_t np = strlen(p), nq = strlen(q), tb, te, qb, qe;
            zt_span s = {np, nq};
            if (nq < np || memcmp(p, q, np) || len < nq || memcmp(text, q, nq)) {
                *closing = 1;
                if (msgs[i].json || !find_once(text, msgs[i].content, &tb, &te) ||
                    !find_once(q, msgs[i].content, &qb, &qe)) { /* tool calls: not the content's span */
                    ns = -2;
                } else {
                    for (s = (zt_span){tb, te}; s.end < len && qe < nq && text[s.end] == q[qe];) s.end++, qe++;
                    for (size_t k = s.end; qe < nq && k-- > te && text[k] != '>' && text[k] != ']';)
                        if (text[k] == '<' || text[k] == '[') s.end = k, k = te; /* not inside a tag */
                    const char *e = eos ? strstr(text + te, eos) : NULL;         /* nor past EOS and its whitespace */
                    if (e && (size_t)(e - text) + strlen(eos) <= s.end) {
                        size_t k = (size_t)(e - text) + strlen(eos);
                        while (k < s.end && strchr("\n \t\r", text[k])) k++;
                        s.end = k;
                    }
                }
            }
            if (ns >= 0 && s.end > s.begin) spans[ns++] = s;
        }
        free(p), free(q);
    }
    free(text);
    return ns;
}

/* Finds the spans both ways and checks they agree bitwise (or fail alike). Where a closing span is
 * needed, zt may instead refuse the conversation (when its sentinel rendering cannot lay the text
 * out), but never find other spans. Returns whether the spans were found here, with the bytes each
 * way renders: *cost here, *prefix_cost rendering every prefix. */
static int expect_prefix_spans(const zt_template *t, const zt_message *msgs, int n, const char *bos, const char *eos,
                               zt_train_on train_on, uint64_t *cost, uint64_t *prefix_cost)
{
    zt_span *want = malloc((size_t)(n + 1) * sizeof *want), *got;
    int closing, nwant, ngot;
    char *text;
    uint64_t before = zt_template_rendered(t);
    nwant = prefix_spans(t, msgs, n, bos, eos, train_on == ZT_TRAIN_LAST, want, &closing);
    *prefix_cost = zt_template_rendered(t) - before;
    char want_err[512];
    snprintf(want_err, sizeof want_err, "%s", nwant == -1 ? zt_errmsg() : "");
    before = zt_template_rendered(t);
    zt_status st =
        zt_template_spans(t, msgs, n, &(zt_template_vars){.bos = bos, .eos = eos}, train_on, &got, &ngot, &text);
    *cost = zt_template_rendered(t) - before;
    int refused = st == ZT_EUSER && strstr(zt_errmsg(), "cannot be told apart in its text");
    if (nwant >= 0 && !(closing && refused)) {
        int same = !st && ngot == nwant;
        for (int k = 0; same && k < ngot; k++) same = got[k].begin == want[k].begin && got[k].end == want[k].end;
        CHECK_MSG(same, "%s, %d messages, train_on %s: %s", zt_template_name(t), n, zt_train_on_names[train_on],
                  st ? zt_errmsg() : "spans differ from their definition's");
    } else if (nwant == -1) {
        CHECK_MSG(st == ZT_EUSER && !strcmp(zt_errmsg(), want_err), "%s, %d messages: want %s, got %s",
                  zt_template_name(t), n, want_err, st ? zt_errmsg() : "spans");
    } else { /* spans, if any, are in order, inside the text and not empty */
        CHECK_MSG(refused || !st, "%s, %d messages: %s", zt_template_name(t), n, zt_errmsg());
        for (int k = 0; !st && k < ngot; k++)
            CHECK(got[k].begin < got[k].end && got[k].end <= strlen(text) && (!k || got[k - 1].end <= got[k].begin));
    }
    if (!st) free(got), free(text);
    free(want);
    return nwant >= 0 && !closing;
}

static uint64_t rng = 0x9E3779B97F4A7C15u;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (uint32_t)((rng * 0x2545F4914F6CDD1Du) >> 32) % n;
}

/* How a template orders roles: any order; an optional system message then user and assistant in any
 * order; or that and strictly alternating from user. */
enum { ANY_ROLES, SYSTEM_FIRST, ALTERNATING };

static const struct {
    const char *name; /* named, or a fixture file */
    int roles, tool;  /* tool: a "tool" role is rendered (or dropped) rather than refused */
    const char *bos, *eos;
} SPAN_TEMPLATES[] = {
    {"chatml", ANY_ROLES, 1, NULL, "<|im_end|>"},
    {"llama2", ALTERNATING, 0, "<s>", "</s>"},
    {"llama3", ANY_ROLES, 1, "<|begin_of_text|>", "<|eot_id|>"},
    {"mistral", ALTERNATING, 0, "<s>", "</s>"},
    {"zephyr", ANY_ROLES, 1, "<s>", "</s>"},
    {"alpaca", SYSTEM_FIRST, 0, "<s>", "</s>"},
    {"llama-2-7b-chat.jinja", ALTERNATING, 0, "<s>", "</s>"},
    {"llama-3-8b-instruct.jinja", ANY_ROLES, 1, "<|begin_of_text|>", "<|eot_id|>"},
    {"llama-3.1-8b-instruct.jinja", ANY_ROLES, 1, "<|begin_of_text|>", "<|eot_id|>"},
    {"mistral-7b-instruct-v0.2.jinja", ALTERNATING, 0, "<s>", "</s>"},
    {"qwen2-7b-instruct.jinja", ANY_ROLES, 1, NULL, "<|im_end|>"},
    {"qwen2.5-7b-instruct.jinja", ANY_ROLES, 1, NULL, "<|im_end|>"},
    {"zephyr-7b-beta.jinja", ANY_ROLES, 1, "<s>", "</s>"},
    /* templates that rewrite turns by what follows them: closing spans */
    {"llamacpp/Qwen-Qwen3-0.6B.jinja", ANY_ROLES, 1, NULL, "<|im_end|>"},
    {"llamacpp/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", SYSTEM_FIRST, 0, "<｜begin▁of▁sentence｜>",
     "<｜end▁of▁sentence｜>"},
    {"llamacpp/microsoft-Phi-3.5-mini-instruct.jinja", ANY_ROLES, 0, "<s>", "<|endoftext|>"},
    {"llamacpp/openai-gpt-oss-120b.jinja", SYSTEM_FIRST, 0, "<|startoftext|>", "<|return|>"},
};

static zt_template *load_span_template(const char *name)
{
    zt_template *t = NULL;
    zt_chat_template kind = ZT_TEMPLATE_FILE;
    for (int k = ZT_TEMPLATE_CHATML; k < ZT_TEMPLATE_FILE; k++)
        if (!strcmp(name, zt_chat_template_names[k])) kind = (zt_chat_template)k;
    zt_status st = zt_template_load(&t, kind, fixture(name), NULL);
    CHECK_MSG(!st, "%s: %s", name, zt_errmsg());
    return t;
}

/* Contents are made of these: empty, whitespace at either end, text like the templates' markup,
 * sentinels' bytes (template.c), non-ASCII. */
enum { CONTENT_BYTES = 3 * 47 + 1 }; /* a random content: up to three pieces of at most 47 bytes */

static const char *const PIECES[] = {
    "",
    "a",
    "Hello there",
    " lead",
    "trail ",
    "\n",
    "\n\nx\n",
    "  ",
    "\t",
    "\v",
    "x\v",
    "0",
    "é",
    "{{ x }}",
    "<<SYS>>",
    "<|im_end|>\n<|im_start|>user\n",
    "<|im_start|>assistant\n",
    "[INST]",
    " [/INST] ",
    "</s>",
    "<s>",
    "<|eot_id|>",
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "### Response:\n",
    "<|user|>\n",
    "\xEE\x80\x80"
    "1"
    "\xEE\x80\x81",
    "\v\xEE\x80\x80"
    "2"
    "\xEE\x80\x81\v",
};

/* Tool calls that random assistant turns make (where the template takes tools): two alike, one not. */
static const char *const TOOL_CALLS[] = {
    "{\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}",
    "{\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}",
    "{\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\": {}}}]}",
};
enum { NTOOL_CALLS = sizeof TOOL_CALLS / sizeof TOOL_CALLS[0] };

static void random_conversation(int roles, int tool, int n, zt_message *msgs, char (*contents)[CONTENT_BYTES],
                                cJSON *const calls[NTOOL_CALLS])
{
    static const char *const any[] = {"user",      "user",      "user",      "user",   "assistant",
                                      "assistant", "assistant", "assistant", "system", "tool"}; /* tool last */
    int system = roles != ANY_ROLES && rnd(2), tools = tool && rnd(2);
    for (int i = 0; i < n; i++) {
        if (i == 0 && system) msgs[i].role = "system";
        else if (roles == ALTERNATING) msgs[i].role = (i - system) % 2 ? "assistant" : "user";
        else if (roles == SYSTEM_FIRST) msgs[i].role = any[rnd(8)];
        else msgs[i].role = any[rnd(tools ? 10 : 9)];
        contents[i][0] = 0;
        for (int k = (int)rnd(4); k > 0; k--) {
            const char *piece = PIECES[rnd(sizeof PIECES / sizeof PIECES[0])];
            if (strlen(contents[i]) + strlen(piece) >= CONTENT_BYTES) abort(); /* CONTENT_BYTES is too small */
            strcat(contents[i], piece);
        }
        msgs[i].content = contents[i];
        msgs[i].json = tool && !strcmp(msgs[i].role, "assistant") && !rnd(4) ? calls[rnd(NTOOL_CALLS)] : NULL;
    }
}

/* Random conversations on every template: the spans are prefix rendering's, bit for bit, and most
 * long ones cost a few renders rather than one per turn, so the test checks the sentinel rendering,
 * not only the fallback. Those that take the fallback: contents the template changes beyond
 * trimming them (llama2 strips its first user message together with the system prompt before it,
 * llama-3.1 writes tool messages through tojson), or whose trimming is ambiguous (a content ending
 * in whitespace before template text that starts with it); conversations with tool messages or
 * tool calls are left out of the count (a template that writes the calls makes the windows around
 * turns with other calls texts of other kinds, so a few distinct calls use up the kinds). */
static void test_spans_match_prefix_rendering(void)
{
    enum { CONVERSATIONS = 60, MAX_MESSAGES = 48 };
    zt_message msgs[MAX_MESSAGES];
    static char contents[MAX_MESSAGES][CONTENT_BYTES];
    cJSON *calls[NTOOL_CALLS];
    for (int k = 0; k < NTOOL_CALLS; k++) calls[k] = cJSON_Parse(TOOL_CALLS[k]);
    for (size_t k = 0; k < sizeof SPAN_TEMPLATES / sizeof SPAN_TEMPLATES[0]; k++) {
        zt_template *t = load_span_template(SPAN_TEMPLATES[k].name);
        if (!t) continue;
        int long_ones = 0, linear = 0;
        for (int c = 0; c < CONVERSATIONS; c++) {
            int n = 1 + (int)rnd(c % 2 ? MAX_MESSAGES : 8);
            random_conversation(SPAN_TEMPLATES[k].roles, SPAN_TEMPLATES[k].tool, n, msgs, contents, calls);
            zt_train_on train_on = rnd(4) ? ZT_TRAIN_ASSISTANT : ZT_TRAIN_LAST;
            uint64_t cost, prefix_cost;
            int found = expect_prefix_spans(t, msgs, n, SPAN_TEMPLATES[k].bos, SPAN_TEMPLATES[k].eos, train_on, &cost,
                                            &prefix_cost);
            int assistants = 0, tools = 0;
            for (int i = 0; i < n; i++)
                assistants += !strcmp(msgs[i].role, "assistant"),
                    tools += !strcmp(msgs[i].role, "tool") || msgs[i].json;
            if (found && assistants >= 12 && !tools && train_on == ZT_TRAIN_ASSISTANT) {
                long_ones++;
                linear += cost * 2 < prefix_cost;
            }
        }
        CHECK_MSG(linear * 4 >= long_ones * 3, "%s: %d of %d long conversations took the linear way",
                  SPAN_TEMPLATES[k].name, linear, long_ones);
        zt_template_free(t);
    }
    for (int k = 0; k < NTOOL_CALLS; k++) cJSON_Delete(calls[k]);
}

/* 2000 short messages, no max_length: finding the 1000 spans renders a few times the text, where
 * rendering every prefix costs about 1000 times it. The few: the text; prefix renders of the first
 * turns until they reach half the text (plus the pair that crosses it, a few KB here); the
 * rendering with sentinels, which is the text with each content of >= 8 bytes replaced by one of
 * <= 10 (so < 1.1x); and the check of the last turn (< 1x). */
static void test_spans_linear_in_turns(void)
{
    enum { N = 2000 };
    static zt_message msgs[N];
    static char contents[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(contents[i], sizeof contents[i], i % 2 ? "answer %d" : "question %d", i);
        msgs[i] = (zt_message){i % 2 ? "assistant" : "user", contents[i], NULL};
    }
    for (size_t k = 0; k < 6; k++) {
        zt_template *t = load_span_template(SPAN_TEMPLATES[k].name);
        if (!t) continue;
        zt_span *sp;
        int ns;
        char *text;
        uint64_t before = zt_template_rendered(t);
        zt_status st =
            zt_template_spans(t, msgs, N,
                              &(zt_template_vars){.bos = SPAN_TEMPLATES[k].bos, .eos = SPAN_TEMPLATES[k].eos},
                              ZT_TRAIN_ASSISTANT, &sp, &ns, &text);
        uint64_t cost = zt_template_rendered(t) - before;
        CHECK_MSG(!st && ns == N / 2, "%s: %s", SPAN_TEMPLATES[k].name, st ? zt_errmsg() : "not 1000 spans");
        if (!st) {
            size_t len = strlen(text);
            CHECK_MSG(cost <= 4 * (uint64_t)len, "%s: %llu bytes rendered for a text of %zu", SPAN_TEMPLATES[k].name,
                      (unsigned long long)cost, len);
            free(sp), free(text);
        }
        zt_template_free(t);
    }
}

/* Templates that do not render prefixes fail as prefix rendering does, naming the same turn, also
 * in conversations long enough for the linear way: one that marks the last message (every turn
 * fails), and one that does so from the 31st message on (the first 15 turns work). */
static void test_spans_not_incremental(void)
{
    enum { N = 60 };
    zt_message msgs[N];
    char contents[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(contents[i], sizeof contents[i], "turn %d", i);
        msgs[i] = (zt_message){i % 2 ? "assistant" : "user", contents[i], NULL};
    }
    test_write_text(tmp_path("last.jinja"),
                    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% if loop.last %}<last>{% endif %}"
                    "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}");
    test_write_text(tmp_path("late.jinja"),
                    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% if loop.last and loop.index > 30 %}<last>"
                    "{% endif %}{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}");
    const char *names[] = {"last.jinja", "late.jinja"};
    for (int k = 0; k < 2; k++) {
        zt_template *t;
        CHECK(!zt_template_load(&t, ZT_TEMPLATE_FILE, tmp_path(names[k]), NULL));
        uint64_t cost, prefix_cost;
        for (int n = 2; n <= N; n += 29)
            expect_prefix_spans(t, msgs, n, NULL, NULL, ZT_TRAIN_ASSISTANT, &cost, &prefix_cost);
        zt_template_free(t);
    }
}

/* --- loading and errors ------------------------------------------------------------------------- */

static void test_load_errors(void)
{
    zt_template *t;
    zt_chat_template kind;
    zt_status st = zt_template_kind("chatlm", &kind);
    CHECK(st == ZT_EUSER && strstr(zt_errmsg(), "unknown chat template 'chatlm'") && strstr(zt_errmsg(), "llama3"));
    CHECK(!zt_template_kind("auto", &kind) && kind == ZT_TEMPLATE_AUTO);
    CHECK(!zt_template_kind("zephyr", &kind) && kind == ZT_TEMPLATE_ZEPHYR);
    CHECK(!zt_template_kind("my.jinja", &kind) && kind == ZT_TEMPLATE_FILE);
    CHECK(zt_template_load(&t, ZT_TEMPLATE_AUTO, NULL, NULL) == ZT_EUSER && strstr(zt_errmsg(), "model's directory"));

    /* auto: tokenizer_config.json without a chat_template */
    CHECK(!zt_mkdir_p(tmp_path("m1")));
    test_write_text(tmp_path("m1/tokenizer_config.json"), "{\"bos_token\": \"<s>\"}");
    st = zt_template_load(&t, ZT_TEMPLATE_AUTO, NULL, tmp_path("m1"));
    CHECK_MSG(st == ZT_EUSER &&
                  strstr(zt_errmsg(), "m1/tokenizer_config.json' has no chat_template; set tokenizer.chat_template"),
              "%s", zt_errmsg());
    /* without one there, an image-text model's processor's chat_template.json */
    test_write_text(tmp_path("m1/chat_template.json"), "{\"chat_template\": \"{{ messages[0].content }}?\"}");
    CHECK(!zt_template_load(&t, ZT_TEMPLATE_AUTO, NULL, tmp_path("m1")));
    CHECK(strstr(zt_template_name(t), "m1/chat_template.json") &&
          !strcmp(zt_template_source(t), "{{ messages[0].content }}?"));
    zt_template_free(t);
    remove(tmp_path("m1/chat_template.json"));
    /* no tokenizer_config.json at all */
    CHECK(!zt_mkdir_p(tmp_path("m0")));
    CHECK(zt_template_load(&t, ZT_TEMPLATE_AUTO, NULL, tmp_path("m0")) == ZT_EUSER &&
          strstr(zt_errmsg(), "tokenizer_config.json"));
    /* not JSON */
    test_write_text(tmp_path("m1/tokenizer_config.json"), "{\"chat_template\": ");
    CHECK(zt_template_load(&t, ZT_TEMPLATE_AUTO, NULL, tmp_path("m1")) == ZT_EUSER &&
          strstr(zt_errmsg(), "not valid JSON"));

    /* a string */
    test_write_text(tmp_path("m1/tokenizer_config.json"), "{\"chat_template\": \"{{ messages[0].content }}!\"}");
    zt_message hi = {"user", "hi", NULL};
    char *out;
    CHECK(!zt_template_load(&t, ZT_TEMPLATE_AUTO, NULL, tmp_path("m1")));
    CHECK(!zt_template_render(t, &hi, 1, 0, &(zt_template_vars){0}, &out) && !strcmp(out, "hi!"));
    free(out);
    CHECK(!strcmp(zt_template_source(t), "{{ messages[0].content }}!") &&
          strstr(zt_template_name(t), "tokenizer_config.json"));
    zt_template_free(t);

    /* a list of named templates: "default" is taken */
    test_write_text(tmp_path("m1/tokenizer_config.json"), "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": "
                                                          "\"T\"}, {\"name\": \"default\", \"template\": \"D\"}]}");
    CHECK(!zt_template_load(&t, ZT_TEMPLATE_AUTO, NULL, tmp_path("m1")));
    CHECK(!zt_template_render(t, &hi, 1, 0, &(zt_template_vars){0}, &out) && !strcmp(out, "D"));
    free(out);
    zt_template_free(t);
    test_write_text(tmp_path("m1/tokenizer_config.json"),
                    "{\"chat_template\": [{\"name\": \"rag\", \"template\": \"R\"}]}");
    st = zt_template_load(&t, ZT_TEMPLATE_AUTO, NULL, tmp_path("m1"));
    CHECK_MSG(st == ZT_EUSER && strstr(zt_errmsg(), "no 'default'") && strstr(zt_errmsg(), "'rag'"), "%s", zt_errmsg());

    /* chat_template.jinja wins over tokenizer_config.json */
    test_write_text(tmp_path("m1/chat_template.jinja"), "J{{ messages | length }}\n");
    CHECK(!zt_template_load(&t, ZT_TEMPLATE_AUTO, NULL, tmp_path("m1")));
    CHECK(!zt_template_render(t, &hi, 1, 0, &(zt_template_vars){0}, &out) && !strcmp(out, "J1"));
    free(out);
    zt_template_free(t);

    /* a .jinja path: missing, and a syntax error with line:col */
    CHECK(zt_template_load(&t, ZT_TEMPLATE_FILE, tmp_path("nope.jinja"), NULL) == ZT_EUSER &&
          strstr(zt_errmsg(), "nope.jinja"));
    test_write_text(tmp_path("bad.jinja"), "{% for m in messages %}\n  {{ m.content + }}\n{% endfor %}");
    st = zt_template_load(&t, ZT_TEMPLATE_FILE, tmp_path("bad.jinja"), NULL);
    CHECK_MSG(st == ZT_EUSER && strstr(zt_errmsg(), "bad.jinja:2:18: unexpected '}}'"), "%s", zt_errmsg());
    test_write_text(tmp_path("open.jinja"), "a\n  {% if x %}b");
    st = zt_template_load(&t, ZT_TEMPLATE_FILE, tmp_path("open.jinja"), NULL);
    CHECK_MSG(st == ZT_EUSER && strstr(zt_errmsg(), "open.jinja:2:3: 'if' is never closed (expected 'endif')"), "%s",
              zt_errmsg());

    /* raise_exception's message, with the place */
    CHECK(!zt_template_load(&t, ZT_TEMPLATE_MISTRAL, NULL, NULL));
    zt_message two[] = {{"user", "a", NULL}, {"user", "b", NULL}};
    st = zt_template_render(t, two, 2, 0, &(zt_template_vars){.bos = "<s>", .eos = "</s>"}, &out);
    CHECK_MSG(st == ZT_EUSER && strstr(zt_errmsg(), "chat template 'mistral':10:") &&
                  strstr(zt_errmsg(), "conversation roles must alternate user/assistant/user/assistant/..."),
              "%s", zt_errmsg());
    zt_template_free(t);
    CHECK(!zt_template_load(&t, ZT_TEMPLATE_LLAMA3, NULL, NULL));
    zt_message norole = {NULL, "x", NULL};
    CHECK(zt_template_render(t, &norole, 1, 0, &(zt_template_vars){0}, &out) == ZT_EUSER &&
          strstr(zt_errmsg(), "no role"));
    zt_template_free(t);
}

/* --- the interpreter: semantics checked against jinja2 ------------------------------------------ */

static void test_jinja_semantics(void)
{
    const char *v = "{\"xs\": [1, 2, 3], \"d\": {\"a\": 1, \"b\": \"x\"}, \"s\": \"abc\", \"u\": \"Привет 👋\", "
                    "\"m\": {\"role\": \"user\", \"content\": \" hi \"}}";
    expect_render("{{ s[1:] }}|{{ s[::-1] }}|{{ xs[-1:] }}|{{ xs[::2] }}|{{ u[0] }}{{ u[-1] }}|{{ u|length }}", v,
                  "bc|cba|[3]|[1, 3]|П👋|8");
    expect_render(
        "{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 1 / 2 }}|{{ 2 ** 10 }}|{{ 1e16 }}|{{ 0.1 + 0.2 }}|{{ 1e-5 }}", v,
        "3|-4|2|0.5|1024|1e+16|0.30000000000000004|1e-05");
    expect_render("{{ [1, 'a', none, true, {'k': [1.0]}] }}|{{ (1,) }}|{{ [\"it's\"] }}", v,
                  "[1, 'a', None, True, {'k': [1.0]}]|(1,)|[\"it's\"]");
    expect_render("{{ d | tojson }}|{{ 'é<' | tojson }}|{{ {'b': [1, {}]} | tojson(indent=2) }}", v,
                  "{\"a\": 1, \"b\": \"x\"}|\"é<\"|{\n  \"b\": [\n    1,\n    {}\n  ]\n}");
    expect_render("{{ m.content.strip() }}|{{ m.content | trim }}|{{ ' a b '.split() }}|{{ 'a,,b'.split(',') }}|"
                  "{{ 'x'.startswith(('y', 'x')) }}",
                  v, "hi|hi|['a', 'b']|['a', '', 'b']|True");
    expect_render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
                  "{{ loop.revindex }};{% endfor %}",
                  v, "10TrueFalse33;21FalseFalse32;32FalseTrue31;");
    expect_render("{% for x in xs if x > 1 %}{{ x }}{% else %}-{% endfor %}|{% for x in [] %}a{% else %}b{% endfor %}|"
                  "{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}|"
                  "{% for k, v in d.items() %}{{ k }}={{ v }}{% endfor %}",
                  v, "23|b|13|a=1b=x");
    expect_render("{% set x = 0 %}{% for i in xs %}{{ x }}{% set x = i %}{% endfor %}{{ x }}|"
                  "{% set ns = namespace(n=0) %}{% for i in xs %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
                  v, "0000|6");
    expect_render("{{ nope is defined }}|{{ s is string }}|{{ none is none }}|{{ 3 is odd }}|{{ d is mapping }}|"
                  "{{ nope or 'fb' }}|{{ nope | default('x') }}|{{ 'a' if false else 'b' }}|{{ 'b' in s }}|"
                  "{{ 4 not in xs }}|{{ 1 < 2 < 3 }}",
                  v, "False|True|True|True|True|fb|x|b|True|True|True");
    expect_render("{{ [0, 1, ''] | reject | list }}|{{ [0, 1, ''] | select | list }}", v, "[0, '']|[1]");
    expect_render(
        "{{ 'hello world' | capitalize }}|{{ 'a-b c' | title }}|{{ 'aaa' | replace('a', 'b', 2) }}|"
        "{{ xs | join(',') }}|{{ xs | first }}{{ s | last }}|{{ range(3) | list }}|{{ xs | select('odd') | list }}",
        v, "Hello world|A-B C|bba|1,2,3|1c|[0, 1, 2]|[1, 3]");
    /* whitespace control, trim_blocks and lstrip_blocks */
    expect_render("{%- if true -%}   a   {%- endif -%}   b", v, "ab");
    expect_render("  {% if true %}\n  x\n  {% endif %}\n  y", v, "  x\n  y");
    expect_render("a\n  {#- c -#}  \n  b {# c #}\n  c", v, "ab   c");
    expect_render("{% raw %}{{ x }}{% endraw %}|  {%+ if true %}k{% endif +%}\nn", v, "{{ x }}|  k\nn");
    expect_render("{% if true %}\r\nwin\r\n{% endif %}\r\n", v, "win\n");
    expect_render("{% set b %}<{{ s }}>{% endset %}{{ b }}{{ b | length }}", v, "<abc>5");
    expect_render("{% generation %}g{% endgeneration %}", v, "g");
    /* generation is a call block: a scope of its own, no loop to break out of */
    expect_render("{% set x = 1 %}{% generation %}{% set x = 2 %}{{ x }}{% endgeneration %}{{ x }}|"
                  "{% for i in [1, 2] %}{% generation %}{{ i }}{{ loop.index }}{% endgeneration %}{% endfor %}",
                  v, "21|1122");
    expect_error("{% for i in xs %}{% generation %}{% break %}{% endgeneration %}{% endfor %}", v, "outside of a loop");

    expect_error("{{ nope.x }}", v, "t.jinja:1:8: 'nope' is undefined");
    expect_error("{{ 'a' + 1 }}", v, "unsupported operand types for +: 'str' and 'int'");
    expect_error("{{ 1 // 0 }}", v, "by zero");
    expect_error("\n\n  {{ raise_exception('custom message') }}", v, "t.jinja:3:21: custom message");
    expect_error("{{ x | nofilter }}", v, "unknown filter 'nofilter'");
    expect_error("{% for %}", v, "t.jinja:1:8: expected a loop variable name, got '%}'");
    expect_error("{% endif %}", v, "unknown or misplaced tag 'endif'");
    expect_error("{{ 'abc }}", v, "unterminated string");
    expect_error("{# open", v, "missing end of comment tag");
    expect_error("{% break %}", v, "outside of a loop");
    expect_error("{{ 9223372036854775807 + 1 }}", v, "integer overflow");
    expect_error("a\xff", v, "t.jinja:1:2: invalid UTF-8");
    /* strftime_now exists and formats the current time, or SOURCE_DATE_EPOCH's in UTC */
    char *y = jinja("{{ strftime_now('%Y') | length }}", v, NULL);
    CHECK(y && !strcmp(y, "4"));
    free(y);
    setenv("SOURCE_DATE_EPOCH", "86399", 1);
    expect_render("{{ strftime_now('%Y-%m-%d %H:%M:%S') }}", v, "1970-01-01 23:59:59");
    setenv("SOURCE_DATE_EPOCH", "1e9", 1);
    expect_error("{{ strftime_now('%Y') }}", v, "strftime_now: SOURCE_DATE_EPOCH '1e9' is not a count of seconds");
    unsetenv("SOURCE_DATE_EPOCH");
}

/* macros, call and filter blocks and the sorting and indenting filters, against what transformers'
 * environment renders for the same sources */
static void test_jinja_macros_and_filters(void)
{
    const char *v = "{\"xs\": [3, 1, 2], \"d\": {\"b\": 1, \"A\": 2, \"c\": 0}, \"ws\": [\"b\", \"A\", \"a\", \"B\"], "
                    "\"ms\": [{\"t\": \"x\", \"n\": 2}, {\"t\": \"y\", \"n\": 1}, {\"t\": \"x\", \"n\": 0}]}";
    expect_render("{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') "
                  "}}|{{ greet('Bo', greeting='Hi') }}|{{ greet(greeting='Yo', name='Cy') }}|{{ greet() }}",
                  v, "Hello, Ann!|Hi, Bo!|Yo, Cy!|Hello, !");
    expect_render(
        "{% macro m(a, b=a ~ '!') %}{{ a }}{{ b }}{% endmacro %}{{ m('x') }}|{{ m('x', 'y') }}|{{ m | string }}", v,
        "xx!|xy|<Macro 'm'>");
    expect_render("{% macro v() %}{{ varargs | length }}{{ kwargs | dictsort }}{% endmacro %}{{ v(1, 2, k=3) }}", v,
                  "2[('k', 3)]");
    expect_render("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner "
                  "{{ xs | length }}{% endcall %}",
                  v, "<b>inner 3</b>");
    expect_render("{% macro each(items) %}{% for i in items %}{{ caller(i, loop.index) }}{% endfor %}{% endmacro %}{% "
                  "call(x, n) each(xs) %}[{{ n }}:{{ x }}]{% endcall %}",
                  v, "[1:3][2:1][3:2]");
    expect_render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ "
                  "fact(5) }}",
                  v, "120");
    expect_render(
        "{% set x = 'outer' %}{% macro show() %}{{ x }}{% set x = 'inner' %}{{ x }}{% endmacro %}{{ show() }}{{ x }}",
        v, "outerinnerouter");
    expect_render("{% macro later() %}{{ y }}{% endmacro %}{% set y = 'set after' %}{{ later() }}", v, "set after");
    expect_render("{% filter upper %}shout {{ xs | first }}{% endfilter %}|{% filter replace('a', 'o') | trim %}  "
                  "banana  {% endfilter %}",
                  v, "SHOUT 3|bonono");
    expect_render("{{ xs | sort }}|{{ xs | sort(reverse=true) }}|{{ ws | sort }}|{{ ws | sort(case_sensitive=true) "
                  "}}|{{ ms | sort(attribute='n') | map(attribute='n') | list }}",
                  v, "[1, 2, 3]|[3, 2, 1]|['A', 'a', 'b', 'B']|['A', 'B', 'a', 'b']|[0, 1, 2]");
    expect_render(
        "{{ d | dictsort }}|{{ d | dictsort(by='value') }}|{{ d | dictsort(true) }}|{{ d | dictsort(reverse=true) }}",
        v,
        "[('A', 2), ('b', 1), ('c', 0)]|[('c', 0), ('b', 1), ('A', 2)]|[('A', 2), ('b', 1), ('c', 0)]|[('c', 0), ('b', "
        "1), ('A', 2)]");
    expect_render("{{ ws | unique | list }}|{{ ws | unique(case_sensitive=true) | list }}|{{ ms | "
                  "unique(attribute='t') | map(attribute='n') | list }}",
                  v, "['b', 'A']|['b', 'A', 'a', 'B']|[2, 1]");
    expect_render("{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb\\n\\nc\\n' | indent(2, first=true) }}|{{ 'a\\n\\nb' | "
                  "indent('> ', blank=true) }}|{{ 'x\\r\\ny' | indent(1) }}",
                  v, "a\n    b\n\n    c|  a\n  b\n\n  c\n|a\n> \n> b|x\n y");
    expect_render("{% for x in xs %}{% if x == 1 %}{% break %}{% endif %}{{ x }}{% endfor %}|{% for x in xs %}{{ "
                  "loop.previtem }}-{{ loop.nextitem }}{{ loop.cycle('a', 'b') }};{% endfor %}",
                  v, "3|-1a;3-2b;1-a;");
    /* the safe filter's Markup escapes what is added to it; map, select and the like give generators */
    expect_render("{{ 'a<' | safe + '<b>' }}|{{ 'x&' + ('\\'' | safe) }}|{{ ('\"' | safe) ~ '\"' }}|"
                  "{% set m = 'q' | safe %}{{ m + ms[0] | tojson }}",
                  v, "a<&lt;b&gt;|x&amp;'|\"\"|q{&#34;t&#34;: &#34;x&#34;, &#34;n&#34;: 2}");
    expect_render("{{ xs | map('string') | join(',') }}|{% set g = xs | select('odd') %}{{ g | list }}{{ g | list }}|"
                  "{{ 'yes' if xs | select('gt', 5) else 'no' }}|{{ xs | select is sequence }}|"
                  "{{ xs | reject('odd') | first }}|{{ (xs | select)[0] }}",
                  v, "3,1,2|[3, 1][]|yes|False|2|");
    /* tojson's arguments as transformers' tojson passes them to json.dumps */
    expect_render("{{ d | tojson(ensure_ascii=True) }}|{{ d | tojson(separators=(',', ':')) }}|"
                  "{{ d | tojson(sort_keys=True) }}|{{ d | tojson(indent='\t') }}|{{ d | tojson(true, 1) }}",
                  "{\"d\": {\"b\": \"é👋\\n\\\"\", \"a\": [1, 2.5, null, true]}}",
                  "{\"b\": \"\\u00e9\\ud83d\\udc4b\\n\\\"\", \"a\": [1, 2.5, null, true]}|"
                  "{\"b\":\"é👋\\n\\\"\",\"a\":[1,2.5,null,true]}|{\"a\": [1, 2.5, null, true], \"b\": \"é👋\\n\\\"\"}|"
                  "{\n\t\"b\": \"é👋\\n\\\"\",\n\t\"a\": [\n\t\t1,\n\t\t2.5,\n\t\tnull,\n\t\ttrue\n\t]\n}|"
                  "{\n \"b\": \"\\u00e9\\ud83d\\udc4b\\n\\\"\",\n \"a\": [\n  1,\n  2.5,\n  null,\n  true\n ]\n}");
    expect_error("{{ xs | map('string') | length }}", v, "object of type 'generator' has no len()");
    expect_error("{{ xs | select | tojson }}", v, "Object of type generator is not JSON serializable");
    expect_error("{{ xs | unique | last }}", v, "'generator' object is not reversible");
    expect_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", v,
                 "t.jinja:1:35: macro 'm' takes not more than 1 argument(s)");
    expect_error("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", v, "macro 'm' takes no keyword argument 'b'");
    expect_error("{% macro m(a) %}{% endmacro %}{{ m(1, a=2) }}", v, "macro 'm' got multiple values for argument 'a'");
    expect_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", v, "macro calls nested deeper than 64");
    expect_error("{% macro m(a=1, b) %}{% endmacro %}", v, "parameter without a default follows one with a default");
    expect_error("{% macro m(a, a) %}{% endmacro %}", v, "duplicate parameter 'a'");
    expect_error("{% for x in xs %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}", v, "outside of a loop");
    expect_error("{% call xs %}{% endcall %}", v, "a call block needs a call");
    expect_error("{% call range(3) %}{% endcall %}", v, "a call block calls a macro, not function");
    expect_error("{% macro m() %}x", v, "t.jinja:1:1: 'macro' is never closed (expected 'endmacro')");
    expect_error("{% filter %}x{% endfilter %}", v, "expected a filter name");
    expect_error("{% filter nofilter %}x{% endfilter %}", v, "unknown filter 'nofilter'");
    expect_error("{{ d | dictsort(by='x') }}", v, "you can only sort by either 'key' or 'value'");
    expect_error("{{ [1, 'a'] | sort }}", v, "'<' is not supported");
    expect_error("{{ 'x' | indent(100000000000) }}", v, "wider than the rendered text may be");
}

/* --- bounds: nothing a template does may crash or run away ------------------------------------- */

static char *repeat(const char *unit, int n, const char *tail)
{
    size_t u = strlen(unit), t = strlen(tail);
    char *s = malloc(u * (size_t)n + t + 1);
    for (int k = 0; k < n; k++) memcpy(s + k * u, unit, u);
    memcpy(s + u * (size_t)n, tail, t + 1);
    return s;
}

static void test_bounds(void)
{
    static const char *const deep[][3] = {
        /* prefix, unit repeated 100000 times, suffix */
        {"{{ ", "(", ""},        {"{{ ", "[", ""},           {"{{ ", "not ", "1 }}"},
        {"{{ ", "-", "1 }}"},    {"", "{% if true %}", ""},  {"{{ x", ".a", " }}"},
        {"{{ ", "1 + ", "1 }}"}, {"{{ x", " | trim", " }}"}, {"{{ ", "1 if 1 else ", "1 }}"},
    };
    for (size_t k = 0; k < sizeof deep / sizeof deep[0]; k++) {
        char *body = repeat(deep[k][1], 100000, deep[k][2]);
        size_t n = strlen(deep[k][0]) + strlen(body) + 1;
        char *src = malloc(n);
        snprintf(src, n, "%s%s", deep[k][0], body);
        char *out = jinja(src, "{\"x\": {}}", NULL);
        CHECK_MSG(!out && (strstr(zt_errmsg(), "deeper than") || strstr(zt_errmsg(), "nested too deeply")),
                  "nesting '%s': %s", deep[k][1], out ? "rendered" : zt_errmsg());
        free(out);
        free(src);
        free(body);
    }
    /* moderate nesting is fine */
    char *body = repeat("(", 40, "1");
    char *src = malloc(200);
    snprintf(src, 200, "{{ %s%s }}", body, "))))))))))))))))))))))))))))))))))))))))");
    char *out = jinja(src, NULL, NULL);
    CHECK_MSG(out && !strcmp(out, "1"), "%s", out ? out : zt_errmsg());
    free(out), free(src), free(body);

    zt_jinja_limits lim = {.max_output = 1 << 20, .max_memory = 16 << 20, .max_steps = 1000000};
    zt_jinja_limits few_steps = {.max_steps = 100000};
    out = jinja("{% for i in range(5000) %}{% for j in range(5000) %}{% endfor %}{% endfor %}", NULL, &few_steps);
    CHECK(!out && strstr(zt_errmsg(), "ran for more than 100000 steps"));
    out = jinja("{% for i in range(100000) %}{{ 'xxxxxxxxxxxxxxxxxxxx' }}{% endfor %}", NULL, &lim);
    CHECK(!out && strstr(zt_errmsg(), "longer than 1048576 bytes"));
    out = jinja("{{ ('x' * 1000000) * 1000 }}", NULL, &lim);
    CHECK(!out && strstr(zt_errmsg(), "more than 16 MiB of memory"));
    out = jinja("{% set s = namespace(v='x') %}{% for i in range(40) %}{% set s.v = s.v + s.v %}{% endfor %}", NULL,
                &lim);
    CHECK(!out && strstr(zt_errmsg(), "memory"));
    out = jinja("{{ range(1000000) | length }}", NULL, &lim);
    CHECK(!out && strstr(zt_errmsg(), "range is too big"));
    out = jinja("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", NULL, &lim);
    CHECK(!out && strstr(zt_errmsg(), "nested deeper than"));
    out = jinja("{% set x = [] %}{% for i in range(200) %}{% set x = [x] %}{{ x | length }}{% endfor %}", NULL, &lim);
    CHECK_MSG(out && strlen(out) == 200, "%s", out ? out : zt_errmsg());
    free(out);
    out = jinja("{% set ns = namespace(x=[]) %}{% for i in range(200) %}{% set ns.x = [ns.x] %}{% endfor %}"
                "{{ ns.x | tojson }}",
                NULL, &lim);
    CHECK(!out && strstr(zt_errmsg(), "nested deeper than"));
}

/* --- dumping the named sources for make_renders.py ---------------------------------------------- */

static int dump_named(const char *dir)
{
    if (zt_mkdir_p(dir)) return fprintf(stderr, "%s\n", zt_errmsg()), 1;
    for (int k = ZT_TEMPLATE_CHATML; k < ZT_TEMPLATE_FILE; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.jinja", dir, zt_chat_template_names[k]);
        const char *src = zt_template_builtin((zt_chat_template)k);
        if (zt_write_file_atomic(path, src, strlen(src))) return fprintf(stderr, "%s\n", zt_errmsg()), 1;
        printf("wrote %s\n", path);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--dump-named")) return dump_named(argv[2]);
    snprintf(fixtures, sizeof fixtures, "%s", __FILE__);
    char *slash = strrchr(fixtures, '/');
    snprintf(slash ? slash + 1 : fixtures, sizeof fixtures - (size_t)(slash ? slash + 1 - fixtures : 0),
             "../fixtures/templates");
    if (!mkdtemp(tmpdir)) return perror("mkdtemp"), 1;
    RUN(test_fixture_renders);
    RUN(test_named_sources_match);
    RUN(test_spans);
    RUN(test_spans_match_prefix_rendering);
    RUN(test_spans_linear_in_turns);
    RUN(test_spans_not_incremental);
    RUN(test_load_errors);
    RUN(test_jinja_semantics);
    RUN(test_jinja_macros_and_filters);
    RUN(test_bounds);
    zt_remove_tree(tmpdir);
    return test_summary();
}
