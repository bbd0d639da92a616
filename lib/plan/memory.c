#include "memory.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/model/llama.h"
#include "lib/model/open.h"
#include "lib/model/qbase.h"
#include "lib/model/sample.h"
#include "lib/offload/actstore.h"
#include "lib/optim/adamw8bit.h"
#include "lib/zero/optstate.h"
#include "lib/zero/zero.h"
#include "options.h"

/* The process beyond zt's buffers, measured on this kind of machine: the binary, its
 * libraries and small allocations (about 22 MB resident: oneDNN's library 4.9 MB of it, touched
 * as it loads whether or not a product runs there, OpenBLAS's 1.8, libstdc++, OpenSSL and GnuTLS
 * 1-1.5 each; a 2-layer model's run on a Zen 4, 2026-12-08), and OpenBLAS's per-thread packing
 * buffers, which grow with the largest GEMM operand up to about 16 MB. */
enum { RUNTIME_BASE = 22 << 20, PACK_CAP = 16 << 20 };
/* On a GPU: the CUDA context, cuBLASLt's workspace and the kernels' scratch (the bf16 attention
 * takes a bf16 copy of q, k and v), about what an H200 showed beyond the arrays counted here. */
static const size_t CUDA_RUNTIME = (size_t)1 << 30;

static size_t shard(size_t bytes, int world) { return (bytes + world - 1) / world; }

static size_t blocks(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

/* zt rlhf's algorithm where the recipe is one of its runs (the data format it takes: pretrain
 * and sft refuse "preference", "unpaired" and "prompt", and leave rlhf.algorithm at "dpo"), else -1 */
static int rlhf_algorithm(const zt_recipe *r)
{
    zt_rlhf_algorithm a = r->rlhf.algorithm;
    zt_data_format f = r->data.format;
    if (a == ZT_RLHF_KTO) return f == ZT_DATA_PREFERENCE || f == ZT_DATA_UNPAIRED ? (int)a : -1;
    int pairs = a == ZT_RLHF_DPO || a == ZT_RLHF_REWARD;
    return f == (pairs ? ZT_DATA_PREFERENCE : ZT_DATA_PROMPT) ? (int)a : -1;
}

/* A micro-batch's rows: two a preference pair (lib/train/rlhf/pref.c), else micro_batch_size (KTO:
 * its mismatched rows are a pass of their own) */
static int micro_rows(const zt_recipe *r)
{
    int a = rlhf_algorithm(r);
    return r->train.micro_batch_size * (a == ZT_RLHF_DPO || a == ZT_RLHF_REWARD ? 2 : 1);
}

/* KTO's mismatched rows (pref.c): each micro-batch passes them forward once more, no backward */
static int kto_kl_pass(const zt_recipe *r)
{
    return rlhf_algorithm(r) == ZT_RLHF_KTO && r->rlhf.loss_type != ZT_RLHF_LOSS_APO_ZERO_UNPAIRED;
}

/* The model in directory dir as a run opens it (lib/model/open.c), shaped without its weights:
 * with score_head a score-head model, its vocabulary grown to `vocab` when smaller (PPO's critic
 * takes the policy's tokens), and where q is given (storage for the encoding, which m then points
 * at) its linear weights encoded as lora.quantize_base says. On a GPU without the bf16 copies of
 * the layers' inputs, as the CUDA backend's model has it. */
static zt_status shape_model(const zt_recipe *r, const char *dir, int score_head, int vocab, zt_qbase *q, zt_llama *m)
{
    char path[4096];
    zt_llama_config cfg;
    zt_status st = zt_path_join(path, sizeof path, dir, "config.json");
    if (st || (st = zt_llama_config_load(&cfg, path))) return st;
    if (score_head) zt_model_score_config(&cfg);
    if (cfg.vocab_size < vocab) cfg.vocab_size = vocab;
    zt_dtype dtype = r->model.dtype == ZT_F16 ? ZT_BF16 : r->model.dtype;
    if (q)
        *q = (zt_qbase){.kind = zt_recipe_lora_on(r) ? r->lora.quantize_base : ZT_QBASE_NONE,
                        .double_quant = r->lora.quantize_base == ZT_QBASE_NF4 && r->lora.double_quant};
    st = q && q->kind != ZT_QBASE_NONE ? zt_llama_shape_quantized(m, &cfg, zt_backend_cpu(), dtype, q)
                                       : zt_llama_shape(m, &cfg, zt_backend_cpu(), dtype);
    return st;
}

/* How many times the backward pass gathers unit u (lib/model/llama.c, lib/zero/zero3.c): never
 * the embedding's units, whose backward needs no weights, nor the final norm's (and untiled
 * head's), kept from its forward; twice a tiled MLP's tile with checkpointing (the recompute,
 * then its backward) unless the prefetch of the layer above took it, which the recompute then
 * keeps (the last prefetch_layers units of each layer); once any other unit. */
static int backward_reads(const zt_recipe *r, const zt_llama *m, int u)
{
    int first = zt_llama_layer_unit(m, 0), head = zt_llama_head_unit(m), per = m->L ? (head - first) / m->L : 1;
    if (u < first || u == head) return 0;
    if (u > head || per == 1 || (u - first) % per == 0 || !r->model.activation_checkpointing) return 1;
    int from_end = per - 1 - (u - first) % per;
    return from_end < r->zero.prefetch_layers ? 1 : 2;
}

/* offload.param = "nvme" (lib/zero/zero3_nvme.c): rank 0's slices of the weights, the gradient
 * and each moment take R bytes of the swap file, each unit's slice rounded to whole blocks,
 * and a step of A micro-batches moves: the weights read for every forward (R) and backward
 * (backward_reads; nothing with hpZ, whose backward gathers come from memory; the head's row
 * chunks taken as one) and the gradient written, every micro-batch; the gradient read back to
 * add to from the second micro-batch on; then AdamW reads weights, gradient and moments and
 * writes weights and moments. */
static void param_io(const zt_recipe *r, const zt_llama *m, int world, zt_mem_estimate *e)
{
    size_t R = 0, backward = 0, off, count;
    int units = zt_llama_units(m);
    for (int u = 0; u < units; u++) {
        zt_llama_unit_range(m, u, &off, &count);
        size_t mine = blocks((count + world - 1) / world * 4);
        if (r->zero.hpz_partition_size <= 1) backward += (size_t)backward_reads(r, m, u) * mine;
        R += mine;
    }
    size_t A = (size_t)r->train.gradient_accumulation_steps;
    e->io_optimizer = 2 * R;
    /* KTO's mismatched rows: one more forward a micro-batch, which reads the weights again */
    e->io_params_read = A * (R + backward) + (A - 1) * R + 2 * R + (kto_kl_pass(r) ? A * R : 0);
    e->io_params_write = A * R + R;
    e->io_step_read = 2 * R, e->io_step_write = R;
}

static void device_estimate(const zt_llama *m, int stage, int world, int staged, size_t gathered, size_t gathered_grads,
                            zt_mem_estimate *e)
{
    size_t P = m->numel;
    e->device.params = stage >= 3 ? gathered : zt_llama_weight_bytes(m, P);
    e->device.grads = stage >= 3 ? gathered_grads : P * 4;
    if (stage >= 3 && !staged) /* this rank's slices on the device too (zero.device_collectives) */
        e->device.params += shard(P * 4, world), e->device.grads += shard(P * 4, world);
    e->device.optimizer = staged ? 0 : e->optimizer;
    e->device.activations = e->activations;
    e->device.runtime = CUDA_RUNTIME;
    e->device.total =
        e->device.params + e->device.grads + e->device.optimizer + e->device.activations + e->device.runtime;
    e->device.host_copies = !staged ? 0 : stage >= 3 ? 2 * shard(P * 4, world) : 2 * P * 4;
}

/* offload.activations (lib/offload/actstore.h): the layer inputs leave the model's memory, for
 * host memory or the swap file, which each micro-batch writes every input to once and reads
 * it back from once */
static void activation_offload(const zt_recipe *r, const zt_llama *m, zt_mem_estimate *e)
{
    zt_actstore_options o = zt_plan_actstore_options(r);
    size_t inputs = (size_t)m->L * zt_actstore_input_bytes(&o, m);
    e->activations -= inputs;
    if (o.tier != ZT_OFFLOAD_NVME) {
        e->offloaded_host += zt_actstore_bytes(&o, m);
        return;
    }
    e->offloaded_nvme += inputs;
    e->io_activations = (size_t)m->L * zt_actstore_slot_bytes(&o, m) * (size_t)r->train.gradient_accumulation_steps;
    e->io_buffers += zt_actstore_bytes(&o, m);
}

/* The largest tensor of the model's files, in elements: loading holds its pages of the file
 * beside the weights read so far (lib/model/llama_io.c drops each tensor's after reading it) */
static size_t largest_tensor(const zt_llama *m)
{
    zt_llama_tensor *t;
    int n;
    size_t most = 0;
    if (zt_llama_tensors(&m->cfg, &t, &n)) return (size_t)m->V * m->C;
    for (int i = 0; i < n; i++) {
        size_t e = (size_t)t[i].shape[0] * (t[i].ndim == 2 ? (size_t)t[i].shape[1] : 1);
        most = e > most ? e : most;
    }
    free(t);
    return most;
}

/* LoRA (docs/lora.md): the base frozen as it is held (fp32 and the bf16 copy, or with
 * lora.quantize_base its linear weights encoded and the rest as read), with no gradient or AdamW
 * state; the adapters and the copies of modules_to_save in fp32 with a whole gradient (zt's stage
 * 2 keeps it until the step) and AdamW's moments, sharded at stages 1 and 2 (a reward model's
 * and PPO's critic's score head, trained whole, among them); their scratch beside the
 * activations. At stage 3 the base's share is the whole model's (base_share), whose gradient
 * slices a frozen base has none of. The start holds the larger of: the fp32 weights while they
 * are read with the largest tensor's pages of the file (at most 4 bytes an element), and the
 * weights with the adapters and the encoding of lora.quantize_base (whose fp32 copies go only
 * after it). */
/* What a LoRA step moves and computes, where it differs from full training's: with
 * offload.param = "nvme" the swap file holds the frozen base's weights alone (its slices, whole
 * blocks), which every forward and backward pass reads and nothing writes (lib/zero/zero3_nvme.c);
 * the adapters' moments stay in memory unless offload.optimizer = "nvme" moves them. The base gets
 * no weight gradient: a token's matrix products are the forward's and the input gradient's, 4
 * FLOPs a weight instead of 6 (the adapters' own are small and left out); with lora.quantize_base
 * those of the layers' linear weights are the quantized products. */
static void lora_io_and_flops(const zt_recipe *r, const zt_llama *m, int world, zt_mem_estimate *e)
{
    if (r->offload.param == ZT_OFFLOAD_NVME) {
        size_t R = 0, backward = 0, off, count;
        for (int u = 0; u < zt_llama_units(m); u++) {
            zt_llama_unit_range(m, u, &off, &count);
            size_t mine = blocks((count + world - 1) / world * 4);
            if (r->zero.hpz_partition_size <= 1) backward += (size_t)backward_reads(r, m, u) * mine;
            R += mine;
        }
        size_t A = (size_t)r->train.gradient_accumulation_steps;
        e->offloaded_nvme = R;
        e->io_params_read = A * (R + backward + (kto_kl_pass(r) ? R : 0)), e->io_params_write = 0;
        e->io_step_read = e->io_step_write = 0;
    }
    e->io_optimizer = 0; /* the adapters' moments: in memory (their offload is not counted) */
    e->io_read = e->io_activations + e->io_params_read;
    e->io_write = e->io_activations + e->io_params_write;
    int T = r->data.max_length, ckpt = r->model.activation_checkpointing;
    double tokens = (double)micro_rows(r) * T * r->train.gradient_accumulation_steps;
    double attention = 12.0 * m->L * m->C * T, matrices = (double)zt_llama_matmul_params(m);
    /* with checkpointing one more forward: 6 FLOPs a weight instead of 4, attention's 4/3; KTO's
       mismatched rows one more forward (2 a weight, attention's 1/3) */
    int weight_flops = (ckpt ? 6 : 4) + (kto_kl_pass(r) ? 2 : 0);
    e->flops = tokens * (matrices * weight_flops + attention * ((ckpt ? 4.0 / 3 : 1) + (kto_kl_pass(r) ? 1.0 / 3 : 0)));
    if (m->qbase) {
        /* the layers' products (a mixture: the router and the experts a token passes through) */
        double layers = matrices - (double)zt_llama_head_rows(m) * m->C;
        e->flops_quantized = tokens * layers * weight_flops;
        if (m->cfg.n_experts) {
            int k = m->cfg.experts_per_tok, rows = micro_rows(r) * T * k / m->cfg.n_experts;
            e->flops_quantized_experts = tokens * (double)m->L * 3.0 * k * m->F * m->C * weight_flops;
            e->gemm_m_experts = rows > 1 ? rows : 1;
        }
        e->qbase_kind = m->qbase->kind, e->qbase_double_quant = m->qbase->double_quant;
    }
}

static zt_status lora_estimate(const zt_recipe *r, const zt_llama *m, const zt_lora_config *c, int stage, int world,
                               size_t base_share, zt_mem_estimate *e)
{
    /* a quantized base (m in its layout): the encodings in the flat array, its tiles and pieces */
    size_t n = zt_lora_numel(m, c), P = m->numel, buffers = m->qbase ? zt_qbase_buffer_bytes(m) : 0;
    size_t tokens = (size_t)micro_rows(r) * r->data.max_length, scratch;
    e->trained = n;
    e->base = (stage >= 3 ? base_share : zt_llama_weight_bytes(m, P)) + buffers;
    lora_io_and_flops(r, m, world, e);
    e->params = e->base + n * 4;
    e->grads = n * 4;
    size_t shard = stage >= 1 ? (n + world - 1) / world : n;
    /* adamw_8bit: a byte a moment and an element, an absmax a block (adapters under 4096 elements,
       which keep fp32 moments, counted as 8-bit: a few KiB) */
    e->optimizer = r->train.optim == ZT_OPTIM_ADAMW_8BIT ? 2 * shard + 8 * (shard / ZT_ADAMW8_BLOCK + 1) : shard * 8;
    scratch = zt_lora_buffer_bytes(m, c, tokens);
    e->activations += scratch, e->activations_other += scratch;
    /* the start: a whole base read beside its largest tensor's file pages, or the adapters made
       beside it; a quantized base is encoded as it is read, never whole in fp32 */
    size_t reading = m->qbase ? e->base : P * 4 + largest_tensor(m) * 4, made = e->base + 2 * n * 4;
    e->start = (reading > made ? reading : made) + e->runtime;
    e->training = e->params + e->grads + e->optimizer + e->activations + e->runtime + e->io_buffers;
    e->total = e->training > e->start ? e->training : e->start;
    if (r->model.device == ZT_DEVICE_CUDA) { /* the same arrays on the GPU, its runtime for the host's */
        e->device.params = e->params, e->device.grads = e->grads, e->device.optimizer = e->optimizer;
        e->device.activations = e->activations;
        e->device.total = e->params + e->grads + e->optimizer + e->activations + e->device.runtime;
        if (e->device.host_copies) e->device.host_copies = 2 * n * 4; /* the adapters' weights and gradients */
    }
    return ZT_OK;
}

/* What a rank holds to train model m (lora: its adapters, m the frozen base), m shaped and tiled
 * as the run has it: the policy, or PPO's critic. */
static zt_status train_estimate(const zt_recipe *r, zt_llama *m, const zt_lora_config *lora, int world,
                                zt_mem_estimate *e)
{
    zt_zero_options zo = zt_plan_zero_options(r);
    int stage = zt_zero_effective_stage(&zo, world);
    int B = micro_rows(r), T = r->data.max_length, A = r->train.gradient_accumulation_steps, nseg;
    size_t P = m->numel, local = zt_zero_segments(m, stage, world, 0, NULL, &nseg); /* what rank 0 updates */
    e->numel = zt_qbase_params(m); /* a quantized base's weights, not its encodings' elements */
    e->stage = stage;
    /* stage 3 keeps its slices of the fp32 weights and of the gradient, and the units gathered
     * for compute with their gradients (lib/zero/zero3.c). zt's stage 2 still keeps the whole
     * gradient until the optimizer step (reduce-scatter once per step). */
    size_t gathered_grads, gathered = zt_zero3_gathered_bytes(m, &zo, &gathered_grads);
    e->params = stage >= 3 ? local * 4 + gathered : zt_llama_weight_bytes(m, P);
    e->grads = stage >= 3 ? local * 4 + gathered_grads : P * 4;
    /* ZeRO++: hpZ's secondary slices, qgZ's error-feedback residual */
    if (stage >= 3 && zo.hpz > 1) e->params += e->hpz = zt_zero_hpz_bytes(m, zo.hpz);
    if (stage >= 3 && zo.quantized_gradients && zo.error_feedback) e->grads += zt_zero_qgz_residual_bytes(m);
    zt_offload_io io = zt_recipe_offload_io(r);
    e->optimizer = zt_optstate_bytes(ZT_OFFLOAD_NONE, &io, local);
    if (r->train.optim == ZT_OPTIM_ADAMW_8BIT) { /* the tensors decide which moments are 8-bit */
        zt_llama shaped = *m;
        zt_zero_segment *seg = malloc((size_t)nseg * sizeof *seg);
        zt_status st = seg ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory");
        if (!st && !m->tensors) st = zt_llama_tensors(&m->cfg, &shaped.tensors, &shaped.n_tensors);
        if (!st) zt_zero_segments(m, stage, world, 0, seg, &nseg);
        if (!st) e->optimizer = zt_optstate_bytes_8bit(&shaped, seg, nseg);
        if (!m->tensors) free(shaped.tensors);
        free(seg);
        if (st) return st;
    }
    if (r->offload.optimizer == ZT_OFFLOAD_NVME && r->offload.param != ZT_OFFLOAD_NVME) {
        e->io_optimizer = 2 * blocks(local * 4); /* the moments stream through every step: m and v, whole blocks */
        e->io_buffers = zt_optstate_bytes(ZT_OFFLOAD_NVME, &io, local);
    }
    if (r->offload.optimizer == ZT_OFFLOAD_NVME) e->offloaded_nvme += e->optimizer, e->optimizer = 0;
    else if (r->offload.optimizer != ZT_OFFLOAD_NONE) e->offloaded_host += e->optimizer;
    if (r->offload.param == ZT_OFFLOAD_NVME) { /* the slices of weights and gradient go to the file too */
        e->offloaded_nvme += e->params - gathered + local * 4;
        e->params = gathered;
        e->grads -= local * 4;
        param_io(r, m, world, e);
        e->io_buffers = zt_zero_nvme_staging_bytes(m, &zo, world, A, lora != NULL); /* LoRA's base: frozen */
    }
    int ckpt = r->model.activation_checkpointing;
    e->activations = zt_llama_acts_bytes(m, B, T, ckpt);
    e->activations_other = zt_llama_acts_bytes(m, B, T, !ckpt);
    if (ckpt && r->offload.activations != ZT_OFFLOAD_NONE) activation_offload(r, m, e);
    size_t operand = (size_t)m->V * m->C, n_tokens = (size_t)B * T;
    if (operand < n_tokens * 2 * m->F) operand = n_tokens * 2 * m->F;
    size_t pack = operand * 4 < PACK_CAP ? operand * 4 : PACK_CAP;
    e->runtime = RUNTIME_BASE + (size_t)omp_get_max_threads() * pack;
    e->io_read = e->io_optimizer + e->io_activations + e->io_params_read;
    e->io_write = e->io_optimizer + e->io_activations + e->io_params_write;
    e->io_step_read += e->io_optimizer, e->io_step_write += e->io_optimizer;
    double tokens = (double)B * T * r->train.gradient_accumulation_steps;
    /* recomputation and KTO's mismatched rows: one more forward each */
    e->flops = zt_llama_flops_per_token(m, T) * tokens * (1 + (ckpt ? 1.0 / 3 : 0) + (kto_kl_pass(r) ? 1.0 / 3 : 0));
    e->gemm_m = B * T, e->gemm_n = m->F, e->gemm_k = m->C, e->bf16 = m->dtype_bf16;
    e->training = e->params + e->grads + e->optimizer + e->activations + e->runtime + e->io_buffers;
    e->total = e->training;
    if (r->model.device == ZT_DEVICE_CUDA) /* a GPU's memory is not the host's */
        device_estimate(m, stage, world, zt_zero_staged(&zo, world, 0), gathered, gathered_grads, e);
    return lora ? lora_estimate(r, m, lora, stage, world, e->params, e) : ZT_OK;
}

/* ---- zt rlhf: the models beside the policy (zt_mem_rlhf) ----------------------------------- */

/* A frozen model a run opens beside the policy (zt_model_open): its weights and a micro-batch's
 * forward pass without checkpointing (rollout.c and pref.c allocate its activations so). On a
 * GPU also its gradient array, which zt_llama_init allocates and the device maps though a frozen
 * model never fills it (on the CPU its pages are never touched). */
static zt_status frozen_model(const zt_recipe *r, const char *dir, int score_head, size_t *host, size_t *device)
{
    zt_llama m;
    zt_status st = shape_model(r, dir, score_head, 0, NULL, &m);
    if (st) return st;
    *host = zt_llama_weight_bytes(&m, m.numel) + zt_llama_acts_bytes(&m, micro_rows(r), r->data.max_length, 0);
    if (device && r->model.device == ZT_DEVICE_CUDA) *device = *host + m.numel * sizeof(zt_real);
    return ZT_OK;
}

/* PPO's critic (ppo.c): a score-head model of the policy's vocabulary at least, trained beside
 * the policy as the policy is (a ZeRO partition and AdamW state of its own, the same settings),
 * so estimated as the policy is, but with its activations in memory (the activation store is the
 * policy's); with LoRA its frozen model (quantized as the policy's base is), held whole and
 * replicated however the policy's base is sharded or streamed, and adapters of its own. */
static zt_status critic_estimate(const zt_recipe *r, const zt_llama *policy, const zt_lora_config *lora, int world,
                                 zt_mem_estimate *e)
{
    zt_llama m;
    zt_qbase q;
    zt_mem_estimate c = {0};
    zt_recipe critic = *r; /* shares r's strings */
    critic.offload.activations = ZT_OFFLOAD_NONE;
    if (lora) {
        critic.zero.stage = r->zero.stage < 2 ? r->zero.stage : 2;
        critic.offload.param = ZT_OFFLOAD_NONE;
    }
    zt_lora_config adapters = lora ? zt_plan_critic_lora(*lora) : (zt_lora_config){0};
    zt_status st = shape_model(r, zt_plan_critic_dir(r), 1, policy->V, &q, &m);
    if (st) return st;
    zt_plan_tile_model(r, &m);
    if ((st = train_estimate(&critic, &m, lora ? &adapters : NULL, world, &c))) return st;
    e->rlhf.critic = c.params + c.grads + c.optimizer + c.activations + c.io_buffers;
    e->device.rlhf.critic = c.device.params + c.device.grads + c.device.optimizer + c.device.activations;
    e->device.host_copies += c.device.host_copies;
    e->offloaded_host += c.offloaded_host, e->offloaded_nvme += c.offloaded_nvme;
    return ZT_OK;
}

/* GRPO's and PPO's generation (rollout.c): a KV cache of data.max_length positions a slot (GRPO
 * decodes a prompt's completions side by side, a slot each; a streamed model every completion of
 * the step) where the model is (llama_decode.c: on a GPU in its memory, with room for the tokens
 * and the logits) and the sampler's scratch on the host (a few pages: left out on a GPU); at
 * stage 3 the whole model gathered for it, beyond the units training gathers
 * (zt_trainer_gather_model), where a streamed model's units are those training gathers. The
 * step's rows and logits, a few dozen bytes a position, are left out. */
static void generation_estimate(const zt_recipe *r, const zt_llama *m, int world, zt_mem_estimate *e)
{
    int slots = zt_plan_rollout_slots(r, world), chunk = zt_plan_rollout_chunk(r, world);
    size_t cache = zt_llama_cache_bytes(m, r->data.max_length, chunk, slots);
    size_t gathered = 0, grads;
    if (e->stage >= 3 && !zt_plan_rollout_streams(r, world)) {
        zt_zero_options zo = zt_plan_zero_options(r);
        gathered = zt_llama_weight_bytes(m, m->numel) - zt_zero3_gathered_bytes(m, &zo, &grads);
    }
    e->rlhf.generation = cache + zt_sample_scratch_bytes(m->V) + gathered;
    if (r->model.device == ZT_DEVICE_CUDA)
        e->device.rlhf.generation = cache + ((size_t)slots * m->V + chunk) * sizeof(zt_real) + gathered;
}

/* DPO's and KTO's reference log-probabilities (pref.c) are computed before the training's buffers: the
 * policy's weights (its gradient untouched until the first step) beside a forward pass of each
 * micro-batch without checkpointing, on rlhf.reference's model (held for that pass only) or on
 * the policy itself. A run that finds them in data.cache_dir skips the pass. */
static void reference_pass(const zt_recipe *r, zt_mem_estimate *e)
{
    size_t own = r->model.activation_checkpointing ? e->activations_other : e->activations;
    e->reference_pass = e->params + (e->rlhf.reference ? e->rlhf.reference : own) + e->runtime;
    if (e->reference_pass > e->start) e->start = e->reference_pass;
}

/* zt rlhf's models beside the policy m (lora: its adapters' config), into training and total, or
 * DPO's and KTO's into start (zt_mem_rlhf) */
static zt_status rlhf_estimate(const zt_recipe *r, zt_rlhf_algorithm algo, const zt_llama *m,
                               const zt_lora_config *lora, int world, zt_mem_estimate *e)
{
    zt_mem_rlhf *h = &e->rlhf, *d = &e->device.rlhf;
    const char *ref = zt_plan_reference_dir(r);
    int rollout = algo == ZT_RLHF_GRPO || algo == ZT_RLHF_PPO;
    zt_status st = ref ? frozen_model(r, ref, 0, &h->reference, rollout ? &d->reference : NULL) : ZT_OK;
    /* the reward program, when both are set, scores instead of the model (rollout.c) */
    if (!st && rollout && r->rlhf.reward_model[0] && !r->rlhf.reward_command[0])
        st = frozen_model(r, r->rlhf.reward_model, 1, &h->reward_model, &d->reward_model);
    if (!st && algo == ZT_RLHF_PPO) st = critic_estimate(r, m, lora, world, e);
    if (st) return st;
    if (algo == ZT_RLHF_DPO || algo == ZT_RLHF_KTO) reference_pass(r, e);
    if (rollout) generation_estimate(r, m, world, e);
    e->training += (rollout ? h->reference : 0) + h->reward_model + h->critic + h->generation;
    e->total = e->training > e->start ? e->training : e->start;
    if (e->device.total) e->device.total += d->reference + d->reward_model + d->critic + d->generation;
    return ZT_OK;
}

zt_status zt_memory_estimate(const zt_recipe *r, int world, int ranks_per_node, zt_mem_estimate *e)
{
    memset(e, 0, sizeof *e);
    zt_llama m;
    zt_qbase q;
    zt_lora_config lora;
    int algo = rlhf_algorithm(r), lora_on = zt_recipe_lora_on(r);
    if (!r->model.path[0]) return zt_fail(ZT_EUSER, "model.path is not set: name a Hugging Face model directory");
    zt_status st = shape_model(r, r->model.path, algo == ZT_RLHF_REWARD, 0, &q, &m);
    if (st) return st;
    zt_plan_tile_model(r, &m);
    if ((st = zt_recipe_check_world(r, world, ranks_per_node))) return st;
    /* a reward model's score head trains whole beside the adapters (the trainer's attach_lora) */
    if (lora_on && (st = zt_plan_lora_config(r, algo == ZT_RLHF_REWARD, NULL, &lora))) return st;
    if ((st = train_estimate(r, &m, lora_on ? &lora : NULL, world, e))) return st;
    return algo >= 0 ? rlhf_estimate(r, (zt_rlhf_algorithm)algo, &m, lora_on ? &lora : NULL, world, e) : ZT_OK;
}
