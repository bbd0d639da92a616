/* The scalar kernel is the reference the SIMD kernels match bit for bit: no FMA
 * contraction here either, whatever -march the file is built with. */
#pragma GCC optimize("fp-contract=off")

#include "lib/optim/adamw_kernels.h"

#include <math.h>

#include "lib/core/cpu.h"
#include "lib/core/dtype.h"
#include "lib/core/status.h"

/* Elements per OpenMP work item: a multiple of every SIMD width, large enough that
 * scheduling costs nothing next to 28 bytes of memory traffic per element. */
#define ADAMW_CHUNK 16384

void zt_adamw_kernel_scalar(const zt_adamw_consts *c, float *param, const float *grad, float *m, float *v, size_t n,
                            uint16_t *param_bf16)
{
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * c->grad_scale;
        float mi = c->beta1 * m[i] + c->one_minus_beta1 * g;
        float vi = c->beta2 * v[i] + c->one_minus_beta2 * g * g;
        float denom = sqrtf(vi) / c->bias2_sqrt + c->eps;
        float p = param[i] * c->decay - c->step_size * (mi / denom);
        m[i] = mi;
        v[i] = vi;
        param[i] = p;
        if (param_bf16) param_bf16[i] = zt_f32_to_bf16(p);
    }
}

void zt_adamw_update_with(zt_adamw_kernel *kernel, const zt_adamw *h, float *param, const float *grad, float *m,
                          float *v, size_t n, float grad_scale, int apply_decay, uint16_t *param_bf16)
{
    zt_adamw_consts c = zt_adamw_consts_of(h, grad_scale, apply_decay);
    size_t chunks = (n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (size_t k = 0; k < chunks; k++) {
        size_t lo = k * ADAMW_CHUNK, len = n - lo < ADAMW_CHUNK ? n - lo : ADAMW_CHUNK;
        kernel(&c, param + lo, grad + lo, m + lo, v + lo, len, param_bf16 ? param_bf16 + lo : NULL);
    }
}

zt_adamw_kernel *zt_adamw_kernel_dispatch(void)
{
    return zt_cpu_has(ZT_CPU_AVX512) ? zt_adamw_kernel_avx512
           : zt_cpu_has(ZT_CPU_AVX2) ? zt_adamw_kernel_avx2
                                     : zt_adamw_kernel_scalar;
}

void zt_adamw_update(const zt_adamw *h, float *param, const float *grad, float *m, float *v, size_t n, float grad_scale,
                     int apply_decay, uint16_t *param_bf16)
{
    zt_adamw_update_with(zt_adamw_kernel_dispatch(), h, param, grad, m, v, n, grad_scale, apply_decay, param_bf16);
}
