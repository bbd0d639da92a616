/* bench/chat_spans: finding the loss spans of one long conversation (lib/data/template.h), per
 * named template: the seconds and the bytes rendered per byte of text.
 *
 *     make build/libzt.a
 *     gcc -std=gnu11 -O2 -I. bench/chat_spans.c build/libzt.a -lcjson -lm -lstdc++ -o build/bench/chat_spans
 *     build/bench/chat_spans [--template NAME] [MESSAGES ...]      (default: every named one; 1000 8000)
 *
 * The conversation alternates user and assistant messages of about 40 bytes ("question 17:
 * what follows 16?" / "answer 17: 17 follows 16."), spans of every assistant message, no length
 * bound (zt_template_spans). One JSON line a template and size: the CPU seconds of the process
 * (steadier than the wall clock on a shared machine) and the wall seconds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/data/template.h"

static double now_s(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int bench(zt_chat_template kind, int n)
{
    const char *name = zt_chat_template_names[kind];
    zt_template *t;
    if (zt_template_load(&t, kind, NULL, NULL)) return fprintf(stderr, "%s\n", zt_errmsg()), 1;
    zt_message *msgs = malloc((size_t)n * sizeof *msgs);
    char (*contents)[64] = malloc((size_t)n * sizeof *contents);
    for (int i = 0; i < n; i++) {
        if (i % 2) snprintf(contents[i], sizeof contents[i], "answer %d: %d follows %d.", i, i, i - 1);
        else snprintf(contents[i], sizeof contents[i], "question %d: what follows %d?", i, i);
        msgs[i] = (zt_message){i % 2 ? "assistant" : "user", contents[i]};
    }
    zt_span *spans;
    int nspans;
    char *text;
    double wall = now_s(CLOCK_MONOTONIC), cpu = now_s(CLOCK_PROCESS_CPUTIME_ID);
    zt_status st = zt_template_spans(t, msgs, n, "<s>", "</s>", ZT_TRAIN_ASSISTANT, &spans, &nspans, &text);
    cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu, wall = now_s(CLOCK_MONOTONIC) - wall;
    if (st) fprintf(stderr, "%s: %s\n", name, zt_errmsg());
    else
        printf("{\"template\": \"%s\", \"messages\": %d, \"spans\": %d, \"text_bytes\": %zu, \"cpu_seconds\": %.4f, "
               "\"wall_seconds\": %.4f, \"rendered_per_text_byte\": %.2f}\n",
               name, n, nspans, strlen(text), cpu, wall, (double)zt_template_rendered(t) / (double)strlen(text));
    fflush(stdout);
    if (!st) free(spans), free(text);
    free(msgs);
    free(contents);
    zt_template_free(t);
    return st != ZT_OK;
}

int main(int argc, char **argv)
{
    const char *only = argc > 2 && !strcmp(argv[1], "--template") ? argv[2] : NULL;
    int sizes[16] = {1000, 8000}, nsizes = 0, failed = 0;
    for (int i = only ? 3 : 1; i < argc && nsizes < 16; i++) sizes[nsizes++] = atoi(argv[i]);
    if (!nsizes) nsizes = 2;
    for (int k = ZT_TEMPLATE_CHATML; k < ZT_TEMPLATE_FILE; k++)
        for (int i = 0; i < nsizes && (!only || !strcmp(only, zt_chat_template_names[k])); i++)
            failed |= bench((zt_chat_template)k, sizes[i]);
    return failed;
}
