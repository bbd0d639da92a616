#include <math.h>
#include <string.h>

#include "fastmath.h"
#include "gemm_bf16_kernel.h"
#include "levels.h"
#include "ops.h"

/* One row: returns logsumexp - logit[target]; with a gradient, the row becomes
 * (softmax - onehot)·grad_scale. */
ZT_LEVEL_BODY double cross_entropy_row_body(zt_real *l, int target, int V, zt_real grad_scale)
{
    zt_real mx = l[0];
#pragma omp simd reduction(max : mx)
    for (int v = 1; v < V; v++) mx = l[v] > mx ? l[v] : mx;
    zt_real picked = l[target];
    zt_real sum = 0;
    if (grad_scale == 0) {
#pragma omp simd reduction(+ : sum)
        for (int v = 0; v < V; v++) sum += zt_vexp(l[v] - mx);
        return mx + log((double)sum) - picked;
    }
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; v++) {
        l[v] = zt_vexp(l[v] - mx);
        sum += l[v];
    }
    zt_real k = grad_scale / sum;
    for (int v = 0; v < V; v++) l[v] *= k;
    l[target] -= grad_scale;
    return mx + log((double)sum) - picked;
}
ZT_LEVELS(double, cross_entropy_row, (l, target, V, grad_scale), zt_real *l, int target, int V, zt_real grad_scale)

/* The rows; with grad16, each row's gradient also rounded to bf16 into grad16 while the row is
 * still in cache (the conversion's own pass would read it back from memory). */
static void cross_entropy_rows(zt_real *logits, double *loss_rows, const int32_t *targets, int n, int V,
                               zt_real grad_scale, uint16_t *grad16)
{
    cross_entropy_row_fn *row = cross_entropy_row_for_cpu();
#ifndef ZT_REAL_DOUBLE
    void (*to16)(uint16_t *, const float *, size_t) =
        zt_cpu_has(ZT_CPU_AVX2) ? zt_f32_to_bf16_run_avx2 : zt_f32_to_bf16_run_scalar;
#endif
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        zt_real *l = logits + (size_t)i * V;
        if (targets[i] < 0) {
            if (grad_scale != 0) memset(l, 0, V * sizeof(zt_real));
            if (grad16) memset(grad16 + (size_t)i * V, 0, V * sizeof *grad16);
            continue;
        }
        loss_rows[i] += row(l, targets[i], V, grad_scale);
#ifndef ZT_REAL_DOUBLE
        if (grad16) to16(grad16 + (size_t)i * V, l, V);
#endif
    }
}

void zt_cpu_cross_entropy(zt_real *logits, double *loss_rows, const int32_t *targets, int n, int V, zt_real grad_scale)
{
    cross_entropy_rows(logits, loss_rows, targets, n, V, grad_scale, NULL);
}

#ifndef ZT_REAL_DOUBLE
void zt_cpu_cross_entropy_bf16(float *logits, double *loss_rows, const int32_t *targets, int n, int V, float grad_scale,
                               uint16_t *grad16)
{
    cross_entropy_rows(logits, loss_rows, targets, n, V, grad_scale, grad16);
}
#endif

void zt_cpu_scale_rows(zt_real *x, const zt_real *scale, int n, int V)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        zt_real k = scale[i], *row = x + (size_t)i * V;
#pragma omp simd
        for (int v = 0; v < V; v++) row[v] *= k;
    }
}
