/* libFuzzer harness for tokenizer_config.json and special_tokens_map.json: the
 * input, split at its first NUL byte, is the two files (the second left out
 * when empty) next to a small tokenizer.json (the Qwen2 fixture cut to 300 pieces,
 * tests/fuzz/corpus/tokenizer/qwen2-small.json), opened as `zt` does.
 * A tokenizer that opens passes the checks of fuzz_tokenizer.h; a failure is
 * ZT_EUSER naming the file. Run from the repository root.
 *
 *   make fuzz-tokenizer_config FUZZ_SECONDS=600
 */
#include "lib/core/fileio.h"
#include "tests/fuzz/fuzz_tokenizer.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static const char *json;
    if (!json) {
        char *text;
        size_t len;
        if (zt_read_file("tests/fuzz/corpus/tokenizer/qwen2-small.json", &text, &len)) abort();
        json = fuzz_write("tokenizer.json", text, len);
        free(text);
    }
    char *buf;
    const char *part[2];
    fuzz_split(data, size, &buf, part, 2);
    fuzz_write("tokenizer_config.json", part[0], strlen(part[0]));
    const char *map = fuzz_write("special_tokens_map.json", part[1], strlen(part[1]));
    if (!part[1][0]) unlink(map);
    zt_tokenizer *tok;
    zt_status st = zt_tokenizer_open(&tok, json);
    if (st) {
        fuzz_check_failure(st, ZT_EUSER, fuzz_dir());
    } else {
        fuzz_tokenizer_roundtrip(tok);
        zt_tokenizer_free(tok);
    }
    free(buf);
    return 0;
}
