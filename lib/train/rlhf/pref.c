/* Preference pairs: DPO on the policy's log-probabilities against cached reference
 * log-probabilities, and reward models (a score head on the sequence's last token) with
 * the pairwise loss. A micro-batch holds micro_batch_size pairs, chosen in row 2j and
 * rejected in row 2j + 1, one sequence per row.
 *
 * KTO takes the same data one answer at a time, desirable or not (pairs unpaired, or TRL's
 * unpaired data, stored as pairs with a placeholder in the place of the missing side): its
 * items are answers, one per row, and each micro-batch first passes its items' mismatched rows
 * (a prompt with another item's answer) forward alone, for the estimate of the policy's KL
 * divergence from the reference that the answers' losses take (kto_examples). */
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
    double n_chosen, n_rejected; /* the answers chosen and rejected sum over (DPO: the pairs) */
    double kl, kl_batches;       /* KTO: the estimates of the micro-batches, their count */
} pair_stats;

typedef struct pref {
    int policy; /* DPO and its kin, KTO: the policy against its reference; else a reward model */
    zt_dpo_kind kind;
    int kto;          /* KTO: items are answers (pairs: the chosen and the rejected answer) */
    int kl_rows;      /* KTO's kto loss: the mismatched rows and their estimate (apo_zero_unpaired: none) */
    int side;         /* KTO: what a pass fills: 0 the items' answers, 1 their mismatched rows */
    double kl_sum[2]; /* KTO: Σ over the pass's mismatched rows of policy - reference, their count */
    double kl;        /* KTO: the estimate the micro-batch's answers take */
    uint8_t *desirable_train, *desirable_valid;
    const uint8_t *desirable; /* KTO: whether each item of ds is a desirable answer */
    int simpo; /* SimPO: sigmoid, no reference */
    int orpo;  /* ORPO: no reference, its odds-ratio term and the chosen answers' NLL */
    zt_dataset train, valid;
    zt_items order;
    int pairs;                     /* per micro-batch (KTO: answers) */
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

/* The micro-batch of the items in p->items from p->ds: both sides of each pair, or (KTO) one,
 * p->side. */
static void fill_batch(pref *p)
{
    int T = p->T, sides = p->kto ? 1 : 2;
    for (int j = 0; j < p->pairs; j++)
        for (int side = 0; side < sides; side++) {
            int r = sides * j + side;
            int64_t e = p->items[j] < 0 ? -1 : 2 * p->items[j] + side + p->side;
            const int32_t *ids = e < 0 ? NULL : p->ds->ids + p->ds->offsets[e];
            const int32_t *labels = e < 0 ? NULL : p->ds->labels + p->ds->offsets[e];
            int n = e < 0 ? 0 : (int)zt_dataset_len(p->ds, e);
            zt_rlhf_fill_row(ids, labels, n, T, p->input + (size_t)r * T, p->target + (size_t)r * T,
                             p->pos + (size_t)r * T);
            p->lens[r] = n < T ? n : T;
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
        } else if (p->policy) {
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
        a->n_chosen++, a->n_rejected++;
        a->correct += rc > rw, a->likelier += pc > pw;
        total += loss;
    }
    return total;
}

/* KTO's objective (zt_llama_objective): of the mismatched rows (side 1), their sums for the
 * estimate; of the answers, Σ of their losses. */
static double kto_objective(void *ctx, const double *out, double *coef, int N)
{
    pref *p = ctx;
    const zt_recipe *r = p->r;
    double total = 0;
    if (coef) memset(coef, 0, (size_t)N * sizeof *coef);
    for (int j = 0; j < p->pairs; j++) {
        int64_t k = p->items[j];
        if (k < 0) continue;
        int n;
        double logp = row_sum(p, out, j, &n), dx;
        if (p->store) { /* computing the reference log-probabilities */
            p->store[2 * k + p->side] = logp;
            continue;
        }
        double x = logp - p->ref[2 * k + p->side];
        if (p->side) { /* a row cut before its answer tells nothing */
            if (n) p->kl_sum[0] += x, p->kl_sum[1]++;
            continue;
        }
        int good = p->desirable[k];
        double loss = zt_kto_loss(r->rlhf.beta, good ? r->rlhf.desirable_weight : r->rlhf.undesirable_weight, good, x,
                                  p->kl, &dx);
        if (coef) put_coef(p, coef, j, dx * p->scale, 1);
        pair_stats *a = &p->acc;
        a->pairs++, a->loss += loss;
        if (good) a->chosen += r->rlhf.beta * x, a->n_chosen++;
        else a->rejected += r->rlhf.beta * x, a->n_rejected++;
        total += loss;
    }
    return total;
}

/* The micro-batch of the items in p->items through m, the objective's loss in *loss: one pass
 * over both sides of each pair; KTO's first over the mismatched rows alone, forward only, for the
 * estimate over every rank's rows (TRL's: the mean, at least 0), then over the answers. */
static zt_status run_batch(zt_trainer *t, zt_llama *m, int grad, double *loss)
{
    pref *p = t->ctx;
    zt_llama_objective obj = {p, p->kto ? kto_objective : pref_objective};
    zt_status st = ZT_OK;
    /* the references of the mismatched rows are computed whatever the loss: the cache serves both */
    if (p->kl_rows || (p->kto && p->store)) {
        p->side = 1, p->kl_sum[0] = p->kl_sum[1] = 0;
        fill_batch(p);
        zt_llama_forward_objective(m, p->input, p->target, p->pos, &obj, 0);
        p->side = 0;
        if (!p->store && !(st = zt_zero_sum(&t->zero, p->kl_sum, 2))) {
            p->kl = p->kl_sum[1] > 0 ? fmax(p->kl_sum[0] / p->kl_sum[1], 0) : 0;
            p->acc.kl += p->kl, p->acc.kl_batches++;
        }
    }
    fill_batch(p);
    *loss = zt_llama_forward_objective(m, p->input, p->target, p->pos, &obj, grad);
    return st;
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

/* One pass over every item of ds, spread over the ranks (all run the same number of
 * micro-batches: stage 3's forward passes are collectives); the statistics summed. */
static zt_status pass_over(zt_trainer *t, zt_llama *m, const zt_dataset *ds, pair_stats *sums)
{
    pref *p = t->ctx;
    zt_items s;
    zt_status st = zt_items_init(&s, ds->n_examples / 2, 0, 0, t->zero.rank, t->zero.world);
    if (st) return st;
    int64_t batches = zt_items_groups_per_epoch(&s, p->pairs);
    pair_stats keep = p->acc;
    p->acc = (pair_stats){0};
    p->ds = ds;
    set_nll_weight(t, p, ds, NULL, ds->n_examples / 2); /* the whole set: every rank counts it all */
    double loss;
    for (int64_t b = 0; b < batches && !st; b++) {
        zt_items_next(&s, p->items, p->pairs);
        st = run_batch(t, m, 0, &loss);
    }
    zt_items_free(&s);
    *sums = p->acc;
    p->acc = keep;
    return st ? st : zt_zero_sum(&t->zero, (double *)sums, sizeof *sums / sizeof(double));
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
        if (t->lead) zt_log_info("%s: reference log-probabilities from the cache '%s'", p->kto ? "KTO" : "DPO", path);
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
    if (!st) st = zt_llama_alloc_acts(m, t->rows, p->T, 0);
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
        zt_log_info("%s: reference log-probabilities of %zu %s computed in %.1f s%s%s", p->kto ? "KTO" : "DPO",
                    (nt + nv) / 2, p->kto ? "answers and their mismatched rows" : "pairs", zt_now_s() - t0,
                    path[0] ? ", cached in " : "", path);
    if (!st && t->lead && path[0]) st = zt_write_file_atomic(path, all, (nt + nv) * sizeof *all);
    return st;
}

/* ---- the algorithm ------------------------------------------------------------------------ */

static zt_status pref_check(const zt_recipe *r)
{
    if (r->rlhf.algorithm == ZT_RLHF_KTO && r->data.format != ZT_DATA_PREFERENCE && r->data.format != ZT_DATA_UNPAIRED)
        return zt_fail(ZT_EUSER,
                       "rlhf.algorithm = \"kto\" trains on answers labelled desirable or not: data.format must be "
                       "\"unpaired\" or \"preference\", not \"%s\"",
                       zt_data_format_names[r->data.format]);
    if (r->rlhf.algorithm != ZT_RLHF_KTO && r->data.format != ZT_DATA_PREFERENCE)
        return zt_fail(ZT_EUSER,
                       "rlhf.algorithm = \"%s\" trains on preference pairs: data.format must be \"preference\", "
                       "not \"%s\"",
                       zt_rlhf_algorithm_names[r->rlhf.algorithm], zt_data_format_names[r->data.format]);
    return ZT_OK;
}

/* Where example e's answer starts: its first trained token (its length when it has none). */
static int64_t answer_start(const zt_dataset *ds, int64_t e)
{
    int64_t n = zt_dataset_len(ds, e), i = 1;
    while (i < n && ds->labels[ds->offsets[e] + i] == ZT_IGNORE_INDEX) i++;
    return i;
}

/* TRL unpairs preference data with datasets' map in batches of 1000 pairs: each batch's chosen
 * answers, then its rejected ones */
enum { TRL_UNPAIR_BATCH = 1000 };

/* KTO's items from pairs: data.format "unpaired" (a placeholder of one token in the place of the
 * side a line lacks) in the file's order, "preference" in the order TRL unpairs it. Item u is
 * example 2u of *out and its mismatched row example 2u + 1: u's prompt with the answer of item
 * u - 1 (item 0: the last one's), as TRL's KL rows pair each prompt with the answer before it
 * (within each micro-batch there; here over all items, so any micro-batch size has mismatched
 * rows). */
static zt_status kto_examples(const zt_dataset *pairs, int unpaired, zt_dataset *out, uint8_t **desirable)
{
    int64_t np = pairs->n_examples / 2, n = 0, longest = 0;
    int64_t *e = malloc((size_t)(2 * np + 1) * sizeof *e);
    *desirable = malloc((size_t)(2 * np + 1));
    *out = (zt_dataset){0};
    if (!e || !*desirable) return free(e), zt_fail(ZT_ENOMEM, "out of memory");
    int64_t step = unpaired ? 1 : TRL_UNPAIR_BATCH;
    for (int64_t from = 0; from < np; from += step)
        for (int side = 0; side < 2; side++)
            for (int64_t k = from; k < from + step && k < np; k++) {
                int64_t len = zt_dataset_len(pairs, 2 * k + side);
                if (len < 2) continue; /* a placeholder */
                e[n] = 2 * k + side, (*desirable)[n++] = !side;
                if (len > longest) longest = len;
            }
    int32_t *row = malloc((size_t)(4 * longest + 1) * sizeof *row), *labels = row + 2 * longest;
    zt_status st = row ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory");
    for (int64_t u = 0; u < n && !st; u++) {
        int64_t a = e[u], b = e[(u + n - 1) % n], pa = answer_start(pairs, a), pb = answer_start(pairs, b);
        int64_t nb = zt_dataset_len(pairs, b) - pb;
        const int64_t at = pairs->offsets[a], bt = pairs->offsets[b] + pb;
        memcpy(row, pairs->ids + at, (size_t)pa * sizeof *row);
        memcpy(row + pa, pairs->ids + bt, (size_t)nb * sizeof *row);
        memcpy(labels, pairs->labels + at, (size_t)pa * sizeof *row);
        memcpy(labels + pa, pairs->labels + bt, (size_t)nb * sizeof *row);
        st = zt_dataset_append(out, pairs->ids + at, pairs->labels + at, zt_dataset_len(pairs, a));
        if (!st) st = zt_dataset_append(out, row, labels, pa + nb);
    }
    free(row);
    free(e);
    return st;
}

/* KTO: train and valid as kto_examples makes them. */
static zt_status kto_open(pref *p)
{
    zt_dataset *sets[2] = {&p->train, &p->valid};
    uint8_t **flags[2] = {&p->desirable_train, &p->desirable_valid};
    zt_status st = ZT_OK;
    for (int i = 0; i < 2 && !st; i++) {
        zt_dataset items;
        st = kto_examples(sets[i], p->r->data.format == ZT_DATA_UNPAIRED, &items, flags[i]);
        zt_dataset_free(sets[i]);
        *sets[i] = items;
    }
    if (st) return st;
    int64_t n = p->train.n_examples / 2, good = 0;
    for (int64_t u = 0; u < n; u++) good += p->desirable_train[u];
    zt_log_info("data: %lld answers to train on (%lld desirable, %lld undesirable), %lld held out", (long long)n,
                (long long)good, (long long)(n - good), (long long)p->valid.n_examples / 2);
    /* the KTO paper's advice (its eq. 8), which TRL warns about: desirable_weight · desirable answers
       over undesirable_weight · undesirable ones in [1, 4/3] */
    double wd = p->r->rlhf.desirable_weight, wu = p->r->rlhf.undesirable_weight;
    double nd = good > 0 ? (double)good : 1, nu = n - good > 0 ? (double)(n - good) : 1, ratio = wd * nd / (wu * nu);
    if (good != n - good && (ratio < 1 || ratio > 4.0 / 3))
        zt_log_warn("KTO: %lld desirable and %lld undesirable answers: set rlhf.desirable_weight in [%.2f, %.2f] or "
                    "rlhf.undesirable_weight in [%.2f, %.2f] (the KTO paper keeps desirable_weight · desirable / "
                    "(undesirable_weight · undesirable) in [1, 4/3])",
                    (long long)good, (long long)(n - good), wu * nu / nd, wu * nu / nd * 4 / 3, wd * nd / nu * 3 / 4,
                    wd * nd / nu);
    return ZT_OK;
}

static zt_status pref_open(zt_trainer *t, zt_rlhf_algorithm algo)
{
    const zt_recipe *r = t->r;
    pref *p = calloc(1, sizeof *p);
    t->ctx = p;
    if (!p) return zt_fail(ZT_ENOMEM, "out of memory");
    p->policy = algo != ZT_RLHF_REWARD, p->r = r, p->T = t->T, p->pairs = r->train.micro_batch_size;
    p->kto = algo == ZT_RLHF_KTO, p->kl_rows = p->kto && r->rlhf.loss_type != ZT_RLHF_LOSS_APO_ZERO_UNPAIRED;
    /* zt_rlhf_loss lists DPO's losses in zt_dpo_kind's order, then SimPO's (sigmoid); auto: sigmoid */
    _Static_assert(ZT_RLHF_APO_DOWN - ZT_RLHF_SIGMOID == ZT_DPO_APO_DOWN, "zt_rlhf_loss follows zt_dpo_kind");
    zt_rlhf_loss l = r->rlhf.loss_type;
    p->simpo = l == ZT_RLHF_SIMPO, p->orpo = l == ZT_RLHF_ORPO;
    p->kind = l >= ZT_RLHF_SIGMOID && l <= ZT_RLHF_APO_DOWN ? (zt_dpo_kind)(l - ZT_RLHF_SIGMOID) : ZT_DPO_SIGMOID;
    t->rows = p->kto ? p->pairs : 2 * p->pairs;
    size_t N = (size_t)t->rows * t->T;
    p->items = malloc((size_t)p->pairs * sizeof *p->items);
    p->input = malloc(3 * N * sizeof *p->input);
    p->lens = malloc((size_t)t->rows * sizeof *p->lens);
    if (!p->items || !p->input || !p->lens) return zt_fail(ZT_ENOMEM, "out of memory");
    /* a mixture of experts' load-balancing loss, as TRL's DPO, CPO, ORPO and KTO trainers add it
       with output_router_logits: the mean over the step's passes (reward models: none) */
    const zt_llama_config *c = &t->m.cfg;
    int A = r->train.gradient_accumulation_steps;
    t->m.router_aux_weight = p->policy && c->output_router_logits ? c->router_aux_loss_coef / (A * t->zero.world) : 0;
    p->target = p->input + N, p->pos = p->target + N;
    zt_status st = zt_data_open(r, &t->tools, t->m.V, &p->train, &p->valid);
    if (!st && p->kto) st = kto_open(p);
    if (!st)
        st = zt_items_init(&p->order, p->train.n_examples / 2, r->data.shuffle, (uint64_t)r->train.seed, t->zero.rank,
                           t->zero.world);
    if (!st && p->policy && !p->simpo && !p->orpo) st = reference_logps(t);
    if (!st && !p->kto)
        zt_log_info("data: %lld preference pairs to train on, %lld held out", (long long)p->train.n_examples / 2,
                    (long long)p->valid.n_examples / 2);
    return st;
}

static zt_status dpo_open(zt_trainer *t) { return pref_open(t, ZT_RLHF_DPO); }
static zt_status reward_open(zt_trainer *t) { return pref_open(t, ZT_RLHF_REWARD); }
static zt_status kto_algo_open(zt_trainer *t) { return pref_open(t, ZT_RLHF_KTO); }

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
    double sums[4] = {0, 0, 0, 0}; /* items, target tokens, loss, load-balancing loss */
    for (int i = 0; i < A; i++) {
        zt_items_next(&p->order, items + (size_t)i * p->pairs, p->pairs);
        for (int j = 0; j < p->pairs; j++) {
            int64_t k = items[(size_t)i * p->pairs + j];
            if (k < 0) continue;
            sums[0]++;
            for (int side = 0; side < (p->kto ? 1 : 2); side++)
                sums[1] += (double)zt_dataset_len(&p->train, 2 * k + side) - 1;
        }
    }
    zt_status st = zt_zero_sum(&t->zero, sums, 2);
    if (!st) st = set_nll_weight(t, p, &p->train, items, (int64_t)A * p->pairs);
    p->scale = sums[0] > 0 ? 1 / sums[0] : 0;
    p->ds = &p->train, p->ref = p->ref_train, p->desirable = p->desirable_train;
    t->m.row_lens = p->lens;
    for (int i = 0; i < A && !st; i++) {
        memcpy(p->items, items + (size_t)i * p->pairs, (size_t)p->pairs * sizeof *items);
        double loss;
        st = run_batch(t, &t->m, 1, &loss);
        sums[2] += loss;
        sums[3] += t->m.router_aux;
    }
    t->m.row_lens = NULL;
    free(items);
    if (!st) st = zt_zero_sum(&t->zero, &sums[2], 2);
    p->router_aux = sums[3] / (A * t->zero.world);
    out->loss = (sums[0] > 0 ? sums[2] / sums[0] : 0) + t->m.router_aux_weight * sums[3];
    out->items = (int64_t)sums[0];
    out->tokens = (int64_t)sums[1];
    out->input_tokens = (int64_t)A * t->rows * t->T * (p->kl_rows ? 2 : 1);
    return st;
}

/* rewards_chosen, rewards_rejected, reward_margin, and reward_accuracy of pairs or KTO's kl
 * (docs/rlhf.md's names) */
static void add_pair_stats(const pref *p, cJSON *row, const pair_stats *s)
{
    double chosen = s->chosen / s->n_chosen, rejected = s->rejected / s->n_rejected; /* NaN: none */
    zt_json_number(row, "rewards_chosen", chosen);
    zt_json_number(row, "rewards_rejected", rejected);
    zt_json_number(row, "reward_margin", chosen - rejected);
    if (!p->kto) zt_json_number(row, "reward_accuracy", s->correct / s->pairs);
    if (p->kl_rows) zt_json_number(row, "kl", s->kl / s->kl_batches);
}

static zt_status pref_metrics(zt_trainer *t, cJSON *row)
{
    pref *p = t->ctx;
    pair_stats s = p->acc;
    p->acc = (pair_stats){0};
    zt_status st = zt_zero_sum(&t->zero, (double *)&s, sizeof s / sizeof(double));
    if (!st && row) add_pair_stats(p, row, &s);
    if (row && t->m.cfg.n_experts) zt_json_number(row, "router_aux_loss", p->router_aux);
    return st;
}

/* The held-out pairs: the loss, the reward statistics and how often the chosen answer is
 * the likelier one (DPO: under the policy; reward model: the higher reward); KTO's answers:
 * the loss, the rewards and the KL estimate. */
static zt_status pref_evaluate(zt_trainer *t, long step)
{
    pref *p = t->ctx;
    if (!p->valid.n_examples) return ZT_OK;
    pair_stats s;
    p->ref = p->ref_valid, p->desirable = p->desirable_valid;
    zt_status st = pass_over(t, &t->m, &p->valid, &s);
    if (st || !t->lead) return st;
    double n = s.pairs;
    if (p->kto) {
        char kl[32] = "";
        if (p->kl_rows) snprintf(kl, sizeof kl, " | kl %.4f", s.kl / s.kl_batches);
        zt_log_info("step %ld | valid loss %.4f | rewards chosen %.3f, rejected %.3f%s (%.0f answers)", step,
                    s.loss / n, s.chosen / s.n_chosen, s.rejected / s.n_rejected, kl, n);
        cJSON *row = zt_trainer_row(t, step, "valid");
        zt_json_number(row, "loss", s.loss / n);
        add_pair_stats(p, row, &s);
        cJSON_AddNumberToObject(row, "answers", n);
        return zt_trainer_write_row(t, row);
    }
    zt_log_info("step %ld | valid loss %.4f | reward accuracy %.3f | margin %.3f | chosen likelier %.3f (%.0f pairs)",
                step, s.loss / n, s.correct / n, (s.chosen - s.rejected) / n, s.likelier / n, n);
    cJSON *row = zt_trainer_row(t, step, "valid");
    zt_json_number(row, "loss", s.loss / n);
    add_pair_stats(p, row, &s);
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
    free(p->desirable_train);
    free(p->desirable_valid);
    free(p);
    t->ctx = NULL;
}

/* DPO, reward models and KTO differ in their name, how they open and the head they train */
#define PREF_ALGO(algo_name, opener, head)                                                                             \
    {                                                                                                                  \
        .name = algo_name, .score_head = head, .check = pref_check, .open = opener, .plan = pref_plan,                 \
        .grads = pref_grads, .metrics = pref_metrics, .evaluate = pref_evaluate, .get_state = pref_get_state,          \
        .set_state = pref_set_state, .close = pref_close,                                                              \
    }

const zt_algo zt_algo_dpo = PREF_ALGO("dpo", dpo_open, 0);
const zt_algo zt_algo_reward = PREF_ALGO("reward", reward_open, 1);
const zt_algo zt_algo_kto = PREF_ALGO("kto", kto_algo_open, 0);
