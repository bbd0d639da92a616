/* libFuzzer harness for tokenizer.json: the input is a tokenizer.json that
 * zt_tokenizer_open reads as `zt` does. One that opens encodes a few texts
 * (special tokens parsed and not), every id inside the vocabulary, and decodes
 * them again to a NUL-terminated string; a failure is ZT_EUSER naming the file.
 * Never a crash, leak, hang or sanitizer report.
 *
 *   make fuzz-tokenizer FUZZ_SECONDS=600
 */
#include "tests/fuzz/fuzz_tokenizer.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *path = fuzz_write("tokenizer.json", data, size);
    zt_tokenizer *tok;
    zt_status st = zt_tokenizer_open(&tok, path);
    if (st) {
        fuzz_check_failure(st, ZT_EUSER, path);
        return 0;
    }
    fuzz_tokenizer_roundtrip(tok);
    zt_tokenizer_free(tok);
    return 0;
}
