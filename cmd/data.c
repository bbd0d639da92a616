/* zt data inspect: the first examples (or packed rows) exactly as the trainer sees them. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "lib/core/fileio.h"
#include "lib/data/batch.h"
#include "lib/train/train.h"
#include "options.h"
#include "tokenizers/tokenizer.h"

static void print_json(const int32_t *ids, const int32_t *labels, int64_t n)
{
    printf("{\"input_ids\": [");
    for (int64_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
    printf("], \"labels\": [");
    for (int64_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", labels[i]);
    printf("]}\n");
}

/* the decoded text, then each token: trained ones green on a terminal, [[in brackets]] elsewhere */
static void print_human(const zt_tokenizer *tok, const int32_t *ids, const int32_t *labels, int64_t n, int color)
{
    char *text = NULL;
    if (tok && !zt_tokenizer_decode(tok, ids, (size_t)n, 0, &text)) printf("%s\n", text);
    free(text);
    int64_t trained = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *piece = tok ? zt_tokenizer_id_to_piece(tok, ids[i]) : NULL;
        char num[16];
        if (!piece) snprintf(num, sizeof num, "%d", ids[i]), piece = num;
        int on = labels[i] != -100;
        trained += on;
        if (color) printf("%s%s\033[0m ", on ? "\033[32m" : "\033[2m", piece);
        else printf(on ? "[[%s]] " : "%s ", piece);
    }
    printf("\n(%lld tokens, %lld with loss)\n\n", (long long)n, (long long)trained);
}

static int inspect(int argc, char **argv)
{
    long n = 5;
    int packed = 0, json = 0;
    zt_usage u = {"zt data inspect", "RECIPE [--n N] [--packed] [--json] [section.key=value ...]",
                  "Show the first examples of data.train as the trainer sees them: the text, and each token\n"
                  "marked by whether it carries loss. --packed shows packed rows of data.max_length instead;\n"
                  "--json prints {\"input_ids\": [...], \"labels\": [...]} per line (labels -100: no loss)."};
    zt_option opts[] = {
        {"n", 'I', &n, "N", "how many examples or rows (default 5)", 1, INT_MAX},
        {"packed", 'F', &packed, "", "show packed rows", 0, 0},
        {"json", 'F', &json, "", "machine-readable output", 0, 0},
        {0},
    };
    if ((argc = zt_options_parse(argc, argv, opts, &u)) < 0) return argc == -2 ? 0 : 2;
    zt_recipe r;
    int code = cmd_load_recipe(&r, "data inspect", argc, argv);
    if (code) return code;
    char path[4096];
    zt_llama_config cfg;
    zt_dataset train, valid;
    zt_data_tools d = {0};
    zt_status st = zt_path_join(path, sizeof path, r.model.path, "config.json");
    if (!st) st = zt_llama_config_load(&cfg, path);
    if (!st) st = zt_data_tools_open(&d, &r);
    if (!st) st = zt_vocab_prepare_tokens(&d); /* the tokens training would add for the template */
    if (!st) st = zt_data_open(&r, &d, cfg.vocab_size, &train, &valid);
    const zt_tokenizer *tok = d.tok;
    if (st) {
        zt_data_tools_close(&d);
        zt_recipe_free(&r);
        return cmd_fail(st);
    }
    int color = !json && isatty(1);
    if (!packed) {
        for (int64_t i = 0, shown = 0; i < train.n_examples && shown < n; i++) {
            const int32_t *ids = train.ids + train.offsets[i], *labels = train.labels + train.offsets[i];
            int64_t len = zt_dataset_len(&train, i);
            if (r.data.format == ZT_DATA_UNPAIRED && len < 2) continue; /* the missing side of a pair */
            shown++;
            if (json) print_json(ids, labels, len);
            else print_human(tok, ids, labels, len, color);
        }
    } else {
        zt_loader ld;
        zt_batch b;
        int T = r.data.max_length;
        st = zt_loader_init(&ld, &train, T, 1, r.data.packing, r.data.shuffle, (uint64_t)r.train.seed, 0, 1);
        if (!st) st = zt_batch_alloc(&b, 1, T);
        int32_t *labels = malloc(sizeof(int32_t) * (size_t)T);
        for (long row = 0; !st && labels && row < n && row < zt_loader_rows_per_epoch(&ld); row++) {
            if ((st = zt_loader_next(&ld, &b))) break;
            labels[0] = -100; /* labels as Hugging Face aligns them: the target of position t is label t+1 */
            for (int t = 1; t < T; t++) labels[t] = b.target[t - 1];
            if (json) print_json(b.input, labels, T);
            else print_human(tok, b.input, labels, T, color);
        }
        free(labels);
        if (!st) {
            zt_batch_free(&b);
            zt_loader_free(&ld);
        }
    }
    zt_dataset_free(&train);
    zt_dataset_free(&valid);
    zt_data_tools_close(&d);
    zt_recipe_free(&r);
    return st ? cmd_fail(st) : 0;
}

int cmd_data(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "inspect")) return inspect(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "--help")) {
        printf("usage: zt data inspect RECIPE [--n N] [--packed] [--json]\n");
        return 0;
    }
    fprintf(stderr, "zt: error: usage: zt data inspect RECIPE [--n N] [--packed] [--json]\n");
    return 2;
}
