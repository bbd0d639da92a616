/* Causal-LM training (zt pretrain, zt sft): packed rows of the data set, the loss a mean
 * over the target tokens of the whole step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/log.h"
#include "trainer.h"

typedef struct lm {
    zt_dataset train, valid;
    zt_loader loader;
    zt_batch *micro; /* gradient_accumulation_steps batches of one step */
    double router_aux; /* a mixture of experts: the step's load-balancing loss, the mean of its passes' */
} lm;

static zt_status lm_check(const zt_recipe *r)
{
    if (r->data.format == ZT_DATA_PREFERENCE || r->data.format == ZT_DATA_UNPAIRED || r->data.format == ZT_DATA_PROMPT)
        return zt_fail(ZT_EUSER, "data.format '%s' is for zt rlhf", zt_data_format_names[r->data.format]);
    return ZT_OK;
}

static zt_status lm_open(zt_trainer *t)
{
    const zt_recipe *r = t->r;
    lm *s = calloc(1, sizeof *s);
    int A = r->train.gradient_accumulation_steps;
    if (s) s->micro = calloc(A, sizeof *s->micro);
    t->ctx = s;
    if (!s || !s->micro)
        return zt_fail(ZT_ENOMEM,
                       "out of memory for the %d micro-batches of a step (train.gradient_accumulation_steps)", A);
    t->rows = r->train.micro_batch_size;
    /* the load-balancing loss of a step: the mean over its passes (every micro-batch of every rank) */
    const zt_llama_config *c = &t->m.cfg;
    t->m.router_aux_weight = c->output_router_logits ? c->router_aux_loss_coef / (A * t->zero.world) : 0;
    zt_status st = zt_data_open(r, &t->tools, t->m.V, &s->train, &s->valid);
    if (!st)
        st = zt_loader_init(&s->loader, &s->train, t->T, t->rows, r->data.packing, r->data.shuffle, r->train.seed,
                            t->zero.rank, t->zero.world);
    for (int i = 0; i < A && !st; i++) st = zt_batch_alloc(&s->micro[i], t->rows, t->T);
    if (st) return st;
    zt_loader_stats ls = zt_loader_get_stats(&s->loader);
    zt_log_info("data: %lld examples, %lld rows of %d per epoch (%.1f%% padding)", (long long)ls.examples,
                (long long)ls.rows, t->T, 100 * ls.padding_fraction);
    return ZT_OK;
}

/* epochs → steps: the rows of each epoch (all ranks'), in global batches */
static zt_status lm_plan(zt_trainer *t, long *steps)
{
    const zt_recipe *r = t->r;
    lm *s = t->ctx;
    int64_t rows = 0, per_step = (int64_t)t->rows * r->train.gradient_accumulation_steps * t->zero.world;
    long epochs = (long)ceil(r->train.num_train_epochs);
    for (long e = 0; e < epochs; e++) {
        int64_t n;
        zt_status st = zt_loader_epoch_rows(&s->loader, e, &n);
        if (st) return st;
        double frac = r->train.num_train_epochs - e;
        rows += frac < 1 ? (int64_t)ceil(n * frac) : n;
    }
    *steps = (long)((rows + per_step - 1) / per_step);
    return ZT_OK;
}

static zt_status lm_grads(zt_trainer *t, long step, zt_step_result *out)
{
    lm *s = t->ctx;
    int A = t->r->train.gradient_accumulation_steps;
    double sums[3] = {0, 0, 0}; /* target tokens, then the loss, the load-balancing loss: over all ranks and passes */
    zt_status st;
    for (int i = 0; i < A; i++) {
        if ((st = zt_loader_next(&s->loader, &s->micro[i]))) return st;
        sums[0] += (double)s->micro[i].n_targets;
    }
    if ((st = zt_zero_sum(&t->zero, sums, 1))) return st;
    /* the loss of a step is a mean over all its target tokens, not over micro-batches or ranks */
    float scale = sums[0] > 0 ? (float)(1.0 / sums[0]) : 0.0f;
    for (int i = 0; i < A; i++) {
        t->m.row_lens = s->micro[i].lens;
        zt_llama_forward_backward(&t->m, s->micro[i].input, s->micro[i].target, s->micro[i].pos, scale, &sums[1]);
        sums[2] += t->m.router_aux;
    }
    t->m.row_lens = NULL;
    if ((st = zt_zero_sum(&t->zero, &sums[1], 2))) return st;
    s->router_aux = sums[2] / (A * t->zero.world);
    out->loss = (sums[0] > 0 ? sums[1] / sums[0] : 0) + t->m.router_aux_weight * sums[2];
    out->items = out->tokens = (int64_t)sums[0];
    out->input_tokens = (int64_t)A * t->rows * t->T;
    return ZT_OK;
}

/* a mixture of experts' load-balancing loss (in the loss with output_router_logits) */
static zt_status lm_metrics(zt_trainer *t, cJSON *row)
{
    if (row && t->m.cfg.n_experts) zt_json_number(row, "router_aux_loss", ((lm *)t->ctx)->router_aux);
    return ZT_OK;
}

static zt_status lm_evaluate(zt_trainer *t, long step)
{
    lm *s = t->ctx;
    if (!s->valid.n_examples) return ZT_OK;
    zt_eval_result e;
    zt_status st = zt_eval_dataset(&t->m, &s->valid, t->r, &e);
    if (st || !t->lead) return st;
    zt_log_info("step %ld | valid loss %.4f | %lld tokens", step, e.loss, (long long)e.tokens);
    cJSON *row = zt_trainer_row(t, step, "valid");
    zt_json_number(row, "loss", e.loss);
    zt_json_number(row, "perplexity", exp(e.loss));
    cJSON_AddNumberToObject(row, "target_tokens", (double)e.tokens);
    return zt_trainer_write_row(t, row);
}

static zt_loader_state lm_get_state(zt_trainer *t) { return zt_loader_get_state(&((lm *)t->ctx)->loader); }
static zt_status lm_set_state(zt_trainer *t, zt_loader_state st)
{
    return zt_loader_set_state(&((lm *)t->ctx)->loader, st);
}

static void lm_close(zt_trainer *t)
{
    lm *s = t->ctx;
    if (!s) return;
    if (s->micro)
        for (int i = 0; i < t->r->train.gradient_accumulation_steps; i++) zt_batch_free(&s->micro[i]);
    free(s->micro);
    zt_loader_free(&s->loader);
    zt_dataset_free(&s->train);
    zt_dataset_free(&s->valid);
    free(s);
    t->ctx = NULL;
}

static const zt_algo lm_algo = {
    .name = "lm",
    .check = lm_check,
    .open = lm_open,
    .plan = lm_plan,
    .grads = lm_grads,
    .metrics = lm_metrics,
    .evaluate = lm_evaluate,
    .get_state = lm_get_state,
    .set_state = lm_set_state,
    .close = lm_close,
};

zt_status zt_train(const zt_recipe *r, int argc, char **argv) { return zt_train_with(r, &lm_algo, argc, argv); }
