/* A line of zt generate --input (generate.h). */
#include <stdlib.h>
#include <string.h>

#include "generate.h"
#include "lib/data/jsonl.h"
#include "lib/data/messages.h"

static zt_status read_request(zt_generate_request *q)
{
    zt_status st = zt_messages_normalize(q->obj);
    if (st) return st;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(q->obj, "prompt"),
                *msgs = cJSON_GetObjectItemCaseSensitive(q->obj, "messages");
    if (cJSON_IsString(p)) {
        q->prompt = p->valuestring;
        return ZT_OK;
    }
    if (cJSON_IsArray(p)) msgs = p; /* a prompt given as messages */
    if (!cJSON_IsArray(msgs)) return zt_fail(ZT_EUSER, "needs \"prompt\" (a string or messages) or \"messages\"");
    const cJSON *tools, *kwargs; /* checked here, so that a bad one names the line before any generation */
    st = zt_messages_extras(q->obj, &tools, &kwargs);
    return st ? st : zt_messages_read(msgs, &q->msgs, &q->n);
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
