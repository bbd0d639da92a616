/* The training loop (trainer.h): an algorithm's gradients each step, reduced over the
 * ranks, clipped and applied by AdamW on the fp32 masters; checkpoints, metrics, final/. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lib/ckpt/safetensors.h"
#include "lib/ckpt/state.h"
#include "lib/core/arena.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/core/pages.h"
#include "lib/data/formats.h"
#include "lib/model/generation_config.h"
#include "lib/model/lora.h"
#include "lib/model/open.h"
#include "lib/model/qbase_decode.h"
#include "lib/model/qbase_read.h"
#include "lib/zero/zero.h"
#include "lib/optim/adamw.h"
#include "lib/optim/clip.h"
#include "lib/plan/options.h"
#include "lib/plan/placement.h"
#include "lib/optim/schedule.h"
#include "trainer.h"

/* SIGTERM: finish the step, checkpoint and exit 0 (Slurm preemption); a second one ends zt at once
 * (a step can take longer than the wait before SIGKILL, or than a person wants to wait). */
static volatile sig_atomic_t stop_requested;
static void on_sigterm(int sig)
{
    if (stop_requested) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_requested = 1;
    static const char msg[] = "zt: SIGTERM: finishing this step, then a checkpoint and exit (SIGTERM again: stop now, "
                              "no checkpoint)\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
}

/* The keys that define what a step trains on, with the global batch. */
static uint64_t data_hash(const zt_trainer *t)
{
    const zt_recipe *r = t->r;
    uint64_t global = (uint64_t)r->train.micro_batch_size * r->train.gradient_accumulation_steps * t->zero.world;
    uint64_t h = zt_recipe_data_hash(r) ^ (global * 0x9e3779b97f4a7c15ull);
    for (const char *c = t->algo->name; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    return h;
}

/* train.resume: auto → the newest complete checkpoint of output.dir (if any), a path → that one */
static zt_status find_resume(zt_trainer *t)
{
    const zt_recipe *r = t->r;
    t->resume_from[0] = 0;
    if (r->train.resume == ZT_RESUME_NEVER) return ZT_OK;
    if (r->train.resume == ZT_RESUME_PATH) {
        if (!zt_state_is_done(r->train.resume_path))
            return zt_fail(ZT_EUSER, "train.resume: '%s' is not a complete checkpoint (no DONE marker)",
                           r->train.resume_path);
        snprintf(t->resume_from, sizeof t->resume_from, "%s", r->train.resume_path);
        return ZT_OK;
    }
    int found;
    zt_status st = zt_state_latest(r->output.dir, t->resume_from, sizeof t->resume_from, &found);
    if (!found) t->resume_from[0] = 0;
    return st;
}

/* resume = auto and no complete checkpoint: a start of this run that was killed before its
 * first checkpoint left only its run files, which a new start replaces (*overwrite = 1). */
static zt_status restart_killed(zt_trainer *t, int *overwrite)
{
    const zt_recipe *r = t->r;
    char *resolved;
    int restart = 0;
    if (*overwrite || r->train.resume != ZT_RESUME_AUTO) return ZT_OK;
    zt_status st = zt_recipe_resolved_text(r, &resolved);
    if (st) return st;
    st = zt_rundir_is_restart(r->output.dir, resolved, &restart);
    free(resolved);
    if (restart)
        zt_log_info("'%s' holds a start of this run that ended before its first checkpoint: starting afresh",
                    r->output.dir);
    *overwrite = restart;
    return st;
}

/* Restores weights, AdamW state for this rank's segments, the data cursor and the step. */
static zt_status restore(zt_trainer *t)
{
    const zt_recipe *r = t->r;
    zt_trainer_state s;
    zt_status st = zt_state_read_json(t->resume_from, &s);
    if (st) return st;
    if (s.base_hash != t->base_hash)
        return zt_fail(ZT_EUSER, "checkpoint '%s' %s", t->resume_from,
                       !s.base_hash    ? "holds a whole model, not LoRA adapters: resume it without lora.*"
                       : !t->base_hash ? "holds LoRA adapters: resume it with the run's lora.* keys"
                                       : "holds LoRA adapters trained on another base model (its weights differ from "
                                         "model.path's)");
    if (s.numel != t->zero.numel)
        return zt_fail(ZT_EUSER, "'%s/trainer_state.json': 'numel' is %zu, but the model has %zu %s", t->resume_from,
                       s.numel, t->zero.numel, t->m.lora ? "adapter parameters" : "parameters");
    if (s.data_hash != data_hash(t) && !r->train.resume_force)
        return zt_fail(ZT_EUSER,
                       "checkpoint '%s' was made with other data-defining keys (model, tokenizer, data.*, "
                       "train.seed or the global batch); set train.resume_force = true to resume anyway",
                       t->resume_from);
    if ((st = zt_zero_read_params(&t->zero, t->resume_from, s.numel))) return st;
    if ((st = zt_optstate_restore(&t->opt, t->resume_from, s.numel))) return st;
    if (t->algo->restore && (st = t->algo->restore(t, t->resume_from))) return st;
    if ((st = t->algo->set_state(t, (zt_loader_state){s.epoch, s.row}))) return st;
    t->start_step = s.step + 1;
    t->tokens_seen = (int64_t)s.tokens_seen;
    zt_log_info("resuming from '%s' after step %ld (saved by %d rank(s) at ZeRO stage %d)", t->resume_from, s.step,
                s.world, s.zero_stage);
    return ZT_OK;
}

/* The ZeRO stage the run is at: with LoRA and a sharded base, the base's (the adapters' partition
 * runs stage 3 as stage 2: plan/options.h). */
static int zero_stage(const zt_trainer *t) { return t->base.m ? t->base.stage : t->zero.stage; }

/* Where the collectives and the optimizer run, for the log's first line: on host copies, on the
 * device's arrays (NCCL, or through host memory), or nowhere but in this process. */
static const char *collectives(const zt_zero *z)
{
    if (z->staged) return " (optimizer and collectives on host copies)";
    if (!z->dcomm) return "";
    return strcmp(zt_comm_device_kind(z->dcomm), "nccl") ? " (collectives of the device arrays through host memory)"
                                                         : " (collectives of the device arrays on NCCL)";
}

/* Every rank agrees on failure: a rank's error becomes everyone's. */
static zt_status agree(zt_trainer *t, zt_status st, const char *what)
{
    double bad = st != ZT_OK;
    zt_status cst = t->comm ? zt_comm_allreduce_sum_f64(t->comm, &bad, 1, ZT_COMM_OTHER) : ZT_OK;
    if (cst) return cst;
    if (st) return st;
    return bad > 0 ? zt_fail(ZT_EIO, "%s failed on another rank", what) : ZT_OK;
}

/* generation_config.json in dir: the source's, with the ids that end turns where a template
 * taught them (generation stops where training taught turns to end) */
static zt_status write_generation_config(const zt_trainer *t, const char *dir)
{
    char path[8192];
    int32_t end[ZT_END_IDS] = {-1, -1, -1, -1};
    zt_status st = t->tools.tmpl ? zt_format_end_ids(t->tools.tok, t->tools.tmpl, end) : ZT_OK;
    if (!st) st = zt_path_join(path, sizeof path, dir, "generation_config.json");
    return st ? st : zt_generation_config_write(t->r->model.path, &t->m.cfg, end, ZT_END_IDS, path);
}

/* A resumable checkpoint: each rank's slice of weights and AdamW state, then trainer
 * state, model files and DONE from rank 0 once every shard is durable. */
static zt_status save_checkpoint(zt_trainer *t, long step)
{
    const zt_recipe *r = t->r;
    char dir[4096];
    zt_status st = t->lead ? zt_state_dir(r->output.dir, step, dir, sizeof dir) : ZT_OK;
    if ((st = agree(t, st, "creating the checkpoint directory"))) return st;
    if (!t->lead) snprintf(dir, sizeof dir, "%s/checkpoints/step-%06ld", r->output.dir, step);
    st = zt_optstate_save(&t->opt, dir);
    if (!st && t->algo->save) st = t->algo->save(t, dir);
    if ((st = agree(t, st, "writing a checkpoint shard")) || !t->lead) return st;
    zt_loader_state ls = t->algo->get_state(t);
    zt_trainer_state s = {.step = step,
                          .epoch = ls.epoch,
                          .row = ls.row,
                          .data_hash = data_hash(t),
                          .world = t->zero.world,
                          .zero_stage = zero_stage(t),
                          .numel = t->zero.numel,
                          .tokens_seen = (double)t->tokens_seen,
                          .elapsed_s = zt_now_s() - t->t_start,
                          .base_hash = t->base_hash};
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    if ((st = zt_state_write_json(dir, &s)) || (st = zt_state_copy_model_files(dir, r->model.path)) ||
        (st = zt_llama_config_save(&t->m.cfg, cfg, "float32")) || (st = write_generation_config(t, dir)) ||
        (st = zt_vocab_save(&t->tools, r->tokenizer.path, dir)) || (st = zt_state_mark_done(dir)) ||
        (st = zt_state_rotate(r->output.dir, r->train.save_total_limit)))
        return st;
    zt_log_info("checkpoint of step %ld written to '%s'", step, dir);
    return ZT_OK;
}

/* offload.* = "auto": decided here, for this world (plan/placement.h); the run's
 * recipe.resolved.toml shows the decision. */
static zt_status place(zt_trainer *t)
{
    const zt_recipe *r = t->r;
    if (r->offload.optimizer != ZT_OFFLOAD_AUTO && r->offload.param != ZT_OFFLOAD_AUTO) return ZT_OK;
    zt_placement p;
    int world = t->comm ? zt_comm_size(t->comm) : 1, per_node = t->comm ? zt_comm_ranks_per_node(t->comm) : 1;
    zt_status st = zt_placement_decide(r, world, per_node, &p);
    if (st) return st;
    t->placed = *r; /* shares r's strings: only the decided enums differ */
    t->placed.offload.optimizer = p.optimizer;
    t->placed.offload.param = p.param;
    t->r = &t->placed;
    if (t->lead)
        zt_log_info("offload = \"auto\": optimizer state %s, weights %s (%.1f of %.1f MiB where it computes)",
                    zt_offload_tier_names[p.optimizer], zt_offload_tier_names[p.param], p.need / 1048576.0,
                    p.have / 1048576.0);
    return ZT_OK;
}

/* offload.param = "nvme": the zero partition's loader, a unit of the model's files at a time.
 * With LoRA the base's hash is taken on the way: every rank reads every unit, in order. */
static zt_status load_unit(void *ctx, size_t off, size_t n, float *dst)
{
    zt_trainer *t = ctx;
    zt_status st = t->qweights  ? zt_qbase_read(t->qweights, off, n, dst)
                   : t->decoder ? zt_qbase_decoder_read(t->decoder, off, n, dst)
                                : zt_llama_weights_read(&t->m, t->weights, off, n, dst);
    if (st || !t->m.lora) return st;
    t->base_hash = zt_lora_base_hash_add((uint32_t)t->base_hash, dst, n);
    zt_lora_copies_load(&t->m, off, n, dst); /* a reward model's head, modules_to_save: trained from these */
    return ZT_OK;
}

/* lora.quantize_base held in memory: the whole quantized base read, its layers through the cache
 * in data.cache_dir (qbase_read.h) */
static zt_status load_quantized(zt_trainer *t)
{
    const zt_recipe *r = t->r;
    double t0 = zt_now_s();
    int hit;
    zt_status st = zt_qbase_load(&t->m, t->qweights, r->data.cache_dir[0] ? r->data.cache_dir : NULL, &hit);
    if (st || !t->lead) return st;
    const zt_llama *m = &t->m;
    size_t layers = m->norm_off - m->layer0_off, fp32_layers = zt_qbase_params(m) - (m->numel - layers);
    zt_log_info("base: linear weights %s %s%s, the layers %.2f MiB for %.2f MiB in fp32 (%.2f s)",
                hit                                         ? "read from the cache in"
                : zt_qbase_reader_prequantized(t->qweights) ? "read as stored in"
                                                            : "quantized to",
                zt_qbase_kind_names[r->lora.quantize_base], r->lora.double_quant ? " with double_quant" : "",
                layers * sizeof(zt_real) / 1048576.0, fp32_layers * 4 / 1048576.0, zt_now_s() - t0);
    return ZT_OK;
}

/* What a frozen base that ZeRO stage 3 shards (several ranks, or offload.param) cannot carry yet. */
static zt_status check_sharded_base(const zt_trainer *t, const zt_lora_config *c)
{
    const zt_recipe *r = t->r;
    char how[64];
    int world = t->comm ? zt_comm_size(t->comm) : 1;
    if (world > 1) snprintf(how, sizeof how, "zero.stage = 3 on %d ranks", world);
    else snprintf(how, sizeof how, "offload.param = \"%s\"", zt_offload_tier_names[r->offload.param]);
    if (c->method == ZT_LORA_METHOD_DORA && zt_llama_mlp_tiles(&t->m) > 1)
        return zt_fail(ZT_EUSER,
                       "lora.method = \"dora\" (use_dora) with zero.mlp_tiles = %d and the base sharded (%s) is not "
                       "supported yet: DoRA's norms read each MLP weight whole, which the tiles gather in pieces",
                       zt_llama_mlp_tiles(&t->m), how);
    return ZT_OK;
}

/* LoRA: adapters on the frozen model, from lora.adapter or freshly initialised; they, not
 * the model, are what ZeRO and AdamW train. At ZeRO stage 3 (several ranks, or offload.param)
 * the frozen base is a partition of its own (base: its options), sharded before the adapters
 * start: DoRA's magnitudes then gather each layer as they are computed. */
static zt_status attach_lora(zt_trainer *t, int vocab_before, const zt_zero_options *base)
{
    const zt_recipe *r = t->r;
    zt_lora_config c;
    zt_status st =
        zt_plan_lora_config(r, t->algo->score_head, t->tools.tok, &c); /* a reward model's head trains fully */
    if (!st && c.score != t->algo->score_head)
        st = zt_fail(ZT_EUSER, "lora.adapter '%s' is %s (its adapter_config.json's modules_to_save), not one for %s",
                     r->lora.adapter, c.score ? "a reward model's adapter" : "a causal LM's adapter",
                     t->algo->score_head ? "a reward model (rlhf.algorithm = \"reward\")" : "a causal LM");
    int world = t->comm ? zt_comm_size(t->comm) : 1, sharded = zt_zero_effective_stage(base, world) == 3;
    if (!st && sharded) st = check_sharded_base(t, &c);
    if (!st && t->m.V != vocab_before) st = zt_lora_check_vocab(&t->m, &c, vocab_before);
    if (!st && r->lora.adapter[0]) st = zt_lora_fit_vocab(&t->m, r->lora.adapter);
    if (!st && t->m.qbase && c.method == ZT_LORA_METHOD_DORA) /* its weight norms read the base's fp32 weights */
        st = zt_fail(ZT_EUSER,
                     "lora.quantize_base = \"%s\" with DoRA (lora.adapter '%s' has use_dora) is not supported yet",
                     zt_qbase_kind_names[t->m.qbase->kind], r->lora.adapter);
    if (!st) st = zt_lora_attach(&t->m, &c);
    if (st) return st;
    /* the hash of the weights as read, before any quantization; streamed, as they load (load_unit) */
    t->base_hash = base->load ? zt_lora_base_hash_start(&t->m) : zt_lora_base_hash(&t->m);
    if (sharded && (st = zt_zero_init(&t->base, t->comm, base, &t->m))) return st;
    st = r->lora.adapter[0] ? zt_lora_load(&t->m, r->lora.adapter)
                            : zt_lora_init_weights(&t->m, (uint64_t)r->train.seed);
    if (!st && t->m.lora->carried) /* zt_lora_save writes the language model's adapters alone */
        st = zt_fail(ZT_EUSER,
                     "lora.adapter '%s' adapts the vision tower too (%d tensors): zt trains the language model "
                     "alone and would save the adapter without them; merge it first (zt export --merge) and train "
                     "on the merged model",
                     r->lora.adapter, t->m.lora->carried);
    return st;
}

/* The model, and the partition of its training state over the ranks. With offload.param =
 * "nvme" the weights go from the model's files to the swap file a unit at a time: the whole
 * model is never in memory. */
static zt_status open_model(zt_trainer *t)
{
    const zt_recipe *r = t->r;
    zt_zero_options opts = zt_plan_zero_options(r);
    int stream = opts.params_at == ZT_PARAM_NVME, V, world = t->comm ? zt_comm_size(t->comm) : 1;
    int quantized = zt_recipe_lora_on(r) && r->lora.quantize_base != ZT_QBASE_NONE;
    zt_status st;
    if (quantized) /* read unit by unit when sharded, else whole below */
        st = zt_model_open_quantized(&t->m, r->model.path, r->model.dtype, r->model.device, t->algo->score_head,
                                     r->lora.quantize_base, r->lora.double_quant, &t->qweights);
    else if (stream)
        st = zt_model_open_unloaded(&t->m, r->model.path, r->model.dtype, r->model.device, t->algo->score_head,
                                    &t->weights, &t->decoder);
    else st = zt_model_open_head(&t->m, r->model.path, r->model.dtype, r->model.device, t->algo->score_head);
    if (st) return st;
    V = t->m.V;
    /* every rank starts from the same weights; each draws its own dropout masks and noise */
    t->m.router_aux_weight = 0; /* the load-balancing loss: zt pretrain and sft set it (lm.c) */
    t->m.draw_seed = (uint64_t)r->train.seed * 0x9e3779b97f4a7c15ull + (uint64_t)(t->comm ? zt_comm_rank(t->comm) : 0);
    t->m.neftune_alpha = r->train.neftune_noise_alpha;
    if ((st = zt_data_tools_open(&t->tools, r)) || (st = zt_vocab_prepare(&t->tools, &t->m))) return st;
    if (r->zero.head_tiles > 1 && (t->m.cfg.tie_word_embeddings || t->m.cfg.num_labels))
        return zt_fail(ZT_EUSER, "zero.head_tiles = %d: the model's head is %s, not an LM head of its own",
                       r->zero.head_tiles, t->m.cfg.num_labels ? "a score head" : "tied to the embedding");
    if (r->zero.embedding_tiles > 1 && t->m.cfg.tie_word_embeddings)
        return zt_fail(ZT_EUSER,
                       "zero.embedding_tiles = %d: the model's embedding is tied to its LM head, which uses "
                       "all of it at once (untie it, or leave zero.embedding_tiles at 1)",
                       r->zero.embedding_tiles);
    zt_plan_tile_model(r, &t->m);
    if (stream && t->m.V != V)
        return zt_fail(ZT_EUSER,
                       "offload.param = \"nvme\" cannot grow the vocabulary for added tokens (%d to %d): "
                       "add them to the model first, or use offload.param = \"cpu\"",
                       V, t->m.V);
    if (stream || (quantized && zt_zero_effective_stage(&opts, world) == 3)) {
        opts.load = load_unit, opts.load_ctx = t;
        if (quantized && t->lead)
            zt_log_info("base: linear weights %s %s%s as they are read, a unit at a time, into its stage-3 slices",
                        zt_qbase_reader_prequantized(t->qweights) ? "stored in" : "quantized to",
                        zt_qbase_kind_names[r->lora.quantize_base], r->lora.double_quant ? " with double_quant" : "");
    } else if (quantized && (st = load_quantized(t))) {
        return st;
    }
    if (zt_recipe_lora_on(r)) {
        if ((st = attach_lora(t, V, &opts))) return st;
        opts = zt_plan_adapter_zero_options(r);
    }
    st = zt_zero_init(&t->zero, t->comm, &opts, t->m.lora ? &t->m.lora->view : &t->m);
    zt_st_close(t->weights); /* read through: the rest of the run never needs it */
    t->weights = NULL;
    zt_qbase_reader_close(t->qweights);
    t->qweights = NULL;
    zt_qbase_decoder_close(t->decoder);
    t->decoder = NULL;
    return st;
}

static zt_status setup(zt_trainer *t, int argc, char **argv)
{
    zt_status st = t->algo->check(t->r);
    if (!st) st = place(t);
    if (st) return st;
    const zt_recipe *r = t->r;
    char path[4096 + 64];
    if ((st = find_resume(t))) return st;
    int overwrite = r->output.overwrite;
    if (t->lead && !t->resume_from[0] && !(st = restart_killed(t, &overwrite)))
        st = zt_rundir_check(r->output.dir, overwrite);
    if ((st = agree(t, st, "checking the output directory"))) return st;
    if (t->comm && (st = zt_recipe_check_world(r, zt_comm_size(t->comm), zt_comm_ranks_per_node(t->comm)))) return st;
    t->T = r->data.max_length;
    if ((st = open_model(t)) || (st = t->algo->open(t))) return st;
    if (r->offload.activations != ZT_OFFLOAD_NONE) { /* the checkpointed layer inputs go to host memory or a file */
        char name[160];
        zt_aio_scratch_name(name, sizeof name, t->zero.rank, "acts");
        zt_actstore_options o = zt_plan_actstore_options(r);
        if ((st = zt_actstore_open(&t->acts, &o, &t->m, name))) return st;
        t->m.act_store = &t->acts.hooks;
    }
    zt_trainer_state prev = {.step = -1};
    if (t->resume_from[0] && (st = zt_state_read_json(t->resume_from, &prev))) return st;
    if (t->lead &&
        !(st = zt_rundir_open(&t->rd, r->output.dir, overwrite, r->output.tensorboard, t->zero.world, prev.step, argc,
                              argv)) &&
        !(st = zt_rundir_path(&t->rd, path, sizeof path, "recipe.resolved.toml")))
        st = zt_recipe_write_resolved(r, path);
    if ((st = agree(t, st, "opening the run directory"))) return st;
    int T = t->T, A = r->train.gradient_accumulation_steps;
    if ((st = zt_llama_alloc_acts(&t->m, t->rows, T, r->model.activation_checkpointing))) return st;
    t->total_steps = r->train.max_steps;
    if (t->total_steps <= 0 && (st = t->algo->plan(t, &t->total_steps))) return st;
    if (t->total_steps < 1) t->total_steps = 1;
    long warmup = r->train.warmup_steps;
    if ((st =
             zt_schedule_init(&t->sched, r->train.lr_scheduler_type, r->train.learning_rate, t->total_steps, warmup,
                              r->train.warmup_ratio, r->train.min_lr_ratio, r->train.decay_ratio, &r->train.lr_kwargs)))
        return st;
    zt_offload_io io = zt_recipe_offload_io(r);
    if ((st = zt_optstate_open(&t->opt, r->offload.optimizer, r->train.optim, &io, &t->zero, "optim"))) return st;
    t->start_step = 1;
    if (t->resume_from[0] && (st = restore(t))) return st;
    t->flops_per_token = zt_llama_flops_per_token(&t->m, T);
    zt_log_info("model '%s': %zu parameters (%zu trained), %d layers, dtype %s, on %s%s; %ld steps of %d×%d×%d tokens "
                "on %d rank(s), ZeRO stage %d",
                r->model.path, zt_qbase_params(&t->m), t->zero.numel, t->m.L, zt_dtype_name(r->model.dtype),
                t->m.be->name, collectives(&t->zero), t->total_steps, A, t->rows, T, t->zero.world, zero_stage(t));
    return ZT_OK;
}

zt_status zt_optimizer_step(const zt_recipe *r, zt_zero *z, zt_optstate *opt, double lr, long step, double loss,
                            float *gnorm)
{
    double sumsq;
    zt_status st;
    if ((st = zt_zero_reduce_grads(z)) || (st = zt_zero_grad_sumsq(z, &sumsq))) return st;
    float norm, coef = zt_clip_coef(sumsq, (float)r->train.max_grad_norm, &norm);
    if (!isfinite(norm) || !isfinite(loss))
        return zt_fail(ZT_ERUNTIME, "step %ld: the loss or the gradient is not finite (loss %g, grad norm %g)", step,
                       loss, norm);
    zt_adamw h = {.lr = lr,
                  .beta1 = r->train.adam_beta1,
                  .beta2 = r->train.adam_beta2,
                  .eps = r->train.adam_epsilon,
                  .weight_decay = r->train.weight_decay,
                  .step = step};
    if ((st = zt_optstate_step(opt, z->m, &h, coef)) || (st = zt_zero_params_updated(z))) return st;
    *gnorm = norm;
    return ZT_OK;
}

/* One optimizer step: the algorithm's gradients, reduced, clipped and applied. */
static zt_status train_step(zt_trainer *t, long step, zt_step_result *res, float *gnorm_out)
{
    t->m.pass = (uint64_t)step << 24; /* dropout masks and noise follow the step: a resume draws the same */
    zt_zero_zero_grads(&t->zero);
    zt_status st = t->algo->grads(t, step, res);
    if (!st && t->base.m) st = zt_zero_reduce_grads(&t->base); /* a frozen base: a gather that failed */
    if (st || (st = zt_actstore_error(&t->acts))) return st;
    return zt_optimizer_step(t->r, &t->zero, &t->opt, zt_schedule_lr(&t->sched, step), step, res->loss, gnorm_out);
}

static zt_status log_step(zt_trainer *t, long step, double loss, float gnorm, int64_t ntok, double lr, double dt,
                          int64_t input_tokens)
{
    uint64_t bytes[ZT_COMM_NPURPOSE][2] = {{0}};
    if (t->comm) { /* a collective: every rank takes part, only the lead writes */
        zt_status st = zt_comm_bytes_total(t->comm, bytes);
        zt_comm_bytes_reset(t->comm);
        if (st) return st;
    }
    zt_zero *gathered = t->base.m ? &t->base : &t->zero; /* what stage 3 gathers: the frozen base under LoRA */
    double wait_s = zt_zero_take_wait_s(gathered);       /* rank 0's exposed gather time */
    uint64_t rd, wr, ard, awr, brd = 0, bwr = 0;
    double io_wait_s, acts_wait_s, base_wait_s = 0; /* rank 0's exposed I/O */
    zt_optstate_take_io(&t->opt, &rd, &wr, &io_wait_s);
    zt_actstore_take_io(&t->acts, &ard, &awr, &acts_wait_s);
    if (t->base.aio) { /* the frozen base's swap file (offload.param = "nvme") */
        zt_aio_take_bytes(t->base.aio, &brd, &bwr);
        base_wait_s = zt_aio_take_wait_s(t->base.aio);
    }
    double io[2] = {(double)(rd + ard + brd), (double)(wr + awr + bwr)}; /* summed over ranks, as the comm bytes */
    zt_status st = zt_zero_sum(&t->zero, io, 2);
    double qerr[2] = {-1, -1}; /* zero.measure_quantization */
    if (!st && gathered->o.measure_quant) st = zt_zero_take_quant_error(gathered, qerr);
    if (st) return st;
    t->io_bytes += io[0] + io[1];
    cJSON *row = zt_trainer_row(t, step, NULL);
    if (t->algo->metrics && (st = t->algo->metrics(t, row))) {
        cJSON_Delete(row);
        return st;
    }
    if (!t->lead) return ZT_OK;
    double tps = input_tokens * (double)t->zero.world / dt, elapsed = zt_now_s() - t->t_start;
    zt_log_info("step %ld/%ld | loss %.4f | lr %.3e | grad-norm %.3f | %.0f tok/s | %.1f GFLOP/s | elapsed %.0fs", step,
                t->total_steps, loss, lr, gnorm, tps, tps * t->flops_per_token * 1e-9, elapsed);
    zt_json_number(row, "loss", loss);
    zt_json_number(row, "lr", lr);
    zt_json_number(row, "grad_norm", gnorm);
    cJSON_AddNumberToObject(row, "target_tokens", (double)ntok);
    zt_json_number(row, "input_tokens_per_s", tps); /* every position computed, padding included */
    zt_json_number(row, "elapsed_s", elapsed);
    uint64_t intra = 0, inter = 0;
    for (int p = 0; p < ZT_COMM_NPURPOSE; p++) intra += bytes[p][0], inter += bytes[p][1];
    cJSON_AddNumberToObject(row, "comm_bytes_intra", (double)intra);
    cJSON_AddNumberToObject(row, "comm_bytes_inter", (double)inter);
    for (int p = 0; p < ZT_COMM_NPURPOSE; p++) { /* comm_bytes_fwd_gather, and its inter-node part ..._inter */
        if (p == ZT_COMM_OTHER) continue;
        char key[64];
        snprintf(key, sizeof key, "comm_bytes_%s", zt_comm_purpose_name(p));
        cJSON_AddNumberToObject(row, key, (double)(bytes[p][0] + bytes[p][1]));
        snprintf(key, sizeof key, "comm_bytes_%s_inter", zt_comm_purpose_name(p));
        cJSON_AddNumberToObject(row, key, (double)bytes[p][1]);
    }
    zt_json_number(row, "gather_wait_s", wait_s);
    cJSON_AddNumberToObject(row, "io_read_bytes", io[0]);
    cJSON_AddNumberToObject(row, "io_write_bytes", io[1]);
    zt_json_number(row, "io_wait_s", io_wait_s + acts_wait_s + base_wait_s);
    if (qerr[0] >= 0) zt_json_number(row, "quant_error_weights", qerr[0]);
    if (qerr[1] >= 0) zt_json_number(row, "quant_error_grads", qerr[1]);
    return zt_rundir_metrics(&t->rd, row);
}

/* What ZeRO partitions, as this rank holds it (rank 0 holds the largest shards). */
static void add_memory(cJSON *summary, const zt_zero_memory *m, int stage)
{
    zt_zero_memory u = *m;
    cJSON *o = cJSON_AddObjectToObject(summary, "model_state_bytes");
    cJSON_AddNumberToObject(o, "params", (double)u.params);
    cJSON_AddNumberToObject(o, "grads", (double)u.grads);
    cJSON_AddNumberToObject(o, "optimizer", (double)u.optimizer);
    cJSON_AddNumberToObject(o, "gathered_peak", (double)u.gathered_peak);
    cJSON_AddNumberToObject(summary, "zero_stage", stage);
}

/* The progress bar on a terminal: step, loss, lr, grad-norm, tokens/s, GFLOP/s, memory, ETA. */
static void show_progress(zt_trainer *t, long step, double loss, double lr, float gnorm, double step_s,
                          int64_t input_tokens)
{
    char bar[21], line[400];
    int filled = (int)(20 * step / t->total_steps);
    for (int i = 0; i < 20; i++) bar[i] = i < filled ? '#' : '.';
    bar[20] = 0;
    double tps = input_tokens / step_s, elapsed = zt_now_s() - t->t_start;
    long eta = (long)(elapsed / step * (t->total_steps - step));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    snprintf(line, sizeof line,
             "[%s] %ld/%ld | loss %.4f | lr %.2e | grad-norm %.3f | %.0f tok/s | %.1f GFLOP/s | mem %.0f MiB | ETA "
             "%ld:%02ld",
             bar, step, t->total_steps, loss, lr, gnorm, tps, tps * t->flops_per_token * 1e-9, ru.ru_maxrss / 1024.0,
             eta / 60, eta % 60);
    zt_log_status(line);
}

cJSON *zt_trainer_row(zt_trainer *t, long step, const char *split)
{
    if (!t->lead) return NULL;
    cJSON *row = cJSON_CreateObject();
    cJSON_AddNumberToObject(row, "step", step);
    if (split) cJSON_AddStringToObject(row, "split", split);
    return row;
}

zt_status zt_trainer_write_row(zt_trainer *t, cJSON *row) { return row ? zt_rundir_metrics(&t->rd, row) : ZT_OK; }

/* One process with offload.param = "nvme" saves the weights from the swap file, tensor by
 * tensor; otherwise the whole model is gathered for the save. */
static int saves_from_file(const zt_trainer *t) { return t->zero.swap && t->zero.world == 1; }

static zt_status read_weights(void *ctx, float *dst, size_t first, size_t n)
{
    return zt_zero_read_weights(ctx, dst, first, n);
}

/* final/: the model in model.dtype and its config (with LoRA a PEFT adapter directory instead:
 * adapter_config.json and adapter_model.safetensors), tokenizer files and generation config */
static zt_status save_final(zt_trainer *t)
{
    char dir[4096 + 64], src[4096 + 64], dst[8192];
    zt_dtype dtype = t->r->model.dtype;
    zt_status st = zt_rundir_path(&t->rd, dir, sizeof dir, "final");
    if (st) return st;
    st = t->m.lora            ? zt_lora_save(&t->m, dir, t->r->model.path)
         : saves_from_file(t) ? zt_llama_save_with(&t->m, dir, dtype, 5000000000ull, read_weights, &t->zero)
                              : zt_llama_save(&t->m, dir, dtype, 5000000000ull);
    if (!st && t->m.qbase) st = zt_qbase_note_write(dir, t->m.qbase->kind, t->m.qbase->double_quant);
    if (st) return st;
    static const char *copy[] = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                                 "special_tokens_map.json"};
    for (size_t i = 0; i < sizeof copy / sizeof copy[0] && !st; i++) {
        char *data;
        size_t len;
        if ((st = zt_path_join(src, sizeof src, t->r->model.path, copy[i]))) break;
        if (!zt_path_exists(src)) continue;
        if ((st = zt_read_file(src, &data, &len))) break;
        if (!(st = zt_path_join(dst, sizeof dst, dir, copy[i]))) st = zt_write_file_atomic(dst, data, len);
        free(data);
    }
    if (!st) st = zt_vocab_save(&t->tools, t->r->tokenizer.path, dir);
    if (st) return st;
    return write_generation_config(t, dir);
}

static void teardown(zt_trainer *t)
{
    if (t->algo->close) t->algo->close(t);
    zt_optstate_close(&t->opt);
    zt_actstore_close(&t->acts);
    zt_st_close(t->weights); /* open only when setup failed while streaming the weights */
    t->weights = NULL;
    zt_qbase_reader_close(t->qweights);
    t->qweights = NULL;
    zt_qbase_decoder_close(t->decoder);
    t->decoder = NULL;
    zt_data_tools_close(&t->tools);
    zt_llama_free(&t->m);
    zt_zero_free(&t->zero);
    zt_zero_free(&t->base);
}

zt_status zt_trainer_gather_model(zt_trainer *t)
{
    zt_status st = zt_zero_gather_all(&t->zero);
    return !st && t->base.m ? zt_zero_gather_all(&t->base) : st;
}

void zt_trainer_release_model(zt_trainer *t)
{
    zt_zero_release_all(&t->zero);
    if (t->base.m) zt_zero_release_all(&t->base);
}

/* A job started by mpirun or srun (one rank among several) gets a communicator; a
 * plain process trains alone without initialising MPI at all. */
static zt_status open_comm(zt_trainer *t, const zt_recipe *r)
{
    static const char *const launched[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};
    int in_job = 0;
    for (int i = 0; i < 3; i++) in_job |= getenv(launched[i]) != NULL;
    t->lead = 1;
    if (!in_job) return ZT_OK;
    zt_status st = zt_comm_init(&t->comm, NULL, NULL, r->train.collective_timeout_s);
    if (st) return st;
    t->lead = zt_comm_rank(t->comm) == 0;
    if (!t->lead) zt_log_set_rank(zt_comm_rank(t->comm));
    return ZT_OK;
}

static zt_status evaluate(zt_trainer *t, long step) { return t->algo->evaluate ? t->algo->evaluate(t, step) : ZT_OK; }

zt_status zt_train_with(const zt_recipe *r, const zt_algo *algo, int argc, char **argv)
{
    zt_trainer t = {.r = r, .algo = algo};
    zt_status st = open_comm(&t, r);
    if (!st) st = setup(&t, argc, argv);
    t.t_start = zt_now_s();
    double loss = 0, t_log = zt_now_s(), loss_log = 0;
    int64_t items_log = 0, tokens_log = 0, input_log = 0, input_total = 0;
    long step = 1;
    if (!st) step = t.start_step;
    signal(SIGTERM, on_sigterm);
    int preempted = 0;
    for (; !st && step <= t.total_steps; step++) {
        float gnorm = 0;
        zt_step_result res = {0};
        double t_step = zt_now_s();
        if ((st = train_step(&t, step, &res, &gnorm))) break;
        loss = res.loss;
        if (t.lead)
            show_progress(&t, step, loss, zt_schedule_lr(&t.sched, step), gnorm, zt_now_s() - t_step, res.input_tokens);
        t.tokens_seen += res.tokens;
        loss_log += loss * res.items, items_log += res.items, tokens_log += res.tokens;
        input_log += res.input_tokens, input_total += res.input_tokens;
        if (step % r->train.logging_steps == 0 || step == t.total_steps) {
            double lr = zt_schedule_lr(&t.sched, step), tnow = zt_now_s();
            st = log_step(&t, step, items_log ? loss_log / items_log : 0, gnorm, tokens_log, lr, tnow - t_log,
                          input_log);
            t_log = tnow, loss_log = 0, items_log = tokens_log = input_log = 0;
        }
        if (!st && r->train.eval_steps > 0 && step % r->train.eval_steps == 0) st = evaluate(&t, step);
        double stop = stop_requested; /* every rank stops at the same step */
        if (!st) st = zt_zero_sum(&t.zero, &stop, 1);
        if (!st && (stop > 0 || (r->train.save_steps > 0 && step % r->train.save_steps == 0 && step < t.total_steps)))
            st = save_checkpoint(&t, step);
        if (!st && stop > 0) {
            zt_log_warn("stopped by SIGTERM after step %ld; the checkpoint resumes it (train.resume = auto)", step);
            preempted = 1, step++;
            break;
        }
    }
    int evaluated_last = r->train.eval_steps > 0 && t.total_steps % r->train.eval_steps == 0;
    if (!st && !preempted && !evaluated_last) st = evaluate(&t, t.total_steps);
    if (!st && t.base.m) st = zt_zero_reduce_grads(&t.base); /* a gather of the last evaluation that failed */
    zt_log_status(NULL);
    /* before the final save assembles the whole model */
    size_t peak_rss_train = zt_peak_rss_bytes(), rss_train_end = zt_rss_bytes();
    zt_zero_memory mem = t.zero.m ? zt_zero_memory_use(&t.zero) : (zt_zero_memory){0};
    if (t.opt.q8) mem.optimizer = zt_optstate_memory(&t.opt);
    if (t.base.m) { /* LoRA: the frozen base's slices (weights alone) beside the adapters */
        zt_zero_memory b = zt_zero_memory_use(&t.base);
        mem.params += b.params, mem.grads += b.grads, mem.optimizer += b.optimizer;
        mem.gathered_peak += b.gathered_peak;
    }
    if (!st && !preempted && algo->finish) st = algo->finish(&t);
    if (!st && !preempted && !saves_from_file(&t)) st = zt_zero_gather_all(&t.zero);
    if (!st && !preempted && t.lead) st = save_final(&t);
    zt_zero_release_all(&t.zero);
    cJSON *summary = NULL;
    if (t.rd.run) {
        summary = cJSON_CreateObject();
        double elapsed = zt_now_s() - t.t_start;
        cJSON_AddNumberToObject(summary, "steps", step - 1);
        cJSON_AddNumberToObject(summary, "target_tokens", (double)t.tokens_seen);
        cJSON_AddNumberToObject(summary, "input_tokens", (double)input_total * t.zero.world);
        zt_json_number(summary, "final_loss", loss);
        zt_json_number(summary, "time_s", elapsed);
        cJSON_AddNumberToObject(summary, "comm_bytes", 0);
        cJSON_AddNumberToObject(summary, "io_bytes", t.io_bytes);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        cJSON_AddNumberToObject(summary, "peak_rss_bytes", (double)ru.ru_maxrss * 1024);
        cJSON_AddNumberToObject(summary, "peak_rss_train_bytes", (double)peak_rss_train);
        cJSON_AddNumberToObject(summary, "rss_train_end_bytes", (double)rss_train_end);
        cJSON_AddNumberToObject(summary, "device_peak_bytes", (double)t.m.be->memory_peak(t.m.be));
        add_memory(summary, &mem, zero_stage(&t));
        cJSON_AddStringToObject(summary, "status", st ? "failed" : preempted ? "preempted" : "ok");
    }
    /* a failure is reported as it was met, not as what cleaning up after it met (a full disk
     * fails the summary too) */
    char first[1024];
    snprintf(first, sizeof first, "%s", zt_errmsg());
    zt_status failed = st;
    if (t.rd.run) {
        zt_status cst = zt_rundir_close(&t.rd, summary);
        if (!st) st = cst;
    }
    teardown(&t);
    if (t.comm) zt_comm_finalize(t.comm);
    return failed ? zt_fail(failed, "%s", first) : st;
}
