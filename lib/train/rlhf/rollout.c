/* Generation, rewards and the reference for GRPO and PPO (rollout.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/arena.h"
#include "lib/core/log.h"
#include "lib/data/formats.h"
#include "lib/data/jsonl.h"
#include "lib/model/lora.h"
#include "lib/model/sample.h"
#include "lib/plan/options.h"
#include "rlhf.h"
#include "rollout.h"

/* ---- prompts ------------------------------------------------------------------------------ */

typedef struct objects {
    cJSON **v;
    int64_t n, cap;
} objects;

static zt_status keep_object(void *ctx, cJSON *o)
{
    objects *s = ctx;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        cJSON **v = realloc(s->v, (size_t)s->cap * sizeof *v);
        if (!v) return zt_fail(ZT_ENOMEM, "out of memory");
        s->v = v;
    }
    s->v[s->n] = cJSON_Duplicate(o, 1);
    return s->v[s->n++] ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory");
}

static void free_objects(cJSON **v, int64_t n)
{
    for (int64_t i = 0; v && i < n; i++) cJSON_Delete(v[i]);
    free(v);
}

/* The JSON lines of files, one per example of ds (the reward program receives their fields). */
static zt_status load_objects(const zt_recipe *r, const zt_strlist *files, const zt_dataset *ds, cJSON ***out)
{
    objects s = {0};
    int64_t skipped;
    zt_status st = zt_jsonl_load(files->items, files->n, r->data.skip_bad_lines, keep_object, &s, &skipped);
    if (!st && s.n != ds->n_examples)
        st = zt_fail(ZT_EUSER,
                     "%s: %lld prompt lines but %lld usable prompts (drop the bad lines rather than "
                     "data.skip_bad_lines)",
                     files->items[0], (long long)s.n, (long long)ds->n_examples);
    if (st) { /* the caller frees ds->n_examples objects: it gets a whole list or none */
        free_objects(s.v, s.n);
        s.v = NULL;
    }
    *out = s.v;
    return st;
}

/* ---- generation --------------------------------------------------------------------------- */

static int is_stop(const zt_rollout *s, int32_t id)
{
    for (int i = 0; i < ZT_END_IDS; i++)
        if (s->stop_ids[i] >= 0 && s->stop_ids[i] == id) return 1;
    return 0;
}

/* The sequences of a batch of prompts' completions, completion c = p × G + g (prompt p, its g-th):
 * its tokens and labels at c × (T + 1) (the completion trained, its stop token included when
 * one came), its length, its tokens before any stop token (ngen), and its prompt's length. */
typedef struct completions {
    int32_t *ids, *labels;
    int *len, *ngen, *np;
} completions;

/* Completion c samples its next token from logits into its sequence; *next is the token, and
 * whether the completion goes on (no stop token, rlhf.max_new_tokens not reached) is returned. */
static int sample_next(zt_rollout *s, completions *q, int c, int G, const zt_real *logits, int32_t *next)
{
    int budget = s->r->rlhf.max_new_tokens, np = q->np[c / G];
    if (budget > s->T - np) budget = s->T - np;
    *next = zt_sample(&s->smp[c], logits, s->vocab, s->scratch);
    s->acc.generated++;
    size_t at = (size_t)c * (s->T + 1) + q->len[c]++;
    q->ids[at] = q->labels[at] = *next;
    return !is_stop(s, *next) && ++q->ngen[c] < budget;
}

/* Where a batch's generation stands: the prompt being prefilled (P once all are) and its tokens
 * in so far, and the live completions (s->slot and s->next) */
typedef struct progress {
    int p, in, active;
} progress;

/* The next piece of prompt g->p's prefill (item k of ds), at most a pass's rows, into slot p × G;
 * once the prompt is in, it is forked into the next G - 1 slots and the first token of each
 * of its completions sampled, completion g with the stream (train.seed, step, k, g); those that
 * go on join the live ones. */
static zt_status prefill_piece(zt_rollout *s, zt_llama *m, const zt_dataset *ds, int64_t k, int G, long step,
                               double temperature, completions *q, progress *g)
{
    uint64_t stream = ((uint64_t)step << 40) ^ ((uint64_t)k << 8);
    int p = g->p, np = (int)zt_dataset_len(ds, k), n, rows = zt_llama_decode_rows(m, &s->cache);
    if (np > s->T - 1) np = s->T - 1;
    n = np - g->in < rows ? np - g->in : rows;
    zt_status st = zt_llama_decode_slot(m, &s->cache, p * G, ds->ids + ds->offsets[k] + g->in, n, s->prompt_logits);
    if (st || (g->in += n) < np) return st;
    q->np[p] = np, g->p++, g->in = 0;
    zt_llama_cache_fork(&s->cache, m, p * G, G);
    for (int c = p * G; c < (p + 1) * G; c++) {
        int32_t *row = q->ids + (size_t)c * (s->T + 1), *lab = q->labels + (size_t)c * (s->T + 1), next;
        memcpy(row, ds->ids + ds->offsets[k], (size_t)np * sizeof *row);
        for (int i = 0; i < np; i++) lab[i] = ZT_IGNORE_INDEX;
        s->smp[c] = (zt_sampler){.temperature = temperature, .top_p = s->r->rlhf.top_p};
        zt_rng_seed(&s->smp[c].rng, (uint64_t)s->r->train.seed, stream ^ (uint64_t)(c - p * G));
        q->len[c] = np, q->ngen[c] = 0;
        if (sample_next(s, q, c, G, s->prompt_logits, &next)) s->slot[g->active] = c, s->next[g->active++] = next;
    }
    return ZT_OK;
}

/* A token for every live completion; one that stops leaves them. */
static zt_status decode_live(zt_rollout *s, zt_llama *m, int G, completions *q, progress *g)
{
    zt_status st = zt_llama_decode_slots(m, &s->cache, s->slot, s->next, g->active, s->logits);
    int left = 0;
    for (int i = 0; i < g->active && !st; i++) { /* row i of the decode: completion slot[i] */
        int c = s->slot[i];
        int32_t next;
        if (sample_next(s, q, c, G, s->logits + (size_t)i * m->V, &next)) s->slot[left] = c, s->next[left++] = next;
    }
    g->active = left;
    return st;
}

/* A pass for the other ranks' sake (lockstep: each of its units' gathers is a collective they
 * wait in): a token decoded into the spare slot, the cache's last. */
static zt_status idle_pass(zt_rollout *s, zt_llama *m)
{
    int spare = s->cache.slots - 1;
    int32_t token = 0;
    s->cache.lens[spare] = 0;
    return zt_llama_decode_slot(m, &s->cache, spare, &token, 1, s->logits);
}

/* Whether a pass is due: this rank's (busy), or with lockstep any rank's, all ranks stopping
 * together when one failed (its status, else the others'). */
static zt_status pass_due(zt_rollout *s, zt_trainer *t, int busy, zt_status st, int *due)
{
    double v[2] = {busy, st != ZT_OK};
    zt_status sum = s->lockstep ? zt_zero_sum(&t->zero, v, 2) : ZT_OK;
    *due = v[0] > 0 && v[1] == 0 && !sum;
    if (st || sum) return st ? st : sum;
    return v[1] > 0 ? zt_fail(ZT_ERUNTIME, "generation failed on another rank") : ZT_OK;
}

/* G completions of each of the prompts items[0, P) of ds (-1: none) into q: every prompt
 * prefilled, then all of their completions decoded side by side, one cache slot each, every
 * prompt's slots a group of their own (the cache's group): each prompt's completions are those
 * it gets decoded alone. Each samples at most rlhf.max_new_tokens; one that stops leaves the
 * batch. A pass at a time; with lockstep every rank runs as many as the busiest. */
static zt_status generate(zt_rollout *s, zt_trainer *t, const zt_dataset *ds, const int64_t *items, int P, int G,
                          long step, double temperature, completions *q)
{
    zt_llama *m = s->gen;
    progress g = {0};
    zt_status st = ZT_OK;
    zt_llama_cache_reset(&s->cache);
    s->cache.group = G;
    for (int due;;) {
        while (g.p < P && items[g.p] < 0) g.p++;
        if ((st = pass_due(s, t, g.p < P || g.active, st, &due)) || !due) break;
        if (g.p < P) st = prefill_piece(s, m, ds, items[g.p], G, step, temperature, q, &g);
        else if (g.active) st = decode_live(s, m, G, q, &g);
        else st = idle_pass(s, m);
    }
    return st;
}

/* The reward program's object for a completion: the prompt line's fields and "completion". */
static cJSON *reward_object(const cJSON *line, const char *completion)
{
    cJSON *o = cJSON_Duplicate(line, 1);
    if (o) cJSON_AddStringToObject(o, "completion", completion);
    return o;
}

/* A generated sequence (its prompt np tokens, ngen generated before any stop token) in row
 * `row` of the step's rows; its reward object, for the prompt's line, in *obj. */
static zt_status fill_generated(zt_rollout *s, zt_trainer *t, const cJSON *line, const int32_t *ids,
                                const int32_t *labels, int len, int np, int ngen, int row, cJSON **obj)
{
    size_t at = (size_t)row * s->T;
    char *text = NULL;
    zt_status st = zt_tokenizer_decode(t->tools.tok, ids + np, (size_t)ngen, 1, &text);
    if (!st) {
        zt_rlhf_fill_row(ids, labels, len, s->T, s->input + at, s->target + at, s->pos + at);
        s->ntok[row] = 0;
        for (int i = 0; i < s->T; i++) s->ntok[row] += s->target[at + i] >= 0;
        s->truncated[row] = len == np + ngen; /* a stop token would follow the ngen tokens */
        if (!(*obj = reward_object(line, text))) st = zt_fail(ZT_ENOMEM, "out of memory");
    }
    free(text);
    return st;
}

static void empty_row(zt_rollout *s, int row)
{
    size_t at = (size_t)row * s->T;
    zt_rlhf_fill_row(NULL, NULL, 0, s->T, s->input + at, s->target + at, s->pos + at);
    s->ntok[row] = 0, s->truncated[row] = 0;
}

static double store_outputs(void *ctx, const double *out, double *coef, int N)
{
    zt_rollout *s = ctx;
    memcpy(s->store, out, (size_t)N * sizeof *out);
    return 0;
}

void zt_rollout_outputs(zt_rollout *s, zt_llama *m, int n, double *out)
{
    zt_llama_objective obj = {s, store_outputs};
    for (int r0 = 0; r0 < n; r0 += s->B) {
        size_t at = (size_t)r0 * s->T;
        s->store = out + at;
        zt_llama_forward_objective(m, s->input + at, s->target + at, s->pos + at, &obj, 0);
    }
    s->store = NULL;
}

int zt_rollout_last(const zt_rollout *s, int row)
{
    int last = s->T - 1;
    while (last > 0 && s->pos[(size_t)row * s->T + last] != last) last--;
    return last;
}

/* Rewards of rows [0, n) with completions (objs[i] set): the reward program's, or the
 * reward model's value at each sequence's last token. */
static zt_status score(zt_rollout *s, int n, cJSON **objs)
{
    if (s->program.command) {
        cJSON **live = malloc((size_t)n * sizeof *live);
        double *got = malloc((size_t)n * sizeof *got);
        int m = 0;
        zt_status st = live && got ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory");
        for (int i = 0; i < n && !st; i++)
            if (objs[i]) live[m++] = objs[i];
        if (!st && m) st = zt_reward_program_score(&s->program, live, m, got);
        for (int i = 0, j = 0; i < n && !st; i++) s->rewards[i] = objs[i] ? got[j++] : 0;
        free(live);
        free(got);
        return st;
    }
    double *values = malloc((size_t)s->A * s->B * s->T * sizeof *values);
    if (!values) return zt_fail(ZT_ENOMEM, "out of memory");
    zt_rollout_outputs(s, &s->reward_model, n, values);
    for (int i = 0; i < n; i++) s->rewards[i] = objs[i] ? values[(size_t)i * s->T + zt_rollout_last(s, i)] : 0;
    free(values);
    return ZT_OK;
}

/* The model whole in memory for generation, or (streams) left to come unit by unit through its
 * hooks. Gathered whole, the hooks are set aside until release_model: they would let the units
 * go after their first use. */
static zt_status hold_model(zt_rollout *s, zt_trainer *t)
{
    if (s->streams) return ZT_OK;
    zt_status st = zt_trainer_gather_model(t);
    s->hooks = s->gen->hooks, s->gen->hooks = NULL;
    return st;
}

static void release_model(zt_rollout *s, zt_trainer *t)
{
    if (s->streams) return;
    s->gen->hooks = s->hooks;
    zt_trainer_release_model(t);
}

zt_status zt_rollout_generate(zt_rollout *s, zt_trainer *t, const zt_dataset *ds, cJSON *const *lines,
                              const int64_t *items, int prompts, int G, long step, double temperature)
{
    /* streaming, every prompt in one batch: each pass over the units serves every completion */
    int n = prompts * G, batch = s->streams ? prompts : 1, *len = malloc((2 * (size_t)batch * G + batch) * sizeof *len);
    size_t seq = (size_t)s->T + 1;
    cJSON **objs = calloc((size_t)n, sizeof *objs);
    int32_t *ids = malloc(2 * (size_t)batch * G * seq * sizeof *ids);
    completions q = {ids, ids + (size_t)batch * G * seq, len, len + batch * G, len + 2 * batch * G};
    zt_status st = !objs || !len || !ids ? zt_fail(ZT_ENOMEM, "out of memory") : ZT_OK;
    double t0 = zt_now_s();
    if (!st && s->lockstep && zt_llama_decode_rows(s->gen, &s->cache) < n)
        st = zt_fail(ZT_EUSER,
                     "streaming generation on several ranks decodes the step's %d completions in one pass, "
                     "but the adapters' scratch holds %d rows (train.micro_batch_size × data.max_length)",
                     n, zt_llama_decode_rows(s->gen, &s->cache));
    if (!st) st = hold_model(s, t);
    if (!st) st = zt_lora_prepare_decode(s->gen); /* DoRA's norms, of the weights the last step left */
    for (int p0 = 0; p0 < prompts && !st; p0 += batch) {
        st = generate(s, t, ds, items + p0, batch, G, step, temperature, &q);
        for (int c = 0; c < batch * G && !st; c++) {
            int p = p0 + c / G;
            if (items[p] < 0) empty_row(s, p * G + c % G);
            else
                st = fill_generated(s, t, lines[items[p]], q.ids + c * seq, q.labels + c * seq, q.len[c], q.np[c / G],
                                    q.ngen[c], p * G + c % G, &objs[p * G + c % G]);
        }
    }
    free(ids);
    free(len);
    release_model(s, t);
    s->acc.generate_s += zt_now_s() - t0;
    for (int i = n; i < s->A * s->B; i++) empty_row(s, i);
    if (!st) st = score(s, n, objs);
    for (int i = 0; i < n && objs; i++) cJSON_Delete(objs[i]);
    free(objs);
    return st;
}

zt_status zt_rollout_step(zt_rollout *s, zt_trainer *t, int G, long step)
{
    int prompts = s->A * s->B / G;
    int64_t *items = malloc((size_t)prompts * sizeof *items);
    if (!items) return zt_fail(ZT_ENOMEM, "out of memory");
    zt_items_next(&s->order, items, prompts);
    zt_status st = zt_rollout_generate(s, t, &s->train, s->train_obj, items, prompts, G, step, s->r->rlhf.temperature);
    free(items);
    if (st) return st;
    for (int i = 0; i < s->A * s->B; i++) {
        if (!s->ntok[i]) continue;
        s->acc.completions++, s->acc.reward += s->rewards[i], s->acc.reward_sq += s->rewards[i] * s->rewards[i];
        s->acc.tokens += s->ntok[i], s->acc.truncated += s->truncated[i];
    }
    if (s->ref && s->ref_model.numel) {
        zt_rollout_outputs(s, &s->ref_model, s->A * s->B, s->ref);
    } else if (s->ref) { /* LoRA: the base itself, the adapters switched off */
        t->m.lora->disabled = 1;
        zt_rollout_outputs(s, &t->m, s->A * s->B, s->ref);
        t->m.lora->disabled = 0;
    }
    return ZT_OK;
}

/* ---- metrics and evaluation --------------------------------------------------------------- */

zt_status zt_rollout_metrics(zt_rollout *s, zt_trainer *t, cJSON *row)
{
    zt_rollout_stats a = s->acc;
    s->acc = (zt_rollout_stats){0};
    zt_status st = zt_zero_sum(&t->zero, (double *)&a, sizeof a / sizeof(double));
    if (st || !row) return st;
    double n = a.completions > 0 ? a.completions : NAN, mean = a.reward / n;
    zt_json_number(row, "reward_mean", mean);
    zt_json_number(row, "reward_std", sqrt(fmax(a.reward_sq / n - mean * mean, 0)));
    zt_json_number(row, "completion_length", a.tokens / n);
    zt_json_number(row, "truncated_fraction", a.truncated / n);
    cJSON_AddNumberToObject(row, "completions", a.completions);
    /* all ranks' tokens over one rank's mean time: the job's sampling speed */
    zt_json_number(row, "generate_tokens_per_s", a.generated / (a.generate_s / t->zero.world));
    return ZT_OK;
}

zt_status zt_rollout_evaluate(zt_rollout *s, zt_trainer *t, long step)
{
    if (!s->valid.n_examples) return ZT_OK;
    zt_items order;
    int n = s->A * s->B;
    zt_status st = zt_items_init(&order, s->valid.n_examples, 0, 0, t->zero.rank, t->zero.world);
    int64_t *items = malloc((size_t)n * sizeof *items), groups = zt_items_groups_per_epoch(&order, n);
    double sums[2] = {0, 0};        /* answered, reward */
    zt_rollout_stats keep = s->acc; /* the training steps' statistics leave evaluation out */
    if (!st && !items) st = zt_fail(ZT_ENOMEM, "out of memory");
    for (int64_t b = 0; b < groups && !st; b++) {
        zt_items_next(&order, items, n);
        if ((st = zt_rollout_generate(s, t, &s->valid, s->valid_obj, items, n, 1, 0, 0))) break;
        for (int i = 0; i < n; i++)
            if (items[i] >= 0) sums[0]++, sums[1] += s->rewards[i];
    }
    free(items);
    zt_items_free(&order);
    s->acc = keep;
    if (!st) st = zt_zero_sum(&t->zero, sums, 2);
    if (st || !t->lead) return st;
    zt_log_info("step %ld | valid reward %.4f over %.0f prompts (greedy)", step, sums[1] / sums[0], sums[0]);
    cJSON *row = zt_trainer_row(t, step, "valid");
    zt_json_number(row, "reward_mean", sums[1] / sums[0]);
    cJSON_AddNumberToObject(row, "prompts", sums[0]);
    return zt_trainer_write_row(t, row);
}

/* ---- setup -------------------------------------------------------------------------------- */

static zt_status open_scorer(zt_rollout *s)
{
    const zt_recipe *r = s->r;
    if (r->rlhf.reward_command[0])
        return zt_reward_program_open(&s->program, r->rlhf.reward_command, r->rlhf.reward_timeout_s);
    if (!r->rlhf.reward_model[0])
        return zt_fail(ZT_EUSER, "rlhf.algorithm = \"%s\" needs rlhf.reward_command or rlhf.reward_model",
                       zt_rlhf_algorithm_names[r->rlhf.algorithm]);
    char path[4200];
    zt_llama_config c;
    snprintf(path, sizeof path, "%s/config.json", r->rlhf.reward_model);
    zt_status st = zt_llama_config_load(&c, path);
    if (!st && !c.num_labels)
        st = zt_fail(ZT_EUSER, "rlhf.reward_model '%s' is a causal LM, not a reward model (num_labels = 1)",
                     r->rlhf.reward_model);
    if (!st) st = zt_model_open_head(&s->reward_model, r->rlhf.reward_model, r->model.dtype, r->model.device, 1);
    if (!st) st = zt_llama_alloc_acts(&s->reward_model, s->B, s->T, 0);
    return st;
}

zt_status zt_rollout_check(const zt_recipe *r)
{
    if (r->data.format != ZT_DATA_PROMPT)
        return zt_fail(ZT_EUSER,
                       "rlhf.algorithm = \"%s\" generates from prompts: data.format must be \"prompt\", not \"%s\"",
                       zt_rlhf_algorithm_names[r->rlhf.algorithm], zt_data_format_names[r->data.format]);
    return ZT_OK;
}

zt_status zt_rollout_open(zt_rollout *s, zt_trainer *t, int with_reference)
{
    const zt_recipe *r = t->r;
    s->r = r, s->T = t->T, s->B = r->train.micro_batch_size, s->A = r->train.gradient_accumulation_steps;
    t->rows = s->B;
    size_t rows = (size_t)s->A * s->B, N = rows * s->T;
    s->input = malloc(3 * N * sizeof *s->input);
    s->ntok = calloc(rows, sizeof *s->ntok);
    s->truncated = calloc(rows, sizeof *s->truncated);
    s->rewards = calloc(rows, sizeof *s->rewards);
    s->streams = zt_plan_rollout_streams(r, t->zero.world), s->lockstep = s->streams && t->zero.world > 1;
    int slots = zt_plan_rollout_slots(r, t->zero.world);
    s->logits = zt_calloc_aligned((size_t)(slots + 1) * t->m.V * sizeof(zt_real));
    s->smp = calloc((size_t)slots, sizeof *s->smp);
    s->slot = calloc((size_t)slots, sizeof *s->slot);
    s->next = calloc((size_t)slots, sizeof *s->next);
    s->scratch = zt_calloc_aligned(zt_sample_scratch_bytes(t->m.V));
    if (with_reference) s->ref = malloc(N * sizeof *s->ref);
    if (!s->input || !s->ntok || !s->truncated || !s->rewards || !s->logits || !s->scratch || !s->smp || !s->slot ||
        !s->next || (with_reference && !s->ref))
        return zt_fail(ZT_ENOMEM, "out of memory");
    s->target = s->input + N, s->pos = s->target + N, s->prompt_logits = s->logits + (size_t)slots * t->m.V;
    s->vocab = zt_tokenizer_vocab_size(t->tools.tok) < t->m.V ? zt_tokenizer_vocab_size(t->tools.tok) : t->m.V;
    s->gen = &t->m;
    zt_status st = zt_format_end_ids(t->tools.tok, t->tools.tmpl, s->stop_ids);
    if (!st) st = zt_llama_cache_init(&s->cache, s->gen, s->T, zt_plan_rollout_chunk(r, t->zero.world), slots);
    if (!st) st = zt_data_open(r, &t->tools, t->m.V, &s->train, &s->valid);
    if (!st) st = load_objects(r, &r->data.train, &s->train, &s->train_obj);
    if (!st && r->data.valid.n) st = load_objects(r, &r->data.valid, &s->valid, &s->valid_obj);
    if (!st && !r->data.valid.n && s->valid.n_examples)
        st = zt_fail(ZT_EUSER, "rlhf.algorithm = \"%s\" holds prompts out with data.valid, not data.valid_split",
                     zt_rlhf_algorithm_names[r->rlhf.algorithm]);
    if (!st)
        st = zt_items_init(&s->order, s->train.n_examples, r->data.shuffle, (uint64_t)r->train.seed, t->zero.rank,
                           t->zero.world);
    /* rlhf.reference, else the starting model (with LoRA the base, which t->m holds) */
    const char *dir = with_reference ? zt_plan_reference_dir(r) : NULL;
    if (!st && dir) {
        if (!(st = zt_model_open(&s->ref_model, dir, r->model.dtype, r->model.device)))
            st = zt_llama_alloc_acts(&s->ref_model, s->B, s->T, 0);
    }
    if (!st) st = open_scorer(s);
    return st;
}

void zt_rollout_close(zt_rollout *s)
{
    zt_reward_program_close(&s->program);
    zt_llama_free(&s->ref_model);
    zt_llama_free(&s->reward_model);
    if (s->gen) zt_llama_cache_free(&s->cache, s->gen);
    zt_items_free(&s->order);
    free_objects(s->train_obj, s->train.n_examples);
    free_objects(s->valid_obj, s->valid.n_examples);
    zt_dataset_free(&s->train);
    zt_dataset_free(&s->valid);
    free(s->input);
    free(s->ntok);
    free(s->truncated);
    free(s->rewards);
    free(s->ref);
    free(s->logits);
    free(s->smp);
    free(s->slot);
    free(s->next);
    free(s->scratch);
}
