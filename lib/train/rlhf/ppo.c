/* PPO as DeepSpeed-Chat's step 3 runs it: an actor (the policy, trained by the loop), a
 * critic (a score head giving a value per token, trained here next to it; initialised from
 * rlhf.reward_model when given, else from the starting model with a new head; with LoRA its own
 * adapters on that frozen model and the head trained whole, as a reward model's), the frozen
 * reference, and the reward (program or model). Per step and rank, micro_batch_size ×
 * gradient_accumulation_steps prompts get one completion each (rollout.h); then
 *   reward per token   -kl_coef · (old - ref), plus the clipped score on the last token,
 *   advantages         GAE (gamma, lam) on the critic's values, whitened over the step,
 *   actor              clipped surrogate (cliprange), mean over the step's tokens,
 *   critic             clipped value loss (cliprange_value) against the returns.
 * Each batch of generations serves rlhf.ppo_epochs optimizer steps of both models. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/model/lora.h"
#include "lib/model/open.h"
#include "lib/model/qbase.h"
#include "lib/model/qbase_read.h"
#include "lib/plan/options.h"
#include "rl_loss.h"
#include "rlhf.h"
#include "rollout.h"

typedef struct ppo {
    zt_rollout ro;
    double *old, *values, *adv, *ret; /* per position of the step's rows */
    int mb, critic_pass;              /* the micro-batch the objective works on, and for which model */
    double scale;                     /* 1 / completion tokens of the step, all ranks */
    /* the critic, and what trains of it: the model, or with LoRA its adapters and head (view) */
    zt_llama critic, *ctrained;
    const char *from; /* the model it started from */
    zt_zero czero;
    zt_optstate copt;
    zt_schedule csched;
    int csched_ready;
    float critic_norm;
    /* sums since the last metrics row */
    double trained, kl, clipped, value_loss, value_clipped, steps;
} ppo;

/* per-token rewards, GAE and whitened advantages over the step (all ranks) */
static zt_status advantages(zt_trainer *t, ppo *s)
{
    zt_rollout *ro = &s->ro;
    const zt_recipe *r = ro->r;
    int rows = ro->A * ro->B;
    double *rw = malloc(4 * (size_t)ro->T * sizeof *rw), *v = rw + ro->T, *a = v + ro->T, *g = a + ro->T;
    int *at = malloc((size_t)ro->T * sizeof *at);
    if (!rw || !at) {
        free(rw), free(at);
        return zt_fail(ZT_ENOMEM, "out of memory");
    }
    double sums[3] = {0, 0, 0}; /* tokens, Σ adv, Σ adv² */
    for (int row = 0; row < rows; row++) {
        int n = 0;
        for (int p = 0; p < ro->T; p++)
            if (ro->target[(size_t)row * ro->T + p] >= 0) at[n++] = row * ro->T + p;
        if (!n) continue;
        double score = ro->rewards[row], clip = r->rlhf.reward_clip;
        if (clip > 0) score = fmin(fmax(score, -clip), clip);
        for (int i = 0; i < n; i++) {
            rw[i] = -r->rlhf.kl_coef * (s->old[at[i]] - ro->ref[at[i]]);
            v[i] = s->values[at[i]];
        }
        rw[n - 1] += score;
        zt_gae(rw, v, n, r->rlhf.gamma, r->rlhf.lam, a, g);
        for (int i = 0; i < n; i++) {
            s->adv[at[i]] = a[i], s->ret[at[i]] = g[i];
            sums[0]++, sums[1] += a[i], sums[2] += a[i] * a[i];
            s->kl += s->old[at[i]] - ro->ref[at[i]];
        }
    }
    free(rw), free(at);
    zt_status st = zt_zero_sum(&t->zero, sums, 3);
    if (st || sums[0] < 2) return st;
    double mean = sums[1] / sums[0], sd = sqrt(fmax(sums[2] / sums[0] - mean * mean, 0));
    for (size_t i = 0; i < (size_t)rows * ro->T; i++)
        if (ro->target[i] >= 0) s->adv[i] = (s->adv[i] - mean) / (sd + 1e-8);
    return ZT_OK;
}

/* micro-batch s->mb: Σ over its completion tokens of the actor's clipped surrogate, or of
 * the critic's clipped value loss */
static double ppo_objective(void *ctx, const double *out, double *coef, int N)
{
    ppo *s = ctx;
    const zt_rollout *ro = &s->ro;
    const zt_recipe *r = ro->r;
    double total = 0;
    if (coef) memset(coef, 0, (size_t)N * sizeof *coef);
    for (int i = 0; i < N; i++) {
        size_t at = (size_t)s->mb * ro->B * ro->T + i;
        if (ro->target[at] < 0) continue;
        double d, loss;
        if (s->critic_pass) {
            loss = zt_clipped_value_loss(out[i], s->values[at], s->ret[at], r->rlhf.cliprange_value, &d);
            if (coef) s->value_loss += loss, s->value_clipped += fabs(out[i] - s->values[at]) > r->rlhf.cliprange_value;
        } else {
            double ratio = exp(out[i] - s->old[at]), eps = r->rlhf.cliprange;
            loss = zt_clipped_policy_loss(out[i], s->old[at], s->adv[at], eps, eps, &d);
            if (coef) s->trained++, s->clipped += ratio < 1 - eps || ratio > 1 + eps;
        }
        if (coef) coef[i] = d * s->scale;
        total += loss;
    }
    return total;
}

/* every micro-batch through model m with the objective, gradients accumulated; Σ loss */
static double passes(ppo *s, zt_llama *m, int critic)
{
    zt_rollout *ro = &s->ro;
    zt_llama_objective obj = {s, ppo_objective};
    double loss = 0;
    s->critic_pass = critic;
    for (s->mb = 0; s->mb < ro->A; s->mb++) {
        size_t at = (size_t)s->mb * ro->B * ro->T;
        loss += zt_llama_forward_objective(m, ro->input + at, ro->target + at, ro->pos + at, &obj, 1);
    }
    return loss;
}

static zt_status ppo_grads(zt_trainer *t, long step, zt_step_result *out)
{
    ppo *s = t->ctx;
    zt_rollout *ro = &s->ro;
    const zt_recipe *r = t->r;
    zt_status st;
    if (!s->csched_ready) { /* the run's steps are known now */
        double lr = r->rlhf.critic_learning_rate > 0 ? r->rlhf.critic_learning_rate : r->train.learning_rate;
        if ((st = zt_schedule_init(&s->csched, r->train.lr_scheduler_type, lr, t->total_steps, r->train.warmup_steps,
                                   r->train.warmup_ratio, r->train.min_lr_ratio, r->train.decay_ratio,
                                   &r->train.lr_kwargs)))
            return st;
        s->csched_ready = 1;
    }
    s->critic.pass = (uint64_t)step << 24; /* the actor's rule (trainer.c) */
    if ((step - 1) % r->rlhf.ppo_epochs == 0) {
        int rows = ro->A * ro->B;
        if ((st = zt_rollout_step(ro, t, 1, step))) return st;
        zt_rollout_outputs(ro, &t->m, rows, s->old);
        zt_rollout_outputs(ro, &s->critic, rows, s->values);
        if ((st = advantages(t, s))) return st;
    }
    double sums[3] = {0, 0, 0}; /* completion tokens, the actor's loss, the critic's */
    for (int i = 0; i < ro->A * ro->B; i++) sums[0] += ro->ntok[i];
    if ((st = zt_zero_sum(&t->zero, sums, 1))) return st;
    s->scale = sums[0] > 0 ? 1 / sums[0] : 0;
    zt_zero_zero_grads(&s->czero);
    sums[2] = passes(s, &s->critic, 1);
    if ((st = zt_zero_sum(&t->zero, &sums[2], 1)) ||
        (st = zt_optimizer_step(r, &s->czero, &s->copt, zt_schedule_lr(&s->csched, step), step, sums[2],
                                &s->critic_norm)))
        return st;
    sums[1] = passes(s, &t->m, 0);
    if ((st = zt_zero_sum(&t->zero, &sums[1], 1))) return st;
    s->steps++;
    out->loss = sums[1] * s->scale;
    out->items = out->tokens = (int64_t)sums[0];
    out->input_tokens = (int64_t)ro->A * ro->B * ro->T;
    return ZT_OK;
}

static zt_status ppo_metrics(zt_trainer *t, cJSON *row)
{
    ppo *s = t->ctx;
    double a[5] = {s->trained, s->clipped, s->value_loss, s->value_clipped, s->kl};
    double tokens = s->ro.acc.tokens; /* the new generations' tokens, before the rollout's metrics reset them */
    s->trained = s->clipped = s->value_loss = s->value_clipped = s->kl = s->steps = 0;
    zt_status st = zt_zero_sum(&t->zero, &tokens, 1);
    if (!st) st = zt_rollout_metrics(&s->ro, t, row);
    if (!st) st = zt_zero_sum(&t->zero, a, 5);
    if (st || !row) return st;
    double n = a[0] > 0 ? a[0] : NAN;
    zt_json_number(row, "clip_fraction", a[1] / n);
    zt_json_number(row, "value_loss", a[2] / n);
    zt_json_number(row, "value_clip_fraction", a[3] / n);
    zt_json_number(row, "kl", tokens > 0 ? a[4] / tokens : NAN);
    zt_json_number(row, "critic_grad_norm", s->critic_norm);
    return ZT_OK;
}

static zt_status ppo_evaluate(zt_trainer *t, long step) { return zt_rollout_evaluate(&((ppo *)t->ctx)->ro, t, step); }

/* ---- the critic's checkpoints and final save ---------------------------------------------- */

static zt_status critic_dir(const char *dir, char *out, size_t n)
{
    zt_status st = zt_path_join(out, n, dir, "critic");
    return st ? st : zt_mkdir_p(out);
}

static zt_status ppo_save(zt_trainer *t, const char *dir)
{
    ppo *s = t->ctx;
    char path[4200];
    zt_status st = critic_dir(dir, path, sizeof path);
    return st ? st : zt_optstate_save(&s->copt, path);
}

static zt_status ppo_restore(zt_trainer *t, const char *dir)
{
    ppo *s = t->ctx;
    char path[4200];
    zt_status st = zt_path_join(path, sizeof path, dir, "critic");
    if (!st) st = zt_zero_read_params(&s->czero, path, s->ctrained->numel);
    return st ? st : zt_optstate_restore(&s->copt, path, s->ctrained->numel);
}

/* the critic next to final/: RUN/critic, a score-head model, or with LoRA a PEFT SEQ_CLS adapter
 * directory (its adapters and head) on the model it started from */
static zt_status ppo_finish(zt_trainer *t)
{
    ppo *s = t->ctx;
    char path[4200];
    zt_dtype dtype = t->r->model.dtype;
    zt_status st = zt_zero_gather_all(&s->czero);
    if (!st && t->lead && !(st = zt_rundir_path(&t->rd, path, sizeof path, "critic")))
        st = s->critic.lora ? zt_lora_save(&s->critic, path, s->from)
                            : zt_llama_save(&s->critic, path, dtype, 5000000000ull);
    if (!st && t->lead && s->critic.qbase) /* its adapters trained on that base (zt eval, zt export --merge) */
        st = zt_qbase_note_write(path, s->critic.qbase->kind, s->critic.qbase->double_quant);
    zt_zero_release_all(&s->czero);
    return st;
}

/* ---- setup -------------------------------------------------------------------------------- */

/* With a LoRA actor the critic is LoRA too: fresh adapters of the actor's kind on its frozen model,
 * the value head trained whole (modules_to_save "score") and, where the actor trains the
 * embedding (a grown vocabulary), the embedding */
static zt_status critic_lora(zt_trainer *t, ppo *s)
{
    zt_lora_config c = zt_plan_critic_lora(t->m.lora->cfg);
    zt_status st = zt_lora_attach(&s->critic, &c);
    if (st) return st;
    s->critic.draw_seed = ~t->m.draw_seed; /* dropout masks of its own */
    return zt_lora_init_weights(&s->critic, (uint64_t)t->r->train.seed + 1);
}

/* The critic's frozen model: with a quantized actor base (lora.quantize_base) quantized alike and
 * held whole, its layers through the cache in data.cache_dir, as the actor's */
static zt_status open_critic(zt_trainer *t, ppo *s)
{
    const zt_recipe *r = t->r;
    if (!t->m.qbase) return zt_model_open_head(&s->critic, s->from, r->model.dtype, r->model.device, 1);
    zt_qbase_reader *q = NULL;
    int hit;
    zt_status st = zt_model_open_quantized(&s->critic, s->from, r->model.dtype, r->model.device, 1, t->m.qbase->kind,
                                           t->m.qbase->double_quant, &q);
    if (!st) st = zt_qbase_load(&s->critic, q, r->data.cache_dir[0] ? r->data.cache_dir : NULL, &hit);
    zt_qbase_reader_close(q);
    return st;
}

static zt_status ppo_open(zt_trainer *t)
{
    const zt_recipe *r = t->r;
    ppo *s = calloc(1, sizeof *s);
    t->ctx = s;
    if (!s) return zt_fail(ZT_ENOMEM, "out of memory");
    zt_status st = zt_rollout_open(&s->ro, t, 1);
    if (st) return st;
    size_t N = (size_t)s->ro.A * s->ro.B * s->ro.T;
    s->old = malloc(4 * N * sizeof *s->old);
    if (!s->old) return zt_fail(ZT_ENOMEM, "out of memory");
    s->values = s->old + N, s->adv = s->values + N, s->ret = s->adv + N;
    const char *from = s->from = zt_plan_critic_dir(r);
    /* a LoRA critic's adapters are replicated as the actor's are (its frozen model is held whole) */
    zt_zero_options opts = t->m.lora ? zt_plan_adapter_zero_options(r) : zt_plan_zero_options(r);
    zt_offload_io io = zt_recipe_offload_io(r);
    opts.swap_kind = "critic-params";
    if ((st = open_critic(t, s))) return st;
    if (s->critic.V < t->m.V && (st = zt_llama_resize_vocab(&s->critic, t->m.V))) return st; /* the template's tokens */
    zt_plan_tile_model(r, &s->critic);                                                       /* tiled like the policy */
    if (t->m.lora && (st = critic_lora(t, s))) return st;
    s->ctrained = s->critic.lora ? &s->critic.lora->view : &s->critic;
    if ((st = zt_llama_alloc_acts(&s->critic, s->ro.B, s->ro.T, r->model.activation_checkpointing)) ||
        (st = zt_zero_init(&s->czero, t->comm, &opts, s->ctrained)) ||
        (st = zt_optstate_open(&s->copt, r->offload.optimizer, r->train.optim, &io, &s->czero, "critic-optim")))
        return st;
    zt_log_info("data: %lld prompts, %lld held out; %d per rank and step; the critic from '%s'",
                (long long)s->ro.train.n_examples, (long long)s->ro.valid.n_examples, s->ro.A * s->ro.B, from);
    return ZT_OK;
}

static zt_status ppo_plan(zt_trainer *t, long *steps)
{
    ppo *s = t->ctx;
    double groups = zt_items_groups_per_epoch(&s->ro.order, s->ro.A * s->ro.B) * t->r->train.num_train_epochs;
    *steps = (long)ceil(groups * t->r->rlhf.ppo_epochs);
    return ZT_OK;
}

static zt_loader_state ppo_get_state(zt_trainer *t) { return zt_items_get_state(&((ppo *)t->ctx)->ro.order); }
static zt_status ppo_set_state(zt_trainer *t, zt_loader_state st)
{
    return zt_items_set_state(&((ppo *)t->ctx)->ro.order, st);
}

static void ppo_close(zt_trainer *t)
{
    ppo *s = t->ctx;
    if (!s) return;
    zt_rollout_close(&s->ro);
    zt_optstate_close(&s->copt);
    zt_llama_free(&s->critic);
    zt_zero_free(&s->czero);
    free(s->old);
    free(s);
    t->ctx = NULL;
}

const zt_algo zt_algo_ppo = {
    .name = "ppo",
    .check = zt_rollout_check,
    .open = ppo_open,
    .plan = ppo_plan,
    .grads = ppo_grads,
    .metrics = ppo_metrics,
    .evaluate = ppo_evaluate,
    .get_state = ppo_get_state,
    .set_state = ppo_set_state,
    .save = ppo_save,
    .restore = ppo_restore,
    .finish = ppo_finish,
    .close = ppo_close,
};
