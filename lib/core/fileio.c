#define _GNU_SOURCE
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

zt_status zt_read_file(const char *path, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return zt_fail(errno == ENOENT || errno == EACCES ? ZT_EUSER : ZT_EIO, "cannot open '%s': %s", path,
                       strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return zt_fail(ZT_EUSER, "'%s' is not a regular file", path);
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    if (!buf) {
        fclose(f);
        return zt_fail(ZT_ENOMEM, "out of memory reading '%s'", path);
    }
    size_t n = fread(buf, 1, (size_t)sb.st_size, f);
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return zt_fail(ZT_EIO, "error reading '%s'", path);
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return ZT_OK;
}

zt_status zt_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return zt_fail(ZT_EIO, "cannot open directory '%s': %s", dir, strerror(errno));
    int r = fsync(fd);
    close(fd);
    if (r && errno != EINVAL) return zt_fail(ZT_EIO, "fsync of directory '%s' failed: %s", dir, strerror(errno));
    return ZT_OK;
}

zt_status zt_atomic_open(zt_atomic_file *a, const char *path)
{
    if (strlen(path) >= sizeof a->path) return zt_fail(ZT_EUSER, "path too long: '%s'", path);
    strcpy(a->path, path);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%d", path, (int)getpid());
    a->f = fopen(a->tmp, "wb");
    if (!a->f) return zt_fail(ZT_EIO, "cannot create '%s': %s", a->tmp, strerror(errno));
    return ZT_OK;
}

void zt_atomic_abort(zt_atomic_file *a)
{
    if (a->f) fclose(a->f);
    a->f = NULL;
    unlink(a->tmp);
}

zt_status zt_atomic_write(zt_atomic_file *a, const void *data, size_t len)
{
    if (len && fwrite(data, 1, len, a->f) != len)
        return zt_fail(ZT_EIO, "writing '%s' failed: %s", a->path, strerror(errno));
    return ZT_OK;
}

zt_status zt_atomic_commit(zt_atomic_file *a)
{
    const char *step = NULL;
    if (fflush(a->f)) step = "write";
    else if (ferror(a->f)) step = "write", errno = EIO; /* an earlier fwrite or fprintf failed */
    else if (fsync(fileno(a->f))) step = "fsync";
    int e = errno;
    if (fclose(a->f) && !step) step = "close", e = errno;
    a->f = NULL;
    if (!step && rename(a->tmp, a->path)) step = "rename", e = errno;
    if (step) {
        unlink(a->tmp);
        return zt_fail(ZT_EIO, "writing '%s' failed at %s: %s", a->path, step, strerror(e));
    }
    char dir[sizeof a->path];
    strcpy(dir, a->path);
    return zt_fsync_dir(dirname(dir));
}

zt_status zt_write_file_atomic(const char *path, const void *data, size_t len)
{
    zt_atomic_file a;
    zt_status st = zt_atomic_open(&a, path);
    if (st) return st;
    if ((st = zt_atomic_write(&a, data, len))) {
        zt_atomic_abort(&a);
        return st;
    }
    return zt_atomic_commit(&a);
}

zt_status zt_mkdir_p(const char *dir)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return zt_fail(ZT_EUSER, "path too long: '%s'", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) && errno != EEXIST) return zt_fail(ZT_EIO, "cannot create '%s': %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) && errno != EEXIST) return zt_fail(ZT_EIO, "cannot create '%s': %s", buf, strerror(errno));
    struct stat sb;
    if (stat(buf, &sb) || !S_ISDIR(sb.st_mode)) return zt_fail(ZT_EUSER, "'%s' exists and is not a directory", buf);
    return ZT_OK;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) { return remove(path); }

zt_status zt_remove_tree(const char *path)
{
    if (!zt_path_exists(path)) return ZT_OK;
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS))
        return zt_fail(ZT_EIO, "cannot remove '%s': %s", path, strerror(errno));
    return ZT_OK;
}

int zt_path_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

zt_status zt_path_join(char *dst, size_t n, const char *a, const char *b)
{
    int r = b[0] == '/' || !a[0] ? snprintf(dst, n, "%s", b) : snprintf(dst, n, "%s/%s", a, b);
    if (r < 0 || (size_t)r >= n) return zt_fail(ZT_EUSER, "path too long: '%s/%s'", a, b);
    return ZT_OK;
}

zt_status zt_lock_file(const char *path, int *fd)
{
    char lock[4096 + 8];
    if (snprintf(lock, sizeof lock, "%s.lock", path) >= (int)sizeof lock)
        return zt_fail(ZT_EUSER, "'%s': the path is too long", path);
    *fd = open(lock, O_RDWR | O_CREAT, 0644);
    if (*fd >= 0 && !flock(*fd, LOCK_EX)) return ZT_OK;
    zt_status st = zt_fail(ZT_EIO, "cannot lock '%s': %s", lock, strerror(errno));
    if (*fd >= 0) close(*fd);
    *fd = -1;
    return st;
}

void zt_unlock_file(int fd) { close(fd); /* releases the lock */ }
