/* hub: model.path = "hf://org/name[@revision]" in a recipe. The files a model needs (config,
 * weights, tokenizer, templates) are downloaded into the cache, or found there, and the path
 * becomes the snapshot directory. */
#include <stdio.h>
#include <string.h>

#include "hub.h"
#include "lib/core/log.h"

zt_status zt_hub_resolve_model_path(const char *path, char *out, size_t n)
{
    /* a recipe joins relative paths to its directory (and "//" to "/"): "hf://x" may be ".../hf:/x" */
    const char *hf = !strncmp(path, "hf:/", 4) ? path : strstr(path, "/hf:/");
    if (!hf)
        return snprintf(out, n, "%s", path) < (int)n ? ZT_OK : zt_fail(ZT_EUSER, "model path too long: '%s'", path);
    if (hf != path) hf++;
    char repo[256], *at;
    const char *spec = hf + 3 + strspn(hf + 3, "/");
    if (snprintf(repo, sizeof repo, "%s", spec) >= (int)sizeof repo)
        return zt_fail(ZT_EUSER, "model path too long: '%s'", hf);
    if ((at = strchr(repo, '@'))) *at++ = 0;
    static const char *const model_files[] = {"*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"};
    zt_hub_options o = {.repo_id = repo, .revision = at, .include = model_files, .ninclude = 5};
    zt_status st = zt_hub_download(&o, out, n);
    if (st) return zt_fail_context(st, "model.path 'hf://%s'", spec);
    zt_log_info("model hf://%s is '%s'", spec, out);
    return ZT_OK;
}
