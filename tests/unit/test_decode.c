/* Generation with a KV cache computes what the training forward computes: the
 * summed next-token loss of a sequence fed one token at a time (or in chunks)
 * equals the loss of the full forward pass; with LoRA adapters too (Phi-3's on its fused
 * qkv_proj and gate_up_proj), and with a mixture of experts' routing decided row by row.
 * Sequences decoded side by side (zt_llama_decode_slots) give
 * each the logits it gets decoded alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/model/llama.h"
#include "lib/model/lora.h"
#include "test.h"

enum { T = 13 };

static double row_loss(const float *logits, int V, int target)
{
    double mx = logits[0], s = 0;
    for (int v = 1; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    for (int v = 0; v < V; v++) s += exp(logits[v] - mx);
    return mx + log(s) - logits[target];
}

/* GRPO's side-by-side decoding: a prompt in slot 0, forked into 3 slots, each continued with
 * tokens of its own, slot 1 leaving the batch after 3 steps; every row's logits must be those of
 * its slot's sequence decoded alone, within the prefill's tolerance below (other row counts,
 * other orders of the same sums). */
static void check_slots(zt_llama *m, int chunk)
{
    enum { P = 5, STEPS = 6, S = 3 };
    zt_llama_cache many, one;
    ZT_ASSERT(zt_llama_cache_init(&many, m, T, chunk > S ? chunk : S, S) == ZT_OK);
    ZT_ASSERT(zt_llama_cache_init(&one, m, T, chunk, 1) == ZT_OK);
    int32_t prompt[P], tok[S][STEPS];
    for (int i = 0; i < P; i++) prompt[i] = (i * 13 + 2) % 50;
    for (int s = 0; s < S; s++)
        for (int j = 0; j < STEPS; j++) tok[s][j] = (7 * s + 11 * j + 3) % 50;
    float got[S * 50], want[50];
    CHECK(zt_llama_decode(m, &many, prompt, P, want) == ZT_OK);
    zt_llama_cache_fork(&many, m, 0, S);
    double worst = 0;
    for (int j = 0; j < STEPS; j++) {
        int slots[S], n = 0;
        int32_t next[S];
        for (int s = 0; s < S; s++)
            if (j < 3 || s != 1) slots[n] = s, next[n++] = tok[s][j];
        CHECK(zt_llama_decode_slots(m, &many, slots, next, n, got) == ZT_OK);
        for (int i = 0; i < n; i++) {
            zt_llama_cache_reset(&one);
            CHECK(zt_llama_decode(m, &one, prompt, P, want) == ZT_OK);
            for (int k = 0; k <= j; k++) CHECK(zt_llama_decode(m, &one, &tok[slots[i]][k], 1, want) == ZT_OK);
            for (int v = 0; v < 50; v++) worst = fmax(worst, fabs(got[i * 50 + v] - want[v]));
        }
    }
    CHECK_MSG(worst < 1e-4, "side-by-side logits differ from one sequence's by %g", worst);
    CHECK(many.lens[0] == P + STEPS && many.lens[1] == P + 3 && many.lens[2] == P + STEPS);
    zt_llama_cache_free(&many, m);
    zt_llama_cache_free(&one, m);
}

static void check(const char *model_type, int window, int chunk, int lora)
{
    zt_llama_config c;
    zt_llama_config_default(&c);
    c.vocab_size = 50, c.hidden_size = 32, c.intermediate_size = 48, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 8;
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", model_type) == ZT_OK);
    c.sliding_window = window;
    if (!strcmp(model_type, "phi3")) { /* rotary on 6 of 8, longrope's long factors (13 tokens past 8) */
        ZT_ASSERT(zt_llama_config_set(&c, "partial_rotary_factor", "0.75") == ZT_OK);
        strcpy(c.rope_scaling.type, "longrope");
        c.rope_scaling.original_max_position_embeddings = 8;
        c.rope_scaling.n_short = c.rope_scaling.n_long = 3;
        for (int j = 0; j < 3; j++) c.rope_scaling.short_factor[j] = 1 + j, c.rope_scaling.long_factor[j] = 2 + 3 * j;
    }
    if (c.n_experts) /* 4 experts of 24, 2 a token */
        c.n_experts = 4, c.experts_per_tok = 2, c.moe_intermediate_size = 24, c.intermediate_size = 24;
    if (!strcmp(model_type, "smollm3")) /* layer 1 without rotary embedding */
        ZT_ASSERT(zt_llama_config_set(&c, "no_rope_layer_interval", "2") == ZT_OK);
    if (!strcmp(model_type, "granite")) /* every multiplier other than 1 */
        c.embedding_multiplier = 2, c.attention_multiplier = 0.2, c.residual_multiplier = 0.5, c.logits_scaling = 1.5;
    zt_llama m;
    ZT_ASSERT(zt_llama_init(&m, &c, zt_backend_cpu(), ZT_F32) == ZT_OK);
    zt_llama_init_weights(&m, 3, 0.3);
    for (int i = 0; i < m.n_tensors; i++) /* biases and norms away from 0 and 1 */
        if (m.tensors[i].ndim == 1)
            for (int64_t j = 0; j < m.tensors[i].shape[0]; j++) m.params[m.tensors[i].offset + j] += 0.2f * sinf(j + i);
    if (lora) { /* adapters on every linear module, B away from 0 */
        zt_lora_config lc = {.r = 2, .alpha = 4, .targets = ZT_LORA_ALL};
        ZT_ASSERT(zt_lora_attach(&m, &lc) == ZT_OK && zt_lora_init_weights(&m, 7) == ZT_OK);
        zt_llama *v = &m.lora->view;
        for (size_t i = 0; i < v->numel; i++)
            if (v->params[i] == 0) v->params[i] = 0.3f * sinf(0.7f * (float)i + 1);
    }
    int32_t in[T], tg[T], pos[T];
    for (int t = 0; t < T; t++) in[t] = (t * 17 + 5) % 50, pos[t] = t;
    for (int t = 0; t < T; t++) tg[t] = t + 1 < T ? in[t + 1] : -100;
    ZT_ASSERT(zt_llama_alloc_acts(&m, 1, T, 0) == ZT_OK);
    double full = 0;
    zt_llama_forward_backward(&m, in, tg, pos, 0, &full);

    zt_llama_cache cache;
    ZT_ASSERT(zt_llama_cache_init(&cache, &m, T, chunk, 1) == ZT_OK);
    float logits[50], last_stepwise[50];
    double stepwise = 0;
    for (int t = 0; t + 1 < T; t++) {
        CHECK(zt_llama_decode(&m, &cache, &in[t], 1, logits) == ZT_OK);
        stepwise += row_loss(logits, 50, in[t + 1]);
    }
    memcpy(last_stepwise, logits, sizeof logits);
    /* Both are fp32 evaluations of the same function in other orders: decoding multiplies one
     * row at a time, the forward all 13 (OpenBLAS picks its kernels by shape), and attention
     * sums over the cache its own way. Each dot product has at most 48 terms, so it is within
     * 48·2⁻²⁴ ≈ 3e-6 of Σ|terms| (about 6 for the head: 32 normalised inputs times weights of
     * 0.3); the two layers' errors reach the head through the final norm, so a logit is within
     * about 1e-4 worst case, and each of the 12 losses (≈ log 50 ≈ 4) within twice that: 1e-4
     * relative for the sum, 1e-4 absolute for the logits. Measured: 8e-8 and 2.4e-6 (OpenBLAS's
     * Haswell and Zen kernels), 5e-8 and 0 (Prescott, SkylakeX). */
    CHECK_MSG(fabs(stepwise - full) < 1e-4 * full, "%s window %d: stepwise %.7f, full forward %.7f", model_type, window,
              stepwise, full);
    zt_llama_cache_reset(&cache);
    CHECK(zt_llama_decode(&m, &cache, in, T - 1, logits) == ZT_OK); /* a prefill in chunks */
    double worst = 0;
    for (int v = 0; v < 50; v++) worst = fmax(worst, fabs(logits[v] - last_stepwise[v]));
    CHECK_MSG(worst < 1e-4, "prefill logits differ from stepwise by %g", worst);
    CHECK(zt_llama_decode(&m, &cache, in, 2, logits) == ZT_EUSER); /* past the capacity */
    zt_llama_cache_free(&cache, &m);
    check_slots(&m, chunk);
    zt_llama_free(&m);
}

static void test_llama(void) { check("llama", 0, 4, 0); }
static void test_qwen2_bias(void) { check("qwen2", 0, 5, 0); }
static void test_sliding_window(void) { check("mistral", 3, 16, 0); }
static void test_olmo2_norms(void) { check("olmo2", 0, 3, 0); } /* post norms only, whole-projection q/k norms */
static void test_phi3(void) { check("phi3", 5, 4, 0); }         /* partial rotary, longrope, a window */
static void test_smollm3(void) { check("smollm3", 0, 4, 0); }   /* a layer without rotary embedding */
static void test_granite(void) { check("granite", 0, 4, 1); }   /* scaled blocks, with adapters inside them */
static void test_lora(void) { check("llama", 0, 4, 1); }
static void test_experts(void)
{
    check("qwen3_moe", 0, 4, 0);
    check("mixtral", 3, 5, 0);
    check("olmoe", 0, 16, 0);
}
static void test_lora_phi3(void) { check("phi3", 5, 4, 1); }

int main(void)
{
    RUN(test_llama);
    RUN(test_qwen2_bias);
    RUN(test_sliding_window);
    RUN(test_olmo2_norms);
    RUN(test_phi3);
    RUN(test_smollm3);
    RUN(test_granite);
    RUN(test_lora);
    RUN(test_experts);
    RUN(test_lora_phi3);
    return test_summary();
}
