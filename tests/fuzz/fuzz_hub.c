/* libFuzzer harness for what zt download reads from the Hub and its cache: the
 * input, split at NUL bytes, is a file listing (the tree API's JSON), a revision
 * answer (JSON), response headers (one a line, as libcurl hands them over) and a
 * metadata file of the cache. A listing is a list of files with safe relative
 * paths, sizes and hex hashes, or an error; a commit is 40 hex digits; the
 * headers leave NUL-terminated fields and an error message without control
 * characters; metadata gives a commit and an etag that fit. Never a crash, leak
 * or sanitizer report.
 *
 *   make fuzz-hub FUZZ_SECONDS=600
 */
#include <stdlib.h>
#include <string.h>

#include "lib/hub/hub_internal.h"
#include "tests/fuzz/fuzz_util.h"

static void check_listing(hub_repo *r, const char *json)
{
    zt_status st = hub_parse_tree(r, json);
    if (st && st != ZT_ERUNTIME && st != ZT_EUSER) abort();
    for (int i = 0; i < r->nfiles; i++) {
        const hub_file *f = &r->files[i];
        if (hub_check_remote_path(f->path) || f->size < 0) abort();
        if (!(f->lfs ? hub_is_hex(f->etag, 64) : hub_is_hex(f->etag, 40) || hub_is_hex(f->etag, 64))) abort();
    }
}

static void check_revision(hub_repo *r, const char *json)
{
    zt_status st = hub_parse_revision(r, json);
    if (st) fuzz_check_failure(st, ZT_ERUNTIME, r->repo_id);
    else if (!hub_is_hex(r->commit, 40)) abort();
}

#define TERMINATED(field) (memchr((field), 0, sizeof(field)) != NULL)

static void check_headers(const char *text)
{
    hub_headers h = {.linked_size = -1, .range_start = -1};
    for (const char *line = text; *line;) {
        size_t n = strcspn(line, "\n");
        n += line[n] == '\n';
        hub_parse_header(&h, line, n);
        line += n;
    }
    if (!TERMINATED(h.repo_commit) || !TERMINATED(h.linked_etag) || !TERMINATED(h.etag) ||
        !TERMINATED(h.error_code) || !TERMINATED(h.error_message) || !TERMINATED(h.link_next))
        abort();
    for (const char *c = h.error_message; *c; c++)
        if ((unsigned char)*c < 0x20) abort();
}

static void check_metadata(const char *text)
{
    char commit[41], etag[65];
    double ts;
    if (hub_read_metadata(fuzz_write("metadata", text, strlen(text)), commit, etag, &ts) &&
        (strlen(commit) > 40 || strlen(etag) > 64))
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *buf;
    const char *part[4];
    fuzz_split(data, size, &buf, part, 4);
    hub_repo r = {.repo_id = "org/model", .type = "model", .revision = "main"};
    check_listing(&r, part[0]);
    check_revision(&r, part[1]);
    check_headers(part[2]);
    check_metadata(part[3]);
    hub_repo_free(&r);
    free(buf);
    return 0;
}
