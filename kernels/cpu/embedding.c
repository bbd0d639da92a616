#include <string.h>

#include "ops.h"
#include "parallel.h"

/* table holds the rows [v0, v0 + nv) of the vocabulary; tokens outside them are left alone
 * (an embedding computed in tiles, each tile's rows in turn). */
void zt_cpu_embedding_forward(zt_real *out, const int32_t *ids, const zt_real *table, int v0, int nv, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        if ((unsigned)(ids[n] - v0) < (unsigned)nv)
            memcpy(out + (size_t)n * C, table + (size_t)(ids[n] - v0) * C, C * sizeof(zt_real));
}

/* Threads own column ranges and walk all tokens in order: deterministic, no atomics. */
void zt_cpu_embedding_backward(zt_real *dtable, const zt_real *dout, const int32_t *ids, int v0, int nv, int N, int C)
{
#pragma omp parallel
    {
        long c0, c1;
        zt_thread_range(C, &c0, &c1);
        for (int n = 0; n < N; n++) {
            if ((unsigned)(ids[n] - v0) >= (unsigned)nv) continue;
            zt_real *d = dtable + (size_t)(ids[n] - v0) * C;
            const zt_real *g = dout + (size_t)n * C;
            for (long c = c0; c < c1; c++) d[c] += g[c];
        }
    }
}
