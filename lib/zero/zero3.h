/* zero3: the state of ZeRO stage 3 (zero.h), which zero3.c (gathers, hooks; zt_zero3_ops for
 * zero.c) and zeropp.c (ZeRO++: qwZ, hpZ, qgZ) share. */
#ifndef ZT_ZERO3_H
#define ZT_ZERO3_H

#include "qgz.h"
#include "stage.h"
#include "zero.h"

enum { UNIT_OUT, UNIT_GATHERING, UNIT_IN }; /* where a unit's weights are */

typedef struct zt_unit3 {
    size_t off, n, p;    /* the unit's elements in the flat array; per slice (ceil(n / world)) */
    size_t mine, local;  /* this rank's slice: mine elements at z.master[local] */
    int weights;         /* UNIT_OUT, UNIT_GATHERING, UNIT_IN */
    int grads_in;        /* a live gradient in the model's array */
    int for_backward;    /* prefetched for the backward pass: a recompute's release keeps it */
    zt_comm_req *req[2]; /* the gather in flight: data, and qwZ's scales */
    void *staging;       /* qwZ: the int8 slices and scales being gathered */
    size_t hp, hlocal;   /* hpZ: slices of ceil(n / K) within the group; this rank's at secondary[hlocal] */
    size_t *cuts;        /* qwZ, qgZ: where the unit's tensors start (quantization blocks restart there) */
    int ncuts;
    int held;            /* hpZ: the secondary slice holds this step's weights */
    int fresh;           /* no gradient reduced this step yet */
    /* offload.param = "nvme" (zero3_nvme.c) */
    int buf;             /* the staging buffer its slice is read into, or -1 */
    int reading;         /* a read of its slice in flight */
    zt_aio_req io;
    double sumsq;        /* Σ g² of the gradient slice as last written */
} zt_unit3;

struct zt_zero3 {
    zt_zero_options o;
    zt_unit3 *u;
    int units;
    int pinned;  /* a unit held from its first use to the micro-batch's end (a tied embedding), or -1 */
    int fwd_pos; /* the furthest unit of this forward pass: going back is the tied head's reuse */
    int weightless; /* units below this one (the embedding's) read no weights in the backward pass */
    float *scratch;
    size_t held, held_peak; /* bytes of gathered weights and live gradients */
    zt_status error; /* the first collective that failed; the hooks do no more after it */
    zt_llama_hooks hooks;
    /* hpZ */
    zt_comm *hpz;     /* the K consecutive ranks that serve the backward gathers */
    float *secondary; /* this rank's 1/K slice of each unit, unit after unit */
    size_t secondary_numel;
    /* qgZ */
    zt_qgz qgz;
    float *residual; /* error feedback: each unit's two hops' residuals (2n floats), at twice its offset */
    /* offload.param = "nvme": staging buffers for slices read (prefetch_layers + 2) and for
     * gradients written (2, alternating; a third to add to what a step wrote before) */
    float **stage;
    int nstage, *stage_busy;
    float *gbuf[2], *gold;
    zt_aio_req gio[2];
    int gpending[2], gnext;
    size_t slice_bytes; /* of each buffer */
};

/* zeropp.c */
zt_status zt_zeropp_init(zt_zero *z);
void zt_zeropp_free(zt_zero *z);
/* qwZ: starts the int8 gather of unit i (this rank's slice quantized); finish dequantizes. */
zt_status zt_qwz_start(zt_zero *z, int i, zt_comm_purpose p, const float *slice);
zt_status zt_qwz_finish(zt_zero *z, int i);
/* hpZ: starts unit i's backward gather inside the group when its secondary slice is held (1),
 * else returns 0; keep copies this rank's slice after a forward gather. */
int zt_hpz_start(zt_zero *z, int i, zt_comm_purpose p);
void zt_hpz_keep(zt_zero *z, int i);
/* qgZ: unit i's gradient (this micro-batch) summed over the ranks, this rank's slice into out. */
zt_status zt_qgz_reduce_unit(zt_zero *z, int i, float *out);

/* zero3_nvme.c: offload.param = "nvme" */
/* Opens the swap file and writes this rank's slices of the weights into it, unit by unit. */
zt_status zt_p3_init(zt_zero *z);
void zt_p3_free(zt_zero *z);
/* Starts reading unit i's slice into a staging buffer: the buffer, or NULL (s->error set). */
float *zt_p3_read_start(zt_zero *z, int i);
/* Waits for that read and checks it. */
zt_status zt_p3_read_wait(zt_zero *z, int i);
/* Gives the staging buffer back (waiting for a read still in flight). */
void zt_p3_release(zt_zero *z, int i);
/* Where this micro-batch's reduced slice of unit u goes; then zt_p3_grad_store writes it in
 * the background, with several ranks added to what the step wrote before (on one rank it is
 * already the step's sum: zt_p3_grad_read brought that back before the unit's backward pass). */
float *zt_p3_reduce_target(zt_zero *z, zt_unit3 *u);
zt_status zt_p3_grad_store(zt_zero *z, zt_unit3 *u, float *reduced);
/* Unit u's gradient slice as the step wrote it so far, or NULL (s->error set). */
const float *zt_p3_grad_read(zt_zero *z, zt_unit3 *u);
/* Before the optimizer: every write done, a unit without a gradient this step written as zeros. */
zt_status zt_p3_flush(zt_zero *z);
double zt_p3_sumsq(const zt_zero *z);

#endif
