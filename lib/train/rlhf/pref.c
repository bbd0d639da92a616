/* Preference pairs: DPO on the policy's log-probabilities against cached reference
 * log-probabilities, and reward models (a score head on the sequence's last token) with
 * the pairwise loss. A micro-batch holds micro_batch_size pairs, chosen in row 2j and
 * rejected in row 2j + 1, one sequence per row. */
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/data/cache.h"
#include "lib/data/items.h"
#include "lib/model/lora.h"
#include "lib/model/qbase.h"
#include "lib/plan/options.h"
#include "rl_loss.h"
#include "rlhf.h"

/* Sums over pairs: what the metrics report. */
typedef struct pair_stats {
    double pairs, loss, chosen, rejected, correct, likelier;
} pair_stats;

typedef struct pref {
    int dpo; /* else a reward model */
    zt_dpo_kind kind;
    int simpo; /* SimPO: sigmoid, no reference */
    int orpo;  /* ORPO: no reference, its odds-ratio term and the chosen answers' NLL */
    zt_dataset train, valid;
    zt_items order;
    int pairs;                     /* per micro-batch */
    int64_t *items;                /* the micro-batch's pair numbers, -1: none */
    int32_t *input, *target, *pos; /* the micro-batch's rows */
    int32_t *lens;                 /* each row's tokens before its padding */
    double router_aux;             /* a mixture of experts: the step's load-balancing loss (the mean of its passes') */
    const zt_dataset *ds;          /* what items number */
    const double *ref;             /* DPO: the reference log-probability of each of ds's examples */
    double *ref_train, *ref_valid;
    double *store;  /* computing references: each example's log-probability goes here */
    double scale;   /* 1 / pairs of the step (all ranks) */
    /* ORPO: a pair's loss holds its chosen answer's NLL times this, pairs / chosen answer tokens
     * of the step (or pass), so that the mean over pairs is the mean over those tokens */
    double nll_weight;
    pair_stats acc; /* since the last metrics row */
    const zt_recipe *r;
    int T;
} pref;

/* The micro-batch of the pairs in p->items from p->ds. */
static void fill_batch(pref *p)
{
    int T = p->T;
    for (int j = 0; j < p->pairs; j++)
        for (int side = 0; side < 2; side++) {
            size_t row = (size_t)(2 * j + side) * T;
            int64_t e = p->items[j] < 0 ? -1 : 2 * p->items[j] + side;
            const int32_t *ids = e < 0 ? NULL : p->ds->ids + p->ds->offsets[e];
            const int32_t *labels = e < 0 ? NULL : p->ds->labels + p->ds->offsets[e];
            int n = e < 0 ? 0 : (int)zt_dataset_len(p->ds, e);
            zt_rlhf_fill_row(ids, labels, n, T, p->input + row, p->target + row, p->pos + row);
            p->lens[2 * j + side] = n < T ? n : T;
        }
}

/* Σ of a row's outputs over its targets, and their count */
static double row_sum(const pref *p, const double *out, int row, int *count)
{
    double s = 0;
    *count = 0;
    for (int t = 0; t < p->T; t++)
        if (p->target[(size_t)row * p->T + t] >= 0) s += out[(size_t)row * p->T + t], ++*count;
    return s;
}

/* the position of a row's last token (its sequence's length - 1) */
static int row_last(const pref *p, int row)
{
    int t = p->T - 1;
    while (t > 0 && p->pos[(size_t)row * p->T + t] != t) t--;
    return t;
}

static void put_coef(const pref *p, double *coef, int row, double d, int per_token)
{
    for (int t = 0; t < p->T; t++)
        if (p->target[(size_t)row * p->T + t] >= 0) coef[(size_t)row * p->T + t] = d / per_token;
}

/* The objective (zt_llama_objective): Σ over the micro-batch's pairs of their loss. */
static double pref_objective(void *ctx, const double *out, double *coef, int N)
{
    pref *p = ctx;
    const zt_recipe *r = p->r;
    double total = 0;
    if (coef) memset(coef, 0, (size_t)N * sizeof *coef);
    for (int j = 0; j < p->pairs; j++) {
        int64_t k = p->items[j];
        if (k < 0) continue;
        int c = 2 * j, w = 2 * j + 1, nc, nw;
        double pc = row_sum(p, out, c, &nc), pw = row_sum(p, out, w, &nw), loss, dc, dw, rc, rw;
        if (p->store) { /* computing the reference log-probabilities */
            p->store[2 * k] = pc, p->store[2 * k + 1] = pw;
            continue;
        }
        if (p->orpo) {
            double dcm, dwm;
            loss = zt_orpo_loss(r->rlhf.beta, pc / nc, pw / nw, &dcm, &dwm) - p->nll_weight * pc;
            rc = r->rlhf.beta * pc / nc, rw = r->rlhf.beta * pw / nw;
            if (coef)
                put_coef(p, coef, c, (dcm - p->nll_weight * nc) * p->scale, nc),
                    put_coef(p, coef, w, dwm * p->scale, nw);
        } else if (p->dpo) {
            /* SimPO: the sigmoid loss of β·(chosen - rejected average) - γ, its γ/β in the chosen's
             * reference place; its rewards are β times the averages */
            double ref_c = p->simpo ? r->rlhf.simpo_gamma / r->rlhf.beta * nc : p->ref[2 * k];
            double ref_w = p->simpo ? 0 : p->ref[2 * k + 1];
            int avg = p->kind == ZT_DPO_IPO || p->simpo; /* IPO and SimPO compare per-token averages */
            int kc = avg ? nc : 1, kw = avg ? nw : 1;
            loss = zt_dpo_loss(p->kind, r->rlhf.beta, r->rlhf.label_smoothing, pc / kc, pw / kw, ref_c / kc, ref_w / kw,
                               &dc, &dw);
            rc = r->rlhf.beta * (p->simpo ? pc / nc : pc - ref_c),
            rw = r->rlhf.beta * (p->simpo ? pw / nw : pw - ref_w);
            if (coef) put_coef(p, coef, c, dc * p->scale, kc), put_coef(p, coef, w, dw * p->scale, kw);
        } else {
            int lc = row_last(p, c), lw = row_last(p, w);
            rc = out[(size_t)c * p->T + lc], rw = out[(size_t)w * p->T + lw];
            loss = zt_pairwise_loss(rc, rw, &dc, &dw);
            if (coef) coef[(size_t)c * p->T + lc] = dc * p->scale, coef[(size_t)w * p->T + lw] = dw * p->scale;
            pc = rc, pw = rw;
        }
        pair_stats *a = &p->acc;
        a->pairs++, a->loss += loss, a->chosen += rc, a->rejected += rw;
        a->correct += rc > rw, a->likelier += pc > pw;
        total += loss;
    }
    return total;
}

/* The targets of example e of ds in its row (zt_rlhf_fill_row: labels 1 to T - 1) */
static double answer_tokens(const pref *p, const zt_dataset *ds, int64_t e)
{
    int64_t n = zt_dataset_len(ds, e) < p->T ? zt_dataset_len(ds, e) : p->T, k = 0;
    for (int64_t i = 1; i < n; i++) k += ds->labels[ds->offsets[e] + i] != ZT_IGNORE_INDEX;
    return (double)k;
}

/* ORPO's NLL weight over the chosen answers of pairs items[0..n) (-1: none) of ds, all ranks' */
static zt_status set_nll_weight(zt_trainer *t, pref *p, const zt_dataset *ds, const int64_t *items, int64_t n)
{
    double sums[2] = {0, 0}; /* pairs, their chosen answers' tokens */
    for (int64_t j = 0; j < n && p->orpo; j++)
        if (items ? items[j] >= 0 : 1) sums[0]++, sums[1] += answer_tokens(p, ds, 2 * (items ? items[j] : j));
    zt_status st = p->orpo && items ? zt_zero_sum(&t->zero, sums, 2) : ZT_OK;
    p->nll_weight = sums[1] > 0 ? sums[0] / sums[1] : 0;
    return st;
}

/* One pass over every pair of ds, spread over the ranks (all run the same number of
 * micro-batches: stage 3's forward passes are collectives); the statistics summed. */
static zt_status pass_over(zt_trainer *t, zt_llama *m, const zt_dataset *ds, pair_stats *sums)
{
    pref *p = t->ctx;
    zt_items s;
    zt_status st = zt_items_init(&s, ds->n_examples / 2, 0, 0, t->zero.rank, t->zero.world);
    if (st) return st;
    int64_t batches = zt_items_groups_per_epoch(&s, p->pairs);
    zt_llama_objective obj = {p, pref_objective};
    pair_stats keep = p->acc;
    p->acc = (pair_stats){0};
    p->ds = ds;
    set_nll_weight(t, p, ds, NULL, ds->n_examples / 2); /* the whole set: every rank counts it all */
    for (int64_t b = 0; b < batches; b++) {
        zt_items_next(&s, p->items, p->pairs);
        fill_batch(p);
        zt_llama_forward_objective(m, p->input, p->target, p->pos, &obj, 0);
    }
    zt_items_free(&s);
    *sums = p->acc;
    p->acc = keep;
    return zt_zero_sum(&t->zero, (double *)sums, sizeof *sums / sizeof(double));
}

/* ---- the reference log-probabilities, cached in data.cache_dir ---------------------------- */

static zt_status ref_key(zt_trainer *t, const char *dir, zt_cache_key *k)
{
    const zt_recipe *r = t->r;
    pref *p = t->ctx;
    char pattern[4200], line[64];
    zt_cache_key_init(k);
    /* LoRA's reference is the base as the policy holds it: quantized, when it is */
    zt_qbase_kind q = r->rlhf.reference[0] || !t->m.qbase ? ZT_QBASE_NONE : t->m.qbase->kind;
    snprintf(line, sizeof line, "zt-dpo-ref-1|%d|%s%s%s", p->T, zt_dtype_name(r->model.dtype), q ? "|" : "",
             q ? zt_qbase_kind_names[q] : "");
    if (q && t->m.qbase->double_quant) strcat(line, "|dq");
    zt_cache_key_add_str(k, line);
    const zt_dataset *sets[] = {&p->train, &p->valid};
    for (int i = 0; i < 2; i++) {
        const zt_dataset *d = sets[i];
        zt_cache_key_add(k, &d->n_examples, sizeof d->n_examples);
        if (!d->n_examples) continue;
        zt_cache_key_add(k, d->offsets, (size_t)(d->n_examples + 1) * sizeof *d->offsets);
        zt_cache_key_add(k, d->ids, (size_t)zt_dataset_tokens(d) * sizeof *d->ids);
        zt_cache_key_add(k, d->labels, (size_t)zt_dataset_tokens(d) * sizeof *d->labels);
    }
    snprintf(pattern, sizeof pattern, "%s/config.json", dir);
    zt_status st = zt_cache_key_add_file(k, pattern);
    glob_t g;
    snprintf(pattern, sizeof pattern, "%s/*.safetensors", dir);
    if (!st && glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && !st; i++) st = zt_cache_key_add_file(k, g.gl_pathv[i]);
        globfree(&g);
    }
    return st;
}

/* The cache file's doubles when it holds n of them. */
static int ref_read(const char *path, double *out, size_t n)
{
    char *data;
    size_t len;
    if (!zt_path_exists(path) || zt_read_file(path, &data, &len)) return 0;
    int ok = len == n * sizeof(double);
    if (ok) memcpy(out, data, len);
    free(data);
    return ok;
}

/* Every example's reference log-probability: from the cache, or one pass of the reference
 * model (rlhf.reference, else the starting weights; with LoRA the base, adapters switched off)
 * over train and valid, then cached. */
static zt_status reference_logps(zt_trainer *t)
{
    const zt_recipe *r = t->r;
    pref *p = t->ctx;
    const char *dir = r->rlhf.reference[0] ? r->rlhf.reference : r->model.path;
    size_t nt = (size_t)p->train.n_examples, nv = (size_t)p->valid.n_examples;
    double *all = calloc(nt + nv + 1, sizeof *all);
    if (!all) return zt_fail(ZT_ENOMEM, "out of memory for the reference log-probabilities");
    p->ref_train = all, p->ref_valid = all + nt;
    char path[4400] = "";
    zt_cache_key k;
    zt_status st = ZT_OK;
    if (r->data.cache_dir[0] && !(st = ref_key(t, dir, &k)))
        snprintf(path, sizeof path, "%s/dpo-ref-%016llx%016llx.f64", r->data.cache_dir, (unsigned long long)k.h[0],
                 (unsigned long long)k.h[1]);
    double have = path[0] && ref_read(path, all, nt + nv);
    if (st || (st = zt_zero_sum(&t->zero, &have, 1))) return st;
    if (have == t->zero.world) {
        if (t->lead) zt_log_info("DPO: reference log-probabilities from the cache '%s'", path);
        return ZT_OK;
    }
    memset(all, 0, (nt + nv) * sizeof *all);
    zt_llama ref, *m = &t->m;
    if (zt_plan_reference_dir(r)) { /* rlhf.reference, held only for this pass */
        if ((st = zt_model_open(&ref, dir, r->model.dtype, r->model.device))) return st;
        if (ref.V != t->m.V)
            st = zt_fail(ZT_EUSER, "rlhf.reference '%s' has %d tokens, the model %d", dir, ref.V, t->m.V);
        m = &ref;
    }
    if (!st) st = zt_llama_alloc_acts(m, 2 * p->pairs, p->T, 0);
    if (m->lora) m->lora->disabled = 1;
    double t0 = zt_now_s();
    pair_stats unused;
    p->store = p->ref_train;
    if (!st) st = pass_over(t, m, &p->train, &unused);
    p->store = p->ref_valid;
    if (!st && nv) st = pass_over(t, m, &p->valid, &unused);
    p->store = NULL;
    if (m->lora) m->lora->disabled = 0;
    if (m == &ref) zt_llama_free(&ref);
    if (st) return st;
    /* each pair was computed on one rank, zeros elsewhere */
    for (size_t i = 0; i < nt + nv && !st; i += 1 << 20) {
        size_t n = nt + nv - i < (size_t)1 << 20 ? nt + nv - i : (size_t)1 << 20;
        st = zt_zero_sum(&t->zero, all + i, (int)n);
    }
    if (!st && t->lead)
        zt_log_info("DPO: reference log-probabilities of %zu pairs computed in %.1f s%s%s", (nt + nv) / 2,
                    zt_now_s() - t0, path[0] ? ", cached in " : "", path);
    if (!st && t->lead && path[0]) st = zt_write_file_atomic(path, all, (nt + nv) * sizeof *all);
    return st;
}

/* ---- the algorithm ------------------------------------------------------------------------ */

static zt_status pref_check(const zt_recipe *r)
{
    if (r->data.format != ZT_DATA_PREFERENCE)
        return zt_fail(ZT_EUSER,
                       "rlhf.algorithm = \"%s\" trains on preference pairs: data.format must be \"preference\", "
                       "not \"%s\"",
                       zt_rlhf_algorithm_names[r->rlhf.algorithm], zt_data_format_names[r->data.format]);
    return ZT_OK;
}

static zt_status pref_open(zt_trainer *t, int dpo)
{
    const zt_recipe *r = t->r;
    pref *p = calloc(1, sizeof *p);
    t->ctx = p;
    if (!p) return zt_fail(ZT_ENOMEM, "out of memory");
    p->dpo = dpo, p->r = r, p->T = t->T, p->pairs = r->train.micro_batch_size;
    /* zt_rlhf_loss lists DPO's losses in zt_dpo_kind's order, then SimPO's (sigmoid); auto: sigmoid */
    _Static_assert(ZT_RLHF_APO_DOWN - ZT_RLHF_SIGMOID == ZT_DPO_APO_DOWN, "zt_rlhf_loss follows zt_dpo_kind");
    zt_rlhf_loss l = r->rlhf.loss_type;
    p->simpo = l == ZT_RLHF_SIMPO, p->orpo = l == ZT_RLHF_ORPO;
    p->kind = l >= ZT_RLHF_SIGMOID && l <= ZT_RLHF_APO_DOWN ? (zt_dpo_kind)(l - ZT_RLHF_SIGMOID) : ZT_DPO_SIGMOID;
    t->rows = 2 * p->pairs;
    size_t N = (size_t)t->rows * t->T;
    p->items = malloc((size_t)p->pairs * sizeof *p->items);
    p->input = malloc(3 * N * sizeof *p->input);
    p->lens = malloc((size_t)t->rows * sizeof *p->lens);
    if (!p->items || !p->input || !p->lens) return zt_fail(ZT_ENOMEM, "out of memory");
    /* a mixture of experts' load-balancing loss, as TRL's DPO, CPO and ORPO trainers add it with
       output_router_logits: the mean over the step's passes (reward models: none) */
    const zt_llama_config *c = &t->m.cfg;
    int A = r->train.gradient_accumulation_steps;
    t->m.router_aux_weight = dpo && c->output_router_logits ? c->router_aux_loss_coef / (A * t->zero.world) : 0;
    p->target = p->input + N, p->pos = p->target + N;
    zt_status st = zt_data_open(r, &t->tools, t->m.V, &p->train, &p->valid);
    if (!st)
        st = zt_items_init(&p->order, p->train.n_examples / 2, r->data.shuffle, (uint64_t)r->train.seed, t->zero.rank,
                           t->zero.world);
    if (!st && dpo && !p->simpo && !p->orpo) st = reference_logps(t);
    if (!st)
        zt_log_info("data: %lld preference pairs to train on, %lld held out", (long long)p->train.n_examples / 2,
                    (long long)p->valid.n_examples / 2);
    return st;
}

static zt_status dpo_open(zt_trainer *t) { return pref_open(t, 1); }
static zt_status reward_open(zt_trainer *t) { return pref_open(t, 0); }

static zt_status pref_plan(zt_trainer *t, long *steps)
{
    pref *p = t->ctx;
    double batches = zt_items_groups_per_epoch(&p->order, p->pairs) * t->r->train.num_train_epochs;
    *steps = (long)ceil(batches / t->r->train.gradient_accumulation_steps);
    return ZT_OK;
}

static zt_status pref_grads(zt_trainer *t, long step, zt_step_result *out)
{
    pref *p = t->ctx;
    int A = t->r->train.gradient_accumulation_steps;
    int64_t *items = malloc((size_t)A * p->pairs * sizeof *items);
    if (!items) return zt_fail(ZT_ENOMEM, "out of memory");
    double sums[4] = {0, 0, 0, 0}; /* pairs, target tokens, loss, load-balancing loss */
    for (int i = 0; i < A; i++) {
        zt_items_next(&p->order, items + (size_t)i * p->pairs, p->pairs);
        for (int j = 0; j < p->pairs; j++) {
            int64_t k = items[(size_t)i * p->pairs + j];
            if (k < 0) continue;
            sums[0]++;
            for (int side = 0; side < 2; side++) sums[1] += (double)zt_dataset_len(&p->train, 2 * k + side) - 1;
        }
    }
    zt_status st = zt_zero_sum(&t->zero, sums, 2);
    if (!st) st = set_nll_weight(t, p, &p->train, items, (int64_t)A * p->pairs);
    p->scale = sums[0] > 0 ? 1 / sums[0] : 0;
    p->ds = &p->train, p->ref = p->ref_train;
    zt_llama_objective obj = {p, pref_objective};
    for (int i = 0; i < A && !st; i++) {
        memcpy(p->items, items + (size_t)i * p->pairs, (size_t)p->pairs * sizeof *items);
        fill_batch(p);
        t->m.row_lens = p->lens;
        sums[2] += zt_llama_forward_objective(&t->m, p->input, p->target, p->pos, &obj, 1);
        sums[3] += t->m.router_aux;
    }
    t->m.row_lens = NULL;
    free(items);
    if (!st) st = zt_zero_sum(&t->zero, &sums[2], 2);
    p->router_aux = sums[3] / (A * t->zero.world);
    out->loss = (sums[0] > 0 ? sums[2] / sums[0] : 0) + t->m.router_aux_weight * sums[3];
    out->items = (int64_t)sums[0];
    out->tokens = (int64_t)sums[1];
    out->input_tokens = (int64_t)A * t->rows * t->T;
    return st;
}

/* rewards_chosen, rewards_rejected, reward_margin, reward_accuracy (docs/rlhf.md's names) */
static void add_pair_stats(cJSON *row, const pair_stats *s)
{
    double n = s->pairs > 0 ? s->pairs : NAN;
    zt_json_number(row, "rewards_chosen", s->chosen / n);
    zt_json_number(row, "rewards_rejected", s->rejected / n);
    zt_json_number(row, "reward_margin", (s->chosen - s->rejected) / n);
    zt_json_number(row, "reward_accuracy", s->correct / n);
}

static zt_status pref_metrics(zt_trainer *t, cJSON *row)
{
    pref *p = t->ctx;
    pair_stats s = p->acc;
    p->acc = (pair_stats){0};
    zt_status st = zt_zero_sum(&t->zero, (double *)&s, sizeof s / sizeof(double));
    if (!st && row) add_pair_stats(row, &s);
    if (row && t->m.cfg.n_experts) zt_json_number(row, "router_aux_loss", p->router_aux);
    return st;
}

/* The held-out pairs: the loss, the reward statistics and how often the chosen answer is
 * the likelier one (DPO: under the policy; reward model: the higher reward). */
static zt_status pref_evaluate(zt_trainer *t, long step)
{
    pref *p = t->ctx;
    if (!p->valid.n_examples) return ZT_OK;
    pair_stats s;
    p->ref = p->ref_valid;
    zt_status st = pass_over(t, &t->m, &p->valid, &s);
    if (st || !t->lead) return st;
    double n = s.pairs;
    zt_log_info("step %ld | valid loss %.4f | reward accuracy %.3f | margin %.3f | chosen likelier %.3f (%.0f pairs)",
                step, s.loss / n, s.correct / n, (s.chosen - s.rejected) / n, s.likelier / n, n);
    cJSON *row = zt_trainer_row(t, step, "valid");
    zt_json_number(row, "loss", s.loss / n);
    add_pair_stats(row, &s);
    zt_json_number(row, "preference_accuracy", s.likelier / n);
    cJSON_AddNumberToObject(row, "pairs", n);
    return zt_trainer_write_row(t, row);
}

static zt_loader_state pref_get_state(zt_trainer *t) { return zt_items_get_state(&((pref *)t->ctx)->order); }
static zt_status pref_set_state(zt_trainer *t, zt_loader_state s)
{
    return zt_items_set_state(&((pref *)t->ctx)->order, s);
}

static void pref_close(zt_trainer *t)
{
    pref *p = t->ctx;
    if (!p) return;
    zt_items_free(&p->order);
    zt_dataset_free(&p->train);
    zt_dataset_free(&p->valid);
    free(p->items);
    free(p->input);
    free(p->lens);
    free(p->ref_train);
    free(p);
    t->ctx = NULL;
}

const zt_algo zt_algo_dpo = {
    .name = "dpo",
    .check = pref_check,
    .open = dpo_open,
    .plan = pref_plan,
    .grads = pref_grads,
    .metrics = pref_metrics,
    .evaluate = pref_evaluate,
    .get_state = pref_get_state,
    .set_state = pref_set_state,
    .close = pref_close,
};

const zt_algo zt_algo_reward = {
    .name = "reward",
    .score_head = 1,
    .check = pref_check,
    .open = reward_open,
    .plan = pref_plan,
    .grads = pref_grads,
    .metrics = pref_metrics,
    .evaluate = pref_evaluate,
    .get_state = pref_get_state,
    .set_state = pref_set_state,
    .close = pref_close,
};
