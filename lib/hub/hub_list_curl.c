/* hub: the listing over HTTP: the revision's commit, then the file tree at that commit, page
 * after page (the Hub paginates large trees with a Link: rel="next" header). */
#include <stdlib.h>
#include <string.h>

#include "hub_curl.h"

zt_status hub_list_remote(hub_repo *r)
{
    char url[8192];
    char *body = NULL;
    hub_headers h;
    hub_curl_init();
    zt_status st = hub_api_url(r, "revision", r->revision, "", url, sizeof url);
    if (!st) st = hub_get(r, url, &body, &h);
    if (!st) st = hub_parse_revision(r, body);
    free(body);
    if (!st) st = hub_api_url(r, "tree", r->commit, "?recursive=true", url, sizeof url);
    for (int page = 0; !st && url[0]; page++) {
        if (page == 100000) return zt_fail(ZT_ERUNTIME, "the Hub's file list for '%s' does not end", r->repo_id);
        body = NULL;
        if (!(st = hub_get(r, url, &body, &h))) st = hub_parse_tree(r, body);
        free(body);
        snprintf(url, sizeof url, "%s", h.link_next);
    }
    return st;
}
