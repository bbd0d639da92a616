/* GeGLU (Gemma's MLP): h = gelu(gate)·up, torch's gelu(approximate="tanh") or its exact (erf)
 * gelu step by step so that fp32 results round as torch's do; and the elementwise soft-capping,
 * scaling and sum. */
#include <math.h>

#include "bf16_row.h"
#include "ops.h"

static const zt_real gelu_beta = (zt_real)(0.7978845608028654), gelu_kappa = (zt_real)0.044715; /* sqrt(2/π) */
static const zt_real sqrt_half = (zt_real)0.7071067811865476, inv_sqrt_2pi = (zt_real)0.3989422804014327;

/* gelu(x) and gelu'(x): exact, ½x(1 + erf(x/√2)) and ½(1 + erf(x/√2)) + x·φ(x) with φ the normal
 * density; else the tanh form, ½x(1 + t) and ½(1 + t) + ½x·(1 - t²)·β·(1 + 3κx²), t = tanh(β(x + κx³)) */
static inline zt_real gelu(zt_real x, int exact)
{
    if (exact) return (zt_real)0.5 * x * (1 + (zt_real)erf((double)(x * sqrt_half)));
    zt_real inner = gelu_beta * (x + gelu_kappa * (x * x * x));
    return (zt_real)0.5 * x * (1 + (zt_real)tanh((double)inner));
}

static inline zt_real gelu_slope(zt_real x, int exact)
{
    zt_real x2 = x * x;
    if (exact)
        return (zt_real)0.5 * (1 + (zt_real)erf((double)(x * sqrt_half))) +
               x * inv_sqrt_2pi * (zt_real)exp((double)(-(zt_real)0.5 * x2));
    zt_real t = (zt_real)tanh((double)(gelu_beta * (x + gelu_kappa * x2 * x)));
    return (zt_real)0.5 * (1 + t) + (zt_real)0.5 * x * (1 - t * t) * gelu_beta * (1 + 3 * gelu_kappa * x2);
}

void zt_cpu_geglu_forward(zt_real *h, uint16_t *h16, const zt_real *gateup, int N, int F, int exact)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const zt_real *g = gateup + (size_t)n * 2 * F, *u = g + F;
        zt_real *hr = h + (size_t)n * F;
        for (int i = 0; i < F; i++) hr[i] = gelu(g[i], exact) * u[i];
        zt_bf16_row(h16, h, n, F);
    }
}

void zt_cpu_geglu_backward(zt_real *dgateup, uint16_t *dgateup16, const zt_real *dh, const zt_real *gateup, int N,
                           int F, int exact)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const zt_real *g = gateup + (size_t)n * 2 * F, *u = g + F, *d = dh + (size_t)n * F;
        zt_real *dg = dgateup + (size_t)n * 2 * F, *du = dg + F;
        for (int i = 0; i < F; i++) {
            du[i] = d[i] * gelu(g[i], exact);
            dg[i] = d[i] * u[i] * gelu_slope(g[i], exact);
        }
        zt_bf16_row(dgateup16, dgateup, n, 2 * F);
    }
}

void zt_cpu_softcap_forward(zt_real *x, size_t n, double cap)
{
    zt_real c = (zt_real)cap;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = (zt_real)tanh((double)(x[i] / c)) * c;
}

void zt_cpu_softcap_backward(zt_real *dx, const zt_real *y, size_t n, double cap)
{
    zt_real c = (zt_real)cap;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        zt_real t = y[i] / c;
        dx[i] *= 1 - t * t;
    }
}

void zt_cpu_scale(zt_real *x, size_t n, zt_real alpha)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= alpha;
}

void zt_cpu_add(zt_real *y, const zt_real *x, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}
