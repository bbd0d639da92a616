#include "messages.h"

#include <stdlib.h>
#include <string.h>

#include "jsonl.h"

/* ShareGPT's speakers; a tool's answer is "tool" (Hermes' function-calling data) or "observation",
 * and "function_call" a turn of tool calls (LLaMA-Factory's) */
static const char *const SHAREGPT_ROLES[][2] = {{"human", "user"},       {"user", "user"},
                                                {"gpt", "assistant"},    {"assistant", "assistant"},
                                                {"system", "system"},    {"tool", "tool"},
                                                {"observation", "tool"}, {"function_call", "assistant"}};

/* The bytes a list of text parts joins to (NUL included), or an error naming the part. */
static zt_status parts_bytes(const cJSON *content, int i, size_t *bytes)
{
    *bytes = 1;
    int k = 0;
    for (const cJSON *p = content->child; p; p = p->next, k++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type"),
                    *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(type))
            return zt_fail(ZT_EUSER, "message %d: content part %d needs a string \"type\" (it is %s)", i, k,
                           zt_json_kind(type));
        if (strcmp(type->valuestring, "text"))
            return zt_fail(ZT_EUSER, "message %d: content part %d is of type '%.32s'; zt trains on text parts only", i,
                           k, type->valuestring);
        if (!cJSON_IsString(text))
            return zt_fail(ZT_EUSER, "message %d: content part %d needs a string \"text\" (it is %s)", i, k,
                           zt_json_kind(text));
        *bytes += strlen(text->valuestring);
    }
    return ZT_OK;
}

/* Message i of an OpenAI-style list; text is where joined parts go (advanced past what they use). */
static zt_status openai_message(const cJSON *e, int i, zt_message *m, char **text)
{
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role"),
                *content = cJSON_GetObjectItemCaseSensitive(e, "content"),
                *calls = cJSON_GetObjectItemCaseSensitive(e, "tool_calls");
    if (!cJSON_IsString(role))
        return zt_fail(ZT_EUSER, "message %d needs a string \"role\" (it is %s)", i, zt_json_kind(role));
    if (calls && !cJSON_IsArray(calls) && !cJSON_IsNull(calls))
        return zt_fail(ZT_EUSER, "message %d: \"tool_calls\" is %s, not a list", i, zt_json_kind(calls));
    *m = (zt_message){role->valuestring, NULL, e};
    if (cJSON_IsString(content)) {
        m->content = content->valuestring;
    } else if (cJSON_IsArray(content)) {
        m->content = *text;
        for (const cJSON *p = content->child; p; p = p->next) {
            const char *s = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
            size_t n = strlen(s);
            memcpy(*text, s, n);
            *text += n;
        }
        *(*text)++ = 0;
    } else if (!(cJSON_GetArraySize(calls) > 0 && (!content || cJSON_IsNull(content)))) {
        return zt_fail(ZT_EUSER, "message %d: \"content\" is %s, not a string or a list of text parts%s", i,
                       zt_json_kind(content), content ? "" : " (only a turn with tool_calls may leave it out)");
    }
    return ZT_OK;
}

zt_status zt_messages_read(const cJSON *list, zt_message **out, int *n)
{
    *out = NULL, *n = 0;
    if (!cJSON_IsArray(list))
        return zt_fail(ZT_EUSER, "\"messages\" is %s, not a list of {\"role\", \"content\"}", zt_json_kind(list));
    int k = cJSON_GetArraySize(list), i = 0;
    if (k == 0) return zt_fail(ZT_EUSER, "\"messages\" is empty");
    size_t bytes = 0; /* of the contents joined from parts */
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        size_t b = 0;
        zt_status st = cJSON_IsArray(content) ? parts_bytes(content, i, &b) : ZT_OK;
        if (st) return st;
        bytes += b;
    }
    zt_message *m = malloc((size_t)k * sizeof *m + bytes);
    if (!m) return zt_fail(ZT_ENOMEM, "out of memory");
    char *text = (char *)(m + k);
    i = 0;
    zt_status st = ZT_OK;
    for (const cJSON *e = list->child; e && !st; e = e->next, i++) st = openai_message(e, i, &m[i], &text);
    if (st) {
        free(m);
        return st;
    }
    *out = m, *n = k;
    return ZT_OK;
}

/* Replaces o's member key, a string, by the JSON it holds when that is of kind want (cJSON_IsArray,
 * cJSON_IsObject); 0 when it does not hold such JSON, -1 out of memory. */
static int parse_member(cJSON *o, const char *key, cJSON_bool (*want)(const cJSON *))
{
    cJSON *s = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(s)) return 1;
    cJSON *v = cJSON_Parse(s->valuestring);
    if (!want(v)) {
        cJSON_Delete(v);
        return 0;
    }
    return cJSON_ReplaceItemInObjectCaseSensitive(o, key, v) ? 1 : (cJSON_Delete(v), -1);
}

static zt_status normalize_calls(cJSON *list, const char *name)
{
    int i = 0;
    for (cJSON *m = cJSON_IsArray(list) ? list->child : NULL; m; m = m->next, i++) {
        cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        int k = 0;
        for (cJSON *c = cJSON_IsArray(calls) ? calls->child : NULL; c; c = c->next, k++) {
            int ok = parse_member(cJSON_GetObjectItemCaseSensitive(c, "function"), "arguments", cJSON_IsObject);
            if (ok < 0) return zt_fail(ZT_ENOMEM, "out of memory");
            if (!ok)
                return zt_fail(ZT_EUSER, "%s[%d]: tool call %d's \"arguments\" is a string that holds no JSON object",
                               name, i, k);
        }
    }
    return ZT_OK;
}

/* A call {"name", "arguments"} as a tool call; NULL out of memory. */
static cJSON *tool_call(const cJSON *c)
{
    cJSON *call = cJSON_CreateObject(), *fn = cJSON_Duplicate(c, 1);
    if (call && fn && cJSON_AddStringToObject(call, "type", "function") && cJSON_AddItemToObject(call, "function", fn))
        return call;
    cJSON_Delete(call);
    cJSON_Delete(fn);
    return NULL;
}

/* A function_call turn's value, a call or a list of calls, as tool_calls; *bad when it holds neither. */
static cJSON *function_calls(const char *value, int *bad)
{
    cJSON *v = cJSON_Parse(value), *calls = cJSON_CreateArray();
    int one = cJSON_IsObject(v);
    *bad = !one && cJSON_GetArraySize(v) < 1;
    for (const cJSON *c = one ? v : cJSON_IsArray(v) ? v->child : NULL; calls && c && !*bad; c = one ? NULL : c->next) {
        cJSON *call = NULL;
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(c, "name"))) *bad = 1;
        else if (!(call = tool_call(c)) || !cJSON_AddItemToArray(calls, call)) {
            cJSON_Delete(call);
            cJSON_Delete(calls);
            calls = NULL;
        }
    }
    cJSON_Delete(v);
    if (*bad) cJSON_Delete(calls);
    return *bad ? NULL : calls;
}

/* ShareGPT's turn i as an OpenAI message, added to list. */
static zt_status sharegpt_turn(const cJSON *e, int i, cJSON *list)
{
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(e, "from"),
                *value = cJSON_GetObjectItemCaseSensitive(e, "value");
    if (!cJSON_IsString(from) || !cJSON_IsString(value))
        return zt_fail(ZT_EUSER, "conversations[%d] needs string \"from\" and \"value\"", i);
    const char *role = NULL;
    for (size_t j = 0; j < sizeof SHAREGPT_ROLES / sizeof SHAREGPT_ROLES[0]; j++)
        if (!strcmp(from->valuestring, SHAREGPT_ROLES[j][0])) role = SHAREGPT_ROLES[j][1];
    if (!role)
        return zt_fail(ZT_EUSER,
                       "conversations[%d]: \"from\" is '%.32s', not human, gpt, system, tool or function_call", i,
                       from->valuestring);
    int call = !strcmp(from->valuestring, "function_call"), bad = 0;
    cJSON *calls = call ? function_calls(value->valuestring, &bad) : NULL;
    if (bad)
        return zt_fail(ZT_EUSER,
                       "conversations[%d]: a function_call's value holds no JSON call {\"name\", \"arguments\"} "
                       "nor a list of them",
                       i);
    cJSON *m = call && !calls ? NULL : cJSON_CreateObject();
    if (!m || !cJSON_AddItemToArray(list, m)) { /* list owns m from here on */
        cJSON_Delete(m);
        cJSON_Delete(calls);
        return zt_fail(ZT_ENOMEM, "out of memory");
    }
    int ok = cJSON_AddStringToObject(m, "role", role) &&
             cJSON_AddStringToObject(m, "content", call ? "" : value->valuestring);
    if (calls && !(ok && cJSON_AddItemToObject(m, "tool_calls", calls))) {
        cJSON_Delete(calls);
        ok = 0;
    }
    return ok ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory");
}

/* A row's ShareGPT "conversations" (and LLaMA-Factory's "system" beside them) as "messages". */
static zt_status sharegpt_messages(cJSON *row)
{
    const cJSON *conv = cJSON_GetObjectItemCaseSensitive(row, "conversations"),
                *system = cJSON_GetObjectItemCaseSensitive(row, "system");
    if (!conv || cJSON_GetObjectItemCaseSensitive(row, "messages")) return ZT_OK;
    if (!cJSON_IsArray(conv))
        return zt_fail(ZT_EUSER, "\"conversations\" is %s, not a list of {\"from\", \"value\"}", zt_json_kind(conv));
    if (!conv->child) return zt_fail(ZT_EUSER, "\"conversations\" is empty");
    cJSON *list = cJSON_CreateArray();
    zt_status st = list ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory");
    const cJSON *first = cJSON_GetObjectItemCaseSensitive(conv->child, "from");
    if (!st && cJSON_IsString(system) && system->valuestring[0] &&
        !(cJSON_IsString(first) && !strcmp(first->valuestring, "system"))) {
        cJSON *m = cJSON_CreateObject();
        if (!m || !cJSON_AddItemToArray(list, m) || !cJSON_AddStringToObject(m, "role", "system") ||
            !cJSON_AddStringToObject(m, "content", system->valuestring))
            st = zt_fail(ZT_ENOMEM, "out of memory");
    }
    int i = 0;
    for (const cJSON *e = conv->child; !st && e; e = e->next, i++) st = sharegpt_turn(e, i, list);
    if (!st && !cJSON_AddItemToObject(row, "messages", list)) st = zt_fail(ZT_ENOMEM, "out of memory");
    if (st) cJSON_Delete(list);
    return st;
}

zt_status zt_messages_normalize(cJSON *row)
{
    zt_status st = sharegpt_messages(row);
    if (st) return st;
    int ok = parse_member(row, "tools", cJSON_IsArray);
    if (ok < 0) return zt_fail(ZT_ENOMEM, "out of memory");
    if (!ok) return zt_fail(ZT_EUSER, "\"tools\" is a string that holds no JSON list of function schemas");
    static const char *const lists[] = {"messages", "prompt", "completion", "chosen", "rejected"};
    for (size_t j = 0; !st && j < sizeof lists / sizeof lists[0]; j++)
        st = normalize_calls(cJSON_GetObjectItemCaseSensitive(row, lists[j]), lists[j]);
    return st;
}

zt_status zt_messages_extras(const cJSON *o, const cJSON **tools, const cJSON **kwargs)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "tools"),
                *k = cJSON_GetObjectItemCaseSensitive(o, "chat_template_kwargs");
    *tools = cJSON_IsArray(t) ? t : NULL;
    *kwargs = cJSON_IsObject(k) ? k : NULL;
    if (t && !cJSON_IsArray(t) && !cJSON_IsNull(t))
        return zt_fail(ZT_EUSER, "\"tools\" is %s, not a list of function schemas", zt_json_kind(t));
    if (k && !cJSON_IsObject(k) && !cJSON_IsNull(k))
        return zt_fail(ZT_EUSER, "\"chat_template_kwargs\" is %s, not an object", zt_json_kind(k));
    return ZT_OK;
}
