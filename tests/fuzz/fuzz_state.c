/* libFuzzer harness for training checkpoints (lib/ckpt/state): trainer_state.json and a
 * ZTSHARD3 shard. An input is the JSON text, a NUL byte, then the shard's bytes (no NUL:
 * no shard). The harness sets the shard's checksums (header, segment table, data blocks)
 * wherever the bytes hold them, so that mutations reach the checks behind them, writes
 * both into DIR/step-000004/ (the shard named by its header's rank and world when those are
 * small) and reads them back: zt_state_read_json, then ranges of the arrays. A failure
 * must be ZT_EUSER naming the checkpoint; a read that succeeds must return the shard's
 * own values. Any crash or sanitizer report is a bug.
 *
 *     make fuzz FUZZ_SECONDS=600    # or, by hand:
 *     clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -I. tests/fuzz/fuzz_state.c \
 *         lib/ckpt/state.c lib/ckpt/state_files.c lib/core/[a-z]*.c -lcjson -lm -o fuzz_state
 *     ./fuzz_state -max_total_time=120 CORPUS_COPY tests/fuzz/corpus/state
 *
 * The seeds are checkpoints zt pretrain wrote (a one-rank run of a tiny model at ZeRO
 * stages 1 and 3), each trainer_state.json and shard joined as above. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/ckpt/state.h"
#include "lib/core/crc32c.h"
#include "lib/core/fileio.h"

#define HEADER 64
#define BLOCK ((uint64_t)1 << 16) /* elements per data checksum, as state.c */
#define MAX_NUMEL ((uint64_t)1 << 20) /* larger models are only checked, never read */

static char root[64], dir[128], shard[192];

static void remove_dir(void) { zt_remove_tree(root); }

static uint64_t u64_at(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The shard's header fields as the reader sees them; 0 where the bytes do not hold them. */
typedef struct layout {
    uint64_t numel, world, rank, nseg, total;
    size_t data, crcs, end; /* where the arrays and the block CRCs start, and the valid file's size */
} layout;

/* Sets the checksums that b (n bytes) has room for; *l gets its layout (data = 0 when the
 * segment table is not a valid one). */
static void fix_checksums(uint8_t *b, size_t n, layout *l)
{
    memset(l, 0, sizeof *l);
    if (n < HEADER) return;
    uint32_t crc = zt_crc32c(0, b, 56);
    memset(b + 56, 0, 8);
    memcpy(b + 56, &crc, 4);
    l->numel = u64_at(b + 8), l->world = u64_at(b + 16), l->rank = u64_at(b + 24);
    l->nseg = u64_at(b + 32), l->total = u64_at(b + 48);
    if (l->nseg > (n - HEADER) / 16 || n - HEADER - l->nseg * 16 < 8) return;
    crc = zt_crc32c(0, b + HEADER, l->nseg * 16);
    memset(b + HEADER + l->nseg * 16, 0, 8);
    memcpy(b + HEADER + l->nseg * 16, &crc, 4);
    uint64_t blocks = 0, packed = 0, end = 0;
    for (uint64_t i = 0; i < l->nseg; i++) {
        uint64_t off = u64_at(b + HEADER + 16 * i), count = u64_at(b + HEADER + 16 * i + 8);
        if (!count || off < end || off > l->numel || count > l->numel - off) return;
        end = off + count, packed += count, blocks += (count + BLOCK - 1) / BLOCK;
    }
    size_t data = HEADER + l->nseg * 16 + 8;
    if (packed != l->total || l->total > (n - data) / 12 || blocks > (n - data - 12 * l->total) / 12) return;
    l->data = data, l->crcs = data + 12 * l->total, l->end = l->crcs + 12 * blocks;
    for (int k = 0; k < 3; k++) { /* each segment's blocks, as state.c cuts them */
        size_t at = l->data + (size_t)k * l->total * 4, c = l->crcs + (size_t)k * blocks * 4;
        for (uint64_t i = 0; i < l->nseg; i++)
            for (uint64_t left = u64_at(b + HEADER + 16 * i + 8); left; c += 4) {
                size_t m = left < BLOCK ? left : BLOCK;
                crc = zt_crc32c(0, b + at, m * 4);
                memcpy(b + c, &crc, 4);
                at += m * 4, left -= m;
            }
    }
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) abort();
}

/* st failed as bad input naming the checkpoint, or succeeded */
static void expect_user_error_or_ok(zt_status st)
{
    if (st && (st != ZT_EUSER || !strstr(zt_errmsg(), dir))) abort();
}

/* Reads every array of [0, numel) and, when that succeeds (only a one-rank shard can cover
 * it), compares each element with the shard's bytes. */
static void read_back(const uint8_t *b, size_t size, const layout *l)
{
    size_t numel = (size_t)l->numel;
    float *a[3];
    for (int k = 0; k < 3; k++) a[k] = malloc(numel * sizeof(float));
    if (!a[0] || !a[1] || !a[2]) abort();
    expect_user_error_or_ok(zt_state_read_range(dir, numel, 0, numel, NULL, NULL, NULL));
    expect_user_error_or_ok(zt_state_read_range(dir, numel, numel / 3, numel - numel / 3, NULL, a[1], NULL));
    zt_status st = zt_state_read_range(dir, numel, 0, numel, a[0], a[1], a[2]);
    expect_user_error_or_ok(st);
    if (!st) {
        if (!l->data || l->end != size) abort(); /* it read a shard that is not valid */
        size_t packed = 0;
        for (uint64_t i = 0; i < l->nseg; i++) {
            uint64_t off = u64_at(b + HEADER + 16 * i), count = u64_at(b + HEADER + 16 * i + 8);
            for (int k = 0; k < 3; k++)
                if (memcmp(a[k] + off, b + l->data + ((size_t)k * l->total + packed) * 4, count * 4)) abort();
            packed += count;
        }
    }
    for (int k = 0; k < 3; k++) free(a[k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!root[0]) {
        /* in memory where there is a tmpfs for it: every input is two files written and read */
        snprintf(root, sizeof root, "%s/fuzz_state_%ld", zt_path_exists("/dev/shm") ? "/dev/shm" : "/tmp",
                 (long)getpid());
        snprintf(dir, sizeof dir, "%s/step-000004", root);
        if (zt_mkdir_p(dir)) abort();
        atexit(remove_dir);
    }
    if (shard[0]) unlink(shard);
    shard[0] = 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    char path[192];
    snprintf(path, sizeof path, "%s/trainer_state.json", dir);
    write_file(path, data, json_len);

    layout l = {0};
    uint8_t *b = NULL;
    if (nul) {
        size_t n = size - json_len - 1;
        b = malloc(n + 1);
        if (!b) abort();
        memcpy(b, nul + 1, n);
        fix_checksums(b, n, &l);
        int named = l.world >= 1 && l.world <= 8 && l.rank < l.world; /* else a name the header contradicts */
        snprintf(shard, sizeof shard, "%s/rank-%05d-of-%05d.bin", dir, named ? (int)l.rank : 0,
                 named ? (int)l.world : 1);
        write_file(shard, b, n);
    }
    zt_trainer_state s;
    expect_user_error_or_ok(zt_state_read_json(dir, &s));
    if (nul && l.numel && l.numel <= MAX_NUMEL) read_back(b, size - json_len - 1, &l);
    free(b);
    return 0;
}
