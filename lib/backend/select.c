/* model.device: which backend computes. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "lib/core/log.h"

zt_status zt_backend_open(const char *device, zt_backend **be)
{
    if (!device || !strcmp(device, "cpu")) {
        const char *test = getenv("ZT_CPU_AS_DEVICE");
        *be = test && !strcmp(test, "1") ? zt_backend_cpu_as_device() : zt_backend_cpu();
        return ZT_OK;
    }
    zt_status st = zt_backend_cuda(be);
    if (!st || strcmp(device, "auto")) return st;
    zt_log_info("model.device = \"auto\": no GPU (%s), computing on the CPU", zt_errmsg());
    *be = zt_backend_cpu();
    return ZT_OK;
}
