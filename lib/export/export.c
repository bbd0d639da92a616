/* zt export: checkpoint shards (or a model directory, a bitsandbytes NF4 one decoded) → a Hugging
 * Face directory, one tensor at a time through the safetensors writer's fill callback. */
#define _GNU_SOURCE
#include "export.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ckpt/safetensors.h"
#include "lib/ckpt/state.h"
#include "lib/core/fileio.h"
#include "lib/export/gguf_model.h"
#include "lib/model/generation_config.h"
#include "lib/model/llama.h"
#include "lib/model/lora.h"
#include "lib/model/open.h"
#include "lib/model/qbase.h"
#include "lib/model/qbase_bnb.h"
#include "lib/model/qbase_decode.h"

static int has_file(const char *dir, const char *name)
{
    char path[4096];
    return !zt_path_join(path, sizeof path, dir, name) && zt_path_exists(path);
}

/* What src names: a checkpoint (*is_ckpt = 1) or a model directory, into info->source. */
static zt_status resolve_source(const char *src, zt_export_info *info, int *is_ckpt)
{
    int found = 0;
    zt_status st = ZT_OK;
    *is_ckpt = 0;
    info->step = -1;
    if (has_file(src, "trainer_state.json") || has_file(src, "DONE")) {
        if (!zt_state_is_done(src))
            return zt_fail(ZT_EUSER, "'%s': incomplete checkpoint (no DONE marker: its save did not finish)", src);
        *is_ckpt = 1;
        snprintf(info->source, sizeof info->source, "%s", src);
    } else if (has_file(src, "checkpoints") || has_file(src, "final")) {
        if ((st = zt_state_latest(src, info->source, sizeof info->source, &found))) return st;
        *is_ckpt = found;
        if (!found && (st = zt_path_join(info->source, sizeof info->source, src, "final"))) return st;
        if (!found && !has_file(info->source, "config.json") && !has_file(info->source, "adapter_config.json"))
            return zt_fail(ZT_EUSER, "'%s': the run has no complete checkpoint and no final/ model", src);
    } else if (has_file(src, "config.json")) {
        snprintf(info->source, sizeof info->source, "%s", src);
    } else {
        return zt_fail(ZT_EUSER, "'%s': %s", src,
                       zt_path_exists(src) ? "not a run, a checkpoint (trainer_state.json) or a model directory"
                                           : "no such directory");
    }
    return ZT_OK;
}

/* The source config.json's torch_dtype: bf16 for "bfloat16", fp32 otherwise. */
static zt_status default_dtype(const char *config_path, zt_dtype *dt)
{
    char *text;
    size_t len;
    zt_status st = zt_read_file(config_path, &text, &len);
    if (st) return st;
    cJSON *o = cJSON_ParseWithLength(text, len);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "torch_dtype");
    *dt = cJSON_IsString(t) && !strcmp(t->valuestring, "bfloat16") ? ZT_BF16 : ZT_F32;
    cJSON_Delete(o);
    free(text);
    return ZT_OK;
}

typedef struct fill_ctx {
    const char *ckpt, *name;
    size_t numel, offset; /* the tensor's first element in the flat array */
} fill_ctx;

static zt_status fill_from_shards(void *ctx, float *dst, size_t offset, size_t n)
{
    const fill_ctx *c = ctx;
    zt_status st = zt_state_read_range(c->ckpt, c->numel, c->offset + offset, n, dst, NULL, NULL);
    return st ? zt_fail_context(st, "tensor '%s'", c->name) : ZT_OK;
}

/* Queues the checkpoint's master weights, tensor by tensor (ctx: one entry per tensor),
 * after checking its state and every shard; *step gets its step. */
static zt_status add_from_checkpoint(zt_st_writer *w, const char *ckpt, zt_dtype dt, const zt_llama_tensor *t, int n,
                                     fill_ctx *ctx, size_t numel, long *step)
{
    zt_trainer_state s;
    zt_status st = zt_state_read_json(ckpt, &s);
    if (st) return st;
    if (s.numel != numel)
        return zt_fail(ZT_EUSER, "'%s/trainer_state.json': %zu parameters, but its config.json describes %zu", ckpt,
                       s.numel, numel);
    /* every shard's header and size, before any output is written */
    if ((st = zt_state_read_range(ckpt, numel, 0, numel, NULL, NULL, NULL))) return st;
    *step = s.step;
    for (int i = 0; i < n && !st; i++) {
        ctx[i] = (fill_ctx){ckpt, t[i].name, numel, t[i].offset};
        st = zt_st_writer_add_fn(w, t[i].name, dt, t[i].shape, t[i].ndim, fill_from_shards, &ctx[i]);
    }
    return st;
}

static int st_to_dtype(zt_st_dtype s, zt_dtype *d)
{
    switch (s) {
    case ZT_ST_F32: *d = ZT_F32; return 1;
    case ZT_ST_BF16: *d = ZT_BF16; return 1;
    case ZT_ST_F16: *d = ZT_F16; return 1;
    case ZT_ST_F64: *d = ZT_F64; return 1;
    default: return 0;
    }
}

/* Queues the model directory's tensors (read through its mapping), those the config
 * describes, in the layout's order; extra ones (rotary tables, a tied head) are dropped. */
static zt_status add_from_model(zt_st_writer *w, const zt_st_reader *r, const char *dir, zt_dtype dt,
                                const zt_llama_tensor *t, int n)
{
    zt_status st = ZT_OK;
    for (int i = 0; i < n && !st; i++) {
        const zt_st_tensor *x = zt_st_find(r, t[i].name);
        zt_dtype sd;
        if (!x) return zt_fail(ZT_EUSER, "'%s': missing tensor '%s'", dir, t[i].name);
        int same = x->ndim == t[i].ndim;
        for (int d = 0; d < t[i].ndim && same; d++) same = x->shape[d] == t[i].shape[d];
        if (!same)
            return zt_fail(ZT_EUSER, "'%s': tensor '%s' has a shape config.json does not give it", x->file, x->name);
        if (!st_to_dtype(x->dtype, &sd))
            return zt_fail(ZT_EUSER, "'%s': tensor '%s' is %s, not a floating-point type", x->file, x->name,
                           zt_st_dtype_name(x->dtype));
        if (!(st = zt_st_check_finite(x))) st = zt_st_writer_add(w, x->name, dt, x->shape, x->ndim, x->data, sd);
    }
    return st;
}

/* A bitsandbytes NF4 model directory, written as floats: each tensor read through the decoder
 * (model/qbase_decode.h) as the writer asks for it. */
typedef struct decoded_tensor {
    zt_qbase_decoder *d;
    size_t offset; /* the tensor's first element in the unquantized layout */
} decoded_tensor;

static zt_status fill_decoded(void *ctx, float *dst, size_t offset, size_t n)
{
    const decoded_tensor *x = ctx;
    return zt_qbase_decoder_read(x->d, x->offset + offset, n, dst);
}

static zt_status add_decoded(zt_st_writer *w, zt_qbase_decoder *d, zt_dtype dt, const zt_llama_tensor *t, int n,
                             decoded_tensor *ctx)
{
    zt_status st = ZT_OK;
    for (int i = 0; i < n && !st; i++) {
        ctx[i] = (decoded_tensor){d, t[i].offset};
        st = zt_st_writer_add_fn(w, t[i].name, dt, t[i].shape, t[i].ndim, fill_decoded, &ctx[i]);
    }
    return st;
}

/* config.json in dt, the tokenizer files, and generation_config.json (the source's, or
 * one made from its config.json) */
/* The model files of src (config.json with cfg's changes), and with an adapter (NULL: none) the
 * files it has over them: a run's final/ has the tokenizer it trained with (added tokens, the
 * chat template) and its generation config. */
static zt_status write_model_files(const char *src, const char *adapter, const char *out, const zt_llama_config *cfg,
                                   zt_dtype dt)
{
    static const char *torch_names[] = {"float32", "bfloat16", "float16", "float64"};
    char path[4096];
    zt_status st = zt_state_copy_model_files(out, src);
    if (!st && adapter) st = zt_state_copy_model_files(out, adapter);
    if (!st) st = zt_path_join(path, sizeof path, out, "config.json");
    if (!st) st = zt_llama_config_save(cfg, path, torch_names[dt]);
    if (!st && adapter && has_file(adapter, "generation_config.json")) return ZT_OK;
    if (!st) st = zt_path_join(path, sizeof path, out, "generation_config.json");
    return st ? st : zt_generation_config_write(src, cfg, NULL, 0, path);
}

/* Refuses to write into the source itself (its files would be replaced while read). */
static zt_status check_out_dir(const char *src, const char *out)
{
    char a[PATH_MAX], b[PATH_MAX];
    if (realpath(src, a) && realpath(out, b) && !strcmp(a, b))
        return zt_fail(ZT_EUSER, "'%s': the output directory is the source itself", out);
    return ZT_OK;
}

/* A LoRA run's checkpoints and final/ hold adapters, not a model: --merge exports those. */
static zt_status refuse_adapters(const char *source, int is_ckpt)
{
    zt_trainer_state s = {0};
    zt_status st = is_ckpt ? zt_state_read_json(source, &s) : ZT_OK;
    if (st) return st;
    if (s.base_hash || has_file(source, "adapter_config.json"))
        return zt_fail(ZT_EUSER, "'%s' holds LoRA adapters: export the run's final/ with --merge", source);
    return ZT_OK;
}

/* The dtype o asks for (or the source's), as written: *dt for a directory, *gt for GGUF. */
static zt_status parse_dtype(const zt_export_options *o, const char *config_path, zt_dtype *dt, zt_gguf_type *gt)
{
    zt_status st = o->dtype ? ZT_OK : default_dtype(config_path, dt);
    if (!o->dtype) *gt = *dt == ZT_BF16 ? ZT_GGUF_BF16 : ZT_GGUF_F32;
    else if (o->gguf && zt_gguf_type_parse(o->dtype, gt))
        st = zt_fail(ZT_EUSER, "dtype '%s': GGUF export writes fp32, fp16, bf16 or q8_0", o->dtype);
    else if (!o->gguf && (zt_dtype_parse(o->dtype, dt) || (*dt != ZT_F32 && *dt != ZT_BF16)))
        st = zt_fail(ZT_EUSER, "dtype '%s': export writes bf16 or fp32 (GGUF: also fp16, q8_0)", o->dtype);
    if (o->gguf) *dt = ZT_F32; /* the GGUF writer reads the source's values */
    return st;
}

/* general.name of a GGUF file: the last component of the source the user named */
static void gguf_name(const char *src, char *name, size_t cap)
{
    size_t n = strlen(src);
    while (n > 1 && src[n - 1] == '/') n--;
    size_t a = n;
    while (a > 0 && src[a - 1] != '/') a--;
    snprintf(name, cap, "%.*s", (int)(n - a), src + a);
}

/* The directory a file goes into */
static zt_status make_parent(const char *file)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    return slash && slash != dir ? (*slash = '\0', zt_mkdir_p(dir)) : ZT_OK;
}

/* The GGUF file out of the tensors w holds, the tokenizer's files from tok_dir. */
static zt_status write_gguf(const char *src, const zt_llama_config *cfg, const zt_st_writer *w, const char *tok_dir,
                            zt_gguf_type t, const char *out)
{
    char name[256];
    gguf_name(src, name, sizeof name);
    zt_status st = make_parent(out);
    return st ? st : zt_gguf_write_model(cfg, w, tok_dir, t, name, out);
}

/* The PEFT adapter directory src names (itself, or a run's final/), into info->source. */
static zt_status resolve_adapter(const char *src, zt_export_info *info)
{
    zt_status st = ZT_OK;
    info->step = -1;
    if (has_file(src, "adapter_config.json")) snprintf(info->source, sizeof info->source, "%s", src);
    else if ((st = zt_path_join(info->source, sizeof info->source, src, "final"))) return st;
    if (!has_file(info->source, "adapter_config.json"))
        return zt_fail(ZT_EUSER,
                       "'%s': --merge needs a PEFT adapter directory (adapter_config.json) or a LoRA run "
                       "whose final/ is one",
                       src);
    return ZT_OK;
}

/* The base model of the adapter in dir: --base, else the one its adapter_config.json names. */
static zt_status adapter_base(const zt_export_options *o, const char *dir, char *base_dir, size_t cap)
{
    zt_status st = ZT_OK;
    if (o->base) snprintf(base_dir, cap, "%s", o->base);
    else if ((st = zt_lora_read_base(dir, base_dir, cap))) {
        char why[1024];
        snprintf(why, sizeof why, "%s", zt_errmsg());
        zt_fail(st, "%s (give --base DIR)", why);
    }
    return st;
}

/* The adapter's tensors of reader r (PEFT's names) into w as "HF_NAME.lora_a" and ".lora_b",
 * each checked against the base's matrix (t[n]) it adapts: A [r, in], B [out, r]. */
static zt_status add_adapter(zt_st_writer *w, const zt_st_reader *r, const zt_llama_config *cfg,
                             const zt_llama_tensor *t, int n, int rank)
{
    static const char top[] = "base_model.model.";
    zt_status st = ZT_OK;
    for (int i = 0; i < zt_st_count(r) && !st; i++) {
        const zt_st_tensor *x = zt_st_get(r, i);
        size_t len = strlen(x->name), k = strlen(".lora_A.weight");
        int b = len > k && !strcmp(x->name + len - k, ".lora_B.weight");
        if (strncmp(x->name, top, strlen(top)) || len <= k || (!b && strcmp(x->name + len - k, ".lora_A.weight")))
            return zt_fail(ZT_EUSER, "'%s': tensor '%s': a GGUF adapter holds LoRA's A and B alone (merge it: --merge)",
                           x->file, x->name);
        char base[256], name[256 + 8];
        snprintf(base, sizeof base, "%.*s.weight", (int)(len - k - strlen(top)), x->name + strlen(top));
        const zt_llama_tensor *m = NULL;
        for (int j = 0; j < n && !m; j++) m = strcmp(t[j].name, base) ? NULL : &t[j];
        zt_dtype sd;
        if (!m || m->ndim != 2 || x->ndim != 2 || x->shape[b] != rank || x->shape[!b] != m->shape[!b])
            return zt_fail(ZT_EUSER, "'%s': tensor '%s' adapts no %d-rank matrix of the base model", x->file, x->name,
                           rank);
        if (!st_to_dtype(x->dtype, &sd))
            return zt_fail(ZT_EUSER, "'%s': tensor '%s' is %s, not a floating-point type", x->file, x->name,
                           zt_st_dtype_name(x->dtype));
        /* an image-text model's language model by its own names, as in its GGUF file */
        size_t p = strlen(cfg->text_prefix);
        snprintf(name, sizeof name, "%s.lora_%c", base + (strncmp(base, cfg->text_prefix, p) ? 0 : p), b ? 'b' : 'a');
        if (!(st = zt_st_check_finite(x))) st = zt_st_writer_add(w, name, ZT_F32, x->shape, x->ndim, x->data, sd);
    }
    return st;
}

/* A PEFT adapter (a LoRA run's final/) as a GGUF LoRA adapter; alpha / r its scale, rsLoRA's
 * alpha / sqrt(r) written as alpha·sqrt(r) over r. */
static zt_status export_adapter_gguf(const char *src, const char *out, const zt_export_options *o, zt_export_info *info)
{
    char base_dir[4096], config_path[4096 + 32], path[4096 + 32], name[256];
    zt_lora_config c;
    zt_llama_config cfg;
    zt_dtype dt;
    zt_gguf_type gt;
    zt_llama_tensor *t = NULL;
    zt_st_reader *r = NULL;
    int n = 0;
    zt_status st = resolve_adapter(src, info);
    if (!st) st = adapter_base(o, info->source, base_dir, sizeof base_dir);
    snprintf(config_path, sizeof config_path, "%s/config.json", base_dir);
    if (!st) st = parse_dtype(o, config_path, &dt, &gt);
    if (!st) st = zt_lora_read_config(info->source, &c);
    if (!st && (c.method != ZT_LORA_METHOD_LORA || c.save || c.n_tokens || c.score))
        st = zt_fail(ZT_EUSER, "'%s': %s: llama.cpp's adapters are LoRA's A and B alone (merge it: --merge)",
                     info->source,
                     c.method != ZT_LORA_METHOD_LORA ? "use_dora"
                     : c.n_tokens                    ? "trainable_token_indices"
                                                     : "modules_to_save");
    if (!st) st = zt_llama_config_load(&cfg, config_path);
    if (!st) st = zt_gguf_check_model(&cfg);
    if (!st) st = zt_llama_tensors(&cfg, &t, &n);
    if (!st) st = zt_path_join(path, sizeof path, info->source, "adapter_model.safetensors");
    if (!st) st = zt_st_open(&r, path);
    zt_st_writer *w = st ? NULL : zt_st_writer_new();
    if (!st && !w) st = zt_fail(ZT_ENOMEM, "out of memory exporting '%s'", info->source);
    if (!st) st = add_adapter(w, r, &cfg, t, n, c.r);
    gguf_name(src, name, sizeof name);
    double alpha = c.rslora ? c.alpha * sqrt((double)c.r) : c.alpha;
    if (!st) st = make_parent(out);
    if (!st) st = zt_gguf_write_adapter(&cfg, w, alpha, gt, name, out);
    info->numel = 0;
    for (int i = 0; w && i < zt_st_writer_count(w); i++) {
        int64_t shape[ZT_ST_MAX_DIMS];
        int nd;
        zt_st_writer_tensor(w, i, shape, &nd);
        info->numel += (size_t)(shape[0] * shape[1]);
    }
    info->dtype = zt_gguf_type_name(gt);
    zt_st_writer_free(w);
    if (r) zt_st_close(r);
    free(t);
    return st;
}

/* The merged model m as GGUF; the tokenizer the adapter trained with (a run's final/), else the base's. */
static zt_status merged_gguf(const char *src, const zt_llama *m, const char *adapter, const char *base_dir,
                             zt_gguf_type t, const char *out)
{
    zt_st_writer *w = zt_st_writer_new();
    zt_real *params = zt_llama_params_map(m);
    zt_status st = !w || !params ? zt_fail(ZT_ENOMEM, "out of memory exporting '%s'", adapter) : ZT_OK;
    if (!st) st = zt_llama_writer_add(m, w, ZT_F32, params);
    if (!st) st = write_gguf(src, &m->cfg, w, has_file(adapter, "tokenizer.json") ? adapter : base_dir, t, out);
    if (params) zt_llama_params_unmap((zt_llama *)m, params, 0);
    zt_st_writer_free(w);
    return st;
}

zt_status zt_export_merged(const char *src, const char *out_dir, const zt_export_options *o, zt_export_info *info)
{
    char base_dir[4096], config_path[4096 + 32];
    zt_lora_config c;
    zt_dtype dt;
    zt_gguf_type gt;
    zt_llama m = {0};
    zt_status st = resolve_adapter(src, info);
    if (!st) st = adapter_base(o, info->source, base_dir, sizeof base_dir);
    snprintf(config_path, sizeof config_path, "%s/config.json", base_dir);
    if (!st) st = parse_dtype(o, config_path, &dt, &gt);
    if (!st) st = zt_lora_read_config(info->source, &c);
    if (!st) st = zt_model_open_head(&m, base_dir, ZT_F32, ZT_DEVICE_CPU, c.score); /* a reward model's adapter */
    if (!st && o->gguf) st = zt_gguf_check_model(&m.cfg);
    if (!st) st = zt_lora_attach_dir(&m, info->source, ZT_QBASE_NONE, 0);
    if (!st) st = zt_lora_merge(&m);
    if (!st && o->gguf) st = merged_gguf(src, &m, info->source, base_dir, gt, out_dir);
    if (!st && !o->gguf) st = zt_mkdir_p(out_dir);
    if (!st && !o->gguf) st = check_out_dir(base_dir, out_dir);
    if (!st && !o->gguf) st = check_out_dir(info->source, out_dir);
    zt_lora_carried vision = {0}; /* an image-text model's adapters on its vision tower */
    if (!st && !o->gguf) st = zt_lora_carried_open(&vision, &m, info->source);
    if (!st && !o->gguf) st = zt_llama_save_carrying(&m, out_dir, dt, o->max_shard_bytes, &vision);
    zt_lora_carried_close(&vision);
    if (!st && !o->gguf) st = write_model_files(base_dir, info->source, out_dir, &m.cfg, dt);
    info->numel = m.numel;
    info->dtype = o->gguf ? zt_gguf_type_name(gt) : zt_dtype_name(dt);
    zt_llama_free(&m);
    return st;
}

/* The source of the tensors an image-text model carries through (llama.h: zt_llama_passes_through):
 * the model directory itself; for a checkpoint, which has the language model alone, base. */
static zt_status passed_through_source(zt_llama_config *cfg, const char *source, int is_ckpt, const char *base)
{
    if (!cfg->image_text || !is_ckpt)
        return base ? zt_fail(ZT_EUSER, "--base goes with --merge, or with a checkpoint of an image-text model")
                    : ZT_OK;
    if (!base)
        return zt_fail(ZT_EUSER,
                       "'%s' holds the language model of an image-text model alone: give --base DIR, the model it "
                       "was trained from, whose vision tower the export carries",
                       source);
    if (snprintf(cfg->path, sizeof cfg->path, "%s/config.json", base) >= (int)sizeof cfg->path)
        return zt_fail(ZT_EUSER, "--base '%s': the path is too long", base);
    if (!zt_path_exists(cfg->path)) return zt_fail(ZT_EUSER, "--base '%s' has no config.json", base);
    return ZT_OK;
}

zt_status zt_export(const char *src, const char *out_dir, const zt_export_options *o, zt_export_info *info)
{
    const char *base = o->base;
    char config_path[4096];
    int is_ckpt, n = 0;
    zt_dtype dt = ZT_F32;
    zt_gguf_type gt;
    zt_llama_config cfg;
    zt_llama shape;
    zt_llama_tensor *t = NULL;
    char final[4096 + 8];
    snprintf(final, sizeof final, "%s/final", src);
    if (o->gguf && (has_file(src, "adapter_config.json") || has_file(final, "adapter_config.json")))
        return export_adapter_gguf(src, out_dir, o, info);
    zt_status st = resolve_source(src, info, &is_ckpt);
    if (!st) st = refuse_adapters(info->source, is_ckpt);
    if (!st) st = zt_path_join(config_path, sizeof config_path, info->source, "config.json");
    if (!st) st = zt_llama_config_load(&cfg, config_path);
    if (!st && o->gguf) st = zt_gguf_check_model(&cfg);
    if (!st && o->gguf && cfg.image_text && base) /* the vision tower stays out */
        st = zt_fail(ZT_EUSER, "--base: a GGUF file holds the language model alone, which '%s' has", info->source);
    else if (!st && !(o->gguf && cfg.image_text)) st = passed_through_source(&cfg, info->source, is_ckpt, base);
    if (!st) st = parse_dtype(o, config_path, &dt, &gt);
    if (!st) st = zt_llama_shape(&shape, &cfg, zt_backend_cpu(), ZT_F32);
    if (!st) st = zt_llama_tensors(&cfg, &t, &n);
    if (st) return st;
    info->numel = shape.numel;
    info->dtype = o->gguf ? zt_gguf_type_name(gt) : zt_dtype_name(dt);

    zt_st_writer *w = zt_st_writer_new();
    fill_ctx *ctx = calloc((size_t)n, sizeof *ctx);
    decoded_tensor *dctx = calloc((size_t)n, sizeof *dctx);
    zt_qbase_decoder *d = NULL;
    zt_st_reader *r = NULL, *vision = NULL;
    int nf4 = 0, double_quant = 0;
    if (!w || !ctx || !dctx) st = zt_fail(ZT_ENOMEM, "out of memory exporting '%s'", info->source);
    if (!st && is_ckpt) st = add_from_checkpoint(w, info->source, dt, t, n, ctx, shape.numel, &info->step);
    if (!st && !is_ckpt) st = zt_qbase_bnb_config(config_path, &nf4, &double_quant);
    shape.tensors = t, shape.n_tensors = n; /* the decoder reads the unquantized layout's tensors */
    if (!st && !is_ckpt && nf4 && !(st = zt_qbase_decoder_open(&d, &shape, info->source, double_quant)))
        st = add_decoded(w, d, dt, t, n, dctx);
    if (!st && !is_ckpt && !nf4 && !(st = zt_st_open(&r, info->source)))
        st = add_from_model(w, r, info->source, dt, t, n);
    if (!st && o->gguf) st = write_gguf(src, &cfg, w, info->source, gt, out_dir);
    if (!st && !o->gguf) st = zt_llama_add_passed_through(&cfg, w, &vision, NULL);
    if (!st && !o->gguf) st = zt_mkdir_p(out_dir);
    if (!st && !o->gguf) st = check_out_dir(info->source, out_dir);
    if (!st && !o->gguf && base) st = check_out_dir(base, out_dir);
    if (!st && !o->gguf) st = zt_st_writer_finish(w, out_dir, o->max_shard_bytes);
    if (!st && !o->gguf) st = write_model_files(info->source, NULL, out_dir, &cfg, dt);
    if (vision) zt_st_close(vision);
    if (r) zt_st_close(r);
    zt_qbase_decoder_close(d);
    zt_st_writer_free(w);
    free(ctx);
    free(dctx);
    free(t);
    return st;
}
