/* hub: libcurl handles, URLs, redirects by hand, retries and the Hub's HTTP errors. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hub_curl.h"
#include "lib/core/log.h"
#include "lib/core/version.h"

void hub_curl_init(void)
{
    static int done;
    if (!done) curl_global_init(CURL_GLOBAL_DEFAULT), done = 1;
}

static size_t on_header(char *line, size_t size, size_t count, void *data)
{
    hub_parse_header(data, line, size * count);
    return size * count;
}

CURL *hub_easy_new(const hub_repo *r, hub_headers *h, long timeout_s)
{
    CURL *e = curl_easy_init();
    if (!e) return NULL;
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "zt/" ZT_VERSION);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, r->o->insecure ? 0L : 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, r->o->insecure ? 0L : 2L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, timeout_s);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stalled transfer times out */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, timeout_s);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                     (long)CURL_HTTP_VERSION_1_1); /* a connection per file, not one multiplexed */
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L * 1024);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, h);
    return e;
}

/* scheme, host and port of both URLs are the same */
static int same_origin(const char *a, const char *b)
{
    static const CURLUPart parts[] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT};
    CURLU *ua = curl_url(), *ub = curl_url();
    int same = ua && ub && !curl_url_set(ua, CURLUPART_URL, a, 0) && !curl_url_set(ub, CURLUPART_URL, b, 0);
    for (int i = 0; i < 3 && same; i++) {
        char *pa = NULL, *pb = NULL;
        same = !curl_url_get(ua, parts[i], &pa, CURLU_DEFAULT_PORT) &&
               !curl_url_get(ub, parts[i], &pb, CURLU_DEFAULT_PORT) && !strcasecmp(pa, pb);
        curl_free(pa);
        curl_free(pb);
    }
    curl_url_cleanup(ua);
    curl_url_cleanup(ub);
    return same;
}

zt_status hub_easy_target(const hub_repo *r, CURL *e, const char *url, long long from, struct curl_slist **hdrs)
{
    char line[1100];
    curl_slist_free_all(*hdrs);
    *hdrs = NULL;
    struct curl_slist *l = curl_slist_append(NULL, "Accept-Encoding: identity");
    if (l && r->token[0] && same_origin(url, r->endpoint)) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", r->token);
        struct curl_slist *m = curl_slist_append(l, line);
        memset(line, 0, sizeof line);
        l = m ? m : (curl_slist_free_all(l), NULL);
    }
    if (l && from > 0) {
        snprintf(line, sizeof line, "Range: bytes=%lld-", from);
        struct curl_slist *m = curl_slist_append(l, line);
        l = m ? m : (curl_slist_free_all(l), NULL);
    }
    if (!l) return zt_fail(ZT_ENOMEM, "out of memory");
    *hdrs = l;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, l);
    curl_easy_setopt(e, CURLOPT_URL, url);
    return ZT_OK;
}

int hub_redirect_url(CURL *e, char *out, size_t n)
{
    char *next = NULL;
    long code = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    if (code < 300 || code > 399 || curl_easy_getinfo(e, CURLINFO_REDIRECT_URL, &next) || !next) return 0;
    return snprintf(out, n, "%s", next) < (int)n;
}

int hub_retryable(CURLcode rc, long http)
{
    switch (rc) {
    case CURLE_OK: return http >= 500 || http == 429 || http == 408;
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return 1;
    default: return 0;
    }
}

double hub_backoff_s(int attempt)
{
    double s = 0.5;
    for (int i = 0; i < attempt && s < 8; i++) s *= 2;
    return s;
}

void hub_sleep(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

zt_status hub_http_error(const hub_repo *r, long http, const hub_headers *h, const char *file)
{
    char what[800], detail[300] = "";
    if (file) snprintf(what, sizeof what, "'%.200s' in %s '%s' at '%s'", file, r->type, r->repo_id, r->revision);
    else snprintf(what, sizeof what, "%s '%s' at revision '%s'", r->type, r->repo_id, r->revision);
    if (h->error_message[0]) snprintf(detail, sizeof detail, " (the Hub says: %s)", h->error_message);
    const char *how = r->token[0] ? "the token was refused: check that it is valid and has access to it"
                                  : "pass a token with --token, HF_TOKEN or a file named by HF_TOKEN_PATH";
    if (http == 401)
        return zt_fail(
            ZT_EUSER,
            "%s: authentication needed (HTTP 401): the repository is private or gated, or does not exist; %s%s", what,
            how, detail);
    if (http == 403)
        return zt_fail(ZT_EUSER,
                       "%s: access denied (HTTP 403): the repository is gated (accept its conditions on the Hub) or "
                       "private; %s%s",
                       what, how, detail);
    if (http == 404) {
        const char *c = h->error_code;
        if (!strcmp(c, "RevisionNotFound"))
            return zt_fail(ZT_EUSER, "revision '%s' not found in %s '%s' (HTTP 404)%s", r->revision, r->type,
                           r->repo_id, detail);
        if (!strcmp(c, "RepoNotFound") || !file)
            return zt_fail(ZT_EUSER, "%s '%s' or its revision '%s' not found (HTTP 404)%s", r->type, r->repo_id,
                           r->revision, detail);
        return zt_fail(ZT_EUSER, "file %s not found (HTTP 404)%s", what, detail);
    }
    return zt_fail(ZT_ERUNTIME, "%s: the Hub answered HTTP %ld%s", what, http, detail);
}

/* percent-encodes all but unreserved characters (and '/' when keep_slash) */
static int escape(char *out, size_t n, const char *s, int keep_slash)
{
    size_t o = 0;
    for (; *s && o + 4 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || strchr("-._~", c) || (keep_slash && c == '/')) out[o++] = (char)c;
        else o += (size_t)snprintf(out + o, n - o, "%%%02X", c);
    }
    out[o] = 0;
    return !*s;
}

zt_status hub_api_url(const hub_repo *r, const char *what, const char *rev, const char *query, char *out, size_t n)
{
    char erev[800];
    if (!escape(erev, sizeof erev, rev, 0) ||
        snprintf(out, n, "%s/api/%ss/%s/%s/%s%s", r->endpoint, r->type, r->repo_id, what, erev, query) >= (int)n)
        return zt_fail(ZT_EUSER, "URL too long for '%s'", r->repo_id);
    return ZT_OK;
}

zt_status hub_resolve_url(const hub_repo *r, const char *path, char *out, size_t n)
{
    char epath[3200];
    if (!escape(epath, sizeof epath, path, 1) ||
        snprintf(out, n, "%s/%s%s/resolve/%s/%s", r->endpoint, strcmp(r->type, "dataset") ? "" : "datasets/",
                 r->repo_id, r->commit, epath) >= (int)n)
        return zt_fail(ZT_EUSER, "URL too long for '%.200s'", path);
    return ZT_OK;
}

typedef struct buffer {
    char *data;
    size_t len, cap;
} buffer;

static size_t on_body(char *p, size_t size, size_t count, void *data)
{
    buffer *b = data;
    size_t n = size * count;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = cap <= ((size_t)1 << 30) ? realloc(b->data, cap) : NULL;
        if (!grown) return 0;
        b->data = grown, b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return n;
}

zt_status hub_get(const hub_repo *r, const char *start, char **body, hub_headers *h)
{
    char url[8192];
    buffer b = {0};
    struct curl_slist *hdrs = NULL;
    *h = (hub_headers){.linked_size = -1, .range_start = -1};
    CURL *e = hub_easy_new(r, h, r->etag_timeout_s);
    if (!e) return zt_fail(ZT_ENOMEM, "out of memory");
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 10 * r->etag_timeout_s);
    snprintf(url, sizeof url, "%s", start);
    zt_status st = ZT_OK;
    for (int attempt = 0, hops = 0;;) {
        b.len = 0;
        if ((st = hub_easy_target(r, e, url, 0, &hdrs))) break;
        CURLcode rc = curl_easy_perform(e);
        long http = 0;
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &http);
        if (rc == CURLE_OK && http >= 200 && http < 300) break;
        if (rc == CURLE_OK && hub_redirect_url(e, url, sizeof url)) {
            if (++hops <= HUB_MAX_HOPS) continue;
            st = zt_fail(ZT_ERUNTIME, "too many redirects from '%s'", start);
            break;
        }
        if (hub_retryable(rc, http) && attempt < r->retries) {
            double wait = hub_backoff_s(attempt++);
            zt_log_warn("%s: %s; retrying in %.1fs", start, rc ? curl_easy_strerror(rc) : "server error", wait);
            hub_sleep(wait);
            continue;
        }
        int offline = rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT;
        st = rc ? zt_fail(ZT_ERUNTIME, "%s: %s%s", start, curl_easy_strerror(rc),
                          offline ? " (no network? HF_HUB_OFFLINE=1 uses what the cache has)" : "")
                : hub_http_error(r, http, h, NULL);
        break;
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(e);
    if (st) free(b.data);
    else *body = b.data ? b.data : strdup("");
    return st || *body ? st : zt_fail(ZT_ENOMEM, "out of memory");
}
