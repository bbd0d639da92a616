/* The float constants of an AdamW step (adamw_kernels.h); also linked into libzt_cuda.so. */
#include <math.h>

#include "lib/core/status.h"
#include "lib/optim/adamw_kernels.h"

zt_adamw_consts zt_adamw_consts_of(const zt_adamw *h, float grad_scale, int apply_decay)
{
    ZT_ASSERT(h->step >= 1);
    double t = (double)h->step;
    return (zt_adamw_consts){
        .decay = apply_decay ? (float)(1.0 - h->lr * h->weight_decay) : 1.0f,
        .beta1 = (float)h->beta1,
        .one_minus_beta1 = (float)(1.0 - h->beta1),
        .beta2 = (float)h->beta2,
        .one_minus_beta2 = (float)(1.0 - h->beta2),
        .step_size = (float)(h->lr / (1.0 - pow(h->beta1, t))),
        .bias2_sqrt = (float)sqrt(1.0 - pow(h->beta2, t)),
        .eps = (float)h->eps,
        .grad_scale = grad_scale,
    };
}
