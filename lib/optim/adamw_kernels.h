/* optim/adamw_kernels: internal to optim/adamw (and its test): the per-ISA update
 * kernels and the update with a chosen kernel. Every kernel gives bitwise the same
 * result: multiplies and adds without FMA, IEEE sqrt and division, integer bf16 rounding.
 */
#ifndef ZT_OPTIM_ADAMW_KERNELS_H
#define ZT_OPTIM_ADAMW_KERNELS_H

#include "lib/optim/adamw.h"

/* The float constants of one step (see adamw.h for the formula). */
typedef struct zt_adamw_consts {
    float decay; /* 1 - lr*wd, or 1 when decay is off */
    float beta1, one_minus_beta1, beta2, one_minus_beta2;
    float step_size;  /* lr / (1 - beta1^t) */
    float bias2_sqrt; /* sqrt(1 - beta2^t) */
    float eps, grad_scale;
} zt_adamw_consts;

/* The constants of step h with that gradient scale (the CUDA kernel takes them too). */
zt_adamw_consts zt_adamw_consts_of(const zt_adamw *h, float grad_scale, int apply_decay);

typedef void zt_adamw_kernel(const zt_adamw_consts *c, float *param, const float *grad, float *m, float *v, size_t n,
                             uint16_t *param_bf16);

zt_adamw_kernel zt_adamw_kernel_scalar;
zt_adamw_kernel zt_adamw_kernel_avx2;   /* only after zt_cpu_has(ZT_CPU_AVX2) */
zt_adamw_kernel zt_adamw_kernel_avx512; /* only after zt_cpu_has(ZT_CPU_AVX512) */
/* The kernel of this CPU: AVX-512, AVX2 or scalar, capped by ZT_CPU. */
zt_adamw_kernel *zt_adamw_kernel_dispatch(void);

/* zt_adamw_update with the given kernel instead of the dispatched one. */
void zt_adamw_update_with(zt_adamw_kernel *kernel, const zt_adamw *h, float *param, const float *grad, float *m,
                          float *v, size_t n, float grad_scale, int apply_decay, uint16_t *param_bf16);

#endif
