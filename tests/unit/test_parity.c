/* zt against transformers: tiny models of each family (tests/fixtures/parity/FAMILY: the
 * config.json transformers wrote, the loss, gradients and greedy tokens it computed, made by
 * make_parity.py), with the same weights here (weight() below is parity_model.py's). In fp32 the
 * loss, every parameter's gradient (its sum, sum of squares and sampled elements) and 20 greedy
 * tokens must match, in bf16 the loss: Qwen3 untied with attention_bias and tied, Gemma 2 and 3, OLMo 2, Phi-3
 * and SmolLM3 untied and tied, the mixtures of experts Mixtral, Qwen3-MoE and OLMoE (the last two with
 * the load-balancing loss in the loss, as transformers adds it with output_router_logits), and the
 * families zt had before. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/json.h"
#include "lib/model/llama.h"
#include "test.h"

static char fixtures[4096]; /* tests/fixtures/parity, found from this file's path */

static uint32_t name_seed(const char *name)
{
    uint32_t s = 0;
    for (size_t i = 0; name[i]; i++) s = (s + (uint32_t)(i + 1) * (unsigned char)name[i]) & 0xFFFF;
    return s;
}

/* element j of tensor `name`, as parity_model.py's weight() */
static float weight(const char *name, uint32_t seed, size_t j)
{
    uint32_t u = (uint32_t)j * 2654435761u + seed * 40503u + 12345u;
    u ^= u >> 15;
    u *= 2246822519u;
    u ^= u >> 13;
    double x = u / 4294967296.0 * 2 - 1;
    size_t n = strlen(name);
    int norm = n >= 11 && !strcmp(name + n - 11, "norm.weight"), bias = n >= 5 && !strcmp(name + n - 5, ".bias");
    return (float)(norm ? 1 + 0.5 * x : (bias ? 0.1 : 0.2) * x);
}

static size_t numel_of(const zt_llama_tensor *t) { return (size_t)t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1); }

/* A model of config c with make_parity.py's weights, in dtype (bf16: its copy made from them) */
static void init_model(zt_llama *m, const zt_llama_config *c, zt_dtype dtype)
{
    ZT_ASSERT(zt_llama_init(m, c, zt_backend_cpu(), dtype) == ZT_OK);
    for (int i = 0; i < m->n_tensors; i++) {
        const zt_llama_tensor *t = &m->tensors[i];
        uint32_t seed = name_seed(t->name);
        for (size_t j = 0; j < numel_of(t); j++) m->params[t->offset + j] = weight(t->name, seed, j);
    }
    if (dtype == ZT_BF16) zt_llama_sync_params16(m);
}

static double num(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key)->valuedouble; }

/* The loss of the batch with the model in bf16 against transformers' (torch_dtype bfloat16).
 * bf16 keeps 8 significant bits: each value rounded to it moves by up to 2^-9 ≈ 2e-3 of
 * itself. transformers rounds the weights and every activation between its ops to bf16 (the
 * residual stream, q, k, v, the attention's and the MLP's outputs; norms and softmax compute in
 * fp32 and round their outputs), zt the matrix products' operands alone (fp32 accumulation,
 * fp32 everywhere else), so the two differ by a few such roundings in series, which the loss,
 * a mean of log-softmaxes over 46 targets, averages: transformers' own bf16 loss is 2e-5 to
 * 1.1e-3 from its fp32 one on these models. The bound, 1e-2 relative, sits above that;
 * zt's bf16 loss must differ from its fp32 one (the products really ran on bf16).
 *
 * The gradients against zt's fp32 ones (ref), as each tensor's error norm over its norm: the bf16
 * path rounds every product's operands by up to 2^-9, so a product is off by about 3e-3 of its
 * size, but a gradient that sums many cancelling terms (norm weights, q/k norms, biases: a sum
 * over every token) keeps its terms' absolute error while its own size shrinks, and no bound
 * follows from the roundings alone. Measured on these models: 1.5e-2 to 8.1e-2 (gemma3's q_norm
 * the worst), the same to two digits at every ZT_CPU level (the operands round alike on every
 * path; the fp32 sums' order moves it by ~1e-6). A product fed a wrong bf16 copy of its input
 * (o_proj given another layer's) is off by 1.1 to 1.4. 0.25 sits 3x above the one and 4x below
 * the other. With activation checkpointing (the bf16 copies made again in the recompute) the
 * gradients must be the same bits.
 *
 * A mixture of experts' routing is a choice: where bf16's rounding reorders a token's nearly
 * equal expert probabilities, the token goes to another expert, whose weights' gradient then
 * gains the token's whole share as the first one's loses it (an expert here sees 24 tokens of
 * 48, so one token moves it by far more than rounding does). The experts of a layer are compared
 * together, which a moved token changes by its share of all of them; the router's gradient
 * (through the chosen weights) moves with its choices: mixtral's layer-1 router is the worst
 * tensor, 0.22, the same at every ZT_CPU level (the routing follows the bf16 roundings, which
 * are alike on every path); olmoe's 0.067, qwen3_moe's 0.015. */
static void check_bf16(const char *family, const zt_llama *ref, double want, double loss_fp32, int B, int T,
                       const int32_t *input, const int32_t *target, const int32_t *pos)
{
    zt_llama m;
    init_model(&m, &ref->cfg, ZT_BF16);
    double loss = 0, worst = 0;
    zt_real scale = (zt_real)(1.0 / (B * (T - 1)));
    zt_real *grads[2];
    for (int ckpt = 0; ckpt < 2; ckpt++) {
        ZT_ASSERT(zt_llama_alloc_acts(&m, B, T, ckpt) == ZT_OK);
        memset(m.grads, 0, m.numel * sizeof(zt_real));
        loss = 0;
        zt_llama_forward_backward(&m, input, target, pos, scale, &loss);
        loss += m.router_aux_weight * m.router_aux * (B * (T - 1));
        grads[ckpt] = malloc(m.numel * sizeof(zt_real));
        memcpy(grads[ckpt], m.grads, m.numel * sizeof(zt_real));
    }
    loss /= B * (T - 1);
    CHECK_MSG(fabs(loss - want) <= 1e-2 * want && loss != loss_fp32, "%s: bf16 loss %.9g, transformers %.9g, fp32 %.9g",
              family, loss, want, loss_fp32);
    printf("# %s: bf16 loss %.9g, transformers %.9g (relative %.2g; fp32 %.2g from transformers' bf16)\n", family, loss,
           want, fabs(loss - want) / want, fabs(loss_fp32 - want) / want);
    double experts_err = 0, experts_norm = 0; /* a layer's experts together (a mixture of experts) */
    for (int i = 0; i < m.n_tensors; i++) {
        const zt_llama_tensor *t = &m.tensors[i];
        const zt_real *g = grads[0] + t->offset, *r = ref->grads + t->offset;
        double err = 0, norm = 0;
        for (size_t j = 0; j < numel_of(t); j++) err += (g[j] - r[j]) * (g[j] - r[j]), norm += r[j] * r[j];
        int expert = strstr(t->name, ".experts.") != NULL;
        experts_err += err, experts_norm += norm;
        int last = !expert || i + 1 == m.n_tensors || !strstr(m.tensors[i + 1].name, ".experts.");
        if (expert && !last) continue;
        if (expert) err = experts_err, norm = experts_norm;
        experts_err = experts_norm = 0;
        double rel = norm > 0 ? sqrt(err / norm) : sqrt(err);
        CHECK_MSG(rel <= 0.25, "%s %s: bf16 gradient %.3g of the fp32 one's norm away from it", family,
                  expert ? "(the layer's experts)" : t->name, rel);
        worst = fmax(worst, rel);
    }
    CHECK_MSG(!memcmp(grads[0], grads[1], m.numel * sizeof(zt_real)),
              "%s: bf16 gradients with activation checkpointing differ", family);
    printf("# %s: bf16 gradients within %.2g of fp32's (norm of the difference over the norm, worst tensor)\n", family,
           worst);
    free(grads[0]);
    free(grads[1]);
    zt_llama_free(&m);
}

/* Tolerances: transformers and zt compute the same fp32 operations, summed in different orders
 * (BLAS blocking, torch's reductions against zt's double-accumulated norms and softmax). A sum
 * of K terms rounded in another order differs by about sqrt(K)·2⁻²⁴ relative, at most
 * K·2⁻²⁴; with K ≤ 96 here and a few such steps in series per layer that is ~1e-7 typical,
 * so the loss (one mean over 46 targets) gets 1e-6 relative. A gradient passes back through
 * twice as many steps, and a single element can sit near zero where its relative error is
 * large: elements are compared against the tensor's largest magnitude (zt's; an element's
 * rounding follows the size of the terms it sums, which the largest elements show: in a tied
 * embedding the rows of the batch's tokens sum large lookup and head terms while the other
 * rows get small head terms alone, so the root mean square sits far below them, and gemma3's
 * row 95 missed 1e-5 of it by 6% with OpenBLAS's Haswell and Zen kernels while passing with
 * Prescott's and SkylakeX's), sums against sqrt(n·Σg²) ≥ Σ|g|, both at 1e-5, the sum of
 * squares relative at 2e-5. */
static void check_family(const char *family)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s/config.json", fixtures, family);
    zt_llama_config cfg;
    zt_llama m;
    CHECK_MSG(zt_llama_config_load(&cfg, path) == ZT_OK, "%s", zt_errmsg());
    init_model(&m, &cfg, ZT_F32);
    snprintf(path, sizeof path, "%s/%s/expected.json", fixtures, family);
    cJSON *want;
    ZT_ASSERT(zt_json_read(path, &want) == ZT_OK);

    /* the loss and gradients of the batch: each row one document, targets the next token */
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(want, "input_ids");
    int B = cJSON_GetArraySize(rows), T = cJSON_GetArraySize(cJSON_GetArrayItem(rows, 0)), N = B * T;
    int32_t *input = malloc(3 * (size_t)N * sizeof(int32_t)), *target = input + N, *pos = target + N;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int i = b * T + t;
            input[i] = cJSON_GetArrayItem(cJSON_GetArrayItem(rows, b), t)->valueint;
            pos[i] = t;
        }
    for (int i = 0; i < N; i++) target[i] = i % T == T - 1 ? -100 : input[i + 1];
    ZT_ASSERT(zt_llama_alloc_acts(&m, B, T, 0) == ZT_OK);
    memset(m.grads, 0, m.numel * sizeof(zt_real));
    double loss = 0;
    zt_llama_forward_backward(&m, input, target, pos, (zt_real)(1.0 / (B * (T - 1))), &loss);
    loss =
        loss / (B * (T - 1)) + m.router_aux_weight * m.router_aux; /* transformers adds it with output_router_logits */
    double want_loss = num(want, "loss");
    CHECK_MSG(fabs(loss - want_loss) <= 1e-6 * want_loss, "%s: loss %.9g, transformers %.9g", family, loss, want_loss);
    printf("# %s: loss %.9g, transformers %.9g (relative %.2g)\n", family, loss, want_loss,
           fabs(loss - want_loss) / want_loss);
    check_bf16(family, &m, num(want, "loss_bf16"), loss, B, T, input, target, pos);

    const cJSON *grads = cJSON_GetObjectItemCaseSensitive(want, "grads");
    CHECK_MSG(cJSON_GetArraySize(grads) == m.n_tensors, "%s: %d tensors, transformers %d", family, m.n_tensors,
              cJSON_GetArraySize(grads));
    double worst = 0;
    for (int i = 0; i < m.n_tensors; i++) {
        const zt_llama_tensor *t = &m.tensors[i];
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(grads, t->name);
        CHECK_MSG(g, "%s: transformers has no %s", family, t->name);
        if (!g) continue;
        size_t n = numel_of(t);
        const zt_real *d = m.grads + t->offset;
        double sum = 0, sumsq = 0, hf_sumsq = num(g, "sumsq"), largest = 0;
        for (size_t j = 0; j < n; j++) sum += d[j], sumsq += (double)d[j] * d[j], largest = fmax(largest, fabs(d[j]));
        double e_sum = fabs(sum - num(g, "sum")) / sqrt(n * hf_sumsq), e_sq = fabs(sumsq - hf_sumsq) / hf_sumsq;
        CHECK_MSG(e_sum <= 1e-5 && e_sq <= 2e-5, "%s %s: sum %.9g / %.9g, sum of squares %.9g / %.9g", family, t->name,
                  sum, num(g, "sum"), sumsq, hf_sumsq);
        worst = fmax(worst, fmax(e_sum, e_sq / 2));
        const cJSON *s;
        cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(g, "samples"))
        {
            size_t j = (size_t)cJSON_GetArrayItem(s, 0)->valuedouble;
            double hf = cJSON_GetArrayItem(s, 1)->valuedouble, e = fabs(d[j] - hf) / fmax(fabs(hf), largest);
            CHECK_MSG(j < n && e <= 1e-5, "%s %s[%zu]: %.9g, transformers %.9g", family, t->name, j, (double)d[j], hf);
            worst = fmax(worst, e);
        }
    }
    printf("# %s: gradients within %.2g of transformers'\n", family, worst);

    /* greedy decoding */
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(want, "prompt"), *greedy;
    greedy = cJSON_GetObjectItemCaseSensitive(want, "greedy");
    int np = cJSON_GetArraySize(prompt), ng = cJSON_GetArraySize(greedy);
    zt_llama_cache cache;
    ZT_ASSERT(zt_llama_cache_init(&cache, &m, np + ng, 16, 1) == ZT_OK);
    zt_real *logits = malloc((size_t)m.V * sizeof(zt_real));
    int32_t tok[64];
    for (int i = 0; i < np; i++) tok[i] = cJSON_GetArrayItem(prompt, i)->valueint;
    ZT_ASSERT(zt_llama_decode(&m, &cache, tok, np, logits) == ZT_OK);
    for (int k = 0; k < ng; k++) {
        int32_t best = 0;
        for (int v = 1; v < m.V; v++)
            if (logits[v] > logits[best]) best = v;
        CHECK_MSG(best == cJSON_GetArrayItem(greedy, k)->valueint, "%s: greedy token %d is %d, transformers %d", family,
                  k, best, cJSON_GetArrayItem(greedy, k)->valueint);
        if (k + 1 < ng) ZT_ASSERT(zt_llama_decode(&m, &cache, &best, 1, logits) == ZT_OK);
    }
    free(logits);
    zt_llama_cache_free(&cache, &m);
    free(input);
    cJSON_Delete(want);
    zt_llama_free(&m);
}

/* The config.json zt writes from a family's fields alone (no source file to carry over) reads
 * back as the same fields: Phi-3's rotary keys and longrope's factors included. */
static void check_config_written(const char *family)
{
    char path[8192], dir[] = "/tmp/zt_test_parity_XXXXXX", out[64];
    snprintf(path, sizeof path, "%s/%s/config.json", fixtures, family);
    zt_llama_config a, b;
    ZT_ASSERT(zt_llama_config_load(&a, path) == ZT_OK && mkdtemp(dir));
    snprintf(out, sizeof out, "%s/config.json", dir);
    memset(a.path, 0, sizeof a.path);
    CHECK_MSG(zt_llama_config_save(&a, out, "float32") == ZT_OK, "%s", zt_errmsg());
    CHECK_MSG(zt_llama_config_load(&b, out) == ZT_OK, "%s", zt_errmsg());
    memset(b.path, 0, sizeof b.path);
    CHECK_MSG(!memcmp(&a, &b, sizeof a), "%s: the config.json zt wrote reads back otherwise", family);
    remove(out), remove(dir);
}

static void test_qwen3(void) { check_family("qwen3"); }
static void test_qwen3_tied(void) { check_family("qwen3-tied"); }
static void test_llama(void) { check_family("llama"); }     /* llama3 rope scaling, attention_bias */
static void test_mistral(void) { check_family("mistral"); } /* a window of 8 over rows of 24 */
static void test_qwen2(void) { check_family("qwen2"); }     /* q/k/v biases, tied */
/* Gemma 1: (1 + w) pre norms, the exact GELU of hidden_act "gelu" */
static void test_gemma(void)
{
    check_family("gemma");
    check_config_written("gemma");
}
/* GLM: interleaved rotary pairs on half of each head, q/k/v biases, gate_up_proj; GLM-4 with post norms */
static void test_glm(void)
{
    check_family("glm");
    check_config_written("glm");
}
static void test_glm4(void)
{
    check_family("glm4");
    check_config_written("glm4");
}
/* (1 + w) norms, GeGLU, a window of 8 on layer 0, query_pre_attn_scalar, both soft-cappings */
static void test_gemma2(void) { check_family("gemma2"); }
/* (1 + w) q/k norms, windows on 3 layers of 4 with their own rope theta, linear rope_scaling on the other */
static void test_gemma3(void) { check_family("gemma3"); }
/* Image-text models: a language model under language_model., a vision tower beside it. Gemma 3's
 * (gemma3's blocks), Mistral Small 3.1's (Mistral, untied), LLaVA's (Llama, tied); Qwen2.5-VL's below */
static void test_gemma3_vision(void) { check_family("gemma3-vision"); }
static void test_mistral3_vision(void) { check_family("mistral3-vision"); }
static void test_llava_vision(void) { check_family("llava-vision"); }
/* Qwen2.5-VL: a Qwen2 language model at the top with M-RoPE's rope_scaling, a visual.* tower beside it */
static void test_qwen2_5_vl_vision(void) { check_family("qwen2_5_vl-vision"); }

/* config.json of the parity fixture `family` with key's value set to json (JSON text), and key2's
 * to json2 unless key2 is NULL, loaded into c; the status, the message in *why */
static zt_status load_changed(zt_llama_config *c, const char *family, const char *key, const char *json,
                              const char *key2, const char *json2, char *why, size_t cap)
{
    char path[8192], dir[] = "/tmp/zt_test_parity_XXXXXX", out[64];
    snprintf(path, sizeof path, "%s/%s/config.json", fixtures, family);
    cJSON *o;
    ZT_ASSERT(zt_json_read(path, &o) == ZT_OK && mkdtemp(dir));
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    cJSON_AddItemToObject(o, key, cJSON_Parse(json));
    if (key2) cJSON_DeleteItemFromObjectCaseSensitive(o, key2), cJSON_AddItemToObject(o, key2, cJSON_Parse(json2));
    snprintf(out, sizeof out, "%s/config.json", dir);
    ZT_ASSERT(zt_json_write(out, o) == ZT_OK);
    zt_status st = zt_llama_config_load(c, out);
    snprintf(why, cap, "%s", st ? zt_errmsg() : "");
    cJSON_Delete(o);
    remove(out), remove(dir);
    return st;
}

static zt_status load_image_text(zt_llama_config *c, const char *family, const char *text, const char *eos, char *why,
                                 size_t cap)
{
    return load_changed(c, family, "text_config", text, eos ? "eos_token_id" : NULL, eos, why, cap);
}

/* A text_config that leaves keys out (gemma-3-4b-it's names no vocab_size, llava-1.5's no
 * hidden_size) takes its family's *Config defaults, as transformers 4.51.3 has them (Gemma3TextConfig,
 * MistralConfig, LlamaConfig), the text family the image-text model's own where it names none; the
 * top's token ids are not the language model's (gemma-3-4b-it's eos_token_id [1, 106]) */
static void test_image_text_defaults(void)
{
    zt_llama_config c;
    char why[512];
    CHECK_MSG(load_image_text(&c, "gemma3-vision", "{}", "[7, 106]", why, sizeof why) == ZT_OK, "%s", why);
    CHECK(c.image_text && !strcmp(c.model_type, "gemma3_text") && c.gemma && c.qk_norm == ZT_QK_NORM_HEADS);
    CHECK(c.vocab_size == 262208 && c.hidden_size == 2304 && c.intermediate_size == 9216 && c.num_hidden_layers == 26 &&
          c.num_attention_heads == 8 && c.num_key_value_heads == 4 && c.head_dim == 256);
    CHECK(c.max_position_embeddings == 131072 && c.rms_norm_eps == 1e-6 && c.rope_theta == 1e6 &&
          c.query_pre_attn_scalar == 256 && c.sliding_window == 4096 && c.sliding_window_pattern == 6 &&
          c.rope_local_theta == 10000 && c.tie_word_embeddings && !c.rope_scaling.type[0]);
    CHECK(c.bos_token_id == 2 && c.eos_token_id == 1 && c.pad_token_id == 0);
    CHECK(load_image_text(&c, "gemma3-vision", "{\"hidden_size\": 2560, \"eos_token_id\": 7}", NULL, why, sizeof why) ==
          ZT_OK);
    CHECK(c.hidden_size == 2560 && c.eos_token_id == 7 && c.num_hidden_layers == 26);

    CHECK_MSG(load_image_text(&c, "mistral3-vision", "{}", NULL, why, sizeof why) == ZT_OK, "%s", why);
    CHECK(c.image_text && !strcmp(c.model_type, "mistral") && !c.gemma && !c.qk_norm);
    CHECK(c.vocab_size == 32000 && c.hidden_size == 4096 && c.intermediate_size == 14336 && c.num_hidden_layers == 32 &&
          c.num_attention_heads == 32 && c.num_key_value_heads == 8 && c.head_dim == 128);
    CHECK(c.max_position_embeddings == 131072 && c.rms_norm_eps == 1e-6 && c.rope_theta == 10000 &&
          c.sliding_window == 4096 && !c.tie_word_embeddings);
    CHECK(c.bos_token_id == 1 && c.eos_token_id == 2 && c.pad_token_id == -1);
    CHECK(load_image_text(&c, "mistral3-vision", "{\"sliding_window\": null}", NULL, why, sizeof why) == ZT_OK &&
          c.sliding_window == 0); /* Mistral Small 3.1's: no window */

    CHECK_MSG(load_image_text(&c, "llava-vision", "{}", NULL, why, sizeof why) == ZT_OK, "%s", why);
    CHECK(c.image_text && !strcmp(c.model_type, "llama"));
    CHECK(c.vocab_size == 32000 && c.hidden_size == 4096 && c.intermediate_size == 11008 && c.num_hidden_layers == 32 &&
          c.num_attention_heads == 32 && c.num_key_value_heads == 32 && c.head_dim == 128);
    CHECK(c.max_position_embeddings == 2048 && c.rms_norm_eps == 1e-6 && c.rope_theta == 10000 && !c.sliding_window &&
          !c.tie_word_embeddings);
    CHECK(c.bos_token_id == 1 && c.eos_token_id == 2 && c.pad_token_id == -1);
    /* another family named in text_config: its own keys, required ones included */
    CHECK(load_image_text(&c, "llava-vision", "{\"model_type\": \"qwen2\"}", NULL, why, sizeof why) == ZT_EUSER);
    CHECK_MSG(strstr(why, "(text_config)': key 'vocab_size' is missing"), "%s", why);

    /* Qwen2.5-VL's: a qwen2 at the top; M-RoPE's rope_scaling ("mrope", or "default" with its sections,
       as transformers writes it back) the plain rotary embedding, another kind read as qwen2's */
    CHECK_MSG(load_changed(&c, "qwen2_5_vl-vision", "rope_scaling",
                           "{\"type\": \"mrope\", \"mrope_section\": [2, 1, 1]}", NULL, NULL, why, sizeof why) == ZT_OK,
              "%s", why);
    CHECK(c.image_text && !c.text_prefix[0] && !strcmp(c.model_type, "qwen2") && c.qkv_bias && !c.o_bias &&
          !c.rope_scaling.type[0] && !c.sliding_window && c.hidden_size == 32);
    CHECK(load_changed(&c, "qwen2_5_vl-vision", "rope_scaling", "{\"type\": \"linear\", \"factor\": 2.0}", NULL, NULL,
                       why, sizeof why) == ZT_OK &&
          !strcmp(c.rope_scaling.type, "linear") && c.rope_scaling.factor == 2);
    static const struct {
        const char *text, *says;
    } bad[] = {{"[]", "key 'text_config' must be an object"},
               {"{\"model_type\": \"siglip\"}", "key 'text_config.model_type' must name a language model zt trains"},
               {"{\"model_type\": \"gemma3\"}", "key 'text_config.model_type' must name a language model zt trains"},
               {"{\"model_type\": 3}", "key 'text_config.model_type' must name a language model zt trains"},
               {"{\"hidden_size\": -4}", "(text_config)': key 'hidden_size' must be a positive integer"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(load_image_text(&c, "gemma3-vision", bad[i].text, NULL, why, sizeof why) == ZT_EUSER);
        CHECK_MSG(strstr(why, bad[i].says), "%s: %s", bad[i].text, why);
    }
}

/* norms on the blocks' outputs only, q/k norms over the whole projections, "type": "linear" rope_scaling */
static void test_olmo2(void) { check_family("olmo2"); }
/* fused qkv_proj and gate_up_proj, rotary on 12 of 16 elements, longrope's long factors, a window of 8 */
static void test_phi3(void)
{
    check_family("phi3");
    check_config_written("phi3");
}
/* Phi-4-mini's shape: tied, partial rotary, longrope's short factors, one key/value head */
static void test_phi3_tied(void)
{
    check_family("phi3-tied");
    check_config_written("phi3-tied");
}

/* SmolLM3: layer 0 without rotary embedding (no_rope_layers), untied */
static void test_smollm3(void)
{
    check_family("smollm3");
    check_config_written("smollm3");
}

/* SmolLM3's defaults (tied: the config transformers wrote leaves the key out), and the no-rope layers its
 * no_rope_layer_interval gives when the config has no list: the list transformers derived from it */
static void test_smollm3_tied(void)
{
    check_family("smollm3-tied");
    check_config_written("smollm3-tied");
    char path[8192], dir[] = "/tmp/zt_test_parity_XXXXXX", out[64];
    snprintf(path, sizeof path, "%s/smollm3-tied/config.json", fixtures);
    zt_llama_config listed, derived;
    cJSON *o;
    ZT_ASSERT(zt_llama_config_load(&listed, path) == ZT_OK && zt_json_read(path, &o) == ZT_OK && mkdtemp(dir));
    cJSON_DeleteItemFromObjectCaseSensitive(o, "no_rope_layers");
    snprintf(out, sizeof out, "%s/config.json", dir);
    ZT_ASSERT(zt_json_write(out, o) == ZT_OK);
    CHECK_MSG(zt_llama_config_load(&derived, out) == ZT_OK, "%s", zt_errmsg());
    CHECK(listed.n_no_rope_layers == 3 && derived.n_no_rope_layers == 0);
    for (int l = 0; l < 3; l++)
        CHECK_MSG(zt_llama_layer_rope(&derived, l) == listed.no_rope_layers[l], "layer %d: rotary %d, listed %d", l,
                  zt_llama_layer_rope(&derived, l), listed.no_rope_layers[l]);
    CHECK(listed.tie_word_embeddings && !zt_llama_layer_rope(&listed, 1));
    cJSON_Delete(o);
    remove(out), remove(dir);
}

/* Granite: embeddings, scores, blocks' outputs and logits scaled by their multipliers, attention_bias */
static void test_granite(void)
{
    check_family("granite");
    check_config_written("granite");
}
/* Granite 3's multipliers, tied, one key/value head */
static void test_granite_tied(void)
{
    check_family("granite-tied");
    check_config_written("granite-tied");
}

/* Mixtral: 4 experts, 2 a token renormalised, a window of 8 */
static void test_mixtral(void)
{
    check_family("mixtral");
    check_config_written("mixtral");
}
/* Qwen2-MoE: 2 of 6 experts at their softmax weights and a shared expert behind a sigmoid gate */
static void test_qwen2_moe(void)
{
    check_family("qwen2_moe");
    check_config_written("qwen2_moe");
}
/* Qwen3-MoE: moe_intermediate_size, 3 of 8 experts renormalised, the load-balancing loss in the loss */
static void test_qwen3_moe(void)
{
    check_family("qwen3_moe");
    check_config_written("qwen3_moe");
}
/* OLMoE: whole-projection q/k norms, 2 of 6 experts at their softmax weights, the load-balancing loss */
static void test_olmoe(void)
{
    check_family("olmoe");
    check_config_written("olmoe");
}

int main(void)
{
    snprintf(fixtures, sizeof fixtures, "%s", __FILE__);
    char *slash = strrchr(fixtures, '/');
    snprintf(slash ? slash + 1 : fixtures, sizeof fixtures - (size_t)(slash ? slash + 1 - fixtures : 0),
             "../fixtures/parity");
    RUN(test_qwen3);
    RUN(test_qwen3_tied);
    RUN(test_llama);
    RUN(test_mistral);
    RUN(test_qwen2);
    RUN(test_gemma);
    RUN(test_glm);
    RUN(test_glm4);
    RUN(test_gemma2);
    RUN(test_gemma3);
    RUN(test_gemma3_vision);
    RUN(test_mistral3_vision);
    RUN(test_llava_vision);
    RUN(test_qwen2_5_vl_vision);
    RUN(test_image_text_defaults);
    RUN(test_olmo2);
    RUN(test_phi3);
    RUN(test_phi3_tied);
    RUN(test_smollm3);
    RUN(test_smollm3_tied);
    RUN(test_granite);
    RUN(test_granite_tied);
    RUN(test_mixtral);
    RUN(test_qwen2_moe);
    RUN(test_qwen3_moe);
    RUN(test_olmoe);
    return test_summary();
}
