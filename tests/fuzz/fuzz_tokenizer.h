/* The check both tokenizer harnesses run on a tokenizer that opened: a few
 * texts encoded (special tokens parsed and not) to ids inside the vocabulary and
 * decoded again; the special ids inside it too. */
#ifndef ZT_TESTS_FUZZ_TOKENIZER_H
#define ZT_TESTS_FUZZ_TOKENIZER_H

#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "tokenizers/tokenizer.h"

static const char *const TEXTS[] = {
    "Hello, world! It's 2024: ünïcödé, 日本語, emoji 👋 and\ttabs\n\nnew lines.",
    "<|im_start|>user\nHi<|im_end|>\n<s>[INST] x [/INST]</s><|endoftext|>",
    "   leading spaces, 12345678 digits, a\xffinvalid byte, e\xcc\x81 (NFC)",
    /* for the pre-tokenizers: punctuation and space runs, U+180E and NBSP, Arabic-Indic digits,
     * CJK runs, marks after a space, empty-match bait (xxx), a long line */
    "a--b---c...!!! ?? \xe1\xa0\x8e\xc2\xa0\xd9\xa1\xd9\xa2 \xe4\xb8\xad\xe6\x96\x87\xef\xbc\x8c "
    "\xcc\x81x_y 1.5e-3 xxx\r\n\r\n    \t  def f(x):\n        return x ** 2  # done\n\n\n",
    /* for SentencePiece-style models: the meta space, byte pieces, affixes, unknown characters */
    "\xe2\x96\x81x \xe2\x96\x81\xe2\x96\x81 <0x41><0xE2> ##a a</w> \xf0\x9f\x99\x82\xf0\x9f\x99\x82 \xc6\x80 [SEP]",
};

static void fuzz_tokenizer_roundtrip(const zt_tokenizer *tok)
{
    int32_t vocab = zt_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < sizeof TEXTS / sizeof TEXTS[0]; i++)
        for (int special = 0; special < 2; special++) {
            int32_t *ids;
            size_t n;
            zt_status st = zt_tokenizer_encode(tok, TEXTS[i], strlen(TEXTS[i]), special, &ids, &n);
            if (st) {
                fuzz_check_failure(st, ZT_EUSER, NULL);
                continue;
            }
            for (size_t k = 0; k < n; k++)
                if (ids[k] < 0 || ids[k] >= vocab) abort();
            char *text;
            st = zt_tokenizer_decode(tok, ids, n, !special, &text);
            if (st) fuzz_check_failure(st, ZT_EUSER, NULL);
            else free(text);
            free(ids);
        }
    int32_t special[] = {zt_tokenizer_bos_id(tok), zt_tokenizer_eos_id(tok), zt_tokenizer_pad_id(tok),
                         zt_tokenizer_unk_id(tok)};
    for (int i = 0; i < 4; i++)
        if (special[i] < -1 || special[i] >= vocab) abort();
}

#endif
