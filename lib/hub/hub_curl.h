/* hub over libcurl: what hub_http_curl.c gives the listing and the transfers. Redirects are
 * followed by hand, one hop at a time, so that the token goes only to the endpoint's own
 * scheme, host and port, and the headers of the Hub's own answer (before the redirect to
 * the LFS host) can be read. */
#ifndef ZT_HUB_CURL_H
#define ZT_HUB_CURL_H

#include <curl/curl.h>

#include "hub_internal.h"

enum { HUB_MAX_HOPS = 10 };

void hub_curl_init(void);
/* A handle with zt's settings: TLS verified (unless --insecure), http(s) only, no automatic
 * redirects, timeouts from HF_HUB_*_TIMEOUT; h receives the headers. */
CURL *hub_easy_new(const hub_repo *r, hub_headers *h, long timeout_s);
/* Points e at url; *hdrs (freed and rebuilt) carries the token only when url has the endpoint's
 * origin, and "Range: bytes=<from>-" when from > 0. */
zt_status hub_easy_target(const hub_repo *r, CURL *e, const char *url, long long from, struct curl_slist **hdrs);
/* The next URL of a 3xx answer into out (n bytes); 0 when there is none. */
int hub_redirect_url(CURL *e, char *out, size_t n);
int hub_retryable(CURLcode rc, long http);
double hub_backoff_s(int attempt);
void hub_sleep(double s);
/* The error for an HTTP status that is final: 401/403/404 are ZT_EUSER and say what to do. */
zt_status hub_http_error(const hub_repo *r, long http, const hub_headers *h, const char *file);
/* {endpoint}/api/{type}s/{repo}/{what}/{escaped rev}{query} */
zt_status hub_api_url(const hub_repo *r, const char *what, const char *rev, const char *query, char *out, size_t n);
/* {endpoint}/[datasets/]{repo}/resolve/{commit}/{escaped path} */
zt_status hub_resolve_url(const hub_repo *r, const char *path, char *out, size_t n);
/* A GET with retries and redirects; *body (NUL-terminated) to free. */
zt_status hub_get(const hub_repo *r, const char *url, char **body, hub_headers *h);

#endif
