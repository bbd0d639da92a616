/* zero: ZeRO data parallelism over the model's flat parameter array, stages 0-3.
 *
 * Stage 0 all-reduces gradients and every rank runs the whole optimizer. Stage 1 keeps
 * AdamW state only for this rank's shard: gradients are all-reduced, the shard is
 * updated, and the updated shards are all-gathered. Stage 2 reduces gradients straight
 * into the owners' shards (reduce-scatter). Stages 1-2 shard the flat array in equal
 * slices [r·p, (r+1)·p), p = ceil(numel / world) (the flat buffers have room for the
 * padding).
 *
 * Stage 3 (zero3.c) also partitions the parameters: each unit of the model (the
 * embedding, each layer, the final norm and head: zt_llama_units) is cut into equal slices
 * of its own, and a rank keeps only its slices of the fp32 weights, the gradients and the
 * AdamW state. Through the model's hooks a unit is all-gathered into the model's flat
 * array just before it is used, in the forward pass and again in the backward pass, and
 * freed right after (its pages go back to the system); the next zero.prefetch_layers
 * units' gathers are started before the current one computes. Each unit's gradient is
 * reduce-scattered into its owners' slices as soon as its backward is done, every
 * micro-batch. ZeRO++ (zeropp.c) changes how stage 3 moves the bytes: qwZ gathers int8
 * weights with a scale per block, hpZ serves the backward gathers from a secondary slice
 * kept inside a group of consecutive ranks, qgZ reduces int4 gradients through an
 * all-to-all inside the node and then one across the nodes. Stage 3 keeps this rank's slices
 * in a slice store (zero3.h): in memory (zero3_memory.c) or, with offload.param = "nvme"
 * (zero3_nvme.c), in a swap file with AdamW's moments: a gather reads the unit's slice
 * first, a reduction writes it back.
 *
 * A model without a gradient array (m->grads NULL: the frozen base under LoRA's adapters,
 * model/lora.h) is partitioned at stage 3 only: its units are sharded and gathered as any
 * model's (with qwZ and hpZ; from the swap file with offload.param = "nvme", which then holds
 * its weights alone), and nothing is reduced for it: it has no gradient slices and no optimizer
 * state, and its zt_zero_reduce_grads only reports a gather that failed. The adapters are a
 * partition of their own (stages 0-2).
 *
 * The functions below are the same at every stage: zt_zero_init picks the stage's table of
 * functions once (z.ops, stage.h; zero12.c for stages 0-2, zero3.c for stage 3) and they call
 * through it.
 *
 * What this rank updates is a list of segments of the flat array, stored one after
 * another in its local arrays: z.master (weights) and z.grad (summed gradients). For
 * stages 0-2 they are views of the flat arrays z.params and z.grads, at stage 3 arrays of
 * their own. With comm == NULL (one process) every call is local.
 *
 * Where the model computes on a device (the CUDA backend), collectives and the optimizer
 * run on host copies unless nothing needs them: with the optimizer state on the device
 * (offload.optimizer = "none") the update runs on the device, on the model's own arrays, in one
 * process or, with device_collectives, on several ranks whose collectives work on the device
 * arrays (z.dcomm; at stage 3 this rank's slices on the device too). Otherwise z.params and
 * z.grads are host copies of the flat arrays ("staged"):
 * gradients come down after the backward pass (at stage 3 unit by unit), collectives and
 * AdamW run on the host, and weights go up after the update (at stage 3 each gathered
 * unit). z.be is the backend whose memory z.master, z.grad and the AdamW state live in.
 *
 *     zt_zero z;
 *     zt_zero_init(&z, comm, &(zt_zero_options){.stage = 3, .prefetch_layers = 1}, &m);
 *     zt_zero_zero_grads(&z);
 *     for each micro-batch: zt_llama_forward_backward(&m, ...);
 *     zt_zero_sum(&z, sums, 2);               // loss and target counts over ranks
 *     zt_zero_reduce_grads(&z);               // then AdamW on every segment of z.master
 *     zt_zero_params_updated(&z);             // every rank can compute with the new weights
 */
#ifndef ZT_ZERO_H
#define ZT_ZERO_H

#include <stddef.h>

#include "lib/comm/comm.h"
#include "lib/comm/comm_device.h"
#include "lib/offload/swap.h"
#include "lib/core/status.h"
#include "lib/model/llama.h"

/* Elements [lo, hi) of the flat array, at z.master[local] and z.grad[local]. */
typedef struct zt_zero_segment {
    size_t lo, hi, local;
} zt_zero_segment;

/* Bytes of model state this rank holds (what ZeRO partitions): fp32 weights (and their
 * bf16 copy), gradients, AdamW's two moments; at stage 3 also the most bytes of
 * gathered units (weights and gradients) held at once, which the others do not need. */
typedef struct zt_zero_memory {
    size_t params, grads, optimizer, gathered_peak;
} zt_zero_memory;

/* Where the fp32 weights live between uses (offload.param): with the model (none), in host
 * memory (cpu) or in a swap file (nvme). The last two run stage 3 even in one process. */
typedef enum zt_param_place { ZT_PARAM_DEVICE, ZT_PARAM_HOST, ZT_PARAM_NVME } zt_param_place;

/* The recipe's [zero] keys. */
typedef struct zt_zero_options {
    int stage, prefetch_layers;
    int checkpointing;       /* the model recomputes each layer in backward (with MLP tiles, more units wait) */
    int quantized_weights;   /* ZeRO++ qwZ: int8 weight gathers */
    int quant_block;         /* elements per quantization block (qwZ and qgZ) */
    int hpz;                 /* ZeRO++ hpZ: backward gathers inside groups of this many ranks (1: off) */
    int quantized_gradients; /* ZeRO++ qgZ: int4 gradients over a two-level all-to-all */
    int error_feedback;      /* qgZ keeps each rank's quantization residual for the next reduction */
    int measure_quant;       /* count what qwZ and qgZ lose (zt_zero_take_quant_error) */
    int host_optimizer;      /* the AdamW state stays in host memory (offload.optimizer cpu or nvme) */
    /* several ranks on devices reduce and gather the model's own arrays (lib/comm/comm_device.h:
     * NCCL, else through host memory), AdamW on the device, at stage 3 without ZeRO++; else staged */
    int device_collectives;
    zt_param_place params_at; /* offload.param */
    /* offload.param = "nvme": this rank's slices of the weights and the summed gradient live in a
     * swap file (offload/swap.h) together with AdamW's moments, streamed unit by unit */
    const char *const *nvme_paths;
    int nvme_npaths;
    const char *swap_kind;        /* names the file (zt_aio_scratch_name): two partitions of one process need two */
    size_t aio_block, swap_chunk; /* bytes per transfer block; per swap chunk of each array */
    int aio_depth;
    /* where the weights come from when the model was opened without them: elements [off, off + n)
     * of the flat array into dst, unit by unit, so the whole model is never in memory */
    zt_status (*load)(void *ctx, size_t off, size_t n, float *dst);
    void *load_ctx;
} zt_zero_options;

typedef struct zt_zero3 zt_zero3;
typedef struct zt_zero_stage_ops zt_zero_stage_ops; /* stage.h */

typedef struct zt_zero {
    zt_comm *comm;         /* NULL: a single process */
    zt_comm_device *dcomm; /* several ranks on devices, not staged: collectives on the device arrays */
    int stage, rank, world;
    zt_llama *m;
    size_t numel, p; /* elements; per slice at stages 1-2 */
    zt_zero_segment *seg;
    int nseg;
    size_t local_numel; /* the segments' elements, together */
    float *master, *grad;
    float *params, *grads; /* the flat arrays collectives use: the model's, or host copies (staged) */
    int staged;
    zt_backend *be;               /* where master, grad and the optimizer state live */
    zt_backend *model_be;         /* the model's (the model may be freed first) */
    uint16_t *params16;           /* the bf16 copy AdamW writes along (one process, not staged), else NULL */
    const zt_zero_stage_ops *ops; /* stages 0-2 (zero12.c) or stage 3 (zero3.c), chosen by zt_zero_init */
    zt_zero3 *z3;                 /* stage 3's state */
    /* offload.param = "nvme": the engine and the file that hold master, grad, m and v (stage 3's
     * slice store opens them, zero3_nvme.c; z.master and z.grad are then NULL), else NULL */
    zt_aio *aio;
    zt_swap *swap;
    zt_zero_options o;
    /* what stage 3 measures, until zt_zero_take_wait_s and zt_zero_take_quant_error: seconds spent
     * waiting for gathers; with measure_quant Σ error², Σ exact² of qwZ's weights, then of qgZ's gradients */
    double wait_s, qerr[4];
    /* One process beside a device at stages 0-2 with the optimizer on the host (offload.optimizer):
     * the gradient comes down in windows on the backend's copy stream, AdamW takes each window as
     * it arrives and its weights go straight back up (zt_zero_window_in/out), so the copies and
     * the host's update overlap; NULL elsewhere */
    struct zt_zero_windows *windows;
} zt_zero;

/* The segments of the flat array that rank of world updates at stage (0-3), stored back to back
 * from local 0: the whole array at stage 0, the slice [r·p, (r+1)·p) at stages 1-2, one such
 * slice of each of the model's units (zt_llama_unit_range) at stage 3. seg has room for
 * zt_zero_nsegments of them (NULL: only count); returns the segments' elements together. */
size_t zt_zero_segments(const zt_llama *m, int stage, int world, int rank, zt_zero_segment *seg, int *nseg);
int zt_zero_nsegments(const zt_llama *m, int stage);
/* The stage that runs with options o over world ranks: o's, or 0 in one process whose weights
 * stay where it computes (nothing to shard). */
int zt_zero_effective_stage(const zt_zero_options *o, int world);
/* Whether collectives and the optimizer run on host copies of the flat arrays (staged, above):
 * for a model that computes outside host memory, with anything offloaded, or with several ranks
 * unless device_collectives lets them work on the device arrays (not with ZeRO++). */
int zt_zero_staged(const zt_zero_options *o, int world, int host_memory);
/* Binds the model (weights loaded): at stage 3 keeps this rank's slices, frees the rest
 * and installs the model's hooks. */
zt_status zt_zero_init(zt_zero *z, zt_comm *comm, const zt_zero_options *o, zt_llama *m);
void zt_zero_free(zt_zero *z);
/* Sums n doubles over the ranks, in place. */
zt_status zt_zero_sum(zt_zero *z, double *v, int n);
/* Before a step's first micro-batch. */
void zt_zero_zero_grads(zt_zero *z);
/* After the step's micro-batches: the gradient summed over all ranks in z.grad, every
 * segment. Also reports a collective that failed inside stage 3's hooks. */
zt_status zt_zero_reduce_grads(zt_zero *z);
/* The optimizer's windows of this rank's local elements: AdamW, before it reads the gradient of
 * [lo, lo + n), calls zt_zero_window_in (which waits for that window's download where the
 * gradient streams: zero.windows), and after it wrote the weights there zt_zero_window_out (which
 * starts their upload). zt_zero_window_size is the elements a window should hold, 0 for one
 * window of everything; elsewhere the calls do nothing. */
size_t zt_zero_window_size(const zt_zero *z);
void zt_zero_window_in(const zt_zero *z, size_t lo, size_t n);
void zt_zero_window_out(const zt_zero *z, size_t lo, size_t n);
/* Σ g² over the whole gradient, the same on every rank. */
zt_status zt_zero_grad_sumsq(zt_zero *z, double *out);
/* After the optimizer updated z.master: the model computes with the new weights (stages
 * 1-2 all-gather them; stage 3 gathers at the next use) and its bf16 copy follows. */
zt_status zt_zero_params_updated(zt_zero *z);
/* The weights of a checkpoint into the model (stages 0-2; nothing at stage 3, which reads its
 * segments with the optimizer state: zt_optstate_restore). */
zt_status zt_zero_read_params(zt_zero *z, const char *ckpt_dir, size_t numel);
/* The swap file that holds this rank's weights and summed gradient and has room for AdamW's
 * moments (offload.param = "nvme"), or NULL: the weights are in memory, at z.master. */
zt_swap *zt_zero_swap(const zt_zero *z);
/* The whole model in m->params on every rank (to save it or generate), a
 * collective; zt_zero_release_all frees it again (also after a failed zt_zero_init, or none).
 * No-ops at the other stages. */
zt_status zt_zero_gather_all(zt_zero *z);
void zt_zero_release_all(zt_zero *z);
zt_zero_memory zt_zero_memory_use(const zt_zero *z);
/* Elements [first, first + n) of the flat array's weights, which this rank must hold (one
 * process at stage 3, or stages 0-2): from memory or the swap file, the whole model never gathered. */
zt_status zt_zero_read_weights(zt_zero *z, float *dst, size_t first, size_t n);
/* The most units stage 3 gathers ahead of the one computing: prefetch_layers, twice as many
 * with a tiled MLP and checkpointing (a layer's last units, prefetched by the layer above,
 * wait through its recompute while the backward pass prefetches inside the layer). */
int zt_zero3_ahead(int prefetch_layers, int mlp_tiles, int checkpointing);
/* Sizes for the memory estimate (lib/plan/memory.c), from the functions that size what stage 3
 * allocates and gathers, for rank 0 of world on model m (shaped and tiled) with options o:
 * the most bytes of weights gathered at once (*grad_bytes: of gradients); hpZ's secondary
 * slices at group size hpz; qgZ's error-feedback residuals; with offload.param = "nvme" the
 * host buffers the swap file stages through (the slices' staging, one more to accumulate
 * into when micro_batches > 1, and the file's chunks; frozen: a model without gradients, LoRA's
 * base, which accumulates nothing and whose file holds its weights alone). */
size_t zt_zero3_gathered_bytes(const zt_llama *m, const zt_zero_options *o, size_t *grad_bytes);
size_t zt_zero_hpz_bytes(const zt_llama *m, int hpz);
size_t zt_zero_qgz_residual_bytes(const zt_llama *m);
size_t zt_zero_nvme_staging_bytes(const zt_llama *m, const zt_zero_options *o, int world, int micro_batches,
                                  int frozen);
/* Seconds spent waiting for gathers (exposed communication) since the last call. */
double zt_zero_take_wait_s(zt_zero *z);
/* With measure_quant, since the last call: the relative error ‖quantized − exact‖ / ‖exact‖ over
 * all ranks of the weights qwZ gathered (out[0]) and of the gradients qgZ reduced (out[1]);
 * -1 where nothing was quantized. A collective: every rank calls it. */
zt_status zt_zero_take_quant_error(zt_zero *z, double out[2]);

#endif
