/* hub: HF_HUB_OFFLINE. The commit comes from refs/<revision> (or is the revision itself) and the
 * files are what its snapshot (or the local directory) holds; nothing touches the network. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub_internal.h"
#include "lib/core/fileio.h"

/* Adds every file under root/rel (symlinks followed) to the listing; skips a local dir's .cache. */
static zt_status walk(hub_repo *r, const char *root, const char *rel, int depth)
{
    char dir[HUB_PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s%s%s", root, rel[0] ? "/" : "", rel) >= (int)sizeof dir || depth > 32)
        return zt_fail(ZT_EUSER, "'%s': path too long or too deep", root);
    DIR *d = opendir(dir);
    if (!d) return ZT_OK;
    zt_status st = ZT_OK;
    for (struct dirent *e; !st && (e = readdir(d));) {
        char sub[HUB_PATH_MAX], full[HUB_PATH_MAX * 2], target[HUB_PATH_MAX];
        if (e->d_name[0] == '.' &&
            (!e->d_name[1] || !strcmp(e->d_name, "..") || (!rel[0] && !strcmp(e->d_name, ".cache"))))
            continue;
        if (snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name) >= (int)sizeof sub) continue;
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(full, &sb)) continue; /* a dangling link: the blob is gone */
        if (S_ISDIR(sb.st_mode)) {
            st = walk(r, root, sub, depth + 1);
            continue;
        }
        if (!S_ISREG(sb.st_mode) || hub_check_remote_path(sub)) continue;
        ssize_t n = readlink(full, target, sizeof target - 1);
        target[n > 0 ? n : 0] = 0;
        const char *etag = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
        int lfs = hub_is_hex(etag, 64);
        st = hub_add_file(r, sub, (long long)sb.st_size,
                          lfs || hub_is_hex(etag, 40) ? etag : "0000000000000000000000000000000000000000", lfs);
    }
    closedir(d);
    return st;
}

static zt_status offline_commit(hub_repo *r)
{
    char path[HUB_PATH_MAX], *text = NULL;
    size_t len;
    if (hub_is_hex(r->revision, 40)) {
        strcpy(r->commit, r->revision);
        if (!hub_output_dir(r, path, sizeof path) && zt_path_exists(path)) return ZT_OK;
    }
    if (snprintf(path, sizeof path, "%s/refs/%s", r->storage, r->revision) < (int)sizeof path && zt_path_exists(path) &&
        !zt_read_file(path, &text, &len)) {
        text[strcspn(text, " \r\n")] = 0;
        int ok = hub_is_hex(text, 40);
        if (ok) strcpy(r->commit, text);
        free(text);
        if (ok && !hub_output_dir(r, path, sizeof path) && zt_path_exists(path)) return ZT_OK;
    }
    return zt_fail(
        ZT_EUSER,
        "%s '%s' at revision '%s' is not in the cache ('%s') and HF_HUB_OFFLINE is set: download it once without",
        r->type, r->repo_id, r->revision, r->storage);
}

zt_status hub_list_offline(hub_repo *r)
{
    if (r->local) {
        struct stat sb;
        if (stat(r->storage, &sb) || !S_ISDIR(sb.st_mode))
            return zt_fail(ZT_EUSER, "--local-dir '%s' does not exist and HF_HUB_OFFLINE is set", r->storage);
        return walk(r, r->storage, "", 0);
    }
    char snap[HUB_PATH_MAX];
    zt_status st = offline_commit(r);
    if (!st) st = hub_output_dir(r, snap, sizeof snap);
    return st ? st : walk(r, snap, "", 0);
}
