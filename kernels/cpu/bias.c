#include "ops.h"
#include "parallel.h"

void zt_cpu_bias_forward(zt_real *y, const zt_real *b, int N, int M)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++) y[(size_t)n * M + m] += b[m];
}

void zt_cpu_bias_backward(zt_real *db, const zt_real *dy, int N, int M)
{
#pragma omp parallel
    {
        long m0, m1;
        zt_thread_range(M, &m0, &m1);
        for (int n = 0; n < N; n++)
            for (long m = m0; m < m1; m++) db[m] += dy[(size_t)n * M + m];
    }
}
