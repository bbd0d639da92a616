/* hub: where files go. The cache (as huggingface_hub lays it out):
 *   models--org--name/blobs/<etag>               the content; <etag>.incomplete while it downloads
 *   models--org--name/snapshots/<commit>/<path>  a relative symlink to ../../blobs/<etag>
 *   models--org--name/refs/<revision>            the commit, for a branch or tag
 *   .locks/models--org--name/<etag>.lock         flock(2), shared with the Python client
 * A local directory: <dir>/<path> as plain files, and under <dir>/.cache/huggingface/download/
 * <path>.metadata (commit, etag, timestamp: lines the Python client reads), <path>.lock and the
 * partial <path>.<etag>.incomplete. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hub_internal.h"
#include "lib/core/log.h"

static zt_status path_fmt(char *out, size_t n, const char *fmt, const char *a, const char *b, const char *c)
{
    int r = snprintf(out, n, fmt, a, b, c);
    return r < 0 || (size_t)r >= n ? zt_fail(ZT_EUSER, "path too long: '%s/%s'", a, b) : ZT_OK;
}

static zt_status blob_path(const hub_repo *r, const hub_file *f, char *out, size_t n)
{
    return path_fmt(out, n, "%s/blobs/%s%s", r->storage, f->etag, "");
}

static zt_status metadata_path(const hub_repo *r, const hub_file *f, char *out, size_t n)
{
    return path_fmt(out, n, "%s/%s%s", r->locks, f->path, ".metadata");
}

zt_status hub_target_path(const hub_repo *r, const hub_file *f, char *out, size_t n)
{
    if (r->local) return path_fmt(out, n, "%s/%s%s", r->storage, f->path, "");
    return path_fmt(out, n, "%s/snapshots/%s/%s", r->storage, r->commit, f->path);
}

zt_status hub_partial_path(const hub_repo *r, const hub_file *f, char *out, size_t n)
{
    if (r->local) return path_fmt(out, n, "%s/%s.%s.incomplete", r->locks, f->path, f->etag);
    return path_fmt(out, n, "%s/blobs/%s%s.incomplete", r->storage, f->etag, "");
}

zt_status hub_lock_path(const hub_repo *r, const hub_file *f, char *out, size_t n)
{
    return path_fmt(out, n, "%s/%s%s.lock", r->locks, r->local ? f->path : f->etag, "");
}

zt_status hub_output_dir(const hub_repo *r, char *out, size_t n)
{
    if (r->local) return path_fmt(out, n, "%s%s%s", r->storage, "", "");
    return path_fmt(out, n, "%s/snapshots/%s%s", r->storage, r->commit, "");
}

zt_status hub_prepare_dirs(const hub_repo *r)
{
    char p[HUB_PATH_MAX];
    zt_status st = hub_mkdir(r, r->locks);
    if (st || r->local) {
        if (!st && !(st = path_fmt(p, sizeof p, "%s/.cache/huggingface/.gitignore%s%s", r->storage, "", "")))
            st = hub_write_atomic(r, p, "*", 1, 0);
        return st;
    }
    if ((st = path_fmt(p, sizeof p, "%s/blobs%s%s", r->storage, "", "")) || (st = hub_mkdir(r, p))) return st;
    if ((st = hub_output_dir(r, p, sizeof p)) || (st = hub_mkdir(r, p))) return st;
    return ZT_OK;
}

static int regular_of_size(const char *path, long long size, struct stat *sb)
{
    return !stat(path, sb) && S_ISREG(sb->st_mode) && sb->st_size == size;
}

int hub_read_metadata(const char *path, char *commit, char *etag, double *ts)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[3][128];
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++) {
        ok = fgets(line[i], sizeof line[i], f) != NULL;
        if (ok) line[i][strcspn(line[i], "\r\n")] = 0;
    }
    fclose(f);
    if (!ok || strlen(line[0]) > 40 || strlen(line[1]) > 64) return 0;
    char *end;
    *ts = strtod(line[2], &end);
    strcpy(commit, line[0]);
    strcpy(etag, line[1]);
    return end != line[2];
}

static zt_status write_metadata(const hub_repo *r, const hub_file *f)
{
    char path[HUB_PATH_MAX], text[256];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int n = snprintf(text, sizeof text, "%s\n%s\n%lld.%06ld\n", r->commit, f->etag, (long long)now.tv_sec,
                     now.tv_nsec / 1000);
    zt_status st = metadata_path(r, f, path, sizeof path);
    return st ? st : hub_write_atomic(r, path, text, (size_t)n, 1);
}

int hub_is_present(const hub_repo *r, const hub_file *f)
{
    char path[HUB_PATH_MAX], meta[HUB_PATH_MAX], commit[64], etag[80];
    struct stat sb;
    double ts;
    if (hub_target_path(r, f, path, sizeof path) || !regular_of_size(path, f->size, &sb)) return 0;
    if (!r->local) return 1;
    if (metadata_path(r, f, meta, sizeof meta) || !hub_read_metadata(meta, commit, etag, &ts)) return 0;
    if (strcmp(etag, f->etag) || (double)sb.st_mtime - 1 > ts) return 0;
    if (strcmp(commit, r->commit) && !r->o->dry_run && write_metadata(r, f))
        zt_log_warn("%s", zt_errmsg()); /* newer commit */
    return 1;
}

/* snapshots/<commit>/<path> -> ../../blobs/<etag> (one more ../ per folder in path), replacing
 * what is there (a link of zt's or the Python client's) atomically */
static zt_status link_blob(const hub_repo *r, const hub_file *f)
{
    char target[HUB_PATH_MAX], rel[HUB_PATH_MAX];
    zt_status st = hub_target_path(r, f, target, sizeof target);
    if (st) return st;
    size_t o = 0;
    for (const char *c = f->path; *c; c++)
        if (*c == '/') o += (size_t)snprintf(rel + o, sizeof rel - o, "../");
    snprintf(rel + o, sizeof rel - o, "../../blobs/%s", f->etag);
    return hub_symlink(r, rel, target);
}

zt_status hub_place_existing(const hub_repo *r, const hub_file *f, int *placed)
{
    char blob[HUB_PATH_MAX];
    struct stat sb;
    *placed = 0;
    if (r->local || blob_path(r, f, blob, sizeof blob) || !regular_of_size(blob, f->size, &sb)) return ZT_OK;
    *placed = 1;
    return link_blob(r, f);
}

zt_status hub_link_alias(const hub_repo *r, const hub_file *f) { return link_blob(r, f); }

zt_status hub_install(const hub_repo *r, const hub_file *f)
{
    char partial[HUB_PATH_MAX], dest[HUB_PATH_MAX];
    zt_status st = hub_partial_path(r, f, partial, sizeof partial);
    if (!st) st = r->local ? hub_target_path(r, f, dest, sizeof dest) : blob_path(r, f, dest, sizeof dest);
    if (!st) st = hub_rename(r, partial, dest);
    if (st) return st;
    return r->local ? write_metadata(r, f) : link_blob(r, f);
}

zt_status hub_write_ref(const hub_repo *r)
{
    if (r->local || !strcmp(r->revision, r->commit)) return ZT_OK;
    char path[HUB_PATH_MAX];
    zt_status st = path_fmt(path, sizeof path, "%s/refs/%s%s", r->storage, r->revision, "");
    return st ? st : hub_write_atomic(r, path, r->commit, 40, 1);
}

/* "<prefix><hex etag><suffix>" with another etag than keep (NULL: any) */
static int other_etag(const char *name, const char *prefix, const char *suffix, const char *keep)
{
    size_t np = strlen(prefix), ns = strlen(suffix), n = strlen(name);
    if (n <= np + ns || strncmp(name, prefix, np) || strcmp(name + n - ns, suffix)) return 0;
    char etag[80];
    if (n - np - ns >= sizeof etag) return 0;
    snprintf(etag, sizeof etag, "%.*s", (int)(n - np - ns), name + np);
    return (hub_is_hex(etag, 40) || hub_is_hex(etag, 64)) && (!keep || strcmp(etag, keep));
}

/* name, a stale partial in the folder dirfd (dir names it in the log) */
static void discard(int dirfd, const char *dir, const char *name)
{
    if (!unlinkat(dirfd, name, 0)) zt_log_info("discarded the stale partial file '%s/%s'", dir, name);
}

/* the entries of the folder fd (which it takes over); NULL when it cannot be read */
static DIR *list_folder(int fd)
{
    DIR *d = fdopendir(fd);
    if (!d) close(fd);
    return d;
}

/* local: partials of this path for other etags (the caller holds the path's lock) */
zt_status hub_discard_stale_partials(const hub_repo *r, const hub_file *f)
{
    char partial[HUB_PATH_MAX], prefix[512];
    hub_dir dir;
    zt_status st = r->local ? hub_partial_path(r, f, partial, sizeof partial) : ZT_OK;
    if (!r->local || st || (st = hub_dir_open(r, partial, 1, &dir))) return st;
    const char *base = strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path;
    snprintf(prefix, sizeof prefix, "%s.", base);
    *strrchr(partial, '/') = 0;
    DIR *d = list_folder(dup(dir.fd));
    for (struct dirent *e; d && (e = readdir(d));)
        if (other_etag(e->d_name, prefix, ".incomplete", f->etag)) discard(dir.fd, partial, e->d_name);
    if (d) closedir(d);
    hub_dir_close(&dir);
    return ZT_OK;
}

/* cache: partial blobs whose etag no file of this revision has, unless another process holds their lock */
void hub_discard_stale_blob_partials(const hub_repo *r)
{
    char blobs[HUB_PATH_MAX];
    int fd;
    if (r->local || path_fmt(blobs, sizeof blobs, "%s/blobs%s%s", r->storage, "", "") ||
        hub_folder_open(r, blobs, 0, &fd))
        return;
    DIR *d = list_folder(fd);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!other_etag(e->d_name, "", ".incomplete", NULL)) continue;
        hub_file probe = {.path = ""};
        snprintf(probe.etag, sizeof probe.etag, "%.*s", (int)(strlen(e->d_name) - 11), e->d_name);
        int wanted = 0;
        for (int i = 0; i < r->nfiles && !wanted; i++) wanted = !strcmp(r->files[i].etag, probe.etag);
        char lock[HUB_PATH_MAX];
        int lock_fd;
        if (wanted || hub_lock_path(r, &probe, lock, sizeof lock) || hub_open(r, lock, O_RDWR | O_CREAT, &lock_fd))
            continue;
        if (!flock(lock_fd, LOCK_EX | LOCK_NB)) discard(dirfd(d), blobs, e->d_name);
        close(lock_fd);
    }
    if (d) closedir(d);
}
