/* LoRA against PEFT: the fixture of tests/fixtures/lora (made by make_fixture.py with torch,
 * transformers and peft; nothing of them is needed here) holds a tiny GQA Llama, a PEFT LoRA
 * adapter and a DoRA adapter on every linear layer with lora_B not zero (DoRA's magnitudes
 * away from their start), a tiny Phi-3 with a LoRA adapter on its fused qkv_proj and
 * gate_up_proj, o_proj and down_proj, token ids, the losses PEFT computed and the weights of
 * PEFT's merges of the DoRA and the Phi-3 adapters. zt's loss with each adapter must be PEFT's, its merge PEFT's, and an
 * adapter zt writes must be PEFT's files: the same tensor names, shapes and values, and the
 * adapter_config.json keys PEFT reads. target_modules may be a regular expression, as Unsloth
 * saves it. Mixtures of experts (tests/fixtures/lora/moe: Qwen3-MoE and Mixtral with PEFT's
 * "all-linear" adapter, which takes in the router and every expert) likewise. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/ckpt/safetensors.h"
#include "lib/core/fileio.h"
#include "lib/export/export.h"
#include "lib/model/lora.h"
#include "lib/model/open.h"
#include "test.h"

#define FIXTURE "tests/fixtures/lora"
enum { ROWS = 2, T = 32 };

static cJSON *read_json(const char *path)
{
    char *text;
    size_t len;
    if (zt_read_file(path, &text, &len)) return NULL;
    cJSON *o = cJSON_ParseWithLength(text, len);
    free(text);
    return o;
}

/* The sequences of a data.jsonl, one a row: ids, the next token as target, positions from 0 */
static int load_batch(const char *data, int32_t *input, int32_t *target, int32_t *pos)
{
    FILE *f = fopen(data, "r");
    char line[4096];
    int row = 0;
    for (int i = 0; i < ROWS * T; i++) input[i] = 0, target[i] = -100, pos[i] = i % T;
    while (f && row < ROWS && fgets(line, sizeof line, f)) {
        cJSON *o = cJSON_Parse(line), *ids = cJSON_GetObjectItem(o, "input_ids");
        int n = cJSON_GetArraySize(ids);
        for (int t = 0; t < n && t < T; t++) input[row * T + t] = cJSON_GetArrayItem(ids, t)->valueint;
        for (int t = 0; t + 1 < n && t + 1 < T; t++) target[row * T + t] = input[row * T + t + 1];
        cJSON_Delete(o);
        row++;
    }
    if (f) fclose(f);
    return row;
}

/* The base model in base with the fixture's adapter in dir attached (its vocabulary grown as the
 * adapter's trained embedding says). */
static zt_status open_adapted(zt_llama *m, const char *base, const char *dir)
{
    zt_status st = zt_model_open(m, base, ZT_F32, ZT_DEVICE_CPU);
    return st ? st : zt_lora_attach_dir(m, dir, ZT_QBASE_NONE, 0);
}

/* zt in fp32 and PEFT in fp32 (its loss summed in float64) compute the same products in other
 * orders: dot products of at most 64 terms (hidden 32, intermediate and vocabulary 64) each
 * within 64·2⁻²⁴ ≈ 4e-6 of their terms' magnitudes in the worst case, about sqrt(64)·2⁻²⁴ ≈ 5e-7
 * for roundings of random sign, through a few products in series (tests/cli/t0500-reference.sh
 * argues the same for the base model): 1e-5 relative. Measured: 4e-8. */
static void check_loss_matches_peft(const char *base_dir, const char *dir, const char *fixture, const char *key,
                                    const char *base_key)
{
    char path[256];
    snprintf(path, sizeof path, "%s/expected.json", fixture);
    cJSON *want = read_json(path);
    CHECK_MSG(want != NULL, "cannot read %s: run from the repository root", path);
    if (!want) return;
    zt_llama m;
    int32_t input[ROWS * T], target[ROWS * T], pos[ROWS * T];
    snprintf(path, sizeof path, "%s/data.jsonl", fixture);
    CHECK(load_batch(path, input, target, pos) == ROWS);
    CHECK_MSG(open_adapted(&m, base_dir, dir) == ZT_OK, "%s", zt_errmsg());
    CHECK(zt_llama_alloc_acts(&m, ROWS, T, 1) == ZT_OK);
    int n = 0;
    for (int i = 0; i < ROWS * T; i++) n += target[i] >= 0;
    double sum = 0, peft = cJSON_GetObjectItem(want, key)->valuedouble;
    zt_llama_forward_backward(&m, input, target, pos, 0, &sum);
    double loss = sum / n, base = cJSON_GetObjectItem(want, base_key)->valuedouble;
    CHECK_MSG(fabs(loss - peft) <= 1e-5 * peft, "zt %.9g, PEFT %.9g", loss, peft);
    printf("# %s: zt %.9g, PEFT %.9g (relative %.2g)\n", key, loss, peft, fabs(loss - peft) / peft);
    CHECK_MSG(fabs(base - peft) > 1e-3 * peft, "the adapter hardly changes the loss (%g, %g)", base, peft);
    zt_llama_free(&m);
    cJSON_Delete(want);
}

/* The adapters' gradients of a bf16 model (its base's products and its adapters' on bf16
 * operands) against an fp32 model's, as each tensor's error norm over its norm (test_parity.c
 * argues the bound for the base's gradients: 0.25, where a product fed a wrong bf16 copy is off
 * by its whole size); with activation checkpointing (the bf16 copies made again) the same bits. */
static void test_bf16_adapter_gradients(void)
{
    int32_t input[ROWS * T], target[ROWS * T], pos[ROWS * T];
    CHECK(load_batch(FIXTURE "/data.jsonl", input, target, pos) == ROWS);
    zt_llama m[3];
    double loss[3], worst = 0;
    for (int k = 0; k < 3; k++) { /* fp32, bf16, bf16 with checkpointing */
        zt_status st = zt_model_open(&m[k], FIXTURE "/base", k ? ZT_BF16 : ZT_F32, ZT_DEVICE_CPU);
        if (!st) st = zt_lora_attach_dir(&m[k], FIXTURE "/adapter", ZT_QBASE_NONE, 0);
        if (!st) st = zt_llama_alloc_acts(&m[k], ROWS, T, k == 2);
        ZT_ASSERT(st == ZT_OK);
        loss[k] = 0;
        zt_llama_forward_backward(&m[k], input, target, pos, 1.0f / (ROWS * T), &loss[k]);
    }
    const zt_llama *v = &m[0].lora->view;
    for (int i = 0; i < v->n_tensors; i++) {
        const zt_llama_tensor *t = &v->tensors[i];
        size_t n = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
        const zt_real *g = m[1].lora->view.grads + t->offset, *r = v->grads + t->offset;
        double err = 0, norm = 0;
        for (size_t j = 0; j < n; j++) err += (g[j] - r[j]) * (g[j] - r[j]), norm += r[j] * r[j];
        double rel = sqrt(err / norm);
        CHECK_MSG(norm > 0 && rel <= 0.25, "%s: bf16 gradient %.3g of the fp32 one's norm away", t->name, rel);
        worst = fmax(worst, rel);
    }
    CHECK(!memcmp(m[1].lora->view.grads, m[2].lora->view.grads, v->numel * sizeof(zt_real)) && loss[1] == loss[2]);
    CHECK(loss[1] != loss[0]);
    printf("# bf16 adapter gradients within %.2g of fp32's; loss %.9g (fp32 %.9g)\n", worst, loss[1], loss[0]);
    for (int k = 0; k < 3; k++) zt_llama_free(&m[k]);
}

/* DoRA's terms are products of the same sizes, and its norms sums of at most 64 squares: the
 * same bound. Phi-3's fused adapters are the same products over wider outputs (measured: 2.4e-9). */
static void test_loss_matches_peft(void)
{
    check_loss_matches_peft(FIXTURE "/base", FIXTURE "/adapter", FIXTURE, "loss", "base_loss");
}
static void test_dora_loss_matches_peft(void)
{
    check_loss_matches_peft(FIXTURE "/base", FIXTURE "/dora", FIXTURE, "dora_loss", "base_loss");
}
static void test_phi3_loss_matches_peft(void)
{
    check_loss_matches_peft(FIXTURE "/phi3/base", FIXTURE "/phi3/adapter", FIXTURE, "phi3_loss", "phi3_base_loss");
}
/* modules_to_save = ["embed_tokens", "lm_head"] on a vocabulary grown to 66 tokens: the copies'
 * rows are looked up and multiplied as the base's (measured: 7.7e-8) */
static void test_saved_modules_loss_matches_peft(void)
{
    check_loss_matches_peft(FIXTURE "/base", FIXTURE "/saved/adapter", FIXTURE "/saved", "loss", "base_loss");
    /* on a model whose LM head is its embedding PEFT's two copies of it train apart: the
       embedding's rows looked up, the LM head's multiplied, as above */
    check_loss_matches_peft(FIXTURE "/saved/tied/base", FIXTURE "/saved/tied/adapter", FIXTURE "/saved/tied", "loss",
                            "base_loss");
}
/* PEFT's trainable_token_indices: the trained rows looked up in place of the base's, and on a tied
 * model the LM head's logits of those tokens their products (PEFT ties the head's rows to them) */
static void test_tokens_loss_matches_peft(void)
{
    check_loss_matches_peft(FIXTURE "/saved/tied/base", FIXTURE "/tokens/tied/adapter", FIXTURE "/tokens/tied", "loss",
                            "base_loss");
    check_loss_matches_peft(FIXTURE "/base", FIXTURE "/tokens/untied/adapter", FIXTURE "/tokens/untied", "loss",
                            "base_loss");
}
/* PEFT's layers_to_transform = [1]: layer 0 runs as the base's */
static void test_layers_loss_matches_peft(void)
{
    check_loss_matches_peft(FIXTURE "/base", FIXTURE "/layers/adapter", FIXTURE "/layers", "loss", "base_loss");
}

/* zt_lora_merge of the adapter in dir against PEFT's merge_and_unload() in merged (n tensors),
 * each weight against its row's largest: see the tests below for the bounds. */
static void check_merge_is_peft(const char *base, const char *dir, const char *merged, int n)
{
    zt_llama m;
    zt_st_reader *rd = NULL;
    CHECK_MSG(open_adapted(&m, base, dir) == ZT_OK && zt_lora_merge(&m) == ZT_OK, "%s", zt_errmsg());
    CHECK(zt_st_open(&rd, merged) == ZT_OK);
    CHECK(rd && zt_st_count(rd) == n);
    double worst = 0;
    for (int i = 0; rd && i < zt_st_count(rd); i++) {
        const zt_st_tensor *f = zt_st_get(rd, i);
        const zt_llama_tensor *t = zt_llama_find_tensor(&m, f->name);
        CHECK_MSG(t && f->ndim == 2 && f->shape[0] == t->shape[0] && f->shape[1] == t->shape[1], "%s", f->name);
        if (!t) continue;
        int rows = (int)t->shape[0], cols = (int)t->shape[1];
        float *want = malloc((size_t)rows * cols * sizeof *want);
        CHECK(want && zt_st_read_into(f, want, ZT_F32, t->shape, 2) == ZT_OK);
        for (int j = 0; want && j < rows; j++) {
            double big = 0, diff = 0;
            for (int k = 0; k < cols; k++) {
                size_t e = (size_t)j * cols + k;
                big = fmax(big, fabs(want[e]));
                diff = fmax(diff, fabs(want[e] - m.params[t->offset + e]));
            }
            worst = fmax(worst, diff / big);
        }
        free(want);
    }
    CHECK_MSG(worst <= 1e-5, "merged weights: worst error %g of the row's largest", worst);
    printf("# %s: merged weights within %.2g of their row's largest\n", merged, worst);
    zt_st_close(rd);
    zt_llama_free(&m);
}

/* DoRA's merge g·(W + s·B·A), row by row. Both compute W + s·B·A in fp32 (4 products each,
 * rounded to 2⁻²⁴ of the sum's terms), the row's norm from 32 or 64 squares (PEFT in fp32, zt in
 * double: within 64·2⁻²⁴ ≈ 4e-6 relative, halved by the square root) and M / norm times that:
 * each weight within about 3e-6 of its row's largest in the worst case; 1e-5 of the row's largest. */
static void test_dora_merge_is_peft(void)
{
    check_merge_is_peft(FIXTURE "/base", FIXTURE "/dora", FIXTURE "/dora_merged.safetensors", 2 * 7);
}

/* Phi-3's fused qkv_proj and gate_up_proj, o_proj and down_proj: W + s·B·A, sums of 4 products
 * in fp32 on both sides (the DoRA bound without its norm), within 1e-5 of the row's largest */
static void test_phi3_merge_is_peft(void)
{
    check_merge_is_peft(FIXTURE "/phi3/base", FIXTURE "/phi3/adapter", FIXTURE "/phi3/merged.safetensors", 2 * 4);
}

/* The decoder with the adapter of dir attached (zt_lora_attach_dir: not merged) against the
 * decoder on the merged model: the logits after a prefill of the first sequence's first 10
 * tokens (in chunks of 4, the adapters' scratch) and after each of its next tokens one at a time.
 * The same products as the merge test's, the adapter's rounded apart from W's or into it, through
 * two layers and the head (t2400-lora.sh's parity argument): within 1e-5 of the largest logit. A
 * DoRA adapter's decoder refuses to run before zt_lora_prepare_decode. */
static void check_decode_matches_merge(const char *base, const char *dir)
{
    enum { PREFILL = 10, CHUNK = 4 };
    zt_llama m, merged;
    zt_llama_cache c, cm;
    int32_t input[ROWS * T], target[ROWS * T], pos[ROWS * T];
    CHECK(load_batch(FIXTURE "/data.jsonl", input, target, pos) == ROWS);
    CHECK_MSG(zt_model_open(&m, base, ZT_F32, ZT_DEVICE_CPU) == ZT_OK &&
                  zt_lora_attach_dir(&m, dir, ZT_QBASE_NONE, 0) == ZT_OK && zt_lora_alloc_scratch(&m, CHUNK) == ZT_OK,
              "%s", zt_errmsg());
    CHECK_MSG(open_adapted(&merged, base, dir) == ZT_OK && zt_lora_merge(&merged) == ZT_OK, "%s", zt_errmsg());
    zt_lora_free(&merged); /* the merged model alone */
    CHECK(zt_llama_cache_init(&c, &m, T, 64, 1) == ZT_OK && zt_llama_cache_init(&cm, &merged, T, 64, 1) == ZT_OK);
    zt_real *got = malloc(2 * (size_t)m.V * sizeof *got), *want = got + m.V;
    int dora = m.lora->cfg.method == ZT_LORA_METHOD_DORA;
    CHECK((zt_llama_decode(&m, &c, input, PREFILL, got) == ZT_EUSER) == dora); /* DoRA: its norms first */
    zt_llama_cache_reset(&c);
    CHECK(zt_lora_prepare_decode(&m) == ZT_OK);
    double worst = 0;
    for (int t = PREFILL; t < T && input[t]; t++) {
        int first = t == PREFILL, n = first ? PREFILL : 1;
        const int32_t *in = first ? input : &input[t - 1];
        CHECK(zt_llama_decode(&m, &c, in, n, got) == ZT_OK && zt_llama_decode(&merged, &cm, in, n, want) == ZT_OK);
        double big = 0, diff = 0;
        for (int v = 0; v < m.V; v++) big = fmax(big, fabs(want[v])), diff = fmax(diff, fabs(got[v] - want[v]));
        worst = fmax(worst, diff / big);
    }
    CHECK_MSG(worst <= 1e-5, "%s: the decoder's logits within %g of the largest, not the merged model's", dir, worst);
    printf("# %s: decoded logits within %.2g of the largest of the merged model's\n", dir, worst);
    free(got);
    zt_llama_cache_free(&c, &m);
    zt_llama_cache_free(&cm, &merged);
    zt_llama_free(&m);
    zt_llama_free(&merged);
}

static void test_decode_matches_merge(void)
{
    check_decode_matches_merge(FIXTURE "/moe/qwen3_moe/base", FIXTURE "/moe/qwen3_moe/adapter");
    check_decode_matches_merge(FIXTURE "/moe/mixtral/base", FIXTURE "/moe/mixtral/adapter");
    check_decode_matches_merge(FIXTURE "/moe/qwen2_moe/base", FIXTURE "/moe/qwen2_moe/adapter");
    check_decode_matches_merge(FIXTURE "/base", FIXTURE "/adapter");
    check_decode_matches_merge(FIXTURE "/base", FIXTURE "/dora");
    check_decode_matches_merge(FIXTURE "/phi3/base", FIXTURE "/phi3/adapter");
    check_decode_matches_merge(FIXTURE "/base", FIXTURE "/saved/adapter"); /* the trained embedding and LM head */
    /* the same of a tied model: the merge unties its LM head from its embedding */
    check_decode_matches_merge(FIXTURE "/saved/tied/base", FIXTURE "/saved/tied/adapter");
    /* trainable tokens: their rows looked up and (tied) multiplied, against them merged */
    check_decode_matches_merge(FIXTURE "/saved/tied/base", FIXTURE "/tokens/tied/adapter");
    check_decode_matches_merge(FIXTURE "/base", FIXTURE "/tokens/untied/adapter");
    check_decode_matches_merge(FIXTURE "/base", FIXTURE "/layers/adapter"); /* layer 1's adapters alone */
}

/* The module name of a target_modules entry: itself, or the end of a layer's module path */
static const char *module_name(const char *entry)
{
    const char *dot = strrchr(entry, '.');
    return dot ? dot + 1 : entry;
}

/* removes an adapter directory made here */
static void remove_adapter(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

/* zt_lora_save of the loaded adapter in src on base (n_tensors of them, on n_modules modules):
 * PEFT's tensors back, bit for bit, and its config's keys (target_modules as module names, which
 * PEFT matches in every layer, where PEFT may have saved each layer's module path) */
static void check_saved_adapter_is_peft(const char *base, const char *src, int n_tensors, int n_modules)
{
    char dir[] = "/tmp/zt_test_lora_XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    zt_llama m;
    CHECK_MSG(open_adapted(&m, base, src) == ZT_OK, "%s", zt_errmsg());
    CHECK_MSG(zt_lora_save(&m, dir, base) == ZT_OK, "%s", zt_errmsg());
    zt_llama_free(&m);
    zt_st_reader *a = NULL, *b = NULL;
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", src);
    CHECK(zt_st_open(&a, path) == ZT_OK);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    CHECK(zt_st_open(&b, path) == ZT_OK);
    CHECK(a && b && zt_st_count(b) == n_tensors);
    for (int i = 0; a && b && i < zt_st_count(a); i++) { /* but PEFT's own copies of a grown vocabulary's */
        const zt_st_tensor *x = zt_st_get(a, i), *y = zt_st_find(b, x->name);
        if (strstr(x->name, ".original_module.") || strstr(x->name, ".modules_to_save.")) continue;
        CHECK_MSG(y && y->dtype == x->dtype && y->ndim == x->ndim && y->shape[0] == x->shape[0] &&
                      (x->ndim == 1 || y->shape[1] == x->shape[1]) && y->nbytes == x->nbytes &&
                      !memcmp(y->data, x->data, x->nbytes),
                  "%s", x->name);
    }
    zt_st_close(a);
    zt_st_close(b);
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    cJSON *ours = read_json(path);
    snprintf(path, sizeof path, "%s/adapter_config.json", src);
    cJSON *peft = read_json(path);
    static const char *const same[] = {"peft_type",
                                       "task_type",
                                       "r",
                                       "lora_alpha",
                                       "lora_dropout",
                                       "bias",
                                       "use_rslora",
                                       "use_dora",
                                       "modules_to_save",
                                       "fan_in_fan_out",
                                       "trainable_token_indices",
                                       "layers_to_transform",
                                       "layers_pattern"};
    for (size_t i = 0; ours && peft && i < sizeof same / sizeof *same; i++)
        CHECK_MSG(cJSON_Compare(cJSON_GetObjectItem(ours, same[i]), cJSON_GetObjectItem(peft, same[i]), 1), "%s",
                  same[i]);
    const cJSON *t = cJSON_GetObjectItem(ours, "target_modules"), *e,
                *pattern = cJSON_GetObjectItem(peft, "target_modules");
    if (cJSON_IsString(pattern)) /* an image-text model's: the pattern zt writes (lora.c: target_modules) */
        CHECK_MSG(cJSON_IsString(t) && !strcmp(t->valuestring, pattern->valuestring), "target_modules %s",
                  cJSON_IsString(t) ? t->valuestring : "(not a string)");
    else CHECK(cJSON_GetArraySize(t) == n_modules);
    const cJSON *names = cJSON_IsArray(pattern) ? pattern : NULL;
    cJSON_ArrayForEach(e, names)
    {
        int found = 0;
        const cJSON *o;
        cJSON_ArrayForEach(o, t) found |= !strcmp(o->valuestring, module_name(e->valuestring));
        CHECK_MSG(found, "%s", e->valuestring);
    }
    CHECK(!strcmp(cJSON_GetObjectItem(ours, "base_model_name_or_path")->valuestring, base));
    cJSON_Delete(ours);
    cJSON_Delete(peft);
    remove_adapter(dir);
}

static void test_saved_adapter_is_peft(void)
{
    check_saved_adapter_is_peft(FIXTURE "/base", FIXTURE "/adapter", 2 * 7 * 2, 7);
}
/* A, B and the magnitude of every module of both layers */
static void test_saved_dora_adapter_is_peft(void)
{
    check_saved_adapter_is_peft(FIXTURE "/base", FIXTURE "/dora", 2 * 7 * 3, 7);
}
/* PEFT saved "all-linear" as each layer's module paths */
static void test_saved_phi3_adapter_is_peft(void)
{
    check_saved_adapter_is_peft(FIXTURE "/phi3/base", FIXTURE "/phi3/adapter", 2 * 4 * 2, 4);
}
/* A and B, and the trained embedding and LM head once each (PEFT wrote them thrice) */
static void test_saved_modules_adapter_is_peft(void)
{
    check_saved_adapter_is_peft(FIXTURE "/base", FIXTURE "/saved/adapter", 2 * 7 * 2 + 2, 7);
    check_saved_adapter_is_peft(FIXTURE "/saved/tied/base", FIXTURE "/saved/tied/adapter", 2 * 7 * 2 + 2, 7);
    /* trainable tokens: their rows, one tensor (PEFT saves none for the tied LM head) */
    check_saved_adapter_is_peft(FIXTURE "/saved/tied/base", FIXTURE "/tokens/tied/adapter", 2 * 7 * 2 + 1, 7);
    check_saved_adapter_is_peft(FIXTURE "/base", FIXTURE "/tokens/untied/adapter", 2 * 7 * 2 + 1, 7);
    /* layers_to_transform = [1]: the second layer's adapters alone */
    check_saved_adapter_is_peft(FIXTURE "/base", FIXTURE "/layers/adapter", 7 * 2, 7);
}

/* Mixtures of experts: PEFT's "all-linear" takes in the attention's projections, the router
 * (gate) and each expert's gate, up and down projections (Mixtral's w1, w3, w2), an adapter on
 * every one of the 4 experts: 17 modules a layer. The same products as the Llama adapter's, each
 * expert's on the rows routed to it (the routing the same on both sides: no probability of a
 * token's two choices comes near another's in these models), the same bound. */
static void test_moe_loss_matches_peft(void)
{
    check_loss_matches_peft(FIXTURE "/moe/qwen3_moe/base", FIXTURE "/moe/qwen3_moe/adapter", FIXTURE "/moe",
                            "qwen3_moe_loss", "qwen3_moe_base_loss");
    check_loss_matches_peft(FIXTURE "/moe/qwen2_moe/base", FIXTURE "/moe/qwen2_moe/adapter", FIXTURE "/moe",
                            "qwen2_moe_loss", "qwen2_moe_base_loss");
    check_loss_matches_peft(FIXTURE "/moe/mixtral/base", FIXTURE "/moe/mixtral/adapter", FIXTURE "/moe", "mixtral_loss",
                            "mixtral_base_loss");
}
static void test_moe_merge_is_peft(void)
{
    check_merge_is_peft(FIXTURE "/moe/qwen3_moe/base", FIXTURE "/moe/qwen3_moe/adapter",
                        FIXTURE "/moe/qwen3_moe/merged.safetensors", 2 * 17);
    check_merge_is_peft(FIXTURE "/moe/mixtral/base", FIXTURE "/moe/mixtral/adapter",
                        FIXTURE "/moe/mixtral/merged.safetensors", 2 * 17);
    /* and the shared expert's gate_proj, up_proj, down_proj and shared_expert_gate */
    check_merge_is_peft(FIXTURE "/moe/qwen2_moe/base", FIXTURE "/moe/qwen2_moe/adapter",
                        FIXTURE "/moe/qwen2_moe/merged.safetensors", 2 * 21);
}
/* target_modules back as PEFT named them: the router "gate", Mixtral's experts w1, w3, w2 */
static void test_saved_moe_adapter_is_peft(void)
{
    check_saved_adapter_is_peft(FIXTURE "/moe/qwen3_moe/base", FIXTURE "/moe/qwen3_moe/adapter", 2 * 17 * 2, 8);
    check_saved_adapter_is_peft(FIXTURE "/moe/mixtral/base", FIXTURE "/moe/mixtral/adapter", 2 * 17 * 2, 8);
    check_saved_adapter_is_peft(FIXTURE "/moe/qwen2_moe/base", FIXTURE "/moe/qwen2_moe/adapter", 2 * 21 * 2, 9);
}

/* A copy of the fixture's LoRA adapter in dir (mkdtemp'd) whose adapter_config.json gives
 * target_modules as the pattern, the weights a link to the fixture's */
static void targets_adapter(char *dir, const char *src, cJSON *targets)
{
    char path[4096], real[4096];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/adapter_config.json", src);
    cJSON *c = read_json(path);
    ZT_ASSERT(c != NULL);
    cJSON_ReplaceItemInObject(c, "target_modules", targets);
    char *text = cJSON_Print(c);
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    CHECK(zt_write_file_atomic(path, text, strlen(text)) == ZT_OK);
    free(text);
    cJSON_Delete(c);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", src);
    ZT_ASSERT(realpath(path, real) != NULL);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    CHECK(symlink(real, path) == 0);
}

static void pattern_adapter(char *dir, const char *src, const char *pattern)
{
    targets_adapter(dir, src, cJSON_CreateString(pattern));
}

/* target_modules as one regular expression, as PEFT matches a string against each module's
 * whole name and Unsloth saves adapters: the pattern Unsloth writes for a text model names every
 * linear module, so the adapter is the fixture's and gives PEFT's loss; a pattern names modules
 * in every layer or is refused, naming why (part of the layers, the LM head, not a pattern) */
static void test_pattern_targets(void)
{
    static const char unsloth[] =
        "(?:.*?(?:language|text).*?(?:self_attn|attention|attn|mlp|feed_forward|ffn|dense).*?(?:q_proj|k_proj|v_"
        "proj|o_proj|gate_proj|up_proj|down_proj).*?)|(?:\\bmodel\\.layers\\.[\\d]{1,}\\.(?:self_attn|attention|"
        "attn|mlp|feed_forward|ffn|dense)\\.(?:(?:q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)))";
    char dir[] = "/tmp/zt_test_pattern_XXXXXX";
    pattern_adapter(dir, FIXTURE "/adapter", unsloth);
    check_loss_matches_peft(FIXTURE "/base", dir, FIXTURE, "loss", "base_loss");
    remove_adapter(dir);

    zt_lora_config c;
    strcpy(dir, "/tmp/zt_test_pattern_XXXXXX");
    pattern_adapter(dir, FIXTURE "/adapter", "model\\.layers\\.\\d+\\.self_attn\\.(q|v)_proj");
    CHECK_MSG(zt_lora_read_config(dir, &c) == ZT_OK, "%s", zt_errmsg());
    CHECK(c.targets == (1u << ZT_LORA_Q | 1u << ZT_LORA_V));
    remove_adapter(dir);

    static const char *const refused[][2] = {
        {"model\\.layers\\.1\\..*", "matches no linear module of layer 0"},
        {".*_proj|lm_head", "matches lm_head"},
        {"model\\.layers\\.(", "is not a regular expression: missing closing parenthesis"},
        {"(?:.|[a-z_])+(?:.|[a-z_])+\\d", "takes too long to match"},
    };
    for (int i = 0; i < 4; i++) {
        strcpy(dir, "/tmp/zt_test_pattern_XXXXXX");
        pattern_adapter(dir, FIXTURE "/adapter", refused[i][0]);
        CHECK(zt_lora_read_config(dir, &c) == ZT_EUSER);
        CHECK_MSG(strstr(zt_errmsg(), refused[i][1]) && strstr(zt_errmsg(), "adapter_config.json"), "%s", zt_errmsg());
        remove_adapter(dir);
    }
    /* layer 0's modules alone: known once the model's layers are */
    zt_llama m;
    strcpy(dir, "/tmp/zt_test_pattern_XXXXXX");
    pattern_adapter(dir, FIXTURE "/adapter", "model\\.layers\\.0\\..*");
    CHECK(zt_lora_read_config(dir, &c) == ZT_OK);
    CHECK(open_adapted(&m, FIXTURE "/base", dir) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), "other modules in layer 1 than in layer 0"), "%s", zt_errmsg());
    zt_llama_free(&m);
    remove_adapter(dir);
}

/* A mixture of experts' modules matched by their own paths (model.layers.0.mlp.experts.3.gate_proj,
 * model.layers.0.mlp.gate), as PEFT matches a pattern: one naming every module is the all-linear
 * adapter (PEFT's loss); Unsloth's names the experts' projections right after "mlp." and so none
 * of them (the adapter's expert tensors are then refused); one naming some experts is refused */
static void test_moe_pattern_targets(void)
{
    char dir[] = "/tmp/zt_test_pattern_XXXXXX";
    pattern_adapter(dir, FIXTURE "/moe/qwen3_moe/adapter",
                    ".*\\.(q_proj|k_proj|v_proj|o_proj|gate|gate_proj|up_proj|down_proj)");
    check_loss_matches_peft(FIXTURE "/moe/qwen3_moe/base", dir, FIXTURE "/moe", "qwen3_moe_loss",
                            "qwen3_moe_base_loss");
    remove_adapter(dir);
    strcpy(dir, "/tmp/zt_test_pattern_XXXXXX");
    pattern_adapter(dir, FIXTURE "/moe/mixtral/adapter", ".*\\.(q_proj|k_proj|v_proj|o_proj|gate|w1|w2|w3)");
    check_loss_matches_peft(FIXTURE "/moe/mixtral/base", dir, FIXTURE "/moe", "mixtral_loss", "mixtral_base_loss");
    remove_adapter(dir);
    static const char *const refused[][2] = {
        {"model\\.layers\\.\\d+\\.(self_attn|mlp)\\.(q_proj|k_proj|v_proj|o_proj|gate|gate_proj|up_proj|down_proj)",
         "is not an adapter of this model"},
        {".*(q_proj|experts\\.[01]\\.gate_proj)", "some of a module's experts"},
    };
    for (int i = 0; i < 2; i++) {
        zt_llama m;
        strcpy(dir, "/tmp/zt_test_pattern_XXXXXX");
        pattern_adapter(dir, FIXTURE "/moe/qwen3_moe/adapter", refused[i][0]);
        CHECK(open_adapted(&m, FIXTURE "/moe/qwen3_moe/base", dir) == ZT_EUSER);
        CHECK_MSG(strstr(zt_errmsg(), refused[i][1]), "%s", zt_errmsg());
        zt_llama_free(&m);
        remove_adapter(dir);
    }
}

/* Gemma 3's image-text model: the language model's adapters under base_model.model.language_model.,
 * target_modules a pattern over its modules' paths (lora_pattern.c), the vision tower carried.
 * The loss, merge and decoding bounds are the Llama fixture's (the same sizes: hidden 32,
 * intermediate and vocabulary 64). */
static void test_gemma3_vision_is_peft(void)
{
    const char *base = FIXTURE "/gemma3-vision/base", *dir = FIXTURE "/gemma3-vision/adapter";
    check_loss_matches_peft(base, dir, FIXTURE "/gemma3-vision", "gemma3_vision_loss", "gemma3_vision_base_loss");
    check_merge_is_peft(base, dir, FIXTURE "/gemma3-vision/merged.safetensors", 2 * 7);
    check_decode_matches_merge(base, dir);
    check_saved_adapter_is_peft(base, dir, 2 * 7 * 2, 7);
    zt_llama m;
    CHECK(zt_model_open_head(&m, base, ZT_F32, ZT_DEVICE_CPU, 1) == ZT_EUSER); /* no score head on it */
    CHECK_MSG(strstr(zt_errmsg(), "reward or value model on an image-text checkpoint"), "%s", zt_errmsg());
}

/* PEFT's "all-linear" on an image-text model adapts the vision tower too: zt loads such an adapter
 * (the tower's adapters unused: text does not reach it, so the loss is PEFT's) and zt export --merge
 * writes every merged weight as PEFT's merge_and_unload() does, the tower's W + s·B·A included
 * (fp32 on both sides over r = 4 terms: the merge bound above, 1e-5 of the row's largest) and every
 * other tensor of the tower as it was. FIXTURE/family/all-linear holds the base, the adapter (with
 * `carried` tensors on the tower) and PEFT's merged weights, `changed` of them changed by the merge. */
static void check_image_text_all_linear(const char *family, int carried, int changed)
{
    char fixture[128], base[256], dir[256], merged_file[256];
    snprintf(fixture, sizeof fixture, FIXTURE "/%s", family);
    snprintf(base, sizeof base, "%s/all-linear/base", fixture);
    snprintf(dir, sizeof dir, "%s/all-linear/adapter", fixture);
    snprintf(merged_file, sizeof merged_file, "%s/all-linear/merged.safetensors", fixture);
    check_loss_matches_peft(base, dir, fixture, "all_linear_loss", "all_linear_base_loss");
    zt_llama m;
    CHECK_MSG(open_adapted(&m, base, dir) == ZT_OK, "%s", zt_errmsg());
    CHECK_MSG(m.lora && m.lora->carried == carried, "%s: %d", family, m.lora ? m.lora->carried : -1);
    zt_llama_free(&m);
    char out[] = "/tmp/zt_test_lora_XXXXXX", path[256];
    zt_export_info info;
    CHECK(mkdtemp(out) != NULL);
    CHECK_MSG(zt_export_merged(dir, out, &(zt_export_options){.base = base, .dtype = "fp32"}, &info) == ZT_OK, "%s",
              zt_errmsg());
    zt_st_reader *want = NULL, *got = NULL, *src = NULL;
    CHECK(zt_st_open(&want, merged_file) == ZT_OK);
    CHECK(zt_st_open(&got, out) == ZT_OK && zt_st_open(&src, base) == ZT_OK);
    double worst = 0;
    int merged = 0;
    for (int i = 0; want && got && i < zt_st_count(want); i++) {
        const zt_st_tensor *w = zt_st_get(want, i), *g = zt_st_find(got, w->name), *b = zt_st_find(src, w->name);
        CHECK_MSG(g && g->ndim == w->ndim && g->nbytes == w->nbytes && g->dtype == ZT_ST_F32, "%s", w->name);
        if (!g || g->nbytes != w->nbytes) continue;
        size_t n = w->nbytes / 4, cols = w->ndim == 2 ? (size_t)w->shape[1] : n;
        float *x = malloc(2 * n * sizeof *x), *y = x + n;
        CHECK(zt_st_read_into(w, x, ZT_F32, NULL, 1) == ZT_OK && zt_st_read_into(g, y, ZT_F32, NULL, 1) == ZT_OK);
        for (size_t r = 0; r < n / cols; r++) {
            double big = 0, diff = 0;
            for (size_t k = r * cols; k < (r + 1) * cols; k++)
                big = fmax(big, fabs(x[k])), diff = fmax(diff, fabs(x[k] - y[k]));
            worst = fmax(worst, diff / big);
        }
        merged += b && memcmp(b->data, g->data, g->nbytes) != 0;
        free(x);
    }
    CHECK_MSG(worst <= 1e-5, "merged weights: worst error %g of the row's largest", worst);
    CHECK_MSG(merged == changed, "%s: %d weights changed", family, merged);
    for (int i = 0; got && src && i < zt_st_count(src); i++) { /* the tower's other tensors as they were */
        const zt_st_tensor *b = zt_st_get(src, i), *g = zt_st_find(got, b->name);
        if (!strncmp(b->name, "language_model.", 15) || zt_st_find(want, b->name)) continue;
        CHECK_MSG(g && g->nbytes == b->nbytes && !memcmp(g->data, b->data, b->nbytes), "%s", b->name);
    }
    printf("# %s: merged by zt export --merge within %.2g of PEFT's, the vision tower's %d included\n", dir, worst,
           changed - 2 * 7);
    zt_st_close(want), zt_st_close(got), zt_st_close(src);
    static const char *const files[] = {"model.safetensors", "config.json", "generation_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        snprintf(path, sizeof path, "%s/%s", out, files[i]), unlink(path);
    CHECK(rmdir(out) == 0);
}

/* Gemma 3's tower: q, k, v, out_proj, fc1, fc2 of its layer and its head's out_proj, fc1, fc2 (A and
 * B each); a module name only the tower has (PEFT's list for it: fc1) is refused on a text model */
static void test_gemma3_vision_all_linear(void)
{
    check_image_text_all_linear("gemma3-vision", 2 * 9, 2 * 7 + 9);
    zt_llama m;
    char odd[] = "/tmp/zt_test_lora_XXXXXX";
    const char *names[] = {"q_proj", "fc1"};
    targets_adapter(odd, FIXTURE "/adapter", cJSON_CreateStringArray(names, 2));
    CHECK(open_adapted(&m, FIXTURE "/base", odd) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), "target_modules 'fc1' is not one of q_proj"), "%s", zt_errmsg());
    zt_llama_free(&m);
    remove_adapter(odd);
}

/* Qwen2.5-VL's tower beside a top-level language model: its layer's qkv, proj, gate_proj, up_proj,
 * down_proj and the merger's two (PEFT's list names "attn.proj" and "mlp.0": paths of the tower) */
static void test_qwen2_5_vl_all_linear(void) { check_image_text_all_linear("qwen2_5_vl-vision", 2 * 7, 2 * 7 + 7); }

/* GLM-4: PEFT's all-linear on separate q_proj, k_proj, v_proj (with biases) and one gate_up_proj;
 * the loss (a rotary embedding in interleaved pairs over half of each head), the merge, the decoder
 * and the saved adapter, under the bounds of the tests above */
static void test_glm4_all_linear(void)
{
    const char *base = FIXTURE "/glm4/base", *dir = FIXTURE "/glm4/adapter";
    check_loss_matches_peft(base, dir, FIXTURE "/glm4", "loss", "base_loss");
    check_merge_is_peft(base, dir, FIXTURE "/glm4/merged.safetensors", 2 * 6);
    check_decode_matches_merge(base, dir);
    check_saved_adapter_is_peft(base, dir, 2 * 6 * 2, 6);
}

int main(void)
{
    RUN(test_loss_matches_peft);
    RUN(test_bf16_adapter_gradients);
    RUN(test_dora_loss_matches_peft);
    RUN(test_dora_merge_is_peft);
    RUN(test_saved_adapter_is_peft);
    RUN(test_saved_dora_adapter_is_peft);
    RUN(test_phi3_loss_matches_peft);
    RUN(test_phi3_merge_is_peft);
    RUN(test_saved_phi3_adapter_is_peft);
    RUN(test_decode_matches_merge);
    RUN(test_saved_modules_loss_matches_peft);
    RUN(test_saved_modules_adapter_is_peft);
    RUN(test_tokens_loss_matches_peft);
    RUN(test_layers_loss_matches_peft);
    RUN(test_pattern_targets);
    RUN(test_moe_loss_matches_peft);
    RUN(test_moe_merge_is_peft);
    RUN(test_saved_moe_adapter_is_peft);
    RUN(test_moe_pattern_targets);
    RUN(test_gemma3_vision_is_peft);
    RUN(test_gemma3_vision_all_linear);
    RUN(test_qwen2_5_vl_all_linear);
    RUN(test_glm4_all_linear);
    return test_summary();
}
