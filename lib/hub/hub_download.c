/* hub: zt_hub_download, start to end: options, listing (or the cache, offline), selection, the
 * plan (what is there already, what resumes, is there room), the transfers, the summary. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "hub_internal.h"
#include "lib/core/log.h"

static long long partial_size(const hub_repo *r, const hub_file *f)
{
    char path[HUB_PATH_MAX];
    struct stat sb;
    if (hub_partial_path(r, f, path, sizeof path) || stat(path, &sb) || sb.st_size >= f->size) return 0;
    return (long long)sb.st_size;
}

/* free bytes where path (or its nearest existing parent) lives; -1 when unknown */
static long long free_bytes(const char *path)
{
    char p[HUB_PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    struct statvfs sv;
    while (statvfs(p, &sv)) {
        char *slash = strrchr(p, '/');
        if (errno != ENOENT || !slash) return -1;
        if (slash == p) slash[1] = 0;
        else *slash = 0;
    }
    return (long long)sv.f_bavail * (long long)sv.f_frsize;
}

static zt_status plan(hub_repo *r, long long *need)
{
    *need = 0;
    for (int i = 0; i < r->nfiles; i++) {
        hub_file *f = &r->files[i];
        if (!f->selected || (!r->o->force && hub_is_present(r, f))) continue;
        f->fetch = 1;
        for (int j = 0; j < i && !r->local && f->alias_of < 0; j++)
            if (r->files[j].fetch && r->files[j].alias_of < 0 && !strcmp(r->files[j].etag, f->etag)) f->alias_of = j;
        if (f->alias_of >= 0) continue;
        f->have = r->o->force ? 0 : partial_size(r, f);
        *need += f->size - f->have;
    }
    long long avail = free_bytes(r->storage);
    if (!r->o->dry_run && avail >= 0 && *need > avail) {
        char a[32], b[32];
        hub_format_bytes(*need, a, sizeof a);
        hub_format_bytes(avail, b, sizeof b);
        return zt_fail(ZT_EIO, "not enough disk space for '%s': %s to download, %s free in '%s'", r->repo_id, a, b,
                       r->storage);
    }
    return ZT_OK;
}

static void print_plan(const hub_repo *r, FILE *out)
{
    for (int i = 0; i < r->nfiles; i++) {
        const hub_file *f = &r->files[i];
        if (!f->selected) continue;
        if (!f->fetch) fprintf(out, "%s\t%lld\tpresent\n", f->path, f->size);
        else if (f->have) fprintf(out, "%s\t%lld\tresume from %lld\n", f->path, f->size, f->have);
        else fprintf(out, "%s\t%lld\tdownload\n", f->path, f->size);
    }
}

static zt_status fetch_all(hub_repo *r)
{
    zt_status st = hub_prepare_dirs(r);
    if (!st) st = hub_write_ref(r);
    if (st) return st;
    hub_discard_stale_blob_partials(r);
    if ((st = hub_fetch(r))) return st;
    for (int i = 0; i < r->nfiles && !st; i++)
        if (r->files[i].fetch && r->files[i].alias_of >= 0) st = hub_link_alias(r, &r->files[i]);
    return st;
}

zt_status zt_hub_download(const zt_hub_options *o, char *out_dir, size_t n)
{
    hub_repo r;
    long long need = 0;
    double start = hub_now();
    zt_status st = hub_repo_init(&r, o);
    if (!st) st = r.offline ? hub_list_offline(&r) : hub_list_remote(&r);
    if (!st) st = hub_select(&r);
    if (!st && !r.offline) st = plan(&r, &need);
    int nsel = 0, nfetch = 0;
    for (int i = 0; i < r.nfiles; i++) nsel += r.files[i].selected, nfetch += r.files[i].fetch;
    if (!st && o->dry_run) print_plan(&r, o->plan_out ? o->plan_out : stdout);
    else if (!st && !r.offline) st = fetch_all(&r);
    if (!st) st = hub_output_dir(&r, out_dir, n);
    if (!st && !o->dry_run) {
        char bytes[32];
        hub_format_bytes(need, bytes, sizeof bytes);
        if (r.offline) zt_log_info("%s: %d files in the cache (HF_HUB_OFFLINE)", r.repo_id, nsel);
        else
            zt_log_info("%s@%.12s: %d file%s downloaded (%s) in %.1fs, %d already there", r.repo_id, r.commit, nfetch,
                        nfetch == 1 ? "" : "s", bytes, hub_now() - start, nsel - nfetch);
    }
    hub_repo_free(&r);
    return st;
}
