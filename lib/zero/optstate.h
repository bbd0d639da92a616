/* zero/optstate: AdamW's state for the elements this rank updates (zero.seg), in memory or
 * (offload.optimizer = "nvme") in a swap file streamed through each step, and its part
 * of checkpoints. train.optim = "adamw_8bit" keeps the moments in 8 bits (optstate8.h), in
 * host memory only. With offload.param = "nvme" the swap file is the ZeRO partition's, which
 * also holds the weights and the gradient: the step streams all four.
 *
 *     zt_optstate o;
 *     zt_optstate_open(&o, ZT_OFFLOAD_NVME, ZT_OPTIM_ADAMW, &io, &zero, "optim");
 *     zt_optstate_step(&o, &model, &hyper, clip_coef);   // AdamW on zero.master
 *     zt_optstate_save(&o, ckpt_dir);                   // this rank's shard
 *     zt_optstate_restore(&o, ckpt_dir, numel);         // moments (and stage 3's weights) back
 *     zt_optstate_close(&o);
 */
#ifndef ZT_ZERO_OPTSTATE_H
#define ZT_ZERO_OPTSTATE_H

#include "lib/offload/offload.h"
#include "lib/offload/swap.h"
#include "lib/optim/adamw.h"
#include "lib/optim/optim.h"
#include "lib/zero/zero.h"

typedef struct zt_optstate {
    const zt_zero *z;
    float *m, *v; /* in memory, or NULL with the swap file */
    zt_aio *aio;
    zt_swap *swap; /* own_swap, or the ZeRO partition's (offload.param = "nvme") */
    zt_swap own_swap;
    struct zt_optstate8 *q8; /* adamw_8bit's moments, else NULL */
} zt_optstate;

/* Bytes of each array per chunk of the swap file, for n elements of narrays arrays (m and v,
 * 2, or also the weights and gradient, 4): three chunks of each are in memory, the buffers
 * io->max_pinned_bytes bounds. */
size_t zt_optstate_chunk_bytes(const zt_offload_io *io, size_t n, int narrays); /* n = 0: any size */
/* The memory zt_optstate_open takes for n elements (offload.param not "nvme"): the moments at
 * tiers none and cpu, the swap file's chunk buffers at nvme. */
size_t zt_optstate_bytes(zt_offload_tier tier, const zt_offload_io *io, size_t n);
/* The same for adamw_8bit, for the tensors of m in the segments seg (zt_zero_segments). */
size_t zt_optstate_bytes_8bit(const zt_llama *m, const zt_zero_segment *seg, int nseg);
/* tier (offload.optimizer): none or cpu keep the moments in memory (on the CPU backend host
 * memory is the compute memory), nvme in a swap file under io's directories. kind names the
 * NVMe swap file (two optimizers of one process need two names). ZT_OPTIM_ADAMW_8BIT needs
 * tier none, the weights not in a swap file and z's arrays in host memory (ZT_EUSER else). */
zt_status zt_optstate_open(zt_optstate *o, zt_offload_tier tier, zt_optim_kind optim, const zt_offload_io *io,
                           const zt_zero *z, const char *kind);
void zt_optstate_close(zt_optstate *o);
/* The bytes of adamw_8bit's moments in memory (zt_zero_memory_use counts 8 an element). */
size_t zt_optstate_memory(const zt_optstate *o);
zt_status zt_optstate_step(zt_optstate *o, const zt_llama *m, const zt_adamw *h, float coef);
zt_status zt_optstate_save(zt_optstate *o, const char *ckpt_dir);
/* The moments of this rank's elements, and at stage 3 its weights, from a checkpoint. */
zt_status zt_optstate_restore(zt_optstate *o, const char *ckpt_dir, size_t numel);
/* Bytes the swap file read and wrote since the last call, and the seconds spent waiting for them. */
void zt_optstate_take_io(zt_optstate *o, uint64_t *read, uint64_t *written, double *wait_s);

#endif
