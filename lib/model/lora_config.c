/* adapter_config.json of a PEFT adapter directory read into a zt_lora_config (lora.h:
 * zt_lora_read_config, zt_lora_read_base): what zt trains exactly, or a one-line refusal naming
 * the file and the key. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lora.h"

static zt_status bad_config(const char *path, const char *key, const char *why)
{
    return zt_fail(ZT_EUSER, "'%s': '%s' %s", path, key, why);
}

/* One entry of target_modules: a module name (that module in every layer), or one layer's module
 * by its path, as PEFT saves "all-linear" ("model.layers.3.mlp.down_proj", in an image-text
 * checkpoint "language_model.model.layers.3.mlp.down_proj", a shared expert's
 * "model.layers.3.mlp.shared_expert.down_proj"): the module, its layer in *layer (-1: every
 * layer); -1 for neither. */
static int target_of(const cJSON *e, int *layer)
{
    const char *s = cJSON_IsString(e) ? e->valuestring : "";
    int mod = zt_lora_module_of(s), l, n = 0;
    char block[10];
    *layer = -1;
    if (mod >= 0) return mod;
    s = zt_llama_text_name(s);
    if (sscanf(s, "model.layers.%9d.%9[a-z_].%n", &l, block, &n) != 2 || !n || l < 0) return -1;
    const char *shared = "shared_expert.";
    int in_shared = !strncmp(s + n, shared, strlen(shared));
    mod = zt_lora_module_of(s + n + (in_shared ? strlen(shared) : 0));
    if (in_shared) mod = mod >= ZT_LORA_GATE && mod <= ZT_LORA_DOWN ? mod - ZT_LORA_GATE + ZT_LORA_SHARED_GATE : -1;
    if (mod < 0 || strcmp(block, zt_lora_in_attention(mod) ? "self_attn" : "mlp")) return -1;
    *layer = l;
    return mod;
}

/* target_modules: a list of module names or of layers' module paths, "all-linear", or another
 * string: a regular expression (zt_lora_pattern_targets). A module given by paths must be in
 * layers 0 to k - 1, each once (c->layers_named: k). */
static zt_status parse_targets(const char *path, const cJSON *t, zt_lora_config *c)
{
    c->targets = 0;
    if (cJSON_IsString(t) && !strcmp(t->valuestring, "all-linear")) {
        c->targets = ZT_LORA_ALL;
        return ZT_OK;
    }
    if (cJSON_IsString(t)) {
        char where[4096 + 8];
        snprintf(where, sizeof where, "'%s'", path);
        if (strlen(t->valuestring) >= sizeof c->target_pattern)
            return bad_config(path, "target_modules", "is a pattern longer than 2047 bytes");
        snprintf(c->target_pattern, sizeof c->target_pattern, "%s", t->valuestring);
        return zt_lora_pattern_targets(where, c->target_pattern, NULL, 1, &c->targets);
    }
    if (!cJSON_IsArray(t) || !cJSON_GetArraySize(t))
        return bad_config(path, "target_modules", "must be \"all-linear\", a list of module names or a pattern");
    const cJSON *e;
    unsigned every = 0; /* modules named alone: in every layer */
    int layer, mod;
    const char *what = "is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, qkv_proj, "
                       "gate_up_proj, gate, shared_expert_gate, w1, w2, w3 (or such a module's path "
                       "model.layers.N.self_attn|mlp.NAME)";
    cJSON_ArrayForEach(e, t)
    {
        mod = target_of(e, &layer);
        if (mod < 0 && cJSON_IsString(e) && e->valuestring[0] &&
            strncmp(zt_llama_text_name(e->valuestring), "model.", strlen("model."))) {
            /* another module's name, outside the language model: the vision tower's ("fc1", Qwen2.5-VL's
               "attn.proj"), if the model has one (zt_lora_attach) */
            if (!c->other_target[0]) snprintf(c->other_target, sizeof c->other_target, "%.63s", e->valuestring);
            continue;
        }
        if (mod < 0)
            return zt_fail(ZT_EUSER, "'%s': 'target_modules': '%.200s' %s", path,
                           cJSON_IsString(e) ? e->valuestring : "(not a string)", what);
        c->targets |= 1u << mod;
        every |= (layer < 0) << mod;
        c->layers_named[mod] += layer >= 0;
    }
    if (!c->targets) /* other modules' names alone: none of a language model's */
        return zt_fail(ZT_EUSER, "'%s': 'target_modules': '%s' %s", path, c->other_target, what);
    for (mod = 0; mod < ZT_LORA_NMODULES; mod++) {
        int k = c->layers_named[mod], once = 1;
        if ((every >> mod) & 1) c->layers_named[mod] = k = 0;
        if (!k) continue;
        char *seen = calloc((size_t)k, 1);
        if (!seen) return zt_fail(ZT_ENOMEM, "out of memory reading '%s'", path);
        cJSON_ArrayForEach(e, t)
        {
            if (target_of(e, &layer) == mod) once &= layer < k && !seen[layer]++;
        }
        free(seen);
        if (!once)
            return zt_fail(ZT_EUSER,
                           "'%s': 'target_modules' names %s in some layers only: adapters on part of the layers are "
                           "not supported yet",
                           path, zt_lora_module_names[mod]);
    }
    return ZT_OK;
}

/* A key that must be absent, null, false, empty or the one value zt trains. */
static int is_off(const cJSON *v)
{
    return !v || cJSON_IsNull(v) || cJSON_IsFalse(v) || (cJSON_IsObject(v) && !v->child);
}

/* modules_to_save: "embed_tokens" and "lm_head" into c->save; "score" (and "classifier", which a
 * Llama lacks), as PEFT's SEQ_CLS task sets it, into c->score. 0 for a module zt cannot train. */
static int parse_saved(const cJSON *save, zt_lora_config *c)
{
    const cJSON *list = cJSON_IsArray(save) ? save : NULL, *e;
    int classifier = 0;
    if (!list) return is_off(save);
    cJSON_ArrayForEach(e, list)
    {
        const char *s = cJSON_IsString(e) ? e->valuestring : "";
        if (!strcmp(s, "embed_tokens")) c->save |= ZT_LORA_SAVE_EMBED;
        else if (!strcmp(s, "lm_head")) c->save |= ZT_LORA_SAVE_HEAD;
        else if (!strcmp(s, "score")) c->score = 1;
        else if (!strcmp(s, "classifier")) classifier = 1;
        else return 0;
    }
    return !classifier || c->score;
}

/* trainable_token_indices: null, a list of token ids (the input embedding's rows), or
 * {"embed_tokens": [...]}; another module's rows are not supported */
static zt_status parse_tokens(const char *path, const cJSON *v, zt_lora_config *c)
{
    const char *key = "trainable_token_indices";
    if (cJSON_IsNull(v) || !v) return ZT_OK;
    if (cJSON_IsObject(v)) {
        if (!v->child || v->child->next || strcmp(v->child->string, "embed_tokens"))
            return bad_config(path, key, "trains rows of a module other than embed_tokens: not supported yet");
        v = v->child;
    }
    if (!cJSON_IsArray(v)) return bad_config(path, key, "must be a list of token ids");
    if (cJSON_GetArraySize(v) > ZT_LORA_MAX_TOKENS)
        return bad_config(path, key, "names more tokens than zt trains (1024)");
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
    {
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
            e->valuedouble > INT32_MAX)
            return bad_config(path, key, "must be a list of token ids (integers from 0)");
        c->tokens[c->n_tokens++] = (int32_t)e->valuedouble;
    }
    return ZT_OK;
}

/* layers_to_transform: null, a layer or a list of layers (each from 0), under layers_pattern null or
 * "layers" (the decoder layers of model.layers, which PEFT finds by itself) */
static zt_status parse_layers(const char *path, const cJSON *o, zt_lora_config *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "layers_to_transform"), *e;
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(o, "layers_pattern");
    if (cJSON_IsArray(pattern) && cJSON_GetArraySize(pattern) == 1) pattern = pattern->child;
    if (!is_off(pattern) && !(cJSON_IsString(pattern) && !strcmp(pattern->valuestring, "layers")))
        return bad_config(path, "layers_pattern", "must be null or \"layers\" (the decoder layers)");
    if (!v || cJSON_IsNull(v)) return ZT_OK;
    if (!cJSON_IsArray(v) && !cJSON_IsNumber(v))
        return bad_config(path, "layers_to_transform", "must be a list of layers");
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > ZT_LORA_MAX_LAYERS)
        return bad_config(path, "layers_to_transform", "names more layers than zt adapts (1024)");
    for (e = cJSON_IsArray(v) ? v->child : v; e; e = cJSON_IsArray(v) ? e->next : NULL) {
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
            e->valuedouble > INT32_MAX)
            return bad_config(path, "layers_to_transform", "must be a list of layers (integers from 0)");
        c->layers[c->n_layers++] = (int32_t)e->valuedouble;
    }
    return ZT_OK;
}

static zt_status parse_adapter_config(const char *path, const cJSON *o, zt_lora_config *c)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "peft_type");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "r"),
                *alpha = cJSON_GetObjectItemCaseSensitive(o, "lora_alpha");
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(o, "lora_dropout");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(o, "use_rslora"),
                *bias = cJSON_GetObjectItemCaseSensitive(o, "bias");
    const cJSON *dora = cJSON_GetObjectItemCaseSensitive(o, "use_dora");
    memset(c, 0, sizeof *c);
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "LORA"))
        return bad_config(path, "peft_type", "must be \"LORA\"");
    if (!cJSON_IsNumber(r) || !(r->valuedouble >= 1 && r->valuedouble <= 65536) ||
        r->valuedouble != floor(r->valuedouble))
        return bad_config(path, "r", "must be an integer in [1, 65536]");
    if (!cJSON_IsNumber(alpha) || !(alpha->valuedouble > 0))
        return bad_config(path, "lora_alpha", "must be a number above 0");
    if (drop && !(cJSON_IsNumber(drop) && drop->valuedouble >= 0 && drop->valuedouble < 1))
        return bad_config(path, "lora_dropout", "must be a number in [0, 1)");
    if (rs && !cJSON_IsBool(rs)) return bad_config(path, "use_rslora", "must be true or false");
    if (dora && !cJSON_IsBool(dora)) return bad_config(path, "use_dora", "must be true or false");
    if (bias && !(cJSON_IsString(bias) && !strcmp(bias->valuestring, "none")))
        return bad_config(path, "bias", "must be \"none\" (trained biases are not supported yet)");
    if (!parse_saved(cJSON_GetObjectItemCaseSensitive(o, "modules_to_save"), c))
        return bad_config(path, "modules_to_save",
                          "names a module zt cannot train whole (it trains embed_tokens, lm_head and a reward "
                          "model's score)");
    static const char *const unsupported[] = {"rank_pattern",    "alpha_pattern",     "lora_bias",
                                              "exclude_modules", "layer_replication", "fan_in_fan_out"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (!is_off(cJSON_GetObjectItemCaseSensitive(o, unsupported[i])))
            return bad_config(path, unsupported[i], "is set: not supported yet");
    zt_status st = parse_tokens(path, cJSON_GetObjectItemCaseSensitive(o, "trainable_token_indices"), c);
    if (!st) st = parse_layers(path, o, c);
    if (st) return st;
    c->r = r->valueint, c->alpha = alpha->valuedouble, c->dropout = drop ? drop->valuedouble : 0;
    c->rslora = cJSON_IsTrue(rs);
    c->method = cJSON_IsTrue(dora) ? ZT_LORA_METHOD_DORA : ZT_LORA_METHOD_LORA;
    return parse_targets(path, cJSON_GetObjectItemCaseSensitive(o, "target_modules"), c);
}

/* dir's adapter_config.json, its path in path[4096] */
static zt_status read_adapter_config(const char *dir, char *path, cJSON **o)
{
    char *text;
    size_t len;
    zt_status st = zt_path_join(path, 4096, dir, "adapter_config.json");
    if (!st) st = zt_read_file(path, &text, &len);
    if (st) return st;
    *o = cJSON_ParseWithLength(text, len);
    free(text);
    if (cJSON_IsObject(*o)) return ZT_OK;
    cJSON_Delete(*o);
    return zt_fail(ZT_EUSER, "'%s': not a JSON object", path);
}

zt_status zt_lora_read_config(const char *dir, zt_lora_config *c)
{
    char path[4096];
    cJSON *o;
    zt_status st = read_adapter_config(dir, path, &o);
    if (st) return st;
    st = parse_adapter_config(path, o, c);
    cJSON_Delete(o);
    return st;
}

zt_status zt_lora_read_base(const char *dir, char *base, size_t cap)
{
    char path[4096];
    cJSON *o;
    zt_status st = read_adapter_config(dir, path, &o);
    if (st) return st;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "base_model_name_or_path");
    if (cJSON_IsString(b) && b->valuestring[0] && strlen(b->valuestring) < cap)
        snprintf(base, cap, "%s", b->valuestring);
    else st = zt_fail(ZT_EUSER, "'%s': 'base_model_name_or_path' is missing or not a path", path);
    cJSON_Delete(o);
    return st;
}
