/* core/json: JSON files that zt reads, changes and writes back (config.json,
 * generation_config.json, tokenizer_config.json) keep the numbers exactly as their
 * source wrote them: 8.0 stays 8.0 and 1000000000000000019884624838656 stays an integer,
 * where a plain cJSON round trip gives 8 and 1e+30.
 *
 *     cJSON *o;
 *     if ((st = zt_json_read(path, &o))) return st;   // exit 2 naming the file if not JSON
 *     cJSON_ReplaceItemInObject(o, "torch_dtype", cJSON_CreateString("bfloat16"));
 *     st = zt_json_write(out, o);                     // unchanged numbers as they were
 *     cJSON_Delete(o);
 *
 * How: after parsing, each number node keeps its source text in valuestring (unused by
 * cJSON for numbers, freed and copied with the node); the writer prints that text for
 * every number whose value still equals it. */
#ifndef ZT_CORE_JSON_H
#define ZT_CORE_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "status.h"

/* Parses text keeping each number's source text; NULL when it is not JSON or on OOM. */
cJSON *zt_json_parse(const char *text, size_t len);
/* Reads and parses a file; ZT_EUSER naming the file when it is not JSON. */
zt_status zt_json_read(const char *path, cJSON **out);
/* Prints doc pretty, numbers as zt_json_parse found them unless changed; free() it. */
char *zt_json_print(cJSON *doc);
/* Writes doc atomically with zt_json_print and a final newline. */
zt_status zt_json_write(const char *path, cJSON *doc);
/* Adds a number that readers take as a float: 8 is written 8.0. */
cJSON *zt_json_add_float(cJSON *o, const char *key, double v);

#endif
