/* optim/adamw: the AdamW update of fp32 master weights on the CPU.
 *
 * Matches torch.optim.AdamW (amsgrad off, not fused), element by element, with
 * t = h->step (1-based: the number of this update, torch's state['step'] after
 * its increment) and g = grad * grad_scale:
 *
 *     p = p * (1 - lr*wd)                       (decoupled decay, first; only if apply_decay)
 *     m = b1*m + (1-b1)*g
 *     v = b2*v + (1-b2)*g*g
 *     p = p - (lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
 *
 * The step constants are computed in double and rounded to float once, as torch does
 * with its Python-float hyperparameters. When param_bf16 is not NULL it receives the
 * updated parameters rounded to bf16 (nearest even, as zt_f32_to_bf16), the 16-bit
 * compute copy. The SIMD paths (AVX2, AVX-512, chosen at run time, capped by ZT_CPU)
 * give bitwise the same results as the scalar path, and OpenMP splits the work into
 * fixed chunks, so results never depend on the thread count or the CPU.
 *
 *     zt_adamw h = {.lr = zt_schedule_lr(&sched, k), .beta1 = 0.9, .beta2 = 0.95,
 *                   .eps = 1e-8, .weight_decay = 0.1, .step = k};
 *     zt_adamw_update(&h, param, grad, m, v, n, clip_coef / n_tokens, !is_norm, param_bf16);
 */
#ifndef ZT_OPTIM_ADAMW_H
#define ZT_OPTIM_ADAMW_H

#include <stddef.h>
#include <stdint.h>

/* Hyperparameters of one step. Doubles, like torch's Python floats: beta1 = 0.9 as a
 * float would already differ from torch in the 8th digit of 1 - beta1. */
typedef struct zt_adamw {
    double lr, beta1, beta2, eps, weight_decay;
    long step; /* 1-based number of this update */
} zt_adamw;

/* Updates n elements of param, m and v (the moment estimates, zero before step 1) in place.
 * grad is read only; param_bf16 may be NULL. */
void zt_adamw_update(const zt_adamw *h, float *param, const float *grad, float *m, float *v, size_t n, float grad_scale,
                     int apply_decay, uint16_t *param_bf16);

#endif
