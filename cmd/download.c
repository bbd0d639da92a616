/* zt download: files of a Hugging Face Hub repository into the shared cache or a directory. */
#include <stdio.h>

#include "commands.h"
#include "lib/hub/hub.h"
#include "options.h"

int cmd_download(int argc, char **argv)
{
    const char *revision = NULL, *local_dir = NULL, *cache_dir = NULL, *repo_type = NULL, *token = NULL;
    zt_option_list include = {0}, exclude = {0};
    long workers = 8;
    int force = 0, dry_run = 0, insecure = 0;
    zt_usage u = {"zt download", "REPO_ID [FILES...] [options]",
                  "Download files of a Hugging Face Hub repository (all, the FILES named, or those --include and\n"
                  "--exclude select) into the cache huggingface_hub shares ($HF_HUB_CACHE, $HF_HOME/hub or\n"
                  "~/.cache/huggingface/hub), or as plain files into --local-dir, and print where they are.\n"
                  "Partial files resume on the next run; LFS files are checked against their sha256.\n"
                  "Environment: HF_TOKEN, HF_TOKEN_PATH, HF_ENDPOINT, HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE=1\n"
                  "(only the cache, no network), HF_HUB_DOWNLOAD_TIMEOUT, ZT_HUB_RETRIES (docs/download.md)."};
    zt_option opts[] = {
        {"revision", 'S', &revision, "R", "branch, tag or commit (default main)", 0, 0},
        {"include", 'L', &include, "GLOB", "download only files matching GLOB (may repeat)", 0, 0},
        {"exclude", 'L', &exclude, "GLOB", "skip files matching GLOB (may repeat)", 0, 0},
        {"local-dir", 'S', &local_dir, "DIR", "plain files in DIR instead of the cache", 0, 0},
        {"cache-dir", 'S', &cache_dir, "DIR", "the cache directory (default $HF_HUB_CACHE)", 0, 0},
        {"repo-type", 'S', &repo_type, "TYPE", "model (default) or dataset", 0, 0},
        {"max-workers", 'I', &workers, "N", "files downloaded in parallel (default 8)", 1, 64},
        {"force", 'F', &force, "", "download again files already there", 0, 0},
        {"dry-run", 'F', &dry_run, "", "list the files (path, size, present|download|resume) and stop", 0, 0},
        {"token", 'S', &token, "T", "access token (default $HF_TOKEN, then the file $HF_TOKEN_PATH)", 0, 0},
        {"insecure", 'F', &insecure, "", "no TLS verification; only for a loopback HF_ENDPOINT (tests)", 0, 0},
        {0},
    };
    if ((argc = zt_options_parse(argc, argv, opts, &u)) < 0) return argc == -2 ? 0 : 2;
    if (argc < 2) {
        fprintf(stderr, "zt: error: zt download: missing REPO_ID (see 'zt download --help')\n");
        return 2;
    }
    zt_hub_options o = {
        .repo_id = argv[1],
        .repo_type = repo_type,
        .revision = revision,
        .files = (const char *const *)argv + 2,
        .nfiles = argc - 2,
        .include = include.items,
        .ninclude = include.n,
        .exclude = exclude.items,
        .nexclude = exclude.n,
        .local_dir = local_dir,
        .cache_dir = cache_dir,
        .token = token,
        .max_workers = (int)workers,
        .force = force,
        .dry_run = dry_run,
        .insecure = insecure,
        .plan_out = stdout,
    };
    char dir[4096];
    zt_status st = zt_hub_download(&o, dir, sizeof dir);
    if (st) return cmd_fail(st);
    if (!dry_run) printf("%s\n", dir);
    return 0;
}
