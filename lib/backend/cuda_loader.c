/* The CUDA backend lives in its own shared library, libzt_cuda.so (backend_cuda.c and
 * kernels/cuda), loaded on first use: zt starts without the CUDA libraries (cuBLASLt
 * alone is half a gigabyte) and runs where they are missing. The library is looked for at
 * $ZT_CUDA_LIB, then beside the executable, then in the build directory zt was built in. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"

#ifndef ZT_CUDA_LIB_DIR
#define ZT_CUDA_LIB_DIR "."
#endif

typedef zt_status create_fn(zt_backend **be);

/* dlopen of the first candidate that exists; why none loaded in `why` */
static void *open_library(char *why, size_t len)
{
    char exe[PATH_MAX] = "", beside[PATH_MAX + 32] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(beside, sizeof beside, "%s/libzt_cuda.so", exe);
    }
    const char *env = getenv("ZT_CUDA_LIB"), *candidates[] = {env, beside, ZT_CUDA_LIB_DIR "/libzt_cuda.so"};
    snprintf(why, len, "this zt was built without CUDA (nvcc not found, or NO_CUDA=1): libzt_cuda.so is not found");
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        if (!candidates[i] || !candidates[i][0] || access(candidates[i], R_OK)) continue;
        void *h = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        snprintf(why, len, "cannot load %s", dlerror());
        return NULL;
    }
    return NULL;
}

zt_status zt_backend_cuda(zt_backend **be)
{
    static create_fn *create;
    static char why[1024];
    *be = NULL;
    if (!create && !why[0]) {
        void *h = open_library(why, sizeof why);
        if (h && !(create = (create_fn *)dlsym(h, "zt_backend_cuda_create")))
            snprintf(why, sizeof why, "libzt_cuda.so has no zt_backend_cuda_create: %s", dlerror());
        if (create) why[0] = 0;
    }
    if (!create) return zt_fail(ZT_EUSER, "%s: use model.device = \"cpu\"", why);
    return create(be);
}
