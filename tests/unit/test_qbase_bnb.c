/* Reading the bitsandbytes 4-bit serialization (lib/model/qbase_bnb.h): tiny Llamas quantized by
 * bitsandbytes and saved by transformers (tests/fixtures/bnb/make_fixture.py: NF4 with and
 * without double quantization) load into a quantized base whose dequantized weights are
 * bitsandbytes' own dequantization bit for bit, and whose loss is near transformers'. */
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

/* Its weights against bitsandbytes' dequantization, and its loss against transformers': their
 * products run in bf16 (inputs, dequantized weights and outputs of every product rounded to bf16,
 * 2⁻⁹ relative each) where zt's run in fp32, over one layer and the head: logits of magnitude about
 * 1 off by about 1e-2 at most, the loss of 4.18 within 1% (measured 4.2e-5 and 2.3e-5). */
static void check_model(const char *dir, const char *key, int dq, const cJSON *expected)
{
    zt_llama m;
    zt_qbase_reader *r;
    int hit;
    char path[256];
    snprintf(path, sizeof path, FIXTURE "/%s", dir);
    CHECK_MSG(zt_model_open_quantized(&m, path, ZT_F32, ZT_DEVICE_CPU, 0, ZT_QBASE_NF4, dq, &r) == ZT_OK, "%s",
              zt_errmsg());
    CHECK_MSG(zt_qbase_load(&m, r, "/nonexistent/never/used", &hit) == ZT_OK && !hit, "%s", zt_errmsg());
    CHECK(zt_qbase_reader_prequantized(r));
    zt_qbase_reader_close(r);
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
    /* the loss on the script's ids: each next token's */
    const cJSON *ids = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(expected, "ids"), 0);
    int n = cJSON_GetArraySize(ids) - 1;
    int32_t input[64], target[64], pos[64];
    for (int i = 0; i < n; i++)
        input[i] = cJSON_GetArrayItem(ids, i)->valueint, target[i] = cJSON_GetArrayItem(ids, i + 1)->valueint,
        pos[i] = i;
    double sum = 0,
           loss =
               cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(expected, key), "loss")->valuedouble;
    CHECK(zt_llama_alloc_acts(&m, 1, n, 0) == ZT_OK);
    zt_llama_forward_backward(&m, input, target, pos, 0, &sum);
    fprintf(stderr, "  %s: loss %.7g, transformers (bf16 products) %.7g: %.2g relative\n", dir, sum / n, loss,
            fabs(sum / n - loss) / loss);
    CHECK_MSG(fabs(sum / n - loss) <= 1e-2 * loss, "%s: loss %.9g, transformers %.9g", dir, sum / n, loss);
    zt_llama_free(&m);
}

/* The checkpoint opened as an unquantized model (zt eval, zt generate, a full fine-tune): every
 * linear weight of layer 0 decoded as bitsandbytes dequantizes it, bit for bit. */
static void check_decoded(const char *dir, const char *key, const cJSON *expected)
{
    static const char *const names[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                        "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
    zt_llama m;
    char path[256], name[96];
    snprintf(path, sizeof path, FIXTURE "/%s", dir);
    CHECK_MSG(zt_model_open(&m, path, ZT_F32, ZT_DEVICE_CPU) == ZT_OK, "%s", zt_errmsg());
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(expected, key), "weights");
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(name, sizeof name, "model.layers.0.%s.weight", names[i]);
        const zt_llama_tensor *t = zt_llama_find_tensor(&m, name);
        CHECK_MSG(t != NULL, "%s", name);
        if (t) check_weight(want, name, m.params + t->offset, (size_t)t->shape[0], (size_t)t->shape[1]);
    }
    zt_llama_free(&m);
}

static cJSON *expected;

static void test_double_quantized(void) { check_model("nf4", "nf4", 1, expected); }
static void test_fp32_absmax(void) { check_model("nf4_nodq", "nf4_nodq", 0, expected); }
static void test_decoded(void)
{
    check_decoded("nf4", "nf4", expected);
    check_decoded("nf4_nodq", "nf4_nodq", expected);
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
    cJSON_Delete(expected);
    return test_summary();
}
