/* Gradient checks of zt rlhf's losses through the whole model (zt_real = double): the
 * parameters' gradients from zt_llama_forward_objective against central finite
 * differences of the loss, for DPO (sigmoid with label smoothing, IPO), KTO, the reward
 * model's pairwise loss, GRPO's clipped objective with its KL penalty (PPO's policy loss
 * is the same clipped objective on GAE advantages) and PPO's clipped value loss. */
#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/model/llama.h"
#include "lib/train/rlhf/rl_loss.h"
#include "test.h"

enum { B = 2, T = 8 };

/* row 0: a sequence of 6 tokens (its last 4 trained); row 1: 8 tokens (its last 5) */
static int32_t input[B * T], target[B * T], pos[B * T];
static const int len[B] = {6, 8}, prompt[B] = {2, 3};
static double fixed[B * T]; /* old log-probabilities or values: constants of the loss */

static void make_batch(int vocab)
{
    for (int r = 0; r < B; r++)
        for (int t = 0; t < T; t++) {
            int i = r * T + t;
            input[i] = t < len[r] ? (i * 5 + 2) % vocab : 0;
            pos[i] = t < len[r] ? t : t - len[r];
            target[i] = t + 1 < len[r] && t + 1 >= prompt[r] ? (i * 5 + 7) % vocab : -100;
        }
}

static double row_sum(const double *out, int r)
{
    double s = 0;
    for (int t = 0; t < T; t++) s += target[r * T + t] >= 0 ? out[r * T + t] : 0;
    return s;
}

static int row_count(int r)
{
    int n = 0;
    for (int t = 0; t < T; t++) n += target[r * T + t] >= 0;
    return n;
}

static void row_coef(double *coef, int r, double d)
{
    for (int t = 0; t < T; t++)
        if (target[r * T + t] >= 0) coef[r * T + t] = d;
}

/* ---- the objectives, as the trainer builds them ---- */

static zt_dpo_kind dpo_kind;
static double dpo(void *ctx, const double *out, double *coef, int N)
{
    int ipo = dpo_kind == ZT_DPO_IPO, kc = ipo ? row_count(0) : 1, kr = ipo ? row_count(1) : 1;
    double dc, dr,
        loss = zt_dpo_loss(dpo_kind, 0.5, ipo ? 0 : 0.1, row_sum(out, 0) / kc, row_sum(out, 1) / kr, -3.0 / kc,
                           -4.0 / kr, &dc, &dr);
    if (coef) {
        memset(coef, 0, N * sizeof *coef);
        row_coef(coef, 0, dc / kc), row_coef(coef, 1, dr / kr);
    }
    return loss;
}

/* ORPO as pref.c builds it for one pair: the odds-ratio term on the rows' average
 * log-probabilities, plus the chosen answer's NLL over its tokens */
static double orpo(void *ctx, const double *out, double *coef, int N)
{
    int kc = row_count(0), kr = row_count(1);
    double pc = row_sum(out, 0), dc, dr, loss = zt_orpo_loss(0.5, pc / kc, row_sum(out, 1) / kr, &dc, &dr) - pc / kc;
    if (coef) {
        memset(coef, 0, N * sizeof *coef);
        row_coef(coef, 0, (dc - 1) / kc), row_coef(coef, 1, dr / kr);
    }
    return loss;
}

/* KTO as pref.c builds it for two answers: row 0 desirable (weight 1.33), row 1 not (0.75), the
 * reference's log-probabilities -3 and -4, the batch's KL estimate 0.3 (a constant: no gradient) */
static double kto(void *ctx, const double *out, double *coef, int N)
{
    double d0, d1,
        loss = zt_kto_loss(0.5, 1.33, 1, row_sum(out, 0) + 3, 0.3, &d0) +
               zt_kto_loss(0.5, 0.75, 0, row_sum(out, 1) + 4, 0.3, &d1);
    if (coef) {
        memset(coef, 0, N * sizeof *coef);
        row_coef(coef, 0, d0), row_coef(coef, 1, d1);
    }
    return loss;
}

static double reward(void *ctx, const double *out, double *coef, int N)
{
    double dc, dr, loss = zt_pairwise_loss(out[len[0] - 1], out[T + len[1] - 1], &dc, &dr);
    if (coef) {
        memset(coef, 0, N * sizeof *coef);
        coef[len[0] - 1] = dc, coef[T + len[1] - 1] = dr;
    }
    return loss;
}

/* per token: the clipped objective (advantage +1.3 in row 0, -0.7 in row 1) + 0.2·KL to a
 * reference at fixed[] - 0.3; per sequence: the mean over its tokens */
static double grpo(void *ctx, const double *out, double *coef, int N)
{
    double total = 0;
    if (coef) memset(coef, 0, N * sizeof *coef);
    for (int r = 0; r < B; r++) {
        int n = row_count(r);
        for (int t = 0; t < T; t++) {
            int i = r * T + t;
            if (target[i] < 0) continue;
            double d, dk;
            double loss = zt_clipped_policy_loss(out[i], fixed[i], r ? -0.7 : 1.3, 0.2, 0.28, &d);
            loss += 0.2 * zt_kl_k3(out[i], fixed[i] - 0.3, &dk);
            total += loss / n;
            if (coef) coef[i] = (d + 0.2 * dk) / n;
        }
    }
    return total;
}

/* per token of the score head: the clipped value loss against returns 0.4·t - 1 */
static double value(void *ctx, const double *out, double *coef, int N)
{
    double total = 0;
    if (coef) memset(coef, 0, N * sizeof *coef);
    for (int i = 0; i < N; i++) {
        if (target[i] < 0) continue;
        double d;
        total += zt_clipped_value_loss(out[i], fixed[i], 0.4 * (i % T) - 1, 0.2, &d);
        if (coef) coef[i] = d;
    }
    return total;
}

/* ---- the check ---- */

static double loss_of(zt_llama *m, zt_llama_objective *obj)
{
    return zt_llama_forward_objective(m, input, target, pos, obj, 0);
}

static double capture(void *ctx, const double *out, double *coef, int N)
{
    memcpy(fixed, out, N * sizeof *out);
    return 0;
}

/* fixed[] ← the outputs at the current weights plus offsets that put tokens on both sides
 * of the clip range (far enough from its edges for finite differences) */
static void set_fixed(zt_llama *m)
{
    zt_llama_objective cap = {NULL, capture};
    loss_of(m, &cap);
    static const double offsets[] = {-0.5, 0.05, 0.45, -0.04};
    for (int i = 0; i < B * T; i++) fixed[i] += offsets[i % 4];
}

static double check(int num_labels, double (*fn)(void *, const double *, double *, int), int with_fixed)
{
    zt_llama_config c;
    zt_llama_config_default(&c);
    c.vocab_size = 11, c.hidden_size = 8, c.intermediate_size = 12, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 4, c.rms_norm_eps = 1e-5;
    c.num_labels = num_labels;
    zt_llama m;
    ZT_ASSERT(zt_llama_init(&m, &c, zt_backend_cpu(), ZT_F32) == ZT_OK);
    ZT_ASSERT(zt_llama_alloc_acts(&m, B, T, 0) == ZT_OK);
    zt_llama_init_weights(&m, 7, 0.5);
    make_batch(c.vocab_size);
    if (with_fixed) set_fixed(&m);
    zt_llama_objective obj = {NULL, fn};
    memset(m.grads, 0, m.numel * sizeof(double));
    double loss = zt_llama_forward_objective(&m, input, target, pos, &obj, 1);
    CHECK_MSG(isfinite(loss) && loss != 0, "loss %g", loss);
    /* central differences in double, step 1e-6, against the floor 1e-2: the bounds of
     * test_grad_model.c (rounding ≈ 1e-8·|loss|, truncation ≈ 2e-11·|f'''|) under 1e-5 */
    double worst = 0, norm = 0;
    const double eps = 1e-6;
    for (size_t i = 0; i < m.numel; i += TEST_SAN_STRIDE) {
        double keep = m.params[i];
        m.params[i] = keep + eps;
        double lp = loss_of(&m, &obj);
        m.params[i] = keep - eps;
        double lm = loss_of(&m, &obj);
        m.params[i] = keep;
        double fd = (lp - lm) / (2 * eps), an = m.grads[i];
        worst = fmax(worst, fabs(fd - an) / fmax(1e-2, fabs(an)));
        norm += an * an;
    }
    CHECK_MSG(norm > 1e-8, "the gradient is zero");
    zt_llama_free(&m);
    return worst;
}

/* every DPO loss but IPO, on summed log-probabilities (label smoothing 0.1) */
static void test_dpo_losses(void)
{
    static const zt_dpo_kind kinds[] = {ZT_DPO_SIGMOID,   ZT_DPO_HINGE,    ZT_DPO_ROBUST,
                                        ZT_DPO_EXO_PAIR,  ZT_DPO_NCA_PAIR, ZT_DPO_BCO_PAIR,
                                        ZT_DPO_SPPO_HARD, ZT_DPO_APO_ZERO, ZT_DPO_APO_DOWN};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        dpo_kind = kinds[i];
        double e = check(0, dpo, 0);
        CHECK_MSG(e < 1e-5, "loss %d: worst relative error %g", (int)kinds[i], e);
    }
}

/* The losses and their derivatives against tests/fixtures/dpo_losses (TRL's formulas evaluated by
 * torch in float64, derivatives by autograd) on a grid of log-ratios: the same functions written
 * with other operations (log1p against log, sigmoid by cases against torch's), so within a few
 * roundings of values of order 1 to 60: 1e-12 relative, or 1e-13 absolute near 0. */
static void test_dpo_losses_are_trl(void)
{
    static const char *const names[] = {"sigmoid",  "ipo",       "hinge",    "robust",   "exo_pair", "nca_pair",
                                        "bco_pair", "sppo_hard", "apo_zero", "apo_down", "orpo"};
    char *text;
    size_t len;
    ZT_ASSERT(zt_read_file("tests/fixtures/dpo_losses/expected.json", &text, &len) == ZT_OK);
    cJSON *doc = cJSON_ParseWithLength(text, len), *c;
    free(text);
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases"))
    {
        const char *name = cJSON_GetObjectItem(c, "kind")->valuestring;
        int kind = 0;
        while (strcmp(names[kind], name)) kind++;
        double beta = cJSON_GetObjectItem(c, "beta")->valuedouble, eps = cJSON_GetObjectItem(c, "eps")->valuedouble;
        double cv = cJSON_GetObjectItem(c, "c")->valuedouble, rv = cJSON_GetObjectItem(c, "r")->valuedouble, dc, dr;
        double loss =
            kind == 10 ? zt_orpo_loss(beta, cv, rv, &dc, &dr) /* on average log-probabilities */
                       : zt_dpo_loss((zt_dpo_kind)kind, beta, eps, cv + 1, rv - 2, 1, -2, &dc, &dr); /* c = pc - rc */
        double want[3] = {cJSON_GetObjectItem(c, "loss")->valuedouble, cJSON_GetObjectItem(c, "dc")->valuedouble,
                          cJSON_GetObjectItem(c, "dr")->valuedouble},
               got[3] = {loss, dc, dr};
        for (int k = 0; k < 3; k++)
            CHECK_MSG(fabs(got[k] - want[k]) <= 1e-12 * fabs(want[k]) + 1e-13,
                      "%s beta %g eps %g c %g r %g: %d: %.17g, TRL %.17g", name, beta, eps, cv, rv, k, got[k], want[k]);
        n++;
    }
    CHECK_MSG(n == 480, "%d cases", n);
    cJSON_Delete(doc);
}

static double number(const cJSON *o, const char *key) { return cJSON_GetObjectItem(o, key)->valuedouble; }

/* A micro-batch's KTO losses against tests/fixtures/kto_losses (TRL's KTOTrainer.kto_loss in
 * float64, derivatives of the mean by autograd): the KL estimate as pref.c takes it, the mean of
 * the mismatched rows' log-ratios at least 0 (five differences of numbers of order 40 summed in
 * another order: within 1e-12), then each answer's loss and derivative as the DPO losses above. */
static void test_kto_losses_are_trl(void)
{
    char *text;
    size_t len;
    ZT_ASSERT(zt_read_file("tests/fixtures/kto_losses/expected.json", &text, &len) == ZT_OK);
    cJSON *doc = cJSON_ParseWithLength(text, len), *c;
    free(text);
    int cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases"))
    {
        int n = cJSON_GetArraySize(cJSON_GetObjectItem(c, "policy")), with_kl = 0, i;
        with_kl = !strcmp(cJSON_GetObjectItem(c, "loss_type")->valuestring, "kto");
        double beta = number(c, "beta"), kl = 0, mean = 0;
        for (i = 0; i < n && with_kl; i++)
            kl += cJSON_GetArrayItem(cJSON_GetObjectItem(c, "kl_policy"), i)->valuedouble -
                  cJSON_GetArrayItem(cJSON_GetObjectItem(c, "kl_reference"), i)->valuedouble;
        kl = fmax(kl / n, 0);
        CHECK_MSG(fabs(kl - number(c, "kl")) <= 1e-12, "kl %.17g, TRL %.17g", kl, number(c, "kl"));
        int at = 0; /* TRL lists the desirable answers' losses first */
        for (int good = 1; good >= 0; good--)
            for (i = 0; i < n; i++) {
                if (cJSON_IsTrue(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "desirable"), i)) != good) continue;
                double x = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "policy"), i)->valuedouble -
                           cJSON_GetArrayItem(cJSON_GetObjectItem(c, "reference"), i)->valuedouble,
                       dx;
                double loss =
                    zt_kto_loss(beta, number(c, good ? "desirable_weight" : "undesirable_weight"), good, x, kl, &dx);
                double want = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "losses"), at++)->valuedouble;
                double want_d = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "d_policy"), i)->valuedouble;
                CHECK_MSG(fabs(loss - want) <= 1e-12 * fabs(want) + 1e-13, "answer %d: loss %.17g, TRL %.17g", i, loss,
                          want);
                CHECK_MSG(fabs(dx / n - want_d) <= 1e-12 * fabs(want_d) + 1e-13, "answer %d: d %.17g, TRL %.17g", i,
                          dx / n, want_d);
                mean += loss / n;
            }
        CHECK_MSG(fabs(mean - number(c, "loss")) <= 1e-12, "mean loss %.17g, TRL %.17g", mean, number(c, "loss"));
        cases++;
    }
    CHECK_MSG(cases == 16, "%d cases", cases);
    cJSON_Delete(doc);
}

static void test_kto(void)
{
    double e = check(0, kto, 0);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
}

static void test_orpo(void)
{
    double e = check(0, orpo, 0);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
}

static void test_dpo_ipo(void)
{
    dpo_kind = ZT_DPO_IPO;
    double e = check(0, dpo, 0);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
}

static void test_reward_pairwise(void)
{
    double e = check(1, reward, 0);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
}

static void test_grpo_clipped_kl(void)
{
    double e = check(0, grpo, 1);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
}

static void test_ppo_value(void)
{
    double e = check(1, value, 1);
    CHECK_MSG(e < 1e-5, "worst relative error %g", e);
}

/* the losses' own derivatives at points on both sides of each branch */
static void test_loss_derivatives(void)
{
    const double h = 1e-6; /* losses of order 1: error ≈ 1e-10 + h²/6·|f'''| < 1e-6 */
    double xs[] = {-0.9, -0.3, 0.1, 0.6};
    for (int i = 0; i < 4; i++) {
        double x = xs[i], d, d2, lp, lm;
        zt_clipped_policy_loss(x, 0, 1.5, 0.2, 0.2, &d);
        lp = zt_clipped_policy_loss(x + h, 0, 1.5, 0.2, 0.2, &d2),
        lm = zt_clipped_policy_loss(x - h, 0, 1.5, 0.2, 0.2, &d2);
        CHECK_MSG(fabs((lp - lm) / (2 * h) - d) < 1e-6, "policy at %g: %g vs %g", x, (lp - lm) / (2 * h), d);
        zt_clipped_value_loss(x, 0, 1, 0.2, &d);
        lp = zt_clipped_value_loss(x + h, 0, 1, 0.2, &d2), lm = zt_clipped_value_loss(x - h, 0, 1, 0.2, &d2);
        CHECK_MSG(fabs((lp - lm) / (2 * h) - d) < 1e-6, "value at %g: %g vs %g", x, (lp - lm) / (2 * h), d);
    }
    double adv[5], ret[5], r[5] = {0, 0, 0, 0, 1}, v[5] = {0.1, 0.2, 0.3, 0.4, 0.5};
    zt_gae(r, v, 5, 1.0, 0.95, adv, ret);
    /* the last step: δ = r - v; each earlier one adds γλ times the next advantage (double
     * arithmetic on numbers of order 1 in another order: within a few 2⁻⁵³, checked to 1e-12) */
    CHECK(fabs(adv[4] - 0.5) < 1e-12);
    CHECK(fabs(adv[3] - (0.5 - 0.4 + 0.95 * 0.5)) < 1e-12);
    CHECK(fabs(ret[0] - (adv[0] + 0.1)) < 1e-12);
}

int main(void)
{
    omp_set_num_threads(1);
    RUN(test_dpo_losses);
    RUN(test_dpo_losses_are_trl);
    RUN(test_kto_losses_are_trl);
    RUN(test_kto);
    RUN(test_orpo);
    RUN(test_dpo_ipo);
    RUN(test_reward_pairwise);
    RUN(test_grpo_clipped_kl);
    RUN(test_ppo_value);
    RUN(test_loss_derivatives);
    return test_summary();
}
