/* hub internals: the repository being downloaded, its files, and the functions the files of
 * lib/hub share. Network code lives in *_curl.c (hub_nocurl.c stands in without libcurl). */
#ifndef ZT_HUB_INTERNAL_H
#define ZT_HUB_INTERNAL_H

#include <stddef.h>

#include "hub.h"

enum { HUB_PATH_MAX = 4096 };

typedef struct hub_file {
    char *path;     /* in the repository, '/'-separated, checked by hub_check_remote_path */
    long long size; /* bytes */
    char etag[65];  /* sha256 of the content (LFS) or the git blob sha1: the blob's name */
    int lfs;        /* etag is a sha256 that the download is checked against */
    int selected;   /* asked for (FILES or include/exclude) */
    int fetch;      /* needs a transfer */
    int alias_of;   /* cache: index of an earlier fetched file with the same etag, else -1 */
    long long have; /* bytes of a partial file found before the transfer */
} hub_file;

typedef struct hub_repo {
    const zt_hub_options *o;
    char repo_id[128];
    const char *type; /* "model" or "dataset" */
    char revision[256];
    char endpoint[1024]; /* no trailing '/' */
    char token[1024];    /* "" when none; never printed */
    int offline;
    int retries; /* attempts after the first */
    long etag_timeout_s, download_timeout_s;
    int local;                  /* plain files into o->local_dir */
    char storage[HUB_PATH_MAX]; /* cache: <cache>/models--org--name; local: the directory */
    char locks[HUB_PATH_MAX];   /* where lock files go */
    char commit[41];
    hub_file *files;
    int nfiles;
} hub_repo;

/* hub_config.c: options and environment, checked */
zt_status hub_repo_init(hub_repo *r, const zt_hub_options *o);
void hub_repo_free(hub_repo *r);
zt_status hub_check_remote_path(const char *path);
int hub_is_hex(const char *s, size_t n);
/* etag as the Hub sends it (W/"abc") made bare (abc) into out */
void hub_normalize_etag(const char *in, char *out, size_t n);
int hub_loopback_url(const char *url);
zt_status hub_add_file(hub_repo *r, const char *path, long long size, const char *etag, int lfs);

/* hub_api.c: the Hub API's JSON and the response headers zt reads */
zt_status hub_parse_revision(hub_repo *r, const char *json);
zt_status hub_parse_tree(hub_repo *r, const char *json);
/* The headers zt reads, of the latest response only (a status line clears them). */
typedef struct hub_headers {
    char repo_commit[64];  /* X-Repo-Commit */
    char linked_etag[128]; /* X-Linked-Etag, normalised */
    char etag[128];        /* ETag, normalised */
    char error_code[64];   /* X-Error-Code: RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo */
    char error_message[256];
    char link_next[2048];  /* Link: <url>; rel="next" (tree pages) */
    long long linked_size; /* X-Linked-Size, -1 when absent */
    long long range_start; /* from Content-Range, -1 when absent */
} hub_headers;
/* One header line as libcurl hands it over (n bytes, its CRLF included, not NUL-terminated). */
void hub_parse_header(hub_headers *h, const char *line, size_t n);

/* hub_select.c: marks the files FILES / include / exclude ask for */
zt_status hub_select(hub_repo *r);

/* hub_cache.c: where things go, what is there, moving finished files into place */
zt_status hub_target_path(const hub_repo *r, const hub_file *f, char *out, size_t n); /* snapshot link or file */
zt_status hub_partial_path(const hub_repo *r, const hub_file *f, char *out, size_t n);
zt_status hub_lock_path(const hub_repo *r, const hub_file *f, char *out, size_t n);
int hub_is_present(const hub_repo *r, const hub_file *f); /* the file is in place, nothing to do */
/* A metadata file of the Python client's cache: its commit (<= 40 characters), etag (<= 64) and
 * timestamp (commit and etag need 41 and 65 bytes); 0 when it is missing or not that. */
int hub_read_metadata(const char *path, char *commit, char *etag, double *ts);
zt_status hub_place_existing(const hub_repo *r, const hub_file *f, int *placed); /* blob there: link it */
zt_status hub_install(const hub_repo *r, const hub_file *f); /* partial (complete, verified) into place */
zt_status hub_link_alias(const hub_repo *r, const hub_file *f);
zt_status hub_write_ref(const hub_repo *r);
zt_status hub_prepare_dirs(const hub_repo *r);
zt_status hub_discard_stale_partials(const hub_repo *r, const hub_file *f);
void hub_discard_stale_blob_partials(const hub_repo *r);
zt_status hub_output_dir(const hub_repo *r, char *out, size_t n);

/* hub_fs.c: every write below the download's root (the local directory, or the cache) walks
 * from a descriptor of the root, one component at a time with O_NOFOLLOW, so a symbolic link
 * planted there, even while zt runs, is refused (ZT_EUSER naming it) and never followed; links
 * above the root are the user's. Folders are made as needed (create). */
typedef struct hub_dir {
    int fd;           /* the folder that holds path's last component */
    const char *name; /* that component (points into path) */
} hub_dir;
zt_status hub_dir_open(const hub_repo *r, const char *path, int create, hub_dir *d);
void hub_dir_close(hub_dir *d);
zt_status hub_folder_open(const hub_repo *r, const char *dir, int create, int *fd); /* dir itself */
zt_status hub_mkdir(const hub_repo *r, const char *dir);
/* openat(flags | O_NOFOLLOW | O_CLOEXEC, 0644) into *fd; a link there is refused */
zt_status hub_open(const hub_repo *r, const char *path, int flags, int *fd);
/* data into path.tmp.<pid>, fsynced, renamed over path (kept when it exists and !replace) */
zt_status hub_write_atomic(const hub_repo *r, const char *path, const void *data, size_t n, int replace);
zt_status hub_rename(const hub_repo *r, const char *from, const char *to);      /* then fsyncs to's folder */
zt_status hub_symlink(const hub_repo *r, const char *target, const char *path); /* replaces path */
zt_status hub_unlink(const hub_repo *r, const char *path);

/* hub_offline.c: the revision and files from the cache alone */
zt_status hub_list_offline(hub_repo *r);

/* hub_list_curl.c / hub_fetch_curl.c (or hub_nocurl.c) */
zt_status hub_list_remote(hub_repo *r);
zt_status hub_fetch(hub_repo *r);

/* hub_progress.c: one status line on a terminal, plain lines elsewhere */
typedef struct hub_progress {
    double start, last_draw, last_line; /* seconds */
    long long total, done;              /* bytes to transfer in this run, received */
    int nfiles, files_done;
    char line[512];
} hub_progress;
typedef struct hub_progress_item {
    const char *path;
    long long done, size;
} hub_progress_item;
double hub_now(void);
void hub_format_bytes(long long bytes, char *out, size_t n);
void hub_progress_start(hub_progress *p, long long total, int nfiles);
void hub_progress_draw(hub_progress *p, const hub_progress_item *active, int n);
void hub_progress_file_done(hub_progress *p, const char *path, long long bytes, double secs);
void hub_progress_end(hub_progress *p);

#endif
