/* DoRA's element-wise parts (lib/model/lora.c): the row norms of W + s·B·A, the magnitudes'
 * scaling of the outputs, and the backward pass's magnitude gradient. */
#include <math.h>

#include "ops.h"

void zt_cpu_row_norms(zt_real *norm, const zt_real *x, int rows, int cols)
{
#pragma omp parallel for schedule(static)
    for (int j = 0; j < rows; j++) {
        double sum = 0;
        for (int i = 0; i < cols; i++) sum += (double)x[(size_t)j * cols + i] * x[(size_t)j * cols + i];
        norm[j] = (zt_real)sqrt(sum);
    }
}

void zt_cpu_dora_forward(zt_real *y, int ldy, const zt_real *v, const zt_real *bu, const zt_real *M,
                         const zt_real *norm, int N, int out)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int j = 0; j < out; j++) {
            zt_real g = M[j] / norm[j];
            y[(size_t)n * ldy + j] += (g - 1) * v[(size_t)n * out + j] + g * bu[(size_t)n * out + j];
        }
}

void zt_cpu_dora_backward(zt_real *gM, zt_real *de, zt_real *dv, const zt_real *dy, int ldy, const zt_real *t,
                          const zt_real *M, const zt_real *norm, int N, int out)
{
#pragma omp parallel for schedule(static)
    for (int j = 0; j < out; j++) {
        zt_real sum = 0;
        for (int n = 0; n < N; n++) sum += dy[(size_t)n * ldy + j] * t[(size_t)n * out + j];
        gM[j] += sum / norm[j];
    }
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int j = 0; j < out; j++) {
            zt_real g = M[j] / norm[j], d = dy[(size_t)n * ldy + j];
            de[(size_t)n * out + j] = g * d;
            dv[(size_t)n * out + j] = (g - 1) * d;
        }
}
