/* hub without libcurl: offline mode still serves the cache; anything that needs the network says
 * how to get it. */
#include "hub_internal.h"

static zt_status no_curl(const hub_repo *r)
{
    return zt_fail(
        ZT_EUSER,
        "zt download of '%s' needs the network, and this zt was built without libcurl: install "
        "libcurl4-openssl-dev and libssl-dev (scripts/install-deps.sh) and rebuild, or set HF_HUB_OFFLINE=1 to use "
        "the cache",
        r->repo_id);
}

zt_status hub_list_remote(hub_repo *r) { return no_curl(r); }

zt_status hub_fetch(hub_repo *r) { return no_curl(r); }
