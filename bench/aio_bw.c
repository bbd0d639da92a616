/* bench/aio_bw: sequential disk bandwidth through zt's I/O engine (lib/offload/aio.h), to
 * set beside fio's on the same file size, block size and queue depth (bench/offload.sh).
 *
 *     make build/libzt.a
 *     gcc -std=gnu11 -O3 -I. bench/aio_bw.c build/libzt.a $(pkg-config --libs liburing) -lm -o build/bench/aio_bw
 *     build/bench/aio_bw [--dir build/bench/offload] [--size 2G] [--block 1M] [--depth 32] [--transfers 64]
 *
 * Writes a new file of --size bytes sequentially (O_DIRECT), fsyncs it, rewrites it in place,
 * fsyncs again, then reads it back, timing each pass, and prints one JSON line
 * {"write_MBps": ..., "rewrite_MBps": ..., "read_MBps": ...} (MB = 10^6 bytes, as fio's
 * bw_bytes). The first write extends the file, the rewrite overwrites blocks it already
 * has: the moments' swap file sees the second kind at every step. The transfers are
 * --block bytes each, --transfers of them queued in a ring of buffers (the oldest waited
 * before its buffer is reused), so the engine always has more blocks ready than its
 * --depth slots. Every block carries its index and is checked when read back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "lib/offload/aio.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* A byte count with an optional binary suffix (K, M, G); 0 when malformed or out of range. */
static uint64_t parse_bytes(const char *s, uint64_t max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-') return 0;
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (shift) end++;
    if (*end || v > max >> shift) return 0;
    return (uint64_t)v << shift;
}

static void die(const char *what)
{
    fprintf(stderr, "aio_bw: %s: %s\n", what, zt_errmsg());
    exit(1);
}

typedef struct ring {
    zt_aio *aio;
    zt_aio_file *f;
    char **buf;
    zt_aio_req *req;
    int n;
    size_t block;
} ring;

/* One sequential pass over bytes; returns MB/s. A write pass stamps each block with its
 * index and ends with fsync; a read pass checks the stamps. */
static double pass(ring *g, uint64_t bytes, int write)
{
    uint64_t nblocks = bytes / g->block;
    double t0 = now_s();
    for (uint64_t i = 0; i < nblocks + (uint64_t)g->n; i++) {
        int k = (int)(i % (uint64_t)g->n);
        if (i >= (uint64_t)g->n) { /* the transfer that last used this buffer */
            uint64_t prev = i - (uint64_t)g->n;
            zt_status st = zt_aio_wait(g->aio, &g->req[k]);
            if (st) die(write ? "write" : "read");
            uint64_t stamp;
            memcpy(&stamp, g->buf[k], sizeof stamp);
            if (!write && stamp != prev) {
                fprintf(stderr, "aio_bw: block %llu read back as block %llu\n", (unsigned long long)prev,
                        (unsigned long long)stamp);
                exit(1);
            }
        }
        if (i >= nblocks) continue;
        zt_status st;
        if (write) {
            memcpy(g->buf[k], &i, sizeof i);
            st = zt_aio_write(g->aio, g->f, g->buf[k], g->block, i * g->block, &g->req[k]);
        } else {
            st = zt_aio_read(g->aio, g->f, g->buf[k], g->block, i * g->block, &g->req[k]);
        }
        if (st) die(write ? "write" : "read");
    }
    if (write)
        for (int s = 0; s < g->f->nfd; s++)
            if (fsync(g->f->fd[s])) {
                fprintf(stderr, "aio_bw: fsync '%s': %s\n", g->f->path[s], strerror(errno));
                exit(1);
            }
    return (double)nblocks * g->block / (now_s() - t0) / 1e6;
}

int main(int argc, char **argv)
{
    const char *dir = "build/bench/offload";
    uint64_t size = 2ull << 30, block = 1 << 20, depth = 32, transfers = 64;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t *num = !strcmp(opt, "--size") ? &size : !strcmp(opt, "--block") ? &block
                      : !strcmp(opt, "--depth") ? &depth : !strcmp(opt, "--transfers") ? &transfers : NULL;
        if (!val || (!num && strcmp(opt, "--dir"))) {
            fprintf(stderr, "usage: aio_bw [--dir DIR] [--size BYTES] [--block BYTES] [--depth N] [--transfers N]\n"
                            "(sizes take K, M or G)\n");
            return 2;
        }
        if (num && !(*num = parse_bytes(val, num == &size ? 1ull << 50 : 1 << 30))) {
            fprintf(stderr, "aio_bw: %s '%s' is not a positive size\n", opt, val);
            return 2;
        }
        if (!num) dir = val;
        i++;
    }
    if (block % ZT_AIO_ALIGN || size % block || depth > 4096 || transfers > 4096) {
        fprintf(stderr, "aio_bw: --block must be a multiple of %d, --size a multiple of --block, "
                        "--depth and --transfers at most 4096\n", ZT_AIO_ALIGN);
        return 2;
    }

    zt_aio *aio;
    zt_status st = zt_aio_open(&aio, block, (int)depth);
    if (st) die("opening the engine");
    zt_aio_file f;
    if ((st = zt_aio_file_open(aio, &f, &dir, 1, "aio_bw.dat"))) die("opening the file");
    if (!f.direct) fprintf(stderr, "aio_bw: '%s' took no O_DIRECT: these are page-cache numbers\n", dir);

    /* Only now is the directory sure to exist; the empty file costs nothing. */
    struct statvfs fs;
    if (statvfs(dir, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < size) {
        fprintf(stderr, "aio_bw: '%s' has %.2f GiB free, the test file needs %.2f GiB (--size)\n", dir,
                (double)fs.f_bavail * fs.f_frsize / (1 << 30), (double)size / (1 << 30));
        zt_aio_file_close(&f, 1);
        return 1;
    }

    ring g = {aio, &f, calloc(transfers, sizeof(char *)), calloc(transfers, sizeof(zt_aio_req)), (int)transfers, block};
    int allocated = g.buf && g.req;
    for (uint64_t k = 0; allocated && k < transfers; k++) allocated = (g.buf[k] = zt_aio_alloc(block)) != NULL;
    if (!allocated) {
        fprintf(stderr, "aio_bw: out of memory for %llu buffers of %llu bytes\n", (unsigned long long)transfers,
                (unsigned long long)block);
        return 1;
    }

    double write = pass(&g, size, 1), rewrite = pass(&g, size, 1), read = pass(&g, size, 0);
    printf("{\"write_MBps\": %.1f, \"rewrite_MBps\": %.1f, \"read_MBps\": %.1f, \"bytes\": %llu, \"block\": %llu, "
           "\"depth\": %llu, \"transfers\": %llu, \"direct\": %d}\n",
           write, rewrite, read, (unsigned long long)size, (unsigned long long)block, (unsigned long long)depth,
           (unsigned long long)transfers, f.direct);

    for (uint64_t k = 0; k < transfers; k++) zt_aio_free(g.buf[k]);
    free(g.buf);
    free(g.req);
    zt_aio_file_close(&f, 1);
    zt_aio_close(aio);
    return 0;
}
