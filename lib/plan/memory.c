#include "memory.h"

#include <omp.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/model/llama.h"
#include "lib/zero/optstate.h"
#include "lib/zero/zero.h"
#include "options.h"

/* The process beyond zt's buffers, measured on this kind of machine: the binary, its
 * libraries (libcurl and OpenSSL's among them) and small allocations (~15 MB), and OpenBLAS's
 * per-thread packing buffers, which grow with the largest GEMM operand up to about 16 MB. */
enum { RUNTIME_BASE = 16 << 20, PACK_CAP = 16 << 20 };
/* On a GPU: the CUDA context, cuBLASLt's workspace and the kernels' scratch (the bf16 attention
 * takes a bf16 copy of q, k and v), about what an H200 showed beyond the arrays counted here. */
static const size_t CUDA_RUNTIME = (size_t)1 << 30;

static size_t shard(size_t bytes, int world) { return (bytes + world - 1) / world; }

static size_t blocks(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

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
static void param_io(const zt_recipe *r, const zt_llama *m, int world, zt_mem_estimate *e, size_t *slice)
{
    size_t R = 0, backward = 0, off, count;
    int units = zt_llama_units(m);
    *slice = 0;
    for (int u = 0; u < units; u++) {
        zt_llama_unit_range(m, u, &off, &count);
        size_t mine = blocks((count + world - 1) / world * 4);
        if (r->zero.hpz_partition_size <= 1) backward += (size_t)backward_reads(r, m, u) * mine;
        R += mine;
        if (mine > *slice) *slice = mine;
    }
    size_t A = (size_t)r->train.gradient_accumulation_steps;
    e->io_optimizer = 2 * R;
    e->io_params_read = A * (R + backward) + (A - 1) * R + 2 * R;
    e->io_params_write = A * R + R;
    e->io_step_read = 2 * R, e->io_step_write = R;
}

/* The elements rank 0 updates (its AdamW state): all at stage 0, its slice of the flat
 * array at stages 1-2, its slice of each unit at stage 3 (as lib/zero does). */
static size_t updated_elements(const zt_llama *m, int stage, int world)
{
    if (stage == 0) return m->numel;
    if (stage < 3) return (m->numel + world - 1) / world;
    size_t n = 0, off, count;
    for (int u = 0; u < zt_llama_units(m); u++) {
        zt_llama_unit_range(m, u, &off, &count);
        n += (count + world - 1) / world;
    }
    return n;
}

static void device_estimate(const zt_recipe *r, const zt_llama *m, int stage, int world, size_t gathered,
                            size_t gathered_grads, zt_mem_estimate *e)
{
    size_t P = m->numel, copy16 = m->dtype_bf16 ? 2 : 0;
    int staged = world > 1 || r->offload.optimizer != ZT_OFFLOAD_NONE || r->offload.param != ZT_OFFLOAD_NONE;
    e->device.params = stage >= 3 ? gathered : P * (4 + copy16);
    e->device.grads = stage >= 3 ? gathered_grads : P * 4;
    e->device.optimizer = staged ? 0 : P * 8;
    e->device.activations = e->activations;
    e->device.runtime = CUDA_RUNTIME;
    e->device.total = e->device.params + e->device.grads + e->device.optimizer + e->device.activations +
                      e->device.runtime;
    e->device.host_copies = !staged ? 0 : stage >= 3 ? 2 * shard(P * 4, world) : 2 * P * 4;
}

zt_status zt_memory_estimate(const zt_recipe *r, int world, int ranks_per_node, zt_mem_estimate *e)
{
    memset(e, 0, sizeof *e);
    char path[4096];
    zt_llama_config cfg;
    zt_llama m;
    zt_status st;
    if (!r->model.path[0]) return zt_fail(ZT_EUSER, "model.path is not set: name a Hugging Face model directory");
    if ((st = zt_path_join(path, sizeof path, r->model.path, "config.json")) || (st = zt_llama_config_load(&cfg, path)))
        return st;
    zt_dtype dtype = r->model.dtype;
    if ((st = zt_llama_shape(&m, &cfg, zt_backend_cpu(), dtype == ZT_F16 ? ZT_BF16 : dtype))) return st;
    zt_plan_tile_model(r, &m);
    if ((st = zt_recipe_check_world(r, world, ranks_per_node))) return st;

    /* one rank holds everything whatever the stage, unless offload.param moves the weights away */
    int stage = world > 1 || r->offload.param != ZT_OFFLOAD_NONE ? r->zero.stage : 0;
    int B = r->train.micro_batch_size, T = r->data.max_length;
    size_t P = m.numel;
    size_t copy16 = dtype == ZT_F32 ? 0 : 2;
    size_t params = P * (4 + copy16), grads = P * 4, optimizer = P * 8;
    e->numel = P;
    e->stage = stage;
    /* stage 3 keeps 1/world of the fp32 weights plus the units gathered for compute (the
     * current one and the prefetched; a tied embedding stays from the forward pass's start
     * to the backward pass's end), and 1/world of the gradient plus the gradients of the
     * unit in backward (and of the tied embedding). zt's stage 2 still keeps the whole
     * gradient until the optimizer step (reduce-scatter once per step). */
    size_t largest = 0, off, count;
    for (int u = 0; u < zt_llama_units(&m); u++) {
        zt_llama_unit_range(&m, u, &off, &count);
        if (count > largest) largest = count;
    }
    /* a tied embedding stays; with a tiled MLP and checkpointing, so does the layer's first
     * unit while its tiles are recomputed and go back */
    int ckpt = r->model.activation_checkpointing, ahead = zt_zero3_ahead(r->zero.prefetch_layers, zt_llama_mlp_tiles(&m), ckpt);
    size_t pinned = cfg.tie_word_embeddings ? (size_t)m.V * m.C : 0;
    if (stage >= 3 && zt_llama_mlp_tiles(&m) > 1 && ckpt) pinned += m.lay.wgu;
    size_t gathered = ((size_t)(ahead + 1) * largest + pinned) * (4 + copy16);
    e->params = stage >= 3 ? shard(P * 4, world) + gathered : params;
    e->grads = stage >= 3 ? shard(grads, world) + (largest + pinned) * 4 : grads;
    /* ZeRO++: hpZ's secondary slices (1/K of the fp32 weights), qgZ's error-feedback residual */
    if (stage >= 3 && r->zero.hpz_partition_size > 1) e->params += e->hpz = shard(P * 4, r->zero.hpz_partition_size);
    if (stage >= 3 && r->zero.quantized_gradients && r->zero.quantized_gradients_error_feedback) e->grads += 2 * P * 4;
    e->optimizer = stage >= 1 ? shard(optimizer, world) : optimizer;
    zt_offload_io io = zt_recipe_offload_io(r);
    if (r->offload.optimizer == ZT_OFFLOAD_NVME && r->offload.param != ZT_OFFLOAD_NVME) {
        /* the moments stream through every step: m and v, whole blocks */
        size_t n = updated_elements(&m, stage, world);
        e->io_optimizer = 2 * blocks(n * 4);
        e->io_buffers = 6 * zt_optstate_chunk_bytes(&io, n, 2);
    }
    if (r->offload.optimizer != ZT_OFFLOAD_NONE) {
        size_t moved = e->optimizer;
        if (r->offload.optimizer == ZT_OFFLOAD_NVME) e->offloaded_nvme += moved, e->optimizer = 0;
        else e->offloaded_host += moved;
    }
    if (r->offload.param == ZT_OFFLOAD_NVME) { /* the slices of weights and gradient go to the file too */
        size_t slice, n = updated_elements(&m, stage, world);
        e->offloaded_nvme += e->params - gathered + shard(grads, world);
        e->params = gathered;
        e->grads -= shard(grads, world);
        param_io(r, &m, world, e, &slice);
        /* staging: reads of ahead + 2 units, two gradient writes, one to accumulate; the swap's chunks */
        e->io_buffers = (size_t)(ahead + 4 + (r->train.gradient_accumulation_steps > 1)) * slice +
                        12 * zt_optstate_chunk_bytes(&io, n, 4);
    }
    e->activations = zt_llama_acts_bytes(&m, B, T, ckpt);
    e->activations_other = zt_llama_acts_bytes(&m, B, T, !ckpt);
    if (ckpt && r->offload.activations != ZT_OFFLOAD_NONE) { /* the layer inputs leave (lib/offload/actstore.h) */
        size_t input = (size_t)B * T * m.C * 4, inputs = (size_t)m.L * input;
        e->activations -= inputs;
        if (r->offload.activations != ZT_OFFLOAD_NVME) {
            e->offloaded_host += inputs;
        } else { /* each micro-batch writes every input once and reads it back once, in whole blocks */
            e->offloaded_nvme += inputs;
            size_t slot = (input + 4095) / 4096 * 4096;
            e->io_activations = (size_t)m.L * slot * (size_t)r->train.gradient_accumulation_steps;
            e->io_buffers += 2 * slot;
        }
    }
    size_t operand = (size_t)m.V * m.C, n_tokens = (size_t)B * T;
    if (operand < n_tokens * 2 * m.F) operand = n_tokens * 2 * m.F;
    size_t pack = operand * 4 < PACK_CAP ? operand * 4 : PACK_CAP;
    e->runtime = RUNTIME_BASE + (size_t)omp_get_max_threads() * pack;
    e->io_read = e->io_optimizer + e->io_activations + e->io_params_read;
    e->io_write = e->io_optimizer + e->io_activations + e->io_params_write;
    e->io_step_read += e->io_optimizer, e->io_step_write += e->io_optimizer;
    double tokens = (double)B * T * r->train.gradient_accumulation_steps;
    e->flops = zt_llama_flops_per_token(&m, T) * tokens * (ckpt ? 4.0 / 3 : 1); /* recompute: one more forward */
    e->gemm_m = B * T, e->gemm_n = m.F, e->gemm_k = m.C, e->bf16 = copy16 != 0;
    e->total = e->params + e->grads + e->optimizer + e->activations + e->runtime + e->io_buffers;
    if (r->model.device == ZT_DEVICE_CUDA) device_estimate(r, &m, stage, world, gathered, (largest + pinned) * 4, e);
    return ZT_OK;
}
