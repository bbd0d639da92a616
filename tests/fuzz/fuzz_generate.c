/* libFuzzer harness for the prompts file of zt generate --input: each line of the
 * input (its newline removed, as the command reads it) goes through
 * zt_generate_request_parse. A line gives a text prompt or messages with a
 * role and content each (none only in a turn with tool calls), or fails with
 * ZT_EUSER naming "file:line"; never a crash, leak or sanitizer report.
 *
 *   make fuzz-generate FUZZ_SECONDS=600
 */
#include <stdlib.h>
#include <string.h>

#include "lib/data/messages.h"
#include "lib/generate/generate.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *at = (const char *)data, *end = at + size;
    for (long lineno = 1; at < end; lineno++) {
        const char *nl = memchr(at, '\n', (size_t)(end - at));
        size_t len = nl ? (size_t)(nl - at) : (size_t)(end - at);
        char *line = malloc(len + 1), where[64];
        if (!line) abort();
        memcpy(line, at, len);
        line[len] = 0;
        snprintf(where, sizeof where, "prompts.jsonl:%ld", lineno);
        zt_generate_request q;
        zt_status st = zt_generate_request_parse(&q, line, len, where);
        if (st) {
            fuzz_check_failure(st, ZT_EUSER, where);
        } else {
            if (!cJSON_IsObject(q.obj) || (!q.prompt && !q.msgs)) abort();
            for (int i = 0; i < q.n; i++) /* no content only beside tool calls */
                if (!q.msgs[i].role ||
                    (!q.msgs[i].content && cJSON_GetArraySize(cJSON_GetObjectItem(q.msgs[i].json, "tool_calls")) < 1))
                    abort();
            const cJSON *tools, *kwargs; /* a request that parses has what the template takes checked */
            if (q.msgs && zt_messages_extras(q.obj, &tools, &kwargs)) abort();
        }
        zt_generate_request_free(&q);
        free(line);
        at = nl ? nl + 1 : end;
    }
    return 0;
}
