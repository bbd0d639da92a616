/* offload/actstore: activation offload (offload.activations = cpu | nvme). With activation
 * checkpointing the model keeps only each layer's input between the forward and the backward
 * pass; the store takes those inputs away once a layer's forward is done and brings them back
 * just before the layer's backward recomputes it (reverse order).
 *
 *   cpu   pinned host memory, one slot per layer: for a GPU (on the CPU backend, where host
 *         memory is the compute memory, it is refused as pointless)
 *   nvme  a file under offload.nvme_path (the I/O engine: O_DIRECT, striped), one slot per
 *         layer, through two aligned staging buffers: writes overlap the next layers' forward,
 *         and each layer's input is read back while the layer after it runs its backward
 *
 * The model's copy is discarded (its memory given back) while the layer's input is away.
 *
 *     zt_actstore s;
 *     zt_actstore_options o = {.tier = ZT_OFFLOAD_NVME, .checkpointing = 1, .tokens = B * T, .io = io};
 *     zt_actstore_open(&s, &o, &model, "zt-host-123-rank-00000.acts");
 *     model.act_store = &s.hooks;                // zt_llama_forward_backward calls them
 *     ...; st = zt_actstore_error(&s);           // after each micro-batch
 *     zt_actstore_close(&s);
 */
#ifndef ZT_OFFLOAD_ACTSTORE_H
#define ZT_OFFLOAD_ACTSTORE_H

#include <stdint.h>

#include "lib/model/llama.h"
#include "lib/offload/aio.h"
#include "lib/offload/offload.h"

typedef struct zt_actstore_options {
    zt_offload_tier tier; /* cpu or nvme (offload.activations) */
    int checkpointing;    /* model.activation_checkpointing, which the store needs */
    size_t tokens;        /* positions of a micro-batch: a layer input holds tokens × C values */
    zt_offload_io io;     /* nvme: the file's directories and I/O settings */
} zt_actstore_options;

typedef struct zt_actstore {
    zt_llama_act_hooks hooks;
    zt_backend *be;
    int nvme, layers;
    size_t bytes, slot; /* one layer input; its slot in the file (whole blocks) */
    char *host;         /* cpu: every layer's slot */
    /* nvme: two staging buffers, so that a layer's input is written while the next layer computes
     * and read back while the layer after it in the backward pass computes */
    char *stage[2];
    zt_aio_req req[2];
    int busy[2], staged[2]; /* a transfer in flight; the layer a finished or running read holds (-1: none) */
    zt_aio *aio;
    zt_aio_file file;
    zt_status error; /* the first failure inside the hooks */
} zt_actstore;

/* What the store moves and holds, for the memory estimate: one layer's input (the model gives
 * back the memory of m->L of them), its slot in the file or host memory (whole blocks), and the
 * memory the store allocates (cpu: every layer's slot; nvme: the two staging buffers). */
size_t zt_actstore_input_bytes(const zt_actstore_options *o, const zt_llama *m);
size_t zt_actstore_slot_bytes(const zt_actstore_options *o, const zt_llama *m);
size_t zt_actstore_bytes(const zt_actstore_options *o, const zt_llama *m);
zt_status zt_actstore_open(zt_actstore *s, const zt_actstore_options *o, zt_llama *m, const char *name);
void zt_actstore_close(zt_actstore *s);
/* The first failure since the last call (the hooks cannot return one). */
zt_status zt_actstore_error(zt_actstore *s);
/* Bytes the file read and wrote since the last call, and the seconds spent waiting for them. */
void zt_actstore_take_io(zt_actstore *s, uint64_t *read, uint64_t *written, double *wait_s);

#endif
