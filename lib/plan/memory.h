/* plan/memory: what a run will need per rank, before anything is loaded
 * (zt validate). Counts the same buffers the trainer allocates: fp32 master
 * weights, the bf16 copy, fp32 gradients, AdamW moments, activations (with and
 * without checkpointing), sharded as the recipe's ZeRO stage says over the world
 * size, and placed on the device, host or NVMe as the offload settings say; with LoRA the
 * frozen base at its dtype (or encoding) and the adapters with their gradients and moments. The
 * sizes come from the modules that allocate (their *_bytes functions: the model,
 * zero, optstate, swap, actstore); this file adds them up. For zt rlhf, the models a run holds
 * beside the policy too: the frozen reference, the reward model, PPO's critic and generation's
 * KV cache (zt_mem_rlhf).
 *
 *     zt_mem_estimate e;
 *     if ((st = zt_memory_estimate(&r, world, ranks_per_node, &e))) return st;
 *     printf("%zu bytes per rank\n", e.total);
 */
#ifndef ZT_PLAN_MEMORY_H
#define ZT_PLAN_MEMORY_H

#include <stddef.h>

#include "lib/core/status.h"
#include "lib/recipe/recipe.h"

/* zt rlhf (rlhf.algorithm, on the data.format it takes): what a run holds beside the policy.
 * GRPO and PPO, through training: the frozen reference (rlhf.reference, else the starting model;
 * none with LoRA, whose reference is the policy's base, nor for GRPO with rlhf.beta = 0) and
 * rlhf.reward_model, each its weights and a micro-batch's forward pass; PPO's critic, trained as
 * the policy is (its weights, gradients, AdamW state and activations, sharded alike; with LoRA its
 * frozen model and adapters of its own); generation's KV cache and sampler scratch (at ZeRO stage
 * 3 the whole model gathered for it, beyond the units training gathers). DPO holds
 * rlhf.reference's model only at the start, for the pass that computes its log-probabilities. */
typedef struct zt_mem_rlhf {
    size_t reference, reward_model, critic, generation;
} zt_mem_rlhf;

typedef struct zt_mem_estimate {
    size_t numel;             /* model parameters */
    int stage;                /* the ZeRO stage that runs (0 in one process without offload.param) */
    size_t params;            /* fp32 masters + 16-bit copy held by this rank (hpZ's slices included) */
    size_t hpz;               /* of which hpZ's secondary slices */
    size_t grads;             /* fp32 gradients held by this rank */
    size_t optimizer;         /* AdamW moments held by this rank */
    size_t activations;       /* with the recipe's activation_checkpointing */
    size_t activations_other; /* with the opposite setting, for comparison */
    size_t runtime;           /* the process itself: code, libraries, GEMM buffers */
    size_t offloaded_host;    /* moved to host memory by [offload] (included in total on the CPU backend) */
    size_t offloaded_nvme;    /* moved to NVMe files by [offload] (not in total) */
    size_t total;             /* what the rank's process will hold */
    size_t io_read, io_write; /* offload bytes read and written per optimizer step (rank 0), these classes': */
    size_t io_optimizer, io_activations;    /* AdamW's moments, the layer inputs: as many each way */
    size_t io_params_read, io_params_write; /* offload.param = "nvme": weights and gradients */
    size_t io_step_read, io_step_write;     /* of all these, what the optimizer step moves (the rest: the passes) */
    /* for the step's time (plan/steptime.h): training FLOPs a rank computes per step (the
     * recompute of checkpointing included), and a micro-batch's MLP product, M × N × K */
    double flops;
    int gemm_m, gemm_n, gemm_k, bf16;
    /* of flops, those of a quantized base's products (LoRA with lora.quantize_base: each weight
     * dequantized a tile at a time, then multiplied), whose rate steptime measures on their own */
    double flops_quantized;
    int qbase_kind, qbase_double_quant;
    /* of flops_quantized, a mixture's experts' products: each expert's weights dequantized whole for
     * the rows routed to it, gemm_m_experts on average (a micro-batch's tokens · k / experts) */
    double flops_quantized_experts;
    int gemm_m_experts;
    size_t io_buffers; /* the staging buffers of that I/O (in the total) */
    /* LoRA (lora.r or lora.adapter): the frozen base as training holds it (in params; at stage 3
     * its slices and gathered units, the encodings' with lora.quantize_base), the elements trained
     * (the adapters and the copies of modules_to_save), and what the process holds while it sets
     * the model up, before the training's buffers: the base read whole (a quantized one is
     * encoded as it is read) (total is the larger of that and the training's, training) */
    size_t base, trained, start, training;
    /* zt rlhf: the models beside the policy (in training and total); DPO's and KTO's reference pass, before
     * the training's buffers: the policy's weights and a forward pass of a micro-batch without
     * checkpointing, on rlhf.reference's model or the policy itself (start is the larger of it and
     * LoRA's start) */
    zt_mem_rlhf rlhf;
    size_t reference_pass;
    /* model.device = "cuda": what the GPU holds (all zero otherwise). The model's arrays (at stage
     * 3 only the units in use: lib/backend/vmm_cuda.h), the activations, AdamW's moments when the
     * optimizer runs there (one process, nothing offloaded), zt rlhf's models (a frozen model's
     * gradient array too: allocated, never filled), and the runtime; host_copies is the host's
     * share then: the staged copies of weights and gradients (lib/zero/zero.h). */
    struct {
        size_t params, grads, optimizer, activations, runtime, total, host_copies;
        zt_mem_rlhf rlhf;
    } device;
} zt_mem_estimate;

zt_status zt_memory_estimate(const zt_recipe *r, int world, int ranks_per_node, zt_mem_estimate *e);

#endif
