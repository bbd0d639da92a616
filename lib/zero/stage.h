/* zero/stage: what a ZeRO stage implements, for zero.c. Stages 0-2 (zero12.c) and stage 3
 * (zero3.c) each fill one table; zt_zero_init picks it once (z.ops) and the public functions of
 * zero.h call through it, so no public function asks which stage runs. */
#ifndef ZT_ZERO_STAGE_H
#define ZT_ZERO_STAGE_H

#include "zero.h"

struct zt_zero_stage_ops {
    int pageable_copies; /* the staged host copies (zero.h) give their pages back unit by unit */
    /* After zero.c set the shared fields (and the host copies, staged): the segments this rank
     * updates, z.master and z.grad. free undoes it, also after a failed init. */
    zt_status (*init)(zt_zero *z);
    void (*free)(zt_zero *z);
    void (*zero_grads)(zt_zero *z);
    zt_status (*reduce_grads)(zt_zero *z);
    zt_status (*grad_sumsq)(zt_zero *z, double *out);
    zt_status (*params_updated)(zt_zero *z);
    zt_status (*gather_all)(zt_zero *z);
    void (*release_all)(zt_zero *z);
    /* n weights of this rank's local arrays from element `at` into host memory dst */
    zt_status (*read_local)(zt_zero *z, size_t at, size_t n, float *dst);
    zt_zero_memory (*memory_use)(const zt_zero *z);
    zt_status (*read_params)(zt_zero *z, const char *ckpt_dir, size_t numel);
    zt_swap *(*swap)(const zt_zero *z); /* zt_zero_swap */
};

extern const zt_zero_stage_ops zt_zero12_ops, zt_zero3_ops;

/* Sums n doubles over the ranks in place (zt_zero_sum), for the stages. */
static inline zt_status zt_zero_allsum(zt_zero *z, double *v, int n)
{
    return z->comm && z->world > 1 ? zt_comm_allreduce_sum_f64(z->comm, v, (size_t)n, ZT_COMM_OTHER) : ZT_OK;
}

#endif
