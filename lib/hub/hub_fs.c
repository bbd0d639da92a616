/* hub: every write below the download's root, free of races with links swapped in. The root is
 * the local directory, or the cache (where models--org--name and .locks live); links above it
 * are the user's. Below it the kernel never resolves a path of more than one component for a
 * write: the root is opened, each folder on the way is opened from its parent's descriptor with
 * O_NOFOLLOW (made with mkdirat first when missing), and the last component is created,
 * renamed or removed relative to its folder's descriptor. A symbolic link met on the way, even
 * one that replaced a folder while zt runs, is refused (ZT_EUSER naming it), never followed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub_internal.h"
#include "lib/core/fileio.h"

enum { FOLDER_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC };

/* The length of path's prefix that names the root: the local directory, or the cache holding
 * models--org--name (0: the current directory). */
static size_t root_len(const hub_repo *r)
{
    const char *slash = strrchr(r->storage, '/');
    return r->local ? strlen(r->storage) : slash ? (size_t)(slash - r->storage) : 0;
}

static zt_status refuse_link(const char *path, size_t n)
{
    return zt_fail(ZT_EUSER, "'%.*s' is a symbolic link zt did not make: refusing to write through it", (int)n, path);
}

static int is_link_at(int dirfd, const char *name)
{
    struct stat sb;
    return !fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) && S_ISLNK(sb.st_mode);
}

/* The folder name (path[0, n) names it) in dirfd, made when missing and create is set. */
static zt_status open_folder(int dirfd, const char *name, int create, const char *path, size_t n, int *fd)
{
    *fd = openat(dirfd, name, FOLDER_FLAGS);
    if (*fd < 0 && errno == ENOENT && create && (!mkdirat(dirfd, name, 0755) || errno == EEXIST))
        *fd = openat(dirfd, name, FOLDER_FLAGS);
    if (*fd >= 0) return ZT_OK;
    int e = errno;
    if (is_link_at(dirfd, name)) return refuse_link(path, n);
    if (e == ENOTDIR) return zt_fail(ZT_EUSER, "'%.*s' exists and is not a directory", (int)n, path);
    return zt_fail(ZT_EIO, "cannot %s '%.*s': %s", create ? "create" : "open", (int)n, path, strerror(e));
}

static zt_status open_root(const char *path, size_t root, int create, int *fd)
{
    char dir[HUB_PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", (int)root, path);
    if (!root) strcpy(dir, ".");
    zt_status st = create ? zt_mkdir_p(dir) : ZT_OK;
    if (!st && (*fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        st = zt_fail(ZT_EIO, "cannot open '%s': %s", dir, strerror(errno));
    return st;
}

zt_status hub_dir_open(const hub_repo *r, const char *path, int create, hub_dir *d)
{
    size_t root = root_len(r);
    const char *slash = strrchr(path, '/');
    d->fd = -1;
    d->name = slash ? slash + 1 : path;
    if (strncmp(path, r->storage, root) || (root && path[root] != '/') || (root && slash < path + root) || !*d->name ||
        !strcmp(d->name, ".") || !strcmp(d->name, ".."))
        return zt_fail(ZT_ERUNTIME, "'%s' is not a file inside '%.*s'", path, (int)root, r->storage);
    int fd = -1;
    zt_status st = open_root(path, root, create, &fd);
    for (const char *c = path + root; !st;) {
        while (*c == '/') c++;
        if (c >= d->name) break;
        size_t n = strcspn(c, "/");
        char name[NAME_MAX + 1];
        if (n > NAME_MAX || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) {
            st = zt_fail(ZT_EUSER, "'%.*s': not a folder name zt writes below", (int)(c + n - path), path);
            break;
        }
        memcpy(name, c, n);
        name[n] = 0;
        int next;
        st = open_folder(fd, name, create, path, (size_t)(c + n - path), &next);
        close(fd);
        fd = next;
        c += n;
    }
    if (st && fd >= 0) close(fd);
    d->fd = st ? -1 : fd;
    return st;
}

void hub_dir_close(hub_dir *d)
{
    if (d->fd >= 0) close(d->fd);
    d->fd = -1;
}

zt_status hub_folder_open(const hub_repo *r, const char *dir, int create, int *fd)
{
    hub_dir d;
    zt_status st = hub_dir_open(r, dir, create, &d);
    if (!st) st = open_folder(d.fd, d.name, create, dir, strlen(dir), fd);
    hub_dir_close(&d);
    return st;
}

zt_status hub_mkdir(const hub_repo *r, const char *dir)
{
    int fd;
    zt_status st = hub_folder_open(r, dir, 1, &fd);
    if (!st) close(fd);
    return st;
}

zt_status hub_open(const hub_repo *r, const char *path, int flags, int *fd)
{
    hub_dir d;
    zt_status st = hub_dir_open(r, path, 1, &d);
    if (st) return st;
    if ((*fd = openat(d.fd, d.name, flags | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0) {
        int e = errno;
        st = is_link_at(d.fd, d.name) ? refuse_link(path, strlen(path))
                                      : zt_fail(ZT_EIO, "cannot open '%s': %s", path, strerror(e));
    }
    hub_dir_close(&d);
    return st;
}

/* A link at the name itself is refused too, though renameat would only replace it. */
static zt_status refuse_link_at(const hub_dir *d, const char *path)
{
    return is_link_at(d->fd, d->name) ? refuse_link(path, strlen(path)) : ZT_OK;
}

static zt_status sync_folder(const hub_dir *d, const char *path)
{
    if (fsync(d->fd) && errno != EINVAL)
        return zt_fail(ZT_EIO, "fsync of the folder of '%s' failed: %s", path, strerror(errno));
    return ZT_OK;
}

/* data into tmp, a name in d's folder, fsynced (path, what it will become, names it in errors) */
static zt_status write_tmp(const hub_dir *d, const char *tmp, const char *path, const void *data, size_t n)
{
    int fd = openat(d->fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return zt_fail(ZT_EIO, "cannot create '%s.tmp': %s", path, strerror(errno));
    const char *step = NULL;
    for (size_t done = 0; done < n && !step;) {
        ssize_t w = write(fd, (const char *)data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) step = "write", errno = w < 0 ? errno : EIO;
        done += w > 0 ? (size_t)w : 0;
    }
    if (!step && fsync(fd)) step = "fsync";
    int e = errno;
    if (close(fd) && !step) step = "close", e = errno;
    return step ? zt_fail(ZT_EIO, "writing '%s' failed at %s: %s", path, step, strerror(e)) : ZT_OK;
}

zt_status hub_write_atomic(const hub_repo *r, const char *path, const void *data, size_t n, int replace)
{
    hub_dir d;
    char tmp[NAME_MAX + 32];
    struct stat sb;
    zt_status st = hub_dir_open(r, path, 1, &d);
    if (!st) st = refuse_link_at(&d, path);
    if (st || (!replace && !fstatat(d.fd, d.name, &sb, AT_SYMLINK_NOFOLLOW))) {
        hub_dir_close(&d);
        return st;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", d.name, (int)getpid());
    if (!(st = write_tmp(&d, tmp, path, data, n)) && renameat(d.fd, tmp, d.fd, d.name))
        st = zt_fail(ZT_EIO, "writing '%s' failed at rename: %s", path, strerror(errno));
    if (st) unlinkat(d.fd, tmp, 0);
    if (!st) st = sync_folder(&d, path);
    hub_dir_close(&d);
    return st;
}

zt_status hub_rename(const hub_repo *r, const char *from, const char *to)
{
    hub_dir a, b = {.fd = -1};
    zt_status st = hub_dir_open(r, from, 0, &a);
    if (!st) st = hub_dir_open(r, to, 1, &b);
    if (!st) st = refuse_link_at(&b, to);
    if (!st && renameat(a.fd, a.name, b.fd, b.name))
        st = zt_fail(ZT_EIO, "cannot move '%s' to '%s': %s", from, to, strerror(errno));
    if (!st) st = sync_folder(&b, to);
    hub_dir_close(&a);
    hub_dir_close(&b);
    return st;
}

zt_status hub_symlink(const hub_repo *r, const char *target, const char *path)
{
    hub_dir d;
    char tmp[NAME_MAX + 32];
    zt_status st = hub_dir_open(r, path, 1, &d);
    if (st) return st;
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", d.name, (int)getpid());
    unlinkat(d.fd, tmp, 0);
    if (symlinkat(target, d.fd, tmp) || renameat(d.fd, tmp, d.fd, d.name)) {
        st = zt_fail(ZT_EIO, "cannot link '%s': %s", path, strerror(errno));
        unlinkat(d.fd, tmp, 0);
    }
    hub_dir_close(&d);
    return st;
}

zt_status hub_unlink(const hub_repo *r, const char *path)
{
    hub_dir d;
    zt_status st = hub_dir_open(r, path, 0, &d);
    if (!st && unlinkat(d.fd, d.name, 0)) st = zt_fail(ZT_EIO, "cannot remove '%s': %s", path, strerror(errno));
    hub_dir_close(&d);
    return st;
}
