/* Whole-model gradient check: the CPU kernels and the model compiled with
 * zt_real = double; every parameter's gradient against central finite
 * differences of the summed cross-entropy, on a packed batch of 3 documents (and with
 * NEFTune's noise on the embeddings; a mixture of experts' load-balancing loss added). */
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "lib/model/llama.h"
#include "test.h"

enum { B = 2, T = 10 };

/* row 0: documents of 4 and 6 tokens; row 1: a document of 7 tokens and 3 of padding */
static int32_t input[B * T], target[B * T], pos[B * T];
static const int32_t row_lens[B] = {T, 7}; /* the tokens before the padding */

static void make_batch(int vocab)
{
    int docs[][3] = {{0, 0, 4}, {0, 4, 10}, {1, 0, 7}}; /* row, start, end */
    for (int i = 0; i < B * T; i++) input[i] = (i * 7 + 3) % vocab, target[i] = -100, pos[i] = 0;
    for (int d = 0; d < 3; d++) {
        int r = docs[d][0], s = docs[d][1], e = docs[d][2];
        for (int t = s; t < e; t++) {
            pos[r * T + t] = t - s;
            if (t + 1 < e) target[r * T + t] = input[r * T + t + 1];
        }
    }
    for (int t = 7; t < T; t++) pos[T + t] = t - 7; /* padding is its own pseudo-document */
}

static zt_llama_config tiny_config(void)
{
    zt_llama_config c;
    zt_llama_config_default(&c);
    c.vocab_size = 11, c.hidden_size = 8, c.intermediate_size = 12, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 4, c.rms_norm_eps = 1e-5;
    return c;
}

/* NEFTune's alpha for check_model: its noise is drawn in gradient passes only, so with it on
 * the differences are of gradient passes that draw pass 0's noise (the gradient pass of the
 * analytic gradients), each with a gradient scale of 1e-300 that adds nothing measurable. */
static double neftune;

static double loss_of(zt_llama *m)
{
    double loss = 0;
    m->pass = 0;
    zt_llama_forward_backward(m, input, target, pos, neftune > 0 ? 1e-300 : 0, &loss);
    return loss + m->router_aux_weight * m->router_aux;
}

/* Returns the worst error relative to max(1e-2, |gradient|) over all parameters; tiles: the
 * embedding, each MLP and the LM head computed in that many tiles. Central differences in
 * double with a step of 1e-6: rounding about 2⁻⁵³·|loss|/h ≈ 1e-10·|loss| (the loss is near
 * log V ≈ 4), truncation h²/6·|f'''| ≈ 2e-13·|f'''|; against the floor 1e-2 that is 4e-8 plus
 * 2e-11·|f'''|, so 1e-5 admits third derivatives up to about 1e5 (a model of two layers with
 * weights of 0.5 has far smaller ones) and still catches any wrong term. */
static const int untiled[3] = {1, 1, 1};

static double check_model(zt_llama_config c, int checkpointing, uint64_t seed, const int tiles[3])
{
    zt_llama m;
    ZT_ASSERT(zt_llama_init(&m, &c, zt_backend_cpu(), ZT_F32) == ZT_OK);
    m.embed_tiles = tiles[0], m.mlp_tiles = tiles[1], m.head_tiles = tiles[2];
    ZT_ASSERT(zt_llama_alloc_acts(&m, B, T, checkpointing) == ZT_OK);
    zt_llama_init_weights(&m, seed, 0.5);
    m.neftune_alpha = neftune, m.draw_seed = seed;
    m.row_lens = row_lens;
    /* norm weights and biases away from their init values, so their gradients are generic */
    for (int i = 0; i < m.n_tensors; i++)
        if (m.tensors[i].ndim == 1)
            for (int64_t j = 0; j < m.tensors[i].shape[0]; j++)
                m.params[m.tensors[i].offset + j] = 1 + 0.3 * sin(1.7 * j + i);
    make_batch(c.vocab_size);
    double loss = 0;
    memset(m.grads, 0, m.numel * sizeof(double));
    m.pass = 0;
    zt_llama_forward_backward(&m, input, target, pos, 1, &loss);
    double worst = 0;
    const double eps = 1e-6;
    for (size_t i = 0; i < m.numel; i += TEST_SAN_STRIDE) {
        double keep = m.params[i];
        m.params[i] = keep + eps;
        double lp = loss_of(&m);
        m.params[i] = keep - eps;
        double lm = loss_of(&m);
        m.params[i] = keep;
        double fd = (lp - lm) / (2 * eps), an = m.grads[i];
        double err = fabs(fd - an) / fmax(1e-2, fabs(an));
        if (err > worst) worst = err;
    }
    CHECK_MSG(loss > 0 && isfinite(loss), "loss %g", loss);
    zt_llama_free(&m);
    return worst;
}

static void test_untied(void)
{
    zt_llama_config c = tiny_config();
    double e = check_model(c, 0, 1, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
}

static void test_tiles(void)
{
    zt_llama_config c = tiny_config();
    /* tiles of unequal size: the vocabulary, the hidden size and 2 × intermediate do not divide */
    double e = check_model(c, 1, 6, (int[3]){1, 1, 3});
    CHECK_MSG(e < 1e-5, "head: worst relative error %g", e);
    e = check_model(c, 0, 7, (int[3]){3, 3, 1});
    CHECK_MSG(e < 1e-5, "embedding and MLP: worst relative error %g", e);
    e = check_model(c, 1, 8, (int[3]){2, 5, 4});
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
}

static void test_tied(void)
{
    zt_llama_config c = tiny_config();
    c.tie_word_embeddings = 1;
    double e = check_model(c, 0, 2, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
}

static void test_checkpointing(void)
{
    zt_llama_config c = tiny_config();
    double e = check_model(c, 1, 3, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
    c.tie_word_embeddings = 1;
    e = check_model(c, 1, 4, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error (tied) %g", e);
}

static void test_qwen2_bias_and_window(void)
{
    zt_llama_config c = tiny_config();
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "qwen2") == ZT_OK);
    c.sliding_window = 3;
    double e = check_model(c, 0, 5, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
}

/* q/k norms with an explicit head_dim other than hidden / heads, and attention_bias */
static void test_qwen3(void)
{
    zt_llama_config c = tiny_config();
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "qwen3") == ZT_OK);
    ZT_ASSERT(zt_llama_config_set(&c, "attention_bias", "true") == ZT_OK);
    c.head_dim = 6;
    double e = check_model(c, 0, 9, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
    c.tie_word_embeddings = 1;
    e = check_model(c, 1, 10, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error (tied, checkpointing) %g", e);
}

/* NEFTune's noise on the embedding's output (before Gemma's scale): the gradient is that of the
 * loss at the noised embeddings, the same noise in every pass that draws for pass 0. An alpha of
 * 20 against T·C = 80 moves embeddings of 0.5 by up to 2.2. */
static void test_neftune(void)
{
    zt_llama_config c = tiny_config();
    neftune = 20;
    double e = check_model(c, 1, 19, (int[3]){2, 1, 1});
    CHECK_MSG(e < 1e-5, "worst relative error (checkpointing, embedding tiles) %g", e);
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "gemma2") == ZT_OK);
    e = check_model(c, 0, 20, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error (Gemma 2) %g", e);
    neftune = 0;
}

/* GLM: half of each head rotated in interleaved pairs, q/k/v biases alone; GLM-4 adds norms on the
 * blocks' outputs; untied then tied, with checkpointing and tiles */
static void test_glm(void)
{
    zt_llama_config c = tiny_config();
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "glm") == ZT_OK);
    ZT_ASSERT(zt_llama_config_set(&c, "attention_bias", "true") == ZT_OK);
    c.head_dim = 8, c.tie_word_embeddings = 0;
    double e = check_model(c, 0, 23, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error (glm) %g", e);
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "glm4") == ZT_OK);
    c.head_dim = 8, c.tie_word_embeddings = 1, c.partial_rotary_factor = 0.75;
    e = check_model(c, 1, 24, (int[3]){2, 3, 2});
    CHECK_MSG(e < 1e-5, "worst relative error (glm4, checkpointing, tiles) %g", e);
}

/* Gemma 1: (1 + w) pre norms, scaled embeddings, GeGLU with the exact gelu (hidden_act "gelu");
 * tied, then untied with checkpointing and tiles */
static void test_gemma(void)
{
    zt_llama_config c = tiny_config();
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "gemma") == ZT_OK);
    ZT_ASSERT(zt_llama_config_set(&c, "hidden_act", "gelu") == ZT_OK);
    c.head_dim = 6;
    double e = check_model(c, 0, 25, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error (tied) %g", e);
    c.tie_word_embeddings = 0;
    e = check_model(c, 1, 26, (int[3]){2, 3, 2});
    CHECK_MSG(e < 1e-5, "worst relative error (untied, checkpointing, tiles) %g", e);
}

/* Gemma 2: its four (1 + w) norms a layer, scaled embeddings, GeGLU, a window of 3 on layer 0
 * only, a score scale of query_pre_attn_scalar, soft-capping small enough to bend scores and
 * logits; tied and untied, with checkpointing and tiles */
static void test_gemma2(void)
{
    zt_llama_config c = tiny_config();
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "gemma2") == ZT_OK);
    ZT_ASSERT(zt_llama_config_set(&c, "attention_bias", "true") == ZT_OK);
    c.head_dim = 6, c.sliding_window = 3, c.query_pre_attn_scalar = 5;
    c.attn_softcap = 1.5, c.final_softcap = 2;
    double e = check_model(c, 0, 11, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error (tied) %g", e);
    c.tie_word_embeddings = 0;
    e = check_model(c, 1, 12, (int[3]){2, 3, 2});
    CHECK_MSG(e < 1e-5, "worst relative error (untied, checkpointing, tiles) %g", e);
}

/* Gemma 3: (1 + w) q/k norms, three layers with sliding_window_pattern 3 (windows and the local
 * rope theta on layers 0 and 1, linear rope_scaling on layer 2), final-logit soft-capping when set */
static void test_gemma3(void)
{
    zt_llama_config c = tiny_config();
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "gemma3_text") == ZT_OK);
    c.num_hidden_layers = 3, c.head_dim = 6, c.sliding_window = 3, c.sliding_window_pattern = 3;
    c.query_pre_attn_scalar = 5, c.rope_local_theta = 100;
    strcpy(c.rope_scaling.type, "linear"), c.rope_scaling.factor = 2;
    double e = check_model(c, 1, 13, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
    c.final_softcap = 2, c.tie_word_embeddings = 0;
    e = check_model(c, 0, 14, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error (soft-capped, untied) %g", e);
}

/* OLMo 2: no pre norms, a norm on each block's output, q/k norms over the whole projections
 * (head_dim 6: q 24 wide and k 12 against a hidden size of 8), attention_bias; untied and
 * tied, with checkpointing and tiles */
static void test_olmo2(void)
{
    zt_llama_config c = tiny_config();
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "olmo2") == ZT_OK);
    ZT_ASSERT(zt_llama_config_set(&c, "attention_bias", "true") == ZT_OK);
    c.head_dim = 6;
    c.pad_token_id = -1; /* Olmo2Config's 1 is in the batch: its row gets no lookup gradient (padding_idx) */
    double e = check_model(c, 0, 15, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
    c.tie_word_embeddings = 1;
    e = check_model(c, 1, 16, (int[3]){1, 3, 1});
    CHECK_MSG(e < 1e-5, "worst relative error (tied, checkpointing, tiles) %g", e);
}

/* Phi-3: rotary on 4 of head_dim 6 (partial_rotary_factor 2/3), longrope past its original length
 * of 8 (T = 10: the long factors, and cos/sin scaled by the attention factor of a 16-fold
 * context), a window of 3; untied, then tied with checkpointing and tiles with the short factors */
static void test_phi3(void)
{
    zt_llama_config c = tiny_config();
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "phi3") == ZT_OK);
    ZT_ASSERT(zt_llama_config_set(&c, "partial_rotary_factor", "0.6667") == ZT_OK);
    c.head_dim = 6, c.sliding_window = 3, c.max_position_embeddings = 128;
    strcpy(c.rope_scaling.type, "longrope");
    c.rope_scaling.original_max_position_embeddings = 8;
    c.rope_scaling.n_short = c.rope_scaling.n_long = 2;
    c.rope_scaling.short_factor[0] = 1.2, c.rope_scaling.short_factor[1] = 3;
    c.rope_scaling.long_factor[0] = 2, c.rope_scaling.long_factor[1] = 7;
    double e = check_model(c, 0, 17, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
    c.tie_word_embeddings = 1, c.rope_scaling.original_max_position_embeddings = 16;
    e = check_model(c, 1, 18, (int[3]){1, 3, 1});
    CHECK_MSG(e < 1e-5, "worst relative error (tied, checkpointing, tiles, short factors) %g", e);
}

static void test_llama_bias_rope_scaling(void)
{
    zt_llama_config c = tiny_config();
    ZT_ASSERT(zt_llama_config_set(&c, "attention_bias", "true") == ZT_OK);
    strcpy(c.rope_scaling.type, "llama3");
    c.rope_scaling.factor = 8, c.rope_scaling.low_freq_factor = 1, c.rope_scaling.high_freq_factor = 4;
    c.rope_scaling.original_max_position_embeddings = 16;
    c.rope_theta = 500000;
    double e = check_model(c, 1, 6, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
}

/* SmolLM3: layer 1 of 2 without rotary embedding; untied, then tied with checkpointing and tiles */
static void test_smollm3(void)
{
    zt_llama_config c = tiny_config();
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "smollm3") == ZT_OK);
    ZT_ASSERT(zt_llama_config_set(&c, "no_rope_layer_interval", "2") == ZT_OK);
    c.tie_word_embeddings = 0;
    double e = check_model(c, 0, 19, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
    c.tie_word_embeddings = 1;
    e = check_model(c, 1, 20, (int[3]){1, 3, 1});
    CHECK_MSG(e < 1e-5, "worst relative error (tied, checkpointing, tiles) %g", e);
}

/* Granite: embeddings, attention scores, each block's output and the logits scaled by their
 * multipliers (the attention's output bias inside its block's scale); untied with biases, then
 * tied with checkpointing and tiles */
static void test_granite(void)
{
    zt_llama_config c = tiny_config();
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", "granite") == ZT_OK);
    c.embedding_multiplier = 1.7, c.attention_multiplier = 0.3, c.residual_multiplier = 0.6, c.logits_scaling = 2.5;
    c.qkv_bias = c.o_bias = 1;
    double e = check_model(c, 0, 23, untiled);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
    c.qkv_bias = c.o_bias = 0, c.tie_word_embeddings = 1;
    e = check_model(c, 1, 24, (int[3]){2, 3, 2});
    CHECK_MSG(e < 1e-5, "worst relative error (tied, checkpointing, tiles) %g", e);
}

/* Mixtures of experts: the router's softmax, top-k and (qwen3_moe) the chosen weights' division by
 * their sum, the experts' products on their rows, Qwen2-MoE's shared expert behind its sigmoid
 * gate, and the load-balancing loss (weight 0.3, the padding left out) — through OLMoE's
 * whole-projection q/k norms, with and without checkpointing.
 * A choice flips only where a token's k-th and next probabilities come within the step's effect,
 * 1e-6 of a weight: the random weights put none of the 20 tokens there. Mixtral with one expert
 * a token: its renormalised weight is 1, so its router learns from the load-balancing loss alone. */
static void test_experts(void)
{
    const char *family[] = {"qwen3_moe", "olmoe", "mixtral", "qwen2_moe"};
    int experts[] = {4, 3, 4, 3}, per_token[] = {2, 2, 1, 2};
    for (int f = 0; f < 4; f++) {
        zt_llama_config c = tiny_config();
        ZT_ASSERT(zt_llama_config_set(&c, "model_type", family[f]) == ZT_OK);
        c.n_experts = experts[f], c.experts_per_tok = per_token[f], c.moe_intermediate_size = 6;
        c.intermediate_size = 6, c.head_dim = 2, c.output_router_logits = 1, c.router_aux_loss_coef = 0.3;
        c.norm_topk_prob = f != 1 && f != 3, c.pad_token_id = -1; /* OLMoE's default 1 takes no embedding gradient */
        c.shared_expert_size = f == 3 ? 5 : 0;
        for (int ckpt = 0; ckpt < 2; ckpt++) {
            double e = check_model(c, ckpt, 20 + f, untiled);
            CHECK_MSG(e < 1e-5, "%s (checkpointing %d): worst relative error %g", family[f], ckpt, e);
        }
    }
}

int main(void)
{
    RUN(test_untied); /* with the default threads; the rest on one (thousands of tiny passes) */
    omp_set_num_threads(1);
    RUN(test_tied);
    RUN(test_tiles);
    RUN(test_checkpointing);
    RUN(test_qwen2_bias_and_window);
    RUN(test_llama_bias_rope_scaling);
    RUN(test_qwen3);
    RUN(test_gemma);
    RUN(test_glm);
    RUN(test_gemma2);
    RUN(test_gemma3);
    RUN(test_olmo2);
    RUN(test_phi3);
    RUN(test_smollm3);
    RUN(test_granite);
    RUN(test_neftune);
    RUN(test_experts);
    return test_summary();
}
