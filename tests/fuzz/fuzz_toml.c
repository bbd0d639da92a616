/* libFuzzer harness for the TOML parser: any input must either parse into a
 * tree whose nodes are consistent or fail with a "LINE:COL: message" error;
 * never crash, leak or read out of bounds.
 *
 *   clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
 *       tests/fuzz/fuzz_toml.c lib/toml/toml.c -o /tmp/fuzz_toml
 *   /tmp/fuzz_toml -max_total_time=180 tests/fuzz/corpus/toml
 */
#include <stdlib.h>
#include <string.h>

#include "lib/toml/toml.h"

static void walk(const zt_toml *v, int depth)
{
    if (depth > ZT_TOML_MAX_DEPTH || v->line < 1 || v->col < 1) abort();
    if ((v->kind == ZT_TOML_STRING || v->kind >= ZT_TOML_DATETIME) && (!v->str || v->str[v->len] != 0)) abort();
    for (int i = 0; i < v->n; i++) {
        const zt_toml_item *it = &v->items[i];
        if (v->kind == ZT_TOML_TABLE) {
            if (!it->key || it->key[it->keylen] != 0) abort();
            /* keys without NUL bytes are found again by name */
            if (strlen(it->key) == it->keylen && zt_toml_get(v, it->key) != it->value) abort();
        }
        walk(it->value, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char err[256];
    zt_toml *doc = zt_toml_parse((const char *)data, size, err, sizeof err);
    if (doc) {
        walk(doc, 0);
        zt_toml_free(doc);
    } else {
        int line, col;
        if (sscanf(err, "%d:%d: ", &line, &col) != 2 || line < 1 || col < 1) abort();
    }
    return 0;
}
