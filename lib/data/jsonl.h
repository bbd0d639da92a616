/* data/jsonl: streaming JSONL files line by line into a callback that turns each
 * object into examples. A bad line is a ZT_EUSER error naming "path:line: what";
 * with skip_bad the line is counted and skipped instead (data.skip_bad_lines).
 *
 *     static zt_status one(void *ctx, const cJSON *obj) { ... return zt_fail(ZT_EUSER, "missing \"text\""); }
 *     int64_t skipped;
 *     st = zt_jsonl_load(paths, npaths, 0, one, &ctx, &skipped);
 */
#ifndef ZT_DATA_JSONL_H
#define ZT_DATA_JSONL_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "lib/core/status.h"

typedef zt_status (*zt_jsonl_fn)(void *ctx, const cJSON *obj);

zt_status zt_jsonl_load(char *const *paths, int npaths, int skip_bad, zt_jsonl_fn fn, void *ctx, int64_t *skipped);

/* "a string", "an array", ... for messages about a JSON value of the wrong kind */
const char *zt_json_kind(const cJSON *v);

#endif
