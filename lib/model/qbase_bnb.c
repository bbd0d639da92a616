/* The bitsandbytes 4-bit serialization of a quantized base (qbase_bnb.h). */
#include "qbase_bnb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kernels/cpu/dyn8.h"
#include "kernels/cpu/nf4.h"
#include "lib/core/fileio.h"
#include "lib/core/json.h"

#define STATE ".quant_state.bitsandbytes__nf4"
#define COMPUTE_DTYPE "bfloat16" /* what the quant_state names as the weight's dtype */

/* A linear weight's serialized tensors, in the order zt writes them. */
enum { CODES, ABSMAX, QUANT_MAP, NESTED_ABSMAX, NESTED_QUANT_MAP, QUANT_STATE, NTENSORS };
static const char *const suffix[NTENSORS] = {"", ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map", STATE};

int zt_qbase_bnb_is_state(const char *name)
{
    size_t n = strlen(name);
    for (int i = ABSMAX; i < NTENSORS; i++) {
        size_t k = strlen(suffix[i]);
        if (n > k && !strcmp(name + n - k, suffix[i])) {
            char weight[256];
            snprintf(weight, sizeof weight, "%.*s", (int)(n - k), name);
            return zt_qbase_is_linear(weight);
        }
    }
    return 0;
}

/* ---- config.json --------------------------------------------------------------------------- */

static const cJSON *item(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

/* quantization_config qc of the file at path, checked: a bitsandbytes 4-bit NF4 checkpoint. */
static zt_status check_config(const char *path, const cJSON *qc, int *double_quant)
{
    const cJSON *method = item(qc, "quant_method"), *l8 = item(qc, "load_in_8bit"), *l4 = item(qc, "load_in_4bit");
    const cJSON *type = item(qc, "bnb_4bit_quant_type"), *dq = item(qc, "bnb_4bit_use_double_quant");
    const cJSON *storage = item(qc, "bnb_4bit_quant_storage");
    if (!cJSON_IsString(method) || strcmp(method->valuestring, "bitsandbytes"))
        return zt_fail(ZT_EUSER,
                       "'%s': quantization_config.quant_method is %s: zt reads bitsandbytes 4-bit (NF4) checkpoints "
                       "only",
                       path, cJSON_IsString(method) ? method->valuestring : "missing");
    if (cJSON_IsTrue(l8) || !cJSON_IsTrue(l4))
        return zt_fail(ZT_EUSER,
                       "'%s': quantization_config: an 8-bit bitsandbytes checkpoint (load_in_4bit is not true): zt "
                       "reads 4-bit (NF4) ones only",
                       path);
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "nf4")) /* transformers' default is fp4 */
        return zt_fail(ZT_EUSER, "'%s': quantization_config.bnb_4bit_quant_type is %s: zt reads \"nf4\" only", path,
                       cJSON_IsString(type) ? type->valuestring : "missing (fp4)");
    if (dq && !cJSON_IsBool(dq))
        return zt_fail(ZT_EUSER, "'%s': quantization_config.bnb_4bit_use_double_quant must be true or false", path);
    if (storage && (!cJSON_IsString(storage) || strcmp(storage->valuestring, "uint8")))
        return zt_fail(ZT_EUSER, "'%s': quantization_config.bnb_4bit_quant_storage must be \"uint8\"", path);
    *double_quant = cJSON_IsTrue(dq);
    return ZT_OK;
}

zt_status zt_qbase_bnb_config(const char *config_path, int *nf4, int *double_quant)
{
    cJSON *o;
    *nf4 = *double_quant = 0;
    zt_status st = zt_json_read(config_path, &o);
    if (st) return st;
    const cJSON *qc = item(o, "quantization_config");
    if (qc && !cJSON_IsNull(qc))
        st = cJSON_IsObject(qc) ? check_config(config_path, qc, double_quant)
                                : zt_fail(ZT_EUSER, "'%s': quantization_config is not an object", config_path);
    *nf4 = !st && qc && cJSON_IsObject(qc);
    cJSON_Delete(o);
    return st;
}

/* config.json's quantization_config set to bitsandbytes' NF4, its other keys and numbers as they were */
zt_status zt_qbase_bnb_write_config(const char *path, int double_quant)
{
    cJSON *o, *qc = cJSON_CreateObject();
    zt_status st = qc ? zt_json_read(path, &o) : zt_fail(ZT_ENOMEM, "out of memory writing '%s'", path);
    if (st) {
        cJSON_Delete(qc);
        return st;
    }
    cJSON_AddStringToObject(qc, "quant_method", "bitsandbytes");
    cJSON_AddBoolToObject(qc, "load_in_4bit", 1);
    cJSON_AddBoolToObject(qc, "load_in_8bit", 0);
    cJSON_AddStringToObject(qc, "bnb_4bit_quant_type", "nf4");
    cJSON_AddBoolToObject(qc, "bnb_4bit_use_double_quant", double_quant);
    cJSON_AddStringToObject(qc, "bnb_4bit_compute_dtype", COMPUTE_DTYPE);
    cJSON_AddStringToObject(qc, "bnb_4bit_quant_storage", "uint8");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "quantization_config");
    if (!cJSON_AddItemToObject(o, "quantization_config", qc)) {
        cJSON_Delete(qc);
        st = zt_fail(ZT_ENOMEM, "out of memory writing '%s'", path);
    }
    if (!st) st = zt_json_write(path, o);
    cJSON_Delete(o);
    return st;
}

/* ---- reading ------------------------------------------------------------------------------- */

enum { ANY_LENGTH = -1 };

/* Tensor name + suffix[i] of r with the dtype and bytes given (or ANY_LENGTH), into *t. */
static zt_status need(zt_st_reader *r, const char *name, int i, zt_st_dtype dtype, size_t nbytes,
                      const zt_st_tensor **t)
{
    char full[320];
    snprintf(full, sizeof full, "%s%s", name, suffix[i]);
    const char *where = zt_st_count(r) ? zt_st_get(r, 0)->file : "model";
    if (!(*t = zt_st_find(r, full))) {
        snprintf(full, sizeof full, "%s.quant_state.bitsandbytes__fp4", name);
        if (i == QUANT_STATE && zt_st_find(r, full))
            return zt_fail(ZT_EUSER, "'%s': '%s' is quantized as fp4: zt reads NF4 only", where, name);
        snprintf(full, sizeof full, "%s%s", name, suffix[i]);
        return zt_fail(ZT_EUSER, "'%s': missing tensor '%s'", where, full);
    }
    if ((*t)->dtype != dtype || (nbytes != (size_t)ANY_LENGTH && (*t)->nbytes != nbytes))
        return zt_fail(ZT_EUSER, "'%s': tensor '%s' is %s of %zu bytes, not %s of %zu bytes", (*t)->file, full,
                       zt_st_dtype_name((*t)->dtype), (*t)->nbytes, zt_st_dtype_name(dtype), nbytes);
    return ZT_OK;
}

/* The quant_state's JSON, checked against the weight's shape and q; its nested_offset into *offset. */
static zt_status check_state(const zt_qbase *q, const zt_st_tensor *t, size_t rows, size_t cols, float *offset)
{
    cJSON *o = cJSON_ParseWithLength(t->data, t->nbytes);
    const cJSON *type = item(o, "quant_type"), *block = item(o, "blocksize"), *shape = item(o, "shape");
    const cJSON *nb = item(o, "nested_blocksize"), *off = item(o, "nested_offset");
    zt_status st = ZT_OK;
    if (!o || !cJSON_IsString(type) || strcmp(type->valuestring, "nf4") || !cJSON_IsNumber(block) ||
        block->valuedouble != ZT_NF4_BLOCK)
        st = zt_fail(ZT_EUSER, "'%s': tensor '%s' is not an NF4 quant_state with blocks of %d", t->file, t->name,
                     ZT_NF4_BLOCK);
    else if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) != 2 ||
             cJSON_GetArrayItem(shape, 0)->valuedouble != (double)rows ||
             cJSON_GetArrayItem(shape, 1)->valuedouble != (double)cols)
        st = zt_fail(ZT_EUSER, "'%s': tensor '%s': the weight's shape is not [%zu, %zu]", t->file, t->name, rows, cols);
    else if ((off != NULL) != q->double_quant)
        st = zt_fail(ZT_EUSER, "'%s': tensor '%s': the weight is %s double quantization, and lora.double_quant is %s",
                     t->file, t->name, off ? "stored with" : "stored without", q->double_quant ? "true" : "false");
    else if (off && (!cJSON_IsNumber(off) || !cJSON_IsNumber(nb) || nb->valuedouble != ZT_NF4_DQ_BLOCK))
        st = zt_fail(ZT_EUSER, "'%s': tensor '%s': nested_offset and nested_blocksize %d expected", t->file, t->name,
                     ZT_NF4_DQ_BLOCK);
    *offset = off && cJSON_IsNumber(off) ? (float)off->valuedouble : 0;
    cJSON_Delete(o);
    return st;
}

zt_status zt_qbase_bnb_read(const zt_qbase *q, zt_st_reader *r, const char *name, size_t rows, size_t cols, void *part)
{
    if (q->kind != ZT_QBASE_NF4)
        return zt_fail(ZT_EUSER, "'%s' is stored as bitsandbytes NF4: lora.quantize_base must be \"nf4\"", name);
    size_t n = rows * cols, nb = zt_nf4_blocks(n), ndq = zt_nf4_dq_blocks(nb), codes, scales, scales2;
    int dq = q->double_quant;
    const zt_st_tensor *t[NTENSORS] = {0};
    float offset = 0;
    zt_status st = need(r, name, QUANT_STATE, ZT_ST_U8, (size_t)ANY_LENGTH, &t[QUANT_STATE]);
    if (!st) st = check_state(q, t[QUANT_STATE], rows, cols, &offset);
    if (!st) st = need(r, name, CODES, ZT_ST_U8, (n + 1) / 2, &t[CODES]);
    if (!st) st = need(r, name, ABSMAX, dq ? ZT_ST_U8 : ZT_ST_F32, dq ? nb : nb * sizeof(float), &t[ABSMAX]);
    if (!st) st = need(r, name, QUANT_MAP, ZT_ST_F32, sizeof zt_nf4_code, &t[QUANT_MAP]);
    if (!st && dq) st = need(r, name, NESTED_ABSMAX, ZT_ST_F32, ndq * sizeof(float), &t[NESTED_ABSMAX]);
    if (!st && dq) st = need(r, name, NESTED_QUANT_MAP, ZT_ST_F32, sizeof zt_dyn8_code, &t[NESTED_QUANT_MAP]);
    if (!st && memcmp(t[QUANT_MAP]->data, zt_nf4_code, sizeof zt_nf4_code))
        st = zt_fail(ZT_EUSER, "'%s': tensor '%s': not the NF4 code table", t[QUANT_MAP]->file, t[QUANT_MAP]->name);
    if (!st && dq && memcmp(t[NESTED_QUANT_MAP]->data, zt_dyn8_code, sizeof zt_dyn8_code))
        st = zt_fail(ZT_EUSER, "'%s': tensor '%s': not the signed dynamic 8-bit code", t[NESTED_QUANT_MAP]->file,
                     t[NESTED_QUANT_MAP]->name);
    if (st) return st;
    unsigned char *p = part;
    zt_qbase_part_layout(q, rows, cols, &codes, &scales, &scales2);
    memset(p, 0, zt_qbase_tensor_elems(q, rows, cols) * sizeof(zt_real));
    memcpy(p + codes, t[CODES]->data, t[CODES]->nbytes);
    memcpy(p + scales, t[ABSMAX]->data, t[ABSMAX]->nbytes);
    if (dq) memcpy(p + scales2, t[NESTED_ABSMAX]->data, t[NESTED_ABSMAX]->nbytes);
    zt_qbase_write_header(q, p, rows, cols, offset);
    for (int i = 0; i < NTENSORS; i++)
        if (t[i]) zt_st_release(t[i]); /* a model larger than memory is read a unit at a time */
    return ZT_OK;
}

/* ---- writing ------------------------------------------------------------------------------- */

typedef struct bnb_weight bnb_weight;

/* One serialized tensor: what the safetensors writer's fill gets. */
typedef struct bnb_tensor {
    zt_qbase_bnb_writer *b;
    int weight, what;
} bnb_tensor;

struct bnb_weight {
    char *name;
    size_t rows, cols;
    bnb_tensor t[NTENSORS];
};

struct zt_qbase_bnb_writer {
    const zt_qbase *q;
    zt_st_writer *w;
    zt_qbase_encode_fn encode;
    void *ctx;
    bnb_weight **v;
    int n, cap;
    int current; /* the weight whose encoding part holds, or -1 */
    unsigned char *part;
    size_t part_bytes;
    zt_status error; /* the encode that failed: the fills after it fail with it */
};

zt_status zt_qbase_bnb_writer_new(zt_qbase_bnb_writer **out, const zt_qbase *q, zt_st_writer *w,
                                  zt_qbase_encode_fn encode, void *ctx)
{
    ZT_ASSERT(q->kind == ZT_QBASE_NF4);
    zt_qbase_bnb_writer *b = calloc(1, sizeof *b);
    if (!b) return zt_fail(ZT_ENOMEM, "out of memory");
    *b = (zt_qbase_bnb_writer){.q = q, .w = w, .encode = encode, .ctx = ctx, .current = -1};
    *out = b;
    return ZT_OK;
}

void zt_qbase_bnb_writer_free(zt_qbase_bnb_writer *b)
{
    if (!b) return;
    for (int i = 0; i < b->n; i++) free(b->v[i]->name), free(b->v[i]);
    free(b->v);
    free(b->part);
    free(b);
}

/* The quant_state's JSON; the offset printed in a fixed width, so that its length is known before
 * the weight is encoded (a float's %.9e: d.ddddddddde±XX, 9 significant digits recover it). */
static size_t state_json(const zt_qbase *q, const bnb_weight *x, float offset, char *out, size_t cap)
{
    int n = snprintf(out, cap, "{\"quant_type\": \"nf4\", \"blocksize\": %d, \"dtype\": \"%s\", \"shape\": [%zu, %zu]",
                     ZT_NF4_BLOCK, COMPUTE_DTYPE, x->rows, x->cols);
    if (q->double_quant)
        n += snprintf(out + n, cap - (size_t)n,
                      ", \"nested_blocksize\": %d, \"nested_dtype\": \"float32\", \"nested_offset\": %.9e",
                      ZT_NF4_DQ_BLOCK, (double)offset);
    n += snprintf(out + n, cap - (size_t)n, "}");
    ZT_ASSERT((size_t)n < cap);
    return (size_t)n;
}

/* Weight i's encoding in b->part. */
static zt_status encoded(zt_qbase_bnb_writer *b, int i)
{
    if (b->current == i || b->error) return b->error;
    const bnb_weight *x = b->v[i];
    size_t bytes = zt_qbase_tensor_elems(b->q, x->rows, x->cols) * sizeof(zt_real);
    if (bytes > b->part_bytes) {
        free(b->part);
        b->part = malloc(bytes);
        b->part_bytes = b->part ? bytes : 0;
        if (!b->part) return b->error = zt_fail(ZT_ENOMEM, "out of memory encoding '%s'", x->name);
    }
    b->current = -1;
    if ((b->error = b->encode(b->ctx, x->name, x->rows, x->cols, b->part))) return b->error;
    b->current = i;
    return ZT_OK;
}

static zt_status fill(void *ctx, void *dst, size_t offset, size_t n)
{
    const bnb_tensor *t = ctx;
    zt_qbase_bnb_writer *b = t->b;
    const bnb_weight *x = b->v[t->weight];
    size_t codes, scales, scales2;
    zt_qbase_part_layout(b->q, x->rows, x->cols, &codes, &scales, &scales2);
    const unsigned char *src;
    char json[512];
    if (t->what == QUANT_MAP) src = (const unsigned char *)zt_nf4_code;
    else if (t->what == NESTED_QUANT_MAP) src = (const unsigned char *)zt_dyn8_code;
    else {
        zt_status st = encoded(b, t->weight);
        if (st) return st;
        if (t->what == QUANT_STATE) state_json(b->q, x, zt_qbase_part_offset(b->part), json, sizeof json);
        src = t->what == QUANT_STATE ? (const unsigned char *)json
              : t->what == CODES     ? b->part + codes
              : t->what == ABSMAX    ? b->part + scales
                                     : b->part + scales2;
    }
    memcpy(dst, src + offset, n);
    return ZT_OK;
}

zt_status zt_qbase_bnb_add(zt_qbase_bnb_writer *b, const char *name, size_t rows, size_t cols)
{
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        bnb_weight **v = realloc(b->v, (size_t)cap * sizeof *v);
        if (!v) return zt_fail(ZT_ENOMEM, "out of memory");
        b->v = v, b->cap = cap;
    }
    bnb_weight *x = calloc(1, sizeof *x);
    if (!x || !(x->name = strdup(name))) {
        free(x);
        return zt_fail(ZT_ENOMEM, "out of memory");
    }
    x->rows = rows, x->cols = cols;
    int i = b->n++;
    b->v[i] = x;
    size_t n = rows * cols, nb = zt_nf4_blocks(n);
    char json[512];
    const int64_t shape[NTENSORS][2] = {
        {(int64_t)(n + 1) / 2, 1},       {(int64_t)nb}, {16},
        {(int64_t)zt_nf4_dq_blocks(nb)}, {256},         {(int64_t)state_json(b->q, x, 0, json, sizeof json)}};
    const zt_st_dtype dtype[NTENSORS] = {ZT_ST_U8,  b->q->double_quant ? ZT_ST_U8 : ZT_ST_F32,
                                         ZT_ST_F32, ZT_ST_F32,
                                         ZT_ST_F32, ZT_ST_U8};
    zt_status st = ZT_OK;
    for (int k = 0; k < NTENSORS && !st; k++) {
        if (!b->q->double_quant && (k == NESTED_ABSMAX || k == NESTED_QUANT_MAP)) continue;
        char full[320];
        snprintf(full, sizeof full, "%s%s", name, suffix[k]);
        x->t[k] = (bnb_tensor){b, i, k};
        st = zt_st_writer_add_bytes_fn(b->w, full, dtype[k], shape[k], k == CODES ? 2 : 1, fill, &x->t[k]);
    }
    return st;
}
