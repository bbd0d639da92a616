#include "bf16_row.h"
#include "fastmath.h"
#include "levels.h"
#include "ops.h"

ZT_LEVEL_BODY void swiglu_row_body(zt_real *h, const zt_real *g, const zt_real *u, int F)
{
    for (int i = 0; i < F; i++) h[i] = g[i] / (1 + zt_vexp(-g[i])) * u[i];
}
ZT_LEVELS(void, swiglu_row, (h, g, u, F), zt_real *h, const zt_real *g, const zt_real *u, int F)

/* silu(g) = g·s with s = sigmoid(g); silu'(g) = s·(1 + g·(1 - s)) */
ZT_LEVEL_BODY void swiglu_row_backward_body(zt_real *dg, zt_real *du, const zt_real *d, const zt_real *g,
                                            const zt_real *u, int F)
{
    for (int i = 0; i < F; i++) {
        zt_real s = 1 / (1 + zt_vexp(-g[i]));
        du[i] = d[i] * g[i] * s;
        dg[i] = d[i] * u[i] * s * (1 + g[i] * (1 - s));
    }
}
ZT_LEVELS(void, swiglu_row_backward, (dg, du, d, g, u, F), zt_real *dg, zt_real *du, const zt_real *d, const zt_real *g,
          const zt_real *u, int F)

void zt_cpu_swiglu_forward(zt_real *h, uint16_t *h16, const zt_real *gateup, int N, int F)
{
    swiglu_row_fn *row = swiglu_row_for_cpu();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const zt_real *g = gateup + (size_t)n * 2 * F;
        row(h + (size_t)n * F, g, g + F, F);
        zt_bf16_row(h16, h, n, F);
    }
}

void zt_cpu_swiglu_backward(zt_real *dgateup, uint16_t *dgateup16, const zt_real *dh, const zt_real *gateup, int N,
                            int F)
{
    swiglu_row_backward_fn *row_backward = swiglu_row_backward_for_cpu();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const zt_real *g = gateup + (size_t)n * 2 * F;
        zt_real *dg = dgateup + (size_t)n * 2 * F;
        row_backward(dg, dg + F, dh + (size_t)n * F, g, g + F, F);
        zt_bf16_row(dgateup16, dgateup, n, 2 * F);
    }
}
