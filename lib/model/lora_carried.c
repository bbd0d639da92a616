/* An adapter's adapters on the tensors an image-text model carries through (lora.h: zt_lora.carried;
 * llama_io.c copies those tensors on every save): zt export --merge writes them merged, W + s·B·A,
 * as PEFT's merge_and_unload() merges every adapter it made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ckpt/safetensors.h"
#include "lib/core/fileio.h"
#include "lora.h"

typedef struct carried_merge {
    const zt_st_tensor *w;
    float *a, *b; /* A [r, cols], B [rows, r] */
    int r;
    size_t cols;
    double scale;
} carried_merge;

zt_status zt_lora_carried_open(zt_lora_carried *lc, const zt_llama *m, const char *dir)
{
    char path[4096];
    memset(lc, 0, sizeof *lc);
    if (!m->lora || !m->lora->carried) return ZT_OK;
    if (m->lora->cfg.method == ZT_LORA_METHOD_DORA)
        return zt_fail(ZT_EUSER, "'%s': DoRA adapters on the vision tower cannot be merged by zt yet", dir);
    lc->scale = m->lora->scale;
    zt_status st = zt_path_join(path, sizeof path, dir, "adapter_model.safetensors");
    return st ? st : zt_st_open(&lc->rd, path);
}

void zt_lora_carried_close(zt_lora_carried *lc)
{
    for (int i = 0; i < lc->n; i++) free(lc->merges[i].a), free(lc->merges[i].b);
    free(lc->merges);
    if (lc->rd) zt_st_close(lc->rd);
    memset(lc, 0, sizeof *lc);
}

/* the adapter's `which` ('A' or 'B') of base weight name ("x.weight"), or NULL */
static const zt_st_tensor *adapter_of(const zt_lora_carried *lc, const char *name, char which)
{
    char full[512];
    size_t n = strlen(name), k = strlen(".weight");
    if (n <= k || strcmp(name + n - k, ".weight")) return NULL;
    snprintf(full, sizeof full, "base_model.model.%.*s.lora_%c.weight", (int)(n - k), name, which);
    return zt_st_find(lc->rd, full);
}

static zt_status read_floats(const zt_st_tensor *t, const int64_t *shape, float **out)
{
    *out = malloc((size_t)(shape[0] * shape[1]) * sizeof **out);
    if (!*out) return zt_fail(ZT_ENOMEM, "out of memory merging '%s'", t->name);
    return zt_st_read_into(t, *out, ZT_F32, shape, 2);
}

/* elements [offset, offset + n) of W + s·B·A */
static zt_status fill_merged(void *ctx, float *dst, size_t offset, size_t n)
{
    const carried_merge *c = ctx;
    size_t size = zt_st_dtype_size(c->w->dtype);
    zt_st_tensor part = *c->w;
    part.data = (const char *)c->w->data + offset * size, part.nbytes = n * size;
    zt_status st = zt_st_read_into(&part, dst, ZT_F32, NULL, 1);
    for (size_t e = offset; !st && e < offset + n; e++) {
        size_t i = e / c->cols, j = e % c->cols;
        float d = 0;
        for (int k = 0; k < c->r; k++) d += c->b[i * c->r + k] * c->a[(size_t)k * c->cols + j];
        dst[e - offset] += (float)(c->scale * d);
    }
    return st;
}

zt_status zt_lora_carried_add(zt_lora_carried *lc, zt_st_writer *w, const zt_st_tensor *t, int *added)
{
    *added = 0;
    const zt_st_tensor *a = lc->rd ? adapter_of(lc, t->name, 'A') : NULL, *b = a ? adapter_of(lc, t->name, 'B') : NULL;
    if (!a) return ZT_OK;
    zt_dtype out = ZT_F32;
    if (t->dtype == ZT_ST_BF16) out = ZT_BF16;
    else if (t->dtype == ZT_ST_F16) out = ZT_F16;
    else if (t->dtype != ZT_ST_F32)
        return zt_fail(ZT_EUSER, "'%s': tensor '%s' (%s) cannot take its adapter's merge", t->file, t->name,
                       zt_st_dtype_name(t->dtype));
    if (!b || t->ndim != 2 || a->ndim != 2 || b->ndim != 2 || a->shape[1] != t->shape[1] ||
        b->shape[0] != t->shape[0] || b->shape[1] != a->shape[0] || a->shape[0] < 1)
        return zt_fail(ZT_EUSER, "'%s': the adapter of '%s' is not an A [r, %lld] and a B [%lld, r]", a->file, t->name,
                       (long long)t->shape[1], (long long)t->shape[0]);
    if (lc->n == lc->cap) {
        int cap = lc->cap ? 2 * lc->cap : 16;
        carried_merge *more = realloc(lc->merges, (size_t)cap * sizeof *more);
        if (!more) return zt_fail(ZT_ENOMEM, "out of memory merging '%s'", t->name);
        lc->merges = more, lc->cap = cap;
    }
    carried_merge *c = &lc->merges[lc->n++];
    *c = (carried_merge){.w = t, .r = (int)a->shape[0], .cols = (size_t)t->shape[1], .scale = lc->scale};
    zt_status st = read_floats(a, a->shape, &c->a);
    if (!st) st = read_floats(b, b->shape, &c->b);
    if (!st) st = zt_st_writer_add_fn(w, t->name, out, t->shape, t->ndim, fill_merged, c);
    *added = !st;
    return st;
}
