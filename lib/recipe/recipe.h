/* recipe/recipe: the recipe schema and the zt_recipe it fills.
 *
 * One table (zt_recipe_schema) drives everything about a key: its section and
 * name, type, default, range or allowed values, one line of documentation and
 * where it lives in zt_recipe. Loading applies the defaults, then the TOML
 * file, then `section.key=value` overrides, and checks the keys against each
 * other. Errors are ZT_EUSER and name the place:
 *   recipe.toml:12:5: unknown key 'learnig_rate' in [train] (did you mean 'learning_rate'?)
 *   override 'train.lr=1': unknown key 'lr' in [train]
 *
 *     zt_recipe r;
 *     zt_status st = zt_recipe_load(&r, "recipes/tiny.toml", argc - 2, argv + 2);
 *     if (st) return st;                          // the message is in zt_errmsg()
 *     if ((st = zt_recipe_check_world(&r, world, ranks_per_node))) ...
 *     train(r.model.path, r.train.learning_rate, ...);
 *     zt_recipe_write_resolved(&r, "runs/tiny/recipe.resolved.toml");
 *     zt_recipe_free(&r);
 *
 * An enum key (ZT_RECIPE_ENUM) is stored as a C enum, the value's index in the key's
 * names; the modules a key configures define its enum and names (zt_dtype, zt_device,
 * zt_data_format, zt_offload_tier, ...), the recipe those of the keys only it reads. A key
 * that also takes a path (train.resume, tokenizer.chat_template) stores the value one past
 * its names for a path, and the path beside it.
 *
 * Paths come out absolute: relative paths in the file resolve against the
 * file's directory, those given as overrides against the current directory,
 * and `~/` is $HOME. An empty tokenizer.path becomes model.path; an empty
 * output.dir becomes runs/<recipe file name without .toml> in the current
 * directory.
 */
#ifndef ZT_RECIPE_RECIPE_H
#define ZT_RECIPE_RECIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/backend/backend.h"
#include "lib/core/dtype.h"
#include "lib/core/status.h"
#include "lib/data/formats.h"
#include "lib/data/template.h"
#include "lib/model/lora.h"
#include "lib/model/qbase.h"
#include "lib/offload/offload.h"
#include "lib/optim/optim.h"
#include "lib/optim/schedule.h"

/* train.resume */
typedef enum zt_resume {
    ZT_RESUME_AUTO,  /* from the newest complete checkpoint in output.dir, if any */
    ZT_RESUME_NEVER, /* a fresh start */
    ZT_RESUME_PATH,  /* from the checkpoint train.resume_path */
} zt_resume;
extern const char *const zt_resume_names[ZT_RESUME_PATH];

/* rlhf.algorithm */
typedef enum zt_rlhf_algorithm {
    ZT_RLHF_DPO,
    ZT_RLHF_REWARD,
    ZT_RLHF_PPO,
    ZT_RLHF_GRPO,
    ZT_RLHF_KTO
} zt_rlhf_algorithm;
extern const char *const zt_rlhf_algorithm_names[5];

/* rlhf.loss_type: how GRPO averages its token losses (TRL's grpo, bnpo, dr_grpo, dapo), or DPO's
 * loss (TRL's sigmoid ... apo_down, in the order of zt_dpo_kind from ZT_RLHF_SIGMOID on), or
 * KTO's (TRL's kto, apo_zero_unpaired); auto: grpo for GRPO, sigmoid for DPO, kto for KTO */
typedef enum zt_rlhf_loss {
    ZT_RLHF_LOSS_AUTO,
    ZT_RLHF_LOSS_GRPO,
    ZT_RLHF_LOSS_BNPO,
    ZT_RLHF_LOSS_DR_GRPO,
    ZT_RLHF_LOSS_DAPO,
    ZT_RLHF_SIGMOID, /* DPO's from here on */
    ZT_RLHF_IPO,
    ZT_RLHF_HINGE,
    ZT_RLHF_ROBUST,
    ZT_RLHF_EXO_PAIR,
    ZT_RLHF_NCA_PAIR,
    ZT_RLHF_BCO_PAIR,
    ZT_RLHF_SPPO_HARD,
    ZT_RLHF_APO_ZERO,
    ZT_RLHF_APO_DOWN,
    ZT_RLHF_SIMPO,    /* reference-free: sigmoid on averaged log-probabilities, margin rlhf.simpo_gamma */
    ZT_RLHF_ORPO,     /* reference-free: the chosen answer's NLL plus the odds-ratio term */
    ZT_RLHF_LOSS_KTO, /* KTO's from here on */
    ZT_RLHF_LOSS_APO_ZERO_UNPAIRED,
} zt_rlhf_loss;
extern const char *const zt_rlhf_loss_names[19];
/* rlhf.scale_rewards (GRPO): advantages divided by the group's reward std, the step's, or not */
typedef enum zt_rlhf_scale { ZT_RLHF_SCALE_GROUP, ZT_RLHF_SCALE_BATCH, ZT_RLHF_SCALE_NONE } zt_rlhf_scale;
extern const char *const zt_rlhf_scale_names[3];

typedef struct zt_strlist {
    char **items;
    int n;
} zt_strlist;

typedef struct zt_recipe {
    struct {
        char *path;     /* HF-format model directory */
        zt_dtype dtype; /* fp32 | bf16 | fp16 */
        bool activation_checkpointing;
        zt_device device;
    } model;
    struct {
        char *path; /* tokenizer directory or file (model.path when not given) */
        zt_chat_template chat_template;
        char *chat_template_path; /* the .jinja file (ZT_TEMPLATE_FILE), else NULL */
        char *chat_template_kwargs; /* a JSON object: variables every render gets (enable_thinking...) */
    } tokenizer;
    struct {
        zt_strlist train, valid; /* JSONL paths */
        double valid_split;      /* fraction of train held out, 0..0.5 */
        zt_data_format format;
        int max_length; /* tokens */
        bool packing;
        zt_train_on train_on;
        bool shuffle;
        char *cache_dir;
        bool skip_bad_lines;
        bool split_special_tokens;
    } data;
    struct {
        double num_train_epochs;
        int64_t max_steps;
        int micro_batch_size;
        int gradient_accumulation_steps;
        double learning_rate;
        zt_schedule_type lr_scheduler_type;
        char *lr_scheduler_kwargs;    /* a JSON object: Hugging Face's lr_scheduler_kwargs */
        zt_schedule_kwargs lr_kwargs; /* what it sets, with HF's defaults (zt_recipe_load fills it) */
        int64_t warmup_steps;
        double warmup_ratio;
        double decay_ratio;
        double min_lr_ratio;
        double weight_decay;
        zt_optim_kind optim;
        double adam_beta1, adam_beta2, adam_epsilon;
        double max_grad_norm;
        double neftune_noise_alpha;
        int64_t seed;
        int64_t logging_steps, eval_steps, save_steps;
        int save_total_limit;
        zt_resume resume;
        char *resume_path; /* the checkpoint (ZT_RESUME_PATH), else NULL */
        bool resume_force;
        double collective_timeout_s;
    } train;
    struct {
        bool generate;
        int max_new_tokens;
        int64_t max_examples;
    } eval;
    struct {
        int stage;
        bool quantized_weights;
        int quant_block_size; /* elements */
        int hpz_partition_size;
        bool quantized_gradients;
        bool quantized_gradients_error_feedback;
        bool measure_quantization;
        bool device_collectives;
        int prefetch_layers;
        int embedding_tiles, mlp_tiles, head_tiles; /* memory-centric tiling */
        int64_t reduce_bucket_size;                 /* elements */
    } zero;
    struct {
        zt_offload_tier optimizer, param;
        zt_offload_tier activations; /* none, cpu or nvme */
        zt_strlist nvme_path;
        int64_t max_pinned_bytes;
        struct {
            int64_t block_size; /* bytes */
            int queue_depth;
        } aio;
    } offload;
    struct {
        int r; /* LoRA is on when r > 0 or adapter is set */
        double alpha, dropout;
        zt_strlist target_modules;  /* module names, or "all-linear" */
        zt_strlist modules_to_save; /* "embed_tokens", "lm_head" */
        zt_strlist trainable_token_indices; /* token ids (decimal text) or tokens */
        zt_strlist layers_to_transform;     /* layers (decimal text) */
        bool use_rslora;
        double loraplus_lr_ratio; /* LoRA+; 0: off */
        zt_lora_init init_lora_weights;
        zt_lora_method method;
        char *adapter; /* a PEFT adapter directory to start from, "" none */
        zt_qbase_kind quantize_base;
        bool double_quant; /* nf4 only */
    } lora;
    struct {
        char *dir;
        bool overwrite;
        bool tensorboard;
    } output;
    struct {
        zt_rlhf_algorithm algorithm;
        double beta;
        zt_rlhf_loss loss_type;
        zt_rlhf_scale scale_rewards;     /* GRPO */
        bool mask_truncated_completions; /* GRPO */
        double label_smoothing;
        double simpo_gamma;
        double desirable_weight, undesirable_weight; /* KTO */
        int ppo_epochs;
        char *reference, *reward_model, *reward_command;
        double reward_timeout_s;
        int num_generations;
        int max_new_tokens;
        double temperature, top_p;
        double kl_coef, gamma, lam, cliprange, cliprange_high, cliprange_value, reward_clip, critic_learning_rate;
    } rlhf;

    char *file;                      /* the recipe file as given; NULL without one */
    struct zt_recipe_origin *origin; /* where each key was set (for messages) */
} zt_recipe;

typedef enum zt_recipe_type {
    ZT_RECIPE_STRING, /* char * */
    ZT_RECIPE_ENUM,   /* an enum: the index of the value in `names` (or a path, see path_suffix) */
    ZT_RECIPE_LIST,   /* zt_strlist: a string or an array of strings */
    ZT_RECIPE_INT,    /* int */
    ZT_RECIPE_INT64,  /* int64_t */
    ZT_RECIPE_FLOAT,  /* double; integers are accepted */
    ZT_RECIPE_BOOL,   /* bool */
    ZT_RECIPE_TABLE,  /* char *: a table of strings, numbers and booleans, kept as a JSON object's text */
} zt_recipe_type;

enum {
    ZT_RECIPE_PATH = 1,     /* the string (or each list item) is a path */
    ZT_RECIPE_DATA = 2,     /* defines the training data: part of zt_recipe_data_hash */
    ZT_RECIPE_MIN_OPEN = 4, /* the range excludes min */
    ZT_RECIPE_MAX_OPEN = 8, /* the range excludes max */
    ZT_RECIPE_INTS = 16,    /* LIST: the items are integers from 0, kept as their decimal text */
    ZT_RECIPE_TOKENS = 32,  /* with INTS: token ids, or tokens (strings, not of digits alone) */
};

typedef struct zt_recipe_key {
    const char *section; /* "train", "offload.aio" */
    const char *key;
    zt_recipe_type type;
    unsigned flags;
    const char *def;          /* the default, written as an override value would be */
    double min, max;          /* numeric range, inclusive unless MIN_OPEN / MAX_OPEN */
    const char *const *names; /* ENUM: the allowed values, indexed by the enum ({"fp32", "bf16", "fp16"}) */
    int nnames;
    const char *path_suffix; /* ENUM: another value ending in this is a path ("" any); NULL: none */
    const char *doc;
    size_t offset;      /* of the value in zt_recipe */
    size_t path_offset; /* ENUM with path_suffix: of the path (char *), the enum then being nnames */
} zt_recipe_key;

/* Fills r: defaults, then the file at path (may be NULL), then the overrides
 * ("section.key=value", typed by the schema; a string needs no quotes, a list
 * is "[a, b]" or one string). On failure r is left empty (nothing to free). */
zt_status zt_recipe_load(zt_recipe *r, const char *path, int noverrides, char *const *overrides);
void zt_recipe_free(zt_recipe *r);

/* Checks what depends on the world: hpz_partition_size divides the world size
 * and the ranks per node. */
zt_status zt_recipe_check_world(const zt_recipe *r, int world, int ranks_per_node);

/* Writes every key with its final value as TOML that zt_recipe_load reads back
 * to the same values; atomically (path.tmp, fsync, rename). */
zt_status zt_recipe_write_resolved(const zt_recipe *r, const char *path);
/* The same text, into *text (free it). */
zt_status zt_recipe_resolved_text(const zt_recipe *r, char **text);

/* Hash (FNV-1a 64) of the keys that define the training data and its order
 * (the ZT_RECIPE_DATA keys); the caller adds the global batch (micro × accumulation ×
 * world), which may be split differently on resume. */
uint64_t zt_recipe_data_hash(const zt_recipe *r);

const zt_recipe_key *zt_recipe_schema(int *n);
/* The schema entry of section.key; NULL when there is none. */
const zt_recipe_key *zt_recipe_find(const char *section, const char *key);
/* The value an enum key reads s as when s is another name of it (Hugging Face's scheduler
 * names: constant_with_warmup is constant); NULL when it is none. */
const char *zt_recipe_enum_alias(const zt_recipe_key *k, const char *s);

/* The allowed range of a numeric key as text: "[0, 1)", ">= 1", "" when unbounded. */
const char *zt_recipe_range_text(const zt_recipe_key *k, char *buf, size_t cap);

/* The text of an enum key's value in r: its name, or its path. */
const char *zt_recipe_enum_text(const zt_recipe *r, const zt_recipe_key *k);
/* The offload section's file settings (offload.nvme_path, offload.aio, offload.max_pinned_bytes). */
zt_offload_io zt_recipe_offload_io(const zt_recipe *r);

/* LoRA is on (lora.r > 0 or lora.adapter set). */
int zt_recipe_lora_on(const zt_recipe *r);
/* lora.target_modules as zt_lora_config's bits (the names are checked when the recipe loads). */
unsigned zt_recipe_lora_targets(const zt_recipe *r);
/* lora.modules_to_save as zt_lora_config's save bits (ZT_LORA_SAVE_*). */
unsigned zt_recipe_lora_saved(const zt_recipe *r);

/* Writes the value of k in r as a TOML value ("bf16" quoted, 2e-05, ["a", "b"]). */
void zt_recipe_write_value(FILE *f, const zt_recipe *r, const zt_recipe_key *k);

/* Writes the Markdown reference of every key (docs/recipe.md). */
zt_status zt_recipe_write_docs(FILE *f);

#endif
