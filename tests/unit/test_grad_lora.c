/* LoRA gradient check: the model and its adapters compiled with zt_real = double; the
 * gradients of every A and B, and of the input of every layer (through the frozen weights
 * and the adapters, seen in the embedding's gradient and the base weights' gradients below
 * each adapter), against central finite differences of the summed cross-entropy on a packed
 * batch of 3 documents, with and without activation checkpointing and dropout. DoRA likewise:
 * A, B, the magnitudes and the layers' inputs. The same for Phi-3's fused qkv_proj and
 * gate_up_proj adapters, and for mixtures of experts' adapters on every expert and the router. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/model/llama.h"
#include "lib/model/lora.h"
#include "test.h"

enum { B = 2, T = 10 };

/* row 0: documents of 4 and 6 tokens; row 1: a document of 7 tokens and 3 of padding */
static int32_t input[B * T], target[B * T], pos[B * T];

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
    for (int t = 7; t < T; t++) pos[T + t] = t - 7;
}

/* the 2-layer GQA model: 4 query heads sharing 2 key/value heads; phi3: the same with q, k, v
 * and gate, up fused (one adapter each over the fused output, as PEFT's on Phi-3) */
static zt_llama_config tiny_config(const char *model_type)
{
    zt_llama_config c;
    zt_llama_config_default(&c);
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", model_type) == ZT_OK);
    c.vocab_size = 11, c.hidden_size = 8, c.intermediate_size = 12, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 4, c.rms_norm_eps = 1e-5;
    if (c.n_experts) { /* 3 experts of 6, 2 a token, the load-balancing loss at 0.3; a shared expert of 5 */
        c.n_experts = 3, c.experts_per_tok = 2, c.moe_intermediate_size = c.intermediate_size = 6;
        c.output_router_logits = 1, c.router_aux_loss_coef = 0.3, c.pad_token_id = -1;
        c.shared_expert_size = c.shared_expert_size ? 5 : 0;
    }
    if (!strcmp(model_type, "granite")) /* the adapters inside scaled blocks, under scaled logits */
        c.embedding_multiplier = 1.7, c.attention_multiplier = 0.3, c.residual_multiplier = 0.6, c.logits_scaling = 2.5;
    return c;
}

/* The loss of a training pass that draws dropout pass 0's masks: a gradient pass (dropout is
 * on only there) with a gradient scale of 1e-300, whose gradient adds nothing measurable. */
static double loss_of(zt_llama *m)
{
    double loss = 0;
    m->pass = 0;
    zt_llama_forward_backward(m, input, target, pos, 1e-300, &loss);
    return loss + m->router_aux_weight * m->router_aux;
}

/* Worst error relative to max(1e-2, |gradient|) over n parameters at p with analytic
 * gradients g. The step and the tolerance are test_grad_model's: central differences in
 * double with h = 1e-6 err by about 2⁻⁵³·|loss|/h + h²/6·|f'''|, under 1e-7 relative to the
 * floor here, so 1e-5 still catches any wrong term. */
static double worst_error(zt_llama *m, zt_real *p, const zt_real *g, size_t n)
{
    const double eps = 1e-6;
    double worst = 0;
    for (size_t i = 0; i < n; i += TEST_SAN_STRIDE) {
        double keep = p[i];
        p[i] = keep + eps;
        double lp = loss_of(m);
        p[i] = keep - eps;
        double lm = loss_of(m);
        p[i] = keep;
        double fd = (lp - lm) / (2 * eps);
        double err = fabs(fd - g[i]) / fmax(1e-2, fabs(g[i]));
        if (err > worst) worst = err;
    }
    return worst;
}

/* DoRA's magnitudes (1-D tensors) away from their start ||W||, by up to 30 % each, so that
 * g = M / ||W + s·B·A|| is far from 1 */
static void scale_magnitudes(zt_llama *v)
{
    for (int i = 0; i < v->n_tensors; i++)
        for (int64_t j = 0; v->tensors[i].ndim == 1 && j < v->tensors[i].shape[0]; j++)
            v->params[v->tensors[i].offset + j] *= 1 + 0.3 * sin(1.3 * (double)(i + j));
}

/* Trainable tokens open_model gives the adapters (0: none), and whether its model's LM head is
 * its embedding */
static int n_token_rows, tied_model, one_layer;
static const int32_t token_rows[] = {6, 2, 10};

/* A model with adapters on every linear layer, B non-zero so that every gradient is generic.
 * with_base: the base keeps a gradient array too, to check ∂loss/∂x below each adapter. */
static void open_model(zt_llama *m, const char *model_type, int checkpointing, double dropout, int rslora,
                       int with_base, zt_lora_method method, unsigned save)
{
    zt_llama_config c = tiny_config(model_type);
    c.tie_word_embeddings |= tied_model;
    ZT_ASSERT(zt_llama_init(m, &c, zt_backend_cpu(), ZT_F32) == ZT_OK);
    ZT_ASSERT(zt_llama_alloc_acts(m, B, T, checkpointing) == ZT_OK);
    zt_llama_init_weights(m, 11, 0.5);
    zt_lora_config lc = {.r = 2,
                         .alpha = 3,
                         .dropout = dropout,
                         .targets = ZT_LORA_ALL,
                         .rslora = rslora,
                         .method = method,
                         .save = save,
                         .n_tokens = n_token_rows,
                         .n_layers = one_layer,
                         .layers = {1}};
    memcpy(lc.tokens, token_rows, sizeof(int32_t) * (size_t)n_token_rows);
    ZT_ASSERT(zt_lora_attach(m, &lc) == ZT_OK);
    ZT_ASSERT(zt_lora_init_weights(m, 5) == ZT_OK);
    zt_llama *v = &m->lora->view;
    for (size_t i = 0; i < v->numel; i++)
        if (v->params[i] == 0) v->params[i] = 0.4 * sin(0.7 * (double)i + 1);
    scale_magnitudes(v);
    m->draw_seed = 42;
    if (with_base) { /* freed by zt_llama_free */
        m->grads = m->be->alloc(m->be, (m->numel + ZT_LLAMA_PAD) * sizeof(zt_real));
        ZT_ASSERT(m->grads != NULL);
    }
    make_batch(c.vocab_size);
}

/* The analytic gradients of one pass (dropout pass 0), copied out of the model. */
static void gradients(zt_llama *m, zt_real **adapter, zt_real **base)
{
    zt_llama *v = &m->lora->view;
    double loss = 0;
    memset(v->grads, 0, v->numel * sizeof(zt_real));
    if (m->grads) memset(m->grads, 0, m->numel * sizeof(zt_real));
    m->pass = 0;
    zt_llama_forward_backward(m, input, target, pos, 1, &loss);
    CHECK_MSG(loss > 0 && isfinite(loss), "loss %g", loss);
    *adapter = malloc(v->numel * sizeof(zt_real));
    memcpy(*adapter, v->grads, v->numel * sizeof(zt_real));
    if (base) {
        *base = malloc(m->numel * sizeof(zt_real));
        memcpy(*base, m->grads, m->numel * sizeof(zt_real));
    }
}

static void check_lora(const char *model_type, int checkpointing, double dropout, int rslora, unsigned save)
{
    zt_llama m;
    zt_real *ga, *gb;
    open_model(&m, model_type, checkpointing, dropout, rslora, 1, ZT_LORA_METHOD_LORA, save);
    gradients(&m, &ga, &gb);
    double ea = worst_error(&m, m.lora->view.params, ga, m.lora->view.numel);
    double ex = worst_error(&m, m.params, gb, m.numel); /* the embedding's gradient is ∂loss/∂x[0] */
    CHECK_MSG(ea < 1e-5, "adapters: worst relative error %g", ea);
    CHECK_MSG(ex < 1e-5, "inputs and base weights: worst relative error %g", ex);
    free(ga);
    free(gb);
    zt_llama_free(&m);
}

/* DoRA: PEFT detaches the norm ||W + s·B·A|| from the gradient graph, so the analytic
 * gradients are those of the loss with every norm a constant. The finite differences are taken
 * of that function: the norms stay what the analytic pass computed (keep_norms) while A, B and
 * M are moved. The base's gradient array holds only the embedding's gradient exactly (the
 * targeted weights' gradients leave out DoRA's terms, which a frozen base never needs): that is
 * ∂loss/∂x[0], through every layer's DoRA backward. */
static void check_dora(const char *model_type, int checkpointing, double dropout)
{
    zt_llama m;
    zt_real *ga, *gb;
    open_model(&m, model_type, checkpointing, dropout, 0, 1, ZT_LORA_METHOD_DORA, 0);
    gradients(&m, &ga, &gb);
    m.lora->keep_norms = 1;
    const zt_llama_tensor *emb = zt_llama_find_tensor(&m, "model.embed_tokens.weight");
    size_t n_emb = (size_t)emb->shape[0] * emb->shape[1];
    double ea = worst_error(&m, m.lora->view.params, ga, m.lora->view.numel);
    double ex = worst_error(&m, m.params + emb->offset, gb + emb->offset, n_emb);
    CHECK_MSG(ea < 1e-5, "adapters and magnitudes: worst relative error %g", ea);
    CHECK_MSG(ex < 1e-5, "inputs: worst relative error %g", ex);
    free(ga);
    free(gb);
    zt_llama_free(&m);
}

/* A fresh DoRA adapter (B = 0, M = ||W||, so g = 1 bit for bit) leaves the base's loss as it is,
 * bit for bit: y + (1 - 1)·W·x + 1·0. */
static void test_dora_starts_at_base(void)
{
    zt_llama m;
    zt_llama_config c = tiny_config("llama");
    ZT_ASSERT(zt_llama_init(&m, &c, zt_backend_cpu(), ZT_F32) == ZT_OK);
    ZT_ASSERT(zt_llama_alloc_acts(&m, B, T, 0) == ZT_OK);
    zt_llama_init_weights(&m, 11, 0.5);
    make_batch(c.vocab_size);
    double base = 0, adapted = 0;
    zt_llama_forward_backward(&m, input, target, pos, 0, &base);
    zt_lora_config lc = {.r = 2, .alpha = 3, .targets = ZT_LORA_ALL, .method = ZT_LORA_METHOD_DORA};
    ZT_ASSERT(zt_lora_attach(&m, &lc) == ZT_OK);
    ZT_ASSERT(zt_lora_init_weights(&m, 5) == ZT_OK);
    zt_llama_forward_backward(&m, input, target, pos, 0, &adapted);
    CHECK_MSG(adapted == base, "base %.17g, fresh DoRA %.17g", base, adapted);
    const zt_llama_tensor *q =
        zt_llama_find_tensor(&m.lora->view, "base_model.model.model.layers.1.self_attn.q_proj.lora_magnitude_vector");
    const zt_llama_tensor *w = zt_llama_find_tensor(&m, "model.layers.1.self_attn.q_proj.weight");
    CHECK(q && q->ndim == 1 && q->shape[0] == 16);
    for (int j = 0; q && w && j < 16; j++) { /* M = ||W_j||, summed in double as zt sums it */
        double ss = 0;
        for (int i = 0; i < 8; i++) ss += m.params[w->offset + j * 8 + i] * m.params[w->offset + j * 8 + i];
        CHECK_MSG(m.lora->view.params[q->offset + j] == sqrt(ss), "row %d", j);
    }
    zt_llama_free(&m);
}

/* DoRA's forward with dropout, against the formula written out: the base's W·x keeps the whole
 * input and DoRA's terms see the dropped one, y += (g - 1)·W·xd + g·s·B·A·xd with
 * g = M / ||W + s·B·A|| (the mask read back from the adapter's scratch, where xd stays). In
 * double, sums of at most 12 terms of size 1: 1e-12 relative is a thousand roundings. */
static void test_dora_dropout_forward(void)
{
    enum { N = B * T, IN = 8, OUT = 12, R = 2 }; /* gate_proj of the tiny model */
    zt_llama m;
    open_model(&m, "llama", 0, 0.3, 0, 0, ZT_LORA_METHOD_DORA, 0);
    zt_lora *a = m.lora;
    const zt_llama_tensor *w = zt_llama_find_tensor(&m, "model.layers.1.mlp.gate_proj.weight");
    const zt_real *W = m.params + w->offset, *p = a->view.params;
    const char *pre = "base_model.model.model.layers.1.mlp.gate_proj.";
    char name[96];
    snprintf(name, sizeof name, "%slora_A.weight", pre);
    const zt_real *A = p + zt_llama_find_tensor(&a->view, name)->offset;
    snprintf(name, sizeof name, "%slora_B.weight", pre);
    const zt_real *Bm = p + zt_llama_find_tensor(&a->view, name)->offset;
    snprintf(name, sizeof name, "%slora_magnitude_vector", pre);
    const zt_real *M = p + zt_llama_find_tensor(&a->view, name)->offset;
    static zt_real x[N * IN], y[N * OUT], want[N * OUT];
    for (int i = 0; i < N * IN; i++) x[i] = cos(0.37 * i);
    for (int i = 0; i < N * OUT; i++) y[i] = want[i] = sin(0.21 * i);
    a->training = 1, m.pass = 3;
    zt_lora_forward(&m, 1, ZT_LORA_GATE, x, NULL, y, OUT);
    const zt_real *xd = a->xd;
    int dropped = 0;
    for (int i = 0; i < N * IN; i++) {
        dropped += xd[i] == 0;
        CHECK_MSG(xd[i] == 0 || fabs(xd[i] - x[i] / 0.7) <= 1e-15, "xd[%d] = %g, x = %g", i, xd[i], x[i]);
    }
    CHECK_MSG(dropped > N * IN / 10 && dropped < N * IN / 2, "%d of %d dropped at p = 0.3", dropped, N * IN);
    double worst = 0;
    for (int j = 0; j < OUT; j++) {
        double ss = 0, g;
        for (int i = 0; i < IN; i++) {
            double e = W[j * IN + i];
            for (int k = 0; k < R; k++) e += a->scale * Bm[j * R + k] * A[k * IN + i];
            ss += e * e;
        }
        g = M[j] / sqrt(ss);
        for (int n = 0; n < N; n++) {
            double wx = 0, bax = 0;
            for (int i = 0; i < IN; i++) {
                wx += W[j * IN + i] * xd[n * IN + i];
                for (int k = 0; k < R; k++) bax += Bm[j * R + k] * A[k * IN + i] * xd[n * IN + i];
            }
            want[n * OUT + j] += (g - 1) * wx + g * a->scale * bax;
            worst = fmax(worst, fabs(want[n * OUT + j] - y[n * OUT + j]) / fmax(1, fabs(want[n * OUT + j])));
        }
    }
    CHECK_MSG(worst < 1e-12, "worst relative error %g", worst);
    zt_llama_free(&m);
}

static void test_lora(void) { check_lora("llama", 0, 0, 0, 0); }
static void test_lora_checkpointing(void) { check_lora("llama", 1, 0, 1, 0); }
static void test_lora_dropout(void) { check_lora("llama", 0, 0.3, 0, 0); }
static void test_lora_dropout_checkpointing(void) { check_lora("llama", 1, 0.3, 0, 0); }
/* modules_to_save: the copies of the embedding and the LM head train whole beside the adapters
 * (their gradients checked with the adapters', the base's own getting none); the passes use the
 * copies: moved away from the base's, the loss changes */
static void test_lora_saved_modules(void)
{
    unsigned both = ZT_LORA_SAVE_EMBED | ZT_LORA_SAVE_HEAD;
    check_lora("llama", 0, 0, 0, both);
    check_lora("llama", 1, 0.3, 0, both);
    check_lora("llama", 1, 0, 0, ZT_LORA_SAVE_HEAD);
    zt_llama m;
    open_model(&m, "llama", 0, 0, 0, 0, ZT_LORA_METHOD_LORA, both);
    zt_real *embed = zt_lora_embed(&m, 0), *head = zt_lora_head(&m, 0);
    CHECK(embed && head && m.lora->view.n_tensors == 2 * 7 * 2 + 2);
    double before = loss_of(&m), after;
    embed[3 * m.C + 1] += 0.5, head[5 * m.C + 2] -= 0.5;
    after = loss_of(&m);
    CHECK_MSG(fabs(after - before) > 1e-3 * before, "the copies do not take part: %g, %g", before, after);
    m.lora->disabled = 1; /* the base's own */
    CHECK(zt_lora_embed(&m, 0) == NULL && zt_lora_head(&m, 0) == NULL);
    zt_llama_free(&m);
}
/* Trainable tokens (trainable_token_indices): their rows' gradients, from the lookups and, on a
 * tied model, from the LM head's logits of those tokens, with the adapters'. The base's gradient
 * (∂loss/∂x below each adapter) is checked but for the tokens' own rows, which the passes no
 * longer read: a gradient array of the base still collects their lookups' part. Moved, the
 * rows change the loss; switched off, the base's rows are read. */
static void check_tokens(const char *model_type, int tied, int checkpointing)
{
    zt_llama m;
    zt_real *ga, *gb;
    n_token_rows = 3, tied_model = tied;
    open_model(&m, model_type, checkpointing, 0, 0, 1, ZT_LORA_METHOD_LORA, 0);
    n_token_rows = 0, tied_model = 0;
    CHECK(m.cfg.tie_word_embeddings == tied && m.lora->view.n_tensors == 2 * 7 * 2 + 1);
    gradients(&m, &ga, &gb);
    double ea = worst_error(&m, m.lora->view.params, ga, m.lora->view.numel), ex = 0;
    for (int v = 0; v < m.V; v++) { /* the embedding's rows but the trained tokens' */
        int trained = v == 6 || v == 2 || v == 10;
        size_t row = m.embed_off + (size_t)v * m.C;
        if (!trained) ex = fmax(ex, worst_error(&m, m.params + row, gb + row, m.C));
    }
    size_t rest = m.embed_off + (size_t)m.V * m.C;
    ex = fmax(ex, worst_error(&m, m.params + rest, gb + rest, m.numel - rest));
    CHECK_MSG(ea < 1e-5, "%s%s: adapters and token rows: worst relative error %g", model_type, tied ? " tied" : "", ea);
    CHECK_MSG(ex < 1e-5, "%s%s: inputs and base weights: worst relative error %g", model_type, tied ? " tied" : "", ex);
    double before = loss_of(&m);
    m.lora->view.params[m.lora->tokens_off + 1] += 0.5; /* token 6's row */
    CHECK_MSG(fabs(loss_of(&m) - before) > 1e-4 * before, "the token rows do not take part");
    m.lora->disabled = 1;
    double off = loss_of(&m);
    m.lora->disabled = 0;
    CHECK(off != before);
    free(ga);
    free(gb);
    zt_llama_free(&m);
}
static void test_lora_tokens(void)
{
    check_tokens("llama", 0, 0);
    check_tokens("llama", 1, 1);
    check_tokens("gemma3_text", 1, 0); /* the rows under Gemma's embedding scale, the head tied */
}
/* layers_to_transform = [1]: the adapters of layer 1 alone (dropout, checkpointing); layer 0's
 * inputs' gradients through its frozen weights */
static void test_lora_one_layer(void)
{
    one_layer = 1;
    check_lora("llama", 1, 0.3, 0, 0);
    zt_llama m;
    open_model(&m, "llama", 0, 0, 0, 0, ZT_LORA_METHOD_LORA, 0);
    CHECK(m.lora->view.n_tensors == 7 * 2 && strstr(m.lora->view.tensors[0].name, ".layers.1."));
    zt_llama_free(&m);
    one_layer = 0;
}
/* Granite: adapters (dropout, checkpointing) and the saved embedding and head under its multipliers */
static void test_lora_granite(void) { check_lora("granite", 1, 0.3, 0, ZT_LORA_SAVE_EMBED | ZT_LORA_SAVE_HEAD); }
static void test_dora(void) { check_dora("llama", 0, 0); }
static void test_dora_dropout_checkpointing(void) { check_dora("llama", 1, 0.3); }

/* Phi-3: all-linear is qkv_proj, o_proj, gate_up_proj and down_proj, the fused ones an A [r,
 * hidden] and a B over the whole fused output */
static void test_lora_phi3(void)
{
    zt_llama m;
    open_model(&m, "phi3", 0, 0, 0, 0, ZT_LORA_METHOD_LORA, 0);
    unsigned want = 1u << ZT_LORA_QKV | 1u << ZT_LORA_O | 1u << ZT_LORA_GATE_UP | 1u << ZT_LORA_DOWN;
    CHECK_MSG(m.lora->cfg.targets == want, "targets %#x", m.lora->cfg.targets);
    const zt_llama_tensor *a = zt_llama_find_tensor(&m.lora->view,
                                                    "base_model.model.model.layers.1.self_attn.qkv_proj.lora_A.weight"),
                          *b = zt_llama_find_tensor(&m.lora->view,
                                                    "base_model.model.model.layers.1.mlp.gate_up_proj.lora_B.weight");
    CHECK(a && a->shape[0] == 2 && a->shape[1] == 8 && b && b->shape[0] == 24 && b->shape[1] == 2);
    CHECK(m.lora->view.n_tensors == 2 * 4 * 2);
    double on = loss_of(&m), off; /* the fused adapters take part: switched off, the loss changes */
    m.lora->disabled = 1;
    off = loss_of(&m);
    CHECK_MSG(fabs(on - off) > 1e-3 * off, "with the adapters %g, without %g", on, off);
    zt_llama_free(&m);
    check_lora("phi3", 0, 0.3, 0, 0);
    check_lora("phi3", 1, 0, 1, 0);
}
static void test_dora_phi3(void) { check_dora("phi3", 1, 0.3); }

/* Mixtures of experts: all-linear is the attention's projections, the router ("gate") and every
 * expert's gate, up and down (Mixtral's w1, w3, w2), each expert's adapters on the rows routed to
 * it (Qwen2-MoE's shared expert's and its gate's on every row); with dropout (its masks keyed by
 * the expert too) and checkpointing. */
static void test_lora_experts(void)
{
    zt_llama m;
    open_model(&m, "mixtral", 0, 0, 0, 0, ZT_LORA_METHOD_LORA, 0);
    unsigned shared =
        1u << ZT_LORA_SHARED_GATE | 1u << ZT_LORA_SHARED_UP | 1u << ZT_LORA_SHARED_DOWN | 1u << ZT_LORA_SHARED_ROUTER;
    unsigned want = ZT_LORA_ALL & ~(1u << ZT_LORA_QKV | 1u << ZT_LORA_GATE_UP | shared);
    CHECK_MSG(m.lora->cfg.targets == want, "targets %#x", m.lora->cfg.targets);
    const zt_llama_tensor
        *a = zt_llama_find_tensor(&m.lora->view,
                                  "base_model.model.model.layers.1.block_sparse_moe.experts.2.w3.lora_B.weight"),
        *r = zt_llama_find_tensor(&m.lora->view, "base_model.model.model.layers.0.block_sparse_moe.gate.lora_B.weight");
    CHECK(a && a->shape[0] == 6 && a->shape[1] == 2 && r && r->shape[0] == 3 && r->shape[1] == 2);
    CHECK(m.lora->view.n_tensors == 2 * (5 + 3 * 3) * 2);
    zt_llama_free(&m);
    check_lora("qwen3_moe", 0, 0, 0, 0);
    check_lora("mixtral", 1, 0.3, 0, 0);
    check_lora("olmoe", 0, 0.3, 1, 0);
    open_model(&m, "qwen2_moe", 0, 0, 0, 0, ZT_LORA_METHOD_LORA, 0);
    CHECK_MSG(m.lora->cfg.targets == (want | shared), "targets %#x", m.lora->cfg.targets);
    CHECK(zt_llama_find_tensor(&m.lora->view, "base_model.model.model.layers.1.mlp.shared_expert_gate.lora_B.weight"));
    zt_llama_free(&m);
    check_lora("qwen2_moe", 0, 0.3, 0, 0);
    check_lora("qwen2_moe", 1, 0, 1, 0);
}

/* A frozen base (no gradient array) gives the adapters the same gradients, bit for bit: the
 * same products run, only those of the base's gradients are left out. */
static void test_frozen_base_same_adapter_grads(void)
{
    zt_llama a, b;
    zt_real *ga, *gb, *base;
    open_model(&a, "llama", 1, 0.2, 0, 1, ZT_LORA_METHOD_LORA, 0);
    open_model(&b, "llama", 1, 0.2, 0, 0, ZT_LORA_METHOD_LORA, 0);
    CHECK(b.grads == NULL);
    gradients(&a, &ga, &base);
    gradients(&b, &gb, NULL);
    CHECK(!memcmp(ga, gb, a.lora->view.numel * sizeof(zt_real)));
    free(ga);
    free(gb);
    free(base);
    zt_llama_free(&a);
    zt_llama_free(&b);
}

int main(void)
{
    omp_set_num_threads(1); /* thousands of tiny passes */
    RUN(test_lora);
    RUN(test_lora_checkpointing);
    RUN(test_lora_dropout);
    RUN(test_lora_dropout_checkpointing);
    RUN(test_frozen_base_same_adapter_grads);
    RUN(test_lora_saved_modules);
    RUN(test_lora_tokens);
    RUN(test_lora_one_layer);
    RUN(test_lora_granite);
    RUN(test_dora);
    RUN(test_dora_dropout_checkpointing);
    RUN(test_lora_phi3);
    RUN(test_dora_phi3);
    RUN(test_lora_experts);
    RUN(test_dora_starts_at_base);
    RUN(test_dora_dropout_forward);
    return test_summary();
}
