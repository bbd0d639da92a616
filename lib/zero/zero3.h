/* zero3: the state of ZeRO stage 3 (zero.h), which zero3.c (gathers, hooks; zt_zero3_ops for
 * zero.c), zeropp.c (ZeRO++: qwZ, hpZ, qgZ) and the slice stores share.
 *
 * The files call one way only: zero.c → zero3.c → zeropp.c and a slice store (zero3_memory.c
 * or zero3_nvme.c, through zt_slice_store_ops), never back. */
#ifndef ZT_ZERO3_H
#define ZT_ZERO3_H

#include "qgz.h"
#include "stage.h"
#include "zero.h"

enum { UNIT_OUT, UNIT_GATHERING, UNIT_IN }; /* where a unit's weights are */

typedef struct zt_unit3 {
    size_t off, n, p;    /* the unit's elements in the flat array; per slice (ceil(n / world)) */
    size_t mine, local;  /* this rank's slice: mine elements at local in the slice store */
    int weights;         /* UNIT_OUT, UNIT_GATHERING, UNIT_IN */
    int grads_in;        /* a live gradient in the model's array */
    int for_backward;    /* prefetched for the backward pass: a recompute's release keeps it */
    int fresh;           /* no gradient reduced this step yet */
    zt_comm_req *req[2]; /* the gather in flight: data, and qwZ's scales */
    const float *slice;  /* this rank's slice of the weights as the store gave it, from read_start to release */
    uint64_t upload;     /* the fence of the weights' arrival beside the compute (overlap's upload, or the
                            device collectives' gather), 0 when none is in flight */
    struct {             /* qwZ and qgZ: where the unit's tensors start (quantization blocks restart there) */
        size_t *cuts;
        int ncuts;
    } quant;
    struct {
        void *staging; /* the int8 slices and scales being gathered */
    } qwz;
    struct {
        size_t p, local; /* slices of ceil(n / K) within the group; this rank's at hpz.secondary[local] */
        int held;        /* the secondary slice holds this step's weights */
    } hpz;
} zt_unit3;

/* A slice store: where this rank's slices of the fp32 weights and of the step's summed gradient
 * live, a unit's slice at a time. zero3.c asks it for a slice to gather from and hands it each
 * reduced gradient; the store alone knows whether that is memory (zero3_memory.c) or the swap
 * file (zero3_nvme.c). Calls that fail return the reason; the caller keeps it as the stage's error. */
typedef struct zt_slice_store_ops {
    int reads_at_once; /* every unit's slice may be read before any is released (else a few: reads below) */
    /* This rank's slices of the weights in the store, from z.params or the loader (zero.h); at
     * most `reads` slices are read at once. close also cleans up after a failed open. */
    zt_status (*open)(zt_zero *z, int reads);
    void (*close)(zt_zero *z);
    /* Starts reading unit i's slice of the weights; *slice is where it will be. */
    zt_status (*read_start)(zt_zero *z, int i, const float **slice);
    /* Waits for that read and checks it. */
    zt_status (*read_wait)(zt_zero *z, int i);
    /* The slice is no longer needed (waits for a read still in flight). */
    void (*release)(zt_zero *z, int i);
    /* A new step: every gradient slice zero. */
    void (*zero_grads)(zt_zero *z);
    /* Where this micro-batch's reduced gradient slice of unit i goes (mine elements); then
     * grad_write adds it to what the step reduced before (on one rank it is already the step's
     * sum: grad_read brought that back before the unit's backward pass, and it replaces it). */
    zt_status (*grad_target)(zt_zero *z, int i, float **into);
    zt_status (*grad_write)(zt_zero *z, int i, float *reduced);
    /* Unit i's gradient slice as the step left it so far. */
    zt_status (*grad_read)(zt_zero *z, int i, const float **sum);
    /* Before the optimizer: every gradient slice complete in z.grad or the swap file. */
    zt_status (*flush)(zt_zero *z);
    /* Σ g² over this rank's gradient slices. */
    double (*grad_sumsq)(const zt_zero *z);
    /* n weights from this rank's element `at` into host memory dst. */
    zt_status (*get_weights)(zt_zero *z, size_t at, size_t n, float *dst);
    /* What the store keeps out of memory, taken off u, and what it holds besides (staging). */
    void (*memory_use)(const zt_zero *z, zt_zero_memory *u);
} zt_slice_store_ops;

extern const zt_slice_store_ops zt_store_memory, zt_store_nvme;

struct zt_zero3 {
    zt_zero_options o;
    zt_unit3 *u;
    int units;
    int pinned;             /* a unit held from its first use to the micro-batch's end (a tied embedding), or -1 */
    int fwd_pos;            /* the furthest unit of this forward pass: going back is the tied head's reuse */
    int weightless;         /* units below this one (the embedding's) read no weights in the backward pass */
    size_t held, held_peak; /* bytes of gathered weights and live gradients */
    zt_status error;        /* the first collective that failed; the hooks do no more after it */
    /* One process beside a device with its slices in pinned memory (offload.param = "cpu"): a unit's
     * weights go up, and its gradient comes down, on the backend's copy stream while the device
     * computes (a prefetched unit's upload beside the unit before it); the step's last download
     * is waited for in reduce_grads. */
    int overlap;
    zt_llama_hooks hooks;
    struct {
        const zt_slice_store_ops *ops;
        void *state; /* the implementation's own */
    } store;
    struct {
        zt_comm *comm;    /* the K consecutive ranks that serve the backward gathers, or NULL */
        float *secondary; /* this rank's 1/K slice of each unit, unit after unit */
        size_t numel;
    } hpz;
    struct {
        zt_qgz q;        /* q.world is 0 when off */
        float *residual; /* error feedback: each unit's two hops' residuals (2n floats), at twice its offset */
    } qgz;
};

/* The most slices a slice store reads at once (its open's reads). */
int zt_zero3_reads(const zt_llama *m, const zt_zero_options *o);

/* zeropp.c */
zt_status zt_zeropp_init(zt_zero *z);
void zt_zeropp_free(zt_zero *z);
/* qwZ: starts the int8 gather of unit i (this rank's slice quantized); finish dequantizes. */
zt_status zt_qwz_start(zt_zero *z, int i, zt_comm_purpose p, const float *slice);
zt_status zt_qwz_finish(zt_zero *z, int i);
/* hpZ: whether unit i's secondary slice holds this step's weights; start begins its backward
 * gather inside the group from there; keep copies this rank's slice after a forward gather. */
int zt_hpz_holds(const zt_zero *z, int i);
zt_status zt_hpz_start(zt_zero *z, int i, zt_comm_purpose p);
void zt_hpz_keep(zt_zero *z, int i);
/* qgZ: unit i's gradient (this micro-batch) summed over the ranks, this rank's slice into out. */
zt_status zt_qgz_reduce_unit(zt_zero *z, int i, float *out);

#endif
