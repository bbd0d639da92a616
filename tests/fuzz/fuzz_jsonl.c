/* libFuzzer harness for the JSONL data formats: the first byte picks the format
 * (its value mod 8: tokens, text, chat, instruct, preference, prompt, completion, unpaired;
 * the rest of it data.train_on, packing and skip_bad_lines), the rest is a data file loaded
 * as training does, with the Qwen2 fixture tokenizer and the chatml template.
 * A load either gives examples whose ids are in the vocabulary and whose labels
 * are the ids or -100 (any in-vocabulary label for the tokens format), or fails
 * with ZT_EUSER and a message; never a crash, leak or sanitizer report.
 * Run from the repository root (the tokenizer is read from tests/fixtures).
 *
 *   make fuzz-jsonl FUZZ_SECONDS=600
 */
#include <stdlib.h>
#include <string.h>

#include "lib/data/formats.h"
#include "lib/data/tokens.h"
#include "tests/fuzz/fuzz_util.h"

static const zt_data_format FORMATS[] = {ZT_DATA_TOKENS,     ZT_DATA_TEXT,   ZT_DATA_CHAT,       ZT_DATA_INSTRUCT,
                                         ZT_DATA_PREFERENCE, ZT_DATA_PROMPT, ZT_DATA_COMPLETION, ZT_DATA_UNPAIRED};
static const zt_train_on TRAIN_ON[] = {ZT_TRAIN_ASSISTANT, ZT_TRAIN_ALL, ZT_TRAIN_LAST};

static void check_dataset(const zt_dataset *ds, int vocab, int any_label)
{
    if (ds->n_examples < 1 || ds->offsets[0] != 0) abort();
    for (int64_t i = 0; i < ds->n_examples; i++) {
        if (zt_dataset_len(ds, i) < 1) abort();
        for (int64_t t = ds->offsets[i]; t < ds->offsets[i + 1]; t++) {
            int32_t id = ds->ids[t], label = ds->labels[t];
            if (id < 0 || id >= vocab) abort();
            if (label != ZT_IGNORE_INDEX && label != id && !(any_label && label >= 0 && label < vocab)) abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static zt_tokenizer *tok;
    static zt_template *tmpl;
    if (!tok && (zt_tokenizer_open(&tok, "tests/fixtures/tokenizers/bpe_qwen2") ||
                 zt_template_load(&tmpl, ZT_TEMPLATE_CHATML, NULL, NULL))) {
        fprintf(stderr, "%s\n", zt_errmsg());
        abort();
    }
    if (size < 1) return 0;
    int format = data[0] % 8, train_on = data[0] / 8 % 3, packing = data[0] / 24 % 2, skip_bad = data[0] / 48 % 2;
    char *paths[] = {(char *)fuzz_write("data.jsonl", data + 1, size - 1)};
    zt_dataset ds = {0};
    int64_t skipped;
    int vocab = zt_tokenizer_vocab_size(tok);
    zt_status st;
    if (FORMATS[format] == ZT_DATA_TOKENS) {
        st = zt_tokens_load(&ds, paths, 1, vocab, skip_bad, &skipped);
    } else {
        zt_format f = {.format = FORMATS[format], .train_on = TRAIN_ON[train_on], .max_length = 64,
                       .packing = packing, .tok = tok, .tmpl = tmpl, .ds = &ds};
        st = zt_format_load(&f, paths, 1, skip_bad, &skipped);
    }
    if (st) fuzz_check_failure(st, ZT_EUSER, NULL);
    else check_dataset(&ds, vocab, format == 0);
    zt_dataset_free(&ds);
    return 0;
}
