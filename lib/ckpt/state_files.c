/* The files around the shards of a training checkpoint: trainer_state.json, the model
 * files, the DONE marker, and the checkpoints/ directory (newest, rotation, new step). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/ckpt/state.h"
#include "lib/core/fileio.h"

#define STATE_JSON "trainer_state.json"
#define STATE_FORMAT "zt-trainer-state"
#define STATE_VERSION 1
#define JSON_INT_MAX ((int64_t)1 << 53) /* integers JSON numbers hold exactly */

/* --- trainer_state.json ------------------------------------------------------------------- */

/* cJSON would print integers past 1e15 in exponent form; these stay exact */
static int add_int(cJSON *o, const char *key, int64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%" PRId64, v);
    return cJSON_AddRawToObject(o, key, s) != NULL;
}

static int add_hex(cJSON *to, const char *key, uint64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%016" PRIx64, v);
    cJSON *str = cJSON_CreateString(s);
    return key ? cJSON_AddItemToObject(to, key, str) : cJSON_AddItemToArray(to, str);
}

zt_status zt_state_write_json(const char *ckpt_dir, const zt_trainer_state *s)
{
    char path[4096];
    zt_status st = zt_path_join(path, sizeof path, ckpt_dir, STATE_JSON);
    if (st) return st;
    cJSON *o = cJSON_CreateObject(), *rng;
    int ok = cJSON_AddStringToObject(o, "format", STATE_FORMAT) && add_int(o, "version", STATE_VERSION) &&
             add_int(o, "step", s->step) && add_int(o, "epoch", s->epoch) && add_int(o, "row", s->row) &&
             (rng = cJSON_AddArrayToObject(o, "rng"));
    for (int i = 0; i < 4 && ok; i++) ok = add_hex(rng, NULL, s->rng[i]);
    ok = ok && add_hex(o, "data_hash", s->data_hash) && add_int(o, "world", s->world) &&
         add_int(o, "zero_stage", s->zero_stage) && add_int(o, "numel", (int64_t)s->numel) &&
         cJSON_AddNumberToObject(o, "tokens_seen", s->tokens_seen) &&
         cJSON_AddNumberToObject(o, "elapsed_s", s->elapsed_s) &&
         (!s->base_hash || add_hex(o, "base_hash", s->base_hash));
    char *text = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!text) return zt_fail(ZT_ENOMEM, "out of memory writing '%s'", path);
    st = zt_write_file_atomic(path, text, strlen(text));
    free(text);
    return st;
}

static zt_status get_int(const cJSON *o, const char *key, int64_t min, int64_t max, int64_t *out, const char *path)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    double d = cJSON_IsNumber(v) ? v->valuedouble : 0.5;
    if (!(d >= (double)min && d <= (double)max) || d != floor(d))
        return zt_fail(ZT_EUSER, "'%s': '%s' is missing or not an integer in [%" PRId64 ", %" PRId64 "]", path, key,
                       min, max);
    *out = (int64_t)d;
    return ZT_OK;
}

static zt_status get_hex(const cJSON *v, const char *what, uint64_t *out, const char *path)
{
    char *end;
    if (!cJSON_IsString(v) || strlen(v->valuestring) != 16 || strspn(v->valuestring, "0123456789abcdef") != 16)
        return zt_fail(ZT_EUSER, "'%s': %s is missing or not 16 hex digits", path, what);
    *out = strtoull(v->valuestring, &end, 16);
    return ZT_OK;
}

static zt_status get_real(const cJSON *o, const char *key, double *out, const char *path)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) return zt_fail(ZT_EUSER, "'%s': '%s' is missing or not a number", path, key);
    *out = v->valuedouble;
    return ZT_OK;
}

/* "step-" then only digits → the step, else -1 */
static long parse_step(const char *name)
{
    char *end;
    if (strncmp(name, "step-", 5) || name[5] < '0' || name[5] > '9') return -1;
    errno = 0;
    long step = strtol(name + 5, &end, 10);
    return *end || errno ? -1 : step;
}

/* The step of a directory named step-N (its last component), else -1. */
static long dir_step(const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    char name[64];
    size_t start = n;
    while (start && dir[start - 1] != '/') start--;
    if (n - start >= sizeof name) return -1;
    memcpy(name, dir + start, n - start);
    name[n - start] = 0;
    return parse_step(name);
}

zt_status zt_state_read_json(const char *ckpt_dir, zt_trainer_state *s)
{
    char path[4096], *text;
    size_t len;
    zt_status st = zt_path_join(path, sizeof path, ckpt_dir, STATE_JSON);
    if (st || (st = zt_read_file(path, &text, &len))) return st;
    cJSON *o = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format"), *rng = cJSON_GetObjectItemCaseSensitive(o, "rng");
    int64_t version = 0, step = 0, world = 0, stage = 0, numel = 0;
    memset(s, 0, sizeof *s);
    if (!cJSON_IsObject(o)) st = zt_fail(ZT_EUSER, "'%s': not a JSON object", path);
    else if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, STATE_FORMAT))
        st = zt_fail(ZT_EUSER, "'%s': \"format\" is not \"%s\"", path, STATE_FORMAT);
    else if (!(st = get_int(o, "version", 1, 1 << 30, &version, path)) && version > STATE_VERSION)
        st = zt_fail(ZT_EUSER, "'%s': version %" PRId64 " is newer than this zt reads (%d)", path, version,
                     STATE_VERSION);
    if (!st) st = get_int(o, "step", 0, JSON_INT_MAX, &step, path);
    if (!st) st = get_int(o, "epoch", 0, JSON_INT_MAX, &s->epoch, path);
    if (!st) st = get_int(o, "row", 0, JSON_INT_MAX, &s->row, path);
    if (!st && (!cJSON_IsArray(rng) || cJSON_GetArraySize(rng) != 4))
        st = zt_fail(ZT_EUSER, "'%s': 'rng' is missing or not an array of 4", path);
    for (int i = 0; i < 4 && !st; i++) st = get_hex(cJSON_GetArrayItem(rng, i), "an 'rng' word", &s->rng[i], path);
    if (!st) st = get_hex(cJSON_GetObjectItemCaseSensitive(o, "data_hash"), "'data_hash'", &s->data_hash, path);
    if (!st) st = get_int(o, "world", 1, INT32_MAX, &world, path);
    if (!st) st = get_int(o, "zero_stage", 0, 3, &stage, path);
    if (!st) st = get_int(o, "numel", 1, JSON_INT_MAX, &numel, path);
    if (!st) st = get_real(o, "tokens_seen", &s->tokens_seen, path);
    if (!st) st = get_real(o, "elapsed_s", &s->elapsed_s, path);
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(o, "base_hash");
    if (!st && base) st = get_hex(base, "'base_hash'", &s->base_hash, path);
    cJSON_Delete(o);
    if (st) return st;
    long named = dir_step(ckpt_dir);
    if (named >= 0 && named != step)
        return zt_fail(ZT_EUSER, "'%s': 'step' is %" PRId64 ", but the checkpoint directory is step-%06ld", path, step,
                       named);
    if ((st = zt_state_check_shards(ckpt_dir, path, (size_t)numel, (int)world, (int)stage))) return st;
    s->step = (long)step, s->world = (int)world, s->zero_stage = (int)stage, s->numel = (size_t)numel;
    return ZT_OK;
}

/* --- model files, DONE ---------------------------------------------------------------------- */

zt_status zt_state_copy_model_files(const char *ckpt_dir, const char *model_dir)
{
    /* an image-text model's image processor too (AutoProcessor loads the saved model with it) */
    static const char *names[] = {"config.json",           "generation_config.json",   "tokenizer.json",
                                  "tokenizer.model",       "tokenizer_config.json",    "special_tokens_map.json",
                                  "processor_config.json", "preprocessor_config.json", "chat_template.jinja"};
    zt_status st = ZT_OK;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !st; i++) {
        char src[4096], dst[4096], *data;
        size_t len;
        if ((st = zt_path_join(src, sizeof src, model_dir, names[i])) ||
            (st = zt_path_join(dst, sizeof dst, ckpt_dir, names[i])))
            break;
        if (!zt_path_exists(src)) continue;
        if ((st = zt_read_file(src, &data, &len))) break;
        st = zt_write_file_atomic(dst, data, len);
        free(data);
    }
    return st;
}

static zt_status done_path(char *out, size_t n, const char *ckpt_dir) { return zt_path_join(out, n, ckpt_dir, "DONE"); }

int zt_state_is_done(const char *ckpt_dir)
{
    char path[4096];
    return !done_path(path, sizeof path, ckpt_dir) && zt_path_exists(path);
}

zt_status zt_state_mark_done(const char *ckpt_dir)
{
    char path[4096], parent[4096];
    zt_status st = done_path(path, sizeof path, ckpt_dir);
    if (!st) st = zt_write_file_atomic(path, "done\n", 5);
    /* the checkpoint's own entry in checkpoints/ must be durable too */
    snprintf(parent, sizeof parent, "%s", ckpt_dir);
    if (!st) st = zt_fsync_dir(dirname(parent));
    return st;
}

/* Removes a checkpoint: DONE first (and made durable), so a crash leaves it incomplete. */
static zt_status remove_checkpoint(const char *ckpt_dir)
{
    char path[4096];
    zt_status st = done_path(path, sizeof path, ckpt_dir);
    if (st) return st;
    if (unlink(path) == 0) st = zt_fsync_dir(ckpt_dir);
    else if (errno != ENOENT) return zt_fail(ZT_EIO, "cannot remove '%s': %s", path, strerror(errno));
    return st ? st : zt_remove_tree(ckpt_dir);
}

/* --- checkpoints/ ------------------------------------------------------------------------------ */

typedef struct ckpt_entry {
    long step;
    int done;
    char path[4096];
} ckpt_entry;

static int by_step(const void *a, const void *b)
{
    long x = ((const ckpt_entry *)a)->step, y = ((const ckpt_entry *)b)->step;
    return (x > y) - (x < y);
}

/* The step-* directories of run_dir/checkpoints, oldest first (none when it does not exist). */
static zt_status list_checkpoints(const char *run_dir, ckpt_entry **out, int *n)
{
    char dir[4096];
    *out = NULL, *n = 0;
    zt_status st = zt_path_join(dir, sizeof dir, run_dir, "checkpoints");
    if (st) return st;
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? ZT_OK : zt_fail(ZT_EIO, "cannot list '%s': %s", dir, strerror(errno));
    ckpt_entry *v = NULL;
    int cap = 0;
    struct dirent *de;
    while (!st && (de = readdir(d))) {
        long step = parse_step(de->d_name);
        if (step < 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ckpt_entry *grown = realloc(v, (size_t)cap * sizeof *v);
            if (!grown) {
                st = zt_fail(ZT_ENOMEM, "out of memory listing '%s'", dir);
                break;
            }
            v = grown;
        }
        ckpt_entry *e = &v[*n];
        e->step = step;
        if ((st = zt_path_join(e->path, sizeof e->path, dir, de->d_name))) break;
        e->done = zt_state_is_done(e->path);
        ++*n;
    }
    closedir(d);
    if (st) {
        free(v);
        *n = 0;
        return st;
    }
    if (*n) qsort(v, (size_t)*n, sizeof *v, by_step);
    *out = v;
    return ZT_OK;
}

zt_status zt_state_latest(const char *run_dir, char *out, size_t n, int *found)
{
    ckpt_entry *v;
    int count;
    *found = 0;
    zt_status st = list_checkpoints(run_dir, &v, &count);
    for (int i = count - 1; i >= 0 && !st; i--) {
        if (!v[i].done) continue;
        if (snprintf(out, n, "%s", v[i].path) >= (int)n) st = zt_fail(ZT_EUSER, "path too long: '%s'", v[i].path);
        else *found = 1;
        break;
    }
    free(v);
    return st;
}

zt_status zt_state_rotate(const char *run_dir, int keep)
{
    ckpt_entry *v;
    int count, complete = 0, newest = -1;
    zt_status st = list_checkpoints(run_dir, &v, &count);
    for (int i = 0; i < count; i++)
        if (v[i].done) complete++, newest = i;
    int drop = keep < 1 ? 0 : complete - keep; /* complete ones to delete, oldest first */
    for (int i = 0; i < newest && !st; i++) {
        if (v[i].done && drop <= 0) continue;
        if (v[i].done) drop--;
        st = remove_checkpoint(v[i].path);
    }
    free(v);
    return st;
}

zt_status zt_state_dir(const char *run_dir, long step, char *out, size_t n)
{
    char name[32], parent[4096];
    ZT_ASSERT(step >= 0);
    snprintf(name, sizeof name, "step-%06ld", step);
    zt_status st = zt_path_join(parent, sizeof parent, run_dir, "checkpoints");
    if (!st) st = zt_path_join(out, n, parent, name);
    if (!st && zt_path_exists(out)) st = remove_checkpoint(out);
    if (!st) st = zt_mkdir_p(out);
    return st;
}
