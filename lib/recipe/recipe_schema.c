/* The recipe schema: every key, its type, default, range and documentation. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "lib/recipe/recipe.h"
#include "lib/toml/toml.h"

/* The offset of a field, which must have type T (a mismatch does not compile). */
/* a table laid out by hand */
/* clang-format off */
#define AT(field, T) _Generic(((zt_recipe *)0)->field, T: offsetof(zt_recipe, field))
/* An enum field, stored and read as an int: it must be int-sized (a mismatch does not compile). */
#define AT_ENUM(field, T) (AT(field, T) + 0 * sizeof(char[sizeof(((zt_recipe *)0)->field) == sizeof(int) ? 1 : -1]))
#define COUNT(names) ((int)(sizeof names / sizeof names[0]))

#define STR(sec, key, field, flags, def, doc) {sec, key, ZT_RECIPE_STRING, flags, def, 0, 0, NULL, 0, NULL, doc, AT(field, char *), 0}
/* An enum key whose values are the first n of names. */
#define ENUM(sec, key, field, T, flags, def, names, n, doc) \
    {sec, key, ZT_RECIPE_ENUM, flags, def, 0, 0, names, n, NULL, doc, AT_ENUM(field, T), 0}
/* An enum key that also takes a path (one ending in suffix; "" any), kept in path_field. */
#define ENUM_OR_PATH(sec, key, field, T, path_field, flags, def, names, suffix, doc) \
    {sec, key, ZT_RECIPE_ENUM, flags, def, 0, 0, names, COUNT(names), suffix, doc, AT_ENUM(field, T), AT(path_field, char *)}
#define LIST(sec, key, field, flags, def, doc) {sec, key, ZT_RECIPE_LIST, flags, def, 0, 0, NULL, 0, NULL, doc, AT(field, zt_strlist), 0}
#define INT(sec, key, field, flags, def, lo, hi, doc) {sec, key, ZT_RECIPE_INT, flags, def, lo, hi, NULL, 0, NULL, doc, AT(field, int), 0}
#define I64(sec, key, field, flags, def, lo, hi, doc) \
    {sec, key, ZT_RECIPE_INT64, flags, def, lo, hi, NULL, 0, NULL, doc, AT(field, int64_t), 0}
#define FLT(sec, key, field, flags, def, lo, hi, doc) \
    {sec, key, ZT_RECIPE_FLOAT, flags, def, lo, hi, NULL, 0, NULL, doc, AT(field, double), 0}
#define BOOL(sec, key, field, flags, def, doc) {sec, key, ZT_RECIPE_BOOL, flags, def, 0, 0, NULL, 0, NULL, doc, AT(field, bool), 0}
#define TABLE(sec, key, field, flags, def, doc) \
    {sec, key, ZT_RECIPE_TABLE, flags, def, 0, 0, NULL, 0, NULL, doc, AT(field, char *), 0}

#define PATH ZT_RECIPE_PATH
#define DATA ZT_RECIPE_DATA
#define INTS ZT_RECIPE_INTS
#define TOKENS (ZT_RECIPE_INTS | ZT_RECIPE_TOKENS)
#define LO_OPEN ZT_RECIPE_MIN_OPEN
#define HI_OPEN ZT_RECIPE_MAX_OPEN
#define NOMAX INFINITY
#define IMAX ((double)INT_MAX)

/* The values of the keys only the recipe's readers know (recipe.h); the other enum keys
 * take the names of the modules they configure. */
const char *const zt_resume_names[ZT_RESUME_PATH] = {"auto", "never"};
const char *const zt_rlhf_algorithm_names[5] = {"dpo", "reward", "ppo", "grpo", "kto"};
const char *const zt_rlhf_loss_names[19] = {"auto",     "grpo",      "bnpo",     "dr_grpo",  "dapo",     "sigmoid",
                                            "ipo",      "hinge",     "robust",   "exo_pair", "nca_pair", "bco_pair",
                                            "sppo_hard", "apo_zero", "apo_down", "simpo",    "orpo",     "kto",
                                            "apo_zero_unpaired"};
const char *const zt_rlhf_scale_names[3] = {"group", "batch", "none"};

static const zt_recipe_key schema[] = {
    STR("model", "path", model.path, PATH | DATA, "",
        "HF-format model directory: config.json, *.safetensors (+ index), tokenizer files; required"),
    ENUM("model", "dtype", model.dtype, zt_dtype, 0, "bf16", zt_dtype_names, 3,
         "compute dtype and 16-bit weight copy; master weights stay fp32"),
    BOOL("model", "activation_checkpointing", model.activation_checkpointing, 0, "true",
         "keep only each layer's input and recompute the rest in the backward pass"),
    ENUM("model", "device", model.device, zt_device, 0, "auto", zt_device_names, 3,
         "where to compute; auto takes a GPU when there is one"),

    STR("tokenizer", "path", tokenizer.path, PATH | DATA, "",
        "tokenizer directory or file (tokenizer.json preferred over tokenizer.model); empty: model.path"),
    ENUM_OR_PATH("tokenizer", "chat_template", tokenizer.chat_template, zt_chat_template, tokenizer.chat_template_path,
                 PATH | DATA, "auto", zt_chat_template_names, ".jinja",
                 "chat template; auto takes the model's: chat_template.jinja, else tokenizer_config.json's, else chat_template.json's (an error if none has one)"),
    TABLE("tokenizer", "chat_template_kwargs", tokenizer.chat_template_kwargs, DATA, "{}",
          "more variables for the chat template, as apply_chat_template(**kwargs) passes them: "
          "{enable_thinking = false} for Qwen3's answers without reasoning; a line's own \"chat_template_kwargs\" "
          "object adds to them"),

    LIST("data", "train", data.train, PATH | DATA, "[]",
         "training data: a JSONL (or JSON array) file or a list of them; required for training"),
    LIST("data", "valid", data.valid, PATH | DATA, "[]", "validation data: a JSONL (or JSON array) file or a list of them"),
    FLT("data", "valid_split", data.valid_split, DATA, "0", 0, 0.5,
        "fraction of data.train held out for validation, instead of data.valid"),
    ENUM("data", "format", data.format, zt_data_format, DATA, "chat", zt_data_format_names, 8,
         "the JSONL fields: see the data formats in docs"),
    INT("data", "max_length", data.max_length, DATA, "2048", 1, IMAX, "tokens per sequence; longer examples are split or truncated"),
    BOOL("data", "packing", data.packing, DATA, "true", "pack examples into full sequences (never attending across documents)"),
    ENUM("data", "train_on", data.train_on, zt_train_on, DATA, "assistant", zt_train_on_names, 3,
         "which tokens carry loss in chat data: assistant turns, all, the last assistant turn"),
    BOOL("data", "shuffle", data.shuffle, DATA, "true", "shuffle examples; false keeps file order"),
    STR("data", "cache_dir", data.cache_dir, PATH, "~/.cache/zt", "tokenized cache and DPO reference log-probs (locked while built)"),
    BOOL("data", "skip_bad_lines", data.skip_bad_lines, DATA, "false",
         "skip and count malformed JSONL lines instead of stopping at the first"),
    BOOL("data", "split_special_tokens", data.split_special_tokens, DATA, "false",
         "special tokens written in text, prompts and answers (<|im_start|>) are encoded as plain text, not as their ids"),

    FLT("train", "num_train_epochs", train.num_train_epochs, 0, "1", 0, NOMAX, "passes over the training data; max_steps > 0 takes precedence"),
    I64("train", "max_steps", train.max_steps, 0, "0", 0, NOMAX, "optimizer steps to run; 0: from num_train_epochs"),
    INT("train", "micro_batch_size", train.micro_batch_size, 0, "4", 1, IMAX, "sequences per rank per forward/backward pass"),
    INT("train", "gradient_accumulation_steps", train.gradient_accumulation_steps, 0, "1", 1, IMAX,
        "micro-batches per optimizer step"),
    FLT("train", "learning_rate", train.learning_rate, 0, "2e-5", 0, NOMAX, "peak learning rate"),
    ENUM("train", "lr_scheduler_type", train.lr_scheduler_type, zt_schedule_type, 0, "cosine", zt_schedule_names, 7,
         "learning rate schedule after warmup (wsd: warmup, stable, decay); Hugging Face's names in "
         "parentheses read as the schedule named after them (constant keeps a warmup that is set, as "
         "constant_with_warmup; Hugging Face's plain constant has none)"),
    TABLE("train", "lr_scheduler_kwargs", train.lr_scheduler_kwargs, 0, "{}",
          "Hugging Face's lr_scheduler_kwargs: num_cycles (cosine: 0.5, cosine_with_restarts: 1), power and "
          "lr_end (polynomial: 1 and 1e-7), min_lr_rate or min_lr (cosine, for min_lr_ratio); inverse_sqrt takes none "
          "(its timescale is the warmup steps, or 10000 without, as get_scheduler passes it none)"),
    I64("train", "warmup_steps", train.warmup_steps, 0, "0", 0, NOMAX, "linear warmup steps (or warmup_ratio, not both)"),
    FLT("train", "warmup_ratio", train.warmup_ratio, 0, "0", 0, 1, "warmup as a fraction of all steps (or warmup_steps, not both)"),
    FLT("train", "decay_ratio", train.decay_ratio, 0, "0.1", 0, 1, "wsd: fraction of steps spent decaying"),
    FLT("train", "min_lr_ratio", train.min_lr_ratio, 0, "0", 0, 1, "the schedule ends at learning_rate * min_lr_ratio"),
    FLT("train", "weight_decay", train.weight_decay, 0, "0", 0, NOMAX, "AdamW weight decay; not applied to norm weights and biases"),
    ENUM("train", "optim", train.optim, zt_optim_kind, 0, "adamw_torch", zt_optim_names, 2,
         "AdamW with fp32 moments, or adamw_8bit: moments in 8 bits a block of 256 as bitsandbytes' AdamW8bit "
         "(tensors under 4096 elements keep fp32; needs offload.optimizer = \"none\"); Hugging Face's "
         "adamw_torch_fused and paged_adamw_32bit read as adamw_torch, adamw_bnb_8bit and paged_adamw_8bit as "
         "adamw_8bit (paging is CUDA's unified memory, which zt does not use)"),
    FLT("train", "adam_beta1", train.adam_beta1, HI_OPEN, "0.9", 0, 1, "AdamW beta1"),
    FLT("train", "adam_beta2", train.adam_beta2, HI_OPEN, "0.95", 0, 1, "AdamW beta2"),
    FLT("train", "adam_epsilon", train.adam_epsilon, LO_OPEN, "1e-8", 0, NOMAX, "AdamW epsilon"),
    FLT("train", "max_grad_norm", train.max_grad_norm, 0, "1.0", 0, NOMAX, "clip the global gradient norm to this; 0: no clipping"),
    FLT("train", "neftune_noise_alpha", train.neftune_noise_alpha, 0, "0", 0, NOMAX, "NEFTune: uniform noise in [-a, a), a = alpha / sqrt(row length * hidden size), added to the embeddings in training passes (the paper uses 5); 0: off"),
    I64("train", "seed", train.seed, DATA, "42", 0, NOMAX, "seed for initialization, shuffling, dropout and sampling"),
    I64("train", "logging_steps", train.logging_steps, 0, "10", 1, NOMAX, "log metrics every N optimizer steps"),
    I64("train", "eval_steps", train.eval_steps, 0, "0", 0, NOMAX, "evaluate every N optimizer steps; 0: never during training"),
    I64("train", "save_steps", train.save_steps, 0, "0", 0, NOMAX, "checkpoint every N optimizer steps; 0: no periodic checkpoints"),
    INT("train", "save_total_limit", train.save_total_limit, 0, "2", 0, IMAX, "checkpoints to keep (oldest removed first); 0: keep all"),
    ENUM_OR_PATH("train", "resume", train.resume, zt_resume, train.resume_path, PATH, "auto", zt_resume_names, "",
         "auto: from the newest complete checkpoint in output.dir; never; or a checkpoint directory"),
    BOOL("train", "resume_force", train.resume_force, 0, "false", "resume even if the data-defining keys changed"),
    FLT("train", "collective_timeout_s", train.collective_timeout_s, LO_OPEN, "300", 0, NOMAX,
        "seconds a collective may wait; a lost rank ends every rank within this bound"),

    BOOL("eval", "generate", eval.generate, 0, "false", "also generate answers and report exact-match accuracy"),
    INT("eval", "max_new_tokens", eval.max_new_tokens, 0, "64", 1, IMAX, "generation limit per answer"),
    I64("eval", "max_examples", eval.max_examples, 0, "0", 0, NOMAX, "examples to evaluate; 0: all"),

    INT("zero", "stage", zero.stage, 0, "3", 0, 3, "ZeRO stage: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters sharded"),
    BOOL("zero", "quantized_weights", zero.quantized_weights, 0, "false", "ZeRO++ qwZ: int8 block-quantized weight all-gather"),
    INT("zero", "quant_block_size", zero.quant_block_size, 0, "128", 1, IMAX, "elements per quantization block (qwZ and qgZ)"),
    INT("zero", "hpz_partition_size", zero.hpz_partition_size, 0, "1", 1, IMAX,
        "ZeRO++ hpZ: ranks holding a secondary weight copy; 1: off, ranks per node is the usual setting"),
    BOOL("zero", "quantized_gradients", zero.quantized_gradients, 0, "false",
         "ZeRO++ qgZ: int4 gradients, hierarchical all-to-all reduce-scatter"),
    BOOL("zero", "quantized_gradients_error_feedback", zero.quantized_gradients_error_feedback, 0, "false",
         "qgZ: carry the quantization error into the next step"),
    BOOL("zero", "measure_quantization", zero.measure_quantization, 0, "false",
         "log what qwZ and qgZ lose (quant_error_* in metrics.jsonl); costs qgZ an exact reduction too"),
    BOOL("zero", "device_collectives", zero.device_collectives, 0, "true",
         "several ranks on GPUs reduce and gather the device arrays (NCCL, else through host memory) and keep the "
         "optimizer on the GPU (not with ZeRO++); false: host copies, collectives and AdamW on the host"),
    INT("zero", "prefetch_layers", zero.prefetch_layers, 0, "1", 0, IMAX, "layers gathered ahead of the one computing"),
    INT("zero", "embedding_tiles", zero.embedding_tiles, 0, "1", 1, 65536,
        "memory-centric tiling: stage 3 gathers an untied embedding in this many vocabulary tiles, one at a time"),
    INT("zero", "mlp_tiles", zero.mlp_tiles, 0, "1", 1, 65536,
        "memory-centric tiling: stage 3 gathers each MLP in this many row tiles of its gate/up and of its down weight"),
    INT("zero", "head_tiles", zero.head_tiles, 0, "1", 1, 65536,
        "memory-centric tiling: stage 3 gathers an untied LM head in this many vocabulary tiles, one at a time"),
    I64("zero", "reduce_bucket_size", zero.reduce_bucket_size, 0, "50000000", 1, NOMAX, "elements per gradient reduction bucket"),

    ENUM("offload", "optimizer", offload.optimizer, zt_offload_tier, 0, "none", zt_offload_tier_names, 4,
         "where the optimizer state lives"),
    ENUM("offload", "param", offload.param, zt_offload_tier, 0, "none", zt_offload_tier_names, 4,
         "where parameters live (auto: placement from bandwidth); needs zero.stage = 3"),
    ENUM("offload", "activations", offload.activations, zt_offload_tier, 0, "none", zt_offload_tier_names, 3,
         "where checkpointed layer inputs live"),
    LIST("offload", "nvme_path", offload.nvme_path, PATH, "[\"/local_nvme\"]", "NVMe directory or list of them (files striped across)"),
    I64("offload", "max_pinned_bytes", offload.max_pinned_bytes, 0, "4294967296", 0, NOMAX, "bound on pinned/locked staging buffers"),
    I64("offload.aio", "block_size", offload.aio.block_size, 0, "1048576", 4096, NOMAX, "bytes per I/O request; a multiple of 4096"),
    INT("offload.aio", "queue_depth", offload.aio.queue_depth, 0, "32", 1, 32768, "I/O requests in flight"),

    INT("lora", "r", lora.r, 0, "0", 0, 65536,
        "adapter rank; LoRA is on when r > 0 (or lora.adapter is set): the base model is frozen and only the adapters train"),
    FLT("lora", "alpha", lora.alpha, LO_OPEN, "8", 0, NOMAX, "the adapters' outputs are scaled by alpha / r (alpha / sqrt(r) with use_rslora)"),
    FLT("lora", "dropout", lora.dropout, HI_OPEN, "0", 0, 1, "dropout on each adapter's input, in training passes"),
    LIST("lora", "target_modules", lora.target_modules, 0, "[\"q_proj\", \"v_proj\"]",
         "the linear layers with adapters: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (Phi-3: "
         "qkv_proj, o_proj, gate_up_proj, down_proj; GLM: gate_up_proj; a mixture of experts: every expert's "
         "gate_proj, up_proj, down_proj (Qwen2-MoE's shared expert's too), Mixtral's w1, w3, w2, the router, gate, "
         "and Qwen2-MoE's shared_expert_gate), or \"all-linear\" (the model's)"),
    LIST("lora", "modules_to_save", lora.modules_to_save, 0, "[]",
         "whole modules trained beside the adapters (PEFT's modules_to_save): embed_tokens, lm_head; both for a chat "
         "template whose tokens the vocabulary lacks (their new rows train)"),
    LIST("lora", "trainable_token_indices", lora.trainable_token_indices, TOKENS, "[]",
         "rows of the embedding trained beside the adapters, the rest frozen (PEFT's trainable_token_indices; a tied LM "
         "head's rows too), by id or as the tokenizer's tokens (\"<|im_start|>\"): e.g. a chat template's tokens, new or "
         "never trained"),
    LIST("lora", "layers_to_transform", lora.layers_to_transform, INTS, "[]",
         "the layers with adapters (PEFT's layers_to_transform: 0 is the first); empty: every layer"),
    BOOL("lora", "use_rslora", lora.use_rslora, 0, "false", "rank-stabilised LoRA: scale by alpha / sqrt(r)"),
    FLT("lora", "loraplus_lr_ratio", lora.loraplus_lr_ratio, 0, "0", 0, NOMAX, "LoRA+: B (and DoRA's magnitudes) learn at learning_rate times this, A at learning_rate (the paper suggests 16); 0: off"),
    ENUM("lora", "init_lora_weights", lora.init_lora_weights, zt_lora_init, 0, "default", zt_lora_init_names, 2,
         "A starts Kaiming-uniform (default, PEFT's true) or N(0, 1/r²) (gaussian); B starts at 0"),
    ENUM("lora", "method", lora.method, zt_lora_method, 0, "lora", zt_lora_method_names, 2,
         "the kind of adapter: \"lora\", or \"dora\" (weight-decomposed: a trained magnitude per output, PEFT's use_dora)"),
    STR("lora", "adapter", lora.adapter, PATH, "",
        "a PEFT adapter directory to start from; its adapter_config.json sets r, alpha, dropout, target_modules, use_rslora and the method (use_dora)"),
    ENUM("lora", "quantize_base", lora.quantize_base, zt_qbase_kind, 0, "none", zt_qbase_kind_names, 3,
         "QLoRA: the frozen base's linear weights held as NF4 (64-element blocks) or int8 (per row), dequantized tile by tile in each product; CPU only"),
    BOOL("lora", "double_quant", lora.double_quant, 0, "false",
         "with quantize_base = \"nf4\": the blocks' absmax values quantized again to 8 bits (blocks of 256, their mean subtracted)"),

    STR("output", "dir", output.dir, PATH, "", "run directory; empty: runs/NAME in the current directory, NAME being the recipe file name without .toml"),
    BOOL("output", "overwrite", output.overwrite, 0, "false", "allow resume = \"never\" into a non-empty directory"),
    BOOL("output", "tensorboard", output.tensorboard, 0, "true", "write TensorBoard scalars"),

    ENUM("rlhf", "algorithm", rlhf.algorithm, zt_rlhf_algorithm, 0, "dpo", zt_rlhf_algorithm_names, 5, "preference or reinforcement learning algorithm"),
    FLT("rlhf", "beta", rlhf.beta, 0, "0.1", 0, NOMAX, "DPO, KTO: strength of the preference (their β); GRPO: KL weight, 0 drops the reference model"),
    ENUM("rlhf", "loss_type", rlhf.loss_type, zt_rlhf_loss, 0, "auto", zt_rlhf_loss_names, 19,
         "GRPO, how the token losses are averaged, as TRL's: grpo (auto: each completion's mean, then over completions), "
         "bnpo (over each micro-batch's tokens), dr_grpo (over completions times max_new_tokens), dapo (over the step's "
         "tokens); DPO, TRL's loss of a pair: sigmoid (DPO, auto), ipo, hinge, robust, exo_pair, nca_pair, bco_pair, "
         "sppo_hard, apo_zero, apo_down (docs/rlhf.md); simpo (SimPO: no reference model, averaged log-probabilities, "
         "margin simpo_gamma; beta about 2), orpo (ORPO: no reference model, the chosen answers' NLL plus beta times "
         "the odds-ratio term); KTO: kto (auto), apo_zero_unpaired (no KL term)"),
    FLT("rlhf", "desirable_weight", rlhf.desirable_weight, LO_OPEN, "1.0", 0, NOMAX, "KTO: the weight of a desirable example's loss"),
    FLT("rlhf", "undesirable_weight", rlhf.undesirable_weight, LO_OPEN, "1.0", 0, NOMAX, "KTO: the weight of an undesirable example's loss"),
    FLT("rlhf", "simpo_gamma", rlhf.simpo_gamma, 0, "0.5", 0, NOMAX, "SimPO: the target reward margin γ (loss_type = \"simpo\")"),
    ENUM("rlhf", "scale_rewards", rlhf.scale_rewards, zt_rlhf_scale, 0, "group", zt_rlhf_scale_names, 3,
         "GRPO: advantages (reward - group mean) divided by the group's reward std (group), the step's (batch), or "
         "not (none, Dr. GRPO)"),
    BOOL("rlhf", "mask_truncated_completions", rlhf.mask_truncated_completions, 0, "false",
         "GRPO: completions cut off by max_new_tokens (no end-of-turn token) add nothing to the loss (DAPO)"),
    FLT("rlhf", "label_smoothing", rlhf.label_smoothing, HI_OPEN, "0.0", 0, 0.5, "DPO: assumed fraction of flipped preference labels (sigmoid loss)"),
    INT("rlhf", "ppo_epochs", rlhf.ppo_epochs, 0, "1", 1, IMAX, "PPO / GRPO: optimizer passes over each batch of generations"),
    STR("rlhf", "reference", rlhf.reference, PATH, "", "reference model directory; empty: the starting model"),
    STR("rlhf", "reward_model", rlhf.reward_model, PATH, "", "reward model directory (or reward_command, not both)"),
    STR("rlhf", "reward_command", rlhf.reward_command, 0, "",
        "reward program: JSONL in on stdin, one number per line out (or reward_model, not both)"),
    FLT("rlhf", "reward_timeout_s", rlhf.reward_timeout_s, LO_OPEN, "60", 0, NOMAX, "seconds the reward program may take per answer"),
    INT("rlhf", "num_generations", rlhf.num_generations, 0, "8", 1, IMAX, "GRPO group size: completions per prompt"),
    INT("rlhf", "max_new_tokens", rlhf.max_new_tokens, 0, "128", 1, IMAX, "generation limit per completion"),
    FLT("rlhf", "temperature", rlhf.temperature, 0, "1.0", 0, NOMAX, "sampling temperature; 0: greedy"),
    FLT("rlhf", "top_p", rlhf.top_p, LO_OPEN, "1.0", 0, 1, "nucleus sampling threshold"),
    FLT("rlhf", "kl_coef", rlhf.kl_coef, 0, "0.1", 0, NOMAX, "PPO: KL penalty against the reference"),
    FLT("rlhf", "gamma", rlhf.gamma, 0, "1.0", 0, 1, "PPO: discount factor"),
    FLT("rlhf", "lam", rlhf.lam, 0, "0.95", 0, 1, "PPO: GAE lambda"),
    FLT("rlhf", "cliprange", rlhf.cliprange, 0, "0.2", 0, NOMAX, "PPO / GRPO: policy ratio clip"),
    FLT("rlhf", "cliprange_high", rlhf.cliprange_high, 0, "0", 0, NOMAX,
        "GRPO: the ratio's upper clip, 1 + this (TRL's epsilon_high; DAPO's clip-higher uses 0.28); 0: cliprange"),
    FLT("rlhf", "cliprange_value", rlhf.cliprange_value, 0, "0.2", 0, NOMAX, "PPO: value function clip"),
    FLT("rlhf", "reward_clip", rlhf.reward_clip, 0, "5.0", 0, NOMAX, "PPO: rewards clipped to [-reward_clip, reward_clip]; 0: off"),
    FLT("rlhf", "critic_learning_rate", rlhf.critic_learning_rate, 0, "0", 0, NOMAX,
        "PPO: the critic's peak learning rate (train.* schedule); 0: train.learning_rate"),
};
/* clang-format on */

const zt_recipe_key *zt_recipe_schema(int *n)
{
    *n = (int)(sizeof schema / sizeof schema[0]);
    return schema;
}

/* Other names of enum values, Hugging Face's: read as the value they stand for (which is written back). */
static const struct {
    const char *section, *key, *alias, *value;
} aliases[] = {
    {"train", "lr_scheduler_type", "constant_with_warmup", "constant"},
    {"train", "lr_scheduler_type", "cosine_with_min_lr", "cosine"},
    {"train", "lr_scheduler_type", "warmup_stable_decay", "wsd"},
    {"train", "optim", "adamw_torch_fused", "adamw_torch"},
    {"train", "optim", "paged_adamw_32bit", "adamw_torch"},
    {"train", "optim", "adamw_bnb_8bit", "adamw_8bit"},
    {"train", "optim", "paged_adamw_8bit", "adamw_8bit"},
};

const char *zt_recipe_enum_alias(const zt_recipe_key *k, const char *s)
{
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(aliases[i].section, k->section) && !strcmp(aliases[i].key, k->key) && !strcmp(aliases[i].alias, s))
            return aliases[i].value;
    return NULL;
}

const zt_recipe_key *zt_recipe_find(const char *section, const char *key)
{
    for (size_t i = 0; i < sizeof schema / sizeof schema[0]; i++)
        if (!strcmp(schema[i].section, section) && !strcmp(schema[i].key, key)) return &schema[i];
    return NULL;
}

const char *zt_recipe_enum_text(const zt_recipe *r, const zt_recipe_key *k)
{
    int v = *(const int *)((const char *)r + k->offset);
    if (v < k->nnames) return k->names[v];
    return *(char *const *)((const char *)r + k->path_offset);
}

zt_offload_io zt_recipe_offload_io(const zt_recipe *r)
{
    return (zt_offload_io){
        .nvme_paths = (const char *const *)r->offload.nvme_path.items,
        .npaths = r->offload.nvme_path.n,
        .block_size = (size_t)r->offload.aio.block_size,
        .queue_depth = r->offload.aio.queue_depth,
        .max_pinned_bytes = (size_t)r->offload.max_pinned_bytes,
    };
}

const char *zt_recipe_range_text(const zt_recipe_key *k, char *buf, size_t cap)
{
    bool lo_open = k->flags & ZT_RECIPE_MIN_OPEN, hi_open = k->flags & ZT_RECIPE_MAX_OPEN;
    bool has_hi = isfinite(k->max) && !(k->type == ZT_RECIPE_INT && k->max >= INT_MAX);
    buf[0] = 0;
    if (k->type != ZT_RECIPE_INT && k->type != ZT_RECIPE_INT64 && k->type != ZT_RECIPE_FLOAT) return buf;
    if (has_hi) snprintf(buf, cap, "%c%.15g, %.15g%c", lo_open ? '(' : '[', k->min, k->max, hi_open ? ')' : ']');
    else snprintf(buf, cap, "%s %.15g", lo_open ? ">" : ">=", k->min);
    return buf;
}

/* A table cell: '|' would end the cell, '*' start emphasis. */
static void write_cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|' || *s == '*') fputc('\\', f);
        fputc(*s, f);
    }
}

static void write_key_row(FILE *f, const zt_recipe_key *k)
{
    static const char *type_names[] = {"string", "string", "list of strings", "int", "int", "float", "bool", "table"};
    const char *type = type_names[k->type];
    if (k->flags & ZT_RECIPE_PATH) type = k->type == ZT_RECIPE_LIST ? "path or list of paths" : "path";
    if (k->flags & ZT_RECIPE_INTS) type = k->flags & ZT_RECIPE_TOKENS ? "list of token ids or tokens" : "list of ints";
    if (k->type == ZT_RECIPE_ENUM) type = "string";
    fprintf(f, "| `%s` | %s | `", k->key, type);
    if (k->type == ZT_RECIPE_STRING || k->type == ZT_RECIPE_ENUM) zt_toml_write_string(f, k->def, strlen(k->def));
    else write_cell(f, k->def);
    fputs("` | ", f);
    if (k->type == ZT_RECIPE_ENUM) {
        for (int i = 0; i < k->nnames; i++) fprintf(f, "%s`%s`", i ? ", " : "", k->names[i]);
        for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
            if (!strcmp(aliases[i].section, k->section) && !strcmp(aliases[i].key, k->key))
                fprintf(f, " (`%s`: `%s`)", aliases[i].alias, aliases[i].value);
        if (k->path_suffix) fprintf(f, k->path_suffix[0] ? ", or a `%s` file" : ", or a path%s", k->path_suffix);
    } else {
        char range[64];
        write_cell(f, zt_recipe_range_text(k, range, sizeof range));
    }
    fputs(" | ", f);
    write_cell(f, k->doc);
    fputs(k->flags & ZT_RECIPE_DATA ? " *(data)* |\n" : " |\n", f);
}

zt_status zt_recipe_write_docs(FILE *f)
{
    fputs("# Recipe keys\n\n"
          "<!-- Generated from the schema in lib/recipe/recipe_schema.c: do not edit. To regenerate,\n"
          "     run `ZT_UPDATE_DOCS=1 build/tests/test_recipe` from the repository root. -->\n\n"
          "A recipe is a TOML file with the sections below; every key is optional and has the default shown.\n"
          "Any key can be given on the command line after the recipe as `section.key=value`\n"
          "(`train.learning_rate=1e-4`, `offload.aio.queue_depth=64`): the value is typed by the schema, a\n"
          "string needs no quotes and a list is `[a, b]` or a single string.\n\n"
          "Relative paths in a recipe resolve against the recipe file's directory; paths given on the command\n"
          "line resolve against the current directory; `~/` is the home directory. `zt` writes the resolved\n"
          "recipe, every key with its final value and absolute paths, to `recipe.resolved.toml` in the run\n"
          "directory.\n\n"
          "Checks between keys: `train.warmup_steps` and `train.warmup_ratio` are not both set;\n"
          "`train.num_train_epochs` or `train.max_steps` is above 0; `data.valid` and `data.valid_split` are\n"
          "not both set; `rlhf.reward_model` and `rlhf.reward_command` are not both set; `offload.param` (cpu, nvme) "
          "needs\n"
          "`zero.stage = 3` (and `offload.param = \"nvme\"` needs `offload.optimizer = \"nvme\"`, except with LoRA, "
          "whose swap file holds the frozen base alone), and so do ZeRO++'s "
          "`zero.quantized_weights`, `zero.hpz_partition_size` above 1\n"
          "and `zero.quantized_gradients`, and memory-centric tiling (`zero.embedding_tiles`, `zero.mlp_tiles`,\n"
          "`zero.head_tiles` above 1); `zero.quantized_gradients_error_feedback` needs\n"
          "`zero.quantized_gradients`; `offload.aio.block_size` is a multiple of 4096;\n"
          "`zero.hpz_partition_size` divides the world size and the ranks per node; with LoRA on (`lora.r` above 0\n"
          "or `lora.adapter` set) `lora.r` and `lora.adapter` are not both set, nor `lora.method` and `lora.adapter`\n"
          "(the adapter's `use_dora` is its method), nor `lora.modules_to_save` or `lora.trainable_token_indices`\n"
          "and `lora.adapter`, every `lora.target_modules` and `lora.modules_to_save` name is known,\n"
          "`lora.trainable_token_indices` needs LoRA on, `zero.quantized_gradients` is off (a LoRA\n"
          "run reduces the adapters' gradients alone, exactly); once the world is known, a base sharded at stage 3\n"
          "(several ranks, or `offload.param`) has DoRA's norms out of MLP tiles\n"
          "(`zero.mlp_tiles`); `lora.quantize_base` other than `none` needs LoRA on, and `lora.double_quant` needs\n"
          "`lora.quantize_base = \"nf4\"`; `lora.quantize_base` is not set with `lora.method = \"dora\"`,\n"
          "`zero.quantized_weights` nor `zero.mlp_tiles` above 1.\n\n"
          "Resuming a run requires the keys marked *(data)* to be unchanged (and the same global batch size).\n",
          f);
    const char *section = "";
    for (size_t i = 0; i < sizeof schema / sizeof schema[0]; i++) {
        const zt_recipe_key *k = &schema[i];
        if (strcmp(k->section, section)) {
            section = k->section;
            fprintf(f,
                    "\n## [%s]\n\n| key | type | default | allowed | description |\n| --- | --- | --- | --- | --- |\n",
                    section);
        }
        write_key_row(f, k);
    }
    if (fflush(f) || ferror(f)) return zt_fail(ZT_EIO, "cannot write the recipe docs");
    return ZT_OK;
}
