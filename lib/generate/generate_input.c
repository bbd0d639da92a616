/* A line of zt generate --input (generate.h). */
#include <stdlib.h>
#include <string.h>

#include "generate.h"
#include "lib/data/jsonl.h"

static zt_status read_request(zt_generate_request *q)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(q->obj, "prompt"),
                *msgs = cJSON_GetObjectItemCaseSensitive(q->obj, "messages");
    if (cJSON_IsString(p)) {
        q->prompt = p->valuestring;
        return ZT_OK;
    }
    if (cJSON_IsArray(p)) msgs = p; /* a prompt given as messages */
    if (!cJSON_IsArray(msgs)) return zt_fail(ZT_EUSER, "needs \"prompt\" (a string or messages) or \"messages\"");
    int n = cJSON_GetArraySize(msgs);
    if (!(q->msgs = calloc((size_t)n + 1, sizeof *q->msgs))) return zt_fail(ZT_ENOMEM, "out of memory");
    int i = 0;
    for (const cJSON *e = msgs->child; e; e = e->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role"),
                    *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsString(role) || !cJSON_IsString(content))
            return zt_fail(ZT_EUSER, "message %d needs string \"role\" and \"content\"", i);
        q->msgs[i] = (zt_message){role->valuestring, content->valuestring};
    }
    q->n = n;
    return ZT_OK;
}

zt_status zt_generate_request_parse(zt_generate_request *q, const char *line, size_t len, const char *where)
{
    *q = (zt_generate_request){0};
    zt_status st = zt_jsonl_parse(line, len, &q->obj);
    if (!st) st = read_request(q);
    if (st) {
        zt_generate_request_free(q);
        return zt_fail_context(st, "%s", where);
    }
    return ZT_OK;
}

void zt_generate_request_free(zt_generate_request *q)
{
    cJSON_Delete(q->obj);
    free(q->msgs);
    *q = (zt_generate_request){0};
}
