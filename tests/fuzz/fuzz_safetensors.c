/* libFuzzer harness for the safetensors reader: each input is written to a file that
 * is opened and whose every tensor is read (as fp32 and bf16, with and without a
 * shape check). Any crash, sanitizer report or a failure without a message is a bug.
 *
 *     clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. \
 *         tests/fuzz/fuzz_safetensors.c lib/ckpt/safetensors[_a-z]*.c lib/core/[a-z]*.c -lcjson -lm -o fuzz_st
 *     ./fuzz_st -dict=tests/fuzz/safetensors.dict -max_total_time=120 tests/fuzz/corpus/safetensors
 *
 * (copy the corpus directory first if the new inputs should not be kept) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/ckpt/safetensors.h"

static char path[64];

static void remove_file(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/fuzz_st_%ld.safetensors", (long)getpid());
        atexit(remove_file);
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);

    zt_st_reader *r;
    zt_status st = zt_st_open(&r, path);
    if (st) {
        if (st != ZT_EUSER || !strstr(zt_errmsg(), path)) abort(); /* every bad file is the user's, named */
        return 0;
    }
    for (int i = 0; i < zt_st_count(r); i++) {
        const zt_st_tensor *t = zt_st_get(r, i);
        if (zt_st_find(r, t->name) != t) abort();
        size_t n = 1;
        for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
        float *dst = malloc(n * sizeof(float) + 1);
        if (!zt_st_read_into(t, dst, ZT_F32, t->shape, t->ndim)) zt_st_read_into(t, dst, ZT_BF16, NULL, 0);
        int64_t other[1] = {(int64_t)n + 1};
        if (!zt_st_read_into(t, dst, ZT_F32, other, 1)) abort(); /* a wrong shape never passes */
        free(dst);
    }
    zt_st_close(r);
    return 0;
}
