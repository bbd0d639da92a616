/* plan/steptime: how long a training step should take on this machine, for zt validate's
 * plan: the forward and backward passes at the rate the machine computes a micro-batch's own
 * matrix products (measured on the spot, a fraction of a second), their offload I/O (weights
 * read, gradients and layer inputs written and read) at the disk's measured speed running
 * beside them, and the optimizer step's I/O, which AdamW's arithmetic hides behind.
 *
 *     zt_step_time t;
 *     if (!zt_step_time_estimate(&mem_estimate, disk_read, disk_write, &t)) printf("%.1f s\n", t.total_s);
 */
#ifndef ZT_PLAN_STEPTIME_H
#define ZT_PLAN_STEPTIME_H

#include "lib/core/status.h"
#include "memory.h"

typedef struct zt_step_time {
    double gflops;                 /* measured: the MLP product of a micro-batch, in the model's compute dtype */
    double qbase_gflops;           /* measured likewise through a quantized base's tiles (0: none) */
    double qbase_experts_gflops;   /* and on a mixture's experts' rows (0: none) */
    double compute_s;              /* forward and backward at that rate */
    double passes_io_s, step_io_s; /* I/O at the disk's speed: beside the passes, in the optimizer step */
    double exposed_s;              /* of the passes' I/O, what their computation does not cover */
    double total_s;                /* max(compute, passes' I/O) + the optimizer step's I/O */
} zt_step_time;

/* disk_read, disk_write: bytes/s (zt_disk_bandwidth). */
zt_status zt_step_time_estimate(const zt_mem_estimate *e, double disk_read, double disk_write, zt_step_time *t);

#endif
