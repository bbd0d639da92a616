/* Tests of lib/hub/hub_fs.c, the writes of zt download below its root (a local directory, or
 * the cache): folders made on the way, a symbolic link on the way or at the name refused with a
 * message naming it and nothing written where it points, zt's own snapshot links replaced, links
 * above the root followed, paths outside the root refused, and a folder swapped for a link after
 * zt opened it: what zt writes then lands in the folder it opened. tests/cli/t2200-download.sh
 * swaps folders while a real download runs. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/fileio.h"
#include "lib/hub/hub_internal.h"
#include "tests/unit/test.h"

static char root[256];

static void path_of(char *out, size_t n, const char *rel) { snprintf(out, n, "%s/%s", root, rel); }

static hub_repo local_repo(const char *dir)
{
    hub_repo r = {.local = 1};
    path_of(r.storage, sizeof r.storage, dir);
    CHECK(!zt_path_join(r.locks, sizeof r.locks, r.storage, ".cache/huggingface/download"));
    return r;
}

static int exists(const char *rel)
{
    char p[512];
    struct stat sb;
    path_of(p, sizeof p, rel);
    return !lstat(p, &sb);
}

static int is_link(const char *rel)
{
    char p[512];
    struct stat sb;
    path_of(p, sizeof p, rel);
    return !lstat(p, &sb) && S_ISLNK(sb.st_mode);
}

static void make_link(const char *target, const char *rel)
{
    char p[512];
    path_of(p, sizeof p, rel);
    CHECK(!symlink(target, p));
}

static void make_dir(const char *rel)
{
    char p[512];
    path_of(p, sizeof p, rel);
    CHECK(!zt_mkdir_p(p));
}

/* the status is ZT_EUSER and the message says that rel (under root) is a link zt did not make */
static void check_refused(zt_status st, const char *rel)
{
    char want[600];
    snprintf(want, sizeof want, "'%s/%s' is a symbolic link zt did not make", root, rel);
    CHECK_MSG(st == ZT_EUSER && strstr(zt_errmsg(), want), "status %d: %s (wanted %s)", st, zt_errmsg(), want);
}

static void test_makes_folders(void)
{
    hub_repo r = local_repo("ld1");
    char p[512];
    int fd = -1;
    path_of(p, sizeof p, "ld1/a/b/c.bin");
    CHECK(!hub_open(&r, p, O_RDWR | O_CREAT, &fd) && fd >= 0);
    if (fd >= 0) close(fd);
    CHECK(exists("ld1/a/b/c.bin") && !is_link("ld1/a/b/c.bin"));
    path_of(p, sizeof p, "ld1/a/meta");
    CHECK(!hub_write_atomic(&r, p, "one", 3, 1));
    CHECK(!hub_write_atomic(&r, p, "two", 3, 0)); /* kept: it exists */
    char buf[8] = "";
    FILE *f = fopen(p, "r");
    CHECK(f && fread(buf, 1, sizeof buf - 1, f) == 3 && !strcmp(buf, "one"));
    if (f) fclose(f);
    path_of(p, sizeof p, "ld1/x/y");
    CHECK(!hub_mkdir(&r, p) && exists("ld1/x/y"));
}

static void test_refuses_planted_links(void)
{
    hub_repo r = local_repo("ld2");
    char p[512], q[512];
    int fd = -1;
    make_dir("victim2");
    make_dir("ld2");
    make_link("../victim2", "ld2/sub");
    path_of(p, sizeof p, "ld2/sub/x");
    check_refused(hub_open(&r, p, O_RDWR | O_CREAT, &fd), "ld2/sub");
    check_refused(hub_write_atomic(&r, p, "x", 1, 1), "ld2/sub");
    check_refused(hub_symlink(&r, "../blobs/x", p), "ld2/sub");
    path_of(q, sizeof q, "ld2/sub/deeper");
    check_refused(hub_mkdir(&r, q), "ld2/sub");
    path_of(q, sizeof q, "ld2/sub");
    check_refused(hub_mkdir(&r, q), "ld2/sub");
    path_of(q, sizeof q, "ld2/src");
    CHECK(!hub_write_atomic(&r, q, "x", 1, 1));
    check_refused(hub_rename(&r, q, p), "ld2/sub");
    CHECK(exists("ld2/src"));
    test_write_text(strcat(strcpy(q, root), "/victim2/x"), "mine");
    check_refused(hub_unlink(&r, p), "ld2/sub");
    CHECK(exists("victim2/x") && !exists("victim2/deeper"));
}

/* A link at the name itself: opening, writing and renaming onto it are refused; a snapshot
 * link (zt's own) is replaced by hub_symlink, not followed. */
static void test_link_at_the_name(void)
{
    hub_repo r = local_repo("ld3");
    char p[512], q[512];
    int fd = -1;
    make_dir("ld3");
    test_write_text(strcat(strcpy(q, root), "/secret3"), "secret");
    make_link("../secret3", "ld3/f");
    path_of(p, sizeof p, "ld3/f");
    check_refused(hub_open(&r, p, O_RDWR | O_CREAT, &fd), "ld3/f");
    check_refused(hub_write_atomic(&r, p, "x", 1, 1), "ld3/f");
    path_of(q, sizeof q, "ld3/src");
    CHECK(!hub_write_atomic(&r, q, "x", 1, 1));
    check_refused(hub_rename(&r, q, p), "ld3/f");
    CHECK(!hub_symlink(&r, "blobs/new", p) && is_link("ld3/f"));
    char target[64] = "";
    CHECK(readlink(p, target, sizeof target - 1) > 0 && !strcmp(target, "blobs/new"));
    CHECK(!hub_unlink(&r, p) && !exists("ld3/f") && exists("secret3"));
    char buf[16] = "";
    FILE *f = fopen(strcat(strcpy(q, root), "/secret3"), "r");
    CHECK(f && fread(buf, 1, sizeof buf - 1, f) == 6 && !strcmp(buf, "secret"));
    if (f) fclose(f);
}

/* In the cache the root is the folder holding models--org--name: a link to it is the user's. */
static void test_cache_root(void)
{
    hub_repo r = {.local = 0};
    char p[2 * HUB_PATH_MAX];
    make_dir("realcache");
    make_link("realcache", "cache");
    snprintf(r.storage, sizeof r.storage, "%s/cache/models--org--x", root);
    snprintf(p, sizeof p, "%s/blobs/abc", r.storage);
    CHECK(!hub_write_atomic(&r, p, "blob", 4, 1) && exists("realcache/models--org--x/blobs/abc"));
    snprintf(p, sizeof p, "%s/cache/.locks/models--org--x/abc.lock", root);
    int fd = -1;
    CHECK(!hub_open(&r, p, O_RDWR | O_CREAT, &fd) && fd >= 0);
    if (fd >= 0) close(fd);
    make_dir("victim4");
    make_link("../victim4", "realcache/models--org--y");
    snprintf(r.storage, sizeof r.storage, "%s/cache/models--org--y", root);
    snprintf(p, sizeof p, "%s/refs/main", r.storage);
    check_refused(hub_write_atomic(&r, p, "c", 1, 1), "cache/models--org--y");
    CHECK(!exists("victim4/refs"));
}

static void test_outside_the_root(void)
{
    hub_repo r = local_repo("ld5");
    char p[512];
    snprintf(p, sizeof p, "%s/elsewhere/x", root);
    CHECK(hub_write_atomic(&r, p, "x", 1, 1) == ZT_ERUNTIME && !exists("elsewhere"));
    snprintf(p, sizeof p, "%s/ld5/../escaped", root);
    CHECK(hub_write_atomic(&r, p, "x", 1, 1) == ZT_EUSER && !exists("escaped"));
    snprintf(p, sizeof p, "%s/ld5/a/../../escaped2", root);
    CHECK(hub_write_atomic(&r, p, "x", 1, 1) == ZT_EUSER && !exists("escaped2"));
    snprintf(p, sizeof p, "%s/ld5/file", root);
    CHECK(!hub_write_atomic(&r, p, "x", 1, 1));
    snprintf(p, sizeof p, "%s/ld5/file/x", root);
    CHECK(hub_write_atomic(&r, p, "x", 1, 1) == ZT_EUSER && strstr(zt_errmsg(), "is not a directory"));
}

/* The folder hub_dir_open hands out stays the one it opened when a link replaces it. */
static void test_swapped_folder(void)
{
    hub_repo r = local_repo("ld6");
    char p[512], a[512], b[512];
    hub_dir d;
    make_dir("victim6");
    path_of(p, sizeof p, "ld6/sub/file");
    CHECK(!hub_dir_open(&r, p, 1, &d) && !strcmp(d.name, "file"));
    path_of(a, sizeof a, "ld6/sub");
    path_of(b, sizeof b, "moved6");
    CHECK(!rename(a, b));
    make_link("../victim6", "ld6/sub");
    int fd = openat(d.fd, d.name, O_WRONLY | O_CREAT | O_NOFOLLOW, 0644);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    hub_dir_close(&d);
    CHECK(exists("moved6/file") && !exists("victim6/file"));
    check_refused(hub_dir_open(&r, p, 1, &d), "ld6/sub");
    CHECK(d.fd == -1);
}

/* descriptors open in this process (the listing's own included) */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (; d && readdir(d); n++) {
    }
    if (d) closedir(d);
    return n;
}

static int fds_before;

/* every case above, refusals included, closed what it opened */
static void test_no_descriptor_left(void)
{
    CHECK_MSG(open_fds() == fds_before, "%d open, %d before", open_fds(), fds_before);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/zt_test_hub_fs_XXXXXX");
    if (!mkdtemp(root)) return perror("mkdtemp"), 1;
    fds_before = open_fds();
    RUN(test_makes_folders);
    RUN(test_refuses_planted_links);
    RUN(test_link_at_the_name);
    RUN(test_cache_root);
    RUN(test_outside_the_root);
    RUN(test_swapped_folder);
    RUN(test_no_descriptor_left);
    if (zt_remove_tree(root)) fprintf(stderr, "cannot remove %s\n", root);
    return test_summary();
}
