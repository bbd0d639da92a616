/* libFuzzer harness for the Jinja interpreter: any input is parsed as a
 * template and, when it parses, rendered against a fixed conversation under
 * small limits, with a tool list so that the seeds' tool-calling branches run (the seeds are
 * real chat templates, llama.cpp's among them, and macros.jinja for the syntax they add).
 * Either it renders or it fails with "fuzz.jinja:LINE:COL: ..."
 * (ZT_EUSER); never crash, leak, read out of bounds or run away.
 *
 *   clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -I. -I/usr/include/cjson \
 *       tests/fuzz/fuzz_jinja.c lib/jinja/jinja*.c lib/core/[a-z]*.c -lcjson -lm -o /tmp/fuzz_jinja
 *   /tmp/fuzz_jinja -max_total_time=180 -dict=tests/fuzz/jinja.dict /tmp/corpus tests/fuzz/corpus/jinja
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jinja/jinja.h"

static const char VARS[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \" Hi 👋 \"},"
    " {\"role\": \"assistant\", \"content\": \"Hello!\", \"tool_calls\": [{\"function\": {\"name\": \"f\", "
    "\"arguments\": {\"x\": 1.5, \"y\": [true, null]}}}]}, {\"role\": \"user\", \"content\": \"\"}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 3,"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather.\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\","
    " \"enum\": [\"a\", \"b\"]}, \"days\": {\"type\": [\"integer\", \"null\"]}}, \"required\": [\"city\"]}}}]}";

static void check_message(void)
{
    int line = 0, col = 0;
    if (sscanf(zt_errmsg(), "fuzz.jinja:%d:%d: ", &line, &col) != 2 || line < 1 || col < 1) {
        fprintf(stderr, "bad error message: %s\n", zt_errmsg());
        abort();
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static cJSON *vars;
    if (!vars) vars = cJSON_Parse(VARS);
    zt_jinja *t;
    zt_status st = zt_jinja_parse(&t, (const char *)data, size, "fuzz.jinja");
    if (st) {
        if (st != ZT_EUSER) abort();
        check_message();
        return 0;
    }
    zt_jinja_limits lim = {.max_output = 1 << 20, .max_memory = 32 << 20, .max_steps = 200000};
    char *out;
    size_t len;
    st = zt_jinja_render(t, vars, &lim, &out, &len);
    if (st) {
        if (st != ZT_EUSER || out) abort();
        check_message();
    } else {
        if (!out || out[len] != 0 || len > lim.max_output) abort();
        free(out);
    }
    zt_jinja_free(t);
    return 0;
}
