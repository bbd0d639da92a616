/* The safetensors reader: maps each file, validates its header against the file,
 * and, for a sharded checkpoint, the index against the shards. */
#include "lib/ckpt/safetensors.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/ckpt/safetensors_internal.h"
#include "lib/core/log.h"

static const struct {
    const char *name;
    size_t size; /* bytes per element */
} st_dtypes[] = {
    [ZT_ST_BOOL] = {"BOOL", 1},       [ZT_ST_U8] = {"U8", 1},           [ZT_ST_I8] = {"I8", 1},
    [ZT_ST_F8_E5M2] = {"F8_E5M2", 1}, [ZT_ST_F8_E4M3] = {"F8_E4M3", 1}, [ZT_ST_I16] = {"I16", 2},
    [ZT_ST_U16] = {"U16", 2},         [ZT_ST_F16] = {"F16", 2},         [ZT_ST_BF16] = {"BF16", 2},
    [ZT_ST_I32] = {"I32", 4},         [ZT_ST_U32] = {"U32", 4},         [ZT_ST_F32] = {"F32", 4},
    [ZT_ST_F64] = {"F64", 8},         [ZT_ST_I64] = {"I64", 8},         [ZT_ST_U64] = {"U64", 8},
};
#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

typedef struct st_map {
    char *path;
    void *base; /* the whole file, read-only */
    size_t size;
} st_map;

struct zt_st_reader {
    st_map *files;
    int nfiles;
    zt_st_tensor *tensors;
    int ntensors;
    const zt_st_tensor **by_name; /* sorted by name, for zt_st_find */
};

const char *zt_st_dtype_name(zt_st_dtype t) { return st_dtypes[t].name; }

size_t zt_st_dtype_size(zt_st_dtype t) { return st_dtypes[t].size; }

void zt_st_release(const zt_st_tensor *t)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)t->data & ~(page - 1);
    uintptr_t hi = ((uintptr_t)t->data + t->nbytes + page - 1) & ~(page - 1);
    if (t->nbytes) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static char *st_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", dir, name);
    return s;
}

static zt_status st_oom(const char *path) { return zt_fail(ZT_ENOMEM, "out of memory reading '%s'", path); }

static zt_status st_open_errno(const char *path)
{
    int e = errno;
    zt_status code = e == ENOENT || e == ENOTDIR || e == EACCES || e == EISDIR ? ZT_EUSER : ZT_EIO;
    return zt_fail(code, "cannot open '%s': %s", path, strerror(e));
}

/* Appends a mapping of path (copied) to r->files. */
static zt_status st_map_add(zt_st_reader *r, const char *path, st_map **out)
{
    st_map *files = realloc(r->files, (size_t)(r->nfiles + 1) * sizeof *files);
    if (!files) return st_oom(path);
    r->files = files;
    st_map *m = &files[r->nfiles];
    *m = (st_map){.path = strdup(path)};
    if (!m->path) return st_oom(path);
    r->nfiles++; /* from here on zt_st_close releases it */

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return st_open_errno(path);
    struct stat sb;
    zt_status st = ZT_OK;
    if (fstat(fd, &sb)) st = zt_fail(ZT_EIO, "cannot stat '%s': %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode)) st = zt_fail(ZT_EUSER, "'%s' is not a regular file", path);
    else if (sb.st_size < 8)
        st = zt_fail(ZT_EUSER, "'%s': file is too short (%lld bytes) to be safetensors", path, (long long)sb.st_size);
    if (!st) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) st = zt_fail(ZT_EIO, "cannot map '%s': %s", path, strerror(errno));
        else m->base = p, m->size = (size_t)sb.st_size;
    }
    close(fd);
    *out = m;
    return st;
}

/* A JSON number that is a whole number in [0, 2^53] (exact in a double). */
static int st_json_count(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
}

static void st_shape_str(char *buf, size_t cap, const int64_t *shape, int ndim)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* Parses one header entry into t (data still relative: begin is returned). */
static zt_status st_parse_entry(const cJSON *e, const char *path, size_t data_len, zt_st_tensor *t, uint64_t *begin)
{
#define BAD(...) zt_fail_context(zt_fail(ZT_EUSER, __VA_ARGS__), "'%s': tensor '%s'", path, t->name)
    if (!cJSON_IsObject(e)) return BAD("entry is not an object");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!dt) return BAD("no \"dtype\"");
    if (!cJSON_IsString(dt)) return BAD("\"dtype\" is not a string");
    int k = 0;
    while (k < ST_NDTYPES && strcmp(dt->valuestring, st_dtypes[k].name)) k++;
    if (k == ST_NDTYPES) return BAD("unknown dtype '%s'", dt->valuestring);
    t->dtype = (zt_st_dtype)k;

    if (!shape) return BAD("no \"shape\"");
    if (!cJSON_IsArray(shape)) return BAD("\"shape\" is not an array");
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > ZT_ST_MAX_DIMS) return BAD("shape has %d dimensions (at most %d are supported)", ndim, ZT_ST_MAX_DIMS);
    t->ndim = ndim;
    uint64_t numel = 1, d;
    const cJSON *v;
    int i = 0;
    cJSON_ArrayForEach(v, shape)
    {
        if (!cJSON_IsNumber(v)) return BAD("shape[%d] is not a number", i);
        if (st_json_count(v, &d)) return BAD("shape[%d] = %g is not a non-negative integer", i, v->valuedouble);
        t->shape[i++] = (int64_t)d;
        if (__builtin_mul_overflow(numel, d, &numel)) return BAD("shape is too large");
    }
    uint64_t need;
    if (__builtin_mul_overflow(numel, (uint64_t)st_dtypes[k].size, &need)) return BAD("shape is too large");

    if (!offs) return BAD("no \"data_offsets\"");
    uint64_t b, end;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || st_json_count(offs->child, &b) ||
        st_json_count(offs->child->next, &end))
        return BAD("\"data_offsets\" is not a pair of non-negative integers");
    if (b > end) return BAD("data_offsets [%" PRIu64 ", %" PRIu64 "]: begin is after end", b, end);
    if (end > data_len)
        return BAD("offsets [%" PRIu64 ", %" PRIu64 ") past the end of the data (%zu bytes)", b, end, data_len);
    if (end - b != need) {
        char s[256];
        st_shape_str(s, sizeof s, t->shape, ndim);
        return BAD("shape %s of %s needs %" PRIu64 " bytes but data_offsets [%" PRIu64 ", %" PRIu64 ") hold %" PRIu64,
                   s, st_dtypes[k].name, need, b, end, end - b);
    }
    t->nbytes = (size_t)need;
    *begin = b;
    return ZT_OK;
#undef BAD
}

static int st_cmp_data(const void *pa, const void *pb)
{
    const zt_st_tensor *a = pa, *b = pb;
    if (a->data != b->data) return (uintptr_t)a->data < (uintptr_t)b->data ? -1 : 1;
    if (a->nbytes != b->nbytes) return a->nbytes < b->nbytes ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Sorts the file's tensors into data order and rejects overlaps; gaps are legal. */
static zt_status st_check_layout(zt_st_tensor *t, int n, const char *path, const char *data, size_t data_len)
{
    qsort(t, (size_t)n, sizeof *t, st_cmp_data);
    size_t reach = 0; /* end of the data covered so far */
    const zt_st_tensor *last = NULL;
    for (int i = 0; i < n; i++) {
        if (!t[i].nbytes) continue;
        size_t b = (size_t)((const char *)t[i].data - data);
        if (last && b < reach) {
            size_t lb = (size_t)((const char *)last->data - data);
            return zt_fail(ZT_EUSER, "'%s': tensors '%s' [%zu, %zu) and '%s' [%zu, %zu) overlap", path, last->name, lb,
                           reach, t[i].name, b, b + t[i].nbytes);
        }
        if (b > reach) zt_log_debug("'%s': %zu unused bytes before tensor '%s'", path, b - reach, t[i].name);
        reach = b + t[i].nbytes;
        last = &t[i];
    }
    if (reach < data_len) zt_log_debug("'%s': %zu unused bytes after the last tensor", path, data_len - reach);
    return ZT_OK;
}

/* Parses text (len bytes, NUL-terminated, found at byte `at` of path; what: "header" or
 * "index") as a JSON object followed by nothing but whitespace. */
static zt_status st_parse_json(cJSON **root, const char *text, size_t len, const char *path, size_t at,
                               const char *what)
{
    size_t bad = zt_st_utf8_check((const unsigned char *)text, len);
    if (bad < len)
        return zt_fail(ZT_EUSER, "'%s': %s is not UTF-8 JSON text (byte 0x%02x at offset %zu)", path, what,
                       (unsigned char)text[bad], at + bad);
    const char *end = NULL;
    *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!*root)
        return zt_fail(ZT_EUSER, "'%s': %s is not valid JSON (at offset %zu)", path, what, at + (size_t)(end - text));
    end += strspn(end, " \t\n\r");
    if (end != text + len)
        return zt_fail(ZT_EUSER, "'%s': %s has bytes after the JSON value (at offset %zu)", path, what,
                       at + (size_t)(end - text));
    if (!cJSON_IsObject(*root)) return zt_fail(ZT_EUSER, "'%s': %s is not a JSON object", path, what);
    return ZT_OK;
}

static int st_is_string_map(const cJSON *o)
{
    if (!cJSON_IsObject(o)) return 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, o) if (!cJSON_IsString(v)) return 0;
    return 1;
}

/* Parses the header of m and appends its tensors to r->tensors. */
static zt_status st_parse_file(zt_st_reader *r, const st_map *m)
{
    const unsigned char *base = m->base;
    const char *path = m->path;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | base[i];
    if (hlen > m->size - 8)
        return zt_fail(ZT_EUSER, "'%s': header length %" PRIu64 " is larger than the file (%zu bytes)", path, hlen,
                       m->size);
    /* cJSON gets a NUL-terminated copy: nothing it does can reach past the mapping */
    char *text = malloc((size_t)hlen + 1);
    if (!text) return st_oom(path);
    memcpy(text, base + 8, (size_t)hlen);
    text[hlen] = 0;
    cJSON *root = NULL;
    zt_status st = st_parse_json(&root, text, (size_t)hlen, path, 8, "header");
    if (st) goto out;

    int n = cJSON_GetArraySize(root), first = r->ntensors, nmeta = 0;
    zt_st_tensor *all = realloc(r->tensors, (size_t)(first + n + 1) * sizeof *all);
    if (!all) {
        st = st_oom(path);
        goto out;
    }
    r->tensors = all;
    const char *data = (const char *)base + 8 + hlen;
    size_t data_len = m->size - 8 - (size_t)hlen;
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        if (!strcmp(e->string, "__metadata__")) {
            if (nmeta++) {
                st = zt_fail(ZT_EUSER, "'%s': header has two \"__metadata__\" entries", path);
                goto out;
            }
            if (!st_is_string_map(e)) {
                st = zt_fail(ZT_EUSER, "'%s': \"__metadata__\" is not an object of strings", path);
                goto out;
            }
            continue;
        }
        zt_st_tensor *t = &all[r->ntensors];
        *t = (zt_st_tensor){.file = path};
        t->name = strdup(e->string);
        if (!t->name) {
            st = st_oom(path);
            goto out;
        }
        r->ntensors++;
        uint64_t b = 0;
        if ((st = st_parse_entry(e, path, data_len, t, &b))) goto out;
        t->data = data + b;
    }
    st = st_check_layout(all + first, r->ntensors - first, path, data, data_len);
out:
    cJSON_Delete(root);
    free(text);
    return st;
}

static zt_status st_load_file(zt_st_reader *r, const char *path)
{
    st_map *m;
    zt_status st = st_map_add(r, path, &m);
    return st ? st : st_parse_file(r, m);
}

static int st_cmp_name(const void *pa, const void *pb)
{
    const zt_st_tensor *a = *(const zt_st_tensor *const *)pa, *b = *(const zt_st_tensor *const *)pb;
    int c = strcmp(a->name, b->name);
    return c ? c : (a < b ? -1 : a > b);
}

/* Builds the name index; a name seen twice is an error. */
static zt_status st_index_names(zt_st_reader *r)
{
    r->by_name = malloc((size_t)(r->ntensors ? r->ntensors : 1) * sizeof *r->by_name);
    if (!r->by_name) return zt_fail(ZT_ENOMEM, "out of memory indexing tensors");
    for (int i = 0; i < r->ntensors; i++) r->by_name[i] = &r->tensors[i];
    qsort(r->by_name, (size_t)r->ntensors, sizeof *r->by_name, st_cmp_name);
    for (int i = 1; i < r->ntensors; i++) {
        const zt_st_tensor *a = r->by_name[i - 1], *b = r->by_name[i];
        if (strcmp(a->name, b->name)) continue;
        if (a->file == b->file) return zt_fail(ZT_EUSER, "'%s': duplicate tensor '%s'", a->file, a->name);
        return zt_fail(ZT_EUSER, "tensor '%s' is in both '%s' and '%s'", a->name, a->file, b->file);
    }
    return ZT_OK;
}

static char *st_read_text(const char *path, size_t *len, zt_status *st)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *st = st_open_errno(path);
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (cap - n < 4096) {
            char *nb = realloc(buf, cap = cap * 2 + 8192);
            if (!nb) {
                *st = st_oom(path);
                break;
            }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (k) continue;
        if (ferror(f)) *st = zt_fail(ZT_EIO, "cannot read '%s': %s", path, strerror(errno));
        else buf[n] = 0, *len = n;
        break;
    }
    fclose(f);
    if (*st) free(buf);
    return *st ? NULL : buf;
}

typedef struct st_route {
    const char *name; /* tensor */
    const char *file; /* shard, as weight_map says */
} st_route;

static int st_cmp_route(const void *pa, const void *pb)
{
    return strcmp(((const st_route *)pa)->name, ((const st_route *)pb)->name);
}

/* Every tensor of the shards is in weight_map with its file, and every weight_map entry is a tensor. */
static zt_status st_check_routes(const zt_st_reader *r, st_route *map, int n, const char *index, size_t dirlen)
{
    qsort(map, (size_t)n, sizeof *map, st_cmp_route);
    for (int i = 1; i < n; i++)
        if (!strcmp(map[i - 1].name, map[i].name))
            return zt_fail(ZT_EUSER, "'%s': tensor '%s' appears twice in weight_map", index, map[i].name);
    for (int i = 0; i < r->ntensors; i++) {
        const zt_st_tensor *t = &r->tensors[i];
        st_route key = {.name = t->name};
        const st_route *hit = bsearch(&key, map, (size_t)n, sizeof *map, st_cmp_route);
        if (!hit)
            return zt_fail(ZT_EUSER, "'%s': tensor '%s' is not in the weight_map of '%s'", t->file, t->name, index);
        if (strcmp(hit->file, t->file + dirlen))
            return zt_fail(ZT_EUSER, "'%s': weight_map puts tensor '%s' in '%s' but it is in '%s'", index, t->name,
                           hit->file, t->file);
    }
    for (int i = 0; i < n; i++)
        if (!zt_st_find(r, map[i].name))
            return zt_fail(ZT_EUSER, "'%s': tensor '%s' is in weight_map but not in '%s'", index, map[i].name,
                           map[i].file);
    return ZT_OK;
}

static int st_exists(const char *path)
{
    struct stat sb;
    return !stat(path, &sb);
}

static zt_status st_load_index(zt_st_reader *r, const char *index)
{
    size_t len = 0;
    zt_status st = ZT_OK;
    char *text = st_read_text(index, &len, &st);
    if (!text) return st;
    cJSON *root = NULL;
    st_route *map = NULL;
    char *path = NULL;
    if ((st = st_parse_json(&root, text, len, index, 0, "index"))) goto out;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) {
        st = zt_fail(ZT_EUSER, "'%s': %s", index, wm ? "\"weight_map\" is not an object" : "no \"weight_map\"");
        goto out;
    }

    /* shard names are relative to the index's directory */
    const char *slash = strrchr(index, '/');
    size_t dirlen = slash ? (size_t)(slash - index) + 1 : 0;
    int n = cJSON_GetArraySize(wm), k = 0;
    map = malloc((size_t)(n ? n : 1) * sizeof *map);
    if (!map) {
        st = st_oom(index);
        goto out;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, wm)
    {
        const char *f = cJSON_GetStringValue(e);
        if (!f || !*f || strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, "..")) {
            st = zt_fail(ZT_EUSER, "'%s': weight_map entry of tensor '%s' is not a file name in this directory", index,
                         e->string);
            goto out;
        }
        map[k++] = (st_route){e->string, f};
        int seen = 0; /* shards are few: a linear search tells a new one */
        for (int j = 0; j < r->nfiles && !seen; j++) seen = !strcmp(r->files[j].path + dirlen, f);
        if (seen) continue;
        free(path);
        if (!(path = malloc(dirlen + strlen(f) + 1))) {
            st = st_oom(index);
            goto out;
        }
        memcpy(path, index, dirlen);
        strcpy(path + dirlen, f);
        if (!st_exists(path)) {
            st = zt_fail(ZT_EUSER, "'%s': shard '%s' is missing", index, path);
            goto out;
        }
        if ((st = st_load_file(r, path))) goto out;
    }
    if ((st = st_index_names(r))) goto out;
    st = st_check_routes(r, map, n, index, dirlen);
out:
    free(path);
    free(map);
    cJSON_Delete(root);
    free(text);
    return st;
}

static int st_has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Picks the file to open in dir: its index, model.safetensors, or its only *.safetensors. */
static zt_status st_pick_in_dir(const char *dir, char **out)
{
    static const char *const preferred[] = {ST_INDEX_NAME, ST_SINGLE_NAME};
    for (int i = 0; i < 2; i++) {
        char *p = st_join(dir, preferred[i]);
        if (!p) return st_oom(dir);
        if (st_exists(p)) return *out = p, ZT_OK;
        free(p);
    }
    DIR *d = opendir(dir);
    if (!d) return st_open_errno(dir);
    char found[256] = "";
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (st_has_suffix(de->d_name, ".safetensors") && count++ == 0) snprintf(found, sizeof found, "%s", de->d_name);
    closedir(d);
    if (count == 0) return zt_fail(ZT_EUSER, "'%s': no .safetensors file in this directory", dir);
    if (count > 1)
        return zt_fail(ZT_EUSER, "'%s': %d .safetensors files and no %s to say which to load", dir, count,
                       ST_INDEX_NAME);
    if (!(*out = st_join(dir, found))) return st_oom(dir);
    return ZT_OK;
}

zt_status zt_st_open(zt_st_reader **out, const char *path)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb)) return st_open_errno(path);
    char *picked = NULL;
    if (S_ISDIR(sb.st_mode)) {
        zt_status st = st_pick_in_dir(path, &picked);
        if (st) return st;
        path = picked;
    }
    zt_st_reader *r = calloc(1, sizeof *r);
    zt_status st;
    if (!r) st = st_oom(path);
    else if (st_has_suffix(path, ".json")) st = st_load_index(r, path);
    else if (!(st = st_load_file(r, path))) st = st_index_names(r);
    free(picked);
    if (st) {
        zt_st_close(r);
        return st;
    }
    *out = r;
    return ZT_OK;
}

int zt_st_count(const zt_st_reader *r) { return r->ntensors; }

const zt_st_tensor *zt_st_get(const zt_st_reader *r, int i)
{
    ZT_ASSERT(i >= 0 && i < r->ntensors);
    return &r->tensors[i];
}

static int st_cmp_key(const void *key, const void *elem)
{
    return strcmp(key, (*(const zt_st_tensor *const *)elem)->name);
}

const zt_st_tensor *zt_st_find(const zt_st_reader *r, const char *name)
{
    const zt_st_tensor *const *hit = bsearch(name, r->by_name, (size_t)r->ntensors, sizeof *r->by_name, st_cmp_key);
    return hit ? *hit : NULL;
}

void zt_st_close(zt_st_reader *r)
{
    if (!r) return;
    for (int i = 0; i < r->ntensors; i++) free((char *)r->tensors[i].name);
    for (int i = 0; i < r->nfiles; i++) {
        if (r->files[i].base) munmap(r->files[i].base, r->files[i].size);
        free(r->files[i].path);
    }
    free(r->tensors);
    free(r->files);
    free(r->by_name);
    free(r);
}

static zt_status float_dtype(const zt_st_tensor *t, zt_dtype *out)
{
    switch (t->dtype) {
    case ZT_ST_F32: *out = ZT_F32; return ZT_OK;
    case ZT_ST_BF16: *out = ZT_BF16; return ZT_OK;
    case ZT_ST_F16: *out = ZT_F16; return ZT_OK;
    case ZT_ST_F64: *out = ZT_F64; return ZT_OK;
    default:
        return zt_fail(ZT_EUSER, "'%s': tensor '%s': dtype %s cannot be loaded as floating point", t->file, t->name,
                       st_dtypes[t->dtype].name);
    }
}

/* Elements [first, first + n) of t, converted into p (n elements of type dt), are finite. */
static zt_status finite_check(const zt_st_tensor *t, const void *p, zt_dtype dt, size_t first, size_t n)
{
    const char *what;
    size_t bad = zt_find_nonfinite(p, dt, n, &what);
    if (bad == n) return ZT_OK;
    return zt_fail(ZT_EUSER, "'%s': tensor '%s': element %zu is %s (a diverged or corrupt model)", t->file, t->name,
                   first + bad, what);
}

zt_status zt_st_check_finite(const zt_st_tensor *t)
{
    enum { CHUNK = 4096 }; /* elements per step, as double: exact for every source type */
    double buf[CHUNK];
    zt_dtype src = ZT_F32;
    zt_status st = float_dtype(t, &src);
    size_t size = zt_dtype_size(src), n = t->nbytes / size;
    for (size_t i = 0; !st && i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        zt_st_convert(buf, ZT_F64, (const char *)t->data + i * size, src, k);
        st = finite_check(t, buf, ZT_F64, i, k);
    }
    return st;
}

zt_status zt_st_read_into(const zt_st_tensor *t, void *dst, zt_dtype dst_dtype, const int64_t *expect_shape,
                          int expect_ndim)
{
    if (expect_shape &&
        (expect_ndim != t->ndim || memcmp(expect_shape, t->shape, (size_t)t->ndim * sizeof *expect_shape))) {
        char have[256], want[256];
        st_shape_str(have, sizeof have, t->shape, t->ndim);
        st_shape_str(want, sizeof want, expect_shape, expect_ndim);
        return zt_fail(ZT_EUSER, "'%s': tensor '%s': shape %s does not match the expected %s", t->file, t->name, have,
                       want);
    }
    zt_dtype src = ZT_F32;
    zt_status st = float_dtype(t, &src);
    if (st || !dst) return st;
    size_t n = t->nbytes / zt_dtype_size(src);
    zt_st_convert(dst, dst_dtype, t->data, src, n);
    return finite_check(t, dst, dst_dtype, 0, n);
}
