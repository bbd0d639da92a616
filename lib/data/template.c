/* data/template: named chat templates, loading "auto" from a model directory,
 * rendering conversations, and loss spans (prefix rendering, then the sentinel rendering). */
#include "template.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jinja/jinja.h"
#include "lib/core/fileio.h"

struct zt_template {
    char *name; /* for messages */
    char *source;
    zt_jinja *jinja;
    _Atomic uint64_t rendered; /* bytes rendered so far, from every thread: a statistic, not state */
    int sentinel_free;         /* the source does not hold the bytes sentinels start with */
    cJSON *kwargs;             /* more variables for every render (zt_template_set_kwargs), or NULL */
};

/* A sentinel stands for message j's content: U+E000, j in decimal, U+E001, padded with a vertical
 * tab either side. Private-use code points are not whitespace and have no case, so strip, trim,
 * upper and lower keep them; a pad that is gone tells that the template strips that side. */
#define SENTINEL_OPEN "\xEE\x80\x80"
#define SENTINEL_CLOSE "\xEE\x80\x81"
#define SENTINEL_PAD '\v'
enum { SENTINEL_BYTES = 1 + 3 + 11 + 3 + 1 + 1 }; /* pad, U+E000, an int, U+E001, pad, NUL */

/* The offset of the first sentinel opening in s[from, n), or n. */
static size_t find_open(const char *s, size_t from, size_t n)
{
    for (const char *p = s + from; (p = memchr(p, SENTINEL_OPEN[0], (size_t)(s + n - p))); p++)
        if ((size_t)(s + n - p) >= 3 && !memcmp(p, SENTINEL_OPEN, 3)) return (size_t)(p - s);
    return n;
}

/* --- the named templates ---------------------------------------------------------------------- */

/* Each renders what the model's published template renders (tests/fixtures/templates holds those
 * and the expected texts). */
/* one template per entry, its lines as they read */
/* clang-format off */
static const struct {
    zt_chat_template kind;
    const char *source;
} BUILTIN[] = {
    {ZT_TEMPLATE_CHATML,
     "{%- for message in messages %}\n"
     "    {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\n"
     "{%- endfor %}\n"
     "{%- if add_generation_prompt %}\n"
     "    {{- '<|im_start|>assistant\\n' }}\n"
     "{%- endif %}\n"},
    {ZT_TEMPLATE_LLAMA2,
     "{%- if messages[0]['role'] == 'system' %}\n"
     "    {%- set system_message = messages[0]['content'] %}\n"
     "    {%- set loop_messages = messages[1:] %}\n"
     "{%- else %}\n"
     "    {%- set loop_messages = messages %}\n"
     "{%- endif %}\n"
     "{%- for message in loop_messages %}\n"
     "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
     "        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\n"
     "    {%- endif %}\n"
     "    {%- set content = message['content'] %}\n"
     "    {%- if loop.first and system_message is defined %}\n"
     "        {%- set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + content %}\n"
     "    {%- endif %}\n"
     "    {%- if message['role'] == 'user' %}\n"
     "        {{- bos_token + '[INST] ' + content.strip() + ' [/INST]' }}\n"
     "    {%- elif message['role'] == 'assistant' %}\n"
     "        {{- ' ' + content.strip() + ' ' + eos_token }}\n"
     "    {%- endif %}\n"
     "{%- endfor %}\n"},
    {ZT_TEMPLATE_LLAMA3,
     "{%- for message in messages %}\n"
     "    {%- if loop.first %}\n"
     "        {{- bos_token }}\n"
     "    {%- endif %}\n"
     "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}\n"
     "    {{- message['content'] | trim + '<|eot_id|>' }}\n"
     "{%- endfor %}\n"
     "{%- if add_generation_prompt %}\n"
     "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
     "{%- endif %}\n"},
    {ZT_TEMPLATE_MISTRAL,
     "{%- if messages[0]['role'] == 'system' %}\n"
     "    {%- set system_message = messages[0]['content'] %}\n"
     "    {%- set loop_messages = messages[1:] %}\n"
     "{%- else %}\n"
     "    {%- set loop_messages = messages %}\n"
     "{%- endif %}\n"
     "{{- bos_token }}\n"
     "{%- for message in loop_messages %}\n"
     "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
     "        {{- raise_exception('After the optional system message, conversation roles must alternate "
     "user/assistant/user/assistant/...') }}\n"
     "    {%- endif %}\n"
     "    {%- if message['role'] == 'user' %}\n"
     "        {%- set content = message['content'] %}\n"
     "        {%- if loop.first and system_message is defined %}\n"
     "            {%- set content = system_message + '\\n\\n' + content %}\n"
     "        {%- endif %}\n"
     "        {{- ' [INST] ' + content + ' [/INST]' }}\n"
     "    {%- elif message['role'] == 'assistant' %}\n"
     "        {{- ' ' + message['content'] + eos_token }}\n"
     "    {%- else %}\n"
     "        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial "
     "optional system message!') }}\n"
     "    {%- endif %}\n"
     "{%- endfor %}\n"},
    {ZT_TEMPLATE_ZEPHYR,
     "{%- for message in messages %}\n"
     "    {%- if message['role'] in ['user', 'system', 'assistant'] %}\n"
     "        {{- '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}\n"
     "    {%- endif %}\n"
     "    {%- if loop.last and add_generation_prompt %}\n"
     "        {{- '<|assistant|>\\n' }}\n"
     "    {%- endif %}\n"
     "{%- endfor %}\n"},
    {ZT_TEMPLATE_ALPACA,
     "{%- if messages and messages[0]['role'] == 'system' %}\n"
     "    {%- set system_message = messages[0]['content'] %}\n"
     "    {%- set loop_messages = messages[1:] %}\n"
     "{%- else %}\n"
     "    {%- set system_message = 'Below is an instruction that describes a task. "
     "Write a response that appropriately completes the request.' %}\n"
     "    {%- set loop_messages = messages %}\n"
     "{%- endif %}\n"
     "{{- bos_token }}{{- system_message }}\n"
     "{%- for message in loop_messages %}\n"
     "    {%- if message['role'] == 'user' %}\n"
     "        {{- '\\n\\n### Instruction:\\n' + message['content'] }}\n"
     "    {%- elif message['role'] == 'assistant' %}\n"
     "        {{- '\\n\\n### Response:\\n' + message['content'] }}{{- eos_token }}\n"
     "    {%- else %}\n"
     "        {{- raise_exception('alpaca has system, user and assistant messages only, not ' + message['role']) }}\n"
     "    {%- endif %}\n"
     "{%- endfor %}\n"
     "{%- if add_generation_prompt %}\n"
     "    {{- '\\n\\n### Response:\\n' }}\n"
     "{%- endif %}\n"},
};
/* clang-format on */

enum { NBUILTIN = sizeof BUILTIN / sizeof BUILTIN[0] };

const char *const zt_chat_template_names[ZT_TEMPLATE_FILE] = {"auto",    "chatml", "llama2", "llama3",
                                                              "mistral", "zephyr", "alpaca"};

const char *zt_template_builtin(zt_chat_template kind)
{
    for (int k = 0; k < NBUILTIN; k++)
        if (BUILTIN[k].kind == kind) return BUILTIN[k].source;
    return NULL;
}

/* --- loading ---------------------------------------------------------------------------------- */

static zt_status make(zt_template **out, const char *name, const char *src, size_t len)
{
    zt_template *t = calloc(1, sizeof *t);
    if (t) t->name = strdup(name);
    if (t) t->source = malloc(len + 1);
    if (!t || !t->name || !t->source) {
        zt_template_free(t);
        return zt_fail(ZT_ENOMEM, "out of memory loading %s", name);
    }
    memcpy(t->source, src, len);
    t->source[len] = 0;
    t->sentinel_free = find_open(src, 0, len) == len;
    zt_status st = zt_jinja_parse(&t->jinja, src, len, name);
    if (st) {
        zt_template_free(t);
        return st;
    }
    *out = t;
    return ZT_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* The chat_template of tokenizer_config.json: a string, or [{name, template}, ...] with a "default". */
/* The chat_template of a JSON file at path (tokenizer_config.json); where it has none, that of
 * `fallback` (NULL: none) if the file is there: an image-text model's processor may keep it alone,
 * in chat_template.json under the same key. */
static zt_status load_config(zt_template **out, const char *path, const char *fallback)
{
    char *text;
    size_t len;
    zt_status st = zt_read_file(path, &text, &len);
    if (st) return st;
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    if (!doc) return zt_fail(ZT_EUSER, "'%s' is not valid JSON", path);
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(doc, "chat_template");
    const char *src = NULL;
    char names[256] = "";
    if (cJSON_IsString(ct)) {
        src = ct->valuestring;
    } else if (cJSON_IsArray(ct)) {
        for (const cJSON *e = ct->child; e && !src; e = e->next) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
            const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(e, "template");
            if (!cJSON_IsString(n) || !cJSON_IsString(tpl)) continue;
            if (!strcmp(n->valuestring, "default")) src = tpl->valuestring;
            else
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", names[0] ? ", " : "",
                         n->valuestring);
        }
        if (!src) {
            cJSON_Delete(doc);
            return zt_fail(ZT_EUSER,
                           "'%s': chat_template has no 'default' entry (it has %s); set tokenizer.chat_template", path,
                           names[0] ? names : "none");
        }
    }
    if (!src) {
        cJSON_Delete(doc);
        if (!ct && fallback && zt_path_exists(fallback)) return load_config(out, fallback, NULL);
        return zt_fail(ZT_EUSER, "'%s' has no chat_template; set tokenizer.chat_template", path);
    }
    char name[4200];
    snprintf(name, sizeof name, "%s:chat_template", path);
    st = make(out, name, src, strlen(src));
    cJSON_Delete(doc);
    return st;
}

static zt_status load_file(zt_template **out, const char *path)
{
    char *text;
    size_t len;
    zt_status st = zt_read_file(path, &text, &len);
    if (st) return st;
    st = make(out, path, text, len);
    free(text);
    return st;
}

zt_status zt_template_kind(const char *text, zt_chat_template *kind)
{
    for (int k = 0; k < ZT_TEMPLATE_FILE; k++)
        if (!strcmp(text, zt_chat_template_names[k])) return *kind = (zt_chat_template)k, ZT_OK;
    if (ends_with(text, ".jinja")) return *kind = ZT_TEMPLATE_FILE, ZT_OK;
    return zt_fail(ZT_EUSER,
                   "unknown chat template '%s': use auto, chatml, llama2, llama3, mistral, zephyr, alpaca "
                   "or a path to a .jinja file",
                   text);
}

zt_status zt_template_load(zt_template **t, zt_chat_template kind, const char *file, const char *model_dir)
{
    *t = NULL;
    const char *src = zt_template_builtin(kind);
    if (src) {
        char name[64];
        snprintf(name, sizeof name, "chat template '%s'", zt_chat_template_names[kind]);
        return make(t, name, src, strlen(src));
    }
    if (kind == ZT_TEMPLATE_FILE) return load_file(t, file);
    if (!model_dir || !*model_dir) return zt_fail(ZT_EUSER, "chat template 'auto' needs the model's directory");
    char path[4096];
    zt_status st = zt_path_join(path, sizeof path, model_dir, "chat_template.jinja");
    if (st) return st;
    if (zt_path_exists(path)) return load_file(t, path); /* what newer transformers save */
    char processor[4096];
    if ((st = zt_path_join(path, sizeof path, model_dir, "tokenizer_config.json")) ||
        (st = zt_path_join(processor, sizeof processor, model_dir, "chat_template.json")))
        return st;
    return load_config(t, path, processor);
}

void zt_template_free(zt_template *t)
{
    if (!t) return;
    zt_jinja_free(t->jinja);
    cJSON_Delete(t->kwargs);
    free(t->name);
    free(t->source);
    free(t);
}

const char *zt_template_source(const zt_template *t) { return t->source; }
const char *zt_template_name(const zt_template *t) { return t->name; }
uint64_t zt_template_rendered(const zt_template *t)
{
    return atomic_load_explicit(&((zt_template *)t)->rendered, memory_order_relaxed);
}

/* --- rendering -------------------------------------------------------------------------------- */

/* A message's members beside role and content (tool_calls, tool_call_id, name, reasoning_content...),
 * added to m by reference as the data has them. */
static int add_members(cJSON *m, const cJSON *json)
{
    for (const cJSON *e = json ? json->child : NULL; e; e = e->next)
        if (e->string && strcmp(e->string, "role") && strcmp(e->string, "content") &&
            !cJSON_AddItemReferenceToObject(m, e->string, (cJSON *)e))
            return 0;
    return 1;
}

/* kwargs may not set what a render passes itself. */
static zt_status check_kwargs(const zt_template *t, const cJSON *kwargs)
{
    static const char *const own[] = {"messages", "add_generation_prompt", "tools", "documents", "bos_token",
                                      "eos_token"};
    for (const cJSON *e = kwargs ? kwargs->child : NULL; e; e = e->next)
        for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
            if (!strcmp(e->string, own[i]))
                return zt_fail(ZT_EUSER, "%s: chat_template_kwargs may not set '%s', which zt passes itself", t->name,
                               own[i]);
    return ZT_OK;
}

zt_status zt_template_set_kwargs(zt_template *t, const char *json)
{
    cJSON *k = cJSON_Parse(json);
    if (!cJSON_IsObject(k)) {
        cJSON_Delete(k);
        return zt_fail(ZT_EUSER, "%s: chat_template_kwargs '%.64s' is not a JSON object", t->name, json);
    }
    zt_status st = check_kwargs(t, k);
    if (st) {
        cJSON_Delete(k);
        return st;
    }
    cJSON_Delete(t->kwargs);
    t->kwargs = k;
    return ZT_OK;
}

/* The kwargs of the template and of v (v's over the template's), by reference. */
static int add_kwargs(cJSON *vars, const zt_template *t, const zt_template_vars *v)
{
    for (const cJSON *e = t->kwargs ? t->kwargs->child : NULL; e; e = e->next)
        if (!cJSON_GetObjectItemCaseSensitive(v->kwargs, e->string) &&
            !cJSON_AddItemReferenceToObject(vars, e->string, (cJSON *)e))
            return 0;
    for (const cJSON *e = v->kwargs ? v->kwargs->child : NULL; e; e = e->next)
        if (!cJSON_AddItemReferenceToObject(vars, e->string, (cJSON *)e)) return 0;
    return 1;
}

/* The variables transformers passes: messages, add_generation_prompt, tools (or none), documents
 * (none), the special tokens that exist, and the kwargs. msgs and v stay owned by the caller. */
static zt_status render(const zt_template *t, const zt_message *msgs, int n, int add_generation_prompt,
                        const zt_template_vars *v, char **out, size_t *len)
{
    cJSON *vars = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(vars, "messages");
    int ok = vars && list;
    for (int i = 0; ok && i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON *content = msgs[i].content ? cJSON_CreateStringReference(msgs[i].content) : cJSON_CreateNull();
        ok = m && cJSON_AddItemToArray(list, m) &&
             cJSON_AddItemToObject(m, "role", cJSON_CreateStringReference(msgs[i].role)) &&
             cJSON_AddItemToObject(m, "content", content) && add_members(m, msgs[i].json);
    }
    ok = ok && cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt) &&
         (v->tools ? cJSON_AddItemReferenceToObject(vars, "tools", (cJSON *)v->tools)
                   : cJSON_AddNullToObject(vars, "tools") != NULL) &&
         cJSON_AddNullToObject(vars, "documents");
    if (ok && v->bos) ok = cJSON_AddItemToObject(vars, "bos_token", cJSON_CreateStringReference(v->bos));
    if (ok && v->eos) ok = cJSON_AddItemToObject(vars, "eos_token", cJSON_CreateStringReference(v->eos));
    ok = ok && add_kwargs(vars, t, v);
    zt_status st = ok ? zt_jinja_render(t->jinja, vars, NULL, out, len)
                      : zt_fail(ZT_ENOMEM, "out of memory rendering %s", t->name);
    cJSON_Delete(vars);
    if (!st) atomic_fetch_add_explicit(&((zt_template *)t)->rendered, *len, memory_order_relaxed);
    return st;
}

static zt_status check_input(const zt_template *t, const zt_message *msgs, int n, const zt_template_vars *v)
{
    if (n < 0) return zt_fail(ZT_EUSER, "%s: negative message count %d", t->name, n);
    for (int i = 0; i < n; i++)
        if (!msgs[i].role) return zt_fail(ZT_EUSER, "%s: message %d has no role", t->name, i + 1);
    return check_kwargs(t, v->kwargs);
}

zt_status zt_template_render(const zt_template *t, const zt_message *msgs, int n, int add_generation_prompt,
                             const zt_template_vars *v, char **out)
{
    *out = NULL;
    zt_status st = check_input(t, msgs, n, v);
    size_t len;
    return st ? st : render(t, msgs, n, add_generation_prompt, v, out, &len);
}

/* --- loss spans: prefix rendering --------------------------------------------------------------- */

static zt_status closing_span(const zt_template *t, const zt_message *msgs, int n, int i, const zt_template_vars *v,
                              const char *text, size_t len, const char *q, size_t nq, zt_span *span, int *ok);

/* Whether the template gets tool calls with the message: its span then holds more than its content. */
static int has_tool_calls(const zt_message *m)
{
    return cJSON_GetArraySize(m->json ? cJSON_GetObjectItemCaseSensitive(m->json, "tool_calls") : NULL) > 0;
}

/* The span of a turn whose start the template drops when the conversation goes on past it (Qwen3 writes
 * an empty <think></think> into the last turn only): text and q both start with the generation
 * prompt's rendering (np bytes); the turn is q's rest, and its span in text the longest end of it
 * that text has right after np. 0 when there is none. */
static int dropped_start_span(const char *q, size_t np, size_t nq, const char *text, size_t len, zt_span *span)
{
    const char *turn = q + np, *b = text + np; /* the longest end of turn that b starts with (KMP on b) */
    size_t nt = nq - np, m = len - np < nt ? len - np : nt, k = 0;
    size_t *fail = m ? malloc(m * sizeof *fail) : NULL;
    if (!fail) return 0;
    fail[0] = 0;
    for (size_t j = 1; j < m; j++) {
        while (k && b[j] != b[k]) k = fail[k - 1];
        fail[j] = k += b[j] == b[k];
    }
    k = 0;
    for (size_t j = 0; j < nt; j++) {
        if (k == m) k = fail[k - 1];
        while (k && turn[j] != b[k]) k = fail[k - 1];
        k += turn[j] == b[k];
    }
    free(fail);
    *span = (zt_span){np, np + k};
    return k > 0;
}

/* The span of assistant message i: [len(P), len(Q)) where P renders messages [0, i) with the
 * generation prompt and Q messages [0, i] (the text itself when i is the last); text is the whole
 * conversation. Where Q does not start with P or the text with Q, the span is the closing text's
 * (closing_span). *spent counts the bytes rendered. */
static zt_status assistant_span(const zt_template *t, const zt_message *msgs, int n, int i, const zt_template_vars *v,
                                const char *text, size_t len, zt_span *span, int *closing, uint64_t *spent)
{
    char *p, *q = NULL;
    size_t np, nq = len;
    zt_status st = render(t, msgs, i, 1, v, &p, &np);
    if (st) return st;
    if (i + 1 < n && (st = render(t, msgs, i + 1, 0, v, &q, &nq))) {
        free(p);
        return st;
    }
    *spent += np + (q ? nq : 0);
    const char *qt = q ? q : text;
    int starts = nq >= np && !memcmp(p, qt, np), closed = 0;
    *closing = !(starts && len >= nq && !memcmp(text, qt, nq));
    if (!*closing) {
        span->begin = np, span->end = nq;
    } else if (!(st = has_tool_calls(&msgs[i]) ? ZT_OK
                                               : closing_span(t, msgs, n, i, v, text, len, qt, nq, span, &closed)) &&
               !closed &&
               !(starts && len >= np && !memcmp(text, p, np) &&
                 (closed = dropped_start_span(qt, np, nq, text, len, span)))) {
        char why[96];
        if (!starts)
            snprintf(why, sizeof why, "messages 1..%d do not start with messages 1..%d and the generation prompt",
                     i + 1, i);
        else snprintf(why, sizeof why, "the whole conversation does not start with its first %d messages", i + 1);
        st = zt_fail(ZT_EUSER,
                     "%s: the template does not render conversations incrementally (%s) and the %s of "
                     "assistant message %d cannot be told apart in its text; use data.train_on = \"all\" or another "
                     "chat template",
                     t->name, why, has_tool_calls(&msgs[i]) ? "tool calls" : "content", i + 1);
    }
    free(p);
    free(q);
    return st;
}

/* --- loss spans: the sentinel rendering (template.h) ------------------------------------------- */

enum { MAX_WINDOW_MESSAGES = 16, MAX_PLACES = 16 };

static int has_open(const char *s) { return s && find_open(s, 0, strlen(s)) < strlen(s); }

/* The message of the sentinel at s[at] (*after: the offset past it); -1 if it is not one standing
 * for a content. */
static int read_sentinel(const char *s, size_t n, size_t at, const zt_message *msgs, int nmsgs, size_t *after)
{
    size_t i = at + 3;
    int64_t j = 0;
    while (i < n && i - at < 13 && s[i] >= '0' && s[i] <= '9') j = j * 10 + (s[i++] - '0');
    if (i == at + 3 || n - i < 3 || memcmp(s + i, SENTINEL_CLOSE, 3) || j >= nmsgs || !msgs[j].content) return -1;
    *after = i + 3;
    return (int)j;
}

/* Where the text holds message msg's content (stripped as its sentinel was) for one of its sentinels. */
typedef struct occurrence {
    int msg;
    size_t begin, end;
} occurrence;

/* A cut is where a prefix rendering ends: messages [0, k), with the generation prompt when agp. */
typedef struct cut {
    int k, agp;
    size_t at;
} cut;

/* What the sentinel rendering shows around a cut: its window, the text between the occurrences
 * either side of it (the text's ends where there are none), and the messages [lo, hi] from the one
 * of the occurrence before to the one of the occurrence after. */
typedef struct place {
    int k, agp, at_start, at_end, lo, hi;
    size_t begin, end;
} place;

typedef struct learned {
    place at;
    size_t offset; /* of the rendered cut in its window */
} learned;

/* A conversation's text laid out by its sentinel rendering, and the places of the cuts rendered. */
typedef struct layout {
    const zt_template *t;
    const zt_message *msgs;
    int n;
    const zt_template_vars *v;
    const char *text;
    size_t len;
    occurrence *occ; /* in the order of the text */
    int nocc, cap;
    int *before, *from; /* [k], k in 0..n: the last occurrence of messages [0, k), the first of [k, n) */
    learned known[MAX_PLACES];
    int nknown;
} layout;

static zt_status add_occurrence(layout *l, occurrence o)
{
    if (l->nocc == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        occurrence *occ = realloc(l->occ, (size_t)cap * sizeof *occ);
        if (!occ) return zt_fail(ZT_ENOMEM, "out of memory finding the spans of %s", l->t->name);
        l->occ = occ, l->cap = cap;
    }
    l->occ[l->nocc++] = o;
    return ZT_OK;
}

/* Lays the text out by the sentinel rendering s: *ok when the two are equal outside the sentinels
 * and each sentinel stands in the text for its content, stripped on the sides it lost its pad. */
static zt_status align(layout *l, const char *s, size_t ns, int *ok)
{
    *ok = 0;
    size_t p = 0, q = 0, open = find_open(s, 0, ns);
    for (;;) {
        int left = !(open < ns && open > p && s[open - 1] == SENTINEL_PAD); /* stripped on the left */
        size_t literal = open - p - !left;
        if (l->len - q < literal || memcmp(s + p, l->text + q, literal)) return ZT_OK;
        q += literal;
        if (open == ns) break;
        size_t after, begin;
        int j = read_sentinel(s, ns, open, l->msgs, l->n, &after);
        if (j < 0) return ZT_OK;
        size_t next = find_open(s, after, ns);
        int right = !(after < ns && s[after] == SENTINEL_PAD);
        if (next < ns && next == after + 1 && !right) return ZT_OK; /* one pad between two sentinels: whose? */
        const char *c = l->msgs[j].content;
        size_t image = zt_jinja_strip(c, strlen(c), left, right, &begin);
        if (l->len - q < image || memcmp(c + begin, l->text + q, image)) return ZT_OK;
        zt_status st = add_occurrence(l, (occurrence){j, q, q + image});
        if (st) return st;
        q += image, p = after + !right, open = next;
    }
    *ok = q == l->len;
    return ZT_OK;
}

static zt_status index_cuts(layout *l)
{
    int n = l->n;
    l->before = malloc((size_t)(n + 1) * sizeof *l->before);
    l->from = malloc((size_t)(n + 1) * sizeof *l->from);
    if (!l->before || !l->from) return zt_fail(ZT_ENOMEM, "out of memory finding the spans of %s", l->t->name);
    for (int k = 0; k <= n; k++) l->before[k] = -1, l->from[k] = l->nocc;
    for (int o = 0; o < l->nocc; o++) {
        l->before[l->occ[o].msg + 1] = o;
        if (l->from[l->occ[o].msg] == l->nocc) l->from[l->occ[o].msg] = o;
    }
    for (int k = 0; k < n; k++)
        if (l->before[k + 1] < l->before[k]) l->before[k + 1] = l->before[k];
    for (int k = n - 1; k >= 0; k--)
        if (l->from[k] > l->from[k + 1]) l->from[k] = l->from[k + 1];
    return ZT_OK;
}

/* The place of cut (k, agp); 0 when the occurrences of messages [0, k) do not all come before
 * those of [k, n), or the window spans more than MAX_WINDOW_MESSAGES. */
static int find_place(const layout *l, int k, int agp, place *p)
{
    int left = l->before[k], right = l->from[k];
    if (right != left + 1) return 0;
    p->k = k, p->agp = agp, p->at_start = left < 0, p->at_end = right == l->nocc;
    p->lo = left >= 0 ? l->occ[left].msg : 0;
    p->hi = right < l->nocc ? l->occ[right].msg : l->n - 1;
    p->begin = left >= 0 ? l->occ[left].end : 0;
    p->end = right < l->nocc ? l->occ[right].begin : l->len;
    return p->hi - p->lo <= MAX_WINDOW_MESSAGES;
}

/* Cuts alike: the same generation prompt, window text, and messages around at the same distances
 * (roles, and whether they have content). */
static int same_place(const layout *l, const place *a, const place *b)
{
    if (a->agp != b->agp || a->at_start != b->at_start || a->at_end != b->at_end || a->k - a->lo != b->k - b->lo ||
        a->hi - a->k != b->hi - b->k || a->end - a->begin != b->end - b->begin)
        return 0;
    for (int d = 0; d <= a->hi - a->lo; d++) {
        const zt_message *x = &l->msgs[a->lo + d], *y = &l->msgs[b->lo + d];
        if (strcmp(x->role, y->role) || !x->content != !y->content) return 0;
    }
    return !memcmp(l->text + a->begin, l->text + b->begin, a->end - a->begin);
}

static const learned *lookup(const layout *l, const place *p)
{
    for (int i = 0; i < l->nknown; i++)
        if (same_place(l, &l->known[i].at, p)) return &l->known[i];
    return NULL;
}

/* Records where a rendered cut fell: 0 when outside its window, elsewhere in it than a cut alike
 * did, or one place too many. */
static int learn(layout *l, const place *p, size_t at)
{
    if (at < p->begin || at > p->end) return 0;
    const learned *same = lookup(l, p);
    if (same) return same->offset == at - p->begin;
    if (l->nknown == MAX_PLACES) return 0;
    l->known[l->nknown++] = (learned){*p, at - p->begin};
    return 1;
}

/* Renders cut (k, agp) and learns it: *ok when the text starts with the rendering and learn agrees.
 * A render that fails is left to prefix rendering, which reports it. */
static zt_status render_cut(layout *l, int k, int agp, size_t *at, int *ok)
{
    char *r;
    size_t nr;
    place p;
    *ok = 0;
    if (!find_place(l, k, agp, &p)) return ZT_OK;
    zt_status st = render(l->t, l->msgs, k, agp, l->v, &r, &nr);
    if (st) return st == ZT_ENOMEM ? st : ZT_OK;
    *ok = nr <= l->len && !memcmp(r, l->text, nr) && learn(l, &p, nr);
    *at = nr;
    free(r);
    return ZT_OK;
}

/* Where cut (k, agp) falls: the text's end for the whole conversation, else where a cut alike fell
 * in its window, else found by rendering it. */
static zt_status locate(layout *l, int k, int agp, size_t *at, int *ok)
{
    place p;
    const learned *same;
    *ok = 1;
    if (k == l->n && !agp) *at = l->len;
    else if (!(*ok = find_place(l, k, agp, &p))) return ZT_OK;
    else if ((same = lookup(l, &p))) *at = p.begin + same->offset;
    else return render_cut(l, k, agp, at, ok);
    return ZT_OK;
}

/* The text of the sentinel rendering: each content replaced by its sentinel (none stays none). */
static zt_status render_sentinels(const layout *l, char **s, size_t *ns)
{
    zt_message *m = malloc((size_t)l->n * sizeof *m + 1);
    char *names = malloc((size_t)l->n * SENTINEL_BYTES + 1);
    zt_status st = m && names ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory finding the spans of %s", l->t->name);
    for (int j = 0; !st && j < l->n; j++) {
        snprintf(names + (size_t)j * SENTINEL_BYTES, SENTINEL_BYTES, "%c" SENTINEL_OPEN "%d" SENTINEL_CLOSE "%c",
                 SENTINEL_PAD, j, SENTINEL_PAD);
        m[j] = l->msgs[j];
        if (m[j].content) m[j].content = names + (size_t)j * SENTINEL_BYTES;
    }
    if (!st) st = render(l->t, m, l->n, 0, l->v, s, ns);
    free(m);
    free(names);
    return st;
}

/* Whether sentinels can be told from everything else the template writes. */
static int sentinels_stand_out(const layout *l)
{
    if (!l->t->sentinel_free || has_open(l->v->bos) || has_open(l->v->eos)) return 0;
    for (int j = 0; j < l->n; j++)
        if (has_open(l->msgs[j].role)) return 0;
    return 1;
}

/* Lays the text out and learns the cuts rendered so far and the last cut from..: *ok when all agree. */
static zt_status lay_out(layout *l, const cut *exact, int nexact, int from, int *ok)
{
    char *s;
    size_t ns, at;
    *ok = 0;
    if (!sentinels_stand_out(l)) return ZT_OK;
    zt_status st = render_sentinels(l, &s, &ns);
    if (st) return st == ZT_ENOMEM ? st : ZT_OK; /* prefix rendering will say what fails */
    st = align(l, s, ns, ok);
    free(s);
    if (st || !*ok || (st = index_cuts(l))) return st;
    for (int c = 0; *ok && c < nexact; c++) {
        place p;
        *ok = find_place(l, exact[c].k, exact[c].agp, &p) && learn(l, &p, exact[c].at);
    }
    /* the last cut that is not the text's end is rendered, which checks the turns far from those rendered */
    int last = l->n - 1;
    while (last > from && strcmp(l->msgs[last].role, "assistant")) last--;
    if (*ok) st = last + 1 < l->n ? render_cut(l, last + 1, 0, &at, ok) : render_cut(l, last, 1, &at, ok);
    return st;
}

/* The spans of the assistant messages from.. by the sentinel rendering, given the cuts exact[]
 * rendered so far: *spans (indexed by message, malloc'ed) or NULL when a check fails. */
static zt_status sentinel_spans(const zt_template *t, const zt_message *msgs, int n, const zt_template_vars *v,
                                const char *text, size_t len, const cut *exact, int nexact, int from, zt_span **spans)
{
    layout l = {.t = t, .msgs = msgs, .n = n, .v = v, .text = text, .len = len};
    int ok;
    *spans = NULL;
    zt_status st = lay_out(&l, exact, nexact, from, &ok);
    zt_span *s = !st && ok ? calloc((size_t)n, sizeof *s) : NULL;
    if (!st && ok && !s) st = zt_fail(ZT_ENOMEM, "out of memory finding the spans of %s", t->name);
    for (int i = from; s && !st && ok && i < n; i++)
        if (!strcmp(msgs[i].role, "assistant") && !(st = locate(&l, i, 1, &s[i].begin, &ok)) && ok &&
            !(st = locate(&l, i + 1, 0, &s[i].end, &ok)))
            ok = s[i].begin <= s[i].end;
    if (!st && ok) *spans = s;
    else free(s);
    free(l.occ);
    free(l.before);
    free(l.from);
    return st;
}

/* --- loss spans: the closing text --------------------------------------------------------------- */

/* The last place where text holds message i's content, laid out by the sentinel rendering of
 * msgs[0, n): *ok when the layout holds. */
static zt_status find_content(const zt_template *t, const zt_message *msgs, int n, int i, const zt_template_vars *v,
                              const char *text, size_t len, occurrence *found, int *ok)
{
    layout l = {.t = t, .msgs = msgs, .n = n, .v = v, .text = text, .len = len};
    char *s;
    size_t ns;
    *ok = 0;
    if (!msgs[i].content || !sentinels_stand_out(&l)) return ZT_OK;
    zt_status st = render_sentinels(&l, &s, &ns);
    if (st) return st == ZT_ENOMEM ? st : ZT_OK;
    st = align(&l, s, ns, ok);
    free(s);
    int k = l.nocc;
    while (k-- > 0 && l.occ[k].msg != i) {
    }
    *ok = !st && *ok && k >= 0;
    if (*ok) *found = l.occ[k];
    free(l.occ);
    return st;
}

/* Where the closing text's match text[from, end) is cut back to: not inside a tag it opens there
 * (a '<' or '[' without its '>' or ']'), unless the whole closing text matched; the texts part in
 * "<|end|>\n<|user|>" and "<|end|>\n<|endoftext|>" after "<|", which is no token of either. */
static size_t partial_tag_start(const char *text, size_t from, size_t end, int whole)
{
    if (whole) return end;
    for (size_t k = end; k-- > from;) {
        if (text[k] == '>' || text[k] == ']') return end;
        if (text[k] == '<' || text[k] == '[') return k;
    }
    return end;
}

/* Where the closing text's match text[from, end) is cut back to when it holds EOS: past EOS and
 * the whitespace after it (Command R7B's "<|END_OF_TURN_TOKEN|>" is followed by the next turn's
 * "<|START_OF_TURN_TOKEN|>" in the text and in Q alike). */
static size_t through_eos(const char *text, size_t from, size_t end, const char *eos)
{
    size_t n = eos ? strlen(eos) : 0;
    for (size_t k = from; n && k + n <= end; k++)
        if (!memcmp(text + k, eos, n)) {
            k += n;
            while (k < end && (text[k] == '\n' || text[k] == ' ' || text[k] == '\t' || text[k] == '\r')) k++;
            return k;
        }
    return end;
}

/* The span of assistant message i where the template rewrites turns depending on what follows
 * them (drops an earlier turn's reasoning, ends only the last turn with EOS): the content where the
 * whole text has it, and after it as much of the closing text as the whole text has there. The
 * closing text is what the template writes after the content in q, which renders messages [0, i]:
 * the turn's end as the template writes it when the conversation ends there. *ok when both texts
 * show where the content is. */
static zt_status closing_span(const zt_template *t, const zt_message *msgs, int n, int i, const zt_template_vars *v,
                              const char *text, size_t len, const char *q, size_t nq, zt_span *span, int *ok)
{
    occurrence in_text, in_q;
    zt_status st = find_content(t, msgs, n, i, v, text, len, &in_text, ok);
    if (!st && *ok) st = find_content(t, msgs, i + 1, i, v, q, nq, &in_q, ok);
    if (st || !*ok) return st;
    size_t end = in_text.end, c = in_q.end;
    while (end < len && c < nq && text[end] == q[c]) end++, c++;
    end = partial_tag_start(text, in_text.end, end, c == nq);
    *span = (zt_span){in_text.begin, through_eos(text, in_text.end, end, v->eos)};
    return ZT_OK;
}

/* --- loss spans --------------------------------------------------------------------------------- */

const char *const zt_train_on_names[3] = {"assistant", "all", "last"};

/* Prefix rendering finds the spans while it has rendered at most half the text or few turns are
 * left; then the sentinel rendering places the rest, unless its checks fail. */
static int time_for_sentinels(uint64_t spent, size_t len, int assistants_left)
{
    return spent > len / 2 && assistants_left >= 3;
}

zt_status zt_template_each_span(const zt_template *t, const zt_message *msgs, int n, const zt_template_vars *v,
                                zt_train_on train_on, zt_span_fn each, void *ctx, char **text, size_t *len)
{
    *text = NULL;
    int all = train_on == ZT_TRAIN_ALL, last = train_on == ZT_TRAIN_LAST, stop = 0, first = 0;
    zt_status st;
    if ((st = check_input(t, msgs, n, v)) || (st = render(t, msgs, n, 0, v, text, len))) return st;
    if (all && *len) st = each(ctx, *text, (zt_span){0, *len}, &stop);
    if (last)
        for (first = n - 1; first >= 0 && strcmp(msgs[first].role, "assistant"); first--) {
        }
    int left = 0, nexact = 0, tried = 0;
    for (int i = first; !all && i >= 0 && i < n; i++) left += !strcmp(msgs[i].role, "assistant");
    cut *exact = left >= 3 ? malloc(2 * (size_t)left * sizeof *exact) : NULL;
    if (left >= 3 && !exact) st = zt_fail(ZT_ENOMEM, "out of memory finding the spans of %s", t->name);
    zt_span *placed = NULL;
    uint64_t spent = 0;
    for (int i = first; !st && !all && !stop && i >= 0 && i < n; i++) {
        if (strcmp(msgs[i].role, "assistant")) continue;
        if (!tried && time_for_sentinels(spent, *len, left)) {
            tried = 1;
            if ((st = sentinel_spans(t, msgs, n, v, *text, *len, exact, nexact, i, &placed))) break;
        }
        left--;
        zt_span s;
        int closing = 0;
        if (placed) {
            s = placed[i];
        } else if (!(st = assistant_span(t, msgs, n, i, v, *text, *len, &s, &closing, &spent)) && exact && !closing) {
            exact[nexact++] = (cut){i, 1, s.begin};
            exact[nexact++] = (cut){i + 1, 0, s.end};
        }
        tried |= closing; /* the sentinel rendering places prefix renderings' cuts: not for such a template */
        if (!st && s.end > s.begin) st = each(ctx, *text, s, &stop);
    }
    free(exact);
    free(placed);
    if (st) {
        free(*text);
        *text = NULL;
    }
    return st;
}

typedef struct span_list {
    zt_span *items;
    int n;
} span_list;

static zt_status collect_span(void *ctx, const char *text, zt_span span, int *stop)
{
    (void)text, (void)stop;
    span_list *l = ctx;
    l->items[l->n++] = span;
    return ZT_OK;
}

zt_status zt_template_spans(const zt_template *t, const zt_message *msgs, int n, const zt_template_vars *v,
                            zt_train_on train_on, zt_span **spans, int *nspans, char **text)
{
    *spans = NULL, *nspans = 0, *text = NULL;
    span_list l = {calloc((size_t)(n > 0 ? n : 1), sizeof *l.items), 0}; /* at most one span a message */
    if (!l.items) return zt_fail(ZT_ENOMEM, "out of memory finding the spans of %s", t->name);
    size_t len;
    zt_status st = zt_template_each_span(t, msgs, n, v, train_on, collect_span, &l, text, &len);
    if (st) {
        free(l.items);
        return st;
    }
    *spans = l.items;
    *nspans = l.n;
    return ZT_OK;
}
