/* train/trainer: the training loop's state and the algorithms that plug into it
 * (causal-LM training in trainer.c; DPO, reward models, GRPO and PPO in lib/train/rlhf/).
 *
 * The loop owns everything an optimizer step shares: the model, ZeRO, AdamW state, the
 * schedule, checkpoints, the run directory and metrics. An algorithm owns its data and
 * its loss: each step it fills the model's gradients (zeroed before) for every one of
 * its micro-batches, as the gradient of the step's mean loss over all ranks.
 */
#ifndef ZT_TRAIN_TRAINER_H
#define ZT_TRAIN_TRAINER_H

#include <cjson/cJSON.h>

#include "lib/data/batch.h"
#include "lib/offload/actstore.h"
#include "lib/optim/schedule.h"
#include "lib/zero/zero.h"
#include "lib/zero/optstate.h"
#include "lib/train/run/rundir.h"
#include "train.h"

typedef struct zt_trainer zt_trainer;

/* What one step reports (set by the algorithm): the mean loss, what it is a mean over
 * (target tokens, pairs, completions; all ranks), the target tokens trained (all ranks)
 * and the input tokens this rank processed. */
typedef struct zt_step_result {
    double loss;
    int64_t items, tokens, input_tokens;
} zt_step_result;

typedef struct zt_algo {
    const char *name;
    int score_head; /* trains a value / reward model (num_labels = 1) */
    /* The recipe's keys the algorithm needs (data.format), before anything is loaded. */
    zt_status (*check)(const zt_recipe *r);
    /* After the model, ZeRO and the tokenizer: loads the data, sets t->rows (rows of
     * t->T tokens per micro-batch) and anything else the algorithm holds. */
    zt_status (*open)(zt_trainer *t);
    /* Optimizer steps of the run when train.max_steps is 0 (num_train_epochs). */
    zt_status (*plan)(zt_trainer *t, long *steps);
    zt_status (*grads)(zt_trainer *t, long step, zt_step_result *out);
    /* Adds the algorithm's fields to a logged step's metrics row (row NULL but on rank 0:
     * every rank calls it, so it may use collectives). */
    zt_status (*metrics)(zt_trainer *t, cJSON *row);
    /* The periodic evaluation on the held-out data (NULL: none). */
    zt_status (*evaluate)(zt_trainer *t, long step);
    zt_loader_state (*get_state)(zt_trainer *t);
    zt_status (*set_state)(zt_trainer *t, zt_loader_state s);
    /* Optional, for a second trained model (PPO's critic), on every rank: its share of a
     * checkpoint in dir, its restore, and its final save once training ends. */
    zt_status (*save)(zt_trainer *t, const char *dir);
    zt_status (*restore)(zt_trainer *t, const char *dir);
    zt_status (*finish)(zt_trainer *t);
    void (*close)(zt_trainer *t);
} zt_algo;

struct zt_trainer {
    const zt_recipe *r;
    const zt_algo *algo;
    void *ctx;                        /* the algorithm's state */
    zt_recipe placed;                 /* the recipe with offload's "auto" decided (r points here then) */
    zt_llama m;                       /* with LoRA, ZeRO and AdamW train m.lora->view: the adapters */
    struct zt_st_reader *weights;     /* offload.param = "nvme": the model's files, read unit by unit at the start */
    struct zt_qbase_reader *qweights; /* lora.quantize_base: the same for the quantized base (model/qbase_read.h) */
    struct zt_qbase_decoder *decoder; /* streaming a bitsandbytes checkpoint unquantized (model/qbase_decode.h) */
    zt_data_tools tools;
    zt_comm *comm; /* NULL for a single process */
    zt_zero zero;
    zt_zero base;     /* LoRA at ZeRO stage 3 (several ranks or offload.param): the frozen base's partition */
    int lead;         /* rank 0: prints and writes the run files */
    int rows, T;      /* a micro-batch: rows × T tokens */
    zt_optstate opt;  /* AdamW state for the segments this rank updates (zero.seg) */
    zt_actstore acts; /* offload.activations */
    zt_schedule sched;
    zt_rundir rd;
    long total_steps, start_step; /* start_step > 1 when resuming */
    double t_start, flops_per_token;
    int64_t tokens_seen;
    double io_bytes;        /* offload I/O of the run, all ranks */
    char resume_from[4096]; /* the checkpoint to continue from, "" for a new run */
    uint64_t base_hash;     /* LoRA: the frozen base's weights hash (zt_lora_base_hash), else 0 */
};

/* After a step's gradients (model z->m, grads zeroed before them): reduces them over the
 * ranks, clips them to train.max_grad_norm and applies AdamW with lr; *gnorm is the norm
 * before clipping. A loss or gradient that is not finite is an error. */
zt_status zt_optimizer_step(const zt_recipe *r, zt_zero *z, zt_optstate *opt, double lr, long step, double loss,
                            float *gnorm);
/* The whole model in t->m.params on every rank, to generate from (ZeRO stage 3 gathers its units;
 * with LoRA the frozen base's), a collective; zt_trainer_release_model frees it again. */
zt_status zt_trainer_gather_model(zt_trainer *t);
void zt_trainer_release_model(zt_trainer *t);
/* Trains with algo: what zt pretrain, zt sft and zt rlhf run. */
zt_status zt_train_with(const zt_recipe *r, const zt_algo *algo, int argc, char **argv);
/* A metrics row for rank 0 (the step and split fields set), or NULL elsewhere. */
cJSON *zt_trainer_row(zt_trainer *t, long step, const char *split);
/* Writes a row from zt_trainer_row (and frees it). */
zt_status zt_trainer_write_row(zt_trainer *t, cJSON *row);

#endif
