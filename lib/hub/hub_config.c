/* hub: the options and the environment, checked before anything touches the network or the disk. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub_internal.h"
#include "lib/core/fileio.h"

int hub_is_hex(const char *s, size_t n)
{
    if (strlen(s) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f')) return 0;
    return 1;
}

void hub_normalize_etag(const char *in, char *out, size_t n)
{
    if (!strncmp(in, "W/", 2)) in += 2;
    size_t len = strlen(in);
    if (len >= 2 && in[0] == '"' && in[len - 1] == '"') in++, len -= 2;
    snprintf(out, n, "%.*s", (int)len, in);
}

/* A name the Hub accepts: letters, digits, '-', '_', '.'; no "--" or ".."; no '-' or '.' at the ends. */
static int valid_name_part(const char *s, size_t n)
{
    if (n == 0 || n > 96 || strchr("-.", s[0]) || strchr("-.", s[n - 1])) return 0;
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)s[i]) && !strchr("-_.", s[i])) return 0;
        if (i && (s[i] == '-' || s[i] == '.') && s[i - 1] == s[i]) return 0;
    }
    return 1;
}

static int valid_repo_id(const char *id)
{
    const char *slash = strchr(id, '/');
    if (!slash) return valid_name_part(id, strlen(id));
    return valid_name_part(id, (size_t)(slash - id)) && valid_name_part(slash + 1, strlen(slash + 1));
}

/* Relative, '/'-separated, no empty, "." or ".." component, no control character or backslash. */
static int valid_relative_path(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n >= 1024 || p[0] == '/') return 0;
    for (const char *c = p; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == '\\') return 0;
    for (const char *c = p; *c;) {
        size_t m = strcspn(c, "/");
        if (m == 0 || (m == 1 && c[0] == '.') || (m == 2 && c[0] == '.' && c[1] == '.')) return 0;
        c += m + (c[m] == '/');
        if (c[-1] == '/' && !*c) return 0; /* trailing '/' */
    }
    return 1;
}

zt_status hub_check_remote_path(const char *path)
{
    if (valid_relative_path(path)) return ZT_OK;
    return zt_fail(ZT_EUSER, "refusing the remote file name '%.200s': it is absolute, empty or contains '..'", path);
}

int hub_loopback_url(const char *url)
{
    const char *h = strstr(url, "://");
    if (!h) return 0;
    h += 3;
    size_t n = h[0] == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":/?#");
    if (n == 9 && !strncasecmp(h, "localhost", 9)) return 1;
    if (n == 5 && !strncmp(h, "[::1]", 5)) return 1;
    return n >= 4 && n < 16 && !strncmp(h, "127.", 4) && strspn(h, "0123456789.") == n;
}

zt_status hub_add_file(hub_repo *r, const char *path, long long size, const char *etag, int lfs)
{
    zt_status st = hub_check_remote_path(path);
    if (st) return st;
    if (size < 0 || !(lfs ? hub_is_hex(etag, 64) : hub_is_hex(etag, 40) || hub_is_hex(etag, 64)))
        return zt_fail(ZT_ERUNTIME, "the Hub listed '%.200s' with a bad size or hash ('%.80s')", path, etag);
    hub_file *grown = realloc(r->files, (size_t)(r->nfiles + 1) * sizeof *grown);
    if (!grown) return zt_fail(ZT_ENOMEM, "out of memory");
    r->files = grown;
    hub_file *f = &r->files[r->nfiles];
    *f = (hub_file){.size = size, .lfs = lfs, .alias_of = -1, .path = strdup(path)};
    if (!f->path) return zt_fail(ZT_ENOMEM, "out of memory");
    snprintf(f->etag, sizeof f->etag, "%s", etag);
    r->nfiles++;
    return ZT_OK;
}

void hub_repo_free(hub_repo *r)
{
    for (int i = 0; i < r->nfiles; i++) free(r->files[i].path);
    free(r->files);
    r->files = NULL;
    r->nfiles = 0;
    memset(r->token, 0, sizeof r->token);
}

static int env_true(const char *name)
{
    const char *v = getenv(name);
    return v && (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"));
}

static zt_status env_long(const char *name, long dflt, long min, long max, long *out)
{
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !v[0]) return ZT_OK;
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d >= min && d <= max))
        return zt_fail(ZT_EUSER, "%s='%.40s' is not a number in [%ld, %ld]", name, v, min, max);
    *out = (long)d + ((double)(long)d < d); /* seconds round up */
    return ZT_OK;
}

/* $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface */
static zt_status hf_home(char *out, size_t n)
{
    const char *home = getenv("HF_HOME"), *xdg = getenv("XDG_CACHE_HOME"), *user = getenv("HOME");
    int r;
    if (home && home[0]) r = snprintf(out, n, "%s", home);
    else if (xdg && xdg[0]) r = snprintf(out, n, "%s/huggingface", xdg);
    else if (user && user[0]) r = snprintf(out, n, "%s/.cache/huggingface", user);
    else return zt_fail(ZT_EUSER, "no cache directory: set HF_HOME or HF_HUB_CACHE, or pass --cache-dir");
    return r < 0 || (size_t)r >= n ? zt_fail(ZT_EUSER, "HF_HOME is too long") : ZT_OK;
}

static zt_status cache_dir(const zt_hub_options *o, char *out, size_t n)
{
    const char *c = o->cache_dir && o->cache_dir[0] ? o->cache_dir : getenv("HF_HUB_CACHE");
    if (c && c[0])
        return snprintf(out, n, "%s", c) < (int)n ? ZT_OK : zt_fail(ZT_EUSER, "cache directory path too long");
    char home[HUB_PATH_MAX];
    zt_status st = hf_home(home, sizeof home);
    return st ? st : zt_path_join(out, n, home, "hub");
}

/* The token: --token, $HF_TOKEN, the file $HF_TOKEN_PATH, $HF_HOME/token. Never printed. */
static zt_status read_token(hub_repo *r, const zt_hub_options *o)
{
    const char *from = "--token", *t = o->token;
    char path[HUB_PATH_MAX], home[HUB_PATH_MAX], *text = NULL;
    if (!t && getenv("HF_TOKEN") && getenv("HF_TOKEN")[0]) from = "HF_TOKEN", t = getenv("HF_TOKEN");
    if (!t) {
        const char *tp = getenv("HF_TOKEN_PATH");
        zt_status st = ZT_OK;
        if (tp && tp[0]) {
            from = "HF_TOKEN_PATH";
            if (snprintf(path, sizeof path, "%s", tp) >= (int)sizeof path)
                return zt_fail(ZT_EUSER, "HF_TOKEN_PATH is too long");
        } else if (hf_home(home, sizeof home)) {
            zt_errclear(); /* no home directory: no token file either */
            return ZT_OK;
        } else {
            from = "$HF_HOME/token";
            if ((st = zt_path_join(path, sizeof path, home, "token"))) return st;
        }
        size_t len;
        if (!zt_path_exists(path))
            return tp && tp[0] ? zt_fail(ZT_EUSER, "HF_TOKEN_PATH '%s' does not exist", path) : ZT_OK;
        if ((st = zt_read_file(path, &text, &len))) return st;
        t = text;
    }
    size_t a = 0, b = strlen(t);
    while (a < b && isspace((unsigned char)t[a])) a++;
    while (b > a && isspace((unsigned char)t[b - 1])) b--;
    int ok = b - a < sizeof r->token;
    for (size_t i = a; i < b && ok; i++) ok = t[i] > 0x20 && t[i] < 0x7f;
    if (ok) snprintf(r->token, sizeof r->token, "%.*s", (int)(b - a), t + a);
    if (text) memset(text, 0, strlen(text)), free(text);
    return ok ? ZT_OK
              : zt_fail(ZT_EUSER, "the token from %s has characters a token cannot have (or is too long)", from);
}

static zt_status check_revision(const char *rev)
{
    if (strlen(rev) < 256 && valid_relative_path(rev) && !strpbrk(rev, " ?#%")) return ZT_OK;
    return zt_fail(ZT_EUSER, "--revision '%.100s' is not a branch, tag or commit name", rev);
}

static zt_status endpoint(hub_repo *r, const zt_hub_options *o)
{
    const char *e = getenv("HF_ENDPOINT");
    if (!e || !e[0]) e = "https://huggingface.co";
    int plain = !strncmp(e, "http://", 7);
    if (!plain && strncmp(e, "https://", 8))
        return zt_fail(ZT_EUSER, "HF_ENDPOINT '%.200s' is not an http:// or https:// URL", e);
    if (snprintf(r->endpoint, sizeof r->endpoint, "%s", e) >= (int)sizeof r->endpoint)
        return zt_fail(ZT_EUSER, "HF_ENDPOINT is too long");
    size_t n = strlen(r->endpoint);
    while (n > 8 && r->endpoint[n - 1] == '/') r->endpoint[--n] = 0;
    int loop = hub_loopback_url(r->endpoint);
    if (o->insecure && !loop)
        return zt_fail(ZT_EUSER, "--insecure is only for a loopback HF_ENDPOINT (tests); '%s' is not one", r->endpoint);
    if (plain && !loop && r->token[0])
        return zt_fail(ZT_EUSER, "refusing to send the token over plain http to '%s': use https", r->endpoint);
    return ZT_OK;
}

zt_status hub_repo_init(hub_repo *r, const zt_hub_options *o)
{
    *r = (hub_repo){.o = o, .type = "model"};
    const char *id = o->repo_id ? o->repo_id : "";
    if (!valid_repo_id(id) || strlen(id) >= sizeof r->repo_id)
        return zt_fail(ZT_EUSER, "'%.200s' is not a repository id like 'org/name' (letters, digits, '-', '_', '.')",
                       id);
    strcpy(r->repo_id, id);
    if (o->repo_type && strcmp(o->repo_type, "model") && strcmp(o->repo_type, "dataset"))
        return zt_fail(ZT_EUSER, "--repo-type '%.40s' is not model or dataset", o->repo_type);
    if (o->repo_type) r->type = !strcmp(o->repo_type, "dataset") ? "dataset" : "model";
    const char *rev = o->revision && o->revision[0] ? o->revision : "main";
    zt_status st = check_revision(rev);
    if (st) return st;
    strcpy(r->revision, rev);
    if (o->max_workers < 0 || o->max_workers > 64)
        return zt_fail(ZT_EUSER, "--max-workers %d is not in [1, 64]", o->max_workers);
    if (o->local_dir && o->cache_dir) return zt_fail(ZT_EUSER, "give --local-dir or --cache-dir, not both");
    if (o->local_dir && !o->local_dir[0]) return zt_fail(ZT_EUSER, "--local-dir is empty");
    for (int i = 0; i < o->nfiles; i++)
        if ((st = hub_check_remote_path(o->files[i]))) return st;
    r->offline = env_true("HF_HUB_OFFLINE");
    long retries;
    if ((st = env_long("HF_HUB_ETAG_TIMEOUT", 10, 1, 3600, &r->etag_timeout_s)) ||
        (st = env_long("HF_HUB_DOWNLOAD_TIMEOUT", 10, 1, 3600, &r->download_timeout_s)) ||
        (st = env_long("ZT_HUB_RETRIES", 5, 0, 100, &retries)) || (st = read_token(r, o)) || (st = endpoint(r, o)))
        return st;
    r->retries = (int)retries;
    if (o->local_dir) {
        r->local = 1;
        if (snprintf(r->storage, sizeof r->storage, "%s", o->local_dir) >= (int)sizeof r->storage)
            return zt_fail(ZT_EUSER, "--local-dir path too long");
        return zt_path_join(r->locks, sizeof r->locks, r->storage, ".cache/huggingface/download");
    }
    char cache[HUB_PATH_MAX], folder[300];
    if ((st = cache_dir(o, cache, sizeof cache))) return st;
    snprintf(folder, sizeof folder, "%ss--%s", r->type, r->repo_id);
    for (char *c = folder; *c; c++)
        if (*c == '/') {
            memmove(c + 2, c + 1, strlen(c + 1) + 1);
            c[0] = c[1] = '-';
        }
    char locks[HUB_PATH_MAX];
    if ((st = zt_path_join(r->storage, sizeof r->storage, cache, folder)) ||
        (st = zt_path_join(locks, sizeof locks, cache, ".locks")))
        return st;
    return zt_path_join(r->locks, sizeof r->locks, locks, folder);
}
