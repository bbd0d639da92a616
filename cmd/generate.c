/* zt generate: text from a model, for one prompt, a chat, or a JSONL file of prompts. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/data/jsonl.h"
#include "commands.h"
#include "lib/generate/generate.h"
#include "options.h"

/* One request of --input (where: "file:line") answered, the line written back to out with its "completion". */
static zt_status answer(zt_generator *g, const char *line, size_t len, const char *where, FILE *out,
                        const char *out_path)
{
    zt_generate_request q;
    char *text = NULL;
    zt_status st = zt_generate_request_parse(&q, line, len, where);
    if (!st) {
        st = q.prompt ? zt_generate_text(g, q.prompt, &text) : zt_generate_chat(g, q.msgs, q.n, q.obj, &text);
        if (st == ZT_EUSER) st = zt_fail_context(st, "%s", where); /* the template's, say */
    }
    if (!st) {
        cJSON_AddStringToObject(q.obj, "completion", text);
        char *row = cJSON_PrintUnformatted(q.obj);
        if (!row || fprintf(out, "%s\n", row) < 0) st = zt_fail(ZT_EIO, "cannot write '%s'", out_path);
        free(row);
    }
    free(text);
    zt_generate_request_free(&q);
    return st;
}

/* --input's requests (JSONL, or a JSON array, as data files are read) with their completions, to
 * out_path through a temporary file renamed at the end: a failed run leaves out_path as it was,
 * and out_path may be the input itself */
static zt_status batch(zt_generator *g, const char *in_path, const char *out_path)
{
    char *paths[] = {(char *)in_path}; /* read only */
    int to_stdout = !strcmp(out_path, "-");
    zt_atomic_file af = {0};
    zt_status st = to_stdout ? ZT_OK : zt_atomic_open(&af, out_path);
    if (st) { /* a directory that is not there or not writable: the user's to fix */
        char msg[4400];
        snprintf(msg, sizeof msg, "%s", zt_errmsg());
        st = zt_fail(ZT_EUSER, "--output: %s", msg);
    }
    FILE *out = to_stdout ? stdout : af.f;
    zt_jsonl_lines l = {0};
    if (!st) st = zt_jsonl_open(&l, paths, 1);
    while (!st && !(st = zt_jsonl_next(&l, 64)) && l.n > 0)
        for (int64_t i = 0; i < l.n && !st; i++) {
            char where[4200];
            snprintf(where, sizeof where, "%s:%ld", in_path, l.lineno[i]);
            st = answer(g, l.text[i], l.len[i], where, out, out_path);
        }
    zt_jsonl_close(&l);
    if (to_stdout || !af.f) return st;
    if (st) zt_atomic_abort(&af);
    else st = zt_atomic_commit(&af);
    return st;
}

/* an interactive conversation: each user line gets an answer, history kept */
static zt_status chat(zt_generator *g)
{
    enum { MAX_TURNS = 256 };
    zt_message msgs[MAX_TURNS];
    char *owned[MAX_TURNS];
    int n = 0;
    zt_status st = ZT_OK;
    char *line = NULL;
    size_t cap = 0;
    fprintf(stderr, "chat with the model; an empty line or end of input ends it\n");
    while (!st && n + 2 <= MAX_TURNS) {
        fprintf(stderr, "> ");
        ssize_t len = getline(&line, &cap, stdin);
        if (len <= 0 || line[0] == '\n') break;
        if (line[len - 1] == '\n') line[len - 1] = 0;
        owned[n] = strdup(line);
        msgs[n] = (zt_message){"user", owned[n], NULL};
        n++;
        char *answer;
        if ((st = zt_generate_chat(g, msgs, n, NULL, &answer))) break;
        printf("%s\n", answer);
        fflush(stdout);
        owned[n] = answer;
        msgs[n] = (zt_message){"assistant", answer, NULL};
        n++;
    }
    for (int i = 0; i < n; i++) free(owned[i]);
    free(line);
    return st;
}

int cmd_generate(int argc, char **argv)
{
    const char *model = NULL, *adapter = NULL, *prompt = NULL, *input = NULL, *output = "-", *tmpl = NULL;
    const char *kwargs = NULL;
    const char *device = "auto";
    long max_new = 128, top_k = 0, seed = 0, max_len = 4096;
    double temperature = 0, top_p = 1;
    int chat_mode = 0;
    zt_option_list stop = {0};
    zt_usage u = {"zt generate",
                  "--model DIR [--adapter DIR] [--prompt TEXT | --chat | --input PROMPTS.jsonl --output OUT.jsonl] "
                  "[options]",
                  "Generate text with a model directory (weights, config.json and tokenizer), or a base model\n"
                  "with a PEFT adapter (--adapter, or --model naming the adapter directory, whose\n"
                  "base_model_name_or_path is the base), run without merging. --input reads\n"
                  "lines {\"prompt\": TEXT or messages} or {\"messages\": [...]} and writes each line back with\n"
                  "\"completion\" added. Messages go through the chat template; a text prompt is used as is."};
    zt_option opts[] = {
        {"model", 'S', &model, "DIR", "model directory (or a PEFT adapter directory)", 0, 0},
        {"adapter", 'S', &adapter, "DIR", "a PEFT adapter directory (LoRA, QLoRA, DoRA) on --model", 0, 0},
        {"prompt", 'S', &prompt, "TEXT", "continue this text", 0, 0},
        {"chat", 'F', &chat_mode, "", "talk with the model (chat template) on the terminal", 0, 0},
        {"input", 'S', &input, "FILE", "JSONL file (or JSON array) of prompts", 0, 0},
        {"output", 'S', &output, "FILE", "where --input's results go (default: standard output)", 0, 0},
        {"max-new-tokens", 'I', &max_new, "N", "tokens to generate at most (default 128)", 1, 1 << 20},
        {"temperature", 'D', &temperature, "T", "0 = greedy (default); higher = more random", 0, 100},
        {"top-k", 'I', &top_k, "K", "sample among the K likeliest tokens (0 = all)", 0, INT_MAX},
        {"top-p", 'D', &top_p, "P", "sample among the likeliest tokens holding P of the mass (default 1)", 0, 1},
        {"stop", 'L', &stop, "STR", "stop at this text (repeatable)", 0, 0},
        {"seed", 'I', &seed, "S", "random seed for sampling (default 0)", 0, LONG_MAX},
        {"chat-template", 'S', &tmpl, "NAME", "chat template: auto (the model's), chatml, llama3, ... or a .jinja file",
         0, 0},
        {"chat-template-kwargs", 'S', &kwargs, "JSON",
         "more variables for the chat template, as a JSON object: '{\"enable_thinking\": false}'", 0, 0},
        {"max-length", 'I', &max_len, "N", "context positions to allocate (default 4096)", 16, 1 << 22},
        {"device", 'S', &device, "NAME", "auto (a GPU when one answers, else the CPU; the default), cpu or cuda", 0, 0},
        {0},
    };
    if ((argc = zt_options_parse(argc, argv, opts, &u)) < 0) return argc == -2 ? 0 : 2;
    if (!model || (!!prompt + chat_mode + !!input) != 1 || argc > 1) {
        fprintf(stderr, "zt: error: zt generate: needs --model and one of --prompt, --chat, --input (see --help)\n");
        return 2;
    }
    int dev = 0;
    while (dev < 3 && strcmp(device, zt_device_names[dev])) dev++;
    if (dev == 3) {
        fprintf(stderr, "zt: error: zt generate: --device '%s': expected auto, cpu or cuda\n", device);
        return 2;
    }
    zt_chat_template kind = ZT_TEMPLATE_AUTO;
    zt_status st = tmpl ? zt_template_kind(tmpl, &kind) : ZT_OK;
    if (st) return cmd_fail(st);
    zt_generator g;
    zt_generator_options o = {.model = model,
                              .adapter = adapter,
                              .chat_template = kind,
                              .template_path = tmpl,
                              .template_kwargs = kwargs,
                              .max_len = (int)max_len,
                              .device = (zt_device)dev};
    if ((st = zt_generator_open(&g, &o))) return cmd_fail(st);
    g.max_new_tokens = (int)max_new;
    g.sampler.temperature = temperature, g.sampler.top_k = (int)top_k, g.sampler.top_p = top_p;
    zt_rng_seed(&g.sampler.rng, (uint64_t)seed, 0);
    g.stop = stop.items, g.nstop = stop.n;
    char *text = NULL;
    if (prompt && !(st = zt_generate_text(&g, prompt, &text))) printf("%s\n", text);
    if (input) st = batch(&g, input, output);
    if (chat_mode) st = chat(&g);
    free(text);
    if (!st && g.seconds > 0)
        zt_log_info("generated %lld tokens in %.2f s: %.1f tokens/s", (long long)g.generated, g.seconds,
                    g.generated / g.seconds);
    zt_generator_close(&g);
    return st ? cmd_fail(st) : 0;
}
