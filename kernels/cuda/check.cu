#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/ops.h"

extern "C" {
#include "lib/core/log.h"
}

/* The trainer sets the communicator's rank for the log; before that (the backend starts
 * first), the launcher's (mpirun, srun). */
static int cuda_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    if (zt_log_rank()) return zt_log_rank();
    for (int i = 0; i < 3; i++)
        if (getenv(vars[i])) return atoi(getenv(vars[i]));
    return 0;
}

void zt_cuda_fail(const char *stmt, const char *file, int line, const char *error, int code)
{
    fprintf(stderr, "zt: rank %d: %s:%d: %s failed: %s (%d)\n", cuda_rank(), file, line, stmt, error, code);
    abort();
}

void zt_cuda_check_at(const char *what, const char *file, int line)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return;
    char stmt[128];
    snprintf(stmt, sizeof stmt, "the launch of %s", what);
    zt_cuda_fail(stmt, file, line, cudaGetErrorString(e), (int)e);
}
