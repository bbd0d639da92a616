/* zt validate: the resolved recipe and a memory estimate per rank, before anything is loaded. */
#include <string.h>
#include <stdio.h>

#include "commands.h"
#include "lib/plan/memory.h"
#include "lib/plan/placement.h"
#include "lib/plan/steptime.h"
#include "options.h"

static void row(const char *what, size_t bytes, const char *note)
{
    printf("#   %-24s %10.1f MiB%s%s\n", what, bytes / 1048576.0, note[0] ? "  " : "", note);
}

/* What the NVMe offload moves a step, each class, and how long that takes at the disk's speed. */
static void print_io(const zt_recipe *r, const zt_mem_estimate *e)
{
    double rd = 0, wr = 0;
    if (zt_disk_bandwidth(r, &rd, &wr) || rd <= 0 || wr <= 0) {
        printf("# (the disk under offload.nvme_path could not be measured: %s)\n", zt_errmsg());
        return;
    }
    printf("# offload I/O per step      read MiB  written MiB      seconds at %.0f MB/s read, %.0f MB/s write\n",
           rd / 1e6, wr / 1e6);
    const char *what[] = {"optimizer state", "layer inputs", "weights, gradients"};
    const char *when[] = {"(during AdamW)", "(beside forward and backward)",
                          e->trained ? "(the frozen base's gathers)" : "(gathers, reductions, AdamW)"};
    size_t in[] = {e->io_optimizer, e->io_activations, e->io_params_read};
    size_t out[] = {e->io_optimizer, e->io_activations, e->io_params_write};
    for (int i = 0; i < 3; i++)
        if (in[i] || out[i])
            printf("#   %-22s %9.1f %12.1f %12.3f  %s\n", what[i], in[i] / 1048576.0, out[i] / 1048576.0,
                   in[i] / rd + out[i] / wr, when[i]);
    zt_step_time t;
    if (zt_step_time_estimate(e, rd, wr, &t)) return;
    char quantized[320] = "";
    if (e->flops_quantized > 0)
        snprintf(quantized, sizeof quantized, "; of them %.1f GFLOP through the quantized base at %.1f GFLOP/s",
                 (e->flops_quantized - e->flops_quantized_experts) * 1e-9, t.qbase_gflops);
    if (e->flops_quantized_experts > 0)
        snprintf(quantized + strlen(quantized), sizeof quantized - strlen(quantized),
                 " and %.1f GFLOP through its experts at %.1f GFLOP/s (%d rows an expert)",
                 e->flops_quantized_experts * 1e-9, t.qbase_experts_gflops, e->gemm_m_experts);
    printf("# step time, predicted: %.1f s = forward and backward %.1f s (%.1f GFLOP at %.1f GFLOP/s, measured on a "
           "%dx%dx%d product%s) + their I/O not hidden %.1f s (of %.1f s) + the optimizer step's I/O %.1f s\n",
           t.total_s, t.compute_s, e->flops * 1e-9, t.gflops, e->gemm_m, e->gemm_n, e->gemm_k, quantized, t.exposed_s,
           t.passes_io_s, t.step_io_s);
}

/* offload = "auto": what it chose */
static void print_placement(const zt_placement *p)
{
    printf("# offload = \"auto\": offload.optimizer = \"%s\", offload.param = \"%s\" (%.1f MiB of the %.1f MiB a rank "
           "has where it computes)\n",
           zt_offload_tier_names[p->optimizer], zt_offload_tier_names[p->param], p->need / 1048576.0,
           p->have / 1048576.0);
}

/* How LoRA's frozen base is held */
static const char *lora_base_note(const zt_recipe *r, int stage)
{
    if (stage >= 3 && r->offload.param == ZT_OFFLOAD_NVME) return "(stage 3: the units gathered and staged from NVMe)";
    if (stage >= 3) return "(stage 3: its slices and the units gathered)";
    if (r->lora.quantize_base == ZT_QBASE_NF4)
        return r->lora.double_quant ? "(linear weights in NF4 with double_quant, the rest as read)"
                                    : "(linear weights in NF4, the rest as read)";
    if (r->lora.quantize_base == ZT_QBASE_INT8) return "(linear weights in int8, the rest as read)";
    return r->model.dtype == ZT_BF16 ? "(fp32 and the bf16 copy)" : "(fp32)";
}

/* zt rlhf's models beside the policy (memory.h): what the GPU holds of them, or (device 0) the host */
static void print_rlhf(const zt_recipe *r, const zt_mem_estimate *e, int device)
{
    const zt_mem_rlhf *h = device ? &e->device.rlhf : &e->rlhf;
    if (h->reference)
        row("reference model", h->reference,
            r->rlhf.algorithm == ZT_RLHF_DPO || r->rlhf.algorithm == ZT_RLHF_KTO
                ? "(at the start only: the pass of its log-probabilities)"
            : device ? "(frozen: weights, their unused gradient array, a forward pass)"
                     : "(frozen: weights, a micro-batch's forward pass)");
    if (h->reward_model)
        row("reward model", h->reward_model,
            device ? "(rlhf.reward_model: weights, their unused gradient array, a forward pass)"
                   : "(rlhf.reward_model: weights, a micro-batch's forward pass)");
    if (h->critic)
        row("critic", h->critic,
            zt_recipe_lora_on(r) ? "(frozen model, adapters with gradients and AdamW, activations)"
                                 : "(weights, gradients, AdamW, activations)");
    if (h->generation)
        row("generation", h->generation,
            device          ? "(the whole model gathered)"
            : e->stage >= 3 ? "(KV cache and sampler, the whole model gathered)"
                            : "(KV cache and sampler)");
}

/* What the total's larger part, the start, holds */
static const char *start_note(const zt_recipe *r, const zt_mem_estimate *e)
{
    if (e->start == e->reference_pass) return "(the reference log-probabilities' pass, before the training's buffers)";
    return r->lora.quantize_base != ZT_QBASE_NONE ? "(the base encoded as it is read, before the training's buffers)"
                                                  : "(the base read whole, before the training's buffers)";
}

int cmd_validate(int argc, char **argv)
{
    long world = 1, per_node = 0;
    zt_usage u = {"zt validate", "RECIPE [--world-size N] [--ranks-per-node K] [section.key=value ...]",
                  "Check a recipe, print every key with its final value (TOML), and estimate the memory\n"
                  "each rank will need for the recipe's ZeRO stage, world size and offload settings."};
    zt_option opts[] = {
        {"world-size", 'I', &world, "N", "ranks to assume (default 1)", 1, 1 << 20},
        {"ranks-per-node", 'I', &per_node, "K", "ranks per node to assume (default: the world size)", 1, 1 << 20},
        {0},
    };
    if ((argc = zt_options_parse(argc, argv, opts, &u)) < 0) return argc == -2 ? 0 : 2;
    zt_recipe r;
    int code = cmd_load_recipe(&r, "validate", argc, argv);
    if (code) return code;
    if (!per_node) per_node = world;
    zt_placement place = {0};
    int automatic = r.offload.optimizer == ZT_OFFLOAD_AUTO || r.offload.param == ZT_OFFLOAD_AUTO;
    zt_status st = automatic ? zt_placement_decide(&r, (int)world, (int)per_node, &place) : ZT_OK;
    zt_recipe placed = r; /* the estimate of what "auto" chose; shares r's strings, only the enums differ */
    if (automatic) placed.offload.optimizer = place.optimizer, placed.offload.param = place.param;
    zt_mem_estimate e;
    if (!st) st = zt_memory_estimate(&placed, (int)world, (int)per_node, &e);
    if (!st) {
        int n;
        const zt_recipe_key *keys = zt_recipe_schema(&n);
        const char *section = "";
        for (int i = 0; i < n; i++) {
            if (strcmp(section, keys[i].section)) printf("%s[%s]\n", i ? "\n" : "", section = keys[i].section);
            printf("%s = ", keys[i].key);
            zt_recipe_write_value(stdout, &r, &keys[i]);
            printf("\n");
        }
        printf("\n# memory per rank: ZeRO stage %d, world size %ld, %ld ranks per node, %zu parameters%s\n", e.stage,
               world, per_node, e.numel, e.device.total ? ", if it computed on the CPU" : "");
        if (e.trained)
            printf("# LoRA: %zu parameters trained (the adapters%s%s), the base frozen\n", e.trained,
                   r.lora.modules_to_save.n ? " and lora.modules_to_save" : "",
                   r.lora.trainable_token_indices.n ? " and the rows of lora.trainable_token_indices" : "");
        row("parameters", e.params, "");
        if (e.hpz) row("  of which hpZ's slices", e.hpz, "(zero.hpz_partition_size)");
        if (e.trained) row("  of which the frozen base", e.base, lora_base_note(&r, e.stage));
        row("gradients", e.grads, "");
        row("optimizer state", e.optimizer, e.offloaded_host ? "(offloaded to host memory)" : "");
        row("activations", e.activations,
            r.model.activation_checkpointing ? "(checkpointing on)" : "(checkpointing off)");
        row("activations, other way", e.activations_other,
            r.model.activation_checkpointing ? "(checkpointing off)" : "(checkpointing on)");
        print_rlhf(&r, &e, 0);
        row("runtime", e.runtime, "(code, libraries, GEMM buffers)");
        if (e.offloaded_nvme) row("on NVMe", e.offloaded_nvme, "(not in the total)");
        row("total", e.total, e.start ? "(the larger of:)" : "");
        if (e.start) row("  training", e.training, "");
        if (e.start) row("  at the start", e.start, start_note(&r, &e));
        if (e.device.total) {
            printf("\n# GPU memory per rank (model.device = \"cuda\")\n");
            row("parameters", e.device.params, e.stage == 3 ? "(the units in use)" : "");
            row("gradients", e.device.grads, e.stage == 3 ? "(the units in use)" : "");
            row("optimizer state", e.device.optimizer, e.device.optimizer ? "" : "(on the host)");
            row("activations", e.device.activations, "");
            print_rlhf(&r, &e, 1);
            row("runtime", e.device.runtime, "(CUDA context, cuBLASLt workspace, kernel scratch)");
            row("total", e.device.total, "");
            if (e.device.host_copies) row("host copies", e.device.host_copies, "(weights and gradients, on the host)");
        }
        if (e.io_read)
            printf("# offload I/O per optimizer step: %zu bytes read, %zu written (%.1f and %.1f MiB), through "
                   "%.1f MiB of buffers\n",
                   e.io_read, e.io_write, e.io_read / 1048576.0, e.io_write / 1048576.0, e.io_buffers / 1048576.0);
        if (automatic) print_placement(&place);
        if (e.io_read) print_io(&placed, &e);
    }
    zt_recipe_free(&r);
    return st ? cmd_fail(st) : 0;
}
