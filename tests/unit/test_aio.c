/* offload/aio: transfers round-trip through striped O_DIRECT files with many in flight; a
 * truncated file, a full file system (a small tmpfs, where root may mount one) and a
 * directory that cannot be made fail with the file named; the byte counters count. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "lib/core/fileio.h"
#include "lib/offload/aio.h"
#include "tests/unit/test.h"

static char root[256];

static unsigned char pattern(uint64_t i, int seed)
{
    return (unsigned char)(i * 2654435761u >> 13) ^ (unsigned char)seed;
}

/* writes n transfers at once, waits in reverse, reads them back at once, compares */
static void roundtrip(int stripes, size_t block, int depth, size_t bytes, int n)
{
    zt_aio *a;
    CHECK(zt_aio_open(&a, block, depth) == ZT_OK);
    char dirs[3][300];
    const char *paths[3];
    for (int i = 0; i < stripes; i++) {
        snprintf(dirs[i], sizeof dirs[i], "%s/stripe%d", root, i);
        paths[i] = dirs[i];
    }
    zt_aio_file f;
    CHECK(zt_aio_file_open(a, &f, paths, stripes, "data.swap") == ZT_OK);
    size_t span = zt_aio_round(bytes);
    unsigned char *w = zt_aio_alloc(span * n), *r = zt_aio_alloc(span * n);
    for (size_t i = 0; i < span * n; i++) w[i] = pattern(i, stripes);
    zt_aio_req *req = calloc((size_t)n, sizeof *req);
    for (int k = 0; k < n; k++) CHECK(zt_aio_write(a, &f, w + k * span, bytes, k * span, &req[k]) == ZT_OK);
    for (int k = n - 1; k >= 0; k--) CHECK(zt_aio_wait(a, &req[k]) == ZT_OK);
    for (int k = 0; k < n; k++) CHECK(zt_aio_read(a, &f, r + k * span, bytes, k * span, &req[k]) == ZT_OK);
    for (int k = 0; k < n; k++) CHECK(zt_aio_wait(a, &req[k]) == ZT_OK);
    size_t bad = 0;
    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < bytes; i++) bad += r[k * span + i] != w[k * span + i];
    CHECK_MSG(bad == 0, "%d stripes, block %zu, depth %d, %d × %zu bytes: %zu wrong", stripes, block, depth, n, bytes,
              bad);
    CHECK(f.direct == 1); /* ext4 under the tests' directory takes O_DIRECT */
    uint64_t rb, wb;
    zt_aio_take_bytes(a, &rb, &wb);
    CHECK(rb == span * n && wb == span * n);
    zt_aio_file_close(&f, 1);
    for (int i = 0; i < stripes; i++) CHECK(access(f.path[i], F_OK) != 0);
    zt_aio_free(w), zt_aio_free(r), free(req);
    zt_aio_close(a);
}

static void test_roundtrip(void)
{
    roundtrip(1, 4096, 1, 1, 1);
    roundtrip(1, 4096, 8, 100000, 5);
    roundtrip(3, 65536, 4, 1000000, 3);
    roundtrip(2, 1 << 20, 32, 5 << 20, 2);
}

static int has(const char *msg, const char *part) { return strstr(msg, part) != NULL; }

/* Writes 1 MiB of zeros to dir/name; the status of the write. */
static zt_status write_mib(zt_aio *a, zt_aio_file *f, const char *dir, const char *name)
{
    const char *paths[1] = {dir};
    CHECK(zt_aio_file_open(a, f, paths, 1, name) == ZT_OK);
    char *buf = zt_aio_alloc(1 << 20);
    zt_aio_req r;
    zt_status st = zt_aio_write(a, f, buf, 1 << 20, 0, &r);
    if (!st) st = zt_aio_wait(a, &r);
    zt_aio_free(buf);
    return st;
}

static void test_truncated(void)
{
    zt_aio *a;
    zt_aio_file f;
    CHECK(zt_aio_open(&a, 65536, 8) == ZT_OK);
    CHECK(write_mib(a, &f, root, "cut.swap") == ZT_OK);
    CHECK(truncate(f.path[0], 100000) == 0);
    char *buf = zt_aio_alloc(1 << 20);
    zt_aio_req r;
    CHECK(zt_aio_read(a, &f, buf, 1 << 20, 0, &r) == ZT_OK);
    zt_status st = zt_aio_wait(a, &r);
    CHECK_MSG(st == ZT_EIO && has(zt_errmsg(), "cut.swap") && has(zt_errmsg(), "ends there"), "%s", zt_errmsg());
    zt_aio_file_close(&f, 1);
    zt_aio_free(buf);
    zt_aio_close(a);
}

static void test_bad_dir(void)
{
    zt_aio *a;
    CHECK(zt_aio_open(&a, 4096, 4) == ZT_OK);
    char file[300];
    snprintf(file, sizeof file, "%s/a-file", root);
    CHECK(zt_write_file_atomic(file, "x", 1) == ZT_OK);
    char sub[320];
    snprintf(sub, sizeof sub, "%s/below", file); /* a directory under a plain file */
    const char *paths[1] = {sub};
    zt_aio_file f;
    CHECK(zt_aio_file_open(a, &f, paths, 1, "x.swap") != ZT_OK && has(zt_errmsg(), "a-file"));
    zt_aio_close(a);
    CHECK(zt_aio_open(&a, 1000, 4) == ZT_EUSER && has(zt_errmsg(), "block_size"));
}

/* a 256 KiB tmpfs (with or without O_DIRECT, by kernel): a 1 MiB write runs out of space */
static void test_tmpfs_full(void)
{
    char mnt[300];
    snprintf(mnt, sizeof mnt, "%s/small", root);
    CHECK(zt_mkdir_p(mnt) == ZT_OK);
    if (mount("zt-test", mnt, "tmpfs", 0, "size=256k") != 0) {
        fprintf(stderr, "  skip: cannot mount a tmpfs here (%s)\n", strerror(errno));
        return;
    }
    zt_aio *a;
    zt_aio_file f;
    CHECK(zt_aio_open(&a, 65536, 8) == ZT_OK);
    zt_status st = write_mib(a, &f, mnt, "full.swap");
    CHECK_MSG(st == ZT_EIO && has(zt_errmsg(), "full.swap") && has(zt_errmsg(), "No space left"), "%s", zt_errmsg());
    zt_aio_file_close(&f, 1);
    zt_aio_close(a);
    CHECK(umount(mnt) == 0);
}

int main(void)
{
    snprintf(root, sizeof root, "%s", "build/tests/aio.XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    RUN(test_roundtrip);
    RUN(test_truncated);
    RUN(test_bad_dir);
    RUN(test_tmpfs_full);
    zt_remove_tree(root);
    return test_summary();
}
