/* Reading the bitsandbytes 4-bit serialization (lib/model/qbase_bnb.h): tiny Llamas and mixtures
 * of experts (Qwen3-MoE, Mixtral) quantized by bitsandbytes and saved by transformers
 * (tests/fixtures/bnb/make_fixture.py: NF4 with and without double quantization) load into a
 * quantized base whose dequantized weights are bitsandbytes' own dequantization bit for bit, and
 * whose loss is transformers'. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/crc32c.h"
#include "lib/core/fileio.h"
#include "lib/model/open.h"
#include "lib/model/qbase.h"
#include "lib/model/qbase_read.h"
#include "test.h"

#define FIXTURE "tests/fixtures/bnb"

/* Matrix k of layer 0 dequantized, [O, I] into w: the product of the identity [I, I] with it
 * gives Wᵀ, exactly (each output one weight times 1 plus zeros). */
static void dequantized(zt_llama *m, int k, int O, int I, float *w)
{
    const size_t at[4] = {m->lay.wqkv, m->lay.wo, m->lay.wgu, m->lay.wd};
    zt_real *x = calloc((size_t)I * I, sizeof *x), *y = malloc((size_t)I * O * sizeof *y);
    for (int i = 0; i < I; i++) x[(size_t)i * I + i] = 1;
    CHECK(zt_qbase_forward(m, y, O, x, m->layer0_off + at[k], I, O, I, 0) == 1);
    for (int o = 0; o < O; o++)
        for (int i = 0; i < I; i++) w[(size_t)o * I + i] = (float)y[(size_t)i * O + o];
    free(x);
    free(y);
}

/* Weight `name`: rows [r0, r0 + rows) of w (cols wide) against expected.json's CRC-32C and sum. */
static void check_weight(const cJSON *weights, const char *name, const float *w, size_t rows, size_t cols)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(weights, name);
    CHECK_MSG(e != NULL, "%s is not in expected.json", name);
    if (!e) return;
    uint32_t crc = zt_crc32c(0, w, rows * cols * sizeof *w); /* little-endian fp32, as the script hashes them */
    double sum = 0;
    for (size_t i = 0; i < rows * cols; i++) sum += w[i];
    double want_crc = cJSON_GetObjectItemCaseSensitive(e, "crc32c")->valuedouble;
    double want_sum = cJSON_GetObjectItemCaseSensitive(e, "sum")->valuedouble;
    const cJSON *first = cJSON_GetObjectItemCaseSensitive(e, "first");
    CHECK_MSG(crc == (uint32_t)want_crc,
              "%s: dequantized differently from bitsandbytes (sum %.9g, expected %.9g; "
              "first %.9g, expected %.9g)",
              name, sum, want_sum, w[0], cJSON_GetArrayItem(first, 0)->valuedouble);
}

/* FIXTURE/dir, bitsandbytes' checkpoint, loaded as stored into a quantized base. */
static void open_bnb(zt_llama *m, const char *dir, int dq)
{
    zt_qbase_reader *r;
    int hit;
    char path[256];
    snprintf(path, sizeof path, FIXTURE "/%s", dir);
    CHECK_MSG(zt_model_open_quantized(m, path, ZT_F32, ZT_DEVICE_CPU, 0, ZT_QBASE_NF4, dq, &r) == ZT_OK, "%s",
              zt_errmsg());
    CHECK_MSG(zt_qbase_load(m, r, "/nonexistent/never/used", &hit) == ZT_OK && !hit, "%s", zt_errmsg());
    CHECK(zt_qbase_reader_prequantized(r));
    zt_qbase_reader_close(r);
}

/* m's mean loss on the script's ids (expected.json): each next token's, as transformers' */
static double loss_of(zt_llama *m, const cJSON *expected)
{
    const cJSON *ids = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(expected, "ids"), 0);
    int n = cJSON_GetArraySize(ids) - 1;
    int32_t input[64], target[64], pos[64];
    for (int i = 0; i < n; i++)
        input[i] = cJSON_GetArrayItem(ids, i)->valueint, target[i] = cJSON_GetArrayItem(ids, i + 1)->valueint,
        pos[i] = i;
    double sum = 0;
    CHECK(zt_llama_alloc_acts(m, 1, n, 0) == ZT_OK);
    zt_llama_forward_backward(m, input, target, pos, 0, &sum);
    return sum / n;
}

static double loss_in(const cJSON *expected, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(expected, key), "loss")->valuedouble;
}

/* Its weights against bitsandbytes' dequantization, and its loss against transformers': their
 * products run in bf16 (inputs, dequantized weights and outputs of every product rounded to bf16,
 * 2⁻⁹ relative each) where zt's run in fp32, over one layer and the head: logits of magnitude about
 * 1 off by about 1e-2 at most, the loss of 4.18 within 1% (measured 1.3e-5 and 1.4e-5). */
static void check_model(const char *dir, const char *key, int dq, const cJSON *expected)
{
    zt_llama m;
    open_bnb(&m, dir, dq);
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(expected, key), "weights");
    int C = m.C, F = m.F, kd = m.KV * m.D;
    float *w = malloc((size_t)2 * F * C * sizeof *w);
    dequantized(&m, 0, m.S3, C, w);
    check_weight(want, "model.layers.0.self_attn.q_proj.weight", w, (size_t)m.HD, (size_t)C);
    check_weight(want, "model.layers.0.self_attn.k_proj.weight", w + (size_t)m.HD * C, (size_t)kd, (size_t)C);
    check_weight(want, "model.layers.0.self_attn.v_proj.weight", w + (size_t)(m.HD + kd) * C, (size_t)kd, (size_t)C);
    dequantized(&m, 1, C, m.HD, w);
    check_weight(want, "model.layers.0.self_attn.o_proj.weight", w, (size_t)C, (size_t)m.HD);
    dequantized(&m, 2, 2 * F, C, w);
    check_weight(want, "model.layers.0.mlp.gate_proj.weight", w, (size_t)F, (size_t)C);
    check_weight(want, "model.layers.0.mlp.up_proj.weight", w + (size_t)F * C, (size_t)F, (size_t)C);
    dequantized(&m, 3, C, F, w);
    check_weight(want, "model.layers.0.mlp.down_proj.weight", w, (size_t)C, (size_t)F);
    free(w);
    double got = loss_of(&m, expected), want_loss = loss_in(expected, key);
    fprintf(stderr, "  %s: loss %.7g, transformers (bf16 products) %.7g: %.2g relative\n", dir, got, want_loss,
            fabs(got - want_loss) / want_loss);
    CHECK_MSG(fabs(got - want_loss) <= 1e-2 * want_loss, "%s: loss %.9g, transformers %.9g", dir, got, want_loss);
    zt_llama_free(&m);
}

/* The checkpoint opened as an unquantized model (zt eval, zt generate, a full fine-tune): every
 * weight bitsandbytes quantized (expected.json names them) decoded as bitsandbytes dequantizes it,
 * bit for bit. */
static void check_decoded(const char *dir, const char *key, const cJSON *expected)
{
    zt_llama m;
    char path[256];
    snprintf(path, sizeof path, FIXTURE "/%s", dir);
    CHECK_MSG(zt_model_open(&m, path, ZT_F32, ZT_DEVICE_CPU) == ZT_OK, "%s", zt_errmsg());
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(expected, key), "weights"),
                *e;
    int n = 0;
    cJSON_ArrayForEach(e, want)
    {
        const zt_llama_tensor *t = zt_llama_find_tensor(&m, e->string);
        CHECK_MSG(t != NULL && zt_qbase_is_linear(e->string), "%s", e->string);
        if (t) check_weight(want, e->string, m.params + t->offset, (size_t)t->shape[0], (size_t)t->shape[1]), n++;
    }
    CHECK_MSG(n >= 7, "%s: %d weights", dir, n);
    zt_llama_free(&m);
}

/* A mixture of experts quantized by bitsandbytes (its router and every expert's weights too): the
 * encodings zt loads decode to bitsandbytes' dequantization bit for bit, and the loss is
 * transformers' in fp32 on those weights (the script computes it so): the same products in another
 * order, sums of at most 96 terms within 96·2⁻²⁴ ≈ 6e-6 relative each, through one layer and the
 * head: 1e-5 relative. The routing assumes no near-tie of two experts in these fixed weights. */
static void check_experts(const char *dir, int dq, const cJSON *expected)
{
    zt_llama m, plain;
    open_bnb(&m, dir, dq);
    CHECK(m.cfg.n_experts == 4 && zt_llama_tensors(&m.cfg, &plain.tensors, &plain.n_tensors) == ZT_OK);
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(expected, dir), "weights");
    int n = 0;
    for (int i = 0; i < plain.n_tensors; i++) {
        const zt_llama_tensor *t = &plain.tensors[i], *q = zt_llama_find_tensor(&m, t->name);
        if (!zt_qbase_is_linear(t->name)) continue;
        size_t rows = (size_t)t->shape[0], cols = (size_t)t->shape[1];
        float *w = malloc(rows * cols * sizeof *w);
        CHECK(q && zt_qbase_decode_tensor(m.qbase, m.params + q->offset, rows, cols, w) == ZT_OK);
        check_weight(want, t->name, w, rows, cols);
        free(w);
        n++;
    }
    CHECK_MSG(n == 4 + 1 + 3 * 4 && n == cJSON_GetArraySize(want), "%s: %d linear weights", dir, n);
    free(plain.tensors);
    double got = loss_of(&m, expected), want_loss = loss_in(expected, dir);
    fprintf(stderr, "  %s: loss %.9g, transformers (fp32) %.9g: %.2g relative\n", dir, got, want_loss,
            fabs(got - want_loss) / want_loss);
    CHECK_MSG(fabs(got - want_loss) <= 1e-5 * want_loss, "%s: loss %.9g, transformers %.9g", dir, got, want_loss);
    zt_llama_free(&m);
}

static cJSON *expected;

static void test_double_quantized(void) { check_model("nf4", "nf4", 1, expected); }
static void test_fp32_absmax(void) { check_model("nf4_nodq", "nf4_nodq", 0, expected); }
static void test_decoded(void)
{
    check_decoded("nf4", "nf4", expected);
    check_decoded("nf4_nodq", "nf4_nodq", expected);
    check_decoded("qwen3_moe", "qwen3_moe", expected);
    check_decoded("mixtral", "mixtral", expected);
}
static void test_experts(void)
{
    check_experts("qwen3_moe", 1, expected);
    check_experts("mixtral", 0, expected);
}

int main(void)
{
    char *text;
    size_t len;
    CHECK(zt_read_file(FIXTURE "/expected.json", &text, &len) == ZT_OK);
    expected = cJSON_ParseWithLength(text, len);
    free(text);
    RUN(test_double_quantized);
    RUN(test_fp32_absmax);
    RUN(test_decoded);
    RUN(test_experts);
    cJSON_Delete(expected);
    return test_summary();
}
