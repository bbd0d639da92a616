/* data/template: named chat templates, loading "auto" from a model directory,
 * rendering conversations, and loss spans by prefix rendering. */
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
    char *name;   /* for messages */
    char *source;
    zt_jinja *jinja;
    _Atomic uint64_t rendered; /* bytes rendered so far, from every thread: a statistic, not state */
};

/* --- the named templates ---------------------------------------------------------------------- */

/* Each renders what the model's published template renders (tests/fixtures/templates holds those
 * and the expected texts). */
/* one template per entry, its lines as they read */
/* clang-format off */
static const struct {
    const char *name, *source;
} BUILTIN[] = {
    {"chatml",
     "{%- for message in messages %}\n"
     "    {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\n"
     "{%- endfor %}\n"
     "{%- if add_generation_prompt %}\n"
     "    {{- '<|im_start|>assistant\\n' }}\n"
     "{%- endif %}\n"},
    {"llama2",
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
    {"llama3",
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
    {"mistral",
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
    {"zephyr",
     "{%- for message in messages %}\n"
     "    {%- if message['role'] in ['user', 'system', 'assistant'] %}\n"
     "        {{- '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}\n"
     "    {%- endif %}\n"
     "    {%- if loop.last and add_generation_prompt %}\n"
     "        {{- '<|assistant|>\\n' }}\n"
     "    {%- endif %}\n"
     "{%- endfor %}\n"},
    {"alpaca",
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

const char *const zt_template_names[] = {"chatml", "llama2", "llama3", "mistral", "zephyr", "alpaca", NULL};

const char *zt_template_builtin(const char *name)
{
    for (int k = 0; k < NBUILTIN; k++)
        if (!strcmp(BUILTIN[k].name, name)) return BUILTIN[k].source;
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
static zt_status load_config(zt_template **out, const char *path)
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

zt_status zt_template_load(zt_template **t, const char *name_or_path, const char *model_dir)
{
    *t = NULL;
    const char *src = zt_template_builtin(name_or_path);
    if (src) {
        char name[64];
        snprintf(name, sizeof name, "chat template '%s'", name_or_path);
        return make(t, name, src, strlen(src));
    }
    if (ends_with(name_or_path, ".jinja")) return load_file(t, name_or_path);
    if (strcmp(name_or_path, "auto"))
        return zt_fail(ZT_EUSER,
                       "unknown chat template '%s': use auto, chatml, llama2, llama3, mistral, zephyr, alpaca "
                       "or a path to a .jinja file",
                       name_or_path);
    if (!model_dir || !*model_dir) return zt_fail(ZT_EUSER, "chat template 'auto' needs the model's directory");
    char path[4096];
    zt_status st = zt_path_join(path, sizeof path, model_dir, "chat_template.jinja");
    if (st) return st;
    if (zt_path_exists(path)) return load_file(t, path); /* what newer transformers save */
    if ((st = zt_path_join(path, sizeof path, model_dir, "tokenizer_config.json"))) return st;
    return load_config(t, path);
}

void zt_template_free(zt_template *t)
{
    if (!t) return;
    zt_jinja_free(t->jinja);
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

/* The variables transformers passes: messages, add_generation_prompt, tools and documents (none),
 * and the special tokens that exist. msgs stays owned by the caller. */
static zt_status render(const zt_template *t, const zt_message *msgs, int n, int add_generation_prompt,
                        const char *bos, const char *eos, char **out, size_t *len)
{
    cJSON *vars = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(vars, "messages");
    int ok = vars && list;
    for (int i = 0; ok && i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON *content = msgs[i].content ? cJSON_CreateStringReference(msgs[i].content) : cJSON_CreateNull();
        ok = m && cJSON_AddItemToArray(list, m) &&
             cJSON_AddItemToObject(m, "role", cJSON_CreateStringReference(msgs[i].role)) &&
             cJSON_AddItemToObject(m, "content", content);
    }
    ok = ok && cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt) &&
         cJSON_AddNullToObject(vars, "tools") && cJSON_AddNullToObject(vars, "documents");
    if (ok && bos) ok = cJSON_AddItemToObject(vars, "bos_token", cJSON_CreateStringReference(bos));
    if (ok && eos) ok = cJSON_AddItemToObject(vars, "eos_token", cJSON_CreateStringReference(eos));
    zt_status st = ok ? zt_jinja_render(t->jinja, vars, NULL, out, len)
                      : zt_fail(ZT_ENOMEM, "out of memory rendering %s", t->name);
    cJSON_Delete(vars);
    if (!st) atomic_fetch_add_explicit(&((zt_template *)t)->rendered, *len, memory_order_relaxed);
    return st;
}

static zt_status check_messages(const zt_template *t, const zt_message *msgs, int n)
{
    if (n < 0) return zt_fail(ZT_EUSER, "%s: negative message count %d", t->name, n);
    for (int i = 0; i < n; i++)
        if (!msgs[i].role) return zt_fail(ZT_EUSER, "%s: message %d has no role", t->name, i + 1);
    return ZT_OK;
}

zt_status zt_template_render(const zt_template *t, const zt_message *msgs, int n, int add_generation_prompt,
                             const char *bos, const char *eos, char **out)
{
    *out = NULL;
    zt_status st = check_messages(t, msgs, n);
    size_t len;
    return st ? st : render(t, msgs, n, add_generation_prompt, bos, eos, out, &len);
}

/* The span of assistant message i: [len(P), len(Q)) where P renders messages [0, i) with the
 * generation prompt and Q messages [0, i]; text is the whole conversation. */
static zt_status assistant_span(const zt_template *t, const zt_message *msgs, int i, const char *bos, const char *eos,
                                const char *text, size_t len, zt_span *span)
{
    char *p, *q;
    size_t np, nq;
    zt_status st = render(t, msgs, i, 1, bos, eos, &p, &np);
    if (st) return st;
    if ((st = render(t, msgs, i + 1, 0, bos, eos, &q, &nq))) {
        free(p);
        return st;
    }
    if (nq < np || memcmp(p, q, np))
        st = zt_fail(ZT_EUSER,
                     "%s: the template does not render conversations incrementally: messages 1..%d do not start "
                     "with messages 1..%d and the generation prompt, so assistant message %d cannot be located; "
                     "use data.train_on = \"all\" or another chat template",
                     t->name, i + 1, i, i + 1);
    else if (len < nq || memcmp(text, q, nq))
        st = zt_fail(ZT_EUSER,
                     "%s: the template does not render conversations incrementally: the whole conversation does "
                     "not start with its first %d messages, so assistant message %d cannot be located; "
                     "use data.train_on = \"all\" or another chat template",
                     t->name, i + 1, i + 1);
    span->begin = np;
    span->end = nq;
    free(p);
    free(q);
    return st;
}

const char *const zt_train_on_names[3] = {"assistant", "all", "last"};

zt_status zt_template_each_span(const zt_template *t, const zt_message *msgs, int n, const char *bos, const char *eos,
                                zt_train_on train_on, zt_span_fn each, void *ctx, char **text, size_t *len)
{
    *text = NULL;
    int all = train_on == ZT_TRAIN_ALL, last = train_on == ZT_TRAIN_LAST, stop = 0, first = 0;
    zt_status st;
    if ((st = check_messages(t, msgs, n)) || (st = render(t, msgs, n, 0, bos, eos, text, len))) return st;
    if (all && *len) st = each(ctx, *text, (zt_span){0, *len}, &stop);
    if (last)
        for (first = n - 1; first >= 0 && strcmp(msgs[first].role, "assistant"); first--) {}
    for (int i = first; !st && !all && !stop && i >= 0 && i < n; i++) {
        if (strcmp(msgs[i].role, "assistant")) continue;
        zt_span s;
        if (!(st = assistant_span(t, msgs, i, bos, eos, *text, *len, &s)) && s.end > s.begin)
            st = each(ctx, *text, s, &stop);
    }
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

zt_status zt_template_spans(const zt_template *t, const zt_message *msgs, int n, const char *bos, const char *eos,
                            zt_train_on train_on, zt_span **spans, int *nspans, char **text)
{
    *spans = NULL, *nspans = 0, *text = NULL;
    span_list l = {calloc((size_t)(n > 0 ? n : 1), sizeof *l.items), 0}; /* at most one span a message */
    if (!l.items) return zt_fail(ZT_ENOMEM, "out of memory finding the spans of %s", t->name);
    size_t len;
    zt_status st = zt_template_each_span(t, msgs, n, bos, eos, train_on, collect_span, &l, text, &len);
    if (st) {
        free(l.items);
        return st;
    }
    *spans = l.items;
    *nspans = l.n;
    return ZT_OK;
}
