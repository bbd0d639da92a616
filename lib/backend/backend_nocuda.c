/* Without CUDA (no nvcc at build time, or NO_CUDA=1) there is no CUDA backend. */
#include "backend.h"

zt_status zt_backend_cuda(zt_backend **be)
{
    *be = NULL;
    return zt_fail(ZT_EUSER, "this zt was built without CUDA (nvcc not found, or NO_CUDA=1): use model.device = \"cpu\"");
}
