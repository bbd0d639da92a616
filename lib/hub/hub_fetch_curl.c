/* hub: the transfers, in parallel on one curl multi handle. Each file is written to its partial
 * file (named after its etag, so a partial is only ever continued by the same content) under a
 * lock the Python client also honours; a partial found on disk is continued with a Range
 * request, and a retry after a timeout, reset or 5xx continues from where the last attempt
 * stopped. LFS files are hashed as they arrive (the partial's bytes first) and must match their
 * sha256 before they are moved into place; a mismatch deletes the partial. */
#define _GNU_SOURCE /* sync_file_range */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub_curl.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"

enum { WRITEBACK_CHUNK = 32 << 20 }; /* bytes between starts of writeback */

typedef enum { T_QUEUED, T_LOCKWAIT, T_ACTIVE, T_RETRY, T_DONE, T_FAILED } transfer_state;

typedef struct transfer {
    hub_repo *r;
    hub_file *f;
    transfer_state state;
    CURL *easy;
    struct curl_slist *hdrs;
    hub_headers h;  /* of the latest response */
    char url[8192]; /* of the current hop */
    int hop, attempt, told_waiting;
    double not_before; /* T_RETRY: when to try again */
    double started;
    int fd, lock_fd;
    long long have;     /* bytes in the partial file */
    long long received; /* bytes received in this run */
    long long flushed;  /* bytes handed to writeback (so the final fsync has little left to do) */
    EVP_MD_CTX *sha;    /* LFS: the sha256 of the partial's bytes so far */
    int body;           /* this response's body: 0 undecided, 1 to the file, 2 discarded */
    int write_errno, overflow, bad_range;
    zt_status st;
    char err[1024];
} transfer;

static void release(transfer *t)
{
    if (t->fd >= 0) close(t->fd);
    if (t->lock_fd >= 0) close(t->lock_fd); /* drops the flock */
    t->fd = t->lock_fd = -1;
    if (t->easy) curl_easy_cleanup(t->easy);
    curl_slist_free_all(t->hdrs);
    EVP_MD_CTX_free(t->sha);
    t->easy = NULL, t->hdrs = NULL, t->sha = NULL;
}

static void fail(transfer *t, zt_status st)
{
    t->st = st;
    snprintf(t->err, sizeof t->err, "%s", zt_errmsg());
    t->state = T_FAILED;
    release(t);
}

static zt_status restart_partial(transfer *t)
{
    t->have = t->flushed = 0;
    if (ftruncate(t->fd, 0) || lseek(t->fd, 0, SEEK_SET))
        return zt_fail(ZT_EIO, "cannot truncate the partial file of '%s': %s", t->f->path, strerror(errno));
    if (t->sha && !EVP_DigestInit_ex(t->sha, EVP_sha256(), NULL)) return zt_fail(ZT_ERUNTIME, "sha256 init failed");
    return ZT_OK;
}

/* the sha256 of the bytes a partial file already holds */
static zt_status hash_partial(transfer *t)
{
    enum { CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    if (!buf) return zt_fail(ZT_ENOMEM, "out of memory");
    zt_status st = ZT_OK;
    for (long long off = 0; off < t->have && !st;) {
        ssize_t n = pread(t->fd, buf, (size_t)(t->have - off < CHUNK ? t->have - off : CHUNK), (off_t)off);
        if (n <= 0)
            st = zt_fail(ZT_EIO, "cannot read the partial file of '%s': %s", t->f->path, n ? strerror(errno) : "short");
        else if (!EVP_DigestUpdate(t->sha, buf, (size_t)n)) st = zt_fail(ZT_ERUNTIME, "sha256 failed");
        off += n > 0 ? n : 0;
    }
    free(buf);
    if (!st && lseek(t->fd, (off_t)t->have, SEEK_SET) < 0)
        st = zt_fail(ZT_EIO, "seek in the partial of '%s' failed", t->f->path);
    return st;
}

static size_t on_write(char *p, size_t size, size_t count, void *data)
{
    transfer *t = data;
    size_t n = size * count;
    if (!t->body) {
        long code = 0;
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
        t->body = code == 200 || code == 206 ? 1 : 2;
        if (code == 206 && t->h.range_start != t->have) return t->bad_range = 1, 0;
        if (code == 200 && t->have > 0 && restart_partial(t)) return t->write_errno = errno ? errno : EIO, 0;
    }
    if (t->body == 2) return n;
    if (t->have + (long long)n > t->f->size) return t->overflow = 1, 0;
    for (size_t done = 0; done < n;) {
        ssize_t w = write(t->fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return t->write_errno = w < 0 ? errno : EIO, 0;
        done += (size_t)w;
    }
    if (t->sha && !EVP_DigestUpdate(t->sha, p, n)) return t->write_errno = EIO, 0;
    t->have += (long long)n;
    t->received += (long long)n;
    if (t->have - t->flushed >= WRITEBACK_CHUNK) {
        sync_file_range(t->fd, t->flushed, t->have - t->flushed, SYNC_FILE_RANGE_WRITE);
        t->flushed = t->have;
    }
    return n;
}

/* a new attempt (or the next hop of one) from the current partial size */
static void start(transfer *t, CURLM *m, const char *url)
{
    zt_status st;
    if (url != t->url) snprintf(t->url, sizeof t->url, "%s", url);
    if (!t->easy) {
        if (!(t->easy = hub_easy_new(t->r, &t->h, t->r->download_timeout_s)))
            return fail(t, zt_fail(ZT_ENOMEM, "out of memory"));
        curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
        curl_easy_setopt(t->easy, CURLOPT_PRIVATE, (char *)t);
    }
    t->body = t->write_errno = t->overflow = t->bad_range = 0;
    if ((st = hub_easy_target(t->r, t->easy, t->url, t->have, &t->hdrs))) return fail(t, st);
    if (curl_multi_add_handle(m, t->easy)) return fail(t, zt_fail(ZT_ERUNTIME, "curl_multi_add_handle failed"));
    t->state = T_ACTIVE;
}

static void finish(transfer *t, hub_progress *p)
{
    hub_file *f = t->f;
    if (t->sha) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        char hex[2 * EVP_MAX_MD_SIZE + 1] = "";
        EVP_DigestFinal_ex(t->sha, md, &len);
        for (unsigned i = 0; i < len; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
        if (strcmp(hex, f->etag)) {
            char partial[HUB_PATH_MAX];
            if (!hub_partial_path(t->r, f, partial, sizeof partial)) hub_unlink(t->r, partial);
            return fail(t, zt_fail(ZT_ERUNTIME,
                                   "'%s' is corrupted: its sha256 is %s, the Hub lists %s; the download was deleted",
                                   f->path, hex, f->etag));
        }
    }
    if (fsync(t->fd))
        return fail(t, zt_fail(ZT_EIO, "fsync of the download of '%s' failed: %s", f->path, strerror(errno)));
    close(t->fd);
    t->fd = -1;
    zt_status st = hub_install(t->r, f);
    if (st) return fail(t, st);
    release(t);
    t->state = T_DONE;
    hub_progress_file_done(p, f->path, t->received, hub_now() - t->started);
}

/* lock, look again (another process may have finished it), open the partial, then start */
static void begin(transfer *t, CURLM *m, hub_progress *p)
{
    hub_repo *r = t->r;
    hub_file *f = t->f;
    char path[HUB_PATH_MAX];
    zt_status st = ZT_OK;
    if (t->lock_fd < 0 &&
        ((st = hub_lock_path(r, f, path, sizeof path)) || (st = hub_open(r, path, O_RDWR | O_CREAT, &t->lock_fd))))
        return fail(t, st);
    if (flock(t->lock_fd, LOCK_EX | LOCK_NB)) {
        if (errno != EWOULDBLOCK) return fail(t, zt_fail(ZT_EIO, "cannot lock for '%s': %s", f->path, strerror(errno)));
        if (!t->told_waiting++) zt_log_info("waiting for another process that downloads '%s'", f->path);
        t->state = T_LOCKWAIT;
        return;
    }
    int placed = 0;
    if (!r->o->force && (hub_is_present(r, f) || (!(st = hub_place_existing(r, f, &placed)) && placed))) {
        release(t);
        t->state = T_DONE;
        return;
    }
    if (st || (st = hub_discard_stale_partials(r, f)) || (st = hub_partial_path(r, f, path, sizeof path)) ||
        (st = hub_open(r, path, O_RDWR | O_CREAT, &t->fd)))
        return fail(t, st);
    struct stat sb;
    if (fstat(t->fd, &sb)) return fail(t, zt_fail(ZT_EIO, "cannot stat '%s': %s", path, strerror(errno)));
    t->have = t->flushed = sb.st_size;
    if (f->lfs && (!(t->sha = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(t->sha, EVP_sha256(), NULL)))
        return fail(t, zt_fail(ZT_ERUNTIME, "sha256 init failed"));
    if (r->o->force || t->have > f->size) st = restart_partial(t);
    else if (t->have > 0) {
        zt_log_info("resuming '%s' from byte %lld", f->path, t->have);
        if (t->sha) st = hash_partial(t);
        else if (lseek(t->fd, 0, SEEK_END) < 0) st = zt_fail(ZT_EIO, "seek in '%s' failed", path);
    }
    if (st) return fail(t, st);
    t->started = hub_now();
    if (t->have == f->size) return finish(t, p);
    char url[8192];
    if ((st = hub_resolve_url(r, f->path, url, sizeof url))) return fail(t, st);
    start(t, m, url);
}

/* The Hub's own answer (the first hop) must describe what its listing said. */
static zt_status check_resolve_headers(const transfer *t)
{
    const hub_headers *h = &t->h;
    const hub_file *f = t->f;
    const char *etag = h->linked_etag[0] ? h->linked_etag : h->etag;
    if (etag[0] && strcmp(etag, f->etag))
        return zt_fail(ZT_ERUNTIME, "'%s': the Hub's etag %.80s differs from its listing (%s)", f->path, etag, f->etag);
    if (h->linked_size >= 0 && h->linked_size != f->size)
        return zt_fail(ZT_ERUNTIME, "'%s': the Hub's size %lld differs from its listing (%lld)", f->path,
                       h->linked_size, f->size);
    if (h->repo_commit[0] && strcmp(h->repo_commit, t->r->commit))
        return zt_fail(ZT_ERUNTIME, "'%s': the Hub answered for commit %.64s, not %s", f->path, h->repo_commit,
                       t->r->commit);
    return ZT_OK;
}

static void retry_or_fail(transfer *t, const char *why)
{
    if (t->attempt++ >= t->r->retries) {
        return fail(t, zt_fail(ZT_ERUNTIME,
                               "downloading '%s' failed after %d attempt%s: %s; the partial file is kept, run again "
                               "to resume",
                               t->f->path, t->attempt, t->attempt > 1 ? "s" : "", why));
    }
    double wait = hub_backoff_s(t->attempt - 1);
    zt_log_warn("'%s': %s; retrying in %.1fs from byte %lld", t->f->path, why, wait, t->have);
    t->not_before = hub_now() + wait;
    t->state = T_RETRY;
}

static void done(transfer *t, CURLM *m, CURLcode rc, hub_progress *p)
{
    long http = 0;
    char why[300], next[8192];
    zt_status st;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &http);
    curl_multi_remove_handle(m, t->easy);
    if (t->hop == 0 && http >= 200 && http < 400 && (st = check_resolve_headers(t))) return fail(t, st);
    if (t->write_errno)
        return fail(t, zt_fail(ZT_EIO, "writing '%s' failed: %s", t->f->path,
                               t->write_errno == ENOSPC ? "the disk is full" : strerror(t->write_errno)));
    if (t->overflow)
        return fail(t, zt_fail(ZT_ERUNTIME, "'%s': the server sent more than its %lld bytes", t->f->path, t->f->size));
    if (rc == CURLE_OK && hub_redirect_url(t->easy, next, sizeof next)) {
        if (++t->hop > HUB_MAX_HOPS) return fail(t, zt_fail(ZT_ERUNTIME, "'%s': too many redirects", t->f->path));
        return start(t, m, next);
    }
    t->hop = 0;
    if (rc == CURLE_OK && (http == 200 || http == 206) && t->have == t->f->size) return finish(t, p);
    if (t->bad_range || (rc == CURLE_OK && http == 416)) {
        if ((st = restart_partial(t))) return fail(t, st);
        return retry_or_fail(t, "the server refused to continue the partial file; starting over");
    }
    if (rc == CURLE_OK && (http == 200 || http == 206)) snprintf(why, sizeof why, "the connection ended early");
    else if (rc != CURLE_OK) snprintf(why, sizeof why, "%s", curl_easy_strerror(rc));
    else snprintf(why, sizeof why, "HTTP %ld", http);
    if ((rc == CURLE_OK && (http == 200 || http == 206)) || hub_retryable(rc, http)) return retry_or_fail(t, why);
    if (rc != CURLE_OK) return fail(t, zt_fail(ZT_ERUNTIME, "downloading '%s': %s", t->f->path, why));
    fail(t, hub_http_error(t->r, http, &t->h, t->f->path));
}

static void draw(hub_progress *p, transfer *ts, int n)
{
    hub_progress_item items[64];
    int k = 0;
    p->done = 0;
    for (int i = 0; i < n; i++) {
        p->done += ts[i].received;
        if (ts[i].state == T_ACTIVE && k < 64)
            items[k++] = (hub_progress_item){ts[i].f->path, ts[i].have, ts[i].f->size};
    }
    hub_progress_draw(p, items, k);
}

zt_status hub_fetch(hub_repo *r)
{
    int n = 0, workers = r->o->max_workers > 0 ? r->o->max_workers : 8;
    long long total = 0;
    for (int i = 0; i < r->nfiles; i++) n += r->files[i].fetch && r->files[i].alias_of < 0;
    if (!n) return ZT_OK;
    hub_curl_init();
    transfer *ts = calloc((size_t)n, sizeof *ts);
    CURLM *m = curl_multi_init();
    if (!ts || !m) {
        free(ts);
        if (m) curl_multi_cleanup(m);
        return zt_fail(ZT_ENOMEM, "out of memory");
    }
    for (int i = 0, k = 0; i < r->nfiles; i++)
        if (r->files[i].fetch && r->files[i].alias_of < 0) {
            ts[k++] = (transfer){.r = r, .f = &r->files[i], .fd = -1, .lock_fd = -1};
            total += r->files[i].size - r->files[i].have;
        }
    hub_progress p;
    hub_progress_start(&p, total, n);
    for (;;) {
        int active = 0, open = 0, running;
        double now = hub_now();
        for (int i = 0; i < n; i++) active += ts[i].state == T_ACTIVE;
        for (int i = 0; i < n && active < workers; i++) {
            transfer *t = &ts[i];
            if (t->state == T_QUEUED || t->state == T_LOCKWAIT) begin(t, m, &p);
            else if (t->state == T_RETRY && now >= t->not_before) {
                char url[8192];
                zt_status st = hub_resolve_url(r, t->f->path, url, sizeof url);
                if (st) fail(t, st);
                else start(t, m, url);
            }
            active += t->state == T_ACTIVE;
        }
        for (int i = 0; i < n; i++) open += ts[i].state != T_DONE && ts[i].state != T_FAILED;
        if (!open) break;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)))
            if (msg->msg == CURLMSG_DONE) {
                char *t = NULL;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
                done((transfer *)t, m, msg->data.result, &p);
            }
        draw(&p, ts, n);
        curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    hub_progress_end(&p);
    int first = -1, nfailed = 0;
    for (int i = 0; i < n; i++)
        if (ts[i].state == T_FAILED) {
            if (first >= 0) zt_log_error("%s", ts[i].err);
            else first = i;
            nfailed++;
        }
    zt_status st = ZT_OK;
    if (first >= 0)
        st = zt_fail(ts[first].st, "%s%s", ts[first].err, nfailed > 1 ? " (and more files failed: see above)" : "");
    for (int i = 0; i < n; i++) release(&ts[i]);
    curl_multi_cleanup(m);
    free(ts);
    return st;
}
