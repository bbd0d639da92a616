/* hub: a Hugging Face Hub client (zt download). It lists a repository through the Hub API,
 * downloads the files in parallel over libcurl (resuming partial files across runs, retrying
 * timeouts, resets and 5xx, checking the sha256 of every LFS file) and writes them into the
 * standard cache that huggingface_hub reads ($HF_HUB_CACHE, models--org--name/{blobs,
 * snapshots,refs}), or as plain files into a local directory with the Python client's
 * metadata (.cache/huggingface/download/). docs/download.md has the details.
 *
 *     zt_hub_options o = {.repo_id = "org/name", .revision = "main"};
 *     char dir[4096];
 *     if ((st = zt_hub_download(&o, dir, sizeof dir))) return st;  // dir: the snapshot
 *
 * Environment: HF_ENDPOINT, HF_TOKEN, HF_TOKEN_PATH, HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE,
 * HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT, ZT_HUB_RETRIES. Built without libcurl, only
 * offline mode works; anything that needs the network fails with ZT_EUSER saying so.
 */
#ifndef ZT_HUB_HUB_H
#define ZT_HUB_HUB_H

#include <stddef.h>
#include <stdio.h>

#include "lib/core/status.h"

typedef struct zt_hub_options {
    const char *repo_id;      /* "org/name" or "name" */
    const char *repo_type;    /* "model" (NULL) or "dataset" */
    const char *revision;     /* branch, tag or commit; NULL: "main" */
    const char *const *files; /* exactly these files (none: every file that include/exclude keep) */
    int nfiles;
    const char *const *include; /* fnmatch globs; a file is kept when it matches one (or none given) */
    int ninclude;
    const char *const *exclude; /* ...and matches none of these */
    int nexclude;
    const char *local_dir; /* plain files here instead of the cache */
    const char *cache_dir; /* NULL: $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub */
    const char *token;     /* NULL: $HF_TOKEN, the file $HF_TOKEN_PATH, $HF_HOME/token */
    int max_workers;       /* parallel transfers; 0: 8 */
    int force;             /* download again what is already there */
    int dry_run;           /* list what would be downloaded on plan_out; write nothing */
    int insecure;          /* no TLS verification: only for a loopback endpoint (tests) */
    FILE *plan_out;        /* where dry_run lists the files (stdout when NULL) */
} zt_hub_options;

/* Downloads (or, offline, finds) the selected files; out_dir receives the snapshot directory
 * (cache) or the local directory. ZT_EUSER for what the user can fix (bad names, 401/403/404,
 * missing offline), ZT_EIO / ZT_ERUNTIME for the disk and the network. */
zt_status zt_hub_download(const zt_hub_options *o, char *out_dir, size_t n);

/* A model path "hf://org/name[@revision]" is downloaded (or found in the cache) and replaced by
 * its snapshot directory; any other path is copied as it is. */
zt_status zt_hub_resolve_model_path(const char *path, char *out, size_t n);

#endif
