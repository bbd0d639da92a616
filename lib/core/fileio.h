/* core/fileio: whole-file reads, atomic writes (temp name, fsync, rename, fsync
 * of the directory) and directory helpers.
 *
 *     char *text; size_t len;
 *     if ((st = zt_read_file("config.json", &text, &len))) return st;  // NUL-terminated
 *     st = zt_write_file_atomic("out/config.json", text, len);
 */
#ifndef ZT_CORE_FILEIO_H
#define ZT_CORE_FILEIO_H

#include <stddef.h>
#include <stdio.h>

#include "status.h"

zt_status zt_read_file(const char *path, char **data, size_t *len); /* free(*data) */
zt_status zt_write_file_atomic(const char *path, const void *data, size_t len);

/* The one way zt replaces a file: opens path.tmp.<pid> (same directory) for writing;
 * write to a->f or with zt_atomic_write; zt_atomic_commit flushes, fsyncs, closes and
 * renames it to path, then fsyncs the directory (EINVAL, which some tmpfs and overlay
 * filesystems return, is tolerated); on failure it removes the temporary file.
 * zt_atomic_abort closes and removes it. */
typedef struct zt_atomic_file {
    FILE *f;
    char path[4096], tmp[4096 + 32];
} zt_atomic_file;
zt_status zt_atomic_open(zt_atomic_file *a, const char *path);
zt_status zt_atomic_write(zt_atomic_file *a, const void *data, size_t len);
zt_status zt_atomic_commit(zt_atomic_file *a);
void zt_atomic_abort(zt_atomic_file *a);

/* An exclusive lock on the file path.lock (made when absent), held until zt_unlock_file(*fd):
 * what serialises the builders of one cache entry (the ranks of a job, or two runs). */
zt_status zt_lock_file(const char *path, int *fd);
void zt_unlock_file(int fd);

zt_status zt_fsync_dir(const char *dir);
zt_status zt_mkdir_p(const char *dir);
/* Removes a directory tree (for replacing a run's final/ directory). */
zt_status zt_remove_tree(const char *path);
int zt_path_exists(const char *path);
/* dst = a/b (b as is when absolute); ZT_EUSER when it does not fit */
zt_status zt_path_join(char *dst, size_t n, const char *a, const char *b);

#endif
