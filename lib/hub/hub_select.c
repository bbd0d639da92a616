/* hub: which files of the listing to download. Globs match like huggingface_hub's
 * allow_patterns / ignore_patterns: fnmatch where '*' also crosses '/', and a pattern ending in
 * '/' stands for everything under that folder. */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "hub_internal.h"
#include "lib/core/log.h"

static int glob_matches(const char *pattern, const char *path)
{
    char p[1100];
    size_t n = strlen(pattern);
    snprintf(p, sizeof p, "%s%s", pattern, n && pattern[n - 1] == '/' ? "*" : "");
    return fnmatch(p, path, 0) == 0;
}

static int any_matches(const char *const *patterns, int n, const char *path)
{
    for (int i = 0; i < n; i++)
        if (glob_matches(patterns[i], path)) return 1;
    return 0;
}

/* --local-dir keeps its metadata, partials and locks in .cache/huggingface/: a remote file
 * there would overwrite them (the cache keeps its own outside the snapshot: nothing to refuse). */
static zt_status refuse_metadata_names(const hub_repo *r)
{
    static const char dir[] = ".cache/huggingface";
    for (int j = 0; r->local && j < r->nfiles; j++) {
        const char *p = r->files[j].path;
        if (r->files[j].selected && !strncmp(p, dir, sizeof dir - 1) &&
            (!p[sizeof dir - 1] || p[sizeof dir - 1] == '/'))
            return zt_fail(ZT_EUSER,
                           "refusing the remote file '%.200s': it lies in '%s/', where zt keeps the "
                           "metadata of --local-dir",
                           p, dir);
    }
    return ZT_OK;
}

static zt_status mark_selected(hub_repo *r)
{
    const zt_hub_options *o = r->o;
    if (o->nfiles && (o->ninclude || o->nexclude))
        return zt_fail(ZT_EUSER, "give FILES or --include/--exclude, not both");
    int nselected = 0;
    for (int i = 0; i < o->nfiles; i++) {
        int found = 0;
        for (int j = 0; j < r->nfiles && !found; j++)
            if (!strcmp(r->files[j].path, o->files[i]))
                found = 1, nselected += !r->files[j].selected, r->files[j].selected = 1;
        if (!found)
            return zt_fail(ZT_EUSER, "file '%.200s' is not in %s '%s' at revision '%s'%s", o->files[i], r->type,
                           r->repo_id, r->revision, r->offline ? " in the cache (HF_HUB_OFFLINE is set)" : "");
    }
    if (o->nfiles) return ZT_OK;
    for (int j = 0; j < r->nfiles; j++) {
        hub_file *f = &r->files[j];
        f->selected = (!o->ninclude || any_matches(o->include, o->ninclude, f->path)) &&
                      !any_matches(o->exclude, o->nexclude, f->path);
        nselected += f->selected;
    }
    if (!nselected && r->nfiles) zt_log_warn("no file of '%s' matches --include/--exclude", r->repo_id);
    return ZT_OK;
}

zt_status hub_select(hub_repo *r)
{
    zt_status st = mark_selected(r);
    return st ? st : refuse_metadata_names(r);
}
