/* aio: what both engines share (aio.h). */
#define _GNU_SOURCE
#include "aio_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/fileio.h"
#include "lib/core/log.h"

void *zt_aio_alloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, ZT_AIO_ALIGN, zt_aio_round(bytes ? bytes : 1))) return NULL;
    memset(p, 0, zt_aio_round(bytes ? bytes : 1));
    return p;
}

void zt_aio_free(void *p) { free(p); }

zt_status zt_aio_file_open(zt_aio *a, zt_aio_file *f, const char *const *paths, int npaths, const char *name)
{
    (void)a;
    memset(f, 0, sizeof *f);
    for (int i = 0; i < ZT_AIO_MAX_PATHS; i++) f->fd[i] = -1;
    if (npaths < 1 || npaths > ZT_AIO_MAX_PATHS)
        return zt_fail(ZT_EUSER, "offload.nvme_path: %d directories (1 to %d)", npaths, ZT_AIO_MAX_PATHS);
    f->direct = 1;
    for (int i = 0; i < npaths; i++) {
        zt_status st = zt_mkdir_p(paths[i]);
        if (!st && snprintf(f->path[i], sizeof f->path[i], "%s/%s", paths[i], name) >= (int)sizeof f->path[i])
            st = zt_fail(ZT_EUSER, "offload.nvme_path '%s': the path is too long", paths[i]);
        int fd = st ? -1 : open(f->path[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0600);
        if (!st && fd < 0 && errno == EINVAL) { /* no O_DIRECT here (tmpfs): the page cache it is */
            fd = open(f->path[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd >= 0 && f->direct)
                zt_log_warn("'%s' does not take O_DIRECT: offload I/O goes through the page cache", f->path[i]);
            f->direct = 0;
        }
        if (!st && fd < 0)
            st = zt_fail(errno == ENOENT || errno == EACCES || errno == EROFS ? ZT_EUSER : ZT_EIO,
                         "cannot create the offload file '%s': %s", f->path[i], strerror(errno));
        if (st) {
            zt_aio_file_close(f, 1);
            return st;
        }
        f->fd[i] = fd;
        f->nfd = i + 1;
    }
    return ZT_OK;
}

void zt_aio_file_close(zt_aio_file *f, int unlink_it)
{
    for (int i = 0; i < f->nfd; i++) {
        if (f->fd[i] >= 0) close(f->fd[i]);
        if (unlink_it) unlink(f->path[i]);
        f->fd[i] = -1;
    }
    f->nfd = 0;
}

zt_status zt_aio_file_reserve(zt_aio *a, zt_aio_file *f, uint64_t bytes)
{
    uint64_t block = zt_aio_block_size(a), blocks = (bytes + block - 1) / block;
    for (int k = 0; k < f->nfd; k++) {
        uint64_t mine = blocks / (uint64_t)f->nfd + ((uint64_t)k < blocks % (uint64_t)f->nfd);
        int rc = mine ? posix_fallocate(f->fd[k], 0, (off_t)(mine * block)) : 0;
        if (rc)
            return zt_fail(ZT_EIO, "reserving %llu bytes for '%s' failed: %s", (unsigned long long)(mine * block),
                           f->path[k], strerror(rc));
    }
    return ZT_OK;
}

int zt_aio_place(const zt_aio_file *f, size_t block, uint64_t off, uint64_t *file_off, uint64_t *room)
{
    uint64_t b = off / block, in = off % block;
    *file_off = (b / (uint64_t)f->nfd) * block + in;
    *room = block - in;
    return (int)(b % (uint64_t)f->nfd);
}

zt_status zt_aio_fail(const zt_aio_req *r, size_t block, uint64_t off, int err)
{
    uint64_t at, room;
    int k = zt_aio_place(r->f, block, off, &at, &room);
    if (!err)
        return zt_fail(ZT_EIO, "reading '%s' at byte %llu: the file ends there (truncated or removed underneath)",
                       r->f->path[k], (unsigned long long)at);
    return zt_fail(ZT_EIO, "%s '%s' at byte %llu failed: %s", r->write ? "writing" : "reading", r->f->path[k],
                   (unsigned long long)at, strerror(err));
}

zt_status zt_aio_prepare(zt_aio_file *f, void *buf, size_t bytes, uint64_t off, int write, zt_aio_req *r)
{
    memset(r, 0, sizeof *r);
    r->f = f, r->buf = buf, r->off = off, r->bytes = zt_aio_round(bytes), r->write = write;
    ZT_ASSERT(off % ZT_AIO_ALIGN == 0 && (uintptr_t)buf % ZT_AIO_ALIGN == 0 && f->nfd > 0);
    return ZT_OK;
}

void zt_aio_scratch_name(char *out, size_t n, int rank, const char *kind)
{
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    snprintf(out, n, "zt-%s-%ld-rank-%05d.%s", host, (long)getpid(), rank, kind);
}

void zt_aio_take_bytes(zt_aio *a, uint64_t *read, uint64_t *written)
{
    zt_aio_stats *s = zt_aio_stats_of(a);
    *read = s->read_bytes, *written = s->write_bytes;
    s->read_bytes = s->write_bytes = 0;
}

double zt_aio_take_wait_s(zt_aio *a)
{
    zt_aio_stats *s = zt_aio_stats_of(a);
    double t = s->wait_s;
    s->wait_s = 0;
    return t;
}
