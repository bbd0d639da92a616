/* optim/clip: global gradient-norm clipping, as torch.nn.utils.clip_grad_norm_.
 *
 *     double ss = zt_sumsq(grad_shard, n);          (then summed over ranks, in rank order)
 *     float norm, coef = zt_clip_coef(ss, max_norm, &norm);
 *     if (!isfinite(norm)) return zt_fail(ZT_ERUNTIME, "gradient norm is %g at step %ld", norm, k);
 *     zt_adamw_update(&h, ..., coef * loss_scale, ...);
 */
#ifndef ZT_OPTIM_CLIP_H
#define ZT_OPTIM_CLIP_H

#include <stddef.h>

/* Sum of squares in double. The order of the additions is fixed (blocks of 4096
 * elements, each summed in a fixed lane order, block sums added in block order),
 * so the result is bitwise the same for any OpenMP thread count. */
double zt_sumsq(const float *x, size_t n);

/* The factor that scales the gradient to norm max_norm: min(1, max_norm / (norm + 1e-6))
 * with norm = sqrt(total_sumsq); 1 when max_norm <= 0 (no clipping). A non-finite norm
 * also gives 1: the caller checks *norm_out and stops. norm_out may be NULL. */
float zt_clip_coef(double total_sumsq, float max_norm, float *norm_out);

#endif
