/* libFuzzer harness for the tokenizer a GGUF export writes (lib/export/gguf_tokenizer.c): the
 * input, split at its first NUL byte, is tokenizer.json and tokenizer_config.json (left out when
 * empty), read for a model of 1024 ids (BOS 1, EOS 2) and written into a GGUF file. Every input
 * writes or fails with ZT_EUSER naming the directory; never a crash, leak or sanitizer report.
 *
 *   make fuzz-gguf_tokenizer FUZZ_SECONDS=600
 */
#include "lib/export/gguf_model.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *buf;
    const char *part[2];
    fuzz_split(data, size, &buf, part, 2);
    fuzz_write("tokenizer.json", part[0], strlen(part[0]));
    const char *tc = fuzz_write("tokenizer_config.json", part[1], strlen(part[1]));
    if (!part[1][0]) unlink(tc);
    const char *out = fuzz_write("out.gguf", "", 0);
    zt_llama_config cfg = {.vocab_size = 1024, .bos_token_id = 1, .eos_token_id = 2, .pad_token_id = -1};
    zt_gguf *g = zt_gguf_new();
    if (!g) abort();
    zt_status st = zt_gguf_add_tokenizer(g, fuzz_dir(), &cfg);
    if (!st) st = zt_gguf_finish(g, out);
    if (st) fuzz_check_failure(st, ZT_EUSER, fuzz_dir());
    zt_gguf_free(g);
    free(buf);
    return 0;
}
