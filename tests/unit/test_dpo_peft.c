/* DPO with LoRA against PEFT (tests/fixtures/lora/dpo.json and dpo_grads.safetensors, made by
 * make_dpo_fixture.py with torch, transformers and peft; nothing of them is needed here): on
 * three preference pairs, with the fixture's adapter on its base, the reference log-probabilities
 * zt computes with the adapters switched off are PEFT's under disable_adapter() and bit for bit
 * those of the base opened without adapters; the policy's log-probabilities, the DPO loss and
 * the adapters' gradients are PEFT's. The pairs go through the rows and objective zt rlhf's DPO
 * uses (zt_rlhf_fill_row, zt_dpo_loss). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ckpt/safetensors.h"
#include "lib/core/fileio.h"
#include "lib/model/lora.h"
#include "lib/model/open.h"
#include "lib/train/rlhf/rl_loss.h"
#include "lib/train/rlhf/rlhf.h"
#include "test.h"

#define FIXTURE "tests/fixtures/lora"
enum { PAIRS = 3, ROWS = 2 * PAIRS, T = 16 };

static int32_t input[ROWS * T], target[ROWS * T], pos[ROWS * T];

/* What the objective sees and computes: each row's Σ of its answer's log-probabilities, and
 * with ref set the DPO loss's derivatives as zt rlhf's DPO puts them (pref.c). */
typedef struct dpo_ctx {
    double beta, logp[ROWS];
    const double *ref;
} dpo_ctx;

static double objective(void *ctx, const double *out, double *coef, int N)
{
    dpo_ctx *c = ctx;
    double loss = 0;
    if (coef) memset(coef, 0, (size_t)N * sizeof *coef);
    for (int r = 0; r < ROWS; r++) {
        c->logp[r] = 0;
        for (int t = 0; t < T; t++) c->logp[r] += target[r * T + t] >= 0 ? out[r * T + t] : 0;
    }
    for (int j = 0; c->ref && j < PAIRS; j++) {
        double d[2];
        loss += zt_dpo_loss(ZT_DPO_SIGMOID, c->beta, 0, c->logp[2 * j], c->logp[2 * j + 1], c->ref[2 * j],
                            c->ref[2 * j + 1], &d[0], &d[1]) /
                PAIRS;
        for (int s = 0; coef && s < 2; s++)
            for (int t = 0; t < T; t++)
                if (target[(2 * j + s) * T + t] >= 0) coef[(2 * j + s) * T + t] = d[s] / PAIRS;
    }
    return loss;
}

/* dpo.json's pairs in rows 2j (chosen) and 2j + 1 (rejected): prompt + answer, the answer trained */
static void fill_rows(const cJSON *pairs)
{
    static const char *const side[2] = {"chosen", "rejected"};
    for (int j = 0; j < PAIRS; j++)
        for (int s = 0; s < 2; s++) {
            const cJSON *p = cJSON_GetArrayItem(pairs, j), *prompt = cJSON_GetObjectItem(p, "prompt");
            const cJSON *answer = cJSON_GetObjectItem(p, side[s]);
            int np = cJSON_GetArraySize(prompt), n = np + cJSON_GetArraySize(answer);
            int32_t ids[T], labels[T];
            CHECK(n <= T);
            for (int i = 0; i < n && i < T; i++) {
                ids[i] = cJSON_GetArrayItem(i < np ? prompt : answer, i < np ? i : i - np)->valueint;
                labels[i] = i < np ? -100 : ids[i];
            }
            size_t row = (size_t)(2 * j + s) * T;
            zt_rlhf_fill_row(ids, labels, n < T ? n : T, T, input + row, target + row, pos + row);
        }
}

/* zt in fp32 against PEFT's log-probabilities in float64 (its logits rounded in fp32): sums of at
 * most 6 tokens' log-softmax over 64 logits, each logit a chain of dot products of at most 64
 * terms (test_lora_peft.c's bound of 1e-5 relative for the same model's loss). The loss and its
 * derivatives follow from the log-probabilities through β = 0.1: 1e-5 too. The gradients: the
 * same products again in fp32, now summed over 6 rows and their tokens in another order than
 * torch's, with cancellation (a tensor's largest element is smaller than the terms summed into
 * it): 1e-4 of each tensor's largest. Measured at every kernel level: 2.4e-7 relative on the
 * log-probabilities, 4e-7 on the loss, 1.2e-5 of the largest on the gradients. */
static void test_dpo_matches_peft(void)
{
    char *text;
    size_t len;
    CHECK_MSG(zt_read_file(FIXTURE "/dpo.json", &text, &len) == ZT_OK, "run from the repository root");
    cJSON *fx = cJSON_ParseWithLength(text, len), *pairs = cJSON_GetObjectItem(fx, "pairs");
    free(text);
    CHECK(cJSON_GetArraySize(pairs) == PAIRS);
    fill_rows(pairs);
    zt_llama m, base;
    zt_lora_config c;
    CHECK(zt_model_open(&m, FIXTURE "/base", ZT_F32, ZT_DEVICE_CPU) == ZT_OK);
    CHECK(zt_lora_read_config(FIXTURE "/adapter", &c) == ZT_OK && zt_lora_attach(&m, &c) == ZT_OK);
    CHECK_MSG(zt_lora_load(&m, FIXTURE "/adapter") == ZT_OK, "%s", zt_errmsg());
    CHECK(zt_llama_alloc_acts(&m, ROWS, T, 0) == ZT_OK);
    dpo_ctx ctx = {.beta = cJSON_GetObjectItem(fx, "beta")->valuedouble}, plain = ctx;
    zt_llama_objective obj = {&ctx, objective}, obj_plain = {&plain, objective};

    /* the reference: adapters off, then the base without any */
    double ref[ROWS];
    m.lora->disabled = 1;
    zt_llama_forward_objective(&m, input, target, pos, &obj, 0);
    m.lora->disabled = 0;
    memcpy(ref, ctx.logp, sizeof ref);
    CHECK(zt_model_open(&base, FIXTURE "/base", ZT_F32, ZT_DEVICE_CPU) == ZT_OK);
    CHECK(zt_llama_alloc_acts(&base, ROWS, T, 0) == ZT_OK);
    zt_llama_forward_objective(&base, input, target, pos, &obj_plain, 0);
    CHECK_MSG(!memcmp(ref, plain.logp, sizeof ref), "adapters off %.17g, the base alone %.17g", ref[0], plain.logp[0]);
    zt_llama_free(&base);

    /* the policy, the loss and the adapters' gradients */
    ctx.ref = ref;
    memset(m.lora->view.grads, 0, m.lora->view.numel * sizeof(zt_real));
    double loss = zt_llama_forward_objective(&m, input, target, pos, &obj, 1), worst = 0, worst_lp;
    for (int j = 0; j < PAIRS; j++)
        for (int s = 0; s < 2; s++) {
            const cJSON *p = cJSON_GetArrayItem(pairs, j);
            double want_ref = cJSON_GetArrayItem(cJSON_GetObjectItem(p, "reference"), s)->valuedouble;
            double want_pol = cJSON_GetArrayItem(cJSON_GetObjectItem(p, "policy"), s)->valuedouble;
            worst = fmax(worst, fabs(ref[2 * j + s] - want_ref) / fabs(want_ref));
            worst = fmax(worst, fabs(ctx.logp[2 * j + s] - want_pol) / fabs(want_pol));
            CHECK(fabs(want_pol - want_ref) > 1e-2 * fabs(want_ref)); /* the adapter matters */
        }
    CHECK_MSG(worst <= 1e-5, "log-probabilities: worst %g relative", worst);
    worst_lp = worst;
    double want = cJSON_GetObjectItem(fx, "loss")->valuedouble;
    CHECK_MSG(fabs(loss - want) <= 1e-5 * want, "loss zt %.9g, PEFT %.9g", loss, want);
    zt_st_reader *rd = NULL;
    CHECK(zt_st_open(&rd, FIXTURE "/dpo_grads.safetensors") == ZT_OK);
    const zt_llama *v = &m.lora->view;
    CHECK(rd && zt_st_count(rd) == v->n_tensors);
    worst = 0;
    for (int i = 0; rd && i < v->n_tensors; i++) {
        const zt_llama_tensor *t = &v->tensors[i];
        const zt_st_tensor *f = zt_st_find(rd, t->name);
        size_t n = (size_t)t->shape[0] * t->shape[1];
        float *g = malloc(n * sizeof *g);
        CHECK_MSG(f && g && zt_st_read_into(f, g, ZT_F32, t->shape, 2) == ZT_OK, "%s", t->name);
        double big = 0, diff = 0;
        for (size_t e = 0; f && g && e < n; e++)
            big = fmax(big, fabs(g[e])), diff = fmax(diff, fabs(g[e] - v->grads[t->offset + e]));
        worst = fmax(worst, diff / big);
        free(g);
    }
    CHECK_MSG(worst <= 1e-4, "gradients: worst %g of the tensor's largest", worst);
    fprintf(stderr, "  log-probabilities within %.1e, loss %.9g (PEFT %.9g), gradients within %.1e\n", worst_lp, loss,
            want, worst);
    zt_st_close(rd);
    zt_llama_free(&m);
    cJSON_Delete(fx);
}

int main(void)
{
    RUN(test_dpo_matches_peft);
    return test_summary();
}
