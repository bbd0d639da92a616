#include <cblas.h>
#include <omp.h>
#include <stdio.h>

#include "commands.h"
#include "kernels/cpu/gemm_bf16.h"
#include "lib/backend/backend.h"
#include "lib/core/cpu.h"
#include "lib/core/version.h"
#include "options.h"

int cmd_env(int argc, char **argv)
{
    zt_usage u = {"zt env", "", "Print versions, backends, devices and CPU features."};
    zt_option opts[] = {{0}};
    if ((argc = zt_options_parse(argc, argv, opts, &u)) < 0) return argc == -2 ? 0 : 2;
    printf("zt %s (%s)\n", ZT_VERSION, ZT_COMMIT);
    printf("cpu: kernels %s, %d OpenMP threads\n", zt_cpu_level_name(), omp_get_max_threads());
    printf("bf16 gemm: %s\n", zt_gemm_bf16_name());
    printf("openblas: %s, core %s, %d threads\n", openblas_get_config(), openblas_get_corename(),
           openblas_get_num_threads());
    zt_backend *cuda;
    zt_status st = zt_backend_cuda(&cuda);
    printf("backends: cpu%s\n", st ? "" : " cuda");
    printf("cuda: %s\n", st ? zt_errmsg() : cuda->description);
    return 0;
}
