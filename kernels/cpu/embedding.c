#include <string.h>

#include "ops.h"
#include "parallel.h"

void zt_cpu_embedding_forward(zt_real *out, const int32_t *ids, const zt_real *table, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) memcpy(out + (size_t)n * C, table + (size_t)ids[n] * C, C * sizeof(zt_real));
}

/* Threads own column ranges and walk all tokens in order: deterministic, no atomics. */
void zt_cpu_embedding_backward(zt_real *dtable, const zt_real *dout, const int32_t *ids, int N, int C)
{
#pragma omp parallel
    {
        long c0, c1;
        zt_thread_range(C, &c0, &c1);
        for (int n = 0; n < N; n++) {
            zt_real *d = dtable + (size_t)ids[n] * C;
            const zt_real *g = dout + (size_t)n * C;
            for (long c = c0; c < c1; c++) d[c] += g[c];
        }
    }
}
